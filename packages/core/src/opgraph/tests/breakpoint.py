"""``PdbBreakpoint``: a conditional debugger breakpoint inside a compiled function (Theano's).

::

    from opgraph.tests.breakpoint import PdbBreakpoint

    mse = ((input - target) ** 2)
    mse, mon_in, mon_target = PdbBreakpoint("MSE too high")(T.gt(mse.sum(), 100), mse,
                                                            input, target)
    f = opgraph.function([input, target], mse)   # stops in the debugger when the sum > 100

The outputs are the monitored inputs (views of them); at least one must be used, else the
node is pruned from the graph.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.null_type import disconnected_type
from opgraph.graph.op import Op
from opgraph.tensor.basic import as_tensor_variable

__all__ = ["PdbBreakpoint"]


def _debugger() -> Any:
    """The first installed of ``pudb``, ``ipdb``, ``pdb`` (Theano's order)."""
    for name in ("pudb", "ipdb"):
        if importlib.util.find_spec(name) is not None:
            return importlib.import_module(name)
    return importlib.import_module("pdb")


class PdbBreakpoint(Op):
    """Identity on the monitored variables; enters the debugger when ``condition`` is true.

    In the debugger, the list ``monitored`` holds the monitored values as NumPy arrays;
    changed values are used when execution resumes. ``name`` is printed on activation.
    """

    __props__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name
        self.view_map: dict[int, list[int]] = {}

    def make_node(self, condition: Any, *monitored_vars: Any) -> Apply:
        condition = as_tensor_variable(condition)
        if condition.type.ndim != 0:
            raise TypeError(
                f"PdbBreakpoint {self.name!r}: the condition must be a scalar, got "
                f"{condition} of type {condition.type}"
            )
        monitored = [
            v if isinstance(v, Variable) else as_tensor_variable(v) for v in monitored_vars
        ]
        # One instance per node: each output i is a view of input i + 1.
        new_op = PdbBreakpoint(self.name)
        new_op.view_map = {i: [i + 1] for i in range(len(monitored))}
        return Apply(new_op, [condition, *monitored], [v.type() for v in monitored])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        condition = inputs[0]
        if not condition:
            for i, cell in enumerate(output_storage):
                cell[0] = inputs[i + 1]
            return
        try:
            monitored = [np.asarray(inp) for inp in inputs[1:]]
        except Exception:
            raise ValueError(
                f"Some of the inputs to the PdbBreakpoint op '{self.name}' could not be "
                "cast to NumPy arrays"
            ) from None
        print("\n")
        print("-------------------------------------------------")
        print(f"Conditional breakpoint '{self.name}' activated\n")
        print("The monitored variables are stored, in order,")
        print("in the list variable 'monitored' as NumPy arrays.\n")
        print("Their contents can be altered and, when execution")
        print("resumes, the updated values will be used.")
        print("-------------------------------------------------")
        _debugger().set_trace()
        for i, cell in enumerate(output_storage):
            cell[0] = node.outputs[i].type.filter(monitored[i])

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        return [disconnected_type(), *output_grads]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return list(input_shapes[1:])

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        n_out = len(node.inputs) - 1
        return [[out == inp - 1 for out in range(n_out)] for inp in range(len(node.inputs))]
