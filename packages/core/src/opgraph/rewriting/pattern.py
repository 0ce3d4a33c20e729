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
- ``{"pattern": p, "constraint": fn}``: matches ``p`` and requires ``fn(variable)`` to be true;
- ``"*name"``, last in a tuple: the remaining inputs, none or more (``(alloc, "v", "*shape")``).

The output pattern uses the same tuples and strings; ``(op, ...)`` calls ``op`` (or any
function) on the built inputs, so numbers are converted by the Op's ``make_node``;
``"*name"`` passes the inputs it bound. The replacement is given the replaced variable's type
by ``retype`` (default: ``convert_variable``, which accepts a more broadcastable one;
:func:`exact_type` accepts only the same type). Matching recurses over the pattern (a few
levels), never over the graph.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from numbers import Number
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.op import Op
from opgraph.rewriting.basic import NodeRewriter, caller_location

__all__ = [
    "PatternNodeRewriter",
    "PatternSub",
    "exact_type",
    "pattern_rewriter",
    "pattern_to_str",
]

Pattern = Any
Retype = Callable[[Variable, Variable], Variable | None]
Matcher = Callable[[Variable, dict[str, Any], Any], bool]


def exact_type(new: Variable, old: Variable) -> Variable | None:
    """A ``retype`` accepting the replacement only if it has exactly ``old``'s type."""
    return new if new.type == old.type else None


def _rest_name(pattern: Any) -> str | None:
    """``name`` for a rest variable ``"*name"``, else None."""
    if type(pattern) is str and pattern[:1] == "*":
        return pattern[1:]
    return None


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


def _is_op_or_class(x: Any) -> bool:
    return isinstance(x, Op) or (isinstance(x, type) and issubclass(x, Op))


def _op_matcher(op_pattern: Any) -> Callable[[Op], bool]:
    if isinstance(op_pattern, type):
        return lambda op: isinstance(op, op_pattern)
    if isinstance(op_pattern, Op):
        return lambda op: op is op_pattern or op == op_pattern
    if callable(op_pattern):  # a predicate on the Op
        return lambda op: bool(op_pattern(op))
    raise TypeError(f"the head of a pattern must be an Op or an Op class, got {op_pattern!r}")


def _variable_matcher(name: str) -> Matcher:
    """A pattern variable: binds anything, then only the same variable (or an equal constant)."""

    def match_variable(var: Variable, u: dict[str, Any], fgraph: Any) -> bool:
        bound = u.get(name)
        if bound is None:
            u[name] = var
            return True
        return bound is var or (isinstance(bound, Constant) and bound.equals(var))

    return match_variable


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
    tracks
        The Ops (instances or classes) the rewriter applies to, instead of the head of
        ``in_pattern``; the head may then be a predicate ``f(op)`` (e.g. "is a cast", with
        the casts to every dtype tracked).
    retype
        ``retype(new, old) -> variable | None``: the replacement given ``old``'s type, or
        None to refuse (e.g. :func:`exact_type`). Default: ``old.type.convert_variable``.
    """

    def __init__(
        self,
        in_pattern: Pattern,
        out_pattern: Pattern,
        name: str | None = None,
        allow_multiple_clients: bool = False,
        skip_identities_fn: Callable[[Variable], Variable | None] | None = None,
        tracks: Sequence[type[Op] | Op] | None = None,
        retype: Retype | None = None,
    ) -> None:
        root = in_pattern["pattern"] if isinstance(in_pattern, Mapping) else in_pattern
        if not isinstance(root, tuple) or not root:
            raise TypeError(
                f"the input pattern must be a tuple (op, sub-patterns...), got {in_pattern!r}"
            )
        self._tracks = [root[0]] if tracks is None else list(tracks)
        if not self._tracks or not all(_is_op_or_class(t) for t in self._tracks):
            what = "the head of an input pattern (or give tracks)" if tracks is None else "tracks"
            raise TypeError(f"{what} must be Ops or Op classes: {self._tracks!r}")
        self.in_pattern = in_pattern
        self.out_pattern = out_pattern
        self.allow_multiple_clients = allow_multiple_clients
        self.skip_identities_fn = skip_identities_fn
        self.retype = retype
        self.identity = f"{pattern_to_str(in_pattern)} -> {pattern_to_str(out_pattern)}"
        self.name = name or self.identity
        self._matcher = self._compile(in_pattern, root=True)
        self.__doc__ = f"``{self.identity}``"
        self._location = caller_location()

    def tracks(self) -> list[type[Op] | Op]:
        return self._tracks

    # -- matching
    def match(self, var: Variable, fgraph: Any = None) -> dict[str, Variable] | None:
        """The bindings of the pattern variables if ``var`` matches ``in_pattern``, else None."""
        bindings: dict[str, Variable] = {}
        if self._matcher(var, bindings, fgraph):
            return bindings
        return None

    def _compile(self, pattern: Pattern, root: bool) -> Matcher:
        """``pattern`` as a function ``m(var, bindings, fgraph) -> bool`` (made once: the
        pattern's elements are told apart here, not at each node)."""
        if isinstance(pattern, Mapping):
            constraint = pattern.get("constraint")
            if isinstance(pattern["pattern"], tuple):
                return self._node_matcher(pattern["pattern"], root, constraint)
            inner = self._compile(pattern["pattern"], root)
            if constraint is None:
                return inner
            return lambda var, u, fg: inner(var, u, fg) and bool(constraint(var))
        if isinstance(pattern, str):
            return _variable_matcher(pattern)
        if isinstance(pattern, tuple):
            return self._node_matcher(pattern, root)
        if isinstance(pattern, Variable):
            return lambda var, u, fg: (
                var is pattern or (isinstance(pattern, Constant) and pattern.equals(var))
            )
        if isinstance(pattern, Number | np.ndarray | np.generic):
            return lambda var, u, fg: _constant_equals(var, pattern)
        raise TypeError(f"unsupported pattern element {pattern!r} in {self.name}")

    def _node_matcher(
        self, pattern: tuple, root: bool, constraint: Callable[[Variable], Any] | None = None
    ) -> Matcher:
        head, rest = pattern[0], _rest_name(pattern[-1])
        n = len(pattern) - 1 if rest is None else len(pattern) - 2
        # Pattern variables are matched inline (by name), then the nested patterns.
        names = [(i, sub) for i, sub in enumerate(pattern[1 : n + 1]) if isinstance(sub, str)]
        nested = [
            (i, self._compile(sub, False))
            for i, sub in enumerate(pattern[1 : n + 1])
            if not isinstance(sub, str)
        ]
        same_op = head if isinstance(head, Op) else None  # the usual case: ``op is head``
        op_ok = _op_matcher(head)
        skip = None if root else self.skip_identities_fn
        single_client = not root and not self.allow_multiple_clients
        shared = self._shared

        def match_node(matched: Variable, u: dict[str, Any], fgraph: Any) -> bool:
            var = matched
            if skip is not None:
                inner = skip(var)
                while inner is not None and inner is not var:
                    var = inner
                    inner = skip(var)
            node = var.owner
            if node is None:
                return False
            ins = node.inputs
            if len(ins) != n and (rest is None or len(ins) < n):
                return False
            op = node.op
            if op is not same_op and not op_ok(op):
                return False
            if single_client and shared(var, fgraph):
                return False
            for i, name in names:
                inp = ins[i]
                bound = u.get(name)
                if bound is None:
                    u[name] = inp
                elif bound is not inp and not (isinstance(bound, Constant) and bound.equals(inp)):
                    return False
            if rest is not None:
                bound = u.get(rest)
                if bound is None:
                    u[rest] = tuple(ins[n:])
                elif list(bound) != ins[n:]:
                    return False
            for i, sub in nested:
                if not sub(ins[i], u, fgraph):
                    return False
            return constraint is None or bool(constraint(matched))

        return match_node

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
            args: list[Any] = []
            for s in subs:
                rest = _rest_name(s)
                if rest is None:
                    args.append(self._build(s, u))
                else:
                    args.extend(u[rest])  # type: ignore[arg-type]
            return op(*args)
        return pattern

    def transform(self, fgraph: Any, node: Apply) -> list[Variable] | None:
        if len(node.outputs) != 1:
            return None
        (out,) = node.outputs
        bindings: dict[str, Any] = {}
        if not self._matcher(out, bindings, fgraph):
            return None
        new = self._build(self.out_pattern, bindings)
        if not isinstance(new, Variable):
            new = out.type.make_constant(new)
        if self.retype is not None:
            new = self.retype(new, out)
            return None if new is None else [new]
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
    *,
    tracks: Sequence[type[Op] | Op] | None = None,
    retype: Retype | None = None,
) -> PatternNodeRewriter:
    """A named :class:`PatternNodeRewriter`: ``pattern_rewriter("local_neg_neg",
    (neg, (neg, "x")), "x")``. Its location is the line calling this function."""
    return PatternNodeRewriter(
        in_pattern,
        out_pattern,
        name=name,
        allow_multiple_clients=allow_multiple_clients,
        skip_identities_fn=skip_identities_fn,
        tracks=tracks,
        retype=retype,
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
