"""Rewrites of ``opgraph.tensor.nnet`` Ops that are not about numerical stability.

- ``local_ctc_no_grad`` (canonicalize, also in FAST_COMPILE; Theano's name): a
  ``ConnectionistTemporalClassification`` whose ``gradients`` output nobody reads becomes
  the Op with ``compute_grad=False``, so the cost alone is computed.

The stable forms of softmax and cross-entropy are in :mod:`opgraph_optimizers.stabilize`.
"""

from __future__ import annotations

from typing import Any

from opgraph.graph.basic import Apply, Variable
from opgraph.rewriting import node_rewriter
from opgraph.tensor.nnet.ctc import ConnectionistTemporalClassification
from opgraph_optimizers.registry import rewrites

__all__ = ["local_ctc_no_grad"]


@rewrites.canonicalize("fast_compile")
@node_rewriter([ConnectionistTemporalClassification])
def local_ctc_no_grad(fgraph: Any, node: Apply) -> list[Variable | None] | None:
    """``ctc(..., compute_grad=True)`` whose gradient is unused -> ``compute_grad=False``."""
    if not node.op.compute_grad or fgraph.clients.get(node.outputs[1]):
        return None
    cost = ConnectionistTemporalClassification(compute_grad=False)(*node.inputs)
    return [cost, None]
