"""The random lowerings: per-block seeds (results independent of the scheduler, the same for
the same state), the draws' distributions, and MRG31k3p samples equal to ``perform``'s."""

from __future__ import annotations

import copy
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest

import opgraph
from opgraph.compile.function import function
from opgraph.sandbox.rng_mrg import MRG_RandomStreams
from opgraph.tensor import random as trandom
from opgraph.tensor.random_ops import RandomFunction
from opgraph.tensor.shared_randomstreams import RandomStreams
from opgraph_dask.lowerings.random import lower_mrg_uniform, lower_random_function

SMALL_BLOCKS = {"array.chunk-size": "32KiB"}


def draw_node(sample: Any, op_type: type = RandomFunction) -> tuple[Any, list[Any]]:
    """The random node of a compiled FAST_RUN function of ``sample`` and its input values
    (the shared state's current value, the constants' data)."""
    f = function([], sample, mode="FAST_RUN")
    (node,) = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, op_type)]
    values = []
    for var in node.inputs:
        if hasattr(var, "get_value"):
            values.append(var.get_value(borrow=True))
        elif hasattr(var, "data"):
            values.append(var.data)
        else:
            raise AssertionError(f"unexpected input {var}")
    return node, values


def sample_of(node: Any, values: list[Any]) -> Any:
    _, sample = lower_random_function(node, [copy.deepcopy(values[0]), *values[1:]])
    return sample


def test_same_state_same_sample_whatever_the_scheduler() -> None:
    with dask.config.set(SMALL_BLOCKS):
        node, values = draw_node(RandomStreams(seed=7).normal((200, 50)))
        a = sample_of(node, values)
        b = sample_of(node, values)
        c = sample_of(node, values)
    assert a.npartitions > 1
    assert a.name == b.name
    sync = a.compute(scheduler="synchronous")
    threads = b.compute(scheduler="threads", num_workers=2)
    np.testing.assert_array_equal(sync, threads)
    np.testing.assert_array_equal(sync, c.compute(scheduler="threads"))
    # every block is its own stream: no two blocks repeat each other
    blocks = [sync[i : i + 10, :10] for i in range(0, 200, 40)]
    assert len({b.tobytes() for b in blocks}) == len(blocks)


def test_state_advances_and_input_is_untouched() -> None:
    node, values = draw_node(RandomStreams(seed=3).uniform((30,)))
    before = copy.deepcopy(values[0])
    new_state, s1 = lower_random_function(node, values)
    assert node.inputs[0].type.values_eq(values[0], before)  # a copy was advanced
    assert not node.inputs[0].type.values_eq(new_state, before)
    _, s2 = lower_random_function(node, [new_state, *values[1:]])
    assert not np.array_equal(s1.compute(), s2.compute())


MOMENTS = {
    "uniform": (dict(low=-1.0, high=3.0), 1.0, 16 / 12, "float64"),
    "normal": (dict(avg=2.0, std=3.0), 2.0, 9.0, "float64"),
    "binomial": (dict(n=10, p=0.3), 3.0, 2.1, "int64"),
    "poisson": (dict(lam=4.0), 4.0, 4.0, "int64"),
    "random_integers": (dict(low=1, high=6), 3.5, 35 / 12, "int64"),
}


@pytest.mark.parametrize("name", list(MOMENTS))
def test_moments_match_the_distribution(name: str) -> None:
    kwargs, mean, var, dtype = MOMENTS[name]
    with dask.config.set(SMALL_BLOCKS):
        node, values = draw_node(getattr(RandomStreams(seed=11), name)((300, 200), **kwargs))
        sample = sample_of(node, values)
    assert sample.npartitions > 1
    assert sample.dtype == np.dtype(dtype) == np.dtype(node.outputs[1].type.dtype)
    got = sample.compute()
    assert got.shape == (300, 200)
    n = got.size
    assert abs(got.mean() - mean) < 5 * np.sqrt(var / n)
    assert abs(got.var() - var) < 0.05 * var
    # the in-memory stream draws other numbers, from the same distribution
    ref = function([], getattr(RandomStreams(seed=11), name)((300, 200), **kwargs))()
    assert abs(got.mean() - ref.mean()) < 8 * np.sqrt(var / n)


def test_float32_sample_dtype() -> None:
    node, values = draw_node(RandomStreams(seed=1).uniform((100,), dtype="float32"))
    sample = sample_of(node, values)
    assert sample.dtype == np.dtype("float32")
    got = sample.compute()
    assert got.dtype == np.dtype("float32") and ((got >= 0) & (got < 1)).all()


def test_numpy_parameter_with_the_full_shape_is_sliced_per_block() -> None:
    avg = np.arange(120.0).reshape(12, 10)
    with dask.config.set({"array.chunk-size": "256B"}):
        node, values = draw_node(RandomStreams(seed=2).normal(avg.shape, avg=avg, std=0.0))
        sample = sample_of(node, values)
    assert sample.npartitions > 1
    np.testing.assert_array_equal(sample.compute(), avg)


def test_dask_parameters_set_the_blocks() -> None:
    import opgraph.tensor as T

    avg_v = np.arange(60.0).reshape(6, 10)
    avg = T.matrix("avg")
    rs = RandomStreams(seed=5)
    sample = rs.normal(avg=avg, std=T.constant(0.0))
    f = function([avg], sample, mode="FAST_RUN")
    (node,) = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, RandomFunction)]
    state, size, std = node.inputs[0].get_value(), node.inputs[1].data, node.inputs[3].data
    values = [state, size, da.from_array(avg_v, (2, 5)), std]
    _, got = lower_random_function(node, values)
    assert got.chunks == ((2, 2, 2), (5, 5))
    np.testing.assert_array_equal(got.compute(), avg_v)
    _, again = lower_random_function(node, values)
    np.testing.assert_array_equal(again.compute(), avg_v)


def test_generator_state() -> None:
    state = opgraph.shared(np.random.default_rng(9))
    _, sample = trandom.uniform(state, (500,))
    node, values = draw_node(sample)
    a, b = sample_of(node, values), sample_of(node, values)
    got = a.compute()
    np.testing.assert_array_equal(got, b.compute())
    assert ((got >= 0) & (got < 1)).all() and abs(got.mean() - 0.5) < 0.05


def test_permutation_is_a_numpy_value() -> None:
    node, values = draw_node(RandomStreams(seed=4).permutation(size=(3,), n=8))
    _, perm = lower_random_function(node, values)
    assert isinstance(perm, np.ndarray) and perm.shape == (3, 8)
    for row in perm:
        assert sorted(row) == list(range(8))


@pytest.mark.parametrize(
    ("shape", "dtype"), [((1000, 30), "float32"), ((4000,), "float64"), ((60, 7, 5), "float32")]
)
def test_mrg_uniform_equals_perform(shape: tuple[int, ...], dtype: str) -> None:
    from opgraph.sandbox.rng_mrg import mrg_uniform

    node, values = draw_node(MRG_RandomStreams(seed=12).uniform(shape, dtype=dtype), mrg_uniform)
    storage: list[list[Any]] = [[None], [None]]
    node.op.perform(node, [values[0].copy(), values[1]], storage)
    with dask.config.set({"array.chunk-size": "4KiB"}):
        new_state, sample = lower_mrg_uniform(node, [values[0].copy(), values[1]])
    assert sample.numblocks[0] > 1
    np.testing.assert_array_equal(sample.compute(), storage[1][0])
    np.testing.assert_array_equal(new_state, storage[0][0])


def test_on_distributed_cluster(client: Any) -> None:
    with dask.config.set(SMALL_BLOCKS):
        node, values = draw_node(RandomStreams(seed=13).binomial((100, 80), n=5, p=0.5))
        sample = sample_of(node, values)
    assert sample.npartitions > 1
    on_cluster = client.compute(sample).result()
    np.testing.assert_array_equal(on_cluster, sample.compute(scheduler="synchronous"))
