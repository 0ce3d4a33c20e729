"""Bad inputs and faults under the dask linker (issue 17): a worker killed mid-computation,
inputs with unknown chunk sizes, inputs whose chunks do not line up, and an Op with no
dask lowering. Each ends in a correct result or a clear error, with nothing lost or
silently computed on the client.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.mode import Mode
from opgraph.graph.basic import Apply
from opgraph.graph.op import Op, OutputStorage
from opgraph_dask.linker import DaskLinker
from opgraph_dask.lowering import LoweringError


def slow_blocks(seconds: float) -> Callable[[np.ndarray], np.ndarray]:
    """A chunk function that waits ``seconds`` and returns its chunk unchanged.

    Made by a factory so that cloudpickle ships it to the workers by value (they cannot
    import this test module).
    """

    def slow(block: np.ndarray) -> np.ndarray:
        time.sleep(seconds)
        return block

    return slow


def tripwire_blocks() -> Callable[[np.ndarray], np.ndarray]:
    """A chunk function that fails if it ever runs: marks data that must not be computed."""

    def tripwire(block: np.ndarray) -> np.ndarray:
        raise AssertionError("a chunk of the input was computed")

    return tripwire


def fused_sum(x: Any) -> Any:
    """A fused elementwise expression reduced along axis 1 (what the kill test computes)."""
    return (T.exp(-(x**2)) * T.cos(x) + 0.5 * x).sum(axis=1)


# --------------------------------------------------------------------------- worker killed


def test_worker_killed_mid_compute_is_retried(client: Any, py_mode: Any) -> None:
    """SIGKILL one worker process while it runs the call's tasks: the nanny starts a new
    one, the scheduler reruns the lost tasks, and the call returns the right values and
    updates the shared accumulator exactly once."""
    data = np.random.default_rng(0).standard_normal((12 * 40, 30))
    x = da.map_blocks(slow_blocks(0.4), da.from_array(data, chunks=(40, 30)), dtype="float64")

    v = T.dmatrix("v")
    total = opgraph.shared(np.zeros(data.shape[0]), name="total")
    out = fused_sum(v)
    mode = Mode(linker=DaskLinker(compute=True), optimizer="fast_run")
    f = opgraph.function([v], out, updates=[(total, total + out)], mode=mode)
    expected = opgraph.function([v], fused_sum(v), mode=py_mode)(data)

    def call_on_cluster() -> Any:
        with client.as_current():  # the call's thread computes on the cluster
            return f(x)

    pids = client.run(os.getpid)
    # The nanny ships dask's config to the worker it restarts: no Client object in it.
    with dask.config.set(scheduler=None), ThreadPoolExecutor(1) as pool:
        call = pool.submit(call_on_cluster)
        victim = None
        deadline = time.monotonic() + 30
        while victim is None and time.monotonic() < deadline and not call.done():
            busy = [w for w, keys in client.processing().items() if keys]
            if busy:
                time.sleep(0.3)  # let it get into a chunk
                victim = busy[0]
            else:
                time.sleep(0.02)
        assert victim is not None, "no worker ever ran the call's tasks"
        assert not call.done(), "the call ended before the worker could be killed"
        os.kill(pids[victim], signal.SIGKILL)
        got = call.result(timeout=90)
    client.wait_for_workers(2, timeout=60)
    assert victim not in client.scheduler_info()["workers"]  # it really died

    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    np.testing.assert_allclose(total.get_value(), expected, rtol=1e-12)


# --------------------------------------------------------------------------- unknown chunks


def test_unknown_chunk_sizes_are_refused_clearly(dask_mode: Any) -> None:
    data = np.arange(-50.0, 50.0)
    x = da.from_array(data, chunks=25)
    positive = x[x > 0]  # boolean mask: dask cannot know the chunk sizes
    assert np.isnan(positive.shape[0])
    v = T.dvector("v")
    f = opgraph.function([v], (v * 2).sum(), mode=dask_mode)
    with pytest.raises(TypeError, match="unknown chunk sizes") as info:
        f(positive)
    assert "compute_chunk_sizes" in str(info.value)  # the hint names the fix

    # after the fix the hint gives, the same call is correct
    positive.compute_chunk_sizes()
    got = f(positive)
    got = dask.compute(got)[0] if dask.is_dask_collection(got) else got
    np.testing.assert_allclose(got, 2 * data[data > 0].sum())


# --------------------------------------------------------------------------- mismatched chunks


def computed(value: Any) -> np.ndarray:
    """A returned value as NumPy."""
    return np.asarray(dask.compute(value)[0] if dask.is_dask_collection(value) else value)


def test_elementwise_inputs_with_different_chunks(dask_mode: Any, py_mode: Any) -> None:
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((90, 40)), rng.standard_normal((90, 40))
    x, y = T.dmatrix("x"), T.dmatrix("y")
    expr = [T.exp(x) * y + x, (x - y).sum(axis=0)]
    f = opgraph.function([x, y], expr, mode=dask_mode)
    ref = opgraph.function([x, y], expr, mode=py_mode)(a, b)
    ad = da.from_array(a, chunks=(30, 40))
    bd = da.from_array(b, chunks=((50, 40), (15, 25)))  # no chunk boundary in common
    got = f(ad, bd)
    assert all(dask.is_dask_collection(g) for g in got)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(computed(g), r, rtol=1e-12)


def test_broadcast_against_a_differently_chunked_row(dask_mode: Any, py_mode: Any) -> None:
    rng = np.random.default_rng(2)
    a, r = rng.standard_normal((60, 24)), rng.standard_normal(24)
    x, row = T.dmatrix("x"), T.dvector("row")
    expr = (x * row.dimshuffle("x", 0)).max(axis=1)
    f = opgraph.function([x, row], expr, mode=dask_mode)
    ref = opgraph.function([x, row], expr, mode=py_mode)(a, r)
    got = f(da.from_array(a, chunks=(20, 8)), da.from_array(r, chunks=5))
    np.testing.assert_allclose(computed(got), ref, rtol=1e-12)


def test_dot_with_mismatched_inner_chunks(dask_mode: Any, py_mode: Any) -> None:
    """The contracted axis is chunked differently in the two operands."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((30, 50)), rng.standard_normal((50, 20))
    x, y = T.dmatrix("x"), T.dmatrix("y")
    f = opgraph.function([x, y], T.dot(x, y), mode=dask_mode)
    ref = opgraph.function([x, y], T.dot(x, y), mode=py_mode)(a, b)
    got = f(da.from_array(a, chunks=(10, 20)), da.from_array(b, chunks=(15, 20)))
    # sums of products in another order: tolerance relative to the result's scale
    np.testing.assert_allclose(computed(got), ref, rtol=1e-12, atol=1e-13 * np.abs(ref).max())


# --------------------------------------------------------------------------- no lowering


class Cumulative(Op):
    """A running sum along axis 0: needs the whole axis, so it is not elementwise, and
    opgraph-dask has no lowering for it."""

    __props__ = ()

    def make_node(self, x: Any) -> Apply:
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], out: OutputStorage) -> None:
        out[0][0] = np.cumsum(inputs[0], axis=0)


def test_op_without_lowering_on_an_argument_fails_at_compile(dask_mode: Any) -> None:
    v = T.dvector("v")
    with pytest.raises(LoweringError) as info:
        opgraph.function([v], Cumulative()(v) * 2, mode=dask_mode)
    message = str(info.value)
    assert "Cumulative" in message and "no dask lowering" in message
    assert "opgraph_dask_lowerings" in message  # says how to add one


def test_op_without_lowering_mid_graph_computes_nothing(dask_mode: Any) -> None:
    """Reached only through other nodes, the Op fails at call time, before any chunk of the
    input runs (its chunks would raise if computed) and with the shared value unchanged."""
    v = T.dvector("v")
    seen = opgraph.shared(np.zeros(40), name="seen")
    out = Cumulative()(T.exp(v) + 1)
    f = opgraph.function([v], out, updates=[(seen, seen + out)], mode=dask_mode)
    x = da.map_blocks(tripwire_blocks(), da.zeros(40, chunks=10), dtype="float64")
    with pytest.raises(LoweringError, match="Cumulative") as info:
        f(x)
    assert "a chunk of the input was computed" not in str(info.value)
    np.testing.assert_array_equal(seen.get_value(), np.zeros(40))
