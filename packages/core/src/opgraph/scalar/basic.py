"""Scalar ops: the per-element functions Elemwise maps over arrays, and Composite.

Each ScalarOp knows its NumPy implementation (``nfunc``, applied to whole arrays by
Elemwise), its output-type rule, and its gradient. Gradients are written once against a
math namespace ``m`` (this module for scalar graphs, ``opgraph.tensor.math`` for tensor
graphs), so the same formula serves Composite and Elemwise.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.clone import clone
from opgraph.graph.null_type import DisconnectedType, NullType
from opgraph.graph.op import Op
from opgraph.graph.traversal import io_toposort
from opgraph.graph.utils import MethodNotDefined
from opgraph.scalar.type import (
    ScalarType,
    complex_dtypes,
    discrete_dtypes,
    float_dtypes,
    get_scalar_type,
    upcast,
)

__all__ = ["Composite", "ScalarOp", "as_scalar", "constant"]


# ----------------------------------------------------------------------------------------
# Output-type rules (Theano's names)


def upcast_out(*types: ScalarType) -> tuple[ScalarType]:
    """Output dtype: NumPy's promotion of the input dtypes."""
    return (get_scalar_type(upcast(*(t.dtype for t in types))),)


def upcast_out_nobool(*types: ScalarType) -> tuple[ScalarType]:
    """Like upcast_out, but bool inputs give int8 (arithmetic on booleans)."""
    (t,) = upcast_out(*types)
    return (get_scalar_type("int8"),) if t.dtype == "bool" else (t,)


def same_out(t: ScalarType, *_: ScalarType) -> tuple[ScalarType]:
    """Output dtype: the first input's."""
    return (t,)


def upgrade_to_float(*types: ScalarType) -> tuple[ScalarType]:
    """Output dtype: upcast, then integers become floats (int8/16 -> float32, else float64)."""
    conv = {
        "bool": "float32",
        "int8": "float32",
        "int16": "float32",
        "uint8": "float32",
        "uint16": "float32",
        "int32": "float64",
        "int64": "float64",
        "uint32": "float64",
        "uint64": "float64",
    }
    dt = upcast(*(conv.get(t.dtype, t.dtype) for t in types))
    return (get_scalar_type(dt),)


def upgrade_to_float_no_complex(*types: ScalarType) -> tuple[ScalarType]:
    """Like upgrade_to_float, but complex inputs are an error."""
    for t in types:
        if t.dtype in complex_dtypes:
            raise TypeError(f"this op does not support complex inputs, got {t}")
    return upgrade_to_float(*types)


def same_out_nobool(t: ScalarType, *_: ScalarType) -> tuple[ScalarType]:
    """Output dtype: the first input's; bool inputs are an error (negation, sign)."""
    if t.dtype == "bool":
        raise TypeError("this op is not defined for bool inputs; cast them to an integer first")
    return (t,)


def real_out(t: ScalarType, *_: ScalarType) -> tuple[ScalarType]:
    """Output dtype: the real dtype of a complex input, else the input's (abs)."""
    return float_out_of_complex(t)


def angle_out(t: ScalarType) -> tuple[ScalarType]:
    """Output dtype of ``angle``: real float (from complex, or upgraded from int)."""
    if t.dtype in complex_dtypes:
        return float_out_of_complex(t)
    return upgrade_to_float(t)


def true_div_out(*types: ScalarType) -> tuple[ScalarType]:
    """Output dtype of ``/``: floatX for all-integer inputs (Theano), else the upcast."""
    if all(t.dtype in discrete_dtypes for t in types):
        return (get_scalar_type(config.floatX),)
    return upcast_out(*types)


def bool_out(*_: ScalarType) -> tuple[ScalarType]:
    """Output dtype: bool (comparisons, logical ops)."""
    return (get_scalar_type("bool"),)


def int_out(*types: ScalarType) -> tuple[ScalarType]:
    """Output dtype: upcast of integer inputs; float inputs are an error."""
    for t in types:
        if t.dtype not in discrete_dtypes:
            raise TypeError(f"this op needs integer or bool inputs, got {t}")
    return upcast_out(*types)


def float_out_of_complex(t: ScalarType) -> tuple[ScalarType]:
    """Output dtype: the real dtype matching a complex input (real, imag, abs of complex)."""
    return (
        get_scalar_type({"complex64": "float32", "complex128": "float64"}.get(t.dtype, t.dtype)),
    )


# ----------------------------------------------------------------------------------------
# Conversion


def _autocast_python(x: Any) -> np.generic:
    """Theano's constant dtype rule: the smallest int (or float32/float64) holding ``x`` exactly."""
    if isinstance(x, bool | np.bool_):
        return np.bool_(x)
    if isinstance(x, int):
        for dt in ("int8", "int16", "int32", "int64"):
            info = np.iinfo(dt)
            if info.min <= x <= info.max:
                return np.dtype(dt).type(x)
        if 0 <= x <= np.iinfo("uint64").max:
            return np.uint64(x)
        raise OverflowError(f"integer {x} does not fit in 64 bits")
    if isinstance(x, float):
        if config.floatX in ("float32", "float16"):
            return np.dtype(config.floatX).type(x)
        f32 = np.float32(x)
        return f32 if float(f32) == x else np.float64(x)
    if isinstance(x, complex):
        return np.complex128(x)
    if isinstance(x, np.generic):
        return x
    raise TypeError(f"cannot make a scalar constant from {x!r} ({type(x).__name__})")


def constant(x: Any, name: str | None = None, dtype: str | None = None) -> Constant:
    """Return a scalar Constant for a Python or NumPy number."""
    value = np.dtype(dtype).type(x) if dtype is not None else _autocast_python(x)
    return get_scalar_type(str(value.dtype)).make_constant(value, name=name)


def as_scalar(x: Any, name: str | None = None) -> Variable:
    """Return ``x`` as a scalar Variable (wrapping numbers in constants)."""
    if isinstance(x, Variable):
        if isinstance(x.type, ScalarType):
            return x
        raise TypeError(f"expected a scalar variable, got {x} of type {x.type}")
    if isinstance(x, Apply):
        return as_scalar(x.default_output(), name)
    return constant(x, name=name)


# ----------------------------------------------------------------------------------------
# Ops


class ScalarOp(Op):
    """A function of scalars, with its NumPy vectorised implementation ``nfunc``.

    ``output_types_preference`` computes the output ScalarTypes from the input ones.
    Subclasses set ``nin``, ``nfunc`` (a NumPy/SciPy ufunc or callable over arrays) and
    define ``symbolic_grad(m, inputs, outputs, output_grads)``.
    """

    __props__ = ("output_types_preference",)
    nin: int = -1
    nout: int = 1
    nfunc: Callable[..., Any] | None = None
    #: Infix symbol in Composite names (``+``), or None for the call form ``GT(i0, i1)``: as
    #: Theano's scalar pprint, only + * - / // % ** and unary - are infix.
    symbol: str | None = None
    commutative = False
    associative = False
    identity: Any = None  # neutral element, for reductions

    def __init__(
        self,
        output_types_preference: Callable[..., tuple[ScalarType, ...]] | None = None,
        name: str | None = None,
    ) -> None:
        if output_types_preference is not None:
            self.output_types_preference = output_types_preference
        self.name = name

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.output_types_preference == getattr(
            other, "output_types_preference", None
        )

    def __hash__(self) -> int:
        return hash((type(self), self.output_types_preference))

    def __str__(self) -> str:
        return self.name or type(self).__name__

    def class_str(self) -> str:
        """How Theano prints this op once it has lost its name: its class (``Add``, ``Exp``).

        Theano's in-place pass rebuilt each scalar op without its name, so a node it made
        work in place prints as ``Elemwise{Add}[(0, 1)]`` (see ``Elemwise.__str__``).
        """
        return type(self).__name__

    def output_types(self, types: Sequence[ScalarType]) -> tuple[ScalarType, ...]:
        """Return the output types for input types ``types``."""
        pref = getattr(self, "output_types_preference", None)
        if pref is None:
            raise TypeError(f"{type(self).__name__} has no output_types_preference")
        return pref(*types)

    def make_node(self, *inputs: Any) -> Apply:
        if self.nin >= 0 and len(inputs) != self.nin:
            raise TypeError(f"{self} takes {self.nin} inputs, got {len(inputs)}")
        ins = [as_scalar(i) for i in inputs]
        outs = [t() for t in self.output_types([i.type for i in ins])]
        return Apply(self, ins, outs)

    def impl(self, *inputs: Any) -> Any:
        """Compute the op on NumPy values (scalars or whole arrays)."""
        if self.nfunc is None:
            raise TypeError(f"{type(self).__name__} has no NumPy implementation")
        return self.nfunc(*inputs)

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        with np.errstate(all="ignore"):
            res = self.impl(*inputs)
        if self.nout == 1:
            res = (res,)
        for out, cell, val in zip(node.outputs, output_storage, res, strict=True):
            cell[0] = np.asarray(val, dtype=out.type.dtype)[()]

    def symbolic_grad(
        self,
        m: ModuleType,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable | None]:
        """The gradient written with the functions of math namespace ``m``."""
        raise MethodNotDefined(f"scalar op {self} does not define a gradient")

    def L_op(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable | None]:
        return self.symbolic_grad(_SCALAR_NAMESPACE, inputs, outputs, output_grads)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [()] * len(node.outputs)


def _is_discrete(var: Variable) -> bool:
    return var.type.dtype in discrete_dtypes


def _zero_grad(m: ModuleType, x: Variable) -> Variable:
    return m.zeros_like(x, dtype=x.type.dtype if x.type.dtype in float_dtypes else None)


def _float_grad(m: ModuleType, x: Variable, g: Variable) -> Variable:
    """Gradient w.r.t. an integer input is zero (Theano returns a float zero of x's shape)."""
    return _zero_grad(m, x) if _is_discrete(x) else g


def _unary(name: str, nfunc: Any, rule: Callable, grad: Callable | None = None, **attrs: Any):
    """Define a one-input ScalarOp class with NumPy function ``nfunc`` and gradient ``grad``."""

    def symbolic_grad(self, m, inputs, outputs, output_grads):  # type: ignore[no-untyped-def]
        (x,), (z,), (gz,) = inputs, outputs, output_grads
        if grad is None:
            return [_zero_grad(m, x)]
        return [_float_grad(m, x, grad(m, x, z, gz))]

    cls = type(
        name,
        (ScalarOp,),
        {
            "nin": 1,
            "nfunc": staticmethod(nfunc),
            "output_types_preference": staticmethod(rule),
            "symbolic_grad": symbolic_grad,
            "__doc__": f"Elementwise ``{name.lower()}`` ({getattr(nfunc, '__name__', nfunc)}).",
            **attrs,
        },
    )
    return cls


def _binary(name: str, nfunc: Any, rule: Callable, grad: Callable | None = None, **attrs: Any):
    """Define a two-input ScalarOp class."""

    def symbolic_grad(self, m, inputs, outputs, output_grads):  # type: ignore[no-untyped-def]
        (x, y), (z,), (gz,) = inputs, outputs, output_grads
        if grad is None:
            return [_zero_grad(m, x), _zero_grad(m, y)]
        gx, gy = grad(m, x, y, z, gz)
        return [_float_grad(m, x, gx), _float_grad(m, y, gy)]

    return type(
        name,
        (ScalarOp,),
        {
            "nin": 2,
            "nfunc": staticmethod(nfunc),
            "output_types_preference": staticmethod(rule),
            "symbolic_grad": symbolic_grad,
            "__doc__": f"Elementwise ``{name.lower()}`` of two inputs.",
            **attrs,
        },
    )


class _Variadic(ScalarOp):
    """Base of add and mul, which take any number of inputs."""

    nin = -1
    commutative = True
    associative = True

    def make_node(self, *inputs: Any) -> Apply:
        if len(inputs) < 1:
            raise TypeError(f"{self} needs at least one input")
        return super().make_node(*inputs)


class Add(_Variadic):
    """Elementwise sum of any number of inputs."""

    symbol = "+"
    identity = 0

    def impl(self, *inputs: Any) -> Any:
        out = inputs[0]
        for x in inputs[1:]:
            out = np.add(out, x)
        return out

    def symbolic_grad(self, m, inputs, outputs, output_grads):  # type: ignore[no-untyped-def]
        (gz,) = output_grads
        return [_float_grad(m, x, gz) for x in inputs]


class Mul(_Variadic):
    """Elementwise product of any number of inputs."""

    symbol = "*"
    identity = 1

    def impl(self, *inputs: Any) -> Any:
        out = inputs[0]
        for x in inputs[1:]:
            out = np.multiply(out, x)
        return out

    def symbolic_grad(self, m, inputs, outputs, output_grads):  # type: ignore[no-untyped-def]
        (gz,) = output_grads
        grads = []
        for i, x in enumerate(inputs):
            others = [y for j, y in enumerate(inputs) if j != i]
            grads.append(_float_grad(m, x, m.mul(gz, *others) if others else gz))
        return grads


def _grad_sub(m, x, y, z, gz):  # type: ignore[no-untyped-def]
    return gz, m.neg(gz)


def _grad_true_div(m, x, y, z, gz):  # type: ignore[no-untyped-def]
    return m.true_div(gz, y), m.neg(m.true_div(m.mul(gz, x), m.sqr(y)))


def _grad_pow(m, x, y, z, gz):  # type: ignore[no-untyped-def]
    gx = m.mul(m.mul(gz, y), m.pow(x, m.sub(y, 1)))
    gy = m.mul(gz, m.log(x), z)
    return gx, gy


def _grad_maximum(m, x, y, z, gz):  # type: ignore[no-untyped-def]
    return m.mul(gz, m.eq(z, x)), m.mul(gz, m.eq(z, y))


def _safe_int_div(x: Any, y: Any) -> Any:
    return np.floor_divide(x, y)


Sub = _binary("Sub", np.subtract, upcast_out_nobool, _grad_sub, symbol="-")
TrueDiv = _binary("TrueDiv", np.true_divide, true_div_out, _grad_true_div, symbol="/")
IntDiv = _binary("IntDiv", _safe_int_div, upcast_out_nobool, None, symbol="//")
Mod = _binary(
    "Mod",
    np.mod,
    upcast_out_nobool,
    lambda m, x, y, z, gz: (gz, m.neg(m.mul(gz, m.int_div(x, y)))),
    symbol="%",
)
Pow = _binary("Pow", np.power, upcast_out_nobool, _grad_pow, symbol="**")
Maximum = _binary("Maximum", np.maximum, upcast_out, _grad_maximum, commutative=True)
Minimum = _binary("Minimum", np.minimum, upcast_out, _grad_maximum, commutative=True)
GT = _binary("GT", np.greater, bool_out)
LT = _binary("LT", np.less, bool_out)
GE = _binary("GE", np.greater_equal, bool_out)
LE = _binary("LE", np.less_equal, bool_out)
EQ = _binary("EQ", np.equal, bool_out, commutative=True)
NEQ = _binary("NEQ", np.not_equal, bool_out, commutative=True)
AND = _binary("AND", np.bitwise_and, int_out, commutative=True)
OR = _binary("OR", np.bitwise_or, int_out, commutative=True)
XOR = _binary("XOR", np.bitwise_xor, int_out, commutative=True)
ArcTan2 = _binary(
    "ArcTan2",
    np.arctan2,
    upgrade_to_float_no_complex,
    lambda m, y, x, z, gz: (
        m.true_div(m.mul(gz, x), m.add(m.sqr(x), m.sqr(y))),
        m.true_div(m.mul(gz, m.neg(y)), m.add(m.sqr(x), m.sqr(y))),
    ),
)

Neg = _unary("Neg", np.negative, same_out_nobool, lambda m, x, z, gz: m.neg(gz), symbol="-")
Identity = _unary("Identity", lambda x: x, same_out, lambda m, x, z, gz: gz)
Abs = _unary("Abs", np.abs, real_out, lambda m, x, z, gz: m.mul(gz, m.sgn(x)))
Sgn = _unary("Sgn", np.sign, same_out_nobool)
Exp = _unary("Exp", np.exp, upgrade_to_float, lambda m, x, z, gz: m.mul(gz, z))
Exp2 = _unary("Exp2", np.exp2, upgrade_to_float, lambda m, x, z, gz: m.mul(gz, z, np.log(2.0)))
Expm1 = _unary("Expm1", np.expm1, upgrade_to_float, lambda m, x, z, gz: m.mul(gz, m.add(z, 1)))
Log = _unary("Log", np.log, upgrade_to_float, lambda m, x, z, gz: m.true_div(gz, x))
Log2 = _unary(
    "Log2", np.log2, upgrade_to_float, lambda m, x, z, gz: m.true_div(gz, m.mul(x, np.log(2.0)))
)
Log10 = _unary(
    "Log10", np.log10, upgrade_to_float, lambda m, x, z, gz: m.true_div(gz, m.mul(x, np.log(10.0)))
)
Log1p = _unary("Log1p", np.log1p, upgrade_to_float, lambda m, x, z, gz: m.true_div(gz, m.add(x, 1)))
Sqrt = _unary("Sqrt", np.sqrt, upgrade_to_float, lambda m, x, z, gz: m.true_div(gz, m.mul(z, 2)))
Sqr = _unary("Sqr", np.square, same_out, lambda m, x, z, gz: m.mul(gz, x, 2))
Sin = _unary("Sin", np.sin, upgrade_to_float, lambda m, x, z, gz: m.mul(gz, m.cos(x)))
Cos = _unary("Cos", np.cos, upgrade_to_float, lambda m, x, z, gz: m.neg(m.mul(gz, m.sin(x))))
Tan = _unary("Tan", np.tan, upgrade_to_float, lambda m, x, z, gz: m.mul(gz, m.add(m.sqr(z), 1)))
ArcSin = _unary(
    "ArcSin",
    np.arcsin,
    upgrade_to_float,
    lambda m, x, z, gz: m.true_div(gz, m.sqrt(m.sub(1, m.sqr(x)))),
)
ArcCos = _unary(
    "ArcCos",
    np.arccos,
    upgrade_to_float,
    lambda m, x, z, gz: m.neg(m.true_div(gz, m.sqrt(m.sub(1, m.sqr(x))))),
)
ArcTan = _unary(
    "ArcTan", np.arctan, upgrade_to_float, lambda m, x, z, gz: m.true_div(gz, m.add(m.sqr(x), 1))
)
Sinh = _unary("Sinh", np.sinh, upgrade_to_float, lambda m, x, z, gz: m.mul(gz, m.cosh(x)))
Cosh = _unary("Cosh", np.cosh, upgrade_to_float, lambda m, x, z, gz: m.mul(gz, m.sinh(x)))
Tanh = _unary("Tanh", np.tanh, upgrade_to_float, lambda m, x, z, gz: m.mul(gz, m.sub(1, m.sqr(z))))
ArcSinh = _unary(
    "ArcSinh",
    np.arcsinh,
    upgrade_to_float,
    lambda m, x, z, gz: m.true_div(gz, m.sqrt(m.add(m.sqr(x), 1))),
)
ArcCosh = _unary(
    "ArcCosh",
    np.arccosh,
    upgrade_to_float,
    lambda m, x, z, gz: m.true_div(gz, m.sqrt(m.sub(m.sqr(x), 1))),
)
ArcTanh = _unary(
    "ArcTanh", np.arctanh, upgrade_to_float, lambda m, x, z, gz: m.true_div(gz, m.sub(1, m.sqr(x)))
)
Floor = _unary("Floor", np.floor, same_out)
Ceil = _unary("Ceil", np.ceil, same_out)
Trunc = _unary("Trunc", np.trunc, same_out)
RoundHalfToEven = _unary("RoundHalfToEven", np.round, same_out)


def _special(name: str) -> Callable[..., Any]:
    """``scipy.special.<name>``, imported on its first call (scipy.special costs ~1 s at
    ``import opgraph``, and most programs never use it)."""

    def impl(*args: Any) -> Any:
        import scipy.special

        return getattr(scipy.special, name)(*args)

    impl.__name__ = impl.__qualname__ = name
    return impl


Erf = _unary(
    "Erf",
    _special("erf"),
    upgrade_to_float_no_complex,
    lambda m, x, z, gz: m.mul(gz, 2.0 / np.sqrt(np.pi), m.exp(m.neg(m.sqr(x)))),
)
Erfc = _unary(
    "Erfc",
    _special("erfc"),
    upgrade_to_float_no_complex,
    lambda m, x, z, gz: m.mul(gz, -2.0 / np.sqrt(np.pi), m.exp(m.neg(m.sqr(x)))),
)
Erfinv = _unary(
    "Erfinv",
    _special("erfinv"),
    upgrade_to_float_no_complex,
    lambda m, x, z, gz: m.mul(gz, np.sqrt(np.pi) / 2.0, m.exp(m.sqr(z))),
)
Gamma = _unary(
    "Gamma",
    _special("gamma"),
    upgrade_to_float_no_complex,
    lambda m, x, z, gz: m.mul(gz, z, m.psi(x)),
)
GammaLn = _unary(
    "GammaLn",
    _special("gammaln"),
    upgrade_to_float_no_complex,
    lambda m, x, z, gz: m.mul(gz, m.psi(x)),
)
Psi = _unary(
    "Psi",
    _special("psi"),
    upgrade_to_float_no_complex,
    lambda m, x, z, gz: m.mul(gz, m.tri_gamma(x)),
)
TriGamma = _unary(
    "TriGamma",
    lambda x: _special("polygamma")(1, x),
    upgrade_to_float_no_complex,
    lambda m, x, z, gz: m.mul(gz, m.apply_scalar_op(poly_gamma_2, x)),
)
PolyGamma2 = _unary(
    "PolyGamma2", lambda x: _special("polygamma")(2, x), upgrade_to_float_no_complex
)
Sigmoid = _unary(
    "ScalarSigmoid",
    _special("expit"),
    upgrade_to_float_no_complex,
    lambda m, x, z, gz: m.mul(gz, z, m.sub(1, z)),
)
Softplus = _unary(
    "ScalarSoftplus",
    lambda x: np.logaddexp(np.zeros((), dtype=np.asarray(x).dtype), x),
    upgrade_to_float_no_complex,
    lambda m, x, z, gz: m.mul(gz, m.sigmoid(x)),
)
# The two classes are named as Theano prints them; these names let pickle find them by
# reference (otherwise cloudpickle copies the class, and backend-c's table misses the copy).
ScalarSigmoid, ScalarSoftplus = Sigmoid, Softplus
Invert = _unary("Invert", np.invert, int_out)
IsNan = _unary("IsNan", np.isnan, bool_out)
IsInf = _unary("IsInf", np.isinf, bool_out)
Real = _unary("Real", np.real, float_out_of_complex, lambda m, x, z, gz: gz)
Imag = _unary(
    "Imag",
    np.imag,
    float_out_of_complex,
    # gz = dC/dRe - i dC/dIm, the convention of mul and real: imag(z) = y gives -i gz
    lambda m, x, z, gz: m.mul(gz, -1j) if x.type.dtype in complex_dtypes else _zero_grad(m, x),
)
Angle = _unary("Angle", np.angle, angle_out)
Conj = _unary("Conj", np.conj, same_out, lambda m, x, z, gz: m.conj(gz))


class Second(ScalarOp):
    """``second(x, y)``: ``y`` broadcast to the shape of ``x`` (Theano's ``fill``)."""

    nin = 2

    @staticmethod
    def output_types_preference(x: ScalarType, y: ScalarType):  # type: ignore[override]
        return (y,)

    def impl(self, x: Any, y: Any) -> Any:
        return np.broadcast_to(y, np.broadcast(x, y).shape).copy()

    def symbolic_grad(self, m, inputs, outputs, output_grads):  # type: ignore[no-untyped-def]
        (x, y), (gz,) = inputs, output_grads
        return [_zero_grad(m, x), _float_grad(m, y, gz)]


class Switch(ScalarOp):
    """``switch(cond, ift, iff)``: ``ift`` where cond is true, else ``iff``."""

    nin = 3
    nfunc = staticmethod(np.where)

    @staticmethod
    def output_types_preference(cond: ScalarType, ift: ScalarType, iff: ScalarType):  # type: ignore[override]
        return upcast_out(ift, iff)

    def impl(self, cond: Any, ift: Any, iff: Any) -> Any:
        return np.where(cond, ift, iff)

    def symbolic_grad(self, m, inputs, outputs, output_grads):  # type: ignore[no-untyped-def]
        (cond, ift, iff), (gz,) = inputs, output_grads
        zero = m.zeros_like(gz)
        return [
            _zero_grad(m, cond),
            _float_grad(m, ift, m.switch(cond, gz, zero)),
            _float_grad(m, iff, m.switch(cond, zero, gz)),
        ]


class Clip(ScalarOp):
    """``clip(x, lo, hi)``."""

    nin = 3

    @staticmethod
    def output_types_preference(x: ScalarType, lo: ScalarType, hi: ScalarType):  # type: ignore[override]
        return upcast_out(x, lo, hi)

    def impl(self, x: Any, lo: Any, hi: Any) -> Any:
        return np.minimum(np.maximum(x, lo), hi)

    def symbolic_grad(self, m, inputs, outputs, output_grads):  # type: ignore[no-untyped-def]
        (x, lo, hi), (gz,) = inputs, output_grads
        inside = m.and_(m.ge(x, lo), m.le(x, hi))
        return [
            _float_grad(m, x, m.mul(gz, inside)),
            _float_grad(m, lo, m.mul(gz, m.lt(x, lo))),
            _float_grad(m, hi, m.mul(gz, m.gt(x, hi))),
        ]


class Cast(ScalarOp):
    """Convert to dtype ``o_type.dtype`` (``convert_to_float32`` etc.)."""

    __props__ = ("o_type",)
    nin = 1

    def __init__(self, o_type: ScalarType, name: str | None = None) -> None:
        self.o_type = o_type
        self.name = name or f"convert_to_{o_type.dtype}"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.o_type == other.o_type  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), self.o_type))

    def __str__(self) -> str:
        return f"Cast{{{self.o_type.dtype}}}"  # Theano's, inside Composite names too

    def class_str(self) -> str:
        return str(self)

    def output_types(self, types: Sequence[ScalarType]) -> tuple[ScalarType, ...]:
        return (self.o_type,)

    def impl(self, x: Any) -> Any:
        return np.asarray(x).astype(self.o_type.dtype)

    def symbolic_grad(self, m, inputs, outputs, output_grads):  # type: ignore[no-untyped-def]
        (x,), (gz,) = inputs, output_grads
        if _is_discrete(x) or self.o_type.dtype in discrete_dtypes:
            return [_zero_grad(m, x)]
        return [m.cast(gz, x.type.dtype)]


# Instances, printed as Theano prints them (in Composite names): its named instances by name,
# its unnamed ones (Abs, Switch, AND, GT, ...) by class.
add = Add(upcast_out, name="add")
mul = Mul(upcast_out, name="mul")
sub = Sub(name="sub")
true_div = TrueDiv(name="true_div")
int_div = IntDiv(name="int_div")
mod = Mod(name="mod")
pow = Pow(name="pow")
maximum = Maximum(name="maximum")
minimum = Minimum(name="minimum")
gt, lt, ge, le, eq, neq = GT(), LT(), GE(), LE(), EQ(), NEQ()
and_, or_, xor = AND(name="AND"), OR(name="OR"), XOR(name="XOR")
arctan2 = ArcTan2(name="arctan2")
neg = Neg(name="neg")
identity = Identity(name="identity")
abs_ = Abs(name="Abs")
sgn = Sgn(name="sgn")
exp, exp2, expm1 = Exp(name="exp"), Exp2(name="exp2"), Expm1(name="expm1")
log, log2, log10, log1p = (
    Log(name="log"),
    Log2(name="log2"),
    Log10(name="log10"),
    Log1p(name="log1p"),
)
sqrt, sqr = Sqrt(name="sqrt"), Sqr(name="sqr")
sin, cos, tan = Sin(name="sin"), Cos(name="cos"), Tan(name="tan")
arcsin, arccos, arctan = ArcSin(name="arcsin"), ArcCos(name="arccos"), ArcTan(name="arctan")
sinh, cosh, tanh = Sinh(name="sinh"), Cosh(name="cosh"), Tanh(name="tanh")
arcsinh, arccosh, arctanh = (
    ArcSinh(name="arcsinh"),
    ArcCosh(name="arccosh"),
    ArcTanh(name="arctanh"),
)
floor, ceil, trunc = Floor(name="floor"), Ceil(name="ceil"), Trunc(name="trunc")
round_half_to_even = RoundHalfToEven(name="RoundHalfToEven")
erf, erfc, erfinv = Erf(name="erf"), Erfc(name="erfc"), Erfinv(name="erfinv")
gamma, gammaln, psi = Gamma(name="gamma"), GammaLn(name="gammaln"), Psi(name="psi")
tri_gamma, poly_gamma_2 = TriGamma(name="tri_gamma"), PolyGamma2(name="poly_gamma_2")
sigmoid = Sigmoid(name="scalar_sigmoid")
softplus = Softplus(name="scalar_softplus")
invert = Invert(name="Invert")
isnan, isinf = IsNan(name="IsNan"), IsInf(name="IsInf")
real, imag, angle, conj = (
    Real(name="real"),
    Imag(name="imag"),
    Angle(name="angle"),
    Conj(name="conj"),
)
switch = Switch(name="Switch")
second = Second(name="second")
clip = Clip(name="clip")


def cast(x: Any, dtype: str) -> Variable:
    """Scalar cast of ``x`` to ``dtype`` (identity if already of that dtype)."""
    x = as_scalar(x)
    if x.type.dtype == dtype:
        return x
    return Cast(get_scalar_type(dtype))(x)


def zeros_like(x: Any, dtype: str | None = None) -> Variable:
    """A scalar zero of ``x``'s dtype (or ``dtype``)."""
    x = as_scalar(x)
    return constant(0, dtype=dtype or x.type.dtype)


def ones_like(x: Any, dtype: str | None = None) -> Variable:
    """A scalar one of ``x``'s dtype (or ``dtype``)."""
    x = as_scalar(x)
    return constant(1, dtype=dtype or x.type.dtype)


# ----------------------------------------------------------------------------------------
# Composite


class Composite(ScalarOp):
    """A small scalar graph used as one scalar op (what elementwise fusion builds).

    Printed as Theano does, ``Composite{((i0 * i1) + i2)}``. Its ``impl`` evaluates the inner
    graph on whole arrays, so ``Elemwise{Composite{...}}`` runs one NumPy call per inner node;
    compiled backends generate a single loop from ``fgraph``.
    """

    __props__ = ("inputs", "outputs")

    def __init__(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        *,
        clone_graph: bool = True,
    ) -> None:
        """``clone_graph=False`` makes the given variables the inner graph instead of a copy
        of them: for a caller (elementwise fusion) that built them for this Composite alone
        and never touches them again, it saves copying a graph of up to hundreds of nodes."""
        for v in (*inputs, *outputs):
            if not isinstance(v.type, ScalarType):
                raise TypeError(f"Composite needs scalar variables, got {v} of type {v.type}")
        if clone_graph:
            self.inputs, self.outputs = clone(list(inputs), list(outputs))
        else:
            self.inputs, self.outputs = list(inputs), list(outputs)
        self.nin = len(self.inputs)
        self.nout = len(self.outputs)
        self.nodes = io_toposort(self.inputs, self.outputs)
        self._constants = {
            v: v.data
            for v in (*(i for n in self.nodes for i in n.inputs), *self.outputs)
            if isinstance(v, Constant)
        }
        for node in self.nodes:
            if not isinstance(node.op, ScalarOp):
                raise TypeError(f"Composite can only contain scalar ops, got {node.op}")
        self.name = None
        self._key = self._structure_key()
        self.name = "Composite{" + self._format() + "}"

    def _structure_key(self) -> tuple:
        pos: dict[Variable, Any] = {v: ("i", k) for k, v in enumerate(self.inputs)}
        key = []
        for n, node in enumerate(self.nodes):
            ins = []
            for v in node.inputs:
                if v in pos:
                    ins.append(pos[v])
                else:
                    ins.append(("c", v.signature()))  # constants
            for j, o in enumerate(node.outputs):
                pos[o] = ("n", n, j)
            key.append((node.op, tuple(ins)))
        # The inputs' types too: the same graph over float32 and over float64 inputs computes
        # in different precisions (Theano compared the generated C code, which names them).
        return (
            tuple(v.type for v in self.inputs),
            tuple(key),
            tuple(
                pos.get(o, ("c", o.signature() if isinstance(o, Constant) else id(o)))
                for o in self.outputs
            ),
        )

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._key == other._key  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        # Immutable, and its key covers the whole inner graph: hash it once.
        h = self.__dict__.get("_cached_hash")
        if h is None:
            h = self.__dict__["_cached_hash"] = hash((type(self), self._key))
        return h

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_cached_hash", None)  # str hashes differ between processes
        return state

    def __str__(self) -> str:
        return self.name or "Composite"

    def class_str(self) -> str:
        return str(self)  # Theano's in-place pass kept a Composite's name

    def _format(self) -> str:
        names: dict[Variable, str] = {v: f"i{k}" for k, v in enumerate(self.inputs)}
        counts: dict[Variable, int] = {}
        for node in self.nodes:
            for v in node.inputs:
                counts[v] = counts.get(v, 0) + 1
        for k, node in enumerate(self.nodes):
            args = [names.get(v, str(getattr(v, "data", v))) for v in node.inputs]
            op = node.op
            if op.symbol and len(args) == 1:
                text = f"({op.symbol}{args[0]})"
            elif op.symbol:
                text = "(" + f" {op.symbol} ".join(args) + ")"
            else:
                text = f"{op}({', '.join(args)})"
            for o in node.outputs:
                shared = counts.get(o, 0) > 1 and o not in self.outputs
                names[o] = f"t{k}" if shared and len(text) > 20 else text
        return ", ".join(names.get(o, str(o)) for o in self.outputs)

    def output_types(self, types: Sequence[ScalarType]) -> tuple[ScalarType, ...]:
        if len(types) != self.nin:
            raise TypeError(f"{self} takes {self.nin} inputs, got {len(types)}")
        for k, (t, i) in enumerate(zip(types, self.inputs, strict=True)):
            if t != i.type:
                raise TypeError(f"input {k} of {self} must be {i.type}, got {t}")
        return tuple(o.type for o in self.outputs)

    def impl(self, *inputs: Any) -> Any:
        values: dict[Variable, Any] = dict(zip(self.inputs, inputs, strict=True))
        values.update(self._constants)
        for node in self.nodes:
            args = [values[v] for v in node.inputs]
            out_dtype = node.outputs[0].type.dtype
            if out_dtype in float_dtypes or out_dtype in complex_dtypes:
                # Integers feeding a float op are computed in the output's precision
                # (NumPy would pick float16 for exp(int8)).
                args = [
                    a.astype(out_dtype) if np.asarray(a).dtype.kind in "biu" else a for a in args
                ]
            res = node.op.impl(*args)
            if node.op.nout == 1:
                res = (res,)
            for o, r in zip(node.outputs, res, strict=True):
                values[o] = np.asarray(r).astype(o.type.dtype, copy=False)
        outs = tuple(values[o] for o in self.outputs)
        return outs[0] if self.nout == 1 else outs

    def symbolic_grad(self, m, inputs, outputs, output_grads):  # type: ignore[no-untyped-def]
        """Differentiate through the inner graph, rebuilt with namespace ``m``: a reverse
        pass over the inner nodes, each differentiated by its own ``symbolic_grad``."""
        values: dict[Variable, Any] = dict(zip(self.inputs, inputs, strict=True))
        rebuilt = []
        for node in self.nodes:
            args = [values.get(v, v) for v in node.inputs]
            res = m.apply_scalar_op(node.op, *args)
            res = res if isinstance(res, list) else [res]
            values.update(zip(node.outputs, res, strict=True))
            rebuilt.append((node, args, res))
        terms: dict[Variable, list[Variable]] = {}
        for o, g in zip(self.outputs, output_grads, strict=True):
            if g is not None and not isinstance(g.type, DisconnectedType):
                terms.setdefault(o, []).append(g)
        for node, args, res in reversed(rebuilt):
            gzs = [_sum_terms(m, terms.get(o)) for o in node.outputs]
            if all(g is None for g in gzs):
                continue
            gzs = [m.zeros_like(r) if g is None else g for g, r in zip(gzs, res, strict=True)]
            null = next((g for g in gzs if isinstance(g.type, NullType)), None)
            # an undefined gradient stays undefined through the nodes below it
            grads = (
                [null] * len(args) if null is not None else node.op.symbolic_grad(m, args, res, gzs)
            )
            for v, g in zip(node.inputs, grads, strict=True):
                if g is not None and not isinstance(v, Constant):
                    terms.setdefault(v, []).append(g)
        sums = [_sum_terms(m, terms.get(i)) for i in self.inputs]
        return [_zero_grad(m, x) if g is None else g for g, x in zip(sums, inputs, strict=True)]


def _sum_terms(m: ModuleType, terms: list[Variable] | None) -> Variable | None:
    """The sum of gradient terms (None for none; an undefined term, a NullType, makes the
    sum undefined)."""
    if not terms:
        return None
    null = next((t for t in terms if isinstance(t.type, NullType)), None)
    if null is not None:
        return null
    return terms[0] if len(terms) == 1 else m.add(*terms)


def apply_scalar_op(op: ScalarOp, *args: Any) -> Any:
    """Apply ``op`` to scalar arguments (the scalar counterpart of tensor's Elemwise wrapper)."""
    return op(*args)


class ScalarVariable(Variable):
    """A symbolic scalar; supports the arithmetic operators (used inside Composite graphs)."""

    def __add__(self, other: Any) -> Variable:
        return add(self, other)

    def __radd__(self, other: Any) -> Variable:
        return add(other, self)

    def __sub__(self, other: Any) -> Variable:
        return sub(self, other)

    def __rsub__(self, other: Any) -> Variable:
        return sub(other, self)

    def __mul__(self, other: Any) -> Variable:
        return mul(self, other)

    def __rmul__(self, other: Any) -> Variable:
        return mul(other, self)

    def __truediv__(self, other: Any) -> Variable:
        return true_div(self, other)

    def __rtruediv__(self, other: Any) -> Variable:
        return true_div(other, self)

    def __pow__(self, other: Any) -> Variable:
        return pow(self, other)

    def __neg__(self) -> Variable:
        return neg(self)


class ScalarConstant(Constant, ScalarVariable):
    """A constant scalar."""

    def __str__(self) -> str:
        if self.name is not None:
            return self.name
        return f"Constant{{{self.data}}}"


# A ScalarType builds these (set here, where the operators they use are defined).
ScalarType.variable_type = ScalarVariable
ScalarType.constant_type = ScalarConstant

#: The namespace scalar ops' ``symbolic_grad(m, ...)`` build with at the scalar level: this
#: module (the tensor library passes its own, which builds Elemwise nodes).
_SCALAR_NAMESPACE = sys.modules[__name__]
