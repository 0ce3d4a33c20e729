"""Theano's ``theano.gof`` paths: graph structures, Op, Type, FunctionGraph and utilities."""

from opgraph.gof import graph
from opgraph.graph import features as toolbox
from opgraph.graph.basic import Apply, Constant, Node, Variable
from opgraph.graph.features import Feature, History, InconsistencyError, ReplaceValidate, Validator
from opgraph.graph.fg import FunctionGraph
from opgraph.graph.op import Op
from opgraph.graph.type import Generic, Type, generic
from opgraph.graph.utils import MethodNotDefined
from opgraph.link.basic import Container, PerformLinker
from opgraph.link.basic import VMLinker as VM_Linker
