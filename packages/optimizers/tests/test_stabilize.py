"""The stabilize rewrites: one test each, and the stability they buy at extreme inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest
import scipy.special

import opgraph
import opgraph.scalar.basic as ps
import opgraph.tensor as T
from opgraph.compile.mode import Mode
from opgraph.tensor.elemwise import CAReduce
from opgraph.tensor.nnet import (
    CrossentropySoftmax1HotWithBiasDx,
    CrossentropySoftmaxArgmax1HotWithBias,
    LogSoftmax,
    SoftmaxGrad,
    categorical_crossentropy,
    softmax,
)

F64 = ("float64", ((False, False),))
F32_ROW = ("float32", ((True, False),))
LAYOUTS = (F64, F32_ROW)


class Case(NamedTuple):
    """One rewrite's test: ``build(x) -> output`` on ``x`` in ``[low, high)``."""

    name: str
    build: Callable[[Any], Any]
    applied: Callable[[Any], bool]
    also_exclude: tuple[str, ...] = ()
    low: float = -2.0
    high: float = 2.0


def _uses_max(uses: Any) -> bool:
    return any(
        isinstance(n.op, CAReduce) and isinstance(n.op.scalar_op, ps.Maximum) for n in uses.nodes
    )


def _softmax_log_grad(x: Any) -> Any:
    return opgraph.grad(T.sum(T.log(softmax(x)) * (x + 1)), x)


CASES = [
    Case("local_log1p", lambda x: T.log(1 + x), lambda u: u(ps.Log1p) and not u(ps.Log), low=0.1),
    Case("local_log1p", lambda x: T.log(1 - x), lambda u: u(ps.Log1p) and not u(ps.Log), high=0.9),
    Case("local_expm1", lambda x: T.exp(x) - 1, lambda u: u(ps.Expm1) and not u(ps.Exp)),
    Case(
        "local_expm1",
        lambda x: T.exp(x) - 1 + x,
        lambda u: u(ps.Expm1) and not u(ps.Exp),
        also_exclude=("local_add_canonizer",),
    ),
    Case(
        "local_log1p_exp_to_softplus",
        lambda x: T.log1p(T.exp(x)),
        lambda u: u(ps.Softplus) and not u(ps.Exp),
    ),
    Case(
        "local_exp_over_1_plus_exp",
        lambda x: 1 / (1 + T.exp(-x)),
        lambda u: u(ps.Sigmoid) and not u(ps.Exp),
    ),
    Case(
        "local_exp_over_1_plus_exp",
        lambda x: T.exp(x) / (1 + T.exp(x)),
        lambda u: u(ps.Sigmoid) and not u(ps.Exp),
    ),
    Case(
        "local_exp_over_1_plus_exp",
        lambda x: 2 / (T.exp(x) + 1),
        lambda u: u(ps.Sigmoid) and not u(ps.Exp),
    ),
    Case(
        "local_exp_over_1_plus_exp",
        lambda x: x * T.exp(-x) / ((1 + T.exp(-x)) * (1 + T.exp(-x))),
        lambda u: u(ps.Sigmoid) and not u(ps.Exp),
    ),
    Case(
        "local_1msigmoid",
        lambda x: 1 - T.sigmoid(x),
        lambda u: u(ps.Sigmoid) and not u(ps.Sub),
    ),
    Case(
        "local_sigm_times_exp",
        lambda x: T.exp(x) * T.sigmoid(-x) * (x + 3),
        lambda u: u(ps.Sigmoid) and not u(ps.Exp),
    ),
    Case(
        "local_log_sigmoid",
        lambda x: T.log(T.sigmoid(x)),
        lambda u: u(ps.Softplus) and not u(ps.Log),
    ),
    Case(
        "local_log1msigmoid",
        lambda x: T.log(1 - T.sigmoid(x)),
        lambda u: u(ps.Softplus) and not u(ps.Log),
        also_exclude=("local_1msigmoid", "local_log_sigmoid"),
    ),
    Case(
        "local_log_sum_exp",
        lambda x: T.log(T.sum(T.exp(x), axis=1)),
        _uses_max,
    ),
    Case(
        "local_log_sum_exp",
        lambda x: T.log(T.sum(T.exp(x), axis=0, keepdims=True)),
        _uses_max,
    ),
    Case(
        "local_log_softmax",
        lambda x: T.log(softmax(x)),
        lambda u: u(LogSoftmax) and not u(ps.Log),
    ),
    Case(
        "local_log_softmax_grad",
        _softmax_log_grad,
        lambda u: not u(SoftmaxGrad),
        also_exclude=(),
    ),
]


@pytest.mark.parametrize(
    "case,layout",
    [(c, lay) for c in CASES for lay in LAYOUTS],
    ids=[f"{c.name}-{i}-{lay[0]}" for i, c in enumerate(CASES) for lay in LAYOUTS],
)
def test_stabilize_rewrite(rewrites_check: Any, case: Case, layout: Any) -> None:
    dtype, patterns = layout
    (x,), values = rewrites_check.inputs(dtype, patterns, low=case.low, high=case.high)
    rewrites_check.rewrite(case.name, [x], case.build(x), values, case.applied, case.also_exclude)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_crossentropy_of_softmax_becomes_the_fused_op(rewrites_check: Any, dtype: str) -> None:
    x = T.matrix("x", dtype=dtype)
    y = T.lvector("y")
    cost = categorical_crossentropy(softmax(x), y)
    values = [rewrites_check.rng.normal(size=(4, 3)).astype(dtype), np.array([0, 2, 1, 2])]
    rewrites_check.rewrite(
        "local_crossentropy_to_crossentropy_with_softmax",
        [x, y],
        cost,
        values,
        lambda u: u(CrossentropySoftmaxArgmax1HotWithBias),
    )


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_crossentropy_softmax_gradient_becomes_the_fused_dx(
    rewrites_check: Any, dtype: str
) -> None:
    x = T.matrix("x", dtype=dtype)
    y = T.lvector("y")
    g = opgraph.grad(T.mean(categorical_crossentropy(softmax(x), y)), x)
    values = [rewrites_check.rng.normal(size=(4, 3)).astype(dtype), np.array([0, 2, 1, 2])]
    rewrites_check.rewrite(
        "local_crossentropy_softmax_grad",
        [x, y],
        g,
        values,
        lambda u: u(CrossentropySoftmax1HotWithBiasDx) and not u(SoftmaxGrad),
    )


def test_every_stabilize_rewrite_has_a_case() -> None:
    import opgraph_optimizers.stabilize as stabilize

    covered = {c.name for c in CASES} | {
        "local_crossentropy_to_crossentropy_with_softmax",
        "local_crossentropy_softmax_grad",
    }
    assert {n for n in stabilize.__all__ if n.startswith("local_")} <= covered


def test_stability_rewrites_are_tagged_stability() -> None:
    from opgraph.rewriting import make_optdb
    from opgraph_optimizers.registry import load_rewrite_modules

    optdb = make_optdb()
    load_rewrite_modules().install(optdb)
    stage = optdb["stabilize"]
    import opgraph_optimizers.stabilize as stabilize

    for name in stabilize.__all__:
        if name.startswith("local_"):
            assert {"stability", "fast_run"} <= stage.entry(name).tags


# ------------------------------------------------------------------ stability at extremes

EXTREMES = np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0])


def test_log_sigmoid_is_finite_with_a_correct_gradient_at_minus_1000() -> None:
    x = T.dvector("x")
    out = T.log(T.sigmoid(x))
    f = opgraph.function([x], [out, opgraph.grad(T.sum(out), x)], mode="FAST_RUN")
    value, grad = f(EXTREMES)
    assert np.all(np.isfinite(value)) and np.all(np.isfinite(grad))
    np.testing.assert_allclose(value, -np.logaddexp(0, -EXTREMES))
    np.testing.assert_allclose(grad, scipy.special.expit(-EXTREMES))
    assert value[0] == -1000.0


def test_log_one_minus_sigmoid_is_finite_at_plus_1000() -> None:
    x = T.dvector("x")
    out = T.log(1 - T.sigmoid(x))
    f = opgraph.function([x], [out, opgraph.grad(T.sum(out), x)], mode="FAST_RUN")
    value, grad = f(EXTREMES)
    np.testing.assert_allclose(value, -np.logaddexp(0, EXTREMES))
    np.testing.assert_allclose(grad, -scipy.special.expit(EXTREMES))


def test_tutorial_cross_entropy_is_finite_where_the_sigmoid_saturates() -> None:
    # the logistic regression tutorial: p = sigmoid(z) read by log(p) and log(1 - p). At
    # |z| = 50, p is 1.0 or 2e-22: log(1 - p) must become -softplus(z) although log(p) reads
    # p too. (At |z| = 1000 the gradient is NaN: 1 / p, rewritten 1 + exp(-z), overflows.)
    z, y = T.dvectors("z", "y")
    p = 1 / (1 + T.exp(-z))
    xent = -y * T.log(p) - (1 - y) * T.log(1 - p)
    f = opgraph.function([z, y], [xent, opgraph.grad(T.sum(xent), z)], mode="FAST_RUN")
    zv = np.array([-50.0, -50.0, 0.0, 50.0, 50.0])
    yv = np.array([1.0, 0.0, 1.0, 0.0, 1.0])
    value, grad = f(zv, yv)
    want = np.where(yv == 1, np.logaddexp(0, -zv), np.logaddexp(0, zv))
    np.testing.assert_allclose(value, want)
    np.testing.assert_allclose(grad, scipy.special.expit(zv) - yv, atol=1e-15)


def test_log_sum_exp_is_finite_for_large_inputs() -> None:
    x = T.dmatrix("x")
    f = opgraph.function([x], T.log(T.sum(T.exp(x), axis=1)), mode="FAST_RUN")
    v = np.array([[1000.0, 999.0], [-1000.0, -1001.0]])
    np.testing.assert_allclose(f(v), scipy.special.logsumexp(v, axis=1))


def _logits() -> tuple[np.ndarray, np.ndarray]:
    return np.array([[1000.0, -1000.0, 0.0], [-1000.0, 1000.0, 3.0]]), np.array([1, 0])


def test_softmax_crossentropy_gradients_are_finite_at_1000() -> None:
    x = T.dmatrix("x")
    y = T.lvector("y")
    cost = T.mean(categorical_crossentropy(softmax(x), y))
    f = opgraph.function([x, y], [cost, opgraph.grad(cost, x)], mode="FAST_RUN")
    xv, yv = _logits()
    value, grad = f(xv, yv)
    assert np.isfinite(value) and np.all(np.isfinite(grad))
    np.testing.assert_allclose(value, 2000.0)
    sm = scipy.special.softmax(xv, axis=1)
    np.testing.assert_allclose(grad, (sm - np.eye(3)[yv]) / 2)


def test_softmax_crossentropy_with_one_hot_matrix_targets_is_finite_at_1000() -> None:
    x = T.dmatrix("x")
    t = T.dmatrix("t")
    cost = -T.mean(T.sum(t * T.log(softmax(x)), axis=1))
    f = opgraph.function([x, t], [cost, opgraph.grad(cost, x)], mode="FAST_RUN")
    xv, yv = _logits()
    value, grad = f(xv, np.eye(3)[yv])
    assert np.isfinite(value) and np.all(np.isfinite(grad))
    sm = scipy.special.softmax(xv, axis=1)
    np.testing.assert_allclose(grad, (sm - np.eye(3)[yv]) / 2)


def test_without_stabilize_the_same_graphs_overflow() -> None:
    x = T.dvector("x")
    mode = Mode(linker="py", optimizer="fast_run").excluding("stability")
    f = opgraph.function([x], T.log(T.sigmoid(x)), mode=mode)
    with np.errstate(divide="ignore"):
        assert np.isinf(f(EXTREMES)[0])


def test_stable_replacements_carry_the_comparison_for_checkers() -> None:
    from opgraph_optimizers.stabilize import local_log_sigmoid, values_eq_approx_stabilized

    x = T.dvector("x")
    node = T.log(T.sigmoid(x)).owner
    (new,) = local_log_sigmoid.transform(None, node)
    assert new.tag.values_eq_approx is values_eq_approx_stabilized
    old_value = np.array([-np.inf, -0.693147, -35.0])
    assert values_eq_approx_stabilized(old_value, np.array([-1000.0, -0.6931472, -34.9]))
    assert not values_eq_approx_stabilized(old_value, np.array([-1000.0, 0.6931472, -34.9]))
