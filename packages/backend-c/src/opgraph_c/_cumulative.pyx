# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The precompiled thunk of ``CumOp`` (``cumsum``, ``cumprod``): NumPy's accumulation in C.

NumPy's ``np.add.accumulate`` / ``np.multiply.accumulate`` (perform's ``np.cumsum`` /
``np.cumprod`` with the output dtype) is sequential along the axis: ``out[0] = x[0]`` and
``out[i] = out[i - 1] op x[i]``, each element of ``x`` cast to the output dtype first. The
loops here do exactly that, one operation per element (no reassociation, no fused
multiply-add), so the results are bit-identical: float32 accumulates in float32, and
integer and bool inputs in int64 (uint64 for unsigned ones), wrapping on overflow as NumPy
does. Independent lanes (the other axes) are walked side by side when the axis is not the
innermost one in memory, which vectorises without changing any lane's order.

The output has NumPy's layout (``np.empty_like(x)`` order for an axis, a new vector for
``axis=None``). An ndarray subclass, an unexpected dtype or rank, or a non-native byte order
runs the Op's ``perform`` instead.
"""

cimport numpy as cnp
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF

from opgraph_c._vm cimport CThunk

import numpy as np

cnp.import_array()


cdef extern from "numpy/arrayobject.h":
    # Steals a reference to descr (NULL: the prototype's).
    object PyArray_NewLikeArray(cnp.ndarray prototype, cnp.NPY_ORDER order,
                                cnp.PyArray_Descr* descr, int subok)


#: ``block(x, out, L, M, xa, xm, oa, om)``: one block of a cumulative sum or product.
ctypedef void (*cum_block)(const char* x, char* out, cnp.npy_intp L, cnp.npy_intp M,
                           cnp.npy_intp xa, cnp.npy_intp xm, cnp.npy_intp oa,
                           cnp.npy_intp om) noexcept nogil


cdef extern from *:
    """
    /* One block of a cumulative sum or product: L positions along the axis (byte strides
     * xa in x, oa in out) times M independent lanes (strides xm, om). Each element of x is
     * converted to the accumulator type with CONV, then out[0] = x[0] and
     * out[i] = out[i - 1] OP x[i], in that order, as NumPy's accumulate. Integer
     * accumulators are unsigned 64-bit (int64 results are the same bits), so overflow wraps
     * as in NumPy. */
    #define OPG_CUM_CONV_S(v) ((npy_uint64)(npy_int64)(v))
    #define OPG_CUM_CONV_U(v) ((npy_uint64)(v))
    #define OPG_CUM_CONV_F(v) (v)
    #define OPG_CUM_ADD(a, b) ((a) + (b))
    #define OPG_CUM_MUL(a, b) ((a) * (b))

    #define OPG_CUM(NAME, IN_T, ACC_T, CONV, OP)                                        \\
    static void NAME(const char *x, char *out, npy_intp L, npy_intp M, npy_intp xa,    \\
                     npy_intp xm, npy_intp oa, npy_intp om)                           \\
    {                                                                                \\
        npy_intp i, j;                                                               \\
        if (M == 1) {                                                                \\
            ACC_T acc = CONV(*(const IN_T *)x);                                      \\
            *(ACC_T *)out = acc;                                                     \\
            for (i = 1; i < L; i++) {                                                \\
                acc = OP(acc, CONV(*(const IN_T *)(x + i * xa)));                    \\
                *(ACC_T *)(out + i * oa) = acc;                                      \\
            }                                                                        \\
            return;                                                                  \\
        }                                                                            \\
        if (xm == (npy_intp)sizeof(IN_T) && om == (npy_intp)sizeof(ACC_T)) {         \\
            const IN_T *x0 = (const IN_T *)x;                                        \\
            ACC_T *o0 = (ACC_T *)out;                                                \\
            for (j = 0; j < M; j++)                                                  \\
                o0[j] = CONV(x0[j]);                                                 \\
            for (i = 1; i < L; i++) {                                                \\
                const IN_T *xi = (const IN_T *)(x + i * xa);                         \\
                const ACC_T *prev = (const ACC_T *)(out + (i - 1) * oa);             \\
                ACC_T *oi = (ACC_T *)(out + i * oa);                                 \\
                for (j = 0; j < M; j++)                                              \\
                    oi[j] = OP(prev[j], CONV(xi[j]));                                \\
            }                                                                        \\
            return;                                                                  \\
        }                                                                            \\
        for (j = 0; j < M; j++)                                                      \\
            *(ACC_T *)(out + j * om) = CONV(*(const IN_T *)(x + j * xm));            \\
        for (i = 1; i < L; i++) {                                                    \\
            const char *xi = x + i * xa;                                             \\
            const char *prev = out + (i - 1) * oa;                                   \\
            char *oi = out + i * oa;                                                 \\
            for (j = 0; j < M; j++)                                                  \\
                *(ACC_T *)(oi + j * om) = OP(*(const ACC_T *)(prev + j * om),        \\
                                             CONV(*(const IN_T *)(xi + j * xm)));    \\
        }                                                                            \\
    }

    #define OPG_CUM_BOTH(T, IN_T, ACC_T, CONV)                                          \\
        OPG_CUM(opg_cumsum_##T, IN_T, ACC_T, CONV, OPG_CUM_ADD)                         \\
        OPG_CUM(opg_cumprod_##T, IN_T, ACC_T, CONV, OPG_CUM_MUL)

    OPG_CUM_BOTH(bool, npy_bool, npy_uint64, OPG_CUM_CONV_U)
    OPG_CUM_BOTH(int8, npy_int8, npy_uint64, OPG_CUM_CONV_S)
    OPG_CUM_BOTH(int16, npy_int16, npy_uint64, OPG_CUM_CONV_S)
    OPG_CUM_BOTH(int32, npy_int32, npy_uint64, OPG_CUM_CONV_S)
    OPG_CUM_BOTH(int64, npy_int64, npy_uint64, OPG_CUM_CONV_S)
    OPG_CUM_BOTH(uint8, npy_uint8, npy_uint64, OPG_CUM_CONV_U)
    OPG_CUM_BOTH(uint16, npy_uint16, npy_uint64, OPG_CUM_CONV_U)
    OPG_CUM_BOTH(uint32, npy_uint32, npy_uint64, OPG_CUM_CONV_U)
    OPG_CUM_BOTH(uint64, npy_uint64, npy_uint64, OPG_CUM_CONV_U)
    OPG_CUM_BOTH(float32, npy_float32, npy_float32, OPG_CUM_CONV_F)
    OPG_CUM_BOTH(float64, npy_float64, npy_float64, OPG_CUM_CONV_F)
    """
    # The loops, as values of their pointer type.
    cum_block opg_cumsum_bool, opg_cumprod_bool
    cum_block opg_cumsum_int8, opg_cumprod_int8
    cum_block opg_cumsum_int16, opg_cumprod_int16
    cum_block opg_cumsum_int32, opg_cumprod_int32
    cum_block opg_cumsum_int64, opg_cumprod_int64
    cum_block opg_cumsum_uint8, opg_cumprod_uint8
    cum_block opg_cumsum_uint16, opg_cumprod_uint16
    cum_block opg_cumsum_uint32, opg_cumprod_uint32
    cum_block opg_cumsum_uint64, opg_cumprod_uint64
    cum_block opg_cumsum_float32, opg_cumprod_float32
    cum_block opg_cumsum_float64, opg_cumprod_float64


cdef enum:
    MAXDIMS = 64
    # Release the GIL for accumulations over at least this many elements.
    NOGIL_SIZE = 16384


cdef cum_block _block_fn(str dtype, bint mul):
    """The C loop of ``dtype``'s input and the mode; NULL if there is none."""
    if dtype == "bool":
        return opg_cumprod_bool if mul else opg_cumsum_bool
    if dtype == "int8":
        return opg_cumprod_int8 if mul else opg_cumsum_int8
    if dtype == "int16":
        return opg_cumprod_int16 if mul else opg_cumsum_int16
    if dtype == "int32":
        return opg_cumprod_int32 if mul else opg_cumsum_int32
    if dtype == "int64":
        return opg_cumprod_int64 if mul else opg_cumsum_int64
    if dtype == "uint8":
        return opg_cumprod_uint8 if mul else opg_cumsum_uint8
    if dtype == "uint16":
        return opg_cumprod_uint16 if mul else opg_cumsum_uint16
    if dtype == "uint32":
        return opg_cumprod_uint32 if mul else opg_cumsum_uint32
    if dtype == "uint64":
        return opg_cumprod_uint64 if mul else opg_cumsum_uint64
    if dtype == "float32":
        return opg_cumprod_float32 if mul else opg_cumsum_float32
    if dtype == "float64":
        return opg_cumprod_float64 if mul else opg_cumsum_float64
    return NULL


#: Input dtypes with a C loop, and the dtype each accumulates in (the output's).
ACC_DTYPES = {
    "bool": "int64",
    "int8": "int64",
    "int16": "int64",
    "int32": "int64",
    "int64": "int64",
    "uint8": "uint64",
    "uint16": "uint64",
    "uint32": "uint64",
    "uint64": "uint64",
    "float32": "float32",
    "float64": "float64",
}


cdef void _walk(cum_block block, char* xp, char* op, int nouter, cnp.npy_intp* dims,
                cnp.npy_intp* xs, cnp.npy_intp* os, cnp.npy_intp count, cnp.npy_intp L,
                cnp.npy_intp M, cnp.npy_intp xa, cnp.npy_intp xm, cnp.npy_intp oa,
                cnp.npy_intp om) noexcept nogil:
    """``block`` at each of the ``count`` outer indices (C order over the ``nouter`` outer
    axes of lengths ``dims`` and strides ``xs``, ``os``), an odometer carrying."""
    cdef cnp.npy_intp idx[MAXDIMS]
    cdef cnp.npy_intp c
    cdef int k
    for k in range(nouter):
        idx[k] = 0
    for c in range(count):
        block(xp, op, L, M, xa, xm, oa, om)
        for k in range(nouter - 1, -1, -1):
            idx[k] += 1
            xp += xs[k]
            op += os[k]
            if idx[k] < dims[k]:
                break
            xp -= idx[k] * xs[k]
            op -= idx[k] * os[k]
            idx[k] = 0


cdef class CumThunk(CThunk):
    """``CumOp{axis, mode}``: the cumulative sum or product of ``x`` in the output dtype.

    Parameters
    ----------
    node
        The Apply node (input dtype a key of :data:`ACC_DTYPES`, output dtype its value).
    in_cells, out_cells
        Its storage cells.
    """

    cdef public object node
    cdef object perform_fn
    cdef list in_cells, out_cells
    cdef int nd, axis, in_typenum
    cdef cnp.dtype out_dtype
    cdef cum_block block

    def __init__(self, node, list in_cells, list out_cells):
        x_type = node.inputs[0].type
        if x_type.ndim > MAXDIMS:
            raise ValueError(f"{node.op}: more than {MAXDIMS} dimensions ({x_type})")
        if ACC_DTYPES.get(x_type.dtype) != node.outputs[0].type.dtype:
            raise ValueError(f"{node.op}: no C loop from {x_type.dtype} to "
                             f"{node.outputs[0].type.dtype}")
        self.node = node
        self.perform_fn = node.op.perform
        self.in_cells, self.out_cells = in_cells, out_cells
        self.inputs, self.outputs = in_cells, out_cells
        self.lazy = False
        self.nd = x_type.ndim
        self.axis = -1 if node.op.axis is None else node.op.axis % x_type.ndim
        self.in_typenum = np.dtype(x_type.dtype).num
        self.out_dtype = np.dtype(node.outputs[0].type.dtype)
        self.block = _block_fn(x_type.dtype, node.op.mode == "mul")

    cdef int run(self) except -1:
        if self.fast():
            self.perform_fn(self.node, [(<list>c)[0] for c in self.in_cells], self.out_cells)
        return 0

    cdef int fast(self) except -1:
        """Compute the output; return 1 to let ``perform`` do it (nothing written yet)."""
        cdef object v = (<list>self.in_cells[0])[0]
        cdef cnp.ndarray x, out
        cdef cnp.npy_intp n
        if not cnp.PyArray_CheckExact(v) or cnp.PyArray_NDIM(<cnp.ndarray>v) != self.nd:
            return 1
        x = <cnp.ndarray>v
        if (not (cnp.PyArray_TYPE(x) == self.in_typenum
                 or cnp.PyArray_EquivTypenums(cnp.PyArray_TYPE(x), self.in_typenum))
                or not cnp.PyArray_ISNOTSWAPPED(x) or not cnp.PyArray_ISALIGNED(x)):
            return 1
        if self.axis < 0:
            # NumPy ravels x in C order (a copy unless it is C-contiguous): one long lane.
            if not cnp.PyArray_IS_C_CONTIGUOUS(x):
                x = <cnp.ndarray>cnp.PyArray_NewCopy(x, cnp.NPY_CORDER)
            n = cnp.PyArray_SIZE(x)
            out = <cnp.ndarray>cnp.PyArray_EMPTY(1, &n, self.out_dtype.num, 0)
            if n:
                self._lanes(cnp.PyArray_BYTES(x), cnp.PyArray_BYTES(out), n, 1,
                            cnp.PyArray_ITEMSIZE(x), 0, cnp.PyArray_ITEMSIZE(out), 0, n)
        else:
            Py_INCREF(self.out_dtype)  # stolen
            out = <cnp.ndarray>PyArray_NewLikeArray(
                x, cnp.NPY_KEEPORDER, <cnp.PyArray_Descr*><PyObject*>self.out_dtype, 0
            )
            if cnp.PyArray_SIZE(x):
                self._along_axis(x, out)
        (<list>self.out_cells[0])[0] = out
        return 0

    cdef void _along_axis(self, cnp.ndarray x, cnp.ndarray out):
        """Accumulate along ``self.axis``: blocks of (axis, innermost other axis) in C."""
        cdef int d, m = -1, nouter = 0, ax = self.axis
        cdef cnp.npy_intp dims[MAXDIMS]
        cdef cnp.npy_intp xs[MAXDIMS]
        cdef cnp.npy_intp os[MAXDIMS]
        cdef cnp.npy_intp L = cnp.PyArray_DIM(x, ax), M = 1, xm = 0, om = 0, count = 1
        cdef cnp.npy_intp xa = cnp.PyArray_STRIDE(x, ax), oa = cnp.PyArray_STRIDE(out, ax)
        # The lanes: the other axis innermost in the output (if it is more inner than the
        # accumulation axis) is walked in C; the rest, longer than 1, by the odometer.
        for d in range(self.nd):
            if d == ax or cnp.PyArray_DIM(x, d) == 1:
                continue
            if m < 0 or abs(cnp.PyArray_STRIDE(out, d)) < abs(cnp.PyArray_STRIDE(out, m)):
                m = d
        if m >= 0 and (L == 1 or abs(cnp.PyArray_STRIDE(out, m)) < abs(oa)):
            M = cnp.PyArray_DIM(x, m)
            xm, om = cnp.PyArray_STRIDE(x, m), cnp.PyArray_STRIDE(out, m)
        else:
            m = -1
        for d in range(self.nd):
            if d != ax and d != m and cnp.PyArray_DIM(x, d) != 1:
                dims[nouter] = cnp.PyArray_DIM(x, d)
                xs[nouter] = cnp.PyArray_STRIDE(x, d)
                os[nouter] = cnp.PyArray_STRIDE(out, d)
                count *= dims[nouter]
                nouter += 1
        if count * L * M >= NOGIL_SIZE:
            with nogil:
                _walk(self.block, cnp.PyArray_BYTES(x), cnp.PyArray_BYTES(out), nouter, dims,
                      xs, os, count, L, M, xa, xm, oa, om)
        else:
            _walk(self.block, cnp.PyArray_BYTES(x), cnp.PyArray_BYTES(out), nouter, dims, xs,
                  os, count, L, M, xa, xm, oa, om)

    cdef void _lanes(self, const char* x, char* out, cnp.npy_intp L, cnp.npy_intp M,
                     cnp.npy_intp xa, cnp.npy_intp xm, cnp.npy_intp oa, cnp.npy_intp om,
                     cnp.npy_intp size):
        """One block, without the GIL when it is big."""
        if size >= NOGIL_SIZE:
            with nogil:
                self.block(x, out, L, M, xa, xm, oa, om)
        else:
            self.block(x, out, L, M, xa, xm, oa, om)
