"""The module behind this package's ``opgraph`` entry point: hook implementations only.

Nothing here imports PyCUDA or starts the GPU: the runtime starts when a GPU graph is
compiled or a GPU shared variable is made.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from opgraph.plugins import hookimpl

_warned_fallback = False


@hookimpl
def opgraph_add_config(config: Any) -> None:
    """The ``cuda__*`` flags."""
    from opgraph_cuda.config import add_flags

    add_flags(config)


@hookimpl
def opgraph_namespaces() -> Mapping[str, str]:
    """``opgraph.gpuarray`` is this package's library (Theano's ``theano.gpuarray``)."""
    return {"opgraph.gpuarray": "opgraph_cuda.api"}


@hookimpl
def opgraph_status() -> str:
    """Which GPU opgraph drives, or why none can be used."""
    from opgraph_cuda.runtime import device_status

    return device_status()


@hookimpl
def opgraph_shared_constructor(
    value: Any, name: str | None, strict: bool, allow_downcast: bool | None, borrow: bool
) -> Any | None:
    """Under ``device=cuda``, float32 (and float16) arrays become GPU shared variables, as
    in Theano; a GpuArray always does."""
    global _warned_fallback
    from opgraph_cuda.runtime import GpuUnavailable, get_runtime, gpu_requested

    module = type(value).__module__
    is_gpu = module.startswith("opgraph_cuda")
    if not is_gpu:
        if (
            not gpu_requested()
            or module != "numpy"
            or str(getattr(value, "dtype", ""))
            not in (
                "float32",
                "float16",
            )
        ):
            return None
        try:
            get_runtime()
        except GpuUnavailable as exc:
            from opgraph import config

            if config.force_device:
                raise
            if not _warned_fallback:
                _warned_fallback = True
                warnings.warn(
                    f"device={config.device}: {exc}\nShared variables and graphs stay on the CPU.",
                    RuntimeWarning,
                    stacklevel=4,
                )
            return None
    from opgraph_cuda.type import gpuarray_shared_constructor

    return gpuarray_shared_constructor(
        value, name=name, strict=strict, allow_downcast=allow_downcast, borrow=borrow
    )


@hookimpl
def opgraph_register_rewrites(optdb: Any) -> None:
    """The ``gpuarray`` stage, between fusion and the in-place passes: lift graphs to the
    GPU, then cut the transfer pairs left at the seams."""
    from opgraph.rewriting.db import SequenceDB
    from opgraph_cuda.opt import gpu_lift, load_lifters

    load_lifters()
    stage = SequenceDB(name="gpuarray")
    stage.register("gpu_lift", gpu_lift, "fast_run", "fast_compile", "gpuarray", position=1)
    optdb.register("gpuarray", stage, "fast_run", "fast_compile", "gpuarray", position=49.2)


# Declared by opgraph-backend-c; optionalhook: never called without it.
@hookimpl(optionalhook=True)
def opgraph_c_kernels(registry: Any) -> None:
    """GPU ops run their own thunks under the C linker (they queue kernels; no C to add)."""
    from opgraph_cuda.ops import GpuOp

    registry.register_perform(
        GpuOp,
        "queues CUDA kernels on the GPU; its thunk is built when the function is linked",
        owner="opgraph-backend-cuda",
    )
