# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The precompiled driver of generated reduction kernels (Sum, Prod, max/min CAReduce).

A generated module (see :mod:`opgraph_c.kernels.reduction`) holds one C function, compiled
for one scalar op and one set of dtypes, that reduces a 2-D ``(K kept, R reduced)`` view
with byte strides: blocked pairwise trees over multi-accumulator leaves along a reduced
axis, or a vector of accumulators over adjacent kept elements, with OpenMP when asked. It
exports it as an ``opg_reduce_kernel`` table in the ``REDUCE_KERNEL`` capsule.

:class:`ReduceThunk` does the rest, per call, in C: reads the input cell, drops length-1
dimensions, flips reduced dimensions with negative strides, orders the reduced dimensions
by stride and merges the ones that are adjacent in memory, allocates the output, then
calls the kernel once (the view is 2-D), once per outer kept index (several kept
dimensions that do not merge), or on a C-ordered copy (reduced dimensions that do not
merge). Empty inputs, and values that are not an aligned native array of the node's dtype
and ndim, take the Op's ``perform`` (same results and same errors).

Threads are used from ``c__openmp_threshold`` elements on, while they are faster than one
thread (:mod:`opgraph_c._threads` decides). The result does not depend on the number of
threads.
"""

cimport numpy as cnp
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid

from opgraph_c._threads cimport Team, monotonic, team_init, team_size, team_timed
from opgraph_c._vm cimport CThunk
from opgraph_c.abi cimport OPG_REDUCE_ABI, opg_reduce_fn, opg_reduce_kernel

import numpy as np

cnp.import_array()


cdef enum:
    MAX_DIMS = 32
    # Release the GIL only for inputs at least this large (releasing costs ~100 ns).
    NOGIL_SIZE = 4096


cdef int _collapse(Py_ssize_t* shape, Py_ssize_t* strides, int n) noexcept nogil:
    """Merge neighbouring dimensions that are adjacent in memory; the new count."""
    cdef int m = 0, i
    for i in range(n):
        if m > 0 and strides[m - 1] == strides[i] * shape[i]:
            shape[m - 1] *= shape[i]
            strides[m - 1] = strides[i]
        else:
            shape[m] = shape[i]
            strides[m] = strides[i]
            m += 1
    return m


cdef class ReduceThunk(CThunk):
    """Runs one reduction node with a generated kernel.

    Parameters
    ----------
    module
        The generated module (kept alive while the thunk is).
    capsule
        Its ``REDUCE_KERNEL`` capsule.
    node
        The Apply node (its Op's ``perform`` handles empty and unexpected inputs).
    in_cells, out_cells
        The node's storage cells (one input, one output).
    axes
        The reduced axes of the input.
    threshold, nthreads, adaptive
        The thread team (:mod:`opgraph_c._threads`): up to ``nthreads`` OpenMP threads
        from ``threshold`` input elements on (when the module was built with OpenMP); if
        ``adaptive``, only while recent calls found threads faster than one thread.
    """

    cdef object module
    cdef opg_reduce_kernel* k
    cdef public object node
    cdef object perform
    cdef list in_cells, out_cells
    cdef object in_dtype
    cdef int ndim, typenum, out_typenum
    cdef Py_ssize_t itemsize, out_itemsize
    cdef unsigned char reduced[MAX_DIMS]
    cdef Team team
    cdef int used_nt  # the threads the last _reduce ran on

    def __init__(self, module, capsule, node, list in_cells, list out_cells, axes,
                 Py_ssize_t threshold, int nthreads, bint adaptive=False):
        if not PyCapsule_IsValid(capsule, b"opgraph_c.reduce"):
            raise TypeError(f"{module!r} has no valid REDUCE_KERNEL capsule")
        self.k = <opg_reduce_kernel*>PyCapsule_GetPointer(capsule, b"opgraph_c.reduce")
        if self.k.abi != OPG_REDUCE_ABI:
            raise TypeError(
                f"{module!r} was built for reduction kernel ABI {self.k.abi}, this driver "
                f"expects {OPG_REDUCE_ABI}"
            )
        if len(in_cells) != 1 or len(out_cells) != 1:
            raise ValueError(f"{node} is not a one-input, one-output reduction")
        x_type = node.inputs[0].type
        ndim = x_type.ndim
        if ndim > MAX_DIMS:
            raise ValueError(f"{node} has too many dimensions for the C driver ({ndim})")
        self.module = module
        self.node = node
        self.perform = node.op.perform
        self.in_cells, self.out_cells = in_cells, out_cells
        self.inputs, self.outputs = in_cells, out_cells
        self.lazy = False
        self.in_dtype = np.dtype(x_type.dtype)
        out_dtype = np.dtype(node.outputs[0].type.dtype)
        self.ndim = ndim
        self.typenum, self.itemsize = self.in_dtype.num, self.in_dtype.itemsize
        self.out_typenum, self.out_itemsize = out_dtype.num, out_dtype.itemsize
        for d in range(ndim):
            self.reduced[d] = d in axes
        team_init(&self.team, nthreads if self.k.openmp else 1, threshold, adaptive)

    cdef int run(self) except -1:
        cdef object value = (<list>self.in_cells[0])[0]
        cdef cnp.ndarray x
        if cnp.PyArray_Check(value):
            x = <cnp.ndarray>value
            if (cnp.PyArray_TYPE(x) == self.typenum and cnp.PyArray_ISALIGNED(x)
                    and cnp.PyArray_ISNOTSWAPPED(x) and cnp.PyArray_NDIM(x) == self.ndim
                    and cnp.PyArray_SIZE(x) > 0):
                (<list>self.out_cells[0])[0] = self._timed_reduce(x)
                return 0
        # Empty (the identity, or perform's error), or a value perform must convert/reject.
        self.perform(self.node, [value], self.out_cells)
        return 0

    cdef cnp.ndarray _timed_reduce(self, cnp.ndarray x):
        """``_reduce`` on the team's choice of threads, timed for the team (when it has a
        choice to make)."""
        cdef Py_ssize_t size = cnp.PyArray_SIZE(x)
        cdef int nt = team_size(&self.team, size)
        if self.team.nthreads <= 1 or size < self.team.threshold:
            return self._reduce(x, nt)
        cdef double start = monotonic()
        out = self._reduce(x, nt)
        team_timed(&self.team, self.used_nt, monotonic() - start, size)
        return out

    cdef cnp.ndarray _reduce(self, cnp.ndarray x, int nt):
        """The reduction of ``x`` (non-empty, the node's dtype and rank), the kernel on
        ``nt`` threads (``used_nt`` says how many it used)."""
        cdef int nd = self.ndim, d, i, j, nk = 0, nr = 0, no = 0
        self.used_nt = nt
        cdef Py_ssize_t kshape[MAX_DIMS]
        cdef Py_ssize_t kstride[MAX_DIMS]
        cdef Py_ssize_t rshape[MAX_DIMS]
        cdef Py_ssize_t rstride[MAX_DIMS]
        cdef cnp.npy_intp oshape[MAX_DIMS]
        cdef Py_ssize_t idx[MAX_DIMS]
        cdef Py_ssize_t n, s, K, R, sk, sr, outer, size = cnp.PyArray_SIZE(x)
        cdef char* base = cnp.PyArray_BYTES(x)
        cdef char* out_ptr
        cdef const char* xp
        cdef cnp.ndarray out
        cdef opg_reduce_fn fn = self.k.reduce
        for d in range(nd):
            n = cnp.PyArray_DIM(x, d)
            s = cnp.PyArray_STRIDE(x, d)
            if self.reduced[d]:
                if n == 1:
                    continue
                if s < 0:  # the order of a reduction is free: walk it forwards
                    base += (n - 1) * s
                    s = -s
                # insertion by decreasing stride (stable), so adjacent dimensions merge
                i = nr
                while i > 0 and rstride[i - 1] < s:
                    rshape[i] = rshape[i - 1]
                    rstride[i] = rstride[i - 1]
                    i -= 1
                rshape[i] = n
                rstride[i] = s
                nr += 1
            else:
                oshape[no] = n
                no += 1
                if n != 1:
                    kshape[nk] = n
                    kstride[nk] = s
                    nk += 1
        nk = _collapse(kshape, kstride, nk)
        nr = _collapse(rshape, rstride, nr)
        out = cnp.PyArray_EMPTY(no, oshape, self.out_typenum, 0)
        out_ptr = cnp.PyArray_BYTES(out)
        if nr > 1:
            return self._reduce_copy(x, out, nt)
        R = rshape[0] if nr else 1
        sr = rstride[0] if nr else self.itemsize
        if nk <= 1:
            K = kshape[0] if nk else 1
            sk = kstride[0] if nk else 0
            if size >= NOGIL_SIZE:
                with nogil:
                    fn(base, out_ptr, K, R, sk, sr, nt)
            else:
                fn(base, out_ptr, K, R, sk, sr, nt)
            return out
        # Several kept dimensions that do not merge: one call per outer kept index.
        K, sk = kshape[nk - 1], kstride[nk - 1]
        if K * R < self.team.threshold:  # each call is small: one thread each
            nt = 1
            self.used_nt = 1
        outer = size // (K * R)
        for d in range(nk - 1):
            idx[d] = 0
        with nogil:
            xp = base
            for j in range(outer):
                fn(xp, out_ptr, K, R, sk, sr, nt)
                out_ptr += K * self.out_itemsize
                d = nk - 2
                while d >= 0:
                    idx[d] += 1
                    xp += kstride[d]
                    if idx[d] < kshape[d]:
                        break
                    xp -= kstride[d] * kshape[d]
                    idx[d] = 0
                    d -= 1
        return out

    cdef cnp.ndarray _reduce_copy(self, cnp.ndarray x, cnp.ndarray out, int nt):
        """Reduced dimensions that do not merge: reduce a C-ordered (kept, reduced) copy."""
        cdef Py_ssize_t size = cnp.PyArray_SIZE(x)
        cdef Py_ssize_t K = cnp.PyArray_SIZE(out), R = size // K
        kept = [a for a in range(self.ndim) if not self.reduced[a]]
        axes = [a for a in range(self.ndim) if self.reduced[a]]
        cdef cnp.ndarray xc = np.ascontiguousarray(x.transpose(kept + axes))
        cdef const char* xp = cnp.PyArray_BYTES(xc)
        cdef char* out_ptr = cnp.PyArray_BYTES(out)
        with nogil:
            self.k.reduce(xp, out_ptr, K, R, R * self.itemsize, self.itemsize, nt)
        return out
