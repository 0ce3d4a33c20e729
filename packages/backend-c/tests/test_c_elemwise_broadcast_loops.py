"""Elementwise loops over operands broadcast along trailing axes (a bias added to activations).

The driver (``opgraph_c._elemwise``) merges dimensions into runs and calls a generated loop
per run; ``strided`` sends runs where every operand is contiguous or constant to the
vectorised ``contig`` / ``run<j>`` loops, and large walks are shared among threads. These
tests check each loop on its own (through the capsule's table, with ctypes), then the
thunk against ``perform`` for the usual bias layouts, dtypes, strided and in-place
operands, on one and on two threads.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from thunk_checks import node_storage
from thunk_checks import perform_outputs as _perform

import opgraph.scalar.basic as ps
import opgraph.tensor as T
from opgraph.compile.debugmode import DebugMode
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Variable
from opgraph.tensor.elemwise import Elemwise
from opgraph.testing import assert_allclose
from opgraph_c._elemwise import ElemwiseThunk
from opgraph_c._threads import timed_stats
from opgraph_c.cache import get_cache
from opgraph_c.codegen.elemwise import run_masks
from opgraph_c.kernels.elemwise import elemwise_c

C_RUN = Mode(linker="c", optimizer="fast_run")
PY_RUN = Mode(linker="py", optimizer="fast_run")


def _var(dtype: str, bcast: Sequence[bool], name: str = "x") -> Variable:
    return T.TensorType(dtype, tuple(bcast))(name)


def _value(shape: Sequence[int], dtype: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype.startswith(("int", "uint")):
        return rng.integers(0, 9, shape).astype(dtype)
    return (rng.standard_normal(shape) * 2).astype(dtype)


def _composite(expr: Any, *inputs: Variable, inplace: dict[int, int] | None = None) -> Apply:
    """One Elemwise node computing ``expr(*scalars)``, on ``inputs``."""
    scalars = [ps.get_scalar_type(v.type.dtype)() for v in inputs]
    op = Elemwise(ps.Composite(scalars, [expr(*scalars)]), inplace or {})
    return op(*inputs).owner


def _tanh_add(x: Variable, b: Variable) -> Apply:
    """The fused bias-add + activation node: tanh(x + b)."""
    return _composite(lambda u, v: ps.tanh(u + v), x, b)


def _thunk(node: Apply, values: Sequence[Any], nthreads: int) -> tuple[Any, list[list[Any]]]:
    """The node's ElemwiseThunk (built with OpenMP) on ``nthreads`` threads from the first
    element on (not adaptive), its input cells holding ``values``."""
    with config.change_flags(openmp=True):
        spec = elemwise_c(node.op, node)
    module = get_cache().load(spec)
    storage = node_storage(node, values)
    thunk = ElemwiseThunk(
        module,
        module.ELEMWISE_KERNEL,
        node,
        [storage[v] for v in node.inputs],
        [storage[o] for o in node.outputs],
        [v.type.dtype for v in node.inputs],
        [v.type.dtype for v in node.outputs],
        [v.type.broadcastable for v in node.inputs],
        tuple(all(v.type.broadcastable) for v in node.inputs),
        dict(node.op.inplace_pattern),
        threshold=0,
        nthreads=nthreads,
        adaptive=False,
    )
    return thunk, [storage[o] for o in node.outputs]


def _run(node: Apply, values: Sequence[Any], nthreads: int = 1) -> list[Any]:
    thunk, outs = _thunk(node, values, nthreads)
    thunk()
    return [c[0] for c in outs]


def _check(node: Apply, values: Sequence[Any]) -> None:
    """The thunk on 1 and 2 threads: perform's values and dtypes, the same bits on both."""
    expected = _perform(node, [v.copy() for v in values])
    one = _run(node, [v.copy() for v in values], 1)
    before = timed_stats()["threaded"]
    two = _run(node, [v.copy() for v in values], 2)
    assert timed_stats()["threaded"] == before + (one[0].size > 0)  # really on 2 threads
    for e, a, b in zip(expected, one, two, strict=True):
        assert a.dtype == e.dtype and a.shape == e.shape
        assert_allclose(a, e)
        np.testing.assert_array_equal(a, b)


# ---- the codegen: which run loops a node gets


def test_run_masks() -> None:
    f, t = False, True
    assert run_masks([(f, f, f, f), (t, f, t, t)], (f, f)) == [(1,)]  # NCHW + bias
    assert run_masks([(f, f), (f, t)], (f, f)) == [(1,)]  # a column
    assert run_masks([(f, f), (t, f)], (f, f)) == [(1,)]  # a row: contig in the inner run
    assert run_masks([(f, f), (t, t)], (f, t)) == []  # a scalar: hoisted everywhere
    assert run_masks([(t, f), (f, t)], (f, f)) == [(0,), (1,)]  # outer sum
    four = [(f, f, f, f), (t, f, t, t), (f, t, t, t), (t, f, t, t)]
    assert run_masks(four, (f, f, f, f)) == [(1, 3), (2,), (1, 2, 3)]
    assert run_masks([(f, f)], (f,)) == []


def test_generated_source_has_the_run_loop() -> None:
    node = _tanh_add(_var("float32", (False,) * 4), _var("float32", (True, False, True, True)))
    source = elemwise_c(node.op, node).source
    assert "cdef void run0(ptrdiff_t n, char** ptrs)" in source
    assert "if (steps[0] == 4 and steps[1] == 0 and steps[2] == 4):" in source
    assert "run0(n, ptrs)" in source


# ---- each generated loop on its own, through the capsule's table


class _Table(ctypes.Structure):
    """``opg_elemwise_kernel`` (include/opgraph_c_prelude.h)."""

    _fields_ = [
        ("abi", ctypes.c_int),
        ("nin", ctypes.c_int),
        ("nout", ctypes.c_int),
        ("contig", ctypes.c_void_p),
        ("strided", ctypes.c_void_p),
        ("parallel", ctypes.c_void_p),
    ]


_CONTIG = ctypes.CFUNCTYPE(
    None, ctypes.c_ssize_t, ctypes.c_ssize_t, ctypes.POINTER(ctypes.c_void_p)
)
_STRIDED = ctypes.CFUNCTYPE(
    None, ctypes.c_ssize_t, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_ssize_t)
)


def _loops(node: Apply) -> tuple[Any, Any, Any]:
    module = get_cache().load(elemwise_c(node.op, node))
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    table = _Table.from_address(get(module.ELEMWISE_KERNEL, b"opgraph_c.elemwise"))
    return module, _CONTIG(table.contig), _STRIDED(table.strided)


def _ptrs(*arrays: np.ndarray) -> Any:
    return (ctypes.c_void_p * len(arrays))(*(a.ctypes.data for a in arrays))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_each_loop_against_perform(dtype: str) -> None:
    """Runs of a bias layout through ``strided``: its run loop (steps itemsize and 0), its
    scalar loop (a strided operand) and ``contig`` on the bias spelt out; the run loop and
    ``contig`` compute every element alike (same C, same vector lanes)."""
    node = _tanh_add(_var(dtype, (False, False)), _var(dtype, (False, True)))
    _module, contig, strided = _loops(node)  # the module keeps the loops alive
    rows, n, size = 6, 192, np.dtype(dtype).itemsize
    x, b = _value((rows, n), dtype), _value((rows, 1), dtype, seed=1)
    (expected,) = _perform(node, [x, b])
    wide = np.zeros((rows, 2 * n), dtype)
    wide[:, ::2] = x
    full = np.ascontiguousarray(np.broadcast_to(b, x.shape))
    got = {k: np.full_like(x, np.nan) for k in ("run", "scalar", "contig", "strided_contig")}
    for r in range(rows):
        steps = (ctypes.c_ssize_t * 3)(size, 0, size)
        strided(n, _ptrs(x[r], b[r], got["run"][r]), steps)
        steps = (ctypes.c_ssize_t * 3)(2 * size, 0, size)
        strided(n, _ptrs(wide[r], b[r], got["scalar"][r]), steps)
        contig(0, n, _ptrs(x[r], full[r], got["contig"][r]))
        steps = (ctypes.c_ssize_t * 3)(size, size, size)
        strided(n, _ptrs(x[r], full[r], got["strided_contig"][r]), steps)
    for name, value in got.items():
        assert_allclose(value, expected, err_msg=name)
    np.testing.assert_array_equal(got["run"], got["contig"])
    np.testing.assert_array_equal(got["strided_contig"], got["contig"])


# ---- the thunk against perform, 1 and 2 threads


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    ("shape", "bshape"),
    [
        ((8, 20, 12, 12), (1, 20, 1, 1)),  # NCHW, a bias per channel
        ((8, 20, 12, 13), (1, 1, 1, 13)),  # on the last axis: contiguous runs
        ((8, 20, 12, 12), (8, 1, 1, 1)),  # on the first axis
        ((8, 20, 12, 12), (1, 1, 1, 1)),  # a scalar, hoisted
        ((3, 5, 1, 1), (1, 5, 1, 1)),  # 1x1 planes: runs of one channel
        ((0, 20, 4, 4), (1, 20, 1, 1)),  # empty
    ],
)
def test_bias_layouts(dtype: str, shape: tuple[int, ...], bshape: tuple[int, ...]) -> None:
    x = _var(dtype, (False,) * 4)
    b = _var(dtype, tuple(s == 1 for s in bshape), "b")
    _check(_tanh_add(x, b), [_value(shape, dtype), _value(bshape, dtype, seed=1)])


def test_threads_split_long_runs() -> None:
    """Runs longer than a thread's chunk are cut in pieces (at multiples of 64 elements)."""
    x, b = _var("float32", (False, False)), _var("float32", (False, True), "b")
    node = _composite(lambda u, v: ps.exp(u * v) - u, x, b)
    _check(node, [_value((3, 20011), "float32"), _value((3, 1), "float32", 1) * 0.3])
    _check(node, [_value((1000, 37), "float32"), _value((1000, 1), "float32", 1) * 0.3])


@pytest.mark.parametrize(
    ("xdtype", "bdtype"), [("int16", "float32"), ("float32", "float64"), ("uint8", "int32")]
)
def test_mixed_dtypes(xdtype: str, bdtype: str) -> None:
    x = _var(xdtype, (False,) * 4)
    b = _var(bdtype, (True, False, True, True), "b")
    values = [_value((4, 6, 9, 10), xdtype), _value((1, 6, 1, 1), bdtype, 1)]
    _check(_composite(lambda u, v: u * 2 + v, x, b), values)
    _check(_composite(lambda u, v: ps.gt(u, v), x, b), values)  # a bool output (itemsize 1)


def test_several_broadcast_inputs() -> None:
    """Inputs broadcast along different axes: one run loop per layout the runs can have."""
    x = _var("float32", (False,) * 4)
    m, g = (
        _var("float32", (True, False, True, True), "m"),
        _var("float32", (True, False, True, True), "g"),
    )
    w = _var("float32", (False, True, True, True), "w")
    node = _composite(lambda a, b, c, d: ps.tanh((a - b) * c + d), x, m, g, w)
    assert "cdef void run2(" in elemwise_c(node.op, node).source
    shapes = [(6, 7, 10, 10), (1, 7, 1, 1), (1, 7, 1, 1), (6, 1, 1, 1)]
    _check(node, [_value(s, "float32", k) for k, s in enumerate(shapes)])


def test_non_contiguous_inputs() -> None:
    x = _var("float32", (False,) * 4)
    node = _tanh_add(x, _var("float32", (True, False, True, True), "b"))
    big = _value((8, 20, 24, 12), "float32")
    b = _value((1, 20, 1, 1), "float32", 1)
    for value in (
        big[:, :, ::2, :],  # strided planes, contiguous rows
        big[:, :, :12, ::-1],  # negative strides
        big.transpose(0, 1, 3, 2)[:, :, :, :12],  # transposed planes
        np.asfortranarray(big[:, :, :12]),
        np.broadcast_to(big[:1, :, :12], (8, 20, 12, 12)),  # stride 0 its type does not say
    ):
        _check(node, [value, b])


@pytest.mark.parametrize("writeable", [True, False])
def test_in_place_output(writeable: bool) -> None:
    x = _var("float32", (False,) * 4)
    b = _var("float32", (True, False, True, True), "b")
    node = _composite(lambda u, v: ps.tanh(u + v), x, b, inplace={0: 0})
    for nthreads in (1, 2):
        value = _value((8, 20, 12, 12), "float32")[:, :, ::-1]
        value.flags.writeable = writeable
        before = value.copy()
        (expected,) = _perform(node, [before.copy(), _value((1, 20, 1, 1), "float32", 1)])
        (out,) = _run(node, [value, _value((1, 20, 1, 1), "float32", 1)], nthreads)
        assert_allclose(out, expected)
        assert np.shares_memory(out, value) == writeable
        if not writeable:
            np.testing.assert_array_equal(value, before)


# ---- function level


def test_bias_activation_functions() -> None:
    x, b = T.tensor4("x", dtype="float32"), T.vector("b", dtype="float32")
    bias = b.dimshuffle("x", 0, "x", "x")
    outs = [T.tanh(x + bias), T.exp(x + bias), T.maximum(x + bias, 0)]
    xv, bv = _value((4, 20, 12, 12), "float32"), _value((20,), "float32", 1)
    c = function([x, b], outs, mode=C_RUN)
    kinds = {
        type(t).__name__ for n, t in zip(c.fn.nodes, c.fn.thunks) if isinstance(n.op, Elemwise)
    }
    assert kinds == {"ElemwiseThunk"}
    py = function([x, b], outs, mode=PY_RUN)
    debug = function([x, b], outs, mode=DebugMode(linker="c"))
    expected = py(xv, bv)
    for got in (c(xv, bv), debug(xv, bv)):
        for g, e in zip(got, expected, strict=True):
            assert g.dtype == e.dtype
            assert_allclose(g, e)


def test_openmp_flag_threads_match_one_thread() -> None:
    """Through the linker with a low threshold: the team's threads, the same values."""
    x, b = T.matrix("x", dtype="float64"), T.vector("b", dtype="float64")
    out = T.tanh(x + b.dimshuffle(0, "x")) * 2
    xv, bv = _value((300, 130), "float64"), _value((300,), "float64", 1)
    with config.change_flags(openmp=True, c__openmp_threshold=10):
        threaded = function([x, b], out, mode=C_RUN)
    with config.change_flags(openmp=False):
        serial = function([x, b], out, mode=C_RUN)
    expected = function([x, b], out, mode=PY_RUN)(xv, bv)
    for _ in range(3):
        got = threaded(xv, bv)
        assert_allclose(got, expected)
        np.testing.assert_array_equal(got, serial(xv, bv))
