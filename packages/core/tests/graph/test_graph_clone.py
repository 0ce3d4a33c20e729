"""clone, clone_get_equiv, clone_replace: copies share nothing and keep the structure."""

import numpy as np
import pytest
from toy import add, constant, float32_matrix, float64_matrix, mul, neg, split

from opgraph.graph.basic import Apply, Constant
from opgraph.graph.clone import clone, clone_get_equiv, clone_replace, is_same_graph_structure
from opgraph.graph.traversal import ancestors, applys_between, graph_inputs


def _graph():
    x, y = float64_matrix("x"), float64_matrix("y")
    c = constant(np.ones((2, 2)), name="one")
    p, n = split(x)
    out = add(mul(p, y), neg(n), c, p)
    return [x, y], [out, p]


def _all_objects(outputs):
    vars_ = list(ancestors(outputs))
    return vars_ + [v.owner for v in vars_ if v.owner is not None]


def test_clone_shares_nothing_and_keeps_structure():
    inputs, outputs = _graph()
    new_in, new_out = clone(inputs, outputs)
    old_ids = {id(o) for o in _all_objects(outputs)}
    assert not any(id(o) in old_ids for o in _all_objects(new_out))
    assert is_same_graph_structure(outputs, new_out)
    assert [v.name for v in new_in] == ["x", "y"]
    assert new_out[0].owner.inputs[2].name == "one"
    assert graph_inputs(new_out) == [*new_in, new_out[0].owner.inputs[2]]


def test_clone_keeps_inputs_when_asked():
    inputs, outputs = _graph()
    new_in, new_out = clone(inputs, outputs, copy_inputs=False, copy_orphans=False)
    assert new_in == inputs
    const = [v for v in graph_inputs(new_out) if isinstance(v, Constant)]
    assert const == [outputs[0].owner.inputs[2]]
    assert new_out[0] is not outputs[0]


def test_clone_get_equiv_maps_every_variable_and_node():
    inputs, outputs = _graph()
    equiv = clone_get_equiv(inputs, outputs)
    for obj in _all_objects(outputs):
        assert obj in equiv and equiv[obj] is not obj
        assert type(equiv[obj]) is type(obj)
    for node in applys_between(inputs, outputs):
        new = equiv[node]
        assert [equiv[i] for i in node.inputs] == new.inputs
        assert [equiv[o] for o in node.outputs] == new.outputs
        assert isinstance(new, Apply) and new.op == node.op


def test_clone_keeps_names_and_tags():
    inputs, outputs = _graph()
    outputs[0].name = "out"
    outputs[0].tag.hint = 1
    _, new_out = clone(inputs, outputs)
    assert new_out[0].name == "out" and new_out[0].tag.hint == 1
    assert new_out[0].tag is not outputs[0].tag


def test_clone_of_constant_or_input_output():
    x = float64_matrix("x")
    c = constant(np.zeros((2, 2)))
    new_in, new_out = clone([x], [x, c])
    assert new_out[0] is new_in[0] and new_out[0] is not x
    assert new_out[1] is not c and new_out[1].equals(c)


def test_structure_comparison_notices_differences():
    x, y = float64_matrix("x"), float64_matrix("y")
    assert is_same_graph_structure([add(x, y)], [add(y, x)])  # positions, not identities
    assert not is_same_graph_structure([add(x, y)], [mul(x, y)])
    assert not is_same_graph_structure([add(x, y)], [add(x, x)])
    assert not is_same_graph_structure([add(x, neg(y))], [add(neg(x), y)])


def test_clone_replace_with_compatible_type():
    x, y = float64_matrix("x"), float64_matrix("y")
    z = float64_matrix("z")
    inner = mul(x, y)
    out = add(inner, x)
    new = clone_replace(out, {x: z})
    assert new is not out
    assert new.owner.inputs[1] is z and new.owner.inputs[0].owner.inputs == [z, y]
    assert out.owner.inputs[1] is x  # the original is untouched
    new2 = clone_replace(out, [(inner, neg(y))])
    assert new2.owner.inputs[0].owner.op == neg and new2.owner.inputs[1] is x
    assert clone_replace([out], {})[0] is not out


def test_clone_replace_with_incompatible_type():
    x, y = float64_matrix("x"), float64_matrix("y")
    out = add(x, y)
    with pytest.raises(TypeError, match=r"float32.*float64"):
        clone_replace(out, {x: float32_matrix("z")})
    rebuilt = clone_replace(out, {x: float32_matrix("a"), y: float32_matrix("b")}, strict=False)
    assert rebuilt.type == float32_matrix
    with pytest.raises(TypeError, match="keys must be Variables"):
        clone_replace(out, {"x": y})


def test_clone_replace_value_becomes_constant():
    x, y = float64_matrix("x"), float64_matrix("y")
    new = clone_replace(add(x, y), {y: np.ones((2, 2))})
    assert isinstance(new.owner.inputs[1], Constant)


def test_clone_replace_share_inputs():
    x, y = float64_matrix("x"), float64_matrix("y")
    out = add(x, y)
    shared = clone_replace(out, {y: neg(y)})
    assert shared.owner.inputs[0] is x
    copied = clone_replace(out, {y: neg(y)}, share_inputs=False)
    assert copied.owner.inputs[0] is not x and copied.owner.inputs[0].name == "x"
