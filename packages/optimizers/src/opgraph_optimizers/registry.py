"""This package's RewriteSet: decorators record (database, tags, position); the hook installs.

Every rewrite module of the package declares its rewrites on ``rewrites``::

    from opgraph_optimizers.registry import rewrites

    @rewrites.canonicalize
    @node_rewriter([Elemwise])
    def local_mul_one(fgraph, node): ...

Nothing is registered into core's databases by importing a module: the plugin's
``opgraph_register_rewrites`` hook imports :data:`REWRITE_MODULES` and installs the set.
"""

from __future__ import annotations

import importlib

from opgraph.rewriting import RewriteSet

rewrites = RewriteSet("opgraph-optimizers")

#: The modules whose import declares this package's rewrites, in installation order.
REWRITE_MODULES = (
    "opgraph_optimizers.merge",
    "opgraph_optimizers.constant_folding",
    "opgraph_optimizers.canonicalize",
    "opgraph_optimizers.stabilize",
    "opgraph_optimizers.specialize",
    "opgraph_optimizers.shape_feature",
    "opgraph_optimizers.fusion",
    "opgraph_optimizers.inplace",
    "opgraph_optimizers.blas",
    "opgraph_optimizers.builders",
    "opgraph_optimizers.scan",
    "opgraph_optimizers.conv",
    "opgraph_optimizers.linalg",
    "opgraph_optimizers.nnet",
)


def load_rewrite_modules() -> RewriteSet:
    """Import every rewrite module (declaring their rewrites) and return the set."""
    for name in REWRITE_MODULES:
        importlib.import_module(name)
    return rewrites
