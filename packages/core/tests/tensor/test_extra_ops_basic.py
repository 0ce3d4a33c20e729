"""repeat, nonzero, diff, bincount and fill_diagonal (tensor.extra_ops) against NumPy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.debugmode import DebugMode
from opgraph.gradient import Rop, grad, verify_grad
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.extra_ops import (
    BinCountOp,
    DiffOp,
    FillDiagonal,
    RepeatOp,
    SegmentSum,
    bincount,
    compress,
    diff,
    fill_diagonal,
    flatnonzero,
    nonzero,
    nonzero_values,
    repeat,
)
from opgraph.tensor.math import cast
from opgraph.tensor.shape import shape_i
from opgraph.testing.checks import check_infer_shape, check_modes, random_value

DTYPES = ["bool", "int8", "int64", "uint16", "float32", "float64", "complex128"]
NAN_MODES = ("FAST_COMPILE", "FAST_RUN", "PROFILE_MODE", DebugMode(check_isfinite=False))


def check_symbolic_shape(inputs: list[Any], out: Any, values: list[Any]) -> None:
    """``out.owner.op.infer_shape`` on symbolic input shapes gives the real output shape."""
    node = out.owner
    in_shapes = [tuple(shape_i(v, d) for d in range(v.type.ndim)) for v in node.inputs]
    dims = node.op.infer_shape(node, in_shapes)[node.outputs.index(out)]
    dims = [cast(as_tensor_variable(d), "int64") for d in dims]
    f = opgraph.function(inputs, [out, *dims], on_unused_input="ignore")
    real, *got = f(*values)
    assert tuple(int(d) for d in got) == real.shape


# ----------------------------------------------------------------------------------------
# repeat


@pytest.mark.parametrize("dtype", DTYPES)
def test_repeat_matches_numpy(dtype: str, rng: np.random.Generator) -> None:
    x = T.tensor(dtype, (False, False), "x")
    r = T.lvector("r")
    n = T.iscalar("n")
    xv = random_value(rng, (2, 3), dtype, low=-4, high=4)
    rv = np.array([2, 0, 1])
    outs = [
        repeat(x, 2),
        repeat(x, 3, axis=0),
        repeat(x, n, axis=-1),
        repeat(x, r, axis=1),
        repeat(x, np.array([1, 3]), 0),
        x.repeat(1, axis=1),
        repeat(x, [2]),
        repeat(x, 0, 1),
    ]
    expected = [
        np.repeat(xv, 2),
        np.repeat(xv, 3, 0),
        np.repeat(xv, 2, -1),
        np.repeat(xv, rv, 1),
        np.repeat(xv, [1, 3], 0),
        xv,
        np.repeat(xv, 2),
        np.repeat(xv, 0, 1),
    ]
    check_modes([x, r, n], outs, [xv, rv, np.int32(2)], expected)
    assert all(o.type.dtype == dtype for o in outs)
    assert str(outs[3].owner.op) == "RepeatOp{axis=1}" and RepeatOp(1) == RepeatOp(1)
    for out in (outs[3], outs[4]):
        check_symbolic_shape([x, r, n], out, [xv, rv, np.int32(2)])


def test_repeat_op_with_scalar_counts_and_axis_none(mode: str, rng: np.random.Generator) -> None:
    x = T.dmatrix("x")
    n = T.lscalar("n")
    xv = rng.random((2, 3))
    outs = [RepeatOp()(x, n), RepeatOp(0)(x, n), RepeatOp()(x, np.arange(6)), RepeatOp(1)(x, 1)]
    expected = [np.repeat(xv, 2), np.repeat(xv, 2, 0), np.repeat(xv, np.arange(6)), xv]
    check_modes([x, n], outs, [xv, 2], expected, modes=(mode,))
    for out in outs:
        check_symbolic_shape([x, n], out, [xv, 2])
    assert outs[3].type.broadcastable == (False, False)
    check_infer_shape([x], RepeatOp(0)(x, 3), [xv], RepeatOp)


def test_repeat_errors_name_the_problem() -> None:
    x = T.dmatrix("x")
    r = T.lvector("r")
    f = opgraph.function([x, r], repeat(x, r, axis=0))
    with pytest.raises(
        ValueError, match=r"cannot repeat an array of shape \(2, 3\) with repeats of shape \(3,\)"
    ):
        f(np.ones((2, 3)), np.array([1, 2, 3]))
    with pytest.raises(ValueError, match="must not be negative"):
        f(np.ones((2, 3)), np.array([1, -2]))
    with pytest.raises(TypeError, match="repeats must have an integer dtype"):
        repeat(x, 2.5)
    with pytest.raises(ValueError, match="scalar or a vector"):
        repeat(x, T.lmatrix())
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        repeat(x, 2, axis=2)
    with pytest.raises(ValueError, match="must not be negative"):
        repeat(x, -1)
    with pytest.raises(TypeError, match="uint64 are not supported"):
        RepeatOp(0)(x, T.TensorType("uint64", ())())


def test_repeat_gradients(rng: np.random.Generator) -> None:
    xv = rng.random((2, 3))
    verify_grad(lambda a: repeat(a, 3, axis=1), [xv], rng=rng)
    verify_grad(lambda a: repeat(a, 2), [xv], rng=rng)
    verify_grad(lambda a: repeat(a, np.array([2, 0, 3]), axis=1), [xv], rng=rng)
    verify_grad(lambda a: repeat(a, np.array([1, 2, 0, 1, 3, 1])), [xv], rng=rng)
    verify_grad(lambda a: RepeatOp(0)(a, 2), [xv], rng=rng)
    verify_grad(lambda a: RepeatOp()(a, 2), [xv], rng=rng)
    verify_grad(lambda g: SegmentSum(1)(g, np.array([2, 0, 1])), [rng.random((2, 3))], rng=rng)
    x, e = T.dmatrices("x", "e")
    out = Rop(repeat(x, np.array([1, 2]), axis=0), x, e)
    res = opgraph.function([x, e], out, on_unused_input="ignore")(xv, xv)
    np.testing.assert_allclose(res, np.repeat(xv, [1, 2], 0))
    g = grad(cast(repeat(T.lvector("i"), 2), "float64").sum() + x.sum(), x)
    assert g.type == x.type


def test_segment_sum_errors_and_shape() -> None:
    g = T.dmatrix("g")
    r = T.lvector("r")
    out = SegmentSum(0)(g, r)
    f = opgraph.function([g, r], out)
    np.testing.assert_allclose(f(np.ones((3, 2)), np.array([0, 3, 0])), [[0, 0], [3, 3], [0, 0]])
    with pytest.raises(ValueError, match="the repeats sum to 2, but the gradient has length 3"):
        f(np.ones((3, 2)), np.array([1, 1]))
    check_symbolic_shape([g, r], out, [np.ones((3, 2)), np.array([1, 2])])


# ----------------------------------------------------------------------------------------
# nonzero


@pytest.mark.parametrize("dtype", ["bool", "int8", "float32", "float64", "complex128"])
def test_nonzero_matches_numpy(dtype: str, rng: np.random.Generator) -> None:
    x = T.tensor(dtype, (False, False), "x")
    xv = random_value(rng, (3, 4), dtype, low=-1, high=2)
    outs = [
        *nonzero(x),
        nonzero(x, return_matrix=True),
        flatnonzero(x),
        nonzero_values(x),
        *x.nonzero(),
        compress(x[0], x, axis=1),
    ]
    expected = [
        *np.nonzero(xv),
        np.array(np.nonzero(xv)),
        np.flatnonzero(xv),
        xv[xv != 0],
        *np.nonzero(xv),
        np.compress(xv[0], xv, axis=1),
    ]
    check_modes([x], outs, [xv], expected)
    assert outs[2].type == T.lmatrix and str(outs[2].owner.op) == "Nonzero"
    check_symbolic_shape([x], outs[2], [xv])


def test_nonzero_empty_nan_and_errors() -> None:
    v = T.dvector("v")
    vv = np.array([np.nan, 0.0, np.inf, 0.0])
    check_modes(
        [v],
        [*nonzero(v), flatnonzero(v)],
        [vv],
        [np.array([0, 2]), np.array([0, 2])],
        modes=NAN_MODES,
    )
    m = T.dmatrix("m")
    res = opgraph.function([m], nonzero(m, True))(np.zeros((0, 3)))
    assert res.shape == (2, 0) and res.dtype == np.int64
    with pytest.raises(ValueError, match="Nonzero only supports arrays with dimensions"):
        nonzero(T.dscalar())
    with pytest.raises(ValueError, match="flatnonzero needs an array with dimensions"):
        flatnonzero(T.dscalar())
    g = grad(cast(nonzero(m, True), "float64").sum() + m.sum(), m)
    np.testing.assert_allclose(opgraph.function([m], g)(np.eye(2)), np.ones((2, 2)))


# ----------------------------------------------------------------------------------------
# diff


@pytest.mark.parametrize("dtype", ["bool", "int32", "float32", "float64"])
def test_diff_matches_numpy(dtype: str, mode: str, rng: np.random.Generator) -> None:
    x = T.tensor(dtype, (False, False), "x")
    xv = random_value(rng, (3, 5), dtype, low=-5, high=5)
    params = [(1, -1), (2, -1), (1, 0), (3, 0), (0, 1), (5, 1)]
    outs = [diff(x, n, a) for n, a in params]
    expected = [np.diff(xv, n, a) for n, a in params]
    check_modes([x], outs, [xv], expected, modes=(mode,))
    for out in outs:
        check_symbolic_shape([x], out, [xv])
    check_infer_shape([x], outs, [xv], DiffOp)


def test_diff_names_errors_and_gradient(rng: np.random.Generator) -> None:
    x = T.dmatrix("x")
    assert str(diff(x).owner.op) == "DiffOp{n=1, axis=-1}"
    assert diff(x, 0).owner.op.view_map == {0: [0]}
    assert diff(T.row(), 1, 0).type.broadcastable == (False, False)
    with pytest.raises(ValueError, match="non-negative int"):
        diff(x, -1)
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        diff(x, 1, 2)
    with pytest.raises(ValueError, match="diff needs an array with dimensions"):
        diff(T.dscalar())
    xv = rng.random((4, 5))
    verify_grad(lambda a: diff(a), [xv], rng=rng)
    verify_grad(lambda a: diff(a, 2, 0), [xv], rng=rng)
    verify_grad(lambda a: diff(a, 3, 1) * 2, [xv], rng=rng)
    verify_grad(lambda a: diff(a, 0), [xv], rng=rng)
    e = T.dmatrix("e")
    res = opgraph.function([x, e], Rop(diff(x), x, e), on_unused_input="ignore")(xv, xv)
    np.testing.assert_allclose(res, np.diff(xv))


# ----------------------------------------------------------------------------------------
# bincount, fill_diagonal


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint8", "int64"])
def test_bincount_matches_numpy(dtype: str, mode: str) -> None:
    x = T.tensor(dtype, (False,), "x")
    w = T.fvector("w")
    m = T.lscalar("m")
    xv = np.array([0, 3, 3, 1, 7], dtype)
    wv = np.array([0.5, 1.0, 2.0, -1.0, 0.25], "float32")
    outs = [bincount(x), bincount(x, w), bincount(x, minlength=10), bincount(x, minlength=m)]
    expected = [
        np.bincount(xv),
        np.bincount(xv, wv).astype("float32"),
        np.bincount(xv, minlength=10),
        np.bincount(xv, minlength=2),
    ]
    check_modes([x, w, m], outs, [xv, wv, 2], expected, modes=(mode,))
    assert [o.type.dtype for o in outs] == ["int64", "float32", "int64", "int64"]
    empty = opgraph.function([x], bincount(x, minlength=3), mode=mode)(np.zeros(0, dtype))
    np.testing.assert_array_equal(empty, [0, 0, 0])


def test_bincount_errors_and_weights_gradient(rng: np.random.Generator) -> None:
    x = T.lvector("x")
    w = T.dvector("w")
    f = opgraph.function([x, w], bincount(x, w))
    with pytest.raises(ValueError, match="must not contain negative values"):
        f(np.array([1, -1]), np.ones(2))
    with pytest.raises(ValueError, match="weights has length 3 but x has length 2"):
        f(np.array([1, 1]), np.ones(3))
    with pytest.raises(TypeError, match="bincount: x must have an integer dtype"):
        bincount(T.dvector())
    with pytest.raises(TypeError, match="bincount: x must have 1 dimension"):
        bincount(T.lmatrix())
    with pytest.raises(TypeError, match="weights must be a vector"):
        bincount(x, T.dmatrix())
    assert str(bincount(x).owner.op) == "BinCountOp" and BinCountOp() == BinCountOp()
    idx = np.array([2, 0, 2, 1])
    verify_grad(lambda ws: bincount(idx, ws) ** 2, [rng.random(4)], rng=rng)
    e = T.dvector("e")
    r = opgraph.function([x, w, e], Rop(bincount(x, w), w, e), on_unused_input="ignore")
    np.testing.assert_allclose(r(np.array([0, 2, 2]), np.ones(3), np.array([1.0, 2, 3])), [1, 0, 5])


@pytest.mark.parametrize("dtype", ["int32", "float32", "float64", "complex128"])
def test_fill_diagonal_matches_numpy(dtype: str, mode: str, rng: np.random.Generator) -> None:
    a = T.tensor(dtype, (False, False), "a")
    c = T.tensor(dtype, (False, False, False), "c")
    av = random_value(rng, (3, 5), dtype, low=-3, high=3)
    tall = random_value(rng, (5, 2), dtype, low=-3, high=3)
    cv = random_value(rng, (2, 2, 2), dtype, low=-3, high=3)

    def filled(arr: np.ndarray, val: Any) -> np.ndarray:
        out = arr.copy()
        np.fill_diagonal(out, val)
        return out

    outs = [fill_diagonal(a, 2), fill_diagonal(c, -1)]
    check_modes([a, c], outs, [av, cv], [filled(av, 2), filled(cv, -1)], modes=(mode,))
    check_modes([a, c], [fill_diagonal(a, 7)], [tall, cv], [filled(tall, 7)], modes=(mode,))
    check_infer_shape([a], fill_diagonal(a, 1), [av], FillDiagonal)


def test_fill_diagonal_errors_and_gradient(rng: np.random.Generator) -> None:
    a = T.dmatrix("a")
    c = T.dtensor3("c")
    with pytest.raises(TypeError, match="needs an array of 2 or more dimensions"):
        fill_diagonal(T.dvector(), 1.0)
    with pytest.raises(TypeError, match="val must be a scalar"):
        fill_diagonal(a, T.dvector())
    with pytest.raises(TypeError, match="val of dtype float64 does not fit in a of dtype int32"):
        fill_diagonal(T.imatrix(), T.dscalar())
    f = opgraph.function([c], fill_diagonal(c, 0.0))
    with pytest.raises(ValueError, match=r"cannot fill an array of shape \(2, 3, 2\)"):
        f(np.ones((2, 3, 2)))
    verify_grad(lambda m, v: fill_diagonal(m, v), [rng.random((3, 4)), np.array(0.3)], rng=rng)
    verify_grad(
        lambda m, v: fill_diagonal(m, v) * m, [rng.random((2, 2, 2)), np.array(1.5)], rng=rng
    )
    va, vv = T.dmatrix("va"), T.dscalar("vv")
    s = T.dscalar("s")
    r = Rop(fill_diagonal(a, s), [a, s], [va, vv])
    res = opgraph.function([a, s, va, vv], r, on_unused_input="ignore")(
        np.ones((2, 2)), 0.0, np.full((2, 2), 3.0), 5.0
    )
    np.testing.assert_allclose(res, [[5.0, 3.0], [3.0, 5.0]])
