# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Precompiled thunks of the joining and creation ops: ``Join``, ``Split``, ``ARange``, ``Eye``.

Each thunk is a :class:`opgraph_c._vm.CThunk`: the VM calls its ``run`` through the C vtable,
with no Python frame, and everything that depends only on the node (dtypes, the number of
pieces) is decoded once, in the constructor. ``CumOp``'s thunk is in
:mod:`opgraph_c._cumulative`.

Every thunk matches its Op's ``perform``: the same values, dtypes, memory layouts and views
(``Join{view=k}`` returns its input ``k`` itself where perform does; other outputs are new
arrays). A value the fast path does not handle (an ndarray subclass, an unexpected rank or
dtype, an integer too large to follow NumPy's arithmetic exactly) and every error (an axis
out of range, split lengths that do not add up, a shape mismatch) go to the Op's ``perform``
itself, called on the same values before anything was written, so the results and error
messages are exactly ``perform``'s.
"""

cimport numpy as cnp
from cpython.float cimport PyFloat_AS_DOUBLE, PyFloat_CheckExact
from cpython.long cimport PyLong_AsLongLong, PyLong_CheckExact
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.number cimport PyNumber_AsSsize_t
from cpython.object cimport Py_TYPE, PyObject, PyObject_TypeCheck, PyTypeObject
from cpython.ref cimport Py_INCREF
from libc.math cimport ceil, isfinite, signbit
from libc.string cimport memcpy

from opgraph_c._vm cimport NodeThunk

import numpy as np

cnp.import_array()


cdef extern from "Python.h":
    Py_ssize_t PY_SSIZE_T_MAX


# NumPy's ``PyArray_FillFunc*`` (NumPy declares the function type, not the pointer).
ctypedef int (*fill_fn)(void*, cnp.npy_intp, void*) noexcept nogil


cdef extern from "numpy/arrayobject.h":
    PyTypeObject PyArray_Type
    PyTypeObject PyLongArrType_Type  # np.int64's type where C long is 64 bits
    PyTypeObject PyIntegerArrType_Type  # np.integer
    PyTypeObject PyGenericArrType_Type  # np.generic
    ctypedef struct PyLongScalarObject:
        long obval
    ctypedef struct PyArray_ArrFuncs:
        fill_fn fill
    PyArray_ArrFuncs* PyDataType_GetArrFuncs(cnp.PyArray_Descr* descr)
    # Steals a reference to descr.
    object PyArray_NewFromDescr(PyTypeObject* subtype, cnp.PyArray_Descr* descr, int nd,
                                cnp.npy_intp* dims, cnp.npy_intp* strides, void* data,
                                int flags, PyObject* obj)
    object PyArray_FromScalar(object scalar, cnp.PyArray_Descr* outcode)
    # Steals a reference to descr (NULL: the prototype's).
    object PyArray_NewLikeArray(cnp.ndarray prototype, cnp.NPY_ORDER order,
                                cnp.PyArray_Descr* descr, int subok)


cdef enum:
    MAXDIMS = 64
    # Release the GIL for copies and fills of at least this many bytes.
    NOGIL_BYTES = 65536


# Integers up to this magnitude are exact in a C double, so NumPy's arange arithmetic on
# Python ints (exact) and on doubles agree; larger ones take perform.
cdef cnp.npy_int64 EXACT_INT = (<cnp.npy_int64>1) << 52
# Longest arange or eye this module builds itself (perform raises NumPy's memory errors).
cdef cnp.npy_int64 MAX_ELEMENTS = (<cnp.npy_int64>1) << 40


# ----------------------------------------------------------------------------------------
# helpers


cdef inline bint _exact(object x) noexcept:
    """``x`` is an ndarray, not a subclass (a subclass takes perform, which keeps its type)."""
    return cnp.PyArray_CheckExact(x)


cdef bint _read_int(cnp.ndarray arr, const char* p, cnp.npy_int64* out) noexcept:
    """The integer element of ``arr`` at ``p`` (native, aligned) as int64; False if not one."""
    cdef cnp.npy_uint64 u
    cdef Py_ssize_t size = cnp.PyArray_ITEMSIZE(arr)
    if (not cnp.PyArray_ISINTEGER(arr) or not cnp.PyArray_ISNOTSWAPPED(arr)
            or not cnp.PyArray_ISALIGNED(arr)):
        return False
    if cnp.PyArray_ISSIGNED(arr):
        if size == 8:
            out[0] = (<const cnp.npy_int64*>p)[0]
        elif size == 4:
            out[0] = (<const cnp.npy_int32*>p)[0]
        elif size == 2:
            out[0] = (<const cnp.npy_int16*>p)[0]
        elif size == 1:
            out[0] = (<const cnp.npy_int8*>p)[0]
        else:
            return False
        return True
    if size == 8:
        u = (<const cnp.npy_uint64*>p)[0]
        if u > <cnp.npy_uint64>0x7FFFFFFFFFFFFFFF:
            return False
        out[0] = <cnp.npy_int64>u
    elif size == 4:
        out[0] = (<const cnp.npy_uint32*>p)[0]
    elif size == 2:
        out[0] = (<const cnp.npy_uint16*>p)[0]
    elif size == 1:
        out[0] = (<const cnp.npy_uint8*>p)[0]
    else:
        return False
    return True


cdef bint _int_scalar(object v, Py_ssize_t* out):
    """The integer scalar (NumPy or Python) or integer 0-d array ``v``; False if not one."""
    cdef cnp.npy_int64 e
    if Py_TYPE(v) == &PyLongArrType_Type and sizeof(long) == sizeof(Py_ssize_t):
        out[0] = (<PyLongScalarObject*><PyObject*>v).obval
        return True
    if cnp.PyArray_Check(v):
        if cnp.PyArray_NDIM(<cnp.ndarray>v) != 0:
            return False
        if not _read_int(<cnp.ndarray>v, cnp.PyArray_BYTES(<cnp.ndarray>v), &e):
            return False
        out[0] = <Py_ssize_t>e
        return True
    if PyLong_CheckExact(v) or PyObject_TypeCheck(v, &PyIntegerArrType_Type):
        try:
            out[0] = PyNumber_AsSsize_t(v, OverflowError)
        except OverflowError:
            return False
        return True
    return False


cdef inline cnp.dtype _dtype_of(cnp.ndarray a):
    """``a.dtype`` (a new reference to its descriptor)."""
    return <cnp.dtype><object><PyObject*>cnp.PyArray_DESCR(a)


cdef inline cnp.PyArray_Descr* _descr(cnp.dtype dtype) noexcept:
    """The descriptor struct of ``dtype`` (borrowed)."""
    return <cnp.PyArray_Descr*><PyObject*>dtype


cdef inline bint _same_type(int a, int b) noexcept:
    """Two type numbers of the same dtype (int64 is NPY_LONG or NPY_LONGLONG)."""
    return a == b or cnp.PyArray_EquivTypenums(a, b)


cdef cnp.ndarray _view(cnp.ndarray base, int nd, cnp.npy_intp* dims, cnp.npy_intp* strides,
                       char* data):
    """A view of ``base``'s memory with the given shape, strides and first element."""
    cdef cnp.PyArray_Descr* descr = cnp.PyArray_DESCR(base)
    Py_INCREF(<object><PyObject*>descr)  # stolen by PyArray_NewFromDescr
    cdef cnp.ndarray out = <cnp.ndarray>PyArray_NewFromDescr(
        &PyArray_Type, descr, nd, dims, strides, data, 0, NULL
    )
    cnp.set_array_base(out, base)
    return out


cdef cnp.ndarray _new_c_array(cnp.PyArray_Descr* descr, int nd, cnp.npy_intp* dims):
    """A new C-ordered array of ``descr`` (not stolen) and shape ``dims``."""
    Py_INCREF(<object><PyObject*>descr)
    return <cnp.ndarray>PyArray_NewFromDescr(&PyArray_Type, descr, nd, dims, NULL, NULL, 0,
                                             NULL)


cdef void _copy_rows(char* dst, Py_ssize_t dst_step, const char* src, Py_ssize_t src_step,
                     Py_ssize_t nrows, Py_ssize_t nbytes) noexcept nogil:
    """``nrows`` blocks of ``nbytes`` from ``src`` to ``dst``, each pointer stepping by its own."""
    cdef Py_ssize_t r
    if dst_step == nbytes and src_step == nbytes:
        memcpy(dst, src, nrows * nbytes)
        return
    for r in range(nrows):
        memcpy(dst + r * dst_step, src + r * src_step, nbytes)


cdef class JoiningThunk(NodeThunk):
    """Base of this module's thunks (:class:`opgraph_c._vm.NodeThunk`: the node, its cells,
    and ``perform`` for the rest), up to MAXDIMS dimensions."""

    def __init__(self, node, list in_cells, list out_cells):
        NodeThunk.__init__(self, node, in_cells, out_cells, MAXDIMS)


# ----------------------------------------------------------------------------------------
# Join


cdef bint _c_order_perm(list arrays, Py_ssize_t n, int nd) noexcept:
    """Whether ``np.concatenate`` of ``arrays`` allocates its output in C order.

    NumPy's ``PyArray_CreateMultiSortedStridePerm`` (the layout of ``concatenate``'s output):
    a stable insertion sort of the axes by decreasing absolute stride, where length-1
    dimensions do not vote and, between operands that disagree, C order wins. The output is
    C-ordered when that sort leaves every axis in place.
    """
    cdef int perm[MAXDIMS]
    cdef int i0, i1, ipos, j0, j1, d
    cdef bint ambig, swap
    cdef Py_ssize_t k, s0, s1
    cdef cnp.ndarray t
    for d in range(nd):
        perm[d] = d
    for i0 in range(1, nd):
        ipos = i0
        j0 = perm[i0]
        for i1 in range(i0 - 1, -1, -1):
            ambig, swap = True, False
            j1 = perm[i1]
            for k in range(n):
                t = <cnp.ndarray>arrays[k]
                if cnp.PyArray_DIM(t, j0) != 1 and cnp.PyArray_DIM(t, j1) != 1:
                    s0 = abs(cnp.PyArray_STRIDE(t, j0))
                    s1 = abs(cnp.PyArray_STRIDE(t, j1))
                    if s0 <= s1:
                        swap = False
                    elif ambig:
                        swap = True
                    ambig = False
            if not ambig:
                if swap:
                    ipos = i1
                else:
                    break
        if ipos != i0:
            return False
    return True


cdef class JoinThunk(JoiningThunk):
    """``Join``: ``np.concatenate`` of the tensors along the axis input, in the output dtype.

    Inputs that all have the output dtype and are C-contiguous (the usual case) are copied
    block by block into a new C-ordered array; other layouts and mixed dtypes go through
    NumPy's ``PyArray_Concatenate`` (perform's ``np.concatenate``, without the Python frame),
    cast to the output dtype as perform's ``astype`` does. ``Join{view=k}`` returns input
    ``k`` itself when every other input is empty along the axis and it has the output dtype.
    """

    cdef int nd, view, typenum
    cdef Py_ssize_t n, itemsize
    cdef cnp.dtype dtype
    cdef list tensors
    cdef char** src
    cdef Py_ssize_t* chunk

    def __cinit__(self):
        self.src = NULL
        self.chunk = NULL

    def __init__(self, node, list in_cells, list out_cells):
        JoiningThunk.__init__(self, node, in_cells, out_cells)
        self.nd = node.outputs[0].type.ndim
        self.n = len(node.inputs) - 1
        self.view = node.op.view
        self.dtype = np.dtype(node.outputs[0].type.dtype)
        self.typenum = self.dtype.num
        self.itemsize = self.dtype.itemsize
        self.tensors = [None] * self.n
        self.src = <char**>PyMem_Malloc(self.n * sizeof(char*))
        self.chunk = <Py_ssize_t*>PyMem_Malloc(self.n * sizeof(Py_ssize_t))
        if self.src == NULL or self.chunk == NULL:
            raise MemoryError()

    def __dealloc__(self):
        PyMem_Free(self.src)
        PyMem_Free(self.chunk)

    cdef int fast(self) except -1:
        cdef Py_ssize_t a, k, total, outer = 1, inner = 1, row = 0, o
        cdef cnp.npy_intp dims[MAXDIMS]
        cdef int d, nd = self.nd
        cdef bint blocks = True
        cdef object v
        cdef cnp.ndarray t, out
        cdef char* dst
        if not _int_scalar(self.arg(0), &a) or not -nd <= a < nd:
            return 1  # perform converts or raises
        if a < 0:
            a += nd
        for k in range(self.n):
            v = self.arg(k + 1)
            if not _exact(v) or cnp.PyArray_NDIM(<cnp.ndarray>v) != nd:
                return 1
            t = <cnp.ndarray>v
            self.tensors[k] = t
            if (not _same_type(cnp.PyArray_TYPE(t), self.typenum)
                    or not cnp.PyArray_ISNOTSWAPPED(t) or not cnp.PyArray_IS_C_CONTIGUOUS(t)):
                blocks = False
        try:
            if self.view != -1 and self._view_output(a):
                return 0
            if not blocks or not _c_order_perm(self.tensors, self.n, nd):
                return self._concatenate(a)
            # Same dtype, C-contiguous: rows of the output are the inputs' blocks side by side.
            t = <cnp.ndarray>self.tensors[0]
            for d in range(nd):
                dims[d] = cnp.PyArray_DIM(t, d)
            total = 0
            for k in range(self.n):
                t = <cnp.ndarray>self.tensors[k]
                for d in range(nd):
                    if d != a and cnp.PyArray_DIM(t, d) != dims[d]:
                        return 1  # perform raises NumPy's shape error
                if cnp.PyArray_DIM(t, a) > PY_SSIZE_T_MAX - total:
                    return 1
                total += cnp.PyArray_DIM(t, a)
            dims[a] = total
            for d in range(a):
                outer *= dims[d]
            for d in range(a + 1, nd):
                inner *= dims[d]
            out = _new_c_array(_descr(self.dtype), nd, dims)
            for k in range(self.n):
                t = <cnp.ndarray>self.tensors[k]
                self.src[k] = cnp.PyArray_BYTES(t)
                self.chunk[k] = cnp.PyArray_DIM(t, a) * inner * self.itemsize
                row += self.chunk[k]
            dst = cnp.PyArray_BYTES(out)
            if outer * row >= NOGIL_BYTES:
                with nogil:
                    self._blocks(dst, outer, row)
            else:
                self._blocks(dst, outer, row)
            self.set_out(0, out)
            return 0
        finally:
            for k in range(self.n):
                self.tensors[k] = None

    cdef void _blocks(self, char* dst, Py_ssize_t outer, Py_ssize_t row) noexcept nogil:
        """Each input's block of each outer row, in turn, into ``dst``."""
        cdef Py_ssize_t k, off = 0
        for k in range(self.n):
            if self.chunk[k]:
                _copy_rows(dst + off, row, self.src[k], self.chunk[k], outer, self.chunk[k])
                off += self.chunk[k]

    cdef bint _view_output(self, Py_ssize_t a) except -1:
        """``Join{view=k}``: input ``k`` itself when every other one is empty along ``a``."""
        cdef Py_ssize_t k
        cdef cnp.ndarray t
        for k in range(self.n):
            if k != self.view and cnp.PyArray_DIM(<cnp.ndarray>self.tensors[k], a) != 0:
                return False
        t = <cnp.ndarray>self.tensors[self.view]
        if not cnp.PyArray_EquivTypes(_dtype_of(t), self.dtype):
            return False
        self.set_out(0, t)
        return True

    cdef int _concatenate(self, Py_ssize_t a) except -1:
        """NumPy's concatenate (perform's), then the cast to the output dtype if needed."""
        cdef cnp.ndarray out, cast
        try:
            out = <cnp.ndarray>cnp.PyArray_Concatenate(self.tensors, <int>a)
        except (ValueError, TypeError):
            return 1  # perform words the error
        if not cnp.PyArray_EquivTypes(_dtype_of(out), self.dtype):
            Py_INCREF(self.dtype)  # stolen
            cast = <cnp.ndarray>PyArray_NewLikeArray(out, cnp.NPY_KEEPORDER, _descr(self.dtype),
                                                     1)
            cnp.PyArray_CopyInto(cast, out)
            out = cast
        self.set_out(0, out)
        return 0


# ----------------------------------------------------------------------------------------
# Split


cdef class SplitThunk(JoiningThunk):
    """``Split{n}``: ``n`` new C-ordered copies of consecutive pieces of ``x`` along the axis.

    The pieces of a C-contiguous ``x`` are copied block by block; other layouts are copied
    from a view of each piece (NumPy's ``PyArray_CopyInto``).
    """

    cdef int nd
    cdef Py_ssize_t n
    cdef Py_ssize_t* sizes

    def __cinit__(self):
        self.sizes = NULL

    def __init__(self, node, list in_cells, list out_cells):
        JoiningThunk.__init__(self, node, in_cells, out_cells)
        self.nd = node.inputs[0].type.ndim
        self.n = node.op.len_splits
        self.sizes = <Py_ssize_t*>PyMem_Malloc(self.n * sizeof(Py_ssize_t))
        if self.sizes == NULL:
            raise MemoryError()

    def __dealloc__(self):
        PyMem_Free(self.sizes)

    cdef int fast(self) except -1:
        cdef object x = self.arg(0), s = self.arg(2)
        cdef cnp.ndarray xa, sa, out
        cdef cnp.npy_intp dims[MAXDIMS]
        cdef cnp.npy_intp strides[MAXDIMS]
        cdef cnp.npy_int64 e
        cdef Py_ssize_t a, k, total = 0, start = 0, outer = 1, inner, itemsize
        cdef int d, nd = self.nd
        cdef list pieces
        if not _exact(x) or cnp.PyArray_NDIM(<cnp.ndarray>x) != nd:
            return 1
        xa = <cnp.ndarray>x
        if not _int_scalar(self.arg(1), &a) or not -nd <= a < nd:
            return 1
        if a < 0:
            a += nd
        if not cnp.PyArray_Check(s) or cnp.PyArray_NDIM(<cnp.ndarray>s) != 1:
            return 1
        sa = <cnp.ndarray>s
        if cnp.PyArray_DIM(sa, 0) != self.n:
            return 1
        for k in range(self.n):
            if not _read_int(sa, cnp.PyArray_BYTES(sa) + k * cnp.PyArray_STRIDE(sa, 0), &e):
                return 1
            if e < 0:
                return 1  # perform raises
            self.sizes[k] = <Py_ssize_t>e
            total += self.sizes[k]
            if total > cnp.PyArray_DIM(xa, a):
                return 1
        if total != cnp.PyArray_DIM(xa, a):
            return 1
        for d in range(nd):
            dims[d] = cnp.PyArray_DIM(xa, d)
            strides[d] = cnp.PyArray_STRIDE(xa, d)
        itemsize = cnp.PyArray_ITEMSIZE(xa)
        inner = itemsize
        for d in range(a):
            outer *= dims[d]
        for d in range(a + 1, nd):
            inner *= dims[d]
        pieces = []
        for k in range(self.n):
            dims[a] = self.sizes[k]
            out = _new_c_array(cnp.PyArray_DESCR(xa), nd, dims)
            if cnp.PyArray_SIZE(out) == 0:
                pass
            elif cnp.PyArray_IS_C_CONTIGUOUS(xa):
                self._copy(cnp.PyArray_BYTES(out), cnp.PyArray_BYTES(xa) + start * inner,
                           dims[a] * inner, cnp.PyArray_DIM(xa, a) * inner, outer)
            else:
                cnp.PyArray_CopyInto(out, _view(xa, nd, dims, strides,
                                                cnp.PyArray_BYTES(xa) + start * strides[a]))
            pieces.append(out)
            start += self.sizes[k]
        for k in range(self.n):
            self.set_out(k, pieces[k])
        return 0

    cdef void _copy(self, char* dst, const char* src, Py_ssize_t nbytes, Py_ssize_t src_row,
                    Py_ssize_t nrows):
        """``nrows`` rows of ``nbytes`` (source rows ``src_row`` bytes apart), packed."""
        if nrows * nbytes >= NOGIL_BYTES:
            with nogil:
                _copy_rows(dst, nbytes, src, src_row, nrows, nbytes)
        else:
            _copy_rows(dst, nbytes, src, src_row, nrows, nbytes)


# ----------------------------------------------------------------------------------------
# ARange


cdef int _read_real(object v, bint* is_int, cnp.npy_int64* i, double* f) except -1:
    """A real 0-d array, NumPy scalar or Python int/float as perform's ``.item()`` gives it.

    Returns 1 with integers (``is_int``) in ``i`` and, as a double, in ``f`` (at most 2**52
    in magnitude), floats (float32 or float64) in ``f`` (finite); 0 for anything else.
    """
    cdef cnp.ndarray arr
    cdef char* p
    if PyFloat_CheckExact(v):
        is_int[0] = False
        f[0] = PyFloat_AS_DOUBLE(v)
        return isfinite(f[0])
    if PyLong_CheckExact(v):
        try:
            i[0] = PyLong_AsLongLong(v)
        except OverflowError:
            return 0
        is_int[0] = True
        f[0] = <double>i[0]
        return -EXACT_INT <= i[0] <= EXACT_INT
    if not _exact(v):
        if not PyObject_TypeCheck(v, &PyGenericArrType_Type):
            return 0
        v = PyArray_FromScalar(v, NULL)  # a NumPy scalar: its 0-d array
    if cnp.PyArray_NDIM(<cnp.ndarray>v) != 0:
        return 0
    arr = <cnp.ndarray>v
    p = cnp.PyArray_BYTES(arr)
    if cnp.PyArray_ISINTEGER(arr):
        if not _read_int(arr, p, i) or not -EXACT_INT <= i[0] <= EXACT_INT:
            return 0
        is_int[0] = True
        f[0] = <double>i[0]
        return 1
    if not cnp.PyArray_ISNOTSWAPPED(arr) or not cnp.PyArray_ISALIGNED(arr):
        return 0
    is_int[0] = False
    if cnp.PyArray_TYPE(arr) == cnp.NPY_FLOAT64:
        f[0] = (<double*>p)[0]
    elif cnp.PyArray_TYPE(arr) == cnp.NPY_FLOAT32:
        f[0] = (<float*>p)[0]
    else:
        return 0
    return isfinite(f[0])


cdef bint _store_int(char* p, cnp.npy_int64 v, int typenum) noexcept:
    """``v`` into the integer element ``p`` of ``typenum``; False if out of its range."""
    if typenum == cnp.NPY_INT8:
        if not -128 <= v <= 127:
            return False
        (<cnp.npy_int8*>p)[0] = <cnp.npy_int8>v
    elif typenum == cnp.NPY_INT16:
        if not -32768 <= v <= 32767:
            return False
        (<cnp.npy_int16*>p)[0] = <cnp.npy_int16>v
    elif typenum == cnp.NPY_INT32:
        if not -2147483648 <= v <= 2147483647:
            return False
        (<cnp.npy_int32*>p)[0] = <cnp.npy_int32>v
    elif typenum == cnp.NPY_INT64:
        (<cnp.npy_int64*>p)[0] = v
    elif typenum == cnp.NPY_UINT8:
        if not 0 <= v <= 255:
            return False
        (<cnp.npy_uint8*>p)[0] = <cnp.npy_uint8>v
    elif typenum == cnp.NPY_UINT16:
        if not 0 <= v <= 65535:
            return False
        (<cnp.npy_uint16*>p)[0] = <cnp.npy_uint16>v
    elif typenum == cnp.NPY_UINT32:
        if not 0 <= v <= 4294967295:
            return False
        (<cnp.npy_uint32*>p)[0] = <cnp.npy_uint32>v
    elif typenum == cnp.NPY_UINT64:
        if v < 0:
            return False
        (<cnp.npy_uint64*>p)[0] = <cnp.npy_uint64>v
    else:
        return False
    return True


cdef class ARangeThunk(JoiningThunk):
    """``ARange``: NumPy's ``arange(start, stop, step, dtype)``, its arithmetic followed step
    for step.

    The length is ``ceil((stop - start) / step)`` in doubles (NumPy's ``_calc_length``,
    exact for the Python ints and floats perform passes, since integers are at most 2**52
    here), the first two elements are ``start`` and ``start + step`` converted to the dtype
    as NumPy's ``setitem`` does, and the rest is NumPy's own ``fill`` function of the dtype.
    Integer outputs take integer inputs; float32/float64 outputs take both.
    """

    cdef int typenum
    cdef Py_ssize_t itemsize
    cdef bint float_out
    cdef cnp.dtype dtype
    cdef fill_fn fill

    def __init__(self, node, list in_cells, list out_cells):
        JoiningThunk.__init__(self, node, in_cells, out_cells)
        self.dtype = np.dtype(node.op.dtype)
        self.typenum = self.dtype.num
        self.itemsize = self.dtype.itemsize
        self.float_out = self.dtype.kind == "f"
        self.fill = PyDataType_GetArrFuncs(_descr(self.dtype)).fill
        if self.fill == NULL:
            raise ValueError(f"{node.op}: NumPy has no fill function for {self.dtype}")

    cdef int fast(self) except -1:
        cdef bint i0 = False, i1 = False, i2 = False
        cdef cnp.npy_int64 start = 0, stop = 0, step = 0
        cdef double fstart = 0, fstop = 0, fstep = 0, diff, val, c
        cdef cnp.npy_intp length
        cdef cnp.ndarray out
        cdef char* p
        if not (_read_real(self.arg(0), &i0, &start, &fstart)
                and _read_real(self.arg(1), &i1, &stop, &fstop)
                and _read_real(self.arg(2), &i2, &step, &fstep)):
            return 1
        if fstep == 0:
            return 1  # perform raises
        if not self.float_out and not (i0 and i2):
            return 1  # NumPy's float-to-int setitem: perform
        diff = fstop - fstart
        val = diff / fstep
        if not isfinite(val):
            return 1  # perform raises NumPy's error
        if diff != 0 and val == 0:
            length = 0 if signbit(val) else 1
        else:
            c = ceil(val)
            if c > <double>MAX_ELEMENTS:
                return 1
            length = <cnp.npy_intp>c if c > 0 else 0
        out = _new_c_array(_descr(self.dtype), 1, &length)
        p = cnp.PyArray_BYTES(out)
        if length >= 1 and not self._set(p, i0 and i2, start, step, fstart, fstep, False):
            return 1
        if length >= 2 and not self._set(p + self.itemsize, i0 and i2, start, step,
                                         fstart, fstep, True):
            return 1
        if length > 2:
            if length * self.itemsize >= NOGIL_BYTES:
                with nogil:
                    self.fill(p, length, <void*>out)
            else:
                self.fill(p, length, <void*>out)
        self.set_out(0, out)
        return 0

    cdef bint _set(self, char* p, bint ints, cnp.npy_int64 start, cnp.npy_int64 step,
                   double fstart, double fstep, bint second) noexcept:
        """Element 0 (``start``) or 1 (``start + step``, the sum as Python computes it)."""
        cdef double v
        cdef float f
        if not self.float_out:
            return _store_int(p, start + step if second else start, self.typenum)
        v = fstart + fstep if second else fstart  # exact for ints <= 2**52, as Python's sum
        if self.typenum == cnp.NPY_FLOAT64:
            (<double*>p)[0] = v
            return True
        f = <float>v
        if not isfinite(f):
            return False  # NumPy warns about the overflow: perform
        (<float*>p)[0] = f
        return True


# ----------------------------------------------------------------------------------------
# Eye


cdef class EyeThunk(JoiningThunk):
    """``Eye``: ``np.eye(n, m, k, dtype)``, a new C-ordered matrix of zeros with ones on
    diagonal ``k``."""

    cdef int typenum
    cdef Py_ssize_t itemsize
    cdef bytes one

    def __init__(self, node, list in_cells, list out_cells):
        JoiningThunk.__init__(self, node, in_cells, out_cells)
        dtype = np.dtype(node.op.dtype)
        self.typenum = dtype.num
        self.itemsize = dtype.itemsize
        self.one = np.ones((), dtype=dtype).tobytes()

    cdef int fast(self) except -1:
        cdef Py_ssize_t n, m, k, r, first, last
        cdef cnp.npy_intp dims[2]
        cdef cnp.ndarray out
        cdef char* p
        cdef const char* one = self.one
        if not (_int_scalar(self.arg(0), &n) and _int_scalar(self.arg(1), &m)
                and _int_scalar(self.arg(2), &k)):
            return 1
        if n < 0 or m < 0:
            return 1  # perform raises
        if n > MAX_ELEMENTS or m > MAX_ELEMENTS or (n and m > MAX_ELEMENTS // n):
            return 1
        dims[0], dims[1] = n, m
        out = <cnp.ndarray>cnp.PyArray_ZEROS(2, dims, self.typenum, 0)
        p = cnp.PyArray_BYTES(out)
        if -n < k < m:  # the diagonal meets the matrix: rows first..last-1, column r + k
            first = -k if k < 0 else 0
            last = n if n < m - k else m - k
            for r in range(first, last):
                memcpy(p + (r * m + r + k) * self.itemsize, one, self.itemsize)
        self.set_out(0, out)
        return 0
