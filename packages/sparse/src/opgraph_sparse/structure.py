"""Structure ops of sparse matrices: transpose, negation, row/column scaling, sums, diagonals,
index sorting and zero removal, stacking, and (from :mod:`opgraph_sparse.indexing`) indexing.

These are Theano 1.0's ``theano.sparse`` Ops of the same names, with the same semantics,
gradients (structured where Theano's are) and printed names. Every Op takes csr or csc
matrices (a bsr matrix or a dense value is a TypeError naming the Op) and returns values of
exactly its declared Type. :func:`clean` gives a matrix's canonical form: duplicates summed,
indices sorted, explicit zeros removed (what ``csr_from_dense(x.toarray())`` would give).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse

from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Variable
from opgraph.graph.op import Op
from opgraph.scalar.type import upcast
from opgraph.tensor import math as tm
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.joining import Split, stack
from opgraph.tensor.shape import shape as tensor_shape
from opgraph.tensor.type import TensorType
from opgraph_sparse.basic import (
    SparseFromDense,
    as_sparse_variable,
    cast,
    check_value,
    continuous_dtypes,
    dense_from_sparse,
    exact_value,
    fit_gradient,
    is_sparse_variable,
    mul_s_d,
    sp_ones_like,
    sp_zeros_like,
    sparse_input,
)
from opgraph_sparse.indexing import getitem  # noqa: F401  (SparseVariable.__getitem__)
from opgraph_sparse.type import SparseType

__all__ = [
    "ColScaleCSC",
    "Diag",
    "EnsureSortedIndices",
    "HStack",
    "Neg",
    "Remove0",
    "RowScaleCSC",
    "SpSum",
    "SquareDiagonal",
    "Transpose",
    "VStack",
    "clean",
    "col_scale",
    "diag",
    "ensure_sorted_indices",
    "hstack",
    "neg",
    "remove0",
    "row_scale",
    "sp_sum",
    "square_diagonal",
    "transpose",
    "vstack",
]


# -- helpers ---------------------------------------------------------------------------------


def _vector_input(op: Op, s: Any, what: str) -> Variable:
    """``s`` as a dense vector variable, or a TypeError naming ``op``."""
    if is_sparse_variable(s):
        raise TypeError(f"{op}: {what} must be a dense vector, got the sparse {s}")
    s = as_tensor_variable(s)
    if s.type.ndim != 1:
        raise TypeError(f"{op}: {what} must be a vector, got {s} of type {s.type}")
    return s


def _fit_dense(g: Variable, dtype: str) -> Variable:
    """The dense gradient ``g`` cast to ``dtype`` when it differs."""
    return g if g.type.dtype == dtype else tm.cast(g, dtype)


# -- transpose and negation ------------------------------------------------------------------


class Transpose(Op):
    """The transpose of a csr/csc matrix: a csr matrix becomes csc and back, a view of the
    same arrays (as in Theano: nothing is copied, which matters in gradients, where every
    structured product's gradient reads the transpose). Regular gradient (the transposed
    output gradient). Printed ``SparseTranspose``."""

    __props__ = ()
    view_map = {0: [0]}
    format_map = {"csr": "csc", "csc": "csr"}

    def __str__(self) -> str:
        return "SparseTranspose"

    def make_node(self, x: Any) -> Apply:
        x = sparse_input(self, x)
        out = SparseType(self.format_map[x.type.format], x.type.dtype)()
        return Apply(self, [x], [out])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        (x,) = inputs
        check_value(self, node, 0, x)
        out[0][0] = exact_value(x.transpose(copy=False), node.outputs[0].type)

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        (gz,) = gout
        return [transpose(gz)]

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [tuple(shapes[0][::-1])]


transpose = Transpose()


class Neg(Op):
    """``-x`` for a csr/csc matrix (same pattern). Regular gradient. Printed ``SparseNeg``."""

    __props__ = ()

    def __str__(self) -> str:
        return "SparseNeg"

    def make_node(self, x: Any) -> Apply:
        x = sparse_input(self, x)
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        (x,) = inputs
        check_value(self, node, 0, x)
        out[0][0] = exact_value(-x, node.outputs[0].type)

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        (gz,) = gout
        return [neg(gz)]

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [shapes[0]]


neg = Neg()


# -- scaling rows and columns ----------------------------------------------------------------


class ColScaleCSC(Op):
    """Column ``j`` of a csc matrix ``x`` times ``s[j]`` for a dense vector ``s`` of length
    ``x.shape[1]`` (same pattern, ``x``'s type). Structured gradient. Use :func:`col_scale`,
    which takes both formats."""

    __props__ = ()

    def make_node(self, x: Any, s: Any) -> Apply:
        x = sparse_input(self, x, formats=("csc",))
        s = _vector_input(self, s, "the scale")
        return Apply(self, [x, s], [x.type()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        x, s = inputs
        check_value(self, node, 0, x)
        if s.shape != (x.shape[1],):
            raise ValueError(
                f"{self}: the scale has shape {s.shape}, expected ({x.shape[1]},) for a "
                f"matrix of shape {x.shape} (one value per column)"
            )
        cols = np.repeat(np.arange(x.shape[1]), np.diff(x.indptr))
        data = (x.data * s[cols]).astype(x.dtype, copy=False)
        y = scipy.sparse.csc_matrix((data, x.indices.copy(), x.indptr.copy()), shape=x.shape)
        out[0][0] = exact_value(y, node.outputs[0].type)

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        x, s = inputs
        (gz,) = gout
        gx = fit_gradient(col_scale(gz, s), x)
        gs = sp_sum(mul_s_d(x, dense_from_sparse(gz)), axis=0)
        return [gx, _fit_dense(gs, s.type.dtype)]

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [shapes[0]]


class RowScaleCSC(Op):
    """Row ``i`` of a csc matrix ``x`` times ``s[i]`` for a dense vector ``s`` of length
    ``x.shape[0]`` (same pattern, ``x``'s type). Structured gradient. Use :func:`row_scale`,
    which takes both formats."""

    __props__ = ()

    def make_node(self, x: Any, s: Any) -> Apply:
        x = sparse_input(self, x, formats=("csc",))
        s = _vector_input(self, s, "the scale")
        return Apply(self, [x, s], [x.type()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        x, s = inputs
        check_value(self, node, 0, x)
        if s.shape != (x.shape[0],):
            raise ValueError(
                f"{self}: the scale has shape {s.shape}, expected ({x.shape[0]},) for a "
                f"matrix of shape {x.shape} (one value per row)"
            )
        data = (x.data * s[x.indices]).astype(x.dtype, copy=False)
        y = scipy.sparse.csc_matrix((data, x.indices.copy(), x.indptr.copy()), shape=x.shape)
        out[0][0] = exact_value(y, node.outputs[0].type)

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        x, s = inputs
        (gz,) = gout
        gx = fit_gradient(row_scale(gz, s), x)
        gs = sp_sum(mul_s_d(x, dense_from_sparse(gz)), axis=1)
        return [gx, _fit_dense(gs, s.type.dtype)]

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [shapes[0]]


def col_scale(x: Any, s: Any) -> Variable:
    """Column ``j`` of the csr/csc matrix ``x`` times ``s[j]`` (a dense vector), in ``x``'s
    format: ``ColScaleCSC`` on a csc matrix, ``RowScaleCSC`` of the transpose on a csr one.
    The gradient is structured."""
    x = as_sparse_variable(x)
    if x.type.format == "csc":
        return ColScaleCSC()(x, s)
    if x.type.format == "csr":
        return transpose(RowScaleCSC()(transpose(x), s))
    raise TypeError(f"col_scale: x must be a csr or csc matrix, got a {x.type.format} one ({x})")


def row_scale(x: Any, s: Any) -> Variable:
    """Row ``i`` of the csr/csc matrix ``x`` times ``s[i]`` (a dense vector), in ``x``'s
    format (``col_scale`` of the transpose, transposed back). The gradient is structured."""
    x = as_sparse_variable(x)
    if x.type.format not in ("csr", "csc"):
        raise TypeError(
            f"row_scale: x must be a csr or csc matrix, got a {x.type.format} one ({x})"
        )
    return transpose(col_scale(transpose(x), s))


# -- sums and diagonals ----------------------------------------------------------------------


class SpSum(Op):
    """The sum of a csr/csc matrix over ``axis`` (None: all of it, a scalar; 0 or 1: a
    vector), as a dense tensor of the matrix's dtype.

    ``sparse_grad=True`` gives a structured gradient (only the stored positions), False the
    regular one; both are sparse matrices of the input's format. As in Theano,
    ``sparse_grad`` is not a prop: two SpSum of one axis are equal and merge. Printed
    ``SpSum{axis=None}``.
    """

    __props__ = ("axis",)

    def __init__(self, axis: int | None = None, sparse_grad: bool = True) -> None:
        if axis not in (None, 0, 1):
            raise ValueError(f"SpSum: axis must be None, 0 or 1, got {axis!r}")
        self.axis = axis
        self.structured = sparse_grad

    def __str__(self) -> str:
        return f"SpSum{{axis={self.axis}}}"

    def make_node(self, x: Any) -> Apply:
        x = sparse_input(self, x)
        bcast = () if self.axis is None else (False,)
        return Apply(self, [x], [TensorType(x.type.dtype, bcast)()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        (x,) = inputs
        check_value(self, node, 0, x)
        dtype = node.outputs[0].type.dtype
        if self.axis is None:
            out[0][0] = np.asarray(x.sum(dtype=dtype), dtype=dtype)
        else:
            out[0][0] = np.asarray(x.sum(axis=self.axis, dtype=dtype), dtype=dtype).ravel()

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        (x,) = inputs
        (gz,) = gout
        if x.type.dtype not in continuous_dtypes:
            return [sp_zeros_like(x, config.floatX)]
        gz = _fit_dense(gz, x.type.dtype)
        if self.structured:
            ones = sp_ones_like(x)
            if self.axis is None:
                r = mul_s_d(ones, gz)
            elif self.axis == 0:
                r = col_scale(ones, gz)
            else:
                r = row_scale(ones, gz)
            return [fit_gradient(r, x)]
        ones = tm.ones_like(dense_from_sparse(x))
        if self.axis is None:
            dense = ones * gz
        elif self.axis == 0:
            dense = ones * gz.dimshuffle("x", 0)  # type: ignore[attr-defined]
        else:
            dense = ones * gz.dimshuffle(0, "x")  # type: ignore[attr-defined]
        return [SparseFromDense(x.type.format)(_fit_dense(dense, x.type.dtype))]

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        if self.axis is None:
            return [()]
        return [(shapes[0][1 - self.axis],)]


def sp_sum(x: Any, axis: int | None = None, sparse_grad: bool = False) -> Variable:
    """The sum of the sparse matrix ``x`` over ``axis`` (None, 0 or 1) as a dense tensor;
    ``sparse_grad=True`` makes the gradient structured (see :class:`SpSum`)."""
    return SpSum(axis, sparse_grad)(x)


class Diag(Op):
    """The diagonal of a square csr/csc matrix as a dense vector of its dtype (a non-square
    matrix is a ValueError, as in Theano). Regular gradient (:func:`square_diagonal`)."""

    __props__ = ()

    def make_node(self, x: Any) -> Apply:
        x = sparse_input(self, x)
        return Apply(self, [x], [TensorType(x.type.dtype, (False,))()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        (x,) = inputs
        check_value(self, node, 0, x)
        if x.shape[0] != x.shape[1]:
            raise ValueError(f"{self}: the matrix must be square, got shape {x.shape}")
        out[0][0] = np.asarray(x.diagonal(), dtype=node.outputs[0].type.dtype)

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        (x,) = inputs
        (gz,) = gout
        g = square_diagonal(gz)  # csc; its transpose is the same matrix in csr
        if x.type.format == "csr":
            g = transpose(g)
        if g.type.dtype != x.type.dtype:
            g = cast(g, x.type.dtype)
        return [g]

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        rows, cols = shapes[0]
        if isinstance(rows, int | np.integer) and isinstance(cols, int | np.integer):
            return [(min(int(rows), int(cols)),)]
        return [(tm.minimum(rows, cols),)]


diag = Diag()


class SquareDiagonal(Op):
    """A square csc matrix whose diagonal is the dense vector ``diag`` (zeros of ``diag``
    are stored, as in Theano). Regular gradient (the output gradient's diagonal)."""

    __props__ = ()

    def make_node(self, diag: Any) -> Apply:
        diag = _vector_input(self, diag, "the diagonal")
        return Apply(self, [diag], [SparseType("csc", diag.type.dtype)()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        (values,) = inputs
        n = values.shape[0]
        indices = np.arange(n, dtype=np.int32)
        indptr = np.arange(n + 1, dtype=np.int32)
        value = scipy.sparse.csc_matrix((values.copy(), indices, indptr), shape=(n, n))
        out[0][0] = exact_value(value, node.outputs[0].type)

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        (values,) = inputs
        (gz,) = gout
        return [_fit_dense(diag(gz), values.type.dtype)]

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [(shapes[0][0], shapes[0][0])]


square_diagonal = SquareDiagonal()


# -- canonical forms -------------------------------------------------------------------------


class EnsureSortedIndices(Op):
    """``x`` with the indices of each row (csr) or column (csc) sorted; the values are those
    of ``x``. ``inplace=True`` sorts ``x``'s own arrays and returns it (a view, as in
    Theano). Regular gradient. Printed ``EnsureSortedIndices{no_inplace}``/``{inplace}``."""

    __props__ = ("inplace",)

    def __init__(self, inplace: bool) -> None:
        self.inplace = bool(inplace)
        if self.inplace:
            self.view_map = {0: [0]}

    def __str__(self) -> str:
        return f"EnsureSortedIndices{{{'inplace' if self.inplace else 'no_inplace'}}}"

    def make_node(self, x: Any) -> Apply:
        x = sparse_input(self, x)
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        (x,) = inputs
        check_value(self, node, 0, x)
        if self.inplace:
            x.sort_indices()
            out[0][0] = x
        else:
            out[0][0] = x.sorted_indices()

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        return [gout[0]]

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return shapes


ensure_sorted_indices = EnsureSortedIndices(inplace=False)


class Remove0(Op):
    """``x`` without explicitly stored zeros. Duplicate entries are summed first (so entries
    that cancel out go too) and the indices come out sorted. ``inplace=True`` rewrites
    ``x``'s own arrays (it destroys its input). Regular gradient. Printed ``Remove0{}`` /
    ``Remove0{inplace}``."""

    __props__ = ("inplace",)

    def __init__(self, inplace: bool = False) -> None:
        self.inplace = bool(inplace)
        if self.inplace:
            self.destroy_map = {0: [0]}

    def __str__(self) -> str:
        return f"Remove0{{{'inplace' if self.inplace else ''}}}"

    def make_node(self, x: Any) -> Apply:
        x = sparse_input(self, x)
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        (x,) = inputs
        check_value(self, node, 0, x)
        y = x if self.inplace else x.copy()
        y.sum_duplicates()
        y.eliminate_zeros()
        out[0][0] = y

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        return [gout[0]]

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return shapes


remove0 = Remove0()


def clean(x: Any) -> Variable:
    """The canonical form of the csr/csc matrix ``x``: duplicates summed, indices sorted,
    explicit zeros removed (``ensure_sorted_indices(remove0(x))``). For a csr ``x`` it is
    what ``csr_from_dense(x.toarray())`` gives, without the dense matrix. Regular gradient."""
    return ensure_sorted_indices(remove0(x))


# -- stacking --------------------------------------------------------------------------------


class HStack(Op):
    """Sparse matrices with equal row counts side by side (``scipy.sparse.hstack``), as a
    matrix of ``format`` (default csc) and ``dtype`` (required; :func:`hstack` picks the
    upcast). Regular gradient. Printed ``HStack(csc,float64)``."""

    __props__ = ("format", "dtype")
    _axis = 1

    def __init__(self, format: str | None = None, dtype: Any = None) -> None:
        name = type(self).__name__
        if format is None:
            format = "csc"
        if format not in ("csr", "csc"):
            raise ValueError(f"{name}: format must be 'csr' or 'csc', got {format!r}")
        if dtype is None:
            raise ValueError(f"{name}: the output dtype must be given")
        self.format = format
        self.dtype = str(np.dtype(dtype))

    def __str__(self) -> str:
        return f"{type(self).__name__}({self.format},{self.dtype})"

    def make_node(self, *mat: Any) -> Apply:
        if not mat:
            raise ValueError(f"{self}: cannot join an empty list of sparse matrices")
        blocks = [sparse_input(self, x) for x in mat]
        return Apply(self, blocks, [SparseType(self.format, self.dtype)()])

    def _check_shapes(self, blocks: Sequence[Any]) -> None:
        """ValueError naming the Op when the blocks' other dimension differs."""
        keep = 1 - self._axis
        sizes = {b.shape[keep] for b in blocks}
        if len(sizes) > 1:
            what = "rows" if keep == 0 else "columns"
            raise ValueError(
                f"{self}: the blocks must have the same number of {what}, got shapes "
                f"{[b.shape for b in blocks]}"
            )

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        for k, b in enumerate(inputs):
            check_value(self, node, k, b)
        self._check_shapes(inputs)
        join = scipy.sparse.hstack if self._axis == 1 else scipy.sparse.vstack
        value = join(inputs, format=self.format, dtype=self.dtype)
        out[0][0] = exact_value(value, node.outputs[0].type)

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        (gz,) = gout
        if is_sparse_variable(gz):
            gz = dense_from_sparse(gz)
        sizes = stack([tensor_shape(x)[self._axis] for x in inputs])  # type: ignore[index]
        pieces = Split(len(inputs))(gz, self._axis, sizes)
        if not isinstance(pieces, list | tuple):
            pieces = [pieces]
        grads = []
        for x, piece in zip(inputs, pieces, strict=True):
            if x.type.dtype not in continuous_dtypes:
                grads.append(sp_zeros_like(x, config.floatX))
            else:
                piece = _fit_dense(piece, x.type.dtype)
                grads.append(SparseFromDense(x.type.format)(piece))
        return grads

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        total = shapes[0][self._axis]
        for shp in shapes[1:]:
            total = total + shp[self._axis]
        if self._axis == 1:
            return [(shapes[0][0], total)]
        return [(total, shapes[0][1])]


class VStack(HStack):
    """Sparse matrices with equal column counts one above the other
    (``scipy.sparse.vstack``), as a matrix of ``format`` (default csc) and ``dtype``.
    Regular gradient. Printed ``VStack(csc,float64)``."""

    _axis = 0


def _stack_args(blocks: Sequence[Any], dtype: Any) -> tuple[list[Variable], str]:
    """The blocks as sparse variables and the output dtype (their upcast by default)."""
    if isinstance(blocks, Variable) or not isinstance(blocks, Sequence):
        raise TypeError(f"stacking takes a list of sparse matrices, got {blocks!r}")
    variables = [as_sparse_variable(b) for b in blocks]
    if dtype is None:
        if not variables:
            raise ValueError("cannot join an empty list of sparse matrices")
        dtype = upcast(*[v.type.dtype for v in variables])
    return variables, str(np.dtype(dtype))


def hstack(blocks: Sequence[Any], format: str | None = None, dtype: Any = None) -> Variable:
    """Sparse matrices with equal row counts side by side, as one ``format`` matrix (csc by
    default) of ``dtype`` (the blocks' upcast by default). Regular gradient."""
    variables, dtype = _stack_args(blocks, dtype)
    return HStack(format=format, dtype=dtype)(*variables)


def vstack(blocks: Sequence[Any], format: str | None = None, dtype: Any = None) -> Variable:
    """Sparse matrices with equal column counts one above the other, as one ``format``
    matrix (csc by default) of ``dtype`` (the blocks' upcast by default). Regular gradient."""
    variables, dtype = _stack_args(blocks, dtype)
    return VStack(format=format, dtype=dtype)(*variables)
