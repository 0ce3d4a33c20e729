/* opgraph-backend-c: the C body of every generated reduction module.
 *
 * A generated module (opgraph_c/kernels/reduction.py) defines, before including this file,
 * the types and macros of one reduction:
 *
 *   opg_x_t, opg_acc_t, opg_out_t   the input, accumulator and output types
 *   OPG_COMBINE(a, b)               the combination of an accumulator and a value
 *   OPG_OPENMP                      1: built with OpenMP, nthreads > 1 is honoured
 *   OPG_LANES, OPG_BLOCK            independent accumulators of a leaf, a leaf's length
 *   OPG_COLS_BLOCK, OPG_ROWS_BLOCK  the column loop's blocks (0 rows: one level)
 *   OPG_SPLIT_DEPTH                 where a row's tree is split among threads
 *
 * and gets opg_reduce_table, the opg_reduce_kernel of its REDUCE_KERNEL capsule. opg_reduce
 * reduces a 2-D (K kept, R reduced) view given by byte strides; it is called by
 * opgraph_c._reduce.ReduceThunk.
 *
 * Its text is part of every kernel's cache key: editing it rebuilds the kernels.
 */
#ifndef OPGRAPH_C_REDUCE_H
#define OPGRAPH_C_REDUCE_H

#include "opgraph_c_prelude.h"

/* ---- rows: blocked pairwise reduction along a reduced axis */

/* A leaf of n >= 1 adjacent values: OPG_LANES independent accumulators (vector
 * registers), started from the first values, then combined pairwise. */
static inline opg_acc_t opg_leaf_contig(const opg_x_t *p, ptrdiff_t n)
{
    opg_acc_t r[OPG_LANES];
    ptrdiff_t i, j;
    if (n < OPG_LANES) {
        opg_acc_t a = (opg_acc_t)p[0];
        for (i = 1; i < n; i++)
            a = OPG_COMBINE(a, (opg_acc_t)p[i]);
        return a;
    }
    for (j = 0; j < OPG_LANES; j++)
        r[j] = (opg_acc_t)p[j];
    for (i = OPG_LANES; i + OPG_LANES <= n; i += OPG_LANES)
        for (j = 0; j < OPG_LANES; j++)
            r[j] = OPG_COMBINE(r[j], (opg_acc_t)p[i + j]);
    for (j = 0; i < n; i++, j++)
        r[j] = OPG_COMBINE(r[j], (opg_acc_t)p[i]);
    for (j = OPG_LANES / 2; j > 0; j /= 2)
        for (i = 0; i < j; i++)
            r[i] = OPG_COMBINE(r[i], r[i + j]);
    return r[0];
}

/* The same over values s bytes apart. */
static inline opg_acc_t opg_leaf_strided(const char *p, ptrdiff_t n, ptrdiff_t s)
{
    opg_acc_t r[OPG_LANES];
    ptrdiff_t i, j;
#define OPG_AT(i) ((opg_acc_t)(*(const opg_x_t *)(p + (i) * s)))
    if (n < OPG_LANES) {
        opg_acc_t a = OPG_AT(0);
        for (i = 1; i < n; i++)
            a = OPG_COMBINE(a, OPG_AT(i));
        return a;
    }
    for (j = 0; j < OPG_LANES; j++)
        r[j] = OPG_AT(j);
    for (i = OPG_LANES; i + OPG_LANES <= n; i += OPG_LANES)
        for (j = 0; j < OPG_LANES; j++)
            r[j] = OPG_COMBINE(r[j], OPG_AT(i + j));
    for (j = 0; i < n; i++, j++)
        r[j] = OPG_COMBINE(r[j], OPG_AT(i));
#undef OPG_AT
    for (j = OPG_LANES / 2; j > 0; j /= 2)
        for (i = 0; i < j; i++)
            r[i] = OPG_COMBINE(r[i], r[i + j]);
    return r[0];
}

/* Where the pairwise tree splits n values: about half, a multiple of OPG_LANES. */
static inline ptrdiff_t opg_half(ptrdiff_t n)
{
    ptrdiff_t h = n / 2;
    return h - h % OPG_LANES;
}

/* The reduction of n >= 1 values s bytes apart: leaves of at most OPG_BLOCK values,
 * joined pairwise (NumPy's pairwise summation). */
static opg_acc_t opg_pairwise(const char *p, ptrdiff_t n, ptrdiff_t s)
{
    opg_acc_t a, b;  /* OPG_COMBINE may evaluate its arguments twice */
    ptrdiff_t h;
    if (n <= OPG_BLOCK) {
        if (s == (ptrdiff_t)sizeof(opg_x_t))
            return opg_leaf_contig((const opg_x_t *)p, n);
        return opg_leaf_strided(p, n, s);
    }
    h = opg_half(n);
    a = opg_pairwise(p, h, s);
    b = opg_pairwise(p + h * s, n - h, s);
    return OPG_COMBINE(a, b);
}

#if OPG_OPENMP
/* The nodes of opg_pairwise's tree over n values at the given depth (or leaves above
 * it), in order: their offsets and lengths appended at *count. */
static void opg_segments(ptrdiff_t off, ptrdiff_t n, int depth, ptrdiff_t *offs,
                         ptrdiff_t *lens, int *count)
{
    ptrdiff_t h;
    if (depth == 0 || n <= OPG_BLOCK) {
        offs[*count] = off;
        lens[*count] = n;
        (*count)++;
        return;
    }
    h = opg_half(n);
    opg_segments(off, h, depth - 1, offs, lens, count);
    opg_segments(off + h, n - h, depth - 1, offs, lens, count);
}

/* Join the values of opg_segments' nodes up the same tree: opg_pairwise's result. */
static opg_acc_t opg_join(ptrdiff_t n, int depth, const opg_acc_t *vals, int *next)
{
    opg_acc_t a, b;
    ptrdiff_t h;
    if (depth == 0 || n <= OPG_BLOCK)
        return vals[(*next)++];
    h = opg_half(n);
    a = opg_join(h, depth - 1, vals, next);
    b = opg_join(n - h, depth - 1, vals, next);
    return OPG_COMBINE(a, b);
}

#endif /* OPG_OPENMP */

static void opg_rows(const char *x, opg_out_t *out, ptrdiff_t K, ptrdiff_t R, ptrdiff_t sk,
                     ptrdiff_t sr, int nthreads)
{
    ptrdiff_t k;
#if OPG_OPENMP
    if (nthreads > 1 && K >= nthreads) {
        /* Rows in chunks taken on demand (a busy core slows no other thread down). */
        ptrdiff_t chunk = K / (8 * nthreads) > 1 ? K / (8 * nthreads) : 1;
        #pragma omp parallel for num_threads(nthreads) schedule(dynamic, chunk)
        for (k = 0; k < K; k++)
            out[k] = (opg_out_t)opg_pairwise(x + k * sk, R, sr);
        return;
    }
    if (nthreads > 1 && R > 2 * OPG_BLOCK) {
        /* Fewer rows than threads: the top of each row's tree split among the threads. */
        ptrdiff_t offs[1 << OPG_SPLIT_DEPTH], lens[1 << OPG_SPLIT_DEPTH];
        opg_acc_t vals[1 << OPG_SPLIT_DEPTH];
        int count, next, i;
        for (k = 0; k < K; k++) {
            const char *row = x + k * sk;
            count = 0;
            next = 0;
            opg_segments(0, R, OPG_SPLIT_DEPTH, offs, lens, &count);
            #pragma omp parallel for num_threads(nthreads) schedule(dynamic)
            for (i = 0; i < count; i++)
                vals[i] = opg_pairwise(row + offs[i] * sr, lens[i], sr);
            out[k] = (opg_out_t)opg_join(R, OPG_SPLIT_DEPTH, vals, &next);
        }
        return;
    }
#endif
    for (k = 0; k < K; k++)
        out[k] = (opg_out_t)opg_pairwise(x + k * sk, R, sr);
}

/* ---- columns: adjacent kept elements, a vector of accumulators per block */

/* The fewest columns a thread takes (narrower strips of rows read badly). */
#define OPG_MIN_COLS 64

/* acc[k] for k < nk combined with rows r0 <= r < r1 of the columns kb + k (rows sr bytes
 * apart): eight rows at a time, combined among themselves first as a little tree (an
 * eighth of the accumulator loads and stores, eight memory streams). */
static inline void opg_fold_rows(opg_acc_t *restrict acc, const char *x, ptrdiff_t kb,
                                 ptrdiff_t nk, ptrdiff_t r0, ptrdiff_t r1, ptrdiff_t sr)
{
    ptrdiff_t r, k;
    for (r = r0; r + 8 <= r1; r += 8) {
        const opg_x_t *a = (const opg_x_t *)(x + r * sr) + kb;
        const opg_x_t *b = (const opg_x_t *)(x + (r + 1) * sr) + kb;
        const opg_x_t *c = (const opg_x_t *)(x + (r + 2) * sr) + kb;
        const opg_x_t *d = (const opg_x_t *)(x + (r + 3) * sr) + kb;
        const opg_x_t *e = (const opg_x_t *)(x + (r + 4) * sr) + kb;
        const opg_x_t *f = (const opg_x_t *)(x + (r + 5) * sr) + kb;
        const opg_x_t *g = (const opg_x_t *)(x + (r + 6) * sr) + kb;
        const opg_x_t *h = (const opg_x_t *)(x + (r + 7) * sr) + kb;
        for (k = 0; k < nk; k++) {
            opg_acc_t ab = OPG_COMBINE((opg_acc_t)a[k], (opg_acc_t)b[k]);
            opg_acc_t cd = OPG_COMBINE((opg_acc_t)c[k], (opg_acc_t)d[k]);
            opg_acc_t ef = OPG_COMBINE((opg_acc_t)e[k], (opg_acc_t)f[k]);
            opg_acc_t gh = OPG_COMBINE((opg_acc_t)g[k], (opg_acc_t)h[k]);
            opg_acc_t abcdefgh = OPG_COMBINE(OPG_COMBINE(ab, cd), OPG_COMBINE(ef, gh));
            acc[k] = OPG_COMBINE(acc[k], abcdefgh);
        }
    }
    for (; r < r1; r++) {
        const opg_x_t *a = (const opg_x_t *)(x + r * sr) + kb;
        for (k = 0; k < nk; k++)
            acc[k] = OPG_COMBINE(acc[k], (opg_acc_t)a[k]);
    }
}

/* out[k] for k0 <= k < k1, column k starting at x + k * sizeof(opg_x_t), rows sr bytes
 * apart. */
static void opg_cols(const char *x, opg_out_t *out, ptrdiff_t k0, ptrdiff_t k1,
                     ptrdiff_t R, ptrdiff_t sr)
{
    opg_acc_t tot[OPG_COLS_BLOCK];
#if OPG_ROWS_BLOCK
    opg_acc_t part[OPG_COLS_BLOCK];
    ptrdiff_t r0, r1, first = R < OPG_ROWS_BLOCK ? R : OPG_ROWS_BLOCK;
#else
    ptrdiff_t first = R;
#endif
    ptrdiff_t kb, nk, k;
    const opg_x_t *row;
    for (kb = k0; kb < k1; kb += OPG_COLS_BLOCK) {
        nk = k1 - kb < OPG_COLS_BLOCK ? k1 - kb : OPG_COLS_BLOCK;
        row = (const opg_x_t *)x + kb;
        for (k = 0; k < nk; k++)
            tot[k] = (opg_acc_t)row[k];
        opg_fold_rows(tot, x, kb, nk, 1, first, sr);
#if OPG_ROWS_BLOCK
        /* Two-level summation: each further block of rows into a fresh partial. */
        for (r0 = first; r0 < R; r0 = r1) {
            r1 = R - r0 < OPG_ROWS_BLOCK ? R : r0 + OPG_ROWS_BLOCK;
            row = (const opg_x_t *)(x + r0 * sr) + kb;
            for (k = 0; k < nk; k++)
                part[k] = (opg_acc_t)row[k];
            opg_fold_rows(part, x, kb, nk, r0 + 1, r1, sr);
            for (k = 0; k < nk; k++)
                tot[k] = OPG_COMBINE(tot[k], part[k]);
        }
#endif
        for (k = 0; k < nk; k++)
            out[kb + k] = (opg_out_t)tot[k];
    }
}

static void opg_columns(const char *x, opg_out_t *out, ptrdiff_t K, ptrdiff_t R,
                        ptrdiff_t sr, int nthreads)
{
#if OPG_OPENMP
    if (nthreads > 1 && K >= OPG_MIN_COLS * nthreads) {
        /* Ranges of columns (multiples of 16, one per thread: each thread reads the widest
         * contiguous strip of every row) taken on demand. */
        ptrdiff_t chunk = ((K + nthreads - 1) / nthreads + 15) / 16 * 16;
        ptrdiff_t c, n;
        if (chunk < OPG_MIN_COLS)
            chunk = OPG_MIN_COLS;
        n = (K + chunk - 1) / chunk;
        #pragma omp parallel for num_threads(nthreads) schedule(dynamic)
        for (c = 0; c < n; c++)
            opg_cols(x, out, c * chunk, (c + 1) * chunk < K ? (c + 1) * chunk : K, R, sr);
        return;
    }
#endif
    opg_cols(x, out, 0, K, R, sr);
}

/* ---- the entry point */

static void opg_reduce(const char *x, char *out, ptrdiff_t K, ptrdiff_t R, ptrdiff_t sk,
                       ptrdiff_t sr, int nthreads)
{
    if (K > 1 && sk == (ptrdiff_t)sizeof(opg_x_t) && sr != (ptrdiff_t)sizeof(opg_x_t))
        opg_columns(x, (opg_out_t *)out, K, R, sr, nthreads);
    else
        opg_rows(x, (opg_out_t *)out, K, R, sk, sr, nthreads);
}

static opg_reduce_kernel opg_reduce_table = {OPG_REDUCE_ABI, OPG_OPENMP, opg_reduce};

#endif /* OPGRAPH_C_REDUCE_H */
