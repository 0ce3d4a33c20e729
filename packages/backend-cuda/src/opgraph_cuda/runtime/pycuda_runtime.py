"""The GPU runtime: PyCUDA's driver API, on the device's primary context.

Memory comes from a PyCUDA ``DeviceMemoryPool`` (a freed block is kept for the next
allocation of its size class: allocations per call cost microseconds, not a cudaMalloc).
Kernels are cubins built by nvcc for the device's compute capability
(:func:`opgraph_cuda.compiler.build`) and launched with ``prepared_call``.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from opgraph_cuda.compiler import build
from opgraph_cuda.runtime.base import (
    CudaSource,
    DeviceBuffer,
    GpuMemoryError,
    GpuUnavailable,
    KernelSig,
    Launcher,
    Runtime,
    check_args,
    param_kind,
)
from opgraph_cuda.runtime.emulator import grid3

__all__ = ["PyCudaRuntime"]

INSTALL_HINT = (
    "HINT: pip install 'opgraph-backend-cuda[pycuda]' (PyCUDA builds from source: it needs "
    "the CUDA toolkit's nvcc and headers, and an NVIDIA driver), or set device=cpu."
)


#: Host-to-device copies up to this size are queued (cuMemcpyHtoDAsync from pageable memory:
#: the driver copies the bytes to a staging buffer and returns without a device-wide wait).
ASYNC_COPY_BYTES = 1 << 16


class _PooledBuffer(DeviceBuffer):
    """A block of the memory pool; back to the pool when dropped."""

    def __init__(self, allocation: Any, nbytes: int) -> None:
        self.allocation = allocation
        self.ptr = int(allocation)
        self.nbytes = nbytes


class PyCudaRuntime(Runtime):
    """A :class:`Runtime` on GPU ``ordinal`` through PyCUDA."""

    name = "pycuda"

    def __init__(self, ordinal: int = 0) -> None:
        try:
            import pycuda.driver as drv
            import pycuda.tools
        except ImportError as exc:
            raise GpuUnavailable(f"PyCUDA is not installed ({exc}).\n{INSTALL_HINT}") from None
        try:
            drv.init()
            count = drv.Device.count()
        except Exception as exc:  # pycuda raises its own driver errors
            raise GpuUnavailable(
                f"the CUDA driver did not start: {exc}.\nHINT: check `nvidia-smi`; without an "
                "NVIDIA GPU and driver, set device=cpu."
            ) from None
        if not 0 <= ordinal < count:
            raise GpuUnavailable(
                f"device=cuda{ordinal} asked for GPU {ordinal}, but the driver sees {count} "
                f"GPU(s).\nHINT: use cuda0..cuda{max(count - 1, 0)}, or device=cpu."
            )
        self._drv = drv
        self.device = drv.Device(ordinal)
        self.context = self.device.retain_primary_context()
        self.context.push()
        major, minor = self.device.compute_capability()
        self.arch = f"sm_{major}{minor}"
        self.device_name = self.device.name()
        try:
            self.pci_bus_id = self.device.pci_bus_id()
        except Exception:  # older drivers: the bus id is only informative
            self.pci_bus_id = "?"
        self.sm_count = self.device.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)
        self.max_blocks = 32 * self.sm_count
        self.pool = pycuda.tools.DeviceMemoryPool()
        self._modules: dict[str, Mapping[str, Launcher]] = {}
        self._loaded: list[Any] = []  # the modules stay loaded while their launchers live
        self._lock = threading.Lock()
        atexit.register(self.close)

    def close(self) -> None:
        """Release the pool's memory and pop the context (at exit: PyCUDA aborts the process
        if a pushed context is left on its stack)."""
        if self.context is None:
            return
        try:
            self._drv.Context.synchronize()
            self.pool.stop_holding()
        finally:
            self.context.pop()
            self.context = None

    def alloc(self, nbytes: int) -> DeviceBuffer:
        size = max(int(nbytes), 1)
        try:
            return _PooledBuffer(self.pool.allocate(size), size)
        except self._drv.MemoryError:
            self.pool.free_held()
            try:
                return _PooledBuffer(self.pool.allocate(size), size)
            except self._drv.MemoryError:
                free, total = self.mem_info()
                raise GpuMemoryError(
                    f"out of GPU memory: asked for {size:,} bytes with {free:,} of "
                    f"{total:,} free on {self.device_name}.\nHINT: use smaller batches, or "
                    "free GPU shared variables and compiled functions you no longer need."
                ) from None

    def to_device(self, ptr: int, host: np.ndarray) -> None:
        if not host.nbytes:
            return
        if host.nbytes <= ASYNC_COPY_BYTES:
            # From pageable memory the driver stages the bytes before returning, without
            # waiting for the kernels queued before it (a synchronous copy waits for them).
            self._drv.memcpy_htod_async(ptr, host)
        else:
            self._drv.memcpy_htod(ptr, host)

    def to_host(self, host: np.ndarray, ptr: int) -> None:
        if host.nbytes:
            self._drv.memcpy_dtoh(host, ptr)

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        if nbytes:
            self._drv.memcpy_dtod(dst, src, nbytes)

    def synchronize(self) -> None:
        self._drv.Context.synchronize()

    def mem_info(self) -> tuple[int, int]:
        free, total = self._drv.mem_get_info()
        return int(free), int(total)

    def load(self, source: CudaSource) -> Mapping[str, Launcher]:
        with self._lock:
            found = self._modules.get(source.code)
            if found is not None:
                return found
        module = self._drv.module_from_file(str(build(source, self.arch)))
        launchers = {sig.name: _launcher(module, sig) for sig in source.kernels}
        with self._lock:
            self._modules[source.code] = launchers
            self._loaded.append(module)
        return launchers


def _launcher(module: Any, sig: KernelSig) -> Launcher:
    """``launch(grid, block, *args)`` of one kernel of a loaded cubin."""
    function = module.get_function(sig.name)
    function.prepare("".join(param_kind(p) for p in sig.params))
    call = function.prepared_call

    nparams = len(sig.params)

    def launch(grid: Sequence[int], block: Sequence[int], *args: Any) -> None:
        if len(args) != nparams:
            check_args(sig, args)
        call(
            grid if len(grid) == 3 else grid3(grid),
            block if len(block) == 3 else grid3(block),
            *args,
        )

    launch.kernel = sig  # type: ignore[attr-defined]
    return launch
