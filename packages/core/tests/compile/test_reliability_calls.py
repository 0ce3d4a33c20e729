"""The call path under fork, threads and aliased arguments (issue 20, py linker and core).

- A child forked after the parent computed (threaded BLAS products), or while another
  thread was inside a call (the function's lock, a shared variable's update lock held),
  can compile and call anything, also from a ``multiprocessing`` fork pool.
- An input the graph overwrites in place that shares memory with another argument (or a
  shared variable's value) is copied first: the result is the one without aliasing.
- Updates of one shared variable by several functions and their copies, called from
  threads, are atomic: exact totals, no deadlock between overlapping sets.

Whatever may hang runs in a fresh interpreter under a timeout, so a hang fails the test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.compile.io import In
from opgraph.compile.mode import Mode
from opgraph.compile.sharedvalue import shared, update_lock
from opgraph.graph.basic import Apply
from opgraph.graph.op import Op
from opgraph.tensor.basic import as_tensor_variable

PY = Mode(linker="py", optimizer="None")

# The prelude of the scripts run in a fresh interpreter; ``in_child(fn)``
# (opgraph.testing.fork) forks, runs ``fn`` in the child and fails on a hang.
PRELUDE = """
import os, sys, threading, time
import numpy as np
import opgraph
import opgraph.tensor as T
from opgraph.compile.mode import Mode
from opgraph.compile.sharedvalue import shared
from opgraph.testing.fork import in_child

MODE = Mode(linker=LINKER)
"""


def run_script(body: str, linker: str = "py", timeout: float = 90, env: dict | None = None) -> str:
    """Run ``PRELUDE + body`` in a fresh interpreter; fail on a non-zero exit or a hang."""
    code = f"LINKER = {linker!r}\n" + PRELUDE + textwrap.dedent(body)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **(env or {})},
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the script hung (over {timeout} s): {exc.stdout}{exc.stderr}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


# ---------------------------------------------------------------------- fork

FORK_AFTER_THREADS = """
x = T.dvector("x")
m = T.dmatrix("m")
f = opgraph.function([x, m], [T.exp(x) * 2 - x, T.dot(m, m).sum()], mode=MODE)
v, a = np.ones(600_000), np.ones((400, 400))
want = [np.exp(v) * 2 - v, 400.0**3]
for _ in range(3):
    f(v, a)
    np.dot(a, a)  # NumPy's BLAS ran its threads in this process too

def child():
    got = f(v, a)
    y = T.dvector("y")
    g = opgraph.function([y], T.sin(y) + y.sum(), mode=MODE)  # compiles in the child
    return np.allclose(got[0], want[0]) and got[1] == want[1] and np.isfinite(g(v)).all()

in_child(child)

import multiprocessing as mp
def work(k):
    return float(f(v * k, a)[0].sum())
with mp.get_context("fork").Pool(2) as pool:
    got = pool.map_async(work, range(4)).get(timeout=30)
assert np.allclose(got, [float((np.exp(v * k) * 2 - v * k).sum()) for k in range(4)])
print("ok")
"""


def test_a_forked_child_and_a_fork_pool_compile_and_call_after_the_parent_computed() -> None:
    assert "ok" in run_script(FORK_AFTER_THREADS)


FORK_DURING_CALL = """
from opgraph.compile.ops import as_op

inside, leave = threading.Event(), threading.Event()

@as_op(itypes=[T.dscalar], otypes=[T.dscalar])
def hold(x):
    # keeps the calling thread inside the call until the main thread has forked
    inside.set()
    leave.wait(10)
    return x

x = T.dscalar("x")
s = shared(0.0, name="s")
slow = opgraph.function([x], hold(x), updates=[(s, s + 1)], mode=MODE)
other = opgraph.function([x], x * 2, updates=[(s, s + x)], mode=MODE)
caller = threading.Thread(target=slow, args=(1.0,))
caller.start()
assert inside.wait(10)

def child():
    # slow's call lock and s's update lock were held by a thread the child does not have
    inside.clear()
    leave.set()
    ok = float(slow(2.0)) == 2.0 and float(other(3.0)) == 6.0
    return ok and s.get_value() == 4.0

in_child(child)
leave.set()
caller.join()
assert s.get_value() == 1.0 and float(other(1.0)) == 2.0 and s.get_value() == 2.0
print("ok")
"""


def test_a_child_forked_while_another_thread_calls_can_call_every_function() -> None:
    assert "ok" in run_script(FORK_DURING_CALL)


# ---------------------------------------------------------------------- aliased inputs


class LoopAddReversed(Op):
    """``x <- 2 x + y[::-1]`` written into ``x`` element by element (no overlap guard, as a
    C loop): aliased arguments give a wrong result unless the function copies one."""

    __props__ = ()
    destroy_map = {0: [0]}

    def make_node(self, x, y) -> Apply:  # type: ignore[no-untyped-def]
        x, y = as_tensor_variable(x), as_tensor_variable(y)
        return Apply(self, [x, y], [x.type()])

    def perform(self, node, inputs, output_storage) -> None:  # type: ignore[no-untyped-def]
        x, y = inputs
        n = len(x)
        for i in range(n):
            x[i] = 2 * x[i] + y[n - 1 - i]
        output_storage[0][0] = x


def _in_place_function() -> object:
    x, y = T.dvector("x"), T.dvector("y")
    return function([In(x, mutable=True), y], LoopAddReversed()(x, y), mode=PY, accept_inplace=True)


def test_an_overwritten_input_aliasing_another_argument_is_copied_first() -> None:
    f = _in_place_function()
    v = np.arange(6.0)
    np.testing.assert_array_equal(f(v, v), [5, 6, 7, 8, 9, 10])
    np.testing.assert_array_equal(v, np.arange(6.0))  # the copy was overwritten
    w = np.arange(12.0)
    np.testing.assert_array_equal(f(w[:6], w[3:9]), np.arange(6.0) * 2 + w[3:9][::-1])
    # keyword calls take the Python path and are checked as well
    np.testing.assert_array_equal(f(x=v, y=v), [5, 6, 7, 8, 9, 10])


def test_unaliased_mutable_inputs_are_still_overwritten_in_place() -> None:
    f = _in_place_function()
    v, y = np.arange(6.0), np.ones(6)
    out = f(v, y)
    np.testing.assert_array_equal(out, np.arange(6.0) * 2 + 1)
    np.testing.assert_array_equal(v, out)  # no copy was needed, none was made


def test_an_overwritten_input_aliasing_a_shared_value_leaves_the_shared_variable_intact() -> None:
    s = shared(np.arange(6.0), name="s")
    x = T.dvector("x")
    f = function([In(x, mutable=True)], LoopAddReversed()(x, s), mode=PY, accept_inplace=True)
    np.testing.assert_array_equal(f(s.get_value(borrow=True)), [5, 6, 7, 8, 9, 10])
    np.testing.assert_array_equal(s.get_value(), np.arange(6.0))


def test_functions_without_overwritten_inputs_check_nothing() -> None:
    x, y = T.dvector("x"), T.dvector("y")
    assert function([x, y], x + y, mode=PY)._unalias is None
    assert _in_place_function()._unalias is not None


# ---------------------------------------------------------------------- concurrent updates

CONCURRENT_UPDATES = """
sys.setswitchinterval(1e-6)  # switch threads as often as possible: races show quickly
x = T.dscalar("x")
a, b, c = shared(0.0, name="a"), shared(0.0, name="b"), shared(0.0, name="c")
# overlapping sets of updated variables, listed in different orders
f = opgraph.function([x], x, updates=[(a, a + 1)], mode=MODE)
g = opgraph.function([x], x, updates=[(b, b + 2), (a, a + 1)], mode=MODE)
h = opgraph.function([x], x, updates=[(c, c + b * 0 + 1), (b, b + 1), (a, a + 1)], mode=MODE)
k = opgraph.function([], a + b + c, mode=MODE)  # reads only
fns = [f, g, h, f.copy(), g.copy(), h.copy()]
N = CALLS

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
want = (6 * N, 6 * N, 2 * N)
got = (a.get_value(), b.get_value(), c.get_value())
assert got == want, f"lost updates: got {got}, want {want}"
print("ok")
"""


def test_updates_of_shared_variables_are_atomic_across_functions_and_copies() -> None:
    assert "ok" in run_script(CONCURRENT_UPDATES.replace("CALLS", "1500"), timeout=120)


TORN_READS = """
sys.setswitchinterval(1e-6)
w = shared(np.zeros(1_000_000), name="w")
spread = opgraph.function([], w.max() - w.min(), mode=MODE)  # compiled before the writer
assert spread() == 0.0
bump = opgraph.function([], [], updates=[(w, w + 1)], mode=MODE)
fg = bump.maker.fgraph
assert fg.destroyers(fg.inputs[0]), "the update is written in place"
stop = False

def writer():
    while not stop:
        bump()

t = threading.Thread(target=writer)
t.start()
seen = [spread() for _ in range(CALLS)]
stop = True
t.join(30)
assert not t.is_alive(), "deadlock"
assert max(seen) == 0.0, f"a reader saw half of an update: {max(seen)}"
assert w.get_value()[0] > 0
print("ok")
"""


@pytest.mark.parametrize("linker", ["py", "c"])
def test_readers_never_see_half_of_an_update_written_in_place(linker: str) -> None:
    # The reader takes w's update lock from its first call after the writer was compiled.
    assert "ok" in run_script(TORN_READS.replace("CALLS", "300"), linker=linker, timeout=120)


def test_functions_reading_variables_nobody_writes_in_place_take_no_lock() -> None:
    s = shared(np.zeros(3), name="s")
    reader = function([], s.sum(), mode=PY)
    assert reader._update_locks == []
    function([], [], updates=[(s, s + 1)], mode=PY)  # not in place: no rewrites in PY
    reader()
    assert reader._update_locks == []


def test_set_value_waits_for_a_call_updating_the_variable() -> None:
    s = shared(0.0, name="s")
    x = T.dscalar("x")
    f = function([x], x, updates=[(s, s + 1)], mode=PY)
    lock = update_lock(s.container)
    with lock:
        t = threading.Thread(target=s.set_value, args=(10.0,))
        t.start()
        t.join(0.2)
        assert t.is_alive()  # set_value waits for the lock's holder
    t.join(10)
    assert s.get_value() == 10.0
    f(0.0)
    assert s.get_value() == 11.0
    assert update_lock(s.clone().container) is lock  # one lock per container
