"""Gemm, Gemv, Ger, Dot22 and Dot22Scalar against NumPy: layouts, in place, empty, modes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.compile.io import In
from opgraph.gradient import verify_grad
from opgraph.tensor.blas import (
    Dot22,
    Dot22Scalar,
    Gemm,
    Gemv,
    Ger,
    _dot22,
    _dot22scalar,
    gemm_inplace,
    gemm_no_inplace,
    gemv_inplace,
    gemv_no_inplace,
    ger,
    ger_destructive,
)
from opgraph.testing.checks import assert_allclose, check_infer_shape, check_modes

DTYPES = ["float16", "float32", "float64", "complex128"]


def _var(value: Any, name: str = "") -> Any:
    value = np.asarray(value)
    return T.TensorType(value.dtype.name, (False,) * value.ndim)(name or None)


def _perform(op: Any, *values: Any) -> Any:
    """Run ``op.perform`` on ``values`` (arrays used as given: views and layouts kept)."""
    node = op.make_node(*[_var(v) for v in values])
    out: list[list[Any]] = [[None]]
    op.perform(node, list(values), out)
    return out[0][0]


def _value(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    v = rng.uniform(-1, 1, size=shape)
    if dtype.startswith("complex"):
        v = v + 1j * rng.uniform(-1, 1, size=shape)
    return np.asarray(v, dtype=dtype)


def _layouts(base: np.ndarray) -> dict[str, np.ndarray]:
    """``base``'s values as C-ordered, Fortran-ordered and strided (non-contiguous) arrays."""
    wide = np.zeros((base.shape[0], 2 * base.shape[1]), base.dtype)
    wide[:, ::2] = base
    return {"C": base.copy(), "F": np.asfortranarray(base), "strided": wide[:, ::2]}


def _check_in_place(
    op_pair: tuple[Any, Any], args: list[Any], expected: np.ndarray, dtype: str
) -> None:
    """The copying op leaves every input alone; the in-place one returns input 0, updated."""
    keep, destroy = op_pair
    before = [np.array(a, copy=True) for a in args]
    got = _perform(keep, *args)
    assert_allclose(got, expected, dtype=dtype)
    assert got.dtype == np.dtype(dtype)
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b)
    target = args[0]
    got = _perform(destroy, *args)
    assert got is target
    assert_allclose(target, expected, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("z_layout", ["C", "F", "strided"])
@pytest.mark.parametrize("x_layout", ["C", "F", "strided"])
def test_gemm_matches_numpy_in_every_layout(
    dtype: str, z_layout: str, x_layout: str, rng: np.random.Generator
) -> None:
    z = _layouts(_value(rng, (3, 4), dtype))[z_layout]
    x = _layouts(_value(rng, (3, 5), dtype))[x_layout]
    y = _value(rng, (4, 5), dtype).T  # a transposed (Fortran-ordered) view
    a, b = np.asarray(0.5, dtype), np.asarray(-2.0, dtype)
    expected = b * z + a * (x @ y)
    _check_in_place((gemm_no_inplace, gemm_inplace), [z, a, x, y, b], expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("a_layout", ["C", "F", "strided"])
def test_gemv_matches_numpy_in_every_layout(
    dtype: str, a_layout: str, rng: np.random.Generator
) -> None:
    A = _layouts(_value(rng, (3, 4), dtype))[a_layout]
    x = _value(rng, (8,), dtype)[::2]  # strided
    for y in (_value(rng, (3,), dtype), _value(rng, (6,), dtype)[::2]):
        a, b = np.asarray(1.5, dtype), np.asarray(0.25, dtype)
        expected = b * y + a * (A @ x)
        _check_in_place((gemv_no_inplace, gemv_inplace), [y, a, A, x, b], expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("a_layout", ["C", "F", "strided"])
def test_ger_matches_numpy_in_every_layout(
    dtype: str, a_layout: str, rng: np.random.Generator
) -> None:
    A = _layouts(_value(rng, (3, 4), dtype))[a_layout]
    x, y = _value(rng, (3,), dtype), _value(rng, (8,), dtype)[::2]
    a = np.asarray(-0.75, dtype)
    expected = A + a * np.outer(x, y)  # no conjugation for complex values
    _check_in_place((ger, ger_destructive), [A, a, x, y], expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_dot22_and_dot22scalar_match_numpy(dtype: str, rng: np.random.Generator) -> None:
    x = _value(rng, (5, 3), dtype).T
    y = _layouts(_value(rng, (5, 2), dtype))["strided"]
    a = np.asarray(3.0, dtype)
    got = _perform(_dot22, x, y)
    assert got.dtype == np.dtype(dtype)
    assert_allclose(got, x @ y, dtype=dtype)
    got = _perform(_dot22scalar, x, y, a)
    assert got.dtype == np.dtype(dtype)
    assert_allclose(got, a * (x @ y), dtype=dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_zero_beta_ignores_the_buffer_and_zero_alpha_the_product(
    dtype: str, rng: np.random.Generator
) -> None:
    x, y, A, v = (_value(rng, s, dtype) for s in ((2, 3), (3, 4), (2, 3), (3,)))
    zero, one = np.asarray(0, dtype), np.asarray(1, dtype)
    z_nan, y_nan = np.full((2, 4), np.nan, dtype), np.full(2, np.nan, dtype)
    assert_allclose(_perform(gemm_no_inplace, z_nan, one, x, y, zero), x @ y, dtype=dtype)
    assert_allclose(_perform(gemv_no_inplace, y_nan, one, A, v, zero), A @ v, dtype=dtype)
    x_nan = np.full((2, 3), np.nan, dtype)
    z = _value(rng, (2, 4), dtype)
    assert_allclose(_perform(gemm_no_inplace, z, zero, x_nan, y, one), z, dtype=dtype)


EMPTY_GEMM = [((0, 4), (0, 3), (3, 4)), ((2, 0), (2, 3), (3, 0)), ((2, 4), (2, 0), (0, 4))]


@pytest.mark.parametrize(("zs", "xs", "ys"), EMPTY_GEMM)
def test_empty_dimensions(zs: Any, xs: Any, ys: Any, rng: np.random.Generator) -> None:
    z, x, y = (_value(rng, s, "float64") for s in (zs, xs, ys))
    a, b = np.asarray(2.0), np.asarray(3.0)
    expected = b * z + a * (x @ y)
    _check_in_place((gemm_no_inplace, gemm_inplace), [z, a, x, y, b], expected, "float64")
    assert_allclose(_perform(_dot22, x, y), x @ y)
    assert_allclose(_perform(_dot22scalar, x, y, a), a * (x @ y))
    A, v = _value(rng, xs, "float64"), _value(rng, (xs[1],), "float64")
    yv = _value(rng, (xs[0],), "float64")
    _check_in_place(
        (gemv_no_inplace, gemv_inplace), [yv, a, A, v, b], b * yv + a * (A @ v), "float64"
    )
    col, row = _value(rng, (zs[0],), "float64"), _value(rng, (zs[1],), "float64")
    expected = z + a * np.outer(col, row)
    _check_in_place((ger, ger_destructive), [z, a, col, row], expected, "float64")


def _graph(rng: np.random.Generator, dtype: str) -> tuple[list, list, list, list]:
    """A graph using every op, with transposed and sliced operands, and NumPy's values."""
    z, x, y = T.TensorType(dtype, (False, False))("z"), T.matrix("x", dtype), T.matrix("y", dtype)
    v, u = T.vector("v", dtype), T.vector("u", dtype)
    a = T.scalar("a", dtype)
    outs = [
        gemm_no_inplace(z, a, x.T, y[:, ::2], 0.5),
        gemv_no_inplace(v, a, x.T, u[::2], 2.0),
        ger(z, a, v[:4], u[::3]),
        _dot22(x.T, y),
        _dot22scalar(x.T, y[:, ::2], a),
    ]
    zv, xv, yv = _value(rng, (4, 2), dtype), _value(rng, (3, 4), dtype), _value(rng, (3, 4), dtype)
    vv, uv = _value(rng, (4,), dtype), _value(rng, (6,), dtype)
    av = np.asarray(-1.5, dtype)
    expected = [
        0.5 * zv + av * (xv.T @ yv[:, ::2]),
        2.0 * vv + av * (xv.T @ uv[::2]),
        zv + av * np.outer(vv[:4], uv[::3]),
        xv.T @ yv,
        av * (xv.T @ yv[:, ::2]),
    ]
    return [z, x, y, v, u, a], outs, [zv, xv, yv, vv, uv, av], expected


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_ops_in_every_mode(dtype: str, mode: str, rng: np.random.Generator) -> None:
    inputs, outs, values, expected = _graph(rng, dtype)
    check_modes(inputs, outs, values, expected, modes=[mode])


def test_in_place_ops_in_a_compiled_function_overwrite_a_mutable_input(
    mode: str, rng: np.random.Generator
) -> None:
    z, x, y, a = T.dmatrix("z"), T.dmatrix("x"), T.dmatrix("y"), T.dscalar("a")
    f = function(
        [In(z, mutable=True), x, y, a],
        gemm_inplace(z, a, x, y, 1.0),
        mode=mode,
        accept_inplace=True,
    )
    zv, xv, yv = (_value(rng, s, "float64") for s in ((2, 3), (2, 4), (4, 3)))
    expected = zv + 2.0 * (xv @ yv)
    buffer = zv.copy()
    assert_allclose(f(buffer, xv, yv, 2.0), expected)
    if mode != "DEBUG_MODE":  # DEBUG_MODE runs every node on copies of its inputs
        assert_allclose(buffer, expected)


def test_infer_shape(rng: np.random.Generator) -> None:
    inputs, outs, values, _ = _graph(rng, "float64")
    for op_class in (Gemm, Gemv, Ger, Dot22, Dot22Scalar):
        check_infer_shape(inputs, outs, values, op_class)


GRADS: list[tuple[Callable[..., Any], list[tuple[int, ...]]]] = [
    (gemm_no_inplace, [(2, 3), (), (2, 4), (4, 3), ()]),
    (gemv_no_inplace, [(3,), (), (3, 2), (2,), ()]),
    (ger, [(3, 2), (), (3,), (2,)]),
    (_dot22, [(2, 3), (3, 4)]),
    (_dot22scalar, [(2, 3), (3, 4), ()]),
]


@pytest.mark.parametrize(("op", "shapes"), GRADS, ids=lambda p: str(p) if callable(p) else "")
def test_gradients(op: Callable[..., Any], shapes: list[tuple[int, ...]]) -> None:
    rng = np.random.default_rng(7)
    pt = [rng.uniform(-1, 1, size=s) for s in shapes]
    verify_grad(op, pt, rng=rng)


def test_printed_names_props_and_destroy_maps() -> None:
    assert (str(gemm_inplace), str(gemm_no_inplace)) == ("Gemm{inplace}", "Gemm{no_inplace}")
    assert (str(gemv_inplace), str(gemv_no_inplace)) == ("Gemv{inplace}", "Gemv{no_inplace}")
    assert (str(ger_destructive), str(ger)) == ("Ger{destructive}", "Ger{non-destructive}")
    assert (str(_dot22), str(_dot22scalar)) == ("Dot22", "Dot22Scalar")
    for op in (gemm_inplace, gemv_inplace, ger_destructive):
        assert op.destroy_map == {0: [0]}
    for op in (gemm_no_inplace, gemv_no_inplace, ger, _dot22, _dot22scalar):
        assert op.destroy_map == {}
    assert Gemm(inplace=True) == gemm_inplace and hash(Gemm(True)) == hash(gemm_inplace)
    assert Gemv(inplace=False) != gemv_inplace and Ger(destructive=False) == ger
    z, x = T.dmatrix("z"), T.dmatrix("x")
    assert str(gemm_no_inplace(z, 1.0, x, x, 1.0)) == "Gemm{no_inplace}.0"


def test_type_errors_name_the_problem() -> None:
    z, x, v = T.dmatrix("z"), T.dmatrix("x"), T.dvector("v")
    fz, iz = T.fmatrix("fz"), T.imatrix("iz")
    with pytest.raises(TypeError, match="Z must be a matrix"):
        gemm_no_inplace(v, 1.0, x, x, 1.0)
    with pytest.raises(TypeError, match="one dtype"):
        gemm_no_inplace(fz, 1.0, x, x, 1.0)
    with pytest.raises(TypeError, match="float or complex"):
        gemm_no_inplace(iz, 1.0, iz, iz, 1.0)
    with pytest.raises(TypeError, match="scalar"):
        gemv_no_inplace(v, v, x, v, 1.0)
    with pytest.raises(TypeError, match="casts to the result's dtype float32"):
        ger(fz, T.dscalar("a"), T.fvector(), T.fvector())
    with pytest.raises(TypeError, match="x must be a vector"):
        gemv_no_inplace(v, 1.0, x, z, 1.0)


def test_shape_mismatches_raise_clear_errors(rng: np.random.Generator) -> None:
    m23, m34, m33 = (_value(rng, s, "float64") for s in ((2, 3), (3, 4), (3, 3)))
    one = np.asarray(1.0)
    with pytest.raises(ValueError, match=r"Gemm\{no_inplace\}: Z has shape \(3, 3\), but dot"):
        _perform(gemm_no_inplace, m33, one, m23, m34, one)
    with pytest.raises(ValueError, match=r"X and Y of shapes \(2, 3\) and \(2, 3\) are not"):
        _perform(gemm_inplace, m33, one, m23, m23, one)
    with pytest.raises(ValueError, match=r"Gemv\{inplace\}: A and x .*\(2, 3\) and \(4,\)"):
        _perform(gemv_inplace, np.zeros(2), one, m23, np.zeros(4), one)
    with pytest.raises(ValueError, match=r"y has shape \(3,\), but dot\(A, x\) has shape \(2,\)"):
        _perform(gemv_no_inplace, np.zeros(3), one, m23, np.zeros(3), one)
    with pytest.raises(ValueError, match=r"Ger\{non-destructive\}: A has shape \(2, 3\), but"):
        _perform(ger, m23, one, np.zeros(3), np.zeros(3))
    with pytest.raises(ValueError, match="X has 3 columns, Y has length 2"):
        _perform(_dot22, m23, m23)
    with pytest.raises(ValueError, match="Dot22Scalar: X and Y"):
        _perform(_dot22scalar, m23, m23, one)
