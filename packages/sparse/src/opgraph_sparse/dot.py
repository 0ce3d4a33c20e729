"""Products with sparse operands (Theano 1.0's sparse ``dot`` family).

- :func:`structured_dot` (``StructuredDot``): sparse times dense (or sparse), with a
  *structured* gradient: only the stored entries of the sparse operand get one
  (``StructuredDotGradCSR``/``StructuredDotGradCSC``, :func:`structured_dot_grad`).
- :func:`true_dot` (``TrueDot``): a sparse result and a regular (not structured) gradient.
- :func:`sampling_dot` (``SamplingDot``): ``p * (x . y.T)`` computed only on ``p``'s pattern.
- :func:`dot` (``Dot``, printed ``SparseDot``): a dense result, sparse or dense on either
  side (a 1-d dense operand too), regular gradient.
- :data:`usmm` (``Usmm``): ``z + alpha * dot(x, y)``, what the rewrites fuse a product into.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.null_type import grad_not_implemented
from opgraph.graph.op import Op
from opgraph.scalar.type import upcast
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.dot import dot as tensor_dot
from opgraph.tensor.dot import outer as tensor_outer
from opgraph.tensor.type import TensorType
from opgraph_sparse.basic import (
    CSC,
    CSR,
    SparseFromDense,
    as_sparse_variable,
    cast,
    check_format,
    check_value,
    csm_indices,
    csm_indptr,
    csm_shape,
    dense_from_sparse,
    discrete_dtypes,
    is_sparse_variable,
    mul_s_d,
)
from opgraph_sparse.type import SparseType, describe_value, is_sparse

__all__ = [
    "Dot",
    "SamplingDot",
    "StructuredDot",
    "StructuredDotGradCSC",
    "StructuredDotGradCSR",
    "TrueDot",
    "Usmm",
    "dot",
    "sampling_dot",
    "sdg_csc",
    "sdg_csr",
    "structured_dot",
    "structured_dot_grad",
    "true_dot",
    "usmm",
]


# -- helpers ---------------------------------------------------------------------------------


def _shape_mismatch(op: Any, x_shape: tuple[int, ...], y_shape: tuple[int, ...]) -> ValueError:
    """The error of a product whose inner dimensions differ, naming both shapes."""
    inner_x = x_shape[-1]
    inner_y = y_shape[0]
    return ValueError(
        f"{op}: shape mismatch: the left operand has shape {tuple(x_shape)} and the right "
        f"operand has shape {tuple(y_shape)}; the inner dimensions ({inner_x} and {inner_y}) "
        "must be equal"
    )


def _sparse_like_input(g: Variable, inp: Variable) -> Variable:
    """Gradient ``g`` (sparse or dense) as a sparse matrix of ``inp``'s format and dtype.

    A dense gradient becomes a sparse matrix holding all its entries (a regular gradient);
    the dtype is cast to the input's when that is a float or complex dtype.
    """
    if not is_sparse_variable(g):
        g = SparseFromDense(inp.type.format)(g)
    elif g.type.format != inp.type.format:
        g = SparseFromDense(inp.type.format)(dense_from_sparse(g))
    if inp.type.dtype not in discrete_dtypes and g.type.dtype != inp.type.dtype:
        g = cast(g, inp.type.dtype)
    return g


def _as_dense_operand(op: Any, v: Any, k: int, ndims: tuple[int, ...]) -> Variable:
    """Input ``k`` of ``op`` as a tensor of one of ``ndims`` dimensions (else a TypeError)."""
    v = as_tensor_variable(v)
    if v.type.ndim not in ndims:
        allowed = " or ".join(str(n) for n in ndims)
        raise TypeError(
            f"{op}: input {k} ({v}) must be a dense tensor of {allowed} dimension(s), got "
            f"{v.type.ndim} dimension(s) (type {v.type})"
        )
    return v


def _to_sparse_input(x: Any) -> Any:
    """A scipy matrix becomes a sparse constant; anything else is returned unchanged."""
    if is_sparse(x):
        return as_sparse_variable(x)
    return x


def _structural_product(x: Any, y: Any, fmt: str, dtype: str) -> Any:
    """``x @ y`` of two scipy matrices, storing every *structurally* nonzero entry.

    scipy drops the entries of a product that happen to be 0; a sparse result must keep
    them, or a structured gradient taken downstream (``toarray``) silently becomes 0 there
    (Theano's issue #3615 with ``true_dot``). The pattern is the product of the operands'
    patterns (stored zeros count); values are gathered from scipy's product.
    """
    xr = x.tocsr()
    yr = y.tocsr()
    ones_x = type(xr)((np.ones(xr.nnz, dtype="int64"), xr.indices, xr.indptr), xr.shape)
    ones_y = type(yr)((np.ones(yr.nnz, dtype="int64"), yr.indices, yr.indptr), yr.shape)
    pattern = (ones_x @ ones_y).tocsr()  # counts of paths: no cancellation, no lost entry
    pattern.sort_indices()
    values = (xr @ yr).tocsr()
    values.sort_indices()
    ncols = np.int64(pattern.shape[1])
    p_rows = np.repeat(np.arange(pattern.shape[0], dtype="int64"), np.diff(pattern.indptr))
    v_rows = np.repeat(np.arange(values.shape[0], dtype="int64"), np.diff(values.indptr))
    p_keys = p_rows * ncols + pattern.indices
    v_keys = v_rows * ncols + values.indices
    data = np.zeros(pattern.nnz, dtype=dtype)
    if values.nnz:
        pos = np.minimum(np.searchsorted(v_keys, p_keys), values.nnz - 1)
        found = v_keys[pos] == p_keys
        data[found] = values.data[pos[found]]
    res = scipy.sparse.csr_matrix((data, pattern.indices, pattern.indptr), pattern.shape)
    return SparseType.format_cls[fmt](res.asformat(fmt), dtype=dtype)


def _sparse_dense_product(x: Any, y: Any, fmt: str, dtype: str) -> Any:
    """``x @ y`` (sparse times dense matrix) as a sparse matrix of ``fmt`` that stores every
    entry of each row of ``x`` holding a stored value (zeros included; see
    :func:`_structural_product`)."""
    xr = x.tocsr()
    dense = np.asarray(xr @ y, dtype=dtype)
    rows = np.flatnonzero(np.diff(xr.indptr) > 0)
    k = dense.shape[1]
    counts = np.zeros(xr.shape[0], dtype="int64")
    counts[rows] = k
    indptr = np.concatenate([[0], np.cumsum(counts)])
    indices = np.tile(np.arange(k, dtype="int64"), len(rows))
    res = scipy.sparse.csr_matrix((dense[rows].ravel(), indices, indptr), dense.shape)
    return SparseType.format_cls[fmt](res.asformat(fmt), dtype=dtype)


# -- StructuredDot ---------------------------------------------------------------------------


class StructuredDot(Op):
    """``a . b`` for a sparse ``a`` (csr or csc) with a structured gradient w.r.t. ``a``.

    Contract: ``StructuredDot()(a_sparse, b_dense_matrix)`` is a dense matrix of dtype
    ``upcast(a.dtype, b.dtype)``, broadcastable ``(False, b.broadcastable[1])``. A sparse
    ``b`` gives a sparse result in ``a``'s format and the upcast dtype, storing every
    structurally nonzero entry (see :func:`_structural_product`). The gradient w.r.t. ``a``
    is defined on ``a``'s stored entries only (``structured_dot_grad``); ``b``'s is regular.
    """

    __props__ = ()

    def make_node(self, a: Any, b: Any) -> Apply:
        a = as_sparse_variable(a)
        check_format(self, a)
        if is_sparse(b):
            b = as_sparse_variable(b)
        if is_sparse_variable(b):
            check_format(self, b)
            dtype_out = upcast(a.type.dtype, b.type.dtype)
            return Apply(self, [a, b], [SparseType(a.type.format, dtype_out)()])
        b = as_tensor_variable(b)
        if b.type.ndim != 2:
            raise TypeError(
                f"{self}: input 1 ({b}) must be a matrix, got {b.type.ndim} dimension(s) "
                f"(type {b.type}). HINT: sparse.dot accepts a vector operand"
            )
        dtype_out = upcast(a.type.dtype, b.type.dtype)
        out = TensorType(dtype_out, (False, b.type.broadcastable[1]))()
        return Apply(self, [a, b], [out])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        a, b = inputs
        check_value(self, node, 0, a)
        if a.shape[1] != b.shape[0]:
            raise _shape_mismatch(self, a.shape, b.shape)
        otype = node.outputs[0].type
        if isinstance(otype, SparseType):
            check_value(self, node, 1, b)
            out[0][0] = _structural_product(a, b, otype.format, otype.dtype)
            return
        res = a @ b
        out[0][0] = np.asarray(res, dtype=otype.dtype)

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        a, b = inputs
        (gz,) = gout
        if is_sparse_variable(b):
            gz_dense = dense_from_sparse(gz) if is_sparse_variable(gz) else gz
            ga = structured_dot_grad(a, dense_from_sparse(b), gz_dense)
            gb = _sparse_like_input(structured_dot(a.T, gz_dense), b)
            return [_sparse_like_input(ga, a), gb]
        ga = structured_dot_grad(a, b, gz)
        return [_sparse_like_input(ga, a), structured_dot(a.T, gz)]

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [(shapes[0][0], shapes[1][1])]


_structured_dot = StructuredDot()


def structured_dot(x: Any, y: Any) -> Variable:
    """``x . y`` where one operand is sparse, with a structured gradient for it.

    A dense left operand is handled as ``(y.T . x.T).T``. Both operands must be matrices.
    """
    x = _to_sparse_input(x)
    y = _to_sparse_input(y)
    if is_sparse_variable(x):
        return _structured_dot(x, y)
    if is_sparse_variable(y):
        return _structured_dot(y.T, as_tensor_variable(x).T).T
    raise TypeError(
        f"structured_dot needs at least one sparse operand, got {x} and {y}. "
        "HINT: use opgraph.tensor.dot for dense operands"
    )


class _StructuredDotGrad(Op):
    """Shared code of the two structured-gradient Ops (csr and csc)."""

    __props__ = ()
    #: 'csr' or 'csc': which axis ``indptr`` runs over.
    format = ""

    def make_node(self, a_indices: Any, a_indptr: Any, b: Any, g_ab: Any) -> Apply:
        a_indices = as_tensor_variable(a_indices)
        a_indptr = as_tensor_variable(a_indptr)
        for k, v, what in ((0, a_indices, "a_indices"), (1, a_indptr, "a_indptr")):
            if v.type.ndim != 1 or v.type.dtype not in discrete_dtypes:
                raise TypeError(
                    f"{self}: input {k} ({what}) must be an integer vector, got {v} of type "
                    f"{v.type}"
                )
        if is_sparse_variable(b) or is_sparse(b):
            raise TypeError(f"{self}: input 2 (b) must be a dense matrix, got sparse {b}")
        if is_sparse_variable(g_ab) or is_sparse(g_ab):
            raise TypeError(f"{self}: input 3 (g_ab) must be a dense matrix, got sparse {g_ab}")
        b = _as_dense_operand(self, b, 2, (2,))
        g_ab = _as_dense_operand(self, g_ab, 3, (2,))
        return Apply(
            self, [a_indices, a_indptr, b, g_ab], [TensorType(g_ab.type.dtype, (False,))()]
        )

    def _validate(self, indices: Any, indptr: Any, b: Any, g: Any) -> None:
        """ValueError/IndexError when the arrays cannot be those of a product's operands."""
        if b.shape[1] != g.shape[1]:
            raise ValueError(
                f"{self}: b (shape {b.shape}) and g_ab (shape {g.shape}) must have the same "
                "number of columns"
            )
        # csr: indptr runs over the rows of a (those of g), indices are columns (rows of b);
        # csc: indptr runs over the columns of a (rows of b), indices are rows (rows of g).
        major, minor = (g, b) if self.format == "csr" else (b, g)
        major_name, minor_name = ("g_ab", "b") if self.format == "csr" else ("b", "g_ab")
        if len(indptr) != major.shape[0] + 1:
            raise ValueError(
                f"{self}: a_indptr has {len(indptr)} elements but {major_name} has "
                f"{major.shape[0]} rows; a {self.format} matrix needs {major.shape[0] + 1}"
            )
        if indptr[0] != 0 or indptr[-1] != len(indices) or np.any(np.diff(indptr) < 0):
            raise ValueError(
                f"{self}: a_indptr must start at 0, never decrease and end at len(a_indices) "
                f"= {len(indices)}"
            )
        if len(indices) and (indices.min() < 0 or indices.max() >= minor.shape[0]):
            raise IndexError(
                f"{self}: a_indices holds values from {indices.min()} to {indices.max()}, out "
                f"of range for {minor_name} with {minor.shape[0]} rows"
            )

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        indices, indptr, b, g = inputs
        self._validate(indices, indptr, b, g)
        major = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        rows_g, rows_b = (major, indices) if self.format == "csr" else (indices, major)
        values = np.einsum("ij,ij->i", g[rows_g], b[rows_b])
        out[0][0] = np.asarray(values, dtype=node.outputs[0].type.dtype)

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [shapes[0]]


class StructuredDotGradCSC(_StructuredDotGrad):
    """The gradient of ``a . b`` w.r.t. the stored values of a csc matrix ``a``.

    Contract: ``StructuredDotGradCSC()(a_indices, a_indptr, b, g_ab)`` with ``a``'s csc
    arrays, ``b`` and ``g_ab`` (the gradient of the product) dense matrices; the result is a
    vector of dtype ``g_ab.dtype``, in ``a``'s storage order: entry ``k`` stored at
    ``(i, j)`` gets ``g_ab[i] . b[j]``.
    """

    format = "csc"


class StructuredDotGradCSR(_StructuredDotGrad):
    """The gradient of ``a . b`` w.r.t. the stored values of a csr matrix ``a``.

    Contract: ``StructuredDotGradCSR()(a_indices, a_indptr, b, g_ab)`` with ``a``'s csr
    arrays, ``b`` and ``g_ab`` dense matrices; the result is a vector of dtype
    ``g_ab.dtype``, in ``a``'s storage order: entry ``k`` stored at ``(i, j)`` gets
    ``g_ab[i] . b[j]``.
    """

    format = "csr"


sdg_csc = StructuredDotGradCSC()
sdg_csr = StructuredDotGradCSR()


def structured_dot_grad(sparse_A: Any, dense_B: Any, ga: Any) -> Variable:
    """The structured gradient of ``sparse_A . dense_B`` w.r.t. ``sparse_A`` given the
    product's gradient ``ga``: a sparse matrix with ``sparse_A``'s pattern."""
    sparse_A = as_sparse_variable(sparse_A)
    if sparse_A.type.format not in ("csr", "csc"):
        raise TypeError(
            f"structured_dot_grad: sparse_A must be csr or csc, got {sparse_A.type.format}"
        )
    sdg, csx = (sdg_csc, CSC) if sparse_A.type.format == "csc" else (sdg_csr, CSR)
    indices = csm_indices(sparse_A)
    indptr = csm_indptr(sparse_A)
    data = sdg(indices, indptr, dense_B, ga)
    return csx(data, indices, indptr, csm_shape(sparse_A))


# -- TrueDot ---------------------------------------------------------------------------------


class TrueDot(Op):
    """``x . y`` for a sparse ``x`` (csr or csc) and a sparse or dense ``y``: a sparse result
    (csr for csr ``x``, csc for csc ``x``) with a regular gradient.

    Both operands must have the same dtype. A 1-d dense ``y`` is a column: the result is a
    ``(rows, 1)`` matrix (Theano 1.0.5 returned a ``(1, rows)`` row that its own
    ``infer_shape`` and gradient could not handle). Every entry of the product that is
    nonzero by structure is stored, zeros by value included, so a structured gradient
    taken downstream (``toarray``) reaches all of them (Theano issue #3615).

    ``grad_preserves_dense`` is kept for Theano's signature and does not change the result
    (nodes differing only by it merge, as in Theano). The gradient w.r.t. a dense ``y`` is
    dense either way: an opgraph dense variable cannot take a sparse gradient. A sparse
    operand's gradient is sparse, in that operand's format.
    """

    __props__ = ()

    def __init__(self, grad_preserves_dense: bool = True) -> None:
        self.grad_preserves_dense = grad_preserves_dense

    def make_node(self, x: Any, y: Any) -> Apply:
        if not (is_sparse_variable(x) or is_sparse(x)):
            raise TypeError(
                f"{self}: input 0 must be sparse, got {x}. HINT: true_dot(dense, sparse) "
                "transposes for you"
            )
        x = as_sparse_variable(x)
        check_format(self, x)
        if is_sparse(y) or is_sparse_variable(y):
            y = as_sparse_variable(y)
            check_format(self, y)
        else:
            y = _as_dense_operand(self, y, 1, (1, 2))
        if x.type.dtype != y.type.dtype:
            raise TypeError(
                f"{self}: both operands must have the same dtype, got {x.type.dtype} and "
                f"{y.type.dtype}. HINT: cast one of them first"
            )
        return Apply(self, [x, y], [SparseType(x.type.format, x.type.dtype)()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        x, y = inputs
        check_value(self, node, 0, x)
        if is_sparse(y):
            check_value(self, node, 1, y)
        if x.shape[1] != y.shape[0]:
            raise _shape_mismatch(self, x.shape, y.shape)
        otype = node.outputs[0].type
        if is_sparse(y):
            out[0][0] = _structural_product(x, y, otype.format, otype.dtype)
            return
        if y.ndim == 1:
            y = y[:, None]
        out[0][0] = _sparse_dense_product(x, y, otype.format, otype.dtype)

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        x, y = inputs
        (gz,) = gout
        gz = _sparse_like_input(gz, x) if not is_sparse_variable(gz) else gz
        if is_sparse_variable(y):
            gx = true_dot(gz, y.T)
            # x.T . gz has x.T's format; (gz.T . x).T has x's format: pick y's.
            if y.type.format != x.type.format:
                gy = true_dot(x.T, gz)
            else:
                gy = true_dot(gz.T, x).T
            return [_sparse_like_input(gx, x), _sparse_like_input(gy, y)]
        if y.type.ndim == 1:
            y_row = y.dimshuffle("x", 0)
            gx = true_dot(gz, y_row)
            gy = dense_from_sparse(true_dot(x.T, gz))[:, 0]
            return [_sparse_like_input(gx, x), gy]
        gx = true_dot(gz, y.T)
        gy = true_dot(x.T, gz)
        return [_sparse_like_input(gx, x), dense_from_sparse(gy)]

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        xshp, yshp = shapes
        if len(yshp) == 1:
            return [(xshp[0], 1)]
        return [(xshp[0], yshp[1])]


def true_dot(x: Any, y: Any, grad_preserves_dense: bool = True) -> Variable:
    """``x . y`` with at least one sparse operand, as a sparse matrix; regular gradient.

    A dense left operand is handled as ``(y.T . x.T).T``. ``grad_preserves_dense`` is
    accepted for Theano's signature; a dense operand's gradient is always dense (see
    :class:`TrueDot`).
    """
    x = _to_sparse_input(x)
    y = _to_sparse_input(y)
    if is_sparse_variable(x):
        return TrueDot(grad_preserves_dense)(x, y)
    if is_sparse_variable(y):
        x = as_tensor_variable(x)
        return TrueDot(grad_preserves_dense)(y.T, x.T).T
    raise TypeError(
        f"true_dot needs at least one sparse operand, got {x} and {y}. "
        "HINT: use opgraph.tensor.dot for dense operands"
    )


# -- SamplingDot -----------------------------------------------------------------------------


class SamplingDot(Op):
    """``p * (x . y.T)`` computed only at the stored entries of the sparse ``p``.

    Contract: ``SamplingDot()(x_dense, y_dense, p_sparse)`` with ``x`` of shape ``(m, k)``,
    ``y`` of shape ``(n, k)`` and ``p`` a csr/csc ``(m, n)`` matrix; the result has ``p``'s
    type (format and dtype, as Theano) and exactly ``p``'s pattern: entry ``(i, j)`` stored
    in ``p`` holds ``p[i, j] * (x[i] . y[j])``. Regular gradient for ``x`` and ``y``; none
    for ``p``.
    """

    __props__ = ()

    def make_node(self, x: Any, y: Any, p: Any) -> Apply:
        for k, v in ((0, x), (1, y)):
            if is_sparse_variable(v) or is_sparse(v):
                raise TypeError(f"{self}: input {k} ({v}) must be a dense matrix, got sparse")
        x = _as_dense_operand(self, x, 0, (2,))
        y = _as_dense_operand(self, y, 1, (2,))
        p = as_sparse_variable(p)
        check_format(self, p)
        return Apply(self, [x, y, p], [p.type()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        x, y, p = inputs
        check_value(self, node, 2, p)
        if x.shape[1] != y.shape[1]:
            raise ValueError(
                f"{self}: x (shape {x.shape}) and y (shape {y.shape}) must have the same "
                "number of columns (x . y.T)"
            )
        if p.shape != (x.shape[0], y.shape[0]):
            raise ValueError(
                f"{self}: p has shape {p.shape}, expected (x rows, y rows) = "
                f"({x.shape[0]}, {y.shape[0]})"
            )
        major = np.repeat(np.arange(len(p.indptr) - 1), np.diff(p.indptr))
        rows, cols = (major, p.indices) if p.format == "csr" else (p.indices, major)
        values = p.data * np.einsum("ij,ij->i", x[rows], y[cols])
        dtype = node.outputs[0].type.dtype
        out[0][0] = type(p)(
            (values.astype(dtype, copy=False), p.indices.copy(), p.indptr.copy()), p.shape
        )

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        x, y, p = inputs
        (gz,) = gout
        pgz = mul_s_d(p, dense_from_sparse(gz) if is_sparse_variable(gz) else gz)
        return [
            dot(pgz, y),
            dot(x.T, pgz).T,
            grad_not_implemented(self, 2, p, "SamplingDot has no gradient for its pattern"),
        ]

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [shapes[2]]


sampling_dot = SamplingDot()


# -- Dot -------------------------------------------------------------------------------------


class Dot(Op):
    """``x . y`` with at least one sparse operand (csr/csc), as a dense tensor (``SparseDot``).

    The other operand may be a dense matrix or vector (a vector on the left is a row, on
    the right a column, and the result is then a vector, as ``numpy.dot``). The gradient is
    regular: a sparse operand's gradient is a sparse matrix of its format and dtype holding
    every entry of the dense gradient (Theano 1.0.5 returned a dense tensor, which broke
    ``csr_from_dense``'s gradient); with a vector operand it is an outer product (Theano
    built a dot of two vectors there and failed).
    """

    __props__ = ()

    def __str__(self) -> str:
        return "Sparse" + type(self).__name__

    def make_node(self, x: Any, y: Any) -> Apply:
        x = _to_sparse_input(x)
        y = _to_sparse_input(y)
        x_sparse, y_sparse = is_sparse_variable(x), is_sparse_variable(y)
        if not (x_sparse or y_sparse):
            raise TypeError(
                f"{self}: at least one operand must be sparse, got {x} and {y}. "
                "HINT: use opgraph.tensor.dot for dense operands"
            )
        if x_sparse:
            check_format(self, x)
        else:
            x = _as_dense_operand(self, x, 0, (1, 2))
        if y_sparse:
            check_format(self, y)
        else:
            y = _as_dense_operand(self, y, 1, (1, 2))
        bx = x.type.broadcastable
        by = y.type.broadcastable
        bcast = tuple(bx[:-1]) + (tuple(by[1:]) if len(by) == 2 else ())
        dtype = upcast(x.type.dtype, y.type.dtype)
        return Apply(self, [x, y], [TensorType(dtype, bcast)()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        x, y = inputs
        for k, v in enumerate(inputs):
            if is_sparse_variable(node.inputs[k]):
                check_value(self, node, k, v)
            elif is_sparse(v):
                raise TypeError(f"{self}: input {k} must be dense, got {describe_value(v)}")
        if x.shape[-1] != y.shape[0]:
            raise _shape_mismatch(self, x.shape, y.shape)
        if is_sparse(x):
            res = x @ y
            if is_sparse(res):
                res = res.toarray()
        else:
            res = (y.T @ x.T).T
        out[0][0] = np.asarray(res, dtype=node.outputs[0].type.dtype)

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        x, y = inputs
        (gz,) = gout
        x_sparse, y_sparse = is_sparse_variable(x), is_sparse_variable(y)
        if x_sparse and y_sparse:
            gx = dot(gz, y.T)
            gy = dot(x.T, gz)
        elif x_sparse:
            if y.type.ndim == 1:  # gz is a vector: the gradient of x is an outer product
                gx = tensor_outer(gz, y)
                gy = dot(gz, x)
            else:
                gx = tensor_dot(gz, y.T)
                gy = dot(x.T, gz)
        else:
            if x.type.ndim == 1:
                gx = dot(y, gz)
                gy = tensor_outer(x, gz)
            else:
                gx = dot(gz, y.T)
                gy = tensor_dot(x.T, gz)
        gx = _sparse_like_input(gx, x) if x_sparse else gx
        gy = _sparse_like_input(gy, y) if y_sparse else gy
        return [gx, gy]

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        xshp, yshp = shapes
        x, y = node.inputs
        if x.type.ndim == 2 and y.type.ndim == 2:
            return [(xshp[0], yshp[1])]
        if x.type.ndim == 1 and y.type.ndim == 2:
            return [(yshp[1],)]
        if x.type.ndim == 2 and y.type.ndim == 1:
            return [(xshp[0],)]
        return [()]


_dot = Dot()


def dot(x: Any, y: Any) -> Variable:
    """``x . y`` as a dense tensor, where ``x`` or ``y`` (or both) is sparse (csr/csc).

    The other operand may be a dense matrix or vector. The gradient is regular (every entry
    of a sparse operand gets one), unlike :func:`structured_dot`.
    """
    x = _to_sparse_input(x)
    y = _to_sparse_input(y)
    if not (is_sparse_variable(x) or is_sparse_variable(y)):
        raise TypeError(
            f"sparse.dot needs at least one sparse operand, got {x} and {y}. "
            "HINT: use opgraph.tensor.dot for dense operands"
        )
    return _dot(x, y)


# -- Usmm ------------------------------------------------------------------------------------


class Usmm(Op):
    """``z + alpha * (x . y)`` with exactly one of ``x``/``y`` sparse (csr/csc): a dense
    matrix (Theano's ``Usmm``, printed ``Usmm{no_inplace}``; no gradient).

    Contract: ``Usmm()(alpha, x, y, z)`` with ``alpha`` a 0-d or single-element (all
    broadcastable) tensor, ``x``/``y`` a sparse and a dense matrix, ``z`` a dense matrix of
    the product's shape; the result has dtype ``upcast(alpha, x, y, z)``.
    """

    __props__ = ()

    def __str__(self) -> str:
        return "Usmm{no_inplace}"

    def make_node(self, alpha: Any, x: Any, y: Any, z: Any) -> Apply:
        x = _to_sparse_input(x)
        y = _to_sparse_input(y)
        x_sparse, y_sparse = is_sparse_variable(x), is_sparse_variable(y)
        if x_sparse == y_sparse:
            raise TypeError(
                f"{self}: exactly one of x and y must be sparse, got {x} and {y}. "
                "HINT: use sparse.dot and an addition for two sparse operands; gemm for dense"
            )
        if x_sparse:
            check_format(self, x)
            y = _as_dense_operand(self, y, 2, (2,))
        else:
            check_format(self, y)
            x = _as_dense_operand(self, x, 1, (2,))
        alpha = as_tensor_variable(alpha)
        if not all(alpha.type.broadcastable):
            raise TypeError(
                f"{self}: alpha must be a scalar (0-d or with every dimension broadcastable), "
                f"got {alpha} of type {alpha.type}"
            )
        if is_sparse_variable(z) or is_sparse(z):
            raise TypeError(f"{self}: z must be a dense matrix, got sparse {z}")
        z = _as_dense_operand(self, z, 3, (2,))
        dtype = upcast(alpha.type.dtype, x.type.dtype, y.type.dtype, z.type.dtype)
        return Apply(self, [alpha, x, y, z], [TensorType(dtype, (False, False))()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        alpha, x, y, z = inputs
        for k in (1, 2):
            if is_sparse_variable(node.inputs[k]):
                check_value(self, node, k, inputs[k])
        if alpha.size != 1:
            raise ValueError(f"{self}: alpha must hold one value, got shape {alpha.shape}")
        if x.shape[1] != y.shape[0]:
            raise _shape_mismatch(self, x.shape, y.shape)
        if z.shape != (x.shape[0], y.shape[1]):
            raise ValueError(
                f"{self}: z has shape {z.shape}, the product x . y has shape "
                f"{(x.shape[0], y.shape[1])}; they must be equal"
            )
        prod = x @ y if is_sparse(x) else (y.T @ x.T).T
        dtype = node.outputs[0].type.dtype
        res = np.asarray(prod, dtype=dtype) * alpha.reshape(()) + z
        out[0][0] = np.asarray(res, dtype=dtype)

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [shapes[3]]


usmm = Usmm()
