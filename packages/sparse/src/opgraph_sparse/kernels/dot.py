"""C kernels of the sparse products for opgraph-backend-c's ``c`` linker.

Two generated modules cover the products of :mod:`opgraph_sparse.dot`:

- **spmm** (``SpmmThunk``): a CSR or CSC matrix times a dense matrix, for ``StructuredDot``
  and ``Dot`` (either operand sparse) and ``Usmm`` (``z + alpha * dot(x, y)``, the same
  product with an epilogue reading ``z`` through its strides). A dense-times-sparse
  product is computed transposed, ``(y.T @ x.T).T``: the transpose of a CSC matrix is
  the CSR matrix with the same arrays.
  CSR runs its rows in parallel (OpenMP, rows split into one block per thread balanced by
  stored entries). CSC scatters its columns into the output's rows. A large CSC product
  (at least 131,072 stored entries and 16 per output row: a gradient ``a.T @ g``) splits
  its columns into up to 4 parts of about equal entries, the count set by the shapes
  alone; each part sums into a buffer of its own, one part per thread (or, with more
  threads than parts, each part's rows in bands), and the parts are added in order at the
  end. Otherwise each thread owns a block of output rows and applies only the entries that
  fall into it, reading every entry. The inner loop runs over the dense operand's
  contiguous columns (the dense operand is made C-contiguous). CSC's time goes to the
  scattered output rows, so each is prefetched a few entries ahead. (Bands of the dense
  columns per thread, which halve each thread's reads of the dense operand, were measured
  slower: each thread then visits every entry, and the entries, not the dense operand's
  bytes, bound the loop.)
- **pairdot** (``PairDotThunk``): one dot product of two dense rows per stored entry, for
  ``StructuredDotGradCSR``/``CSC`` (the structured gradient w.r.t. the sparse values) and
  ``SamplingDot`` (the same, scaled by the pattern's values).

Every thunk validates shapes, index dtypes and ``indptr`` before the loop and every column
or row index inside it; anything it does not take (an unusual layout, a subclass, a bad
index, a shape mismatch) goes to the Op's ``perform`` before an output is written, so
errors are ``perform``'s. Each thread count gives the same result (each output value, or
each part's share of it, is computed by one thread in the serial order, and the parts are
added in a fixed order). The thread count follows backend-c's
adaptive team (:mod:`opgraph_c._threads`, cimported by the generated module).

Imported only by backend-c's ``opgraph_c_kernels`` hook. It never imports ``opgraph_c``:
``CModule``, ``PERFORM`` and the thread policy come from the registry the hook hands over
(:func:`register` keeps it); the generated sources ``cimport`` backend-c's ``.pxd`` files,
which backend-c compiles.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from opgraph_sparse import dot
from opgraph_sparse.type import SparseType

__all__ = ["DOT_C_VERSION", "pairdot_source", "register", "spmm_source"]

#: Keys the compile cache with the sources: bump it when a thunk factory changes while the
#: generated text stays the same.
DOT_C_VERSION = 1

#: backend-c's kernel toolkit (``CModule``, ``PERFORM``, ``team_options``): the registry given
#: to :func:`register`, whose entries run only after it was called.
_c: Any = SimpleNamespace()

#: The dtypes the C loops take, with their C types; other dtypes run perform.
C_TYPES = {"float32": "float", "float64": "double"}

#: The C loops shared by both modules' headers: the axpy and dot of one dense row.
_C_COMMON = r"""
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
typedef {a_c} opg_a_t;
typedef {b_c} opg_b_t;
typedef {o_c} opg_o_t;
typedef {z_c} opg_z_t;
"""

# The spmm module. {a_c}: the sparse values' C type, {b_c}: the dense operand's, {o_c}: the
# output's (every sum is computed in it), {z_c}: Usmm's z (the output's type otherwise).
_SPMM_C = (
    _C_COMMON
    + r"""
/* What Usmm adds after a row's sum: out = out * alpha + z (z read through byte strides). */
typedef struct {
    int on;
    opg_o_t alpha;
    const char* z;
    ptrdiff_t zs0, zs1;
} opg_epilogue;

static inline void opg_axpy(ptrdiff_t K, opg_o_t v, const opg_b_t* restrict x,
                            opg_o_t* restrict y) {
    for (ptrdiff_t k = 0; k < K; k++) y[k] += v * (opg_o_t)x[k];
}

/* Stored entries read ahead: their dense rows are prefetched (random rows of a dense
   operand larger than the L2 cache otherwise stall the loop on each row). */
#define OPG_AHEAD 8
static inline void opg_prefetch_row(const opg_b_t* b, int64_t j, ptrdiff_t nrows,
                                    ptrdiff_t K) {
    if ((uint64_t)j >= (uint64_t)nrows) return;
    const char* r = (const char*)(b + j * K);
    for (ptrdiff_t off = 0; off < K * (ptrdiff_t)sizeof(opg_b_t); off += 64)
        __builtin_prefetch(r + off, 0, 3);
}

/* The output row i, read and written by an axpy a few entries later (CSC's scattered rows). */
static inline void opg_prefetch_out(opg_o_t* out, ptrdiff_t i, ptrdiff_t K) {
    const char* r = (const char*)(out + i * K);
    for (ptrdiff_t off = 0; off < K * (ptrdiff_t)sizeof(opg_o_t); off += 64)
        __builtin_prefetch(r + off, 1, 3);
}

static inline void opg_finish_rows(const opg_epilogue* ep, opg_o_t* out, ptrdiff_t r0,
                                   ptrdiff_t r1, ptrdiff_t K) {
    if (ep == NULL || !ep->on) return;
    for (ptrdiff_t i = r0; i < r1; i++) {
        opg_o_t* restrict o = out + i * K;
        const char* zr = ep->z + i * ep->zs0;
        for (ptrdiff_t k = 0; k < K; k++)
            o[k] = o[k] * ep->alpha + (opg_o_t)(*(const opg_z_t*)(zr + k * ep->zs1));
    }
}

/* A CSC product's parts (see opg_csc_parts): one per OPG_PART_ENTRIES stored entries, up
   to OPG_MAX_PARTS, while the entries are at least OPG_PART_DEPTH per output row (each
   part adds a buffer of the output's size, written and read once more) and the extra
   buffers take at most OPG_PART_BYTES. */
#define OPG_MAX_PARTS 4
#define OPG_PART_ENTRIES 131072
#define OPG_PART_DEPTH 16
#define OPG_PART_BYTES ((ptrdiff_t)256 << 20)
static inline int opg_csc_part_count(ptrdiff_t nrows, ptrdiff_t nnz, ptrdiff_t K) {
    if (K < 1 || nrows < 1) return 1;
    ptrdiff_t by_entries = nnz / OPG_PART_ENTRIES;
    ptrdiff_t by_depth = nnz / (OPG_PART_DEPTH * nrows);
    ptrdiff_t by_memory = 1 + OPG_PART_BYTES / (nrows * K * (ptrdiff_t)sizeof(opg_o_t));
    ptrdiff_t p = by_entries < by_depth ? by_entries : by_depth;
    p = p < by_memory ? p : by_memory;
    return p < 1 ? 1 : p > OPG_MAX_PARTS ? OPG_MAX_PARTS : (int)p;
}

/* out rows [r0, r1) += the other parts' rows (part 1 first), then the epilogue. */
static void opg_add_parts(opg_o_t* out, const opg_o_t* scratch, int P, ptrdiff_t nrows,
                          ptrdiff_t K, ptrdiff_t r0, ptrdiff_t r1, const opg_epilogue* ep) {
    for (int p = 1; p < P; p++) {
        const opg_o_t* part = scratch + (ptrdiff_t)(p - 1) * nrows * K;
        for (ptrdiff_t i = r0 * K; i < r1 * K; i++) out[i] += part[i];
    }
    opg_finish_rows(ep, out, r0, r1, K);
}

/* indptr of n segments over nnz stored values: 0 when it starts at 0, never decreases and
   ends within the arrays; 1 otherwise. */
#define OPG_PTR_OK(IDX, SUF)                                                              \
static int opg_ptr_bad_##SUF(const IDX* ptr, ptrdiff_t n, ptrdiff_t nnz) {               \
    if (ptr[0] != 0) return 1;                                                            \
    for (ptrdiff_t i = 0; i < n; i++)                                                     \
        if (ptr[i + 1] < ptr[i]) return 1;                                                \
    return ptr[n] > nnz;                                                                  \
}                                                                                         \
/* CSR rows [r0, r1) of out = a @ b; 1 on a column index out of range. */               \
static int opg_csr_rows_##SUF(const opg_a_t* data, const IDX* ind, const IDX* ptr,        \
                              const opg_b_t* b, opg_o_t* out, ptrdiff_t r0, ptrdiff_t r1, \
                              ptrdiff_t ncols, ptrdiff_t K, const opg_epilogue* ep) {     \
    ptrdiff_t end = ptr[r1];                                                              \
    for (ptrdiff_t i = r0; i < r1; i++) {                                                 \
        opg_o_t* o = out + i * K;                                                         \
        memset(o, 0, (size_t)K * sizeof(opg_o_t));                                        \
        for (ptrdiff_t jj = ptr[i]; jj < ptr[i + 1]; jj++) {                              \
            IDX j = ind[jj];                                                              \
            if ((uint64_t)(int64_t)j >= (uint64_t)ncols) return 1;                        \
            if (jj + OPG_AHEAD < end) opg_prefetch_row(b, ind[jj + OPG_AHEAD], ncols, K);  \
            opg_axpy(K, (opg_o_t)data[jj], b + (ptrdiff_t)j * K, o);                      \
        }                                                                                 \
    }                                                                                     \
    opg_finish_rows(ep, out, r0, r1, K);                                                  \
    return 0;                                                                             \
}                                                                                         \
/* CSC: the entries of columns [c0, c1) in rows [r0, r1) of out = a @ b (a has nrows     \
   rows); 1 on a row index out of range (every block checks every index of its columns).  \
   The loop is bound by the latency of the scattered output rows (not by reading b, which \
   streams): the row of the entry OPG_AHEAD places ahead is prefetched when it is in the  \
   block, and one unsigned compare tells an entry of the block from the others. */        \
static int opg_csc_block_##SUF(const opg_a_t* data, const IDX* ind, const IDX* ptr,       \
                               const opg_b_t* b, opg_o_t* out, ptrdiff_t c0, ptrdiff_t c1, \
                               ptrdiff_t nrows, ptrdiff_t r0, ptrdiff_t r1, ptrdiff_t K,  \
                               const opg_epilogue* ep) {                                  \
    if (r1 > r0) memset(out + r0 * K, 0, (size_t)((r1 - r0) * K) * sizeof(opg_o_t));      \
    uint64_t span = (uint64_t)(r1 - r0);                                                  \
    ptrdiff_t end = ptr[c1];                                                              \
    for (ptrdiff_t j = c0; j < c1; j++) {                                                 \
        const opg_b_t* brow = b + j * K;                                                  \
        for (ptrdiff_t jj = ptr[j]; jj < ptr[j + 1]; jj++) {                              \
            IDX i = ind[jj];                                                              \
            if (jj + OPG_AHEAD < end) {                                                   \
                uint64_t ahead = (uint64_t)((int64_t)ind[jj + OPG_AHEAD] - (int64_t)r0);  \
                if (ahead < span) opg_prefetch_out(out, r0 + (ptrdiff_t)ahead, K);        \
            }                                                                             \
            if ((uint64_t)((int64_t)i - (int64_t)r0) >= span) {                           \
                if ((uint64_t)(int64_t)i >= (uint64_t)nrows) return 1;                    \
                continue;                                                                 \
            }                                                                             \
            opg_axpy(K, (opg_o_t)data[jj], brow, out + (ptrdiff_t)i * K);                 \
        }                                                                                 \
    }                                                                                     \
    opg_finish_rows(ep, out, r0, r1, K);                                                  \
    return 0;                                                                             \
}                                                                                         \
/* Task t of a CSC product in parts: part t / bands (its columns [cb[p], cb[p + 1])) into \
   its own buffer (part 0: out), rows of band t % bands. */                               \
static int opg_csc_task_##SUF(const opg_a_t* data, const IDX* ind, const IDX* ptr,        \
                              const opg_b_t* b, opg_o_t* out, opg_o_t* scratch,           \
                              const ptrdiff_t* cb, int bands, int t, ptrdiff_t nrows,     \
                              ptrdiff_t K) {                                              \
    int p = t / bands, band = t % bands;                                                  \
    opg_o_t* dst = p == 0 ? out : scratch + (ptrdiff_t)(p - 1) * nrows * K;               \
    return opg_csc_block_##SUF(data, ind, ptr, b, dst, cb[p], cb[p + 1], nrows,           \
                               nrows * band / bands, nrows * (band + 1) / bands, K, NULL); \
}                                                                                         \
/* out = a @ b for CSC a in P parts (1 < P <= OPG_MAX_PARTS): the columns split into P    \
   runs of about equal entries, each summed into its own buffer by its tasks (nt > P: each \
   part's rows in nt / P bands), then out = part 0 + part 1 + ..., row by row. P depends  \
   on the shapes only, so each value is summed in the same order by any number of        \
   threads. 1 on a bad index, 2 when the parts' memory is not available. */               \
static int opg_csc_parts_##SUF(const opg_a_t* data, const IDX* ind, const IDX* ptr,       \
                               const opg_b_t* b, opg_o_t* out, ptrdiff_t nrows,           \
                               ptrdiff_t ncols, ptrdiff_t K, const opg_epilogue* ep,      \
                               int P, int nt) {                                           \
    opg_o_t* scratch = (opg_o_t*)malloc((size_t)((P - 1) * nrows * K) * sizeof(opg_o_t)); \
    if (scratch == NULL) return 2;                                                        \
    ptrdiff_t cb[OPG_MAX_PARTS + 1];                                                      \
    cb[0] = 0;                                                                            \
    cb[P] = ncols;                                                                        \
    for (int p = 1; p < P; p++) {  /* the first column starting at p/P of the entries */  \
        double goal = (double)ptr[ncols] * p / P;                                         \
        ptrdiff_t lo = cb[p - 1], hi = ncols;                                             \
        while (lo < hi) {                                                                 \
            ptrdiff_t mid = lo + (hi - lo) / 2;                                           \
            if ((double)ptr[mid] < goal) lo = mid + 1; else hi = mid;                     \
        }                                                                                 \
        cb[p] = lo;                                                                       \
    }                                                                                     \
    int bands = nt > P ? nt / P : 1, tasks = P * bands, bad = 0;                          \
    if (bands > nrows) bands = 1, tasks = P;                                              \
    if (nt <= 1) {                                                                        \
        for (int t = 0; t < tasks; t++)                                                   \
            bad |= opg_csc_task_##SUF(data, ind, ptr, b, out, scratch, cb, bands, t,      \
                                      nrows, K);                                          \
    } else {                                                                              \
        _Pragma("omp parallel for num_threads(nt) schedule(static, 1) reduction(|:bad)")  \
        for (int t = 0; t < tasks; t++)                                                   \
            bad |= opg_csc_task_##SUF(data, ind, ptr, b, out, scratch, cb, bands, t,      \
                                      nrows, K);                                          \
    }                                                                                     \
    if (!bad) {                                                                           \
        ptrdiff_t chunk = (nrows + 63) / 64;                                              \
        if (nt <= 1) {                                                                    \
            opg_add_parts(out, scratch, P, nrows, K, 0, nrows, ep);                       \
        } else {                                                                          \
            _Pragma("omp parallel for num_threads(nt) schedule(static)")                  \
            for (ptrdiff_t c = 0; c < 64; c++) {                                          \
                ptrdiff_t r1 = (c + 1) * chunk < nrows ? (c + 1) * chunk : nrows;         \
                if (c * chunk < r1)                                                       \
                    opg_add_parts(out, scratch, P, nrows, K, c * chunk, r1, ep);          \
            }                                                                             \
        }                                                                                 \
    }                                                                                     \
    free(scratch);                                                                        \
    return bad;                                                                           \
}                                                                                         \
/* out = a @ b on nt threads (nt == 1: no parallel region, safe in a forked child).       \
   csr: a is nrows x ncols with nrows + 1 pointers; csc: ncols + 1 pointers. Rows are     \
   split into nt blocks, balanced by stored entries for CSR. A CSC product with P > 1     \
   parts (opg_csc_part_count) sums them separately. 1 on a bad index. */                  \
static int opg_spmm_##SUF(int csr, const opg_a_t* data, const IDX* ind, const IDX* ptr,   \
                          const opg_b_t* b, opg_o_t* out, ptrdiff_t nrows,                \
                          ptrdiff_t ncols, ptrdiff_t K, const opg_epilogue* ep, int nt) { \
    int bad = 0;                                                                          \
    if (!csr) {                                                                           \
        int P = opg_csc_part_count(nrows, (ptrdiff_t)ptr[ncols], K);                      \
        if (P > 1 && (bad = opg_csc_parts_##SUF(data, ind, ptr, b, out, nrows, ncols, K,  \
                                                ep, P, nt)) != 2)                         \
            return bad;                                                                   \
        bad = 0;                                                                          \
    }                                                                                     \
    if (nt <= 1 || nrows < 2) {                                                           \
        if (csr) return opg_csr_rows_##SUF(data, ind, ptr, b, out, 0, nrows, ncols, K, ep); \
        return opg_csc_block_##SUF(data, ind, ptr, b, out, 0, ncols, nrows, 0, nrows, K,  \
                                   ep);                                                   \
    }                                                                                     \
    if (nt > nrows) nt = (int)nrows;                                                      \
    ptrdiff_t bounds[257];                                                                \
    if (nt > 256) nt = 256;                                                               \
    bounds[0] = 0;                                                                        \
    bounds[nt] = nrows;                                                                   \
    for (int t = 1; t < nt; t++) {                                                        \
        if (csr) {  /* first row whose entries start at or after t/nt of the work */      \
            double total = (double)ptr[nrows] + (double)nrows;                            \
            double goal = total * t / nt;                                                 \
            ptrdiff_t lo = bounds[t - 1], hi = nrows;                                     \
            while (lo < hi) {                                                             \
                ptrdiff_t mid = lo + (hi - lo) / 2;                                       \
                if ((double)ptr[mid] + (double)mid < goal) lo = mid + 1; else hi = mid;   \
            }                                                                             \
            bounds[t] = lo;                                                               \
        } else {                                                                          \
            bounds[t] = nrows * t / nt;                                                   \
        }                                                                                 \
    }                                                                                     \
    _Pragma("omp parallel for num_threads(nt) schedule(static, 1) reduction(|:bad)")      \
    for (int t = 0; t < nt; t++) {                                                        \
        if (csr)                                                                          \
            bad |= opg_csr_rows_##SUF(data, ind, ptr, b, out, bounds[t], bounds[t + 1],   \
                                      ncols, K, ep);                                      \
        else                                                                              \
            bad |= opg_csc_block_##SUF(data, ind, ptr, b, out, 0, ncols, nrows,           \
                                       bounds[t], bounds[t + 1], K, ep);                  \
    }                                                                                     \
    return bad;                                                                           \
}

OPG_PTR_OK(int32_t, i32)
OPG_PTR_OK(int64_t, i64)
"""
)

_SPMM_PYX = '''\
# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: binding=False, auto_pickle=False
# Sparse ({a_dtype}, CSR or CSC) times dense ({b_dtype}) into a dense {o_dtype} matrix, for
# StructuredDot, Dot and Usmm (z: {z_dtype}); see opgraph_sparse.kernels.dot.
from cpython.buffer cimport PyBUF_ANY_CONTIGUOUS, PyBUF_STRIDED_RO, PyBUF_WRITABLE
from cpython.buffer cimport PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int32_t, int64_t
from opgraph_c._threads cimport Team, monotonic, team_init, team_size, team_timed
from opgraph_c._vm cimport NodeThunk

import numpy as np
from opgraph_c._pool import new_array

cdef extern from *:
    """{c_code}"""
    ctypedef {a_c} opg_a_t
    ctypedef {b_c} opg_b_t
    ctypedef {o_c} opg_o_t
    ctypedef {z_c} opg_z_t
    ctypedef struct opg_epilogue:
        int on
        opg_o_t alpha
        const char* z
        Py_ssize_t zs0, zs1
    int opg_ptr_bad_i32(const int32_t* ptr, Py_ssize_t n, Py_ssize_t nnz) nogil
    int opg_ptr_bad_i64(const int64_t* ptr, Py_ssize_t n, Py_ssize_t nnz) nogil
    int opg_spmm_i32(int csr, const opg_a_t* data, const int32_t* ind, const int32_t* ptr,
                     const opg_b_t* b, opg_o_t* out, Py_ssize_t nrows, Py_ssize_t ncols,
                     Py_ssize_t K, const opg_epilogue* ep, int nt) nogil
    int opg_spmm_i64(int csr, const opg_a_t* data, const int64_t* ind, const int64_t* ptr,
                     const opg_b_t* b, opg_o_t* out, Py_ssize_t nrows, Py_ssize_t ncols,
                     Py_ssize_t K, const opg_epilogue* ep, int nt) nogil


DTYPE_A = np.dtype("{a_dtype}")
DTYPE_B = np.dtype("{b_dtype}")
DTYPE_O = np.dtype("{o_dtype}")
DTYPE_Z = np.dtype("{z_dtype}")
INT32 = np.dtype("int32")
INT64 = np.dtype("int64")


cdef inline bint plain(object v, object dtype):
    """An aligned ndarray (no subclass) of exactly ``dtype``."""
    return type(v) is np.ndarray and v.dtype == dtype and v.flags.aligned


cdef class SpmmThunk(NodeThunk):
    """The thunk of one product node: ``sparse`` and ``dense`` are the inputs' positions,
    ``cls`` the sparse input's scipy class, ``csr`` its format; ``alpha``/``z`` are Usmm's
    inputs (-1 without an epilogue)."""

    cdef int sparse, dense, alpha, z
    cdef bint csr
    cdef object cls
    cdef Team team

    def __init__(self, node, list in_cells, list out_cells, int sparse, int dense, cls,
                 bint csr, int alpha=-1, int z=-1, int nthreads=1, bint adaptive=True,
                 Py_ssize_t threshold=200000):
        super().__init__(node, in_cells, out_cells)
        self.sparse, self.dense, self.alpha, self.z = sparse, dense, alpha, z
        self.cls, self.csr = cls, csr
        team_init(&self.team, nthreads, threshold, adaptive)

    cdef int fast(self) except -1:
        cdef Py_buffer bd, bi, bp, bb, bo, bz
        cdef opg_epilogue ep
        cdef Py_ssize_t nrows, ncols, K, nnz, npt, work
        cdef bint csr = self.csr, flipped = self.sparse > self.dense, wide
        cdef int nt, bad
        cdef double start
        a = self.arg(self.sparse)
        b = self.arg(self.dense)
        if type(a) is not self.cls or not plain(b, DTYPE_B) or b.ndim != 2:
            return 1
        data, ind, ptr = a.data, a.indices, a.indptr
        if not (plain(data, DTYPE_A) and type(ind) is np.ndarray and type(ptr) is np.ndarray):
            return 1
        if ind.dtype != ptr.dtype or (ind.dtype != INT32 and ind.dtype != INT64):
            return 1
        if data.ndim != 1 or ind.ndim != 1 or ptr.ndim != 1:
            return 1
        nrows, ncols = a.shape
        if flipped:  # dense @ sparse == (sparse.T @ dense.T).T; the transpose swaps formats
            b = b.T
            csr = not csr
            nrows, ncols = ncols, nrows
            if b.shape[0] != ncols:
                return 1
        elif b.shape[0] != ncols:
            return 1
        K = b.shape[1]
        npt = (nrows if csr else ncols) + 1
        if ptr.shape[0] != npt:
            return 1
        nnz = min(ind.shape[0], data.shape[0])
        ep.on = 0
        if self.z >= 0:
            alpha, z = self.arg(self.alpha), self.arg(self.z)
            if not (plain(z, DTYPE_Z) and z.ndim == 2 and type(alpha) is np.ndarray):
                return 1
            if alpha.size != 1 or alpha.dtype.kind not in "fiub":
                return 1
            if flipped:
                z = z.T
            if z.shape[0] != nrows or z.shape[1] != K:
                return 1
            ep.on = 1
            ep.alpha = <opg_o_t>float(alpha.reshape(-1)[0])
        b = np.ascontiguousarray(b)
        data = np.ascontiguousarray(data)
        ind = np.ascontiguousarray(ind)
        ptr = np.ascontiguousarray(ptr)
        wide = ind.dtype == INT64
        PyObject_GetBuffer(ptr, &bp, PyBUF_ANY_CONTIGUOUS)
        try:
            if wide:
                bad = opg_ptr_bad_i64(<const int64_t*>bp.buf, npt - 1, nnz)
            else:
                bad = opg_ptr_bad_i32(<const int32_t*>bp.buf, npt - 1, nnz)
        finally:
            PyBuffer_Release(&bp)
        if bad:
            return 1
        out = new_array((nrows, K), DTYPE_O)
        PyObject_GetBuffer(data, &bd, PyBUF_ANY_CONTIGUOUS)
        PyObject_GetBuffer(ind, &bi, PyBUF_ANY_CONTIGUOUS)
        PyObject_GetBuffer(ptr, &bp, PyBUF_ANY_CONTIGUOUS)
        PyObject_GetBuffer(b, &bb, PyBUF_ANY_CONTIGUOUS)
        PyObject_GetBuffer(out, &bo, PyBUF_ANY_CONTIGUOUS | PyBUF_WRITABLE)
        if ep.on:
            PyObject_GetBuffer(z, &bz, PyBUF_STRIDED_RO)
            ep.z = <const char*>bz.buf
            ep.zs0, ep.zs1 = bz.strides[0], bz.strides[1]
        work = (nnz + nrows) * K
        nt = team_size(&self.team, work)
        start = monotonic()
        with nogil:
            if wide:
                bad = opg_spmm_i64(csr, <const opg_a_t*>bd.buf, <const int64_t*>bi.buf,
                                   <const int64_t*>bp.buf, <const opg_b_t*>bb.buf,
                                   <opg_o_t*>bo.buf, nrows, ncols, K, &ep, nt)
            else:
                bad = opg_spmm_i32(csr, <const opg_a_t*>bd.buf, <const int32_t*>bi.buf,
                                   <const int32_t*>bp.buf, <const opg_b_t*>bb.buf,
                                   <opg_o_t*>bo.buf, nrows, ncols, K, &ep, nt)
        team_timed(&self.team, nt, monotonic() - start, work)
        if ep.on:
            PyBuffer_Release(&bz)
        PyBuffer_Release(&bo)
        PyBuffer_Release(&bb)
        PyBuffer_Release(&bp)
        PyBuffer_Release(&bi)
        PyBuffer_Release(&bd)
        if bad:
            return 1  # an index out of range: perform decides, nothing was written
        self.set_out(0, out.T if flipped else out)
        return 0
'''

# The pairdot module: out[jj] = (scale[jj] *) dot(p[i], q[j]) for each stored entry jj at
# (i, j). {a_c}: the scale's C type (SamplingDot's pattern values), {b_c}: the dense rows',
# {o_c}: the output's; the dots are summed in {z_c} (the dense rows' common type).
_PAIRDOT_C = (
    _C_COMMON
    + r"""
/* dot(p, q) over K values: eight partial sums (vectorised), added pairwise at the end. */
static inline opg_z_t opg_rowdot(ptrdiff_t K, const opg_b_t* restrict p,
                                 const opg_b_t* restrict q) {
    opg_z_t acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    ptrdiff_t k = 0;
    for (; k + 8 <= K; k += 8)
        for (int l = 0; l < 8; l++) acc[l] += (opg_z_t)p[k + l] * (opg_z_t)q[k + l];
    for (; k < K; k++) acc[0] += (opg_z_t)p[k] * (opg_z_t)q[k];
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

/* indptr of n segments: 0 when it starts at 0, never decreases and ends at nnz exactly   \
   (what the Ops' perform accept); 1 otherwise. */                                         \
#define OPG_PAIRDOT(IDX, SUF)                                                             \
static int opg_ptr_bad_##SUF(const IDX* ptr, ptrdiff_t n, ptrdiff_t nnz) {               \
    if (ptr[0] != 0) return 1;                                                            \
    for (ptrdiff_t i = 0; i < n; i++)                                                     \
        if (ptr[i + 1] < ptr[i]) return 1;                                                \
    return ptr[n] != nnz;                                                                 \
}                                                                                         \
/* Segments [s0, s1): csr: segment s is p's row, ind its q rows; csc the other way. */    \
static int opg_pairdot_seg_##SUF(int csr, const IDX* ind, const IDX* ptr,                 \
                                 const opg_a_t* scale, const opg_b_t* p, ptrdiff_t np_,   \
                                 const opg_b_t* q, ptrdiff_t nq, ptrdiff_t K,             \
                                 opg_o_t* out, ptrdiff_t s0, ptrdiff_t s1) {              \
    ptrdiff_t nother = csr ? nq : np_;                                                    \
    for (ptrdiff_t s = s0; s < s1; s++) {                                                 \
        for (ptrdiff_t jj = ptr[s]; jj < ptr[s + 1]; jj++) {                              \
            IDX o = ind[jj];                                                              \
            if ((uint64_t)(int64_t)o >= (uint64_t)nother) return 1;                       \
            const opg_b_t* pr = p + (csr ? s : (ptrdiff_t)o) * K;                         \
            const opg_b_t* qr = q + (csr ? (ptrdiff_t)o : s) * K;                         \
            opg_z_t d = opg_rowdot(K, pr, qr);                                            \
            out[jj] = scale ? (opg_o_t)((opg_z_t)scale[jj] * d) : (opg_o_t)d;             \
        }                                                                                 \
    }                                                                                     \
    return 0;                                                                             \
}                                                                                         \
static int opg_pairdot_##SUF(int csr, const IDX* ind, const IDX* ptr, ptrdiff_t nseg,     \
                             const opg_a_t* scale, const opg_b_t* p, ptrdiff_t np_,       \
                             const opg_b_t* q, ptrdiff_t nq, ptrdiff_t K, opg_o_t* out,   \
                             int nt) {                                                    \
    int bad = 0;                                                                          \
    if (nt <= 1 || nseg < 2)                                                              \
        return opg_pairdot_seg_##SUF(csr, ind, ptr, scale, p, np_, q, nq, K, out, 0,      \
                                     nseg);                                               \
    if (nt > nseg) nt = (int)nseg;                                                        \
    _Pragma("omp parallel for num_threads(nt) schedule(dynamic, 64) reduction(|:bad)")    \
    for (ptrdiff_t c = 0; c < (nseg + 255) / 256; c++) {                                  \
        ptrdiff_t s1 = (c + 1) * 256 < nseg ? (c + 1) * 256 : nseg;                       \
        bad |= opg_pairdot_seg_##SUF(csr, ind, ptr, scale, p, np_, q, nq, K, out,         \
                                     c * 256, s1);                                        \
    }                                                                                     \
    return bad;                                                                           \
}

OPG_PAIRDOT(int32_t, i32)
OPG_PAIRDOT(int64_t, i64)
"""
)

_PAIRDOT_PYX = '''\
# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: binding=False, auto_pickle=False
# One dot product of two dense {b_dtype} rows per stored entry, into {o_dtype} values (scaled
# by {a_dtype} pattern values for SamplingDot); see opgraph_sparse.kernels.dot.
from cpython.buffer cimport PyBUF_ANY_CONTIGUOUS, PyBUF_WRITABLE
from cpython.buffer cimport PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int32_t, int64_t
from opgraph_c._threads cimport Team, monotonic, team_init, team_size, team_timed
from opgraph_c._vm cimport NodeThunk

import numpy as np

cdef extern from *:
    """{c_code}"""
    ctypedef {a_c} opg_a_t
    ctypedef {b_c} opg_b_t
    ctypedef {o_c} opg_o_t
    int opg_ptr_bad_i32(const int32_t* ptr, Py_ssize_t n, Py_ssize_t nnz) nogil
    int opg_ptr_bad_i64(const int64_t* ptr, Py_ssize_t n, Py_ssize_t nnz) nogil
    int opg_pairdot_i32(int csr, const int32_t* ind, const int32_t* ptr, Py_ssize_t nseg,
                        const opg_a_t* scale, const opg_b_t* p, Py_ssize_t np_,
                        const opg_b_t* q, Py_ssize_t nq, Py_ssize_t K, opg_o_t* out,
                        int nt) nogil
    int opg_pairdot_i64(int csr, const int64_t* ind, const int64_t* ptr, Py_ssize_t nseg,
                        const opg_a_t* scale, const opg_b_t* p, Py_ssize_t np_,
                        const opg_b_t* q, Py_ssize_t nq, Py_ssize_t K, opg_o_t* out,
                        int nt) nogil


DTYPE_A = np.dtype("{a_dtype}")
DTYPE_B = np.dtype("{b_dtype}")
DTYPE_O = np.dtype("{o_dtype}")
INT32 = np.dtype("int32")
INT64 = np.dtype("int64")


cdef inline bint plain(object v, object dtype):
    """An aligned ndarray (no subclass) of exactly ``dtype``."""
    return type(v) is np.ndarray and v.dtype == dtype and v.flags.aligned


cdef class PairDotThunk(NodeThunk):
    """``mode`` 0: StructuredDotGrad (inputs indices, indptr, b, g; output values: csr
    ``dot(g[row], b[col])``, csc the same); ``mode`` 1: SamplingDot (inputs x, y, p of class
    ``cls``; output p's pattern with ``p.data * dot(x[row], y[col])``)."""

    cdef int mode
    cdef bint csr
    cdef object cls
    cdef Team team

    def __init__(self, node, list in_cells, list out_cells, int mode, bint csr, cls=None,
                 int nthreads=1, bint adaptive=True, Py_ssize_t threshold=200000):
        super().__init__(node, in_cells, out_cells)
        self.mode, self.csr, self.cls = mode, csr, cls
        team_init(&self.team, nthreads, threshold, adaptive)

    cdef int fast(self) except -1:
        cdef Py_buffer bi, bp, bs, bx, by, bo
        cdef Py_ssize_t nseg, K, nnz, nx, ny, work
        cdef bint wide, scaled = self.mode == 1
        cdef int nt, bad
        cdef double start
        pat = None
        if scaled:
            x, y, pat = self.arg(0), self.arg(1), self.arg(2)
            if type(pat) is not self.cls or not plain(pat.data, DTYPE_A):
                return 1
            ind, ptr, scale = pat.indices, pat.indptr, pat.data
            if scale.ndim != 1 or scale.shape[0] != ind.shape[0]:
                return 1
        else:
            ind, ptr, y, x = self.arg(0), self.arg(1), self.arg(2), self.arg(3)
            scale = None
        if not (plain(x, DTYPE_B) and plain(y, DTYPE_B) and x.ndim == 2 and y.ndim == 2):
            return 1
        if type(ind) is not np.ndarray or type(ptr) is not np.ndarray:
            return 1
        if ind.dtype != ptr.dtype or (ind.dtype != INT32 and ind.dtype != INT64):
            return 1
        if ind.ndim != 1 or ptr.ndim != 1 or ptr.shape[0] < 1 or x.shape[1] != y.shape[1]:
            return 1
        nseg = ptr.shape[0] - 1
        nnz = ind.shape[0]
        if nseg != (x.shape[0] if self.csr else y.shape[0]):
            return 1  # indptr must run over the rows of x (csr) or of y (csc)
        if scaled:
            if (x.shape[0], y.shape[0]) != pat.shape:
                return 1
            if nseg != (pat.shape[0] if self.csr else pat.shape[1]):
                return 1
        # p holds the rows of the entries' row indices, q of their column indices
        K, nx, ny = x.shape[1], x.shape[0], y.shape[0]
        x = np.ascontiguousarray(x)
        y = np.ascontiguousarray(y)
        ind = np.ascontiguousarray(ind)
        ptr = np.ascontiguousarray(ptr)
        wide = ind.dtype == INT64
        PyObject_GetBuffer(ptr, &bp, PyBUF_ANY_CONTIGUOUS)
        try:
            if wide:
                bad = opg_ptr_bad_i64(<const int64_t*>bp.buf, nseg, nnz)
            else:
                bad = opg_ptr_bad_i32(<const int32_t*>bp.buf, nseg, nnz)
        finally:
            PyBuffer_Release(&bp)
        if bad:
            return 1
        out = np.zeros(ind.shape[0], DTYPE_O)
        PyObject_GetBuffer(ind, &bi, PyBUF_ANY_CONTIGUOUS)
        PyObject_GetBuffer(ptr, &bp, PyBUF_ANY_CONTIGUOUS)
        PyObject_GetBuffer(x, &bx, PyBUF_ANY_CONTIGUOUS)
        PyObject_GetBuffer(y, &by, PyBUF_ANY_CONTIGUOUS)
        PyObject_GetBuffer(out, &bo, PyBUF_ANY_CONTIGUOUS | PyBUF_WRITABLE)
        if scaled:
            scale = np.ascontiguousarray(scale)
            PyObject_GetBuffer(scale, &bs, PyBUF_ANY_CONTIGUOUS)
        work = nnz * K
        nt = team_size(&self.team, work)
        start = monotonic()
        with nogil:
            if wide:
                bad = opg_pairdot_i64(self.csr, <const int64_t*>bi.buf, <const int64_t*>bp.buf,
                                      nseg, <const opg_a_t*>(bs.buf if scaled else NULL),
                                      <const opg_b_t*>bx.buf, nx, <const opg_b_t*>by.buf, ny,
                                      K, <opg_o_t*>bo.buf, nt)
            else:
                bad = opg_pairdot_i32(self.csr, <const int32_t*>bi.buf, <const int32_t*>bp.buf,
                                      nseg, <const opg_a_t*>(bs.buf if scaled else NULL),
                                      <const opg_b_t*>bx.buf, nx, <const opg_b_t*>by.buf, ny,
                                      K, <opg_o_t*>bo.buf, nt)
        team_timed(&self.team, nt, monotonic() - start, work)
        if scaled:
            PyBuffer_Release(&bs)
        PyBuffer_Release(&bo)
        PyBuffer_Release(&by)
        PyBuffer_Release(&bx)
        PyBuffer_Release(&bp)
        PyBuffer_Release(&bi)
        if bad:
            return 1  # an index out of range: perform decides, nothing was written
        if scaled:
            out = self.cls((out, pat.indices.copy(), pat.indptr.copy()), shape=pat.shape)
        self.set_out(0, out)
        return 0
'''


def _fill(template: str, **values: str) -> str:
    """``template`` with each ``{name}`` of ``values`` replaced (C braces stay as they are)."""
    for key, value in values.items():
        template = template.replace("{" + key + "}", value)
    return template


def _ctype(dtype: str) -> str | None:
    """The C type of a dtype the loops take, or None."""
    return C_TYPES.get(dtype)


def spmm_source(a: str, b: str, out: str, z: str | None = None) -> str:
    """The Cython source of the spmm module for these dtypes (all float32 or float64):
    the sparse values ``a``, the dense operand ``b``, the output ``out``, Usmm's ``z``."""
    z = z or out
    names = {"a_c": _ctype(a), "b_c": _ctype(b), "o_c": _ctype(out), "z_c": _ctype(z)}
    c_code = _fill(_SPMM_C, **names)
    return _fill(
        _SPMM_PYX, c_code=_indent(c_code), a_dtype=a, b_dtype=b, o_dtype=out, z_dtype=z, **names
    )


def pairdot_source(scale: str, dense: str, out: str) -> str:
    """The Cython source of the pairdot module: ``scale`` (SamplingDot's pattern values;
    any float dtype otherwise), the dense rows' dtype ``dense`` and the output's ``out``."""
    names = {"a_c": _ctype(scale), "b_c": _ctype(dense), "o_c": _ctype(out)}
    names["z_c"] = names["b_c"]
    c_code = _fill(_PAIRDOT_C, **names)
    return _fill(
        _PAIRDOT_PYX, c_code=_indent(c_code), a_dtype=scale, b_dtype=dense, o_dtype=out, **names
    )


def _indent(c_code: str) -> str:
    """C code as the body of a Cython verbatim docstring (indented, no triple quotes)."""
    return "\n".join(("    " + line) if line else "" for line in c_code.splitlines())


def _team() -> dict[str, Any]:
    """The thread team's settings (backend-c's policy for loops counted in elements: the
    work counted here is multiply-adds)."""
    return _c.team_options("elemwise")  # type: ignore[no-any-return]


def _is_sparse_type(t: Any) -> bool:
    return isinstance(t, SparseType)


def _spmm_entry(op: Any, node: Any, sparse: int, dense: int, z: int = -1) -> Any:
    """The spmm module for a node whose input ``sparse`` is CSR/CSC and ``dense`` a dense
    matrix (``z``: Usmm's z), or PERFORM for types the loops do not take."""
    st = node.inputs[sparse].type
    dt = node.inputs[dense].type
    out = node.outputs[0].type
    if not isinstance(st, SparseType) or st.format not in ("csr", "csc"):
        return _c.PERFORM
    if _is_sparse_type(dt) or getattr(dt, "ndim", None) != 2 or _is_sparse_type(out):
        return _c.PERFORM
    zt = node.inputs[z].type.dtype if z >= 0 else out.dtype
    if z >= 0 and getattr(node.inputs[z].type, "ndim", None) != 2:
        return _c.PERFORM
    dtypes = (st.dtype, dt.dtype, out.dtype, zt)
    if not all(d in C_TYPES for d in dtypes):
        return _c.PERFORM
    cls = SparseType.format_cls[st.format]
    csr = st.format == "csr"
    alpha = 0 if z >= 0 else -1

    def make(module: Any, node: Any, in_cells: list[Any], out_cells: list[Any]) -> Any:
        return module.SpmmThunk(
            node, in_cells, out_cells, sparse, dense, cls, csr, alpha, z, **_team()
        )

    source = spmm_source(*dtypes)
    name = f"{op} {st.format} {'x'.join(dtypes)}"
    return _c.CModule(name, source, make_thunk=make, openmp=True)


def structured_dot_c(op: Any, node: Any) -> Any:
    """``StructuredDot(sparse, dense)``: the spmm module (a sparse ``b``: PERFORM)."""
    return _spmm_entry(op, node, 0, 1)


def dot_c(op: Any, node: Any) -> Any:
    """``Dot`` of a sparse and a dense matrix, in either order (vectors, two sparse
    operands: PERFORM, i.e. SciPy)."""
    x, y = node.inputs
    if _is_sparse_type(x.type) and not _is_sparse_type(y.type):
        return _spmm_entry(op, node, 0, 1)
    if _is_sparse_type(y.type) and not _is_sparse_type(x.type):
        return _spmm_entry(op, node, 1, 0)
    return _c.PERFORM


def usmm_c(op: Any, node: Any) -> Any:
    """``Usmm(alpha, x, y, z)``: the spmm module with its ``out * alpha + z`` epilogue."""
    _, x, y, _ = node.inputs
    if _is_sparse_type(x.type) and not _is_sparse_type(y.type):
        return _spmm_entry(op, node, 1, 2, z=3)
    if _is_sparse_type(y.type) and not _is_sparse_type(x.type):
        return _spmm_entry(op, node, 2, 1, z=3)
    return _c.PERFORM


def _pairdot_entry(op: Any, node: Any, scale: str, dense: str, csr: bool, cls: Any) -> Any:
    out = node.outputs[0].type.dtype
    if not all(d in C_TYPES for d in (scale, dense, out)):
        return _c.PERFORM
    mode = 0 if cls is None else 1

    def make(module: Any, node: Any, in_cells: list[Any], out_cells: list[Any]) -> Any:
        return module.PairDotThunk(node, in_cells, out_cells, mode, csr, cls, **_team())

    name = f"{op} {'csr' if csr else 'csc'} {scale}x{dense}->{out}"
    return _c.CModule(name, pairdot_source(scale, dense, out), make_thunk=make, openmp=True)


def _grad_entry(csr: bool) -> Any:
    def grad_c(op: Any, node: Any) -> Any:
        """``StructuredDotGradCSR/CSC(indices, indptr, b, g)``: the pairdot module when b
        and g share a float dtype (mixed dtypes: PERFORM)."""
        ind, ptr, b, g = node.inputs
        if _is_sparse_type(b.type) or _is_sparse_type(g.type):
            return _c.PERFORM
        if b.type.dtype != g.type.dtype or b.type.ndim != 2 or g.type.ndim != 2:
            return _c.PERFORM
        if ind.type.ndim != 1 or ptr.type.ndim != 1:
            return _c.PERFORM
        return _pairdot_entry(op, node, b.type.dtype, b.type.dtype, csr, None)

    return grad_c


def sampling_dot_c(op: Any, node: Any) -> Any:
    """``SamplingDot(x, y, p)``: the pairdot module, scaled by p's values (x and y of one
    float dtype; otherwise PERFORM)."""
    x, y, p = node.inputs
    if not isinstance(p.type, SparseType) or p.type.format not in ("csr", "csc"):
        return _c.PERFORM
    if _is_sparse_type(x.type) or _is_sparse_type(y.type):
        return _c.PERFORM
    if x.type.dtype != y.type.dtype or x.type.ndim != 2 or y.type.ndim != 2:
        return _c.PERFORM
    out = node.outputs[0].type
    if not isinstance(out, SparseType) or out.format != p.type.format:
        return _c.PERFORM
    cls = SparseType.format_cls[p.type.format]
    return _pairdot_entry(op, node, p.type.dtype, x.type.dtype, p.type.format == "csr", cls)


def register(registry: Any) -> None:
    """Put the product kernels into backend-c's registry (called by the plugin's hook), and
    keep the registry's toolkit for the entries."""
    global _c
    _c = registry
    registry.register(dot.StructuredDot, structured_dot_c, version=DOT_C_VERSION)
    registry.register(dot.Dot, dot_c, version=DOT_C_VERSION)
    registry.register(dot.Usmm, usmm_c, version=DOT_C_VERSION)
    registry.register(dot.StructuredDotGradCSR, _grad_entry(True), version=DOT_C_VERSION)
    registry.register(dot.StructuredDotGradCSC, _grad_entry(False), version=DOT_C_VERSION)
    registry.register(dot.SamplingDot, sampling_dot_c, version=DOT_C_VERSION)
