"""Advanced indexing: integer arrays and boolean masks, and the ops that update through them.

- ``AdvancedSubtensor1`` / ``AdvancedIncSubtensor1``: ``x[ivector]`` on the first axis (what
  ``x[idx]`` and ``x.take(idx, axis)`` build);
- ``AdvancedSubtensor`` / ``AdvancedIncSubtensor``: any mix of integer arrays, slices and
  ``None``, with NumPy's placement rules for the indexed dimensions;
- ``AdvancedBooleanSubtensor`` / ``AdvancedBooleanIncSubtensor``: the same with boolean masks
  (``x[x > 0]``), each mask standing for ``mask.nonzero()``.

Slices and ``None`` inside an advanced index are graph inputs of ``SliceType`` (built by
``MakeSlice``) and ``NoneConst``, as in Theano. Repeated indices accumulate when incrementing
(``np.add.at``); outputs are copies, never views.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import opgraph.scalar.basic as ps
import opgraph.tensor.math as tm
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.null_type import disconnected_type
from opgraph.graph.op import Op
from opgraph.graph.type import Type
from opgraph.graph.utils import MethodNotDefined
from opgraph.plugins.namespaces import module_getattr
from opgraph.scalar.type import ScalarType, discrete_dtypes
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.subtensor_basic import (
    _as_dim,
    _as_scalar_index,
    _constant_int,
    _floatx,
    check_inc_shape,
    check_inc_value,
    inc_grads,
    inc_R_op,
    index_dtypes,
    slice_length,
)
from opgraph.tensor.type import TensorType

__all__ = [
    "AdvancedBooleanIncSubtensor",
    "AdvancedBooleanSubtensor",
    "AdvancedIncSubtensor",
    "AdvancedIncSubtensor1",
    "AdvancedSubtensor",
    "AdvancedSubtensor1",
    "MakeSlice",
    "NoneConst",
    "NoneTypeT",
    "SliceType",
    "advanced_boolean_inc_subtensor",
    "advanced_boolean_set_subtensor",
    "advanced_boolean_subtensor",
    "advanced_inc_subtensor",
    "advanced_inc_subtensor1",
    "advanced_set_subtensor",
    "advanced_set_subtensor1",
    "advanced_subtensor",
    "advanced_subtensor1",
    "as_index_variable",
    "make_slice",
]


# ----------------------------------------------------------------------------------------
# Slices and None as graph values


class SliceType(Type):
    """The type of a Python ``slice`` used inside an advanced index."""

    __props__ = ()

    def filter(self, data: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        if isinstance(data, slice):
            return data
        raise TypeError(f"{self} expects a Python slice, got {data!r}")

    def __str__(self) -> str:
        return "slice"


class NoneTypeT(Type):
    """The type of ``None`` (``np.newaxis``) inside an advanced index."""

    __props__ = ()

    def filter(self, data: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        if data is None:
            return None
        raise TypeError(f"NoneTypeT only holds None, got {data!r}")

    def __str__(self) -> str:
        return "None"


slicetype = SliceType()
none_type_t = NoneTypeT()
#: The constant ``None`` (``np.newaxis``) of advanced indices.
NoneConst = Constant(none_type_t, None, name="NoneConst")


def _is_none(v: Variable) -> bool:
    return isinstance(v.type, NoneTypeT)


class MakeSlice(Op):
    """``slice(start, stop, step)`` from integer scalars or ``NoneConst``."""

    __props__ = ()

    def make_node(self, slc: Any, stop: Any = None, step: Any = None) -> Apply:
        parts = [slc.start, slc.stop, slc.step] if isinstance(slc, slice) else [slc, stop, step]
        inputs = []
        for k, p in enumerate(parts):
            if p is None or (isinstance(p, Variable) and _is_none(p)):
                inputs.append(NoneConst.clone())
                continue
            if isinstance(p, int | np.integer) and not isinstance(p, bool | np.bool_):
                p = ps.constant(int(p), dtype="int64")
            s = _as_scalar_index(p)
            if not isinstance(s.type, ScalarType) or s.type.dtype not in index_dtypes:
                raise TypeError(
                    f"MakeSlice: {('start', 'stop', 'step')[k]} must be an integer scalar or "
                    f"None, got {p} of type {s.type}"
                )
            inputs.append(s)
        return Apply(self, inputs, [slicetype()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        output_storage[0][0] = slice(*inputs)

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[False] for _ in node.inputs]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        return [disconnected_type() for _ in inputs]


make_slice = MakeSlice()


def _slice_of(v: Variable) -> slice | None:
    """The slice a SliceType variable stands for (bounds as variables), if it is known."""
    if isinstance(v, Constant):
        return v.data
    if v.owner is not None and isinstance(v.owner.op, MakeSlice):
        return slice(*(None if _is_none(i) else i for i in v.owner.inputs))
    return None


def as_index_variable(idx: Any) -> Variable:
    """One entry of an advanced index as a variable: ``NoneConst``, a slice, or a tensor."""
    if idx is None:
        return NoneConst.clone()
    if isinstance(idx, slice):
        return make_slice(idx)
    if isinstance(idx, Variable) and isinstance(idx.type, SliceType | NoneTypeT):
        return idx
    if idx is Ellipsis:
        raise IndexError("an advanced-indexing op takes no Ellipsis: index with x[...] instead")
    if isinstance(idx, int | np.integer) and not isinstance(idx, bool | np.bool_):
        idx = np.int64(idx)
    t = as_tensor_variable(idx)
    if t.type.dtype not in (*index_dtypes, "bool"):
        raise TypeError(
            f"an index must hold integers or booleans, got {t} of dtype {t.type.dtype}. "
            "HINT: cast it, e.g. opgraph.tensor.cast(idx, 'int64')."
        )
    return t


# ----------------------------------------------------------------------------------------
# Where the indexed dimensions go (NumPy's rules), for broadcastable patterns and shapes


def _index_result(
    index: Sequence[Variable],
    x_dims: Sequence[Any],
    one: Any,
    slice_dim: Callable[[Variable, Any], Any],
    adv_dims: Callable[[Variable], list[tuple[Any, bool]]],
    merge: Callable[[Any, Any], Any],
) -> list[Any]:
    """Per-dimension info of ``x[index]``, built from per-dimension info of ``x``.

    ``slice_dim(v, d)`` gives a sliced dimension, ``adv_dims(v)`` the ``(info, broadcastable)``
    dimensions of an array index (a mask counts as one 1-d index), ``merge(a, b)`` combines
    two non-broadcastable dimensions of broadcast-together indices. The broadcast indices
    take the place of the first one if they are adjacent, else they go first (NumPy).
    """
    parts: list[Any] = []
    advs: list[list[tuple[Any, bool]]] = []
    adv_at: list[int] = []
    first = 0
    dim = 0
    for k, v in enumerate(index):
        if _is_none(v):
            parts.append(one)
        elif isinstance(v.type, SliceType):
            parts.append(slice_dim(v, x_dims[dim]))
            dim += 1
        else:
            if not advs:
                first = len(parts)
            advs.append(adv_dims(v))
            adv_at.append(k)
            dim += v.type.ndim if v.type.dtype == "bool" else 1
    parts.extend(x_dims[dim:])
    if not advs:
        return parts
    nd = max(len(a) for a in advs)
    merged = []
    for d in range(nd):
        found: Any = None
        for a in advs:
            j = d - (nd - len(a))
            if j >= 0 and not a[j][1]:
                found = a[j][0] if found is None else merge(found, a[j][0])
        merged.append(one if found is None else found)
    pos = first if adv_at == list(range(adv_at[0], adv_at[-1] + 1)) else 0
    return parts[:pos] + merged + parts[pos:]


def _keeps_broadcastable(v: Variable, b: bool) -> bool:
    sl = _slice_of(v)
    if sl is None or not b:
        return False
    start = 0 if sl.start is None else _constant_int(sl.start)
    stop = None if sl.stop is None else _constant_int(sl.stop)
    return start == 0 and (sl.stop is None or (stop is not None and stop > 0))


def _out_broadcastable(x: Variable, index: Sequence[Variable]) -> list[bool]:
    def adv_dims(v: Variable) -> list[tuple[Any, bool]]:
        if v.type.dtype == "bool":
            return [(False, False)]
        return [(b, b) for b in v.type.broadcastable]

    return _index_result(
        index, x.type.broadcastable, True, _keeps_broadcastable, adv_dims, lambda a, b: False
    )


def _check_index(op: Op, x: Variable, index: Sequence[Any], allow_bool: bool) -> list[Variable]:
    """Convert and validate an advanced index for tensor ``x``."""
    index = [as_index_variable(i) for i in index]
    used = 0
    for k, v in enumerate(index):
        if not isinstance(v.type, TensorType):
            used += 0 if _is_none(v) else 1
            continue
        if v.type.dtype == "bool":
            if not allow_bool:
                raise TypeError(
                    f"{op}: index {k} ({v}) is a boolean mask. HINT: index with x[mask], which "
                    "builds an AdvancedBooleanSubtensor."
                )
            if v.type.ndim == 0:
                raise TypeError(
                    f"{op}: index {k} ({v}) is a 0-d boolean; a mask needs at least one "
                    "dimension. HINT: use opgraph.tensor.switch or ifelse for conditions."
                )
            used += v.type.ndim
        else:
            used += 1
    if used > x.type.ndim:
        raise ValueError(
            f"{op}: the index uses {used} dimension(s) but x ({x}, {x.type}) has only {x.type.ndim}"
        )
    return index


# ----------------------------------------------------------------------------------------
# AdvancedSubtensor1 / AdvancedIncSubtensor1: x[ivector]


def _check_vector_index(op: Op, x: Variable, ilist: Any) -> Variable:
    ilist = as_tensor_variable(ilist)
    if ilist.type.dtype not in index_dtypes or ilist.type.ndim != 1:
        raise TypeError(
            f"{op}: the index (input 'ilist', {ilist}) must be a vector of integers, got "
            f"{ilist.type}. HINT: use x[idx] for other index kinds."
        )
    if x.type.ndim == 0:
        raise TypeError(f"{op}: cannot index into the 0-d tensor x ({x}, {x.type})")
    return ilist


def _as_intp(i: np.ndarray) -> np.ndarray:
    if i.dtype == np.intp:
        return i
    i_ = i.astype(np.intp)
    if not np.can_cast(i.dtype, np.intp) and np.any(i_ != i):
        raise IndexError(f"index contains values too large for this system: {i}")
    return i_


class AdvancedSubtensor1(Op):
    """``x[ilist]`` for an integer vector ``ilist`` on the first axis (a copy).

    ``sparse_grad=True`` makes the gradient a sparse matrix (needs opgraph-sparse).
    """

    __props__ = ()

    def __init__(self, sparse_grad: bool = False) -> None:
        self.sparse_grad = sparse_grad

    def make_node(self, x: Any, ilist: Any) -> Apply:
        x = as_tensor_variable(x)
        ilist = _check_vector_index(self, x, ilist)
        bcast = (ilist.type.broadcastable[0], *x.type.broadcastable[1:])
        return Apply(self, [x, ilist], [TensorType(x.type.dtype, bcast)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x, i = inputs
        output_storage[0][0] = x.take(_as_intp(i), axis=0)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Sequence[Any]]) -> list[Any]:
        x, ilist = input_shapes
        return [(ilist[0], *x[1:])]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True], [False]]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        (x, ilist), (gz,) = inputs, output_grads
        if self.sparse_grad:
            if x.type.ndim != 2:
                raise TypeError(
                    f"AdvancedSubtensor1: a sparse gradient needs a matrix, got {x} ({x.type})"
                )
            sparse = module_getattr("sparse")
            first = sparse.construct_sparse_from_list(x, gz, ilist)
        elif x.type.dtype in discrete_dtypes:
            first = tm.zeros_like(x, dtype=_floatx())
        else:
            first = advanced_inc_subtensor1(tm.zeros_like(x), gz, ilist)
        return [first, disconnected_type()]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]) -> list[Any]:
        if eval_points[0] is None:
            return [None]
        return [self(eval_points[0], *inputs[1:])]


class AdvancedIncSubtensor1(Op):
    """``x`` with ``x[ilist] += y`` (repeated indices accumulate) or ``x[ilist] = y``.

    Printed ``AdvancedIncSubtensor1{no_inplace,inc}`` / ``AdvancedIncSubtensor1{inplace,set}``.
    """

    __props__ = ("inplace", "set_instead_of_inc")

    def __init__(self, inplace: bool = False, set_instead_of_inc: bool = False) -> None:
        self.inplace = bool(inplace)
        self.set_instead_of_inc = bool(set_instead_of_inc)
        self.destroy_map = {0: [0]} if self.inplace else {}

    def clone_inplace(self) -> AdvancedIncSubtensor1:
        """The in-place twin of this op (used by the in-place rewrite)."""
        return type(self)(inplace=True, set_instead_of_inc=self.set_instead_of_inc)

    def __str__(self) -> str:
        msg = ("inplace" if self.inplace else "no_inplace") + (
            ",set" if self.set_instead_of_inc else ",inc"
        )
        return f"{type(self).__name__}{{{msg}}}"

    def make_node(self, x: Any, y: Any, ilist: Any) -> Apply:
        x, y = as_tensor_variable(x), as_tensor_variable(y)
        ilist = _check_vector_index(self, x, ilist)
        check_inc_value(self, x, y, x.type.ndim, self.set_instead_of_inc)
        return Apply(self, [x, y, ilist], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x, y, idx = inputs
        out = x if self.inplace else x.copy()
        idx = _as_intp(idx)
        n = out.shape[0]
        bad = (idx >= n) | (idx < -n)
        if bad.any():
            raise IndexError(
                f"{self}: index {idx[bad][0]} is out of bounds for axis 0 with size {n}"
            )
        check_inc_shape(self, y, node.inputs[1].type.broadcastable, (len(idx), *out.shape[1:]))
        if self.set_instead_of_inc:
            out[idx] = y
        else:
            np.add.at(out, idx, y)
        output_storage[0][0] = out

    def infer_shape(self, node: Apply, input_shapes: Sequence[Sequence[Any]]) -> list[Any]:
        return [tuple(input_shapes[0])]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True], [True], [False]]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        (x, y, idx), (gout,) = inputs, output_grads
        gx, gy = inc_grads(
            self.set_instead_of_inc,
            x,
            y,
            gout,
            lambda g: advanced_subtensor1(g, idx),
            lambda g, v: advanced_set_subtensor1(g, v, idx),
        )
        return [gx, gy, disconnected_type()]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]) -> list[Any]:
        return inc_R_op(self, inputs, eval_points)


advanced_subtensor1 = AdvancedSubtensor1()
advanced_inc_subtensor1 = AdvancedIncSubtensor1()
advanced_set_subtensor1 = AdvancedIncSubtensor1(set_instead_of_inc=True)


# ----------------------------------------------------------------------------------------
# AdvancedSubtensor / AdvancedBooleanSubtensor


class BaseAdvancedSubtensor(Op):
    """``x[index]`` for any mix of integer arrays, slices and None (a copy)."""

    __props__ = ()
    #: Whether boolean masks are accepted (the Boolean variants).
    allow_bool = False

    def make_node(self, x: Any, *index: Any) -> Apply:
        x = as_tensor_variable(x)
        index = _check_index(self, x, index, self.allow_bool)
        bcast = _out_broadcastable(x, index)
        return Apply(self, [x, *index], [TensorType(x.type.dtype, bcast)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x = inputs[0]
        out = x[tuple(inputs[1:])]
        if not isinstance(out, np.ndarray) or np.may_share_memory(out, x):
            out = np.array(out, dtype=x.dtype)
        output_storage[0][0] = out

    def infer_shape(self, node: Apply, input_shapes: Sequence[Sequence[Any]]) -> list[Any]:
        shapes = {id(v): s for v, s in zip(node.inputs, input_shapes, strict=True)}

        def slice_dim(v: Variable, length: Any) -> Any:
            sl = _slice_of(v)
            if sl is None:
                raise MethodNotDefined(f"{self}: the shape of a symbolic slice input is unknown")
            return slice_length(sl, length)

        def adv_dims(v: Variable) -> list[tuple[Any, bool]]:
            if v.type.dtype != "bool":
                return list(zip(shapes[id(v)], v.type.broadcastable, strict=True))
            if isinstance(v, Constant):
                return [(int(np.count_nonzero(v.data)), False)]
            return [(_as_dim(tm.sum(tm.cast(v, "int64"))), False)]

        dims = _index_result(
            node.inputs[1:], list(input_shapes[0]), 1, slice_dim, adv_dims, lambda a, b: a
        )
        return [tuple(dims)]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True]] + [[False] for _ in node.inputs[1:]]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        (gz,), x, rest = output_grads, inputs[0], inputs[1:]
        if x.type.dtype in discrete_dtypes:
            first = tm.zeros_like(x, dtype=_floatx())
        else:
            inc = AdvancedBooleanIncSubtensor() if self.allow_bool else AdvancedIncSubtensor()
            first = inc(tm.zeros_like(x), gz, *rest)
        return [first] + [disconnected_type() for _ in rest]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]) -> list[Any]:
        if eval_points[0] is None:
            return [None]
        return [self(eval_points[0], *inputs[1:])]


class AdvancedSubtensor(BaseAdvancedSubtensor):
    """``x[index]`` with integer arrays (NumPy advanced indexing), slices and None."""


class AdvancedBooleanSubtensor(BaseAdvancedSubtensor):
    """``x[index]`` where the index holds boolean masks (``x[x > 0]``), NumPy's semantics.

    A mask whose shape differs from the dimensions it indexes is an IndexError at run time.
    """

    allow_bool = True


# ----------------------------------------------------------------------------------------
# AdvancedIncSubtensor / AdvancedBooleanIncSubtensor


class BaseAdvancedIncSubtensor(Op):
    """``x`` with ``x[index] += y`` (repeated indices accumulate) or ``x[index] = y``."""

    __props__ = ("inplace", "set_instead_of_inc")
    allow_bool = False

    def __init__(self, inplace: bool = False, set_instead_of_inc: bool = False) -> None:
        self.inplace = bool(inplace)
        self.set_instead_of_inc = bool(set_instead_of_inc)
        self.destroy_map = {0: [0]} if self.inplace else {}

    def __str__(self) -> str:
        # Theano 1.0's spelling, two spaces included.
        return (
            f"{type(self).__name__}{{inplace={self.inplace},  "
            f"set_instead_of_inc={self.set_instead_of_inc}}}"
        )

    def make_node(self, x: Any, y: Any, *index: Any) -> Apply:
        x, y = as_tensor_variable(x), as_tensor_variable(y)
        index = _check_index(self, x, index, self.allow_bool)
        view_ndim = len(_out_broadcastable(x, index))
        check_inc_value(self, x, y, view_ndim, self.set_instead_of_inc)
        return Apply(self, [x, y, *index], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x, y = inputs[0], inputs[1]
        idx = tuple(inputs[2:])
        out = x if self.inplace else x.copy()
        # Flat positions of the indexed elements: NumPy's own indexing decides which.
        positions = np.asarray(np.arange(out.size, dtype=np.intp).reshape(out.shape)[idx])
        check_inc_shape(self, y, node.inputs[1].type.broadcastable, positions.shape)
        if self.set_instead_of_inc:
            out[idx] = y
        else:
            # Unravel the flat positions and give add.at a y of the index's shape: NumPy
            # 2.4 repeats coordinates unravelling some shapes (numpy#31980) and reads past
            # a y that add.at itself must broadcast.
            coords = np.unravel_index(positions.ravel(), out.shape)
            coords = tuple(c.reshape(positions.shape) for c in coords)
            np.add.at(out, coords, np.broadcast_to(y, positions.shape))
        output_storage[0][0] = out

    def infer_shape(self, node: Apply, input_shapes: Sequence[Sequence[Any]]) -> list[Any]:
        return [tuple(input_shapes[0])]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True], [True]] + [[False] for _ in node.inputs[2:]]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        (x, y), idx, (gout,) = inputs[:2], inputs[2:], output_grads
        sub = advanced_boolean_subtensor if self.allow_bool else advanced_subtensor
        setter = advanced_boolean_set_subtensor if self.allow_bool else advanced_set_subtensor
        gx, gy = inc_grads(
            self.set_instead_of_inc,
            x,
            y,
            gout,
            lambda g: sub(g, *idx),
            lambda g, v: setter(g, v, *idx),
        )
        return [gx, gy] + [disconnected_type() for _ in idx]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]) -> list[Any]:
        return inc_R_op(self, inputs, eval_points)


class AdvancedIncSubtensor(BaseAdvancedIncSubtensor):
    """``x`` with ``x[index] += y`` / ``= y`` for integer-array indices."""


class AdvancedBooleanIncSubtensor(BaseAdvancedIncSubtensor):
    """``x`` with ``x[mask] += y`` / ``= y`` for indices holding boolean masks."""

    allow_bool = True


advanced_subtensor = AdvancedSubtensor()
advanced_boolean_subtensor = AdvancedBooleanSubtensor()
advanced_inc_subtensor = AdvancedIncSubtensor()
advanced_set_subtensor = AdvancedIncSubtensor(set_instead_of_inc=True)
advanced_boolean_inc_subtensor = AdvancedBooleanIncSubtensor()
advanced_boolean_set_subtensor = AdvancedBooleanIncSubtensor(set_instead_of_inc=True)
