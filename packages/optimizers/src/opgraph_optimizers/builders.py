"""Inlining ``OpFromGraph(..., inline=True)``: the node is replaced by its inner graph.

Theano's ``inline_ofg_expansion``: registered in the global database at position -0.01
(before ``merge1`` and every other stage, tags ``fast_run`` and ``fast_compile``), so that the
inner nodes are merged, canonicalized and fused together with the rest of the graph. The walk
also visits the nodes it creates, so an inline OpFromGraph nested in another is expanded too.
Nodes of an OpFromGraph built with ``inline=False`` are left alone (they run the Op's
pre-compiled inner function).
"""

from __future__ import annotations

from typing import Any

from opgraph.compile.builders import OpFromGraph
from opgraph.graph.basic import Apply, Variable
from opgraph.rewriting import in2out, node_rewriter
from opgraph_optimizers.registry import rewrites

__all__ = ["inline_ofg_expansion"]


@node_rewriter([OpFromGraph])
def inline_ofg_expansion(fgraph: Any, node: Apply) -> list[Variable] | None:
    """Replace an inline OpFromGraph node by a copy of its inner graph on the node's inputs."""
    op = node.op
    if not isinstance(op, OpFromGraph) or not op.is_inline:
        return None
    _, outputs = op.clone_inner(dict(zip(op.inner_inputs, node.inputs, strict=True)))
    return outputs


rewrites.register(
    "optdb",
    in2out(inline_ofg_expansion, ignore_newtrees=False, name="inline_ofg_expansion"),
    "fast_run",
    "fast_compile",
    name="inline_ofg_expansion",
    position=-0.01,
)
