"""sparse_block_dot, SparseBlockGemv and SparseBlockOuter (tensor.nnet.blocksparse).

Values and gradients against Theano 1.0.5 and a dense NumPy reference; verify_grad,
infer_shape, in-place variants, errors.
"""

from __future__ import annotations

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.gradient import grad, verify_grad
from opgraph.tensor.nnet.blocksparse import (
    SparseBlockGemv,
    SparseBlockOuter,
    sparse_block_dot,
    sparse_block_gemv,
    sparse_block_gemv_inplace,
    sparse_block_outer,
    sparse_block_outer_inplace,
)
from opgraph.testing.checks import check_infer_shape, check_modes

# Theano 1.0.5 (THEANO_FLAGS=device=cpu,cxx=): sparse_block_dot(W, H, I, B, O) and the
# gradients of sum(sparse_block_dot(...) * V) with respect to W, H and B.
W = np.arange(3 * 4 * 2 * 3, dtype="float64").reshape(3, 4, 2, 3) / 10 - 1
H = np.array([[[1.0, -2.0], [0.5, 3.0]], [[2.0, 1.0], [-1.0, 0.25]]])
I = np.array([[0, 2], [1, 1]], dtype="int32")
B = np.arange(12.0).reshape(4, 3) / 4
O = np.array([[3, 0, 1], [2, 2, 0]], dtype="int32")
V = np.linspace(-1, 2, 18).reshape(2, 3, 3)
GOLDEN_OUT = [
    [
        [21.35, 21.85, 22.35],
        [14.6, 15.100000000000001, 15.599999999999998],
        [16.85, 17.349999999999998, 17.85],
    ],
    [
        [7.725, 8.2, 8.674999999999999],
        [7.725, 8.2, 8.674999999999999],
        [3.5250000000000004, 4.0, 4.475],
    ],
]
GOLDEN_GW = [
    [
        [
            [-0.47058823529411764, -0.2941176470588235, -0.11764705882352933],
            [0.9411764705882353, 0.588235294117647, 0.23529411764705865],
        ],
        [
            [0.05882352941176472, 0.23529411764705888, 0.41176470588235303],
            [-0.11764705882352944, -0.47058823529411775, -0.8235294117647061],
        ],
        [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
        [
            [-1.0, -0.8235294117647058, -0.6470588235294117],
            [2.0, 1.6470588235294117, 1.2941176470588234],
        ],
    ],
    [
        [
            [1.6470588235294121, 1.823529411764706, 2.0],
            [2.0588235294117654, 2.2794117647058827, 2.5],
        ],
        [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
        [
            [1.7058823529411766, 2.058823529411766, 2.4117647058823533],
            [2.1323529411764706, 2.573529411764707, 3.0147058823529416],
        ],
        [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
    ],
    [
        [
            [-0.23529411764705882, -0.14705882352941174, -0.05882352941176466],
            [-1.4117647058823528, -0.8823529411764705, -0.352941176470588],
        ],
        [
            [0.02941176470588236, 0.11764705882352944, 0.20588235294117652],
            [0.17647058823529416, 0.7058823529411766, 1.235294117647059],
        ],
        [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
        [
            [-0.5, -0.4117647058823529, -0.32352941176470584],
            [-3.0, -2.4705882352941178, -1.941176470588235],
        ],
    ],
]
GOLDEN_GH = [
    [[-1.535294117647059, -2.329411764705882], [-14.24117647058823, -15.035294117647057]],
    [[24.98823529411765, 28.482352941176472], [24.98823529411765, 28.482352941176472]],
]
GOLDEN_GB = [
    [1.1764705882352944, 1.5294117647058827, 1.8823529411764706],
    [0.05882352941176472, 0.23529411764705888, 0.41176470588235303],
    [1.7058823529411766, 2.0588235294117654, 2.4117647058823533],
    [-1.0, -0.8235294117647058, -0.6470588235294117],
]


def dense_gemv(o: np.ndarray, W: np.ndarray, h: np.ndarray, ii: np.ndarray, oi: np.ndarray):
    """Theano's loop, written out: the reference for SparseBlockGemv."""
    out = o.astype("float64")
    for b in range(o.shape[0]):
        for j in range(o.shape[1]):
            for i in range(h.shape[1]):
                out[b, j] += h[b, i] @ W[ii[b, i], oi[b, j]]
    return out


def dense_outer(o, x, y, xi, yi, alpha=1.0):
    """The reference for SparseBlockOuter: accumulate every outer product."""
    out = o.astype("float64")
    for b in range(x.shape[0]):
        for i in range(xi.shape[1]):
            for j in range(yi.shape[1]):
                out[xi[b, i], yi[b, j]] += alpha * np.outer(x[b, i], y[b, j])
    return out


def test_sparse_block_dot_matches_theano() -> None:
    tW, th, tb = T.dtensor4("W"), T.dtensor3("h"), T.dmatrix("b")
    ti, to = T.imatrix("i"), T.imatrix("o")
    out = sparse_block_dot(tW, th, ti, tb, to)
    f = opgraph.function([tW, th, ti, tb, to], [out, *grad((out * V).sum(), [tW, th, tb])])
    got = f(W, H, I, B, O)
    for g, want in zip(got, [GOLDEN_OUT, GOLDEN_GW, GOLDEN_GH, GOLDEN_GB], strict=True):
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)


def _case(rng: np.random.Generator, dtype: str, batch: int = 3):
    """Random blocks with repeated and negative indices."""
    W = rng.standard_normal((4, 5, 3, 2)).astype(dtype)
    h = rng.standard_normal((batch, 2, 3)).astype(dtype)
    o = rng.standard_normal((batch, 3, 2)).astype(dtype)
    ii = rng.integers(-4, 4, (batch, 2)).astype("int64")
    oi = rng.integers(0, 5, (batch, 3)).astype("int32")
    oi[:, 0] = oi[:, 1]  # a repeated output block
    return o, W, h, ii, oi


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("batch", [0, 1, 3])
def test_gemv_and_outer_against_dense_in_every_mode(dtype: str, batch: int) -> None:
    rng = np.random.default_rng(batch)
    o, W, h, ii, oi = _case(rng, dtype, batch)
    to, tW = T.tensor3(dtype=dtype), T.tensor4(dtype=dtype)
    th = T.tensor3(dtype=dtype)
    ti, tj = T.lmatrix(), T.imatrix()
    gemv = sparse_block_gemv(to, tW, th, ti, tj)
    x = T.tensor3(dtype=dtype)
    xv = rng.standard_normal((batch, 3, 2)).astype(dtype)
    outer = sparse_block_outer(tW, th, x, ti, tj)
    outer2 = SparseBlockOuter()(tW, th, x, ti, tj, np.float32(0.5))
    check_modes(
        [to, tW, th, ti, tj, x],
        [gemv, outer, outer2],
        [o, W, h, ii, oi, xv],
        [
            dense_gemv(o, W, h, ii, oi),
            dense_outer(W, h, xv, ii, oi),
            dense_outer(W, h, xv, ii, oi, 0.5),
        ],
        dtype=dtype,
    )
    f = opgraph.function([to, tW, th, ti, tj], gemv)
    assert f(o, W, h, ii, oi).dtype == dtype


def test_inplace_variants_write_into_their_first_input() -> None:
    rng = np.random.default_rng(5)
    o, W, h, ii, oi = _case(rng, "float64")
    node = sparse_block_gemv_inplace(o, W, h, ii, oi).owner
    assert node.op.destroy_map == {0: [0]} and sparse_block_gemv.destroy_map == {}
    storage = [[None]]
    buf = o.copy()
    node.op.perform(node, [buf, W, h, ii, oi], storage)
    assert storage[0][0] is buf
    np.testing.assert_allclose(buf, dense_gemv(o, W, h, ii, oi))
    node = sparse_block_outer_inplace(W, h, o, ii, oi).owner
    buf = W.copy()
    node.op.perform(node, [buf, h, o, ii, oi, np.float32(1)], storage)
    assert storage[0][0] is buf
    np.testing.assert_allclose(buf, dense_outer(W, h, o, ii, oi))
    node = sparse_block_gemv(o, W, h, ii, oi).owner
    node.op.perform(node, [o, W, h, ii, oi], storage)
    assert storage[0][0] is not o


def test_verify_grad() -> None:
    rng = np.random.default_rng(3)
    o, W, h, ii, oi = _case(rng, "float64")
    verify_grad(lambda a, b, c: sparse_block_gemv(a, b, c, ii, oi), [o, W, h], rng=rng)
    y = rng.standard_normal((3, 3, 2))
    verify_grad(lambda a, b, c: sparse_block_outer(a, b, c, ii, oi), [W, h, y], rng=rng)
    verify_grad(
        lambda a, b, c, d: SparseBlockOuter()(a, b, c, ii, oi, d),
        [W, h, y, np.asarray(0.7)],
        rng=rng,
    )
    bias = rng.standard_normal((5, 2))
    verify_grad(lambda a, b, c: sparse_block_dot(a, b, ii, c, oi), [W, h, bias], rng=rng)


def test_one_example_without_batch_axis() -> None:
    tW, th, tb = T.dtensor4(), T.dmatrix(), T.dmatrix()
    ti, to = T.ivector(), T.ivector()
    out = sparse_block_dot(tW, th, ti, tb, to)
    assert out.type.ndim == 3
    f = opgraph.function([tW, th, ti, tb, to], out)
    got = f(W, H[0], I[0], B, O[0])
    np.testing.assert_allclose(got, np.asarray(GOLDEN_OUT)[:1])


def test_infer_shape() -> None:
    rng = np.random.default_rng(4)
    o, W, h, ii, oi = _case(rng, "float64")
    ins = [T.dtensor3(), T.dtensor4(), T.dtensor3(), T.lmatrix(), T.imatrix()]
    check_infer_shape(ins, sparse_block_gemv(*ins), [o, W, h, ii, oi], SparseBlockGemv)
    outer = sparse_block_outer(ins[1], ins[2], ins[0], ins[3], ins[4])
    check_infer_shape(ins, outer, [o, W, h, ii, oi], SparseBlockOuter)


def test_errors() -> None:
    o, W, h = T.dtensor3(), T.dtensor4(), T.dtensor3()
    ii, oi = T.lmatrix(), T.lmatrix()
    with pytest.raises(TypeError, match="o must be a 3D tensor"):
        sparse_block_gemv(T.dmatrix(), W, h, ii, oi)
    with pytest.raises(TypeError, match="W must be a 4D tensor"):
        sparse_block_gemv(o, T.dtensor3(), h, ii, oi)
    with pytest.raises(TypeError, match="inputIdx must have an integer dtype"):
        sparse_block_gemv(o, W, h, T.dmatrix(), oi)
    with pytest.raises(TypeError, match="h must have a float dtype"):
        sparse_block_gemv(o, W, T.ltensor3(), ii, oi)
    with pytest.raises(TypeError, match="alpha must be a 0D tensor"):
        sparse_block_outer(W, h, h, ii, oi, T.dvector())
    with pytest.raises(ValueError, match="one dimension less than h"):
        sparse_block_dot(W, h, T.lvector(), T.dmatrix(), oi)
    f = opgraph.function([o, W, h, ii, oi], sparse_block_gemv(o, W, h, ii, oi))
    ov, Wv, hv, iv, jv = _case(np.random.default_rng(0), "float64")
    with pytest.raises(ValueError, match="shapes do not agree"):
        f(ov, Wv, hv[:2], iv, jv)
    with pytest.raises(IndexError):
        f(ov, Wv, hv, iv + 10, jv)
