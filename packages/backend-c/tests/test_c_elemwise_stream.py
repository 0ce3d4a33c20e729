"""Streaming stores for the big outputs of elementwise loops bound by memory
(``opgraph_c._elemwise``): the same bits as the plain loop on one thread and on two, in
place, for float32 and float64, and only for loops without vector math functions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.compile.io import In
from opgraph.compile.mode import Mode
from opgraph.tensor.elemwise import Elemwise
from opgraph_c import _elemwise, _threads

#: Past the 16 MiB at which outputs stream (float64), and not a multiple of the tile.
N = 2_100_003
C = Mode(linker="cvm", optimizer="fast_run")


@pytest.fixture
def restore_streaming() -> Iterator[None]:
    before = _elemwise.streaming()
    yield
    _elemwise.streaming(before)


def _team(monkeypatch: pytest.MonkeyPatch, nthreads: int) -> None:
    """Thunks made from now on use ``nthreads`` threads on every call."""
    team = {"nthreads": nthreads, "adaptive": False, "threshold": 0}
    monkeypatch.setattr(_threads, "team_options", lambda kernel: dict(team))


def _elemwise_thunks(f: Any) -> list[Any]:
    return [t for n, t in zip(f.fn.nodes, f.fn.thunks, strict=True) if isinstance(n.op, Elemwise)]


@pytest.mark.parametrize(("dtype", "n"), [("float64", N), ("float32", 2 * N)])
@pytest.mark.parametrize("nthreads", [1, 2])
def test_streamed_outputs_equal_the_plain_loop(
    monkeypatch: pytest.MonkeyPatch, restore_streaming: None, dtype: str, n: int, nthreads: int
) -> None:
    _team(monkeypatch, nthreads)
    x, y = T.vector("x", dtype=dtype), T.vector("y", dtype=dtype)
    f = function([x, y], [x + x**10, x * y - 2], mode=C)
    assert all(t.stream for t in _elemwise_thunks(f))
    rng = np.random.default_rng(0)
    xv, yv = rng.uniform(0, 2, n).astype(dtype), rng.standard_normal(n).astype(dtype)
    assert _elemwise.streaming(True) in (True, False)
    streamed = f(xv, yv)
    _elemwise.streaming(False)
    plain = f(xv, yv)
    for s, p in zip(streamed, plain, strict=True):
        np.testing.assert_array_equal(s, p)
    rtol = 1e-6 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(streamed[0], xv + xv**10, rtol=rtol)
    np.testing.assert_allclose(streamed[1], xv * yv - 2, rtol=rtol, atol=rtol)


def test_streamed_in_place_output(monkeypatch: pytest.MonkeyPatch, restore_streaming: None) -> None:
    _team(monkeypatch, 2)
    x = T.dvector("x")
    f = function([In(x, mutable=True)], x * 2 + 1, mode=C)
    (thunk,) = _elemwise_thunks(f)
    assert thunk.stream
    v = np.arange(N, dtype="float64")
    got = f(v)
    assert np.shares_memory(got, v)  # written over its own input
    np.testing.assert_array_equal(got, np.arange(N, dtype="float64") * 2 + 1)


def test_only_loops_bound_by_memory_stream() -> None:
    x = T.dvector("x")
    arithmetic = function([x], x * 3 + 1, mode=C)
    transcendental = function([x], T.exp(x) + 1, mode=C)
    assert [t.stream for t in _elemwise_thunks(arithmetic)] == [True]
    assert [t.stream for t in _elemwise_thunks(transcendental)] == [False]
    v = np.linspace(0, 1, N)
    np.testing.assert_allclose(transcendental(v), np.exp(v) + 1, rtol=1e-15)
