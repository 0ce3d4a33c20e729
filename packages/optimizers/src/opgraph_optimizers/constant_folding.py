"""Constant folding: a node whose inputs are all constants is computed once, at compile time.

``constant_folding`` runs the node's ``perform`` on the constants' data and replaces each
output by a Constant of the output's type (``TensorConstant{...}``). An Op opts out with
``do_constant_folding(fgraph, node) -> False`` (e.g. an Alloc whose result is large); Ops
that destroy an input are never folded (a constant is read-only).

As in Theano, the rewrite runs as ``topo_constant_folding``: one walk, inputs first, at the
end of each pass of the ``canonicalize``, ``stabilize``, ``specialize`` and
``uncanonicalize`` stages (tags ``fast_run``, ``fast_compile``, ``constant_folding``), so a
chain of constant nodes folds in one walk.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.traversal import io_toposort
from opgraph.rewriting import WalkingGraphRewriter, node_rewriter
from opgraph.rewriting.provenance import ensure_rewrite_stats
from opgraph_optimizers.registry import rewrites

__all__ = ["constant_folding", "fold_node", "topo_constant_folding"]


def fold_node(fgraph: Any, node: Apply) -> list[Variable] | None:
    """Compute ``node`` on its constant inputs and return one Constant per output.

    Returns None if an input is not a Constant, the Op opts out, destroys an input, or
    fails to compute or to produce values of its outputs' types.
    """
    if not all(isinstance(i, Constant) for i in node.inputs):
        return None
    op = node.op
    if getattr(op, "destroy_map", None):
        return None
    if not op.do_constant_folding(fgraph, node):
        return None
    storage_map: dict[Variable, list[Any]] = {i: [i.data] for i in node.inputs}
    compute_map: dict[Variable, list[bool]] = {i: [True] for i in node.inputs}
    for out in node.outputs:
        storage_map[out] = [None]
        compute_map[out] = [False]
    try:
        thunk = op.make_thunk(node, storage_map, compute_map, [], impl="py")
        with np.errstate(all="ignore"):
            thunk()
    except Exception:  # an error here is the run-time error of the user's graph; keep it there
        return None
    storage = [storage_map[out] for out in node.outputs]
    result = []
    for out, (value,) in zip(node.outputs, storage, strict=True):
        try:
            const = out.type.make_constant(value)
        except (TypeError, ValueError):
            return None
        if const.type != out.type:
            return None
        result.append(const)
    return result


@node_rewriter(None)
def constant_folding(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``op(c1, c2, ...) -> TensorConstant{op(c1, c2, ...)}`` for constant inputs."""
    return fold_node(fgraph, node)


class _ConstantFoldingWalk(WalkingGraphRewriter):
    """The inputs-first walk of :func:`constant_folding`, trying only nodes whose inputs are
    all constants (a folded node's clients qualify when the walk reaches them).

    It runs after every pass of four stages: on a graph of thousands of nodes with none to
    fold, checking the inputs directly costs a fraction of a rewriter call per node.
    """

    def apply(self, fgraph: Any, start_from: Any = None) -> int:
        stats = ensure_rewrite_stats(fgraph)
        order = io_toposort(fgraph.inputs, start_from) if start_from else fgraph.io_toposort()
        apply_nodes = fgraph.apply_nodes
        (rw,) = self.node_rewriters
        applied = 0
        for node in order:
            if node in apply_nodes and all(isinstance(i, Constant) for i in node.inputs):
                applied += self._try(fgraph, node, rw, stats)
        return applied


#: One inputs-first walk folding every constant subgraph (Theano's name).
topo_constant_folding = _ConstantFoldingWalk(
    [constant_folding], "in_to_out", name="topo_constant_folding"
)

for _stage, _tags in (
    ("canonicalize", ("fast_run", "fast_compile")),
    ("stabilize", ("fast_run",)),
    ("specialize", ("fast_run",)),
    ("uncanonicalize", ("fast_run",)),
):
    rewrites.register(
        _stage, topo_constant_folding, *_tags, "constant_folding", final_rewriter=True
    )
