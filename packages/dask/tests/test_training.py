"""SGD with shared weights over a dataset held as a dask array (issue 17).

Each step's gradient is reduced across the dataset's chunks by dask; the updates land in
the shared variables on the client, as NumPy values. Every test runs the same steps with
the in-memory reference (``py_mode``: each node's ``perform``) and compares the costs and
the weights after every step (float64).
"""

from __future__ import annotations

from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest

import opgraph
import opgraph.tensor as T

N, D = 600, 7
LR = 0.5
RTOL = 1e-10


def dataset(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)``: N x D features and 0/1 labels from a noisy linear rule."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, D))
    y = (x @ rng.standard_normal(D) + 0.3 * rng.standard_normal(N) > 0).astype("float64")
    return x, y


def logistic_regression(mode: Any, updates: bool = True) -> tuple[Any, Any, Any]:
    """``(train, w, b)``: Theano's logistic regression; ``train(x, y)`` returns the 0-d cost
    and (with ``updates``) moves ``w`` and ``b`` one gradient step."""
    x = T.dmatrix("x")
    y = T.dvector("y")
    w = opgraph.shared(np.linspace(-0.2, 0.2, D), name="w")
    b = opgraph.shared(np.float64(0.1), name="b")
    p_1 = T.nnet.sigmoid(T.dot(x, w) + b)
    xent = -y * T.log(p_1) - (1 - y) * T.log(1 - p_1)
    cost = xent.mean() + 0.01 * (w**2).sum()
    gw, gb = T.grad(cost, [w, b])
    steps = [(w, w - LR * gw), (b, b - LR * gb)] if updates else []
    return opgraph.function([x, y], cost, updates=steps, mode=mode), w, b


def as_number(value: Any) -> np.ndarray:
    """A returned value as NumPy (computing a lazy dask output)."""
    if dask.is_dask_collection(value):
        (value,) = dask.compute(value)
    return np.asarray(value)


def run_steps(
    mode: Any, batches: list[tuple[Any, Any]]
) -> tuple[list[np.ndarray], list[tuple[np.ndarray, np.ndarray]]]:
    """Costs and ``(w, b)`` after each step of SGD over ``batches``."""
    train, w, b = logistic_regression(mode)
    costs, weights = [], []
    for xb, yb in batches:
        costs.append(as_number(train(xb, yb)))
        weights.append((w.get_value(), b.get_value()))
    return costs, weights


def assert_same_training(got: Any, ref: Any) -> None:
    """The costs (0-d float64) and the weights of every step agree."""
    (costs, weights), (ref_costs, ref_weights) = got, ref
    assert len(costs) == len(ref_costs)
    for c, r in zip(costs, ref_costs):
        assert c.shape == () and c.dtype == np.float64
        np.testing.assert_allclose(c, r, rtol=RTOL)
    for (w, b), (wr, br) in zip(weights, ref_weights):
        # the shared variables hold NumPy values on the client, never dask arrays
        assert isinstance(w, np.ndarray) and not dask.is_dask_collection(w)
        assert not dask.is_dask_collection(b)
        np.testing.assert_allclose(w, wr, rtol=RTOL, atol=1e-14)
        np.testing.assert_allclose(b, br, rtol=RTOL, atol=1e-14)


def full_batch(x: np.ndarray, y: np.ndarray, steps: int, chunks: Any) -> list[tuple[Any, Any]]:
    """The whole dataset, as dask arrays with ``chunks`` rows, once per step."""
    xd = da.from_array(x, chunks=(chunks, D))
    yd = da.from_array(y, chunks=(chunks,))
    return [(xd, yd)] * steps


@pytest.mark.parametrize("chunks", [100, (250, 50, 300)], ids=["even", "uneven"])
def test_full_batch_steps_match_in_memory(py_mode: Any, dask_mode: Any, chunks: Any) -> None:
    x, y = dataset()
    got = run_steps(dask_mode, full_batch(x, y, 4, chunks))
    ref = run_steps(py_mode, [(x, y)] * 4)
    assert_same_training(got, ref)
    # the model learns: the cost falls from step to step
    costs = [float(c) for c in got[0]]
    assert costs == sorted(costs, reverse=True) and costs[-1] < costs[0]


def test_minibatch_epoch_over_slices(py_mode: Any, dask_mode: Any) -> None:
    """One epoch of minibatches, each a slice of the dask array spanning several chunks."""
    x, y = dataset(1)
    xd = da.from_array(x, chunks=(75, D))
    yd = da.from_array(y, chunks=(75,))
    starts = range(0, N, 200)
    got = run_steps(dask_mode, [(xd[s : s + 200], yd[s : s + 200]) for s in starts])
    ref = run_steps(py_mode, [(x[s : s + 200], y[s : s + 200]) for s in starts])
    assert_same_training(got, ref)


def test_steps_on_the_cluster(client: Any, py_mode: Any, dask_mode: Any) -> None:
    """The same training with the distributed cluster as dask's scheduler."""
    x, y = dataset(2)
    got = run_steps(dask_mode, full_batch(x, y, 3, 150))
    ref = run_steps(py_mode, [(x, y)] * 3)
    assert_same_training(got, ref)


def test_compute_flag_gives_numpy_cost(py_mode: Any, dask_mode: Any) -> None:
    """With ``dask__compute`` the 0-d cost comes back computed, with the updates applied."""
    x, y = dataset(3)
    xd, yd = full_batch(x, y, 1, 120)[0]
    with opgraph.config.change_flags(dask__compute=True):
        train, w, b = logistic_regression(dask_mode)
        cost = train(xd, yd)
    assert not dask.is_dask_collection(cost)
    assert np.ndim(cost) == 0
    ref_train, w_ref, b_ref = logistic_regression(py_mode)
    np.testing.assert_allclose(cost, ref_train(x, y), rtol=RTOL)
    np.testing.assert_allclose(w.get_value(), w_ref.get_value(), rtol=RTOL)
    np.testing.assert_allclose(b.get_value(), b_ref.get_value(), rtol=RTOL)


def test_cost_alone_is_0d_and_leaves_weights(py_mode: Any, dask_mode: Any) -> None:
    """Without updates: a 0-d float64 cost, the shared weights untouched."""
    x, y = dataset(4)
    xd, yd = full_batch(x, y, 1, 64)[0]
    get_cost, w, b = logistic_regression(dask_mode, updates=False)
    before = w.get_value().copy(), b.get_value()
    out = get_cost(xd, yd)
    value = as_number(out)
    assert value.shape == () and value.dtype == np.float64
    ref_cost, _, _ = logistic_regression(py_mode, updates=False)
    np.testing.assert_allclose(value, ref_cost(x, y), rtol=RTOL)
    np.testing.assert_array_equal(w.get_value(), before[0])
    assert b.get_value() == before[1]
