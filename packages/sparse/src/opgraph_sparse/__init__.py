"""opgraph-sparse: scipy.sparse matrices in opgraph graphs, reached as ``opgraph.sparse``.

``import opgraph`` imports only :mod:`opgraph_sparse.plugin` (hooks, cheap); the library
itself, :mod:`opgraph_sparse.api`, loads on the first use of ``opgraph.sparse``.
"""
