"""Every Elemwise scalar op through the ``c`` linker, against NumPy, over the dtypes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.testing import assert_allclose

FLOATS = ["float32", "float64"]
INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
ALL = [*FLOATS, *INTS, "bool"]

# (name, op, domain of its input)
UNARY_FLOAT: list[tuple[str, Callable[[Any], Any], str]] = [
    ("exp", T.exp, "any"),
    ("exp2", T.exp2, "any"),
    ("expm1", T.expm1, "any"),
    ("log", T.log, "pos"),
    ("log2", T.log2, "pos"),
    ("log10", T.log10, "pos"),
    ("log1p", T.log1p, "pos"),
    ("sqrt", T.sqrt, "pos"),
    ("sqr", T.sqr, "any"),
    ("sin", T.sin, "any"),
    ("cos", T.cos, "any"),
    ("tan", T.tan, "unit"),
    ("arcsin", T.arcsin, "unit"),
    ("arccos", T.arccos, "unit"),
    ("arctan", T.arctan, "any"),
    ("sinh", T.sinh, "any"),
    ("cosh", T.cosh, "any"),
    ("tanh", T.tanh, "any"),
    ("arcsinh", T.arcsinh, "any"),
    ("arccosh", T.arccosh, "ge1"),
    ("arctanh", T.arctanh, "unit"),
    ("floor", T.floor, "any"),
    ("ceil", T.ceil, "any"),
    ("trunc", T.trunc, "any"),
    ("round_half_to_even", T.round_half_to_even, "halves"),
    ("round_half_away_from_zero", T.round_half_away_from_zero, "halves"),
    ("erf", T.erf, "any"),
    ("erfc", T.erfc, "any"),
    ("sigmoid", T.sigmoid, "wide"),
    ("softplus", T.softplus, "wide"),
    ("abs", T.abs, "any"),
    ("sgn", T.sgn, "any"),
    ("neg", T.neg, "any"),
    ("inv", T.inv, "pos"),
    ("deg2rad", T.deg2rad, "any"),
    ("rad2deg", T.rad2deg, "any"),
    ("isnan", T.isnan, "any"),
    ("isinf", T.isinf, "any"),
]
UNARY_INT = ["neg", "abs", "sgn", "sqr", "floor", "ceil", "trunc", "round_half_to_even"]
DOMAINS = {
    "any": (-3.0, 3.0),
    "pos": (0.1, 5.0),
    "unit": (-0.9, 0.9),
    "ge1": (1.1, 5.0),
    "wide": (-40.0, 40.0),
}


def sample(rng: np.random.Generator, dtype: str, shape: tuple[int, ...], domain: str = "any"):
    """Random test values of ``dtype`` in ``domain`` (integers include 0 and negatives)."""
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("uint"):
        return rng.integers(0, 20, shape).astype(dtype)
    if dtype.startswith("int"):
        return rng.integers(-20, 20, shape).astype(dtype)
    if domain == "halves":
        return (rng.integers(-10, 10, shape) / 2.0).astype(dtype)
    lo, hi = DOMAINS[domain]
    return rng.uniform(lo, hi, shape).astype(dtype)


def compare(inputs: list[Any], outputs: list[Any], values: list[Any], names: list[str]) -> None:
    """Compile with ``c`` and ``py`` (NumPy, through perform) and compare every output."""
    c = function(inputs, outputs, mode=Mode(linker="c", optimizer="None"))
    py = function(inputs, outputs, mode=Mode(linker="py", optimizer="None"))
    kinds = {type(t).__name__ for t in c.fn.thunks}
    assert kinds == {"ElemwiseThunk"}, f"some nodes did not get a C kernel: {kinds}"
    got = c(*[v.copy() for v in values])
    expected = py(*[v.copy() for v in values])
    for name, g, e in zip(names, got, expected, strict=True):
        assert g.dtype == e.dtype, f"{name}: dtype {g.dtype} != {e.dtype}"
        assert_allclose(g, e, err_msg=name)


@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_float_ops(dtype: str, rng: np.random.Generator) -> None:
    xs = {d: T.TensorType(dtype, (False,))(d) for d in [*DOMAINS, "halves"]}
    outputs = [op(xs[domain]) for _, op, domain in UNARY_FLOAT]
    values = [sample(rng, dtype, (37,), d) for d in xs]
    compare(list(xs.values()), outputs, values, [n for n, _, _ in UNARY_FLOAT])


@pytest.mark.parametrize("dtype", [*INTS, "bool"])
def test_unary_integer_ops(dtype: str, rng: np.random.Generator) -> None:
    x = T.TensorType(dtype, (False,))("x")
    names = [n for n in UNARY_INT if not (dtype == "bool" and n in ("neg", "sgn"))]
    ops = {n: op for n, op, _ in UNARY_FLOAT}
    outputs = [ops[n](x) for n in names] + [T.exp(x), T.invert(x)]
    compare([x], outputs, [sample(rng, dtype, (29,))], [*names, "exp", "invert"])


def _binary_ops(dtype: str) -> dict[str, Callable[[Any, Any], Any]]:
    ops: dict[str, Callable[[Any, Any], Any]] = {
        "add": T.add,
        "mul": T.mul,
        "maximum": T.maximum,
        "minimum": T.minimum,
        "true_div": T.true_div,
        "eq": T.eq,
        "neq": T.neq,
        "gt": T.gt,
        "lt": T.lt,
        "ge": T.ge,
        "le": T.le,
    }
    if dtype != "bool":
        ops.update(sub=T.sub, int_div=T.int_div, mod=T.mod)
    if dtype in FLOATS:
        ops.update(pow=T.pow, arctan2=T.arctan2)
    else:
        ops.update(and_=T.and_, or_=T.or_, xor=T.xor)
    return ops


@pytest.mark.parametrize("dtype", ALL)
def test_binary_ops(dtype: str, rng: np.random.Generator) -> None:
    x = T.TensorType(dtype, (False, False))("x")
    y = T.TensorType(dtype, (False, False))("y")
    ops = _binary_ops(dtype)
    outputs = [op(x, y) for op in ops.values()]
    xv = sample(rng, dtype, (5, 7))
    yv = sample(rng, dtype, (5, 7))
    if dtype in FLOATS:
        xv = np.abs(xv) + 0.5  # pow of a negative base is NaN in both, but keep values real
    compare([x, y], outputs, [xv, yv], list(ops))


@pytest.mark.parametrize(
    ("dx", "dy"),
    [
        ("int8", "float32"),
        ("int32", "float32"),
        ("uint8", "int8"),
        ("int64", "uint64"),
        ("bool", "int8"),
        ("float32", "float64"),
        ("uint16", "float32"),
    ],
)
def test_mixed_dtypes(dx: str, dy: str, rng: np.random.Generator) -> None:
    x = T.TensorType(dx, (False,))("x")
    y = T.TensorType(dy, (False,))("y")
    ops = {"add": T.add, "mul": T.mul, "true_div": T.true_div, "gt": T.gt, "maximum": T.maximum}
    if "bool" not in (dx, dy):
        ops["sub"] = T.sub
    compare(
        [x, y],
        [op(x, y) for op in ops.values()],
        [sample(rng, dx, (11,)), sample(rng, dy, (11,))],
        list(ops),
    )


def test_integer_division_edge_cases() -> None:
    """x // 0 and x % 0 give 0 (C would trap), MIN // -1 wraps, floor semantics for negatives."""
    for dtype in ("int8", "int32", "int64"):
        info = np.iinfo(dtype)
        x = T.TensorType(dtype, (False,))("x")
        y = T.TensorType(dtype, (False,))("y")
        xv = np.array([7, -7, 7, -7, 5, info.min, info.min, 0], dtype=dtype)
        yv = np.array([2, 2, -2, -2, 0, -1, 1, 0], dtype=dtype)
        compare([x, y], [T.int_div(x, y), T.mod(x, y)], [xv, yv], ["int_div", "mod"])


def test_float_floor_division_and_mod() -> None:
    x, y = T.dvector("x"), T.dvector("y")
    xv = np.array([7.5, -7.5, 7.5, -7.5, 1.0, -0.0, np.inf, np.nan, 3.0])
    yv = np.array([2.0, 2.0, -2.0, -2.0, 0.0, 3.0, 2.0, 1.0, np.inf])
    compare([x, y], [T.int_div(x, y), T.mod(x, y)], [xv, yv], ["int_div", "mod"])


def test_ternary_ops(rng: np.random.Generator) -> None:
    c = T.bvector("c")
    x, y, z = T.fvector("x"), T.fvector("y"), T.fvector("z")
    outputs = [T.switch(c, x, y), T.clip(x, y, z), T.cast(x, "int16"), T.cast(x, "bool")]
    cv = (rng.random(13) < 0.5).astype("int8")
    xv = sample(rng, "float32", (13,))
    compare(
        [c, x, y, z], outputs, [cv, xv, xv - 1, xv + 1], ["switch", "clip", "cast", "cast_bool"]
    )


@pytest.mark.parametrize("n", [200_000, 1_000_003, 4_096 * 37 + 5])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_threaded_loops_give_the_one_thread_result_bit_for_bit(
    n: int, dtype: str, rng: np.random.Generator
) -> None:
    # The parallel loop hands fixed chunks to whichever thread is free: the result must not
    # depend on that (nor on the chunk boundaries, so n is not a multiple of them).
    from opgraph.configdefaults import config

    x = T.vector("x", dtype=dtype)
    expr = T.exp(-(x**2)) * T.sin(x) + 0.5 * x
    value = rng.uniform(-3, 3, n).astype(dtype)
    results = {}
    for threads in (True, False):
        with config.change_flags(openmp=threads, c__openmp_threshold=1):
            f = function([x], expr, mode=Mode(linker="c", optimizer="fast_run"))
            results[threads] = f(value)
    assert results[True].dtype == np.dtype(dtype)
    assert np.array_equal(results[True], results[False])
