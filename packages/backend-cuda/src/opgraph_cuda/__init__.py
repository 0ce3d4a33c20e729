"""opgraph-backend-cuda: opgraph graphs on NVIDIA GPUs, through PyCUDA.

Installing it gives ``opgraph.gpuarray`` (Theano's ``theano.gpuarray``) and, with
``device=cuda``, float32 shared variables on the GPU and graphs lifted there by rewrites:
fused elementwise graphs and reductions run generated CUDA kernels
(:mod:`opgraph_cuda.kernels`), matrix products run cuBLAS. PyCUDA is an optional extra
(``opgraph-backend-cuda[pycuda]``); without it, or without a driver, the package imports and
``python -m opgraph plugins`` says why the GPU is unavailable. ``cuda__emulate=True`` runs
the same kernels on the CPU (tests without a GPU).
"""

from opgraph_cuda.runtime import GpuUnavailable, device_status, get_runtime

__version__ = "0.1.0"

__all__ = ["GpuUnavailable", "__version__", "device_status", "get_runtime"]
