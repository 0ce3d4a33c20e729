"""tensor.signal.pool: Pool, its gradients, pool_2d/pool_3d, against Theano 1.0.5 and a loop."""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.mode import Mode
from opgraph.gradient import Rop
from opgraph.gradient import verify_grad as _verify_grad
from opgraph.tensor.signal.pool import (
    AveragePoolGrad,
    DownsampleFactorMaxGradGrad,
    MaxPoolGrad,
    MaxPoolRop,
    Pool,
    PoolGrad,
    max_pool_2d_same_size,
    pool_2d,
    pool_3d,
)
from opgraph.testing.checks import assert_allclose, check_infer_shape, check_modes

FLOATS = ["float32", "float64"]
MODES = ["max", "sum", "average_inc_pad", "average_exc_pad"]
PY = Mode(linker="py", optimizer=None)

# Theano 1.0.5 (THEANO_FLAGS=cxx=, i.e. its perform) on X5 = ((arange(25) * 7) % 25) as
# (1, 1, 5, 5): pool_2d(X5, ws, ignore_border, stride, pad, mode), and the gradient for
# the output weights arange(out.size) + 1. Averages: the sums over the window's counts.
X5 = ((np.arange(25) * 7) % 25).reshape(1, 1, 5, 5).astype("float64")
SUM_33_PAD = [[34, 89, 43], [66, 106, 67], [54, 69, 38]]
SUM_33_PAD_GRAD = [
    [1, 3, 2, 5, 3],
    [5, 12, 7, 16, 9],
    [4, 9, 5, 11, 6],
    [11, 24, 13, 28, 15],
    [7, 15, 8, 17, 9],
]
AVG_22_GRAD = [
    [0.25, 0.25, 0.5, 0.5, 1.5],
    [0.25, 0.25, 0.5, 0.5, 1.5],
    [1, 1, 1.25, 1.25, 3],
    [1, 1, 1.25, 1.25, 3],
    [3.5, 3.5, 4, 4, 9],
]
GOLDEN_2D: list[tuple[str, tuple, bool, Any, tuple, Any, Any]] = [
    # (mode, ws, ignore_border, stride, pad, out, grad)
    ("max", (2, 2), False, None, (0, 0), [[17, 24, 13], [20, 19, 23], [22, 11, 18]],
     [[0, 0, 0, 0, 0], [0, 1, 2, 0, 3], [4, 0, 0, 0, 6], [0, 0, 5, 0, 0], [0, 7, 0, 8, 9]]),
    ("max", (2, 2), True, None, (0, 0), [[17, 24], [20, 19]],
     [[0, 0, 0, 0, 0], [0, 1, 2, 0, 0], [3, 0, 0, 0, 0], [0, 0, 4, 0, 0], [0, 0, 0, 0, 0]]),
    ("max", (3, 3), True, (2, 2), (1, 1), [[17, 24, 21], [20, 24, 23], [22, 22, 18]],
     [[0, 0, 0, 3, 0], [0, 1, 7, 0, 0], [4, 0, 0, 0, 6], [0, 0, 0, 0, 0], [0, 15, 0, 0, 9]]),
    ("max", (3, 2), False, (1, 3), (0, 0), [[20, 23], [20, 23], [22, 23]],
     [[0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [4, 0, 0, 0, 12], [0, 0, 0, 0, 0], [0, 5, 0, 0, 0]]),
    ("sum", (2, 3), False, (1, 2), (0, 0), [[72, 81], [82, 91], [67, 76], [77, 61]],
     [[1, 1, 3, 2, 2], [4, 4, 10, 6, 6], [8, 8, 18, 10, 10], [12, 12, 26, 14, 14],
      [7, 7, 15, 8, 8]]),
    ("sum", (3, 3), True, (2, 2), (1, 1), SUM_33_PAD, SUM_33_PAD_GRAD),
    ("average_inc_pad", (3, 3), True, (2, 2), (1, 1), np.divide(SUM_33_PAD, 9),
     np.divide(SUM_33_PAD_GRAD, 9)),
    # Theano's perform raises NotImplementedError for this gradient (exc_pad with padding)
    ("average_exc_pad", (3, 3), True, (2, 2), (1, 1),
     np.divide(SUM_33_PAD, [[4, 6, 4], [6, 9, 6], [4, 6, 4]]), None),
    ("average_inc_pad", (2, 2), False, None, (0, 0),
     np.divide([[34, 65, 16], [39, 45, 31], [37, 15, 18]], [[4, 4, 2], [4, 4, 2], [2, 2, 1]]),
     AVG_22_GRAD),
    ("average_exc_pad", (2, 2), False, None, (0, 0),
     np.divide([[34, 65, 16], [39, 45, 31], [37, 15, 18]], [[4, 4, 2], [4, 4, 2], [2, 2, 1]]),
     AVG_22_GRAD),
]  # fmt: skip
# Theano: ties all receive the gradient (pool_2d(T3, (2, 2), False, (1, 1)), cost sum).
T3 = np.array([[1.0, 1, 0], [1, 0, 2], [2, 2, 2]]).reshape(1, 1, 3, 3)
TIES_OUT, TIES_GRAD = [[1, 2], [2, 2]], [[1, 1, 0], [1, 0, 2], [1, 2, 1]]
# Theano: DownsampleFactorMaxGradGrad(False)(X5, pool_2d(X5, (2, 2), False), arange(25.))
GGRAD = [[6, 7, 9], [10, 17, 14], [21, 23, 24]]
SAME_SIZE = [[0, 0, 0, 0, 0], [0, 17, 24, 0, 0], [20, 0, 0, 0, 0], [0, 0, 19, 0, 0], [0] * 5]
# Theano: Rop(pool_2d(X5, (3, 3), True, (1, 1)), X5, arange(25.)[..., ::-1])
ROP = [[7, 7, 7], [7, 7, 7], [23, 23, 10]]
# Theano: pool_3d(X27, (2, 2, 2), False, mode) on X27 = ((arange(27) * 5) % 27) as (1, 3, 3, 3)
X27 = ((np.arange(27) * 5) % 27).reshape(1, 3, 3, 3).astype("float64")
GOLDEN_3D = {
    "max": [[[23, 25], [26, 13]], [[24, 19], [17, 22]]],
    "average_inc_pad": [[[12.25, 13], [14.5, 8.5]], [[12.25, 13], [14.5, 22]]],
    "sum": [[[98, 52], [58, 17]], [[49, 26], [29, 22]]],
}
GRAD_3D_MAX = [
    [[0, 0, 0], [0, 0, 1], [0, 0, 1]],
    [[0, 1, 0], [0, 0, 0], [0, 1, 0]],
    [[0, 0, 1], [1, 0, 0], [0, 1, 1]],
]


def naive_pool(x: np.ndarray, ws, ib: bool, st, pad, mode: str):
    """(out, windows): a loop over every output position; windows[k][r] the input indices
    (unpadded) of window r of batch index k."""
    nd = len(ws)
    sp = x.shape[-nd:]
    osp = tuple(Pool.out_shape(sp, ws, ib, st, pad, nd))
    out = np.zeros(x.shape[:-nd] + osp, dtype=x.dtype)
    cells = {}
    for r in np.ndindex(*osp):
        lo = [r[i] * st[i] - pad[i] for i in range(nd)]
        hi = [min(lo[i] + ws[i], sp[i] + pad[i]) for i in range(nd)]
        inc = int(np.prod([h - lo_ for h, lo_ in zip(hi, lo, strict=True)]))
        rng_ = [range(max(lo[i], 0), min(hi[i], sp[i])) for i in range(nd)]
        cells[r] = list(itertools.product(*rng_))
        for k in np.ndindex(*x.shape[:-nd]):
            vals = np.array([x[k + c] for c in cells[r]], dtype="float64")
            if mode == "max":
                v = vals.max()
            elif mode == "sum":
                v = vals.sum()
            else:
                v = vals.sum() / (inc if mode == "average_inc_pad" else len(vals))
            out[k + r] = v
    return out, cells


def naive_grad(x: np.ndarray, out: np.ndarray, gz: np.ndarray, cells, mode: str, inc):
    nd = len(next(iter(cells)))
    gx = np.zeros(x.shape, dtype="float64")
    for r, cs in cells.items():
        for k in np.ndindex(*x.shape[:-nd]):
            for c in cs:
                if mode == "max":
                    gx[k + c] += gz[k + r] if x[k + c] == out[k + r] else 0
                elif mode == "sum":
                    gx[k + c] += gz[k + r]
                else:
                    n = inc[r] if mode == "average_inc_pad" else len(cs)
                    gx[k + c] += gz[k + r] / n
    return gx


def run_op(op, *values):
    """An Op's perform on values (the node built from constants)."""
    node = op.make_node(*[T.constant(v) for v in values])
    out = [[None]]
    op.perform(node, list(values), out)
    return out[0][0]


def verify_grad(fun, pt, rng) -> None:
    _verify_grad(fun, pt, rng=rng, n_tests=1)


# ----------------------------------------------------------------------------- values


def test_goldens_2d_every_mode() -> None:
    x = T.dtensor4("x")
    outs, grads, want_out, want_grad = [], [], [], []
    for mode, ws, ib, st, pad, out, grad in GOLDEN_2D:
        y = pool_2d(x, ws, ignore_border=ib, stride=st, pad=pad, mode=mode)
        outs.append(y)
        want_out.append(np.asarray(out, dtype="float64")[None, None])
        if grad is not None:
            w = np.arange(np.size(out), dtype="float64").reshape(np.shape(out)) + 1
            grads.append(opgraph.grad((y * w).sum(), x))
            want_grad.append(np.asarray(grad, dtype="float64")[None, None])
    check_modes([x], outs + grads, [X5], want_out + want_grad, modes=["FAST_RUN"])


def test_goldens_ties_gradgrad_same_size_rop_3d() -> None:
    x, e, x3 = T.dtensor4("x"), T.dtensor4("e"), T.dtensor4("x3")
    y = pool_2d(x, (2, 2), ignore_border=False, stride=(1, 1))
    ties = [y, opgraph.grad(y.sum(), x)]
    y2 = pool_2d(x, (2, 2), ignore_border=False)
    gg = DownsampleFactorMaxGradGrad(False)(x, y2, np.arange(25.0).reshape(1, 1, 5, 5), (2, 2))
    rop = Rop(pool_2d(x, (3, 3), ignore_border=True, stride=(1, 1)), x, e)
    p3 = [pool_3d(x3, (2, 2, 2), ignore_border=False, mode=m) for m in GOLDEN_3D]
    g3 = opgraph.grad(p3[0].sum(), x3)
    outs = [ties[0], ties[1], gg, max_pool_2d_same_size(x, (2, 2)), rop, *p3, g3]
    ev = np.arange(25.0).reshape(1, 1, 5, 5)[..., ::-1].copy()
    f = opgraph.function([x, e, x3], outs[2:])
    fa = opgraph.function([x], outs[:2])
    assert_allclose(fa(T3)[0][0, 0], np.array(TIES_OUT, "float64"))
    assert_allclose(fa(T3)[1][0, 0], np.array(TIES_GRAD, "float64"))
    got = f(X5, ev, X27)
    want = [GGRAD, SAME_SIZE, ROP, *GOLDEN_3D.values(), GRAD_3D_MAX]
    for g, w in zip(got, want, strict=True):
        assert_allclose(g[0] if g.shape[1] != 1 else g[0, 0], np.array(w, "float64"))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("nd", [2, 3])
def test_perform_matches_naive_loop(mode: str, nd: int, rng: np.random.Generator) -> None:
    shape = (2, 1, 5, 4) if nd == 2 else (1, 2, 4, 3, 5)
    x = rng.standard_normal(shape)
    x[..., 0, 0] = x[..., 1, 0]  # a tie
    configs = [((2,) * nd, False, (2,) * nd, (0,) * nd), ((3,) * nd, True, (1,) * nd, (0,) * nd)]
    configs += [((3, 2, 3)[:nd], True, (2, 1, 2)[:nd], (1, 1, 2)[:nd])]
    configs += [((2, 3, 2)[:nd], False, (1, 3, 2)[:nd], (0,) * nd)]
    for ws, ib, st, pad in configs:
        ref, cells = naive_pool(x, ws, ib, st, pad, mode)
        for dtype in FLOATS:
            xv = x.astype(dtype)
            args = (np.array(ws), np.array(st), np.array(pad))
            got = run_op(Pool(ib, mode, nd), xv, *args)
            assert got.dtype == dtype
            assert_allclose(got, ref.astype(dtype), err_msg=str((ws, ib, st, pad)))
            gz = rng.standard_normal(got.shape).astype(dtype)
            inc = {
                r: int(np.prod([min(r[i] * st[i] + ws[i], shape[-nd + i] + 2 * pad[i])
                                - r[i] * st[i] for i in range(nd)]))
                for r in cells
            }  # fmt: skip
            gref = naive_grad(xv, got, gz, cells, mode, inc)
            if mode == "max":
                gx = run_op(MaxPoolGrad(ib, nd), xv, got, gz, *args)
            else:
                gx = run_op(AveragePoolGrad(ib, mode, nd), xv, gz, *args)
            assert gx.dtype == dtype
            assert_allclose(gx, gref.astype(dtype), err_msg=str((ws, ib, st, pad)))


def test_compiled_modes_and_symbolic_ws(rng: np.random.Generator) -> None:
    x, ws, st = T.ftensor4("x"), T.ivector("ws"), T.ivector("st")
    xv = rng.standard_normal((2, 3, 6, 5)).astype("float32")
    outs = [Pool(True, m)(x, ws, st) for m in MODES]
    outs.append(opgraph.grad(outs[0].sum() + outs[3].sum(), x))
    wsv, stv = np.array([3, 2], "int32"), np.array([2, 2], "int32")
    args = (np.array([3, 2]), np.array([2, 2]), np.array([0, 0]))
    expected = [run_op(Pool(True, m), xv, *args) for m in MODES]
    gz = np.ones_like(expected[0])
    expected.append(
        run_op(MaxPoolGrad(True), xv, expected[0], gz, *args)
        + run_op(AveragePoolGrad(True, "average_exc_pad"), xv, gz, *args)
    )
    check_modes([x, ws, st], outs, [xv, wsv, stv], expected, modes=["FAST_RUN", "DEBUG_MODE"])
    # infer_shape with symbolic ws/stride: the shape graph, without computing the pooling
    shapes = opgraph.function([x, ws, st], [o.shape for o in outs], mode="FAST_RUN")
    assert not any(isinstance(n.op, Pool) for n in shapes.maker.fgraph.apply_nodes)
    for shp, e in zip(shapes(xv, wsv, stv), expected, strict=True):
        assert tuple(shp) == e.shape
    f = opgraph.function([x, ws, st], outs[0], mode=PY)
    with pytest.raises(ValueError, match="ws must be a vector of 2 ints"):
        f(xv, np.array([2, 2, 2], "int32"), stv)


@pytest.mark.parametrize("dtype", FLOATS)
def test_batch_dims_and_dtypes(dtype: str, rng: np.random.Generator) -> None:
    for shape in [(5, 4), (3, 5, 4), (2, 1, 2, 5, 4), (0, 3, 5, 4)]:
        x = T.TensorType(dtype, (False,) * len(shape))()
        xv = rng.standard_normal(shape).astype(dtype)
        y = pool_2d(x, (2, 2), ignore_border=False, mode="average_exc_pad")
        g = opgraph.grad(y.sum(), x)
        flat = xv.reshape((-1, 1, *shape[-2:]))
        ref = run_op(Pool(False, "average_exc_pad"), flat, np.array([2, 2]), np.array([2, 2]),
                     np.array([0, 0]))  # fmt: skip
        f = opgraph.function([x], [y, g])
        out, gx = f(xv)
        assert out.dtype == gx.dtype == dtype
        assert_allclose(out, ref.reshape(shape[:-2] + ref.shape[-2:]))
        assert gx.shape == shape


def test_maxpoolrop_first_max_and_nan() -> None:
    x = np.array([[3.0, 3, 1], [np.nan, 0, 5], [2, 2, 2]]).reshape(1, 3, 3)
    ev = np.arange(9.0).reshape(1, 3, 3) + 10
    got = run_op(MaxPoolRop(True), x, ev, np.array([2, 2]), np.array([1, 1]), np.array([0, 0]))
    assert_allclose(got, np.array([[[13, 15], [13, 15]]], "float64"))
    out = run_op(Pool(True), x, np.array([2, 2]), np.array([1, 1]), np.array([0, 0]))
    assert np.isnan(out[0, :, 0]).all() and out[0, 0, 1] == 5


# ------------------------------------------------------------------------------ grads


@pytest.mark.parametrize("mode", MODES)
def test_verify_grad_pool(mode: str, rng: np.random.Generator) -> None:
    x = rng.permutation(40).reshape(1, 2, 4, 5) / 7.0
    x3 = rng.permutation(36).reshape(1, 3, 4, 3) / 7.0
    pad = (1, 1) if mode != "max" else (1, 0)
    verify_grad(lambda v: pool_2d(v, (3, 2), True, (2, 1), pad, mode), [x], rng)
    verify_grad(lambda v: pool_2d(v, (2, 3), False, (1, 2), mode=mode), [x], rng)
    verify_grad(lambda v: pool_3d(v, (2, 2, 2), False, (1, 2, 1), mode=mode), [x3], rng)


def test_verify_grad_of_grads(rng: np.random.Generator) -> None:
    x = rng.permutation(30).reshape(1, 1, 5, 6) / 7.0
    ws, st, pad = (3, 2), (2, 2), (1, 1)
    out = run_op(Pool(True), x, *map(np.array, (ws, st, pad)))
    gz = rng.standard_normal(out.shape)

    def mpg(g):
        return MaxPoolGrad(True)(x, out, g, ws, st, pad)

    verify_grad(mpg, [gz], rng)
    verify_grad(lambda gg: DownsampleFactorMaxGradGrad(True)(x, out, gg, ws, st, pad), [x], rng)
    for mode in ["sum", "average_inc_pad", "average_exc_pad"]:
        verify_grad(lambda g, m=mode: AveragePoolGrad(True, m)(x, g, ws, st, pad), [gz], rng)
    # grad of grad through opgraph.grad, and its value against the naive chain
    xv = T.dtensor4("xv")
    y = pool_2d(xv, ws, True, st, pad)
    g = opgraph.grad((y * gz).sum(), xv)
    gg = opgraph.grad((g * x).sum(), xv, disconnected_inputs="ignore")
    assert_allclose(opgraph.function([xv], gg, on_unused_input="ignore")(x), np.zeros_like(x))
    w = T.dtensor4("w")
    g2 = opgraph.grad((y * w).sum(), xv)
    ggw = opgraph.grad((g2 * x).sum(), w)
    assert isinstance(ggw.owner.op, DownsampleFactorMaxGradGrad) or any(
        isinstance(n.op, DownsampleFactorMaxGradGrad)
        for n in opgraph.graph.traversal.io_toposort([w, xv], [ggw])
    )
    want = run_op(DownsampleFactorMaxGradGrad(True), x, out, x, *map(np.array, (ws, st, pad)))
    assert_allclose(opgraph.function([xv, w], ggw)(x, gz), want)
    ag = opgraph.grad((pool_2d(xv, ws, True, st, pad, "sum") * w).sum(), xv)
    agg = opgraph.grad((ag * x).sum(), w)
    assert_allclose(opgraph.function([xv, w], agg)(x, gz), run_op(Pool(True, "sum"), x,
                    *map(np.array, (ws, st, pad))))  # fmt: skip


def test_rop_average_is_pool_of_eval_point(rng: np.random.Generator) -> None:
    x, e = T.dtensor4("x"), T.dtensor4("e")
    xv, ev = rng.standard_normal((1, 2, 4, 4)), rng.standard_normal((1, 2, 4, 4))
    y = pool_2d(x, (2, 2), True, mode="average_inc_pad")
    got = opgraph.function([x, e], Rop(y, x, e), on_unused_input="ignore")(xv, ev)
    assert_allclose(got, run_op(Pool(True, "average_inc_pad"), ev, *map(np.array,
                    ((2, 2), (2, 2), (0, 0)))))  # fmt: skip


# ------------------------------------------------------------------- shapes, API, errors


def test_out_shape_and_infer_shape(rng: np.random.Generator) -> None:
    assert Pool.out_shape((5, 5), (2, 2)) == [3, 3]
    assert Pool.out_shape((5, 5), (3, 3), True, (2, 2), (1, 1)) == [3, 3]
    assert Pool.out_shape((2, 7, 5), (3, 2), False, (1, 3)) == [2, 5, 2]
    assert PoolGrad.out_shape((4, 4), (2, 2), True) == [2, 2]
    x = T.dtensor4("x")
    xv = rng.standard_normal((1, 2, 7, 6))
    outs = [pool_2d(x, (3, 2), ib, (2, 1), mode=m) for ib in (False, True) for m in MODES]
    check_infer_shape([x], outs, [xv], Pool)
    y = pool_2d(T.TensorType("float64", shape=(2, 3, 7, 6))(), (3, 2), True, (2, 2), (1, 1))
    assert y.type.shape == (2, 3, 4, 4)


def test_pool_2d_arguments_and_warnings() -> None:
    x = T.dtensor4("x")
    with pytest.warns(UserWarning, match=r"pool_2d\(\) will have the parameter ignore_border"):
        y = pool_2d(x, (2, 2))
    assert y.owner.op == Pool(False, "max", 2)
    with pytest.warns(UserWarning, match="`ws == stride and pad == \\(0, 0, 0\\)"):
        pool_3d(T.dtensor4(), (2, 2, 2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = pool_2d(x, ds=(2, 2), ignore_border=True, st=(1, 1), padding=(1, 1))
    assert [str(w.message).split()[2] for w in caught] == ["'ds'", "'st'", "'padding'"]
    assert all(w.filename == __file__ for w in caught)
    assert y.owner.inputs[1].data.tolist() == [2, 2] and y.owner.inputs[3].data.tolist() == [1, 1]
    with pytest.raises(ValueError, match="both 'ws' and 'ds'"):
        pool_2d(x, (2, 2), True, ds=(2, 2))
    with pytest.raises(ValueError, match="window size"):
        pool_2d(x, ignore_border=True)
    with pytest.raises(ValueError, match="'st and 'stride'"):
        pool_2d(x, (2, 2), True, stride=(1, 1), st=(1, 1))
    assert Pool(True, "max_deterministic").mode == "max"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pool_2d(x, (2, 2), ignore_border=True)


def test_build_time_errors() -> None:
    x = T.dtensor4("x")
    with pytest.raises(NotImplementedError, match="pool_2d requires a dimension >= 2"):
        pool_2d(T.dvector(), (2, 2), True)
    with pytest.raises(TypeError, match=r"input 0 \(x\) needs at least 3 dimensions"):
        Pool(True, ndim=3)(T.dmatrix(), (2, 2, 2))
    with pytest.raises(NotImplementedError, match="padding works only with ignore_border=True"):
        pool_2d(x, (2, 2), False, pad=(1, 1))
    with pytest.raises(NotImplementedError, match="padding must be smaller"):
        pool_2d(x, (2, 2), True, pad=(2, 1))
    with pytest.raises(TypeError, match="Pool downsample parameters must be ints"):
        pool_2d(x, (2.0, 2.0), True)
    with pytest.raises(TypeError, match="Stride parameters must be ints"):
        pool_2d(x, (2, 2), True, stride=T.dvector())
    with pytest.raises(ValueError, match="ws must have 2 elements, got 3"):
        pool_2d(x, (2, 2, 2), True)
    with pytest.raises(ValueError, match="ws must be >= 1"):
        pool_2d(x, (0, 2), True)
    with pytest.raises(ValueError, match="Pool mode parameter only support"):
        Pool(True, "median")
    with pytest.raises(ValueError, match="no window fits"):
        pool_2d(T.TensorType("float64", shape=(1, 1, 3, 3))(), (5, 5), True)
    with pytest.raises(TypeError, match="cannot be complex"):
        pool_2d(T.zmatrix(), (2, 2), True)


def test_run_time_errors() -> None:
    x, ws, pad = T.dtensor4("x"), T.lvector("ws"), T.lvector("pad")
    f = opgraph.function([x, ws, pad], Pool(True)(x, ws, None, pad), mode=PY)
    xv = np.zeros((1, 1, 3, 3))
    with pytest.raises(ValueError, match=r"ws=\(5, 5\) is larger than the input's pooled shape"):
        f(xv, [5, 5], [0, 0])
    with pytest.raises(ValueError, match="must be smaller than the window"):
        f(xv, [2, 2], [2, 0])
    with pytest.raises(ValueError, match="ws and stride must be >= 1"):
        f(xv, [0, 2], [0, 0])
    g = opgraph.function([x, ws, pad], Pool(False)(x, ws, None, pad), mode=PY)
    with pytest.raises(ValueError, match="works only with ignore_border=True"):
        g(xv, [2, 2], [1, 1])
    with pytest.raises(ValueError, match="no window fits"):
        g(np.zeros((1, 1, 0, 3)), [2, 2], [0, 0])
    # Theano 1.0 pooled the whole input as one partial window here: a window larger than the
    # input is the user's mistake, said as such
    with pytest.raises(ValueError, match=r"ws=\(5, 5\) is larger than the input's pooled shape"):
        g(np.arange(9.0).reshape(1, 1, 3, 3), [5, 5], [0, 0])
    maxout, gz = T.dtensor4(), T.dtensor4()
    h = opgraph.function([x, maxout, gz], MaxPoolGrad(True)(x, maxout, gz, (2, 2)), mode=PY)
    with pytest.raises(ValueError, match=r"gz has shape \(1, 1, 2, 2\), expected \(1, 1, 1, 1\)"):
        h(xv, np.zeros((1, 1, 1, 1)), np.zeros((1, 1, 2, 2)))
