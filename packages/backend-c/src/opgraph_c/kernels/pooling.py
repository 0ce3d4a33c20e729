"""C kernels for ``opgraph.tensor.signal.pool``: pooling and its gradients.

``Pool``, ``MaxPoolGrad``, ``AveragePoolGrad`` and ``DownsampleFactorMaxGradGrad`` over 2 or
3 axes get a :class:`~opgraph_c.spec.Precompiled` thunk from the installed extension
:mod:`opgraph_c._pooling` (typed float32 and float64 loops, planes shared among OpenMP
threads; nothing generated or compiled) when their float operands share one of those
dtypes; other nodes run ``perform``. The kernels follow ``perform``'s order of operations
exactly; see the extension's docstring. ``MaxPoolRop`` (Theano's first-maximum R-operator,
which ``Pool.R_op`` does not use) runs its NumPy ``perform``: its reason belongs in
``kernels/perform.py``'s ``REASONS``.
"""

from __future__ import annotations

from typing import Any

from opgraph.graph.basic import Apply
from opgraph.graph.op import Op
from opgraph.tensor.signal.pool import (
    AveragePoolGrad,
    DownsampleFactorMaxGradGrad,
    MaxPoolGrad,
    Pool,
)
from opgraph_c.spec import Precompiled

__all__ = ["POOLING_VERSION", "pooling_c", "register"]

#: Bump when the kernels' results change (it is part of the entries' cache keys).
POOLING_VERSION = 1

#: The float dtypes the typed loops are compiled for.
FLOAT_DTYPES = frozenset({"float32", "float64"})

#: The Op classes served, by the name :data:`opgraph_c._pooling.KINDS` knows them by.
OPS: tuple[type[Op], ...] = (Pool, MaxPoolGrad, AveragePoolGrad, DownsampleFactorMaxGradGrad)


def register(registry: Any, owner: str) -> None:
    """Register the pooling kernels (one :func:`pooling_c` entry per Op class)."""
    for op_class in OPS:
        registry.register(op_class, pooling_c, version=POOLING_VERSION, owner=owner)


def _kind(op: Op) -> str | None:
    """The served class ``op`` is (an instance of a subclass only with the same perform)."""
    for op_class in type(op).__mro__:
        if op_class in OPS:
            return op_class.__name__ if type(op).perform is op_class.perform else None
    return None


def pooling_c(op: Op, node: Apply) -> Precompiled | None:
    """The node's :class:`opgraph_c._pooling.PoolingThunk`, or None (perform runs) for other
    dtypes, mixed float dtypes, or more than 3 pooled axes."""
    kind = _kind(op)
    dtype = node.outputs[0].type.dtype
    if kind is None or dtype not in FLOAT_DTYPES or getattr(op, "ndim", 0) not in (2, 3):
        return None
    nfloat = {"Pool": 1, "AveragePoolGrad": 2}.get(kind, 3)
    if any(v.type.dtype != dtype for v in node.inputs[:nfloat]):
        return None
    try:
        from opgraph_c import _pooling
    except ImportError:  # an install built before _pooling existed: perform, with a warning
        return None
    code = _pooling.KINDS[kind]

    def make_thunk(node: Apply, in_cells: list, out_cells: list) -> Any:
        from opgraph_c._threads import team_options

        return _pooling.PoolingThunk(node, in_cells, out_cells, code, **team_options("pool"))

    return Precompiled(f"{op} ({dtype})", make_thunk)
