# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# distutils: extra_compile_args = -fopenmp
# distutils: extra_link_args = -fopenmp
"""The precompiled driver of generated elementwise kernels.

A generated module (see :mod:`opgraph_c.codegen.elemwise`) holds only the loops, compiled
for one scalar function and one set of dtypes: ``contig`` (contiguous operands, scalars
hoisted; the loop gcc vectorises), ``strided`` (one dimension, any byte steps, 0 for a
broadcast operand; steps that fit a vectorised loop, e.g. a bias constant along the run and
the other operands contiguous, go to that loop) and, when built with OpenMP, ``parallel``
(the contiguous loop split over threads). It exports them as an ``opg_elemwise_kernel``
table in a capsule.

:class:`ElemwiseThunk` does the rest, per call, in C: reads the input cells, checks shapes
with Elemwise's broadcasting rules (same error text as ``Elemwise.perform``), allocates the
outputs (or reuses the destroyed input for an in-place output, or the array the output's
cell kept from the last call where the VM allows it: ``set_output_reuse``; outputs of
``POOL_MIN_BYTES`` or more come from the buffer pool, :mod:`opgraph_c._pool`), then calls the
contiguous loop over the whole array when every operand is C-contiguous, else collapses
dimensions (adjacent ones merge where every operand's steps allow it, a broadcast operand's
0 included: NCHW activations plus a per-channel bias become N*C runs of H*W) and walks the
outer ones, calling the contiguous or strided loop for each run. From the team's threshold
on (:mod:`opgraph_c._threads`, modules built with OpenMP) the runs, or pieces of long runs,
are shared among threads: :c:func:`_walk_parallel`.

A loop bound by memory (arithmetic, no vector math function) writes contiguous outputs of
16 MiB or more with streaming stores (:c:func:`_contig_streamed`): each tile of 1024
elements is computed into a cache-resident buffer and streamed out, so the output's lines
are not read from memory before being overwritten (``a + a**10`` on 10M float64: 6.3 ms
to 3.5 ms on two threads). The values are those of the plain loop, bit for bit.
"""

cimport numpy as cnp
from cython.parallel cimport prange
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid
from cpython.ref cimport PyObject

from opgraph_c._pool cimport POOL_MIN_BYTES, pooled_empty
from opgraph_c._threads cimport Team, monotonic, team_init, team_size, team_timed
from opgraph_c._vm cimport CThunk
from opgraph_c.abi cimport OPG_ELEMWISE_ABI, opg_elemwise_kernel

import numpy as np

from opgraph.tensor.elemwise import broadcast_error

cnp.import_array()


cdef extern from *:
    Py_ssize_t _opg_refcnt "Py_REFCNT"(PyObject* o)
    PyObject* _opg_item "PyList_GET_ITEM"(object cell, Py_ssize_t i)


cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #if defined(__x86_64__) && defined(__SSE2__)
    #include <emmintrin.h>
    #define OPG_CAN_STREAM 1
    /* n bytes from src to dst with non-temporal (streaming) stores past dst's first
       16-byte boundary: the lines go to memory without being read first. */
    static void opg_stream_copy(char* dst, const char* src, size_t n) {
        size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
        if (head > n) head = n;
        memcpy(dst, src, head);
        dst += head; src += head; n -= head;
        for (; n >= 64; n -= 64, dst += 64, src += 64) {
            __m128i a = _mm_loadu_si128((const __m128i*)src);
            __m128i b = _mm_loadu_si128((const __m128i*)(src + 16));
            __m128i c = _mm_loadu_si128((const __m128i*)(src + 32));
            __m128i d = _mm_loadu_si128((const __m128i*)(src + 48));
            _mm_stream_si128((__m128i*)dst, a);
            _mm_stream_si128((__m128i*)(dst + 16), b);
            _mm_stream_si128((__m128i*)(dst + 32), c);
            _mm_stream_si128((__m128i*)(dst + 48), d);
        }
        memcpy(dst, src, n);
    }
    static void opg_stream_fence(void) { _mm_sfence(); }
    #else
    #define OPG_CAN_STREAM 0
    static void opg_stream_copy(char* dst, const char* src, size_t n) { memcpy(dst, src, n); }
    static void opg_stream_fence(void) {}
    #endif
    """
    bint OPG_CAN_STREAM
    void opg_stream_copy(char* dst, const char* src, size_t n) noexcept nogil
    void opg_stream_fence() noexcept nogil


cdef enum:
    MAX_OPERANDS = 32
    MAX_DIMS = 32
    # Release the GIL only for loops at least this long (releasing costs ~100 ns).
    NOGIL_SIZE = 4096
    # Outputs of at least this many bytes (each) are written with streaming stores.
    STREAM_MIN_BYTES = 16 * 1024 * 1024
    # Streamed loops compute this many elements at a time into a buffer on the stack.
    STREAM_TILE = 1024
    STREAM_MAX_OUT = 2


cdef bint _streaming = True


def streaming(enabled=None):
    """Whether big contiguous outputs are written with streaming stores (the default, where
    the CPU has them); ``streaming(False)`` turns it off for this process (to compare).
    Returns the setting before the call."""
    global _streaming
    before = bool(_streaming and OPG_CAN_STREAM)
    if enabled is not None:
        _streaming = bool(enabled)
    return before


cdef void _contig_streamed(opg_elemwise_kernel* k, Py_ssize_t start, Py_ssize_t stop,
                           char** ptrs, int nin, int nout, const Py_ssize_t* itemsize,
                           const unsigned char* hoisted) noexcept nogil:
    """The contiguous loop on ``[start, stop)`` a tile at a time: each tile is computed into
    a small buffer that stays in the L1 cache, then streamed to the outputs (non-temporal
    stores: a big output's lines are not read from memory before being overwritten, which
    otherwise costs a third of a streaming kernel's traffic). Tiles start at multiples of
    64 elements from ``start`` and the loop is the same ``contig``, so every element is
    computed as it would be in one call."""
    cdef double raw[STREAM_MAX_OUT * STREAM_TILE + 8]  # 8-byte items at most
    cdef char* buf = <char*>((<size_t>raw + 63) & ~(<size_t>63))  # cache-line aligned
    cdef char* tp[MAX_OPERANDS]
    cdef Py_ssize_t s = start, n
    cdef int j
    while s < stop:
        n = min(<Py_ssize_t>STREAM_TILE, stop - s)
        for j in range(nin):
            tp[j] = ptrs[j] if hoisted[j] else ptrs[j] + s * itemsize[j]
        for j in range(nout):
            tp[nin + j] = buf + j * STREAM_TILE * 8
        k.contig(0, n, tp)
        for j in range(nout):
            opg_stream_copy(ptrs[nin + j] + s * itemsize[nin + j], tp[nin + j],
                            <size_t>(n * itemsize[nin + j]))
        s += n
    opg_stream_fence()


cdef void _streamed_parallel(opg_elemwise_kernel* k, Py_ssize_t n, char** ptrs, int nin,
                             int nout, const Py_ssize_t* itemsize,
                             const unsigned char* hoisted, int nthreads) noexcept nogil:
    """:c:func:`_contig_streamed` over ``n`` elements on ``nthreads`` threads, in the
    chunks of the generated ``parallel`` loop (multiples of 64 elements, taken by threads
    as they come free)."""
    cdef Py_ssize_t chunk = _chunk_size(n, nthreads)
    cdef Py_ssize_t c
    for c in prange((n + chunk - 1) // chunk, num_threads=nthreads, schedule="dynamic"):
        _contig_streamed(k, c * chunk, min(n, (c + 1) * chunk), ptrs, nin, nout, itemsize,
                         hoisted)


cdef inline Py_ssize_t _chunk_size(Py_ssize_t n, int nthreads) noexcept nogil:
    """Elements per chunk of a parallel loop over ``n`` (the generated ``parallel`` loop's
    rule): at least 4096, about 16 chunks per thread, a multiple of 64 elements."""
    return max(4096, (n // (16 * nthreads) + 63) // 64 * 64)


cdef void _rows(opg_elemwise_kernel* k, int nops, int m, const Py_ssize_t* cshape,
                ptrdiff_t (*cstrides)[MAX_DIMS], char** base, bint inner_contig,
                Py_ssize_t r0, Py_ssize_t r1, Py_ssize_t start, Py_ssize_t stop) noexcept nogil:
    """Call the inner loop on elements ``[start, stop)`` of the last of ``m`` collapsed
    dimensions, for the outer indices ``r0 <= r < r1`` (the outer dimensions flattened in C
    order)."""
    cdef Py_ssize_t idx[MAX_DIMS]
    cdef char* cur[MAX_OPERANDS]
    cdef ptrdiff_t steps[MAX_OPERANDS]
    cdef Py_ssize_t n = stop - start, r = r0
    cdef int d, j
    for j in range(nops):
        steps[j] = cstrides[j][m - 1]
        cur[j] = base[j] + start * steps[j]
    for d in range(m - 2, -1, -1):  # r0 as an index of the outer dimensions
        idx[d] = r % cshape[d]
        r = r // cshape[d]
        for j in range(nops):
            cur[j] += idx[d] * cstrides[j][d]
    for r in range(r0, r1):
        if inner_contig:
            k.contig(0, n, cur)
        else:
            k.strided(n, cur, steps)
        d = m - 2
        while d >= 0:
            idx[d] += 1
            for j in range(nops):
                cur[j] += cstrides[j][d]
            if idx[d] < cshape[d]:
                break
            for j in range(nops):
                cur[j] -= cstrides[j][d] * cshape[d]
            idx[d] = 0
            d -= 1


cdef void _walk_parallel(opg_elemwise_kernel* k, int nops, int m, const Py_ssize_t* cshape,
                         ptrdiff_t (*cstrides)[MAX_DIMS], char** base, bint inner_contig,
                         Py_ssize_t nrows, int nthreads) noexcept nogil:
    """:c:func:`_rows` over every run on ``nthreads`` threads, in chunks that idle threads
    take as they come free (the policy of the generated ``parallel`` loop): at least 4096
    elements, about 16 per thread; whole runs when they are shorter than a chunk, else each
    run cut in pieces at multiples of 64 elements from its start, so every element is
    computed in the same vector lane as on one thread and the result does not depend on the
    thread count."""
    cdef Py_ssize_t inner = cshape[m - 1]
    cdef Py_ssize_t chunk = _chunk_size(nrows * inner, nthreads)
    cdef Py_ssize_t pieces, per, it, r, p
    if inner > chunk:
        pieces = (inner + chunk - 1) // chunk
        for it in prange(nrows * pieces, num_threads=nthreads, schedule="dynamic"):
            r = it // pieces
            p = it % pieces
            _rows(k, nops, m, cshape, cstrides, base, inner_contig, r, r + 1, p * chunk,
                  min(inner, (p + 1) * chunk))
    else:
        per = chunk // inner
        for it in prange((nrows + per - 1) // per, num_threads=nthreads, schedule="dynamic"):
            _rows(k, nops, m, cshape, cstrides, base, inner_contig, it * per,
                  min(nrows, (it + 1) * per), 0, inner)


cdef bint _overlap(cnp.ndarray a, cnp.ndarray b):
    """True if the memory spans of ``a`` and ``b`` may intersect (bounds only; as in _vm)."""
    cdef char* lo[2]
    cdef char* hi[2]
    cdef cnp.ndarray x
    cdef int k, d
    cdef Py_ssize_t n, step
    if cnp.PyArray_SIZE(a) == 0 or cnp.PyArray_SIZE(b) == 0:
        return False
    for k in range(2):
        x = a if k == 0 else b
        lo[k] = hi[k] = cnp.PyArray_BYTES(x)
        for d in range(cnp.PyArray_NDIM(x)):
            n = cnp.PyArray_DIM(x, d)
            step = cnp.PyArray_STRIDE(x, d) * (n - 1)
            if step < 0:
                lo[k] += step
            else:
                hi[k] += step
        hi[k] += cnp.PyArray_ITEMSIZE(x)
    return lo[0] < hi[1] and lo[1] < hi[0]


cdef class ElemwiseThunk(CThunk):
    """Runs one Elemwise node with a generated kernel.

    Parameters
    ----------
    module
        The generated module (kept alive while the thunk is).
    capsule
        Its ``ELEMWISE_KERNEL`` capsule.
    node
        The Apply node (for messages).
    in_cells, out_cells
        The node's storage cells.
    in_dtypes, out_dtypes
        NumPy dtypes of the inputs and outputs.
    bcast
        Per input, its type's broadcastable pattern.
    hoisted
        Per input, whether the kernel reads it once per loop (every dimension broadcastable).
    inplace
        ``{output: input}`` whose buffer the output overwrites.
    threshold, nthreads, adaptive
        The thread team (:mod:`opgraph_c._threads`): the parallel loop on up to
        ``nthreads`` threads from ``threshold`` elements on; if ``adaptive``, only while
        recent calls found threads faster than one thread.
    stream
        The loop is bound by memory (no vector math function): contiguous outputs of
        ``STREAM_MIN_BYTES`` or more are written with streaming stores
        (:c:func:`_contig_streamed`).
    """

    cdef object module
    cdef opg_elemwise_kernel* k
    cdef public object node
    cdef int nin, nout, ndim
    cdef list in_cells, out_cells
    cdef tuple in_dtypes, out_dtypes
    cdef int in_typenum[MAX_OPERANDS]
    cdef int out_typenum[MAX_OPERANDS]
    cdef Py_ssize_t itemsize[MAX_OPERANDS]
    cdef int inplace[MAX_OPERANDS]
    cdef unsigned char reuse[MAX_OPERANDS]
    cdef unsigned char hoisted[MAX_OPERANDS]
    cdef unsigned char bcast[MAX_OPERANDS][MAX_DIMS]
    cdef Team team
    cdef readonly bint stream

    def __init__(self, module, capsule, node, list in_cells, list out_cells, in_dtypes,
                 out_dtypes, bcast, hoisted, dict inplace, Py_ssize_t threshold,
                 int nthreads, bint adaptive=False, bint stream=False):
        if not PyCapsule_IsValid(capsule, b"opgraph_c.elemwise"):
            raise TypeError(f"{module!r} has no valid ELEMWISE_KERNEL capsule")
        self.k = <opg_elemwise_kernel*>PyCapsule_GetPointer(capsule, b"opgraph_c.elemwise")
        nin, nout = len(in_cells), len(out_cells)
        if self.k.abi != OPG_ELEMWISE_ABI or self.k.nin != nin or self.k.nout != nout:
            raise TypeError(
                f"{module!r} was built for another kernel ABI or arity "
                f"(abi {self.k.abi}, {self.k.nin} -> {self.k.nout}); expected abi "
                f"{OPG_ELEMWISE_ABI}, {nin} -> {nout}"
            )
        ndim = len(bcast[0]) if nin else 0
        if nin + nout > MAX_OPERANDS or ndim > MAX_DIMS:
            raise ValueError(f"{node} has too many operands or dimensions for the C driver")
        self.module = module
        self.stream = stream
        self.node = node
        self.nin, self.nout, self.ndim = nin, nout, ndim
        self.in_cells, self.out_cells = in_cells, out_cells
        self.inputs, self.outputs = in_cells, out_cells
        self.lazy = False
        self.in_dtypes = tuple(np.dtype(d) for d in in_dtypes)
        self.out_dtypes = tuple(np.dtype(d) for d in out_dtypes)
        for i in range(nin):
            self.in_typenum[i] = self.in_dtypes[i].num
            self.itemsize[i] = self.in_dtypes[i].itemsize
            self.hoisted[i] = bool(hoisted[i])
            for d in range(ndim):
                self.bcast[i][d] = bool(bcast[i][d])
        for j in range(nout):
            self.out_typenum[j] = self.out_dtypes[j].num
            self.itemsize[nin + j] = self.out_dtypes[j].itemsize
            self.inplace[j] = inplace.get(j, -1)
            self.reuse[j] = 0
        team_init(&self.team, nthreads if self.k.parallel != NULL else 1, threshold, adaptive)

    def set_output_reuse(self, flags):
        """Per output, what the array kept in its cell from the last call may be used for.

        0: never reused (a fresh array each call); 1: overwritten when only the cell holds
        it (an intermediate); 2: overwritten even if held elsewhere (a borrowed output).
        Either way it must have the output's dtype and shape and overlap no input.
        """
        if len(flags) != self.nout:
            raise ValueError(f"{self.node} has {self.nout} output(s), got {len(flags)} flags")
        for j in range(self.nout):
            self.reuse[j] = <unsigned char>flags[j]

    @property
    def output_reuse(self):
        """The flags given to :meth:`set_output_reuse`, one per output."""
        return tuple(self.reuse[j] for j in range(self.nout))

    cdef object _kept(self, int j, Py_ssize_t* shape, list arrays):
        """Output ``j``'s array from the last call if it may be overwritten now, else None."""
        cdef list cell = <list>self.out_cells[j]
        cdef PyObject* p
        cdef cnp.ndarray a
        cdef int nd = self.ndim, d, i
        if len(cell) != 1:
            return None
        p = _opg_item(cell, 0)
        if self.reuse[j] == 1 and _opg_refcnt(p) != 1:
            return None  # someone else holds it (a view, the user): leave it alone
        value = <object>p
        if not cnp.PyArray_CheckExact(value):
            return None
        a = <cnp.ndarray>value
        if (cnp.PyArray_TYPE(a) != self.out_typenum[j] or cnp.PyArray_NDIM(a) != nd
                or not cnp.PyArray_IS_C_CONTIGUOUS(a) or not cnp.PyArray_ISWRITEABLE(a)
                or not cnp.PyArray_ISALIGNED(a) or not cnp.PyArray_ISNOTSWAPPED(a)):
            return None
        for d in range(nd):
            if cnp.PyArray_DIM(a, d) != shape[d]:
                return None
        for i in range(self.nin):
            if _overlap(a, <cnp.ndarray>arrays[i]):
                return None
        return a

    cdef cnp.ndarray _input(self, object value, int i):
        """Input ``i`` as an aligned, native ndarray of the expected dtype and ndim."""
        cdef cnp.ndarray a
        if cnp.PyArray_Check(value):
            a = <cnp.ndarray>value
            if (cnp.PyArray_TYPE(a) == self.in_typenum[i] and cnp.PyArray_ISALIGNED(a)
                    and cnp.PyArray_ISNOTSWAPPED(a) and cnp.PyArray_NDIM(a) == self.ndim):
                return a
        if value is None:
            raise ValueError(f"input {i} of {self.node} has no value (its cell is empty)")
        a = np.require(value, self.in_dtypes[i], ["A"])
        if a.dtype != self.in_dtypes[i]:
            a = a.astype(self.in_dtypes[i])
        if cnp.PyArray_NDIM(a) != self.ndim:
            raise ValueError(
                f"input {i} of {self.node} has {cnp.PyArray_NDIM(a)} dimension(s), its type "
                f"{self.node.inputs[i].type} has {self.ndim}"
            )
        return a

    cdef int run(self) except -1:
        cdef int nin = self.nin, nout = self.nout, nd = self.ndim
        cdef Py_ssize_t shape[MAX_DIMS]
        cdef int first[MAX_DIMS]
        cdef Py_ssize_t size = 1, n
        cdef cnp.npy_intp* dims
        cdef cnp.ndarray a
        # inputs, then outputs: one list of its final length (no growth while filled)
        cdef list arrays = [None] * (nin + nout)
        cdef object kept
        cdef int i, j, d
        for i in range(nin):
            arrays[i] = self._input((<list>self.in_cells[i])[0], i)
        for d in range(nd):
            shape[d] = -1
            first[d] = 0
        for i in range(nin):
            a = <cnp.ndarray>arrays[i]
            dims = cnp.PyArray_DIMS(a)
            for d in range(nd):
                n = dims[d]
                if self.bcast[i][d]:
                    if n != 1:
                        raise ValueError(
                            f"input {i} of {self.node} has length {n} in dimension {d}, "
                            "which its type says is broadcastable (length 1)"
                        )
                elif shape[d] < 0:
                    shape[d] = n
                    first[d] = i
                elif n != shape[d]:  # perform's error, naming the two inputs
                    raise broadcast_error(self.node, arrays, d, first[d], i)
        for d in range(nd):
            if shape[d] < 0:
                shape[d] = 1
            size *= shape[d]
        for j in range(nout):
            i = self.inplace[j]
            if i >= 0:
                a = <cnp.ndarray>arrays[i]
                if not cnp.PyArray_ISWRITEABLE(a):
                    a = a.copy()
                    arrays[i] = a
            else:
                kept = self._kept(j, shape, arrays) if self.reuse[j] else None
                if kept is not None:
                    a = <cnp.ndarray>kept
                elif <size_t>size * <size_t>self.itemsize[nin + j] >= POOL_MIN_BYTES:
                    # A big output: through the buffer pool, which hands back the buffer of
                    # a result the caller dropped (already faulted in) when it has one.
                    a = pooled_empty(nd, <cnp.npy_intp*>shape, self.out_typenum[j])
                else:
                    a = cnp.PyArray_EMPTY(nd, <cnp.npy_intp*>shape, self.out_typenum[j], 0)
            arrays[nin + j] = a
        if size > 0:
            self._compute(arrays, shape, size)
        for j in range(nout):
            (<list>self.out_cells[j])[0] = arrays[nin + j]
        return 0

    cdef inline bint _streams(self, Py_ssize_t size):
        """Whether the contiguous loop writes its outputs with streaming stores: a loop
        bound by memory, every output at least ``STREAM_MIN_BYTES``, at most
        ``STREAM_MAX_OUT`` of them, of at most 8-byte items, and the build can stream."""
        cdef int j
        if not (self.stream and _streaming and OPG_CAN_STREAM) or self.nout > STREAM_MAX_OUT:
            return False
        for j in range(self.nin, self.nin + self.nout):
            if self.itemsize[j] > 8 or size * self.itemsize[j] < STREAM_MIN_BYTES:
                return False
        return True

    cdef int _compute(self, list arrays, Py_ssize_t* shape, Py_ssize_t size) except -1:
        cdef int nops = self.nin + self.nout, nd = self.ndim, m = 0, i, d, nthreads
        cdef double start
        cdef char* ptrs[MAX_OPERANDS]
        cdef ptrdiff_t strides[MAX_OPERANDS][MAX_DIMS]
        cdef Py_ssize_t cshape[MAX_DIMS]
        cdef Py_ssize_t nrows = 1
        cdef cnp.ndarray a
        cdef bint flat = True, merge, inner_contig = True
        cdef opg_elemwise_kernel* k = self.k
        for i in range(nops):
            a = <cnp.ndarray>arrays[i]
            ptrs[i] = cnp.PyArray_BYTES(a)
            if i < self.nin and self.hoisted[i]:
                continue
            if not cnp.PyArray_IS_C_CONTIGUOUS(a) or cnp.PyArray_SIZE(a) != size:
                flat = False
        if flat:
            nthreads = team_size(&self.team, size)
            if self._streams(size):
                start = monotonic()
                with nogil:
                    if nthreads > 1:
                        _streamed_parallel(k, size, ptrs, self.nin, self.nout, self.itemsize,
                                           self.hoisted, nthreads)
                    else:
                        _contig_streamed(k, 0, size, ptrs, self.nin, self.nout,
                                         self.itemsize, self.hoisted)
                if self.team.nthreads > 1 and size >= self.team.threshold:
                    team_timed(&self.team, nthreads, monotonic() - start, size)
            elif self.team.nthreads > 1 and size >= self.team.threshold:
                # the team chooses between one thread and its threads by these times
                start = monotonic()
                with nogil:
                    if nthreads > 1:
                        k.parallel(size, ptrs, nthreads)
                    else:
                        k.contig(0, size, ptrs)
                team_timed(&self.team, nthreads, monotonic() - start, size)
            elif size >= NOGIL_SIZE:
                with nogil:
                    k.contig(0, size, ptrs)
            else:
                k.contig(0, size, ptrs)
            return 0
        # General path: byte strides (0 where an operand is broadcast), dims collapsed.
        for d in range(nd):
            if shape[d] == 1:
                continue
            merge = m > 0
            for i in range(nops):
                a = <cnp.ndarray>arrays[i]
                strides[i][m] = 0 if cnp.PyArray_DIM(a, d) == 1 else cnp.PyArray_STRIDE(a, d)
                if merge and strides[i][m - 1] != strides[i][m] * shape[d]:
                    merge = False
            if merge:
                cshape[m - 1] *= shape[d]
                for i in range(nops):
                    strides[i][m - 1] = strides[i][m]
            else:
                cshape[m] = shape[d]
                m += 1
        if m == 0:
            k.contig(0, 1, ptrs)
            return 0
        for i in range(nops):
            if strides[i][m - 1] != self.itemsize[i] and not (i < self.nin and self.hoisted[i]):
                inner_contig = False
        for d in range(m - 1):
            nrows *= cshape[d]
        nthreads = team_size(&self.team, size)
        if self.team.nthreads > 1 and size >= self.team.threshold:
            start = monotonic()  # timed for the team, as in the contiguous case
            with nogil:
                if nthreads > 1:
                    _walk_parallel(k, nops, m, cshape, strides, ptrs, inner_contig, nrows,
                                   nthreads)
                else:
                    _rows(k, nops, m, cshape, strides, ptrs, inner_contig, 0, nrows, 0,
                          cshape[m - 1])
            team_timed(&self.team, nthreads, monotonic() - start, size)
        elif size >= NOGIL_SIZE:
            with nogil:
                _rows(k, nops, m, cshape, strides, ptrs, inner_contig, 0, nrows, 0,
                      cshape[m - 1])
        else:
            _rows(k, nops, m, cshape, strides, ptrs, inner_contig, 0, nrows, 0, cshape[m - 1])
        return 0
