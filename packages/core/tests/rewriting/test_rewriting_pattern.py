"""Pattern rewriters: nested-tuple patterns, pattern variables, constants, constraints."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.fg import FunctionGraph
from opgraph.graph.op import Op
from opgraph.graph.type import Type
from opgraph.rewriting import (
    EquilibriumGraphRewriter,
    PatternNodeRewriter,
    in2out,
    pattern_rewriter,
)


class ToyType(Type):
    """Float arrays of a fixed number of dimensions."""

    __props__ = ("ndim",)

    def __init__(self, ndim: int = 0) -> None:
        self.ndim = ndim

    def filter(self, data: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        arr = np.asarray(data, dtype=float)
        if arr.ndim != self.ndim:
            raise TypeError(f"expected {self.ndim} dimensions, got {arr.ndim}")
        return arr


scalar, vector = ToyType(0), ToyType(1)


def as_toy(x: Any) -> Variable:
    if isinstance(x, Variable):
        return x
    arr = np.asarray(x, dtype=float)
    return ToyType(arr.ndim).make_constant(arr)


class BinOp(Op):
    __props__ = ()

    def make_node(self, a: Any, b: Any) -> Apply:
        a, b = as_toy(a), as_toy(b)
        return Apply(self, [a, b], [ToyType(max(a.type.ndim, b.type.ndim))()])

    def perform(self, node: Apply, inputs: Any, output_storage: Any) -> None:
        output_storage[0][0] = self.fn(*inputs)


class Add(BinOp):
    fn = staticmethod(np.add)


class Mul(BinOp):
    fn = staticmethod(np.multiply)


class TrueDiv(BinOp):
    fn = staticmethod(np.true_divide)


class Neg(Op):
    __props__ = ()

    def make_node(self, a: Any) -> Apply:
        a = as_toy(a)
        return Apply(self, [a], [a.type()])


class Identity(Op):
    __props__ = ()

    def make_node(self, a: Any) -> Apply:
        a = as_toy(a)
        return Apply(self, [a], [a.type()])


add, mul, true_div, neg, identity = Add(), Mul(), TrueDiv(), Neg(), Identity()


def fg(*outs: Variable) -> FunctionGraph:
    from opgraph.graph.traversal import graph_inputs

    ins = [v for v in graph_inputs(outs) if not isinstance(v, Constant)]
    return FunctionGraph(ins, list(outs), clone=False)


def evaluate(var: Variable, values: dict[Variable, Any]) -> Any:
    """Evaluate a toy graph iteratively (enough for these tests)."""
    from opgraph.graph.traversal import io_toposort

    env = dict(values)
    for node in io_toposort(list(values), [var]):
        store: list[list[Any]] = [[None]]
        ins = [_value(env, i) for i in node.inputs]
        node.op.perform(node, ins, store)
        env[node.outputs[0]] = store[0][0]
    return _value(env, var)


def _value(env: dict[Variable, Any], var: Variable) -> Any:
    try:
        return env[var]
    except KeyError:
        return var.data  # a Constant


# ------------------------------------------------------------------ the seed examples

local_mul_div = pattern_rewriter("local_mul_div", (mul, "x", (true_div, "y", "x")), "y")
local_div_mul = pattern_rewriter("local_div_mul", (true_div, (mul, "x", "y"), "y"), "x")


def test_x_times_y_over_y_is_x() -> None:
    x, y = scalar("x"), scalar("y")
    out = true_div(mul(x, y), y)
    g = fg(out)
    assert in2out(local_div_mul).rewrite(g) == 1
    assert g.outputs[0] is x
    assert not g.apply_nodes


def test_mul_x_div_y_x() -> None:
    x, y = scalar("x"), scalar("y")
    g = fg(add(mul(x, true_div(y, x)), 1.0))
    in2out(local_mul_div).rewrite(g)
    (node,) = g.apply_nodes
    assert node.inputs[0] is y
    assert evaluate(g.outputs[0], {x: 3.0, y: 5.0}) == pytest.approx(6.0)


def test_same_name_must_bind_the_same_variable() -> None:
    x, y, z = scalar("x"), scalar("y"), scalar("z")
    assert local_mul_div.match(mul(x, true_div(y, x))) == {"x": x, "y": y}
    assert local_mul_div.match(mul(z, true_div(y, x))) is None
    g = fg(mul(z, true_div(y, x)))
    assert in2out(local_mul_div).rewrite(g) == 0


def test_equal_constants_bind_the_same_name() -> None:
    y = scalar("y")
    out = mul(scalar.make_constant(2.0), true_div(y, scalar.make_constant(2.0)))
    assert local_mul_div.match(out) == {"x": out.owner.inputs[0], "y": y}


def test_constants_match_by_value_any_shape() -> None:
    rw = pattern_rewriter("local_mul_one", (mul, "x", 1), "x")
    x, v = scalar("x"), vector("v")
    assert rw.match(mul(x, 1.0)) == {"x": x}
    assert rw.match(mul(x, 2.0)) is None
    assert rw.match(mul(x, scalar("one"))) is None
    assert rw.match(mul(v, [1.0, 1.0, 1.0])) == {"x": v}
    assert rw.match(mul(v, [1.0, 2.0, 1.0])) is None
    g = fg(mul(v, [1.0, 1.0]))
    in2out(rw).rewrite(g)
    assert g.outputs[0] is v


def test_a_broadcasting_constant_does_not_change_the_type() -> None:
    rw = pattern_rewriter("local_mul_one", (mul, "x", 1), "x")
    x = scalar("x")
    g = fg(mul(x, [1.0, 1.0]))  # a vector: x alone is a scalar, not a replacement
    assert in2out(rw).rewrite(g) == 0
    assert len(g.apply_nodes) == 1


def test_constraints() -> None:
    def is_named_x(var: Variable) -> bool:
        return var.name == "x"

    rw = pattern_rewriter(
        "local_neg_named", (neg, {"pattern": "a", "constraint": is_named_x}), (mul, "a", -1.0)
    )
    x, y = scalar("x"), scalar("y")
    assert rw.match(neg(x)) == {"a": x}
    assert rw.match(neg(y)) is None
    top = PatternNodeRewriter(
        {"pattern": (neg, "a"), "constraint": lambda v: v.owner.inputs[0].name == "y"}, "a"
    )
    assert top.match(neg(y)) == {"a": y}
    assert top.match(neg(x)) is None


def test_op_class_in_pattern() -> None:
    rw = pattern_rewriter("local_binop_zero", (BinOp, "x", 0), "x")
    x = scalar("x")
    assert rw.tracks() == [BinOp]
    assert rw.match(add(x, 0.0)) == {"x": x}
    assert rw.match(mul(x, 0.0)) == {"x": x}
    assert rw.match(neg(x)) is None


def test_allow_multiple_clients() -> None:
    x, y = scalar("x"), scalar("y")
    inner = mul(x, y)
    out = add(true_div(inner, y), inner)  # inner has two clients
    strict = pattern_rewriter("local_div_mul", (true_div, (mul, "x", "y"), "y"), "x")
    g = fg(out)
    assert in2out(strict).rewrite(g) == 0
    loose = PatternNodeRewriter(
        (true_div, (mul, "x", "y"), "y"), "x", name="loose", allow_multiple_clients=True
    )
    assert in2out(loose).rewrite(g) == 1
    assert g.outputs[0].owner.inputs[0] is x


def test_skip_identities() -> None:
    def skip(var: Variable) -> Variable | None:
        if var.owner is not None and isinstance(var.owner.op, Identity):
            return var.owner.inputs[0]
        return None

    rw = PatternNodeRewriter((neg, (neg, "x")), "x", name="nn", skip_identities_fn=skip)
    x = scalar("x")
    assert rw.match(neg(identity(neg(x)))) == {"x": x}
    plain = pattern_rewriter("nn", (neg, (neg, "x")), "x")
    assert plain.match(neg(identity(neg(x)))) is None


def test_out_pattern_builds_new_nodes() -> None:
    rw = pattern_rewriter(
        "local_distribute", (mul, "a", (add, "b", "c")), (add, (mul, "a", "b"), (mul, "a", "c"))
    )
    a, b, c = scalar("a"), scalar("b"), scalar("c")
    g = fg(mul(a, add(b, c)))
    in2out(rw).rewrite(g)
    out = g.outputs[0]
    assert isinstance(out.owner.op, Add)
    assert [type(i.owner.op) for i in out.owner.inputs] == [Mul, Mul]
    assert evaluate(out, {a: 2.0, b: 3.0, c: 4.0}) == 14.0


def test_identity_name_doc_and_location() -> None:
    assert local_mul_div.identity == "Mul(x, TrueDiv(y, x)) -> y"
    assert local_mul_div.__doc__ == "``Mul(x, TrueDiv(y, x)) -> y``"
    assert local_mul_div.name == "local_mul_div"
    assert local_mul_div.location.endswith(f"test_rewriting_pattern.py:{_line('local_mul_div')}")
    anonymous = PatternNodeRewriter((neg, (neg, "x")), "x")
    assert anonymous.name == "Neg(Neg(x)) -> x"


def _line(name: str) -> int:
    with open(__file__) as f:
        for i, line in enumerate(f, 1):
            if line.startswith(f"{name} = "):
                return i
    raise AssertionError(name)


def test_bad_patterns_are_rejected() -> None:
    with pytest.raises(TypeError, match="must be a tuple"):
        PatternNodeRewriter("x", "x")
    with pytest.raises(TypeError, match="Op classes"):
        PatternNodeRewriter((len, "x"), "x")
    with pytest.raises(TypeError, match=r"unsupported pattern element .* in bad"):
        pattern_rewriter("bad", (neg, ["x"]), "x")  # told when declared, not when matching


def test_pattern_equilibrium_with_several_identities() -> None:
    rws = [
        pattern_rewriter("local_neg_neg", (neg, (neg, "x")), "x"),
        pattern_rewriter("local_mul_one", (mul, "x", 1), "x"),
        pattern_rewriter("local_add_zero", (add, "x", 0), "x"),
    ]
    x = scalar("x")
    out = add(mul(neg(neg(mul(x, 1.0))), 1.0), 0.0)
    g = fg(out)
    EquilibriumGraphRewriter(rws).rewrite(g)
    assert g.outputs[0] is x


def test_theano_names() -> None:
    from opgraph.rewriting import PatternSub, TopoOptimizer

    rw = PatternSub((neg, (neg, "x")), "x", False, None, "local_nn", pdb=False)
    assert rw.name == "local_nn" and not rw.allow_multiple_clients
    x = scalar("x")
    g = fg(neg(neg(x)))
    TopoOptimizer(rw, order="out_to_in").rewrite(g)
    assert g.outputs[0] is x


class AddN(Op):
    """A variadic sum (one or more inputs)."""

    __props__ = ()

    def make_node(self, *xs: Any) -> Apply:
        xs = tuple(as_toy(x) for x in xs)
        return Apply(self, list(xs), [ToyType(max(x.type.ndim for x in xs))()])

    def perform(self, node: Apply, inputs: Any, output_storage: Any) -> None:
        output_storage[0][0] = sum(inputs)


add_n = AddN()


def test_rest_variable_binds_the_remaining_inputs() -> None:
    rw = pattern_rewriter(
        "local_add_n_flat", (add_n, (add_n, "*inner"), "*outer"), (add_n, "*inner", "*outer")
    )
    a, b, c, d = (scalar(n) for n in "abcd")
    assert rw.match(add_n(add_n(a, b), c, d)) == {"inner": (a, b), "outer": (c, d)}
    assert rw.match(add_n(add_n(a))) == {"inner": (a,), "outer": ()}
    assert rw.match(add_n(a, add_n(b, c))) is None
    assert rw.identity == "AddN(AddN(*inner), *outer) -> AddN(*inner, *outer)"
    g = fg(add_n(add_n(a, b), c, d))
    assert in2out(rw).rewrite(g) == 1
    assert g.outputs[0].owner.inputs == [a, b, c, d]


def test_rest_variable_needs_the_fixed_inputs_and_the_same_inputs_twice() -> None:
    rw = pattern_rewriter("p", (add_n, "x", "y", "*rest"), "x")
    a, b = scalar("a"), scalar("b")
    assert rw.match(add_n(a)) is None
    assert rw.match(add_n(a, b)) == {"x": a, "y": b, "rest": ()}
    twice = pattern_rewriter("q", (add_n, (add_n, "*s"), "*s"), (add_n, "*s"))
    assert twice.match(add_n(add_n(a, b), a, b)) == {"s": (a, b)}
    assert twice.match(add_n(add_n(a, b), b, a)) is None


def test_tracks_with_a_predicate_head() -> None:
    def is_unary(op: Op) -> bool:
        return isinstance(op, Neg | Identity)

    rw = pattern_rewriter(
        "local_unary_unary", (is_unary, (is_unary, "x")), "x", tracks=[neg, Identity]
    )
    assert rw.tracks() == [neg, Identity]
    x = scalar("x")
    assert rw.match(neg(identity(x))) == {"x": x}
    assert rw.match(neg(x)) is None
    assert rw.identity == "is_unary(is_unary(x)) -> x"
    g = fg(identity(neg(x)))
    assert in2out(rw).rewrite(g) == 1 and g.outputs[0] is x
    with pytest.raises(TypeError, match="tracks must be Ops"):
        pattern_rewriter("bad", (neg, "x"), "x", tracks=[is_unary])
    with pytest.raises(TypeError, match="tracks must be Ops"):
        pattern_rewriter("bad", (neg, "x"), "x", tracks=[])


def test_retype_gives_the_replacement_its_type_or_refuses() -> None:
    from opgraph.rewriting.pattern import exact_type

    seen = []

    def via_identity(new: Variable, old: Variable) -> Variable | None:
        seen.append((new, old))
        return identity(new) if new.type == old.type else None

    x = scalar("x")
    rw = pattern_rewriter("p", (mul, "x", 1), "x", retype=via_identity)
    g = fg(mul(x, 1.0))
    out = g.outputs[0]
    assert in2out(rw).rewrite(g) == 1
    assert seen == [(x, out)] and isinstance(g.outputs[0].owner.op, Identity)
    assert in2out(rw).rewrite(fg(mul(scalar("y"), [1.0, 1.0]))) == 0  # refused: a vector
    exact = pattern_rewriter("q", (add, "x", "y"), "y", retype=exact_type)
    s, v = scalar("s"), vector("v")
    g = fg(add(v, s), add(s, v))
    assert in2out(exact).rewrite(g) == 1
    assert g.outputs[0].owner is not None and g.outputs[1] is v
