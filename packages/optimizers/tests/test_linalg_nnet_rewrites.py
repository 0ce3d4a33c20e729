"""sandbox.linalg's rewriters and local_ctc_no_grad, as installed in the modes' stages."""

from __future__ import annotations

import numpy as np
import pytest

import opgraph as theano
import opgraph.tensor as T
from opgraph.compile.mode import Mode
from opgraph.sandbox.linalg import cholesky, det, matrix_inverse, psd, solve
from opgraph.sandbox.linalg.ops import Hint, HintsFeature
from opgraph.tensor.nlinalg import Det, MatrixInverse
from opgraph.tensor.nnet.ctc import ConnectionistTemporalClassification, ctc
from opgraph.tensor.slinalg import Cholesky, Solve

FAST_RUN = Mode("vm", "fast_run")
FAST_COMPILE = Mode("py", "fast_compile")
NO_LINALG = FAST_RUN.excluding("linalg")

rng = np.random.default_rng(7)
M = rng.normal(size=(5, 5))
SPD = M @ M.T + 5 * np.eye(5)
V = rng.normal(size=5)


def _ops(f):
    return [type(n.op) for n in f.maker.fgraph.toposort()]


def test_inv_dot_becomes_solve() -> None:
    A, b = T.dmatrix("A"), T.dvector("b")
    f = theano.function([A, b], T.dot(matrix_inverse(A), b), mode=FAST_RUN)
    assert MatrixInverse not in _ops(f) and Solve in _ops(f)
    np.testing.assert_allclose(f(SPD, V), np.linalg.solve(SPD, V), rtol=1e-10)
    g = theano.function([A, b], T.dot(matrix_inverse(A), b), mode=NO_LINALG)
    assert MatrixInverse in _ops(g)
    np.testing.assert_allclose(g(SPD, V), f(SPD, V), rtol=1e-10)


@pytest.mark.parametrize("mode", [FAST_RUN, FAST_COMPILE], ids=["fast_run", "fast_compile"])
def test_psd_hint_solves_through_cholesky(mode: Mode) -> None:
    A, b = T.dmatrix("A"), T.dvector("b")
    f = theano.function([A, b], solve(psd(A), b), mode=mode)
    assert Hint not in _ops(f)  # canonicalize removes hint nodes (FAST_COMPILE too)
    if mode is FAST_RUN:  # stabilize: only FAST_RUN
        kinds = [n.op.A_structure for n in f.maker.fgraph.toposort() if isinstance(n.op, Solve)]
        assert Cholesky in _ops(f) and kinds == ["lower_triangular", "upper_triangular"]
        assert isinstance(f.maker.fgraph.hints_feature, HintsFeature)
    np.testing.assert_allclose(f(SPD, V), np.linalg.solve(SPD, V), rtol=1e-10)


def test_transpose_of_symmetric_and_det_from_cholesky() -> None:
    A = T.dmatrix("A")
    f = theano.function([A], T.dot(psd(A).T, A), mode=FAST_RUN)
    assert not any("DimShuffle" in t.__name__ for t in _ops(f))
    np.testing.assert_allclose(f(SPD), SPD @ SPD)
    g = theano.function([A], [det(A), cholesky(A)], mode=FAST_RUN)
    assert Det not in _ops(g)
    d, L = g(SPD)
    np.testing.assert_allclose(d, np.linalg.det(SPD), rtol=1e-10)
    np.testing.assert_allclose(L, np.linalg.cholesky(SPD))


def test_log_rewrites_keep_values() -> None:
    x = T.dvector("x")
    xv = np.array([-2.0, -0.5, 0.0, 0.5, 3.0])
    f = theano.function([x], [T.log(x**2), T.log(x**3), T.log(T.prod(x**2))], mode=FAST_RUN)
    with np.errstate(all="ignore"):
        want = [np.log(xv**2), np.log(xv**3), np.log(np.prod(xv**2))]
        for got, w in zip(f(xv), want, strict=True):
            np.testing.assert_allclose(got, w, equal_nan=True)
    small = np.full(300, 1e-3)  # prod(x ** 2) underflows; the sum of logs does not
    np.testing.assert_allclose(f(small)[2], 300 * np.log(1e-6))


def test_ctc_without_gradient_computes_the_cost_only() -> None:
    act, lab, n = T.ftensor3("act"), T.imatrix("lab"), T.ivector("n")
    av = rng.normal(size=(6, 2, 4)).astype("float32")
    lv = np.array([[1, 2], [3, 0]], "int32")
    nv = np.array([6, 5], "int32")
    cost = ctc(act, lab, n)
    for mode in (FAST_RUN, FAST_COMPILE):
        f = theano.function([act, lab, n], cost, mode=mode)
        (node,) = f.maker.fgraph.toposort()
        assert isinstance(node.op, ConnectionistTemporalClassification)
        assert not node.op.compute_grad
    g = theano.function([act, lab, n], [cost, T.grad(cost.sum(), act)], mode=FAST_RUN)
    assert [
        n.op.compute_grad
        for n in g.maker.fgraph.toposort()
        if isinstance(n.op, ConnectionistTemporalClassification)
    ] == [True]
    np.testing.assert_allclose(f(av, lv, nv), g(av, lv, nv)[0], rtol=1e-6)


# ------------------------------------------------------------------ softmax with a bias


def _softmax_data(rng: np.random.Generator):
    return rng.normal(size=(5, 3)), rng.normal(size=(3, 4)), rng.normal(size=4)


def test_softmax_of_logits_plus_a_bias_becomes_softmax_with_bias(rewrites_check) -> None:
    m, w = T.dmatrices("m", "w")
    b = T.dvector("b")
    out = T.nnet.softmax(T.dot(m, w) + b)
    f = rewrites_check.rewrite(
        "local_softmax_with_bias",
        [m, w, b],
        out,
        list(_softmax_data(rewrites_check.rng)),
        lambda uses: [str(n.op) for n in uses.nodes] == ["Dot22", "SoftmaxWithBias"],
    )
    (node,) = [n for n in f.maker.fgraph.toposort() if str(n.op) == "SoftmaxWithBias"]
    assert node.inputs[1] in f.maker.fgraph.inputs  # b itself, not a broadcast of it


def test_crossentropy_takes_the_models_bias(rewrites_check) -> None:
    m, w = T.dmatrices("m", "w")
    b = T.dvector("b")
    y = T.ivector("y")
    cost = T.nnet.categorical_crossentropy(T.nnet.softmax(T.dot(m, w) + b), y).mean()
    mv, wv, bv = _softmax_data(rewrites_check.rng)
    f = theano.function([m, w, b, y], cost)
    ops = [str(n.op) for n in f.maker.fgraph.toposort()]
    assert "CrossentropySoftmaxArgmax1HotWithBias" in ops and "SoftmaxWithBias" not in ops
    (xent,) = [n for n in f.maker.fgraph.toposort() if "Crossentropy" in str(n.op)]
    assert str(xent.inputs[0].owner.op) == "Dot22" and xent.inputs[1] is f.maker.fgraph.inputs[2]
    yv = np.array([0, 3, 1, 2, 3], dtype="int32")
    z = mv @ wv + bv
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(f(mv, wv, bv, yv), -np.log(p[np.arange(5), yv]).mean())
    off = theano.function(
        [m, w, b, y], cost, mode=Mode(optimizer="fast_run").excluding("local_softmax_with_bias")
    )
    (xent,) = [n for n in off.maker.fgraph.toposort() if "Crossentropy" in str(n.op)]
    assert str(xent.inputs[1].owner.op) == "Elemwise{second,no_inplace}"  # Theano's zero bias
    np.testing.assert_allclose(off(mv, wv, bv, yv), f(mv, wv, bv, yv))
