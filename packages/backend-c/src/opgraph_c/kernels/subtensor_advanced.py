"""Precompiled thunks for integer-array indexing: the gather and the scatter-adds.

Each entry returns an :class:`~opgraph_c.spec.Precompiled` thunk from
:mod:`opgraph_c._advanced` (nothing generated or compiled), which the VM calls with no Python
frame. The thunks match the ops' ``perform`` exactly: the same values (repeated indices
accumulate one add at a time in index order, as ``np.add.at``; the last wins a set), dtypes,
copies and in-place updates; anything unusual and every error run ``perform`` itself. (Where
NumPy 2.4's ``np.add.at``/``np.unravel_index`` give wrong sums, the thunk keeps
``np.add.at``'s documented meaning: see ``tests/test_c_advanced.py``.)

- ``AdvancedSubtensor1``: ``x.take(ilist, axis=0)``, rows copied in C;
- ``AdvancedIncSubtensor1``: ``x[ilist] += y`` / ``= y``, rows added or set in C;
- ``AdvancedIncSubtensor``, an increment through integer arrays only:
  ``np.add.at(x, (i0, i1, ...), y)`` in C. Its set (one NumPy assignment) returns PERFORM;
  an increment through slices or None returns None (no C yet: perform, with the warning).

``AdvancedSubtensor``, ``AdvancedBooleanSubtensor`` and ``AdvancedBooleanIncSubtensor`` have
no entry here: their ``perform`` is one NumPy indexing call (``kernels/perform.py`` says so).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply
from opgraph.tensor.subtensor_advanced import (
    AdvancedIncSubtensor,
    AdvancedIncSubtensor1,
    AdvancedSubtensor1,
)
from opgraph.tensor.type import TensorType
from opgraph_c.spec import PERFORM, Precompiled

__all__ = ["ADVANCED_VERSION", "register"]

#: Bump when a thunk's behaviour changes.
ADVANCED_VERSION = 1
#: Most dimensions the thunks handle (NumPy's limit, ``_advanced.MAXDIMS``).
MAX_DIMS = 64
#: Data dtypes the thunks copy (bytes as they are): every dtype without Python objects.
COPY_DTYPES = frozenset(
    ["bool", "float16", "float32", "float64", "complex64", "complex128"]
    + [f"{kind}int{bits}" for kind in ("", "u") for bits in (8, 16, 32, 64)]
)


def register(registry: Any, owner: str) -> None:
    """Register the integer-array indexing ops' precompiled thunks."""
    for op_class, impl in _ENTRIES.items():
        registry.register(op_class, impl, version=ADVANCED_VERSION, owner=owner)


def _tensors(node: Apply) -> bool:
    """Every input and output is a tensor of at most MAX_DIMS dimensions."""
    return all(
        isinstance(v.type, TensorType) and v.type.ndim <= MAX_DIMS
        for v in (*node.inputs, *node.outputs)
    )


def _integer_indices(node: Apply) -> bool:
    """Inputs 2.. are all integer tensors (no slice, no None, no mask)."""
    return all(
        isinstance(v.type, TensorType) and np.dtype(v.type.dtype).kind in "iu"
        for v in node.inputs[2:]
    )


def advanced_subtensor1_c(op: AdvancedSubtensor1, node: Apply) -> Precompiled | object:
    """``x[ilist]`` on axis 0: a new C-ordered array of ``x``'s rows, copied in C."""
    if not _tensors(node) or node.inputs[0].type.dtype not in COPY_DTYPES:
        return PERFORM
    dtype = node.inputs[0].type.dtype

    def make_thunk(node: Apply, in_cells: list[list[Any]], out_cells: list[list[Any]]) -> Any:
        from opgraph_c import _advanced

        return _advanced.GatherThunk(node, in_cells, out_cells)

    return Precompiled(f"AdvancedSubtensor1 {dtype}", make_thunk)


def _scatter(op: Any, node: Apply) -> Precompiled | None:
    """The ``ScatterThunk`` of an increment or set through integer arrays, or None when the
    C loops cannot give ``perform``'s values (an increment in float16, or one that NumPy
    computes in a wider dtype than ``x``'s, e.g. a float32 ``x`` plus a float64 ``y``)."""
    from opgraph_c._advanced import INC_OPS

    x_dtype, y_dtype = node.inputs[0].type.dtype, node.inputs[1].type.dtype
    if x_dtype not in COPY_DTYPES or y_dtype not in COPY_DTYPES:
        return None
    cast_y = x_dtype != y_dtype
    if op.set_instead_of_inc:
        elem_op, components = 0, 1
    else:
        if x_dtype not in INC_OPS or np.result_type(x_dtype, y_dtype) != np.dtype(x_dtype):
            return None
        elem_op, components = INC_OPS[x_dtype]
    y_bcast = tuple(node.inputs[1].type.broadcastable)

    def make_thunk(node: Apply, in_cells: list[list[Any]], out_cells: list[list[Any]]) -> Any:
        from opgraph_c import _advanced

        return _advanced.ScatterThunk(
            node,
            in_cells,
            out_cells,
            op.inplace,
            op.set_instead_of_inc,
            y_bcast,
            elem_op,
            components,
            cast_y,
        )

    return Precompiled(f"{op} {x_dtype}", make_thunk)


def advanced_inc_subtensor1_c(op: AdvancedIncSubtensor1, node: Apply) -> Precompiled | None:
    """``x[ilist] += y`` (in index order, as ``np.add.at``) or ``x[ilist] = y``, in C."""
    if not _tensors(node):
        return None
    return _scatter(op, node)


def advanced_inc_subtensor_c(op: AdvancedIncSubtensor, node: Apply) -> Precompiled | object:
    """``np.add.at(x, (i0, i1, ...), y)`` in C when every index is an integer array.

    A set (``x[idx] = y``) runs perform on purpose: it is one NumPy assignment, no
    ``np.add.at``. An increment through slices or None has no C code yet (None: perform,
    with the fallback warning).
    """
    if op.set_instead_of_inc:
        return PERFORM
    n_index = len(node.inputs) - 2
    if not _tensors(node) or not _integer_indices(node) or n_index < 1:
        return None
    return _scatter(op, node)


_ENTRIES: dict[type, Callable[[Any, Apply], Any]] = {
    AdvancedSubtensor1: advanced_subtensor1_c,
    AdvancedIncSubtensor1: advanced_inc_subtensor1_c,
    AdvancedIncSubtensor: advanced_inc_subtensor_c,
}
