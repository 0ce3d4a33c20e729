"""The flags backend-cuda declares (``python -m opgraph plugins`` lists them)."""

from __future__ import annotations

from typing import Any

__all__ = ["add_flags"]


def add_flags(config: Any) -> None:
    """Declare ``cuda__*`` on ``config`` (once; a second call changes nothing)."""
    from opgraph.configparser import BoolParam, EnumStr, StrParam

    flags = [
        (
            "cuda__emulate",
            "Run GPU graphs on the CPU emulator instead of a GPU: host memory, and the very "
            "kernel text nvcc compiles, built as C++. For testing without a GPU (slow).",
            BoolParam(False),
        ),
        (
            "cuda__emulator_nvcc",
            "With cuda__emulate, also compile each kernel module with nvcc for sm_75..sm_90 "
            "(when nvcc is installed; on a background thread), so kernels g++ accepts but "
            "nvcc rejects fail (opgraph_cuda.compiler.wait_for_nvcc_checks).",
            BoolParam(True),
        ),
        (
            "cuda__cublas",
            "Path of the libcublas to load; empty: search the CUDA toolkit, then the "
            "nvidia-cublas wheels, then the system's library path.",
            StrParam(""),
        ),
        (
            "cuda__lift",
            "When graphs move to the GPU: auto (when device is a GPU, or a graph already "
            "holds GPU variables), always, or never.",
            EnumStr("auto", ["always", "never"]),
        ),
    ]
    for name, doc, param in flags:
        if name not in config:
            config.add(name, doc, param)
