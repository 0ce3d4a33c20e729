"""nnet cross-entropies: one-hot and distribution targets, binary, and the fused softmax ops."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.special

import opgraph
import opgraph.tensor as T
import opgraph.tensor.nnet as nnet
from opgraph.gradient import NullTypeGradError
from opgraph.gradient import verify_grad as _verify_grad
from opgraph.tensor.nnet import (
    CrossentropyCategorical1Hot,
    CrossentropyCategorical1HotGrad,
    CrossentropySoftmax1HotWithBiasDx,
    CrossentropySoftmaxArgmax1HotWithBias,
    binary_crossentropy,
    categorical_crossentropy,
    crossentropy_categorical_1hot,
    crossentropy_softmax_1hot,
    crossentropy_softmax_1hot_with_bias,
    crossentropy_softmax_1hot_with_bias_dx,
    crossentropy_softmax_argmax_1hot_with_bias,
)
from opgraph.testing.checks import assert_allclose, check_infer_shape, check_modes

FLOATS = ["float32", "float64"]


def verify_grad(fun: Any, pt: list[np.ndarray], rng: np.random.Generator) -> None:
    """verify_grad on a fixed random weighting of ``fun``'s output (any shape)."""
    ins = [T.TensorType("float64", [False] * np.ndim(p))() for p in pt]
    shape = np.shape(opgraph.function(ins, fun(*ins))(*pt))
    weights = rng.random(shape) + 0.5
    _verify_grad(lambda *a: (fun(*a) * weights).sum(), pt, rng=rng)


def reference(x: np.ndarray, b: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    """NumPy nll, softmax and argmax of the logits ``x + b``."""
    logits = x + b
    lsm = scipy.special.log_softmax(logits, axis=1)
    return [-lsm[np.arange(len(y)), y], np.exp(lsm), np.argmax(logits, axis=1)]


@pytest.mark.parametrize("dtype", FLOATS)
def test_forward_matches_numpy_in_every_mode(dtype: str, rng: np.random.Generator) -> None:
    x, b = T.matrix("x", dtype=dtype), T.vector("b", dtype=dtype)
    p, t = T.matrix("p", dtype=dtype), T.matrix("t", dtype=dtype)
    y = T.lvector("y")
    xv, bv = rng.standard_normal((4, 5)).astype(dtype), rng.standard_normal(5).astype(dtype)
    yv = np.array([0, 4, 2, 2])
    pv = scipy.special.softmax(xv.astype("float64"), axis=1).astype(dtype)
    tv = scipy.special.softmax(rng.standard_normal((4, 5)), axis=1).astype(dtype)
    outs = [*crossentropy_softmax_argmax_1hot_with_bias(x, b, y)]
    outs += [crossentropy_softmax_1hot(x, y)[0], categorical_crossentropy(p, y)]
    outs += [categorical_crossentropy(p, t), binary_crossentropy(p, t)]
    outs += [nnet.sigmoid_binary_crossentropy(x, t)]
    expected = [*reference(xv, bv, yv), reference(xv, 0, yv)[0], -np.log(pv[np.arange(4), yv])]
    expected += [-(tv * np.log(pv)).sum(1), -(tv * np.log(pv) + (1 - tv) * np.log(1 - pv))]
    sig = scipy.special.expit(xv.astype("float64"))
    expected += [-(tv * np.log(sig) + (1 - tv) * np.log(1 - sig))]
    expected = [np.asarray(e, dtype=dtype if i != 2 else "int64") for i, e in enumerate(expected)]
    check_modes([x, b, y, p, t], outs, [xv, bv, yv, pv, tv], expected)
    assert [o.type.dtype for o in outs] == [dtype, dtype, "int64"] + [dtype] * 5


def test_gradients_stay_finite_for_huge_logits(mode: str) -> None:
    x, y = T.dmatrix("x"), T.lvector("y")
    xv = np.array([[1000.0, -1000.0, 0.0], [-1000.0, -1000.0, 1000.0], [0, 1000, -1000]])
    yv = np.array([1, 2, 0])
    nll, sm = crossentropy_softmax_1hot(x, y)
    g = opgraph.grad(nll.mean(), x)
    g_both = opgraph.grad(nll.sum() + (sm * [[1.0, 2, 3]]).sum(), x)
    nll_v, gv, g2 = opgraph.function([x, y], [nll, g, g_both], mode=mode)(xv, yv)
    assert np.isfinite(nll_v).all() and np.isfinite(gv).all() and np.isfinite(g2).all()
    assert_allclose(nll_v, [2000.0, 0.0, 1000.0])
    onehot = np.eye(3)[yv]
    assert_allclose(gv, (scipy.special.softmax(xv, axis=1) - onehot) / 3)


def test_gradients(rng: np.random.Generator) -> None:
    xv, bv = rng.standard_normal((4, 5)), rng.standard_normal(5)
    yv = np.array([0, 4, 2, 2])
    y = T.constant(yv)
    tv = scipy.special.softmax(rng.standard_normal((4, 5)), axis=1)
    pv = scipy.special.softmax(xv, axis=1)
    verify_grad(lambda x, b: crossentropy_softmax_1hot_with_bias(x, b, y)[0], [xv, bv], rng)
    verify_grad(lambda x, b: crossentropy_softmax_1hot_with_bias(x, b, y)[1], [xv, bv], rng)
    verify_grad(lambda x: crossentropy_softmax_1hot(x, y)[0], [xv], rng)
    verify_grad(lambda p: crossentropy_categorical_1hot(p, y), [pv], rng)
    verify_grad(lambda p, t: categorical_crossentropy(p, t), [pv, tv], rng)
    verify_grad(binary_crossentropy, [pv, tv], rng)
    verify_grad(nnet.sigmoid_binary_crossentropy, [xv, tv], rng)
    sm = scipy.special.softmax(xv, axis=1)
    verify_grad(
        lambda dy, s: crossentropy_softmax_1hot_with_bias_dx(dy, s, y), [rng.random(4), sm], rng
    )
    dy0 = np.asarray(rng.random())
    verify_grad(lambda dy, s: crossentropy_softmax_1hot_with_bias_dx(dy, s, y), [dy0, sm], rng)


def test_index_inputs_have_no_gradient() -> None:
    x, y = T.dmatrix("x"), T.lvector("y")
    with pytest.raises(NullTypeGradError, match="class indices"):
        opgraph.grad(crossentropy_softmax_1hot(x, y)[0].sum(), y)
    with pytest.raises(NullTypeGradError, match="class indices"):
        opgraph.grad(crossentropy_categorical_1hot(x, y).sum(), y)


@pytest.mark.nonfinite
def test_empty_batch_and_non_finite(rng: np.random.Generator) -> None:
    x, y = T.dmatrix("x"), T.lvector("y")
    nll, sm = crossentropy_softmax_1hot(x, y)
    f = opgraph.function([x, y], [nll, sm, opgraph.grad(nll.sum(), x)])
    outs = f(np.zeros((0, 3)), np.zeros(0, dtype="int64"))
    assert [o.shape for o in outs] == [(0,), (0, 3), (0, 3)]
    nll_v, sm_v, _ = f(np.array([[np.nan, 0.0], [0.0, 0.0]]), np.array([0, 1]))
    assert np.isnan(nll_v[0]) and np.isnan(sm_v[0]).all()
    assert_allclose(nll_v[1], np.log(2.0))
    p = T.dmatrix("p")
    zero_prob = opgraph.function([p, y], crossentropy_categorical_1hot(p, y))
    assert_allclose(zero_prob(np.array([[0.0, 1.0]]), np.array([0])), [np.inf])


def test_bad_inputs_give_clear_errors() -> None:
    x, b, y = T.dmatrix("x"), T.dvector("b"), T.lvector("y")
    with pytest.raises(TypeError, match=r"(?s)input 2 \(y_idx\) must be a vector of integer"):
        crossentropy_softmax_argmax_1hot_with_bias(x, b, T.dvector())
    with pytest.raises(TypeError, match=r"input 0 \(coding_dist\) must have 2 dimension"):
        crossentropy_categorical_1hot(T.dvector(), y)
    with pytest.raises(
        TypeError, match=r"must have the dimensions of coding_dist \(.*\) or one fewer"
    ):
        categorical_crossentropy(x, T.dtensor3())
    with pytest.raises(TypeError, match="must have a float dtype"):
        crossentropy_softmax_1hot(T.lmatrix(), y)
    f = opgraph.function([x, y], crossentropy_softmax_1hot(x, y)[0])
    with pytest.raises(ValueError, match="class index 3 is out of bounds for 3 classes"):
        f(np.zeros((2, 3)), np.array([0, 3]))
    with pytest.raises(ValueError, match="class index -1 is out of bounds"):
        f(np.zeros((2, 3)), np.array([-1, 0]))
    with pytest.raises(ValueError, match="1 class indices for 2 rows"):
        f(np.zeros((2, 3)), np.array([0]))
    g = opgraph.function([x, b, y], crossentropy_softmax_1hot_with_bias(x, b, y)[0])
    with pytest.raises(ValueError, match="b has 2 elements for 3 columns"):
        g(np.zeros((2, 3)), np.zeros(2), np.array([0, 1]))


def test_printed_names() -> None:
    assert (
        str(crossentropy_softmax_argmax_1hot_with_bias) == "CrossentropySoftmaxArgmax1HotWithBias"
    )
    assert str(crossentropy_softmax_1hot_with_bias_dx) == "CrossentropySoftmax1HotWithBiasDx"
    assert str(crossentropy_categorical_1hot) == "CrossentropyCategorical1Hot"
    assert str(nnet.crossentropy_categorical_1hot_grad) == "CrossentropyCategorical1HotGrad"


def test_infer_shape(rng: np.random.Generator) -> None:
    x, b, y = T.dmatrix("x"), T.dvector("b"), T.lvector("y")
    xv, bv, yv = rng.random((4, 3)), rng.random(3), np.array([0, 1, 2, 1])
    outs = crossentropy_softmax_argmax_1hot_with_bias(x, b, y)
    check_infer_shape([x, b, y], outs, [xv, bv, yv], CrossentropySoftmaxArgmax1HotWithBias)
    g = opgraph.grad(outs[0].sum(), x)
    check_infer_shape([x, b, y], g, [xv, bv, yv], CrossentropySoftmax1HotWithBiasDx)
    ce = crossentropy_categorical_1hot(x, y)
    check_infer_shape([x, y], ce, [xv + 0.1, yv], CrossentropyCategorical1Hot)
    gce = opgraph.grad(ce.sum(), x)
    check_infer_shape([x, y], gce, [xv + 0.1, yv], CrossentropyCategorical1HotGrad)
