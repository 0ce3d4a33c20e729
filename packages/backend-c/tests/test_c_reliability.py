"""The ``c`` linker's call path under fork, threads and aliased arguments (issue 20).

- A child forked after the parent ran threaded kernels (OpenMP elementwise loops,
  reductions, gemv, correlations, pooling, batch norm; OpenBLAS products), or while another
  thread was inside a compiled call, can compile and call anything, also from a
  ``multiprocessing`` fork pool.
- The in-place elementwise loop does not read what it has overwritten when a ``mutable``
  argument aliases another input: the function copies the overwritten one first.
- Updates of shared variables by several functions and their copies from threads are
  atomic (exact totals, no deadlock), on the compiled call and on the Python call path.

Whatever may hang runs in a fresh interpreter under a timeout, so a hang fails the test.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.compile.io import In
from opgraph.compile.mode import Mode
from opgraph.compile.sharedvalue import shared
from opgraph_c._elemwise import ElemwiseThunk

C = Mode(linker="c")

# ``in_child(fn)`` (opgraph.testing.fork) forks, runs ``fn`` in the child and fails on a hang.
PRELUDE = """
import os, sys, threading, time
import numpy as np
import opgraph
import opgraph.tensor as T
from opgraph.compile.mode import Mode
from opgraph.compile.sharedvalue import shared
from opgraph.configdefaults import config
from opgraph.testing.fork import in_child

MODE = Mode(linker="c")
"""

Run = Callable[..., subprocess.CompletedProcess]


def run_script(run_python: Run, cache: Path, body: str, timeout: float = 120) -> str:
    """``PRELUDE + body`` in a fresh interpreter (this session's compile cache)."""
    try:
        proc = run_python(PRELUDE + body, cache, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the script hung (over {timeout} s): {exc.stdout}{exc.stderr}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


# ---------------------------------------------------------------------- fork

FORK_AFTER_THREADS = """
from opgraph.tensor.nnet import conv2d
from opgraph.tensor.nnet.bn import batch_normalization_train
from opgraph.tensor.signal.pool import pool_2d
from opgraph_c import _threads

# Every team threaded from 1,000 elements on, whatever the timings say: the parent really
# runs OpenMP regions (GNU OpenMP cannot run one in a child forked after that).
config.openmp = True
config.c__openmp_threshold = 1000
for kernel, (_, threshold) in list(_threads.POLICY.items()):
    _threads.POLICY[kernel] = (False, threshold)

x, m = T.dvector("x"), T.dmatrix("m")
im, w, g = T.dtensor4("im"), T.dtensor4("w"), T.dvector("g")
bc = g.dimshuffle("x", 0, "x", "x")
outs = [
    T.exp(x) * 2 - x,
    m.sum(axis=0),
    T.dot(m, x[:300]),
    T.dot(m, m),
    conv2d(im, w),
    pool_2d(im, (2, 2), True),
    batch_normalization_train(im, bc, bc * 0, "spatial")[0],
]
f = opgraph.function([x, m, im, w, g], outs, mode=MODE)
rng = np.random.default_rng(0)
args = [np.ones(600_000), rng.random((300, 300)), rng.random((8, 4, 40, 40)),
        rng.random((6, 4, 3, 3)), np.ones(4)]
want = [np.array(o) for o in f(*args)]
for _ in range(3):
    f(*args)
assert _threads.timed_stats()["threaded"] > 0, "the parent ran no threaded kernel"

def same(got):
    return all(np.allclose(a, b) for a, b in zip(got, want))

def child():
    y = T.dvector("y")
    h = opgraph.function([y], T.sin(y) * 3 + y.sum(), mode=MODE)  # compiles in the child
    return same(f(*args)) and np.allclose(h(args[0]), np.sin(1.0) * 3 + 600_000)

in_child(child)

import multiprocessing as mp
def work(k):
    return same(f(*args))
with mp.get_context("fork").Pool(2) as pool:
    assert all(pool.map_async(work, range(4)).get(timeout=60))
assert same(f(*args))  # the parent keeps its threads
print("ok")
"""


def test_a_child_forked_after_threaded_kernels_compiles_and_calls(
    run_python: Run, c_cache_dir: Path
) -> None:
    assert "ok" in run_script(run_python, c_cache_dir, FORK_AFTER_THREADS)


FORK_DURING_CALL = """
from opgraph.compile.ops import as_op

inside, leave = threading.Event(), threading.Event()

@as_op(itypes=[T.dscalar], otypes=[T.dscalar])
def hold(x):
    inside.set()
    leave.wait(10)
    return x

x = T.dscalar("x")
s = shared(0.0, name="s")
slow = opgraph.function([x], hold(x) + 1, updates=[(s, s + 1)], mode=MODE)
plain = opgraph.function([x], hold(x) * 2, mode=MODE)  # a call lock, no update lock
other = opgraph.function([x], x * 2, updates=[(s, s + x)], mode=MODE)
assert slow._caller is not None and plain._caller is not None  # the compiled call path
for fn in (slow, plain):
    inside.clear()
    leave.clear()
    caller = threading.Thread(target=fn, args=(1.0,))
    caller.start()
    assert inside.wait(10)
    start = float(s.get_value())

    def child():
        leave.set()
        ok = float(slow(2.0)) == 3.0 and float(plain(2.0)) == 4.0 and float(other(3.0)) == 6.0
        return ok and s.get_value() == start + 4.0

    in_child(child)
    leave.set()
    caller.join()
print("ok")
"""


def test_a_child_forked_while_another_thread_calls_can_call_every_function(
    run_python: Run, c_cache_dir: Path
) -> None:
    assert "ok" in run_script(run_python, c_cache_dir, FORK_DURING_CALL)


# ---------------------------------------------------------------------- aliased inputs


def _mutable_function() -> object:
    x, y = T.dvector("x"), T.dvector("y")
    f = function([In(x, mutable=True), y], x * 2 + y[::-1], mode=C)
    (loop,) = [
        t
        for n, t in zip(f.fn.nodes, f.fn.thunks)
        if getattr(n.op, "destroy_map", None) and isinstance(t, ElemwiseThunk)
    ]
    assert loop is not None and f._caller is not None  # the in-place C loop, compiled call
    return f


def test_a_mutable_argument_aliasing_another_is_copied_before_the_in_place_loop() -> None:
    f = _mutable_function()
    v = np.arange(6.0)
    np.testing.assert_array_equal(f(v, v), [5, 6, 7, 8, 9, 10])
    np.testing.assert_array_equal(v, np.arange(6.0))  # the copy was overwritten
    w = np.arange(12.0)
    a, b = w[:6], w[3:9]
    np.testing.assert_array_equal(f(a, b), np.arange(6.0) * 2 + np.arange(3.0, 9.0)[::-1])
    np.testing.assert_array_equal(f(x=v, y=v), [5, 6, 7, 8, 9, 10])  # the Python path
    f.trust_input = True
    np.testing.assert_array_equal(f(v, v), [5, 6, 7, 8, 9, 10])


def test_an_unaliased_mutable_argument_is_still_overwritten_in_place() -> None:
    f = _mutable_function()
    v, y = np.arange(6.0), np.ones(6)
    out = f(v, y)
    np.testing.assert_array_equal(out, np.arange(6.0) * 2 + 1)
    np.testing.assert_array_equal(v, out)


def test_a_mutable_argument_aliasing_a_shared_value_leaves_it_intact() -> None:
    s = shared(np.arange(6.0), name="s")
    x = T.dvector("x")
    f = function([In(x, mutable=True)], x * 2 + s[::-1], mode=C)
    np.testing.assert_array_equal(f(s.get_value(borrow=True)), [5, 6, 7, 8, 9, 10])
    np.testing.assert_array_equal(s.get_value(), np.arange(6.0))


# ---------------------------------------------------------------------- concurrent updates

CONCURRENT_UPDATES = """
sys.setswitchinterval(1e-6)
x = T.dscalar("x")
a, b, c = shared(0.0, name="a"), shared(0.0, name="b"), shared(0.0, name="c")
f = opgraph.function([x], x, updates=[(a, a + 1)], mode=MODE)
g = opgraph.function([x], x, updates=[(b, b + 2), (a, a + 1)], mode=MODE)
h = opgraph.function([x], x, updates=[(c, c + b * 0 + 1), (b, b + 1), (a, a + 1)], mode=MODE)
k = opgraph.function([], a + b + c, mode=MODE)
fns = [f, g, h, f.copy(), g.copy(), h.copy()]
assert all((fn._fast is None) == PROFILED for fn in (f, g, h))  # copies: compiled
N = 1500

def worker(fn):
    for _ in range(N):
        fn(1.0)

def reader():
    for _ in range(N):
        k()

threads = [threading.Thread(target=worker, args=(fn,)) for fn in fns]
threads.append(threading.Thread(target=reader))
for t in threads:
    t.start()
for t in threads:
    t.join(60)
assert not any(t.is_alive() for t in threads), "deadlock"
f.fn(n_calls=10)  # the VM's own loop holds the lock too
want = (6 * N + 10, 6 * N, 2 * N)
got = (a.get_value(), b.get_value(), c.get_value())
assert got == want, f"lost updates: got {got}, want {want}"
print("ok")
"""


@pytest.mark.parametrize("profiled", [False, True], ids=["compiled", "python-path"])
def test_updates_of_shared_variables_are_atomic_across_functions_and_copies(
    run_python: Run, c_cache_dir: Path, profiled: bool
) -> None:
    body = f"PROFILED = {profiled}\n" + CONCURRENT_UPDATES
    if profiled:
        body = body.replace("mode=MODE)", "mode=MODE, profile=True)")
    assert "ok" in run_script(run_python, c_cache_dir, body)
