"""Random-state Types, their shared variables, RandomFunction and the raw draw functions."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.mode import get_mode
from opgraph.gradient import NullTypeGradError, grad
from opgraph.tensor import random as raw
from opgraph.tensor.random_ops import RandomFunction, random_generator_type, random_state_type
from opgraph.tensor.sharedvar import (
    RandomGeneratorSharedVariable,
    RandomStateSharedVariable,
    random_shared_constructor,
)
from opgraph.testing.checks import ALL_MODES

LINKERS = ["py", "vm"]


def mode_with(name: str, linker: str) -> Any:
    return get_mode(name).clone(linker=linker)


def test_types_filter_compare_and_print() -> None:
    a, b = np.random.RandomState(1), np.random.RandomState(1)
    assert random_state_type.filter(a) is a
    assert random_state_type.values_eq(a, b)
    b.rand()
    assert not random_state_type.values_eq(a, b)
    g = np.random.default_rng(3)
    assert random_generator_type.filter(g) is g
    assert random_generator_type.values_eq(g, copy.deepcopy(g))
    assert not random_generator_type.values_eq(g, np.random.default_rng(4))
    with pytest.raises(TypeError, match=r"expects a numpy\.random\.RandomState, got a Generator"):
        random_state_type.filter(g)
    with pytest.raises(TypeError, match=r"HINT: build one with numpy\.random\.default_rng"):
        random_generator_type.filter(np.zeros(2))
    assert str(random_state_type) == "RandomStateType"
    assert str(random_generator_type()) == "<RandomGeneratorType>"
    assert random_state_type == raw.RandomStateType()


def test_shared_constructor_copies_unless_borrowed() -> None:
    rng = np.random.RandomState(0)
    r = random_shared_constructor(rng, name="r")
    assert isinstance(r, RandomStateSharedVariable) and r.name == "r"
    assert r.get_value(borrow=True) is not rng
    g = np.random.default_rng(0)
    rg = random_shared_constructor(g, borrow=True)
    assert isinstance(rg, RandomGeneratorSharedVariable)
    assert rg.get_value(borrow=True) is g
    assert random_shared_constructor(np.zeros(2)) is None
    with pytest.raises(TypeError, match="RandomState"):
        r.set_value(np.random.default_rng(0))


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("name", ALL_MODES)
def test_generator_draws_with_an_explicit_update(name: str, linker: str) -> None:
    r = random_shared_constructor(np.random.default_rng(42))
    new_r, u = raw.uniform(r, (3,), low=2.0, high=4.0)
    new_r2, k = raw.integers(new_r, (2,), 5, 10)
    f = opgraph.function([], [u, k], updates=[(r, new_r2)], mode=mode_with(name, linker))
    ref = np.random.default_rng(42)
    for _ in range(2):
        got_u, got_k = f()
        np.testing.assert_array_equal(got_u, ref.uniform(2.0, 4.0, (3,)))
        np.testing.assert_array_equal(got_k, ref.integers(5, 10, (2,)))
    assert random_generator_type.values_eq(r.get_value(borrow=True), ref)


@pytest.mark.parametrize("name", ALL_MODES)
def test_the_input_state_is_never_mutated(name: str) -> None:
    r = random_shared_constructor(np.random.RandomState(5))
    before = r.get_value()
    _, u = raw.normal(r, (4,))
    f = opgraph.function([], u, mode=name)  # no update: the state must not move
    first = f()
    np.testing.assert_array_equal(f(), first)
    assert random_state_type.values_eq(r.get_value(borrow=True), before)


def test_inplace_variant_declares_destroy_map() -> None:
    op = RandomFunction("uniform", T.TensorType("float64", (False,)), inplace=True)
    assert op.destroy_map == {0: [0]}
    assert op != RandomFunction("uniform", T.TensorType("float64", (False,)))
    state = np.random.RandomState(1)
    node = op.make_node(random_state_type(), (2,), 0.0, 1.0)
    out: list[list[Any]] = [[None], [None]]
    op.perform(node, [state, np.array([2]), np.array(0.0), np.array(1.0)], out)
    assert out[0][0] is state
    np.testing.assert_array_equal(out[1][0], np.random.RandomState(1).uniform(0, 1, 2))


def test_never_constant_folded_and_no_gradient() -> None:
    r = random_shared_constructor(np.random.RandomState(0))
    low = T.dscalar("low")
    _, u = raw.uniform(r, (2,), low=low)
    assert u.owner.op.do_constant_folding(None, u.owner) is False
    with pytest.raises(NullTypeGradError, match="no gradient through a random draw"):
        grad(u.sum(), low)


def test_make_node_errors() -> None:
    with pytest.raises(TypeError, match="symbolic random state"):
        raw.uniform(np.random.RandomState(0), (2,))
    with pytest.raises(TypeError, match="symbolic random state"):
        raw.uniform(T.dvector("v"), (2,))
    with pytest.raises(ValueError, match="unknown random draw 'gumbel'"):
        RandomFunction("gumbel", T.TensorType("float64", (False,)))
    with pytest.raises(TypeError, match="outtype must be a TensorType"):
        RandomFunction("uniform", random_state_type)
    r = random_state_type("r")
    with pytest.raises(TypeError, match="scalar or a vector"):
        raw.choice(r, (2,), a=T.dmatrix("m"))
    with pytest.raises(TypeError, match="pvals must be a vector"):
        raw.multinomial(r, (2,), pvals=0.5)


def test_infer_shape() -> None:
    r = random_state_type("r")
    n = T.lscalar("n")
    lows = T.dvector("lows")
    pv = T.dmatrix("pv")
    outs = [
        raw.uniform(r, (n, 3))[1],
        raw.uniform(r, (2, 3))[1],
        raw.normal(r, avg=lows, std=T.dmatrix("std"))[1],
        raw.permutation(r, n=n)[1],
        raw.permutation(r, (2,), n=3)[1],
        raw.multinomial(r, n=5, pvals=pv)[1],
        raw.multinomial(r, (3,), n=5, pvals=[0.5, 0.5])[1],
        raw.choice(r, a=4)[1],
    ]
    inputs = [r, n, lows, outs[2].owner.inputs[3], pv]
    values = [
        np.random.RandomState(0),
        4,
        np.zeros(3),
        np.ones((2, 3)),
        np.full((2, 4), 0.25),
    ]
    f = opgraph.function(inputs, outs, on_unused_input="ignore", mode="FAST_COMPILE")
    real = f(*[copy.deepcopy(v) for v in values])
    shapes = dict(zip(inputs, [np.shape(v) for v in values], strict=True))
    for out, value in zip(outs, real, strict=True):
        node = out.owner
        in_shapes = [shapes.get(i, np.shape(getattr(i, "data", ()))) for i in node.inputs]
        state_shape, sample_shape = node.op.infer_shape(node, in_shapes)
        assert state_shape is None
        dims = (
            opgraph.function(
                inputs, list(map(T.as_tensor_variable, sample_shape)), on_unused_input="ignore"
            )(*values)
            if sample_shape
            else []
        )
        assert tuple(int(d) for d in dims) == value.shape, str(node)


def test_multinomial_corrects_a_sum_just_over_one() -> None:
    r = random_shared_constructor(np.random.RandomState(0))
    p = np.array([0.5, 0.5 + 5e-6])
    _, counts = raw.multinomial(r, (2,), n=10, pvals=p)
    out = opgraph.function([], counts)()
    assert out.shape == (2, 2) and np.all(out.sum(axis=1) == 10)
