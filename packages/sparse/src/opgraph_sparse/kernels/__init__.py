"""C kernels for the sparse Ops, handed to opgraph-backend-c through its kernel hook.

Each module here (imported only from the hook, so only where backend-c is installed) defines
``register(registry)``; :func:`register_kernels` calls every one of them, then registers the
package's other Ops as running their ``perform`` on purpose (see :data:`PERFORM_REASON`).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import Any

import opgraph_sparse
import opgraph_sparse.api
from opgraph.graph.op import Op

__all__ = ["OWNER", "PERFORM_REASON", "register_kernels"]

OWNER = "opgraph-sparse"

#: Why the sparse Ops without a kernel here run ``perform`` on the c linker. An Op class may
#: say more in a ``perform_reason`` class attribute.
PERFORM_REASON = (
    "scipy.sparse's compiled routines do the work in perform (format conversion, indexing, "
    "stacking, elementwise on the stored values); a C kernel would repeat the same loop"
)


def register_kernels(registry: Any) -> None:
    """Put every kernel of this package into backend-c's ``registry``; the other Ops of
    ``opgraph.sparse`` are registered as running ``perform`` with their reason."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(registry)
    for op_class in sparse_op_classes():
        if registry.lookup(op_class) is None:
            reason = getattr(op_class, "perform_reason", PERFORM_REASON)
            registry.register_perform(op_class, reason, owner=OWNER)


def sparse_op_classes() -> list[type]:
    """Every Op class defined by opgraph-sparse's modules, in a stable order."""
    found: dict[str, type] = {}
    for module_name in sorted(_package_modules()):
        module = importlib.import_module(module_name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, Op) and obj.__module__ == module_name:
                found[f"{module_name}.{name}"] = obj
    return [found[k] for k in sorted(found)]


def _package_modules() -> list[str]:
    """The names of opgraph-sparse's Op modules (not its kernels, rewrites or hooks)."""
    skip = ("plugin", "kernels", "api", "rewrites", "rewriteset", "testing")
    return [
        f"opgraph_sparse.{info.name}"
        for info in pkgutil.iter_modules(opgraph_sparse.__path__)
        if not info.name.startswith(("opt_", "_")) and info.name not in skip
    ]
