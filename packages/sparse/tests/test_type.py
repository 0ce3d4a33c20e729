"""SparseType: conversion by ``filter``, value comparison, memory sharing, sizes and printing.

The Type is what a compiled function checks its sparse inputs and shared values against, and
what DEBUG_MODE compares values with; these tests pin down each of those duties against
``scipy.sparse`` (and Theano 1.0.5's printed names, taken from the oracle).
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp

import opgraph
from opgraph import sparse
from opgraph_sparse.type import SparseType, describe_value, is_sparse

FORMATS = ["csr", "csc"]
FLOATS = ["float32", "float64"]


def sample(fmt: str = "csr", dtype: str = "float64") -> sp.spmatrix:
    """A 3x4 matrix with four stored values, of ``fmt`` and ``dtype``."""
    dense = np.array([[0, 1, 0, 2], [0, 0, 0, 0], [3, 0, 4, 0]], dtype=dtype)
    return SparseType.format_cls[fmt](dense)


# -- construction, equality, printing --------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csr", "csc", "bsr"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_str_and_repr_print_as_theano(fmt: str, dtype: str) -> None:
    t = SparseType(fmt, dtype)
    # Theano 1.0.5 prints ``Sparse[float64, csr]`` for both str and repr.
    assert str(t) == f"Sparse[{dtype}, {fmt}]"
    assert repr(t) == f"Sparse[{dtype}, {fmt}]"


def test_equality_and_hash_follow_format_and_dtype() -> None:
    a = SparseType("csr", "float64")
    assert a == SparseType("csr", np.float64)
    assert hash(a) == hash(SparseType("csr", "float64"))
    assert a != SparseType("csc", "float64")
    assert a != SparseType("csr", "float32")
    assert len({a, SparseType("csr", "float64"), SparseType("csc", "float64")}) == 2
    assert pickle.loads(pickle.dumps(a)) == a


def test_a_2d_type_that_never_broadcasts() -> None:
    t = SparseType("csc", "float32")
    assert t.ndim == 2
    assert t.broadcastable == (False, False)


def test_dtype_defaults_to_float64() -> None:
    assert SparseType("csr", None).dtype == "float64"


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match=r"format must be one of .*'coo'"):
        SparseType("coo", "float64")


def test_unsupported_dtype_is_refused() -> None:
    with pytest.raises(TypeError, match=r"cannot hold dtype bool"):
        SparseType("csr", "bool")


def test_every_theano_dtype_is_accepted() -> None:
    for dtype in sparse.all_dtypes:
        assert SparseType("csr", dtype).dtype == dtype
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


def test_calling_the_type_makes_a_sparse_variable() -> None:
    t = SparseType("csr", "float32")
    x = t("x")
    assert x.type == t
    assert x.name == "x"
    assert isinstance(x, sparse.SparseVariable)
    assert str(x) == "SparseVariable{csr,float32}"


def test_convert_variable_only_passes_the_same_type() -> None:
    t = SparseType("csr", "float64")
    x = t()
    assert t.convert_variable(x) is x
    assert t.convert_variable(SparseType("csc", "float64")()) is None
    assert t.convert_variable(SparseType("csr", "float32")()) is None


# -- filter ----------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_filter_returns_a_matching_value_itself(fmt: str, dtype: str) -> None:
    t = SparseType(fmt, dtype)
    value = sample(fmt, dtype)
    assert t.filter(value) is value
    assert t.filter(value, strict=True) is value
    assert t.is_valid_value(value)


@pytest.mark.parametrize("fmt", FORMATS)
def test_strict_filter_refuses_another_format(fmt: str) -> None:
    other = "csc" if fmt == "csr" else "csr"
    t = SparseType(fmt, "float64")
    with pytest.raises(TypeError, match=rf"expects a {fmt} float64 sparse matrix, got a {other}"):
        t.filter(sample(other), strict=True)
    assert not t.is_valid_value(sample(other))


def test_strict_filter_refuses_another_dtype() -> None:
    t = SparseType("csr", "float64")
    with pytest.raises(TypeError, match=r"got a csr float32 sparse matrix .*strict"):
        t.filter(sample("csr", "float32"), strict=True)


def test_strict_filter_refuses_a_dense_value() -> None:
    t = SparseType("csr", "float64")
    with pytest.raises(TypeError, match=r"got a dense float64 ndarray of shape \(3, 4\)"):
        t.filter(sample().toarray(), strict=True)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("source", ["csr", "csc", "coo", "lil", "dok", "bsr"])
def test_filter_converts_another_format(fmt: str, source: str) -> None:
    t = SparseType(fmt, "float64")
    value = sample("csr").asformat(source)
    out = t.filter(value)
    assert isinstance(out, SparseType.format_cls[fmt])
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out.toarray(), value.toarray())
    assert t.filter(out, strict=True) is out


def test_filter_converts_a_scipy_sparse_array_to_a_matrix() -> None:
    t = SparseType("csr", "float64")
    value = sp.csr_array(sample().toarray())
    out = t.filter(value)
    assert isinstance(out, sp.csr_matrix)
    np.testing.assert_array_equal(out.toarray(), value.toarray())


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shape", [(3, 4), (4,), (2, 2, 2), ()])
def test_filter_refuses_a_dense_value(fmt: str, shape: tuple[int, ...]) -> None:
    # Theano converted a dense 2-d value silently (an O(rows x cols) scan hiding a mistake);
    # the error names what came and how to convert it
    t = SparseType(fmt, "float64")
    for value in (np.ones(shape), np.ones(shape).tolist() if shape else np.float64(1)):
        with pytest.raises(TypeError, match=rf"expects a {fmt} sparse matrix, got a dense"):
            t.filter(value)
    with pytest.raises(TypeError, match=rf"scipy.sparse.{fmt}_matrix\(value\)"):
        t.filter(np.ones(shape))


def test_filter_refuses_what_is_not_a_matrix() -> None:
    t = SparseType("csr", "float64")
    with pytest.raises(TypeError, match=r"expects a sparse matrix, got a str"):
        t.filter("not a matrix")


@pytest.mark.parametrize("source", ["int8", "int32", "float32"])
def test_filter_casts_a_dtype_that_loses_nothing(source: str) -> None:
    t = SparseType("csr", "float64")
    out = t.filter(sample("csr", source))
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out.toarray(), sample().toarray())


@pytest.mark.parametrize(("source", "target"), [("float64", "float32"), ("float32", "int32")])
def test_filter_refuses_a_downcast_unless_allowed(source: str, target: str) -> None:
    t = SparseType("csr", target)
    value = sample("csr", source)
    with pytest.raises(TypeError, match=rf"casting {source} to {target} may lose precision"):
        t.filter(value)
    with pytest.raises(TypeError, match="allow_downcast=True"):
        t.filter(value, allow_downcast=False)
    out = t.filter(value, allow_downcast=True)
    assert out.dtype == np.dtype(target)
    np.testing.assert_array_equal(out.toarray(), value.toarray().astype(target))


def test_filter_converts_format_and_dtype_together() -> None:
    t = SparseType("csc", "float64")
    out = t.filter(sample("csr", "int32"))
    assert isinstance(out, sp.csc_matrix)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out.toarray(), sample().toarray())


def test_a_function_input_filters_its_value() -> None:
    x = sparse.csr_matrix("x", dtype="float64")
    f = opgraph.function([x], x.toarray())
    np.testing.assert_array_equal(f(sample("csc")), sample().toarray())  # converted
    np.testing.assert_array_equal(f(sample("csr", "int32")), sample().toarray())  # upcast
    with pytest.raises(TypeError, match="may lose precision"):
        f(sample("csr").astype("complex128"))


# -- bsr -------------------------------------------------------------------------------------


def test_bsr_values_filter_and_print() -> None:
    t = SparseType("bsr", "float32")
    value = sp.bsr_matrix(np.arange(16, dtype="float32").reshape(4, 4), blocksize=(2, 2))
    assert t.filter(value) is value
    converted = t.filter(sample("csr", "float32"))
    assert isinstance(converted, sp.bsr_matrix)
    np.testing.assert_array_equal(converted.toarray(), sample("csr", "float32").toarray())
    assert t.values_eq(value, value.copy())
    x = sparse.bsr_matrix("x", dtype="float32")
    assert x.type == t
    assert str(x) == "SparseVariable{bsr,float32}"
    f = opgraph.function([x], sparse.dense_from_sparse(x))
    np.testing.assert_array_equal(f(value), value.toarray())


# -- values_eq and values_eq_approx ----------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_values_eq_ignores_stored_zeros_and_order(fmt: str, dtype: str) -> None:
    t = SparseType(fmt, dtype)
    a = sample(fmt, dtype)
    with_zero = a.copy()
    with_zero.data[0] = 0  # now a stored zero
    plain = with_zero.copy()
    plain.eliminate_zeros()
    assert with_zero.nnz == plain.nnz + 1
    assert t.values_eq(with_zero, plain)
    assert t.values_eq(plain, with_zero)
    assert not t.values_eq(a, with_zero)
    # each row (csr) or column (csc) stored in reverse order: the same matrix
    rows = []
    for i in range(len(a.indptr) - 1):
        lo, hi = a.indptr[i], a.indptr[i + 1]
        rows.append((a.data[lo:hi][::-1], a.indices[lo:hi][::-1]))
    unsorted = SparseType.format_cls[fmt](
        (np.concatenate([r[0] for r in rows]), np.concatenate([r[1] for r in rows]), a.indptr),
        a.shape,
    )
    assert t.values_eq(a, unsorted)


def test_values_eq_sees_value_and_shape_differences() -> None:
    t = SparseType("csr", "float64")
    a = sample()
    b = a.copy()
    b.data[-1] += 1e-12
    assert not t.values_eq(a, b)
    wider = sp.csr_matrix((a.data, a.indices, np.append(a.indptr, a.indptr[-1])), (4, 4))
    assert not t.values_eq(a, wider)
    assert not t.values_eq(a, a.toarray())  # a dense value is not a sparse one


def test_values_eq_treats_nan_as_equal_to_nan() -> None:
    """As TensorType does: DEBUG_MODE compares an input before and after a node with
    values_eq, and a matrix holding NaN must compare equal to an unchanged copy."""
    t = SparseType("csr", "float64")
    a = sp.csr_matrix(np.array([[0.0, np.nan], [2.0, 0.0]]))
    assert t.values_eq(a, a.copy())
    b = sp.csr_matrix(np.array([[0.0, np.nan], [3.0, 0.0]]))
    assert not t.values_eq(a, b)


@pytest.mark.nonfinite
def test_debug_mode_accepts_an_input_holding_nan() -> None:
    x = sparse.csr_matrix("x")
    a = sp.csr_matrix(np.array([[0.0, np.nan], [2.0, 0.0]]))
    out = opgraph.function([x], x.toarray(), mode="DEBUG_MODE")(a)
    np.testing.assert_array_equal(out, a.toarray())


@pytest.mark.parametrize("dtype", FLOATS)
def test_values_eq_approx_uses_a_dtype_tolerance(dtype: str) -> None:
    t = SparseType("csr", dtype)
    a = sample("csr", dtype)
    near = a.copy()
    near.data = near.data * (1 + (1e-6 if dtype == "float32" else 1e-9))
    far = a.copy()
    far.data = far.data + 1e-2
    assert t.values_eq_approx(a, near)
    assert not t.values_eq_approx(a, far)
    assert t.values_eq_approx(a, far, eps=1e-1)


def test_values_eq_approx_nan_stored_zeros_and_shapes() -> None:
    t = SparseType("csc", "float64")
    a = sp.csc_matrix(np.array([[0.0, np.nan], [2.0, 0.0]]))
    assert t.values_eq_approx(a, a.copy())
    with_zero = sp.csc_matrix((np.append(a.data, 0.0), np.append(a.indices, 1), [0, 1, 3]), (2, 2))
    # column 1 now stores NaN at row 0 and a zero at row 1
    assert with_zero.nnz == a.nnz + 1
    assert t.values_eq_approx(a, with_zero)
    assert not t.values_eq_approx(a, sp.csc_matrix((2, 3)))
    assert not t.values_eq_approx(a, a.toarray())


def test_values_eq_approx_of_a_large_matrix() -> None:
    t = SparseType("csr", "float64")
    a = sp.random(1200, 1000, density=1e-3, format="csr", random_state=0)
    b = a.copy()
    b.data += 1e-9
    assert t.values_eq_approx(a, b)
    b.data[0] += 1.0
    assert not t.values_eq_approx(a, b)


# -- memory sharing and sizes ----------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_may_share_memory(fmt: str) -> None:
    t = SparseType(fmt, "float64")
    a = sample(fmt)
    assert t.may_share_memory(a, a)
    assert not t.may_share_memory(a, a.copy())
    view = SparseType.format_cls[fmt]((a.data, a.indices, a.indptr), a.shape, copy=False)
    assert view is not a
    assert t.may_share_memory(a, view)
    assert t.may_share_memory(a, a.data)  # a dense array aliasing the values
    assert t.may_share_memory(a.indptr[1:], a)
    assert not t.may_share_memory(a, np.zeros(3))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_shape_info_and_size(fmt: str, dtype: str) -> None:
    t = SparseType(fmt, dtype)
    a = sample(fmt, dtype)
    info = t.get_shape_info(a)
    assert info == (a.shape, a.data.size, a.indices.size, a.indptr.size, a.nnz)
    itemsize = np.dtype(dtype).itemsize
    expected = a.data.size * itemsize + (a.indices.size + a.indptr.size) * 4
    assert t.get_size(info) == expected
    assert t.get_size(info) == a.data.nbytes + a.indices.nbytes + a.indptr.nbytes


# -- the helpers -----------------------------------------------------------------------------


def test_is_sparse_and_describe_value() -> None:
    assert is_sparse(sample())
    assert is_sparse(sp.coo_matrix((2, 2)))
    assert not is_sparse(np.zeros((2, 2)))
    assert describe_value(sample("csc", "float32")) == (
        "a csc float32 sparse matrix of shape (3, 4)"
    )
    assert describe_value(np.zeros((2, 5), "int8")) == "a dense int8 ndarray of shape (2, 5)"
    assert "int" in describe_value(3)
