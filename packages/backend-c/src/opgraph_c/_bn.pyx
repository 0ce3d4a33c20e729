# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# distutils: extra_compile_args = -O3 -fopenmp -fno-math-errno -fno-trapping-math
# distutils: extra_link_args = -fopenmp
# distutils: libraries = m
"""Precompiled kernels for batch normalization (``opgraph.tensor.nnet.bn``).

Thunks for ``AbstractBatchNormTrain``, ``AbstractBatchNormInference`` and
``AbstractBatchNormTrainGrad``, float32 and float64, when the axes that are *not*
normalized are one block of adjacent axes (per-activation on any rank, spatial on NCHW or
(N, F), ``(0, 1)`` on NCHW, ...): a C-contiguous input is then ``(outer, K, inner)`` with
``K`` channels, and each parameter is ``K`` contiguous values. Other axes keep ``perform``
(the entry in :mod:`opgraph_c.kernels.bn` does not serve them).

Statistics, per channel, in double precision:

- the forward pass reads the input once: each contiguous run of a channel (``inner``
  values, in L1 cache) gives its sum and the sum of squared deviations from its own mean,
  and the runs are merged with Chan's parallel formula (as accurate as two passes, without
  a second pass over memory). With ``inner == 1`` (an ``(N, F)`` matrix) blocks of rows
  play the runs' part, with the channels side by side in vectors;
- the backward pass takes ``sum(dy)``, ``sum(dy * (x - mean))`` and ``sum(x - mean)`` in
  one pass, then writes ``dx`` in a second.

The elementwise output passes run in the node's dtype, in ``perform``'s order of
operations, so results match ``perform`` within the dtype's rounding (the statistics are
more accurate than NumPy's float32 sums; nothing else differs). Channels are split across
OpenMP threads (contiguous chunks of columns when ``inner == 1``); every channel is computed
by one thread in a fixed order, so the result does not depend on the number of threads,
which the package's thread policy (:mod:`opgraph_c._threads`) chooses per call.

Empty inputs, values of another dtype or rank, parameters of the wrong shape and anything
else unusual go to the Op's ``perform`` before anything is written, so results and error
messages are the reference's.
"""

cimport numpy as cnp
from cython.parallel cimport prange
from libc.math cimport sqrt, sqrtf
from libc.stdlib cimport free, malloc

from opgraph_c._pool cimport POOL_MIN_BYTES, pooled_empty
from opgraph_c._threads cimport Team, monotonic, team_init, team_size, team_timed
from opgraph_c._vm cimport NodeThunk

import numpy as np

cnp.import_array()


cdef extern from *:
    """
    /* Sums over one contiguous run, accumulated in double (vectorised: omp simd). */
    static double opg_bn_sum_f32(const float *x, ptrdiff_t n) {
        double s = 0.0;
        #pragma omp simd reduction(+:s)
        for (ptrdiff_t i = 0; i < n; i++) s += (double)x[i];
        return s;
    }
    static double opg_bn_sum_f64(const double *x, ptrdiff_t n) {
        double s = 0.0;
        #pragma omp simd reduction(+:s)
        for (ptrdiff_t i = 0; i < n; i++) s += x[i];
        return s;
    }
    /* sum((x - m)^2) over one contiguous run. */
    static double opg_bn_sqdev_f32(const float *x, ptrdiff_t n, double m) {
        double s = 0.0;
        #pragma omp simd reduction(+:s)
        for (ptrdiff_t i = 0; i < n; i++) { double d = (double)x[i] - m; s += d * d; }
        return s;
    }
    static double opg_bn_sqdev_f64(const double *x, ptrdiff_t n, double m) {
        double s = 0.0;
        #pragma omp simd reduction(+:s)
        for (ptrdiff_t i = 0; i < n; i++) { double d = x[i] - m; s += d * d; }
        return s;
    }
    /* The backward pass's sums over one run: dy, dy * (x - m), x - m. */
    static void opg_bn_gsums_f32(const float *x, const float *dy, ptrdiff_t n, double m,
                                 double *s_dy, double *s_dyx, double *s_x) {
        double a = 0.0, b = 0.0, c = 0.0;
        #pragma omp simd reduction(+:a, b, c)
        for (ptrdiff_t i = 0; i < n; i++) {
            double d = (double)x[i] - m, g = (double)dy[i];
            a += g; b += g * d; c += d;
        }
        *s_dy += a; *s_dyx += b; *s_x += c;
    }
    static void opg_bn_gsums_f64(const double *x, const double *dy, ptrdiff_t n, double m,
                                 double *s_dy, double *s_dyx, double *s_x) {
        double a = 0.0, b = 0.0, c = 0.0;
        #pragma omp simd reduction(+:a, b, c)
        for (ptrdiff_t i = 0; i < n; i++) {
            double d = x[i] - m, g = dy[i];
            a += g; b += g * d; c += d;
        }
        *s_dy += a; *s_dyx += b; *s_x += c;
    }
    """
    double opg_bn_sum_f32(const float* x, Py_ssize_t n) noexcept nogil
    double opg_bn_sum_f64(const double* x, Py_ssize_t n) noexcept nogil
    double opg_bn_sqdev_f32(const float* x, Py_ssize_t n, double m) noexcept nogil
    double opg_bn_sqdev_f64(const double* x, Py_ssize_t n, double m) noexcept nogil
    void opg_bn_gsums_f32(const float* x, const float* dy, Py_ssize_t n, double m,
                          double* s_dy, double* s_dyx, double* s_x) noexcept nogil
    void opg_bn_gsums_f64(const double* x, const double* dy, Py_ssize_t n, double m,
                          double* s_dy, double* s_dyx, double* s_x) noexcept nogil


cdef enum:
    # Release the GIL only for inputs at least this large (releasing costs ~100 ns).
    NOGIL_SIZE = 4096
    # Rows per block in the column (inner == 1) statistics.
    ROW_BLOCK = 64
    MAX_PARAMS = 4


#: Input positions of AbstractBatchNormTrain's per-channel parameters.
PARAMS = (1, 2)
RUNNING_PARAMS = (1, 2, 5, 6)


ctypedef fused real:
    float
    double


cdef inline double _sum(const real* x, Py_ssize_t n) noexcept nogil:
    if real is float:
        return opg_bn_sum_f32(x, n)
    else:
        return opg_bn_sum_f64(x, n)


cdef inline double _sqdev(const real* x, Py_ssize_t n, double m) noexcept nogil:
    if real is float:
        return opg_bn_sqdev_f32(x, n, m)
    else:
        return opg_bn_sqdev_f64(x, n, m)


cdef inline void _gsums(const real* x, const real* dy, Py_ssize_t n, double m, double* a,
                        double* b, double* c) noexcept nogil:
    if real is float:
        opg_bn_gsums_f32(x, dy, n, m, a, b, c)
    else:
        opg_bn_gsums_f64(x, dy, n, m, a, b, c)


cdef inline real _invsqrt(real v) noexcept nogil:
    """``1 / sqrt(v)`` in the dtype, as NumPy's ``1.0 / np.sqrt(v)``."""
    if real is float:
        return <float>1.0 / sqrtf(v)
    else:
        return 1.0 / sqrt(v)


cdef inline real _sqrt(real v) noexcept nogil:
    if real is float:
        return sqrtf(v)
    else:
        return sqrt(v)


# ----------------------------------------------------------------------------- statistics


cdef void _stats_runs(const real* x, Py_ssize_t outer, Py_ssize_t K, Py_ssize_t inner,
                      Py_ssize_t k, double* mean, double* m2) noexcept nogil:
    """Mean and sum of squared deviations of channel ``k`` (``outer`` runs of ``inner``)."""
    cdef Py_ssize_t o
    cdef const real* run
    cdef double n_a = 0.0, mean_a = 0.0, m2_a = 0.0, mb, m2b, d, n, nb = <double>inner
    for o in range(outer):
        run = x + (o * K + k) * inner
        mb = _sum(run, inner) / nb
        m2b = _sqdev(run, inner, mb)
        n = n_a + nb
        d = mb - mean_a
        mean_a = mean_a + d * (nb / n)
        m2_a = m2_a + m2b + d * d * (n_a * nb / n)
        n_a = n
    mean[k] = mean_a
    m2[k] = m2_a


cdef void _stats_columns(const real* x, Py_ssize_t rows, Py_ssize_t K, Py_ssize_t lo,
                         Py_ssize_t hi, double* mean, double* m2, double* bm,
                         double* bm2) noexcept nogil:
    """Mean and sum of squared deviations of columns ``[lo, hi)`` of a ``(rows, K)`` matrix,
    by blocks of ``ROW_BLOCK`` rows merged with Chan's formula (``bm``, ``bm2``: scratch of
    ``K`` doubles)."""
    cdef Py_ssize_t r0, r, j, nrow
    cdef const real* row
    cdef double n_a = 0.0, nb, n, d, w
    for j in range(lo, hi):
        mean[j] = 0.0
        m2[j] = 0.0
    r0 = 0
    while r0 < rows:
        nrow = min(<Py_ssize_t>ROW_BLOCK, rows - r0)
        nb = <double>nrow
        for j in range(lo, hi):
            bm[j] = 0.0
            bm2[j] = 0.0
        for r in range(r0, r0 + nrow):
            row = x + r * K
            for j in range(lo, hi):
                bm[j] += <double>row[j]
        for j in range(lo, hi):
            bm[j] = bm[j] / nb
        for r in range(r0, r0 + nrow):
            row = x + r * K
            for j in range(lo, hi):
                d = <double>row[j] - bm[j]
                bm2[j] += d * d
        n = n_a + nb
        w = n_a * nb / n
        for j in range(lo, hi):
            d = bm[j] - mean[j]
            mean[j] = mean[j] + d * (nb / n)
            m2[j] = m2[j] + bm2[j] + d * d * w
        n_a = n
        r0 += nrow


cdef void _norm_runs(const real* x, real* out, Py_ssize_t outer, Py_ssize_t K,
                     Py_ssize_t inner, Py_ssize_t k, real mean, real a, real b) noexcept nogil:
    """``out = (x - mean) * a + b`` over channel ``k``'s runs."""
    cdef Py_ssize_t o, i, base
    for o in range(outer):
        base = (o * K + k) * inner
        for i in range(base, base + inner):
            out[i] = (x[i] - mean) * a + b


cdef void _norm_columns(const real* x, real* out, Py_ssize_t rows, Py_ssize_t K,
                        Py_ssize_t lo, Py_ssize_t hi, const real* mean, const real* a,
                        const real* b) noexcept nogil:
    """``out = (x - mean) * a + b`` on columns ``[lo, hi)`` of a ``(rows, K)`` matrix."""
    cdef Py_ssize_t r, j
    cdef const real* xr
    cdef real* orow
    for r in range(rows):
        xr = x + r * K
        orow = out + r * K
        for j in range(lo, hi):
            orow[j] = (xr[j] - mean[j]) * a[j] + b[j]


cdef inline Py_ssize_t _chunk(Py_ssize_t K, int nt, int t) noexcept nogil:
    """Start of thread ``t``'s chunk of ``K`` columns split in ``nt``."""
    return (K * t) // nt


# ------------------------------------------------------------------------------ the math


cdef void _train(const real* x, real* out, Py_ssize_t outer, Py_ssize_t K, Py_ssize_t inner,
                 const real* scale, const real* bias, real eps, real* mean_out,
                 real* var_out, real* invstd_out, double* work, int nt) noexcept nogil:
    """Batch statistics (``var_out``: the biased variance) and normalized output;
    ``work``: 4 * K doubles."""
    cdef double* mean = work
    cdef double* m2 = work + K
    cdef double count = <double>(outer * inner)
    cdef Py_ssize_t k
    cdef int t
    cdef real* a = <real*>(work + 2 * K)  # per-channel scale * invstd, in the dtype
    if inner > 1:
        for k in prange(K, num_threads=nt, schedule="static"):
            _stats_runs(x, outer, K, inner, k, mean, m2)
    else:
        for t in prange(nt, num_threads=nt, schedule="static"):
            _stats_columns(x, outer, K, _chunk(K, nt, t), _chunk(K, nt, t + 1), mean, m2,
                           work + 2 * K, work + 3 * K)
    for k in range(K):
        mean_out[k] = <real>mean[k]
        var_out[k] = <real>(m2[k] / count)
        invstd_out[k] = _invsqrt(var_out[k] + eps)
        a[k] = scale[k] * invstd_out[k]
    if inner > 1:
        for k in prange(K, num_threads=nt, schedule="static"):
            _norm_runs(x, out, outer, K, inner, k, mean_out[k], a[k], bias[k])
    else:
        for t in prange(nt, num_threads=nt, schedule="static"):
            _norm_columns(x, out, outer, K, _chunk(K, nt, t), _chunk(K, nt, t + 1), mean_out,
                          a, bias)


cdef void _inference(const real* x, real* out, Py_ssize_t outer, Py_ssize_t K,
                     Py_ssize_t inner, const real* scale, const real* bias, const real* mean,
                     const real* var, real eps, real* a, int nt) noexcept nogil:
    """``(x - mean) * (scale / sqrt(var + eps)) + bias``; ``a``: K values of scratch."""
    cdef Py_ssize_t k
    cdef int t
    for k in range(K):
        a[k] = scale[k] / _sqrt(var[k] + eps)
    if inner > 1:
        for k in prange(K, num_threads=nt, schedule="static"):
            _norm_runs(x, out, outer, K, inner, k, mean[k], a[k], bias[k])
    else:
        for t in prange(nt, num_threads=nt, schedule="static"):
            _norm_columns(x, out, outer, K, _chunk(K, nt, t), _chunk(K, nt, t + 1), mean, a,
                          bias)


cdef void _grad_sums_columns(const real* x, const real* dy, const real* xm, Py_ssize_t rows,
                             Py_ssize_t K, Py_ssize_t lo, Py_ssize_t hi, double* s_dy,
                             double* s_dyx, double* s_x) noexcept nogil:
    cdef Py_ssize_t r, j
    cdef double d, g
    for j in range(lo, hi):
        s_dy[j] = 0.0
        s_dyx[j] = 0.0
        s_x[j] = 0.0
    for r in range(rows):
        for j in range(lo, hi):
            d = <double>x[r * K + j] - <double>xm[j]
            g = <double>dy[r * K + j]
            s_dy[j] += g
            s_dyx[j] += g * d
            s_x[j] += d


cdef void _grad_dx_runs(const real* x, const real* dy, real* dx, Py_ssize_t outer,
                        Py_ssize_t K, Py_ssize_t inner, Py_ssize_t k, real xm, real a, real b,
                        real c, real s) noexcept nogil:
    """``dx = s * ((dy * a - (x - xm) * b) - c)`` over channel ``k``'s runs."""
    cdef Py_ssize_t o, i, base
    for o in range(outer):
        base = (o * K + k) * inner
        for i in range(base, base + inner):
            dx[i] = s * ((dy[i] * a - (x[i] - xm) * b) - c)


cdef void _grad_dx_columns(const real* x, const real* dy, real* dx, Py_ssize_t rows,
                           Py_ssize_t K, Py_ssize_t lo, Py_ssize_t hi, const real* xm,
                           const real* a, const real* b, const real* c,
                           const real* s) noexcept nogil:
    cdef Py_ssize_t r, j, at
    for r in range(rows):
        for j in range(lo, hi):
            at = r * K + j
            dx[at] = s[j] * ((dy[at] * a[j] - (x[at] - xm[j]) * b[j]) - c[j])


cdef void _train_grad(const real* x, const real* dy, real* dx, Py_ssize_t outer, Py_ssize_t K,
                      Py_ssize_t inner, const real* scale, const real* xm, const real* invstd,
                      real* g_scale, real* g_bias, double* work, int nt) noexcept nogil:
    """``dx``, ``dscale``, ``dbias`` of the training forward pass; ``work``: 5 * K doubles."""
    cdef double* s_dy = work
    cdef double* s_dyx = work + K
    cdef double* s_x = work + 2 * K
    cdef real* b = <real*>(work + 3 * K)
    cdef real* c = <real*>(work + 4 * K)
    cdef double m = <double>(outer * inner), inv, bb
    cdef Py_ssize_t k, o
    cdef int t
    if inner > 1:
        for k in prange(K, num_threads=nt, schedule="static"):
            s_dy[k] = 0.0
            s_dyx[k] = 0.0
            s_x[k] = 0.0
            for o in range(outer):
                _gsums(x + (o * K + k) * inner, dy + (o * K + k) * inner, inner, <double>xm[k],
                       &s_dy[k], &s_dyx[k], &s_x[k])
    else:
        for t in prange(nt, num_threads=nt, schedule="static"):
            _grad_sums_columns(x, dy, xm, outer, K, _chunk(K, nt, t), _chunk(K, nt, t + 1),
                               s_dy, s_dyx, s_x)
    for k in range(K):
        inv = <double>invstd[k]
        bb = (s_dyx[k] / m) * inv * inv * inv
        b[k] = <real>bb
        c[k] = <real>(inv * s_dy[k] / m - bb * (s_x[k] / m))
        g_scale[k] = <real>(s_dyx[k] * inv)
        g_bias[k] = <real>s_dy[k]
    if inner > 1:
        for k in prange(K, num_threads=nt, schedule="static"):
            _grad_dx_runs(x, dy, dx, outer, K, inner, k, xm[k], invstd[k], b[k], c[k],
                          scale[k])
    else:
        for t in prange(nt, num_threads=nt, schedule="static"):
            _grad_dx_columns(x, dy, dx, outer, K, _chunk(K, nt, t), _chunk(K, nt, t + 1), xm,
                             invstd, b, c, scale)


# -------------------------------------------------------------------------------- thunks


cdef class BNThunk(NodeThunk):
    """What the three thunks share: the layout ``(outer, K, inner)`` decoded from the Op's
    axes, the compute dtype, the thread team, and the checks of the run-time values.

    Parameters
    ----------
    node
        The Apply node; its non-normalized axes are the block ``[first, stop)``.
    in_cells, out_cells
        The node's storage cells.
    first, stop
        The block of axes that are not normalized.
    threshold, nthreads, adaptive
        The thread team (:mod:`opgraph_c._threads`).
    """

    cdef int ndim, first, stop, typenum
    cdef bint single
    cdef object dtype
    cdef Team team
    cdef int used_nt
    # filled by _layout for the current call
    cdef Py_ssize_t outer, K, inner

    def __init__(self, node, list in_cells, list out_cells, int first, int stop,
                 Py_ssize_t threshold=0, int nthreads=1, bint adaptive=False):
        super().__init__(node, in_cells, out_cells)
        self.dtype = np.dtype(node.outputs[0].type.dtype)
        if self.dtype not in (np.float32, np.float64):
            raise TypeError(f"{type(self).__name__} computes float32 or float64, not {self.dtype}")
        self.typenum = self.dtype.num
        self.single = self.dtype == np.float32
        self.ndim = node.inputs[0].type.ndim
        self.first, self.stop = first, stop
        team_init(&self.team, nthreads, threshold, adaptive)

    cdef object _array(self, Py_ssize_t i):
        """Input ``i`` if it is an ndarray of the dtype and rank, C-contiguous (a copy when
        strided), else None (perform judges it)."""
        value = self.arg(i)
        if not cnp.PyArray_Check(value):
            return None
        cdef cnp.ndarray a = <cnp.ndarray>value
        if cnp.PyArray_TYPE(a) != self.typenum or cnp.PyArray_NDIM(a) != self.ndim:
            return None
        if not cnp.PyArray_ISCARRAY_RO(a):
            a = np.ascontiguousarray(a)
        return a

    cdef bint _layout(self, cnp.ndarray x):
        """Set ``outer, K, inner`` from ``x``; False when ``x`` is empty."""
        cdef int d
        self.outer, self.K, self.inner = 1, 1, 1
        for d in range(self.ndim):
            if d < self.first:
                self.outer *= cnp.PyArray_DIM(x, d)
            elif d < self.stop:
                self.K *= cnp.PyArray_DIM(x, d)
            else:
                self.inner *= cnp.PyArray_DIM(x, d)
        return self.outer * self.K * self.inner > 0

    cdef bint _is_param(self, cnp.ndarray p, cnp.ndarray x):
        """Whether ``p`` has ``x``'s shape with 1 on the normalized axes."""
        cdef int d
        for d in range(self.ndim):
            if self.first <= d < self.stop:
                if cnp.PyArray_DIM(p, d) != cnp.PyArray_DIM(x, d):
                    return False
            elif cnp.PyArray_DIM(p, d) != 1:
                return False
        return True

    cdef list _params(self, cnp.ndarray x, tuple which):
        """Inputs ``which`` as per-channel parameter arrays, or None for perform."""
        out = []
        for i in which:
            p = self._array(i)
            if p is None or not self._is_param(<cnp.ndarray>p, x):
                return None
            out.append(p)
        return out

    cdef cnp.ndarray _like(self, cnp.ndarray a):
        """A new C-ordered array of ``a``'s shape in the dtype (pooled when big)."""
        if cnp.PyArray_NBYTES(a) >= POOL_MIN_BYTES:
            return pooled_empty(self.ndim, cnp.PyArray_DIMS(a), self.typenum)
        return cnp.PyArray_EMPTY(self.ndim, cnp.PyArray_DIMS(a), self.typenum, 0)

    cdef int _threads(self):
        """The team's threads for this call (no more than there are channels)."""
        cdef Py_ssize_t size = self.outer * self.K * self.inner
        cdef int nt = team_size(&self.team, size)
        if nt > self.K:
            nt = <int>self.K
        self.used_nt = nt if nt > 0 else 1
        return self.used_nt

    cdef void _timed(self, double start) noexcept:
        cdef Py_ssize_t size = self.outer * self.K * self.inner
        if self.team.nthreads > 1 and size >= self.team.threshold:
            team_timed(&self.team, self.used_nt, monotonic() - start, size)


cdef double* _work(Py_ssize_t n) except NULL:
    cdef double* w = <double*>malloc(max(n, <Py_ssize_t>1) * sizeof(double))
    if w == NULL:
        raise MemoryError("batch normalization: no memory for the per-channel sums")
    return w


cdef class BatchNormTrainThunk(BNThunk):
    """Runs AbstractBatchNormTrain: ``out, mean, invstd`` (and the running averages)."""

    cdef int fast(self) except -1:
        xo = self._array(0)
        if xo is None or not self._layout(<cnp.ndarray>xo):
            return 1
        cdef cnp.ndarray x = <cnp.ndarray>xo
        cdef bint running = len(self.in_cells) > 5
        params = self._params(x, RUNNING_PARAMS if running else PARAMS)
        if params is None:
            return 1
        cdef cnp.ndarray scale = params[0], bias = params[1]
        cdef cnp.ndarray out = self._like(x)
        cdef cnp.ndarray mean = self._like(scale), invstd = self._like(scale)
        cdef cnp.ndarray var = self._like(scale)
        eps_value = np.asarray(self.arg(3), dtype=self.dtype)
        cdef double eps = float(eps_value)
        cdef double* work = _work(4 * self.K)
        cdef int nt = self._threads()
        cdef double start = monotonic()
        cdef void* xp = cnp.PyArray_DATA(x)
        cdef void* op = cnp.PyArray_DATA(out)
        cdef void* sp = cnp.PyArray_DATA(scale)
        cdef void* bp = cnp.PyArray_DATA(bias)
        cdef void* mp = cnp.PyArray_DATA(mean)
        cdef void* ip = cnp.PyArray_DATA(invstd)
        cdef void* vp = cnp.PyArray_DATA(var)
        try:
            if self.outer * self.K * self.inner >= NOGIL_SIZE:
                with nogil:
                    self._compute(xp, op, sp, bp, eps, mp, vp, ip, work, nt)
            else:
                self._compute(xp, op, sp, bp, eps, mp, vp, ip, work, nt)
        finally:
            free(work)
        self._timed(start)
        self.set_out(0, out)
        self.set_out(1, mean)
        self.set_out(2, invstd)
        if running:
            self._running(x, params, mean, var)
        return 0

    cdef void _compute(self, void* x, void* out, void* scale, void* bias, double eps,
                       void* mean, void* var, void* invstd, double* work,
                       int nt) noexcept nogil:
        if self.single:
            _train(<const float*>x, <float*>out, self.outer, self.K, self.inner,
                   <const float*>scale, <const float*>bias, <float>eps, <float*>mean,
                   <float*>var, <float*>invstd, work, nt)
        else:
            _train(<const double*>x, <double*>out, self.outer, self.K, self.inner,
                   <const double*>scale, <const double*>bias, eps, <double*>mean,
                   <double*>var, <double*>invstd, work, nt)

    cdef int _running(self, cnp.ndarray x, list params, cnp.ndarray mean,
                      cnp.ndarray var) except -1:
        """The new running averages from the statistics (K values: NumPy, as perform)."""
        dtype = self.dtype
        f = np.asarray(self.arg(4), dtype=dtype)
        m = np.float64(cnp.PyArray_SIZE(x)) / np.float64(self.K)
        with np.errstate(invalid="ignore", divide="ignore"):
            unbias = np.asarray(m / (m - 1), dtype=dtype)
            self.set_out(3, np.asarray(params[2] * (1 - f) + mean * f, dtype=dtype))
            self.set_out(4, np.asarray(params[3] * (1 - f) + unbias * var * f, dtype=dtype))
        return 0


cdef class BatchNormInferenceThunk(BNThunk):
    """Runs AbstractBatchNormInference: ``(x - mean) * (scale / sqrt(var + eps)) + bias``."""

    cdef int fast(self) except -1:
        xo = self._array(0)
        if xo is None or not self._layout(<cnp.ndarray>xo):
            return 1
        cdef cnp.ndarray x = <cnp.ndarray>xo
        params = self._params(x, (1, 2, 3, 4))
        if params is None:
            return 1
        cdef cnp.ndarray out = self._like(x)
        cdef cnp.ndarray a = self._like(<cnp.ndarray>params[0])
        cdef double eps = float(np.asarray(self.arg(5), dtype=self.dtype))
        cdef void* ptrs[7]
        ptrs[0] = cnp.PyArray_DATA(x)
        ptrs[1] = cnp.PyArray_DATA(out)
        for i in range(4):
            ptrs[2 + i] = cnp.PyArray_DATA(<cnp.ndarray>params[i])
        ptrs[6] = cnp.PyArray_DATA(a)
        cdef int nt = self._threads()
        cdef double start = monotonic()
        if self.outer * self.K * self.inner >= NOGIL_SIZE:
            with nogil:
                self._compute(ptrs, eps, nt)
        else:
            self._compute(ptrs, eps, nt)
        self._timed(start)
        self.set_out(0, out)
        return 0

    cdef void _compute(self, void** p, double eps, int nt) noexcept nogil:
        if self.single:
            _inference(<const float*>p[0], <float*>p[1], self.outer, self.K, self.inner,
                       <const float*>p[2], <const float*>p[3], <const float*>p[4],
                       <const float*>p[5], <float>eps, <float*>p[6], nt)
        else:
            _inference(<const double*>p[0], <double*>p[1], self.outer, self.K, self.inner,
                       <const double*>p[2], <const double*>p[3], <const double*>p[4],
                       <const double*>p[5], eps, <double*>p[6], nt)


cdef class BatchNormTrainGradThunk(BNThunk):
    """Runs AbstractBatchNormTrainGrad: ``dx, dscale, dbias``."""

    cdef int fast(self) except -1:
        xo = self._array(0)
        dyo = self._array(1)
        if xo is None or dyo is None or not self._layout(<cnp.ndarray>xo):
            return 1
        cdef cnp.ndarray x = <cnp.ndarray>xo, dy = <cnp.ndarray>dyo
        cdef int d
        for d in range(self.ndim):
            if cnp.PyArray_DIM(dy, d) != cnp.PyArray_DIM(x, d):
                return 1
        params = self._params(x, (2, 3, 4))
        if params is None:
            return 1
        cdef cnp.ndarray dx = self._like(x)
        cdef cnp.ndarray g_scale = self._like(<cnp.ndarray>params[0])
        cdef cnp.ndarray g_bias = self._like(<cnp.ndarray>params[0])
        cdef void* ptrs[8]
        ptrs[0] = cnp.PyArray_DATA(x)
        ptrs[1] = cnp.PyArray_DATA(dy)
        ptrs[2] = cnp.PyArray_DATA(dx)
        for i in range(3):
            ptrs[3 + i] = cnp.PyArray_DATA(<cnp.ndarray>params[i])
        ptrs[6] = cnp.PyArray_DATA(g_scale)
        ptrs[7] = cnp.PyArray_DATA(g_bias)
        cdef double* work = _work(5 * self.K)
        cdef int nt = self._threads()
        cdef double start = monotonic()
        try:
            if self.outer * self.K * self.inner >= NOGIL_SIZE:
                with nogil:
                    self._compute(ptrs, work, nt)
            else:
                self._compute(ptrs, work, nt)
        finally:
            free(work)
        self._timed(start)
        self.set_out(0, dx)
        self.set_out(1, g_scale)
        self.set_out(2, g_bias)
        return 0

    cdef void _compute(self, void** p, double* work, int nt) noexcept nogil:
        if self.single:
            _train_grad(<const float*>p[0], <const float*>p[1], <float*>p[2], self.outer,
                        self.K, self.inner, <const float*>p[3], <const float*>p[4],
                        <const float*>p[5], <float*>p[6], <float*>p[7], work, nt)
        else:
            _train_grad(<const double*>p[0], <const double*>p[1], <double*>p[2], self.outer,
                        self.K, self.inner, <const double*>p[3], <const double*>p[4],
                        <const double*>p[5], <double*>p[6], <double*>p[7], work, nt)
