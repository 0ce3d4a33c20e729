"""The C kernels of ``mul_s_d`` and ``structured_add_s_v`` (backend-c's kernel hook): the
node really runs the generated thunk, whose result is perform's exactly (class, dtype,
pattern with stored zeros, index dtype, data bit for bit), and anything unusual goes to
perform, whose errors are the thunk's."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

import opgraph
import opgraph.tensor as T
from opgraph import sparse
from opgraph.compile.debugmode import DebugMode
from opgraph.compile.mode import Mode
from opgraph.testing import installed_linkers
from opgraph_sparse.arith import StructuredAddSV, structured_add_s_v
from opgraph_sparse.basic import MulSD, mul_s_d
from opgraph_sparse.type import SparseType

if "c" not in installed_linkers():
    pytest.skip("opgraph-backend-c is not installed: no c linker", allow_module_level=True)

from opgraph.link.dispatch import KernelFallbackWarning
from opgraph_c.registry import get_registry
from opgraph_sparse.kernels.arith import ARITH_C_VERSION, PARALLEL_NNZ

FORMATS = ["csr", "csc"]
FLOATS = ["float32", "float64"]


def perform_value(node: Any, values: list[Any]) -> Any:
    """What the node's Op.perform gives for ``values``."""
    cell: list[Any] = [None]
    node.op.perform(node, values, [cell])
    return cell[0]


def compiled(op: Any, fmt: str, x_dtype: str, y_dtype: str, y_ndim: int) -> Any:
    """A c-linker function computing ``op(x, y)``; its one thunk."""
    x = sparse.matrix(fmt, "x", x_dtype)
    y = T.tensor(dtype=y_dtype, shape=(None,) * y_ndim, name="y")
    f = opgraph.function([x, y], op(x, y), mode=Mode(linker="c"))
    (thunk,) = f.fn.thunks
    return f, thunk


def assert_same(got: Any, want: Any) -> None:
    """Exactly the same sparse matrix: class, dtype, arrays and their dtypes, bits."""
    assert type(got) is type(want) and got.shape == want.shape
    assert got.dtype == want.dtype
    for name in ("data", "indices", "indptr"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype, name
        np.testing.assert_array_equal(a, b, err_msg=name)


def matrices(fmt: str, dtype: str, shape: tuple[int, int] = (5, 6)) -> list[Any]:
    """The matrices a kernel meets: random, a stored zero, unsorted indices, a duplicate,
    int64 indices, a strided data array, nothing stored."""
    rng = np.random.default_rng(0)
    dense = rng.standard_normal(shape) * (rng.uniform(size=shape) < 0.5)
    dense[0, 0] = 1.25
    cls = SparseType.format_cls[fmt]
    base = cls(dense.astype(dtype))
    zero = base.copy()
    zero.data[1] = 0
    unsorted = base.copy()
    unsorted.indices[:2], unsorted.data[:2] = (
        unsorted.indices[1::-1].copy(),
        unsorted.data[1::-1].copy(),
    )
    dup = cls(
        (
            np.array([1, 2, 3], dtype),
            np.array([0, 0, 1]),
            np.array([0, 2, 3] + [3] * (len(base.indptr) - 3)),
        ),
        shape,
    )
    wide = base.copy()
    wide.indices, wide.indptr = wide.indices.astype("int64"), wide.indptr.astype("int64")
    strided = base.copy()
    strided.data = np.repeat(base.data, 2)[::2]
    empty = cls(shape, dtype=dtype)
    return [base, zero, unsorted, dup, wide, strided, empty]


def test_the_hook_registered_both_kernels() -> None:
    for op_class in (MulSD, StructuredAddSV):
        kernel = get_registry().lookup(op_class)
        assert kernel is not None and kernel.version == ARITH_C_VERSION
        assert kernel.owner == "opgraph-sparse"


@pytest.mark.parametrize("y_dtype", FLOATS)
@pytest.mark.parametrize("x_dtype", FLOATS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_mul_s_d_matrix_matches_perform_exactly(fmt: str, x_dtype: str, y_dtype: str) -> None:
    f, thunk = compiled(mul_s_d, fmt, x_dtype, y_dtype, 2)
    assert type(thunk).__name__ == "MulSDThunk"  # the generated C thunk, not perform
    y = np.random.default_rng(1).standard_normal((5, 6)).astype(y_dtype)
    for x in matrices(fmt, x_dtype):
        for yv in (y, np.asfortranarray(y), np.repeat(y, 2, axis=1)[:, ::2]):
            got = f(x, yv)
            assert_same(got, perform_value(thunk.node, [x, yv]))
            assert not np.shares_memory(got.data, x.data)
            assert not np.shares_memory(got.indices, x.indices)
    assert thunk.perform_calls == 0


@pytest.mark.parametrize("y_dtype", FLOATS)
@pytest.mark.parametrize("x_dtype", FLOATS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_mul_s_d_scalar_matches_perform_exactly(fmt: str, x_dtype: str, y_dtype: str) -> None:
    f, thunk = compiled(mul_s_d, fmt, x_dtype, y_dtype, 0)
    s = np.asarray(-1.7, dtype=y_dtype)
    cases = matrices(fmt, x_dtype)
    for x in cases[:-1]:
        assert_same(f(x, s), perform_value(thunk.node, [x, s]))
    # perform's own paths: a matrix storing nothing; a cast of a non-canonical matrix
    # (scipy's astype sums its duplicates and sorts its indices)
    to_perform = 1 if x_dtype == y_dtype or x_dtype == "float64" else 3
    assert thunk.perform_calls == to_perform - 1
    assert_same(f(cases[-1], s), perform_value(thunk.node, [cases[-1], s]))
    assert thunk.perform_calls == to_perform


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_structured_add_s_v_matches_perform_exactly(fmt: str, dtype: str) -> None:
    f, thunk = compiled(structured_add_s_v, fmt, dtype, dtype, 1)
    assert type(thunk).__name__ == "StructuredAddSVThunk"
    v = np.random.default_rng(2).standard_normal(6).astype(dtype)
    for x in matrices(fmt, dtype):
        for vv in (v, np.repeat(v, 3)[::3]):
            got = f(x, vv)
            assert_same(got, perform_value(thunk.node, [x, vv]))
            assert got.nnz == x.nnz
    assert thunk.perform_calls == 0


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_parallel_loop_on_many_values(fmt: str) -> None:
    n = 2 * PARALLEL_NNZ
    x = sp.random(2000, 500, density=n / 1e6, format=fmt, dtype="float64", random_state=3)
    assert x.nnz >= PARALLEL_NNZ
    y = np.random.default_rng(4).standard_normal((2000, 500))
    f, thunk = compiled(mul_s_d, fmt, "float64", "float64", 2)
    assert_same(f(x, y), perform_value(thunk.node, [x, y]))
    g, thunk_g = compiled(structured_add_s_v, fmt, "float64", "float64", 1)
    assert_same(g(x, y[0]), perform_value(thunk_g.node, [x, y[0]]))
    assert thunk.perform_calls == thunk_g.perform_calls == 0


def run_thunk(thunk: Any, values: list[Any]) -> Any:
    """Run ``thunk`` on ``values`` put straight into its cells (what another Op's output
    could hold: no function input filter checks them)."""
    for cell, value in zip(thunk.inputs, values, strict=True):
        cell[0] = value
    thunk()
    return thunk.outputs[0][0]


def hand_built(fmt: str, shape: tuple[int, int], indices: list[int], indptr: list[int]) -> Any:
    """A matrix whose arrays are set after construction, unchecked (as a user may)."""
    m = SparseType.format_cls[fmt](shape)
    m.data, m.indices, m.indptr = np.ones(len(indices)), np.array(indices), np.array(indptr)
    return m


def test_bad_values_go_to_perform_and_give_its_errors() -> None:
    f, thunk = compiled(mul_s_d, "csr", "float64", "float64", 2)
    x = matrices("csr", "float64")[0]
    with pytest.raises(ValueError, match="MulSD: the sparse operand has shape"):
        f(x, np.ones((5, 5)))
    assert thunk.perform_calls == 1
    y = np.arange(12.0).reshape(3, 4)
    for indices, indptr in [
        ([0, 9], [0, 1, 2, 2]),
        ([0, -1], [0, 1, 2, 2]),
        ([0, 1], [0, 2, 1, 2]),
    ]:
        bad = hand_built("csr", (3, 4), indices, indptr)
        calls = thunk.perform_calls
        try:
            want = perform_value(thunk.node, [bad, y])
        except Exception as err:  # whatever perform does, the thunk does: never a crash
            with pytest.raises(type(err)):
                run_thunk(thunk, [bad, y])
        else:
            assert_same(run_thunk(thunk, [bad, y]), want)
        assert thunk.perform_calls == calls + 1  # the C loop found it and left it to perform
    g, thunk_g = compiled(structured_add_s_v, "csc", "float64", "float64", 1)
    with pytest.raises(IndexError, match="StructuredAddSV: a stored index is out of range"):
        run_thunk(thunk_g, [hand_built("csc", (4, 3), [0, 4], [0, 1, 2, 2]), np.ones(3)])
    with pytest.raises(ValueError, match=r"StructuredAddSV: the csc matrix .* inconsistent"):
        run_thunk(thunk_g, [hand_built("csc", (4, 3), [0, 1], [0, 2, 1, 2]), np.ones(3)])
    with pytest.raises(ValueError, match="StructuredAddSV: y must have one value per column"):
        g(matrices("csc", "float64")[0], np.ones(5))
    assert thunk_g.perform_calls == 3


def test_integer_values_run_perform_on_purpose_without_a_warning() -> None:
    x, y = sparse.csr_matrix("x", dtype="int64"), T.lmatrix("y")
    with warnings.catch_warnings():
        warnings.simplefilter("error", KernelFallbackWarning)
        f = opgraph.function([x, y], mul_s_d(x, y), mode=Mode(linker="c"), profile=True)
    a = sp.csr_matrix(np.array([[1, 0], [0, 3]], dtype="int64"))
    np.testing.assert_array_equal(f(a, np.full((2, 2), 2)).toarray(), [[2, 0], [0, 6]])
    assert not f.profile.py_fallback


@pytest.mark.parametrize("fmt", FORMATS)
def test_debug_mode_checks_the_c_thunks_against_perform(fmt: str) -> None:
    x, y, v = sparse.matrix(fmt, "x", "float32"), T.dmatrix("y"), T.fvector("v")
    outs = [mul_s_d(x, y), structured_add_s_v(x, v), mul_s_d(x, T.dscalar("s"))]
    s = outs[2].owner.inputs[1]
    f = opgraph.function([x, y, v, s], outs, mode=DebugMode(linker="c"))
    a = matrices(fmt, "float32")[0]
    yv, vv = np.arange(30.0).reshape(5, 6), np.arange(6, dtype="float32")
    r = f(a, yv, vv, 2.0)
    np.testing.assert_allclose(r[0].toarray(), a.toarray() * yv, rtol=1e-12)
    np.testing.assert_allclose(r[2].toarray(), a.toarray() * 2.0, rtol=1e-12)
