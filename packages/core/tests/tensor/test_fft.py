"""rfft / irfft (tensor.fft): Theano 1.0.5's values and gradients, NumPy, shapes, errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.gradient import grad, verify_grad
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.fft import IRFFTOp, RFFTOp, irfft, irfft_op, rfft, rfft_op
from opgraph.tensor.math import cast
from opgraph.tensor.shape import shape_i
from opgraph.testing.checks import check_infer_shape, check_modes

# Recorded from Theano 1.0.5 (THEANO_FLAGS=device=cpu,cxx=): for each norm, the output of
# rfft(x) and grad(sum(rfft(x, norm) * W), x); for irfft, the output of irfft(Z, norm,
# is_odd) and grad(sum(irfft(Z, norm, is_odd) * V), Z).
X = np.array([[0.5, -1.0, 2.0, 0.25, 3.0], [1.5, 0.0, -2.0, 1.0, 0.5]])
W = np.array([[1.0, 2.0, -1.0, 0.5, 0.25, 3.0], [0.5, -0.5, 1.5, 2.0, -1.0, 1.0]]).reshape(2, 3, 2)
Y3 = np.arange(12.0).reshape(1, 3, 4) ** 1.5 - 4
GOLDEN_RFFT = {
    None: (
        [
            [
                [4.75, 0.0],
                [-0.7022542485937369, 2.775601873668786],
                [-0.42274575140626314, 4.015489912686411],
            ],
            [
                [1.0, 0.0],
                [2.463525491562421, 2.238884015024996],
                [0.7864745084375788, -2.559276922739224],
            ],
        ],
        [
            [0.25, -1.7501552579936805, 4.445548165707908, -0.6730056797705396, 2.727612772056312],
            [1.0, -0.7173557989454116, -1.2470564742271613, -0.798028497647576, 4.262440770820149],
        ],
    ),
    "ortho": (
        [
            [
                [2.1242645786248002, 0.0],
                [-0.31405764746872633, 1.2412868935998378],
                [-0.18905764746872633, 1.7957816815463021],
            ],
            [
                [0.4472135954999579, 0.0],
                [1.1017220926874316, 1.0012593702667103],
                [0.3517220926874316, -1.1445434344982763],
            ],
        ],
        [
            [
                0.11180339887498948,
                -0.7826932256105102,
                1.9881095791544767,
                -0.3009772898420763,
                1.2198255149229102,
            ],
            [
                0.4472135954999579,
                -0.3208112660991224,
                -0.5577006096306295,
                -0.3568891937444022,
                1.9062214627240912,
            ],
        ],
    ),
    "no_norm": (
        [
            [
                [4.75, 0.0],
                [-0.7022542485937369, 2.775601873668786],
                [-0.42274575140626314, 4.015489912686411],
            ],
            [
                [1.0, 0.0],
                [2.463525491562421, 2.238884015024996],
                [0.7864745084375788, -2.559276922739224],
            ],
        ],
        [
            [0.25, -1.7501552579936805, 4.445548165707908, -0.6730056797705396, 2.727612772056312],
            [1.0, -0.7173557989454116, -1.2470564742271613, -0.798028497647576, 4.262440770820149],
        ],
    ),
}
GOLDEN_IRFFT = {
    (None, False): (
        [[-0.1875, -0.0625, 0.8125, 0.4375], [0.625, -0.625, -0.875, 1.375]],
        [
            [
                [-2.7755575615628914e-17, 0.0],
                [-0.6666666666666666, 0.6666666666666667],
                [-0.33333333333333337, 0.0],
            ],
            [
                [-5.551115123125783e-17, 0.0],
                [-1.3333333333333333, 1.3333333333333335],
                [-0.6666666666666667, 0.0],
            ],
        ],
    ),
    (None, True): (
        [
            [-0.1, -0.900062103197472, 1.5782192662831633, -0.4692022719082159, 0.8910451088225247],
            [
                0.30000000000000004,
                -0.38694231957816466,
                -0.5988225896908645,
                -0.4192113990590304,
                1.6049763083280595,
            ],
        ],
        [
            [[0.0, 0.0], [-0.5, 0.6881909602355868], [-0.5, 0.16245984811645323]],
            [[0.0, 0.0], [-1.0, 1.3763819204711736], [-1.0, 0.32491969623290645]],
        ],
    ),
    ("ortho", False): (
        [[-0.375, -0.125, 1.625, 0.875], [1.25, -1.25, -1.75, 2.75]],
        [
            [
                [-5.551115123125783e-17, 0.0],
                [-1.3333333333333333, 1.3333333333333335],
                [-0.6666666666666667, 0.0],
            ],
            [
                [-1.1102230246251565e-16, 0.0],
                [-2.6666666666666665, 2.666666666666667],
                [-1.3333333333333335, 0.0],
            ],
        ],
    ),
    ("ortho", True): (
        [
            [
                -0.22360679774997896,
                -2.012600046720978,
                3.5290055628089947,
                -1.0491681751841107,
                1.9924374343458628,
            ],
            [
                0.670820393249937,
                -0.8652293299482239,
                -1.3390080170112377,
                -0.9373851852387833,
                3.588836127698203,
            ],
        ],
        [
            [
                [0.0, 0.0],
                [-1.118033988749895, 1.5388417685876266],
                [-1.118033988749895, 0.3632712640026805],
            ],
            [
                [0.0, 0.0],
                [-2.23606797749979, 3.077683537175253],
                [-2.23606797749979, 0.726542528005361],
            ],
        ],
    ),
    ("no_norm", False): (
        [[-0.75, -0.25, 3.25, 1.75], [2.5, -2.5, -3.5, 5.5]],
        [
            [
                [-1.1102230246251565e-16, 0.0],
                [-2.6666666666666665, 2.666666666666667],
                [-1.3333333333333335, 0.0],
            ],
            [
                [-2.220446049250313e-16, 0.0],
                [-5.333333333333333, 5.333333333333334],
                [-2.666666666666667, 0.0],
            ],
        ],
    ),
    ("no_norm", True): (
        [
            [-0.5, -4.50031051598736, 7.891096331415817, -2.3460113595410794, 4.455225544112624],
            [
                1.5000000000000002,
                -1.9347115978908234,
                -2.9941129484543225,
                -2.096056995295152,
                8.024881541640298,
            ],
        ],
        [
            [[0.0, 0.0], [-2.5, 3.4409548011779334], [-2.5, 0.8122992405822659]],
            [[0.0, 0.0], [-5.0, 6.881909602355867], [-5.0, 1.6245984811645318]],
        ],
    ),
}
GOLDEN_RFFT3 = [
    [
        [
            [131.15518336266567, 0.0],
            [-18.52072518515953, 21.01894440656922],
            [-19.604065000468545, 0.0],
        ],
        [
            [-76.04072236015361, 56.58222768616538],
            [3.1618698185080634, -6.205734671135193],
            [4.750444553293608, -1.9303866343846519],
        ],
        [
            [-76.04072236015361, -56.58222768616538],
            [6.873573992412896, -2.2247524673141292],
            [4.750444553293608, 1.9303866343846519],
        ],
    ]
]
GOLDEN_RFFT3_GRAD = [
    [
        [72.0, -39.0, 24.0, 15.0],
        [-11.411542731880104, 14.19615242270663, -3.803847577293368, -14.19615242270663],
        [-42.58845726811989, 3.803847577293368, -14.19615242270663, -3.803847577293368],
    ]
]


def _v(odd: bool) -> np.ndarray:
    """The weights V of the irfft golden values."""
    return np.linspace(-1, 1, 5 if odd else 4)[None].repeat(2, 0) * np.array([[1.0], [2.0]])


@pytest.mark.parametrize("norm", [None, "ortho", "no_norm"])
def test_rfft_matches_theano(norm: str | None) -> None:
    x = T.dmatrix("x")
    r = rfft(x, norm)
    f = opgraph.function([x], [r, grad((r * W).sum(), x)])
    out, g = f(X)
    want_out, want_g = GOLDEN_RFFT[norm]
    np.testing.assert_allclose(out, want_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g, want_g, rtol=1e-12, atol=1e-12)
    assert out.dtype == "float64" and out.shape == (2, 3, 2)


@pytest.mark.parametrize("norm", [None, "ortho", "no_norm"])
@pytest.mark.parametrize("odd", [False, True])
def test_irfft_matches_theano(norm: str | None, odd: bool) -> None:
    z = T.dtensor3("z")
    r = irfft(z, norm, odd)
    f = opgraph.function([z], [r, grad((r * _v(odd)).sum(), z)])
    out, g = f(W)
    want_out, want_g = GOLDEN_IRFFT[(norm, odd)]
    np.testing.assert_allclose(out, want_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g, want_g, rtol=1e-12, atol=1e-12)
    assert out.shape == (2, 5 if odd else 4)


def test_rfft_3d_matches_theano_and_numpy() -> None:
    y = T.dtensor3("y")
    r = rfft(y)
    f = opgraph.function([y], [r, grad((r * np.arange(18.0).reshape(1, 3, 3, 2)).sum(), y)])
    out, g = f(Y3)
    np.testing.assert_allclose(out, GOLDEN_RFFT3, rtol=1e-12)
    np.testing.assert_allclose(g, GOLDEN_RFFT3_GRAD, rtol=1e-12, atol=1e-12)
    ref = np.fft.rfftn(Y3, axes=(1, 2))
    np.testing.assert_allclose(out[..., 0] + 1j * out[..., 1], ref, rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(3, 6), (2, 7), (2, 3, 4), (1, 2, 3, 5), (0, 4)])
def test_round_trip_and_numpy_in_every_mode(dtype: str, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(0)
    xv = rng.standard_normal(shape).astype(dtype)
    x = T.tensor(dtype, [False] * len(shape), "x")
    odd = shape[-1] % 2 == 1
    spec = np.fft.rfftn(xv, axes=tuple(range(1, len(shape)))) if shape[0] else None
    want_r = (
        np.stack([spec.real, spec.imag], -1)
        if spec is not None
        else np.zeros((0, shape[-1] // 2 + 1, 2))
    )
    outs = [rfft(x), irfft(rfft(x), is_odd=odd), irfft(rfft(x, "ortho"), "ortho", odd)]
    check_modes([x], outs, [xv], [want_r, xv, xv], dtype=dtype)
    f = opgraph.function([x], outs[0])
    assert f(xv).dtype == dtype


def test_explicit_lengths_crop_and_pad() -> None:
    x = T.dmatrix("x")
    s = T.lvector("s")
    xv = np.arange(10.0).reshape(2, 5)
    f = opgraph.function([x, s], rfft_op(x, s))
    for n in (3, 5, 8):
        spec = np.fft.rfft(xv, n=n, axis=1)
        np.testing.assert_allclose(f(xv, [n]), np.stack([spec.real, spec.imag], -1))
    z = T.dtensor3("z")
    g = opgraph.function([z, s], irfft_op(z, s))
    zv = np.stack([spec.real, spec.imag], -1)
    np.testing.assert_allclose(g(zv, [8]), np.fft.irfft(spec, 8) * 8, atol=1e-12)
    with pytest.raises(ValueError, match="positive lengths"):
        f(xv, [2, 3])


def check_symbolic_shape(inputs: list[Any], out: Any, values: list[Any]) -> None:
    """``out.owner.op.infer_shape`` on symbolic input shapes gives the real output shape."""
    node = out.owner
    in_shapes = [tuple(shape_i(v, d) for d in range(v.type.ndim)) for v in node.inputs]
    dims = node.op.infer_shape(node, in_shapes)[0]
    dims = [cast(as_tensor_variable(d), "int64") for d in dims]
    f = opgraph.function(inputs, [out, *dims], on_unused_input="ignore")
    real, *got = f(*values)
    assert tuple(int(d) for d in got) == real.shape


def test_infer_shape() -> None:
    x = T.dtensor3("x")
    s = T.lvector("s")
    xv = np.ones((2, 3, 5))
    check_symbolic_shape([x], rfft_op(x), [xv])
    check_symbolic_shape([x, s], rfft_op(x, s), [xv, np.array([4, 6])])
    z = T.dtensor4("z")
    zv = np.ones((2, 3, 4, 2))
    check_symbolic_shape([z], irfft_op(z), [zv])
    check_symbolic_shape([z, s], irfft_op(z, s), [zv, np.array([3, 7])])
    check_symbolic_shape([z], irfft(z, is_odd=True).owner.inputs[0], [zv])
    check_infer_shape([z], irfft_op(z, np.array([3, 7])), [zv], IRFFTOp)


@pytest.mark.parametrize("shape", [(2, 4), (2, 5), (1, 3, 4), (2, 3, 5)])
def test_verify_grad(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(1)
    xv = rng.standard_normal(shape)
    verify_grad(rfft_op, [xv], rng=rng)
    verify_grad(lambda a: rfft(a, "ortho"), [xv], rng=rng)
    odd = shape[-1] % 2 == 1
    zv = np.fft.rfftn(xv, axes=tuple(range(1, len(shape))))
    zv = np.stack([zv.real, zv.imag], -1)
    verify_grad(lambda a: irfft(a, is_odd=odd), [zv], rng=rng)
    verify_grad(lambda a: irfft(a, "ortho", odd), [zv], rng=rng)


def test_errors() -> None:
    with pytest.raises(TypeError, match="dimension >= 2"):
        rfft_op(T.dvector())
    with pytest.raises(TypeError, match="dimension >= 3"):
        irfft(T.dmatrix())
    with pytest.raises(TypeError, match="real float tensor"):
        rfft(T.imatrix())
    with pytest.raises(TypeError, match="type integer"):
        rfft_op(T.dmatrix(), T.dvector())
    with pytest.raises(ValueError, match="one length per non-batch axis"):
        rfft_op(T.dmatrix(), np.array([3, 4]))
    with pytest.raises(ValueError, match="for norm"):
        rfft(T.dmatrix(), "backward")
    with pytest.raises(ValueError, match="id_odd"):
        irfft(T.dtensor3(), is_odd=2)
    z = T.dtensor3("z")
    f = opgraph.function([z], irfft_op(z))
    with pytest.raises(ValueError, match="real and imaginary parts"):
        f(np.ones((2, 3, 3)))


def test_grad_of_shape_input_is_disconnected() -> None:
    x = T.dmatrix("x")
    node = rfft_op(x).owner
    assert node.op.connection_pattern(node) == [[True], [False]]
    assert isinstance(rfft_op, RFFTOp) and isinstance(irfft_op, IRFFTOp)
