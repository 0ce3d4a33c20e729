"""In-place rewrites: outputs take over input buffers wherever a DestroyHandler says it is safe.

They run in the ``inplace`` stage, after ``add_destroy_handler`` attached a
:class:`~opgraph.graph.destroyhandler.DestroyHandler` to the graph. The node rewriters are
built by core's :mod:`opgraph.rewriting.inplace` (which says what they never overwrite);
this module declares core's Ops' in-place versions with it, and the Elemwise pass:

- :data:`inplace_elemwise_optimizer`: ``Elemwise{add,no_inplace}`` becomes
  ``Elemwise{add,inplace}``, a fused node ``Elemwise{Composite{...}}[(0, 0)]``;
- ``local_inplace_setsubtensor``: ``IncSubtensor{Set;...}`` becomes
  ``IncSubtensor{InplaceSet;...}`` (and the Inc form likewise);
- ``local_inplace_incsubtensor1`` and ``local_inplace_advanced_incsubtensor``: the same for
  ``AdvancedIncSubtensor1`` and the other advanced increments;
- ``mrg_random_make_inplace``: ``mrg_uniform{..,no_inplace}`` advances its state buffer
  itself (Theano's name). The state of ``MRG_RandomStreams`` is a shared variable, which
  only nodes running after all others may overwrite (core's ``UpdateGuard``), and the
  draw feeds the rest of the graph, so this fires for states computed in the graph or
  passed as ``In(rstate, mutable=True)``;
- ``typed_list_inplace_opt``: ``Append``, ``Extend``, ``Insert``, ``Remove`` and
  ``Reverse`` modify their list instead of a copy (Theano's name).

Other modules and packages make their own Ops in place (BLAS ``Gemm`` -> ``Gemm{inplace}``)
with core's ``register_inplace`` (:func:`register_inplace` here declares on this package's
RewriteSet by default); ``Mode.excluding("inplace")`` turns them all off.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.destroyhandler import DestroyHandler, protected_inputs
from opgraph.graph.features import InconsistencyError
from opgraph.graph.op import Op
from opgraph.rewriting import GraphRewriter, NodeRewriter, RewriteSet, apply_replacements
from opgraph.rewriting.inplace import (
    LazyNodeCounter,
    MakeInplace,
    inplace_rewriter,
    only_reader,
    require_destroy_handler,
)
from opgraph.rewriting.inplace import register_inplace as core_register_inplace
from opgraph.sandbox.rng_mrg import mrg_uniform_base
from opgraph.tensor.elemwise import Elemwise
from opgraph.tensor.subtensor_advanced import AdvancedIncSubtensor1, BaseAdvancedIncSubtensor
from opgraph.tensor.subtensor_basic import IncSubtensor
from opgraph.typed_list.basic import Append, Extend, Insert, Remove, Reverse
from opgraph_optimizers.registry import rewrites

__all__ = [
    "InplaceElemwiseRewriter",
    "LazyNodeCounter",
    "inplace_elemwise_op",
    "inplace_elemwise_optimizer",
    "inplace_rewriter",
    "local_inplace_advanced_incsubtensor",
    "local_inplace_incsubtensor1",
    "local_inplace_setsubtensor",
    "mrg_random_make_inplace",
    "register_inplace",
    "typed_list_inplace_opt",
]


def register_inplace(
    name: str,
    tracks: Sequence[type[Op] | Op],
    make_inplace: MakeInplace,
    *tags: str,
    position: float = 20.0,
    rewrite_set: RewriteSet | None = None,
) -> NodeRewriter:
    """Core's :func:`opgraph.rewriting.inplace.register_inplace`, declaring on this
    package's RewriteSet unless ``rewrite_set`` is given."""
    target = rewrite_set if rewrite_set is not None else rewrites
    return core_register_inplace(
        name, tracks, make_inplace, *tags, rewrite_set=target, position=position
    )


# ---------------------------------------------------------------------------- subtensor


def _inplace_incsubtensor(node: Apply) -> Op | None:
    op = node.op
    if op.inplace:
        return None
    return IncSubtensor(
        op.idx_list, True, op.set_instead_of_inc, op.destroyhandler_tolerate_aliased
    )


def _inplace_advanced_inc(node: Apply) -> Op | None:
    op = node.op
    if op.inplace:
        return None
    return type(op)(inplace=True, set_instead_of_inc=op.set_instead_of_inc)


local_inplace_setsubtensor = register_inplace(
    "local_inplace_setsubtensor", [IncSubtensor], _inplace_incsubtensor, position=10
)
local_inplace_incsubtensor1 = register_inplace(
    "local_inplace_incsubtensor1", [AdvancedIncSubtensor1], _inplace_advanced_inc, position=11
)
local_inplace_advanced_incsubtensor = register_inplace(
    "local_inplace_advanced_incsubtensor",
    [BaseAdvancedIncSubtensor],
    _inplace_advanced_inc,
    position=12,
)


# ---------------------------------------------------------------------------- core's other Ops


def _inplace_mrg(node: Apply) -> Op | None:
    op = node.op
    return None if op.inplace else type(op)(op.output_type, inplace=True)


def _inplace_list_op(node: Apply) -> Op | None:
    return None if node.op.inplace else type(node.op)(inplace=True)


mrg_random_make_inplace = register_inplace(
    "mrg_random_make_inplace", [mrg_uniform_base], _inplace_mrg, "random", position=40
)
typed_list_inplace_opt = register_inplace(
    "typed_list_inplace_opt",
    [Append, Extend, Insert, Remove, Reverse],
    _inplace_list_op,
    "typed_list",
    position=41,
)


# ---------------------------------------------------------------------------- elemwise


def inplace_elemwise_op(op: Elemwise, pattern: dict[int, int]) -> Elemwise:
    """``op`` with in-place pattern ``pattern`` (``{output: input}``).

    Printed as Theano's in-place pass left its nodes, by the scalar op's class:
    ``Elemwise{Exp}[(0, 0)]``, ``Elemwise{Add}[(0, 1)]``, ``Elemwise{Composite{...}}[(0, 0)]``.
    """
    return Elemwise(op.scalar_op, pattern)


class InplaceElemwiseRewriter(GraphRewriter):
    """Make each Elemwise output overwrite an input buffer where that is safe.

    As Theano's ``inplace_elemwise_optimizer``: nodes are visited in the graph's
    topological order without the features' orderings (``fgraph.io_toposort()``); for each
    output not yet in place, the inputs of the same type that may be overwritten are tried
    in input order, except that an output updating a shared variable tries that
    variable first, then the variables computed in place from it; the first replacement the
    DestroyHandler accepts is kept.
    """

    def __init__(self, name: str = "inplace_elemwise_optimizer") -> None:
        self.name = name

    def add_requirements(self, fgraph: Any) -> None:
        require_destroy_handler(fgraph)

    def apply(self, fgraph: Any) -> int:
        """Rewrite the graph; return the number of outputs made to work in place."""
        handler = fgraph.destroy_handler
        protected = protected_inputs(fgraph)
        changed = 0
        updated = _updated_inputs(fgraph)
        for node in fgraph.io_toposort():
            if node in fgraph.apply_nodes and type(node.op) is Elemwise:
                changed += self._make_inplace(fgraph, handler, node, protected, updated)
        return changed

    def _candidates(
        self,
        fgraph: Any,
        handler: DestroyHandler,
        node: Apply,
        out: Variable,
        taken: set[int],
        protected: set[Variable],
        updated: dict[Variable, list[Variable]],
    ) -> list[int]:
        found = []
        for i, inp in enumerate(node.inputs):
            if i in taken or inp.type != out.type:
                continue
            if sum(v is inp for v in node.inputs) > 1 or not handler.can_destroy(inp, protected):
                continue
            if not only_reader(fgraph, handler, inp, node):
                continue
            found.append(i)
        targets = updated.get(out)
        if not targets:
            return found

        def rank(i: int) -> int:
            inp = node.inputs[i]
            if inp in targets:
                return 0  # the shared variable this output updates
            owner = inp.owner
            if owner is not None and any(
                handler.root_of(t) is handler.root_of(inp) for t in targets
            ):
                return 1  # computed in place from it
            return 2

        return sorted(found, key=rank)

    def _make_inplace(
        self,
        fgraph: Any,
        handler: DestroyHandler,
        node: Apply,
        protected: set[Variable],
        updated: dict[Variable, list[Variable]],
    ) -> int:
        pattern = dict(node.op.inplace_pattern)
        changed = 0
        for o, out in enumerate(node.outputs):
            if o in pattern:
                continue
            taken = set(pattern.values())
            for i in self._candidates(fgraph, handler, node, out, taken, protected, updated):
                new_pattern = {**pattern, o: i}
                new_node = inplace_elemwise_op(node.op, new_pattern).make_node(*node.inputs)
                if any(a.type != b.type for a, b in zip(new_node.outputs, node.outputs)):
                    continue
                try:
                    apply_replacements(
                        fgraph, self, dict(zip(node.outputs, new_node.outputs)), node
                    )
                except InconsistencyError:
                    continue
                node, pattern = new_node, new_pattern
                changed += 1
                break
        return changed


def _updated_inputs(fgraph: Any) -> dict[Variable, list[Variable]]:
    """``{graph output: [the shared variables (graph inputs) it updates]}``."""
    found: dict[Variable, list[Variable]] = {}
    for out_index, in_index in (getattr(fgraph, "update_mapping", None) or {}).items():
        found.setdefault(fgraph.outputs[out_index], []).append(fgraph.inputs[in_index])
    return found


#: The Elemwise in-place pass of FAST_RUN (``excluding("inplace")`` turns it off).
inplace_elemwise_optimizer = InplaceElemwiseRewriter()

rewrites.register(
    "inplace",
    inplace_elemwise_optimizer,
    "fast_run",
    "inplace",
    "inplace_elemwise_opt",
    position=50,
)
