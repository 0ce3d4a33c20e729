"""``opgraph.gpuarray.type``: Theano's ``theano.gpuarray.type`` names."""

from __future__ import annotations

from opgraph_cuda.runtime import Runtime, get_runtime
from opgraph_cuda.type import (
    GpuArrayConstant,
    GpuArraySharedVariable,
    GpuArrayType,
    GpuArrayVariable,
    gpu_supported_dtypes,
    gpuarray_shared_constructor,
)

__all__ = [
    "GpuArrayConstant",
    "GpuArraySharedVariable",
    "GpuArrayType",
    "GpuArrayVariable",
    "get_context",
    "gpu_supported_dtypes",
    "gpuarray_shared_constructor",
]


def get_context(context_name: str | None = None) -> Runtime:
    """The runtime behind a context name (opgraph has one GPU context per process)."""
    return get_runtime()
