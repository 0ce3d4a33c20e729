"""Cumulative sums and products: Theano's ``extra_ops.CumOp`` (printed ``CumOp{None, add}``).

With ``axis=None`` the input is flattened and the output is a vector, as in NumPy. Integer
and bool inputs accumulate in int64 (uint64 for unsigned), like NumPy and like ``sum``, so
``cumsum`` of int8 data does not overflow at 127.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.op import Op
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.elemwise import _default_sum_dtype
from opgraph.tensor.math import mul, true_div, zeros_like
from opgraph.tensor.subtensor import getitem
from opgraph.tensor.type import TensorType

__all__ = ["CumOp", "cumprod", "cumsum"]

_continuous = ("float16", "float32", "float64", "complex64", "complex128")


class CumOp(Op):
    """Cumulative ``mode`` ('add' or 'mul') along ``axis`` (the flattened input when None)."""

    __props__ = ("axis", "mode")

    def __init__(self, axis: int | None = None, mode: str = "add") -> None:
        if mode not in ("add", "mul"):
            raise ValueError(f"CumOp: mode must be 'add' or 'mul', got {mode!r}")
        if axis is not None and not isinstance(axis, int | np.integer):
            raise TypeError(f"CumOp: axis must be an int or None, got {axis!r}")
        self.axis = None if axis is None else int(axis)
        self.mode = mode

    def __str__(self) -> str:
        return f"{type(self).__name__}{{{self.axis}, {self.mode}}}"

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        dtype = _default_sum_dtype(x.type.dtype)
        if self.axis is None:
            out = TensorType(dtype, (False,))()
        else:
            if not -x.type.ndim <= self.axis < x.type.ndim:
                raise ValueError(
                    f"{self}: axis {self.axis} is out of range for {x} with {x.type.ndim} "
                    "dimension(s)"
                )
            out = TensorType(dtype, x.type.broadcastable)()
        return Apply(self, [x], [out])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        (x,) = inputs
        fn = np.cumsum if self.mode == "add" else np.cumprod
        dtype = node.outputs[0].type.numpy_dtype
        output_storage[0][0] = np.asarray(fn(x, axis=self.axis, dtype=dtype), dtype=dtype)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        (shp,) = input_shapes
        if self.axis is not None:
            return [tuple(shp)]
        if any(isinstance(s, Variable) for s in shp):
            return [(mul(*shp),)]
        return [(int(np.prod(shp, dtype="int64")),)]

    def _reverse(self, v: Variable, axis: int) -> Variable:
        index = [slice(None)] * v.type.ndim
        index[axis] = slice(None, None, -1)
        return getitem(v, tuple(index))

    def L_op(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable]:
        (x,), (gz,) = inputs, output_grads
        if x.type.dtype not in _continuous:
            return [zeros_like(x, dtype="float64")]
        axis = 0 if self.axis is None else self.axis % x.type.ndim
        v = gz if self.mode == "add" else mul(outputs[0], gz)
        # sum_{j >= i} v_j: reverse, cumulative sum, reverse back.
        g = self._reverse(CumOp(axis, "add")(self._reverse(v, axis)), axis)
        flat = self.axis is None and x.type.ndim != 1
        if self.mode == "mul":
            g = true_div(g, x.flatten() if flat else x)
        if flat:
            g = g.reshape(x.shape, ndim=x.type.ndim)
        return [g]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]) -> list[Any]:
        (x,), (ev,) = inputs, eval_points
        if ev is None:
            return [None]
        if self.mode == "add":
            return [self(ev)]
        return [mul(self(x), CumOp(self.axis, "add")(true_div(ev, x)))]


def cumsum(x: Any, axis: int | None = None) -> Variable:
    """Cumulative sum of ``x`` along ``axis`` (of the flattened ``x`` when None)."""
    return CumOp(axis=axis, mode="add")(x)


def cumprod(x: Any, axis: int | None = None) -> Variable:
    """Cumulative product of ``x`` along ``axis`` (of the flattened ``x`` when None)."""
    return CumOp(axis=axis, mode="mul")(x)
