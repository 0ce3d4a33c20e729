"""``opgraph.gpuarray.basic_ops``: Theano's ``theano.gpuarray.basic_ops`` names."""

from __future__ import annotations

from opgraph_cuda.ops import (
    GpuAlloc,
    GpuContiguous,
    GpuDimShuffle,
    GpuFromHost,
    GpuOp,
    GpuReshape,
    GpuSubtensor,
    HostFromGpu,
    as_gpuarray_variable,
    gpu_contiguous,
    gpu_from_host,
    host_from_gpu,
)

__all__ = [
    "GpuAlloc",
    "GpuContiguous",
    "GpuDimShuffle",
    "GpuFromHost",
    "GpuOp",
    "GpuReshape",
    "GpuSubtensor",
    "HostFromGpu",
    "as_gpuarray_variable",
    "gpu_contiguous",
    "gpu_from_host",
    "host_from_gpu",
]
