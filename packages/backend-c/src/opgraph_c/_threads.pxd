# cython: language_level=3
"""C-level interface of the thread policy (:mod:`opgraph_c._threads`): how many threads a
threaded kernel (elementwise loops, reductions, the native gemv) runs on, decided here
only."""


cdef struct Team:
    # The threads of one kernel's thunk (team_init sets every field).
    int nthreads  # at most this many; 1: always one
    Py_ssize_t threshold  # one thread for fewer elements than this
    bint adaptive  # choose one thread or nthreads by the times of recent calls
    double t_one  # seconds per element on one thread (a moving average; 0: not timed)
    double t_many  # the same on nthreads threads
    Py_ssize_t calls  # calls timed
    Py_ssize_t probe_every  # calls between probes of the mode not in favour
    Py_ssize_t next_probe  # the call that probes next
    bint probing  # the call in flight is a probe
    int trial  # calls left in which a switch made by a probe counts as that probe failing


cdef void team_init(Team* team, int nthreads, Py_ssize_t threshold, bint adaptive) noexcept
cdef int team_size(Team* team, Py_ssize_t size) noexcept nogil
cdef void team_timed(Team* team, int threads, double seconds, Py_ssize_t size) noexcept nogil
cdef double monotonic() noexcept nogil
cdef int blas_threads(int n) noexcept nogil
cdef bint have_blas_threads() noexcept nogil
