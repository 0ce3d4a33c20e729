"""Elemwise, DimShuffle and CAReduce: type-based broadcasting, shapes, names and errors."""

from __future__ import annotations

import numpy as np
import pytest

import opgraph.scalar.basic as ps
import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.gradient import Rop, grad, verify_grad
from opgraph.tensor.elemwise import CAReduce, CAReduceDtype, DimShuffle, Elemwise, Sum
from opgraph.testing.checks import check_infer_shape, check_modes

# ----------------------------------------------------------------------------------------
# broadcasting is decided by the type


def test_a_runtime_length_one_dim_does_not_broadcast_unless_declared(mode: str) -> None:
    x, y = T.dmatrix("x"), T.dmatrix("y")
    f = function([x, y], x + y, mode=mode)
    with pytest.raises(
        ValueError, match=r"x has shape \(1, 4\), y has shape \(3, 4\): they cannot broadcast"
    ):
        f(np.ones((1, 4)), np.ones((3, 4)))
    with pytest.raises(ValueError, match=r"mis-match in dimension 1: 4 vs 1; y's type does not"):
        f(np.ones((3, 4)), np.ones((3, 1)))


def test_a_declared_broadcastable_dim_broadcasts(mode: str) -> None:
    x, r, c = T.dmatrix("x"), T.drow("r"), T.dcol("c")
    xv, rv, cv = np.ones((3, 4)), np.arange(4.0)[None], np.arange(3.0)[:, None]
    check_modes([x, r, c], [x + r, r * c, x - c], [xv, rv, cv], [xv + rv, rv * cv, xv - cv], [mode])
    assert (x + r).broadcastable == (False, False)
    assert (r * c).broadcastable == (False, False)
    assert (r + r).broadcastable == (True, False)


def test_a_value_contradicting_a_broadcastable_type_is_rejected() -> None:
    r = T.drow("r")
    f = function([r], r * 2)
    with pytest.raises(TypeError, match=r"broadcastable|shape"):
        f(np.ones((3, 4)))


def test_lower_rank_inputs_are_padded_on_the_left_with_a_dimshuffle() -> None:
    x, v = T.dmatrix("x"), T.dvector("v")
    out = x * v
    padded = out.owner.inputs[1]
    assert isinstance(padded.owner.op, DimShuffle)
    assert str(padded.owner.op) == "InplaceDimShuffle{x,0}"
    check_modes([x, v], out, [np.ones((2, 3)), np.arange(3.0)], np.ones((2, 3)) * np.arange(3.0))


def test_empty_inputs_broadcast_to_empty(mode: str) -> None:
    x, r = T.dmatrix("x"), T.drow("r")
    check_modes([x, r], x * r, [np.ones((0, 4)), np.ones((1, 4))], np.ones((0, 4)), [mode])


def test_elemwise_infer_shape_uses_the_non_broadcastable_input() -> None:
    x, r, c = T.dmatrix("x"), T.drow("r"), T.dcol("c")
    vals = [np.ones((3, 4)), np.ones((1, 4)), np.ones((3, 1))]
    check_infer_shape([x, r, c], [x + r, r * c, T.exp(c), x * r * c], vals, Elemwise)


def test_elemwise_type_errors_name_the_types() -> None:
    with pytest.raises(TypeError, match=r"Elemwise\{and_,no_inplace\}.*float64"):
        T.and_(T.dvector("a"), T.dvector("b"))
    with pytest.raises(TypeError, match="ScalarOp"):
        Elemwise("add")  # type: ignore[arg-type]


def test_elemwise_multiple_outputs_and_composite_names() -> None:
    from opgraph.scalar.basic import Composite
    from opgraph.scalar.type import get_scalar_type

    a, b = get_scalar_type("float64")("a"), get_scalar_type("float64")("b")
    comp = Composite([a, b], [ps.add(ps.mul(a, b), a)])
    x, y = T.dvector("x"), T.dvector("y")
    out = Elemwise(comp)(x, y)
    assert str(out.owner.op) == "Elemwise{Composite{((i0 * i1) + i0)}}"
    check_modes([x, y], out, [np.array([1.0, 2.0]), np.array([3.0, 4.0])], [4.0, 10.0])
    verify_grad(lambda u, v: Elemwise(comp)(u, v), [np.array([1.0, 2.0]), np.array([0.5, 3.0])])


def test_elemwise_r_op_matches_the_jacobian() -> None:
    x, v = T.dvector("x"), T.dvector("v")
    r = Rop(T.sin(x) * x, x, v)
    xv, vv = np.array([0.3, 1.2]), np.array([1.0, -2.0])
    expected = (np.cos(xv) * xv + np.sin(xv)) * vv
    np.testing.assert_allclose(function([x, v], r)(xv, vv), expected)


def test_inplace_elemwise_overwrites_its_input_buffer() -> None:
    import opgraph.tensor.math as tm

    x = T.dvector("x")
    node = tm.exp_inplace(x).owner
    buf = np.array([0.0, 1.0])
    cell = [[None]]
    node.op.perform(node, [buf], cell)
    assert cell[0][0] is buf
    np.testing.assert_allclose(buf, np.exp([0.0, 1.0]))


# ----------------------------------------------------------------------------------------
# DimShuffle


def test_dimshuffle_transpose_add_and_drop(mode: str) -> None:
    x, r = T.dtensor3("x"), T.drow("r")
    xv = np.arange(24.0).reshape(2, 3, 4)
    outs = [x.dimshuffle(2, 0, 1), x.dimshuffle(0, "x", 1, 2), r.dimshuffle(1), x.T]
    expected = [xv.transpose(2, 0, 1), xv[:, None], np.arange(4.0), xv.T]
    check_modes([x, r], outs, [xv, np.arange(4.0)[None]], expected, [mode])
    check_infer_shape([x, r], outs, [xv, np.arange(4.0)[None]], DimShuffle)
    assert str(x.dimshuffle(2, 0, 1).owner.op) == "InplaceDimShuffle{2,0,1}"
    assert str(DimShuffle((False,), ["x", 0], inplace=False)) == "DimShuffle{x,0}"


def test_dimshuffle_errors() -> None:
    with pytest.raises(ValueError, match="drops dimension 0, which is not broadcastable"):
        T.dmatrix().dimshuffle(1)
    with pytest.raises(ValueError, match="appears twice"):
        T.dmatrix().dimshuffle(0, 0)
    with pytest.raises(ValueError, match="out of range"):
        T.dmatrix().dimshuffle(0, 2)


def test_dimshuffle_gradient(rng: np.random.Generator) -> None:
    verify_grad(lambda a: a.dimshuffle(1, "x", 0) * 2.0, [rng.random((2, 3))])


# ----------------------------------------------------------------------------------------
# CAReduce and Sum


def test_careduce_names_follow_theano() -> None:
    assert str(CAReduce(ps.maximum)) == "Reduce{maximum}"
    assert str(CAReduce(ps.maximum, (1, 0))) == "Reduce{maximum}{0, 1}"
    assert str(Sum(axis=0, acc_dtype="float64")) == "Sum{axis=[0], acc_dtype=float64}"
    assert str(CAReduceDtype(ps.mul, None, "float64", "float64")) == (
        "ReduceDtype{mul}{acc_dtype=float64}"
    )
    x = T.fmatrix("x")
    assert str(T.sum(x).owner.op) == "Sum{acc_dtype=float64}"


@pytest.mark.parametrize(
    ("scalar_op", "ref"),
    [
        (ps.maximum, np.max),
        (ps.minimum, np.min),
        (ps.add, np.sum),
        (ps.mul, np.prod),
        (ps.and_, np.bitwise_and.reduce),
        (ps.or_, np.bitwise_or.reduce),
        (ps.xor, np.bitwise_xor.reduce),
    ],
)
def test_careduce_matches_numpy(scalar_op: ps.ScalarOp, ref: object, mode: str) -> None:
    dtype = "int64" if scalar_op in (ps.and_, ps.or_, ps.xor) else "float64"
    x = T.TensorType(dtype, (False, False))("x")
    xv = np.arange(1, 13).reshape(3, 4).astype(dtype)
    outs = [CAReduce(scalar_op, ax)(x) for ax in (None, 0, (1,), -1)]
    expected = [ref(xv, axis=ax) for ax in (None, 0, 1, 1)]  # type: ignore[operator]
    check_modes([x], outs, [xv], expected, [mode])
    check_infer_shape([x], outs, [xv], CAReduce)


def test_careduce_of_a_scalar_op_without_numpy_reduction_uses_its_impl() -> None:
    x = T.dmatrix("x")
    out = CAReduce(ps.arctan2, 0)(x)  # not associative, but exercises the generic path
    xv = np.array([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_allclose(function([x], out)(xv), np.arctan2(xv[0], xv[1]))


def test_careduce_on_an_empty_axis() -> None:
    x = T.dmatrix("x")
    f = function([x], CAReduce(ps.maximum, 0)(x))
    with pytest.raises(ValueError, match=r"cannot reduce an empty array: the maximum.*\(0, 3\)"):
        f(np.ones((0, 3)))
    np.testing.assert_array_equal(function([x], T.sum(x, axis=0))(np.ones((0, 3))), np.zeros(3))
    assert function([x], CAReduce(ps.maximum, 1)(x))(np.ones((0, 3))).shape == (0,)


def test_careduce_max_gradient_and_r_op(rng: np.random.Generator) -> None:
    x, v = T.dmatrix("x"), T.dmatrix("v")
    xv = rng.random((3, 4))
    verify_grad(lambda a: CAReduce(ps.maximum, 1)(a), [xv])
    verify_grad(lambda a: CAReduce(ps.minimum, None)(a), [xv])
    r = Rop(CAReduce(ps.maximum, 0)(x), x, v)
    vv = rng.random((3, 4))
    expected = vv[np.argmax(xv, axis=0), np.arange(4)]
    np.testing.assert_allclose(function([x, v], r)(xv, vv), expected)
    with pytest.raises(Exception, match="does not define a gradient"):
        grad(T.sum(CAReduce(ps.add)(x)), x)


def test_careduce_axis_out_of_range() -> None:
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        CAReduce(ps.add, 2)(T.dmatrix())


@pytest.mark.parametrize(
    ("dtype", "out", "acc"),
    [
        ("bool", "int64", "int64"),
        ("int8", "int64", "int64"),
        ("uint8", "uint64", "uint64"),
        ("int64", "int64", "int64"),
        ("float32", "float32", "float64"),
        ("float64", "float64", "float64"),
        ("complex64", "complex64", "complex128"),
    ],
)
def test_sum_dtypes_follow_theano(dtype: str, out: str, acc: str, mode: str) -> None:
    x = T.TensorType(dtype, (False,))("x")
    s = T.sum(x)
    assert (s.dtype, s.owner.op.acc_dtype) == (out, acc)
    xv = np.array([1, 1, 0, 1]).astype(dtype)
    check_modes([x], s, [xv], np.sum(xv, dtype=out), [mode])


def test_sum_with_explicit_dtypes_and_a_lossy_accumulator() -> None:
    x = T.lvector("x")
    assert T.sum(x, dtype="float32").owner.op.acc_dtype == "int64"
    assert T.sum(x, acc_dtype="float64").dtype == "int64"
    with pytest.raises(TypeError, match=r"acc_dtype int8.*lose precision"):
        T.sum(x, acc_dtype="int8")
    v = T.bvector("v")
    got = function([v], T.sum(v, dtype="int8"))(np.array([100, 100], "int8"))
    assert got.dtype == np.int8


def test_sum_keepdims_gradient_and_r_op(rng: np.random.Generator) -> None:
    x = T.dtensor3("x")
    out = T.sum(x, axis=[0, 2], keepdims=True)
    assert out.broadcastable == (True, False, True)
    xv = rng.random((2, 3, 4))
    check_modes([x], out, [xv], xv.sum(axis=(0, 2), keepdims=True))
    verify_grad(lambda a: T.sum(a, axis=[0, 2]), [xv])
    v = T.dtensor3("v")
    r = Rop(T.sum(x, axis=1), x, v)
    f = function([x, v], r, on_unused_input="ignore")
    np.testing.assert_allclose(f(xv, xv * 2), (xv * 2).sum(axis=1))


def test_sum_of_ints_has_a_zero_gradient() -> None:
    x = T.dvector("x")
    g = grad(T.sum(T.sum(T.cast(x, "int64")) * 1.0), x)
    np.testing.assert_array_equal(function([x], g)([1.0, 2.0]), [0.0, 0.0])
