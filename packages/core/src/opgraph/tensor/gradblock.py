"""Ops that change only the gradient, as Theano's ``theano.gradient`` view ops.

In the forward pass each is the identity (a view of its input); ``grad`` sees:

- :class:`ConsiderConstant`, :class:`ZeroGrad`: a zero gradient (``consider_constant``,
  ``zero_grad``);
- :class:`DisconnectedGrad`: no gradient path at all (``disconnected_grad``);
- :class:`UndefinedGrad`: an undefined (NullType) gradient, an error if it is needed
  (``undefined_grad``);
- :class:`GradClip`: the output gradient clipped to ``[lower, upper]`` (``grad_clip``);
- :class:`GradScale`: the output gradient times a constant (``grad_scale``).

All are subclasses of :class:`GradBlock`, so backend-c's view thunk and the optimizer's
``local_remove_grad_block`` (which removes them once gradients are built) cover them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.null_type import disconnected_type, grad_undefined
from opgraph.graph.op import Op
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.math import clip, mul, zeros_like_grad

__all__ = [
    "ConsiderConstant",
    "DisconnectedGrad",
    "GradBlock",
    "GradClip",
    "GradScale",
    "UndefinedGrad",
    "ZeroGrad",
    "consider_constant",
    "consider_constant_",
    "disconnected_grad",
    "disconnected_grad_",
    "grad_clip",
    "grad_scale",
    "undefined_grad",
    "undefined_grad_",
    "zero_grad",
    "zero_grad_",
]

_MODES = ("zero", "disconnected", "undefined")


class GradBlock(Op):
    """Identity in the forward pass; the gradient through it is zero, disconnected or
    undefined (``mode``). The named subclasses below are what the Theano functions build."""

    __props__: tuple[str, ...] | None = ("mode",)
    view_map = {0: [0]}

    def __init__(self, mode: str) -> None:
        if mode not in _MODES:
            raise ValueError(f"GradBlock mode must be one of {_MODES}, got {mode!r}")
        self.mode = mode

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        output_storage[0][0] = inputs[0]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        if self.mode == "zero":
            return [zeros_like_grad(inputs[0])]
        if self.mode == "undefined":
            return [grad_undefined(self, 0, inputs[0])]
        return [disconnected_type()]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        """Disconnected only for ``disconnected_grad``, as Theano's DisconnectedGrad."""
        return [[self.mode != "disconnected"]]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return list(input_shapes)

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]) -> list[Any]:
        return [None]


class ConsiderConstant(GradBlock):
    """Theano's ``ConsiderConstant``: identity whose gradient is zero (``consider_constant``)."""

    __props__ = ()

    def __init__(self) -> None:
        super().__init__("zero")


class ZeroGrad(GradBlock):
    """Theano's ``ZeroGrad``: identity whose gradient is zero (``zero_grad``)."""

    __props__ = ()

    def __init__(self) -> None:
        super().__init__("zero")


class DisconnectedGrad(GradBlock):
    """Theano's ``DisconnectedGrad``: identity with no gradient path (``disconnected_grad``)."""

    __props__ = ()

    def __init__(self) -> None:
        super().__init__("disconnected")


class UndefinedGrad(GradBlock):
    """Theano's ``UndefinedGrad``: identity whose gradient is undefined; ``grad`` raises
    NullTypeGradError if the gradient through it is needed."""

    __props__ = ()

    def __init__(self) -> None:
        super().__init__("undefined")


class GradClip(GradBlock):
    """Identity whose output gradient is clipped to ``[clip_lower_bound, clip_upper_bound]``."""

    __props__ = ("clip_lower_bound", "clip_upper_bound")

    def __init__(self, clip_lower_bound: float, clip_upper_bound: float) -> None:
        if not clip_upper_bound >= clip_lower_bound:
            raise ValueError(
                f"grad_clip: the upper bound {clip_upper_bound} is below the lower bound "
                f"{clip_lower_bound}"
            )
        self.mode = "clip"
        self.clip_lower_bound = clip_lower_bound
        self.clip_upper_bound = clip_upper_bound

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        return [clip(output_grads[0], self.clip_lower_bound, self.clip_upper_bound)]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True]]


class GradScale(GradBlock):
    """Identity whose output gradient is multiplied by ``multiplier``."""

    __props__ = ("multiplier",)

    def __init__(self, multiplier: Any) -> None:
        self.mode = "scale"
        self.multiplier = multiplier

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        return [mul(self.multiplier, output_grads[0])]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True]]


#: Theano's Op instances (``theano.gradient.zero_grad_`` and friends).
consider_constant_ = ConsiderConstant()
zero_grad_ = ZeroGrad()
disconnected_grad_ = DisconnectedGrad()
undefined_grad_ = UndefinedGrad()


def consider_constant(x: Any) -> Variable:
    """``x`` in the forward pass; its gradient is truncated to zero (Theano's deprecated
    spelling of :func:`zero_grad`)."""
    return consider_constant_(x)


def zero_grad(x: Any) -> Variable:
    """``x`` in the forward pass; its gradient is zero."""
    return zero_grad_(x)


def disconnected_grad(x: Any) -> Variable:
    """``x`` in the forward pass; no gradient flows through it (disconnected)."""
    return disconnected_grad_(x)


def undefined_grad(x: Any) -> Variable:
    """``x`` in the forward pass; taking a gradient through it raises NullTypeGradError."""
    return undefined_grad_(x)


def grad_clip(x: Any, lower_bound: float, upper_bound: float) -> Variable:
    """``x`` in the forward pass; the gradient flowing back through it is clipped to
    ``[lower_bound, upper_bound]`` element by element."""
    return GradClip(lower_bound, upper_bound)(x)


def grad_scale(x: Any, multiplier: Any) -> Variable:
    """``x`` in the forward pass; the gradient flowing back through it is scaled by
    ``multiplier`` (``-1`` reverses it)."""
    return GradScale(multiplier)(x)
