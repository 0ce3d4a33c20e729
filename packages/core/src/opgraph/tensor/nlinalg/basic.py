"""Helpers shared by the linear-algebra modules, and inverse, determinant, diagonals, trace."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import reduce
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.null_type import DisconnectedType
from opgraph.graph.op import Op
from opgraph.scalar.type import float_dtypes, upcast
from opgraph.tensor import math as tm
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.dot import dot
from opgraph.tensor.type import TensorType

__all__ = [
    "AllocDiag",
    "Det",
    "ExtractDiag",
    "ExtractDiagGrad",
    "MatrixInverse",
    "MatrixPinv",
    "alloc_diag",
    "det",
    "diag",
    "extract_diag",
    "matrix_dot",
    "matrix_inverse",
    "matrix_power",
    "pinv",
    "trace",
]

_RANK = {0: "scalar", 1: "vector", 2: "matrix"}


# ----------------------------------------------------------------------------------------
# Shared checks (slinalg uses them too)


def float_input(op: Any, x: Any, pos: int, name: str, ndims: Sequence[int] = (2,)) -> Variable:
    """``x`` as a tensor of one of ``ndims`` dimensions and a float dtype, else TypeError."""
    x = as_tensor_variable(x)
    if x.type.ndim not in ndims:
        want = " or ".join(_RANK.get(n, f"{n}-d tensor") for n in ndims)
        raise TypeError(
            f"{op}: input {pos} ({name}) must be a {want}, got {x} of type {x.type} "
            f"({x.type.ndim} dimension(s))."
        )
    if x.type.dtype not in float_dtypes:
        raise TypeError(
            f"{op}: input {pos} ({name}) must have a float dtype, got {x} of type {x.type}.\n"
            f"HINT: cast it first, e.g. opgraph.tensor.cast({x.name or name}, 'float64')."
        )
    return x


def work_array(a: np.ndarray) -> np.ndarray:
    """``a`` in a dtype LAPACK accepts (float16 is computed in float32)."""
    return a.astype("float32") if a.dtype == np.float16 else a


def check_square(op: Any, a: np.ndarray, name: str = "the input") -> None:
    """Raise ValueError naming ``op`` unless ``a`` is a square matrix."""
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"{op} needs a square matrix for {name}, got shape {a.shape}.")


def finite(*arrays: np.ndarray) -> bool:
    """True when every value of every array is finite."""
    return all(bool(np.isfinite(a).all()) for a in arrays)


def lapack(op: Any, fn: Callable[..., Any], *args: Any, hint: str = "", **kwargs: Any) -> Any:
    """Call ``fn``; a LinAlgError is re-raised naming ``op`` and the input shapes."""
    try:
        return fn(*args, **kwargs)
    except np.linalg.LinAlgError as exc:
        shapes = ", ".join(str(np.shape(a)) for a in args if isinstance(a, np.ndarray))
        msg = f"{op} failed on input(s) of shape {shapes}: {exc}."
        raise np.linalg.LinAlgError(msg + (f"\nHINT: {hint}" if hint else "")) from exc


def store(cell: list[Any], value: Any, var: Variable) -> None:
    """Write ``value`` to an output cell as a fresh array of ``var``'s dtype."""
    cell[0] = np.array(value, dtype=var.type.dtype)


def smin(a: Any, b: Any) -> Any:
    """``min`` of two dimensions that may be symbolic."""
    if isinstance(a, Variable) or isinstance(b, Variable):
        return tm.minimum(a, b)
    return min(int(a), int(b))


def smax(a: Any, b: Any) -> Any:
    """``max`` of two dimensions that may be symbolic."""
    if isinstance(a, Variable) or isinstance(b, Variable):
        return tm.maximum(a, b)
    return max(int(a), int(b))


def zeros_if_disconnected(grads: Sequence[Any], outputs: Sequence[Variable]) -> list[Variable]:
    """Replace disconnected output gradients by zeros like the output."""
    return [
        tm.zeros_like(o) if g is None or isinstance(g.type, DisconnectedType) else g
        for g, o in zip(grads, outputs, strict=True)
    ]


def fold_triangle(g: np.ndarray, lower: bool) -> np.ndarray:
    """Gradient of a function reading only one triangle of a symmetric matrix."""
    if lower:
        return np.tril(g) + np.triu(g, 1).T
    return np.triu(g) + np.tril(g, -1).T


def _dot(a: Any, b: Any) -> Variable:
    return dot(a, b)


def matrix_dot(*args: Any) -> Variable:
    """The product of several matrices: ``matrix_dot(a, b, c) == dot(dot(a, b), c)``."""
    if not args:
        raise TypeError("matrix_dot needs at least one matrix")
    return reduce(_dot, [as_tensor_variable(a) for a in args])


def _identity_like(m: Variable) -> Variable:
    """The identity matrix of the shape of square matrix ``m``."""
    return alloc_diag(tm.ones_like(extract_diag(m)))


# ----------------------------------------------------------------------------------------
# Inverse, pseudo-inverse, determinant


class MatrixInverse(Op):
    """Inverse of a square matrix: ``X^{-1}`` with ``X X^{-1} = I``.

    Gradient: ``-X^{-T} G X^{-T}``; R_op: ``-X^{-1} V X^{-1}``.
    """

    __props__ = ()

    def make_node(self, x: Any) -> Apply:
        x = float_input(self, x, 0, "x")
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x = work_array(inputs[0])
        check_square(self, x)
        if not finite(x):
            out = np.full(x.shape, np.nan)
        else:
            hint = "the matrix is singular; use pinv for a pseudo-inverse, or solve(A, b)."
            out = lapack(self, np.linalg.inv, x, hint=hint)
        store(output_storage[0], out, node.outputs[0])

    def L_op(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Any) -> list:
        (xi,), (gz,) = outputs, grads
        return [-matrix_dot(xi, gz.T, xi).T]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list:
        if eval_points[0] is None:
            return [None]
        xi = self(inputs[0])
        return [-matrix_dot(xi, eval_points[0], xi)]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]


matrix_inverse = MatrixInverse()


class MatrixPinv(Op):
    """Moore-Penrose pseudo-inverse ``X^+`` of an ``m x n`` matrix (an ``n x m`` matrix).

    The gradient (Golub and Pereyra) holds where the rank of ``X`` is locally constant.
    """

    __props__ = ()

    def make_node(self, x: Any) -> Apply:
        x = float_input(self, x, 0, "x")
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x = work_array(inputs[0])
        if not finite(x):
            out = np.full(x.shape[::-1], np.nan)
        else:
            out = lapack(self, np.linalg.pinv, x)
        store(output_storage[0], out, node.outputs[0])

    def L_op(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Any) -> list:
        (x,), (z,), (gz,) = inputs, outputs, grads
        xz, zx = _dot(x, z), _dot(z, x)
        g = (
            -matrix_dot(z, gz.T, z)
            + matrix_dot(z, z.T, gz, _identity_like(xz) - xz)
            + matrix_dot(_identity_like(zx) - zx, gz, z.T, z)
        )
        return [g.T]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        m, n = input_shapes[0]
        return [(n, m)]


pinv = MatrixPinv()


class Det(Op):
    """Determinant of a square matrix (a 0-d tensor); ``det`` of a 0 x 0 matrix is 1.

    Gradient: ``g * det(X) * X^{-T}``; R_op: ``det(X) * trace(X^{-1} V)``.
    """

    __props__ = ()

    def make_node(self, x: Any) -> Apply:
        x = float_input(self, x, 0, "x")
        return Apply(self, [x], [TensorType(x.type.dtype, ())()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x = work_array(inputs[0])
        check_square(self, x)
        out = lapack(self, np.linalg.det, x) if finite(x) else np.nan
        store(output_storage[0], out, node.outputs[0])

    def L_op(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Any) -> list:
        (x,), (d,), (gz,) = inputs, outputs, grads
        return [gz * d * matrix_inverse(x).T]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list:
        if eval_points[0] is None:
            return [None]
        x = inputs[0]
        return [self(x) * trace(_dot(matrix_inverse(x), eval_points[0]))]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [()]

    def __str__(self) -> str:
        return "Det"


det = Det()


def matrix_power(M: Any, n: int) -> Variable:
    """``M`` multiplied by itself ``n`` times (by repeated squaring); negative ``n`` inverts."""
    M = float_input("matrix_power", M, 0, "M")
    if not isinstance(n, int | np.integer):
        raise TypeError(f"matrix_power: n must be a Python int, got {n!r}")
    if n < 0:
        M, n = matrix_inverse(M), -int(n)
    if n == 0:
        return _identity_like(M)
    result, base = None, M
    while n:
        if n & 1:
            result = base if result is None else _dot(result, base)
        n >>= 1
        if n:
            base = _dot(base, base)
    return result  # type: ignore[return-value]


# ----------------------------------------------------------------------------------------
# Diagonals and trace


class ExtractDiag(Op):
    """The diagonal ``x[..., i, i + offset]`` over axes ``axis1, axis2``, as the last axis.

    Same as ``numpy.diagonal(x, offset, axis1, axis2)``, returned as a copy.
    """

    __props__ = ("offset", "axis1", "axis2", "view")

    def __init__(self, offset: int = 0, axis1: int = 0, axis2: int = 1, view: bool = False):
        if axis1 == axis2:
            raise ValueError(f"ExtractDiag: axis1 and axis2 must differ, got {axis1} twice")
        self.offset, self.axis1, self.axis2, self.view = int(offset), axis1, axis2, bool(view)
        if self.view:
            self.view_map = {0: [0]}

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        nd = x.type.ndim
        if nd < 2 or not (-nd <= self.axis1 < nd and -nd <= self.axis2 < nd):
            raise TypeError(
                f"{self}: input 0 (x) needs at least 2 dimensions including axes "
                f"{self.axis1} and {self.axis2}, got {x} of type {x.type}."
            )
        axes = (self.axis1 % nd, self.axis2 % nd)
        bcast = [b for i, b in enumerate(x.type.broadcastable) if i not in axes] + [False]
        return Apply(self, [x], [TensorType(x.type.dtype, bcast)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        out = np.diagonal(inputs[0], self.offset, self.axis1, self.axis2)
        output_storage[0][0] = out if self.view else out.copy()

    def L_op(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Any) -> list:
        return [ExtractDiagGrad(self.offset, self.axis1, self.axis2)(inputs[0], grads[0])]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list:
        return [None if eval_points[0] is None else self(eval_points[0])]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        (shp,) = input_shapes
        nd = len(shp)
        a1, a2 = self.axis1 % nd, self.axis2 % nd
        rest = [s for i, s in enumerate(shp) if i not in (a1, a2)]
        if self.offset >= 0:
            n = smin(shp[a1], shp[a2] - self.offset)
        else:
            n = smin(shp[a1] + self.offset, shp[a2])
        return [(*rest, smax(n, 0))]


class ExtractDiagGrad(Op):
    """Zeros shaped like ``x`` with ``gz`` on the diagonal ExtractDiag reads (its gradient)."""

    __props__ = ("offset", "axis1", "axis2")

    def __init__(self, offset: int = 0, axis1: int = 0, axis2: int = 1):
        self.offset, self.axis1, self.axis2 = int(offset), axis1, axis2

    def make_node(self, x: Any, gz: Any) -> Apply:
        x, gz = as_tensor_variable(x), as_tensor_variable(gz)
        if gz.type.ndim != x.type.ndim - 1:
            raise TypeError(f"{self}: gz must have {x.type.ndim - 1} dimensions, got {gz.type}")
        dtype = upcast(x.type.dtype, gz.type.dtype)
        return Apply(self, [x, gz], [TensorType(dtype, x.type.broadcastable)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x, gz = inputs
        out = np.zeros(x.shape, dtype=node.outputs[0].type.dtype)
        diag = np.diagonal(out, self.offset, self.axis1, self.axis2)
        diag.setflags(write=True)
        diag[...] = gz
        output_storage[0][0] = out

    def L_op(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Any) -> list:
        x = inputs[0]
        return [
            tm.zeros_like(x),
            ExtractDiag(self.offset, self.axis1, self.axis2)(grads[0]),
        ]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]


class AllocDiag(Op):
    """A matrix of zeros with the vector ``x`` on diagonal ``offset`` (``numpy.diag(x, k)``).

    Its size is ``len(x) + |offset|``; the gradient is the same diagonal of the output grad.
    """

    __props__ = ("offset",)

    def __init__(self, offset: int = 0):
        self.offset = int(offset)

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        if x.type.ndim != 1:
            raise TypeError(f"{self}: input 0 (x) must be a vector, got {x} of type {x.type}.")
        return Apply(self, [x], [TensorType(x.type.dtype, (False, False))()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        store(output_storage[0], np.diag(inputs[0], self.offset), node.outputs[0])

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list:
        return [ExtractDiag(self.offset)(output_grads[0])]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list:
        return [None if eval_points[0] is None else self(eval_points[0])]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        n = input_shapes[0][0] + abs(self.offset)
        return [(n, n)]


alloc_diag = AllocDiag()
extract_diag = ExtractDiag()


def diag(x: Any, k: int = 0) -> Variable:
    """A vector gives the matrix with it on diagonal ``k``; a matrix gives its ``k``-th diagonal."""
    x = as_tensor_variable(x)
    if x.type.ndim == 1:
        return AllocDiag(k)(x)
    if x.type.ndim == 2:
        return ExtractDiag(k)(x)
    raise TypeError(f"diag needs a vector or a matrix, got {x} of type {x.type}")


def trace(X: Any) -> Variable:
    """Sum of the main diagonal of matrix ``X``."""
    X = as_tensor_variable(X)
    if X.type.ndim != 2:
        raise TypeError(f"trace needs a matrix, got {X} of type {X.type}")
    return tm.sum(extract_diag(X))
