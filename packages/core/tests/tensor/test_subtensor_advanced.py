"""Advanced indexing (integer arrays, boolean masks, take) and updates through it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.gradient import Rop, grad
from opgraph.gradient import verify_grad as _verify_grad
from opgraph.printing import debugprint
from opgraph.tensor.subtensor import inc_subtensor, set_subtensor, take
from opgraph.tensor.subtensor_advanced import (
    AdvancedBooleanIncSubtensor,
    AdvancedBooleanSubtensor,
    AdvancedIncSubtensor,
    AdvancedIncSubtensor1,
    AdvancedSubtensor,
    AdvancedSubtensor1,
    MakeSlice,
    NoneConst,
    advanced_inc_subtensor,
    advanced_subtensor,
    advanced_subtensor1,
    as_index_variable,
    make_slice,
)
from opgraph.testing.checks import assert_allclose, check_infer_shape, check_modes, random_value

DTYPES = ["bool", "int8", "uint32", "float32", "float64", "complex64"]


def verify_grad(fun: Any, pt: list[np.ndarray], rng: np.random.Generator) -> None:
    """verify_grad on a weighted sum of ``fun``'s output (any output shape)."""
    ins = [T.TensorType("float64", [False] * np.ndim(p))() for p in pt]
    shape = np.shape(opgraph.function(ins, fun(*ins))(*pt))
    weights = rng.random(shape) + 0.5
    _verify_grad(lambda *a: (fun(*a) * weights).sum(), pt, rng=rng)


IV = np.array([0, -1, 2, 2])
IM = np.array([[0, 1], [3, 0]])
MIXED: list[tuple[Any, ...]] = [
    (IV,),
    (slice(None), IV),
    (IV, slice(1, None)),
    (IM,),
    (IV, 0),
    (0, slice(None), IV[:2]),  # separated advanced indices go first (NumPy)
    (IV, None, IV),
    (None, IV, slice(None, None, -1)),
    (IV[:2], [1, 2]),
    (np.array([], dtype="int64"),),
    (Ellipsis, IV[:1]),
]


@pytest.mark.parametrize("dtype", DTYPES)
def test_integer_array_indexing_matches_numpy(dtype: str, rng: np.random.Generator) -> None:
    x = T.tensor(dtype, (False,) * 3, "x")
    xv = random_value(rng, (4, 3, 5), dtype, low=-5, high=5)
    outs = [x[idx] for idx in MIXED]
    check_modes([x], outs, [xv], [xv[idx] for idx in MIXED])


def test_which_op_each_index_builds() -> None:
    x = T.dmatrix("x")
    iv = T.lvector("iv")
    assert isinstance(x[iv].owner.op, AdvancedSubtensor1)
    assert isinstance(x[[0, 1]].owner.op, AdvancedSubtensor1)
    assert isinstance(x[:, iv].owner.inputs[0].owner.op, AdvancedSubtensor1)  # via take
    assert isinstance(x[iv, 1:].owner.op, AdvancedSubtensor)
    assert isinstance(x[T.lmatrix()].owner.op, AdvancedSubtensor)
    assert isinstance(x[x > 0].owner.op, AdvancedBooleanSubtensor)
    assert isinstance(x[np.array([True, False])].owner.op, AdvancedBooleanSubtensor)
    assert isinstance(x[[True, False, True]].owner.op, AdvancedBooleanSubtensor)
    assert str(x[iv].owner.op) == "AdvancedSubtensor1"
    assert str(x[iv, 1:].owner.op) == "AdvancedSubtensor"
    text = debugprint(x[iv, 1:], file="str")
    assert "MakeSlice" in text and "AdvancedSubtensor [id A]" in text


def test_symbolic_index_vectors(mode: str) -> None:
    x = T.dtensor3("x")
    iv = T.ivector("iv")
    uv = T.vector("uv", dtype="uint8")
    f = opgraph.function([x, iv, uv], [x[iv], x[:, uv], x[iv, :, uv], x[1:, iv, 0]], mode=mode)
    xv = np.arange(60.0).reshape(3, 4, 5)
    ivv = np.array([2, -3, 0], "int32")
    uvv = np.array([1, 1, 0], "uint8")
    expected = [xv[ivv], xv[:, uvv], xv[ivv, :, uvv], xv[1:, ivv, 0]]
    for got, e in zip(f(xv, ivv, uvv), expected, strict=True):
        assert_allclose(got, e)


def test_boolean_masks_match_numpy(rng: np.random.Generator) -> None:
    x = T.dtensor3("x")
    m2 = T.matrix("m2", dtype="bool")
    v = T.dvector("v")
    xv = rng.random((4, 3, 5))
    m2v = rng.random((4, 3)) > 0.5
    vmask = np.array([True, False, True, True])
    outs = [
        x[x > 0.5],
        x[m2],
        x[vmask],
        x[:, [True, False, True]],
        x[m2, 1:],
        x[0, m2v[0]],
        v[v > 10],
    ]
    expected = [xv[xv > 0.5], xv[m2v], xv[vmask], xv[:, [True, False, True]], xv[m2v, 1:]]
    expected += [xv[0, m2v[0]], np.zeros(0)]
    check_modes([x, m2, v], outs, [xv, m2v, np.arange(3.0)], expected)
    nan = xv.copy()
    nan[0, 0, 0] = np.nan
    modes = ("FAST_COMPILE", "FAST_RUN", "PROFILE_MODE")  # DEBUG_MODE rejects NaN outputs
    check_modes(
        [x],
        [x[T.isnan(x)], x[T.lt(x, 0.5)]],
        [nan],
        [nan[np.isnan(nan)], nan[nan < 0.5]],
        modes=modes,
    )


def test_mask_of_wrong_shape_is_a_clear_index_error() -> None:
    x = T.dmatrix("x")
    m = T.matrix("m", dtype="bool")
    f = opgraph.function([x, m], x[m])
    with pytest.raises(IndexError, match="boolean index did not match"):
        f(np.ones((3, 4)), np.ones((3, 5), bool))
    g = opgraph.function([x, m], set_subtensor(x[m], 0.0))
    with pytest.raises(IndexError, match="boolean index did not match"):
        g(np.ones((3, 4)), np.ones((2, 4), bool))


def test_broadcastable_patterns() -> None:
    x = T.dtensor3("x")
    bvec = T.TensorType("int64", (True,))("b")
    assert x[T.lvector()].type.broadcastable == (False, False, False)
    assert x[bvec].type.broadcastable == (True, False, False)
    assert x[T.lvector(), None].type.broadcastable == (False, True, False, False)
    assert x[T.lvector(), None, T.lvector()].type.broadcastable == (False, True, False)
    assert x[x > 0].type.broadcastable == (False,)
    row = T.drow("r")
    assert row[:, T.lvector()].type.broadcastable == (True, False)
    assert row[0:, T.lmatrix()].type.broadcastable == (True, False, False)
    assert row[T.lscalar(), T.lvector()].type.broadcastable == (False,)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_take_matches_numpy(axis: int | None, mode: str) -> None:
    x = T.dtensor3("x")
    iv = T.lvector("iv")
    im = T.imatrix("im")
    i0 = T.lscalar("i0")
    xv = np.arange(24.0).reshape(2, 3, 4)
    ivv, imv = np.array([-1, 5, 1, 0]), np.array([[0, 1], [1, -1]], "int32")
    outs = [
        take(x, iv, axis, "clip"),
        take(x, iv, axis, "wrap"),
        take(x, im, axis),
        take(x, i0, axis),
    ]
    outs.append(x.take(T.constant(np.array([1, 0])), axis))
    f = opgraph.function([x, iv, im, i0], outs, mode=mode)
    expected = [np.take(xv, ivv, axis, mode="clip"), np.take(xv, ivv, axis, mode="wrap")]
    expected += [np.take(xv, imv, axis), np.take(xv, 1, axis), np.take(xv, [1, 0], axis)]
    for got, e in zip(f(xv, ivv, imv, 1), expected, strict=True):
        assert_allclose(got, e)


def test_take_errors() -> None:
    x = T.dmatrix("x")
    with pytest.raises(TypeError, match=r"take: indices.*integers"):
        take(x, T.dvector())
    with pytest.raises(ValueError, match="mode must be"):
        take(x, [0], 0, "bogus")
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        take(x, [0], 2)
    f = opgraph.function([x], take(x, [3], 1))
    with pytest.raises(IndexError, match="out of bounds"):
        f(np.ones((2, 3)))


@pytest.mark.parametrize("set_", [False, True])
def test_advanced_inc_and_set_match_numpy(set_: bool, rng: np.random.Generator) -> None:
    fn = set_subtensor if set_ else inc_subtensor
    x = T.dmatrix("x")
    y = T.dmatrix("y")
    s = T.dscalar("s")
    iv = T.lvector("iv")
    xv = rng.random((4, 5))
    ivv = np.array([0, 2, 0, -1])  # 0 repeats: increments accumulate
    yv = rng.random((4, 5))
    mask = xv > 0.5

    def ref(idx: Any, val: Any) -> np.ndarray:
        out = xv.copy()
        if set_:
            out[idx] = val
        else:
            np.add.at(out, idx, val)
        return out

    outs = [fn(x[iv], y), fn(x[iv], y[0]), fn(x[iv, 1:3], y[:, :2]), fn(x[x > 0.5], s)]
    outs += [fn(x[:, iv], y[:, :4]), fn(x[iv, iv], y[0, :4]), fn(x[iv[:0]], s)]
    expected = [ref(ivv, yv), ref(ivv, yv[0]), ref((ivv, slice(1, 3)), yv[:, :2]), ref(mask, 2.0)]
    expected += [ref((slice(None), ivv), yv[:, :4]), ref((ivv, ivv), yv[0, :4]), xv]
    check_modes([x, y, s, iv], outs, [xv, yv, 2.0, ivv], expected)
    kinds = [
        AdvancedIncSubtensor1,
        AdvancedIncSubtensor1,
        AdvancedIncSubtensor,
        AdvancedBooleanIncSubtensor,
    ]
    for out, kind in zip(outs, kinds, strict=False):
        assert isinstance(out.owner.op, kind) and out.owner.op.set_instead_of_inc == set_


def test_duplicate_indices_accumulate_in_every_dtype() -> None:
    for dtype in ["int8", "int64", "float32", "complex128"]:
        v = T.vector("v", dtype=dtype)
        out = inc_subtensor(v[[1, 1, 1, 0]], T.constant(np.array(2, dtype=dtype)))
        got = opgraph.function([v], out)(np.zeros(3, dtype))
        assert_allclose(got, np.array([2, 6, 0], dtype))
        assert got.dtype == dtype


def test_printed_names_and_inplace() -> None:
    assert str(AdvancedIncSubtensor1()) == "AdvancedIncSubtensor1{no_inplace,inc}"
    assert str(AdvancedIncSubtensor1(True, True)) == "AdvancedIncSubtensor1{inplace,set}"
    assert AdvancedIncSubtensor1(inplace=True).destroy_map == {0: [0]}
    assert AdvancedIncSubtensor1().clone_inplace() == AdvancedIncSubtensor1(inplace=True)
    assert (
        str(AdvancedIncSubtensor())
        == "AdvancedIncSubtensor{inplace=False,  set_instead_of_inc=False}"
    )
    assert AdvancedIncSubtensor(inplace=True).destroy_map == {0: [0]}
    for op in (AdvancedIncSubtensor1(inplace=True), AdvancedIncSubtensor(inplace=True)):
        x = T.dvector()
        node = op.make_node(x, T.dscalar(), T.lvector())
        xv = np.zeros(3)
        storage: list[list[Any]] = [[None]]
        op.perform(node, [xv, np.array(1.0), np.array([1, 1])], storage)
        assert storage[0][0] is xv
        assert_allclose(xv, [0.0, 2.0, 0.0])


def test_bad_inputs_give_clear_errors() -> None:
    x = T.dmatrix("x")
    with pytest.raises(TypeError, match=r"vector of integers.*float64"):
        advanced_subtensor1(x, T.dvector())
    with pytest.raises(TypeError, match="vector of integers"):
        advanced_subtensor1(x, T.lmatrix())
    with pytest.raises(TypeError, match="0-d tensor"):
        advanced_subtensor1(T.dscalar(), T.lvector())
    with pytest.raises(TypeError, match=r"boolean mask.*AdvancedBooleanSubtensor"):
        advanced_subtensor(x, T.vector(dtype="bool"))
    with pytest.raises(TypeError, match="0-d boolean"):
        AdvancedBooleanSubtensor()(x, T.scalar(dtype="bool"))
    with pytest.raises(TypeError, match="must hold integers or booleans"):
        x[T.dvector()]
    with pytest.raises(ValueError, match="too many indices"):
        x[x > 0, 0]
    with pytest.raises(ValueError, match="uses 3 dimension"):
        advanced_subtensor(x, [0], [0], [0])
    with pytest.raises(TypeError, match=r"1-dimensional subtensor.*2-dimensional"):
        inc_subtensor(x[[0, 1], 0], x)
    with pytest.raises(TypeError, match="cannot increment x of dtype int64"):
        inc_subtensor(T.lvector()[[0]], 1.5)
    with pytest.raises(TypeError, match="MakeSlice: stop must be an integer"):
        make_slice(slice(0, T.dscalar()))
    f = opgraph.function([x], x[[0, 7]])
    with pytest.raises(IndexError, match="out of bounds"):
        f(np.ones((3, 2)))
    iv = T.lvector("iv")
    g = opgraph.function([x, iv], [inc_subtensor(x[iv], 1.0), set_subtensor(x[iv, 0], 1.0)])
    with pytest.raises(IndexError, match="out of bounds"):
        g(np.ones((3, 2)), np.array([3]))


def test_y_runtime_shape_must_match_the_indexed_part() -> None:
    x = T.dmatrix("x")
    y = T.dmatrix("y")
    iv = T.lvector("iv")
    f = opgraph.function([x, y, iv], [inc_subtensor(x[iv], y), set_subtensor(x[iv, 1:], y)])
    with pytest.raises(ValueError, match="not broadcastable"):
        f(np.ones((3, 2)), np.ones((1, 2)), np.array([0, 1]))


def test_slice_and_none_values() -> None:
    assert str(NoneConst) == "NoneConst"
    assert as_index_variable(None).type == NoneConst.type
    sl = make_slice(slice(1, None, 2))
    assert isinstance(sl.owner.op, MakeSlice)
    assert str(sl.type) == "slice"
    assert opgraph.function([], sl)() == slice(1, None, 2)
    i = T.lscalar("i")
    assert opgraph.function([i], make_slice(i, 5))(2) == slice(2, 5, None)
    with pytest.raises(TypeError, match="Python slice"):
        sl.type.filter(3)
    with pytest.raises(TypeError, match="only holds None"):
        NoneConst.type.filter(0)


def test_infer_shape(rng: np.random.Generator) -> None:
    x = T.dtensor3("x")
    xv = rng.random((4, 3, 5))
    iv = T.lvector("iv")
    ivv = np.array([0, 3, 3])
    check_infer_shape([x, iv], x[iv], [xv, ivv], AdvancedSubtensor1)
    check_infer_shape([x, iv], inc_subtensor(x[iv], 1.0), [xv, ivv], AdvancedIncSubtensor1)
    for idx in MIXED:
        check_infer_shape([x], x[idx], [xv])
    check_infer_shape([x], x[np.array([True, False, True, False])], [xv], AdvancedBooleanSubtensor)
    check_infer_shape([x], set_subtensor(x[[0, 1], 1:], 0.0), [xv], AdvancedIncSubtensor)


def test_infer_shape_of_symbolic_masks(rng: np.random.Generator) -> None:
    x = T.dtensor3("x")
    m = T.matrix("m", dtype="bool")
    iv = T.lvector("iv")
    xv = rng.random((4, 3, 5))
    mv = rng.random((4, 3)) > 0.5
    for out, ref in [(x[m], xv[mv]), (x[x > 0.5], xv[xv > 0.5]), (x[m, iv[:1]], xv[mv, [1]])]:
        node = out.owner
        shapes = [np.shape(v) for v in (xv, mv, np.array([1]))]
        ishapes = [shapes[0]] + [
            shapes[1] if v.type.dtype == "bool" else (1,) if v.type.ndim == 1 else ()
            for v in node.inputs[1:]
        ]
        dims = node.op.infer_shape(node, ishapes)[0]
        f = opgraph.function(
            [x, m, iv], [T.as_tensor_variable(d) for d in dims], on_unused_input="ignore"
        )
        assert tuple(int(d) for d in f(xv, mv, np.array([1]))) == ref.shape


def test_grad(rng: np.random.Generator) -> None:
    xv = rng.random((4, 5))
    yv = rng.random((3, 5))
    iv = np.array([0, 2, 0])
    verify_grad(lambda x: x[iv], [xv], rng)
    verify_grad(lambda x: x[:, iv], [xv], rng)
    verify_grad(lambda x: x[iv, 1:], [xv], rng)
    verify_grad(lambda x: x[iv, None, iv], [xv], rng)
    verify_grad(lambda x: x[x > 0.5], [xv], rng)
    verify_grad(lambda x: x.take(np.array([[1, 1], [0, 3]]), 1), [xv], rng)
    verify_grad(lambda x, y: inc_subtensor(x[iv], y), [xv, yv], rng)
    verify_grad(lambda x, y: set_subtensor(x[[0, 2, 3]], y), [xv, yv], rng)
    verify_grad(lambda x, y: inc_subtensor(x[iv, 1:], y[:, 1:]), [xv, yv], rng)
    verify_grad(lambda x, y: set_subtensor(x[[0, 2, 3], 1:], y[:, 1:]), [xv, yv], rng)
    verify_grad(lambda x, y: set_subtensor(x[x > 0.5], y[0, 0]), [xv, yv], rng)
    verify_grad(lambda x, y: inc_subtensor(x[x > 0.5], y[0, 0]), [xv, yv], rng)
    verify_grad(lambda x, y: inc_subtensor(x[:, iv], y[0, :3]), [xv, yv], rng)


def test_grad_structure() -> None:
    x = T.dmatrix("x")
    iv = T.lvector("iv")
    g = grad(x[iv].sum(), x)
    assert isinstance(g.owner.op, AdvancedIncSubtensor1) and not g.owner.op.set_instead_of_inc
    assert_allclose(g.eval({x: np.zeros((3, 2)), iv: np.array([1, 1])}), [[0, 0], [2, 2], [0, 0]])
    assert isinstance(grad(x[x > 0].sum(), x).owner.op, AdvancedBooleanIncSubtensor)
    ix = T.lmatrix("ix")
    gi = grad((ix[iv] * 1.0).sum(), ix)
    assert gi.type.dtype.startswith("float")
    assert_allclose(gi.eval({ix: np.ones((2, 2), "int64")}), np.zeros((2, 2)))


def test_r_op() -> None:
    x = T.dmatrix("x")
    ex = T.dmatrix("ex")
    iv = np.array([1, 0, 1])
    exv = np.arange(6.0).reshape(3, 2)
    for out, ref in [(x[iv], exv[iv]), (x[iv, 1:], exv[iv, 1:]), (x[x > 2], exv[exv > 2])]:
        r = Rop(out, x, ex)
        f = opgraph.function([x, ex], r, on_unused_input="ignore")
        assert_allclose(f(exv, exv), ref)
    y = T.dvector("y")
    ey = T.dvector("ey")
    r = Rop(inc_subtensor(x[[0, 0]], y), [x, y], [ex, ey])
    f = opgraph.function([x, y, ex, ey], r, on_unused_input="ignore")
    expected = exv.copy()
    np.add.at(expected, [0, 0], np.ones(2))
    assert_allclose(f(exv, np.ones(2), exv, np.ones(2)), expected)


def test_advanced_inc_keeps_add_at_meaning_where_numpy_errs() -> None:
    """Two NumPy 2.4 bugs perform steps around: ``np.add.at`` reading past a ``y`` it must
    broadcast along a 2-d index, and ``np.unravel_index`` repeating coordinates of an
    ``(N, 1)`` array with N > 8192 (numpy/numpy#31980)."""
    from opgraph.compile.mode import Mode

    py = Mode(linker="py", optimizer="None")
    x, y, i = T.lvector("x"), T.lvector("y"), T.lmatrix("i")
    f = opgraph.function([x, y, i], advanced_inc_subtensor(x, y, i), mode=py)
    got = f(np.zeros(4, "int64"), np.array([10, 100]), np.array([[0, 1], [0, 1], [2, 3]]))
    np.testing.assert_array_equal(got, [20, 200, 10, 100])
    x2 = T.TensorType("float64", (False, True))("x")
    j = T.lvector("j")
    g = opgraph.function([x2, j], advanced_inc_subtensor(x2, 1.0, j), mode=py)
    jv = np.random.default_rng(2).integers(0, 4, 9000)
    np.testing.assert_array_equal(g(np.zeros((4, 1)), jv)[:, 0], np.bincount(jv, minlength=4))
