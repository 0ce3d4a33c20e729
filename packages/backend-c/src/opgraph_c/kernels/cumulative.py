"""The precompiled thunk for ``CumOp`` (``cumsum``/``cumprod``, core's
``opgraph.tensor.cumulative``).

The entry returns an :class:`~opgraph_c.spec.Precompiled` thunk from
:mod:`opgraph_c._cumulative` (nothing generated or compiled), which the VM calls with no
Python frame: NumPy's sequential accumulation along the axis (``axis=None``: of the input
raveled in C order), in the output dtype, bit for bit. Bool, integer, float32 and float64
inputs have C loops; float16 and complex inputs return None (``perform`` runs, with the
registry's fallback warning).
"""

from __future__ import annotations

from typing import Any

from opgraph.graph.basic import Apply
from opgraph.tensor.cumulative import CumOp
from opgraph.tensor.type import TensorType
from opgraph_c.spec import Precompiled

__all__ = ["CUMULATIVE_DTYPES", "CUMULATIVE_VERSION", "cumop_c", "register"]

#: Bump when the thunk's behaviour changes.
CUMULATIVE_VERSION = 1
#: Input dtype -> output (accumulator) dtype of the C loops (``_cumulative.ACC_DTYPES``).
CUMULATIVE_DTYPES = {
    "bool": "int64",
    **{f"int{bits}": "int64" for bits in (8, 16, 32, 64)},
    **{f"uint{bits}": "uint64" for bits in (8, 16, 32, 64)},
    "float32": "float32",
    "float64": "float64",
}
#: Most dimensions the thunk handles (NumPy's limit, ``_cumulative.MAXDIMS``).
MAX_DIMS = 64


def register(registry: Any, owner: str) -> None:
    """Register the CumOp thunk."""
    registry.register(CumOp, cumop_c, version=CUMULATIVE_VERSION, owner=owner)


def cumop_c(op: CumOp, node: Apply) -> Precompiled | None:
    """The cumulative sum or product in C, or None for a dtype without a C loop."""
    x_type, out_type = node.inputs[0].type, node.outputs[0].type
    if (
        not isinstance(x_type, TensorType)
        or x_type.ndim > MAX_DIMS
        or CUMULATIVE_DTYPES.get(x_type.dtype) != out_type.dtype
    ):
        return None

    def make_thunk(node: Apply, in_cells: list[list[Any]], out_cells: list[list[Any]]) -> Any:
        from opgraph_c import _cumulative

        return _cumulative.CumThunk(node, in_cells, out_cells)

    return Precompiled(f"{op} {x_type.dtype}", make_thunk)
