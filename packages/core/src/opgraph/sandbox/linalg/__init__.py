"""``opgraph.sandbox.linalg``: Theano's ``theano.sandbox.linalg`` namespace.

It re-exports the linear algebra of :mod:`opgraph.tensor.slinalg` and
:mod:`opgraph.tensor.nlinalg` under the names Theano code imports from here, plus the
matrix-property hints of :mod:`opgraph.sandbox.linalg.ops` (``psd``) and
``spectral_radius_bound``.
"""

from __future__ import annotations

from opgraph.sandbox.linalg import ops
from opgraph.sandbox.linalg.ops import psd, spectral_radius_bound
from opgraph.tensor.nlinalg import (
    alloc_diag,
    det,
    diag,
    eig,
    eigh,
    extract_diag,
    matrix_inverse,
    trace,
)
from opgraph.tensor.slinalg import cholesky, eigvalsh, solve

__all__ = [
    "alloc_diag",
    "cholesky",
    "det",
    "diag",
    "eig",
    "eigh",
    "eigvalsh",
    "extract_diag",
    "matrix_inverse",
    "ops",
    "psd",
    "solve",
    "spectral_radius_bound",
    "trace",
]
