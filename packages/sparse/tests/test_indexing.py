"""Indexing sparse matrices (``opgraph_sparse.indexing``): the ``x[...]`` dispatch, the
GetItem* ops and their gradients, ConstructSparseFromList and ``sparse_grad``.

Values are checked against ``scipy.sparse`` indexing for csr and csc, float32, float64 and
integers, in the default mode (C linker), ``Mode(linker="py")`` and DEBUG_MODE; outputs must
be exactly of their declared Type; gradients are checked by finite differences; bad indices
must be clear errors naming the Op. Printed names are Theano 1.0.5's (from the oracle).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

import opgraph
import opgraph.tensor as T
import opgraph_sparse.api
from opgraph import sparse
from opgraph.compile.mode import Mode
from opgraph.graph.basic import Variable
from opgraph.testing.checks import check_infer_shape
from opgraph_sparse import indexing as ix
from opgraph_sparse.testing import verify_grad_sparse
from opgraph_sparse.type import SparseType

FORMATS = ["csr", "csc"]
DTYPES = ["float32", "float64", "int32", "int64"]
MODES = {"default": None, "py": Mode(linker="py"), "debug": "DEBUG_MODE"}


def random_sparse(
    fmt: str, dtype: str, shape: tuple[int, int] = (4, 5), density: float = 0.5, seed: int = 0
) -> sp.spmatrix:
    """A random matrix of ``fmt``/``dtype`` with at least one value."""
    rng = np.random.default_rng(seed)
    dense = rng.uniform(-2, 2, size=shape) * (rng.uniform(size=shape) < density)
    if np.dtype(dtype).kind in "iu":
        dense = np.round(dense * 3)
    dense[0, 0] = 2
    return SparseType.format_cls[fmt](dense.astype(dtype))


def assert_of_type(var: Variable, value: Any) -> None:
    """``value`` is exactly a value of ``var``'s Type (format class and dtype)."""
    assert var.type.filter(value, strict=True) is value


def check_grad(op: Callable[..., Any], pt: list[Any], structured: bool = False) -> None:
    """``verify_grad_sparse(op, pt, structured)``."""
    verify_grad_sparse(op, pt, structured=structured)


# -- the dispatch and values against scipy ---------------------------------------------------

I = T.iscalar("i")
J = T.lscalar("j")
V = T.lvector("v")
W = T.ivector("w")
SYMBOLS = [I, J, V, W]
SYMBOL_VALUES = [1, -2, np.array([3, 0, 3, -1]), np.array([4, 4, 0, 2], dtype="int32")]

# name -> (index given to x[...], the same index for scipy, expected Op class)
INDICES: dict[str, tuple[Any, Any, type]] = {
    "rows_slice": (slice(1, 3), slice(1, 3), ix.GetItem2d),
    "both_slices": (
        (slice(1, None), slice(None, 4, 2)),
        (slice(1, None), slice(None, 4, 2)),
        ix.GetItem2d,
    ),
    "negative_steps": (
        (slice(None, None, -1), slice(-2, None)),
        (slice(None, None, -1), slice(-2, None)),
        ix.GetItem2d,
    ),
    "symbolic_bounds": (
        (slice(I, None), slice(J, None, I)),
        (slice(1, None), slice(-2, None, 1)),
        ix.GetItem2d,
    ),
    "row_list": ([2, 0, 2, -1], [2, 0, 2, -1], ix.GetItemList),
    "row_array": (np.array([1, 3]), [1, 3], ix.GetItemList),
    "row_vector": (V, [3, 0, 3, -1], ix.GetItemList),
    "two_lists": (([0, 2, 3, -1], [4, 4, 0, 1]), ([0, 2, 3, -1], [4, 4, 0, 1]), ix.GetItem2Lists),
    "list_and_vector": (([0, 1, 2, 3], W), ([0, 1, 2, 3], [4, 4, 0, 2]), ix.GetItem2Lists),
    "scalar": ((1, 2), (1, 2), ix.GetItemScalar),
    "negative_scalar": ((-1, np.int64(-5)), (-1, -5), ix.GetItemScalar),
    "symbolic_scalar": ((I, J), (1, -2), ix.GetItemScalar),
}


def _resolve(index: Any) -> Any:
    return index if isinstance(index, tuple) else (index,)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", sorted(INDICES))
def test_getitem_against_scipy(name: str, fmt: str, dtype: str) -> None:
    index, sp_index, cls = INDICES[name]
    x = sparse.matrix(fmt, "x", dtype)
    value = random_sparse(fmt, dtype)
    out = x[index]
    assert isinstance(out.owner.op, cls)
    got = opgraph.function([x, *SYMBOLS], out, on_unused_input="ignore")(value, *SYMBOL_VALUES)
    expected = value[sp_index]
    if cls in (ix.GetItemList, ix.GetItem2d):
        assert_of_type(out, got)
        assert got.format == fmt
        np.testing.assert_array_equal(got.toarray(), expected.toarray())
    else:
        assert got.dtype == np.dtype(dtype) and got.ndim == out.type.ndim
        np.testing.assert_array_equal(got, np.asarray(expected).ravel().reshape(got.shape))


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_op_in_every_mode(fmt: str, mode: str) -> None:
    x = sparse.matrix(fmt, "x", "float64")
    shape_of = T.dmatrix("shape_of")
    values = T.dmatrix("values")
    value = random_sparse(fmt, "float64")
    outs = [
        x[1:3, ::2],
        x[[3, 1, 3]],
        x[[0, 3, -1], [1, 1, 4]],
        x[2, 3],
        ix.get_item_list_grad(x, [3, 1, 3], x[[3, 1, 3]]),
        ix.get_item_2lists_grad(x, [0, 3, 0], [1, 1, 1], T.as_tensor_variable([1.0, 2.0, 3.0])),
        ix.construct_sparse_from_list(shape_of, values, [2, 0, 2]),
    ]
    vals = np.arange(15.0).reshape(3, 5)
    fn = opgraph.function([x, shape_of, values], outs, mode=MODES[mode])
    got = fn(value, np.zeros((4, 5)), vals)
    d = value.toarray()
    grad_rows = np.zeros_like(d)
    np.add.at(grad_rows, [3, 1, 3], d[[3, 1, 3]])
    grad_2 = np.zeros_like(d)
    grad_2[0, 1], grad_2[3, 1] = 4.0, 2.0
    from_list = np.zeros((4, 5))
    np.add.at(from_list, [2, 0, 2], vals)
    expected = [
        d[1:3, ::2],
        d[[3, 1, 3]],
        d[[0, 3, -1], [1, 1, 4]],
        d[2, 3],
        grad_rows,
        grad_2,
        from_list,
    ]
    for var, val, ref in zip(outs, got, expected, strict=True):
        if sp.issparse(val):
            assert_of_type(var, val)
        else:
            assert val.dtype == np.float64
        np.testing.assert_allclose(val.toarray() if sp.issparse(val) else val, ref)


def test_construct_sparse_from_list_values() -> None:
    x = T.dmatrix("x")
    values = T.dmatrix("values")
    ilist = T.lvector("ilist")
    out = ix.construct_sparse_from_list(x, values, ilist)
    assert out.type == SparseType("csc", "float64")
    vals = np.arange(1.0, 16.0).reshape(3, 5)
    for mode in MODES.values():
        fn = opgraph.function([x, values, ilist], out, mode=mode)
        got = fn(np.zeros((4, 5)), vals, np.array([2, 0, -2]))
        assert_of_type(out, got)
        expected = np.zeros((4, 5))
        np.add.at(expected, [2, 0, 2], vals)  # -2 is row 2 of 4: repeated rows accumulate
        np.testing.assert_allclose(got.toarray(), expected)
        assert got.has_canonical_format


def test_construct_sparse_from_list_dtype_and_gradient() -> None:
    x = T.fmatrix("x")
    values = T.dmatrix("values")
    out = ix.construct_sparse_from_list(x, values, [1, 1, 0])
    assert out.type == SparseType("csc", "float32")  # x's dtype, as Theano declares
    got = opgraph.function([x, values], out)(np.zeros((2, 3), "float32"), np.ones((3, 3)))
    assert_of_type(out, got)
    np.testing.assert_allclose(got.toarray(), [[1.0] * 3, [2.0] * 3])
    ilist = np.array([3, 0, 3])
    check_grad(
        lambda v: ix.construct_sparse_from_list(T.zeros((4, 2)), v, ilist),
        [np.random.default_rng(0).uniform(size=(3, 2))],
    )


# -- gradients -------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_gradients(fmt: str) -> None:
    value = random_sparse(fmt, "float64")
    check_grad(lambda x: ix.get_item_list(x, [3, 0, 3, -4]), [value])
    check_grad(lambda x: ix.get_item_2lists(x, [0, 3, 0, -1], [1, 1, 1, 4]), [value])
    check_grad(lambda x: x[[2, 1]], [value], structured=True)


@pytest.mark.parametrize("fmt", FORMATS)
def test_gradient_types_and_values(fmt: str) -> None:
    x = sparse.matrix(fmt, "x", "float32")
    value = random_sparse(fmt, "float32")
    w = np.arange(1.0, 11.0).reshape(2, 5)
    g_list = opgraph.grad((x[[1, 1]].toarray() * w).sum(), x)
    g_pairs = opgraph.grad((x[[0, 0, 2], [1, 1, 3]] * np.array([1.0, 2.0, 3.0])).sum(), x)
    assert g_list.type == g_pairs.type == x.type
    got_list, got_pairs = opgraph.function([x], [g_list, g_pairs])(value)
    assert_of_type(g_list, got_list)
    assert_of_type(g_pairs, got_pairs)
    mask = value.toarray()[1] != 0  # the structured dense_from_sparse keeps x[[1, 1]]'s pattern
    expected = np.zeros((4, 5))
    expected[1] = (w[0] + w[1]) * mask
    np.testing.assert_allclose(got_list.toarray(), expected, rtol=1e-6)
    expected = np.zeros((4, 5))
    expected[0, 1], expected[2, 3] = 3.0, 3.0
    np.testing.assert_allclose(got_pairs.toarray(), expected, rtol=1e-6)


def test_slices_and_scalars_have_no_gradient() -> None:
    x = sparse.csr_matrix("x")
    with pytest.raises(Exception, match=r"GetItem2d"):
        opgraph.grad(x[1:3].toarray().sum(), x)
    with pytest.raises(Exception, match=r"GetItemScalar"):
        opgraph.grad(x[1, 2], x)


# -- sparse_grad -----------------------------------------------------------------------------


def _wired(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``opgraph.sparse`` export this module's names if the api does not yet."""
    for name in ("construct_sparse_from_list", "sparse_grad"):
        if not hasattr(opgraph_sparse.api, name):
            monkeypatch.setattr(opgraph_sparse.api, name, getattr(ix, name), raising=False)


def test_sparse_grad_rebuilds_advanced_subtensor1(monkeypatch: pytest.MonkeyPatch) -> None:
    _wired(monkeypatch)
    m = T.dmatrix("m")
    idx = T.lvector("idx")
    y = m[idx]
    sg = ix.sparse_grad(y)
    assert type(sg.owner.op) is type(y.owner.op) and sg.owner.op.sparse_grad
    assert sg.owner.inputs == y.owner.inputs
    (g, _) = sg.owner.op.grad(sg.owner.inputs, [T.dmatrix("gz")])
    assert g.type == SparseType("csc", "float64")
    with pytest.raises(TypeError, match=r"sparse_grad.*AdvancedSubtensor1"):
        ix.sparse_grad(m)
    with pytest.raises(TypeError, match=r"sparse_grad.*AdvancedSubtensor1"):
        ix.sparse_grad(m[1:2])


def test_sparse_grad_gives_the_dense_gradient_as_sparse(monkeypatch: pytest.MonkeyPatch) -> None:
    _wired(monkeypatch)
    m = T.dmatrix("m")
    idx = T.lvector("idx")
    w = np.arange(1.0, 13.0).reshape(4, 3)
    dense_g = opgraph.grad((m[idx] ** 2 * w).sum(), m)
    sparse_g = opgraph.grad((opgraph.sparse_grad(m[idx]) ** 2 * w).sum(), m)
    assert sparse_g.type == SparseType("csc", "float64")
    mv = np.random.default_rng(0).uniform(size=(5, 3))
    iv = np.array([4, 0, 4, -1])
    for mode in MODES.values():
        d, s = opgraph.function([m, idx], [dense_g, sparse_g], mode=mode)(mv, iv)
        assert sp.isspmatrix_csc(s)
        np.testing.assert_allclose(s.toarray(), d)


# -- infer_shape -----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_infer_shape(fmt: str) -> None:
    x = sparse.matrix(fmt, "x", "float64")
    i, j = T.lscalar("i"), T.lscalar("j")
    gv = T.dvector("gv")
    m = T.dmatrix("m")
    value = random_sparse(fmt, "float64")
    inputs = [x, i, j, gv, m]
    values = [value, 1, -2, np.array([1.0, 2.0, 3.0]), np.ones((3, 5))]
    cases: list[tuple[Any, type]] = [
        (x[[3, 1, 3]], ix.GetItemList),
        (x[[0, 1, 2], [4, 4, 0]], ix.GetItem2Lists),
        (x[i, j], ix.GetItemScalar),
        (x[1:3], ix.GetItem2d),
        (x[i:, ::j], ix.GetItem2d),
        (x[-3:j, 5:0:-2], ix.GetItem2d),
        (ix.get_item_list_grad(x, [3, 1, 3], x[[3, 1, 3]]), ix.GetItemListGrad),
        (ix.get_item_2lists_grad(x, [0, 1, 2], [4, 4, 0], gv), ix.GetItem2ListsGrad),
        (ix.construct_sparse_from_list(T.zeros((6, 5)), m, [0, 5, 2]), ix.ConstructSparseFromList),
    ]
    for out, cls in cases:
        check_infer_shape(inputs, out, values, cls)


# -- printed names ---------------------------------------------------------------------------


def test_printed_names_are_theanos() -> None:
    expected = {
        ix.get_item_list: "GetItemList",
        ix.get_item_list_grad: "GetItemListGrad",
        ix.get_item_2lists: "GetItem2Lists",
        ix.get_item_2lists_grad: "GetItem2ListsGrad",
        ix.get_item_2d: "GetItem2d",
        ix.get_item_scalar: "GetItemScalar",
        ix.construct_sparse_from_list: "ConstructSparseFromList",
    }
    for op, name in expected.items():
        assert str(op) == name


# -- bad indices -----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_out_of_range_indices_are_index_errors(fmt: str) -> None:
    x = sparse.matrix(fmt, "x", "float64")
    v = T.lvector("v")
    i = T.lscalar("i")
    value = random_sparse(fmt, "float64")  # 4 x 5
    for mode in (None, MODES["py"]):
        with pytest.raises(IndexError, match=r"GetItemList.*row index 4 .*length 4"):
            opgraph.function([x, v], x[v], mode=mode)(value, np.array([0, 4]))
        with pytest.raises(IndexError, match=r"GetItemList.*-5"):
            opgraph.function([x, v], x[v], mode=mode)(value, np.array([-5]))
        with pytest.raises(IndexError, match=r"GetItem2Lists.*column index 5"):
            opgraph.function([x, v], x[[0, 1], v], mode=mode)(value, np.array([0, 5]))
        with pytest.raises(IndexError, match=r"GetItemScalar.*row index 7"):
            opgraph.function([x, i], x[i, 0], mode=mode)(value, 7)
        with pytest.raises(IndexError, match=r"GetItemListGrad"):
            g = ix.get_item_list_grad(x, v, x[[0, 1]])
            opgraph.function([x, v], g, mode=mode)(value, np.array([0, 9]))
    m = T.dmatrix("m")
    with pytest.raises(IndexError, match=r"ConstructSparseFromList.*row index 6"):
        out = ix.construct_sparse_from_list(m, T.dmatrix("vals"), v)
        opgraph.function([m, out.owner.inputs[1], v], out)(np.zeros((6, 2)), np.ones((1, 2)), [6])


def test_run_time_shape_errors() -> None:
    x = sparse.csr_matrix("x", dtype="float64")
    value = random_sparse("csr", "float64")
    v, w, i = T.lvector("v"), T.lvector("w"), T.lscalar("i")
    with pytest.raises(ValueError, match=r"GetItem2Lists.*same length.*3 and 2"):
        opgraph.function([x, v, w], x[v, w])(value, [0, 1, 2], [0, 1])
    with pytest.raises(ValueError, match=r"GetItem2d.*step cannot be zero"):
        opgraph.function([x, i], x[::i])(value, 0)
    m, vals = T.dmatrix("m"), T.dmatrix("vals")
    out = ix.construct_sparse_from_list(m, vals, v)
    fn = opgraph.function([m, vals, v], out)
    with pytest.raises(ValueError, match=r"ConstructSparseFromList.*2 rows.*3 indices"):
        fn(np.zeros((4, 2)), np.ones((2, 2)), [0, 1, 2])
    with pytest.raises(ValueError, match=r"ConstructSparseFromList.*3 columns"):
        fn(np.zeros((4, 2)), np.ones((1, 3)), [0])
    gz = sparse.csr_matrix("gz", dtype="float64")
    g = ix.get_item_list_grad(x, v, gz)
    with pytest.raises(ValueError, match=r"GetItemListGrad.*shape"):
        opgraph.function([x, v, gz], g)(value, [0, 1], random_sparse("csr", "float64", (3, 5)))


def test_bad_indices_at_build_time() -> None:
    x = sparse.csr_matrix("x")
    with pytest.raises(TypeError, match=r"GetItem2d.*sparse vector"):
        x[1]
    with pytest.raises(TypeError, match=r"GetItem2d.*sparse vector"):
        x[1:2, 3]
    with pytest.raises(TypeError, match=r"GetItem2d.*sparse vector"):
        x[T.lscalar(), 1:2]
    with pytest.raises(TypeError, match=r"GetItem2d.*advanced"):
        x[1:2, [1, 2]]
    with pytest.raises(TypeError, match=r"GetItem2d.*integer scalar"):
        x[1.5:3]
    with pytest.raises(TypeError, match=r"GetItem2d.*integer scalar"):
        x[T.dscalar() :]
    with pytest.raises(TypeError, match=r"GetItem2d.*integer scalar"):
        x[T.lvector() :]
    with pytest.raises(IndexError, match=r"GetItem2d.*1 or 2 indices"):
        x[1:2, 1:2, 1:2]
    with pytest.raises(TypeError, match=r"GetItemList.*integer"):
        x[[1.0, 2.0]]
    with pytest.raises(TypeError, match=r"GetItem2d.*advanced"):
        x[T.lmatrix()]
    with pytest.raises(TypeError, match=r"GetItem2Lists.*column index.*vector"):
        x[[1, 2], 3]
    with pytest.raises(TypeError, match=r"GetItem2d"):
        x[2.0, 1]
    with pytest.raises(TypeError, match=r"GetItemScalar.*boolean"):
        ix.get_item_scalar(x, (True, 1))
    with pytest.raises(IndexError, match=r"GetItemScalar.*pair"):
        ix.get_item_scalar(x, (1,))
    with pytest.raises(TypeError, match=r"bsr"):
        sparse.bsr_matrix()[[0]]
    with pytest.raises(TypeError, match=r"GetItemList.*sparse"):
        ix.get_item_list(T.dmatrix(), [0])
    with pytest.raises(TypeError, match=r"ConstructSparseFromList.*dense"):
        ix.construct_sparse_from_list(x, T.dmatrix(), [0])
    with pytest.raises(TypeError, match=r"ConstructSparseFromList.*3 dimension"):
        ix.construct_sparse_from_list(T.dtensor3(), T.dmatrix(), [0])
    with pytest.raises(TypeError, match=r"ConstructSparseFromList.*values must be a matrix"):
        ix.construct_sparse_from_list(T.dmatrix(), T.dvector(), [0])
    with pytest.raises(TypeError, match=r"ConstructSparseFromList.*ilist"):
        ix.construct_sparse_from_list(T.dmatrix(), T.dmatrix(), T.dvector())


def test_empty_lists() -> None:
    x = sparse.csc_matrix("x", dtype="float64")
    value = random_sparse("csc", "float64")
    rows, items = opgraph.function([x], [x[[]], x[[], []]])(value)
    assert rows.shape == (0, 5) and sp.isspmatrix_csc(rows)
    assert items.shape == (0,) and items.dtype == np.float64
