"""Kernel registries: per-backend tables from Op class to a faster implementation.

A backend (the C linker, the CUDA linker, a Numba-like Python backend) keeps one
:class:`KernelRegistry` of its own. Plugins fill it through that backend's hook::

    c_kernels = KernelRegistry("c")

    @c_kernels.register(Softplus, version=1)
    def softplus_c(op, node):
        ...

Lookups follow the Op class's MRO, so an entry for ``Elemwise`` serves its subclasses
unless they have their own. Two owners registering the same class is an error naming both
(unless one passes ``override=True``). An Op without an entry falls back to its
``perform``; the first fallback per (backend, Op class) warns once, and the profile marks
the node ``[py-fallback]``.

What an entry's ``impl`` is belongs to the backend: the registry only stores it and hands
it to the registry's ``thunk_maker``. The default thunk maker, used by core's ``vm``
linker, treats ``impl(op, node)`` as returning a Python callable ``compute(*input_values)``
that returns the output value (or a tuple of them for several outputs).
"""

from __future__ import annotations

import importlib.metadata
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.op import Op, Thunk
from opgraph.plugins.manager import PluginError

__all__ = ["Kernel", "KernelFallbackWarning", "KernelRegistry", "RunsPerform", "funcify_thunk"]

#: ``thunk_maker(kernel, node, storage_map, compute_map, no_recycling) -> thunk``
ThunkMaker = Callable[
    ["Kernel", Apply, dict[Variable, list[Any]], dict[Variable, list[bool]] | None, Sequence[Any]],
    Thunk | None,
]


class KernelFallbackWarning(UserWarning):
    """A backend has no kernel for an Op, so the Op's ``perform`` runs instead."""


@dataclass(frozen=True)
class Kernel:
    """One registry entry: the implementation of ``op_class`` on one backend."""

    op_class: type
    impl: Any
    version: int | str
    owner: str
    backend: str


@dataclass(frozen=True)
class RunsPerform:
    """A registry entry's ``impl`` saying the backend runs the Op's ``perform`` on purpose.

    ``reason`` says why no faster kernel is worth having (``"one LAPACK call through
    scipy.linalg: O(n^3) work against a microsecond of Python"``).
    """

    reason: str


_dist_cache: dict[str, list[str]] | None = None


def _owner_of(impl: Any) -> str:
    """The distribution (else the top-level package) that defines ``impl``."""
    global _dist_cache
    module = getattr(impl, "__module__", None) or type(impl).__module__ or "?"
    top = module.split(".")[0]
    if _dist_cache is None:
        try:
            _dist_cache = dict(importlib.metadata.packages_distributions())
        except Exception:  # broken metadata must not break registration
            _dist_cache = {}
    dists = _dist_cache.get(top)
    return dists[0] if dists else top


def funcify_thunk(
    kernel: Kernel,
    node: Apply,
    storage_map: dict[Variable, list[Any]],
    compute_map: dict[Variable, list[bool]] | None,
    no_recycling: Sequence[Any] = (),
) -> Thunk:
    """Default thunk maker: ``kernel.impl(op, node)`` returns ``compute(*values) -> outputs``.

    A single-output node's ``compute`` returns the value; a multi-output node's returns a
    sequence with one value per output.
    """
    compute = kernel.impl(node.op, node)
    in_cells = [storage_map[v] for v in node.inputs]
    out_cells = [storage_map[v] for v in node.outputs]
    done = [compute_map[v] for v in node.outputs] if compute_map is not None else []
    if len(out_cells) == 1:
        (out,) = out_cells

        def thunk() -> None:
            out[0] = compute(*[c[0] for c in in_cells])
            for d in done:
                d[0] = True

    else:

        def thunk() -> None:
            results = compute(*[c[0] for c in in_cells])
            for cell, value in zip(out_cells, results, strict=True):
                cell[0] = value
            for d in done:
                d[0] = True

    thunk.inputs = in_cells  # type: ignore[attr-defined]
    thunk.outputs = out_cells  # type: ignore[attr-defined]
    thunk.lazy = False  # type: ignore[attr-defined]
    thunk.kernel = kernel  # type: ignore[attr-defined]
    return thunk


class KernelRegistry:
    """A backend's table from Op class to kernel, with MRO lookup, versions and coverage.

    Parameters
    ----------
    backend
        The backend's name (``"c"``, ``"cuda"``, ...), used in messages and profiles.
    thunk_maker
        Turns a :class:`Kernel` and a node into a thunk over the storage cells
        (default :func:`funcify_thunk`). A backend whose entries are code templates passes
        its own.
    """

    def __init__(self, backend: str, thunk_maker: ThunkMaker | None = None) -> None:
        self.backend = backend
        self.thunk_maker: ThunkMaker = thunk_maker or funcify_thunk
        self._table: dict[type, Kernel] = {}
        self._lookup_cache: dict[type, Kernel | None] = {}
        self._warned: set[type] = set()

    def register(
        self,
        op_class: type,
        impl: Any = None,
        *,
        version: int | str = 1,
        override: bool = False,
        owner: str | None = None,
    ) -> Any:
        """Register ``impl`` as this backend's kernel for ``op_class`` (and its subclasses).

        Usable as a call, ``registry.register(Softplus, softplus_c, version=1)``, or as a
        decorator, ``@registry.register(Softplus, version=1)``. Returns ``impl``.

        Parameters
        ----------
        op_class
            The Op class this kernel implements.
        impl
            The backend-specific implementation (see the registry's ``thunk_maker``).
        version
            Bump it whenever the generated code changes: it keys compile caches.
        override
            Replace an entry registered by another owner instead of raising.
        owner
            Who registers it (default: the distribution defining ``impl``).

        Raises
        ------
        PluginError
            If another owner already registered ``op_class`` and ``override`` is false.
        """
        if not (isinstance(op_class, type) and issubclass(op_class, Op)):
            raise TypeError(
                f"{self.backend} kernels are registered for Op classes, got {op_class!r}. "
                "HINT: pass the class (e.g. Softplus), not an instance (softplus)."
            )
        if impl is None:

            def decorator(fn: Any) -> Any:
                self.register(op_class, fn, version=version, override=override, owner=owner)
                return fn

            return decorator
        new = Kernel(op_class, impl, version, owner or _owner_of(impl), self.backend)
        old = self._table.get(op_class)
        if old is not None and not override and old.impl is not impl:
            who = f"{old.owner} and {new.owner}" if old.owner != new.owner else old.owner
            raise PluginError(
                f"{who} both register a {self.backend} kernel for {op_class.__name__} "
                f"({_describe(old.impl)} and {_describe(impl)}).\n"
                "HINT: uninstall one, or pass override=True in the plugin that should win."
            )
        self._table[op_class] = new
        self._lookup_cache.clear()
        return impl

    def register_perform(
        self, op_class: type, reason: str, *, owner: str, override: bool = False
    ) -> None:
        """Say that this backend runs ``op_class.perform`` on purpose, and why.

        Such an Op is covered (:meth:`missing` leaves it out), runs its ``perform`` without a
        :class:`KernelFallbackWarning` or a ``[py-fallback]`` mark, and
        :meth:`perform_reasons` lists it with ``reason``. A kernel registered for a subclass
        still wins for that subclass (MRO lookup, as for every entry).
        """
        if not reason or not reason.strip():
            raise ValueError(
                f"register_perform({op_class.__name__}) needs a reason: say why "
                f"{op_class.__name__}.perform is the right implementation on {self.backend}."
            )
        self.register(op_class, RunsPerform(reason.strip()), owner=owner, override=override)

    def perform_reasons(self) -> dict[type, str]:
        """The Op classes this backend runs ``perform`` for on purpose, with the reasons."""
        return {
            k.op_class: k.impl.reason
            for k in self._table.values()
            if isinstance(k.impl, RunsPerform)
        }

    def unregister(self, op_class: type) -> None:
        """Remove the entry for exactly ``op_class`` (subclass entries stay)."""
        self._table.pop(op_class, None)
        self._lookup_cache.clear()

    def lookup(self, op: Op | type) -> Kernel | None:
        """The kernel for ``op`` (an Op or Op class): the nearest entry along its MRO."""
        cls = op if isinstance(op, type) else type(op)
        try:
            return self._lookup_cache[cls]
        except KeyError:
            pass
        found = None
        for base in cls.__mro__:
            found = self._table.get(base)
            if found is not None:
                break
        self._lookup_cache[cls] = found
        return found

    def __contains__(self, op: object) -> bool:
        return isinstance(op, Op | type) and self.lookup(op) is not None  # type: ignore[arg-type]

    def __len__(self) -> int:
        return len(self._table)

    def entries(self) -> list[Kernel]:
        """Every registered kernel, in registration order."""
        return list(self._table.values())

    def missing(self, op_classes: Iterable[type]) -> list[type]:
        """The classes of ``op_classes`` with no entry here: they fall back to ``perform``
        with a warning (classes registered with :meth:`register_perform` are not missing)."""
        return [cls for cls in op_classes if self.lookup(cls) is None]

    def make_thunk(
        self,
        node: Apply,
        storage_map: dict[Variable, list[Any]],
        compute_map: dict[Variable, list[bool]] | None,
        no_recycling: Sequence[Any] = (),
    ) -> Thunk | None:
        """A thunk running this backend's kernel for ``node``, or None if it has none.

        Returning None means the caller falls back to ``node.op.make_thunk``; the first
        time per Op class a :class:`KernelFallbackWarning` says so.
        """
        kernel = self.lookup(node.op)
        if kernel is None:
            self.warn_fallback(node.op)
            return None
        if isinstance(kernel.impl, RunsPerform):
            if compute_map is None:
                compute_map = {v: [False] for v in storage_map}
            thunk = node.op.make_thunk(node, storage_map, compute_map, no_recycling)
            thunk.kernel = kernel  # type: ignore[attr-defined]
            return thunk
        thunk = self.thunk_maker(kernel, node, storage_map, compute_map, no_recycling)
        if thunk is None:  # the backend's kernel has no code for this particular node
            self.warn_fallback(node.op, kernel)
            return None
        if not hasattr(thunk, "kernel"):
            thunk.kernel = kernel  # type: ignore[attr-defined]
        return thunk

    def warn_fallback(self, op: Op, kernel: Kernel | None = None) -> None:
        """Warn once per Op class that ``op`` runs its ``perform`` on this backend:
        it has no entry, or its ``kernel`` has no code for this node's types."""
        cls = type(op)
        if cls in self._warned:
            return
        self._warned.add(cls)
        if kernel is None:
            what = f"the {self.backend} backend has no kernel for {cls.__name__} ({op})"
            hint = (
                f"register one with registry.register({cls.__name__}, impl, version=1) "
                "through the backend's hook, or say why perform is right with "
                f"registry.register_perform({cls.__name__}, reason, owner=...)."
            )
        else:
            entry = kernel.op_class.__name__
            what = (
                f"the {self.backend} backend's kernel for {entry} ({_describe(kernel.impl)}, "
                f"from {kernel.owner}) has no code for this {cls.__name__} node ({op})"
            )
            hint = "its docstring lists the types and layouts it covers."
        warnings.warn(
            f"{what}; it runs {cls.__name__}.perform instead "
            f"(slower). The profile marks such nodes [py-fallback].\nHINT: {hint}",
            KernelFallbackWarning,
            stacklevel=3,
        )

    def __repr__(self) -> str:
        return f"KernelRegistry({self.backend!r}, {len(self)} kernels)"


def _describe(impl: Any) -> str:
    module = getattr(impl, "__module__", "?")
    name = getattr(impl, "__qualname__", None) or type(impl).__name__
    return f"{module}.{name}"
