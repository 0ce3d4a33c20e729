"""``opgraph.sparse``: Theano's ``theano.sparse``, every name in one namespace.

Importing it registers the sparse Variable classes on SparseType. Theano's submodule paths
work too: ``opgraph.sparse.basic``, ``.type``, ``.sharedvar``, ``.utils``, ``.opt``.
"""

from opgraph_sparse import arith as _arith
from opgraph_sparse import basic as _basic
from opgraph_sparse import dot as _dot
from opgraph_sparse import indexing as _indexing
from opgraph_sparse import sharedvar as _sharedvar
from opgraph_sparse import structure as _structure
from opgraph_sparse import structured as _structured
from opgraph_sparse import type as _type
from opgraph_sparse import utils as _utils
from opgraph_sparse import variable as _variable
from opgraph_sparse.arith import *
from opgraph_sparse.basic import *
from opgraph_sparse.dot import *
from opgraph_sparse.indexing import *
from opgraph_sparse.sharedvar import *
from opgraph_sparse.sharedvar import shared
from opgraph_sparse.structure import *
from opgraph_sparse.structured import *
from opgraph_sparse.testing import verify_grad_sparse
from opgraph_sparse.type import *
from opgraph_sparse.utils import hash_from_sparse
from opgraph_sparse.variable import *

#: Theano's flag: scipy.sparse is a dependency, so sparse support is always on.
enable_sparse = True

__all__ = sorted(
    {
        name
        for module in (
            _arith,
            _basic,
            _dot,
            _indexing,
            _sharedvar,
            _structure,
            _structured,
            _type,
            _utils,
            _variable,
        )
        for name in module.__all__
    }
    | {"shared", "enable_sparse", "verify_grad_sparse"}
)
