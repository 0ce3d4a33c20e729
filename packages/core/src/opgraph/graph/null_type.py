"""The types of gradients that are not numbers, which every Op's ``grad`` may return.

``NullType``: the gradient is undefined (or not implemented); ``DisconnectedType``: there is
no path from the cost, so the gradient is zero without a graph. They live beside the graph
structures, below every op library, so that ops of any layer can name them;
:mod:`opgraph.gradient` re-exports them under Theano's names.
"""

from __future__ import annotations

from typing import Any

from opgraph.graph.basic import Variable
from opgraph.graph.op import Op
from opgraph.graph.type import Type

__all__ = [
    "DisconnectedType",
    "NullType",
    "disconnected_type",
    "grad_not_implemented",
    "grad_undefined",
]


class NullType(Type):
    """The type of an undefined gradient; carries the reason in ``why_null``."""

    __props__ = ("why_null",)

    def __init__(self, why_null: str = "(no explanation given)") -> None:
        self.why_null = why_null

    def filter(self, data: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        raise ValueError(f"no values can be assigned to a NullType: {self.why_null}")

    def __str__(self) -> str:
        return "NullType"


class DisconnectedType(Type):
    """The type of a gradient that is zero because there is no path (disconnected)."""

    __props__ = ()

    def filter(self, data: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        raise ValueError("a DisconnectedType variable has no value")

    def __str__(self) -> str:
        return "DisconnectedType"


#: Call it for a new DisconnectedType variable: what an Op's ``grad`` returns for an input
#: its outputs do not depend on (``return [g, disconnected_type()]``).
disconnected_type = DisconnectedType()


def grad_undefined(op: Op, x_pos: int, x: Variable, comment: str = "") -> Variable:
    """Return a NullType variable: the gradient of ``op`` w.r.t. input ``x_pos`` is undefined."""
    return NullType(
        f"the gradient of {op} with respect to its input {x_pos} ({x}) is mathematically "
        f"undefined. {comment}"
    )()


def grad_not_implemented(op: Op, x_pos: int, x: Variable, comment: str = "") -> Variable:
    """Return a NullType variable: ``op`` does not implement this gradient."""
    return NullType(
        f"{op} does not implement the gradient with respect to its input {x_pos} ({x}). {comment}"
    )()
