"""Generated CUDA kernels, one module per family of core ops (mirroring core's modules).

- :mod:`~opgraph_cuda.kernels.scalar`: scalar op -> CUDA C++ expression, and fused
  ``Composite`` graphs as one straight-line device function;
- :mod:`~opgraph_cuda.kernels.elemwise`: elementwise kernels (contiguous and strided; the
  strided copy GpuArray uses is :mod:`opgraph_cuda.strided`'s);
- :mod:`~opgraph_cuda.kernels.reduce`: reductions over any axes (rows, columns, split-K);
- :mod:`~opgraph_cuda.kernels.nnet`: row-wise softmax, log-softmax and the fused
  softmax/cross-entropy kernels;
- :mod:`~opgraph_cuda.kernels.rng_mrg`: MRG31k3p streams (``MRG_RandomStreams``), one
  thread per stream.

Every module's text starts with ``#include "opgraph_cuda_prelude.cuh"`` and a comment naming
what it computes; it compiles under nvcc and, for tests, under g++ with the CPU emulator.
"""
