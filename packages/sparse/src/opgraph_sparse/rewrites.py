"""Every rewrite of the package, on one RewriteSet: what the plugin's hook installs.

The rewrites live in the ``opt_*`` modules, each decorating its functions onto
:data:`opgraph_sparse.rewriteset.rewrites`; :func:`load_rewrites` imports them all.
"""

from __future__ import annotations

import importlib
import pkgutil

import opgraph_sparse
from opgraph.rewriting import RewriteSet
from opgraph_sparse.rewriteset import rewrites

__all__ = ["load_rewrites"]


def load_rewrites() -> RewriteSet:
    """The package's RewriteSet, with every ``opgraph_sparse.opt_*`` module's rewrites."""
    for info in sorted(pkgutil.iter_modules(opgraph_sparse.__path__), key=lambda m: m.name):
        if info.name.startswith("opt_"):
            importlib.import_module(f"opgraph_sparse.{info.name}")
    return rewrites
