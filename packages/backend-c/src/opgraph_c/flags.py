"""backend-c's config flags, declared on core's config by the plugin (or by the registry
when backend-c is used without its entry point)."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["declare_flags"]


def declare_flags(config: Any) -> None:
    """Declare backend-c's config flags on ``config`` (each once)."""
    from opgraph.configparser import BoolParam, IntParam, StrParam

    flags = [
        (
            "openmp",
            "Let the C kernels use OpenMP threads on large arrays: elementwise loops, "
            "reductions, the native gemv (default: on with more than one CPU).",
            BoolParam(lambda: (os.cpu_count() or 1) > 1),
        ),
        (
            "c__cc",
            "The C compiler that builds generated kernels (called directly, not through "
            "setuptools).",
            StrParam("gcc"),
        ),
        (
            "c__march_native",
            "Build kernels for this machine's CPU (-march=native: AVX2/AVX-512 loops). The "
            "CPU is part of the cache key, so a shared cache stays correct.",
            BoolParam(True),
        ),
        ("c__cflags", "Extra flags for the C compiler, space-separated.", StrParam("")),
        (
            "c__werror",
            "Fail a kernel's build on any C compiler warning (-Werror); backend-c's tests "
            "turn it on, so generated code stays free of warnings.",
            BoolParam(False),
        ),
        (
            "c__openmp_threshold",
            "Elementwise loops and reductions with at least this many elements use OpenMP "
            "threads (when config.openmp is true).",
            IntParam(200_000, validator=lambda n: n >= 0),
        ),
        (
            "c__buffer_pool_mb",
            "MiB of freed big (>= 4 MiB) elementwise output buffers kept for reuse, so the "
            "next call's output needs no fresh, page-faulting memory; 0 turns the pool off. "
            "Read at each such allocation. See opgraph_c.buffer_pool_info() and "
            "opgraph_c.release_buffer_pool().",
            IntParam(256, validator=lambda n: n >= 0),
        ),
    ]
    for name, doc, param in flags:
        if name not in config:
            config.add(name, doc, param)
