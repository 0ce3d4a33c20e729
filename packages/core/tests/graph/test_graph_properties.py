"""Property tests on random DAGs: cloning, toposort, and random edits of a FunctionGraph."""

from collections import Counter

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from toy import add, constant, float64_matrix, mul, neg, split

from opgraph.graph.basic import Constant
from opgraph.graph.clone import clone, clone_get_equiv, is_same_graph_structure
from opgraph.graph.fg import FunctionGraph
from opgraph.graph.traversal import ancestors, applys_between, io_toposort

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _pick(draw, seq):
    return seq[draw(st.integers(0, len(seq) - 1))]


@st.composite
def random_graphs(draw, max_nodes=12):
    """Random toy DAGs: nodes with 1-3 inputs taken from earlier variables."""
    inputs = [float64_matrix(f"x{i}") for i in range(draw(st.integers(1, 4)))]
    pool = list(inputs)
    if draw(st.booleans()):
        pool.append(constant(np.full((2, 2), float(draw(st.integers(0, 3))))))
    for _ in range(draw(st.integers(0, max_nodes))):
        kind = draw(st.sampled_from(["add", "mul", "neg", "split"]))
        if kind in ("add", "mul"):
            args = [_pick(draw, pool) for _ in range(draw(st.integers(1, 3)))]
            pool.append((add if kind == "add" else mul)(*args))
        elif kind == "neg":
            pool.append(neg(_pick(draw, pool)))
        else:
            pool.extend(split(_pick(draw, pool)))
    outputs = [_pick(draw, pool) for _ in range(draw(st.integers(1, 3)))]
    return inputs, outputs


def _objects(outputs):
    vars_ = list(ancestors(outputs))
    return vars_ + [v.owner for v in vars_ if v.owner is not None]


@SETTINGS
@given(random_graphs())
def test_clone_preserves_structure_and_shares_nothing(graph):
    inputs, outputs = graph
    new_in, new_out = clone(inputs, outputs)
    assert is_same_graph_structure(outputs, new_out)
    old = {id(o) for o in _objects(outputs)} | {id(v) for v in inputs}
    assert not any(id(o) in old for o in [*_objects(new_out), *new_in])
    assert len(_objects(new_out)) == len(_objects(outputs))


@SETTINGS
@given(random_graphs())
def test_io_toposort_respects_dependencies_and_is_deterministic(graph):
    inputs, outputs = graph
    order = io_toposort(inputs, outputs)
    assert len(order) == len(set(order)) and set(order) == set(applys_between(inputs, outputs))
    position = {node: k for k, node in enumerate(order)}
    for node in order:
        for inp in node.inputs:
            if inp.owner is not None:
                assert position[inp.owner] < position[node]
    equiv = clone_get_equiv(inputs, outputs)
    order2 = io_toposort([equiv[i] for i in inputs], [equiv[o] for o in outputs])
    assert order2 == [equiv[n] for n in order]


def _recount(fg):
    """The clients of every variable, computed from scratch from the outputs."""
    expected = {v: Counter() for v in fg.variables}
    for node in applys_between(fg.inputs, fg.outputs):
        for i, inp in enumerate(node.inputs):
            expected[inp][(id(node), i)] += 1
    for i, out in enumerate(fg.outputs):
        expected[out][("output", i)] += 1
    return expected


def _assert_consistent(fg):
    fg.check_integrity()
    expected = _recount(fg)
    assert set(expected) == fg.variables
    for var, want in expected.items():
        have = Counter((c[0] if isinstance(c[0], str) else id(c[0]), c[1]) for c in var.clients)
        assert have == want, (var, var.clients)
    order = fg.toposort()
    assert set(order) == fg.apply_nodes and len(order) == len(fg.apply_nodes)
    position = {node: k for k, node in enumerate(order)}
    for node in order:
        assert all(position[i.owner] < position[node] for i in node.inputs if i.owner)


def _descendants(var):
    """Variables computed from ``var`` in its graph (through clients), ``var`` excluded."""
    out, stack = set(), [var]
    while stack:
        v = stack.pop()
        for node, _ in v.clients:
            if isinstance(node, str):
                continue
            for o in node.outputs:
                if o not in out:
                    out.add(o)
                    stack.append(o)
    return out


def _candidates(fg):
    """The graph's variables in a deterministic order."""
    seen, order = set(), []
    for v in [*fg.inputs, *(o for n in fg.toposort() for o in [*n.inputs, *n.outputs])]:
        if v not in seen:
            seen.add(v)
            order.append(v)
    return order


def _replacement(draw, fg, var):
    """A variable that may replace ``var`` without making a cycle."""
    banned = _descendants(var)
    allowed = [v for v in _candidates(fg) if v not in banned]
    kind = draw(st.sampled_from(["existing", "new_node", "constant"]))
    if kind == "existing":
        return _pick(draw, allowed)
    if kind == "constant":
        return constant(np.full((2, 2), float(draw(st.integers(0, 3)))))
    args = [_pick(draw, allowed) for _ in range(draw(st.integers(1, 3)))]
    op = draw(st.sampled_from([add, mul, neg]))
    return op(args[0]) if op is neg else op(*args)


def _random_edit(draw, fg):
    action = draw(st.sampled_from(["replace", "change_input", "add_output", "remove_output"]))
    cands = _candidates(fg)
    if action == "replace":
        var = _pick(draw, cands)
        fg.replace(var, _replacement(draw, fg, var), reason="random")
    elif action == "change_input" and fg.apply_nodes:
        node = _pick(draw, fg.toposort())
        i = draw(st.integers(0, len(node.inputs) - 1))
        banned = set().union(*(_descendants(o) | {o} for o in node.outputs))
        allowed = [v for v in cands if v not in banned]
        fg.change_node_input(node, i, _pick(draw, allowed), reason="random")
    elif action == "add_output":
        fg.add_output(_pick(draw, cands))
    elif action == "remove_output" and len(fg.outputs) > 1:
        fg.remove_output(draw(st.integers(0, len(fg.outputs) - 1)))


@SETTINGS
@given(random_graphs(), st.data())
def test_random_edits_keep_the_graph_consistent(graph, data):
    inputs, outputs = graph
    fg = FunctionGraph(inputs, outputs)
    _assert_consistent(fg)
    for _ in range(data.draw(st.integers(1, 8))):
        _random_edit(data.draw, fg)
        _assert_consistent(fg)
    for v in ancestors(outputs):  # the user's graph was never touched
        assert "clients" not in v.__dict__ and "fgraph" not in v.__dict__


@SETTINGS
@given(random_graphs(), st.data())
def test_revert_undoes_random_replacements(graph, data):
    inputs, outputs = graph
    fg = FunctionGraph(inputs, outputs)
    snapshot = fg.clone(check_integrity=False)
    nodes = set(fg.apply_nodes)
    constants = {v for v in fg.variables if isinstance(v, Constant)}
    chk = fg.checkpoint()
    for _ in range(data.draw(st.integers(1, 6))):
        var = _pick(data.draw, _candidates(fg))
        fg.replace(var, _replacement(data.draw, fg, var), reason="random")
    fg.revert(chk)
    _assert_consistent(fg)
    assert fg.apply_nodes == nodes
    assert {v for v in fg.variables if isinstance(v, Constant)} == constants
    assert is_same_graph_structure(fg.outputs, snapshot.outputs)
    assert str(fg) == str(snapshot)
