"""sandbox.linalg.ops: Hint/psd and the hint helpers, the rewriters, spectral_radius_bound."""

from __future__ import annotations

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.gradient import verify_grad
from opgraph.graph.fg import FunctionGraph
from opgraph.rewriting import in2out
from opgraph.sandbox import linalg
from opgraph.sandbox.linalg.ops import (
    Hint,
    HintsFeature,
    HintsOptimizer,
    hints,
    inv_as_solve,
    is_hint_node,
    is_positive,
    is_psd,
    is_symmetric,
    local_det_chol,
    local_log_pow,
    local_log_prod_sqr,
    no_transpose_symmetric,
    psd,
    psd_solve_with_chol,
    remove_hint_nodes,
    spectral_radius_bound,
    tag_solve_triangular,
    transinv_to_invtrans,
)
from opgraph.tensor.nlinalg import MatrixInverse, det, matrix_inverse
from opgraph.tensor.slinalg import Cholesky, Solve, cholesky, solve
from opgraph.testing.checks import check_infer_shape, check_modes

A = np.array([[2.0, 1.0, 0.0], [1.0, 3.0, 0.5], [0.0, 0.5, 1.0]])
# Theano 1.0.5 (THEANO_FLAGS=device=cpu,cxx=): spectral_radius_bound(A, k) for k = 1, 2, 3.
GOLDEN_SRB = {1: 4.06201920231798, 2: 3.7132980264365636, 3: 3.6864895949354795}


def ops_of(fg: FunctionGraph) -> list[type]:
    """The Op classes of a graph, in topological order."""
    return [type(n.op) for n in fg.toposort()]


@pytest.mark.parametrize("k", [1, 2, 3])
def test_spectral_radius_bound_matches_theano(k: int) -> None:
    X = T.dmatrix("X")
    out = spectral_radius_bound(X, k)
    got = opgraph.function([X], out)(A)
    np.testing.assert_allclose(got, GOLDEN_SRB[k], rtol=1e-12)
    assert got >= np.linalg.eigvalsh(A).max()


def test_spectral_radius_bound_errors_and_grad() -> None:
    with pytest.raises(TypeError, match="matrix argument"):
        spectral_radius_bound(T.dvector(), 2)
    with pytest.raises(TypeError, match="integer exponent"):
        spectral_radius_bound(T.dmatrix(), 2.0)
    with pytest.raises(ValueError, match="strictly positive"):
        spectral_radius_bound(T.dmatrix(), 0)
    verify_grad(lambda x: spectral_radius_bound(x, 2), [A])


def test_psd_hint_is_a_view_with_gradient_and_shape() -> None:
    X = T.dmatrix("X")
    Y = psd(X)
    assert is_hint_node(Y.owner) and Y.owner.op.view_map == {0: [0]}
    assert hints(Y) == {"psd": True, "symmetric": True} and hints(X) == {}
    assert is_psd(Y) and is_symmetric(Y) and not is_psd(X)
    check_modes([X], [Y * 2], [A], [A * 2])
    check_infer_shape([X], Y, [A], Hint)
    verify_grad(lambda x: psd(x).sum() * x, [A])
    assert Hint(psd=True) == Hint(psd=True) and Hint(psd=True) != Hint(symmetric=True)


def test_is_positive() -> None:
    x = T.dvector("x")
    assert is_positive(x**2) and is_positive(x**4.0)
    assert not is_positive(x**3) and not is_positive(x) and not is_positive(x ** T.dscalar())
    assert is_positive(Hint(positive=True)(x))


def test_hints_feature_keeps_hints_after_hint_nodes_are_removed() -> None:
    X, b = T.dmatrix("X"), T.dvector("b")
    out = solve(psd(X), b)
    fg = FunctionGraph([X, b], [out], clone=False)
    HintsOptimizer().rewrite(fg)
    assert isinstance(fg.hints_feature, HintsFeature)
    in2out(remove_hint_nodes).rewrite(fg)
    assert Hint not in ops_of(fg)
    (solve_node,) = [n for n in fg.toposort() if isinstance(n.op, Solve)]
    assert solve_node.inputs[0] is X and fg.hints_feature.hints[X]["psd"] is True
    assert X.fgraph is fg and is_psd(X)  # hints() reads the graph's feature


def test_psd_solve_with_chol_and_triangular_tags() -> None:
    X, b = T.dmatrix("X"), T.dvector("b")
    fg = FunctionGraph([X, b], [solve(psd(X), b)], clone=False)
    in2out(psd_solve_with_chol).rewrite(fg)
    kinds = [n.op.A_structure for n in fg.toposort() if isinstance(n.op, Solve)]
    assert Cholesky in ops_of(fg) and kinds == ["lower_triangular", "upper_triangular"]
    f = opgraph.function([X, b], fg.outputs[0])
    bv = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(f(A, bv), np.linalg.solve(A, bv))
    X, b = T.dmatrix("X"), T.dvector("b")
    fg = FunctionGraph([X, b], [solve(cholesky(X), b), solve(cholesky(X).T, b)], clone=False)
    in2out(tag_solve_triangular).rewrite(fg)
    kinds = sorted(n.op.A_structure for n in fg.toposort() if isinstance(n.op, Solve))
    assert kinds == ["lower_triangular", "upper_triangular"]


def test_inverse_and_transpose_rewrites() -> None:
    X, Y = T.dmatrix("X"), T.dmatrix("Y")
    B = np.array([[1.0, 2.0], [0.0, -1.0], [3.0, 1.0]])
    fg = FunctionGraph([X, Y], [T.dot(matrix_inverse(X), Y)], clone=False)
    in2out(inv_as_solve).rewrite(fg)
    assert MatrixInverse not in ops_of(fg) and Solve in ops_of(fg)
    np.testing.assert_allclose(opgraph.function([X, Y], fg.outputs[0])(A, B), np.linalg.solve(A, B))
    X, Y = T.dmatrix("X"), T.dmatrix("Y")
    fg = FunctionGraph([X, Y], [T.dot(Y.T, matrix_inverse(X))], clone=False)
    in2out(inv_as_solve).rewrite(fg)
    assert MatrixInverse not in ops_of(fg)
    np.testing.assert_allclose(
        opgraph.function([X, Y], fg.outputs[0])(A, B), B.T @ np.linalg.inv(A)
    )
    X = T.dmatrix("X")
    fg = FunctionGraph([X], [matrix_inverse(X).T], clone=False)
    in2out(transinv_to_invtrans).rewrite(fg)
    assert fg.outputs[0].owner.op == matrix_inverse
    X = T.dmatrix("X")
    fg = FunctionGraph([X], [psd(X).T], clone=False)
    in2out(no_transpose_symmetric).rewrite(fg)
    assert is_hint_node(fg.outputs[0].owner)


def test_det_chol_and_log_pow() -> None:
    X, x = T.dmatrix("X"), T.dvector("x")
    fg = FunctionGraph([X], [det(X), cholesky(X)], clone=False)
    in2out(local_det_chol).rewrite(fg)
    f = opgraph.function([X], fg.outputs[0])
    np.testing.assert_allclose(f(A), np.linalg.det(A))
    fg = FunctionGraph([x], [T.log(x**3)], clone=False)
    in2out(local_log_pow).rewrite(fg)
    xv = np.array([0.5, 2.0])
    np.testing.assert_allclose(opgraph.function([x], fg.outputs[0])(xv), 3 * np.log(xv))


@pytest.mark.nonfinite
def test_log_pow_only_where_exact() -> None:
    """``log(x ** e) -> e * log(x)`` only where both agree for every x, inf, -0.0 and NaN too."""
    xv = np.array([-2.0, -0.5, 0.0, 0.5, 3.0, np.inf, -np.inf, np.nan])
    positive = Hint(positive=True)
    for build, changed in [
        (lambda x, e: T.log(x**3), True),
        (lambda x, e: T.log(x**-1), False),
        (lambda x, e: T.log(x**0.5), False),
        (lambda x, e: T.log(x**2), False),
        (lambda x, e: T.log(x**0), False),
        (lambda x, e: T.log(x**e), False),
        (lambda x, e: T.log(psd(x) ** 2), False),
        (lambda x, e: T.log(positive(x) ** 2), True),
        (lambda x, e: T.log(positive(x) ** e), True),
    ]:
        x, e = T.dvector("x"), T.dscalar("e")
        fg = FunctionGraph([x, e], [build(x, e)])
        in2out(local_log_pow).rewrite(fg)
        assert (fg.outputs[0].owner.op != T.log) == changed
        if build(x, e).owner.inputs[0].owner.inputs[0].owner is not None:
            continue  # a hinted base: positive is promised, not checked
        with np.errstate(all="ignore"):
            got = opgraph.function(fg.inputs, fg.outputs[0], on_unused_input="ignore")(xv, 2.0)
            power = opgraph.function([x, e], build(x, e).owner.inputs[0], on_unused_input="ignore")
            want = np.log(power(xv, 2.0))
        np.testing.assert_allclose(got, want, equal_nan=True)


def test_log_prod_sqr() -> None:
    """``log(prod(p)) -> sum(log(p))`` for a positive ``p`` only: no underflow to -inf."""
    x = T.dvector("x")
    fg = FunctionGraph([x], [T.log(T.prod(x**2))], clone=False)
    in2out(local_log_prod_sqr).rewrite(fg)
    assert not any(type(n.op).__name__ == "Prod" for n in fg.toposort())
    xv = np.full(400, 1e-3)  # prod(x ** 2) underflows to 0
    f = opgraph.function([x], fg.outputs[0])
    np.testing.assert_allclose(f(xv), 400 * np.log(1e-6))
    x = T.dvector("x")
    fg = FunctionGraph([x], [T.log(T.prod(x))], clone=False)
    before = fg.outputs[0]
    in2out(local_log_prod_sqr).rewrite(fg)
    assert fg.outputs[0] is before  # x may hold negatives: prod's sign matters


def test_hints_optimizer_attaches_only_to_hinted_graphs() -> None:
    X = T.dmatrix("X")
    plain = FunctionGraph([X], [X.T], clone=False)
    HintsOptimizer().rewrite(plain)
    assert getattr(plain, "hints_feature", None) is None
    X = T.dmatrix("X")
    hinted = FunctionGraph([X], [psd(X).T], clone=False)
    HintsOptimizer().rewrite(hinted)
    HintsOptimizer().rewrite(hinted)  # a second run keeps the one feature
    assert isinstance(hinted.hints_feature, HintsFeature)


def test_namespace_reexports_theano_names() -> None:
    for name in ("cholesky", "solve", "eigvalsh", "matrix_inverse", "det", "trace", "psd"):
        assert hasattr(linalg, name), name
    assert linalg.spectral_radius_bound is spectral_radius_bound
