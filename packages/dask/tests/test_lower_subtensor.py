"""Lowerings of indexing (opgraph_dask.lowerings.subtensor) against the Python linker."""

from __future__ import annotations

from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.mode import Mode
from opgraph.graph.basic import Constant, Variable
from opgraph.tensor.subtensor_advanced import advanced_inc_subtensor1, advanced_set_subtensor1
from opgraph_dask.lowering import LoweringError, get_table

CHUNKINGS = [-1, (3, 2), ((1, 4, 2), (2, 3))]


def lower(out: Variable, feed: dict[Variable, Any]) -> list[Any]:
    """The lowering of ``out``'s node applied to ``feed``; other inputs are constants or
    lowered the same way (e.g. the ScalarFromTensor of an index)."""
    node = out.owner
    values = [
        v.data if isinstance(v, Constant) else feed[v] if v in feed else lower(v, feed)[v.index]
        for v in node.inputs
    ]
    return get_table().lookup(node.op)(node, values)


def check(out: Variable, feed: dict[Variable, Any]) -> Any:
    """Lower ``out``'s node, compute it and compare with the Python linker."""
    (got,) = lower(out, feed)
    assert isinstance(got, da.Array)
    f = opgraph.function(list(feed), out, mode=Mode(linker="py", optimizer=None))
    want = f(*[v.compute() if isinstance(v, da.Array) else v for v in feed.values()])
    value = got.compute()
    assert value.dtype == want.dtype and value.shape == want.shape
    np.testing.assert_array_equal(value, want)
    return got


@pytest.fixture
def data() -> np.ndarray:
    return np.arange(35, dtype="float64").reshape(7, 5)


@pytest.mark.parametrize("chunks", CHUNKINGS)
@pytest.mark.parametrize(
    "key",
    [
        (slice(1, 6),),
        (slice(None, None, -1),),
        (slice(6, 0, -2), slice(None, None, -3)),
        (-1,),
        (2, slice(1, None)),
        (slice(None), 4),
        (3, -2),
        (slice(-3, None), slice(1, -1, 2)),
    ],
)
def test_basic_subtensor(data: np.ndarray, chunks: Any, key: tuple[Any, ...]) -> None:
    x = T.matrix("x")
    check(x[key], {x: da.from_array(data, chunks=chunks)})


def test_symbolic_index_values(data: np.ndarray) -> None:
    x = T.matrix("x")
    i = T.lscalar("i")
    j = T.iscalar("j")
    dx = da.from_array(data, chunks=(3, 2))
    check(x[i, j:], {x: dx, i: np.int64(-2), j: np.int32(1)})
    with pytest.raises(IndexError, match="index 7 is out of bounds for axis 0 with size 7"):
        lower(x[i], {x: dx, i: np.int64(7)})
    with pytest.raises(LoweringError, match="computed from chunked data"):
        lower(x[i], {x: dx, i: da.from_array(np.int64(1))})


def test_unknown_chunks_only_matter_on_indexed_axes(data: np.ndarray) -> None:
    x = T.matrix("x_masked")
    dx = da.from_array(data, chunks=3)
    masked = dx[dx[:, 1] > 8]
    (cols,) = lower(x[:, 1:3], {x: masked})
    np.testing.assert_array_equal(cols.compute(), data[data[:, 1] > 8][:, 1:3])
    with pytest.raises(LoweringError, match=r"x_masked.*unknown chunk sizes"):
        lower(x[1:3], {x: masked})


@pytest.mark.parametrize("set_", [False, True])
@pytest.mark.parametrize("chunks", CHUNKINGS)
@pytest.mark.parametrize(
    "key, yshape",
    [
        ((slice(1, 5), slice(None, None, 2)), (4, 3)),
        ((slice(None, None, -2), 3), (4,)),
        ((2,), (5,)),
        ((slice(0, 7, 3), slice(1, 3)), (1, 2)),
    ],
)
def test_inc_and_set_subtensor(
    data: np.ndarray, chunks: Any, set_: bool, key: tuple[Any, ...], yshape: tuple[int, ...]
) -> None:
    x = T.matrix("x")
    y = T.tensor("float64", [s == 1 for s in yshape], name="y")
    fn = T.set_subtensor if set_ else T.inc_subtensor
    yval = np.arange(1, 1 + np.prod(yshape), dtype="float64").reshape(yshape) * 100
    dx = da.from_array(data, chunks=chunks)
    check(fn(x[key], y), {x: dx, y: da.from_array(yval, chunks=1)})
    # The input array is not changed.
    np.testing.assert_array_equal(dx.compute(), data)


def test_inc_subtensor_bad_value_shape(data: np.ndarray) -> None:
    x = T.matrix("x")
    y = T.matrix("y")
    with pytest.raises(ValueError, match="indexed part of x has shape"):
        lower(T.inc_subtensor(x[1:3], y), {x: da.from_array(data, chunks=3), y: np.ones((3, 5))})


@pytest.mark.parametrize("chunks", CHUNKINGS)
def test_advanced_subtensor1(data: np.ndarray, chunks: Any) -> None:
    x = T.matrix("x")
    idx = T.lvector("idx")
    dx = da.from_array(data, chunks=chunks)
    ivals = np.array([6, 0, -1, 3, 3, -7])
    check(x[idx], {x: dx, idx: ivals})
    check(x[idx], {x: dx, idx: da.from_array(ivals, chunks=4)})
    with pytest.raises(IndexError, match="index 7 is out of bounds"):
        lower(x[idx], {x: dx, idx: np.array([1, 7])})


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("chunks", CHUNKINGS)
@pytest.mark.parametrize("op", [advanced_inc_subtensor1, advanced_set_subtensor1])
def test_advanced_inc_subtensor1(data: np.ndarray, chunks: Any, op: Any, dtype: str) -> None:
    x = T.matrix("x", dtype=dtype)
    y = T.matrix("y", dtype=dtype)
    r = T.row("r", dtype=dtype)
    idx = T.lvector("idx")
    ivals = np.array([5, 0, -2, 5, 1, 5])
    yval = np.arange(30, dtype=dtype).reshape(6, 5) + 1
    dx = da.from_array(data.astype(dtype), chunks=chunks)
    check(op(x, y, idx), {x: dx, y: da.from_array(yval, chunks=(4, 2)), idx: ivals})
    check(op(x, r, idx), {x: dx, r: yval[:1], idx: ivals})
    check(op(x, y, idx), {x: dx, y: yval, idx: da.from_array(ivals, chunks=4)})
    (bad,) = lower(op(x, y, idx), {x: dx, y: yval, idx: da.from_array(ivals + 2, chunks=4)})
    with pytest.raises(IndexError, match="index 7 is out of bounds for axis 0 with size 7"):
        bad.compute()


def test_gather_gradient_through_the_dask_linker(client: Any, data: np.ndarray) -> None:
    x = T.matrix("x")
    idx = T.lvector("idx")
    cost = (x[idx] ** 2).sum() + x[1:4, ::-1].sum() + T.set_subtensor(x[2], 0.0).sum()
    g = opgraph.grad(cost, x)
    ivals = np.array([0, 6, 6, 2])
    want = opgraph.function([x, idx], [cost, g], mode=Mode(linker="py", optimizer="fast_run"))(
        data, ivals
    )
    f = opgraph.function([x, idx], [cost, g], mode="DASK")
    got = dask.compute(*f(da.from_array(data, chunks=((2, 3, 2), (4, 1))), ivals))
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)
