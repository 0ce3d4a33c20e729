"""Lowerings of the products (opgraph_dask.lowerings.blas) against the Python linker."""

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
from opgraph.tensor.blas import Dot22, Dot22Scalar, gemm_inplace, gemm_no_inplace, gemv_inplace, ger
from opgraph.tensor.dot import BatchedDot, MatMul
from opgraph_dask.lowering import LoweringError, get_table

TOL = {"float32": 2e-5, "float64": 1e-12}


def lower(out: Variable, feed: dict[Variable, Any]) -> list[Any]:
    """The lowering of ``out``'s node applied to ``feed``; other inputs are constants or
    lowered the same way."""
    node = out.owner
    values = [
        v.data if isinstance(v, Constant) else feed[v] if v in feed else lower(v, feed)[v.index]
        for v in node.inputs
    ]
    return get_table().lookup(node.op)(node, values)


def check(out: Variable, feed: dict[Variable, Any]) -> Any:
    """Lower ``out``'s node, compute it and compare with the Python linker."""
    (got,) = lower(out, feed)
    f = opgraph.function(
        list(feed), out, mode=Mode(linker="py", optimizer=None), accept_inplace=True
    )
    want = f(*[v.compute() if isinstance(v, da.Array) else v.copy() for v in feed.values()])
    value = got.compute() if isinstance(got, da.Array) else got
    assert value.dtype == want.dtype and value.shape == want.shape
    np.testing.assert_allclose(value, want, rtol=TOL[str(want.dtype)], atol=TOL[str(want.dtype)])
    return got


def rand(*shape: int, dtype: str = "float64", seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed + sum(shape)).normal(size=shape).astype(dtype)


# (x chunks, y chunks) for x of shape (9, 6) and y of shape (6, 4): one chunk; rows only;
# uneven chunks on every axis, the contracted one included, cut differently in x and y.
CHUNKINGS = [(-1, -1), ((4, -1), -1), (((2, 3, 4), (1, 5)), ((4, 2), (3, 1)))]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("chunks", CHUNKINGS)
def test_dot_matrix_matrix_and_vector(dtype: str, chunks: Any) -> None:
    xc, yc = chunks
    x, y = T.matrix("x", dtype=dtype), T.matrix("y", dtype=dtype)
    v, w = T.vector("v", dtype=dtype), T.vector("w", dtype=dtype)
    X = da.from_array(rand(9, 6, dtype=dtype), chunks=xc)
    Y = da.from_array(rand(6, 4, dtype=dtype), chunks=yc)
    check(T.dot(x, y), {x: X, y: Y})
    check(T.dot(x, v), {x: X, v: rand(6, dtype=dtype)})
    check(T.dot(w, x), {w: da.from_array(rand(9, dtype=dtype), chunks=4), x: X})
    check(T.dot(v, w), {v: rand(6, dtype=dtype), w: Y[:, 0]})
    check(Dot22()(x, y), {x: X, y: Y.compute()})


def test_dot_mixed_dtypes_and_misaligned_shapes() -> None:
    x, n = T.matrix("x"), T.lmatrix("n")
    X = da.from_array(rand(5, 3), chunks=2)
    check(T.dot(n, x), {n: np.arange(10).reshape(2, 5), x: X})
    with pytest.raises(ValueError, match=r"not aligned.*length 3.*length 5"):
        lower(T.dot(x, x), {x: X})


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("alpha, beta", [(0.5, -2.0), (1.0, 0.0), (0.0, 3.0)])
def test_gemm_epilogue(dtype: str, alpha: float, beta: float) -> None:
    z, x, y = (T.matrix(n, dtype=dtype) for n in "zxy")
    a, b = T.scalar("a", dtype=dtype), T.scalar("b", dtype=dtype)
    Z = rand(9, 4, dtype=dtype)
    if beta == 0:
        Z[0, 0] = np.nan  # beta == 0: Z is not read, as in BLAS
    feed = {
        z: da.from_array(Z, chunks=(5, 2)),
        a: np.asarray(alpha, dtype=dtype),
        x: da.from_array(rand(9, 6, dtype=dtype), chunks=((2, 3, 4), (1, 5))),
        y: rand(6, 4, dtype=dtype),
        b: np.asarray(beta, dtype=dtype),
    }
    got = check(gemm_no_inplace(z, a, x, y, b), feed)
    assert not np.isnan(got.compute()).any() or beta != 0
    # A 0-d dask alpha/beta (computed from chunked data) follows the same rules.
    feed[a] = da.from_array(np.asarray(alpha, dtype=dtype))
    feed[b] = da.from_array(np.asarray(beta, dtype=dtype))
    check(gemm_no_inplace(z, a, x, y, b), feed)


def test_inplace_ops_do_not_modify_inputs() -> None:
    z, x, y = T.matrix("z"), T.matrix("x"), T.matrix("y")
    Z = rand(4, 4)
    before = Z.copy()
    feed = {z: Z, x: rand(4, 3), y: rand(3, 4)}
    (client,) = lower(gemm_inplace(z, 2.0, x, y, 1.0), feed)
    np.testing.assert_array_equal(Z, before)
    feed[x] = da.from_array(feed[x], chunks=2)
    (lazy,) = lower(gemm_inplace(z, 2.0, x, y, 1.0), feed)
    np.testing.assert_allclose(lazy.compute(), client)
    np.testing.assert_array_equal(Z, before)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gemv_ger_dot22scalar(dtype: str) -> None:
    A, z = T.matrix("A", dtype=dtype), T.matrix("z", dtype=dtype)
    v, u, w = (T.vector(n, dtype=dtype) for n in "vuw")
    a = T.scalar("a", dtype=dtype)
    DA = da.from_array(rand(9, 6, dtype=dtype), chunks=((2, 3, 4), (4, 2)))
    V = rand(6, dtype=dtype)
    for alpha, beta in [(0.5, 1.5), (2.0, 0.0)]:
        feed = {w: rand(9, dtype=dtype), A: DA, v: V}
        check(gemv_inplace(w, np.asarray(alpha, dtype), A, v, np.asarray(beta, dtype)), feed)
    check(ger(A, a, u, v), {A: DA, a: np.asarray(-1.5, dtype), u: rand(9, dtype=dtype), v: V})
    check(ger(A, a, u, v), {A: DA, a: np.asarray(0, dtype), u: rand(9, dtype=dtype), v: V})
    check(Dot22Scalar()(A, z, a), {A: DA, z: rand(6, 3, dtype=dtype), a: np.asarray(3, dtype)})
    with pytest.raises(ValueError, match="input 0 has shape"):
        lower(gemv_inplace(w, 1.0, A, v, 1.0), {w: rand(8, dtype=dtype), A: DA, v: V})


@pytest.mark.parametrize(
    "shapes", [((5, 3, 4), (5, 4, 2)), ((5, 4), (5, 4, 2)), ((5, 3, 4), (5, 4))]
)
def test_batched_dot(shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    x = T.tensor("float64", [False] * len(shapes[0]), name="x")
    y = T.tensor("float64", [False] * len(shapes[1]), name="y")
    X = da.from_array(rand(*shapes[0]), chunks=2)
    check(BatchedDot()(x, y), {x: X, y: da.from_array(rand(*shapes[1], seed=1), chunks=3)})
    check(BatchedDot()(x, y), {x: X, y: rand(*shapes[1], seed=2)})


def test_matmul_with_broadcast_batch_axes() -> None:
    x = T.tensor3("x")
    y = T.tensor("float64", [True, False, False], name="y")
    X = da.from_array(rand(4, 3, 5), chunks=(2, 3, 2))
    check(MatMul()(x, y), {x: X, y: rand(1, 5, 2)})
    check(MatMul()(x, x.dimshuffle(0, 2, 1)), {x: X})


def test_unknown_chunks_on_the_contracted_axis() -> None:
    x, w = T.matrix("x_rows"), T.vector("w")
    X = da.from_array(rand(10, 3), chunks=4)
    with pytest.raises(LoweringError, match=r"x_rows.*unknown chunk sizes"):
        lower(T.dot(x, w), {x: X[X[:, 0] > 0], w: rand(3)})


def test_logistic_regression_cost_and_gradient(client: Any) -> None:
    x, y = T.matrix("x"), T.vector("y")
    w, b = T.vector("w"), T.scalar("b")
    p = T.nnet.sigmoid(T.dot(x, w) + b)
    cost = T.mean(-y * T.log(p) - (1 - y) * T.log(1 - p)) + 0.01 * (w**2).sum()
    gw, gb = opgraph.grad(cost, [w, b])
    X = rand(200, 6)
    Y = (X[:, 0] + 0.3 * X[:, 1] > 0).astype("float64")
    args = [X, Y, rand(6, seed=3) * 0.1, np.asarray(0.2)]
    ins, outs = [x, y, w, b], [cost, gw, gb]
    want = opgraph.function(ins, outs, mode=Mode(linker="py", optimizer="fast_run"))(*args)
    f = opgraph.function(ins, outs, mode="DASK")
    dX = da.from_array(X, chunks=((70, 80, 50), (4, 2)))
    got = dask.compute(*f(dX, da.from_array(Y, chunks=60), *args[2:]))
    for g, v in zip(got, want, strict=True):
        np.testing.assert_allclose(g, v, rtol=1e-10)
