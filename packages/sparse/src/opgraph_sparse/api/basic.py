"""``opgraph.sparse.basic``: Theano's ``theano.sparse.basic``, every Op and function of the
package (Theano kept them all in that one module)."""

from opgraph_sparse.api import *  # noqa: F403
from opgraph_sparse.api import __all__  # noqa: F401
