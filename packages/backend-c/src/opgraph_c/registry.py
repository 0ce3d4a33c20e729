"""backend-c's kernel table: Op class -> C kernel, filled by backend-c and by the hook.

:func:`get_registry` builds the :class:`~opgraph.link.dispatch.KernelRegistry` the first
time the ``c`` linker needs it: backend-c's own kernels for core's Ops
(:mod:`opgraph_c.kernels`), then every plugin's ``opgraph_c_kernels(registry)``.

An entry's ``impl(op, node)`` returns a :class:`~opgraph_c.spec.CModule` (generated source),
a :class:`~opgraph_c.spec.Precompiled` (a thunk from an installed extension),
:data:`~opgraph_c.spec.PERFORM`, or None (no C code for that node). :func:`make_c_thunk`,
the registry's thunk maker, compiles or loads the module through the cache and builds the
node's thunk; a node whose entry returns None runs its Op's ``perform`` (marked
``[py-fallback]`` in profiles, with a one-time warning).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from opgraph.graph.basic import Apply, Variable
from opgraph.link.dispatch import Kernel, KernelFallbackWarning, KernelRegistry
from opgraph_c.spec import PERFORM, CModule, Precompiled

__all__ = ["compiler_available", "get_registry", "make_c_thunk", "module_spec", "reset_registry"]

_lock = threading.RLock()
_registry: KernelRegistry | None = None
_registry_pm: Any = None
_warned: set[tuple[str, str]] = set()


def get_registry() -> KernelRegistry:
    """The ``c`` backend's registry, built (and the hook called) on first use.

    Rebuilt if the process-wide plugin manager was replaced (tests reset it).
    """
    global _registry, _registry_pm
    from opgraph.plugins import get_plugin_manager

    pm = get_plugin_manager()
    registry = _registry
    if registry is not None and _registry_pm is pm:
        return registry
    with _lock:
        if _registry is not None and _registry_pm is pm:
            return _registry
        if pm.config is not None:
            from opgraph_c.plugin import declare_flags

            declare_flags(pm.config)  # when backend-c is used without its entry point
        registry = KernelRegistry("c", thunk_maker=make_c_thunk)
        from opgraph_c.kernels import register_core_kernels

        register_core_kernels(registry)
        caller = getattr(pm.hook, "opgraph_c_kernels", None)
        if caller is None or not caller.has_spec():
            from opgraph_c import hookspecs

            pm.add_hookspecs(hookspecs)
        pm.hook.opgraph_c_kernels.call_historic(kwargs={"registry": registry})
        _registry, _registry_pm = registry, pm
        return registry


def reset_registry() -> None:
    """Forget the registry; the next :func:`get_registry` builds it again (tests only)."""
    global _registry, _registry_pm
    with _lock:
        _registry, _registry_pm = None, None


def module_spec(kernel: Kernel, node: Apply) -> Any:
    """What ``kernel`` generates for ``node``: a CModule, a Precompiled, :data:`PERFORM`, or
    None."""
    spec = kernel.impl(node.op, node)
    if spec is not None and spec is not PERFORM and not isinstance(spec, (CModule, Precompiled)):
        raise TypeError(
            f"the c kernel {kernel.impl!r} (from {kernel.owner}) for {node.op} returned "
            f"{spec!r}; a c kernel returns an opgraph_c.CModule, opgraph_c.Precompiled, "
            "opgraph_c.PERFORM or None."
            "\nHINT: wrap the "
            "Cython source as CModule(name, source)."
        )
    return spec


def make_c_thunk(
    kernel: Kernel,
    node: Apply,
    storage_map: dict[Variable, list[Any]],
    compute_map: dict[Variable, list[bool]] | None,
    no_recycling: Sequence[Any] = (),
) -> Any:
    """The registry's thunk maker: the compiled kernel's thunk, or ``perform`` as fallback."""
    spec = module_spec(kernel, node)
    if isinstance(spec, Precompiled):
        thunk = spec.make_thunk(
            node, [storage_map[v] for v in node.inputs], [storage_map[v] for v in node.outputs]
        )
        thunk.kernel = kernel
        return thunk
    if spec is None or (spec is not PERFORM and not compiler_available()):
        return fallback_thunk(node, storage_map, compute_map, no_recycling)
    if spec is PERFORM:
        if compute_map is None:
            compute_map = {v: [False] for v in storage_map}
        thunk = node.op.make_thunk(node, storage_map, compute_map, no_recycling)
        thunk.kernel = kernel
        return thunk
    from opgraph_c.cache import get_cache

    module = get_cache().load(spec, kernel)
    in_cells = [storage_map[v] for v in node.inputs]
    out_cells = [storage_map[v] for v in node.outputs]
    factory = spec.make_thunk or compute_thunk
    thunk = factory(module, node, in_cells, out_cells)
    thunk.kernel = kernel
    return thunk


def compiler_available() -> bool:
    """Whether kernels can be built; if not, warn once (every node then runs perform)."""
    from opgraph_c.compiler import CompileError, get_toolchain

    try:
        get_toolchain()
    except CompileError as exc:
        if ("compiler", "") not in _warned:
            _warned.add(("compiler", ""))
            warnings.warn(
                f"{exc}\nUntil then, every node runs its perform.",
                KernelFallbackWarning,
                stacklevel=4,
            )
        return False
    return True


def fallback_thunk(
    node: Apply,
    storage_map: dict[Variable, list[Any]],
    compute_map: dict[Variable, list[bool]] | None,
    no_recycling: Sequence[Any] = (),
) -> Any:
    """``perform``'s thunk for a node whose kernel has no C code for it, warned once."""
    dtypes = ", ".join(str(getattr(v.type, "dtype", v.type)) for v in node.inputs)
    key = (str(node.op), dtypes)
    if key not in _warned:
        _warned.add(key)
        warnings.warn(
            f"the c backend has no C code for {node.op} on inputs ({dtypes}); it runs "
            f"{type(node.op).__name__}.perform instead (slower). The profile marks such "
            "nodes [py-fallback].",
            KernelFallbackWarning,
            stacklevel=4,
        )
    if compute_map is None:
        compute_map = {v: [False] for v in storage_map}
    thunk = node.op.make_thunk(node, storage_map, compute_map, no_recycling)
    thunk.py_fallback = True
    thunk.kernel = None
    return thunk


def compute_thunk(
    module: ModuleType, node: Apply, in_cells: list[list[Any]], out_cells: list[list[Any]]
) -> Any:
    """The thunk of a module defining ``compute(*inputs)`` (a CModule without make_thunk)."""
    compute = getattr(module, "compute", None)
    if compute is None:
        raise TypeError(
            f"the generated module {module.__name__} for {node.op} defines no compute(); "
            "HINT: define compute(*inputs), or give the CModule a make_thunk."
        )
    if len(out_cells) == 1:
        (out,) = out_cells

        def thunk() -> None:
            out[0] = compute(*[c[0] for c in in_cells])

    else:

        def thunk() -> None:
            for cell, value in zip(out_cells, compute(*[c[0] for c in in_cells]), strict=True):
                cell[0] = value

    thunk.inputs = in_cells  # type: ignore[attr-defined]
    thunk.outputs = out_cells  # type: ignore[attr-defined]
    thunk.lazy = False  # type: ignore[attr-defined]
    return thunk
