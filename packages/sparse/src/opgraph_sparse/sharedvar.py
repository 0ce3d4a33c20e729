"""Sparse shared variables: ``opgraph.shared(scipy_matrix)`` (through core's constructor hook)."""

from __future__ import annotations

from typing import Any

from opgraph.compile.sharedvalue import SharedVariable
from opgraph_sparse.type import SparseType, is_sparse
from opgraph_sparse.variable import _SparseOperators

__all__ = ["SparseTensorSharedVariable", "sparse_constructor"]


class SparseTensorSharedVariable(_SparseOperators, SharedVariable):
    """A shared csr/csc/bsr matrix: a sparse variable whose value persists between calls.

    ``set_value`` takes any matrix the type's ``filter`` accepts (another format or a
    dtype that casts safely is converted, unless the variable is strict).
    """

    __hash__ = SharedVariable.__hash__

    def __str__(self) -> str:
        return self.name if self.name is not None else f"<{self.type}>"


def sparse_constructor(
    value: Any,
    name: str | None = None,
    strict: bool = False,
    allow_downcast: bool | None = None,
    borrow: bool = False,
    format: str | None = None,
) -> SparseTensorSharedVariable:
    """A shared variable holding the scipy matrix ``value`` (copied unless ``borrow``).

    ``format`` converts it to another format (its own by default).
    """
    if not is_sparse(value):
        raise TypeError(f"sparse.shared needs a scipy.sparse matrix, got {type(value).__name__}")
    format = format or value.format
    if format not in SparseType.format_cls:
        value, format = value.tocsr(), "csr"
    sparse_type = SparseType(format, value.dtype)
    if not borrow:
        value = value.copy()
    return SparseTensorSharedVariable(
        name=name, type=sparse_type, value=value, strict=strict, allow_downcast=allow_downcast
    )


#: Theano's ``theano.sparse.shared``.
shared = sparse_constructor
