"""inc_subtensor / set_subtensor through basic indexing (``IncSubtensor``), against NumPy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.gradient import Rop, grad
from opgraph.gradient import verify_grad as _verify_grad
from opgraph.tensor.subtensor import IncSubtensor, Subtensor, inc_subtensor, set_subtensor
from opgraph.testing.checks import assert_allclose, check_infer_shape, check_modes, random_value

DTYPES = ["int8", "int32", "float32", "float64", "complex128"]


def verify_grad(fun: Any, pt: list[np.ndarray], rng: np.random.Generator) -> None:
    """verify_grad on a weighted sum of ``fun``'s output (any output shape)."""
    ins = [T.TensorType("float64", [False] * np.ndim(p))() for p in pt]
    shape = np.shape(opgraph.function(ins, fun(*ins))(*pt))
    weights = rng.random(shape) + 0.5
    _verify_grad(lambda *a: (fun(*a) * weights).sum(), pt, rng=rng)


def numpy_update(xv: np.ndarray, idx: Any, yv: Any, set_: bool) -> np.ndarray:
    out = xv.copy()
    if set_:
        out[idx] = yv
    else:
        out[idx] += yv
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("set_", [False, True])
def test_inc_and_set_match_numpy_in_every_mode(
    dtype: str, set_: bool, rng: np.random.Generator
) -> None:
    fn = set_subtensor if set_ else inc_subtensor
    x = T.tensor(dtype, (False,) * 3, "x")
    y2 = T.tensor(dtype, (False, False), "y2")
    s = T.tensor(dtype, (), "s")
    xv = random_value(rng, (4, 3, 5), dtype, low=-5, high=5)
    y2v = random_value(rng, (3, 5), dtype, low=-5, high=5)
    sv = random_value(rng, (), dtype, low=-5, high=5)
    cases = [
        (fn(x[1], y2), (1,), y2v),
        (fn(x[1:3, :, ::-2], s), (slice(1, 3), slice(None), slice(None, None, -2)), sv),
        (fn(x[-1, 2, 3], s), (-1, 2, 3), sv),
        (fn(x[2:, 0], y2[0]), (slice(2, None), 0), y2v[0]),
        (fn(x[..., 0], y2[:, 0]), (Ellipsis, 0), y2v[:, 0]),
        (fn(x[10:], s), (slice(10, None),), sv),
    ]
    outs = [c[0] for c in cases]
    expected = [numpy_update(xv, idx, yv, set_) for _, idx, yv in cases]
    check_modes([x, y2, s], outs, [xv, y2v, sv], expected)
    for out in outs:
        assert out.type == x.type


def test_symbolic_bounds_and_empty(mode: str) -> None:
    x = T.dmatrix("x")
    y = T.dvector("y")
    i, j = T.lscalars("i", "j")
    f = opgraph.function(
        [x, y, i, j], [inc_subtensor(x[i:j, -1], y), set_subtensor(x[i], 7.0)], mode=mode
    )
    xv = np.arange(20.0).reshape(4, 5)
    got = f(xv, np.array([1.0, 2.0]), 1, 3)
    assert_allclose(got[0], numpy_update(xv, (slice(1, 3), -1), [1.0, 2.0], False))
    assert_allclose(got[1], numpy_update(xv, 1, 7.0, True))
    got = f(xv, np.zeros(0), 3, 1)
    assert_allclose(got[0], xv)
    empty = np.zeros((0, 5))
    g = opgraph.function([x, y, i, j], inc_subtensor(x[i:j, -1], y), mode=mode)
    assert_allclose(g(empty, np.zeros(0), 0, 2), empty)


def test_nan_values_propagate() -> None:
    x = T.dvector("x")
    y = T.dscalar("y")
    xv = np.array([1.0, np.nan, 3.0])
    modes = ("FAST_COMPILE", "FAST_RUN", "PROFILE_MODE")  # DEBUG_MODE rejects NaN outputs
    check_modes(
        [x, y],
        [inc_subtensor(x[1:], y), set_subtensor(x[1], y)],
        [xv, np.nan],
        [np.array([1.0, np.nan, np.nan]), np.array([1.0, np.nan, 3.0])],
        modes=modes,
    )


def test_y_broadcasts_by_type() -> None:
    x = T.dmatrix("x")
    row = T.drow("row")
    col = T.dcol("col")
    v = T.dvector("v")
    xv = np.arange(12.0).reshape(3, 4)
    f = opgraph.function(
        [x, row, col, v],
        [inc_subtensor(x[1:], row), inc_subtensor(x[:, 1:3], col), set_subtensor(x[0:1], v)],
    )
    rv, cv, vv = np.ones((1, 4)), np.ones((3, 1)) * 2, np.arange(4.0)
    got = f(xv, rv, cv, vv)
    assert_allclose(got[0], numpy_update(xv, slice(1, None), rv, False))
    assert_allclose(got[1], numpy_update(xv, (slice(None), slice(1, 3)), cv, False))
    assert_allclose(got[2], numpy_update(xv, slice(0, 1), vv, True))
    # a length-1 dimension that the type does not declare broadcastable does not broadcast
    with pytest.raises(ValueError, match="not broadcastable"):
        opgraph.function([x, v], set_subtensor(x[1:], v))(xv, np.ones(1))


def test_broadcastable_x_dimension_makes_y_broadcastable() -> None:
    r = T.drow("r")
    m = T.dmatrix("m")
    out = inc_subtensor(r[:, 1:], m)
    assert out.type == r.type
    y_in = out.owner.inputs[1]
    assert y_in.type.broadcastable == (True, False)
    got = opgraph.function([r, m], out)(np.zeros((1, 3)), np.ones((1, 2)))
    assert_allclose(got, np.array([[0.0, 1.0, 1.0]]))


def test_printed_names_and_props() -> None:
    x = T.dmatrix("x")
    assert str(inc_subtensor(x[1:3], 1.0).owner.op) == "IncSubtensor{Inc;int64:int64:}"
    assert str(set_subtensor(x[:2], 1.0).owner.op) == "IncSubtensor{Set;:int64:}"
    op = IncSubtensor([slice(None), 0], inplace=True)
    assert str(op) == "IncSubtensor{InplaceInc;::, 0}"
    assert op.destroy_map == {0: [0]}
    assert IncSubtensor([0]).destroy_map == {}
    assert IncSubtensor([0]) != IncSubtensor([0], set_instead_of_inc=True)
    assert hash(IncSubtensor([slice(1, 2)])) == hash(IncSubtensor((slice(1, 2),)))
    tol = set_subtensor(x[1:], 2.0, tolerate_inplace_aliasing=True).owner.op
    assert tol.destroyhandler_tolerate_aliased == [[0, 1]]


def test_inplace_perform_overwrites_x_and_copy_does_not() -> None:
    x = T.dvector("x")
    for inplace in (False, True):
        op = IncSubtensor([slice(1, None)], inplace=inplace)
        node = op.make_node(x, T.dscalar())
        xv = np.zeros(3)
        storage: list[list[Any]] = [[None]]
        op.perform(node, [xv, np.array(2.0)], storage)
        assert_allclose(storage[0][0], [0.0, 2.0, 2.0])
        assert (storage[0][0] is xv) == inplace
        assert_allclose(xv, [0.0, 2.0, 2.0] if inplace else [0.0, 0.0, 0.0])
    # the in-place op is accepted (and checked by DEBUG_MODE) when asked for
    y = T.dscalar("y")
    out = IncSubtensor([slice(1, None)], inplace=True)(x * 1.0, y)
    f = opgraph.function([x, y], out, mode="DEBUG_MODE", accept_inplace=True)
    assert_allclose(f(np.zeros(3), 2.0), [0.0, 2.0, 2.0])


def test_bad_inputs_give_clear_errors() -> None:
    x = T.dmatrix("x")
    with pytest.raises(TypeError, match=r"1-dimensional subtensor.*2-dimensional value"):
        inc_subtensor(x[1], x)
    with pytest.raises(TypeError, match="must be the result of indexing"):
        set_subtensor(x, 1.0)
    with pytest.raises(TypeError, match=r"must be the result of indexing.*Elemwise"):
        inc_subtensor(x + 1, 1.0)
    with pytest.raises(TypeError, match=r"cannot increment x of dtype int32.*float64"):
        inc_subtensor(T.imatrix()[1:], T.dvector())
    with pytest.raises(TypeError, match="cannot set a 1-dimensional subtensor"):
        IncSubtensor([0], set_instead_of_inc=True)(x, x)
    # set may cast, as NumPy's assignment (and Theano) do
    iv = T.ivector("iv")
    f = opgraph.function([iv], set_subtensor(iv[1:], 2.7))
    assert_allclose(f(np.zeros(3, "int32")), np.array([0, 2, 2], "int32"))
    y = T.dvector("y")
    g = opgraph.function([x, y], inc_subtensor(x[5], y))
    with pytest.raises(IndexError, match="out of bounds"):
        g(np.zeros((3, 2)), np.zeros(2))


def test_infer_shape(rng: np.random.Generator) -> None:
    x = T.dtensor3("x")
    y = T.dvector("y")
    xv = rng.random((4, 3, 5))
    yv = rng.random(5)
    check_infer_shape([x, y], inc_subtensor(x[1, 2:], y), [xv, yv], IncSubtensor)
    check_infer_shape([x, y], set_subtensor(x[:, -1], y), [xv, yv], IncSubtensor)


def test_grad(rng: np.random.Generator) -> None:
    xv = rng.random((4, 5))
    yv = rng.random((2, 5))
    verify_grad(lambda x, y: inc_subtensor(x[1:3], y), [xv, yv], rng)
    verify_grad(lambda x, y: set_subtensor(x[1:3], y), [xv, yv], rng)
    verify_grad(lambda x, y: inc_subtensor(x[1:3], y[0]), [xv, yv], rng)  # y broadcast
    verify_grad(lambda x, y: set_subtensor(x[::-2, 1], y[0, 0]), [xv, yv], rng)
    verify_grad(lambda x, y: set_subtensor(x[:, 1:3][0], y[1, :2]), [xv, yv], rng)


def test_grad_structure_and_broadcast_sum() -> None:
    x = T.dmatrix("x")
    row = T.drow("row")
    out = set_subtensor(x[1:], row).sum()
    gx, gy = grad(out, [x, row])
    assert gy.type.broadcastable == (True, False)
    f = opgraph.function([x, row], [gx, gy])
    gxv, gyv = f(np.zeros((3, 2)), np.zeros((1, 2)))
    assert_allclose(gxv, [[1.0, 1.0], [0.0, 0.0], [0.0, 0.0]])
    assert_allclose(gyv, [[2.0, 2.0]])


def test_grad_of_discrete_inputs_is_zero() -> None:
    ix = T.imatrix("ix")
    iy = T.ivector("iy")
    node = inc_subtensor(ix[0], iy).owner
    gx, gy, *_ = node.op.grad(node.inputs, [T.imatrix()])
    assert gx.type.dtype.startswith("float") and gy.type.dtype.startswith("float")
    assert_allclose(gx.eval({ix: np.ones((2, 3), "int32")}), np.zeros((2, 3)))


def test_r_op() -> None:
    x = T.dmatrix("x")
    y = T.dvector("y")
    ex = T.dmatrix("ex")
    ey = T.dvector("ey")
    out = set_subtensor(x[1], y)
    r = Rop(out, [x, y], [ex, ey])
    exv, eyv = np.ones((3, 2)), np.array([5.0, 6.0])
    f = opgraph.function([x, y, ex, ey], r, on_unused_input="ignore")
    assert_allclose(f(exv, eyv, exv, eyv), numpy_update(exv, 1, eyv, True))
    r_x_only = Rop(inc_subtensor(x[1], y), x, ex)
    assert_allclose(r_x_only.eval({ex: exv, y: eyv}), exv)


def test_subtensor_grad_is_inc_of_zeros() -> None:
    x = T.dmatrix("x")
    g = grad(x[1:, 0].sum(), x)
    assert isinstance(g.owner.op, IncSubtensor) and not g.owner.op.set_instead_of_inc
    assert (
        g.owner.op.idx_list == Subtensor([slice(T.lscalar().type, None), T.lscalar().type]).idx_list
    )
