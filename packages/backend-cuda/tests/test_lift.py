"""The GPU pass: what moves, where transfers go, what stays on the CPU and why."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph import config
from opgraph.compile.mode import get_mode
from opgraph_cuda import opt
from opgraph_cuda.ops import GpuFromHost, GpuOp, HostFromGpu
from opgraph_cuda.runtime import GpuUnavailable
from opgraph_cuda.type import gpuarray_shared_constructor


def _nodes(f):
    return f.maker.fgraph.toposort()


def _ops(f):
    return [type(n.op).__name__ for n in _nodes(f)]


def assert_transfers_only_at_boundaries(f):
    """No transfer sits inside a GPU subgraph: nothing goes device -> host -> device."""
    for node in _nodes(f):
        if isinstance(node.op, GpuFromHost):
            owner = node.inputs[0].owner
            assert owner is None or not isinstance(owner.op, HostFromGpu), node
        if isinstance(node.op, HostFromGpu):
            for client, _ in f.maker.fgraph.clients[node.outputs[0]]:
                assert client == "output" or not isinstance(
                    getattr(client, "op", None), GpuFromHost
                ), node


def test_views_of_a_gpu_shared_variable_stay_on_the_device():
    value = np.arange(12, dtype="float32").reshape(3, 4)
    w = gpuarray_shared_constructor(value, name="w")
    f = opgraph.function([], w.T[1:] + 0, mode=get_mode("FAST_RUN"))
    np.testing.assert_array_equal(f(), value.T[1:])
    ops = _ops(f)
    assert ops.count("HostFromGpu") == 1 and "GpuFromHost" not in ops
    assert "GpuDimShuffle" in ops and "GpuSubtensor" in ops
    assert_transfers_only_at_boundaries(f)


def test_float32_graph_moves_and_matches_numpy(gpu_mode):
    x = T.matrix("x", dtype="float32")
    y = T.exp(x) * T.sin(x) + x.sum(axis=0)
    f = opgraph.function([x], [y, y.max()], mode=gpu_mode)
    ops = _ops(f)
    assert ops.count("GpuFromHost") == 1, ops
    assert "GpuElemwise" in ops and "GpuCAReduce" in ops
    assert not [op for op in ops if op == "Elemwise"], ops
    assert_transfers_only_at_boundaries(f)
    value = np.random.default_rng(0).standard_normal((5, 7)).astype("float32")
    out, top = f(value)
    expected = np.exp(value) * np.sin(value) + value.sum(axis=0)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(top, expected.max(), rtol=1e-5)
    assert out.dtype == np.float32 and isinstance(out, np.ndarray)


def test_updates_run_on_the_device(gpu_mode):
    w = gpuarray_shared_constructor(np.ones(5, "float32"), name="w")
    x = T.vector("x", dtype="float32")
    step = opgraph.function([x], (w * x).sum(), updates=[(w, w - 0.5 * x)], mode=gpu_mode)
    ops = _ops(step)
    assert "GpuFromHost" in ops and ops.count("HostFromGpu") == 1  # x in, the sum out
    assert_transfers_only_at_boundaries(step)
    value = np.arange(5, dtype="float32")
    np.testing.assert_allclose(step(value), value.sum())
    np.testing.assert_allclose(w.get_value(), 1 - 0.5 * value)


def test_float64_stays_on_the_cpu_with_a_logged_reason(gpu_mode, caplog):
    x = T.dmatrix("x")
    with caplog.at_level(logging.INFO, logger="opgraph_cuda.opt"):
        f = opgraph.function([x], T.exp(x) + 1, mode=gpu_mode)
    assert not any(isinstance(n.op, GpuOp) for n in _nodes(f))
    assert "float64 stays on the CPU" in caplog.text
    np.testing.assert_allclose(f(np.ones((2, 2))), np.e + 1)


def test_assert_no_cpu_op_names_what_stays(gpu_mode):
    x = T.dmatrix("x")
    with (
        config.change_flags(assert_no_cpu_op="raise"),
        pytest.raises(AssertionError, match="stay on the CPU in a GPU graph"),
    ):
        opgraph.function([x], T.exp(x), mode=gpu_mode)
    with config.change_flags(assert_no_cpu_op="warn"), pytest.warns(UserWarning, match="float64"):
        opgraph.function([x], T.exp(x), mode=gpu_mode)


def test_lift_never_and_auto_without_gpu_variables_leave_graphs_alone():
    x = T.matrix("x", dtype="float32")
    for flag in ("never", "auto"):
        with config.change_flags(cuda__lift=flag):
            f = opgraph.function([x], T.exp(x), mode=get_mode("FAST_RUN"))
        assert not any(isinstance(n.op, GpuOp) for n in _nodes(f))


def test_unavailable_gpu_warns_and_computes_on_the_cpu(gpu_mode, monkeypatch):
    def unavailable():
        raise GpuUnavailable("PyCUDA is not installed (test)")

    monkeypatch.setattr(opt, "get_runtime", unavailable)
    x = T.vector("x", dtype="float32")
    with pytest.warns(RuntimeWarning, match="graphs stay on the CPU: PyCUDA is not installed"):
        f = opgraph.function([x], T.exp(x), mode=gpu_mode)
    np.testing.assert_allclose(f(np.zeros(3, "float32")), 1)
    with config.change_flags(force_device=True), pytest.raises(GpuUnavailable):
        opgraph.function([x], T.exp(x) * 2, mode=gpu_mode)


def test_an_op_without_a_gpu_version_gets_host_data(gpu_mode):
    x = T.matrix("x", dtype="float32")
    f = opgraph.function([x], T.argsort(T.exp(x), axis=1), mode=gpu_mode)
    value = np.random.default_rng(1).standard_normal((3, 4)).astype("float32")
    np.testing.assert_array_equal(f(value), np.argsort(np.exp(value), axis=1))
    assert "GpuElemwise" in _ops(f)
    assert_transfers_only_at_boundaries(f)


def test_an_output_marked_for_the_device_stays_there(gpu_mode):
    from opgraph.compile.io import Out
    from opgraph_cuda.array import GpuArray
    from opgraph_cuda.ops import gpu_from_host

    x = T.vector("x", dtype="float32")
    y = gpu_from_host(T.exp(x) * 2)
    f = opgraph.function([x], Out(y, borrow=True), mode=gpu_mode)
    out = f(np.zeros(3, "float32"))
    assert isinstance(out, GpuArray)
    np.testing.assert_allclose(out.get(), 2)
    assert "HostFromGpu" not in _ops(f)


def test_a_failing_call_leaves_gpu_shared_variables_unchanged(gpu_mode):
    w = gpuarray_shared_constructor(np.ones(3, "float32"), name="w")
    x = T.vector("x", dtype="float32")
    f = opgraph.function([x], [], updates=[(w, w + x)], mode=gpu_mode)
    with pytest.raises(ValueError):
        f(np.ones(4, "float32"))
    np.testing.assert_array_equal(w.get_value(), 1)
    f(np.ones(3, "float32"))
    np.testing.assert_array_equal(w.get_value(), 2)
