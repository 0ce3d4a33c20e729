"""In-place rewrites: outputs take over input buffers wherever a DestroyHandler says it is safe.

They run in the ``inplace`` stage, after ``add_destroy_handler`` attached a
:class:`~opgraph.graph.destroyhandler.DestroyHandler` to the graph. Each one proposes a
replacement and lets the handler's validation accept or revert it, so a rewrite never has
to reason about the whole graph. Before trying, they skip buffers that can never be
overwritten: constants, graph outputs, buffers already overwritten, and the inputs that
:func:`~opgraph.graph.destroyhandler.protected_inputs` protects (what the user passed unless
marked ``In(x, mutable=True)``, and every shared variable, updated or not: a call that
fails must leave them unchanged). In a graph with lazy nodes (``ifelse``) they only take
over buffers that no other node reads, so that no branch is evaluated just to read a
buffer before it is overwritten.

- :data:`inplace_elemwise_optimizer`: ``Elemwise{add,no_inplace}`` becomes
  ``Elemwise{add,inplace}``, a fused node ``Elemwise{Composite{...}}[(0, 0)]``;
- ``local_inplace_setsubtensor``: ``IncSubtensor{Set;...}`` becomes
  ``IncSubtensor{InplaceSet;...}`` (and the Inc form likewise);
- ``local_inplace_incsubtensor1`` and ``local_inplace_advanced_incsubtensor``: the same for
  ``AdvancedIncSubtensor1`` and the other advanced increments;
- ``mrg_random_make_inplace``: ``mrg_uniform{..,no_inplace}`` advances its state buffer
  itself (Theano's name). The state of ``MRG_RandomStreams`` is a shared variable, which is
  never overwritten, so this fires for states computed in the graph or passed as
  ``In(rstate, mutable=True)``;
- ``typed_list_inplace_opt``: ``Append``, ``Extend``, ``Insert``, ``Remove`` and
  ``Reverse`` modify their list instead of a copy (Theano's name).

Other packages make their own Ops in place (BLAS ``Gemm`` -> ``Gemm{inplace}``) with
:func:`register_inplace`: it builds the same kind of node rewriter and declares it on the
caller's RewriteSet in the ``inplace`` stage; ``Mode.excluding("inplace")`` turns them all off.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.destroyhandler import DestroyHandler, protected_inputs
from opgraph.graph.features import AlreadyThere, Feature, InconsistencyError
from opgraph.graph.op import Op
from opgraph.ifelse import IfElse
from opgraph.rewriting import GraphRewriter, NodeRewriter, RewriteSet, apply_replacements
from opgraph.rewriting.basic import node_rewriter
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

MakeInplace = Callable[[Apply], Op | None]
_HELPERS = ("_declared_at", "inplace_rewriter", "register_inplace")


def _declared_at() -> str:
    """``file:line`` where an in-place rewrite is declared (the caller of the helpers below)."""
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_name in _HELPERS:
        frame = frame.f_back
    parts = frame.f_code.co_filename.replace(os.sep, "/").split("/")
    return f"{'/'.join(parts[-2:])}:{frame.f_lineno}"


class LazyNodeCounter(Feature):
    """Counts a graph's lazy nodes (``ifelse``), as ``fgraph.lazy_node_counter.count``.

    In a graph with lazy nodes, the in-place rewrites only overwrite buffers no other node
    reads: a reader that must run before the overwriting node may sit in a branch that
    would otherwise not be evaluated at all.
    """

    pickle_rm_attr = ["lazy_node_counter"]

    def __init__(self) -> None:
        self.count = 0

    def on_attach(self, fgraph: Any) -> None:
        if getattr(fgraph, "lazy_node_counter", None) is not None:
            raise AlreadyThere("a LazyNodeCounter is already attached")
        self.unpickle(fgraph)

    def unpickle(self, fgraph: Any) -> None:
        """Put ``fgraph.lazy_node_counter`` back and count again."""
        fgraph.lazy_node_counter = self
        self.count = sum(_is_lazy(node) for node in fgraph.apply_nodes)

    def on_detach(self, fgraph: Any) -> None:
        fgraph.__dict__.pop("lazy_node_counter", None)

    def on_import(self, fgraph: Any, node: Apply, reason: Any) -> None:
        self.count += _is_lazy(node)

    def on_prune(self, fgraph: Any, node: Apply, reason: Any) -> None:
        self.count -= _is_lazy(node)


def _is_lazy(node: Apply) -> bool:
    return isinstance(node.op, IfElse) or bool(getattr(node.op, "lazy", False))


def _require_destroy_handler(fgraph: Any) -> None:
    if getattr(fgraph, "destroy_handler", None) is None:
        fgraph.attach_feature(DestroyHandler())
    if getattr(fgraph, "lazy_node_counter", None) is None:
        fgraph.attach_feature(LazyNodeCounter())


def _only_reader(fgraph: Any, handler: DestroyHandler, var: Variable, node: Apply) -> bool:
    """Whether ``node`` may overwrite ``var`` without ordering other readers first.

    Always true in a graph without lazy nodes; otherwise, true only if no other node reads
    ``var``'s buffer (``var`` or any view of it).
    """
    counter = getattr(fgraph, "lazy_node_counter", None)
    if counter is None or not counter.count:
        return True
    for v in handler.views_of(handler.root_of(var)):
        for client, _ in v.clients:  # type: ignore[attr-defined]
            if not isinstance(client, str) and client is not node:
                return False
    return True


def _destroyable(fgraph: Any, node: Apply, indices: Sequence[int]) -> bool:
    """Whether the inputs ``indices`` of ``node`` may be overwritten (a quick check)."""
    handler = getattr(fgraph, "destroy_handler", None)
    if handler is None:
        return False
    protected = protected_inputs(fgraph)
    return all(
        handler.can_destroy(node.inputs[i], protected)
        and _only_reader(fgraph, handler, node.inputs[i], node)
        for i in indices
    )


def _inplace_replacement(fgraph: Any, node: Apply, make_inplace: MakeInplace) -> Any:
    """The outputs of ``node``'s in-place version, or None when it cannot work in place."""
    new_op = make_inplace(node)
    if new_op is None:
        return None
    destroyed = sorted({i for ins in new_op.destroy_map.values() for i in ins})
    if not destroyed or not _destroyable(fgraph, node, destroyed):
        return None
    new_outputs = new_op.make_node(*node.inputs).outputs
    if any(new.type != old.type for new, old in zip(new_outputs, node.outputs, strict=True)):
        return None
    return new_outputs


def inplace_rewriter(
    name: str, tracks: Sequence[type[Op] | Op], make_inplace: MakeInplace
) -> NodeRewriter:
    """A node rewriter replacing a node by its in-place version where that is safe.

    Parameters
    ----------
    name
        The rewrite's name (``local_inplace_<op>``); ``excluding(name)`` turns it off.
    tracks
        The Op classes (or instances) it applies to.
    make_inplace
        ``make_inplace(node)`` returns the in-place Op to apply to ``node.inputs`` (its
        ``destroy_map`` says which inputs it overwrites), or None to leave the node alone
        (e.g. it is in place already).

    The rewriter requires a DestroyHandler, skips inputs that may never be overwritten, and
    relies on the handler's validation for the rest (a rejected replacement is reverted).
    """
    location = _declared_at()

    def transform(fgraph: Any, node: Apply) -> Any:
        return _inplace_replacement(fgraph, node, make_inplace)

    transform.__name__ = transform.__qualname__ = name
    transform.__doc__ = f"``{name}``: the in-place version of the node, where safe."
    rewriter = node_rewriter(list(tracks), requirements=[_require_destroy_handler])(transform)
    rewriter.location = location
    return rewriter


def register_inplace(
    name: str,
    tracks: Sequence[type[Op] | Op],
    make_inplace: MakeInplace,
    *tags: str,
    position: float = 20.0,
    rewrite_set: RewriteSet | None = None,
) -> NodeRewriter:
    """Declare an in-place rewrite (see :func:`inplace_rewriter`) in the ``inplace`` stage.

    The extension point for packages whose Ops have in-place versions, e.g. BLAS::

        register_inplace("local_inplace_gemm", [Gemm], lambda node: gemm_inplace
                         if not node.op.inplace else None, "blas", position=30,
                         rewrite_set=my_package_rewrites)

    It gets tags ``fast_run`` and ``inplace`` plus ``tags``, at ``position`` inside the stage
    (setsubtensor at 10, elemwise at 50), declared on ``rewrite_set`` (default: this
    package's set; a plugin passes its own, installed by its hook).
    """
    rewriter = inplace_rewriter(name, tracks, make_inplace)
    target = rewrite_set if rewrite_set is not None else rewrites
    target.register("inplace", rewriter, "fast_run", "inplace", *tags, position=position)
    return rewriter


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

    A library op named ``Elemwise{add,no_inplace}`` made in place as ``{0: 0}`` is named
    ``Elemwise{add,inplace}`` like its twin in ``opgraph.tensor.math``; other patterns print
    as Theano's ``Elemwise{add}[(0, 1)]``.
    """
    name = None
    suffix = ",no_inplace}"
    if pattern == {0: 0} and op.name is not None and op.name.endswith(suffix):
        name = op.name[: -len(suffix)] + ",inplace}"
    return Elemwise(op.scalar_op, pattern, name=name)


class InplaceElemwiseRewriter(GraphRewriter):
    """Make each Elemwise output overwrite an input buffer where that is safe.

    Nodes are visited in topological order. For each output not yet in place, the inputs of
    the same type that may be overwritten are tried, those with no other reader first; the
    first replacement the DestroyHandler accepts is kept.
    """

    def __init__(self, name: str = "inplace_elemwise_optimizer") -> None:
        self.name = name

    def add_requirements(self, fgraph: Any) -> None:
        _require_destroy_handler(fgraph)

    def apply(self, fgraph: Any) -> int:
        """Rewrite the graph; return the number of outputs made to work in place."""
        handler = fgraph.destroy_handler
        protected = protected_inputs(fgraph)
        changed = 0
        for node in fgraph.toposort():
            if node in fgraph.apply_nodes and type(node.op) is Elemwise:
                changed += self._make_inplace(fgraph, handler, node, protected)
        return changed

    def _candidates(
        self,
        fgraph: Any,
        handler: DestroyHandler,
        node: Apply,
        out: Variable,
        taken: set[int],
        protected: set[Variable],
    ) -> list[int]:
        alone, shared = [], []
        for i, inp in enumerate(node.inputs):
            if i in taken or inp.type != out.type:
                continue
            if sum(v is inp for v in node.inputs) > 1 or not handler.can_destroy(inp, protected):
                continue
            if not _only_reader(fgraph, handler, inp, node):
                continue
            (alone if len(inp.clients) == 1 else shared).append(i)  # type: ignore[attr-defined]
        return alone + shared

    def _make_inplace(
        self, fgraph: Any, handler: DestroyHandler, node: Apply, protected: set[Variable]
    ) -> int:
        pattern = dict(node.op.inplace_pattern)
        changed = 0
        for o, out in enumerate(node.outputs):
            if o in pattern:
                continue
            for i in self._candidates(fgraph, handler, node, out, set(pattern.values()), protected):
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
