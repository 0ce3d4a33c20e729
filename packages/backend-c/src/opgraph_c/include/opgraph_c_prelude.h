/* opgraph-backend-c: C helpers shared by the precompiled driver and every generated kernel.
 *
 * - fixed-width C types named after NumPy dtypes (opg_float64, opg_int8, ...);
 * - the kernel table a generated elementwise module exports (opg_elemwise_kernel);
 * - NumPy-exact helpers for the scalar ops whose C operator differs from NumPy
 *   (floor division and modulo, NaN-propagating maximum/minimum, sign);
 * - SIMD declarations of glibc's libmvec functions, so that gcc vectorises exp, log, sin,
 *   tanh, ... in loops built with -O3 -fno-math-errno, without -ffast-math (which would
 *   break isnan/isinf and inf arithmetic).
 *
 * Its text is part of every kernel's cache key: editing it rebuilds the kernels.
 */
#ifndef OPGRAPH_C_PRELUDE_H
#define OPGRAPH_C_PRELUDE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

typedef double opg_float64;
typedef float opg_float32;
typedef int8_t opg_int8;
typedef int16_t opg_int16;
typedef int32_t opg_int32;
typedef int64_t opg_int64;
typedef uint8_t opg_uint8;
typedef uint16_t opg_uint16;
typedef uint32_t opg_uint32;
typedef uint64_t opg_uint64;
typedef unsigned char opg_bool; /* NumPy's bool: one byte holding 0 or 1 */

/* ---- the table a generated elementwise module exports in its ELEMWISE_KERNEL capsule */

#define OPG_ELEMWISE_ABI 1

/* out[i] = f(in[i]) for i in [start, stop); every non-scalar operand is contiguous. */
typedef void (*opg_contig_fn)(ptrdiff_t start, ptrdiff_t stop, char **ptrs);
/* n elements, operand k advancing by steps[k] bytes (0 for a broadcast operand). */
typedef void (*opg_strided_fn)(ptrdiff_t n, char **ptrs, const ptrdiff_t *steps);
/* The contiguous loop split over nthreads OpenMP threads (NULL when built without OpenMP). */
typedef void (*opg_parallel_fn)(ptrdiff_t n, char **ptrs, int nthreads);

typedef struct {
    int abi;
    int nin;
    int nout;
    opg_contig_fn contig;
    opg_strided_fn strided;
    opg_parallel_fn parallel;
} opg_elemwise_kernel;

/* ---- the table a generated reduction module exports in its REDUCE_KERNEL capsule */

#define OPG_REDUCE_ABI 1

/* out[k] = the reduction over r < R of the element at x + k * sk + r * sr (byte strides),
 * for k < K (out contiguous); K >= 1, R >= 1; up to nthreads OpenMP threads. */
typedef void (*opg_reduce_fn)(const char *x, char *out, ptrdiff_t K, ptrdiff_t R,
                              ptrdiff_t sk, ptrdiff_t sr, int nthreads);

typedef struct {
    int abi;
    int openmp; /* built with OpenMP: nthreads > 1 is honoured */
    opg_reduce_fn reduce;
} opg_reduce_kernel;

/* ---- NumPy-exact scalar helpers */

/* np.maximum / np.minimum: NaN in either argument gives NaN. */
#define OPG_MAX(a, b) (((a) > (b) || (a) != (a)) ? (a) : (b))
#define OPG_MIN(a, b) (((a) < (b) || (a) != (a)) ? (a) : (b))

/* np.sign for floats: NaN stays NaN. */
static inline double opg_sign_f64(double x) {
    return x > 0 ? 1.0 : (x < 0 ? -1.0 : (x == 0 ? 0.0 : x));
}
static inline float opg_sign_f32(float x) {
    return x > 0 ? 1.0f : (x < 0 ? -1.0f : (x == 0 ? 0.0f : x));
}

/* np.floor_divide / np.remainder for floats (NumPy's npy_divmod). */
#define OPG_FLOAT_DIVMOD(T, SUF, FMOD, FLOOR, COPYSIGN)                                  \
    static inline T opg_floordiv_##SUF(T a, T b) {                                       \
        if (b == 0) {                                                                    \
            return a / b;                                                                \
        }                                                                                \
        T mod = FMOD(a, b);                                                              \
        T div = (a - mod) / b;                                                           \
        if (mod != 0 && ((b < 0) != (mod < 0))) {                                        \
            div -= 1;                                                                    \
        }                                                                                \
        if (div != 0) {                                                                  \
            T fl = FLOOR(div);                                                           \
            if (div - fl > (T)0.5) {                                                     \
                fl += 1;                                                                 \
            }                                                                            \
            return fl;                                                                   \
        }                                                                                \
        return COPYSIGN((T)0, a / b);                                                    \
    }                                                                                    \
    static inline T opg_mod_##SUF(T a, T b) {                                            \
        if (b == 0) {                                                                    \
            return FMOD(a, b);                                                           \
        }                                                                                \
        T mod = FMOD(a, b);                                                              \
        if (mod != 0) {                                                                  \
            if ((b < 0) != (mod < 0)) {                                                  \
                mod += b;                                                                \
            }                                                                            \
            return mod;                                                                  \
        }                                                                                \
        return COPYSIGN((T)0, b);                                                        \
    }

OPG_FLOAT_DIVMOD(double, float64, fmod, floor, copysign)
OPG_FLOAT_DIVMOD(float, float32, fmodf, floorf, copysignf)

/* Integer floor division and modulo as NumPy defines them: rounding toward -inf, x // 0 and
 * x % 0 give 0, and MIN // -1 wraps (C would trap on all three). */
#define OPG_SIGNED_DIVMOD(T, SUF)                                                        \
    static inline T opg_floordiv_##SUF(T a, T b) {                                       \
        if (b == 0) {                                                                    \
            return 0;                                                                    \
        }                                                                                \
        if (b == -1) {                                                                   \
            return (T)(0 - (uint64_t)a);                                                 \
        }                                                                                \
        T q = a / b;                                                                     \
        if ((a % b != 0) && ((a < 0) != (b < 0))) {                                      \
            q -= 1;                                                                      \
        }                                                                                \
        return q;                                                                        \
    }                                                                                    \
    static inline T opg_mod_##SUF(T a, T b) {                                            \
        if (b == 0 || b == -1) {                                                         \
            return 0;                                                                    \
        }                                                                                \
        T r = a % b;                                                                     \
        if (r != 0 && ((r < 0) != (b < 0))) {                                            \
            r += b;                                                                      \
        }                                                                                \
        return r;                                                                        \
    }

#define OPG_UNSIGNED_DIVMOD(T, SUF)                                                      \
    static inline T opg_floordiv_##SUF(T a, T b) { return b == 0 ? 0 : a / b; }          \
    static inline T opg_mod_##SUF(T a, T b) { return b == 0 ? 0 : a % b; }

OPG_SIGNED_DIVMOD(int8_t, int8)
OPG_SIGNED_DIVMOD(int16_t, int16)
OPG_SIGNED_DIVMOD(int32_t, int32)
OPG_SIGNED_DIVMOD(int64_t, int64)
OPG_UNSIGNED_DIVMOD(uint8_t, uint8)
OPG_UNSIGNED_DIVMOD(uint16_t, uint16)
OPG_UNSIGNED_DIVMOD(uint32_t, uint32)
OPG_UNSIGNED_DIVMOD(uint64_t, uint64)

/* ---- libmvec: vector variants of the math functions (x86-64 glibc only)
 *
 * glibc declares them in <bits/math-vector.h> only under -ffast-math. Redeclaring the
 * functions with the same attribute gives gcc the vector variants without the fast-math
 * semantics. The lists follow glibc's own: 2.22 added exp/log/sin/cos/pow, 2.35 the rest.
 */
#if defined(__x86_64__) && defined(__GLIBC__) && !defined(__FAST_MATH__) && \
    !defined(OPG_NO_LIBMVEC)
#define OPG_SIMD __attribute__((simd("notinbranch")))
#if __GLIBC_PREREQ(2, 22)
OPG_SIMD double exp(double);
OPG_SIMD float expf(float);
OPG_SIMD double log(double);
OPG_SIMD float logf(float);
OPG_SIMD double sin(double);
OPG_SIMD float sinf(float);
OPG_SIMD double cos(double);
OPG_SIMD float cosf(float);
OPG_SIMD double pow(double, double);
OPG_SIMD float powf(float, float);
#endif
#if __GLIBC_PREREQ(2, 35)
OPG_SIMD double acos(double);
OPG_SIMD float acosf(float);
OPG_SIMD double acosh(double);
OPG_SIMD float acoshf(float);
OPG_SIMD double asin(double);
OPG_SIMD float asinf(float);
OPG_SIMD double asinh(double);
OPG_SIMD float asinhf(float);
OPG_SIMD double atan(double);
OPG_SIMD float atanf(float);
OPG_SIMD double atan2(double, double);
OPG_SIMD float atan2f(float, float);
OPG_SIMD double atanh(double);
OPG_SIMD float atanhf(float);
OPG_SIMD double cosh(double);
OPG_SIMD float coshf(float);
OPG_SIMD double erf(double);
OPG_SIMD float erff(float);
OPG_SIMD double erfc(double);
OPG_SIMD float erfcf(float);
OPG_SIMD double exp2(double);
OPG_SIMD float exp2f(float);
OPG_SIMD double expm1(double);
OPG_SIMD float expm1f(float);
OPG_SIMD double log10(double);
OPG_SIMD float log10f(float);
OPG_SIMD double log1p(double);
OPG_SIMD float log1pf(float);
OPG_SIMD double log2(double);
OPG_SIMD float log2f(float);
OPG_SIMD double sinh(double);
OPG_SIMD float sinhf(float);
OPG_SIMD double tan(double);
OPG_SIMD float tanf(float);
OPG_SIMD double tanh(double);
OPG_SIMD float tanhf(float);
#endif
#endif

#endif /* OPGRAPH_C_PRELUDE_H */
