"""Basic indexing (``Subtensor``): ints, slices, None and Ellipsis, against NumPy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.gradient import DisconnectedInputError, Rop, grad
from opgraph.gradient import verify_grad as _verify_grad
from opgraph.printing import debugprint, pp
from opgraph.tensor.subtensor import IncSubtensor, Subtensor, getitem, slice_length
from opgraph.testing.checks import assert_allclose, check_infer_shape, check_modes, random_value

DTYPES = ["bool", "int8", "int32", "uint16", "float32", "float64", "complex128"]

INDICES: list[tuple[Any, ...]] = [
    (1,),
    (-1,),
    (slice(1, 3),),
    (slice(None, None, -1),),
    (slice(-3, None, 2), 0),
    (Ellipsis, 1),
    (None, 0),
    (0, None, slice(1, None)),
    (slice(10, 20),),
    (slice(None), slice(None), -2),
    (slice(-100, 100, 3),),
    (0, 1, 2),
    (Ellipsis,),
    (1, Ellipsis, slice(None, -1)),
]


def verify_grad(fun: Any, pt: list[np.ndarray], rng: np.random.Generator) -> None:
    """verify_grad on a weighted sum of ``fun``'s output (any output shape)."""
    ins = [T.TensorType("float64", [False] * np.ndim(p))() for p in pt]
    shape = np.shape(opgraph.function(ins, fun(*ins))(*pt))
    weights = rng.random(shape) + 0.5
    _verify_grad(lambda *a: (fun(*a) * weights).sum(), pt, rng=rng)


@pytest.mark.parametrize("dtype", DTYPES)
def test_basic_indexing_matches_numpy_in_every_mode(dtype: str, rng: np.random.Generator) -> None:
    x = T.tensor(dtype, (False,) * 3, "x")
    xv = random_value(rng, (4, 3, 5), dtype, low=-5, high=5)
    outs = [x[idx] for idx in INDICES]
    expected = [xv[idx] for idx in INDICES]
    check_modes([x], outs, [xv], expected)
    for out, e in zip(outs, expected, strict=True):
        assert out.type.dtype == dtype and out.type.ndim == np.ndim(e)


def test_symbolic_and_negative_bounds(mode: str) -> None:
    x = T.dmatrix("x")
    i, j, s = T.lscalars("i", "j", "s")
    b = T.bscalar("b")
    f = opgraph.function([x, i, j, s, b], [x[i:j:s], x[b, i:], x[:j, b]], mode=mode)
    xv = np.arange(35.0).reshape(7, 5)
    for ii, jj, ss in [(1, 3, 1), (-1, -6, -1), (0, 10, 2), (6, 0, -2), (-10, 10, 3), (2, 2, 1)]:
        got = f(xv, ii, jj, ss, -2)
        assert_allclose(got[0], xv[ii:jj:ss])
        assert_allclose(got[1], xv[-2, ii:])
        assert_allclose(got[2], xv[:jj, -2])


def test_index_dtypes_and_0d_tensor_indices() -> None:
    x = T.dvector("x")
    xv = np.arange(6.0)
    for dtype in ["int8", "int16", "int32", "int64", "uint8", "uint32"]:
        i = T.scalar("i", dtype=dtype)
        out = x[i]
        assert str(out.owner.op) == f"Subtensor{{{dtype}}}"
        assert_allclose(opgraph.function([x, i], out)(xv, 4), xv[4])
    assert_allclose(x[T.constant(np.int64(2))].eval({x: xv}), xv[2])
    assert_allclose(x[np.int32(-1)].eval({x: xv}), xv[-1])


def test_empty_arrays_and_nan(rng: np.random.Generator) -> None:
    x = T.dmatrix("x")
    empty = np.zeros((0, 3))
    check_modes(
        [x], [x[1:], x[:, 1], x[::-1, :0]], [empty], [empty[1:], empty[:, 1], empty[::-1, :0]]
    )
    nan = rng.random((3, 4))
    nan[1, 2] = np.nan
    nan[0, 0] = np.inf
    # DEBUG_MODE rejects non-finite values by design (DebugMode__check_finite).
    modes = ("FAST_COMPILE", "FAST_RUN", "PROFILE_MODE")
    check_modes([x], [x[1], x[:2, ::-1]], [nan], [nan[1], nan[:2, ::-1]], modes=modes)


def test_output_is_a_view() -> None:
    x = T.dmatrix("x")
    for out in [x[1:3], x[1], x[1, 2]]:
        node = out.owner
        assert node.op.view_map == {0: [0]}
        xv = np.arange(12.0).reshape(3, 4)
        storage: list[list[Any]] = [[None]]
        node.op.perform(node, [xv, *[np.int64(c.data) for c in node.inputs[1:]]], storage)
        assert isinstance(storage[0][0], np.ndarray)
        assert np.shares_memory(storage[0][0], xv)


def test_broadcastable_patterns() -> None:
    row = T.drow("r")  # (True, False)
    assert row[0].type.broadcastable == (False,)
    assert row[:, 1:3].type.broadcastable == (True, False)
    assert row[0:, 1].type.broadcastable == (True,)
    assert row[1:].type.broadcastable == (False, False)
    assert row[:-1].type.broadcastable == (False, False)
    # A negative step keeps length 1 only over the whole dimension: 0:5:-1 is empty.
    assert row[::-1].type.broadcastable == (True, False)
    assert row[0:5:-1].type.broadcastable == (False, False)
    assert row[:0:-1].type.broadcastable == (False, False)
    assert row[0:5:2].type.broadcastable == (True, False)
    step = T.iscalar("step")
    assert row[::step].type.broadcastable == (True, False)
    assert row[0:5:step].type.broadcastable == (False, False)
    f = opgraph.function([row], [row[0:5:-1], row[::-1]])
    empty, flipped = f(np.ones((1, 3)))
    assert empty.shape == (0, 3) and flipped.shape == (1, 3)
    col = T.dcol("c")
    assert col[1:3, :1].type.broadcastable == (False, True)
    assert col[None, :, 0].type.broadcastable == (True, False)
    x = T.dmatrix("x")
    assert x[None].type.broadcastable == (True, False, False)
    assert x[:, None, 0].type.broadcastable == (False, True)


def test_printed_names_follow_theano() -> None:
    x = T.dmatrix("x")
    b = T.bscalar("b")
    i = T.lscalar("i")
    assert str(x[1:3].owner.op) == "Subtensor{int64:int64:}"
    assert str(x[:, b].owner.op) == "Subtensor{::, int8}"
    assert str(x[0].owner.op) == "Subtensor{int64}"
    assert str(x[i:, ::-1].owner.op) == "Subtensor{int64::, ::int64}"
    assert str(Subtensor([0, slice(1, None)])) == "Subtensor{0, 1::}"
    assert Subtensor([0]) == Subtensor((0,)) and hash(Subtensor([0])) == hash(Subtensor((0,)))
    assert Subtensor([slice(1, 2)]) != Subtensor([slice(1, 3)])
    text = debugprint(x[1:3], file="str")
    assert text.splitlines()[0].startswith("Subtensor{int64:int64:} [id A]")


def test_pprint_prints_numpy_notation() -> None:
    x = T.dmatrix("x")
    i = T.lscalar("i")
    assert pp(x[1:3]) == "x[1:3]"
    assert pp(x[i, ::2]) == "x[i, ::2]"
    assert pp(x[:, -1]) == "x[:, -1]"
    assert pp(x[2:i:-1]) == "x[2:i:-1]"
    assert pp(Subtensor([0])(x)) == "x[0]"


def test_bad_indices_give_clear_errors() -> None:
    x = T.dmatrix("x")
    with pytest.raises(ValueError, match="too many indices"):
        x[1, 2, 3]
    with pytest.raises(TypeError, match=r"must be an integer.*float64"):
        x[T.dscalar("f")]
    with pytest.raises(TypeError, match="must hold integers"):
        x[1.5]
    with pytest.raises(TypeError, match="boolean scalar"):
        x[True]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., ...]
    with pytest.raises(TypeError, match="slice bounds"):
        x[T.lvector("v") : 3]
    with pytest.raises(ValueError, match="has only 2 dimension"):
        Subtensor([0, 1, 2])(x)
    with pytest.raises(TypeError, match=r"index input 1.*int64"):
        Subtensor([T.lscalar().type])(x, T.bscalar())
    with pytest.raises(TypeError, match="needs 1 index input"):
        Subtensor([T.lscalar().type])(x)


def test_runtime_errors_are_clear() -> None:
    x = T.dmatrix("x")
    s = T.lscalar("s")
    f = opgraph.function([x], x[5])
    with pytest.raises(IndexError, match="out of bounds"):
        f(np.ones((3, 4)))
    g = opgraph.function([x, s], x[::s])
    with pytest.raises(ValueError, match="step cannot be zero"):
        g(np.ones((3, 4)), 0)


def test_infer_shape_with_constant_bounds(rng: np.random.Generator) -> None:
    x = T.dtensor3("x")
    xv = rng.random((4, 3, 5))
    for idx in INDICES:
        if None in idx:
            continue
        check_infer_shape([x], x[idx], [xv], Subtensor)


def test_infer_shape_with_symbolic_bounds() -> None:
    x = T.dmatrix("x")
    i, j, s, n = T.lscalars("i", "j", "s", "n")
    out = x[i:j:s, i:]
    shp = out.owner.op.infer_shape(out.owner, [(n, 5), (), (), (), ()])
    f = opgraph.function([i, j, s, n], [T.as_tensor_variable(d) for d in shp[0]])
    for length in (0, 1, 7):
        xv = np.zeros((length, 5))
        for ii, jj, ss in [
            (1, 3, 1),
            (-1, -6, -1),
            (0, 10, 2),
            (6, 0, -2),
            (-10, 10, 3),
            (3, 3, -1),
        ]:
            got = tuple(int(d) for d in f(ii, jj, ss, length))
            assert got == xv[ii:jj:ss, ii:].shape, (length, ii, jj, ss)


def test_slice_length_with_known_values() -> None:
    assert slice_length(slice(None), 5) == 5
    assert slice_length(slice(-2, None), 5) == 2
    assert slice_length(slice(None, None, -2), 5) == 3
    with pytest.raises(ValueError, match="step cannot be zero"):
        slice_length(slice(None, None, 0), 5)


def test_grad(rng: np.random.Generator) -> None:
    xv = rng.random((4, 5))
    verify_grad(lambda x: x[1:3, ::-2], [xv], rng)
    verify_grad(lambda x: x[-1], [xv], rng)
    verify_grad(lambda x: x[2, 3], [xv], rng)
    verify_grad(lambda x: x[None, :, 1:], [xv], rng)
    x = T.dmatrix("x")
    g = grad(x[1:3, 0].sum(), x)
    assert isinstance(g.owner.op, IncSubtensor)
    expected = np.zeros((4, 5))
    expected[1:3, 0] = 1
    assert_allclose(g.eval({x: xv}), expected)


def test_grad_of_index_is_disconnected_and_discrete_input_gets_zeros() -> None:
    x = T.dvector("x")
    i = T.lscalar("i")
    with pytest.raises(DisconnectedInputError):
        grad(x[i], i)
    gi = grad(x[i], i, disconnected_inputs="ignore")
    assert_allclose(gi.eval({i: 1}), 0.0)
    iv = T.ivector("iv")
    g = grad(iv[1:].sum() * 1.0, iv)
    assert g.type.dtype.startswith("float")
    assert_allclose(g.eval({iv: np.arange(3, dtype="int32")}), np.zeros(3))


def test_r_op() -> None:
    x = T.dmatrix("x")
    ev = T.dmatrix("ev")
    r = Rop(x[1:, 0] * 3.0, x, ev)
    evv = np.arange(12.0).reshape(3, 4)
    f = opgraph.function([x, ev], r, on_unused_input="ignore")
    assert_allclose(f(evv + 1, evv), evv[1:, 0] * 3)
    assert Rop(x[1:, 0], x, ev).owner.op == x[1:, 0].owner.op


def test_getitem_is_what_variables_call() -> None:
    x = T.dmatrix("x")
    assert getitem(x, (1, slice(None))).owner.op == x[1, :].owner.op
    assert x[:, :] is not x and str(x[:, :].owner.op) == "Subtensor{::, ::}"
    assert x[None, :].owner.op.__class__.__name__ == "DimShuffle"
