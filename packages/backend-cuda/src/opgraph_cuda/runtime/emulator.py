"""The CPU emulator: host memory as device memory, kernel modules compiled as C++.

Tests run every GPU graph through it on machines without a GPU (CI): the kernel text is the
very text nvcc compiles, built by g++ with ``include/opgraph_cuda_emulate.h`` (see
:func:`opgraph_cuda.compiler.emulated_text`). Each module is also compiled by nvcc for every
architecture of :data:`~opgraph_cuda.compiler.CHECK_ARCHS` when nvcc is installed and the
``cuda__emulator_nvcc`` flag is on, on a background thread (nvcc takes seconds; the tests
go on meanwhile): :func:`~opgraph_cuda.compiler.wait_for_nvcc_checks` reports the text that
g++ accepts but nvcc rejects.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from opgraph import config
from opgraph_cuda.compiler import build, check_with_nvcc_later
from opgraph_cuda.runtime.base import (
    CudaSource,
    DeviceBuffer,
    GpuMemoryError,
    KernelSig,
    Launcher,
    Runtime,
    check_args,
    param_kind,
)

__all__ = ["EmulatorRuntime"]

_ALIGN = 256
_CTYPES: dict[str, Callable[[Any], ctypes._SimpleCData]] = {
    "P": ctypes.c_void_p,
    "q": ctypes.c_ssize_t,
    "i": ctypes.c_int,
    "f": ctypes.c_float,
    "d": ctypes.c_double,
}


class _HostBuffer(DeviceBuffer):
    """``nbytes`` of host memory, aligned to 256 bytes like a device allocation."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self._raw = np.empty(nbytes + _ALIGN, dtype=np.uint8)
        base = self._raw.ctypes.data
        self.ptr = base + (-base) % _ALIGN


def grid3(dims: Sequence[int]) -> tuple[int, int, int]:
    """A grid or block shape given as 1 to 3 ints, as three positive ints."""
    dims = tuple(int(d) for d in dims)
    if not 1 <= len(dims) <= 3 or min(dims) < 1:
        raise ValueError(f"a launch's grid and block are 1 to 3 positive ints, got {dims}")
    return (*dims, 1, 1)[:3]  # type: ignore[return-value]


class EmulatorRuntime(Runtime):
    """A :class:`Runtime` on the CPU: same kernels, same launches, host memory."""

    name = "emulator"
    arch = "emulator"
    device_name = "CPU emulator"
    sm_count = 1
    max_blocks = 4

    def __init__(self) -> None:
        self._modules: dict[str, Mapping[str, Launcher]] = {}
        self._lock = threading.Lock()

    def alloc(self, nbytes: int) -> DeviceBuffer:
        try:
            return _HostBuffer(max(int(nbytes), 1))
        except MemoryError:
            raise GpuMemoryError(
                f"out of (emulated) GPU memory: asked for {int(nbytes):,} bytes"
            ) from None

    def to_device(self, ptr: int, host: np.ndarray) -> None:
        if host.nbytes:
            ctypes.memmove(ptr, host.ctypes.data, host.nbytes)

    def to_host(self, host: np.ndarray, ptr: int) -> None:
        if host.nbytes:
            ctypes.memmove(host.ctypes.data, ptr, host.nbytes)

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        if nbytes:
            ctypes.memmove(dst, src, nbytes)

    def synchronize(self) -> None:
        """Launches run to completion when called: nothing is ever pending."""

    def mem_info(self) -> tuple[int, int]:
        import os

        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        return avail, pages

    def load(self, source: CudaSource) -> Mapping[str, Launcher]:
        with self._lock:
            found = self._modules.get(source.code)
            if found is not None:
                return found
        library = ctypes.CDLL(str(build(source, self.arch)))
        if config.cuda__emulator_nvcc:  # only text g++ took: its own errors are raised above
            check_with_nvcc_later(source)
        launchers = {sig.name: _launcher(library, sig) for sig in source.kernels}
        with self._lock:
            self._modules[source.code] = launchers
        return launchers


def _launcher(library: ctypes.CDLL, sig: KernelSig) -> Launcher:
    """``launch(grid, block, *args)`` of one kernel of an emulated module."""
    entry = getattr(library, f"opg_launch_{sig.name}")
    entry.argtypes = [ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(ctypes.c_void_p)]
    entry.restype = None
    makers = [_CTYPES[param_kind(p)] for p in sig.params]

    def launch(grid: Sequence[int], block: Sequence[int], *args: Any) -> None:
        check_args(sig, args)
        dims = (ctypes.c_uint * 6)(*grid3(grid), *grid3(block))
        values = [make(a) for make, a in zip(makers, args, strict=True)]
        pointers = (ctypes.c_void_p * max(len(values), 1))(*[ctypes.addressof(v) for v in values])
        entry(dims, pointers)

    launch.kernel = sig  # type: ignore[attr-defined]
    return launch
