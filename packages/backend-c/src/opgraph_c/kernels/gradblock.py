"""``GradBlock`` (``consider_constant``, ``disconnected_grad``, ``zero_grad``): the identity
it is in the forward pass, as the precompiled view thunk ``ViewOp`` uses."""

from __future__ import annotations

from typing import Any

from opgraph.graph.basic import Apply
from opgraph.link.dispatch import KernelRegistry
from opgraph.tensor.gradblock import GradBlock
from opgraph_c.spec import Precompiled

__all__ = ["GRADBLOCK_VERSION", "register"]

#: Bump when the thunk's behaviour changes.
GRADBLOCK_VERSION = 1


def _make_thunk(node: Apply, in_cells: list[list[Any]], out_cells: list[list[Any]]) -> Any:
    from opgraph_c import _structure

    return _structure.ViewThunk(node, in_cells, out_cells)


def grad_block_c(op: GradBlock, node: Apply) -> Precompiled:
    """The input itself (``GradBlock.view_map`` says the output is a view of it)."""
    return Precompiled("GradBlock", _make_thunk)


def register(registry: KernelRegistry, owner: str) -> None:
    """Register GradBlock's view thunk."""
    registry.register(GradBlock, grad_block_c, version=GRADBLOCK_VERSION, owner=owner)
