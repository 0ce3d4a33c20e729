"""More scalar ops with Theano's names: rounding away from zero, degrees, reciprocal, the
``mul_without_zeros`` op behind ``Prod``'s gradient, and building complex numbers (``complex``,
``complex_from_polar``).

They follow :mod:`opgraph.scalar.basic`'s conventions: a NumPy ``impl`` applied to whole arrays
by Elemwise, an output-type rule, and a gradient written against a math namespace ``m``.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from opgraph.graph.basic import Variable
from opgraph.scalar.basic import (
    ScalarOp,
    _float_grad,
    _unary,
    _zero_grad,
    upcast_out,
    upgrade_to_float,
    upgrade_to_float_no_complex,
)
from opgraph.scalar.type import (
    ScalarType,
    complex_dtypes,
    discrete_dtypes,
    get_scalar_type,
    upcast,
)

__all__ = [
    "Complex",
    "ComplexFromPolar",
    "Deg2Rad",
    "Inv",
    "MulWithoutZeros",
    "Rad2Deg",
    "RoundHalfAwayFromZero",
    "complex",
    "complex_from_polar",
    "deg2rad",
    "inv",
    "mul_without_zeros",
    "rad2deg",
    "round_half_away_from_zero",
]


def same_out_no_complex(t: ScalarType, *_: ScalarType) -> tuple[ScalarType]:
    """Output dtype: the input's; complex inputs are an error (rounding has no complex order)."""
    if t.dtype in complex_dtypes:
        raise TypeError(f"this op does not support complex inputs, got {t}")
    return (t,)


class RoundHalfAwayFromZero(ScalarOp):
    """Round to the nearest integer, halves away from zero (C's ``round``): 2.5 -> 3, -2.5 -> -3.

    Integer inputs are returned unchanged. The gradient is zero almost everywhere.
    """

    nin = 1
    output_types_preference = staticmethod(same_out_no_complex)

    def impl(self, x: Any) -> Any:
        x = np.asarray(x)
        if x.dtype.kind in "biu":
            return x.copy()
        whole = np.trunc(x)
        frac = x - whole  # exact in binary floating point
        return whole + np.where(np.abs(frac) >= 0.5, np.sign(x), 0).astype(x.dtype)

    def symbolic_grad(
        self,
        m: ModuleType,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable | None]:
        return [_zero_grad(m, inputs[0])]


Deg2Rad = _unary(
    "Deg2Rad",
    np.deg2rad,
    upgrade_to_float_no_complex,
    lambda m, x, z, gz: m.mul(gz, np.pi / 180.0),
)
Deg2Rad.__doc__ = "Degrees to radians: ``x * pi / 180``."
Rad2Deg = _unary(
    "Rad2Deg",
    np.rad2deg,
    upgrade_to_float_no_complex,
    lambda m, x, z, gz: m.mul(gz, 180.0 / np.pi),
)
Rad2Deg.__doc__ = "Radians to degrees: ``x * 180 / pi``."


class Inv(ScalarOp):
    """Reciprocal ``1.0 / x`` (always a float division, unlike NumPy's integer ``reciprocal``)."""

    nin = 1
    output_types_preference = staticmethod(upgrade_to_float)

    def impl(self, x: Any) -> Any:
        x = np.asarray(x)
        if x.dtype.kind in "biu":
            x = x.astype(upgrade_to_float(ScalarType(str(x.dtype)))[0].dtype)
        return np.reciprocal(x)

    def symbolic_grad(
        self,
        m: ModuleType,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable | None]:
        (x,), (z,), (gz,) = inputs, outputs, output_grads
        return [_float_grad(m, x, m.neg(m.mul(gz, m.sqr(z))))]


class MulWithoutZeros(ScalarOp):
    """``x * y``, where a zero operand is skipped (``0 * y = y``): the product of the non-zeros.

    Its identity is 0 so that reducing only zeros gives 0. ``Prod``'s gradient uses it.
    """

    nin = 2
    commutative = True
    associative = True
    identity = 0
    output_types_preference = staticmethod(upcast_out)

    def impl(self, x: Any, y: Any) -> Any:
        x, y = np.asarray(x), np.asarray(y)
        return np.where(x == 0, y, np.where(y == 0, x, x * y))


def complex_out(x: ScalarType, y: ScalarType) -> tuple[ScalarType]:
    """Output dtype of ``complex``: complex128 when the real upcast of the parts needs more
    than float32 (float64, int32/64, uint32/64), else complex64; complex parts are an error."""
    for t in (x, y):
        if t.dtype in complex_dtypes:
            raise TypeError(f"complex() needs real parts, got {t}; use real()/imag() first")
    wide = upcast(x.dtype, y.dtype) in ("float64", "int64", "uint64", "int32", "uint32")
    return (get_scalar_type("complex128" if wide else "complex64"),)


def _from_parts(re: Any, im: Any) -> np.ndarray:
    """The complex128 array ``re + i im`` with the parts stored as given (``inf`` in one part
    leaves the other alone, unlike ``re + 1j * im``)."""
    re, im = np.asarray(re), np.asarray(im)
    out = np.empty(np.broadcast(re, im).shape, dtype=np.complex128)
    out.real = re
    out.imag = im
    return out


def _real_grad(m: ModuleType, x: Variable, grad: Any) -> Variable:
    """The gradient ``grad()`` (a real expression) cast to ``x``'s float dtype; zero for an
    integer ``x``."""
    if x.type.dtype in discrete_dtypes:
        return _zero_grad(m, x)
    return m.cast(grad(), x.type.dtype)


class Complex(ScalarOp):
    """``complex(re, im)``: the complex number with these real and imaginary parts.

    Gradient, with the convention of opgraph's complex gradients (those of ``mul``, ``real``,
    ``imag``: ``gz = dC/dRe - i dC/dIm``, so that holomorphic ops multiply by ``f'(z)``):
    ``dC/dre = Re(gz)``, ``dC/dim = -Im(gz)``. (Theano 1.0 disabled complex gradients, its
    issue #178; its ``complex`` and ``mul`` follow two different conventions.)
    """

    nin = 2
    output_types_preference = staticmethod(complex_out)

    def impl(self, x: Any, y: Any) -> Any:
        return _from_parts(x, y)

    def symbolic_grad(
        self,
        m: ModuleType,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable | None]:
        (x, y), (gz,) = inputs, output_grads
        return [_real_grad(m, x, lambda: m.real(gz)), _real_grad(m, y, lambda: m.neg(m.imag(gz)))]


class ComplexFromPolar(ScalarOp):
    """``complex_from_polar(r, theta)``: ``r * exp(i theta)``; a negative radius is a
    ValueError, as in Theano.

    Gradient, with the convention of :class:`Complex` (``gz = dC/dRe - i dC/dIm``):
    ``dC/dr = Re(gz exp(i theta))`` and ``dC/dtheta = -Im(gz z)``. (Theano 1.0 returns complex
    values for these real inputs, which its own ``grad`` rejects.)
    """

    nin = 2
    output_types_preference = staticmethod(complex_out)

    def impl(self, r: Any, theta: Any) -> Any:
        r, theta = np.asarray(r), np.asarray(theta)
        if np.any(r < 0):
            raise ValueError("polar radius must be non-negative", r)
        return _from_parts(r * np.cos(theta), r * np.sin(theta))

    def symbolic_grad(
        self,
        m: ModuleType,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable | None]:
        (r, theta), (z,), (gz,) = inputs, outputs, output_grads
        unit = m.apply_scalar_op(complex_from_polar, m.ones_like(r), theta)
        return [
            _real_grad(m, r, lambda: m.real(m.mul(gz, unit))),
            _real_grad(m, theta, lambda: m.neg(m.imag(m.mul(gz, z)))),
        ]


round_half_away_from_zero = RoundHalfAwayFromZero(name="RoundHalfAwayFromZero")
deg2rad = Deg2Rad(name="deg2rad")
rad2deg = Rad2Deg(name="rad2deg")
inv = Inv(name="inv")
mul_without_zeros = MulWithoutZeros(name="mul_without_zeros")
complex = Complex(name="complex")
complex_from_polar = ComplexFromPolar(name="complex_from_polar")
