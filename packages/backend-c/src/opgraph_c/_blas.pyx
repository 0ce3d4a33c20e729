# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# distutils: extra_compile_args = -fopenmp
# distutils: extra_link_args = -fopenmp
"""Precompiled BLAS thunks: ``Gemm``, ``Gemv``, ``Ger``, ``Dot22``, ``Dot22Scalar``, ``Dot``.

Each thunk is a :class:`~opgraph_c._vm.CThunk` (the VM calls its ``run`` through the C
vtable) that calls SciPy's BLAS (``?gemm``, ``?gemv``, ``?ger``, ``?dot``) for float32 and
float64 operands. SciPy is not needed to build this module: the routines' addresses are
read at import from the capsules of ``scipy.linalg.cython_blas.__pyx_capi__``, whose
signatures are checked against the Fortran ones declared here.

Layouts. BLAS reads column-major matrices with a leading dimension. A matrix whose rows (or
columns) are evenly spaced, with unit steps inside them, is passed as is: a column-major
one directly, a row-major one as the column-major storage of its transpose (BLAS's
``trans`` flag). C- and Fortran-ordered arrays, their transposes and slices such as
``A[:, :5]`` are never copied; any other operand (negative or interleaved steps,
misaligned data, broadcast views) is copied to Fortran order first, as ``perform`` does.

Semantics are those of the Ops' ``perform`` (:mod:`opgraph.tensor.blas`,
:mod:`opgraph.tensor.dot`). The common case runs here in C; every other case calls
``perform`` itself, so values and error messages are the same by construction: operands
that are not aligned native arrays of the node's dtype, shape mismatches, empty
dimensions, ``alpha == 0`` (the product is not computed) and sizes beyond BLAS's 32-bit
integers. As in BLAS and ``perform``, ``beta == 0`` ignores the old contents of ``Z`` or
``y`` (NaN included).

Matrix-vector products of mid-size matrices (``Gemv``, and ``Dot`` of a matrix and a vector)
run native loops instead of ``?gemv``, on OpenMP threads that each own a contiguous part of
the output (see "the native gemv" below). Their result does not depend on the number of
threads (each output element is summed in one order, by one thread), and threads are used
only while they pay: not while the machine is busy, nor while other threads of the process
hold them up (:mod:`opgraph_c._threads` decides).

In-place variants (``Gemm{inplace}``, ``Gemv{inplace}``, ``Ger{destructive}``) write into
their input 0 and output it. When that input cannot be handed to BLAS as it is (a layout
BLAS cannot address, or memory shared with another operand), the result is computed in a
temporary and copied into it.
"""

cimport numpy as cnp
from cpython.pycapsule cimport PyCapsule_GetName, PyCapsule_GetPointer
from cython.parallel cimport prange
from libc.limits cimport INT_MAX

from opgraph_c._threads cimport (
    Team, blas_threads, have_blas_threads, monotonic, team_init, team_size, team_timed
)
from opgraph_c._pool cimport POOL_MIN_BYTES, pooled_empty
from opgraph_c._vm cimport CThunk

import re

import numpy as np

from opgraph_c._threads import find_blas_threads, timed_stats

cnp.import_array()


# ------------------------------------------------------------------- the BLAS routines
# (their types are declared in _blas.pxd)

#: The Fortran signatures this module calls, as SciPy's capsules name them once its typedefs
#: are reduced to their letters (``s`` is float, ``d`` double).
SIGNATURES = {
    "gemm": "void (char *, char *, int *, int *, int *, {t} *, {t} *, int *, {t} *, int *, "
            "{t} *, {t} *, int *)",
    "gemv": "void (char *, int *, int *, {t} *, {t} *, int *, {t} *, int *, {t} *, {t} *, "
            "int *)",
    "ger": "void (int *, int *, {t} *, {t} *, int *, {t} *, int *, {t} *, int *)",
    "dot": "{t} (int *, {t} *, int *, {t} *, int *)",
}

cdef sgemm_t _sgemm = NULL
cdef dgemm_t _dgemm = NULL
cdef sgemv_t _sgemv = NULL
cdef dgemv_t _dgemv = NULL
cdef sger_t _sger = NULL
cdef dger_t _dger = NULL
cdef sdot_t _sdot = NULL
cdef ddot_t _ddot = NULL


cdef void* _routine(dict capi, str family, str letter) except NULL:
    """The address of SciPy's ``<letter><family>`` after checking its signature."""
    name = letter + family
    capsule = capi.get(name)
    if capsule is None:
        raise ImportError(f"scipy.linalg.cython_blas exports no {name}")
    cdef const char* raw = PyCapsule_GetName(capsule)
    signature = re.sub(r"__pyx_t_\w*?cython_blas_([sd])\b", r"\1", raw.decode())
    expected = SIGNATURES[family].format(t=letter)
    if signature != expected:
        raise ImportError(
            f"scipy.linalg.cython_blas.{name} has the signature {signature!r}; opgraph_c._blas "
            f"was written for {expected!r}. HINT: report this with your SciPy version."
        )
    return PyCapsule_GetPointer(capsule, raw)


def _cython_blas():
    """``scipy.linalg.cython_blas``, loaded from its file if ``scipy.linalg`` is not imported.

    Importing it the usual way first runs ``scipy.linalg``'s ``__init__`` (~0.4 s, paid by a
    process's first compile), and only the module's capsules are needed here. The module is
    not put in ``sys.modules``: a later ``import scipy.linalg`` loads its own copy as usual.
    """
    import sys

    module = sys.modules.get("scipy.linalg.cython_blas")
    if module is not None:
        return module
    try:
        import importlib.machinery
        import importlib.util
        import os

        scipy_spec = importlib.util.find_spec("scipy")
        folder = os.path.join(scipy_spec.submodule_search_locations[0], "linalg")
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, "cython_blas" + suffix)
            if os.path.exists(path):
                loader = importlib.machinery.ExtensionFileLoader("scipy.linalg.cython_blas", path)
                spec = importlib.util.spec_from_loader(loader.name, loader)
                module = importlib.util.module_from_spec(spec)
                loader.exec_module(module)
                return module
    except Exception:  # an unusual SciPy layout: the usual import below
        pass
    from scipy.linalg import cython_blas

    return cython_blas


def routine_address(str family, str letter) -> int:
    """The address of SciPy's ``<letter><family>`` (``"gemm", "d"``), its signature checked
    against :data:`SIGNATURES`: for backend-c's other extensions (``opgraph_c._batched``)."""
    return <size_t>_routine(_cython_blas().__pyx_capi__, family, letter)


def _load_blas():
    """Read the routines' addresses from ``scipy.linalg.cython_blas`` (once, at import)."""
    global _sgemm, _dgemm, _sgemv, _dgemv, _sger, _dger, _sdot, _ddot
    capi = _cython_blas().__pyx_capi__
    _sgemm = <sgemm_t>_routine(capi, "gemm", "s")
    _dgemm = <dgemm_t>_routine(capi, "gemm", "d")
    _sgemv = <sgemv_t>_routine(capi, "gemv", "s")
    _dgemv = <dgemv_t>_routine(capi, "gemv", "d")
    _sger = <sger_t>_routine(capi, "ger", "s")
    _dger = <dger_t>_routine(capi, "ger", "d")
    _sdot = <sdot_t>_routine(capi, "dot", "s")
    _ddot = <ddot_t>_routine(capi, "dot", "d")


_load_blas()
#: The OpenBLAS whose threads the gemm thunks set per product (None: OpenBLAS decides).
BLAS_THREADS_LIBRARY = find_blas_threads()


cdef enum:
    # Release the GIL from this many multiply-adds on (releasing costs ~100 ns).
    NOGIL_WORK = 4096
    # From this many multiply-adds on a gemm may run on several OpenBLAS threads (below,
    # OpenBLAS runs one anyway): the thunk's team chooses how many.
    GEMM_THREADS_WORK = 262144
    # How an operand is handed to BLAS (see _layout).
    COL = 0
    ROW = 1
    BAD = -1


# ------------------------------------------------------------------- the native gemv
#
# ``y = alpha * op(A) @ x + beta * y`` on a row-major view S of A (rows of S contiguous,
# ``ld`` elements apart), for mid-size matrices. SciPy's OpenBLAS runs such a gemv on one
# thread, which streams the whole matrix from L3 on every call (a 400 x 784 float64 matrix,
# 2.5 MB, does not fit a core's 2 MB L2). Split between two cores, each core's share fits
# in its own L2 and stays there from one call to the next (a training step reads the same
# matrix in its forward and backward products): the product takes 0.3 to 0.6 times as long
# in float64, 0.5 to 0.8 in float32 (half the bytes: BLAS's one thread suffers less).
#
# Two loops cover every layout: with op(A) = S, y[i] is the dot product of row i of S with x
# (``rows``); with op(A) = S.T, y is the sum of the rows of S scaled by x (``cols``, BLAS's
# axpy-style column accumulation). Both are plain C that gcc vectorises: contiguous inner
# loops, four rows of S per pass (x, or a tile of y, is loaded once for four rows), and
# ``omp simd`` lets it reassociate the dot products' sums into vector accumulators. Threads
# split y, never a sum: there is no reduction between threads, and y[i] is computed the same
# way whatever the number of threads.

cdef extern from *:
    """
    /* Builds for any x86-64 CPU; the loader picks the AVX2+FMA clone where the CPU has it. */
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
    #define OPG_GEMV_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
    #else
    #define OPG_GEMV_CLONES
    #endif
    /* Elements of y updated per pass of the column loop over the rows of S (stays in L1). */
    #define OPG_GEMV_TILE 1024

    /* opg_gemv_rows_<s>: y[i] = alpha * dot(S[i, :n], x) + beta * y[i], i in [i0, i1).
     * opg_gemv_cols_<s>: y[j] = alpha * sum_i x[i] * S[i, j] + beta * y[j] over the m rows
     * of S, j in [j0, j1). Both: beta == 0 does not read y (NaN there is ignored, as in
     * BLAS); y overlaps neither S nor x. */
    #define OPG_DEFINE_GEMV(T, s)                                                         \\
    OPG_GEMV_CLONES static void opg_gemv_rows_##s(                                        \\
        const T *restrict S, Py_ssize_t ld, Py_ssize_t n, const T *restrict x, T alpha,   \\
        T beta, T *restrict y, Py_ssize_t i0, Py_ssize_t i1)                              \\
    {                                                                                     \\
        Py_ssize_t i = i0, j;                                                             \\
        for (; i + 4 <= i1; i += 4) {                                                     \\
            const T *a0 = S + i * ld, *a1 = a0 + ld, *a2 = a1 + ld, *a3 = a2 + ld;        \\
            T t0 = 0, t1 = 0, t2 = 0, t3 = 0;                                             \\
            _Pragma("omp simd reduction(+: t0, t1, t2, t3)")                              \\
            for (j = 0; j < n; j++) {                                                     \\
                T xj = x[j];                                                              \\
                t0 += a0[j] * xj;                                                         \\
                t1 += a1[j] * xj;                                                         \\
                t2 += a2[j] * xj;                                                         \\
                t3 += a3[j] * xj;                                                         \\
            }                                                                             \\
            if (beta == 0) {                                                              \\
                y[i] = alpha * t0;                                                        \\
                y[i + 1] = alpha * t1;                                                    \\
                y[i + 2] = alpha * t2;                                                    \\
                y[i + 3] = alpha * t3;                                                    \\
            } else {                                                                      \\
                y[i] = alpha * t0 + beta * y[i];                                          \\
                y[i + 1] = alpha * t1 + beta * y[i + 1];                                  \\
                y[i + 2] = alpha * t2 + beta * y[i + 2];                                  \\
                y[i + 3] = alpha * t3 + beta * y[i + 3];                                  \\
            }                                                                             \\
        }                                                                                 \\
        for (; i < i1; i++) {                                                             \\
            const T *a0 = S + i * ld;                                                     \\
            T t0 = 0;                                                                     \\
            _Pragma("omp simd reduction(+: t0)")                                          \\
            for (j = 0; j < n; j++)                                                       \\
                t0 += a0[j] * x[j];                                                       \\
            y[i] = beta == 0 ? alpha * t0 : alpha * t0 + beta * y[i];                     \\
        }                                                                                 \\
    }                                                                                     \\
                                                                                          \\
    OPG_GEMV_CLONES static void opg_gemv_cols_##s(                                        \\
        const T *restrict S, Py_ssize_t ld, Py_ssize_t m, const T *restrict x, T alpha,   \\
        T beta, T *restrict y, Py_ssize_t j0, Py_ssize_t j1)                              \\
    {                                                                                     \\
        Py_ssize_t b, e, i, j;                                                            \\
        for (b = j0; b < j1; b = e) {                                                     \\
            e = j1 - b > OPG_GEMV_TILE ? b + OPG_GEMV_TILE : j1;                          \\
            if (beta == 0)                                                                \\
                for (j = b; j < e; j++)                                                   \\
                    y[j] = 0;                                                             \\
            else if (beta != 1)                                                           \\
                for (j = b; j < e; j++)                                                   \\
                    y[j] *= beta;                                                         \\
            for (i = 0; i + 4 <= m; i += 4) {                                             \\
                const T *a0 = S + i * ld, *a1 = a0 + ld, *a2 = a1 + ld, *a3 = a2 + ld;    \\
                T x0 = alpha * x[i], x1 = alpha * x[i + 1];                               \\
                T x2 = alpha * x[i + 2], x3 = alpha * x[i + 3];                           \\
                for (j = b; j < e; j++)                                                   \\
                    y[j] += x0 * a0[j] + x1 * a1[j] + x2 * a2[j] + x3 * a3[j];            \\
            }                                                                             \\
            for (; i < m; i++) {                                                          \\
                const T *a0 = S + i * ld;                                                 \\
                T x0 = alpha * x[i];                                                      \\
                for (j = b; j < e; j++)                                                   \\
                    y[j] += x0 * a0[j];                                                   \\
            }                                                                             \\
        }                                                                                 \\
    }

    OPG_DEFINE_GEMV(double, d)
    OPG_DEFINE_GEMV(float, s)
    """
    void opg_gemv_rows_d(const double* S, Py_ssize_t ld, Py_ssize_t n, const double* x,
                         double alpha, double beta, double* y, Py_ssize_t i0,
                         Py_ssize_t i1) noexcept nogil
    void opg_gemv_cols_d(const double* S, Py_ssize_t ld, Py_ssize_t m, const double* x,
                         double alpha, double beta, double* y, Py_ssize_t j0,
                         Py_ssize_t j1) noexcept nogil
    void opg_gemv_rows_s(const float* S, Py_ssize_t ld, Py_ssize_t n, const float* x,
                         float alpha, float beta, float* y, Py_ssize_t i0,
                         Py_ssize_t i1) noexcept nogil
    void opg_gemv_cols_s(const float* S, Py_ssize_t ld, Py_ssize_t m, const float* x,
                         float alpha, float beta, float* y, Py_ssize_t j0,
                         Py_ssize_t j1) noexcept nogil


cdef enum:
    # The products the native gemv runs (see _gemv_native).
    GEMV_MIN_BYTES = 512 * 1024
    GEMV_MAX_SIZE = 460800
    GEMV_MIN_SIDE = 32
    GEMV_MIN_COLS_OUTPUT = 256
    GEMV_SMALL_BYTES = 64 * 1024
    # Threads own whole blocks of y: 4 rows in the row loop (its grouping of rows, so that
    # y[i]'s sum does not depend on where a thread's share starts), cache lines in the
    # column loop (it rewrites its share of y once per 4 rows: a line two threads wrote
    # would travel between their cores each time).
    ROWS_UNIT = 4
    CACHE_LINE = 64

#: The native gemv's limits (see _gemv_native).
GEMV_LIMITS = {
    "min_bytes": GEMV_MIN_BYTES,
    "max_size": GEMV_MAX_SIZE,
    "min_side": GEMV_MIN_SIDE,
    "min_cols_output": GEMV_MIN_COLS_OUTPUT,
}

cdef Py_ssize_t _native_calls = 0


def native_gemv_stats():
    """Counts of this process's native gemv (a diagnostic; the tests read from it which
    path a product took): ``calls`` (products it computed), ``threaded`` (on several
    threads) and the counts of :func:`opgraph_c._threads.timed_stats` (``probes``,
    ``switches``: over every adaptive team of the process)."""
    return {"calls": _native_calls, **timed_stats()}


cdef inline bint _gemv_native(int typenum, char trans, int M, int N, int incx,
                              int incy) noexcept nogil:
    """Whether ``?gemv``'s problem (same arguments) runs natively rather than in BLAS.

    Measured on two cores (Xeon, 2 MB of L2 each) against SciPy's OpenBLAS:

    - at least GEMV_MIN_BYTES of matrix: below, starting the threads (a microsecond or
      two) is not paid back;
    - fewer than GEMV_MAX_SIZE elements: from there OpenBLAS splits its gemv between
      threads itself, and is as fast;
    - sides of GEMV_MIN_SIDE elements or more, and GEMV_MIN_COLS_OUTPUT elements of y or
      more for the column loop: its threads' shares of y are short otherwise, and the
      loop's overhead per row dominates;
    - unit steps (the loops are contiguous).
    """
    cdef Py_ssize_t size = <Py_ssize_t>M * N
    cdef Py_ssize_t item = 8 if typenum == cnp.NPY_DOUBLE else 4
    return (incx == 1 and incy == 1 and M >= GEMV_MIN_SIDE and N >= GEMV_MIN_SIDE
            and size * item >= GEMV_MIN_BYTES and size < GEMV_MAX_SIZE
            and (trans == c"T" or M >= GEMV_MIN_COLS_OUTPUT))


cdef inline bint _gemv_small(int typenum, char trans, int M, int N, int incx,
                             int incy) noexcept nogil:
    """Whether ``?gemv``'s problem runs on the native loop on one thread: unit steps and at
    most GEMV_SMALL_BYTES of matrix (it stays in L1/L2 between calls), where SciPy's OpenBLAS
    spends about as long in its call set-up as in the product (64 x 64 float64: 1.0 µs
    against 0.4 µs natively)."""
    cdef Py_ssize_t item = 8 if typenum == cnp.NPY_DOUBLE else 4
    return (incx == 1 and incy == 1 and M >= 4 and N >= 4
            and <Py_ssize_t>M * N * item <= GEMV_SMALL_BYTES)


cdef inline void _gemv_part(int typenum, bint rows, char* S, Py_ssize_t ld, Py_ssize_t inner,
                            char* X, double alpha, double beta, char* Y, Py_ssize_t lo,
                            Py_ssize_t hi) noexcept nogil:
    """``y[lo:hi]`` by the row loop (``inner`` elements per row) or the column loop
    (``inner`` rows)."""
    if typenum == cnp.NPY_DOUBLE:
        if rows:
            opg_gemv_rows_d(<double*>S, ld, inner, <double*>X, alpha, beta, <double*>Y, lo, hi)
        else:
            opg_gemv_cols_d(<double*>S, ld, inner, <double*>X, alpha, beta, <double*>Y, lo, hi)
    elif rows:
        opg_gemv_rows_s(<float*>S, ld, inner, <float*>X, <float>alpha, <float>beta, <float*>Y,
                        lo, hi)
    else:
        opg_gemv_cols_s(<float*>S, ld, inner, <float*>X, <float>alpha, <float>beta, <float*>Y,
                        lo, hi)


cdef void _xgemv_native(int typenum, char trans, int M, int N, double alpha, char* A,
                        int lda, char* X, double beta, char* Y, int nthreads) noexcept nogil:
    """``?gemv`` with unit steps (same arguments) by the native loops on ``nthreads`` threads.

    BLAS's column-major M x N matrix B is the row-major S = B.T (N rows of M elements,
    ``lda`` apart): trans ``T`` is y = S @ x (the row loop; y has N elements), ``N`` is
    y = S.T @ x (the column loop; y has M elements). Thread t of n computes the t-th of n
    static shares of y's blocks (the first thread also the ``head`` elements of y before
    its first block).
    """
    cdef bint rows = trans == c"T"
    cdef Py_ssize_t length = N if rows else M, inner = M if rows else N
    cdef Py_ssize_t item = 8 if typenum == cnp.NPY_DOUBLE else 4
    cdef Py_ssize_t unit = ROWS_UNIT, head = 0
    cdef Py_ssize_t blocks, t, n
    if not rows:  # blocks are the cache lines of y (y is aligned to its item size)
        unit = CACHE_LINE // item
        head = (CACHE_LINE - <Py_ssize_t>(<size_t>Y % CACHE_LINE)) % CACHE_LINE // item
        head = min(head, length)
    blocks = (length - head + unit - 1) // unit
    n = min(nthreads, blocks)
    if n <= 1:
        _gemv_part(typenum, rows, A, lda, inner, X, alpha, beta, Y, 0, length)
        return
    for t in prange(n, schedule="static", num_threads=n):
        _gemv_part(typenum, rows, A, lda, inner, X, alpha, beta, Y,
                   0 if t == 0 else min(head + blocks * t // n * unit, length),
                   min(head + blocks * (t + 1) // n * unit, length))


# ------------------------------------------------------------------- operands


cdef inline cnp.ndarray _fast(object value, int typenum, int ndim):
    """``value`` if it is an aligned, native ndarray of ``typenum`` and ``ndim``, else None."""
    cdef cnp.ndarray a
    if not cnp.PyArray_Check(value):
        return None
    a = <cnp.ndarray>value
    if (cnp.PyArray_TYPE(a) != typenum or cnp.PyArray_NDIM(a) != ndim
            or not cnp.PyArray_ISALIGNED(a) or not cnp.PyArray_ISNOTSWAPPED(a)):
        return None
    return a


cdef inline bint _scalar(object value, double* out) except -1:
    """Read a 0-d float array into ``out``; False if ``value`` is anything else."""
    cdef cnp.ndarray a
    cdef int t
    if not cnp.PyArray_Check(value):
        return False
    a = <cnp.ndarray>value
    if cnp.PyArray_NDIM(a) != 0 or not cnp.PyArray_ISALIGNED(a):
        return False
    if not cnp.PyArray_ISNOTSWAPPED(a):
        return False
    t = cnp.PyArray_TYPE(a)
    if t == cnp.NPY_DOUBLE:
        out[0] = (<double*>cnp.PyArray_DATA(a))[0]
    elif t == cnp.NPY_FLOAT:
        out[0] = (<float*>cnp.PyArray_DATA(a))[0]
    elif t == cnp.NPY_FLOAT16:
        out[0] = float(a)
    else:
        return False
    return True


cdef inline bint _fits(Py_ssize_t n) noexcept:
    """Whether a length fits BLAS's (32-bit) integers."""
    return n <= INT_MAX


cdef int _layout(cnp.ndarray a, int* ld) noexcept:
    """How BLAS can read the matrix ``a`` in place: COL, ROW or BAD; sets its leading dim.

    COL: column-major, ``a[i, j]`` at ``i + j * ld`` elements. ROW: row-major,
    ``a[i, j]`` at ``i * ld + j`` (BLAS sees the transpose). The stride of a dimension of
    length 1 does not matter.
    """
    cdef Py_ssize_t item = cnp.PyArray_ITEMSIZE(a)
    cdef Py_ssize_t m = cnp.PyArray_DIM(a, 0), n = cnp.PyArray_DIM(a, 1)
    cdef Py_ssize_t s0 = cnp.PyArray_STRIDE(a, 0), s1 = cnp.PyArray_STRIDE(a, 1)
    if cnp.PyArray_IS_C_CONTIGUOUS(a):
        ld[0] = <int>(n if n > 1 else 1)
        return ROW if n <= INT_MAX else BAD
    if cnp.PyArray_IS_F_CONTIGUOUS(a):
        ld[0] = <int>(m if m > 1 else 1)
        return COL if m <= INT_MAX else BAD
    if (s1 == item or n <= 1) and s0 > 0 and s0 % item == 0:
        if s0 // item >= n and s0 // item <= INT_MAX:
            ld[0] = <int>(s0 // item)
            return ROW
    if (s0 == item or m <= 1) and s1 > 0 and s1 % item == 0:
        if s1 // item >= m and s1 // item <= INT_MAX:
            ld[0] = <int>(s1 // item)
            return COL
    return BAD


cdef inline int _step(cnp.ndarray v) noexcept:
    """The BLAS increment of the vector ``v``, or 0 if BLAS cannot step through it."""
    cdef Py_ssize_t item = cnp.PyArray_ITEMSIZE(v), s = cnp.PyArray_STRIDE(v, 0)
    if cnp.PyArray_DIM(v, 0) <= 1:
        return 1
    if s <= 0 or s % item != 0 or s // item > INT_MAX:
        return 0
    return <int>(s // item)


cdef inline cnp.ndarray _fortran_copy(cnp.ndarray a):
    return <cnp.ndarray>cnp.PyArray_NewCopy(a, cnp.NPY_FORTRANORDER)


cdef bint _overlap(cnp.ndarray a, cnp.ndarray b) noexcept:
    """Whether the memory extents of ``a`` and ``b`` intersect (NumPy's may_share_memory)."""
    cdef char* alo = cnp.PyArray_BYTES(a)
    cdef char* ahi = alo + cnp.PyArray_ITEMSIZE(a)
    cdef char* blo = cnp.PyArray_BYTES(b)
    cdef char* bhi = blo + cnp.PyArray_ITEMSIZE(b)
    cdef Py_ssize_t ext
    cdef int d
    if cnp.PyArray_SIZE(a) == 0 or cnp.PyArray_SIZE(b) == 0:
        return False
    for d in range(cnp.PyArray_NDIM(a)):
        ext = cnp.PyArray_STRIDE(a, d) * (cnp.PyArray_DIM(a, d) - 1)
        if ext > 0:
            ahi += ext
        else:
            alo += ext
    for d in range(cnp.PyArray_NDIM(b)):
        ext = cnp.PyArray_STRIDE(b, d) * (cnp.PyArray_DIM(b, d) - 1)
        if ext > 0:
            bhi += ext
        else:
            blo += ext
    return alo < bhi and blo < ahi


cdef inline cnp.ndarray _empty(int nd, cnp.npy_intp* dims, int typenum, bint fortran):
    """A new uninitialised output; a big C-ordered one comes from the buffer pool (pages a
    dropped result already faulted in), as elementwise outputs do."""
    cdef cnp.dtype descr = cnp.PyArray_DescrFromType(typenum)
    cdef size_t nbytes = <size_t>cnp.PyArray_MultiplyList(dims, nd) * <size_t>descr.itemsize
    if not fortran and nbytes >= POOL_MIN_BYTES:
        return pooled_empty(nd, dims, typenum)
    return <cnp.ndarray>cnp.PyArray_EMPTY(nd, dims, typenum, fortran)


# ------------------------------------------------------------------- BLAS calls
#
# _x<routine> calls the float32 or float64 routine (scalars given as doubles); _<routine>
# lays the operands out for it and releases the GIL for non-trivial sizes.


cdef void _xgemm(int typenum, char ta, char tb, int M, int N, int K, double alpha, char* A,
                 int lda, char* B, int ldb, double beta, char* C, int ldc) noexcept nogil:
    cdef float fa = <float>alpha, fb = <float>beta
    if typenum == cnp.NPY_DOUBLE:
        _dgemm(&ta, &tb, &M, &N, &K, &alpha, <double*>A, &lda, <double*>B, &ldb, &beta,
               <double*>C, &ldc)
    else:
        _sgemm(&ta, &tb, &M, &N, &K, &fa, <float*>A, &lda, <float*>B, &ldb, &fb, <float*>C,
               &ldc)


cdef void _xgemv(int typenum, char trans, int M, int N, double alpha, char* A, int lda,
                 char* X, int incx, double beta, char* Y, int incy) noexcept nogil:
    cdef float fa = <float>alpha, fb = <float>beta
    if typenum == cnp.NPY_DOUBLE:
        _dgemv(&trans, &M, &N, &alpha, <double*>A, &lda, <double*>X, &incx, &beta,
               <double*>Y, &incy)
    else:
        _sgemv(&trans, &M, &N, &fa, <float*>A, &lda, <float*>X, &incx, &fb, <float*>Y, &incy)


cdef void _xger(int typenum, int M, int N, double alpha, char* X, int incx, char* Y,
                int incy, char* A, int lda) noexcept nogil:
    cdef float fa = <float>alpha
    if typenum == cnp.NPY_DOUBLE:
        _dger(&M, &N, &alpha, <double*>X, &incx, <double*>Y, &incy, <double*>A, &lda)
    else:
        _sger(&M, &N, &fa, <float*>X, &incx, <float*>Y, &incy, <float*>A, &lda)


cdef void _xdot(int typenum, int n, char* X, int incx, char* Y, int incy,
                char* result) noexcept nogil:
    if typenum == cnp.NPY_DOUBLE:
        (<double*>result)[0] = _ddot(&n, <double*>X, &incx, <double*>Y, &incy)
    else:
        (<float*>result)[0] = _sdot(&n, <float*>X, &incx, <float*>Y, &incy)


cdef inline cnp.ndarray _vector_for_blas(cnp.ndarray v, int* inc):
    """``v``, or a contiguous copy if BLAS cannot step through it; sets its increment."""
    inc[0] = _step(v)
    if inc[0] == 0:
        inc[0] = 1
        return <cnp.ndarray>cnp.PyArray_NewCopy(v, cnp.NPY_CORDER)
    return v


cdef inline cnp.ndarray _matrix_for_blas(cnp.ndarray a, int* layout, int* ld):
    """``a``, or a Fortran-ordered copy if BLAS cannot read it; sets its layout and ld."""
    layout[0] = _layout(a, ld)
    if layout[0] == BAD:
        a = _fortran_copy(a)
        layout[0] = _layout(a, ld)
    return a


cdef int _gemm(int typenum, double alpha, cnp.ndarray x, cnp.ndarray y, double beta,
               cnp.ndarray out, Team* team) except -1:
    """``out <- alpha * x @ y + beta * out`` (``beta == 0``: ``out`` is not read).

    ``out`` must have a BLAS layout (COL or ROW); ``x`` and ``y`` are copied if they have
    none. Sizes are non-zero and fit in int (the caller checks). Products big enough for
    OpenBLAS to thread run on ``team``'s choice of its threads (:mod:`opgraph_c._threads`).
    """
    cdef int threads, before
    cdef double start
    cdef int m = <int>cnp.PyArray_DIM(x, 0), k = <int>cnp.PyArray_DIM(x, 1)
    cdef int n = <int>cnp.PyArray_DIM(y, 1)
    cdef int ldo, ldx, ldy, lx, ly, M, N, lda, ldb
    cdef int lo = _layout(out, &ldo)
    cdef char ta, tb
    cdef char* A
    cdef char* B
    x = _matrix_for_blas(x, &lx, &ldx)
    y = _matrix_for_blas(y, &ly, &ldy)
    if lo == COL:  # out (m x n) = x (m x k) @ y (k x n)
        M, N = m, n
        ta = c"N" if lx == COL else c"T"
        tb = c"N" if ly == COL else c"T"
        A, lda, B, ldb = cnp.PyArray_BYTES(x), ldx, cnp.PyArray_BYTES(y), ldy
    else:  # out.T (n x m) = y.T (n x k) @ x.T (k x m)
        M, N = n, m
        ta = c"N" if ly == ROW else c"T"
        tb = c"N" if lx == ROW else c"T"
        A, lda, B, ldb = cnp.PyArray_BYTES(y), ldy, cnp.PyArray_BYTES(x), ldx
    cdef char* C = cnp.PyArray_BYTES(out)
    cdef Py_ssize_t work = <Py_ssize_t>M * N * k
    if work >= GEMM_THREADS_WORK and team.nthreads > 1 and have_blas_threads():
        threads = team_size(team, work)
        start = monotonic()
        with nogil:
            before = blas_threads(threads)
            _xgemm(typenum, ta, tb, M, N, k, alpha, A, lda, B, ldb, beta, C, ldo)
            blas_threads(before)
        team_timed(team, threads, monotonic() - start, work)
    elif work >= NOGIL_WORK:
        with nogil:
            _xgemm(typenum, ta, tb, M, N, k, alpha, A, lda, B, ldb, beta, C, ldo)
    else:
        _xgemm(typenum, ta, tb, M, N, k, alpha, A, lda, B, ldb, beta, C, ldo)
    return 0


cdef int _gemv(int typenum, double alpha, cnp.ndarray a, bint transpose, cnp.ndarray x,
               double beta, cnp.ndarray out, int inc_out, Team* team) except -1:
    """``out <- alpha * op(a) @ x + beta * out``, ``op(a)`` is ``a`` or ``a.T``.

    ``out`` is stepped through with ``inc_out`` and overlaps neither ``a`` nor ``x``; ``a``
    and ``x`` are copied if BLAS cannot read them in place. Sizes are non-zero and fit in
    int (the caller checks). Mid-size products run the native loops on ``team``'s threads
    (see ``_gemv_native`` and :mod:`opgraph_c._threads`), other products BLAS.
    """
    global _native_calls
    cdef int threads
    cdef double start
    cdef int la, lda, incx
    cdef char trans
    a = _matrix_for_blas(a, &la, &lda)
    x = _vector_for_blas(x, &incx)
    # BLAS reads S = a (COL) or S = a.T (ROW), column-major; op(a) is S or S.T.
    cdef int M = <int>cnp.PyArray_DIM(a, 0 if la == COL else 1)
    cdef int N = <int>cnp.PyArray_DIM(a, 1 if la == COL else 0)
    if la == COL:
        trans = c"T" if transpose else c"N"
    else:
        trans = c"N" if transpose else c"T"
    cdef char* A = cnp.PyArray_BYTES(a)
    cdef char* X = cnp.PyArray_BYTES(x)
    cdef char* Y = cnp.PyArray_BYTES(out)
    threads = 0
    if team.nthreads > 1 and _gemv_native(typenum, trans, M, N, incx, inc_out):
        threads = team_size(team, <Py_ssize_t>M * N)
    if threads == 0 and _gemv_small(typenum, trans, M, N, incx, inc_out):
        # A small product (a recurrent step's W @ h): the native loop on this thread skips
        # BLAS's per-call set-up, which costs as much as the arithmetic at this size.
        _xgemv_native(typenum, trans, M, N, alpha, A, lda, X, beta, Y, 1)
    elif threads > 0:
        _native_calls += 1
        start = monotonic()
        with nogil:
            _xgemv_native(typenum, trans, M, N, alpha, A, lda, X, beta, Y, threads)
        team_timed(team, threads, monotonic() - start, <Py_ssize_t>M * N)
    elif <Py_ssize_t>M * N >= NOGIL_WORK:
        with nogil:
            _xgemv(typenum, trans, M, N, alpha, A, lda, X, incx, beta, Y, inc_out)
    else:
        _xgemv(typenum, trans, M, N, alpha, A, lda, X, incx, beta, Y, inc_out)
    return 0


cdef int _ger(int typenum, double alpha, cnp.ndarray x, cnp.ndarray y,
              cnp.ndarray out) except -1:
    """``out <- out + alpha * outer(x, y)``; ``out`` has a BLAS layout (COL or ROW)."""
    cdef int ldo, incx, incy, M, N, incu, incv
    cdef int lo = _layout(out, &ldo)
    cdef char* U
    cdef char* V
    x = _vector_for_blas(x, &incx)
    y = _vector_for_blas(y, &incy)
    cdef int m = <int>cnp.PyArray_DIM(x, 0), n = <int>cnp.PyArray_DIM(y, 0)
    if lo == COL:  # out (m x n) += alpha * x y^T
        M, N, U, incu, V, incv = m, n, cnp.PyArray_BYTES(x), incx, cnp.PyArray_BYTES(y), incy
    else:  # out.T (n x m) += alpha * y x^T
        M, N, U, incu, V, incv = n, m, cnp.PyArray_BYTES(y), incy, cnp.PyArray_BYTES(x), incx
    cdef char* A = cnp.PyArray_BYTES(out)
    if <Py_ssize_t>M * N >= NOGIL_WORK:
        with nogil:
            _xger(typenum, M, N, alpha, U, incu, V, incv, A, ldo)
    else:
        _xger(typenum, M, N, alpha, U, incu, V, incv, A, ldo)
    return 0


cdef int _vdot(int typenum, cnp.ndarray x, cnp.ndarray y, cnp.ndarray out) except -1:
    """``out[()] <- dot(x, y)`` for two vectors of one non-zero length."""
    cdef int n = <int>cnp.PyArray_DIM(x, 0), incx, incy
    x = _vector_for_blas(x, &incx)
    y = _vector_for_blas(y, &incy)
    cdef char* X = cnp.PyArray_BYTES(x)
    cdef char* Y = cnp.PyArray_BYTES(y)
    cdef char* R = cnp.PyArray_BYTES(out)
    if n >= NOGIL_WORK:
        with nogil:
            _xdot(typenum, n, X, incx, Y, incy, R)
    else:
        _xdot(typenum, n, X, incx, Y, incy, R)
    return 0


# ------------------------------------------------------------------- thunks


cdef class BlasThunk(CThunk):
    """Base of the BLAS thunks: the node, its cells, its dtype, and ``perform`` to fall back on.

    Parameters
    ----------
    node
        The Apply node (its Op's ``perform`` handles every case the thunk does not).
    in_cells, out_cells
        The node's storage cells.
    dtype
        The operands' dtype: ``float32`` or ``float64``.
    nthreads, adaptive, threshold
        Matrix-vector products (``Gemv``, ``Dot``) of mid-size matrices run the native loops
        on up to ``nthreads`` threads (1: BLAS only), on one thread below ``threshold``
        matrix elements or, if ``adaptive``, while recent calls found one thread faster
        (see :mod:`opgraph_c._threads`; not ``adaptive``: tests and benchmarks pick the
        threads). Matrix products big enough for OpenBLAS to thread run on one or
        ``nthreads`` of its threads, chosen the same way (1: OpenBLAS's own choice).
    """

    cdef public object node
    cdef object perform
    cdef list in_cells, out_cells
    cdef int typenum
    cdef Team team

    def __init__(self, node, list in_cells, list out_cells, dtype, int nthreads=1,
                 bint adaptive=True, Py_ssize_t threshold=0):
        dtype = np.dtype(dtype)
        if dtype.num not in (cnp.NPY_FLOAT, cnp.NPY_DOUBLE):
            raise TypeError(f"{type(self).__name__} runs float32 or float64 BLAS, not {dtype}")
        self.node = node
        self.perform = node.op.perform
        self.in_cells, self.out_cells = in_cells, out_cells
        self.inputs, self.outputs = in_cells, out_cells
        self.lazy = False
        self.typenum = dtype.num
        team_init(&self.team, nthreads, threshold, adaptive)

    cdef inline object _value(self, int i):
        return (<list>self.in_cells[i])[0]

    cdef int _fallback(self) except -1:
        """Run the Op's ``perform`` (every case the C path does not take)."""
        self.perform(self.node, [(<list>c)[0] for c in self.in_cells], self.out_cells)
        return 0

    cdef inline int _store(self, object value) except -1:
        (<list>self.out_cells[0])[0] = value
        return 0


cdef class GemmThunk(BlasThunk):
    """``Gemm``: ``Z <- b * Z + a * dot(X, Y)``; in place, the result overwrites ``Z``."""

    cdef bint inplace

    def __init__(self, node, list in_cells, list out_cells, dtype, bint inplace,
                 int nthreads=1, bint adaptive=True, Py_ssize_t threshold=0):
        BlasThunk.__init__(self, node, in_cells, out_cells, dtype, nthreads, adaptive,
                           threshold)
        self.inplace = inplace

    cdef int run(self) except -1:
        cdef int t = self.typenum
        cdef cnp.ndarray z = _fast(self._value(0), t, 2)
        cdef cnp.ndarray x = _fast(self._value(2), t, 2)
        cdef cnp.ndarray y = _fast(self._value(3), t, 2)
        cdef double alpha = 0.0, beta = 0.0  # set by _scalar (gcc cannot tell)
        cdef int ld
        if (z is None or x is None or y is None or not _scalar(self._value(1), &alpha)
                or not _scalar(self._value(4), &beta)):
            return self._fallback()
        cdef Py_ssize_t m = cnp.PyArray_DIM(x, 0), k = cnp.PyArray_DIM(x, 1)
        cdef Py_ssize_t n = cnp.PyArray_DIM(y, 1)
        if (cnp.PyArray_DIM(y, 0) != k or cnp.PyArray_DIM(z, 0) != m
                or cnp.PyArray_DIM(z, 1) != n or alpha == 0 or m == 0 or n == 0 or k == 0
                or not (_fits(m) and _fits(n) and _fits(k))):
            return self._fallback()
        cdef cnp.ndarray out, tmp
        if self.inplace:
            if not cnp.PyArray_ISWRITEABLE(z):
                return self._fallback()
            if _layout(z, &ld) == BAD or _overlap(z, x) or _overlap(z, y):
                tmp = _fortran_copy(z) if beta != 0 else _empty(2, cnp.PyArray_DIMS(z), t, 1)
                _gemm(t, alpha, x, y, beta, tmp, &self.team)
                cnp.PyArray_CopyInto(z, tmp)
            else:
                _gemm(t, alpha, x, y, beta, z, &self.team)
            return self._store(z)
        cdef bint fortran = cnp.PyArray_IS_F_CONTIGUOUS(z) and not cnp.PyArray_IS_C_CONTIGUOUS(z)
        out = _empty(2, cnp.PyArray_DIMS(z), t, fortran)
        if beta != 0:
            cnp.PyArray_CopyInto(out, z)
        _gemm(t, alpha, x, y, beta, out, &self.team)
        return self._store(out)


cdef class Dot22Thunk(BlasThunk):
    """``Dot22`` (``dot(X, Y)``) or, with ``scaled``, ``Dot22Scalar`` (``a * dot(X, Y)``)."""

    cdef bint scaled

    def __init__(self, node, list in_cells, list out_cells, dtype, bint scaled,
                 int nthreads=1, bint adaptive=True, Py_ssize_t threshold=0):
        BlasThunk.__init__(self, node, in_cells, out_cells, dtype, nthreads, adaptive,
                           threshold)
        self.scaled = scaled

    cdef int run(self) except -1:
        cdef int t = self.typenum
        cdef cnp.ndarray x = _fast(self._value(0), t, 2)
        cdef cnp.ndarray y = _fast(self._value(1), t, 2)
        cdef double alpha = 1.0
        cdef cnp.npy_intp dims[2]
        if x is None or y is None:
            return self._fallback()
        if self.scaled and (not _scalar(self._value(2), &alpha) or alpha == 0):
            return self._fallback()
        cdef Py_ssize_t m = cnp.PyArray_DIM(x, 0), k = cnp.PyArray_DIM(x, 1)
        cdef Py_ssize_t n = cnp.PyArray_DIM(y, 1)
        if (cnp.PyArray_DIM(y, 0) != k or m == 0 or n == 0 or k == 0
                or not (_fits(m) and _fits(n) and _fits(k))):
            return self._fallback()
        dims[0], dims[1] = m, n
        cdef cnp.ndarray out = _empty(2, dims, t, 0)
        _gemm(t, alpha, x, y, 0.0, out, &self.team)
        return self._store(out)


cdef class GemvThunk(BlasThunk):
    """``Gemv``: ``y <- b * y + a * dot(A, x)``; in place, the result overwrites ``y``."""

    cdef bint inplace

    def __init__(self, node, list in_cells, list out_cells, dtype, bint inplace,
                 int nthreads=1, bint adaptive=True, Py_ssize_t threshold=0):
        BlasThunk.__init__(self, node, in_cells, out_cells, dtype, nthreads, adaptive,
                           threshold)
        self.inplace = inplace

    cdef int run(self) except -1:
        cdef int t = self.typenum
        cdef cnp.ndarray y = _fast(self._value(0), t, 1)
        cdef cnp.ndarray a = _fast(self._value(2), t, 2)
        cdef cnp.ndarray x = _fast(self._value(3), t, 1)
        cdef double alpha = 0.0, beta = 0.0  # set by _scalar (gcc cannot tell)
        cdef int inc
        if (y is None or a is None or x is None or not _scalar(self._value(1), &alpha)
                or not _scalar(self._value(4), &beta)):
            return self._fallback()
        cdef Py_ssize_t m = cnp.PyArray_DIM(a, 0), k = cnp.PyArray_DIM(a, 1)
        if (cnp.PyArray_DIM(x, 0) != k or cnp.PyArray_DIM(y, 0) != m or alpha == 0
                or m == 0 or k == 0 or not (_fits(m) and _fits(k))):
            return self._fallback()
        cdef cnp.ndarray out
        if self.inplace:
            if not cnp.PyArray_ISWRITEABLE(y):
                return self._fallback()
            inc = _step(y)
            if inc == 0 or _overlap(y, a) or _overlap(y, x):
                out = (<cnp.ndarray>cnp.PyArray_NewCopy(y, cnp.NPY_CORDER) if beta != 0
                       else _empty(1, cnp.PyArray_DIMS(y), t, 0))
                _gemv(t, alpha, a, False, x, beta, out, 1, &self.team)
                cnp.PyArray_CopyInto(y, out)
            else:
                _gemv(t, alpha, a, False, x, beta, y, inc, &self.team)
            return self._store(y)
        out = _empty(1, cnp.PyArray_DIMS(y), t, 0)
        if beta != 0:
            cnp.PyArray_CopyInto(out, y)
        _gemv(t, alpha, a, False, x, beta, out, 1, &self.team)
        return self._store(out)


cdef class GerThunk(BlasThunk):
    """``Ger``: ``A <- A + a * outer(x, y)``; destructive, the result overwrites ``A``."""

    cdef bint destructive

    def __init__(self, node, list in_cells, list out_cells, dtype, bint destructive):
        BlasThunk.__init__(self, node, in_cells, out_cells, dtype)
        self.destructive = destructive

    cdef int run(self) except -1:
        cdef int t = self.typenum
        cdef cnp.ndarray a = _fast(self._value(0), t, 2)
        cdef cnp.ndarray x = _fast(self._value(2), t, 1)
        cdef cnp.ndarray y = _fast(self._value(3), t, 1)
        cdef double alpha = 0.0  # set by _scalar (gcc cannot tell)
        cdef int ld
        if a is None or x is None or y is None or not _scalar(self._value(1), &alpha):
            return self._fallback()
        cdef Py_ssize_t m = cnp.PyArray_DIM(a, 0), n = cnp.PyArray_DIM(a, 1)
        if (cnp.PyArray_DIM(x, 0) != m or cnp.PyArray_DIM(y, 0) != n or alpha == 0
                or m == 0 or n == 0 or not (_fits(m) and _fits(n))):
            return self._fallback()
        cdef cnp.ndarray out
        if self.destructive:
            if not cnp.PyArray_ISWRITEABLE(a):
                return self._fallback()
            if _layout(a, &ld) == BAD or _overlap(a, x) or _overlap(a, y):
                out = _fortran_copy(a)
                _ger(t, alpha, x, y, out)
                cnp.PyArray_CopyInto(a, out)
            else:
                _ger(t, alpha, x, y, a)
            return self._store(a)
        if cnp.PyArray_IS_F_CONTIGUOUS(a) and not cnp.PyArray_IS_C_CONTIGUOUS(a):
            out = _fortran_copy(a)
        else:
            out = <cnp.ndarray>cnp.PyArray_NewCopy(a, cnp.NPY_CORDER)
        _ger(t, alpha, x, y, out)
        return self._store(out)


cdef class DotThunk(BlasThunk):
    """``Dot`` of vectors and matrices of one dtype: ``?dot``, ``?gemv`` or ``?gemm``."""

    cdef int xnd, ynd

    def __init__(self, node, list in_cells, list out_cells, dtype, int nthreads=1,
                 bint adaptive=True, Py_ssize_t threshold=0):
        BlasThunk.__init__(self, node, in_cells, out_cells, dtype, nthreads, adaptive,
                           threshold)
        self.xnd = node.inputs[0].type.ndim
        self.ynd = node.inputs[1].type.ndim
        if self.xnd not in (1, 2) or self.ynd not in (1, 2):
            raise TypeError(f"DotThunk runs dot of vectors and matrices, not {node}")

    cdef int run(self) except -1:
        cdef int t = self.typenum
        cdef cnp.ndarray x = _fast(self._value(0), t, self.xnd)
        cdef cnp.ndarray y = _fast(self._value(1), t, self.ynd)
        cdef cnp.npy_intp dims[2]
        cdef cnp.ndarray out
        if x is None or y is None:
            return self._fallback()
        cdef Py_ssize_t k = cnp.PyArray_DIM(x, self.xnd - 1)
        if cnp.PyArray_DIM(y, 0) != k or k == 0 or not _fits(k):
            return self._fallback()
        cdef int nd = 0, d
        if self.xnd == 2:
            dims[nd] = cnp.PyArray_DIM(x, 0)
            nd += 1
        if self.ynd == 2:
            dims[nd] = cnp.PyArray_DIM(y, 1)
            nd += 1
        for d in range(nd):
            if dims[d] == 0 or not _fits(dims[d]):
                return self._fallback()
        out = _empty(nd, dims, t, 0)
        if nd == 0:
            _vdot(t, x, y, out)
        elif nd == 2:
            _gemm(t, 1.0, x, y, 0.0, out, &self.team)
        elif self.xnd == 2:  # matrix @ vector
            _gemv(t, 1.0, x, False, y, 0.0, out, 1, &self.team)
        else:  # vector @ matrix = y.T @ x
            _gemv(t, 1.0, y, True, x, 0.0, out, 1, &self.team)
        return self._store(out)
