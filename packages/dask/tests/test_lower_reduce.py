"""The reduction lowerings (CAReduce family, mean/var after rewrites, argmax, cumulative ops),
compared with opgraph's own results (``Mode(linker="py")``)."""

from __future__ import annotations

import zlib
from typing import Any

import dask.array as da
import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.tensor.elemwise import CAReduce, ProdWithoutZeros, Sum
from opgraph_dask.lowering import LoweringTable
from opgraph_dask.lowerings import elemwise, reduce
from opgraph_dask.lowerings.reduce import lower_careduce, lower_prod_without_zeros

PY = Mode(linker="py", optimizer="fast_run")
RTOL = {"float32": 1e-5, "float64": 1e-11}


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
        env.update(zip(node.outputs, outs, strict=True))
    return [env[o] for o in f.maker.fgraph.outputs]


def compare(expr: Any, x: Any, xv: np.ndarray, chunks: Any) -> Any:
    f = function([x], expr, mode="FAST_RUN")
    ref = function([x], expr, mode=PY)(xv)
    (got,) = lower_function(f, [da.from_array(xv, chunks)])
    assert isinstance(got, da.Array)
    res = got.compute()
    assert res.dtype == ref.dtype, (res.dtype, ref.dtype)
    assert res.shape == ref.shape
    if ref.dtype.kind == "f":
        np.testing.assert_allclose(res, ref, rtol=RTOL[str(ref.dtype)])
    else:
        np.testing.assert_array_equal(res, ref)
    return f


EXPRS = {
    "sum0": lambda x: T.sum(x, axis=0),
    "sum_all": lambda x: T.sum(x),
    "prod1": lambda x: T.prod(x, axis=1),
    "max1": lambda x: T.max(x, axis=1),
    "min_all": lambda x: T.min(x),
    "mean0": lambda x: T.mean(x, axis=0),
    "var_all": lambda x: T.var(x),
    "std1": lambda x: T.std(x, axis=1),
    "any1": lambda x: T.any(x > 3, axis=1),
    "all0": lambda x: T.all(x > 0, axis=0),
    "argmax0": lambda x: T.argmax(x, axis=0),
    "argmax_all": lambda x: T.argmax(x),
    "argmin1": lambda x: T.argmin(x, axis=1),
    "max_and_argmax": lambda x: T.max_and_argmax(x, axis=1)[0] + T.max_and_argmax(x, axis=1)[1],
    "cumsum1": lambda x: T.cumsum(x, axis=1),
    "cumsum_flat": lambda x: T.cumsum(x),
    "cumprod0": lambda x: T.cumprod(x, axis=0),
}
CHUNKINGS = {"one": (9, 6), "uneven": ((2, 3, 4), (5, 1)), "axis0": (4, 6), "axis1": (9, 4)}


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("chunking", list(CHUNKINGS))
@pytest.mark.parametrize("name", list(EXPRS))
def test_reduction_matches_py(name: str, dtype: str, chunking: str) -> None:
    x = T.matrix("x", dtype=dtype)
    rng = np.random.default_rng(zlib.crc32(f"{name} {dtype}".encode()))  # same every run
    if dtype.startswith("int"):
        xv = rng.integers(-4, 6, (9, 6)).astype(dtype)
    else:
        xv = (rng.random((9, 6)) * 2 + 0.5).astype(dtype)
    if name.startswith("cumprod") and dtype.startswith("int"):
        xv = np.clip(xv, -2, 2)
    compare(EXPRS[name](x), x, xv, CHUNKINGS[chunking])


def test_mean_and_var_after_rewrites_are_sum_and_elemwise() -> None:
    x = T.matrix("x")
    f = compare(T.var(x) + T.mean(x, axis=0).sum(), x, np.random.default_rng(0).random((8, 5)), 3)
    ops = {type(n.op).__name__ for n in f.maker.fgraph.toposort()}
    assert "Sum" in ops and "Elemwise" in ops


def test_argmax_over_several_axes_of_3d() -> None:
    x = T.tensor3("x")
    xv = np.random.default_rng(1).random((4, 5, 6))
    compare(T.argmax(x, axis=(0, 2)), x, xv, (2, 3, 4))
    compare(T.max(x, axis=(1, 2)), x, xv, (3, 2, 4))
    compare(T.sum(x, axis=(0, 2)), x, xv, (3, 2, 4))


def test_sum_dtype_and_accumulator() -> None:
    x8 = T.matrix("x", dtype="int8")
    xv = np.full((40, 30), 100, dtype="int8")  # overflows int8, not the int64 accumulator
    compare(T.sum(x8, axis=0), x8, xv, (7, 11))
    x = T.matrix("x", dtype="float32")
    xv32 = np.random.default_rng(2).random((40, 30)).astype("float32")
    compare(T.sum(x, dtype="float32"), x, xv32, 9)
    node = Sum(axis=None, dtype="float64", acc_dtype="float64").make_node(x)
    (got,) = lower_careduce(node, [da.from_array(xv32, 9)])
    assert got.dtype == np.dtype("float64")
    np.testing.assert_allclose(got.compute(), xv32.astype("float64").sum(), rtol=1e-12)


def test_generic_scalar_op_and_prod_without_zeros() -> None:
    from opgraph.scalar.basic import xor

    xb = T.matrix("xb", dtype="int64")
    xv = np.random.default_rng(3).integers(0, 50, (6, 8))
    node = CAReduce(xor, axis=(1,)).make_node(xb)
    (got,) = lower_careduce(node, [da.from_array(xv, (4, 3))])
    np.testing.assert_array_equal(got.compute(), np.bitwise_xor.reduce(xv, axis=1))
    x = T.matrix("x")
    zv = np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 0.0], [1.5, 2.0, 0.0]])
    node = ProdWithoutZeros(axis=(1,)).make_node(x)
    storage: list[list[Any]] = [[None]]
    node.op.perform(node, [zv], storage)
    (got,) = lower_prod_without_zeros(node, [da.from_array(zv, 2)])
    np.testing.assert_allclose(got.compute(), storage[0][0])


def test_empty_max_raises_sum_gives_zero() -> None:
    x = T.matrix("x")
    f = function([x], T.max(x, axis=0), mode="FAST_RUN")
    with pytest.raises(ValueError, match="empty"):
        lower_function(f, [da.zeros((0, 3), chunks=2)])
    g = function([x], T.sum(x, axis=0), mode="FAST_RUN")
    (got,) = lower_function(g, [da.zeros((0, 3), chunks=2)])
    np.testing.assert_array_equal(got.compute(), np.zeros(3))


def test_numpy_input_is_computed_here() -> None:
    x = T.matrix("x")
    f = function([x], T.sum(x, axis=1), mode="FAST_RUN")
    (got,) = lower_function(f, [np.ones((3, 4))])
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, np.full(3, 4.0))


def test_task_count_of_a_tree_reduction() -> None:
    x = T.matrix("x")
    f = function([x], T.sum(T.exp(x), axis=0), mode="FAST_RUN")
    X = da.from_array(np.ones((40, 4)), (5, 4))  # 8 blocks
    (got,) = lower_function(f, [X])
    layers = got.__dask_graph__().layers
    # 8 input blocks, 8 exp blocks, 8 partial sums, then the combine tree (4 ways: 2 + 1)
    assert len(got.__dask_graph__()) <= 8 + 8 + 8 + 3
    assert sum(len(v) for v in layers.values()) == len(got.__dask_graph__())
    np.testing.assert_allclose(got.compute(), np.full(4, 40 * np.e))


def test_on_distributed_cluster(client: Any) -> None:
    x = T.matrix("x")
    xv = np.random.default_rng(5).random((30, 8))
    f = function([x], T.var(x, axis=0) + T.max(x, axis=0), mode="FAST_RUN")
    (got,) = lower_function(f, [da.from_array(xv, (7, 3))])
    np.testing.assert_allclose(client.compute(got).result(), xv.var(axis=0) + xv.max(axis=0))
