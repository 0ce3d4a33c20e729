"""``opgraph.gpuarray``: Theano 1.0's ``theano.gpuarray`` names, served by backend-cuda.

``pygpu_activated`` is True once a GPU (or, under ``cuda__emulate``, the emulator) is
usable; reading it starts the runtime. ``use("cuda0")`` is Theano's way to start a device
from code. The ops' classes are the same objects as in :mod:`opgraph_cuda`.
"""

from __future__ import annotations

import importlib
from typing import Any

from opgraph_cuda.api import basic_ops, type
from opgraph_cuda.api.basic_ops import (
    GpuAlloc,
    GpuContiguous,
    GpuDimShuffle,
    GpuFromHost,
    GpuReshape,
    GpuSubtensor,
    HostFromGpu,
    as_gpuarray_variable,
    gpu_contiguous,
    gpu_from_host,
    host_from_gpu,
)
from opgraph_cuda.api.type import (
    GpuArrayConstant,
    GpuArraySharedVariable,
    GpuArrayType,
    GpuArrayVariable,
    get_context,
    gpuarray_shared_constructor,
)
from opgraph_cuda.array import GpuArray
from opgraph_cuda.runtime import GpuUnavailable, device_status, get_runtime

__all__ = [
    "GPUA_mrg_uniform",
    "GpuAlloc",
    "GpuArray",
    "GpuArrayConstant",
    "GpuArraySharedVariable",
    "GpuArrayType",
    "GpuArrayVariable",
    "GpuCAReduce",
    "GpuCAReduceCuda",
    "GpuContiguous",
    "GpuDimShuffle",
    "GpuElemwise",
    "GpuFromHost",
    "GpuMRG_uniform",
    "GpuReshape",
    "GpuSubtensor",
    "HostFromGpu",
    "as_gpuarray_variable",
    "basic_ops",
    "device_status",
    "get_context",
    "gpu_contiguous",
    "gpu_from_host",
    "gpuarray_shared_constructor",
    "host_from_gpu",
    "pygpu_activated",
    "rng_mrg",
    "type",
    "use",
]

#: Names served by modules that load the kernel generators (imported on first use).
_LAZY = {
    "GpuElemwise": "opgraph_cuda.elemwise",
    "GpuCAReduce": "opgraph_cuda.elemwise",
    "GpuCAReduceCuda": "opgraph_cuda.elemwise",
    "elemwise": "opgraph_cuda.elemwise",
    "blas": "opgraph_cuda.blas",
    "nnet": "opgraph_cuda.nnet",
    "rng_mrg": "opgraph_cuda.rng_mrg",
    "GpuMRG_uniform": "opgraph_cuda.rng_mrg",
    "GPUA_mrg_uniform": "opgraph_cuda.rng_mrg",
}


#: The names of :data:`_LAZY` that are modules themselves.
_MODULES = ("elemwise", "blas", "nnet", "rng_mrg")


def use(device: str = "cuda", force: bool = False) -> None:
    """Start ``device`` (Theano's ``theano.gpuarray.use``); raise GpuUnavailable when
    ``force`` and it cannot start, else warn and stay on the CPU."""
    import warnings

    from opgraph import config

    with config.change_flags(init_gpu_device=device):
        try:
            get_runtime()
        except GpuUnavailable:
            if force:
                raise
            warnings.warn(device_status(), RuntimeWarning, stacklevel=2)


def __getattr__(name: str) -> Any:
    if name == "pygpu_activated":
        try:
            get_runtime()
        except GpuUnavailable:
            return False
        return True
    if name in _LAZY:
        module = importlib.import_module(_LAZY[name])
        value = module if name in _MODULES else getattr(module, name)
        if name == "GpuCAReduceCuda":
            value = module.GpuCAReduce
        globals()[name] = value
        return value
    raise AttributeError(f"module 'opgraph.gpuarray' has no attribute {name!r}")
