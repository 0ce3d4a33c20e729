"""FunctionGraph: cloning, clients, imports, replacements, pruning, integrity, pickling."""

import copy
import pickle
import sys

import numpy as np
import pytest
from toy import (
    ToyType,
    add,
    cast,
    chain,
    constant,
    float32_matrix,
    float64_matrix,
    mul,
    neg,
    split,
    sum_,
)

from opgraph.graph.basic import Apply, Constant
from opgraph.graph.clone import is_same_graph_structure
from opgraph.graph.features import NodeFinder
from opgraph.graph.fg import FunctionGraph, IntegrityError, MissingInputError
from opgraph.graph.traversal import ancestors

vector = ToyType("float64", 1)


def _xyz():
    return float64_matrix("x"), float64_matrix("y"), float64_matrix("z")


def _untouched(outputs):
    for v in ancestors(outputs):
        assert "clients" not in v.__dict__ and "fgraph" not in v.__dict__
        if v.owner is not None:
            assert "fgraph" not in v.owner.__dict__


# ---------------------------------------------------------------- the documented clients


def test_clients_as_documented():
    v = vector("v")
    one = constant(np.ones(1), type=vector)
    fg = FunctionGraph([v], [sum_(add(v, one))])
    topo = fg.toposort()
    assert [n.op for n in topo] == [add, sum_]
    assert topo[0].outputs[0].clients == [(topo[1], 0)]
    assert topo[1].outputs[0].clients == [("output", 0)]
    var = topo[0].outputs[0]
    client = var.clients[0]
    assert repr(client) == "(Sum{acc_dtype='float64'}(Add.0), 0)"
    assert type(client[0]) is Apply and client[0].inputs[client[1]] is var
    var = topo[1].outputs[0]
    client = var.clients[0]
    assert client == ("output", 0) and fg.outputs[client[1]] is var
    assert fg.inputs[0].clients == [(topo[0], 0)]
    assert topo[0].inputs[1].clients == [(topo[0], 1)]  # the constant


def test_clients_list_node_uses_then_outputs():
    x = float64_matrix("x")
    a = neg(x)
    fg = FunctionGraph([x], [a, mul(a, a)])
    fa, fm = fg.outputs
    assert fa.clients == [(fm.owner, 0), (fm.owner, 1), ("output", 0)]
    assert fm.clients == [("output", 1)]
    fg2 = FunctionGraph([x], [a, a])
    assert fg2.outputs[0].clients == [("output", 0), ("output", 1)]


def test_clients_mapping_view():
    x, y, _ = _xyz()
    fg = FunctionGraph([x, y], [add(x, y)])
    fx, _fy = fg.inputs
    view = fg.clients
    assert view[fx] is fx.clients and len(view) == len(fg.variables) == 3
    assert fx in view and x not in view
    assert set(view) == fg.variables
    with pytest.raises(KeyError):
        view[x]
    with pytest.raises(TypeError):
        view[fx] = []  # read-only


def test_every_variable_and_node_knows_its_fgraph():
    x, y, z = _xyz()
    fg = FunctionGraph([x, y, z], [add(x, mul(y, z), constant(np.ones((1, 1))))])
    assert len(fg.apply_nodes) == 2 and len(fg.variables) == 6
    assert all(n.fgraph is fg for n in fg.apply_nodes)
    assert all(v.fgraph is fg for v in fg.variables)
    fg.check_integrity()


# ---------------------------------------------------------------- construction


def test_user_graph_is_cloned_and_untouched():
    x, y, z = _xyz()
    out = add(x, mul(y, z))
    fg = FunctionGraph([x, y, z], [out])
    _untouched([out])
    assert fg.inputs[0] is not x and fg.outputs[0] is not out
    assert fg.memo[x] is fg.inputs[0] and fg.memo[out] is fg.outputs[0]
    assert fg.memo[out.owner] is fg.outputs[0].owner
    assert is_same_graph_structure([out], fg.outputs)
    assert [v.name for v in fg.inputs] == ["x", "y", "z"]


def test_no_clone_uses_the_user_graph():
    x, y, _ = _xyz()
    out = add(x, y)
    fg = FunctionGraph([x, y], [out], clone=False)
    assert fg.inputs == [x, y] and fg.outputs == [out] and fg.memo == {}
    assert x.clients == [(out.owner, 0)] and out.owner.fgraph is fg
    with pytest.raises(ValueError, match="already belongs to another FunctionGraph"):
        FunctionGraph([x, y], [out], clone=False)
    FunctionGraph([x, y], [out])  # cloning is always fine
    fg.disown()
    _untouched([out])
    FunctionGraph([x, y], [out], clone=False).check_integrity()


def test_constant_input_is_a_type_error():
    x = float64_matrix("x")
    c = constant(np.ones((2, 2)))
    with pytest.raises(
        TypeError, match=r"(?s)input 1 \(Constant.*a Constant cannot be an input of a"
    ):
        FunctionGraph([x, c], [add(x, c)])
    fg = FunctionGraph([x], [x])
    with pytest.raises(TypeError, match="its value is already known; remove it from the inputs"):
        fg.add_input(c)


def test_duplicate_and_bad_inputs():
    x = float64_matrix("x")
    with pytest.raises(ValueError, match=r"input 1 \(x\) is given twice"):
        FunctionGraph([x, x], [neg(x)])
    with pytest.raises(TypeError, match="input 0 of the FunctionGraph must be a Variable"):
        FunctionGraph([1.0], [neg(x)])
    with pytest.raises(TypeError, match="output 0 of the FunctionGraph must be a Variable"):
        FunctionGraph([x], ["y"])
    with pytest.raises(TypeError, match="list of Variables"):
        FunctionGraph([x], neg(x))
    a = neg(x)
    with pytest.raises(ValueError, match="is the output of"):
        FunctionGraph([a], [neg(a)], clone=False)
    _untouched([a])


def test_intermediate_input_is_cut_when_cloning():
    x = float64_matrix("x")
    a = neg(x)
    fg = FunctionGraph([a], [neg(a)])
    assert fg.inputs[0].owner is None and len(fg.apply_nodes) == 1


def test_missing_input_names_the_variable_and_its_line():
    x = float64_matrix("x")
    y = float64_matrix("y")  # the line the error must show
    out = add(x, neg(y))
    with pytest.raises(MissingInputError) as info:
        FunctionGraph([x], [out])
    msg = str(info.value)
    assert "'y'" in msg and "input 0 of Neg(y)" in msg
    assert "test_fgraph.py" in msg and 'y = float64_matrix("y")  # the line the error' in msg
    assert "HINT" in msg
    assert info.value.variable is y
    assert isinstance(info.value, ValueError)
    _untouched([out])


def test_missing_input_as_output_and_without_clone():
    x, y, _ = _xyz()
    with pytest.raises(MissingInputError, match="an output of the graph"):
        FunctionGraph([x], [y])
    out = mul(x, y)
    with pytest.raises(MissingInputError) as info:
        FunctionGraph([x], [out], clone=False)
    assert info.value.variable is y
    _untouched([out])  # a failed construction releases everything


def test_constants_and_unused_inputs():
    x, y, _ = _xyz()
    c = constant(np.ones((2, 2)))
    fg = FunctionGraph([x, y], [add(x, c)])
    fy = fg.inputs[1]
    assert fy.clients == [] and fy in fg.variables
    assert sum(isinstance(v, Constant) for v in fg.variables) == 1
    fg.check_integrity()
    cfg = FunctionGraph([], [c])
    assert cfg.outputs[0].clients == [("output", 0)] and not cfg.apply_nodes
    assert cfg.outputs[0] is not c


def test_multi_output_node_with_an_unused_output():
    x = float64_matrix("x")
    p, _n = split(x)
    fg = FunctionGraph([x], [neg(p)])
    (node,) = [nd for nd in fg.apply_nodes if nd.op == split]
    assert node.outputs[1].clients == [] and node.outputs[1] in fg.variables
    fg.check_integrity()


# ---------------------------------------------------------------- replace


def test_replace_an_inner_variable_prunes_the_old_subgraph():
    x, y, z = _xyz()
    inner = mul(y, z)
    fg = FunctionGraph([x, y, z], [add(x, inner)])
    _fx, fy, fz = fg.inputs
    finner = fg.memo[inner]
    fg.replace(finner, neg(fz), reason="test")
    assert fg.outputs[0].owner.inputs[1].owner.op == neg
    assert finner.owner not in fg.apply_nodes and finner not in fg.variables
    assert finner.owner.fgraph is None
    assert fy.clients == [] and fz.clients == [(fg.outputs[0].owner.inputs[1].owner, 0)]
    assert str(fg) == "FunctionGraph(Add(x, Neg(z)))"
    fg.check_integrity()


def test_replace_an_output():
    x, y, _ = _xyz()
    fg = FunctionGraph([x, y], [add(x, y)])
    fx, fy = fg.inputs
    old = fg.outputs[0]
    new = mul(fx, fy)
    fg.replace(old, new)
    assert fg.outputs == [new] and new.clients == [("output", 0)]
    assert old.owner not in fg.apply_nodes and old.clients == []
    assert fx.clients == [(new.owner, 0)]
    fg.check_integrity()
    fg.replace(new, fx)
    assert fg.outputs == [fx] and not fg.apply_nodes
    assert fx.clients == [("output", 0)] and fy.clients == []
    fg.check_integrity()


def test_replace_inserting_a_node_that_uses_the_replaced_variable():
    x = float64_matrix("x")
    fg = FunctionGraph([x], [neg(x)])
    fx = fg.inputs[0]
    wrapped = mul(fx, fx)
    fg.replace(fx, wrapped)
    assert str(fg) == "FunctionGraph(Neg(Mul(x, x)))"
    assert fx.clients == [(wrapped.owner, 0), (wrapped.owner, 1)]
    fg.check_integrity()


def test_replace_with_incompatible_type_names_both_and_changes_nothing():
    x, y, _ = _xyz()
    fg = FunctionGraph([x, y], [add(x, neg(y))])
    before = str(fg)
    target = fg.outputs[0].owner.inputs[1]
    bad = cast(fg.inputs[0], "float32")
    with pytest.raises(TypeError) as info:
        fg.replace(target, bad, reason="bad_rewrite")
    msg = str(info.value)
    assert "ToyType(float64, 2d)" in msg and "ToyType(float32, 2d)" in msg
    assert "bad_rewrite" in msg
    assert str(fg) == before and bad.owner not in fg.apply_nodes
    assert "fgraph" not in bad.owner.__dict__
    fg.check_integrity()
    with pytest.raises(TypeError, match="float32"):
        fg.replace_all([(fg.inputs[0], neg(fg.inputs[1])), (target, bad)])
    assert str(fg) == before
    fg.check_integrity()


def test_replace_with_a_value_makes_a_constant():
    x, y, _ = _xyz()
    fg = FunctionGraph([x, y], [add(x, y)])
    fg.replace(fg.inputs[1], np.zeros((2, 2)))
    assert isinstance(fg.outputs[0].owner.inputs[1], Constant)
    fg.check_integrity()


def test_replace_of_a_variable_not_in_the_graph_does_nothing():
    x, y, _ = _xyz()
    fg = FunctionGraph([x, y], [add(x, y)])
    fg.replace(float64_matrix("other"), fg.inputs[0])
    other = FunctionGraph([x], [neg(x)])
    with pytest.raises(ValueError, match="another FunctionGraph"):
        fg.replace(other.outputs[0], fg.inputs[0])
    with pytest.raises(ValueError, match="another FunctionGraph"):
        fg.replace(fg.inputs[0], other.outputs[0])
    fg.check_integrity()
    other.check_integrity()


def test_replace_with_missing_input_and_import_missing():
    x, _, _ = _xyz()
    fg = FunctionGraph([x], [neg(x)])
    w = float64_matrix("w")
    with pytest.raises(MissingInputError, match="'w'"):
        fg.replace(fg.inputs[0], add(fg.inputs[0], w))
    fg.check_integrity()
    assert str(fg) == "FunctionGraph(Neg(x))"
    fg.replace(fg.inputs[0], add(fg.inputs[0], w), import_missing=True)
    assert fg.inputs[1] is w and str(fg) == "FunctionGraph(Neg(Add(x, w)))"
    fg.check_integrity()


def test_replace_all_pairs_and_mapping():
    x, y, z = _xyz()
    fg = FunctionGraph([x, y, z], [add(x, y), mul(y, z)])
    fx, fy, fz = fg.inputs
    fg.replace_all([(fg.outputs[0], fz), (fy, neg(fx))], reason="pairs")
    assert str(fg) == "FunctionGraph(z, Mul(Neg(x), z))"
    fg.replace_all({fz: fx})
    assert str(fg) == "FunctionGraph(x, Mul(Neg(x), x))"
    fg.check_integrity()


# ---------------------------------------------------------------- change_node_input


def test_change_node_input():
    x, y, _ = _xyz()
    fg = FunctionGraph([x, y], [add(neg(x), y)])
    fx, fy = fg.inputs
    node = fg.outputs[0].owner
    old = node.inputs[0]
    fg.change_node_input(node, 0, fy, reason="test")
    assert node.inputs == [fy, fy] and fy.clients == [(node, 1), (node, 0)]
    assert old.owner not in fg.apply_nodes and fx.clients == []
    fg.check_integrity()
    fg.change_input(node, 1, neg(fx))  # Theano's name
    assert str(fg) == "FunctionGraph(Add(y, Neg(x)))"
    fg.check_integrity()
    with pytest.raises(TypeError, match=r"ToyType\(float32, 2d\).*ToyType\(float64, 2d\)"):
        fg.change_node_input(node, 0, float32_matrix("f"))
    with pytest.raises(ValueError, match="not in this graph"):
        fg.change_node_input(neg(fx).owner, 0, fy)
    with pytest.raises(ValueError, match="'output'"):
        fg.change_node_input("outputs", 0, fy)
    fg.check_integrity()


def test_change_node_input_of_an_output():
    x, y, _ = _xyz()
    fg = FunctionGraph([x, y], [add(x, y)])
    fx, _fy = fg.inputs
    fg.change_node_input("output", 0, fx)
    assert fg.outputs == [fx] and fx.clients == [("output", 0)] and not fg.apply_nodes
    fg.change_node_input("output", 0, fx)  # no-op
    fg.check_integrity()


# ---------------------------------------------------------------- inputs, outputs, removal


def test_add_input_add_output_remove_output():
    x, y, _ = _xyz()
    fg = FunctionGraph([x], [neg(x)])
    fx = fg.inputs[0]
    fg.add_input(y)
    fg.add_input(y)  # already there: nothing happens
    assert fg.inputs == [fx, y] and y.clients == []
    fg.add_output(add(fx, y))
    fg.add_output(fx)
    assert len(fg.outputs) == 3 and fx.clients[-1] == ("output", 2)
    fg.check_integrity()
    fg.update_mapping = {1: 0, 2: 1}
    fg.remove_output(1)
    assert len(fg.outputs) == 2 and fg.outputs[1] is fx
    assert fx.clients[-1] == ("output", 1) and y.clients == []
    assert fg.update_mapping == {1: 1}
    fg.check_integrity()
    with pytest.raises(ValueError, match="is the output of"):
        fg.add_input(neg(x))


def test_remove_node_only_if_unused():
    x = float64_matrix("x")
    fg = FunctionGraph([x], [neg(neg(x))])
    top = fg.outputs[0].owner
    with pytest.raises(ValueError, match="still used"):
        fg.remove_node(top)
    fg.change_node_input("output", 0, fg.inputs[0])
    with pytest.raises(ValueError, match="not a node of this FunctionGraph"):
        fg.remove_node(top)
    fg.check_integrity()


def test_remove_client_prunes_iteratively_with_callbacks():
    x = float64_matrix("x")
    fg = FunctionGraph([x], [neg(neg(neg(x)))])
    pruned = []

    class Spy:
        def on_prune(self, fgraph, node, reason):
            pruned.append((node, reason))

    fg.attach_feature(Spy())
    nodes = fg.toposort()
    out = fg.outputs[0]
    fg.remove_output(0, reason="drop")
    assert [n for n, _ in pruned] == nodes[::-1] and {r for _, r in pruned} == {"drop"}
    assert not fg.apply_nodes and fg.variables == {fg.inputs[0]} and out.clients == []
    assert all(n.tag.removed_by == ["drop"] for n in nodes)
    fg.check_integrity()


def test_constant_leaves_the_graph_when_unused():
    x = float64_matrix("x")
    c = constant(np.ones((2, 2)))
    fg = FunctionGraph([x], [add(x, c)])
    (fc,) = [v for v in fg.variables if isinstance(v, Constant)]
    fg.replace(fg.outputs[0], fg.inputs[0])
    assert fc not in fg.variables and fc.fgraph is None
    fg.check_integrity()


# ---------------------------------------------------------------- toposort


def test_toposort_is_cached_and_invalidated():
    x, y, _ = _xyz()
    fg = FunctionGraph([x, y], [add(neg(x), y)])
    first = fg.toposort()
    assert fg.toposort() == first and fg.toposort() is not fg.toposort()
    fg.toposort().clear()  # callers get a copy
    assert fg.toposort() == first
    fg.replace(fg.inputs[1], mul(fg.inputs[0], fg.inputs[0]))
    new = fg.toposort()
    assert len(new) == 3 and set(new) == fg.apply_nodes
    fg.check_integrity()


def test_toposort_invalidated_by_rewiring_to_a_later_variable():
    x, y, _ = _xyz()
    fg = FunctionGraph([x, y], [add(neg(x), neg(y), x)])
    neg_x, neg_y, top = fg.toposort()
    fg.change_node_input(neg_x, 0, neg_y.outputs[0])  # nothing is imported or pruned
    assert fg.toposort() == [neg_y, neg_x, top]
    fg.check_integrity()


def test_toposort_small_graphs():
    x = float64_matrix("x")
    assert FunctionGraph([x], [x]).toposort() == []
    fg = FunctionGraph([x], [neg(x)])
    assert fg.toposort() == [fg.outputs[0].owner]


# ---------------------------------------------------------------- check_integrity


def _fg():
    x, y, _ = _xyz()
    return FunctionGraph([x, y], [add(neg(x), y)])


def test_check_integrity_stale_client():
    fg = _fg()
    fg.inputs[1].clients.append((fg.outputs[0].owner, 0))
    with pytest.raises(IntegrityError, match=r"variable y has inconsistent clients: stale"):
        fg.check_integrity()


def test_check_integrity_missing_client():
    fg = _fg()
    fg.inputs[1].clients.clear()
    with pytest.raises(IntegrityError, match=r"variable y has inconsistent clients: stale \[\], "):
        fg.check_integrity()


def test_check_integrity_missing_output_client():
    fg = _fg()
    fg.outputs[0].clients.clear()
    with pytest.raises(IntegrityError, match=r"missing \[\('output', 0\)\]"):
        fg.check_integrity()


def test_check_integrity_duplicate_client():
    fg = _fg()
    fg.inputs[1].clients.append(fg.inputs[1].clients[0])
    with pytest.raises(IntegrityError, match="duplicate clients"):
        fg.check_integrity()


def test_check_integrity_stale_node_set():
    fg = _fg()
    fg.apply_nodes.add(neg(fg.inputs[0]).owner)
    with pytest.raises(
        IntegrityError, match=r"apply_nodes is out of date: missing \[\], in excess"
    ):
        fg.check_integrity()


def test_check_integrity_node_rewired_behind_its_back():
    fg = _fg()
    node = fg.outputs[0].owner
    node.inputs[0] = fg.inputs[0]  # bypasses change_node_input
    with pytest.raises(IntegrityError, match="out of date"):
        fg.check_integrity()


def test_check_integrity_foreign_node():
    fg = _fg()
    node = fg.outputs[0].owner
    node.fgraph = None
    with pytest.raises(IntegrityError, match="does not belong to this FunctionGraph"):
        fg.check_integrity()


def test_check_integrity_cycle():
    fg = _fg()
    neg_node = fg.outputs[0].owner.inputs[0].owner
    x = neg_node.inputs[0]
    neg_node.inputs[0] = neg_node.outputs[0]
    neg_node.outputs[0].clients.append((neg_node, 0))
    x.clients.clear()
    with pytest.raises(IntegrityError, match="cycle"):
        fg.check_integrity()


def test_check_integrity_stale_toposort():
    fg = _fg()
    fg.toposort()
    fg._toposort.reverse()
    with pytest.raises(IntegrityError, match="cached toposort puts"):
        fg.check_integrity()
    fg._toposort.pop()
    with pytest.raises(IntegrityError, match="exactly the graph's nodes"):
        fg.check_integrity()


def test_check_integrity_bad_owner_index():
    fg = _fg()
    fg.outputs[0].index = 3
    with pytest.raises(IntegrityError, match="index 3"):
        fg.check_integrity()


# ---------------------------------------------------------------- printing, copies, pickling


def test_str_nests_and_names_shared_nodes():
    x, y, _ = _xyz()
    assert str(FunctionGraph([x, y], [add(x, add(y, x))])) == "FunctionGraph(Add(x, Add(y, x)))"
    shared = mul(x, y)
    fg = FunctionGraph([x, y], [add(shared, neg(shared)), shared])
    assert str(fg) == "FunctionGraph(Add(*1 -> Mul(x, y), Neg(*1)), *1)"
    p, n = split(x)
    assert str(FunctionGraph([x], [add(p, n)])) == "FunctionGraph(Add(*1 -> Split(x), *1::1))"
    assert repr(fg) == str(fg)
    c = constant(np.zeros((1, 1)))
    assert str(FunctionGraph([x], [add(x, c)])) == "FunctionGraph(Add(x, Constant{[[0.]]}))"


def test_clone_of_a_function_graph():
    x, y, _ = _xyz()
    fg = FunctionGraph([x, y], [add(neg(x), y)], update_mapping={0: 1})
    fg2, equiv = fg.clone_get_equiv()
    assert fg2 is not fg and str(fg2) == str(fg) and fg2.update_mapping == {0: 1}
    assert all(equiv[n] in fg2.apply_nodes for n in fg.apply_nodes)
    assert not (fg2.variables & fg.variables) and not (fg2.apply_nodes & fg.apply_nodes)
    fg2.replace(fg2.inputs[1], fg2.inputs[0])
    assert str(fg) == "FunctionGraph(Add(Neg(x), y))"
    fg.check_integrity()
    fg2.check_integrity()
    finder = NodeFinder()
    fg.attach_feature(finder)
    fg3 = fg.clone()
    assert is_same_graph_structure(fg.outputs, fg3.outputs)
    assert fg3.features[1] is finder  # the same features are attached
    assert fg3.get_nodes(neg) == [fg3.outputs[0].owner.inputs[0].owner]
    assert fg.get_nodes(neg) == [fg.outputs[0].owner.inputs[0].owner]


def test_pickle_round_trip():
    x, y, _ = _xyz()
    c = constant(np.ones((2, 2)))
    fg = FunctionGraph([x, y], [add(neg(x), y, c), mul(x, y)])
    fg2 = pickle.loads(pickle.dumps(fg))
    fg2.check_integrity()
    assert str(fg2) == str(fg)
    assert [v.name for v in fg2.inputs] == ["x", "y"]
    topo = fg2.toposort()
    assert [n.op for n in topo] == [neg, add, mul]
    assert topo[0].outputs[0].clients == [(topo[1], 0)]
    fg2.replace_validate(fg2.inputs[1], fg2.inputs[0])
    chk = fg2.checkpoint()
    fg2.replace(fg2.inputs[0], neg(fg2.inputs[0]))
    fg2.revert(chk)
    fg2.check_integrity()
    assert str(fg) == "FunctionGraph(Add(Neg(x), y, Constant{[[1. 1.]\n [1. 1.]]}), Mul(x, y))"
    assert fg2.memo == {} and fg.memo  # the caller's graph is not pickled along


def test_pickle_a_variable_of_a_graph_brings_its_graph():
    x, y, _ = _xyz()
    fg = FunctionGraph([x, y], [add(neg(x), y)])
    out = pickle.loads(pickle.dumps(fg.outputs[0]))
    assert out.fgraph is not fg and out.fgraph.outputs == [out]
    assert str(out.owner) == "Add(Neg.0, y)" and out.clients == [("output", 0)]
    out.fgraph.check_integrity()
    fg3 = copy.deepcopy(fg)
    fg3.check_integrity()
    assert str(fg3) == str(fg) and not (fg3.variables & fg.variables)
    shallow = copy.copy(fg.outputs[0])
    assert shallow.owner is fg.outputs[0].owner and shallow.clients == [("output", 0)]


def test_deep_chain_every_operation(gc_paused):
    x, out = chain(16000)
    limit = sys.getrecursionlimit()
    assert limit < 16000
    fg = FunctionGraph([x], [out])
    assert len(fg.apply_nodes) == 16000
    topo = fg.toposort()
    assert topo[0].inputs[0] is fg.inputs[0] and topo[-1] is fg.outputs[0].owner
    fg.check_integrity()
    fg2 = fg.clone(check_integrity=False)
    assert len(fg2.toposort()) == 16000
    assert str(fg).startswith("FunctionGraph(Neg(Neg(") and str(fg).endswith("(x)" + ")" * 16000)
    fg3 = pickle.loads(pickle.dumps(fg))
    fg3.check_integrity()
    assert len(fg3.toposort()) == 16000
    fg.replace(topo[8000].outputs[0], fg.inputs[0])  # prunes 8001 nodes iteratively
    assert len(fg.apply_nodes) == 7999
    fg.replace(fg.inputs[0], mul(fg.inputs[0], fg.inputs[0]))
    fg.check_integrity()
    fg2.replace(fg2.outputs[0], fg2.inputs[0])
    assert not fg2.apply_nodes
    fg2.check_integrity()
