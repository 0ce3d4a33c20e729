"""``softsign(x) = x / (1 + |x|)`` as one elementwise scalar op (Theano's ``sandbox.softsign``).

Keras' Theano backend imports ``theano.sandbox.softsign.softsign``; it is the same function
as :func:`opgraph.tensor.nnet.softsign`, built as a single scalar op with its own gradient
``1 / (1 + |x|)**2``.
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

__all__ = ["ScalarSoftsign", "scalar_softsign", "softsign"]


def _softsign(x: Any) -> Any:
    x = np.asarray(x)
    return x / (1.0 + np.abs(x))


class ScalarSoftsign(ScalarOp):
    """``x / (1 + |x|)``: a sigmoid-shaped function into ``(-1, 1)``.

    Gradient ``1 / (1 + |x|)**2``.
    """

    nin = 1
    nfunc = staticmethod(_softsign)
    output_types_preference = staticmethod(upgrade_to_float)

    @staticmethod
    def static_impl(x: Any) -> Any:
        """Theano's scalar implementation, ``x / (1 + |x|)``."""
        return x / (1.0 + abs(x))

    def symbolic_grad(
        self,
        m: ModuleType,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable]:
        (x,), (z,), (gz,) = inputs, outputs, output_grads
        if x.type.dtype in discrete_dtypes:
            return [m.zeros_like(x, dtype=z.type.dtype)]
        d = m.add(1, m.abs_(x))
        return [m.true_div(gz, m.mul(d, d))]


scalar_softsign = ScalarSoftsign(upgrade_to_float, name="scalar_softsign")
softsign = Elemwise(scalar_softsign, name="softsign")
