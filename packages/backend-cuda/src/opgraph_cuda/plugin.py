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


#: Keyword extras of ``shared`` the GPU constructor takes (Theano's gpuarray constructor's).
_SHARED_OPTIONS = frozenset({"broadcastable", "target"})


@hookimpl
def opgraph_shared_constructor(
    value: Any,
    name: str | None,
    strict: bool,
    allow_downcast: bool | None,
    borrow: bool,
    options: Mapping[str, Any],
) -> Any | None:
    """Under ``device=cuda``, float32 and float16 arrays become GPU shared variables, as in
    Theano (float16 is stored as such; GPU kernels compute it in float32); a GpuArray
    always does.
    ``target="cuda"`` (a GPU or context name) moves an array of any GPU dtype and
    ``target="cpu"`` keeps it on the host; ``broadcastable=`` is honoured (the options of
    Theano's ``gpuarray_shared_constructor``); other options leave the value to core."""
    global _warned_fallback
    import numpy as np

    from opgraph_cuda.runtime import GpuUnavailable, get_runtime, gpu_requested

    if not _SHARED_OPTIONS.issuperset(options):
        return None  # e.g. shape=: core's TensorType takes it
    module = type(value).__module__
    is_gpu = module.startswith("opgraph_cuda")
    targeted = "target" in options
    target = options.get("target")
    if targeted and not is_gpu_target(target):
        return None  # "cpu", or a name that is no GPU: the host constructors answer
    if not is_gpu:
        if not isinstance(value, np.ndarray):
            return None
        floats = value.dtype in (np.float32, np.float16)
        if not (targeted or (gpu_requested() and floats)):
            return None
        from opgraph_cuda.type import gpu_supported_dtypes

        if str(value.dtype) not in gpu_supported_dtypes:
            raise TypeError(
                f"shared(..., target={target!r}): the GPU cannot hold {value.dtype} arrays "
                f"(it holds {', '.join(gpu_supported_dtypes)}).\nHINT: pass target='cpu', or "
                "convert the array first."
            )
        try:
            get_runtime()
        except GpuUnavailable as exc:
            from opgraph import config

            if config.force_device or targeted:
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
        value,
        name=name,
        strict=strict,
        allow_downcast=allow_downcast,
        borrow=borrow,
        broadcastable=options.get("broadcastable"),
    )  # one GPU context per process: every GPU target is it (context name None)


def is_gpu_target(target: Any) -> bool:
    """Whether a ``target=`` names the GPU: None (the default context, as in Theano),
    ``"gpu"``, ``"cuda"``, ``"cudaN"``, ``"gpuN"`` or a context name ``"devN"``."""
    if target is None:
        return True
    return isinstance(target, str) and target.startswith(("cuda", "gpu", "dev"))


@hookimpl
def opgraph_transfer(var: Any, target: Any) -> Any | None:
    """``opgraph.tensor.transfer(var, "cuda")`` (or ``"cudaN"``, ``"gpu"``, ``"devN"``,
    None): ``var`` as a GPU variable (Theano's ``theano.gpuarray`` transfer)."""
    if not is_gpu_target(target):
        return None
    from opgraph_cuda.ops import as_gpuarray_variable

    return as_gpuarray_variable(var)


@hookimpl
def opgraph_cache_info() -> list[str]:
    """The CUDA kernel modules in ``<compiledir>/cuda``, by target, for ``cache info``."""
    from opgraph_cuda.compiler import cache_info_lines

    return cache_info_lines()


@hookimpl
def opgraph_register_rewrites(optdb: Any) -> None:
    """The ``gpuarray`` stage, between fusion and the in-place passes: lift graphs to the
    GPU, then cut the transfer pairs left at the seams; and the GPU Ops' in-place versions
    (FAST_RUN's ``inplace`` stage)."""
    from opgraph.rewriting.db import SequenceDB
    from opgraph_cuda.opt import gpu_lift, load_lifters, rewrites

    load_lifters()
    stage = SequenceDB(name="gpuarray")
    stage.register("gpu_lift", gpu_lift, "fast_run", "fast_compile", "gpuarray", position=1)
    optdb.register("gpuarray", stage, "fast_run", "fast_compile", "gpuarray", position=49.2)
    rewrites.install(optdb)


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
