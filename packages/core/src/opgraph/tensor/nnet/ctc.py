"""Connectionist Temporal Classification loss (Theano's ``tensor.nnet.ctc``).

Theano 1.0 wrapped Baidu's warp-ctc C library; opgraph computes the same quantities with a
NumPy forward-backward pass in log space, vectorised over the minibatch, so no external
library is needed. The semantics are warp-ctc's, as Theano exposed them:

* ``activations`` ``(time, batch, classes)`` float32 are *unnormalised*: a softmax over the
  classes is applied inside. Class 0 is the blank.
* ``labels`` ``(batch, max_label_length)`` int32; negative entries are padding and skipped.
* ``input_lengths`` ``(batch,)`` int32: the number of time steps used for each example.
* The cost is ``-log p(labels | activations)`` per example (float32); the Op's second output
  is its gradient with respect to ``activations`` (``softmax - posterior occupancy``),
  zero at time steps past ``input_lengths``.
* An example whose labels cannot fit in its time steps (``len + repeats > input_length``)
  gets cost 0 and a zero gradient, as warp-ctc returns.

When nothing reads the gradient output, opgraph-optimizers' ``local_ctc_no_grad`` (Theano's
rewrite) builds the Op with ``compute_grad=False``, so only the costs are computed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.null_type import DisconnectedType, grad_not_implemented, grad_undefined
from opgraph.graph.op import Op
from opgraph.scalar.basic import Second
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.shape import scalar_constant
from opgraph.tensor.type import TensorType

__all__ = ["ConnectionistTemporalClassification", "ctc", "ctc_available", "ctc_present"]


def ctc_present() -> bool:
    """Whether CTC can be computed: always, opgraph's implementation needs no warp-ctc."""
    return True


def ctc_available() -> bool:
    """Whether the CTC Op can be built: always (Theano's asked for the warp-ctc library)."""
    return True


ctc_present.avail = True  # type: ignore[attr-defined]
ctc_present.msg = None  # type: ignore[attr-defined]
ctc_present.path = None  # type: ignore[attr-defined]
ctc_available.msg = None  # type: ignore[attr-defined]
ctc_available.path = None  # type: ignore[attr-defined]


def _log_softmax(acts: np.ndarray) -> np.ndarray:
    """``log(softmax(acts))`` over the last axis, in float64."""
    a = acts.astype("float64")
    a = a - a.max(axis=-1, keepdims=True)
    return a - np.log(np.exp(a).sum(axis=-1, keepdims=True))


def _shift(x: np.ndarray, k: int) -> np.ndarray:
    """``x`` moved ``k`` places along the last axis (right for k > 0), filled with -inf."""
    out = np.full_like(x, -np.inf)
    if k > 0:
        out[..., k:] = x[..., :-k]
    else:
        out[..., :k] = x[..., -k:]
    return out


def ctc_cost_and_grad(
    activations: np.ndarray, labels: np.ndarray, input_lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """CTC costs ``(batch,)`` and their gradients ``(time, batch, classes)``, in float64.

    The forward (alpha) and backward (beta) variables are over the label sequence with
    blanks interleaved (``S = 2 L + 1`` states), kept in log space; one loop over time,
    everything else vectorised over the batch and the states.
    """
    n_time, batch, n_class = activations.shape
    lengths = np.asarray(input_lengths, dtype="int64")
    logy = _log_softmax(activations)  # (T, B, C)
    rows = [row[row >= 0] for row in np.asarray(labels)]
    n_labels = np.array([len(r) for r in rows], dtype="int64")
    repeats = np.array([int(np.sum(r[1:] == r[:-1])) for r in rows], dtype="int64")
    n_states = 2 * n_labels + 1
    S = 2 * int(n_labels.max(initial=0)) + 1
    ext = np.zeros((batch, S), dtype="int64")  # blanks (class 0) between the labels
    for b, r in enumerate(rows):
        ext[b, 1 : 2 * len(r) : 2] = r
    state = np.arange(S)
    valid = state[None, :] < n_states[:, None]  # (B, S)
    skip = np.zeros((batch, S), dtype=bool)  # s-2 -> s allowed: a label differing from s-2
    skip[:, 2:] = (state[2:] % 2 == 1) & (ext[:, 2:] != ext[:, :-2])
    feasible = (n_labels + repeats <= lengths) & (lengths > 0)
    # log y_t(ext[b, s]) for every t, b, s
    emit = np.take_along_axis(logy, np.broadcast_to(ext, (n_time, batch, S)), axis=2)
    emit = np.where(valid, emit, -np.inf)

    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        alpha = np.full((n_time, batch, S), -np.inf)
        if n_time:
            alpha[0, :, :2] = emit[0, :, :2]
        for t in range(1, n_time):
            prev = alpha[t - 1]
            step = np.logaddexp(prev, _shift(prev, 1))
            step = np.logaddexp(step, np.where(skip, _shift(prev, 2), -np.inf))
            alpha[t] = step + emit[t]

        beta = np.full((n_time, batch, S), -np.inf)
        last = (state[None, :] >= n_states[:, None] - 2) & valid  # the two final states
        skip_next = np.zeros_like(skip)  # s -> s+2 allowed
        skip_next[:, :-2] = skip[:, 2:]
        for t in range(n_time - 1, -1, -1):
            start = (lengths == t + 1)[:, None]
            inner = (lengths > t + 1)[:, None]
            nxt = beta[t + 1] if t + 1 < n_time else beta[t]
            step = np.logaddexp(nxt, _shift(nxt, -1))
            step = np.logaddexp(step, np.where(skip_next, _shift(nxt, -2), -np.inf))
            beta[t] = np.where(start & last, emit[t], np.where(inner, step + emit[t], -np.inf))

        # log p: from alpha at each example's own last time step, its two final states.
        t_last = np.clip(lengths - 1, 0, max(n_time - 1, 0))
        final = alpha[t_last, np.arange(batch)] if n_time else np.full((batch, S), -np.inf)
        loglik = np.logaddexp.reduce(np.where(last, final, -np.inf), axis=1)
        # Posterior occupancy of each state, then summed per class.
        ab = alpha + beta
        gamma = np.where(ab == -np.inf, 0.0, np.exp(ab - emit - loglik[None, :, None]))
    onehot = np.zeros((batch, S, n_class))
    np.put_along_axis(onehot, ext[:, :, None], 1.0, axis=2)
    occupancy = np.einsum("tbs,bsc->tbc", gamma, onehot)
    used = (np.arange(n_time)[:, None] < lengths[None, :]) & feasible[None, :]
    grads = np.where(used[:, :, None], np.exp(logy) - occupancy, 0.0)
    costs = np.where(feasible, -loglik, 0.0)
    return costs, grads


def _is_zero_grad(g: Variable) -> bool:
    """Whether ``g`` is a disconnected or an all-zeros (``zeros_like``) output gradient."""
    if isinstance(g.type, DisconnectedType):
        return True
    owner = g.owner
    if owner is None or not isinstance(getattr(owner.op, "scalar_op", None), Second):
        return False
    value = scalar_constant(owner.inputs[1])
    return value is not None and value == 0


class ConnectionistTemporalClassification(Op):
    """CTC loss: ``costs`` per example and, with ``compute_grad``, their ``gradients``.

    See the module docstring for the inputs. The Op's default output is ``costs``; the
    gradient of a cost built on ``costs`` uses the ``gradients`` output, scaled per example
    by the output gradient (what Theano's ``L_op`` does). ``openmp`` is accepted for
    Theano's signature and ignored (the NumPy computation is vectorised instead).
    """

    __props__ = ("compute_grad",)
    default_output = 0

    def __init__(self, compute_grad: bool = True, openmp: bool | None = None) -> None:
        self.compute_grad = compute_grad
        self.openmp = openmp

    def make_node(self, activations: Any, labels: Any, input_lengths: Any) -> Apply:
        """Check dtypes (float32, int32, int32) and ranks (3, 2, 1) as Theano does."""
        t_activations = as_tensor_variable(activations)
        t_labels = as_tensor_variable(labels)
        t_input_lengths = as_tensor_variable(input_lengths)
        if t_activations.type.dtype != "float32":
            raise TypeError(f"activations must use the float32 type! Got {t_activations.type}")
        if t_activations.type.ndim != 3:
            raise ValueError(f"activations must have 3 dimensions. Got {t_activations.type}")
        if t_labels.type.dtype != "int32":
            raise TypeError(f"labels must use the int32 type! Got {t_labels.type}")
        if t_labels.type.ndim != 2:
            raise ValueError(f"labels must have 2 dimensions. Got {t_labels.type}")
        if t_input_lengths.type.dtype != "int32":
            raise TypeError(f"input_lengths must use the int32 type! Got {t_input_lengths.type}")
        if t_input_lengths.type.ndim != 1:
            raise ValueError(f"input_lengths must have 1 dimension. Got {t_input_lengths.type}")
        outputs = [TensorType("float32", (False,))("ctc_cost")]
        if self.compute_grad:
            outputs.append(TensorType("float32", (False, False, False))("ctc_grad"))
        return Apply(self, [t_activations, t_labels, t_input_lengths], outputs)

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: Any) -> None:
        activations, labels, input_lengths = inputs
        n_time, batch, n_class = activations.shape
        if labels.shape[0] != batch or input_lengths.shape != (batch,):
            raise ValueError(
                f"ConnectionistTemporalClassification: activations have {batch} examples, "
                f"labels {labels.shape[0]} and input_lengths {input_lengths.shape[0]}"
            )
        if input_lengths.size and (input_lengths.min() < 0 or input_lengths.max() > n_time):
            raise ValueError(
                f"ConnectionistTemporalClassification: input_lengths must be in "
                f"[0, {n_time}] (the time steps of activations), got {input_lengths.tolist()}"
            )
        if labels.size and labels.max() >= n_class:
            raise ValueError(
                f"ConnectionistTemporalClassification: label {int(labels.max())} is out of "
                f"range for {n_class} classes"
            )
        costs, grads = ctc_cost_and_grad(activations, labels, input_lengths)
        output_storage[0][0] = costs.astype("float32")
        if self.compute_grad:
            output_storage[1][0] = grads.astype("float32")

    def infer_shape(self, node: Apply, input_shapes: Sequence[Sequence[Any]]) -> list[Any]:
        act = input_shapes[0]
        shapes: list[Any] = [(act[1],)]
        if self.compute_grad:
            shapes.append(tuple(act))
        return shapes

    def L_op(
        self, inputs: Sequence[Variable], outputs: Sequence[Variable], output_grads: Any
    ) -> list[Variable]:
        activations, labels, input_lengths = inputs
        undefined = [
            grad_undefined(self, 1, labels, "labels are integer targets"),
            grad_undefined(self, 2, input_lengths, "input_lengths are integer lengths"),
        ]
        if not self.compute_grad:
            why = "this CTC Op was built with compute_grad=False: build it with True"
            return [grad_not_implemented(self, 0, activations, why), *undefined]
        if not _is_zero_grad(output_grads[1]):
            why = "the gradients output of CTC has no gradient itself"
            return [grad_not_implemented(self, 0, activations, why), *undefined]
        gcost = output_grads[0]
        total_grad = gcost.dimshuffle("x", 0, "x") * outputs[1]
        return [total_grad, *undefined]


def ctc(activations: Any, labels: Any, input_lengths: Any) -> Variable:
    """The CTC loss of each example of a minibatch (float32 vector of length ``batch``).

    ``activations`` ``(t, m, p)`` float32 unnormalised scores (softmax applied inside, blank
    class 0), ``labels`` ``(m, L)`` int32 padded with negative values, ``input_lengths``
    ``(m,)`` int32 time steps per example. Differentiable with respect to ``activations``.
    """
    return ConnectionistTemporalClassification()(activations, labels, input_lengths)
