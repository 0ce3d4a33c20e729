"""conv_numpy's three correlation routines and the CorrMM / Corr3dMM Ops against SciPy."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
import scipy.signal

import opgraph
import opgraph.tensor as T
from opgraph.gradient import verify_grad
from opgraph.tensor.nnet import conv_numpy
from opgraph.tensor.nnet.corr import BaseCorrMM, CorrMM, CorrMM_gradInputs, CorrMM_gradWeights
from opgraph.tensor.nnet.corr3d import Corr3dMM, Corr3dMM_gradInputs, Corr3dMM_gradWeights
from opgraph.testing.checks import assert_allclose, check_infer_shape, check_modes

pytestmark = pytest.mark.filterwarnings("ignore::opgraph.link.dispatch.KernelFallbackWarning")

FLOATS = ["float32", "float64"]


def dilate(kern: np.ndarray, dil: tuple[int, ...]) -> np.ndarray:
    """``kern`` with ``d - 1`` zeros between its taps along each of its last axes."""
    nd = len(dil)
    shape = kern.shape[:-nd] + tuple((k - 1) * d + 1 for k, d in zip(kern.shape[-nd:], dil))
    out = np.zeros(shape, kern.dtype)
    out[(Ellipsis, *(slice(None, None, d) for d in dil))] = kern
    return out


def scipy_corr(
    img: np.ndarray,
    kern: np.ndarray,
    pads: Any,
    sub: tuple[int, ...],
    dil: tuple[int, ...],
    groups: int = 1,
    unshared: bool = False,
) -> np.ndarray:
    """The correlation of the module docstring, one ``scipy.signal.correlate`` per channel pair."""
    nd = img.ndim - 2
    imgpad = np.pad(img.astype("float64"), ((0, 0), (0, 0), *pads))
    B, C = img.shape[:2]
    O = kern.shape[0]
    Cg, Og = C // groups, O // groups
    dk = dilate(kern.astype("float64"), dil)
    out = None
    for b, o in itertools.product(range(B), range(O)):
        G = o // Og
        acc = 0.0
        for c in range(Cg):
            if unshared:
                # one filter per output position: correlate each window separately
                k = dk[o]  # (*P, Cg, *dK)
                P = k.shape[:nd]
                acc_u = np.zeros(P)
                for p in itertools.product(*map(range, P)):
                    sl = tuple(
                        slice(p[i] * sub[i], p[i] * sub[i] + k.shape[nd + 1 + i]) for i in range(nd)
                    )
                    window = imgpad[(b, G * Cg + c, *sl)]
                    acc_u[p] = (window * k[(*p, c)]).sum()
                acc = acc + acc_u
            else:
                full = scipy.signal.correlate(imgpad[b, G * Cg + c], dk[o, c], mode="valid")
                acc = acc + full[tuple(slice(None, None, s) for s in sub)]
        if out is None:
            out = np.zeros((B, O, *np.shape(acc)))
        out[b, o] = acc
    assert out is not None
    return out


def random(rng: np.random.Generator, shape: tuple[int, ...], dtype: str = "float64") -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


CASES_2D = [
    # (img shape, kern shape, pads, subsample, dilation, groups)
    ((2, 3, 6, 7), (4, 3, 3, 2), ((0, 0), (0, 0)), (1, 1), (1, 1), 1),
    ((1, 2, 5, 5), (2, 2, 3, 3), ((2, 2), (2, 2)), (1, 1), (1, 1), 1),
    ((2, 4, 7, 6), (6, 2, 2, 3), ((1, 0), (2, 1)), (2, 1), (1, 2), 2),
    ((1, 3, 9, 8), (3, 1, 3, 3), ((1, 1), (1, 1)), (2, 3), (2, 1), 3),
    ((3, 2, 4, 4), (1, 2, 1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1), 1),
]
CASES_3D = [
    ((1, 2, 5, 4, 6), (3, 2, 2, 3, 2), ((0, 0), (1, 1), (0, 2)), (1, 1, 2), (1, 1, 2), 1),
    ((2, 4, 4, 5, 4), (2, 2, 3, 2, 2), ((1, 1), (0, 0), (1, 1)), (2, 1, 1), (1, 2, 1), 2),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", CASES_2D + CASES_3D)
def test_conv_numpy_matches_scipy(case: Any, dtype: str, rng: np.random.Generator) -> None:
    ishape, kshape, pads, sub, dil, g = case
    nd = len(sub)
    img, kern = random(rng, ishape, dtype), random(rng, kshape, dtype)
    top = conv_numpy.corr_forward(img, kern, pads, sub, dil, g)
    assert top.dtype == dtype
    assert_allclose(top, scipy_corr(img, kern, pads, sub, dil, g).astype(dtype))
    # The gradients are the adjoints: <top(x, w), t> = <x, gi(w, t)> = <w, gw(x, t)>.
    t = random(rng, top.shape, dtype)
    gw = conv_numpy.corr_grad_weights(img, t, kshape[-nd:], pads, sub, dil, g)
    gi = conv_numpy.corr_grad_inputs(kern, t, ishape[2:], pads, sub, dil, g)
    assert gw.shape == kern.shape and gi.shape == img.shape
    assert gw.dtype == dtype and gi.dtype == dtype
    ref = (top.astype("float64") * t).sum()
    rtol = 1e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose((gw.astype("float64") * kern).sum(), ref, rtol=rtol)
    np.testing.assert_allclose((gi.astype("float64") * img).sum(), ref, rtol=rtol)
    # one entry of each gradient against its definition
    e = np.zeros_like(img)
    e.flat[rng.integers(e.size)] = 1
    expected = (conv_numpy.corr_forward(e, kern, pads, sub, dil, g) * t).sum()
    np.testing.assert_allclose(gi[e == 1][0], expected, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("sub", [(1, 1), (2, 1)])
def test_conv_numpy_unshared(sub: tuple[int, int], rng: np.random.Generator) -> None:
    pads, dil, g = ((1, 0), (0, 1)), (1, 2), 2
    img = random(rng, (2, 4, 6, 5))
    out = [
        conv_numpy.conv_output_size(n, k, p, s, d)
        for n, k, p, s, d in zip((6, 5), (2, 2), pads, sub, dil)
    ]
    kern = random(rng, (4, *out, 2, 2, 2))
    top = conv_numpy.corr_forward(img, kern, pads, sub, dil, g, unshared=True)
    assert_allclose(top, scipy_corr(img, kern, pads, sub, dil, g, unshared=True))
    t = random(rng, top.shape)
    gw = conv_numpy.corr_grad_weights(img, t, (2, 2), pads, sub, dil, g, unshared=True)
    gi = conv_numpy.corr_grad_inputs(kern, t, (6, 5), pads, sub, dil, g, unshared=True)
    ref = (top * t).sum()
    np.testing.assert_allclose((gw * kern).sum(), ref)
    np.testing.assert_allclose((gi * img).sum(), ref)


def test_conv_numpy_bad_shapes(rng: np.random.Generator) -> None:
    img, kern = random(rng, (1, 3, 4, 4)), random(rng, (2, 2, 3, 3))
    with pytest.raises(ValueError, match="input channels per group"):
        conv_numpy.corr_forward(img, kern)
    with pytest.raises(ValueError, match="smaller than the dilated kernel"):
        conv_numpy.corr_forward(img, random(rng, (2, 3, 5, 5)))
    with pytest.raises(ValueError, match="num_groups=2 must divide"):
        conv_numpy.corr_forward(img, kern, num_groups=2)
    with pytest.raises(ValueError, match="topgrad has shape"):
        conv_numpy.corr_grad_inputs(random(rng, (2, 3, 3, 3)), random(rng, (1, 2, 3, 3)), (4, 4))
    # empty batch and empty channels
    assert conv_numpy.corr_forward(np.zeros((0, 3, 4, 4)), random(rng, (2, 3, 3, 3))).shape == (
        0,
        2,
        2,
        2,
    )
    assert conv_numpy.corr_grad_weights(
        np.zeros((0, 3, 4, 4)), np.zeros((0, 2, 2, 2)), (3, 3)
    ).shape == (2, 3, 3, 3)


def test_corrmm_border_mode_normalization() -> None:
    assert CorrMM().border_mode == "valid"
    assert CorrMM(2).border_mode == ((2, 2), (2, 2))
    assert CorrMM((1, 2)).border_mode == ((1, 1), (2, 2))
    assert CorrMM(((1, 0), 3)).border_mode == ((1, 0), (3, 3))
    assert CorrMM("half").pad == ((-1, -1), (-1, -1))
    assert CorrMM("full").pad == ((-2, -2), (-2, -2))
    assert Corr3dMM(1).border_mode == (1, 1, 1)
    assert Corr3dMM("full").pad == (-2, -2, -2)
    assert CorrMM_gradWeights() == CorrMM_gradWeights("valid", (1, 1), (1, 1), 1, False)
    assert CorrMM() != CorrMM(unshared=True)
    assert isinstance(CorrMM_gradInputs(), BaseCorrMM)
    assert str(CorrMM("half", (2, 2))) == "CorrMM{half, (2, 2), (1, 1), 1 False}"
    assert str(Corr3dMM(1)) == "Corr3dMM{(1, 1, 1), (1, 1, 1), (1, 1, 1), 1}"
    assert CorrMM.__props__ == (
        "border_mode",
        "subsample",
        "filter_dilation",
        "num_groups",
        "unshared",
    )
    for bad in [-1, (1, 2, 3), "same", ((1, -1), 0)]:
        with pytest.raises(ValueError, match="invalid border"):
            CorrMM(bad)
    with pytest.raises(ValueError, match="invalid border"):
        Corr3dMM((1, 2))
    with pytest.raises(ValueError, match="subsample must have two"):
        CorrMM(subsample=(1, 1, 1))
    with pytest.raises(ValueError, match="greater than 0"):
        CorrMM(num_groups=0)


MODES_2D = ["valid", "full", "half", 1, (1, 2), ((2, 0), (1, 3))]


@pytest.mark.parametrize("dtype", FLOATS)
def test_corrmm_values_every_border_mode(dtype: str, rng: np.random.Generator) -> None:
    x, w = T.tensor4("x", dtype=dtype), T.tensor4("w", dtype=dtype)
    xv, wv = random(rng, (2, 4, 7, 6), dtype), random(rng, (4, 2, 3, 2), dtype)
    outs, expected = [], []
    for bm, sub, dil in itertools.product(MODES_2D, [(1, 1), (2, 3)], [(1, 1), (2, 1)]):
        op = CorrMM(bm, sub, dil, num_groups=2)
        outs.append(op(x, w))
        pads = op.pads((3, 2))
        expected.append(scipy_corr(xv, wv, pads, sub, dil, 2).astype(dtype))
    check_modes([x, w], outs, [xv, wv], expected)
    assert all(o.type.dtype == dtype for o in outs)


@pytest.mark.parametrize("dtype", FLOATS)
def test_corr3dmm_values(dtype: str, rng: np.random.Generator) -> None:
    x, w = T.TensorType(dtype, (False,) * 5)("x"), T.TensorType(dtype, (False,) * 5)("w")
    xv, wv = random(rng, (1, 2, 5, 4, 5), dtype), random(rng, (2, 2, 2, 3, 2), dtype)
    outs, expected = [], []
    for bm, sub, dil in [
        ("valid", (1, 1, 1), (1, 1, 1)),
        ("full", (2, 1, 1), (1, 1, 2)),
        ("half", (1, 2, 1), (1, 1, 1)),
        ((1, 0, 2), (1, 1, 2), (2, 1, 1)),
    ]:
        op = Corr3dMM(bm, sub, dil)
        outs.append(op(x, w))
        expected.append(scipy_corr(xv, wv, op.pads((2, 3, 2)), sub, dil).astype(dtype))
    check_modes([x, w], outs, [xv, wv], expected)


def test_corr_grad_ops_values_and_shapes(rng: np.random.Generator) -> None:
    x, w, t = T.dtensor4("x"), T.dtensor4("w"), T.dtensor4("t")
    xv, wv = random(rng, (2, 2, 6, 5)), random(rng, (3, 2, 3, 2))
    outs, expected = [], []
    for bm in ["valid", "full", (1, 2), ((0, 2), (1, 0))]:
        op = CorrMM(bm, (1, 1), (2, 1))
        top = op(x, w)
        tv = random(rng, conv_numpy.corr_forward(xv, wv, op.pads((3, 2)), (1, 1), (2, 1)).shape)
        # without `shape` (inferred) and with it
        for shape in [None, (3, 2)]:
            outs.append(CorrMM_gradWeights(bm, (1, 1), (2, 1))(x, t, shape))
        for shape in [None, (6, 5)]:
            outs.append(CorrMM_gradInputs(bm, (1, 1), (2, 1))(w, t, shape))
        gw = conv_numpy.corr_grad_weights(xv, tv, (3, 2), op.pads((3, 2)), (1, 1), (2, 1))
        gi = conv_numpy.corr_grad_inputs(wv, tv, (6, 5), op.pads((3, 2)), (1, 1), (2, 1))
        expected += [gw, gw, gi, gi]
        f = opgraph.function([x, w, t], [*outs[-4:], top])
        for got, exp in zip(f(xv, wv, tv), [gw, gw, gi, gi], strict=False):
            assert_allclose(got, exp)
        check_infer_shape([x, w, t], [*outs[-4:], top], [xv, wv, tv])


def test_corr_grad_ops_need_shape() -> None:
    x, t = T.dtensor4("x"), T.dtensor4("t")
    with pytest.raises(ValueError, match=r"shape must be given if subsample != \(1, 1\) or"):
        CorrMM_gradWeights("half")(x, t)
    with pytest.raises(ValueError, match="shape must be given"):
        CorrMM_gradWeights(subsample=(2, 1))(x, t)
    with pytest.raises(ValueError, match=r"shape must be given if subsample != \(1, 1\)"):
        CorrMM_gradInputs(subsample=(1, 2))(x, t)
    x5 = T.TensorType("float64", (False,) * 5)()
    with pytest.raises(ValueError, match=r"subsample != \(1, 1, 1\)"):
        Corr3dMM_gradInputs(subsample=(1, 2, 1))(x5, x5)


def test_corr_bad_inputs() -> None:
    x, w = T.dtensor4("x"), T.dtensor4("w")
    with pytest.raises(TypeError, match=r"img must be a 4D tensor .* got TensorType\(float64, 3D"):
        CorrMM()(T.dtensor3(), w)
    with pytest.raises(TypeError, match="kern must be a 6D tensor"):
        CorrMM(unshared=True)(x, w)
    with pytest.raises(TypeError, match="must be float tensors"):
        CorrMM()(T.itensor4(), T.itensor4())
    with pytest.raises(TypeError, match="img must be a 5D tensor"):
        Corr3dMM()(x, w)
    xs = T.constant(np.zeros((1, 3, 5, 5)))
    with pytest.raises(ValueError, match="channel mismatch: the img has 3 channels") as info:
        CorrMM()(xs, np.zeros((2, 2, 3, 3)))
    assert "test_nnet_conv_corr.py" in str(info.value)  # the user's line
    with pytest.raises(ValueError, match="kern are larger than the img"):
        CorrMM()(xs, np.zeros((2, 3, 6, 3)))
    f = opgraph.function([x, w], CorrMM()(x, w))
    with pytest.raises(ValueError, match="input channels per group"):
        f(np.zeros((1, 3, 5, 5)), np.zeros((2, 2, 3, 3)))


def test_corr_dtype_upcast() -> None:
    x, w = T.ftensor4("x"), T.dtensor4("w")
    assert CorrMM()(x, w).type.dtype == "float64"
    assert CorrMM_gradInputs()(T.ftensor4(), T.ftensor4()).type.dtype == "float32"


def _weighted(fun: Any, rng: np.random.Generator, shape: tuple[int, ...]) -> Any:
    weights = rng.random(shape) + 0.5
    return lambda *a: (fun(*a) * weights).sum()


@pytest.mark.parametrize(
    "params",
    [
        ("valid", (1, 1), (1, 1), 1, False),
        ("half", (2, 1), (1, 2), 2, False),
        (((1, 0), 1), (1, 2), (1, 1), 1, True),
    ],
)
def test_corrmm_family_verify_grad(params: Any, rng: np.random.Generator) -> None:
    _bm, sub, dil, g, unshared = params
    fwd, gw, gi = CorrMM(*params), CorrMM_gradWeights(*params), CorrMM_gradInputs(*params)
    xv = random(rng, (2, 2, 5, 4))
    kshape = (2, 2 // g, 2, 2)
    pads = fwd.pads(kshape[-2:])
    out = [
        conv_numpy.conv_output_size(n, k, p, s, d)
        for n, k, p, s, d in zip((5, 4), (2, 2), pads, sub, dil)
    ]
    wv = random(rng, (2, *out, 2 // g, 2, 2) if unshared else kshape)
    tv = random(rng, (2, 2, *out))
    verify_grad(_weighted(fwd, rng, tv.shape), [xv, wv], rng=rng)
    verify_grad(_weighted(lambda a, b: gw(a, b, (2, 2)), rng, wv.shape), [xv, tv], rng=rng)
    verify_grad(_weighted(lambda a, b: gi(a, b, (5, 4)), rng, xv.shape), [wv, tv], rng=rng)


def test_corr3dmm_family_verify_grad(rng: np.random.Generator) -> None:
    params = ((1, 0, 1), (1, 2, 1), (1, 1, 2), None, 2)
    fwd, gw, gi = Corr3dMM(*params), Corr3dMM_gradWeights(*params), Corr3dMM_gradInputs(*params)
    xv, wv = random(rng, (1, 2, 3, 4, 4)), random(rng, (2, 1, 2, 2, 2))
    tv = random(
        rng, conv_numpy.corr_forward(xv, wv, fwd.pads((2, 2, 2)), (1, 2, 1), (1, 1, 2), 2).shape
    )
    verify_grad(_weighted(fwd, rng, tv.shape), [xv, wv], rng=rng)
    verify_grad(_weighted(lambda a, b: gw(a, b, (2, 2, 2)), rng, wv.shape), [xv, tv], rng=rng)
    verify_grad(_weighted(lambda a, b: gi(a, b, (3, 4, 4)), rng, xv.shape), [wv, tv], rng=rng)
