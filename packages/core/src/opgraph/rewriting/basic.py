"""The rewrite engine: node and graph rewriters, and the walkers that apply them.

A :class:`NodeRewriter` looks at one Apply node and proposes replacements for its outputs;
a :class:`GraphRewriter` transforms a whole :class:`~opgraph.graph.fg.FunctionGraph`. The
walkers turn node rewriters into graph rewriters: :func:`in2out` and :func:`out2in` make
one pass in topological order (or its reverse), :class:`EquilibriumGraphRewriter` repeats
passes until nothing changes, bounded by ``max_use_ratio``. Every walker keeps an explicit
queue, so graphs of any depth work under Python's default recursion limit.

All changes go through :func:`apply_replacements` (``fgraph.replace_all_validate`` with the
rewriter as ``reason``), which checks the replacement types, records provenance on the
nodes the rewrite created, and counts them in ``fgraph.rewrite_stats``.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TextIO

from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Variable
from opgraph.graph.destroyhandler import attach_destroy_handler
from opgraph.graph.features import Feature, InconsistencyError, ReplaceValidate
from opgraph.graph.op import Op
from opgraph.graph.traversal import io_toposort
from opgraph.graph.utils import _trace_limit, trace_marks, user_frames
from opgraph.rewriting.provenance import (
    RewriteRecord,
    RewriteStats,
    collect_new_nodes,
    ensure_rewrite_stats,
    record_provenance,
)

__all__ = [
    "EquilibriumGraphRewriter",
    "FromFunctionNodeRewriter",
    "GraphRewriter",
    "NodeRewriter",
    "RewriteAbort",
    "RewriteWarning",
    "Rewriter",
    "SequentialGraphRewriter",
    "WalkingGraphRewriter",
    "apply_replacements",
    "in2out",
    "node_rewriter",
    "out2in",
    "rewrite_failure",
    "source_location",
]

#: What a node rewriter's ``transform`` may return.
Replacements = Sequence[Variable | None] | Mapping[Variable, Variable] | None | bool
FailureCallback = Callable[[BaseException, Any, Apply | None, Any], None]


_clock = time.perf_counter


class RewriteAbort(Exception):
    """Raised by a rewrite to stop compiling on purpose, because a flag asked for it (a GPU
    backend under ``force_device`` without a GPU, ``assert_no_cpu_op=raise``): it is never
    taken for a rewrite's bug, so ``on_opt_error`` does not turn it into a warning. Subclass
    it together with the exception type users expect."""


class RewriteWarning(UserWarning):
    """A rewrite failed and was skipped, or an equilibrium stopped at its work bound."""


# ---------------------------------------------------------------------------- helpers


def _short_path(filename: str) -> str:
    """``filename`` relative to the deepest ``sys.path`` entry holding it (e.g.
    ``opgraph_optimizers/canonicalize/math.py``), else its last three components."""
    path = os.path.abspath(filename)
    best = ""
    for entry in sys.path:
        root = os.path.join(os.path.abspath(entry or os.curdir), "")
        if path.startswith(root) and len(root) > len(best):
            best = root
    if best:
        return path[len(best) :].replace(os.sep, "/")
    return "/".join(path.split(os.sep)[-3:])


def source_location(obj: Any) -> str:
    """Return ``'path/module.py:line'`` where a function, code object or class is defined."""
    code = getattr(obj, "__code__", None)
    if code is not None:
        return f"{_short_path(code.co_filename)}:{code.co_firstlineno}"
    try:
        filename = inspect.getsourcefile(obj) or inspect.getfile(obj)
        _, line = inspect.getsourcelines(obj)
    except (TypeError, OSError):
        return "<unknown>"
    return f"{_short_path(filename)}:{line}"


_REWRITING_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "")


def caller_location() -> str:
    """``'path/module.py:line'`` of the innermost calling frame outside ``opgraph.rewriting``
    (where a pattern rewrite or a walker was declared)."""
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_REWRITING_DIR):
        frame = frame.f_back
    return f"{_short_path(frame.f_code.co_filename)}:{frame.f_lineno}"


def rewrite_failure(
    exc: BaseException, rewriter: Any, node: Apply | None, fgraph: Any = None
) -> None:
    """Handle an exception raised while applying ``rewriter`` to ``node``.

    A :class:`RewriteAbort` always propagates. Otherwise what happens depends on
    ``config.on_opt_error``: ``warn`` (default) emits a
    :class:`RewriteWarning` naming the rewrite, its source location and the node, and lets
    the walker go on; ``raise`` re-raises; ``pdb`` opens the post-mortem debugger, then goes
    on; ``ignore`` goes on silently.
    """
    if isinstance(exc, RewriteAbort):
        raise exc
    mode = config.on_opt_error
    name = getattr(rewriter, "name", None) or type(rewriter).__name__
    location = getattr(rewriter, "location", "<unknown>")
    where = f" on node {node}" if node is not None else ""
    if mode == "raise":
        if hasattr(exc, "add_note"):
            exc.add_note(f"while applying rewrite {name} ({location}){where}")
        raise exc
    if mode == "ignore":
        return
    if mode == "pdb":
        import pdb

        pdb.post_mortem(exc.__traceback__)
        return
    warnings.warn(
        f"Rewrite failure due to: {name} ({location}){where}: "
        f"{type(exc).__name__}: {exc}; the rewrite was skipped.\n"
        f"HINT: set OPGRAPH_FLAGS=on_opt_error=raise to see the traceback, or turn this "
        f"rewrite off with optimizer_excluding={name}.",
        RewriteWarning,
        stacklevel=3,
    )


def _is_inconsistency(exc: BaseException) -> bool:
    return isinstance(exc, InconsistencyError)


def _ensure_replace_validate(fgraph: Any) -> None:
    if not hasattr(fgraph, "replace_all_validate"):
        fgraph.attach_feature(ReplaceValidate())


# ---------------------------------------------------------------------------- bases


class Rewriter:
    """Common base of node and graph rewriters: a name and where it is defined."""

    name: str | None = None
    _location: str | None = None

    @property
    def location(self) -> str:
        """``'path/module.py:line'`` of the rewrite's definition (for reports and provenance)."""
        if self._location is None:
            self._location = source_location(type(self))
        return self._location

    @location.setter
    def location(self, value: str) -> None:
        self._location = value

    def __str__(self) -> str:
        return self.name or type(self).__name__

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self}>"

    def print_summary(self, stream: TextIO = sys.stdout, level: int = 0, depth: int = -1) -> None:
        """Print this rewriter (and, for containers, its children) as an indented tree."""
        print(f"{'    ' * level}{self} ({type(self).__name__}, {self.location})", file=stream)
        if depth != 0:
            for child in self._children():
                child.print_summary(stream, level + 1, depth - 1)

    def _children(self) -> Sequence[Rewriter]:
        return ()


class GraphRewriter(Rewriter):
    """A rewrite of a whole FunctionGraph.

    Subclasses define :meth:`apply` (make the changes, through ``fgraph.replace_all_validate``
    or ``fgraph.replace`` with ``reason=self``) and, if they need features on the graph,
    :meth:`add_requirements`. Callers use :meth:`rewrite`, which attaches the requirements and
    ``fgraph.rewrite_stats`` and times the run.
    """

    def apply(self, fgraph: Any) -> Any:
        """Rewrite ``fgraph`` in place."""
        raise NotImplementedError(f"{type(self).__name__} must define apply(fgraph)")

    def add_requirements(self, fgraph: Any) -> None:
        """Attach the features this rewriter needs (idempotent)."""

    def rewrite(self, fgraph: Any, *args: Any, **kwargs: Any) -> Any:
        """Attach requirements and statistics, then :meth:`apply`; return its result."""
        stats = ensure_rewrite_stats(fgraph)
        self.add_requirements(fgraph)
        # The user's frames are recorded once here: the creation traces of the variables
        # the rewrites make (thousands on a big graph) stop their walk at this frame.
        limit = _trace_limit()
        marks = trace_marks()
        marks.append((sys._getframe(), limit, user_frames(limit, skip=1)))
        stats.enter()
        start = time.perf_counter()
        try:
            return self.apply(fgraph, *args, **kwargs)
        finally:
            marks.pop()
            stats.exit(self, time.perf_counter() - start)

    def __call__(self, fgraph: Any) -> Any:
        return self.rewrite(fgraph)


class NodeRewriter(Rewriter):
    """A rewrite of one Apply node: proposes replacements for some of its outputs.

    :meth:`tracks` lists the Op classes (matching subclasses too) or Op instances (matched
    by equality) the rewrite applies to, so walkers skip other nodes without calling it;
    ``None`` means every node. :meth:`transform` returns a list with one replacement (or
    None) per output, a dict ``{old variable: new variable}``, or None/False for no change.
    It must never modify the graph itself.
    """

    def tracks(self) -> Sequence[type[Op] | Op] | None:
        """Op classes or instances this rewriter applies to, or None for all nodes."""
        return None

    def transform(self, fgraph: Any, node: Apply) -> Replacements:
        """Return the replacements for ``node``'s outputs, or None/False."""
        raise NotImplementedError(f"{type(self).__name__} must define transform(fgraph, node)")

    def add_requirements(self, fgraph: Any) -> None:
        """Attach the features this rewriter needs (idempotent)."""


class FromFunctionNodeRewriter(NodeRewriter):
    """A NodeRewriter made from a function ``f(fgraph, node)`` by :func:`node_rewriter`."""

    def __init__(
        self,
        fn: Callable[[Any, Apply], Replacements],
        tracks: Sequence[type[Op] | Op] | None,
        requirements: Sequence[Callable[[Any], None]] = (),
        inplace: bool = False,
        name: str | None = None,
    ) -> None:
        self.fn = fn
        self._tracks = list(tracks) if tracks is not None else None
        self.requirements = tuple(requirements)
        self.inplace = inplace
        self.name = name or fn.__name__
        self._location = source_location(fn)
        functools.update_wrapper(self, fn, updated=())

    def tracks(self) -> Sequence[type[Op] | Op] | None:
        return self._tracks

    def transform(self, fgraph: Any, node: Apply) -> Replacements:
        return self.fn(fgraph, node)

    def add_requirements(self, fgraph: Any) -> None:
        if self.inplace:
            attach_destroy_handler(fgraph)
        for req in self.requirements:
            req(fgraph)

    def __call__(self, fgraph: Any, node: Apply) -> Replacements:
        return self.fn(fgraph, node)


def _check_tracks(tracks: Any) -> list[type[Op] | Op] | None:
    if tracks is None:
        return None
    if callable(tracks) and not isinstance(tracks, Op | type):
        raise TypeError(
            "node_rewriter needs the Ops it tracks: write @node_rewriter([MyOp]) "
            "(or @node_rewriter(None) for every node), not a bare @node_rewriter."
        )
    if isinstance(tracks, Op | type):
        tracks = [tracks]
    tracks = list(tracks)
    if not tracks:
        raise ValueError("node_rewriter got an empty tracks list; use None to track every node.")
    for t in tracks:
        if not (isinstance(t, Op) or (isinstance(t, type) and issubclass(t, Op))):
            raise TypeError(f"node_rewriter tracks Op classes or Op instances, got {t!r}")
    return tracks


def node_rewriter(
    tracks: Sequence[type[Op] | Op] | None,
    inplace: bool = False,
    requirements: Sequence[Callable[[Any], None]] = (),
) -> Callable[[Callable[[Any, Apply], Replacements]], FromFunctionNodeRewriter]:
    """Decorator turning ``f(fgraph, node)`` into a NodeRewriter named ``f.__name__``.

    Parameters
    ----------
    tracks
        Op classes (subclasses match too) or Op instances (matched by equality) the rewrite
        applies to; ``None`` for every node.
    inplace
        The rewrite introduces destructive Ops: require a DestroyHandler on the graph.
    requirements
        Callables ``req(fgraph)`` that attach the features the rewrite needs.
    """
    checked = _check_tracks(tracks)

    def decorator(fn: Callable[[Any, Apply], Replacements]) -> FromFunctionNodeRewriter:
        return FromFunctionNodeRewriter(fn, checked, requirements, inplace)

    return decorator


# ---------------------------------------------------------------------------- dispatch


class TrackerIndex:
    """Which of a list of node rewriters apply to an Op: MRO-aware, cached per Op class.

    Rewriters keep their list order. Those tracking Op instances are looked up by equality.
    """

    def __init__(self, rewriters: Sequence[NodeRewriter]) -> None:
        self.rewriters = list(rewriters)
        self._untracked: list[int] = []
        self._by_class: dict[type, list[int]] = {}
        self._by_op: dict[Op, list[int]] = {}
        for i, rw in enumerate(self.rewriters):
            tracks = rw.tracks()
            if tracks is None:
                self._untracked.append(i)
                continue
            for t in tracks:
                table: dict[Any, list[int]] = self._by_class if isinstance(t, type) else self._by_op
                table.setdefault(t, []).append(i)
        self._cache: dict[type, tuple[NodeRewriter, ...]] = {}
        # (Op class, id of a _by_op entry) -> rewriters; the entry lives as long as the index.
        self._merged: dict[tuple[type, int], tuple[NodeRewriter, ...]] = {}
        self._class_idx: dict[type, tuple[int, ...]] = {}

    def _indices(self, cls: type) -> tuple[int, ...]:
        found = self._class_idx.get(cls)
        if found is None:
            idx = set(self._untracked)
            for klass in cls.__mro__:
                idx.update(self._by_class.get(klass, ()))
            found = self._class_idx[cls] = tuple(sorted(idx))
        return found

    def lookup_for_pass(self) -> Callable[[Op], Sequence[NodeRewriter]]:
        """A :meth:`get` for one walk over a graph, remembering its answer per Op object.

        Most nodes of a big graph share a few Op objects, and an Op's hash and equality
        (its props) are not free. The memo holds the Ops themselves, so an id is never
        reused while it lives (it lives as long as the walk).
        """
        memo: dict[int, tuple[Op, list[NodeRewriter]]] = {}
        get = self.get

        def lookup(op: Op) -> list[NodeRewriter]:
            hit = memo.get(id(op))
            if hit is None or hit[0] is not op:
                hit = memo[id(op)] = (op, get(op))
            return hit[1]

        return lookup

    def lookup_with_records(
        self, stats: RewriteStats
    ) -> Callable[[Op], Sequence[tuple[NodeRewriter, RewriteRecord]]]:
        """Like :meth:`lookup_for_pass`, each rewriter paired with its record in ``stats``."""
        lookup = self.lookup_for_pass()
        memo: dict[int, tuple[Op, list[tuple[NodeRewriter, RewriteRecord]]]] = {}
        record = stats._record

        def lookup_records(op: Op) -> list[tuple[NodeRewriter, RewriteRecord]]:
            hit = memo.get(id(op))
            if hit is None or hit[0] is not op:
                hit = memo[id(op)] = (op, [(rw, record(rw)) for rw in lookup(op)])
            return hit[1]

        return lookup_records

    def get(self, op: Op) -> list[NodeRewriter]:
        """The rewriters that track ``op`` (its class, a base class, or ``op`` itself), in
        list order."""
        cls = type(op)
        if self._by_op:
            try:
                extra = self._by_op.get(op)
            except TypeError:  # an unhashable Op never matches an instance track
                extra = None
            if extra:
                key = (cls, id(extra))
                merged = self._merged.get(key)
                if merged is None:
                    rws = self.rewriters
                    idx = sorted(set(self._indices(cls)).union(extra))
                    merged = self._merged[key] = tuple(rws[i] for i in idx)
                return list(merged)
        found = self._cache.get(cls)
        if found is None:
            rws = self.rewriters
            found = self._cache[cls] = tuple(rws[i] for i in self._indices(cls))
        return list(found)


# ---------------------------------------------------------------------------- replacing


def _normalize(rewriter: Any, node: Apply | None, result: Any) -> list[tuple[Variable, Variable]]:
    name = getattr(rewriter, "name", rewriter)
    if isinstance(result, Mapping):
        pairs = list(result.items())
    else:
        if isinstance(result, Variable):
            result = [result]
        result = list(result)
        if node is None or len(result) != len(node.outputs):
            n = len(node.outputs) if node is not None else 0
            raise ValueError(
                f"rewrite {name} returned {len(result)} replacements for node {node}, "
                f"which has {n} outputs; return one per output (None keeps an output)."
            )
        pairs = [(old, new) for old, new in zip(node.outputs, result) if new is not None]
    checked = []
    for old, new in pairs:
        if not isinstance(new, Variable):
            raise TypeError(
                f"rewrite {name} returned {new!r} ({type(new).__name__}) to replace {old}; "
                "replacements must be Variables."
            )
        if new is old:
            continue
        if new.type != old.type:
            try:
                new = old.type.filter_variable(new)
            except (TypeError, ValueError):
                raise TypeError(
                    f"rewrite {name} ({getattr(rewriter, 'location', '?')}) replaced {old} "
                    f"of type {old.type} with {new} of type {new.type}; a replacement must "
                    "have the replaced variable's type (or one convertible to it).\n"
                    "HINT: fix the rewrite, or make it return None when the types differ."
                ) from None
        checked.append((old, new))
    return checked


def apply_replacements(
    fgraph: Any,
    rewriter: Any,
    result: Replacements,
    node: Apply | None = None,
    reason: str = "",
    verbose: bool | None = None,
) -> bool:
    """Apply what ``rewriter`` returned for ``node``; return True if the graph changed.

    ``result`` is a list (one replacement or None per output of ``node``) or a dict
    ``{old: new}``. Types are checked (converted by ``old.type.filter_variable`` when they
    differ), the change goes through ``fgraph.replace_all_validate(pairs, reason=rewriter)``
    and every node it adds gets a :class:`~opgraph.rewriting.provenance.Provenance` entry.
    Raises TypeError/ValueError for a malformed result; an ``InconsistencyError`` from
    validation propagates (walkers treat it as "not applied"). ``verbose`` (default
    ``config.optimizer_verbose``) prints each replacement.
    """
    if result is None or result is False or result is True:
        return False
    pairs = _normalize(rewriter, node, result)
    if not pairs:
        return False
    created = collect_new_nodes(fgraph, [new for _, new in pairs])
    _ensure_replace_validate(fgraph)
    stats: RewriteStats | None = getattr(fgraph, "rewrite_stats", None)
    if stats is not None:
        stats.suppress_fallback += 1
    try:
        if verbose is None:
            verbose = bool(config.optimizer_verbose)
        fgraph.replace_all_validate(pairs, reason=rewriter, verbose=verbose)
    finally:
        if stats is not None:
            stats.suppress_fallback -= 1
    record_provenance(fgraph, created, rewriter, [old for old, _ in pairs], reason)
    return True


# ---------------------------------------------------------------------------- walkers


def _graph_order(fgraph: Any) -> list[Apply]:
    """The graph's nodes in ``io_toposort`` order, from the FunctionGraph's cache if it has
    one (a walk that changed nothing leaves it valid for the next walker)."""
    cached = getattr(fgraph, "io_toposort", None)
    if cached is not None:
        return cached()
    return io_toposort(fgraph.inputs, fgraph.outputs)


def _is_revert(reason: Any) -> bool:
    """True for the changes History makes while undoing a rejected replacement."""
    return isinstance(reason, tuple) and bool(reason) and reason[0] == "Revert"


class _Listener(Feature):
    """A throw-away feature calling back on node imports and input changes."""

    def __init__(
        self,
        on_import: Callable[[Apply], None] | None = None,
        on_change: Callable[[Any], None] | None = None,
    ) -> None:
        self._import = on_import
        self._change = on_change
        self.changes = 0

    def on_import(self, fgraph: Any, node: Apply, reason: Any = None) -> None:
        if _is_revert(reason):
            return
        self.changes += 1
        if self._import is not None:
            self._import(node)

    def on_prune(self, fgraph: Any, node: Apply, reason: Any = None) -> None:
        if _is_revert(reason):
            return
        self.changes += 1

    def on_change_input(
        self, fgraph: Any, node: Any, i: int, var: Any, new_var: Any, reason: Any = None
    ) -> None:
        if _is_revert(reason):
            return
        self.changes += 1
        if self._change is not None and not isinstance(node, str):
            self._change(node)


class _NodeWalkerBase(GraphRewriter):
    """Shared machinery of the walkers: requirements and trying rewriters on a node."""

    node_rewriters: list[NodeRewriter]
    failure_callback: FailureCallback | None
    _verbose: bool = False

    def add_requirements(self, fgraph: Any) -> None:
        _ensure_replace_validate(fgraph)
        for rw in self.node_rewriters:
            rw.add_requirements(fgraph)

    def _children(self) -> Sequence[Rewriter]:
        return self.node_rewriters

    def _try(
        self,
        fgraph: Any,
        node: Apply,
        rw: NodeRewriter,
        stats: RewriteStats,
        rec: RewriteRecord | None = None,
    ) -> bool:
        """Run one rewriter on one node; True if it changed the graph.

        ``rec`` is ``rw``'s record in ``stats`` when the caller looked it up already (a walk
        tries each rewriter thousands of times).
        """
        start = _clock()
        changed = False
        try:
            # (a rewriter made by @node_rewriter is called directly: one call less per try)
            if type(rw) is FromFunctionNodeRewriter:
                result = rw.fn(fgraph, node)
            else:
                result = rw.transform(fgraph, node)
            if result is not None and result is not False:
                changed = apply_replacements(
                    fgraph, rw, result, node, reason=self.name or "", verbose=self._verbose
                )
        except Exception as exc:
            if not _is_inconsistency(exc):
                (self.failure_callback or rewrite_failure)(exc, rw, node, fgraph)
        if rec is None:
            stats.record_node(rw, _clock() - start, changed)
        else:
            rec.calls += 1
            rec.time += _clock() - start
            rec.applied += changed
        return changed


class WalkingGraphRewriter(_NodeWalkerBase):
    """Apply node rewriters once to every node, in topological order or its reverse.

    Parameters
    ----------
    node_rewriters
        The rewriters (or a single one); on each node they are tried in this order until
        one removes the node.
    order
        ``"in_to_out"`` (inputs first) or ``"out_to_in"`` (outputs first).
    ignore_newtrees
        If False, nodes created during the walk are visited too (for ``out_to_in`` right
        after they appear, for ``in_to_out`` at the end).
    failure_callback
        ``callback(exc, rewriter, node, fgraph)`` for a rewriter that raised; default
        :func:`rewrite_failure` (the ``on_opt_error`` flag).
    """

    def __init__(
        self,
        node_rewriters: Sequence[NodeRewriter] | NodeRewriter,
        order: str = "in_to_out",
        ignore_newtrees: bool = True,
        failure_callback: FailureCallback | None = None,
        name: str | None = None,
    ) -> None:
        if order not in ("in_to_out", "out_to_in"):
            raise ValueError(f"order must be 'in_to_out' or 'out_to_in', got {order!r}")
        if isinstance(node_rewriters, NodeRewriter):  # Theano's TopoOptimizer(local_opt)
            node_rewriters = [node_rewriters]
        self.node_rewriters = list(node_rewriters)
        for rw in self.node_rewriters:
            if not isinstance(rw, NodeRewriter):
                raise TypeError(f"{type(self).__name__} walks NodeRewriters, got {rw!r}")
        self.order = order
        self.ignore_newtrees = ignore_newtrees
        self.failure_callback = failure_callback
        short = "in2out" if order == "in_to_out" else "out2in"
        self.name = name or f"{short}({', '.join(str(r) for r in self.node_rewriters)})"
        self._index = TrackerIndex(self.node_rewriters)
        self._location = caller_location()

    def apply(self, fgraph: Any, start_from: Sequence[Variable] | None = None) -> int:
        """Walk the graph once; return the number of rewrites applied."""
        stats = ensure_rewrite_stats(fgraph)
        self._verbose = bool(config.optimizer_verbose)
        if not start_from:
            queue: deque[Apply] = deque(_graph_order(fgraph))
        else:
            queue = deque(io_toposort(fgraph.inputs, start_from))
        listener = None if self.ignore_newtrees else _Listener(on_import=queue.append)
        if listener is not None:
            fgraph.attach_feature(listener)
        pop = queue.pop if self.order == "out_to_in" else queue.popleft
        applied = 0
        apply_nodes = fgraph.apply_nodes
        tracking = self._index.lookup_with_records(stats)
        try:
            while queue:
                node = pop()
                if node not in apply_nodes:
                    continue
                for rw, rec in tracking(node.op):
                    if self._try(fgraph, node, rw, stats, rec):
                        applied += 1
                        if node not in apply_nodes:
                            break
        finally:
            if listener is not None:
                fgraph.remove_feature(listener)
        return applied


def in2out(
    *rewriters: NodeRewriter,
    ignore_newtrees: bool = True,
    failure_callback: FailureCallback | None = None,
    name: str | None = None,
) -> WalkingGraphRewriter:
    """A graph rewriter applying ``rewriters`` once per node, inputs first."""
    walker = WalkingGraphRewriter(
        rewriters, "in_to_out", ignore_newtrees, failure_callback, name=name
    )
    return walker


def out2in(
    *rewriters: NodeRewriter,
    ignore_newtrees: bool = True,
    failure_callback: FailureCallback | None = None,
    name: str | None = None,
) -> WalkingGraphRewriter:
    """A graph rewriter applying ``rewriters`` once per node, outputs first."""
    walker = WalkingGraphRewriter(
        rewriters, "out_to_in", ignore_newtrees, failure_callback, name=name
    )
    return walker


def walk_one(rewriter: NodeRewriter, name: str | None = None) -> WalkingGraphRewriter:
    """``in2out(rewriter)`` for a container that runs a node rewriter as a graph rewriter
    (a sequence, a database's final or cleanup step): it reports ``rewriter``'s own
    location, so ``rewrite_report()`` points at the rewrite's source line, not at the line
    that queried the database."""
    walker = in2out(rewriter, name=name)
    walker.location = rewriter.location
    return walker


class EquilibriumGraphRewriter(_NodeWalkerBase):
    """Apply rewriters until none applies any more (a fixed point), with a work bound.

    Each pass runs the graph rewriters among ``rewriters`` once, then walks every node
    (outputs first) trying the node rewriters, then runs ``final_rewriters``; after each of
    these phases that changed the graph, ``cleanup_rewriters`` (e.g. a merge) run. Passes
    repeat until one changes nothing. If a single rewrite is applied more than
    ``max_use_ratio`` x (number of nodes at the start) times, the run stops with a
    :class:`RewriteWarning` naming that rewrite: it probably undoes another one, or keeps
    growing the graph.

    Parameters
    ----------
    rewriters
        Node rewriters and graph rewriters.
    max_use_ratio
        The bound above; None reads ``config.optdb__max_use_ratio`` when the run starts.
    ignore_newtrees
        If False (default), nodes created during a pass are visited in the same pass.
    tracks_on_change_inputs
        Also revisit, in the same pass, nodes whose inputs a rewrite changed.
    """

    def __init__(
        self,
        rewriters: Sequence[NodeRewriter | GraphRewriter],
        max_use_ratio: float | None = None,
        ignore_newtrees: bool = False,
        tracks_on_change_inputs: bool = False,
        failure_callback: FailureCallback | None = None,
        final_rewriters: Sequence[GraphRewriter] = (),
        cleanup_rewriters: Sequence[GraphRewriter] = (),
        name: str | None = None,
    ) -> None:
        self.node_rewriters = [r for r in rewriters if isinstance(r, NodeRewriter)]
        self.global_rewriters = [r for r in rewriters if not isinstance(r, NodeRewriter)]
        for r in (*self.global_rewriters, *final_rewriters, *cleanup_rewriters):
            if not isinstance(r, GraphRewriter):
                raise TypeError(f"EquilibriumGraphRewriter got {r!r}, which is not a rewriter")
        self.final_rewriters = list(final_rewriters)
        self.cleanup_rewriters = list(cleanup_rewriters)
        self.max_use_ratio = max_use_ratio
        self.ignore_newtrees = ignore_newtrees
        self.tracks_on_change_inputs = tracks_on_change_inputs
        self.failure_callback = failure_callback
        self.name = name or "equilibrium"
        self._index = TrackerIndex(self.node_rewriters)
        self._location = caller_location()

    def _children(self) -> Sequence[Rewriter]:
        return [
            *self.global_rewriters,
            *self.node_rewriters,
            *self.final_rewriters,
            *self.cleanup_rewriters,
        ]

    def add_requirements(self, fgraph: Any) -> None:
        super().add_requirements(fgraph)
        for r in (*self.global_rewriters, *self.final_rewriters, *self.cleanup_rewriters):
            r.add_requirements(fgraph)

    def apply(self, fgraph: Any) -> int:
        """Rewrite to a fixed point; return the number of rewrites applied."""
        stats = ensure_rewrite_stats(fgraph)
        self._verbose = bool(config.optimizer_verbose)
        ratio = self.max_use_ratio
        if ratio is None:
            ratio = float(config.optdb__max_use_ratio)
        budget = _UseBudget(self, ratio, len(fgraph.apply_nodes))
        tracker = _Listener()
        fgraph.attach_feature(tracker)
        total = 0
        try:
            changed = True
            while changed and not budget.exhausted:
                changed = False
                for group in (self.global_rewriters, None, self.final_rewriters):
                    if group is None:
                        n = self._node_pass(fgraph, stats, budget)
                    else:
                        n = self._graph_pass(fgraph, group, tracker, budget)
                    total += n
                    if n:
                        changed = True
                        self._graph_pass(fgraph, self.cleanup_rewriters, tracker, None)
                    if budget.exhausted:
                        break
        finally:
            fgraph.remove_feature(tracker)
        return total

    def _graph_pass(
        self,
        fgraph: Any,
        rewriters: Sequence[GraphRewriter],
        tracker: _Listener,
        budget: _UseBudget | None,
    ) -> int:
        """Run graph rewriters once; count (against ``budget``) those that changed the graph."""
        applied = 0
        for rw in rewriters:
            before = tracker.changes
            try:
                rw.rewrite(fgraph)
            except Exception as exc:
                if not _is_inconsistency(exc):
                    (self.failure_callback or rewrite_failure)(exc, rw, None, fgraph)
            if budget is not None and tracker.changes != before:
                applied += 1
                if not budget.spend(rw):
                    break
        return applied

    def _node_pass(self, fgraph: Any, stats: RewriteStats, budget: _UseBudget) -> int:
        """Try the node rewriters on every node, outputs first (and new nodes as they come)."""
        queue: deque[Apply] = deque(_graph_order(fgraph))
        listener = None
        if not self.ignore_newtrees or self.tracks_on_change_inputs:
            listener = _Listener(
                on_import=None if self.ignore_newtrees else queue.append,
                on_change=queue.append if self.tracks_on_change_inputs else None,
            )
            fgraph.attach_feature(listener)
        applied = 0
        apply_nodes = fgraph.apply_nodes
        tracking = self._index.lookup_with_records(stats)
        try:
            while queue and not budget.exhausted:
                node = queue.pop()
                if node not in apply_nodes:
                    continue
                for rw, rec in tracking(node.op):
                    if self._try(fgraph, node, rw, stats, rec):
                        applied += 1
                        if not budget.spend(rw) or node not in apply_nodes:
                            break
        finally:
            if listener is not None:
                fgraph.remove_feature(listener)
        return applied


class _UseBudget:
    """How often each rewrite was applied during one equilibrium run, against the bound."""

    def __init__(self, owner: EquilibriumGraphRewriter, ratio: float, n_nodes: int) -> None:
        self.owner = owner
        self.ratio = ratio
        self.n_nodes = n_nodes
        self.max_use = max(1.0, ratio * n_nodes)
        self.counts: dict[int, int] = {}
        self.exhausted = False

    def spend(self, rw: Rewriter) -> bool:
        """Count one application of ``rw``; False (with a warning) once it used too many."""
        n = self.counts[id(rw)] = self.counts.get(id(rw), 0) + 1
        if n <= self.max_use or self.exhausted:
            return not self.exhausted
        self.exhausted = True
        owner = self.owner
        warnings.warn(
            f"{type(owner).__name__} {owner.name!r} stopped early: rewrite {rw} "
            f"({rw.location}) was applied {n} times, more than max_use_ratio ({self.ratio}) x "
            f"{self.n_nodes} nodes. It probably undoes another rewrite or keeps growing the "
            f"graph.\nHINT: turn it off with optimizer_excluding={rw} and report it; if the "
            "graph really needs that much work, raise OPGRAPH_FLAGS=optdb__max_use_ratio=<n>.",
            RewriteWarning,
            stacklevel=5,
        )
        return False


class SequentialGraphRewriter(GraphRewriter):
    """Apply graph rewriters one after the other (node rewriters are wrapped in in2out).

    A rewriter that raises is handled by ``failure_callback`` (default
    :func:`rewrite_failure`, driven by ``config.on_opt_error``).
    """

    def __init__(
        self,
        *rewriters: GraphRewriter | NodeRewriter | Iterable[GraphRewriter | NodeRewriter],
        failure_callback: FailureCallback | None = None,
        name: str | None = None,
    ) -> None:
        if len(rewriters) == 1 and not isinstance(rewriters[0], Rewriter):
            rewriters = tuple(rewriters[0])  # type: ignore[arg-type]
        items: list[GraphRewriter] = []
        for rw in rewriters:
            if isinstance(rw, NodeRewriter):
                rw = walk_one(rw, name=str(rw))
            if not isinstance(rw, GraphRewriter):
                raise TypeError(f"SequentialGraphRewriter got {rw!r}, which is not a rewriter")
            items.append(rw)
        self.rewriters = items
        self.failure_callback = failure_callback
        self.name = name or "sequence"
        self._location = caller_location()

    def _children(self) -> Sequence[Rewriter]:
        return self.rewriters

    def add_requirements(self, fgraph: Any) -> None:
        for rw in self.rewriters:
            rw.add_requirements(fgraph)

    def apply(self, fgraph: Any) -> None:
        for rw in self.rewriters:
            try:
                rw.rewrite(fgraph)
            except Exception as exc:
                if not _is_inconsistency(exc):
                    (self.failure_callback or rewrite_failure)(exc, rw, None, fgraph)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.rewriters)

    def __len__(self) -> int:
        return len(self.rewriters)
