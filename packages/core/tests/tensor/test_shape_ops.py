"""Shape, Shape_i, SpecifyShape, Reshape, MakeVector and the DimShuffle helpers, against NumPy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.debugmode import DebugMode
from opgraph.gradient import Rop, grad, verify_grad
from opgraph.printing import debugprint, pp
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.math import cast
from opgraph.tensor.shape import (
    MakeVector,
    Reshape,
    Shape_i,
    SpecifyShape,
    expand_dims,
    flatten,
    get_vector_length,
    make_vector,
    reshape,
    shape,
    shape_i,
    shape_padaxis,
    shape_padleft,
    shape_padright,
    specify_shape,
    squeeze,
    transpose,
    vector_elements,
)
from opgraph.testing.checks import check_infer_shape, check_modes, random_value

DTYPES = ["bool", "int8", "int32", "uint16", "float32", "float64", "complex128"]
NAN_MODES = ("FAST_COMPILE", "FAST_RUN", "PROFILE_MODE", DebugMode(check_isfinite=False))


def check_symbolic_shape(inputs: list[Any], out: Any, values: list[Any]) -> None:
    """``out.owner.op.infer_shape`` on symbolic input shapes gives the real output shape."""
    node = out.owner
    in_shapes = [
        tuple(shape_i(v, d) for d in range(v.type.ndim)) if hasattr(v.type, "ndim") else ()
        for v in node.inputs
    ]
    dims = node.op.infer_shape(node, in_shapes)[node.outputs.index(out)]
    dims = [cast(as_tensor_variable(d), "int64") for d in dims]
    f = opgraph.function(inputs, [out, *dims], on_unused_input="ignore")
    real, *got = f(*values)
    assert tuple(int(d) for d in got) == real.shape


# ----------------------------------------------------------------------------------------
# Shape and Shape_i


@pytest.mark.parametrize("shp", [(), (0,), (3,), (2, 0, 4), (1, 5)])
@pytest.mark.parametrize("dtype", ["int8", "float32", "float64", "bool"])
def test_shape_and_shape_i_match_numpy(shp: tuple, dtype: str, rng: np.random.Generator) -> None:
    x = T.tensor(dtype, [False] * len(shp), "x")
    xv = random_value(rng, shp, dtype)
    outs = [shape(x), x.shape] + [shape_i(x, i) for i in range(len(shp))]
    expected = [np.array(shp, "int64")] * 2 + [np.array(s, "int64") for s in shp]
    check_modes([x], outs, [xv], expected)
    assert outs[0].type == T.lvector and all(o.type == T.lscalar for o in outs[2:])
    check_infer_shape([x], outs, [xv])


def test_shape_names_printing_and_errors() -> None:
    x = T.dmatrix("x")
    assert str(x.shape.owner.op) == "Shape" and pp(x.shape) == "x.shape"
    assert str(shape_i(x, -1).owner.op) == "Shape_i{1}" and Shape_i(0) == Shape_i(0)
    assert hash(Shape_i(1)) == hash(Shape_i(1)) and Shape_i(0) != Shape_i(1)
    with pytest.raises(TypeError, match=r"Shape_i\{2\}: x of type .* has no dimension 2"):
        Shape_i(2)(x)
    with pytest.raises(IndexError, match="dimension -3 is out of range"):
        shape_i(x, -3)
    with pytest.raises(ValueError, match="non-negative int"):
        Shape_i(-1)


def test_shape_gradient_is_disconnected_and_other_paths_flow(rng: np.random.Generator) -> None:
    x = T.dmatrix("x")
    cost = (cast(shape_i(x, 0), "float64") * x).sum()
    xv = rng.random((3, 2))
    g = opgraph.function([x], grad(cost, x))(xv)
    np.testing.assert_allclose(g, np.full((3, 2), 3.0))
    verify_grad(lambda a: cast(shape(a), "float64").sum() * a, [xv], rng=rng)


# ----------------------------------------------------------------------------------------
# SpecifyShape


def test_specify_shape_checks_at_run_time(mode: str) -> None:
    x = T.dmatrix("x")
    n = T.lscalar("n")
    y = specify_shape(x, (2, n))
    assert str(y.owner.op) == "SpecifyShape" and y.owner.op.view_map == {0: [0]}
    f = opgraph.function([x, n], y * 2, mode=mode)
    np.testing.assert_allclose(f(np.ones((2, 3)), 3), np.full((2, 3), 2.0))
    with pytest.raises(ValueError, match=r"has shape \(2, 3\).*specified as \(2, 4\)"):
        f(np.ones((2, 3)), 4)


def test_specify_shape_build_errors_infer_shape_grad_and_rop(rng: np.random.Generator) -> None:
    x = T.dmatrix("x")
    with pytest.raises(ValueError, match=r"has 2 dimension.*has 3"):
        specify_shape(x, (1, 2, 3))
    with pytest.raises(TypeError, match="must be a vector of integers"):
        specify_shape(x, (1.5, 2.0))
    xv = rng.random((2, 3))
    check_infer_shape([x], specify_shape(x, (2, 3)), [xv], SpecifyShape)
    n = T.lscalar("n")
    check_symbolic_shape([x, n], specify_shape(x, (n, 3)), [xv, 2])
    verify_grad(lambda a: specify_shape(a, (2, 3)) ** 2, [xv], rng=rng)
    v = T.dmatrix("v")
    r = Rop(specify_shape(x, (2, 3)) * 3, x, v)
    np.testing.assert_allclose(opgraph.function([x, v], r)(xv, xv), 3 * xv)


# ----------------------------------------------------------------------------------------
# Reshape


@pytest.mark.parametrize("dtype", DTYPES)
def test_reshape_matches_numpy_over_dtypes(dtype: str, rng: np.random.Generator) -> None:
    x = T.tensor(dtype, (False, False, False), "x")
    xv = random_value(rng, (2, 3, 4), dtype, low=-5, high=5)
    shapes = [(24,), (-1,), (6, 4), (4, -1), (2, 3, 4), (1, 24, 1), (2, 2, 2, 3), (-1, 1)]
    outs = [reshape(x, s) for s in shapes] + [x.reshape((3, 8)), flatten(x, 2), x.flatten()]
    expected = [xv.reshape(s) for s in shapes] + [
        xv.reshape(3, 8),
        xv.reshape(2, 12),
        xv.reshape(-1),
    ]
    check_modes([x], outs, [xv], expected)
    for o, e in zip(outs, expected, strict=True):
        assert o.type.dtype == dtype and o.type.ndim == e.ndim
    check_infer_shape([x], outs[: len(shapes) + 1], [xv], Reshape)
    for out in outs[len(shapes) + 1 :]:
        check_symbolic_shape([x], out, [xv])


@pytest.mark.nonfinite
def test_reshape_symbolic_shapes_empty_and_nan(rng: np.random.Generator) -> None:
    x = T.dmatrix("x")
    a, b = T.lscalars("a", "b")
    s = T.lvector("s")
    i32 = T.iscalar("i32")
    outs = [
        reshape(x, (a, b)),
        reshape(x, (a, -1)),
        reshape(x, s, ndim=2),
        reshape(x, [i32, 2, -1]),
        reshape(x, x.shape[::-1]),
    ]
    xv = np.array([[np.nan, np.inf, 1.0], [-np.inf, 0.0, 2.0]])
    vals = [xv, 3, 2, np.array([1, 6]), np.int32(3)]
    expected = [xv.reshape(3, 2), xv.reshape(3, -1), xv.reshape(1, 6), xv.reshape(3, 2, 1)]
    expected.append(xv.reshape(3, 2))
    check_modes([x, a, b, s, i32], outs, vals, expected, modes=NAN_MODES)
    for out in outs:
        check_symbolic_shape([x, a, b, s, i32], out, vals)
    e = T.dtensor3("e")
    ev = np.zeros((0, 3, 2))
    check_modes(
        [e],
        [reshape(e, (-1, 2)), flatten(e), reshape(e, (3, 0))],
        [ev],
        [ev.reshape(-1, 2), ev.reshape(-1), ev.reshape(3, 0)],
    )


def test_reshape_types_names_and_broadcastable() -> None:
    x = T.dmatrix("x")
    y = reshape(x, (1, -1))
    assert str(y.owner.op) == "Reshape{2}" and y.type.broadcastable == (True, False)
    assert Reshape(2) == Reshape(2) and Reshape(2) != Reshape(3)
    n = T.lscalar("n")
    assert reshape(x, (n, 1, 1)).type.broadcastable == (False, True, True)
    r = T.row("r")
    assert reshape(x, shape(r), ndim=2).type.broadcastable == (True, False)
    assert reshape(x, ()).type.ndim == 0
    assert flatten(T.dtensor3()).type.broadcastable == (False,)
    assert flatten(T.TensorType("float64", (True, False, True))(), 2).type.broadcastable == (
        True,
        False,
    )
    assert flatten(T.TensorType("float64", (False, True, True))(), 2).type.broadcastable == (
        False,
        True,
    )
    assert flatten(T.dscalar()).type.broadcastable == (True,)
    text = debugprint(flatten(T.dtensor3("t"), 2), file="str")
    assert "Reshape{2}" in text and "MakeVector{dtype='int64'}" in text and "Shape_i{0}" in text
    assert pp(make_vector(n, 2)) == "[n, TensorConstant{2}]"


def test_reshape_errors_name_the_problem(mode: str) -> None:
    x = T.dmatrix("x")
    f = opgraph.function([x], reshape(x, (4, -1)), mode=mode)
    with pytest.raises(
        ValueError, match=r"Reshape\{2\}: cannot reshape an array of shape \(2, 3\)"
    ):
        f(np.ones((2, 3)))
    s = T.lvector("s")
    g = opgraph.function([x, s], reshape(x, s, ndim=2), mode=mode)
    with pytest.raises(ValueError, match=r"has 3 element\(s\), expected 2"):
        g(np.ones((2, 3)), np.array([1, 2, 3]))
    with pytest.raises(ValueError, match=r"\(6, 7\)"):
        g(np.ones((2, 3)), np.array([6, 7]))


def test_reshape_build_errors() -> None:
    x = T.dmatrix("x")
    with pytest.raises(ValueError, match="pass ndim"):
        reshape(x, T.lvector("s"))
    with pytest.raises(TypeError, match="must be a vector of integers"):
        reshape(x, (2.0, 3.0))
    with pytest.raises(TypeError, match=r"must be an integer scalar.*TensorType\(float64"):
        reshape(x, (T.dscalar("f"), 2))
    with pytest.raises(ValueError, match=r"has 2 element.*expected 3"):
        Reshape(3)(x, (2, 3))
    with pytest.raises(ValueError, match="flatten: ndim must be between 1 and 2"):
        flatten(x, 3)
    with pytest.raises(ValueError, match="non-negative int ndim"):
        Reshape(-1)


def test_reshape_gradient_and_rop(rng: np.random.Generator) -> None:
    xv = rng.random((2, 3, 2))
    verify_grad(lambda a: reshape(a, (3, 4)), [xv], rng=rng)
    verify_grad(lambda a: reshape(a, (-1,)) * reshape(a, (12,)), [xv], rng=rng)
    verify_grad(lambda a: flatten(a, 2), [xv], rng=rng)
    verify_grad(lambda a: reshape(a, shape(a)[::-1], ndim=3), [xv], rng=rng)
    r = T.TensorType("float64", (True, False))("r")
    g = grad(reshape(r, (-1,)).sum(), r)
    assert g.type.broadcastable == (True, False)
    x, v = T.dtensor3("x"), T.dtensor3("v")
    out = Rop(reshape(x, (3, 4)), x, v)
    f = opgraph.function([x, v], out, on_unused_input="ignore")
    np.testing.assert_allclose(f(xv, xv), xv.reshape(3, 4))


# ----------------------------------------------------------------------------------------
# squeeze, expand_dims, padding, transpose


def test_dimshuffle_helpers_match_numpy(mode: str, rng: np.random.Generator) -> None:
    t = T.TensorType("float32", (False, True, False, True))("t")
    tv = random_value(rng, (2, 1, 3, 1), "float32")
    outs = [
        squeeze(t),
        t.squeeze(),
        squeeze(t, 1),
        squeeze(t, (-1, 1)),
        expand_dims(t, 0),
        expand_dims(t, (-1, 2)),
        shape_padleft(t, 2),
        shape_padright(t),
        shape_padaxis(t, -2),
        transpose(t),
        transpose(t, (2, 0, 3, 1)),
    ]
    expected = [
        tv.squeeze(),
        tv.squeeze(),
        tv.squeeze(1),
        tv.squeeze((3, 1)),
        np.expand_dims(tv, 0),
        np.expand_dims(tv, (-1, 2)),
        tv[None, None],
        tv[..., None],
        np.expand_dims(tv, -2),
        tv.T,
        tv.transpose(2, 0, 3, 1),
    ]
    check_modes([t], outs, [tv], expected, modes=(mode,))
    assert outs[5].type.broadcastable == (False, True, True, False, True, True)


def test_squeeze_of_a_non_broadcastable_axis_checks_length_at_run_time() -> None:
    x = T.dmatrix("x")
    f = opgraph.function([x], squeeze(x, 0))
    np.testing.assert_allclose(f(np.ones((1, 3))), np.ones(3))
    with pytest.raises(ValueError, match="declared broadcastable but has length 2"):
        f(np.ones((2, 3)))
    with pytest.raises(ValueError, match="squeeze: axis 2 is out of range"):
        squeeze(x, 2)


def test_transpose_names_and_padaxis_errors() -> None:
    x = T.dmatrix("x")
    assert transpose(x).name == "x.T" and transpose(x, (0, 1)).name is None
    assert str(transpose(x).owner.op) == "InplaceDimShuffle{1,0}"
    with pytest.raises(ValueError, match="must name each"):
        transpose(x, (0,))
    with pytest.raises(ValueError, match="repeated axis"):
        transpose(x, (0, 0))
    with pytest.raises(IndexError, match=r"axis 3 is out of bounds \[-3, 3\)"):
        shape_padaxis(x, 3)
    with pytest.raises(ValueError, match="expand_dims: axis 4 is out of range"):
        expand_dims(x, 4)


# ----------------------------------------------------------------------------------------
# MakeVector and shape-vector helpers


def test_make_vector_forward_dtypes_and_errors(mode: str) -> None:
    a, b = T.lscalars("a", "b")
    c = T.bscalar("c")
    f_ = T.fscalar("f")
    outs = [make_vector(a, b), make_vector(a, c, 5), make_vector(f_, c), MakeVector("float64")(f_)]
    vals = [3, -2, np.int8(7), np.float32(1.5)]
    expected = [
        np.array([3, -2]),
        np.array([3, 7, 5]),
        np.array([1.5, 7], "float32"),
        np.array([1.5]),
    ]
    check_modes([a, b, c, f_], outs, vals, expected, modes=(mode,))
    assert [o.type.dtype for o in outs] == ["int64", "int64", "float32", "float64"]
    assert str(outs[0].owner.op) == "MakeVector{dtype='int64'}"
    assert outs[0].type.broadcastable == (False,)
    with pytest.raises(TypeError, match=r"input 0 .* has dtype int64.*without loss"):
        MakeVector("int8")(a)
    with pytest.raises(TypeError, match="must be a 0-d tensor"):
        MakeVector("float64")(T.dvector())
    empty = MakeVector("int64")()
    assert opgraph.function([], empty)().shape == (0,)


def test_make_vector_grad_infer_shape_and_helpers(rng: np.random.Generator) -> None:
    verify_grad(
        lambda p, q: make_vector(p, q * 2, p * q) ** 2, [rng.random(()), rng.random(())], rng=rng
    )
    a = T.lscalar("a")
    g = grad(
        cast(make_vector(a, 2), "float64").sum() + 0 * T.dscalar("z"),
        a,
        disconnected_inputs="ignore",
    )
    assert g is None or g.type.dtype.startswith("float")
    check_infer_shape([a], make_vector(a, a), [2], MakeVector)
    x = T.dtensor3("x")
    assert get_vector_length(shape(x)) == 3 and get_vector_length(make_vector(a, a)) == 2
    assert get_vector_length(as_tensor_variable(np.arange(4))) == 4
    assert get_vector_length(T.TensorType("int64", (True,))()) == 1
    with pytest.raises(ValueError, match="cannot be known before"):
        get_vector_length(T.lvector())
    with pytest.raises(TypeError, match="needs a vector"):
        get_vector_length(T.lmatrix())
    elements = vector_elements(shape(x))
    assert [str(e.owner.op) for e in elements] == ["Shape_i{0}", "Shape_i{1}", "Shape_i{2}"]
    assert vector_elements(make_vector(a, 3)) == [a, 3]
    assert vector_elements(as_tensor_variable([4, 5])) == [4, 5]


def test_axis_helpers_gradients(rng: np.random.Generator) -> None:
    xv = rng.random((3, 1, 2))
    verify_grad(lambda a: squeeze(a, 1) * 2, [xv], rng=rng)
    verify_grad(lambda a: expand_dims(a, (0, -1)) ** 2, [xv], rng=rng)
    verify_grad(lambda a: transpose(a, (2, 0, 1)), [xv], rng=rng)
    verify_grad(
        lambda a: shape_padaxis(a, 1) + shape_padleft(a) + shape_padright(a, 2).sum(), [xv], rng=rng
    )
    x = T.dtensor3("x")
    assert get_vector_length(shape(x)[1:]) == 2 and get_vector_length(shape(x)[::-2]) == 2
    assert reshape(x, shape(x)[::-1]).type.ndim == 3
