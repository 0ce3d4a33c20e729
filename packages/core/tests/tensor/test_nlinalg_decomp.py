"""nlinalg decompositions (eig, eigh, svd, qr) with their gradients, and norms."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.gradient import NullTypeGradError
from opgraph.gradient import verify_grad as _verify_grad
from opgraph.tensor.nlinalg import (
    SVD,
    Eig,
    Eigh,
    EighGrad,
    QRFull,
    QRIncomplete,
    eig,
    eigh,
    norm,
    qr,
    svd,
)
from opgraph.testing.checks import assert_allclose, check_infer_shape, check_modes

FLOATS = ["float32", "float64"]


def verify_grad(fun: Any, pt: list[np.ndarray], rng: np.random.Generator) -> None:
    """verify_grad on a fixed random weighting of ``fun``'s outputs (any shapes, any number)."""
    ins = [T.TensorType("float64", [False] * np.ndim(p))() for p in pt]
    outs = fun(*ins)
    outs = outs if isinstance(outs, list | tuple) else [outs]
    values = opgraph.function(ins, list(outs))(*pt)
    weights = [rng.random(np.shape(v)) + 0.5 for v in values]

    def cost(*args: Any) -> Any:
        res = fun(*args)
        res = res if isinstance(res, list | tuple) else [res]
        return sum((r * w).sum() for r, w in zip(res, weights, strict=True))

    _verify_grad(cost, pt, rng=rng)


def distinct_spectrum(rng: np.random.Generator, m: int, n: int) -> np.ndarray:
    """A random ``m x n`` matrix with well separated singular values in [1, 3]."""
    k = min(m, n)
    u, _ = np.linalg.qr(rng.standard_normal((m, k)))
    v, _ = np.linalg.qr(rng.standard_normal((n, k)))
    return u @ np.diag(np.linspace(3, 1, k)) @ v.T


@pytest.mark.parametrize("dtype", FLOATS)
def test_forward_matches_numpy_in_every_mode(dtype: str, rng: np.random.Generator) -> None:
    x, t = T.matrix("x", dtype=dtype), T.matrix("t", dtype=dtype)
    a = rng.standard_normal((4, 4)).astype(dtype)
    tall = rng.standard_normal((5, 3)).astype(dtype)
    outs = [*eigh(x), *Eigh("U")(x), *svd(t), *svd(t, False), svd(t, compute_uv=False)]
    outs += [*qr(t), *qr(t, "complete"), qr(t, "r"), *qr(t, "raw")]
    expected = [*np.linalg.eigh(a), *np.linalg.eigh(a, "U"), *np.linalg.svd(tall)]
    expected += [*np.linalg.svd(tall, False), np.linalg.svd(tall, compute_uv=False)]
    expected += [*np.linalg.qr(tall), *np.linalg.qr(tall, "complete"), np.linalg.qr(tall, "r")]
    expected += [*np.linalg.qr(tall, "raw")]
    check_modes([x, t], outs, [a, tall], expected)
    for out, e in zip(outs, expected, strict=True):
        assert out.type.dtype == dtype == np.asarray(e).dtype


def test_eig_is_complex_and_matches_numpy(rng: np.random.Generator) -> None:
    x = T.fmatrix("x")
    a = rng.standard_normal((4, 4)).astype("float32")
    w, v = eig(x)
    assert w.type.dtype == v.type.dtype == "complex64"
    check_modes([x], [w, v], [a], list(np.linalg.eig(a)))
    check_infer_shape([x], [w, v], [a], Eig)


@pytest.mark.nonfinite
def test_empty_and_non_finite_inputs() -> None:
    x = T.dmatrix("x")
    outs = [*eigh(x), *svd(x), *qr(x)]
    for val in opgraph.function([x], outs)(np.zeros((0, 0))):
        assert val.size == 0
    shapes = [(3,), (3, 3), (3, 3), (3,), (3, 3), (3, 3), (3, 3)]
    bad = np.ones((3, 3))
    bad[1, 1] = np.nan
    for val, shp in zip(opgraph.function([x], outs)(bad), shapes, strict=True):
        assert val.shape == shp and np.isnan(val).all()
    s = opgraph.function([x], svd(x, compute_uv=False))(np.full((2, 3), np.inf))
    assert s.shape == (2,) and np.isnan(s).all()


def test_bad_inputs_give_clear_errors() -> None:
    with pytest.raises(ValueError, match="UPLO must be 'L' or 'U'"):
        Eigh("X")
    with pytest.raises(ValueError, match="mode must be"):
        QRFull("economic")
    with pytest.raises(TypeError, match=r"SVD\{.*\}: input 0 \(x\) must be a matrix"):
        svd(T.dtensor3())
    with pytest.raises(ValueError, match="invalid order 'nuc' for a vector"):
        norm(T.dvector(), "nuc")
    x = T.dmatrix("x")
    with pytest.raises(ValueError, match=r"Eigh\{UPLO='L'\} needs a square matrix"):
        opgraph.function([x], eigh(x))(np.ones((2, 3)))


def test_printed_names() -> None:
    assert str(Eigh()) == "Eigh{UPLO='L'}"
    assert str(SVD()) == "SVD{full_matrices=True, compute_uv=True}"
    assert str(QRFull("reduced")) == "QRFull{mode='reduced'}"
    assert str(QRIncomplete("r")) == "QRIncomplete{mode='r'}"


def test_eigh_gradient(rng: np.random.Generator) -> None:
    a = rng.standard_normal((4, 4))
    sym = a + a.T
    verify_grad(lambda x: eigh(x)[0], [sym], rng)
    verify_grad(lambda x: eigh(x), [sym], rng)
    verify_grad(lambda x: Eigh("U")(x), [a], rng)  # reads one triangle only
    x = T.dmatrix("x")
    g = opgraph.grad(eigh(x)[0].sum(), x)
    check_infer_shape([x], g, [sym], EighGrad)
    # sum of the eigenvalues is the trace: its gradient is the identity
    assert_allclose(opgraph.function([x], g)(sym), np.eye(4))


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
def test_svd_gradient(shape: tuple[int, int], rng: np.random.Generator) -> None:
    a = distinct_spectrum(rng, *shape)
    verify_grad(lambda x: svd(x, compute_uv=False), [a], rng)
    verify_grad(lambda x: svd(x, full_matrices=False), [a], rng)
    verify_grad(lambda x: svd(x, full_matrices=False)[0], [a], rng)
    verify_grad(lambda x: svd(x, full_matrices=False)[2], [a], rng)
    if shape[0] == shape[1]:
        verify_grad(svd, [a], rng)


def test_svd_full_matrices_gradient_needs_unique_vectors(rng: np.random.Generator) -> None:
    x = T.dmatrix("x")
    u, s, _v = svd(x)
    ok = opgraph.function([x], opgraph.grad(s.sum() + u[:, :2].sum(), x))
    ok(distinct_spectrum(rng, 4, 2))
    bad = opgraph.function([x], opgraph.grad(u.sum(), x))
    with pytest.raises(ValueError, match=r"not unique.*(?s:.*)full_matrices=False"):
        bad(distinct_spectrum(rng, 4, 2))


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
def test_qr_gradient(shape: tuple[int, int], rng: np.random.Generator) -> None:
    a = distinct_spectrum(rng, *shape)
    verify_grad(qr, [a], rng)
    verify_grad(lambda x: qr(x)[0], [a], rng)
    verify_grad(lambda x: qr(x, "r"), [a], rng)
    if shape[0] <= shape[1]:
        verify_grad(lambda x: qr(x, "complete"), [a], rng)
    x = T.dmatrix("x")
    with pytest.raises(NullTypeGradError, match="raw"):
        opgraph.grad(qr(x, "raw")[0].sum(), x)


def test_infer_shape(rng: np.random.Generator) -> None:
    x = T.dmatrix("x")
    for shape in [(4, 4), (5, 3), (3, 5)]:
        a = rng.standard_normal(shape)
        for full in (True, False):
            check_infer_shape([x], svd(x, full), [a], SVD)
        check_infer_shape([x], svd(x, compute_uv=False), [a], SVD)
        for mode in ("reduced", "complete", "raw"):
            check_infer_shape([x], qr(x, mode), [a], QRFull)
        check_infer_shape([x], qr(x, "r"), [a], QRIncomplete)
    check_infer_shape([x], eigh(x), [rng.standard_normal((3, 3))], Eigh)


VECTOR_ORDS = [None, 2, 1, 3, 0.5, np.inf, -np.inf, "inf", "-inf", 0, -1]
MATRIX_ORDS = [None, "fro", "nuc", np.inf, -np.inf, 1, -1, 2, -2]


@pytest.mark.parametrize("dtype", FLOATS)
def test_norm_matches_numpy(dtype: str, rng: np.random.Generator) -> None:
    v, m = T.vector("v", dtype=dtype), T.matrix("m", dtype=dtype)
    vv = rng.standard_normal(5).astype(dtype)
    vv[2] = 0
    mv = rng.standard_normal((4, 3)).astype(dtype)
    outs = [norm(v, o) for o in VECTOR_ORDS] + [norm(m, o) for o in MATRIX_ORDS]
    numpy_ord = {"inf": np.inf, "-inf": -np.inf}
    with np.errstate(divide="ignore"):  # ord=-1 with a zero entry: NumPy gives 0 too
        expected = [np.linalg.norm(vv, numpy_ord.get(o, o)) for o in VECTOR_ORDS]  # type: ignore[arg-type]
    expected += [np.linalg.norm(mv, o) for o in MATRIX_ORDS]
    tol = 1e-5 if dtype == "float32" else 1e-12
    for mode in ("FAST_COMPILE", "FAST_RUN"):
        got = opgraph.function([v, m], outs, mode=mode)(vv, mv)
        for g, e, o in zip(got, expected, VECTOR_ORDS + MATRIX_ORDS, strict=True):
            np.testing.assert_allclose(g, e, rtol=tol, err_msg=f"ord {o!r}")


def test_norm_gradient(rng: np.random.Generator) -> None:
    verify_grad(lambda v: norm(v), [rng.standard_normal(4)], rng)
    verify_grad(lambda v: norm(v, 3), [rng.standard_normal(4)], rng)
    verify_grad(lambda m: norm(m, "nuc"), [distinct_spectrum(rng, 4, 3)], rng)
    verify_grad(lambda m: norm(m, 2), [distinct_spectrum(rng, 3, 4)], rng)
