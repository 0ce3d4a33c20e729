"""Typed lists (``opgraph.typed_list``): Theano's Ops against Python's list semantics and
against outputs recorded from Theano 1.0.5."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import opgraph
from opgraph import tensor as T
from opgraph import typed_list as TL
from opgraph.gradient import grad, verify_grad
from opgraph.graph.basic import Apply
from opgraph.typed_list import TypedListType

fvector = T.fvector


def f32(*items):
    return [np.asarray(x, dtype="float32") for x in items]


def assert_list_equal(got, expected):
    assert isinstance(got, list)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)
        assert g.dtype == np.asarray(e).dtype


def test_theano_documented_append_example():
    # theano/doc/library/typed_list.txt
    tl = TypedListType(T.fvector)()
    v = T.fvector()
    o = TL.append(tl, v)
    f = opgraph.function([tl, v], o)
    got = f([[1, 2, 3], [4, 5]], [2])
    assert_list_equal(got, f32([1.0, 2.0, 3.0], [4.0, 5.0], [2.0]))


def test_every_op_matches_theano_1_0_5():
    """Outputs recorded from Theano 1.0.5 (THEANO_FLAGS=device=cpu,cxx=, floatX=float64)."""
    tl = TypedListType(fvector)()
    v = fvector()
    i = T.lscalar()
    outs = [
        tl[i],
        tl[1:],
        TL.length(tl),
        tl.count(v),
        tl.ind(v),
        tl.reverse(),
        tl.insert(i, v),
        tl.remove(v),
        tl.extend(tl),
    ]
    f = opgraph.function([tl, i, v], outs)
    r = f([[1, 2], [2], [2]], 0, [2])
    np.testing.assert_array_equal(r[0], np.array([1.0, 2.0], dtype="float32"))
    assert_list_equal(r[1], f32([2.0], [2.0]))
    assert r[2] == 3 and r[2].dtype == np.int64
    assert r[3] == 2.0 and r[3].dtype == opgraph.config.floatX
    assert r[4] == 1.0 and r[4].dtype == opgraph.config.floatX
    assert_list_equal(r[5], f32([2.0], [2.0], [1.0, 2.0]))
    assert_list_equal(r[6], f32([2.0], [1.0, 2.0], [2.0], [2.0]))
    assert_list_equal(r[7], f32([1.0, 2.0], [2.0]))
    assert_list_equal(r[8], f32([1.0, 2.0], [2.0], [2.0], [1.0, 2.0], [2.0], [2.0]))
    # Theano 1.0.5: insert at 5 clips to the end; removing a missing element is a no-op.
    g = opgraph.function([tl, i, v], [tl.insert(i, v), tl.remove(v)])
    ins, rem = g([[1, 2], [2], [2]], 5, [3])
    assert_list_equal(ins, f32([1, 2], [2], [2], [3]))
    assert_list_equal(rem, f32([1, 2], [2], [2]))


CASES = [
    [],
    [[1.0]],
    [[1.0, 2.0], [3.0], [1.0, 2.0], []],
    [[0.5], [0.5], [0.5]],
]


@pytest.mark.parametrize("values", CASES)
def test_python_list_semantics(values):
    rng = np.random.default_rng(len(values))
    tl = TypedListType(fvector)()
    v = fvector()
    i = T.lscalar()
    data = f32(*values)
    elem = np.asarray(rng.integers(0, 3, size=1), dtype="float32")
    fns = {
        "length": opgraph.function([tl], TL.length(tl)),
        "reverse": opgraph.function([tl], TL.reverse(tl)),
        "append": opgraph.function([tl, v], TL.append(tl, v)),
        "extend": opgraph.function([tl], TL.extend(tl, TL.reverse(tl))),
        "insert": opgraph.function([tl, i, v], TL.insert(tl, i, v)),
        "count": opgraph.function([tl, v], TL.count(tl, v)),
        "slice": opgraph.function([tl], [tl[::2], tl[-2:], tl[::-1]]),
    }
    assert fns["length"](data) == len(data)
    assert_list_equal(fns["reverse"](data), data[::-1])
    assert_list_equal(fns["append"](data, elem), [*data, elem])
    assert_list_equal(fns["extend"](data), data + data[::-1])
    for pos in (-5, -1, 0, 1, 7):
        expected = list(data)
        expected.insert(pos, elem)
        assert_list_equal(fns["insert"](data, pos, elem), expected)
    for probe in [elem, *data]:
        n = sum(1 for x in data if x.shape == probe.shape and np.array_equal(x, probe))
        assert fns["count"](data, probe) == n
    every_other, last_two, backwards = fns["slice"](data)
    assert_list_equal(every_other, data[::2])
    assert_list_equal(last_two, data[-2:])
    assert_list_equal(backwards, data[::-1])
    if data:
        get = opgraph.function([tl, i], tl[i])
        for pos in range(-len(data), len(data)):
            np.testing.assert_array_equal(get(data, pos), data[pos])
        with pytest.raises(IndexError):
            get(data, len(data))
        index = opgraph.function([tl, v], tl.ind(v))
        remove = opgraph.function([tl, v], tl.remove(v))
        for probe in data:
            pos = next(k for k, x in enumerate(data) if np.array_equal(x, probe))
            assert index(data, probe) == pos
            expected = list(data)
            del expected[pos]
            assert_list_equal(remove(data, probe), expected)


def test_inputs_are_not_modified_and_outputs_share_nothing():
    tl = TypedListType(fvector)()
    v = fvector()
    f = opgraph.function([tl, v], [TL.append(tl, v), TL.make_list([v, v])])
    data, elem = f32([1, 2]), np.asarray([3.0], dtype="float32")
    appended, made = f(data, elem)
    assert len(data) == 1
    assert not np.shares_memory(appended[-1], elem)
    assert not np.shares_memory(made[0], elem) and made[0] is not made[1]


def test_inplace_forms_modify_their_input():
    tl = TypedListType(fvector)()
    v = fvector()
    i = T.lscalar()
    data = f32([1], [2])
    cases = [
        (TL.Append(inplace=True), [tl, v], [data, f32([3])[0]], f32([1], [2], [3])),
        (TL.Extend(inplace=True), [tl, tl], [data, f32([4])], f32([1], [2], [4])),
        (TL.Insert(inplace=True), [tl, i, v], [data, np.int64(0), f32([0])[0]], f32([0], [1], [2])),
        (TL.Remove(inplace=True), [tl, v], [data, f32([2])[0]], f32([1])),
        (TL.Reverse(inplace=True), [tl], [data], f32([2], [1])),
    ]
    for op, inputs, values, expected in cases:
        assert op.destroy_map == {0: [0]} and str(op) == type(op).__name__
        node = op.make_node(*inputs)
        values = [list(values[0]), *values[1:]]
        out = [[None]]
        op.perform(node, values, out)
        assert out[0][0] is values[0]
        assert_list_equal(out[0][0], expected)
        assert op != type(op)() and hash(op) != hash(type(op)())


def test_nested_lists():
    t = TypedListType(fvector, depth=1)
    assert t == TypedListType(TypedListType(fvector)) and t.get_depth() == 1
    assert str(t) == "TypedList <TypedList <TensorType(float32, vector)>>"
    assert t.ndim == 3 and t.dtype == TypedListType(fvector)
    x = t()
    inner = TypedListType(fvector)()
    f = opgraph.function([x, inner], [x[0], TL.append(x, inner), TL.length(x[1])])
    data = [f32([1]), f32([2], [3])]
    first, appended, n = f(data, f32([9]))
    assert_list_equal(first, f32([1]))
    assert len(appended) == 3 and n == 2


def test_type_filter_and_values():
    t = TypedListType(fvector)
    assert_list_equal(t.filter([[1, 2], np.zeros(1, "int8")]), f32([1, 2], [0]))
    assert t.filter(f32([1]), strict=True) is not None
    with pytest.raises(TypeError, match="Python list"):
        t.filter((np.zeros(1, "float32"),), strict=True)
    with pytest.raises(TypeError):
        t.filter([np.zeros((2, 2))])
    assert t.values_eq(f32([1], [2]), f32([1], [2]))
    assert not t.values_eq(f32([1]), f32([1], [2]))
    a = f32([1])
    assert t.may_share_memory(a, [a[0]]) and not t.may_share_memory(a, f32([1]))
    with pytest.raises(ValueError):
        TypedListType(fvector, depth=-1)
    with pytest.raises(TypeError, match="opgraph Type"):
        TypedListType("float32")


def test_variable_methods_and_classes():
    x = TypedListType(fvector)()
    assert isinstance(x, TL.TypedListVariable)
    assert x.ttype == fvector and x.dtype == "float32" and x.ndim == 2
    assert isinstance(x.append(fvector()).owner.op, TL.Append)
    assert isinstance(x.__len__().owner.op, TL.Length)
    c = TypedListType(fvector).make_constant(f32([1]))
    assert isinstance(c, TL.TypedListConstant)
    assert opgraph.function([], TL.length(c))() == 1


def test_make_node_errors():
    x = TypedListType(fvector)()
    with pytest.raises(TypeError, match="typed list"):
        TL.append(fvector(), fvector())
    with pytest.raises(TypeError, match="element type"):
        TL.append(x, T.dvector())
    with pytest.raises(TypeError, match="same type"):
        TL.extend(x, TypedListType(T.dvector)())
    with pytest.raises(TypeError, match="integer"):
        TL.getitem(x, T.dscalar())
    with pytest.raises(TypeError, match="integer"):
        TL.insert(x, 1.5, fvector())
    with pytest.raises(TypeError, match="same type"):
        TL.make_list([fvector(), T.dvector()])
    with pytest.raises(TypeError, match="at least one"):
        TL.make_list([])


def test_index_of_missing_element_raises():
    x = TypedListType(fvector)()
    v = fvector()
    f = opgraph.function([x, v], TL.index_(x, v))
    with pytest.raises(ValueError, match="not in the list"):
        f(f32([1]), np.zeros(1, "float32"))


def test_make_list_of_values_and_debug_mode():
    f = opgraph.function([], TL.make_list([[1.0, 2.0], [3.0, 4.0]]), mode="DEBUG_MODE")
    got = f()
    assert len(got) == 2
    np.testing.assert_array_equal(got[1], [3.0, 4.0])
    x = TypedListType(fvector)()
    v = fvector()
    g = opgraph.function([x, v], [x.append(v), x.reverse(), x[0]], mode="DEBUG_MODE")
    appended, backwards, first = g(f32([1], [2]), f32([3])[0])
    assert_list_equal(appended, f32([1], [2], [3]))
    assert_list_equal(backwards, f32([2], [1]))
    np.testing.assert_array_equal(first, [1.0])


def test_counting_ops_shapes_and_gradients():
    x = TypedListType(fvector)()
    node = TL.length(x).owner
    assert isinstance(node, Apply)
    assert node.op.infer_shape(node, [None]) == [()]
    assert TL.count(x, fvector()).owner.op.connection_pattern(node) == [[False]]
    # The number of elements has no gradient path: d/dv (sum(v**2) * len([v, v])) = 4 v.
    verify_grad(
        lambda v: (v**2).sum() * TL.length(TL.make_list([v, v])),
        [np.array([0.5, -1.0, 2.0])],
        rng=np.random.default_rng(0),
    )
    w = T.dvector("w")
    with pytest.raises(TypeError, match="no gradient"):
        grad(TL.getitem(TL.make_list([w]), 0).sum(), w)


def test_function_with_typed_list_pickles():
    x = TypedListType(fvector)()
    v = fvector()
    f = opgraph.function([x, v], TL.append(x, v))
    g = pickle.loads(pickle.dumps(f, protocol=pickle.HIGHEST_PROTOCOL))
    assert_list_equal(g(f32([1]), f32([2])[0]), f32([1], [2]))
