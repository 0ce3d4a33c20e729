"""The building blocks of ``opgraph_sparse.basic``: conversion, constants, CSM, casts, MulSD.

Every op runs against ``scipy.sparse`` for csr and csc, float32 and float64, in the default
mode (C linker where installed), ``Mode(linker="py")`` and DEBUG_MODE; every output value is
checked to be exactly of its declared Type; gradients are checked by finite differences
with ``verify_grad_sparse``. Printed names are Theano 1.0.5's (taken from the oracle).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

import opgraph
import opgraph.tensor as T
from opgraph import sparse
from opgraph.compile.mode import Mode
from opgraph.configdefaults import config
from opgraph.graph.basic import Constant, Variable
from opgraph.testing.checks import check_infer_shape
from opgraph_sparse.basic import is_sparse_variable
from opgraph_sparse.testing import verify_grad_sparse
from opgraph_sparse.type import SparseType

FORMATS = ["csr", "csc"]
FLOATS = ["float32", "float64"]
MODES = {"default": None, "py": Mode(linker="py"), "debug": "DEBUG_MODE"}
MODE_IDS = list(MODES)


def tol(dtype: str) -> dict[str, float]:
    """``assert_allclose`` tolerances for results of ``dtype``."""
    return {"rtol": 1e-5, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-12, "atol": 0}


def random_sparse(
    fmt: str, dtype: str, shape: tuple[int, int] = (3, 4), density: float = 0.5, seed: int = 0
) -> sp.spmatrix:
    """A random matrix of ``fmt``/``dtype`` with sorted indices and at least one value."""
    rng = np.random.default_rng(seed)
    dense = rng.uniform(-2, 2, size=shape) * (rng.uniform(size=shape) < density)
    dense[0, 0] = 1.5  # never empty
    return SparseType.format_cls[fmt](dense.astype(dtype))


def compile_and_run(inputs: list[Variable], outputs: Any, values: list[Any], mode: Any) -> Any:
    """Compile ``outputs`` in ``mode`` and call the function on ``values``."""
    return opgraph.function(inputs, outputs, mode=MODES[mode])(*values)


def assert_of_type(var: Variable, value: Any) -> None:
    """``value`` is exactly a value of ``var``'s Type (format class and dtype)."""
    assert var.type.filter(value, strict=True) is value


# -- conversion ------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_as_sparse_variable_of_a_scipy_matrix_is_a_copied_constant(fmt: str) -> None:
    value = random_sparse(fmt, "float64")
    c = sparse.as_sparse_variable(value, name="c")
    assert isinstance(c, sparse.SparseConstant)
    assert c.type == SparseType(fmt, "float64")
    assert c.name == "c"
    np.testing.assert_array_equal(c.data.toarray(), value.toarray())
    value.data[:] = 0  # the constant holds its own copy
    assert c.data.nnz and c.data.data.any()
    assert sparse.as_sparse is sparse.as_sparse_variable


def test_as_sparse_variable_of_another_scipy_format_is_csr() -> None:
    value = sp.coo_matrix(np.array([[0.0, 1.0], [2.0, 0.0]], dtype="float32"))
    c = sparse.as_sparse_variable(value)
    assert c.type == SparseType("csr", "float32")
    np.testing.assert_array_equal(c.data.toarray(), value.toarray())


def test_as_sparse_variable_passes_variables_and_takes_an_apply_output() -> None:
    x = sparse.csr_matrix("x")
    assert sparse.as_sparse_variable(x) is x
    y = sparse.cast(x, "float32")
    assert sparse.as_sparse_variable(y.owner) is y
    with pytest.raises(ValueError, match="several"):
        sparse.as_sparse_variable(sparse.csm_data(x).owner)  # four outputs


def test_a_dense_variable_is_refused_with_the_hint() -> None:
    d = T.dmatrix("d")
    with pytest.raises(TypeError, match=r"expected a sparse variable, got d .*csr_from_dense"):
        sparse.as_sparse_variable(d)
    with pytest.raises(TypeError, match=r"dense float64 ndarray of shape \(2, 2\).*HINT"):
        sparse.as_sparse_variable(np.eye(2))
    with pytest.raises(TypeError, match=r"expected a sparse variable"):
        sparse.dense_from_sparse(d)


def test_as_sparse_or_tensor_variable() -> None:
    x = sparse.csc_matrix("x")
    assert sparse.as_sparse_or_tensor_variable(x) is x
    assert is_sparse_variable(sparse.as_sparse_or_tensor_variable(sp.eye(2, format="csr")))
    dense = sparse.as_sparse_or_tensor_variable(np.eye(2))
    assert not is_sparse_variable(dense)
    assert dense.type.ndim == 2


def test_variable_constructors_and_dtype_lists() -> None:
    for make, fmt in [
        (sparse.csr_matrix, "csr"),
        (sparse.csc_matrix, "csc"),
        (sparse.bsr_matrix, "bsr"),
    ]:
        v = make("v")
        assert v.type == SparseType(fmt, config.floatX)
        assert v.name == "v"
        assert make(dtype="int32").type == SparseType(fmt, "int32")
    assert sparse.matrix("csc", "m", "float32").type == SparseType("csc", "float32")
    assert sparse.csr_dmatrix == SparseType("csr", "float64")
    assert sparse.csc_fmatrix == SparseType("csc", "float32")
    assert sparse.bsr_fmatrix == SparseType("bsr", "float32")
    assert sparse.sparse_formats == ["csc", "csr"]
    assert set(sparse.float_dtypes) == {"float32", "float64"}
    assert set(sparse.complex_dtypes) == {"complex64", "complex128"}
    assert set(sparse.discrete_dtypes) == set(sparse.int_dtypes) | set(sparse.uint_dtypes)
    assert set(sparse.continuous_dtypes) | set(sparse.discrete_dtypes) == set(sparse.all_dtypes)
    assert is_sparse_variable(sparse.csr_matrix())
    assert not is_sparse_variable(T.dmatrix())
    assert not is_sparse_variable(sp.eye(2, format="csr"))


def test_printed_names_as_theano() -> None:
    x = sparse.csr_matrix("x")
    assert str(x) == repr(x) == "SparseVariable{csr,float64}"
    c = sparse.as_sparse_variable(sp.csr_matrix(np.eye(2)))
    assert str(c) == repr(c) == "SparseConstant{csr,float64,shape=(2, 2),nnz=2}"
    assert str(sparse.csm_properties) == "CSMProperties"
    assert str(sparse.CSR) == "CSM{format='csr'}"
    assert str(sparse.CSC) == "CSM{format='csc'}"
    assert str(sparse.dense_from_sparse) == "DenseFromSparse{structured_grad=True}"
    assert str(sparse.DenseFromSparse(structured=False)) == "DenseFromSparse{structured_grad=False}"
    assert str(sparse.csr_from_dense) == "SparseFromDense{csr}"
    assert str(sparse.csc_from_dense) == "SparseFromDense{csc}"
    assert str(sparse.fcast) == "Cast(float32)"
    assert str(sparse.mul_s_d) == "MulSD"
    assert str(sparse.CSMGrad()) == "CSMGrad"


# -- constants -------------------------------------------------------------------------------


def test_equal_sparse_constants_merge_in_a_compiled_graph() -> None:
    a = sp.csr_matrix(np.array([[0.0, 1.0], [2.0, 0.0]]))
    # the same matrix, with a duplicate entry and unsorted storage
    b = sp.csr_matrix((np.array([1.0, 0.5, 1.5]), np.array([1, 0, 0]), np.array([0, 1, 3])), (2, 2))
    assert not b.has_canonical_format
    c1, c2 = sparse.constant(a), sparse.constant(b)
    assert c1.signature() == c2.signature()
    other = sparse.constant(sp.csr_matrix(np.array([[0.0, 1.0], [3.0, 0.0]])))
    assert other.signature() != c1.signature()
    assert sparse.constant(a.astype("float32")).signature() != c1.signature()
    pytest.importorskip("opgraph_optimizers", reason="merging is opgraph-optimizers' rewrite")
    x = T.dmatrix("x")
    f = opgraph.function(
        [x], [sparse.mul_s_d(c1, x), sparse.mul_s_d(c2, x), sparse.mul_s_d(other, x)]
    )
    nodes = f.maker.fgraph.toposort()
    consts = {
        id(v) for n in nodes for v in n.inputs if isinstance(v, Constant) and is_sparse_variable(v)
    }
    assert len(consts) == 2  # c1 and c2 merged, ``other`` kept
    assert sum(isinstance(n.op, sparse.MulSD) for n in nodes) == 2
    xv = np.arange(4.0).reshape(2, 2)
    r1, r2, r3 = f(xv)
    np.testing.assert_array_equal(r1.toarray(), a.multiply(xv).toarray())
    np.testing.assert_array_equal(r2.toarray(), r1.toarray())
    np.testing.assert_array_equal(r3.toarray(), [[0.0, 1.0], [6.0, 0.0]])


def test_sparse_constant_needs_a_scipy_matrix() -> None:
    with pytest.raises(TypeError, match=r"needs a scipy\.sparse matrix"):
        sparse.constant(np.eye(2))


# -- CSMProperties and CSM -------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODE_IDS)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_csm_properties_gives_the_arrays(fmt: str, dtype: str, mode: str) -> None:
    x = sparse.matrix(fmt, "x", dtype)
    value = random_sparse(fmt, dtype)
    outs = sparse.csm_properties(x)
    data, indices, indptr, shape = compile_and_run([x], list(outs), [value], mode)
    np.testing.assert_array_equal(data, value.data)
    np.testing.assert_array_equal(indices, value.indices)
    np.testing.assert_array_equal(indptr, value.indptr)
    np.testing.assert_array_equal(shape, value.shape)
    assert data.dtype == np.dtype(dtype)
    assert [a.dtype for a in (indices, indptr, shape)] == [np.int32] * 3
    singles = [sparse.csm_data(x), sparse.csm_indices(x), sparse.csm_indptr(x), sparse.csm_shape(x)]
    for single, expected in zip(compile_and_run([x], singles, [value], mode), outs, strict=True):
        assert single.dtype == expected.type.dtype


@pytest.mark.parametrize("mode", MODE_IDS)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_csm_builds_the_matrix(fmt: str, dtype: str, mode: str) -> None:
    value = random_sparse(fmt, dtype)
    data = T.vector("data", dtype=dtype)
    indices, indptr, shape = T.ivector("indices"), T.ivector("indptr"), T.ivector("shape")
    out = sparse.CSM(fmt)(data, indices, indptr, shape)
    assert out.type == SparseType(fmt, dtype)
    args = [value.data, value.indices, value.indptr, np.array(value.shape, "int32")]
    result = compile_and_run([data, indices, indptr, shape], out, args, mode)
    assert_of_type(out, result)
    np.testing.assert_array_equal(result.toarray(), value.toarray())


@pytest.mark.parametrize("mode", MODE_IDS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_csm_properties_round_trip_and_the_tutorial_transpose(fmt: str, mode: str) -> None:
    x = sparse.matrix(fmt, "x", "int64")
    value = SparseType.format_cls[fmt](np.array([[0, 1, 1], [0, 0, 0], [1, 0, 0]], "int64"))
    same = sparse.CSM(fmt)(*sparse.csm_properties(x))
    other = "csr" if fmt == "csc" else "csc"
    swapped = sparse.CSM(other)(*sparse.csm_properties(x))
    r_same, r_swapped = compile_and_run([x], [same, swapped], [value], mode)
    assert_of_type(same, r_same)
    assert_of_type(swapped, r_swapped)
    np.testing.assert_array_equal(r_same.toarray(), value.toarray())
    # the same arrays read in the other format are the transpose
    np.testing.assert_array_equal(r_swapped.toarray(), value.toarray().T)


def test_csm_takes_constant_lists_and_int64_indices() -> None:
    data = T.dvector("data")
    out = sparse.CSR(data, [1, 0, 2], np.array([0, 1, 2, 3], "int64"), [3, 3])
    f = opgraph.function([data], out)
    np.testing.assert_array_equal(
        f(np.array([1.0, 2.0, 3.0])).toarray(), [[0, 1, 0], [2, 0, 0], [0, 0, 3]]
    )


@pytest.mark.parametrize("fmt", FORMATS)
def test_csm_and_csm_properties_infer_shape(fmt: str) -> None:
    x = sparse.matrix(fmt, "x", "float64")
    value = random_sparse(fmt, "float64", shape=(5, 3))
    # CSMProperties has no infer_shape (as in Theano): its lengths come from the value
    props = sparse.csm_properties(x)
    lengths = opgraph.function([x], [p.shape[0] for p in props])(value)
    assert [int(n) for n in lengths] == [value.nnz, value.nnz, 6 if fmt == "csr" else 4, 2]
    data = T.dvector()
    indices, indptr, shape = T.ivector(), T.ivector(), T.ivector()
    out = sparse.CSM(fmt)(data, indices, indptr, shape)
    args = [value.data, value.indices, value.indptr, np.array(value.shape, "int32")]
    check_infer_shape([data, indices, indptr, shape], out, args, sparse.CSM)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_csm_grad_with_respect_to_data(fmt: str, dtype: str) -> None:
    value = random_sparse(fmt, dtype, shape=(4, 3))

    def build(data: Variable) -> Variable:
        return sparse.dense_from_sparse(
            sparse.CSM(fmt)(data, value.indices, value.indptr, value.shape)
        )

    opgraph.tensor.gradcheck.verify_grad(build, [value.data])
    # the gradient of a matrix built from data is the output gradient read at its pattern
    data = T.vector(dtype=dtype)
    w = np.arange(12, dtype=dtype).reshape(4, 3)
    cost = (build(data) * w).sum()
    g = opgraph.function([data], opgraph.grad(cost, data))(value.data)
    major = np.repeat(np.arange(len(value.indptr) - 1), np.diff(value.indptr))
    rows, cols = (major, value.indices) if fmt == "csr" else (value.indices, major)
    expected = w[rows, cols]
    np.testing.assert_allclose(g, expected, **tol(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_csm_properties_grad(fmt: str, dtype: str) -> None:
    value = random_sparse(fmt, dtype, shape=(3, 3))
    verify_grad_sparse(lambda x: sparse.csm_data(x) * 2.0, [value], structured=True)
    x = sparse.matrix(fmt, dtype=dtype)
    g = opgraph.grad((sparse.csm_data(x) ** 2).sum(), x)
    assert g.type == x.type
    result = opgraph.function([x], g)(value)
    assert_of_type(g, result)
    np.testing.assert_allclose(result.toarray(), 2 * value.toarray(), **tol(dtype))


def test_csm_grad_sums_duplicate_gradient_entries() -> None:
    x_data, x_indices, x_indptr = np.array([1.0, 2.0]), np.array([0, 1]), np.array([0, 1, 2])
    shape = np.array([2, 2])
    # gradient pattern: row 0 holds column 0 twice, row 1 holds column 0 only
    g_data, g_indices, g_indptr = (
        np.array([3.0, 4.0, 5.0]),
        np.array([0, 0, 0]),
        np.array([0, 2, 3]),
    )
    args = [
        T.as_tensor_variable(a)
        for a in (x_data, x_indices, x_indptr, shape, g_data, g_indices, g_indptr)
    ]
    out = opgraph.function([], sparse.csm_grad(*args))()
    np.testing.assert_array_equal(out, [7.0, 0.0])


@pytest.mark.parametrize("fmt", FORMATS)
def test_csm_bad_inputs_give_clear_errors(fmt: str) -> None:
    data, indices, indptr, shape = T.dvector(), T.ivector(), T.ivector(), T.ivector()
    f = opgraph.function(
        [data, indices, indptr, shape], sparse.CSM(fmt)(data, indices, indptr, shape)
    )
    i32 = lambda *v: np.array(v, "int32")  # noqa: E731
    ok = (np.array([1.0, 2.0]), i32(0, 1), i32(0, 1, 2), i32(2, 2))
    assert f(*ok).nnz == 2
    with pytest.raises(
        ValueError,
        match=rf"CSM: indptr of a {fmt} matrix of shape \(2, 2\) must have 3 elements, got 2",
    ):
        f(ok[0], ok[1], i32(0, 2), ok[3])
    with pytest.raises(
        IndexError, match=r"CSM: an index in indices is out of range for shape \(2, 2\)"
    ):
        f(ok[0], i32(0, 2), ok[2], ok[3])
    with pytest.raises(IndexError, match="out of range"):
        f(ok[0], i32(-1, 0), ok[2], ok[3])
    with pytest.raises(
        ValueError,
        match=r"CSM: data \(shape \(3,\)\) and indices \(shape \(2,\)\) must have the same length",
    ):
        f(np.array([1.0, 2.0, 3.0]), ok[1], ok[2], ok[3])
    with pytest.raises(ValueError, match="shape must have 2 elements, got 3"):
        f(ok[0], ok[1], ok[2], i32(2, 2, 2))


def test_csm_make_node_refuses_bad_types() -> None:
    with pytest.raises(ValueError, match="format must be 'csr' or 'csc', got 'bsr'"):
        sparse.CSM("bsr")
    with pytest.raises(TypeError, match="CSM: data must be a vector"):
        sparse.CSR(T.dmatrix(), T.ivector(), T.ivector(), T.ivector())
    with pytest.raises(TypeError, match="CSM: indices must be a vector of integers"):
        sparse.CSR(T.dvector(), T.dvector(), T.ivector(), T.ivector())
    with pytest.raises(TypeError, match="CSM: indptr must hold integers"):
        sparse.CSR(T.dvector(), T.ivector(), [0.0, 1.0], T.ivector())
    with pytest.raises(ValueError, match="do not fit in int32"):
        sparse.CSR(T.dvector(), [2**40], T.ivector(), T.ivector())
    with pytest.raises(
        TypeError, match=r"CSMProperties: .* is a bsr matrix, expected one of csr, csc"
    ):
        sparse.csm_properties(sparse.bsr_matrix())


# -- casts -----------------------------------------------------------------------------------


CAST_PAIRS = [
    ("float32", "float64"),
    ("float64", "float32"),
    ("int32", "float64"),
    ("float64", "int64"),
    ("float32", "complex64"),
]


@pytest.mark.parametrize("mode", MODE_IDS)
@pytest.mark.parametrize(("source", "target"), CAST_PAIRS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_cast_matches_scipy(fmt: str, source: str, target: str, mode: str) -> None:
    x = sparse.matrix(fmt, "x", source)
    value = random_sparse(fmt, "float64")
    value = (value * 3).astype(source)
    out = sparse.cast(x, target)
    assert out.type == SparseType(fmt, target)
    result = compile_and_run([x], out, [value], mode)
    assert_of_type(out, result)
    np.testing.assert_array_equal(result.toarray(), value.astype(target).toarray())


def test_the_typed_casts() -> None:
    x = sparse.csr_matrix("x", dtype="float64")
    expected = {
        sparse.bcast: "int8",
        sparse.wcast: "int16",
        sparse.icast: "int32",
        sparse.lcast: "int64",
        sparse.fcast: "float32",
        sparse.dcast: "float64",
        sparse.ccast: "complex64",
        sparse.zcast: "complex128",
    }
    value = random_sparse("csr", "float64") * 10
    outs = [cast(x) for cast in expected]
    results = opgraph.function([x], outs)(value)
    for cast, out, result in zip(expected, outs, results, strict=True):
        assert cast.out_type == expected[cast]
        assert out.type == SparseType("csr", expected[cast])
        assert_of_type(out, result)
        np.testing.assert_array_equal(result.toarray(), value.astype(expected[cast]).toarray())
    assert sparse.Cast("float32") == sparse.fcast
    assert x.astype("float32").type == SparseType("csr", "float32")


@pytest.mark.parametrize("fmt", FORMATS)
def test_cast_grads(fmt: str) -> None:
    value = random_sparse(fmt, "float32", shape=(3, 3))
    verify_grad_sparse(sparse.dcast, [value])
    # a float32 result: differences of a step large enough for float32 rounding
    verify_grad_sparse(
        sparse.fcast, [value.astype("float64")], eps=1e-3, abs_tol=1e-3, rel_tol=1e-3
    )
    x = sparse.matrix(fmt, dtype="float32")
    g = opgraph.grad(sparse.dcast(x).toarray().sum(), x)
    assert g.type == x.type  # cast back to the input's dtype
    i = sparse.matrix(fmt, dtype="int32")
    g_int = opgraph.grad(sparse.dcast(i).toarray().sum(), i)
    assert g_int.type.dtype in sparse.float_dtypes
    # through an integer cast the gradient passes unchanged, as in Theano 1.0.5 (the oracle
    # gives ones on x's pattern for d(sum(dcast(icast(x))))/dx)
    g_to_int = opgraph.grad(sparse.dcast(sparse.icast(x)).toarray().sum(), x)
    through_int = opgraph.function([x], g_to_int)(value)
    assert_of_type(g_to_int, through_int)
    np.testing.assert_array_equal(through_int.toarray(), (value.toarray() != 0).astype("float32"))


def test_cast_of_complex_has_no_gradient_and_bsr_is_refused() -> None:
    x = sparse.csr_matrix(dtype="float64")
    with pytest.raises(TypeError, match="no gradient for complex"):
        opgraph.grad(sparse.dense_from_sparse(sparse.zcast(x)).real.sum(), x)
    with pytest.raises(TypeError, match=r"Cast\(float32\): .* is a bsr matrix"):
        sparse.fcast(sparse.bsr_matrix())


# -- dense <-> sparse ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODE_IDS)
@pytest.mark.parametrize("dtype", [*FLOATS, "int64"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_dense_from_sparse_and_back(fmt: str, dtype: str, mode: str) -> None:
    x = sparse.matrix(fmt, "x", dtype)
    value = (random_sparse(fmt, "float64") * 5).astype(dtype)
    dense = sparse.dense_from_sparse(x)
    back = sparse.SparseFromDense(fmt)(dense)
    toarray = x.toarray()
    r_dense, r_back, r_toarray = compile_and_run([x], [dense, back, toarray], [value], mode)
    assert r_dense.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(r_dense, value.toarray())
    np.testing.assert_array_equal(r_toarray, value.toarray())
    assert_of_type(back, r_back)
    np.testing.assert_array_equal(r_back.toarray(), value.toarray())


@pytest.mark.parametrize("mode", MODE_IDS)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_sparse_from_dense_of_a_matrix_vector_and_scalar(fmt: str, dtype: str, mode: str) -> None:
    m, v, s = T.matrix("m", dtype=dtype), T.vector("v", dtype=dtype), T.scalar("s", dtype=dtype)
    op = sparse.SparseFromDense(fmt)
    outs = [op(m), op(v), op(s)]
    mv = np.array([[0, 1.5, 0], [2, 0, 0]], dtype=dtype)
    vv = np.array([0, 3, 0, 4], dtype=dtype)
    sv = np.asarray(2.5, dtype=dtype)
    results = compile_and_run([m, v, s], outs, [mv, vv, sv], mode)
    for out, result, expected in zip(
        outs, results, [mv, vv[None, :], sv.reshape(1, 1)], strict=True
    ):
        assert out.type == SparseType(fmt, dtype)
        assert_of_type(out, result)
        np.testing.assert_array_equal(result.toarray(), expected)
        assert result.nnz == np.count_nonzero(expected)


def test_sparse_from_dense_refusals() -> None:
    with pytest.raises(
        TypeError, match=r"SparseFromDense\{csr\}: sparse matrices have 2 dimensions"
    ):
        sparse.csr_from_dense(T.tensor3())
    with pytest.raises(TypeError, match="already sparse"):
        sparse.csc_from_dense(sparse.csr_matrix())
    with pytest.raises(ValueError, match="format must be 'csr' or 'csc'"):
        sparse.SparseFromDense("coo")


def test_dense_from_sparse_of_bsr() -> None:
    x = sparse.bsr_matrix("x", dtype="float64")
    value = sp.bsr_matrix(np.arange(16.0).reshape(4, 4), blocksize=(2, 2))
    np.testing.assert_array_equal(opgraph.function([x], x.toarray())(value), value.toarray())


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_dense_from_sparse_structured_and_regular_gradients(fmt: str, dtype: str) -> None:
    value = random_sparse(fmt, dtype, shape=(3, 4))
    x = sparse.matrix(fmt, "x", dtype)
    w = np.arange(1, 13, dtype=dtype).reshape(3, 4)
    structured = opgraph.grad((sparse.DenseFromSparse(structured=True)(x) * w).sum(), x)
    regular = opgraph.grad((sparse.DenseFromSparse(structured=False)(x) * w).sum(), x)
    assert structured.type == regular.type == x.type
    g_s, g_r = opgraph.function([x], [structured, regular])(value)
    assert_of_type(structured, g_s)
    assert_of_type(regular, g_r)
    # structured: only where x stores a value; regular: everywhere
    np.testing.assert_allclose(g_s.toarray(), w * (value.toarray() != 0), **tol(dtype))
    np.testing.assert_allclose(g_r.toarray(), w, **tol(dtype))
    verify_grad_sparse(sparse.DenseFromSparse(structured=True), [value], structured=True)
    verify_grad_sparse(sparse.DenseFromSparse(structured=False), [value], structured=False)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_sparse_from_dense_gradients(fmt: str, dtype: str) -> None:
    op = sparse.SparseFromDense(fmt)
    rng = np.random.default_rng(1)
    opgraph.tensor.gradcheck.verify_grad(
        lambda m: sparse.dense_from_sparse(op(m)) * 3, [rng.uniform(size=(3, 2)).astype(dtype)]
    )
    opgraph.tensor.gradcheck.verify_grad(
        lambda v: sparse.dense_from_sparse(op(v)) * 3, [rng.uniform(size=4).astype(dtype)]
    )
    v = T.vector(dtype=dtype)
    g = opgraph.grad((sparse.DenseFromSparse(structured=False)(op(v)) * [[1, 2, 3]]).sum(), v)
    assert g.type.ndim == 1
    np.testing.assert_allclose(opgraph.function([v], g)(np.ones(3, dtype)), [1, 2, 3])


@pytest.mark.parametrize("fmt", FORMATS)
def test_dense_conversions_infer_shape(fmt: str) -> None:
    x = sparse.matrix(fmt, "x", "float64")
    value = random_sparse(fmt, "float64", shape=(2, 5))
    check_infer_shape([x], sparse.dense_from_sparse(x), [value], sparse.DenseFromSparse)
    m = T.dmatrix()
    check_infer_shape(
        [m], sparse.SparseFromDense(fmt)(m), [value.toarray()], sparse.SparseFromDense
    )


# -- MulSD -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODE_IDS)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_mul_s_d_with_a_matrix_and_a_scalar(fmt: str, dtype: str, mode: str) -> None:
    x = sparse.matrix(fmt, "x", dtype)
    y = T.matrix("y", dtype=dtype)
    s = T.scalar("s", dtype=dtype)
    value = random_sparse(fmt, dtype)
    yv = np.arange(12, dtype=dtype).reshape(3, 4) - 4
    sv = np.asarray(-1.5, dtype=dtype)
    by_matrix, by_scalar = sparse.mul_s_d(x, y), sparse.mul_s_d(x, s)
    r_m, r_s = compile_and_run([x, y, s], [by_matrix, by_scalar], [value, yv, sv], mode)
    assert_of_type(by_matrix, r_m)
    assert_of_type(by_scalar, r_s)
    np.testing.assert_allclose(r_m.toarray(), value.multiply(yv).toarray(), **tol(dtype))
    np.testing.assert_allclose(r_s.toarray(), (value * sv).toarray(), **tol(dtype))
    # the result keeps x's pattern (a zero of y stays stored)
    assert r_m.nnz == value.nnz


def test_mul_s_d_upcasts_and_refuses_bad_operands() -> None:
    x = sparse.csr_matrix("x", dtype="float32")
    y = T.dmatrix("y")
    out = sparse.mul_s_d(x, y)
    assert out.type == SparseType("csr", "float64")
    value = random_sparse("csr", "float32")
    result = opgraph.function([x, y], out)(value, np.full((3, 4), 2.0))
    assert_of_type(out, result)
    with pytest.raises(TypeError, match=r"MulSD: the dense operand must be a matrix or a scalar"):
        sparse.mul_s_d(x, T.dvector())
    with pytest.raises(TypeError, match="expected a sparse variable"):
        sparse.mul_s_d(y, x)
    with pytest.raises(TypeError, match=r"MulSD: .* is a bsr matrix"):
        sparse.mul_s_d(sparse.bsr_matrix(), y)
    f = opgraph.function([x, y], out)
    with pytest.raises(
        ValueError, match=r"MulSD: the sparse operand has shape \(3, 4\), the dense one \(4, 3\)"
    ):
        f(value, np.ones((4, 3)))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_mul_s_d_grads(fmt: str, dtype: str) -> None:
    value = random_sparse(fmt, dtype, shape=(3, 3))
    rng = np.random.default_rng(2)
    verify_grad_sparse(
        sparse.mul_s_d, [value, rng.uniform(size=(3, 3)).astype(dtype)], structured=True
    )
    verify_grad_sparse(sparse.mul_s_d, [value, np.asarray(1.7, dtype=dtype)], structured=True)


@pytest.mark.parametrize("fmt", FORMATS)
def test_mul_s_d_gradient_with_respect_to_a_scalar_is_a_scalar(fmt: str) -> None:
    """The trap other libraries shipped: d(sum(x * s))/ds must have s's shape."""
    x = sparse.matrix(fmt, "x", "float64")
    s = T.dscalar("s")
    w = np.arange(12.0).reshape(3, 4)
    cost = (sparse.dense_from_sparse(sparse.mul_s_d(x, s)) * w).sum()
    gs = opgraph.grad(cost, s)
    assert gs.type.ndim == 0
    value = random_sparse(fmt, "float64")
    result = opgraph.function([x, s], gs)(value, 2.0)
    assert np.shape(result) == ()
    np.testing.assert_allclose(result, (value.toarray() * w).sum())


@pytest.mark.parametrize("fmt", FORMATS)
def test_mul_s_d_infer_shape(fmt: str) -> None:
    x, y = sparse.matrix(fmt, "x", "float64"), T.dmatrix()
    value = random_sparse(fmt, "float64")
    check_infer_shape([x, y], sparse.mul_s_d(x, y), [value, np.ones((3, 4))], sparse.MulSD)


# -- sp_ones_like / sp_zeros_like ------------------------------------------------------------


@pytest.mark.parametrize("mode", MODE_IDS)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_sp_ones_like_and_zeros_like(fmt: str, dtype: str, mode: str) -> None:
    x = sparse.matrix(fmt, "x", dtype)
    value = random_sparse(fmt, dtype)
    ones, zeros = sparse.sp_ones_like(x), sparse.sp_zeros_like(x)
    zeros_i = sparse.sp_zeros_like(x, "int32")
    r_ones, r_zeros, r_zeros_i = compile_and_run([x], [ones, zeros, zeros_i], [value], mode)
    assert_of_type(ones, r_ones)
    assert_of_type(zeros, r_zeros)
    assert_of_type(zeros_i, r_zeros_i)
    np.testing.assert_array_equal(r_ones.toarray(), (value.toarray() != 0).astype(dtype))
    np.testing.assert_array_equal(r_ones.indices, value.indices)
    assert r_zeros.shape == value.shape
    assert r_zeros.nnz == 0
    assert r_zeros_i.dtype == np.int32
    assert x.zeros_like().type == x.type


def test_sp_ones_like_keeps_stored_zeros() -> None:
    x = sparse.csr_matrix("x")
    value = sp.csr_matrix((np.array([0.0, 2.0]), np.array([0, 1]), np.array([0, 1, 2])), (2, 2))
    out = opgraph.function([x], sparse.sp_ones_like(x))(value)
    np.testing.assert_array_equal(out.toarray(), np.eye(2))  # the stored zero is in the pattern


# -- the default mode compiles these graphs cleanly ------------------------------------------


def test_default_mode_compiles_basic_graphs_without_rewrite_warnings() -> None:
    """Shape rewrites must understand sparse variables (they have a shape, not a TensorType)."""
    x = sparse.csr_matrix("x")
    s = T.dscalar("s")
    graphs = {
        "sp_ones_like": sparse.sp_ones_like(x),
        "sp_zeros_like": sparse.sp_zeros_like(x),
        "grad wrt scalar": opgraph.grad(sparse.mul_s_d(x, s).toarray().sum(), s),
        "grad wrt x": opgraph.grad(x.toarray().sum(), x),
    }
    value = random_sparse("csr", "float64")
    for name, out in graphs.items():
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            f = opgraph.function([x, s], out, on_unused_input="ignore")
        assert f(value, 2.0) is not None, name
