"""The "Sparse" section of Theano 1.0's tutorial (doc/tutorial/sparse.txt), run as a test.

Each test is one of the tutorial's examples written as the tutorial has it, with
``import opgraph as theano`` and ``from opgraph import sparse`` in place of Theano's imports.
Where the tutorial prints, the printed text is compared with what Theano 1.0.5 prints (taken
from the oracle); results are checked against ``scipy.sparse`` too. The last tests are the
gradient part of the tutorial (structured against regular gradients) on ``sp_sum``,
``structured_dot`` and ``dot``, with Theano 1.0.5's values.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

import opgraph as theano
import opgraph.tensor as T
from opgraph import sparse


def printed(value: np.ndarray) -> str:
    """What ``print(value)`` writes (without the newline)."""
    return str(value)


# -- Handling Sparse in Theano ---------------------------------------------------------------


def test_all_dtypes() -> None:
    assert set(sparse.all_dtypes) == {
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float32",
        "float64",
        "complex64",
        "complex128",
    }


# -- To and Fro ------------------------------------------------------------------------------


def test_to_and_fro() -> None:
    x = sparse.csc_matrix(name="x", dtype="float32")
    y = sparse.dense_from_sparse(x)
    z = sparse.csc_from_dense(y)
    # the tutorial stops at building the graph; run it too
    f = theano.function([x], [y, z])
    a = sp.csc_matrix(np.asarray([[0, 1, 0], [2, 0, 3]], dtype="float32"))
    dense, back = f(a)
    np.testing.assert_array_equal(dense, a.toarray())
    assert isinstance(back, sp.csc_matrix)
    assert back.dtype == np.float32
    np.testing.assert_array_equal(back.toarray(), a.toarray())


# -- Properties and Construction -------------------------------------------------------------


def test_properties_and_construction() -> None:
    x = sparse.csc_matrix(name="x", dtype="int64")
    data, indices, indptr, shape = sparse.csm_properties(x)
    y = sparse.CSR(data, indices, indptr, shape)
    f = theano.function([x], y)
    a = sp.csc_matrix(np.asarray([[0, 1, 1], [0, 0, 0], [1, 0, 0]]))
    assert printed(a.toarray()) == "[[0 1 1]\n [0 0 0]\n [1 0 0]]"
    assert printed(f(a).toarray()) == "[[0 0 1]\n [1 0 0]\n [1 0 0]]"
    # "one format can be obtained from transposition of the other"
    np.testing.assert_array_equal(f(a).toarray(), a.toarray().T)
    assert isinstance(f(a), sp.csr_matrix)


def test_the_transpose_function() -> None:
    x = sparse.csc_matrix(name="x", dtype="float64")
    y = sparse.transpose(x)
    assert y.type == sparse.SparseType("csr", "float64")  # csc transposed is csr
    f = theano.function([x], [y, x.T])
    a = sp.csc_matrix(np.asarray([[0, 0, -1], [0, -2, 1], [3, 0, 0]], dtype="float64"))
    r, r_t = f(a)
    assert isinstance(r, sp.csr_matrix)
    assert printed(r.toarray()) == "[[ 0.  0.  3.]\n [ 0. -2.  0.]\n [-1.  1.  0.]]"
    np.testing.assert_array_equal(r_t.toarray(), a.T.toarray())


# -- Structured Operation --------------------------------------------------------------------


def test_structured_operation() -> None:
    x = sparse.csc_matrix(name="x", dtype="float32")
    y = sparse.structured_add(x, 2)
    f = theano.function([x], y)
    a = sp.csc_matrix(np.asarray([[0, 0, -1], [0, -2, 1], [3, 0, 0]], dtype="float32"))
    assert printed(a.toarray()) == "[[ 0.  0. -1.]\n [ 0. -2.  1.]\n [ 3.  0.  0.]]"
    assert printed(f(a).toarray()) == "[[0. 0. 1.]\n [0. 0. 3.]\n [5. 0. 0.]]"
    # only the stored values moved: scipy's data plus 2, on a's pattern
    expected = a.copy()
    expected.data += 2
    np.testing.assert_array_equal(f(a).toarray(), expected.toarray())


# -- The small example of the earlier tutorial: sparse.dot -----------------------------------


def test_sparse_dot_example() -> None:
    x = sparse.csr_matrix("x")
    y = T.matrix("y")
    z = sparse.dot(x, y)
    f = theano.function([x, y], z)
    a = sp.coo_matrix(([1] * 4, (range(4), [0, 1, 1, 0])), dtype=np.float32)
    b = np.array([[10, 11], [12, 13]], dtype=np.float32)
    # Theano 1.0.5 refused these float32 values for its float64 inputs ("Expected float64
    # dtype but got float32"); opgraph casts what loses nothing, as its dense inputs do.
    out = f(a, b)
    assert printed(out) == "[[10. 11.]\n [12. 13.]\n [12. 13.]\n [10. 11.]]"
    np.testing.assert_array_equal(out, a.toarray() @ b)
    # x.dot(y) and sparse.dot agree
    np.testing.assert_array_equal(theano.function([x, y], x.dot(y))(a.tocsr(), b), out)


# -- Gradient: structured against regular ----------------------------------------------------

A = sp.csc_matrix(np.asarray([[0, 0, -1], [0, -2, 1], [3, 0, 0]], dtype="float64"))
PATTERN = (A.toarray() != 0).astype("float64")


def test_sp_sum_structured_and_regular_gradients() -> None:
    x = sparse.csc_matrix(name="x", dtype="float64")
    for axis in (None, 0, 1):
        total = sparse.sp_sum(x, axis=axis, sparse_grad=True)
        g_structured = theano.grad(total.sum() if axis is not None else total, x)
        total = sparse.sp_sum(x, axis=axis, sparse_grad=False)
        g_regular = theano.grad(total.sum() if axis is not None else total, x)
        rs, rr = theano.function([x], [g_structured, g_regular])(A)
        assert isinstance(rs, sp.csc_matrix)
        assert isinstance(rr, sp.csc_matrix)
        # Theano 1.0.5: 4 stored ones on x's pattern, and 9 ones
        assert rs.nnz == 4
        np.testing.assert_array_equal(rs.toarray(), PATTERN)
        np.testing.assert_array_equal(rr.toarray(), np.ones((3, 3)))
    assert theano.function([x], sparse.sp_sum(x))(A) == A.sum()
    np.testing.assert_array_equal(
        theano.function([x], x.sum(axis=0))(A), np.asarray(A.sum(axis=0)).ravel()
    )


def test_structured_dot_and_its_structured_gradient() -> None:
    x = sparse.csc_matrix(name="x", dtype="float64")
    w = T.dmatrix("w")
    z = sparse.structured_dot(x, w)
    wv = np.arange(6.0).reshape(3, 2)
    out = theano.function([x, w], z)(A, wv)
    assert printed(out) == "[[-4. -5.]\n [ 0. -1.]\n [ 0.  3.]]"
    np.testing.assert_array_equal(out, A @ wv)
    gx, gw = theano.grad(z.sum(), [x, w])
    rx, rw = theano.function([x, w], [gx, gw])(A, wv)
    # the gradient w.r.t. x is structured: only where x stores a value (Theano 1.0.5)
    assert isinstance(rx, sp.csc_matrix)
    assert rx.nnz == 4
    np.testing.assert_array_equal(rx.toarray(), [[0, 0, 9], [0, 5, 9], [1, 0, 0]])
    np.testing.assert_array_equal(rx.toarray(), (np.ones((3, 2)) @ wv.T) * PATTERN)
    np.testing.assert_array_equal(rw, [[3, 3], [-2, -2], [0, 0]])


def test_dot_has_a_regular_gradient() -> None:
    x = sparse.csc_matrix(name="x", dtype="float64")
    w = T.dmatrix("w")
    wv = np.arange(6.0).reshape(3, 2)
    gx = theano.grad(sparse.dot(x, w).sum(), x)
    r = theano.function([x, w], gx)(A, wv)
    dense = r.toarray() if sp.issparse(r) else r
    # Theano 1.0.5: a value for every entry, zeros of x included
    np.testing.assert_array_equal(dense, [[1, 5, 9], [1, 5, 9], [1, 5, 9]])


def test_toarray_and_arithmetic_on_sparse_variables() -> None:
    x = sparse.csc_matrix(name="x", dtype="float64")
    f = theano.function([x], [x.toarray(), (x * 2).toarray(), (x + x).toarray()])
    dense, doubled, added = f(A)
    assert printed(dense) == "[[ 0.  0. -1.]\n [ 0. -2.  1.]\n [ 3.  0.  0.]]"
    assert printed(doubled) == "[[ 0.  0. -2.]\n [ 0. -4.  2.]\n [ 6.  0.  0.]]"
    np.testing.assert_array_equal(added, doubled)
