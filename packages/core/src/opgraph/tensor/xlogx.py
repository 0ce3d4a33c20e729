"""``x * log(x)`` and ``x * log(y)`` with ``0 * log(0) = 0`` (Theano's ``tensor.xlogx``).

Entropies and KL divergences sum ``p * log(p)`` over probabilities that may be exactly
zero; ``xlogx(0)`` and ``xlogy0(0, y)`` are 0 instead of NaN.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from opgraph.graph.basic import Variable
from opgraph.scalar.basic import ScalarOp, upgrade_to_float
from opgraph.scalar.type import discrete_dtypes
from opgraph.tensor.elemwise import Elemwise

__all__ = ["XlogX", "XlogY0", "scalar_xlogx", "scalar_xlogy0", "xlogx", "xlogy0"]


def _xlogx(x: Any) -> Any:
    x = np.asarray(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x == 0, 0.0, x * np.log(np.where(x == 0, 1, x)))


def _xlogy0(x: Any, y: Any) -> Any:
    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x == 0, 0.0, x * np.log(np.where(x == 0, 1, y)))


def _zero(m: ModuleType, x: Variable, like: Variable) -> Variable:
    return m.zeros_like(x, dtype=like.type.dtype)


class XlogX(ScalarOp):
    """``x * log(x)``, with the special case ``0 * log(0) = 0``. Gradient ``1 + log(x)``."""

    nin = 1
    nfunc = staticmethod(_xlogx)
    output_types_preference = staticmethod(upgrade_to_float)

    def symbolic_grad(
        self,
        m: ModuleType,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable]:
        (x,), (z,), (gz,) = inputs, outputs, output_grads
        if x.type.dtype in discrete_dtypes:
            return [_zero(m, x, z)]
        return [m.mul(gz, m.add(1, m.log(x)))]


class XlogY0(ScalarOp):
    """``x * log(y)``, with the special case ``0 * log(y) = 0`` (also for ``y = 0``).

    Gradient ``(log(y), x / y)``.
    """

    nin = 2
    nfunc = staticmethod(_xlogy0)
    output_types_preference = staticmethod(upgrade_to_float)

    def symbolic_grad(
        self,
        m: ModuleType,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable]:
        (x, y), (z,), (gz,) = inputs, outputs, output_grads
        gx = _zero(m, x, z) if x.type.dtype in discrete_dtypes else m.mul(gz, m.log(y))
        gy = _zero(m, y, z) if y.type.dtype in discrete_dtypes else m.true_div(m.mul(gz, x), y)
        return [gx, gy]


scalar_xlogx = XlogX(upgrade_to_float, name="scalar_xlogx")
xlogx = Elemwise(scalar_xlogx, name="xlogx")
scalar_xlogy0 = XlogY0(upgrade_to_float, name="scalar_xlogy0")
xlogy0 = Elemwise(scalar_xlogy0, name="xlogy0")
