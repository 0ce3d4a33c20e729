"""Elementwise fusion: trees of Elemwise nodes become one ``Elemwise{Composite{...}}``.

``exp(-x**2) * sin(x) + 0.5 * x`` is six Elemwise nodes, six loops over the data and five
temporary arrays; fused, it is one node whose scalar op is a small scalar graph, printed as
Theano prints it: ``Elemwise{Composite{((exp((-sqr(i0))) * sin(i0)) + (0.5 * i0))}}``. A
compiled backend turns that Composite into a single loop.

How groups are chosen (:class:`FusionRewriter`):

- the graph is visited from the outputs up; an Elemwise node not yet in a group starts one,
  which then grows towards the inputs, always taking the candidate latest in topological
  order, so that every client of a candidate has been decided before the candidate;
- a node joins only if every client of its output is already in the group (an intermediate
  used outside the group is a fusion boundary: fusing it would compute it twice), its output
  has the group's broadcastable pattern (so nothing computed on a smaller array is
  recomputed per element of a larger one), and the group stays within ``max_inputs``
  distinct inputs and ``max_nodes`` nodes (a longer chain becomes several fused nodes);
- only plain ``Elemwise`` nodes with one output that work out of place are fused (fusion
  runs before the in-place stage; subclasses of Elemwise keep their own semantics);
- constants stay inputs of the fused node, as in Theano (``x * 2 + 1`` prints as
  ``Elemwise{Composite{(i0 + (i1 * i2))}}`` over ``TensorConstant{(1,) of 1.0}``,
  ``TensorConstant{(1,) of 2.0}`` and ``x``); a one-value constant broadcast by a DimShuffle
  becomes one constant of the broadcast shape. Composites that differ only in their
  constants are then one Op, and a backend compiles one kernel for them (backend-c reads an
  input broadcast in every dimension once per call, before its loop);
- the inputs are ordered as Theano's fusion ordered them: the group read from its root, left
  to right (:func:`_inputs_in_theano_order`).

Each node is visited a bounded number of times and no walk recurses, so the pass is
``O(N log N)`` on any graph (an N-op chain included).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

import numpy as np

import opgraph.scalar.basic as ps
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.features import InconsistencyError
from opgraph.rewriting import GraphRewriter, apply_replacements
from opgraph.scalar.type import get_scalar_type
from opgraph.tensor.basic import constant
from opgraph.tensor.elemwise import DimShuffle, Elemwise
from opgraph_optimizers.registry import rewrites

__all__ = [
    "DEFAULT_MAX_INPUTS",
    "DEFAULT_MAX_NODES",
    "FusionRewriter",
    "fusion_rewriter",
]

#: The default bound on the number of inputs of a fused node.
DEFAULT_MAX_INPUTS = 32
#: The default bound on the number of Elemwise nodes fused into one (keeps each Composite,
#: its printed name and its generated code small; a longer chain becomes several nodes).
DEFAULT_MAX_NODES = 256


def _fusable(node: Apply) -> bool:
    """An Elemwise node fusion may absorb: one output, not in place."""
    op = node.op
    return type(op) is Elemwise and len(node.outputs) == 1 and not op.destroy_map


def _constant_source(var: Variable) -> Constant | None:
    """The one-element tensor Constant that ``var`` is, or broadcasts by DimShuffles."""
    if not all(var.type.broadcastable):  # type: ignore[attr-defined]
        return None
    while var.owner is not None and isinstance(var.owner.op, DimShuffle):
        var = var.owner.inputs[0]
    if isinstance(var, Constant) and np.size(var.data) == 1:
        return var
    return None


def _as_input(var: Variable) -> Variable:
    """``var`` as an input of a fused node: a DimShuffle broadcasting a one-value constant
    becomes that constant in ``var``'s shape (Theano had folded it), anything else itself."""
    source = _constant_source(var)
    if source is None or isinstance(var, Constant):
        return var
    shape = (1,) * var.type.ndim  # type: ignore[attr-defined]
    value = np.asarray(source.data, dtype=var.type.dtype).reshape(shape)  # type: ignore[attr-defined]
    return constant(value, dtype=var.type.dtype)  # type: ignore[attr-defined]


def _apply_scalar(node: Apply, args: Sequence[Variable], root: bool) -> Variable:
    """The scalar counterpart of Elemwise ``node`` applied to ``args``.

    A Composite at the group's root is inlined; one below it stays nested, as in Theano
    (whose Composite flattened only its output's): ``a + a**10`` prints as
    ``Composite{(i0 + Composite{(sqr(sqr(sqr(i0))) * sqr(i0))}(i0))}``. The output's scalar
    type is the dtype of the node's own output, which Elemwise derived from the same op.
    """
    op = node.op.scalar_op
    if root and isinstance(op, ps.Composite):
        values: dict[Variable, Variable] = dict(zip(op.inputs, args, strict=True))
        for inner in op.nodes:
            outs = inner.op.make_node(*[values.get(v, v) for v in inner.inputs]).outputs
            values.update(zip(inner.outputs, outs, strict=True))
        (out,) = op.outputs
        return values.get(out, out)
    out_type = get_scalar_type(node.outputs[0].type.dtype)  # type: ignore[attr-defined]
    return Apply(op, list(args), [out_type()]).outputs[0]


class _Group:
    """One fusion group being grown from its root (the node computing its output)."""

    def __init__(self, root: Apply) -> None:
        self.root = root
        self.members: set[Apply] = {root}
        self.broadcastable = root.outputs[0].type.broadcastable  # type: ignore[attr-defined]
        self.external: dict[Variable, None] = dict.fromkeys(root.inputs)

    def new_inputs(self, node: Apply) -> list[Variable]:
        """The inputs ``node`` would add to the group's external inputs."""
        new = []
        for v in node.inputs:
            if v not in self.external and v not in new:
                new.append(v)
        return new

    def accepts(self, node: Apply, max_inputs: int, max_nodes: int) -> bool:
        if len(self.members) >= max_nodes:
            return False
        out = node.outputs[0]
        if out.type.broadcastable != self.broadcastable:  # type: ignore[attr-defined]
            return False
        for client, _ in out.clients:  # type: ignore[attr-defined]
            if isinstance(client, str) or client not in self.members:
                return False
        return len(self.external) - 1 + len(self.new_inputs(node)) <= max_inputs

    def add(self, node: Apply) -> None:
        new = self.new_inputs(node)
        self.members.add(node)
        self.external.pop(node.outputs[0], None)
        self.external.update(dict.fromkeys(new))


class FusionRewriter(GraphRewriter):
    """Fuse trees of Elemwise nodes into ``Elemwise{Composite{...}}`` nodes.

    Parameters
    ----------
    max_inputs
        The most distinct inputs a fused node may have (constants included).
    max_nodes
        The most Elemwise nodes fused into one.
    name
        The rewrite's name (its handle for ``excluding``).
    """

    def __init__(
        self,
        max_inputs: int = DEFAULT_MAX_INPUTS,
        max_nodes: int = DEFAULT_MAX_NODES,
        name: str = "fusion_rewriter",
    ) -> None:
        if max_inputs < 1 or max_nodes < 2:
            raise ValueError(
                f"max_inputs must be at least 1 and max_nodes at least 2, got {max_inputs} "
                f"and {max_nodes}"
            )
        self.max_inputs = max_inputs
        self.max_nodes = max_nodes
        self.name = name

    def apply(self, fgraph: Any) -> int:
        """Fuse every group of two or more Elemwise nodes; return how many were fused."""
        order = fgraph.toposort()
        position = {node: k for k, node in enumerate(order)}
        taken: set[Apply] = set()
        groups: list[list[Apply]] = []
        for root in reversed(order):
            if root in taken or not _fusable(root):
                continue
            group = self._grow(root, position, taken)
            if len(group.members) > 1 and group.external:
                taken.update(group.members)
                groups.append(sorted(group.members, key=position.__getitem__))
        fused = 0
        for nodes in groups:
            if self._fuse(fgraph, nodes):
                fused += 1
        return fused

    def _grow(self, root: Apply, position: dict[Apply, int], taken: set[Apply]) -> _Group:
        group = _Group(root)
        heap: list[tuple[int, Apply]] = []
        pushed: set[Apply] = set()

        def push_owners(node: Apply) -> None:
            for v in node.inputs:
                owner = v.owner
                if owner is not None and owner not in pushed and owner in position:
                    pushed.add(owner)
                    heapq.heappush(heap, (-position[owner], owner))

        push_owners(root)
        while heap:
            _, node = heapq.heappop(heap)
            if (
                node in taken
                or not _fusable(node)
                or not group.accepts(node, self.max_inputs, self.max_nodes)
            ):
                continue
            group.add(node)
            push_owners(node)
        return group

    def _fuse(self, fgraph: Any, nodes: list[Apply]) -> bool:
        """Replace the group's output by one fused node; False if that is not possible."""
        root = nodes[-1]
        scalar_of: dict[Variable, Variable] = {}
        inputs = _inputs_in_theano_order(root, set(nodes))
        scalar_inputs = [get_scalar_type(v.type.dtype)() for v in inputs]  # type: ignore[attr-defined]
        scalar_of.update(zip(inputs, scalar_inputs, strict=True))
        for node in nodes:
            args = [scalar_of[v] for v in node.inputs]
            scalar_of[node.outputs[0]] = _apply_scalar(node, args, node is root)
        old = root.outputs[0]
        # The scalar graph was built for this Composite alone: it needs no copy.
        composite = ps.Composite(scalar_inputs, [scalar_of[old]], clone_graph=False)
        new = Elemwise(composite)(*[_as_input(v) for v in inputs])
        if new.type != old.type:
            return False
        try:
            if not apply_replacements(fgraph, self, {old: new}, root):
                return False
        except InconsistencyError:
            return False
        _merge_traces(nodes, new)
        return True


def _inputs_in_theano_order(root: Apply, members: set[Apply]) -> list[Variable]:
    """The fused node's inputs, in the order Theano's fusion gave them: the group read from
    its root, left to right, each member replaced by its own inputs, each input kept where it
    first appears (``b - 0.1 * s`` takes ``(b, 0.1, s)``)."""
    order: dict[Variable, None] = {}
    expanded: set[Apply] = set()
    stack = [root.outputs[0]]
    while stack:
        v = stack.pop()
        owner = v.owner
        if owner in members:
            if owner not in expanded:
                expanded.add(owner)
                stack.extend(reversed(owner.inputs))
        elif v not in order:
            order[v] = None
    return list(order)


def _merge_traces(nodes: list[Apply], new: Variable) -> None:
    """Give the fused node the creation traces of every node it computes, first one first,
    so that a runtime error in it names the user's lines."""
    trace: list[Any] = []
    for node in nodes:
        for frame in getattr(node.outputs[0].tag, "trace", None) or ():
            if frame not in trace:
                trace.append(frame)
    if trace and new.owner is not None:
        new.owner.tag.trace = trace
        new.tag.trace = trace


#: The fusion pass of FAST_RUN (``excluding("fusion")`` or ``"fusion_rewriter"`` turns it off).
fusion_rewriter = FusionRewriter()

rewrites.register(
    "fusion",
    fusion_rewriter,
    "fast_run",
    "fusion",
    "elemwise_fusion",
    "local_elemwise_fusion",
    position=49,
)
