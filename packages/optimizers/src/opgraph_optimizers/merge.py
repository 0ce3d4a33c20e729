"""Common-subexpression elimination: equal constants and equal nodes become one.

:class:`MergeOptimizer` makes one pass over the graph in topological order. Constants are
merged by value (``Constant.signature()``: type and data); then a node whose op equals an
earlier node's op and whose inputs are the very same variables is replaced by that node.
Because the walk goes inputs first and replacing rewires the clients at once, chains of
duplicates collapse in the same pass: the work is one dictionary lookup per node, with no
recursion over the graph's depth.

It runs in the ``merge1``, ``merge2`` and ``merge3`` stages (tags ``fast_run``,
``fast_compile``, ``merge``) and as a clean-up inside ``canonicalize`` and ``specialize``,
after each phase that changed the graph.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.features import InconsistencyError
from opgraph.rewriting import GraphRewriter, apply_replacements

from opgraph_optimizers.registry import rewrites

__all__ = ["MergeOptimizer", "find_merges", "merge_optimizer"]


def _node_key(node: Apply, inputs: list[Variable]) -> Hashable | None:
    """``(op, ids of the inputs, number of outputs)``, or None for a node never merged."""
    op = node.op
    if getattr(op, "destroy_map", None):
        return None  # two nodes destroying the same buffer are not interchangeable
    try:
        hash(op)
    except TypeError:
        return None
    return (op, tuple(id(i) for i in inputs), len(node.outputs))


class MergeOptimizer(GraphRewriter):
    """Merge equal constants and nodes applying equal ops to identical inputs.

    The replacements of one pass are applied together and validated once; if that fails
    (a DestroyHandler refusing to share a buffer, say), each merge is tried on its own and
    the refused ones are skipped.
    """

    def __init__(self, name: str = "merge") -> None:
        self.name = name

    def apply(self, fgraph: Any) -> int:
        """Merge duplicates in ``fgraph``; return the number of variables replaced."""
        pairs = find_merges(fgraph)
        if not pairs:
            return 0
        try:
            apply_replacements(fgraph, self, dict(pairs), None, reason=self.name)
            return len(pairs)
        except InconsistencyError:
            pass
        done = 0
        for old, new in pairs:
            if old not in fgraph.variables or new not in fgraph.variables:
                continue
            try:
                if apply_replacements(fgraph, self, {old: new}, None, reason=self.name):
                    done += 1
            except InconsistencyError:
                continue
        return done


def _constant_key(var: Constant) -> Hashable | None:
    try:
        sig = var.signature()
        hash(sig)
    except TypeError:
        return None
    return sig


def find_merges(fgraph: Any) -> list[tuple[Variable, Variable]]:
    """``(duplicate, kept)`` pairs: constants of equal signature, then nodes equal up to them.

    Walks the nodes once in topological order, keeping ``canon``, the variable each one
    becomes once the earlier merges are applied; so one pass finds whole duplicated chains.
    """
    canon: dict[Variable, Variable] = {}
    constants: dict[Hashable, Constant] = {}
    nodes: dict[Hashable, Apply] = {}
    pairs: list[tuple[Variable, Variable]] = []

    def canonical_constant(var: Constant) -> None:
        if var in canon:
            return
        key = _constant_key(var)
        if key is None:
            return
        kept = constants.setdefault(key, var)
        if kept is not var:
            canon[var] = kept
            pairs.append((var, kept))

    for node in fgraph.toposort():
        for var in node.inputs:
            if isinstance(var, Constant):
                canonical_constant(var)
        key = _node_key(node, [canon.get(i, i) for i in node.inputs])
        if key is None:
            continue
        kept = nodes.setdefault(key, node)
        if kept is node:
            continue
        if any(o.type != k.type for o, k in zip(node.outputs, kept.outputs, strict=True)):
            continue
        for old, new in zip(node.outputs, kept.outputs, strict=True):
            canon[old] = new
            pairs.append((old, new))
    for var in fgraph.outputs:
        if isinstance(var, Constant):
            canonical_constant(var)
    return pairs


#: The merge rewriter of the merge stages (Theano's ``merge_optimizer``).
merge_optimizer = MergeOptimizer()

for _stage in ("merge1", "merge2", "merge3"):
    rewrites.register(_stage, merge_optimizer, "fast_run", "fast_compile", "merge", name="merge")
rewrites.register(
    "canonicalize", MergeOptimizer(), "fast_run", "fast_compile", "merge", cleanup=True
)
rewrites.register("specialize", MergeOptimizer(), "fast_run", "merge", cleanup=True)
