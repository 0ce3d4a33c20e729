"""opgraph-backend-c: the ``c`` linker, Cython kernels generated at compile time, their cache.

Installing this package makes ``FAST_RUN`` use the ``c`` linker (registered as ``c``,
``cvm`` and ``c|py``): a precompiled VM and call path (:mod:`opgraph_c._vm`) run one thunk
per node; Elemwise nodes (fused Composites included) and reductions run generated,
vectorised loops; BLAS ops, the softmax/cross-entropy family and the structural ops (shapes,
views, indexing, Alloc, argmax) run precompiled C thunks; every other Op runs its
``perform``. Other packages add C kernels for their Ops through the
``opgraph_c_kernels`` hook (:mod:`opgraph_c.hookspecs`).

Big elementwise outputs (4 MiB and more) come from a small buffer pool
(:mod:`opgraph_c._pool`, flag ``c__buffer_pool_mb``): :func:`buffer_pool_info` shows what it
keeps, :func:`release_buffer_pool` gives it back to the OS.
"""

from opgraph_c.spec import PERFORM, BundlePart, CModule, Precompiled

__version__ = "0.1.0"

__all__ = [
    "PERFORM",
    "BundlePart",
    "CModule",
    "Precompiled",
    "__version__",
    "buffer_pool_info",
    "release_buffer_pool",
]


def buffer_pool_info() -> dict[str, int]:
    """What the buffer pool of big elementwise outputs holds, to see the memory it retains.

    Returns ``buffers`` and ``bytes`` (kept now), ``cap_bytes`` (``c__buffer_pool_mb``, as of
    the last pooled allocation), ``min_bytes`` (outputs this big or bigger use the pool),
    ``hits`` and ``misses`` (pooled allocations served from the pool or not, since the
    process started).
    """
    from opgraph_c import _pool  # the extension loads on first use, not with the package

    return _pool.info()


def release_buffer_pool() -> int:
    """Free the buffers the pool keeps (e.g. before a memory-hungry phase); returns the
    bytes given back. The pool fills again as later big results are dropped; set
    ``c__buffer_pool_mb=0`` to stop that."""
    from opgraph_c import _pool

    return _pool.release()
