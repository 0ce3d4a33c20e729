"""What every runtime provides: device memory, copies, kernel modules, launches.

A runtime is one of :class:`~opgraph_cuda.runtime.pycuda_runtime.PyCudaRuntime` (a real GPU
through PyCUDA) or :class:`~opgraph_cuda.runtime.emulator.EmulatorRuntime` (host memory, the
same kernel text compiled as C++: how tests run without a GPU). Ops, GpuArray and cuBLAS
calls speak only this interface.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from opgraph_cuda.compiler import CudaSource, KernelSig, param_kind

__all__ = [
    "CudaSource",
    "DeviceBuffer",
    "GpuMemoryError",
    "GpuUnavailable",
    "KernelSig",
    "Launcher",
    "Runtime",
    "param_kind",
]


class GpuUnavailable(RuntimeError):
    """No GPU can be used: PyCUDA or a driver is missing, or no device answers.

    The message says what is missing and what to install or set.
    """


class GpuMemoryError(MemoryError):
    """A device allocation failed; the message gives the size asked for and what is free."""


class DeviceBuffer(abc.ABC):
    """An allocation of device memory; freed when the last reference goes."""

    ptr: int
    nbytes: int


#: ``launcher(grid, block, *args)``: queue one launch of a compiled kernel.
Launcher = Callable[..., None]


class Runtime(abc.ABC):
    """A device: memory, copies between host and device, kernel modules and launches."""

    #: ``"pycuda"`` or ``"emulator"``.
    name: str
    #: What kernels are compiled for: ``"sm_90"``, ``"emulator"``.
    arch: str
    #: The device's name, as the driver reports it.
    device_name: str
    #: Streaming multiprocessors (the emulator says 1).
    sm_count: int
    #: Plan grids of at most this many blocks: kernels loop over the rest.
    max_blocks: int

    @abc.abstractmethod
    def alloc(self, nbytes: int) -> DeviceBuffer:
        """``nbytes`` of device memory (at least one byte is reserved for an empty array)."""

    @abc.abstractmethod
    def to_device(self, ptr: int, host: np.ndarray) -> None:
        """Copy a C-contiguous host array to device address ``ptr``."""

    @abc.abstractmethod
    def to_host(self, host: np.ndarray, ptr: int) -> None:
        """Copy ``host.nbytes`` bytes from device address ``ptr`` into a C-contiguous array."""

    @abc.abstractmethod
    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """Copy ``nbytes`` bytes between two device addresses."""

    @abc.abstractmethod
    def load(self, source: CudaSource) -> Mapping[str, Launcher]:
        """Compile ``source`` (or take it from the compile cache) and load it: its launchers,
        by kernel name."""

    @abc.abstractmethod
    def synchronize(self) -> None:
        """Wait until every queued launch and copy is done."""

    @abc.abstractmethod
    def mem_info(self) -> tuple[int, int]:
        """``(free, total)`` bytes of device memory."""

    def describe(self) -> str:
        """One line naming the device, for ``print_active_device`` and ``plugins``."""
        return f"{self.device_name} ({self.arch}, {self.sm_count} SMs) through {self.name}"


def check_args(sig: KernelSig, args: Sequence[Any]) -> None:
    """Raise TypeError when a launch passes the wrong number of arguments."""
    if len(args) != len(sig.params):
        raise TypeError(
            f"kernel {sig.name} takes {len(sig.params)} arguments "
            f"({', '.join(sig.params)}), got {len(args)}"
        )
