# cython: language_level=3
"""C-level interface of the precompiled VM: the base class of thunks the VM calls directly."""


cdef class CThunk:
    """A node's thunk with a C entry point: the VM calls ``run`` without a Python frame."""

    cdef public object inputs
    cdef public object outputs
    cdef public object kernel
    cdef public bint lazy

    cdef int run(self) except -1


cdef class CRunner:
    """Base of the VM's runners (``CLoop``, ``CStack``): ``run_once`` runs the graph once;
    callers in C (the Caller, a Scan loop's thunk) call it through the vtable."""

    cdef int run_once(self) except -1


cdef class NodeThunk(CThunk):
    """Base of the precompiled thunks of one node that fall back on the Op's ``perform``:
    ``run`` calls ``fast``, and ``perform`` on the same values when it returns 1."""

    cdef public object node
    # How many calls ran the Op's perform (a value or an error the C path does not take).
    cdef public Py_ssize_t perform_calls
    cdef object perform_fn
    cdef list in_cells, out_cells

    cdef int fast(self) except -1

    cdef inline object arg(self, Py_ssize_t i):
        return (<list>self.in_cells[i])[0]

    cdef inline void set_out(self, Py_ssize_t j, object value):
        (<list>self.out_cells[j])[0] = value
