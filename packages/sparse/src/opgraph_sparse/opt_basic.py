"""Rewrites of the format Ops: fold ``csm_properties(CSM(...))`` and drop dense round trips,
both ``dense_from_sparse(csr_from_dense(x))`` and ``csr_from_dense(dense_from_sparse(x))``."""

from __future__ import annotations

from typing import Any

from opgraph.graph.basic import Variable
from opgraph.rewriting import node_rewriter
from opgraph.tensor.math import cast as tensor_cast
from opgraph_sparse.basic import CSM, CSMProperties, DenseFromSparse, SparseFromDense
from opgraph_sparse.rewriteset import rewrites
from opgraph_sparse.structure import clean

__all__ = ["local_csm_properties_csm", "local_dense_round_trip", "local_sparse_round_trip"]


def _as_type(var: Variable, like: Variable) -> Variable:
    """``var`` cast to ``like``'s dtype when the two differ (int64 indices given to CSM)."""
    if var.type == like.type:
        return var
    return tensor_cast(var, like.type.dtype)


@rewrites.canonicalize("sparse")
@rewrites.stabilize("sparse")
@node_rewriter([CSMProperties])
def local_csm_properties_csm(fgraph: Any, node: Any) -> list[Variable] | None:
    """``csm_properties(CSM(data, indices, indptr, shape))`` -> the four inputs themselves."""
    (x,) = node.inputs
    if x.owner is None or not isinstance(x.owner.op, CSM):
        return None
    return [_as_type(v, out) for v, out in zip(x.owner.inputs, node.outputs, strict=True)]


@rewrites.canonicalize("sparse")
@node_rewriter([DenseFromSparse])
def local_dense_round_trip(fgraph: Any, node: Any) -> list[Variable] | None:
    """``dense_from_sparse(csr_from_dense(x))`` -> ``x`` (a 2-d ``x``, same type)."""
    (x,) = node.inputs
    if x.owner is None or not isinstance(x.owner.op, SparseFromDense):
        return None
    (dense,) = x.owner.inputs
    if dense.type != node.outputs[0].type:
        return None  # a vector made 2-d, or broadcastable dims: the types differ
    return [dense]


@rewrites.canonicalize("sparse")
@node_rewriter([SparseFromDense])
def local_sparse_round_trip(fgraph: Any, node: Any) -> list[Variable] | None:
    """``csr_from_dense(dense_from_sparse(x))`` -> ``clean(x)`` for a csr ``x`` (csc alike):
    the same canonical matrix (duplicates summed, indices sorted, zeros dropped) without
    building the dense one."""
    (dense,) = node.inputs
    if dense.owner is None or not isinstance(dense.owner.op, DenseFromSparse):
        return None
    (x,) = dense.owner.inputs
    if x.type != node.outputs[0].type:
        return None
    return [clean(x)]
