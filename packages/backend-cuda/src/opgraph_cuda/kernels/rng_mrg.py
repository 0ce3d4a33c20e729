"""The CUDA kernel of ``GpuMRG_uniform``: MRG31k3p streams (core's
``opgraph.sandbox.rng_mrg``) advanced on the device.

One thread per stream: thread ``s`` loads stream ``s``'s six state words, writes the
samples ``s, s + n_streams, s + 2 n_streams, ...`` (C order), one generator step each, and
stores the state back. That is exactly the CPU op's order (element ``i`` from stream
``i % n_streams``, each stream stepping once per element it gives), so samples and new
states are bit-identical to ``mrg_uniform.perform`` and to backend-c's thunk. The
arithmetic is Theano's int32 arithmetic, its wraparound done in uint32 as backend-c's
``_rng_mrg.pyx`` does (no signed overflow, nothing undefined); a step value ``k`` in
``[1, M1]`` becomes ``(float)k * 4.6566126e-10f`` in float32 (Theano's C rounding) and
``(double)k * 2**-31`` in float64. Stores to the sample are coalesced: the threads of a
warp write consecutive elements. Streams beyond the first ``n_elements`` are not touched.
"""

from __future__ import annotations

from opgraph_cuda.kernels.scalar import CTYPES, wrap_params
from opgraph_cuda.runtime import CudaSource, KernelSig

__all__ = ["CONVERSIONS", "KERNEL_NAME", "mrg_source"]

KERNEL_NAME = "k_mrg_uniform"

#: Sample dtype -> the C expression of a sample from the step value ``k`` (Theano's C code).
CONVERSIONS = {
    "float32": "(opg_float32)(k) * 4.6566126e-10f",
    "float64": "(opg_float64)(k) * 4.656612873077392578125e-10",
}

_HELPERS = """\
#define OPG_MRG_M1 2147483647 /* 2**31 - 1 */
#define OPG_MRG_M2 2147462579 /* 2**31 - 21069 */

/* Theano's `if (y < 0 || y >= m) y -= m;` in int32 arithmetic (wrapping). */
__device__ __forceinline__ opg_int32 opg_mrg_red(opg_int32 y, opg_int32 m) {
    return (y < 0 || y >= m) ? (opg_int32)((opg_uint32)y - (opg_uint32)m) : y;
}

/* a + b with int32 wraparound. */
__device__ __forceinline__ opg_int32 opg_mrg_add(opg_int32 a, opg_int32 b) {
    return (opg_int32)((opg_uint32)a + (opg_uint32)b);
}
"""

_BODY = """\
    const ptrdiff_t active = n_streams < n_elements ? n_streams : n_elements;
    for (ptrdiff_t s = (ptrdiff_t)blockIdx.x * blockDim.x + threadIdx.x; s < active;
         s += (ptrdiff_t)gridDim.x * blockDim.x) {
        opg_int32* st = state + s * ss0;
        opg_int32 x11 = st[0], x12 = st[ss1], x13 = st[2 * ss1];
        opg_int32 x21 = st[3 * ss1], x22 = st[4 * ss1], x23 = st[5 * ss1];
        for (ptrdiff_t i = s; i < n_elements; i += n_streams) {
            /* first component: (2**22 x12 + 129 x13) mod M1, as Theano's shifts */
            opg_int32 y1 = (opg_int32)(((opg_uint32)(x12 & 511) << 22) + (opg_uint32)(x12 >> 9)
                                       + ((opg_uint32)(x13 & 16777215) << 7)
                                       + (opg_uint32)(x13 >> 24));
            y1 = opg_mrg_red(y1, OPG_MRG_M1);
            y1 = opg_mrg_red(opg_mrg_add(y1, x13), OPG_MRG_M1);
            /* second component: (2**15 x21 + 32769 x23) mod M2 */
            opg_int32 z1 = (opg_int32)(((opg_uint32)(x21 & 65535) << 15)
                                       + (opg_uint32)(21069 * (x21 >> 16)));
            z1 = opg_mrg_red(z1, OPG_MRG_M2);
            opg_int32 y2 = (opg_int32)(((opg_uint32)(x23 & 65535) << 15)
                                       + (opg_uint32)(21069 * (x23 >> 16)));
            y2 = opg_mrg_red(y2, OPG_MRG_M2);
            y2 = opg_mrg_red(opg_mrg_add(y2, x23), OPG_MRG_M2);
            y2 = opg_mrg_red(opg_mrg_add(y2, z1), OPG_MRG_M2);
            x13 = x12;
            x12 = x11;
            x11 = y1;
            x23 = x22;
            x22 = x21;
            x21 = y2;
            const opg_int32 k = (y1 <= y2)
                ? (opg_int32)((opg_uint32)y1 - (opg_uint32)y2 + (opg_uint32)OPG_MRG_M1)
                : (opg_int32)((opg_uint32)y1 - (opg_uint32)y2);
            sample[i] = OPG_MRG_SAMPLE(k);
        }
        st[0] = x11;
        st[ss1] = x12;
        st[2 * ss1] = x13;
        st[3 * ss1] = x21;
        st[4 * ss1] = x22;
        st[5 * ss1] = x23;
    }"""

#: The kernel's parameters, in launch order.
PARAMS = (
    "TS* sample",
    "opg_int32* state",
    "ptrdiff_t n_streams",
    "ptrdiff_t n_elements",
    "ptrdiff_t ss0",
    "ptrdiff_t ss1",
)


def mrg_source(dtype: str, title: str) -> CudaSource:
    """The module of :data:`KERNEL_NAME` drawing ``dtype`` samples (a key of
    :data:`CONVERSIONS`); ``title`` names the op and the node in its first comment.

    The kernel takes the sample (C-contiguous, ``n_elements`` long), the state matrix
    (``n_streams`` rows of 6 int32 words, advanced in place, with element strides ``ss0``
    and ``ss1``) and the two counts.
    """
    if dtype not in CONVERSIONS:
        raise ValueError(f"no MRG31k3p kernel for {dtype} samples (only {', '.join(CONVERSIONS)})")
    lines = [
        f"/* {title.replace('*/', '* /')}",
        f" * MRG31k3p uniform {dtype} samples: one thread per stream, element i from stream",
        " * i % n_streams (the CPU op's order); int32 arithmetic wrapping as Theano's. */",
        '#include "opgraph_cuda_prelude.cuh"',
        "",
        f"typedef {CTYPES[dtype]} TS; /* the sample's type */",
        f"#define OPG_MRG_SAMPLE(k) ({CONVERSIONS[dtype]})",
        _HELPERS,
        "/* Advance streams [0, min(n_streams, n_elements)) and write their samples. */",
        *wrap_params(f'extern "C" __global__ void {KERNEL_NAME}', PARAMS),
        _BODY,
        "}",
        "",
    ]
    sig = KernelSig(KERNEL_NAME, tuple(p.rsplit(" ", 1)[0] for p in PARAMS), sync=False)
    return CudaSource(name=title.split(" for node", 1)[0], code="\n".join(lines), kernels=(sig,))
