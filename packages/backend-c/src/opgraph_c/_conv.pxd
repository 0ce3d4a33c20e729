# cython: language_level=3
"""The C loops of :mod:`opgraph_c._conv` (im2col, col2im, the depthwise forward loop, the
unshared-filter path of ``include/opgraph_c_unshared.h``, and the direct kernels with their
vector sets) and their declarations, for float (``_s``) and double (``_d``).

They are plain C over raw pointers, spliced into the extension's C file; the extension's
docstring explains the layout. All sizes and offsets are in elements.
"""


cdef extern from *:
    """
    #include <string.h>

    /* im2col and col2im build for any x86-64 CPU; the loader picks the AVX2 clone where the
     * CPU has it (the stride-2 copies vectorise there). */
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
    #define OPG_CONV_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
    #else
    #define OPG_CONV_CLONES
    #endif

    /* The depthwise forward loop: bytes per vector (the AVX2 clone runs them as one
     * register), vectors of one output row per step, the most taps it lists per row. */
    #define OPG_DW_BYTES 32
    #define OPG_DW_VECS 4
    #define OPG_DW_TAPS 64
    #if defined(__GNUC__) && !defined(__clang__)
    #define OPG_DW_INLINE_COPY __attribute__((optimize("no-tree-loop-distribute-patterns")))
    #else
    #define OPG_DW_INLINE_COPY
    #endif

    /* The geometry of one group of one image: C input channels (of the group), the input
     * D x H x W, the kernel kd x kh x kw, strides, dilations, the pads before each axis and
     * the output od x oh x ow. A 2-d correlation has D = kd = od = 1. */
    typedef struct {
        Py_ssize_t C, D, H, W;
        Py_ssize_t kd, kh, kw;
        Py_ssize_t sd, sh, sw;
        Py_ssize_t dd, dh, dw;
        Py_ssize_t pd, ph, pw;
        Py_ssize_t od, oh, ow;
    } opg_conv_geom;

    /* [*lo, *hi): the j in [0, n) with 0 <= j * step + off < len (step > 0). */
    static inline void opg_conv_span(Py_ssize_t off, Py_ssize_t step, Py_ssize_t n,
                                     Py_ssize_t len, Py_ssize_t *lo, Py_ssize_t *hi)
    {
        Py_ssize_t a = off >= 0 ? 0 : (step - 1 - off) / step;
        Py_ssize_t b = len - off <= 0 ? 0 : (len - off + step - 1) / step;
        if (a > n) a = n;
        if (b > n) b = n;
        if (b < a) b = a;
        *lo = a;
        *hi = b;
    }

    /* The input row (offset of its first element in the channel plane) that output row r
     * (r = z * oh + i) reads with kernel tap (a, p), or -1 when it lies in the padding. */
    static inline Py_ssize_t opg_conv_row(const opg_conv_geom *g, Py_ssize_t r,
                                          Py_ssize_t a, Py_ssize_t p)
    {
        Py_ssize_t z = r / g->oh, i = r - z * g->oh;
        Py_ssize_t zz = z * g->sd + a * g->dd - g->pd;
        Py_ssize_t y = i * g->sh + p * g->dh - g->ph;
        if (zz < 0 || zz >= g->D || y < 0 || y >= g->H)
            return -1;
        return (zz * g->H + y) * g->W;
    }

    /* The length of the zero-padded rows the depthwise forward loop reads (every tap of
     * every output column inside), or 0 where that loop does not apply: strides other
     * than 1 along the rows, more than OPG_DW_TAPS taps. */
    static inline Py_ssize_t opg_dw_row_len(const opg_conv_geom *g)
    {
        Py_ssize_t need = g->ow + (g->kw - 1) * g->dw;
        if (g->sw != 1 || g->kd * g->kh * g->kw > OPG_DW_TAPS)
            return 0;
        return need > g->pw + g->W ? need : g->pw + g->W;
    }

    #define OPG_DEFINE_CONV(T, s)                                                        \\
    /* cols (K x (r1 - r0) * ow, row-major) <- the patches of output rows [r0, r1) of one \\
     * group's image (g->C channels): im2col. */                                         \\
    OPG_CONV_CLONES                                                                      \\
    static void opg_im2col_##s(const opg_conv_geom *g, const T *restrict img,            \\
                               T *restrict cols, Py_ssize_t r0, Py_ssize_t r1)           \\
    {                                                                                    \\
        const Py_ssize_t ow = g->ow, sw = g->sw, plane = g->D * g->H * g->W;             \\
        T *dst = cols;                                                                   \\
        for (Py_ssize_t c = 0; c < g->C; c++)                                            \\
        for (Py_ssize_t a = 0; a < g->kd; a++)                                           \\
        for (Py_ssize_t p = 0; p < g->kh; p++)                                           \\
        for (Py_ssize_t q = 0; q < g->kw; q++) {                                         \\
            const Py_ssize_t x0 = q * g->dw - g->pw;                                     \\
            Py_ssize_t lo, hi, j;                                                        \\
            opg_conv_span(x0, sw, ow, g->W, &lo, &hi);                                   \\
            for (Py_ssize_t r = r0; r < r1; r++, dst += ow) {                            \\
                const Py_ssize_t row = opg_conv_row(g, r, a, p);                         \\
                if (row < 0) {                                                           \\
                    memset(dst, 0, ow * sizeof(T));                                      \\
                    continue;                                                            \\
                }                                                                        \\
                const T *src = img + c * plane + row;                                    \\
                for (j = 0; j < lo; j++)                                                 \\
                    dst[j] = 0;                                                          \\
                if (sw == 1)                                                             \\
                    memcpy(dst + lo, src + lo + x0, (hi - lo) * sizeof(T));              \\
                else if (sw == 2) /* a constant step: vectorised with shuffles */        \\
                    for (j = lo; j < hi; j++)                                            \\
                        dst[j] = src[2 * j + x0];                                        \\
                else                                                                     \\
                    for (j = lo; j < hi; j++)                                            \\
                        dst[j] = src[j * sw + x0];                                       \\
                for (j = hi; j < ow; j++)                                                \\
                    dst[j] = 0;                                                          \\
            }                                                                            \\
        }                                                                                \\
    }                                                                                    \\
                                                                                         \\
    /* img += the columns of output rows [r0, r1) put back where im2col took them from   \\
     * (col2im: taps that read one pixel add up, in the order of the rows of cols). */   \\
    OPG_CONV_CLONES                                                                      \\
    static void opg_col2im_##s(const opg_conv_geom *g, const T *restrict cols,           \\
                               T *restrict img, Py_ssize_t r0, Py_ssize_t r1)            \\
    {                                                                                    \\
        const Py_ssize_t ow = g->ow, sw = g->sw, plane = g->D * g->H * g->W;             \\
        const T *src = cols;                                                             \\
        for (Py_ssize_t c = 0; c < g->C; c++)                                            \\
        for (Py_ssize_t a = 0; a < g->kd; a++)                                           \\
        for (Py_ssize_t p = 0; p < g->kh; p++)                                           \\
        for (Py_ssize_t q = 0; q < g->kw; q++) {                                         \\
            const Py_ssize_t x0 = q * g->dw - g->pw;                                     \\
            Py_ssize_t lo, hi, j;                                                        \\
            opg_conv_span(x0, sw, ow, g->W, &lo, &hi);                                   \\
            for (Py_ssize_t r = r0; r < r1; r++, src += ow) {                            \\
                const Py_ssize_t row = opg_conv_row(g, r, a, p);                         \\
                if (row < 0)                                                             \\
                    continue;                                                            \\
                T *dst = img + c * plane + row;                                          \\
                if (sw == 1)                                                             \\
                    for (j = lo; j < hi; j++)                                            \\
                        dst[j + x0] += src[j];                                           \\
                else if (sw == 2)                                                        \\
                    for (j = lo; j < hi; j++)                                            \\
                        dst[2 * j + x0] += src[j];                                       \\
                else                                                                     \\
                    for (j = lo; j < hi; j++)                                            \\
                        dst[j * sw + x0] += src[j];                                      \\
            }                                                                            \\
        }                                                                                \\
    }                                                                                    \\
                                                                                         \\
    /* One input channel per group (depthwise). top (N) = the correlation of one input   \\
     * plane with one kernel k (kd x kh x kw).                                           \\
     *                                                                                   \\
     * Unit strides along the rows, at most OPG_DW_TAPS taps: the plane's rows are copied \\
     * into buf amid zeros (opg_dw_row_len elements each, pw zeros first), so that every tap \\
     * of every output column reads inside a row. Each output row then lists its taps whose \\
     * input row lies inside the image (weight, pointer) and sums them in registers,     \\
     * OPG_DW_VECS vectors of columns at a time (an unaligned load and a multiply-add per \\
     * tap and vector); a vector that would pass the row's end ends there instead, which \\
     * recomputes a few columns (stored, never accumulated: harmless). Each value sums its \\
     * taps in the order (a, p, q), from zero, the rows outside the image left out.      \\
     *                                                                                   \\
     * Otherwise (opg_dw_forward_strided_<s>): a scaled, shifted plane copy per tap. */  \\
    static void opg_dw_forward_strided_##s(const opg_conv_geom *g, const T *restrict img, \\
                                           const T *restrict k, T *restrict top)         \\
    {                                                                                    \\
        const Py_ssize_t ow = g->ow, sw = g->sw, rows = g->od * g->oh;                   \\
        memset(top, 0, rows * ow * sizeof(T));                                           \\
        for (Py_ssize_t a = 0; a < g->kd; a++)                                           \\
        for (Py_ssize_t p = 0; p < g->kh; p++)                                           \\
        for (Py_ssize_t q = 0; q < g->kw; q++) {                                         \\
            const T w = k[(a * g->kh + p) * g->kw + q];                                  \\
            const Py_ssize_t x0 = q * g->dw - g->pw;                                     \\
            Py_ssize_t lo, hi, j;                                                        \\
            opg_conv_span(x0, sw, ow, g->W, &lo, &hi);                                   \\
            for (Py_ssize_t r = 0; r < rows; r++) {                                      \\
                const Py_ssize_t row = opg_conv_row(g, r, a, p);                         \\
                if (row < 0)                                                             \\
                    continue;                                                            \\
                const T *src = img + row;                                                \\
                T *dst = top + r * ow;                                                   \\
                for (j = lo; j < hi; j++)                                                \\
                    dst[j] += w * src[j * sw + x0];                                      \\
            }                                                                            \\
        }                                                                                \\
    }                                                                                    \\
                                                                                         \\
    /* buf <- the D * H rows of the plane img, each amid zeros: pw before, Wp in all. The \\
     * rows are short: gcc must not turn these loops into memcpy and memset calls. */    \\
    OPG_DW_INLINE_COPY                                                                   \\
    static void opg_dw_pad_rows_##s(const opg_conv_geom *g, const T *restrict img,       \\
                                    T *restrict buf, Py_ssize_t Wp, Py_ssize_t W)        \\
    {                                                                                    \\
        const Py_ssize_t pw = g->pw;                                                     \\
        for (Py_ssize_t y = 0; y < g->D * g->H; y++) {                                   \\
            T *restrict row = buf + y * Wp;                                              \\
            const T *restrict src = img + y * g->W;                                      \\
            Py_ssize_t j;                                                                \\
            for (j = 0; j < pw; j++)                                                     \\
                row[j] = 0;                                                              \\
            for (j = 0; j < W; j++)                                                      \\
                row[pw + j] = src[j];                                                    \\
            for (j = pw + W; j < Wp; j++)                                                \\
                row[j] = 0;                                                              \\
        }                                                                                \\
    }                                                                                    \\
                                                                                         \\
    OPG_CONV_CLONES                                                                      \\
    static void opg_dw_forward_##s(const opg_conv_geom *g, const T *restrict img,        \\
                                   const T *restrict k, T *restrict top, T *restrict buf) \\
    {                                                                                    \\
        typedef T V __attribute__((vector_size(OPG_DW_BYTES), aligned(sizeof(T))));      \\
        enum { L = OPG_DW_BYTES / sizeof(T), STEP = OPG_DW_VECS * L };                   \\
        const Py_ssize_t ow = g->ow, kw = g->kw, rows = g->od * g->oh;                   \\
        const Py_ssize_t Wp = opg_dw_row_len(g), pw = g->pw;                             \\
        const Py_ssize_t W = g->W; /* Wp >= pw + W (opg_dw_row_len) */                   \\
        const T *sp[OPG_DW_TAPS];                                                        \\
        T wt[OPG_DW_TAPS];                                                               \\
        Py_ssize_t n, t, j;                                                              \\
        if (Wp == 0 || buf == NULL) {                                                    \\
            opg_dw_forward_strided_##s(g, img, k, top);                                  \\
            return;                                                                      \\
        }                                                                                \\
        opg_dw_pad_rows_##s(g, img, buf, Wp, W);                                         \\
        for (Py_ssize_t r = 0, z = 0, i = 0; r < rows; r++) {  /* r = z * oh + i */      \\
            T *restrict dst = top + r * ow;                                              \\
            n = 0;                                                                       \\
            for (Py_ssize_t a = 0; a < g->kd; a++) {                                     \\
                const Py_ssize_t zz = z * g->sd + a * g->dd - g->pd;                     \\
                if (zz < 0 || zz >= g->D)                                                \\
                    continue;                                                            \\
                for (Py_ssize_t p = 0; p < g->kh; p++) {                                 \\
                    const Py_ssize_t y = i * g->sh + p * g->dh - g->ph;                  \\
                    if (y < 0 || y >= g->H)                                              \\
                        continue;                                                        \\
                    for (Py_ssize_t q = 0; q < kw; q++, n++) {                           \\
                        wt[n] = k[(a * g->kh + p) * kw + q];                             \\
                        sp[n] = buf + (zz * g->H + y) * Wp + q * g->dw;                  \\
                    }                                                                    \\
                }                                                                        \\
            }                                                                            \\
            if (++i == g->oh) {                                                          \\
                i = 0;                                                                   \\
                z++;                                                                     \\
            }                                                                            \\
            for (j = 0; j < ow && ow >= L; j += STEP) {                                  \\
                V acc[OPG_DW_VECS];                                                      \\
                Py_ssize_t at[OPG_DW_VECS];                                              \\
                for (int v = 0; v < OPG_DW_VECS; v++) {                                  \\
                    at[v] = j + v * L + L <= ow ? j + v * L : ow - L;                    \\
                    acc[v] = (V){0};                                                     \\
                }                                                                        \\
                for (t = 0; t < n; t++)                                                  \\
                    for (int v = 0; v < OPG_DW_VECS; v++)                                \\
                        acc[v] += wt[t] * *(const V *)(sp[t] + at[v]);                   \\
                for (int v = 0; v < OPG_DW_VECS; v++)                                    \\
                    *(V *)(dst + at[v]) = acc[v];                                        \\
            }                                                                            \\
            for (; j < ow; j++) {  /* rows shorter than a vector */                      \\
                T acc = 0;                                                               \\
                for (t = 0; t < n; t++)                                                  \\
                    acc += wt[t] * sp[t][j];                                             \\
                dst[j] = acc;                                                            \\
            }                                                                            \\
        }                                                                                \\
    }                                                                                    \\

    OPG_DEFINE_CONV(double, d)
    OPG_DEFINE_CONV(float, s)

    /* The unshared-filter path (include/opgraph_c_unshared.h), on im2col/col2im above. */
    #include "opgraph_c_unshared.h"
    OPG_DEFINE_UNSHARED(double, d)
    OPG_DEFINE_UNSHARED(float, s)
    """
    ctypedef struct opg_conv_geom:
        Py_ssize_t C, D, H, W
        Py_ssize_t kd, kh, kw
        Py_ssize_t sd, sh, sw
        Py_ssize_t dd, dh, dw
        Py_ssize_t pd, ph, pw
        Py_ssize_t od, oh, ow

    void opg_im2col_s(const opg_conv_geom* g, const float* img, float* cols, Py_ssize_t r0,
                      Py_ssize_t r1) noexcept nogil
    void opg_im2col_d(const opg_conv_geom* g, const double* img, double* cols, Py_ssize_t r0,
                      Py_ssize_t r1) noexcept nogil
    void opg_col2im_s(const opg_conv_geom* g, const float* cols, float* img, Py_ssize_t r0,
                      Py_ssize_t r1) noexcept nogil
    void opg_col2im_d(const opg_conv_geom* g, const double* cols, double* img, Py_ssize_t r0,
                      Py_ssize_t r1) noexcept nogil
    Py_ssize_t opg_dw_row_len(const opg_conv_geom* g) noexcept nogil
    void opg_dw_forward_s(const opg_conv_geom* g, const float* img, const float* k,
                          float* top, float* buf) noexcept nogil
    void opg_dw_forward_d(const opg_conv_geom* g, const double* img, const double* k,
                          double* top, double* buf) noexcept nogil
    ctypedef struct opg_unshared_call:
        const opg_conv_geom* g
        Py_ssize_t G, Og, K, N, B, istep, gstep, rows, tile, ldbuf
        int direction, threads
    void opg_unshared_run_s(const opg_unshared_call* c, float* img, const float* kern,
                            float* top, float* dw, float* x, float* buf) noexcept nogil
    void opg_unshared_run_d(const opg_unshared_call* c, double* img, const double* kern,
                            double* top, double* dw, double* x, double* buf) noexcept nogil

cdef extern from *:
    """
    /* The direct ("implicit GEMM") kernels: a correlation with unit strides computed from
     * a zero-padded copy of the image, without columns. With the padded planes
     * Dp x Hp x Wp flattened, output pixel (z, i, j) sits at n = (z * Hp + i) * Wp + j and
     * kernel tap (c, a, p, q) reads the padded image at off[k] + n, where
     * off[k] = c * plane + (a * dd * Hp + p * dh) * Wp + q * dw: each tap is the same image
     * shifted, so a block of consecutive n is one vector load per tap (the n with j >= ow
     * are computed and dropped). The weight gradient reads the same taps one pixel at a
     * time; the input gradient adds each tap's vector back at the same place. */
    typedef struct {
        Py_ssize_t C, D, H, W;  /* the image of one group: C planes D x H x W */
        Py_ssize_t pd, ph, pw;  /* zeros before each axis */
        Py_ssize_t Dp, Hp, Wp;  /* the padded planes */
        Py_ssize_t od, oh, ow;  /* the output planes */
        Py_ssize_t O;           /* output channels (filters of the weight gradient) */
        Py_ssize_t K, Kp;       /* C * taps; K rounded up to the weight gradient's tile */
        Py_ssize_t Nf, Nc;      /* flat outputs ((od-1) * Hp + oh-1) * Wp + ow; rounded up */
        Py_ssize_t ldt;         /* O rounded up to the output-channel tile */
        Py_ssize_t xlen;        /* elements of the padded copy (C * plane, zeros after) */
    } opg_ig;

    /* off[k] for the taps (c, a, p, q) of kernel kd x kh x kw dilated by dd, dh, dw; the
     * Kp - K entries past the end read the image's first element (sums then dropped). */
    static void opg_ig_offsets(const opg_ig *q, Py_ssize_t kd, Py_ssize_t kh,
                               Py_ssize_t kw, Py_ssize_t dd, Py_ssize_t dh, Py_ssize_t dw,
                               Py_ssize_t *off)
    {
        Py_ssize_t k = 0, plane = q->Dp * q->Hp * q->Wp;
        for (Py_ssize_t c = 0; c < q->C; c++)
        for (Py_ssize_t a = 0; a < kd; a++)
        for (Py_ssize_t p = 0; p < kh; p++)
        for (Py_ssize_t r = 0; r < kw; r++)
            off[k++] = c * plane + (a * dd * q->Hp + p * dh) * q->Wp + r * dw;
        for (; k < q->Kp; k++)
            off[k] = 0;
    }

    /* One vector kernel set: T elements in vectors of BYTES bytes; the forward tile is OB
     * output channels x NV vectors of pixels, the weight gradient's KB taps x NVO vectors of
     * filters, the input gradient's KI taps x NV vectors of pixels. ATTR: the target the
     * functions are compiled for. */
    #define OPG_DEFINE_IG(T, s, isa, ATTR, BYTES, OB, NV, KB, NVO, KI)                   \\
    typedef T opg_v_##s##_##isa __attribute__((vector_size(BYTES), aligned(sizeof(T)))); \\
                                                                                         \\
    /* scr (ldt x Nc) <- the flat outputs of one group: x the padded copy, wpk the       \\
     * filters packed by opg_ig_pack (ldt / OB blocks of K x OB). Bands of pixels keep   \\
     * the part of x that a band reads in the cache while each filter block passes. */   \\
    ATTR static void opg_ig_fwd_##s##_##isa(const opg_ig *q,                             \\
                                            const Py_ssize_t *restrict off,              \\
                                            const T *restrict x, const T *restrict wpk,  \\
                                            T *restrict scr)                             \\
    {                                                                                    \\
        typedef opg_v_##s##_##isa V;                                                     \\
        enum { L = BYTES / sizeof(T), STEP = NV * L, BAND = 8 * STEP };                  \\
        const Py_ssize_t K = q->K, Nc = q->Nc, nob = q->ldt / OB;                        \\
        for (Py_ssize_t b0 = 0; b0 < Nc; b0 += BAND) {                                   \\
            const Py_ssize_t b1 = b0 + BAND < Nc ? b0 + BAND : Nc;                       \\
            for (Py_ssize_t ob = 0; ob < nob; ob++) {                                    \\
                const T *w = wpk + ob * K * OB;                                          \\
                for (Py_ssize_t n0 = b0; n0 < b1; n0 += STEP) {                          \\
                    V acc[OB][NV];                                                       \\
                    for (int o = 0; o < OB; o++)                                         \\
                        for (int v = 0; v < NV; v++)                                     \\
                            acc[o][v] = (V){0};                                          \\
                    for (Py_ssize_t k = 0; k < K; k++) {                                 \\
                        const T *xk = x + off[k] + n0, *wk = w + k * OB;                 \\
                        V xv[NV];                                                        \\
                        for (int v = 0; v < NV; v++)                                     \\
                            xv[v] = *(const V *)(xk + v * L);                            \\
                        for (int o = 0; o < OB; o++)                                     \\
                            for (int v = 0; v < NV; v++)                                 \\
                                acc[o][v] += wk[o] * xv[v];                              \\
                    }                                                                    \\
                    for (int o = 0; o < OB; o++)                                         \\
                        for (int v = 0; v < NV; v++)                                     \\
                            *(V *)(scr + (ob * OB + o) * Nc + n0 + v * L) = acc[o][v];   \\
                }                                                                        \\
            }                                                                            \\
        }                                                                                \\
    }                                                                                    \\
                                                                                         \\
    /* acc (Kp x ldt) += the weight gradient of one group of one image, transposed: x the\\
     * padded image, tT its top gradient transposed (N x ldt, zeros past O). */          \\
    ATTR static void opg_ig_gw_##s##_##isa(const opg_ig *q,                              \\
                                           const Py_ssize_t *restrict off,               \\
                                           const T *restrict x, const T *restrict tT,    \\
                                           T *restrict acc)                              \\
    {                                                                                    \\
        typedef opg_v_##s##_##isa V;                                                     \\
        enum { L = BYTES / sizeof(T), OV = NVO * L };                                    \\
        const Py_ssize_t ldt = q->ldt, ow = q->ow, rows = q->od * q->oh;                 \\
        for (Py_ssize_t ob = 0; ob < ldt; ob += OV)                                      \\
        for (Py_ssize_t k0 = 0; k0 < q->Kp; k0 += KB) {                                  \\
            const Py_ssize_t *ok = off + k0;                                             \\
            V a[KB][NVO];                                                                \\
            for (int k = 0; k < KB; k++)                                                 \\
                for (int v = 0; v < NVO; v++)                                            \\
                    a[k][v] = *(const V *)(acc + (k0 + k) * ldt + ob + v * L);           \\
            for (Py_ssize_t r = 0; r < rows; r++) {                                      \\
                const Py_ssize_t z = r / q->oh, i = r - z * q->oh;                       \\
                const T *xr = x + (z * q->Hp + i) * q->Wp, *t = tT + r * ow * ldt + ob;  \\
                for (Py_ssize_t j = 0; j < ow; j++, t += ldt) {                          \\
                    V tv[NVO];                                                           \\
                    for (int v = 0; v < NVO; v++)                                        \\
                        tv[v] = *(const V *)(t + v * L);                                 \\
                    for (int k = 0; k < KB; k++) {                                       \\
                        const T xs = xr[ok[k] + j];                                      \\
                        for (int v = 0; v < NVO; v++)                                    \\
                            a[k][v] += xs * tv[v];                                       \\
                    }                                                                    \\
                }                                                                        \\
            }                                                                            \\
            for (int k = 0; k < KB; k++)                                                 \\
                for (int v = 0; v < NVO; v++)                                            \\
                    *(V *)(acc + (k0 + k) * ldt + ob + v * L) = a[k][v];                 \\
        }                                                                                \\
    }                                                                                    \\
                                                                                         \\
    /* x (padded, xlen) += the input gradient of one group of one image: tF its top      \\
     * gradient in flat form (O x Nc, zeros past each row), wpk the filters packed by    \\
     * opg_ig_pack_gi (Kp / KI blocks of O x KI). A tile's sums over the filters go      \\
     * straight to the padded image, tap after tap (the columns are never stored). */    \\
    ATTR static void opg_ig_gi_##s##_##isa(const opg_ig *q,                              \\
                                           const Py_ssize_t *restrict off,               \\
                                           const T *restrict tF, const T *restrict wpk,  \\
                                           T *restrict x)                                \\
    {                                                                                    \\
        typedef opg_v_##s##_##isa V;                                                     \\
        enum { L = BYTES / sizeof(T), STEP = NV * L };                                   \\
        const Py_ssize_t O = q->O, Nc = q->Nc;                                           \\
        for (Py_ssize_t n0 = 0; n0 < Nc; n0 += STEP)                                     \\
        for (Py_ssize_t k0 = 0; k0 < q->Kp; k0 += KI) {                                  \\
            const T *w = wpk + k0 * O;                                                   \\
            V acc[KI][NV];                                                               \\
            for (int k = 0; k < KI; k++)                                                 \\
                for (int v = 0; v < NV; v++)                                             \\
                    acc[k][v] = (V){0};                                                  \\
            for (Py_ssize_t o = 0; o < O; o++) {                                         \\
                const T *t = tF + o * Nc + n0, *wo = w + o * KI;                         \\
                V tv[NV];                                                                \\
                for (int v = 0; v < NV; v++)                                             \\
                    tv[v] = *(const V *)(t + v * L);                                     \\
                for (int k = 0; k < KI; k++)                                             \\
                    for (int v = 0; v < NV; v++)                                         \\
                        acc[k][v] += wo[k] * tv[v];                                      \\
            }                                                                            \\
            for (int k = 0; k < KI && k0 + k < q->K; k++) {                              \\
                T *xk = x + off[k0 + k] + n0;                                            \\
                for (int v = 0; v < NV; v++)                                             \\
                    *(V *)(xk + v * L) += acc[k][v];                                     \\
            }                                                                            \\
        }                                                                                \\
    }

    /* The loops around the vector kernels (any target): the padded copy, the scatter of the
     * flat outputs, the transposed top gradient and the packed filters. */
    #define OPG_DEFINE_IG_LOOPS(T, s)                                                    \\
                                                                                         \\
    /* x (xlen) <- the C planes of src (D x H x W) amid zeros (q's pads). */             \\
    static void opg_ig_pad_##s(const opg_ig *q, const T *restrict src, T *restrict x)    \\
    {                                                                                    \\
        const Py_ssize_t W = q->W, Wp = q->Wp, pw = q->pw, tail = Wp - pw - W;           \\
        T *row = x;                                                                      \\
        for (Py_ssize_t c = 0; c < q->C; c++)                                            \\
        for (Py_ssize_t z = -q->pd; z < q->Dp - q->pd; z++)                              \\
        for (Py_ssize_t i = -q->ph; i < q->Hp - q->ph; i++, row += Wp) {                 \\
            if (z < 0 || z >= q->D || i < 0 || i >= q->H) {                              \\
                memset(row, 0, Wp * sizeof(T));                                          \\
                continue;                                                                \\
            }                                                                            \\
            memset(row, 0, pw * sizeof(T));                                              \\
            memcpy(row + pw, src + ((c * q->D + z) * q->H + i) * W, W * sizeof(T));      \\
            memset(row + pw + W, 0, tail * sizeof(T));                                   \\
        }                                                                                \\
        memset(row, 0, (q->xlen - (row - x)) * sizeof(T));                               \\
    }                                                                                    \\
                                                                                         \\
    /* tF (O x Nc) <- top (O planes od x oh x ow) in flat form, zeros elsewhere. */      \\
    static void opg_ig_flat_##s(const opg_ig *q, const T *restrict top, T *restrict tF)  \\
    {                                                                                    \\
        memset(tF, 0, q->O * q->Nc * sizeof(T));                                         \\
        for (Py_ssize_t o = 0; o < q->O; o++)                                            \\
        for (Py_ssize_t z = 0; z < q->od; z++)                                           \\
        for (Py_ssize_t i = 0; i < q->oh; i++, top += q->ow)                             \\
            memcpy(tF + o * q->Nc + (z * q->Hp + i) * q->Wp, top, q->ow * sizeof(T));    \\
    }                                                                                    \\
                                                                                         \\
    /* dst (C planes D x H x W) <- the image inside the padded x (opg_ig_pad undone). */ \\
    static void opg_ig_crop_##s(const opg_ig *q, const T *restrict x, T *restrict dst)   \\
    {                                                                                    \\
        const Py_ssize_t plane = q->Dp * q->Hp * q->Wp;                                  \\
        for (Py_ssize_t c = 0; c < q->C; c++)                                            \\
        for (Py_ssize_t z = 0; z < q->D; z++)                                            \\
        for (Py_ssize_t i = 0; i < q->H; i++, dst += q->W) {                             \\
            const T *row = x + c * plane + ((z + q->pd) * q->Hp + i + q->ph) * q->Wp;    \\
            memcpy(dst, row + q->pw, q->W * sizeof(T));                                  \\
        }                                                                                \\
    }                                                                                    \\
                                                                                         \\
    /* out (O planes od x oh x ow) <- the valid part of the flat outputs scr. */         \\
    static void opg_ig_scatter_##s(const opg_ig *q, const T *restrict scr,               \\
                                   T *restrict out)                                      \\
    {                                                                                    \\
        for (Py_ssize_t o = 0; o < q->O; o++)                                            \\
        for (Py_ssize_t z = 0; z < q->od; z++)                                           \\
        for (Py_ssize_t i = 0; i < q->oh; i++, out += q->ow)                             \\
            memcpy(out, scr + o * q->Nc + (z * q->Hp + i) * q->Wp, q->ow * sizeof(T));   \\
    }                                                                                    \\
                                                                                         \\
    /* tT (N x ldt) <- top (O x N) transposed, zeros in the columns O .. ldt - 1. */     \\
    static void opg_ig_transpose_##s(const opg_ig *q, const T *restrict top,             \\
                                     T *restrict tT)                                     \\
    {                                                                                    \\
        const Py_ssize_t N = q->od * q->oh * q->ow, ldt = q->ldt;                        \\
        for (Py_ssize_t n0 = 0; n0 < N; n0 += 32) {                                      \\
            const Py_ssize_t n1 = n0 + 32 < N ? n0 + 32 : N;                             \\
            for (Py_ssize_t o = 0; o < q->O; o++)                                        \\
                for (Py_ssize_t n = n0; n < n1; n++)                                     \\
                    tT[n * ldt + o] = top[o * N + n];                                    \\
            for (Py_ssize_t n = n0; n < n1; n++)                                         \\
                for (Py_ssize_t o = q->O; o < ldt; o++)                                  \\
                    tT[n * ldt + o] = 0;                                                 \\
        }                                                                                \\
    }                                                                                    \\
                                                                                         \\
    /* dw (O x K) += acc (Kp x ldt) transposed. */                                       \\
    static void opg_ig_gw_add_##s(const opg_ig *q, const T *restrict acc,                \\
                                  T *restrict dw)                                        \\
    {                                                                                    \\
        for (Py_ssize_t o = 0; o < q->O; o++)                                            \\
            for (Py_ssize_t k = 0; k < q->K; k++)                                        \\
                dw[o * q->K + k] += acc[k * q->ldt + o];                                 \\
    }                                                                                    \\
                                                                                         \\
    /* wpk (ldt / ob blocks of K x ob, zeros for the channels past O) <- one group's     \\
     * filters w (O x K), for opg_ig_fwd. */                                             \\
    static void opg_ig_pack_##s(const opg_ig *q, Py_ssize_t ob, const T *restrict w,     \\
                                T *restrict wpk)                                         \\
    {                                                                                    \\
        const Py_ssize_t K = q->K;                                                       \\
        for (Py_ssize_t o = 0; o < q->ldt; o++) {                                        \\
            T *dst = wpk + (o / ob) * K * ob + o % ob;                                   \\
            for (Py_ssize_t k = 0; k < K; k++)                                           \\
                dst[k * ob] = o < q->O ? w[o * K + k] : 0;                               \\
        }                                                                                \\
    }                                                                                    \\
                                                                                         \\
    /* wpk (Kp / ki blocks of O x ki, zeros for the taps past K) <- one group's filters w\\
     * (O x K), for opg_ig_gi. */                                                        \\
    static void opg_ig_pack_gi_##s(const opg_ig *q, Py_ssize_t ki, const T *restrict w,  \\
                                   T *restrict wpk)                                      \\
    {                                                                                    \\
        for (Py_ssize_t k = 0; k < q->Kp; k++)                                           \\
            for (Py_ssize_t o = 0; o < q->O; o++)                                        \\
                wpk[(k / ki) * q->O * ki + o * ki + k % ki] =                            \\
                    k < q->K ? w[o * q->K + k] : 0;                                      \\
    }

    /* The vector kernels of one element type for each kernel set: 2 AVX-512 (x86-64 with
     * GCC or clang), 1 AVX2 and FMA, 0 plain vectors (any target: SSE2, NEON). The tiles
     * (bytes per vector, OB, NV, KB, NVO, KI) are also opg_ig_tiles'. */
    #define OPG_IG_TILES_2 64, 8, 3, 12, 2, 8
    #define OPG_IG_TILES_1 32, 4, 3, 6, 2, 4
    #define OPG_IG_TILES_0 16, 4, 2, 4, 2, 4
    #define OPG_DEFINE_IG_(...) OPG_DEFINE_IG(__VA_ARGS__)
    #if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
    #define OPG_IG_X86 1
    #define OPG_IG_AVX512 __attribute__((target("avx512f,avx2,fma")))
    #define OPG_IG_AVX2 __attribute__((target("avx2,fma")))
    OPG_DEFINE_IG_(float, s, 2, OPG_IG_AVX512, OPG_IG_TILES_2)
    OPG_DEFINE_IG_(double, d, 2, OPG_IG_AVX512, OPG_IG_TILES_2)
    OPG_DEFINE_IG_(float, s, 1, OPG_IG_AVX2, OPG_IG_TILES_1)
    OPG_DEFINE_IG_(double, d, 1, OPG_IG_AVX2, OPG_IG_TILES_1)
    #endif
    OPG_DEFINE_IG_(float, s, 0, , OPG_IG_TILES_0)
    OPG_DEFINE_IG_(double, d, 0, , OPG_IG_TILES_0)
    OPG_DEFINE_IG_LOOPS(float, s)
    OPG_DEFINE_IG_LOOPS(double, d)

    /* The kernel set the calls use (opg_ig_select). */
    static int opg_ig_level = 0;

    /* Use the best kernel set this CPU runs, at most want (< 0: the best); returns it. */
    static int opg_ig_select(int want)
    {
        int best = 0;
    #ifdef OPG_IG_X86
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
            best = __builtin_cpu_supports("avx512f") ? 2 : 1;
    #endif
        opg_ig_level = want >= 0 && want < best ? want : best;
        return opg_ig_level;
    }

    /* The current kernel set's tiles for elements of itemsize bytes: output channels per
     * forward tile (ob), pixels per forward and input-gradient tile (step), taps per
     * weight-gradient tile (kb), filters per weight-gradient tile (ov), taps per
     * input-gradient tile (ki). */
    static void opg_ig_tiles(Py_ssize_t itemsize, Py_ssize_t *ob, Py_ssize_t *step,
                             Py_ssize_t *kb, Py_ssize_t *ov, Py_ssize_t *ki)
    {
        static const Py_ssize_t t[3][6] = {
            {OPG_IG_TILES_0}, {OPG_IG_TILES_1}, {OPG_IG_TILES_2}
        };
        const Py_ssize_t *r = t[opg_ig_level], lanes = r[0] / itemsize;
        *ob = r[1];
        *step = r[2] * lanes;
        *kb = r[3];
        *ov = r[4] * lanes;
        *ki = r[5];
    }

    #ifdef OPG_IG_X86
    #define OPG_IG_CALL(name, s, ...)                                                    \\
        do {                                                                             \\
            if (opg_ig_level == 2)                                                       \\
                name##_##s##_2(__VA_ARGS__);                                             \\
            else if (opg_ig_level == 1)                                                  \\
                name##_##s##_1(__VA_ARGS__);                                             \\
            else                                                                         \\
                name##_##s##_0(__VA_ARGS__);                                             \\
        } while (0)
    #else
    #define OPG_IG_CALL(name, s, ...) name##_##s##_0(__VA_ARGS__)
    #endif

    static void opg_ig_fwd_s(const opg_ig *q, const Py_ssize_t *off, const float *x,
                             const float *wpk, float *scr)
    {
        OPG_IG_CALL(opg_ig_fwd, s, q, off, x, wpk, scr);
    }

    static void opg_ig_fwd_d(const opg_ig *q, const Py_ssize_t *off, const double *x,
                             const double *wpk, double *scr)
    {
        OPG_IG_CALL(opg_ig_fwd, d, q, off, x, wpk, scr);
    }

    static void opg_ig_gw_s(const opg_ig *q, const Py_ssize_t *off, const float *x,
                            const float *tT, float *acc)
    {
        OPG_IG_CALL(opg_ig_gw, s, q, off, x, tT, acc);
    }

    static void opg_ig_gw_d(const opg_ig *q, const Py_ssize_t *off, const double *x,
                            const double *tT, double *acc)
    {
        OPG_IG_CALL(opg_ig_gw, d, q, off, x, tT, acc);
    }

    static void opg_ig_gi_s(const opg_ig *q, const Py_ssize_t *off, const float *tF,
                            const float *wpk, float *x)
    {
        OPG_IG_CALL(opg_ig_gi, s, q, off, tF, wpk, x);
    }

    static void opg_ig_gi_d(const opg_ig *q, const Py_ssize_t *off, const double *tF,
                            const double *wpk, double *x)
    {
        OPG_IG_CALL(opg_ig_gi, d, q, off, tF, wpk, x);
    }

    /* Elements of n of itemsize bytes rounded up to 64 bytes (where a buffer's next part
     * starts). */
    static inline Py_ssize_t opg_ig_round(Py_ssize_t n, Py_ssize_t itemsize)
    {
        return (n * itemsize + 63) / 64 * 64 / itemsize;
    }

    /* One group of one image, direct; buf: a thread's buffer (the padded copy, then the flat
     * outputs or the top gradient in flat form or transposed, and the transposed sums). */
    #define OPG_DEFINE_IG_GROUP(T, s)                                                    \\
                                                                                         \\
    /* top (q->O planes) <- the correlation of img (q->C planes), filters wpk. */        \\
    static void opg_direct_forward_##s(const opg_ig *q, const Py_ssize_t *off,           \\
                                       const T *img, const T *wpk, T *top, T *buf)       \\
    {                                                                                    \\
        T *scr = buf + opg_ig_round(q->xlen, sizeof(T));                                 \\
        opg_ig_pad_##s(q, img, buf);                                                     \\
        opg_ig_fwd_##s(q, off, buf, wpk, scr);                                           \\
        opg_ig_scatter_##s(q, scr, top);                                                 \\
    }                                                                                    \\
                                                                                         \\
    /* dimg (q->C planes) <- the input gradient of top (q->O planes). */                 \\
    static void opg_direct_grad_inputs_##s(const opg_ig *q, const Py_ssize_t *off,       \\
                                           const T *top, const T *wpk, T *dimg, T *buf)  \\
    {                                                                                    \\
        T *tF = buf + opg_ig_round(q->xlen, sizeof(T));                                  \\
        memset(buf, 0, q->xlen * sizeof(T));                                             \\
        opg_ig_flat_##s(q, top, tF);                                                     \\
        opg_ig_gi_##s(q, off, tF, wpk, buf);                                             \\
        opg_ig_crop_##s(q, buf, dimg);                                                   \\
    }                                                                                    \\
                                                                                         \\
    /* dw (q->O x q->K) += the weight gradient of img (q->C planes), top (q->O). */      \\
    static void opg_direct_grad_weights_##s(const opg_ig *q, const Py_ssize_t *off,      \\
                                            const T *img, const T *top, T *dw, T *buf)   \\
    {                                                                                    \\
        const Py_ssize_t N = q->od * q->oh * q->ow;                                      \\
        T *tT = buf + opg_ig_round(q->xlen, sizeof(T));                                  \\
        T *acc = tT + opg_ig_round(N * q->ldt, sizeof(T));                               \\
        memset(acc, 0, q->Kp * q->ldt * sizeof(T));                                      \\
        opg_ig_pad_##s(q, img, buf);                                                     \\
        opg_ig_transpose_##s(q, top, tT);                                                \\
        opg_ig_gw_##s(q, off, buf, tT, acc);                                             \\
        opg_ig_gw_add_##s(q, acc, dw);                                                   \\
    }                                                                                    \\
                                                                                         \\
    /* wpk <- one group's filters w (q->O x q->K) packed for the forward kernel (gi 0:   \\
     * blk output channels a block) or the input gradient's (gi 1: blk taps a block). */ \\
    static void opg_direct_pack_##s(const opg_ig *q, int gi, Py_ssize_t blk, const T *w, \\
                                    T *wpk)                                              \\
    {                                                                                    \\
        if (gi)                                                                          \\
            opg_ig_pack_gi_##s(q, blk, w, wpk);                                          \\
        else                                                                             \\
            opg_ig_pack_##s(q, blk, w, wpk);                                             \\
    }

    /* The group functions of both element types. */
    OPG_DEFINE_IG_GROUP(float, s)
    OPG_DEFINE_IG_GROUP(double, d)

    """
    ctypedef struct opg_ig:
        Py_ssize_t C, D, H, W
        Py_ssize_t pd, ph, pw
        Py_ssize_t Dp, Hp, Wp
        Py_ssize_t od, oh, ow
        Py_ssize_t O
        Py_ssize_t K, Kp
        Py_ssize_t Nf, Nc
        Py_ssize_t ldt
        Py_ssize_t xlen

    int opg_ig_level  # the vector set in use (opg_ig_select)
    int opg_ig_select(int want) noexcept nogil
    void opg_ig_tiles(Py_ssize_t itemsize, Py_ssize_t* ob, Py_ssize_t* step, Py_ssize_t* kb,
                      Py_ssize_t* ov, Py_ssize_t* ki) noexcept nogil
    Py_ssize_t opg_ig_round(Py_ssize_t n, Py_ssize_t itemsize) noexcept nogil
    void opg_ig_offsets(const opg_ig* q, Py_ssize_t kd, Py_ssize_t kh, Py_ssize_t kw,
                        Py_ssize_t dd, Py_ssize_t dh, Py_ssize_t dw,
                        Py_ssize_t* off) noexcept nogil
    void opg_direct_forward_s(const opg_ig* q, const Py_ssize_t* off, const float* img,
                              const float* wpk, float* top, float* buf) noexcept nogil
    void opg_direct_forward_d(const opg_ig* q, const Py_ssize_t* off, const double* img,
                              const double* wpk, double* top, double* buf) noexcept nogil
    void opg_direct_grad_inputs_s(const opg_ig* q, const Py_ssize_t* off, const float* top,
                                  const float* wpk, float* dimg, float* buf) noexcept nogil
    void opg_direct_grad_inputs_d(const opg_ig* q, const Py_ssize_t* off, const double* top,
                                  const double* wpk, double* dimg,
                                  double* buf) noexcept nogil
    void opg_direct_grad_weights_s(const opg_ig* q, const Py_ssize_t* off, const float* img,
                                   const float* top, float* dw, float* buf) noexcept nogil
    void opg_direct_grad_weights_d(const opg_ig* q, const Py_ssize_t* off,
                                   const double* img, const double* top, double* dw,
                                   double* buf) noexcept nogil
    void opg_direct_pack_s(const opg_ig* q, int gi, Py_ssize_t blk, const float* w,
                           float* wpk) noexcept nogil
    void opg_direct_pack_d(const opg_ig* q, int gi, Py_ssize_t blk, const double* w,
                           double* wpk) noexcept nogil
