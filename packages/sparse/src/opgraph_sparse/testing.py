"""Gradient checks for Ops with sparse inputs or outputs (Theano's ``verify_grad_sparse``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from opgraph.graph.basic import Variable
from opgraph.tensor.gradcheck import verify_grad
from opgraph_sparse.basic import (
    CSM,
    DenseFromSparse,
    SparseFromDense,
    is_sparse_variable,
)
from opgraph_sparse.type import is_sparse

__all__ = ["verify_grad_sparse"]


def verify_grad_sparse(
    op: Callable[..., Any], pt: Sequence[Any], structured: bool = False, **kwargs: Any
) -> None:
    """``verify_grad`` for ``op`` at ``pt``, where inputs and the output may be sparse.

    A sparse point is checked through its dense values (``structured=False``: every entry
    is perturbed, the input rebuilt with ``csr_from_dense``/``csc_from_dense``) or through
    its stored values only (``structured=True``: the pattern is kept, as structured
    gradients assume). A sparse output is densified (structured or not, alike). Other
    keywords go to :func:`opgraph.tensor.gradcheck.verify_grad`.
    """
    dense_points: list[Any] = []
    rebuild: list[Callable[[Variable], Variable]] = []
    for p in pt:
        if not is_sparse(p):
            dense_points.append(p)
            rebuild.append(lambda v: v)
            continue
        if p.format not in ("csr", "csc"):
            raise TypeError(f"verify_grad_sparse: a {p.format} point cannot be rebuilt")
        if structured:
            dense_points.append(p.data)
            rebuild.append(_from_data(CSM(p.format), p.indices, p.indptr, p.shape))
        else:
            dense_points.append(p.toarray())
            rebuild.append(SparseFromDense(p.format))

    def fun(*inputs: Variable) -> Variable:
        out = op(*[conv(v) for conv, v in zip(rebuild, inputs, strict=True)])
        if isinstance(out, list | tuple):
            raise TypeError("verify_grad_sparse checks Ops with one output")
        if is_sparse_variable(out):
            out = DenseFromSparse(structured=structured)(out)
        return out

    verify_grad(fun, dense_points, **kwargs)


def _from_data(csm: CSM, indices: Any, indptr: Any, shape: Any) -> Callable[[Variable], Variable]:
    """A function rebuilding a matrix of a fixed pattern from a data vector."""

    def rebuild(data: Variable) -> Variable:
        return csm(data, indices.copy(), indptr.copy(), shape)

    return rebuild
