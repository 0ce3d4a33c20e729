"""Scalar special functions with Theano 1.0's names (``theano.scalar.basic_scipy``): the Bessel
functions ``i0``, ``i1``, ``iv``, ``j0``, ``j1``, ``jv``, the scaled and inverse complementary
error functions ``erfcx`` and ``erfcinv``, and the chi-square survival function ``chi2sf``.

They follow :mod:`opgraph.scalar.basic`'s conventions: a SciPy ``impl`` (imported on first
use) that Elemwise applies to whole arrays, Theano's output-type rule, and Theano's gradient
written against a math namespace ``m`` (so each one works in fused ``Composite`` graphs and in
tensor graphs alike). Where Theano has no gradient the op says so with a NullType
(``grad_not_implemented``) instead of failing when the graph is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from opgraph.graph.basic import Variable
from opgraph.graph.null_type import grad_not_implemented
from opgraph.scalar.basic import (
    ScalarOp,
    _float_grad,
    _is_discrete,
    _special,
    _unary,
    _zero_grad,
    upgrade_to_float,
    upgrade_to_float_no_complex,
)
from opgraph.scalar.type import ScalarType, get_scalar_type

__all__ = [
    "I0",
    "I1",
    "J0",
    "J1",
    "Chi2SF",
    "Erfcinv",
    "Erfcx",
    "Iv",
    "Jv",
    "chi2sf",
    "erfcinv",
    "erfcx",
    "i0",
    "i1",
    "iv",
    "j0",
    "j1",
    "jv",
    "upgrade_to_float64",
]


def upgrade_to_float64(*types: ScalarType) -> tuple[ScalarType]:
    """Output dtype: float64 whatever the inputs (Theano's rule for ops computed by SciPy
    in double precision only, such as ``chi2sf``)."""
    return (get_scalar_type("float64"),)


I0 = _unary(
    "I0",
    _special("i0"),
    upgrade_to_float,
    lambda m, x, z, gz: m.mul(gz, m.apply_scalar_op(i1, x)),
)
I0.__doc__ = "Modified Bessel function of the first kind of order 0; ``d/dx i0 = i1``."
I1 = _unary(
    "I1",
    _special("i1"),
    upgrade_to_float,
    lambda m, x, z, gz: m.mul(
        gz, m.mul(m.add(m.apply_scalar_op(i0, x), m.apply_scalar_op(iv, 2, x)), 0.5)
    ),
)
I1.__doc__ = (
    "Modified Bessel function of the first kind of order 1; ``d/dx i1 = (i0 + iv(2, x)) / 2``."
)
J0 = _unary(
    "J0",
    _special("j0"),
    upgrade_to_float,
    lambda m, x, z, gz: m.neg(m.mul(gz, m.apply_scalar_op(j1, x))),
)
J0.__doc__ = "Bessel function of the first kind of order 0; ``d/dx j0 = -j1``."
J1 = _unary(
    "J1",
    _special("j1"),
    upgrade_to_float,
    lambda m, x, z, gz: m.mul(
        gz, m.mul(m.sub(m.apply_scalar_op(j0, x), m.apply_scalar_op(jv, 2, x)), 0.5)
    ),
)
J1.__doc__ = "Bessel function of the first kind of order 1; ``d/dx j1 = (j0 - jv(2, x)) / 2``."
Erfcx = _unary(
    "Erfcx",
    _special("erfcx"),
    upgrade_to_float_no_complex,
    lambda m, x, z, gz: m.mul(gz, m.sub(m.mul(m.mul(x, 2.0), z), 2.0 / np.sqrt(np.pi))),
)
Erfcx.__doc__ = (
    "Scaled complementary error function ``exp(x**2) * erfc(x)``, without the underflow of "
    "``erfc`` for large x; ``d/dx erfcx = 2 x erfcx(x) - 2 / sqrt(pi)``."
)
Erfcinv = _unary(
    "Erfcinv",
    _special("erfcinv"),
    upgrade_to_float_no_complex,
    lambda m, x, z, gz: m.neg(m.mul(gz, np.sqrt(np.pi) / 2.0, m.exp(m.sqr(z)))),
)
Erfcinv.__doc__ = (
    "Inverse complementary error function; ``d/dx erfcinv = -sqrt(pi) / 2 exp(erfcinv(x)**2)``."
)


class _BesselOfOrder(ScalarOp):
    """Base of ``iv(v, x)`` and ``jv(v, x)``: a Bessel function of real order ``v``.

    The derivative in ``x`` is the recurrence ``(f(v - 1, x) +/- f(v + 1, x)) / 2``; Theano
    implements none in ``v``, so that one is a NullType (an error only if it is asked for).
    """

    nin = 2
    output_types_preference = staticmethod(upgrade_to_float)
    #: +1 for ``iv`` (``(iv(v-1) + iv(v+1)) / 2``), -1 for ``jv``.
    _sign = 1.0

    def symbolic_grad(
        self,
        m: ModuleType,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable | None]:
        (v, x), (gz,) = inputs, output_grads
        below = m.apply_scalar_op(self, m.sub(v, 1), x)
        above = m.apply_scalar_op(self, m.add(v, 1), x)
        combined = m.add(below, above) if self._sign > 0 else m.sub(below, above)
        gx = m.mul(gz, m.mul(combined, 0.5))
        gv = (
            _zero_grad(m, v)
            if _is_discrete(v)
            else grad_not_implemented(self, 0, v, "The gradient in the order v is not defined.")
        )
        return [gv, _float_grad(m, x, gx)]


class Iv(_BesselOfOrder):
    """Modified Bessel function of the first kind of real order ``v``: ``iv(v, x)``."""

    nfunc = staticmethod(_special("iv"))
    _sign = 1.0


class Jv(_BesselOfOrder):
    """Bessel function of the first kind of real order ``v``: ``jv(v, x)``."""

    nfunc = staticmethod(_special("jv"))
    _sign = -1.0


def _chi2_sf(x: Any, k: Any) -> Any:
    import scipy.stats

    return scipy.stats.chi2.sf(x, k)


class Chi2SF(ScalarOp):
    """Chi-square survival function ``1 - chi2_cdf(x; k)`` (the p-value of statistic ``x``
    with ``k`` degrees of freedom), as ``scipy.stats.chi2.sf``; always float64.

    Theano 1.0 defines no gradient for it: asking for one gives a NullType naming the op.
    """

    nin = 2
    output_types_preference = staticmethod(upgrade_to_float64)
    nfunc = staticmethod(_chi2_sf)

    def symbolic_grad(
        self,
        m: ModuleType,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable | None]:
        why = "Theano 1.0 defines no gradient for chi2sf."
        return [
            _zero_grad(m, v) if _is_discrete(v) else grad_not_implemented(self, k, v, why)
            for k, v in enumerate(inputs)
        ]


i0, i1 = I0(name="i0"), I1(name="i1")
j0, j1 = J0(name="j0"), J1(name="j1")
iv, jv = Iv(name="iv"), Jv(name="jv")
erfcx, erfcinv = Erfcx(name="erfcx"), Erfcinv(name="erfcinv")
chi2sf = Chi2SF(name="chi2sf")
