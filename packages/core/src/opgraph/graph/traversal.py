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

    The order is the one :func:`general_toposort` gives over the bipartite graph (variables
    and nodes), restricted to the nodes; it is computed by walking the nodes alone, which
    halves the work on the big graphs a compilation sorts again and again.
    """
    blocked = {id(v) for v in inputs}
    orderings = orderings or None
    order: list[Apply] = []
    state: dict[Apply, bool] = {}  # False: in progress, True: done
    get_state = state.get
    for out in outputs:
        root = out.owner
        if root is None or id(out) in blocked or get_state(root) is not None:
            continue
        state[root] = False
        stack: list[tuple[Apply, Iterator]] = [(root, _node_deps(root, blocked, orderings))]
        push = stack.append
        while stack:
            node, it = stack[-1]
            for child in it:
                st = get_state(child)
                if st is None:
                    state[child] = False
                    push((child, _node_deps(child, blocked, orderings)))
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


def _node_deps(
    node: Apply, blocked: set[int], orderings: dict[Apply, Sequence[Apply]] | None
) -> Iterator[Apply]:
    """The nodes ``node`` depends on, in input order, then its extra orderings."""
    deps = [inp.owner for inp in node.inputs if inp.owner is not None and id(inp) not in blocked]
    if orderings is not None:
        extra = orderings.get(node)
        if extra:
            deps.extend(extra)
    return iter(deps)
