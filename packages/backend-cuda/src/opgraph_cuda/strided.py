"""Copies between strided device views: what ``GpuArray.copy``, ``get`` and ``astype`` use.

:func:`copy_into` takes any two arrays of one shape (device address, shape, byte strides,
dtype, runtime: a GpuArray or anything shaped like one), merges the dimensions both lay out
contiguously, and launches one generated kernel per (destination dtype, source dtype,
number of dimensions): each thread turns a flat index into both offsets. It lives below
:mod:`opgraph_cuda.array`, so GpuArray can copy without importing the kernel generators.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph_cuda.compiler import CudaSource, KernelSig
from opgraph_cuda.kernels.scalar import CTYPES, Operand, convert
from opgraph_cuda.runtime import Runtime

__all__ = ["collapse", "copy_into", "copy_source"]

BLOCK = 256
_lock = threading.Lock()
_cache: dict[tuple[str, str, int, str], Any] = {}


def collapse(
    shape: Sequence[int], strides: Sequence[Sequence[int]]
) -> tuple[list[int], list[list[int]]]:
    """Merge the dimensions of an iteration space shared by several operands.

    ``strides[k]`` are operand ``k``'s element strides over ``shape``. Size-1 dimensions go
    (their strides never matter); dimension ``i`` merges into ``i + 1`` when, for every
    operand, ``stride[i] == stride[i + 1] * shape[i + 1]`` (broadcast dimensions, stride 0,
    merge with each other). Returns the new shape and strides, in C order; ``[]`` for a
    single element.
    """
    keep = [d for d, n in enumerate(shape) if n != 1]
    dims = [int(shape[d]) for d in keep]
    st = [[int(s[d]) for d in keep] for s in strides]
    i = len(dims) - 2
    while i >= 0:
        if all(s[i] == s[i + 1] * dims[i + 1] for s in st):
            dims[i] *= dims[i + 1]
            del dims[i + 1]
            for s in st:
                s[i] = s[i + 1]
                del s[i + 1]
        i -= 1
    return dims, st


def copy_source(dst: np.dtype, src: np.dtype, ndim: int) -> CudaSource:
    """The kernel copying (and converting) an ``ndim``-d strided view into another; a
    conversion is :func:`~opgraph_cuda.kernels.scalar.convert`'s (float16 rounds to
    nearest even)."""
    dt, st = CTYPES[dst.name], CTYPES[src.name]
    names = [f"n{d}" for d in range(ndim)]
    dsts = [f"d{d}" for d in range(ndim)]
    srcs = [f"s{d}" for d in range(ndim)]
    params = [(f"{dt}*", "dst"), (f"const {st}*", "src"), ("ptrdiff_t", "n")] + [
        ("ptrdiff_t", v) for v in (*names, *dsts, *srcs)
    ]
    body = ["        ptrdiff_t rest = i, od = 0, os = 0, k;"]
    for d in range(ndim - 1, 0, -1):
        body.append(f"        k = rest % n{d}; rest /= n{d}; od += k * d{d}; os += k * s{d};")
    body.append("        od += rest * d0; os += rest * s0;")
    # C casts; to bool by != 0; float16 through float32 (loads exact, stores rounded)
    value = convert(Operand("src[os]", src.name), dst.name).text
    code = "\n".join(
        [
            f"/* strided copy: {src.name} -> {dst.name}, {ndim} dimension(s) (GpuArray.copy, ",
            " * astype, get of a view). Each thread turns flat indices into both offsets. */",
            '#include "opgraph_cuda_prelude.cuh"',
            "",
            f'extern "C" __global__ void opg_copy({", ".join(f"{t} {v}" for t, v in params)}) {{',
            "    for (ptrdiff_t i = blockIdx.x * (ptrdiff_t)blockDim.x + threadIdx.x; i < n;",
            "         i += (ptrdiff_t)gridDim.x * blockDim.x) {",
            *body,
            f"        dst[od] = {value};",
            "    }",
            "}",
            "",
        ]
    )
    sig = KernelSig("opg_copy", tuple(t for t, _ in params))
    return CudaSource(f"strided_copy_{src.name}_{dst.name}_{ndim}d", code, (sig,))


def copy_into(dst: Any, src: Any) -> None:
    """Copy ``src`` into ``dst`` element by element (same shape, any strides, converting
    the dtype when they differ)."""
    if tuple(dst.shape) != tuple(src.shape):
        raise ValueError(f"copy_into: shapes differ: {dst.shape} and {src.shape}")
    size = int(np.prod(dst.shape, dtype=np.int64))
    if size == 0:
        return
    runtime: Runtime = dst.runtime
    dsteps = [s // dst.dtype.itemsize for s in dst.strides]
    ssteps = [s // src.dtype.itemsize for s in src.strides]
    shape, (dsteps, ssteps) = collapse(dst.shape, [dsteps, ssteps])
    if not shape:  # a single element
        shape, dsteps, ssteps = [1], [0], [0]
    key = (dst.dtype.str, src.dtype.str, len(shape), runtime.name)
    launch = _cache.get(key)
    if launch is None:
        source = copy_source(dst.dtype, src.dtype, len(shape))
        launch = runtime.load(source)["opg_copy"]
        with _lock:
            _cache[key] = launch
    grid = min(-(-size // BLOCK), runtime.max_blocks)
    launch((grid,), (BLOCK,), dst.ptr, src.ptr, size, *shape, *dsteps, *ssteps)
