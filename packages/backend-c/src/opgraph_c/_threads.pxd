# cython: language_level=3
"""C-level interface of the thread policy (:mod:`opgraph_c._threads`): how many threads a
threaded kernel (elementwise loops, reductions, the native gemv) runs on, decided here
only."""


cdef struct Team:
    # The threads of one kernel's thunk (team_init sets every field).
    int nthreads  # at most this many; 1: always one
    double busy_load  # one thread while the 1-minute load average is this or more
    Py_ssize_t threshold  # one thread for fewer elements than this
    bint adaptive  # time threaded calls against one thread and back off (team_timed)
    int one_calls  # calls timed on one thread
    double one  # the fastest of them, seconds per element
    int slow  # threaded calls slower than that, in a row


cdef void team_init(Team* team, int nthreads, double busy_load, Py_ssize_t threshold,
                    bint adaptive) noexcept
cdef int team_size(Team* team, Py_ssize_t size) noexcept
cdef void team_timed(Team* team, int threads, double seconds, Py_ssize_t size) noexcept
cdef double monotonic() noexcept nogil
