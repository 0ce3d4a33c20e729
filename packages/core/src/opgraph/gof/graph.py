"""Theano's ``theano.gof.graph`` names for the graph utilities."""

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


__all__ = [
    "Apply",
    "Constant",
    "Node",
    "Variable",
    "ancestors",
    "applys_between",
    "as_variable",
    "clone",
    "clone_get_equiv",
    "general_toposort",
    "inputs",
    "io_toposort",
    "ops",
    "orphans",
    "variables",
]
