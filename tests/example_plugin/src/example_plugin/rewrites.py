"""The plugin's rewrite, declared on a RewriteSet and installed by the plugin hook."""

from __future__ import annotations

from typing import Any

from example_plugin.ops import Cube
from opgraph.rewriting import RewriteSet, node_rewriter

rewrites = RewriteSet("opgraph-example-plugin")


@rewrites.canonicalize
@node_rewriter([Cube])
def local_cube_of_cube(fgraph: Any, node: Any) -> list[Any] | None:
    """``cube(cube(x)) -> x ** 9``: one power instead of two cubes (specialize then expands it)."""
    (inner,) = node.inputs
    if inner.owner is None or not isinstance(inner.owner.op, Cube):
        return None
    (x,) = inner.owner.inputs
    return [x**9]
