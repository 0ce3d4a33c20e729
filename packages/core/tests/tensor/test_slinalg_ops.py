"""slinalg: cholesky, solve (general, triangular, symmetric), eigvalsh, expm, kron."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.linalg

import opgraph
import opgraph.tensor as T
from opgraph.gradient import verify_grad as _verify_grad
from opgraph.tensor.slinalg import (
    Cholesky,
    CholeskyGrad,
    Eigvalsh,
    Expm,
    Solve,
    cholesky,
    eigvalsh,
    expm,
    kron,
    solve,
    solve_lower_triangular,
    solve_symmetric,
    solve_triangular,
    solve_upper_triangular,
)
from opgraph.testing.checks import assert_allclose, check_infer_shape, check_modes

FLOATS = ["float32", "float64"]


def verify_grad(fun: Any, pt: list[np.ndarray], rng: np.random.Generator) -> None:
    """verify_grad on a fixed random weighting of ``fun``'s output (any shape)."""
    ins = [T.TensorType("float64", [False] * np.ndim(p))() for p in pt]
    shape = np.shape(opgraph.function(ins, fun(*ins))(*pt))
    weights = rng.random(shape) + 0.5
    _verify_grad(lambda *a: (fun(*a) * weights).sum(), pt, rng=rng)


def spd(rng: np.random.Generator, n: int, dtype: str = "float64") -> np.ndarray:
    """A random symmetric positive-definite matrix with eigenvalues in [1, n + 1]."""
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return (q @ np.diag(np.linspace(1, n + 1, n)) @ q.T).astype(dtype)


def triangular(rng: np.random.Generator, n: int, lower: bool, dtype: str = "float64") -> np.ndarray:
    a = rng.standard_normal((n, n)) * 0.3 + np.diag(rng.uniform(1, 2, n))
    return (np.tril(a) if lower else np.triu(a)).astype(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_forward_matches_scipy_in_every_mode(dtype: str, rng: np.random.Generator) -> None:
    a, b, v = T.matrix("a", dtype=dtype), T.matrix("b", dtype=dtype), T.vector("v", dtype=dtype)
    s, s2 = spd(rng, 4, dtype), spd(rng, 4, dtype)
    bv, vv = rng.standard_normal((4, 2)).astype(dtype), rng.standard_normal(4).astype(dtype)
    chol, tri = scipy.linalg.cholesky, scipy.linalg.solve_triangular
    outs = [cholesky(a), Cholesky(lower=False)(a), solve(a, b), solve(a, v), solve_symmetric(a, b)]
    outs += [eigvalsh(a), expm(a)]
    expected = [chol(s, lower=True), chol(s), np.linalg.solve(s, bv), np.linalg.solve(s, vv)]
    expected += [np.linalg.solve(s, bv), np.linalg.eigvalsh(s), scipy.linalg.expm(s)]
    check_modes([a, b, v], outs, [s, bv, vv], expected)
    low, up = triangular(rng, 4, True, dtype), triangular(rng, 4, False, dtype)
    more = [solve_lower_triangular(a, v), solve_upper_triangular(a, b), eigvalsh(a, b)]
    check_modes([a, v], more[0], [low, vv], tri(low, vv, lower=True))
    check_modes([a, b], more[1], [up, bv], tri(up, bv))
    check_modes([a, b], more[2], [s, s2], scipy.linalg.eigvalsh(s, s2))
    for out in outs + more:
        assert out.type.dtype == dtype


def test_kron_matches_numpy(mode: str, rng: np.random.Generator) -> None:
    m1, m2, v1, t3 = T.dmatrix("m1"), T.dmatrix("m2"), T.dvector("v1"), T.dtensor3("t3")
    a, b, c, d = rng.random((2, 3)), rng.random((4, 2)), rng.random(3), rng.random((2, 2, 2))
    outs = [kron(m1, m2), kron(v1, m1), kron(m1, v1), kron(v1, v1), kron(t3, m1)]
    expected = [np.kron(a, b), np.kron(c, a), np.kron(a, c), np.kron(c, c), np.kron(d, a)]
    check_modes([m1, m2, v1, t3], outs, [a, b, c, d], expected, modes=[mode])


def test_empty_matrices() -> None:
    a, b = T.dmatrix("a"), T.dmatrix("b")
    e = np.zeros((0, 0))
    got = opgraph.function([a, b], [cholesky(a), solve(a, b), eigvalsh(a), expm(a)])(e, e)
    assert [g.shape for g in got] == [(0, 0), (0, 0), (0,), (0, 0)]


@pytest.mark.nonfinite
def test_non_finite_input_gives_nan() -> None:
    a, b = T.dmatrix("a"), T.dmatrix("b")
    bad = np.eye(3)
    bad[0, 1] = np.nan
    outs = [cholesky(a), solve(a, b), eigvalsh(a), expm(a), solve_lower_triangular(a, b)]
    for val in opgraph.function([a, b], outs)(bad, np.ones((3, 2))):
        assert np.isnan(val).all()


@pytest.mark.nonfinite
def test_cholesky_not_positive_definite() -> None:
    a = T.dmatrix("a")
    not_pd = np.array([[1.0, 2.0], [2.0, 1.0]])
    f = opgraph.function([a], cholesky(a))
    with pytest.raises(np.linalg.LinAlgError, match=r"(?s)Cholesky.*not positive definite.*nan"):
        f(not_pd)
    out = opgraph.function([a], Cholesky(on_error="nan")(a))(not_pd)
    assert out.shape == (2, 2) and np.isnan(out).all()


def test_singular_solve_raises_naming_the_op() -> None:
    a, b = T.dmatrix("a"), T.dvector("b")
    with pytest.raises(np.linalg.LinAlgError, match=r"(?s)Solve.*singular"):
        opgraph.function([a, b], solve(a, b))(np.ones((3, 3)), np.ones(3))
    with pytest.raises(np.linalg.LinAlgError, match=r"(?s)Solve.*zero on its diagonal"):
        opgraph.function([a, b], solve_upper_triangular(a, b))(np.zeros((3, 3)), np.ones(3))


def test_bad_inputs_give_clear_errors() -> None:
    with pytest.raises(ValueError, match="A_structure must be one of"):
        Solve("sparse")
    with pytest.raises(ValueError, match="on_error must be 'raise' or 'nan'"):
        Cholesky(on_error="ignore")
    with pytest.raises(TypeError, match=r"input 1 \(b\) must be a vector or matrix"):
        solve(T.dmatrix(), T.dtensor3())
    with pytest.raises(TypeError, match=r"(?s)Cholesky.*input 0 \(x\) must have a float dtype"):
        cholesky(T.lmatrix())
    a, b = T.dmatrix("a"), T.dvector("b")
    with pytest.raises(ValueError, match="b has 2 rows but A has shape"):
        opgraph.function([a, b], solve(a, b))(np.eye(3), np.ones(2))
    with pytest.raises(ValueError, match="Expm needs a square matrix for A"):
        opgraph.function([a], expm(a))(np.ones((2, 3)))


def test_printed_names() -> None:
    assert str(cholesky) == "Cholesky{lower=True, destructive=False, on_error='raise'}"
    assert str(solve).startswith("Solve{A_structure='general'")
    assert repr(solve) == "Solve{('general', False, False, False)}"
    assert str(Eigvalsh()) == "Eigvalsh{lower=True}"
    assert str(expm) == "Expm"


def test_gradients(rng: np.random.Generator) -> None:
    s = spd(rng, 4)
    b, v = rng.standard_normal((4, 3)), rng.standard_normal(4)
    verify_grad(cholesky, [s], rng)
    verify_grad(Cholesky(lower=False), [s], rng)
    verify_grad(solve, [s + rng.standard_normal((4, 4)) * 0.3, b], rng)
    verify_grad(solve, [s, v], rng)
    verify_grad(solve_lower_triangular, [triangular(rng, 4, True), b], rng)
    verify_grad(solve_upper_triangular, [triangular(rng, 4, False), v], rng)
    verify_grad(lambda a, y: solve_triangular(a, y, lower=True), [rng.random((4, 4)) + 2, v], rng)
    verify_grad(solve_symmetric, [s, b], rng)
    verify_grad(Solve("symmetric", lower=True), [s, b], rng)
    verify_grad(eigvalsh, [s + rng.standard_normal((4, 4))], rng)
    verify_grad(eigvalsh, [s + rng.standard_normal((4, 4)), spd(rng, 4)], rng)
    verify_grad(expm, [rng.standard_normal((4, 4))], rng)
    verify_grad(kron, [rng.random((2, 3)), rng.random((3, 2))], rng)


def test_cholesky_gradient_of_log_determinant(rng: np.random.Generator) -> None:
    # log det(X) = 2 sum(log(diag(L))); d/dX = X^{-1}, folded on the lower triangle
    x = T.dmatrix("x")
    from opgraph.tensor.nlinalg import extract_diag

    logdet = 2 * T.log(extract_diag(cholesky(x))).sum()
    s = spd(rng, 4)
    inv = np.linalg.inv(s)
    expected = np.tril(2 * inv) - np.diag(np.diag(inv))
    check_modes([x], opgraph.grad(logdet, x), [s], expected)


def test_infer_shape(rng: np.random.Generator) -> None:
    a, b, v = T.dmatrix("a"), T.dmatrix("b"), T.dvector("v")
    s = spd(rng, 4)
    check_infer_shape([a], cholesky(a), [s], Cholesky)
    check_infer_shape([a, b], solve(a, b), [s, rng.random((4, 2))], Solve)
    check_infer_shape([a, v], solve(a, v), [s, rng.random(4)], Solve)
    check_infer_shape([a], eigvalsh(a), [s], Eigvalsh)
    check_infer_shape([a], expm(a), [s], Expm)
    check_infer_shape([a], opgraph.grad(cholesky(a).sum(), a), [s], CholeskyGrad)
    assert_allclose(opgraph.function([a], kron(a, a).shape)(s), [16, 16])
