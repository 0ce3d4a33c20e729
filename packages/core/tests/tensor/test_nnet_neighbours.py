"""Sliding windows (``opgraph.tensor.nnet.neighbours``): images2neibs in every mode against
Theano 1.0.5, its gradient, neibs2images, shapes and bad input.

Golden values from the Theano 1.0.5 oracle (``THEANO_FLAGS=device=cpu``). Theano had no
gradient for ``half``, ``full``, ``wrap_centered`` and for ``ignore_borders`` with a step other
than the patch: those golden entries are None and ``verify_grad`` checks ours.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.gradient import NullTypeGradError, verify_grad
from opgraph.tensor.nnet.neighbours import (
    Images2Neibs,
    Images2NeibsGrad,
    images2neibs,
    neibs2images,
)
from opgraph.testing.checks import assert_allclose, check_infer_shape, check_modes

FLOATS = ["float32", "float64"]

#: (mode, image shape, neib_shape, neib_step) -> (output shape, output of images2neibs on
#: arange(image size), gradient of sum(output * cos(0.7 * arange(output size))) or None)
NEIBS_GOLDEN = {
    ("valid", (1, 2, 4, 4), (2, 2), None): (
        (8, 4),
        [
            0,
            1,
            4,
            5,
            2,
            3,
            6,
            7,
            8,
            9,
            12,
            13,
            10,
            11,
            14,
            15,
            16,
            17,
            20,
            21,
            18,
            19,
            22,
            23,
            24,
            25,
            28,
            29,
            26,
            27,
            30,
            31,
        ],
        [
            1.0,
            0.76484219,
            -0.94222234,
            -0.93645669,
            0.16996714,
            -0.5048461,
            -0.49026082,
            0.18651237,
            0.77556588,
            0.99985864,
            -0.51928865,
            -0.9477216,
            0.75390225,
            0.15337386,
            -0.93042627,
            -0.47553693,
            0.20300486,
            0.7860703,
            0.13673722,
            -0.53358439,
            0.99943459,
            0.74274917,
            -0.95295292,
            -0.9241328,
            -0.46067859,
            0.21943996,
            0.7313861,
            0.12006192,
            0.79635247,
            0.99872797,
            -0.54772926,
            -0.95791481,
        ],
    ),
    ("valid", (1, 1, 4, 5), (3, 3), (1, 2)): (
        (4, 9),
        [
            0,
            1,
            2,
            5,
            6,
            7,
            10,
            11,
            12,
            2,
            3,
            4,
            7,
            8,
            9,
            12,
            13,
            14,
            5,
            6,
            7,
            10,
            11,
            12,
            15,
            16,
            17,
            7,
            8,
            9,
            12,
            13,
            14,
            17,
            18,
            19,
        ],
        [
            1.0,
            0.76484219,
            1.16982578,
            0.75390225,
            0.15337386,
            0.49458848,
            -0.19947317,
            -0.32028016,
            -0.21633551,
            -0.81036436,
            -1.02384521,
            -0.76644055,
            -1.17183311,
            -0.75490994,
            -0.13150775,
            -0.46067859,
            0.21943996,
            0.35066247,
            0.23581302,
            0.80640949,
        ],
    ),
    ("ignore_borders", (1, 1, 5, 5), (2, 2), None): (
        (4, 4),
        [0, 1, 5, 6, 2, 3, 7, 8, 10, 11, 15, 16, 12, 13, 17, 18],
        [
            1.0,
            0.76484219,
            -0.94222234,
            -0.93645669,
            0.0,
            0.16996714,
            -0.5048461,
            -0.49026082,
            0.18651237,
            0.0,
            0.77556588,
            0.99985864,
            -0.51928865,
            -0.9477216,
            0.0,
            0.75390225,
            0.15337386,
            -0.93042627,
            -0.47553693,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
        ],
    ),
    ("ignore_borders", (1, 1, 5, 6), (2, 3), (2, 2)): (
        (4, 6),
        [0, 1, 2, 6, 7, 8, 2, 3, 4, 8, 9, 10, 12, 13, 14, 18, 19, 20, 14, 15, 16, 20, 21, 22],
        None,
    ),
    ("half", (1, 1, 3, 4), (3, 3), (1, 1)): (
        (12, 9),
        [
            0,
            0,
            0,
            0,
            0,
            1,
            0,
            4,
            5,
            0,
            0,
            0,
            0,
            1,
            2,
            4,
            5,
            6,
            0,
            0,
            0,
            1,
            2,
            3,
            5,
            6,
            7,
            0,
            0,
            0,
            2,
            3,
            0,
            6,
            7,
            0,
            0,
            0,
            1,
            0,
            4,
            5,
            0,
            8,
            9,
            0,
            1,
            2,
            4,
            5,
            6,
            8,
            9,
            10,
            1,
            2,
            3,
            5,
            6,
            7,
            9,
            10,
            11,
            2,
            3,
            0,
            6,
            7,
            0,
            10,
            11,
            0,
            0,
            4,
            5,
            0,
            8,
            9,
            0,
            0,
            0,
            4,
            5,
            6,
            8,
            9,
            10,
            0,
            0,
            0,
            5,
            6,
            7,
            9,
            10,
            11,
            0,
            0,
            0,
            6,
            7,
            0,
            10,
            11,
            0,
            0,
            0,
            0,
        ],
        None,
    ),
    ("half", (1, 1, 4, 4), (2, 2), (2, 2)): (
        (9, 4),
        [
            0,
            0,
            0,
            0,
            0,
            0,
            1,
            2,
            0,
            0,
            3,
            0,
            0,
            4,
            0,
            8,
            5,
            6,
            9,
            10,
            7,
            0,
            11,
            0,
            0,
            12,
            0,
            0,
            13,
            14,
            0,
            0,
            15,
            0,
            0,
            0,
        ],
        None,
    ),
    ("full", (1, 1, 3, 3), (2, 2), (1, 1)): (
        (16, 4),
        [
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            1,
            0,
            0,
            1,
            2,
            0,
            0,
            2,
            0,
            0,
            0,
            0,
            3,
            0,
            1,
            3,
            4,
            1,
            2,
            4,
            5,
            2,
            0,
            5,
            0,
            0,
            3,
            0,
            6,
            3,
            4,
            6,
            7,
            4,
            5,
            7,
            8,
            5,
            0,
            8,
            0,
            0,
            6,
            0,
            0,
            6,
            7,
            0,
            0,
            7,
            8,
            0,
            0,
            8,
            0,
            0,
            0,
        ],
        None,
    ),
    ("wrap_centered", (1, 1, 3, 4), (3, 3), (2, 2)): (
        (4, 9),
        [
            11,
            8,
            9,
            3,
            0,
            1,
            7,
            4,
            5,
            9,
            10,
            11,
            1,
            2,
            3,
            5,
            6,
            7,
            7,
            4,
            5,
            11,
            8,
            9,
            3,
            0,
            1,
            5,
            6,
            7,
            9,
            10,
            11,
            1,
            2,
            3,
        ],
        None,
    ),
}


@pytest.mark.parametrize("key", list(NEIBS_GOLDEN), ids=lambda k: f"{k[0]}-{k[1]}-{k[2]}")
def test_images2neibs_matches_theano(key: tuple, rng: np.random.Generator) -> None:
    mode, shape, neib_shape, neib_step = key
    oshape, values, grad_gold = NEIBS_GOLDEN[key]
    x = T.dtensor4("x")
    out = images2neibs(x, neib_shape, neib_step, mode)
    xv = np.arange(np.prod(shape), dtype="float64").reshape(shape)
    expected = [np.reshape(values, oshape).astype("float64")]
    outs = [out]
    w = np.cos(np.arange(np.prod(oshape)) * 0.7).reshape(oshape)
    if mode != "wrap_centered":
        outs.append(opgraph.grad((out * w).sum(), x))
        if grad_gold is not None:
            expected.append(np.reshape(grad_gold, shape))
        else:  # no Theano value: the scatter-add written out
            expected.append(_scatter(xv, out, w))
    # the golden gradients are rounded to 8 decimals: compare at float32's tolerance
    check_modes([x], outs, [xv], expected, modes=("FAST_RUN", "DEBUG_MODE"), dtype="float32")
    check_infer_shape([x], out, [xv], Images2Neibs)


def _scatter(xv: np.ndarray, out: Any, w: np.ndarray) -> np.ndarray:
    """The gradient by definition: each output element's weight added to its source pixel
    (found by running images2neibs on the pixel indices + 1; 0 marks padding)."""
    x = out.owner.inputs[0]
    idx = opgraph.function([x], out)(np.arange(1, xv.size + 1, dtype="float64").reshape(xv.shape))
    g = np.zeros(xv.size + 1)
    np.add.at(g, idx.astype(int).ravel(), w.ravel())
    return g[1:].reshape(xv.shape)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    ("mode", "neib_shape", "neib_step"),
    [
        ("valid", (2, 3), (1, 2)),
        ("ignore_borders", (2, 3), (2, 1)),
        ("half", (3, 2), (1, 1)),
        ("full", (2, 2), (2, 1)),
    ],
)
def test_gradients_verify(
    mode: str, neib_shape: tuple, neib_step: tuple, dtype: str, rng: np.random.Generator
) -> None:
    xv = rng.standard_normal((2, 1, 4, 5))
    verify_grad(lambda x: images2neibs(x, neib_shape, neib_step, mode) ** 2, [xv], rng=rng)
    # the gradient op's own gradient (images2neibs again)
    x = T.dtensor4()
    out = images2neibs(x, neib_shape, neib_step, mode)
    gz = rng.standard_normal(opgraph.function([x], out)(xv).shape)
    verify_grad(
        lambda g: Images2NeibsGrad(mode)(g, xv.shape, neib_shape, neib_step) ** 2, [gz], rng=rng
    )
    gm = T.dmatrix()
    check_infer_shape(
        [gm], Images2NeibsGrad(mode)(gm, xv.shape, neib_shape, neib_step), [gz], Images2NeibsGrad
    )
    xt = T.tensor4(dtype=dtype)
    o = images2neibs(xt, neib_shape, neib_step, mode)
    g = opgraph.grad(o.sum(), xt)
    assert o.type.dtype == g.type.dtype == dtype
    res = opgraph.function([xt], [o, g])(xv.astype(dtype))
    assert_allclose(res[0], opgraph.function([x], out)(xv).astype(dtype))
    assert res[1].dtype == dtype


def test_wrap_centered_has_no_gradient() -> None:
    x = T.dtensor4()
    with pytest.raises(NullTypeGradError, match="wrap_centered"):
        opgraph.grad(images2neibs(x, (3, 3), mode="wrap_centered").sum(), x)


@pytest.mark.parametrize("dtype", FLOATS)
def test_neibs2images_inverts(dtype: str, rng: np.random.Generator) -> None:
    n = T.matrix(dtype=dtype)
    vals = np.arange(32, dtype=dtype).reshape(8, 4)
    out = neibs2images(n, (2, 2), (1, 2, 4, 4))
    valid = [0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15]  # Theano's
    expected = np.array(valid + [v + 16 for v in valid], dtype=dtype).reshape(1, 2, 4, 4)
    out_ib = neibs2images(n[:4], (2, 2), (1, 1, 5, 5), "ignore_borders")
    ib = [0, 1, 4, 5, 0, 2, 3, 6, 7, 0, 8, 9, 12, 13, 0, 10, 11, 14, 15, 0, 0, 0, 0, 0, 0]
    check_modes(
        [n], [out, out_ib], [vals], [expected, np.array(ib, dtype=dtype).reshape(1, 1, 5, 5)]
    )
    x = T.tensor4(dtype=dtype)
    xv = rng.standard_normal((2, 3, 4, 6)).astype(dtype)
    back = neibs2images(images2neibs(x, (2, 3)), (2, 3), x.shape)
    assert_allclose(opgraph.function([x], back)(xv), xv)
    with pytest.raises(ValueError, match="supports modes 'valid' and 'ignore_borders'"):
        neibs2images(n, (2, 2), (1, 1, 4, 4), "half")


def test_large_batch_is_vectorized(rng: np.random.Generator) -> None:
    """A reference check on a bigger input (a loop over patch positions, as Theano's doc)."""
    xv = rng.standard_normal((3, 2, 9, 8))
    x = T.dtensor4()
    got = opgraph.function([x], images2neibs(x, (3, 2), (2, 3), "ignore_borders"))(xv)
    rows = []
    for i in range(3):
        for j in range(2):
            for a in range(0, 9 - 3 + 1, 2):
                for b in range(0, 8 - 2 + 1, 3):
                    rows.append(xv[i, j, a : a + 3, b : b + 2].ravel())
    assert_allclose(got, np.array(rows))


def test_bad_input() -> None:
    x = T.dtensor4()
    with pytest.raises(TypeError, match="ten4 must be a 4-d tensor"):
        images2neibs(T.dtensor3(), (2, 2))
    with pytest.raises(TypeError, match="neib_shape must be a vector of 2 ints"):
        images2neibs(x, T.dvector())
    with pytest.raises(ValueError, match="neib_shape must have 2 elements"):
        images2neibs(x, (2, 2, 2))
    with pytest.raises(ValueError, match="neib_step values must be positive"):
        images2neibs(x, (2, 2), (0, 1))
    with pytest.raises(ValueError, match="mode must be one of"):
        Images2Neibs("same")
    with pytest.raises(ValueError, match="mode must be one of"):
        Images2NeibsGrad("wrap_centered")
    # known shapes: inconsistent at graph-build time
    xs = T.TensorType("float64", shape=(None, None, 5, 4))()
    with pytest.raises(ValueError, match=r"neib_shape\[0\]=2, neib_step\[0\]=2 and"):
        images2neibs(xs, (2, 2))
    with pytest.raises(ValueError, match="odd neib_shape"):
        images2neibs(xs, (2, 3), mode="wrap_centered")
    # run time
    f = opgraph.function([x], images2neibs(x, (2, 2)))
    with pytest.raises(ValueError, match=r"ten4.shape\[3\]=5 are not consistent"):
        f(np.zeros((1, 1, 4, 5)))
    g = opgraph.function([x], images2neibs(x, (3, 3), mode="wrap_centered"))
    with pytest.raises(ValueError, match="may not be smaller than the patches"):
        g(np.zeros((1, 1, 2, 5)))
    h = opgraph.function([x], images2neibs(x, (3, 3), mode="ignore_borders"))
    with pytest.raises(ValueError, match="larger than the images"):
        h(np.zeros((1, 1, 2, 5)))
    s = T.lvector()
    k = opgraph.function([x, s], images2neibs(x, s))
    with pytest.raises(ValueError, match=r"neib_shape values must be positive, got \[0, 2\]"):
        k(np.zeros((1, 1, 4, 4)), np.array([0, 2]))
