# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Precompiled thunks for batched matrix products: ``MatMul`` and ``BatchedDot``.

Both ops are a batch of independent matrix products ``out[b] = x[b] @ y[b]``. Each thunk is
a :class:`~opgraph_c._vm.CThunk` (the VM calls its ``run`` through the C vtable) that
decodes its operands into one description (batch lengths, each operand's batch steps, the
matrices' sizes and steps) and runs the products for float32 and float64 operands:

- **BLAS**, one call per product: ``?gemm``, or ``?gemv`` / ``?dot`` when a side is a
  vector (as NumPy's ``matmul`` does). The routines are SciPy's ``cython_blas`` ones that
  :mod:`opgraph_c._blas` loads and checks (``_blas.routine_address``).
- **A direct loop** for tiny products (``m * n * k`` up to :data:`SMALL_WORK`, by the
  routine a product would call): each output element summed in a register. A BLAS call
  costs 20-40 ns (``?gemm``, ``?gemv``) or ~6 ns (``?dot``) before any arithmetic.
- **One BLAS call for the whole batch** when ``y`` is the same matrix for every product
  (its batch axes broadcast, as in ``matmul(x3, w)``) and ``x``'s batch folds into its
  rows (C-ordered matrices, batch steps ``m`` rows apart): ``(B*m, k) @ (k, n)``.

Layouts. A matrix whose rows (or columns) are evenly spaced, with unit steps inside them,
goes to BLAS as it is (row-major as the transpose of a column-major matrix); batch axes may
have any steps (0 where broadcast, negative, gaps). An operand whose matrices BLAS cannot
address (negative or interleaved steps inside the matrix; NumPy's Fortran order of a 3-d
array, whose batch axis is the fastest) is copied to C order first, as NumPy does.

Semantics are those of the Ops' ``perform`` (:mod:`opgraph.tensor.dot`): the result is a new
C-ordered array of the node's dtype. Every case the C path does not take calls ``perform``
itself before anything is written, so values and error messages are perform's: values that
are not aligned, native, exact ndarrays of the node's dtype and rank; batch lengths that do
not match (or a broadcastable axis whose length is not 1), inner sizes that do not match,
and sizes beyond BLAS's 32-bit integers. An empty batch or empty matrix gives an empty
result and an empty inner dimension (``k == 0``) a result of zeros, as NumPy does.

Sums. The BLAS paths call the same OpenBLAS kernels as NumPy's ``matmul`` (results were
identical in the tests' cases); the direct loop adds each element's ``k`` products in
order, so it may differ from BLAS by rounding (measured: at most 1 ulp of
``sum |x||y|``; the tests allow ``2 k`` ulps).

BENCHMARK (per product, batch of 1000, float64, 2 busy cores of an AMD EPYC, SciPy's
OpenBLAS 0.3.x): direct loop / BLAS / ``np.matmul``, ns

    m, k, n    2,2,2      3,3,3      4,4,4      2,8,2      4,4,1      8,8,1      1,8,1     1,32,1
    loop        9.0       18.2       34.3       17.0       13.2       33.7        7.2       19.5
    BLAS       20.2       23.6       26.7       24.4       39.3       45.4        6.8        8.4
    NumPy      27.5       32.2       34.1       31.6       39.0       46.4        9.3       12.1
"""

cimport numpy as cnp
from libc.limits cimport INT_MAX

from opgraph_c._blas cimport dgemm_t, dgemv_t, ddot_t, sdot_t, sgemm_t, sgemv_t
from opgraph_c._vm cimport CThunk


import numpy as np

cnp.import_array()


# ------------------------------------------------------------------- the BLAS routines

cdef sgemm_t _sgemm = NULL
cdef dgemm_t _dgemm = NULL
cdef sgemv_t _sgemv = NULL
cdef dgemv_t _dgemv = NULL
cdef sdot_t _sdot = NULL
cdef ddot_t _ddot = NULL


def _load_blas():
    """Read the routines' addresses from :mod:`opgraph_c._blas` (once, at import), which
    checks them against its ``SIGNATURES``."""
    global _sgemm, _dgemm, _sgemv, _dgemv, _sdot, _ddot
    from opgraph_c._blas import routine_address

    _sgemm = <sgemm_t><size_t>routine_address("gemm", "s")
    _dgemm = <dgemm_t><size_t>routine_address("gemm", "d")
    _sgemv = <sgemv_t><size_t>routine_address("gemv", "s")
    _dgemv = <dgemv_t><size_t>routine_address("gemv", "d")
    _sdot = <sdot_t><size_t>routine_address("dot", "s")
    _ddot = <ddot_t><size_t>routine_address("dot", "d")


_load_blas()


cdef enum:
    MAXDIMS = 64
    # Release the GIL from this many multiply-adds on (releasing costs ~100 ns).
    NOGIL_WORK = 4096
    # How BLAS reads a matrix (see _layout).
    COL = 0
    ROW = 1
    BAD = -1
    # How each product of a batch runs (see _plan).
    LOOP = 0  # the direct loop
    GEMM = 1  # ?gemm
    GEMV_N = 2  # ?gemv, y a column (n == 1)
    GEMV_M = 3  # ?gemv, x a row (m == 1)
    DOT = 4  # ?dot (m == n == 1)

#: Products of at most this many multiply-adds (``m * n * k``) run the direct loop rather
#: than a BLAS call each, by the BLAS routine they would call (measured: see the module
#: docstring; ``?gemv`` costs the most per call, ``?dot`` the least).
SMALL_WORK = {"gemm": 32, "gemv": 64, "dot": 8}

cdef Py_ssize_t SMALL_GEMM = SMALL_WORK["gemm"]
cdef Py_ssize_t SMALL_GEMV = SMALL_WORK["gemv"]
cdef Py_ssize_t SMALL_DOT = SMALL_WORK["dot"]


# ------------------------------------------------------------------- the direct loop

cdef extern from *:
    """
    /* opg_small_<s>: out = x @ y for one small product, out row-major (m x n, ld n),
     * x[i, p] at x[i * xr + p * xc], y[p, j] at y[p * yr + j * yc] (steps in elements).
     * Each out[i, j] is summed in a register, over p in order. */
    #define OPG_DEFINE_SMALL(T, s)                                                        \\
    static void opg_small_##s(Py_ssize_t m, Py_ssize_t n, Py_ssize_t k,                   \\
                              const T *x, Py_ssize_t xr, Py_ssize_t xc,                   \\
                              const T *y, Py_ssize_t yr, Py_ssize_t yc, T *restrict out)  \\
    {                                                                                     \\
        Py_ssize_t i, j, p;                                                               \\
        for (i = 0; i < m; i++) {                                                         \\
            const T *xi = x + i * xr;                                                     \\
            for (j = 0; j < n; j++) {                                                     \\
                const T *yj = y + j * yc;                                                 \\
                T acc = 0;                                                                \\
                for (p = 0; p < k; p++)                                                   \\
                    acc += xi[p * xc] * yj[p * yr];                                       \\
                out[i * n + j] = acc;                                                     \\
            }                                                                             \\
        }                                                                                 \\
    }

    OPG_DEFINE_SMALL(double, d)
    OPG_DEFINE_SMALL(float, s)
    """
    void opg_small_d(Py_ssize_t m, Py_ssize_t n, Py_ssize_t k, const double* x,
                     Py_ssize_t xr, Py_ssize_t xc, const double* y, Py_ssize_t yr,
                     Py_ssize_t yc, double* out) noexcept nogil
    void opg_small_s(Py_ssize_t m, Py_ssize_t n, Py_ssize_t k, const float* x,
                     Py_ssize_t xr, Py_ssize_t xc, const float* y, Py_ssize_t yr,
                     Py_ssize_t yc, float* out) noexcept nogil


# ------------------------------------------------------------------- the problem

cdef struct Problem:
    # A batch of products out[b] = x[b] @ y[b]: nb batch axes of lengths dims[:nb] (the
    # output's), each operand's steps along them in bytes (0: broadcast), and its matrices'
    # row and column steps in bytes (0 along a length-1 side). out is C-ordered.
    int nb
    Py_ssize_t dims[MAXDIMS]
    Py_ssize_t xb[MAXDIMS]
    Py_ssize_t yb[MAXDIMS]
    Py_ssize_t m, k, n
    Py_ssize_t xr, xc, yr, yc
    char* x
    char* y
    # The output's rank and shape.
    int out_nd
    cnp.npy_intp out_dims[MAXDIMS]


cdef struct Plan:
    # How each product runs: mode (LOOP, GEMM, GEMV_N, GEMV_M or DOT), the BLAS layouts
    # and leading dimensions of the operands read as matrices, the element steps of those
    # read as vectors (x's row, y's column).
    int mode
    int lx, ldx, ly, ldy
    int incx, incy


cdef inline Py_ssize_t _step(cnp.ndarray a, int d) noexcept:
    """The byte step of ``a`` along ``d``, 0 if that axis has length 1 (it is never taken)."""
    return 0 if cnp.PyArray_DIM(a, d) == 1 else cnp.PyArray_STRIDE(a, d)


cdef int _layout(Py_ssize_t rows, Py_ssize_t cols, Py_ssize_t rs, Py_ssize_t cs,
                 Py_ssize_t item, int* ld) noexcept nogil:
    """How BLAS reads a ``rows x cols`` matrix with byte steps ``rs``, ``cs``; sets ``ld``.

    ROW: ``a[i, j]`` at ``i * ld + j`` elements (BLAS sees the transpose); COL: at
    ``i + j * ld``; BAD: neither (negative, interleaved or non-unit steps inside the
    matrix, or a leading dimension beyond int). The step of a length-1 side does not matter.
    """
    cdef Py_ssize_t s
    if cols <= 1 or cs == item:
        if rows <= 1:
            ld[0] = <int>(cols if cols > 1 else 1)
            return ROW
        if rs > 0 and rs % item == 0:
            s = rs // item
            if s >= cols and s <= INT_MAX:
                ld[0] = <int>s
                return ROW
    if rows <= 1 or rs == item:
        if cols <= 1:
            ld[0] = <int>(rows if rows > 1 else 1)
            return COL
        if cs > 0 and cs % item == 0:
            s = cs // item
            if s >= rows and s <= INT_MAX:
                ld[0] = <int>s
                return COL
    return BAD


cdef inline int _inc(Py_ssize_t length, Py_ssize_t step, Py_ssize_t item) noexcept nogil:
    """The BLAS increment of a vector of ``length`` elements ``step`` bytes apart, or 0 if
    BLAS cannot step through it (a negative or non-whole step: BLAS would read it
    backwards)."""
    if length <= 1:
        return 1
    if step <= 0 or step % item != 0 or step // item > INT_MAX:
        return 0
    return <int>(step // item)


cdef inline Py_ssize_t _batch(Problem* p) noexcept nogil:
    """The number of products (the batch axes' lengths multiplied)."""
    cdef Py_ssize_t total = 1
    cdef int d
    for d in range(p.nb):
        total *= p.dims[d]
    return total


cdef void _collapse(Problem* p) noexcept nogil:
    """Drop length-1 batch axes and merge neighbours that both operands step through evenly
    (the output, C-ordered, always does): fewer, longer batch axes to walk."""
    cdef int d, nb = 0
    for d in range(p.nb):
        if p.dims[d] == 1:
            continue
        if (nb > 0 and p.xb[nb - 1] == p.xb[d] * p.dims[d]
                and p.yb[nb - 1] == p.yb[d] * p.dims[d]):
            p.dims[nb - 1] *= p.dims[d]
            p.xb[nb - 1], p.yb[nb - 1] = p.xb[d], p.yb[d]
            continue
        p.dims[nb], p.xb[nb], p.yb[nb] = p.dims[d], p.xb[d], p.yb[d]
        nb += 1
    p.nb = nb


cdef bint _fold(Problem* p, Py_ssize_t item) noexcept nogil:
    """Turn the batch into rows of one product if ``y`` is one matrix for the whole batch
    and ``x``'s matrices are consecutive rows of one row-major matrix; True if done.

    Call after ``_collapse`` (at most one batch axis is left when this applies).
    """
    cdef Py_ssize_t rs
    if p.nb != 1 or p.yb[0] != 0 or not (p.k <= 1 or p.xc == item):
        return False
    rs = p.xr if p.m > 1 else p.xb[0]
    if rs <= 0 or rs % item != 0 or rs // item < p.k or rs // item > INT_MAX:
        return False
    if p.xb[0] != rs * p.m or p.dims[0] * p.m > INT_MAX:
        return False
    p.m *= p.dims[0]
    p.xr = rs
    p.nb = 0
    return True


# ------------------------------------------------------------------- running the products

cdef Py_ssize_t _n_loop = 0, _n_gemm = 0, _n_gemv = 0, _n_dot = 0, _n_folded = 0
cdef Py_ssize_t _n_copied = 0


def batched_stats():
    """Counts of this process's batched products (a diagnostic; the tests read from it
    which path a product took): ``loop`` (products by the direct loop), ``gemm``, ``gemv``,
    ``dot`` (BLAS calls), ``folded`` (batches run as one product), ``copied`` (operands
    copied to C order first)."""
    return {"loop": _n_loop, "gemm": _n_gemm, "gemv": _n_gemv, "dot": _n_dot,
            "folded": _n_folded, "copied": _n_copied}


cdef inline bint _small(Problem* p, Py_ssize_t small_work) noexcept nogil:
    """Whether ``p``'s products run the direct loop: at most ``small_work`` multiply-adds
    each or, if ``small_work`` is negative, at most :data:`SMALL_WORK` of the BLAS routine
    they would call."""
    cdef Py_ssize_t work = p.m * p.n * p.k
    if small_work < 0:
        if p.m == 1 and p.n == 1:
            small_work = SMALL_DOT
        elif p.m == 1 or p.n == 1:
            small_work = SMALL_GEMV
        else:
            small_work = SMALL_GEMM
    return work <= small_work


cdef bint _plan(Problem* p, Py_ssize_t item, Py_ssize_t small_work, Plan* q, bint* x_bad,
                bint* y_bad) noexcept nogil:
    """Pick how each product of ``p`` runs, into ``q``; False if an operand must be copied
    first (``x_bad``, ``y_bad``: the steps of its matrices are not the plan's).

    Small products (``_small``) take the direct loop (steps in whole elements); others
    BLAS: ``?dot`` for a row times a column, ``?gemv`` when one side is
    a vector (as NumPy's matmul does: ``?gemm`` is several times slower there), else
    ``?gemm``.
    """
    x_bad[0] = y_bad[0] = False
    if _small(p, small_work):
        q.mode = LOOP
        x_bad[0] = p.xr % item != 0 or p.xc % item != 0
        y_bad[0] = p.yr % item != 0 or p.yc % item != 0
    elif p.m == 1 and p.n == 1:
        q.mode = DOT
        q.incx = _inc(p.k, p.xc, item)
        q.incy = _inc(p.k, p.yr, item)
        x_bad[0], y_bad[0] = q.incx == 0, q.incy == 0
    elif p.n == 1:
        q.mode = GEMV_N
        q.lx = _layout(p.m, p.k, p.xr, p.xc, item, &q.ldx)
        q.incy = _inc(p.k, p.yr, item)
        x_bad[0], y_bad[0] = q.lx == BAD, q.incy == 0
    elif p.m == 1:
        q.mode = GEMV_M
        q.incx = _inc(p.k, p.xc, item)
        q.ly = _layout(p.k, p.n, p.yr, p.yc, item, &q.ldy)
        x_bad[0], y_bad[0] = q.incx == 0, q.ly == BAD
    else:
        q.mode = GEMM
        q.lx = _layout(p.m, p.k, p.xr, p.xc, item, &q.ldx)
        q.ly = _layout(p.k, p.n, p.yr, p.yc, item, &q.ldy)
        x_bad[0], y_bad[0] = q.lx == BAD, q.ly == BAD
    return not (x_bad[0] or y_bad[0])


cdef void _products(Problem* p, Plan* q, int typenum, Py_ssize_t item,
                    char* out) noexcept nogil:
    """Run every product of ``p`` into ``out`` (C-ordered) as ``q`` says, walking the batch
    axes (the last one fastest).

    BLAS is column-major: it computes the transpose of each row-major output,
    ``out.T (n x m) = y.T @ x.T``, from operands read as they lie (a ROW matrix is the
    column-major storage of its transpose).
    """
    cdef Py_ssize_t idx[MAXDIMS]
    cdef Py_ssize_t total = _batch(p), b, step = p.m * p.n * item
    cdef Py_ssize_t xr = p.xr // item, xc = p.xc // item, yr = p.yr // item, yc = p.yc // item
    cdef char* xp = p.x
    cdef char* yp = p.y
    cdef int d, one = 1
    cdef int M = 0, N = 0, K = <int>p.k, ldo = <int>(p.n if p.n > 1 else 1)
    cdef char ta = c"N", tb = c"N"
    cdef double done = 1.0, dzero = 0.0
    cdef float sone = 1.0, szero = 0.0
    if q.mode == GEMM:
        M, N = <int>p.n, <int>p.m
        ta = c"N" if q.ly == ROW else c"T"
        tb = c"N" if q.lx == ROW else c"T"
    elif q.mode == GEMV_N:  # out (m) = x (m x k) @ y (k)
        ta = c"T" if q.lx == ROW else c"N"
        M, N = (K, <int>p.m) if q.lx == ROW else (<int>p.m, K)
    elif q.mode == GEMV_M:  # out (n) = y.T (n x k) @ x (k)
        ta = c"N" if q.ly == ROW else c"T"
        M, N = (<int>p.n, K) if q.ly == ROW else (K, <int>p.n)
    for d in range(p.nb):
        idx[d] = 0
    for b in range(total):
        if typenum == cnp.NPY_DOUBLE:
            if q.mode == LOOP:
                opg_small_d(p.m, p.n, p.k, <double*>xp, xr, xc, <double*>yp, yr, yc,
                            <double*>out)
            elif q.mode == GEMM:
                _dgemm(&ta, &tb, &M, &N, &K, &done, <double*>yp, &q.ldy, <double*>xp,
                       &q.ldx, &dzero, <double*>out, &ldo)
            elif q.mode == GEMV_N:
                _dgemv(&ta, &M, &N, &done, <double*>xp, &q.ldx, <double*>yp, &q.incy,
                       &dzero, <double*>out, &one)
            elif q.mode == GEMV_M:
                _dgemv(&ta, &M, &N, &done, <double*>yp, &q.ldy, <double*>xp, &q.incx,
                       &dzero, <double*>out, &one)
            else:
                (<double*>out)[0] = _ddot(&K, <double*>xp, &q.incx, <double*>yp, &q.incy)
        else:
            if q.mode == LOOP:
                opg_small_s(p.m, p.n, p.k, <float*>xp, xr, xc, <float*>yp, yr, yc,
                            <float*>out)
            elif q.mode == GEMM:
                _sgemm(&ta, &tb, &M, &N, &K, &sone, <float*>yp, &q.ldy, <float*>xp,
                       &q.ldx, &szero, <float*>out, &ldo)
            elif q.mode == GEMV_N:
                _sgemv(&ta, &M, &N, &sone, <float*>xp, &q.ldx, <float*>yp, &q.incy,
                       &szero, <float*>out, &one)
            elif q.mode == GEMV_M:
                _sgemv(&ta, &M, &N, &sone, <float*>yp, &q.ldy, <float*>xp, &q.incx,
                       &szero, <float*>out, &one)
            else:
                (<float*>out)[0] = _sdot(&K, <float*>xp, &q.incx, <float*>yp, &q.incy)
        out += step
        d = p.nb - 1
        while d >= 0:  # the next batch index
            idx[d] += 1
            xp += p.xb[d]
            yp += p.yb[d]
            if idx[d] < p.dims[d]:
                break
            xp -= p.xb[d] * p.dims[d]
            yp -= p.yb[d] * p.dims[d]
            idx[d] = 0
            d -= 1


# ------------------------------------------------------------------- thunks


cdef inline cnp.ndarray _fast(object value, int typenum, int ndim):
    """``value`` if it is an aligned, native, exact ndarray of ``typenum`` and ``ndim``."""
    cdef cnp.ndarray a
    if not cnp.PyArray_CheckExact(value):
        return None
    a = <cnp.ndarray>value
    if (cnp.PyArray_TYPE(a) != typenum or cnp.PyArray_NDIM(a) != ndim
            or not cnp.PyArray_ISALIGNED(a) or not cnp.PyArray_ISNOTSWAPPED(a)):
        return None
    return a


cdef class BatchedThunk(CThunk):
    """Base of the batched-product thunks: decoding is the subclass's (``decode``), the
    products and every fallback to ``perform`` are here.

    Parameters
    ----------
    node
        The Apply node (its Op's ``perform`` handles every case the thunk does not).
    in_cells, out_cells
        The node's storage cells.
    dtype
        The operands' and the output's dtype: ``float32`` or ``float64``.
    small_work
        Products of at most this many multiply-adds run the direct loop (-1: the module's
        :data:`SMALL_WORK` by BLAS routine; tests and benchmarks pick a path with 0 or a
        large value).
    fold
        Run a batch whose ``y`` is one matrix as one product (tests turn it off).
    """

    cdef public object node
    cdef object perform
    cdef list in_cells, out_cells
    cdef int typenum, xnd, ynd
    cdef Py_ssize_t item, small_work
    cdef bint fold

    def __init__(self, node, list in_cells, list out_cells, dtype, Py_ssize_t small_work=-1,
                 bint fold=True):
        dtype = np.dtype(dtype)
        if dtype.num not in (cnp.NPY_FLOAT, cnp.NPY_DOUBLE):
            raise TypeError(f"{type(self).__name__} runs float32 or float64, not {dtype}")
        self.xnd = node.inputs[0].type.ndim
        self.ynd = node.inputs[1].type.ndim
        if max(self.xnd, self.ynd, node.outputs[0].type.ndim) > MAXDIMS:
            raise ValueError(f"{node.op}: more than {MAXDIMS} dimensions")
        self.node = node
        self.perform = node.op.perform
        self.in_cells, self.out_cells = in_cells, out_cells
        self.inputs, self.outputs = in_cells, out_cells
        self.lazy = False
        self.typenum = dtype.num
        self.item = dtype.itemsize
        self.small_work = small_work
        self.fold = fold

    cdef bint decode(self, cnp.ndarray x, cnp.ndarray y, Problem* p) except -1:
        """Fill ``p`` from the operands; False if their shapes are not the C path's."""
        return False

    cdef int _fallback(self) except -1:
        """Run the Op's ``perform`` (every case the C path does not take)."""
        self.perform(self.node, [(<list>c)[0] for c in self.in_cells], self.out_cells)
        return 0

    cdef bint _prepare(self, Problem* p, Plan* q, bint* folded, bint* x_bad,
                       bint* y_bad) noexcept:
        """Plan the products of the decoded ``p`` into ``q``: batch axes merged, the batch
        folded into one product when it pays (``folded``); False if an operand must be
        copied first (``x_bad``, ``y_bad``)."""
        cdef Problem one
        _collapse(p)
        folded[0] = False
        if self.fold:
            one = p[0]
            if _fold(&one, self.item) and not _small(&one, self.small_work):
                p[0] = one
                folded[0] = True
        return _plan(p, self.item, self.small_work, q, x_bad, y_bad)

    cdef int run(self) except -1:
        global _n_loop, _n_gemm, _n_gemv, _n_dot, _n_folded, _n_copied
        cdef int t = self.typenum
        cdef cnp.ndarray x = _fast((<list>self.in_cells[0])[0], t, self.xnd)
        cdef cnp.ndarray y = _fast((<list>self.in_cells[1])[0], t, self.ynd)
        cdef Problem p
        cdef Plan q
        cdef bint folded, x_bad, y_bad
        cdef Py_ssize_t total, work
        cdef cnp.ndarray out
        if x is None or y is None or not self.decode(x, y, &p):
            return self._fallback()
        if p.m > INT_MAX or p.n > INT_MAX or p.k > INT_MAX:
            return self._fallback()
        if p.m == 0 or p.n == 0 or p.k == 0 or _batch(&p) == 0:  # NumPy's empty sums: 0
            out = <cnp.ndarray>cnp.PyArray_ZEROS(p.out_nd, p.out_dims, t, 0)
            (<list>self.out_cells[0])[0] = out
            return 0
        if not self._prepare(&p, &q, &folded, &x_bad, &y_bad):
            # Copy the operands whose matrices BLAS cannot address to C order; then it can.
            if x_bad:
                x = <cnp.ndarray>cnp.PyArray_NewCopy(x, cnp.NPY_CORDER)
                _n_copied += 1
            if y_bad:
                y = <cnp.ndarray>cnp.PyArray_NewCopy(y, cnp.NPY_CORDER)
                _n_copied += 1
            self.decode(x, y, &p)
            if not self._prepare(&p, &q, &folded, &x_bad, &y_bad):
                raise AssertionError(f"{self.node.op}: no BLAS layout after a C-ordered copy")
        out = <cnp.ndarray>cnp.PyArray_EMPTY(p.out_nd, p.out_dims, t, 0)
        total = _batch(&p)
        if folded:
            _n_folded += 1
        if q.mode == LOOP:
            _n_loop += total
        elif q.mode == GEMM:
            _n_gemm += total
        elif q.mode == DOT:
            _n_dot += total
        else:
            _n_gemv += total
        work = p.m * p.n * p.k
        if total >= NOGIL_WORK or work >= NOGIL_WORK or total * work >= NOGIL_WORK:
            with nogil:
                _products(&p, &q, t, self.item, cnp.PyArray_BYTES(out))
        else:
            _products(&p, &q, t, self.item, cnp.PyArray_BYTES(out))
        (<list>self.out_cells[0])[0] = out
        return 0


cdef class MatMulThunk(BatchedThunk):
    """``MatMul``: NumPy's ``matmul`` of two inputs of one rank >= 2, batch axes
    broadcasting only where the node's types say so (as ``perform`` checks)."""

    cdef int nb
    cdef bint xbc[MAXDIMS]
    cdef bint ybc[MAXDIMS]

    def __init__(self, node, list in_cells, list out_cells, dtype, Py_ssize_t small_work=-1,
                 bint fold=True):
        BatchedThunk.__init__(self, node, in_cells, out_cells, dtype, small_work, fold)
        if self.xnd != self.ynd or self.xnd < 2:
            raise TypeError(f"MatMulThunk needs inputs of one rank >= 2, not {node}")
        self.nb = self.xnd - 2
        cdef int d
        for d in range(self.nb):
            self.xbc[d] = node.inputs[0].type.broadcastable[d]
            self.ybc[d] = node.inputs[1].type.broadcastable[d]

    cdef bint decode(self, cnp.ndarray x, cnp.ndarray y, Problem* p) except -1:
        cdef int d, nb = self.nb
        cdef Py_ssize_t xl, yl, length
        for d in range(nb):
            xl, yl = cnp.PyArray_DIM(x, d), cnp.PyArray_DIM(y, d)
            if (self.xbc[d] and xl != 1) or (self.ybc[d] and yl != 1):
                return False
            if not self.xbc[d] and not self.ybc[d] and xl != yl:
                return False
            length = yl if self.xbc[d] else xl
            p.dims[d] = length
            p.out_dims[d] = length
            p.xb[d] = _step(x, d)
            p.yb[d] = _step(y, d)
        p.m, p.k = cnp.PyArray_DIM(x, nb), cnp.PyArray_DIM(x, nb + 1)
        p.n = cnp.PyArray_DIM(y, nb + 1)
        if cnp.PyArray_DIM(y, nb) != p.k:
            return False
        p.xr, p.xc = _step(x, nb), _step(x, nb + 1)
        p.yr, p.yc = _step(y, nb), _step(y, nb + 1)
        p.x, p.y = cnp.PyArray_BYTES(x), cnp.PyArray_BYTES(y)
        p.nb = nb
        p.out_nd = nb + 2
        p.out_dims[nb], p.out_dims[nb + 1] = p.m, p.n
        return True


cdef class BatchedDotThunk(BatchedThunk):
    """``BatchedDot``: ``dot(x[i], y[i])`` along axis 0 of 2-d or 3-d inputs (a 2-d ``x``
    is a batch of rows, a 2-d ``y`` a batch of columns; their axes are dropped)."""

    def __init__(self, node, list in_cells, list out_cells, dtype, Py_ssize_t small_work=-1,
                 bint fold=True):
        BatchedThunk.__init__(self, node, in_cells, out_cells, dtype, small_work, fold)
        if self.xnd not in (2, 3) or self.ynd not in (2, 3):
            raise TypeError(f"BatchedDotThunk needs 2-d or 3-d inputs, not {node}")

    cdef bint decode(self, cnp.ndarray x, cnp.ndarray y, Problem* p) except -1:
        cdef Py_ssize_t batch = cnp.PyArray_DIM(x, 0)
        if cnp.PyArray_DIM(y, 0) != batch:
            return False
        p.nb = 1
        p.dims[0] = batch
        p.out_dims[0] = batch
        p.out_nd = 1
        p.xb[0], p.yb[0] = _step(x, 0), _step(y, 0)
        if self.xnd == 3:  # (batch, m, k)
            p.m, p.k = cnp.PyArray_DIM(x, 1), cnp.PyArray_DIM(x, 2)
            p.xr, p.xc = _step(x, 1), _step(x, 2)
            p.out_dims[p.out_nd] = p.m
            p.out_nd += 1
        else:  # (batch, k): one row per product
            p.m, p.k = 1, cnp.PyArray_DIM(x, 1)
            p.xr, p.xc = 0, _step(x, 1)
        if cnp.PyArray_DIM(y, 1) != p.k:
            return False
        if self.ynd == 3:  # (batch, k, n)
            p.n = cnp.PyArray_DIM(y, 2)
            p.yr, p.yc = _step(y, 1), _step(y, 2)
            p.out_dims[p.out_nd] = p.n
            p.out_nd += 1
        else:  # (batch, k): one column per product
            p.n = 1
            p.yr, p.yc = _step(y, 1), 0
        p.x, p.y = cnp.PyArray_BYTES(x), cnp.PyArray_BYTES(y)
        return True
