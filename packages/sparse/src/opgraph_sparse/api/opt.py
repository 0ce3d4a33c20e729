"""``opgraph.sparse.opt``: Theano's ``theano.sparse.opt``, the package's rewrites.

In Theano this module also held format-specialised Ops with C code (``StructuredDotCSC``,
``MulSDCSR``, ...). In opgraph one C kernel per Op covers both formats, registered through
backend-c's hook (``opgraph_sparse.kernels``), so the graph keeps the user's Ops.
"""

from opgraph_sparse.opt_basic import (
    local_csm_properties_csm,
    local_dense_round_trip,
    local_sparse_round_trip,
)
from opgraph_sparse.opt_dot import local_usmm
from opgraph_sparse.rewrites import load_rewrites
from opgraph_sparse.rewriteset import rewrites

#: Theano's name for the rewrite that removes ``dense_from_sparse(csr_from_dense(x))``.
local_dense_from_sparse_sparse_from_dense = local_dense_round_trip

__all__ = [
    "load_rewrites",
    "local_csm_properties_csm",
    "local_dense_from_sparse_sparse_from_dense",
    "local_dense_round_trip",
    "local_sparse_round_trip",
    "local_usmm",
    "rewrites",
]
