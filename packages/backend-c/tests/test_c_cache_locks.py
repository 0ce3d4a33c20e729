"""The compile cache's file locks: a process never waits on an entry already published,
never blocks while holding a lock, and builds a key itself when its holder dies.

A second process ("the holder") builds through a real :class:`KernelCache` whose C compiler
run of one module is made slow (it sleeps before linking), so it holds that key's lock, and
the locks of the rest of its batch, for as long as the test needs.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock, Timeout

import opgraph_c.cache as cache_mod
from opgraph_c import CModule
from opgraph_c.cache import BuildRequest, KernelCache

TINY = """\
# cython: language_level=3
TOKEN = "{token}"
def compute(x):
    return x + {value}
"""

#: The holder: builds the requests named on its command line (``key=token=value``) in one
#: batch; a module whose name contains "slow" prints "linking <name>" and then sleeps
#: instead of compiling, until the test kills the process; one whose name contains "late"
#: prints it and sleeps 3 s before compiling.
HOLDER = (
    f"TINY = {TINY!r}\n"
    + """
import sys, time
import opgraph_c.cache as cache_mod
from opgraph_c import CModule
from opgraph_c.cache import BuildRequest, KernelCache
real_link = cache_mod.link
def slow_link(toolchain, c_file, so, name, openmp):
    if "slow" in name:
        print("linking", name, flush=True)
        time.sleep(120)
    if "late" in name:
        print("linking", name, flush=True)
        time.sleep(3)
    return real_link(toolchain, c_file, so, name, openmp)
cache_mod.link = slow_link
cache = KernelCache(sys.argv[1])
requests = []
for arg in sys.argv[2:]:
    key, token, value = arg.split("=")
    spec = CModule(f"tiny kernel {token}", TINY.format(token=token, value=value))
    requests.append(BuildRequest(spec, key))
cache.ensure(requests)
print("done", flush=True)
"""
)


def tiny_request(cache: KernelCache, token: str, value: int) -> BuildRequest:
    """A request for a module whose ``compute(x)`` returns ``x + value``."""
    return cache.request(CModule(f"tiny kernel {token}", TINY.format(token=token, value=value)))


def start_holder(root: Path, requests: list[tuple[BuildRequest, str, int]]) -> subprocess.Popen:
    """The holder process building ``requests`` (request, token, value) in one batch; returns
    once it is in the compiler run of its first slow or late module (holding the batch's
    locks)."""
    args = [f"{req.key}={token}={value}" for req, token, value in requests]
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(root), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the holder links its slow module
    if not line.startswith("linking"):
        proc.kill()
        raise AssertionError(f"the holder did not start its build: {line!r} {proc.stderr.read()}")
    return proc


def lock_is_held(root: Path, key: str) -> bool:
    """Whether some process holds ``key``'s lock now."""
    lock = FileLock(str(root / "locks" / f"{key}.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return True
    lock.release()
    return False


def wait_until(condition: Callable[[], bool], seconds: float) -> bool:
    """Poll ``condition`` until it holds (True) or ``seconds`` have passed (False)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def ensure_in_thread(cache: KernelCache, requests: list[BuildRequest]) -> threading.Thread:
    """``cache.ensure(requests)`` in a thread (its error, if any, kept as ``thread.error``)."""

    def target() -> None:
        try:
            cache.ensure(requests)
        except BaseException as exc:  # reported by the test
            thread.error = exc  # type: ignore[attr-defined]

    thread = threading.Thread(target=target, daemon=True)
    thread.error = None  # type: ignore[attr-defined]
    thread.start()
    return thread


def test_no_waiting_on_an_entry_published_while_its_lock_is_held(tmp_path: Path) -> None:
    """The holder builds A and B in one batch, holding both locks until B is done. Another
    process needing A and C starts while A still compiles: it builds C meanwhile, then
    loads A once the holder publishes it, without waiting for B (whose build does not end
    before the test kills the holder)."""
    cache = KernelCache(tmp_path)
    a, b, c = (tiny_request(cache, t, v) for t, v in (("late-a", 1), ("slow-b", 2), ("c", 3)))
    holder = start_holder(tmp_path, [(a, "late-a", 1), (b, "slow-b", 2)])
    try:
        assert cache._valid_entry(a.key) is None and lock_is_held(tmp_path, a.key)
        other = KernelCache(tmp_path)  # another process's view: nothing loaded
        thread = ensure_in_thread(other, [a, c])
        thread.join(timeout=60)
        assert not thread.is_alive(), "waited for the holder's build of B"
        assert thread.error is None  # type: ignore[attr-defined]
        assert holder.poll() is None and lock_is_held(tmp_path, a.key)  # B still building
        assert other.builds == 1  # C; A is the holder's
        assert other.load_request(a).compute(1) == 2
        assert other.load_request(c).compute(1) == 4
    finally:
        holder.kill()
        holder.communicate()


def test_a_holder_killed_mid_build_leaves_its_key_to_the_waiter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The holder dies (SIGKILL) while it builds K, holding K's lock. A process needing K
    and C builds C first (holding only C's lock), waits for K's lock, then builds K
    itself."""
    monkeypatch.setattr(cache_mod, "WAIT_NOTICE_S", 0.0)
    cache = KernelCache(tmp_path)
    k, c = tiny_request(cache, "slow-k", 5), tiny_request(cache, "c2", 7)
    holder = start_holder(tmp_path, [(k, "slow-k", 5)])
    try:
        thread = ensure_in_thread(cache, [k, c])
        assert wait_until(lambda: cache._valid_entry(c.key) is not None, 60), "C not built"
        time.sleep(0.3)  # several polls of K's entry and lock
        assert thread.is_alive() and cache._valid_entry(k.key) is None  # waiting for K
        assert not lock_is_held(tmp_path, c.key)  # C's lock released once C was published
    finally:
        holder.kill()
        holder.communicate()
    thread.join(timeout=60)
    assert not thread.is_alive() and thread.error is None  # type: ignore[attr-defined]
    assert cache.builds == 2  # C, then K after its holder died
    assert cache.load_request(k).compute(1) == 6
    assert cache.load_request(c).compute(1) == 8
    assert "waiting for another process compiling tiny kernel slow-k" in capsys.readouterr().err
    assert KernelCache(tmp_path)._valid_entry(k.key) is not None


def test_an_entry_published_while_waiting_is_loaded_not_built(tmp_path: Path) -> None:
    """A key whose lock another process holds, and whose entry that process publishes while
    this one waits, is loaded as soon as it appears: not built, the lock never taken."""
    cache = KernelCache(tmp_path)
    d = tiny_request(cache, "d", 9)
    (tmp_path / "locks").mkdir(parents=True)
    lock = FileLock(str(tmp_path / "locks" / f"{d.key}.lock"))
    lock.acquire()  # stands for the other process (flock: another open file conflicts)
    try:
        waiter = KernelCache(tmp_path)
        thread = ensure_in_thread(waiter, [d])
        time.sleep(0.3)
        assert thread.is_alive()  # D is neither built nor free
        KernelCache(tmp_path)._build([d])  # the lock's holder builds and publishes D
        thread.join(timeout=10)
        assert not thread.is_alive() and thread.error is None  # type: ignore[attr-defined]
        assert waiter.builds == 0 and waiter.load_request(d).compute(1) == 10
    finally:
        lock.release()
