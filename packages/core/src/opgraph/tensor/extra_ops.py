"""NumPy's array utilities as ops: repeat, nonzero, diff, bincount, fill_diagonal, bartlett.

Theano's ``tensor.extra_ops``; its index helpers (unravel_index, ravel_multi_index,
searchsorted, unique) are in :mod:`opgraph.tensor.index_ops`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import opgraph.tensor.math as tm
from opgraph.graph.basic import Apply, Variable
from opgraph.graph.null_type import disconnected_type, grad_undefined
from opgraph.graph.op import Op
from opgraph.scalar.type import discrete_dtypes, upcast
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.cumulative import CumOp, cumprod, cumsum
from opgraph.tensor.elemwise import DimShuffle
from opgraph.tensor.index_ops import (
    RavelMultiIndex,
    SearchsortedOp,
    Unique,
    UnravelIndex,
    ravel_multi_index,
    searchsorted,
    unique,
    unravel_index,
)
from opgraph.tensor.joining import join
from opgraph.tensor.shape import (
    as_int64,
    flatten,
    int_scalar,
    integer_dtypes,
    mul_dims,
    reshape,
    scalar_constant,
    shape,
    shape_i,
)
from opgraph.tensor.shape import squeeze as squeeze
from opgraph.tensor.structure import alloc, arange, zeros
from opgraph.tensor.subtensor import getitem, set_subtensor, take
from opgraph.tensor.type import TensorType

__all__ = [
    "Bartlett",
    "BinCountOp",
    "CpuContiguous",
    "DiffOp",
    "FillDiagonal",
    "FillDiagonalOffset",
    "Nonzero",
    "Repeat",
    "RepeatOp",
    "SegmentSum",
    "bartlett",
    "bartlett_",
    "bincount",
    "compress",
    "cpu_contiguous",
    "diff",
    "fill_diagonal",
    "fill_diagonal_",
    "fill_diagonal_offset",
    "fill_diagonal_offset_",
    "flatnonzero",
    "nonzero",
    "nonzero_values",
    "repeat",
    "to_one_hot",
]

# Theano's tensor.extra_ops also holds these (same objects as in their own modules).
__all__ += [
    "CumOp",
    "RavelMultiIndex",
    "SearchsortedOp",
    "Unique",
    "UnravelIndex",
    "cumprod",
    "cumsum",
    "ravel_multi_index",
    "searchsorted",
    "unique",
    "unravel_index",
]


def _check_axis(op: Any, axis: int | None, ndim: int) -> None:
    if axis is not None and not -ndim <= axis < ndim:
        raise ValueError(f"{op}: axis {axis} is out of range for {ndim} dimension(s)")


def _int_tensor(x: Any, what: str, ndim: int | None = None) -> Variable:
    v = as_tensor_variable(x)
    if v.type.dtype not in integer_dtypes:
        raise TypeError(f"{what} must have an integer dtype, got {v} of type {v.type}")
    if ndim is not None and v.type.ndim != ndim:
        raise TypeError(f"{what} must have {ndim} dimension(s), got {v} of type {v.type}")
    return v


# ----------------------------------------------------------------------------------------
# repeat


class RepeatOp(Op):
    """Each element (slice along ``axis``) of ``x`` repeated ``repeats`` times (NumPy's repeat).

    ``repeats`` is an int scalar or a vector with one count per element along ``axis``
    (``axis=None`` repeats the flattened ``x``). Printed ``RepeatOp{axis=0}``.
    """

    __props__ = ("axis",)

    def __init__(self, axis: int | None = None) -> None:
        self.axis = None if axis is None else int(axis)

    def make_node(self, x: Any, repeats: Any) -> Apply:
        x = as_tensor_variable(x)
        repeats = _int_tensor(repeats, f"{self}: repeats")
        if repeats.type.dtype == "uint64":
            raise TypeError(f"{self}: repeats of dtype uint64 are not supported; use int64")
        if repeats.type.ndim > 1:
            raise ValueError(f"{self}: repeats must be a scalar or a vector, got {repeats.type}")
        _check_axis(self, self.axis, x.type.ndim)
        if self.axis is None:
            bcast = [False]
        else:
            bcast = list(x.type.broadcastable)
            if repeats.type.ndim == 1 or scalar_constant(repeats) != 1:
                bcast[self.axis] = False
        return Apply(self, [x, repeats], [TensorType(x.type.dtype, bcast)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x, repeats = inputs
        if np.any(repeats < 0):
            raise ValueError(f"{self}: repeats must not be negative, got {repeats}")
        try:
            out = np.repeat(x, repeats, axis=self.axis)
        except ValueError as exc:
            raise ValueError(
                f"{self}: cannot repeat an array of shape {x.shape} with repeats of shape "
                f"{repeats.shape}: {exc}"
            ) from None
        output_storage[0][0] = out

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        xshape = list(input_shapes[0])
        repeats = node.inputs[1]
        if repeats.type.ndim == 1:
            total: Any = tm.cast(tm.sum(repeats), "int64")
        else:
            c = scalar_constant(repeats)
            total = int(c) if c is not None else repeats
        if self.axis is None:
            if repeats.type.ndim == 1:
                return [(total,)]
            return [(mul_dims([*xshape, total]),)]
        axis = self.axis % len(xshape)
        xshape[axis] = total if repeats.type.ndim == 1 else mul_dims([xshape[axis], total])
        return [tuple(xshape)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        x, repeats = inputs
        gz = output_grads[0]
        if x.type.dtype in discrete_dtypes:
            return [tm.zeros_like_grad(x), disconnected_type()]
        if repeats.type.ndim == 0:
            axis = x.type.ndim if self.axis is None else self.axis % x.type.ndim + 1
            dims: list[Any] = [shape_i(x, k) for k in range(x.type.ndim)]
            dims.insert(axis, repeats)
            gx = tm.sum(reshape(gz, dims, ndim=x.type.ndim + 1), axis=axis)
        elif self.axis is None:
            gx = reshape(SegmentSum(0)(gz, repeats), shape(x), ndim=x.type.ndim)
        else:
            gx = SegmentSum(self.axis % x.type.ndim)(gz, repeats)
        return [gx, disconnected_type()]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list[Any]:
        if eval_points[0] is None:
            return [None]
        return [self(eval_points[0], inputs[1])]


Repeat = RepeatOp


class SegmentSum(Op):
    """Sums of consecutive runs of ``repeats[i]`` slices along ``axis``: RepeatOp's adjoint."""

    __props__ = ("axis",)

    def __init__(self, axis: int) -> None:
        self.axis = int(axis)

    def make_node(self, g: Any, repeats: Any) -> Apply:
        g = as_tensor_variable(g)
        repeats = _int_tensor(repeats, f"{self}: repeats", ndim=1)
        _check_axis(self, self.axis, g.type.ndim)
        bcast = [b and d != self.axis for d, b in enumerate(g.type.broadcastable)]
        return Apply(self, [g, repeats], [TensorType(g.type.dtype, bcast)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        g, repeats = inputs
        ends = np.cumsum(repeats)
        total = int(ends[-1]) if len(ends) else 0
        if total != g.shape[self.axis]:
            raise ValueError(
                f"{self}: the repeats sum to {total}, but the gradient has length "
                f"{g.shape[self.axis]} along axis {self.axis}"
            )
        shape_out = list(g.shape)
        shape_out[self.axis] = len(repeats)
        out = np.zeros(shape_out, dtype=g.dtype)
        nonempty = repeats > 0
        if nonempty.any():
            sums = np.add.reduceat(g, (ends - repeats)[nonempty], axis=self.axis)
            key: list[Any] = [slice(None)] * g.ndim
            key[self.axis] = nonempty
            out[tuple(key)] = sums
        output_storage[0][0] = out

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        out = list(input_shapes[0])
        out[self.axis] = input_shapes[1][0]
        return [tuple(out)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        return [RepeatOp(self.axis)(output_grads[0], inputs[1]), disconnected_type()]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list[Any]:
        if eval_points[0] is None:
            return [None]
        return [self(eval_points[0], inputs[1])]


def repeat(x: Any, repeats: Any, axis: int | None = None) -> Variable:
    """``x`` with each element repeated ``repeats`` times along ``axis`` (NumPy's repeat).

    A scalar count builds ``Alloc`` + ``Reshape`` (as Theano does); a vector of counts, a
    ``RepeatOp``. ``axis=None`` repeats the flattened ``x``.
    """
    x = as_tensor_variable(x)
    repeats = _int_tensor(repeats, "repeat: repeats")
    if repeats.type.ndim > 1:
        raise ValueError(f"repeat: repeats must be a scalar or a vector, got {repeats.type}")
    _check_axis("repeat", axis, x.type.ndim)
    if axis is not None:
        axis %= x.type.ndim
    if repeats.type.ndim == 1 and not repeats.type.broadcastable[0]:
        return RepeatOp(axis)(x, repeats)
    if repeats.type.ndim == 1:
        repeats = DimShuffle(repeats.type.broadcastable, ())(repeats)
    count = scalar_constant(repeats)
    if count is not None and count < 0:
        raise ValueError(f"repeat: repeats must not be negative, got {count}")
    if axis is None:
        x, axis = flatten(x), 0
    bcast = x.type.broadcastable
    dims: list[Any] = [1 if bcast[i] else shape_i(x, i) for i in range(x.type.ndim)]
    alloc_dims = [*dims]
    alloc_dims.insert(axis + 1, repeats)
    dims[axis] = mul_dims([dims[axis], repeats]) if count != 1 else dims[axis]
    pattern: list[Any] = list(range(x.type.ndim))
    pattern.insert(axis + 1, "x")
    z = alloc(x.dimshuffle(pattern), *alloc_dims)  # type: ignore[attr-defined]
    return reshape(z, dims, ndim=x.type.ndim)


# ----------------------------------------------------------------------------------------
# nonzero


class Nonzero(Op):
    """The indices of the non-zero elements of ``a``: an int64 matrix of shape (a.ndim, count)."""

    __props__ = ()

    def make_node(self, a: Any) -> Apply:
        a = as_tensor_variable(a)
        if a.type.ndim == 0:
            raise ValueError(
                f"Nonzero only supports arrays with dimensions, got the 0-d {a}. "
                "HINT: use a.flatten() or neq(a, 0)."
            )
        return Apply(self, [a], [TensorType("int64", (False, False))()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        (a,) = inputs
        output_storage[0][0] = np.asarray(np.nonzero(a), dtype="int64").reshape(a.ndim, -1)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        a = node.inputs[0]
        return [(a.type.ndim, tm.cast(tm.sum(tm.neq(a, 0)), "int64"))]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        return [tm.zeros_like_grad(inputs[0])]


_nonzero = Nonzero()


def nonzero(a: Any, return_matrix: bool = False) -> Any:
    """Indices of the non-zero elements of ``a``: a tuple with one int64 vector per dimension.

    With ``return_matrix=True``, the ``(a.ndim, count)`` matrix instead.
    """
    matrix = _nonzero(a)
    if return_matrix:
        return matrix
    return tuple(getitem(matrix, i) for i in range(matrix.owner.inputs[0].type.ndim))


def flatnonzero(a: Any) -> Variable:
    """Indices of the non-zero elements of the flattened ``a``."""
    a = as_tensor_variable(a)
    if a.type.ndim == 0:
        raise ValueError(f"flatnonzero needs an array with dimensions, got the 0-d {a}")
    return nonzero(flatten(a))[0]


def nonzero_values(a: Any) -> Variable:
    """The non-zero elements of ``a``, flattened."""
    a = as_tensor_variable(a)
    return getitem(flatten(a), flatnonzero(a))


def compress(condition: Any, x: Any, axis: int | None = None) -> Variable:
    """The slices of ``x`` along ``axis`` where ``condition`` is true (NumPy's compress)."""
    return take(x, flatnonzero(condition), axis=axis)


# ----------------------------------------------------------------------------------------
# diff


class DiffOp(Op):
    """The ``n``-th discrete difference along ``axis``: ``out[i] = x[i + 1] - x[i]``, n times."""

    __props__ = ("n", "axis")

    def __init__(self, n: int = 1, axis: int = -1) -> None:
        if not isinstance(n, int | np.integer) or n < 0:
            raise ValueError(f"DiffOp: the order n must be a non-negative int, got {n!r}")
        self.n = int(n)
        self.axis = int(axis)
        if self.n == 0:
            self.view_map = {0: [0]}

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        if x.type.ndim == 0:
            raise ValueError(f"{self}: diff needs an array with dimensions, got the 0-d {x}")
        _check_axis(self, self.axis, x.type.ndim)
        axis = self.axis % x.type.ndim
        bcast = [b and (d != axis or self.n == 0) for d, b in enumerate(x.type.broadcastable)]
        return Apply(self, [x], [TensorType(x.type.dtype, bcast)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        (x,) = inputs
        output_storage[0][0] = np.diff(x, n=self.n, axis=self.axis)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        out = list(input_shapes[0])
        axis = self.axis % len(out)
        length = out[axis]
        if isinstance(length, Variable):
            out[axis] = tm.maximum(tm.sub(as_int64(length), self.n), 0)
        else:
            out[axis] = max(int(length) - self.n, 0)
        return [tuple(out)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        (x,) = inputs
        if x.type.dtype in discrete_dtypes:
            return [tm.zeros_like_grad(x)]
        axis = self.axis % x.type.ndim
        g = output_grads[0]
        for _ in range(self.n):
            dims = [1 if d == axis else shape_i(g, d) for d in range(g.type.ndim)]
            zero = alloc(np.array(0, dtype=g.type.dtype), *dims)
            g = tm.sub(join(axis, zero, g), join(axis, g, zero))
        return [g]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list[Any]:
        if eval_points[0] is None:
            return [None]
        return [self(eval_points[0])]


def diff(x: Any, n: int = 1, axis: int = -1) -> Variable:
    """The ``n``-th discrete difference of ``x`` along ``axis`` (NumPy's diff)."""
    return DiffOp(n=n, axis=axis)(x)


# ----------------------------------------------------------------------------------------
# bincount, fill_diagonal


class BinCountOp(Op):
    """How many times each value ``0..max(x)`` occurs in ``x`` (or the sum of their ``weights``).

    Inputs are ``(x, minlength)`` or ``(x, minlength, weights)``; the output has at least
    ``minlength`` entries. Counts are int64; weighted sums have the weights' float dtype.
    """

    __props__ = ()

    def make_node(self, x: Any, minlength: Any = 0, weights: Any = None) -> Apply:
        x = _int_tensor(x, "bincount: x", ndim=1)
        minlength = int_scalar(minlength, "bincount: minlength")
        inputs = [x, minlength]
        dtype = "int64"
        if weights is not None:
            weights = as_tensor_variable(weights)
            if weights.type.ndim != 1:
                raise TypeError(f"bincount: weights must be a vector, got {weights.type}")
            if weights.type.dtype.startswith("complex"):
                raise TypeError(f"bincount: weights must be real, got {weights.type}")
            dtype = weights.type.dtype if weights.type.dtype.startswith("float") else "float64"
            inputs.append(weights)
        return Apply(self, inputs, [TensorType(dtype, (False,))()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x, minlength, *weights = inputs
        if x.size and x.min() < 0:
            raise ValueError(f"bincount: x must not contain negative values, got min {x.min()}")
        if weights and len(weights[0]) != len(x):
            raise ValueError(
                f"bincount: weights has length {len(weights[0])} but x has length {len(x)}"
            )
        out = np.bincount(x, weights[0] if weights else None, minlength=max(int(minlength), 0))
        output_storage[0][0] = out.astype(node.outputs[0].type.numpy_dtype, copy=False)

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        grads: list[Any] = [disconnected_type(), disconnected_type()]
        if len(inputs) == 3:
            grads.append(take(output_grads[0], inputs[0]))
        return grads

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list[Any]:
        if len(inputs) < 3 or eval_points[2] is None:
            return [None]
        return [self(inputs[0], inputs[1], eval_points[2])]


def bincount(
    x: Any, weights: Any = None, minlength: Any = None, assert_nonneg: bool = False
) -> Variable:
    """Occurrences of each value in the int vector ``x`` (NumPy's bincount).

    Negative values are always an error at run time (``assert_nonneg`` is accepted for
    Theano compatibility).
    """
    return BinCountOp()(x, 0 if minlength is None else minlength, weights)


class FillDiagonal(Op):
    """A copy of ``a`` (ndim >= 2) with its main diagonal set to the scalar ``val``."""

    __props__ = ()

    def make_node(self, a: Any, val: Any) -> Apply:
        a, val = as_tensor_variable(a), as_tensor_variable(val)
        if a.type.ndim < 2:
            raise TypeError(f"fill_diagonal needs an array of 2 or more dimensions, got {a.type}")
        if val.type.ndim != 0:
            raise TypeError(f"fill_diagonal: val must be a scalar, got {val} of type {val.type}")
        if val.type.dtype != a.type.dtype:
            if upcast(a.type.dtype, val.type.dtype) != a.type.dtype:
                raise TypeError(
                    f"fill_diagonal: val of dtype {val.type.dtype} does not fit in a of dtype "
                    f"{a.type.dtype}. HINT: cast a, or val, first."
                )
            val = tm.cast(val, a.type.dtype)
        return Apply(self, [a, val], [a.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        a, val = inputs
        out = a.copy()
        try:
            np.fill_diagonal(out, val)
        except ValueError as exc:
            raise ValueError(
                f"fill_diagonal: cannot fill an array of shape {a.shape}: {exc}"
            ) from None
        output_storage[0][0] = out

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        a = inputs[0]
        gz = output_grads[0]
        if a.type.dtype in discrete_dtypes:
            return [tm.zeros_like_grad(a), tm.zeros_like_grad(inputs[1])]
        off_diagonal = fill_diagonal(gz, 0)
        return [off_diagonal, tm.sum(tm.sub(gz, off_diagonal))]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list[Any]:
        if all(e is None for e in eval_points):
            return [None]
        a_dot, val_dot = eval_points
        a_dot = tm.zeros_like(inputs[0]) if a_dot is None else a_dot
        return [self(a_dot, 0 if val_dot is None else val_dot)]


_fill_diagonal = FillDiagonal()


def fill_diagonal(a: Any, val: Any) -> Variable:
    """A copy of ``a`` with its main diagonal set to ``val`` (NumPy's fill_diagonal)."""
    return _fill_diagonal(a, val)


#: Theano's name for the FillDiagonal instance.
fill_diagonal_ = _fill_diagonal


class FillDiagonalOffset(Op):
    """A copy of the matrix ``a`` with its ``offset`` diagonal set to the scalar ``val``.

    ``offset > 0`` is above the main diagonal, ``offset < 0`` below. Unlike NumPy's
    ``fill_diagonal``, a tall matrix's diagonal is not wrapped (Theano's semantics).
    """

    __props__ = ()

    def make_node(self, a: Any, val: Any, offset: Any) -> Apply:
        a, val = as_tensor_variable(a), as_tensor_variable(val)
        offset = as_tensor_variable(offset)
        if a.type.ndim != 2:
            raise TypeError(
                f"{type(self).__name__}: first parameter must have exactly two dimensions, "
                f"got {a} of type {a.type}"
            )
        if val.type.ndim != 0:
            raise TypeError(
                f"{type(self).__name__}: second parameter must be a scalar, got {val.type}"
            )
        if offset.type.ndim != 0:
            raise TypeError(
                f"{type(self).__name__}: third parameter must be a scalar, got {offset.type}"
            )
        if upcast(a.type.dtype, val.type.dtype) != a.type.dtype:
            raise TypeError(
                f"{type(self).__name__}: type of second parameter must be the same as the "
                f"first's: val of dtype {val.type.dtype} does not fit in a of dtype "
                f"{a.type.dtype}. HINT: cast a, or val, first."
            )
        if offset.type.dtype not in integer_dtypes:
            raise TypeError(
                f"{type(self).__name__}: type of third parameter must be an integer, got "
                f"{offset.type}; use opgraph.tensor.cast(offset, 'int64')"
            )
        if val.type.dtype != a.type.dtype:
            val = tm.cast(val, a.type.dtype)
        return Apply(self, [a, val, offset], [a.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        a, val, offset = inputs
        a = a.copy()
        height, width = a.shape
        offset = int(offset)
        if offset >= 0:
            start = offset
            steps = min(width, height, width - offset)
        else:
            start = -offset * width
            steps = min(width, height, height + offset)
        step = width + 1
        if steps > 0:
            a.flat[start : start + step * steps : step] = val
        output_storage[0][0] = a

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        a, val, offset = inputs
        (gz,) = output_grads
        undefined = grad_undefined(
            self,
            2,
            offset,
            "offset is not defined for non-integer offset so "
            "fill_diagonal_offset(a, val, offset + eps) is undefined",
        )
        if a.type.dtype in discrete_dtypes:
            return [tm.zeros_like_grad(a), tm.zeros_like_grad(val), undefined]
        height, width = shape_i(gz, 0), shape_i(gz, 1)
        # The filled entries are ``gz[i, i + offset]``: take them as a diagonal of gz.
        rows = tm.maximum(-offset, 0)
        cols = tm.maximum(offset, 0)
        n = tm.maximum(tm.minimum(height - rows, width - cols), 0)
        idx = arange(n)
        g_val = tm.sum(getitem(gz, (idx + rows, idx + cols)))
        return [fill_diagonal_offset(gz, 0, offset), g_val, undefined]


fill_diagonal_offset_ = FillDiagonalOffset()


def fill_diagonal_offset(a: Any, val: Any, offset: Any) -> Variable:
    """A copy of the matrix ``a`` with its ``offset`` diagonal set to the scalar ``val``."""
    return fill_diagonal_offset_(a, val, offset)


class Bartlett(Op):
    """The Bartlett (triangular) window of ``M`` points, ``numpy.bartlett(M)``, as float64.

    ``M`` is an integer scalar; ``M <= 0`` gives an empty vector. Not differentiable
    (``M`` is an integer).
    """

    __props__ = ()

    def make_node(self, M: Any) -> Apply:
        M = as_tensor_variable(M)
        if M.type.ndim != 0:
            raise TypeError(f"{type(self).__name__} only works on scalar input, got {M.type}")
        if M.type.dtype not in integer_dtypes:
            raise TypeError(f"{type(self).__name__} only works on integer input, got {M.type}")
        return Apply(self, [M], [TensorType("float64", (False,))()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        output_storage[0][0] = np.asarray(np.bartlett(int(inputs[0])), dtype="float64")

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [(as_int64(tm.maximum(node.inputs[0], 0)),)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        return [tm.zeros_like_grad(inputs[0])]


bartlett_ = Bartlett()


def bartlett(M: Any) -> Variable:
    """The Bartlett spectral window of ``M`` points (a float64 vector; empty if M <= 0).

    The triangular window with end points at zero and its maximum normalised to one.
    """
    return bartlett_(M)


class CpuContiguous(Op):
    """``x`` itself if it is C-contiguous, else a C-contiguous copy (a view of its input)."""

    __props__ = ()
    view_map = {0: [0]}

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        (x,) = inputs
        output_storage[0][0] = x if x.flags["C_CONTIGUOUS"] else np.ascontiguousarray(x)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        return [as_tensor_variable(output_grads[0])]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list[Any]:
        return [None if eval_points[0] is None else self(eval_points[0])]


cpu_contiguous = CpuContiguous()


def to_one_hot(y: Any, nb_class: Any, dtype: str | None = None) -> Variable:
    """The one-hot rows of the int vector ``y``: shape ``(len(y), nb_class)``, dtype floatX.

    Row ``i`` is 1 at column ``y[i]`` and 0 elsewhere (Theano's ``to_one_hot``).
    """
    y = _int_tensor(y, "to_one_hot's y", ndim=1)
    n = shape_i(y, 0)
    ret = zeros((n, nb_class), dtype=dtype)
    return set_subtensor(getitem(ret, (arange(n), y)), 1)
