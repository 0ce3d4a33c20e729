"""The ``c`` linker: backend-c's kernels where it has them, ``perform`` elsewhere, run by
the precompiled VM.

:class:`CLinker` is core's :class:`~opgraph.link.basic.VMLinker` given backend-c's registry.
Before making thunks it compiles every missing kernel of the graph in one batch (compiler
runs in parallel; a progress line once a build takes over a second), then runs the thunks with
:class:`CVM`: :class:`opgraph_c._vm.CLoop`, or :class:`opgraph_c._vm.CStack` for graphs
with lazy nodes. Profiling and per-node callbacks (NanGuardMode) use core's Python VM,
which times and reports each node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.op import Thunk
from opgraph.link.basic import VMLinker
from opgraph.link.vm import VM, Caller, CallPlan, gc_plan
from opgraph.tensor.type import TensorType
from opgraph_c import _vm
from opgraph_c.pipeline import pipeline
from opgraph_c.registry import get_registry

__all__ = ["CVM", "CLinker"]

#: What a thunk may do with the array its output cell kept from the previous call
#: (``thunk.set_output_reuse``): never overwrite it, overwrite it if only the cell holds it,
#: or overwrite it even if held elsewhere (an output the user borrowed).
REUSE_NEVER, REUSE_UNSHARED, REUSE_HELD = 0, 1, 2


def _fast_spec(t: Any) -> tuple[Any, int, tuple[tuple[int, int], ...]] | None:
    """What an ndarray must match to pass ``t.filter`` unchanged, if ``t`` says (else None)."""
    spec = getattr(t, "fast_filter_spec", None)
    if spec is None or type(t).filter is not TensorType.filter:
        return None
    return spec()


class CVM(VM):
    """Core's VM protocol (updates, ``fail``, ``clear_storage``) over a precompiled runner.

    ``run`` is the runner's own method, and :meth:`make_caller` gives ``Function`` the
    whole call in compiled code (:class:`opgraph_c._vm.Caller`).

    Thunks that can write into the array their output cell kept from the previous call
    (``set_output_reuse``, e.g. :class:`opgraph_c._elemwise.ElemwiseThunk`) are told, per
    output, what they may reuse: nothing for an output handed to the user (the
    ``no_recycling`` variables, emptied before each call), an array only their cell holds
    for an intermediate, and the array even if the user holds it for an output declared
    ``Out(..., borrow=True)``. Cells keep their arrays between calls only with
    ``allow_gc=False`` (Theano's rule).

    Parameters
    ----------
    lazy
        Evaluate on demand (:class:`~opgraph_c._vm.CStack`), for graphs with lazy nodes.
    """

    def __init__(self, *args: Any, lazy: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        held = self._allow_reuse(kwargs.get("no_recycling", ()))
        inputs = [self.storage_map[v] for v in self.fgraph.inputs] if held else []
        self.runner = self._stack(held, inputs) if lazy else self._loop(held, inputs)
        self.run = self.runner.run  # type: ignore[method-assign]

    def _allow_reuse(self, no_recycling: Sequence[Variable]) -> list[list[Any]]:
        """Tell each thunk which of its output buffers it may overwrite on the next call.

        Returns the cells of borrowed outputs a thunk may overwrite even though the user
        holds them: the runner drops such an array when it comes back as an argument.
        """
        fresh = set(no_recycling)
        borrowed = set(self.fgraph.outputs) - fresh
        held = []
        for node, thunk in zip(self.nodes, self.thunks):
            allow = getattr(thunk, "set_output_reuse", None)
            if allow is None:
                continue
            flags = [
                REUSE_NEVER if v in fresh else REUSE_HELD if v in borrowed else REUSE_UNSHARED
                for v in node.outputs
            ]
            allow(flags)
            held += [self.storage_map[v] for v, f in zip(node.outputs, flags) if f == REUSE_HELD]
        return held

    def make_caller(self, plan: CallPlan) -> Caller:
        """``Function.__call__`` in C: an :class:`opgraph_c._vm.Caller` running ``plan``
        (core's :meth:`VM.make_caller <opgraph.link.vm.VM.make_caller>`)."""
        specs = [
            (cell, t.filter, strict, downcast, _fast_spec(t))
            for cell, t, strict, downcast in plan.inputs
        ]
        return _vm.Caller(
            specs,
            self.runner,
            self.apply_updates if self.updates else None,
            list(plan.outputs),
            list(plan.clear_in),
            list(plan.clear_out),
            plan.unpack_single,
            plan.return_none,
            None if plan.output_keys is None else list(plan.output_keys),
            plan.fallback,
            plan.input_error,
            plan.label,
        )

    def _loop(self, held: list[list[Any]], inputs: list[list[Any]]) -> Any:
        keep = list(self.fgraph.outputs)
        plan = gc_plan(self.nodes, keep) if self.allow_gc else [[] for _ in self.nodes]
        post_clear = [[self.storage_map[v] for v in vs] for vs in plan]
        return _vm.CLoop(
            list(self.thunks), post_clear, list(self.pre_call_clear), self.fail, held, inputs
        )

    def _stack(self, held: list[list[Any]], inputs: list[list[Any]]) -> Any:
        cmap, index = self.compute_map, self.node_index
        nodes = self.nodes
        in_done = [[cmap[v] for v in node.inputs] for node in nodes]
        out_done = [[cmap[v] for v in node.outputs] for node in nodes]
        in_owner = [
            [index.get(v.owner, -1) if v.owner is not None else -1 for v in node.inputs]
            for node in nodes
        ]
        outputs = [v for v in dict.fromkeys(self.fgraph.outputs) if v.owner is not None]
        roots = [index[v.owner] for v in reversed(outputs)]
        reset_done = [done for v, done in cmap.items() if v.owner is not None]
        kept = set(self.fgraph.outputs)
        frees: list[list[tuple[list[Any], list[int]]]] = [[] for _ in nodes]
        post_clear: list[list[Any]] = []
        if self.allow_gc:
            readers: dict[Variable, list[int]] = {}
            for i, node in enumerate(nodes):
                for v in node.inputs:
                    if v.owner is not None and v not in kept:
                        readers.setdefault(v, []).append(i)
            for v, idxs in readers.items():
                for i in set(idxs):
                    frees[i].append((self.storage_map[v], sorted(set(idxs))))
            post_clear = [
                cell
                for v, cell in self.storage_map.items()
                if v.owner is not None and v not in kept
            ]
        return _vm.CStack(
            list(self.thunks),
            in_done,
            out_done,
            in_owner,
            roots,
            frees,
            reset_done,
            list(self.pre_call_clear),
            post_clear,
            self.fail,
            held,
            inputs,
        )


class CLinker(VMLinker):
    """The ``c`` linker (also ``cvm`` and ``c|py``): C kernels, ``perform`` fallback.

    Parameters
    ----------
    allow_gc
        Free intermediates after their last use (None: ``config.allow_gc``).
    lazy
        None: evaluate lazily only graphs with lazy nodes; True: always; False: never
        (lazy nodes then get every input computed).
    callback
        Called after each node (NanGuardMode); runs the graph with core's Python VM.
    """

    def __init__(
        self, allow_gc: bool | None = None, lazy: bool | None = None, callback: Any = None
    ) -> None:
        super().__init__(allow_gc=allow_gc, lazy=lazy, callback=callback, kernels=get_registry())

    def make_all(
        self,
        input_storage: Sequence[list[Any]] | None = None,
        output_storage: Sequence[list[Any]] | None = None,
        storage_map: dict[Variable, list[Any]] | None = None,
    ) -> Any:
        if self.fgraph is None:
            return super().make_all(input_storage, output_storage, storage_map)
        order = self.fgraph.toposort()
        try:
            self.precompile(order)
            return super().make_all(input_storage, output_storage, storage_map)
        finally:
            pipeline.forget(order)  # resolutions no thunk took (a failed link)

    def precompile(self, order: Sequence[Apply]) -> int:
        """Resolve the nodes of ``order`` (each once: their thunks reuse it) and compile
        or load their missing kernels in one batch; returns how many nodes have a
        generated module."""
        assert self.kernels is not None
        return pipeline.precompile(self.kernels, [*order, *self._inner_nodes(order)])

    def _inner_nodes(self, order: Sequence[Apply]) -> list[Apply]:
        """The nodes of the inner graphs (a loop's body, an OpFromGraph's graph) that this
        backend will link, rewritten now so that their kernels build in the outer graph's
        batch: one wait for the compiler instead of one per inner graph."""
        found: list[Apply] = []
        for node in order:
            maker_of = getattr(node.op, "inner_maker", None)
            if maker_of is None:
                continue
            try:
                maker = maker_of()
            except Exception:  # the node's thunk reports it when it compiles the graph
                continue
            if not isinstance(maker.linker, CLinker):
                continue
            inner = maker.fgraph.toposort()
            found += inner
            found += self._inner_nodes(inner)
        return found

    def make_vm(
        self,
        order: list[Apply],
        thunks: list[Thunk],
        storage_map: dict[Variable, list[Any]],
        compute_map: dict[Variable, list[bool]],
    ) -> VM:
        has_lazy = any(getattr(t, "lazy", False) for t in thunks)
        lazy = self.lazy if self.lazy is not None else has_lazy
        if self.profile or self.callback is not None or (has_lazy and not lazy):
            return super().make_vm(order, thunks, storage_map, compute_map)
        return CVM(
            self.fgraph,
            order,
            thunks,
            storage_map,
            compute_map,
            allow_gc=self.get_allow_gc(),
            no_recycling=self.no_recycling,
            lazy=lazy,
        )

    def __repr__(self) -> str:
        return f"CLinker(allow_gc={self.allow_gc}, lazy={self.lazy})"
