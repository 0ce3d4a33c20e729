"""The legacy convolution paths: ``nnet.conv.conv2d``/``ConvOp``, ``nnet.conv3d2d`` and
``signal.conv.conv2d``, against SciPy and Theano 1.0.5's conventions."""

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
from opgraph.gradient import verify_grad
from opgraph.tensor.nnet import conv as legacy
from opgraph.tensor.nnet import conv3d2d
from opgraph.tensor.nnet.conv_abstract import AbstractConv2d, AbstractConv3d
from opgraph.tensor.signal import conv as signal_conv
from opgraph.testing.checks import assert_allclose, check_infer_shape, check_modes

pytestmark = [
    pytest.mark.filterwarnings("ignore::opgraph.link.dispatch.KernelFallbackWarning"),
    pytest.mark.filterwarnings("ignore:opgraph.tensor.nnet.conv.conv2d is deprecated"),
]


def conv_ref(img: np.ndarray, kern: np.ndarray, mode: str, sub: Any = (1, 1)) -> np.ndarray:
    """``(B, C, H, W) * (O, C, kh, kw)`` true convolution, summed over channels."""
    out = [
        sum(scipy.signal.convolve2d(img[b, c], kern[o, c], mode=mode) for c in range(img.shape[1]))
        for b, o in itertools.product(range(img.shape[0]), range(kern.shape[0]))
    ]
    res = np.array(out).reshape(img.shape[0], kern.shape[0], *out[0].shape)
    return res[:, :, :: sub[0], :: sub[1]]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nnet_conv_conv2d(dtype: str, rng: np.random.Generator) -> None:
    x, w = T.tensor4("x", dtype=dtype), T.tensor4("w", dtype=dtype)
    xv = rng.standard_normal((2, 3, 7, 6)).astype(dtype)
    wv = rng.standard_normal((4, 3, 3, 2)).astype(dtype)
    with pytest.warns(DeprecationWarning, match="nnet.conv.conv2d is deprecated"):
        a = legacy.conv2d(x, w, image_shape=(2, 3, 7, 6), filter_shape=(4, 3, 3, 2))
    b = legacy.conv2d(x, w, border_mode="full", subsample=(2, 3), unroll_batch=2)
    c = legacy.ConvOp(imshp=(3, 7, 6), kshp=(3, 2), nkern=4, bsize=2, dx=1, dy=2)(x, w)
    assert isinstance(a.owner.op, AbstractConv2d) and a.owner.op.filter_flip
    assert isinstance(c.owner.op, AbstractConv2d)
    assert c.owner.op.imshp == (2, 3, 7, 6) and c.owner.op.kshp == (4, 3, 3, 2)
    expected = [conv_ref(xv, wv, "valid"), conv_ref(xv, wv, "full", (2, 3)),
                conv_ref(xv, wv, "valid", (1, 2))]  # fmt: skip
    check_modes([x, w], [a, b, c], [xv, wv], [e.astype(dtype) for e in expected])


def test_nnet_conv_bad_input() -> None:
    x, w = T.dtensor4("x"), T.dtensor4("w")
    with pytest.raises(ValueError, match="'valid' or 'full' in the legacy interface"):
        legacy.conv2d(x, w, border_mode="half")
    with pytest.raises(ValueError, match=r"image_shape \(2, 3, 7, 6\) has 3 channels but "):
        legacy.conv2d(x, w, image_shape=(2, 3, 7, 6), filter_shape=(4, 2, 3, 3))
    with pytest.raises(ValueError, match="constant shape information"):
        legacy.conv2d(x, w, image_shape=(2, T.lscalar(), 7, 6))
    with pytest.raises(ValueError, match="not supported"):
        legacy.conv2d(x, w, imshp_logical=(3, 14, 12))
    with pytest.raises(ValueError, match="len\\(kshp\\) must be 2"):
        legacy.ConvOp(kshp=(3, 3, 3))
    with pytest.raises(TypeError, match="conv2d: input must be a 4D tensor"):
        legacy.conv2d(T.dtensor3(), w)


@pytest.mark.parametrize("ndims", [(2, 2), (3, 2), (2, 3), (3, 3)])
def test_signal_conv2d(ndims: tuple[int, int], rng: np.random.Generator) -> None:
    a, b = ndims
    x, w = T.TensorType("float64", (False,) * a)("x"), T.TensorType("float64", (False,) * b)("w")
    xv = rng.standard_normal((2, 6, 5)[3 - a :])
    wv = rng.standard_normal((3, 3, 2)[3 - b :])
    mode, sub = ("full" if a == 3 else "valid"), ((1, 2) if b == 3 else (1, 1))
    shapes = {}
    if a == 3 and b == 3:
        shapes = {"image_shape": (2, 6, 5), "filter_shape": (3, 3, 2)}
    y = signal_conv.conv2d(x, w, border_mode=mode, subsample=sub, **shapes)
    ref = conv_ref(xv.reshape(-1, 1, 6, 5), wv.reshape(-1, 1, *wv.shape[-2:]), mode, sub)
    if a == 2:
        ref = ref[0]
    elif b == 2:
        ref = ref[:, 0]
    if a == 2 and b == 2:
        ref = ref[0]
    assert y.type.ndim == ref.ndim
    check_modes([x, w], y, [xv, wv], ref, modes=["FAST_RUN", "DEBUG_MODE"])
    check_infer_shape([x, w], y, [xv, wv], op_class=AbstractConv2d)


def test_signal_conv2d_warning_and_errors() -> None:
    x, w = T.dmatrix("x"), T.dmatrix("w")
    with (
        config.change_flags(warn__signal_conv2d_interface=True),
        pytest.warns(UserWarning, match="now outputs a 2d tensor"),
    ):
        signal_conv.conv2d(x, w)
    with pytest.raises(TypeError, match="input must be a 2D image"):
        signal_conv.conv2d(T.dtensor4(), w)
    with pytest.raises(TypeError, match="filters must be 2D"):
        signal_conv.conv2d(x, T.dvector())
    with pytest.raises(ValueError, match="image_shape must have 2 elements"):
        signal_conv.conv2d(x, w, image_shape=(1, 4, 4), filter_shape=(2, 2))


def conv3d_ref(sig: np.ndarray, fil: np.ndarray, modes: tuple[str, str, str]) -> np.ndarray:
    """``(N, T, C, H, W) * (O, Tf, C, Hf, Wf)``: a true 3d convolution per channel pair."""
    pads = []
    for m, k in zip(modes, (fil.shape[1], fil.shape[3], fil.shape[4]), strict=True):
        pads.append({"valid": 0, "full": k - 1, "half": k // 2}[m])
    s = np.pad(sig, ((0, 0), (pads[0],) * 2, (0, 0), (pads[1],) * 2, (pads[2],) * 2))
    out = []
    for n, o in itertools.product(range(sig.shape[0]), range(fil.shape[0])):
        acc = sum(
            scipy.signal.convolve(s[n, :, c], fil[o, :, c], mode="valid")
            for c in range(sig.shape[2])
        )
        out.append(acc)
    res = np.array(out).reshape(sig.shape[0], fil.shape[0], *out[0].shape)
    return res.transpose(0, 2, 1, 3, 4)


def test_conv3d2d(rng: np.random.Generator) -> None:
    S, F = T.TensorType("float64", (False,) * 5)("s"), T.TensorType("float64", (False,) * 5)("f")
    sv, fv = rng.standard_normal((2, 5, 3, 6, 5)), rng.standard_normal((4, 3, 3, 3, 2))
    outs, expected = [], []
    for bm in ["valid", "full", "half", ("full", "valid", "valid"), ("half", "full", "full")]:
        outs.append(conv3d2d.conv3d(S, F, filters_shape=(4, 3, 3, 3, 2), border_mode=bm))
        expected.append(conv3d_ref(sv, fv, bm if isinstance(bm, tuple) else (bm,) * 3))
    assert isinstance(outs[0].owner.inputs[0].owner.op, AbstractConv3d)
    check_modes([S, F], outs, [sv, fv], expected, modes=["FAST_RUN", "DEBUG_MODE"])
    y = conv3d2d.conv3d(S, F, signals_shape=(1, 4, 2, 4, 4), filters_shape=(2, 2, 2, 2, 2))
    verify_grad(lambda a, b: conv3d2d.conv3d(a, b), [sv[:1, :4, :2, :4, :4], fv[:2, :2, :2, :2, :2]],
                rng=rng, n_tests=1)  # fmt: skip
    f = opgraph.function([S, F], y)
    with pytest.raises(ValueError, match="input_shape"):
        f(sv, fv[:2, :2, :2, :2, :2])


def test_conv3d2d_bad_input() -> None:
    S = T.TensorType("float64", (False,) * 5)("s")
    with pytest.raises(ValueError, match="height and width border modes must match"):
        conv3d2d.conv3d(S, S, border_mode=("valid", "full", "valid"))
    with pytest.raises(ValueError, match="give filters_shape"):
        conv3d2d.conv3d(S, S, border_mode=("full", "valid", "valid"))
    with pytest.raises(TypeError, match="signals must be a 5D tensor"):
        conv3d2d.conv3d(T.dtensor4(), S)


def test_diagonal_subtensor(rng: np.random.Generator) -> None:
    d = rng.standard_normal((5, 3, 4))
    view = conv3d2d.get_diagonal_subtensor_view(d, 0, 1)
    assert view.shape == (3, 3, 4) and np.shares_memory(view, d)
    for a, b in itertools.product(range(3), range(3)):
        assert_allclose(view[a, b], d[a + 2 - b, b])
    with pytest.raises(ValueError, match="at least as long"):
        conv3d2d.get_diagonal_subtensor_view(d, 1, 0)
    x, amt = T.dtensor3("x"), T.dtensor3("amt")
    ones = np.ones((3, 3, 4))
    outs = [conv3d2d.diagonal_subtensor(x, 0, 1), conv3d2d.inc_diagonal_subtensor(x, 0, 1, amt)]
    inc = d.copy()
    for a, b in itertools.product(range(3), range(3)):
        inc[a + 2 - b, b] += 1
    check_modes([x, amt], outs, [d, ones], [view.copy(), inc], modes=["FAST_RUN", "DEBUG_MODE"])
    verify_grad(lambda v: conv3d2d.diagonal_subtensor(v, 0, 1), [d], rng=rng, n_tests=1)
    verify_grad(lambda v, a: conv3d2d.inc_diagonal_subtensor(v, 0, 1, a), [d, ones], rng=rng,
                n_tests=1)  # fmt: skip
    assert str(conv3d2d.DiagonalSubtensor(True)) == "DiagonalSubtensor{inplace}"


def test_legacy_gradients(rng: np.random.Generator) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        verify_grad(lambda a, b: legacy.conv2d(a, b, border_mode="full", subsample=(2, 1)),
                    [rng.standard_normal((1, 2, 4, 4)), rng.standard_normal((2, 2, 2, 3))],
                    rng=rng, n_tests=1)  # fmt: skip
    verify_grad(lambda a, b: signal_conv.conv2d(a, b), [rng.standard_normal((2, 4, 4)),
                rng.standard_normal((3, 2, 2))], rng=rng, n_tests=1)  # fmt: skip
