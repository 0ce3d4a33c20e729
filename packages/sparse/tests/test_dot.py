"""The sparse products of ``opgraph_sparse.dot``: structured_dot, true_dot, sampling_dot, dot
and usmm, with their gradient Ops.

Every product is compared with ``scipy.sparse``/NumPy for csr and csc operands, float32 and
float64 (and mixed dtypes, upcast as Theano does), in the default mode (C linker), the Python
linker and DEBUG_MODE; output values are checked to be exactly of their declared Type.
Gradients are checked by finite differences (``verify_grad_sparse``, structured where the
Op's gradient is). Printed names are Theano 1.0.5's (taken from the oracle). Regression tests
cover the known traps: a 1-d dense operand of ``dot`` and its gradient, ``true_dot``'s
gradient (Theano issue #3615: a product entry that happens to be 0 must stay stored, or the
gradient through ``toarray`` vanishes there) and ``x.dot(y)`` agreeing with ``sparse.dot``.
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
from opgraph.scalar.type import upcast
from opgraph.tensor.autodiff import NullTypeGradError
from opgraph.testing.checks import check_infer_shape
from opgraph_sparse.basic import is_sparse_variable
from opgraph_sparse.dot import (
    Dot,
    SamplingDot,
    StructuredDot,
    StructuredDotGradCSC,
    StructuredDotGradCSR,
    TrueDot,
    Usmm,
    dot,
    sampling_dot,
    sdg_csc,
    sdg_csr,
    structured_dot,
    structured_dot_grad,
    true_dot,
    usmm,
)
from opgraph_sparse.testing import verify_grad_sparse
from opgraph_sparse.type import SparseType

FORMATS = ["csr", "csc"]
FLOATS = ["float32", "float64"]
#: (sparse dtype, dense dtype) pairs: same dtypes and the mixed ones Theano upcasts.
DTYPE_PAIRS = [
    ("float32", "float32"),
    ("float64", "float64"),
    ("float32", "float64"),
    ("float64", "float32"),
    ("int32", "float32"),
    ("int64", "int64"),
]
MODES = {"default": None, "py": Mode(linker="py"), "debug": "DEBUG_MODE"}


@pytest.fixture(autouse=True)
def _quiet() -> Any:
    """Rewrite warnings (about other packages' rewrites) are not what these tests check."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def random_sparse(
    fmt: str, dtype: str, shape: tuple[int, int], density: float = 0.5, seed: int = 0
) -> Any:
    """A ``fmt`` matrix of ``dtype`` with about ``density`` of its entries stored (ints for
    integer dtypes), with at least one empty row so that patterns matter."""
    r = rng(seed)
    dense = r.standard_normal(shape) * (r.random(shape) < density)
    if np.dtype(dtype).kind in "iu":
        dense = np.round(dense * 3)
    dense[0] = 0
    dense[-1, -1] = 1.5 if np.dtype(dtype).kind == "f" else 2
    return SparseType.format_cls[fmt](dense.astype(dtype))


def random_dense(shape: tuple[int, ...], dtype: str, seed: int = 1) -> np.ndarray:
    """A C-ordered dense array of ``dtype`` (small integers for integer dtypes)."""
    values = rng(seed).standard_normal(shape)
    if np.dtype(dtype).kind in "iu":
        values = np.round(values * 3)
    return np.ascontiguousarray(values.astype(dtype))


def sym(value: Any, name: str) -> Any:
    """A symbolic input of ``value``'s type (sparse or dense)."""
    if sp.issparse(value):
        return sparse.matrix(value.format, name, dtype=str(value.dtype))
    return T.TensorType(str(value.dtype), (False,) * value.ndim)(name)


def tol_for(dtype: str) -> dict[str, float]:
    """Tolerances for results of ``dtype`` compared with a float64 reference."""
    return {"rtol": 1e-5, "atol": 1e-5} if dtype in ("float32", "int32") else {}


def assert_allclose(
    actual: Any,
    expected: Any,
    dtype: str | None = None,
    rtol: float | None = None,
    atol: float | None = None,
) -> None:
    """Equal values (same shape) up to tolerances suited to the actual value's dtype."""
    actual = np.asarray(actual)
    dtype = dtype or str(actual.dtype)
    if rtol is None:
        rtol, atol = (1e-5, 1e-5) if dtype in ("float32", "complex64") else (1e-10, 1e-12)
    np.testing.assert_allclose(actual, np.asarray(expected), rtol=rtol, atol=atol or 0.0)


def run(inputs: list[Any], output: Any, values: list[Any], mode: Any = None) -> Any:
    """Compile and run; the value must be exactly of the output's Type."""
    f = opgraph.function(inputs, output, mode=mode)
    res = f(*values)
    output.type.filter(res, strict=True)
    return res


def todense(v: Any) -> np.ndarray:
    return v.toarray() if sp.issparse(v) else np.asarray(v)


def grad_of(cost: Any, wrt: Any, inputs: list[Any], values: list[Any]) -> Any:
    g = opgraph.grad(cost, wrt)
    return opgraph.function(inputs, g, mode=Mode(linker="py"))(*values)


# -- StructuredDot ---------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("sdtype", "ddtype"), DTYPE_PAIRS)
def test_structured_dot_matches_scipy(fmt: str, sdtype: str, ddtype: str) -> None:
    a = random_sparse(fmt, sdtype, (5, 4))
    b = random_dense((4, 3), ddtype)
    x, y = sym(a, "x"), sym(b, "y")
    out = structured_dot(x, y)
    assert isinstance(out.owner.op, StructuredDot)
    assert out.type == T.TensorType(upcast(sdtype, ddtype), (False, False))
    res = run([x, y], out, [a, b])
    expected = (a.astype("float64") @ b.astype("float64")).astype(out.type.dtype)
    assert_allclose(res, expected)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_structured_dot_in_every_mode(fmt: str, mode: str) -> None:
    a = random_sparse(fmt, "float64", (4, 6), seed=3)
    b = random_dense((6, 2), "float64")
    x, y = sym(a, "x"), sym(b, "y")
    assert_allclose(run([x, y], structured_dot(x, y), [a, b], MODES[mode]), a @ b)
    # dense on the left: (y.T . x.T).T
    c = random_dense((3, 4), "float64", seed=4)
    z = sym(c, "z")
    assert_allclose(run([z, x], structured_dot(z, x), [c, a], MODES[mode]), c @ a)


def test_structured_dot_broadcastable_column_and_printing() -> None:
    x = sparse.csr_matrix("x")
    col = T.TensorType("float64", (False, True))("col")
    out = structured_dot(x, col)
    assert out.type.broadcastable == (False, True)
    assert str(out.owner.op) == "StructuredDot"
    assert str(sdg_csr) == "StructuredDotGradCSR"
    assert str(sdg_csc) == "StructuredDotGradCSC"
    assert isinstance(sdg_csr, StructuredDotGradCSR)
    assert isinstance(sdg_csc, StructuredDotGradCSC)
    # ``__dot__`` is the structured product (``opgraph.dot`` dispatches to it), as Theano.
    y = T.matrix("y")
    assert isinstance(x.__dot__(y).owner.op, StructuredDot)
    assert isinstance(opgraph.dot(x, y).owner.op, StructuredDot)


@pytest.mark.parametrize(("fa", "fb"), [("csr", "csr"), ("csr", "csc"), ("csc", "csr")])
def test_structured_dot_of_two_sparse_keeps_a_format_and_structural_zeros(fa: str, fb: str) -> None:
    a = SparseType.format_cls[fa](np.array([[1.0, 1.0, 0.0], [0.0, 2.0, 0.0]]))
    b = SparseType.format_cls[fb](np.array([[1.0, 0.0], [-1.0, 3.0], [0.0, 5.0]], "float32"))
    x, y = sym(a, "x"), sym(b, "y")
    out = structured_dot(x, y)
    assert out.type == SparseType(fa, "float64")
    for mode in MODES.values():
        res = run([x, y], out, [a, b], mode)
        assert_allclose(res.toarray(), (a @ b).toarray())
        # (0, 0) is 1*1 + 1*(-1) = 0: scipy drops it, the product's pattern keeps it.
        assert res.nnz == 4


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_structured_dot_gradient(fmt: str, dtype: str) -> None:
    a = random_sparse(fmt, dtype, (4, 5))
    b = random_dense((5, 3), dtype)
    verify_grad_sparse(structured_dot, [a, b], structured=True)
    # dense on the left
    c = random_dense((2, 4), dtype)
    verify_grad_sparse(structured_dot, [c, a], structured=True)


@pytest.mark.parametrize("fmt", FORMATS)
def test_structured_dot_gradient_is_structured(fmt: str) -> None:
    a = random_sparse(fmt, "float64", (4, 5))
    b = random_dense((5, 3), "float64")
    w = random_dense((4, 3), "float64", seed=7)
    x, y = sym(a, "x"), sym(b, "y")
    cost = (structured_dot(x, y) * w).sum()
    ga = grad_of(cost, x, [x, y], [a, b])
    assert ga.format == fmt and ga.dtype == a.dtype
    np.testing.assert_array_equal(ga.indices, a.indices)
    np.testing.assert_array_equal(ga.indptr, a.indptr)
    full = w @ b.T  # the dense gradient; only a's stored entries get theirs
    assert_allclose(ga.toarray(), full * (a.toarray() != 0))
    gb = grad_of(cost, y, [x, y], [a, b])
    assert_allclose(gb, a.T @ w)


def test_structured_dot_gradient_of_mixed_dtypes_has_input_dtypes() -> None:
    a = random_sparse("csr", "float32", (3, 4))
    b = random_dense((4, 2), "float64")
    x, y = sym(a, "x"), sym(b, "y")
    cost = structured_dot(x, y).sum()
    gx, gy = opgraph.grad(cost, [x, y])
    assert gx.type == x.type
    assert gy.type.dtype == "float64"
    verify_grad_sparse(structured_dot, [a.astype("float64"), b], structured=True)


@pytest.mark.parametrize(("fa", "fb"), [("csr", "csr"), ("csc", "csr")])
def test_structured_dot_of_two_sparse_gradient(fa: str, fb: str) -> None:
    a = random_sparse(fa, "float64", (3, 4))
    b = random_sparse(fb, "float64", (4, 3), seed=5)
    verify_grad_sparse(structured_dot, [a, b], structured=True)


@pytest.mark.parametrize("fmt", FORMATS)
def test_structured_dot_infer_shape(fmt: str) -> None:
    a = random_sparse(fmt, "float64", (4, 5))
    b = random_dense((5, 3), "float64")
    x, y = sym(a, "x"), sym(b, "y")
    check_infer_shape([x, y], structured_dot(x, y), [a, b], StructuredDot)
    bs = random_sparse("csr", "float64", (5, 2))
    z = sym(bs, "z")
    check_infer_shape([x, z], structured_dot(x, z), [a, bs], StructuredDot)


def test_structured_dot_bad_inputs() -> None:
    x = sparse.csr_matrix("x")
    y = T.matrix("y")
    with pytest.raises(TypeError, match=r"at least one sparse"):
        structured_dot(y, y)
    with pytest.raises(TypeError, match=r"StructuredDot.*must be a matrix"):
        structured_dot(x, T.vector("v"))
    with pytest.raises(TypeError, match=r"StructuredDot.*bsr"):
        structured_dot(sparse.bsr_matrix("b"), y)
    with pytest.raises(TypeError, match=r"expected a sparse variable"):
        StructuredDot()(y, y)
    f = opgraph.function([x, y], structured_dot(x, y), mode=Mode(linker="py"))
    a = random_sparse("csr", "float64", (3, 4))
    with pytest.raises(ValueError, match=r"StructuredDot.*\(3, 4\).*\(5, 2\)"):
        f(a, np.ones((5, 2)))
    # a dense value where a sparse one is declared is refused by the input's filter (Theano
    # converted it silently), with the way to convert it
    with pytest.raises(TypeError, match=r"dense values are not converted implicitly"):
        f(a.toarray(), np.ones((4, 2)))


# -- the structured gradient Ops -------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("bdtype", "gdtype"), [("float32", "float32"), ("float64", "float32")])
@pytest.mark.parametrize("mode", list(MODES))
def test_structured_dot_grad_ops(fmt: str, bdtype: str, gdtype: str, mode: str) -> None:
    a = random_sparse(fmt, "float64", (4, 5))
    b = random_dense((5, 3), bdtype)
    g = random_dense((4, 3), gdtype, seed=2)
    op = sdg_csr if fmt == "csr" else sdg_csc
    ind, ptr = T.ivector("ind"), T.ivector("ptr")
    bv, gv = sym(b, "b"), sym(g, "g")
    out = op(ind, ptr, bv, gv)
    assert out.type == T.TensorType(gdtype, (False,))
    res = run([ind, ptr, bv, gv], out, [a.indices, a.indptr, b, g], MODES[mode])
    coo = a.tocoo()  # same storage order as a for csr; rebuild it for csc
    rows = coo.row if fmt == "csr" else a.indices
    cols = coo.col if fmt == "csr" else np.repeat(np.arange(5), np.diff(a.indptr))
    expected = np.einsum("ij,ij->i", g[rows].astype("float64"), b[cols].astype("float64"))
    assert_allclose(res, expected.astype(gdtype))
    check_infer_shape([ind, ptr, bv, gv], out, [a.indices, a.indptr, b, g], type(op))


@pytest.mark.parametrize("fmt", FORMATS)
def test_structured_dot_grad_function_builds_a_matrix_of_a_pattern(fmt: str) -> None:
    a = random_sparse(fmt, "float64", (4, 5))
    b = random_dense((5, 3), "float64")
    g = random_dense((4, 3), "float64", seed=2)
    x, bv, gv = sym(a, "x"), sym(b, "b"), sym(g, "g")
    out = structured_dot_grad(x, bv, gv)
    assert out.type == x.type
    res = run([x, bv, gv], out, [a, b, g])
    np.testing.assert_array_equal(res.indices, a.indices)
    assert_allclose(res.toarray(), (g @ b.T) * (a.toarray() != 0))


@pytest.mark.parametrize("op", [sdg_csr, sdg_csc])
def test_structured_dot_grad_ops_bad_inputs(op: Any) -> None:
    ind, ptr = T.ivector("ind"), T.ivector("ptr")
    b, g = T.matrix("b"), T.matrix("g")
    name = type(op).__name__
    with pytest.raises(TypeError, match=rf"{name}.*a_indices"):
        op(T.vector("f"), ptr, b, g)
    with pytest.raises(TypeError, match=rf"{name}.*dense"):
        op(ind, ptr, sparse.csr_matrix("s"), g)
    with pytest.raises(TypeError, match=rf"{name}.*input 3"):
        op(ind, ptr, b, T.vector("v"))
    f = opgraph.function([ind, ptr, b, g], op(ind, ptr, b, g), mode=Mode(linker="py"))
    a = random_sparse(op.format, "float64", (4, 5))
    bv, gv = np.ones((5, 3)), np.ones((4, 3))
    with pytest.raises(ValueError, match=r"same number of columns"):
        f(a.indices, a.indptr, bv, np.ones((4, 2)))
    with pytest.raises(ValueError, match=r"a_indptr has"):
        f(a.indices, a.indptr[:-1], bv, gv)
    bad = a.indices.copy()
    bad[0] = 99
    with pytest.raises(IndexError, match=r"out of range"):
        f(bad, a.indptr, bv, gv)


# -- TrueDot ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode", list(MODES))
def test_true_dot_sparse_times_dense(fmt: str, dtype: str, mode: str) -> None:
    a = random_sparse(fmt, dtype, (4, 5))
    b = random_dense((5, 3), dtype)
    x, y = sym(a, "x"), sym(b, "y")
    out = true_dot(x, y)
    assert str(out.owner.op) == "TrueDot"
    assert out.type == SparseType(fmt, dtype)
    res = run([x, y], out, [a, b], MODES[mode])
    assert_allclose(res.toarray(), a.toarray() @ b, **tol_for(dtype))


@pytest.mark.parametrize(("fx", "fy"), [("csr", "csr"), ("csr", "csc"), ("csc", "csc")])
@pytest.mark.parametrize("dtype", FLOATS)
def test_true_dot_sparse_times_sparse(fx: str, fy: str, dtype: str) -> None:
    a = random_sparse(fx, dtype, (4, 5))
    b = random_sparse(fy, dtype, (5, 3), seed=9)
    x, y = sym(a, "x"), sym(b, "y")
    for mode in MODES.values():
        res = run([x, y], true_dot(x, y), [a, b], mode)
        assert res.format == fx
        assert_allclose(res.toarray(), (a @ b).toarray(), **tol_for(dtype))


@pytest.mark.parametrize("fmt", FORMATS)
def test_true_dot_dense_on_the_left(fmt: str) -> None:
    a = random_sparse(fmt, "float64", (4, 5))
    c = random_dense((2, 4), "float64")
    x, z = sym(a, "x"), sym(c, "z")
    out = true_dot(z, x)
    assert is_sparse_variable(out)
    res = run([z, x], out, [c, a])
    assert_allclose(res.toarray(), c @ a)


@pytest.mark.parametrize("fmt", FORMATS)
def test_true_dot_with_a_vector_is_a_column(fmt: str) -> None:
    a = random_sparse(fmt, "float64", (4, 5))
    v = random_dense((5,), "float64")
    x, y = sym(a, "x"), sym(v, "v")
    out = true_dot(x, y)
    res = run([x, y], out, [a, v])
    assert res.shape == (4, 1)
    assert_allclose(res.toarray()[:, 0], a @ v)
    check_infer_shape([x, y], out, [a, v], TrueDot)


def test_true_dot_keeps_entries_that_are_zero_by_value() -> None:
    # Theano #3615: x . W with W all zeros is 0 everywhere; scipy stores nothing, so the
    # structured gradient of toarray() was 0 and W never learned. Rows of x with a stored
    # value must give stored (zero) entries.
    a = sp.csr_matrix(([1.0, 1.0], [3, 2], [0, 1, 2]), shape=(2, 10))
    x = sparse.csr_matrix("x")
    emb = opgraph.shared(np.zeros((10, 1)), name="emb")
    w = opgraph.shared(np.array([[0.2], [0.3]]), name="w")
    out = true_dot(x, emb, grad_preserves_dense=False)
    res = opgraph.function([x], out)(a)
    assert res.nnz == 2 and not res.data.any()
    cost = (out.toarray()[:, 0] * w[:, 0]).sum()
    g_true = opgraph.function([x], opgraph.grad(cost, emb))(a)
    # structured_dot's gradient (dense output) is the reference
    cost_s = (structured_dot(x, emb)[:, 0] * w[:, 0]).sum()
    g_struct = opgraph.function([x], opgraph.grad(cost_s, emb))(a)
    expected = np.zeros((10, 1))
    expected[3, 0], expected[2, 0] = 0.2, 0.3
    assert_allclose(g_struct, expected)
    assert_allclose(g_true, expected)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_true_dot_gradient_sparse_dense(fmt: str, dtype: str) -> None:
    a = random_sparse(fmt, dtype, (3, 4))
    b = random_dense((4, 2), dtype)
    verify_grad_sparse(true_dot, [a, b], structured=False)
    verify_grad_sparse(true_dot, [random_dense((2, 3), dtype), a], structured=False)


@pytest.mark.parametrize("fmt", FORMATS)
def test_true_dot_gradient_with_a_vector(fmt: str) -> None:
    a = random_sparse(fmt, "float64", (3, 4))
    v = random_dense((4,), "float64")
    verify_grad_sparse(true_dot, [a, v], structured=False)
    x, y = sym(a, "x"), sym(v, "v")
    w = random_dense((3,), "float64", seed=3)
    cost = (true_dot(x, y).toarray()[:, 0] * w).sum()
    gv = grad_of(cost, y, [x, y], [a, v])
    assert gv.shape == (4,)
    assert_allclose(gv, a.T @ w)


@pytest.mark.parametrize(("fx", "fy"), [("csr", "csr"), ("csr", "csc"), ("csc", "csr")])
def test_true_dot_gradient_sparse_sparse_has_each_input_format(fx: str, fy: str) -> None:
    a = random_sparse(fx, "float64", (3, 4))
    b = random_sparse(fy, "float64", (4, 3), seed=5)
    verify_grad_sparse(true_dot, [a, b], structured=False)
    x, y = sym(a, "x"), sym(b, "y")
    gx, gy = opgraph.grad(sparse.dense_from_sparse(true_dot(x, y)).sum(), [x, y])
    assert gx.type == x.type and gy.type == y.type


@pytest.mark.parametrize("preserve", [True, False])
def test_true_dot_gradient_of_a_dense_operand_is_dense(preserve: bool) -> None:
    # A dense variable's gradient must be dense in opgraph: the flag cannot make it sparse.
    x, y = sparse.csr_matrix("x"), T.matrix("y")
    g = opgraph.grad(sparse.dense_from_sparse(true_dot(x, y, preserve)).sum(), y)
    assert g.type == y.type
    a = random_sparse("csr", "float64", (3, 4))
    b = random_dense((4, 2), "float64")
    res = opgraph.function([x, y], g)(a, b)
    assert_allclose(res, a.T @ np.ones((3, 2)))


def test_true_dot_bad_inputs() -> None:
    x, y = sparse.csr_matrix("x", dtype="float64"), T.matrix("y", dtype="float64")
    with pytest.raises(TypeError, match=r"TrueDot.*same dtype.*float64.*float32"):
        true_dot(x, T.matrix("f", dtype="float32"))
    with pytest.raises(TypeError, match=r"at least one sparse"):
        true_dot(y, y)
    with pytest.raises(TypeError, match=r"TrueDot.*input 0 must be sparse"):
        TrueDot()(y, x)
    with pytest.raises(TypeError, match=r"TrueDot.*dimension"):
        true_dot(x, T.tensor3("t"))
    f = opgraph.function([x, y], true_dot(x, y), mode=Mode(linker="py"))
    with pytest.raises(ValueError, match=r"TrueDot.*\(3, 4\).*\(5, 2\)"):
        f(random_sparse("csr", "float64", (3, 4)), np.ones((5, 2)))


# -- SamplingDot -----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    ("ddtype", "pdtype"), [("float32", "float32"), ("float64", "float64"), ("float64", "float32")]
)
@pytest.mark.parametrize("mode", list(MODES))
def test_sampling_dot(fmt: str, ddtype: str, pdtype: str, mode: str) -> None:
    xv = random_dense((4, 3), ddtype)
    yv = random_dense((5, 3), ddtype, seed=2)
    p = random_sparse(fmt, pdtype, (4, 5), seed=4)
    p.data[0] = 0.0  # a stored zero stays stored
    x, y, pv = sym(xv, "x"), sym(yv, "y"), sym(p, "p")
    out = sampling_dot(x, y, pv)
    assert out.type == pv.type  # p's type, as in Theano
    res = run([x, y, pv], out, [xv, yv, p], MODES[mode])
    np.testing.assert_array_equal(res.indices, p.indices)
    np.testing.assert_array_equal(res.indptr, p.indptr)
    expected = p.toarray() * (xv.astype("float64") @ yv.T.astype("float64"))
    assert_allclose(res.toarray(), expected.astype(pdtype))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_sampling_dot_gradient(fmt: str, dtype: str) -> None:
    p = random_sparse(fmt, dtype, (4, 5), seed=4)
    xv = random_dense((4, 3), dtype)
    yv = random_dense((5, 3), dtype, seed=2)

    def fn(x: Any, y: Any) -> Any:
        return sampling_dot(x, y, p)

    verify_grad_sparse(fn, [xv, yv], structured=False)


def test_sampling_dot_infer_shape_printing_and_bad_inputs() -> None:
    x, y, p = T.matrix("x"), T.matrix("y"), sparse.csr_matrix("p")
    out = sampling_dot(x, y, p)
    assert str(out.owner.op) == "SamplingDot"
    vals = [random_dense((4, 3), "float64"), random_dense((5, 3), "float64")]
    pv = random_sparse("csr", "float64", (4, 5))
    check_infer_shape([x, y, p], out, [*vals, pv], SamplingDot)
    with pytest.raises(TypeError, match=r"SamplingDot.*input 0.*sparse"):
        sampling_dot(p, y, p)
    with pytest.raises(TypeError, match=r"expected a sparse variable"):
        sampling_dot(x, y, x)
    with pytest.raises(TypeError, match=r"SamplingDot.*input 1.*dimension"):
        sampling_dot(x, T.vector("v"), p)
    with pytest.raises(NullTypeGradError, match=r"SamplingDot.*input 2"):
        opgraph.grad(sparse.dense_from_sparse(out).sum(), p)
    f = opgraph.function([x, y, p], out, mode=Mode(linker="py"))
    with pytest.raises(ValueError, match=r"same number of columns"):
        f(vals[0], np.ones((5, 2)), pv)
    with pytest.raises(ValueError, match=r"p has shape \(4, 5\)"):
        f(vals[0], np.ones((6, 3)), pv)


# -- Dot -------------------------------------------------------------------------------------

#: (left, right) operand kinds of sparse.dot: "s" sparse, "m" dense matrix, "v" dense vector.
DOT_KINDS = [("s", "m"), ("m", "s"), ("s", "v"), ("v", "s"), ("s", "s")]


def dot_operands(kinds: tuple[str, str], fmt: str, dtypes: tuple[str, str]) -> list[Any]:
    """Values of ``kinds`` for a (3, 4) . (4, 2) product (vectors of the inner length)."""
    shapes = [(3, 4), (4, 2)]
    values = []
    for k, (kind, shape, dtype) in enumerate(zip(kinds, shapes, dtypes, strict=True)):
        if kind == "s":
            values.append(random_sparse(fmt, dtype, shape, seed=k))
        elif kind == "m":
            values.append(random_dense(shape, dtype, seed=k))
        else:
            values.append(random_dense((4,), dtype, seed=k))
    return values


def reference_dot(a: Any, b: Any) -> np.ndarray:
    return np.dot(todense(a).astype("float64"), todense(b).astype("float64"))


@pytest.mark.parametrize("kinds", DOT_KINDS, ids=lambda k: "".join(k))
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtypes", DTYPE_PAIRS[:5], ids="-".join)
def test_dot_matches_numpy(kinds: tuple[str, str], fmt: str, dtypes: tuple[str, str]) -> None:
    a, b = dot_operands(kinds, fmt, dtypes)
    x, y = sym(a, "x"), sym(b, "y")
    out = dot(x, y)
    assert str(out.owner.op) == "SparseDot"
    assert out.type.dtype == upcast(*dtypes)
    assert out.type.ndim == (1 if "v" in kinds else 2)
    res = run([x, y], out, [a, b])
    assert_allclose(res, reference_dot(a, b).astype(out.type.dtype), **tol_for(out.type.dtype))


@pytest.mark.parametrize("kinds", DOT_KINDS, ids=lambda k: "".join(k))
@pytest.mark.parametrize("mode", ["py", "debug"])
def test_dot_in_python_and_debug_modes(kinds: tuple[str, str], mode: str) -> None:
    for fmt in FORMATS:
        a, b = dot_operands(kinds, fmt, ("float64", "float64"))
        x, y = sym(a, "x"), sym(b, "y")
        assert_allclose(run([x, y], dot(x, y), [a, b], MODES[mode]), reference_dot(a, b))


def test_dot_broadcastable_pattern_follows_the_dense_operand() -> None:
    x = sparse.csc_matrix("x")
    row = T.TensorType("float64", (True, False))("row")
    col = T.TensorType("float64", (False, True))("col")
    assert dot(x, col).type.broadcastable == (False, True)
    assert dot(row, x).type.broadcastable == (True, False)
    assert dot(x, T.vector("v")).type.broadcastable == (False,)


@pytest.mark.parametrize("kinds", DOT_KINDS, ids=lambda k: "".join(k))
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_dot_gradient(kinds: tuple[str, str], fmt: str, dtype: str) -> None:
    a, b = dot_operands(kinds, fmt, (dtype, dtype))
    verify_grad_sparse(dot, [a, b], structured=False)


@pytest.mark.parametrize("kinds", [("s", "v"), ("v", "s")], ids=lambda k: "".join(k))
@pytest.mark.parametrize("fmt", FORMATS)
def test_dot_gradient_with_a_vector_operand(kinds: tuple[str, str], fmt: str) -> None:
    # The gradient of the sparse operand is an outer product (not a dot of two vectors,
    # which Theano 1.0.5 built and failed on), the vector's is a vector.
    a, b = dot_operands(kinds, fmt, ("float64", "float64"))
    x, y = sym(a, "x"), sym(b, "y")
    out = dot(x, y)
    w = random_dense((todense(a).shape[0] if kinds[0] == "s" else 2,), "float64", seed=8)
    cost = (out * w).sum()
    gx, gy = opgraph.grad(cost, [x, y])
    assert gx.type == x.type and gy.type == y.type
    f = opgraph.function([x, y], [gx, gy])
    vx, vy = f(a, b)
    if kinds[0] == "s":
        assert_allclose(vx.toarray(), np.outer(w, b))
        assert_allclose(vy, a.T @ w)
    else:
        assert_allclose(vx, b @ w)
        assert_allclose(vy.toarray(), np.outer(a, w))


@pytest.mark.parametrize("fmt", FORMATS)
def test_dot_gradient_of_a_sparse_operand_is_regular_and_sparse(fmt: str) -> None:
    a = random_sparse(fmt, "float32", (3, 4))
    b = random_dense((4, 2), "float64")
    x, y = sym(a, "x"), sym(b, "y")
    gx = opgraph.grad(dot(x, y).sum(), x)
    assert gx.type == x.type  # sparse, of x's format and dtype
    res = opgraph.function([x, y], gx)(a, b)
    # regular: every entry gets its gradient, stored or not
    assert_allclose(res.toarray(), (np.ones((3, 2)) @ b.T).astype("float32"))


def test_dot_through_csr_from_dense() -> None:
    # Theano 1.0.5 crashed here (a dense gradient reached SparseFromDense.grad).
    xd, y = T.matrix("xd"), T.matrix("y")
    g = opgraph.grad(dot(sparse.csr_from_dense(xd), y).sum(), xd)
    b = random_dense((4, 2), "float64")
    res = opgraph.function([xd, y], g)(random_dense((3, 4), "float64"), b)
    assert_allclose(res, np.ones((3, 2)) @ b.T)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("other", ["m", "v", "s"])
def test_variable_dot_method_is_sparse_dot(fmt: str, other: str) -> None:
    a, b = dot_operands(("s", other), fmt, ("float64", "float64"))
    x, y = sym(a, "x"), sym(b, "y")
    via_method = x.dot(y)
    assert isinstance(via_method.owner.op, Dot)
    assert via_method.type == dot(x, y).type
    f = opgraph.function([x, y], [via_method, dot(x, y)])
    m, d = f(a, b)
    assert_allclose(m, d)
    assert_allclose(m, reference_dot(a, b))


@pytest.mark.parametrize("kinds", DOT_KINDS, ids=lambda k: "".join(k))
def test_dot_infer_shape(kinds: tuple[str, str]) -> None:
    a, b = dot_operands(kinds, "csr", ("float64", "float64"))
    x, y = sym(a, "x"), sym(b, "y")
    check_infer_shape([x, y], dot(x, y), [a, b], Dot)


def test_dot_bad_inputs() -> None:
    x, m = sparse.csr_matrix("x"), T.matrix("m")
    with pytest.raises(TypeError, match=r"at least one sparse"):
        dot(m, m)
    with pytest.raises(TypeError, match=r"SparseDot.*at least one operand must be sparse"):
        Dot()(m, m)
    with pytest.raises(TypeError, match=r"SparseDot.*input 1.*1 or 2 dimension\(s\).*got 3"):
        dot(x, T.tensor3("t"))
    with pytest.raises(TypeError, match=r"SparseDot.*input 0.*got 0"):
        dot(T.scalar("s"), x)
    with pytest.raises(TypeError, match=r"SparseDot.*bsr"):
        dot(sparse.bsr_matrix("b"), m)
    f = opgraph.function([x, m], dot(x, m), mode=Mode(linker="py"))
    a = random_sparse("csr", "float64", (3, 4))
    with pytest.raises(ValueError, match=r"SparseDot.*\(3, 4\).*\(5, 2\).*4 and 5"):
        f(a, np.ones((5, 2)))
    v = T.vector("v")
    g = opgraph.function([v, x], dot(v, x), mode=Mode(linker="py"))
    with pytest.raises(ValueError, match=r"SparseDot.*\(5,\).*\(3, 4\)"):
        g(np.ones(5), a)
    for mode in (None, "DEBUG_MODE"):
        h = opgraph.function([x, m], dot(x, m), mode=mode)
        with pytest.raises(ValueError, match=r"\(3, 4\).*\(5, 2\)"):
            h(a, np.ones((5, 2)))


# -- Usmm ------------------------------------------------------------------------------------


@pytest.mark.parametrize("sparse_side", ["x", "y"])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode", list(MODES))
def test_usmm(sparse_side: str, fmt: str, dtype: str, mode: str) -> None:
    if sparse_side == "x":
        a, b = random_sparse(fmt, dtype, (3, 4)), random_dense((4, 2), dtype)
    else:
        a, b = random_dense((3, 4), dtype), random_sparse(fmt, dtype, (4, 2))
    zv = random_dense((3, 2), dtype, seed=6)
    alpha_v = np.asarray(1.5, dtype=dtype)
    alpha, x, y, z = sym(alpha_v, "alpha"), sym(a, "x"), sym(b, "y"), sym(zv, "z")
    out = usmm(alpha, x, y, z)
    assert str(out.owner.op) == "Usmm{no_inplace}"
    assert out.type == T.TensorType(dtype, (False, False))
    res = run([alpha, x, y, z], out, [alpha_v, a, b, zv], MODES[mode])
    assert_allclose(res, (zv + 1.5 * reference_dot(a, b)).astype(dtype), **tol_for(dtype))
    check_infer_shape([alpha, x, y, z], out, [alpha_v, a, b, zv], Usmm)


def test_usmm_mixed_dtypes_and_a_one_element_alpha() -> None:
    a = random_sparse("csr", "float32", (3, 4))
    b = random_dense((4, 2), "float32")
    zv = random_dense((3, 2), "float64")
    alpha = T.TensorType("float32", (True,))("alpha")
    x, y, z = sym(a, "x"), sym(b, "y"), sym(zv, "z")
    out = usmm(alpha, x, y, z)
    assert out.type.dtype == "float64"
    for mode in MODES.values():
        res = run([alpha, x, y, z], out, [np.array([-2.0], "float32"), a, b, zv], mode)
        assert_allclose(res, zv - 2 * reference_dot(a, b), rtol=1e-6, atol=1e-6)


def test_usmm_bad_inputs() -> None:
    x, m, s = sparse.csr_matrix("x"), T.matrix("m"), T.scalar("s")
    with pytest.raises(TypeError, match=r"Usmm.*exactly one of x and y"):
        usmm(s, x, x, m)
    with pytest.raises(TypeError, match=r"Usmm.*exactly one of x and y"):
        usmm(s, m, m, m)
    with pytest.raises(TypeError, match=r"Usmm.*alpha must be a scalar"):
        usmm(T.vector("v"), x, m, m)
    with pytest.raises(TypeError, match=r"Usmm.*z must be a dense"):
        usmm(s, x, m, x)
    with pytest.raises(TypeError, match=r"Usmm.*input 2.*dimension"):
        usmm(s, x, T.vector("v"), m)
    z = T.matrix("z")
    f = opgraph.function([s, x, m, z], usmm(s, x, m, z), mode=Mode(linker="py"))
    a = random_sparse("csr", "float64", (3, 4))
    with pytest.raises(ValueError, match=r"Usmm.*\(3, 4\).*\(5, 2\)"):
        f(1.0, a, np.ones((5, 2)), np.ones((3, 2)))
    with pytest.raises(ValueError, match=r"Usmm.*z has shape \(2, 2\)"):
        f(1.0, a, np.ones((4, 2)), np.ones((2, 2)))


def test_every_op_merges_and_prints_as_theano() -> None:
    names = {
        StructuredDot(): "StructuredDot",
        StructuredDotGradCSR(): "StructuredDotGradCSR",
        StructuredDotGradCSC(): "StructuredDotGradCSC",
        TrueDot(): "TrueDot",
        SamplingDot(): "SamplingDot",
        Dot(): "SparseDot",
        Usmm(): "Usmm{no_inplace}",
    }
    for op, name in names.items():
        assert str(op) == name
    # grad_preserves_dense does not make two TrueDot nodes differ (Theano's choice)
    assert TrueDot(True) == TrueDot(False)
    assert hash(TrueDot(True)) == hash(TrueDot(False))
