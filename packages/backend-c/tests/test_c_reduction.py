"""Sum, Prod, max and min reductions through the ``c`` linker, against NumPy and ``perform``.

The kernels (``opgraph_c.kernels.reduction``) reduce 2-D views in C, called by the
precompiled ``opgraph_c._reduce.ReduceThunk``: rows (pairwise trees over multi-accumulator
leaves), columns (blocks of accumulators) and, with OpenMP, both split among threads. Each
distinct node is one compiled module, so the tests reuse nodes (same names, same axes)
wherever they can: the session cache then compiles each once.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import opgraph.scalar.basic as ps
import opgraph.tensor as T
from opgraph.compile.debugmode import DebugMode
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.configdefaults import config
from opgraph.graph.basic import Variable
from opgraph.tensor.elemwise import CAReduce, Sum
from opgraph.testing import assert_allclose
from opgraph_c import _threads
from opgraph_c.kernels import reduction

AXES = [None, 1, (0, 2)]
C_MODE = Mode(linker="c", optimizer="None")
PY_MODE = Mode(linker="py", optimizer="None")


def _combos(ndim: int) -> list[tuple[int, ...] | None]:
    """Every non-empty set of axes of an ``ndim``-d input, and None."""
    axes = range(ndim)
    subsets = [c for r in range(1, ndim + 1) for c in itertools.combinations(axes, r)]
    return [None, *subsets]


def _layouts(xv: np.ndarray) -> list[np.ndarray]:
    """``xv``'s values in several memory layouts, and same-shape strided views."""
    out = [xv, np.asfortranarray(xv)]
    if xv.ndim >= 2:
        out.append(xv.transpose(*reversed(range(xv.ndim))).copy().transpose())
    big = np.zeros(tuple(2 * s for s in xv.shape), dtype=xv.dtype)
    view = big[tuple(slice(None, None, -2) for _ in xv.shape)]  # negative strides
    view[...] = xv
    out.append(view)
    return out


def _compile(
    inputs: Sequence[Variable], outputs: Sequence[Variable], c_thunks: bool = True
) -> tuple[Any, Any]:
    """The ``c`` function (no fallback; with ``c_thunks``, every reduction a C thunk) and
    the ``py`` one."""
    f = function(list(inputs), list(outputs), mode=C_MODE)
    ref = function(list(inputs), list(outputs), mode=PY_MODE)
    for node, thunk in zip(f.fn.nodes, f.fn.thunks, strict=True):
        assert not getattr(thunk, "py_fallback", False), node
        if c_thunks and isinstance(node.op, CAReduce):
            assert type(thunk).__name__ == "ReduceThunk", (node, thunk)
    return f, ref


def _check_against_perform(f: Any, ref: Any, *values: np.ndarray, exact: bool = False) -> None:
    for got, exp in zip(f(*values), ref(*values), strict=True):
        assert got.dtype == exp.dtype and got.shape == exp.shape, (got, exp)
        if exact:
            np.testing.assert_array_equal(got, exp)
        else:
            assert_allclose(got, exp)


@pytest.mark.parametrize("dtype", ["float64", "int32", "bool"])
def test_reductions_over_axes(dtype: str, rng: np.random.Generator) -> None:
    x = T.TensorType(dtype, (False, False, False))("x")
    outputs = []
    xv = (rng.standard_normal((3, 4, 5)) * 3).astype(dtype)
    for axis in AXES if dtype == "float64" else [(0, 2)]:  # few kernels: each is a module
        outputs += [T.sum(x, axis=axis), CAReduce(ps.maximum, axis)(x)]
        if dtype == "float64":
            outputs += [CAReduce(ps.minimum, axis)(x), T.prod(x, axis=axis)]
    f, ref = _compile([x], outputs)
    for layout in (xv, xv.transpose(2, 0, 1).copy().transpose(1, 2, 0), xv[:, ::2, ::-1]):
        _check_against_perform(f, ref, layout)


@pytest.mark.parametrize("ndim", [1, 2, 3])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int32"])
def test_every_axis_combination(ndim: int, dtype: str, rng: np.random.Generator) -> None:
    """Every set of axes of 1-D to 3-D inputs, in C, F, strided and reversed layouts, with
    and without keepdims (the same Sum node, then a DimShuffle)."""
    x = T.TensorType(dtype, (False,) * ndim)("x")
    outputs = []
    for axis in _combos(ndim):
        outputs += [T.sum(x, axis=axis), T.sum(x, axis=axis, keepdims=True)]
        if dtype != "float32":
            outputs.append(CAReduce(ps.maximum, axis)(x))
    f, ref = _compile([x], outputs)
    shape = (5, 3, 4)[:ndim] if ndim > 1 else (37,)
    xv = (rng.standard_normal(shape) * 10).astype(dtype)
    for layout in _layouts(xv):
        _check_against_perform(f, ref, layout)
    # length-1 dimensions, kept or reduced, are dropped before the view is formed
    _check_against_perform(f, ref, xv[(slice(0, 1),) * ndim])
    _check_against_perform(f, ref, xv[..., :1])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_prod_and_min_and_max_over_axes(dtype: str, rng: np.random.Generator) -> None:
    x = T.TensorType(dtype, (False, False, False))("x")
    outputs = []
    for axis in [None, 0, 2, (0, 1), (1, 2), (0, 2)]:
        outputs += [T.prod(x, axis=axis), CAReduce(ps.minimum, axis)(x)]
        outputs.append(CAReduce(ps.maximum, axis)(x))
    f, ref = _compile([x], outputs)
    xv = rng.uniform(0.5, 1.5, (6, 7, 40)).astype(dtype)
    for layout in _layouts(xv):
        _check_against_perform(f, ref, layout)


def test_walk_and_copy_paths(rng: np.random.Generator) -> None:
    """Kept dimensions that do not merge (one kernel call per outer index), and reduced
    dimensions that do not merge (a C-ordered copy), on large and small inner sizes."""
    x = T.dtensor3("x")
    f, ref = _compile([x], [T.sum(x, axis=1), T.sum(x, axis=(0, 2)), T.sum(x, axis=0)])
    for shape in [(3, 50, 70), (70, 2, 3), (2, 300, 2)]:
        xv = rng.standard_normal(shape)
        for layout in _layouts(xv):
            _check_against_perform(f, ref, layout)
    b = np.broadcast_to(rng.standard_normal((1, 50, 1)), (4, 50, 30))  # zero strides
    _check_against_perform(f, ref, b)


@pytest.mark.parametrize(
    "dtype", ["int8", "uint8", "int16", "uint16", "int64", "uint64", "float32", "bool"]
)
def test_dtypes_sum_and_max(dtype: str, rng: np.random.Generator) -> None:
    x = T.TensorType(dtype, (False, False))("x")
    f, ref = _compile([x], [T.sum(x, axis=0), T.sum(x), CAReduce(ps.maximum, 1)(x)])
    info = np.iinfo(dtype) if dtype not in ("float32", "bool") else None
    for shape in [(1, 1), (3, 5), (130, 70), (20, 900)]:
        if info is not None:
            xv = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
        else:
            xv = rng.standard_normal(shape) > 0.3 if dtype == "bool" else rng.standard_normal(shape)
            xv = xv.astype(dtype)
        for layout in _layouts(xv):
            _check_against_perform(f, ref, layout, exact=info is not None or dtype == "bool")


def test_integer_overflow_wraps_like_perform(rng: np.random.Generator) -> None:
    """Accumulating in a narrow acc_dtype wraps around, as NumPy (and perform) do."""
    x8 = T.TensorType("int8", (False, False))("x8")
    x32 = T.ivector("x32")
    outputs = [
        T.sum(x8, axis=1, dtype="int8", acc_dtype="int8"),
        T.sum(x8, axis=0, dtype="int8", acc_dtype="int8"),
        T.sum(x32, dtype="int32", acc_dtype="int32"),
        T.prod(x32, dtype="int32", acc_dtype="int32"),
        T.prod(x32),  # int64
    ]
    f, ref = _compile([x8, x32], outputs)
    v8 = rng.integers(-128, 128, (40, 3000), dtype="int8")
    v32 = rng.integers(2**30, 2**31 - 1, 10_000, dtype="int32") | 1  # odd: no zero product
    _check_against_perform(f, ref, v8, v32, exact=True)
    got = f(v8, v32)
    np.testing.assert_array_equal(got[2], np.sum(v32, dtype="int32"))  # it did wrap
    assert got[3] == np.prod(v32, dtype="int32") and got[4] == np.prod(v32, dtype="int64")


def test_acc_dtype_and_output_dtype(rng: np.random.Generator) -> None:
    xf = T.fmatrix("xf")
    xi = T.TensorType("int16", (False, False))("xi")
    outputs = [
        T.sum(xf, axis=1),  # acc float64, out float32
        T.sum(xf, axis=0, acc_dtype="float32"),
        T.sum(xf, dtype="float64"),
        T.sum(xi, axis=0),  # acc and out int64
        T.sum(xi, axis=1, dtype="int16", acc_dtype="int64"),
        T.sum(xi, acc_dtype="float64", dtype="float64"),
        T.prod(xf, axis=1),
    ]
    f, ref = _compile([xf, xi], outputs)
    for shape in [(4, 300), (300, 4)]:
        vf = rng.standard_normal(shape).astype("float32")
        vi = rng.integers(-3000, 3000, shape, dtype="int16")
        got = f(vf, vi)
        assert [g.dtype for g in got] == [o.type.dtype for o in outputs]
        _check_against_perform(f, ref, vf, vi)


def test_keepdims_acc_dtype_and_nan() -> None:
    x = T.fmatrix("x")
    s = T.sum(x, axis=1, keepdims=True, acc_dtype="float64")
    m = T.max(x, axis=0)
    f = function([x], [s, m], mode=Mode(linker="c"))
    xv = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]], dtype="float32")
    got_s, got_m = f(xv)
    assert got_s.shape == (2, 1) and got_s.dtype == np.float32
    assert np.isnan(got_s[0, 0]) and got_s[1, 0] == 15.0
    assert np.isnan(got_m[1]) and got_m[0] == 4.0 and got_m[2] == 6.0


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_max_min_propagate_nan_like_numpy(dtype: str, rng: np.random.Generator) -> None:
    """A NaN anywhere (first element, a leaf's lanes, its tail, a column block) wins."""
    x = T.TensorType(dtype, (False, False))("x")
    outputs = []
    for axis in (None, 0, 1):
        outputs += [CAReduce(ps.maximum, axis)(x), CAReduce(ps.minimum, axis)(x)]
    f, ref = _compile([x], outputs)
    for shape in [(3, 7), (5, 1000), (1100, 3), (2, 20_000)]:
        base = rng.standard_normal(shape).astype(dtype)
        base[0, -1] = np.inf
        base[-1, 0] = -np.inf
        spots = {(0, 0), (shape[0] - 1, shape[1] - 1), (shape[0] // 2, shape[1] // 2)}
        spots.add((shape[0] - 1, min(shape[1] - 1, 17)))
        for spot in spots:
            xv = base.copy()
            xv[spot] = np.nan
            for layout in _layouts(xv):
                got = f(layout)
                for i, (g, axis) in enumerate(zip(got, [None, None, 0, 0, 1, 1], strict=True)):
                    exp = (np.min if i % 2 else np.max)(layout, axis=axis)
                    np.testing.assert_array_equal(g, exp, err_msg=f"NaN at {spot}, axis {axis}")
                _check_against_perform(f, ref, layout, exact=True)
    xv = np.full((4, 40), np.nan, dtype=dtype)
    assert all(np.isnan(g).all() for g in f(xv))


def test_empty_reductions_match_perform() -> None:
    x = T.dmatrix("x")
    f = function([x], [T.sum(x, axis=0), T.prod(x, axis=1)], mode=Mode(linker="c"))
    s, p = f(np.zeros((0, 3)))
    assert_allclose(s, np.zeros(3))
    assert p.shape == (0,)
    g = function([x], CAReduce(ps.maximum, 0)(x), mode=C_MODE)
    with pytest.raises(ValueError, match="cannot reduce an empty array"):
        g(np.zeros((0, 3)))
    assert g(np.zeros((3, 0))).shape == (0,)


def test_empty_inputs_every_axis() -> None:
    x = T.dtensor3("x")
    outputs = [T.sum(x, axis=axis) for axis in _combos(3)]
    outputs += [T.prod(x, axis=axis) for axis in [None, 0, 2, (0, 2)]]
    f, ref = _compile([x], outputs)
    for shape in [(0, 3, 4), (2, 0, 4), (2, 3, 0), (0, 0, 0)]:
        _check_against_perform(f, ref, np.zeros(shape))


def test_scalar_and_no_axis_reductions_use_perform() -> None:
    """Reducing no axis is a copy: perform is the kernel (no fallback warning)."""
    s = T.dscalar("s")
    f, ref = _compile([s], [T.sum(s), CAReduce(ps.maximum, None)(s)], c_thunks=False)
    _check_against_perform(f, ref, np.float64(2.5))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_threaded_paths_match_serial_exactly(
    dtype: str, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With OpenMP from 1 element on, rows, split rows and column blocks are shared among
    threads (a team that does not time its calls: always threads); the results are bitwise
    those of one thread (the trees do not change)."""
    monkeypatch.setattr(_threads, "thread_limit", lambda: 4)
    monkeypatch.setitem(_threads.POLICY, "reduce", (False, True))
    x = T.TensorType(dtype, (False, False))("x")
    outputs = [T.sum(x, axis=0), T.sum(x, axis=1), T.sum(x), T.sum(x, axis=1, acc_dtype=dtype)]
    outputs += [CAReduce(ps.maximum, 1)(x), CAReduce(ps.minimum, 0)(x), T.prod(x, axis=1)]
    with config.change_flags(openmp=True, c__openmp_threshold=1):
        threaded, ref = _compile([x], outputs)
    with config.change_flags(openmp=True, c__openmp_threshold=10**12):
        serial, _ = _compile([x], outputs)
    for shape in [(1, 100_003), (3, 40_000), (5, 9), (700, 300), (2000, 33), (9, 4001)]:
        xv = rng.uniform(0.999, 1.001, shape).astype(dtype)
        xv[0, 0] = 1e3
        for layout in (xv, np.asfortranarray(xv)):
            got, exp = threaded(layout), serial(layout)
            for g, e in zip(got, exp, strict=True):
                np.testing.assert_array_equal(g, e)
            _check_against_perform(threaded, ref, layout)


def test_adaptive_team_switches_between_one_thread_and_threads_with_the_same_result(
    rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default (adaptive) team runs its first calls on threads, then one thread, then
    whichever was faster, probing the other now and then: every result is the same."""
    x = T.dmatrix("x")
    monkeypatch.setattr(_threads, "thread_limit", lambda: 4)
    xv = rng.standard_normal((300, 2000))
    before = _threads.timed_stats()
    with config.change_flags(openmp=True, c__openmp_threshold=1):
        f, ref = _compile([x], [T.sum(x, axis=0), T.sum(x)])
    first = f(xv)
    _check_against_perform(f, ref, xv)
    for _ in range(200):  # one thread probes threads after 4 ms of its sums
        for a, b in zip(f(xv), first, strict=True):
            np.testing.assert_array_equal(a, b)
    after = _threads.timed_stats()
    assert after["threaded"] > before["threaded"] and after["probes"] > before["probes"]


def test_openmp_off_matches(rng: np.random.Generator) -> None:
    x = T.dmatrix("x")
    with config.change_flags(openmp=False):
        f, ref = _compile([x], [T.sum(x, axis=0), T.sum(x)])
    xv = rng.standard_normal((300, 2000))
    _check_against_perform(f, ref, xv)


def test_float32_sum_accuracy_at_least_numpys(rng: np.random.Generator) -> None:
    """A float32 sum accumulated in float32 is pairwise (rows) or two-level (columns): its
    error against a float64 sum is at most a small factor of NumPy's float32 error."""
    x = T.fmatrix("x")
    outputs = [T.sum(x, acc_dtype="float32"), T.sum(x, axis=0, acc_dtype="float32")]
    outputs.append(T.sum(x, axis=1, acc_dtype="float32"))
    f, _ = _compile([x], outputs)
    xv = rng.uniform(0.0, 1.0, (2_000, 1_000)).astype("float32")
    total, cols, rows = f(xv)
    exact = [xv.astype("float64").sum(axis=a) for a in (None, 0, 1)]
    numpy32 = [xv.sum(axis=a, dtype="float32") for a in (None, 0, 1)]
    eps = np.finfo("float32").eps
    for got, ref, np32 in zip([total, cols, rows], exact, numpy32, strict=True):
        ours = np.max(np.abs(got - ref) / ref)
        theirs = np.max(np.abs(np32 - ref) / ref)
        assert ours <= 4 * max(theirs, 8 * eps), (ours, theirs)
    # axis 0: NumPy adds the 2000 rows one by one; the two-level sum is much closer
    assert np.max(np.abs(cols - exact[1]) / exact[1]) < 64 * eps


def test_debug_mode_compares_with_perform(rng: np.random.Generator) -> None:
    """DebugMode runs every C kernel and perform on copies of the inputs and compares them."""
    x = T.dtensor3("x")
    outputs = [T.sum(x, axis=1), T.sum(x, axis=(0, 2)), CAReduce(ps.maximum, 1)(x)]
    outputs.append(T.prod(x, axis=None))
    f = function([x], outputs, mode=DebugMode(linker="c", optimizer="None"))
    xv = rng.uniform(0.9, 1.1, (4, 5, 60))
    for layout in (xv, np.asfortranarray(xv), xv[::-1, :, ::2]):
        expected = [layout.sum(axis=1), layout.sum(axis=(0, 2)), layout.max(axis=1)]
        expected.append(layout.prod())
        for got, exp in zip(f(layout), expected, strict=True):
            assert_allclose(got, exp)


def test_bad_inputs_give_the_py_linker_errors() -> None:
    """Wrong ndim, a lossy dtype, non-numbers: the same errors as the Python linker (the
    function's input check, before any kernel runs); lossless dtypes are converted."""
    x = T.dmatrix("x")
    f = function([x], T.sum(x, axis=0), mode=C_MODE)
    g = function([x], T.sum(x, axis=0), mode=PY_MODE)
    bad_values = [np.zeros(3), np.zeros((2, 3, 1)), np.zeros((2, 3), "complex128"), "text", None]
    for bad in bad_values:
        with pytest.raises(Exception) as py_err:
            g(bad)
        with pytest.raises(type(py_err.value)) as c_err:
            f(bad)
        # the messages differ only in where each function was defined
        strip = re.compile(r"of function '[^']*'")
        assert strip.sub("", str(c_err.value)) == strip.sub("", str(py_err.value))
    for ok in (np.ones((2, 3), "int32"), np.ones((2, 3), "float32"), [[1.0, 2.0]]):
        assert_allclose(f(ok), g(ok))


def test_thunk_takes_perform_for_unexpected_values() -> None:
    """A value that is not an aligned native array of the node's dtype (possible when a
    thunk is driven by hand) goes through perform: same result."""
    x = T.fmatrix("x")
    f, _ = _compile([x], [T.sum(x, axis=1)])
    (thunk,) = [t for t in f.fn.thunks if type(t).__name__ == "ReduceThunk"]
    values = [
        np.arange(6.0, dtype=">f4").reshape(2, 3),  # byte-swapped
        np.arange(6.0).reshape(2, 3),  # float64
        np.frombuffer(b"\0" + np.arange(6, dtype="f4").tobytes(), "f4", 6, 1).reshape(2, 3),
    ]
    assert not values[2].flags.aligned
    for value in values:
        thunk.inputs[0][0] = value
        thunk()
        expected = np.asarray(value, dtype="float64").sum(axis=1).astype("float32")
        assert_allclose(thunk.outputs[0][0], expected)


def test_driver_rejects_a_module_without_the_capsule() -> None:
    from opgraph_c._reduce import ReduceThunk

    x = T.dmatrix("x")
    node = Sum(axis=0)(x).owner
    with pytest.raises(TypeError, match="no valid REDUCE_KERNEL capsule"):
        ReduceThunk(object(), None, node, [[None]], [[None]], (0,), 1, 1, 1.0)


def test_generated_source_names_op_and_node() -> None:
    x = T.dmatrix("x")
    node = T.sum(x, axis=0).owner
    spec = reduction.careduce_c(node.op, node)
    assert "# Op:      Sum{axis=[0], acc_dtype=float64}" in spec.source
    assert "# Node:    " in spec.source and "opg_reduce_table" in spec.source
