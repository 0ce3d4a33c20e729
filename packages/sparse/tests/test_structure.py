"""The structure ops of ``opgraph_sparse.structure``: transpose, neg, row/column scaling,
sums, diagonals, sorted indices, zero removal, clean and stacking.

Each op runs against ``scipy.sparse``/NumPy for csr and csc, float32 and float64 (and
integers where Theano took them), in the default mode (C linker), ``Mode(linker="py")`` and
DEBUG_MODE; output values are checked to be exactly of their declared Type; gradients are
checked by finite differences with ``verify_grad_sparse`` (structured where Theano's are);
``infer_shape`` with ``check_infer_shape``. Printed names are Theano 1.0.5's (from the oracle).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

import opgraph
import opgraph.tensor as T
from opgraph import sparse
from opgraph.compile.mode import Mode
from opgraph.configdefaults import config
from opgraph.graph.basic import Variable
from opgraph.testing.checks import check_infer_shape
from opgraph_sparse import structure as st
from opgraph_sparse.testing import verify_grad_sparse
from opgraph_sparse.type import SparseType

FORMATS = ["csr", "csc"]
FLOATS = ["float32", "float64"]
INTS = ["int32", "int64"]
MODES = {"default": None, "py": Mode(linker="py"), "debug": "DEBUG_MODE"}


def tol(dtype: str) -> dict[str, float]:
    """``assert_allclose`` tolerances for results of ``dtype``."""
    if dtype == "float32":
        return {"rtol": 1e-5, "atol": 1e-6}
    return {"rtol": 1e-12, "atol": 1e-12}


def random_sparse(
    fmt: str, dtype: str, shape: tuple[int, int] = (3, 4), density: float = 0.5, seed: int = 0
) -> sp.spmatrix:
    """A random matrix of ``fmt``/``dtype`` with sorted indices and at least one value."""
    rng = np.random.default_rng(seed)
    dense = rng.uniform(-2, 2, size=shape) * (rng.uniform(size=shape) < density)
    if np.dtype(dtype).kind in "iu":
        dense = np.round(dense * 3)
    dense[0, 0] = 2
    return SparseType.format_cls[fmt](dense.astype(dtype))


def messy(fmt: str, dtype: str = "float64") -> sp.spmatrix:
    """A 3x4 matrix with unsorted indices, duplicates (one pair cancelling out) and
    explicitly stored zeros."""
    rows = np.array([0, 0, 0, 1, 1, 2, 2, 2, 0])
    cols = np.array([3, 1, 3, 0, 0, 2, 1, 2, 2])
    vals = np.array([1.0, 2.0, 4.0, 0.0, 0.0, 5.0, -3.0, -5.0, 7.0])
    coo = (vals.astype(dtype), (rows, cols))
    # build by hand so that scipy does not canonicalise
    m = sp.coo_matrix(coo, shape=(3, 4))
    if fmt == "csr":
        order = np.argsort(rows, kind="stable")
        indptr = np.searchsorted(rows[order], np.arange(4))
        return sp.csr_matrix((vals[order].astype(dtype), cols[order], indptr), shape=(3, 4))
    order = np.argsort(cols, kind="stable")
    indptr = np.searchsorted(cols[order], np.arange(5))
    out = sp.csc_matrix((vals[order].astype(dtype), rows[order], indptr), shape=(3, 4))
    assert np.allclose(out.toarray(), m.toarray())
    return out


def assert_of_type(var: Variable, value: Any) -> None:
    """``value`` is exactly a value of ``var``'s Type (format class and dtype)."""
    assert var.type.filter(value, strict=True) is value


def dense(value: Any) -> np.ndarray:
    return value.toarray() if sp.issparse(value) else np.asarray(value)


def check_grad(op: Callable[..., Any], pt: list[Any], structured: bool = False) -> None:
    """``verify_grad_sparse(op, pt, structured)``."""
    verify_grad_sparse(op, pt, structured=structured)


def other(fmt: str) -> str:
    return "csc" if fmt == "csr" else "csr"


# -- values against scipy, every format and dtype --------------------------------------------

# name -> (graph builder of x (and a vector s), numpy reference of the dense x (and s),
#          vector length: None (no vector), 0 (rows) or 1 (columns))
CASES: dict[str, tuple[Callable[..., Any], Callable[..., Any], int | None]] = {
    "transpose": (lambda x: x.T, lambda d: d.T, None),
    "transpose_fn": (st.transpose, lambda d: d.T, None),
    "neg": (lambda x: -x, lambda d: -d, None),
    "sum_all": (lambda x: st.sp_sum(x), lambda d: d.sum(), None),
    "sum0": (lambda x: st.sp_sum(x, axis=0), lambda d: d.sum(axis=0), None),
    "sum1": (lambda x: x.sum(axis=1), lambda d: d.sum(axis=1), None),
    "sorted": (st.ensure_sorted_indices, lambda d: d, None),
    "remove0": (st.remove0, lambda d: d, None),
    "clean": (st.clean, lambda d: d, None),
    "hstack": (lambda x: st.hstack([x, -x, x]), lambda d: np.hstack([d, -d, d]), None),
    "vstack": (lambda x: st.vstack([x, x], format="csr"), lambda d: np.vstack([d, d]), None),
    "col_scale": (st.col_scale, lambda d, s: d * s[None, :], 1),
    "row_scale": (st.row_scale, lambda d, s: d * s[:, None], 0),
}


@pytest.mark.parametrize("dtype", FLOATS + INTS)
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_values_against_scipy(case: str, fmt: str, dtype: str) -> None:
    build, reference, vec_axis = CASES[case]
    x = sparse.matrix(fmt, "x", dtype)
    value = random_sparse(fmt, dtype)
    inputs, values, ref_args = [x], [value], [value.toarray()]
    if vec_axis is not None:
        s = T.vector("s", dtype=dtype)
        s_val = np.arange(1, value.shape[vec_axis] + 1).astype(dtype)
        inputs.append(s)
        values.append(s_val)
        ref_args.append(s_val)
    out = build(*inputs)
    got = opgraph.function(inputs, out)(*values)
    if sp.issparse(got):
        assert_of_type(out, got)
    else:
        assert got.dtype == out.type.dtype and got.ndim == out.type.ndim
    np.testing.assert_allclose(dense(got), reference(*ref_args), **tol(dtype))


def test_output_types_and_formats() -> None:
    x = sparse.csr_matrix("x", dtype="float32")
    y = sparse.csc_matrix("y", dtype="float64")
    assert x.T.type == SparseType("csc", "float32")
    assert y.T.type == SparseType("csr", "float64")
    assert (-x).type == x.type
    assert st.sp_sum(x).type == T.TensorType("float32", ())
    assert st.sp_sum(y, 0).type == T.TensorType("float64", (False,))
    assert st.diag(x).type == T.TensorType("float32", (False,))
    assert st.square_diagonal(T.fvector()).type == SparseType("csc", "float32")
    assert st.hstack([x, y]).type == SparseType("csc", "float64")  # Theano's default format
    assert st.vstack([x, x], format="csr").type == SparseType("csr", "float32")
    assert st.hstack([x, y], dtype="float32").type == SparseType("csc", "float32")
    assert st.col_scale(x, T.fvector()).type == x.type
    assert st.row_scale(y, T.dvector()).type == y.type


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_all_ops_in_every_mode(fmt: str, mode: str) -> None:
    x = sparse.matrix(fmt, "x", "float64")
    sq = sparse.matrix(fmt, "sq", "float64")
    s = T.dvector("s")
    d = T.dvector("d")
    value = messy(fmt)
    sq_val = random_sparse(fmt, "float64", shape=(4, 4), seed=3)
    s_val = np.array([1.0, -2.0, 0.5, 3.0])
    d_val = np.array([1.0, 0.0, -2.5])
    outs = [
        x.T,
        -x,
        st.col_scale(x, s),
        st.row_scale(x, d),
        st.sp_sum(x),
        st.sp_sum(x, 0),
        st.sp_sum(x, 1),
        st.diag(sq),
        st.square_diagonal(d),
        st.ensure_sorted_indices(x),
        st.remove0(x),
        st.clean(x),
        st.hstack([x, -x], format=fmt),
        st.vstack([x, sq.T]),
    ]
    got = opgraph.function([x, sq, s, d], outs, mode=MODES[mode])(value, sq_val, s_val, d_val)
    dx, dsq = value.toarray(), sq_val.toarray()
    expected = [
        dx.T,
        -dx,
        dx * s_val,
        dx * d_val[:, None],
        dx.sum(),
        dx.sum(0),
        dx.sum(1),
        np.diag(dsq),
        np.diag(d_val),
        dx,
        dx,
        dx,
        np.hstack([dx, -dx]),
        np.vstack([dx, dsq.T]),
    ]
    for var, val, ref in zip(outs, got, expected, strict=True):
        if sp.issparse(val):
            assert_of_type(var, val)
        np.testing.assert_allclose(dense(val), ref, **tol("float64"))


def test_hstack_in_every_mode() -> None:
    a = sparse.csr_matrix("a")
    b = sparse.csc_matrix("b", dtype="float32")
    out = st.hstack([a, b], format="csr")
    av = random_sparse("csr", config.floatX, (3, 2))
    bv = random_sparse("csc", "float32", (3, 4), seed=1)
    for mode in MODES.values():
        got = opgraph.function([a, b], out, mode=mode)(av, bv)
        assert_of_type(out, got)
        np.testing.assert_allclose(got.toarray(), np.hstack([av.toarray(), bv.toarray()]))


# -- semantics worth a closer look -----------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_clean_is_the_canonical_form(fmt: str) -> None:
    value = messy(fmt)
    assert not value.has_canonical_format
    x = sparse.matrix(fmt, "x", "float64")
    to_dense_and_back = sparse.SparseFromDense(fmt)(sparse.dense_from_sparse(x))
    for mode in MODES.values():
        got, ref = opgraph.function([x], [st.clean(x), to_dense_and_back], mode=mode)(value)
        assert_of_type(x, got)
        assert got.has_sorted_indices
        np.testing.assert_array_equal(got.indptr, ref.indptr)
        np.testing.assert_array_equal(got.indices, ref.indices)
        np.testing.assert_array_equal(got.data, ref.data)
        assert 0 not in got.data  # the cancelling duplicates (5, -5) are gone too
    assert value.nnz == 9  # the input is untouched


@pytest.mark.parametrize("fmt", FORMATS)
def test_remove0_and_sorting_keep_values_and_input(fmt: str) -> None:
    value = messy(fmt)
    before = (value.data.copy(), value.indices.copy(), value.indptr.copy())
    x = sparse.matrix(fmt, "x", "float64")
    r0, srt = opgraph.function([x], [st.remove0(x), st.ensure_sorted_indices(x)])(value)
    assert 0 not in r0.data
    assert srt.has_sorted_indices
    assert srt.nnz == value.nnz  # sorting keeps stored zeros and duplicates
    np.testing.assert_array_equal(r0.toarray(), value.toarray())
    np.testing.assert_array_equal(srt.toarray(), value.toarray())
    for a, b in zip(before, (value.data, value.indices, value.indptr), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("fmt", FORMATS)
def test_inplace_variants(fmt: str) -> None:
    assert str(st.Remove0(inplace=True)) == "Remove0{inplace}"
    assert st.Remove0(inplace=True).destroy_map == {0: [0]}
    assert st.EnsureSortedIndices(inplace=True).view_map == {0: [0]}
    assert not getattr(st.remove0, "destroy_map", {})
    assert st.Remove0(True) != st.remove0
    x = sparse.matrix(fmt, "x", "float64")
    inner = -x  # an intermediate value the in-place ops may overwrite
    outs = [st.Remove0(inplace=True)(inner), st.EnsureSortedIndices(inplace=True)(-x)]
    for mode in MODES.values():
        value = messy(fmt)
        f = opgraph.function([x], outs, mode=mode, accept_inplace=True)
        r0, srt = f(value)
        assert 0 not in r0.data
        assert srt.has_sorted_indices
        np.testing.assert_array_equal(r0.toarray(), -value.toarray())
        np.testing.assert_array_equal(srt.toarray(), -value.toarray())
        assert value.nnz == 9


def test_transpose_is_a_view_and_the_output_is_not() -> None:
    # a view of the input's arrays (as in Theano: gradients read the transpose of every
    # structured product's operand), while a function output never aliases an input
    assert st.transpose.view_map == {0: [0]}
    x = sparse.csr_matrix("x")
    value = random_sparse("csr", config.floatX)
    node = st.transpose(x).owner
    out: list[list[Any]] = [[None]]
    node.op.perform(node, [value], out)
    assert np.shares_memory(out[0][0].data, value.data)
    for mode in (Mode(linker="py", optimizer=None), None):
        got = opgraph.function([x], x.T, mode=mode)(value)
        assert not np.may_share_memory(got.data, value.data)
        np.testing.assert_array_equal(got.toarray(), value.toarray().T)


def test_sp_sum_sparse_grad_is_not_a_prop() -> None:
    assert st.SpSum(0, sparse_grad=True) == st.SpSum(0, sparse_grad=False)
    assert st.SpSum(0) != st.SpSum(1)
    assert st.SpSum(None).structured and not st.sp_sum(sparse.csr_matrix()).owner.op.structured


@pytest.mark.parametrize("fmt", FORMATS)
def test_sp_sum_structured_and_regular_gradients(fmt: str) -> None:
    x = sparse.matrix(fmt, "x", "float64")
    value = random_sparse(fmt, "float64", (3, 4))
    mask = value.toarray() != 0
    w = np.arange(1.0, 5.0)
    for struct in (True, False):
        g = opgraph.grad((st.sp_sum(x, 0, sparse_grad=struct) * w).sum(), x)
        assert g.type == x.type
        got = opgraph.function([x], g)(value)
        assert_of_type(g, got)
        expected = np.broadcast_to(w, (3, 4)) * (mask if struct else 1)
        np.testing.assert_allclose(got.toarray(), expected)


def test_sp_sum_of_integers_has_a_zero_float_gradient() -> None:
    x = sparse.csr_matrix("x", dtype="int64")
    (g,) = st.SpSum(None).grad([x], [T.lscalar()])
    assert g.type == SparseType("csr", config.floatX)
    got = opgraph.function([x], g)(random_sparse("csr", "int64"))
    assert got.nnz == 0 and got.shape == (3, 4)


@pytest.mark.parametrize("fmt", FORMATS)
def test_diag_gradient_has_the_input_type(fmt: str) -> None:
    x = sparse.matrix(fmt, "x", "float32")
    g = opgraph.grad((st.diag(x) * np.arange(1.0, 4.0)).sum(), x)
    assert g.type == x.type
    got = opgraph.function([x], g)(random_sparse(fmt, "float32", (3, 3)))
    assert_of_type(g, got)
    np.testing.assert_allclose(got.toarray(), np.diag([1.0, 2.0, 3.0]))


def test_square_diagonal_keeps_zeros_as_theano() -> None:
    d = T.dvector()
    got = opgraph.function([d], st.square_diagonal(d))(np.array([1.0, 0.0, 3.0]))
    assert got.nnz == 3
    np.testing.assert_array_equal(got.toarray(), np.diag([1.0, 0.0, 3.0]))
    empty = opgraph.function([d], st.square_diagonal(d))(np.zeros(0))
    assert empty.shape == (0, 0)


def test_stack_of_scipy_constants_and_dtype_upcast() -> None:
    a = random_sparse("csr", "int32", (2, 3))
    b = random_sparse("csc", "float32", (2, 2), seed=1)
    out = st.hstack([a, b])
    assert out.type == SparseType("csc", "float64")  # upcast(int32, float32)
    got = opgraph.function([], out)()
    np.testing.assert_allclose(got.toarray(), np.hstack([a.toarray(), b.toarray()]))


# -- gradients -------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_gradients_regular(fmt: str) -> None:
    value = random_sparse(fmt, "float64", (3, 4))
    square = random_sparse(fmt, "float64", (3, 3), seed=2)
    rng = np.random.default_rng(1)
    check_grad(st.transpose, [value])
    check_grad(st.neg, [value])
    check_grad(st.diag, [square])
    check_grad(st.square_diagonal, [rng.uniform(size=4)])
    check_grad(st.ensure_sorted_indices, [value])
    check_grad(st.remove0, [value])
    check_grad(st.clean, [value])
    other_block = random_sparse(other(fmt), "float64", (3, 2), seed=5)
    check_grad(lambda a, b: st.hstack([a, b], format=fmt), [value, other_block])
    low = random_sparse(other(fmt), "float64", (2, 4), seed=6)
    check_grad(lambda a, b: st.vstack([a, b]), [value, low])


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("fmt", FORMATS)
def test_gradients_sp_sum(fmt: str, axis: int | None) -> None:
    value = random_sparse(fmt, "float64", (3, 4))
    for struct in (True, False):
        check_grad(st.SpSum(axis, sparse_grad=struct), [value], structured=struct)


@pytest.mark.parametrize("fmt", FORMATS)
def test_gradients_scaling_structured(fmt: str) -> None:
    value = random_sparse(fmt, "float64", (3, 4))
    rng = np.random.default_rng(2)
    check_grad(st.col_scale, [value, rng.uniform(size=4)], structured=True)
    check_grad(st.row_scale, [value, rng.uniform(size=3)], structured=True)


def test_gradients_float32() -> None:
    value = random_sparse("csr", "float32", (3, 4))
    check_grad(st.transpose, [value])
    check_grad(st.SpSum(1, sparse_grad=True), [value], structured=True)
    s = np.linspace(0.5, 2.0, 4).astype("float32")
    check_grad(st.col_scale, [value, s], structured=True)


# -- infer_shape -----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_infer_shape(fmt: str) -> None:
    x = sparse.matrix(fmt, "x", "float64")
    y = sparse.matrix(other(fmt), "y", "float64")
    s, d = T.dvector("s"), T.dvector("d")
    value = random_sparse(fmt, "float64", (3, 4))
    yv = random_sparse(other(fmt), "float64", (3, 2), seed=4)
    sv, dv = np.arange(4.0), np.arange(3.0)
    cases: list[tuple[Any, type]] = [
        (x.T, st.Transpose),
        (-x, st.Neg),
        (st.sp_sum(x), st.SpSum),
        (st.sp_sum(x, 0), st.SpSum),
        (st.sp_sum(x, 1), st.SpSum),
        (st.ensure_sorted_indices(x), st.EnsureSortedIndices),
        (st.remove0(x), st.Remove0),
        (st.hstack([x, y, x]), st.HStack),
        (st.vstack([x.T, y.T]), st.VStack),
        (st.square_diagonal(s), st.SquareDiagonal),
        (st.diag(st.square_diagonal(s)), st.Diag),
    ]
    if fmt == "csc":
        cases += [(st.col_scale(x, s), st.ColScaleCSC), (st.row_scale(x, d), st.RowScaleCSC)]
    else:  # a csr matrix is scaled through its (csc) transpose
        cases += [(st.col_scale(x, s), st.RowScaleCSC), (st.row_scale(x, d), st.ColScaleCSC)]
    for out, cls in cases:
        check_infer_shape([x, y, s, d], out, [value, yv, sv, dv], cls)


# -- printed names ---------------------------------------------------------------------------


def test_printed_names_are_theanos() -> None:
    # from Theano 1.0.5: str(op) for each op
    expected = {
        st.transpose: "SparseTranspose",
        st.neg: "SparseNeg",
        st.ColScaleCSC(): "ColScaleCSC",
        st.RowScaleCSC(): "RowScaleCSC",
        st.SpSum(0): "SpSum{axis=0}",
        st.SpSum(None): "SpSum{axis=None}",
        st.diag: "Diag",
        st.square_diagonal: "SquareDiagonal",
        st.ensure_sorted_indices: "EnsureSortedIndices{no_inplace}",
        st.EnsureSortedIndices(True): "EnsureSortedIndices{inplace}",
        st.remove0: "Remove0{}",
        st.Remove0(True): "Remove0{inplace}",
        st.HStack("csr", "float32"): "HStack(csr,float32)",
        st.VStack("csc", "float64"): "VStack(csc,float64)",
    }
    for op, name in expected.items():
        assert str(op) == name


# -- bad inputs ------------------------------------------------------------------------------


def test_wrong_format_dtype_and_ndim_at_build_time() -> None:
    bsr = sparse.bsr_matrix("b")
    csr = sparse.csr_matrix("x")
    for fn in (st.transpose, st.neg, st.sp_sum, st.diag, st.ensure_sorted_indices, st.remove0):
        with pytest.raises(TypeError, match=r"bsr"):
            fn(bsr)
        with pytest.raises(TypeError, match=r"sparse"):
            fn(T.dmatrix())
    with pytest.raises(TypeError, match=r"ColScaleCSC.*csr"):
        st.ColScaleCSC()(csr, T.dvector())
    with pytest.raises(TypeError, match=r"RowScaleCSC.*csr"):
        st.RowScaleCSC()(csr, T.dvector())
    with pytest.raises(TypeError, match=r"ColScaleCSC.*vector"):
        st.col_scale(sparse.csc_matrix(), T.dmatrix())
    with pytest.raises(TypeError, match=r"col_scale.*bsr"):
        st.col_scale(bsr, T.dvector())
    with pytest.raises(TypeError, match=r"SquareDiagonal.*vector"):
        st.square_diagonal(T.dmatrix())
    with pytest.raises(TypeError, match=r"SquareDiagonal.*sparse"):
        st.square_diagonal(csr)
    with pytest.raises(TypeError, match=r"HStack.*bsr"):
        st.hstack([csr, bsr])
    with pytest.raises(TypeError):
        st.hstack([csr, T.dmatrix()])
    with pytest.raises(TypeError, match=r"list"):
        st.hstack(csr)
    with pytest.raises(ValueError, match=r"empty"):
        st.vstack([])
    with pytest.raises(ValueError, match=r"empty"):
        st.HStack(dtype="float64")()
    with pytest.raises(ValueError, match=r"dtype"):
        st.HStack("csr")
    with pytest.raises(ValueError, match=r"format"):
        st.HStack("coo", "float64")
    with pytest.raises(ValueError, match=r"axis"):
        st.sp_sum(csr, axis=2)


def test_shape_mismatches_at_run_time() -> None:
    x = sparse.csc_matrix("x", dtype="float64")
    s = T.dvector("s")
    value = random_sparse("csc", "float64", (3, 4))
    with pytest.raises(ValueError, match=r"ColScaleCSC.*\(4,\)"):
        opgraph.function([x, s], st.col_scale(x, s))(value, np.ones(3))
    with pytest.raises(ValueError, match=r"RowScaleCSC.*\(3,\)"):
        opgraph.function([x, s], st.row_scale(x, s))(value, np.ones(4))
    with pytest.raises(ValueError, match=r"Diag.*square"):
        opgraph.function([x], st.diag(x))(value)
    y = sparse.csr_matrix("y", dtype="float64")
    other_rows = random_sparse("csr", "float64", (2, 4))
    with pytest.raises(ValueError, match=r"HStack.*rows.*\(3, 4\), \(2, 4\)"):
        opgraph.function([x, y], st.hstack([x, y]))(value, other_rows)
    other_cols = random_sparse("csr", "float64", (2, 5))
    with pytest.raises(ValueError, match=r"VStack.*columns"):
        opgraph.function([x, y], st.vstack([x, y]))(value, other_cols)


def test_dense_value_for_a_sparse_input_is_rejected() -> None:
    x = sparse.csr_matrix("x", dtype="float64")
    f = opgraph.function([x], -x)
    with pytest.raises(TypeError):
        f(np.ones((2, 2), dtype="float32")[None])
    out = st.neg.make_node(x).outputs[0]
    with pytest.raises(TypeError, match=r"SparseNeg.*csr"):
        st.neg.perform(out.owner, [random_sparse("csc", "float64")], [[None]])
