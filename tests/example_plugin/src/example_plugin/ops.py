"""The plugin's Op: elementwise ``x ** 3`` as a standalone Op (not an Elemwise)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph import Apply, Op, Variable
from opgraph.tensor import as_tensor_variable


class Cube(Op):
    """Elementwise ``x ** 3`` of a float tensor."""

    __props__ = ()

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        if not x.type.dtype.startswith("float"):
            raise TypeError(f"cube needs a float tensor, got {x} of type {x.type}")
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        (x,) = inputs
        output_storage[0][0] = np.power(x, 3).astype(node.outputs[0].type.dtype, copy=False)

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        (x,), (gz,) = inputs, output_grads
        return [gz * 3 * x * x]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return list(input_shapes)


cube = Cube()
