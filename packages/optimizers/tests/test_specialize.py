"""The specialize rewrites: one test each, and the seed's ``a + a**10`` without ``pow``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest

import opgraph
import opgraph.scalar.basic as ps
import opgraph.scalar.extra as px
import opgraph.tensor as T
from opgraph.compile.mode import Mode
from opgraph.tensor.elemwise import CAReduce, Prod, Sum
from opgraph.tensor.reduction import Argmax, MaxAndArgmax

F64 = ("float64", ((False, False),))
F32_ROW = ("float32", ((True, False),))
I32 = ("int32", ((False, False),))
U8 = ("uint8", ((False, True),))
LAYOUTS = (F64, F32_ROW)


class Case(NamedTuple):
    """One rewrite's test: ``build(x) -> output``, ``applied(uses) -> bool``."""

    name: str
    build: Callable[[Any], Any]
    applied: Callable[[Any], bool]
    also_exclude: tuple[str, ...] = ()
    layouts: tuple[tuple[str, Any], ...] = LAYOUTS
    without: tuple[str, ...] = ()  # rewrites left out of the mode (they would do the job)


def _sum_of_input(uses: Any) -> bool:
    return all(n.inputs[0].owner is None for n in uses.nodes if isinstance(n.op, Sum))


def _no_pow(uses: Any) -> bool:
    return not uses(ps.Pow)


CASES = [
    Case(
        "local_pow_specialize",
        lambda x: x**2,
        lambda uses: uses(ps.Sqr) and _no_pow(uses),
        layouts=(F64, F32_ROW, I32, U8),
    ),
    Case("local_pow_specialize", lambda x: x**0.5, lambda uses: uses(ps.Sqrt) and _no_pow(uses)),
    Case("local_pow_specialize", lambda x: x**-1, lambda uses: uses(px.Inv) and _no_pow(uses)),
    Case("local_pow_specialize", lambda x: x**-0.5, lambda uses: uses(ps.Sqrt) and _no_pow(uses)),
    Case("local_pow_specialize", lambda x: x**-2, lambda uses: uses(ps.Sqr) and _no_pow(uses)),
    Case(
        "local_pow_specialize_device",
        lambda x: x**10,
        lambda uses: uses.scalar_count(ps.Sqr) == 3 and _no_pow(uses),
        layouts=(F64, F32_ROW, I32),
    ),
    Case(
        "local_pow_specialize_device",
        lambda x: x**-3,
        lambda uses: uses(ps.Sqr, ps.Mul) and _no_pow(uses),
    ),
    Case(
        "local_mul_specialize",
        lambda x: -x,
        lambda uses: uses(ps.Neg) and not uses(ps.Mul),
        layouts=(F64, F32_ROW, I32),
    ),
    Case(
        "local_mul_specialize",
        lambda x: x * 1 * x,
        lambda uses: uses(ps.Sqr) and not uses(ps.Mul),
        without=("local_mul_canonizer",),
    ),
    Case(
        "local_add_specialize",
        lambda x: x + 0,
        lambda uses: not uses(ps.Add),
        layouts=(F64, F32_ROW, I32),
        without=("local_add_canonizer",),
    ),
    Case("local_mul_to_sqr", lambda x: x * x, lambda uses: uses(ps.Sqr) and not uses(ps.Mul)),
    Case("local_log_exp", lambda x: T.log(T.exp(x)), lambda uses: not uses(ps.Log, ps.Exp)),
    Case("local_exp_log", lambda x: T.exp(T.log(x)), lambda uses: not uses(ps.Log, ps.Exp)),
    Case(
        "local_sum_sum",
        lambda x: T.sum(T.sum(x, axis=0)),
        lambda uses: uses.count(Sum) == 1,
        layouts=(F64, F32_ROW, I32),
    ),
    Case(
        "local_sum_prod_all_to_none",
        lambda x: T.sum(x, axis=[0, 1]),
        lambda uses: [n.op.axis for n in uses.nodes if isinstance(n.op, Sum)] == [None],
        layouts=(F64, I32),
    ),
    Case(
        "local_sum_prod_all_to_none",
        lambda x: T.prod(x, axis=[1, 0]),
        lambda uses: [n.op.axis for n in uses.nodes if isinstance(n.op, Prod)] == [None],
    ),
    Case("local_sum_mul_by_scalar", lambda x: T.sum(x * 3, axis=1), _sum_of_input),
    Case(
        "local_sum_neg",
        lambda x: T.sum(-x, axis=1),
        _sum_of_input,
        also_exclude=("local_sum_mul_by_scalar",),
        layouts=(F64, I32),
    ),
    Case(
        "local_div_to_inv",
        lambda x: 1 / (x + 2),
        lambda uses: uses(px.Inv) and not uses(ps.TrueDiv),
    ),
    Case(
        "local_max_to_min",
        lambda x: T.min(x, axis=1),
        lambda uses: [str(n.op) for n in uses.nodes] == ["Reduce{minimum}{1}"],
        layouts=(F64, I32, U8),
    ),
    Case(
        "local_max_and_argmax",
        lambda x: T.max(x, axis=1),
        lambda uses: uses(CAReduce) and not uses(MaxAndArgmax),
        layouts=(F64, I32),
    ),
    Case(
        "local_max_and_argmax",
        lambda x: T.argmax(x, axis=1),
        lambda uses: uses(Argmax) and not uses(MaxAndArgmax),
        layouts=(F64,),
    ),
]


@pytest.mark.parametrize(
    "case,layout",
    [(c, lay) for c in CASES for lay in c.layouts],
    ids=[f"{c.name}-{i}-{lay[0]}" for i, c in enumerate(CASES) for lay in c.layouts],
)
def test_specialize_rewrite(rewrites_check: Any, case: Case, layout: Any) -> None:
    dtype, patterns = layout
    (x,), values = rewrites_check.inputs(dtype, patterns, low=1, high=3)
    mode = rewrites_check.rewrite_mode
    if case.without:
        mode = mode.excluding(*case.without)
    rewrites_check.rewrite(
        case.name, [x], case.build(x), values, case.applied, case.also_exclude, mode=mode
    )


def test_every_specialize_rewrite_has_a_case() -> None:
    import opgraph_optimizers.specialize as specialize

    assert set(specialize.__all__) <= {c.name for c in CASES}


def test_seed_a_plus_a_pow_10_has_no_pow(uses_of: Any) -> None:
    a = T.vector("a")
    f = opgraph.function([a], a + a**10)
    assert not uses_of(f)(ps.Pow)
    np.testing.assert_allclose(f([0, 1, 2]), [0.0, 2.0, 1026.0])


def test_pow_expansion_is_repeated_squaring(rewrites_check: Any) -> None:
    x = T.dvector("x")
    f = rewrites_check.compile([x], x**13)
    uses = rewrites_check.uses(f)
    assert uses.scalar_count(ps.Sqr) == 3 and uses.scalar_count(ps.Mul) == 2 and not uses(ps.Pow)
    np.testing.assert_allclose(f(np.array([1.5, -2.0])), np.array([1.5, -2.0]) ** 13)


def test_large_and_fractional_powers_stay_pow(rewrites_check: Any) -> None:
    x = T.dvector("x")
    for p in (1000, 2.5):
        f = rewrites_check.compile([x], x**p)
        assert rewrites_check.uses(f)(ps.Pow)


def test_negative_integer_power_of_integers_is_left_alone(rewrites_check: Any) -> None:
    x = T.ivector("x")
    y = T.ivector("y")
    f = rewrites_check.compile([x, y], x**y)
    assert rewrites_check.uses(f)(ps.Pow)


def test_exp_log_keeps_nan_for_negative_inputs(rewrites_check: Any) -> None:
    x = T.dvector("x")
    f = rewrites_check.compile([x], T.exp(T.log(x)), Mode(linker="py", optimizer="fast_run"))
    with np.errstate(invalid="ignore"):
        out = f(np.array([-1.0, 2.0]))
    assert np.isnan(out[0]) and out[1] == 2.0
