# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Precompiled thunks of the small structural ops every training graph has.

Shapes (``Shape``, ``Shape_i``, ``MakeVector``, ``SpecifyShape``, ``Reshape``), views
(``DimShuffle``, ``Rebroadcast``, basic ``Subtensor``), updates of a basic index
(``IncSubtensor``), allocation (``Alloc``, ``AllocEmpty``), scalar/tensor conversions and
``MaxAndArgmax``/``Argmax``. Each thunk is a :class:`opgraph_c._vm.CThunk`: the VM calls its
``run`` through the C vtable, with no Python frame, and everything that depends only on the
node (index structure, axes, dtypes) is decoded once, in the constructor.

Every thunk matches its Op's ``perform``: the same values, dtypes, views (an output that
``perform`` returns as a view of an input is a view here too, built directly from the input's
shape and strides; other outputs are new arrays) and in-place updates. A value the fast path
does not handle (an ndarray subclass, an unexpected dtype or rank, a Python number) and every
error (an index out of range, a shape mismatch) go to the Op's ``perform`` itself, called on
the same values before anything was written, so the results and error messages are exactly
``perform``'s.
"""

cimport numpy as cnp
from cpython.long cimport PyLong_CheckExact
from cpython.number cimport PyNumber_AsSsize_t
from cpython.object cimport Py_TYPE, PyObject, PyObject_TypeCheck, PyTypeObject
from cpython.ref cimport Py_INCREF
from libc.string cimport memcpy

from opgraph_c._vm cimport NodeThunk

import numpy as np

cnp.import_array()


cdef extern from "numpy/arrayobject.h":
    PyTypeObject PyArray_Type
    PyTypeObject PyLongArrType_Type  # np.int64's type where C long is 64 bits
    PyTypeObject PyIntegerArrType_Type  # np.integer
    ctypedef struct PyLongScalarObject:
        long obval
    # Steals a reference to descr.
    object PyArray_NewFromDescr(PyTypeObject* subtype, cnp.PyArray_Descr* descr, int nd,
                                cnp.npy_intp* dims, cnp.npy_intp* strides, void* data,
                                int flags, PyObject* obj)
    object PyArray_Scalar(void* data, cnp.PyArray_Descr* descr, object base)
    object PyArray_FromScalar(object scalar, cnp.PyArray_Descr* outcode)

cdef extern from "Python.h":
    Py_ssize_t PySlice_AdjustIndices(Py_ssize_t length, Py_ssize_t* start, Py_ssize_t* stop,
                                     Py_ssize_t step) noexcept
    Py_ssize_t PY_SSIZE_T_MAX
    Py_ssize_t PY_SSIZE_T_MIN


cdef enum:
    MAXDIMS = 64
    # Release the GIL for argmax loops over at least this many elements.
    NOGIL_SIZE = 4096
    # Index program: how an entry or slice bound gets its value.
    PART_NONE = 0
    PART_CONST = 1
    PART_INPUT = 2


# ----------------------------------------------------------------------------------------
# helpers


cdef inline bint _exact(object x) noexcept:
    """``x`` is an ndarray, not a subclass (a subclass takes perform, which keeps its type)."""
    return cnp.PyArray_CheckExact(x)


cdef bint _read_int(object a, Py_ssize_t k, cnp.npy_int64* out) noexcept:
    """Element ``k`` of the integer ndarray ``a`` (native, aligned) as int64; False if not."""
    cdef cnp.ndarray arr = <cnp.ndarray>a
    cdef char* p = cnp.PyArray_BYTES(arr)
    cdef cnp.npy_uint64 u
    if cnp.PyArray_NDIM(arr) > 0:
        p += k * cnp.PyArray_STRIDE(arr, 0)
    if not cnp.PyArray_ISNOTSWAPPED(arr) or not cnp.PyArray_ISALIGNED(arr):
        return False
    if not cnp.PyArray_ISINTEGER(arr):
        return False
    if cnp.PyArray_ISSIGNED(arr):
        if cnp.PyArray_ITEMSIZE(arr) == 8:
            out[0] = (<cnp.npy_int64*>p)[0]
        elif cnp.PyArray_ITEMSIZE(arr) == 4:
            out[0] = (<cnp.npy_int32*>p)[0]
        elif cnp.PyArray_ITEMSIZE(arr) == 2:
            out[0] = (<cnp.npy_int16*>p)[0]
        elif cnp.PyArray_ITEMSIZE(arr) == 1:
            out[0] = (<cnp.npy_int8*>p)[0]
        else:
            return False
        return True
    if cnp.PyArray_ITEMSIZE(arr) == 8:
        u = (<cnp.npy_uint64*>p)[0]
        if u > <cnp.npy_uint64>0x7FFFFFFFFFFFFFFF:
            return False
        out[0] = <cnp.npy_int64>u
    elif cnp.PyArray_ITEMSIZE(arr) == 4:
        out[0] = (<cnp.npy_uint32*>p)[0]
    elif cnp.PyArray_ITEMSIZE(arr) == 2:
        out[0] = (<cnp.npy_uint16*>p)[0]
    elif cnp.PyArray_ITEMSIZE(arr) == 1:
        out[0] = (<cnp.npy_uint8*>p)[0]
    else:
        return False
    return True


cdef bint _int_vector(object v, Py_ssize_t n, cnp.npy_intp* out) noexcept:
    """The integer vector ``v`` of length ``n`` into ``out``; False if ``v`` is not one."""
    cdef cnp.npy_int64 e
    cdef Py_ssize_t k
    if not cnp.PyArray_Check(v) or cnp.PyArray_NDIM(<cnp.ndarray>v) != 1:
        return False
    if cnp.PyArray_DIM(<cnp.ndarray>v, 0) != n:
        return False
    for k in range(n):
        if not _read_int(v, k, &e):
            return False
        out[k] = <cnp.npy_intp>e
    return True


cdef bint _int_scalar(object v, Py_ssize_t* out):
    """The integer scalar (NumPy or Python) or integer 0-d array ``v``; False if not one."""
    cdef cnp.npy_int64 e
    if Py_TYPE(v) == &PyLongArrType_Type and sizeof(long) == sizeof(Py_ssize_t):
        out[0] = (<PyLongScalarObject*><PyObject*>v).obval
        return True
    if cnp.PyArray_Check(v):
        if cnp.PyArray_NDIM(<cnp.ndarray>v) != 0 or not _read_int(v, 0, &e):
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


cdef inline bint _same_type(int a, int b):
    """Two type numbers of the same dtype (int64 is NPY_LONG or NPY_LONGLONG)."""
    return a == b or cnp.PyArray_EquivTypenums(a, b)


cdef cnp.ndarray _view(cnp.ndarray base, int nd, cnp.npy_intp* dims, cnp.npy_intp* strides,
                       char* data):
    """A view of ``base``'s memory with the given shape, strides and first element."""
    cdef cnp.PyArray_Descr* descr = cnp.PyArray_DESCR(base)
    cdef int flags = cnp.NPY_ARRAY_WRITEABLE if cnp.PyArray_ISWRITEABLE(base) else 0
    Py_INCREF(<object><PyObject*>descr)  # stolen by PyArray_NewFromDescr
    cdef cnp.ndarray out = <cnp.ndarray>PyArray_NewFromDescr(
        &PyArray_Type, descr, nd, dims, strides, data, flags, NULL
    )
    cnp.set_array_base(out, base)
    return out


cdef inline cnp.ndarray _int64_array(int nd, cnp.npy_intp* dims):
    return <cnp.ndarray>cnp.PyArray_EMPTY(nd, dims, cnp.NPY_INT64, 0)


cdef class StructureThunk(NodeThunk):
    """Base of this module's thunks (:class:`opgraph_c._vm.NodeThunk`: the node, its cells,
    and ``perform`` for the rest)."""


# ----------------------------------------------------------------------------------------
# identity and copy (compile/ops.py)


cdef class ViewThunk(StructureThunk):
    """``ViewOp``: the input itself (any value)."""

    cdef int fast(self) except -1:
        self.set_out(0, self.arg(0))
        return 0


cdef class DeepCopyThunk(StructureThunk):
    """``DeepCopyOp``: a C-ordered copy of an ndarray (anything else: perform's deepcopy)."""

    cdef int fast(self) except -1:
        cdef object x = self.arg(0)
        if not _exact(x):
            return 1
        self.set_out(0, cnp.PyArray_NewCopy(<cnp.ndarray>x, cnp.NPY_CORDER))
        return 0


# ----------------------------------------------------------------------------------------
# shapes


cdef class ShapeThunk(StructureThunk):
    """``Shape``: the input's shape as a new int64 vector."""

    cdef int fast(self) except -1:
        cdef object x = self.arg(0)
        cdef cnp.npy_intp n
        cdef cnp.ndarray out
        cdef cnp.npy_int64* p
        cdef int d
        if not cnp.PyArray_Check(x):
            return 1
        n = cnp.PyArray_NDIM(<cnp.ndarray>x)
        out = _int64_array(1, &n)
        p = <cnp.npy_int64*>cnp.PyArray_DATA(out)
        for d in range(n):
            p[d] = cnp.PyArray_DIM(<cnp.ndarray>x, d)
        self.set_out(0, out)
        return 0


cdef class ShapeIThunk(StructureThunk):
    """``Shape_i{i}``: the length of dimension ``i`` as a new 0-d int64 array."""

    cdef int i

    def __init__(self, node, list in_cells, list out_cells, int i):
        StructureThunk.__init__(self, node, in_cells, out_cells)
        self.i = i

    cdef int fast(self) except -1:
        cdef object x = self.arg(0)
        cdef cnp.ndarray out
        if not cnp.PyArray_Check(x) or cnp.PyArray_NDIM(<cnp.ndarray>x) <= self.i:
            return 1
        out = _int64_array(0, NULL)
        (<cnp.npy_int64*>cnp.PyArray_DATA(out))[0] = cnp.PyArray_DIM(<cnp.ndarray>x, self.i)
        self.set_out(0, out)
        return 0


cdef class MakeVectorThunk(StructureThunk):
    """``MakeVector``: the 0-d inputs copied into a new vector of the op's dtype."""

    cdef int typenum
    cdef Py_ssize_t itemsize

    def __init__(self, node, list in_cells, list out_cells, dtype):
        StructureThunk.__init__(self, node, in_cells, out_cells)
        self.typenum = np.dtype(dtype).num
        self.itemsize = np.dtype(dtype).itemsize

    cdef int fast(self) except -1:
        cdef cnp.npy_intp n = len(self.in_cells)
        cdef cnp.ndarray out = <cnp.ndarray>cnp.PyArray_EMPTY(1, &n, self.typenum, 0)
        cdef char* dst = cnp.PyArray_BYTES(out)
        cdef object v
        cdef Py_ssize_t k
        for k in range(n):
            v = self.arg(k)
            if (not _exact(v) or cnp.PyArray_NDIM(<cnp.ndarray>v) != 0
                    or not _same_type(cnp.PyArray_TYPE(<cnp.ndarray>v), self.typenum)
                    or not cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>v)):
                return 1
            memcpy(dst + k * self.itemsize, cnp.PyArray_DATA(<cnp.ndarray>v), self.itemsize)
        self.set_out(0, out)
        return 0


cdef class SpecifyShapeThunk(StructureThunk):
    """``SpecifyShape``: the input itself, once its shape is checked."""

    cdef int fast(self) except -1:
        cdef object x = self.arg(0)
        cdef cnp.npy_intp shape[MAXDIMS]
        cdef int nd, d
        if not cnp.PyArray_Check(x):
            return 1
        nd = cnp.PyArray_NDIM(<cnp.ndarray>x)
        if not _int_vector(self.arg(1), nd, shape):
            return 1
        for d in range(nd):
            if shape[d] != cnp.PyArray_DIM(<cnp.ndarray>x, d):
                return 1
        self.set_out(0, x)
        return 0


cdef class RebroadcastThunk(StructureThunk):
    """``Rebroadcast``: the input itself, once the dimensions made broadcastable are 1."""

    cdef int nd, nchecks
    cdef int checks[MAXDIMS]

    def __init__(self, node, list in_cells, list out_cells, int ndim, checks):
        StructureThunk.__init__(self, node, in_cells, out_cells)
        self.nd = ndim
        self.nchecks = len(checks)
        for k, a in enumerate(checks):
            self.checks[k] = a

    cdef int fast(self) except -1:
        cdef object x = self.arg(0)
        cdef int k
        if not cnp.PyArray_Check(x) or cnp.PyArray_NDIM(<cnp.ndarray>x) != self.nd:
            return 1
        for k in range(self.nchecks):
            if cnp.PyArray_DIM(<cnp.ndarray>x, self.checks[k]) != 1:
                return 1
        self.set_out(0, x)
        return 0


cdef class ReshapeThunk(StructureThunk):
    """``Reshape{ndim}``: NumPy's reshape (a view when possible) to the shape input."""

    cdef int ndim

    def __init__(self, node, list in_cells, list out_cells, int ndim):
        StructureThunk.__init__(self, node, in_cells, out_cells)
        self.ndim = ndim

    cdef int fast(self) except -1:
        cdef object x = self.arg(0)
        cdef cnp.npy_intp shape[MAXDIMS]
        cdef cnp.PyArray_Dims newshape
        if not _exact(x) or not _int_vector(self.arg(1), self.ndim, shape):
            return 1
        newshape.ptr = shape
        newshape.len = self.ndim
        try:
            out = cnp.PyArray_Newshape(<cnp.ndarray>x, &newshape, cnp.NPY_CORDER)
        except ValueError:
            return 1  # perform words the error
        self.set_out(0, out)
        return 0


cdef class ScalarFromTensorThunk(StructureThunk):
    """``ScalarFromTensor``: the NumPy scalar held by a 0-d array (``x[()]``)."""

    cdef int fast(self) except -1:
        cdef object x = self.arg(0)
        if not _exact(x) or cnp.PyArray_NDIM(<cnp.ndarray>x) != 0:
            return 1
        self.set_out(0, PyArray_Scalar(cnp.PyArray_DATA(<cnp.ndarray>x),
                                       cnp.PyArray_DESCR(<cnp.ndarray>x), x))
        return 0


cdef class TensorFromScalarThunk(StructureThunk):
    """``TensorFromScalar``: a new 0-d array holding a NumPy scalar of the output dtype."""

    cdef object scalar_type

    def __init__(self, node, list in_cells, list out_cells, dtype):
        StructureThunk.__init__(self, node, in_cells, out_cells)
        self.scalar_type = np.dtype(dtype).type

    cdef int fast(self) except -1:
        cdef object s = self.arg(0)
        if type(s) is not self.scalar_type:
            return 1
        self.set_out(0, PyArray_FromScalar(s, NULL))
        return 0


# ----------------------------------------------------------------------------------------
# DimShuffle


cdef class DimShuffleThunk(StructureThunk):
    """``DimShuffle``: a view with the dimensions reordered, added ('x') or dropped.

    The non-inplace op returns a C-contiguous copy of that view, as its perform does.
    """

    cdef int in_nd, out_nd, ndrop
    cdef bint inplace
    cdef int src[MAXDIMS]
    cdef int drop[MAXDIMS]

    def __init__(self, node, list in_cells, list out_cells, int in_ndim, new_order, drop,
                 bint inplace):
        StructureThunk.__init__(self, node, in_cells, out_cells)
        self.in_nd = in_ndim
        self.out_nd = len(new_order)
        self.ndrop = len(drop)
        self.inplace = inplace
        for k, o in enumerate(new_order):
            self.src[k] = -1 if o == "x" else o
        for k, d in enumerate(drop):
            self.drop[k] = d

    cdef int fast(self) except -1:
        cdef object x = self.arg(0)
        cdef cnp.ndarray a
        cdef cnp.npy_intp dims[MAXDIMS]
        cdef cnp.npy_intp strides[MAXDIMS]
        cdef int k, s
        if not _exact(x) or cnp.PyArray_NDIM(<cnp.ndarray>x) != self.in_nd:
            return 1
        a = <cnp.ndarray>x
        for k in range(self.ndrop):
            if cnp.PyArray_DIM(a, self.drop[k]) != 1:
                return 1  # perform's reshape raises
        for k in range(self.out_nd - 1, -1, -1):
            s = self.src[k]
            if s >= 0:
                dims[k] = cnp.PyArray_DIM(a, s)
                strides[k] = cnp.PyArray_STRIDE(a, s)
            else:
                dims[k] = 1
                if k + 1 < self.out_nd:
                    strides[k] = strides[k + 1] * dims[k + 1]
                else:
                    strides[k] = cnp.PyArray_ITEMSIZE(a)
        view = _view(a, self.out_nd, dims, strides, cnp.PyArray_BYTES(a))
        if not self.inplace:
            view = cnp.PyArray_NewCopy(view, cnp.NPY_CORDER)
        self.set_out(0, view)
        return 0


# ----------------------------------------------------------------------------------------
# basic indexing


cdef class IndexProgram:
    """A basic index (``idx_list``) decoded once: per entry an int or a slice of 3 parts.

    Each value is a constant or the value of a node input (an integer scalar).

    Parameters
    ----------
    ndim
        The indexed tensor's number of dimensions.
    entries
        Per index entry, ``(is_slice, parts)``: ``parts`` holds one ``(mode, value)`` pair
        for an int, three (start, stop, step) for a slice; mode is 0 (None), 1 (the constant
        ``value``) or 2 (the value of input ``value``).
    """

    cdef int ndim, nent
    cdef unsigned char is_slice[MAXDIMS]
    cdef unsigned char mode[MAXDIMS][3]
    cdef cnp.npy_int64 value[MAXDIMS][3]

    def __init__(self, int ndim, entries):
        if not len(entries) <= ndim <= MAXDIMS:
            raise ValueError(f"an index of {len(entries)} entries for {ndim} dimensions")
        self.ndim = ndim
        self.nent = len(entries)
        for d, (is_slice, parts) in enumerate(entries):
            self.is_slice[d] = bool(is_slice)
            for p in range(3):
                self.mode[d][p] = PART_NONE
                self.value[d][p] = 0
            for p, (mode, value) in enumerate(parts):
                self.mode[d][p] = mode
                self.value[d][p] = value

    cdef bint part(self, list in_cells, int d, int p, Py_ssize_t* out):
        """Entry ``d``'s part ``p`` into ``out``; False if its input is not an integer."""
        cdef unsigned char m = self.mode[d][p]
        if m == PART_CONST:
            out[0] = <Py_ssize_t>self.value[d][p]
            return True
        return _int_scalar((<list>in_cells[self.value[d][p]])[0], out)

    cdef object apply(self, cnp.ndarray x, list in_cells):
        """The view ``x[idx]``, or None when perform must take over (it raises)."""
        cdef cnp.npy_intp dims[MAXDIMS]
        cdef cnp.npy_intp strides[MAXDIMS]
        cdef char* data = cnp.PyArray_BYTES(x)
        cdef Py_ssize_t n, s, i, start, stop, step
        cdef int d, od = 0
        if cnp.PyArray_NDIM(x) != self.ndim:
            return None
        for d in range(self.nent):
            n = cnp.PyArray_DIM(x, d)
            s = cnp.PyArray_STRIDE(x, d)
            if not self.is_slice[d]:
                if not self.part(in_cells, d, 0, &i):
                    return None
                if i < 0:
                    i += n
                if i < 0 or i >= n:
                    return None  # perform raises NumPy's IndexError
                data += i * s
                continue
            step = 1
            if self.mode[d][2] != PART_NONE:
                if not self.part(in_cells, d, 2, &step):
                    return None
                if step == 0:
                    return None  # perform raises "slice step cannot be zero"
                if step < -PY_SSIZE_T_MAX:
                    step = -PY_SSIZE_T_MAX
            if self.mode[d][0] == PART_NONE:
                start = PY_SSIZE_T_MAX if step < 0 else 0
            elif not self.part(in_cells, d, 0, &start):
                return None
            if self.mode[d][1] == PART_NONE:
                stop = PY_SSIZE_T_MIN if step < 0 else PY_SSIZE_T_MAX
            elif not self.part(in_cells, d, 1, &stop):
                return None
            dims[od] = PySlice_AdjustIndices(n, &start, &stop, step)
            strides[od] = s * step
            data += start * s
            od += 1
        for d in range(self.nent, self.ndim):
            dims[od] = cnp.PyArray_DIM(x, d)
            strides[od] = cnp.PyArray_STRIDE(x, d)
            od += 1
        return _view(x, od, dims, strides, data)


cdef class SubtensorThunk(StructureThunk):
    """``Subtensor``: the view ``x[idx]`` (integers and slices), as its perform returns."""

    cdef IndexProgram index

    def __init__(self, node, list in_cells, list out_cells, IndexProgram index):
        StructureThunk.__init__(self, node, in_cells, out_cells)
        self.index = index

    cdef int fast(self) except -1:
        cdef object x = self.arg(0)
        if not _exact(x):
            return 1
        view = self.index.apply(<cnp.ndarray>x, self.in_cells)
        if view is None:
            return 1
        self.set_out(0, view)
        return 0


cdef class IncSubtensorThunk(StructureThunk):
    """``IncSubtensor``: ``x[idx] += y`` or ``x[idx] = y``, on ``x`` (inplace) or a copy.

    The index and ``y``'s shape are checked before anything is written; on any problem the
    Op's perform runs instead and raises its own error.
    """

    cdef IndexProgram index
    cdef bint inplace, set_
    cdef int ynd
    cdef unsigned char ybcast[MAXDIMS]
    cdef object add, add_kwargs

    def __init__(self, node, list in_cells, list out_cells, IndexProgram index, bint inplace,
                 bint set_instead_of_inc, y_broadcastable):
        StructureThunk.__init__(self, node, in_cells, out_cells)
        self.index = index
        self.inplace = inplace
        self.set_ = set_instead_of_inc
        self.ynd = len(y_broadcastable)
        for d, b in enumerate(y_broadcastable):
            self.ybcast[d] = bool(b)
        self.add = np.add
        self.add_kwargs = {"casting": "unsafe"}

    cdef int fast(self) except -1:
        cdef object x = self.arg(0), y = self.arg(1)
        cdef cnp.ndarray xa, ya, view
        cdef int d, off
        cdef cnp.npy_intp n, t
        if not _exact(x) or not _exact(y):
            return 1
        xa, ya = <cnp.ndarray>x, <cnp.ndarray>y
        if cnp.PyArray_NDIM(ya) != self.ynd:
            return 1
        if self.inplace and not cnp.PyArray_ISWRITEABLE(xa):
            return 1
        v = self.index.apply(xa, self.in_cells)
        if v is None:
            return 1
        view = <cnp.ndarray>v
        off = cnp.PyArray_NDIM(view) - self.ynd
        if off < 0:
            return 1
        for d in range(self.ynd):
            n = cnp.PyArray_DIM(ya, d)
            t = cnp.PyArray_DIM(view, off + d)
            if n != t and (n != 1 or not self.ybcast[d]):
                return 1  # perform raises check_inc_shape's (or NumPy's) error
        if not self.inplace:
            xa = <cnp.ndarray>cnp.PyArray_NewCopy(xa, cnp.NPY_CORDER)
            view = <cnp.ndarray>self.index.apply(xa, self.in_cells)
        if self.set_:
            cnp.PyArray_CopyInto(view, ya)
        else:
            self.add(view, ya, view, **self.add_kwargs)
        self.set_out(0, xa)
        return 0


# ----------------------------------------------------------------------------------------
# allocation


cdef class AllocThunk(StructureThunk):
    """``Alloc``: a new array of the given shape filled with the value (zeros when it is 0)."""

    cdef int typenum, nd, vnd
    cdef unsigned char vbcast[MAXDIMS]

    def __init__(self, node, list in_cells, list out_cells, dtype, value_broadcastable):
        StructureThunk.__init__(self, node, in_cells, out_cells)
        self.typenum = np.dtype(dtype).num
        self.nd = len(in_cells) - 1
        self.vnd = len(value_broadcastable)
        for d, b in enumerate(value_broadcastable):
            self.vbcast[d] = bool(b)

    cdef int fast(self) except -1:
        cdef object v = self.arg(0)
        cdef cnp.ndarray va, out
        cdef cnp.npy_intp shape[MAXDIMS]
        cdef cnp.npy_intp n
        cdef int d, off = self.nd - self.vnd
        if not _exact(v) or cnp.PyArray_NDIM(<cnp.ndarray>v) != self.vnd:
            return 1
        va = <cnp.ndarray>v
        for d in range(self.nd):
            if not _int_scalar(self.arg(d + 1), <Py_ssize_t*>&shape[d]) or shape[d] < 0:
                return 1
        for d in range(self.vnd):
            n = cnp.PyArray_DIM(va, d)
            if n != shape[off + d] and (n != 1 or not self.vbcast[d]):
                return 1  # perform raises
        if cnp.PyArray_SIZE(va) == 1 and not cnp.PyArray_GETITEM(va, cnp.PyArray_DATA(va)):
            out = <cnp.ndarray>cnp.PyArray_ZEROS(self.nd, shape, self.typenum, 0)
        else:
            out = <cnp.ndarray>cnp.PyArray_EMPTY(self.nd, shape, self.typenum, 0)
            cnp.PyArray_CopyInto(out, va)
        self.set_out(0, out)
        return 0


cdef class AllocEmptyThunk(StructureThunk):
    """``AllocEmpty``: a new array of the given shape (zeros, as perform returns)."""

    cdef int typenum, nd

    def __init__(self, node, list in_cells, list out_cells, dtype):
        StructureThunk.__init__(self, node, in_cells, out_cells)
        self.typenum = np.dtype(dtype).num
        self.nd = len(in_cells)

    cdef int fast(self) except -1:
        cdef cnp.npy_intp shape[MAXDIMS]
        cdef int d
        for d in range(self.nd):
            if not _int_scalar(self.arg(d), <Py_ssize_t*>&shape[d]) or shape[d] < 0:
                return 1
        self.set_out(0, cnp.PyArray_ZEROS(self.nd, shape, self.typenum, 0))
        return 0


# ----------------------------------------------------------------------------------------
# MaxAndArgmax, Argmax


ctypedef fused real_t:
    float
    double
    signed char
    short
    int
    long long
    unsigned char
    unsigned short
    unsigned int
    unsigned long long


cdef void _argmax_rows(real_t* kind, const char* x, Py_ssize_t K, Py_ssize_t R,
                       Py_ssize_t sk, Py_ssize_t sr, char* maxout,
                       cnp.npy_int64* argout) noexcept nogil:
    """Per row k of K: the maximum of R values (byte strides sk, sr) and its first index.

    As NumPy: the first NaN of a row is its maximum (floats). ``maxout`` may be NULL.
    """
    cdef Py_ssize_t k, r, best_r
    cdef const char* row
    cdef real_t best, v
    for k in range(K):
        row = x + k * sk
        best = (<const real_t*>row)[0]
        best_r = 0
        if real_t is float or real_t is double:
            if best == best:
                for r in range(1, R):
                    v = (<const real_t*>(row + r * sr))[0]
                    if not (v <= best):  # greater, or NaN
                        best = v
                        best_r = r
                        if v != v:
                            break
        else:
            for r in range(1, R):
                v = (<const real_t*>(row + r * sr))[0]
                if v > best:
                    best = v
                    best_r = r
        if maxout != NULL:
            (<real_t*>maxout)[k] = best
        argout[k] = best_r


cdef bint _collapse(cnp.npy_intp* dims, cnp.npy_intp* strides, int lo, int hi,
                    Py_ssize_t itemsize, Py_ssize_t* stride) noexcept:
    """Whether dims ``lo..hi`` walk like one dimension in C order; its stride if so."""
    cdef int d, last = -1
    for d in range(hi - 1, lo - 1, -1):
        if dims[d] == 1:
            continue
        if last >= 0 and strides[d] != strides[last] * dims[last]:
            return False
        if last < 0:
            stride[0] = strides[d]
        last = d
    if last < 0:
        stride[0] = itemsize
    return True


cdef class ArgmaxThunk(StructureThunk):
    """``MaxAndArgmax`` (both outputs) or ``Argmax``: the maximum over ``axes`` and the flat
    index (C order over the reduced axes) of its first occurrence, in C.

    The input is seen as (kept, reduced) rows: a view when the kept and the reduced axes
    each collapse to one stride, else a C-contiguous copy of the permuted input.
    """

    cdef int nd, nkeep, with_max, out_typenum
    cdef int perm[MAXDIMS]
    cdef char kind
    cdef Py_ssize_t itemsize

    def __init__(self, node, list in_cells, list out_cells, axes, bint with_max):
        StructureThunk.__init__(self, node, in_cells, out_cells)
        dtype = np.dtype(node.inputs[0].type.dtype)
        self.nd = node.inputs[0].type.ndim
        keep = [d for d in range(self.nd) if d not in axes]
        self.nkeep = len(keep)
        for k, d in enumerate(keep + sorted(axes)):
            self.perm[k] = d
        self.with_max = with_max
        self.out_typenum = dtype.num
        self.kind = ord(dtype.kind)
        self.itemsize = dtype.itemsize

    cdef int fast(self) except -1:
        cdef object x = self.arg(0)
        cdef cnp.ndarray a, mx = None, am
        cdef cnp.npy_intp dims[MAXDIMS]
        cdef cnp.npy_intp strides[MAXDIMS]
        cdef Py_ssize_t K = 1, R = 1, sk = 0, sr = 0
        cdef char* maxp = NULL
        cdef int d, nd = self.nd, nk = self.nkeep
        if not _exact(x) or cnp.PyArray_NDIM(<cnp.ndarray>x) != nd:
            return 1
        a = <cnp.ndarray>x
        if (not _same_type(cnp.PyArray_TYPE(a), self.out_typenum)
                or not cnp.PyArray_ISNOTSWAPPED(a) or not cnp.PyArray_ISALIGNED(a)):
            return 1
        for d in range(nd):
            dims[d] = cnp.PyArray_DIM(a, self.perm[d])
            strides[d] = cnp.PyArray_STRIDE(a, self.perm[d])
            if d < nk:
                K *= dims[d]
            else:
                R *= dims[d]
                if dims[d] == 0:
                    return 1  # perform raises "cannot reduce an empty array"
        if not (_collapse(dims, strides, 0, nk, self.itemsize, &sk)
                and _collapse(dims, strides, nk, nd, self.itemsize, &sr)):
            a = _view(a, nd, dims, strides, cnp.PyArray_BYTES(a))
            a = <cnp.ndarray>cnp.PyArray_NewCopy(a, cnp.NPY_CORDER)
            sr = self.itemsize
            sk = R * self.itemsize
        am = _int64_array(nk, dims)
        if self.with_max:
            mx = <cnp.ndarray>cnp.PyArray_EMPTY(nk, dims, self.out_typenum, 0)
            maxp = cnp.PyArray_BYTES(mx)
        if K * R >= NOGIL_SIZE:
            with nogil:
                self._loop(cnp.PyArray_BYTES(a), K, R, sk, sr, maxp,
                           <cnp.npy_int64*>cnp.PyArray_DATA(am))
        else:
            self._loop(cnp.PyArray_BYTES(a), K, R, sk, sr, maxp,
                       <cnp.npy_int64*>cnp.PyArray_DATA(am))
        if self.with_max:
            self.set_out(0, mx)
            self.set_out(1, am)
        else:
            self.set_out(0, am)
        return 0

    cdef void _loop(self, const char* x, Py_ssize_t K, Py_ssize_t R, Py_ssize_t sk,
                    Py_ssize_t sr, char* maxp, cnp.npy_int64* argp) noexcept nogil:
        cdef Py_ssize_t size = self.itemsize
        if self.kind == b"f":
            if size == 4:
                _argmax_rows(<float*>NULL, x, K, R, sk, sr, maxp, argp)
            else:
                _argmax_rows(<double*>NULL, x, K, R, sk, sr, maxp, argp)
        elif self.kind == b"i":
            if size == 1:
                _argmax_rows(<signed char*>NULL, x, K, R, sk, sr, maxp, argp)
            elif size == 2:
                _argmax_rows(<short*>NULL, x, K, R, sk, sr, maxp, argp)
            elif size == 4:
                _argmax_rows(<int*>NULL, x, K, R, sk, sr, maxp, argp)
            else:
                _argmax_rows(<long long*>NULL, x, K, R, sk, sr, maxp, argp)
        else:
            if size == 1:
                _argmax_rows(<unsigned char*>NULL, x, K, R, sk, sr, maxp, argp)
            elif size == 2:
                _argmax_rows(<unsigned short*>NULL, x, K, R, sk, sr, maxp, argp)
            elif size == 4:
                _argmax_rows(<unsigned int*>NULL, x, K, R, sk, sr, maxp, argp)
            else:
                _argmax_rows(<unsigned long long*>NULL, x, K, R, sk, sr, maxp, argp)
