"""Sigmoid-shaped activations: sigmoid, softplus, and the cheap hard/ultra-fast sigmoids.

Theano's ``tensor.nnet.sigm``. ``sigmoid`` and ``softplus`` are the elementwise functions
of :mod:`opgraph.tensor.math` (stable for large ``|x|``), re-exported under their nnet names.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from opgraph.graph.basic import Variable
from opgraph.scalar import basic as ps
from opgraph.scalar.basic import ScalarOp, upgrade_to_float
from opgraph.scalar.type import discrete_dtypes, get_scalar_type
from opgraph.tensor import math as tm
from opgraph.tensor.basic import as_tensor_variable, constant
from opgraph.tensor.elemwise import Elemwise

__all__ = [
    "UltraFastScalarSigmoid",
    "hard_sigmoid",
    "scalar_sigmoid",
    "scalar_softplus",
    "sigmoid",
    "sigmoid_inplace",
    "softplus",
    "ultra_fast_scalar_sigmoid",
    "ultra_fast_sigmoid",
]

sigmoid = tm.sigmoid
sigmoid_inplace = tm.sigmoid_inplace
softplus = tm.softplus
scalar_sigmoid = ps.sigmoid
scalar_softplus = ps.softplus


def _ultra_fast_sigmoid(x: Any) -> Any:
    """Theano's piecewise approximation: ``0.5 * (1 + tanh~(x / 2))``."""
    h = 0.5 * np.asarray(x)
    a = np.abs(h)
    z = np.where(
        a < 1.7,
        1.5 * a / (1 + a),
        np.where(a < 3, 0.935409070603099 + 0.0458812946797165 * (a - 1.7), 0.99505475368673),
    )
    return 0.5 * (np.sign(h) * z + 1.0)


class UltraFastScalarSigmoid(ScalarOp):
    """A piecewise-rational approximation of ``1 / (1 + exp(-x))``.

    It is ``0.5 * (1 + t(x / 2))`` with ``t`` Theano's approximation of ``tanh``: maximum
    absolute error about 0.028 against the exact sigmoid (near ``|x| = 0.54``),
    exactly 0.5 at 0, saturating at 0.0025 / 0.9975 for ``|x| >= 6``. The gradient is
    ``y * (1 - y)`` at the approximated value ``y``.
    """

    nin = 1
    nfunc = staticmethod(_ultra_fast_sigmoid)
    output_types_preference = staticmethod(upgrade_to_float)

    def symbolic_grad(
        self,
        m: ModuleType,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable]:
        (x,), (y,), (gz,) = inputs, outputs, output_grads
        if x.type.dtype in discrete_dtypes:
            return [m.zeros_like(x, dtype=y.type.dtype)]
        return [m.mul(gz, y, m.sub(1, y))]


ultra_fast_scalar_sigmoid = UltraFastScalarSigmoid(name="ultra_fast_scalar_sigmoid")
ultra_fast_sigmoid = Elemwise(ultra_fast_scalar_sigmoid, name="ultra_fast_sigmoid")


def hard_sigmoid(x: Any) -> Variable:
    """``clip(0.2 * x + 0.5, 0, 1)``: a piecewise-linear sigmoid (exact at 0, max error ~0.076).

    Computed in the float dtype of ``x`` (integers become float32/float64 as in Theano).
    """
    x = as_tensor_variable(x)
    (out_type,) = upgrade_to_float(get_scalar_type(x.type.dtype))
    slope = constant(0.2, dtype=out_type.dtype)
    shift = constant(0.5, dtype=out_type.dtype)
    return tm.clip(x * slope + shift, 0, 1)
