"""Rewrites of the sparse products: fold ``z +/- alpha * dot(x, y)`` into one ``Usmm``.

Theano's ``local_usmm`` (a specialize ``PatternSub``) rewrote ``z - alpha * dot(x, y)``,
with one sparse operand, into ``usmm(-alpha, x, y, z)``; :func:`local_usmm` does the same
for ``+`` and ``-``, either order of the product, and without ``alpha``. Then one kernel
computes the product and the update in a single pass over the output (backend-c's spmm
kernel with its epilogue) instead of a product, a temporary and an elementwise loop.

Theano also specialized ``StructuredDot`` into ``StructuredDotCSC``/``StructuredDotCSR``
(graphs of ``csm_properties``) so that each format had its own C code. Here that rewrite is
not needed: the C kernel of ``StructuredDot``, ``Dot`` and ``Usmm``
(:mod:`opgraph_sparse.kernels.dot`) takes both formats (CSR by rows in parallel, CSC by
scattering columns into per-thread blocks of output rows), keyed on the node's type, so the
graph keeps the user's Op and its shape checks.
"""

from __future__ import annotations

from typing import Any

import opgraph.scalar.basic as ps
from opgraph.graph.basic import Variable
from opgraph.rewriting import node_rewriter
from opgraph.tensor.basic import constant
from opgraph.tensor.elemwise import Elemwise
from opgraph.tensor.math import neg
from opgraph_sparse.basic import is_sparse_variable
from opgraph_sparse.dot import Dot, usmm
from opgraph_sparse.rewriteset import rewrites

__all__ = ["local_usmm"]


def _scalar_op(var: Variable, cls: type) -> bool:
    """Whether ``var`` is computed by an Elemwise of scalar op ``cls`` with two inputs."""
    owner = var.owner
    return (
        owner is not None
        and isinstance(owner.op, Elemwise)
        and isinstance(owner.op.scalar_op, cls)
        and len(owner.inputs) == 2
    )


def _sparse_matrix_dot(fgraph: Any, var: Variable) -> tuple[Variable, Variable] | None:
    """``(x, y)`` when ``var`` is ``Dot(x, y)`` of one sparse and one dense matrix, used
    only here (otherwise the product would be computed twice), else None."""
    owner = var.owner
    if owner is None or not isinstance(owner.op, Dot):
        return None
    x, y = owner.inputs
    if is_sparse_variable(x) == is_sparse_variable(y):
        return None
    dense = y if is_sparse_variable(x) else x
    if dense.type.ndim != 2:
        return None
    if len(fgraph.clients.get(var, ())) != 1:
        return None
    return x, y


def _scaled_dot(fgraph: Any, var: Variable) -> tuple[Variable | None, Variable, Variable] | None:
    """``(alpha, x, y)`` for ``var`` = ``alpha * dot(x, y)`` (either order; ``alpha`` with
    every dimension broadcastable) or ``(None, x, y)`` for ``var`` = ``dot(x, y)``."""
    operands = _sparse_matrix_dot(fgraph, var)
    if operands is not None:
        return None, *operands
    if not _scalar_op(var, ps.Mul) or len(fgraph.clients.get(var, ())) != 1:
        return None
    for alpha, prod in (var.owner.inputs, reversed(var.owner.inputs)):
        if is_sparse_variable(alpha) or not all(alpha.type.broadcastable):
            continue
        operands = _sparse_matrix_dot(fgraph, prod)
        if operands is not None:
            return alpha, *operands
    return None


@rewrites.specialize("sparse")
@node_rewriter([Elemwise])
def local_usmm(fgraph: Any, node: Any) -> list[Variable] | None:
    """``z + alpha * dot(x, y)`` -> ``usmm(alpha, x, y, z)`` and ``z - alpha * dot(x, y)``
    -> ``usmm(-alpha, x, y, z)`` for a dense matrix ``z`` and one sparse operand (``alpha``
    may be absent, or a factor on either side)."""
    (out,) = node.outputs
    is_sub = _scalar_op(out, ps.Sub)
    if not (is_sub or _scalar_op(out, ps.Add)):
        return None
    pairs = [tuple(node.inputs)] if is_sub else [tuple(node.inputs), tuple(node.inputs[::-1])]
    for z, term in pairs:
        if is_sparse_variable(z) or z.type.ndim != 2 or any(z.type.broadcastable):
            continue  # Usmm needs z of the product's full shape (no broadcasting)
        found = _scaled_dot(fgraph, term)
        if found is None:
            continue
        alpha, x, y = found
        if alpha is None:
            alpha = constant(1, dtype=out.type.dtype)
        if is_sub:
            alpha = neg(alpha)
        new = usmm(alpha, x, y, z)
        if new.type != out.type:
            continue  # a broadcastable z or another dtype: keep the elementwise form
        return [new]
    return None
