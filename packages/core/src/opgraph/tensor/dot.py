"""Products: ``dot`` (Theano's ``Dot``, printed ``dot``), ``batched_dot`` (``BatchedDot``),
NumPy's ``matmul`` with batch broadcasting (``MatMul``), ``tensordot``, ``outer`` and
``batched_tensordot``.

``dot`` follows Theano 1.0: a scalar operand gives an elementwise product, operands of more
than two dimensions go through ``tensordot`` (reshapes around a 2-d ``Dot``), and vectors and
matrices use the ``Dot`` op, which the BLAS rewrites specialise (``Dot22``, ``Gemv``, ...).
Batch dimensions broadcast by their types, never by their runtime lengths.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.op import Op
from opgraph.printing.pprint import OperatorPrinter, pprint, special
from opgraph.scalar.type import upcast
from opgraph.tensor.basic import as_tensor_variable, constant, patternbroadcast
from opgraph.tensor.elemwise import DimShuffle
from opgraph.tensor.math import add, mul, zeros_like
from opgraph.tensor.math import sum as tsum
from opgraph.tensor.type import TensorType

__all__ = [
    "BatchedDot",
    "Dot",
    "MatMul",
    "batched_dot",
    "batched_tensordot",
    "dot",
    "matmul",
    "outer",
    "tensordot",
]

_continuous = ("float16", "float32", "float64", "complex64", "complex128")


def _transpose_last(v: Variable) -> Variable:
    """``v`` with its last two dimensions swapped."""
    nd = v.type.ndim
    order = [*range(nd - 2), nd - 1, nd - 2]
    return DimShuffle(v.type.broadcastable, order)(v)


def _linear_R_op(op: Op, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list[Any]:
    """R_op of a bilinear op: ``op(dx, y) + op(x, dy)``."""
    x, y = inputs
    dx, dy = eval_points
    if dx is None and dy is None:
        return [None]
    terms = []
    if dx is not None:
        terms.append(op(dx, y))
    if dy is not None:
        terms.append(op(x, dy))
    return [terms[0] if len(terms) == 1 else add(*terms)]


def _shape_error(op: Op, x: np.ndarray, y: np.ndarray, detail: str) -> ValueError:
    return ValueError(
        f"{op}: inputs of shapes {x.shape} and {y.shape} are not aligned: {detail}. "
        "HINT: transpose one input, or check which dimension should be contracted."
    )


# ----------------------------------------------------------------------------------------
# Dot


class Dot(Op):
    """Matrix/vector product of two vectors or matrices (``np.dot``); printed ``dot``."""

    __props__ = ()

    def __str__(self) -> str:
        return "dot"

    def make_node(self, x: Any, y: Any) -> Apply:
        x, y = as_tensor_variable(x), as_tensor_variable(y)
        for k, v in enumerate((x, y)):
            if v.type.ndim not in (1, 2):
                raise TypeError(
                    f"Dot: input {k} ({v}) must be a vector or a matrix, got {v.type}. "
                    "HINT: use opgraph.tensor.dot, which handles scalars and higher ranks."
                )
        bz = x.type.broadcastable[:-1] + (y.type.broadcastable[-1:] if y.type.ndim == 2 else ())
        out = TensorType(upcast(x.type.dtype, y.type.dtype), bz)()
        return Apply(self, [x, y], [out])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x, y = inputs
        if x.shape[-1] != y.shape[0]:
            raise _shape_error(
                self,
                x,
                y,
                f"dimension {x.ndim - 1} of input 0 has length {x.shape[-1]}, dimension 0 of "
                f"input 1 has length {y.shape[0]}",
            )
        output_storage[0][0] = np.asarray(np.dot(x, y), dtype=node.outputs[0].type.numpy_dtype)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        xshp, yshp = input_shapes
        return [tuple(xshp[:-1]) + tuple(yshp[1:])]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        x, y = inputs
        (gz,) = output_grads
        xdim, ydim = x.type.ndim, y.type.ndim
        if xdim == 1 and ydim == 1:
            xgrad, ygrad = mul(gz, y), mul(gz, x)
        elif xdim == 1:
            xgrad, ygrad = dot(gz, y.T), outer(x, gz)
        elif ydim == 1:
            xgrad, ygrad = outer(gz, y), dot(x.T, gz)
        else:
            xgrad, ygrad = dot(gz, y.T), dot(x.T, gz)
        result = []
        for v, g in ((x, xgrad), (y, ygrad)):
            if v.type.dtype not in _continuous:
                result.append(zeros_like(v, dtype="float64"))
            else:
                result.append(patternbroadcast(g, v.type.broadcastable))
        return result

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list[Any]:
        return _linear_R_op(self, inputs, eval_points)


_dot = Dot()


def dot(a: Any, b: Any) -> Variable:
    """Dot product of ``a`` and ``b`` (Theano 1.0's ``tensor.dot``).

    A scalar operand gives the elementwise product; vectors and matrices use the ``Dot`` op;
    higher ranks contract the last axis of ``a`` with the second-to-last of ``b``, like
    ``numpy.dot``, through ``tensordot``.
    """
    a, b = as_tensor_variable(a), as_tensor_variable(b)
    if a.type.ndim == 0 or b.type.ndim == 0:
        return mul(a, b)
    if a.type.ndim > 2 or b.type.ndim > 2:
        return tensordot(a, b, [[a.type.ndim - 1], [max(0, b.type.ndim - 2)]])
    return _dot(a, b)


def outer(x: Any, y: Any) -> Variable:
    """Outer product of two vectors (inputs of other ranks are flattened first)."""
    x, y = as_tensor_variable(x), as_tensor_variable(y)
    if x.type.ndim != 1:
        x = x.flatten()
    if y.type.ndim != 1:
        y = y.flatten()
    return dot(x.dimshuffle(0, "x"), y.dimshuffle("x", 0))


# ----------------------------------------------------------------------------------------
# BatchedDot


class BatchedDot(Op):
    """``dot`` of each pair ``x[i], y[i]`` for 2-d or 3-d inputs with a common batch axis 0."""

    __props__ = ()

    def make_node(self, x: Any, y: Any) -> Apply:
        x, y = as_tensor_variable(x), as_tensor_variable(y)
        for k, v in enumerate((x, y)):
            if v.type.ndim not in (2, 3):
                raise TypeError(
                    f"BatchedDot: input {k} ({v}) must be a 2-d or 3-d tensor (batch axis first), "
                    f"got {v.type}. HINT: use opgraph.tensor.batched_dot or batched_tensordot."
                )
        xb, yb = x.type.broadcastable, y.type.broadcastable
        bcast = (xb[0] and yb[0], *xb[1:-1], *yb[2:])
        out = TensorType(upcast(x.type.dtype, y.type.dtype), bcast)()
        return Apply(self, [x, y], [out])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x, y = inputs
        if x.shape[0] != y.shape[0]:
            raise ValueError(
                f"BatchedDot: inputs must have the same batch size (axis 0), got shapes "
                f"{x.shape} and {y.shape}"
            )
        if x.shape[-1] != y.shape[1]:
            raise _shape_error(
                self,
                x,
                y,
                f"input 0 has {x.shape[-1]} columns, input 1 has {y.shape[1]} rows per batch",
            )
        xm = x[:, None, :] if x.ndim == 2 else x
        ym = y[:, :, None] if y.ndim == 2 else y
        res = np.matmul(xm, ym)
        if y.ndim == 2:
            res = res[..., 0]
        if x.ndim == 2:
            res = res[:, 0]
        output_storage[0][0] = np.asarray(res, dtype=node.outputs[0].type.numpy_dtype)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        xshp, yshp = input_shapes
        return [(xshp[0], *xshp[1:-1], *yshp[2:])]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        x, y = inputs
        (gz,) = output_grads
        xdim, ydim = x.type.ndim, y.type.ndim
        if xdim == 2 and ydim == 2:
            xgrad, ygrad = mul(gz.dimshuffle(0, "x"), y), mul(gz.dimshuffle(0, "x"), x)
        elif xdim == 2:
            xgrad = self(gz, y.dimshuffle(0, 2, 1))
            ygrad = mul(x.dimshuffle(0, 1, "x"), gz.dimshuffle(0, "x", 1))
        elif ydim == 2:
            xgrad = mul(gz.dimshuffle(0, 1, "x"), y.dimshuffle(0, "x", 1))
            ygrad = self(x.dimshuffle(0, 2, 1), gz)
        else:
            xgrad, ygrad = self(gz, y.dimshuffle(0, 2, 1)), self(x.dimshuffle(0, 2, 1), gz)
        result = []
        for v, g in ((x, xgrad), (y, ygrad)):
            if v.type.dtype not in _continuous:
                result.append(zeros_like(v, dtype="float64"))
            else:
                result.append(patternbroadcast(g, v.type.broadcastable))
        return result

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list[Any]:
        return _linear_R_op(self, inputs, eval_points)


def batched_dot(a: Any, b: Any) -> Variable:
    """``dot(a[i], b[i])`` for every ``i`` along the first (batch) axis (Theano 1.0).

    A vector operand scales the other per batch; 2-d/3-d operands use ``BatchedDot``; higher
    ranks go through ``batched_tensordot``.
    """
    a, b = as_tensor_variable(a), as_tensor_variable(b)
    for k, v in enumerate((a, b)):
        if v.type.ndim == 0:
            raise TypeError(f"batched_dot: input {k} ({v}) must have a batch axis, got a scalar")
    if a.type.ndim == 1:
        return mul(a.dimshuffle(0, *["x"] * (b.type.ndim - 1)), b)
    if b.type.ndim == 1:
        return mul(a, b.dimshuffle(0, *["x"] * (a.type.ndim - 1)))
    if a.type.ndim > 3 or b.type.ndim > 3:
        return batched_tensordot(a, b, [[a.type.ndim - 1], [max(1, b.type.ndim - 2)]])
    return BatchedDot()(a, b)


# ----------------------------------------------------------------------------------------
# MatMul


def _batch_shape_check(op: Op, node: Apply, x: np.ndarray, y: np.ndarray) -> None:
    nb = node.outputs[0].type.ndim - 2
    for d in range(nb):
        sizes = [
            (k, v.shape[d])
            for k, (var, v) in enumerate(zip(node.inputs, (x, y)))
            if not var.type.broadcastable[d]
        ]
        if len(sizes) == 2 and sizes[0][1] != sizes[1][1]:
            raise ValueError(
                f"{op}: batch dimension {d} differs: input 0 has length {x.shape[d]}, input 1 "
                f"has length {y.shape[d]} (shapes {x.shape} and {y.shape}). Batch dimensions "
                "broadcast only where the type says they are broadcastable."
            )
    if x.shape[-1] != y.shape[-2]:
        raise _shape_error(
            op, x, y, f"input 0 has {x.shape[-1]} columns, input 1 has {y.shape[-2]} rows"
        )


class MatMul(Op):
    """NumPy's ``matmul`` for inputs of 2 or more dimensions with broadcast batch axes.

    The inputs are padded to the same rank with broadcastable leading axes, as Elemwise
    does; a batch axis broadcasts only if its type says so.
    """

    __props__ = ()

    def make_node(self, x: Any, y: Any) -> Apply:
        x, y = as_tensor_variable(x), as_tensor_variable(y)
        for k, v in enumerate((x, y)):
            if v.type.ndim < 2:
                raise TypeError(
                    f"MatMul: input {k} ({v}) needs at least 2 dimensions, got {v.type}. "
                    "HINT: use opgraph.tensor.matmul, which handles vectors."
                )
        nd = max(x.type.ndim, y.type.ndim)
        args = []
        for v in (x, y):
            if v.type.ndim < nd:
                pad = ["x"] * (nd - v.type.ndim) + list(range(v.type.ndim))
                v = DimShuffle(v.type.broadcastable, pad)(v)
            args.append(v)
        xb, yb = args[0].type.broadcastable, args[1].type.broadcastable
        bcast = (*(a and b for a, b in zip(xb[:-2], yb[:-2])), xb[-2], yb[-1])
        out = TensorType(upcast(x.type.dtype, y.type.dtype), bcast)()
        return Apply(self, args, [out])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x, y = inputs
        _batch_shape_check(self, node, x, y)
        output_storage[0][0] = np.asarray(np.matmul(x, y), dtype=node.outputs[0].type.numpy_dtype)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        (x, y), (xshp, yshp) = node.inputs, input_shapes
        batch = []
        for d in range(node.outputs[0].type.ndim - 2):
            if not x.type.broadcastable[d]:
                batch.append(xshp[d])
            elif not y.type.broadcastable[d]:
                batch.append(yshp[d])
            else:
                batch.append(1)
        return [(*batch, xshp[-2], yshp[-1])]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        x, y = inputs
        (gz,) = output_grads
        result = []
        for v, g in ((x, self(gz, _transpose_last(y))), (y, self(_transpose_last(x), gz))):
            if v.type.dtype not in _continuous:
                result.append(zeros_like(v, dtype="float64"))
                continue
            axes = [
                d
                for d in range(v.type.ndim - 2)
                if v.type.broadcastable[d] and not g.type.broadcastable[d]
            ]
            if axes:
                g = tsum(g, axis=axes, keepdims=True)
            result.append(patternbroadcast(g, v.type.broadcastable))
        return result

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list[Any]:
        return _linear_R_op(self, inputs, eval_points)


def matmul(a: Any, b: Any) -> Variable:
    """NumPy's ``matmul`` (the ``@`` operator): matrix products over broadcast batch axes.

    A vector operand is treated as a row (first operand) or a column (second operand) and
    that axis is dropped from the result. Vectors and matrices use ``dot``.
    """
    a, b = as_tensor_variable(a), as_tensor_variable(b)
    for k, v in enumerate((a, b)):
        if v.type.ndim == 0:
            raise TypeError(
                f"matmul: input {k} ({v}) is a scalar; matmul needs arrays. HINT: use * for a "
                "scalar product."
            )
    if a.type.ndim <= 2 and b.type.ndim <= 2:
        return _dot(a, b)
    a_vec, b_vec = a.type.ndim == 1, b.type.ndim == 1
    if a_vec:
        a = a.dimshuffle("x", 0)
    if b_vec:
        b = b.dimshuffle(0, "x")
    out = MatMul()(a, b)
    nd = out.type.ndim
    keep = [d for d in range(nd) if not (a_vec and d == nd - 2) and not (b_vec and d == nd - 1)]
    if len(keep) != nd:
        out = DimShuffle(out.type.broadcastable, keep)(out)
    return out


# ----------------------------------------------------------------------------------------
# tensordot


def _product(dims: Sequence[Any]) -> Any:
    if not dims:
        return constant(1, dtype="int64")
    out = dims[0]
    for d in dims[1:]:
        out = mul(out, d)
    return out


def _pack(axes: Any) -> tuple[int, ...]:
    if isinstance(axes, int | np.integer):
        return (int(axes),)
    return tuple(int(a) for a in axes)


def _tensordot_as_dot(a: Any, b: Any, axes: Any, batched: bool) -> Variable:
    """Contract ``axes`` of ``a`` and ``b`` with one (batched) 2-d product between reshapes."""
    a, b = as_tensor_variable(a), as_tensor_variable(b)
    name = "batched_tensordot" if batched else "tensordot"
    if not np.isscalar(axes):
        if len(axes) != 2:
            raise ValueError(f"{name}: axes must be an int or a pair of axis lists, got {axes!r}")
        ax_a, ax_b = _pack(axes[0]), _pack(axes[1])
        if len(ax_a) != len(ax_b):
            raise ValueError(f"{name}: the two axis lists must have the same length, got {axes}")
        for k, (v, ax) in enumerate(((a, ax_a), (b, ax_b))):
            if any(not -v.type.ndim <= i < v.type.ndim for i in ax):
                raise ValueError(f"{name}: axes {ax} out of range for input {k} ({v.type})")
            if batched and any(i % v.type.ndim == 0 for i in ax):
                raise ValueError(f"{name}: cannot contract the batch axis 0 of input {k}")
        ax_a = tuple(i % a.type.ndim for i in ax_a)
        ax_b = tuple(i % b.type.ndim for i in ax_b)
        a_order = [i for i in range(a.type.ndim) if i not in ax_a] + list(ax_a)
        b_order = ([0] if batched else []) + list(ax_b)
        b_order += [i for i in range(b.type.ndim) if i not in ax_b and not (batched and i == 0)]
        return _tensordot_as_dot(a.dimshuffle(a_order), b.dimshuffle(b_order), len(ax_a), batched)
    n = int(axes)
    batch = 1 if batched else 0
    for k, v in enumerate((a, b)):
        if n < 0 or n > v.type.ndim - batch:
            raise ValueError(
                f"{name}: cannot contract {n} axes of input {k}, which has {v.type.ndim} "
                "dimension(s)" + (" including the batch axis" if batched else "")
            )
    a_dims = [a.shape[i] for i in range(a.type.ndim)]
    b_dims = [b.shape[i] for i in range(b.type.ndim)]
    a_free, b_free = a_dims[batch : a.type.ndim - n], b_dims[batch + n :]
    a_shape = [_product(a_free), _product(a_dims[a.type.ndim - n :])]
    b_shape = [_product(b_dims[batch : batch + n]), _product(b_free)]
    if batched:
        a_shape.insert(0, a_dims[0])
        b_shape.insert(0, b_dims[0])
    product = batched_dot if batched else dot
    out = product(a.reshape(a_shape, ndim=len(a_shape)), b.reshape(b_shape, ndim=len(b_shape)))
    out_dims = a_dims[: a.type.ndim - n] + b_free
    out_bcast = a.type.broadcastable[: a.type.ndim - n] + b.type.broadcastable[batch + n :]
    out = out.reshape(out_dims, ndim=len(out_dims)) if out_dims else out.reshape([], ndim=0)
    return patternbroadcast(out, out_bcast)


def tensordot(a: Any, b: Any, axes: Any = 2) -> Variable:
    """Sum of products over the given axes (``numpy.tensordot``).

    ``axes`` is an int ``n`` (the last ``n`` axes of ``a`` with the first ``n`` of ``b``) or a
    pair of axis lists ``[[a axes], [b axes]]``.
    """
    return _tensordot_as_dot(a, b, axes, batched=False)


def batched_tensordot(x: Any, y: Any, axes: Any = 2) -> Variable:
    """``tensordot`` of each pair ``x[i], y[i]`` along the first (batch) axis.

    ``axes`` counts or lists the axes to contract, not counting the batch axis (an int ``n``
    contracts the last ``n`` axes of ``x`` with axes ``1..n`` of ``y``).
    """
    return _tensordot_as_dot(x, y, axes, batched=True)


pprint.assign(Dot, OperatorPrinter(special["middle_dot"], -1, "left"))
