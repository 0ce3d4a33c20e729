# cython: language_level=3, cdivision=True
"""The thread policy of every threaded kernel: one place to read and to change.

A threaded kernel's thunk (:class:`opgraph_c._elemwise.ElemwiseThunk`,
:class:`opgraph_c._reduce.ReduceThunk`, the native gemv of :mod:`opgraph_c._blas`) keeps a
:c:type:`Team` and asks :c:func:`team_size` before each call how many threads to use:

- one below the team's ``threshold`` (elements), or when it has one thread
  (``config.openmp`` off, one usable CPU);
- one in a child forked from this process: GNU OpenMP's threads are not forked, and a
  parallel region would wait for them forever;
- one while the machine is busy, for the kernels whose :data:`POLICY` says so: the 1-minute
  load average (read at most once a second) at or above ``busy_load``, the machine's CPU
  count. A threaded region's threads join at its end, so one waiting for a CPU (a
  scheduler time slice, milliseconds) holds up all;
- for an ``adaptive`` team (the native gemv), one while threads did not pay lately: the
  team's first ``ONE_THREAD_CALLS`` calls run on one thread, to time it; after
  ``SLOW_CALLS`` threaded calls in a row slower (per element) than its fastest on one
  thread, or one ``STALLED`` times slower, every adaptive team runs on one thread for
  ``BACKOFF_MIN`` seconds, twice as long each time threads are still slow after that, up
  to ``BACKOFF_MAX`` (:c:func:`team_timed` records the calls). The load average misses
  this process's other threads (OpenBLAS's spin after each threaded call) and calls too
  rare to find their threads awake; the timing catches both.

Threaded kernels give the same result on any number of threads, so this decides speed
only. :data:`POLICY` says which rules each kernel follows, and :func:`team_options` gives
the arguments a kernel's thunk is made with.
"""

from libc.math cimport INFINITY
from libc.time cimport time, time_t
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

import os


cdef extern from "stdlib.h" nogil:
    int getloadavg(double* loadavg, int nelem)


cdef enum:
    ONE_THREAD_CALLS = 2
    SLOW_CALLS = 3
    STALLED = 20
cdef double BACKOFF_MIN = 0.01
cdef double BACKOFF_MAX = 5.0

cdef bint _forked = False  # in a child forked from this process: one thread, always
cdef double _backoff_until = 0.0  # CLOCK_MONOTONIC seconds: adaptive teams on one thread
cdef double _backoff = BACKOFF_MIN  # the next back-off's length
cdef Py_ssize_t _threaded_calls = 0, _backoffs = 0
cdef time_t _load_time = 0
cdef double _load = 0.0


def _after_fork_in_child():
    global _forked
    _forked = True


os.register_at_fork(after_in_child=_after_fork_in_child)


cdef double monotonic() noexcept nogil:
    """CLOCK_MONOTONIC, in seconds."""
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + 1e-9 * ts.tv_nsec


cdef double _load_average() noexcept:
    """The 1-minute load average, read at most once a second (0 when unknown)."""
    global _load_time, _load
    cdef time_t now = time(NULL)
    cdef double avg[1]
    if now != _load_time:
        _load_time = now
        _load = avg[0] if getloadavg(avg, 1) == 1 else 0.0
    return _load


cdef void team_init(Team* team, int nthreads, double busy_load, Py_ssize_t threshold,
                    bint adaptive) noexcept:
    """A team of at most ``nthreads`` threads (see the module's docstring)."""
    team.nthreads = nthreads if nthreads > 1 else 1
    team.busy_load = busy_load
    team.threshold = threshold
    team.adaptive = adaptive
    team.one_calls = 0
    team.one = INFINITY
    team.slow = 0


cdef int team_size(Team* team, Py_ssize_t size) noexcept:
    """How many threads ``team``'s kernel runs ``size`` elements on now (1 or
    ``team.nthreads``)."""
    if team.nthreads <= 1 or size < team.threshold:
        return 1
    if _forked or _load_average() >= team.busy_load:
        return 1
    if team.adaptive and (team.one_calls < ONE_THREAD_CALLS or monotonic() < _backoff_until):
        return 1
    return team.nthreads


cdef void team_timed(Team* team, int threads, double seconds, Py_ssize_t size) noexcept:
    """Record a call of ``size`` elements on ``threads`` threads that took ``seconds``;
    back off to one thread after SLOW_CALLS threaded calls in a row slower than one
    thread, or one STALLED times slower."""
    global _backoff_until, _backoff, _backoffs, _threaded_calls
    cdef double per = seconds / size if size > 0 else 0.0
    if threads > 1:
        _threaded_calls += 1
    if not team.adaptive:
        return
    if threads <= 1:
        team.one_calls += 1
        team.one = min(team.one, per)
        return
    if per < team.one:
        team.slow = 0
        _backoff = BACKOFF_MIN
        return
    team.slow += 1
    if team.slow >= SLOW_CALLS or per > STALLED * team.one:
        team.slow = 0
        _backoff_until = monotonic() + _backoff
        _backoff = min(2 * _backoff, BACKOFF_MAX)
        _backoffs += 1


def load_average() -> float:
    """The load average the policy last read (what decides whether threads are used)."""
    return _load_average()


def timed_stats() -> dict:
    """Counts of the calls recorded by ``team_timed``: ``threaded`` (on several threads)
    and ``backoffs`` (times the adaptive teams went back to one thread)."""
    return {"threaded": _threaded_calls, "backoffs": _backoffs}


def thread_limit() -> int:
    """The CPUs this process may run on (its affinity mask): the most threads a team has."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def busy_load() -> float:
    """The load average from which teams run on one thread: the machine's CPU count (its
    CPUs are all busy; a thread of a team would wait for one, and the others for it)."""
    return float(os.cpu_count() or 1)


#: How each threaded kernel uses threads, the policy to change (issue 19): per kernel,
#: (threads wait for a quiet machine: the load average below busy_load(); adaptive: timed
#: against one thread, with the back-off; c__openmp_threshold applies). The elementwise
#: loops use threads whatever the load, as they always did; the native gemv has its own
#: size limits (opgraph_c._blas._gemv_native).
POLICY = {
    "elemwise": (False, False, True),
    "reduce": (True, False, True),
    "gemv": (True, True, False),
}


def team_options(kernel: str) -> dict:
    """The team of a ``kernel`` thunk (a key of :data:`POLICY`) made now, as keyword
    arguments of its driver: ``nthreads`` (:func:`thread_limit`, 1 without
    ``config.openmp``), ``busy_load``, ``adaptive`` and ``threshold``."""
    from opgraph.configdefaults import config

    watch_load, adaptive, use_threshold = POLICY[kernel]
    openmp = bool(config.openmp) if "openmp" in config else False
    threshold = int(config.c__openmp_threshold) if "c__openmp_threshold" in config else 200_000
    return {
        "nthreads": thread_limit() if openmp else 1,
        "busy_load": busy_load() if watch_load else INFINITY,
        "adaptive": adaptive,
        "threshold": threshold if use_threshold else 0,
    }
