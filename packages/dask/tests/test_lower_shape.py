"""Lowerings of the shape family (opgraph_dask.lowerings.shape) against the Python linker."""

from __future__ import annotations

from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.mode import Mode
from opgraph.compile.ops import deep_copy_op
from opgraph.graph.basic import Constant, Variable
from opgraph.tensor.basic import Rebroadcast
from opgraph.tensor.joining import Split
from opgraph.tensor.structure import AllocEmpty
from opgraph_dask.lowering import LoweringError, get_table

CHUNKINGS = [-1, (3, 2), ((1, 4, 2), (2, 3))]


def lower(out: Variable, feed: dict[Variable, Any]) -> list[Any]:
    """The lowering of ``out``'s node applied to ``feed``; other inputs are constants or
    lowered the same way."""
    node = out.owner
    values = [
        v.data if isinstance(v, Constant) else feed[v] if v in feed else lower(v, feed)[v.index]
        for v in node.inputs
    ]
    return get_table().lookup(node.op)(node, values)


def reference(outs: Any, feed: dict[Variable, Any]) -> Any:
    """What the Python linker computes for ``outs`` from the NumPy values of ``feed``."""
    f = opgraph.function(list(feed), outs, mode=Mode(linker="py", optimizer=None))
    return f(*[v.compute() if isinstance(v, da.Array) else v for v in feed.values()])


def check(out: Variable, feed: dict[Variable, Any]) -> Any:
    """Lower ``out``'s node, compute it and compare with the reference; return the value."""
    (got,) = lower(out, feed)
    value = got.compute() if isinstance(got, da.Array) else got
    want = reference(out, feed)
    assert value.dtype == want.dtype
    np.testing.assert_array_equal(value, want)
    return got


@pytest.fixture
def data() -> np.ndarray:
    return np.arange(35, dtype="float64").reshape(7, 5)


@pytest.mark.parametrize("chunks", CHUNKINGS)
def test_dimshuffle_transpose_expand_drop(data: np.ndarray, chunks: Any) -> None:
    x = T.matrix("x")
    dx = da.from_array(data, chunks=chunks)
    got = check(x.T, {x: dx})
    assert got.chunks == dx.chunks[::-1]
    check(x.dimshuffle("x", 1, "x", 0), {x: dx})
    col = T.col("c")
    dc = da.from_array(data[:, :1], chunks=(chunks if chunks == -1 else (3, 1)))
    check(col.dimshuffle(0), {col: dc})
    check(col.dimshuffle(1, "x", 0), {col: dc})


@pytest.mark.parametrize("chunks", CHUNKINGS)
@pytest.mark.parametrize("shape", [(35,), (5, 7), (-1, 7), (7, 5, 1), (1, 35)])
def test_reshape(data: np.ndarray, chunks: Any, shape: tuple[int, ...]) -> None:
    x = T.matrix("x")
    check(x.reshape(shape), {x: da.from_array(data, chunks=chunks)})


def test_reshape_size_mismatch_is_clear(data: np.ndarray) -> None:
    x = T.matrix("x")
    with pytest.raises(ValueError, match="cannot reshape an array of shape"):
        lower(x.reshape((6, 6)), {x: da.from_array(data, chunks=3)})


@pytest.mark.parametrize("chunks", CHUNKINGS)
def test_shape_and_shape_i_are_client_values(data: np.ndarray, chunks: Any) -> None:
    x = T.matrix("x")
    dx = da.from_array(data, chunks=chunks)
    (shp,) = lower(x.shape, {x: dx})
    assert isinstance(shp, np.ndarray) and shp.dtype == "int64"
    np.testing.assert_array_equal(shp, [7, 5])
    (n,) = lower(T.shape_i(x, 1), {x: dx})
    assert isinstance(n, np.ndarray) and n.ndim == 0 and int(n) == 5


def test_unknown_chunk_sizes_name_the_input(data: np.ndarray) -> None:
    x = T.matrix("my_x")
    dx = da.from_array(data, chunks=3)
    masked = dx[dx[:, 0] > 10]
    assert np.isnan(masked.shape[0])
    for expr in (T.shape_i(x, 0), x.shape, x.reshape((-1,)), T.specify_shape(x, (4, 5))):
        with pytest.raises(LoweringError, match=r"my_x.*unknown chunk sizes.*compute_chunk_sizes"):
            lower(expr, {x: masked})
    # Axes whose sizes are known still work.
    (n,) = lower(T.shape_i(x, 1), {x: masked})
    assert int(n) == 5
    (t,) = lower(x.T, {x: masked})
    np.testing.assert_array_equal(t.compute(), data[data[:, 0] > 10].T)


def test_specify_shape_checks_on_the_client(data: np.ndarray) -> None:
    x = T.matrix("x")
    dx = da.from_array(data, chunks=3)
    check(T.specify_shape(x, (7, 5)), {x: dx})
    with pytest.raises(ValueError, match=r"has shape \(7, 5\).*specified as \(5, 7\)"):
        lower(T.specify_shape(x, (5, 7)), {x: dx})


def test_rebroadcast_and_deep_copy(data: np.ndarray) -> None:
    x = T.matrix("x")
    row = da.from_array(data[:1], chunks=(1, 2))
    check(Rebroadcast((0, True))(x), {x: row})
    with pytest.raises(ValueError, match="declared broadcastable but has length 7"):
        lower(Rebroadcast((0, True))(x), {x: da.from_array(data, chunks=3)})
    (same,) = lower(deep_copy_op(x), {x: row})
    assert same is row


@pytest.mark.parametrize("dtypes", [("float64", "float64"), ("float32", "float64")])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_join_mixes_dask_and_numpy(data: np.ndarray, dtypes: tuple[str, str], axis: int) -> None:
    a = T.matrix("a", dtype=dtypes[0])
    b = T.matrix("b", dtype=dtypes[1])
    da_ = da.from_array(data.astype(dtypes[0]), chunks=((3, 4), (2, 3)))
    other = data[:5, :5] if axis == 0 else data[:, :2]
    feed = {a: da_, b: other.astype(dtypes[1]) * 2}
    got = check(T.concatenate([a, b, a], axis=axis), feed)
    assert isinstance(got, da.Array)


def test_split(data: np.ndarray) -> None:
    x = T.matrix("x")
    dx = da.from_array(data, chunks=((1, 4, 2), (2, 3)))
    outs = Split(3)(x, 0, [2, 0, 5])
    got = lower(outs[0], {x: dx})
    want = reference(outs, {x: dx})
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.compute(), w)
    with pytest.raises(ValueError, match="sum to 6"):
        lower(Split(2)(x, 0, [2, 4])[0], {x: dx})


def test_alloc_broadcasts_a_dask_value_keeping_its_chunks(data: np.ndarray) -> None:
    v = T.row("v")
    n = T.lscalar("n")
    dv = da.from_array(data[:1], chunks=(1, (2, 3)))
    got = check(T.alloc(v, 4, n, 5), {v: dv, n: np.int64(3)})
    assert got.chunks[-1] == (2, 3)


def test_alloc_of_client_values_small_on_client_large_lazy() -> None:
    s = T.scalar("s")
    (small,) = lower(T.alloc(s, 3, 4), {s: np.float64(2.5)})
    assert isinstance(small, np.ndarray)
    np.testing.assert_array_equal(small, np.full((3, 4), 2.5))
    with dask.config.set({"array.chunk-size": "1KiB"}):
        (big,) = lower(T.alloc(s, 300, 40), {s: np.float64(2.5)})
        (empty,) = lower(AllocEmpty("float32")(T.as_tensor(50), T.as_tensor(60)), {})
    assert isinstance(big, da.Array) and big.npartitions > 1
    np.testing.assert_array_equal(big.compute(), np.full((300, 40), 2.5))
    assert isinstance(empty, da.Array) and empty.dtype == "float32"
    assert empty.shape == (50, 60) and not empty.compute().any()
    w = T.vector("w")
    with pytest.raises(ValueError, match="cannot fill shape"):
        lower(T.alloc(w, 3, 4), {w: da.ones(5, chunks=2)})


def test_make_vector_of_dask_scalars() -> None:
    a = T.lscalar("a")
    b = T.lscalar("b")
    got = check(T.stack([a, b]), {a: da.from_array(np.int64(3)), b: np.int64(4)})
    assert isinstance(got, da.Array)


def test_client_only_values_run_perform(data: np.ndarray) -> None:
    x = T.matrix("x")
    (t,) = lower(x.T, {x: data})
    assert isinstance(t, np.ndarray)
    n = T.lscalar("n")
    with pytest.raises(LoweringError, match="computed from chunked data"):
        lower(T.arange(n), {n: da.from_array(np.int64(4))})


def test_graph_through_the_dask_linker(client: Any, data: np.ndarray) -> None:
    x = T.matrix("x")
    y = T.concatenate([x.reshape((5, 7)).T, x[:, :3] * 2], axis=1)
    out = T.specify_shape(y.dimshuffle(1, "x", 0), (8, 1, 7))
    args = [data]
    want = opgraph.function([x], out, mode=Mode(linker="py", optimizer="fast_run"))(*args)
    f = opgraph.function([x], out, mode="DASK")
    got = f(da.from_array(data, chunks=((3, 4), (2, 3))))
    np.testing.assert_array_equal(dask.compute(got)[0], want)
