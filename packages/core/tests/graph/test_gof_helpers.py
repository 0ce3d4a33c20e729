"""Theano's ``theano.gof.graph``, ``gof.utils`` and ``gof.type`` names (issue 13): each
resolves at its Theano path and behaves as Theano 1.0 (golden values recorded from
Theano 1.0.5 where they are strings or lists)."""

from __future__ import annotations

import pickle
from collections import deque

import numpy as np
import pytest

import opgraph as theano
import opgraph.tensor as T
from opgraph.gof import graph as g
from opgraph.gof import type as gtype
from opgraph.gof import utils as gu


def test_as_string_marks_shared_subgraphs_as_theano_does() -> None:
    x, y = T.dvector("x"), T.dvector("y")
    a = x * 2 + y
    # Recorded from Theano 1.0.5.
    assert g.as_string([x, y], [a, a * a]) == [
        "*1 -> Elemwise{add,no_inplace}(Elemwise{mul,no_inplace}(x, "
        "InplaceDimShuffle{x}(TensorConstant{2})), y)",
        "Elemwise{mul,no_inplace}(*1, *1)",
    ]
    assert g.op_as_string([x, y], a.owner) == g.as_string([x, y], [a])[0]


def test_io_connection_pattern_and_is_same_graph() -> None:
    x, y = T.dvector("x"), T.dvector("y")
    a = x * 2 + y
    assert g.io_connection_pattern([x, y], [a, x * 2]) == [[True, True], [True, False]]
    assert g.is_same_graph(x * 2 + y, x * 2 + y)
    assert not g.is_same_graph(x * 2 + y, y + x * 2)
    assert g.is_same_graph(x * 2, y * 2, givens={x: y})
    assert not g.is_same_graph(x * 2, x * 3)


def test_stack_search_variables_and_orphans_list_of_nodes() -> None:
    x, y = T.dvector("x"), T.dvector("y")
    a = T.exp(x) + y
    order = g.stack_search(deque([a]), lambda v: v.owner.inputs if v.owner else None, "bfs")
    assert order[0] is a and x in order and y in order
    found, inv = g.stack_search(deque([a]), lambda v: v.owner and v.owner.inputs, "dfs", True)
    assert found[0] is a
    assert inv[y] == [a]
    variables, orphans = g.variables_and_orphans([x], [a])
    assert x in variables and y in variables and orphans == [y]
    nodes = g.list_of_nodes([x, y], [a])
    assert nodes == [a.owner, a.owner.inputs[0].owner]
    with pytest.raises(ValueError):
        g.stack_search(deque([a]), lambda v: None, "sideways")


def test_view_roots_and_is_in_ancestors() -> None:
    x = T.dmatrix("x")
    v = x.T[0]
    assert g.view_roots(v) == [x]
    assert g.view_roots(T.exp(x)) != [x]
    e = T.exp(x)
    s = e.sum()
    assert g.is_in_ancestors(s.owner, e.owner)
    assert not g.is_in_ancestors(e.owner, s.owner)


def test_nodes_constructed_collects_new_variables() -> None:
    x = T.dvector("x")
    with g.nodes_constructed() as new:
        y = T.exp(x)
    assert y in new and x not in new
    z = T.exp(x)
    assert z not in new  # the observer is removed after the block


def test_gof_utils_behave_as_theano() -> None:
    assert gu.uniq([3, 1, 3, 2, 1]) == [3, 1, 2]
    assert gu.difference([1, 2, 3, 4, 5], [2, 4, 6, 7]) == [1, 3, 5]
    assert gu.flatten([1, (2, [3, 4]), 5]) == [1, 2, 3, 4, 5]
    assert gu.remove(lambda v: v % 2, [1, 2, 3, 4]) == [2, 4]
    assert gu.to_return_values([7]) == 7 and gu.from_return_values(7) == [7]
    assert gu.toposort({1: set(), 2: {1}, 3: {1, 2}}) == [1, 2, 3]
    with pytest.raises(ValueError, match="Cannot sort topologically"):
        gu.toposort({1: {2}, 2: {1}})
    assert (
        gu.hist("abca") == {"a": 2, "b": 1, "c": 1} and gu.unique([1, 2]) and not gu.unique([1, 1])
    )
    # sha256 with Theano's 'm' prefix (Theano 1.0.5: hash_from_code('abc')).
    assert gu.hash_from_code("abc") == (
        "mba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )
    calls = []

    @gu.memoize
    def sq(v: int) -> int:
        calls.append(v)
        return v * v

    assert sq(3) == 9 and sq(3) == 9 and calls == [3]
    a, b = T.dscalar(), T.dscalar()
    gu.give_variables_names([a, b])
    assert {a.name, b.name} == {"_0", "_1"}
    assert gu._asarray([1, 2], "int32").dtype == np.int32
    assert gu._asarray([1.5], "floatX").dtype == theano.config.floatX


def test_simple_extract_stack_and_trace_string() -> None:
    stack = gu.simple_extract_stack()
    assert stack[-1][2] == "test_simple_extract_stack_and_trace_string"
    x = T.dvector("x")
    y = gu.add_tag_trace(T.exp(x))
    text = gu.get_variable_trace_string(y)
    assert "Backtrace when that variable is created" in text and "test_gof_helpers.py" in text


def test_enum_types() -> None:
    e = gtype.EnumType(ALPHA=1, BETA=("beta", 2.5), ctype="double")
    assert e.ALPHA == 1 and e.BETA == 2.5 and e.fromalias("beta") == 2.5
    assert e.filter("beta") == 2.5 and e.filter(True) == 1
    with pytest.raises(TypeError):
        e.filter(7)
    with pytest.raises(AttributeError, match="invalid enum name"):
        gtype.EnumType(alpha=1)
    with pytest.raises(TypeError):
        e["ALPHA"] = 3
    assert e == pickle.loads(pickle.dumps(e)) and hash(e) == hash(pickle.loads(pickle.dumps(e)))
    assert repr(e) == "EnumType<double>(ALPHA:1, BETA(beta):2.5)"
    lst = gtype.EnumList("A", ("B", "b"))
    assert (lst.A, lst.B, lst.filter("b"), lst.ctype) == (0, 1, 1, "int")
    c = gtype.CEnumType("X", "Y", ctype="size_t")
    assert (c.X, c.Y) == (0, 1) and c != gtype.EnumList("X", "Y", ctype="size_t")


def test_other_gof_types() -> None:
    assert gtype.PureType is gtype.Type and gtype.Generic()(None).type == gtype.generic

    class Unit(gtype.SingletonType):
        def filter(self, data, strict=False, allow_downcast=None):  # type: ignore[no-untyped-def]
            return data

    assert Unit() is Unit() and str(Unit()) == "Unit"
    cd = gtype.CDataType("void *")
    const = cd.make_constant(object())
    assert isinstance(const, gtype.CDataTypeConstant)
    assert not const.equals(cd.make_constant(object()))
    with pytest.raises(TypeError):
        cd.filter(None)

    class MyCType(gtype.CLinkerType):
        def filter(self, data, strict=False, allow_downcast=None):  # type: ignore[no-untyped-def]
            return data

    with pytest.raises(theano.gof.MethodNotDefined, match="opgraph_c_kernels"):
        MyCType().c_declare("name", {})
