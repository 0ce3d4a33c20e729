/* opgraph-backend-cuda: run CUDA kernels on the CPU, for testing without a GPU.
 *
 * The emulator compiles a generated kernel module with g++ as C++20, force-including this
 * header: the kernel text is the very text nvcc compiles for the GPU. It provides:
 *
 * - the execution-space keywords (__global__, __device__, __host__, __forceinline__) as
 *   nothing or `inline`;
 * - __shared__ as `static`: blocks run one after another, so one static array per kernel is
 *   exactly one block's shared memory;
 * - threadIdx, blockIdx, blockDim, gridDim;
 * - __syncthreads(): a std::barrier over the block's threads. A kernel that synchronises
 *   runs each of its block's threads as an OS thread (OPG_EMU_SYNC); one that does not runs
 *   them one after another on the calling thread;
 * - atomicAdd/atomicMax/atomicMin, under one lock;
 * - __half and the conversions kernels use (__half2float, __float2half_rn, __double2half):
 *   a 16-bit struct converted in software, exactly as cuda_fp16.h's own host code does
 *   (round to nearest even, subnormals and infinities kept, NaN made the canonical 0x7fff
 *   or 0x7fffffff). Like the device's, it has no arithmetic: kernels convert to float.
 *
 * opg_emu_run(dims, sync, body) runs the grid; each kernel's `opg_launch_<name>` wrapper,
 * appended by the emulator, unpacks the arguments and calls it.
 */
#ifndef OPGRAPH_CUDA_EMULATE_H
#define OPGRAPH_CUDA_EMULATE_H

#include <math.h>

#include <barrier>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __restrict__ __restrict
#define __launch_bounds__(...)

struct uint3 {
    unsigned int x, y, z;
};
struct dim3 {
    unsigned int x, y, z;
};

namespace opg_emu {
inline thread_local uint3 thread_index = {0, 0, 0};
inline thread_local std::barrier<> *block_barrier = nullptr;
inline uint3 block_index = {0, 0, 0};
inline dim3 block_dim = {1, 1, 1};
inline dim3 grid_dim = {1, 1, 1};
inline std::mutex atomic_lock;

/* Run body() once per thread of every block of the grid dims[0..2] x block dims[3..5]. */
template <class Body>
void run(const unsigned int *dims, bool sync, Body body) {
    grid_dim = {dims[0], dims[1], dims[2]};
    block_dim = {dims[3], dims[4], dims[5]};
    const unsigned int nthreads = dims[3] * dims[4] * dims[5];
    for (unsigned int bz = 0; bz < dims[2]; ++bz) {
        for (unsigned int by = 0; by < dims[1]; ++by) {
            for (unsigned int bx = 0; bx < dims[0]; ++bx) {
                block_index = {bx, by, bz};
                if (!sync) {
                    for (unsigned int t = 0; t < nthreads; ++t) {
                        thread_index = {t % dims[3], (t / dims[3]) % dims[4],
                                        t / (dims[3] * dims[4])};
                        body();
                    }
                    continue;
                }
                std::barrier<> barrier(nthreads);
                std::vector<std::thread> threads;
                threads.reserve(nthreads);
                for (unsigned int t = 0; t < nthreads; ++t) {
                    threads.emplace_back([&, t] {
                        thread_index = {t % dims[3], (t / dims[3]) % dims[4],
                                        t / (dims[3] * dims[4])};
                        block_barrier = &barrier;
                        body();
                    });
                }
                for (auto &thread : threads) {
                    thread.join();
                }
            }
        }
    }
}
}  // namespace opg_emu

#define threadIdx (opg_emu::thread_index)
#define blockIdx (opg_emu::block_index)
#define blockDim (opg_emu::block_dim)
#define gridDim (opg_emu::grid_dim)

inline void __syncthreads() { opg_emu::block_barrier->arrive_and_wait(); }

template <class T>
inline T atomicAdd(T *address, T value) {
    std::lock_guard<std::mutex> guard(opg_emu::atomic_lock);
    T old = *address;
    *address = old + value;
    return old;
}
template <class T>
inline T atomicMax(T *address, T value) {
    std::lock_guard<std::mutex> guard(opg_emu::atomic_lock);
    T old = *address;
    *address = old > value ? old : value;
    return old;
}
template <class T>
inline T atomicMin(T *address, T value) {
    std::lock_guard<std::mutex> guard(opg_emu::atomic_lock);
    T old = *address;
    *address = old < value ? old : value;
    return old;
}

/* ---- float16: cuda_fp16.h's storage type and conversions, in software ---------------------- */

struct __half {
    unsigned short __x;
};

namespace opg_emu {
/* The half nearest to d (ties to even): every finite half is m * 2^q with an 11-bit m, so
 * round d / 2^q to an integer, q being the exponent of d's half ulp (2^-24 below 2^-14). */
inline unsigned short double_to_half_bits(double d) {
    uint64_t x;
    std::memcpy(&x, &d, sizeof x);
    const unsigned short sign = (unsigned short)((x >> 48) & 0x8000u);
    const uint64_t ax = x & 0x7fffffffffffffffULL;
    if (ax > 0x7ff0000000000000ULL) {
        return 0x7fffu; /* NaN: CUDA's canonical NaN */
    }
    const int e = (int)(ax >> 52); /* biased exponent; 0 for zero and double subnormals */
    if (e == 0) {
        return sign; /* |d| < 2^-1022 rounds to a signed zero */
    }
    const int exp = e - 1023;
    if (exp >= 16) {
        return (unsigned short)(sign | 0x7c00u); /* |d| >= 2^16: infinity */
    }
    const uint64_t mant = (ax & 0xfffffffffffffULL) | (1ULL << 52); /* d = mant * 2^(e-1075) */
    const int quantum = exp >= -14 ? exp - 10 : -24;
    const int shift = quantum - (e - 1075); /* >= 42 */
    if (shift >= 54) {
        return sign; /* below half the smallest subnormal */
    }
    uint64_t q = mant >> shift;
    const uint64_t rest = mant & ((1ULL << shift) - 1);
    const uint64_t halfway = 1ULL << (shift - 1);
    if (rest > halfway || (rest == halfway && (q & 1))) {
        ++q; /* a carry into the next binade (or to infinity) is the right encoding */
    }
    const uint64_t bits = exp >= -14 ? ((uint64_t)(exp + 14) << 10) + q : q;
    return (unsigned short)(sign | bits);
}
}  // namespace opg_emu

inline float __half2float(const __half h) {
    const uint32_t sign = (uint32_t)(h.__x & 0x8000u) << 16;
    uint32_t e = (h.__x >> 10) & 0x1fu;
    uint32_t m = h.__x & 0x3ffu;
    uint32_t bits;
    if (e == 0x1fu) {
        bits = m ? 0x7fffffffu : (sign | 0x7f800000u); /* NaN (canonical) or infinity */
    } else if (e != 0) {
        bits = sign | ((e + 112u) << 23) | (m << 13);
    } else if (m == 0) {
        bits = sign;
    } else { /* subnormal: m * 2^-24, normalised */
        e = 113u;
        while (!(m & 0x400u)) {
            m <<= 1;
            --e;
        }
        bits = sign | (e << 23) | ((m & 0x3ffu) << 13);
    }
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

inline __half __double2half(const double d) { return __half{opg_emu::double_to_half_bits(d)}; }

/* float -> double is exact, so rounding the double once rounds the float correctly. */
inline __half __float2half_rn(const float f) { return __double2half((double)f); }

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }

#endif /* OPGRAPH_CUDA_EMULATE_H */
