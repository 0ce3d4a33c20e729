"""One node's way to its thunk: resolved once into (kernel spec, cache key), then built.

:class:`NodePipeline` is the thunk maker of backend-c's
:class:`~opgraph.link.dispatch.KernelRegistry`. For each node it asks the registry's entry
once what to run (:meth:`NodePipeline.resolve`: a :class:`~opgraph_c.spec.CModule` with its
cache key, a :class:`~opgraph_c.spec.Precompiled`, :data:`~opgraph_c.spec.PERFORM`, or
nothing); the ``c`` linker's batch compile (:meth:`NodePipeline.precompile`) and the thunk
(:meth:`NodePipeline.make_thunk`) both use that resolution. A node with nothing to run
makes the thunk maker return None: the registry then warns (its one fall-back warning) and
the linker runs the Op's ``perform``, marked ``[py-fallback]`` in profiles.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from opgraph.graph.basic import Apply, Variable
from opgraph.link.dispatch import Kernel, KernelFallbackWarning, KernelRegistry, RunsPerform
from opgraph_c.cache import BuildRequest, get_cache
from opgraph_c.compiler import CompileError, get_toolchain
from opgraph_c.spec import PERFORM, CModule, Precompiled

__all__ = ["NodePipeline", "Resolution", "compiler_available", "pipeline"]


@dataclass(frozen=True)
class Resolution:
    """What backend-c runs for one node, decided once.

    Attributes
    ----------
    kernel
        The registry entry it came from.
    spec
        A :class:`~opgraph_c.spec.CModule`, a :class:`~opgraph_c.spec.Precompiled`,
        :data:`~opgraph_c.spec.PERFORM`, or None (no C code for this node, or no compiler
        to build it: its Op's ``perform`` runs, as a fall-back).
    request
        For a CModule, its cache entry (the key computed once).
    """

    kernel: Kernel
    spec: Any
    request: BuildRequest | None = None


class NodePipeline:
    """Resolves nodes (once each) and makes their thunks; the registry's thunk maker.

    A resolution made by :meth:`precompile` waits, keyed by its node, for that node's
    :meth:`make_thunk`, which takes it; nodes linked without a batch compile (DEBUG_MODE's
    linker) are resolved when their thunk is made.
    """

    def __init__(self) -> None:
        self._pending: weakref.WeakKeyDictionary[Apply, Resolution] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        #: Calls of an entry's ``impl`` (each node's spec is built once; tests count them).
        self.resolutions = 0

    def resolve(self, kernel: Kernel, node: Apply) -> Resolution:
        """Ask ``kernel`` what to run for ``node``; a CModule gets its cache key."""
        if isinstance(kernel.impl, RunsPerform):  # registered with register_perform
            return Resolution(kernel, PERFORM)
        spec = kernel.impl(node.op, node)
        self.resolutions += 1
        if spec is None or spec is PERFORM or isinstance(spec, Precompiled):
            return Resolution(kernel, spec)
        if not isinstance(spec, CModule):
            raise TypeError(
                f"the c kernel {kernel.impl!r} (from {kernel.owner}) for {node.op} returned "
                f"{spec!r}; a c kernel returns an opgraph_c.CModule, opgraph_c.Precompiled, "
                "opgraph_c.PERFORM or None.\nHINT: wrap the Cython source as "
                "CModule(name, source)."
            )
        if not compiler_available():
            return Resolution(kernel, None)
        return Resolution(kernel, spec, get_cache().request(spec, kernel))

    def precompile(self, registry: KernelRegistry, order: Iterable[Apply]) -> int:
        """Resolve the nodes of ``order`` and compile (or load) their missing modules in
        one batch; returns how many nodes have a generated module."""
        requests = []
        for node in order:
            kernel = registry.lookup(node.op)
            if kernel is None or isinstance(kernel.impl, RunsPerform):
                continue  # the registry runs perform for these itself
            with self._lock:
                res = self._pending.get(node)
            if res is None or res.kernel is not kernel:  # resolved once per node
                res = self.resolve(kernel, node)
                with self._lock:
                    self._pending[node] = res
            if res.request is not None:
                requests.append(res.request)
        if requests:
            get_cache().ensure(requests)
        return len(requests)

    def forget(self, order: Iterable[Apply]) -> None:
        """Drop the resolutions of ``order`` no thunk took (a link that failed)."""
        with self._lock:
            for node in order:
                self._pending.pop(node, None)

    def make_thunk(
        self,
        kernel: Kernel,
        node: Apply,
        storage_map: dict[Variable, list[Any]],
        compute_map: dict[Variable, list[bool]] | None,
        no_recycling: Sequence[Any] = (),
    ) -> Any:
        """``node``'s thunk from its resolution, or None: the registry falls back to
        ``perform`` (with its warning)."""
        with self._lock:
            res = self._pending.pop(node, None)
        if res is None or res.kernel is not kernel:
            res = self.resolve(kernel, node)
        spec = res.spec
        if spec is None:
            return None
        if spec is PERFORM:
            if compute_map is None:
                compute_map = {v: [False] for v in storage_map}
            thunk = node.op.make_thunk(node, storage_map, compute_map, no_recycling)
            thunk.runs_perform = True  # the entry chose perform for this node (profiles: Py)
        else:
            in_cells = [storage_map[v] for v in node.inputs]
            out_cells = [storage_map[v] for v in node.outputs]
            if isinstance(spec, Precompiled):
                thunk = spec.make_thunk(node, in_cells, out_cells)
            else:
                assert res.request is not None
                module = get_cache().load_request(res.request)
                factory = spec.make_thunk or compute_thunk
                thunk = factory(module, node, in_cells, out_cells)
        thunk.kernel = kernel
        return thunk


#: The pipeline of backend-c's registry.
pipeline = NodePipeline()

_compiler_warned = False


def compiler_available() -> bool:
    """Whether kernels can be built; if not, say why once (their nodes then run perform)."""
    global _compiler_warned
    try:
        get_toolchain()
    except CompileError as exc:
        if not _compiler_warned:
            _compiler_warned = True
            warnings.warn(
                f"{exc}\nUntil then, nodes needing a generated kernel run their perform.",
                KernelFallbackWarning,
                stacklevel=5,
            )
        return False
    return True


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
