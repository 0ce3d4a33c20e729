"""``Assert``: a run-time check inside a graph (Theano's ``theano.tensor.opt.Assert``).

``Assert(msg)(x, *conds)`` is ``x`` itself (a view, ``view_map = {0: [0]}``); when the
compiled function runs the node, an AssertionError carrying ``msg`` is raised if any of the
0-d conditions is false::

    x = T.vector("x")
    checked = assert_op(x, T.lt(x.size, 3))    # Assert{msg='Theano Assert failed!'}
    f = opgraph.function([x], checked)
    f([1.0, 2.0])                               # array([1., 2.])
    f([1.0, 2.0, 3.0])                          # AssertionError: Theano Assert failed!

As in Theano the check is a debugging aid: the output must be used by the function for the
check to run, and the gradient passes through to ``x`` (the conditions are disconnected).
Theano's printing is kept: the Op prints as ``Assert{msg='...'}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.null_type import disconnected_type
from opgraph.graph.op import Op
from opgraph.tensor.basic import as_tensor_variable

__all__ = ["Assert", "assert_", "assert_op"]

#: Theano's default message.
DEFAULT_MSG = "Theano Assert failed!"


class Assert(Op):
    """Return the first input unchanged; raise AssertionError(``msg``) when a condition is
    false. The conditions are 0-d tensors of any dtype (truth as NumPy's ``bool``)."""

    __props__ = ("msg",)
    view_map = {0: [0]}

    def __init__(self, msg: str = DEFAULT_MSG) -> None:
        if not isinstance(msg, str):
            raise TypeError(f"Assert: msg must be a str, got {msg!r}")
        self.msg = msg

    def __setstate__(self, attrs: dict[str, Any]) -> None:
        """Unpickling an Assert pickled without ``msg`` gives Theano's default message."""
        self.__dict__.update(attrs)
        if not hasattr(self, "msg"):
            self.msg = DEFAULT_MSG

    def make_node(self, value: Any, *conds: Any) -> Apply:
        if not isinstance(value, Variable):
            value = as_tensor_variable(value)
        cond_vars = []
        for i, c in enumerate(conds):
            c = as_tensor_variable(c)
            if c.type.ndim != 0:
                raise TypeError(
                    f"Assert: condition {i} must be a 0-d tensor (a scalar), got {c} of "
                    f"type {c.type}. HINT: reduce it first, e.g. T.all(cond)."
                )
            cond_vars.append(c)
        return Apply(self, [value, *cond_vars], [value.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        output_storage[0][0] = inputs[0]
        if not all(bool(np.asarray(c)) for c in inputs[1:]):
            raise AssertionError(self.msg)

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        return [output_grads[0]] + [disconnected_type() for _ in inputs[1:]]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True]] + [[False]] * (len(node.inputs) - 1)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]) -> list[Any]:
        """The R-operator of the identity on ``x``, checked with the same conditions."""
        if eval_points[0] is None:
            return [None]
        return self.make_node(eval_points[0], *inputs[1:]).outputs


#: Theano's instance with the default message (``unittest`` made Theano add ``assert_op``).
assert_ = Assert()
assert_op = assert_
