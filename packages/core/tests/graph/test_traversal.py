"""Graph walkers: inputs, ancestors, applys_between, io_toposort; no recursion over depth."""

import numpy as np
import pytest
from toy import add, chain, constant, float64_matrix, mul, neg, split

from opgraph.graph.basic import Constant
from opgraph.graph.traversal import (
    ancestors,
    applys_between,
    general_toposort,
    graph_inputs,
    io_toposort,
    orphans_between,
    variables_between,
    walk,
)


def test_graph_inputs_in_depth_first_input_order():
    x, y, z = (float64_matrix(n) for n in "xyz")
    b = add(z, add(x, y))
    assert graph_inputs([b]) == [z, x, y]
    assert graph_inputs([add(x, y), neg(z)]) == [x, y, z]
    assert graph_inputs([x]) == [x]


def test_graph_inputs_with_blockers():
    x, y = float64_matrix("x"), float64_matrix("y")
    inner = mul(x, y)
    out = add(inner, x)
    assert graph_inputs([out], blockers=[inner]) == [inner, x]


def test_ancestors_lists_each_variable_once():
    x, y = float64_matrix("x"), float64_matrix("y")
    inner = mul(x, y)
    out = add(inner, inner, x)
    anc = list(ancestors([out]))
    assert anc == [out, inner, x, y]
    assert list(ancestors([out], blockers=[inner])) == [out, inner, x]


def test_orphans_and_variables_between():
    x = float64_matrix("x")
    c = constant(np.ones((2, 2)))
    out = add(x, c)
    assert orphans_between([x], [out]) == [c]
    assert set(variables_between([x], [out])) == {out, x, c}


def test_applys_between():
    x, y = float64_matrix("x"), float64_matrix("y")
    inner = mul(x, y)
    out = add(neg(inner), inner)
    nodes = applys_between([x, y], [out])
    assert len(nodes) == 3 and set(nodes) == {out.owner, inner.owner, out.owner.inputs[0].owner}
    assert applys_between([inner], [out]) == [out.owner, out.owner.inputs[0].owner]


def test_io_toposort_order_and_determinism():
    x, y = float64_matrix("x"), float64_matrix("y")
    a = mul(x, y)
    b = neg(a)
    p, _n = split(b)
    out = add(p, a, b)
    order = io_toposort([x, y], [out])
    assert order == [a.owner, b.owner, p.owner, out.owner]
    assert order == io_toposort([x, y], [out])


def test_io_toposort_stops_at_inputs():
    x = float64_matrix("x")
    a = neg(x)
    out = neg(a)
    assert io_toposort([a], [out]) == [out.owner]


def test_io_toposort_computes_a_node_one_of_whose_outputs_is_given():
    x = float64_matrix("x")
    first, second = split(x)
    assert io_toposort([first], [second]) == [second.owner]


def test_io_toposort_with_orderings():
    x = float64_matrix("x")
    a, b = neg(x), mul(x, x)
    out = add(a, b)
    # Theano's order: a node's last input is computed first
    assert io_toposort([x], [out]) == [b.owner, a.owner, out.owner]
    order = io_toposort([x], [out], {b.owner: [a.owner]})
    assert order == [a.owner, b.owner, out.owner]


def test_io_toposort_detects_a_cycle():
    x = float64_matrix("x")
    a = neg(x)
    b = neg(a)
    a.owner.inputs[0] = b  # rewire by hand: a -> b -> a
    with pytest.raises(ValueError, match="cycle"):
        io_toposort([x], [b])
    with pytest.raises(ValueError, match="cycle"):
        io_toposort([x], [b], {})


def test_orderings_cycle_is_detected():
    x = float64_matrix("x")
    a = neg(x)
    b = neg(a)
    with pytest.raises(ValueError, match="cycle"):
        io_toposort([x], [b], {a.owner: [b.owner]})


def test_walk_bfs_and_dfs():
    tree = {1: [2, 3], 2: [4], 3: [4], 4: []}
    assert list(walk([1], tree.get)) == [1, 2, 3, 4]
    assert list(walk([1], tree.get, bfs=False)) == [1, 2, 4, 3]


def test_general_toposort():
    deps = {"a": ["b", "c"], "b": ["c"], "c": []}
    assert general_toposort(["a"], deps.get) == ["c", "b", "a"]


def test_deep_chain_without_recursion(gc_paused):
    x, out = chain(16000)
    order = io_toposort([x], [out])
    assert len(order) == 16000 and order[0].inputs[0] is x and order[-1] is out.owner
    assert graph_inputs([out]) == [x]
    assert len(list(ancestors([out]))) == 16001
    assert len(applys_between([x], [out])) == 16000
    assert not isinstance(graph_inputs([out])[0], Constant)
