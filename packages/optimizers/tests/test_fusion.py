"""Elementwise fusion: structure of the compiled graphs, values, bounds and the off switch."""

import time

import numpy as np
import pytest

import opgraph as theano
import opgraph.scalar.basic as ps
import opgraph.tensor as T
from opgraph.compile.mode import Mode
from opgraph.graph.basic import Constant
from opgraph.graph.fg import FunctionGraph
from opgraph.scalar.basic import Composite
from opgraph.scalar.type import get_scalar_type
from opgraph.tensor.elemwise import Elemwise
from opgraph.testing import assert_allclose
from opgraph_optimizers.fusion import FusionRewriter, fusion_rewriter

FAST_RUN = Mode("vm", "fast_run")
REFERENCE = Mode("vm", None)  # no rewrites at all


def _topo(f):
    return f.maker.fgraph.toposort()


def _composites(f):
    return [n for n in _topo(f) if isinstance(getattr(n.op, "scalar_op", None), Composite)]


def _compile_and_compare(inputs, outputs, values, mode=FAST_RUN):
    """Compile with ``mode`` and without rewrites; the values must agree."""
    f = theano.function(inputs, outputs, mode=mode)
    ref = theano.function(inputs, outputs, mode=REFERENCE)
    got = f(*[np.copy(v) for v in values])
    want = ref(*[np.copy(v) for v in values])
    for g, w in zip(
        got if isinstance(got, list) else [got], want if isinstance(want, list) else [want]
    ):
        assert_allclose(g, w)
        assert np.asarray(g).dtype == np.asarray(w).dtype
    return f


def _value(rng, bcast, dtype, low=-2.0, high=2.0):
    shape = tuple(1 if b else n for b, n in zip(bcast, (3, 4, 5)))
    return rng.uniform(low, high, size=shape).astype(dtype)


def test_seed_a_plus_a_pow_10_is_one_fused_node():
    a = T.vector("a")
    f = theano.function([a], a + a**10, mode=FAST_RUN)
    (node,) = _topo(f)
    assert isinstance(node.op, Elemwise) and isinstance(node.op.scalar_op, Composite)
    assert str(node.op).startswith("Elemwise{Composite{")
    assert "pow" not in str(node.op) and "**" not in str(node.op)
    np.testing.assert_allclose(f([0.0, 1.0, 2.0]), [0.0, 2.0, 1026.0])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("bcast", [(False,), (False, False), (True, False), (False, True)])
def test_exp_sin_expression_is_one_composite(rng, dtype, bcast):
    x = T.TensorType(dtype, bcast)("x")
    y = T.exp(-(x**2)) * T.sin(x) + 0.5 * x
    xv = _value(rng, bcast, dtype)
    f = _compile_and_compare([x], y, [xv])
    (node,) = _topo(f)
    assert isinstance(node.op.scalar_op, Composite)
    assert node.outputs[0].type == y.type
    assert_allclose(f(xv), np.exp(-(xv**2)) * np.sin(xv) + np.asarray(0.5, dtype) * xv)


def test_intermediate_with_clients_outside_is_not_duplicated(rng):
    x = T.matrix("x")
    t = T.exp(x)
    outs = [t * 2 + 1, T.sin(t) - 3]
    f = _compile_and_compare([x], outs, [rng.normal(size=(3, 4))])
    topo = _topo(f)
    exps = [n for n in topo if "exp" in str(n.op)]
    assert len(exps) == 1 and not isinstance(exps[0].op.scalar_op, Composite)
    assert len(_composites(f)) == 2
    for node in _composites(f):
        assert node.inputs[-1] is exps[0].outputs[0]
        assert all(isinstance(v, Constant) for v in node.inputs[:-1])


def test_intermediate_that_is_an_output_is_a_boundary(rng):
    x = T.vector("x")
    t = T.exp(x) * 3
    f = _compile_and_compare([x], [t, T.sin(t) + 1], [rng.normal(size=4)])
    for node in _composites(f):
        assert len(node.op.scalar_op.nodes) == 2
    assert len(_topo(f)) == 2


def test_broadcast_pattern_is_a_boundary(rng):
    r, m = T.row("r"), T.matrix("m")
    y = T.exp(r) * 2 + T.log(m) * 3
    f = _compile_and_compare([r, m], y, [rng.normal(size=(1, 4)), rng.uniform(1, 2, size=(3, 4))])
    comps = _composites(f)
    assert len(comps) == 2
    assert {c.outputs[0].type.broadcastable for c in comps} == {(True, False), (False, False)}


def test_constants_stay_inputs_in_theanos_order(rng):
    x = T.matrix("x")
    f = _compile_and_compare([x], T.sin(x) * 2.5 + 1, [rng.normal(size=(3, 4))])
    (node,) = _topo(f)
    assert str(node.op) == "Elemwise{Composite{(i0 + (i1 * sin(i2)))}}"
    assert [str(v) for v in node.inputs] == [
        "TensorConstant{(1, 1) of 1.0}",
        "TensorConstant{(1, 1) of 2.5}",
        "x",
    ]


def test_composites_differing_in_constants_are_one_op(rng):
    x = T.vector("x")
    a, b = (_topo(theano.function([x], x * c + 1, mode=FAST_RUN))[0].op for c in (2.0, 3.0))
    assert a == b and hash(a) == hash(b)


def test_broadcast_constant_becomes_one_constant_input():
    x = T.vector("x")
    c = T.constant(np.full((1, 1), 3, dtype="int8"))
    fg = FunctionGraph([x], [T.exp(x) * c.dimshuffle(1)])
    fusion_rewriter.rewrite(fg)
    node = fg.outputs[0].owner
    assert str(node.op) == "Elemwise{Composite{(exp(i0) * i1)}}"
    const = node.inputs[1]
    assert isinstance(const, Constant) and const.type.broadcastable == (True,)
    assert const.data.tolist() == [3] and const.type.dtype == "int8"


def test_printed_name_is_theanos():
    x, y, z = T.vectors("x", "y", "z")
    fg = FunctionGraph([x, y, z], [x * y + z])
    fusion_rewriter.rewrite(fg)
    (node,) = fg.apply_nodes
    assert str(node.op) == "Elemwise{Composite{((i0 * i1) + i2)}}"


def test_composites_below_the_root_stay_nested_as_in_theano(rng):
    x, y = T.vectors("x", "y")
    inner_x, inner_y = get_scalar_type("float64")("a"), get_scalar_type("float64")("b")
    comp = Composite([inner_x, inner_y], [ps.exp(inner_x) + inner_y])
    fg = FunctionGraph([x, y], [T.sin(Elemwise(comp)(x, y)) * y])
    fusion_rewriter.rewrite(fg)
    (node,) = fg.apply_nodes
    assert str(node.op) == "Elemwise{Composite{(sin(Composite{(exp(i0) + i1)}(i0, i1)) * i1)}}"
    f = theano.function([x, y], T.sin(Elemwise(comp)(x, y)) * y, mode=FAST_RUN)
    xv, yv = rng.normal(size=5), rng.normal(size=5)
    assert_allclose(f(xv, yv), np.sin(np.exp(xv) + yv) * yv)


def test_a_composite_at_the_root_is_inlined():
    x, y = T.vectors("x", "y")
    inner_x, inner_y = get_scalar_type("float64")("a"), get_scalar_type("float64")("b")
    comp = Composite([inner_x, inner_y], [ps.exp(inner_x) + inner_y])
    fg = FunctionGraph([x, y], [Elemwise(comp)(T.sin(x), y)])
    fusion_rewriter.rewrite(fg)
    (node,) = fg.apply_nodes
    assert str(node.op) == "Elemwise{Composite{(exp(sin(i0)) + i1)}}"


def test_integer_and_bool_dtypes(rng):
    i = T.ivector("i")
    y = (i * 3 + 1) > 5
    iv = rng.integers(-5, 5, size=6).astype("int32")
    f = _compile_and_compare([i], [y, (i * 2 - 1) // 3], [iv])
    assert all(isinstance(n.op.scalar_op, Composite) for n in _topo(f))
    np.testing.assert_array_equal(f(iv)[0], (iv * 3 + 1) > 5)


def test_input_bound_is_respected(rng):
    xs = T.vectors(*[f"x{k}" for k in range(40)])
    total = xs[0]
    for x in xs[1:]:
        total = total * 1.5 + x
    values = [rng.normal(size=3) for _ in xs]
    f = _compile_and_compare(xs, total, values, mode=Mode("vm", FusionRewriter(max_inputs=8)))
    comps = _composites(f)
    assert len(comps) > 1
    assert all(len(set(c.inputs)) <= 8 for c in comps)
    with pytest.raises(ValueError):
        FusionRewriter(max_inputs=0)


def test_long_chain_is_fused_in_bounded_pieces_quickly(rng):
    x = T.vector("x")
    y = x
    for k in range(600):
        y = y * 1.001 + 0.1 if k % 2 else T.sin(y)
    t0 = time.perf_counter()
    fg = FunctionGraph([x], [y])
    FusionRewriter().rewrite(fg)
    assert time.perf_counter() - t0 < 15
    sizes = [len(n.op.scalar_op.nodes) for n in fg.apply_nodes]
    assert max(sizes) <= 256 and len(sizes) == len(fg.apply_nodes) >= 3
    f = _compile_and_compare([x], y, [rng.normal(size=5)], mode=Mode("vm", FusionRewriter()))
    assert len(_topo(f)) == len(sizes)


@pytest.mark.parametrize("tag", ["fusion_rewriter", "fusion", "elemwise_fusion"])
def test_excluding_turns_fusion_off(rng, tag):
    x = T.vector("x")
    y = T.exp(-(x**2)) * T.sin(x) + 0.5 * x
    f = _compile_and_compare([x], y, [rng.normal(size=4)], mode=FAST_RUN.excluding(tag))
    assert not _composites(f)
    assert len(_topo(f)) > 1


def test_debug_mode_agrees(rng):
    x, y = T.matrices("x", "y")
    out = T.tanh(x * y + 1) * T.exp(-y) - x / 3
    xv, yv = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    f = theano.function([x, y], out, mode="DEBUG_MODE")
    assert _composites(f)
    assert_allclose(f(xv, yv), np.tanh(xv * yv + 1) * np.exp(-yv) - xv / 3)
