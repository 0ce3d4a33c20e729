"""Rewrites of ``opgraph.tensor.nnet`` Ops that are not about numerical stability.

- ``local_ctc_no_grad`` (canonicalize, also in FAST_COMPILE; Theano's name): a
  ``ConnectionistTemporalClassification`` whose ``gradients`` output nobody reads becomes
  the Op with ``compute_grad=False``, so the cost alone is computed.
- ``local_softmax_with_bias`` (specialize; Theano's name): ``softmax(x + b)``, a row
  vector ``b`` broadcast over the rows of ``x``, becomes ``SoftmaxWithBias(x, b)``: one
  node instead of an addition, a DimShuffle and a softmax.
- ``crossentropy_to_crossentropy_with_softmax`` (right after specialize, at 2.01, as in
  Theano; ``local_crossentropy_to_crossentropy_with_softmax`` names its node rewriter):
  ``categorical_crossentropy(softmax(x + b), y)`` with class indices becomes the fused
  ``CrossentropySoftmaxArgmax1HotWithBias(x, b, y)``, which also gives the softmax. It runs
  after ``local_softmax_with_bias``, so a bias the model adds is the fused op's own; a
  softmax without one gets Theano's zero bias, ``zeros_like(x[0])``.

The stable forms of softmax and cross-entropy (and the fused gradient) are in
:mod:`opgraph_optimizers.stabilize`.
"""

from __future__ import annotations

from typing import Any

import opgraph.scalar.basic as ps
import opgraph.tensor.math as tm
from opgraph.graph.basic import Apply, Variable
from opgraph.rewriting import in2out, node_rewriter
from opgraph.tensor.elemwise import DimShuffle
from opgraph.tensor.nnet.basic import Softmax, SoftmaxWithBias, softmax_with_bias
from opgraph.tensor.nnet.crossentropy import (
    CrossentropyCategorical1Hot,
    crossentropy_softmax_argmax_1hot_with_bias,
)
from opgraph.tensor.nnet.ctc import ConnectionistTemporalClassification
from opgraph_optimizers.canonicalize.utils import elemwise_inputs
from opgraph_optimizers.registry import rewrites

__all__ = [
    "crossentropy_to_crossentropy_with_softmax",
    "local_crossentropy_to_crossentropy_with_softmax",
    "local_ctc_no_grad",
    "local_softmax_with_bias",
]


@rewrites.canonicalize("fast_compile")
@node_rewriter([ConnectionistTemporalClassification])
def local_ctc_no_grad(fgraph: Any, node: Apply) -> list[Variable | None] | None:
    """``ctc(..., compute_grad=True)`` whose gradient is unused -> ``compute_grad=False``."""
    if not node.op.compute_grad or fgraph.clients.get(node.outputs[1]):
        return None
    cost = ConnectionistTemporalClassification(compute_grad=False)(*node.inputs)
    return [cost, None]


@rewrites.specialize
@node_rewriter([Softmax])
def local_softmax_with_bias(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``softmax(x + b1 + ... + m2) -> softmax_with_bias(x + m2, b1 + ...)``: the terms that
    are row vectors broadcast over the rows (``DimShuffle{x,0}(b)``) become the bias."""
    if type(node.op) is not Softmax or node.op.axis not in (-1, 1):
        return None
    terms = elemwise_inputs(node.inputs[0], ps.Add)
    if terms is None or node.inputs[0].type.ndim != 2:
        return None
    vectors: list[Variable] = []
    matrices: list[Variable] = []
    for t in terms:
        if list(t.type.broadcastable) != [True, False]:
            matrices.append(t)
        elif (
            t.owner is not None
            and isinstance(t.owner.op, DimShuffle)
            and list(t.owner.inputs[0].type.broadcastable) == [False]
        ):
            vectors.append(t.owner.inputs[0])  # the vector the DimShuffle broadcast
        else:
            vectors.append(DimShuffle((True, False), (1,))(t))
    if not vectors:
        return None
    if not matrices:
        matrices.append(vectors.pop().dimshuffle("x", 0))
        if not vectors:
            return None
    bias = vectors[0] if len(vectors) == 1 else tm.add(*vectors)
    x = matrices[0] if len(matrices) == 1 else tm.add(*matrices)
    try:
        new = softmax_with_bias(x, bias)
    except (TypeError, ValueError):
        return None  # types the fused op does not take
    return [new] if new.type == node.outputs[0].type else None


def _softmax_logits(sm: Variable) -> tuple[Variable, Variable | None] | None:
    """``(x, b)`` if ``sm`` is a row-wise softmax of the logits ``x`` (+ ``b``) of a matrix."""
    node = sm.owner
    if node is None or sm.type.ndim != 2:
        return None
    if type(node.op) is Softmax and node.op.axis in (-1, 1):
        return node.inputs[0], None
    if type(node.op) is SoftmaxWithBias:
        return node.inputs[0], node.inputs[1]
    return None


@node_rewriter([CrossentropyCategorical1Hot])
def local_crossentropy_to_crossentropy_with_softmax(
    fgraph: Any, node: Apply
) -> dict[Variable, Variable] | None:
    """``xent(softmax(x + b), y) -> crossentropy_softmax_argmax_1hot_with_bias(x, b, y)[0]``.

    ``xent`` is ``crossentropy_categorical_1hot`` (``categorical_crossentropy`` with class
    indices). The softmax itself is replaced by the fused op's second output, which the
    gradient (``local_crossentropy_softmax_grad``) then shares.
    """
    sm, y = node.inputs
    found = _softmax_logits(sm)
    if found is None:
        return None
    x, b = found
    if b is None:
        b = tm.zeros_like(x[0])
    nll, new_sm, _ = crossentropy_softmax_argmax_1hot_with_bias(x, b, y)
    out = node.outputs[0]
    if nll.type != out.type or new_sm.type != sm.type:
        return None
    return {out: nll, sm: new_sm}


#: Theano's pass of the same name, right after specialize (where local_softmax_with_bias ran).
crossentropy_to_crossentropy_with_softmax = in2out(
    local_crossentropy_to_crossentropy_with_softmax,
    name="crossentropy_to_crossentropy_with_softmax",
)
rewrites.register(
    "optdb",
    crossentropy_to_crossentropy_with_softmax,
    "fast_run",
    "xent",
    "stability",
    "local_crossentropy_to_crossentropy_with_softmax",
    name="crossentropy_to_crossentropy_with_softmax",
    position=2.01,
)
