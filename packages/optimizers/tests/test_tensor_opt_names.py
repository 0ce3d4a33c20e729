"""Theano 1.0 ``theano.tensor.opt`` helper names in ``opgraph.tensor.opt``.

Expected values were recorded from Theano 1.0.5 (``THEANO_FLAGS=device=cpu,cxx=``).
"""

from __future__ import annotations

import numpy as np
import pytest

import opgraph.scalar as ps
import opgraph.tensor as T
from opgraph.compile.ops import ObsoleteTheanoAPIError
from opgraph.graph.fg import FunctionGraph
from opgraph.printing import pp
from opgraph.tensor import opt


def test_assert_is_exported() -> None:
    from opgraph.tensor.assert_op import Assert

    assert opt.Assert is Assert and opt.assert_op is opt.assert_
    assert str(opt.assert_op) == "Assert{msg='Theano Assert failed!'}"


def test_merge_broadcastables() -> None:
    assert opt.merge_broadcastables([(True, False, True), (True, True, False)]) == [
        True,
        False,
        False,
    ]
    assert opt.merge_broadcastables([]) == []


def test_scalarconsts_rest() -> None:
    x = T.vector("x")
    c2 = T.constant(np.float32(2.0))
    s = T.constant(np.int8(3)) + T.constant(np.int8(1))
    five = T.constant(np.array([5, 5]))
    other = T.constant(np.array([1, 2]))
    fill = T.fill(x, np.float32(3.0))
    cst = T.cast(T.constant(np.float32(2.5)), "int32")
    consts, orig, rest = opt.scalarconsts_rest([x, c2, s, five, other, fill, cst])
    # Theano: [array(2., float32), array(4, int8), 5 (int64), array(3., float32), array(2, int32)]
    assert [np.asarray(v).item() for v in consts] == [2.0, 4, 5, 3.0, 2]
    assert [np.asarray(v).dtype.name for v in consts] == [
        "float32",
        "int8",
        "int64",
        "float32",
        "int32",
    ]
    assert orig == [c2, s, five, fill, cst] and rest == [x, other]
    consts, orig, rest = opt.scalarconsts_rest([x, c2, s], only_process_constants=True)
    assert orig == [c2] and rest == [x, s]
    assert opt.scalarconsts_rest([s], elemwise=False) == ([], [], [s])


def test_mul_calculate() -> None:
    r = opt.mul_calculate([np.int8(2), np.float32(3)], [np.int16(4)])
    assert r == 1.5 and r.dtype == np.float32
    r = opt.mul_calculate([], [])
    assert r == 1 and r.dtype == np.int8
    assert opt.mul_calculate([], [], aslist=True) == []
    assert opt.mul_calculate([np.float64(2)], [np.float64(2)], aslist=True) == []
    r = opt.mul_calculate([np.int32(6)], [np.int32(4)], out_type=T.dscalar().type)
    assert r == 1.5 and r.dtype == np.float64


def test_add_calculate() -> None:
    r = opt.add_calculate([np.int8(2), np.float32(3)], [np.int16(4)])
    assert r == 1.0 and r.dtype == np.float64
    r = opt.add_calculate([], [])
    assert r == 0.0 and isinstance(r, float)
    assert opt.add_calculate([np.float64(2)], [np.float64(2)], aslist=True) == []
    r = opt.add_calculate([np.int32(6)], [np.int32(4)], out_type=T.iscalar().type)
    assert r == 2 and r.dtype == np.int32
    btype = T.TensorType("bool", ())
    r = opt.add_calculate([np.bool_(True), np.bool_(True)], [], out_type=btype)
    assert r == True and r.dtype == np.bool_  # noqa: E712
    with pytest.raises(Exception, match="bool subtraction not supported"):
        opt.add_calculate([np.bool_(True)], [np.bool_(True)], out_type=btype)


def test_is_inverse_pair() -> None:
    assert opt.is_inverse_pair(ps.neg, ps.neg, (ps.Neg, ps.Neg))
    assert opt.is_inverse_pair(ps.exp, ps.log, (ps.Log, ps.Exp))
    assert not opt.is_inverse_pair(ps.exp, ps.exp, (ps.Log, ps.Exp))


def test_is_dimshuffle_useless() -> None:
    m = T.TensorType("float64", (False, True, False))("m")
    expected = {(0, 1, 2): True, (0, "x", 2): True, (1, 0, 2): False, (0, 1): False}
    expected[(0, 2, 1)] = False
    for order, useless in expected.items():
        assert opt.is_dimshuffle_useless(order, m) is useless, order


def test_check_for_x_over_absX() -> None:
    x, y = T.vector("x"), T.vector("y")
    num, den = opt.check_for_x_over_absX([x, y], [abs(x), y])
    assert num[0] is y and num[1].owner.op == T.sgn and num[1].owner.inputs == [x]
    assert den == [y]
    xc = T.cvector("xc")
    num, den = opt.check_for_x_over_absX([xc], [abs(xc)])
    assert num == [xc] and len(den) == 1  # complex: left alone


def test_encompasses_broadcastable() -> None:
    assert opt.encompasses_broadcastable((True, False), (False,))
    assert opt.encompasses_broadcastable((False,), (True,))
    assert opt.encompasses_broadcastable((), ())
    assert opt.encompasses_broadcastable((True,), ())
    assert not opt.encompasses_broadcastable((True,), (False,))
    assert not opt.encompasses_broadcastable((), (False,))


def test_make_vector_printer() -> None:
    x = T.vector("x")
    v = opt.make_vector(T.constant(2, dtype="int64"), T.constant(3, dtype="int64"))
    assert opt.MakeVectorPrinter().process(v, None) == pp(v)
    assert pp(v) == "[TensorConstant{2}, TensorConstant{3}]"
    with pytest.raises(TypeError, match=r"Can only print make_vector\."):
        opt.MakeVectorPrinter().process(x, None)


def test_broadcast_like() -> None:
    x = T.matrix("x")
    fg = FunctionGraph([x], [x * 2], clone=False)
    out = opt.broadcast_like(np.float32(3), x, fg)
    assert out.type == x.type
    np.testing.assert_array_equal(out.eval({x: np.zeros((2, 3))}), np.full((2, 3), 3.0))
    assert opt.broadcast_like(x, x, fg) is x
    with pytest.raises(ValueError, match="in the fgraph"):
        opt.broadcast_like(1.0, T.matrix("other"), fg)


def test_apply_local_dimshuffle_lift_and_max_inputs() -> None:
    x = T.matrix("x")
    twice = x.dimshuffle(1, 0).dimshuffle(1, 0)
    assert opt.apply_local_dimshuffle_lift(twice) is x
    assert opt.apply_local_dimshuffle_lift(x) is x
    assert opt.elemwise_max_input_fct(None) == opt.FusionOptimizer().max_inputs


def test_unshape_optimizer_removes_shape_feature() -> None:
    x = T.vector("x")
    fg = FunctionGraph([x], [x.shape[0] * 2])
    fg.attach_feature(opt.ShapeFeature())
    opt.UnShapeOptimizer().apply(fg)
    assert not any(isinstance(f, opt.ShapeFeature) for f in fg.features)


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("local_elemwise_fusion_op", "FusionRewriter"),
        ("local_elemwise_alloc_op", "local_useless_alloc"),
        ("apply_rebroadcast_opt", "local_useless_rebroadcast"),
        ("attempt_distribution", "local_mul_canonizer"),
        ("distribute_greedy", "local_add_canonizer"),
    ],
)
def test_obsolete_internals_raise_with_hint(name: str, hint: str) -> None:
    from opgraph.tensor.opt import __dict__ as names

    fn = names[name]
    with pytest.raises(ObsoleteTheanoAPIError, match=hint):
        fn(T.Elemwise)
