# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# distutils: extra_compile_args = -O3 -fno-math-errno -fno-trapping-math
# distutils: libraries = m
"""Precompiled kernels for the softmax family of ``opgraph.tensor.nnet``.

One :class:`~opgraph_c._vm.CThunk` subclass per Op (or pair of Ops), with typed loops for
float32 and float64 (the fused type ``real``); nothing is generated or compiled when a
function is built. Every kernel follows its Op's ``perform`` step for step, in the output's
dtype: the row maximum is subtracted before ``exp`` (finite results for logits of any
size), NaN propagates the way ``np.max`` and ``np.argmax`` propagate it, and sums are
NumPy's (pairwise along a contiguous row, in order along another axis). Built with ``-O3
-fno-math-errno`` and the prelude's libmvec declarations, the contiguous ``exp`` loops are
vectorised without ``-ffast-math`` (the ``exp`` loop for AVX-512, AVX2 and SSE2, the one
for this CPU picked when the module loads).

The thunks read their input cells, make each array C-contiguous in the output's dtype (a
copy only for strided, misaligned, byte-swapped or narrower inputs), and write new output
arrays. Inputs the kernels do not accept (mismatched shapes, class indices out of range)
are handed to the Op's ``perform``, so the error raised is the reference's, word for word.
Loops over at least ``NOGIL_SIZE`` elements run with the GIL released.

An Op with an ``axis`` is computed on its input viewed as ``(outer, n, inner)``: ``n``
elements along the axis, ``inner`` apart.
"""

cimport numpy as cnp
from libc.math cimport NAN, exp, expf, log, logf

from opgraph_c._vm cimport CThunk

import numpy as np

cnp.import_array()


cdef extern from "opgraph_c_prelude.h":
    # Its SIMD declarations of exp/log let gcc vectorise the row loops through libmvec.
    pass


cdef extern from *:
    """
    /* r[j] = exp(x[j] - m): the loop that dominates softmax, vectorised through libmvec.
     * With gcc on x86-64 glibc it is compiled three times (AVX-512, AVX2, baseline SSE2)
     * and the loader picks the one for this CPU (target_clones, an ifunc). */
    #if defined(__x86_64__) && defined(__GLIBC__) && defined(__GNUC__) && \
        !defined(__clang__) && !defined(OPG_NO_LIBMVEC)
    #define OPG_NNET_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
    #else
    #define OPG_NNET_CLONES
    #endif

    OPG_NNET_CLONES
    static void opg_nnet_exp_shift_f64(const double *x, double *r, ptrdiff_t n, double m)
    {
        for (ptrdiff_t j = 0; j < n; j++)
            r[j] = exp(x[j] - m);
    }

    OPG_NNET_CLONES
    static void opg_nnet_exp_shift_f32(const float *x, float *r, ptrdiff_t n, float m)
    {
        for (ptrdiff_t j = 0; j < n; j++)
            r[j] = expf(x[j] - m);
    }
    """
    void opg_nnet_exp_shift_f64(const double* x, double* r, Py_ssize_t n, double m) nogil
    void opg_nnet_exp_shift_f32(const float* x, float* r, Py_ssize_t n, float m) nogil


cdef enum:
    # Release the GIL only for loops at least this long (releasing costs ~100 ns).
    NOGIL_SIZE = 4096


ctypedef fused real:
    float
    double

ctypedef fused label_t:
    cnp.npy_int8
    cnp.npy_int16
    cnp.npy_int32
    cnp.npy_int64
    cnp.npy_uint8
    cnp.npy_uint16
    cnp.npy_uint32
    cnp.npy_uint64


# ----------------------------------------------------------------------------- scalar helpers


cdef inline real _exp(real v) noexcept nogil:
    if real is float:
        return expf(v)
    else:
        return exp(v)


cdef inline real _log(real v) noexcept nogil:
    if real is float:
        return logf(v)
    else:
        return log(v)


cdef inline void _exp_shift(const real* x, real* r, Py_ssize_t n, real m) noexcept nogil:
    """``r[j] = exp(x[j] - m)`` for ``n`` contiguous elements (``r`` may be ``x``)."""
    if real is float:
        opg_nnet_exp_shift_f32(x, r, n, m)
    else:
        opg_nnet_exp_shift_f64(x, r, n, m)


cdef inline real _max(const real* x, Py_ssize_t n, Py_ssize_t st) noexcept nogil:
    """``np.max`` of ``n`` (> 0) elements ``st`` apart: NaN if any element is NaN.

    The contiguous loop has no branch (a select and an or), so gcc vectorises it.
    """
    cdef real m = x[0], v
    cdef int nan = x[0] != x[0]
    cdef Py_ssize_t j
    if st == 1:
        for j in range(1, n):
            v = x[j]
            m = v if v > m else m
            nan |= v != v
    else:
        for j in range(1, n):
            v = x[j * st]
            m = v if v > m else m
            nan |= v != v
    return <real>NAN if nan else m


cdef inline Py_ssize_t _argmax(const real* x, Py_ssize_t n) noexcept nogil:
    """``np.argmax`` of ``n`` (> 0) contiguous elements: the first maximum, or first NaN."""
    cdef Py_ssize_t j, best = 0
    cdef real m = x[0], v
    if m != m:
        return 0
    for j in range(1, n):
        v = x[j]
        if v != v:
            return j
        if v > m:
            m, best = v, j
    return best


cdef real _sum(const real* a, Py_ssize_t n) noexcept nogil:
    """Sum of ``n`` contiguous elements by NumPy's pairwise summation (as ``np.sum``)."""
    cdef real r0, r1, r2, r3, r4, r5, r6, r7, res = 0
    cdef Py_ssize_t i, n2
    if n < 8:
        for i in range(n):
            res += a[i]
        return res
    if n <= 128:
        r0, r1, r2, r3 = a[0], a[1], a[2], a[3]
        r4, r5, r6, r7 = a[4], a[5], a[6], a[7]
        i = 8
        while i < n - n % 8:
            r0 += a[i]
            r1 += a[i + 1]
            r2 += a[i + 2]
            r3 += a[i + 3]
            r4 += a[i + 4]
            r5 += a[i + 5]
            r6 += a[i + 6]
            r7 += a[i + 7]
            i += 8
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while i < n:
            res += a[i]
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _sum(a, n2) + _sum(a + n2, n - n2)


cdef bint _load_labels(const label_t* y, Py_ssize_t n, Py_ssize_t k,
                       Py_ssize_t* out) noexcept nogil:
    """Copy ``n`` class indices to ``out``; False if one is outside ``[0, k)``."""
    cdef Py_ssize_t i
    cdef label_t v
    for i in range(n):
        v = y[i]
        if label_t is cnp.npy_uint8 or label_t is cnp.npy_uint16:
            if v >= k:
                return False
        elif label_t is cnp.npy_uint32 or label_t is cnp.npy_uint64:
            if v >= <cnp.npy_uint64>k:
                return False
        else:
            if v < 0 or v >= k:
                return False
        out[i] = <Py_ssize_t>v
    return True


# ------------------------------------------------------------------------------------ kernels
#
# Rows along the last axis are contiguous: simple loops over them, which gcc vectorises
# (exp through libmvec), sums as NumPy's pairwise sum. Rows along another axis (``inner``
# > 1) are walked with a stride and summed in order, as NumPy sums over a non-last axis.


cdef void _softmax_row(const real* x, real* r, Py_ssize_t n, bint take_log) noexcept nogil:
    """Softmax (or log-softmax) of one contiguous row: ``r`` from ``x``."""
    cdef Py_ssize_t j
    cdef real m = _max(x, n, 1), s, ls
    _exp_shift(x, r, n, m)
    s = _sum(r, n)
    if take_log:
        ls = _log(s)
        for j in range(n):
            r[j] = (x[j] - m) - ls
    else:
        for j in range(n):
            r[j] = r[j] / s


cdef void _softmax_strided(const real* x, real* r, Py_ssize_t n, Py_ssize_t st,
                           bint take_log) noexcept nogil:
    """Softmax (or log-softmax) of one row of ``n`` elements ``st`` apart."""
    cdef Py_ssize_t j
    cdef real m = _max(x, n, st), s = 0, ls
    for j in range(n):
        r[j * st] = _exp(x[j * st] - m)
        s += r[j * st]
    if take_log:
        ls = _log(s)
        for j in range(n):
            r[j * st] = (x[j * st] - m) - ls
    else:
        for j in range(n):
            r[j * st] = r[j * st] / s


cdef void _softmax(const real* x, real* out, Py_ssize_t outer, Py_ssize_t n,
                   Py_ssize_t inner, bint take_log) noexcept nogil:
    """Softmax (or log-softmax) of each of the ``outer * inner`` rows of ``n`` elements."""
    cdef Py_ssize_t o, i, base
    for o in range(outer):
        for i in range(inner):
            base = o * n * inner + i
            if inner == 1:
                _softmax_row(x + base, out + base, n, take_log)
            else:
                _softmax_strided(x + base, out + base, n, inner, take_log)


cdef void _softmax_grad(const real* dy, const real* sm, real* dx, Py_ssize_t outer,
                        Py_ssize_t n, Py_ssize_t inner) noexcept nogil:
    """``dx = dy * sm - sum(dy * sm) * sm`` along each row of ``n`` elements."""
    cdef Py_ssize_t o, i, j, base, at
    cdef real s
    for o in range(outer):
        for i in range(inner):
            base = o * n * inner + i
            if inner == 1:
                for j in range(base, base + n):
                    dx[j] = dy[j] * sm[j]
                s = _sum(dx + base, n)
                for j in range(base, base + n):
                    dx[j] = dx[j] - s * sm[j]
            else:
                s = 0
                for j in range(n):
                    at = base + j * inner
                    dx[at] = dy[at] * sm[at]
                    s += dx[at]
                for j in range(n):
                    at = base + j * inner
                    dx[at] = dx[at] - s * sm[at]


cdef void _softmax_with_bias(const real* x, const real* b, real* out, Py_ssize_t rows,
                             Py_ssize_t k) noexcept nogil:
    """Row-wise softmax of ``x + b`` (``b`` added to every row)."""
    cdef Py_ssize_t i, j
    cdef real* r
    for i in range(rows):
        r = out + i * k
        for j in range(k):
            r[j] = x[i * k + j] + b[j]
        _softmax_row(r, r, k, False)


cdef void _xent_softmax_argmax(const real* x, const real* b, const Py_ssize_t* y, real* nll,
                               real* sm, Py_ssize_t* am, Py_ssize_t rows,
                               Py_ssize_t k) noexcept nogil:
    """Per row of ``x + b``: its softmax, argmax and ``max + log(sum(exp)) - row[y]``."""
    cdef Py_ssize_t i, j, best
    cdef real* r
    cdef real m, s, target
    for i in range(rows):
        r = sm + i * k
        for j in range(k):
            r[j] = x[i * k + j] + b[j]
        best = _argmax(r, k)
        m = r[best]
        target = r[y[i]]
        _exp_shift(r, r, k, m)
        s = _sum(r, k)
        nll[i] = (m + _log(s)) - target
        am[i] = best
        for j in range(k):
            r[j] = r[j] / s


cdef void _xent_softmax_dx(const real* dy, Py_ssize_t dy_step, const real* sm,
                           const Py_ssize_t* y, real* dx, Py_ssize_t rows,
                           Py_ssize_t k) noexcept nogil:
    """``dx[i] = dy[i] * (sm[i] - onehot(y[i]))`` (``dy_step`` 0: the same dy for all rows)."""
    cdef Py_ssize_t i, j
    cdef real d
    for i in range(rows):
        d = dy[i * dy_step]
        for j in range(i * k, (i + 1) * k):
            dx[j] = d * sm[j]
        dx[i * k + y[i]] = dx[i * k + y[i]] - d


cdef void _xent_categorical(const real* coding, const Py_ssize_t* y, real* out,
                            Py_ssize_t rows, Py_ssize_t k) noexcept nogil:
    """``out[i] = -log(coding[i, y[i]])``."""
    cdef Py_ssize_t i
    for i in range(rows):
        out[i] = -_log(coding[i * k + y[i]])


cdef void _xent_categorical_grad(const real* g, const real* coding, const Py_ssize_t* y,
                                 real* out, Py_ssize_t rows, Py_ssize_t k) noexcept nogil:
    """``out[i, y[i]] = -g[i] / coding[i, y[i]]`` (``out`` is zero elsewhere already)."""
    cdef Py_ssize_t i
    for i in range(rows):
        out[i * k + y[i]] = -g[i] / coding[i * k + y[i]]


# ------------------------------------------------------------------------------------- thunks


cdef inline Py_ssize_t _dim(cnp.ndarray a, int d):
    return cnp.PyArray_DIM(a, d)


cdef class NnetThunk(CThunk):
    """What the thunks of this module share: the node, its cells, the compute dtype.

    Parameters
    ----------
    node
        The Apply node (its output 0 gives the compute dtype, float32 or float64).
    in_cells, out_cells
        The node's storage cells.
    """

    cdef public object node
    cdef list in_cells, out_cells
    cdef object dtype
    cdef int typenum
    cdef bint single

    def __init__(self, node, list in_cells, list out_cells):
        self.node = node
        self.in_cells, self.out_cells = in_cells, out_cells
        self.inputs, self.outputs = in_cells, out_cells
        self.lazy = False
        self.dtype = np.dtype(node.outputs[0].type.dtype)
        if self.dtype not in (np.float32, np.float64):
            raise TypeError(f"{type(self).__name__} computes float32 or float64, not {self.dtype}")
        self.typenum = self.dtype.num
        self.single = self.dtype == np.float32

    cdef object _value(self, int i):
        value = (<list>self.in_cells[i])[0]
        if value is None:
            raise ValueError(f"input {i} of {self.node} has no value (its cell is empty)")
        return value

    cdef cnp.ndarray _checked_ndim(self, cnp.ndarray a, int i):
        cdef int nd = self.node.inputs[i].type.ndim
        if cnp.PyArray_NDIM(a) != nd:
            raise ValueError(
                f"input {i} of {self.node} has {cnp.PyArray_NDIM(a)} dimension(s), its type "
                f"{self.node.inputs[i].type} has {nd}"
            )
        return a

    cdef cnp.ndarray _real(self, int i):
        """Input ``i`` as a C-contiguous, aligned, native array of the compute dtype."""
        cdef cnp.ndarray a
        value = self._value(i)
        if cnp.PyArray_Check(value):
            a = <cnp.ndarray>value
            if cnp.PyArray_TYPE(a) == self.typenum and cnp.PyArray_ISCARRAY_RO(a):
                return self._checked_ndim(a, i)
        return self._checked_ndim(np.ascontiguousarray(value, dtype=self.dtype), i)

    cdef object _labels(self, int i, Py_ssize_t rows, Py_ssize_t k):
        """Input ``i`` (class indices) as an intp array, or None when perform must judge it
        (not ``rows`` of them, or one outside ``[0, k)``)."""
        cdef cnp.ndarray y
        cdef cnp.ndarray out
        cdef cnp.npy_intp n
        cdef Py_ssize_t* dst
        cdef void* src
        cdef bint ok, signed
        cdef Py_ssize_t size
        value = self._value(i)
        if not cnp.PyArray_Check(value) or not cnp.PyArray_ISCARRAY_RO(<cnp.ndarray>value):
            value = np.ascontiguousarray(value)
        y = self._checked_ndim(<cnp.ndarray>value, i)
        n = _dim(y, 0)
        if n != rows or not (cnp.PyArray_ISSIGNED(y) or cnp.PyArray_ISUNSIGNED(y)):
            return None
        out = cnp.PyArray_EMPTY(1, &n, cnp.NPY_INTP, 0)
        dst = <Py_ssize_t*>cnp.PyArray_DATA(out)
        src = cnp.PyArray_DATA(y)
        signed = cnp.PyArray_ISSIGNED(y)
        size = cnp.PyArray_ITEMSIZE(y)
        if signed and size == 1:
            ok = _load_labels(<cnp.npy_int8*>src, n, k, dst)
        elif signed and size == 2:
            ok = _load_labels(<cnp.npy_int16*>src, n, k, dst)
        elif signed and size == 4:
            ok = _load_labels(<cnp.npy_int32*>src, n, k, dst)
        elif signed and size == 8:
            ok = _load_labels(<cnp.npy_int64*>src, n, k, dst)
        elif size == 1:
            ok = _load_labels(<cnp.npy_uint8*>src, n, k, dst)
        elif size == 2:
            ok = _load_labels(<cnp.npy_uint16*>src, n, k, dst)
        elif size == 4:
            ok = _load_labels(<cnp.npy_uint32*>src, n, k, dst)
        elif size == 8:
            ok = _load_labels(<cnp.npy_uint64*>src, n, k, dst)
        else:
            return None
        return out if ok else None

    cdef cnp.ndarray _empty(self, int nd, cnp.npy_intp* shape):
        return cnp.PyArray_EMPTY(nd, shape, self.typenum, 0)

    cdef int _perform(self) except -1:
        """Run the Op's perform on the current inputs (it raises the reference error)."""
        values = [(<list>cell)[0] for cell in self.in_cells]
        self.node.op.perform(self.node, values, self.out_cells)
        return 0


cdef class SoftmaxThunk(NnetThunk):
    """Runs Softmax (``take_log`` false) or LogSoftmax along the op's axis."""

    cdef int axis
    cdef bint take_log

    def __init__(self, node, list in_cells, list out_cells, bint take_log=False):
        super().__init__(node, in_cells, out_cells)
        self.axis = node.op.axis % node.inputs[0].type.ndim
        self.take_log = take_log

    cdef int run(self) except -1:
        cdef cnp.ndarray x = self._real(0)
        cdef int nd = cnp.PyArray_NDIM(x), d
        cdef cnp.ndarray out = self._empty(nd, cnp.PyArray_DIMS(x))
        cdef Py_ssize_t size = cnp.PyArray_SIZE(x), outer = 1, inner = 1, n
        cdef void* xp = cnp.PyArray_DATA(x)
        cdef void* op = cnp.PyArray_DATA(out)
        if size > 0:
            n = _dim(x, self.axis)
            for d in range(self.axis):
                outer *= _dim(x, d)
            for d in range(self.axis + 1, nd):
                inner *= _dim(x, d)
            if size >= NOGIL_SIZE:
                with nogil:
                    self._compute(xp, op, outer, n, inner)
            else:
                self._compute(xp, op, outer, n, inner)
        (<list>self.out_cells[0])[0] = out
        return 0

    cdef void _compute(self, void* x, void* out, Py_ssize_t outer, Py_ssize_t n,
                       Py_ssize_t inner) noexcept nogil:
        if self.single:
            _softmax(<const float*>x, <float*>out, outer, n, inner, self.take_log)
        else:
            _softmax(<const double*>x, <double*>out, outer, n, inner, self.take_log)


cdef class SoftmaxGradThunk(NnetThunk):
    """Runs SoftmaxGrad along the op's axis."""

    cdef int axis

    def __init__(self, node, list in_cells, list out_cells):
        super().__init__(node, in_cells, out_cells)
        self.axis = node.op.axis % node.inputs[1].type.ndim

    cdef int run(self) except -1:
        cdef cnp.ndarray dy = self._real(0)
        cdef cnp.ndarray sm = self._real(1)
        cdef int nd = cnp.PyArray_NDIM(sm), d
        cdef Py_ssize_t size = cnp.PyArray_SIZE(sm), outer = 1, inner = 1, n
        for d in range(nd):
            if _dim(dy, d) != _dim(sm, d):
                return self._perform()
        cdef cnp.ndarray dx = self._empty(nd, cnp.PyArray_DIMS(sm))
        cdef void* a = cnp.PyArray_DATA(dy)
        cdef void* b = cnp.PyArray_DATA(sm)
        cdef void* c = cnp.PyArray_DATA(dx)
        if size > 0:
            n = _dim(sm, self.axis)
            for d in range(self.axis):
                outer *= _dim(sm, d)
            for d in range(self.axis + 1, nd):
                inner *= _dim(sm, d)
            if size >= NOGIL_SIZE:
                with nogil:
                    self._compute(a, b, c, outer, n, inner)
            else:
                self._compute(a, b, c, outer, n, inner)
        (<list>self.out_cells[0])[0] = dx
        return 0

    cdef void _compute(self, void* dy, void* sm, void* dx, Py_ssize_t outer, Py_ssize_t n,
                       Py_ssize_t inner) noexcept nogil:
        if self.single:
            _softmax_grad(<const float*>dy, <const float*>sm, <float*>dx, outer, n, inner)
        else:
            _softmax_grad(<const double*>dy, <const double*>sm, <double*>dx, outer, n, inner)


cdef class SoftmaxWithBiasThunk(NnetThunk):
    """Runs SoftmaxWithBias: row-wise softmax of ``x + b``."""

    cdef int run(self) except -1:
        cdef cnp.ndarray x = self._real(0)
        cdef cnp.ndarray b = self._real(1)
        cdef Py_ssize_t rows = _dim(x, 0), k = _dim(x, 1), size = rows * k
        if _dim(b, 0) != k:
            return self._perform()
        cdef cnp.ndarray out = self._empty(2, cnp.PyArray_DIMS(x))
        cdef void* xp = cnp.PyArray_DATA(x)
        cdef void* bp = cnp.PyArray_DATA(b)
        cdef void* op = cnp.PyArray_DATA(out)
        if size >= NOGIL_SIZE:
            with nogil:
                self._compute(xp, bp, op, rows, k)
        elif size > 0:
            self._compute(xp, bp, op, rows, k)
        (<list>self.out_cells[0])[0] = out
        return 0

    cdef void _compute(self, void* x, void* b, void* out, Py_ssize_t rows,
                       Py_ssize_t k) noexcept nogil:
        if self.single:
            _softmax_with_bias(<const float*>x, <const float*>b, <float*>out, rows, k)
        else:
            _softmax_with_bias(<const double*>x, <const double*>b, <double*>out, rows, k)


cdef class CrossentropySoftmaxArgmaxThunk(NnetThunk):
    """Runs CrossentropySoftmaxArgmax1HotWithBias: ``[nll, softmax(x + b), argmax(x + b)]``."""

    cdef object am_dtype
    cdef int am_typenum

    def __init__(self, node, list in_cells, list out_cells):
        super().__init__(node, in_cells, out_cells)
        self.am_dtype = np.dtype(node.outputs[2].type.dtype)
        self.am_typenum = self.am_dtype.num

    cdef int run(self) except -1:
        cdef cnp.ndarray x = self._real(0)
        cdef cnp.ndarray b = self._real(1)
        cdef Py_ssize_t rows = _dim(x, 0), k = _dim(x, 1), size = rows * k
        if _dim(b, 0) != k:
            return self._perform()
        y = self._labels(2, rows, k)
        if y is None:
            return self._perform()
        cdef cnp.ndarray nll = self._empty(1, cnp.PyArray_DIMS(x))
        cdef cnp.ndarray sm = self._empty(2, cnp.PyArray_DIMS(x))
        cdef cnp.ndarray am = cnp.PyArray_EMPTY(1, cnp.PyArray_DIMS(x), cnp.NPY_INTP, 0)
        cdef void* ptrs[6]
        ptrs[0] = cnp.PyArray_DATA(x)
        ptrs[1] = cnp.PyArray_DATA(b)
        ptrs[2] = cnp.PyArray_DATA(<cnp.ndarray>y)
        ptrs[3] = cnp.PyArray_DATA(nll)
        ptrs[4] = cnp.PyArray_DATA(sm)
        ptrs[5] = cnp.PyArray_DATA(am)
        if size >= NOGIL_SIZE:
            with nogil:
                self._compute(ptrs, rows, k)
        elif size > 0:
            self._compute(ptrs, rows, k)
        (<list>self.out_cells[0])[0] = nll
        (<list>self.out_cells[1])[0] = sm
        (<list>self.out_cells[2])[0] = (
            am if cnp.PyArray_TYPE(am) == self.am_typenum else am.astype(self.am_dtype)
        )
        return 0

    cdef void _compute(self, void** p, Py_ssize_t rows, Py_ssize_t k) noexcept nogil:
        if self.single:
            _xent_softmax_argmax(<const float*>p[0], <const float*>p[1], <Py_ssize_t*>p[2],
                                 <float*>p[3], <float*>p[4], <Py_ssize_t*>p[5], rows, k)
        else:
            _xent_softmax_argmax(<const double*>p[0], <const double*>p[1], <Py_ssize_t*>p[2],
                                 <double*>p[3], <double*>p[4], <Py_ssize_t*>p[5], rows, k)


cdef class CrossentropySoftmaxDxThunk(NnetThunk):
    """Runs CrossentropySoftmax1HotWithBiasDx: ``dy[i] * (sm[i] - onehot(y_idx[i]))``."""

    cdef int run(self) except -1:
        cdef cnp.ndarray dy = self._real(0)
        cdef cnp.ndarray sm = self._real(1)
        cdef Py_ssize_t rows = _dim(sm, 0), k = _dim(sm, 1), size = rows * k, step = 0
        y = self._labels(2, rows, k)
        if y is None:
            return self._perform()
        if cnp.PyArray_NDIM(dy) == 1:
            if _dim(dy, 0) != rows:
                return self._perform()
            step = 1
        cdef cnp.ndarray dx = self._empty(2, cnp.PyArray_DIMS(sm))
        cdef void* ptrs[4]
        ptrs[0] = cnp.PyArray_DATA(dy)
        ptrs[1] = cnp.PyArray_DATA(sm)
        ptrs[2] = cnp.PyArray_DATA(<cnp.ndarray>y)
        ptrs[3] = cnp.PyArray_DATA(dx)
        if size >= NOGIL_SIZE:
            with nogil:
                self._compute(ptrs, step, rows, k)
        elif size > 0:
            self._compute(ptrs, step, rows, k)
        (<list>self.out_cells[0])[0] = dx
        return 0

    cdef void _compute(self, void** p, Py_ssize_t step, Py_ssize_t rows,
                       Py_ssize_t k) noexcept nogil:
        if self.single:
            _xent_softmax_dx(<const float*>p[0], step, <const float*>p[1], <Py_ssize_t*>p[2],
                             <float*>p[3], rows, k)
        else:
            _xent_softmax_dx(<const double*>p[0], step, <const double*>p[1], <Py_ssize_t*>p[2],
                             <double*>p[3], rows, k)


cdef class CrossentropyCategoricalThunk(NnetThunk):
    """Runs CrossentropyCategorical1Hot: ``-log(coding[i, y[i]])`` (one element per row, so
    the GIL is kept)."""

    cdef int run(self) except -1:
        cdef cnp.ndarray coding = self._real(0)
        cdef Py_ssize_t rows = _dim(coding, 0), k = _dim(coding, 1)
        y = self._labels(1, rows, k)
        if y is None:
            return self._perform()
        cdef cnp.ndarray out = self._empty(1, cnp.PyArray_DIMS(coding))
        cdef void* cp = cnp.PyArray_DATA(coding)
        cdef const Py_ssize_t* yp = <Py_ssize_t*>cnp.PyArray_DATA(<cnp.ndarray>y)
        cdef void* op = cnp.PyArray_DATA(out)
        if self.single:
            _xent_categorical(<const float*>cp, yp, <float*>op, rows, k)
        else:
            _xent_categorical(<const double*>cp, yp, <double*>op, rows, k)
        (<list>self.out_cells[0])[0] = out
        return 0


cdef class CrossentropyCategoricalGradThunk(NnetThunk):
    """Runs CrossentropyCategorical1HotGrad: ``-g_y[i] / coding[i, y[i]]`` at the targets,
    zero elsewhere (one division per row, so the GIL is kept)."""

    cdef int run(self) except -1:
        cdef cnp.ndarray g = self._real(0)
        cdef cnp.ndarray coding = self._real(1)
        cdef Py_ssize_t rows = _dim(coding, 0), k = _dim(coding, 1)
        y = self._labels(2, rows, k)
        if y is None or _dim(g, 0) != rows:
            return self._perform()
        cdef cnp.ndarray out = cnp.PyArray_ZEROS(2, cnp.PyArray_DIMS(coding), self.typenum, 0)
        cdef void* gp = cnp.PyArray_DATA(g)
        cdef void* cp = cnp.PyArray_DATA(coding)
        cdef const Py_ssize_t* yp = <Py_ssize_t*>cnp.PyArray_DATA(<cnp.ndarray>y)
        cdef void* op = cnp.PyArray_DATA(out)
        if self.single:
            _xent_categorical_grad(<const float*>gp, <const float*>cp, yp, <float*>op, rows, k)
        else:
            _xent_categorical_grad(<const double*>gp, <const double*>cp, yp, <double*>op,
                                   rows, k)
        (<list>self.out_cells[0])[0] = out
        return 0
