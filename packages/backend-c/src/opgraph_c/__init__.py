"""opgraph-backend-c: the ``c`` linker, Cython kernels generated at compile time, their cache.

Installing this package makes ``FAST_RUN`` use the ``c`` linker (registered as ``c``,
``cvm`` and ``c|py``): a precompiled VM and call path (:mod:`opgraph_c._vm`) run one thunk
per node; Elemwise nodes (fused Composites included) and reductions run generated,
vectorised loops; BLAS ops, the softmax/cross-entropy family and the structural ops (shapes,
views, indexing, Alloc, argmax) run precompiled C thunks; every other Op runs its
``perform``. Other packages add C kernels for their Ops through the
``opgraph_c_kernels`` hook (:mod:`opgraph_c.hookspecs`).
"""

from opgraph_c.spec import PERFORM, BundlePart, CModule, Precompiled

__version__ = "0.1.0"

__all__ = ["PERFORM", "BundlePart", "CModule", "Precompiled", "__version__"]
