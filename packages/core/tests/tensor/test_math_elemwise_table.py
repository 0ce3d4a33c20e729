"""Every elementwise op of ``opgraph.tensor.math`` against NumPy/SciPy, from one op table.

Each row names the op, its NumPy reference, the input dtypes it is tested on, the input
domain and whether it is differentiable. Rows expand over dtypes x modes (forward values on a
matrix, a broadcast row/column pair, an empty array, a 0-d value and, for floats, NaN/inf),
and over differentiable ops for ``verify_grad`` (JAX's ``op_record`` / PyTensor's
``makeTester`` style).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
import scipy.special as sp

import opgraph.tensor as T
import opgraph.tensor.math as tm
from opgraph.compile.debugmode import DebugMode
from opgraph.compile.function import function
from opgraph.gradient import grad, verify_grad
from opgraph.testing.checks import check_modes, random_value
from opgraph.testing.checks import tolerance as _tol

B, I8, I64, F32, F64, C128 = "bool", "int8", "int64", "float32", "float64", "complex128"
INTS = (I8, I64)
FLOATS = (F32, F64)
REAL = (I8, I64, F32, F64)

_TO_FLOAT = {B: F32, "int8": F32, "int16": F32, "uint8": F32, "uint16": F32}


def to_float(dt: str) -> str:
    """Theano's ``upgrade_to_float``: small ints give float32, larger ints float64."""
    if dt in _TO_FLOAT:
        return _TO_FLOAT[dt]
    return F64 if np.dtype(dt).kind in "iu" else dt


def same(dt: str) -> str:
    return dt


def boolean(dt: str) -> str:
    return B


def real_part(dt: str) -> str:
    return {"complex64": F32, C128: F64}.get(dt, dt)


def nobool(dt: str) -> str:
    return I8 if dt == B else dt


def round_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


@dataclass(frozen=True)
class Op:
    """One row of the table."""

    name: str
    ref: Callable[..., np.ndarray]
    dtypes: tuple[str, ...]
    out: Callable[[str], str]
    domain: tuple[float, float] = (-2.0, 2.0)
    grad: str = "verify"  # "verify", "zero" or "none" (no float input to differentiate)
    nin: int = 1

    def __str__(self) -> str:
        return self.name


UNARY = [
    Op("neg", np.negative, (I8, I64, F32, F64, C128), same),
    Op("abs_", np.abs, (B, I8, I64, F32, F64), same),
    Op("sgn", np.sign, REAL, same, grad="zero"),
    Op("exp", np.exp, (B, I8, I64, F32, F64, C128), to_float),
    Op("exp2", np.exp2, (B, I8, I64, F32, F64), to_float),
    Op("expm1", np.expm1, (I8, I64, F32, F64, C128), to_float),
    Op("log", np.log, (B, I8, I64, F32, F64, C128), to_float, (0.2, 5.0)),
    Op("log2", np.log2, (I8, I64, F32, F64), to_float, (0.2, 5.0)),
    Op("log10", np.log10, (I8, I64, F32, F64), to_float, (0.2, 5.0)),
    Op("log1p", np.log1p, (I8, I64, F32, F64), to_float, (-0.5, 3.0)),
    Op("sqrt", np.sqrt, (B, I8, I64, F32, F64, C128), to_float, (0.2, 4.0)),
    Op("sqr", np.square, (I8, I64, F32, F64, C128), same),
    Op("sin", np.sin, (I8, I64, F32, F64, C128), to_float),
    Op("cos", np.cos, (I8, I64, F32, F64, C128), to_float),
    Op("tan", np.tan, (I8, F32, F64, C128), to_float, (-1.2, 1.2)),
    Op("arcsin", np.arcsin, (I8, F32, F64), to_float, (-0.9, 0.9)),
    Op("arccos", np.arccos, (I8, F32, F64), to_float, (-0.9, 0.9)),
    Op("arctan", np.arctan, (I8, I64, F32, F64), to_float, (-3.0, 3.0)),
    Op("sinh", np.sinh, (I8, F32, F64), to_float),
    Op("cosh", np.cosh, (I8, F32, F64), to_float),
    Op("tanh", np.tanh, (I8, I64, F32, F64, C128), to_float),
    Op("arcsinh", np.arcsinh, (I8, F32, F64), to_float, (-3.0, 3.0)),
    Op("arccosh", np.arccosh, (I64, F32, F64), to_float, (1.1, 4.0)),
    Op("arctanh", np.arctanh, (F32, F64), to_float, (-0.9, 0.9)),
    Op("deg2rad", np.deg2rad, (I8, I64, F32, F64), to_float, (-200.0, 200.0)),
    Op("rad2deg", np.rad2deg, (I8, F32, F64), to_float, (-4.0, 4.0)),
    Op("inv", lambda x: 1.0 / x, (I8, I64, F32, F64), to_float, (0.5, 3.0)),
    Op("floor", np.floor, REAL, same, (-5.0, 5.0), grad="zero"),
    Op("ceil", np.ceil, REAL, same, (-5.0, 5.0), grad="zero"),
    Op("trunc", np.trunc, REAL, same, (-5.0, 5.0), grad="zero"),
    Op("round_half_to_even", np.round, (I64, F32, F64), same, (-5.0, 5.0), grad="zero"),
    Op("round_half_away_from_zero", round_away, (I8, F32, F64), same, (-5.0, 5.0), "zero"),
    Op("erf", sp.erf, (I8, F32, F64), to_float),
    Op("erfc", sp.erfc, (I8, F32, F64), to_float),
    Op("erfinv", sp.erfinv, (F32, F64), to_float, (-0.9, 0.9)),
    Op("gamma", sp.gamma, (I64, F32, F64), to_float, (0.5, 4.0)),
    Op("gammaln", sp.gammaln, (I64, F32, F64), to_float, (0.5, 5.0)),
    Op("psi", sp.psi, (F32, F64), to_float, (0.5, 5.0), grad="none"),
    Op("sigmoid", sp.expit, (I8, F32, F64), to_float, (-4.0, 4.0)),
    Op("softplus", lambda x: np.logaddexp(0, x), (I8, F32, F64), to_float, (-4.0, 4.0)),
    Op("isnan", np.isnan, (B, I8, I64, F32, F64, C128), boolean, grad="zero"),
    Op("isinf", np.isinf, (B, I8, I64, F32, F64, C128), boolean, grad="zero"),
    Op("real", np.real, (F64, C128), real_part, grad="none"),
    Op("imag", np.imag, (F64, C128), real_part, grad="none"),
    Op("angle", np.angle, (F64, C128), real_part, grad="zero"),
    Op("conj", np.conj, (F64, C128), same, grad="none"),
    Op("invert", np.invert, (B, I8, I64), same, grad="none"),
    Op("identity", lambda x: x, (B, I8, I64, F32, F64, C128), same),
]

BINARY = [
    Op("add", np.add, (B, I8, I64, F32, F64, C128), same, nin=2),
    Op("sub", np.subtract, (I8, I64, F32, F64, C128), same, nin=2),
    Op("mul", np.multiply, (B, I8, I64, F32, F64, C128), same, nin=2),
    Op("true_div", np.true_divide, (I64, F32, F64, C128), to_float, (0.5, 3.0), nin=2),
    Op("int_div", np.floor_divide, INTS, same, (1.0, 9.0), grad="none", nin=2),
    Op("mod", np.mod, (I8, I64), same, (1.0, 9.0), grad="none", nin=2),
    Op("pow", np.power, (I8, I64, F32, F64, C128), same, (0.5, 2.0), nin=2),
    Op("maximum", np.maximum, (B, I8, I64, F32, F64), same, nin=2),
    Op("minimum", np.minimum, (B, I8, I64, F32, F64), same, nin=2),
    Op("arctan2", np.arctan2, (I8, F32, F64), to_float, nin=2),
    Op("gt", np.greater, (B, I8, I64, F32, F64), boolean, grad="zero", nin=2),
    Op("lt", np.less, (B, I8, I64, F32, F64), boolean, grad="zero", nin=2),
    Op("ge", np.greater_equal, (B, I8, I64, F32, F64), boolean, grad="zero", nin=2),
    Op("le", np.less_equal, (B, I8, I64, F32, F64), boolean, grad="zero", nin=2),
    Op("eq", np.equal, (B, I8, I64, F32, F64, C128), boolean, grad="zero", nin=2),
    Op("neq", np.not_equal, (B, I8, I64, F32, F64, C128), boolean, grad="zero", nin=2),
    Op("and_", np.bitwise_and, (B, I8, I64), same, grad="none", nin=2),
    Op("or_", np.bitwise_or, (B, I8, I64), same, grad="none", nin=2),
    Op("xor", np.bitwise_xor, (B, I8, I64), same, grad="none", nin=2),
]

ALL_OPS = UNARY + BINARY


def _value(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, op: Op) -> np.ndarray:
    lo, hi = op.domain
    if dtype == C128:
        re = random_value(rng, shape, F64, lo, hi)
        im = random_value(rng, shape, F64, -0.5, 0.5)
        return (re + 1j * im).astype(C128)
    if np.dtype(dtype).kind in "iu":
        lo_i, hi_i = int(np.ceil(lo)), int(np.floor(hi))
        return rng.integers(lo_i, max(hi_i, lo_i) + 1, size=shape).astype(dtype)
    return random_value(rng, shape, dtype, lo, hi)


def _reference(op: Op, out_dtype: str, *values: np.ndarray) -> np.ndarray:
    """NumPy's result computed in the output's precision (Theano's dtype rule)."""
    args = []
    for v in values:
        v = np.asarray(v)
        if v.dtype.kind in "biu" and np.dtype(out_dtype).kind in "fc":
            v = v.astype(out_dtype)
        args.append(v)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(op.ref(*args)).astype(out_dtype)


def _special(dtype: str) -> np.ndarray:
    if dtype == C128:
        # No infinities: canonicalization rewrites -x to -1 * x, and (-1+0j) * (inf+0j) has a
        # NaN imaginary part in IEEE complex arithmetic (as in Theano and NumPy).
        return np.array([np.nan, 0.0, 1.0 + 1.0j, -0.5j, complex(0.5, np.nan)], dtype=C128)
    return np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5], dtype=dtype)


def _finite_ok(mode: str) -> object:
    """The mode itself, but DEBUG_MODE accepting NaN and inf outputs (tested on purpose)."""
    return DebugMode(check_isfinite=False) if mode == "DEBUG_MODE" else mode


CASES = [(op, dt) for op in ALL_OPS for dt in op.dtypes]


@pytest.mark.parametrize(("op", "dtype"), CASES, ids=[f"{o}-{d}" for o, d in CASES])
def test_forward_matches_numpy(op: Op, dtype: str, mode: str, rng: np.random.Generator) -> None:
    fn = getattr(tm, op.name)
    if op.nin == 1:
        x = T.TensorType(dtype, (False, False))("x")
        e = T.TensorType(dtype, (False, False))("e")
        s = T.TensorType(dtype, ())("s")
        ins = [x, e, s]
        vals = [_value(rng, (3, 4), dtype, op), _value(rng, (0, 3), dtype, op)]
        vals.append(_value(rng, (), dtype, op))
        if dtype in (F32, F64, C128):
            ins.append(T.TensorType(dtype, (False,))("special"))
            vals.append(_special(dtype))
        outs = [fn(v) for v in ins]
        out_dtype = op.out(dtype)
        expected = [_reference(op, out_dtype, v) for v in vals]
    else:
        a = T.TensorType(dtype, (False, False))("a")
        row = T.TensorType(dtype, (True, False))("row")
        col = T.TensorType(dtype, (False, True))("col")
        e = T.TensorType(dtype, (False, False))("e")
        s = T.TensorType(dtype, ())("s")
        ins = [a, row, col, e, s]
        shapes = [(3, 4), (1, 4), (3, 1), (0, 4), ()]
        vals = [_value(rng, shp, dtype, op) for shp in shapes]
        pairs = [(0, 1), (2, 1), (3, 1), (4, 0), (1, 4)]
        outs = [fn(ins[i], ins[j]) for i, j in pairs]
        out_dtype = op.out(nobool(dtype) if op.name == "sub" else dtype)
        expected = [_reference(op, out_dtype, vals[i], vals[j]) for i, j in pairs]
    for o in outs:
        assert o.dtype == out_dtype, f"{op}({dtype}) has dtype {o.dtype}, expected {out_dtype}"
    check_modes(ins, outs, vals, expected, modes=[_finite_ok(mode)])


GRAD_CASES = [op for op in ALL_OPS if op.grad == "verify"]


@pytest.mark.parametrize("op", GRAD_CASES, ids=str)
def test_gradient_matches_finite_differences(op: Op, rng: np.random.Generator) -> None:
    fn = getattr(tm, op.name)
    pt = [_value(rng, (2, 3), F64, op) for _ in range(op.nin)]
    if op.name in ("maximum", "minimum"):
        pt[1] = pt[0] + np.where(rng.random((2, 3)) > 0.5, 0.5, -0.5)  # no ties
    if op.name == "abs_":
        pt[0] = np.where(np.abs(pt[0]) < 0.1, 0.5, pt[0])  # away from the kink
    verify_grad(fn, pt, rng=np.random.default_rng(1))


ZERO_GRAD_CASES = [op for op in ALL_OPS if op.grad == "zero"]


@pytest.mark.parametrize("op", ZERO_GRAD_CASES, ids=str)
def test_piecewise_constant_ops_have_zero_gradient(op: Op, rng: np.random.Generator) -> None:
    xs = [T.dmatrix(f"x{i}") for i in range(op.nin)]
    out = getattr(tm, op.name)(*xs)
    gs = grad(T.sum(T.cast(out, "float64")), xs)
    vals = [_value(rng, (2, 3), F64, op) for _ in xs]
    got = function(xs, gs, on_unused_input="ignore")(*vals)
    for g in got:
        np.testing.assert_array_equal(g, np.zeros((2, 3)))


def test_the_table_covers_every_elementwise_function() -> None:
    from opgraph.tensor.elemwise import Elemwise

    public = {
        name for name in tm.__all__ if isinstance(getattr(getattr(tm, name), "op", None), Elemwise)
    }
    covered = {op.name for op in ALL_OPS} | {"switch", "clip", "second"}
    aliases = {n for n in public if getattr(tm, n).__name__ != n}
    assert public - aliases - covered == set()


@pytest.mark.parametrize("dtype", [F32, F64])
def test_float32_tolerance_is_the_check_kit_tolerance(dtype: str) -> None:
    assert _tol(dtype)[0] <= 1e-5
