"""Precompiled thunks for ``ARange`` and ``Eye`` (core's ``opgraph.tensor.structure``).

Each entry returns an :class:`~opgraph_c.spec.Precompiled` thunk from
:mod:`opgraph_c._joining` (nothing generated or compiled), which the VM calls with no Python
frame, or None (no C for the node: ``perform`` runs, with the registry's fallback warning)
for a dtype it has no loop for. The thunks match the ops' ``perform`` exactly (values,
dtypes, errors: anything unusual runs ``perform`` itself).

=====================================  ==========================================
op                                     thunk
=====================================  ==========================================
ARange (int8..uint64, float32/64)      NumPy's arange step for step: the length
                                       and first two elements in C, the rest by
                                       NumPy's own ``fill`` of the dtype
Eye (bool and numeric dtypes)          zeros, ones written on the diagonal
=====================================  ==========================================
"""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph.graph.basic import Apply
from opgraph.tensor.structure import ARange, Eye
from opgraph.tensor.type import TensorType
from opgraph_c.spec import Precompiled

__all__ = ["ARANGE_DTYPES", "CREATION_VERSION", "arange_c", "eye_c", "register"]

#: Bump when a thunk's behaviour changes.
CREATION_VERSION = 1
#: Output dtypes ARange builds in C; float16, complex and bool ranges run perform.
ARANGE_DTYPES = frozenset(
    ["float32", "float64"] + [f"{kind}int{bits}" for kind in ("", "u") for bits in (8, 16, 32, 64)]
)
#: Input dtypes ARange reads in C (``.item()`` of them is a Python int or float).
ARANGE_INPUT_DTYPES = ARANGE_DTYPES


def register(registry: Any, owner: str) -> None:
    """Register the ARange and Eye thunks."""
    registry.register(ARange, arange_c, version=CREATION_VERSION, owner=owner)
    registry.register(Eye, eye_c, version=CREATION_VERSION, owner=owner)


def _thunk(name: str, cls: str) -> Precompiled:
    """``Precompiled`` building ``_joining.<cls>(node, in_cells, out_cells)``."""

    def make_thunk(node: Apply, in_cells: list[list[Any]], out_cells: list[list[Any]]) -> Any:
        from opgraph_c import _joining

        return getattr(_joining, cls)(node, in_cells, out_cells)

    return Precompiled(name, make_thunk)


def _scalars(node: Apply, dtypes: frozenset[str] | None = None) -> bool:
    """Every input is a 0-d tensor (of one of ``dtypes`` when given)."""
    return all(
        isinstance(v.type, TensorType)
        and v.type.ndim == 0
        and (dtypes is None or v.type.dtype in dtypes)
        for v in node.inputs
    )


def arange_c(op: ARange, node: Apply) -> Precompiled | None:
    """``np.arange(start, stop, step, dtype)``: integer or float32/float64 ranges in C.

    None for other output dtypes, for inputs that are not real 0-d tensors of a dtype in
    :data:`ARANGE_INPUT_DTYPES`, and for integer ranges with float inputs (NumPy's
    float-to-integer conversion is perform's).
    """
    if op.dtype not in ARANGE_DTYPES or not _scalars(node, ARANGE_INPUT_DTYPES):
        return None
    if np.dtype(op.dtype).kind in "iu":
        start, _, step = node.inputs
        if start.type.dtype.startswith("float") or step.type.dtype.startswith("float"):
            return None
    return _thunk(f"ARange {op.dtype}", "ARangeThunk")


def eye_c(op: Eye, node: Apply) -> Precompiled | None:
    """``np.eye(n, m, k, dtype)``: zeros with ones on diagonal ``k`` (numeric dtypes)."""
    if np.dtype(op.dtype).kind not in "biufc" or not _scalars(node):
        return None
    return _thunk(f"Eye {op.dtype}", "EyeThunk")
