# cython: language_level=3
"""C-level interface of the buffer pool (:mod:`opgraph_c._pool`) for the kernel drivers."""

cimport numpy as cnp


cdef enum:
    # Outputs of at least this many bytes go through the pool (the size from which NumPy's
    # own allocator asks for huge pages). Below it, malloc is cheap: glibc reuses its
    # arenas, and only buffers over its mmap threshold come back as fresh, faulting pages.
    POOL_MIN_BYTES = 4194304


cdef cnp.ndarray pooled_empty(int nd, cnp.npy_intp* shape, int typenum)
