"""Two-level hierarchical softmax (Theano's ``tensor.nnet.h_softmax``), from existing ops.

The outputs are split into ``n_classes`` classes of ``n_outputs_per_class`` outputs; the
probability of an output is ``P(class | x) * P(output | class, x)``, two softmaxes of
sizes about ``sqrt(n_outputs)`` instead of one of size ``n_outputs``.
"""

from __future__ import annotations

from typing import Any

from opgraph.graph.basic import Variable
from opgraph.tensor import math as tm
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.dot import batched_dot, dot, tensordot
from opgraph.tensor.nnet.basic import softmax
from opgraph.tensor.shape import flatten, reshape
from opgraph.tensor.structure import arange
from opgraph.tensor.subtensor import getitem

__all__ = ["h_softmax"]


def h_softmax(
    x: Any,
    batch_size: Any,
    n_outputs: Any,
    n_classes: Any,
    n_outputs_per_class: Any,
    W1: Any,
    b1: Any,
    W2: Any,
    b2: Any,
    target: Any = None,
) -> Variable:
    """Two-level hierarchical softmax (Morin & Bengio 2005), with Theano's signature.

    Parameters
    ----------
    x
        ``(batch_size, n_hidden)`` minibatch.
    batch_size, n_outputs, n_classes, n_outputs_per_class
        Sizes; ``n_classes * n_outputs_per_class >= n_outputs``.
    W1, b1
        ``(n_hidden, n_classes)`` weights and ``(n_classes,)`` biases of the class softmax.
    W2, b2
        ``(n_classes, n_hidden, n_outputs_per_class)`` weights and
        ``(n_classes, n_outputs_per_class)`` biases of the per-class softmaxes.
    target
        None: return every output's probability, ``(batch_size, n_outputs)``. Else an
        int vector (or ``(batch_size, 1)`` matrix) of target outputs: return each row's
        target probability, ``(batch_size,)``.
    """
    x, W1, b1 = as_tensor_variable(x), as_tensor_variable(W1), as_tensor_variable(b1)
    W2, b2 = as_tensor_variable(W2), as_tensor_variable(b2)
    class_probs = softmax(dot(x, W1) + b1)
    if target is None:
        activations = tensordot(x, W2, (1, 1)) + b2
        output_probs = softmax(reshape(activations, (-1, n_outputs_per_class)))
        output_probs = reshape(output_probs, (batch_size, n_classes, -1))
        output_probs = class_probs.dimshuffle(0, 1, "x") * output_probs
        output_probs = reshape(output_probs, (batch_size, -1))
        # n_classes * n_outputs_per_class may exceed n_outputs: drop the extra columns.
        return getitem(output_probs, (slice(None), slice(None, n_outputs)))
    target = flatten(as_tensor_variable(target))
    target_classes = tm.int_div(target, n_outputs_per_class)
    target_outputs_in_class = tm.mod(target, n_outputs_per_class)
    # Only the target class's block of W2 (Theano uses sparse_block_dot for this).
    activations = batched_dot(x, getitem(W2, target_classes)) + getitem(b2, target_classes)
    output_probs = softmax(activations)
    rows = arange(batch_size)
    target_class_probs = getitem(class_probs, (rows, target_classes))
    output_probs = getitem(output_probs, (rows, target_outputs_in_class))
    return target_class_probs * output_probs
