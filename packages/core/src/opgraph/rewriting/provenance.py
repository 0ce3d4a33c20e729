"""Which rewrite made which node, and what the rewrites of a compilation cost.

Every node a rewrite adds to a FunctionGraph gets a :class:`Provenance` entry in
``node.tag.provenance`` (a list: a node may be rebuilt by several rewrites in a row).
``fgraph.rewrite_stats`` (a :class:`RewriteStats` feature, attached by the first rewrite run
on the graph) counts, per rewrite, its calls, applications, nodes created and removed and
the time spent; :func:`rewrite_report` renders it as a table (``f.maker.rewrite_report()``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.features import Feature

__all__ = [
    "Provenance",
    "RewriteRecord",
    "RewriteStats",
    "collect_new_nodes",
    "ensure_rewrite_stats",
    "record_provenance",
    "rewrite_provenance",
    "rewrite_report",
]


@dataclass(frozen=True)
class Provenance:
    """One rewrite that created a node.

    Attributes
    ----------
    rewrite
        The rewrite's name (``local_mul_one``), the handle for ``optimizer_excluding``.
    location
        ``'path/module.py:line'`` where the rewrite is defined.
    replaced
        The variable(s) the rewrite replaced, as printed before the change.
    reason
        The walker or stage that applied the rewrite (``canonicalize``, ``in2out(...)``).
    """

    rewrite: str
    location: str
    replaced: str = ""
    reason: str = ""

    def __str__(self) -> str:
        text = f"introduced by {self.rewrite} ({self.location})"
        if self.replaced:
            text += f", replacing {self.replaced}"
        if self.reason:
            text += f", in {self.reason}"
        return text


def rewrite_provenance(obj: Variable | Apply) -> list[Provenance]:
    """The rewrites that created ``obj`` (a node, or the node owning a variable), oldest first.

    Empty for graph inputs, constants and nodes the user built.
    """
    node = obj.owner if isinstance(obj, Variable) else obj
    if node is None:
        return []
    return list(getattr(node.tag, "provenance", ()))


def _rewrite_identity(rewriter: Any) -> tuple[str, str]:
    name = getattr(rewriter, "name", None) or str(rewriter)
    return name, getattr(rewriter, "location", "") or ""


def _describe(var: Variable) -> str:
    return str(var.owner) if var.owner is not None else str(var)


def collect_new_nodes(fgraph: Any, new_vars: list[Variable]) -> list[tuple[int, Apply]]:
    """The Apply nodes computing ``new_vars`` that are not yet in ``fgraph``, each with the
    index of the first new variable that needs it (an explicit stack: no recursion)."""
    in_graph = fgraph.apply_nodes
    seen: set[int] = set()
    found: list[tuple[int, Apply]] = []
    for i, var in enumerate(new_vars):
        stack = [var]
        while stack:
            node = stack.pop().owner
            if node is None or id(node) in seen or node in in_graph:
                continue
            seen.add(id(node))
            found.append((i, node))
            stack.extend(node.inputs)
    return found


def record_provenance(
    fgraph: Any,
    created: list[tuple[int, Apply]],
    rewriter: Any,
    replaced: list[Variable],
    reason: str = "",
) -> None:
    """Append a :class:`Provenance` to each node of ``created`` that is now in ``fgraph``."""
    if not created:
        return
    name, location = _rewrite_identity(rewriter)
    entries: dict[int, Provenance] = {}
    in_graph = fgraph.apply_nodes
    for i, node in created:
        if node not in in_graph:
            continue
        entry = entries.get(i)
        if entry is None:
            entry = entries[i] = Provenance(name, location, _describe(replaced[i]), reason)
        # The history of the replaced expression carries over: a node fused from the result
        # of earlier rewrites still tells the whole story. A new list each time: Apply.clone
        # copies tags shallowly, so never mutate in place.
        old_owner = replaced[i].owner
        inherited = getattr(old_owner.tag, "provenance", ()) if old_owner is not None else ()
        own = [p for p in getattr(node.tag, "provenance", ()) if p not in inherited]
        node.tag.provenance = [*inherited, *own, entry]
        copy_stack_trace(replaced[i], node)


def copy_stack_trace(old: Variable, node: Apply) -> None:
    """Give ``node`` (built by a rewrite) the creation trace of the variable it replaces.

    A node made during compilation would otherwise record the user's ``function(...)``
    line; the line that built the replaced expression is what a runtime error should name.
    """
    trace = getattr(old.tag, "trace", None)
    if not trace:
        return
    node.tag.trace = trace
    for out in node.outputs:
        out.tag.trace = trace


@dataclass
class RewriteRecord:
    """What one rewrite did during the rewrite runs on a graph."""

    name: str
    location: str
    kind: str = "node"
    calls: int = 0
    applied: int = 0
    time: float = 0.0
    created: int = 0
    removed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class RewriteStats(Feature):
    """A FunctionGraph feature counting, per rewrite, calls, applications, nodes created and
    removed, and time. Attached as ``fgraph.rewrite_stats`` by the first rewrite run.

    Node counts come from the graph's ``on_import``/``on_prune`` callbacks, attributed to the
    ``reason`` of the change (the rewriter). Nodes a graph rewriter adds through
    ``fgraph.replace*`` directly also get a :class:`Provenance` here (without ``replaced``).
    """

    def __init__(self) -> None:
        self.records: dict[tuple[str, str], RewriteRecord] = {}
        self._seen: dict[int, tuple[Any, Any, RewriteRecord]] = {}
        self.total_time = 0.0
        self.depth = 0
        self.suppress_fallback = 0

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_seen"] = {}  # a cache keyed by id(), holding the rewriters themselves
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("_seen", {})

    # -- feature callbacks
    def on_attach(self, fgraph: Any) -> None:
        fgraph.rewrite_stats = self

    def on_detach(self, fgraph: Any) -> None:
        if getattr(fgraph, "rewrite_stats", None) is self:
            del fgraph.rewrite_stats

    def on_import(self, fgraph: Any, node: Apply, reason: Any = None) -> None:
        if reason is None or getattr(reason, "location", None) is None:
            return
        self._record(reason).created += 1
        if not self.suppress_fallback:
            name, location = _rewrite_identity(reason)
            entry = Provenance(name, location)
            node.tag.provenance = [*getattr(node.tag, "provenance", ()), entry]

    def on_prune(self, fgraph: Any, node: Apply, reason: Any = None) -> None:
        if reason is not None and getattr(reason, "location", None) is not None:
            self._record(reason).removed += 1

    # -- recording
    def _record(self, rewriter: Any, kind: str = "node") -> RewriteRecord:
        # The record of a rewriter object seen before, without recomputing its identity
        # (its ``location`` is a property): kept with the object, so its id is never reused.
        seen = self._seen.get(id(rewriter))
        if seen is not None and seen[0] is rewriter and seen[1] == getattr(rewriter, "name", None):
            return seen[2]
        key = _rewrite_identity(rewriter)
        rec = self.records.get(key)
        if rec is None:
            rec = self.records[key] = RewriteRecord(key[0], key[1], kind)
        self._seen[id(rewriter)] = (rewriter, getattr(rewriter, "name", None), rec)
        return rec

    def record_node(self, rewriter: Any, seconds: float, applied: bool) -> None:
        """Count one call of a node rewriter (and whether it changed the graph)."""
        rec = self._record(rewriter)
        rec.calls += 1
        rec.time += seconds
        if applied:
            rec.applied += 1

    def enter(self) -> None:
        """A graph rewriter starts (nesting depth, so that only top-level runs sum up)."""
        self.depth += 1

    def exit(self, rewriter: Any, seconds: float) -> None:
        """A graph rewriter finished after ``seconds``."""
        self.depth -= 1
        rec = self._record(rewriter, "graph")
        rec.kind = "graph"
        rec.calls += 1
        rec.time += seconds
        if self.depth == 0:
            self.total_time += seconds

    def __getitem__(self, name: str) -> RewriteRecord:
        """The record of the rewrite called ``name`` (KeyError if it never ran)."""
        for (rec_name, _), rec in self.records.items():
            if rec_name == name:
                return rec
        raise KeyError(f"no rewrite named {name!r} ran on this graph")

    def __contains__(self, name: object) -> bool:
        return any(rec_name == name for rec_name, _ in self.records)

    def report(self, include_unused: bool = False) -> str:
        """A table of the rewrites, most expensive first.

        Columns: rewrite, applied, time, calls, nodes created/removed, location. Graph
        rewriters (stages, walkers) are marked ``[graph]``; their time includes the rewrites
        they ran. Rewrites that were tried but never applied are left out unless
        ``include_unused``.
        """
        rows = [
            r
            for r in self.records.values()
            if include_unused or r.applied or r.created or r.kind == "graph"
        ]
        rows.sort(key=lambda r: (-r.time, r.name))
        header = ("rewrite", "applied", "time", "calls", "created", "removed", "location")
        table = [header]
        for r in rows:
            name = f"{r.name} [graph]" if r.kind == "graph" else r.name
            table.append(
                (
                    name,
                    str(r.applied) if r.kind == "node" else "-",
                    f"{r.time:.4f}s",
                    str(r.calls),
                    str(r.created),
                    str(r.removed),
                    r.location,
                )
            )
        widths = [max(len(row[c]) for row in table) for c in range(len(header))]
        widths[0] = min(widths[0], 60)
        lines = [
            f"Rewrites: {self.total_time:.4f}s in total, {len(self.records)} rewrites ran, "
            f"{sum(r.applied for r in self.records.values())} node rewrites applied"
        ]
        for row in table:
            cells = [row[0].ljust(widths[0])]
            cells += [row[c].rjust(widths[c]) for c in range(1, len(row) - 1)]
            cells.append(row[-1])
            lines.append("  ".join(cells).rstrip())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def ensure_rewrite_stats(fgraph: Any) -> RewriteStats:
    """Return ``fgraph.rewrite_stats``, attaching a new :class:`RewriteStats` if needed."""
    stats = getattr(fgraph, "rewrite_stats", None)
    if stats is None:
        stats = RewriteStats()
        fgraph.attach_feature(stats)
        fgraph.rewrite_stats = stats
    return stats


def rewrite_report(fgraph: Any, include_unused: bool = False) -> str:
    """The rewrite statistics of ``fgraph`` as a table (what ``f.maker.rewrite_report()``
    shows), or a line saying that no rewrite ran."""
    stats = getattr(fgraph, "rewrite_stats", None)
    if stats is None:
        return "Rewrites: none ran on this graph."
    return stats.report(include_unused=include_unused)
