/* opgraph-backend-cuda: the helpers every generated CUDA kernel includes first.
 *
 * - fixed-width types named after NumPy dtypes (opg_float32, opg_int64, opg_bool, ...);
 * - opg_float16, a storage type only: cuda_fp16.h's __half under nvcc, the emulator's
 *   software __half under g++. Kernels load it with __half2float, compute in float and
 *   store with __float2half_rn (round to nearest even); opg_round_half(x) rounds a float
 *   to the nearest half and back (an explicit cast to float16 inside a fused graph);
 * - NumPy-exact helpers for the scalar ops whose C operator differs from NumPy: floor
 *   division and modulo (rounding toward -inf, x // 0 == 0 for integers), NaN-propagating
 *   maximum/minimum, sign (NaN stays NaN);
 * - opg_vec<T, N>: N elements loaded or stored as one aligned access (float4-style 16-byte
 *   loads for 4-byte types), used by the contiguous elementwise kernels.
 *
 * It compiles under nvcc (device code) and under g++ -std=c++20 with the CPU emulator's
 * header (opgraph_cuda_emulate.h) force-included, which defines __device__ and friends.
 * No half arithmetic is used anywhere (the emulator has none): the kernel text is the same
 * for both compilers.
 */
#ifndef OPGRAPH_CUDA_PRELUDE_CUH
#define OPGRAPH_CUDA_PRELUDE_CUH

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

typedef float opg_float32;
typedef double opg_float64;
typedef signed char opg_int8;
typedef short opg_int16;
typedef int opg_int32;
typedef long long opg_int64;
typedef unsigned char opg_uint8;
typedef unsigned short opg_uint16;
typedef unsigned int opg_uint32;
typedef unsigned long long opg_uint64;
typedef unsigned char opg_bool; /* NumPy's bool: one byte holding 0 or 1 */
typedef __half opg_float16;     /* storage only: math on it happens in float */

/* x rounded to the nearest float16 (ties to even) and back: what a cast to float16 keeps. */
__device__ __forceinline__ float opg_round_half(const float x) {
    return __half2float(__float2half_rn(x));
}

/* ---- maximum / minimum / sign, as np.maximum, np.minimum, np.sign ---------------------- */

/* NaN in either argument gives NaN (a != a only for NaN; always false for integers). */
template <class T>
__device__ __forceinline__ T opg_max(T a, T b) {
    return (a > b || a != a) ? a : b;
}
template <class T>
__device__ __forceinline__ T opg_min(T a, T b) {
    return (a < b || a != a) ? a : b;
}
#define OPG_MAX(a, b) opg_max((a), (b))
#define OPG_MIN(a, b) opg_min((a), (b))

/* -1, 0 or +1 in the argument's type; NaN stays NaN for floats. */
template <class T>
__device__ __forceinline__ T opg_sign(T x) {
    return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x);
}

/* ---- floor division and modulo (np.floor_divide, np.remainder) ------------------------ */

/* Floats: NumPy's npy_divmod; x // 0 is +-inf or NaN, x % 0 is NaN. */
#define OPG_FLOAT_DIVMOD(T)                                          \
    __device__ __forceinline__ T opg_floordiv(T a, T b) {            \
        if (b == T(0)) {                                             \
            return a / b;                                            \
        }                                                            \
        T mod = fmod(a, b);                                          \
        T div = (a - mod) / b;                                       \
        if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) {           \
            div -= T(1);                                             \
        }                                                            \
        if (div != T(0)) {                                           \
            T fl = floor(div);                                       \
            if (div - fl > T(0.5)) {                                 \
                fl += T(1);                                          \
            }                                                        \
            return fl;                                               \
        }                                                            \
        return copysign(T(0), a / b);                                \
    }                                                                \
    __device__ __forceinline__ T opg_mod(T a, T b) {                 \
        T mod = fmod(a, b);                                          \
        if (b == T(0)) {                                             \
            return mod;                                              \
        }                                                            \
        if (mod != T(0)) {                                           \
            return ((b < T(0)) != (mod < T(0))) ? mod + b : mod;     \
        }                                                            \
        return copysign(T(0), b);                                    \
    }

OPG_FLOAT_DIVMOD(float)
OPG_FLOAT_DIVMOD(double)

/* Signed integers: round toward -inf; x // 0 and x % 0 give 0, MIN // -1 wraps (NumPy). */
#define OPG_SIGNED_DIVMOD(T)                                         \
    __device__ __forceinline__ T opg_floordiv(T a, T b) {            \
        if (b == 0) {                                                \
            return 0;                                                \
        }                                                            \
        if (b == -1) {                                               \
            return (T)(0ULL - (unsigned long long)a);                \
        }                                                            \
        T q = (T)(a / b);                                            \
        if ((a % b != 0) && ((a < 0) != (b < 0))) {                  \
            q -= 1;                                                  \
        }                                                            \
        return q;                                                    \
    }                                                                \
    __device__ __forceinline__ T opg_mod(T a, T b) {                 \
        if (b == 0 || b == -1) {                                     \
            return 0;                                                \
        }                                                            \
        T r = (T)(a % b);                                            \
        if (r != 0 && ((r < 0) != (b < 0))) {                        \
            r += b;                                                  \
        }                                                            \
        return r;                                                    \
    }

#define OPG_UNSIGNED_DIVMOD(T)                                       \
    __device__ __forceinline__ T opg_floordiv(T a, T b) {            \
        return b == 0 ? (T)0 : (T)(a / b);                           \
    }                                                                \
    __device__ __forceinline__ T opg_mod(T a, T b) {                 \
        return b == 0 ? (T)0 : (T)(a % b);                           \
    }

OPG_SIGNED_DIVMOD(opg_int8)
OPG_SIGNED_DIVMOD(opg_int16)
OPG_SIGNED_DIVMOD(opg_int32)
OPG_SIGNED_DIVMOD(opg_int64)
OPG_UNSIGNED_DIVMOD(opg_uint8)
OPG_UNSIGNED_DIVMOD(opg_uint16)
OPG_UNSIGNED_DIVMOD(opg_uint32)
OPG_UNSIGNED_DIVMOD(opg_uint64)

/* ---- integer powers with a constant exponent (x ** 10 as four multiplications) ---------- */

/* x to the N, by repeated squaring unrolled at compile time. Integers wrap as NumPy's do. */
template <unsigned N, class T>
__device__ __forceinline__ T opg_powu(T x) {
    if constexpr (N == 0) {
        return T(1);
    } else if constexpr (N == 1) {
        return x;
    } else {
        T h = opg_powu<N / 2>(x);
        if constexpr (N % 2 == 1) {
            return (T)((T)(h * h) * x);
        } else {
            return (T)(h * h);
        }
    }
}

/* ---- special functions where SciPy and C differ ---------------------------------------- */

/* scipy.special.gammaln: -inf at -inf (C's lgamma gives +inf there). */
template <class T>
__device__ __forceinline__ T opg_gammaln(T x) {
    return isinf(x) ? x : lgamma(x);
}

/* ---- vector access ------------------------------------------------------------------- */

/* N consecutive elements accessed as one aligned load/store (16 bytes for 4 floats). The
 * host launches the vector path only when every operand's address is a multiple of the
 * alignment. */
template <class T, int N>
struct alignas(sizeof(T) * N) opg_vec {
    T v[N];
};

#endif /* OPGRAPH_CUDA_PRELUDE_CUH */
