"""Linear algebra with SciPy: Cholesky, linear solves, eigvalsh, the matrix exponential, kron.

Theano's ``tensor.slinalg``. Conventions are those of :mod:`opgraph.tensor.nlinalg`: float
inputs, NumPy's output dtype for the input dtype, no aliasing, NaN outputs for non-finite
inputs, and ``numpy.linalg.LinAlgError`` (a ValueError) naming the Op when LAPACK fails.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.op import Op
from opgraph.scalar.type import upcast
from opgraph.tensor import math as tm
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.nlinalg.basic import (
    _dot,
    check_square,
    finite,
    float_input,
    fold_triangle,
    lapack,
    store,
    work_array,
)
from opgraph.tensor.shape import reshape, shape_i
from opgraph.tensor.structure import arange
from opgraph.tensor.type import TensorType


def _linalg() -> Any:
    """``scipy.linalg``, imported on first use (it costs ~0.2 s at ``import opgraph``)."""
    import scipy.linalg

    return scipy.linalg


__all__ = [
    "MATRIX_STRUCTURES",
    "Cholesky",
    "CholeskyGrad",
    "Eigvalsh",
    "EigvalshGrad",
    "Expm",
    "ExpmGrad",
    "Solve",
    "cholesky",
    "eigvalsh",
    "expm",
    "kron",
    "solve",
    "solve_lower_triangular",
    "solve_symmetric",
    "solve_triangular",
    "solve_upper_triangular",
]

MATRIX_STRUCTURES = (
    "general",
    "symmetric",
    "lower_triangular",
    "upper_triangular",
    "hermitian",
    "banded",
    "diagonal",
    "toeplitz",
)


def _triangle_mask(x: Variable, k: int, lower: bool) -> Variable:
    """Boolean mask of the entries ``j <= i + k`` (lower) or ``j >= i + k`` (upper) of ``x``."""
    rows = arange(shape_i(x, 0)).dimshuffle(0, "x") + k
    cols = arange(shape_i(x, 1)).dimshuffle("x", 0)
    return tm.ge(rows, cols) if lower else tm.le(rows, cols)


def _tril(x: Variable, k: int = 0) -> Variable:
    """The lower triangle of matrix ``x`` (on and below diagonal ``k``), zeros elsewhere."""
    return tm.switch(_triangle_mask(x, k, True), x, tm.zeros_like(x))


def _triu(x: Variable, k: int = 0) -> Variable:
    """The upper triangle of matrix ``x`` (on and above diagonal ``k``), zeros elsewhere."""
    return tm.switch(_triangle_mask(x, k, False), x, tm.zeros_like(x))


# ----------------------------------------------------------------------------------------
# Cholesky


class Cholesky(Op):
    """Cholesky factor of a symmetric positive-definite matrix: ``X = L L^T``.

    ``lower=True`` gives lower-triangular ``L`` (reading the lower triangle of ``X``),
    ``lower=False`` the upper factor ``U = L^T``. A matrix that is not positive definite
    raises LinAlgError, or gives NaNs with ``on_error='nan'``. Gradient: :class:`CholeskyGrad`.
    """

    __props__ = ("lower", "destructive", "on_error")

    def __init__(self, lower: bool = True, on_error: str = "raise"):
        if on_error not in ("raise", "nan"):
            raise ValueError(f"Cholesky: on_error must be 'raise' or 'nan', got {on_error!r}")
        self.lower = bool(lower)
        self.destructive = False
        self.on_error = on_error

    def make_node(self, x: Any) -> Apply:
        x = float_input(self, x, 0, "x")
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x = work_array(inputs[0])
        check_square(self, x)
        out = np.full(x.shape, np.nan)
        if finite(x):
            try:
                out = _linalg().cholesky(x, lower=self.lower, check_finite=False)
            except np.linalg.LinAlgError as exc:
                if self.on_error == "raise":
                    raise np.linalg.LinAlgError(
                        f"{self}: the {x.shape} matrix is not positive definite ({exc}).\n"
                        "HINT: pass Cholesky(on_error='nan') to get NaNs instead of an error."
                    ) from exc
        store(output_storage[0], out, node.outputs[0])

    def L_op(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Any) -> list:
        return [CholeskyGrad(self.lower)(inputs[0], outputs[0], grads[0])]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]


cholesky = Cholesky()


class CholeskyGrad(Op):
    """Gradient of :class:`Cholesky` (Murray, "Differentiation of the Cholesky decomposition").

    With ``P = tril(L^T gL)`` with its diagonal halved and ``S = L^{-T} P L^{-1}``, the
    gradient is ``tril(S + S^T) - diag(S)`` (``triu`` for the upper factor): only the
    triangle the factorisation reads receives gradient.
    """

    __props__ = ("lower", "destructive")

    def __init__(self, lower: bool = True):
        self.lower = bool(lower)
        self.destructive = False

    def make_node(self, x: Any, l: Any, gl: Any) -> Apply:
        ins = [as_tensor_variable(i) for i in (x, l, gl)]
        dtype = upcast(*(i.type.dtype for i in ins))
        return Apply(self, ins, [TensorType(dtype, (False, False))()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        _x, chol, gchol = (np.asarray(a, dtype="float64") for a in inputs)
        if not finite(chol, gchol):
            store(output_storage[0], np.full(chol.shape, np.nan), node.outputs[0])
            return
        if not self.lower:
            chol, gchol = chol.T, gchol.T
        phi = np.tril(chol.T @ gchol)
        phi[np.diag_indices_from(phi)] *= 0.5
        hint = "the Cholesky factor is singular."
        inner = lapack(self, _linalg().solve_triangular, chol.T, phi.T, hint=hint)
        s = lapack(self, _linalg().solve_triangular, chol.T, inner.T, hint=hint)
        sym = s + s.T
        grad = np.tril(sym) if self.lower else np.triu(sym)
        grad -= np.diag(np.diag(s))
        store(output_storage[0], grad, node.outputs[0])

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]


# ----------------------------------------------------------------------------------------
# Solve


class Solve(Op):
    """Solution ``x`` of ``A x = b`` for square ``A`` and a vector or matrix ``b``.

    ``A_structure`` picks the solver: 'lower_triangular'/'upper_triangular' (reads that
    triangle only), 'symmetric'/'hermitian' (reads the triangle ``lower`` names), anything
    else a general LU solve. Gradient: ``gb = solve(A^T, gx)``, ``gA = -gb x^T``
    (restricted to the triangle that was read).
    """

    __props__ = ("A_structure", "lower", "overwrite_A", "overwrite_b")

    def __init__(
        self,
        A_structure: str = "general",
        lower: bool = False,
        overwrite_A: bool = False,
        overwrite_b: bool = False,
    ):
        if A_structure not in MATRIX_STRUCTURES:
            raise ValueError(
                f"Solve: A_structure must be one of {MATRIX_STRUCTURES}, got {A_structure!r}"
            )
        self.A_structure = A_structure
        self.lower = bool(lower)
        self.overwrite_A = bool(overwrite_A)
        self.overwrite_b = bool(overwrite_b)

    def __repr__(self) -> str:
        return f"Solve{{{self._props()}}}"

    def make_node(self, A: Any, b: Any) -> Apply:
        A = float_input(self, A, 0, "A")
        b = float_input(self, b, 1, "b", ndims=(1, 2))
        dtype = upcast(A.type.dtype, b.type.dtype)
        return Apply(self, [A, b], [TensorType(dtype, b.type.broadcastable)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        A, b = (work_array(a) for a in inputs)
        check_square(self, A, "A")
        if b.shape[0] != A.shape[0]:
            raise ValueError(
                f"{self}: b has {b.shape[0]} rows but A has shape {A.shape}; "
                "they must have the same number of rows."
            )
        if not finite(A, b):
            out = np.full(b.shape, np.nan)
        elif self.A_structure in ("lower_triangular", "upper_triangular"):
            lower = self.A_structure == "lower_triangular"
            out = lapack(
                self,
                _linalg().solve_triangular,
                A,
                b,
                lower=lower,
                check_finite=False,
                hint="A has a zero on its diagonal (it is singular).",
            )
        else:
            assume = {"symmetric": "sym", "hermitian": "her"}.get(self.A_structure, "gen")
            out = lapack(
                self,
                _linalg().solve,
                A,
                b,
                assume_a=assume,
                lower=self.lower,
                check_finite=False,
                hint="A is singular; use lstsq or pinv for a least-squares solution.",
            )
        store(output_storage[0], out, node.outputs[0])

    def L_op(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Any) -> list:
        (A, _b), (c,), (c_bar,) = inputs, outputs, grads
        transposed = {
            "lower_triangular": "upper_triangular",
            "upper_triangular": "lower_triangular",
        }
        trans_op = Solve(transposed.get(self.A_structure, self.A_structure), not self.lower)
        b_bar = trans_op(A.T, c_bar)
        if c.type.ndim == 1:
            A_bar = -(b_bar.dimshuffle(0, "x") * c.dimshuffle("x", 0))
        else:
            A_bar = -_dot(b_bar, c.T)
        if self.A_structure == "lower_triangular":
            A_bar = _tril(A_bar)
        elif self.A_structure == "upper_triangular":
            A_bar = _triu(A_bar)
        elif self.A_structure in ("symmetric", "hermitian"):
            # Only one triangle of A is read; it carries both halves of the gradient.
            if self.lower:
                A_bar = _tril(A_bar) + _triu(A_bar, 1).T
            else:
                A_bar = _triu(A_bar) + _tril(A_bar, -1).T
        return [A_bar, b_bar]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        a_shape, b_shape = input_shapes
        return [(a_shape[1], *b_shape[1:])]


solve = Solve()
solve_lower_triangular = Solve(A_structure="lower_triangular", lower=True)
solve_upper_triangular = Solve(A_structure="upper_triangular", lower=False)
solve_symmetric = Solve(A_structure="symmetric")


def solve_triangular(a: Any, b: Any, lower: bool = False) -> Variable:
    """Solve ``a x = b`` for triangular ``a`` (its lower triangle if ``lower``, else upper)."""
    return (solve_lower_triangular if lower else solve_upper_triangular)(a, b)


# ----------------------------------------------------------------------------------------
# Eigenvalues of a symmetric (generalised) problem


class Eigvalsh(Op):
    """Eigenvalues (ascending) of symmetric ``a``, or of the problem ``a v = w b v`` for
    symmetric positive-definite ``b`` (``scipy.linalg.eigvalsh``); reads the ``lower``
    (or upper) triangles. Gradient: :class:`EigvalshGrad`, for distinct eigenvalues.
    """

    __props__ = ("lower",)

    def __init__(self, lower: bool = True):
        if lower not in (True, False):
            raise ValueError(f"Eigvalsh: lower must be True or False, got {lower!r}")
        self.lower = lower

    def make_node(self, a: Any, b: Any = None) -> Apply:
        ins = [float_input(self, a, 0, "a")]
        if b is not None and not (isinstance(b, Variable) and getattr(b, "data", 0) is None):
            ins.append(float_input(self, b, 1, "b"))
        dtype = upcast(*(i.type.dtype for i in ins))
        return Apply(self, ins, [TensorType(dtype, (False,))()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        arrays = [work_array(a) for a in inputs]
        for name, arr in zip("ab", arrays, strict=False):
            check_square(self, arr, name)
        if len(arrays) == 2 and arrays[1].shape != arrays[0].shape:
            raise ValueError(f"{self}: a {arrays[0].shape} and b {arrays[1].shape} differ in shape")
        if finite(*arrays):
            w = lapack(
                self,
                _linalg().eigvalsh,
                *arrays,
                lower=self.lower,
                check_finite=False,
                hint="b must be symmetric positive definite.",
            )
        else:
            w = np.full(arrays[0].shape[:1], np.nan)
        store(output_storage[0], w, node.outputs[0])

    def L_op(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Any) -> list:
        res = EigvalshGrad(self.lower)(*inputs, grads[0])
        return res if isinstance(res, list) else [res]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [(input_shapes[0][0],)]


def eigvalsh(a: Any, b: Any = None, lower: bool = True) -> Variable:
    """Eigenvalues of symmetric ``a`` (generalised with positive-definite ``b`` if given)."""
    return Eigvalsh(lower)(a, b)


class EigvalshGrad(Op):
    """Gradient of :class:`Eigvalsh`: ``ga = V diag(gw) V^T``, ``gb = -V diag(gw w) V^T``,
    each folded onto the triangle that was read."""

    __props__ = ("lower",)

    def __init__(self, lower: bool = True):
        self.lower = lower

    def make_node(self, *inputs: Any) -> Apply:
        ins = [as_tensor_variable(i) for i in inputs]
        dtype = upcast(*(i.type.dtype for i in ins))
        outs = [TensorType(dtype, (False, False))() for _ in ins[:-1]]
        return Apply(self, ins, outs)

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        *mats, gw = (np.asarray(a, dtype="float64") for a in inputs)
        w, v = lapack(self, _linalg().eigh, *mats, lower=self.lower)
        grads = [v @ np.diag(gw) @ v.T, -(v @ np.diag(gw * w) @ v.T)]
        for cell, g, var in zip(output_storage, grads, node.outputs, strict=False):
            store(cell, fold_triangle(g, self.lower), var)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return list(input_shapes[:-1])


# ----------------------------------------------------------------------------------------
# Matrix exponential and Kronecker product


class Expm(Op):
    """Matrix exponential ``sum_k A^k / k!`` of a square matrix (``scipy.linalg.expm``).

    Gradient: :class:`ExpmGrad`, the Frechet derivative at ``A^T`` in the direction of the
    output gradient (``scipy.linalg.expm_frechet``), exact for any square ``A``.
    """

    __props__ = ()

    def make_node(self, A: Any) -> Apply:
        A = float_input(self, A, 0, "A")
        return Apply(self, [A], [A.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        A = work_array(inputs[0])
        check_square(self, A, "A")
        out = _linalg().expm(A) if finite(A) else np.full(A.shape, np.nan)
        store(output_storage[0], out, node.outputs[0])

    def L_op(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Any) -> list:
        return [ExpmGrad()(inputs[0], grads[0])]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]


expm = Expm()


class ExpmGrad(Op):
    """Gradient of :class:`Expm`: ``L_exp(A^T, G)``, the Frechet derivative of expm."""

    __props__ = ()

    def make_node(self, A: Any, gA: Any) -> Apply:
        A, gA = as_tensor_variable(A), as_tensor_variable(gA)
        return Apply(self, [A, gA], [TensorType(upcast(A.dtype, gA.dtype), (False, False))()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        A, gA = (np.asarray(a, dtype="float64") for a in inputs)
        if A.size == 0:
            out = np.zeros(A.shape)
        elif finite(A, gA):
            out = _linalg().expm_frechet(A.T, gA, compute_expm=False, check_finite=False)
        else:
            out = np.full(A.shape, np.nan)
        store(output_storage[0], out, node.outputs[0])

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]


def kron(a: Any, b: Any) -> Variable:
    """Kronecker product of ``a`` and ``b``, as ``numpy.kron``.

    The blocks ``a[i, j] * b`` laid out in ``a``'s shape; built from a broadcast product
    and a reshape, so it is differentiable and its gradient needs no special Op.
    """
    a, b = as_tensor_variable(a), as_tensor_variable(b)
    nd = max(a.type.ndim, b.type.ndim)
    if nd == 0:
        return tm.mul(a, b)
    a = a.dimshuffle(["x"] * (nd - a.type.ndim) + list(range(a.type.ndim)))
    b = b.dimshuffle(["x"] * (nd - b.type.ndim) + list(range(b.type.ndim)))
    a_pattern: list[Any] = []
    b_pattern: list[Any] = []
    for i in range(nd):
        a_pattern += [i, "x"]
        b_pattern += ["x", i]
    prod = tm.mul(a.dimshuffle(a_pattern), b.dimshuffle(b_pattern))
    a_shape, b_shape = a.shape, b.shape
    return reshape(prod, [a_shape[i] * b_shape[i] for i in range(nd)], ndim=nd)
