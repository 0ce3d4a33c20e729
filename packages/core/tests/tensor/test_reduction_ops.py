"""prod, max/min, argmax/argmin, max_and_argmax, all and any against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.gradient import Rop, grad, verify_grad
from opgraph.tensor.reduction import All, Any, Argmax, MaxAndArgmax, Prod, ProdWithoutZeros
from opgraph.testing.checks import check_infer_shape, check_modes, random_value

DTYPES = ["bool", "int8", "int64", "float32", "float64"]
AXES = [None, 0, 1, -1, (0, 1), [2, 0]]


def _value(rng: np.random.Generator, dtype: str, shape: tuple[int, ...] = (2, 3, 4)) -> np.ndarray:
    if dtype == "complex128":
        return rng.normal(size=shape) + 1j * rng.normal(size=shape)
    return random_value(rng, shape, dtype, -3, 4)


def _np_axis(axis: object) -> object:
    return tuple(axis) if isinstance(axis, list) else axis


@pytest.mark.parametrize("dtype", DTYPES)
def test_prod_and_extremes_match_numpy(dtype: str, mode: str, rng: np.random.Generator) -> None:
    x = T.TensorType(dtype, (False, False, False))("x")
    xv = _value(rng, dtype)
    outs, expected = [], []
    for axis in AXES:
        for keepdims in (False, True):
            ax = _np_axis(axis)
            outs += [T.prod(x, axis, keepdims=keepdims), T.max(x, axis, keepdims=keepdims)]
            outs += [T.min(x, axis, keepdims=keepdims)]
            expected += [np.prod(xv, ax, keepdims=keepdims, dtype=outs[-3].dtype)]
            expected += [np.max(xv, ax, keepdims=keepdims), np.min(xv, ax, keepdims=keepdims)]
    for o, e in zip(outs, expected):
        assert o.dtype == np.asarray(e).dtype
    check_modes([x], outs, [xv], expected, modes=[mode])


@pytest.mark.parametrize("dtype", [*DTYPES, "uint8", "complex128"])
def test_argmax_argmin_match_numpy(dtype: str, mode: str, rng: np.random.Generator) -> None:
    x = T.TensorType(dtype, (False, False))("x")
    xv = _value(rng, dtype, (3, 5))
    outs = [T.argmax(x), T.argmin(x), T.argmax(x, 0), T.argmin(x, 1, keepdims=True)]
    outs.append(T.argmax(x, -1))
    expected = [np.argmax(xv), np.argmin(xv), np.argmax(xv, 0), np.argmin(xv, 1, keepdims=True)]
    expected.append(np.argmax(xv, -1))
    assert all(o.dtype == "int64" for o in outs)
    check_modes([x], outs, [xv], expected, modes=[mode])


def test_argmax_over_several_axes_is_the_flat_index(rng: np.random.Generator) -> None:
    x = T.dtensor3("x")
    xv = rng.random((2, 3, 4))
    got = function([x], T.argmax(x, axis=[0, 2]))(xv)
    expected = np.argmax(xv.transpose(1, 0, 2).reshape(3, 8), axis=1)
    np.testing.assert_array_equal(got, expected)
    mx, amx = function([x], T.max_and_argmax(x, axis=(0, 2)))(xv)
    np.testing.assert_array_equal(mx, xv.max(axis=(0, 2)))
    np.testing.assert_array_equal(amx, expected)


def test_min_of_int8_does_not_overflow() -> None:
    x = T.bvector("x")
    xv = np.array([-128, 5, 127], dtype="int8")
    check_modes([x], [T.min(x), T.argmin(x), T.max(x)], [xv], [np.int8(-128), 0, np.int8(127)])
    u = T.TensorType("uint8", (False,))("u")
    uv = np.array([3, 0, 255], "uint8")
    check_modes([u], [T.min(u), T.argmin(u)], [uv], [np.uint8(0), 1])


def test_nan_propagates_like_numpy() -> None:
    x = T.dvector("x")
    xv = np.array([1.0, np.nan, 3.0, -np.inf])
    from opgraph.compile.debugmode import DebugMode

    for mode in ("FAST_RUN", DebugMode(check_isfinite=False)):
        f = function([x], [T.max(x), T.min(x), T.argmax(x), T.argmin(x), T.prod(x)], mode=mode)
        got = f(xv)
        assert np.isnan(got[0]) and np.isnan(got[1]) and np.isnan(got[4])
        assert (int(got[2]), int(got[3])) == (np.argmax(xv), np.argmin(xv))


def test_names_follow_theano() -> None:
    x = T.fmatrix("x")
    # Theano 1.0.5: str(T.max(x, axis=1)) == "max"; the outputs are named max and argmax
    assert str(T.max(x, axis=1)) == "max" and str(T.argmax(x)) == "argmax"
    assert str(T.argmax(x).owner.op) == "MaxAndArgmax{axis=(0, 1)}"
    # Theano 1.0.5 printed Prod and ProdWithoutZeros from their props
    assert str(T.prod(x, axis=0).owner.op) == (
        "Prod{axis=(0,), dtype='float32', acc_dtype='float64'}"
    )
    assert str(T.prod(T.bmatrix()).owner.op) == (
        "Prod{axis=None, dtype='int64', acc_dtype='int64'}"
    )
    assert str(T.prod(x, axis=[0, 1]).owner.op) == (
        "Prod{axis=(0, 1), dtype='float32', acc_dtype='float64'}"
    )
    assert str(T.all(x).owner.op) == "All" and str(T.any(x, axis=1).owner.op) == "Any{1}"
    assert str(Argmax((1,))) == "Argmax{axis=(1,)}"
    assert str(ProdWithoutZeros(axis=0).make_node(x).op) == (
        "ProdWithoutZeros{axis=(0,), dtype='float32', acc_dtype='float64'}"
    )


@pytest.mark.parametrize("dtype", ["bool", "int8", "float64", "complex128"])
def test_all_and_any_match_numpy(dtype: str, mode: str, rng: np.random.Generator) -> None:
    x = T.TensorType(dtype, (False, False))("x")
    xv = (rng.random((3, 4)) > 0.3).astype(dtype)
    xv[0] = 1
    outs = [T.all(x), T.any(x), T.all(x, 0), T.any(x, -1, keepdims=True), x.all(1), x.any()]
    expected = [xv.all(), xv.any(), xv.all(0), xv.any(-1, keepdims=True), xv.all(1), xv.any()]
    assert all(o.dtype == "bool" for o in outs)
    check_modes([x], outs, [xv], expected, modes=[mode])


def test_empty_reductions(mode: str) -> None:
    x = T.dmatrix("x")
    ev = np.ones((0, 3))
    outs = [T.prod(x), T.prod(x, 0), T.all(x), T.any(x), T.max(x, 1), T.sum(x)]
    check_modes([x], outs, [ev], [1.0, np.ones(3), True, False, np.ones(0), 0.0], [mode])
    for fn in (T.max, T.min, T.argmax, T.argmin, lambda v: Argmax(None)(v)):
        f = function([x], fn(x), mode=mode)
        with pytest.raises(ValueError, match=r"cannot reduce an empty array.*\(0, 3\)"):
            f(ev)


def test_axis_errors() -> None:
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        T.max(T.dmatrix(), axis=2)
    with pytest.raises(ValueError, match="out of range"):
        T.prod(T.dvector(), axis=-2)
    with pytest.raises(TypeError, match="symbolic"):
        T.all(T.dvector(), axis=T.lscalar())
    with pytest.raises(ValueError, match="out of range"):
        MaxAndArgmax((3,))(T.dmatrix())


def test_infer_shape(rng: np.random.Generator) -> None:
    x = T.dtensor3("x")
    xv = rng.random((2, 3, 4))
    outs = [*T.max_and_argmax(x, 1), T.prod(x, [0, 2]), T.all(x, 2), Argmax((0,))(x)]
    outs.append(Argmax(None)(x))
    check_infer_shape([x], outs, [xv])
    check_infer_shape([x], outs, [xv], MaxAndArgmax)


def test_max_gradient_goes_to_the_maximum(rng: np.random.Generator) -> None:
    xv = rng.random((3, 4))
    verify_grad(lambda a: T.max(a, axis=0), [xv])
    verify_grad(lambda a: T.max(a), [xv])
    verify_grad(lambda a: T.min(a, axis=1, keepdims=True), [xv])
    x = T.dvector("x")
    g = grad(T.max(x), x)
    np.testing.assert_array_equal(function([x], g)([1.0, 3.0, 2.0]), [0.0, 1.0, 0.0])


def test_argmax_gradient_is_zero() -> None:
    x = T.dvector("x")
    g = grad(T.sum(T.cast(T.argmax(x), "float64")) + T.sum(x), x)
    np.testing.assert_array_equal(function([x], g)([1.0, 3.0]), [1.0, 1.0])
    g2 = grad(T.sum(Argmax(None)(x) * 1.0) + T.sum(x), x)
    np.testing.assert_array_equal(function([x], g2)([1.0, 3.0]), [1.0, 1.0])


def test_max_r_op(rng: np.random.Generator) -> None:
    x, v = T.dmatrix("x"), T.dmatrix("v")
    xv, vv = rng.random((3, 4)), rng.random((3, 4))
    r = Rop(T.max(x, axis=1), x, v)
    np.testing.assert_allclose(function([x, v], r)(xv, vv), vv[np.arange(3), xv.argmax(1)])


@pytest.mark.parametrize("zeros", [0, 1, 2])
def test_prod_gradient_with_zeros(zeros: int, rng: np.random.Generator) -> None:
    xv = rng.random((3, 4)) + 0.5
    xv[0, :zeros] = 0.0
    xv[2, 1 : 1 + zeros] = 0.0
    verify_grad(lambda a: T.prod(a, axis=1), [xv])
    verify_grad(lambda a: T.prod(a, axis=0), [xv])
    if zeros == 0:
        verify_grad(lambda a: T.prod(a, no_zeros_in_input=True), [xv])


def test_prod_of_ints_has_zero_gradient_and_prod_without_zeros_has_none() -> None:
    from opgraph.gradient import NullType

    x = T.dvector("x")
    g = grad(T.sum(T.prod(T.cast(x, "int64")) * 1.0), x)
    np.testing.assert_array_equal(function([x], g)([1.0, 2.0]), [0.0, 0.0])
    (g_null,) = ProdWithoutZeros(0).grad([x], [T.dscalar()])
    assert isinstance(g_null.type, NullType)
    assert "Second derivatives of prod" in str(g_null.type.why_null)


def test_second_derivative_of_prod_is_refused_clearly() -> None:
    x = T.dvector("x")
    g1 = grad(T.prod(x), x)
    with pytest.raises(Exception, match="Second derivatives of prod"):
        grad(T.sum(g1), x)


def test_prod_r_op_and_dtype_options(rng: np.random.Generator) -> None:
    x, v = T.dvector("x"), T.dvector("v")
    xv, vv = rng.random(4) + 0.5, rng.random(4)
    r = Rop(T.prod(x), x, v)
    np.testing.assert_allclose(function([x, v], r)(xv, vv), np.prod(xv) * np.sum(vv / xv))
    b = T.bvector("b")
    assert T.prod(b, dtype="int8").dtype == "int8"
    assert T.prod(b, acc_dtype="float64").owner.op.acc_dtype == "float64"
    with pytest.raises(TypeError, match="lose precision"):
        T.prod(T.fvector(), acc_dtype="int64")


def test_prod_without_zeros_values() -> None:
    x = T.dmatrix("x")
    xv = np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    got = function([x], ProdWithoutZeros(axis=1)(x))(xv)
    np.testing.assert_array_equal(got, [6.0, 0.0])


def test_all_any_grads_are_zero_and_bool_reduce_casts() -> None:
    x = T.dvector("x")
    g = grad(T.sum(T.cast(T.all(x), "float64")) + T.sum(x), x)
    np.testing.assert_array_equal(function([x], g)([1.0, 0.0]), [1.0, 1.0])
    assert T.any(T.lvector()).owner.inputs[0].dtype == "bool"
    assert isinstance(T.any(T.lvector()).owner.op, Any)
    assert isinstance(T.all(T.TensorType("bool", (False,))()).owner.op, All)


def test_theano_module_path_of_the_reduction_ops() -> None:
    from opgraph.tensor import elemwise

    assert elemwise.Prod is Prod and elemwise.All is All and elemwise.Any is Any
    with pytest.raises(AttributeError):
        elemwise.NoSuchOp  # noqa: B018


def test_prod_op_equality_includes_no_zeros_flag() -> None:
    assert Prod(0) == Prod(0) and Prod(0) != Prod(0, no_zeros_in_input=True)
    assert hash(MaxAndArgmax([1, 0])) == hash(MaxAndArgmax((0, 1)))
