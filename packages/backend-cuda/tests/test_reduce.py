"""GpuCAReduce and the reduction kernels against NumPy: every axis combination, layouts,
NaN/inf, empty and 0-d inputs, integer and bool reductions, the split-K paths, and the
lifter through opgraph.function."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import opgraph
import opgraph.scalar.basic as sb
import opgraph.tensor as T
from opgraph.scalar import extra as sx
from opgraph_cuda.array import GpuArray
from opgraph_cuda.elemwise import GpuCAReduce
from opgraph_cuda.kernels import reduce as kr
from opgraph_cuda.runtime import get_runtime
from opgraph_cuda.type import GpuArrayType

F32 = {"rtol": 1e-5, "atol": 1e-6}


def reduce_gpu(op, value, bcast=None):
    """Prepare ``op`` for a GPU input like ``value`` and run it: the host result."""
    g = value if isinstance(value, GpuArray) else GpuArray.from_host(value)
    t = GpuArrayType(str(g.dtype), bcast or [False] * g.ndim)
    node = op.make_node(t())
    (out,) = op.prepare_gpu(node)([g])
    assert out.shape == tuple(node.op.infer_shape(node, [g.shape])[0])
    return out.get()


ALL_AXES = [c for r in range(4) for c in itertools.combinations(range(3), r)]
#: (scalar op, acc dtype, NumPy reduction)
FLOAT_REDUCTIONS = {
    "sum": (sb.add, "float64", lambda x, a: x.sum(axis=a, dtype="float64")),
    "prod": (sb.mul, "float64", lambda x, a: x.prod(axis=a, dtype="float64")),
    "max": (sb.maximum, "float32", np.max),
    "min": (sb.minimum, "float32", np.min),
}


@pytest.mark.parametrize("name", sorted(FLOAT_REDUCTIONS))
def test_every_axis_combination_of_a_3d_array(rng, name):
    scalar_op, acc, ref = FLOAT_REDUCTIONS[name]
    x = rng.uniform(0.5, 1.5, (5, 6, 7)).astype("float32")
    for axes in ALL_AXES:
        op = GpuCAReduce(scalar_op, axes, acc_dtype=acc, dtype="float32")
        got = reduce_gpu(op, x)
        expected = np.asarray(ref(x, axes)).astype("float32")
        np.testing.assert_allclose(got, expected, err_msg=str(axes), **F32)
        assert got.dtype == np.float32


@pytest.mark.parametrize("axes", [(0,), (1,), (2,), (0, 2), None])
def test_transposed_sliced_and_broadcast_inputs(rng, axes):
    x = rng.standard_normal((6, 5, 8)).astype("float32")
    g = GpuArray.from_host(x)
    op = GpuCAReduce(sb.add, axes, acc_dtype="float64", dtype="float32")
    views = {
        "transposed": (g.transpose((2, 0, 1)), x.transpose(2, 0, 1)),
        "reversed and strided": (g[::-1, 1:, ::-3], x[::-1, 1:, ::-3]),
        "broadcast": (g[:, :1].view((6, 5, 8), (g.strides[0], 0, 4)), np.repeat(x[:, :1], 5, 1)),
    }
    for what, (view, host) in views.items():
        expected = host.sum(axis=axes, dtype="float64").astype("float32")
        np.testing.assert_allclose(reduce_gpu(op, view), expected, err_msg=what, **F32)


def test_max_and_min_propagate_nan_and_handle_inf():
    x = np.array([[1.0, np.nan, 3.0], [-np.inf, 2.0, np.inf], [np.nan, np.nan, 0.0]], "float32")
    for scalar_op, ref in ((sb.maximum, np.max), (sb.minimum, np.min)):
        for axes in ((0,), (1,), None):
            got = reduce_gpu(GpuCAReduce(scalar_op, axes), x)
            np.testing.assert_array_equal(got, ref(x, axis=axes))


def test_empty_reductions():
    e = np.zeros((3, 0, 2), "float32")
    got = reduce_gpu(GpuCAReduce(sb.add, (1,), acc_dtype="float64", dtype="float32"), e)
    np.testing.assert_array_equal(got, np.zeros((3, 2), "float32"))
    got = reduce_gpu(GpuCAReduce(sb.mul, None, acc_dtype="float64", dtype="float32"), e)
    assert got.shape == () and got == 1
    assert reduce_gpu(GpuCAReduce(sb.add, (1,)), np.zeros((0, 4), "float32")).shape == (0,)
    with pytest.raises(ValueError, match="cannot reduce an empty array"):
        reduce_gpu(GpuCAReduce(sb.maximum, (1,)), e)
    got = reduce_gpu(GpuCAReduce(sb.and_, (0,)), np.zeros((0, 3), bool))
    np.testing.assert_array_equal(got, [True, True, True])


def test_zero_d_and_one_element():
    x = np.array(2.5, "float32")
    assert reduce_gpu(GpuCAReduce(sb.add, None), x) == 2.5
    assert reduce_gpu(GpuCAReduce(sb.maximum, ()), x) == 2.5
    one = np.array([[[-4.0]]], "float32")
    np.testing.assert_array_equal(reduce_gpu(GpuCAReduce(sb.add, (0, 2)), one), [-4.0])


def test_integer_and_bool_reductions(rng):
    x = rng.integers(-100, 100, (4, 9, 5)).astype("int32")
    got = reduce_gpu(GpuCAReduce(sb.add, (1, 2), acc_dtype="int64", dtype="int64"), x)
    np.testing.assert_array_equal(got, x.sum(axis=(1, 2)))
    small = rng.integers(-128, 127, (300,)).astype("int8")
    np.testing.assert_array_equal(reduce_gpu(GpuCAReduce(sb.maximum, None), small), small.max())
    # int8 sums wrap in an int8 accumulator, as NumPy's
    np.testing.assert_array_equal(
        reduce_gpu(GpuCAReduce(sb.add, None), small), np.add.reduce(small, dtype="int8")
    )
    b = rng.random((7, 33)) > 0.3
    np.testing.assert_array_equal(reduce_gpu(GpuCAReduce(sb.and_, (1,)), b), b.all(1))
    np.testing.assert_array_equal(reduce_gpu(GpuCAReduce(sb.or_, (0,)), b), b.any(0))
    np.testing.assert_array_equal(reduce_gpu(GpuCAReduce(sb.xor, (1,)), b), b.sum(1) % 2 == 1)
    bits = rng.integers(0, 256, (5, 3)).astype("uint8")
    np.testing.assert_array_equal(
        reduce_gpu(GpuCAReduce(sb.and_, (0,)), bits), np.bitwise_and.reduce(bits, 0)
    )


def test_mul_without_zeros():
    x = np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 0.0], [1.5, -2.0, 0.0]], "float32")
    got = reduce_gpu(GpuCAReduce(sx.mul_without_zeros, (1,)), x)
    np.testing.assert_array_equal(got, [6.0, 0.0, -3.0])


@pytest.mark.parametrize(("shape", "axes"), [((3, 3001), (1,)), ((2001, 5), (0,)), ((4000,), (0,))])
def test_split_k_two_pass(monkeypatch, rng, shape, axes):
    """Few outputs and long reductions: partials, then a second pass (forced here: the
    emulator's 4 blocks would not ask for it)."""
    monkeypatch.setattr(kr, "TARGET_BLOCKS", 64)
    monkeypatch.setattr(kr, "MIN_PER_THREAD", 1)
    x = rng.standard_normal(shape).astype("float32")
    g = GpuArray.from_host(x)
    M = int(np.prod([n for d, n in enumerate(shape) if d not in axes]))
    plan = kr.plan_launch(
        M, x.size // M, *kr.plan_layout(shape, g.elem_strides, axes)[2:], get_runtime()
    )
    assert plan.splits > 1
    for scalar_op, acc, ref in (
        (sb.add, "float64", lambda v: v.sum(axis=axes, dtype="float64")),
        (sb.maximum, "float32", lambda v: v.max(axis=axes)),
    ):
        got = reduce_gpu(GpuCAReduce(scalar_op, axes, acc_dtype=acc, dtype="float32"), g)
        np.testing.assert_allclose(got, ref(x).astype("float32"), **F32)


def test_plans():
    rt = get_runtime()
    assert kr.plan_layout((4, 5, 6), (30, 6, 1), (1, 2)) == (4, 30, 30, 1)
    assert kr.plan_layout((4, 5, 6), (30, 6, 1), (0,)) == (30, 4, 1, 30)
    assert kr.plan_layout((4, 5, 6), (1, 4, 20), (1, 2)) == (4, 30, 1, 4)  # F order
    assert kr.plan_layout((4, 5, 6), (30, 6, 1), (1,)) is None  # kept dims do not merge
    assert kr.plan_launch(8, 1000, 1000, 1, rt).kind == "rows"
    assert kr.plan_launch(1000, 8, 1, 1000, rt).kind == "cols"
    short = kr.plan_launch(1000, 10, 10, 1, rt)
    assert short.kind == "rows" and short.block[0] == 1  # one thread per short row


def test_source_and_printing():
    k = kr.reduce_kernel(sb.maximum, "float32", "float32", "float32", "GpuCAReduce{maximum}")
    assert k.source.code.startswith("/* GpuCAReduce{maximum}")
    assert "OPG_MAX(a, b)" in k.source.code and "-(opg_float32)INFINITY" in k.source.code
    assert str(GpuCAReduce(sb.add, (0, 1))) == "GpuCAReduce{add}{0,1}"
    assert str(GpuCAReduce(sb.add)) == "GpuCAReduce{add}"
    t = GpuArrayType("float32", (False, True, False))
    node = GpuCAReduce(sb.add, (-1,)).make_node(t())
    assert node.op.axis == (2,) and node.outputs[0].type.broadcastable == (False, True)
    with pytest.raises(TypeError, match="no CUDA reduction"):
        GpuCAReduce(sb.true_div, (0,)).make_node(t())


def test_lifted_reductions_match_numpy(gpu_mode, rng):
    x = T.ftensor3("x")
    outs = [
        x.sum(axis=1),
        x.max(axis=(0, 2)),
        x.min(),
        x.prod(axis=0),
        T.all(x > 0, axis=2),
        T.any(x > 1, axis=0),
        x.sum(),
    ]
    f = opgraph.function([x], outs, mode=gpu_mode)
    ops = [type(n.op).__name__ for n in f.maker.fgraph.toposort()]
    assert ops.count("GpuCAReduce") >= 6, ops
    assert not {"Sum", "Prod", "CAReduce", "All", "Any"} & set(ops), ops
    v = rng.uniform(-1, 2, (3, 4, 5)).astype("float32")
    expected = [
        v.sum(1),
        v.max((0, 2)),
        v.min(),
        v.prod(0),
        (v > 0).all(2),
        (v > 1).any(0),
        v.sum(),
    ]
    for got, want in zip(f(v), expected, strict=True):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
