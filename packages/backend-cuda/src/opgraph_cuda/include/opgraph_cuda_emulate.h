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
 * - atomicAdd/atomicMax/atomicMin, under one lock.
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

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }

#endif /* OPGRAPH_CUDA_EMULATE_H */
