"""Decompositions: eigen (Eig, Eigh), SVD and QR with their gradients, and matrix norms."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.null_type import grad_not_implemented
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
    smin,
    store,
    work_array,
    zeros_if_disconnected,
)
from opgraph.tensor.reduction import max as tmax
from opgraph.tensor.reduction import min as tmin
from opgraph.tensor.type import TensorType

__all__ = [
    "SVD",
    "Eig",
    "Eigh",
    "EighGrad",
    "QRFull",
    "QRGrad",
    "QRIncomplete",
    "SVDGrad",
    "eig",
    "eigh",
    "norm",
    "qr",
    "svd",
]


# ----------------------------------------------------------------------------------------
# Eigen-decompositions


class Eig(Op):
    """Eigenvalues ``w`` and right eigenvectors ``v`` of a square matrix (``numpy.linalg.eig``).

    Outputs are always complex (complex64 for float32 input, complex128 otherwise), since a
    real matrix may have complex eigenvalues. Not differentiable.
    """

    __props__ = ()

    def make_node(self, x: Any) -> Apply:
        x = float_input(self, x, 0, "x")
        dtype = "complex64" if x.type.dtype in ("float16", "float32") else "complex128"
        return Apply(self, [x], [TensorType(dtype, (False,))(), TensorType(dtype, (False,) * 2)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x = work_array(inputs[0])
        check_square(self, x)
        if finite(x):
            w, v = lapack(self, np.linalg.eig, x)
        else:
            w, v = np.full(x.shape[:1], np.nan), np.full(x.shape, np.nan)
        store(output_storage[0], w, node.outputs[0])
        store(output_storage[1], v, node.outputs[1])

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        n = input_shapes[0][0]
        return [(n,), (n, n)]


eig = Eig()


class Eigh(Op):
    """Eigenvalues ``w`` (ascending) and eigenvectors ``v`` of a symmetric matrix.

    Only the triangle named by ``UPLO`` ('L' or 'U') is read, as in ``numpy.linalg.eigh``.
    The gradient (:class:`EighGrad`) assumes distinct eigenvalues.
    """

    __props__ = ("UPLO",)

    def __init__(self, UPLO: str = "L"):
        if UPLO not in ("L", "U"):
            raise ValueError(f"Eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
        self.UPLO = UPLO

    def make_node(self, x: Any) -> Apply:
        x = float_input(self, x, 0, "x")
        return Apply(self, [x], [TensorType(x.type.dtype, (False,))(), x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x = work_array(inputs[0])
        check_square(self, x)
        if finite(x):
            w, v = lapack(self, np.linalg.eigh, x, self.UPLO)
        else:
            w, v = np.full(x.shape[:1], np.nan), np.full(x.shape, np.nan)
        store(output_storage[0], w, node.outputs[0])
        store(output_storage[1], v, node.outputs[1])

    def L_op(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Any) -> list:
        gw, gv = zeros_if_disconnected(grads, outputs)
        return [EighGrad(self.UPLO)(inputs[0], *outputs, gw, gv)]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        n = input_shapes[0][0]
        return [(n,), (n, n)]


def eigh(a: Any, UPLO: str = "L") -> list[Variable]:
    """``[w, v]``: eigenvalues and eigenvectors of symmetric matrix ``a``."""
    return Eigh(UPLO)(a)


class EighGrad(Op):
    """Gradient of :class:`Eigh`: ``V (diag(gw) + F o (V^T gV)) V^T``, folded on one triangle.

    ``F[i, j] = 1 / (w[j] - w[i])`` off the diagonal. Since eigh reads one triangle only,
    the other triangle's gradient is zero and the read one gets both halves.
    """

    __props__ = ("UPLO",)

    def __init__(self, UPLO: str = "L"):
        self.UPLO = UPLO

    def make_node(self, x: Any, w: Any, v: Any, gw: Any, gv: Any) -> Apply:
        ins = [as_tensor_variable(i) for i in (x, w, v, gw, gv)]
        dtype = upcast(*(i.type.dtype for i in ins))
        return Apply(self, ins, [TensorType(dtype, (False, False))()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        _x, w, v, gw, gv = inputs
        with np.errstate(divide="ignore", invalid="ignore"):
            f = 1.0 / (w[None, :] - w[:, None])
        np.fill_diagonal(f, 0.0)
        g = v @ (np.diag(gw) + f * (v.T @ gv)) @ v.T
        store(output_storage[0], fold_triangle(g, self.UPLO == "L"), node.outputs[0])

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]


# ----------------------------------------------------------------------------------------
# SVD and QR


class SVD(Op):
    """Singular value decomposition ``A = U diag(s) V`` (``numpy.linalg.svd``; V is V^T).

    With ``compute_uv=False`` the only output is ``s``. Gradient: for ``s`` alone always;
    for ``U, s, V`` (:class:`SVDGrad`) with distinct non-zero singular values, and with
    ``full_matrices=True`` only when the cost ignores the extra (non-unique) columns of
    ``U``/rows of ``V``, which a non-square matrix has.
    """

    __props__ = ("full_matrices", "compute_uv")

    def __init__(self, full_matrices: bool = True, compute_uv: bool = True):
        self.full_matrices, self.compute_uv = bool(full_matrices), bool(compute_uv)

    def make_node(self, x: Any) -> Apply:
        x = float_input(self, x, 0, "x")
        s = TensorType(x.type.dtype, (False,))()
        return Apply(self, [x], [x.type(), s, x.type()] if self.compute_uv else [s])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x = work_array(inputs[0])
        if finite(x):
            res = lapack(self, np.linalg.svd, x, self.full_matrices, self.compute_uv)
            res = res if self.compute_uv else (res,)
        else:
            shapes = [tuple(int(s) for s in shp) for shp in self.infer_shape(None, [x.shape])]
            res = [np.full(shp, np.nan) for shp in shapes]
        for cell, val, var in zip(output_storage, res, node.outputs, strict=True):
            store(cell, val, var)

    def L_op(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Any) -> list:
        (x,) = inputs
        if not self.compute_uv:
            u, _s, v = SVD(full_matrices=False)(x)
            return [_dot(u * grads[0].dimshuffle("x", 0), v)]
        gu, gs, gv = zeros_if_disconnected(grads, outputs)
        return [SVDGrad(self.full_matrices)(x, *outputs, gu, gs, gv)]

    def infer_shape(self, node: Apply | None, input_shapes: Sequence[Any]) -> list[Any]:
        m, n = input_shapes[0]
        k = smin(m, n)
        if not self.compute_uv:
            return [(k,)]
        if self.full_matrices:
            return [(m, m), (k,), (n, n)]
        return [(m, k), (k,), (k, n)]


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True) -> Any:
    """``[U, s, V]`` (or ``s`` alone) of matrix ``a``, as ``numpy.linalg.svd``."""
    return SVD(full_matrices, compute_uv)(a)


class SVDGrad(Op):
    """Gradient of :class:`SVD` with vectors (Townsend, "Differentiating the SVD", 2016).

    ``U[(F o (U^T gU - gU^T U)) S + diag(gs) + S (F o (V^T gV - gV^T V))] V^T`` plus the
    terms for the complements of ``U`` and ``V``, with ``F[i, j] = 1 / (s_j^2 - s_i^2)``.
    """

    __props__ = ("full_matrices",)

    def __init__(self, full_matrices: bool = True):
        self.full_matrices = bool(full_matrices)

    def make_node(self, *inputs: Any) -> Apply:
        ins = [as_tensor_variable(i) for i in inputs]
        dtype = upcast(*(i.type.dtype for i in ins))
        return Apply(self, ins, [TensorType(dtype, (False, False))()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        a, u, s, vt, gu, gs, gvt = inputs
        k = s.shape[0]
        if self.full_matrices and (np.any(gu[:, k:]) or np.any(gvt[k:])):
            raise ValueError(
                f"{self}: the cost depends on the extra singular vectors of a non-square "
                f"{a.shape} matrix, which are not unique, so its gradient is undefined.\n"
                "HINT: use svd(x, full_matrices=False)."
            )
        u, gu, v, gv = u[:, :k], gu[:, :k], vt[:k].T, gvt[:k].T
        s2 = s**2
        with np.errstate(divide="ignore", invalid="ignore"):
            f = 1.0 / (s2[None, :] - s2[:, None])
            sinv = 1.0 / s
        np.fill_diagonal(f, 0.0)
        utgu, vtgv = u.T @ gu, v.T @ gv
        inner = (f * (utgu - utgu.T)) * s[None, :] + np.diag(gs)
        inner += s[:, None] * (f * (vtgv - vtgv.T))
        ga = u @ inner @ v.T
        m, n = a.shape
        if m > k:
            ga += (gu - u @ utgu) * sinv[None, :] @ v.T
        if n > k:
            ga += u @ (sinv[:, None] * (gv.T - vtgv.T @ v.T))
        store(output_storage[0], ga, node.outputs[0])

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]


class QRFull(Op):
    """QR decomposition ``A = Q R`` (``numpy.linalg.qr``) for modes 'reduced', 'complete', 'raw'.

    Outputs ``[Q, R]`` (``[H, tau]`` for 'raw'). Gradient (:class:`QRGrad`) in the
    'reduced' and 'complete' modes for matrices of full rank.
    """

    __props__ = ("mode",)

    def __init__(self, mode: str = "reduced"):
        if mode not in ("reduced", "complete", "raw"):
            raise ValueError(f"QRFull: mode must be 'reduced', 'complete' or 'raw', got {mode!r}")
        self.mode = mode

    def make_node(self, x: Any) -> Apply:
        x = float_input(self, x, 0, "x")
        second = TensorType(x.type.dtype, (False,))() if self.mode == "raw" else x.type()
        return Apply(self, [x], [x.type(), second])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x = work_array(inputs[0])
        if finite(x):
            res = lapack(self, np.linalg.qr, x, self.mode)
        else:
            shapes = [tuple(int(s) for s in shp) for shp in self.infer_shape(None, [x.shape])]
            res = [np.full(shp, np.nan) for shp in shapes]
        for cell, val, var in zip(output_storage, res, node.outputs, strict=True):
            store(cell, val, var)

    def L_op(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Any) -> list:
        if self.mode == "raw":
            return [grad_not_implemented(self, 0, inputs[0], "QR 'raw' mode has no gradient.")]
        gq, gr = zeros_if_disconnected(grads, outputs)
        return [QRGrad()(inputs[0], *outputs, gq, gr)]

    def infer_shape(self, node: Apply | None, input_shapes: Sequence[Any]) -> list[Any]:
        m, n = input_shapes[0]
        k = smin(m, n)
        if self.mode == "raw":
            return [(n, m), (k,)]
        if self.mode == "complete":
            return [(m, m), (m, n)]
        return [(m, k), (k, n)]


class QRIncomplete(Op):
    """The ``R`` factor alone of the QR decomposition (``numpy.linalg.qr(a, 'r')``)."""

    __props__ = ("mode",)

    def __init__(self, mode: str = "r"):
        self.mode = mode

    def make_node(self, x: Any) -> Apply:
        x = float_input(self, x, 0, "x")
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x = work_array(inputs[0])
        if finite(x):
            r = lapack(self, np.linalg.qr, x, "r")
        else:
            r = np.full((min(x.shape), x.shape[1]), np.nan)
        store(output_storage[0], r, node.outputs[0])

    def L_op(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Any) -> list:
        q, r = QRFull("reduced")(inputs[0])
        return [QRGrad()(inputs[0], q, r, tm.zeros_like(q), grads[0])]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        m, n = input_shapes[0]
        return [(smin(m, n), n)]


def qr(a: Any, mode: str = "reduced") -> Any:
    """QR decomposition of ``a``: ``[Q, R]`` ('reduced', 'complete'), ``[H, tau]`` ('raw'),
    or ``R`` alone ('r')."""
    if mode == "r":
        return QRIncomplete(mode)(a)
    return QRFull(mode)(a)


class QRGrad(Op):
    """Gradient of the QR decomposition (the rule TensorFlow's ``qr_grad`` uses).

    For ``m >= n``: ``gA = [gQ + Q copyltu(M)] R^{-T}`` with ``M = R gR^T - gQ^T Q``; a wide
    matrix ``[X | Y]`` reduces to the square case on ``X``. The extra columns of a
    'complete' ``Q`` are not unique and must not influence the cost.
    """

    __props__ = ()

    def make_node(self, *inputs: Any) -> Apply:
        ins = [as_tensor_variable(i) for i in inputs]
        dtype = upcast(*(i.type.dtype for i in ins))
        return Apply(self, ins, [TensorType(dtype, (False, False))()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        from scipy.linalg import solve_triangular

        a, q, r, gq, gr = inputs
        m, n = a.shape
        k = min(m, n)
        if np.any(gq[:, k:]):
            raise ValueError(
                f"{self}: the cost depends on the extra columns of the 'complete' Q of a "
                f"{a.shape} matrix, which are not unique, so its gradient is undefined.\n"
                "HINT: use qr(x, mode='reduced')."
            )
        # Rows k: of a 'complete' R are zero whatever A is: their gradient is ignored.
        q, r, gq, gr = q[:, :k], r[:k], gq[:, :k], gr[:k]
        u, gu = r[:, :k], gr[:, :k]
        if n > k:
            gq = gq + a[:, k:] @ gr[:, k:].T
        qdq = q.T @ gq
        rdr = u @ gu.T
        low = np.tril(qdq - qdq.T + rdr - rdr.T)
        hint = "the matrix does not have full rank."
        ga = q @ (gu + lapack(self, solve_triangular, u, low.T, lower=False, hint=hint).T)
        ga += lapack(self, solve_triangular, u, (gq - q @ qdq).T, lower=False, hint=hint).T
        if n > k:
            ga = np.concatenate([ga, q @ gr[:, k:]], axis=1)
        store(output_storage[0], ga, node.outputs[0])

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]


# ----------------------------------------------------------------------------------------
# Norms


def _p_norm(x: Variable, p: float, axis: int | None) -> Variable:
    return tm.sum(abs(x) ** p, axis=axis) ** (1.0 / p)


def norm(x: Any, ord: Any = None) -> Variable:
    """Vector or matrix norm of ``x``, with ``numpy.linalg.norm``'s ``ord`` values.

    Vectors: None/2, inf, -inf, 0 (count of non-zeros), any other p. Matrices: None/'fro',
    'nuc', inf, -inf, 1, -1, 2, -2. 'inf' and '-inf' strings are accepted as in Theano.
    """
    x = float_input("norm", x, 0, "x", ndims=(1, 2))
    ord = {"inf": np.inf, "-inf": -np.inf}.get(ord, ord) if isinstance(ord, str) else ord
    if x.type.ndim == 1:
        if ord is None or ord == 2:
            return tm.sqrt(tm.sum(tm.sqr(x)))
        if ord == np.inf:
            return tmax(abs(x))
        if ord == -np.inf:
            return tmin(abs(x))
        if ord == 0:
            return tm.cast(tm.sum(tm.neq(x, 0)), x.type.dtype)
        if isinstance(ord, int | float | np.number):
            return _p_norm(x, float(ord), None)
        raise ValueError(f"norm: invalid order {ord!r} for a vector")
    if ord is None or ord == "fro":
        return tm.sqrt(tm.sum(tm.sqr(x)))
    if ord == "nuc":
        return tm.sum(svd(x, compute_uv=False))
    table = {
        np.inf: (tmax, 1),
        -np.inf: (tmin, 1),
        1: (tmax, 0),
        -1: (tmin, 0),
    }
    if ord in table:
        reduce_fn, axis = table[ord]
        return reduce_fn(tm.sum(abs(x), axis=axis))
    if ord in (2, -2):
        return (tmax if ord == 2 else tmin)(svd(x, compute_uv=False))
    raise ValueError(f"norm: invalid order {ord!r} for a matrix")
