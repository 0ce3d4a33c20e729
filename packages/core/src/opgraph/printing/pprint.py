"""``pprint``: a graph as a math-like expression, with Theano 1.0's printers and output.

A :class:`PPrinter` holds ``(condition, printer)`` pairs; the most recently assigned pair whose
condition matches a variable prints it. Op libraries register their notation at import time::

    pprint.assign(mul, OperatorPrinter("*", -1, "either"))   # (x * y)
    pprint.assign(neg, OperatorPrinter("-", 0, "either"))    # (-x)
    pprint.assign(exp, FunctionPrinter("exp"))               # exp(x)

Operator expressions are always parenthesized, as in Theano (whose precedence logic was
disabled): ``pp(T.grad(x**2, x))`` is ``'((fill((x ** TensorConstant{2}), TensorConstant{1.0}) *
TensorConstant{2}) * (x ** (TensorConstant{2} - TensorConstant{1})))'``.

Printing is memoized per call and the printer first fills the memo bottom-up in topological
order, so a graph thousands of nodes deep prints without reaching the recursion limit.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from opgraph.graph.basic import Constant, Variable
from opgraph.graph.op import Op
from opgraph.graph.traversal import general_toposort, io_toposort
from opgraph.graph.utils import Scratchpad

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
    "PrinterState",
    "greek",
    "pp",
    "pprint",
    "special",
]

VALID_ASSOC = {"left", "right", "either"}

#: ASCII spellings used for special symbols and Greek-named variables (Theano's ``use_ascii``).
special = {"middle_dot": "\\dot", "big_sigma": "\\Sigma"}
greek = {
    "alpha": "\\alpha",
    "beta": "\\beta",
    "gamma": "\\gamma",
    "delta": "\\delta",
    "epsilon": "\\epsilon",
}

Condition = Callable[["PrinterState", Variable], Any]


class Printer(Protocol):
    """What a printer is: ``process(variable, pstate) -> str``."""

    def process(self, output: Variable, pstate: PrinterState) -> str: ...


class PrinterState(Scratchpad):
    """The state passed down while printing: ``pprinter``, ``precedence``, ``memo``, ...

    ``clone(**changes)`` returns a copy with some fields changed; the ``memo`` dict (variable
    -> printed string) is shared by all clones of one top-level call.
    """

    def __init__(self, props: Mapping[str, Any] | Scratchpad | None = None, **more: Any) -> None:
        super().__init__()
        if isinstance(props, Scratchpad):
            self.__dict__.update(props.__dict__)
        elif props:
            self.__dict__.update(props)
        self.__dict__.update(more)
        if "memo" not in self.__dict__:
            self.memo: dict[Variable, str] = {}

    def clone(self, props: Mapping[str, Any] | None = None, **more: Any) -> PrinterState:
        """A copy of this state with ``props`` / keyword fields changed (memo shared)."""
        return PrinterState(self, **dict(props or {}, **more))


def _owner_or_raise(output: Variable, what: str) -> Any:
    node = output.owner
    if node is None:
        raise TypeError(f"{what} cannot represent {output}: it is not the result of an operation")
    return node


class OperatorPrinter:
    """Infix ``(a op b op c)`` for several inputs, prefix ``(op a)`` for one.

    ``precedence`` and ``assoc`` (``'left'``, ``'right'`` or ``'either'``) are recorded in the
    state passed to the inputs; the expression itself is always parenthesized (Theano 1.0).
    """

    def __init__(self, operator: str, precedence: float, assoc: str = "left") -> None:
        if assoc not in VALID_ASSOC:
            raise ValueError(f"OperatorPrinter: assoc must be one of {sorted(VALID_ASSOC)}")
        self.operator = operator
        self.precedence = precedence
        self.assoc = assoc

    def process(self, output: Variable, pstate: PrinterState) -> str:
        if output in pstate.memo:
            return pstate.memo[output]
        pprinter = pstate.pprinter
        node = _owner_or_raise(output, f"operator {self.operator}")
        max_i = len(node.inputs) - 1
        strings = []
        for i, inp in enumerate(node.inputs):
            prec = self.precedence
            if (self.assoc == "left" and i != 0) or (self.assoc == "right" and i != max_i):
                prec += 1e-6
            strings.append(pprinter.process(inp, pstate.clone(precedence=prec)))
        if len(strings) == 1:
            s = self.operator + strings[0]
        else:
            s = f" {self.operator} ".join(strings)
        result = f"({s})"
        pstate.memo[output] = result
        return result


class PatternPrinter:
    """Printing by ``%``-patterns over the inputs, one pattern per output.

    ``PatternPrinter('%(0)s[%(1)s]')``; a pattern may be a ``(pattern, precedence0, ...)``
    tuple giving the precedence passed to each input.
    """

    def __init__(self, *patterns: str | tuple[Any, ...]) -> None:
        self.patterns: list[tuple[str, tuple[float, ...]]] = []
        for pattern in patterns:
            if isinstance(pattern, str):
                self.patterns.append((pattern, ()))
            else:
                self.patterns.append((pattern[0], tuple(pattern[1:])))

    def process(self, output: Variable, pstate: PrinterState) -> str:
        if output in pstate.memo:
            return pstate.memo[output]
        pprinter = pstate.pprinter
        node = _owner_or_raise(output, f"patterns {[p for p, _ in self.patterns]}")
        pattern, precedences = self.patterns[node.outputs.index(output)]
        precedences = precedences + (1000,) * len(node.inputs)
        d = {
            str(i): pprinter.process(inp, pstate.clone(precedence=prec))
            for i, (inp, prec) in enumerate(zip(node.inputs, precedences))
        }
        result = pattern % d
        pstate.memo[output] = result
        return result


def _names(names: tuple[Any, ...]) -> tuple[str, ...]:
    if len(names) == 1 and isinstance(names[0], list | tuple):
        return tuple(names[0])
    return tuple(names)


class FunctionPrinter:
    """Function-call notation ``name(a, b)``; one name per output of the Op."""

    def __init__(self, *names: str | Sequence[str]) -> None:
        self.names = _names(names)
        if not self.names:
            raise ValueError("FunctionPrinter needs at least one name")

    def process(self, output: Variable, pstate: PrinterState) -> str:
        if output in pstate.memo:
            return pstate.memo[output]
        pprinter = pstate.pprinter
        node = _owner_or_raise(output, f"function {self.names[0]}")
        idx = node.outputs.index(output)
        name = self.names[idx] if idx < len(self.names) else f"{self.names[0]}.{idx}"
        args = ", ".join(pprinter.process(i, pstate.clone(precedence=-1000)) for i in node.inputs)
        result = f"{name}({args})"
        pstate.memo[output] = result
        return result


class MemberPrinter:
    """Attribute notation ``a.name`` (e.g. ``x.T``); one name per output."""

    def __init__(self, *names: str | Sequence[str]) -> None:
        self.names = _names(names)

    def process(self, output: Variable, pstate: PrinterState) -> str:
        if output in pstate.memo:
            return pstate.memo[output]
        pprinter = pstate.pprinter
        node = _owner_or_raise(output, f"member {self.names}")
        name = self.names[node.outputs.index(output)]
        result = f"{pprinter.process(node.inputs[0], pstate.clone(precedence=1000))}.{name}"
        pstate.memo[output] = result
        return result


class IgnorePrinter:
    """Prints the Op's first input as if the Op were not there (casts, copies, Print)."""

    def process(self, output: Variable, pstate: PrinterState) -> str:
        if output in pstate.memo:
            return pstate.memo[output]
        node = _owner_or_raise(output, "IgnorePrinter")
        result = pstate.pprinter.process(node.inputs[0], pstate)
        pstate.memo[output] = result
        return result


class LeafPrinter:
    """A variable's own ``str`` (its name), with Greek names spelled ``\\alpha`` etc."""

    def process(self, output: Variable, pstate: PrinterState) -> str:
        if output.name in greek:
            return greek[output.name]
        return str(output)


class ConstantPrinter:
    """A Constant as ``str(var)``: ``TensorConstant{2.0}``, or its name if it has one."""

    def process(self, output: Variable, pstate: PrinterState) -> str:
        return LeafPrinter().process(output, pstate)


class DefaultPrinter:
    """The fallback: ``op(input, ...)`` for an Apply output, the leaf itself otherwise."""

    def process(self, output: Variable, pstate: PrinterState) -> str:
        if output in pstate.memo:
            return pstate.memo[output]
        node = output.owner
        if node is None:
            return LeafPrinter().process(output, pstate)
        pprinter = pstate.pprinter
        args = ", ".join(pprinter.process(i, pstate.clone(precedence=-1000)) for i in node.inputs)
        result = f"{node.op}({args})"
        pstate.memo[output] = result
        return result


class _OpIs:
    """Condition ``output.owner.op == op`` (recorded so lookups can use a dict)."""

    def __init__(self, op: Op) -> None:
        self.op = op

    def __call__(self, pstate: PrinterState, r: Variable) -> bool:
        return r.owner is not None and r.owner.op == self.op

    def __repr__(self) -> str:
        return f"<op is {self.op}>"


class _OpIsInstance:
    """Condition ``isinstance(output.owner.op, cls)``."""

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def __call__(self, pstate: PrinterState, r: Variable) -> bool:
        return r.owner is not None and isinstance(r.owner.op, self.cls)

    def __repr__(self) -> str:
        return f"<op isinstance {self.cls.__name__}>"


class PPrinter:
    """A table of ``(condition, printer)``; the last assigned matching pair prints a variable.

    ``printers`` lists the pairs, most recent first (Theano's attribute). Call the printer on a
    variable (``pprint(x)``) for its expression, or on ``(inputs, outputs[, updates])`` for a
    ``return ...`` listing of a whole graph.
    """

    def __init__(self) -> None:
        self.printers: list[tuple[Condition, Printer]] = []
        self._index: tuple[int, dict[Any, int], list[int]] | None = None

    def assign(self, condition: Op | type | Condition, printer: Printer) -> None:
        """Use ``printer`` for the variables matching ``condition``.

        ``condition`` is an Op instance (outputs of nodes whose op equals it), an Op class
        (outputs of nodes whose op is an instance of it) or a predicate ``(pstate, var) ->
        bool``. Later assignments take precedence over earlier ones.
        """
        if isinstance(condition, Op):
            condition = _OpIs(condition)
        elif isinstance(condition, type):
            condition = _OpIsInstance(condition)
        elif not callable(condition):
            raise TypeError(
                f"PPrinter.assign: condition must be an Op, an Op class or a callable "
                f"(pstate, var) -> bool, got {condition!r}"
            )
        if not callable(getattr(printer, "process", None)):
            raise TypeError(f"PPrinter.assign: {printer!r} has no process(var, pstate) method")
        self.printers.insert(0, (condition, printer))
        self._index = None

    def _lookup_index(self) -> tuple[dict[Any, int], list[int]]:
        """``{op: position}`` for Op-instance conditions, positions of the other conditions."""
        key = id(self.printers) ^ len(self.printers)
        if self._index is None or self._index[0] != key:
            by_op: dict[Any, int] = {}
            others: list[int] = []
            for pos, (cond, _) in enumerate(self.printers):
                if isinstance(cond, _OpIs):
                    try:
                        by_op.setdefault(cond.op, pos)
                        continue
                    except TypeError:  # unhashable op: test it in order
                        pass
                others.append(pos)
            self._index = (key, by_op, others)
        return self._index[1], self._index[2]

    def _find(self, r: Variable, pstate: PrinterState) -> Printer | None:
        by_op, others = self._lookup_index()
        limit = len(self.printers)
        if r.owner is not None:
            with contextlib.suppress(TypeError):  # unhashable op: no dict entry
                limit = by_op.get(r.owner.op, limit)
        for pos in others:
            if pos > limit:
                break
            cond, printer = self.printers[pos]
            if cond(pstate, r):
                return printer
        return self.printers[limit][1] if limit < len(self.printers) else None

    def _state(self, pstate: PrinterState | Mapping[str, Any] | None) -> PrinterState:
        if pstate is None:
            return PrinterState(pprinter=self)
        if isinstance(pstate, PrinterState):
            return pstate
        return PrinterState(pprinter=self, **dict(pstate))

    def process(self, r: Variable, pstate: PrinterState | Mapping[str, Any] | None = None) -> str:
        """Return the expression of ``r``."""
        top = not isinstance(pstate, PrinterState)
        pstate = self._state(pstate)
        if r in pstate.memo:
            return pstate.memo[r]
        if top:
            self._fill_memo(r, pstate)
        printer = self._find(r, pstate)
        if printer is None:
            raise TypeError(
                f"no printer of this PPrinter matches {r}. HINT: assign a catch-all "
                "printer: pp.assign(lambda pstate, r: True, DefaultPrinter())"
            )
        result = printer.process(r, pstate)
        pstate.memo[r] = result
        return result

    def _fill_memo(self, r: Variable, pstate: PrinterState) -> None:
        """Print the ancestors of ``r`` deepest first, so that no call nests deeply."""

        def deps(v: Any) -> Sequence[Any] | None:
            return v.owner.inputs if isinstance(v, Variable) and v.owner is not None else None

        order = general_toposort([r], deps)
        if len(order) < 100:  # shallow enough to print directly
            return
        for v in order[:-1]:
            if v.owner is None or v in pstate.memo:
                continue
            try:
                self.process(v, pstate.clone())
            except Exception:  # a printer may not apply out of context; retried later
                pstate.memo.pop(v, None)

    def clone(self) -> PPrinter:
        """A copy with its own table (assignments to the copy leave this printer alone)."""
        cp = copy.copy(self)
        cp.printers = list(self.printers)
        cp._index = None
        return cp

    def clone_assign(self, condition: Op | type | Condition, printer: Printer) -> PPrinter:
        """A copy of this printer with one more assignment."""
        cp = self.clone()
        cp.assign(condition, printer)
        return cp

    def process_graph(
        self,
        inputs: Variable | Sequence[Variable],
        outputs: Variable | Sequence[Variable],
        updates: Mapping[Variable, Variable] | None = None,
        display_inputs: bool = False,
    ) -> str:
        """A listing of a whole graph: named intermediates, updates and ``return ...``."""
        updates = dict(updates or {})
        inputs = [inputs] if isinstance(inputs, Variable) else list(inputs)
        outputs = [outputs] if isinstance(outputs, Variable) else list(outputs)
        strings: list[tuple[int, str]] = []
        if display_inputs:
            names = ", ".join(str(v) for v in [*inputs, *updates])
            strings.append((0, f"inputs: {names}"))
        current: list[Variable | None] = [None]
        pprinter = self.clone_assign(
            lambda pstate, r: r.name is not None and r is not current[0], LeafPrinter()
        )
        inv_updates = {b: a for a, b in updates.items()}
        i = 1
        for node in io_toposort([*inputs, *updates], [*outputs, *updates.values()]):
            for output in node.outputs:
                if output in inv_updates:
                    name = str(inv_updates[output])
                    strings.append((i + 1000, f"{name} <- {pprinter.process(output)}"))
                    i += 1
                if output.name is not None or output in outputs:
                    name = output.name if output.name is not None else _out_name(outputs, output)
                    current[0] = output
                    idx = 2000 + outputs.index(output) if output in outputs else i
                    if len(outputs) == 1 and outputs[0] is output:
                        strings.append((idx, f"return {pprinter.process(output)}"))
                    else:
                        strings.append((idx, f"{name} = {pprinter.process(output)}"))
                    i += 1
        strings.sort(key=lambda t: t[0])
        return "\n".join(s for _, s in strings)

    def __call__(self, *args: Any) -> str:
        """``pp(var)``, ``pp(var, pstate)`` or ``pp(inputs, outputs, updates)``."""
        if len(args) == 1:
            return self.process(args[0])
        if len(args) == 2 and isinstance(args[1], PrinterState | Mapping):
            return self.process(args[0], args[1])
        if len(args) == 2 and not isinstance(args[0], Variable):
            return self.process_graph(*args)
        if len(args) > 2:
            return self.process_graph(*args)
        raise TypeError(
            "pprint takes a variable, (variable, pstate) or (inputs, outputs[, updates])"
        )


def _out_name(outputs: list[Variable], output: Variable) -> str:
    return f"out[{outputs.index(output)}]"


def _is_constant(pstate: PrinterState, r: Variable) -> bool:
    return isinstance(r, Constant)


def _is_named_non_target(pstate: PrinterState, r: Variable) -> bool:
    return hasattr(pstate, "target") and pstate.target is not r and r.name is not None


def _default_pprinter() -> PPrinter:
    printer = PPrinter()
    printer.assign(lambda pstate, r: True, DefaultPrinter())
    printer.assign(_is_constant, ConstantPrinter())
    printer.assign(_is_named_non_target, LeafPrinter())
    return printer


#: The global pretty printer; op libraries call ``pprint.assign(op, printer)``.
pprint = _default_pprinter()
#: Theano's short alias: ``pp(f.maker.fgraph.outputs[0])``.
pp = pprint
