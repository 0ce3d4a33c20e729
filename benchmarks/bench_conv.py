"""W12-W15: convolution, pooling and a LeNet training step (issue 15).

Four workloads, float32 NCHW throughout, every engine side by side in one run:

- W12: a 3x3 convolution, batch 32, 64 -> 64 channels, 32x32, border ``half`` (the output
  keeps the input's size): ``forward`` and ``fwd+bwd``.
- W13: a 7x7 stride-2 first layer on 224x224 (batch 8, 3 -> 64 channels, padding 3, out
  112x112): ``forward`` and ``fwd+bwd``.
- W14: a 2x2 max-pool (stride 2) of (32, 64, 32, 32): ``forward`` and ``fwd+bwd``.
- W15: a LeNet-style training step, batch 64 of 1x28x28: conv 5x5 (20 channels), max-pool 2,
  tanh; conv 5x5 (50 channels), max-pool 2, tanh; dense 500 (tanh); dense 10; mean softmax
  cross-entropy; SGD on every parameter in place.

``fwd+bwd`` returns the forward output and the gradients of ``sum(out * g)`` (a fixed ``g``)
with respect to the input and, for a convolution, the filters: every engine does the
forward and the backward pass (a gradient alone would let a compiler drop the forward).

The engines:

- NumPy: the reference, hand-written: im2col (a strided window view copied into a matrix)
  and one matmul (``sgemm``) for a convolution, col2im by one strided add per kernel tap for
  its input gradient; for pooling a reshape into windows and the elementwise maximum of
  their taps, and a mask of the maxima times ``g`` for its gradient. It is the ratio's
  base and what every check compares with.
- opgraph: Theano 1.0 code, ``abstract_conv.conv2d`` (the default ``filter_flip=True``: a
  true convolution) and ``pool.pool_2d``, ``grad``, shared variables and ``updates``.
- PyTensor: the same Theano code where PyTensor still has these ops (it dropped
  ``conv2d`` and ``pool_2d``; the rows then say "no op").
- JAX: ``lax.conv_general_dilated`` and ``lax.reduce_window`` under ``jit`` (``jax.vjp``
  for the backward pass, ``jax.value_and_grad`` for the training step).
- PyTorch CPU, when installed: ``torch.nn.functional`` with ``torch.autograd.grad``, the
  SGD step a manual in-place update under ``no_grad``; ``torch.set_num_threads`` is set to
  the CPUs this process may use, and a second row runs it on one thread (on a loaded
  machine PyTorch's threads wait for a taken core: its median grows tenfold). The notes
  set opgraph beside the faster of the two and beside JAX, with issue 15's targets.

NumPy, JAX and PyTorch cross-correlate: they get the flipped filters (prepared once, outside
the timed calls), so every engine computes the same numbers; W15 checks their filters
flipped back. Checks are float32: the largest difference over the largest magnitude of
each output (``rel``), and for W15 the relative 2-norm difference of the parameter changes
after 3 steps from the same start.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from bench_scan import _time, torch_status  # noqa: E402
from bench_training import theano_api  # noqa: E402
from harness import (  # noqa: E402
    Context,
    Table,
    opgraph_engines,
    opgraph_mode,
    pytensor_mode,
)

WORKLOADS = {
    "W12": "conv 3x3, batch 32, 64->64 channels, 32x32, float32: forward and fwd+bwd",
    "W13": "conv 7x7 stride 2 first layer, batch 8, 3->64 channels, 224x224: fwd and fwd+bwd",
    "W14": "max-pool 2x2 of (32, 64, 32, 32) float32: forward and fwd+bwd",
    "W15": "LeNet training step, batch 64 of 1x28x28 (2 conv+pool, dense 500, SGD), float32",
}

DTYPE = np.float32
#: Largest ``max|got - ref| / max|ref|`` a float32 output may show and still be "ok".
F32_RTOL = 1e-4
#: Largest relative 2-norm difference of W15's parameter changes after ``CHECK_STEPS``.
STEP_RTOL = 1e-3
CHECK_STEPS = 3


@dataclass(frozen=True)
class ConvSpec:
    """One convolution layer: input (batch, channels, height, width), filters
    (out channels, channels, kh, kw), symmetric padding and stride."""

    batch: int
    channels: int
    size: int
    out_channels: int
    kernel: int
    pad: int
    stride: int
    border: Any  # Theano's border_mode for the same padding

    @property
    def x_shape(self) -> tuple[int, int, int, int]:
        """The input's shape."""
        return (self.batch, self.channels, self.size, self.size)

    @property
    def w_shape(self) -> tuple[int, int, int, int]:
        """The filters' shape."""
        return (self.out_channels, self.channels, self.kernel, self.kernel)

    @property
    def out_size(self) -> int:
        """The output's height (= width)."""
        return (self.size + 2 * self.pad - self.kernel) // self.stride + 1


CONV_SPECS = {
    "W12": ConvSpec(32, 64, 32, 64, 3, 1, 1, "half"),
    "W13": ConvSpec(8, 3, 224, 64, 7, 3, 2, (3, 3)),
}
POOL_SHAPE, POOL_WS = (32, 64, 32, 32), 2
#: LeNet: input (batch, 1, 28, 28); filters of the two conv layers; dense sizes; SGD rate.
LENET_BATCH, LENET_SIZE, LENET_CLASSES = 64, 28, 10
LENET_FILTERS = ((20, 1, 5, 5), (50, 20, 5, 5))
LENET_HIDDEN, LENET_LR = 500, 0.02

# --------------------------------------------------------------------------- data


def conv_data(spec: ConvSpec, seed: int = 0) -> dict[str, np.ndarray]:
    """Input ``x``, filters ``w`` (Theano's, to be flipped for correlation), their flip
    ``wc`` and an upstream gradient ``g`` of the output's shape; float32, C-contiguous."""
    rng = np.random.default_rng(seed)
    fan_in = spec.channels * spec.kernel**2
    w = (rng.standard_normal(spec.w_shape) / np.sqrt(fan_in)).astype(DTYPE)
    o = spec.out_size
    return {
        "x": rng.standard_normal(spec.x_shape).astype(DTYPE),
        "w": w,
        "wc": np.ascontiguousarray(w[:, :, ::-1, ::-1]),
        "g": rng.standard_normal((spec.batch, spec.out_channels, o, o)).astype(DTYPE),
    }


def pool_data(seed: int = 0) -> dict[str, np.ndarray]:
    """Input ``x`` of distinct values (a permutation: no ties, so the gradient's target is
    unique for every engine) and an upstream gradient ``g``."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(POOL_SHAPE))
    x = (rng.permutation(n).astype(DTYPE) / DTYPE(n) - DTYPE(0.5)).reshape(POOL_SHAPE)
    b, c, h, w = POOL_SHAPE
    g = rng.standard_normal((b, c, h // POOL_WS, w // POOL_WS)).astype(DTYPE)
    return {"x": x, "g": g}


def lenet_data(seed: int = 0) -> dict[str, Any]:
    """A batch (float32 images, int32 labels) and Theano-tutorial initial parameters
    (uniform in +-sqrt(6 / (fan_in + fan_out))): W0, b0, W1, b1, W2, b2, W3, b3."""
    rng = np.random.default_rng(seed)

    def uniform(shape: tuple[int, ...], fan_in: int, fan_out: int) -> np.ndarray:
        bound = np.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-bound, bound, shape).astype(DTYPE)

    params = []
    for shape in LENET_FILTERS:
        fan_in = int(np.prod(shape[1:]))
        fan_out = shape[0] * shape[2] * shape[3] // 4  # / pooling area, as the tutorial
        params += [uniform(shape, fan_in, fan_out), np.zeros(shape[0], DTYPE)]
    flat = LENET_FILTERS[1][0] * 4 * 4
    params += [uniform((flat, LENET_HIDDEN), flat, LENET_HIDDEN), np.zeros(LENET_HIDDEN, DTYPE)]
    params += [
        uniform((LENET_HIDDEN, LENET_CLASSES), LENET_HIDDEN, LENET_CLASSES),
        np.zeros(LENET_CLASSES, DTYPE),
    ]
    x = rng.standard_normal((LENET_BATCH, 1, LENET_SIZE, LENET_SIZE)).astype(DTYPE)
    y = rng.integers(0, LENET_CLASSES, LENET_BATCH).astype(np.int32)
    return {"x": x, "y": y, "params": params}


def flip_filters(params: Sequence[np.ndarray]) -> list[np.ndarray]:
    """LeNet's parameters with the two conv filter banks (W0, W1) flipped in both spatial
    axes: Theano's convolution filters <-> the correlation filters of the other engines."""
    return [
        np.ascontiguousarray(np.asarray(p)[:, :, ::-1, ::-1]) if np.ndim(p) == 4 else np.array(p)
        for p in params
    ]


# --------------------------------------------------------------------------- NumPy


def im2col(x: np.ndarray, k: int, pad: int, stride: int) -> np.ndarray:
    """The (channels * k * k, batch * oh * ow) patch matrix of ``x`` zero-padded by
    ``pad``: a copy of a strided window view, laid out so that the copy runs along the
    output rows (it streams through memory)."""
    if pad:
        x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))
    win = win[:, :, ::stride, ::stride]  # (b, c, oh, ow, k, k)
    b, c, oh, ow = win.shape[:4]
    cols = np.ascontiguousarray(win.transpose(1, 4, 5, 0, 2, 3))  # (c, k, k, b, oh, ow)
    return cols.reshape(c * k * k, b * oh * ow)


def numpy_conv(x: np.ndarray, wc: np.ndarray, pad: int, stride: int) -> tuple[np.ndarray, Any]:
    """Cross-correlation of ``x`` with ``wc`` by im2col and one matmul: (output, patches)."""
    o, _, k, _ = wc.shape
    cols = im2col(x, k, pad, stride)
    b = x.shape[0]
    oh = (x.shape[2] + 2 * pad - k) // stride + 1
    ow = (x.shape[3] + 2 * pad - k) // stride + 1
    out = wc.reshape(o, -1) @ cols  # (o, b * oh * ow)
    return np.ascontiguousarray(out.reshape(o, b, oh, ow).transpose(1, 0, 2, 3)), cols


def numpy_conv_backward(
    g: np.ndarray,
    cols: np.ndarray,
    wc: np.ndarray,
    x_shape: Sequence[int],
    pad: int,
    stride: int,
    need_dx: bool = True,
) -> tuple[np.ndarray | None, np.ndarray]:
    """``(dx, dwc)`` of the correlation given the upstream gradient ``g``: one matmul for
    the filters, one for the patches' gradient and col2im (a strided add per tap)."""
    o, c, k, _ = wc.shape
    b, _, oh, ow = g.shape
    g2 = np.ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(o, b * oh * ow)
    dw = (g2 @ cols.T).reshape(wc.shape)
    if not need_dx:
        return None, dw
    dcols = (wc.reshape(o, -1).T @ g2).reshape(c, k, k, b, oh, ow)
    h, w = x_shape[2], x_shape[3]
    dxp = np.zeros((b, c, h + 2 * pad, w + 2 * pad), dtype=g.dtype)
    for p in range(k):
        for q in range(k):
            tap = dcols[:, p, q].transpose(1, 0, 2, 3)  # (b, c, oh, ow)
            dxp[:, :, p : p + stride * oh : stride, q : q + stride * ow : stride] += tap
    return dxp[:, :, pad : pad + h, pad : pad + w], dw


def _windows(x: np.ndarray, ws: int) -> np.ndarray:
    """``x`` (b, c, h, w) as (b, c, h / ws, ws, w / ws, ws): a view, the sizes divide."""
    b, c, h, w = x.shape
    return x.reshape(b, c, h // ws, ws, w // ws, ws)


def numpy_pool(x: np.ndarray, ws: int = POOL_WS) -> np.ndarray:
    """Max over non-overlapping ``ws`` x ``ws`` windows: a reshape, then the elementwise
    maximum of the windows' ``ws * ws`` strided taps (20x faster than ``max(axis=(3, 5))``,
    a strided reduction)."""
    v = _windows(x, ws)
    out = v[:, :, :, 0, :, 0].copy()
    for p in range(ws):
        for q in range(ws):
            if p or q:
                np.maximum(out, v[:, :, :, p, :, q], out=out)
    return out


def numpy_pool_backward(x: np.ndarray, out: np.ndarray, g: np.ndarray, ws: int = POOL_WS) -> Any:
    """The max-pool's input gradient: ``g`` at every input equal to its window's maximum
    (Theano's rule; the data have no ties): per tap, ``g`` times the tap's mask, written
    straight into the strided taps of the result."""
    v = _windows(x, ws)
    dx = np.empty_like(x)
    dv = _windows(dx, ws)
    for p in range(ws):
        for q in range(ws):
            np.multiply(v[:, :, :, p, :, q] == out, g, out=dv[:, :, :, p, :, q])
    return dx


def numpy_conv_functions(spec: ConvSpec, data: dict[str, np.ndarray]) -> tuple[Callable, Callable]:
    """``(forward, fwd+bwd)`` of one conv layer by NumPy, as zero-argument callables."""
    x, wc, g = data["x"], data["wc"], data["g"]

    def forward() -> np.ndarray:
        return numpy_conv(x, wc, spec.pad, spec.stride)[0]

    def fwd_bwd() -> tuple[np.ndarray, ...]:
        out, cols = numpy_conv(x, wc, spec.pad, spec.stride)
        dx, dwc = numpy_conv_backward(g, cols, wc, x.shape, spec.pad, spec.stride)
        return out, dx, dwc[:, :, ::-1, ::-1]  # the gradient of Theano's filters

    return forward, fwd_bwd


class NumpyLeNet:
    """W15's step by hand in float32: forward, softmax cross-entropy, backward (im2col
    patches reused), SGD in place. Holds correlation filters (``flip_filters``)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.x, self.y = data["x"], data["y"]
        self.weights = flip_filters(data["params"])
        self.rows = np.arange(len(self.y))

    def step(self) -> float:
        """One training step; returns the mean loss before the update."""
        W0, b0, W1, b1, W2, b2, W3, b3 = self.weights
        x, y, rows = self.x, self.y, self.rows
        c1, cols1 = numpy_conv(x, W0, 0, 1)
        p1 = numpy_pool(c1)
        a1 = np.tanh(p1 + b0[None, :, None, None])
        c2, cols2 = numpy_conv(a1, W1, 0, 1)
        p2 = numpy_pool(c2)
        a2 = np.tanh(p2 + b1[None, :, None, None])
        f = a2.reshape(len(y), -1)
        h = np.tanh(f @ W2 + b2)
        logits = h @ W3 + b3
        logits -= logits.max(axis=1, keepdims=True)
        e = np.exp(logits)
        s = e.sum(axis=1, keepdims=True)
        loss = float(np.mean(np.log(s[:, 0]) - logits[rows, y]))
        d = e / s
        d[rows, y] -= 1
        d /= DTYPE(len(y))
        grads = [None] * 8
        grads[6], grads[7] = h.T @ d, d.sum(axis=0)
        dh = (d @ W3.T) * (1 - h * h)
        grads[4], grads[5] = f.T @ dh, dh.sum(axis=0)
        da2 = (dh @ W2.T).reshape(a2.shape) * (1 - a2 * a2)
        grads[3] = da2.sum(axis=(0, 2, 3))
        dc2 = numpy_pool_backward(c2, p2, da2)
        da1, grads[2] = numpy_conv_backward(dc2, cols2, W1, a1.shape, 0, 1)
        da1 *= 1 - a1 * a1
        grads[1] = da1.sum(axis=(0, 2, 3))
        dc1 = numpy_pool_backward(c1, p1, da1)
        grads[0] = numpy_conv_backward(dc1, cols1, W0, x.shape, 0, 1, need_dx=False)[1]
        for p, gp in zip(self.weights, grads):
            p -= DTYPE(LENET_LR) * gp
        return loss

    def params(self) -> list[np.ndarray]:
        """Current parameters, Theano's filters (flipped back)."""
        return flip_filters(self.weights)


# --------------------------------------------------------------------------- Theano API


#: Where Theano 1.0 put each op, per library (the first importable module wins).
OP_MODULES = {
    "opgraph": {
        "conv2d": ("opgraph.tensor.nnet.abstract_conv",),
        "pool_2d": ("opgraph.tensor.signal.pool",),
    },
    "pytensor": {
        "conv2d": ("pytensor.tensor.conv.abstract_conv", "pytensor.tensor.nnet.abstract_conv"),
        "pool_2d": ("pytensor.tensor.signal.pool",),
    },
}


def theano_op(api: str, name: str) -> Callable[..., Any]:
    """``conv2d`` or ``pool_2d`` of ``opgraph`` or ``pytensor``, with Theano 1.0's
    signature, from the module Theano put it in; ImportError where the library has none."""
    for module in OP_MODULES[api][name]:
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    raise ImportError(f"no {name} in {' or '.join(OP_MODULES[api][name])}")


def missing_ops(api: str, names: Sequence[str]) -> str | None:
    """None when ``api`` has every op in ``names``, else the skipped row's text."""
    missing = []
    for name in names:
        try:
            theano_op(api, name)
        except ImportError:
            missing.append(name)
    if not missing:
        return None
    if api == "pytensor":
        import pytensor

        return f"no op: PyTensor {pytensor.__version__} has no {' or '.join(missing)}"
    modules = ", ".join(OP_MODULES[api][n][0] for n in missing)
    return f"skipped: this opgraph has no {' or '.join(missing)} yet ({modules})"


def _function(api: str, spec: str, inputs: list[Any], outputs: Any, **kw: Any) -> Any:
    th, _ = theano_api(api)
    mode = opgraph_mode(spec) if api == "opgraph" else pytensor_mode(spec)
    return th.function(inputs, outputs, mode=mode, **kw)


def theano_conv_function(api: str, spec_mode: str, spec: ConvSpec, grad: bool) -> Any:
    """W12/W13's function: ``f(x, w) -> out`` or ``f(x, w, g) -> [out, dx, dw]``."""
    th, T = theano_api(api)
    conv2d = theano_op(api, "conv2d")
    x, w = T.ftensor4("x"), T.ftensor4("w")
    out = conv2d(
        x,
        w,
        input_shape=spec.x_shape,
        filter_shape=spec.w_shape,
        border_mode=spec.border,
        subsample=(spec.stride, spec.stride),
    )
    if not grad:
        return _function(api, spec_mode, [x, w], out)
    g = T.ftensor4("g")
    dx, dw = th.grad((out * g).sum(), [x, w])
    return _function(api, spec_mode, [x, w, g], [out, dx, dw])


def theano_pool_function(api: str, spec_mode: str, grad: bool) -> Any:
    """W14's function: ``f(x) -> out`` or ``f(x, g) -> [out, dx]``."""
    th, T = theano_api(api)
    pool_2d = theano_op(api, "pool_2d")
    x = T.ftensor4("x")
    out = pool_2d(x, ws=(POOL_WS, POOL_WS), ignore_border=True, mode="max")
    if not grad:
        return _function(api, spec_mode, [x], out)
    g = T.ftensor4("g")
    (dx,) = th.grad((out * g).sum(), [x])
    return _function(api, spec_mode, [x, g], [out, dx])


def theano_lenet_step(api: str, spec_mode: str, data: dict[str, Any]) -> tuple[Any, list[Any]]:
    """W15's training function ``f(x, y) -> loss`` with SGD updates, written as the Theano
    LeNet tutorial does (conv, pool, then ``tanh(pooled + b)``); (function, shared)."""
    th, T = theano_api(api)
    conv2d, pool_2d = theano_op(api, "conv2d"), theano_op(api, "pool_2d")
    x, y = T.ftensor4("x"), T.ivector("y")
    names = ("W0", "b0", "W1", "b1", "W2", "b2", "W3", "b3")
    shared = [th.shared(np.array(p), name=n) for n, p in zip(names, data["params"])]
    W0, b0, W1, b1, W2, b2, W3, b3 = shared
    shape = (LENET_BATCH, 1, LENET_SIZE, LENET_SIZE)
    h = x
    for W, b, fshape in ((W0, b0, LENET_FILTERS[0]), (W1, b1, LENET_FILTERS[1])):
        conv = conv2d(h, W, input_shape=shape, filter_shape=fshape)
        pooled = pool_2d(conv, ws=(2, 2), ignore_border=True, mode="max")
        h = T.tanh(pooled + b.dimshuffle("x", 0, "x", "x"))
        side = (shape[2] - fshape[2] + 1) // 2
        shape = (LENET_BATCH, fshape[0], side, side)
    h = T.tanh(T.dot(h.flatten(2), W2) + b2)
    p_y = T.nnet.softmax(T.dot(h, W3) + b3)
    loss = T.mean(T.nnet.categorical_crossentropy(p_y, y))
    grads = th.grad(loss, shared)
    lr = np.asarray(LENET_LR, dtype=DTYPE)
    updates = [(p, p - lr * gp) for p, gp in zip(shared, grads)]
    return _function(api, spec_mode, [x, y], loss, updates=updates), shared


# --------------------------------------------------------------------------- JAX


def jax_conv_functions(spec: ConvSpec) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``(forward, fwd+bwd)`` under ``jit``: ``f(x, wc)`` and ``f(x, wc, g) -> (out, dx,
    dw)`` with ``dw`` the gradient of Theano's (unflipped) filters."""
    import jax

    def conv(x: Any, wc: Any) -> Any:
        return jax.lax.conv_general_dilated(
            x,
            wc,
            window_strides=(spec.stride, spec.stride),
            padding=[(spec.pad, spec.pad)] * 2,
            dimension_numbers=("NCHW", "OIHW", "NCHW"),
        )

    def fwd_bwd(x: Any, wc: Any, g: Any) -> Any:
        out, vjp = jax.vjp(conv, x, wc)
        dx, dwc = vjp(g)
        return out, dx, dwc[:, :, ::-1, ::-1]

    return jax.jit(conv), jax.jit(fwd_bwd)


def jax_pool(x: Any) -> Any:
    """Max over 2x2 windows, stride 2, by ``lax.reduce_window``."""
    import jax
    import jax.numpy as jnp

    window = (1, 1, POOL_WS, POOL_WS)
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, window, window, "VALID")


def jax_pool_functions() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``(forward, fwd+bwd)`` of the max-pool under ``jit``: ``f(x)``, ``f(x, g)``."""
    import jax

    def fwd_bwd(x: Any, g: Any) -> Any:
        out, vjp = jax.vjp(jax_pool, x)
        return out, vjp(g)[0]

    return jax.jit(jax_pool), jax.jit(fwd_bwd)


def _jax_lenet(data: dict[str, Any]) -> tuple[Callable[[], Any], Callable[[], list[Any]]]:
    """W15's step as ``jit(step, donate_argnums=0)``: (run one step, current parameters)."""
    import jax
    import jax.numpy as jnp

    def conv(h: Any, w: Any) -> Any:
        return jax.lax.conv_general_dilated(h, w, (1, 1), "VALID", dimension_numbers=None)

    def loss_fn(params: list[Any], x: Any, y: Any) -> Any:
        W0, b0, W1, b1, W2, b2, W3, b3 = params
        h = jnp.tanh(jax_pool(conv(x, W0)) + b0[None, :, None, None])
        h = jnp.tanh(jax_pool(conv(h, W1)) + b1[None, :, None, None])
        h = jnp.tanh(h.reshape(h.shape[0], -1) @ W2 + b2)
        logp = jax.nn.log_softmax(h @ W3 + b3, axis=-1)
        return -jnp.mean(logp[jnp.arange(y.shape[0]), y])

    def step(params: list[Any], x: Any, y: Any) -> Any:
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return [p - DTYPE(LENET_LR) * g for p, g in zip(params, grads)], loss

    jstep = jax.jit(step, donate_argnums=(0,))
    x, y = jnp.asarray(data["x"]), jnp.asarray(data["y"])
    state = [[jnp.asarray(p) for p in flip_filters(data["params"])]]

    def run() -> Any:
        params, loss = jstep(state[0], x, y)
        state[0] = params
        return loss.block_until_ready()

    return run, lambda: flip_filters([np.asarray(p) for p in state[0]])


# --------------------------------------------------------------------------- PyTorch


def torch_threads() -> int:
    """Set PyTorch's intra-op threads to the CPUs this process may use; returns them."""
    import torch

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    torch.set_num_threads(max(1, cpus or 1))
    return torch.get_num_threads()


def torch_conv_functions(spec: ConvSpec) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``(forward, fwd+bwd)``: ``F.conv2d`` without autograd, and with
    ``torch.autograd.grad`` (``dw`` returned for Theano's filters)."""
    import torch
    import torch.nn.functional as F

    def forward(x: Any, wc: Any) -> Any:
        with torch.no_grad():
            return F.conv2d(x, wc, stride=spec.stride, padding=spec.pad)

    def fwd_bwd(x: Any, wc: Any, g: Any) -> Any:
        x, wc = x.detach().requires_grad_(), wc.detach().requires_grad_()
        out = F.conv2d(x, wc, stride=spec.stride, padding=spec.pad)
        dx, dwc = torch.autograd.grad(out, [x, wc], g)
        return out.detach(), dx, dwc.flip((2, 3))

    return forward, fwd_bwd


def torch_pool_functions() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``(forward, fwd+bwd)`` of ``F.max_pool2d(x, 2)``."""
    import torch
    import torch.nn.functional as F

    def forward(x: Any) -> Any:
        with torch.no_grad():
            return F.max_pool2d(x, POOL_WS)

    def fwd_bwd(x: Any, g: Any) -> Any:
        x = x.detach().requires_grad_()
        out = F.max_pool2d(x, POOL_WS)
        (dx,) = torch.autograd.grad(out, [x], g)
        return out.detach(), dx

    return forward, fwd_bwd


def _torch_lenet(data: dict[str, Any]) -> tuple[Callable[[], Any], Callable[[], list[Any]]]:
    """W15's step in eager PyTorch: autograd, then ``p -= lr * g`` under ``no_grad``."""
    import torch
    import torch.nn.functional as F

    params = [torch.tensor(p, requires_grad=True) for p in flip_filters(data["params"])]
    x = torch.from_numpy(data["x"])
    y = torch.from_numpy(data["y"].astype(np.int64))

    def run() -> Any:
        W0, b0, W1, b1, W2, b2, W3, b3 = params
        h = torch.tanh(F.max_pool2d(F.conv2d(x, W0), 2) + b0[None, :, None, None])
        h = torch.tanh(F.max_pool2d(F.conv2d(h, W1), 2) + b1[None, :, None, None])
        h = torch.tanh(h.flatten(1) @ W2 + b2)
        loss = F.cross_entropy(h @ W3 + b3, y)
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, g in zip(params, grads):
                p.sub_(g, alpha=LENET_LR)
        return loss.detach()

    return run, lambda: flip_filters([p.detach().numpy() for p in params])


# --------------------------------------------------------------------------- checks


def f32_check(expected: Any) -> Callable[[Callable[[], Any]], str]:
    """The check column of W12-W14: ``ok rel E``, E the worst over the outputs of
    ``max|got - ref| / max|ref|``, ok below ``F32_RTOL``; a dtype other than float32 or a
    shape other than NumPy's is named."""
    refs = expected if isinstance(expected, tuple) else (expected,)

    def check(fn: Callable[[], Any]) -> str:
        got = fn()
        outs = tuple(got) if isinstance(got, (tuple, list)) else (got,)
        if len(outs) != len(refs):
            return f"MISMATCH: {len(outs)} outputs, expected {len(refs)}"
        worst, notes = 0.0, []
        for out, ref in zip(outs, refs):
            out = np.asarray(out)
            if out.shape != ref.shape:
                return f"SHAPE {out.shape} != {ref.shape}"
            if out.dtype != ref.dtype and f"dtype {out.dtype}" not in notes:
                notes.append(f"dtype {out.dtype}")
            diff = np.max(np.abs(out.astype(np.float64) - ref)) if ref.size else 0.0
            worst = max(worst, float(diff / max(float(np.max(np.abs(ref))), 1e-30)))
        verdict = f"{'ok' if worst <= F32_RTOL else 'DIFF'} rel {worst:.0e}"
        return verdict + (f" ({', '.join(notes)})" if notes else "")

    return check


def delta_check(
    start: Sequence[np.ndarray], expected: Sequence[np.ndarray], params: Callable[[], list[Any]]
) -> Callable[[Callable[[], Any]], str]:
    """W15's check: run ``CHECK_STEPS`` steps, then the relative 2-norm difference of the
    parameter changes from NumPy's (the parameters themselves barely move in 3 steps)."""

    def check(fn: Callable[[], Any]) -> str:
        for _ in range(CHECK_STEPS):
            fn()
        got = [np.asarray(p, dtype=np.float64) for p in params()]
        if len(got) != len(expected) or any(g.shape != e.shape for g, e in zip(got, expected)):
            return "SHAPE mismatch of the parameters"
        num = sum(float(np.sum(((g - s) - (e - s)) ** 2)) for g, e, s in zip(got, expected, start))
        den = sum(float(np.sum((e - s) ** 2)) for e, s in zip(expected, start))
        err = (num / den) ** 0.5 if den > 0 else num**0.5
        return f"{'ok' if err <= STEP_RTOL else 'DIFF'} rel {err:.0e}"

    return check


# --------------------------------------------------------------------------- running


def _theano_rows(
    table: Table,
    ctx: Context,
    case: str,
    ops: Sequence[str],
    make: Callable[[str, str], Callable[[], Any]],
    check: Callable[[Callable[[], Any]], str],
    timing: dict[str, Any],
) -> None:
    """opgraph's engines, then PyTensor's (or why each does not run: ``ops`` missing)."""
    missing = missing_ops("opgraph", ops)
    for label, linker in opgraph_engines():
        if missing:
            table.skip(case, label, missing)
        else:
            _time(table, case, label, lambda linker=linker: make("opgraph", linker), check, timing)
    peers = ctx.available_peers(["pytensor_c", "pytensor_numba"])
    status = missing_ops("pytensor", ops) if peers else None
    for peer in peers:
        if status:
            table.skip(case, peer.label, status)
        else:
            _time(table, case, peer.label, lambda k=peer.key: make("pytensor", k), check, timing)


def _peer_rows(
    table: Table,
    ctx: Context,
    case: str,
    make_jax: Callable[[], Callable[[], Any]],
    make_torch: Callable[[], Callable[[], Any]],
    check: Callable[[Callable[[], Any]], str],
    timing: dict[str, Any],
) -> None:
    """JAX (when it is a usable peer) and PyTorch CPU (when installed), on every CPU and
    on one thread."""
    jax_peer = ctx.peers.get("jax")
    if jax_peer is not None and jax_peer.ok:
        _time(table, case, "JAX (jit)", make_jax, check, timing)
    if torch_status() != "ok":
        return
    _time(table, case, "PyTorch CPU", make_torch, check, timing)
    if torch_threads() > 1:  # on a loaded machine PyTorch's threads wait for a taken core
        import torch

        def make_one() -> Callable[[], Any]:
            fn = make_torch()  # sets the threads to the CPUs: one thread after it
            torch.set_num_threads(1)
            return fn

        try:
            _time(table, case, "PyTorch CPU, 1 thread", make_one, check, timing)
        finally:
            torch_threads()


def _timing(ctx: Context) -> tuple[dict[str, Any], str]:
    """Timing arguments for :func:`bench_scan._time` and the table's detail line."""
    rounds = ctx.repeat(full=7, quick=3)
    round_s = 0.05 if ctx.quick else 0.2
    detail = (
        f"{rounds} rounds of >= {round_s:g} s after 1 check call and 1 warm-up (an engine "
        "whose warm call takes > 2 s: that call alone)"
    )
    return {"repeat": rounds, "min_round_s": round_s, "warmup": 0}, detail


def _jnp(*arrays: np.ndarray) -> list[Any]:
    import jax.numpy as jnp

    return [jnp.asarray(a) for a in arrays]


def _torch(*arrays: np.ndarray) -> list[Any]:
    import torch

    torch_threads()
    return [torch.from_numpy(a) for a in arrays]


def run_conv(workload: str, ctx: Context) -> Table:
    """W12 or W13: one convolution layer, forward and forward+backward."""
    spec = CONV_SPECS[workload]
    timing, detail = _timing(ctx)
    ref_timing = {**timing, "warmup": 1}
    table = Table(
        workload,
        WORKLOADS[workload],
        detail=f"time per call; {detail}; fwd+bwd returns out, dx, dw of sum(out * g); "
        f"check = max abs diff / max abs NumPy value, worst output",
    )
    data = conv_data(spec)
    x, w, wc, g = data["x"], data["w"], data["wc"], data["g"]
    np_forward, np_fwd_bwd = numpy_conv_functions(spec, data)
    for grad in (False, True):
        case = "fwd+bwd" if grad else "forward"
        np_fn = np_fwd_bwd if grad else np_forward
        table.time(case, "NumPy (im2col + matmul)", lambda f=np_fn: f, ref=True, **ref_timing)
        check = f32_check(np_fn())

        def make(api: str, mode: str, grad: bool = grad) -> Callable[[], Any]:
            f = theano_conv_function(api, mode, spec, grad)
            return (lambda: f(x, w, g)) if grad else (lambda: f(x, w))

        _theano_rows(table, ctx, case, ["conv2d"], make, check, timing)

        def make_jax(grad: bool = grad) -> Callable[[], Any]:
            import jax

            fn = jax_conv_functions(spec)[int(grad)]
            args = _jnp(x, wc, g) if grad else _jnp(x, wc)
            return lambda: jax.block_until_ready(fn(*args))

        def make_torch(grad: bool = grad) -> Callable[[], Any]:
            fn = torch_conv_functions(spec)[int(grad)]
            args = _torch(x, wc, g) if grad else _torch(x, wc)
            return lambda: fn(*args)

        _peer_rows(table, ctx, case, make_jax, make_torch, check, timing)
    _notes(table, ctx)
    return table


def run_pool(ctx: Context) -> Table:
    """W14: a 2x2 max-pool, forward and forward+backward."""
    timing, detail = _timing(ctx)
    ref_timing = {**timing, "warmup": 1}
    table = Table(
        "W14",
        WORKLOADS["W14"],
        detail=f"time per call; {detail}; fwd+bwd returns out, dx of sum(out * g); "
        "no ties in the input; check = max abs diff / max abs NumPy value",
    )
    data = pool_data()
    x, g = data["x"], data["g"]

    def np_fwd_bwd() -> tuple[np.ndarray, np.ndarray]:
        out = numpy_pool(x)
        return out, numpy_pool_backward(x, out, g)

    for grad in (False, True):
        case = "fwd+bwd" if grad else "forward"
        np_fn = np_fwd_bwd if grad else (lambda: numpy_pool(x))
        table.time(case, "NumPy (reshape + max)", lambda f=np_fn: f, ref=True, **ref_timing)
        check = f32_check(np_fn())

        def make(api: str, mode: str, grad: bool = grad) -> Callable[[], Any]:
            f = theano_pool_function(api, mode, grad)
            return (lambda: f(x, g)) if grad else (lambda: f(x))

        _theano_rows(table, ctx, case, ["pool_2d"], make, check, timing)

        def make_jax(grad: bool = grad) -> Callable[[], Any]:
            import jax

            fn = jax_pool_functions()[int(grad)]
            args = _jnp(x, g) if grad else _jnp(x)
            return lambda: jax.block_until_ready(fn(*args))

        def make_torch(grad: bool = grad) -> Callable[[], Any]:
            fn = torch_pool_functions()[int(grad)]
            args = _torch(x, g) if grad else _torch(x)
            return lambda: fn(*args)

        _peer_rows(table, ctx, case, make_jax, make_torch, check, timing)
    _notes(table, ctx)
    return table


def run_lenet(ctx: Context) -> Table:
    """W15: the LeNet training step, each engine checked against NumPy after 3 steps."""
    timing, detail = _timing(ctx)
    ref_timing = {**timing, "warmup": 1}
    table = Table(
        "W15",
        WORKLOADS["W15"],
        detail=f"time per step; {detail}, after {CHECK_STEPS} check steps; check = "
        f"relative 2-norm difference of the parameter changes from NumPy's after "
        f"{CHECK_STEPS} steps",
    )
    data = lenet_data()
    start = [np.asarray(p, dtype=np.float64) for p in data["params"]]
    reference = NumpyLeNet(data)
    for _ in range(CHECK_STEPS):
        reference.step()
    expected = [np.asarray(p, dtype=np.float64) for p in reference.params()]
    case = "LeNet step"
    timed = NumpyLeNet(data)
    table.time(case, "NumPy (hand-written)", lambda: timed.step, ref=True, **ref_timing)

    holder: dict[str, Any] = {}

    def make(api: str, mode: str) -> Callable[[], Any]:
        f, shared = theano_lenet_step(api, mode, data)
        holder["params"] = lambda: [s.get_value() for s in shared]
        return lambda: f(data["x"], data["y"])

    check = delta_check(start, expected, lambda: holder["params"]())
    _theano_rows(table, ctx, case, ["conv2d", "pool_2d"], make, check, timing)

    def make_peer(builder: Callable[[dict[str, Any]], Any]) -> Callable[[], Any]:
        run, params = builder(data)
        holder["params"] = params
        return run

    def make_torch() -> Callable[[], Any]:
        torch_threads()
        return make_peer(_torch_lenet)

    _peer_rows(table, ctx, case, lambda: make_peer(_jax_lenet), make_torch, check, timing)
    _notes(table, ctx)
    return table


#: Issue 15's targets: the largest opgraph time / PyTorch CPU time per workload and case
#: (JAX CPU: below 1 everywhere).
TORCH_TARGETS = {
    "W12": {"forward": 1.3, "fwd+bwd": 1.5},
    "W13": {"forward": 1.3, "fwd+bwd": 1.5},
    "W14": {"forward": 1.0, "fwd+bwd": 1.0},
    "W15": {"LeNet step": 1.0},
}


def _target_notes(table: Table) -> None:
    """One note per case: FAST_RUN's best-linker opgraph row over the faster PyTorch row's
    median (every CPU or one thread) and JAX's, beside issue 15's targets."""
    best = opgraph_engines()[0][0]
    for case, target in TORCH_TARGETS.get(table.workload, {}).items():
        rows = {r.engine: r.timing for r in table.rows if r.case == case and r.timing}
        if best not in rows:
            continue
        parts = []
        torch_rows = [e for e in ("PyTorch CPU", "PyTorch CPU, 1 thread") if e in rows]
        fastest = min(torch_rows, key=lambda e: rows[e].median, default="PyTorch CPU")
        for engine, limit in ((fastest, target), ("JAX (jit)", 1.0)):
            if engine in rows:
                ratio = rows[best].median / rows[engine].median
                verdict = "met" if ratio <= limit else "NOT met"
                parts.append(f"/ {engine} = {ratio:.2f}x (target <= {limit:g}x: {verdict})")
        if parts:
            table.note(f"{case}: {best} " + ", ".join(parts))


def _notes(table: Table, ctx: Context) -> None:
    """Issue 15's targets, why peers did not run, and PyTorch's thread count."""
    _target_notes(table)
    missing = ctx.peer_summary()
    status = torch_status()
    if status != "ok":
        missing = f"{missing}; PyTorch: {status}" if missing else f"PyTorch: {status}"
    else:
        table.note(f"PyTorch CPU on {torch_threads()} thread(s), and on 1 where that differs")
    if missing:
        table.note(f"peers not run: {missing}")


def run(workload: str, ctx: Context) -> Table:
    """W12, W13 (convolution), W14 (max-pool) or W15 (LeNet training step)."""
    if workload in CONV_SPECS:
        return run_conv(workload, ctx)
    if workload == "W14":
        return run_pool(ctx)
    return run_lenet(ctx)
