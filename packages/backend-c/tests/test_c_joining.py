"""The precompiled thunks of Join, Split, ARange, Eye and CumOp against ``perform``.

Node-level checks run one node's C thunk (``opgraph_c._joining``, ``opgraph_c._cumulative``)
and its Op's ``perform`` on the same values and compare the outputs bit for bit (values,
dtypes, shapes, memory layout), views (``np.shares_memory`` and identity with each input)
and errors (type and text). Function-level checks compile small graphs with the ``c``
linker, the ``py`` linker and ``DebugMode(linker="c")``.
"""

from __future__ import annotations

import copy
import itertools
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from thunk_checks import layouts as _layouts
from thunk_checks import node_storage
from thunk_checks import perform_outputs as _perform
from thunk_checks import twin as _twin

import opgraph.tensor as T
from opgraph.compile.debugmode import DebugMode
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.graph.basic import Apply, Variable
from opgraph.link.dispatch import KernelFallbackWarning
from opgraph.tensor.cumulative import CumOp
from opgraph.tensor.joining import Join, Split
from opgraph.tensor.structure import ARange, Eye
from opgraph_c import _cumulative, _joining
from opgraph_c.kernels.creation import arange_c, eye_c
from opgraph_c.kernels.cumulative import cumop_c
from opgraph_c.registry import get_registry

C_THUNKS = (_joining.JoiningThunk, _cumulative.CumThunk)
OPS = {Join: "joining", Split: "joining", ARange: "creation", Eye: "creation", CumOp: "cumulative"}


def _value(shape: Sequence[int], dtype: str = "float64", seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    return np.asarray(rng.standard_normal(shape) * 5).astype(dtype)


def _strides(a: np.ndarray) -> list[int]:
    """Strides of the dimensions longer than 1 (the others are arbitrary)."""
    return [s for s, n in zip(a.strides, a.shape, strict=True) if n > 1]


def _thunk(node: Apply, values: Sequence[Any]) -> tuple[Any, list[list[Any]], list[int]]:
    """The node's C thunk with its input cells holding ``values`` (constants filled in), its
    output cells, and a list counting the thunk's calls of the Op's ``perform``."""
    storage = node_storage(node, values)
    calls = [0]
    perform = node.op.perform

    def counted(*args: Any) -> None:
        calls[0] += 1
        perform(*args)

    node.op.perform = counted  # the thunk takes the Op's perform when it is built
    try:
        thunk = get_registry().make_thunk(node, storage, None)
    finally:
        del node.op.perform
    assert isinstance(thunk, C_THUNKS), (node.op, thunk)
    assert not getattr(thunk, "py_fallback", False)
    return thunk, [storage[o] for o in node.outputs], calls


def _outcome(fn: Any) -> tuple[Any, Any]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            return fn(), None
    except Exception as exc:  # compared between the two implementations
        return None, exc


def check_node(node: Apply, *values: Any, fast: bool | None = None) -> list[Any]:
    """Run ``node``'s C thunk and ``perform`` on (copies of) ``values``: the same bits.

    Returns the C thunk's outputs (none when both raised). ``fast``: whether the thunk must
    compute them in C (True) or hand the values to ``perform`` (False).
    """
    c_values = list(values)
    py_values = [_twin(v) for v in c_values]
    thunk, cells, calls = _thunk(node, c_values)
    _, c_err = _outcome(thunk)
    if fast is not None:
        assert calls[0] == (0 if fast else 1), (node.op, calls[0])
    py_out, py_err = _outcome(lambda: _perform(node, py_values))
    if py_err is not None or c_err is not None:
        assert type(c_err) is type(py_err), (c_err, py_err)
        assert str(c_err) == str(py_err)
        return []
    c_out = [c[0] for c in cells]
    for j, (c, p) in enumerate(zip(c_out, py_out, strict=True)):
        assert type(c) is type(p), (j, type(c), type(p))
        assert c.dtype == p.dtype and c.shape == p.shape, (j, c, p)
        assert np.ascontiguousarray(c).tobytes() == np.ascontiguousarray(p).tobytes(), (j, c, p)
        assert _strides(c) == _strides(p), (j, c.strides, p.strides)
        assert c.flags.writeable == p.flags.writeable, j
        for i, (cv, pv) in enumerate(zip(c_values, py_values, strict=True)):
            if isinstance(pv, np.ndarray):
                assert np.shares_memory(c, cv) == np.shares_memory(p, pv), (j, i)
                assert (c is cv) == (p is pv), (j, i)
    return c_out


def check_function(inputs: list[Variable], outputs: list[Variable], *values: Any) -> None:
    """Compile with the c linker (these ops as C thunks), py and DebugMode(c): same results."""
    c_fn = function(inputs, outputs, mode=Mode(linker="c", optimizer="None"))
    py_fn = function(inputs, outputs, mode=Mode(linker="py", optimizer="None"))
    debug_fn = function(inputs, outputs, mode=DebugMode(linker="c", optimizer="None"))
    seen = set()
    for node, thunk in zip(c_fn.fn.nodes, c_fn.fn.thunks, strict=True):
        if type(node.op) in OPS:
            assert isinstance(thunk, C_THUNKS), node
            assert not getattr(thunk, "py_fallback", False), node
            seen.add(type(node.op))
    assert seen, "no node of these ops in the graph"
    expected = py_fn(*copy.deepcopy(values))
    for got in (c_fn(*copy.deepcopy(values)), debug_fn(*copy.deepcopy(values))):
        for g, e in zip(got, expected, strict=True):
            assert g.dtype == e.dtype and g.shape == e.shape
            assert g.tobytes() == e.tobytes()


def test_every_op_has_a_precompiled_entry() -> None:
    registry = get_registry()
    for op_class, module in OPS.items():
        kernel = registry.lookup(op_class)
        assert kernel is not None and kernel.owner == "opgraph-backend-c", op_class
        assert kernel.impl.__module__ == f"opgraph_c.kernels.{module}", op_class


# ----------------------------------------------------------------------------------------
# Join


def _joined(dtypes: Sequence[str], ndim: int, axis: Any, view: int = -1) -> Apply:
    tensors = [T.TensorType(d, (False,) * ndim)(f"t{k}") for k, d in enumerate(dtypes)]
    return Join(view)(axis, *tensors).owner


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "uint8", "bool"])
def test_join_layouts_and_axes(dtype: str) -> None:
    a = T.lscalar("a")
    node = _joined([dtype] * 3, 2, a)
    pieces = [_value((2, 3), dtype, 1), _value((2, 1), dtype, 2), _value((2, 0), dtype, 3)]
    for layouts in itertools.product(*[_layouts(p) for p in pieces]):
        (out,) = check_node(node, np.int64(1), *layouts, fast=True)
        assert out.shape == (2, 4)
        check_node(node, np.array(-1), *layouts, fast=True)
    rows = [_value((3, 2), dtype, 1), _value((1, 2), dtype, 2), _value((0, 2), dtype, 3)]
    for layouts in itertools.product(*[_layouts(p) for p in rows]):
        for axis in (0, -2):
            (out,) = check_node(node, np.array(axis, dtype="int8"), *layouts, fast=True)
            assert out.shape == (4, 2)


def test_join_3d_constant_axis_and_one_input() -> None:
    for axis in range(3):
        node = _joined(["float64"] * 2, 3, axis)
        v = _value((2, 3, 4))
        for x, y in itertools.product(_layouts(v), _layouts(v * 2)):
            check_node(node, x, y, fast=True)
    one = _joined(["int64"], 3, 1)
    for x in _layouts(_value((2, 3, 4), "int64")):
        (out,) = check_node(one, x, fast=True)
        assert not np.shares_memory(out, x)
    empty = _joined(["float32"] * 2, 2, 0)
    check_node(
        empty, np.zeros((0, 3), "float32"), np.zeros((0, 3), "float32", order="F"), fast=True
    )


def test_join_mixed_dtypes_cast_like_perform() -> None:
    for dtypes in (["float32", "float64"], ["int8", "uint8"], ["int32", "float32"]):
        node = _joined(dtypes, 2, 0)
        assert node.outputs[0].dtype == np.result_type(*dtypes)
        for x, y in itertools.product(
            _layouts(_value((2, 3), dtypes[0])), _layouts(_value((1, 3), dtypes[1]))
        ):
            check_node(node, x, y, fast=True)
    node = _joined(["float64", "float64"], 1, 0)
    check_node(node, np.arange(3.0).astype(">f8"), np.arange(2.0), fast=True)  # byte-swapped input


def test_join_casts_to_an_output_dtype_numpy_would_not_pick() -> None:
    """perform's ``astype`` after ``np.concatenate``: a node whose output dtype is wider."""
    tensors = [T.TensorType("int32", (False, False))(n) for n in "xy"]
    axis = T.constant(np.int64(0))
    node = Apply(Join(), [axis, *tensors], [T.TensorType("float64", (False, False))()])
    for x, y in itertools.product(_layouts(_value((2, 3), "int32")), repeat=2):
        (out,) = check_node(node, x, y, fast=True)
        assert out.dtype == np.float64


def test_join_view_returns_the_input_like_perform() -> None:
    node = _joined(["float64"] * 3, 2, 1, view=1)
    x = _value((2, 3))
    (out,) = check_node(node, np.zeros((2, 0)), x, np.zeros((2, 0)), fast=True)
    assert out is x
    (out,) = check_node(node, np.zeros((2, 1)), x, np.zeros((2, 0)), fast=True)
    assert not np.shares_memory(out, x)
    # Perform only looks at the axis lengths of the others (no shape check) for the view.
    (out,) = check_node(node, np.zeros((5, 0)), x, np.zeros((1, 0)), fast=True)
    assert out is x
    mixed = _joined(["float32", "float64"], 1, 0, view=0)
    (out,) = check_node(mixed, np.ones(3, "float32"), np.zeros(0), fast=True)
    assert out.dtype == np.float64


def test_join_errors_match_perform() -> None:
    a = T.lscalar("a")
    node = _joined(["float64"] * 2, 2, a)
    x = _value((2, 3))
    assert check_node(node, np.int64(0), x, _value((2, 4)), fast=False) == []  # shape mismatch
    assert check_node(node, np.int64(2), x, x, fast=False) == []  # axis out of range
    assert check_node(node, np.int64(-3), x, x, fast=False) == []
    assert (
        check_node(node, np.int64(0), x, _value((3,)), fast=False) == []
    )  # a value of another rank
    check_node(node, np.int64(0), x, x.tolist(), fast=False)  # not an ndarray: perform converts it


def test_join_subclass_runs_perform() -> None:
    class Sub(np.ndarray):
        pass

    node = _joined(["float64"] * 2, 1, 0)
    (out,) = check_node(node, np.arange(3.0).view(Sub), np.arange(2.0), fast=False)
    assert type(out) is np.ndarray  # np.concatenate's type, via perform


def test_join_large_inputs() -> None:
    node = _joined(["float64"] * 2, 2, 1)
    check_node(node, _value((300, 200)), _value((300, 100), seed=1), fast=True)
    check_node(node, _value((300, 200)).T.copy().T, _value((300, 100), seed=1), fast=True)


def test_join_in_a_function() -> None:
    x, y = T.dmatrix("x"), T.dmatrix("y")
    a = T.lscalar("a")
    outs = [T.concatenate([x, y], axis=a) * 2, T.join(0, x, y, x), T.stack([x, y], axis=1)]
    check_function([x, y, a], outs, _value((2, 3)), _value((2, 3), seed=1), 1)
    check_function([x, y, a], outs, _value((2, 3)), _value((2, 3), seed=1), -2)


# ----------------------------------------------------------------------------------------
# Split


def _split(n: int, *inputs: Any) -> Apply:
    return Split(n)(*inputs, return_list=True)[0].owner


@pytest.mark.parametrize("dtype", ["float64", "float32", "int16", "bool"])
def test_split_layouts_axes_and_sizes(dtype: str) -> None:
    x = T.TensorType(dtype, (False, False, False))("x")
    a = T.lscalar("a")
    s = T.lvector("s")
    node = _split(3, x, a, s)
    v = _value((4, 5, 6), dtype)
    for axis in (0, 1, 2, -1, -3):
        n = v.shape[axis]
        for sizes in ([1, 2, n - 3], [0, n, 0], [n, 0, 0]):
            for layout in _layouts(v):
                outs = check_node(node, layout, np.int64(axis), np.array(sizes), fast=True)
                assert [o.shape[axis] for o in outs] == sizes
                assert all(o.flags.c_contiguous for o in outs)


def test_split_one_piece_small_int_sizes_and_empty() -> None:
    x = T.fmatrix("x")
    node = _split(1, x, 1, T.ivector("s"))
    v = _value((3, 4), "float32")
    (out,) = check_node(node, v, np.array([4], dtype="int32"), fast=True)
    assert not np.shares_memory(out, v)
    node = _split(2, x, 0, np.array([0, 0], dtype="uint8"))
    check_node(node, np.zeros((0, 4), "float32"), fast=True)


def test_split_errors_match_perform() -> None:
    x = T.dmatrix("x")
    a = T.lscalar("a")
    s = T.lvector("s")
    node = _split(2, x, a, s)
    v = _value((3, 4))
    for axis, sizes in [(0, [1, 1]), (0, [4, -1]), (2, [1, 2]), (-3, [1, 2]), (1, [1, 2, 1])]:
        assert check_node(node, v, np.int64(axis), np.array(sizes), fast=False) == [], (axis, sizes)
    check_node(
        node, _value((3,)), np.int64(0), np.array([1, 2]), fast=False
    )  # another rank: perform


def test_split_large_input() -> None:
    node = _split(2, T.dmatrix("x"), 1, np.array([100, 200]))
    for layout in _layouts(_value((300, 300))):
        check_node(node, layout, fast=True)


def test_split_in_a_function() -> None:
    x = T.dtensor3("x")
    a = T.lscalar("a")
    s = T.lvector("s")
    outs = T.split(x, s, 2, axis=a)
    check_function([x, a, s], [outs[0] + 1, outs[1]], _value((2, 3, 4)), 2, np.array([1, 3]))
    # Split's gradient is a Join, Join's a Split.
    y = T.dmatrix("y")
    cost = T.sum(T.concatenate([y, y * 2], axis=1) ** 2)
    check_function([y], [T.grad(cost, y)], _value((2, 3)))


# ----------------------------------------------------------------------------------------
# ARange


def _arange_node(dtype: str, in_dtypes: Sequence[str]) -> Apply:
    start, stop, step = (T.TensorType(d, ())(n) for d, n in zip(in_dtypes, "abc"))
    return ARange(dtype)(start, stop, step).owner


ARANGE_CASES = [
    (0, 10, 1),
    (3, -7, -2),
    (5, 5, 1),
    (5, 0, 1),
    (-4, 7, 3),
    (0, 300, 1),  # wraps in int8 and uint8 as NumPy's fill does
    (1, 2, 5),
    (0, 100000, 7),
]


@pytest.mark.parametrize(
    "dtype", ["int64", "int32", "int8", "uint8", "uint64", "float64", "float32"]
)
def test_arange_integer_inputs(dtype: str) -> None:
    for in_dtypes in (["int64"] * 3, ["int8", "int32", "uint16"]):
        node = _arange_node(dtype, in_dtypes)
        for case in ARANGE_CASES:
            values = [np.asarray(v).astype(d) for v, d in zip(case, in_dtypes)]
            if any(int(v) != c for v, c in zip(values, case)):
                continue  # not representable in this input dtype
            start, stop, step = case
            length = max(-(-(stop - start) // step), 0)
            first = [start, start + step][:length]
            if dtype.startswith(("int", "uint")):
                info = np.iinfo(dtype)
                fits = all(info.min <= v <= info.max for v in first)
            else:
                fits = True
            # Out of the dtype's range, NumPy's setitem raises: perform words the error.
            check_node(node, *values, fast=fits)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_arange_float_inputs_follow_numpy_arithmetic(dtype: str) -> None:
    rng = np.random.default_rng(4)
    mixed = ["float32", "float64", "float32"]
    for in_dtypes in (["float64"] * 3, mixed, ["int64", "int64", "float64"]):
        node = _arange_node(dtype, in_dtypes)
        cases = [(0.1, 1.0, 0.3), (1.0, 0.0, -0.1), (0.0, 1.0, 1e-3), (2.5, 2.5, 1.0)]
        cases += [tuple(rng.uniform(-50, 50, 3)) for _ in range(30)]
        if in_dtypes[0] == "float64":  # (stop - start) / step underflows: 1 element, then 0
            cases += [(0.0, 1e-300, 1e300), (0.0, -1e-300, 1e300)]
        for case in cases:
            values = [np.asarray(v).astype(d) for v, d in zip(case, in_dtypes)]
            if float(values[2]) == 0:
                continue
            check_node(node, *values, fast=True)


def test_arange_errors_and_edges_match_perform() -> None:
    node = _arange_node("int64", ["int64"] * 3)
    assert check_node(node, np.int64(0), np.int64(5), np.int64(0), fast=False) == []  # step 0
    check_node(
        node, np.int64(2**60), np.int64(2**60 + 5), np.int64(1), fast=False
    )  # perform (too big)
    check_node(node, np.int64(-(2**62)), np.int64(2**62), np.int64(2**61), fast=False)
    u8 = _arange_node("uint8", ["int64"] * 3)
    assert check_node(u8, np.int64(-1), np.int64(5), np.int64(1), fast=False) == []  # -1 in uint8
    check_node(u8, np.int64(10), np.int64(0), np.int64(-3), fast=True)
    assert (
        check_node(u8, np.int64(255), np.int64(260), np.int64(1), fast=False) == []
    )  # 256 in uint8
    u64 = _arange_node("uint64", ["uint64"] * 3)
    check_node(u64, np.uint64(2**64 - 5), np.uint64(2**64 - 1), np.uint64(1), fast=False)  # perform
    f = _arange_node("float64", ["float64"] * 3)
    assert check_node(f, np.float64(0), np.float64(np.nan), np.float64(1), fast=False) == []
    assert check_node(f, np.float64(0), np.float64(np.inf), np.float64(1), fast=False) == []
    assert (
        check_node(f, np.float64(-1e308), np.float64(1e308), np.float64(1e-308), fast=False) == []
    )
    f32 = _arange_node("float32", ["float64"] * 3)
    assert (
        check_node(f32, np.float64(1e300), np.float64(3e300), np.float64(1e300), fast=False) == []
    )


def test_arange_scalar_values_and_float_stop() -> None:
    """NumPy and Python scalars (as perform's ``np.asarray(v).item()`` reads them)."""
    node = _arange_node("int64", ["int64"] * 3)
    check_node(node, 2, np.int32(11), np.uint8(3), fast=True)
    check_node(node, True, 5, 1, fast=False)  # a Python bool: perform
    f = _arange_node("float32", ["float64"] * 3)
    check_node(f, 0.5, np.float32(3.25), np.float64(0.125), fast=True)
    stop = _arange_node("int64", ["int64", "float64", "int64"])
    check_node(stop, np.array(0), np.array(5.5), np.array(1), fast=True)
    check_node(stop, np.array(0), np.array(-2.5), np.array(-1), fast=True)


def test_arange_entry_leaves_uncovered_dtypes() -> None:
    for dtype in ("float16", "complex128", "bool"):
        node = _arange_node(dtype, ["int64"] * 3)
        assert arange_c(node.op, node) is None
    node = _arange_node("int64", ["float64", "int64", "int64"])
    assert arange_c(node.op, node) is None


def test_arange_in_a_function() -> None:
    n = T.lscalar("n")
    x = T.dscalar("x")
    outs = [T.arange(n) * 2, T.arange(x, n, 0.25), T.arange(n, 0, -3, dtype="int16")]
    check_function([n, x], outs, 10, 0.5)


# ----------------------------------------------------------------------------------------
# Eye


@pytest.mark.parametrize("dtype", ["float64", "float32", "int8", "uint64", "bool", "complex128"])
def test_eye(dtype: str) -> None:
    n, m, k = T.lscalar("n"), T.lscalar("m"), T.iscalar("k")
    node = Eye(dtype)(n, m, k).owner
    for nn, mm, kk in itertools.product([0, 1, 3, 5], [0, 2, 5], [-6, -5, -2, 0, 1, 4, 5, 9]):
        (out,) = check_node(
            node, np.int64(nn), np.int64(mm), np.array(kk, dtype="int32"), fast=True
        )
        assert out.shape == (nn, mm)


def test_eye_errors_and_entry() -> None:
    node = Eye("float64")(T.lscalar("n"), T.lscalar("m"), 0).owner
    assert check_node(node, np.int64(-1), np.int64(3), fast=False) == []
    check_node(
        node, np.int64(2**41), np.int64(0), fast=False
    )  # perform (an empty 2**41 x 0 matrix)
    assert eye_c(node.op, node) is not None


def test_eye_in_a_function() -> None:
    x = T.dmatrix("x")
    check_function([x], [T.identity_like(x) + x, T.eye(3, 4, -1, dtype="int32")], _value((3, 3)))


# ----------------------------------------------------------------------------------------
# CumOp

CUM_DTYPES = ["float64", "float32", "int8", "int32", "int64", "uint8", "uint64", "bool"]


@pytest.mark.parametrize("mode", ["add", "mul"])
@pytest.mark.parametrize("dtype", CUM_DTYPES)
def test_cumop_axes_and_layouts(dtype: str, mode: str) -> None:
    x = T.TensorType(dtype, (False, False, False))("x")
    v = _value((3, 4, 5), dtype, 7)
    if dtype.startswith("float") and mode == "mul":
        v = (1 + v / 50).astype(dtype)
    for axis in (None, 0, 1, 2, -1):
        node = CumOp(axis, mode)(x).owner
        for layout in _layouts(v):
            (out,) = check_node(node, layout, fast=True)
            assert out.dtype == node.outputs[0].dtype


def test_cumop_float_sums_are_bit_identical() -> None:
    """Sequential accumulation in the output dtype, lanes side by side or one at a time."""
    rng = np.random.default_rng(1)
    for dtype in ("float32", "float64"):
        v = (rng.standard_normal((64, 300)) * 10 ** rng.uniform(-3, 3, (64, 300))).astype(dtype)
        x = T.TensorType(dtype, (False, False))("x")
        for axis, mode in itertools.product((None, 0, 1), ("add", "mul")):
            node = CumOp(axis, mode)(x).owner
            for layout in _layouts(v):
                check_node(node, layout, fast=True)


def test_cumop_special_values_and_overflow() -> None:
    x = T.dvector("x")
    v = np.array([1.0, np.nan, 2.0, np.inf, -np.inf, 0.0, -0.0, 3.0])
    for mode in ("add", "mul"):
        check_node(CumOp(0, mode)(x).owner, v, fast=True)
    i = T.lvector("i")
    big = np.array([2**62, 2**62, 2**62, -5, 3], dtype="int64")
    for mode in ("add", "mul"):
        check_node(CumOp(0, mode)(i).owner, big, fast=True)  # wraps as NumPy's int64 arithmetic
    u = T.TensorType("uint8", (False,))("u")
    check_node(CumOp(None, "mul")(u).owner, np.arange(1, 40, dtype="uint8"), fast=True)


def test_cumop_empty_0d_and_broadcastable() -> None:
    x = T.dmatrix("x")
    for axis in (None, 0, 1):
        for shape in ((0, 3), (3, 0), (1, 4), (4, 1)):
            check_node(CumOp(axis, "add")(x).owner, _value(shape), fast=True)
    s = T.TensorType("int32", ())("s")
    (out,) = check_node(CumOp(None, "add")(s).owner, np.array(7, dtype="int32"), fast=True)
    assert out.shape == (1,)
    b = T.TensorType("float64", (True, False))("b")
    check_node(CumOp(1, "mul")(b).owner, _value((1, 5)), fast=True)


def test_cumop_unexpected_values_run_perform() -> None:
    class Sub(np.ndarray):
        pass

    node = CumOp(0, "add")(T.dvector("x")).owner
    check_node(node, np.arange(4.0).view(Sub), fast=False)
    check_node(node, np.arange(4.0).astype(">f8"), fast=False)  # byte-swapped
    check_node(node, np.arange(4.0).reshape(2, 2), fast=False)  # another rank: NumPy's own result


def test_cumop_entry_leaves_uncovered_dtypes() -> None:
    for dtype in ("float16", "complex128"):
        node = CumOp(0, "add")(T.TensorType(dtype, (False,))("x")).owner
        assert cumop_c(node.op, node) is None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", KernelFallbackWarning)
            fn = function([node.inputs[0]], node.outputs[0], mode=Mode(linker="c"))
        np.testing.assert_array_equal(fn(np.ones(3, dtype)), np.arange(1, 4))


def test_cumop_large_input_threads_released() -> None:
    x = T.fmatrix("x")
    v = _value((400, 300), "float32")
    for axis in (0, 1, None):
        check_node(CumOp(axis, "add")(x).owner, v, fast=True)


def test_cumop_in_a_function() -> None:
    x = T.dmatrix("x")
    outs = [T.cumsum(x, axis=0), T.cumprod(x, axis=-1) + 1, T.cumsum(x)]
    check_function([x], outs, _value((3, 4)))
    cost = T.sum(T.cumsum(x, axis=1) ** 2)
    check_function([x], [T.grad(cost, x)], _value((3, 4)))


def test_fast_run_compiles_these_ops_to_c_thunks() -> None:
    x = T.dmatrix("x")
    n = T.lscalar("n")
    y = T.concatenate([x, T.eye(n, 3)], axis=0)
    outs = [T.cumsum(y, axis=0), *T.split(y, [1, 2], 2, axis=1), T.arange(n)]
    c_fn = function([x, n], outs, mode=Mode(linker="c"))
    py_fn = function([x, n], outs, mode=Mode(linker="py"))
    kinds = {
        type(nd.op)
        for nd, th in zip(c_fn.fn.nodes, c_fn.fn.thunks, strict=True)
        if isinstance(th, C_THUNKS)
    }
    assert {Join, Split, Eye, CumOp, ARange} <= kinds
    for g, e in zip(c_fn(_value((2, 3)), 3), py_fn(_value((2, 3)), 3), strict=True):
        assert g.dtype == e.dtype and g.tobytes() == e.tobytes()
