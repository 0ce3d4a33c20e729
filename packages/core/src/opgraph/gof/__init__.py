"""Theano's ``theano.gof`` paths: graph structures, Op, Type, FunctionGraph, optimizers,
ParamsType and utilities."""

from __future__ import annotations

import importlib
from typing import Any

from opgraph.gof import graph, opt, params_type, type, utils
from opgraph.gof.opt import (
    EquilibriumOptimizer,
    LocalOptimizer,
    NavigatorOptimizer,
    OpRemove,
    OpSub,
    Optimizer,
    PatternSub,
    SeqOptimizer,
    TopoOptimizer,
    local_optimizer,
)
from opgraph.gof.params_type import Params, ParamsType
from opgraph.gof.type import (
    CDataType,
    CEnumType,
    CLinkerType,
    EnumList,
    EnumType,
    PureType,
    SingletonType,
)
from opgraph.graph import features as toolbox
from opgraph.graph.basic import Apply, Constant, Node, Variable
from opgraph.graph.features import Feature, History, InconsistencyError, ReplaceValidate, Validator
from opgraph.graph.fg import FunctionGraph
from opgraph.graph.op import Op
from opgraph.graph.type import Generic, Type, generic
from opgraph.graph.utils import MethodNotDefined
from opgraph.link.basic import Container, PerformLinker
from opgraph.link.basic import VMLinker as VM_Linker

__all__ = [
    "Apply",
    "CDataType",
    "CEnumType",
    "CLinkerType",
    "Constant",
    "Container",
    "EnumList",
    "EnumType",
    "EquilibriumOptimizer",
    "Feature",
    "FunctionGraph",
    "Generic",
    "History",
    "InconsistencyError",
    "LocalOptimizer",
    "MethodNotDefined",
    "NavigatorOptimizer",
    "Node",
    "Op",
    "OpRemove",
    "OpSub",
    "Optimizer",
    "Params",
    "ParamsType",
    "PatternSub",
    "PerformLinker",
    "PureType",
    "ReplaceValidate",
    "SeqOptimizer",
    "SingletonType",
    "TopoOptimizer",
    "Type",
    "VM_Linker",
    "Validator",
    "Variable",
    "generic",
    "graph",
    "local_optimizer",
    "opt",
    "params_type",
    "toolbox",
    "type",
    "utils",
]


def __getattr__(name: str) -> Any:
    """Other ``theano.gof`` submodules (``gof.op``, ...) as attributes, imported on first use."""
    if name.startswith("_"):
        raise AttributeError(name)
    try:
        return importlib.import_module(f"opgraph.gof.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"opgraph.gof.{name}":
            raise
        raise AttributeError(f"module 'opgraph.gof' has no attribute {name!r}") from None
