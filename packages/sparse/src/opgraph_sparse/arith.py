"""Sparse arithmetic: sums, products and comparisons of a sparse matrix with a sparse
matrix, a dense matrix, a dense vector or a scalar (Theano's ``add``, ``sub``, ``mul`` and
the twelve comparison Ops with ``eq``/``neq``/``lt``/``gt``/``le``/``ge``).

The functions pick the Op from the operands' kinds, in any order; a dense operand on the
left of a comparison swaps the Op (``dense < sparse`` is ``sparse > dense``). ``mul_s_d``
(sparse times a dense matrix or scalar) lives in :mod:`opgraph_sparse.basic`.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import scipy.sparse

from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Variable
from opgraph.graph.op import Op
from opgraph.scalar.type import upcast
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.type import TensorType
from opgraph_sparse import structure
from opgraph_sparse.basic import (
    as_sparse_or_tensor_variable,
    cast,
    check_value,
    continuous_dtypes,
    exact_value,
    fit_gradient,
    is_sparse_variable,
    mul_s_d,
    sp_ones_like,
    sp_zeros_like,
    sparse_input,
)
from opgraph_sparse.type import SparseType, describe_value

__all__ = [
    "AddSD",
    "AddSS",
    "AddSSData",
    "EqualSD",
    "EqualSS",
    "GreaterEqualSD",
    "GreaterEqualSS",
    "GreaterThanSD",
    "GreaterThanSS",
    "LessEqualSD",
    "LessEqualSS",
    "LessThanSD",
    "LessThanSS",
    "MulSS",
    "MulSV",
    "NotEqualSD",
    "NotEqualSS",
    "StructuredAddSV",
    "add",
    "add_s_d",
    "add_s_s",
    "add_s_s_data",
    "eq",
    "equal_s_d",
    "equal_s_s",
    "ge",
    "greater_equal_s_d",
    "greater_equal_s_s",
    "greater_than_s_d",
    "greater_than_s_s",
    "gt",
    "le",
    "less_equal_s_d",
    "less_equal_s_s",
    "less_than_s_d",
    "less_than_s_s",
    "lt",
    "mul",
    "mul_s_s",
    "mul_s_v",
    "neq",
    "not_equal_s_d",
    "not_equal_s_s",
    "structured_add_s_v",
    "sub",
]


# -- helpers shared by the Ops ---------------------------------------------------------------


def _dense_input(op: Op, y: Any, what: str, ndims: tuple[int, ...]) -> Variable:
    """``y`` as a dense Variable of one of ``ndims`` dimensions, or a TypeError."""
    if is_sparse_variable(y) or scipy.sparse.issparse(y):
        raise TypeError(f"{op}: {what} must be dense, got the sparse {y}")
    y = as_tensor_variable(y)
    if y.type.ndim not in ndims:
        wanted = " or ".join(str(n) for n in ndims)
        raise TypeError(
            f"{op}: {what} must have {wanted} dimension(s), got {y} with {y.type.ndim} "
            f"(type {y.type})"
        )
    return y


def _same_shape(op: Op, x: Any, y: Any) -> None:
    """At run time: ValueError naming ``op`` when the two operands' shapes differ."""
    if x.shape != y.shape:
        raise ValueError(
            f"{op}: the operands must have the same shape, got {x.shape} and {y.shape}"
        )


def _pattern_columns(op: Op, x: Any) -> np.ndarray:
    """The column of every stored value of ``x`` (csr/csc), after checking the arrays.

    A matrix built by hand may carry an inconsistent ``indptr`` or an index out of range:
    those are a ValueError/IndexError naming ``op`` rather than a wrong answer.
    """
    n_major, n_minor = x.shape if x.format == "csr" else x.shape[::-1]
    indptr, indices = x.indptr, x.indices
    nnz = len(x.data)
    if (
        len(indptr) != n_major + 1
        or len(indices) != nnz
        or indptr[0] != 0
        or indptr[-1] != nnz
        or (n_major and np.any(np.diff(indptr) < 0))
    ):
        raise ValueError(
            f"{op}: the {x.format} matrix of shape {x.shape} has inconsistent arrays "
            f"(indptr of length {len(indptr)} from {indptr[0] if len(indptr) else '-'} to "
            f"{indptr[-1] if len(indptr) else '-'}, {nnz} stored values)"
        )
    if nnz and (indices.min() < 0 or indices.max() >= n_minor):
        raise IndexError(
            f"{op}: a stored index is out of range for shape {x.shape} "
            f"(indices go from {indices.min()} to {indices.max()})"
        )
    if x.format == "csr":
        return indices
    return np.repeat(np.arange(n_major, dtype=indices.dtype), np.diff(indptr))


def _with_data(x: Any, data: np.ndarray) -> Any:
    """A matrix with ``x``'s class, shape and pattern (copied) holding ``data``."""
    return type(x)((data, x.indices.copy(), x.indptr.copy()), x.shape)


# -- sums -----------------------------------------------------------------------------------


class AddSS(Op):
    """``x + y`` of two sparse matrices (csr or csc, any mix): a sparse matrix in ``x``'s
    format holding the upcast dtype. The gradient is regular (``gz`` for both)."""

    __props__ = ()

    def make_node(self, x: Any, y: Any) -> Apply:
        x = sparse_input(self, x, "x")
        y = sparse_input(self, y, "y")
        dtype = upcast(x.type.dtype, y.type.dtype)
        return Apply(self, [x, y], [SparseType(x.type.format, dtype)()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        x, y = inputs
        check_value(self, node, 0, x)
        check_value(self, node, 1, y)
        _same_shape(self, x, y)
        out[0][0] = exact_value(x + y, node.outputs[0].type)

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        x, y = inputs
        (gz,) = gout
        return [fit_gradient(gz, x), fit_gradient(gz, y)]

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [shapes[0]]


add_s_s = AddSS()


class AddSSData(Op):
    """``x + y`` of two sparse matrices known to share one pattern: the stored values are
    added in order (same format and dtype required). The gradient is structured."""

    __props__ = ()

    def make_node(self, x: Any, y: Any) -> Apply:
        x = sparse_input(self, x, "x")
        y = sparse_input(self, y, "y")
        if x.type != y.type:
            raise TypeError(
                f"{self}: x and y must have the same format and dtype, got {x.type} and "
                f"{y.type}. HINT: cast one of them with sparse.cast"
            )
        return Apply(self, [x, y], [x.type()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        x, y = inputs
        check_value(self, node, 0, x)
        check_value(self, node, 1, y)
        _same_shape(self, x, y)
        if x.data.shape != y.data.shape:
            raise ValueError(
                f"{self}: x and y must have the same pattern, but x stores {x.data.size} "
                f"values and y {y.data.size}"
            )
        z = x.copy()
        z.data += y.data
        out[0][0] = z

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        (gz,) = gout
        return [
            gz if i.type.dtype in continuous_dtypes else sp_zeros_like(i, config.floatX)
            for i in inputs
        ]

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [shapes[0]]


add_s_s_data = AddSSData()


class AddSD(Op):
    """``x + y`` of a sparse ``x`` and a dense matrix ``y`` of the same shape: a dense
    matrix. The gradient for ``x`` is structured (``gz`` read on ``x``'s pattern)."""

    __props__ = ()

    def make_node(self, x: Any, y: Any) -> Apply:
        x = sparse_input(self, x, "x")
        y = _dense_input(self, y, "y", (2,))
        dtype = upcast(x.type.dtype, y.type.dtype)
        return Apply(self, [x, y], [TensorType(dtype, y.type.broadcastable)()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        x, y = inputs
        check_value(self, node, 0, x)
        _same_shape(self, x, y)
        out[0][0] = np.asarray(x + y, dtype=node.outputs[0].type.dtype)

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        x = inputs[0]
        (gz,) = gout
        return [fit_gradient(mul_s_d(sp_ones_like(x), gz), x), gz]

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [shapes[1]]


add_s_d = AddSD()


class StructuredAddSV(Op):
    """``x + y`` on ``x``'s stored values only, for a dense row vector ``y`` (one value per
    column, same dtype as ``x``): a sparse matrix with ``x``'s pattern, stored zeros
    included. The gradient is structured.

    Theano computed it through a dense matrix, which dropped values cancelling to zero and
    left stored zeros alone; here every stored value gets its column's ``y`` (duplicates
    each get it), and the pattern is kept.
    """

    __props__ = ()

    def make_node(self, x: Any, y: Any) -> Apply:
        x = sparse_input(self, x, "x")
        y = _dense_input(self, y, "y", (1,))
        if x.type.dtype != y.type.dtype:
            raise TypeError(
                f"{self}: x and y must have the same dtype, got {x.type.dtype} and "
                f"{y.type.dtype}. HINT: cast one of them"
            )
        return Apply(self, [x, y], [x.type()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        x, y = inputs
        check_value(self, node, 0, x)
        if y.shape != (x.shape[1],):
            raise ValueError(
                f"{self}: y must have one value per column of x, got x of shape {x.shape} "
                f"and y of shape {y.shape}"
            )
        cols = _pattern_columns(self, x)
        data = (x.data + y[cols]).astype(node.outputs[0].type.dtype, copy=False)
        out[0][0] = _with_data(x, data)

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        (gz,) = gout
        return [gz, structure.sp_sum(gz, axis=0, sparse_grad=True)]

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [shapes[0]]


structured_add_s_v = StructuredAddSV()


def _operands(x: Any, y: Any, name: str) -> tuple[Variable, Variable]:
    """Both operands as Variables (sparse ones sparse); a TypeError if neither is sparse."""
    x = as_sparse_or_tensor_variable(x)
    y = as_sparse_or_tensor_variable(y)
    if not (is_sparse_variable(x) or is_sparse_variable(y)):
        raise TypeError(
            f"sparse.{name}: at least one operand must be sparse, got {x} ({x.type}) and "
            f"{y} ({y.type}). HINT: use the tensor operators for dense operands"
        )
    return x, y


def add(x: Any, y: Any) -> Variable:
    """``x + y`` with at least one sparse operand.

    Two sparse matrices give a sparse one (``add_s_s``); a sparse and a dense matrix, in
    either order, a dense one (``add_s_d``). A scalar or a vector is refused, as in Theano:
    adding it everywhere would make the matrix dense (``x.toarray() + s`` says so
    explicitly; ``structured_add``/``structured_add_s_v`` add to the stored values only).
    """
    x, y = _operands(x, y, "add")
    if is_sparse_variable(x) and is_sparse_variable(y):
        return add_s_s(x, y)
    sparse, dense = (x, y) if is_sparse_variable(x) else (y, x)
    if dense.type.ndim != 2:
        raise TypeError(
            f"sparse.add: a sparse matrix can be added to a sparse or dense matrix, got "
            f"{dense} with {dense.type.ndim} dimension(s) (type {dense.type}). HINT: "
            "x.toarray() + s for a dense result, sparse.structured_add(x, s) or "
            "sparse.structured_add_s_v(x, v) to add to the stored values only"
        )
    return add_s_d(sparse, dense)


def sub(x: Any, y: Any) -> Variable:
    """``x - y`` with at least one sparse operand: ``add(x, -y)`` (see :func:`add`)."""
    x, y = _operands(x, y, "sub")
    return add(x, structure.neg(y) if is_sparse_variable(y) else -y)  # type: ignore[operator]


# -- products -------------------------------------------------------------------------------


class MulSS(Op):
    """Elementwise ``x * y`` of two sparse matrices: a sparse matrix in ``x``'s format
    (the intersection of the patterns). The gradient is regular."""

    __props__ = ()

    def make_node(self, x: Any, y: Any) -> Apply:
        x = sparse_input(self, x, "x")
        y = sparse_input(self, y, "y")
        dtype = upcast(x.type.dtype, y.type.dtype)
        return Apply(self, [x, y], [SparseType(x.type.format, dtype)()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        x, y = inputs
        check_value(self, node, 0, x)
        check_value(self, node, 1, y)
        _same_shape(self, x, y)
        out[0][0] = exact_value(x.multiply(y), node.outputs[0].type)

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        x, y = inputs
        (gz,) = gout
        return [fit_gradient(mul_s_s(gz, y), x), fit_gradient(mul_s_s(gz, x), y)]

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [shapes[0]]


mul_s_s = MulSS()


class MulSV(Op):
    """Elementwise ``x * y`` of a sparse ``x`` and a dense row vector ``y`` (one value per
    column, same dtype): a sparse matrix with ``x``'s pattern. The gradient is regular."""

    __props__ = ()

    def make_node(self, x: Any, y: Any) -> Apply:
        x = sparse_input(self, x, "x")
        y = _dense_input(self, y, "y", (1,))
        if x.type.dtype != y.type.dtype:
            raise TypeError(
                f"{self}: x and y must have the same dtype, got {x.type.dtype} and "
                f"{y.type.dtype}. HINT: sparse.mul casts them for you"
            )
        return Apply(self, [x, y], [x.type()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        x, y = inputs
        check_value(self, node, 0, x)
        if y.shape != (x.shape[1],):
            raise ValueError(
                f"{self}: y must have one value per column of x, got x of shape {x.shape} "
                f"and y of shape {y.shape}"
            )
        cols = _pattern_columns(self, x)
        data = (x.data * y[cols]).astype(node.outputs[0].type.dtype, copy=False)
        out[0][0] = _with_data(x, data)

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        x, y = inputs
        (gz,) = gout
        dtype = upcast(gz.type.dtype, y.type.dtype)
        gz_c = gz if gz.type.dtype == dtype else cast(gz, dtype)
        y_c = y if y.type.dtype == dtype else y.astype(dtype)  # type: ignore[attr-defined]
        gy = structure.sp_sum(mul_s_s(x, gz), axis=0, sparse_grad=True)
        return [fit_gradient(mul_s_v(gz_c, y_c), x), gy]

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [shapes[0]]


mul_s_v = MulSV()


def mul(x: Any, y: Any) -> Variable:
    """Elementwise ``x * y`` with at least one sparse operand, in either order.

    Sparse times sparse is ``mul_s_s``; times a dense matrix or a scalar ``mul_s_d`` (the
    gradient for a scalar is a scalar); times a dense vector (one value per column)
    ``mul_s_v``, after casting both to their common dtype. The result is sparse.
    """
    x, y = _operands(x, y, "mul")
    if is_sparse_variable(x) and is_sparse_variable(y):
        return mul_s_s(x, y)
    sparse, dense = (x, y) if is_sparse_variable(x) else (y, x)
    if dense.type.ndim == 1:
        dtype = upcast(sparse.type.dtype, dense.type.dtype)
        if sparse.type.dtype != dtype:
            sparse = cast(sparse, dtype)
        if dense.type.dtype != dtype:
            dense = dense.astype(dtype)  # type: ignore[attr-defined]
        return mul_s_v(sparse, dense)
    return mul_s_d(sparse, dense)


# -- comparisons ----------------------------------------------------------------------------


class _ComparisonSS(Op):
    """Base of the comparisons of two sparse matrices of one format: a uint8 sparse matrix
    (1 where the comparison holds). No gradient, as in Theano."""

    __props__ = ()

    def comparison(self, x: Any, y: Any) -> Any:
        """The scipy comparison this Op computes."""
        raise TypeError(f"{type(self).__name__} is an abstract comparison")

    def make_node(self, x: Any, y: Any) -> Apply:
        x = sparse_input(self, x, "x")
        y = sparse_input(self, y, "y")
        if x.type.format != y.type.format:
            raise TypeError(
                f"{self}: x and y must have the same format, got {x.type.format} and "
                f"{y.type.format}"
            )
        return Apply(self, [x, y], [SparseType(x.type.format, "uint8")()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        x, y = inputs
        check_value(self, node, 0, x)
        check_value(self, node, 1, y)
        _same_shape(self, x, y)
        with warnings.catch_warnings():
            # scipy warns that some comparisons store many values: that is their result.
            warnings.simplefilter("ignore", scipy.sparse.SparseEfficiencyWarning)
            result = self.comparison(x, y)
        out[0][0] = exact_value(result, node.outputs[0].type)

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [shapes[0]]


class _ComparisonSD(Op):
    """Base of the comparisons of a sparse and a dense matrix of the same shape: a dense
    uint8 matrix (1 where the comparison holds). No gradient, as in Theano."""

    __props__ = ()

    def comparison(self, x: Any, y: Any) -> Any:
        """The scipy comparison this Op computes."""
        raise TypeError(f"{type(self).__name__} is an abstract comparison")

    def make_node(self, x: Any, y: Any) -> Apply:
        x = sparse_input(self, x, "x")
        y = _dense_input(self, y, "y", (2,))
        return Apply(self, [x, y], [TensorType("uint8", (False, False))()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        x, y = inputs
        check_value(self, node, 0, x)
        if not isinstance(y, np.ndarray):
            raise TypeError(f"{self}: y must be a dense ndarray, got {describe_value(y)}")
        _same_shape(self, x, y)
        out[0][0] = np.asarray(self.comparison(x.toarray(), y), dtype="uint8")

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [shapes[0]]


class EqualSS(_ComparisonSS):
    """``x == y`` of two sparse matrices (sparse uint8 result)."""

    def comparison(self, x: Any, y: Any) -> Any:
        return x == y


class EqualSD(_ComparisonSD):
    """``x == y`` of a sparse and a dense matrix (dense uint8 result)."""

    def comparison(self, x: Any, y: Any) -> Any:
        return x == y


class NotEqualSS(_ComparisonSS):
    """``x != y`` of two sparse matrices (sparse uint8 result)."""

    def comparison(self, x: Any, y: Any) -> Any:
        return x != y


class NotEqualSD(_ComparisonSD):
    """``x != y`` of a sparse and a dense matrix (dense uint8 result)."""

    def comparison(self, x: Any, y: Any) -> Any:
        return x != y


class LessThanSS(_ComparisonSS):
    """``x < y`` of two sparse matrices (sparse uint8 result)."""

    def comparison(self, x: Any, y: Any) -> Any:
        return x < y


class LessThanSD(_ComparisonSD):
    """``x < y`` of a sparse and a dense matrix (dense uint8 result)."""

    def comparison(self, x: Any, y: Any) -> Any:
        return x < y


class GreaterThanSS(_ComparisonSS):
    """``x > y`` of two sparse matrices (sparse uint8 result)."""

    def comparison(self, x: Any, y: Any) -> Any:
        return x > y


class GreaterThanSD(_ComparisonSD):
    """``x > y`` of a sparse and a dense matrix (dense uint8 result)."""

    def comparison(self, x: Any, y: Any) -> Any:
        return x > y


class LessEqualSS(_ComparisonSS):
    """``x <= y`` of two sparse matrices (sparse uint8 result)."""

    def comparison(self, x: Any, y: Any) -> Any:
        return x <= y


class LessEqualSD(_ComparisonSD):
    """``x <= y`` of a sparse and a dense matrix (dense uint8 result)."""

    def comparison(self, x: Any, y: Any) -> Any:
        return x <= y


class GreaterEqualSS(_ComparisonSS):
    """``x >= y`` of two sparse matrices (sparse uint8 result)."""

    def comparison(self, x: Any, y: Any) -> Any:
        return x >= y


class GreaterEqualSD(_ComparisonSD):
    """``x >= y`` of a sparse and a dense matrix (dense uint8 result)."""

    def comparison(self, x: Any, y: Any) -> Any:
        return x >= y


equal_s_s = EqualSS()
equal_s_d = EqualSD()
not_equal_s_s = NotEqualSS()
not_equal_s_d = NotEqualSD()
less_than_s_s = LessThanSS()
less_than_s_d = LessThanSD()
greater_than_s_s = GreaterThanSS()
greater_than_s_d = GreaterThanSD()
less_equal_s_s = LessEqualSS()
less_equal_s_d = LessEqualSD()
greater_equal_s_s = GreaterEqualSS()
greater_equal_s_d = GreaterEqualSD()


def _comparison(name: str, ss: Op, sd: Op, ds: Op) -> Any:
    """The function ``name(x, y)``: ``ss`` for two sparse operands, ``sd(x, y)`` for a
    sparse ``x`` and a dense ``y``, ``ds(y, x)`` (the mirrored Op) for a dense ``x``."""

    def compare(x: Any, y: Any) -> Variable:
        x, y = _operands(x, y, name)
        if is_sparse_variable(x) and is_sparse_variable(y):
            return ss(x, y)  # type: ignore[no-any-return]
        if is_sparse_variable(x):
            return sd(x, y)  # type: ignore[no-any-return]
        return ds(y, x)  # type: ignore[no-any-return]

    compare.__name__ = compare.__qualname__ = name
    compare.__doc__ = (
        f"``{name}(x, y)`` elementwise, with at least one sparse operand: a sparse uint8 "
        "matrix for two sparse ones (same format), a dense uint8 matrix when one is a "
        "dense matrix (either order)."
    )
    return compare


eq = _comparison("eq", equal_s_s, equal_s_d, equal_s_d)
neq = _comparison("neq", not_equal_s_s, not_equal_s_d, not_equal_s_d)
lt = _comparison("lt", less_than_s_s, less_than_s_d, greater_than_s_d)
gt = _comparison("gt", greater_than_s_s, greater_than_s_d, less_than_s_d)
le = _comparison("le", less_equal_s_s, less_equal_s_d, greater_equal_s_d)
ge = _comparison("ge", greater_equal_s_s, greater_equal_s_d, less_equal_s_d)
