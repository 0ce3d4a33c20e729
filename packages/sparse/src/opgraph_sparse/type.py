"""SparseType: the Type of ``scipy.sparse`` matrices of one format and dtype (Theano's)."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse

from opgraph.graph.type import Type

__all__ = ["SparseType", "check_structure", "describe_value", "is_sparse"]


def is_sparse(value: Any) -> bool:
    """True for a ``scipy.sparse`` matrix or array (any format)."""
    return scipy.sparse.issparse(value)


def describe_value(value: Any) -> str:
    """A short description of a value for error messages: ``csr float64 (3, 4)``."""
    if is_sparse(value):
        return f"a {value.format} {value.dtype} sparse matrix of shape {value.shape}"
    if isinstance(value, np.ndarray):
        return f"a dense {value.dtype} ndarray of shape {value.shape}"
    return f"a {type(value).__name__}"


class SparseType(Type):
    """The Type of a 2-d ``scipy.sparse`` matrix in one ``format`` with one ``dtype``.

    Parameters
    ----------
    format
        ``"csr"``, ``"csc"`` or ``"bsr"`` (the compressed formats Theano handled).
    dtype
        The dtype of the stored values (see :attr:`dtype_set`).

    Values are ``scipy.sparse.csr_matrix`` (etc.) objects; ``filter`` converts another format or
    a dense array when not ``strict``. Printed as Theano does: ``Sparse[float64, csr]``.
    """

    __props__ = ("format", "dtype")

    #: The scipy class of each format.
    format_cls: dict[str, type] = {
        "csr": scipy.sparse.csr_matrix,
        "csc": scipy.sparse.csc_matrix,
        "bsr": scipy.sparse.bsr_matrix,
    }
    #: The dtypes a sparse matrix may hold.
    dtype_set = frozenset(
        {
            "int8",
            "int16",
            "int32",
            "int64",
            "uint8",
            "uint16",
            "uint32",
            "uint64",
            "float32",
            "float64",
            "complex64",
            "complex128",
        }
    )
    ndim = 2
    #: Sparse matrices never broadcast (a dimension of length 1 is still a dimension).
    broadcastable = (False, False)

    def __init__(self, format: str, dtype: Any) -> None:
        dtype = str(np.dtype(dtype)) if dtype is not None else "float64"
        if format not in self.format_cls:
            raise ValueError(
                f"SparseType: format must be one of {sorted(self.format_cls)}, got {format!r}"
            )
        if dtype not in self.dtype_set:
            raise TypeError(
                f"SparseType: a sparse matrix cannot hold dtype {dtype}; "
                f"expected one of {sorted(self.dtype_set)}"
            )
        self.format = format
        self.dtype = dtype

    def __str__(self) -> str:
        return f"Sparse[{self.dtype}, {self.format}]"

    __repr__ = __str__

    def filter(self, data: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        """``data`` as a matrix of this format and dtype, or TypeError saying what differs.

        Without ``strict``, another sparse format or a 2-d dense array is converted, and the
        dtype is cast when that loses nothing (or when ``allow_downcast``).
        """
        cls = self.format_cls[self.format]
        if isinstance(data, cls) and str(data.dtype) == self.dtype:
            check_structure(data, str(self))
            return data
        if strict:
            raise TypeError(
                f"{self} expects a {self.format} {self.dtype} sparse matrix, "
                f"got {describe_value(data)} (strict: no conversion)"
            )
        if is_sparse(data):
            if data.ndim != 2:
                raise TypeError(f"{self} expects a 2-d matrix, got {describe_value(data)}")
            value = data.asformat(self.format)
        elif isinstance(data, np.ndarray | list | tuple | np.generic):
            dense = np.asarray(data)
            raise TypeError(
                f"{self} expects a {self.format} sparse matrix, got a dense {dense.dtype} "
                f"value of shape {dense.shape}: dense values are not converted implicitly. "
                f"HINT: pass scipy.sparse.{self.format}_matrix(value), or declare the input "
                "as a dense matrix and convert it in the graph with sparse.csr_from_dense"
            )
        else:
            raise TypeError(f"{self} expects a sparse matrix, got {describe_value(data)}")
        if not isinstance(value, cls):  # a sparse array (scipy's *_array classes)
            value = cls(value)
        check_structure(value, str(self))
        if str(value.dtype) != self.dtype:
            safe = np.can_cast(value.dtype, self.dtype, casting="safe")
            if not (safe or allow_downcast):
                raise TypeError(
                    f"{self} expects dtype {self.dtype}, got {describe_value(data)}: casting "
                    f"{value.dtype} to {self.dtype} may lose precision. HINT: pass "
                    "allow_downcast=True or cast the value first"
                )
            value = value.astype(self.dtype)
        return value

    def is_valid_value(self, data: Any) -> bool:
        """True for a matrix of exactly this format and dtype."""
        return isinstance(data, self.format_cls[self.format]) and str(data.dtype) == self.dtype

    def values_eq(self, a: Any, b: Any) -> bool:
        """Equal shapes and equal values; stored zeros, duplicates and order do not matter,
        and a NaN equals a NaN in the same place (as for tensors)."""
        if not (is_sparse(a) and is_sparse(b)) or a.shape != b.shape:
            return False
        ca, cb = _canonical(a), _canonical(b)
        return (
            np.array_equal(ca.indptr, cb.indptr)
            and np.array_equal(ca.indices, cb.indices)
            and np.array_equal(ca.data, cb.data, equal_nan=True)
        )

    def values_eq_approx(
        self, a: Any, b: Any, eps: float | None = None, allow_remove_inf: bool = False
    ) -> bool:
        """Equal shapes and values equal up to a dtype-aware tolerance (for DEBUG_MODE); a
        NaN equals a NaN in the same place, and a stored value near zero equals no value."""
        if not (is_sparse(a) and is_sparse(b)) or a.shape != b.shape:
            return False
        if eps is None:
            eps = 1e-4 if self.dtype in ("float32", "complex64") else 1e-6
        ca, cb = _canonical(a), _canonical(b)
        if np.array_equal(ca.indptr, cb.indptr) and np.array_equal(ca.indices, cb.indices):
            return bool(np.allclose(ca.data, cb.data, rtol=eps, atol=eps, equal_nan=True))
        if np.isnan(ca.data).any() or np.isnan(cb.data).any():
            return False  # NaN in different places
        diff = abs(ca - cb)
        return diff.nnz == 0 or float(np.max(diff.data)) < eps

    def may_share_memory(self, a: Any, b: Any) -> bool:
        """True if any buffer of ``a`` (data, indices, indptr) may overlap one of ``b``'s."""
        if a is b:
            return True
        arrays_a = _buffers(a)
        arrays_b = _buffers(b)
        return any(np.may_share_memory(x, y) for x in arrays_a for y in arrays_b)

    def get_shape_info(self, obj: Any) -> Any:
        """What the profiler needs to size a value: shape and the lengths of its arrays."""
        return (obj.shape, obj.data.size, obj.indices.size, obj.indptr.size, obj.nnz)

    def get_size(self, shape_info: Any) -> int:
        """Bytes taken by a value of this Type with ``shape_info`` (see get_shape_info)."""
        _, data, indices, indptr, _ = shape_info
        return data * np.dtype(self.dtype).itemsize + (indices + indptr) * 4

    def convert_variable(self, var: Any) -> Any:
        """A variable of this very type passes; any other is not converted implicitly."""
        return var if var.type == self else None


def check_structure(value: Any, what: str) -> None:
    """ValueError when a csr/csc value's arrays do not describe a matrix of its shape.

    scipy builds such matrices without complaint (``csr_matrix((data, indices, indptr),
    shape)`` checks no index), and its compiled routines then read and write out of bounds.
    Checked: ``indptr``'s length, that it starts at 0, never decreases and ends within the
    stored values, and that every index is within the matrix. Unsorted and duplicate indices
    are valid (scipy sums duplicates). ``what`` names the input in the message.
    """
    if value.format not in ("csr", "csc"):
        return
    rows, cols = value.shape
    major, minor = (rows, cols) if value.format == "csr" else (cols, rows)
    indptr, indices = value.indptr, value.indices
    kind = "column" if value.format == "csr" else "row"
    if indptr.shape != (major + 1,):
        raise ValueError(
            f"{what}: a {value.format} matrix of shape {value.shape} needs an indptr of "
            f"{major + 1} elements, got {indptr.shape[0]}"
        )
    if indptr[0] != 0 or indptr[-1] > indices.shape[0] or indptr[-1] > value.data.shape[0]:
        raise ValueError(
            f"{what}: indptr must start at 0 and end within the {indices.shape[0]} stored "
            f"values, got indptr[0]={indptr[0]}, indptr[-1]={indptr[-1]}"
        )
    if major > 1 and (np.diff(indptr) < 0).any():
        raise ValueError(f"{what}: indptr decreases: it must be non-decreasing")
    used = indices[: indptr[-1]]
    if used.size and (used.min() < 0 or used.max() >= minor):
        bad = used[(used < 0) | (used >= minor)][0]
        raise ValueError(
            f"{what}: {kind} index {bad} is out of range for a {value.format} matrix of "
            f"shape {value.shape} ({kind}s 0..{minor - 1})"
        )


def _canonical(value: Any) -> Any:
    """A csr copy of ``value`` with duplicates summed, indices sorted and zeros dropped."""
    copy = scipy.sparse.csr_matrix(value, copy=True)
    copy.sum_duplicates()
    copy.eliminate_zeros()
    return copy


def _buffers(value: Any) -> list[np.ndarray]:
    """The ndarrays behind a sparse matrix (or the array itself for a dense value)."""
    if is_sparse(value):
        return [
            getattr(value, name) for name in ("data", "indices", "indptr") if hasattr(value, name)
        ]
    if isinstance(value, np.ndarray):
        return [value]
    return []
