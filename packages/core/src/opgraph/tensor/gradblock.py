"""Ops that change only the gradient: ``disconnected_grad``, ``zero_grad``, ``consider_constant``.

In the forward pass each is the identity (a view of its input); ``grad`` sees either no
gradient flowing through it (disconnected) or a zero one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.null_type import disconnected_type
from opgraph.graph.op import Op
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.math import zeros_like_grad

__all__ = ["GradBlock", "consider_constant", "disconnected_grad", "zero_grad"]


class GradBlock(Op):
    """Identity in the forward pass; the gradient through it is zero or disconnected."""

    __props__ = ("mode",)
    view_map = {0: [0]}

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        output_storage[0][0] = inputs[0]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        if self.mode == "zero":
            return [zeros_like_grad(inputs[0])]
        return [disconnected_type()]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return list(input_shapes)

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]) -> list[Any]:
        return [None]


def consider_constant(x: Variable) -> Variable:
    """Return ``x`` unchanged in value but with no gradient flowing through it."""
    return disconnected_grad(x)


def zero_grad(x: Variable) -> Variable:
    """``x`` in the forward pass; its gradient is zero."""
    return GradBlock("zero")(x)


def disconnected_grad(x: Variable) -> Variable:
    """``x`` in the forward pass; no gradient flows through it (disconnected)."""
    return GradBlock("disconnected")(x)
