"""The integer-array indexing thunks (``opgraph_c._advanced``) against ``perform``.

Node-level checks run one node's C thunk and its Op's ``perform`` on the same values and
compare values bit for bit (repeated indices included), dtypes, copies (``np.shares_memory``
with each input, as perform's), in-place updates and errors (type and text). Function-level
checks compile small graphs with the ``c`` linker, the ``py`` linker and
``DebugMode(linker="c")``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from thunk_checks import layouts as _layouts
from thunk_checks import node_storage
from thunk_checks import perform_outputs as _perform
from thunk_checks import twin as _twin

import opgraph
import opgraph.tensor as T
from opgraph.compile.debugmode import DebugMode
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.graph.basic import Apply, Variable
from opgraph.tensor.subtensor_advanced import (
    AdvancedIncSubtensor,
    AdvancedIncSubtensor1,
    AdvancedSubtensor1,
    advanced_inc_subtensor,
    advanced_set_subtensor,
    advanced_subtensor1,
)
from opgraph_c import PERFORM, _advanced
from opgraph_c.registry import get_registry

ADVANCED = {AdvancedSubtensor1, AdvancedIncSubtensor1, AdvancedIncSubtensor}
INDEX_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
DTYPES = ["float64", "float32", "int32", "uint8", "int64", "bool", "complex128", "float16"]


def _value(shape: Sequence[int], dtype: str = "float64", seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(shape) * 5
    if np.dtype(dtype).kind == "c":
        v = v + 1j * rng.standard_normal(shape)
    return np.asarray(v).astype(dtype)


def _thunk(node: Apply, values: Sequence[Any], c: bool) -> tuple[Any, list[list[Any]]]:
    """The node's thunk with its input cells holding ``values`` (constants filled in)."""
    storage = node_storage(node, values)
    thunk = get_registry().make_thunk(node, storage, None)
    assert isinstance(thunk, _advanced.AdvancedThunk) == c, (node.op, thunk)
    assert not getattr(thunk, "py_fallback", False)
    return thunk, [storage[o] for o in node.outputs]


def _outcome(fn: Any) -> tuple[Any, Any]:
    try:
        return fn(), None
    except Exception as exc:  # compared between the two implementations
        return None, exc


def check_node(
    node: Apply, *values: Any, c: bool = True, fast: bool | None = None
) -> np.ndarray | None:
    """Run ``node``'s C thunk and ``perform`` on (copies of) ``values``: same everything.

    Returns the C thunk's output (None when both raised). ``c=False``: the entry returns
    PERFORM for this node (no C thunk, no fallback warning). ``fast``: whether the thunk's
    C path computed the result (default: when nothing raised), else it ran ``perform``.
    """
    c_values = list(values)
    py_values = [_twin(v) for v in c_values]
    thunk, (cell,) = _thunk(node, c_values, c)
    _, c_err = _outcome(thunk)
    py_outs, py_err = _outcome(lambda: _perform(node, py_values))
    if c:
        if fast is None:
            fast = c_err is None
        assert (thunk.perform_calls == 0) == fast, (thunk.perform_calls, fast)
    if py_err is not None or c_err is not None:
        assert type(c_err) is type(py_err), (c_err, py_err)
        assert str(c_err) == str(py_err)
        return None
    out, (py_out,) = cell[0], py_outs
    assert type(out) is type(py_out)
    assert out.dtype == py_out.dtype and out.shape == py_out.shape
    assert out.strides == py_out.strides, (out.strides, py_out.strides)
    np.testing.assert_array_equal(out, py_out, strict=True)  # bit for bit (NaN == NaN)
    for cv, pv in zip(c_values, py_values, strict=True):
        if isinstance(pv, np.ndarray):
            assert np.shares_memory(out, cv) == np.shares_memory(py_out, pv)
            assert (out is cv) == (py_out is pv)
            np.testing.assert_array_equal(cv, pv, strict=True)  # in-place updates agree
    return out


def check_function(inputs: list[Variable], outputs: list[Variable], *values: Any) -> None:
    """Compile with the c linker (every advanced node a C thunk), py and DebugMode(c)."""
    c_fn = function(inputs, outputs, mode=Mode(linker="c", optimizer="None"))
    py_fn = function(inputs, outputs, mode=Mode(linker="py", optimizer="None"))
    debug_fn = function(inputs, outputs, mode=DebugMode(linker="c", optimizer="None"))
    for node, thunk in zip(c_fn.fn.nodes, c_fn.fn.thunks, strict=True):
        if type(node.op) in ADVANCED:
            assert isinstance(thunk, _advanced.AdvancedThunk), node
    expected = py_fn(*copy.deepcopy(values))
    for got in (c_fn(*copy.deepcopy(values)), debug_fn(*copy.deepcopy(values))):
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_array_equal(g, e, strict=True)


def _tensor(dtype: str, ndim: int, name: str = "x") -> Variable:
    return T.TensorType(dtype, (False,) * ndim)(name)


def test_every_advanced_op_has_a_precompiled_entry() -> None:
    registry = get_registry()
    for op_class in ADVANCED:
        kernel = registry.lookup(op_class)
        assert kernel is not None and kernel.owner == "opgraph-backend-c", op_class
        assert "subtensor_advanced" in kernel.impl.__module__, op_class


# ----------------------------------------------------------------------------------------
# AdvancedSubtensor1: the gather


@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_dtypes_layouts_and_ranks(dtype: str) -> None:
    idx = np.array([0, -1, 2, 2, 3, -4, 1])
    for shape in [(4,), (4, 3), (4, 2, 5)]:
        x = _tensor(dtype, len(shape))
        node = advanced_subtensor1(x, T.lvector("i")).owner
        for v in _layouts(_value(shape, dtype)):
            out = check_node(node, v, idx)
            assert out.flags.c_contiguous and not np.shares_memory(out, v)
            check_node(node, v, idx[:0])  # empty index
            check_node(node, v, idx[::-2])  # strided index


@pytest.mark.parametrize("idx_dtype", INDEX_DTYPES)
def test_gather_index_dtypes(idx_dtype: str) -> None:
    x = T.fmatrix("x")
    node = advanced_subtensor1(x, _tensor(idx_dtype, 1, "i")).owner
    v = _value((200, 3), "float32")
    idx = np.array([0, 5, 127, 3, 199 if np.iinfo(idx_dtype).max >= 199 else 1], idx_dtype)
    check_node(node, v, idx)
    if np.dtype(idx_dtype).kind == "i":
        check_node(node, v, np.array([-1, -128], dtype=idx_dtype))
    big = min(np.iinfo(idx_dtype).max, 1000)
    assert check_node(node, v[:100], np.array([1, big], dtype=idx_dtype)) is None  # too big


def test_gather_errors_match_perform() -> None:
    x = T.dmatrix("x")
    node = advanced_subtensor1(x, T.lvector("i")).owner
    v = _value((3, 4))
    for bad in ([3], [0, -4], [1, 2, 10**12]):
        assert check_node(node, v, np.array(bad)) is None, bad
    assert check_node(node, np.zeros((0, 4)), np.array([0])) is None  # take from empty axis
    check_node(node, np.zeros((0, 4)), np.array([], dtype="int64"))
    huge = advanced_subtensor1(x, T.TensorType("uint64", (False,))("u")).owner
    assert check_node(huge, v, np.array([2**64 - 1], dtype="uint64")) is None  # too large
    check_node(huge, v, np.array([2, 0], dtype="uint64"))


def test_gather_empty_rows_readonly_and_unusual_values() -> None:
    x = T.dmatrix("x")
    node = advanced_subtensor1(x, T.lvector("i")).owner
    check_node(node, np.zeros((3, 0)), np.array([2, 0, 1]))
    ro = _value((3, 4))
    ro.flags.writeable = False
    assert check_node(node, ro, np.array([1, 1])).flags.writeable
    swapped = _value((3, 4)).astype(">f8")
    check_node(node, swapped, np.array([2, 0]))  # copied bytes: the same dtype
    check_node(node, swapped, np.array([2, 0]).astype(">i8"), fast=False)  # perform
    thunk, (cell,) = _thunk(node, [np.ma.masked_array(_value((3, 4))), np.array([0])], True)
    thunk()
    assert type(cell[0]) is np.ma.MaskedArray  # a subclass runs perform, which keeps it


def test_gather_large_releases_the_gil() -> None:
    x = T.fmatrix("x")
    node = advanced_subtensor1(x, T.ivector("i")).owner
    v = _value((1000, 64), "float32")
    idx = np.random.default_rng(1).integers(-1000, 1000, 5000).astype("int32")
    check_node(node, v, idx)
    check_node(node, np.asfortranarray(v), idx)


def test_gather_in_a_function() -> None:
    x = T.ftensor3("x")
    i = T.bvector("i")
    outs = [advanced_subtensor1(x, i) * 2, x[i].sum(), x.take(i, axis=0)]
    check_function([x, i], outs, _value((5, 3, 2), "float32"), np.array([4, -5, 0, 0], "int8"))


# ----------------------------------------------------------------------------------------
# AdvancedIncSubtensor1: set and increment along axis 0


def _inc1(x: Variable, y: Variable, i: Variable, set_: bool, inplace: bool) -> Apply:
    return AdvancedIncSubtensor1(inplace=inplace, set_instead_of_inc=set_)(x, y, i).owner


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("set_", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_inc_and_set_subtensor1(dtype: str, set_: bool, inplace: bool) -> None:
    if dtype == "float16" and not set_:  # NumPy adds float16 through float32: no C loop
        node = _inc1(
            _tensor("float16", 1), _tensor("float16", 1, "y"), T.lvector("i"), set_, inplace
        )
        assert get_registry().lookup(AdvancedIncSubtensor1).impl(node.op, node) is None
        return
    idx = np.array([0, -1, 2, 2, 3, -4, 0, 0])  # repeated: accumulate / the last wins
    cases = [
        ((4, 3), (False, False), (8, 3)),
        ((4, 3), (True, False), (1, 3)),
        ((4, 3), (False,), (3,)),
        ((4,), (False,), (8,)),
        ((4,), (), ()),
        ((4, 2, 5), (False, True, False), (8, 1, 5)),
    ]
    for xshape, ybcast, yshape in cases:
        x = _tensor(dtype, len(xshape))
        y = T.TensorType(dtype, ybcast)("y")
        node = _inc1(x, y, T.lvector("i"), set_, inplace)
        for xv in _layouts(_value(xshape, dtype)):
            for yv in _layouts(_value(yshape, dtype, seed=1)):
                out = check_node(node, xv, yv, idx)
                assert (out is xv) == inplace
            check_node(node, xv.copy(), _value(yshape, dtype, seed=2), idx[:0])
            check_node(node, xv.copy(), _value(yshape, dtype, seed=2), idx[::-1])


@pytest.mark.parametrize("idx_dtype", INDEX_DTYPES)
def test_inc_subtensor1_index_dtypes_and_errors(idx_dtype: str) -> None:
    x, y = T.dmatrix("x"), T.dmatrix("y")
    i = _tensor(idx_dtype, 1, "i")
    for inplace in (False, True):
        node = _inc1(x, y, i, False, inplace)
        check_node(node, _value((6, 2)), _value((4, 2)), np.array([5, 0, 5, 1], idx_dtype))
        big = min(np.iinfo(idx_dtype).max, 1000)
        bad = np.array([0, big, 1, 2], idx_dtype)
        assert check_node(node, _value((6, 2)), _value((4, 2)), bad) is None
        if np.dtype(idx_dtype).kind == "i":
            neg = np.array([-6, -1, -7, 0], idx_dtype)
            assert check_node(node, _value((6, 2)), _value((4, 2)), neg) is None


def test_inc_subtensor1_bad_values_run_perform() -> None:
    x, y = T.dmatrix("x"), T.dmatrix("y")
    i = T.lvector("i")
    idx = np.array([1, 0])
    for inplace in (False, True):
        node = _inc1(x, y, i, False, inplace)
        assert check_node(node, _value((3, 4)), _value((2, 3)), idx) is None  # y's shape
        assert check_node(node, _value((3, 4)), _value((1, 4)), idx) is None  # not broadcastable
        assert check_node(node, _value((3, 4)), _value((3, 4)), idx) is None
        check_node(node, np.zeros((0, 4)), np.zeros((0, 4)), idx[:0])
        assert check_node(node, np.zeros((0, 4)), np.zeros((2, 4)), idx) is None
    ro = _value((3, 4))
    ro.flags.writeable = False
    assert check_node(_inc1(x, y, i, False, True), ro, _value((2, 4)), idx) is None
    check_node(_inc1(x, y, i, True, False), ro, _value((2, 4)), idx)  # a copy: fine
    swapped = _value((3, 4)).astype(">f8")
    check_node(_inc1(x, y, i, False, False), swapped, _value((2, 4)), idx, fast=False)


def test_inc_subtensor1_repeated_indices_accumulate_in_order() -> None:
    x, y = T.fvector("x"), T.fvector("y")
    node = _inc1(x, y, T.lvector("i"), False, False)
    rng = np.random.default_rng(3)
    idx = rng.integers(-3, 3, 4000)
    yv = (rng.standard_normal(4000) * 1e6).astype("float32")
    out = check_node(node, np.zeros(3, "float32"), yv, idx)
    expected = np.zeros(3, "float32")
    for k, j in enumerate(idx):
        expected[j] += yv[k]
    np.testing.assert_array_equal(out, expected, strict=True)


def test_inc_subtensor1_y_overlapping_x_inplace() -> None:
    x, y = T.dmatrix("x"), T.dmatrix("y")
    node = _inc1(x, y, T.lvector("i"), False, True)
    buf = _value((6, 3))
    twin = buf.copy()
    thunk, (cell,) = _thunk(node, [buf, buf[2:4], np.array([3, 2])], True)
    thunk()
    assert thunk.perform_calls == 1  # y overlaps x: perform's NumPy calls handle it
    np.add.at(twin, np.array([3, 2]), twin[2:4])
    np.testing.assert_array_equal(cell[0], twin)


def test_inc_subtensor1_casts_y_like_perform() -> None:
    x = T.imatrix("x")
    node = _inc1(x, T.dvector("y"), T.lvector("i"), True, False)  # set: an unsafe cast
    check_node(node, np.zeros((3, 3), "int32"), np.array([1.7, -2.2, 3.9]), np.array([2, 2]))
    node = _inc1(T.dmatrix("x"), T.fvector("y"), T.lvector("i"), False, True)
    check_node(node, _value((3, 3)), _value((3,), "float32"), np.array([0, 0, 2]))
    node = _inc1(x, T.bvector("y"), T.lvector("i"), False, False)
    check_node(node, np.full((3, 3), 2**31 - 2, "int32"), np.array([1, 2, 3], "int8"), [1, 1])
    # float32 += float64: NumPy adds in float64 then rounds; the entry gives no C for it.
    node = _inc1(T.fmatrix("x"), T.dvector("y"), T.lvector("i"), False, False)
    assert get_registry().lookup(AdvancedIncSubtensor1).impl(node.op, node) is None


def test_inc_subtensor1_ints_wrap_and_bool_is_or() -> None:
    node = _inc1(T.bvector("x"), T.bvector("y"), T.lvector("i"), False, False)
    check_node(node, np.array([120, -128], "int8"), np.array([10, -1, 100], "int8"), [0, 1, 0])
    node = _inc1(T.TensorType("bool", (False,))("x"), T.TensorType("bool", (False,))("y"),
                 T.lvector("i"), False, True)  # fmt: skip
    check_node(node, np.array([True, False, False]), np.array([True, True, False]), [0, 1, 2])


def test_inc_subtensor1_in_a_function() -> None:
    x, y = T.dmatrix("x"), T.dmatrix("y")
    i = T.ivector("i")
    outs = [
        T.inc_subtensor(x[i], y),
        T.set_subtensor(x[i], y * 2),
        T.inc_subtensor(x[i], 1.5),
    ]
    check_function(
        [x, y, i], outs, _value((4, 3)), _value((5, 3)), np.array([0, 3, 0, -1, 2], "int32")
    )


def test_embedding_gradient_runs_in_c_fast_run() -> None:
    emb = opgraph.shared(_value((50, 8)), name="emb")
    i = T.ivector("i")
    cost = (emb[i] ** 2).sum()
    gemb = opgraph.grad(cost, emb)
    c_fn = function([i], [cost, gemb], mode=Mode(linker="c"))
    py_fn = function([i], [cost, gemb], mode=Mode(linker="py"))
    ran = {type(n.op) for n in c_fn.fn.nodes} & ADVANCED
    assert {AdvancedSubtensor1, AdvancedIncSubtensor1} <= ran, ran
    for node, thunk in zip(c_fn.fn.nodes, c_fn.fn.thunks, strict=True):
        if type(node.op) in ADVANCED:
            assert isinstance(thunk, _advanced.AdvancedThunk), node
    idx = np.array([3, 7, 3, 49, 0, 3], "int32")
    for got, exp in zip(c_fn(idx), py_fn(idx), strict=True):
        np.testing.assert_array_equal(got, exp)


# ----------------------------------------------------------------------------------------
# AdvancedIncSubtensor: np.add.at through integer arrays


@pytest.mark.parametrize("dtype", ["float32", "float64", "int16", "uint64", "bool", "complex64"])
def test_advanced_inc_subtensor_matches_add_at(dtype: str) -> None:
    rng = np.random.default_rng(5)
    xshape = (3, 4, 5)
    for trial in range(40):
        k = int(rng.integers(1, 4))
        bshape = [(6,), (2, 6), (3, 1, 4), ()][trial % 4]
        ivals = []
        for d in range(k):
            shape = bshape if d or trial % 3 else bshape[-1:]  # broadcast against the rest
            iv = rng.integers(-xshape[d], xshape[d], shape)
            if trial % 5 == 1:
                iv = np.asfortranarray(iv)
            elif trial % 5 == 2:
                iv = np.asarray(iv.astype("uint8") % xshape[d])
            ivals.append(iv)
        idx = [_tensor(str(v.dtype), v.ndim, f"i{d}") for d, v in enumerate(ivals)]
        target = np.broadcast_shapes(*[v.shape for v in ivals]) + xshape[k:]
        y = _tensor(dtype, len(target), "y")
        inplace = bool(trial % 2)
        node = AdvancedIncSubtensor(inplace=inplace)(_tensor(dtype, 3), y, *idx).owner
        yv = (_value(target, dtype, seed=trial) * 1000).astype(dtype)
        xv = _layouts(_value(xshape, dtype))[trial % 3]
        out = check_node(node, xv, yv, *ivals)
        assert (out is xv) == inplace


def test_advanced_inc_subtensor_broadcast_y_and_errors() -> None:
    x = T.dtensor3("x")
    i, j = T.lvector("i"), T.lmatrix("j")
    y = T.TensorType("float64", (True, False))("y")
    node = advanced_inc_subtensor(x, y, i, j).owner
    xv = _value((3, 4, 5))
    check_node(node, xv, _value((1, 5)), np.array([0, -1, 0]), np.array([[1], [1]]))
    for bad_i, bad_j in [([3], [[0]]), ([0], [[-5]]), ([0, 1], [[0, 1, 2]])]:
        assert check_node(node, xv, _value((1, 5)), np.array(bad_i), np.array(bad_j)) is None
    assert check_node(node, xv, _value((1, 4)), np.array([0]), np.array([[1]])) is None
    check_node(node, xv, _value((1, 5)), np.array([], "int64"), np.zeros((2, 0), "int64"))


def test_advanced_inc_subtensor_left_to_perform() -> None:
    x, y = T.dmatrix("x"), T.dvector("y")
    i = T.lvector("i")
    impl = get_registry().lookup(AdvancedIncSubtensor).impl
    set_node = advanced_set_subtensor(x, y, i, i).owner
    assert impl(set_node.op, set_node) is PERFORM  # one NumPy assignment
    i_v = np.array([0, 2])
    check_node(set_node, _value((3, 3)), _value((2,)), i_v, i_v, c=False)
    sliced = advanced_inc_subtensor(x, y, slice(None), i).owner
    assert impl(sliced.op, sliced) is None  # np.add.at through a slice: no C yet


def test_advanced_inc_subtensor_in_a_function() -> None:
    x = T.ftensor3("x")
    i, j = T.ivector("i"), T.lvector("j")
    w = T.fmatrix("w")
    outs = [advanced_inc_subtensor(x, w, i, j), opgraph.grad((x[i, j] * w).sum(), x)]
    check_function(
        [x, w, i, j],
        outs,
        _value((3, 4, 2), "float32"),
        _value((5, 2), "float32"),
        np.array([0, 2, 0, 0, -1], "int32"),
        np.array([1, 3, 1, 1, 0]),
    )


def _add_at_reference(x: np.ndarray, y: np.ndarray, indices: Sequence[np.ndarray]) -> np.ndarray:
    """``np.add.at``'s documented meaning, one Python add per visited element, in C order."""
    out = x.copy()
    index = np.broadcast_arrays(*indices)
    yb = np.broadcast_to(y, index[0].shape + x.shape[len(indices) :])
    for p in np.ndindex(*index[0].shape):
        at = tuple(int(a[p]) for a in index)
        out[at] = out[at] + yb[p]
    return out


def test_advanced_inc_subtensor_keeps_add_at_meaning_where_numpy_errs() -> None:
    """Two NumPy 2.4 bugs that perform steps around too; the C thunk keeps ``np.add.at``'s meaning.

    ``np.add.at`` on a 1-d ``x`` with a 2-d index and a ``y`` broadcast along the index's
    leading dimension reads past ``y``; ``np.unravel_index`` (which perform calls) of an
    ``(N, 1)`` array with N > 8192 repeats coordinates (numpy/numpy#31980).
    """
    x, y, i = T.lvector("x"), T.lvector("y"), T.lmatrix("i")
    node = advanced_inc_subtensor(x, y, i).owner
    iv, yv = np.array([[0, 1], [0, 1], [2, 3]]), np.array([10, 100])
    thunk, (cell,) = _thunk(node, [np.zeros(4, "int64"), yv, iv], True)
    thunk()
    assert thunk.perform_calls == 0
    np.testing.assert_array_equal(cell[0], [20, 200, 10, 100])
    x2 = T.TensorType("float64", (False, True))("x")
    node = advanced_inc_subtensor(x2, T.dscalar("y"), T.lvector("j")).owner
    jv = np.random.default_rng(2).integers(0, 4, 9000)
    thunk, (cell,) = _thunk(node, [np.zeros((4, 1)), np.asarray(1.0), jv], True)
    thunk()
    np.testing.assert_array_equal(cell[0][:, 0], np.bincount(jv, minlength=4))
    np.testing.assert_array_equal(cell[0], _add_at_reference(np.zeros((4, 1)), 1.0, [jv]))
