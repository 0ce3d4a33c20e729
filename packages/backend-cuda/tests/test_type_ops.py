"""GpuArrayType, GPU variables and shared variables, transfers and the view ops."""

from __future__ import annotations

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.mode import get_mode
from opgraph_cuda.array import GpuArray
from opgraph_cuda.ops import (
    GpuAlloc,
    GpuContiguous,
    GpuDimShuffle,
    GpuFromHost,
    GpuReshape,
    GpuSubtensor,
    HostFromGpu,
    gpu_from_host,
    host_from_gpu,
)
from opgraph_cuda.type import (
    GpuArraySharedVariable,
    GpuArrayType,
    GpuArrayVariable,
    gpuarray_shared_constructor,
)

PY = get_mode("FAST_COMPILE").excluding("gpuarray")


def test_type_prints_like_theano_and_compares_by_props():
    assert str(GpuArrayType("float32", (False, False))) == "GpuArrayType<None>(float32, matrix)"
    assert str(GpuArrayType("float32", (True, False, False))) == (
        "GpuArrayType<None>(float32, (True, False, False))"
    )
    assert GpuArrayType("float32", (False,)) == GpuArrayType("float32", (False,))
    assert GpuArrayType("float32", (False,)) != GpuArrayType("int32", (False,))
    with pytest.raises(TypeError, match="cannot hold complex64"):
        GpuArrayType("complex64", ())


def test_filter_checks_dtype_ndim_and_broadcastable():
    t = GpuArrayType("float32", (False, True))
    g = t.filter(np.ones((3, 1), "int16"))
    assert isinstance(g, GpuArray) and g.dtype == np.float32
    assert t.filter(g, strict=True) is g
    with pytest.raises(TypeError, match="strict=True"):
        t.filter(np.ones((3, 1), "float32"), strict=True)
    with pytest.raises(TypeError, match="2 dimensions"):
        t.filter(GpuArray.from_host(np.ones(3, "float32")))
    with pytest.raises(TypeError, match="broadcastable"):
        t.filter(GpuArray.from_host(np.ones((3, 2), "float32")))
    with pytest.raises(TypeError, match="losing precision"):
        t.filter(np.ones((3, 1)) * 0.1)
    assert t.filter(np.ones((3, 1)) * 0.5, allow_downcast=True).get()[0, 0] == 0.5


def test_transfers_round_trip_and_have_gradients():
    x = T.matrix("x", dtype="float32")
    g = gpu_from_host(x)
    assert isinstance(g, GpuArrayVariable) and isinstance(g.owner.op, GpuFromHost)
    back = host_from_gpu(g)
    assert isinstance(back.owner.op, HostFromGpu)
    f = opgraph.function([x], back, mode=PY)
    value = np.random.default_rng(0).standard_normal((4, 3)).astype("float32")
    np.testing.assert_array_equal(f(value), value)
    cost = T.sum(host_from_gpu(gpu_from_host(x)) ** 2)
    grad = opgraph.function([x], opgraph.grad(cost, x), mode=PY)
    np.testing.assert_allclose(grad(value), 2 * value, rtol=1e-6)


def test_gpu_variable_in_tensor_expressions_goes_through_the_host():
    g = GpuArrayType("float32", (False,))("g")
    y = g * 2
    assert y.owner.inputs[0].owner.op == host_from_gpu
    again = GpuFromHost()(g)  # a GPU variable is first brought to the host, as in Theano
    assert again.owner.inputs[0].owner.op == host_from_gpu


def test_host_from_gpu_needs_a_gpu_variable():
    with pytest.raises(TypeError, match="GPU variable"):
        host_from_gpu(T.vector())


def test_shared_variable_keeps_its_value_on_the_device():
    value = np.arange(6, dtype="float32").reshape(2, 3)
    w = gpuarray_shared_constructor(value, name="w")
    assert isinstance(w, GpuArraySharedVariable)
    assert isinstance(w.get_value(return_internal_type=True), GpuArray)
    got = w.get_value()
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, value)
    value[0, 0] = 100  # the shared variable holds its own copy
    assert w.get_value()[0, 0] == 0
    w.set_value(np.ones((2, 3), "float32"))
    np.testing.assert_array_equal(w.get_value(), 1)
    with pytest.raises(TypeError, match="not changed"):
        w.set_value(np.ones(3, "float32"))
    np.testing.assert_array_equal(w.get_value(), 1)
    w.zero()
    np.testing.assert_array_equal(w.get_value(), 0)
    with pytest.raises(TypeError, match=r"numpy\.ndarray or a GpuArray"):
        gpuarray_shared_constructor([1.0, 2.0])


def test_update_of_a_gpu_shared_variable_stays_on_the_device():
    w = gpuarray_shared_constructor(np.ones(4, "float32"), name="w")
    f = opgraph.function([], [], updates=[(w, w * 3)], mode=PY)
    f()
    f()
    np.testing.assert_allclose(w.get_value(), 9)
    assert isinstance(w.get_value(borrow=True, return_internal_type=True), GpuArray)


def _run_op(op, *inputs):
    """``op`` applied to GPU inputs, through a compiled function; the host result."""
    gpu_inputs = [gpuarray_shared_constructor(np.asarray(v)) for v in inputs]
    out = op(*gpu_inputs)
    return opgraph.function([], host_from_gpu(out), mode=PY)()


def test_dimshuffle_is_a_view_with_numpy_semantics():
    x = np.arange(24, dtype="float32").reshape(2, 3, 4)
    np.testing.assert_array_equal(
        _run_op(GpuDimShuffle((False, False, False), (2, "x", 0, 1)), x),
        x.transpose(2, 0, 1)[:, None],
    )
    g = GpuArrayType("float32", (False, True))()
    out = GpuDimShuffle((False, True), (0,))(g)
    assert out.type.broadcastable == (False,)


def test_subtensor_reshape_contiguous_and_alloc():
    x = np.arange(24, dtype="float32").reshape(4, 6)
    op = GpuSubtensor([slice(1, None, 2), slice(None, None, -2)])
    np.testing.assert_array_equal(_run_op(op, x), x[1::2, ::-2])
    shape = opgraph.tensor.as_tensor_variable(np.array([3, 8]))
    np.testing.assert_array_equal(_run_op(lambda g: GpuReshape(2)(g, shape), x), x.reshape(3, 8))
    np.testing.assert_array_equal(_run_op(GpuContiguous(), x), x)
    row = np.arange(3, dtype="float32")
    np.testing.assert_array_equal(_run_op(lambda g: GpuAlloc()(g, 2, 3), row), np.tile(row, (2, 1)))
    with pytest.raises(ValueError, match="does not broadcast"):
        _run_op(lambda g: GpuAlloc()(g, 2, 4), row)


def test_out_of_memory_is_a_clear_error_and_nothing_leaks():
    from opgraph_cuda.runtime import GpuMemoryError

    with pytest.raises(GpuMemoryError, match=r"out of .*GPU memory: asked for 17,592,186,044,416"):
        GpuArray.empty((2**42,), "float32")
    small = GpuArray.from_host(np.arange(3, dtype="float32"))
    np.testing.assert_array_equal(small.get(), [0, 1, 2])
    with pytest.raises(ValueError, match="negative dimension"):
        GpuArray.empty((-1, 2), "float32")
