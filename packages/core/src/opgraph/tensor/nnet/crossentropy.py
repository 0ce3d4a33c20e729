"""Cross-entropy losses and the fused softmax + cross-entropy ops (Theano's ``nnet.nnet``).

``crossentropy_softmax_1hot(x, y)`` computes ``-log(softmax(x)[i, y[i]])`` from the logits
in one op, as ``max + log(sum(exp(x - max))) - x[i, y[i]]``: finite values and gradients
(``softmax(x) - onehot(y)``) for logits of any magnitude.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.null_type import DisconnectedType, grad_undefined
from opgraph.graph.op import Op
from opgraph.scalar.type import discrete_dtypes, upcast
from opgraph.tensor import math as tm
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.elemwise import Elemwise
from opgraph.tensor.nnet.basic import float_tensor, softmax_grad
from opgraph.tensor.shape import shape_i
from opgraph.tensor.structure import alloc
from opgraph.tensor.type import TensorType

__all__ = [
    "CrossentropyCategorical1Hot",
    "CrossentropyCategorical1HotGrad",
    "CrossentropySoftmax1HotWithBiasDx",
    "CrossentropySoftmaxArgmax1HotWithBias",
    "binary_crossentropy",
    "categorical_crossentropy",
    "crossentropy_categorical_1hot",
    "crossentropy_categorical_1hot_grad",
    "crossentropy_softmax_1hot",
    "crossentropy_softmax_1hot_with_bias",
    "crossentropy_softmax_1hot_with_bias_dx",
    "crossentropy_softmax_argmax_1hot_with_bias",
    "sigmoid_binary_crossentropy",
]


def _index_vector(op: Any, y: Any, pos: int, name: str) -> Variable:
    y = as_tensor_variable(y)
    if y.type.ndim != 1 or y.type.dtype not in discrete_dtypes or y.type.dtype == "bool":
        raise TypeError(
            f"{op}: input {pos} ({name}) must be a vector of integer class indices, "
            f"got {y} of type {y.type}.\nHINT: for one-hot or soft targets use "
            "categorical_crossentropy(coding_dist, true_dist) with a matrix true_dist."
        )
    return y


def _check_indices(op: Any, y: np.ndarray, n_rows: int, n_classes: int) -> None:
    if y.shape[0] != n_rows:
        raise ValueError(f"{op}: {y.shape[0]} class indices for {n_rows} rows; they must be equal.")
    if y.size and (y.min() < 0 or y.max() >= n_classes):
        bad = y[(y < 0) | (y >= n_classes)][0]
        raise ValueError(
            f"{op}: class index {bad} is out of bounds for {n_classes} classes "
            f"(valid: 0 to {n_classes - 1})."
        )


def _is_zero(g: Variable) -> bool:
    """True for a disconnected gradient or one built by ``zeros_like`` (nothing to add)."""
    if isinstance(g.type, DisconnectedType):
        return True
    node = g.owner
    if node is None or not isinstance(node.op, Elemwise) or len(node.inputs) != 2:
        return False
    fill_value = node.inputs[1]
    while fill_value.owner is not None and len(fill_value.owner.inputs) == 1:
        fill_value = fill_value.owner.inputs[0]  # the broadcasting DimShuffle
    return (
        getattr(node.op.scalar_op, "name", None) == "second"
        and isinstance(fill_value, Constant)
        and not np.any(fill_value.data)
    )


class CrossentropySoftmaxArgmax1HotWithBias(Op):
    """For logits ``x + b``: ``[nll, sm, am]`` with ``sm = softmax(x + b)`` (row-wise),
    ``nll[i] = -log(sm[i, y_idx[i]])`` and ``am[i] = argmax(x[i] + b)``.

    All from one stable pass; gradient through ``nll`` is ``g * (sm - onehot(y_idx))``
    (:class:`CrossentropySoftmax1HotWithBiasDx`).
    """

    __props__ = ()

    def make_node(self, x: Any, b: Any, y_idx: Any) -> Apply:
        x = float_tensor(self, x, 0, "x", (2,))
        b = float_tensor(self, b, 1, "b", (1,))
        y_idx = _index_vector(self, y_idx, 2, "y_idx")
        dtype = upcast(x.type.dtype, b.type.dtype)
        nll = TensorType(dtype, y_idx.type.broadcastable)()
        sm = TensorType(dtype, x.type.broadcastable)()
        return Apply(self, [x, b, y_idx], [nll, sm, y_idx.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x, b, y = inputs
        n, k = x.shape
        if b.shape[0] != k:
            raise ValueError(f"{self}: b has {b.shape[0]} elements for {k} columns of x.")
        _check_indices(self, y, n, k)
        nll_t, sm_t, am_t = (o.type.numpy_dtype for o in node.outputs)
        if n == 0:
            for cell, shape, dt in zip(output_storage, [(0,), (0, k), (0,)], [nll_t, sm_t, am_t]):
                cell[0] = np.zeros(shape, dtype=dt)
            return
        row = (x + b).astype("float32") if x.dtype == np.float16 else x + b
        rows = np.arange(n)
        am = np.argmax(row, axis=1)
        m = row[rows, am]
        with np.errstate(invalid="ignore", over="ignore"):
            e = np.exp(row - m[:, None])
            s = np.sum(e, axis=1)
            nll = m + np.log(s) - row[rows, y]
        output_storage[0][0] = np.asarray(nll, dtype=nll_t)
        output_storage[1][0] = np.asarray(e / s[:, None], dtype=sm_t)
        output_storage[2][0] = am.astype(am_t)

    def L_op(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Any) -> list:
        (x, _b, y_idx), (_nll, sm, _am), (g_nll, g_sm, _g_am) = inputs, outputs, grads
        dx_terms = []
        if not _is_zero(g_nll):
            dx_terms.append(crossentropy_softmax_1hot_with_bias_dx(g_nll, sm, y_idx))
        if not _is_zero(g_sm):
            dx_terms.append(softmax_grad(g_sm, sm))
        dx = tm.add(*dx_terms) if len(dx_terms) > 1 else dx_terms[0] if dx_terms else None
        if dx is None:
            dx = tm.zeros_like(x)
        why = "y_idx holds class indices (integers)."
        return [dx, tm.sum(dx, axis=0), grad_undefined(self, 2, y_idx, why)]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        x_shape, _b_shape, y_shape = input_shapes
        return [(x_shape[0],), x_shape, y_shape]


class CrossentropySoftmax1HotWithBiasDx(Op):
    """Gradient of the fused op's ``nll`` w.r.t. the logits: ``dy[i] * (sm[i] - onehot(y_idx[i]))``.

    ``dy`` is a vector (one per row) or a 0-d tensor (the same for every row).
    """

    __props__ = ()

    def make_node(self, dy: Any, sm: Any, y_idx: Any) -> Apply:
        dy = float_tensor(self, dy, 0, "dy", (0, 1))
        sm = float_tensor(self, sm, 1, "sm", (2,))
        y_idx = _index_vector(self, y_idx, 2, "y_idx")
        dtype = upcast(dy.type.dtype, sm.type.dtype)
        return Apply(self, [dy, sm, y_idx], [TensorType(dtype, sm.type.broadcastable)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        dy, sm, y = inputs
        n, k = sm.shape
        _check_indices(self, y, n, k)
        if dy.ndim == 1 and dy.shape[0] != n:
            raise ValueError(f"{self}: dy has {dy.shape[0]} elements for {n} rows of sm.")
        dy = np.broadcast_to(dy, (n,))
        dx = dy[:, None] * sm
        dx[np.arange(n), y] -= dy
        output_storage[0][0] = np.asarray(dx, dtype=node.outputs[0].type.dtype)

    def L_op(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Any) -> list:
        (dy, sm, y_idx), (g_dx,) = inputs, grads
        # d dx[i, j] / d dy[i] = sm[i, j] - onehot[i, j], which is this op with dy = 1.
        per_entry = g_dx * self(tm.ones_like(dy), sm, y_idx)
        g_dy = tm.sum(per_entry, axis=1 if dy.type.ndim == 1 else None)
        g_sm = g_dx * (dy.dimshuffle(0, "x") if dy.type.ndim == 1 else dy)
        why = "y_idx holds class indices (integers)."
        return [g_dy, g_sm, grad_undefined(self, 2, y_idx, why)]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[1]]


crossentropy_softmax_argmax_1hot_with_bias = CrossentropySoftmaxArgmax1HotWithBias()
crossentropy_softmax_1hot_with_bias_dx = CrossentropySoftmax1HotWithBiasDx()


def crossentropy_softmax_1hot_with_bias(x: Any, b: Any, y_idx: Any) -> list[Variable]:
    """``[nll, softmax(x + b)]`` with ``nll[i] = -log softmax(x + b)[i, y_idx[i]]``."""
    return crossentropy_softmax_argmax_1hot_with_bias(x, b, y_idx)[:2]


def crossentropy_softmax_1hot(x: Any, y_idx: Any) -> list[Variable]:
    """``[nll, softmax(x)]`` for logits ``x`` (a matrix) and class indices ``y_idx``."""
    x = float_tensor("crossentropy_softmax_1hot", x, 0, "x", (2,))
    b = alloc(np.zeros((), dtype=x.type.dtype), shape_i(x, 1))
    return crossentropy_softmax_1hot_with_bias(x, b, y_idx)


class CrossentropyCategorical1Hot(Op):
    """``y[i] = -log(coding_dist[i, true_one_of_n[i]])``: cross-entropy against one-hot targets
    given by class indices."""

    __props__ = ()

    def make_node(self, coding_dist: Any, true_one_of_n: Any) -> Apply:
        coding = float_tensor(self, coding_dist, 0, "coding_dist", (2,))
        y = _index_vector(self, true_one_of_n, 1, "true_one_of_n")
        return Apply(self, [coding, y], [TensorType(coding.type.dtype, (False,))()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        coding, y = inputs
        _check_indices(self, y, *coding.shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = -np.log(coding[np.arange(y.shape[0]), y])
        output_storage[0][0] = np.asarray(out, dtype=node.outputs[0].type.dtype)

    def L_op(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Any) -> list:
        (coding, y), (g_y,) = inputs, grads
        why = "true_one_of_n holds class indices (integers)."
        return [
            crossentropy_categorical_1hot_grad(g_y, coding, y),
            grad_undefined(self, 1, y, why),
        ]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [(input_shapes[0][0],)]


class CrossentropyCategorical1HotGrad(Op):
    """Gradient of :class:`CrossentropyCategorical1Hot`: ``-g_y[i] / coding[i, y[i]]`` at the
    target entries, zero elsewhere."""

    __props__ = ()

    def make_node(self, g_y: Any, coding_dist: Any, true_one_of_n: Any) -> Apply:
        g_y = float_tensor(self, g_y, 0, "g_y", (1,))
        coding = float_tensor(self, coding_dist, 1, "coding_dist", (2,))
        y = _index_vector(self, true_one_of_n, 2, "true_one_of_n")
        dtype = upcast(g_y.type.dtype, coding.type.dtype)
        return Apply(self, [g_y, coding, y], [TensorType(dtype, coding.type.broadcastable)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        g_y, coding, y = inputs
        _check_indices(self, y, *coding.shape)
        out = np.zeros(coding.shape, dtype=node.outputs[0].type.dtype)
        rows = np.arange(y.shape[0])
        with np.errstate(divide="ignore", invalid="ignore"):
            out[rows, y] = -g_y / coding[rows, y]
        output_storage[0][0] = out

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[1]]


crossentropy_categorical_1hot = CrossentropyCategorical1Hot()
crossentropy_categorical_1hot_grad = CrossentropyCategorical1HotGrad()


def categorical_crossentropy(coding_dist: Any, true_dist: Any) -> Variable:
    """Cross-entropy of each row of ``coding_dist`` (probabilities) against its target.

    ``true_dist`` is either a distribution of the same shape, giving
    ``-sum(true_dist * log(coding_dist), axis=-1)``, or a vector of class indices, giving
    ``-log(coding_dist[i, true_dist[i]])`` (:class:`CrossentropyCategorical1Hot`).
    For logits, ``crossentropy_softmax_1hot(x, y)[0]`` (or the optimizer's rewrite of
    ``categorical_crossentropy(softmax(x), y)``) is stable for large logits.
    """
    coding = as_tensor_variable(coding_dist)
    true = as_tensor_variable(true_dist)
    if true.type.ndim == coding.type.ndim:
        return -tm.sum(true * tm.log(coding), axis=coding.type.ndim - 1)
    if true.type.ndim == coding.type.ndim - 1:
        return crossentropy_categorical_1hot(coding, true)
    raise TypeError(
        f"categorical_crossentropy: true_dist ({true.type}) must have the dimensions of "
        f"coding_dist ({coding.type}) or one fewer (class indices)."
    )


def binary_crossentropy(output: Any, target: Any) -> Variable:
    """``-(target * log(output) + (1 - target) * log(1 - output))``, elementwise.

    ``output`` are probabilities; for logits use :func:`sigmoid_binary_crossentropy`.
    """
    output, target = as_tensor_variable(output), as_tensor_variable(target)
    return -(target * tm.log(output) + (1.0 - target) * tm.log(1.0 - output))


def sigmoid_binary_crossentropy(output: Any, target: Any) -> Variable:
    """``binary_crossentropy(sigmoid(output), target)`` from logits, stably:
    ``target * softplus(-output) + (1 - target) * softplus(output)``."""
    output, target = as_tensor_variable(output), as_tensor_variable(target)
    return target * tm.softplus(-output) + (1.0 - target) * tm.softplus(output)
