"""unravel_index, ravel_multi_index, searchsorted and unique against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.debugmode import DebugMode
from opgraph.gradient import NullTypeGradError, grad
from opgraph.tensor.index_ops import (
    RavelMultiIndex,
    SearchsortedOp,
    Unique,
    UnravelIndex,
    ravel_multi_index,
    searchsorted,
    unique,
    unravel_index,
)
from opgraph.tensor.math import cast
from opgraph.testing.checks import check_infer_shape, check_modes

NAN_MODES = ("FAST_COMPILE", "FAST_RUN", "PROFILE_MODE", DebugMode(check_isfinite=False))


@pytest.mark.parametrize("order", ["C", "F"])
def test_unravel_and_ravel_match_numpy(order: str, mode: str) -> None:
    i = T.imatrix("i")
    d = T.lvector("d")
    iv = np.array([[0, 5], [11, 7]], "int32")
    dims = (3, 4)
    rows, cols = unravel_index(i, dims, order=order)
    flat = ravel_multi_index((rows, cols), dims, order=order)
    three = unravel_index(i, (2, 3, 2), order=order)
    outs = [rows, cols, flat, *three, ravel_multi_index((rows, cols), d, mode="clip")]
    unravelled = np.unravel_index(iv, dims, order=order)
    expected = [
        *unravelled,
        iv.astype("int64"),
        *np.unravel_index(iv, (2, 3, 2), order=order),
        np.ravel_multi_index(unravelled, dims, mode="clip"),
    ]
    check_modes([i, d], outs, [iv, np.array(dims)], expected, modes=(mode,))
    assert str(rows.owner.op) == f"UnravelIndex{{order='{order}'}}"
    assert str(flat.owner.op) == f"RavelMultiIndex{{mode='raise', order='{order}'}}"
    assert rows.type.dtype == "int64" and flat.type == T.lmatrix


def test_unravel_ravel_errors_and_shapes() -> None:
    i = T.lvector("i")
    f = opgraph.function([i], unravel_index(i, (2, 3)))
    with pytest.raises(ValueError, match=r"cannot unravel indices into shape \(2, 3\)"):
        f(np.array([6]))
    g = opgraph.function([i], ravel_multi_index((i, i), (2, 2)))
    with pytest.raises(ValueError, match=r"cannot ravel index arrays of shapes \[\(1,\), \(1,\)\]"):
        g(np.array([5]))
    with pytest.raises(ValueError, match="length of dims must be known"):
        unravel_index(i, T.lvector())
    with pytest.raises(TypeError, match="indices must have an integer dtype"):
        unravel_index(T.dvector(), (2, 2))
    with pytest.raises(TypeError, match="same number of dimensions"):
        ravel_multi_index((i, T.lmatrix()), (2, 2))
    with pytest.raises(TypeError, match="must be a tuple of index arrays"):
        ravel_multi_index(i, (2, 2))
    with pytest.raises(ValueError, match="order must be 'C' or 'F'"):
        UnravelIndex("K")
    with pytest.raises(ValueError, match="mode must be raise/wrap/clip"):
        RavelMultiIndex("nope")
    iv = np.array([1, 4])
    check_infer_shape([i], list(unravel_index(i, (2, 3))), [iv], UnravelIndex)
    check_infer_shape([i], ravel_multi_index((i, i), (5, 5)), [iv], RavelMultiIndex)


@pytest.mark.parametrize("dtype", ["int32", "float32", "float64"])
def test_searchsorted_matches_numpy(dtype: str, mode: str, rng: np.random.Generator) -> None:
    x = T.tensor(dtype, (False,), "x")
    v = T.tensor(dtype, (False, False), "v")
    s = T.lvector("s")
    xv = np.array([1, 2, 2, 5, 9], dtype)
    vv = np.array([[0, 2, 3], [9, 10, 2]], dtype)
    perm = np.array([4, 0, 3, 1, 2])
    shuffled = xv[perm]
    outs = [
        searchsorted(x, v),
        searchsorted(x, v, side="right"),
        searchsorted(x, 4),
        searchsorted(x, v, sorter=s),
    ]
    check_modes(
        [x, v, s],
        outs[:3],
        [xv, vv, perm],
        [np.searchsorted(xv, vv), np.searchsorted(xv, vv, "right"), np.searchsorted(xv, 4)],
        modes=(mode,),
    )
    check_modes(
        [x, v, s],
        outs[3],
        [shuffled, vv, np.argsort(shuffled)],
        np.searchsorted(shuffled, vv, sorter=np.argsort(shuffled)),
        modes=(mode,),
    )
    assert str(outs[0].owner.op) == "SearchsortedOp{side='left'}"
    check_infer_shape([x, v], outs[:2], [xv, vv], SearchsortedOp)


def test_searchsorted_nan_errors_and_gradient() -> None:
    x, v = T.dvectors("x", "v")
    check_modes(
        [x, v],
        searchsorted(x, v),
        [np.array([1.0, np.nan]), np.array([np.nan, 0.0])],
        np.array([1, 0]),
        modes=NAN_MODES,
    )
    with pytest.raises(TypeError, match="x must be a vector"):
        searchsorted(T.dmatrix(), v)
    with pytest.raises(ValueError, match="side must be 'left' or 'right'"):
        searchsorted(x, v, side="middle")
    s = T.lvector("s")
    f = opgraph.function([x, v, s], searchsorted(x, v, sorter=s))
    with pytest.raises(ValueError, match=r"sorter has shape \(1,\), x has shape \(2,\)"):
        f(np.array([1.0, 2.0]), np.array([1.5]), np.array([0]))
    with pytest.raises(TypeError, match="sorter must have an integer dtype"):
        searchsorted(x, v, sorter=T.dvector())
    g = opgraph.function([x, v], grad(cast(searchsorted(x, v), "float64").sum() + v.sum(), [x, v]))
    gx, gv = g(np.array([1.0, 2.0]), np.array([1.5]))
    np.testing.assert_allclose(gx, [0.0, 0.0])
    np.testing.assert_allclose(gv, [1.0])


@pytest.mark.parametrize("dtype", ["bool", "int16", "float64"])
def test_unique_matches_numpy(dtype: str, mode: str) -> None:
    x = T.tensor(dtype, (False, False), "x")
    xv = np.array([[3, 1, 3], [0, 1, 1]], dtype)
    values, index, inverse, counts = unique(x, True, True, True)
    u_ref, i_ref, inv_ref, c_ref = np.unique(xv, True, True, True)
    rows = unique(x, axis=0)
    outs = [unique(x), values, index, inverse, counts, rows, unique(x, return_counts=True)[1]]
    expected = [u_ref, u_ref, i_ref, inv_ref.reshape(-1), c_ref, np.unique(xv, axis=0), c_ref]
    check_modes([x], outs, [xv], expected, modes=(mode,))
    assert outs[0].type.dtype == dtype and inverse.type == T.lvector
    assert str(Unique()) == (
        "Unique{return_index=False, return_inverse=False, return_counts=False, axis=None}"
    )


def test_unique_empty_nan_errors_and_no_gradient() -> None:
    v = T.dvector("v")
    vv = np.array([np.nan, 1.0, np.nan, np.inf])
    check_modes([v], unique(v), [vv], np.unique(vv), modes=NAN_MODES)
    assert opgraph.function([v], unique(v))(np.zeros(0)).shape == (0,)
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        unique(T.dmatrix(), axis=2)
    with pytest.raises(NullTypeGradError, match=r"unique\(\) merges equal elements"):
        grad(unique(v).sum(), v)
