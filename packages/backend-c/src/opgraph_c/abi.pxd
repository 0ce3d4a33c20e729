# cython: language_level=3
"""The C interface between generated kernels and the precompiled drivers, for Cython.

Declares what ``include/opgraph_c_prelude.h`` defines: the C types named after NumPy dtypes
and the tables generated modules export in their capsules (``opg_elemwise_kernel``,
``opg_reduce_kernel``). Generated modules and the drivers (``_elemwise.pyx``,
``_reduce.pyx``) cimport them from here; nothing is imported at run time.
"""

cdef extern from "opgraph_c_prelude.h":
    # How Cython sees each C type (only for its type checks; gcc sees the prelude's typedefs).
    ctypedef unsigned char opg_bool
    ctypedef signed char opg_int8
    ctypedef short opg_int16
    ctypedef int opg_int32
    ctypedef long long opg_int64
    ctypedef unsigned char opg_uint8
    ctypedef unsigned short opg_uint16
    ctypedef unsigned int opg_uint32
    ctypedef unsigned long long opg_uint64
    ctypedef float opg_float32
    ctypedef double opg_float64

    # The table of a generated elementwise module (ELEMWISE_KERNEL capsule).
    ctypedef void (*opg_contig_fn)(ptrdiff_t, ptrdiff_t, char**) noexcept nogil
    ctypedef void (*opg_strided_fn)(ptrdiff_t, char**, const ptrdiff_t*) noexcept nogil
    ctypedef void (*opg_parallel_fn)(ptrdiff_t, char**, int) noexcept nogil
    ctypedef struct opg_elemwise_kernel:
        int abi
        int nin
        int nout
        opg_contig_fn contig
        opg_strided_fn strided
        opg_parallel_fn parallel
    int OPG_ELEMWISE_ABI

    # The table of a generated reduction module (REDUCE_KERNEL capsule).
    ctypedef void (*opg_reduce_fn)(const char*, char*, ptrdiff_t, ptrdiff_t, ptrdiff_t,
                                   ptrdiff_t, int) noexcept nogil
    ctypedef struct opg_reduce_kernel:
        int abi
        int openmp
        opg_reduce_fn reduce
    int OPG_REDUCE_ABI
