# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# distutils: extra_compile_args = -O3
"""The precompiled thunk of ``mrg_uniform`` (``opgraph.sandbox.rng_mrg``): MRG31k3p in C.

Theano's generator, step for step: int32 arithmetic with its wraparound (done in uint32,
so nothing is undefined in C), the same conditional subtractions, and a step value ``k``
in ``[1, M1]`` that becomes ``k * 2**-31`` in float64 and ``(float)k * 4.6566126e-10f``
in float32. Element ``i`` of the sample comes from stream ``i % n_streams``, each stream
advancing once per element it gives, exactly as the Op's ``perform``, so the samples and
the new states are bit-identical to it.

The loop runs over blocks of streams: a block's states are copied into one array per
state component, then for each step the block's lanes advance side by side and write a
contiguous run of the sample (gcc vectorises the lane loop, an AVX2 clone where the CPU
has it). A copy of the state matrix is advanced unless the Op is in place. float16
samples, unusual values (ndarray subclasses, other dtypes or ranks, non-native byte
order, a state that is not C-contiguous for an in-place Op) and every error (a bad size,
a state of the wrong shape, more than ``2**31 - 1`` samples) run the Op's ``perform``
before anything is written, so results and messages are its.
"""

cimport numpy as cnp
from libc.stdint cimport int32_t

from opgraph_c._vm cimport CThunk

import numpy as np

cnp.import_array()


cdef extern from *:
    """
    #include <stdint.h>

    #define OPG_MRG_M1 2147483647
    #define OPG_MRG_M2 2147462579
    #define OPG_MRG_BLOCK 1024

    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
    #define OPG_MRG_CLONES __attribute__((target_clones("avx2", "default")))
    #else
    #define OPG_MRG_CLONES
    #endif

    /* Theano's `if (y < 0 || y >= m) y -= m;` in int32 arithmetic. */
    static inline int32_t opg_mrg_red(int32_t y, int32_t m)
    {
        return (y < 0 || y >= m) ? (int32_t)((uint32_t)y - (uint32_t)m) : y;
    }

    static inline int32_t opg_mrg_add(int32_t a, int32_t b)
    {
        return (int32_t)((uint32_t)a + (uint32_t)b);
    }

    /* One step of lanes [0, n) of a block of streams (state component c of lane j in
     * s[c][j]); lane j's value goes to out[j]. */
    #define OPG_MRG_LANES(NAME, T, CONV)                                                \\
    OPG_MRG_CLONES static void NAME(int32_t *restrict s0, int32_t *restrict s1,        \\
                                    int32_t *restrict s2, int32_t *restrict s3,        \\
                                    int32_t *restrict s4, int32_t *restrict s5,        \\
                                    T *restrict out, npy_intp n)                       \\
    {                                                                                  \\
        for (npy_intp j = 0; j < n; j++) {                                             \\
            const int32_t x11 = s0[j], x12 = s1[j], x13 = s2[j];                       \\
            const int32_t x21 = s3[j], x22 = s4[j], x23 = s5[j];                       \\
            int32_t y1 = (int32_t)(((uint32_t)(x12 & 511) << 22) + (uint32_t)(x12 >> 9) \\
                                   + ((uint32_t)(x13 & 16777215) << 7)                 \\
                                   + (uint32_t)(x13 >> 24));                           \\
            y1 = opg_mrg_red(y1, OPG_MRG_M1);                                          \\
            y1 = opg_mrg_red(opg_mrg_add(y1, x13), OPG_MRG_M1);                        \\
            int32_t z1 = (int32_t)(((uint32_t)(x21 & 65535) << 15)                     \\
                                   + (uint32_t)(21069 * (x21 >> 16)));                 \\
            z1 = opg_mrg_red(z1, OPG_MRG_M2);                                          \\
            int32_t y2 = (int32_t)(((uint32_t)(x23 & 65535) << 15)                     \\
                                   + (uint32_t)(21069 * (x23 >> 16)));                 \\
            y2 = opg_mrg_red(y2, OPG_MRG_M2);                                          \\
            y2 = opg_mrg_red(opg_mrg_add(y2, x23), OPG_MRG_M2);                        \\
            y2 = opg_mrg_red(opg_mrg_add(y2, z1), OPG_MRG_M2);                         \\
            s2[j] = x12; s1[j] = x11; s0[j] = y1;                                      \\
            s5[j] = x22; s4[j] = x21; s3[j] = y2;                                      \\
            const int32_t k = (y1 <= y2)                                               \\
                ? (int32_t)((uint32_t)y1 - (uint32_t)y2 + (uint32_t)OPG_MRG_M1)        \\
                : (int32_t)((uint32_t)y1 - (uint32_t)y2);                              \\
            out[j] = CONV(k);                                                          \\
        }                                                                              \\
    }

    #define OPG_MRG_CONV_F64(k) ((double)(k) * 4.656612873077392578125e-10)
    #define OPG_MRG_CONV_F32(k) ((float)(k) * 4.6566126e-10f)

    OPG_MRG_LANES(opg_mrg_lanes_f64, double, OPG_MRG_CONV_F64)
    OPG_MRG_LANES(opg_mrg_lanes_f32, float, OPG_MRG_CONV_F32)

    /* n_elements samples from the n_streams states `state` (int32, C-ordered
     * (n_streams, 6), advanced in place): element i from stream i % n_streams. */
    #define OPG_MRG_FILL(NAME, T, LANES)                                                \\
    static void NAME(int32_t *state, npy_intp n_streams, npy_intp n_elements, T *out)  \\
    {                                                                                  \\
        int32_t s[6][OPG_MRG_BLOCK];                                                   \\
        const npy_intp active = n_streams < n_elements ? n_streams : n_elements;       \\
        for (npy_intp b0 = 0; b0 < active; b0 += OPG_MRG_BLOCK) {                      \\
            const npy_intp bn = active - b0 < OPG_MRG_BLOCK ? active - b0 : OPG_MRG_BLOCK; \\
            for (npy_intp j = 0; j < bn; j++)                                          \\
                for (int c = 0; c < 6; c++)                                            \\
                    s[c][j] = state[(b0 + j) * 6 + c];                                 \\
            for (npy_intp start = b0; start < n_elements; start += n_streams) {        \\
                const npy_intp n = n_elements - start < bn ? n_elements - start : bn;  \\
                LANES(s[0], s[1], s[2], s[3], s[4], s[5], out + start, n);             \\
            }                                                                          \\
            for (npy_intp j = 0; j < bn; j++)                                          \\
                for (int c = 0; c < 6; c++)                                            \\
                    state[(b0 + j) * 6 + c] = s[c][j];                                 \\
        }                                                                              \\
    }

    OPG_MRG_FILL(opg_mrg_fill_f64, double, opg_mrg_lanes_f64)
    OPG_MRG_FILL(opg_mrg_fill_f32, float, opg_mrg_lanes_f32)
    """
    void opg_mrg_fill_f64(int32_t* state, cnp.npy_intp n_streams, cnp.npy_intp n_elements,
                          double* out) noexcept nogil
    void opg_mrg_fill_f32(int32_t* state, cnp.npy_intp n_streams, cnp.npy_intp n_elements,
                          float* out) noexcept nogil


cdef enum:
    MAXDIMS = 32
    M1 = 2147483647
    # Release the GIL for draws of at least this many samples.
    NOGIL_SIZE = 16384


cdef class MRGUniformThunk(CThunk):
    """``mrg_uniform{TensorType(dtype, ...), inplace}``: ``(rstate, size) -> [new_rstate,
    sample]`` for float32 and float64 samples.

    Parameters
    ----------
    node
        The Apply node (an ``mrg_uniform`` whose sample is float32 or float64).
    in_cells, out_cells
        Its storage cells.
    """

    cdef public object node
    cdef object perform_fn
    cdef list in_cells, out_cells
    cdef int ndim, out_typenum
    cdef bint inplace, is_f32

    def __init__(self, node, list in_cells, list out_cells):
        dtype = node.outputs[1].type.dtype
        if dtype not in ("float32", "float64"):
            raise ValueError(f"{node.op}: no C loop for {dtype} samples")
        if node.outputs[1].type.ndim > MAXDIMS:
            raise ValueError(f"{node.op}: more than {MAXDIMS} dimensions")
        self.node = node
        self.perform_fn = node.op.perform
        self.in_cells, self.out_cells = in_cells, out_cells
        self.inputs, self.outputs = in_cells, out_cells
        self.lazy = False
        self.ndim = node.outputs[1].type.ndim
        self.inplace = bool(node.op.inplace)
        self.is_f32 = dtype == "float32"
        self.out_typenum = cnp.NPY_FLOAT32 if self.is_f32 else cnp.NPY_FLOAT64

    cdef int run(self) except -1:
        if self.fast():
            self.perform_fn(self.node, [(<list>c)[0] for c in self.in_cells], self.out_cells)
        return 0

    cdef int fast(self) except -1:
        """Draw the sample; return 1 to let ``perform`` do it (nothing written yet)."""
        cdef object rs = (<list>self.in_cells[0])[0]
        cdef object sz = (<list>self.in_cells[1])[0]
        cdef cnp.ndarray state, size, sample
        cdef cnp.npy_intp dims[MAXDIMS]
        cdef cnp.npy_intp n_elements = 1, n_streams, d
        cdef int i
        if not cnp.PyArray_CheckExact(rs) or not cnp.PyArray_CheckExact(sz):
            return 1
        state, size = <cnp.ndarray>rs, <cnp.ndarray>sz
        if (cnp.PyArray_NDIM(state) != 2 or cnp.PyArray_DIM(state, 1) != 6
                or cnp.PyArray_DIM(state, 0) < 1
                or not cnp.PyArray_EquivTypenums(cnp.PyArray_TYPE(state), cnp.NPY_INT32)
                or not cnp.PyArray_ISNOTSWAPPED(state) or not cnp.PyArray_ISALIGNED(state)):
            return 1
        if self.inplace and not (cnp.PyArray_IS_C_CONTIGUOUS(state)
                                 and cnp.PyArray_ISWRITEABLE(state)):
            return 1
        if (cnp.PyArray_NDIM(size) != 1 or cnp.PyArray_DIM(size, 0) != self.ndim
                or not cnp.PyArray_EquivTypenums(cnp.PyArray_TYPE(size), cnp.NPY_INT64)
                or not cnp.PyArray_ISNOTSWAPPED(size) or not cnp.PyArray_ISALIGNED(size)):
            return 1
        for i in range(self.ndim):
            d = (<cnp.npy_int64*>cnp.PyArray_GETPTR1(size, i))[0]
            if d < 0 or d > M1:
                return 1
            dims[i] = d
            n_elements *= d
            if n_elements > M1:
                return 1
        if not self.inplace:
            state = <cnp.ndarray>cnp.PyArray_NewCopy(state, cnp.NPY_CORDER)
        sample = <cnp.ndarray>cnp.PyArray_EMPTY(self.ndim, dims, self.out_typenum, 0)
        n_streams = cnp.PyArray_DIM(state, 0)
        if n_elements:
            self._fill(<int32_t*>cnp.PyArray_DATA(state), n_streams, n_elements,
                       cnp.PyArray_DATA(sample))
        (<list>self.out_cells[0])[0] = state
        (<list>self.out_cells[1])[0] = sample
        return 0

    cdef void _fill(self, int32_t* state, cnp.npy_intp n_streams, cnp.npy_intp n_elements,
                    void* out):
        """The C loop of the sample's dtype, without the GIL for big draws."""
        if n_elements >= NOGIL_SIZE:
            with nogil:
                if self.is_f32:
                    opg_mrg_fill_f32(state, n_streams, n_elements, <float*>out)
                else:
                    opg_mrg_fill_f64(state, n_streams, n_elements, <double*>out)
        elif self.is_f32:
            opg_mrg_fill_f32(state, n_streams, n_elements, <float*>out)
        else:
            opg_mrg_fill_f64(state, n_streams, n_elements, <double*>out)
