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
    double t_many  # the same on nthreads threads (the latest probe; 0: not timed)
    Py_ssize_t calls  # calls timed
    bint many  # threads are the mode in use
    Py_ssize_t probe_every  # on threads: calls between probes of one thread
    Py_ssize_t next_probe  # no probe before this call
    int probing  # calls left in the probe in flight (0: none)
    double seconds  # the kernel's time in its timed calls
    double backoff  # seconds (of the kernel's time) from leaving threads to probing them
    Py_ssize_t backoff_calls  # and calls
    double next_threads_probe  # on one thread: no probe of threads before this
    double excess  # seconds the current stay on threads took beyond one thread
    double running  # the same since the stay began, gains counted up to CREDIT


cdef void team_init(Team* team, int nthreads, Py_ssize_t threshold, bint adaptive) noexcept
cdef int team_size(Team* team, Py_ssize_t size) noexcept nogil
cdef void team_timed(Team* team, int threads, double seconds, Py_ssize_t size) noexcept nogil
cdef double monotonic() noexcept nogil
cdef int blas_threads(int n) noexcept nogil
cdef bint have_blas_threads() noexcept nogil
