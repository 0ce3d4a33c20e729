"""The Elemwise lowering: fused Composites as one blockwise task per block, compared with
opgraph's own results (``Mode(linker="py")``)."""

from __future__ import annotations

import pickle
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.graph.basic import Constant
from opgraph.scalar.basic import Composite
from opgraph.scalar.basic import add as s_add
from opgraph.scalar.basic import mul as s_mul
from opgraph.scalar.type import get_scalar_type
from opgraph.tensor.elemwise import Elemwise
from opgraph_dask.lowering import LoweringTable
from opgraph_dask.lowerings import elemwise, reduce
from opgraph_dask.lowerings.elemwise import ChunkFunction, chunk_linker, lower_elemwise

PY = Mode(linker="py", optimizer="fast_run")
TOL = {"float32": 1e-5, "float64": 1e-12, "int32": 0, "int64": 0}


def _table() -> LoweringTable:
    table = LoweringTable()
    elemwise.register(table)
    reduce.register(table)
    return table


def lower_function(f: Any, values: list[Any]) -> list[Any]:
    """Run a compiled FAST_RUN function's graph node by node with these lowerings (other
    Ops, e.g. shape helpers, run ``perform`` on computed values: test scaffolding only)."""
    table = _table()
    env: dict[Any, Any] = dict(zip(f.maker.fgraph.inputs, values, strict=True))
    for node in f.maker.fgraph.toposort():
        ins = [env[i] if i in env else i.data for i in node.inputs]  # noqa: SIM401
        lower = table.lookup(node.op)
        if lower is not None:
            outs = lower(node, ins)
        else:
            ins = [i.compute() if isinstance(i, da.Array) else i for i in ins]
            storage: list[list[Any]] = [[None] for _ in node.outputs]
            node.op.perform(node, ins, storage)
            outs = [s[0] for s in storage]
        assert len(outs) == len(node.outputs)
        env.update(zip(node.outputs, outs, strict=True))
    return [env[o] for o in f.maker.fgraph.outputs]


def elemwise_nodes(f: Any) -> list[Any]:
    return [n for n in f.maker.fgraph.toposort() if isinstance(n.op, Elemwise)]


def with_constants(node: Any, values: list[Any]) -> list[Any]:
    """The values of every input of ``node``: ``values`` for its variables, in order, and
    each constant's own data (a fused node reads its constants as inputs, as in Theano)."""
    given = iter(values)
    return [v.data if isinstance(v, Constant) else next(given) for v in node.inputs]


def check(got: Any, ref: np.ndarray, dtype: str) -> None:
    if isinstance(got, da.Array):
        got = got.compute()
    assert got.dtype == ref.dtype
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=TOL.get(dtype, 1e-12), atol=TOL.get(dtype, 0))


CHUNKINGS = {
    "one": (10, 7),
    "uneven": ((3, 3, 4), (5, 2)),
    "axis0": ((4, 6), (7,)),
    "axis1": ((10,), (2, 2, 3)),
}


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("chunking", list(CHUNKINGS))
def test_fused_expression_matches_py(dtype: str, chunking: str) -> None:
    x, y = T.matrix("x", dtype=dtype), T.matrix("y", dtype=dtype)
    if dtype.startswith("int"):
        expr = (x * 3 + y) * (x - y) + 2
    else:
        expr = T.exp(x) * 2 + T.sqrt(y) * x - 1
    f = function([x, y], expr, mode="FAST_RUN")
    rng = np.random.default_rng(0)
    xv = (rng.random((10, 7)) * 10).astype(dtype)
    yv = (rng.random((10, 7)) * 10).astype(dtype)
    (got,) = lower_function(f, [da.from_array(xv, CHUNKINGS[chunking]), da.from_array(yv, 3)])
    assert isinstance(got, da.Array)
    check(got, function([x, y], expr, mode=PY)(xv, yv), dtype)


def test_task_count_is_chunks_times_nodes_plus_inputs() -> None:
    x, y = T.matrix("x"), T.matrix("y")
    f = function([x, y], T.exp(x) * 2 + T.tanh(y) * x - y, mode="FAST_RUN")
    (node,) = elemwise_nodes(f)  # fused into one Composite
    xv, yv = np.ones((12, 8)), np.full((12, 8), 2.0)
    X, Y = da.from_array(xv, (4, 4)), da.from_array(yv, (4, 4))
    (out,) = lower_elemwise(node, with_constants(node, [X, Y]))
    n_in = len(X.__dask_graph__()) + len(Y.__dask_graph__())
    assert len(out.__dask_graph__()) == out.npartitions * 1 + n_in
    assert len(out.__dask_graph__().layers[out.name]) == out.npartitions
    # a second (unfused) Elemwise node adds one task per block
    g = function([x], T.cos(x), mode="FAST_RUN")
    (node2,) = elemwise_nodes(g)
    (out2,) = lower_elemwise(node2, [out])
    assert len(out2.__dask_graph__()) == out.npartitions * 2 + n_in
    check(out2, np.cos(np.exp(xv) * 2 + np.tanh(yv) * xv - yv), "float64")


def test_broadcasting_rows_columns_scalars() -> None:
    x, r, c, s = T.matrix("x"), T.row("r"), T.col("c"), T.scalar("s")
    expr = x * r + c - s * T.exp(r)
    f = function([x, r, c, s], expr, mode="FAST_RUN")
    rng = np.random.default_rng(1)
    xv, rv, cv = rng.random((9, 6)), rng.random((1, 6)), rng.random((9, 1))
    sv = np.asarray(1.5)
    vals = [da.from_array(xv, (4, 3)), da.from_array(rv, (1, 2)), da.from_array(cv, (5, 1)), sv]
    (got,) = lower_function(f, vals)
    check(got, function([x, r, c, s], expr, mode=PY)(xv, rv, cv, sv), "float64")


def test_numpy_operands_mixed_with_dask() -> None:
    x, w, b = T.matrix("x"), T.matrix("w"), T.row("b")
    expr = T.tanh(x * w + b)
    f = function([x, w, b], expr, mode="FAST_RUN")
    rng = np.random.default_rng(2)
    xv, wv, bv = rng.random((10, 6)), rng.random((10, 6)), rng.random((1, 6))
    X = da.from_array(xv, ((3, 7), (2, 4)))
    (got,) = lower_function(f, [X, wv, bv])
    assert got.chunks == X.chunks  # the NumPy weights follow the dask input's blocks
    check(got, function([x, w, b], expr, mode=PY)(xv, wv, bv), "float64")


def test_mismatched_chunks_are_aligned() -> None:
    x, y = T.matrix("x"), T.matrix("y")
    f = function([x, y], x * y + 1, mode="FAST_RUN")
    xv, yv = np.arange(60.0).reshape(10, 6), np.arange(60.0).reshape(10, 6) / 7
    (got,) = lower_function(f, [da.from_array(xv, (3, 4)), da.from_array(yv, (4, 5))])
    check(got, xv * yv + 1, "float64")


def test_all_numpy_inputs_give_numpy() -> None:
    x = T.vector("x")
    f = function([x], T.exp(x) + 1, mode="FAST_RUN")
    (got,) = lower_function(f, [np.arange(4.0)])
    assert isinstance(got, np.ndarray)
    check(got, np.exp(np.arange(4.0)) + 1, "float64")


def test_output_dtype_and_input_cast() -> None:
    x = T.vector("x", dtype="float32")
    f = function([x], T.cast(x * 2, "int16"), mode="FAST_RUN")
    (node,) = elemwise_nodes(f)
    xv = np.array([1.2, 2.7, -3.1, 4.0], dtype="float64")  # cast to float32 in each block
    (got,) = lower_elemwise(node, with_constants(node, [da.from_array(xv, 2)]))
    assert got.dtype == np.dtype("int16")
    check(got, function([x], T.cast(x * 2, "int16"), mode=PY)(xv.astype("float32")), "int32")


def test_inplace_node_does_not_overwrite_blocks() -> None:
    x = T.vector("x")
    f = function([x], T.exp(T.sum(x)) + T.log(x + 3), mode="FAST_RUN")
    assert any(n.op.destroy_map for n in elemwise_nodes(f))  # FAST_RUN made one in place
    xv = np.arange(8.0)
    X = da.from_array(xv, 3)
    (got,) = lower_function(f, [X])
    check(got, np.exp(xv.sum()) + np.log(xv + 3), "float64")
    np.testing.assert_array_equal(X.compute(), np.arange(8.0))
    np.testing.assert_array_equal(xv, np.arange(8.0))


def test_multi_output_composite() -> None:
    a, b = get_scalar_type("float64")("a"), get_scalar_type("float64")("b")
    op = Elemwise(Composite([a, b], [s_add(a, b), s_mul(a, b)]))
    x, y = T.matrix("x"), T.matrix("y")
    node = op.make_node(x, y)
    xv, yv = np.arange(12.0).reshape(3, 4), np.ones((3, 4)) * 3
    s, p = lower_elemwise(node, [da.from_array(xv, 2), da.from_array(yv, 2)])
    check(s, xv + yv, "float64")
    check(p, xv * yv, "float64")


def test_broadcast_mismatch_raises_while_building() -> None:
    x, y = T.matrix("x"), T.matrix("y")
    f = function([x, y], x + y, mode="FAST_RUN")
    (node,) = elemwise_nodes(f)
    with pytest.raises(ValueError, match="cannot broadcast"):
        lower_elemwise(node, [da.ones((4, 3), chunks=2), da.ones((4, 1), chunks=2)])


def test_chunk_function_pickles_and_uses_a_local_linker() -> None:
    x = T.vector("x")
    f = function([x], T.exp(x) * 2, mode="FAST_RUN")
    (node,) = elemwise_nodes(f)
    fn = pickle.loads(pickle.dumps(ChunkFunction(node.op, [v.type for v in node.inputs])))
    np.testing.assert_allclose(
        fn(*with_constants(node, [np.arange(3.0)])), np.exp(np.arange(3.0)) * 2
    )
    assert not type(chunk_linker()).__module__.startswith("opgraph_dask")


def test_threaded_scheduler_many_blocks() -> None:
    x = T.matrix("x")
    f = function([x], T.sin(x) ** 2 + T.cos(x) ** 2, mode="FAST_RUN")
    xv = np.random.default_rng(3).random((64, 64))
    (got,) = lower_function(f, [da.from_array(xv, 8)])
    with dask.config.set(scheduler="threads", num_workers=4):
        check(got, function([x], T.sin(x) ** 2 + T.cos(x) ** 2, mode=PY)(xv), "float64")


def test_on_distributed_cluster(client: Any) -> None:
    x, r = T.matrix("x", dtype="float32"), T.row("r", dtype="float32")
    expr = T.exp(x) * r - x
    f = function([x, r], expr, mode="FAST_RUN")
    rng = np.random.default_rng(4)
    xv, rv = rng.random((20, 10), dtype="float32"), rng.random((1, 10), dtype="float32")
    (got,) = lower_function(f, [da.from_array(xv, (7, 4)), rv])
    check(client.compute(got).result(), function([x, r], expr, mode=PY)(xv, rv), "float32")
