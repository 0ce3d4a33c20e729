"""The pooling kernels (``opgraph_c._pooling``) against their Ops' ``perform``.

Node-level checks run one node's C thunk and ``perform`` on copies of the same values and
require the same bits (values, NaN, dtype, shape), a new output array, and the same error
(type and text) for values the kernels leave to ``perform``. Function-level checks compile
pooling, its gradient and grad-of-grad with the ``c`` linker, ``py`` and ``DebugMode``.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

import numpy as np
import pytest
from thunk_checks import layouts, node_storage, perform_outputs, twin

import opgraph
import opgraph.tensor as T
from opgraph.compile.debugmode import DebugMode
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.graph.basic import Apply
from opgraph.tensor.signal.pool import (
    AveragePoolGrad,
    DownsampleFactorMaxGradGrad,
    MaxPoolGrad,
    Pool,
    pool_2d,
    pool_3d,
)
from opgraph_c import _pooling
from opgraph_c.kernels.pooling import pooling_c
from opgraph_c.registry import get_registry

FLOATS = ["float32", "float64"]
MODES = ["max", "sum", "average_inc_pad", "average_exc_pad"]
POOL_OPS = (Pool, MaxPoolGrad, AveragePoolGrad, DownsampleFactorMaxGradGrad)


def _thunk(node: Apply, values: list[Any]) -> tuple[Any, list[Any]]:
    storage = node_storage(node, values)
    thunk = get_registry().make_thunk(node, storage, None)
    assert isinstance(thunk, _pooling.PoolingThunk), (node.op, thunk)
    return thunk, storage[node.outputs[0]]


def check_node(node: Apply, *values: Any, perform: bool = False) -> np.ndarray | None:
    """C thunk and perform on copies of ``values``: the same bits or the same error.
    ``perform``: the thunk must hand this call to perform."""
    c_values = list(values)
    py_values = [twin(v) for v in c_values]
    thunk, cell = _thunk(node, c_values)
    calls = thunk.perform_calls
    c_err = py_err = None
    try:
        thunk()
    except Exception as exc:  # compared with perform's
        c_err = exc
    try:
        (expected,) = perform_outputs(node, py_values)
    except Exception as exc:
        py_err = exc
    assert thunk.perform_calls == calls + int(perform), (node.op, thunk.perform_calls)
    if c_err is not None or py_err is not None:
        assert type(c_err) is type(py_err) and str(c_err) == str(py_err), (c_err, py_err)
        return None
    got = cell[0]
    assert type(got) is np.ndarray and got.dtype == expected.dtype, (got.dtype, expected.dtype)
    np.testing.assert_array_equal(got, expected, strict=True)
    assert not any(np.shares_memory(got, v) for v in c_values if isinstance(v, np.ndarray))
    for cv, pv in zip(c_values, py_values, strict=True):
        np.testing.assert_array_equal(cv, pv)
    return got


def _nodes(nd: int, dtype: str, ib: bool, mode: str, params: Any, ndim: int) -> list[Apply]:
    """Pool and its gradient nodes; ``params``: (ws, stride, pad) constants or None for
    symbolic int vectors (then the values are inputs)."""
    x, mo, g = (T.TensorType(dtype, (False,) * ndim)() for _ in range(3))
    p = params if params is not None else tuple(T.lvector() for _ in range(3))
    nodes = [Pool(ib, mode, nd)(x, *p).owner]
    if mode == "max":
        nodes.append(MaxPoolGrad(ib, nd)(x, mo, g, *p).owner)
        nodes.append(DownsampleFactorMaxGradGrad(ib, "max", nd)(x, mo, g, *p).owner)
    else:
        nodes.append(AveragePoolGrad(ib, mode, nd)(x, g, *p).owner)
    return nodes


def _values(rng: np.random.Generator, shape: tuple, dtype: str) -> np.ndarray:
    """Small integers (ties) and a NaN in one plane."""
    x = rng.integers(-3, 4, size=shape).astype(dtype)
    if x.size > 5:
        x.flat[5] = np.nan
    return x


def _run_all(nodes: list[Apply], xv: np.ndarray, rng: np.random.Generator, pv: tuple) -> None:
    """Each node on ``xv`` in every layout (``pv``: runtime ws/stride/pad values or ())."""
    pool = nodes[0]
    out = perform_outputs(pool, [xv, *pv])[0]
    for xl in layouts(xv):
        check_node(pool, xl, *pv)
        g = rng.standard_normal(out.shape).astype(xv.dtype)
        for node in nodes[1:]:
            if isinstance(node.op, MaxPoolGrad):
                for gl in layouts(g):
                    check_node(node, xl, out, gl, *pv)
            elif isinstance(node.op, AveragePoolGrad):
                for gl in layouts(g):
                    check_node(node, xl, gl, *pv)
            else:
                ggx = rng.standard_normal(xv.shape).astype(xv.dtype)
                check_node(node, xl, out, ggx, *pv)


CONFIGS_2D = [
    ((2, 2), False, (2, 2), (0, 0)),
    ((3, 2), False, (1, 3), (0, 0)),
    ((3, 3), True, (2, 1), (1, 2)),
    ((2, 2), True, (1, 1), (1, 0)),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode", MODES)
def test_node_2d_every_mode(dtype: str, mode: str, rng: np.random.Generator) -> None:
    for (ws, ib, st, pad), shape in itertools.product(CONFIGS_2D, [(2, 3, 5, 6), (7, 4)]):
        nodes = _nodes(2, dtype, ib, mode, (ws, st, pad), len(shape))
        _run_all(nodes, _values(rng, shape, dtype), rng, ())


@pytest.mark.parametrize("mode", MODES)
def test_node_3d_and_runtime_params(mode: str, rng: np.random.Generator) -> None:
    configs = [((2, 2, 2), False, (2, 2, 2), (0, 0, 0)), ((3, 2, 2), True, (2, 1, 2), (1, 1, 0))]
    for (ws, ib, st, pad), dtype in itertools.product(configs, FLOATS):
        xv = _values(rng, (2, 4, 5, 3), dtype)
        _run_all(_nodes(3, dtype, ib, mode, (ws, st, pad), 4), xv, rng, ())
        pv = tuple(np.array(v, dtype="int64") for v in (ws, st, pad))
        _run_all(_nodes(3, dtype, ib, mode, None, 4), xv, rng, pv)
    pv2 = tuple(np.array(v, dtype="int32") for v in ((2, 3), (1, 2), (1, 0)))
    nodes = _nodes(2, "float64", True, mode, None, 3)
    _run_all(nodes, _values(rng, (3, 5, 7), "float64"), rng, pv2)


def test_leading_dims_empty_and_big_inputs(rng: np.random.Generator) -> None:
    for shape in [(0, 3, 4, 4), (2, 0, 4, 4), (1, 1, 2, 3, 4, 4), (4, 4)]:
        nodes = _nodes(2, "float32", True, "max", ((2, 2), (2, 2), (0, 0)), len(shape))
        _run_all(nodes, rng.standard_normal(shape).astype("float32"), rng, ())
    # threads: a team of 2 from the first element, results identical to perform's
    xv = rng.standard_normal((3, 5, 17, 16)).astype("float32")
    for mode in MODES:
        nodes = _nodes(2, "float32", False, mode, ((3, 2), (2, 2), (0, 0)), 4)
        out = perform_outputs(nodes[0], [xv])[0]
        g = rng.standard_normal(out.shape).astype("float32")
        for node in nodes:
            args = {Pool: [xv], MaxPoolGrad: [xv, out, g], AveragePoolGrad: [xv, g]}.get(
                type(node.op), [xv, out, xv]
            )
            storage = node_storage(node, args)
            th = _pooling.PoolingThunk(
                node,
                [storage[v] for v in node.inputs],
                [storage[node.outputs[0]]],
                _pooling.KINDS[type(node.op).__name__],
                nthreads=2,
                adaptive=False,
                threshold=0,
            )
            th()
            (want,) = perform_outputs(node, copy.deepcopy(args))
            np.testing.assert_array_equal(storage[node.outputs[0]][0], want, strict=True)
            assert th.perform_calls == 0


def test_values_left_to_perform(rng: np.random.Generator) -> None:
    xv = rng.standard_normal((1, 1, 3, 3))
    pool, mpg, _ = _nodes(2, "float64", True, "max", None, 4)
    ok = [np.array([2, 2]), np.array([1, 1]), np.array([0, 0])]
    for bad in (
        [np.array([2, 2, 2]), ok[1], ok[2]],  # ws of 3 elements
        [np.array([5, 5]), ok[1], ok[2]],  # no window fits
        [np.array([2, 2]), ok[1], np.array([2, 0])],  # pad >= ws
        [np.array([0, 2]), ok[1], ok[2]],  # ws < 1
        [np.array([2.0, 2.0]), ok[1], ok[2]],  # float ws
    ):
        check_node(pool, xv, *bad, perform=True)
    pool_nb = _nodes(2, "float64", False, "max", None, 4)[0]
    check_node(pool_nb, xv, ok[0], ok[1], np.array([1, 1]), perform=True)  # pad, no ib
    check_node(pool_nb, np.zeros((1, 1, 0, 3)), *ok, perform=True)  # an empty pooled axis
    out = perform_outputs(pool, [xv, *ok])[0]
    check_node(mpg, xv, out, np.zeros((1, 1, 3, 3)), *ok, perform=True)  # gz's shape
    check_node(mpg, xv, out[..., :1], out[..., :1], *ok, perform=True)  # maxout's shape
    check_node(pool, xv.astype(">f8"), *ok, perform=True)  # byte-swapped
    check_node(pool, xv, *ok)


def test_entries_and_other_dtypes() -> None:
    reg = get_registry()
    x16, x64 = T.TensorType("float16", (False,) * 4)(), T.dtensor4()
    assert not reg.missing(POOL_OPS)
    node = Pool(True)(x16, (2, 2)).owner
    assert pooling_c(node.op, node) is None  # float16: perform (with the fallback warning)
    mixed = MaxPoolGrad(True)(x64, T.ftensor4(), x64, (2, 2)).owner
    assert pooling_c(mixed.op, mixed) is None


def check_function(inputs: list, outputs: list, *values: Any) -> None:
    """c linker (every pooling node a C thunk), py linker and DebugMode(c): same values."""
    c_fn = function(inputs, outputs, mode=Mode(linker="c", optimizer="fast_run"))
    py_fn = function(inputs, outputs, mode=Mode(linker="py", optimizer="fast_run"))
    debug_fn = function(inputs, outputs, mode=DebugMode(linker="c", optimizer="fast_run"))
    pooled = [t for n, t in zip(c_fn.fn.nodes, c_fn.fn.thunks, strict=True)
              if isinstance(n.op, POOL_OPS)]  # fmt: skip
    assert pooled and all(isinstance(t, _pooling.PoolingThunk) for t in pooled)
    expected = py_fn(*copy.deepcopy(values))
    for got in (c_fn(*copy.deepcopy(values)), debug_fn(*copy.deepcopy(values))):
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", FLOATS)
def test_functions_grad_and_grad_of_grad(dtype: str, rng: np.random.Generator) -> None:
    x, w = T.TensorType(dtype, (False,) * 4)("x"), T.TensorType(dtype, (False,) * 4)("w")
    xv = rng.standard_normal((2, 3, 7, 6)).astype(dtype)
    y = pool_2d(x, (3, 2), True, (2, 2), (1, 1))
    outs = [y, *[pool_2d(x, (2, 2), False, mode=m) for m in MODES[1:]]]
    cost = sum((o * o).sum() for o in outs)
    g = opgraph.grad(cost, x)
    wv = rng.standard_normal(perform_outputs(y.owner, [xv])[0].shape).astype(dtype)
    g2 = opgraph.grad((y * w).sum(), x)
    gg = opgraph.grad((g2 * x).sum(), w)
    x5 = T.TensorType(dtype, (False,) * 5)("x5")
    y3 = pool_3d(x5, (2, 2, 2), True, mode="average_exc_pad")
    g3 = opgraph.grad((y3 * y3).sum(), x5)
    x5v = rng.standard_normal((1, 2, 4, 5, 4)).astype(dtype)
    check_function([x, w, x5], [*outs, g, gg, y3, g3], xv, wv, x5v)
