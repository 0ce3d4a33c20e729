"""Identity ops that return their input as a view: ``GradBlock`` (``consider_constant``,
``disconnected_grad``, ``zero_grad``) and ``Hint`` (``opgraph.sandbox.linalg``), run by the
precompiled view thunk ``ViewOp`` uses."""

from __future__ import annotations

from typing import Any

from opgraph.graph.basic import Apply
from opgraph.graph.op import Op
from opgraph.link.dispatch import KernelRegistry
from opgraph.sandbox.linalg.ops import Hint
from opgraph.tensor.gradblock import GradBlock
from opgraph_c.spec import Precompiled

__all__ = ["IDENTITY_VERSION", "register"]

#: Bump when the thunk's behaviour changes.
IDENTITY_VERSION = 1


def _make_thunk(node: Apply, in_cells: list[list[Any]], out_cells: list[list[Any]]) -> Any:
    from opgraph_c import _structure

    return _structure.ViewThunk(node, in_cells, out_cells)


def identity_c(op: Op, node: Apply) -> Precompiled:
    """The input itself (the Op's ``view_map`` says the output is a view of it)."""
    return Precompiled(type(op).__name__, _make_thunk)


def register(registry: KernelRegistry, owner: str) -> None:
    """Register the view thunk for GradBlock and Hint."""
    for op_class in (GradBlock, Hint):
        registry.register(op_class, identity_c, version=IDENTITY_VERSION, owner=owner)
