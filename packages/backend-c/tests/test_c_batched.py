"""The batched products' precompiled thunks (``opgraph_c._batched``) against ``perform``.

``MatMul`` and ``BatchedDot`` run a loop of BLAS calls (``?gemm``, ``?gemv``, ``?dot``), a
direct loop for tiny products, or one BLAS call for a batch sharing its right operand. Node-level
checks run one node's C thunk and its Op's ``perform`` on the same values, for every path,
float32 and float64, C- and Fortran-ordered, transposed, strided, reversed and broadcast
operands, empty sizes and bad shapes (perform's error); BLAS sums in another order than NumPy,
so values are compared within the rounding bound of a ``k``-term sum. Function-level checks
compile graphs with the ``c`` linker, the ``py`` linker and ``DebugMode(linker="c")``.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile.debugmode import DebugMode
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.graph.basic import Apply, Variable
from opgraph.link.dispatch import KernelFallbackWarning
from opgraph.tensor.dot import BatchedDot, MatMul
from opgraph.testing import assert_allclose
from opgraph_c import PERFORM, _batched
from opgraph_c.kernels.dot import batched_dot_c, matmul_c
from opgraph_c.registry import get_registry
from opgraph_c.spec import Precompiled

DTYPES = ("float64", "float32")
#: How ``lay`` hands a value to the thunk (the batch axis is axis 0 of a 3-d value).
LAYOUTS = ("C", "F", "transposed", "sub", "step", "reversed", "batch_reversed", "broadcast")
#: The thunk's paths: the default choice, BLAS for every product, the direct loop.
PATHS = {"default": -1, "blas": 0, "loop": 10**9}


def lay(value: np.ndarray, layout: str) -> np.ndarray:
    """``value`` with the memory layout ``layout`` (same shape and values)."""
    value = np.asarray(value)
    if layout == "C":
        return np.array(value, order="C")
    if layout == "F":  # NumPy's Fortran order: the batch axis is the fastest
        return np.array(value, order="F")
    if layout == "transposed":  # every matrix column-major
        return np.ascontiguousarray(np.swapaxes(value, -1, -2)).swapaxes(-1, -2)
    if layout == "sub":  # rows with a gap between them
        big = np.full((*value.shape[:-1], value.shape[-1] + 3), np.nan, value.dtype)
        big[..., 1 : value.shape[-1] + 1] = value
        return big[..., 1 : value.shape[-1] + 1]
    if layout == "step":  # every other element: BLAS cannot read it (a copy)
        big = np.full(tuple(2 * s for s in value.shape), np.nan, value.dtype)
        big[(slice(None, None, 2),) * value.ndim] = value
        return big[(slice(None, None, 2),) * value.ndim]
    if layout == "reversed":  # a negative step along every axis
        return np.array(value[(slice(None, None, -1),) * value.ndim])[
            (slice(None, None, -1),) * value.ndim
        ]
    if layout == "batch_reversed":  # a negative step along axis 0 only
        return np.array(value[::-1])[::-1]
    if layout == "broadcast":  # axis 0 of step 0 (value[0] repeated), read-only
        return np.broadcast_to(np.array(value[:1]), value.shape)
    raise ValueError(layout)


def rand(shape: Sequence[int], dtype: str, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def perform(node: Apply, *values: Any) -> Any:
    out: list[list[Any]] = [[None]]
    node.op.perform(node, list(values), out)
    return out[0][0]


def c_thunk(node: Apply, values: Sequence[Any], path: str = "default", fold: bool = True):
    """The node's C thunk (checked to be one) and its output cell, inputs holding ``values``."""
    in_cells = [[v] for v in values]
    out_cell: list[Any] = [None]
    if path == "default" and fold:
        storage = {v: c for v, c in zip(node.inputs, in_cells, strict=True)}
        storage[node.outputs[0]] = out_cell
        thunk = get_registry().make_thunk(node, storage, None)
    else:
        cls = _batched.MatMulThunk if isinstance(node.op, MatMul) else _batched.BatchedDotThunk
        thunk = cls(node, in_cells, [out_cell], node.outputs[0].dtype, PATHS[path], fold)
    assert isinstance(thunk, _batched.BatchedThunk), thunk
    assert not getattr(thunk, "py_fallback", False)
    return thunk, out_cell


def check_close(got: np.ndarray, expected: np.ndarray, bound: np.ndarray, k: int) -> float:
    """``got`` within rounding of ``expected``: ``|got - expected| <= 2 k eps sum|x||y|``
    (twice the bound of a ``k``-term sum); returns the largest error in ``eps * bound``."""
    eps = np.finfo(got.dtype).eps
    with np.errstate(invalid="ignore"):  # inf - inf where both are inf
        err = np.abs(got.astype(np.float64) - expected.astype(np.float64))
    finite = np.isfinite(expected)
    assert np.array_equal(np.isnan(got), np.isnan(expected))
    assert np.array_equal(
        got[~finite & ~np.isnan(expected)], expected[~finite & ~np.isnan(expected)]
    )
    limit = 2 * max(k, 1) * eps * bound.astype(np.float64) + np.finfo(got.dtype).tiny
    assert (err[finite] <= limit[finite]).all(), (err - limit).max()
    if not finite.any() or not got.size:
        return 0.0
    return float((err[finite] / (eps * bound[finite] + np.finfo(got.dtype).tiny)).max())


def check_node(node: Apply, x: Any, y: Any, path: str = "default", fold: bool = True) -> Any:
    """Run ``node``'s C thunk and ``perform`` on the same values: same type, dtype, shape,
    values within rounding (or the same error), no memory shared with the inputs, and the
    inputs untouched. Returns the C result (None when both raised)."""
    xc, yc = copy.deepcopy(x), copy.deepcopy(y)
    thunk, cell = c_thunk(node, [x, y], path, fold)
    try:
        expected = perform(node, xc, yc)
    except Exception as exc:  # compared with the C thunk's error
        with pytest.raises(type(exc)) as info:
            thunk()
        assert str(info.value) == str(exc)
        return None
    thunk()
    got = cell[0]
    assert type(got) is type(expected) is np.ndarray
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert got.flags.c_contiguous and got.flags.writeable
    assert not np.shares_memory(got, x) and not np.shares_memory(got, y)
    assert_allclose(x, xc)
    assert_allclose(y, yc)
    with np.errstate(all="ignore"):
        bound = perform(node, np.abs(xc), np.abs(yc))
    check_close(got, expected, bound, np.shape(xc)[-1])
    return got


def stats_delta(before: dict[str, int]) -> dict[str, int]:
    after = _batched.batched_stats()
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}


def tensor(dtype: str, bcast: Sequence[bool], name: str = "x") -> Variable:
    return T.TensorType(dtype, tuple(bcast))(name)


# ----------------------------------------------------------------------------- registry


def test_entries_are_backend_c_precompiled_or_perform() -> None:
    registry = get_registry()
    for op_class in (MatMul, BatchedDot):
        kernel = registry.lookup(op_class)
        assert kernel is not None and kernel.owner == "opgraph-backend-c", op_class
        assert kernel.impl.__module__ == "opgraph_c.kernels.dot"
    for dtype in DTYPES:
        node = MatMul()(T.tensor3(dtype=dtype), T.tensor3(dtype=dtype)).owner
        assert isinstance(matmul_c(node.op, node), Precompiled)
        node = BatchedDot()(T.matrix(dtype=dtype), T.tensor3(dtype=dtype)).owner
        assert isinstance(batched_dot_c(node.op, node), Precompiled)
    for dx, dy in [
        ("int64", "int64"),
        ("int32", "int32"),
        ("float16", "float16"),
        ("complex128", "complex128"),
        ("float32", "float64"),
    ]:
        node = MatMul()(T.tensor3(dtype=dx), T.tensor3(dtype=dy)).owner
        assert matmul_c(node.op, node) is PERFORM
        node = BatchedDot()(T.tensor3(dtype=dx), T.tensor3(dtype=dy)).owner
        assert batched_dot_c(node.op, node) is PERFORM


@pytest.mark.parametrize("dtype", ["int64", "float16", "complex128"])
def test_other_dtypes_run_perform_without_a_fallback_warning(dtype: str) -> None:
    x, y = T.tensor3(dtype=dtype), T.tensor3(dtype=dtype)
    a = (rand((3, 2, 4), "float64") * 4).astype(dtype)
    b = (rand((3, 4, 5), "float64", 1) * 4).astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error", KernelFallbackWarning)
        fn = function([x, y], T.matmul(x, y), mode=Mode(linker="c", optimizer="None"))
    for node, thunk in zip(fn.fn.nodes, fn.fn.thunks, strict=True):
        assert not isinstance(thunk, _batched.BatchedThunk), node
        assert not getattr(thunk, "py_fallback", False), node
    assert_allclose(fn(a, b), np.matmul(a, b))


# ----------------------------------------------------------------------------- MatMul

#: (x shape, y shape, x broadcastable batch axes, y broadcastable batch axes)
MATMUL_CASES = [
    ((4, 3, 5), (4, 5, 2), (False,), (False,)),
    ((4, 3, 5), (1, 5, 2), (False,), (True,)),  # y shared: one product for the batch
    ((1, 3, 5), (4, 5, 2), (True,), (False,)),
    ((1, 3, 5), (1, 5, 2), (True,), (True,)),
    ((2, 3, 4, 6), (2, 1, 6, 5), (False, False), (False, True)),
    ((1, 3, 4, 6), (2, 1, 6, 5), (True, False), (False, True)),
    ((3, 6), (6, 4), (), ()),  # a 2-d MatMul
    ((5, 1, 7), (5, 7, 3), (False,), (False,)),  # rows: ?gemv
    ((5, 4, 7), (5, 7, 1), (False,), (False,)),  # columns: ?gemv
    ((5, 1, 7), (5, 7, 1), (False,), (False,)),  # ?dot
    ((6, 1, 9), (1, 9, 1), (False,), (True,)),  # folded into one ?gemv
    ((6, 4, 9), (1, 9, 1), (False,), (True,)),
]


def matmul_node(dtype: str, xb: Sequence[bool], yb: Sequence[bool]) -> Apply:
    x = tensor(dtype, (*xb, False, False), "x")
    y = tensor(dtype, (*yb, False, False), "y")
    return MatMul()(x, y).owner


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(len(MATMUL_CASES)))
@pytest.mark.parametrize("path", list(PATHS))
def test_matmul_layouts(dtype: str, case: int, path: str) -> None:
    xs, ys, xb, yb = MATMUL_CASES[case]
    node = matmul_node(dtype, xb, yb)
    a, b = rand(xs, dtype), rand(ys, dtype, 1)
    for lx, ly in [(lx, "C") for lx in LAYOUTS] + [("C", ly) for ly in LAYOUTS[1:]]:
        got = check_node(node, lay(a, lx), lay(b, ly), path)
        assert got is not None


@pytest.mark.parametrize("path", ["blas", "loop"])
def test_operands_are_copied_only_where_the_path_cannot_read_them(path: str) -> None:
    node = matmul_node("float64", (False,), (False,))
    a, b = rand((4, 3, 5), "float64"), rand((4, 5, 2), "float64", 1)
    # BLAS reads row- or column-major matrices with any leading dimension and batch steps;
    # the loop any whole-element steps.
    copied = {"F", "step", "reversed"} if path == "blas" else set()
    for layout in LAYOUTS:
        for x, y in ((lay(a, layout), b), (a, lay(b, layout))):
            before = _batched.batched_stats()
            check_node(node, x, y, path)
            assert stats_delta(before).get("copied", 0) == (layout in copied), layout


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_paths_are_taken(dtype: str) -> None:
    expected = {
        ((4, 3, 5), (4, 5, 2), "blas"): {"gemm": 4},
        ((4, 3, 5), (4, 5, 2), "loop"): {"loop": 4},
        ((4, 2, 2), (4, 2, 2), "default"): {"loop": 4},  # tiny: the direct loop
        ((4, 8, 8), (4, 8, 8), "default"): {"gemm": 4},
        ((5, 1, 7), (5, 7, 3), "blas"): {"gemv": 5},
        ((5, 4, 7), (5, 7, 1), "blas"): {"gemv": 5},
        ((5, 1, 7), (5, 7, 1), "blas"): {"dot": 5},
        ((6, 3, 9), (1, 9, 4), "default"): {"gemm": 1, "folded": 1},
        ((20, 1, 9), (1, 9, 1), "default"): {"gemv": 1, "folded": 1},
        ((6, 1, 9), (1, 9, 1), "default"): {"dot": 6},  # folded: small enough for the loop
        ((1000, 2, 2), (1, 2, 2), "default"): {"gemm": 1, "folded": 1},
    }
    for (xs, ys, path), counts in expected.items():
        node = matmul_node(dtype, (xs[0] == 1,), (ys[0] == 1,))
        before = _batched.batched_stats()
        check_node(node, rand(xs, dtype), rand(ys, dtype, 1), path)
        assert stats_delta(before) == counts, (xs, ys, path)
    # Without folding, a shared y is one product per batch element.
    node = matmul_node(dtype, (False,), (True,))
    before = _batched.batched_stats()
    check_node(node, rand((6, 3, 9), dtype), rand((1, 9, 4), dtype), "default", fold=False)
    assert stats_delta(before) == {"gemm": 6}
    # A shared y with x not C-ordered: no fold, x read in place.
    before = _batched.batched_stats()
    check_node(node, lay(rand((6, 3, 9), dtype), "transposed"), rand((1, 9, 4), dtype))
    assert stats_delta(before) == {"gemm": 6}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("path", ["blas", "loop"])
def test_matmul_empty(dtype: str, path: str) -> None:
    for xs, ys in [
        ((0, 3, 4), (0, 4, 2)),
        ((2, 0, 4), (2, 4, 3)),
        ((2, 3, 4), (2, 4, 0)),
        ((2, 3, 0), (2, 0, 5)),
    ]:
        node = matmul_node(dtype, (False,), (False,))
        got = check_node(node, rand(xs, dtype), rand(ys, dtype), path)
        assert got.shape == (xs[0], xs[1], ys[2]) and not got.any()
    got = check_node(
        matmul_node(dtype, (True,), (False,)), rand((1, 3, 2), dtype), rand((0, 2, 5), dtype), path
    )
    assert got.shape == (0, 3, 5)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_matmul_nan_and_inf() -> None:
    node = matmul_node("float64", (False,), (False,))
    a, b = rand((3, 4, 5), "float64"), rand((3, 5, 6), "float64")
    a[0, 1, 2] = np.nan
    b[1, 3, 4] = np.inf
    a[2, :, 0] = 0.0
    b[2, 0, 1] = np.inf  # 0 * inf: NaN
    for path in PATHS:
        got = check_node(node, a, b, path)
        assert np.isnan(got[0, 1]).all() and np.isnan(got[2, :, 1]).all()


def test_matmul_bad_values_run_perform() -> None:
    node = matmul_node("float64", (False,), (False,))
    a, b = rand((3, 4, 5), "float64"), rand((3, 5, 6), "float64")
    # Batch lengths differ on axes that do not broadcast; inner sizes differ: perform's error.
    assert check_node(node, a, rand((1, 5, 6), "float64")) is None
    assert check_node(node, a, rand((3, 4, 6), "float64")) is None
    # Another dtype, rank, a subclass, a list: perform's result or error.
    check_node(node, a.astype("float32"), b)
    check_node(node, a[0], b)
    check_node(node, np.ma.masked_array(a), b)
    check_node(node, a.tolist(), b)
    # A broadcastable axis holding a length other than 1: perform's (NumPy's) broadcasting.
    bnode = matmul_node("float64", (True,), (False,))
    check_node(bnode, a, b)
    # Byte-swapped and misaligned operands: perform.
    check_node(node, a.astype(">f8"), b)
    raw = np.zeros(a.size * 8 + 1, np.uint8)[1:].view("float64").reshape(a.shape)
    raw[...] = a
    check_node(node, raw, b)


# ----------------------------------------------------------------------------- BatchedDot

BATCHED_CASES = [
    ((5, 3, 4), (5, 4, 2)),
    ((5, 4), (5, 4, 2)),
    ((5, 3, 4), (5, 4)),
    ((5, 4), (5, 4)),
    ((1, 3, 4), (1, 4, 2)),
    ((7, 9), (7, 9)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(len(BATCHED_CASES)))
@pytest.mark.parametrize("path", list(PATHS))
def test_batched_dot_layouts(dtype: str, case: int, path: str) -> None:
    xs, ys = BATCHED_CASES[case]
    node = BatchedDot()(
        T.TensorType(dtype, (False,) * len(xs))("x"), T.TensorType(dtype, (False,) * len(ys))("y")
    ).owner
    a, b = rand(xs, dtype), rand(ys, dtype, 1)
    for lx, ly in [(lx, "C") for lx in LAYOUTS] + [("C", ly) for ly in LAYOUTS[1:]]:
        assert check_node(node, lay(a, lx), lay(b, ly), path) is not None


@pytest.mark.parametrize("dtype", DTYPES)
def test_batched_dot_empty_and_bad_shapes(dtype: str) -> None:
    node3 = BatchedDot()(T.tensor3(dtype=dtype), T.tensor3(dtype=dtype)).owner
    node2 = BatchedDot()(T.matrix(dtype=dtype), T.matrix(dtype=dtype)).owner
    for path in ("blas", "loop"):
        got = check_node(node3, rand((0, 3, 4), dtype), rand((0, 4, 2), dtype), path)
        assert got.shape == (0, 3, 2)
        got = check_node(node3, rand((2, 3, 0), dtype), rand((2, 0, 2), dtype), path)
        assert got.shape == (2, 3, 2) and not got.any()
        got = check_node(node2, rand((3, 0), dtype), rand((3, 0), dtype), path)
        assert got.shape == (3,) and not got.any()
    assert check_node(node3, rand((2, 3, 4), dtype), rand((3, 4, 2), dtype)) is None
    assert check_node(node3, rand((2, 3, 4), dtype), rand((2, 5, 2), dtype)) is None
    assert check_node(node2, rand((2, 4), dtype), rand((2, 5), dtype)) is None


# ----------------------------------------------------------------------------- functions


def check_function(inputs: list[Variable], output: Variable, *values: np.ndarray) -> None:
    """Compile with the c linker (each batched product a C thunk), py and DebugMode(c)."""
    c_fn = function(inputs, output, mode=Mode(linker="c", optimizer="None"))
    py_fn = function(inputs, output, mode=Mode(linker="py", optimizer="None"))
    debug_fn = function(inputs, output, mode=DebugMode(linker="c", optimizer="None"))
    found = 0
    for node, thunk in zip(c_fn.fn.nodes, c_fn.fn.thunks, strict=True):
        if isinstance(node.op, MatMul | BatchedDot):
            assert isinstance(thunk, _batched.BatchedThunk), node
            found += 1
    assert found
    expected = py_fn(*copy.deepcopy(values))
    for got in (c_fn(*copy.deepcopy(values)), debug_fn(*copy.deepcopy(values))):
        assert got.dtype == expected.dtype
        assert_allclose(got, expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_functions(dtype: str) -> None:
    x3, y3 = T.tensor3("x", dtype=dtype), T.tensor3("y", dtype=dtype)
    w, v = T.matrix("w", dtype=dtype), T.vector("v", dtype=dtype)
    a, b = rand((4, 3, 5), dtype), rand((4, 5, 6), dtype, 1)
    check_function([x3, y3], T.matmul(x3, y3), a, b)
    check_function([x3, w], T.matmul(x3, w), a, rand((5, 2), dtype))
    check_function([w, y3], T.matmul(w, y3), rand((3, 5), dtype), b)
    check_function([x3, v], T.matmul(x3, v), a, rand((5,), dtype))
    check_function([v, y3], T.matmul(v, y3), rand((5,), dtype), b)
    check_function([x3, y3], T.batched_dot(x3, y3), a, b)
    check_function([w, y3], T.batched_dot(w, y3), rand((4, 5), dtype), b)
    m2 = T.matrix("m", dtype=dtype)
    check_function([w, m2], T.batched_dot(w, m2), rand((4, 5), dtype), rand((4, 5), dtype))


def test_gradient_graph_runs_in_c() -> None:
    x, y = T.dtensor3("x"), T.dtensor3("y")
    cost = T.matmul(x, y).sum() + T.batched_dot(x, y).sum()
    gx, gy = T.grad(cost, [x, y])
    fn = function([x, y], [gx, gy], mode=Mode(linker="c"))
    ref = function([x, y], [gx, gy], mode=Mode(linker="py"))
    a, b = rand((3, 2, 4), "float64"), rand((3, 4, 2), "float64", 1)
    for got, exp in zip(fn(a, b), ref(a, b), strict=True):
        assert_allclose(got, exp)
