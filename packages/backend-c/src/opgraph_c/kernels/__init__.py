"""backend-c's C kernels for core's Ops, one module per core module (``elemwise`` for
``opgraph.tensor.elemwise``), and the scalar-op table fused loops are built from."""

from __future__ import annotations

from opgraph.link.dispatch import KernelRegistry

__all__ = ["register_core_kernels"]


def register_core_kernels(registry: KernelRegistry) -> None:
    """Fill ``registry`` with backend-c's kernels for core's Ops."""
    from opgraph.tensor.elemwise import CAReduce, DimShuffle, Elemwise
    from opgraph_c.kernels.elemwise import ELEMWISE_VERSION, dimshuffle_c, elemwise_c
    from opgraph_c.kernels.reduction import REDUCTION_VERSION, careduce_c

    owner = "opgraph-backend-c"
    registry.register(Elemwise, elemwise_c, version=ELEMWISE_VERSION, owner=owner)
    registry.register(DimShuffle, dimshuffle_c, version=1, owner=owner)
    registry.register(CAReduce, careduce_c, version=REDUCTION_VERSION, owner=owner)
