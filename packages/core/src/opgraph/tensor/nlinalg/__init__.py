"""Linear algebra with NumPy: inverse, determinant, decompositions, diagonals, norms.

Theano's ``tensor.nlinalg``, with ``tensorinv`` / ``tensorsolve``. Every Op takes float
matrices (float16 is computed in float32),
returns the dtype NumPy returns for the input's dtype, never aliases its input, and turns a
non-finite input into NaN outputs (LAPACK's result on NaN/inf is otherwise undefined).
LAPACK failures (a singular matrix) raise ``numpy.linalg.LinAlgError``, a ValueError, whose
message names the Op and the input shape.
"""

from __future__ import annotations

from opgraph.tensor.nlinalg import basic as _basic
from opgraph.tensor.nlinalg import decomp as _decomp
from opgraph.tensor.nlinalg import tensorops as _tensorops
from opgraph.tensor.nlinalg.basic import *
from opgraph.tensor.nlinalg.decomp import *
from opgraph.tensor.nlinalg.tensorops import *

__all__ = [*_basic.__all__, *_decomp.__all__, *_tensorops.__all__]
