"""Softmax, log-softmax and the rectifier family (Theano's ``tensor.nnet.nnet``, first half).

``Softmax`` and ``LogSoftmax`` normalise along one axis (the last by default, which is
Theano's row-wise softmax on matrices) and subtract the maximum first, so logits of any
magnitude give finite values and finite gradients.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.null_type import DisconnectedType, disconnected_type
from opgraph.graph.op import Op
from opgraph.scalar.type import float_dtypes, upcast
from opgraph.tensor import math as tm
from opgraph.tensor.basic import as_tensor_variable, constant
from opgraph.tensor.type import TensorType

__all__ = [
    "LogSoftmax",
    "Softmax",
    "SoftmaxGrad",
    "SoftmaxWithBias",
    "elu",
    "log_softmax",
    "logsoftmax",
    "logsoftmax_op",
    "relu",
    "selu",
    "softmax",
    "softmax_grad",
    "softmax_graph",
    "softmax_op",
    "softmax_with_bias",
    "softsign",
]


def float_tensor(
    op: Any, x: Any, pos: int, name: str, ndims: Sequence[int] | None = None
) -> Variable:
    """``x`` as a float tensor (of one of ``ndims`` dimensions), else TypeError naming it."""
    x = as_tensor_variable(x)
    if ndims is not None and x.type.ndim not in ndims:
        want = " or ".join(str(n) for n in ndims)
        raise TypeError(
            f"{op}: input {pos} ({name}) must have {want} dimension(s), got {x} of type {x.type}."
        )
    if x.type.dtype not in float_dtypes:
        raise TypeError(
            f"{op}: input {pos} ({name}) must have a float dtype, got {x} of type {x.type}.\n"
            f"HINT: cast it first, e.g. opgraph.tensor.cast({x.name or name}, 'float64')."
        )
    return x


class _AxisOp(Op):
    """An op normalising along ``axis``; printed bare when the axis is the default (-1)."""

    __props__ = ("axis",)

    def __init__(self, axis: int = -1):
        if not isinstance(axis, int | np.integer):
            raise TypeError(f"{type(self).__name__}: axis must be an int, got {axis!r}")
        self.axis = int(axis)

    def __str__(self) -> str:
        name = type(self).__name__
        return name if self.axis == -1 else f"{name}{{axis={self.axis}}}"

    def _check_axis(self, x: Variable) -> None:
        nd = x.type.ndim
        if not -nd <= self.axis < nd:
            raise ValueError(f"{self}: axis {self.axis} is out of range for {x} ({x.type})")

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[-1]]


def _shifted(x: np.ndarray, axis: int) -> np.ndarray:
    """``x - max(x, axis)`` in at least float32, NaN-propagating, safe on empty arrays."""
    x = x.astype("float32") if x.dtype == np.float16 else x
    if x.size == 0:
        return x.copy()
    return x - np.max(x, axis=axis, keepdims=True)


class Softmax(_AxisOp):
    """``exp(x) / sum(exp(x), axis)``, computed as ``exp(x - max)`` to avoid overflow.

    Gradient ``sm * (g - sum(g * sm, axis))`` (:class:`SoftmaxGrad`); R_op the same
    product (the Jacobian is symmetric).
    """

    def make_node(self, x: Any) -> Apply:
        x = float_tensor(self, x, 0, "x")
        self._check_axis(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        with np.errstate(invalid="ignore", over="ignore"):
            e = np.exp(_shifted(inputs[0], self.axis))
            out = e / np.sum(e, axis=self.axis, keepdims=True) if e.size else e
        output_storage[0][0] = np.asarray(out, dtype=node.outputs[0].type.dtype)

    def L_op(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Any) -> list:
        return [SoftmaxGrad(self.axis)(grads[0], outputs[0])]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list:
        if eval_points[0] is None:
            return [None]
        return [SoftmaxGrad(self.axis)(eval_points[0], self(inputs[0]))]


class LogSoftmax(_AxisOp):
    """``log(softmax(x, axis))`` computed stably as ``(x - max) - log(sum(exp(x - max)))``.

    Gradient ``g - sum(g, axis) * exp(out)``.
    """

    def make_node(self, x: Any) -> Apply:
        x = float_tensor(self, x, 0, "x")
        self._check_axis(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            xdev = _shifted(inputs[0], self.axis)
            if xdev.size:
                xdev = xdev - np.log(np.sum(np.exp(xdev), axis=self.axis, keepdims=True))
        output_storage[0][0] = np.asarray(xdev, dtype=node.outputs[0].type.dtype)

    def L_op(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Any) -> list:
        (g,) = grads
        sm = tm.exp(outputs[0])
        return [g - tm.sum(g, axis=self.axis, keepdims=True) * sm]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list:
        if eval_points[0] is None:
            return [None]
        ev = eval_points[0]
        sm = Softmax(self.axis)(inputs[0])
        return [ev - tm.sum(ev * sm, axis=self.axis, keepdims=True)]


class SoftmaxGrad(_AxisOp):
    """Gradient of softmax: ``dx = sm * (dy - sum(dy * sm, axis))`` from ``dy`` and ``sm``."""

    def make_node(self, dy: Any, sm: Any) -> Apply:
        dy = float_tensor(self, dy, 0, "dy")
        sm = float_tensor(self, sm, 1, "sm")
        if dy.type.ndim != sm.type.ndim:
            raise TypeError(f"{self}: dy {dy.type} and sm {sm.type} differ in dimensions")
        self._check_axis(sm)
        dtype = upcast(dy.type.dtype, sm.type.dtype)
        return Apply(self, [dy, sm], [TensorType(dtype, sm.type.broadcastable)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        dy, sm = inputs
        if dy.shape != sm.shape:
            raise ValueError(f"{self}: dy has shape {dy.shape} but sm has shape {sm.shape}")
        dx = dy * sm
        if dx.size:
            dx -= np.sum(dx, axis=self.axis, keepdims=True) * sm
        output_storage[0][0] = np.asarray(dx, dtype=node.outputs[0].type.dtype)

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list:
        (dy, sm), (g,) = inputs, output_grads
        tmp = g - tm.sum(g * sm, axis=self.axis, keepdims=True)
        g_dy = tmp * sm
        g_sm = tmp * dy - g * tm.sum(dy * sm, axis=self.axis, keepdims=True)
        return [g_dy, g_sm]


class SoftmaxWithBias(Op):
    """Row-wise softmax of ``x + b`` for a matrix ``x`` and a vector ``b`` (one per column)."""

    __props__ = ()

    def make_node(self, x: Any, b: Any) -> Apply:
        x = float_tensor(self, x, 0, "x", (2,))
        b = float_tensor(self, b, 1, "b", (1,))
        dtype = upcast(x.type.dtype, b.type.dtype)
        return Apply(self, [x, b], [TensorType(dtype, x.type.broadcastable)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x, b = inputs
        if b.shape[0] != x.shape[1]:
            raise ValueError(
                f"{self}: b has {b.shape[0]} elements but x has shape {x.shape}; "
                "b needs one per column of x."
            )
        Softmax(-1).perform(node, [x + b], output_storage)

    def L_op(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Any) -> list:
        (g_sm,) = grads
        if isinstance(g_sm.type, DisconnectedType):
            return [disconnected_type(), disconnected_type()]
        dx = softmax_grad(g_sm, outputs[0])
        return [dx, tm.sum(dx, axis=0)]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]


softmax_op = Softmax()
logsoftmax_op = LogSoftmax()
softmax_grad = SoftmaxGrad()
softmax_with_bias = SoftmaxWithBias()


def _axis_for(x: Variable, axis: int) -> int:
    nd = x.type.ndim
    if not isinstance(axis, int | np.integer) or not -nd <= axis < nd:
        raise ValueError(f"softmax: axis {axis!r} is out of range for {x} ({x.type})")
    axis = int(axis) % nd
    return -1 if axis == nd - 1 else axis


def _row_if_vector(c: Variable, axis: Any, name: str) -> tuple[Variable, int]:
    """Theano 1.0 pads a vector to a one-row matrix before (log-)softmax: ``(n,) -> (1, n)``.

    Code written for Theano indexes the result as a matrix (``s[0]``, ``s[:, k]``), so a
    vector gives a ``(1, n)`` row here too; its gradient is the vector's again.
    """
    if c.type.ndim == 1:
        _axis_for(c, axis)  # range check on the user's axis (0 or -1)
        return c.dimshuffle("x", 0), -1
    if c.type.ndim == 0:
        raise TypeError(f"{name}: needs at least 1 dimension, got {c} of type {c.type}")
    return c, _axis_for(c, axis)


def softmax(c: Any, axis: int = -1) -> Variable:
    """Softmax of ``c`` along ``axis`` (the last: row-wise on a matrix, as Theano).

    A vector gives a ``(1, n)`` row, as Theano 1.0 (which padded vectors this way).
    """
    c, axis = _row_if_vector(float_tensor("softmax", c, 0, "c"), axis, "softmax")
    return Softmax(axis)(c)


def log_softmax(c: Any, axis: int = -1) -> Variable:
    """``log(softmax(c, axis))``, computed stably (finite for logits of any size).

    A vector gives a ``(1, n)`` row, as Theano 1.0's ``logsoftmax``.
    """
    c, axis = _row_if_vector(float_tensor("log_softmax", c, 0, "c"), axis, "log_softmax")
    return LogSoftmax(axis)(c)


logsoftmax = log_softmax


def softmax_graph(c: Any) -> Variable:
    """Softmax as elementwise ops, ``exp(c) / sum(exp(c), -1)`` (no overflow protection)."""
    c = as_tensor_variable(c)
    e = tm.exp(c)
    return e / tm.sum(e, axis=-1, keepdims=True)


def _coefficient(value: Any, x: Variable) -> Variable:
    """``value`` as a tensor; a Python number takes the float dtype of ``x`` (no upcast)."""
    if isinstance(value, Variable):
        return as_tensor_variable(value)
    dtype = x.type.dtype if x.type.dtype in float_dtypes else None
    return constant(value, dtype=dtype)


def relu(x: Any, alpha: Any = 0) -> Variable:
    """Rectifier ``max(x, 0)``, or the leaky ``x if x > 0 else alpha * x``.

    Written as Theano does, ``0.5 * (x + abs(x))`` (and ``f1 * x + f2 * abs(x)`` with
    ``f1 = (1 + alpha) / 2``, ``f2 = (1 - alpha) / 2``). A Python-number ``alpha`` takes the
    dtype of ``x``, so float32 stays float32 (Theano upcast it to float64).
    """
    x = as_tensor_variable(x)
    if isinstance(alpha, int | float) and alpha == 0:
        return 0.5 * (x + abs(x))
    alpha = _coefficient(alpha, x)
    f1 = 0.5 * (1 + alpha)
    f2 = 0.5 * (1 - alpha)
    return f1 * x + f2 * abs(x)


def elu(x: Any, alpha: Any = 1) -> Variable:
    """Exponential linear unit: ``x`` if ``x > 0`` else ``alpha * (exp(x) - 1)``."""
    x = as_tensor_variable(x)
    return tm.switch(x > 0, x, _coefficient(alpha, x) * tm.expm1(x))


def selu(x: Any) -> Variable:
    """Scaled ELU (Klambauer et al. 2017): ``scale * elu(x, alpha)`` with their constants."""
    x = as_tensor_variable(x)
    alpha = 1.6732632423543772848170429916717
    scale = 1.0507009873554804934193349852946
    return _coefficient(scale, x) * elu(x, alpha)


def softsign(x: Any) -> Variable:
    """``x / (1 + |x|)``."""
    x = as_tensor_variable(x)
    return x / (1 + abs(x))
