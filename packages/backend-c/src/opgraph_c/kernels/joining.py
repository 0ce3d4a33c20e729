"""Precompiled thunks for ``Join`` and ``Split`` (core's ``opgraph.tensor.joining``).

Each entry returns an :class:`~opgraph_c.spec.Precompiled` thunk from
:mod:`opgraph_c._joining` (nothing generated or compiled), which the VM calls with no Python
frame. The thunks match the ops' ``perform`` exactly: values, dtypes, the output's memory
layout, ``Join{view=k}``'s view, and errors (anything unusual runs ``perform`` itself).

=====================================  ==========================================
op                                     thunk
=====================================  ==========================================
Join (any view)                        C-contiguous inputs of the output dtype
                                       copied block by block; other layouts and
                                       mixed dtypes through NumPy's
                                       ``PyArray_Concatenate`` and cast
Split                                  new C-ordered copies of the pieces
=====================================  ==========================================
"""

from __future__ import annotations

from typing import Any

from opgraph.graph.basic import Apply
from opgraph.tensor.joining import Join, Split
from opgraph.tensor.type import TensorType
from opgraph_c.spec import Precompiled

__all__ = ["JOINING_VERSION", "join_c", "register", "split_c"]

#: Bump when a thunk's behaviour changes.
JOINING_VERSION = 1
#: Most dimensions the thunks handle (NumPy's limit, ``_joining.MAXDIMS``).
MAX_DIMS = 64


def register(registry: Any, owner: str) -> None:
    """Register the Join and Split thunks."""
    registry.register(Join, join_c, version=JOINING_VERSION, owner=owner)
    registry.register(Split, split_c, version=JOINING_VERSION, owner=owner)


def _thunk(name: str, cls: str) -> Precompiled:
    """``Precompiled`` building ``_joining.<cls>(node, in_cells, out_cells)``."""

    def make_thunk(node: Apply, in_cells: list[list[Any]], out_cells: list[list[Any]]) -> Any:
        from opgraph_c import _joining

        return getattr(_joining, cls)(node, in_cells, out_cells)

    return Precompiled(name, make_thunk)


def _tensors(node: Apply) -> bool:
    """Every input and output is a tensor of at most MAX_DIMS dimensions."""
    return all(
        isinstance(v.type, TensorType) and v.type.ndim <= MAX_DIMS
        for v in (*node.inputs, *node.outputs)
    )


def join_c(op: Join, node: Apply) -> Precompiled | None:
    """The tensors concatenated along the axis input, in the output dtype."""
    if not _tensors(node):
        return None
    return _thunk(f"{op} {node.outputs[0].type.dtype}", "JoinThunk")


def split_c(op: Split, node: Apply) -> Precompiled | None:
    """The pieces of ``x`` along the axis input, each a new C-ordered array."""
    if not _tensors(node):
        return None
    return _thunk(f"{op} {node.inputs[0].type.dtype}", "SplitThunk")
