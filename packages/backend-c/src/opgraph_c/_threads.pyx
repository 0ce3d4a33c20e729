# cython: language_level=3, cdivision=True
"""The thread policy of every threaded kernel: one place to read and to change.

A threaded kernel's thunk (:class:`opgraph_c._elemwise.ElemwiseThunk`,
:class:`opgraph_c._reduce.ReduceThunk`, the native gemv of :mod:`opgraph_c._blas`) keeps a
:c:type:`Team`, asks :c:func:`team_size` before each call how many threads to use, and
reports how long the call took with :c:func:`team_timed`. It runs on one thread:

- below the team's ``threshold`` (elements), or when the team has one thread
  (``config.openmp`` off, one usable CPU: :func:`thread_limit` counts the CPUs of the
  process's affinity mask, capped by its cgroup's CPU quota);
- in a child forked from this process: GNU OpenMP's threads are not forked, and a
  parallel region would wait for them forever;
- for an ``adaptive`` team (every kernel's, :data:`POLICY`), while one thread is faster.

**Adaptive teams measure instead of guessing.** A threaded region ends when its last
thread is done; on a busy machine (another process on a core, OpenBLAS's threads spinning
after a product, a cgroup quota) a thread that waits for a CPU holds up the region for a
scheduler time slice (about 4 ms here), and a 2-thread loop loses to one thread. No load
figure sees this in time (the load average lags by a minute). So each team times its calls
(seconds per element) and runs the mode that pays:

- **on one thread**, a probe runs ``PROBE_THREAD_CALLS`` calls on threads and times only
  the last: the first wakes OpenMP's threads, which sleep after a while without work, and
  a probe that paid that wake-up (10-15 µs here) lost for a 20 µs gemv on a quiet machine.
  The team moves to threads only when such a probe beats its one-thread average;
- **on threads**, the team keeps account of what the stay has gained: each threaded call
  adds its time beyond the one-thread estimate (negative while threads pay), gains counted
  up to ``CREDIT`` seconds. The team leaves threads when the account shows a loss of
  ``LEAVE_MARGIN`` (half a stall). One stall at the start of a stay, or threads slower
  than one thread for a few calls, does that; an occasional slow call among many fast ones
  does not. A probe of one thread every ``probe_every`` calls (``PROBE_MIN``, twice as
  rarely after each, down to one call in ``PROBE_MAX``) keeps the one-thread estimate
  current;
- **each stay on threads is judged as a whole when it ends**: ``excess`` sums what all its
  threaded calls (the probe's included) took beyond one thread. After a stay that paid (a
  quiet machine, with a stall now and then) the next probe of threads comes soon,
  ``BACKOFF_MIN`` seconds later; each stay that cost time doubles that wait, up to
  ``BACKOFF_MAX`` (and a wait in calls, from ``PROBE_MIN`` up to ``BACKOFF_CALLS_MAX``,
  so that a long kernel does not spend a large share of its calls on probes). The wait
  counts this kernel's own seconds: a stall costs about one time slice whatever the call's
  size, so a busy machine pays at most a few milliseconds per ``BACKOFF_MAX`` of the
  kernel's time (under 2%), and a machine that turns quiet is found again within
  ``BACKOFF_MAX`` of it.

This is what the rare stall needs. On a busy 2-core machine a 20 µs threaded gemv is
usually faster than one thread, but about one call in 30 waits 4 ms for its second thread:
on average threads cost several times one thread. Teams that judged each probe alone (and
left threads at the first slow call) took the fast probes as wins and went back to threads
every few dozen calls: the logistic-regression step averaged 175 µs against 88 µs for its
median call. On a quiet machine the same rule left threads at every slow call a virtual
machine's neighbours cause, and ran the gemv on one thread for a third of its calls.

**The first choice rests on two calls of each mode.** A team's first ``WARM_CALLS`` calls
alternate threads and one thread and keep the faster call of each mode. Its very first
call is cold (buffers touched for the first time, OpenMP's threads started) and often runs
while another library's idle threads still spin on the other core (NumPy's OpenBLAS spins
about 0.1 s after a product, PyTorch's OpenMP a few ms): timed alone, that one call made a
2-core W12 convolution (13 ms on threads, 24 ms on one) choose one thread until its first
probe, eight calls later, which is most of a short benchmark.

OpenMP's threads keep GNU OpenMP's default wait between regions: they spin a little before
they sleep. A passive wait (``OMP_WAIT_POLICY=PASSIVE``) was measured and not made the
default: on this kind of machine waking a sleeping thread costs ~10-15 µs per region, which
made the logistic-regression step (two gemv regions) 50 -> 78 µs and a 1M-element loop
0.66 -> 0.94 ms, while the case it helps (a threaded loop alternating with OpenBLAS's threaded
products) is already bounded by the adaptive teams, which move both to one thread. Set
``OMP_WAIT_POLICY=PASSIVE`` before importing opgraph on a shared server where idle spinning
is unwelcome; results do not change.

SciPy's OpenBLAS threads its products too, and on a busy machine loses to one thread the
same way. The BLAS thunks of :mod:`opgraph_c._blas` keep a team for it as well and set
OpenBLAS's thread count for each product (:c:func:`blas_threads`, through OpenBLAS's
``openblas_set_num_threads_local``, found by :func:`find_blas_threads`; without it OpenBLAS
keeps its own count). In SciPy's pthreads build of OpenBLAS that count is one for the whole
process, not per calling thread: call it outside OpenMP regions only (``_conv.pyx`` sets it
once before its parallel region and restores it after).

Threaded kernels give the same result on any number of threads, so this decides speed
only. :data:`POLICY` says which rules each kernel follows, and :func:`team_options` gives
the arguments a kernel's thunk is made with.
"""

from libc.math cimport ceil
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

import os


cdef enum:
    # On threads: a probe of one thread PROBE_MIN calls into a stay, then twice as rarely
    # after each, down to one call in PROBE_MAX.
    PROBE_MIN = 8
    PROBE_MAX = 1024
    # On one thread: a probe of threads runs this many calls and times the last, at least
    # PROBE_MIN calls after leaving threads, twice as many after each stay that cost time,
    # up to BACKOFF_CALLS_MAX (and BACKOFF_MIN to BACKOFF_MAX seconds: whichever is later).
    PROBE_THREAD_CALLS = 2
    BACKOFF_CALLS_MAX = 128
    # The first calls time each mode twice (threads, one, threads, one): the faster counts.
    WARM_CALLS = 4

# Weight of the newest call in the moving average of one thread's time.
cdef double ALPHA = 0.25
# Seconds of the kernel's own time between the end of a stay on threads and the next probe
# of threads: BACKOFF_MIN after a stay that paid, doubling up to BACKOFF_MAX after each one
# that did not (see the module's docstring).
cdef double BACKOFF_MIN = 4e-3
cdef double BACKOFF_MAX = 0.5
# A stay on threads ends when its calls have cost LEAVE_MARGIN seconds more than one thread
# would have (half a stall), counting at most CREDIT seconds of earlier gains.
cdef double LEAVE_MARGIN = 2e-3
cdef double CREDIT = 8e-3

cdef bint _forked = False  # in a child forked from this process: one thread, always
cdef Py_ssize_t _threaded_calls = 0, _switches = 0, _probes = 0


ctypedef int (*set_threads_fn)(int) noexcept nogil
# OpenBLAS's openblas_set_num_threads_local of the library scipy.linalg.cython_blas calls
cdef set_threads_fn _blas_set_local = NULL


cdef int blas_threads(int n) noexcept nogil:
    """Set the calling thread's OpenBLAS thread count to ``n``; the previous count, or -1
    (nothing set) when :func:`find_blas_threads` found no such control."""
    if _blas_set_local == NULL:
        return -1
    return _blas_set_local(n)


cdef bint have_blas_threads() noexcept nogil:
    """Whether :c:func:`blas_threads` sets anything."""
    return _blas_set_local != NULL


def find_blas_threads() -> str | None:
    """Find ``openblas_set_num_threads_local`` in the OpenBLAS that SciPy's BLAS wrappers
    call (the one loaded library named ``*openblas*`` outside NumPy's wheel folder, which
    holds NumPy's own); returns its path, or None (then OpenBLAS keeps its own threads)."""
    global _blas_set_local
    import ctypes

    try:
        with open("/proc/self/maps") as f:
            fields = [line.split(None, 5) for line in f]
        paths = {parts[5].strip() for parts in fields if len(parts) == 6}
    except OSError:
        return None
    found = sorted(
        p for p in paths
        if "openblas" in os.path.basename(p).lower() and "numpy.libs" not in p
    )
    if len(found) != 1:
        return None
    try:
        fn = ctypes.CDLL(found[0]).openblas_set_num_threads_local
    except (OSError, AttributeError):
        return None
    _blas_set_local = <set_threads_fn><size_t>ctypes.cast(fn, ctypes.c_void_p).value
    return found[0]


def _after_fork_in_child():
    global _forked
    _forked = True


os.register_at_fork(after_in_child=_after_fork_in_child)


cdef double monotonic() noexcept nogil:
    """CLOCK_MONOTONIC, in seconds."""
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + 1e-9 * ts.tv_nsec


cdef void team_init(Team* team, int nthreads, Py_ssize_t threshold, bint adaptive) noexcept:
    """A team of at most ``nthreads`` threads (see the module's docstring)."""
    team.nthreads = nthreads if nthreads > 1 else 1
    team.threshold = threshold
    team.adaptive = adaptive
    team.t_one = 0.0
    team.t_many = 0.0
    team.calls = 0
    team.many = True
    team.probe_every = PROBE_MIN
    team.next_probe = 0
    team.probing = 0
    team.seconds = 0.0
    team.backoff = BACKOFF_MIN
    team.backoff_calls = PROBE_MIN
    team.next_threads_probe = 0.0
    team.excess = 0.0
    team.running = 0.0


cdef int team_size(Team* team, Py_ssize_t size) noexcept nogil:
    """How many threads ``team``'s kernel runs ``size`` elements on now (1 or
    ``team.nthreads``)."""
    if team.nthreads <= 1 or size < team.threshold or _forked:
        return 1
    if not team.adaptive:
        return team.nthreads
    if team.t_many == 0.0:  # not timed yet: threads first, then one thread
        return team.nthreads
    if team.t_one == 0.0:
        return 1
    if team.calls < WARM_CALLS:  # each mode's second sample (see team_timed)
        return team.nthreads if team.calls % 2 == 0 else 1
    if team.probing > 0:  # the rest of a probe of threads
        return 1 if team.many else team.nthreads
    if team.calls < team.next_probe:
        return team.nthreads if team.many else 1
    if team.many:
        team.probing = 1
        return 1
    if team.seconds < team.next_threads_probe:
        return 1
    team.probing = PROBE_THREAD_CALLS
    team.excess = 0.0  # the stay's account starts with the probe (running: with its win)
    return team.nthreads


cdef inline void _leave_threads(Team* team) noexcept nogil:
    """Move to one thread, and time the next probe of threads by how the stay went."""
    global _switches
    if team.many:
        _switches += 1
    team.many = False
    if team.excess > 0.0:
        team.backoff = min(2.0 * team.backoff, BACKOFF_MAX)
        team.backoff_calls = min(2 * team.backoff_calls, <Py_ssize_t>BACKOFF_CALLS_MAX)
    else:
        team.backoff = BACKOFF_MIN
        team.backoff_calls = PROBE_MIN
    team.next_threads_probe = team.seconds + team.backoff
    team.next_probe = team.calls + team.backoff_calls


cdef void team_timed(Team* team, int threads, double seconds, Py_ssize_t size) noexcept nogil:
    """Record a call of ``size`` elements on ``threads`` threads that took ``seconds``
    (the team's choice of mode follows these times: see the module's docstring)."""
    global _threaded_calls, _switches, _probes
    if threads > 1:
        _threaded_calls += 1
    if not team.adaptive or size <= 0 or team.nthreads <= 1:
        return
    cdef double per = seconds / size, beyond
    team.seconds += seconds
    team.calls += 1
    if team.calls <= WARM_CALLS:  # the faster of a mode's first calls (the first is cold)
        if threads > 1:
            team.t_many = per if team.t_many == 0.0 else min(team.t_many, per)
        else:
            team.t_one = per if team.t_one == 0.0 else min(team.t_one, per)
        if team.calls == WARM_CALLS:  # the first choice
            team.many = team.t_many < team.t_one
            team.next_probe = team.calls + PROBE_MIN
            team.next_threads_probe = team.seconds + team.backoff
        return
    if threads > 1:
        beyond = seconds - team.t_one * size
        team.excess += beyond
        team.running = max(team.running + beyond, -CREDIT)
    if team.probing > 0:
        team.probing -= 1
        if team.probing > 0:  # the probe's first call woke the threads: not timed
            return
        _probes += 1
        if threads > 1:
            team.t_many = per
            if team.t_many < team.t_one:  # threads won: a stay on them begins
                _switches += 1
                team.many = True
                team.running = 0.0
                team.probe_every = PROBE_MIN
                team.next_probe = team.calls + PROBE_MIN
            else:
                _leave_threads(team)
        else:  # one thread's time refreshed: the stay's accounts follow it
            team.t_one = per
            team.probe_every = min(2 * team.probe_every, <Py_ssize_t>PROBE_MAX)
            team.next_probe = team.calls + team.probe_every
        return
    if threads > 1:
        if team.running > LEAVE_MARGIN:
            _leave_threads(team)
    else:
        team.t_one += ALPHA * (per - team.t_one)


cdef class TeamModel:
    """A :c:type:`Team` driven from Python: what a kernel's team decides for given call
    times (tests and diagnostics; kernels use the C functions directly).

    ``TeamModel(nthreads, threshold=0, adaptive=True)``; :meth:`size` is ``team_size``,
    :meth:`timed` is ``team_timed``.
    """

    cdef Team team

    def __init__(self, int nthreads, Py_ssize_t threshold=0, bint adaptive=True):
        team_init(&self.team, nthreads, threshold, adaptive)

    def size(self, Py_ssize_t size) -> int:
        """The threads the next call of ``size`` elements runs on."""
        return team_size(&self.team, size)

    def timed(self, int threads, double seconds, Py_ssize_t size) -> None:
        """Record that call: ``threads`` threads, ``seconds`` long."""
        team_timed(&self.team, threads, seconds, size)

    @property
    def probe_every(self) -> int:
        """Calls between probes of one thread while on threads."""
        return self.team.probe_every

    @property
    def backoff(self) -> float:
        """Seconds of the kernel's time between a stay on threads and the next probe of
        threads."""
        return self.team.backoff


def timed_stats() -> dict:
    """Counts over this process's adaptive teams: ``threaded`` (calls on several threads),
    ``probes`` (calls that timed the mode not in use) and ``switches`` (times a team
    changed between one thread and its threads)."""
    return {"threaded": _threaded_calls, "probes": _probes, "switches": _switches}


def _cgroup_cpus() -> float | None:
    """The CPUs this process's cgroup may use in a scheduling period (its quota over its
    period), or None without a quota (cgroup v2 ``cpu.max``, else v1 ``cpu.cfs_*``)."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: "0::/path"
            try:
                with open(f"/sys/fs/cgroup{path}/cpu.max") as f:
                    quota, period = f.read().split()
            except (OSError, ValueError):
                continue
            return None if quota == "max" else int(quota) / int(period)
        if "cpu" in controllers.split(","):
            base = f"/sys/fs/cgroup/{controllers}{path}"
            for root in (base, "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"):
                try:
                    with open(f"{root}/cpu.cfs_quota_us") as f:
                        quota = int(f.read())
                    with open(f"{root}/cpu.cfs_period_us") as f:
                        period = int(f.read())
                except (OSError, ValueError):
                    continue
                return None if quota <= 0 else quota / period
    return None


def thread_limit() -> int:
    """The CPUs this process may run on: its affinity mask, capped by its cgroup's CPU
    quota (rounded up); the most threads a team has."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = _cgroup_cpus()
    if quota is not None and quota > 0:
        cpus = min(cpus, max(1, <int>ceil(quota)))
    return max(cpus, 1)


#: How each threaded kernel uses threads, the policy to change (issue 19): per kernel,
#: (adaptive: timed against one thread, see the module's docstring; c__openmp_threshold
#: applies). The native gemv has its own size limits (opgraph_c._blas._gemv_native), the
#: correlation kernels theirs in multiply-adds (opgraph_c._conv); pooling planes count
#: elements like an elementwise loop, batch-norm channels like a reduction.
POLICY = {
    "elemwise": (True, True),
    "reduce": (True, True),
    "gemv": (True, False),
    "conv": (True, False),
    "pool": (True, True),
    "bn": (True, True),
}


def team_options(kernel: str) -> dict:
    """The team of a ``kernel`` thunk (a key of :data:`POLICY`) made now, as keyword
    arguments of its driver: ``nthreads`` (:func:`thread_limit`, 1 without
    ``config.openmp``), ``adaptive`` and ``threshold``."""
    from opgraph.configdefaults import config

    adaptive, use_threshold = POLICY[kernel]
    openmp = bool(config.openmp) if "openmp" in config else False
    threshold = int(config.c__openmp_threshold) if "c__openmp_threshold" in config else 200_000
    return {
        "nthreads": thread_limit() if openmp else 1,
        "adaptive": adaptive,
        "threshold": threshold if use_threshold else 0,
    }
