# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Precompiled thunks of the integer-array indexing ops: gathers and scatter-adds.

- ``AdvancedSubtensor1`` (``x[ilist]`` on axis 0, the embedding lookup): a new C-ordered
  array whose rows are copied from ``x``'s rows (``x.take(ilist, axis=0)``);
- ``AdvancedIncSubtensor1`` (``x[ilist] += y`` / ``= y``) and ``AdvancedIncSubtensor`` with
  integer arrays only (``x[i0, i1, ...] += y``): ``y``'s rows added (set) in index order into
  ``x`` (inplace) or into a C-ordered copy of it, so repeated indices accumulate exactly as
  ``np.add.at`` does (one add per visit, in C order of the broadcast index) and the last of
  repeated indices wins a set, as NumPy's assignment does.

Each thunk is a :class:`opgraph_c._vm.CThunk` (the VM calls ``run`` with no Python frame).
Every index is read and checked before anything is written. A value the fast path does not
take (an ndarray subclass, an unexpected dtype or rank, unaligned or byte-swapped operands a
typed add would read, ``y`` overlapping the destination) and every error (an index out of
range, a ``y`` of the wrong shape, a read-only destination) go to the Op's ``perform``,
called on the untouched values, so results and error messages are ``perform``'s.
"""

cimport numpy as cnp
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF
from libc.stdint cimport (int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t,
                          uint64_t)
from libc.string cimport memcpy

from opgraph_c._vm cimport NodeThunk

import numpy as np

cnp.import_array()


cdef extern from "numpy/arrayobject.h":
    PyTypeObject PyArray_Type
    # Steals a reference to descr.
    object PyArray_NewFromDescr(PyTypeObject* subtype, cnp.PyArray_Descr* descr, int nd,
                                cnp.npy_intp* dims, cnp.npy_intp* strides, void* data,
                                int flags, PyObject* obj)
    # Steals a reference to descr.
    object PyArray_FromAny(object op, cnp.PyArray_Descr* descr, int min_depth, int max_depth,
                           int requirements, PyObject* context)
    bint _equiv_types "PyArray_EquivTypes"(cnp.PyArray_Descr* a, cnp.PyArray_Descr* b)


ctypedef cnp.npy_intp intp


cdef enum:
    MAXDIMS = 64
    # Row offsets kept on the stack up to this many rows (else a heap buffer).
    STACK_ROWS = 256
    # Release the GIL from this many elements moved on.
    NOGIL_SIZE = 32768
    # What a thunk does to each element of a row (decoded once, from the dtype).
    OP_COPY = 0
    OP_ADD_F32 = 1
    OP_ADD_F64 = 2
    OP_ADD_U8 = 3
    OP_ADD_U16 = 4
    OP_ADD_U32 = 5
    OP_ADD_U64 = 6
    OP_OR_BOOL = 7


#: dtype -> (element op of an increment, number of components per element). Integer adds
#: wrap: done on the unsigned type of the same width (the same bits as NumPy's signed add).
INC_OPS = {
    "float32": (OP_ADD_F32, 1),
    "float64": (OP_ADD_F64, 1),
    "complex64": (OP_ADD_F32, 2),
    "complex128": (OP_ADD_F64, 2),
    "int8": (OP_ADD_U8, 1),
    "uint8": (OP_ADD_U8, 1),
    "int16": (OP_ADD_U16, 1),
    "uint16": (OP_ADD_U16, 1),
    "int32": (OP_ADD_U32, 1),
    "uint32": (OP_ADD_U32, 1),
    "int64": (OP_ADD_U64, 1),
    "uint64": (OP_ADD_U64, 1),
    "bool": (OP_OR_BOOL, 1),
}


# ----------------------------------------------------------------------------------------
# the block of one row: its dimensions collapsed, and what is done to each element


cdef struct Block:
    # A row (the dimensions after the indexed ones) as seen by the destination (ds) and
    # the source (ss): byte strides per dimension, length-1 dimensions dropped and
    # dimensions that walk like one merged. nd >= 1.
    int nd
    intp n[MAXDIMS + 1]
    intp ds[MAXDIMS + 1]
    intp ss[MAXDIMS + 1]


cdef void _collapse(Block* b) noexcept nogil:
    """Drop the length-1 dimensions of ``b`` and merge those that walk like one."""
    cdef int d, k = 0, top
    cdef intp n[MAXDIMS + 1]
    cdef intp ds[MAXDIMS + 1]
    cdef intp ss[MAXDIMS + 1]
    for d in range(b.nd):
        if b.n[d] != 1:
            n[k], ds[k], ss[k] = b.n[d], b.ds[d], b.ss[d]
            k += 1
    if k == 0:
        b.nd = 1
        b.n[0], b.ds[0], b.ss[0] = 1, 0, 0
        return
    # Build from the innermost dimension outwards, at the end of b's arrays.
    top = MAXDIMS
    b.n[top], b.ds[top], b.ss[top] = n[k - 1], ds[k - 1], ss[k - 1]
    for d in range(k - 2, -1, -1):
        if ds[d] == b.ds[top] * b.n[top] and ss[d] == b.ss[top] * b.n[top]:
            b.n[top] *= n[d]  # the merged dimension keeps the inner one's strides
        else:
            top -= 1
            b.n[top], b.ds[top], b.ss[top] = n[d], ds[d], ss[d]
    b.nd = MAXDIMS + 1 - top
    for d in range(b.nd):
        b.n[d], b.ds[d], b.ss[d] = b.n[top + d], b.ds[top + d], b.ss[top + d]


ctypedef fused idx_t:
    int8_t
    int16_t
    int32_t
    int64_t
    uint8_t
    uint16_t
    uint32_t
    uint64_t


ctypedef fused add_t:
    float
    double
    uint8_t
    uint16_t
    uint32_t
    uint64_t


cdef inline void _add_line(add_t* kind, char* dst, const char* src, intp n, intp ds,
                           intp ss) noexcept nogil:
    """``dst[i] += src[i]`` over one line, in order (wrapping for the unsigned types)."""
    cdef intp i
    cdef add_t v
    cdef add_t* d = <add_t*>dst
    cdef const add_t* s = <const add_t*>src
    if ds == sizeof(add_t) and ss == sizeof(add_t):
        for i in range(n):
            d[i] = <add_t>(d[i] + s[i])
    elif ds == sizeof(add_t) and ss == 0:
        v = s[0]
        for i in range(n):
            d[i] = <add_t>(d[i] + v)
    else:
        for i in range(n):
            (<add_t*>(dst + i * ds))[0] = <add_t>(
                (<add_t*>(dst + i * ds))[0] + (<const add_t*>(src + i * ss))[0]
            )


cdef inline void _or_line(char* dst, const char* src, intp n, intp ds,
                          intp ss) noexcept nogil:
    """Boolean ``dst[i] += src[i]``: NumPy's bool add is a logical or (0 or 1)."""
    cdef intp i
    for i in range(n):
        dst[i * ds] = (dst[i * ds] != 0) | (src[i * ss] != 0)


cdef inline void _copy_line(char* dst, const char* src, intp n, intp ds, intp ss,
                            Py_ssize_t itemsize) noexcept nogil:
    """``dst[i] = src[i]`` over one line, bytes as they are (any alignment)."""
    cdef intp i
    if ds == itemsize and ss == itemsize:
        memcpy(dst, src, n * itemsize)
    elif itemsize == 8:
        for i in range(n):
            memcpy(dst + i * ds, src + i * ss, 8)
    elif itemsize == 4:
        for i in range(n):
            memcpy(dst + i * ds, src + i * ss, 4)
    elif itemsize == 2:
        for i in range(n):
            memcpy(dst + i * ds, src + i * ss, 2)
    elif itemsize == 1:
        for i in range(n):
            dst[i * ds] = src[i * ss]
    else:
        for i in range(n):
            memcpy(dst + i * ds, src + i * ss, itemsize)


cdef inline void _line(int op, Py_ssize_t itemsize, char* dst, const char* src, intp n,
                       intp ds, intp ss) noexcept nogil:
    if op == OP_COPY:
        _copy_line(dst, src, n, ds, ss, itemsize)
    elif op == OP_ADD_F64:
        _add_line(<double*>NULL, dst, src, n, ds, ss)
    elif op == OP_ADD_F32:
        _add_line(<float*>NULL, dst, src, n, ds, ss)
    elif op == OP_ADD_U64:
        _add_line(<uint64_t*>NULL, dst, src, n, ds, ss)
    elif op == OP_ADD_U32:
        _add_line(<uint32_t*>NULL, dst, src, n, ds, ss)
    elif op == OP_ADD_U16:
        _add_line(<uint16_t*>NULL, dst, src, n, ds, ss)
    elif op == OP_ADD_U8:
        _add_line(<uint8_t*>NULL, dst, src, n, ds, ss)
    else:
        _or_line(dst, src, n, ds, ss)


cdef void _block(int op, Py_ssize_t itemsize, const Block* b, char* dst,
                 const char* src) noexcept nogil:
    """The element op over one row block, in C order."""
    cdef int nd = b.nd, d
    cdef intp last = b.n[nd - 1], lds = b.ds[nd - 1], lss = b.ss[nd - 1]
    cdef intp coord[MAXDIMS + 1]
    if nd == 1:
        _line(op, itemsize, dst, src, last, lds, lss)
        return
    for d in range(nd - 1):
        coord[d] = 0
    while True:
        _line(op, itemsize, dst, src, last, lds, lss)
        d = nd - 2
        while d >= 0:
            coord[d] += 1
            dst += b.ds[d]
            src += b.ss[d]
            if coord[d] < b.n[d]:
                break
            dst -= b.ds[d] * b.n[d]
            src -= b.ss[d] * b.n[d]
            coord[d] = 0
            d -= 1
        if d < 0:
            return


cdef void _scalar_adds(add_t* kind, intp m, char* dbase, const intp* doff,
                       const char* sbase, const intp* soff, intp sstep) noexcept nogil:
    """Rows of one element: ``dbase[doff[j]] += sbase[soff[j] or j * sstep]``, in order."""
    cdef intp j
    cdef add_t* d
    for j in range(m):
        d = <add_t*>(dbase + doff[j])
        d[0] = <add_t>(d[0] + (<const add_t*>(sbase + (soff[j] if soff != NULL
                                                         else j * sstep)))[0])


cdef void _rows(int op, Py_ssize_t itemsize, const Block* b, intp m, char* dbase,
                const intp* doff, intp dstep, const char* sbase, const intp* soff,
                intp sstep) noexcept nogil:
    """Row ``j`` of ``m`` (in order): the block op from ``sbase + soff[j]`` (``j * sstep``
    when ``soff`` is NULL) into ``dbase + doff[j]`` (``j * dstep``)."""
    cdef intp j
    cdef char* d
    cdef const char* s
    if b.nd == 1 and b.n[0] == 1:  # rows of one element: no per-row dispatch
        if op == OP_COPY and (itemsize == 4 or itemsize == 8):
            for j in range(m):
                d = dbase + (doff[j] if doff != NULL else j * dstep)
                s = sbase + (soff[j] if soff != NULL else j * sstep)
                if itemsize == 8:
                    memcpy(d, s, 8)
                else:
                    memcpy(d, s, 4)
            return
        if doff != NULL:
            if op == OP_ADD_F64:
                _scalar_adds(<double*>NULL, m, dbase, doff, sbase, soff, sstep)
                return
            if op == OP_ADD_F32:
                _scalar_adds(<float*>NULL, m, dbase, doff, sbase, soff, sstep)
                return
            if op == OP_ADD_U64:
                _scalar_adds(<uint64_t*>NULL, m, dbase, doff, sbase, soff, sstep)
                return
            if op == OP_ADD_U32:
                _scalar_adds(<uint32_t*>NULL, m, dbase, doff, sbase, soff, sstep)
                return
    for j in range(m):
        d = dbase + (doff[j] if doff != NULL else j * dstep)
        s = sbase + (soff[j] if soff != NULL else j * sstep)
        _block(op, itemsize, b, d, s)


ctypedef fused elem_t:
    uint32_t
    uint64_t


cdef bint _gather_elems(idx_t* ikind, elem_t* ekind, const char* ibase, intp istride, intp m,
                        intp n, intp xstride, char* obase, const char* xbase) noexcept nogil:
    """``out[j] = x[ilist[j]]`` for a vector ``x`` of 4- or 8-byte elements, in one pass."""
    cdef intp j
    cdef int64_t v
    cdef idx_t raw
    cdef elem_t* o = <elem_t*>obase
    for j in range(m):
        raw = (<const idx_t*>(ibase + j * istride))[0]
        if idx_t is uint64_t:
            if raw >= <uint64_t>n:
                return False
            v = <int64_t>raw
        else:
            v = <int64_t>raw
            if v < 0:
                v += n
            if v < 0 or v >= n:
                return False
        memcpy(&o[j], xbase + <intp>v * xstride, sizeof(elem_t))
    return True


cdef bint _gather(int code, const char* ibase, intp istride, intp m, intp n, intp xstride,
                  const Block* b, Py_ssize_t itemsize, intp rowbytes, char* obase,
                  const char* xbase) noexcept nogil:
    """Rows ``ilist[j]`` of ``x`` into row ``j`` of ``out``, ``STACK_ROWS`` indices at a time
    (read and checked, then copied); False at the first index out of range."""
    cdef intp off[STACK_ROWS]
    cdef intp pos = 0, count
    if b.nd == 1 and b.n[0] == 1 and rowbytes == 8:
        if code == 105 * 16 + 8:
            return _gather_elems(<int64_t*>NULL, <uint64_t*>NULL, ibase, istride, m, n,
                                 xstride, obase, xbase)
        if code == 105 * 16 + 4:
            return _gather_elems(<int32_t*>NULL, <uint64_t*>NULL, ibase, istride, m, n,
                                 xstride, obase, xbase)
    if b.nd == 1 and b.n[0] == 1 and rowbytes == 4:
        if code == 105 * 16 + 8:
            return _gather_elems(<int64_t*>NULL, <uint32_t*>NULL, ibase, istride, m, n,
                                 xstride, obase, xbase)
        if code == 105 * 16 + 4:
            return _gather_elems(<int32_t*>NULL, <uint32_t*>NULL, ibase, istride, m, n,
                                 xstride, obase, xbase)
    while pos < m:
        count = m - pos if m - pos < STACK_ROWS else STACK_ROWS
        if not _index_line_any(code, ibase + pos * istride, istride, count, n, xstride, off,
                               True):
            return False
        if rowbytes > 0:  # (rows of no element: only the indices are checked)
            _rows(OP_COPY, itemsize, b, count, obase + pos * rowbytes, NULL, rowbytes, xbase,
                  off, 0)
        pos += count
    return True


# ----------------------------------------------------------------------------------------
# index arrays: read, wrapped, checked, turned into byte offsets


cdef bint _index_line(idx_t* kind, const char* p, intp stride, intp count, intp n,
                      intp xstride, intp* off, bint first) noexcept nogil:
    """``count`` indices from ``p``: ``off[i] (+)= index * xstride``; False if one is not in
    ``[-n, n)`` (negative ones count from the end, as NumPy's)."""
    cdef intp i
    cdef int64_t v
    cdef idx_t raw
    for i in range(count):
        raw = (<const idx_t*>(p + i * stride))[0]
        if idx_t is uint64_t:
            if raw >= <uint64_t>n:
                return False
            v = <int64_t>raw
        else:
            v = <int64_t>raw
            if v < 0:
                v += n
            if v < 0 or v >= n:
                return False
        if first:
            off[i] = <intp>v * xstride
        else:
            off[i] += <intp>v * xstride
    return True


cdef bint _index_line_any(int code, const char* p, intp stride, intp count, intp n,
                          intp xstride, intp* off, bint first) noexcept nogil:
    """``_index_line`` for the index dtype ``code`` (``'i'``/``'u'`` * 16 + itemsize)."""
    if code == 105 * 16 + 8:
        return _index_line(<int64_t*>NULL, p, stride, count, n, xstride, off, first)
    if code == 105 * 16 + 4:
        return _index_line(<int32_t*>NULL, p, stride, count, n, xstride, off, first)
    if code == 105 * 16 + 2:
        return _index_line(<int16_t*>NULL, p, stride, count, n, xstride, off, first)
    if code == 105 * 16 + 1:
        return _index_line(<int8_t*>NULL, p, stride, count, n, xstride, off, first)
    if code == 117 * 16 + 8:
        return _index_line(<uint64_t*>NULL, p, stride, count, n, xstride, off, first)
    if code == 117 * 16 + 4:
        return _index_line(<uint32_t*>NULL, p, stride, count, n, xstride, off, first)
    if code == 117 * 16 + 2:
        return _index_line(<uint16_t*>NULL, p, stride, count, n, xstride, off, first)
    if code == 117 * 16 + 1:
        return _index_line(<uint8_t*>NULL, p, stride, count, n, xstride, off, first)
    return False


cdef int _index_code(cnp.ndarray a) noexcept:
    """The dtype code ``_index_line_any`` reads ``a`` with; 0 if it cannot (not an integer
    array, byte-swapped or unaligned)."""
    if not cnp.PyArray_ISINTEGER(a):
        return 0
    if not cnp.PyArray_ISNOTSWAPPED(a) or not cnp.PyArray_ISALIGNED(a):
        return 0
    return (105 if cnp.PyArray_ISSIGNED(a) else 117) * 16 + cnp.PyArray_ITEMSIZE(a)


cdef bint _walk(int code, const char* base, int nb, const intp* B, const intp* strides,
                intp n, intp xstride, intp* off, bint first) noexcept nogil:
    """Walk the shape ``B`` in C order over an array with byte ``strides`` (0 where it is
    broadcast). ``code`` 0: ``off[j] = offset of element j`` (``base`` unused); else read
    each element as an index into a dimension of length ``n`` and byte stride ``xstride``
    (``_index_line``). False if an index is out of range."""
    cdef intp coord[MAXDIMS]
    cdef intp last, total = 1, i, pos = 0
    cdef const char* p = base
    cdef int d
    for d in range(nb):
        total *= B[d]
    if total == 0:
        return True
    if nb == 0:
        if code == 0:
            off[0] = 0
            return True
        return _index_line_any(code, p, 0, 1, n, xstride, off, first)
    last = B[nb - 1]
    for d in range(nb - 1):
        coord[d] = 0
    while True:
        if code == 0:
            for i in range(last):
                off[i] = pos + i * strides[nb - 1]
        elif not _index_line_any(code, p, strides[nb - 1], last, n, xstride, off, first):
            return False
        off += last
        d = nb - 2
        while d >= 0:
            coord[d] += 1
            p += strides[d]
            pos += strides[d]
            if coord[d] < B[d]:
                break
            p -= strides[d] * B[d]
            pos -= strides[d] * B[d]
            coord[d] = 0
            d -= 1
        if d < 0:
            return True


cdef bint _bstrides(cnp.ndarray a, int nb, const intp* B, intp* out) noexcept:
    """``a``'s byte strides broadcast to the shape ``B`` (0 where ``a`` is broadcast)."""
    cdef int nd = cnp.PyArray_NDIM(a), off = nb - nd, d
    cdef intp n
    if off < 0:
        return False
    for d in range(off):
        out[d] = 0
    for d in range(nd):
        n = cnp.PyArray_DIM(a, d)
        if n == B[off + d] and n != 1:
            out[off + d] = cnp.PyArray_STRIDE(a, d)
        elif n == 1:
            out[off + d] = 0
        else:
            return False
    return True


cdef void _extent(cnp.ndarray a, char** lo, char** hi) noexcept:
    """The bytes ``[lo, hi)`` that ``a``'s elements span (empty when it has none)."""
    cdef char* l = cnp.PyArray_BYTES(a)
    cdef char* h = l
    cdef intp s, n
    cdef int d
    if cnp.PyArray_SIZE(a) == 0:
        lo[0] = hi[0] = l
        return
    for d in range(cnp.PyArray_NDIM(a)):
        s = cnp.PyArray_STRIDE(a, d)
        n = cnp.PyArray_DIM(a, d) - 1
        if s < 0:
            l += s * n
        else:
            h += s * n
    lo[0] = l
    hi[0] = h + cnp.PyArray_ITEMSIZE(a)


cdef bint _overlap(cnp.ndarray a, cnp.ndarray b) noexcept:
    """Whether the memory spans of ``a`` and ``b`` intersect (may share memory)."""
    cdef char* alo
    cdef char* ahi
    cdef char* blo
    cdef char* bhi
    _extent(a, &alo, &ahi)
    _extent(b, &blo, &bhi)
    return alo < bhi and blo < ahi and alo != ahi and blo != bhi


cdef inline bint _same_type(int a, int b) noexcept:
    """Two type numbers of the same dtype (int64 is NPY_LONG or NPY_LONGLONG)."""
    return a == b or cnp.PyArray_EquivTypenums(a, b)


cdef class Offsets:
    """A buffer of ``intp`` row offsets, reused between calls: inline when small, else on the
    heap (freed at the next call or with the thunk)."""

    cdef intp small[STACK_ROWS]
    cdef intp* data

    def __dealloc__(self):
        if self.data != NULL and self.data != self.small:
            PyMem_Free(self.data)

    cdef intp* get(self, intp m) except NULL:
        """Room for ``m`` offsets (at least one)."""
        if self.data != NULL and self.data != self.small:
            PyMem_Free(self.data)
        self.data = self.small
        if m > STACK_ROWS:
            self.data = <intp*>PyMem_Malloc(m * sizeof(intp))
            if self.data == NULL:
                raise MemoryError()
        return self.data


# ----------------------------------------------------------------------------------------
# thunks


cdef class AdvancedThunk(NodeThunk):
    """Base of this module's thunks (:class:`opgraph_c._vm.NodeThunk`: the node, its cells,
    ``perform`` for the rest, ``perform_calls``), with the indexed input's rank and dtype."""

    cdef int xnd, xtype
    cdef Offsets doff, soff

    def __init__(self, node, list in_cells, list out_cells):
        NodeThunk.__init__(self, node, in_cells, out_cells, MAXDIMS)
        self.xnd = node.inputs[0].type.ndim
        self.xtype = np.dtype(node.inputs[0].type.dtype).num
        self.doff, self.soff = Offsets(), Offsets()

    cdef bint x_ok(self, object x) noexcept:
        """``x`` is an ndarray (not a subclass) of the node's rank and dtype."""
        return (cnp.PyArray_CheckExact(x) and cnp.PyArray_NDIM(<cnp.ndarray>x) == self.xnd
                and _same_type(cnp.PyArray_TYPE(<cnp.ndarray>x), self.xtype))


cdef class GatherThunk(AdvancedThunk):
    """``AdvancedSubtensor1``: ``x.take(ilist, axis=0)``, a new C-ordered array whose row
    ``j`` is a copy of row ``ilist[j]`` of ``x`` (any layout, any integer index dtype)."""

    cdef int fast(self) except -1:
        cdef object x = self.arg(0), i = self.arg(1)
        cdef cnp.ndarray xa, ia, out
        cdef cnp.npy_intp dims[MAXDIMS]
        cdef Block b
        cdef intp m, n, rowbytes, istride
        cdef Py_ssize_t itemsize
        cdef cnp.PyArray_Descr* descr
        cdef int d, code
        cdef bint ok
        if not self.x_ok(x) or not cnp.PyArray_CheckExact(i):
            return 1
        xa, ia = <cnp.ndarray>x, <cnp.ndarray>i
        if cnp.PyArray_NDIM(ia) != 1:
            return 1
        code = _index_code(ia)
        if code == 0:
            return 1
        m = cnp.PyArray_DIM(ia, 0)
        n = cnp.PyArray_DIM(xa, 0)
        istride = cnp.PyArray_STRIDE(ia, 0)
        itemsize = cnp.PyArray_ITEMSIZE(xa)
        dims[0] = m
        rowbytes = itemsize
        b.nd = self.xnd - 1
        for d in range(self.xnd - 1, 0, -1):
            dims[d] = cnp.PyArray_DIM(xa, d)
            b.n[d - 1] = dims[d]
            b.ds[d - 1] = rowbytes
            b.ss[d - 1] = cnp.PyArray_STRIDE(xa, d)
            rowbytes *= dims[d]
        _collapse(&b)
        descr = cnp.PyArray_DESCR(xa)
        Py_INCREF(<object><PyObject*>descr)  # stolen by PyArray_NewFromDescr
        out = <cnp.ndarray>PyArray_NewFromDescr(
            &PyArray_Type, descr, self.xnd, dims, NULL, NULL, 0, NULL
        )
        if m * rowbytes >= NOGIL_SIZE * 4:
            with nogil:
                ok = _gather(code, cnp.PyArray_BYTES(ia), istride, m, n,
                             cnp.PyArray_STRIDE(xa, 0), &b, itemsize, rowbytes,
                             cnp.PyArray_BYTES(out), cnp.PyArray_BYTES(xa))
        else:
            ok = _gather(code, cnp.PyArray_BYTES(ia), istride, m, n, cnp.PyArray_STRIDE(xa, 0),
                         &b, itemsize, rowbytes, cnp.PyArray_BYTES(out), cnp.PyArray_BYTES(xa))
        if not ok:
            return 1  # an index out of range: perform raises NumPy's IndexError
        (<list>self.out_cells[0])[0] = out
        return 0


cdef class ScatterThunk(AdvancedThunk):
    """``AdvancedIncSubtensor1`` and ``AdvancedIncSubtensor`` over integer arrays only:
    ``x[i0, i1, ...] += y`` (``np.add.at``: each visit adds, in C order of the broadcast
    index) or ``= y`` (in order: the last of repeated indices wins), on ``x`` (inplace) or on
    a C-ordered copy of it.

    Parameters
    ----------
    node, in_cells, out_cells
        As for every thunk; the index arrays are the inputs from 2 on.
    inplace, set_instead_of_inc
        The op's.
    y_broadcastable
        ``y``'s type's broadcastable pattern (a length-1 dimension of ``y`` broadcasts only
        where it says so; elsewhere perform raises).
    op, components
        The element op (``OP_COPY`` to set, else the increment's) and the number of
        components of one element (2 for complex numbers, added as two reals).
    cast_y
        ``y`` has another dtype than ``x``: it is cast to ``x``'s first (an unsafe cast for a
        set, the ufunc's input cast for an increment).
    """

    cdef bint inplace, cast_y
    cdef int op, comps, ynd, ytype, nidx
    cdef unsigned char ybcast[MAXDIMS]
    cdef int index_nd[MAXDIMS]

    def __init__(self, node, list in_cells, list out_cells, bint inplace,
                 bint set_instead_of_inc, y_broadcastable, int op, int components,
                 bint cast_y):
        AdvancedThunk.__init__(self, node, in_cells, out_cells)
        self.inplace = inplace
        self.op = OP_COPY if set_instead_of_inc else op
        self.comps = 1 if set_instead_of_inc else components
        self.cast_y = cast_y
        self.ynd = len(y_broadcastable)
        self.ytype = np.dtype(node.inputs[1].type.dtype).num
        for d, bc in enumerate(y_broadcastable):
            self.ybcast[d] = bool(bc)
        self.nidx = len(node.inputs) - 2
        if not 1 <= self.nidx <= self.xnd:
            raise ValueError(f"{node.op}: {self.nidx} index arrays for {self.xnd} dimensions")
        for k, v in enumerate(node.inputs[2:]):
            self.index_nd[k] = v.type.ndim

    cdef int fast(self) except -1:
        cdef object x = self.arg(0), y = self.arg(1), v
        cdef cnp.ndarray xa, ya, out, ia
        cdef intp B[MAXDIMS]
        cdef intp tshape[MAXDIMS + 1]
        cdef intp ystr[MAXDIMS + 1]
        cdef intp istr[MAXDIMS]
        cdef Block b
        cdef int nb = 0, nt, k, d, off, code, nidx = self.nidx
        cdef intp m = 1, inner = 1, n, t, sstep = 0
        cdef intp* doff
        cdef intp* soff = NULL
        cdef Py_ssize_t itemsize
        cdef bint ok = True
        cdef cnp.PyArray_Descr* descr
        if not self.x_ok(x) or not cnp.PyArray_CheckExact(y):
            return 1
        xa, ya = <cnp.ndarray>x, <cnp.ndarray>y
        if (cnp.PyArray_NDIM(ya) != self.ynd
                or not _same_type(cnp.PyArray_TYPE(ya), self.ytype)):
            return 1
        if self.inplace and not cnp.PyArray_ISWRITEABLE(xa):
            return 1  # perform raises NumPy's read-only error
        # The broadcast shape B of the index arrays.
        for k in range(nidx):
            v = self.arg(2 + k)
            if not cnp.PyArray_CheckExact(v):
                return 1
            ia = <cnp.ndarray>v
            if cnp.PyArray_NDIM(ia) != self.index_nd[k] or _index_code(ia) == 0:
                return 1
            if self.inplace and _overlap(ia, xa):
                return 1
            off = cnp.PyArray_NDIM(ia) - nb
            if off > 0:  # more dimensions: shift B right
                for d in range(nb - 1, -1, -1):
                    B[d + off] = B[d]
                for d in range(off):
                    B[d] = 1
                nb += off
            off = nb - cnp.PyArray_NDIM(ia)
            for d in range(cnp.PyArray_NDIM(ia)):
                n = cnp.PyArray_DIM(ia, d)
                if B[off + d] == 1:
                    B[off + d] = n
                elif n != 1 and n != B[off + d]:
                    return 1  # perform raises NumPy's shape-mismatch IndexError
        # y against the indexed part's shape B + x.shape[nidx:].
        nt = nb + self.xnd - nidx
        for d in range(nb):
            tshape[d] = B[d]
            m *= B[d]
        for d in range(nidx, self.xnd):
            tshape[nb + d - nidx] = cnp.PyArray_DIM(xa, d)
            inner *= cnp.PyArray_DIM(xa, d)
        off = nt - self.ynd
        if off < 0:
            return 1
        for d in range(off):
            ystr[d] = 0
        for d in range(self.ynd):
            n = cnp.PyArray_DIM(ya, d)
            t = tshape[off + d]
            if n != t and (n != 1 or not self.ybcast[d]):
                return 1  # perform raises check_inc_shape's error
            ystr[off + d] = 0 if n == 1 else cnp.PyArray_STRIDE(ya, d)
        if self.cast_y:
            descr = cnp.PyArray_DESCR(xa)
            Py_INCREF(<object><PyObject*>descr)  # stolen by PyArray_FromAny
            ya = <cnp.ndarray>PyArray_FromAny(
                ya, descr, 0, 0,
                cnp.NPY_ARRAY_FORCECAST | cnp.NPY_ARRAY_ALIGNED | cnp.NPY_ARRAY_C_CONTIGUOUS,
                NULL,
            )
            for d in range(self.ynd):
                if cnp.PyArray_DIM(ya, d) != 1:
                    ystr[off + d] = cnp.PyArray_STRIDE(ya, d)
        elif self.op == OP_COPY and not _equiv_types(cnp.PyArray_DESCR(ya),
                                                     cnp.PyArray_DESCR(xa)):
            return 1  # another byte order: perform converts
        if self.op != OP_COPY and not (
            cnp.PyArray_ISNOTSWAPPED(xa) and cnp.PyArray_ISALIGNED(xa)
            and cnp.PyArray_ISNOTSWAPPED(ya) and cnp.PyArray_ISALIGNED(ya)
        ):
            return 1
        if self.inplace and _overlap(ya, xa):
            return 1  # perform's NumPy calls take care of the overlap
        # Every check passed: the destination, then the offsets of its rows (checked).
        if self.inplace:
            out = xa
        else:
            out = <cnp.ndarray>cnp.PyArray_NewCopy(xa, cnp.NPY_CORDER)
        doff = self.doff.get(m)
        for k in range(nidx):
            ia = <cnp.ndarray>self.arg(2 + k)
            code = _index_code(ia)
            _bstrides(ia, nb, B, istr)
            n = cnp.PyArray_DIM(out, k)
            with nogil:
                ok = _walk(code, cnp.PyArray_BYTES(ia), nb, B, istr, n,
                           cnp.PyArray_STRIDE(out, k), doff, k == 0)
            if not ok:
                return 1  # an index out of range: perform raises NumPy's IndexError
        if m == 0 or inner == 0:
            (<list>self.out_cells[0])[0] = out
            return 0
        if nb == 1:
            sstep = ystr[0]
        elif nb > 1:
            soff = self.soff.get(m)
            _walk(0, NULL, nb, B, ystr, 0, 0, soff, True)
        else:
            sstep = 0
        itemsize = cnp.PyArray_ITEMSIZE(out)
        b.nd = self.xnd - nidx
        for d in range(b.nd):
            b.n[d] = cnp.PyArray_DIM(out, nidx + d)
            b.ds[d] = cnp.PyArray_STRIDE(out, nidx + d)
            b.ss[d] = ystr[nb + d]
        if self.comps == 2:  # complex: real and imaginary parts as a last dimension
            itemsize //= 2
            b.n[b.nd], b.ds[b.nd], b.ss[b.nd] = 2, itemsize, itemsize
            b.nd += 1
        _collapse(&b)
        if m * inner >= NOGIL_SIZE:
            with nogil:
                _rows(self.op, itemsize, &b, m, cnp.PyArray_BYTES(out), doff, 0,
                      cnp.PyArray_BYTES(ya), soff, sstep)
        else:
            _rows(self.op, itemsize, &b, m, cnp.PyArray_BYTES(out), doff, 0,
                  cnp.PyArray_BYTES(ya), soff, sstep)
        (<list>self.out_cells[0])[0] = out
        return 0
