"""Walking graphs: ancestors, inputs, the nodes between two sets of variables, toposort.

Every walker here keeps an explicit stack or queue: no recursion over the graph's depth, so a
chain of any length works under Python's default recursion limit. Orders are deterministic:
they depend only on the graph's structure (input order), never on ``id`` or hashing.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence

from opgraph.graph.basic import Apply, Variable

__all__ = [
    "ancestors",
    "applys_between",
    "general_toposort",
    "graph_inputs",
    "io_toposort",
    "orphans_between",
    "variables_between",
    "walk",
]


def walk(
    nodes: Iterable, expand: Callable[[object], Iterable | None], bfs: bool = True
) -> Iterator:
    """Yield each node reachable from ``nodes`` once, expanding with ``expand(node)``.

    Breadth-first, or (``bfs=False``) depth-first pre-order; either way the roots and each
    node's children are visited in the order given.
    """
    queue = deque(nodes) if bfs else deque(reversed(list(nodes)))
    seen: set[int] = set()
    pop = queue.popleft if bfs else queue.pop
    while queue:
        node = pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        children = expand(node)
        if children:
            if bfs:
                queue.extend(children)
            else:
                queue.extend(reversed(list(children)))


def ancestors(
    graphs: Iterable[Variable], blockers: Collection[Variable] | None = None
) -> Iterator[Variable]:
    """Yield every variable ``graphs`` depend on (themselves included), stopping at ``blockers``."""
    blocked = {id(b) for b in blockers or ()}

    def expand(var: Variable) -> list[Variable] | None:
        if var.owner is not None and id(var) not in blocked:
            return var.owner.inputs
        return None

    yield from walk(graphs, expand, bfs=False)


def graph_inputs(
    graphs: Iterable[Variable], blockers: Collection[Variable] | None = None
) -> list[Variable]:
    """Return the variables without owner (or in ``blockers``) that ``graphs`` depend on."""
    blocked = {id(b) for b in blockers or ()}
    return [v for v in ancestors(graphs, blockers) if v.owner is None or id(v) in blocked]


def variables_between(ins: Collection[Variable], outs: Iterable[Variable]) -> list[Variable]:
    """Return the variables on paths from ``ins`` to ``outs`` (all ancestors of ``outs`` up to
    and including ``ins``)."""
    return list(ancestors(outs, ins))


def orphans_between(ins: Collection[Variable], outs: Iterable[Variable]) -> list[Variable]:
    """Return the ownerless variables ``outs`` need that are not in ``ins`` (e.g. constants)."""
    in_ids = {id(v) for v in ins}
    return [v for v in ancestors(outs, ins) if v.owner is None and id(v) not in in_ids]


def applys_between(ins: Collection[Variable], outs: Iterable[Variable]) -> list[Apply]:
    """Return the Apply nodes computing ``outs`` from ``ins`` (unordered but deterministic)."""
    in_ids = {id(v) for v in ins}
    seen: set[int] = set()
    result = []
    for v in ancestors(outs, ins):
        if v.owner is not None and id(v) not in in_ids and id(v.owner) not in seen:
            seen.add(id(v.owner))
            result.append(v.owner)
    return result


def general_toposort(
    outputs: Iterable,
    deps: Callable[[object], Sequence | None],
    compute_deps_cache: Callable[[object], Sequence | None] | None = None,
) -> list:
    """Return every node reachable from ``outputs`` by ``deps``, each after its dependencies.

    Kahn's algorithm after an iterative discovery pass. Among ready nodes the one discovered
    first in a depth-first walk of ``deps`` (in order) goes first, so the order is the
    deterministic post-order a recursive implementation would give. Raises ``ValueError``
    naming a node on the cycle if the graph has one.
    """
    deps_of = compute_deps_cache or deps
    order: list = []
    # Iterative post-order DFS; a node "on the stack" seen again is a cycle.
    state: dict[int, int] = {}  # 1 = in progress, 2 = done
    for root in outputs:
        if state.get(id(root)) == 2:
            continue
        stack: list[tuple[object, Iterator]] = [(root, iter(deps_of(root) or ()))]
        state[id(root)] = 1
        while stack:
            node, it = stack[-1]
            for child in it:
                st = state.get(id(child))
                if st is None:
                    state[id(child)] = 1
                    stack.append((child, iter(deps_of(child) or ())))
                    break
                if st == 1:
                    raise ValueError(
                        f"the graph contains a cycle: {child} depends on itself "
                        f"(through {node}). A graph must be acyclic; check the last "
                        "replace() or the Apply nodes you built by hand."
                    )
            else:
                stack.pop()
                state[id(node)] = 2
                order.append(node)
    return order


def io_toposort(
    inputs: Iterable[Variable],
    outputs: Iterable[Variable],
    orderings: dict[Apply, Sequence[Apply]] | None = None,
) -> list[Apply]:
    """Return the Apply nodes between ``inputs`` and ``outputs`` in a topological order.

    ``orderings`` adds extra constraints ``{node: [nodes that must run before it]}`` (the
    DestroyHandler uses it to run readers of a buffer before the node that overwrites it).

    Without orderings the order is a depth-first post-order over the nodes that computes a
    node's last input first, as Theano's stack did; it walks the nodes alone, which halves
    the work on the big graphs a compilation sorts again and again. With orderings it is
    Theano's general order (:func:`_ordered_toposort`). Either way a compiled graph prints
    with the toposort indices Theano printed.
    """
    blocked = {id(v) for v in inputs}
    if orderings:
        return _ordered_toposort(blocked, list(outputs), orderings)
    order: list[Apply] = []
    state: dict[Apply, bool] = {}  # False: in progress, True: done
    get_state = state.get
    for out in outputs:
        root = out.owner
        if root is None or id(out) in blocked or get_state(root) is not None:
            continue
        state[root] = False
        stack: list[tuple[Apply, Iterator]] = [(root, _node_deps(root, blocked))]
        push = stack.append
        while stack:
            node, it = stack[-1]
            for child in it:
                st = get_state(child)
                if st is None:
                    state[child] = False
                    push((child, _node_deps(child, blocked)))
                    break
                if st is False:
                    raise ValueError(
                        f"the graph contains a cycle: {child} depends on itself "
                        f"(through {node}). A graph must be acyclic; check the last "
                        "replace() or the Apply nodes you built by hand."
                    )
            else:
                stack.pop()
                state[node] = True
                order.append(node)
    return order


def _ordered_toposort(
    blocked: set[int], outputs: list[Variable], orderings: dict[Apply, Sequence[Apply]]
) -> list[Apply]:
    """Theano's order for a graph with orderings: Kahn's algorithm over variables and nodes.

    A depth-first discovery from the outputs (the last output first, each object's
    dependencies pushed in order: a variable's owner; a node's inputs, then its orderings)
    lists every object and, for each, the objects that depend on it. The sort then starts
    from the objects with no dependency, in discovery order, and appends an object once its
    last dependency is placed (a queue, first in first out).
    """
    deps_of: dict[int, list] = {}
    clients: dict[int, list] = {}
    reachable: list = []
    stack: list = list(outputs)
    while stack:
        obj = stack.pop()
        if id(obj) in deps_of:
            continue
        if isinstance(obj, Apply):
            deps = [*obj.inputs, *orderings.get(obj, ())]
        elif obj.owner is not None and id(obj) not in blocked:
            deps = [obj.owner]
        else:
            deps = []
        deps_of[id(obj)] = deps
        reachable.append(obj)
        for dep in deps:
            clients.setdefault(id(dep), []).append(obj)
        stack.extend(deps)
    ready = deque(obj for obj in reachable if not deps_of[id(obj)])
    placed: set[int] = set()
    order: list[Apply] = []
    while ready:
        obj = ready.popleft()
        if id(obj) in placed:
            continue
        placed.add(id(obj))
        if isinstance(obj, Apply):
            order.append(obj)
        for client in clients.get(id(obj), ()):
            left = [d for d in deps_of[id(client)] if d is not obj]
            deps_of[id(client)] = left
            if not left:
                ready.append(client)
    if len(placed) != len(reachable):
        stuck = next(obj for obj in reachable if id(obj) not in placed and isinstance(obj, Apply))
        raise ValueError(
            f"the graph contains a cycle: {stuck} depends on itself (through its inputs or "
            "the features' orderings). A graph must be acyclic; check the last replace() or "
            "the Apply nodes you built by hand."
        )
    return order


def _node_deps(node: Apply, blocked: set[int]) -> Iterator[Apply]:
    """The nodes ``node`` depends on, its last input's first.

    Last input first is Theano's order (its ``io_toposort`` kept a stack on which a node's
    inputs were pushed in order, so the last was computed first): ``x / cast(n)`` computes
    ``cast(n)`` at index 0, and a compiled graph prints with Theano's toposort indices.
    """
    return iter(
        [
            inp.owner
            for inp in reversed(node.inputs)
            if inp.owner is not None and id(inp) not in blocked
        ]
    )
