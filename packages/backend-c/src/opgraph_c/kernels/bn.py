"""C kernels for ``opgraph.tensor.nnet.bn`` (batch normalization).

The three batch-normalization Ops get a :class:`~opgraph_c.spec.Precompiled` thunk from the
installed extension :mod:`opgraph_c._bn` (float32 and float64; nothing is generated) when
the axes they do *not* normalize are one block of adjacent axes: per-activation on any rank,
spatial on NCHW or (N, F), ``(0, 1)`` on NCHW, ... Other axes patterns (a kept axis on each
side of a normalized one, such as ``axes=(1,)`` on NCHW) and float16 return None: the node
runs ``perform``, with the registry's fallback warning. The thunks' threads follow the
``bn`` rules of the thread policy (:data:`opgraph_c._threads.POLICY`).
"""

from __future__ import annotations

from typing import Any

from opgraph.graph.basic import Apply
from opgraph.graph.op import Op
from opgraph.tensor.nnet.bn import (
    AbstractBatchNormInference,
    AbstractBatchNormTrain,
    AbstractBatchNormTrainGrad,
)
from opgraph_c.spec import Precompiled

__all__ = ["BN_VERSION", "bn_c", "kept_block", "register"]

#: Bump when the kernels' results change (it is part of the entries' cache keys).
BN_VERSION = 1

#: The float dtypes the typed loops are compiled for.
FLOAT_DTYPES = frozenset({"float32", "float64"})

#: Op class -> name of its thunk class in opgraph_c._bn.
THUNKS: dict[type[Op], str] = {
    AbstractBatchNormTrain: "BatchNormTrainThunk",
    AbstractBatchNormInference: "BatchNormInferenceThunk",
    AbstractBatchNormTrainGrad: "BatchNormTrainGradThunk",
}


def register(registry: Any, owner: str) -> None:
    """Register the batch-normalization kernels (one entry per Op class, all :func:`bn_c`)."""
    for op_class in THUNKS:
        registry.register(op_class, bn_c, version=BN_VERSION, owner=owner)


def kept_block(axes: tuple[int, ...], ndim: int) -> tuple[int, int] | None:
    """``(first, stop)`` when the axes not in ``axes`` are the block ``first .. stop - 1``
    (``(0, 0)`` when every axis is normalized: one channel), else None."""
    kept = [a for a in range(ndim) if a not in axes]
    if not kept:
        return (0, 0)
    if kept != list(range(kept[0], kept[-1] + 1)):
        return None
    return (kept[0], kept[-1] + 1)


def bn_c(op: Op, node: Apply) -> Precompiled | None:
    """The precompiled thunk of a batch-normalization node, or None (perform runs) for
    float16 and for axes whose complement is not one block of adjacent axes."""
    class_name = _entry(op)
    if class_name is None:
        return None
    dtypes = {v.type.dtype for v in node.inputs if v.type.ndim > 0}
    if dtypes - FLOAT_DTYPES or node.outputs[0].type.dtype not in FLOAT_DTYPES:
        return None
    block = kept_block(op.axes, node.inputs[0].type.ndim)  # type: ignore[attr-defined]
    if block is None:
        return None
    try:
        from opgraph_c import _bn
        from opgraph_c._threads import team_options
    except ImportError:  # an install built before _bn existed: perform runs, with a warning
        return None
    factory = getattr(_bn, class_name)
    first, stop = block
    options = team_options("bn")

    def make_thunk(node: Apply, in_cells: list, out_cells: list) -> Any:
        return factory(node, in_cells, out_cells, first, stop, **options)

    return Precompiled(f"{op} ({node.outputs[0].type.dtype})", make_thunk)


def _entry(op: Op) -> str | None:
    for op_class in type(op).__mro__:
        if op_class in THUNKS:
            if type(op).perform is not op_class.perform:
                return None
            return THUNKS[op_class]
    return None
