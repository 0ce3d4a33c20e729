# cython: language_level=3
"""The BLAS routine types of SciPy's ``cython_blas`` that :mod:`opgraph_c._blas` loads (and
hands to backend-c's other extensions through ``_blas.routine_address``)."""

ctypedef void (*sgemm_t)(char*, char*, int*, int*, int*, float*, float*, int*, float*, int*,
                         float*, float*, int*) noexcept nogil
ctypedef void (*dgemm_t)(char*, char*, int*, int*, int*, double*, double*, int*, double*,
                         int*, double*, double*, int*) noexcept nogil
ctypedef void (*sgemv_t)(char*, int*, int*, float*, float*, int*, float*, int*, float*,
                         float*, int*) noexcept nogil
ctypedef void (*dgemv_t)(char*, int*, int*, double*, double*, int*, double*, int*, double*,
                         double*, int*) noexcept nogil
ctypedef void (*sger_t)(int*, int*, float*, float*, int*, float*, int*, float*,
                        int*) noexcept nogil
ctypedef void (*dger_t)(int*, int*, double*, double*, int*, double*, int*, double*,
                        int*) noexcept nogil
ctypedef float (*sdot_t)(int*, float*, int*, float*, int*) noexcept nogil
ctypedef double (*ddot_t)(int*, double*, int*, double*, int*) noexcept nogil
