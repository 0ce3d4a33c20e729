"""The package's RewriteSet, which every ``opt_*`` module decorates its rewrites onto.

Nothing is registered until the plugin's hook calls ``install`` (see :mod:`.rewrites`). Every
rewrite carries the tag ``sparse``: ``Mode.excluding("sparse")`` leaves them all out.
"""

from __future__ import annotations

from opgraph.rewriting import RewriteSet

__all__ = ["rewrites"]

rewrites = RewriteSet("opgraph-sparse")
