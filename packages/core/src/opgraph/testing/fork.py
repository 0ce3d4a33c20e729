"""Run a function in a forked child with a deadline: how tests show that a fork does not hang.

Used by the reliability tests' scripts (a fresh interpreter forks after threaded kernels or
while another thread holds a call lock); a plugin author can check their own kernels alike.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

__all__ = ["in_child"]


def in_child(fn: Callable[[], bool], timeout: float = 20.0) -> None:
    """Fork, run ``fn`` in the child and wait for it at most ``timeout`` seconds.

    The child exits 0 when ``fn()`` is true, 2 when false, 1 when it raised. A non-zero exit
    is an AssertionError naming the code; a child still running at the deadline is killed and
    ``SystemExit("HANG: ...")`` raised, so a hang fails the caller instead of stalling it.
    """
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if fn() else 2
        finally:
            os._exit(code)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            assert code == 0, f"the child failed (exit code {code})"
            return
        time.sleep(0.02)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise SystemExit("HANG: the forked child did not finish")
