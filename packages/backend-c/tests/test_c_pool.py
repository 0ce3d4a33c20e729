"""The buffer pool of big elementwise outputs (``opgraph_c._pool``, flag ``c__buffer_pool_mb``).

Outputs of ``MIN_BYTES`` (4 MiB) or more are allocated through the pool's NumPy memory
handler, which keeps the buffers of dropped results for the next call. What must hold:
values stay right, live results never share memory, the cap is respected, pooled arrays
behave like any array, and NumPy's current handler is always put back.
"""

from __future__ import annotations

import copy
import gc
import pickle
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.configdefaults import config
from opgraph_c import _pool, buffer_pool_info, release_buffer_pool

try:
    from numpy._core.multiarray import get_handler_name
except ImportError:  # NumPy < 2
    from numpy.core.multiarray import get_handler_name

#: 1M float64: 8 MB, over the pool's 4 MiB threshold, quick to compute.
N = 1 << 20
POOL = "opgraph_c_buffer_pool"
DEFAULT = "default_allocator"


@pytest.fixture(autouse=True)
def empty_pool() -> Iterator[None]:
    """Each test starts and ends with an empty pool and the default cap."""
    with config.change_flags(c__buffer_pool_mb=256):
        release_buffer_pool()
        yield
        gc.collect()
        release_buffer_pool()
    assert get_handler_name() == DEFAULT


@pytest.fixture
def triple(c_mode: Mode) -> Any:
    """``x -> 3 * x + 1`` on a float64 vector: one Elemwise node per operation."""
    x = T.dvector("x")
    return function([x], 3.0 * x + 1.0, mode=c_mode)


def _data(seed: int, n: int = N) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n)


def test_flag_declared_with_default() -> None:
    assert "c__buffer_pool_mb" in config
    assert config.get_param("c__buffer_pool_mb").default_value() == 256
    info = buffer_pool_info()
    assert info["min_bytes"] == _pool.MIN_BYTES == 4 << 20


def test_dropped_result_buffer_is_reused(triple: Any) -> None:
    hits = buffer_pool_info()["hits"]
    for seed in range(5):
        x = _data(seed)
        r = triple(x)
        np.testing.assert_allclose(r, 3.0 * x + 1.0)
        assert get_handler_name(r) == POOL
        assert get_handler_name() == DEFAULT
        del r  # its buffer goes back to the pool, for the next call
    info = buffer_pool_info()
    assert info["hits"] >= hits + 3
    assert 1 <= info["buffers"] <= 8
    assert info["bytes"] % (N * 8) == 0


def test_small_outputs_skip_the_pool(triple: Any) -> None:
    before = buffer_pool_info()
    r = triple(_data(0, 1000))
    assert get_handler_name(r) == DEFAULT
    del r
    after = buffer_pool_info()
    assert (after["hits"], after["misses"], after["buffers"]) == (
        before["hits"],
        before["misses"],
        before["buffers"],
    )


def test_live_results_never_share_memory(triple: Any) -> None:
    x1, x2, x3 = _data(1), _data(2), _data(3)
    triple(x1)  # fill the pool: the next calls are served from it
    r1 = triple(x1)
    r2 = triple(x2)
    assert not np.shares_memory(r1, r2)
    del r1  # r1's buffer is free for the next call, r2's is not
    r3 = triple(x3)
    assert not np.shares_memory(r2, r3)
    np.testing.assert_allclose(r2, 3.0 * x2 + 1.0)
    np.testing.assert_allclose(r3, 3.0 * x3 + 1.0)
    r4 = triple(x1)
    for r in (r2, r3):
        assert not np.shares_memory(r, r4)
    np.testing.assert_allclose(r2, 3.0 * x2 + 1.0)
    np.testing.assert_allclose(r3, 3.0 * x3 + 1.0)
    np.testing.assert_allclose(r4, 3.0 * x1 + 1.0)


def test_fused_function_output_from_pool() -> None:
    # W1's shape of graph, with the default (fast_run) rewrites.
    a = T.dvector("a")
    f = function([a], a + a**10, mode=Mode(linker="c"))
    x = _data(4) / 4
    hits = buffer_pool_info()["hits"]
    for _ in range(4):
        r = f(x)
        np.testing.assert_allclose(r, x + x**10)
        del r
    assert buffer_pool_info()["hits"] >= hits + 2


def test_small_cap_keeps_nothing(triple: Any) -> None:
    with config.change_flags(c__buffer_pool_mb=4):  # 4 MiB: an 8 MB buffer does not fit
        for seed in range(3):
            x = _data(seed)
            r = triple(x)
            assert get_handler_name(r) == POOL
            np.testing.assert_allclose(r, 3.0 * x + 1.0)
            del r
            assert buffer_pool_info()["buffers"] == 0
        assert buffer_pool_info()["cap_bytes"] == 4 << 20


def test_zero_turns_the_pool_off_and_lowering_the_cap_trims(triple: Any) -> None:
    x = _data(0)
    triple(x)
    triple(x)
    assert buffer_pool_info()["buffers"] >= 1
    with config.change_flags(c__buffer_pool_mb=0):
        r = triple(x)
        info = buffer_pool_info()
        assert (info["buffers"], info["bytes"], info["cap_bytes"]) == (0, 0, 0)
        assert get_handler_name(r) == DEFAULT
        np.testing.assert_allclose(r, 3.0 * x + 1.0)
        del r
        assert buffer_pool_info()["buffers"] == 0


def test_pool_arrays_freed_after_the_pool_turned_off(triple: Any) -> None:
    x = _data(0)
    r = triple(x)
    assert get_handler_name(r) == POOL
    with config.change_flags(c__buffer_pool_mb=0):
        triple(x)  # reads the flag: cap 0
        del r  # a pooled array freed now goes back to libc
        assert buffer_pool_info()["buffers"] == 0


def test_cap_and_slots_bound_the_pool() -> None:
    with config.change_flags(c__buffer_pool_mb=40):
        arrays = [_pool.new_array((N + 1024 * k,), np.float64) for k in range(12)]
        assert all(get_handler_name(a) == POOL for a in arrays)
        del arrays
        info = buffer_pool_info()
        assert 1 <= info["buffers"] <= 8
        assert info["bytes"] <= 40 << 20
    arrays = [_pool.new_array((N + 1024 * k,), np.float64) for k in range(12)]
    del arrays
    info = buffer_pool_info()
    assert info["buffers"] == 8  # the slots bound it under the default cap
    assert info["bytes"] <= info["cap_bytes"]


def test_release_frees_everything(triple: Any) -> None:
    for seed in range(3):
        triple(_data(seed))
    a, b = _pool.new_array((N,), np.float64), _pool.new_array((2 * N,), np.float64)
    del a, b
    held = buffer_pool_info()["bytes"]
    assert held >= 3 * N * 8
    assert release_buffer_pool() == held
    info = buffer_pool_info()
    assert (info["buffers"], info["bytes"]) == (0, 0)
    assert release_buffer_pool() == 0


def test_zeroed_allocation_never_returns_stale_data() -> None:
    a = _pool.new_array((N,), np.float64)
    a.fill(7.0)
    del a  # an 8 MB buffer full of 7.0 now sits in the pool
    assert buffer_pool_info()["buffers"] == 1
    z = _pool.new_array((N,), np.float64, zeroed=True)
    assert get_handler_name(z) == POOL
    assert not z.any()
    e = _pool.new_array((N,), np.float64)  # the uninitialised one does reuse it
    assert buffer_pool_info()["buffers"] == 0
    del e, z


def test_pooled_arrays_behave_normally(triple: Any) -> None:
    x = _data(5)
    triple(x)
    hits = buffer_pool_info()["hits"]
    r = triple(x)
    assert buffer_pool_info()["hits"] > hits  # (the intermediate 3 * x is pooled too)
    assert get_handler_name(r) == POOL
    assert r.flags.owndata and r.flags.writeable and r.flags.c_contiguous
    assert r.ctypes.data % 16 == 0
    r[0] = 42.0
    assert r[0] == 42.0
    expected = 3.0 * x + 1.0
    expected[0] = 42.0
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(r)), expected)
    np.testing.assert_array_equal(copy.deepcopy(r), expected)
    np.testing.assert_array_equal(r.copy(), expected)
    # resize goes through the handler's realloc: grow, then shrink under the threshold.
    r.resize((2 * N,), refcheck=False)
    np.testing.assert_array_equal(r[:N], expected)
    r[N:] = 1.0
    assert r[N:].sum() == N
    r.resize((10,), refcheck=False)
    np.testing.assert_array_equal(r, expected[:10])
    del r  # 80 bytes: freed, not pooled
    assert buffer_pool_info()["bytes"] % (N * 8) == 0
    # NumPy's own allocations elsewhere are untouched.
    other = np.empty(2 * N)
    assert get_handler_name(other) == DEFAULT
    assert get_handler_name() == DEFAULT


def test_shape_mismatch_restores_the_handler(c_mode: Mode) -> None:
    a, b = T.dvector("a"), T.dvector("b")
    f = function([a, b], a + b, mode=c_mode)
    with pytest.raises(ValueError, match="mis-match"):
        f(np.ones(N), np.ones(N + 1))
    assert get_handler_name() == DEFAULT
    np.testing.assert_array_equal(f(np.ones(N), np.ones(N)), 2.0)
    assert get_handler_name() == DEFAULT


def test_failed_pooled_allocation_restores_the_handler(c_mode: Mode) -> None:
    # Three 1 MB inputs of one node broadcast to 2**51 elements (16 PiB): past any address
    # space, so the pool's malloc fails and NumPy raises MemoryError while the pool's
    # handler is current. (One variadic add: a + b would first allocate 128 GiB.)
    n = 1 << 17
    a = T.TensorType("float64", (False, True, True))("a")
    b = T.TensorType("float64", (True, False, True))("b")
    c = T.TensorType("float64", (True, True, False))("c")
    f = function([a, b, c], T.add(a, b, c), mode=c_mode)
    assert len(f.maker.fgraph.toposort()) == 1
    ones = np.ones(n)
    with pytest.raises(MemoryError):
        f(ones[:, None, None], ones[None, :, None], ones[None, None, :])
    assert get_handler_name() == DEFAULT
    assert np.empty(N).flags.owndata


def test_threads_share_the_pool_safely(c_mode: Mode) -> None:
    # Kernels run without the GIL; allocations and frees interleave across threads.
    x = T.dvector("x")
    fs = [function([x], x * float(k + 2), mode=c_mode) for k in range(3)]
    data = [_data(k) for k in range(3)]
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            kept = []
            for i in range(6):
                r = fs[k](data[k])
                np.testing.assert_array_equal(r, data[k] * float(k + 2))
                kept.append(r)
                if i % 2:
                    kept.pop(0)  # drop one result, keep another alive
            for r in kept:
                np.testing.assert_array_equal(r, data[k] * float(k + 2))
        except BaseException as exc:  # reported in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    info = buffer_pool_info()
    assert info["buffers"] <= 8 and info["bytes"] <= info["cap_bytes"]


def test_scan_buffers_and_products_come_from_the_pool(c_mode: Mode) -> None:
    # A loop's recurrent buffer (9 x 1M float64) and a matrix product's output (8 MB) are
    # pooled as elementwise outputs are: a second call reuses the pages the first dropped.
    import opgraph

    x0 = T.dvector("x0")
    out, _ = opgraph.scan(lambda h: h * 0.5 + 1.0, outputs_info=[x0], n_steps=8)
    loop = function([x0], out, mode=c_mode)
    a, b = T.dmatrix("a"), T.dmatrix("b")
    product = function([a, b], T.dot(a, b), mode=c_mode)
    start = _data(4)
    av, bv = _data(5, 1024 * 64).reshape(1024, 64), _data(6, 64 * 1024).reshape(64, 1024)
    for _ in range(2):
        hits = buffer_pool_info()["hits"]
        r = loop(start)
        p = product(av, bv)
        assert get_handler_name(r.base if r.base is not None else r) == POOL
        assert get_handler_name(p) == POOL
        np.testing.assert_allclose(r[-1], start * 0.5**8 + 2.0 * (1 - 0.5**8))
        np.testing.assert_allclose(p, av @ bv)
        del r, p
    assert buffer_pool_info()["hits"] >= hits + 2
