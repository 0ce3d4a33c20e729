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

__all__ = ["MergeOptimizer", "find_merges", "inputs_first", "merge_optimizer"]


class _OpIds:
    """Small ints standing for ops, equal for equal ops: ``op.__hash__``/``__eq__`` (which
    compare props) run once per distinct op object rather than once per node."""

    def __init__(self) -> None:
        self._by_id: dict[int, int | None] = {}
        self._by_op: dict[Any, int] = {}
        self._keep: list[Any] = []  # keeps the ops alive, so their ids stay unique

    def __call__(self, op: Any) -> int | None:
        key = id(op)
        if key in self._by_id:
            return self._by_id[key]
        try:
            value: int | None = self._by_op.setdefault(op, len(self._by_op))
        except TypeError:  # an unhashable op is never merged
            value = None
        self._by_id[key] = value
        self._keep.append(op)
        return value


def inputs_first(fgraph: Any) -> list[Apply]:
    """The graph's nodes, every node after the nodes computing its inputs.

    An iterative depth-first walk from the outputs (deterministic, no recursion); unlike
    ``fgraph.toposort()`` it ignores the extra orderings of features, which merging does
    not need. That is ``fgraph.io_toposort()``, which a FunctionGraph keeps until the graph
    changes: it is used when there.
    """
    cached = getattr(fgraph, "io_toposort", None)
    if cached is not None:
        return cached()
    order: list[Apply] = []
    done: set[Apply] = set()
    nodes = fgraph.apply_nodes
    for out in fgraph.outputs:
        root = out.owner
        if root is None or root in done or root not in nodes:
            continue
        stack: list[tuple[Apply, int]] = [(root, 0)]
        done.add(root)
        while stack:
            node, k = stack[-1]
            if k < len(node.inputs):
                stack[-1] = (node, k + 1)
                owner = node.inputs[k].owner
                if owner is not None and owner not in done and owner in nodes:
                    done.add(owner)
                    stack.append((owner, 0))
            else:
                stack.pop()
                order.append(node)
    return order


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
    """``(duplicate, kept)`` pairs: outputs of nodes equal up to merged constants, then
    constants of equal signature.

    Walks the nodes once in topological order, keeping ``canon``, the variable each one
    becomes once the earlier merges are applied; so one pass finds whole duplicated chains.
    Node pairs come first and outputs first: a duplicated chain then leaves the graph from
    its end, each node while its inputs are still its own, never by a removal from the long
    client list of a merged variable (which would make merging quadratic).
    """
    canon: dict[Variable, Variable] = {}
    constants: dict[Hashable, Constant] = {}
    nodes: dict[Hashable, Apply] = {}
    pairs: list[tuple[Variable, Variable]] = []
    constant_pairs: list[tuple[Variable, Variable]] = []

    def canonical_constant(var: Constant) -> None:
        if var in canon:
            return
        key = _constant_key(var)
        if key is None:
            return
        kept = constants.setdefault(key, var)
        if kept is not var:
            canon[var] = kept
            constant_pairs.append((var, kept))

    op_ids = _OpIds()
    for node in inputs_first(fgraph):
        for var in node.inputs:
            if isinstance(var, Constant):
                canonical_constant(var)
        if getattr(node.op, "destroy_map", None):
            continue  # two nodes destroying the same buffer are not interchangeable
        op_id = op_ids(node.op)
        if op_id is None:
            continue
        key = (op_id, len(node.outputs), *(id(canon.get(i, i)) for i in node.inputs))
        kept = nodes.setdefault(key, node)
        if kept is node:
            continue
        for old, new in zip(node.outputs, kept.outputs, strict=True):
            canon[old] = new
            pairs.append((old, new))
    for var in fgraph.outputs:
        if isinstance(var, Constant):
            canonical_constant(var)
    return pairs[::-1] + constant_pairs


#: The merge rewriter of the merge stages (Theano's ``merge_optimizer``).
merge_optimizer = MergeOptimizer()

for _stage in ("merge1", "merge2", "merge3"):
    rewrites.register(_stage, merge_optimizer, "fast_run", "fast_compile", "merge", name="merge")
rewrites.register(
    "canonicalize", MergeOptimizer(), "fast_run", "fast_compile", "merge", cleanup=True
)
rewrites.register("specialize", MergeOptimizer(), "fast_run", "merge", cleanup=True)
