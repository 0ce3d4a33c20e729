"""SortOp, ArgSortOp and PermuteAlongAxis (sort's gradient) against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.debugmode import DebugMode
from opgraph.gradient import Rop, grad, verify_grad
from opgraph.tensor.math import cast
from opgraph.tensor.sort import ArgSortOp, PermuteAlongAxis, SortOp, argsort, sort
from opgraph.testing.checks import check_infer_shape, check_modes, random_value

DTYPES = ["bool", "int8", "int64", "uint16", "float32", "float64"]
NAN_MODES = ("FAST_COMPILE", "FAST_RUN", "PROFILE_MODE", DebugMode(check_isfinite=False))


@pytest.mark.parametrize("dtype", DTYPES)
def test_sort_and_argsort_match_numpy(dtype: str, rng: np.random.Generator) -> None:
    x = T.tensor(dtype, (False, False), "x")
    a = T.lscalar("a")
    xv = random_value(rng, (3, 5), dtype, low=-10, high=10)
    outs = [
        sort(x),
        sort(x, 0),
        sort(x, None),
        sort(x, a),
        x.sort(),
        sort(x, kind="mergesort"),
        argsort(x, kind="stable"),
        argsort(x, 0, kind="stable"),
        argsort(x, None, "stable"),
        x.argsort(kind="stable"),
    ]
    expected = [
        np.sort(xv),
        np.sort(xv, 0),
        np.sort(xv, None),
        np.sort(xv, 0),
        np.sort(xv),
        np.sort(xv),
        np.argsort(xv, kind="stable"),
        np.argsort(xv, 0, kind="stable"),
        np.argsort(xv, None, kind="stable"),
        np.argsort(xv, kind="stable"),
    ]
    check_modes([x, a], outs, [xv, 0], expected)
    assert all(o.type.dtype == dtype for o in outs[:6])
    assert all(o.type.dtype == "int64" for o in outs[6:])
    check_infer_shape([x, a], outs, [xv, 0])


def test_sort_nan_inf_empty_and_names() -> None:
    v = T.dvector("v")
    vv = np.array([3.0, np.nan, -np.inf, 1.0, np.inf])
    check_modes([v], [sort(v), argsort(v)], [vv], [np.sort(vv), np.argsort(vv)], modes=NAN_MODES)
    e = T.dmatrix("e")
    res = opgraph.function([e], [sort(e, 0), argsort(e, 1)])(np.zeros((0, 3)))
    assert res[0].shape == (0, 3) and res[1].shape == (0, 3)
    assert str(sort(v).owner.op) == "SortOp{quicksort, None}"
    assert str(argsort(v, kind="mergesort").owner.op) == "ArgSortOp{mergesort, None}"
    assert SortOp("quicksort") == SortOp("quicksort") != ArgSortOp("quicksort")
    r = T.row("r")
    assert argsort(r).type.broadcastable == (True, False)


def test_sort_errors_name_the_problem() -> None:
    x = T.dmatrix("x")
    a = T.lscalar("a")
    with pytest.raises(ValueError, match="kind must be one of"):
        sort(x, kind="bogo")
    with pytest.raises(ValueError, match="order applies to structured arrays"):
        sort(x, order="f0")
    with pytest.raises(ValueError, match=r"axis 2 is out of range for x \(2 dimension"):
        sort(x, 2)
    with pytest.raises(ValueError, match="cannot sort the 0-d tensor"):
        sort(T.dscalar("s"))
    with pytest.raises(TypeError, match="axis must be an integer scalar"):
        argsort(x, 0.5)
    with pytest.raises(TypeError, match="axis=None is not an op input"):
        SortOp()(x, None)
    f = opgraph.function([x, a], sort(x, a))
    with pytest.raises(ValueError, match=r"axis 3 is out of range for an array of shape \(2, 2\)"):
        f(np.ones((2, 2)), 3)


def test_sort_gradient_and_rop(rng: np.random.Generator) -> None:
    xv = rng.permutation(12).reshape(3, 4) + rng.random((3, 4)) * 0.1
    verify_grad(lambda a: sort(a), [xv], rng=rng)
    verify_grad(lambda a: sort(a, 0) * np.arange(4.0), [xv], rng=rng)
    verify_grad(lambda a: sort(a, None) ** 2, [xv], rng=rng)
    verify_grad(lambda a: sort(a, kind="mergesort")[:, -1], [xv], rng=rng)
    x, e = T.dmatrices("x", "e")
    a = T.lscalar("a")
    g = grad((sort(x, a) * np.arange(4.0)).sum(), x)
    res = opgraph.function([x, a], g)(xv, 1)
    expected = np.empty_like(xv)
    np.put_along_axis(expected, np.argsort(xv, 1), np.broadcast_to(np.arange(4.0), xv.shape), 1)
    np.testing.assert_allclose(res, expected)
    r = opgraph.function([x, e], Rop(sort(x, 0), x, e))(xv, xv * 2)
    np.testing.assert_allclose(r, np.sort(xv, 0) * 2)
    gi = grad(cast(argsort(x), "float64").sum() + x.sum(), x)
    np.testing.assert_allclose(opgraph.function([x], gi)(xv), np.ones_like(xv))
    i = T.lvector("i")
    assert grad(cast(sort(i), "float64").sum() + x.sum(), x).type == x.type


def test_permute_along_axis(rng: np.random.Generator) -> None:
    x = T.dmatrix("x")
    p = T.lmatrix("p")
    xv = rng.random((2, 3))
    pv = np.array([[2, 0, 1], [0, 1, 2]])
    out = PermuteAlongAxis()(x, p, 1)
    check_modes([x, p], out, [xv, pv], np.take_along_axis(xv, pv, 1))
    check_infer_shape([x, p], out, [xv, pv], PermuteAlongAxis)
    verify_grad(lambda a: PermuteAlongAxis()(a, pv, 1), [xv], rng=rng)
    verify_grad(lambda a: PermuteAlongAxis()(a, pv.T.copy(), 0) * 2, [xv.T.copy()], rng=rng)
    f = opgraph.function([x, p], out)
    with pytest.raises(ValueError, match=r"perm has shape \(1, 3\), x has shape \(2, 3\)"):
        f(xv, pv[:1])
    with pytest.raises(TypeError, match="perm must be an integer tensor with 2"):
        PermuteAlongAxis()(x, T.lvector(), 0)
