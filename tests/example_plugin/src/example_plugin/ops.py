"""The plugin's Op: elementwise ``x ** 3`` of a float tensor, as an Op of its own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph import Apply, Op, Variable
from opgraph.tensor import as_tensor_variable

FLOAT_DTYPES = ("float16", "float32", "float64")


class Cube(Op):
    """Elementwise ``x ** 3`` of a float tensor, computed as ``(x * x) * x`` in its dtype."""

    # The parameters that make two instances the same Op (none here): they give the Op its
    # ``__eq__`` and ``__hash__`` (the merge rewrite and the compile cache rely on them)
    # and its printed form.
    __props__ = ()

    def make_node(self, x: Any) -> Apply:
        """The graph node ``cube(x)``: checks the input's type, declares the output's."""
        x = as_tensor_variable(x)
        if x.type.dtype not in FLOAT_DTYPES:
            raise TypeError(
                f"cube needs a float tensor, got {x} of type {x.type}.\n"
                "HINT: cast it first, e.g. cube(opgraph.tensor.cast(x, 'float64'))."
            )
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        """The reference implementation: every backend's kernel must give these values."""
        (x,) = inputs
        out = np.empty_like(x)  # a new array: Cube declares no view_map/destroy_map
        np.multiply(x, x, out=out)
        np.multiply(out, x, out=out)
        output_storage[0][0] = out

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        """The output's shape from the inputs' (symbolic) shapes, without computing it."""
        return [input_shapes[0]]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        """``d cube(x) / dx = 3 x**2``, times the gradient flowing in."""
        (x,), (gz,) = inputs, output_grads
        return [gz * 3 * x * x]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list[Any]:
        """The Jacobian times ``eval_points`` (forward mode): ``3 x**2 * v``."""
        (x,), (v,) = inputs, eval_points
        return [None if v is None else 3 * x * x * v]


cube = Cube()
