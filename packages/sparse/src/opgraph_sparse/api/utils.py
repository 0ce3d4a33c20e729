"""``opgraph.sparse.utils``: Theano's ``theano.sparse.utils``."""

from opgraph_sparse.utils import *  # noqa: F403
from opgraph_sparse.utils import __all__  # noqa: F401
