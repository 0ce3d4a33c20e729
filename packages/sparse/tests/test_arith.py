"""Sparse arithmetic (``opgraph_sparse.arith``): add/sub/mul and the comparisons.

Every Op runs against ``scipy.sparse``/NumPy for csr and csc, float32 and float64, in the
default mode (C linker where installed), ``Mode(linker="py")`` and DEBUG_MODE; sparse
outputs are checked to be exactly of their declared Type. Gradients are checked by finite
differences with ``verify_grad_sparse``; printed names are Theano 1.0.5's (from the oracle).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

import opgraph
import opgraph.tensor as T
from opgraph import sparse
from opgraph.compile.mode import Mode
from opgraph.graph.basic import Variable
from opgraph.testing.checks import check_infer_shape
from opgraph_sparse import arith
from opgraph_sparse.basic import mul_s_d
from opgraph_sparse.testing import verify_grad_sparse
from opgraph_sparse.type import SparseType

FORMATS = ["csr", "csc"]
FLOATS = ["float32", "float64"]
MODES = {"default": None, "py": Mode(linker="py"), "debug": "DEBUG_MODE"}


def tol(dtype: str) -> dict[str, float]:
    """``assert_allclose`` tolerances for results of ``dtype``."""
    return {"rtol": 1e-5, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-12, "atol": 0}


def random_sparse(
    fmt: str, dtype: str, shape: tuple[int, int] = (3, 4), density: float = 0.5, seed: int = 0
) -> Any:
    """A random matrix of ``fmt``/``dtype`` holding at least one value."""
    rng = np.random.default_rng(seed)
    dense = rng.uniform(-2, 2, size=shape) * (rng.uniform(size=shape) < density)
    dense[0, 0] = 1.5
    return SparseType.format_cls[fmt](dense.astype(dtype))


def assert_of_type(var: Variable, value: Any) -> None:
    """``value`` is exactly a value of ``var``'s Type (class and dtype)."""
    assert var.type.filter(value, strict=True) is value


def check(var: Variable, got: Any, expected: Any, dtype: str) -> None:
    """``got`` is of ``var``'s Type and equals ``expected`` (dense or sparse)."""
    if isinstance(var.type, SparseType):
        assert_of_type(var, got)
        got = got.toarray()
    else:
        assert isinstance(got, np.ndarray) and got.dtype == np.dtype(var.type.dtype)
    if sp.issparse(expected):
        expected = expected.toarray()
    np.testing.assert_allclose(got, np.asarray(expected), **tol(dtype))


# -- values against scipy, every Op in one graph per case ------------------------------------


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_op_matches_scipy(fmt: str, dtype: str, mode: str) -> None:
    x, y = sparse.matrix(fmt, "x", dtype), sparse.matrix(fmt, "y", dtype)
    d, v, s = T.matrix("d", dtype=dtype), T.vector("v", dtype=dtype), T.scalar("s", dtype=dtype)
    a, b = random_sparse(fmt, dtype, seed=1), random_sparse(fmt, dtype, seed=2)
    dv = np.random.default_rng(3).uniform(-2, 2, (3, 4)).astype(dtype)
    dv[0, 0] = a[0, 0]  # one equal pair for the comparisons
    vv = np.arange(1, 5, dtype=dtype)
    sv = np.asarray(1.5, dtype=dtype)
    a2 = a.copy()
    a2.data = np.arange(1, a.nnz + 1, dtype=dtype)  # a's pattern, other values
    cols = a.indices if fmt == "csr" else np.repeat(np.arange(4), np.diff(a.indptr))
    expected_sav = a.toarray()
    rows = np.repeat(np.arange(3), np.diff(a.indptr)) if fmt == "csr" else a.indices
    expected_sav[rows, cols] += vv[cols]
    cases = [
        (arith.add_s_s(x, y), a + b),
        (x + y, a + b),
        (x + d, a.toarray() + dv),
        (d + x, a.toarray() + dv),
        (x - y, a - b),
        (x - d, a.toarray() - dv),
        (arith.sub(d, x), dv - a.toarray()),
        (arith.add_s_s_data(x, sparse.as_sparse_variable(a2)), a + a2),
        (arith.structured_add_s_v(x, v), expected_sav),
        (x * y, a.multiply(b)),
        (x * d, a.multiply(dv)),
        (arith.mul(d, x), a.multiply(dv)),
        (x * v, a.multiply(vv[None, :])),
        (arith.mul(v, x), a.multiply(vv[None, :])),
        (x * s, a * sv),
        (s * x, a * sv),
        (x * 2, a * 2),
    ]
    comparisons = [
        (arith.eq, np.equal),
        (arith.neq, np.not_equal),
        (arith.lt, np.less),
        (arith.gt, np.greater),
        (arith.le, np.less_equal),
        (arith.ge, np.greater_equal),
    ]
    for fn, np_fn in comparisons:
        cases.append((fn(x, y), np_fn(a.toarray(), b.toarray())))
        cases.append((fn(x, d), np_fn(a.toarray(), dv)))
        cases.append((fn(d, x), np_fn(dv, a.toarray())))
    cases += [(x < d, a.toarray() < dv), (x >= y, a.toarray() >= b.toarray())]
    outs = [c[0] for c in cases]
    f = opgraph.function([x, y, d, v, s], outs, mode=MODES[mode], on_unused_input="ignore")
    results = f(a, b, dv, vv, sv)
    for (var, expected), got in zip(cases, results, strict=True):
        check(var, got, expected, dtype)
    sav = results[8]
    assert sav.nnz == a.nnz  # structured: the pattern of x, nothing added elsewhere


def test_ops_pick_the_right_op_and_print_as_theano() -> None:
    x, y, d = sparse.csr_matrix("x"), sparse.csr_matrix("y"), T.matrix("d")
    v, s = T.vector("v"), T.scalar("s")
    picks = [
        (arith.add(x, y), arith.AddSS),
        (arith.add(d, x), arith.AddSD),
        (arith.mul(x, y), arith.MulSS),
        (arith.mul(d, x), type(mul_s_d)),
        (arith.mul(x, s), type(mul_s_d)),
        (arith.mul(x, v), arith.MulSV),
        (arith.lt(d, x), arith.GreaterThanSD),
        (arith.gt(d, x), arith.LessThanSD),
        (arith.le(d, x), arith.GreaterEqualSD),
        (arith.ge(d, x), arith.LessEqualSD),
        (arith.eq(d, x), arith.EqualSD),
        (arith.neq(d, x), arith.NotEqualSD),
        (arith.neq(x, y), arith.NotEqualSS),
    ]
    for var, cls in picks:
        assert type(var.owner.op) is cls
    # printed as Theano 1.0.5 prints them
    names = [
        arith.add_s_s, arith.add_s_s_data, arith.add_s_d, arith.structured_add_s_v,
        arith.mul_s_s, arith.mul_s_v, mul_s_d, arith.equal_s_s, arith.greater_equal_s_d,
    ]  # fmt: skip
    assert [str(o) for o in names] == [
        "AddSS", "AddSSData", "AddSD", "StructuredAddSV", "MulSS", "MulSV", "MulSD",
        "EqualSS", "GreaterEqualSD",
    ]  # fmt: skip
    # a scipy matrix operand becomes a sparse constant
    c = arith.add(sp.csr_matrix(np.eye(2)), d)
    assert type(c.owner.op) is arith.AddSD


@pytest.mark.parametrize(("fx", "fy"), [("csr", "csc"), ("csc", "csr")])
def test_mixed_formats_take_the_first_operands_format(fx: str, fy: str) -> None:
    x, y = sparse.matrix(fx, "x", "float64"), sparse.matrix(fy, "y", "float32")
    a, b = random_sparse(fx, "float64", seed=4), random_sparse(fy, "float32", seed=5)
    outs = [x + y, x * y, x - y]
    for out in outs:
        assert out.type == SparseType(fx, "float64")
    results = opgraph.function([x, y], outs)(a, b)
    for out, got, exp in zip(outs, results, [a + b, a.multiply(b), a - b], strict=True):
        check(out, got, exp, "float64")
    # the gradients have each input's own format and dtype (one term per variable: the
    # sum of several sparse gradient terms is core's business)
    for cost, ex, ey in [
        ((x * y).sum(), b.toarray(), a.toarray()),
        ((x + y).sum(), np.ones((3, 4)), np.ones((3, 4))),
    ]:
        gx, gy = opgraph.grad(cost, [x, y])
        assert gx.type == x.type and gy.type == y.type
        rx, ry = opgraph.function([x, y], [gx, gy])(a, b)
        assert_of_type(gx, rx)
        assert_of_type(gy, ry)
        np.testing.assert_allclose(rx.toarray(), ex, rtol=1e-6)
        np.testing.assert_allclose(ry.toarray(), ey, rtol=1e-6)


def test_integer_dtypes_as_theano_allowed() -> None:
    x, y = sparse.csr_matrix("x", dtype="int32"), sparse.csr_matrix("y", dtype="int64")
    d = T.matrix("d", dtype="int8")
    a = sp.csr_matrix(np.array([[1, 0, 3], [0, -2, 0]], dtype="int32"))
    b = sp.csr_matrix(np.array([[0, 5, 3], [1, 0, 0]], dtype="int64"))
    dv = np.array([[1, 2, 3], [4, 5, 6]], dtype="int8")
    outs = [
        x + y,
        x * y,
        x + d,
        x * d,
        x < y,
        arith.eq(x, d),
        arith.mul(x, T.vector(dtype="int32")),
    ]
    assert outs[0].type == SparseType("csr", "int64")
    assert outs[3].type == SparseType("csr", "int32")
    f = opgraph.function([x, y, d, outs[-1].owner.inputs[1]], outs)
    vv = np.array([2, 3, 4], dtype="int32")
    r = f(a, b, dv, vv)
    check(outs[0], r[0], a + b, "float64")
    check(outs[1], r[1], a.multiply(b), "float64")
    check(outs[2], r[2], a.toarray() + dv, "float64")
    check(outs[3], r[3], a.multiply(dv), "float64")
    check(outs[4], r[4], a.toarray() < b.toarray(), "float64")
    check(outs[5], r[5], a.toarray() == dv, "float64")
    check(outs[6], r[6], a.multiply(vv[None, :]), "float64")


# -- gradients ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_gradients_by_finite_differences(fmt: str, dtype: str) -> None:
    a, b = random_sparse(fmt, dtype, seed=6), random_sparse(fmt, dtype, seed=7)
    rng = np.random.default_rng(8)
    dv = rng.uniform(-1, 1, (3, 4)).astype(dtype)
    vv = rng.uniform(0.5, 2, 4).astype(dtype)
    a2 = a.copy()
    a2.data = rng.uniform(-1, 1, a.nnz).astype(dtype)
    verify_grad_sparse(arith.add_s_s, [a, b])
    verify_grad_sparse(arith.add_s_s_data, [a, a2], structured=True)
    verify_grad_sparse(arith.add_s_d, [a, dv], structured=True)
    verify_grad_sparse(arith.structured_add_s_v, [a, vv], structured=True)
    verify_grad_sparse(arith.mul_s_s, [a, b])
    verify_grad_sparse(arith.mul_s_v, [a, vv])
    verify_grad_sparse(arith.sub, [a, b])
    verify_grad_sparse(arith.sub, [dv, a], structured=True)


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_gradient_of_a_dense_scalar_factor_is_a_scalar(fmt: str) -> None:
    """A trap other libraries shipped: d(sum(x * s))/ds must have s's shape, not x's."""
    x, s = sparse.matrix(fmt, "x", "float64"), T.dscalar("s")
    a = random_sparse(fmt, "float64", seed=9)
    for prod in (x * s, s * x, arith.mul(x, s)):
        gs, gx = opgraph.grad(prod.sum(), [s, x])
        assert gs.type.ndim == 0
        assert gx.type == x.type
        r_s, r_x = opgraph.function([x, s], [gs, gx])(a, 3.0)
        assert np.shape(r_s) == ()
        np.testing.assert_allclose(r_s, a.sum(), rtol=1e-12)
        np.testing.assert_allclose(r_x.toarray(), np.full((3, 4), 3.0), rtol=1e-12)  # regular
    verify_grad_sparse(lambda m, k: arith.mul(m, k), [a, np.asarray(1.7)])


def test_add_s_d_gradient_is_structured_for_the_sparse_operand() -> None:
    x, d = sparse.csr_matrix("x", dtype="float64"), T.dmatrix("d")
    a = random_sparse("csr", "float64", seed=10)
    w = np.arange(12.0).reshape(3, 4)
    gx, gd = opgraph.grad(((x + d) * w).sum(), [x, d])
    rx, rd = opgraph.function([x, d], [gx, gd])(a, np.zeros((3, 4)))
    np.testing.assert_allclose(rx.toarray(), w * (a.toarray() != 0))
    np.testing.assert_allclose(rd, w)


# -- infer_shape ----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_infer_shape(fmt: str) -> None:
    x, y = sparse.matrix(fmt, "x", "float64"), sparse.matrix(fmt, "y", "float64")
    d, v = T.dmatrix("d"), T.dvector("v")
    a, b = random_sparse(fmt, "float64", (5, 3), seed=11), random_sparse(fmt, "float64", (5, 3))
    values = [a, b, np.ones((5, 3)), np.arange(3.0)]
    ops = [
        arith.AddSS, arith.AddSSData, arith.AddSD, arith.StructuredAddSV, arith.MulSS,
        arith.MulSV, arith.LessThanSS, arith.GreaterEqualSD,
    ]  # fmt: skip
    outs = [
        arith.add_s_s(x, y), arith.add_s_s_data(x, x), arith.add_s_d(x, d),
        arith.structured_add_s_v(x, v), arith.mul_s_s(x, y), arith.mul_s_v(x, v),
        arith.lt(x, y), arith.ge(x, d),
    ]  # fmt: skip
    for out, op in zip(outs, ops, strict=True):
        check_infer_shape([x, y, d, v], out, values, op)


# -- bad inputs -----------------------------------------------------------------------------


def test_make_node_refusals_name_the_op() -> None:
    x, xc, d = sparse.csr_matrix("x"), sparse.csc_matrix("xc"), T.matrix("d")
    with pytest.raises(TypeError, match=r"sparse\.add: a sparse matrix can be added"):
        arith.add(x, 1.0)
    with pytest.raises(TypeError, match=r"sparse\.add: a sparse matrix can be added"):
        arith.add(T.vector(), x)
    with pytest.raises(TypeError, match="at least one operand must be sparse"):
        arith.mul(d, d)
    with pytest.raises(TypeError, match="AddSSData: x and y must have the same format"):
        arith.add_s_s_data(x, xc)
    with pytest.raises(TypeError, match="MulSV: x and y must have the same dtype"):
        arith.mul_s_v(x, T.vector(dtype="float32" if x.dtype == "float64" else "float64"))
    with pytest.raises(TypeError, match="StructuredAddSV: y must have 1 dimension"):
        arith.structured_add_s_v(x, d)
    with pytest.raises(TypeError, match="EqualSS: x and y must have the same format"):
        arith.eq(x, xc)
    with pytest.raises(TypeError, match="LessThanSD: y must have 2 dimension"):
        arith.lt(x, T.tensor3())
    with pytest.raises(TypeError, match="AddSD: y must be dense"):
        arith.add_s_d(x, xc)
    with pytest.raises(TypeError, match=r"MulSS: SparseVariable\{bsr,float64\} is a bsr matrix"):
        arith.mul_s_s(sparse.bsr_matrix(), x)


@pytest.mark.parametrize("mode", ["py", "default"])
def test_runtime_shape_mismatches_are_value_errors(mode: str) -> None:
    x, y, d, v = sparse.csr_matrix("x"), sparse.csr_matrix("y"), T.matrix("d"), T.vector("v")
    dtype = x.dtype
    a = random_sparse("csr", dtype, (3, 4))
    b = random_sparse("csr", dtype, (4, 3))
    cases = [
        ([x, y], arith.add_s_s(x, y), [a, b], "AddSS: the operands must have the same shape"),
        ([x, y], arith.mul_s_s(x, y), [a, b], "MulSS: the operands must have the same shape"),
        ([x, d], arith.add_s_d(x, d), [a, np.ones((3, 3), dtype)], "AddSD: the operands"),
        ([x, d], arith.eq(x, d), [a, np.ones((4, 3), dtype)], "EqualSD: the operands"),
        ([x, y], arith.lt(x, y), [a, b], "LessThanSS: the operands"),
        ([x, v], arith.mul_s_v(x, v), [a, np.ones(3, dtype)], "MulSV: y must have one value"),
        ([x, v], arith.structured_add_s_v(x, v), [a, np.ones(5, dtype)], "StructuredAddSV: y"),
        ([x, y], arith.add_s_s_data(x, y), [a, a[:, :2].tocsr()[:, :2]], "AddSSData"),
    ]
    for inputs, out, values, message in cases:
        f = opgraph.function(inputs, out, mode=MODES[mode])
        with pytest.raises(ValueError, match=message):
            f(*values)


def test_a_hand_built_matrix_with_an_index_out_of_range_is_an_index_error() -> None:
    """A function's input filter already refuses such a matrix; perform (reached from
    another Op's output or a thunk's cell) still gives a clear error, never a wrong value."""
    x, v = sparse.csr_matrix("x", dtype="float64"), T.dvector("v")
    bad = sp.csr_matrix((3, 4))
    bad.data, bad.indices, bad.indptr = np.ones(2), np.array([0, 7]), np.array([0, 1, 2, 2])
    with pytest.raises(ValueError, match="out of range"):
        opgraph.function([x, v], arith.mul_s_v(x, v))(bad, np.ones(4))
    for out in (arith.structured_add_s_v(x, v), arith.mul_s_v(x, v)):
        with pytest.raises(IndexError, match="a stored index is out of range"):
            out.owner.op.perform(out.owner, [bad, np.ones(4)], [[None]])
    bad.indices = np.array([0, 1])
    bad.indptr = np.array([0, 2, 1, 2])  # decreasing
    out = arith.structured_add_s_v(x, v)
    with pytest.raises(ValueError, match=r"StructuredAddSV: the csr matrix .* inconsistent arrays"):
        out.owner.op.perform(out.owner, [bad, np.ones(4)], [[None]])
