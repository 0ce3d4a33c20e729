"""In-place versions of Ops, swapped in where a graph's DestroyHandler says it is safe.

An Op with an in-place variant (an ``inplace`` prop, or a second Op) declares which input its
output overwrites (``destroy_map``); a rewrite in the ``inplace`` stage of FAST_RUN swaps the
variant in. :func:`register_inplace` declares such a rewrite on any package's
:class:`~opgraph.rewriting.db.RewriteSet`, so a plugin makes its own Ops in place exactly
as opgraph-optimizers makes core's (``Gemm`` -> ``Gemm{inplace}``)::

    register_inplace("local_inplace_cube", [Cube], lambda node: None if node.op.inplace
                     else Cube(inplace=True), rewrite_set=my_rewrites)

The rewrite proposes the replacement and lets the handler's validation accept or revert it,
so it never has to reason about the whole graph. Before trying, it skips buffers that can
never be overwritten: constants, graph outputs, buffers already overwritten, and the inputs
that :func:`~opgraph.graph.destroyhandler.protected_inputs` protects (what the user passed
unless marked ``In(x, mutable=True)``, and the shared variables the function does not
update; those it updates are overwritten only as
:class:`~opgraph.graph.destroyhandler.UpdateGuard` allows). In a graph with lazy nodes
(``ifelse``) it only takes over buffers that no other node reads, so that no branch is
evaluated just to read a buffer before it is overwritten.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.destroyhandler import DestroyHandler, protected_inputs
from opgraph.graph.features import AlreadyThere, Feature
from opgraph.graph.op import Op
from opgraph.rewriting.basic import NodeRewriter, node_rewriter
from opgraph.rewriting.db import RewriteSet

__all__ = [
    "LazyNodeCounter",
    "MakeInplace",
    "inplace_rewriter",
    "only_reader",
    "register_inplace",
    "require_destroy_handler",
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
    """Counts a graph's lazy nodes (``ifelse``, any Op whose ``lazy`` is true), as
    ``fgraph.lazy_node_counter.count``.

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
    """Whether ``node``'s Op evaluates its inputs lazily (``ifelse``: its ``lazy`` attribute)."""
    return bool(getattr(node.op, "lazy", False))


def require_destroy_handler(fgraph: Any) -> None:
    if getattr(fgraph, "destroy_handler", None) is None:
        fgraph.attach_feature(DestroyHandler())
    if getattr(fgraph, "lazy_node_counter", None) is None:
        fgraph.attach_feature(LazyNodeCounter())


def only_reader(fgraph: Any, handler: DestroyHandler, var: Variable, node: Apply) -> bool:
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
        and only_reader(fgraph, handler, node.inputs[i], node)
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
    rewriter = node_rewriter(list(tracks), requirements=[require_destroy_handler])(transform)
    rewriter.location = location
    return rewriter


def register_inplace(
    name: str,
    tracks: Sequence[type[Op] | Op],
    make_inplace: MakeInplace,
    *tags: str,
    rewrite_set: RewriteSet,
    position: float = 20.0,
) -> NodeRewriter:
    """Declare an in-place rewrite (see :func:`inplace_rewriter`) in the ``inplace`` stage.

    The extension point for packages whose Ops have in-place versions, e.g. BLAS::

        register_inplace("local_inplace_gemm", [Gemm], lambda node: gemm_inplace
                         if not node.op.inplace else None, "blas", position=30,
                         rewrite_set=my_package_rewrites)

    It gets tags ``fast_run`` and ``inplace`` plus ``tags``, at ``position`` inside the stage
    (opgraph-optimizers puts setsubtensor at 10, BLAS at 30, elemwise at 50), declared on
    ``rewrite_set`` (the package's set, installed by its ``opgraph_register_rewrites``
    hook); ``Mode.excluding("inplace")`` or ``excluding(name)`` turns it off.
    """
    rewriter = inplace_rewriter(name, tracks, make_inplace)
    rewrite_set.register("inplace", rewriter, "fast_run", "inplace", *tags, position=position)
    return rewriter
