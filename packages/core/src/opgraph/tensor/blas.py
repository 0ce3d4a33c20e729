"""BLAS ops: ``Gemm``, ``Gemv``, ``Ger``, ``Dot22`` and ``Dot22Scalar`` (Theano's names).

Users rarely build them: the BLAS rewrites of opgraph-optimizers turn ``dot`` and the
scaled sums around it into them (``Z - 0.1 * dot(X, Y)`` becomes one ``Gemm``). Their
Python implementations compute the product with ``numpy.dot``, like ``Dot22`` and ``dot``:
one BLAS library for every product a Python-linked function runs. (SciPy ships its own
OpenBLAS; alternating calls between two OpenBLAS thread pools made a Python-linked RNN step
about 60 times slower on two cores.)

The in-place versions (``Gemm{inplace}``, ``Gemv{inplace}``, ``Ger{destructive}``) write
their result into the buffer of input 0 (``destroy_map = {0: [0]}``); the others never
modify an input. As in reference BLAS, a ``beta`` of 0 means the buffer's contents are
ignored (NaN included) and an ``alpha`` of 0 that the product is not computed. So
``Gemv{inplace}(AllocEmpty(n), 1.0, A, x, 0.0)`` is ``dot(A, x)`` computed into a fresh
buffer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.op import Op
from opgraph.scalar.type import continuous_dtypes, upcast
from opgraph.tensor.basic import as_tensor_variable, patternbroadcast
from opgraph.tensor.dot import dot, outer
from opgraph.tensor.math import cast, mul
from opgraph.tensor.math import sum as tsum
from opgraph.tensor.type import TensorType

__all__ = [
    "Dot22",
    "Dot22Scalar",
    "Gemm",
    "Gemv",
    "Ger",
    "blas_dtypes",
    "gemm_inplace",
    "gemm_no_inplace",
    "gemv_inplace",
    "gemv_no_inplace",
    "ger",
    "ger_destructive",
]

#: The dtypes BLAS has routines for (the rewrites build BLAS ops for these only).
blas_dtypes = ("float32", "float64", "complex64", "complex128")


def _number(v: np.ndarray) -> Any:
    return np.asarray(v).item()


def _check_scalar_input(op: Op, name: str, v: Variable, dtype: str) -> None:
    if v.type.ndim != 0:
        raise TypeError(f"{op}: {name} must be a scalar (0-d tensor), got {v} of type {v.type}")
    if v.type.dtype not in continuous_dtypes or upcast(v.type.dtype, dtype) != dtype:
        raise TypeError(
            f"{op}: {name} ({v}, {v.type.dtype}) must be a float scalar that casts to the "
            f"result's dtype {dtype} without changing it. HINT: cast it to {dtype}."
        )


def _check_operands(op: Op, names: Sequence[str], values: Sequence[Variable], ndims: Sequence[int]):
    dtype = values[0].type.dtype
    for name, v, nd in zip(names, values, ndims, strict=True):
        if v.type.ndim != nd:
            kind = {1: "a vector", 2: "a matrix"}[nd]
            raise TypeError(f"{op}: {name} must be {kind}, got {v} of type {v.type}")
        if v.type.dtype != dtype:
            raise TypeError(
                f"{op}: {', '.join(names)} must have one dtype, got {name} of dtype "
                f"{v.type.dtype} and {names[0]} of dtype {dtype}. HINT: cast them to one dtype."
            )
    if dtype not in continuous_dtypes:
        raise TypeError(f"{op}: needs float or complex operands, got dtype {dtype}")


def _check_product(op: Op, names: str, x: np.ndarray, y: np.ndarray) -> None:
    """Raise if the product ``dot(x, y)`` (operands called ``names``) is not defined."""
    if x.shape[-1] != y.shape[0]:
        first, second = names
        raise ValueError(
            f"{op}: {first} and {second} of shapes {x.shape} and {y.shape} are not aligned: "
            f"{first} has {x.shape[-1]} columns, {second} has length {y.shape[0]} in "
            "dimension 0. HINT: transpose one input, or check which dimension should be "
            "contracted."
        )


def _check_result(op: Op, name: str, z: np.ndarray, shape: tuple[int, ...], of: str) -> None:
    """Raise if the buffer ``z`` (input ``name``) does not have the product's ``shape``."""
    if z.shape != shape:
        raise ValueError(
            f"{op}: {name} has shape {z.shape}, but {of} has shape {shape}; they must be equal."
        )


def _output(
    target: np.ndarray, result: np.ndarray, written: bool, back: bool, inplace: bool
) -> np.ndarray:
    """The op's output from a BLAS ``result`` (transposed back when ``back``).

    In place, the output is ``target``'s buffer: ``written`` says the routine already wrote
    there; otherwise the result is copied in.
    """
    if back:
        result = result.T
    if not inplace or not target.flags.writeable:
        return result  # a read-only buffer (a user's array) is left as it was
    if not written:
        target[...] = result
    return target


def _like(g: Variable, v: Variable) -> Variable:
    """The gradient ``g`` with the broadcastable pattern of the input ``v`` it belongs to."""
    return patternbroadcast(g, v.type.broadcastable)


def _sum_of_product(g: Variable, v: Variable, dtype: str) -> Variable:
    """``sum(g * v)`` cast to ``dtype``: the gradient of a scalar multiplying ``v``."""
    return cast(tsum(mul(g, v)), dtype)


# ---------------------------------------------------------------------------- Gemm


class Gemm(Op):
    """``Z <- b * Z + a * dot(X, Y)`` for matrices ``Z``, ``X``, ``Y`` and scalars ``a``, ``b``.

    Inputs ``(Z, a, X, Y, b)``. Printed ``Gemm{inplace}`` (the result overwrites ``Z``,
    ``destroy_map = {0: [0]}``) or ``Gemm{no_inplace}``. ``Z`` is not read when ``b == 0``,
    ``X`` and ``Y`` not when ``a == 0``.
    """

    __props__ = ("inplace",)

    def __init__(self, inplace: bool = False) -> None:
        self.inplace = bool(inplace)
        self.destroy_map = {0: [0]} if self.inplace else {}

    def __str__(self) -> str:
        return f"Gemm{{{'inplace' if self.inplace else 'no_inplace'}}}"

    def make_node(self, z: Any, a: Any, x: Any, y: Any, b: Any) -> Apply:
        z, a, x, y, b = (as_tensor_variable(v) for v in (z, a, x, y, b))
        _check_operands(self, ("Z", "X", "Y"), (z, x, y), (2, 2, 2))
        _check_scalar_input(self, "a", a, z.type.dtype)
        _check_scalar_input(self, "b", b, z.type.dtype)
        return Apply(self, [z, a, x, y, b], [z.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        z, a, x, y, b = inputs
        _check_product(self, "XY", x, y)
        _check_result(self, "Z", z, (x.shape[0], y.shape[1]), "dot(X, Y)")
        alpha, beta = _number(a), _number(b)
        result = _gemm_numpy(z, alpha, x, y, beta).astype(z.dtype, copy=False)
        output_storage[0][0] = _output(z, result, False, False, self.inplace)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        z, a, x, y, b = inputs
        (g,) = output_grads
        return [
            mul(b, g),
            _sum_of_product(g, dot(x, y), a.type.dtype),
            _like(mul(a, dot(g, y.T)), x),
            _like(mul(a, dot(x.T, g)), y),
            _sum_of_product(g, z, b.type.dtype),
        ]


def _gemm_numpy(z: np.ndarray, alpha: Any, x: np.ndarray, y: np.ndarray, beta: Any) -> np.ndarray:
    """``beta * z + alpha * dot(x, y)`` with BLAS's conventions for zero scalars."""
    product = np.dot(x, y) if alpha != 0 else np.zeros(z.shape, z.dtype)
    if beta == 0:
        return alpha * product
    return beta * z + alpha * product


gemm_no_inplace = Gemm(inplace=False)
gemm_inplace = Gemm(inplace=True)


# ---------------------------------------------------------------------------- Gemv


class Gemv(Op):
    """``y <- b * y + a * dot(A, x)`` for a matrix ``A``, vectors ``x``, ``y``, scalars ``a, b``.

    Inputs ``(y, a, A, x, b)``. Printed ``Gemv{inplace}`` (the result overwrites ``y``,
    ``destroy_map = {0: [0]}``) or ``Gemv{no_inplace}``. ``y`` is not read when ``b == 0``,
    ``A`` and ``x`` not when ``a == 0``.
    """

    __props__ = ("inplace",)

    def __init__(self, inplace: bool = False) -> None:
        self.inplace = bool(inplace)
        self.destroy_map = {0: [0]} if self.inplace else {}

    def __str__(self) -> str:
        return f"Gemv{{{'inplace' if self.inplace else 'no_inplace'}}}"

    def make_node(self, y: Any, a: Any, A: Any, x: Any, b: Any) -> Apply:
        y, a, A, x, b = (as_tensor_variable(v) for v in (y, a, A, x, b))
        _check_operands(self, ("y", "A", "x"), (y, A, x), (1, 2, 1))
        _check_scalar_input(self, "a", a, y.type.dtype)
        _check_scalar_input(self, "b", b, y.type.dtype)
        return Apply(self, [y, a, A, x, b], [y.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        y, a, A, x, b = inputs
        _check_product(self, "Ax", A, x)
        _check_result(self, "y", y, A.shape[:1], "dot(A, x)")
        alpha, beta = _number(a), _number(b)
        result = _gemm_numpy(y, alpha, A, x, beta).astype(y.dtype, copy=False)
        output_storage[0][0] = _output(y, result, False, False, self.inplace)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        y, a, A, x, b = inputs
        (g,) = output_grads
        return [
            mul(b, g),
            _sum_of_product(g, dot(A, x), a.type.dtype),
            mul(a, outer(g, x)),
            mul(a, dot(A.T, g)),
            _sum_of_product(g, y, b.type.dtype),
        ]


gemv_no_inplace = Gemv(inplace=False)
gemv_inplace = Gemv(inplace=True)


# ---------------------------------------------------------------------------- Ger


class Ger(Op):
    """``A <- A + a * outer(x, y)`` for a matrix ``A``, vectors ``x``, ``y`` and a scalar ``a``.

    Inputs ``(A, a, x, y)``. Printed ``Ger{destructive}`` (the result overwrites ``A``,
    ``destroy_map = {0: [0]}``) or ``Ger{non-destructive}``. Complex values use BLAS's
    unconjugated ``geru``.
    """

    __props__ = ("destructive",)

    def __init__(self, destructive: bool = False) -> None:
        self.destructive = bool(destructive)
        self.destroy_map = {0: [0]} if self.destructive else {}

    def __str__(self) -> str:
        return f"Ger{{{'destructive' if self.destructive else 'non-destructive'}}}"

    def make_node(self, A: Any, a: Any, x: Any, y: Any) -> Apply:
        A, a, x, y = (as_tensor_variable(v) for v in (A, a, x, y))
        _check_operands(self, ("A", "x", "y"), (A, x, y), (2, 1, 1))
        _check_scalar_input(self, "a", a, A.type.dtype)
        return Apply(self, [A, a, x, y], [A.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        A, a, x, y = inputs
        _check_result(self, "A", A, (x.shape[0], y.shape[0]), "outer(x, y)")
        alpha = _number(a)
        result = A.copy() if alpha == 0 else A + alpha * np.outer(x, y)
        result = result.astype(A.dtype, copy=False)
        output_storage[0][0] = _output(A, result, False, False, self.destructive)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        _, a, x, y = inputs
        (g,) = output_grads
        gy_x = dot(g, y)
        return [
            g,
            cast(dot(x, gy_x), a.type.dtype),
            mul(a, gy_x),
            mul(a, dot(x, g)),
        ]


ger = Ger(destructive=False)
ger_destructive = Ger(destructive=True)


# ---------------------------------------------------------------------------- Dot22


def _dot22_type(x: Variable, y: Variable) -> TensorType:
    return TensorType(x.type.dtype, (x.type.broadcastable[0], y.type.broadcastable[1]))


class Dot22(Op):
    """``dot(X, Y)`` for two matrices of one float dtype (NumPy's BLAS-backed ``dot``)."""

    __props__ = ()

    def make_node(self, x: Any, y: Any) -> Apply:
        x, y = as_tensor_variable(x), as_tensor_variable(y)
        _check_operands(self, ("X", "Y"), (x, y), (2, 2))
        return Apply(self, [x, y], [_dot22_type(x, y)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x, y = inputs
        _check_product(self, "XY", x, y)
        output_storage[0][0] = np.asarray(np.dot(x, y), dtype=x.dtype)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        xshp, yshp = input_shapes
        return [(xshp[0], yshp[1])]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        x, y = inputs
        (g,) = output_grads
        return [_like(dot(g, y.T), x), _like(dot(x.T, g), y)]


class Dot22Scalar(Op):
    """``a * dot(X, Y)`` for two matrices of one float dtype and a scalar ``a`` (one gemm).

    Inputs ``(X, Y, a)``, as in Theano.
    """

    __props__ = ()

    def make_node(self, x: Any, y: Any, a: Any) -> Apply:
        x, y, a = as_tensor_variable(x), as_tensor_variable(y), as_tensor_variable(a)
        _check_operands(self, ("X", "Y"), (x, y), (2, 2))
        _check_scalar_input(self, "a", a, x.type.dtype)
        return Apply(self, [x, y, a], [_dot22_type(x, y)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x, y, a = inputs
        _check_product(self, "XY", x, y)
        alpha = _number(a)
        out = np.zeros((x.shape[0], y.shape[1]), x.dtype)
        result = _gemm_numpy(out, alpha, x, y, 0)
        output_storage[0][0] = np.asarray(result, dtype=x.dtype)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        xshp, yshp, _ = input_shapes
        return [(xshp[0], yshp[1])]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        x, y, a = inputs
        (g,) = output_grads
        return [
            _like(mul(a, dot(g, y.T)), x),
            _like(mul(a, dot(x.T, g)), y),
            _sum_of_product(g, dot(x, y), a.type.dtype),
        ]


#: Theano's instances (``theano.tensor.blas._dot22``, ``_dot22scalar``).
_dot22 = Dot22()
_dot22scalar = Dot22Scalar()
