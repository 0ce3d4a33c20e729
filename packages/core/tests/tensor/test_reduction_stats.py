"""mean, var, std, logsumexp, norm and the cumulative ops (CumOp) against NumPy/SciPy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sp

import opgraph.tensor as T
from opgraph.compile.debugmode import DebugMode
from opgraph.compile.function import function
from opgraph.gradient import Rop, grad, verify_grad
from opgraph.printing import debugprint
from opgraph.tensor.cumulative import CumOp
from opgraph.testing.checks import check_infer_shape, check_modes, random_value

AXES = [None, 0, 1, (0, 2), -1]


def _np_axis(axis: object) -> object:
    return tuple(axis) if isinstance(axis, list) else axis


@pytest.mark.parametrize("dtype", ["bool", "int8", "int64", "float32", "float64"])
def test_mean_var_std_match_numpy(dtype: str, mode: str, rng: np.random.Generator) -> None:
    x = T.TensorType(dtype, (False, False, False))("x")
    xv = random_value(rng, (2, 3, 4), dtype, -3, 4)
    outs, expected = [], []
    for axis in AXES:
        ax = _np_axis(axis)
        outs += [T.mean(x, axis), T.var(x, axis), T.std(x, axis, keepdims=True)]
        expected += [np.mean(xv, ax), np.var(xv, ax), np.std(xv, ax, keepdims=True)]
        outs += [T.var(x, axis, ddof=1), x.std(axis, ddof=1)]
        expected += [np.var(xv, ax, ddof=1), np.std(xv, ax, ddof=1)]
    expected_dtype = "float32" if dtype == "float32" else "float64"
    assert {o.dtype for o in outs} == {expected_dtype}
    expected = [np.asarray(e, dtype=expected_dtype) for e in expected]
    check_modes([x], outs, [xv], expected, modes=[mode])


def test_mean_of_float16_accumulates_in_float32() -> None:
    x = T.TensorType("float16", (False,))("x")
    m = T.mean(x)
    assert m.dtype == "float16"
    assert m.owner.inputs[0].owner.inputs[0].dtype == "float32"
    xv = np.full(5000, 30.0, dtype="float16")
    assert function([x], m)(xv) == np.float16(30.0)


def test_mean_dtype_keepdims_and_graph() -> None:
    x = T.lmatrix("x")
    m = T.mean(x, axis=0, dtype="float32")
    assert m.dtype == "float32" and m.name == "mean"
    out = function([x], T.mean(x, axis=1, keepdims=True))(np.array([[1, 2], [3, 5]]))
    np.testing.assert_allclose(out, [[1.5], [4.0]])
    text = debugprint(T.mean(T.dmatrix("y"), axis=0), file="str")
    assert "Sum{axis=[0], acc_dtype=float64}" in text and "Shape" in text


def test_mean_of_an_empty_axis_is_nan() -> None:
    x = T.dmatrix("x")
    got = function([x], T.mean(x, axis=0), mode=DebugMode(check_isfinite=False))(np.ones((0, 2)))
    assert np.isnan(got).all()


def test_var_corrected_two_pass(rng: np.random.Generator) -> None:
    x = T.dmatrix("x")
    xv = rng.random((3, 5)) + 1e6
    outs = [T.var(x, corrected=True), T.var(x, 1, ddof=1, corrected=True)]
    check_modes([x], outs, [xv], [np.var(xv), np.var(xv, 1, ddof=1)], modes=["FAST_COMPILE"])


def test_var_of_complex_is_real(rng: np.random.Generator) -> None:
    z = T.zvector("z")
    zv = rng.normal(size=5) + 1j * rng.normal(size=5)
    assert T.var(z).dtype == "float64"
    check_modes([z], [T.var(z), T.std(z, ddof=1)], [zv], [np.var(zv), np.std(zv, ddof=1)])


def test_var_and_std_reject_a_bool_ddof() -> None:
    with pytest.raises(TypeError, match="ddof must be an int"):
        T.var(T.dvector(), 0, True)
    with pytest.raises(TypeError, match="ddof must be an int"):
        T.std(T.dvector(), None, False)


def test_mean_var_std_gradients(rng: np.random.Generator) -> None:
    xv = rng.random((3, 4))
    verify_grad(lambda a: T.mean(a, axis=0), [xv])
    verify_grad(lambda a: T.var(a, axis=1), [xv])
    verify_grad(lambda a: T.std(a, ddof=1), [xv])
    verify_grad(lambda a: T.var(a, corrected=True), [xv])


@pytest.mark.parametrize("dtype", ["int8", "int64", "float32", "float64"])
def test_logsumexp_matches_scipy(dtype: str, mode: str, rng: np.random.Generator) -> None:
    x = T.TensorType(dtype, (False, False))("x")
    xv = random_value(rng, (3, 4), dtype, -5, 5)
    outs = [T.logsumexp(x), T.logsumexp(x, 0), T.logsumexp(x, -1, keepdims=True)]
    expected = [sp.logsumexp(xv), sp.logsumexp(xv, 0), sp.logsumexp(xv, -1, keepdims=True)]
    out_dtype = outs[0].dtype
    check_modes([x], outs, [xv], [np.asarray(e, out_dtype) for e in expected], modes=[mode])


def test_logsumexp_is_stable_and_handles_infinities() -> None:
    x = T.dmatrix("x")
    xv = np.array([[1000.0, 1000.0], [-np.inf, -np.inf], [np.inf, 1.0], [-1000.0, -1001.0]])
    mode = DebugMode(check_isfinite=False)
    got = function([x], T.logsumexp(x, axis=1), mode=mode)(xv)
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(got, sp.logsumexp(xv, axis=1))
    with pytest.raises(TypeError, match="real tensor"):
        T.logsumexp(T.zvector())


def test_logsumexp_gradient_is_softmax(rng: np.random.Generator) -> None:
    xv = rng.normal(size=(3, 4)) * 10
    verify_grad(lambda a: T.logsumexp(a, axis=1), [xv])
    x = T.dmatrix("x")
    g = function([x], grad(T.sum(T.logsumexp(x, axis=1)), x))(xv)
    np.testing.assert_allclose(g, sp.softmax(xv, axis=1))


@pytest.mark.parametrize("L", [1, 2, 3, 0.5, np.inf, -np.inf, 0])
def test_norm_matches_numpy(L: float, mode: str, rng: np.random.Generator) -> None:
    x = T.dmatrix("x")
    xv = rng.normal(size=(3, 4))
    xv[0, 0] = 0.0
    outs = [x.norm(L), T.norm(x, L, axis=1), T.norm(x, L, axis=0, keepdims=True)]
    expected = [
        np.linalg.norm(xv.ravel(), L),
        np.linalg.norm(xv, L, axis=1),
        np.linalg.norm(xv, L, axis=0, keepdims=True),
    ]
    check_modes([x], outs, [xv], expected, modes=[mode])


def test_norm_gradient_and_errors(rng: np.random.Generator) -> None:
    xv = rng.normal(size=(3, 4))
    verify_grad(lambda a: T.norm(a, 2, axis=1), [xv])
    verify_grad(lambda a: a.norm(3), [xv])
    with pytest.raises(TypeError, match="Python number"):
        T.norm(T.dvector(), T.dscalar())


# ----------------------------------------------------------------------------------------
# cumulative ops


@pytest.mark.parametrize("dtype", ["bool", "int8", "int64", "float32", "float64", "complex128"])
def test_cumsum_cumprod_match_numpy(dtype: str, mode: str, rng: np.random.Generator) -> None:
    x = T.TensorType(dtype, (False, False))("x")
    xv = (
        random_value(rng, (3, 4), dtype, -2, 3)
        if dtype != "complex128"
        else (rng.normal(size=(3, 4)) + 1j * rng.normal(size=(3, 4)))
    )
    outs = [T.cumsum(x), T.cumprod(x), T.cumsum(x, 0), T.cumprod(x, 1), x.cumsum(-1)]
    expected = [np.cumsum(xv), np.cumprod(xv), np.cumsum(xv, 0), np.cumprod(xv, 1)]
    expected.append(np.cumsum(xv, -1))
    for o, e in zip(outs, expected):
        assert o.dtype == e.dtype, (o, o.dtype, e.dtype)
    check_modes([x], outs, [xv], expected, modes=[mode])


def test_cumsum_of_int8_does_not_overflow() -> None:
    x = T.bvector("x")
    got = function([x], T.cumsum(x))(np.array([100, 100, 100], "int8"))
    np.testing.assert_array_equal(got, [100, 200, 300])


def test_cumop_names_shapes_and_errors(rng: np.random.Generator) -> None:
    x = T.dtensor3("x")
    assert str(T.cumsum(x).owner.op) == "CumOp{None, add}"
    assert str(T.cumprod(x, -1).owner.op) == "CumOp{-1, mul}"
    xv = rng.random((2, 3, 4))
    check_infer_shape([x], [T.cumsum(x), T.cumprod(x, 1), T.cumsum(x, -1)], [xv], CumOp)
    s = T.dscalar("s")
    check_modes([s], T.cumsum(s), [np.float64(2.0)], np.array([2.0]))
    with pytest.raises(ValueError, match="out of range"):
        T.cumsum(x, 3)
    with pytest.raises(ValueError, match="mode"):
        CumOp(0, "max")
    with pytest.raises(TypeError, match="axis"):
        CumOp((0, 1))  # type: ignore[arg-type]


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_cumop_gradients(axis: int | None, rng: np.random.Generator) -> None:
    xv = rng.random((3, 4)) + 0.5
    verify_grad(lambda a: T.cumsum(a, axis), [xv])
    verify_grad(lambda a: T.cumprod(a, axis), [xv])
    if axis != 1:
        verify_grad(lambda a: T.cumprod(a, axis), [rng.random(5) + 0.5])


def test_cumop_r_op(rng: np.random.Generator) -> None:
    x, v = T.dvector("x"), T.dvector("v")
    xv, vv = rng.random(4) + 0.5, rng.random(4)
    r = Rop([T.cumsum(x), T.cumprod(x)], x, v)
    got = function([x, v], r, on_unused_input="ignore")(xv, vv)
    np.testing.assert_allclose(got[0], np.cumsum(vv))
    eps = 1e-7
    numeric = (np.cumprod(xv + eps * vv) - np.cumprod(xv - eps * vv)) / (2 * eps)
    np.testing.assert_allclose(got[1], numeric, rtol=1e-6)


def test_cumsum_of_ints_has_zero_gradient() -> None:
    x = T.dvector("x")
    g = grad(T.sum(T.cumsum(T.cast(x, "int64")) * 1.0) + T.sum(x), x)
    np.testing.assert_array_equal(function([x], g)([1.0, 2.0]), [1.0, 1.0])
