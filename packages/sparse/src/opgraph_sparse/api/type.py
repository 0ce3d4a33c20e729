"""``opgraph.sparse.type``: Theano's ``theano.sparse.type``."""

from opgraph_sparse.type import *  # noqa: F403
from opgraph_sparse.type import __all__  # noqa: F401
