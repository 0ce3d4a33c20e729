"""Theano's ``theano.gof.graph`` names for the graph utilities."""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from opgraph.graph.basic import Apply, Constant, Node, Variable, as_variable
from opgraph.graph.clone import clone, clone_get_equiv
from opgraph.graph.traversal import (
    ancestors,
    applys_between,
    general_toposort,
    graph_inputs,
    io_toposort,
    orphans_between,
    variables_between,
)

#: Theano 1.0 spelling: ``theano.gof.graph.inputs(outputs)``.
inputs = graph_inputs


def variables(i, o):  # type: ignore[no-untyped-def]
    """The variables between inputs ``i`` and outputs ``o`` (Theano's ``graph.variables``)."""
    return variables_between(i, o)


def ops(i, o):  # type: ignore[no-untyped-def]
    """The Apply nodes between inputs ``i`` and outputs ``o`` (Theano's ``graph.ops``)."""
    return applys_between(i, o)


def orphans(i, o):  # type: ignore[no-untyped-def]
    """Ownerless variables needed by ``o`` that are not in ``i`` (Theano's ``graph.orphans``)."""
    return orphans_between(i, o)


def stack_search(
    start: deque[Any],
    expand: Callable[[Any], Sequence[Any] | None],
    mode: str = "bfs",
    build_inv: bool = False,
) -> Any:
    """Visit every element reachable from the deque ``start`` through ``expand(x)`` (a list
    of neighbours or None), breadth-first (``'bfs'``) or depth-first (``'dfs'``); return the
    elements in visiting order, and with ``build_inv`` also ``{neighbour: [elements that
    expanded to it]}``. ``start`` is consumed."""
    if mode not in ("bfs", "dfs"):
        raise ValueError("mode should be bfs or dfs", mode)
    seen: set[int] = set()
    visited: list[Any] = []
    pop = start.popleft if mode == "bfs" else start.pop
    expand_inv: dict[Any, list[Any]] = {}
    while start:
        item = pop()
        if id(item) in seen:
            continue
        visited.append(item)
        seen.add(id(item))
        nexts = expand(item)
        if nexts:
            if build_inv:
                for r in nexts:
                    expand_inv.setdefault(r, []).append(item)
            start.extend(nexts)
    if build_inv:
        return visited, expand_inv
    return visited


def variables_and_orphans(i: Sequence[Variable], o: Sequence[Variable]) -> tuple[list, list]:
    """``(variables, orphans)`` of the graph between ``i`` and ``o``: every variable reached
    from ``o`` without going above ``i`` (depth-first order), and those without an owner
    that are not in ``i``."""

    def expand(r: Variable) -> list[Variable] | None:
        if r.owner is not None and r not in i:
            nxt = list(r.owner.inputs) + list(r.owner.outputs)
            nxt.reverse()
            return nxt
        return None

    found = stack_search(deque(o), expand, "dfs")
    return found, [r for r in found if r.owner is None and r not in i]


def io_connection_pattern(inputs: Sequence[Variable], outputs: Sequence[Variable]) -> list:
    """``pattern[i][j]``: True if output ``j`` depends on input ``i`` through the graph,
    following each Op's ``connection_pattern`` where it has one."""
    n = len(inputs)
    by_var: dict[Any, list[bool]] = {
        inp: [k == j for j in range(n)] for k, inp in enumerate(inputs)
    }
    for node in io_toposort(list(inputs), list(outputs)):
        get_pattern = getattr(node.op, "connection_pattern", None)
        op_pattern = (
            get_pattern(node)
            if get_pattern is not None
            else [[True] * len(node.outputs)] * len(node.inputs)
        )
        for out_idx, out in enumerate(node.outputs):
            pattern = [False] * n
            for inp_idx, inp in enumerate(node.inputs):
                if inp in by_var and op_pattern[inp_idx][out_idx]:
                    pattern = [a or b for a, b in zip(pattern, by_var[inp], strict=True)]
            by_var[out] = pattern
    result: list[list[bool]] = [[] for _ in inputs]
    for out in outputs:
        pattern = by_var.get(out, [False] * n)
        for k in range(n):
            result[k].append(pattern[k])
    return result


def is_same_graph(var1: Variable, var2: Variable, givens: Any = None, debug: bool = False) -> bool:
    """True if ``var1`` and ``var2`` compute the same thing: same Ops (by equality), wired
    the same way, from the same inputs, with equal constants. ``givens`` ``{x: y}`` says
    that ``x`` (in one graph) stands for ``y`` (in the other)."""
    mapping: dict[Any, Any] = dict(givens or {})
    memo: dict[tuple[int, int], bool] = {}

    def sub(v: Variable) -> Variable:
        return mapping.get(v, v)

    def same(a: Variable, b: Variable) -> bool:
        a, b = sub(a), sub(b)
        if a is b:
            return True
        key = (id(a), id(b))
        if key in memo:
            return memo[key]
        if isinstance(a, Constant) or isinstance(b, Constant):
            ok = isinstance(a, Constant) and isinstance(b, Constant) and a.equals(b)
        elif a.owner is None or b.owner is None:
            ok = False
        else:
            na, nb = a.owner, b.owner
            ok = (
                na.op == nb.op
                and na.outputs.index(a) == nb.outputs.index(b)
                and len(na.inputs) == len(nb.inputs)
                and all(same(x, y) for x, y in zip(na.inputs, nb.inputs, strict=True))
            )
        memo[key] = ok
        return ok

    return same(var1, var2)


def default_leaf_formatter(r: Variable) -> str:
    """How :func:`as_string` prints a leaf: ``str(r)``."""
    return str(r)


def default_node_formatter(node: Apply, argstrings: Sequence[str]) -> str:
    """How :func:`as_string` prints a node: ``op(arg, ...)``."""
    return f"{node.op}({', '.join(argstrings)})"


def as_string(
    i: Sequence[Variable],
    o: Sequence[Variable],
    leaf_formatter: Callable[[Variable], str] = default_leaf_formatter,
    node_formatter: Callable[[Apply, Sequence[str]], str] = default_node_formatter,
) -> list[str]:
    """One string per output of ``o`` describing its graph down to ``i`` (Theano's format:
    a node used more than once is written once as ``*k -> op(...)`` and then as ``*k``)."""
    iset = set(i)
    orph = orphans(iset, o)
    multi: list[Any] = []
    seen: set[Any] = set()
    for out in o:
        node = out.owner
        if node in seen and node not in multi:
            multi.append(node)
        seen.add(node)
    for node in ops(iset, o):
        for inp in node.inputs:
            owner = inp.owner
            if inp in iset or inp in orph or owner is None:
                continue
            if owner in seen:
                if owner not in multi:
                    multi.append(owner)
            else:
                seen.add(owner)
    done: set[Any] = set()

    def describe(r: Variable) -> str:
        if r.owner is None or r in iset or r in orph:
            return leaf_formatter(r)
        node = r.owner
        idxs = "" if len(node.outputs) == 1 else f"::{node.outputs.index(r)}"
        if node in done:
            return f"*{multi.index(node) + 1}{idxs}"
        done.add(node)
        text = node_formatter(node, [describe(inp) for inp in node.inputs])
        return f"*{multi.index(node) + 1} -> {text}" if node in multi else text

    return [describe(out) for out in o]


def op_as_string(
    i: Sequence[Variable],
    op: Apply,
    leaf_formatter: Callable[[Variable], str] = default_leaf_formatter,
    node_formatter: Callable[[Apply, Sequence[str]], str] = default_node_formatter,
) -> str:
    """The string of Apply node ``op`` with its inputs described down to ``i``."""
    return node_formatter(op, as_string(i, op.inputs, leaf_formatter, node_formatter))


def view_roots(r: Variable) -> list[Variable]:
    """The variables ``r`` is a view of, following ``view_map`` up (``[r]`` if none)."""
    owner = r.owner
    if owner is None:
        return [r]
    view_map = getattr(owner.op, "view_map", None) or {}
    out_idx = owner.outputs.index(r)
    if out_idx not in view_map:
        return [r]
    roots: list[Variable] = []
    for k in view_map[out_idx]:
        roots += view_roots(owner.inputs[k])
    return roots


def list_of_nodes(inputs: Sequence[Variable], outputs: Sequence[Variable]) -> list[Apply]:
    """The Apply nodes computing ``outputs`` from ``inputs`` (outputs first, breadth-first)."""
    return stack_search(
        deque([o.owner for o in outputs]),
        lambda node: [
            inp.owner
            for inp in node.inputs
            if inp.owner is not None and not any(i in inp.owner.outputs for i in inputs)
        ],
    )


def is_in_ancestors(l_node: Apply, f_node: Apply) -> bool:
    """True if Apply node ``f_node`` is ``l_node`` or one of its ancestors."""
    todo = [l_node]
    seen: set[int] = set()
    while todo:
        cur = todo.pop()
        if cur is f_node:
            return True
        if id(cur) in seen:
            continue
        seen.add(id(cur))
        todo.extend(i.owner for i in cur.inputs if i.owner is not None)
    return False


@contextlib.contextmanager
def nodes_constructed() -> Iterator[list[Variable]]:
    """Within the ``with`` block, collect the variables created (Theano's name: they are the
    outputs of the nodes built, and the new inputs and constants)::

        with nodes_constructed() as new:
            y = x * 2
        # new holds the variables the block created
    """
    created: list[Variable] = []
    original = Variable.__init__

    def observing_init(self: Variable, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        created.append(self)

    Variable.__init__ = observing_init  # type: ignore[method-assign]
    try:
        yield created
    finally:
        Variable.__init__ = original  # type: ignore[method-assign]


__all__ = [
    "Apply",
    "Constant",
    "Node",
    "Variable",
    "ancestors",
    "applys_between",
    "as_string",
    "as_variable",
    "clone",
    "clone_get_equiv",
    "default_leaf_formatter",
    "default_node_formatter",
    "general_toposort",
    "graph_inputs",
    "inputs",
    "io_connection_pattern",
    "io_toposort",
    "is_in_ancestors",
    "is_same_graph",
    "list_of_nodes",
    "nodes_constructed",
    "op_as_string",
    "ops",
    "orphans",
    "orphans_between",
    "stack_search",
    "variables",
    "variables_and_orphans",
    "variables_between",
    "view_roots",
]
