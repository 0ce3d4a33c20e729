"""The GPU softmax family and fused softmax/cross-entropy ops against NumPy (short rows,
long rows, rows longer than the register cache, strided inputs, large logits, NaN, empty
inputs, bad class indices), and an MLP training step lifted through opgraph.function."""

from __future__ import annotations

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph import config
from opgraph_cuda import nnet as gn
from opgraph_cuda.array import GpuArray
from opgraph_cuda.kernels.nnet import CACHE, THREADS, row_launch
from opgraph_cuda.runtime import get_runtime
from opgraph_cuda.type import GpuArrayType

F32 = {"rtol": 1e-5, "atol": 1e-6}
#: short rows (one thread each), rows held in registers, rows read three times
SHAPES = [(9, 5), (7, 300), (3, THREADS * CACHE + 77)]


def run_op(op, *values):
    arrays = [v if isinstance(v, GpuArray) else GpuArray.from_host(v) for v in values]
    node = op.make_node(*(GpuArrayType(str(a.dtype), [False] * a.ndim)() for a in arrays))
    outs = op.prepare_gpu(node)(arrays)
    for out, shape in zip(outs, op.infer_shape(node, [a.shape for a in arrays]), strict=True):
        assert out.shape == tuple(shape)
    return [o.get() for o in outs]


def np_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def np_log_softmax(x):
    s = x - x.max(axis=1, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=1, keepdims=True))


def test_row_launch_shapes():
    rt = get_runtime()
    assert row_launch(100, 10, rt)[1] == (1, THREADS, 1)
    assert row_launch(100, 300, rt)[1] == (32, THREADS // 32, 1)  # 300 <= 32 * CACHE
    assert row_launch(2, 10**5, rt) == ((2, 1, 1), (THREADS, 1, 1))


@pytest.mark.parametrize("shape", SHAPES)
def test_softmax_and_log_softmax(rng, shape):
    x = (rng.standard_normal(shape) * 4).astype("float32")
    (sm,) = run_op(gn.GpuSoftmax(), x)
    np.testing.assert_allclose(sm, np_softmax(x), **F32)
    (lsm,) = run_op(gn.GpuLogSoftmax(), x)
    np.testing.assert_allclose(lsm, np_log_softmax(x), rtol=1e-5, atol=1e-5)


def test_softmax_of_strided_inputs_and_large_logits(rng):
    x = (rng.standard_normal((40, 12)) * 1000).astype("float32")
    g = GpuArray.from_host(x)
    (sm,) = run_op(gn.GpuSoftmax(), g.T[::-1])
    np.testing.assert_allclose(sm, np_softmax(x.T[::-1]), **F32)
    assert np.isfinite(sm).all()
    (lsm,) = run_op(gn.GpuLogSoftmax(), g[:, ::2])
    np.testing.assert_allclose(lsm, np_log_softmax(x[:, ::2]), rtol=1e-5, atol=1e-3)


def test_softmax_nan_inf_and_empty():
    x = np.array([[1.0, np.nan, 2.0], [-np.inf, 0.0, 1.0], [0.0, 0.0, 0.0]], "float32")
    (sm,) = run_op(gn.GpuSoftmax(), x)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(sm, np_softmax(x), equal_nan=True, **F32)
    assert run_op(gn.GpuSoftmax(), np.zeros((0, 4), "float32"))[0].shape == (0, 4)
    assert run_op(gn.GpuSoftmax(), np.zeros((3, 0), "float32"))[0].shape == (3, 0)


@pytest.mark.parametrize("shape", SHAPES[:2])
def test_softmax_with_bias_and_grad(rng, shape):
    x = rng.standard_normal(shape).astype("float32")
    b = rng.standard_normal(shape[1]).astype("float32")
    (sm,) = run_op(gn.GpuSoftmaxWithBias(), x, b)
    np.testing.assert_allclose(sm, np_softmax(x + b), **F32)
    dy = rng.standard_normal(shape).astype("float32")
    (dx,) = run_op(gn.GpuSoftmaxGrad(), dy, sm)
    expected = sm * (dy - (dy * sm).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(dx, expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="b has 2 elements"):
        run_op(gn.GpuSoftmaxWithBias(), x, b[:2])


def np_xent(x, b, y):
    v = x + b
    am = np.argmax(v, axis=1)
    return -np_log_softmax(v)[np.arange(len(y)), y], np_softmax(v), am


@pytest.mark.parametrize("shape", SHAPES)
def test_crossentropy_softmax_argmax(rng, shape):
    x = (rng.standard_normal(shape) * 3).astype("float32")
    b = rng.standard_normal(shape[1]).astype("float32")
    y = rng.integers(0, shape[1], shape[0]).astype("int32")
    x[0, :] = 1.0  # a tie: argmax is the first index of the largest
    b[:] = np.where(np.arange(shape[1]) % 2 == 0, b, b.max())
    nll, sm, am = run_op(gn.GpuCrossentropySoftmaxArgmax1HotWithBias(), x, b, y)
    e_nll, e_sm, e_am = np_xent(x, b, y)
    np.testing.assert_allclose(nll, e_nll, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sm, e_sm, **F32)
    np.testing.assert_array_equal(am, e_am)
    assert am.dtype == np.int32


def test_crossentropy_argmax_of_nan_and_bad_indices():
    x = np.array([[1.0, np.nan, 5.0, np.nan], [0.0, 3.0, 3.0, -1.0]], "float32")
    b = np.zeros(4, "float32")
    _, _, am = run_op(gn.GpuCrossentropySoftmaxArgmax1HotWithBias(), x, b, np.array([0, 1]))
    np.testing.assert_array_equal(am, [1, 1])  # np.argmax: the first NaN, else the first max
    op = gn.GpuCrossentropySoftmaxArgmax1HotWithBias()
    with pytest.raises(ValueError, match="class index 4 is out of bounds for 4 classes"):
        run_op(op, x, b, np.array([0, 4], "int64"))
    with pytest.raises(ValueError, match="out of bounds"):
        run_op(op, np.zeros((2, 0), "float32"), np.zeros(0, "float32"), np.array([0, 0]))
    nll, sm, am = run_op(op, np.zeros((0, 3), "float32"), b[:3], np.zeros(0, "int8"))
    assert nll.shape == (0,) and sm.shape == (0, 3) and am.shape == (0,)


def test_crossentropy_dx(rng):
    sm = np_softmax(rng.standard_normal((6, 7)).astype("float32"))
    y = rng.integers(0, 7, 6).astype("int64")
    onehot = np.eye(7, dtype="float32")[y]
    dy = rng.standard_normal(6).astype("float32")
    op = gn.GpuCrossentropySoftmax1HotWithBiasDx()
    (dx,) = run_op(op, dy, sm, y)
    np.testing.assert_allclose(dx, dy[:, None] * (sm - onehot), **F32)
    (dx,) = run_op(op, np.array(0.5, "float32"), sm, y)
    np.testing.assert_allclose(dx, 0.5 * (sm - onehot), **F32)
    with pytest.raises(ValueError, match="class index -1 is out of bounds"):
        run_op(op, dy, sm, np.where(np.arange(6) == 3, -1, y))


def test_printing_and_bad_inputs():
    assert str(gn.GpuSoftmax()) == "GpuSoftmax"
    with pytest.raises(TypeError, match=r"input 0 \(x\) must be a 2-d GPU array"):
        gn.GpuSoftmax().make_node(GpuArrayType("float32", (False,))())
    with pytest.raises(TypeError, match="y_idx"):
        gn.GpuCrossentropySoftmax1HotWithBiasDx().make_node(
            GpuArrayType("float32", (False,))(),
            GpuArrayType("float32", (False, False))(),
            GpuArrayType("float32", (False,))(),
        )


def _mlp(rng):
    x, y = T.fmatrix("x"), T.ivector("y")
    V = opgraph.shared(rng.standard_normal((6, 8)).astype("float32") * 0.3, name="V")
    c = opgraph.shared(np.zeros(8, "float32"), name="c")
    W = opgraph.shared(rng.standard_normal((8, 3)).astype("float32") * 0.3, name="W")
    b = opgraph.shared(np.zeros(3, "float32"), name="b")
    p = T.nnet.softmax(T.dot(T.tanh(T.dot(x, V) + c), W) + b)
    cost = T.nnet.categorical_crossentropy(p, y).mean()
    params = [V, c, W, b]
    lr = np.float32(0.5)
    updates = [(v, v - lr * g) for v, g in zip(params, opgraph.grad(cost, params), strict=True)]
    return [x, y], [cost, T.argmax(p, axis=1), T.nnet.logsoftmax(x)], updates, params


def test_mlp_training_step_on_the_gpu_matches_the_cpu(gpu_mode, rng):
    xv = rng.standard_normal((16, 6)).astype("float32")
    yv = rng.integers(0, 3, 16).astype("int32")
    results = []
    for lift in ("never", "always"):
        with config.change_flags(cuda__lift=lift):
            inputs, outputs, updates, params = _mlp(np.random.default_rng(1))
            f = opgraph.function(inputs, outputs, updates=updates, mode=gpu_mode)
        steps = [f(xv, yv) for _ in range(3)]
        results.append((steps, [p.get_value() for p in params], f))
    (cpu_steps, cpu_params, _), (gpu_steps, gpu_params, f) = results
    names = {type(n.op).__name__ for n in f.maker.fgraph.toposort()}
    lifted = {
        "GpuCrossentropySoftmaxArgmax1HotWithBias",
        "GpuCrossentropySoftmax1HotWithBiasDx",
        "GpuLogSoftmax",
        "GpuElemwise",
        "GpuCAReduce",
    }
    assert lifted <= names, names
    assert not {"CrossentropySoftmaxArgmax1HotWithBias", "LogSoftmax"} & names, names
    for cpu, gpu in zip(cpu_steps, gpu_steps, strict=True):
        np.testing.assert_allclose(gpu[0], cpu[0], rtol=1e-4)
        np.testing.assert_array_equal(gpu[1], cpu[1])
        np.testing.assert_allclose(gpu[2], cpu[2], rtol=1e-5, atol=1e-5)
    for cpu, gpu in zip(cpu_params, gpu_params, strict=True):
        np.testing.assert_allclose(gpu, cpu, rtol=1e-4, atol=1e-5)
