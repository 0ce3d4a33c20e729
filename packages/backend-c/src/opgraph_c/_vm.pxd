# cython: language_level=3
"""C-level interface of the precompiled VM: the base class of thunks the VM calls directly."""


cdef class CThunk:
    """A node's thunk with a C entry point: the VM calls ``run`` without a Python frame."""

    cdef public object inputs
    cdef public object outputs
    cdef public object kernel
    cdef public bint lazy

    cdef int run(self) except -1
