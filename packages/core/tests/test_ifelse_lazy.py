"""ifelse: lazy evaluation, values in every mode and linker, errors, grad, shapes, printing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.mode import Mode, get_mode
from opgraph.gradient import Rop, grad, verify_grad
from opgraph.graph.basic import Apply
from opgraph.graph.op import Op, OutputStorage
from opgraph.ifelse import IfElse, ifelse
from opgraph.link.basic import VMLinker
from opgraph.link.vm import Stack
from opgraph.printing import debugprint
from opgraph.tensor.math import exp, lt
from opgraph.testing.checks import ALL_MODES, check_infer_shape

LINKERS = ["py", "vm"]


def mode_with(name: str, linker: str) -> Any:
    return get_mode(name).clone(linker=linker)


class Tripwire(Op):
    """Identity that counts its runs and, when armed, raises (marks code that must not run)."""

    __props__ = ("armed",)
    runs = 0

    def __init__(self, armed: bool = True) -> None:
        self.armed = armed

    def make_node(self, x: Any) -> Apply:
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], out: OutputStorage) -> None:
        type(self).runs += 1
        if self.armed:
            raise ValueError("the untaken branch ran")
        out[0][0] = np.array(inputs[0], copy=True)

    def grad(self, inputs: Sequence[Any], output_grads: Sequence[Any]) -> list[Any]:
        return list(output_grads)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return list(input_shapes)


@pytest.fixture(autouse=True)
def _reset_counts() -> None:
    Tripwire.runs = 0


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("name", ALL_MODES)
def test_values_and_only_the_taken_branch_runs(name: str, linker: str) -> None:
    c = T.dscalar("c")
    x = T.dvector("x")
    f = opgraph.function([c, x], ifelse(c, x * 2, Tripwire()(x + 1)), mode=mode_with(name, linker))
    np.testing.assert_array_equal(f(1.0, [1.0, 2.0]), [2.0, 4.0])
    np.testing.assert_array_equal(f(-3.0, [1.0, 2.0]), [2.0, 4.0])
    assert Tripwire.runs == 0
    with pytest.raises(ValueError, match="the untaken branch ran"):
        f(0.0, [1.0, 2.0])
    g = opgraph.function([c, x], ifelse(c, Tripwire()(x), x - 1), mode=mode_with(name, linker))
    np.testing.assert_array_equal(g(0.0, [1.0, 2.0]), [0.0, 1.0])
    assert Tripwire.runs == 1  # only the failing call of f above ran a tripwire


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("name", ALL_MODES)
def test_several_outputs_and_condition_from_a_comparison(name: str, linker: str) -> None:
    a, b = T.dscalars("a", "b")
    x = T.dvector("x")
    m = T.dmatrix("m")
    outs = ifelse(lt(a, b), [x * 2, m.sum()], [Tripwire(armed=False)(x), m.sum() * 0])
    assert isinstance(outs, list) and len(outs) == 2
    f = opgraph.function([a, b, x, m], outs, mode=mode_with(name, linker))
    xv, mv = np.array([1.0, 3.0]), np.ones((2, 2))
    r1, r2 = f(0.0, 1.0, xv, mv)
    np.testing.assert_array_equal(r1, [2.0, 6.0])
    assert r2 == 4.0
    assert Tripwire.runs == 0
    r1, r2 = f(2.0, 1.0, xv, mv)
    np.testing.assert_array_equal(r1, xv)
    assert r2 == 0.0
    tup = ifelse(a, (x, x), (x + 1, x - 1))
    assert isinstance(tup, tuple)


def test_branches_of_different_shapes_and_outputs_are_copies() -> None:
    c = T.iscalar("c")
    x, y = T.dvectors("x", "y")
    f = opgraph.function([c, x, y], ifelse(c, x, y))
    xv, yv = np.arange(3.0), np.arange(5.0)
    out = f(1, xv, yv)
    np.testing.assert_array_equal(out, xv)
    assert out.shape == (3,) and f(0, xv, yv).shape == (5,)
    out[0] = 42.0
    np.testing.assert_array_equal(f(1, xv, yv), np.arange(3.0))


def test_the_lazy_graph_runs_on_the_stack_vm() -> None:
    c = T.dscalar("c")
    x = T.dvector("x")
    f = opgraph.function([c, x], ifelse(c, x * 2, x * 3), mode=Mode("vm", "fast_run"))
    assert isinstance(f.fn, Stack)


def test_non_lazy_evaluation_computes_both_branches_and_picks_one() -> None:
    c = T.dscalar("c")
    x = T.dvector("x")
    node = ifelse(c, x * 2, x * 3).owner
    out: list[list[Any]] = [[None]]
    node.op.perform(node, [0.0, np.array([2.0]), np.array([3.0])], out)
    np.testing.assert_array_equal(out[0][0], [3.0])
    storage = {v: [None] for v in node.inputs + node.outputs}
    thunk = node.op.make_thunk(node, storage, None)
    assert not thunk.lazy
    storage[node.inputs[0]][0] = np.array(1.0)
    storage[node.inputs[1]][0] = np.array([5.0])
    storage[node.inputs[2]][0] = np.array([6.0])
    thunk()
    np.testing.assert_array_equal(storage[node.outputs[0]][0], [5.0])
    # A VM without lazy evaluation computes both branches, then picks one.
    eager = ifelse(c, x * 2, Tripwire(armed=False)(x))
    f = opgraph.function([c, x], eager, mode=Mode(VMLinker(lazy=False), None))
    np.testing.assert_array_equal(f(1.0, [1.0, 2.0]), [2.0, 4.0])
    np.testing.assert_array_equal(f(0.0, [1.0, 2.0]), [1.0, 2.0])
    assert Tripwire.runs == 2


def test_errors_name_the_types() -> None:
    c = T.dscalar("c")
    x = T.dvector("x")
    with pytest.raises(TypeError, match=r"TensorType\(float64, vector\).*TensorType\(float32"):
        ifelse(c, x, T.fvector("y"))
    with pytest.raises(TypeError, match="must be a scalar"):
        ifelse(x, x, x)
    with pytest.raises(ValueError, match="same number"):
        ifelse(c, [x, x], [x])
    with pytest.raises(TypeError, match="takes a condition and 2"):
        IfElse(1)(c, x)
    with pytest.raises(ValueError, match="at least one"):
        IfElse(0)


def test_printed_names_and_identity() -> None:
    c = T.dscalar("c")
    x = T.dvector("x")
    out = ifelse(c, x, x * 2)
    assert str(out.owner.op) == "if{}"
    assert str(out) == "if{}.0"
    assert str(IfElse(1, as_view=True)) == "if{inplace}"
    assert str(IfElse(2, name="cond")) == "if{cond}"
    assert IfElse(1, name="a") == IfElse(1) and hash(IfElse(1, name="a")) == hash(IfElse(1))
    assert IfElse(1) != IfElse(2) and IfElse(1) != IfElse(1, as_view=True)
    text = debugprint(out, file="str")
    assert text.splitlines()[0].startswith("if{} [id A]")


@pytest.mark.parametrize("name", ALL_MODES)
def test_inplace_variant_views_the_then_branch(name: str) -> None:
    c = T.dscalar("c")
    x = T.dvector("x")
    op = IfElse(1, as_view=True)
    assert op.view_map == {0: [1]}
    f = opgraph.function([c, x], op(c, x * 2, x * 3), mode=name)
    np.testing.assert_array_equal(f(1.0, [1.0]), [2.0])
    np.testing.assert_array_equal(f(0.0, [1.0]), [3.0])


@pytest.mark.parametrize("name", ALL_MODES)
def test_grad_flows_into_the_taken_branch(name: str) -> None:
    c = T.dscalar("c")
    x, y = T.dvectors("x", "y")
    cost = (ifelse(c, x**2, y * 3) ** 2).sum()
    gx, gy, gc = grad(cost, [x, y, c])
    f = opgraph.function([c, x, y], [gx, gy, gc], mode=name)
    xv, yv = np.array([1.0, 2.0]), np.array([3.0])
    rx, ry, rc = f(1.0, xv, yv)
    np.testing.assert_allclose(rx, 4 * xv**3)
    np.testing.assert_allclose(ry, [0.0])
    assert rc == 0.0
    rx, ry, _ = f(0.0, xv, yv)
    np.testing.assert_allclose(rx, [0.0, 0.0])
    np.testing.assert_allclose(ry, 18 * yv)


def test_verify_grad_and_rop() -> None:
    rng = np.random.default_rng(0)
    for cond in (0.0, 1.0):
        verify_grad(
            lambda x, y, cond=cond: ifelse(T.constant(cond), exp(x) * y, x - y),
            [rng.random(3), rng.random(3)],
            rng=rng,
        )
    c = T.dscalar("c")
    x = T.dvector("x")
    v = T.dvector("v")
    jv = Rop(ifelse(c, x**2, x * 3), x, v)
    f = opgraph.function([c, x, v], jv)
    np.testing.assert_allclose(f(1.0, [1.0, 2.0], [1.0, 1.0]), [2.0, 4.0])
    np.testing.assert_allclose(f(0.0, [1.0, 2.0], [1.0, 1.0]), [3.0, 3.0])


def test_integer_branches_get_no_gradient() -> None:
    c = T.dscalar("c")
    i = T.ivector("i")
    x = T.dvector("x")
    cost = ifelse(c, i, i + 1).sum() * x.sum()
    gx = grad(cost, x)
    f = opgraph.function([c, i, x], gx)
    np.testing.assert_allclose(f(1.0, [1, 2], [0.5]), [3.0])


def test_infer_shape() -> None:
    c = T.dscalar("c")
    x, y = T.dmatrices("x", "y")
    out = ifelse(c, x, y * 2)
    check_infer_shape([c, x, y], out, [1.0, np.ones((2, 3)), np.ones((2, 3))], IfElse)
    node = out.owner
    # Equal dimensions are passed through; different ones become an ifelse on the condition.
    assert node.op.infer_shape(node, [(), (2, 3), (2, 3)]) == [(2, 3)]
    n = T.lscalar("n")
    (shape,) = node.op.infer_shape(node, [(), (2, n), (4, n)])
    assert shape[1] is n
    f = opgraph.function([c, n], list(shape))
    assert [int(v) for v in f(1.0, 7)] == [2, 7]
    assert [int(v) for v in f(0.0, 7)] == [4, 7]
    assert str(shape[0].owner.op) == "if{shape}"
