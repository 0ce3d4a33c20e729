"""Shape operations: chained Reshapes and Allocs, useless Allocs, ``fill`` -> ``Alloc``.

A Reshape of a Reshape needs only the last one, and so does an Alloc of an Alloc; an Alloc
of a value that already has the result's type is that value. ``fill(x, v)`` becomes
``Alloc(v, *x.shape)`` in specialize, so the graph no longer needs ``x``'s values, only its
shape (which the shape feature often knows without computing ``x``). Reshapes and
SpecifyShapes to a known shape are removed with the shape feature's knowledge, by
``local_remove_known_reshape`` and ``local_remove_known_specify_shape``
(``opgraph_optimizers.shape_feature``). Indexing a MakeVector with constants picks its inputs
(``local_subtensor_make_vector``): the shape arguments that the convolution gradients slice
out of ``x.shape`` become the ``Shape_i`` nodes themselves.
"""

from __future__ import annotations

from typing import Any

import opgraph.scalar.basic as ps
import opgraph.tensor.math as tm
from opgraph.graph.basic import Apply, Variable
from opgraph.rewriting import node_rewriter, pattern_rewriter
from opgraph.rewriting.pattern import exact_type
from opgraph.tensor.shape import MakeVector, Reshape, shape_i
from opgraph.tensor.structure import Alloc, alloc
from opgraph.tensor.subtensor_basic import Subtensor, get_idx_list
from opgraph_optimizers.canonicalize.utils import elemwise_inputs, has_one_client
from opgraph_optimizers.registry import rewrites

__all__ = [
    "local_alloc_alloc",
    "local_fill_to_alloc",
    "local_reshape_reshape",
    "local_subtensor_make_vector",
    "local_useless_alloc",
]


@rewrites.canonicalize
@node_rewriter([Reshape])
def local_reshape_reshape(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``reshape(reshape(x, s1), s2) -> reshape(x, s2)``."""
    inner, shp = node.inputs
    if inner.owner is None or not isinstance(inner.owner.op, Reshape):
        return None
    if not has_one_client(inner):
        return None
    new = node.op(inner.owner.inputs[0], shp)
    return [new] if new.type == node.outputs[0].type else None


@rewrites.specialize
@node_rewriter([tm.second])
def local_fill_to_alloc(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``fill(x, v) -> alloc(v, *x.shape)`` (where ``v`` is broadcast, its own lengths)."""
    ins = elemwise_inputs(node, ps.Second)
    if ins is None:
        return None
    x, v = ins
    out = node.outputs[0]
    if v.type == out.type or v.type.ndim != out.type.ndim:
        return None
    dims: list[Any] = []
    for i, b in enumerate(out.type.broadcastable):
        if b:
            dims.append(1)
        elif not x.type.broadcastable[i]:
            dims.append(shape_i(x, i, fgraph))
        else:
            dims.append(shape_i(v, i, fgraph))
    new = alloc(v, *dims)
    return [new] if new.type == out.type else None


# ``alloc(v, *shape) -> v`` only where ``v`` already has the result's type (and so its shape).
local_useless_alloc = pattern_rewriter(
    "local_useless_alloc", (Alloc, "v", "*shape"), "v", retype=exact_type
)
rewrites.specialize("shape_unsafe")(local_useless_alloc)
rewrites.canonicalize("shape_unsafe")(local_useless_alloc)

local_alloc_alloc = pattern_rewriter(
    "local_alloc_alloc",
    (Alloc, (Alloc, "v", "*s1"), "*s2"),
    (alloc, "v", "*s2"),
    retype=exact_type,
)
rewrites.specialize("shape_unsafe")(local_alloc_alloc)
rewrites.canonicalize("shape_unsafe")(local_alloc_alloc)


def _constant_index(entry: Any) -> int | None:
    """The Python int behind an index entry (an int or a constant scalar), else None."""
    if entry is None or isinstance(entry, int):
        return entry
    data = getattr(entry, "data", None)
    if data is None:
        return None
    return int(data)


@rewrites.canonicalize
@rewrites.specialize
@node_rewriter([Subtensor])
def local_subtensor_make_vector(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``MakeVector(a, b, c)[1] -> b``; ``MakeVector(a, b, c)[1:] -> MakeVector(b, c)``.

    Only constant indices and slice bounds; the picked inputs already have the vector's
    dtype (MakeVector converts them), so the result's type is the Subtensor's.
    """
    vec = node.inputs[0]
    if vec.owner is None or not isinstance(vec.owner.op, MakeVector):
        return None
    (entry,) = get_idx_list(node.inputs, node.op.idx_list)
    items = vec.owner.inputs
    if isinstance(entry, slice):
        bounds = [_constant_index(b) for b in (entry.start, entry.stop, entry.step)]
        if any(
            b is None and v is not None
            for b, v in zip(bounds, (entry.start, entry.stop, entry.step), strict=True)
        ):
            return None
        return [vec.owner.op(*items[slice(*bounds)])]
    index = _constant_index(entry)
    if index is None or not -len(items) <= index < len(items):
        return None
    picked = items[index]
    return [picked] if picked.type == node.outputs[0].type else None
