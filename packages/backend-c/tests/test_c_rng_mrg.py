"""The precompiled ``mrg_uniform`` thunk (``opgraph_c._rng_mrg``) against ``perform``.

Node-level checks run the node's C thunk and the Op's ``perform`` on copies of the same
states and sizes and compare both outputs bit for bit (values, dtypes, shapes), the new
state's aliasing with the input (a copy, or the input itself when in place), and errors
(type and text). Function-level checks compile draws with the ``c`` linker, the ``py``
linker and ``DebugMode(linker="c")``.
"""

from __future__ import annotations

import ctypes
import time
import warnings
from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.debugmode import DebugMode
from opgraph.compile.mode import Mode
from opgraph.graph.basic import Apply, Variable
from opgraph.sandbox.multinomial import ChoiceFromUniform, MultinomialFromUniform
from opgraph.sandbox.rng_mrg import M1, M2, MRG_RandomStreams, mrg_uniform
from opgraph.tensor.type import TensorType
from opgraph_c import PERFORM, _rng_mrg
from opgraph_c.kernels.rng_mrg import mrg_uniform_c
from opgraph_c.registry import get_registry


def _node(dtype: str = "float64", ndim: int = 1, inplace: bool = False) -> Apply:
    op = mrg_uniform(TensorType(dtype, (False,) * ndim), inplace=inplace)
    return op.make_node(T.imatrix(), T.lvector())


def _states(n_streams: int, seed: int = 5) -> np.ndarray:
    return MRG_RandomStreams(seed).get_substream_rstates(n_streams, "float64")


def _twin(v: np.ndarray) -> np.ndarray:
    """A copy of ``v`` with the same shape, strides and class (its own buffer)."""
    if v.size == 0:
        return v.copy()
    lo, hi = np.lib.array_utils.byte_bounds(v)
    buf = np.frombuffer(bytearray(ctypes.string_at(lo, hi - lo)), dtype=np.uint8)
    out = np.ndarray(v.shape, v.dtype, buffer=buf, offset=v.ctypes.data - lo, strides=v.strides)
    return out.view(type(v)) if type(v) is not np.ndarray else out


def _thunk(node: Apply, values: list[Any]) -> tuple[Any, list[list[Any]], list[int]]:
    storage: dict[Variable, list[Any]] = {v: [x] for v, x in zip(node.inputs, values, strict=True)}
    for o in node.outputs:
        storage[o] = [None]
    calls = [0]
    perform = node.op.perform

    def counted(*args: Any) -> None:
        calls[0] += 1
        perform(*args)

    node.op.perform = counted  # the thunk takes the Op's perform when it is built
    try:
        thunk = get_registry().make_thunk(node, storage, None)
    finally:
        del node.op.perform
    assert isinstance(thunk, _rng_mrg.MRGUniformThunk), thunk
    return thunk, [storage[o] for o in node.outputs], calls


def _outcome(fn: Any) -> tuple[Any, Any]:
    try:
        return fn(), None
    except Exception as exc:  # compared between the two implementations
        return None, exc


def check_node(node: Apply, state: Any, size: Any, fast: bool | None = None) -> list[Any]:
    """The C thunk and ``perform`` on copies of ``(state, size)``: the same bits."""
    c_state, py_state = _twin(state), _twin(state)
    c_in = [c_state, size]
    thunk, cells, calls = _thunk(node, c_in)
    _, c_err = _outcome(thunk)
    if fast is not None:
        assert calls[0] == (0 if fast else 1), calls[0]
    py_cells: list[list[Any]] = [[None], [None]]
    _, py_err = _outcome(lambda: node.op.perform(node, [py_state, size], py_cells))
    if py_err is not None or c_err is not None:
        assert type(c_err) is type(py_err), (c_err, py_err)
        assert str(c_err) == str(py_err)
        return []
    outs = []
    for c, p in zip(cells, py_cells, strict=True):
        c, p = c[0], p[0]
        assert type(c) is type(p) and c.dtype == p.dtype and c.shape == p.shape
        assert c.tobytes() == p.tobytes()
        outs.append(c)
    # the new state: the input itself when in place, else a new array (as perform)
    assert (cells[0][0] is c_state) == (py_cells[0][0] is py_state)
    assert np.shares_memory(cells[0][0], c_state) == np.shares_memory(py_cells[0][0], py_state)
    return outs


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    ("n_streams", "shape"),
    [
        (1, (5,)),
        (7, (1001,)),
        (3, (2, 3)),
        (50, (7,)),
        (2000, (3000,)),
        (1500, (4, 1000)),
        (1030, (1030,)),
        (4, (0,)),
        (6, ()),
        (10, (3, 0, 2)),
    ],
)
def test_thunk_equals_perform(dtype: str, n_streams: int, shape: tuple[int, ...]) -> None:
    node = _node(dtype, len(shape))
    out = check_node(node, _states(n_streams), np.array(shape, dtype="int64"), fast=True)
    assert out[1].shape == shape and out[1].dtype == dtype


def test_thunk_equals_perform_on_any_int32_state() -> None:
    """States outside the generator's range wrap as Theano's int32 arithmetic (both)."""
    rng = np.random.default_rng(1)
    state = rng.integers(-(2**31), 2**31, size=(9, 6)).astype("int32")
    state[0] = [M1 - 1, M1 - 1, M1 - 1, M2 - 1, M2 - 1, M2 - 1]
    state[1] = [2**31 - 1, -1, -(2**31), 2**31 - 1, -(2**31), -1]
    for dtype in ("float32", "float64"):
        check_node(_node(dtype), state, np.array([2000], dtype="int64"), fast=True)


def test_state_layouts() -> None:
    node = _node("float64")
    state = _states(8)
    size = np.array([100], dtype="int64")
    check_node(node, np.asfortranarray(state), size, fast=True)
    big = np.zeros((16, 12), dtype="int32")
    big[::2, ::2] = state
    assert not big[::2, ::2].flags.c_contiguous
    check_node(node, big[::2, ::2], size, fast=True)
    # an in-place Op writes the state itself: a strided state goes to perform
    check_node(_node("float64", inplace=True), big[::2, ::2], size, fast=False)
    out = check_node(_node("float64", inplace=True), state.copy(), size, fast=True)
    assert out[0].flags.c_contiguous


def test_unusual_values_and_errors_take_perform() -> None:
    node = _node("float64")
    size = np.array([10], dtype="int64")
    check_node(node, _states(3).astype("int64"), size, fast=False)  # wrong dtype
    check_node(node, _states(3)[:, :5], size, fast=False)  # not 6 columns
    check_node(node, np.zeros((0, 6), dtype="int32"), size, fast=False)  # no stream
    check_node(node, _states(3), np.array([-1], dtype="int64"), fast=False)
    check_node(node, _states(3), np.array([1, 2], dtype="int64"), fast=False)
    check_node(node, _states(3), np.array([2**31], dtype="int64"), fast=False)
    check_node(node, _states(3), np.array([10], dtype="int32"), fast=False)
    check_node(node, _states(3).view(np.matrix), size, fast=False)
    inplace = _node("float64", inplace=True)
    check_node(inplace, np.asfortranarray(_states(3)), size, fast=False)


def test_float16_runs_perform_without_a_fallback_warning() -> None:
    node = _node("float16")
    assert mrg_uniform_c(node.op, node) is PERFORM
    srng = MRG_RandomStreams(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        v = opgraph.function([], srng.uniform((5,), dtype="float16"), mode=Mode(linker="c"))()
    assert v.dtype == np.float16 and (v > 0).all() and (v <= 1).all()


def test_multinomial_ops_run_perform_on_purpose() -> None:
    reasons = get_registry().perform_reasons()
    assert MultinomialFromUniform in reasons
    assert get_registry().lookup(ChoiceFromUniform).op_class is MultinomialFromUniform


@pytest.mark.parametrize(
    "mode", [Mode(linker="c"), Mode(linker="py"), DebugMode(linker="c")], ids=str
)
def test_functions(mode: Any) -> None:
    srng = MRG_RandomStreams(12345)
    draws = [
        srng.uniform((5,), dtype="float32"),
        srng.uniform((3, 4), dtype="float64", nstreams=2),
        srng.normal((9,), dtype="float64"),
    ]
    ref_srng = MRG_RandomStreams(12345)
    ref = [
        ref_srng.uniform((5,), dtype="float32"),
        ref_srng.uniform((3, 4), dtype="float64", nstreams=2),
        ref_srng.normal((9,), dtype="float64"),
    ]
    f = opgraph.function([], draws, mode=mode)
    g = opgraph.function([], ref, mode=Mode(linker="py"))
    for _ in range(2):
        for a, b in zip(f(), g(), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-15 if a.dtype == np.float64 else 0)
    if mode.linker == "c" and not isinstance(mode, DebugMode):
        thunks = [
            type(t).__name__
            for n, t in zip(f.maker.fgraph.toposort(), f.vm.thunks, strict=False)
            if isinstance(n.op, mrg_uniform)
        ]
        assert thunks and set(thunks) == {"MRGUniformThunk"}, thunks


def test_ten_million_uniforms_as_fast_as_numpy() -> None:
    """The C thunk fills 10M float64 uniforms at least about as fast as NumPy's Generator
    (the machine is shared: the bound has slack; the report has the measured numbers)."""
    srng = MRG_RandomStreams(1)
    f = opgraph.function([], srng.uniform((10**7,)), mode=Mode(linker="c"))
    rng = np.random.default_rng()

    def best(fn: Any) -> float:
        times = []
        for _ in range(5):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return min(times)

    assert best(f) < 2.0 * best(lambda: rng.random(10**7))
