"""Graph structures: Variable, Constant, Apply, Type, Op, FunctionGraph and graph utilities."""

from opgraph.graph.basic import Apply, Constant, Node, Variable, as_variable
from opgraph.graph.clone import clone, clone_get_equiv, clone_replace
from opgraph.graph.op import Op
from opgraph.graph.traversal import (
    ancestors,
    applys_between,
    general_toposort,
    graph_inputs,
    io_toposort,
    orphans_between,
    variables_between,
)
from opgraph.graph.type import Generic, Type, generic
from opgraph.graph.utils import MetaObject, MethodNotDefined, Scratchpad

__all__ = [
    "Apply",
    "Constant",
    "Generic",
    "MetaObject",
    "MethodNotDefined",
    "Node",
    "Op",
    "Scratchpad",
    "Type",
    "Variable",
    "ancestors",
    "applys_between",
    "as_variable",
    "clone",
    "clone_get_equiv",
    "clone_replace",
    "general_toposort",
    "generic",
    "graph_inputs",
    "io_toposort",
    "orphans_between",
    "variables_between",
]
