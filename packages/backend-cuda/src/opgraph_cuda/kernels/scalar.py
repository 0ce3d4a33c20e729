"""Scalar op -> CUDA C++ expression, and fused Composite graphs as one device function.

``CUDA_SCALAR`` maps a scalar op class to an entry ``entry(dt, *args) -> str | None``:
``dt`` is the dtype the op computes in and ``args`` are :class:`Operand` s already converted
to it (their ``str`` is the C text; ``.value`` holds a literal's number, so ``x ** 10`` can
become multiplications). None means "no CUDA code for this dtype": the node stays on the
CPU. Math functions are called by their plain C names: CUDA and C++ overload them for
float and double alike (``exp(x)`` is ``expf`` on a float), which keeps the table small.
Results follow NumPy, NaN and inf included; the helpers whose C operator differs
(floor division, modulo, maximum/minimum, sign) are in ``include/opgraph_cuda_prelude.cuh``.

float16 is storage only (Theano's gpuarray rule): an element function loads a float16
input once with ``__half2float``, computes everything in float32 (every float16 value
inside a fused graph is a float32 temporary; ``math_dtype``), and rounds each float16
output once with ``__float2half_rn``. An explicit ``Cast`` to float16 inside a graph rounds
there (``opg_round_half``), since the graph asks for it. :func:`convert` writes these
conversions, so every kernel generator (copies, reductions) spells them the same way.

:func:`element_function` turns a scalar op, or a fused ``Composite`` (inlined, node by node,
constants as literals), into ``__device__ void opg_elem(inputs..., outputs&...)``: straight
line code that every elementwise kernel of the node calls per element.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import opgraph.scalar.basic as sb
from opgraph.graph.basic import Constant, Variable
from opgraph.scalar import extra as sx
from opgraph.scalar.type import upcast
from opgraph.tensor.xlogx import XlogX, XlogY0

__all__ = [
    "CTYPES",
    "CUDA_SCALAR",
    "FLOATS",
    "Operand",
    "c_literal",
    "convert",
    "element_function",
    "lookup",
    "math_dtype",
    "wrap_params",
]

#: NumPy dtype -> the prelude's C type.
CTYPES: dict[str, str] = {
    dtype: f"opg_{dtype}"
    for dtype in (
        *("bool", "int8", "int16", "int32", "int64"),
        *("uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64"),
    )
}
#: Float dtypes. The scalar table never sees float16: it computes in ``math_dtype``.
FLOATS = ("float16", "float32", "float64")
SIGNED = ("int8", "int16", "int32", "int64")


@dataclass(frozen=True)
class Operand:
    """A C expression of a known dtype; ``value`` is its number when it is a literal."""

    text: str
    dtype: str
    value: Any = None

    def __str__(self) -> str:
        return self.text


ScalarCode = Callable[..., "str | None"]


def math_dtype(dtype: str) -> str:
    """The dtype kernels compute a ``dtype`` value in: float32 for float16, else itself."""
    return "float32" if dtype == "float16" else dtype


def c_literal(value: Any, dtype: str) -> str:
    """The C literal of ``value`` in ``dtype`` (inf, NaN and INT64_MIN included); a float16
    one is its float32 literal rounded by ``__float2half_rn`` (exact: it is a half)."""
    if dtype == "float16":
        with np.errstate(all="ignore"):
            half = float(np.float16(value))
        return f"__float2half_rn({c_literal(half, 'float32')})"
    if dtype == "bool":
        return "((opg_bool)1)" if bool(value) else "((opg_bool)0)"
    ctype = CTYPES[dtype]
    if dtype in FLOATS:
        v = float(np.dtype(dtype).type(value))
        if math.isnan(v):
            return f"(({ctype})NAN)"
        if math.isinf(v):
            return f"(({ctype})INFINITY)" if v > 0 else f"(-({ctype})INFINITY)"
        return repr(v) + ("f" if dtype == "float32" else "")
    v = int(value)
    if dtype == "int64" and v == -(2**63):
        return "(-9223372036854775807LL - 1)"
    suffix = "ULL" if dtype.startswith("uint") else "LL"
    return f"(({ctype}){v}{suffix})"


def convert(x: Operand, dtype: str) -> Operand:
    """``x`` as a value of ``dtype``: C casts, except that anything becomes a bool by
    ``!= 0`` (NumPy's rule; a C cast to unsigned char would turn 0.5 into 0), and float16
    goes through float32: ``__half2float`` (exact) to load, ``__float2half_rn`` (round to
    nearest even) to store; ``__double2half`` rounds a float64 once."""
    if x.dtype == dtype:
        return x
    if x.value is not None:
        with np.errstate(all="ignore"):
            value = np.asarray(x.value).astype(dtype).item()
        return Operand(c_literal(value, dtype), dtype, value)
    if x.dtype == "float16":
        return convert(Operand(f"__half2float({x.text})", "float32"), dtype)
    if dtype == "float16":
        if x.dtype == "float64":
            return Operand(f"__double2half({x.text})", dtype)
        return Operand(f"__float2half_rn({convert(x, 'float32').text})", dtype)
    if dtype == "bool":
        return Operand(f"(({x.text}) != 0)", dtype)
    return Operand(f"(({CTYPES[dtype]})({x.text}))", dtype)


# ---- table entries ------------------------------------------------------------------------


def _fn(name: str) -> ScalarCode:
    """A C math function of float arguments (no CUDA code for integer compute dtypes)."""
    return lambda dt, *a: f"{name}({', '.join(map(str, a))})" if dt in FLOATS else None


def _infix(symbol: str) -> ScalarCode:
    return lambda dt, *a: "(" + f" {symbol} ".join(map(str, a)) + ")"


def _bitwise(symbol: str) -> ScalarCode:
    """A bitwise operator: integers and bools only (NumPy refuses floats)."""
    return lambda dt, x, y: None if dt in FLOATS else f"({x} {symbol} {y})"


def _rounding(name: str) -> ScalarCode:
    """A rounding function on floats; integers are returned unchanged (NumPy's result)."""
    return lambda dt, x: f"{name}({x})" if dt in FLOATS else x.text


def _float_only(template: str) -> ScalarCode:
    """An expression on float arguments named ``x``, ``y`` in ``template``."""

    def code(dt: str, *a: Operand) -> str | None:
        if dt not in FLOATS:
            return None
        return template.format(**dict(zip("xy", map(str, a), strict=False)), T=CTYPES[dt])

    return code


def _abs(dt: str, x: Operand) -> str:
    if dt in FLOATS:
        return f"fabs({x})"
    return f"({x} < 0 ? -{x} : {x})" if dt in SIGNED else x.text


def _sgn(dt: str, x: Operand) -> str:
    if dt in FLOATS or dt in SIGNED:
        return f"opg_sign({x})"
    return f"({x} > 0)"


def _int_exponent(y: Operand) -> int | None:
    """The exponent as an int when it is a literal whole number usable by ``opg_powu``."""
    if y.value is None:
        return None
    v = float(y.value)
    if not math.isfinite(v) or v != int(v) or not -1 <= v <= 64:
        return None
    return int(v)


def _pow(dt: str, x: Operand, y: Operand) -> str | None:
    """``x ** y``: a constant small whole exponent is unrolled into multiplications
    (``x ** 10`` costs four), ``x ** 0.5`` is ``sqrt`` (as NumPy computes it); floats
    otherwise call ``pow``; an integer base with a run-time exponent stays on the CPU
    (NumPy raises for negative exponents)."""
    n = _int_exponent(y)
    if n is not None and n >= 0:
        return f"opg_powu<{n}>({x})"
    if dt not in FLOATS:
        return None
    if n == -1:
        return f"({CTYPES[dt]}(1) / {x})"
    if y.value is not None and float(y.value) == 0.5:
        return f"sqrt({x})"  # NumPy's fast path for ** 0.5 (sqrt(-0.0) is -0.0)
    return f"pow({x}, {y})"


def _isfp(name: str) -> ScalarCode:
    """isnan / isinf: always false on integers."""
    return lambda dt, x: f"{name}({x})" if dt in FLOATS else "0"


def _invert(dt: str, x: Operand) -> str | None:
    if dt in FLOATS:
        return None
    return f"(!{x})" if dt == "bool" else f"(~{x})"


def _scale(factor: float) -> ScalarCode:
    def code(dt: str, x: Operand) -> str | None:
        return f"({x} * {c_literal(factor, dt)})" if dt in FLOATS else None

    return code


def _divmod_helper(name: str) -> ScalarCode:
    """``opg_floordiv`` / ``opg_mod`` of the prelude (overloaded per type); none for bool."""
    return lambda dt, x, y: None if dt == "bool" else f"{name}({x}, {y})"


_SOFTPLUS = "({x} > 0 ? {x} + log1p(exp(-{x})) : log1p(exp({x})))"
_XLOGY0 = "({x} == 0 ? ({T})0 : {x} * log({y}))"


def _scalar_table() -> dict[type, ScalarCode]:
    table: dict[type, ScalarCode] = {
        # arithmetic
        sb.Add: _infix("+"),
        sb.Mul: _infix("*"),
        sb.Sub: _infix("-"),
        sb.TrueDiv: _float_only("({x} / {y})"),
        sb.IntDiv: _divmod_helper("opg_floordiv"),
        sb.Mod: _divmod_helper("opg_mod"),
        sb.Pow: _pow,
        sb.Neg: lambda dt, x: f"(-{x})",
        sb.Identity: lambda dt, x: x.text,
        sb.Abs: _abs,
        sb.Sgn: _sgn,
        sb.Sqr: lambda dt, x: f"({x} * {x})",
        sb.Maximum: lambda dt, x, y: f"OPG_MAX({x}, {y})",
        sb.Minimum: lambda dt, x, y: f"OPG_MIN({x}, {y})",
        sb.Clip: lambda dt, x, lo, hi: f"OPG_MIN(OPG_MAX({x}, {lo}), {hi})",
        sx.Inv: _float_only("({T}(1) / {x})"),
        sx.MulWithoutZeros: lambda dt, x, y: f"({x} == 0 ? {y} : ({y} == 0 ? {x} : {x} * {y}))",
        # comparisons and logic
        sb.GT: _infix(">"),
        sb.LT: _infix("<"),
        sb.GE: _infix(">="),
        sb.LE: _infix("<="),
        sb.EQ: _infix("=="),
        sb.NEQ: _infix("!="),
        sb.AND: _bitwise("&"),
        sb.OR: _bitwise("|"),
        sb.XOR: _bitwise("^"),
        sb.Invert: _invert,
        sb.IsNan: _isfp("isnan"),
        sb.IsInf: _isfp("isinf"),
        # selection and conversion (arguments arrive converted to the output dtype)
        sb.Switch: lambda dt, c, x, y: f"({c} ? {x} : {y})",
        sb.Second: lambda dt, x, y: y.text,
        sb.Cast: lambda dt, x: x.text,
        sb.Conj: lambda dt, x: x.text,  # real dtypes only here
        sb.Real: lambda dt, x: x.text,
        # exponentials, logarithms, powers
        sb.Exp: _fn("exp"),
        sb.Exp2: _fn("exp2"),
        sb.Expm1: _fn("expm1"),
        sb.Log: _fn("log"),
        sb.Log2: _fn("log2"),
        sb.Log10: _fn("log10"),
        sb.Log1p: _fn("log1p"),
        sb.Sqrt: _fn("sqrt"),
        # trigonometric and hyperbolic
        sb.Sin: _fn("sin"),
        sb.Cos: _fn("cos"),
        sb.Tan: _fn("tan"),
        sb.ArcSin: _fn("asin"),
        sb.ArcCos: _fn("acos"),
        sb.ArcTan: _fn("atan"),
        sb.ArcTan2: _fn("atan2"),
        sb.Sinh: _fn("sinh"),
        sb.Cosh: _fn("cosh"),
        sb.Tanh: _fn("tanh"),
        sb.ArcSinh: _fn("asinh"),
        sb.ArcCosh: _fn("acosh"),
        sb.ArcTanh: _fn("atanh"),
        sx.Deg2Rad: _scale(math.pi / 180.0),
        sx.Rad2Deg: _scale(180.0 / math.pi),
        # special functions with a C library routine on both CUDA and the host
        sb.Erf: _fn("erf"),
        sb.Erfc: _fn("erfc"),
        sb.Gamma: _fn("tgamma"),
        sb.GammaLn: _fn("opg_gammaln"),
        sb.Sigmoid: _float_only("({T}(1) / ({T}(1) + exp(-{x})))"),
        sb.Softplus: _float_only(_SOFTPLUS),
        XlogX: lambda dt, x: _float_only(_XLOGY0)(dt, x, x),
        XlogY0: _float_only(_XLOGY0),
        # rounding
        sb.Floor: _rounding("floor"),
        sb.Ceil: _rounding("ceil"),
        sb.Trunc: _rounding("trunc"),
        sb.RoundHalfToEven: _rounding("rint"),
        sx.RoundHalfAwayFromZero: _rounding("round"),
    }
    try:
        from opgraph.sandbox.softsign import ScalarSoftsign
    except ImportError:  # pragma: no cover - the sandbox is part of core today
        return table
    table[ScalarSoftsign] = _float_only("({x} / ({T}(1) + fabs({x})))")
    return table


#: scalar op class -> ``entry(dt, *operands) -> C expression | None``.
CUDA_SCALAR: dict[type, ScalarCode] = _scalar_table()


def lookup(op: sb.ScalarOp, table: dict[type, ScalarCode] | None = None) -> ScalarCode | None:
    """The entry for ``op``'s class, the nearest one along its MRO; None when it has none."""
    table = CUDA_SCALAR if table is None else table
    for cls in type(op).__mro__:
        if cls is sb.ScalarOp:
            break
        if cls in table:
            return table[cls]
    return None


# ---- element functions --------------------------------------------------------------------


class _Body:
    """The statements of an element function: one typed temporary per scalar node."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def temp(self, dtype: str, text: str, comment: str) -> Operand:
        name = f"t{len(self.lines)}"
        note = comment.replace("*/", "* /")
        self.lines.append(f"const {CTYPES[dtype]} {name} = {text};  /* {note} */")
        return Operand(name, dtype)


#: Ops whose C result is already 0 or 1.
_ZERO_ONE = (sb.GT, sb.LT, sb.GE, sb.LE, sb.EQ, sb.NEQ, sb.IsNan, sb.IsInf)


def _compute_dtype(op: sb.ScalarOp, out: str, args: Sequence[Operand]) -> str:
    """The dtype ``op`` computes in: its output's, except that comparisons and tests with a
    bool result work in their inputs' common dtype (as NumPy compares)."""
    if out == "bool" and args and not isinstance(op, sb.Switch):
        return str(upcast(*(a.dtype for a in args)))
    return out


def _apply(body: _Body, op: sb.ScalarOp, args: list[Operand], out: str) -> Operand | None:
    """Emit one scalar op on ``args``; its result as a temporary of dtype ``out`` (of
    float32 for a float16 ``out``: rounded only when ``op`` is a cast)."""
    entry = lookup(op)
    if entry is None or out not in CTYPES:
        return None
    rounds = out == "float16" and isinstance(op, sb.Cast)
    out = math_dtype(out)
    if isinstance(op, sb.Switch):
        cond, *branches = args
        cd = out
        atoms = [cond, *(convert(a, cd) for a in branches)]
    else:
        cd = math_dtype(_compute_dtype(op, out, args))
        if cd not in CTYPES:
            return None
        atoms = [convert(a, cd) for a in args]
    text = entry(cd, *atoms)
    if text is None:
        return None
    if out == "bool":
        # comparisons give 0 or 1; anything else (bool + bool is 2) is normalised by != 0
        text = f"(opg_bool){text}" if isinstance(op, _ZERO_ONE) else f"(({text}) != 0)"
    else:
        text = convert(Operand(text, cd), out).text
    if rounds:
        text = f"opg_round_half({text})"
    return body.temp(out, text, str(op))


def _needed(op: sb.Composite) -> set[Any]:
    """The inner nodes of ``op`` that its outputs read (``second(x, y)`` does not read x)."""
    producer = {o: n for n in op.nodes for o in n.outputs}
    needed: set[Any] = set()
    stack = [producer[o] for o in op.outputs if o in producer]
    while stack:
        node = stack.pop()
        if node in needed:
            continue
        needed.add(node)
        reads = node.inputs[1:] if isinstance(node.op, sb.Second) else node.inputs
        stack.extend(producer[v] for v in reads if v in producer)
    return needed


def _emit(
    body: _Body, op: sb.ScalarOp, args: list[Operand], outs: Sequence[str]
) -> list[Operand] | None:
    """Emit ``op`` (a Composite is inlined node by node) on ``args``; its outputs."""
    if not isinstance(op, sb.Composite):
        if len(outs) != 1:
            return None
        result = _apply(body, op, args, outs[0])
        return None if result is None else [result]
    values: dict[Variable, Operand] = dict(zip(op.inputs, args, strict=True))

    def operand(v: Variable) -> Operand | None:
        if v in values:
            return values[v]
        if isinstance(v, Constant) and v.type.dtype in CTYPES:
            value = np.asarray(v.data).item()
            dtype = math_dtype(v.type.dtype)  # a float16 constant is exact in float32
            return Operand(c_literal(value, dtype), dtype, value)
        return None

    needed = _needed(op)
    for node in op.nodes:
        if node not in needed:
            continue
        inner = [operand(v) for v in node.inputs]
        if any(a is None for a in inner):
            return None
        results = _emit(body, node.op, inner, [o.type.dtype for o in node.outputs])  # type: ignore[arg-type]
        if results is None:
            return None
        values.update(zip(node.outputs, results, strict=True))
    final = []
    for v, dtype in zip(op.outputs, outs, strict=True):
        a = operand(v)
        if a is None:
            return None
        final.append(convert(a, dtype))
    return final


def element_function(
    scalar_op: sb.ScalarOp,
    in_dtypes: Sequence[str],
    out_dtypes: Sequence[str],
    name: str = "opg_elem",
) -> str | None:
    """The CUDA text of ``__device__ void name(inputs..., outputs&...)`` computing
    ``scalar_op`` on one element, or None when some part of it has no CUDA code."""
    if any(d not in CTYPES for d in (*in_dtypes, *out_dtypes)):
        return None
    body = _Body()
    args = [
        body.temp("float32", f"__half2float(i{k})", f"i{k} loaded from float16")
        if d == "float16"
        else Operand(f"i{k}", d)
        for k, d in enumerate(in_dtypes)
    ]
    results = _emit(body, scalar_op, args, list(out_dtypes))
    if results is None:
        return None
    params = [f"const {CTYPES[d]} i{k}" for k, d in enumerate(in_dtypes)]
    params += [f"{CTYPES[d]} &o{k}" for k, d in enumerate(out_dtypes)]
    lines = wrap_params(f"__device__ __forceinline__ void {name}", params)
    lines += [f"    {line}" for line in body.lines]
    lines += [
        f"    o{k} = {convert(r, d)};"
        for k, (r, d) in enumerate(zip(results, out_dtypes, strict=True))
    ]
    lines.append("}")
    return "\n".join(lines)


def wrap_params(head: str, params: Sequence[str], tail: str = ") {") -> list[str]:
    """``head(params) {`` as lines of at most 100 columns: how generated kernels print
    their signatures (``tail`` ends the last line: ``") {"`` or ``");"`` for a call)."""
    lines, line = [], head + "("
    for k, p in enumerate(params):
        piece = p + ("," if k < len(params) - 1 else "")
        if len(line) + len(piece) + 1 > 98 and not line.endswith("("):
            lines.append(line.rstrip())
            line = "        "
        line += piece + " "
    lines.append(line.rstrip() + tail)
    return lines
