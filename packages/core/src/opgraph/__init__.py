"""opgraph: an optimizing compiler for expressions on multi-dimensional arrays.

Theano's model and API: declare symbolic variables, build expressions with a NumPy-like
API, compile them once with :func:`function`, call the result many times. Code written for
Theano 1.0 runs after ``import opgraph as theano``.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

from opgraph import (
    compile,
    d3viz,
    gof,
    gradient,
    graph,
    ifelse,
    misc,
    printing,
    sandbox,
    scalar,
    scan_module,
    tensor,
    tests,
    typed_list,
    updates,
)
from opgraph.compile import (
    In,
    Mode,
    OpFromGraph,
    Out,
    ProfileStats,
    SharedVariable,
    function,
    function_dump,
    shared,
)
from opgraph.compile.mode import get_mode
from opgraph.configdefaults import change_flags, config
from opgraph.gof.utils import _asarray
from opgraph.gradient import Lop, Rop, grad, sparse_grad
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.clone import clone_replace
from opgraph.graph.clone import clone_replace as clone  # Theano's theano.clone(output, replace)
from opgraph.graph.fg import FunctionGraph
from opgraph.graph.op import Op
from opgraph.graph.type import Type
from opgraph.plugins import add_builtin_plugin, load_plugins
from opgraph.plugins.namespaces import module_getattr
from opgraph.printing import pp, pprint
from opgraph.scan_module import foldl, foldr, map, reduce, scan, scan_checkpoints
from opgraph.updates import OrderedUpdates


def dot(l: Any, r: Any) -> Any:
    """Theano's ``theano.dot``: ``l.__dot__(r)``, else ``r.__rdot__(l)`` (so tensors and a
    plugin's sparse variables each compute their own product), else ``tensor.dot(l, r)``;
    TypeError with the reasons if the methods failed."""
    errors: list[Exception | None] = [None, None]
    for k, (obj, method, other) in enumerate(((l, "__dot__", r), (r, "__rdot__", l))):
        fn = getattr(obj, method, None)
        if fn is None:
            continue
        try:
            rval = fn(other)
        except Exception as exc:
            errors[k] = exc
            continue
        if rval is not NotImplemented:
            return rval
    if not hasattr(l, "__dot__") and not hasattr(r, "__rdot__"):
        return tensor.dot(l, r)
    raise TypeError("Dot failed for the following reasons:", tuple(errors))


def __getattr__(name: str) -> Any:
    """Resolve plugin-owned namespaces (``opgraph.sparse``, ``opgraph.gpuarray``) lazily."""
    return module_getattr(name)


add_builtin_plugin("opgraph.compile.builtin")
load_plugins()
