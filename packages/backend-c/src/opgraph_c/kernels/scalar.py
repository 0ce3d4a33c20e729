"""Scalar op -> C expression: the table fused elementwise loops are built from.

One entry per scalar op class (tinygrad's ``code_for_op``): ``entry(dtype, *args)`` returns
the C expression of the op on ``args``, or None when the op has no C code for ``dtype``
(the node then runs its ``perform``). ``dtype`` is the dtype the op computes in and
``args`` are C atoms (names, literals, casts) already converted to it; see
:func:`opgraph_c.codegen.elemwise.compute_dtype` for the rule. The expressions follow
NumPy's semantics, NaN and inf included: helpers whose C operator differs (floor division,
modulo, maximum/minimum, sign) live in ``include/opgraph_c_prelude.h``. The special functions
(gamma, the Bessel functions, erfcx, ...) call SciPy's own C code through function pointers
named ``opg_sf_<name>`` (:mod:`opgraph_c.kernels.special`), which the module binds when it
loads.

Adding a scalar op to fused loops takes one entry. A backend or plugin differing in one op
builds its own table: ``{**code_for_op, Sin: ...}``.
"""

from __future__ import annotations

from collections.abc import Callable

import opgraph.scalar.basic as ps
from opgraph.sandbox.softsign import ScalarSoftsign
from opgraph.scalar import extra as px
from opgraph.scalar import special as psp
from opgraph.tensor.xlogx import XlogX, XlogY0
from opgraph_c.kernels import special as sf

__all__ = ["CTYPES", "FLOAT_DTYPES", "ScalarCode", "code_for_op", "lookup"]

#: ``entry(dtype, *args) -> C expression | None``
ScalarCode = Callable[..., "str | None"]

#: NumPy dtype -> C type (typedefs of the prelude).
CTYPES = {
    "bool": "opg_bool",
    "int8": "opg_int8",
    "int16": "opg_int16",
    "int32": "opg_int32",
    "int64": "opg_int64",
    "uint8": "opg_uint8",
    "uint16": "opg_uint16",
    "uint32": "opg_uint32",
    "uint64": "opg_uint64",
    "float32": "opg_float32",
    "float64": "opg_float64",
}
FLOAT_DTYPES = ("float32", "float64")
SIGNED_DTYPES = ("int8", "int16", "int32", "int64")
INT_DTYPES = (*SIGNED_DTYPES, "uint8", "uint16", "uint32", "uint64")


def _math(fn: str) -> ScalarCode:
    """A libm function: ``fn`` for float64, ``fn`` + ``f`` for float32, nothing for integers."""

    def code(dtype: str, *args: str) -> str | None:
        if dtype not in FLOAT_DTYPES:
            return None
        name = fn if dtype == "float64" else f"{fn}f"
        return f"{name}({', '.join(args)})"

    return code


def _infix(symbol: str) -> ScalarCode:
    return lambda dtype, *args: "(" + f" {symbol} ".join(args) + ")"


def _ints(symbol: str) -> ScalarCode:
    """A bitwise operator: integers and bools only (NumPy refuses floats)."""
    return lambda dtype, x, y: None if dtype in FLOAT_DTYPES else f"({x} {symbol} {y})"


def _floats_else_identity(fn: str) -> ScalarCode:
    """Rounding: a libm function on floats, the identity on integers (NumPy's result)."""
    math = _math(fn)
    return lambda dtype, x: math(dtype, x) if dtype in FLOAT_DTYPES else x


def _helper(prefix: str) -> ScalarCode:
    """A prelude helper named per dtype (``opg_floordiv_int32``); none for bool."""
    return lambda dtype, x, y: None if dtype == "bool" else f"{prefix}_{dtype}({x}, {y})"


def _abs(dtype: str, x: str) -> str:
    if dtype in FLOAT_DTYPES:
        return f"fabs{'f' if dtype == 'float32' else ''}({x})"
    return f"({x} < 0 ? -{x} : {x})" if dtype in SIGNED_DTYPES else x


def _sgn(dtype: str, x: str) -> str:
    if dtype in FLOAT_DTYPES:
        return f"opg_sign_{'f64' if dtype == 'float64' else 'f32'}({x})"
    return f"(({x} > 0) - ({x} < 0))" if dtype in SIGNED_DTYPES else f"({x} > 0)"


def _sigmoid(dtype: str, x: str) -> str | None:
    if dtype == "float64":
        return f"(1.0 / (1.0 + exp(-{x})))"
    if dtype == "float32":
        return f"(1.0f / (1.0f + expf(-{x})))"
    return None


def _softplus(dtype: str, x: str) -> str | None:
    """``log(1 + exp(x))`` as ``np.logaddexp(0, x)`` computes it: no overflow for large x.

    ``max(x, 0) + log1p(exp(-|x|))`` is ``x + log1p(exp(-x))`` for positive x and
    ``log1p(exp(x))`` otherwise, bit for bit, without a branch: gcc vectorises it with
    libmvec's exp and log1p (a branch between two pairs of calls stayed scalar, 6.5 ns an
    element)."""
    if dtype not in FLOAT_DTYPES:
        return None
    f, zero = ("", "0.0") if dtype == "float64" else ("f", "0.0f")
    return f"(({x} > {zero} ? {x} : {zero}) + log1p{f}(exp{f}(-fabs{f}({x}))))"


def _float_test(fn: str) -> ScalarCode:
    """isnan/isinf: C99's macros on floats; always false on integers."""
    return lambda dtype, x: f"{fn}({x})" if dtype in FLOAT_DTYPES else "0"


def _invert(dtype: str, x: str) -> str | None:
    if dtype in FLOAT_DTYPES:
        return None
    return f"(!{x})" if dtype == "bool" else f"(~{x})"


def _true_div(dtype: str, x: str, y: str) -> str | None:
    return f"({x} / {y})" if dtype in FLOAT_DTYPES else None


def _pow(dtype: str, x: str, y: str) -> str | None:
    # Integer powers (negative exponents raise in NumPy) run perform.
    return _math("pow")(dtype, x, y)


def _round_half_away(dtype: str, x: str) -> str | None:
    return _math("round")(dtype, x) if dtype in FLOAT_DTYPES else x


def _scaled(factor: float) -> ScalarCode:
    def code(dtype: str, x: str) -> str | None:
        if dtype not in FLOAT_DTYPES:
            return None
        literal = repr(factor) + ("f" if dtype == "float32" else "")
        return f"({x} * {literal})"

    return code


def _xlogy0(dtype: str, x: str, y: str) -> str | None:
    """``x * log(y)``, 0 where ``x == 0`` (Theano's xlogy0; ``xlogx`` is ``y = x``)."""
    if dtype not in FLOAT_DTYPES:
        return None
    f = "" if dtype == "float64" else "f"
    return f"({x} == 0 ? 0 : {x} * log{f}({y}))"


def _softsign(dtype: str, x: str) -> str | None:
    """``x / (1 + |x|)``."""
    if dtype not in FLOAT_DTYPES:
        return None
    return f"({x} / (1 + fabs{'' if dtype == 'float64' else 'f'}({x})))"


code_for_op: dict[type, ScalarCode] = {
    # arithmetic
    ps.Add: _infix("+"),
    ps.Mul: _infix("*"),
    ps.Sub: _infix("-"),
    ps.TrueDiv: _true_div,
    ps.IntDiv: _helper("opg_floordiv"),
    ps.Mod: _helper("opg_mod"),
    ps.Pow: _pow,
    ps.Neg: lambda dtype, x: f"(-{x})",
    ps.Identity: lambda dtype, x: x,
    ps.Conj: lambda dtype, x: x,  # the conjugate of a real number (no complex dtype here)
    ps.Abs: _abs,
    ps.Sgn: _sgn,
    ps.Sqr: lambda dtype, x: f"({x} * {x})",
    ps.Maximum: lambda dtype, x, y: f"OPG_MAX({x}, {y})",
    ps.Minimum: lambda dtype, x, y: f"OPG_MIN({x}, {y})",
    ps.Clip: lambda dtype, x, lo, hi: f"OPG_MIN(OPG_MAX({x}, {lo}), {hi})",
    px.Inv: lambda dtype, x: f"(1 / {x})" if dtype in FLOAT_DTYPES else None,
    # comparisons and logic (bool results)
    ps.GT: _infix(">"),
    ps.LT: _infix("<"),
    ps.GE: _infix(">="),
    ps.LE: _infix("<="),
    ps.EQ: _infix("=="),
    ps.NEQ: _infix("!="),
    ps.AND: _ints("&"),
    ps.OR: _ints("|"),
    ps.XOR: _ints("^"),
    ps.Invert: _invert,
    ps.IsNan: _float_test("isnan"),
    ps.IsInf: _float_test("isinf"),
    # selection and casts (args are already in the output dtype)
    ps.Switch: lambda dtype, cond, x, y: f"({cond} ? {x} : {y})",
    ps.Second: lambda dtype, x, y: y,
    ps.Cast: lambda dtype, x: x,
    # transcendental (vectorised through libmvec where glibc has a vector variant)
    ps.Exp: _math("exp"),
    ps.Exp2: _math("exp2"),
    ps.Expm1: _math("expm1"),
    ps.Log: _math("log"),
    ps.Log2: _math("log2"),
    ps.Log10: _math("log10"),
    ps.Log1p: _math("log1p"),
    ps.Sqrt: _math("sqrt"),
    ps.Sin: _math("sin"),
    ps.Cos: _math("cos"),
    ps.Tan: _math("tan"),
    ps.ArcSin: _math("asin"),
    ps.ArcCos: _math("acos"),
    ps.ArcTan: _math("atan"),
    ps.ArcTan2: _math("atan2"),
    ps.Sinh: _math("sinh"),
    ps.Cosh: _math("cosh"),
    ps.Tanh: _math("tanh"),
    ps.ArcSinh: _math("asinh"),
    ps.ArcCosh: _math("acosh"),
    ps.ArcTanh: _math("atanh"),
    ps.Erf: _math("erf"),
    ps.Erfc: _math("erfc"),
    ps.Sigmoid: _sigmoid,
    ps.Softplus: _softplus,
    # special functions: SciPy's own C code, bound from scipy.special.cython_special when
    # the module loads (kernels/special.py), so the results are perform's bit for bit.
    # tri_gamma and poly_gamma_2 have none (SciPy exports no Hurwitz zeta): they run perform.
    ps.Gamma: sf.scipy_code("gamma"),
    ps.GammaLn: sf.scipy_code("gammaln"),
    ps.Psi: sf.nan_passthrough_float32(sf.scipy_code("psi")),
    ps.Erfinv: sf.erfinv,
    psp.Erfcinv: sf.scipy_code("erfcinv"),
    psp.Erfcx: sf.scipy_code("erfcx"),
    psp.I0: sf.scipy_code("i0"),
    psp.I1: sf.scipy_code("i1"),
    psp.J0: sf.scipy_code("j0"),
    psp.J1: sf.scipy_code("j1"),
    psp.Iv: sf.scipy_code("iv", 2),
    psp.Jv: sf.scipy_code("jv", 2),
    psp.Chi2SF: sf.chi2sf,
    # tensor.xlogx, sandbox.softsign (Theano had C for them)
    XlogX: lambda dtype, x: _xlogy0(dtype, x, x),
    XlogY0: _xlogy0,
    ScalarSoftsign: _softsign,
    px.Deg2Rad: _scaled(0.017453292519943295),
    px.Rad2Deg: _scaled(57.29577951308232),
    # rounding
    ps.Floor: _floats_else_identity("floor"),
    ps.Ceil: _floats_else_identity("ceil"),
    ps.Trunc: _floats_else_identity("trunc"),
    ps.RoundHalfToEven: _floats_else_identity("rint"),
    px.RoundHalfAwayFromZero: _round_half_away,
}


def lookup(op: ps.ScalarOp, table: dict[type, ScalarCode] | None = None) -> ScalarCode | None:
    """The entry for ``op``'s class (nearest along its MRO below ScalarOp), or None."""
    table = code_for_op if table is None else table
    for cls in type(op).__mro__:
        if cls is ps.ScalarOp:
            return None
        entry = table.get(cls)
        if entry is not None:
            return entry
    return None
