"""Batch-normalization thunks (``opgraph_c._bn``) against ``perform``.

Node-level checks run one node's C thunk and its Op's ``perform`` on the same values: same
shapes and dtypes, values within the dtype's rounding (the C statistics are summed in double
precision), the same errors for values the kernels leave to ``perform``. Function-level
checks compile training and inference graphs with the ``c`` linker, the ``py`` linker and
``DebugMode(linker="c")``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from thunk_checks import layouts, node_storage, perform_outputs, twin

import opgraph
import opgraph.tensor as T
from opgraph.compile.debugmode import DebugMode
from opgraph.compile.mode import Mode
from opgraph.graph.basic import Apply
from opgraph.tensor.nnet.bn import (
    AbstractBatchNormInference,
    AbstractBatchNormTrain,
    AbstractBatchNormTrainGrad,
    batch_normalization_test,
    batch_normalization_train,
)
from opgraph_c import _bn
from opgraph_c.kernels.bn import bn_c, kept_block
from opgraph_c.registry import get_registry

FLOATS = ["float32", "float64"]
TOL = {"float32": 2e-5, "float64": 1e-12}

#: (input shape, axes): every non-normalized block the kernels take
CASES = [
    ((4, 3, 5, 6), (0, 2, 3)),  # spatial NCHW
    ((7, 5), (0,)),  # per-activation (N, F): the column kernels
    ((4, 3, 2, 2), (0,)),  # per-activation on NCHW: 12 channels
    ((3, 4, 5), (0, 1)),  # channels last
    ((6, 4), (0, 1)),  # every axis: one channel
]


def _node(op_class: type, shape: Sequence[int], axes: tuple[int, ...], dtype: str) -> Apply:
    nd = len(shape)
    x = T.TensorType(dtype, (False,) * nd)("x")
    p = [T.TensorType(dtype, tuple(a in axes for a in range(nd)))(n) for n in "sbmv"]
    if op_class is AbstractBatchNormTrain:
        outs = AbstractBatchNormTrain(axes)(x, p[0], p[1], 1e-4, 0.25, p[2], p[3])
    elif op_class is AbstractBatchNormInference:
        outs = [AbstractBatchNormInference(axes)(x, *p, 1e-3)]
    else:
        outs = AbstractBatchNormTrainGrad(axes)(x, x.type("dy"), *p[:3], 1e-4)
    return outs[0].owner


def _values(node: Apply, shape: Sequence[int], axes: tuple[int, ...], seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    dtype = node.outputs[0].type.dtype
    pshape = tuple(1 if a in axes else n for a, n in enumerate(shape))
    x = (rng.standard_normal(shape) * 3 + 2).astype(dtype)
    params = [rng.standard_normal(pshape).astype(dtype) for _ in range(4)]
    params[-1] = np.abs(params[-1]) + 0.5  # a variance, or an inverse std
    if isinstance(node.op, AbstractBatchNormTrainGrad):
        return [x, rng.standard_normal(shape).astype(dtype), *params[:3]]
    return [x, *params]


def _run(node: Apply, values: Sequence[Any], *, fast: bool = True, **team: Any) -> Any:
    """Run the node's C thunk and perform on twins of ``values``; compare. Returns the C
    outputs (None when both raised)."""
    py_values = [twin(v) for v in values]
    storage = node_storage(node, list(values))
    if team:
        first, stop = kept_block(node.op.axes, node.inputs[0].type.ndim)
        factory = getattr(_bn, type(node.op).__name__.replace("Abstract", "") + "Thunk")
        thunk = factory(
            node,
            [storage[v] for v in node.inputs],
            [storage[o] for o in node.outputs],
            first,
            stop,
            **team,
        )
    else:
        thunk = get_registry().make_thunk(node, storage, None)
    assert isinstance(thunk, _bn.BNThunk), thunk
    c_err = py_err = None
    try:
        thunk()
    except Exception as exc:  # compared with perform's
        c_err = exc
    try:
        expected = perform_outputs(node, py_values)
    except Exception as exc:
        py_err = exc
    if c_err is not None or py_err is not None:
        assert type(c_err) is type(py_err) and str(c_err) == str(py_err), (c_err, py_err)
        return None
    got = [storage[o][0] for o in node.outputs]
    dtype = node.outputs[0].type.dtype
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=TOL[dtype], atol=TOL[dtype], equal_nan=True)
    assert thunk.perform_calls == (0 if fast else 1)
    return got


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(("shape", "axes"), CASES)
@pytest.mark.parametrize(
    "op_class", [AbstractBatchNormTrain, AbstractBatchNormInference, AbstractBatchNormTrainGrad]
)
def test_node_matches_perform(op_class: type, shape: tuple, axes: tuple, dtype: str) -> None:
    node = _node(op_class, shape, axes, dtype)
    values = _values(node, shape, axes)
    for layout in layouts(values[0]):  # C, Fortran and strided inputs
        _run(node, [layout, *values[1:]])
    _run(node, [values[0], *(np.asfortranarray(p) for p in values[1:])])


@pytest.mark.parametrize("dtype", FLOATS)
def test_values_perform_judges(dtype: str) -> None:
    shape, axes = (4, 3, 5, 6), (0, 2, 3)
    for op_class in (AbstractBatchNormTrain, AbstractBatchNormInference):
        node = _node(op_class, shape, axes, dtype)
        values = _values(node, shape, axes)
        # a parameter of the wrong length: perform's ValueError, word for word
        _run(node, [values[0], values[1][:, :2], *values[2:]], fast=False)
        # an empty batch (NaN statistics, as NumPy's)
        _run(node, [values[0][:0], *values[1:]], fast=False)
        # another dtype than the node's
        other = "float64" if dtype == "float32" else "float32"
        _run(node, [values[0].astype(other), *values[1:]], fast=False)
    node = _node(AbstractBatchNormTrainGrad, shape, axes, dtype)
    values = _values(node, shape, axes)
    _run(node, [values[0], values[1][:, :, :4], *values[2:]], fast=False)  # dy's shape
    _run(node, [*values[:3], values[3][:, :1], values[4]], fast=False)


def test_one_element_per_channel_gives_nan_running_var() -> None:
    node = _node(AbstractBatchNormTrain, (1, 3), (0,), "float64")
    out = _run(node, _values(node, (1, 3), (0,)))
    assert np.isnan(out[4]).all() and np.isfinite(out[3]).all()


@pytest.mark.parametrize("dtype", FLOATS)
def test_threads_give_the_same_result(dtype: str) -> None:
    for shape, axes in [((4, 16, 12, 12), (0, 2, 3)), ((64, 40), (0,))]:
        for op_class in (AbstractBatchNormTrain, AbstractBatchNormTrainGrad):
            node = _node(op_class, shape, axes, dtype)
            values = _values(node, shape, axes, seed=3)
            one = _run(node, values, nthreads=1, threshold=0)
            two = _run(node, values, nthreads=2, threshold=0)
            for a, b in zip(one, two, strict=True):
                np.testing.assert_array_equal(a, b)


def test_other_axes_and_dtypes_run_perform() -> None:
    node = _node(AbstractBatchNormTrain, (3, 4, 5), (1,), "float64")  # kept axes 0 and 2
    assert kept_block((1,), 3) is None
    assert bn_c(node.op, node) is None
    node16 = _node(AbstractBatchNormInference, (3, 4), (0,), "float16")
    assert bn_c(node16.op, node16) is None


@pytest.mark.parametrize("dtype", FLOATS)
def test_functions_in_every_linker(dtype: str) -> None:
    rng = np.random.default_rng(1)
    x = T.tensor4("x", dtype=dtype)
    g, b, rm, rv = (T.vector(n, dtype=dtype) for n in ("g", "b", "rm", "rv"))
    train = batch_normalization_train(x, g, b, "spatial", 1e-4, 0.1, rm, rv)
    w = rng.standard_normal((3, 4, 2, 5)).astype(dtype)
    grads = opgraph.grad((train[0] * w).sum() + train[1].sum(), [x, g, b])
    test = batch_normalization_test(x, g, b, rm, rv, "spatial")
    outs = [*train, *grads, test]
    vals = [rng.standard_normal((3, 4, 2, 5)).astype(dtype)]
    vals += [rng.standard_normal(4).astype(dtype) for _ in range(3)]
    vals.append((rng.random(4) + 0.5).astype(dtype))
    results = []
    for mode in (Mode(linker="c"), Mode(linker="py"), DebugMode(linker="c")):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no fallback warning: the C thunks run
            f = opgraph.function([x, g, b, rm, rv], outs, mode=mode)
        results.append(f(*vals))
    for got in results[1:]:
        for a, e in zip(results[0], got, strict=True):
            np.testing.assert_allclose(a, e, rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)
