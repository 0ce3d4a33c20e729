"""The structural ops' precompiled thunks (``opgraph_c._structure``) against ``perform``.

Node-level checks run one node's C thunk and its Op's ``perform`` on the same values and
compare values, dtypes, views (``np.shares_memory`` with each input, as perform's), in-place
updates and errors (type and text). Function-level checks compile small graphs with the
``c`` linker, the ``py`` linker and ``DebugMode(linker="c")``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from thunk_checks import layouts as _layouts
from thunk_checks import node_storage
from thunk_checks import perform_outputs as _perform
from thunk_checks import twin as _twin

import opgraph.scalar.basic as ps
import opgraph.tensor as T
from opgraph.compile.debugmode import DebugMode
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.compile.ops import DeepCopyOp, ViewOp, deep_copy_op, view_op
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.tensor.basic import Rebroadcast
from opgraph.tensor.elemwise import DimShuffle
from opgraph.tensor.reduction import Argmax, MaxAndArgmax
from opgraph.tensor.shape import MakeVector, Reshape, Shape_i
from opgraph.tensor.structure import AllocEmpty
from opgraph.tensor.subtensor_basic import IncSubtensor
from opgraph.testing import assert_allclose
from opgraph_c import _structure
from opgraph_c.registry import get_registry

DTYPES = ["float64", "float32", "int32", "uint8", "bool"]


def _matrix(dtype: str, bcast: Sequence[bool] = (False, False)) -> Variable:
    return T.TensorType(dtype, tuple(bcast))("x")


def _value(shape: Sequence[int], dtype: str = "float64", seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.asarray(rng.standard_normal(shape) * 5).astype(dtype)


def _thunk(node: Apply, values: Sequence[Any], c: bool) -> tuple[Any, list[list[Any]]]:
    """The node's thunk with its input cells holding ``values`` (constants filled in)."""
    storage = node_storage(node, values)
    thunk = get_registry().make_thunk(node, storage, None)
    assert isinstance(thunk, _structure.StructureThunk) == c, (node.op, thunk)
    assert not getattr(thunk, "py_fallback", False)
    return thunk, [storage[o] for o in node.outputs]


def _outcome(fn: Any) -> tuple[Any, Any]:
    try:
        return fn(), None
    except Exception as exc:  # compared between the two implementations
        return None, exc


def check_node(node: Apply, *values: Any, c: bool = True) -> list[Any]:
    """Run ``node``'s C thunk and ``perform`` on (copies of) ``values``: same everything.

    Returns the C thunk's outputs (none when both raised). ``c=False``: the entry returns
    PERFORM for this node (no C thunk, no fallback warning).
    """
    c_values = list(values)
    py_values = [_twin(v) for v in c_values]
    thunk, cells = _thunk(node, c_values, c)
    _, c_err = _outcome(thunk)
    py_out, py_err = _outcome(lambda: _perform(node, py_values))
    if py_err is not None or c_err is not None:
        assert type(c_err) is type(py_err), (c_err, py_err)
        assert str(c_err) == str(py_err)
        return []
    c_out = [c[0] for c in cells]
    for j, (c, p) in enumerate(zip(c_out, py_out, strict=True)):
        assert type(c) is type(p), (j, type(c), type(p))
        assert np.asarray(c).dtype == np.asarray(p).dtype, (j, c, p)
        assert_allclose(c, p)
        for i, (cv, pv) in enumerate(zip(c_values, py_values, strict=True)):
            if isinstance(pv, np.ndarray) and isinstance(p, np.ndarray):
                assert np.shares_memory(c, cv) == np.shares_memory(p, pv), (j, i)
                assert (c is cv) == (p is pv), (j, i)
                if np.shares_memory(p, pv):  # a view: the same strides and flags
                    assert c.flags.writeable == p.flags.writeable, j
                    assert _strides(c) == _strides(p), (j, c.strides, p.strides)
    for cv, pv in zip(c_values, py_values, strict=True):  # in-place updates agree
        assert_allclose(cv, pv)
    return c_out


def _strides(a: np.ndarray) -> list[int]:
    """Strides of the dimensions longer than 1 (the others are arbitrary)."""
    return [s for s, n in zip(a.strides, a.shape, strict=True) if n > 1]


def check_function(inputs: list[Variable], outputs: list[Variable], *values: Any) -> None:
    """Compile with the c linker (every structural node a C thunk), py and DebugMode(c)."""
    c_fn = function(inputs, outputs, mode=Mode(linker="c", optimizer="None"))
    py_fn = function(inputs, outputs, mode=Mode(linker="py", optimizer="None"))
    debug_fn = function(inputs, outputs, mode=DebugMode(linker="c", optimizer="None"))
    for node, thunk in zip(c_fn.fn.nodes, c_fn.fn.thunks, strict=True):
        if type(node.op) in STRUCTURAL:
            assert isinstance(thunk, _structure.StructureThunk), node
            assert not getattr(thunk, "py_fallback", False), node
    expected = py_fn(*copy.deepcopy(values))
    for got in (c_fn(*copy.deepcopy(values)), debug_fn(*copy.deepcopy(values))):
        for g, e in zip(got, expected, strict=True):
            assert np.asarray(g).dtype == np.asarray(e).dtype
            assert_allclose(g, e)


STRUCTURAL = {
    ViewOp,
    DeepCopyOp,
    T.Shape,
    Shape_i,
    MakeVector,
    T.SpecifyShape,
    Reshape,
    DimShuffle,
    Rebroadcast,
    T.Subtensor,
    IncSubtensor,
    T.Alloc,
    AllocEmpty,
    T.ScalarFromTensor,
    T.TensorFromScalar,
    MaxAndArgmax,
    Argmax,
}


def test_every_structural_op_has_a_precompiled_entry() -> None:
    registry = get_registry()
    for op_class in STRUCTURAL:
        kernel = registry.lookup(op_class)
        assert kernel is not None and kernel.owner == "opgraph-backend-c", op_class
        assert "structure" in kernel.impl.__module__, op_class


# ----------------------------------------------------------------------------------------
# shapes


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 0, 4), (2, 3, 4)])
def test_shape_and_shape_i(dtype: str, shape: tuple[int, ...]) -> None:
    x = T.TensorType(dtype, (False,) * len(shape))("x")
    for v in _layouts(_value(shape, dtype)):
        (out,) = check_node(T.shape(x).owner, v)
        assert out.dtype == np.int64 and tuple(out) == shape
        for i in range(len(shape)):
            (out,) = check_node(Shape_i(i)(x).owner, v)
            assert out.shape == () and out == shape[i]


def test_shape_i_of_a_value_with_fewer_dims_raises_like_perform() -> None:
    node = Shape_i(2)(T.dtensor3("x")).owner
    assert check_node(node, np.zeros((2, 3))) == []


@pytest.mark.parametrize("dtype", ["int64", "float32", "bool"])
def test_make_vector(dtype: str) -> None:
    scalars = [T.TensorType(dtype, ())(f"s{k}") for k in range(3)]
    node = MakeVector(dtype)(*scalars).owner
    values = [np.asarray(v, dtype=dtype) for v in (1, 0, 7)]
    (out,) = check_node(node, *values)
    assert not any(np.shares_memory(out, v) for v in values)
    # A value of another dtype (or not an array) takes perform's conversion.
    check_node(node, values[0], np.float64(3.0), 5)
    (empty,) = check_node(MakeVector(dtype)().owner)
    assert empty.shape == (0,)


def test_specify_shape() -> None:
    x = T.dmatrix("x")
    n = T.lscalar("n")
    node = T.specify_shape(x, (n, 3)).owner
    for v in _layouts(_value((2, 3))):
        (out,) = check_node(node, v, np.array([2, 3]))
        assert out is v
    assert check_node(node, _value((2, 4)), np.array([2, 3])) == []  # ValueError, same text
    check_function([x, n], [T.specify_shape(x, (n, 3)) * 2], _value((2, 3)), 2)


def test_rebroadcast() -> None:
    x = T.dmatrix("x")
    node = Rebroadcast((0, True))(x).owner
    (out,) = check_node(node, _value((1, 4)))
    assert out.shape == (1, 4)
    assert check_node(node, _value((3, 4))) == []
    node = Rebroadcast((1, False))(T.TensorType("float64", (False, True))("y")).owner
    check_node(node, _value((3, 1)))


@pytest.mark.parametrize("dtype", ["float64", "int16"])
def test_reshape_views_copies_and_minus_one(dtype: str) -> None:
    x = T.TensorType(dtype, (False, False, False))("x")
    v = _value((2, 3, 4), dtype)
    for shape in [(6, 4), (-1, 4), (2, -1), (24, 1)]:
        node = T.reshape(x, shape).owner
        for layout in _layouts(v):
            (out,) = check_node(node, layout)
            assert out.shape == v.reshape(shape).shape
        assert np.shares_memory(check_node(node, v)[0], v)
    flat = T.reshape(x, (-1,)).owner
    assert check_node(flat, np.zeros((0, 3, 4), dtype=dtype))[0].shape == (0,)


def test_reshape_errors_match_perform() -> None:
    x = T.dmatrix("x")
    shp = T.lvector("shp")
    node = T.reshape(x, shp, ndim=2).owner
    v = _value((3, 4))
    check_node(node, v, np.array([4, 3]))
    check_node(node, v, np.array([2, 6], dtype="int32"))
    for bad in ([5, 3], [-1, -1], [2, 3, 2], [-2, -6]):
        assert check_node(node, v, np.array(bad)) == [], bad
    check_function([x, shp], [T.reshape(x, shp, ndim=2) + 1], v, np.array([6, 2]))


def test_reshape_of_0d() -> None:
    s = T.dscalar("s")
    check_node(T.reshape(s, (1, 1)).owner, np.asarray(2.5))
    check_node(T.reshape(T.dvector("v"), ()).owner, np.array([2.5]))


# ----------------------------------------------------------------------------------------
# DimShuffle


DIMSHUFFLES = [
    ((False, False), (1, 0)),
    ((False, False), ("x", 0, "x", 1)),
    ((False, True, False), (2, 0)),
    ((True,), ()),
    ((), ("x", "x")),
    ((False, False, False), (1, "x", 2, 0)),
]


@pytest.mark.parametrize("inplace", [True, False])
@pytest.mark.parametrize(("bcast", "order"), DIMSHUFFLES)
def test_dimshuffle_view_or_copy(bcast: tuple[bool, ...], order: tuple, inplace: bool) -> None:
    x = T.TensorType("float32", bcast)("x")
    node = DimShuffle(bcast, order, inplace=inplace)(x).owner
    shape = tuple(1 if b else 3 + i for i, b in enumerate(bcast))
    for v in _layouts(_value(shape, "float32")):
        (out,) = check_node(node, v)
        assert np.shares_memory(out, v) == (inplace and v.size > 0)
    empty = tuple(0 if not b else 1 for b in bcast)
    check_node(node, np.zeros(empty, dtype="float32"))
    ro = _value(shape, "float32")
    ro.flags.writeable = False
    check_node(node, ro)


def test_dimshuffle_dropping_a_dim_that_is_not_1_raises_like_perform() -> None:
    node = DimShuffle((False, True), (0,))(T.TensorType("float64", (False, True))("x")).owner
    assert check_node(node, np.zeros((3, 2))) == []


def test_dimshuffle_in_a_function() -> None:
    x = T.dmatrix("x")
    b = T.dvector("b")
    check_function(
        [x, b],
        [x.T + b.dimshuffle("x", 0), x.dimshuffle(1, "x", 0) * 2],
        _value((3, 4)),
        _value((3,)),
    )


# ----------------------------------------------------------------------------------------
# Subtensor


def _index_cases(x: Variable, i: Variable, j: Variable) -> list[Any]:
    return [
        x[1],
        x[-1],
        x[1:],
        x[::-1],
        x[:, 2],
        x[1, -2],
        x[-3:-1, ::2],
        x[10:],
        x[:, ::-3],
        x[i],
        x[i, j],
        x[i:j],
        x[j:i:-1],
        x[:, i::j],
        x[i:, 1:j],
    ]


@pytest.mark.parametrize("dtype", DTYPES)
def test_subtensor_views(dtype: str) -> None:
    x = _matrix(dtype)
    i, j = T.lscalar("i"), T.lscalar("j")
    v = _value((4, 5), dtype)
    for out in _index_cases(x, i, j):
        node = out.owner
        n_sym = sum(not isinstance(a, Constant) for a in node.inputs[1:])
        for layout in _layouts(v):
            for iv, jv in [(1, 3), (-2, 2), (0, -1)]:
                args = [np.int64(iv), np.int64(jv)][:n_sym]
                check_node(node, layout, *args)


def test_subtensor_0d_result_is_a_view() -> None:
    x = T.dmatrix("x")
    v = _value((3, 4))
    (out,) = check_node(x[1, 2].owner, v)
    assert out.shape == () and np.shares_memory(out, v)
    (out,) = check_node(T.dvector("v")[2:2].owner, np.arange(5.0))
    assert out.shape == (0,)
    assert check_node(x[0].owner, np.zeros((0, 3))) == []  # IndexError on an empty axis


def test_subtensor_errors_match_perform() -> None:
    x = T.dmatrix("x")
    i, j = T.lscalar("i"), T.lscalar("j")
    v = _value((3, 4))
    assert check_node(x[5].owner, v) == []  # IndexError: index 5 is out of bounds ...
    assert check_node(x[-4].owner, v) == []
    assert check_node(x[1, 4].owner, v) == []
    assert check_node(x[i].owner, v, np.int64(3)) == []
    assert check_node(x[::j].owner, v, np.int64(0)) == []  # ValueError: slice step ... zero
    check_node(x[i].owner, v, np.int64(-3))
    # Other integer dtypes for the index values.
    k = T.TensorType("uint8", ())("k")
    check_node(x[k:].owner, v, np.uint8(2))
    check_node(x[T.bscalar("b")].owner, v, np.int8(-1))


def test_subtensor_empty_and_readonly_inputs() -> None:
    x = T.dmatrix("x")
    check_node(x[1:].owner, np.zeros((0, 3)))
    check_node(x[:, 1:].owner, np.zeros((2, 0)))
    ro = _value((3, 4))
    ro.flags.writeable = False
    (out,) = check_node(x[1:, 2].owner, ro)
    assert not out.flags.writeable


def test_subtensor_in_a_function() -> None:
    x = T.dtensor3("x")
    i = T.lscalar("i")
    check_function([x, i], [x[i, 1:, ::-1] * 2, x[-1, i], x[:, :i].sum()], _value((3, 4, 5)), 2)


# ----------------------------------------------------------------------------------------
# IncSubtensor


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("set_", [False, True])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int32"])
def test_inc_and_set_subtensor(dtype: str, set_: bool, inplace: bool) -> None:
    x = _matrix(dtype)
    i = T.lscalar("i")
    cases = [
        (x[1:3], T.TensorType(dtype, (False, False))("y"), (2, 5)),
        (x[i], T.TensorType(dtype, (False,))("y"), (5,)),
        (x[:, ::-2], T.TensorType(dtype, (True, False))("y"), (1, 3)),
        (x[i, 2], T.TensorType(dtype, ())("y"), ()),
        (x[1:], T.TensorType(dtype, (True,))("y"), (1,)),
    ]
    for part, y, yshape in cases:
        out = T.inc_subtensor(part, y, set_instead_of_inc=set_)
        node = IncSubtensor(out.owner.op.idx_list, inplace, set_)(*out.owner.inputs).owner
        idx = [np.int64(-2)] * sum(not isinstance(a, Constant) for a in node.inputs[2:])
        for xv in _layouts(_value((4, 5), dtype)):
            (res,) = check_node(node, xv, _value(yshape, dtype, seed=1), *idx)
            assert (res is xv) == inplace


def test_set_subtensor_casts_like_perform() -> None:
    x = T.imatrix("x")
    y = T.dvector("y")
    node = T.set_subtensor(x[0], y).owner
    check_node(node, np.zeros((2, 3), dtype="int32"), np.array([1.7, -2.2, 3.9]))
    node = T.inc_subtensor(T.fmatrix("f")[0], T.fvector("g")).owner
    check_node(node, np.zeros((2, 3), dtype="float32"), np.ones(3, dtype="float32"))


def test_inc_subtensor_errors_match_perform() -> None:
    x = T.dmatrix("x")
    y = T.dvector("y")
    i = T.lscalar("i")
    for inplace in (False, True):
        out = T.inc_subtensor(x[i], y)
        node = IncSubtensor(out.owner.op.idx_list, inplace)(*out.owner.inputs).owner
        v = _value((3, 4))
        assert check_node(node, v.copy(), np.ones(3), np.int64(0)) == []  # shape mismatch
        assert check_node(node, v.copy(), np.ones(4), np.int64(7)) == []  # IndexError
        assert check_node(node, v.copy(), np.ones(1), np.int64(0)) == []  # not broadcastable
    ro = _value((3, 4))
    ro.flags.writeable = False
    node = IncSubtensor(out.owner.op.idx_list, True)(*out.owner.inputs).owner
    assert check_node(node, ro, np.ones(4), np.int64(0)) == []  # read-only destination


def test_inc_subtensor_in_a_function() -> None:
    x = T.dmatrix("x")
    y = T.dvector("y")
    outs = [
        T.set_subtensor(x[1:, 0], y[:2]),
        T.inc_subtensor(x[-1], y),
        T.inc_subtensor(x[0, 1:], 3.0),
    ]
    check_function([x, y], outs, _value((3, 4)), _value((4,)))


# ----------------------------------------------------------------------------------------
# Alloc, AllocEmpty, scalar <-> tensor


@pytest.mark.parametrize("dtype", DTYPES)
def test_alloc(dtype: str) -> None:
    n = T.lscalar("n")
    for value, vshape in [(0, ()), (3, ()), (None, (4,)), (None, (1, 4))]:
        bcast = tuple(s == 1 for s in vshape)
        v = T.TensorType(dtype, bcast)("v")
        node = T.alloc(v, 2, n, 4).owner if vshape else T.alloc(v, 2, n).owner
        vv = np.asarray(value, dtype=dtype) if value is not None else _value(vshape, dtype)
        for nv in (3, 0, 1):
            (out,) = check_node(node, vv, np.asarray(nv, dtype="int64"))
            assert not np.shares_memory(out, vv)
        assert check_node(node, vv, np.asarray(-1, dtype="int64")) == []  # negative shape
    v = T.dvector("v")
    assert check_node(T.alloc(v, 2, 3).owner, np.ones(4)) == []
    assert check_node(T.alloc(v, 2, 3).owner, np.ones(1)) == []
    check_node(T.alloc(v, 2, 3).owner, np.ones(3)[::-1])
    check_node(T.alloc(v, 2, 3).owner, np.array([np.nan, -0.0, 1.0]))


def test_alloc_empty_and_zeros() -> None:
    n = T.lscalar("n")
    node = AllocEmpty("float32")(n, 3).owner
    (out,) = check_node(node, np.asarray(2))
    assert out.shape == (2, 3) and out.dtype == np.float32
    assert check_node(node, np.asarray(-2)) == []
    check_function([n], [T.zeros((n, 2)), T.ones((2, n), dtype="int8")], 3)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "uint8", "bool"])
def test_scalar_from_tensor_and_back(dtype: str) -> None:
    t = T.TensorType(dtype, ())("t")
    s = T.scalar_from_tensor(t)
    val = np.asarray(3, dtype=dtype)
    (sv,) = check_node(s.owner, val)
    assert type(sv) is np.dtype(dtype).type
    (tv,) = check_node(T.tensor_from_scalar(ps.get_scalar_type(dtype)("s")).owner, sv)
    assert tv.shape == () and tv.dtype == dtype
    check_node(T.tensor_from_scalar(ps.get_scalar_type(dtype)("s")).owner, 1)  # not a NumPy scalar
    check_function([t], [T.tensor_from_scalar(s) * 2], val)


# ----------------------------------------------------------------------------------------
# MaxAndArgmax, Argmax


AXES = [(1,), (0, 1, 2), (0,), (1, 2), (0, 2), (2,), ()]


@pytest.mark.parametrize("dtype", ["float64", "float32", "int8", "uint16", "int64", "bool"])
def test_max_and_argmax(dtype: str) -> None:
    x = T.TensorType(dtype, (False, False, False))("x")
    v = _value((3, 4, 5), dtype)
    v.flat[[7, 23, 40]] = v.max()  # ties: the first index wins
    for axes in AXES:
        nodes = [MaxAndArgmax(axes)(x)[0].owner, Argmax(axes)(x).owner]
        for layout in _layouts(v):
            for node in nodes:
                check_node(node, layout, c=dtype != "bool")
    check_node(Argmax(None)(x).owner, v, c=dtype != "bool")


def test_argmax_nan_and_inf() -> None:
    x = T.dmatrix("x")
    v = np.array(
        [[1.0, np.nan, 3.0, np.nan], [-np.inf, -np.inf, -np.inf, -np.inf], [2, 9, np.inf, 9]]
    )
    for axes in [(1,), (0,), (0, 1)]:
        _, am = check_node(MaxAndArgmax(axes)(x)[0].owner, v)
        assert_allclose(am, _argmax_ref(v, axes))
    v32 = np.array([[np.nan, 1.0], [0.0, -0.0]], dtype="float32")
    check_node(MaxAndArgmax((1,))(T.fmatrix("f"))[0].owner, v32)


def _argmax_ref(v: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    keep = [d for d in range(v.ndim) if d not in axes]
    moved = np.transpose(v, keep + list(axes))
    return np.argmax(moved.reshape(*moved.shape[: len(keep)], -1), axis=-1)


def test_argmax_empty_and_large() -> None:
    x = T.dmatrix("x")
    node = MaxAndArgmax((1,))(x)[0].owner
    assert check_node(node, np.zeros((3, 0))) == []  # cannot reduce an empty array
    mx, am = check_node(node, np.zeros((0, 3)))
    assert mx.shape == am.shape == (0,)
    check_node(node, _value((300, 200)))  # releases the GIL
    check_node(Argmax(None)(T.dscalar("s")).owner, np.asarray(4.0))


def test_argmax_in_a_function() -> None:
    x = T.fmatrix("x")
    outs = [T.argmax(x, axis=1), T.max(x, axis=0), T.argmax(x)]
    check_function([x], outs, _value((5, 6), "float32"))


# ----------------------------------------------------------------------------------------
# a training graph after FAST_RUN's rewrites (in-place variants included)


def test_fast_run_training_graph_runs_structural_ops_in_c() -> None:
    import opgraph

    x = T.dmatrix("x")
    y = T.ivector("y")
    w = opgraph.shared(_value((6, 3)), name="w")
    h = T.dot(x, w)
    h = T.set_subtensor(h[:, 0], 0.0)  # an IncSubtensor on an intermediate: made inplace
    p = T.exp(h - T.max(h, axis=1, keepdims=True))
    p = p / p.sum(axis=1).dimshuffle(0, "x")
    cost = -T.log(p[T.arange(y.shape[0]), y]).mean() + (w[1:] ** 2).sum()
    pred = T.argmax(p, axis=1)
    gw = opgraph.grad(cost, w)
    args = (_value((5, 6), seed=3), np.array([0, 2, 1, 1, 2], dtype="int32"))
    outs = [cost, pred, gw, p.reshape((-1,))]
    c_fn = function([x, y], outs, mode=Mode(linker="c"))
    py_fn = function([x, y], outs, mode=Mode(linker="py"))
    ran = {type(n.op) for n in c_fn.fn.nodes} & STRUCTURAL
    assert {IncSubtensor, DimShuffle, T.Subtensor} <= ran, ran
    for node, thunk in zip(c_fn.fn.nodes, c_fn.fn.thunks, strict=True):
        if type(node.op) in STRUCTURAL:
            assert isinstance(thunk, _structure.StructureThunk), node
    assert any(isinstance(n.op, IncSubtensor) and n.op.inplace for n in c_fn.fn.nodes), (
        "expected the inplace rewrite to apply"
    )
    for got, exp in zip(c_fn(*args), py_fn(*args), strict=True):
        assert_allclose(got, exp)


# ----------------------------------------------------------------------------------------
# ViewOp, DeepCopyOp


@pytest.mark.parametrize("dtype", DTYPES)
def test_view_and_deep_copy_ops(dtype: str) -> None:
    x = _matrix(dtype)
    for v in [*_layouts(_value((3, 4), dtype)), _value((0, 4), dtype)]:
        (view,) = check_node(view_op(x).owner, v)
        assert view is v
        (copied,) = check_node(deep_copy_op(x).owner, v)
        assert not np.shares_memory(copied, v) and copied.flags.c_contiguous
    check_function([x], [view_op(x) * 1, deep_copy_op(x)], _value((2, 5), dtype))


def test_deep_copy_of_a_non_array_runs_perform_deepcopy() -> None:
    from opgraph.graph.type import Generic

    g = Generic()("g")
    node = deep_copy_op(g).owner
    value = {"a": [1, 2]}
    thunk, (cell,) = _thunk(node, [value], c=True)
    thunk()
    assert cell[0] == value and cell[0] is not value and cell[0]["a"] is not value["a"]
