"""``GpuMRG_uniform`` against core's ``mrg_uniform``: the same bits.

Node level: the GPU op's run and ``mrg_uniform.perform`` on copies of the same states and
sizes give the same samples and new states (float32 and float64, every shape backend-c's
thunk is checked on, int32 states outside the generator's range, strided states), the new
state aliases the input exactly when in place, and bad values raise the CPU op's errors.
Function level: the draws of core's golden test (``packages/core/tests/sandbox``: Theano
1.0.5's numbers for three seeds) compiled under the GPU lift equal the CPU's, call after
call, with the streams' states advancing identically; the compiled graph draws on the
device and feeds the sample to GPU ops directly; a state already on the GPU stays there.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph import config
from opgraph.compile.io import In
from opgraph.compile.mode import get_mode
from opgraph.sandbox.rng_mrg import M1, M2, MRG_RandomStreams, mrg_uniform
from opgraph.tensor.type import TensorType
from opgraph_cuda import api as gpuarray_api
from opgraph_cuda.array import GpuArray
from opgraph_cuda.kernels.rng_mrg import mrg_source
from opgraph_cuda.ops import GpuFromHost, GpuOp, HostFromGpu
from opgraph_cuda.rng_mrg import GPUA_mrg_uniform, GpuMRG_uniform
from opgraph_cuda.type import GpuArraySharedVariable, GpuArrayType, gpuarray_shared_constructor

GOLDEN = Path(__file__).resolve().parents[2] / "core" / "tests" / "sandbox" / "golden"


def _states(n_streams: int, seed: int = 5) -> np.ndarray:
    return MRG_RandomStreams(seed).get_substream_rstates(n_streams, "float64")


def _nodes(dtype: str, ndim: int, inplace: bool) -> tuple[Any, Any]:
    """The CPU node and the GPU node of one draw (symbolic inputs)."""
    out_type = TensorType(dtype, (False,) * ndim)
    cpu = mrg_uniform(out_type, inplace=inplace).make_node(T.imatrix(), T.lvector())
    gpu = GpuMRG_uniform(out_type, inplace=inplace).make_node(
        GpuArrayType("int32", (False, False))(), T.lvector()
    )
    return cpu, gpu


def _outcome(fn: Any) -> tuple[Any, BaseException | None]:
    try:
        return fn(), None
    except Exception as exc:  # compared between the two implementations
        return None, exc


def _message(exc: BaseException) -> str:
    """The error's text with the op's name left out (``mrg_uniform{...}`` / ``GpuMRG_...``)."""
    return re.sub(r"^(Gpu)?(MRG_|mrg_)uniform\{[^}]*\}", "<op>", str(exc))


def check_node(
    dtype: str, state: np.ndarray, size: Any, inplace: bool = False, gpu_state: Any = None
) -> list[np.ndarray]:
    """The GPU op and ``perform`` on copies of ``(state, size)``: the same bits (or the same
    error); the new state is the input itself exactly when in place."""
    size = np.asarray(size, dtype="int64")
    cpu, gpu = _nodes(dtype, size.size if size.ndim == 1 else 1, inplace)
    g_state = GpuArray.from_host(state) if gpu_state is None else gpu_state
    before = g_state.get()
    g_out, g_err = _outcome(lambda: gpu.op.prepare_gpu(gpu)([g_state, size]))
    cells: list[list[Any]] = [[None], [None]]
    c_state = state.copy()
    _, c_err = _outcome(lambda: cpu.op.perform(cpu, [c_state, size], cells))
    if g_err is not None or c_err is not None:
        assert type(g_err) is type(c_err), (g_err, c_err)
        assert _message(g_err) == _message(c_err)
        return []
    new_state, sample = g_out
    assert isinstance(new_state, GpuArray) and isinstance(sample, GpuArray)
    assert (new_state is g_state) == inplace
    if not inplace:
        np.testing.assert_array_equal(g_state.get(), before)  # the input is left alone
    outs = []
    for got, want in zip((new_state.get(), sample.get()), (cells[0][0], cells[1][0]), strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()
        outs.append(got)
    return outs


# ---- the op ---------------------------------------------------------------------------------


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
def test_samples_and_states_equal_the_cpu_op(dtype, n_streams, shape):
    out = check_node(dtype, _states(n_streams), shape)
    assert out[1].shape == shape and out[1].dtype == dtype


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_in_place_advances_the_state_itself(dtype):
    new_state, sample = check_node(dtype, _states(9), (100,), inplace=True)
    assert (sample > 0).all() and (sample < 1).all()
    # a strided view of a bigger array: advanced where it lies
    view_host = _states(9)
    big_host = np.zeros((18, 12), "int32")
    big_host[::2, ::2] = view_host
    big = GpuArray.from_host(big_host)
    view = big[::2, ::2]
    assert not view.is_c_contiguous
    check_node(dtype, view_host, (100,), inplace=True, gpu_state=view)
    after = big.get()
    np.testing.assert_array_equal(after[::2, ::2], new_state)
    assert not after[1::2].any() and not after[:, 1::2].any()  # nothing else written


def test_any_int32_state_wraps_as_theano():
    """States outside the generator's range wrap as Theano's int32 arithmetic (both ops)."""
    rng = np.random.default_rng(1)
    state = rng.integers(-(2**31), 2**31, size=(9, 6)).astype("int32")
    state[0] = [M1 - 1, M1 - 1, M1 - 1, M2 - 1, M2 - 1, M2 - 1]
    state[1] = [2**31 - 1, -1, -(2**31), 2**31 - 1, -(2**31), -1]
    for dtype in ("float32", "float64"):
        check_node(dtype, state, (2000,))


def test_bad_values_raise_the_cpu_ops_errors():
    check_node("float32", _states(3), (-1,))  # negative size
    check_node("float32", _states(3), (1, 2))  # wrong length
    check_node("float32", _states(3), (2**31,))  # too many samples
    check_node("float32", _states(3)[:, :5], (10,))  # not 6 columns
    check_node("float32", np.zeros((0, 6), "int32"), (10,))  # no stream
    with pytest.raises(ValueError, match="size must have 1 entries"):
        GpuMRG_uniform(TensorType("float32", (False,)))(
            GpuArrayType("int32", (False, False))(), (2, 3)
        )
    with pytest.raises(TypeError, match="int32 matrix"):
        GpuMRG_uniform(TensorType("float32", (False,)))(GpuArrayType("int64", (False,))(), (2,))
    with pytest.raises(TypeError, match="float16"):
        GpuMRG_uniform(TensorType("float16", (False,)))


def test_the_op_and_its_kernel_source():
    op = GpuMRG_uniform(TensorType("float32", (False,)))
    assert GPUA_mrg_uniform is GpuMRG_uniform is gpuarray_api.GPUA_mrg_uniform  # opgraph.gpuarray
    assert str(op) == "GpuMRG_uniform{TensorType(float32, vector),no_inplace}"
    assert GpuMRG_uniform(op.output_type, inplace=True).destroy_map == {0: [0]}
    state = GpuArrayType("int32", (False, False))()
    new_state, sample = GpuMRG_uniform.new(state, None, "float32", (1, 5))
    assert isinstance(sample.type, GpuArrayType) and sample.type.broadcastable == (True, False)
    assert new_state.type == state.type
    source = mrg_source("float32", f"{op} for node {op}(GpuArrayType<None>(int32, matrix))")
    assert source.code.startswith("/* GpuMRG_uniform{TensorType(float32, vector),no_inplace}")
    assert "4.6566126e-10f" in source.code and '#include "opgraph_cuda_prelude.cuh"' in source.code


# ---- compiled functions --------------------------------------------------------------------


def _load_recorder() -> Any:
    path = GOLDEN / "record_theano.py"
    if not path.is_file():
        pytest.skip(f"core's golden MRG draws are not in this checkout ({GOLDEN})")
    spec = importlib.util.spec_from_file_location("record_theano_mrg", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run_cases(rec: Any, seed: int, lift: str) -> tuple[dict[str, list[np.ndarray]], Any, Any]:
    """The golden test's draws (two calls, a call after ``seed()``) compiled with the GPU
    pass ``lift`` (``always`` or ``never``), with the streams' states after each call."""
    srng = MRG_RandomStreams(seed)
    with config.change_flags(cuda__lift=lift), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fns = [
            (name, opgraph.function([], v, mode=get_mode("FAST_RUN")))
            for name, v in rec.cases(srng)
        ]
    draws: dict[str, list[np.ndarray]] = {name: [] for name, _ in fns}
    states = []
    for _call in range(2):
        for name, f in fns:
            draws[name].append(np.asarray(f()))
        states.append([s.get_value() for s, *_ in srng.state_updates])
    srng.seed()
    for name, f in fns:
        draws[name].append(np.asarray(f()))
    return draws, states, fns


@pytest.mark.parametrize("seed", [12345, 234, 1])
def test_golden_draws_under_the_gpu_lift(seed):
    """Core's golden cases (uniform, normal, binomial, multinomial, choice) on the GPU: the
    CPU's numbers and Theano 1.0.5's, the states advancing identically."""
    rec = _load_recorder()
    gold = json.loads((GOLDEN / "theano_mrg.json").read_text())["seeds"][str(seed)]["draws"]
    gpu, gpu_states, fns = _run_cases(rec, seed, "always")
    cpu, cpu_states, _ = _run_cases(rec, seed, "never")
    assert any(isinstance(n.op, GpuMRG_uniform) for _, f in fns for n in f.maker.fgraph.apply_nodes)
    for g, c in zip(gpu_states, cpu_states, strict=True):
        for a, b in zip(g, c, strict=True):
            np.testing.assert_array_equal(a, b)
    for name, draws in gpu.items():
        want = gold[name]
        for call, (got, ref) in enumerate(zip(draws, cpu[name], strict=True)):
            assert got.dtype == ref.dtype and got.shape == ref.shape, name
            if name.startswith(("normal", "truncated")):
                # log, sqrt, cos and sin run on the device: their last bits are its own
                rtol = 4e-6 if got.dtype == np.float32 else 1e-14
                np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol / 2, err_msg=name)
            else:
                assert got.tobytes() == ref.tobytes(), f"{name} call {call}"
                assert rec.digest(got) == want["calls"][call], f"{name} call {call}"


def _sample_clients(f: Any) -> list[Any]:
    fgraph = f.maker.fgraph
    nodes = [n for n in fgraph.toposort() if isinstance(n.op, GpuMRG_uniform)]
    assert nodes, [str(n.op) for n in fgraph.toposort()]
    assert not [n for n in fgraph.toposort() if type(n.op) is mrg_uniform]
    return [client for n in nodes for client, _ in fgraph.clients[n.outputs[1]]]


def _draws(srng: MRG_RandomStreams) -> list[Any]:
    with config.change_flags(floatX="float32"):  # binomial draws floatX uniforms
        return [
            srng.uniform((40, 30), low=-2.0, high=3.0, dtype="float32"),
            srng.normal((33,), avg=1.0, std=2.0, dtype="float32"),
            srng.binomial((50,), p=np.float32(0.3), dtype="int8"),
        ]


def test_draws_run_on_the_device_and_feed_gpu_ops(gpu_mode):
    srng = MRG_RandomStreams(7)
    f = opgraph.function([], _draws(srng), mode=gpu_mode)
    clients = _sample_clients(f)
    # the samples go to GPU ops (the scaling, Box-Muller's halves, binomial's compare),
    # never through the host
    assert clients and all(
        isinstance(c.op, GpuOp) and not isinstance(c.op, HostFromGpu) for c in clients
    ), clients
    ref_srng = MRG_RandomStreams(7)
    with config.change_flags(cuda__lift="never"):
        g = opgraph.function([], _draws(ref_srng), mode=get_mode("FAST_RUN"))
    for _ in range(2):
        (gu, gn, gb), (cu, cn, cb) = f(), g()
        np.testing.assert_allclose(gu, cu, rtol=1e-6, atol=5e-7)  # 5 * u - 2, ulps of 2
        np.testing.assert_allclose(gn, cn, rtol=4e-6, atol=2e-6)
        np.testing.assert_array_equal(gb, cb)
    for (s, *_), (r, *_) in zip(srng.state_updates, ref_srng.state_updates, strict=True):
        np.testing.assert_array_equal(s.get_value(), r.get_value())


def test_a_state_on_the_device_stays_there(gpu_mode):
    """Theano's layout: the state is a GPU shared variable, advanced on the device with no
    transfer; made by ``gpuarray_shared_constructor`` or ``shared(..., target=...)``."""
    rstates = _states(13)
    for state in (
        gpuarray_shared_constructor(rstates),
        opgraph.shared(rstates, target="cuda"),
    ):
        assert isinstance(state, GpuArraySharedVariable) and state.type.dtype == "int32"
        new_state, sample = mrg_uniform.new(state, None, "float32", (300,))
        f = opgraph.function([], sample, updates=[(state, new_state)], mode=gpu_mode)
        ops = [n.op for n in f.maker.fgraph.toposort()]
        assert any(isinstance(op, GpuMRG_uniform) for op in ops)
        assert not any(isinstance(op, GpuFromHost) for op in ops), ops
        assert sum(isinstance(op, HostFromGpu) for op in ops) == 1, ops  # the sample out
        host = rstates.copy()
        for _ in range(2):
            cells: list[list[Any]] = [[None], [None]]
            cpu = mrg_uniform(TensorType("float32", (False,)))
            node = cpu.make_node(T.imatrix(), T.lvector())
            cpu.perform(node, [host, np.array([300])], cells)
            host = cells[0][0]
            assert f().tobytes() == cells[1][0].tobytes()
            assert isinstance(state.get_value(return_internal_type=True), GpuArray)
            np.testing.assert_array_equal(state.get_value(), host)


def test_streams_with_target_keep_their_state_on_the_device(gpu_mode):
    """``srng.uniform(..., target="cuda")`` (Theano's keyword) places the stream's state on
    the device: draws copy nothing to the GPU, and give the host state's numbers."""
    srng, ref = MRG_RandomStreams(21), MRG_RandomStreams(21)
    f = opgraph.function([], srng.uniform((64,), dtype="float32", target="cuda"), mode=gpu_mode)
    g = opgraph.function([], ref.uniform((64,), dtype="float32"), mode=gpu_mode)
    (state, *_) = srng.state_updates[0]
    assert isinstance(state, GpuArraySharedVariable)
    assert not any(isinstance(n.op, GpuFromHost) for n in f.maker.fgraph.toposort())
    for _ in range(2):
        assert f().tobytes() == g().tobytes()


def test_in_place_on_a_mutable_input(gpu_mode):
    rstate = T.imatrix("rstate")
    op = mrg_uniform(TensorType("float32", (False,)), inplace=True)
    new_state, sample = op(rstate, (25,), return_list=True)
    f = opgraph.function(
        [In(rstate, mutable=True)], [new_state, sample], mode=gpu_mode, accept_inplace=True
    )
    gpu_ops = [n.op for n in f.maker.fgraph.toposort() if isinstance(n.op, GpuMRG_uniform)]
    assert [op.inplace for op in gpu_ops] == [True]
    value = _states(4)
    got_state, got = f(value.copy())
    cells: list[list[Any]] = [[None], [None]]
    op.perform(op.make_node(T.imatrix(), T.lvector()), [value, np.array([25])], cells)
    np.testing.assert_array_equal(got_state, cells[0][0])
    assert got.tobytes() == cells[1][0].tobytes()


def test_symbolic_size_errors_name_size(gpu_mode):
    srng = MRG_RandomStreams(1)
    s = T.lvector()
    f = opgraph.function([s], srng.uniform(s, ndim=1, dtype="float32"), mode=gpu_mode)
    assert any(isinstance(n.op, GpuMRG_uniform) for n in f.maker.fgraph.apply_nodes)
    assert f(np.array([3])).shape == (3,)
    with pytest.raises(ValueError, match="size must not have negative entries"):
        f(np.array([-3]))
    with pytest.raises(ValueError, match="size must have length 1"):
        f(np.array([2, 3]))


def test_float64_and_float16_draws_stay_on_the_cpu(gpu_mode, caplog):
    srng = MRG_RandomStreams(3)
    with caplog.at_level(logging.INFO, logger="opgraph_cuda.opt"):
        f = opgraph.function(
            [], [srng.uniform((6,), dtype=d) for d in ("float64", "float16")], mode=gpu_mode
        )
    kinds = [type(n.op) for n in f.maker.fgraph.apply_nodes]
    assert kinds.count(mrg_uniform) == 2 and GpuMRG_uniform not in kinds
    assert "float64 stays on the CPU" in caplog.text
    assert "mrg_uniform has no float16 GPU version" in caplog.text
