/* opgraph-backend-c: the unshared-filter correlation of opgraph_c._conv (CorrMM and its
 * gradients with unshared=True: a K-long filter per output channel and output pixel).
 *
 * Included by _conv.pxd after its im2col/col2im (opg_im2col_<s>, opg_col2im_<s>); the
 * functions are instantiated there for float (_s) and double (_d).
 *
 * The filters w are (G, Og, N, K): group, output channel, output pixel, tap. A call runs
 * a chunk of Bc images at a time so that the filters are read once per chunk, not once
 * per image. The chunk's patches are kept per pixel: x (N, Bc, K) per group, x[n, b] the
 * K taps that output pixel n of image b reads (im2col's columns regrouped). Then, per
 * group and pixel, with w[o] the pixel's filter of output channel o and top[b, o] its
 * output for image b:
 *   forward:        top[b, o] = dot(x[b], w[o]);
 *   filter grad:    w[o] += top[b, o] * x[b], image after image;
 *   input grad:     x[b] = sum over o of top[b, o] * w[o], channel after channel, then
 *                   col2im of each image's columns.
 * Rows of K are contiguous throughout. Threads take images (building or unpacking x) and
 * pixels (the products); each value is computed by one thread in a fixed order, so the
 * result does not depend on the chunk or the number of threads.
 */
#ifndef OPGRAPH_C_UNSHARED_H
#define OPGRAPH_C_UNSHARED_H

#include <omp.h>
#include <string.h>

/* The directions, as opgraph_c._conv numbers them. */
#define OPG_UNSHARED_FORWARD 0
#define OPG_UNSHARED_GRAD_WEIGHTS 1
#define OPG_UNSHARED_GRAD_INPUTS 2

/* One call: the geometry of one group of one image, the counts, the operands. */
typedef struct {
    const opg_conv_geom *g;
    Py_ssize_t G, Og, K, N, B;
    Py_ssize_t istep;  /* elements of one image: C * S */
    Py_ssize_t gstep;  /* elements of one group of one image: Cg * S */
    Py_ssize_t rows;   /* output rows (od * oh) */
    Py_ssize_t tile;   /* images per chunk */
    Py_ssize_t ldbuf;  /* elements of one thread's columns in buf */
    int direction;
    int threads;       /* 1: no parallel region at all (safe in a forked child) */
} opg_unshared_call;

#define OPG_DEFINE_UNSHARED(T, s)                                                        \
/* dst[k * dk + n * dn] <- src[k * sk + n * sn] for k < K, n < N, in tiles that stay in  \
 * L1: image b's columns (K, N) into the chunk's patches x[n, b, :] and back */          \
static void opg_unshared_copy_##s(Py_ssize_t K, Py_ssize_t N, const T *restrict src,      \
                                  Py_ssize_t sk, Py_ssize_t sn, T *restrict dst,          \
                                  Py_ssize_t dk, Py_ssize_t dn)                           \
{                                                                                        \
    for (Py_ssize_t k0 = 0; k0 < K; k0 += 32)                                            \
        for (Py_ssize_t n0 = 0; n0 < N; n0 += 32)                                        \
            for (Py_ssize_t k = k0; k < K && k < k0 + 32; k++)                           \
                for (Py_ssize_t n = n0; n < N && n < n0 + 32; n++)                       \
                    dst[k * dk + n * dn] = src[k * sk + n * sn];                         \
}                                                                                        \
                                                                                         \
/* top[b * ts + o * tos] = dot(x[b], w[o]) for one pixel: four images at a time share   \
 * each load of the filter (four vector sums, added across their lanes at the end, then \
 * the taps past the last whole vector). */                                              \
OPG_CONV_CLONES                                                                          \
static void opg_unshared_dots_##s(Py_ssize_t Og, Py_ssize_t Bc, Py_ssize_t K,            \
                                  const T *restrict x, const T *restrict w,              \
                                  Py_ssize_t ws, T *restrict top, Py_ssize_t ts,         \
                                  Py_ssize_t tos)                                        \
{                                                                                        \
    typedef T V __attribute__((vector_size(OPG_DW_BYTES), aligned(sizeof(T))));         \
    enum { L = OPG_DW_BYTES / sizeof(T), NB = 4 };                                       \
    for (Py_ssize_t o = 0; o < Og; o++) {                                                \
        const T *wo = w + o * ws;                                                        \
        for (Py_ssize_t b0 = 0; b0 < Bc; b0 += NB) {                                     \
            const Py_ssize_t nb = Bc - b0 < NB ? Bc - b0 : NB;                           \
            const T *xb[NB];                                                             \
            V acc[NB];                                                                   \
            T sum[NB];                                                                   \
            Py_ssize_t k = 0;                                                            \
            for (int b = 0; b < NB; b++) { /* a short block repeats its first image */   \
                xb[b] = x + (b0 + (b < nb ? b : 0)) * K;                                 \
                acc[b] = (V){0};                                                         \
            }                                                                            \
            for (; k + L <= K; k += L) {                                                 \
                const V wv = *(const V *)(wo + k);                                       \
                for (int b = 0; b < NB; b++)                                             \
                    acc[b] += wv * *(const V *)(xb[b] + k);                              \
            }                                                                            \
            for (int b = 0; b < NB; b++) {                                               \
                T r = 0;                                                                 \
                for (int l = 0; l < L; l++)                                              \
                    r += acc[b][l];                                                      \
                for (Py_ssize_t j = k; j < K; j++)                                       \
                    r += xb[b][j] * wo[j];                                               \
                sum[b] = r;                                                              \
            }                                                                            \
            for (int b = 0; b < nb; b++)                                                 \
                top[(b0 + b) * ts + o * tos] = sum[b];                                   \
        }                                                                                \
    }                                                                                    \
}                                                                                        \
                                                                                         \
/* w[o] += top[b * ts + o * tos] * x[b] over the images, in order, for one pixel */      \
OPG_CONV_CLONES                                                                          \
static void opg_unshared_accumulate_##s(Py_ssize_t Og, Py_ssize_t Bc, Py_ssize_t K,      \
                                        const T *restrict x, const T *restrict top,      \
                                        Py_ssize_t ts, Py_ssize_t tos, T *restrict dw,   \
                                        Py_ssize_t ws)                                   \
{                                                                                        \
    for (Py_ssize_t o = 0; o < Og; o++) {                                                \
        T *d = dw + o * ws;                                                              \
        for (Py_ssize_t b = 0; b < Bc; b++) {                                            \
            const T *xb = x + b * K, t = top[b * ts + o * tos];                          \
            for (Py_ssize_t k = 0; k < K; k++)                                           \
                d[k] += t * xb[k];                                                       \
        }                                                                                \
    }                                                                                    \
}                                                                                        \
                                                                                         \
/* x[b] = sum over o of top[b * ts + o * tos] * w[o], in order, for one pixel */         \
OPG_CONV_CLONES                                                                          \
static void opg_unshared_spread_##s(Py_ssize_t Og, Py_ssize_t Bc, Py_ssize_t K,          \
                                    const T *restrict w, Py_ssize_t ws,                  \
                                    const T *restrict top, Py_ssize_t ts,                \
                                    Py_ssize_t tos, T *restrict x)                       \
{                                                                                        \
    for (Py_ssize_t b = 0; b < Bc; b++) {                                                \
        T *xb = x + b * K;                                                               \
        for (Py_ssize_t k = 0; k < K; k++)                                               \
            xb[k] = 0;                                                                   \
        for (Py_ssize_t o = 0; o < Og; o++) {                                            \
            const T *wo = w + o * ws, t = top[b * ts + o * tos];                         \
            for (Py_ssize_t k = 0; k < K; k++)                                           \
                xb[k] += t * wo[k];                                                      \
        }                                                                                \
    }                                                                                    \
}                                                                                        \
                                                                                         \
/* Image b (of the chunk at b0): its columns, regrouped into x */                        \
static void opg_unshared_pack_##s(const opg_unshared_call *c, const T *img,              \
                                  Py_ssize_t b0, Py_ssize_t bc, T *x, T *cols,           \
                                  Py_ssize_t b)                                          \
{                                                                                        \
    const T *im = img + (b0 + b) * c->istep;                                             \
    for (Py_ssize_t grp = 0; grp < c->G; grp++) {                                        \
        opg_im2col_##s(c->g, im + grp * c->gstep, cols, 0, c->rows);                     \
        opg_unshared_copy_##s(c->K, c->N, cols, c->N, 1,                                 \
                              x + (grp * c->N * bc + b) * c->K, 1, bc * c->K);           \
    }                                                                                    \
}                                                                                        \
                                                                                         \
/* Image b's input gradient from its patches' gradients in x */                          \
static void opg_unshared_unpack_##s(const opg_unshared_call *c, T *dimg, Py_ssize_t b0,  \
                                    Py_ssize_t bc, const T *x, T *cols, Py_ssize_t b)    \
{                                                                                        \
    T *im = dimg + (b0 + b) * c->istep;                                                  \
    memset(im, 0, c->istep * sizeof(T));                                                 \
    for (Py_ssize_t grp = 0; grp < c->G; grp++) {                                        \
        opg_unshared_copy_##s(c->K, c->N, x + (grp * c->N * bc + b) * c->K, 1,          \
                              bc * c->K, cols, c->N, 1);                                 \
        opg_col2im_##s(c->g, cols, im + grp * c->gstep, 0, c->rows);                     \
    }                                                                                    \
}                                                                                        \
                                                                                         \
/* Pixel i (= grp * N + n) of the chunk at b0, in the call's direction */                \
static void opg_unshared_pixel_##s(const opg_unshared_call *c, const T *kern, T *top,    \
                                   T *dw, Py_ssize_t b0, Py_ssize_t bc, T *x,            \
                                   Py_ssize_t i)                                         \
{                                                                                        \
    const Py_ssize_t N = c->N, K = c->K, Og = c->Og;                                     \
    const Py_ssize_t grp = i / N, n = i - grp * N, ws = N * K, ts = c->G * Og * N;       \
    const Py_ssize_t woff = grp * Og * N * K + n * K;                                    \
    T *xp = x + (grp * N + n) * bc * K;                                                  \
    T *tp = top + b0 * ts + grp * Og * N + n;                                            \
    if (c->direction == OPG_UNSHARED_FORWARD)                                            \
        opg_unshared_dots_##s(Og, bc, K, xp, kern + woff, ws, tp, ts, N);                \
    else if (c->direction == OPG_UNSHARED_GRAD_WEIGHTS)                                  \
        opg_unshared_accumulate_##s(Og, bc, K, xp, tp, ts, N, dw + woff, ws);            \
    else                                                                                 \
        opg_unshared_spread_##s(Og, bc, K, kern + woff, ws, tp, ts, N, xp);              \
}                                                                                        \
                                                                                         \
/* The whole call. img: the images (forward, filter gradient) or the input gradient     \
 * written (input gradient); kern: the filters (forward, input gradient); top: the       \
 * output (forward) or the top gradient; dw: the filter gradient, zeroed here; x: the    \
 * chunk's patches (G * N * tile * K); buf: each thread's columns (ldbuf apart). */      \
static void opg_unshared_run_##s(const opg_unshared_call *c, T *img, const T *kern,      \
                                 T *top, T *dw, T *x, T *buf)                            \
{                                                                                        \
    const Py_ssize_t pixels = c->G * c->N;                                               \
    const int nt = c->threads;                                                           \
    if (c->direction == OPG_UNSHARED_GRAD_WEIGHTS)                                       \
        memset(dw, 0, c->G * c->Og * c->N * c->K * sizeof(T));                           \
    for (Py_ssize_t b0 = 0, bc; b0 < c->B; b0 += bc) {                                   \
        bc = c->B - b0 < c->tile ? c->B - b0 : c->tile;                                  \
        if (nt > 1) {                                                                    \
            Py_ssize_t b, i, chunk = pixels / (16 * nt) > 1 ? pixels / (16 * nt) : 1;    \
            if (c->direction != OPG_UNSHARED_GRAD_INPUTS) {                              \
                _Pragma("omp parallel for num_threads(nt) schedule(dynamic)")            \
                for (b = 0; b < bc; b++)                                                 \
                    opg_unshared_pack_##s(c, img, b0, bc, x,                             \
                                          buf + omp_get_thread_num() * c->ldbuf, b);     \
            }                                                                            \
            _Pragma("omp parallel for num_threads(nt) schedule(dynamic, chunk)")         \
            for (i = 0; i < pixels; i++)                                                 \
                opg_unshared_pixel_##s(c, kern, top, dw, b0, bc, x, i);                  \
            if (c->direction == OPG_UNSHARED_GRAD_INPUTS) {                              \
                _Pragma("omp parallel for num_threads(nt) schedule(dynamic)")            \
                for (b = 0; b < bc; b++)                                                 \
                    opg_unshared_unpack_##s(c, img, b0, bc, x,                           \
                                            buf + omp_get_thread_num() * c->ldbuf, b);   \
            }                                                                            \
        } else {                                                                         \
            const int back = c->direction == OPG_UNSHARED_GRAD_INPUTS;                   \
            for (Py_ssize_t b = 0; b < bc && !back; b++)                                 \
                opg_unshared_pack_##s(c, img, b0, bc, x, buf, b);                        \
            for (Py_ssize_t i = 0; i < pixels; i++)                                      \
                opg_unshared_pixel_##s(c, kern, top, dw, b0, bc, x, i);                  \
            for (Py_ssize_t b = 0; b < bc && back; b++)                                  \
                opg_unshared_unpack_##s(c, img, b0, bc, x, buf, b);                      \
        }                                                                                \
    }                                                                                    \
}

#endif /* OPGRAPH_C_UNSHARED_H */
