"""nnet activations: softmax, log_softmax, softmax_with_bias, softmax_grad, relu and sigmoids."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.special

import opgraph
import opgraph.tensor as T
import opgraph.tensor.nnet as nnet
from opgraph.gradient import Rop
from opgraph.gradient import verify_grad as _verify_grad
from opgraph.tensor.nnet import (
    LogSoftmax,
    Softmax,
    SoftmaxGrad,
    SoftmaxWithBias,
    log_softmax,
    softmax,
    softmax_grad,
    softmax_with_bias,
)
from opgraph.testing.checks import assert_allclose, check_infer_shape, check_modes

FLOATS = ["float32", "float64"]


def verify_grad(fun: Any, pt: list[np.ndarray], rng: np.random.Generator) -> None:
    """verify_grad on a fixed random weighting of ``fun``'s output (any shape)."""
    ins = [T.TensorType("float64", [False] * np.ndim(p))() for p in pt]
    shape = np.shape(opgraph.function(ins, fun(*ins))(*pt))
    weights = rng.random(shape) + 0.5
    _verify_grad(lambda *a: (fun(*a) * weights).sum(), pt, rng=rng)


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_family_matches_scipy(dtype: str, rng: np.random.Generator) -> None:
    x, b, t3 = T.matrix("x", dtype=dtype), T.vector("b", dtype=dtype), T.tensor3("t3", dtype=dtype)
    xv = rng.standard_normal((3, 5)).astype(dtype)
    bv = rng.standard_normal(5).astype(dtype)
    tv = rng.standard_normal((2, 3, 4)).astype(dtype)
    sm = scipy.special.softmax
    lsm = scipy.special.log_softmax
    outs = [softmax(x), softmax(x, axis=0), log_softmax(x), nnet.logsoftmax(x, 0)]
    outs += [softmax_with_bias(x, b), softmax(t3, 1), log_softmax(t3), softmax(x[0])]
    outs += [softmax_grad(x, softmax(x)), nnet.softmax_graph(x)]
    expected = [sm(xv, 1), sm(xv, 0), lsm(xv, 1), lsm(xv, 0), sm(xv + bv, 1), sm(tv, 1)]
    expected += [lsm(tv, 2), sm(xv[0])[None]]  # a vector is softmaxed as a (1, n) row
    s = sm(xv, 1)
    expected += [s * (xv - (xv * s).sum(1, keepdims=True)), s]
    check_modes([x, b, t3], outs, [xv, bv, tv], expected)
    for out in outs:
        assert out.type.dtype == dtype


def test_large_logits_stay_finite(mode: str, rng: np.random.Generator) -> None:
    x = T.dmatrix("x")
    xv = np.array([[1000.0, -1000.0, 0.0], [-1000.0, -1000.0, 1000.0]])
    ls = log_softmax(x)
    outs = [softmax(x), ls, opgraph.grad((ls * [[1.0, 2, 3]]).sum(), x)]
    outs.append(opgraph.grad(softmax(x)[:, 0].sum(), x))
    got = opgraph.function([x], outs, mode=mode)(xv)
    for g in got:
        assert np.isfinite(g).all()
    assert_allclose(got[1], scipy.special.log_softmax(xv, axis=1))
    assert_allclose(got[2], [[1, 2, 3]] - 6 * scipy.special.softmax(xv, axis=1))


@pytest.mark.nonfinite
def test_empty_nan_and_inf(rng: np.random.Generator) -> None:
    x = T.dmatrix("x")
    f = opgraph.function([x], [softmax(x), log_softmax(x), softmax(x, 0)])
    for shape in [(0, 3), (3, 0), (0, 0)]:
        for out in f(np.zeros(shape)):
            assert out.shape == shape
    nan_row = np.array([[1.0, np.nan], [1.0, 2.0]])
    sm, lsm, _ = f(nan_row)
    assert np.isnan(sm[0]).all() and np.isnan(lsm[0]).all()
    assert_allclose(sm[1], scipy.special.softmax([1.0, 2.0]))
    with np.errstate(invalid="ignore"):
        inf_rows = np.array([[-np.inf, 0.0], [np.inf, 0.0]])
        expected = scipy.special.softmax(inf_rows, axis=1)
    assert_allclose(f(inf_rows)[0], expected)


def test_bad_inputs_give_clear_errors() -> None:
    with pytest.raises(
        TypeError, match=r"(?s)softmax: input 0 \(c\) must have a float dtype.*HINT"
    ):
        softmax(T.imatrix())
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        softmax(T.dmatrix(), axis=2)
    with pytest.raises(TypeError, match=r"SoftmaxWithBias: input 1 \(b\) must have 1 dimension"):
        softmax_with_bias(T.dmatrix(), T.dmatrix())
    with pytest.raises(TypeError, match="axis must be an int"):
        Softmax(axis=None)  # type: ignore[arg-type]
    x, b = T.dmatrix("x"), T.dvector("b")
    with pytest.raises(ValueError, match="b has 2 elements but x has shape"):
        opgraph.function([x, b], softmax_with_bias(x, b))(np.ones((3, 4)), np.ones(2))


def test_printed_names() -> None:
    assert str(nnet.softmax_op) == "Softmax"
    assert str(Softmax(0)) == "Softmax{axis=0}"
    assert str(nnet.logsoftmax_op) == "LogSoftmax"
    assert str(softmax_grad) == "SoftmaxGrad"
    assert str(softmax_with_bias) == "SoftmaxWithBias"
    x = T.dmatrix("x")
    assert softmax(x).owner.op == Softmax() == Softmax(-1)
    assert softmax(x, axis=1).owner.op == nnet.softmax_op  # axis normalised to -1


def test_gradients(rng: np.random.Generator) -> None:
    xv = rng.standard_normal((3, 4))
    verify_grad(softmax, [xv], rng)
    verify_grad(lambda x: softmax(x, axis=0), [xv], rng)
    verify_grad(log_softmax, [xv], rng)
    verify_grad(lambda x: log_softmax(x, 0), [xv], rng)
    verify_grad(lambda x: softmax(x, 1), [rng.standard_normal((2, 3, 4))], rng)
    verify_grad(softmax_with_bias, [xv, rng.standard_normal(4)], rng)
    verify_grad(lambda dy, x: softmax_grad(dy, softmax(x)), [xv, rng.standard_normal((3, 4))], rng)
    verify_grad(nnet.relu, [xv], rng)
    verify_grad(lambda x: nnet.relu(x, 0.1), [xv], rng)
    verify_grad(nnet.elu, [xv], rng)
    verify_grad(nnet.selu, [xv], rng)
    verify_grad(nnet.softsign, [xv], rng)
    verify_grad(nnet.sigmoid, [xv], rng)
    verify_grad(nnet.softplus, [xv], rng)
    verify_grad(nnet.hard_sigmoid, [xv], rng)
    # ultra_fast_sigmoid's gradient is Theano's y * (1 - y), not the approximation's slope
    x = T.dmatrix("x")
    y = nnet.ultra_fast_sigmoid(x)
    got, yv = opgraph.function([x], [opgraph.grad(y.sum(), x), y])(xv)
    assert_allclose(got, yv * (1 - yv))


def test_rop_matches_lop(rng: np.random.Generator) -> None:
    x, v = T.dmatrix("x"), T.dmatrix("v")
    xv, vv = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    eps = 1e-6
    for fn, ref in [
        (softmax, lambda a: scipy.special.softmax(a, axis=1)),
        (log_softmax, lambda a: scipy.special.log_softmax(a, axis=1)),
    ]:
        got = opgraph.function([x, v], Rop(fn(x), x, v))(xv, vv)
        fd = (ref(xv + eps * vv) - ref(xv - eps * vv)) / (2 * eps)
        np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-8)


def test_infer_shape(rng: np.random.Generator) -> None:
    x, b, t3 = T.dmatrix("x"), T.dvector("b"), T.dtensor3("t3")
    xv, bv, tv = rng.random((3, 4)), rng.random(4), rng.random((2, 3, 4))
    check_infer_shape([x], softmax(x), [xv], Softmax)
    check_infer_shape([t3], log_softmax(t3, 0), [tv], LogSoftmax)
    check_infer_shape([x, b], softmax_with_bias(x, b), [xv, bv], SoftmaxWithBias)
    check_infer_shape([x], opgraph.grad(softmax(x)[:, 0].sum(), x), [xv], SoftmaxGrad)


@pytest.mark.parametrize("dtype", FLOATS)
def test_activations_match_numpy(dtype: str, rng: np.random.Generator) -> None:
    x = T.matrix("x", dtype=dtype)
    xv = (rng.standard_normal((4, 5)) * 4).astype(dtype)
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    outs = [nnet.relu(x), nnet.relu(x, 0.2), nnet.elu(x), nnet.elu(x, 0.5), nnet.selu(x)]
    outs += [nnet.softsign(x), nnet.sigmoid(x), nnet.softplus(x), nnet.hard_sigmoid(x)]
    expected = [np.maximum(xv, 0), np.where(xv > 0, xv, 0.2 * xv)]
    expected += [np.where(xv > 0, xv, np.expm1(xv)), np.where(xv > 0, xv, 0.5 * np.expm1(xv))]
    expected += [scale * np.where(xv > 0, xv, alpha * np.expm1(xv))]
    expected += [xv / (1 + np.abs(xv)), scipy.special.expit(xv), np.logaddexp(0, xv)]
    expected += [np.clip(0.2 * xv + 0.5, 0, 1)]
    check_modes([x], outs, [xv], [np.asarray(e, dtype=dtype) for e in expected])
    for out in outs:
        assert out.type.dtype == dtype


def test_ultra_fast_sigmoid_accuracy(mode: str) -> None:
    x = T.dvector("x")
    xv = np.linspace(-20, 20, 4001)
    got = opgraph.function([x], nnet.ultra_fast_sigmoid(x), mode=mode)(xv)
    err = np.abs(got - scipy.special.expit(xv))
    assert err.max() < 0.03  # the documented accuracy (about 0.028)
    assert got[2000] == 0.5 and got.min() > 0.0024 and got.max() < 0.9976
    assert str(nnet.ultra_fast_sigmoid) == "ultra_fast_sigmoid"
    y = T.fvector("y")
    assert nnet.ultra_fast_sigmoid(y).type.dtype == "float32"
    assert nnet.ultra_fast_sigmoid(T.ivector()).type.dtype == "float64"
    assert nnet.sigm.scalar_sigmoid is opgraph.scalar.basic.sigmoid
