"""backend-c's kernel table: Op class -> C kernel, filled by backend-c and by the hook.

:func:`get_registry` builds the :class:`~opgraph.link.dispatch.KernelRegistry` the first
time the ``c`` linker needs it: backend-c's own kernels for core's Ops
(:mod:`opgraph_c.kernels`), then every plugin's ``opgraph_c_kernels(registry)``.

An entry's ``impl(op, node)`` returns a :class:`~opgraph_c.spec.CModule` (generated source),
a :class:`~opgraph_c.spec.Precompiled` (a thunk from an installed extension),
:data:`~opgraph_c.spec.PERFORM`, or None (no C code for that node). The registry's thunk
maker is :data:`opgraph_c.pipeline.pipeline`, which resolves each node once; a node with no
C code runs its Op's ``perform`` through the registry's one fall-back path (a one-time
warning, ``[py-fallback]`` in profiles).
"""

from __future__ import annotations

import threading
from typing import Any

from opgraph.link.dispatch import KernelRegistry
from opgraph.plugins import get_plugin_manager
from opgraph_c import hookspecs
from opgraph_c._threads import team_options
from opgraph_c.flags import declare_flags
from opgraph_c.kernels import register_core_kernels
from opgraph_c.pipeline import pipeline
from opgraph_c.spec import PERFORM, BundlePart, CModule, Precompiled

__all__ = ["CKernelRegistry", "get_registry", "reset_registry"]


class CKernelRegistry(KernelRegistry):
    """The ``c`` backend's registry, as ``opgraph_c_kernels(registry)`` receives it.

    Besides registering, it hands a plugin the kernel author's toolkit, so that a plugin's
    kernels module needs no import of ``opgraph_c`` (its package may not depend on
    backend-c): ``registry.CModule``, ``registry.PERFORM``, ``registry.Precompiled``,
    ``registry.BundlePart`` and ``registry.team_options(kernel)`` (the thread policy of a
    row of ``_threads.POLICY``, as keyword arguments of a ``Team``). Generated sources may
    still ``cimport`` backend-c's ``.pxd`` files: they are compiled by backend-c.
    """

    CModule = CModule
    PERFORM = PERFORM
    Precompiled = Precompiled
    BundlePart = BundlePart
    team_options = staticmethod(team_options)


_lock = threading.RLock()
_registry: KernelRegistry | None = None
_registry_pm: Any = None


def get_registry() -> CKernelRegistry:
    """The ``c`` backend's registry, built (and the hook called) on first use.

    Rebuilt if the process-wide plugin manager was replaced (tests reset it).
    """
    global _registry, _registry_pm
    pm = get_plugin_manager()
    registry = _registry
    if registry is not None and _registry_pm is pm:
        return registry
    with _lock:
        if _registry is not None and _registry_pm is pm:
            return _registry
        if pm.config is not None:
            declare_flags(pm.config)  # when backend-c is used without its entry point
        registry = CKernelRegistry("c", thunk_maker=pipeline.make_thunk)
        register_core_kernels(registry)
        caller = getattr(pm.hook, "opgraph_c_kernels", None)
        if caller is None or not caller.has_spec():
            pm.add_hookspecs(hookspecs)
        pm.hook.opgraph_c_kernels.call_historic(kwargs={"registry": registry})
        _registry, _registry_pm = registry, pm
        return registry


def reset_registry() -> None:
    """Forget the registry; the next :func:`get_registry` builds it again (tests only)."""
    global _registry, _registry_pm
    with _lock:
        _registry, _registry_pm = None, None
