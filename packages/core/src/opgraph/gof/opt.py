"""Theano's ``theano.gof.opt``: graph optimizers on top of opgraph's rewrite engine.

Theano's local optimizers take only the node (``transform(node)``, ``@local_optimizer``
functions ``f(node)``; the graph is ``node.fgraph``); opgraph's node rewriters take
``(fgraph, node)``. The classes here accept both: a :class:`LocalOptimizer` subclass may
define ``transform(self, node)`` as in Theano, and :func:`local_optimizer` wraps a function
of ``node`` or of ``(fgraph, node)``. Everything else maps onto :mod:`opgraph.rewriting`:
``TopoOptimizer`` walks nodes (``in2out``/``out2in``), ``PatternSub`` is a pattern
rewriter, ``EquilibriumOptimizer`` runs to a fixed point.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from opgraph.graph.basic import Apply
from opgraph.graph.op import Op
from opgraph.rewriting.basic import (
    EquilibriumGraphRewriter,
    FromFunctionNodeRewriter,
    GraphRewriter,
    NodeRewriter,
    SequentialGraphRewriter,
    WalkingGraphRewriter,
    _check_tracks,
)
from opgraph.rewriting.pattern import PatternNodeRewriter, PatternSub

__all__ = [
    "EquilibriumOptimizer",
    "LocalOptimizer",
    "NavigatorOptimizer",
    "OpRemove",
    "OpSub",
    "Optimizer",
    "PatternSub",
    "SeqOptimizer",
    "TopoOptimizer",
    "in2out",
    "local_optimizer",
    "out2in",
]


class Optimizer(GraphRewriter):
    """Theano's global optimizer: define ``apply(fgraph)``; ``optimize(fgraph)`` runs it."""

    def optimize(self, fgraph: Any, *args: Any, **kwargs: Any) -> Any:
        """Attach the requirements and apply (Theano's entry point)."""
        return self.rewrite(fgraph, *args, **kwargs)


def _takes_node_only(fn: Callable[..., Any], method: bool) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) == (2 if method else 1)


class LocalOptimizer(NodeRewriter):
    """Theano's local optimizer. Subclasses define ``tracks()`` and ``transform(node)`` (the
    graph is ``node.fgraph``) returning a list of replacements, a dict, or False/None."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        transform = cls.__dict__.get("transform")
        if transform is not None and _takes_node_only(transform, method=True):

            def transform_fgraph(self: Any, fgraph: Any, node: Apply, _t: Any = transform) -> Any:
                return _t(self, node)

            transform_fgraph.__doc__ = transform.__doc__
            cls.transform = transform_fgraph  # type: ignore[method-assign]

    def optimize(self, fgraph: Any) -> int:
        """Apply this optimizer to every node of ``fgraph`` once, inputs first."""
        return TopoOptimizer(self).rewrite(fgraph)


def local_optimizer(
    tracks: Sequence[type[Op] | Op] | None,
    inplace: bool = False,
    requirements: Sequence[Callable[[Any], None]] = (),
) -> Callable[[Callable[..., Any]], FromFunctionNodeRewriter]:
    """Theano's decorator: ``@local_optimizer([Dot]) def f(node): ...`` (or ``f(fgraph,
    node)``) becomes a node rewriter named ``f``."""
    checked = _check_tracks(tracks)

    def decorator(fn: Callable[..., Any]) -> FromFunctionNodeRewriter:
        if _takes_node_only(fn, method=False):

            def call(fgraph: Any, node: Apply, _fn: Any = fn) -> Any:
                return _fn(node)

            call.__name__ = fn.__name__
            call.__qualname__ = fn.__qualname__
            call.__doc__ = fn.__doc__
            call.__module__ = fn.__module__
            rewriter = FromFunctionNodeRewriter(call, checked, requirements, inplace)
            rewriter._location = FromFunctionNodeRewriter(fn, checked).location
            return rewriter
        return FromFunctionNodeRewriter(fn, checked, requirements, inplace)

    return decorator


class OpSub(LocalOptimizer):
    """Replace every application of ``op1`` by ``op2`` on the same inputs (same number of
    outputs); ``transfer_tags`` copies the outputs' tags."""

    def __init__(self, op1: Op, op2: Op, transfer_tags: bool = True) -> None:
        self.op1, self.op2, self.transfer_tags = op1, op2, transfer_tags
        self.name = f"{op1} -> {op2}"

    def op_key(self) -> Op:
        return self.op1

    def tracks(self) -> list[Op]:
        return [self.op1]

    def transform(self, fgraph: Any, node: Apply) -> Any:
        if node.op != self.op1:
            return False
        repl = self.op2.make_node(*node.inputs)
        if self.transfer_tags:
            for old, new in zip(node.outputs, repl.outputs, strict=True):
                new.tag = old.tag.copy()
        return repl.outputs


class OpRemove(LocalOptimizer):
    """Remove every application of a one-input identity-like ``op`` (its output becomes its
    input)."""

    def __init__(self, op: Op) -> None:
        self.op = op
        self.name = f"{op}(x) -> x"

    def op_key(self) -> Op:
        return self.op

    def tracks(self) -> list[Op]:
        return [self.op]

    def transform(self, fgraph: Any, node: Apply) -> Any:
        if node.op != self.op:
            return False
        return node.inputs


class NavigatorOptimizer(WalkingGraphRewriter):
    """Theano's base of optimizers walking the graph with a local optimizer."""


class TopoOptimizer(NavigatorOptimizer):
    """Apply a local optimizer to every node once, in topological order
    (``order='in_to_out'``, inputs first) or its reverse (``'out_to_in'``)."""

    def __init__(
        self,
        local_opt: NodeRewriter | Sequence[NodeRewriter],
        order: str = "in_to_out",
        ignore_newtrees: bool = False,
        failure_callback: Any = None,
    ) -> None:
        super().__init__(local_opt, order, ignore_newtrees, failure_callback)

    def optimize(self, fgraph: Any, start_from: Any = None) -> int:
        """Walk ``fgraph`` once; return the number of rewrites applied."""
        return self.rewrite(fgraph, start_from)


def in2out(*local_opts: NodeRewriter, **kwargs: Any) -> TopoOptimizer:
    """A :class:`TopoOptimizer` applying ``local_opts``, inputs first (Theano's keywords
    ``ignore_newtrees``, ``failure_callback``; ``name`` too)."""
    name = kwargs.pop("name", None)
    kwargs.pop("local_opt", None)
    opt = TopoOptimizer(list(local_opts), order="in_to_out", **kwargs)
    if name:
        opt.name = name
    return opt


def out2in(*local_opts: NodeRewriter, **kwargs: Any) -> TopoOptimizer:
    """A :class:`TopoOptimizer` applying ``local_opts``, outputs first."""
    name = kwargs.pop("name", None)
    opt = TopoOptimizer(list(local_opts), order="out_to_in", **kwargs)
    if name:
        opt.name = name
    return opt


#: Theano's name of the sequential optimizer.
SeqOptimizer = SequentialGraphRewriter


class EquilibriumOptimizer(EquilibriumGraphRewriter):
    """Apply local and global optimizers until none applies (Theano's argument order:
    ``optimizers, failure_callback, ignore_newtrees, tracks_on_change_inputs,
    max_use_ratio, final_optimizers, cleanup_optimizers``)."""

    def __init__(
        self,
        optimizers: Sequence[Any],
        failure_callback: Any = None,
        ignore_newtrees: bool = True,
        tracks_on_change_inputs: bool = False,
        max_use_ratio: float | None = None,
        final_optimizers: Sequence[Any] | None = None,
        cleanup_optimizers: Sequence[Any] | None = None,
    ) -> None:
        super().__init__(
            list(optimizers),
            max_use_ratio=max_use_ratio,
            ignore_newtrees=ignore_newtrees,
            tracks_on_change_inputs=tracks_on_change_inputs,
            failure_callback=failure_callback,
            final_rewriters=list(final_optimizers or ()),
            cleanup_rewriters=list(cleanup_optimizers or ()),
        )

    def optimize(self, fgraph: Any) -> Any:
        """Run to the fixed point."""
        return self.rewrite(fgraph)


#: PatternSub's class (Theano builds PatternSub objects directly).
PatternOptimizer = PatternNodeRewriter
