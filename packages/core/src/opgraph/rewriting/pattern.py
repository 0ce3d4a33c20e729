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
        head = root[0]
        if tracks is not None:
            self._tracks = list(tracks)
            if not self._tracks or not all(_is_op_or_class(t) for t in self._tracks):
                raise TypeError(f"tracks must list Ops or Op classes, got {tracks!r}")
            if not (_is_op_or_class(head) or callable(head)):
                raise TypeError(
                    f"the head of an input pattern must be an Op, Op class or predicate: {head!r}"
                )
        elif _is_op_or_class(head):
            self._tracks = [head]
        else:
            raise TypeError(
                f"the head of an input pattern must be an Op or Op class (or give tracks): {head!r}"
            )
        self.in_pattern = in_pattern
        self.out_pattern = out_pattern
        self.allow_multiple_clients = allow_multiple_clients
        self.skip_identities_fn = skip_identities_fn
        self.retype = retype
        self.identity = f"{pattern_to_str(in_pattern)} -> {pattern_to_str(out_pattern)}"
        self.name = name or self.identity
        self.__doc__ = f"``{self.identity}``"
        self._location = caller_location()

    def tracks(self) -> list[type[Op] | Op]:
        return self._tracks

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
            if node is None:
                return False
            ins = node.inputs
            rest = _rest_name(pattern[-1])
            n = len(pattern) - 1 if rest is None else len(pattern) - 2
            if len(ins) < n or (rest is None and len(ins) > n):
                return False
            if not _op_matches(pattern[0], node.op):
                return False
            if not root and not self.allow_multiple_clients and self._shared(var, fgraph):
                return False
            if rest is not None:
                bound_rest = u.get(rest)
                if bound_rest is None:
                    u[rest] = tuple(ins[n:])  # type: ignore[assignment]
                elif list(bound_rest) != list(ins[n:]):  # type: ignore[arg-type]
                    return False
            return all(
                self._match(sub, inp, u, fgraph, False) for sub, inp in zip(pattern[1 : n + 1], ins)
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
        bindings = self.match(out, fgraph)
        if bindings is None:
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
