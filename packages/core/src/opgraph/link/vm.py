"""The pure-Python virtual machines that run per-node thunks, and the ``vm`` linker.

- :class:`Loop` runs the thunks in topological order. With ``allow_gc`` it empties each
  intermediate's cell right after the last node that reads it.
- :class:`Stack` evaluates on demand, for graphs with lazy nodes (``ifelse``): a lazy
  thunk returns the indices of the inputs it still needs (``[0]`` for the condition, then
  only the taken branch), or a false value when it is done. It keeps an explicit stack, so
  graphs of any depth run under Python's default recursion limit.

Both apply the function's updates after every output and update value is computed, and
atomically: each new value is checked against its shared variable's Type first, and if any
node or any check fails, no shared variable changes. A VM given ``update_locks`` (its
Function gives it the locks of the shared variables it updates) holds them from the start
of the run to the last update written, so concurrent updates by other functions are not
lost.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.op import Thunk
from opgraph.graph.utils import MethodNotDefined
from opgraph.link.utils import raise_with_op

__all__ = [
    "VM",
    "CallPlan",
    "Caller",
    "Loop",
    "Stack",
    "build_vm",
    "gc_plan",
    "hold_all",
    "release_all",
]

#: ``callback(node=..., thunk=..., storage_map=..., compute_map=...)`` after each node.
Callback = Callable[..., None]
#: A compiled ``Function.__call__``: ``caller(args, kwargs)`` returns what the call returns.
Caller = Callable[[tuple[Any, ...], dict[str, Any]], Any]


@dataclass(frozen=True)
class CallPlan:
    """What a call of a :class:`~opgraph.compile.function.Function` does, for
    :meth:`VM.make_caller`.

    Attributes
    ----------
    inputs
        Per explicit argument: ``(cell, type, strict, allow_downcast)``.
    outputs
        The cells of the returned outputs.
    clear_in, clear_out
        Cells emptied after every call.
    unpack_single, return_none, output_keys
        How the outputs are returned (one value, None, or a dict by these keys).
    fallback
        ``fallback(args, kwargs)``: the Python call path (keywords, defaults, errors).
    input_error
        ``input_error(index, value, exc)``: the error for a rejected argument.
    label
        The function's name in messages.
    """

    inputs: Sequence[tuple[list[Any], Any, bool, bool | None]]
    outputs: Sequence[list[Any]]
    clear_in: Sequence[list[Any]]
    clear_out: Sequence[list[Any]]
    unpack_single: bool
    return_none: bool
    output_keys: Sequence[str] | None
    fallback: Caller
    input_error: Callable[[int, Any, BaseException], BaseException]
    label: str


def hold_all(locks: Sequence[Any]) -> None:
    """Acquire ``locks`` in their order (the caller keeps one global order: no deadlock);
    if waiting is interrupted, the ones already taken are released before re-raising."""
    taken = 0
    try:
        for lock in locks:
            lock.acquire()
            taken += 1
    except BaseException:
        for lock in reversed(locks[:taken]):
            lock.release()
        raise


def release_all(locks: Sequence[Any]) -> None:
    """Release ``locks`` (taken by :func:`hold_all`), the last taken first."""
    for lock in reversed(locks):
        lock.release()


def gc_plan(order: Sequence[Apply], keep: Sequence[Variable]) -> list[list[Variable]]:
    """For each node of ``order``, the variables to free right after it ran.

    A variable is freed after its last client in ``order`` (an unused output right after
    the node producing it). Graph inputs, constants and the variables in ``keep`` (the
    graph's outputs) are never freed.
    """
    last_use: dict[Variable, int] = {}
    for i, node in enumerate(order):
        for var in node.inputs:
            last_use[var] = i
        for var in node.outputs:
            last_use.setdefault(var, i)
    kept = set(keep)
    plan: list[list[Variable]] = [[] for _ in order]
    for var, i in last_use.items():
        if var.owner is not None and var not in kept:
            plan[i].append(var)
    return plan


class VM:
    """Base of the VMs: holds the thunks, the storage map and the update pairs.

    Calling the VM runs the graph once (``n_calls`` times if given: functions without
    explicit inputs, driven by shared variables, can loop inside the VM).

    Attributes
    ----------
    call_counts, call_times
        Per node (in ``nodes`` order): how many times it ran and the seconds spent, when
        timing is on. :meth:`update_profile` moves them into a ProfileStats.
    need_update_inputs
        False: this VM writes the updates itself.
    update_locks
        Locks held while a call runs and writes its updates (see :func:`hold_all`); the
        Function sets them, in its order.

    Notes
    -----
    A VM may also offer a compiled call path: :meth:`make_caller` (backend-c's ``CVM``
    does).
    """

    need_update_inputs = False
    update_locks: Sequence[Any] = ()

    def __init__(
        self,
        fgraph: Any,
        nodes: list[Apply],
        thunks: list[Thunk],
        storage_map: dict[Variable, list[Any]],
        compute_map: dict[Variable, list[bool]],
        *,
        allow_gc: bool,
        no_recycling: Sequence[Variable] = (),
        timed: bool = False,
        callback: Callback | None = None,
    ) -> None:
        self.fgraph = fgraph
        self.nodes = nodes
        self.thunks = thunks
        self.storage_map = storage_map
        self.compute_map = compute_map
        self.allow_gc = allow_gc
        self.timed = timed
        self.callback = callback
        self.call_counts = [0] * len(nodes)
        self.call_times = [0.0] * len(nodes)
        self.node_index = {node: i for i, node in enumerate(nodes)}
        self.pre_call_clear = [
            storage_map[v] for v in dict.fromkeys(no_recycling) if v.owner is not None
        ]
        self.updates = self._update_pairs(fgraph, storage_map)
        # Every cell a call may fill, emptied by free() and (with allow_gc) after calls.
        self.owned_cells = [cell for v, cell in storage_map.items() if v.owner is not None]

    @staticmethod
    def _update_pairs(fgraph: Any, storage_map: dict[Variable, list[Any]]) -> list[tuple]:
        pairs = []
        for out_idx, in_idx in sorted((getattr(fgraph, "update_mapping", None) or {}).items()):
            out_var, in_var = fgraph.outputs[out_idx], fgraph.inputs[in_idx]
            pairs.append(
                (storage_map[out_var], storage_map[in_var], in_var, out_var.owner is not None)
            )
        return pairs

    def apply_updates(self) -> None:
        """Write the update values into the shared cells, all or none.

        Each value is first filtered by its shared variable's Type; if any is rejected,
        the error names the variable and no cell is changed.
        """
        new_values = []
        for out_cell, _in_cell, in_var, _owned in self.updates:
            try:
                new_values.append(in_var.type.filter(out_cell[0], strict=False))
            except (TypeError, ValueError) as exc:
                cls = TypeError if isinstance(exc, TypeError) else ValueError
                raise cls(
                    f"the update of shared variable {in_var.name or in_var!s} computed a "
                    f"value that does not fit its type {in_var.type}: {exc}\n"
                    "No shared variable was changed by this call.\n"
                    "HINT: check the update expression's shape and dtype (a broadcastable "
                    "dimension must keep length 1)."
                ) from exc
        for (out_cell, in_cell, _in_var, owned), value in zip(self.updates, new_values):
            in_cell[0] = value
            if owned:
                out_cell[0] = None  # no Op may later write into the shared value

    def __call__(self, n_calls: int = 1) -> None:
        locks = self.update_locks
        if locks:
            hold_all(locks)
        try:
            if n_calls == 1:
                self.run()
                if self.updates:
                    self.apply_updates()
                return
            for _ in range(n_calls):
                self.run()
                if self.updates:
                    self.apply_updates()
        finally:
            if locks:
                release_all(locks)

    def make_caller(self, plan: CallPlan) -> Caller | None:
        """The whole of ``Function.__call__`` in compiled code, or None: no such path.

        :class:`~opgraph.compile.function.Function` calls the returned
        ``caller(args, kwargs)`` (its ``call`` method when it has one) instead of its Python
        path, ``plan.fallback``. The caller must behave exactly like ``plan.fallback(args,
        kwargs)`` and may hand it any call it does not handle itself. A caller may also
        offer ``star``, the same call with the function's own signature
        (``star(*args, **kwargs)``): ``f(...)`` then runs it with no Python frame in
        between. This VM has no compiled path: it returns None (backend-c's ``CVM``
        overrides it).

        A function with shared variables or in-place inputs calls the caller's
        ``guard(locks, unalias, relock=None, generation_box=None)``: hold ``locks`` (in that
        order) around running the graph and writing the updates, call ``unalias()`` once the
        arguments are stored, and, when ``generation_box[0]`` is no longer the object seen
        last, first replace both with ``relock()``'s ``(locks, unalias)`` (another function
        started writing a shared variable this one reads in place). A caller without
        ``guard`` is not used for such functions.
        """
        return None

    def run(self) -> None:
        """Run the graph once, without applying the updates."""
        raise MethodNotDefined(f"{type(self).__name__} must define run()")

    def fail(self, index: int) -> None:
        """Re-raise the current exception with the details of node ``index``."""
        raise_with_op(
            self.fgraph,
            self.nodes[index],
            self.thunks[index],
            storage_map=self.storage_map,
            index=index,
        )

    def clear_storage(self) -> None:
        """Empty every intermediate and output cell (``Function.free``)."""
        for cell in self.owned_cells:
            cell[0] = None

    def update_profile(self, profile: Any) -> None:
        """Add the per-node times and counts to ``profile`` and reset them."""
        for i, node in enumerate(self.nodes):
            if self.call_counts[i]:
                profile.add_apply(node, self.call_times[i], self.call_counts[i])
                self.call_times[i] = 0.0
                self.call_counts[i] = 0


class Loop(VM):
    """Runs every thunk once, in topological order.

    A lazy node (``ifelse``) in a Loop is evaluated eagerly: every input, both branches
    included, is computed before it in topological order, so its thunk finishes in one call.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if any(getattr(t, "lazy", False) for t in self.thunks):
            for done in self.compute_map.values():
                done[0] = True  # inputs are always computed before a node, in this order
            self.thunks = [
                _eager(node, t) if getattr(t, "lazy", False) else t
                for node, t in zip(self.nodes, self.thunks)
            ]
        keep = list(self.fgraph.outputs)
        plan = gc_plan(self.nodes, keep) if self.allow_gc else [[] for _ in self.nodes]
        self.post_thunk_clear = [[self.storage_map[v] for v in vs] for vs in plan]
        if self.timed or self.callback is not None:
            self.run = self._run_general  # type: ignore[method-assign]
        elif self.allow_gc and any(self.post_thunk_clear):
            self._pairs = list(zip(self.thunks, self.post_thunk_clear))
            self.run = self._run_gc  # type: ignore[method-assign]
        else:
            self.run = self._run_plain  # type: ignore[method-assign]

    def _run_plain(self) -> None:
        for cell in self.pre_call_clear:
            cell[0] = None
        i = 0
        try:
            for thunk in self.thunks:
                thunk()
                i += 1
        except Exception:
            self.fail(i)

    def _run_gc(self) -> None:
        for cell in self.pre_call_clear:
            cell[0] = None
        i = 0
        try:
            for thunk, clear in self._pairs:
                thunk()
                for cell in clear:
                    cell[0] = None
                i += 1
        except Exception:
            self.fail(i)

    def _run_general(self) -> None:
        for cell in self.pre_call_clear:
            cell[0] = None
        timer = time.perf_counter
        callback = self.callback
        counts, times = self.call_counts, self.call_times
        for i, (node, thunk, clear) in enumerate(
            zip(self.nodes, self.thunks, self.post_thunk_clear)
        ):
            try:
                t0 = timer()
                thunk()
                times[i] += timer() - t0
                counts[i] += 1
                if callback is not None:
                    callback(
                        node=node,
                        thunk=thunk,
                        storage_map=self.storage_map,
                        compute_map=self.compute_map,
                    )
            except Exception:
                self.fail(i)
            for cell in clear:
                cell[0] = None


class Stack(VM):
    """Demand-driven evaluation with lazy nodes, iteratively (no recursion).

    A node runs once all its inputs are computed; a lazy node runs first and says which
    inputs it needs. With ``allow_gc`` an intermediate is freed once every node reading it
    has run, and all of them are emptied at the end of the call (those only an untaken
    branch would have read).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cmap = self.compute_map
        self.lazy = [bool(getattr(t, "lazy", False)) for t in self.thunks]
        self.in_done = [[cmap[v] for v in node.inputs] for node in self.nodes]
        self.out_done = [[cmap[v] for v in node.outputs] for node in self.nodes]
        self.reset_done = [done for v, done in cmap.items() if v.owner is not None]
        outputs = [v for v in dict.fromkeys(self.fgraph.outputs) if v.owner is not None]
        self.roots = [self.node_index[v.owner] for v in reversed(outputs)]
        # Extra prerequisites (a DestroyHandler's: readers before the in-place writer).
        orderings = self.fgraph.orderings() if hasattr(self.fgraph, "orderings") else {}
        self.before = [
            [self.node_index[p] for p in orderings.get(n, ()) if p in self.node_index]
            for n in self.nodes
        ]
        kept = set(self.fgraph.outputs)
        # For each node, the inputs it may free and the nodes that must be done first.
        self.frees: list[list[tuple[list[Any], list[int]]]] = [[] for _ in self.nodes]
        self.post_call_clear: list[list[Any]] = []
        if self.allow_gc:
            readers: dict[Variable, list[int]] = {}
            for i, node in enumerate(self.nodes):
                for v in node.inputs:
                    if v.owner is not None and v not in kept:
                        readers.setdefault(v, []).append(i)
            for v, idxs in readers.items():
                for i in set(idxs):
                    self.frees[i].append((self.storage_map[v], sorted(set(idxs))))
            self.post_call_clear = [
                cell
                for v, cell in self.storage_map.items()
                if v.owner is not None and v not in kept
            ]

    def _done(self, i: int) -> bool:
        return all(d[0] for d in self.out_done[i])

    def run(self) -> None:
        for done in self.reset_done:
            done[0] = False
        for cell in self.pre_call_clear:
            cell[0] = None
        try:
            self._evaluate()
        finally:
            if self.allow_gc:
                for cell in self.post_call_clear:
                    cell[0] = None

    def _evaluate(self) -> None:
        nodes, thunks, lazy = self.nodes, self.thunks, self.lazy
        timer = time.perf_counter
        stack = list(self.roots)
        polls = [0] * len(nodes)
        while stack:
            i = stack[-1]
            if self._done(i):
                stack.pop()
                continue
            node = nodes[i]
            pending = [j for j in self.before[i] if not self._done(j)]
            if pending:
                stack.extend(pending)
                continue
            if not lazy[i]:
                missing = [v for v, d in zip(node.inputs, self.in_done[i]) if not d[0]]
                if missing:
                    stack.extend(self._owners(i, missing))
                    continue
            try:
                t0 = timer()
                requires = thunks[i]()
                self.call_times[i] += timer() - t0
            except Exception:
                self.fail(i)
            if lazy[i] and requires:
                needed = [node.inputs[k] for k in requires if not self.in_done[i][k][0]]
                polls[i] = polls[i] + 1 if not needed else 0
                if polls[i] > 1:
                    raise RuntimeError(
                        f"lazy node {node} keeps asking for inputs {list(requires)} that "
                        "are already computed; its thunk must finish once they are."
                    )
                stack.extend(self._owners(i, needed))
                continue
            self._finish(i, node)
            stack.pop()

    def _owners(self, i: int, missing: list[Variable]) -> list[int]:
        owners = []
        for v in missing:
            if v.owner is None:
                raise RuntimeError(
                    f"{self.nodes[i]} needs input {v}, which has no value and no owner. "
                    "HINT: every graph input must be in the function's inputs."
                )
            owners.append(self.node_index[v.owner])
        return owners

    def _finish(self, i: int, node: Apply) -> None:
        for d in self.out_done[i]:
            d[0] = True
        self.call_counts[i] += 1
        if self.callback is not None:
            try:
                self.callback(
                    node=node,
                    thunk=self.thunks[i],
                    storage_map=self.storage_map,
                    compute_map=self.compute_map,
                )
            except Exception:
                self.fail(i)
        for cell, readers in self.frees[i]:
            if all(self._done(r) for r in readers):
                cell[0] = None


def _eager(node: Apply, thunk: Thunk) -> Thunk:
    """A lazy thunk called once, after all its inputs were computed."""

    def run() -> None:
        requires = thunk()
        if requires:
            raise RuntimeError(
                f"lazy node {node} still asks for inputs {list(requires)} although every "
                "input was computed before it. HINT: its thunk must check compute_map."
            )

    run.inputs = thunk.inputs  # type: ignore[attr-defined]
    run.outputs = thunk.outputs  # type: ignore[attr-defined]
    run.lazy = False  # type: ignore[attr-defined]
    return run


def build_vm(
    fgraph: Any,
    order: list[Apply],
    thunks: list[Thunk],
    storage_map: dict[Variable, list[Any]],
    compute_map: dict[Variable, list[bool]],
    *,
    allow_gc: bool,
    no_recycling: Sequence[Variable] = (),
    timed: bool = False,
    callback: Callback | None = None,
    lazy: bool | None = None,
) -> VM:
    """A :class:`Stack` if any thunk is lazy (or ``lazy=True``), else a :class:`Loop`.

    ``lazy=False`` gives a Loop even with lazy nodes: they then get every input computed
    (both branches of an ``ifelse``), with the same results.
    """
    use_stack = lazy if lazy is not None else any(getattr(t, "lazy", False) for t in thunks)
    cls = Stack if use_stack else Loop
    return cls(
        fgraph,
        order,
        thunks,
        storage_map,
        compute_map,
        allow_gc=allow_gc,
        no_recycling=no_recycling,
        timed=timed,
        callback=callback,
    )
