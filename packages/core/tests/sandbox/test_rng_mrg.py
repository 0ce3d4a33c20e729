"""``MRG_RandomStreams`` against Theano 1.0.5's numbers, and the generator's own checks.

``golden/theano_mrg.json`` holds draws recorded from Theano 1.0.5 (``golden/record_theano.py``,
Theano's C code): for the seeds 12345, 234 and 1, uniform float32/float64 (sizes (5,),
(3, 4), (1001,), (1001,) on 7 streams, bounds), normal float32/float64 (odd sizes, 7
streams, ``truncate``, ``avg``/``std``), ``truncated_normal``, binomial, multinomial,
choice and ``multinomial_wo_replacement``; two successive calls, a call after ``seed()``
and after ``seed(999)``; and ``get_substream_rstates``. Uniform, binomial, multinomial and
choice draws must be bit-identical (float32 too). Normal draws go through ``log``,
``sqrt``, ``cos`` and ``sin``, whose last bits are the math library's (NumPy's SIMD
float32 functions, glibc's, libmvec's), so they are compared within a few ulps.
"""

from __future__ import annotations

import importlib.util
import json
import math
import pickle
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.debugmode import DebugMode
from opgraph.compile.mode import Mode
from opgraph.sandbox.multinomial import ChoiceFromUniform, MultinomialFromUniform
from opgraph.sandbox.rng_mrg import (
    M1,
    M2,
    MRG_RandomStreams,
    ff_2p72,
    ff_2p134,
    guess_n_streams,
    mrg_fill,
    mrg_next_value,
    mrg_uniform,
    multMatVect,
)
from opgraph.tensor.type import TensorType

GOLDEN = Path(__file__).parent / "golden"


def _load_recorder() -> Any:
    spec = importlib.util.spec_from_file_location("record_theano", GOLDEN / "record_theano.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REC = _load_recorder()
THEANO = json.loads((GOLDEN / "theano_mrg.json").read_text())


def _check(name: str, got: np.ndarray, want: Any) -> None:
    """``got`` against a recorded digest (exact) or normal values (within a few ulps)."""
    if isinstance(want, str):
        assert REC.digest(got) == want, (name, got.ravel()[:4])
        return
    flat = got.ravel()
    vals = np.array([flat[i] for i in REC.positions(flat.size)], dtype="float64")
    if got.dtype == np.float32:
        np.testing.assert_allclose(vals, want, rtol=4e-6, atol=2e-6, err_msg=name)
    else:
        np.testing.assert_allclose(vals, want, rtol=1e-14, atol=1e-15, err_msg=name)


MODES = {
    "default": None,
    "py": Mode(linker="py"),
}


@pytest.mark.parametrize("seed", REC.SEEDS)
@pytest.mark.parametrize("mode", sorted(MODES))
def test_draws_equal_theano(seed: int, mode: str) -> None:
    gold = THEANO["seeds"][str(seed)]
    srng = MRG_RandomStreams(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fns = [(name, opgraph.function([], v, mode=MODES[mode])) for name, v in REC.cases(srng)]
    assert [name for name, _ in fns] == list(gold["draws"])
    got: dict[str, list[np.ndarray]] = {}
    for name, f in fns:
        got[name] = [np.asarray(f()), np.asarray(f())]
    srng.seed()
    for name, f in fns:
        got[name].append(np.asarray(f()))
    srng.seed(999)
    for name, f in fns[:3]:
        _check(name, np.asarray(f()), gold["draws"][name]["after_seed_999"])
    for name, draws in got.items():
        want = gold["draws"][name]
        assert draws[0].dtype.str == want["dtype"] and list(draws[0].shape) == want["shape"]
        for call, expected in enumerate(want["calls"]):
            _check(f"{name} call {call}", draws[call], expected)
        assert not np.array_equal(draws[0], draws[1]) or draws[0].dtype.kind != "f", name
        if isinstance(want["calls"][0], str):
            np.testing.assert_array_equal(draws[0], draws[2], err_msg=f"{name} after seed()")
        else:  # the math library's vector and scalar paths may differ in the last bit
            rtol = 4e-6 if draws[0].dtype == np.float32 else 1e-14
            np.testing.assert_allclose(draws[0], draws[2], rtol=rtol, atol=rtol / 2)


@pytest.mark.parametrize("seed", REC.SEEDS)
def test_substreams_equal_theano(seed: int) -> None:
    gold = THEANO["seeds"][str(seed)]
    srng = MRG_RandomStreams(seed)
    subs = srng.get_substream_rstates(5, "float32")
    assert subs.dtype == np.int32 and subs.shape == (5, 6)
    assert subs.tolist() == gold["substreams_5"]
    assert srng.rstate.tolist() == gold["rstate_after"]
    assert (
        srng.get_substream_rstates(3, "float64", inc_rstate=False).tolist()
        == gold["substreams_3_noinc"]
    )
    assert srng.rstate.tolist() == gold["rstate_after"]


def test_linkers_and_debugmode_agree() -> None:
    """py, the default (c when backend-c is installed) and DebugMode give the same draws."""
    outs = []
    for mode in (Mode(linker="py"), None, DebugMode()):
        srng = MRG_RandomStreams(42)
        draws = [
            srng.uniform((7, 3), dtype="float32"),
            srng.uniform((1001,), dtype="float64", nstreams=3),
            srng.normal((11,), dtype="float64", truncate=True),
            srng.binomial((20,), p=0.25),
            srng.multinomial(pvals=np.full((4, 5), 0.2)),
        ]
        f = opgraph.function([], draws, mode=mode)
        outs.append([f(), f()])
    ref = outs[0]
    for other in outs[1:]:
        for a, b in zip(ref, other, strict=True):
            for x, y in zip(a, b, strict=True):
                if x.dtype.kind == "f" and x.size == 11:
                    np.testing.assert_allclose(x, y, rtol=1e-14)
                else:
                    np.testing.assert_array_equal(x, y)


# -- the generator itself --------------------------------------------------------------------


def _reference_draw(rstate: np.ndarray, n: int, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Theano's element loop with :func:`mrg_next_value`: element i from stream i % n."""
    state = rstate.copy()
    out = np.empty(n, dtype=dtype)
    streams = state.shape[0]
    for i in range(n):
        k = mrg_next_value(state[i % streams], state[i % streams], 1, 0xFFFFFFFF, 0)
        k = int(k)
        out[i] = np.float32(k) * np.float32(4.6566126e-10) if dtype == "float32" else k * 2.0**-31
    return out, state


@pytest.mark.parametrize(
    ("n_streams", "n", "dtype"),
    [
        (1, 300, "float64"),
        (3, 1000, "float32"),
        (7, 10, "float64"),
        (50, 7, "float64"),
        (2, 777, "float32"),
        (4, 0, "float64"),
    ],
)
def test_vectorised_draw_equals_the_element_loop(n_streams: int, n: int, dtype: str) -> None:
    """Both the step-by-step path and the jump-ahead path (few streams, long runs)."""
    rstate = MRG_RandomStreams(77).get_substream_rstates(n_streams, dtype)
    want, want_state = _reference_draw(rstate, n, dtype)
    state = rstate.copy()
    got = mrg_fill(state, n, dtype)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(state, want_state)


def test_states_outside_the_generator_wrap_as_int32() -> None:
    """Any int32 state gives Theano's int32 results (wraparound, no modular shortcut)."""
    rng = np.random.default_rng(3)
    rstate = rng.integers(-(2**31), 2**31, size=(5, 6)).astype("int32")
    rstate[0] = [M1 - 1, M1 - 1, M1 - 1, M2 - 1, M2 - 1, M2 - 1]
    rstate[1] = [2**31 - 1, -1, -(2**31), 2**31 - 1, -(2**31), -1]
    want, want_state = _reference_draw(rstate, 400, "float64")
    state = rstate.copy()
    np.testing.assert_array_equal(mrg_fill(state, 400, "float64"), want)
    np.testing.assert_array_equal(state, want_state)


def test_samples_are_in_the_open_unit_interval() -> None:
    srng = MRG_RandomStreams(5)
    f = opgraph.function([], [srng.uniform((20000,), dtype=d) for d in ("float32", "float64")])
    for u in f():
        assert u.min() > 0 and u.max() < 1
        assert abs(u.mean() - 0.5) < 0.01


def test_one_million_uniforms_in_perform_well_under_a_second() -> None:
    rstate = MRG_RandomStreams(1).get_substream_rstates(guess_n_streams((10**6,)), "float64")
    for n_streams in (rstate.shape[0], 1):
        start = time.perf_counter()
        mrg_fill(rstate[:n_streams].copy(), 10**6, "float64")
        assert time.perf_counter() - start < 1.0


def test_jumps() -> None:
    srng = MRG_RandomStreams(12345)
    first = srng.rstate.copy()
    subs = srng.get_substream_rstates(4, "float64", inc_rstate=False)
    for i in range(1, 4):
        np.testing.assert_array_equal(subs[i], ff_2p72(subs[i - 1]))
    srng.inc_rstate()
    np.testing.assert_array_equal(srng.rstate, ff_2p134(first))
    assert multMatVect(first, np.eye(3, dtype="int64"), M1, np.eye(3, dtype="int64"), M2).tolist()
    assert srng.rstate.dtype == np.int32


def test_guess_n_streams() -> None:
    assert guess_n_streams((5,)) == 5
    assert guess_n_streams((3, 4)) == 2
    assert guess_n_streams((1001,)) == 166
    assert guess_n_streams((10**7,)) == 60 * 256
    assert guess_n_streams((np.int64(12),)) == 60 * 256  # Theano: Python ints only
    with pytest.warns(UserWarning, match="guessing 60"):
        assert guess_n_streams(T.lvector(), warn=True) == 60 * 256


def test_streams_are_shared_state_with_default_updates() -> None:
    srng = MRG_RandomStreams(9)
    u = srng.uniform((4,))
    (state, new_state, size, nstreams) = srng.state_updates[0]
    assert state.default_update is new_state and state.tag.is_rng
    assert srng.updates() == srng.state_updates and size == (4,) and nstreams is None
    before = state.get_value().copy()
    f = opgraph.function([], u)
    a, b = f(), f()
    assert not np.array_equal(a, b)
    assert not np.array_equal(state.get_value(), before)
    srng.seed()
    np.testing.assert_array_equal(state.get_value(), before)
    np.testing.assert_array_equal(f(), a)


def test_pickled_function_keeps_its_state() -> None:
    srng = MRG_RandomStreams(2024)
    f = opgraph.function([], [srng.uniform((6,), dtype="float32"), srng.normal((3,))])
    f()
    g = pickle.loads(pickle.dumps(f))
    for a, b in zip(f(), g(), strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(f(), g(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_symbolic_size_and_ndim() -> None:
    srng = MRG_RandomStreams(3)
    x = T.matrix()
    u = srng.uniform(x.shape, dtype="float64")
    n = srng.normal(x.shape, ndim=2)
    f = opgraph.function([x], [u, n])
    a, b = f(np.zeros((2, 3)))
    assert a.shape == (2, 3) and b.shape == (2, 3)
    assert srng.n_streams(x.shape) == 60 * 256
    s = T.lscalar()
    v = opgraph.function([s], srng.uniform((s, 2)))(3)
    assert v.shape == (3, 2)


def test_binomial_multinomial_choice_values() -> None:
    srng = MRG_RandomStreams(11)
    pv = np.array([[0.2, 0.8], [1.0, 0.0]], dtype="float64")
    b = srng.binomial((2000,), p=0.3)
    b5 = srng.binomial((500,), n=5, p=0.5, dtype="int32")
    m = srng.multinomial(pvals=pv, n=4)
    mv = srng.multinomial(pvals=np.array([0.5, 0.5]))
    c = srng.choice(size=2, replace=False, p=np.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]]))
    cr = srng.choice(size=3, replace=True, p=np.array([[0.0, 1.0]]))
    f = opgraph.function([], [b, b5, m, mv, c, cr])
    bv, b5v, mvals, mvec, cv, crv = f()
    assert bv.dtype == np.int64 and set(np.unique(bv)) <= {0, 1} and abs(bv.mean() - 0.3) < 0.05
    assert b5v.dtype == np.int32 and b5v.min() >= 0 and b5v.max() <= 5
    assert mvals.tolist()[1] == [4, 0] and mvals.sum(axis=1).tolist() == [4, 4]
    assert mvec.shape == (2,) and mvec.sum() == 1
    assert sorted(cv[0].tolist()) == [0, 1] and sorted(cv[1].tolist()) == [1, 2]
    assert crv.tolist() == [[1, 1, 1]]


def test_multinomial_ops_directly() -> None:
    pvals = T.matrix()
    unis = T.vector()
    f = opgraph.function([pvals, unis], MultinomialFromUniform("auto")(pvals, unis, 2))
    out = f(np.array([[0.25, 0.75]]), np.array([0.1, 0.9]))
    assert out.tolist() == [[1.0, 1.0]] and out.dtype == np.float64
    g = opgraph.function([pvals, unis], ChoiceFromUniform("int64")(pvals, unis, 2))
    assert g(np.array([[0.25, 0.75]]), np.array([0.5, 0.5])).tolist() == [[1, 0]]
    with pytest.raises(ValueError, match=r"unis\.shape"):
        f(np.array([[0.25, 0.75]]), np.array([0.1]))
    with pytest.raises(ValueError, match="without replacement"):
        opgraph.function([pvals, unis], ChoiceFromUniform("int64")(pvals, unis, 3))(
            np.array([[0.5, 0.5]]), np.zeros(3)
        )


def test_the_op() -> None:
    op = mrg_uniform(TensorType("float32", (False,)))
    assert str(op) == "mrg_uniform{TensorType(float32, vector),no_inplace}"
    state = opgraph.shared(MRG_RandomStreams(1).get_substream_rstates(3, "float32"))
    _, sample = mrg_uniform.new(state, None, "float32", (1, 5))
    assert sample.type.broadcastable == (True, False)
    f = opgraph.function([], sample.shape)
    assert f().tolist() == [1, 5]
    with pytest.raises(Exception, match="undefined"):
        opgraph.grad(sample.sum(), state)
    scalar = mrg_uniform.new(state, None, "float64", ())[1]
    assert scalar.type.ndim == 0
    value = opgraph.function([], scalar)()
    assert value.shape == () and 0 < value < 1


# -- errors ----------------------------------------------------------------------------------


def test_bad_inputs_name_the_argument() -> None:
    srng = MRG_RandomStreams(1)
    with pytest.raises(ValueError, match="size"):
        srng.uniform((-2, 3))
    with pytest.raises(ValueError, match="size"):
        srng.normal((0,))
    with pytest.raises(TypeError, match="size"):
        srng.uniform((2.5, 3))
    with pytest.raises(TypeError, match="size"):
        srng.normal("abc")
    with pytest.raises(ValueError, match="p must be probabilities"):
        srng.binomial((3,), p=1.5)
    with pytest.raises(ValueError, match="pvals"):
        srng.multinomial(pvals=np.array([[-0.5, 1.5]]))
    with pytest.raises(ValueError, match="p must be probabilities"):
        srng.choice(size=1, replace=False, p=np.array([[2.0, -1.0]]))
    with pytest.raises(TypeError, match="dtype"):
        srng.uniform((3,), dtype="int32")
    with pytest.raises(TypeError, match="dtype"):
        srng.normal((3,), dtype="complex128")
    with pytest.raises(ValueError, match="nstreams"):
        srng.uniform((3,), nstreams=0)
    with pytest.raises(ValueError, match="seed"):
        MRG_RandomStreams(0)
    with pytest.raises(ValueError, match="seed"):
        MRG_RandomStreams(M2)
    with pytest.raises(TypeError, match="seed"):
        MRG_RandomStreams([1, 2, 3])
    with pytest.raises(ValueError, match="n_streams"):
        srng.get_substream_rstates(0, "float32")
    with pytest.raises(TypeError, match="a has to be None"):
        srng.choice(a=3, p=np.ones((1, 3)) / 3)


def test_runtime_size_errors_name_size() -> None:
    srng = MRG_RandomStreams(1)
    s = T.lvector()
    f = opgraph.function([s], srng.uniform(s, ndim=1), mode=Mode(linker="py"))
    with pytest.raises(ValueError, match="size must not have negative entries"):
        f(np.array([-3]))
    with pytest.raises(ValueError, match="size must have length 1"):
        f(np.array([2, 3]))


def test_public_paths() -> None:
    assert opgraph.sandbox.rng_mrg.MRG_RandomStreams is MRG_RandomStreams
    from opgraph.sandbox.rng_mrg import MRG_RandomStreams as again

    assert again is MRG_RandomStreams
    assert math.isclose(float(np.float32(4.6566126e-10)), 2.0**-31 * (1 - 2.0**-24))
