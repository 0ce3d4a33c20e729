"""The process's GPU runtime: chosen once from the flags, shared by every GPU op.

``cuda__emulate=True`` gives the CPU emulator (tests); otherwise PyCUDA drives the GPU named
by ``device`` (``cuda``/``cudaN``) or ``init_gpu_device``. A failure to start is remembered:
later calls raise the same :class:`GpuUnavailable` at once instead of trying again.
"""

from __future__ import annotations

import sys
import threading

from opgraph import config
from opgraph_cuda.runtime.base import (
    CudaSource,
    DeviceBuffer,
    GpuMemoryError,
    GpuUnavailable,
    KernelSig,
    Launcher,
    Runtime,
)

__all__ = [
    "CudaSource",
    "DeviceBuffer",
    "GpuMemoryError",
    "GpuUnavailable",
    "KernelSig",
    "Launcher",
    "Runtime",
    "device_ordinal",
    "device_status",
    "get_runtime",
    "gpu_requested",
]

_runtimes: dict[str, Runtime | GpuUnavailable] = {}
_lock = threading.Lock()


def gpu_requested() -> bool:
    """True when ``device`` names a GPU (``cuda``, ``cudaN``, ``gpu``, ``gpuN``)."""
    return str(config.device).startswith(("cuda", "gpu"))


def device_ordinal() -> int:
    """The GPU number of ``device`` (else ``init_gpu_device``): ``cuda1`` -> 1, ``cuda`` -> 0."""
    for name in (str(config.device), str(config.init_gpu_device)):
        if name.startswith(("cuda", "gpu")):
            digits = name.removeprefix("cuda").removeprefix("gpu")
            return int(digits) if digits.isdigit() else 0
    return 0


def get_runtime() -> Runtime:
    """The runtime GPU ops run on; raises :class:`GpuUnavailable` saying why there is none."""
    kind = "emulator" if config.cuda__emulate else f"pycuda:{device_ordinal()}"
    found = _runtimes.get(kind)
    if found is None:
        with _lock:
            found = _runtimes.get(kind)
            if found is None:
                found = _start(kind)
                _runtimes[kind] = found
    if isinstance(found, GpuUnavailable):
        raise GpuUnavailable(str(found))
    return found


def _start(kind: str) -> Runtime | GpuUnavailable:
    if kind == "emulator":
        from opgraph_cuda.runtime.emulator import EmulatorRuntime

        return EmulatorRuntime()
    from opgraph_cuda.runtime.pycuda_runtime import PyCudaRuntime

    ordinal = int(kind.split(":")[1])
    try:
        runtime = PyCudaRuntime(ordinal)
    except GpuUnavailable as exc:
        return exc
    if config.print_active_device:  # Theano's line, on stderr
        print(
            f"Mapped name None to device cuda{ordinal}: {runtime.device_name} "
            f"({runtime.pci_bus_id})",
            file=sys.stderr,
        )
    return runtime


def device_status() -> str:
    """One line saying which GPU opgraph uses, or why none can be used."""
    try:
        return "GPU: " + get_runtime().describe()
    except GpuUnavailable as exc:
        return "GPU unavailable: " + str(exc).replace("\n", " ")
