"""Row-wise CUDA kernels for the softmax family and the fused softmax/cross-entropy ops.

Every kernel works on the rows of a matrix (any element strides for the inputs; the
outputs are new C-contiguous arrays). ``blockDim.x`` threads share a row (a power of two up
to 256, smaller for short rows) and ``blockDim.y`` rows share a block; blocks loop over the
rows (grid-stride). Row maxima and sums are shared-memory trees (``opg_row_max``,
``opg_row_sum``), and every exponential is taken of ``x - max(x)``, so logits of any size
give finite results (NaN in a row gives NaN, as in NumPy).

The kernels are C++ templates in :data:`TEMPLATES`; a module instantiates one of them for
the node's dtypes as an ``extern "C"`` kernel (see :func:`nnet_source`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from opgraph_cuda.kernels.scalar import CTYPES, wrap_params
from opgraph_cuda.runtime import CudaSource, KernelSig, Runtime, get_runtime

__all__ = ["KERNELS", "TEMPLATES", "NnetKernel", "nnet_kernel", "nnet_source", "row_launch"]

#: Threads per block (also the shared-memory slots of a tree).
THREADS = 256
#: Row elements per thread that softmax keeps in registers (rows read once).
CACHE = 16
#: Rows at most this long get one thread each (no tree, no synchronisation).
SHORT_ROW = 16

TEMPLATES = r"""
/* ---- trees over the blockDim.x threads of a row; every thread of the block calls them
 * (blockDim.x is the same for all, so one thread per row skips the tree for all) */

template <class A>
__device__ __forceinline__ A opg_row_sum(A a, A* buf) {
    if (blockDim.x == 1) {
        return a;
    }
    const unsigned int slot = threadIdx.y * blockDim.x + threadIdx.x;
    buf[slot] = a;
    __syncthreads();
    for (unsigned int w = blockDim.x / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) {
            buf[slot] = buf[slot] + buf[slot + w];
        }
        __syncthreads();
    }
    const A total = buf[threadIdx.y * blockDim.x];
    __syncthreads();
    return total;
}

template <class A>
__device__ __forceinline__ A opg_row_max(A a, A* buf) {
    if (blockDim.x == 1) {
        return a;
    }
    const unsigned int slot = threadIdx.y * blockDim.x + threadIdx.x;
    buf[slot] = a;
    __syncthreads();
    for (unsigned int w = blockDim.x / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) {
            buf[slot] = OPG_MAX(buf[slot], buf[slot + w]);
        }
        __syncthreads();
    }
    const A top = buf[threadIdx.y * blockDim.x];
    __syncthreads();
    return top;
}

/* np.argmax's order: the first NaN, else the largest value, ties to the lowest index.
 * True when (w, j) beats (v, i). */
template <class A>
__device__ __forceinline__ bool opg_argmax_beats(A w, ptrdiff_t j, A v, ptrdiff_t i) {
    if (w != w) {
        return v == v || j < i;
    }
    if (v != v) {
        return false;
    }
    return w > v || (w == v && j < i);
}

template <class A>
__device__ __forceinline__ void opg_row_argmax(A& v, ptrdiff_t& i, A* vbuf, ptrdiff_t* ibuf) {
    if (blockDim.x == 1) {
        return;
    }
    const unsigned int slot = threadIdx.y * blockDim.x + threadIdx.x;
    vbuf[slot] = v;
    ibuf[slot] = i;
    __syncthreads();
    for (unsigned int w = blockDim.x / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w && opg_argmax_beats(vbuf[slot + w], ibuf[slot + w], vbuf[slot],
                                                ibuf[slot])) {
            vbuf[slot] = vbuf[slot + w];
            ibuf[slot] = ibuf[slot + w];
        }
        __syncthreads();
    }
    v = vbuf[threadIdx.y * blockDim.x];
    i = ibuf[threadIdx.y * blockDim.x];
    __syncthreads();
}

/* ---- softmax (LOG = 0) or log-softmax (LOG = 1) of the rows of x (+ b, when given):
 * out[m, k] = exp(v - max) / sum(exp(v - max)), or (v - max) - log(sum), v = x[m, k] + b[k].
 * A row of at most CACHE elements per thread is read once, into registers; longer rows
 * are read three times (max, sum, output). */
template <class TO, class TX, class TB>
__device__ __forceinline__ TO opg_logit(const TX* row, const TB* b, ptrdiff_t k, ptrdiff_t sxk,
                                        ptrdiff_t sb) {
    return (TO)row[k * sxk] + (b ? (TO)b[k * sb] : (TO)0);
}

template <int LOG, class TO, class TX, class TB>
__device__ void opg_softmax_rows(TO* out, const TX* x, const TB* b, ptrdiff_t M, ptrdiff_t K,
                                 ptrdiff_t sxm, ptrdiff_t sxk, ptrdiff_t sb) {
    __shared__ TO buf[THREADS];
    const bool cached = K <= (ptrdiff_t)blockDim.x * CACHE;
    for (ptrdiff_t first = (ptrdiff_t)blockIdx.x * blockDim.y; first < M;
         first += (ptrdiff_t)gridDim.x * blockDim.y) {
        const ptrdiff_t m = first + threadIdx.y;
        const ptrdiff_t n = m < M ? K : 0; /* elements of this thread's row */
        const TX* row = x + m * sxm;
        TO v[CACHE];
        TO top = -(TO)INFINITY;
        if (cached) {
#pragma unroll
            for (int j = 0; j < CACHE; ++j) {
                const ptrdiff_t k = threadIdx.x + (ptrdiff_t)j * blockDim.x;
                v[j] = k < n ? opg_logit<TO>(row, b, k, sxk, sb) : -(TO)INFINITY;
                top = OPG_MAX(top, v[j]);
            }
        } else {
            for (ptrdiff_t k = threadIdx.x; k < n; k += blockDim.x) {
                top = OPG_MAX(top, opg_logit<TO>(row, b, k, sxk, sb));
            }
        }
        top = opg_row_max(top, buf);
        TO total = 0;
        if (cached) {
#pragma unroll
            for (int j = 0; j < CACHE; ++j) {
                const ptrdiff_t k = threadIdx.x + (ptrdiff_t)j * blockDim.x;
                if (k < n) {
                    v[j] -= top; /* kept: the output needs it (and exp of it, for softmax) */
                    if (!LOG) {
                        v[j] = exp(v[j]);
                        total += v[j];
                    } else {
                        total += exp(v[j]);
                    }
                }
            }
        } else {
            for (ptrdiff_t k = threadIdx.x; k < n; k += blockDim.x) {
                total += exp(opg_logit<TO>(row, b, k, sxk, sb) - top);
            }
        }
        total = opg_row_sum(total, buf);
        const TO log_total = log(total);
        const TO inv_total = (TO)1 / total;
        if (cached) {
#pragma unroll
            for (int j = 0; j < CACHE; ++j) {
                const ptrdiff_t k = threadIdx.x + (ptrdiff_t)j * blockDim.x;
                if (k < n) {
                    out[m * K + k] = LOG ? v[j] - log_total : v[j] * inv_total;
                }
            }
        } else {
            for (ptrdiff_t k = threadIdx.x; k < n; k += blockDim.x) {
                const TO w = opg_logit<TO>(row, b, k, sxk, sb);
                out[m * K + k] = LOG ? (w - top) - log_total : exp(w - top) / total;
            }
        }
    }
}

/* ---- softmax's gradient: dx[m, k] = sm[m, k] * (dy[m, k] - sum_k(dy[m, k] * sm[m, k])) */
template <class TO, class TD, class TS>
__device__ void opg_softmax_grad_rows(TO* dx, const TD* dy, const TS* sm, ptrdiff_t M,
                                      ptrdiff_t K, ptrdiff_t sdm, ptrdiff_t sdk, ptrdiff_t ssm,
                                      ptrdiff_t ssk) {
    __shared__ TO buf[THREADS];
    for (ptrdiff_t first = (ptrdiff_t)blockIdx.x * blockDim.y; first < M;
         first += (ptrdiff_t)gridDim.x * blockDim.y) {
        const ptrdiff_t m = first + threadIdx.y;
        const bool valid = m < M;
        TO dot = 0;
        for (ptrdiff_t k = threadIdx.x; valid && k < K; k += blockDim.x) {
            dot += (TO)dy[m * sdm + k * sdk] * (TO)sm[m * ssm + k * ssk];
        }
        dot = opg_row_sum(dot, buf);
        for (ptrdiff_t k = threadIdx.x; valid && k < K; k += blockDim.x) {
            const TO s = (TO)sm[m * ssm + k * ssk];
            dx[m * K + k] = (TO)dy[m * sdm + k * sdk] * s - dot * s;
        }
    }
}

/* ---- for logits v = x + b: nll[m] = -log softmax(v)[m, y[m]] = max + log(sum) - v[m, y[m]],
 * sm = softmax(v), am[m] = argmax(v[m]). A class index out of [0, K) sets *err. */
template <class TO, class TX, class TB, class TY>
__device__ void opg_xent_softmax_rows(TO* nll, TO* sm, TY* am, const TX* x, const TB* b,
                                      const TY* y, int* err, ptrdiff_t M, ptrdiff_t K,
                                      ptrdiff_t sxm, ptrdiff_t sxk, ptrdiff_t sb,
                                      ptrdiff_t sy) {
    __shared__ TO buf[THREADS];
    __shared__ ptrdiff_t ibuf[THREADS];
    for (ptrdiff_t first = (ptrdiff_t)blockIdx.x * blockDim.y; first < M;
         first += (ptrdiff_t)gridDim.x * blockDim.y) {
        const ptrdiff_t m = first + threadIdx.y;
        const bool valid = m < M;
        const TX* row = x + m * sxm;
        TO top = -(TO)INFINITY;
        ptrdiff_t at = K;
        for (ptrdiff_t k = threadIdx.x; valid && k < K; k += blockDim.x) {
            const TO v = (TO)row[k * sxk] + (TO)b[k * sb];
            if (opg_argmax_beats(v, k, top, at)) {
                top = v;
                at = k;
            }
        }
        opg_row_argmax(top, at, buf, ibuf);
        TO total = 0;
        for (ptrdiff_t k = threadIdx.x; valid && k < K; k += blockDim.x) {
            total += exp((TO)row[k * sxk] + (TO)b[k * sb] - top);
        }
        total = opg_row_sum(total, buf);
        for (ptrdiff_t k = threadIdx.x; valid && k < K; k += blockDim.x) {
            sm[m * K + k] = exp((TO)row[k * sxk] + (TO)b[k * sb] - top) / total;
        }
        if (valid && threadIdx.x == 0) {
            const ptrdiff_t target = (ptrdiff_t)y[m * sy];
            am[m] = (TY)at;
            if (target < 0 || target >= K) {
                *err = 1;
                nll[m] = (TO)NAN;
            } else {
                nll[m] = top + log(total) - ((TO)row[target * sxk] + (TO)b[target * sb]);
            }
        }
    }
}

/* ---- the gradient of that nll w.r.t. the logits: dx[m, k] = dy[m] * (sm[m, k] - [k == y[m]]);
 * sdy = 0 for a 0-d dy. No tree: each thread writes its elements. */
template <class TO, class TD, class TS, class TY>
__device__ void opg_xent_dx_rows(TO* dx, const TD* dy, const TS* sm, const TY* y, int* err,
                                 ptrdiff_t M, ptrdiff_t K, ptrdiff_t sdy, ptrdiff_t ssm,
                                 ptrdiff_t ssk, ptrdiff_t sy) {
    for (ptrdiff_t first = (ptrdiff_t)blockIdx.x * blockDim.y; first < M;
         first += (ptrdiff_t)gridDim.x * blockDim.y) {
        const ptrdiff_t m = first + threadIdx.y;
        if (m >= M) {
            continue;
        }
        const ptrdiff_t target = (ptrdiff_t)y[m * sy];
        if (threadIdx.x == 0 && (target < 0 || target >= K)) {
            *err = 1;
        }
        const TO g = (TO)dy[m * sdy];
        for (ptrdiff_t k = threadIdx.x; k < K; k += blockDim.x) {
            const TO s = (TO)sm[m * ssm + k * ssk];
            dx[m * K + k] = k == target ? g * s - g : g * s;
        }
    }
}
""".replace("THREADS", str(THREADS)).replace("CACHE", str(CACHE))

#: kind -> (template, kernel parameters as (type pattern, name), does it call __syncthreads).
#: Type patterns name the node's dtypes: ``{o0}`` output 0, ``{i1}`` input 1.
KERNELS: dict[str, tuple[str, tuple[tuple[str, str], ...], bool]] = {
    "softmax": (
        "opg_softmax_rows<0, {o0}, {i0}, {i0}>(out, x, ({i0}*)0, M, K, sxm, sxk, 0)",
        (
            ("{o0}*", "out"),
            ("const {i0}*", "x"),
            *(("ptrdiff_t", n) for n in ["M", "K", "sxm", "sxk"]),
        ),
        True,
    ),
    "logsoftmax": (
        "opg_softmax_rows<1, {o0}, {i0}, {i0}>(out, x, ({i0}*)0, M, K, sxm, sxk, 0)",
        (
            ("{o0}*", "out"),
            ("const {i0}*", "x"),
            *(("ptrdiff_t", n) for n in ["M", "K", "sxm", "sxk"]),
        ),
        True,
    ),
    "softmax_bias": (
        "opg_softmax_rows<0, {o0}, {i0}, {i1}>(out, x, b, M, K, sxm, sxk, sb)",
        (
            ("{o0}*", "out"),
            ("const {i0}*", "x"),
            ("const {i1}*", "b"),
            *(("ptrdiff_t", n) for n in ["M", "K", "sxm", "sxk", "sb"]),
        ),
        True,
    ),
    "softmax_grad": (
        "opg_softmax_grad_rows<{o0}, {i0}, {i1}>(dx, dy, sm, M, K, sdm, sdk, ssm, ssk)",
        (
            ("{o0}*", "dx"),
            ("const {i0}*", "dy"),
            ("const {i1}*", "sm"),
            *(("ptrdiff_t", n) for n in ["M", "K", "sdm", "sdk", "ssm", "ssk"]),
        ),
        True,
    ),
    "xent_softmax": (
        "opg_xent_softmax_rows<{o0}, {i0}, {i1}, {i2}>"
        "(nll, sm, am, x, b, y, err, M, K, sxm, sxk, sb, sy)",
        (
            ("{o0}*", "nll"),
            ("{o1}*", "sm"),
            ("{o2}*", "am"),
            ("const {i0}*", "x"),
            ("const {i1}*", "b"),
            ("const {i2}*", "y"),
            ("int*", "err"),
            *(("ptrdiff_t", n) for n in ["M", "K", "sxm", "sxk", "sb", "sy"]),
        ),
        True,
    ),
    "xent_dx": (
        "opg_xent_dx_rows<{o0}, {i0}, {i1}, {i2}>(dx, dy, sm, y, err, M, K, sdy, ssm, ssk, sy)",
        (
            ("{o0}*", "dx"),
            ("const {i0}*", "dy"),
            ("const {i1}*", "sm"),
            ("const {i2}*", "y"),
            ("int*", "err"),
            *(("ptrdiff_t", n) for n in ["M", "K", "sdy", "ssm", "ssk", "sy"]),
        ),
        False,
    ),
}


def nnet_source(
    kind: str, in_dtypes: Sequence[str], out_dtypes: Sequence[str], title: str
) -> CudaSource:
    """The module of kernel ``k_<kind>`` (a :data:`KERNELS` entry) for these dtypes."""
    call, params, sync = KERNELS[kind]
    names = {f"i{k}": CTYPES[d] for k, d in enumerate(in_dtypes)}
    names |= {f"o{k}": CTYPES[d] for k, d in enumerate(out_dtypes)}
    typed = [(t.format(**names), n) for t, n in params]
    code = "\n".join(
        [
            f"/* {title.replace('*/', '* /')}",
            f" * inputs:  {', '.join(in_dtypes)}",
            f" * outputs: {', '.join(out_dtypes)}",
            " */",
            '#include "opgraph_cuda_prelude.cuh"',
            TEMPLATES,
            *wrap_params(
                f'extern "C" __global__ void __launch_bounds__({THREADS}, 4) k_{kind}',
                [f"{t} {n}" for t, n in typed],
            ),
            f"    {call.format(**names)};",
            "}",
            "",
        ]
    )
    sig = KernelSig(f"k_{kind}", tuple(t for t, _ in typed), sync=sync)
    return CudaSource(name=title.split(" for node", 1)[0], code=code, kernels=(sig,))


def row_launch(
    M: int, K: int, runtime: Runtime
) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """``(grid, block)`` for ``M`` rows of ``K`` elements: the fewest threads per row (a
    power of two, at most 256) that hold the row in ``CACHE`` registers each, one thread for
    rows of ``SHORT_ROW`` elements or fewer; several rows per block; at most
    ``runtime.max_blocks`` blocks."""
    bx = 1
    while K > SHORT_ROW and bx * CACHE < K and bx < THREADS:
        bx *= 2
    by = THREADS // bx
    blocks = max(1, min(-(-M // by), runtime.max_blocks))
    return (blocks, 1, 1), (bx, by, 1)


class NnetKernel:
    """One compiled row kernel: ``kernel(M, K, *args)`` launches it over ``M`` rows of
    ``K`` elements (``args`` in the kernel's order after the row and column counts are
    inserted by the caller)."""

    def __init__(
        self,
        kind: str,
        in_dtypes: Sequence[str],
        out_dtypes: Sequence[str],
        title: str,
        runtime: Runtime | None = None,
    ) -> None:
        self.runtime = runtime or get_runtime()
        self.kind = kind
        self.source = nnet_source(kind, in_dtypes, out_dtypes, title)
        self.fn = self.runtime.load(self.source)[f"k_{kind}"]

    def __call__(self, M: int, K: int, *args: Any) -> None:
        """Launch over ``M`` rows of ``K``; ``args`` are the kernel's arguments in order."""
        if M == 0 or K == 0:
            return
        grid, block = row_launch(M, K, self.runtime)
        self.fn(grid, block, *args)


_kernels: dict[tuple[Any, ...], NnetKernel] = {}
_lock = threading.Lock()


def nnet_kernel(
    kind: str, in_dtypes: Sequence[str], out_dtypes: Sequence[str], title: str
) -> NnetKernel:
    """The compiled :class:`NnetKernel`, built once per process and runtime."""
    runtime = get_runtime()
    key = (id(runtime), kind, tuple(in_dtypes), tuple(out_dtypes), title)
    found = _kernels.get(key)
    if found is None:
        found = NnetKernel(kind, in_dtypes, out_dtypes, title, runtime)
        with _lock:
            found = _kernels.setdefault(key, found)
    return found
