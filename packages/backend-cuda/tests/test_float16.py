"""float16 on the GPU: stored as float16, computed in float32 (Theano's gpuarray rule).

Conversions are checked bit for bit against NumPy's float16 (every half, and a dense
sample of floats and doubles with the ties, the subnormal range and the overflow edge);
elementwise graphs against NumPy computing in float32 and rounding once
(``op(x.astype(np.float32)).astype(np.float16)``); reductions against float32
accumulation; then the lifter (what moves, what stays and why), views, a small MLP forward
pass and float16 shared variables under ``device=cuda``.

On the emulator, arithmetic, square roots and conversions must be bit-identical;
transcendental functions (the emulator's libm and NumPy's differ by an ulp of float32
before rounding) may differ by one ulp of float16. On a device (``OPGRAPH_TEST_GPU=1``) nvcc
may fuse ``a * b + c`` into one rounding, so fused graphs allow one ulp there too. NaN
payloads are not compared: CUDA makes every NaN its canonical one (0x7fff, 0x7fffffff),
NumPy keeps the payload; a NaN must stay a NaN.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import opgraph
import opgraph.scalar.basic as sb
import opgraph.tensor as T
from opgraph.compile.mode import get_mode
from opgraph.scalar.type import get_scalar_type
from opgraph_cuda.array import GpuArray
from opgraph_cuda.elemwise import GpuCAReduce, GpuElemwise
from opgraph_cuda.kernels.reduce import reduce_kernel
from opgraph_cuda.type import GpuArraySharedVariable, GpuArrayType

# The CPU reference graphs run float16 through perform (backend-c has no float16 code).
pytestmark = pytest.mark.filterwarnings("ignore:the c backend's kernel:Warning")

ON_GPU = os.environ.get("OPGRAPH_TEST_GPU") == "1"
#: One ulp of float16 allowed where the device may contract a * b + c (see the docstring).
FUSED_ULPS = 1 if ON_GPU else 0
ALL_HALVES = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)


def ordered(h: np.ndarray) -> np.ndarray:
    """float16 values as integers in the order of their values (-0 and +0 both 0)."""
    bits = np.asarray(h, np.float16).view(np.int16).astype(np.int32)
    return np.where(bits < 0, -(bits & 0x7FFF), bits)


def assert_half_ulps(got, want, ulps: int = 0, what: str = "") -> None:
    """``got`` and ``want`` (float16) within ``ulps`` ulps; NaN exactly where NaN is wanted."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype == np.float16, (what, got.dtype, want.dtype)
    assert got.shape == want.shape, what
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg=f"{what}: NaN positions")
    dist = np.abs(ordered(got[~nan]) - ordered(want[~nan]))
    worst = int(dist.max(initial=0))
    if worst > ulps:
        k = int(np.argmax(dist))
        raise AssertionError(
            f"{what}: {int((dist > ulps).sum())} value(s) off by more than {ulps} ulp(s), "
            f"worst {worst}: got {got[~nan][k]!r}, want {want[~nan][k]!r}"
        )


def assert_bits_equal(got, want, what: str = "") -> None:
    """Bit-identical except NaN payloads (NaN must give NaN)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, what
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg=f"{what}: NaN positions")
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    bad = got[~nan].view(bits) != want[~nan].view(bits)
    assert not bad.any(), f"{what}: {int(bad.sum())} values differ, e.g. {got[~nan][bad][:5]}"


def gpu_call(op, *values):
    """Build ``op``'s node for GPU inputs like ``values``, prepare it, run it: host outputs."""
    arrays = [v if isinstance(v, GpuArray) else GpuArray.from_host(v) for v in values]
    variables = [GpuArrayType(str(a.dtype), [False] * a.ndim)() for a in arrays]
    node = op.make_node(*variables)
    return [out.get() for out in op.prepare_gpu(node)(arrays)]


def f32(fn):
    """``fn`` computed by NumPy in float32 and rounded once to float16."""

    def ref(*xs):
        with np.errstate(all="ignore"):
            args = [x.astype(np.float32) if x.dtype == np.float16 else x for x in xs]
            return np.asarray(fn(*args)).astype(np.float16)

    return ref


def ops_of(f):
    return [type(n.op).__name__ for n in f.maker.fgraph.toposort()]


def cpu_float16_nodes(f):
    """Host nodes computing float16 (integer shape bookkeeping may stay on the host)."""
    return [
        n
        for n in f.maker.fgraph.toposort()
        if not type(n.op).__name__.startswith(("Gpu", "HostFromGpu"))
        and any(getattr(o.type, "dtype", None) == "float16" for o in n.outputs)
    ]


# ---- conversions ----------------------------------------------------------------------------


def test_half_to_float_is_exact_for_every_half():
    """All 65,536 halves, by the copy kernel (astype) and by an elementwise cast; the
    round trip half -> float -> half gives every non-NaN half back."""
    want = ALL_HALVES.astype(np.float32)
    assert_bits_equal(GpuArray.from_host(ALL_HALVES).astype(np.float32).get(), want, "astype")
    h = get_scalar_type("float16")()
    comp = sb.Composite([h], [sb.cast(h, "float32"), sb.cast(sb.cast(h, "float32"), "float16")])
    as_float, back = gpu_call(GpuElemwise(comp), ALL_HALVES)
    assert_bits_equal(as_float, want, "elementwise cast")
    assert_bits_equal(back, ALL_HALVES, "round trip")


def _dense_floats() -> np.ndarray:
    """Floats where rounding to half is delicate: every tie between neighbouring halves
    and the floats next to it, a sweep of the subnormal, normal and overflow ranges, the
    edges (65504, 65519.99, 65520, 2**-25, 2**-24), infinities, NaNs, random bit patterns."""
    finite = ALL_HALVES[np.isfinite(ALL_HALVES) & (ALL_HALVES >= 0)].astype(np.float32)
    finite.sort()
    ties = (finite[:-1] + finite[1:]) / 2  # exact in float32 (12 significant bits)
    near = np.concatenate([np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, 0)])
    sweep = np.arange(0x33000000, 0x47900000, 97, dtype=np.uint32).view(np.float32)
    edges = np.array(
        [65504, 65519.996, 65520, 65536, 1e6, 2.0**-25, 2.0**-24, 3 * 2.0**-26, 1e-30, 0],
        np.float32,
    )
    special = np.array([np.inf, np.nan], np.float32)
    nans = np.array([0x7F800001, 0x7FC00000, 0x7FFFFFFF, 0xFFC00001], np.uint32).view(np.float32)
    rand = np.random.default_rng(16).integers(0, 2**32, 200_000, dtype=np.uint64)
    rand = rand.astype(np.uint32).view(np.float32)
    pos = np.concatenate([ties, near, sweep, edges, special])
    return np.concatenate([pos, -pos, nans, rand])


def test_float_to_half_rounds_to_nearest_even_as_numpy():
    x = _dense_floats()
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    assert_bits_equal(GpuArray.from_host(x).astype(np.float16).get(), want, "astype")
    (got,) = gpu_call(GpuElemwise(sb.Cast(get_scalar_type("float16"))), x)
    assert_bits_equal(got, want, "elementwise cast")


def test_double_to_half_rounds_once():
    """float64 -> float16 rounds the double itself: a double just above a tie between two
    halves, closer than a float32 ulp, rounds up (through float32 it would round twice)."""
    finite = ALL_HALVES[np.isfinite(ALL_HALVES) & (ALL_HALVES > 0)].astype(np.float64)
    finite.sort()
    ties = (finite[:-1] + finite[1:]) / 2
    rng = np.random.default_rng(64)
    x = np.concatenate([ties, ties * (1 + 2.0**-40), ties * (1 - 2.0**-40), [np.inf, np.nan]])
    x = np.concatenate([x, -x, rng.standard_normal(50_000) * 10.0 ** rng.integers(-9, 6, 50_000)])
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    assert_bits_equal(GpuArray.from_host(x).astype(np.float16).get(), want, "astype")


# ---- elementwise --------------------------------------------------------------------------

#: (name, scalar op builder, NumPy in float32, ulps allowed on the emulator)
UNARY = [
    ("neg", sb.neg, np.negative, 0),
    ("abs", sb.abs_, np.abs, 0),
    ("sgn", sb.sgn, np.sign, 0),
    ("sqr", sb.sqr, np.square, 0),
    ("sqrt", sb.sqrt, np.sqrt, 0),
    ("floor", sb.floor, np.floor, 0),
    ("ceil", sb.ceil, np.ceil, 0),
    ("round", sb.round_half_to_even, np.rint, 0),
    ("inv", lambda x: sb.true_div(np.float16(1), x), lambda x: np.float32(1) / x, 0),
    ("affine", lambda x: x * np.float16(0.5) - np.float16(3), lambda x: x * 0.5 - 3, 0),
    ("exp", sb.exp, np.exp, 1),
    ("expm1", sb.expm1, np.expm1, 1),
    ("log", sb.log, np.log, 1),
    ("log1p", sb.log1p, np.log1p, 1),
    ("sin", sb.sin, np.sin, 1),
    ("tanh", sb.tanh, np.tanh, 1),
    ("sigmoid", sb.sigmoid, lambda x: 1 / (1 + np.exp(-x)), 1),
]


def test_unary_ops_on_every_half():
    """Each op on all 65,536 halves (NaN, inf, subnormals included), one fused module."""
    h = get_scalar_type("float16")()
    comp = sb.Composite([h], [build(h) for _, build, _, _ in UNARY])
    got = gpu_call(GpuElemwise(comp), ALL_HALVES)
    for (name, _, ref, ulps), g in zip(UNARY, got, strict=True):
        assert_half_ulps(g, f32(ref)(ALL_HALVES), ulps + FUSED_ULPS, name)


#: (name, scalar op builder, NumPy in float32, ulps)
BINARY = [
    ("add", sb.add, np.add, 0),
    ("sub", sb.sub, np.subtract, 0),
    ("mul", sb.mul, np.multiply, 0),
    ("div", sb.true_div, np.divide, 0),
    ("maximum", sb.maximum, np.maximum, 0),
    ("minimum", sb.minimum, np.minimum, 0),
    ("mod", sb.mod, np.remainder, 0),
    ("pow", sb.pow, np.power, 1),
    ("x*y+x", lambda x, y: x * y + x, lambda x, y: x * y + x, FUSED_ULPS),
]


def test_binary_ops_and_comparisons():
    """Every half against a shuffled copy of them all; comparisons give bools; mixed
    float16/float32 inputs compute in float32 and give float32 (bit for bit)."""
    x = ALL_HALVES
    y = np.random.default_rng(2).permutation(ALL_HALVES)
    s = np.random.default_rng(3).standard_normal(x.size).astype(np.float32)
    a, b = get_scalar_type("float16")(), get_scalar_type("float16")()
    c = get_scalar_type("float32")()
    outs = [build(a, b) for _, build, _, _ in BINARY]
    outs += [sb.gt(a, b), sb.eq(a, b), sb.isnan(a * b), a * c + b, sb.cast(a * c, "float16")]
    got = gpu_call(GpuElemwise(sb.Composite([a, b, c], outs)), x, y, s)
    for (name, _, ref, ulps), g in zip(BINARY, got[: len(BINARY)], strict=True):
        assert_half_ulps(g, f32(ref)(x, y), ulps, name)
    gt, eq, isnan, mixed, mixed_half = got[len(BINARY) :]
    with np.errstate(all="ignore"):
        x32, y32 = x.astype(np.float32), y.astype(np.float32)
        np.testing.assert_array_equal(gt, x32 > y32)
        np.testing.assert_array_equal(eq, x32 == y32)
        np.testing.assert_array_equal(isnan, np.isnan(x32 * y32))
        assert mixed.dtype == np.float32
        if not ON_GPU:
            assert_bits_equal(mixed, x32 * s + y32, "float16 * float32 + float16")
        assert_half_ulps(mixed_half, (x32 * s).astype(np.float16), 0, "cast(x * s, float16)")


def test_a_cast_to_float16_inside_a_fused_graph_rounds_there():
    """Other float16 intermediates stay float32 (one rounding at the end); a cast rounds."""
    a = get_scalar_type("float16")()
    big = sb.mul(a, a)  # float16 by its type, float32 in the kernel
    comp = sb.Composite(
        [a], [sb.true_div(big, a), sb.true_div(sb.cast(sb.cast(big, "float32"), "float16"), a)]
    )
    x = np.array([300.0, 1000.0, 2.0], np.float16)  # 300 * 300 overflows float16
    kept, rounded = gpu_call(GpuElemwise(comp), x)
    np.testing.assert_array_equal(kept, x)
    np.testing.assert_array_equal(rounded, [np.inf, np.inf, 2.0])


def test_strided_broadcast_and_unaligned_inputs(rng):
    x = rng.standard_normal((6, 5, 8)).astype(np.float16)
    row = rng.standard_normal((1, 1, 8)).astype(np.float16)
    g = GpuArray.from_host(x)
    comp = _fma_tanh()
    views = {
        "contiguous": (g, x),
        "unaligned": (g.reshape((240,))[1:].reshape((239,)), x.reshape(240)[1:]),
        "transposed": (g.transpose((2, 0, 1)), x.transpose(2, 0, 1)),
        "reversed and strided": (g[::-1, 1:, ::-3], x[::-1, 1:, ::-3]),
    }
    for what, (view, host) in views.items():
        r = np.full(host.shape, 0.25, np.float16)
        (got,) = gpu_call(GpuElemwise(comp), view, r)
        want = f32(lambda a, b: np.tanh(a * 3 + b))(host, r)
        assert_half_ulps(got, want, 1 + FUSED_ULPS, what)
    b = g[:, :1].view((6, 5, 8), (g.strides[0], 0, 2))  # a stride-0 dimension
    (got,) = gpu_call(GpuElemwise(comp), b, GpuArray.from_host(row).view((6, 5, 8), (0, 0, 2)))
    want = f32(lambda a, c: np.tanh(a * 3 + c))(
        np.repeat(x[:, :1], 5, 1), np.broadcast_to(row, x.shape)
    )
    assert_half_ulps(got, want, 1 + FUSED_ULPS, "broadcast")


def _fma_tanh():
    a, b = get_scalar_type("float16")(), get_scalar_type("float16")()
    return sb.Composite([a, b], [sb.tanh(a * np.float16(3) + b)])


# ---- reductions ---------------------------------------------------------------------------

AXES = [(), (0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min"])
def test_reductions_accumulate_in_float32(rng, name):
    """Every axis pattern, contiguous and transposed: max/min exact, sum/prod within one
    ulp of the float64 result rounded to float16 (the float32 accumulator's order is the
    kernel's own); one module per op, as core's Sum/Prod ask (acc float32, out float16)."""
    scalar_op, ref = {
        "sum": (sb.add, lambda v, a: v.sum(axis=a, dtype=np.float64)),
        "prod": (sb.mul, lambda v, a: v.prod(axis=a, dtype=np.float64)),
        "max": (sb.maximum, lambda v, a: v.max(axis=a)),
        "min": (sb.minimum, lambda v, a: v.min(axis=a)),
    }[name]
    kernel = reduce_kernel(scalar_op, "float16", "float16", "float16", f"float16 {name}")
    assert kernel.acc_dtype == "float32"
    assert "__half2float(*p)" in kernel.source.code and "__float2half_rn(a)" in kernel.source.code
    x = rng.uniform(0.8, 1.25, (5, 6, 7)).astype(np.float16)
    x[0, 0, 0] = -1.5
    g = GpuArray.from_host(x)
    for view, host, label in ((g, x, ""), (g.transpose((2, 0, 1)), x.transpose(2, 0, 1), "T")):
        for axes in AXES:
            got = kernel(view, axes).get()
            want = np.asarray(ref(host, axes)).astype(np.float16)
            ulps = 0 if name in ("max", "min") else 1
            assert_half_ulps(got, want, ulps, f"{name}{label} over {axes}")


def test_lifted_reductions_keep_the_cpu_ops_dtypes(gpu_mode, rng):
    x = T.tensor3("x", dtype="float16")
    outs = [x.sum(axis=1), x.max(axis=(0, 2)), x.min(), x.sum(dtype="float32")]
    f = opgraph.function([x], outs, mode=gpu_mode)
    cpu = opgraph.function([x], outs, mode=get_mode("FAST_RUN").excluding("gpuarray"))
    reductions = [n.op for n in f.maker.fgraph.toposort() if isinstance(n.op, GpuCAReduce)]
    assert len(reductions) == len(outs), ops_of(f)
    assert {op.acc_dtype for op in reductions} == {"float32"}
    v = rng.uniform(0.8, 1.25, (3, 40, 5)).astype(np.float16)
    for got, want in zip(f(v), cpu(v), strict=True):
        assert got.dtype == want.dtype
        if want.dtype == np.float16:
            assert_half_ulps(got, want, 1, "vs the CPU")
        else:
            np.testing.assert_allclose(got, want, rtol=1e-6)


def test_nan_and_inf_propagate(gpu_mode):
    x = T.vector("x", dtype="float16")
    outs = [x * np.float16(2), x.max(), x.sum(), T.exp(x), T.maximum(x, 0)]
    f = opgraph.function([x], outs, mode=gpu_mode)
    assert "GpuElemwise" in ops_of(f) and "GpuCAReduce" in ops_of(f)
    v = np.array([65504, -np.inf, 6e-8, np.nan, 1.0], np.float16)
    doubled, top, total, ex, relu = f(v)
    np.testing.assert_array_equal(doubled, np.array([np.inf, -np.inf, 1.2e-7, np.nan, 2], "f2"))
    assert np.isnan(top) and np.isnan(total) and top.dtype == total.dtype == np.float16
    np.testing.assert_array_equal(ex, f32(np.exp)(v))
    np.testing.assert_array_equal(relu, np.array([65504, 0, 6e-8, np.nan, 1.0], "f2"))
    assert np.isinf(f(v[:3])[2]) and f(v[:3])[1] == 65504  # sum: -inf; max: 65504


# ---- the lifter, views, an MLP -------------------------------------------------------------


def test_views_alloc_and_gathers_move_in_float16(gpu_mode, rng):
    x = T.matrix("x", dtype="float16")
    idx = T.ivector("idx")
    outs = [
        x.T[1:, ::2] + np.float16(1),
        x.reshape((x.shape[0] * x.shape[1],)) * np.float16(2),
        T.alloc(x[0], 3, x.shape[1]) - x[:3],
        x[idx] * x[idx],
        x.dimshuffle("x", 1, 0).max(axis=0),
    ]
    f = opgraph.function([x, idx], outs, mode=gpu_mode)
    ops = ops_of(f)
    for name in (
        "GpuSubtensor",
        "GpuDimShuffle",
        "GpuReshape",
        "GpuAlloc",
        "GpuAdvancedSubtensor1",
    ):
        assert name in ops, (name, ops)
    assert not cpu_float16_nodes(f) and ops.count("GpuFromHost") == 2, ops  # x and idx
    v = rng.standard_normal((5, 6)).astype(np.float16)
    i = np.array([4, 0, -1, 2], np.int32)
    want = [
        f32(lambda a: a + 1)(v.T[1:, ::2]),
        f32(lambda a: a * 2)(v.reshape(-1)),
        f32(lambda a, b: a - b)(np.broadcast_to(v[0], (3, 6)), v[:3]),
        f32(np.square)(v[i]),
        v.T,
    ]
    for got, w in zip(f(v, i), want, strict=True):
        assert_half_ulps(got, w, 0)
    gv = GpuArray.from_host(v)  # GpuArray views of float16 data
    np.testing.assert_array_equal(gv.T[::-2, 1:].get(), v.T[::-2, 1:])
    np.testing.assert_array_equal(gv.T.copy().reshape((30,)).get(), v.T.reshape(30))


def test_ops_without_a_float16_gpu_version_stay_on_the_cpu(gpu_mode, caplog):
    x = T.matrix("x", dtype="float16")
    w = T.matrix("w", dtype="float16")
    with caplog.at_level(logging.INFO, logger="opgraph_cuda.opt"):
        f = opgraph.function([x, w], [T.nnet.softmax(T.dot(x, w)) * np.float16(2)], mode=gpu_mode)
    ops = ops_of(f)
    assert "GpuElemwise" in ops and not {"GpuDot22", "GpuDot", "GpuSoftmax"} & set(ops), ops
    assert "dot stays on the CPU: Dot has no float16 GPU version" in caplog.text
    assert "Softmax has no float16 GPU version" in caplog.text
    v = np.full((2, 3), 0.5, np.float16)
    np.testing.assert_array_equal(f(v, v.T)[0], np.full((2, 2), 1, np.float16))


def _mlp(x, params, f32_math: bool):
    """Two tanh layers and a sigmoid; with ``f32_math`` each layer's elementwise part is
    spelled in float32 and cast back to float16 (what the GPU computes for float16)."""
    h = x
    for k, (w, b) in enumerate(params):
        z = T.dot(h, w)
        if f32_math:
            pre = T.cast(z, "float32") + T.cast(b, "float32")
            act = T.tanh(pre) if k == 0 else T.nnet.sigmoid(pre)
            h = T.cast(act * np.float32(1.5), "float16")
        else:
            act = T.tanh(z + b) if k == 0 else T.nnet.sigmoid(z + b)
            h = act * np.float16(1.5)
    return h, h.mean(dtype="float32")


def test_mlp_forward_in_float16_matches_the_cpu_computed_the_same_way(gpu_mode, rng):
    """The products stay on the CPU (float16 cuBLAS is not wired); each layer's bias and
    activation fuse into one GpuElemwise; the output equals the CPU graph that does its
    elementwise math in float32 and rounds once per layer (one ulp for tanh/sigmoid)."""
    x = T.matrix("x", dtype="float16")
    params = [
        (
            opgraph.shared(rng.standard_normal((20, 16)).astype(np.float16) * np.float16(0.3)),
            opgraph.shared(rng.standard_normal(16).astype(np.float16)),
        ),
        (
            opgraph.shared(rng.standard_normal((16, 4)).astype(np.float16) * np.float16(0.3)),
            opgraph.shared(rng.standard_normal(4).astype(np.float16)),
        ),
    ]
    f = opgraph.function([x], list(_mlp(x, params, False)), mode=gpu_mode)
    ops = ops_of(f)
    assert ops.count("GpuElemwise") >= 2 and "GpuCAReduce" in ops, ops
    assert [type(n.op).__name__ for n in cpu_float16_nodes(f)] == ["Dot", "Dot"], ops
    cpu_mode = get_mode("FAST_RUN").excluding("gpuarray")
    same_way = opgraph.function([x], list(_mlp(x, params, True)), mode=cpu_mode)
    v = rng.standard_normal((8, 20)).astype(np.float16)
    (out, mean), (want, want_mean) = f(v), same_way(v)
    assert out.dtype == np.float16 and mean.dtype == np.float32
    assert_half_ulps(out, want, 1 + FUSED_ULPS, "MLP output")
    np.testing.assert_allclose(mean, want_mean, rtol=1e-3)
    plain = opgraph.function([x], _mlp(x, params, False)[0], mode=cpu_mode)(v)
    np.testing.assert_allclose(out.astype(np.float32), plain.astype(np.float32), atol=2e-2)


# ---- shared variables ---------------------------------------------------------------------


def test_shared_float16_with_a_gpu_target(gpu_mode):
    w = opgraph.shared(np.arange(6, dtype=np.float16).reshape(2, 3), target="cuda")
    assert isinstance(w, GpuArraySharedVariable) and w.type == GpuArrayType(
        "float16", (False, False)
    )
    f = opgraph.function([], w.sum(), updates=[(w, w * np.float16(0.5))], mode=gpu_mode)
    assert f() == 15 and f() == 7.5
    value = w.get_value()
    assert value.dtype == np.float16
    np.testing.assert_array_equal(value, np.arange(6).reshape(2, 3) / 4)
    assert isinstance(w.get_value(return_internal_type=True), GpuArray)


def test_shared_float16_under_device_cuda():
    """``device=cuda`` (a fresh process: the flag cannot change once read): float16 arrays
    go to the GPU like float32 ones, and a graph updating one never leaves the device."""
    code = textwrap.dedent(
        """
        import numpy as np, opgraph
        w = opgraph.shared(np.ones(4, "float16"), name="w")
        f = opgraph.function([], w.sum(), updates=[(w, w + np.float16(0.25))])
        ops = [type(n.op).__name__ for n in f.maker.fgraph.toposort()]
        print([type(w).__name__, str(w.type), float(f()), float(f()), str(w.get_value().dtype), ops])
        """
    )
    env = dict(os.environ, OPGRAPH_FLAGS="device=cuda" + ("" if ON_GPU else ",cuda__emulate=True"))
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    kind, wtype, first, second, dtype, ops = eval(proc.stdout.strip().splitlines()[-1])
    assert kind == "GpuArraySharedVariable" and wtype == "GpuArrayType<None>(float16, vector)"
    assert (first, second, dtype) == (4.0, 5.0, "float16")
    assert "GpuFromHost" not in ops and ops.count("HostFromGpu") == 1, ops
