"""The sparse Variable classes: operators and methods (``x.T``, ``x * y``, ``x.toarray()``).

Imported after every Op module, whose functions the methods call; importing it sets
``SparseType.variable_type``/``constant_type``, so that every sparse Op output and constant
is one of these classes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph.graph.basic import Constant, Variable
from opgraph.tensor.shape import shape as tensor_shape
from opgraph_sparse import arith, dot, structure
from opgraph_sparse.basic import cast, csm_data, dense_from_sparse, sp_zeros_like
from opgraph_sparse.type import SparseType

__all__ = ["SparseConstant", "SparseVariable"]


class _SparseOperators:
    """What a sparse variable can do in Python syntax (Theano's ``_sparse_py_operators``).

    Arithmetic and comparisons call the package's functions, which pick the sparse-sparse or
    sparse-dense Op; ``dot``/``__dot__`` is a structured product, as in Theano. Converting
    to dense is never implicit: ``x.toarray()``.
    """

    type: SparseType

    @property
    def T(self) -> Variable:
        """The transpose (csr becomes csc and back)."""
        return structure.transpose(self)

    @property
    def ndim(self) -> int:
        return 2

    @property
    def dtype(self) -> str:
        return self.type.dtype

    @property
    def format(self) -> str:
        return self.type.format

    @property
    def shape(self) -> Variable:
        """The symbolic shape (an int64 vector); no dense matrix is built."""
        return tensor_shape(self)

    @property
    def size(self) -> Variable:
        """The number of stored values (stored zeros count), as in Theano."""
        return csm_data(self).shape[0]  # type: ignore[no-any-return]

    def astype(self, dtype: Any) -> Variable:
        return cast(self, dtype)

    def toarray(self) -> Variable:
        """The dense matrix (``dense_from_sparse``)."""
        return dense_from_sparse(self)

    def zeros_like(self) -> Variable:
        return sp_zeros_like(self)

    def __neg__(self) -> Variable:
        return structure.neg(self)

    def __add__(self, other: Any) -> Variable:
        return arith.add(self, other)

    def __radd__(self, other: Any) -> Variable:
        return arith.add(other, self)

    def __sub__(self, other: Any) -> Variable:
        return arith.sub(self, other)

    def __rsub__(self, other: Any) -> Variable:
        return arith.sub(other, self)

    def __mul__(self, other: Any) -> Variable:
        return arith.mul(self, other)

    def __rmul__(self, other: Any) -> Variable:
        return arith.mul(other, self)

    def __lt__(self, other: Any) -> Variable:
        return arith.lt(self, other)

    def __le__(self, other: Any) -> Variable:
        return arith.le(self, other)

    def __gt__(self, other: Any) -> Variable:
        return arith.gt(self, other)

    def __ge__(self, other: Any) -> Variable:
        return arith.ge(self, other)

    def __dot__(self, other: Any) -> Variable:
        return dot.structured_dot(self, other)

    def __rdot__(self, other: Any) -> Variable:
        return dot.structured_dot(other, self)

    def dot(self, other: Any) -> Variable:
        """``sparse.dot(self, other)``."""
        return dot.dot(self, other)

    def sum(self, axis: int | None = None, sparse_grad: bool = False) -> Variable:
        """``sparse.sp_sum(self, axis, sparse_grad)``."""
        return structure.sp_sum(self, axis, sparse_grad)

    def __getitem__(self, args: Any) -> Variable:
        return structure.getitem(self, args)

    # A sparse variable is not a Python sequence: ``in`` and iteration would loop forever
    # through __getitem__.
    __iter__ = None  # type: ignore[assignment]


class SparseVariable(_SparseOperators, Variable):
    """A symbolic sparse matrix. Printed as Theano does, without its name:
    ``SparseVariable{csr,float64}``."""

    __hash__ = Variable.__hash__

    def __str__(self) -> str:
        return f"{type(self).__name__}{{{self.type.format},{self.type.dtype}}}"

    def __repr__(self) -> str:
        return str(self)


class SparseConstant(_SparseOperators, Constant):
    """A sparse matrix known when the graph is built; equal constants merge by value."""

    __hash__ = Constant.__hash__

    def signature(self) -> tuple[Any, ...]:
        """Type, shape and the matrix's arrays in canonical form (for merging)."""
        sig = self.__dict__.get("_signature")
        if sig is None:
            value = self.data.copy()
            value.sum_duplicates()
            value.sort_indices()
            arrays = (value.data, value.indices, value.indptr)
            sig = (self.type, value.shape, tuple(np.asarray(a).tobytes() for a in arrays))
            self.__dict__["_signature"] = sig
        return sig

    def __str__(self) -> str:
        data = self.data
        return (
            f"SparseConstant{{{self.type.format},{self.type.dtype},"
            f"shape={data.shape},nnz={data.nnz}}}"
        )

    def __repr__(self) -> str:
        return str(self)


SparseType.variable_type = SparseVariable
SparseType.constant_type = SparseConstant
