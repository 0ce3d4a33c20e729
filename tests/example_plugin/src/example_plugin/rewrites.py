"""The plugin's rewrite, declared on a RewriteSet and installed by the plugin hook."""

from __future__ import annotations

from typing import Any

from example_plugin.ops import Cube, cube
from opgraph.rewriting import RewriteSet, node_rewriter
from opgraph.tensor.elemwise import Elemwise
from opgraph.tensor.math import neg

rewrites = RewriteSet()


@rewrites.canonicalize
@node_rewriter([Cube])
def local_cube_of_neg(fgraph: Any, node: Any) -> list[Any] | None:
    """``cube(-x) -> -cube(x)``: moves negations outward, where they cancel."""
    (x,) = node.inputs
    owner = x.owner
    if owner is None or not isinstance(owner.op, Elemwise) or owner.op != neg.op:
        return None
    return [neg(cube(owner.inputs[0]))]
