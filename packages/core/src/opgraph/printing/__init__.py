"""Printing graphs: as text (``debugprint``), as math (``pprint``/``pp``), as pictures
(``pydotprint``, ``html_view``), and the ``Print`` Op that prints values at run time.

Theano's ``theano.printing`` API::

    >>> from opgraph import printing
    >>> printing.debugprint(f)                    # indented text, [id A] layout
    >>> printing.pp(f.maker.fgraph.outputs[0])    # '(TensorConstant{2.0} * x)'
    >>> printing.pydotprint(f, outfile="f.png")   # Graphviz picture
    >>> printing.html_view(f, "f.html")           # self-contained page: pan, zoom, tooltips
    >>> y = printing.Print("msg")(x)              # prints "msg __str__ = [ 1.  2.  3.]"

Op libraries register how their Ops pretty-print with ``pprint.assign(op, printer)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Variable, as_variable
from opgraph.graph.op import Op, OutputStorage
from opgraph.printing.debugprint import char_from_number, debugprint
from opgraph.printing.html import html_view, write_html
from opgraph.printing.pprint import (
    VALID_ASSOC,
    ConstantPrinter,
    DefaultPrinter,
    FunctionPrinter,
    IgnorePrinter,
    LeafPrinter,
    MemberPrinter,
    OperatorPrinter,
    PatternPrinter,
    PPrinter,
    PrinterState,
    greek,
    pp,
    pprint,
    special,
)
from opgraph.printing.pydot import default_colorCodes, pydotprint

__all__ = [
    "VALID_ASSOC",
    "ConstantPrinter",
    "DefaultPrinter",
    "FunctionPrinter",
    "IgnorePrinter",
    "LeafPrinter",
    "MemberPrinter",
    "OperatorPrinter",
    "PPrinter",
    "PatternPrinter",
    "Print",
    "PrinterState",
    "char_from_number",
    "debugprint",
    "default_colorCodes",
    "greek",
    "html_view",
    "pp",
    "pprint",
    "pydotprint",
    "special",
    "write_html",
]


def _value_text(value: Any, attr: str) -> Any:
    """``value.<attr>`` (called if it is a method); arrays print as Theano showed them."""
    if attr == "__str__" and isinstance(value, np.ndarray | np.generic):
        return np.array2string(np.asarray(value), legacy="1.13")
    member = getattr(value, attr)
    return member() if callable(member) else member


def _print_fn(op: Print, xin: Any) -> None:
    """Default action of :class:`Print`: ``print(message, attr, '=', value)`` per attribute."""
    for attr in op.attrs:
        print(op.message, attr, "=", _value_text(xin, attr))


class Print(Op):
    """Identity that prints its input's value when the graph runs (Theano's ``Print``).

    ``Print('msg')(x)`` returns a variable equal to ``x``; each evaluation prints
    ``msg __str__ = [ 1.  2.  3.]``. ``attrs`` names other attributes or methods of the value to
    print (``Print('x', attrs=('shape', 'sum'))``); ``global_fn(op, value)`` replaces the
    printing entirely. The output is a view of the input, the gradient passes through, and
    constant folding leaves the node in place so that it still prints. Beware: like any Op it
    sits between the nodes around it, so rewrites that match across it no longer apply.
    """

    view_map = {0: [0]}
    __props__ = ("message", "attrs", "global_fn")

    def __init__(
        self,
        message: str = "",
        attrs: Sequence[str] = ("__str__",),
        global_fn: Callable[[Print, Any], None] = _print_fn,
    ) -> None:
        self.message = message
        self.attrs = tuple(attrs)
        self.global_fn = global_fn

    def __str__(self) -> str:
        extra = "" if self.global_fn is _print_fn else f", global_fn={self.global_fn.__name__}"
        return f"Print{{message={self.message!r}, attrs={self.attrs!r}{extra}}}"

    def make_node(self, xin: Any) -> Apply:
        xin = as_variable(xin)
        return Apply(self, [xin], [xin.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: OutputStorage) -> None:
        (xin,) = inputs
        output_storage[0][0] = xin
        self.global_fn(self, xin)

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        return list(output_grads)

    def R_op(
        self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]
    ) -> list[Variable | None]:
        return list(eval_points)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Sequence[Any]]) -> list[Any]:
        return list(input_shapes)

    def do_constant_folding(self, fgraph: Any, node: Apply) -> bool:
        return False

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("global_fn", _print_fn)
        self.__dict__.update(state)
