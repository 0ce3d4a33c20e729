"""nlinalg basics: inverse, pseudo-inverse, determinant, powers, diagonals, trace."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.gradient import Rop
from opgraph.gradient import verify_grad as _verify_grad
from opgraph.tensor import nlinalg
from opgraph.tensor.nlinalg import (
    AllocDiag,
    Det,
    ExtractDiag,
    MatrixInverse,
    MatrixPinv,
    alloc_diag,
    det,
    diag,
    extract_diag,
    matrix_dot,
    matrix_inverse,
    matrix_power,
    pinv,
    trace,
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


def well_conditioned(rng: np.random.Generator, n: int, dtype: str = "float64") -> np.ndarray:
    """A random ``n x n`` matrix with singular values between 1 and 3."""
    q1, _ = np.linalg.qr(rng.standard_normal((n, n)))
    q2, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return (q1 @ np.diag(np.linspace(1, 3, n)) @ q2).astype(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_forward_matches_numpy_in_every_mode(dtype: str, rng: np.random.Generator) -> None:
    x = T.matrix("x", dtype=dtype)
    t = T.matrix("t", dtype=dtype)
    a = well_conditioned(rng, 4, dtype)
    tall = rng.standard_normal((5, 3)).astype(dtype)
    outs = [matrix_inverse(x), det(x), pinv(t), trace(x), extract_diag(x), matrix_power(x, 3)]
    expected = [
        np.linalg.inv(a),
        np.linalg.det(a),
        np.linalg.pinv(tall),
        np.trace(a),
        np.diag(a),
        np.linalg.matrix_power(a, 3),
    ]
    check_modes([x, t], outs, [a, tall], expected)
    for out, e in zip(outs, expected, strict=True):
        assert out.type.dtype == dtype == np.asarray(e).dtype


def test_matrix_dot_and_powers(rng: np.random.Generator) -> None:
    x, y, z = T.dmatrices("x", "y", "z")
    a, b, c = (rng.standard_normal((3, 3)) for _ in range(3))
    check_modes(
        [x, y, z],
        [matrix_dot(x, y, z), matrix_power(x, 0), matrix_power(x, 5), matrix_power(x, -2)],
        [a, b, c],
        [a @ b @ c, np.eye(3), np.linalg.matrix_power(a, 5), np.linalg.matrix_power(a, -2)],
    )


def test_empty_matrices() -> None:
    x = T.dmatrix("x")
    e = np.zeros((0, 0))
    check_modes(
        [x],
        [matrix_inverse(x), det(x), trace(x), extract_diag(x)],
        [e],
        [e, 1.0, 0.0, np.zeros(0)],
    )
    assert opgraph.function([x], pinv(x))(np.zeros((0, 3))).shape == (3, 0)


@pytest.mark.nonfinite
def test_non_finite_input_gives_nan() -> None:
    x = T.dmatrix("x")
    for bad in (np.nan, np.inf):
        a = np.array([[1.0, bad], [2.0, 3.0]])
        inv, d, p = opgraph.function([x], [matrix_inverse(x), det(x), pinv(x)])(a)
        assert np.isnan(inv).all() and np.isnan(d) and np.isnan(p).all()


def test_singular_matrix_raises_naming_the_op() -> None:
    x = T.dmatrix("x")
    f = opgraph.function([x], matrix_inverse(x))
    with pytest.raises(np.linalg.LinAlgError, match=r"MatrixInverse.*Singular matrix") as info:
        f(np.ones((3, 3)))
    assert isinstance(info.value, ValueError)
    assert "HINT" in str(info.value)
    # det of a singular matrix is simply 0
    assert_allclose(opgraph.function([x], det(x))(np.ones((3, 3))), 0.0)


def test_bad_inputs_give_clear_errors() -> None:
    with pytest.raises(TypeError, match=r"MatrixInverse: input 0 \(x\) must be a matrix"):
        matrix_inverse(T.dvector("v"))
    with pytest.raises(
        TypeError, match=r"(?s)must have a float dtype, got m .*HINT: .*cast\(m, 'float64'\)"
    ):
        det(T.imatrix("m"))
    with pytest.raises(TypeError, match="diag needs a vector or a matrix"):
        diag(T.dtensor3())
    with pytest.raises(TypeError, match=r"AllocDiag.*must be a vector"):
        alloc_diag(T.dmatrix())
    with pytest.raises(ValueError, match="axis1 and axis2 must differ"):
        ExtractDiag(0, 1, 1)
    with pytest.raises(TypeError, match="n must be a Python int"):
        matrix_power(T.dmatrix(), 2.5)
    x = T.dmatrix("x")
    with pytest.raises(ValueError, match=r"Det needs a square matrix.*\(2, 3\)"):
        opgraph.function([x], det(x))(np.ones((2, 3)))


def test_printed_names() -> None:
    assert str(matrix_inverse) == "MatrixInverse"
    assert str(det) == "Det"
    assert str(pinv) == "MatrixPinv"
    assert str(AllocDiag(1)) == "AllocDiag{offset=1}"
    assert str(extract_diag) == "ExtractDiag{offset=0, axis1=0, axis2=1, view=False}"
    assert MatrixInverse() == matrix_inverse and hash(Det()) == hash(det)
    assert "MatrixInverse" in nlinalg.__all__ and "svd" in nlinalg.__all__


def test_diagonals_match_numpy(mode: str, rng: np.random.Generator) -> None:
    v, x, t3 = T.dvector("v"), T.dmatrix("x"), T.dtensor3("t3")
    vv, xv, tv = rng.random(3), rng.random((3, 5)), rng.random((2, 3, 4))
    outs = [diag(v), diag(v, 2), diag(v, -1), diag(x), diag(x, 2), diag(x, -1), diag(x, 9)]
    outs += [ExtractDiag(1, 1, 2)(t3), ExtractDiag(-1, 2, 0)(t3)]
    expected = [np.diag(vv), np.diag(vv, 2), np.diag(vv, -1), np.diag(xv), np.diag(xv, 2)]
    expected += [np.diag(xv, -1), np.diag(xv, 9)]
    expected += [np.diagonal(tv, 1, 1, 2), np.diagonal(tv, -1, 2, 0)]
    check_modes([v, x, t3], outs, [vv, xv, tv], expected, modes=[mode])
    out = opgraph.function([x], extract_diag(x), mode=mode)(xv)
    assert out.flags.writeable and not np.shares_memory(out, xv)


def test_gradients(rng: np.random.Generator) -> None:
    a = well_conditioned(rng, 4)
    verify_grad(matrix_inverse, [a], rng)
    verify_grad(det, [a], rng)
    verify_grad(lambda x: matrix_power(x, 3), [a], rng)
    verify_grad(lambda x: matrix_power(x, -2), [a], rng)
    verify_grad(pinv, [rng.standard_normal((5, 3))], rng)
    verify_grad(pinv, [rng.standard_normal((3, 5))], rng)
    verify_grad(trace, [rng.standard_normal((3, 4))], rng)
    verify_grad(lambda x: ExtractDiag(1)(x), [rng.standard_normal((3, 4))], rng)
    verify_grad(lambda x: ExtractDiag(-1, 2, 0)(x), [rng.standard_normal((2, 3, 4))], rng)
    verify_grad(lambda v: AllocDiag(-2)(v), [rng.standard_normal(3)], rng)
    verify_grad(lambda x, y: matrix_dot(x, y, x), [a, rng.standard_normal((4, 4))], rng)


def test_second_order_gradient_of_extract_diag(rng: np.random.Generator) -> None:
    x = T.dmatrix("x")
    g = opgraph.grad((extract_diag(x) ** 3).sum(), x)
    h = opgraph.grad((g * g).sum(), x)
    xv = rng.random((3, 3))
    expected = np.diag(36 * np.diag(xv) ** 3)  # d/dx_ii of sum((3 x_ii^2)^2)
    assert_allclose(opgraph.function([x], h)(xv), expected)


def test_rop_matches_finite_differences(rng: np.random.Generator) -> None:
    x, v = T.dmatrix("x"), T.dmatrix("v")
    a, d = well_conditioned(rng, 3), rng.standard_normal((3, 3))
    eps = 1e-6
    for fn, ref in [(matrix_inverse, np.linalg.inv), (det, np.linalg.det)]:
        got = opgraph.function([x, v], Rop(fn(x), x, v))(a, d)
        fd = (ref(a + eps * d) - ref(a - eps * d)) / (2 * eps)
        np.testing.assert_allclose(got, fd, rtol=1e-5, atol=1e-7)
    got = opgraph.function([x, v], Rop(diag(x), x, v), on_unused_input="ignore")(a, d)
    assert_allclose(got, np.diag(d))


def test_infer_shape(rng: np.random.Generator) -> None:
    x, t, v = T.dmatrix("x"), T.dmatrix("t"), T.dvector("v")
    a, tall = well_conditioned(rng, 4), rng.random((5, 3))
    check_infer_shape([x], matrix_inverse(x), [a], MatrixInverse)
    check_infer_shape([x], det(x), [a], Det)
    check_infer_shape([t], pinv(t), [tall], MatrixPinv)
    for k in (-7, -2, 0, 1, 2, 6):
        check_infer_shape([t], diag(t, k), [tall], ExtractDiag)
        check_infer_shape([v], diag(v, k), [rng.random(3)], AllocDiag)
    g = opgraph.grad(extract_diag(t).sum(), t)
    check_infer_shape([t], g, [tall], nlinalg.ExtractDiagGrad)
