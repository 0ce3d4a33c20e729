"""backend-c's C kernels for core's Ops, one module per core module (``elemwise`` for
``opgraph.tensor.elemwise``, ``blas`` for ``opgraph.tensor.blas``), and the scalar-op table
fused loops are built from (``scalar``).

Each kernel module defines ``register(registry, owner)``, which registers its entries;
:func:`register_core_kernels` calls every one of them.
"""

from __future__ import annotations

import importlib
import pkgutil

from opgraph.link.dispatch import KernelRegistry

__all__ = ["register_core_kernels"]

OWNER = "opgraph-backend-c"


def register_core_kernels(registry: KernelRegistry) -> None:
    """Fill ``registry`` with backend-c's kernels for core's Ops (every kernels module)."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(registry, OWNER)
