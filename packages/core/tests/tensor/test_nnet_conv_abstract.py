"""The abstract convolutions (``nnet.abstract_conv``): values against SciPy and Theano 1.0.5,
gradients, shapes, and the errors for bad input."""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import numpy as np
import pytest
import scipy.signal

import opgraph
import opgraph.tensor as T
from opgraph.configdefaults import config
from opgraph.gradient import Rop, verify_grad
from opgraph.tensor.nnet import abstract_conv as ac
from opgraph.tensor.nnet.conv_builders import nnet_conv2d
from opgraph.tensor.nnet.conv_shapes import ConvShapeCheck
from opgraph.testing.checks import assert_allclose, check_infer_shape, check_modes

pytestmark = pytest.mark.filterwarnings("ignore::opgraph.link.dispatch.KernelFallbackWarning")

FLOATS = ["float32", "float64"]


def tensor(ndim: int, dtype: str = "float64", name: str | None = None) -> Any:
    return T.TensorType(dtype, (False,) * ndim)(name)


def scipy_conv(img: np.ndarray, kern: np.ndarray, pads: Any, sub: Any, dil: Any, groups: int,
               flip: bool) -> np.ndarray:  # fmt: skip
    """Grouped, padded, strided, dilated convolution (``flip``) or correlation with SciPy."""
    img.ndim - 2
    imgpad = np.pad(img.astype("float64"), ((0, 0), (0, 0), *pads))
    dk = np.zeros(kern.shape[:2] + tuple((k - 1) * d + 1 for k, d in zip(kern.shape[2:], dil)))
    dk[(Ellipsis, *(slice(None, None, d) for d in dil))] = kern
    B, C, O = img.shape[0], img.shape[1], kern.shape[0]
    Cg, Og = C // groups, O // groups
    fun = scipy.signal.convolve if flip else scipy.signal.correlate
    res = []
    for b, o in itertools.product(range(B), range(O)):
        G = o // Og
        acc = sum(fun(imgpad[b, G * Cg + c], dk[o, c], mode="valid") for c in range(Cg))
        res.append(acc[tuple(slice(None, None, s) for s in sub)])
    return np.array(res).reshape(B, O, *res[0].shape)


def pads_of(mode: Any, kshape: tuple[int, ...], dil: tuple[int, ...]) -> Any:
    dk = tuple((k - 1) * d + 1 for k, d in zip(kshape, dil))
    return ac.border_mode_to_pad(mode if not isinstance(mode, int) else (mode,) * len(dk),
                                 len(dk), dk)  # fmt: skip


# -- golden values of Theano 1.0.5 ----------------------------------------------------------
IMG = np.arange(12.0).reshape(1, 1, 3, 4)
KERN = np.array([[[[1.0, 2.0], [3.0, 5.0]]]])


def test_conv2d_golden_values_of_theano(mode: str) -> None:
    x, w = T.dtensor4("x"), T.dtensor4("w")
    outs = [
        ac.conv2d(x, w),
        ac.conv2d(x, w, filter_flip=False),
        ac.conv2d(x, w, border_mode="full", subsample=(2, 2)),
        ac.conv2d(x, w, border_mode=((1, 0), (0, 1)), filter_dilation=(1, 2), filter_flip=False),
    ]
    y = ac.conv2d(x, w, border_mode="half", subsample=(2, 1))
    outs += opgraph.grad((y * y).sum(), [x, w])
    expected = [
        [[[[16.0, 27.0, 38.0], [60.0, 71.0, 82.0]]]],
        [[[[39.0, 50.0, 61.0], [83.0, 94.0, 105.0]]]],
        [[[[0.0, 4.0, 6.0], [20.0, 71.0, 57.0]]]],
        [[[[10.0, 18.0, 6.0], [46.0, 57.0, 20.0], [90.0, 101.0, 36.0]]]],
        [[[[4.0, 18.0, 36.0, 38.0], [720.0, 1070.0, 1246.0, 1062.0],
           [280.0, 404.0, 470.0, 392.0]]]],
        [[[[4684.0, 5204.0], [2760.0, 2972.0]]]],
    ]  # fmt: skip
    got = opgraph.function([x, w], outs, mode=mode)(IMG, KERN)
    for g, e in zip(got, expected, strict=True):
        assert_allclose(g, np.array(e))


def test_extras_golden_values_of_theano() -> None:
    x = T.dtensor4("x")
    img = np.arange(4.0).reshape(1, 1, 2, 2)
    f = opgraph.function(
        [x],
        [ac.bilinear_upsampling(x, 2),
         ac.bilinear_upsampling(x, frac_ratio=(3, 2), use_1D_kernel=False)],
    )  # fmt: skip
    up, frac = f(img)
    assert_allclose(up, [[[[0.0, 0.5, 1.0, 1.0], [1.0, 1.5, 2.0, 2.0], [2.0, 2.5, 3.0, 3.0],
                           [2.0, 2.5, 3.0, 3.0]]]])  # fmt: skip
    third = 1 / 3
    assert_allclose(frac, [[[[0.0, third, 1.0], [2 * third, 1.0, 1 + 2 * third],
                             [2.0, 2 + third, 3.0]]]])  # fmt: skip
    x3, w3 = T.dtensor3("x3"), T.dtensor3("w3")
    causal = ac.causal_conv1d(x3, w3, (1, 1, 2))
    got = opgraph.function([x3, w3], causal)(np.arange(5.0).reshape(1, 1, 5), [[[1.0, 10.0]]])
    assert_allclose(got, [[[0.0, 1.0, 12.0, 23.0, 34.0]]])
    assert_allclose(ac.bilinear_kernel_1D(3).eval(), np.array([1, 2, 3, 2, 1]) / 3)
    assert_allclose(ac.bilinear_kernel_2D((2, 3), normalize=False).eval(),
                    np.outer([1, 2, 1], [1, 2, 3, 2, 1]))  # fmt: skip


def test_shape_helpers_golden_values_of_theano() -> None:
    assert ac.get_conv_output_shape((2, 3, 10, 11), (4, 3, 3, 2), "half", (2, 3), (2, 1)) == (
        2, 4, 5, 4)  # fmt: skip
    assert ac.get_conv_output_shape((2, 3, 10, 11), (4, 3, 3, 2), ((1, 2), 3), (1, 1)) == (
        2, 4, 11, 16)  # fmt: skip
    assert ac.get_conv_output_shape((None, 3, 10, 11, 7), (4, 3, 3, 2, 1), "full", (1, 2, 3)) == (
        None, 4, 12, 6, 3)  # fmt: skip
    assert ac.get_conv_shape_1axis(10, 3, "full", 2, 2) == 7
    assert ac.get_conv_shape_1axis(10, 4, "half", 1, 1) == 11
    assert ac.get_conv_shape_1axis(None, 3, "valid", 1) is None
    assert ac.get_conv_gradweights_shape((2, 3, 10, 11), (2, 4, 8, 10), "valid", (1, 1)) == (
        4, 3, 3, 2)  # fmt: skip
    assert ac.get_conv_gradweights_shape(
        (2, 6, 10, 11), (2, 4, 12, 12), ((1, 2), 1), (1, 1), num_groups=2, unshared=True
    ) == (2, 12, 12, 6, 2, 2)  # Theano divides the first entry
    assert ac.get_conv_gradweights_shape_1axis(10, 8, "half", 1, 1) is None
    assert ac.get_conv_gradweights_shape_1axis(10, 12, "full", 1, 1) == 3
    assert ac.get_conv_gradweights_shape_1axis(10, 6, "valid", 1, 2) == 3
    assert ac.get_conv_gradinputs_shape((4, 3, 3, 2), (2, 4, 8, 10), "valid", (1, 1)) == (
        2, 3, 10, 11)  # fmt: skip
    assert ac.get_conv_gradinputs_shape(
        (4, 3, 3, 2), (2, 4, 8, 10), "half", (2, 1), num_groups=2
    ) == (2, 6, None, 9)
    assert ac.get_conv_gradinputs_shape_1axis(3, 8, (1, 2), 1, 2) == 9
    assert ac.get_conv_gradinputs_shape_1axis(3, 8, "full", 1, 1) == 6
    check = ac.check_conv_gradinputs_shape
    assert check((2, 3, 10, 11), (4, 3, 3, 2), (2, 4, 8, 10), "valid", (1, 1))
    assert not check((2, 3, 10, 11), (4, 3, 3, 2), (2, 4, 9, 10), "valid", (1, 1))
    assert check((2, 3, 10, 11), (4, 3, 3, 2), (2, 4, None, 10), "valid", (1, 1))
    assert not check((2, 3, 10), (4, 3, 3, 2), (2, 4, 8, 10), "valid", (1, 1))
    assert ac.border_mode_to_pad("half", 2, (3, 4)) == ((1, 1), (2, 2))
    assert ac.border_mode_to_pad((1, (2, 3)), 2, (3, 3)) == ((1, 1), (2, 3))
    assert ac.border_mode_to_pad("full", 3, (3, 4, 2)) == ((2, 2), (3, 3), (1, 1))
    with pytest.raises(ValueError, match="invalid border_mode"):
        ac.border_mode_to_pad("same", 2, (3, 3))
    # symbolic lengths give a graph
    n = T.lscalar("n")
    out = ac.get_conv_output_shape((2, 3, n, 11), (4, 3, 3, 2), "full", (2, 1))
    assert out[2].eval({n: 10}) == 6 and out[3] == 12


# -- values against SciPy --------------------------------------------------------------------
MODES_2D = ["valid", "full", "half", 1, (2, 1), ((1, 0), (0, 2))]


@pytest.mark.parametrize("dtype", FLOATS)
def test_conv2d_matches_scipy(dtype: str, rng: np.random.Generator) -> None:
    x, w = tensor(4, dtype, "x"), tensor(4, dtype, "w")
    xv = rng.standard_normal((2, 4, 7, 6)).astype(dtype)
    wv = rng.standard_normal((4, 2, 3, 2)).astype(dtype)
    outs, expected = [], []
    for bm, sub, dil, g, flip in itertools.product(
        MODES_2D, [(1, 1), (2, 3)], [(1, 1), (2, 1)], [1, 2], [True, False]
    ):
        if (dil == (2, 1)) + (sub == (2, 3)) + (g == 2) > 2:
            continue  # fewer nodes: every parameter still meets every other one
        kern = wv if g == 2 else np.concatenate([wv, wv], 1)
        wk = w if g == 2 else T.concatenate([w, w], 1)
        outs.append(ac.conv2d(x, wk, border_mode=bm, subsample=sub, filter_dilation=dil,
                              num_groups=g, filter_flip=flip))  # fmt: skip
        pads = pads_of(bm, (3, 2), dil)
        expected.append(scipy_conv(xv, kern, pads, sub, dil, g, flip).astype(dtype))
    check_modes([x, w], outs, [xv, wv], expected, modes=["FAST_RUN"])
    assert all(o.type.dtype == dtype for o in outs)


@pytest.mark.parametrize("dtype", FLOATS)
def test_conv3d_matches_scipy(dtype: str, rng: np.random.Generator) -> None:
    x, w = tensor(5, dtype, "x"), tensor(5, dtype, "w")
    xv = rng.standard_normal((1, 2, 5, 4, 5)).astype(dtype)
    wv = rng.standard_normal((2, 1, 2, 3, 2)).astype(dtype)
    cases = [
        ("valid", (1, 1, 1), (1, 1, 1), True),
        ("full", (2, 1, 1), (1, 1, 2), False),
        ("half", (1, 2, 1), (1, 1, 1), True),
        ((1, 0, 2), (1, 1, 2), (2, 1, 1), False),
    ]
    outs, expected = [], []
    for bm, sub, dil, flip in cases:
        outs.append(ac.conv3d(x, w, border_mode=bm, subsample=sub, filter_dilation=dil,
                              filter_flip=flip, num_groups=2))  # fmt: skip
        expected.append(scipy_conv(xv, wv, pads_of(bm, (2, 3, 2), dil), sub, dil, 2, flip))
    check_modes([x, w], outs, [xv, wv], [e.astype(dtype) for e in expected])


def unshared_reference(img: np.ndarray, kern: np.ndarray, pads: Any, sub: Any, flip: bool,
                       groups: int) -> np.ndarray:  # fmt: skip
    """Each output position with its own filter (brute force)."""
    imgpad = np.pad(img, ((0, 0), (0, 0), *pads))
    O, oh, ow, Cg, kh, kw = kern.shape
    Og = O // groups
    out = np.zeros((img.shape[0], O, oh, ow))
    for o, i, j in itertools.product(range(O), range(oh), range(ow)):
        G = o // Og
        k = kern[o, i, j][:, ::-1, ::-1] if flip else kern[o, i, j]
        win = imgpad[
            :, G * Cg : (G + 1) * Cg, i * sub[0] : i * sub[0] + kh, j * sub[1] : j * sub[1] + kw
        ]
        out[:, o, i, j] = (win * k).sum(axis=(1, 2, 3))
    return out


@pytest.mark.parametrize("flip", [True, False])
def test_unshared_conv2d(flip: bool, rng: np.random.Generator) -> None:
    x, w = T.dtensor4("x"), tensor(6, name="w")
    xv = rng.standard_normal((2, 4, 5, 6))
    wv = rng.standard_normal((2, 3, 4, 2, 2, 2))
    y = ac.conv2d(x, w, border_mode=((1, 0), 1), subsample=(2, 2), filter_flip=flip,
                  num_groups=2, unshared=True)  # fmt: skip
    expected = unshared_reference(xv, wv, ((1, 0), (1, 1)), (2, 2), flip, 2)
    check_modes([x, w], y, [xv, wv], expected, modes=["FAST_RUN", "DEBUG_MODE"])


# -- gradients, infer_shape, R_op ------------------------------------------------------------
def weighted(fun: Any, rng: np.random.Generator, shape: tuple[int, ...]) -> Any:
    weights = rng.random(shape) + 0.5
    return lambda *a: (fun(*a) * weights).sum()


GRAD_CASES = [
    (2, dict(border_mode="valid"), (2, 2, 5, 4), (2, 2, 2, 2)),
    (2, dict(border_mode="half", subsample=(2, 1), filter_dilation=(1, 2), num_groups=2,
             filter_flip=False), (1, 4, 5, 5), (2, 2, 3, 2)),
    (2, dict(border_mode=((1, 0), 1), subsample=(1, 2), unshared=True), (1, 2, 4, 5),
     (2, 4, 3, 2, 2, 2)),
    (3, dict(border_mode=(1, 0, 1), subsample=(1, 2, 1), num_groups=2), (1, 2, 3, 4, 3),
     (2, 1, 2, 2, 2)),
]  # fmt: skip


@pytest.mark.parametrize("case", GRAD_CASES)
def test_verify_grad_every_abstract_op(case: Any, rng: np.random.Generator) -> None:
    nd, params, ishape, kshape = case
    conv, grad_w, grad_i = (ac.conv2d, ac.conv2d_grad_wrt_weights, ac.conv2d_grad_wrt_inputs)
    if nd == 3:
        conv, grad_w, grad_i = (ac.conv3d, ac.conv3d_grad_wrt_weights, ac.conv3d_grad_wrt_inputs)
    xv, wv = rng.standard_normal(ishape), rng.standard_normal(kshape)
    x, w = tensor(len(ishape)), tensor(len(kshape))
    tshape = opgraph.function([x, w], conv(x, w, **params))(xv, wv).shape
    tv = rng.standard_normal(tshape)
    verify_grad(
        weighted(lambda a, b: conv(a, b, **params), rng, tshape), [xv, wv], rng=rng, n_tests=1
    )
    verify_grad(weighted(lambda a, b: grad_w(a, b, kshape, **params), rng, kshape), [xv, tv],
                rng=rng, n_tests=1)  # fmt: skip
    verify_grad(weighted(lambda a, b: grad_i(b, a, ishape, **params), rng, ishape), [wv, tv],
                rng=rng, n_tests=1)  # fmt: skip
    t = tensor(len(tshape))
    outs = [conv(x, w, **params), grad_w(x, t, kshape, **params), grad_i(t, w, ishape, **params)]
    check_infer_shape([x, w, t], outs, [xv, wv, tv], op_class=ac.BaseAbstractConv)


def test_grad_graph_uses_theano_ops() -> None:
    x, w = T.dtensor4("x"), T.dtensor4("w")
    y = ac.conv2d(x, w, input_shape=(2, 3, 5, 5), filter_shape=(4, 3, 3, 3), border_mode="half")
    gx, gw = opgraph.grad(y.sum(), [x, w])
    assert isinstance(gx.owner.op, ac.AbstractConv2d_gradInputs)
    assert isinstance(gw.owner.op, ac.AbstractConv2d_gradWeights)
    assert gx.owner.op.imshp == (2, 3, 5, 5) and gw.owner.op.kshp == (4, 3, 3, 3)
    # the gradient Ops take the checked variables (no second shape check) ...
    assert gw.owner.inputs[0] is y.owner.inputs[0]
    assert isinstance(y.owner.inputs[0].owner.op, ConvShapeCheck)
    # ... and their own gradients are the other two Ops
    ggx = opgraph.grad(gx.sum(), [w])[0]
    assert any(isinstance(n.op, ac.AbstractConv2d) for n in opgraph.graph.traversal.io_toposort(
        [x, w], [ggx]))  # fmt: skip


def test_rop(rng: np.random.Generator) -> None:
    x, w, ex, ew = T.dtensor4("x"), T.dtensor4("w"), T.dtensor4("ex"), T.dtensor4("ew")
    y = ac.conv2d(x, w, border_mode="full", subsample=(1, 2))
    r = Rop(y, [x, w], [ex, ew])
    xv, exv = rng.standard_normal((2, 2, 4, 5)), rng.standard_normal((2, 2, 4, 5))
    wv, ewv = rng.standard_normal((3, 2, 2, 2)), rng.standard_normal((3, 2, 2, 2))
    f = opgraph.function([x, w, ex, ew], r)
    conv = opgraph.function([x, w], y)
    assert_allclose(f(xv, wv, exv, ewv), conv(exv, wv) + conv(xv, ewv))
    with pytest.raises(ValueError, match="R_op is not implemented for grouped"):
        Rop(ac.conv2d(x, w, num_groups=2), [x], [ex])


# -- bad input -------------------------------------------------------------------------------
def test_bad_input_at_graph_build_time() -> None:
    x, w = T.dtensor4("x"), T.dtensor4("w")
    with pytest.raises(TypeError, match=r"conv2d: input must be a 4D tensor .* 3 dimensions") as e:
        ac.conv2d(T.dtensor3("x3"), w)
    assert "test_nnet_conv_abstract.py" in str(e.value)  # the user's line
    with pytest.raises(TypeError, match="conv2d: filters must be a 6D tensor"):
        ac.conv2d(x, w, unshared=True)
    with pytest.raises(TypeError, match="conv3d: input must be a 5D tensor"):
        ac.conv3d(x, w)
    with pytest.raises(
        ValueError,
        match=r"channel mismatch: the input has 6 channels .* "
        r"expect 4 \(2 per filter x num_groups=2\)",
    ):
        ac.conv2d(x, w, input_shape=(None, 6, 8, 8), filter_shape=(4, 2, 3, 3), num_groups=2)
    with pytest.raises(ValueError, match="channel mismatch") as e:
        ac.conv2d(T.constant(np.zeros((1, 3, 5, 5))), np.zeros((2, 2, 3, 3)))
    assert "test_nnet_conv_abstract.py" in str(e.value)
    with pytest.raises(ValueError, match="num_groups=2 does not divide"):
        ac.conv2d(x, w, input_shape=(None, 3, 8, 8), num_groups=2)
    with pytest.raises(
        ValueError,
        match=r"filters are larger than the input along spatial axis "
        r"1: .* length 4 padded by \(1, 1\) is 6",
    ):
        ac.conv2d(x, w, input_shape=(1, 1, 8, 4), filter_shape=(1, 1, 3, 7), border_mode=1)
    # 'full' mode always fits
    ac.conv2d(x, w, input_shape=(1, 1, 2, 2), filter_shape=(1, 1, 5, 5), border_mode="full")
    with pytest.raises(ValueError, match=r"input_shape must have 4 elements .* got 3"):
        ac.conv2d(x, w, input_shape=(1, 8, 8))
    with pytest.raises(ValueError, match=r"filter_shape must have 4 elements"):
        ac.conv2d(x, w, filter_shape=(1, 1, 3, 3, 3))
    with pytest.raises(
        ValueError,
        match=r"input_shape is \(2, 3, 8, 8\), but the variable's "
        r"shape is known to be \(2, 3, 9, 8\)",
    ):
        ac.conv2d(T.constant(np.zeros((2, 3, 9, 8))), w, input_shape=(2, 3, 8, 8))
    with pytest.raises(ValueError, match="constant int values"):
        ac.conv2d(x, w, input_shape=(T.lscalar(), 3, 8, 8))
    with pytest.raises(ValueError, match="unshared filters of shape"):
        ac.conv2d(x, tensor(6), input_shape=(1, 2, 5, 5), filter_shape=(2, 4, 4, 2, 3, 3),
                  unshared=True)  # fmt: skip
    with pytest.raises(TypeError, match=r"img .* must be a float tensor"):
        ac.AbstractConv2d()(T.itensor4(), w)
    with pytest.raises(ValueError, match="the spatial lengths of input_shape must be given"):
        ac.conv2d_grad_wrt_inputs(x, w, (2, 3, None, 4))


def test_bad_op_parameters() -> None:
    for bad in [-1, (1, 2, 3), "same", ((1, -1), 0), (1.5, 1)]:
        with pytest.raises(ValueError, match="invalid border"):
            ac.AbstractConv2d(border_mode=bad)
    with pytest.raises(ValueError, match="only implemented for 2d"):
        ac.AbstractConv3d(border_mode=((1, 2), 0, 0))
    with pytest.raises(ValueError, match="subsample must have 2 elements"):
        ac.AbstractConv2d(subsample=(1, 1, 1))
    with pytest.raises(ValueError, match="greater than zero"):
        ac.AbstractConv2d(num_groups=0)
    with pytest.raises(ValueError, match="Unshared convolution is only implemented for 2d"):
        ac.BaseAbstractConv(3, unshared=True)
    with pytest.raises(ValueError, match="not supported"):
        ac.BaseAbstractConv(4)
    assert ac.AbstractConv2d(border_mode=((0, 0), 0)).border_mode == "valid"
    assert ac.AbstractConv2d(border_mode=((1, 1), (2, 3))).border_mode == (1, (2, 3))
    assert ac.AbstractConv2d(border_mode=2).border_mode == (2, 2)
    assert ac.AbstractConv2d(imshp=(None, T.constant(3), 4, 5)).imshp == (None, 3, 4, 5)
    assert ac.AbstractConv2d() == ac.AbstractConv2d("", None, "valid")
    assert ac.AbstractConv2d().kshp == (None,) * 4
    assert ac.AbstractConv2d(unshared=True).kshp == (None,) * 6


def test_given_shape_checked_at_run_time(rng: np.random.Generator) -> None:
    x, w = T.dtensor4("x"), T.dtensor4("w")
    y = ac.conv2d(x, w, input_shape=(2, 3, 6, 6), filter_shape=(4, 3, 3, 3))
    f = opgraph.function([x, w], y)
    assert f(np.zeros((2, 3, 6, 6)), np.zeros((4, 3, 3, 3))).shape == (2, 4, 4, 4)
    with pytest.raises(
        ValueError,
        match=r"the given input_shape \(imshp\) is \(2, 3, 6, 6\) "
        r".*run time has shape \(2, 3, 7, 6\)",
    ) as e:
        f(np.zeros((2, 3, 7, 6)), np.zeros((4, 3, 3, 3)))
    assert "test_nnet_conv_abstract.py" in str(e.value)
    with pytest.raises(ValueError, match=r"filter_shape \(kshp\) is \(4, 3, 3, 3\)"):
        f(np.zeros((2, 3, 6, 6)), np.zeros((4, 3, 3, 2)))
    # shape inference reads the given lengths
    assert ac.AbstractConv2d(imshp=(2, 3, 6, 6)).infer_shape(
        None, [(T.lscalar(),) * 4, (4, 3, 3, 3)]
    )[0] == (2, 4, 4, 4)


def test_grad_inputs_shape_mismatch_at_run_time() -> None:
    k, t = T.dtensor4("k"), T.dtensor4("t")
    g = ac.conv2d_grad_wrt_inputs(t, k, (1, 2, 6, 6))
    bad = (np.ones((3, 2, 3, 3)), np.ones((1, 3, 5, 4)))
    for mode in [None, opgraph.compile.mode.Mode(linker="py", optimizer=None)]:
        f = opgraph.function([k, t], g, mode=mode)
        assert f(np.ones((3, 2, 3, 3)), np.ones((1, 3, 4, 4))).shape == (1, 2, 6, 6)
        with pytest.raises(ValueError, match=r"topgrad has shape \(1, 3, 5, 4\)"):
            f(*bad)
    # the abstract Op's own message (Theano's), without rewrites
    with pytest.raises(ValueError, match=r"invalid input_shape for gradInputs: .* \(1, 3, 4, 4\)"):
        f(*bad)


def test_assert_helpers() -> None:
    x = T.dtensor4("x")
    assert ac.assert_shape(x, (1, 2, None, None)) is x  # off by default, as in Theano
    with config.change_flags(conv__assert_shape=True):
        checked = ac.assert_shape(x, (1, 2, None, None), "bad shape")
        f = opgraph.function([x], checked)
        f(np.zeros((1, 2, 3, 3)))
        with pytest.raises(AssertionError, match="bad shape"):
            f(np.zeros((1, 3, 3, 3)))
    n = T.lscalar("n")
    shp = ac.assert_conv_shape((2, 3, n, 4))
    assert shp[:2] == (2, 3) and shp[3] == 4
    assert opgraph.function([n], shp[2])(5) == 5
    with pytest.raises(AssertionError, match=r"invalid shape \(dim\[2\] <= 0\)"):
        opgraph.function([n], shp[2])(0)
    with pytest.raises(ValueError, match=r"dim\[3\]: 0 <= 0"):
        ac.assert_conv_shape((2, 3, 4, 0))


# -- builders --------------------------------------------------------------------------------
def test_transpose_separable_and_nnet_conv2d(rng: np.random.Generator) -> None:
    x, w, p = T.dtensor4("x"), T.dtensor4("w"), T.dtensor4("p")
    # conv2d_transpose is the gradient of conv2d with respect to its input
    tv, wv = rng.standard_normal((2, 4, 5, 4)), rng.standard_normal((4, 3, 3, 3))
    img = T.dtensor4("img")
    fwd = ac.conv2d(img, w, border_mode=1, subsample=(2, 2))
    grad = opgraph.grad((fwd * x).sum(), img)
    tr = ac.conv2d_transpose(x, w, (2, 3, 10, 8), border_mode=1, input_dilation=(2, 2))
    f = opgraph.function([img, x, w], [tr, grad])
    a, b = f(np.zeros((2, 3, 10, 8)), tv, wv)
    assert_allclose(a, b)
    # separable = depthwise (groups = channels) then pointwise
    xv, dw, pw = (rng.standard_normal(s) for s in [(2, 3, 6, 6), (6, 1, 3, 3), (4, 6, 1, 1)])
    sep = ac.separable_conv2d(x, w, p, 3, input_shape=(2, 3, 6, 6), depthwise_filter_shape=(
        6, 1, 3, 3), border_mode="half", subsample=(2, 1))  # fmt: skip
    ref = ac.conv2d(ac.conv2d(x, w, border_mode="half", subsample=(2, 1), num_groups=3), p)
    s, r = opgraph.function([x, w, p], [sep, ref])(xv, dw, pw)
    assert_allclose(s, r)
    with pytest.warns(DeprecationWarning, match="image_shape"):
        y = nnet_conv2d(x, w, image_shape=(2, 3, 6, 6))
    assert y.owner.op.imshp == (2, 3, 6, 6)
    with (
        pytest.raises(ValueError, match="should not be given together"),
        pytest.warns(DeprecationWarning),
    ):
        nnet_conv2d(x, w, image_shape=(2, 3, 6, 6), input_shape=(2, 3, 6, 6))
    with pytest.raises(ValueError, match="imshp_logical"):
        nnet_conv2d(x, w, imshp_logical=(1, 2, 3))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        nnet_conv2d(x, w, unroll_batch=2)
    assert any("unroll_batch" in str(r.message) for r in rec)
