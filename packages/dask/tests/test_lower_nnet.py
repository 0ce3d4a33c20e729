"""Lowerings of softmax and the cross-entropy ops (opgraph_dask.lowerings.nnet) against the
Python linker."""

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
from opgraph.tensor.nnet.basic import LogSoftmax, Softmax, SoftmaxGrad, softmax_with_bias
from opgraph.tensor.nnet.crossentropy import (
    crossentropy_categorical_1hot,
    crossentropy_categorical_1hot_grad,
    crossentropy_softmax_1hot_with_bias_dx,
    crossentropy_softmax_argmax_1hot_with_bias,
)
from opgraph_dask.lowering import LoweringError, get_table

TOL = {"float32": 2e-6, "float64": 1e-13, "int32": 0, "int64": 0}


def lower(out: Variable, feed: dict[Variable, Any]) -> list[Any]:
    """The lowering of ``out``'s node applied to ``feed`` (constants read from the graph)."""
    node = out.owner
    values = [v.data if isinstance(v, Constant) else feed[v] for v in node.inputs]
    return get_table().lookup(node.op)(node, values)


def check(outs: list[Variable], feed: dict[Variable, Any]) -> list[Any]:
    """Lower the node of ``outs`` (all its outputs), compute, compare with the Python linker."""
    got = lower(outs[0], feed)
    f = opgraph.function(list(feed), outs, mode=Mode(linker="py", optimizer=None))
    want = f(*[v.compute() if isinstance(v, da.Array) else v for v in feed.values()])
    values = dask.compute(*got)
    for var, g, w in zip(outs, values, want, strict=True):
        k = outs[0].owner.outputs.index(var)
        assert isinstance(got[k], da.Array)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=TOL[str(w.dtype)], atol=TOL[str(w.dtype)])
    return got


def rand(*shape: int, dtype: str = "float64", seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed + sum(shape)).normal(size=shape) * 3).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("chunks", [-1, ((3, 1, 2), 2, (4, 1)), 1])
@pytest.mark.parametrize("op_class", [Softmax, LogSoftmax])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_along_any_axis(dtype: str, chunks: Any, op_class: type, axis: int) -> None:
    x = T.tensor3("x", dtype=dtype)
    X = da.from_array(rand(6, 4, 5, dtype=dtype), chunks=chunks)
    (out,) = check([op_class(axis)(x)], {x: X})
    assert len(out.chunks[axis]) == 1
    others = [a for a in range(3) if a != axis % 3]
    assert all(out.chunks[a] == X.chunks[a] for a in others)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_grad_and_bias(dtype: str) -> None:
    dy, sm = T.matrix("dy", dtype=dtype), T.matrix("sm", dtype=dtype)
    b = T.vector("b", dtype=dtype)
    SM = np.exp(rand(9, 4, dtype=dtype))
    feed = {dy: da.from_array(rand(9, 4, dtype=dtype), chunks=(2, 3)), sm: SM}
    check([SoftmaxGrad(-1)(dy, sm)], feed)
    check([SoftmaxGrad(0)(dy, sm)], feed)
    X = da.from_array(rand(9, 4, dtype=dtype, seed=1), chunks=((5, 4), (1, 3)))
    check([softmax_with_bias(dy, b)], {dy: X, b: rand(4, dtype=dtype)})
    with pytest.raises(ValueError, match="b has 3 elements"):
        lower(softmax_with_bias(dy, b), {dy: X, b: rand(3, dtype=dtype)})


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("chunks", [(-1, -1, -1), ((4, 5), (2, 7), 3), (((1, 8), 2), 9, 2)])
def test_crossentropy_softmax_argmax_with_bias(dtype: str, chunks: Any) -> None:
    x, b, y = T.matrix("x", dtype=dtype), T.vector("b", dtype=dtype), T.ivector("y")
    xc, yc, dyc = chunks
    Y = np.random.default_rng(1).integers(0, 4, 9).astype("int32")
    feed = {
        x: da.from_array(rand(9, 4, dtype=dtype), chunks=xc),
        b: rand(4, dtype=dtype),
        y: da.from_array(Y, chunks=yc),
    }
    outs = crossentropy_softmax_argmax_1hot_with_bias(x, b, y)
    nll, sm, am = check(outs, feed)
    assert nll.chunks[0] == sm.chunks[0] == am.chunks[0]
    # Its gradient op, with a per-row dy and with a 0-d dy.
    dy = T.vector("dy", dtype=dtype)
    d0 = T.scalar("d0", dtype=dtype)
    SM = sm.compute()
    s = T.matrix("s", dtype=dtype)
    check(
        [crossentropy_softmax_1hot_with_bias_dx(dy, s, y)],
        {dy: da.from_array(rand(9, dtype=dtype), chunks=dyc), s: SM, y: feed[y]},
    )
    check(
        [crossentropy_softmax_1hot_with_bias_dx(d0, s, y)],
        {d0: np.asarray(0.5, dtype=dtype), s: da.from_array(SM, chunks=(4, 2)), y: Y},
    )


def test_categorical_1hot_and_its_gradient() -> None:
    coding, y, g = T.matrix("coding"), T.ivector("y"), T.vector("g")
    P = np.random.default_rng(2).dirichlet(np.ones(5), size=11)
    Y = np.random.default_rng(3).integers(0, 5, 11).astype("int32")
    C = da.from_array(P, chunks=((3, 8), (2, 3)))
    check([crossentropy_categorical_1hot(coding, y)], {coding: C, y: Y})
    check(
        [crossentropy_categorical_1hot_grad(g, coding, y)],
        {g: da.from_array(rand(11), chunks=5), coding: C, y: da.from_array(Y, chunks=4)},
    )


def test_class_index_out_of_range_is_raised_by_the_block() -> None:
    coding, y = T.matrix("coding"), T.ivector("y")
    (out,) = lower(
        crossentropy_categorical_1hot(coding, y),
        {coding: da.ones((6, 3), chunks=2), y: np.array([0, 1, 2, 3, 0, 1], dtype="int32")},
    )
    with pytest.raises(ValueError, match="class index 3 is out of bounds for 3 classes"):
        out.compute()


def test_unknown_chunk_sizes() -> None:
    x = T.matrix("logits")
    X = da.from_array(rand(12, 4), chunks=(5, 2))
    masked = X[X[:, 0] > 0]
    with pytest.raises(LoweringError, match=r"logits.*unknown chunk sizes"):
        lower(Softmax(-1)(x), {x: masked})
    # Rows of unknown length are fine when the normalised axis is already whole.
    whole = X.rechunk((5, -1))[X.rechunk((5, -1))[:, 0] > 0]
    (out,) = lower(Softmax(-1)(x), {x: whole})
    kept = rand(12, 4)[rand(12, 4)[:, 0] > 0]
    e = np.exp(kept - kept.max(-1, keepdims=True))
    np.testing.assert_allclose(out.compute(), e / e.sum(-1, keepdims=True), rtol=1e-13)


def test_softmax_regression_through_the_dask_linker(client: Any) -> None:
    x, y = T.matrix("x"), T.ivector("y")
    w, b = T.matrix("w"), T.vector("b")
    p = T.nnet.softmax(T.dot(x, w) + b)
    cost = T.mean(T.nnet.categorical_crossentropy(p, y))
    logp = T.nnet.log_softmax(T.dot(x, w))
    outs = [cost, *opgraph.grad(cost, [w, b]), logp.sum(axis=1)]
    X = rand(120, 5)
    args = [X, np.argmax(X[:, :3], axis=1).astype("int32"), rand(5, 3, seed=4) * 0.1, rand(3)]
    ins = [x, y, w, b]
    want = opgraph.function(ins, outs, mode=Mode(linker="py", optimizer="fast_run"))(*args)
    f = opgraph.function(ins, outs, mode="DASK")
    ops = {type(n.op).__name__ for n in f.maker.fgraph.toposort()}
    assert "CrossentropySoftmaxArgmax1HotWithBias" in ops
    dX = da.from_array(X, chunks=((50, 40, 30), (2, 3)))
    got = dask.compute(*f(dX, da.from_array(args[1], chunks=45), *args[2:]))
    for g, v in zip(got, want, strict=True):
        np.testing.assert_allclose(g, v, rtol=1e-10)
