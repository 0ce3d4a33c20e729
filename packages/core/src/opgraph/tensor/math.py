"""Elementwise math on tensors (Theano's ``tensor.basic`` math functions), ``cast`` and ``sum``.

Each elementwise function is an ``Elemwise`` over a scalar op, named as Theano names it
(``Elemwise{add,no_inplace}``), with an in-place twin (``add_inplace``) for the in-place
rewrite. The module doubles as the math namespace that scalar-op gradients are written
against, so it exposes the same function names as ``opgraph.scalar.basic``; it registers
itself as such with :mod:`opgraph.tensor.elemwise`. The other reductions, the products,
the cumulative ops and the statistics live in modules above this one (``reduction``,
``dot``, ``cumulative``, ``statistics``); ``opgraph.tensor`` gathers them all.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

import opgraph.scalar.basic as ps
import opgraph.scalar.extra as px
import opgraph.scalar.special as pspecial
from opgraph.configdefaults import config
from opgraph.graph.basic import Constant, Variable
from opgraph.printing.pprint import (
    FunctionPrinter,
    IgnorePrinter,
    OperatorPrinter,
    PatternPrinter,
    pprint,
)
from opgraph.scalar.type import discrete_dtypes, get_scalar_type
from opgraph.tensor import elemwise as _elemwise
from opgraph.tensor.basic import as_tensor_variable, constant, patternbroadcast
from opgraph.tensor.elemwise import CAReduce, CAReduceDtype, DimShuffle, Elemwise, Sum

__all__ = [  # noqa: RUF022 (grouped by topic)
    # elementwise arithmetic and comparisons
    "add",
    "sub",
    "mul",
    "true_div",
    "int_div",
    "floor_div",
    "mod",
    "pow",
    "neg",
    "inv",
    "abs_",
    "abs",
    "sgn",
    "sqr",
    "square",
    "sqrt",
    "maximum",
    "minimum",
    "largest",
    "smallest",
    "clip",
    "gt",
    "lt",
    "ge",
    "le",
    "eq",
    "neq",
    "isclose",
    "isnan",
    "isinf",
    "isnan_",
    "isinf_",
    # logical and bitwise
    "and_",
    "or_",
    "xor",
    "invert",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_not",
    # exponentials, logarithms, trigonometry
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "sin",
    "cos",
    "tan",
    "arcsin",
    "arccos",
    "arctan",
    "arctan2",
    "sinh",
    "cosh",
    "tanh",
    "arcsinh",
    "arccosh",
    "arctanh",
    "deg2rad",
    "rad2deg",
    # rounding
    "floor",
    "ceil",
    "trunc",
    "round",
    "iround",
    "round_half_to_even",
    "round_half_away_from_zero",
    # special functions
    "erf",
    "erfc",
    "erfinv",
    "gamma",
    "gammaln",
    "psi",
    "tri_gamma",
    "i0",
    "i1",
    "iv",
    "j0",
    "j1",
    "jv",
    "erfcx",
    "erfcinv",
    "chi2sf",
    "sigmoid",
    "softplus",
    # complex numbers
    "real",
    "imag",
    "angle",
    "conj",
    "complex",
    "complex_from_polar",
    # selection, filling, casting
    "switch",
    "where",
    "second",
    "fill",
    "identity",
    "tensor_copy",
    "cast",
    "zeros_like",
    "zeros_like_grad",
    "sum_to_broadcastable",
    "ones_like",
    "sum",
    # helpers
    "CAReduce",
    "CAReduceDtype",
    "Sum",
    "apply_scalar_op",
    "is_discrete",
]

#: scalar op -> its no_inplace Elemwise (lets gradients map scalar ops back to tensor ops).
_elemwise_of: dict[ps.ScalarOp, Elemwise] = {}


def _scal_elemwise(scalar_op: ps.ScalarOp, name: str, doc: str) -> tuple[Elemwise, Elemwise]:
    """Return the Elemwise op applying ``scalar_op`` (Theano's ``tensor.<name>``) and its
    in-place twin. The ops are called like functions: ``add(x, y)``, ``add_inplace(x, y)``."""
    op = Elemwise(scalar_op, name=f"Elemwise{{{name},no_inplace}}")
    inplace_op = Elemwise(scalar_op, {0: 0}, name=f"Elemwise{{{name},inplace}}")
    op.__doc__ = doc
    inplace_op.__doc__ = f"In-place version of ``{name}`` (overwrites its first input)."
    op.function_name = name
    inplace_op.function_name = f"{name}_inplace"
    _elemwise_of[scalar_op] = op
    return op, inplace_op


def apply_scalar_op(op: ps.ScalarOp, *args: Any) -> Any:
    """Apply a scalar op elementwise to tensors (used to rebuild Composite graphs)."""
    el = _elemwise_of.get(op)
    if el is None:
        el = Elemwise(op)
    return el(*args)


add, add_inplace = _scal_elemwise(ps.add, "add", "Elementwise sum of the inputs.")
sub, sub_inplace = _scal_elemwise(ps.sub, "sub", "Elementwise ``a - b``.")
mul, mul_inplace = _scal_elemwise(ps.mul, "mul", "Elementwise product of the inputs.")
true_div, true_div_inplace = _scal_elemwise(ps.true_div, "true_div", "Elementwise ``a / b``.")
int_div, int_div_inplace = _scal_elemwise(ps.int_div, "int_div", "Elementwise integer ``a // b``.")
mod, mod_inplace = _scal_elemwise(ps.mod, "mod", "Elementwise ``a % b``.")
pow, pow_inplace = _scal_elemwise(ps.pow, "pow", "Elementwise ``a ** b``.")
maximum, maximum_inplace = _scal_elemwise(ps.maximum, "maximum", "Elementwise maximum.")
minimum, minimum_inplace = _scal_elemwise(ps.minimum, "minimum", "Elementwise minimum.")
gt, gt_inplace = _scal_elemwise(ps.gt, "gt", "Elementwise ``a > b``.")
lt, lt_inplace = _scal_elemwise(ps.lt, "lt", "Elementwise ``a < b``.")
ge, ge_inplace = _scal_elemwise(ps.ge, "ge", "Elementwise ``a >= b``.")
le, le_inplace = _scal_elemwise(ps.le, "le", "Elementwise ``a <= b``.")
eq, eq_inplace = _scal_elemwise(ps.eq, "eq", "Elementwise ``a == b``.")
neq, neq_inplace = _scal_elemwise(ps.neq, "neq", "Elementwise ``a != b``.")
and_, and_inplace = _scal_elemwise(ps.and_, "and_", "Elementwise bitwise/logical and.")
or_, or_inplace = _scal_elemwise(ps.or_, "or_", "Elementwise bitwise/logical or.")
xor, xor_inplace = _scal_elemwise(ps.xor, "xor", "Elementwise bitwise/logical xor.")
invert, invert_inplace = _scal_elemwise(ps.invert, "invert", "Elementwise bitwise not.")
arctan2, arctan2_inplace = _scal_elemwise(ps.arctan2, "arctan2", "Elementwise ``arctan2(a, b)``.")
neg, neg_inplace = _scal_elemwise(ps.neg, "neg", "Elementwise ``-x``.")
abs_, abs__inplace = _scal_elemwise(ps.abs_, "abs_", "Elementwise absolute value.")
sgn, sgn_inplace = _scal_elemwise(ps.sgn, "sgn", "Elementwise sign (-1, 0, 1).")
exp, exp_inplace = _scal_elemwise(ps.exp, "exp", "Elementwise ``e ** x``.")
exp2, exp2_inplace = _scal_elemwise(ps.exp2, "exp2", "Elementwise ``2 ** x``.")
expm1, expm1_inplace = _scal_elemwise(
    ps.expm1, "expm1", "Elementwise ``exp(x) - 1``, accurate near 0."
)
log, log_inplace = _scal_elemwise(ps.log, "log", "Elementwise natural logarithm.")
log2, log2_inplace = _scal_elemwise(ps.log2, "log2", "Elementwise base-2 logarithm.")
log10, log10_inplace = _scal_elemwise(ps.log10, "log10", "Elementwise base-10 logarithm.")
log1p, log1p_inplace = _scal_elemwise(
    ps.log1p, "log1p", "Elementwise ``log(1 + x)``, accurate near 0."
)
sqrt, sqrt_inplace = _scal_elemwise(ps.sqrt, "sqrt", "Elementwise square root.")
sqr, sqr_inplace = _scal_elemwise(ps.sqr, "sqr", "Elementwise square.")
sin, sin_inplace = _scal_elemwise(ps.sin, "sin", "Elementwise sine.")
cos, cos_inplace = _scal_elemwise(ps.cos, "cos", "Elementwise cosine.")
tan, tan_inplace = _scal_elemwise(ps.tan, "tan", "Elementwise tangent.")
arcsin, arcsin_inplace = _scal_elemwise(ps.arcsin, "arcsin", "Elementwise inverse sine.")
arccos, arccos_inplace = _scal_elemwise(ps.arccos, "arccos", "Elementwise inverse cosine.")
arctan, arctan_inplace = _scal_elemwise(ps.arctan, "arctan", "Elementwise inverse tangent.")
sinh, sinh_inplace = _scal_elemwise(ps.sinh, "sinh", "Elementwise hyperbolic sine.")
cosh, cosh_inplace = _scal_elemwise(ps.cosh, "cosh", "Elementwise hyperbolic cosine.")
tanh, tanh_inplace = _scal_elemwise(ps.tanh, "tanh", "Elementwise hyperbolic tangent.")
arcsinh, arcsinh_inplace = _scal_elemwise(
    ps.arcsinh, "arcsinh", "Elementwise inverse hyperbolic sine."
)
arccosh, arccosh_inplace = _scal_elemwise(
    ps.arccosh, "arccosh", "Elementwise inverse hyperbolic cosine."
)
arctanh, arctanh_inplace = _scal_elemwise(
    ps.arctanh, "arctanh", "Elementwise inverse hyperbolic tangent."
)
floor, floor_inplace = _scal_elemwise(ps.floor, "floor", "Elementwise floor.")
ceil, ceil_inplace = _scal_elemwise(ps.ceil, "ceil", "Elementwise ceiling.")
trunc, trunc_inplace = _scal_elemwise(ps.trunc, "trunc", "Elementwise truncation toward 0.")
round_half_to_even, round_half_to_even_inplace = _scal_elemwise(
    ps.round_half_to_even, "round_half_to_even", "Elementwise rounding, halves to even."
)
erf, erf_inplace = _scal_elemwise(ps.erf, "erf", "Elementwise error function.")
erfc, erfc_inplace = _scal_elemwise(ps.erfc, "erfc", "Elementwise complementary error function.")
erfinv, erfinv_inplace = _scal_elemwise(ps.erfinv, "erfinv", "Elementwise inverse error function.")
gamma, gamma_inplace = _scal_elemwise(ps.gamma, "gamma", "Elementwise gamma function.")
gammaln, gammaln_inplace = _scal_elemwise(ps.gammaln, "gammaln", "Elementwise log-gamma.")
psi, psi_inplace = _scal_elemwise(ps.psi, "psi", "Elementwise digamma.")
tri_gamma, tri_gamma_inplace = _scal_elemwise(
    ps.tri_gamma, "tri_gamma", "Elementwise trigamma (derivative of digamma)."
)
sigmoid, sigmoid_inplace = _scal_elemwise(
    ps.sigmoid, "sigmoid", "Elementwise ``1 / (1 + exp(-x))``."
)
softplus, softplus_inplace = _scal_elemwise(
    ps.softplus, "softplus", "Elementwise ``log(1 + exp(x))``."
)
# Theano made these two in tensor.nnet.sigm, named plainly: ``sigmoid [id B] ''   0``.
for _op in (sigmoid, sigmoid_inplace, softplus, softplus_inplace):
    _op.name = _op.function_name
isnan, isnan_inplace = _scal_elemwise(ps.isnan, "isnan", "Elementwise NaN test.")
isinf, isinf_inplace = _scal_elemwise(ps.isinf, "isinf", "Elementwise infinity test.")
real, real_inplace = _scal_elemwise(ps.real, "real", "Real part.")
imag, imag_inplace = _scal_elemwise(ps.imag, "imag", "Imaginary part.")
angle, angle_inplace = _scal_elemwise(ps.angle, "angle", "Complex argument.")
conj, conj_inplace = _scal_elemwise(ps.conj, "conj", "Complex conjugate.")
switch, switch_inplace = _scal_elemwise(ps.switch, "switch", "``ift`` where ``cond`` else ``iff``.")
clip, clip_inplace = _scal_elemwise(ps.clip, "clip", "Clip ``x`` to ``[lo, hi]``.")
second, second_inplace = _scal_elemwise(ps.second, "second", "``y`` broadcast to ``x``'s shape.")
identity, identity_inplace = _scal_elemwise(
    ps.identity, "identity", "Elementwise identity (a copy)."
)

round_half_away_from_zero, round_half_away_from_zero_inplace = _scal_elemwise(
    px.round_half_away_from_zero,
    "round_half_away_from_zero",
    "Elementwise rounding, halves away from zero (2.5 -> 3, -2.5 -> -3).",
)
deg2rad, deg2rad_inplace = _scal_elemwise(px.deg2rad, "deg2rad", "Degrees to radians.")
rad2deg, rad2deg_inplace = _scal_elemwise(px.rad2deg, "rad2deg", "Radians to degrees.")
inv, inv_inplace = _scal_elemwise(px.inv, "inv", "Elementwise reciprocal ``1.0 / x``.")
i0, i0_inplace = _scal_elemwise(
    pspecial.i0, "i0", "Modified Bessel function of the first kind of order 0."
)
i1, i1_inplace = _scal_elemwise(
    pspecial.i1, "i1", "Modified Bessel function of the first kind of order 1."
)
iv, iv_inplace = _scal_elemwise(
    pspecial.iv, "iv", "Modified Bessel function of the first kind of real order v: iv(v, x)."
)
j0, j0_inplace = _scal_elemwise(pspecial.j0, "j0", "Bessel function of the first kind of order 0.")
j1, j1_inplace = _scal_elemwise(pspecial.j1, "j1", "Bessel function of the first kind of order 1.")
jv, jv_inplace = _scal_elemwise(
    pspecial.jv, "jv", "Bessel function of the first kind of real order v: jv(v, x)."
)
erfcx, erfcx_inplace = _scal_elemwise(
    pspecial.erfcx, "erfcx", "Scaled complementary error function ``exp(x**2) * erfc(x)``."
)
erfcinv, erfcinv_inplace = _scal_elemwise(
    pspecial.erfcinv, "erfcinv", "Inverse complementary error function."
)
chi2sf, chi2sf_inplace = _scal_elemwise(
    pspecial.chi2sf, "chi2sf", "Chi-square survival function ``chi2sf(x, k)`` (float64)."
)
complex, complex_inplace = _scal_elemwise(
    px.complex, "complex", "The complex tensor with real part ``real`` and imaginary ``imag``."
)
complex_from_polar, complex_from_polar_inplace = _scal_elemwise(
    px.complex_from_polar, "complex_from_polar", "``abs * exp(1j * angle)`` (abs >= 0)."
)

# Theano's and NumPy's other names for the same functions.
# ``isnan_``/``isinf_``: Theano 1.0's names for the Elemwise itself (its ``isnan`` skips the
# op for integer inputs; here the op answers False for them, the same values).
isnan_ = isnan
isinf_ = isinf
fill = second
floor_div = int_div
abs = abs_
where = switch
square = sqr
tensor_copy = identity
bitwise_and = and_
bitwise_or = or_
bitwise_xor = xor
bitwise_not = invert


def round(a: Any, mode: str | None = None) -> Variable:
    """Round to the nearest integer; ``mode`` is 'half_to_even' (default) or
    'half_away_from_zero'."""
    if mode is None or mode == "half_to_even":
        return round_half_to_even(a)
    if mode == "half_away_from_zero":
        return round_half_away_from_zero(a)
    raise ValueError(f"round: mode must be 'half_to_even' or 'half_away_from_zero', got {mode!r}")


def iround(a: Any, mode: str | None = None) -> Variable:
    """``round(a, mode)`` cast to int64."""
    return cast(round(a, mode), "int64")


def largest(*args: Any) -> Variable:
    """The elementwise largest of the arguments (Python's ``max`` over tensors)."""
    if not args:
        raise TypeError("largest needs at least one argument")
    if len(args) == 1:
        return as_tensor_variable(args[0])
    if len(args) == 2:
        a, b = args
        return switch(gt(a, b), a, b)
    out = args[0]
    for b in args[1:]:
        out = maximum(out, b)
    return out


def smallest(*args: Any) -> Variable:
    """The elementwise smallest of the arguments (Python's ``min`` over tensors)."""
    if not args:
        raise TypeError("smallest needs at least one argument")
    if len(args) == 1:
        return as_tensor_variable(args[0])
    if len(args) == 2:
        a, b = args
        return switch(lt(a, b), a, b)
    out = args[0]
    for b in args[1:]:
        out = minimum(out, b)
    return out


def isclose(
    a: Any, b: Any, rtol: float = 1.0e-5, atol: float = 1.0e-8, equal_nan: bool = False
) -> Variable:
    """Elementwise ``|a - b| <= atol + rtol * |b|`` with NumPy's handling of inf and NaN."""
    a, b = as_tensor_variable(a), as_tensor_variable(b)
    close = le(abs_(sub(a, b)), add(atol, mul(rtol, abs_(b))))
    a_nan, b_nan = isnan(a), isnan(b)
    a_inf, b_inf = isinf(a), isinf(b)
    finite_close = and_(close, invert(or_(or_(a_nan, b_nan), or_(a_inf, b_inf))))
    same_inf = and_(and_(a_inf, b_inf), eq(sgn(a), sgn(b)))
    out = or_(finite_close, same_inf)
    if equal_nan:
        out = or_(out, and_(a_nan, b_nan))
    return out


def cast(x: Any, dtype: str) -> Variable:
    """Cast ``x`` to ``dtype`` (``'floatX'`` allowed); identity if it already has it."""
    x = as_tensor_variable(x)
    if dtype == "floatX":
        dtype = config.floatX
    dtype = str(np.dtype(dtype))
    if x.type.dtype == dtype:
        return x
    if x.type.dtype.startswith("complex") and not dtype.startswith("complex"):
        raise TypeError(
            f"casting {x} from {x.type.dtype} to {dtype} is ambiguous. HINT: take real(), "
            "imag(), angle() or abs() first."
        )
    scalar_op = ps.Cast(get_scalar_type(dtype), name=f"Cast{{{dtype}}}")
    op = _cast_ops.get(dtype)
    if op is None:
        op = _cast_ops[dtype] = Elemwise(scalar_op)
        _elemwise_of[scalar_op] = op
    return op(x)


_cast_ops: dict[str, Elemwise] = {}


def zeros_like(x: Any, dtype: str | None = None) -> Variable:
    """Zeros of ``x``'s shape and (or ``dtype``'s) dtype."""
    x = as_tensor_variable(x)
    return fill(x, constant(0, dtype=dtype or x.type.dtype))


def zeros_like_grad(x: Any) -> Variable:
    """A zero gradient for ``x``: zeros of its dtype if that is float or complex, else of
    ``floatX`` (Theano's rule for the gradient of an integer input)."""
    x = as_tensor_variable(x)
    dtype = x.type.dtype if x.type.dtype.startswith(("float", "complex")) else config.floatX
    return zeros_like(x, dtype=dtype)


def ones_like(x: Any, dtype: str | None = None) -> Variable:
    """Ones of ``x``'s shape and (or ``dtype``'s) dtype."""
    x = as_tensor_variable(x)
    return fill(x, constant(1, dtype=dtype or x.type.dtype))


def _normalize_axis(axis: Any, ndim: int) -> tuple[int, ...] | None:
    """``axis`` (None, an int, a sequence or a constant) as sorted non-negative ints."""
    if axis is None:
        return None
    if isinstance(axis, Constant):
        axis = axis.data
    if isinstance(axis, Variable):
        raise TypeError(
            f"axis must be known when the graph is built (an int, a list of ints or a constant), "
            f"got the symbolic variable {axis}"
        )
    if isinstance(axis, np.ndarray) and axis.ndim == 0:
        axis = int(axis)
    axes = (axis,) if isinstance(axis, int) or hasattr(axis, "__index__") else tuple(axis)
    out = []
    for a in axes:
        if isinstance(a, bool) or not (isinstance(a, int) or hasattr(a, "__index__")):
            raise TypeError(f"axis entries must be ints, got {a!r} in {axis!r}")
        a = int(a)
        if not -ndim <= a < ndim:
            raise ValueError(f"axis {a} is out of range for a tensor with {ndim} dimension(s)")
        out.append(a % ndim)
    return tuple(sorted(set(out)))


def _keepdims(x: Variable, out: Variable, axes: tuple[int, ...] | None) -> Variable:
    axes = tuple(range(x.type.ndim)) if axes is None else axes
    pattern: list[Any] = []
    k = 0
    for i in range(x.type.ndim):
        if i in axes:
            pattern.append("x")
        else:
            pattern.append(k)
            k += 1
    return DimShuffle(out.type.broadcastable, pattern)(out)


def sum(
    input: Any,
    axis: Any = None,
    dtype: str | None = None,
    keepdims: bool = False,
    acc_dtype: str | None = None,
) -> Variable:
    """Sum of ``input`` over ``axis`` (all axes when None), accumulating in ``acc_dtype``."""
    x = as_tensor_variable(input)
    axes = _normalize_axis(axis, x.type.ndim)
    out = Sum(axis=axes, dtype=dtype, acc_dtype=acc_dtype)(x)
    return _keepdims(x, out, axes) if keepdims else out


def sum_to_broadcastable(g: Any, broadcastable: Sequence[bool]) -> Variable:
    """``g`` summed over the dimensions that ``broadcastable`` marks as length 1 and ``g``
    does not, with exactly that pattern: how a gradient returns to a broadcast input."""
    g = as_tensor_variable(g)
    axes = [i for i, (b, gb) in enumerate(zip(broadcastable, g.type.broadcastable)) if b and not gb]
    if axes:
        g = sum(g, axis=axes, keepdims=True)
    if g.type.broadcastable != tuple(broadcastable):
        g = patternbroadcast(g, broadcastable)
    return g


def is_discrete(x: Variable) -> bool:
    """True for integer and bool tensors."""
    return x.type.dtype in discrete_dtypes


# ----------------------------------------------------------------------------------------
# pprint notation (Theano's registrations)


class _DimShufflePrinter:
    """Hide broadcasting DimShuffles (``x`` for ``InplaceDimShuffle{x,0}(x)``), ``x.T``."""

    def process(self, output: Variable, pstate: Any) -> str:
        op = output.owner.op
        (inp,) = output.owner.inputs
        order = [o for o in op.new_order if o != "x"]
        inner = pstate.pprinter.process(inp, pstate)
        if order == list(range(len(order))):
            return inner
        if order == list(range(len(order)))[::-1]:
            return f"{inner}.T"
        return f"{op}({inner})"


class _ScalarOpIs:
    """pprint condition: an Elemwise (in place or not) over a given scalar op."""

    def __init__(self, scalar_op: ps.ScalarOp) -> None:
        self.scalar_op = scalar_op

    def __call__(self, pstate: Any, r: Variable) -> bool:
        op = r.owner.op if r.owner is not None else None
        return isinstance(op, Elemwise) and op.scalar_op == self.scalar_op


def _register_printers() -> None:
    operators = {
        add: OperatorPrinter("+", -2, "either"),
        mul: OperatorPrinter("*", -1, "either"),
        sub: OperatorPrinter("-", -2, "left"),
        neg: OperatorPrinter("-", 0, "either"),
        true_div: OperatorPrinter("/", -1, "left"),
        int_div: OperatorPrinter("//", -1, "left"),
        mod: OperatorPrinter("%", -1, "left"),
        pow: OperatorPrinter("**", 1, "right"),
    }
    pprint.assign(DimShuffle, _DimShufflePrinter())
    pprint.assign(Sum, FunctionPrinter("sum"))
    pprint.assign(
        lambda pstate, r: (
            r.owner is not None
            and isinstance(r.owner.op, Elemwise)
            and isinstance(r.owner.op.scalar_op, ps.Cast)
        ),
        IgnorePrinter(),
    )
    for op in _elemwise_of.values():
        if op not in operators:
            name = "fill" if op is second else getattr(op, "function_name", str(op.scalar_op))
            pprint.assign(_ScalarOpIs(op.scalar_op), FunctionPrinter(name))
    for op, printer in operators.items():
        pprint.assign(_ScalarOpIs(op.scalar_op), printer)
    pprint.assign(_ScalarOpIs(ps.abs_), PatternPrinter(("|%(0)s|", -1000)))


_register_printers()
_elemwise.set_math_namespace(sys.modules[__name__])
