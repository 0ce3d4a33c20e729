"""``opgraph.sparse.sharedvar``: Theano's ``theano.sparse.sharedvar``."""

from opgraph_sparse.sharedvar import *  # noqa: F403
from opgraph_sparse.sharedvar import __all__, shared  # noqa: F401
