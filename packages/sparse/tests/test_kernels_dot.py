"""The C kernels of the sparse products (``opgraph_sparse.kernels.dot``) against ``perform``.

Each check builds one node, makes its thunk through backend-c's registry (asserting it is
the generated C thunk, not a fallback) and runs it and the Op's ``perform`` on the same
values: same type, dtype, shape and values (dtype tolerance), and for bad values the same
error, raised by ``perform`` itself (``perform_calls`` counts the calls the C path left).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse

pytest.importorskip("opgraph_c")

import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.graph.basic import Apply
from opgraph_c.registry import get_registry
from opgraph_sparse.basic import matrix as sparse_matrix
from opgraph_sparse.dot import (
    Dot,
    SamplingDot,
    StructuredDot,
    StructuredDotGradCSC,
    StructuredDotGradCSR,
    Usmm,
)

FLOATS = ["float32", "float64"]
FORMATS = ["csr", "csc"]
INDEX = ["int32", "int64"]


def _sparse(shape: tuple[int, int], fmt: str, dtype: str, index: str, seed: int = 0) -> Any:
    """A random matrix of ``fmt`` with ``index`` indices, some rows (columns) empty."""
    rng = np.random.default_rng(seed)
    m = scipy.sparse.random(shape[0], shape[1], density=0.3, format=fmt, random_state=rng)
    m = m.astype(dtype)
    if m.shape[0] > 2 and fmt == "csr":  # an empty row
        m = scipy.sparse.csr_matrix(m.multiply(np.arange(m.shape[0])[:, None] != 1))
    m.indices = m.indices.astype(index)
    m.indptr = m.indptr.astype(index)
    return m


def _dense(shape: tuple[int, int], dtype: str, seed: int = 1, layout: str = "C") -> np.ndarray:
    rng = np.random.default_rng(seed)
    if layout == "strided":
        return rng.standard_normal((shape[0], 2 * shape[1])).astype(dtype)[:, ::2]
    arr = rng.standard_normal(shape).astype(dtype)
    return np.asfortranarray(arr) if layout == "F" else arr


def _thunk(node: Apply, values: list[Any]) -> tuple[Any, list[Any]]:
    storage = {v: [val] for v, val in zip(node.inputs, values, strict=True)}
    for o in node.outputs:
        storage[o] = [None]
    thunk = get_registry().make_thunk(node, storage, None)
    assert type(thunk).__name__ in ("SpmmThunk", "PairDotThunk"), thunk
    assert not getattr(thunk, "py_fallback", False)
    return thunk, storage[node.outputs[0]]


def _perform(node: Apply, values: list[Any]) -> Any:
    out: list[list[Any]] = [[None]]
    node.op.perform(node, values, out)
    return out[0][0]


def check(node: Apply, *values: Any, c_path: bool = True) -> Any:
    """The node's C thunk and perform on the same values agree (values or error)."""
    thunk, cell = _thunk(node, list(values))
    try:
        expected = _perform(node, list(values))
    except Exception as exc:
        with pytest.raises(type(exc)) as info:
            thunk()
        assert str(info.value) == str(exc)
        assert thunk.perform_calls == 1
        return None
    thunk()
    got = cell[0]
    assert thunk.perform_calls == (0 if c_path else 1)
    node.outputs[0].type.filter(got, strict=True)
    assert type(got) is type(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    tol = 1e-4 if got.dtype == np.float32 else 1e-10
    if scipy.sparse.issparse(got):
        np.testing.assert_array_equal(got.indices, expected.indices)
        np.testing.assert_array_equal(got.indptr, expected.indptr)
        assert not np.shares_memory(got.indices, values[2].indices)
        got, expected = got.data, expected.data
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)
    for v in values:
        if isinstance(v, np.ndarray):
            assert not np.shares_memory(got, v)
    return got


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("index", INDEX)
def test_structured_dot_and_dot(fmt: str, dtype: str, index: str) -> None:
    x = sparse_matrix(fmt, "x", dtype)
    y = T.matrix("y", dtype=dtype)
    a = _sparse((9, 7), fmt, dtype, index)
    for op in (StructuredDot(), Dot()):
        node = op.make_node(x, y)
        for layout in ("C", "F", "strided"):
            check(node, a, _dense((7, 5), dtype, layout=layout))
        check(node, a, _dense((7, 64), dtype))
        check(node, a, _dense((7, 0), dtype))  # no columns
    node = Dot().make_node(y, x)  # dense @ sparse
    check(node, _dense((4, 9), dtype, layout="F"), a)
    check(node, _dense((4, 9), dtype, layout="strided"), a)


@pytest.mark.parametrize("fmt", FORMATS)
def test_mixed_dtypes_and_empty_matrices(fmt: str) -> None:
    x = sparse_matrix(fmt, "x", "float32")
    y = T.matrix("y", dtype="float64")
    node = StructuredDot().make_node(x, y)
    assert node.outputs[0].type.dtype == "float64"
    check(node, _sparse((6, 5), fmt, "float32", "int32"), _dense((5, 3), "float64"))
    for shape in ((0, 5), (6, 0), (0, 0)):
        empty = _sparse(shape, fmt, "float32", "int32")
        check(node, empty, _dense((shape[1], 3), "float64"))
    no_entries = scipy.sparse.csr_matrix((6, 5), dtype="float32").asformat(fmt)
    check(node, no_entries, _dense((5, 3), "float64"))


def test_threads_give_the_serial_result() -> None:
    """A product big enough for the thread team: the same values as perform."""
    for fmt in FORMATS:
        x = sparse_matrix(fmt, "x", "float64")
        node = StructuredDot().make_node(x, T.dmatrix("y"))
        a = _sparse((3000, 400), fmt, "float64", "int32")
        b = _dense((400, 48), "float64")
        thunk, cell = _thunk(node, [a, b])
        for _ in range(6):  # the adaptive team times one thread and its threads
            thunk()
            np.testing.assert_allclose(cell[0], a @ b, rtol=1e-12, atol=1e-12)
        assert thunk.perform_calls == 0


def _same_bits_for_thread_counts(
    monkeypatch: pytest.MonkeyPatch,
    node: Apply,
    values: list[Any],
    counts: tuple[int, ...],
    tol: float,
) -> None:
    """The C thunk on fixed teams of ``counts`` threads: each result bit-identical to the
    first, which is within ``tol`` of perform's."""
    from opgraph_sparse.kernels import dot as kdot

    results = []
    for nt in counts:
        team = {"nthreads": nt, "adaptive": False, "threshold": 0}
        monkeypatch.setattr(kdot, "_team", lambda team=team: team)
        thunk, cell = _thunk(node, values)
        thunk()
        assert thunk.perform_calls == 0
        results.append(cell[0])
    np.testing.assert_allclose(results[0], _perform(node, values), rtol=tol, atol=tol)
    for got in results[1:]:
        np.testing.assert_array_equal(got, results[0])


@pytest.mark.parametrize("dtype", FLOATS)
def test_thread_counts_give_identical_bits(monkeypatch: pytest.MonkeyPatch, dtype: str) -> None:
    """1, 2 and 3 threads (fixed teams) give bit-identical products, CSR and CSC, plain and
    transposed (dense @ sparse): each output value is summed by one thread in the serial
    order. CSC columns hold many entries, so the prefetch ahead crosses block bounds."""

    a_csr = _sparse((700, 300), "csr", dtype, "int32", seed=3)
    b = _dense((300, 40), dtype, seed=4)
    bt = _dense((40, 700), dtype, seed=5)
    for fmt in FORMATS:
        a = a_csr.asformat(fmt)
        x = sparse_matrix(fmt, "x", dtype)
        y = T.matrix("y", dtype=dtype)
        cases = [(Dot().make_node(x, y), [a, b]), (Dot().make_node(y, x), [bt, a])]
        for node, values in cases:
            tol = 1e-4 if dtype == "float32" else 1e-10
            _same_bits_for_thread_counts(monkeypatch, node, values, (1, 2, 3), tol)


@pytest.mark.parametrize("dtype", FLOATS)
def test_large_csc_products_sum_in_parts_with_identical_bits(
    monkeypatch: pytest.MonkeyPatch, dtype: str
) -> None:
    """A CSC product of 540,000 entries over 400 output rows splits its columns into 4
    parts, each summed into a buffer of its own and added in order: 1, 2, 3 and 5 threads
    (5: each part's rows in bands) give the same bits, Usmm's epilogue comes after the
    parts, and an index out of range found in any part goes to perform."""
    from opgraph_sparse.kernels import dot as kdot

    a = _sparse((400, 4500), "csc", dtype, "int32", seed=6)
    assert a.nnz >= 4 * 131072 and a.nnz >= 16 * 4 * 400
    b = _dense((4500, 8), dtype, seed=7)
    z = _dense((400, 8), dtype, seed=8)
    alpha = np.asarray(0.5, dtype=dtype)
    x = sparse_matrix("csc", "x", dtype)
    y, zv = T.matrix("y", dtype=dtype), T.matrix("z", dtype=dtype)
    al = T.scalar("alpha", dtype=dtype)
    cases = [(Dot().make_node(x, y), [a, b]), (Usmm().make_node(al, x, y, zv), [alpha, a, b, z])]
    tol = 1e-3 if dtype == "float32" else 1e-10
    for node, values in cases:
        _same_bits_for_thread_counts(monkeypatch, node, values, (1, 2, 3, 5), tol)
    # A row index out of range in the third part: the call goes to perform before any
    # output is kept (perform patched to raise: SciPy's product reads out of bounds).
    bad = a.copy()
    bad.indices[bad.indptr[3000]] = 400

    def refuse(self: Any, node: Apply, inputs: Any, out: Any) -> None:
        raise IndexError(f"{self}: perform got the call")

    monkeypatch.setattr(Dot, "perform", refuse)
    for nt in (1, 2):
        team = {"nthreads": nt, "adaptive": False, "threshold": 0}
        monkeypatch.setattr(kdot, "_team", lambda team=team: team)
        thunk, cell = _thunk(Dot().make_node(x, y), [bad, b])
        with pytest.raises(IndexError, match="perform got the call"):
            thunk()
        assert thunk.perform_calls == 1 and cell[0] is None


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_usmm(fmt: str, dtype: str) -> None:
    alpha = T.scalar("alpha", dtype=dtype)
    x = sparse_matrix(fmt, "x", dtype)
    y = T.matrix("y", dtype=dtype)
    z = T.matrix("z", dtype=dtype)
    a = _sparse((8, 6), fmt, dtype, "int64")
    node = Usmm().make_node(alpha, x, y, z)
    al = np.asarray(-1.5, dtype=dtype)
    check(node, al, a, _dense((6, 4), dtype), _dense((8, 4), dtype, layout="F"))
    check(node, al, a, _dense((6, 4), dtype, layout="strided"), _dense((8, 4), dtype))
    node = Usmm().make_node(alpha, y, x, z)  # dense @ sparse
    check(node, al, _dense((3, 8), dtype), a, _dense((3, 6), dtype, layout="strided"))
    # z of the wrong shape: perform's ValueError
    check(node, al, _dense((3, 8), dtype), a, _dense((3, 5), dtype))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("index", INDEX)
def test_structured_dot_grad(fmt: str, dtype: str, index: str) -> None:
    op = StructuredDotGradCSR() if fmt == "csr" else StructuredDotGradCSC()
    ind = T.vector("ind", dtype=index)
    ptr = T.vector("ptr", dtype=index)
    node = op.make_node(ind, ptr, T.matrix("b", dtype=dtype), T.matrix("g", dtype=dtype))
    a = _sparse((9, 7), fmt, dtype, index)
    for k in (5, 17, 0):
        b = _dense((7, k), dtype, layout="F")
        g = _dense((9, k), dtype, layout="strided" if k else "C")
        check(node, a.indices, a.indptr, b, g)
    empty = _sparse((0, 7), fmt, dtype, index)
    check(node, empty.indices, empty.indptr, _dense((7, 3), dtype), _dense((0, 3), dtype))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_sampling_dot(fmt: str, dtype: str) -> None:
    x = T.matrix("x", dtype=dtype)
    y = T.matrix("y", dtype=dtype)
    p = sparse_matrix(fmt, "p", dtype)
    node = SamplingDot().make_node(x, y, p)
    pat = _sparse((6, 5), fmt, dtype, "int32")
    check(node, _dense((6, 9), dtype), _dense((5, 9), dtype, layout="F"), pat)
    check(node, _dense((6, 9), dtype), _dense((4, 9), dtype), pat)  # perform's shape error


def test_bad_indices_give_performs_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Indices out of range, a broken indptr, a shape mismatch: perform's exception.

    SciPy's product does not check a matrix's indices (it reads out of bounds), so for
    those the check is that the C path hands the call to perform (patched here to raise)
    before computing anything.
    """

    def refuse(self: Any, node: Apply, inputs: Any, out: Any) -> None:
        raise IndexError(f"{self}: perform got the call")

    b = _dense((7, 3), "float64")
    for fmt in FORMATS:
        node = StructuredDot().make_node(sparse_matrix(fmt, "x", "float64"), T.dmatrix("y"))
        a = _sparse((9, 7), fmt, "float64", "int32")
        check(node, a, _dense((6, 3), "float64"))  # shape mismatch
        for k, value in ((2, 1000), (0, -1)):
            bad = a.copy()
            bad.indices[k] = value
            with monkeypatch.context() as m:
                m.setattr(StructuredDot, "perform", refuse)
                thunk, cell = _thunk(node, [bad, b])
                with pytest.raises(IndexError, match="perform got the call"):
                    thunk()
            assert thunk.perform_calls == 1 and cell[0] is None
    op = StructuredDotGradCSR()
    gnode = op.make_node(T.ivector("i"), T.ivector("p"), T.dmatrix("b"), T.dmatrix("g"))
    a = _sparse((9, 7), "csr", "float64", "int32")
    bad_ind = a.indices.copy()
    bad_ind[0] = -1
    check(gnode, bad_ind, a.indptr, b, _dense((9, 3), "float64"))
    bad_ptr = a.indptr.copy()
    bad_ptr[3], bad_ptr[4] = bad_ptr[4], bad_ptr[3] - 1
    check(gnode, a.indices, bad_ptr, b, _dense((9, 3), "float64"))
    check(gnode, a.indices, a.indptr[:-1], b, _dense((9, 3), "float64"))


def test_functions_in_every_mode() -> None:
    """The product and its gradient compiled with the c linker, py and DEBUG_MODE."""
    import opgraph
    from opgraph_sparse.dot import dot

    x = sparse_matrix("csr", "x", "float64")
    y = T.dmatrix("y")
    c = T.dmatrix("c")
    out = dot(x, y)
    gy = opgraph.grad((out * c).sum(), y)
    a = _sparse((12, 8), "csr", "float64", "int32")
    b, cv = _dense((8, 5), "float64"), _dense((12, 5), "float64")
    expected = [a @ b, a.T @ cv]
    for mode in (Mode(linker="c"), Mode(linker="py"), "DEBUG_MODE"):
        f = function([x, y, c], [out, gy], mode=mode)
        for got, ref in zip(f(a, b, cv), expected, strict=True):
            np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    f = function([x, y, c], [out, gy], mode=Mode(linker="c"))
    thunks = [t for n, t in zip(f.fn.nodes, f.fn.thunks) if isinstance(n.op, Dot)]
    assert len(thunks) == 2 and all(type(t).__name__ == "SpmmThunk" for t in thunks)
    assert all(t.perform_calls == 0 for t in thunks)
