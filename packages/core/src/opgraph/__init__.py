"""opgraph: an optimizing compiler for expressions on multi-dimensional arrays.

Theano's model and API: declare symbolic variables, build expressions with a NumPy-like
API, compile them once with :func:`function`, call the result many times. Code written for
Theano 1.0 runs after ``import opgraph as theano``.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

from opgraph import compile, gof, gradient, graph, ifelse, printing, scalar, tensor
from opgraph.compile import (
    In,
    Mode,
    Out,
    ProfileStats,
    SharedVariable,
    function,
    shared,
)
from opgraph.compile.mode import get_mode
from opgraph.configdefaults import change_flags, config
from opgraph.gradient import Lop, Rop, grad
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.clone import clone, clone_replace
from opgraph.graph.fg import FunctionGraph
from opgraph.graph.op import Op
from opgraph.graph.type import Type
from opgraph.plugins import add_builtin_plugin, load_plugins
from opgraph.plugins.namespaces import module_getattr
from opgraph.printing import pp, pprint


def __getattr__(name: str) -> Any:
    """Resolve plugin-owned namespaces (``opgraph.sparse``, ``opgraph.gpuarray``) lazily."""
    return module_getattr(name)


add_builtin_plugin("opgraph.compile.builtin")
load_plugins()
