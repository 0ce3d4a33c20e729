"""opgraph-backend-c: the ``c`` linker, Cython kernels generated at compile time, their cache.

Installing this package makes ``FAST_RUN`` use the ``c`` linker (registered as ``c``,
``cvm`` and ``c|py``): a precompiled VM (:mod:`opgraph_c._vm`) runs one thunk per node;
Elemwise nodes (fused Composites included) run generated, vectorised loops; every other Op
runs its ``perform``. Other packages add C kernels for their Ops through the
``opgraph_c_kernels`` hook (:mod:`opgraph_c.hookspecs`).
"""

from opgraph_c.spec import PERFORM, BundlePart, CModule, Precompiled

__version__ = "0.1.0"

__all__ = ["PERFORM", "BundlePart", "CModule", "Precompiled", "__version__"]
