"""pprint: Theano's printers, parenthesization, dispatch rules and deep graphs."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from opgraph.graph.op import Op
from opgraph.printing.pprint import (
    ConstantPrinter,
    DefaultPrinter,
    FunctionPrinter,
    IgnorePrinter,
    LeafPrinter,
    MemberPrinter,
    OperatorPrinter,
    PatternPrinter,
    PPrinter,
    PrinterState,
    pp,
    pprint,
    special,
)


@pytest.fixture
def printer(toys: SimpleNamespace) -> PPrinter:
    """A copy of the global printer with the notation the tensor library registers."""
    p = pprint.clone()
    p.assign(toys.add, OperatorPrinter("+", -2, "either"))
    p.assign(toys.mul, OperatorPrinter("*", -1, "either"))
    p.assign(toys.sub, OperatorPrinter("-", -2, "left"))
    p.assign(toys.neg, OperatorPrinter("-", 0, "either"))
    p.assign(toys.pow, OperatorPrinter("**", 1, "right"))
    p.assign(toys.exp, FunctionPrinter("exp"))
    p.assign(toys.fill, FunctionPrinter("fill"))
    p.assign(toys.gt, FunctionPrinter("gt"))
    p.assign(toys.Elemwise("true_div"), OperatorPrinter("/", -1, "left"))
    p.assign(toys.Elemwise("dot"), OperatorPrinter(special["middle_dot"], -1, "left"))
    return p


def test_global_printer_is_not_changed_by_fixture(toys, printer):
    x = toys.vector("x")
    assert pp(toys.add(x, x)) == "Elemwise{add,no_inplace}(x, x)"
    assert printer(toys.add(x, x)) == "(x + x)"


def test_operators_are_always_parenthesized(toys, printer):
    x, y, z = (toys.vector(n) for n in "xyz")
    assert printer(toys.add(x, y)) == "(x + y)"
    assert printer(toys.mul(toys.add(x, y), z)) == "((x + y) * z)"
    assert printer(toys.add(x, toys.mul(y, z))) == "(x + (y * z))"
    assert printer(toys.neg(x)) == "(-x)"
    assert printer(toys.add(x, y, z)) == "(x + y + z)"
    two = toys.const(2.0)
    assert printer(toys.mul(two, x)) == "(TensorConstant{2.0} * x)"


def test_theano_documented_grad_string(toys, printer):
    x = toys.vector("x")
    two, one, onef = toys.const(2, "int8"), toys.const(1, "int8"), toys.const(1.0)
    g = toys.mul(
        toys.mul(toys.fill(toys.pow(x, two), onef), two),
        toys.pow(x, toys.sub(two, one)),
    )
    assert printer(g) == (
        "((fill((x ** TensorConstant{2}), TensorConstant{1.0}) * TensorConstant{2}) * "
        "(x ** (TensorConstant{2} - TensorConstant{1})))"
    )


def test_theano_documented_logistic_string(toys, printer):
    x, w, b = toys.matrix("x"), toys.vector("w"), toys.vector("b")
    dot, div = toys.Elemwise("dot"), toys.Elemwise("true_div")
    one, half = toys.const(1, "int8"), toys.const(0.5)
    p1 = div(one, toys.add(one, toys.exp(toys.sub(toys.neg(dot(x, w)), b))))
    assert printer(toys.gt(p1, half)) == (
        "gt((TensorConstant{1} / (TensorConstant{1} + exp(((-(x \\dot w)) - b)))), "
        "TensorConstant{0.5})"
    )


def test_default_constant_and_leaf_printers(toys):
    x = toys.vector("x")
    y = toys.Sum()(toys.exp(x))
    assert pp(y) == "Sum{acc_dtype=float64}(Elemwise{exp,no_inplace}(x))"
    assert pp(toys.const(np.ones(3))) == "TensorConstant{(3,) of 1.0}"
    assert pp(toys.vector()) == "<TensorType(float64, vector)>"
    assert pp(toys.vector("alpha")) == "\\alpha"
    assert LeafPrinter().process(x, PrinterState()) == "x"
    c = toys.const(2.0)
    assert ConstantPrinter().process(c, PrinterState()) == "TensorConstant{2.0}"


def test_pattern_member_ignore_printers(toys, printer):
    x, i = toys.matrix("x"), toys.vector("i")
    take, transpose, cast = toys.Elemwise("take"), toys.Elemwise("T"), toys.Elemwise("cast")
    printer.assign(take, PatternPrinter("%(0)s[%(1)s]"))
    printer.assign(transpose, MemberPrinter("T"))
    printer.assign(cast, IgnorePrinter())
    assert printer(take(x, i)) == "x[i]"
    assert printer(transpose(toys.add(x, x))) == "(x + x).T"
    assert printer(cast(toys.exp(x))) == "exp(x)"
    two = toys.Split2()
    a, b = two(x)
    printer.assign(two, FunctionPrinter(["first", "second"]))
    assert printer(toys.add(a, b)) == "(first(x) + second(x))"
    printer.assign(two, PatternPrinter(("<%(0)s>", 1000), "%(0)s!"))
    assert printer(b) == "x!"
    with pytest.raises(TypeError, match="not the result of an operation"):
        OperatorPrinter("+", 0).process(x, PrinterState(pprinter=printer))


def test_assign_by_class_predicate_and_later_wins(toys, printer):
    x = toys.vector("x")
    printer.assign(type(toys.Sum()), FunctionPrinter("sum"))
    assert printer(toys.Sum()(x)) == "sum(x)"
    printer.assign(
        lambda pstate, r: r.owner is not None and "Sum" in str(r.owner.op), FunctionPrinter("total")
    )
    assert printer(toys.Sum()(x)) == "total(x)"
    printer.assign(toys.Sum(), FunctionPrinter("Σ"))
    assert printer(toys.Sum()(x)) == "Σ(x)"
    with pytest.raises(TypeError, match="condition must be"):
        printer.assign(3, DefaultPrinter())
    with pytest.raises(TypeError, match="process"):
        printer.assign(toys.Sum(), object())
    with pytest.raises(ValueError, match="assoc"):
        OperatorPrinter("+", 0, "up")


def test_clone_assign_leaves_original_alone(toys, printer):
    x = toys.vector("x")
    other = printer.clone_assign(toys.exp, FunctionPrinter("e"))
    assert other(toys.exp(x)) == "e(x)"
    assert printer(toys.exp(x)) == "exp(x)"


def test_empty_printer_explains(toys):
    with pytest.raises(TypeError, match="no printer"):
        PPrinter()(toys.vector("x"))


def test_unhashable_op_condition(toys):
    class Unhashable(Op):
        __hash__ = None  # type: ignore[assignment]

        def make_node(self, x):
            from opgraph.graph.basic import Apply

            return Apply(self, [x], [x.type()])

    op = Unhashable()
    p = pprint.clone()
    p.assign(op, FunctionPrinter("u"))
    assert p(op(toys.vector("x"))) == "u(x)"


def test_target_and_process_graph(toys, printer):
    x, y = toys.vector("x"), toys.vector("y")
    h = toys.add(x, y)
    h.name = "h"
    out = toys.mul(h, h)
    assert printer(out) == "((x + y) * (x + y))"
    # Named non-target variables print by name where no later-assigned printer wins.
    assert pp(out, {"target": out}) == "Elemwise{mul,no_inplace}(h, h)"
    assert printer([x, y], [out]) == "h = (x + y)\nreturn (h * h)"
    s = toys.vector("s")
    listing = printer.process_graph([x, y], [out, h], {s: toys.exp(s)}, display_inputs=True)
    assert listing.splitlines() == [
        "inputs: x, y, s",
        "s <- exp(s)",
        "out[0] = (h * h)",
        "h = (x + y)",
    ]


def test_dag_strings_are_memoized_and_deep_chains_print(toys, printer):
    x = toys.vector("x")
    y = x
    for _ in range(3000):
        y = toys.exp(y)
    text = printer(y)
    assert text.startswith("exp(exp(") and text.endswith("(x" + ")" * 3000)
    z = x
    for _ in range(2500):
        z = toys.add(z, x)
    s = printer(z)
    assert s.count("+") == 2500 and s.startswith("(" * 2500 + "x + x)")
    w = x
    for _ in range(12):  # the text doubles per level; each node is still printed once
        w = toys.mul(w, w)
    assert printer(w).count("x") == 2**12
