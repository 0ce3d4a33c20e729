"""Pattern rewrites: identities written as nested tuples, one line each.

``pattern_rewriter("local_mul_div", (mul, "x", (true_div, "y", "x")), "y")`` replaces
``x * (y / x)`` by ``y``. An input pattern is one of:

- ``(op, sub, ...)``: a variable computed by ``op`` (an Op instance, matched by equality, or
  an Op class, matched by ``isinstance``; inside the pattern also a predicate ``f(op)``)
  from inputs matching the sub-patterns;
- a string: a pattern variable, binding anything; the same name twice must bind the same
  variable (or equal constants);
- a Python number: a Constant whose data (of any shape) is all equal to it;
- a Variable: that variable, or a Constant equal to it;
- ``{"pattern": p, "constraint": fn}``: matches ``p`` and requires ``fn(variable)`` to be true.

The output pattern uses the same tuples and strings; ``(op, ...)`` calls ``op`` on the
built inputs, so numbers are converted by the Op's ``make_node``. Matching recurses over
the pattern (a few levels), never over the graph.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from numbers import Number
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.op import Op
from opgraph.rewriting.basic import NodeRewriter, caller_location

__all__ = ["PatternNodeRewriter", "PatternSub", "pattern_rewriter", "pattern_to_str"]

Pattern = Any


def pattern_to_str(pattern: Pattern) -> str:
    """Render a pattern as an expression: ``mul(x, true_div(y, x))``."""
    if isinstance(pattern, tuple):
        op, *subs = pattern
        head = op.__name__ if isinstance(op, type) else getattr(op, "__name__", None) or str(op)
        return f"{head}({', '.join(pattern_to_str(s) for s in subs)})"
    if isinstance(pattern, Mapping):
        return f"{pattern_to_str(pattern['pattern'])} if {_fn_name(pattern.get('constraint'))}"
    return str(pattern)


def _fn_name(fn: Any) -> str:
    return getattr(fn, "__name__", None) or str(fn)


def _op_matches(op_pattern: Any, op: Op) -> bool:
    if isinstance(op_pattern, type):
        return isinstance(op, op_pattern)
    if isinstance(op_pattern, Op):
        return op == op_pattern
    if callable(op_pattern):  # a predicate on the Op
        return bool(op_pattern(op))
    raise TypeError(f"the head of a pattern must be an Op or an Op class, got {op_pattern!r}")


def _constant_equals(var: Variable, value: Any) -> bool:
    if not isinstance(var, Constant):
        return False
    try:
        data = np.asarray(var.data)
        return bool(data.size > 0 and np.all(data == value))
    except (TypeError, ValueError):
        return False


class PatternNodeRewriter(NodeRewriter):
    """A node rewriter replacing what matches ``in_pattern`` by ``out_pattern``.

    Parameters
    ----------
    in_pattern
        The pattern to match; its head (an Op or Op class) is what the rewriter tracks.
    out_pattern
        The replacement: a pattern variable name, or a tuple of ops and variable names.
    name
        The rewrite's name (handle for ``excluding``); default the rendered identity.
    allow_multiple_clients
        Also match when an inner matched variable has other clients (the rewrite then
        computes it twice). By default such inner variables must have a single client.
    skip_identities_fn
        ``fn(variable) -> variable | None``: a variable to look through (e.g. the input of a
        no-op cast) before matching a sub-pattern.
    """

    def __init__(
        self,
        in_pattern: Pattern,
        out_pattern: Pattern,
        name: str | None = None,
        allow_multiple_clients: bool = False,
        skip_identities_fn: Callable[[Variable], Variable | None] | None = None,
    ) -> None:
        root = in_pattern["pattern"] if isinstance(in_pattern, Mapping) else in_pattern
        if not isinstance(root, tuple) or not root:
            raise TypeError(
                f"the input pattern must be a tuple (op, sub-patterns...), got {in_pattern!r}"
            )
        head = root[0]
        if not (isinstance(head, Op) or (isinstance(head, type) and issubclass(head, Op))):
            raise TypeError(f"the head of an input pattern must be an Op or Op class: {head!r}")
        self.in_pattern = in_pattern
        self.out_pattern = out_pattern
        self.allow_multiple_clients = allow_multiple_clients
        self.skip_identities_fn = skip_identities_fn
        self._head = head
        self.identity = f"{pattern_to_str(in_pattern)} -> {pattern_to_str(out_pattern)}"
        self.name = name or self.identity
        self.__doc__ = f"``{self.identity}``"
        self._location = caller_location()

    def tracks(self) -> list[type[Op] | Op]:
        return [self._head]

    # -- matching
    def match(self, var: Variable, fgraph: Any = None) -> dict[str, Variable] | None:
        """The bindings of the pattern variables if ``var`` matches ``in_pattern``, else None."""
        bindings: dict[str, Variable] = {}
        if self._match(self.in_pattern, var, bindings, fgraph, root=True):
            return bindings
        return None

    def _match(
        self, pattern: Pattern, var: Variable, u: dict[str, Variable], fgraph: Any, root: bool
    ) -> bool:
        if isinstance(pattern, Mapping):
            if not self._match(pattern["pattern"], var, u, fgraph, root):
                return False
            constraint = pattern.get("constraint")
            return constraint is None or bool(constraint(var))
        if isinstance(pattern, str):
            bound = u.get(pattern)
            if bound is None:
                u[pattern] = var
                return True
            return bound is var or (isinstance(bound, Constant) and bound.equals(var))
        if isinstance(pattern, tuple):
            if self.skip_identities_fn is not None and not root:
                inner = self.skip_identities_fn(var)
                while inner is not None and inner is not var:
                    var = inner
                    inner = self.skip_identities_fn(var)
            node = var.owner
            if node is None or len(node.inputs) != len(pattern) - 1:
                return False
            if not _op_matches(pattern[0], node.op):
                return False
            if not root and not self.allow_multiple_clients and self._shared(var, fgraph):
                return False
            return all(
                self._match(sub, inp, u, fgraph, False)
                for sub, inp in zip(pattern[1:], node.inputs)
            )
        if isinstance(pattern, Variable):
            return var is pattern or (isinstance(pattern, Constant) and pattern.equals(var))
        if isinstance(pattern, Number | np.ndarray | np.generic):
            return _constant_equals(var, pattern)
        raise TypeError(f"unsupported pattern element {pattern!r} in {self.name}")

    @staticmethod
    def _shared(var: Variable, fgraph: Any) -> bool:
        clients = None
        if fgraph is not None and hasattr(fgraph, "clients"):
            try:
                clients = fgraph.clients[var]
            except (KeyError, TypeError):
                clients = None
        if clients is None:
            clients = getattr(var, "clients", None)
        return clients is not None and len(clients) > 1

    # -- building
    def _build(self, pattern: Pattern, u: dict[str, Variable]) -> Any:
        if isinstance(pattern, str):
            return u[pattern]
        if isinstance(pattern, tuple):
            op, *subs = pattern
            return op(*(self._build(s, u) for s in subs))
        return pattern

    def transform(self, fgraph: Any, node: Apply) -> list[Variable] | None:
        if len(node.outputs) != 1:
            return None
        (out,) = node.outputs
        bindings = self.match(out, fgraph)
        if bindings is None:
            return None
        new = self._build(self.out_pattern, bindings)
        if not isinstance(new, Variable):
            new = out.type.make_constant(new)
        if new.type != out.type:
            converted = out.type.convert_variable(new)
            if converted is None:
                return None  # e.g. mul(x, ones) -> x where x broadcasts: not an identity here
            new = converted
        return [new]

    def __str__(self) -> str:
        return self.name or self.identity


def pattern_rewriter(
    name: str,
    in_pattern: Pattern,
    out_pattern: Pattern,
    allow_multiple_clients: bool = False,
    skip_identities_fn: Callable[[Variable], Variable | None] | None = None,
) -> PatternNodeRewriter:
    """A named :class:`PatternNodeRewriter`: ``pattern_rewriter("local_neg_neg",
    (neg, (neg, "x")), "x")``. Its location is the line calling this function."""
    return PatternNodeRewriter(
        in_pattern,
        out_pattern,
        name=name,
        allow_multiple_clients=allow_multiple_clients,
        skip_identities_fn=skip_identities_fn,
    )


def PatternSub(
    in_pattern: Pattern,
    out_pattern: Pattern,
    allow_multiple_clients: bool = False,
    skip_identities_fn: Callable[[Variable], Variable | None] | None = None,
    name: str | None = None,
    **_theano_only: Any,
) -> PatternNodeRewriter:
    """Theano 1.0's ``PatternSub`` (its argument order); builds a :class:`PatternNodeRewriter`.

    Theano-only arguments (``pdb``, ``tracks``, ``get_nodes``, ``values_eq_approx``) are
    accepted and ignored.
    """
    return PatternNodeRewriter(
        in_pattern,
        out_pattern,
        name=name,
        allow_multiple_clients=allow_multiple_clients,
        skip_identities_fn=skip_identities_fn,
    )
