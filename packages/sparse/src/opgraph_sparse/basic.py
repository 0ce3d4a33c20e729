"""Sparse variables' building blocks: conversion, constructors, the CSM format ops and casts.

Every other module of the package builds on these: :func:`as_sparse_variable` (inputs of any
sparse Op), the variable constructors (``csr_matrix('x')``), ``CSM`` and ``csm_properties``
(a matrix from its arrays and back), ``dense_from_sparse``/``csr_from_dense`` and ``cast``.
``mul_s_d`` (sparse times dense, on the sparse pattern) is here too because the structured
gradient of ``dense_from_sparse`` is built from it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Variable
from opgraph.graph.null_type import DisconnectedType, disconnected_type
from opgraph.graph.op import Op
from opgraph.scalar.type import upcast
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.elemwise import DimShuffle
from opgraph.tensor.math import ones_like, zeros_like
from opgraph.tensor.type import TensorType
from opgraph_sparse.type import SparseType, check_structure, describe_value, is_sparse

__all__ = [
    "CSC",
    "CSM",
    "CSR",
    "CSMGrad",
    "CSMProperties",
    "Cast",
    "DenseFromSparse",
    "MulSD",
    "SparseFromDense",
    "all_dtypes",
    "as_sparse",
    "as_sparse_or_tensor_variable",
    "as_sparse_variable",
    "bcast",
    "bsr_dmatrix",
    "bsr_fmatrix",
    "bsr_matrix",
    "cast",
    "ccast",
    "complex_dtypes",
    "constant",
    "continuous_dtypes",
    "csc_dmatrix",
    "csc_fmatrix",
    "csc_from_dense",
    "csc_matrix",
    "csm_data",
    "csm_grad",
    "csm_indices",
    "csm_indptr",
    "csm_properties",
    "csm_shape",
    "csr_dmatrix",
    "csr_fmatrix",
    "csr_from_dense",
    "csr_matrix",
    "dcast",
    "dense_from_sparse",
    "discrete_dtypes",
    "fcast",
    "float_dtypes",
    "icast",
    "int_dtypes",
    "integer_dtypes",
    "is_sparse_variable",
    "lcast",
    "matrix",
    "mul_s_d",
    "sp_ones_like",
    "sp_zeros_like",
    "sparse_formats",
    "uint_dtypes",
    "wcast",
    "zcast",
]

#: The formats most Ops accept (bsr matrices can be declared, converted and densified).
sparse_formats = ["csc", "csr"]

all_dtypes = sorted(SparseType.dtype_set)
complex_dtypes = [t for t in all_dtypes if t.startswith("complex")]
float_dtypes = [t for t in all_dtypes if t.startswith("float")]
int_dtypes = [t for t in all_dtypes if t.startswith("int")]
uint_dtypes = [t for t in all_dtypes if t.startswith("uint")]
integer_dtypes = int_dtypes + uint_dtypes
continuous_dtypes = complex_dtypes + float_dtypes
discrete_dtypes = integer_dtypes


# -- conversion ------------------------------------------------------------------------------


def is_sparse_variable(x: Any) -> bool:
    """True if ``x`` is a Variable of a SparseType."""
    return isinstance(x, Variable) and isinstance(x.type, SparseType)


def constant(x: Any, name: str | None = None) -> Variable:
    """A sparse Constant holding a copy of the scipy matrix ``x`` (its format and dtype)."""
    if not is_sparse(x):
        raise TypeError(f"sparse.constant needs a scipy.sparse matrix, got {describe_value(x)}")
    if x.format not in SparseType.format_cls:
        x = x.tocsr()
    value = SparseType.format_cls[x.format](x, copy=True)
    return SparseType(x.format, value.dtype).make_constant(value, name=name)


def as_sparse_variable(x: Any, name: str | None = None) -> Variable:
    """``x`` as a sparse Variable: sparse variables pass, scipy matrices become constants.

    A dense variable or array is a TypeError that says how to convert it explicitly.
    """
    if isinstance(x, Apply):
        if len(x.outputs) != 1:
            raise ValueError(f"cannot tell which output of {x.op} is meant: it has several")
        x = x.outputs[0]
    if isinstance(x, Variable):
        if not isinstance(x.type, SparseType):
            raise TypeError(
                f"expected a sparse variable, got {x} of type {x.type}. HINT: convert a "
                "dense matrix explicitly with sparse.csr_from_dense or sparse.csc_from_dense"
            )
        return x
    if is_sparse(x):
        return constant(x, name=name)
    raise TypeError(
        f"cannot convert {describe_value(x)} to a sparse variable. HINT: build a "
        "scipy.sparse matrix (scipy.sparse.csr_matrix(value)) or use csr_from_dense"
    )


as_sparse = as_sparse_variable


def as_sparse_or_tensor_variable(x: Any, name: str | None = None) -> Variable:
    """``x`` as a sparse Variable if it is sparse, else as a tensor Variable."""
    try:
        return as_sparse_variable(x, name)
    except (TypeError, ValueError):
        return as_tensor_variable(x, name)


def matrix(format: str, name: str | None = None, dtype: Any = None) -> Variable:
    """A symbolic sparse matrix of ``format`` (``dtype`` defaults to ``config.floatX``)."""
    return SparseType(format, dtype or config.floatX)(name)


def csc_matrix(name: str | None = None, dtype: Any = None) -> Variable:
    """A symbolic csc matrix (``dtype`` defaults to ``config.floatX``)."""
    return matrix("csc", name, dtype)


def csr_matrix(name: str | None = None, dtype: Any = None) -> Variable:
    """A symbolic csr matrix (``dtype`` defaults to ``config.floatX``)."""
    return matrix("csr", name, dtype)


def bsr_matrix(name: str | None = None, dtype: Any = None) -> Variable:
    """A symbolic bsr matrix (``dtype`` defaults to ``config.floatX``)."""
    return matrix("bsr", name, dtype)


csc_dmatrix = SparseType("csc", "float64")
csr_dmatrix = SparseType("csr", "float64")
bsr_dmatrix = SparseType("bsr", "float64")
csc_fmatrix = SparseType("csc", "float32")
csr_fmatrix = SparseType("csr", "float32")
bsr_fmatrix = SparseType("bsr", "float32")


def check_format(op: Op, x: Variable, formats: tuple[str, ...] = ("csr", "csc")) -> None:
    """TypeError naming ``op`` and ``x`` when ``x``'s format is not one of ``formats``."""
    if x.type.format not in formats:
        raise TypeError(
            f"{op}: {x} is a {x.type.format} matrix, expected one of {', '.join(formats)}. "
            f"HINT: convert it with x.asformat or build it as csr/csc"
        )


def check_value(op: Op, node: Apply, k: int, value: Any) -> None:
    """At run time: TypeError when input ``k`` of ``node`` is not a matrix of its type."""
    var = node.inputs[k]
    if not var.type.is_valid_value(value):
        raise TypeError(f"{op}: input {k} ({var}) must be {var.type}, got {describe_value(value)}")


def sparse_input(
    op: Op, x: Any, what: str = "the input", formats: tuple[str, ...] = ("csr", "csc")
) -> Variable:
    """``x`` as a sparse Variable of one of ``formats``, or a TypeError naming ``op`` and
    ``what`` (the input's role: "the matrix to index", "x", ...)."""
    try:
        x = as_sparse_variable(x)
    except TypeError as err:
        raise TypeError(f"{op}: {what} must be sparse: {err}") from None
    check_format(op, x, formats)
    return x


def exact_value(value: Any, out_type: SparseType) -> Any:
    """``value`` (a scipy result) as an instance of ``out_type``'s class and dtype, which is
    what an Op's output must be (scipy returns other formats and upcast dtypes)."""
    cls = SparseType.format_cls[out_type.format]
    if not isinstance(value, cls):
        value = cls(value)
    if str(value.dtype) != out_type.dtype:
        value = value.astype(out_type.dtype)
    return value


def fit_gradient(g: Variable, like: Variable) -> Variable:
    """The sparse gradient ``g`` in sparse ``like``'s format and (continuous) dtype.

    A format change goes through a dense matrix (no csr/csc conversion Op exists); it only
    happens when an Op's operands have different formats. An integer ``like`` keeps the
    gradient's float dtype.
    """
    if g.type.format != like.type.format:
        g = SparseFromDense(like.type.format)(dense_from_sparse(g))
    if like.type.dtype in continuous_dtypes and g.type.dtype != like.type.dtype:
        g = cast(g, like.type.dtype)
    return g


# -- the compressed format's arrays ----------------------------------------------------------


class CSMProperties(Op):
    """``(data, indices, indptr, shape)`` of a csr/csc matrix, as views of its arrays.

    ``data`` keeps the matrix's dtype; ``indices``, ``indptr`` and ``shape`` are int32 vectors
    as in Theano. The gradient is regular: a matrix with the input's pattern holding the
    gradient of ``data``. No ``infer_shape``: the lengths are known only from the value (the
    shape feature reads them from the outputs, ``Shape_i`` of each).
    """

    __props__ = ()
    view_map = {0: [0], 1: [0], 2: [0]}

    def make_node(self, csm: Any) -> Apply:
        csm = as_sparse_variable(csm)
        check_format(self, csm)
        data = TensorType(csm.type.dtype, (False,))()
        return Apply(self, [csm], [data] + [TensorType("int32", (False,))() for _ in range(3)])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        (csm,) = inputs
        check_value(self, node, 0, csm)
        out[0][0] = csm.data
        out[1][0] = np.asarray(csm.indices, dtype="int32")
        out[2][0] = np.asarray(csm.indptr, dtype="int32")
        out[3][0] = np.asarray(csm.shape, dtype="int32")

    def grad(self, inputs: list[Variable], g: list[Variable]) -> list[Variable]:
        (csm,) = inputs
        if isinstance(g[0].type, DisconnectedType):
            return [sp_zeros_like(csm)]
        _, indices, indptr, shape = csm_properties(csm)
        return [CSM(csm.type.format)(g[0], indices, indptr, shape)]


csm_properties = CSMProperties()


def csm_data(csm: Any) -> Variable:
    """The stored values of a csr/csc matrix (a view)."""
    return csm_properties(csm)[0]


def csm_indices(csm: Any) -> Variable:
    """The column (csr) or row (csc) index of every stored value, as int32."""
    return csm_properties(csm)[1]


def csm_indptr(csm: Any) -> Variable:
    """Where each row (csr) or column (csc) starts in data and indices, as int32."""
    return csm_properties(csm)[2]


def csm_shape(csm: Any) -> Variable:
    """The matrix's shape, as an int32 vector of length 2."""
    return csm_properties(csm)[3]


def _index_input(value: Any, what: str) -> Variable:
    """An integer vector input of CSM (an int32 constant when given as a list or array)."""
    if not isinstance(value, Variable):
        arr = np.asarray(value)
        if arr.dtype.kind not in "iu":
            raise TypeError(f"CSM: {what} must hold integers, got {arr.dtype} values")
        as32 = arr.astype("int32")
        if not (as32 == arr).all():
            raise ValueError(f"CSM: {what} holds values that do not fit in int32")
        value = as32
    var = as_tensor_variable(value)
    if var.type.ndim != 1 or var.type.dtype not in discrete_dtypes:
        raise TypeError(f"CSM: {what} must be a vector of integers, got {var} of type {var.type}")
    return var


def _shape(shape: Any) -> tuple[int, ...]:
    """A shape array as a tuple of Python ints (for scipy and for messages)."""
    return tuple(int(s) for s in shape)


class CSM(Op):
    """A csr or csc matrix built from ``(data, indices, indptr, shape)``; ``data`` is a view.

    The gradient w.r.t. ``data`` is regular (``csm_grad``); the index arrays have none.
    """

    __props__ = ("format",)
    view_map = {0: [0]}

    def __init__(self, format: str) -> None:
        if format not in ("csr", "csc"):
            raise ValueError(f"CSM: format must be 'csr' or 'csc', got {format!r}")
        self.format = format

    def make_node(self, data: Any, indices: Any, indptr: Any, shape: Any) -> Apply:
        data = as_tensor_variable(data)
        if data.type.ndim != 1:
            raise TypeError(f"CSM: data must be a vector, got {data} of type {data.type}")
        inputs = [
            data,
            _index_input(indices, "indices"),
            _index_input(indptr, "indptr"),
            _index_input(shape, "shape"),
        ]
        return Apply(self, inputs, [SparseType(self.format, data.type.dtype)()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        data, indices, indptr, shape = inputs
        if len(shape) != 2:
            raise ValueError(f"CSM: shape must have 2 elements, got {len(shape)}: {shape}")
        if data.shape != indices.shape:
            raise ValueError(
                f"CSM: data (shape {data.shape}) and indices (shape {indices.shape}) must "
                "have the same length"
            )
        n_major = shape[0] if self.format == "csr" else shape[1]
        n_minor = shape[1] if self.format == "csr" else shape[0]
        if len(indptr) != n_major + 1:
            raise ValueError(
                f"CSM: indptr of a {self.format} matrix of shape {_shape(shape)} must have "
                f"{n_major + 1} elements, got {len(indptr)}"
            )
        if len(indices) and (indices.min() < 0 or indices.max() >= n_minor):
            raise IndexError(
                f"CSM: an index in indices is out of range for shape {_shape(shape)} "
                f"(got values from {indices.min()} to {indices.max()})"
            )
        cls = SparseType.format_cls[self.format]
        value = cls((data, indices.copy(), indptr.copy()), _shape(shape))
        check_structure(value, f"{self} (input 2, indptr)")
        out[0][0] = value

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True], [False], [False], [False]]

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        x_data, x_indices, x_indptr, x_shape = inputs
        (g_out,) = gout
        g_data, g_indices, g_indptr, _ = csm_properties(g_out)
        g_data = csm_grad(x_data, x_indices, x_indptr, x_shape, g_data, g_indices, g_indptr)
        return [g_data] + [disconnected_type() for _ in range(3)]

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        shape = node.inputs[3]
        return [(shape[0], shape[1])]


CSC = CSM("csc")
CSR = CSM("csr")


class CSMGrad(Op):
    """The gradient of ``CSM`` w.r.t. its data: the output gradient read at the input's
    pattern (duplicates in the gradient's pattern summed)."""

    __props__ = ()

    def make_node(self, *inputs: Any) -> Apply:
        inputs = [as_tensor_variable(i) for i in inputs]
        return Apply(self, inputs, [inputs[4].type()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        x_data, x_indices, x_indptr, x_shape, g_data, g_indices, g_indptr = inputs
        minor = x_shape[1] if len(x_indptr) - 1 == x_shape[0] else x_shape[0]
        row = np.zeros(minor, dtype=g_data.dtype)
        result = np.zeros(x_data.shape, dtype=node.outputs[0].type.dtype)
        for i in range(len(x_indptr) - 1):
            g_span = slice(g_indptr[i], g_indptr[i + 1])
            np.add.at(row, g_indices[g_span], g_data[g_span])
            x_span = slice(x_indptr[i], x_indptr[i + 1])
            result[x_span] = row[x_indices[x_span]]
            row[g_indices[g_span]] = 0
        out[0][0] = result

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [shapes[0]]


_csm_grad = CSMGrad()


def csm_grad(*inputs: Any) -> Variable:
    """``CSMGrad()(x_data, x_indices, x_indptr, x_shape, g_data, g_indices, g_indptr)``."""
    return _csm_grad(*inputs)


# -- casts and dense conversions -------------------------------------------------------------


class Cast(Op):
    """The same matrix with values of another dtype (``Cast(float32)``); regular gradient."""

    __props__ = ("out_type",)

    def __init__(self, out_type: Any) -> None:
        self.out_type = str(np.dtype(out_type))

    def __str__(self) -> str:
        return f"Cast({self.out_type})"

    def make_node(self, x: Any) -> Apply:
        x = as_sparse_variable(x)
        check_format(self, x)
        return Apply(self, [x], [SparseType(x.type.format, self.out_type)()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        (x,) = inputs
        check_value(self, node, 0, x)
        out[0][0] = x.astype(self.out_type)

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        (x,) = inputs
        (gz,) = gout
        if gz.type.dtype in complex_dtypes or x.type.dtype in complex_dtypes:
            raise TypeError(f"{self}: no gradient for complex dtypes ({x.type} -> {gz.type})")
        if gz.type.dtype in discrete_dtypes:
            return [sp_zeros_like(x, config.floatX if x.type.dtype in discrete_dtypes else None)]
        if x.type.dtype in discrete_dtypes:
            return [gz]
        return [Cast(x.type.dtype)(gz)]

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return shapes


bcast = Cast("int8")
wcast = Cast("int16")
icast = Cast("int32")
lcast = Cast("int64")
fcast = Cast("float32")
dcast = Cast("float64")
ccast = Cast("complex64")
zcast = Cast("complex128")


def cast(variable: Any, dtype: Any) -> Variable:
    """``variable`` (sparse) with values cast to ``dtype``."""
    return Cast(dtype)(variable)


class DenseFromSparse(Op):
    """The dense ndarray of a sparse matrix (``x.toarray()``).

    ``structured=True`` (the default, as in Theano) gives a structured gradient: the output
    gradient read only at the input's stored positions; ``False`` gives the full dense
    gradient as a sparse matrix.
    """

    __props__ = ()  # as in Theano, sparse_grad does not make two instances differ

    def __init__(self, structured: bool = True) -> None:
        self.sparse_grad = structured

    def __str__(self) -> str:
        return f"DenseFromSparse{{structured_grad={self.sparse_grad}}}"

    def make_node(self, x: Any) -> Apply:
        x = as_sparse_variable(x)
        return Apply(self, [x], [TensorType(x.type.dtype, (False, False))()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        (x,) = inputs
        check_value(self, node, 0, x)
        out[0][0] = x.toarray()

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        (x,) = inputs
        (gz,) = gout
        if self.sparse_grad:
            ones = sp_ones_like(x)
            dtype = upcast(ones.type.dtype, gz.type.dtype)
            if ones.type.dtype != dtype:
                ones = cast(ones, dtype)
            return [mul_s_d(ones, gz.astype(dtype) if gz.type.dtype != dtype else gz)]
        return [SparseFromDense(x.type.format)(gz)]

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [shapes[0]]


dense_from_sparse = DenseFromSparse()


class SparseFromDense(Op):
    """A dense matrix (or vector, or scalar, as a 1-row matrix) as a csr or csc matrix."""

    __props__ = ("format",)

    def __init__(self, format: str) -> None:
        if format not in ("csr", "csc"):
            raise ValueError(f"SparseFromDense: format must be 'csr' or 'csc', got {format!r}")
        self.format = format

    def __str__(self) -> str:
        return f"SparseFromDense{{{self.format}}}"

    def make_node(self, x: Any) -> Apply:
        if is_sparse_variable(x) or is_sparse(x):
            raise TypeError(
                f"{self}: the input is already sparse ({x}); it needs a dense matrix. "
                "HINT: use x.asformat or sparse.cast to change a sparse matrix"
            )
        x = as_tensor_variable(x)
        if x.type.ndim > 2:
            raise TypeError(
                f"{self}: sparse matrices have 2 dimensions, {x} has {x.type.ndim} (type {x.type})"
            )
        if x.type.ndim < 2:
            x = DimShuffle(
                x.type.broadcastable, ["x"] * (2 - x.type.ndim) + list(range(x.type.ndim))
            )(x)
        return Apply(self, [x], [SparseType(self.format, x.type.dtype)()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        (x,) = inputs
        out[0][0] = SparseType.format_cls[self.format](x)

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        (x,) = inputs
        (gz,) = gout
        gx = dense_from_sparse(gz)
        if any(x.type.broadcastable):
            from_bcast = [i for i, b in enumerate(x.type.broadcastable) if b]
            gx = gx.sum(axis=from_bcast, keepdims=True)  # type: ignore[attr-defined]
        return [gx]

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [shapes[0]]


csr_from_dense = SparseFromDense("csr")
csc_from_dense = SparseFromDense("csc")


# -- sparse times dense, on the sparse pattern -----------------------------------------------


class MulSD(Op):
    """Elementwise ``x * y`` of a sparse ``x`` and a dense ``y`` (a matrix or a scalar): a
    sparse matrix with ``x``'s pattern (``mul_s_d``)."""

    __props__ = ()

    def make_node(self, x: Any, y: Any) -> Apply:
        x = as_sparse_variable(x)
        check_format(self, x)
        y = as_tensor_variable(y)
        if y.type.ndim not in (0, 2):
            raise TypeError(
                f"{self}: the dense operand must be a matrix or a scalar, got {y} with "
                f"{y.type.ndim} dimension(s) (type {y.type})"
            )
        dtype = upcast(x.type.dtype, y.type.dtype)
        return Apply(self, [x, y], [SparseType(x.type.format, dtype)()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        x, y = inputs
        check_value(self, node, 0, x)
        dtype = node.outputs[0].type.dtype
        if y.ndim == 0:
            out[0][0] = x.astype(dtype) * y if x.nnz else x.astype(dtype, copy=True)
            return
        if y.shape != x.shape:
            raise ValueError(
                f"{self}: the sparse operand has shape {x.shape}, the dense one {y.shape}; "
                "they must be equal"
            )
        coo = x.tocoo()
        data = (coo.data * y[coo.row, coo.col]).astype(dtype, copy=False)
        out[0][0] = type(x)((data, x.indices.copy(), x.indptr.copy()), x.shape)

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        x, y = inputs
        (gz,) = gout
        gx = mul_s_d(gz, y)
        gy_sparse = mul_s_d(gz, dense_from_sparse(x)) if y.type.ndim == 2 else None
        if y.type.ndim == 0:
            gy = (dense_from_sparse(gz) * dense_from_sparse(x)).sum()  # type: ignore[operator]
        else:
            gy = dense_from_sparse(gy_sparse)
        return [_fit_dtype(gx, x.type.dtype), gy.astype(y.type.dtype)]  # type: ignore[union-attr]

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [shapes[0]]


mul_s_d = MulSD()


def _fit_dtype(var: Variable, dtype: str) -> Variable:
    """``var`` (sparse) cast to ``dtype`` when it differs."""
    return var if var.type.dtype == dtype else cast(var, dtype)


def sp_ones_like(x: Any) -> Variable:
    """A sparse matrix with ``x``'s pattern holding ones."""
    x = as_sparse_variable(x)
    data, indices, indptr, shape = csm_properties(x)
    return CSM(x.type.format)(ones_like(data), indices, indptr, shape)


def sp_zeros_like(x: Any, dtype: str | None = None) -> Variable:
    """A sparse matrix of ``x``'s shape and format with nothing stored (``dtype`` or x's)."""
    x = as_sparse_variable(x)
    _, _, indptr, shape = csm_properties(x)
    data = as_tensor_variable(np.zeros(0, dtype=dtype or x.type.dtype))
    indices = as_tensor_variable(np.zeros(0, dtype="int32"))
    return CSM(x.type.format)(data, indices, zeros_like(indptr), shape)
