"""Variable, Constant, Apply, Type and Op exactly as the graph-structures documentation shows."""

import pickle

import numpy as np
import pytest
from toy import ToyType, add, constant, float32_matrix, float64_matrix, mul, neg, split, sum_

from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.op import Op
from opgraph.graph.type import Generic, Type, generic
from opgraph.graph.utils import MetaObject, MethodNotDefined


def test_long_example_wiring():
    x = Variable(type=float64_matrix, name="x")
    y = Variable(type=float64_matrix, name="y")
    z = Variable(type=float64_matrix, name="z")
    mul_variable = Variable(type=float64_matrix)
    assert mul_variable.owner is None
    node_mul = Apply(op=mul, inputs=[y, z], outputs=[mul_variable])
    assert mul_variable.owner is node_mul
    assert mul_variable.index == 0
    add_variable = Variable(type=float64_matrix)
    assert add_variable.owner is None
    node_add = Apply(op=add, inputs=[x, mul_variable], outputs=[add_variable])
    assert add_variable.owner is node_add
    assert add_variable.index == 0
    e = add_variable
    assert e.owner.inputs[0] is x
    assert e.owner.inputs[1] is mul_variable
    assert e.owner.inputs[1].owner.inputs[0] is y
    assert e.owner.inputs[1].owner.inputs[1] is z


def test_short_example_builds_the_same_structure():
    x, y, z = (float64_matrix(n) for n in "xyz")
    e = add(x, mul(y, z))
    assert e.owner.op == add and e.owner.inputs[0] is x
    inner = e.owner.inputs[1]
    assert inner.owner.op == mul and inner.owner.inputs == [y, z]
    assert x.owner is None and y.owner is None and z.owner is None
    assert e.owner.outputs == [e] and e.index == 0


def test_apply_sets_owner_and_index_of_every_output():
    x = float64_matrix("x")
    a, b = float64_matrix(), float64_matrix()
    node = Apply(split, [x], [a, b])
    assert (a.owner, a.index, b.owner, b.index) == (node, 0, node, 1)
    assert node.nin == 1 and node.nout == 2
    assert node.get_parents() == [x]
    assert a.get_parents() == [node] and x.get_parents() == []


def test_automatic_wrapping_of_constants():
    x = float64_matrix("x")
    e = add(x, np.ones((2, 2)))
    c = e.owner.inputs[1]
    assert isinstance(c, Constant) and c.owner is None
    assert c.type == float64_matrix


def test_str_and_repr_formats():
    x = float64_matrix("x")
    anon = float64_matrix()
    assert str(x) == repr(x) == "x"
    assert str(anon) == "<ToyType(float64, 2d)>"
    e = add(x, anon)
    assert str(e) == "Add.0"
    assert str(e.owner) == repr(e.owner) == "Add(x, <ToyType(float64, 2d)>)"
    s = sum_(e)
    assert str(s.owner) == "Sum{acc_dtype='float64'}(Add.0)"
    p, n = split(x)
    assert (str(p), str(n)) == ("Split.0", "Split.1")
    e.name = "e"
    assert str(s.owner) == "Sum{acc_dtype='float64'}(e)"


def test_constant_str_is_shortened():
    c = constant(np.zeros((1, 1)))
    assert str(c) == "Constant{[[0.]]}"
    big = constant(np.arange(100.0).reshape(10, 10))
    assert str(big).startswith("Constant{") and ".." in str(big) and len(str(big)) < 40
    assert str(constant(np.zeros((1, 1)), name="zero")) == "zero"


def test_constant_data_is_read_only():
    data = np.ones((2, 2))
    c = constant(data)
    data[0, 0] = 5.0  # the constant holds its own copy
    assert c.data[0, 0] == 1.0
    with pytest.raises(ValueError):
        c.data[0, 0] = 3.0
    with pytest.raises(ValueError, match="set once"):
        c.data = np.zeros((2, 2))
    assert c.value is c.data


def test_constant_stays_read_only_after_pickling():
    c = constant(np.ones((2, 2)))
    c2 = pickle.loads(pickle.dumps(c))
    assert c2.equals(c) and c2 is not c
    with pytest.raises(ValueError):
        c2.data[0, 0] = 3.0


def test_constant_cannot_be_an_apply_output():
    c = constant(np.ones((2, 2)))
    with pytest.raises(TypeError, match="Constant"):
        Apply(neg, [float64_matrix()], [c])
    with pytest.raises(ValueError):
        c.owner = neg(float64_matrix()).owner


def test_constant_equals_and_signature_by_value():
    a = constant(np.array([[1.0, 2.0]]))
    b = constant(np.array([[1.0, 2.0]]))
    c = constant(np.array([[1.0, 3.0]]))
    d = constant(np.array([[1.0, 2.0]], dtype="float32"), type=float32_matrix)
    assert a.equals(b) and a.signature() == b.signature()
    assert hash(a.signature()) == hash(b.signature())
    assert not a.equals(c) and not a.equals(d)
    assert a != b  # == stays identity: graphs key dicts by variable
    assert not a.equals(float64_matrix())
    merged = {a.signature(): a}
    assert merged[b.signature()] is a


def test_constant_signature_nan_and_signed_zero():
    a = constant(np.array([[np.nan, 0.0]]))
    b = constant(np.array([[np.nan, -0.0]]))
    payload = np.frombuffer(np.uint64(0x7FF8000000000001).tobytes(), dtype=np.float64)
    c = constant(np.array([[payload[0], 0.0]]))
    assert a.equals(b) and a.equals(c)
    assert hash(a.signature()) == hash(b.signature()) == hash(c.signature())
    assert not a.equals(constant(np.array([[1.0, 0.0]])))


@pytest.mark.parametrize(
    "a, b, equal",
    [
        (np.nan, -np.nan, True),
        (-0.0, 0.0, True),
        (0.5, 0.5, True),
        (0.5, 0.25, False),
        (np.inf, -np.inf, False),
        (complex(np.nan, 1), complex(np.nan, 2), True),  # as array_equal(equal_nan=True)
    ],
)
def test_one_element_constant_signature_matches_array_equal(a, b, equal):
    """One-element constants are keyed by their value: the same answers as for arrays."""
    from opgraph.tensor import constant as tensor_constant

    for shape in [(), (1,), (1, 1)]:
        x = tensor_constant(np.full(shape, a))
        y = tensor_constant(np.full(shape, b))
        assert x.equals(y) is equal
        assert np.array_equal(x.data, y.data, equal_nan=True) is equal
        if equal:
            assert hash(x.signature()) == hash(y.signature())
    assert not tensor_constant(np.int8(3)).equals(tensor_constant(np.int16(3)))
    assert not tensor_constant(np.full((1,), 0.5)).equals(tensor_constant(np.full((1, 1), 0.5)))


def test_constant_clone_shares_data_not_identity():
    c = constant(np.ones((2, 2)), name="c")
    d = c.clone()
    assert d is not c and d.data is c.data and d.name == "c" and d.equals(c)


def test_apply_rejects_non_variable_input_naming_position():
    x = float64_matrix("x")
    with pytest.raises(TypeError, match=r"input 1 of Apply\(Add\) must be a Variable"):
        Apply(add, [x, 3.0], [float64_matrix()])
    with pytest.raises(TypeError, match="list of Variables"):
        Apply(add, x, [float64_matrix()])
    with pytest.raises(TypeError, match="Op instance"):
        Apply("add", [x], [float64_matrix()])
    with pytest.raises(TypeError, match="output 0"):
        Apply(add, [x], [np.ones(2)])


def test_apply_rejects_output_owned_elsewhere():
    x = float64_matrix("x")
    e = neg(x)
    with pytest.raises(ValueError, match="already the output of Neg"):
        Apply(neg, [x], [e])


def test_variable_constructor_checks():
    with pytest.raises(TypeError, match="Type instance"):
        Variable("float64")
    with pytest.raises(TypeError, match="owner"):
        Variable(float64_matrix, owner="node")
    with pytest.raises(TypeError, match="name"):
        Variable(float64_matrix, name=3)


def test_variable_clone_is_a_fresh_input():
    x = float64_matrix("x")
    e = neg(x)
    e.tag.note = "kept"
    c = e.clone()
    assert c.owner is None and c.index is None and c.name == e.name and c.type == e.type
    assert c.tag.note == "kept" and c.tag is not e.tag


def test_apply_clone_and_clone_with_new_inputs():
    x, y = float64_matrix("x"), float64_matrix("y")
    node = add(x, y).owner
    cp = node.clone()
    assert cp is not node and cp.op == node.op and cp.inputs == node.inputs
    assert all(a is not b for a, b in zip(cp.outputs, node.outputs))
    z = float64_matrix("z")
    new = node.clone_with_new_inputs([z, y])
    assert new.inputs == [z, y] and new.outputs[0].owner is new
    with pytest.raises(TypeError, match="ToyType"):
        node.clone_with_new_inputs([float32_matrix(), y])
    remade = node.clone_with_new_inputs([float32_matrix("a"), float32_matrix("b")], strict=False)
    assert remade.outputs[0].type == float32_matrix
    with pytest.raises(ValueError, match="2 inputs"):
        node.clone_with_new_inputs([z])


def test_default_output():
    x = float64_matrix("x")
    node = neg(x).owner
    assert node.default_output() is node.outputs[0] and node.out is node.outputs[0]
    node = split(x)[0].owner
    with pytest.raises(ValueError, match="2 outputs"):
        node.default_output()


def test_type_call_and_filter_variable():
    x = float64_matrix("x")
    assert isinstance(x, Variable) and x.type == ToyType("float64", 2)
    assert float64_matrix.filter_variable(x) is x
    with pytest.raises(TypeError, match=r"ToyType\(float32, 2d\).*ToyType\(float64, 2d\)"):
        float64_matrix.filter_variable(float32_matrix("y"))
    c = float64_matrix.filter_variable(np.ones((2, 2)))
    assert isinstance(c, Constant)
    assert float64_matrix.is_valid_value(np.ones((1, 1)))
    assert not float64_matrix.is_valid_value(np.ones(3))


def test_type_props_equality_and_hash():
    assert ToyType("float64", 2) == float64_matrix
    assert hash(ToyType("float64", 2)) == hash(float64_matrix)
    assert ToyType("float64", 1) != float64_matrix
    assert float64_matrix.clone(dtype="float32") == float32_matrix
    assert Generic() == generic and str(generic) == "Generic"
    assert generic.filter(object) is object


def test_base_type_filter_is_not_defined():
    with pytest.raises(MethodNotDefined, match="filter"):
        Type().filter(1)


class Scale(Op):
    __props__ = ("factor", "mode")

    def __init__(self, factor, mode):
        self.factor, self.mode = factor, mode

    def make_node(self, x):
        return Apply(self, [x], [x.type()])


def test_op_props_equality_hash_and_str():
    a, b, c = Scale(1, "x"), Scale(1, "x"), Scale(2, "x")
    assert a == b and hash(a) == hash(b)
    assert a != c
    assert str(a) == repr(a) == "Scale{factor=1, mode='x'}"
    assert str(add) == "Add" and add == type(add)()


def test_op_without_props_uses_identity():
    class Plain(Op):
        pass

    p, q = Plain(), Plain()
    assert p != q and p == p and hash(p) != hash(q)
    assert str(p) == "Plain"


def test_op_optional_methods_raise_method_not_defined():
    class Bare(Op):
        __props__ = ()

    x = float64_matrix("x")
    with pytest.raises(MethodNotDefined, match="make_node"):
        Bare()(x)
    with pytest.raises(MethodNotDefined, match="grad"):
        Bare().grad([x], [x])
    with pytest.raises(MethodNotDefined, match="perform"):
        Bare().perform(None, [], [])


def test_op_call_return_list_and_trace():
    x = float64_matrix("x")
    outs = split(x)
    assert isinstance(outs, list) and len(outs) == 2
    [only] = neg(x, return_list=True)
    assert only.owner.op == neg
    trace = only.tag.trace
    assert trace and trace[0][0] == __file__


def test_perform_through_py_thunk():
    x = float64_matrix("x")
    e = mul(x, x)
    storage = {x: [np.full((2, 2), 3.0)], e: [None]}
    compute = {x: [True], e: [False]}
    thunk = e.owner.op.make_thunk(e.owner, storage, compute)
    thunk()
    np.testing.assert_array_equal(storage[e][0], np.full((2, 2), 9.0))
    assert compute[e][0]


def test_metaobject_props_dict():
    class Thing(MetaObject):
        __props__ = ("a",)

        def __init__(self, a):
            self.a = a

    assert Thing(1)._props_dict() == {"a": 1} and str(Thing(1)) == "Thing{a=1}"
