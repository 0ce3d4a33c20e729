"""The precompiled BLAS kernels (``opgraph_c._blas``): Gemm, Gemv, Ger, Dot22, Dot22Scalar, Dot.

Each kernel must give what its Op's ``perform`` gives, for every operand layout (C- and
Fortran-ordered, transposed views, sub-matrices, strided and reversed slices), in place or
not, with NaN, empty dimensions and bad shapes; and FAST_RUN graphs must use them.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile.debugmode import DebugMode
from opgraph.compile.function import function
from opgraph.compile.mode import Mode, get_mode
from opgraph.compile.sharedvalue import shared
from opgraph.graph.basic import Apply
from opgraph.tensor.blas import (
    Dot22,
    Dot22Scalar,
    Gemm,
    Gemv,
    Ger,
    _dot22,
    _dot22scalar,
    gemm_inplace,
    gemm_no_inplace,
    gemv_inplace,
    gemv_no_inplace,
    ger,
    ger_destructive,
)
from opgraph.tensor.dot import Dot, _dot
from opgraph.testing import assert_allclose
from opgraph_c import _blas
from opgraph_c._vm import CThunk
from opgraph_c.registry import get_registry

DTYPES = ("float32", "float64")
#: Matrix layouts: how ``lay`` hands a value to the kernel (BLAS reads all but the last two
#: in place; "step" and "reversed" are copied first).
MATRIX_LAYOUTS = ("C", "F", "transposed", "sub_C", "sub_F", "step", "reversed")
VECTOR_LAYOUTS = ("C", "step", "reversed")

# ----------------------------------------------------------------------------- helpers


def lay(value: np.ndarray, layout: str) -> np.ndarray:
    """``value`` (a new array) with the memory layout ``layout``; same shape and values."""
    value = np.asarray(value)
    if layout == "C":
        return np.array(value, order="C")
    if value.ndim == 2 and layout == "F":
        return np.array(value, order="F")
    if value.ndim == 2 and layout == "transposed":  # the transpose of a C array (F layout)
        return np.array(value.T, order="C").T
    if value.ndim == 2 and layout in ("sub_C", "sub_F"):  # rows/columns with a gap between
        m, n = value.shape
        big = np.full((m + 3, n + 2), np.nan, value.dtype, order=layout[-1])
        big[1 : m + 1, 2 : n + 2] = value
        return big[1 : m + 1, 2 : n + 2]
    if layout == "step":
        big = np.full(tuple(2 * s for s in value.shape), np.nan, value.dtype)
        big[(slice(None, None, 2),) * value.ndim] = value
        return big[(slice(None, None, 2),) * value.ndim]
    if layout == "reversed":
        return np.array(value[::-1], order="C")[::-1]
    raise ValueError(layout)


def scalar(v: float, dtype: str) -> np.ndarray:
    return np.asarray(v, dtype=dtype)


def c_thunk(node: Apply, cells: dict[Any, list[Any]]) -> Any:
    """The ``c`` kernel's thunk for ``node`` over ``cells``; it must be a precompiled CThunk."""
    thunk = get_registry().make_thunk(node, cells, {v: [False] for v in cells}, ())
    assert isinstance(thunk, CThunk), f"{node.op} runs {thunk!r}, not a BLAS CThunk"
    assert thunk.kernel is not None and not getattr(thunk, "py_fallback", False)
    return thunk


def run_c(node: Apply, values: Sequence[Any]) -> Any:
    """Run ``node``'s C kernel on ``values`` themselves (no copies); return its output."""
    cells = {v: [None] for v in (*node.inputs, *node.outputs)}
    thunk = c_thunk(node, cells)
    for var, value in zip(node.inputs, values, strict=True):
        cells[var][0] = value
    thunk()
    return cells[node.outputs[0]][0]


def run_py(node: Apply, values: Sequence[Any]) -> Any:
    out: list[list[Any]] = [[None]]
    node.op.perform(node, list(values), out)
    return out[0][0]


def reference(op: Any, values: Sequence[Any]) -> np.ndarray:
    """What the op computes, by NumPy in float64 (BLAS's zero-scalar rules included)."""
    v = [np.asarray(x, dtype="float64") for x in values]
    if isinstance(op, Gemm | Gemv):
        z, a, x, y, b = v
        prod = a * np.dot(x, y) if a != 0 else np.zeros_like(z)
        return prod if b == 0 else b * z + prod
    if isinstance(op, Ger):
        A, a, x, y = v
        return A + a * np.outer(x, y) if a != 0 else A
    if isinstance(op, Dot22Scalar):
        x, y, a = v
        return a * np.dot(x, y)
    return np.dot(v[0], v[1])


def node_of(op: Any, dtype: str, ndims: Sequence[int]) -> Apply:
    variables = [T.tensor(dtype, (False,) * nd) for nd in ndims]
    return op.make_node(*variables)


#: op -> (ndims of its inputs, the shapes of a test case (None for a scalar))
CASES: dict[Any, tuple[tuple[int, ...], Callable[[int, int, int], list[Any]]]] = {
    gemm_no_inplace: ((2, 0, 2, 2, 0), lambda m, n, k: [(m, n), None, (m, k), (k, n), None]),
    gemm_inplace: ((2, 0, 2, 2, 0), lambda m, n, k: [(m, n), None, (m, k), (k, n), None]),
    gemv_no_inplace: ((1, 0, 2, 1, 0), lambda m, n, k: [(m,), None, (m, k), (k,), None]),
    gemv_inplace: ((1, 0, 2, 1, 0), lambda m, n, k: [(m,), None, (m, k), (k,), None]),
    ger: ((2, 0, 1, 1), lambda m, n, k: [(m, n), None, (m,), (n,)]),
    ger_destructive: ((2, 0, 1, 1), lambda m, n, k: [(m, n), None, (m,), (n,)]),
    _dot22: ((2, 2), lambda m, n, k: [(m, k), (k, n)]),
    _dot22scalar: ((2, 2, 0), lambda m, n, k: [(m, k), (k, n), None]),
    _dot: ((2, 2), lambda m, n, k: [(m, k), (k, n)]),
}
DOT_CASES = {
    "vector-vector": ((1, 1), lambda m, n, k: [(k,), (k,)]),
    "matrix-vector": ((2, 1), lambda m, n, k: [(m, k), (k,)]),
    "vector-matrix": ((1, 2), lambda m, n, k: [(k,), (k, n)]),
}
OPS = list(CASES)


def case(
    op: Any,
    dtype: str,
    rng: np.random.Generator,
    m: int = 5,
    n: int = 4,
    k: int = 3,
    scalars: Sequence[float] = (1.5, 0.5),
) -> tuple[Apply, list[Any]]:
    """A node of ``op`` and values for it (scalars ``a`` then ``b`` where the op has them)."""
    ndims, shapes = CASES[op] if op in CASES else DOT_CASES[op]
    node = node_of(_dot if op in DOT_CASES else op, dtype, ndims)
    rest = iter(scalars)
    values = [
        scalar(next(rest), dtype) if s is None else rng.standard_normal(s).astype(dtype)
        for s in shapes(m, n, k)
    ]
    return node, values


def destroys(node: Apply) -> bool:
    return bool(getattr(node.op, "destroy_map", {}))


def check_against_perform(node: Apply, values: Sequence[Any], layouts: Sequence[str]) -> None:
    """The kernel on ``values`` laid out as ``layouts`` equals perform on the same layouts."""
    c_in = [lay(v, lo) if v.ndim else v.copy() for v, lo in zip(values, layouts)]
    py_in = [lay(v, lo) if v.ndim else v.copy() for v, lo in zip(values, layouts)]
    got = run_c(node, c_in)
    want = run_py(node, py_in)
    dtype = node.outputs[0].type.dtype
    assert isinstance(got, np.ndarray) and got.dtype == dtype and got.shape == want.shape
    assert_allclose(got, want, err_msg=f"{node.op} {layouts}")
    assert_allclose(got, reference(node.op, values).astype(dtype), err_msg=f"{layouts}")
    for i, (before, after) in enumerate(zip(values, c_in)):
        if i == 0 and destroys(node):
            assert got is after, "an in-place kernel outputs its destroyed input"
            assert_allclose(after, want)
        else:
            np.testing.assert_array_equal(after, before, err_msg=f"input {i} was modified")
            assert not np.may_share_memory(got, after)


# ----------------------------------------------------------------------------- registry


def test_every_blas_op_has_a_precompiled_kernel() -> None:
    registry = get_registry()
    for op_class in (Gemm, Gemv, Ger, Dot22, Dot22Scalar, Dot):
        kernel = registry.lookup(op_class)
        assert kernel is not None and kernel.owner == "opgraph-backend-c"
        assert kernel.impl.__module__ == "opgraph_c.kernels.blas"


@pytest.mark.parametrize("dtype", ["complex128", "float16"])
def test_other_dtypes_run_perform(dtype: str) -> None:
    """Other dtypes run perform on purpose (NumPy's dot is one C call): no fallback."""
    from opgraph_c import PERFORM
    from opgraph_c.pipeline import pipeline

    node = node_of(gemm_no_inplace, dtype, (2, 0, 2, 2, 0))
    assert pipeline.resolve(get_registry().lookup(node.op), node).spec is PERFORM
    mixed = _dot.make_node(T.dmatrix(), T.fmatrix())
    assert pipeline.resolve(get_registry().lookup(mixed.op), mixed).spec is PERFORM
    ints = _dot.make_node(T.lmatrix(), T.lmatrix())
    assert pipeline.resolve(get_registry().lookup(ints.op), ints).spec is PERFORM


def test_missing_blas_extension_warns_and_runs_perform(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from opgraph.link.dispatch import KernelFallbackWarning
    from opgraph_c.kernels import blas as blas_kernels

    node = _dot22.make_node(T.dmatrix(), T.dmatrix())
    monkeypatch.setitem(sys.modules, "opgraph_c._blas", None)  # as if it failed to import
    blas_kernels._blas_module.cache_clear()
    try:
        with pytest.warns(KernelFallbackWarning, match="BLAS kernels are unavailable"):
            assert blas_kernels.dot22_c(node.op, node) is None
    finally:
        monkeypatch.undo()
        blas_kernels._blas_module.cache_clear()
    assert blas_kernels.dot22_c(node.op, node) is not None


# ----------------------------------------------------------------------------- values


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS + list(DOT_CASES), ids=str)
@pytest.mark.parametrize("layout", MATRIX_LAYOUTS)
def test_kernel_matches_perform_for_each_layout(
    op: Any, dtype: str, layout: str, rng: np.random.Generator
) -> None:
    node, values = case(op, dtype, rng)
    layouts = [
        (layout if v.ndim == 2 else layout if layout in VECTOR_LAYOUTS else "step") for v in values
    ]
    check_against_perform(node, values, layouts)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS + list(DOT_CASES), ids=str)
def test_common_cases_run_in_c_without_perform(
    op: Any, dtype: str, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every layout of non-empty operands with a non-zero alpha runs BLAS, never perform."""
    node, values = case(op, dtype, rng)

    def no_perform(*args: Any) -> None:
        raise AssertionError(f"{node.op} called perform")

    monkeypatch.setattr(type(node.op), "perform", no_perform)
    for layout in MATRIX_LAYOUTS:
        laid = [
            lay(v, layout if v.ndim == 2 or layout in VECTOR_LAYOUTS else "step") if v.ndim else v
            for v in values
        ]
        assert_allclose(run_c(node, laid), reference(node.op, values).astype(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "op", [gemm_no_inplace, gemm_inplace, ger_destructive, gemv_inplace, _dot22], ids=str
)
def test_kernel_matches_perform_for_mixed_layouts(
    op: Any, dtype: str, rng: np.random.Generator
) -> None:
    node, values = case(op, dtype, rng, m=6, n=5, k=7)
    options = [
        MATRIX_LAYOUTS if v.ndim == 2 else VECTOR_LAYOUTS if v.ndim else ("C",) for v in values
    ]
    for layouts in itertools.product(*options):
        check_against_perform(node, values, layouts)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS + list(DOT_CASES), ids=str)
def test_large_operands_release_the_gil_and_match(
    op: Any, dtype: str, rng: np.random.Generator
) -> None:
    node, values = case(op, dtype, rng, m=70, n=65, k=80)
    check_against_perform(node, values, ["C"] * len(values))
    check_against_perform(node, values, ["F" if v.ndim == 2 else "C" for v in values])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "op", [gemm_no_inplace, gemm_inplace, gemv_no_inplace, gemv_inplace], ids=str
)
@pytest.mark.parametrize("scalars", [(1.5, 0.0), (0.0, 2.0), (0.0, 0.0), (-1.0, 1.0)], ids=str)
def test_alpha_beta_zero(
    op: Any, dtype: str, scalars: tuple[float, float], rng: np.random.Generator
) -> None:
    node, values = case(op, dtype, rng, scalars=scalars)
    check_against_perform(node, values, ["C"] * len(values))
    check_against_perform(node, values, ["F" if v.ndim == 2 else "C" for v in values])


@pytest.mark.parametrize("op", [ger, ger_destructive, _dot22scalar], ids=str)
def test_alpha_zero(op: Any, rng: np.random.Generator) -> None:
    node, values = case(op, "float64", rng, scalars=(0.0,))
    check_against_perform(node, values, ["C"] * len(values))


def test_float16_scalars_with_float32_operands(rng: np.random.Generator) -> None:
    z, x, y = T.fmatrix(), T.fmatrix(), T.fmatrix()
    a, b = T.scalar(dtype="float16"), T.scalar(dtype="float16")
    node = gemm_no_inplace.make_node(z, a, x, y, b)
    values = [rng.standard_normal(s).astype("float32") for s in ((2, 3), (2, 4), (4, 3))]
    values = [values[0], scalar(1.5, "float16"), values[1], values[2], scalar(0.25, "float16")]
    check_against_perform(node, values, ["C"] * 5)


# ----------------------------------------------------------------------------- in place


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", [gemm_inplace, gemv_inplace, ger_destructive], ids=str)
@pytest.mark.parametrize("layout", MATRIX_LAYOUTS)
def test_in_place_writes_into_the_destroyed_buffer(
    op: Any, dtype: str, layout: str, rng: np.random.Generator
) -> None:
    node, values = case(op, dtype, rng)
    first = values[0]
    target = lay(first, layout if first.ndim == 2 or layout in VECTOR_LAYOUTS else "step")
    base = target if target.base is None else target.base
    padding = int(np.isnan(base).sum())  # lay() fills the rest of a view's buffer with NaN
    out = run_c(node, [target, *values[1:]])
    assert out is target
    assert_allclose(target, reference(op, values).astype(dtype))
    assert int(np.isnan(base).sum()) == padding, "wrote outside the destroyed view"


@pytest.mark.parametrize("op", [gemm_inplace, ger_destructive], ids=str)
def test_in_place_with_the_destroyed_input_aliasing_another(
    op: Any, rng: np.random.Generator
) -> None:
    """``Gemm{inplace}(Z, a, Z, Y, b)``: BLAS must not read what it writes."""
    buf = rng.standard_normal((4, 4))
    if op is gemm_inplace:
        node = op.make_node(T.dmatrix(), T.dscalar(), T.dmatrix(), T.dmatrix(), T.dscalar())
        y = rng.standard_normal((4, 4))
        expected = 0.5 * buf + 2.0 * buf @ y
        values = [buf, scalar(2.0, "float64"), buf, y, scalar(0.5, "float64")]
    else:
        node = op.make_node(T.dmatrix(), T.dscalar(), T.dvector(), T.dvector())
        expected = buf + 2.0 * np.outer(buf[0], buf[:, 1])
        values = [buf, scalar(2.0, "float64"), buf[0], buf[:, 1]]
    out = run_c(node, values)
    assert out is buf
    assert_allclose(out, expected)


def test_gemv_in_place_aliasing_its_vector(rng: np.random.Generator) -> None:
    y = rng.standard_normal(4)
    A = rng.standard_normal((4, 4))
    node = gemv_inplace.make_node(T.dvector(), T.dscalar(), T.dmatrix(), T.dvector(), T.dscalar())
    expected = 0.5 * y + 2.0 * A @ y
    out = run_c(node, [y, scalar(2.0, "float64"), A, y, scalar(0.5, "float64")])
    assert out is y
    assert_allclose(out, expected)


def test_read_only_destroyed_input_behaves_like_perform(rng: np.random.Generator) -> None:
    for op in (gemm_inplace, gemv_inplace, ger_destructive):
        node, values = case(op, "float64", rng)
        c_in = [v.copy() for v in values]
        py_in = [v.copy() for v in values]
        c_in[0].flags.writeable = py_in[0].flags.writeable = False
        want = run_py(node, py_in)
        got = run_c(node, c_in)
        assert_allclose(got, want)
        assert_allclose(c_in[0], py_in[0])


# ----------------------------------------------------------------------------- NaN, inf


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "op", [gemm_no_inplace, gemm_inplace, gemv_no_inplace, gemv_inplace], ids=str
)
def test_beta_zero_ignores_nan_in_the_old_buffer(
    op: Any, dtype: str, rng: np.random.Generator
) -> None:
    node, values = case(op, dtype, rng, scalars=(1.5, 0.0))
    values[0][...] = np.nan
    for layouts in (["C"] * len(values), ["F" if v.ndim == 2 else "C" for v in values]):
        check_against_perform(node, values, layouts)
    out = run_c(node, [v.copy() for v in values])
    assert np.isfinite(out).all()


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS + list(DOT_CASES), ids=str)
def test_nan_and_inf_propagate_like_perform(op: Any, dtype: str, rng: np.random.Generator) -> None:
    node, values = case(op, dtype, rng)
    operands = [i for i, v in enumerate(values) if v.ndim > 0]
    for i, special in itertools.product(operands, (np.nan, np.inf)):
        spoiled = [v.copy() for v in values]
        spoiled[i].reshape(-1)[0] = special
        c_out = run_c(node, [v.copy() for v in spoiled])
        py_out = run_py(node, [v.copy() for v in spoiled])
        assert_allclose(c_out, py_out, err_msg=f"{special} in input {i}")
        assert not np.isfinite(c_out).all()


def test_nan_scalar_propagates(rng: np.random.Generator) -> None:
    node, values = case(gemm_no_inplace, "float64", rng, scalars=(np.nan, 1.0))
    assert np.isnan(run_c(node, values)).all()
    node, values = case(gemm_no_inplace, "float64", rng, scalars=(1.0, np.nan))
    assert np.isnan(run_c(node, values)).all()


# ----------------------------------------------------------------------------- empty


@pytest.mark.parametrize("op", OPS + list(DOT_CASES), ids=str)
@pytest.mark.parametrize("mnk", [(0, 4, 3), (5, 0, 3), (5, 4, 0), (0, 0, 0)], ids=str)
def test_empty_dimensions_like_numpy(
    op: Any, mnk: tuple[int, int, int], rng: np.random.Generator
) -> None:
    node, values = case(op, "float64", rng, *mnk)
    check_against_perform(node, values, ["C"] * len(values))


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize("op", OPS + list(DOT_CASES), ids=str)
def test_shape_errors_are_perform_errors(op: Any, rng: np.random.Generator) -> None:
    node, values = case(op, "float64", rng)
    for i, v in enumerate(values):
        if v.ndim == 0:
            continue
        bad = list(values)
        bad[i] = np.ones(tuple(s + 1 for s in v.shape), v.dtype)
        try:
            run_py(node, [b.copy() for b in bad])
        except ValueError as exc:
            expected = str(exc)
        else:
            continue  # a longer free dimension is no error (Dot22's Y columns)
        with pytest.raises(ValueError) as got:
            run_c(node, [b.copy() for b in bad])
        assert str(got.value) == expected


def test_shape_errors_through_the_linkers_are_identical(rng: np.random.Generator) -> None:
    x, y = T.dmatrix("x"), T.dmatrix("y")
    z = T.dmatrix("z")
    outs = [_dot22(x, y), gemm_no_inplace(z, 2.0, x, y, 0.5), T.dot(x, y)]
    xv, yv, zv = np.ones((3, 4)), np.ones((5, 2)), np.ones((3, 2))
    for out in outs:
        errors = []
        for linker in ("py", "c"):
            f = function(
                [x, y, z], out, mode=Mode(linker=linker, optimizer="None"), on_unused_input="ignore"
            )
            with pytest.raises(ValueError) as info:
                f(xv, yv, zv)
            errors.append(str(info.value).splitlines()[0])
        assert errors[0] == errors[1]
        assert "not aligned" in errors[0]


def test_wrong_values_in_the_cells_take_perform(rng: np.random.Generator) -> None:
    """A value that is not an aligned native array of the node's dtype: perform handles it."""
    node = _dot22.make_node(T.dmatrix(), T.dmatrix())
    xv, yv = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    for bad_x in (xv.astype("float32"), xv.astype(">f8"), np.asfortranarray(xv)[:, ::-1]):
        assert_allclose(run_c(node, [bad_x, yv]), run_py(node, [bad_x, yv]))
    with pytest.raises(Exception) as want:
        run_py(node, [xv.tolist(), yv])
    with pytest.raises(type(want.value)) as got:
        run_c(node, [xv.tolist(), yv])
    assert str(got.value) == str(want.value)
    with pytest.raises(ValueError) as want:
        run_py(node, [np.ones(3), yv])
    with pytest.raises(ValueError) as got:
        run_c(node, [np.ones(3), yv])
    assert str(got.value) == str(want.value)


def test_wrong_dtype_or_ndim_for_a_function_is_a_type_error() -> None:
    x, y = T.fmatrix("x"), T.fmatrix("y")
    f = function([x, y], _dot22(x, y), mode=Mode(linker="c", optimizer="None"))
    with pytest.raises(TypeError, match="float32"):
        f(np.ones((2, 2)), np.ones((2, 2), "float32"))
    with pytest.raises(TypeError, match="dimension"):
        f(np.ones(2, "float32"), np.ones((2, 2), "float32"))


# ----------------------------------------------------------------------------- modes


@pytest.mark.parametrize("dtype", DTYPES)
def test_debug_mode_checks_every_blas_kernel(dtype: str, rng: np.random.Generator) -> None:
    z, x, y = (T.matrix(n, dtype=dtype) for n in "zxy")
    u, v = T.vector("u", dtype=dtype), T.vector("v", dtype=dtype)
    a, b = T.scalar("a", dtype=dtype), T.scalar("b", dtype=dtype)
    outs = [
        gemm_no_inplace(z, a, x, y, b),
        _dot22(x, y),
        _dot22scalar(x, y, a),
        gemv_no_inplace(u, a, x, v, b),
        ger(z, a, u, v),
        T.dot(x, y),
        T.dot(x, v),
        T.dot(u, x),
        T.dot(u, u),
    ]
    inputs = [z, x, y, u, v, a, b]
    m = 4
    vals = [rng.standard_normal((m, m)).astype(dtype) for _ in range(3)]
    vals += [rng.standard_normal(m).astype(dtype) for _ in range(2)]
    vals += [scalar(1.5, dtype), scalar(0.5, dtype)]
    f = function(inputs, outs, mode=DebugMode(linker="c", optimizer="None"))
    g = function(inputs, outs, mode=Mode(linker="py", optimizer="None"))
    for got, want in zip(f(*vals), g(*vals), strict=True):
        assert_allclose(got, want)


def _mlp_step(mode: Any, dtype: str, seed: int) -> tuple[Any, list[Any]]:
    rng = np.random.default_rng(seed)
    W = shared(rng.standard_normal((6, 4)).astype(dtype), name="W")
    bias = shared(np.zeros(4, dtype), name="b")
    v = shared(rng.standard_normal(6).astype(dtype), name="v")
    x, t = T.matrix("x", dtype=dtype), T.matrix("t", dtype=dtype)
    out = T.dot(x, W) + bias
    cost = T.sum((out - t) ** 2) + T.sum(T.dot(x, v) ** 2)
    gW, gb, gv = T.grad(cost, [W, bias, v])
    lr = np.asarray(0.1, dtype)
    f = function(
        [x, t],
        cost,
        updates=[(W, W - lr * gW), (bias, bias - lr * gb), (v, v - lr * gv)],
        mode=mode,
    )
    return f, [W, bias, v]


@pytest.mark.parametrize("dtype", DTYPES)
def test_fast_run_training_uses_the_blas_kernels(dtype: str) -> None:
    fast = get_mode("FAST_RUN")
    f, params = _mlp_step(fast, dtype, seed=0)
    assert type(f.maker.linker).__name__ == "CLinker"
    blas = (Gemm, Gemv, Ger, Dot22, Dot22Scalar, Dot)
    ran = {}
    for node, thunk in zip(f.fn.nodes, f.fn.thunks, strict=True):
        if isinstance(node.op, blas):
            assert isinstance(thunk, CThunk), f"{node.op} runs {thunk!r}"
            assert thunk.kernel is not None and not getattr(thunk, "py_fallback", False)
            ran[str(node.op)] = type(thunk).__name__
    assert any(name.startswith("Gemm") for name in ran), ran
    assert any("inplace" in name or "destructive" in name for name in ran), ran
    g, ref_params = _mlp_step(fast.clone(linker="py"), dtype, seed=0)
    rng = np.random.default_rng(1)
    for _ in range(3):
        xv, tv = rng.standard_normal((8, 6)).astype(dtype), rng.standard_normal((8, 4))
        tv = tv.astype(dtype)
        assert_allclose(f(xv, tv), g(xv, tv))
    for p, q in zip(params, ref_params, strict=True):
        assert_allclose(p.get_value(), q.get_value())


def test_fast_run_graph_in_debug_mode() -> None:
    f, _ = _mlp_step(DebugMode(linker="c"), "float64", seed=0)
    rng = np.random.default_rng(2)
    for _ in range(2):
        f(rng.standard_normal((8, 6)), rng.standard_normal((8, 4)))


# ----------------------------------------------------------------------------- native gemv
#
# Mid-size matrix-vector products (Gemv, Dot) run opgraph_c._blas's own loops on OpenMP
# threads instead of BLAS. The thunks are built here with explicit thread counts (the
# registry's follow config.openmp and the calls' times), and native_gemv_stats() tells
# which path a product took.

#: (rows, columns) of matrices the native gemv runs; 777 x 301 leaves remainders everywhere.
NATIVE_SHAPES = [(400, 784), (777, 301), (1500, 300)]
#: (dtype, shape, transposed, whether the native gemv runs it) around its limits: a matrix
#: of 512 KiB or more, of fewer than 460800 elements, sides of 32 or more, and 256 or more
#: outputs for the column loop (transposed: the Fortran-ordered A, y = sum of its columns).
EDGE_CASES = [
    ("float64", (256, 256), False, True),
    ("float64", (255, 256), False, False),
    ("float64", (256, 256), True, True),
    ("float32", (512, 256), False, True),
    ("float32", (511, 256), False, False),
    ("float32", (256, 512), True, True),
    ("float64", (32, 2048), False, True),
    ("float64", (31, 4096), False, False),
    ("float64", (4096, 31), False, False),
    ("float64", (2048, 32), True, True),
    ("float64", (255, 1024), True, False),
    ("float64", (640, 719), False, True),
    ("float64", (640, 720), False, False),
    ("float32", (640, 719), True, True),
    ("float32", (640, 720), True, False),
]
#: (alpha, beta) of the Gemv cases.
GEMV_SCALARS = [(1.0, 0.0), (-0.1, 0.998), (2.5, 1.0), (0.5, -1.5)]


def threaded_thunk(
    node: Apply, cells: dict[Any, list[Any]], nthreads: int, busy: bool = False
) -> Any:
    """``node``'s Gemv or Dot thunk with ``nthreads`` threads (on one if ``busy``: the
    native loops on one thread, as an adaptive team chooses when threads are slower)."""
    args: dict[str, Any] = {
        "nthreads": nthreads,
        "threshold": 10**12 if busy else 0,
        "adaptive": False,
    }
    in_cells = [cells[v] for v in node.inputs]
    out_cells = [cells[v] for v in node.outputs]
    dtype = node.outputs[0].type.dtype
    if isinstance(node.op, Gemv):
        return _blas.GemvThunk(node, in_cells, out_cells, dtype, node.op.inplace, **args)
    return _blas.DotThunk(node, in_cells, out_cells, dtype, **args)


def run_threaded(
    node: Apply, values: Sequence[Any], nthreads: int = 2, busy: bool = False
) -> tuple[Any, bool]:
    """Run ``node``'s thunk on ``values`` (no copies); return its output and whether the
    native gemv computed it."""
    cells = {v: [None] for v in (*node.inputs, *node.outputs)}
    thunk = threaded_thunk(node, cells, nthreads, busy)
    for var, value in zip(node.inputs, values, strict=True):
        cells[var][0] = value
    before = _blas.native_gemv_stats()["calls"]
    thunk()
    return cells[node.outputs[0]][0], _blas.native_gemv_stats()["calls"] > before


def gemv_values(
    dtype: str, shape: tuple[int, int], order: str, transposed: bool, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """A matrix of ``shape`` (the transpose of an ``order``-ordered one if ``transposed``)
    and a vector it multiplies."""
    m, n = shape
    data = rng.standard_normal((n, m) if transposed else (m, n)).astype(dtype)
    a = np.array(data, order=order)
    return (a.T if transposed else a), rng.standard_normal(n).astype(dtype)


def assert_gemv_close(got: np.ndarray, alpha: float, a: Any, x: Any, beta: float, y: Any) -> None:
    """``got`` is ``alpha * a @ x + beta * y`` (``beta == 0``: ``y`` unread) within the error
    bound of a sum of products in ``got``'s dtype, in any order."""
    a64, x64 = np.asarray(a, "float64"), np.asarray(x, "float64")
    want = alpha * (a64 @ x64)
    scale = abs(alpha) * (np.abs(a64) @ np.abs(x64))
    if beta != 0:
        y64 = np.asarray(y, "float64")
        want += beta * y64
        scale += abs(beta * y64)
    bound = 2 * (a64.shape[1] + 2) * np.finfo(got.dtype).eps * scale
    assert got.shape == want.shape
    assert np.all(np.abs(got - want) <= bound), np.max(np.abs(got - want) - bound)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", NATIVE_SHAPES, ids=str)
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("transposed", [False, True], ids=["A", "A.T"])
@pytest.mark.parametrize("op", [gemv_no_inplace, gemv_inplace], ids=str)
def test_native_gemv_matches_numpy(
    op: Any,
    dtype: str,
    shape: tuple[int, int],
    order: str,
    transposed: bool,
    rng: np.random.Generator,
) -> None:
    a, x = gemv_values(dtype, shape, order, transposed, rng)
    node = node_of(op, dtype, (1, 0, 2, 1, 0))
    for alpha, beta in GEMV_SCALARS:
        y = rng.standard_normal(shape[0]).astype(dtype)
        y_in = y.copy()
        got, native = run_threaded(node, [y_in, scalar(alpha, dtype), a, x, scalar(beta, dtype)])
        assert native
        assert got.dtype == dtype and (got is y_in) == op.inplace
        assert_gemv_close(got, alpha, a, x, beta, y)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", NATIVE_SHAPES[:2], ids=str)
@pytest.mark.parametrize("order", ["C", "F"])
def test_native_dot_matches_numpy(
    dtype: str, shape: tuple[int, int], order: str, rng: np.random.Generator
) -> None:
    a = np.array(rng.standard_normal(shape), dtype, order=order)
    u, v = rng.standard_normal(shape[0]).astype(dtype), rng.standard_normal(shape[1]).astype(dtype)
    got, native = run_threaded(node_of(_dot, dtype, (2, 1)), [a, v])
    assert native and got.dtype == dtype
    assert_gemv_close(got, 1.0, a, v, 0.0, None)
    got, native = run_threaded(node_of(_dot, dtype, (1, 2)), [u, a])
    assert native and got.dtype == dtype
    assert_gemv_close(got, 1.0, a.T, u, 0.0, None)


def test_native_gemv_limits_are_those_of_the_edge_cases() -> None:
    assert _blas.GEMV_LIMITS == {
        "min_bytes": 512 * 1024,
        "max_size": 460800,
        "min_side": 32,
        "min_cols_output": 256,
    }


@pytest.mark.parametrize("case", EDGE_CASES, ids=str)
def test_native_gemv_limits(
    case: tuple[str, tuple[int, int], bool, bool], rng: np.random.Generator
) -> None:
    dtype, shape, transposed, expected = case
    a, x = gemv_values(dtype, shape, "C", transposed, rng)
    y = rng.standard_normal(shape[0]).astype(dtype)
    node = node_of(gemv_no_inplace, dtype, (1, 0, 2, 1, 0))
    got, native = run_threaded(node, [y, scalar(1.5, dtype), a, x, scalar(0.5, dtype)])
    assert native == expected
    assert_gemv_close(got, 1.5, a, x, 0.5, y)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("transposed", [False, True], ids=["A", "A.T"])
def test_native_gemv_does_not_depend_on_the_threads(
    dtype: str, order: str, transposed: bool, rng: np.random.Generator
) -> None:
    """Each output element is summed in one order by one thread: the same bits on one
    thread (a busy machine) or several, however the output is split."""
    a, x = gemv_values(dtype, (777, 301), order, transposed, rng)
    y = rng.standard_normal(777).astype(dtype)
    node = node_of(gemv_no_inplace, dtype, (1, 0, 2, 1, 0))
    values = [y, scalar(-0.5, dtype), a, x, scalar(0.25, dtype)]
    want, native = run_threaded(node, values, nthreads=2, busy=True)
    assert native
    for nthreads in (2, 3, 4, 7):
        threaded = _blas.native_gemv_stats()["threaded"]
        got, native = run_threaded(node, values, nthreads=nthreads)
        assert native and _blas.native_gemv_stats()["threaded"] == threaded + 1
        np.testing.assert_array_equal(got, want, err_msg=f"{nthreads} threads")


def test_native_gemv_times_threads_then_one_thread(rng: np.random.Generator) -> None:
    """An adaptive thunk's first product runs on its threads and its second on one thread
    (to time both); all its products give the same bits, however many threads ran them."""
    a, x = gemv_values("float64", (400, 784), "C", False, rng)
    node = node_of(_dot, "float64", (2, 1))
    cells = {v: [None] for v in (*node.inputs, *node.outputs)}
    cells[node.inputs[0]][0], cells[node.inputs[1]][0] = a, x
    out = cells[node.outputs[0]]
    thunk = _blas.DotThunk(node, [cells[v] for v in node.inputs], [out], "float64", nthreads=2)
    before = _blas.native_gemv_stats()
    thunk()
    want = out[0]
    thunk()
    after = _blas.native_gemv_stats()
    assert after["calls"] == before["calls"] + 2 and after["threaded"] == before["threaded"] + 1
    for _ in range(400):  # on one thread, threads are probed after 4 ms of products
        thunk()
        np.testing.assert_array_equal(out[0], want)
    assert _blas.native_gemv_stats()["probes"] > after["probes"]  # the other mode, now and then
    assert_gemv_close(want, 1.0, a, x, 0.0, None)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("transposed", [False, True], ids=["A", "A.T"])
@pytest.mark.parametrize("op", [gemv_no_inplace, gemv_inplace], ids=str)
def test_native_gemv_beta_zero_ignores_nan_in_y(
    op: Any, dtype: str, order: str, transposed: bool, rng: np.random.Generator
) -> None:
    a, x = gemv_values(dtype, (400, 784), order, transposed, rng)
    y = np.full(400, np.nan, dtype)
    node = node_of(op, dtype, (1, 0, 2, 1, 0))
    got, native = run_threaded(node, [y, scalar(2.0, dtype), a, x, scalar(0.0, dtype)])
    assert native and np.isfinite(got).all()
    assert_gemv_close(got, 2.0, a, x, 0.0, None)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("transposed", [False, True], ids=["A", "A.T"])
def test_native_gemv_nan_and_inf_propagate_like_perform(
    dtype: str, order: str, transposed: bool, rng: np.random.Generator
) -> None:
    a, x = gemv_values(dtype, (400, 784), order, transposed, rng)
    y = rng.standard_normal(400).astype(dtype)
    node = node_of(gemv_no_inplace, dtype, (1, 0, 2, 1, 0))
    values = [y, scalar(1.5, dtype), a, x, scalar(0.5, dtype)]
    spots = [(0, (7,)), (2, (5, 300)), (2, (399, 783)), (3, (0,)), (3, (783,))]
    for (i, index), special in itertools.product(spots, (np.nan, np.inf, -np.inf)):
        spoiled = [v.copy(order="K") for v in values]
        spoiled[i][index] = special
        got, native = run_threaded(node, spoiled)
        assert native
        want = run_py(node, [v.copy(order="K") for v in spoiled])
        where = f"{special} at {index} of input {i}"
        assert not np.isfinite(got).all()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=where)
        infinite = np.isinf(want)
        np.testing.assert_array_equal(got[infinite], want[infinite], err_msg=where)
        finite = np.isfinite(want)  # sums of 784 products: BLAS's order differs from ours
        tol = {"float32": 1e-3, "float64": 1e-9}[dtype]
        np.testing.assert_allclose(got[finite], want[finite], rtol=tol, atol=tol, err_msg=where)


@pytest.mark.parametrize("dtype", DTYPES)
def test_native_gemv_layouts_it_does_not_take(dtype: str, rng: np.random.Generator) -> None:
    """Strided vectors run BLAS; matrices BLAS cannot read in place are copied first (as for
    BLAS) and then run natively; one thread without threads configured runs BLAS."""
    a, x = gemv_values(dtype, (400, 784), "C", False, rng)
    y = rng.standard_normal(400).astype(dtype)
    node = node_of(gemv_no_inplace, dtype, (1, 0, 2, 1, 0))
    for values, expected in (
        ([y, a, lay(x, "step")], False),
        ([y, a, lay(x, "reversed")], True),
        ([y, lay(a, "step"), x], True),
        ([y, lay(a, "sub_F"), x], True),
    ):
        y_in, a_in, x_in = values
        got, native = run_threaded(node, [y_in, scalar(1.5, dtype), a_in, x_in, scalar(0.5, dtype)])
        assert native == expected
        assert_gemv_close(got, 1.5, a, x, 0.5, y)
    inplace = node_of(gemv_inplace, dtype, (1, 0, 2, 1, 0))
    y_step = lay(y, "step")
    got, native = run_threaded(inplace, [y_step, scalar(1.5, dtype), a, x, scalar(0.5, dtype)])
    assert not native and got is y_step
    assert_gemv_close(got, 1.5, a, x, 0.5, y)
    got, native = run_threaded(node, [y, scalar(1.5, dtype), a, x, scalar(0.5, dtype)], 1)
    assert not native


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_native_gemv_in_a_forked_child(rng: np.random.Generator) -> None:
    """A child forked after threaded products runs them on one thread (OpenMP's threads
    are not forked: a parallel region would wait for them forever)."""
    a, x = gemv_values("float64", (400, 784), "C", False, rng)
    node = node_of(_dot, "float64", (2, 1))
    want, _ = run_threaded(node, [a, x])
    pid = os.fork()
    if pid == 0:  # the child: exit 0 if the product is right
        got, native = run_threaded(node, [a, x])
        os._exit(0 if native and np.array_equal(got, want) else 1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung in the native gemv")


def test_native_gemv_follows_config_openmp(rng: np.random.Generator) -> None:
    from opgraph.configdefaults import config
    from opgraph_c._threads import thread_limit

    a, x = gemv_values("float64", (400, 784), "C", False, rng)
    node = node_of(_dot, "float64", (2, 1))
    for openmp in (False, True):
        with config.change_flags(openmp=openmp):
            before = _blas.native_gemv_stats()["calls"]
            got = run_c(node, [a, x])
        assert (_blas.native_gemv_stats()["calls"] > before) == (openmp and thread_limit() > 1)
        assert_gemv_close(got, 1.0, a, x, 0.0, None)
