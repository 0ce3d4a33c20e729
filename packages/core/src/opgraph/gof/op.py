"""Theano's ``theano.gof.op`` path: the Op base class and the test-value helpers.

``get_test_value(v)`` returns a variable's test value, ``get_debug_values(*vars)`` gives the
loop Theano code writes (``for a, b in get_debug_values(x, y): ...``), and
``missing_test_message``, ``debug_error_message`` and ``debug_assert`` report problems as
``config.compute_test_value`` says.
"""

from opgraph.graph.op import (
    Op,
    compute_test_values,
    debug_assert,
    debug_error_message,
    get_debug_values,
    get_test_value,
    missing_test_message,
)

#: Theano's base of Op (without its C-code mixins, which opgraph keeps in its backends).
PureOp = Op

__all__ = [
    "Op",
    "PureOp",
    "compute_test_values",
    "debug_assert",
    "debug_error_message",
    "get_debug_values",
    "get_test_value",
    "missing_test_message",
]
