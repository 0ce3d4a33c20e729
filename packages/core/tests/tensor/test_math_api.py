"""The ``opgraph.tensor.math`` namespace: completeness, Theano's dtype rules, helpers, printing."""

from __future__ import annotations

import inspect
from importlib import import_module

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
import opgraph.tensor.math as tm
from opgraph.compile.debugmode import DebugMode
from opgraph.compile.function import function
from opgraph.gradient import grad, verify_grad
from opgraph.printing import pprint
from opgraph.testing.checks import check_modes

# ----------------------------------------------------------------------------------------
# namespace


def test_all_lists_every_public_function_and_op() -> None:
    missing = []
    for name, value in vars(tm).items():
        if name.startswith("_") or inspect.ismodule(value) or name.endswith("_inplace"):
            continue
        module = getattr(value, "__module__", "") or ""
        is_ours = module.startswith("opgraph.tensor") or hasattr(value, "op")
        if (callable(value) and is_ours and module != "typing") and name not in tm.__all__:
            if module in ("opgraph.tensor.basic", "opgraph.tensor.type", "opgraph.graph.basic"):
                continue  # imported helpers (as_tensor_variable, TensorType, Apply)
            if name in ("Op", "Elemwise", "DimShuffle"):
                continue
            missing.append(name)
    assert missing == []


#: The math library's modules (split by dependency); the tensor namespace gathers them all.
#: (By module path: ``opgraph.tensor.dot`` the attribute is the function, as in Theano.)
MATH_MODULES = tuple(
    import_module(f"opgraph.tensor.{name}")
    for name in ("math", "reduction", "dot", "cumulative", "statistics")
)


@pytest.mark.parametrize("name", sorted({n for module in MATH_MODULES for n in module.__all__}))
def test_every_name_is_reachable_from_the_tensor_namespace(name: str) -> None:
    assert hasattr(T, name), f"opgraph.tensor.{name} is missing"
    assert any(getattr(module, name, None) is getattr(T, name) for module in MATH_MODULES)


def test_gradient_namespace_matches_the_scalar_one() -> None:
    """Scalar-op gradients are written against both namespaces: the names must agree."""
    import opgraph.scalar.basic as ps

    used = ["add", "sub", "mul", "neg", "true_div", "int_div", "pow", "sqr", "sqrt", "exp"]
    used += ["log", "sin", "cos", "sinh", "cosh", "sgn", "eq", "ge", "le", "lt", "gt", "and_"]
    used += ["psi", "sigmoid", "switch", "cast", "zeros_like", "ones_like", "apply_scalar_op"]
    for name in used:
        assert hasattr(ps, name) and hasattr(tm, name), name


# ----------------------------------------------------------------------------------------
# Theano's dtype rules


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("int8", "float32", "float32"),
        ("int64", "float32", "float64"),
        ("int32", "float32", "float64"),
        ("uint8", "int8", "int16"),
        ("bool", "int8", "int8"),
        ("float32", "complex64", "complex64"),
        ("float64", "complex64", "complex128"),
    ],
)
def test_add_upcasts_like_theano(a: str, b: str, expected: str) -> None:
    x, y = T.TensorType(a, (False,))("x"), T.TensorType(b, (False,))("y")
    out = x + y
    assert out.dtype == expected
    xv, yv = np.arange(3).astype(a), np.arange(3).astype(b)
    assert function([x, y], out)(xv, yv).dtype == np.dtype(expected)


def test_true_div_of_int64s_is_float64() -> None:
    x, y = T.lvector("x"), T.lvector("y")
    out = x / y
    assert out.dtype == "float64"
    np.testing.assert_allclose(function([x, y], out)([1, 3], [2, 4]), [0.5, 0.75])


def test_python_number_constants_keep_the_tensor_dtype() -> None:
    x = T.fvector("x")
    assert (x * 2).dtype == "float32"
    assert (x + 1.5).dtype == "float32"
    assert (T.bvector("b") + 1).dtype == "int8"


def test_int_inputs_of_float_ops_are_computed_in_the_output_precision() -> None:
    """exp(int8) is float32 (Theano), not NumPy's float16."""
    x = T.bvector("x")
    out = T.exp(x)
    got = function([x], out)(np.array([5, -3], dtype="int8"))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np.exp(np.array([5.0, -3.0])), rtol=1e-6)


# ----------------------------------------------------------------------------------------
# casting, rounding and other helpers


def test_cast_names_floatx_and_is_identity_for_same_dtype() -> None:
    x = T.dvector("x")
    assert T.cast(x, "float64") is x
    assert T.cast(x, "floatX").dtype == opgraph.config.floatX
    assert str(T.cast(x, "int32").owner.op) == "Elemwise{Cast{int32}}"


def test_cast_from_complex_to_real_is_an_error() -> None:
    with pytest.raises(TypeError, match=r"ambiguous.*real"):
        T.cast(T.zvector("z"), "float64")


def test_cast_gradient_flows_between_floats_and_stops_at_ints() -> None:
    x = T.dvector("x")
    g = grad(T.sum(T.cast(x, "float32") * 3), x)
    assert g.dtype == "float64"
    np.testing.assert_array_equal(function([x], g)([1.5, -2.0]), [3.0, 3.0])
    g_int = grad(T.sum(T.cast(T.cast(x, "int64"), "float64")), x)
    np.testing.assert_array_equal(function([x], g_int)([1.5, -2.0]), [0.0, 0.0])


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (None, [-2.0, -2.0, -0.0, 0.0, 2.0, 2.0, 3.0]),
        ("half_to_even", [-2.0, -2.0, -0.0, 0.0, 2.0, 2.0, 3.0]),
        ("half_away_from_zero", [-3.0, -2.0, -1.0, 1.0, 2.0, 3.0, 3.0]),
    ],
)
def test_round_modes(mode: str | None, expected: list[float]) -> None:
    x = T.dvector("x")
    vals = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.6])
    check_modes([x], T.round(x, mode), [vals], np.array(expected))
    check_modes([x], x.round(mode or "half_to_even"), [vals], np.array(expected))


def test_round_half_away_from_zero_is_exact_near_halves() -> None:
    x = T.dvector("x")
    vals = np.array([0.49999999999999994, -0.49999999999999994, 1e16 + 1, 4.5])
    got = function([x], T.round(x, "half_away_from_zero"))(vals)
    np.testing.assert_array_equal(got, [0.0, -0.0, 1e16 + 1, 5.0])


def test_round_rejects_unknown_modes_and_iround_gives_int64() -> None:
    with pytest.raises(ValueError, match="half_to_even"):
        T.round(T.dvector(), "up")
    out = T.iround(T.dvector("x"), "half_away_from_zero")
    assert out.dtype == "int64"
    assert list(out.eval({out.owner.inputs[0].owner.inputs[0]: [2.5, -0.4]})) == [3, 0]


def test_round_rejects_complex() -> None:
    with pytest.raises(TypeError, match="complex"):
        T.round(T.zvector(), "half_away_from_zero")


def test_isclose_and_allclose_follow_numpy() -> None:
    a, b = T.dvector("a"), T.dvector("b")
    av = np.array([1e10, 1e-7, 1.0, np.nan, np.inf, np.inf, 1.0])
    bv = np.array([1.00001e10, 1e-8, 1.0, np.nan, np.inf, -np.inf, 2.0])
    modes = ["FAST_COMPILE", "FAST_RUN", DebugMode(check_isfinite=False)]  # inf - inf is NaN
    check_modes([a, b], T.isclose(a, b), [av, bv], np.isclose(av, bv), modes)
    check_modes(
        [a, b], T.isclose(a, b, equal_nan=True), [av, bv], np.isclose(av, bv, equal_nan=True), modes
    )
    assert not function([a, b], T.allclose(a, b))(av, bv)
    assert function([a, b], T.allclose(a, b))(av[[0, 2]], bv[[0, 2]])


def test_largest_and_smallest() -> None:
    a, b, c = T.dvectors("a", "b", "c")
    av, bv, cv = np.array([1.0, 5.0]), np.array([3.0, 2.0]), np.array([2.0, 9.0])
    check_modes([a, b, c], T.largest(a, b, c), [av, bv, cv], np.maximum(np.maximum(av, bv), cv))
    check_modes([a, b], T.smallest(a, b), [av, bv], np.minimum(av, bv))
    with pytest.raises(TypeError):
        T.largest()


def test_aliases_are_the_same_functions() -> None:
    assert T.square is T.sqr and T.abs is T.abs_ and T.where is T.switch
    assert T.fill is T.second and T.floor_div is T.int_div and T.tensor_copy is T.identity
    assert T.bitwise_not is T.invert and T.bitwise_and is T.and_


def test_switch_and_clip_match_numpy_with_gradients(rng: np.random.Generator) -> None:
    c, a, b = T.bvector("c"), T.dvector("a"), T.dvector("b")
    cv, av, bv = np.array([1, 0, 1], "int8"), rng.random(3), rng.random(3)
    check_modes([c, a, b], T.switch(c, a, b), [cv, av, bv], np.where(cv, av, bv))
    x = T.dmatrix("x")
    xv = rng.normal(size=(3, 4))
    check_modes([x], T.clip(x, -0.5, 0.5), [xv], np.clip(xv, -0.5, 0.5))
    verify_grad(lambda v: T.switch(T.gt(v, 0), v * 2.0, v * 3.0), [xv])
    verify_grad(lambda v, lo: T.clip(v, lo, 0.7), [np.array([-1.0, 0.1, 2.0]), np.array(-0.3)])


def test_zeros_like_ones_like_and_fill(rng: np.random.Generator) -> None:
    x = T.fmatrix("x")
    xv = rng.random((2, 3)).astype("float32")
    check_modes([x], T.zeros_like(x), [xv], np.zeros((2, 3), "float32"))
    check_modes([x], T.ones_like(x, dtype="int8"), [xv], np.ones((2, 3), "int8"))
    check_modes([x], T.fill(x, 7.0), [xv], np.full((2, 3), 7.0, "float32"))
    assert T.ones_like(x, dtype="int8").dtype == "int8"


def test_tensor_from_scalar_round_trip() -> None:
    from opgraph.scalar.type import get_scalar_type

    s = get_scalar_type("float64")("s")
    t = T.tensor_from_scalar(s)
    assert t.type.ndim == 0
    back = T.scalar_from_tensor(t * 2)
    assert float(function([s], back)(1.5)) == 3.0
    with pytest.raises(TypeError, match="0-d"):
        T.scalar_from_tensor(T.dvector())


def test_tensor_variable_methods_forward_to_the_math_functions(rng: np.random.Generator) -> None:
    x, y = T.dmatrix("x"), T.dmatrix("y")
    xv, yv = rng.normal(size=(3, 4)), rng.normal(size=(4, 2))
    outs = [x.prod(0), x.mean(1), x.var(), x.std(0, ddof=1), x.max(1), x.min(), x.argmax(0)]
    outs += [x.argmin(keepdims=True), x.all(), x.any(1), x.cumsum(1), x.cumprod(), x.norm(2, 0)]
    outs += [x.round(), x.dot(y), x @ y, x.size]
    expected = [xv.prod(0), xv.mean(1), xv.var(), xv.std(0, ddof=1), xv.max(1), xv.min()]
    expected += [xv.argmax(0), np.argmin(xv, keepdims=True), xv.all(), xv.any(1)]
    expected += [xv.cumsum(1), xv.cumprod(), np.linalg.norm(xv, 2, 0), xv.round(), xv @ yv]
    expected += [xv @ yv, np.int64(12)]
    check_modes([x, y], outs, [xv, yv], expected, modes=["FAST_RUN"])


def test_norm_of_small_ints_does_not_overflow() -> None:
    x = T.bvector("x")
    got = function([x], T.norm(x, 2))(np.array([100, 100], "int8"))
    assert got == pytest.approx(np.hypot(100, 100))


# ----------------------------------------------------------------------------------------
# printing


def test_pprint_prints_the_documented_logistic_prediction() -> None:
    x, w, b = T.dmatrix("x"), T.dvector("w"), T.dscalar("b")
    p_1 = 1 / (1 + T.exp(-T.dot(x, w) - b))
    prediction = p_1 > 0.5
    assert pprint(prediction) == (
        "gt((TensorConstant{1} / (TensorConstant{1} + exp(((-(x \\dot w)) - b)))), "
        "TensorConstant{0.5})"
    )


def test_pprint_of_abs_round_and_new_ops() -> None:
    x = T.dvector("x")
    assert pprint(abs(x)) == "|x|"
    assert pprint(T.round(x, "half_away_from_zero")) == "round_half_away_from_zero(x)"
    assert pprint(T.inv(x)) == "inv(x)"


def test_elemwise_names_are_theano_names() -> None:
    x = T.dvector("x")
    assert T.deg2rad(x).owner.op.name == "Elemwise{deg2rad,no_inplace}"
    assert str(T.exp(x).owner.op) == "Elemwise{exp,no_inplace}"
    assert str(tm.exp_inplace(x).owner.op) == "Elemwise{exp,inplace}"


# ----------------------------------------------------------------------------------------
# Regression tests for scalar-op dtype and gradient rules.


def test_floor_division_of_floats() -> None:
    x, y = T.dvector("x"), T.dvector("y")
    check_modes([x, y], x // y, [np.array([7.5, -7.5]), np.array([2.0, 2.0])], [3.0, -4.0])


def test_mod_gradient_for_floats() -> None:
    verify_grad(lambda a, b: a % b, [np.array([3.3, 5.2]), np.array([1.5, 2.0])])


def test_true_div_of_int8s_is_floatx() -> None:
    assert (T.bvector() / T.bvector()).dtype == opgraph.config.floatX


def test_neg_of_bool_is_a_build_time_type_error() -> None:
    with pytest.raises(TypeError):
        -T.TensorType("bool", (False,))()


def test_abs_of_complex_is_real() -> None:
    assert abs(T.zvector()).dtype == "float64"


def test_angle_of_negative_ints_is_pi() -> None:
    x = T.lvector("x")
    np.testing.assert_allclose(function([x], T.angle(x))([-3, 2]), [np.pi, 0.0])


def test_real_and_conj_of_reals_have_identity_gradients() -> None:
    x = T.dvector("x")
    g = grad(T.sum(T.real(x) + T.conj(x)), x)
    np.testing.assert_allclose(function([x], g)([1.0, 2.0]), [2.0, 2.0])


def test_fused_exp_of_int8_is_computed_in_float32() -> None:
    x, y = T.bvector("x"), T.bvector("y")
    got = function([x, y], T.exp(x - y) * 2, mode="FAST_RUN")(np.array([5], "int8"), [1])
    np.testing.assert_allclose(got, 2 * np.exp([4.0]), rtol=1e-6)


def test_axis_arguments() -> None:
    x = T.dmatrix("x")
    assert T.sum(x, axis=T.constant(1)).owner.op.axis == (1,)
    assert T.max(x, axis=np.array(0)).owner.op.axis == (0,)
    with pytest.raises(TypeError, match="known when the graph is built"):
        T.sum(x, axis=T.lscalar())
    with pytest.raises(TypeError, match="axis entries must be ints"):
        T.sum(x, axis=[0.5])


def test_psi_gradient_is_not_zero() -> None:
    x = T.dvector("x")
    g = function([x], grad(T.sum(T.psi(x)), x))([1.0])
    assert g[0] == pytest.approx(np.pi**2 / 6)
