"""C kernels of ``mul_s_d`` (sparse times a dense matrix or scalar) and
``structured_add_s_v`` (a row vector added to the stored values), for backend-c's ``c``
linker.

One generated module serves both Ops, every float32/float64 combination and int32/int64
indices (Cython fused types), for csr and csc alike: a csc matrix is walked as the csr
matrix of its transpose, by swapping the dense operand's strides. The rows (columns for
csc) are split across threads with OpenMP when the matrix stores many values.

The thunks compute only the new ``data`` array and build the result exactly as
``perform`` does (``type(x)((data, indices.copy(), indptr.copy()), shape)``), so class,
dtype, pattern (stored zeros included) and index dtype are perform's. Anything unusual
(another dtype, a subclass, a scalar times an empty matrix, a shape mismatch, inconsistent
``indptr``, an index out of range) runs ``perform`` on the same values, with nothing
written before: its result or error is the thunk's.

Imported only through the ``opgraph_c_kernels`` hook. It never imports ``opgraph_c``:
``CModule`` and ``PERFORM`` come from the registry the hook hands over (:func:`register`
keeps it); the generated source cimports backend-c's ``.pxd`` files.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from opgraph_sparse.arith import StructuredAddSV
from opgraph_sparse.basic import MulSD

#: backend-c's kernel toolkit (``CModule``, ``PERFORM``): the registry given to
#: :func:`register`, whose entries run only after it was called.
_c: Any = SimpleNamespace()

#: Keys the compile cache with the source; bump it when the module must be rebuilt
#: although SOURCE is unchanged (the thunk factories changed).
ARITH_C_VERSION = 1

#: The dtypes the loops handle; other value dtypes run perform.
FLOAT_DTYPES = frozenset({"float32", "float64"})

#: Below this many stored values the loop runs on one thread (threads cost more).
PARALLEL_NNZ = 200_000

SOURCE = f"""\
# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: binding=False, auto_pickle=False, initializedcheck=False
# mul_s_d (sparse times dense matrix or scalar) and structured_add_s_v (sparse plus row
# vector on the stored values) over the compressed arrays of a csr or csc matrix.
from cpython.buffer cimport PyBUF_ANY_CONTIGUOUS, PyBUF_RECORDS_RO, PyBUF_WRITABLE
from cpython.buffer cimport PyBuffer_Release, PyObject_GetBuffer
from cython.parallel cimport prange
from libc.stdint cimport int32_t, int64_t
from opgraph_c._vm cimport NodeThunk

import numpy as np

ctypedef fused src_t:
    float
    double

ctypedef fused dense_t:
    float
    double

ctypedef fused out_t:
    float
    double

ctypedef fused index_t:
    int32_t
    int64_t

cdef Py_ssize_t PARALLEL_NNZ = {PARALLEL_NNZ}


cdef Py_ssize_t check_ptr(const index_t* ptr, Py_ssize_t n_major, Py_ssize_t nnz) noexcept nogil:
    # 0 if ptr starts at 0, never decreases and ends at nnz; else 1.
    cdef Py_ssize_t i
    if ptr[0] != 0 or ptr[n_major] != nnz:
        return 1
    for i in range(n_major):
        if ptr[i] > ptr[i + 1]:
            return 1
    return 0


cdef Py_ssize_t mul_matrix(const src_t* data, const index_t* ind, const index_t* ptr,
                           Py_ssize_t n_major, Py_ssize_t n_minor, const char* y,
                           Py_ssize_t s_major, Py_ssize_t s_minor, dense_t* tag,
                           out_t* out) noexcept nogil:
    # out[k] = data[k] * y[major, minor(k)]; returns how many indices were out of range
    # (those entries are left unwritten and the caller discards out).
    cdef Py_ssize_t i, k, j, bad = 0
    cdef Py_ssize_t nnz = ptr[n_major]
    if nnz >= PARALLEL_NNZ:
        for i in prange(n_major, schedule="guided"):
            for k in range(ptr[i], ptr[i + 1]):
                j = ind[k]
                if j < 0 or j >= n_minor:
                    bad += 1
                else:
                    out[k] = (<out_t>data[k]) * (<out_t>(<const dense_t*>(
                        y + i * s_major + j * s_minor))[0])
    else:
        for i in range(n_major):
            for k in range(ptr[i], ptr[i + 1]):
                j = ind[k]
                if j < 0 or j >= n_minor:
                    bad += 1
                else:
                    out[k] = (<out_t>data[k]) * (<out_t>(<const dense_t*>(
                        y + i * s_major + j * s_minor))[0])
    return bad


cdef void mul_scalar(const src_t* data, Py_ssize_t nnz, out_t s, out_t* out) noexcept nogil:
    cdef Py_ssize_t k
    for k in range(nnz):
        out[k] = (<out_t>data[k]) * s


cdef Py_ssize_t add_row(const src_t* data, const index_t* ind, const index_t* ptr,
                        Py_ssize_t n_major, Py_ssize_t n_minor, bint by_major,
                        const char* y, Py_ssize_t s_y, out_t* out) noexcept nogil:
    # out[k] = data[k] + y[column of k]; the column is the minor index (csr) or the major
    # one (csc, by_major). Returns how many minor indices were out of range.
    cdef Py_ssize_t i, k, j, col, bad = 0
    cdef Py_ssize_t nnz = ptr[n_major]
    if nnz >= PARALLEL_NNZ:
        for i in prange(n_major, schedule="guided"):
            for k in range(ptr[i], ptr[i + 1]):
                j = ind[k]
                if j < 0 or j >= n_minor:
                    bad += 1
                else:
                    col = i if by_major else j
                    out[k] = (<out_t>data[k]) + (<const out_t*>(y + col * s_y))[0]
    else:
        for i in range(n_major):
            for k in range(ptr[i], ptr[i + 1]):
                j = ind[k]
                if j < 0 or j >= n_minor:
                    bad += 1
                else:
                    col = i if by_major else j
                    out[k] = (<out_t>data[k]) + (<const out_t*>(y + col * s_y))[0]
    return bad


cdef Py_ssize_t mul_matrix_any(bint xd, bint yd, bint od, const void* data,
                               const index_t* ind, const index_t* ptr, Py_ssize_t n_major,
                               Py_ssize_t n_minor, Py_ssize_t nnz, const char* y,
                               Py_ssize_t s_major, Py_ssize_t s_minor, void* out) noexcept nogil:
    # mul_matrix for the value dtypes flagged (d: double, else float), after checking ptr.
    if check_ptr(ptr, n_major, nnz):
        return 1
    if od:
        if xd and yd:
            return mul_matrix(<const double*>data, ind, ptr, n_major, n_minor, y, s_major,
                              s_minor, <double*>NULL, <double*>out)
        if xd:
            return mul_matrix(<const double*>data, ind, ptr, n_major, n_minor, y, s_major,
                              s_minor, <float*>NULL, <double*>out)
        if yd:
            return mul_matrix(<const float*>data, ind, ptr, n_major, n_minor, y, s_major,
                              s_minor, <double*>NULL, <double*>out)
        return mul_matrix(<const float*>data, ind, ptr, n_major, n_minor, y, s_major,
                          s_minor, <float*>NULL, <double*>out)
    return mul_matrix(<const float*>data, ind, ptr, n_major, n_minor, y, s_major, s_minor,
                      <float*>NULL, <float*>out)


cdef Py_ssize_t add_row_any(bint wide, const void* data, const index_t* ind,
                            const index_t* ptr, Py_ssize_t n_major, Py_ssize_t n_minor,
                            Py_ssize_t nnz, bint by_major, const char* y, Py_ssize_t s_y,
                            void* out) noexcept nogil:
    # add_row for double (wide) or float values, after checking ptr.
    if check_ptr(ptr, n_major, nnz):
        return 1
    if wide:
        return add_row(<const double*>data, ind, ptr, n_major, n_minor, by_major, y, s_y,
                       <double*>out)
    return add_row(<const float*>data, ind, ptr, n_major, n_minor, by_major, y, s_y,
                   <float*>out)


cdef object contiguous(object a):
    # The 1-d array a, C-contiguous (a copy only for a strided view).
    if a.flags.c_contiguous:
        return a
    return np.ascontiguousarray(a)


cdef class SparseArithThunk(NodeThunk):
    # What both thunks decode once from the node: the sparse input's class and dtypes.
    cdef object cls, src_dtype, dense_dtype, out_dtype
    cdef bint csc, xd, yd, od

    def __init__(self, node, list in_cells, list out_cells):
        NodeThunk.__init__(self, node, in_cells, out_cells)
        x, y = node.inputs
        self.cls = x.type.format_cls[x.type.format]
        self.csc = x.type.format == "csc"
        self.src_dtype = np.dtype(x.type.dtype)
        self.dense_dtype = np.dtype(y.type.dtype)
        self.out_dtype = np.dtype(node.outputs[0].type.dtype)
        self.xd = self.src_dtype.itemsize == 8
        self.yd = self.dense_dtype.itemsize == 8
        self.od = self.out_dtype.itemsize == 8

    cdef object arrays(self, x):
        # (data, indices, indptr) of the sparse input when the C path may take it, else None.
        if type(x) is not self.cls or x.dtype != self.src_dtype:
            return None
        data, ind, ptr = x.data, x.indices, x.indptr
        if (type(data) is not np.ndarray or type(ind) is not np.ndarray
                or type(ptr) is not np.ndarray or data.ndim != 1 or ind.ndim != 1
                or ptr.ndim != 1 or ind.dtype != ptr.dtype
                or ind.dtype.name not in ("int32", "int64")):
            return None
        n_major = x.shape[1] if self.csc else x.shape[0]
        if len(ptr) != n_major + 1 or len(ind) != len(data):
            return None
        return contiguous(data), contiguous(ind), contiguous(ptr)


cdef class MulSDThunk(SparseArithThunk):
    # mul_s_d: x (csr/csc) times a dense matrix of its shape, or times a scalar.
    cdef int fast(self) except -1:
        cdef Py_buffer bd, bi, bp, by, bo
        cdef Py_ssize_t n_major, n_minor, nnz, s_major, s_minor, bad = 0
        cdef bint narrow
        cdef double s
        x = self.arg(0)
        y = self.arg(1)
        arrays = self.arrays(x)
        if arrays is None or type(y) is not np.ndarray or y.dtype != self.dense_dtype:
            return 1
        data, ind, ptr = arrays
        nnz = len(data)
        if y.ndim == 0:
            if nnz == 0:
                return 1  # perform's own path for a matrix storing nothing
            if self.src_dtype != self.out_dtype and not x.has_canonical_format:
                return 1  # perform's astype sums duplicates and sorts the indices first
        elif y.ndim != 2 or y.shape != x.shape or not y.flags.aligned:
            return 1
        n_major, n_minor = (x.shape[1], x.shape[0]) if self.csc else x.shape
        out = np.empty(nnz, dtype=self.out_dtype)
        PyObject_GetBuffer(data, &bd, PyBUF_ANY_CONTIGUOUS)
        PyObject_GetBuffer(out, &bo, PyBUF_ANY_CONTIGUOUS | PyBUF_WRITABLE)
        if y.ndim == 0:
            s = float(y)
            with nogil:
                if self.od and self.xd:
                    mul_scalar(<const double*>bd.buf, nnz, s, <double*>bo.buf)
                elif self.od:
                    mul_scalar(<const float*>bd.buf, nnz, s, <double*>bo.buf)
                else:  # float32 everywhere: the float32 product, as NumPy's
                    mul_scalar(<const float*>bd.buf, nnz, <float>s, <float*>bo.buf)
            PyBuffer_Release(&bd)
            PyBuffer_Release(&bo)
        else:
            PyObject_GetBuffer(ind, &bi, PyBUF_ANY_CONTIGUOUS)
            PyObject_GetBuffer(ptr, &bp, PyBUF_ANY_CONTIGUOUS)
            PyObject_GetBuffer(y, &by, PyBUF_RECORDS_RO)
            s_major = by.strides[1] if self.csc else by.strides[0]
            s_minor = by.strides[0] if self.csc else by.strides[1]
            narrow = ind.itemsize == 4
            with nogil:
                if narrow:
                    bad = mul_matrix_any(self.xd, self.yd, self.od, bd.buf,
                                         <const int32_t*>bi.buf, <const int32_t*>bp.buf,
                                         n_major, n_minor, nnz, <const char*>by.buf, s_major,
                                         s_minor, bo.buf)
                else:
                    bad = mul_matrix_any(self.xd, self.yd, self.od, bd.buf,
                                         <const int64_t*>bi.buf, <const int64_t*>bp.buf,
                                         n_major, n_minor, nnz, <const char*>by.buf, s_major,
                                         s_minor, bo.buf)
            PyBuffer_Release(&bd)
            PyBuffer_Release(&bo)
            PyBuffer_Release(&bi)
            PyBuffer_Release(&bp)
            PyBuffer_Release(&by)
        if bad:
            return 1  # an inconsistent indptr or an index out of range: perform says which
        self.set_out(0, self.cls((out, x.indices.copy(), x.indptr.copy()), x.shape))
        return 0


cdef class StructuredAddSVThunk(SparseArithThunk):
    # structured_add_s_v: x (csr/csc) plus y[column] on every stored value.
    cdef int fast(self) except -1:
        cdef Py_buffer bd, bi, bp, by, bo
        cdef Py_ssize_t n_major, n_minor, nnz, s_y, bad = 0
        cdef bint narrow
        x = self.arg(0)
        y = self.arg(1)
        arrays = self.arrays(x)
        if (arrays is None or type(y) is not np.ndarray or y.dtype != self.dense_dtype
                or y.ndim != 1 or y.shape[0] != x.shape[1] or not y.flags.aligned):
            return 1
        data, ind, ptr = arrays
        nnz = len(data)
        n_major, n_minor = (x.shape[1], x.shape[0]) if self.csc else x.shape
        out = np.empty(nnz, dtype=self.out_dtype)
        PyObject_GetBuffer(data, &bd, PyBUF_ANY_CONTIGUOUS)
        PyObject_GetBuffer(out, &bo, PyBUF_ANY_CONTIGUOUS | PyBUF_WRITABLE)
        PyObject_GetBuffer(ind, &bi, PyBUF_ANY_CONTIGUOUS)
        PyObject_GetBuffer(ptr, &bp, PyBUF_ANY_CONTIGUOUS)
        PyObject_GetBuffer(y, &by, PyBUF_RECORDS_RO)
        s_y = by.strides[0]
        narrow = ind.itemsize == 4
        with nogil:
            if narrow:
                bad = add_row_any(self.od, bd.buf, <const int32_t*>bi.buf,
                                  <const int32_t*>bp.buf, n_major, n_minor, nnz, self.csc,
                                  <const char*>by.buf, s_y, bo.buf)
            else:
                bad = add_row_any(self.od, bd.buf, <const int64_t*>bi.buf,
                                  <const int64_t*>bp.buf, n_major, n_minor, nnz, self.csc,
                                  <const char*>by.buf, s_y, bo.buf)
        PyBuffer_Release(&bd)
        PyBuffer_Release(&bo)
        PyBuffer_Release(&bi)
        PyBuffer_Release(&bp)
        PyBuffer_Release(&by)
        if bad:
            return 1  # an inconsistent indptr or an index out of range: perform says which
        self.set_out(0, self.cls((out, x.indices.copy(), x.indptr.copy()), x.shape))
        return 0
"""


def _floats(node: Any) -> bool:
    """True when every value dtype of ``node`` is one the loops handle."""
    dtypes = [v.type.dtype for v in (*node.inputs, *node.outputs)]
    return all(d in FLOAT_DTYPES for d in dtypes)


def mul_s_d_c(op: MulSD, node: Any) -> Any:
    """The kernel of a ``mul_s_d`` node: the module for float operands, else ``PERFORM``
    (integer and complex values keep NumPy's arithmetic)."""
    if not _floats(node):
        return _c.PERFORM
    return _c.CModule("sparse arithmetic", SOURCE, make_thunk=_make_mul_s_d, openmp=True)


def structured_add_s_v_c(op: StructuredAddSV, node: Any) -> Any:
    """The kernel of a ``structured_add_s_v`` node: the module for float operands, else
    ``PERFORM``."""
    if not _floats(node):
        return _c.PERFORM
    return _c.CModule("sparse arithmetic", SOURCE, make_thunk=_make_structured_add, openmp=True)


def _make_mul_s_d(module: Any, node: Any, in_cells: list[Any], out_cells: list[Any]) -> Any:
    """The ``mul_s_d`` node's thunk from the compiled module."""
    return module.MulSDThunk(node, in_cells, out_cells)


def _make_structured_add(module: Any, node: Any, in_cells: list[Any], out_cells: list[Any]) -> Any:
    """The ``structured_add_s_v`` node's thunk from the compiled module."""
    return module.StructuredAddSVThunk(node, in_cells, out_cells)


def register(registry: Any) -> None:
    """Put the two kernels into backend-c's registry (called by the package's hook), and
    keep the registry's toolkit for the entries."""
    global _c
    _c = registry
    registry.register(MulSD, mul_s_d_c, version=ARITH_C_VERSION)
    registry.register(StructuredAddSV, structured_add_s_v_c, version=ARITH_C_VERSION)
