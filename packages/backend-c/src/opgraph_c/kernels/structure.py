"""Precompiled thunks for the small structural ops of every training graph.

Each entry returns an :class:`~opgraph_c.spec.Precompiled` thunk from
:mod:`opgraph_c._structure` (nothing generated or compiled), which the VM calls with no
Python frame, or :data:`~opgraph_c.spec.PERFORM` for a node it does not cover (a non-tensor
input, a dtype without a C loop). The thunks match the ops' ``perform`` exactly (values,
views, in-place updates, errors: anything unusual runs ``perform`` itself).

=====================================  ==========================================
op (core module)                       thunk
=====================================  ==========================================
ViewOp, DeepCopyOp (compile.ops)       the input itself / a C-ordered copy
Shape, Shape_i, MakeVector (shape)     a new int64 array / vector
SpecifyShape (shape)                   the input, shape checked
Reshape (shape)                        NumPy's reshape, a view when possible
DimShuffle (elemwise)                  a view; a C-contiguous copy if not inplace
Rebroadcast (basic)                    the input, broadcastable dims checked
Subtensor (subtensor)                  a view, basic indices decoded once
IncSubtensor (subtensor_inc)           set/inc on the input (inplace) or a copy
Alloc, AllocEmpty (structure)          a new array (zeros for a 0 value, AllocEmpty)
ScalarFromTensor, TensorFromScalar     NumPy scalar <-> 0-d array
MaxAndArgmax, Argmax (reduction)       max and first argmax in C (float, int dtypes)
=====================================  ==========================================
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from opgraph.compile.ops import DeepCopyOp, ViewOp
from opgraph.graph.basic import Apply, Constant
from opgraph.scalar.type import ScalarType
from opgraph.tensor.basic import Rebroadcast, ScalarFromTensor, TensorFromScalar
from opgraph.tensor.elemwise import DimShuffle
from opgraph.tensor.reduction import Argmax, MaxAndArgmax
from opgraph.tensor.shape import MakeVector, Reshape, Shape, Shape_i, SpecifyShape
from opgraph.tensor.structure import Alloc, AllocEmpty
from opgraph.tensor.subtensor import Subtensor
from opgraph.tensor.subtensor_basic import IncSubtensor
from opgraph.tensor.type import TensorType
from opgraph_c.spec import PERFORM, Precompiled

__all__ = ["STRUCTURE_VERSION", "index_entries", "register"]

#: Bump when a thunk's behaviour changes.
STRUCTURE_VERSION = 1
#: Most dimensions the thunks handle (NumPy's limit, ``_structure.MAXDIMS``).
MAX_DIMS = 64
#: dtypes MaxAndArgmax/Argmax reduce in C; others run perform (NumPy's own argmax).
ARGMAX_DTYPES = frozenset(
    ["float32", "float64"] + [f"{kind}int{bits}" for kind in ("", "u") for bits in (8, 16, 32, 64)]
)

_INT64 = (-(2**63), 2**63 - 1)


def register(registry: Any, owner: str) -> None:
    """Register the structural ops' precompiled thunks."""
    for op_class, impl in _ENTRIES.items():
        registry.register(op_class, impl, version=STRUCTURE_VERSION, owner=owner)


def _thunk(name: str, cls: str, *args: Any, index_from: int | None = None) -> Precompiled:
    """``Precompiled`` building ``_structure.<cls>(node, in_cells, out_cells, *args)``.

    With ``index_from``, the node's decoded index (an ``IndexProgram`` whose values are
    read from input ``index_from`` on) is passed before ``args``.
    """

    def make_thunk(node: Apply, in_cells: list[list[Any]], out_cells: list[list[Any]]) -> Any:
        from opgraph_c import _structure

        if index_from is not None:
            entries = index_entries(node, index_from)
            index = _structure.IndexProgram(node.inputs[0].type.ndim, entries)
            return getattr(_structure, cls)(node, in_cells, out_cells, index, *args)
        return getattr(_structure, cls)(node, in_cells, out_cells, *args)

    return Precompiled(name, make_thunk)


def _tensors(node: Apply) -> bool:
    """Every input and output is a tensor of at most MAX_DIMS dimensions."""
    return all(
        isinstance(v.type, TensorType) and v.type.ndim <= MAX_DIMS
        for v in (*node.inputs, *node.outputs)
    )


def _scalar_or_tensor(node: Apply) -> bool:
    """Every input and output is a scalar or a tensor of at most MAX_DIMS dimensions."""
    return all(
        isinstance(v.type, ScalarType)
        or (isinstance(v.type, TensorType) and v.type.ndim <= MAX_DIMS)
        for v in (*node.inputs, *node.outputs)
    )


# ----------------------------------------------------------------------------------------
# identity and copy


def view_c(op: ViewOp, node: Apply) -> Precompiled:
    """The input itself, whatever its type."""
    return _thunk("ViewOp", "ViewThunk")


def deep_copy_c(op: DeepCopyOp, node: Apply) -> Precompiled:
    """A copy of an ndarray input (other values: perform's ``copy.deepcopy``)."""
    return _thunk("DeepCopyOp", "DeepCopyThunk")


# ----------------------------------------------------------------------------------------
# shapes and views


def shape_c(op: Shape, node: Apply) -> Precompiled | object:
    """``x.shape`` as an int64 vector (a non-tensor input runs perform)."""
    return _thunk("Shape", "ShapeThunk") if _tensors(node) else PERFORM


def shape_i_c(op: Shape_i, node: Apply) -> Precompiled | object:
    """``x.shape[i]`` as a 0-d int64 array."""
    return _thunk(str(op), "ShapeIThunk", op.i) if _tensors(node) else PERFORM


def make_vector_c(op: MakeVector, node: Apply) -> Precompiled | object:
    """The 0-d inputs copied into a vector of the op's dtype."""
    if not _tensors(node) or np.dtype(op.dtype).kind not in "biufc":
        return PERFORM
    return _thunk(f"MakeVector {op.dtype}", "MakeVectorThunk", op.dtype)


def specify_shape_c(op: SpecifyShape, node: Apply) -> Precompiled | object:
    """The input itself, its shape checked against the shape input."""
    return _thunk("SpecifyShape", "SpecifyShapeThunk") if _tensors(node) else PERFORM


def reshape_c(op: Reshape, node: Apply) -> Precompiled | object:
    """NumPy's reshape of the input (a view when possible)."""
    return _thunk(str(op), "ReshapeThunk", op.ndim) if _tensors(node) else PERFORM


def rebroadcast_c(op: Rebroadcast, node: Apply) -> Precompiled | object:
    """The input itself, the dimensions it makes broadcastable checked to be 1."""
    if not _tensors(node):
        return PERFORM
    checks = [a for a, b in op.axis if b]
    return _thunk(str(op), "RebroadcastThunk", node.inputs[0].type.ndim, checks)


def dimshuffle_c(op: DimShuffle, node: Apply) -> Precompiled | object:
    """A view with dimensions reordered, added and dropped (a copy when not inplace)."""
    if not _tensors(node):
        return PERFORM
    return _thunk(
        str(op),
        "DimShuffleThunk",
        len(op.input_broadcastable),
        op.new_order,
        op.drop,
        op.inplace,
    )


def scalar_from_tensor_c(op: ScalarFromTensor, node: Apply) -> Precompiled | object:
    """The NumPy scalar of a 0-d array."""
    if not _scalar_or_tensor(node):
        return PERFORM
    return _thunk("ScalarFromTensor", "ScalarFromTensorThunk")


def tensor_from_scalar_c(op: TensorFromScalar, node: Apply) -> Precompiled | object:
    """A 0-d array holding a NumPy scalar."""
    if not _scalar_or_tensor(node):
        return PERFORM
    dtype = node.outputs[0].type.dtype
    return _thunk(f"TensorFromScalar {dtype}", "TensorFromScalarThunk", dtype)


# ----------------------------------------------------------------------------------------
# indexing


def index_entries(node: Apply, first_input: int) -> list[tuple[bool, list]] | None:
    """``node.op.idx_list`` decoded for ``_structure.IndexProgram``, or None if it does not fit.

    Each entry is ``(is_slice, parts)``; a part is ``(0, 0)`` for None, ``(1, value)`` for a
    constant (in the op, or a constant input) and ``(2, k)`` for the value of node input
    ``k`` (the op's ScalarType placeholders take the inputs from ``first_input`` on).
    """
    next_input = first_input
    entries: list[tuple[bool, list]] = []

    def part(p: Any) -> tuple[int, int] | None:
        nonlocal next_input
        if p is None:
            return (0, 0)
        if isinstance(p, ScalarType):
            k, next_input = next_input, next_input + 1
            if k >= len(node.inputs):
                return None
            value = node.inputs[k]
            if not isinstance(value, Constant):
                return (2, k)
            p = np.asarray(value.data)
            if p.ndim != 0 or p.dtype.kind not in "iu":
                return (2, k)
            p = p.item()
        if isinstance(p, int | np.integer) and _INT64[0] <= int(p) <= _INT64[1]:
            return (1, int(p))
        return None

    for entry in node.op.idx_list:
        bounds = [entry.start, entry.stop, entry.step] if isinstance(entry, slice) else [entry]
        parts = [part(p) for p in bounds]
        if any(p is None for p in parts):
            return None
        entries.append((isinstance(entry, slice), parts))
    return entries


def subtensor_c(op: Subtensor, node: Apply) -> Precompiled | object:
    """The view ``x[idx]``: the index structure decoded once, the values read per call."""
    if index_entries(node, 1) is None or not _scalar_or_tensor(node):
        return PERFORM
    return _thunk(str(op), "SubtensorThunk", index_from=1)


def inc_subtensor_c(op: IncSubtensor, node: Apply) -> Precompiled | object:
    """``x[idx] += y`` / ``x[idx] = y`` on ``x`` (inplace) or on a copy of it."""
    if index_entries(node, 2) is None or not _scalar_or_tensor(node):
        return PERFORM
    return _thunk(
        str(op),
        "IncSubtensorThunk",
        op.inplace,
        op.set_instead_of_inc,
        node.inputs[1].type.broadcastable,
        index_from=2,
    )


# ----------------------------------------------------------------------------------------
# allocation and argmax


def alloc_c(op: Alloc, node: Apply) -> Precompiled | object:
    """A new array of the given shape filled with the value."""
    if not _tensors(node):
        return PERFORM
    dtype = node.outputs[0].type.dtype
    bcast = node.inputs[0].type.broadcastable
    return _thunk(f"Alloc {dtype}", "AllocThunk", dtype, bcast)


def alloc_empty_c(op: AllocEmpty, node: Apply) -> Precompiled | object:
    """A new array of zeros of the given shape (as perform returns)."""
    if not _tensors(node):
        return PERFORM
    return _thunk(f"AllocEmpty {op.dtype}", "AllocEmptyThunk", op.dtype)


def max_and_argmax_c(op: MaxAndArgmax, node: Apply) -> Precompiled | object:
    """The maximum and its first flat index over ``op.axis``, in C."""
    if not _tensors(node) or node.inputs[0].type.dtype not in ARGMAX_DTYPES:
        return PERFORM
    return _thunk(str(op), "ArgmaxThunk", tuple(op.axis), True)


def argmax_c(op: Argmax, node: Apply) -> Precompiled | object:
    """The first flat index of the maximum over ``op.axis`` (all axes when None), in C."""
    if not _tensors(node) or node.inputs[0].type.dtype not in ARGMAX_DTYPES:
        return PERFORM
    axes = tuple(range(node.inputs[0].type.ndim)) if op.axis is None else tuple(op.axis)
    return _thunk(str(op), "ArgmaxThunk", axes, False)


_ENTRIES: dict[type, Callable[[Any, Apply], Any]] = {
    ViewOp: view_c,
    DeepCopyOp: deep_copy_c,
    Shape: shape_c,
    Shape_i: shape_i_c,
    MakeVector: make_vector_c,
    SpecifyShape: specify_shape_c,
    Reshape: reshape_c,
    Rebroadcast: rebroadcast_c,
    DimShuffle: dimshuffle_c,
    ScalarFromTensor: scalar_from_tensor_c,
    TensorFromScalar: tensor_from_scalar_c,
    Subtensor: subtensor_c,
    IncSubtensor: inc_subtensor_c,
    Alloc: alloc_c,
    AllocEmpty: alloc_empty_c,
    MaxAndArgmax: max_and_argmax_c,
    Argmax: argmax_c,
}
