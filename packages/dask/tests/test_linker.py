"""The ``dask`` linker: modes, inputs, outputs, compute, updates, errors, a cluster run."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest
from dask.callbacks import Callback

import opgraph
import opgraph.tensor as T
from opgraph.compile.mode import Mode, get_mode
from opgraph.configdefaults import config
from opgraph.graph.basic import Apply
from opgraph.graph.op import Op
from opgraph_dask.flags import parse_chunks
from opgraph_dask.linker import DaskLinker, DaskRunner, DaskThunk
from opgraph_dask.lowering import LoweringError, get_table, reset_table

RNG = np.random.default_rng(20240817)


def rand(*shape: int, dtype: str = "float64") -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def py_function(inputs: Any, outputs: Any, **kwargs: Any) -> Any:
    """The reference: the same graph on the Python linker."""
    return opgraph.function(inputs, outputs, mode=Mode(linker="py", optimizer="fast_run"), **kwargs)


class CountComputes(Callback):
    """Counts the local scheduler's computations (``start``) and tasks run (``pretask``)."""

    def __init__(self) -> None:
        super().__init__()
        self.computes = 0
        self.tasks = 0
        self._lock = threading.Lock()

    def _start(self, dsk: Any) -> None:
        self.computes += 1

    def _pretask(self, key: Any, dsk: Any, state: Any) -> None:
        with self._lock:
            self.tasks += 1


# ---------------------------------------------------------------------- tiny test Ops


class CumsumLastAxis(Op):
    """Not elementwise: each element depends on its row (no dask lowering here)."""

    __props__ = ()

    def make_node(self, x: Any) -> Apply:
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: Any) -> None:
        output_storage[0][0] = np.cumsum(inputs[0], axis=-1).astype(node.outputs[0].type.dtype)


class SquarePlusOne(Op):
    """Elementwise along every axis, marked so: its perform runs chunk by chunk."""

    __props__ = ()
    dask_elementwise = True

    def make_node(self, x: Any) -> Apply:
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: Any) -> None:
        output_storage[0][0] = (inputs[0] ** 2 + 1).astype(node.outputs[0].type.dtype)


@pytest.fixture
def fresh_table() -> Iterator[Any]:
    """The lowering table, rebuilt after the test (entries it registers are dropped)."""
    reset_table()
    yield get_table()
    reset_table()


# ---------------------------------------------------------------------- modes and flags


def test_dask_mode_and_linker_resolve() -> None:
    mode = get_mode("DASK")
    assert isinstance(mode.linker, DaskLinker)
    assert isinstance(Mode(linker="dask").linker, DaskLinker)
    x = T.matrix("x")
    f = opgraph.function([x], T.exp(x), mode="DASK")
    assert isinstance(f.maker.linker, DaskLinker)
    assert isinstance(f.fn, DaskRunner)
    assert len(f.fn.thunks) == len(f.maker.fgraph.toposort())
    assert all(isinstance(t, DaskThunk) for t in f.fn.thunks)


def test_flags_declared_and_chunk_specs_parse() -> None:
    assert config.dask__compute is False
    assert config.dask__chunks == "auto"
    assert config.dask__scheduler == "default"
    assert parse_chunks("auto") == "auto"
    assert parse_chunks("1000") == 1000
    assert parse_chunks("100000,-1") == (100000, -1)
    assert parse_chunks("(10, auto)") == (10, "auto")
    assert parse_chunks("64MiB") == "64MiB"
    for bad in ["", "0", "-2", "ten", "1,x"]:
        with pytest.raises(ValueError):
            parse_chunks(bad)
    with pytest.raises(ValueError, match="dask__chunks"):
        config.dask__chunks = "lots"
    with pytest.raises(ValueError):
        DaskLinker(scheduler="gpu")


# ---------------------------------------------------------------------- inputs and outputs


def test_numpy_and_dask_inputs_give_lazy_outputs_equal_to_py() -> None:
    x, y = T.matrix("x"), T.matrix("y")
    out = T.exp(x) * 2 + y
    f = opgraph.function([x, y], out, mode="DASK")
    ref = py_function([x, y], out)
    a, b = rand(6, 4), rand(6, 4)
    r_np = f(a, b)
    assert isinstance(r_np, da.Array)
    r_da = f(da.from_array(a, chunks=(3, 2)), da.from_array(b, chunks=(3, 2)))
    assert isinstance(r_da, da.Array)
    assert r_da.chunks == ((3, 3), (2, 2))  # elementwise keeps the inputs' chunks
    assert r_da.dtype == np.float64
    np.testing.assert_allclose(r_np.compute(), ref(a, b))
    np.testing.assert_allclose(r_da.compute(), ref(a, b))
    # inputs with different chunks are aligned, not refused
    r_mixed = f(da.from_array(a, chunks=(2, 4)), da.from_array(b, chunks=(3, 2)))
    np.testing.assert_allclose(r_mixed.compute(), ref(a, b))


def test_numpy_inputs_are_chunked_by_the_flag_and_linker_option() -> None:
    x = T.matrix("x")
    a = rand(10, 6)
    with config.change_flags(dask__chunks="4,-1"):
        f = opgraph.function([x], T.exp(x), mode="DASK")
        assert f(a).chunks == ((4, 4, 2), (6,))
    with config.change_flags(dask__chunks="5"):
        assert f(a).chunks == ((5, 5), (5, 1))  # read at each call
    g = opgraph.function([x], T.exp(x), mode=Mode(linker=DaskLinker(chunks=(3, 2))))
    r = g(a)
    assert r.chunks == ((3, 3, 3, 1), (2, 2, 2))
    np.testing.assert_allclose(r.compute(), np.exp(a))
    v = T.vector("v")  # a per-axis spec longer than the array is cut to its ndim
    with config.change_flags(dask__chunks="4,-1"):
        h = opgraph.function([v], T.exp(v), mode="DASK")
        assert h(np.arange(10.0)).chunks == ((4, 4, 2),)


def test_scalar_and_shared_values_stay_numpy() -> None:
    s = T.scalar("s")
    x = T.matrix("x")
    w = opgraph.shared(rand(4), name="w")
    f = opgraph.function([s, x], [s * 2, w * 3, x * s + w], mode="DASK")
    ref = py_function([s, x], [s * 2, w * 3, x * s + w])
    a = rand(5, 4)
    got = f(1.5, a)
    assert isinstance(got[0], np.ndarray) and got[0].ndim == 0
    assert isinstance(got[1], np.ndarray)  # from the shared weights only
    assert isinstance(got[2], da.Array)
    for g, r in zip(got, ref(1.5, a)):
        np.testing.assert_allclose(np.asarray(g), r)


def test_compute_flag_and_linker_option_return_numpy() -> None:
    x, y = T.matrix("x"), T.matrix("y")
    outs = [x + y, T.exp(x).sum()]
    a, b = rand(6, 4), rand(6, 4)
    expected = py_function([x, y], outs)(a, b)
    f = opgraph.function([x, y], outs, mode="DASK")
    with config.change_flags(dask__compute=True):
        got = f(a, b)
    assert all(isinstance(g, np.ndarray) for g in got)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e)
        assert g.dtype == e.dtype
    assert all(isinstance(g, da.Array) for g in f(a, b))  # flag off again: lazy
    g_fn = opgraph.function(
        [x, y], outs, mode=Mode(linker=DaskLinker(compute=True), optimizer="fast_run")
    )
    with CountComputes() as counter:
        got = g_fn(da.from_array(a, chunks=3), b)
    assert counter.computes == 1  # both outputs in one dask.compute
    for g, e in zip(got, expected):
        assert isinstance(g, np.ndarray)
        np.testing.assert_allclose(g, e)


def test_reduction_output_is_lazy_with_expected_chunks() -> None:
    x = T.matrix("x")
    f = opgraph.function([x], [x.sum(axis=0), x.max()], mode="DASK")
    a = rand(9, 4)
    col, top = f(da.from_array(a, chunks=(3, 2)))
    assert isinstance(col, da.Array) and col.chunks == ((2, 2),)
    assert isinstance(top, da.Array) and top.ndim == 0
    np.testing.assert_allclose(col.compute(), a.sum(axis=0))
    np.testing.assert_allclose(top.compute(), a.max())


# ---------------------------------------------------------------------- shared variables


def test_update_of_shared_variable_is_computed_and_stored() -> None:
    x = T.matrix("x")
    w0 = rand(4)
    w = opgraph.shared(w0.copy(), name="w")
    w_ref = opgraph.shared(w0.copy(), name="w_ref")
    loss = ((x * w).sum(axis=1) ** 2).mean()
    f = opgraph.function([x], loss, updates={w: w - 0.01 * (x * w).sum(axis=0)}, mode="DASK")
    ref_loss = ((x * w_ref).sum(axis=1) ** 2).mean()
    ref = py_function([x], ref_loss, updates={w_ref: w_ref - 0.01 * (x * w_ref).sum(axis=0)})
    a = rand(12, 4)
    with CountComputes() as counter:
        out = f(da.from_array(a, chunks=(4, 4)))
    assert counter.computes == 1
    assert isinstance(out, da.Array)  # the returned loss stays lazy
    new_w = w.get_value()
    assert isinstance(new_w, np.ndarray) and new_w.dtype == w0.dtype
    expected_loss = ref(a)
    np.testing.assert_allclose(new_w, w_ref.get_value())
    assert not np.allclose(new_w, w0)
    # the lazy loss was built from the weights before the update
    np.testing.assert_allclose(out.compute(), expected_loss)
    for _ in range(2):
        f(a)
        ref(a)
    np.testing.assert_allclose(w.get_value(), w_ref.get_value())


def test_failed_computation_changes_no_shared_variable() -> None:
    x = T.vector("x")
    w = opgraph.shared(np.zeros(3), name="w")

    def boom() -> np.ndarray:
        raise RuntimeError("worker lost the data")

    f = opgraph.function([x], [], updates={w: w + x.sum()}, mode="DASK")
    bad = da.from_delayed(dask.delayed(boom)(), shape=(3,), dtype="float64")
    with pytest.raises(RuntimeError, match="worker lost the data"):
        f(bad)
    np.testing.assert_array_equal(w.get_value(), np.zeros(3))
    f(np.ones(3))
    np.testing.assert_array_equal(w.get_value(), np.full(3, 3.0))


def test_givens_copy_and_pickle() -> None:
    x, y = T.matrix("x"), T.matrix("y")
    w = opgraph.shared(np.ones(3), name="w")
    f = opgraph.function(
        [x], (y * 2).sum(axis=0) + w, givens={y: T.exp(x)}, updates={w: w * 2}, mode="DASK"
    )
    a = rand(4, 3)
    r = f(a)
    np.testing.assert_allclose(r.compute(), (np.exp(a) * 2).sum(axis=0) + 1)
    np.testing.assert_allclose(w.get_value(), np.full(3, 2.0))
    g = f.copy(delete_updates=True)
    assert isinstance(g.maker.linker, DaskLinker)
    np.testing.assert_allclose(g(a).compute(), (np.exp(a) * 2).sum(axis=0) + 2)
    np.testing.assert_allclose(w.get_value(), np.full(3, 2.0))
    h = pickle.loads(pickle.dumps(f))
    assert isinstance(h.maker.linker, DaskLinker)
    r = h(a)
    assert isinstance(r, da.Array)
    np.testing.assert_allclose(r.compute(), (np.exp(a) * 2).sum(axis=0) + 2)


def test_profile_has_one_entry_per_node() -> None:
    x = T.matrix("x")
    f = opgraph.function([x], T.exp(x).sum(axis=1), mode="DASK", profile=True)
    f(rand(4, 3))
    nodes = f.maker.fgraph.toposort()
    assert all(f.profile.apply_callcount[n] == 1 for n in nodes)


# ---------------------------------------------------------------------- errors


def test_op_without_lowering_is_a_clear_error(fresh_table: Any) -> None:
    x = T.matrix("x")
    # reads the chunked argument directly: refused when the function is compiled
    with pytest.raises(LoweringError) as info:
        opgraph.function([x], CumsumLastAxis()(x), mode="DASK")
    msg = str(info.value)
    assert "CumsumLastAxis" in msg and "has no dask lowering" in msg
    assert "opgraph_dask_lowerings" in msg and "table.register(CumsumLastAxis" in msg
    # reads an intermediate dask array: refused while the graph is built, nothing computed
    f = opgraph.function([x], CumsumLastAxis()(T.exp(x)) + 1, mode="DASK")
    with CountComputes() as counter, pytest.raises(LoweringError, match="CumsumLastAxis"):
        f(da.from_array(rand(4, 6), chunks=2))
    assert counter.tasks == 0
    # on NumPy values only (a shared variable) it runs perform on the client
    w = opgraph.shared(rand(3, 4), name="w")
    g = opgraph.function([], CumsumLastAxis()(w), mode="DASK")
    np.testing.assert_allclose(g(), np.cumsum(w.get_value(), axis=-1))


def test_registered_lowering_and_elementwise_marker(fresh_table: Any) -> None:
    def lower_cumsum(node: Apply, inputs: Sequence[Any]) -> list[Any]:
        (v,) = inputs
        v = v if isinstance(v, da.Array) else da.asarray(v)
        return [da.cumsum(v, axis=-1)]

    fresh_table.register(CumsumLastAxis, lower_cumsum)
    x = T.matrix("x")
    a = rand(4, 6)
    f = opgraph.function([x], [CumsumLastAxis()(x), SquarePlusOne()(x)], mode="DASK")
    cs, sq = f(da.from_array(a, chunks=(2, 3)))
    assert {t.kind for t in f.fn.thunks} == {"lowering", "map_blocks"}
    assert sq.chunks == ((2, 2), (3, 3))
    np.testing.assert_allclose(cs.compute(), np.cumsum(a, axis=-1))
    np.testing.assert_allclose(sq.compute(), a**2 + 1)


def test_lowering_breaking_the_contract_is_reported(fresh_table: Any) -> None:
    def wrong_dtype(node: Apply, inputs: Sequence[Any]) -> list[Any]:
        return [da.cumsum(inputs[0], axis=-1).astype("float32")]

    fresh_table.register(CumsumLastAxis, wrong_dtype)
    x = T.matrix("x")
    f = opgraph.function([x], CumsumLastAxis()(x), mode="DASK")
    with pytest.raises(LoweringError, match=r"wrong_dtype.*dtype float32"):
        f(rand(3, 3))


def test_wrong_input_ndim_and_dtype() -> None:
    x = T.matrix("x")
    f = opgraph.function([x], T.exp(x), mode="DASK")
    with pytest.raises(TypeError, match="2 dimension"):
        f(da.ones(5, chunks=2))
    with pytest.raises(TypeError, match="cannot be cast"):
        f(da.ones((2, 2), dtype="complex128", chunks=1))
    # a safe cast (int32 -> float64) happens lazily
    r = f(da.ones((2, 2), dtype="int32", chunks=1))
    assert r.dtype == np.float64
    np.testing.assert_allclose(r.compute(), np.exp(np.ones((2, 2))))
    xf = T.matrix("xf", dtype="float32")
    g = opgraph.function([xf], xf * 2, mode="DASK")
    with pytest.raises(TypeError, match="HINT"):
        g(da.ones((2, 2), chunks=1))  # float64 -> float32 loses precision
    g2 = opgraph.function([xf], xf * 2, mode="DASK", allow_input_downcast=True)
    assert g2(da.ones((2, 2), chunks=1)).dtype == np.float32
    row = T.row("row")
    h = opgraph.function([row], row + 1, mode="DASK")
    with pytest.raises(TypeError, match="broadcastable"):
        h(da.ones((2, 3), chunks=1))
    unknown = da.from_array(np.arange(6.0), chunks=3)
    unknown = unknown[unknown > 2]
    v = T.vector("v")
    with pytest.raises(TypeError, match="unknown chunk sizes"):
        opgraph.function([v], v + 1, mode="DASK")(unknown)


def test_call_computes_nothing_on_the_client() -> None:
    x, y = T.matrix("x"), T.matrix("y")
    outs = [T.exp(x) + y, (x * y).sum(axis=0), x.sum()]
    f = opgraph.function([x, y], outs, mode="DASK")
    calls: list[int] = []

    def load() -> np.ndarray:
        calls.append(1)
        return np.ones((4, 3))

    lazy = da.from_delayed(dask.delayed(load)(), shape=(4, 3), dtype="float64")
    b = rand(4, 3)
    with CountComputes() as counter:
        got = f(lazy, b)
    assert calls == [] and counter.computes == 0 and counter.tasks == 0
    assert all(isinstance(g, da.Array) for g in got)
    expected = py_function([x, y], outs)(np.ones((4, 3)), b)
    for g, e in zip(dask.compute(*got), expected):
        np.testing.assert_allclose(g, e)
    assert calls == [1]  # one load for the three outputs


# ---------------------------------------------------------------------- distributed


def test_run_on_the_cluster_matches_py(client: Any) -> None:
    x, y = T.matrix("x"), T.matrix("y")
    v = T.vector("v")
    w = opgraph.shared(rand(5), name="w")
    outs = [T.exp(x) + y, (x * w).sum(axis=1), (T.tanh(x) * v).sum(), SquarePlusOne()(x)]
    a, b, c = rand(20, 5), rand(20, 5), rand(5)
    expected = py_function([x, y, v], outs)(a, b, c)
    f = opgraph.function([x, y, v], outs, mode="DASK")
    got = f(da.from_array(a, chunks=(5, 5)), b, c)
    computed = client.compute(got, sync=True)
    for g, e in zip(computed, expected):
        np.testing.assert_allclose(g, e, rtol=1e-12)
    upd = opgraph.function(
        [x], [], updates={w: w - 0.1 * (x * w).sum(axis=0)}, mode="DASK", name="sgd"
    )
    w_before = w.get_value()
    upd(da.from_array(a, chunks=(5, 5)))  # computed on the cluster (the current client)
    np.testing.assert_allclose(w.get_value(), w_before - 0.1 * (a * w_before).sum(axis=0))


def test_dot_matches_py_when_lowered() -> None:
    """Dot/Dot22 are lowered by the blas module (``lowerings/blas.py``)."""
    x, y = T.matrix("x"), T.matrix("y")
    f = opgraph.function([x, y], T.dot(x, y), mode="DASK")
    a, b = rand(8, 6), rand(6, 4)
    r = f(da.from_array(a, chunks=(4, 3)), da.from_array(b, chunks=(3, 4)))
    assert isinstance(r, da.Array)
    np.testing.assert_allclose(r.compute(), py_function([x, y], T.dot(x, y))(a, b))
