"""Indexing sparse matrices: ``x[rows]``, ``x[rows, cols]``, ``x[a:b, c:d]``, ``x[i, j]``.

The Ops are Theano 1.0's: :class:`GetItemList` (rows picked by an integer list, a sparse
matrix), :class:`GetItem2Lists` (elements picked by two integer lists, a dense vector),
:class:`GetItem2d` (2-d slices, a sparse matrix) and :class:`GetItemScalar` (one element, a
dense scalar), with the gradient Ops of the first two. :func:`getitem` is what
``SparseVariable.__getitem__`` calls: it picks one of them from the index, as Theano did.

:class:`ConstructSparseFromList` and :func:`sparse_grad` are the other side of dense advanced
indexing: ``opgraph.sparse_grad(x[idx])`` makes the gradient of ``x[idx]`` w.r.t. the dense
``x`` a sparse (csc) matrix built by ``construct_sparse_from_list``.

Integer indices may be negative (counted from the end, as NumPy and scipy do); an index out
of range is an IndexError naming the Op, raised before scipy is called.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse

from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.null_type import disconnected_type, grad_not_implemented, grad_undefined
from opgraph.graph.op import Op
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.subtensor_advanced import AdvancedSubtensor1, NoneConst, advanced_subtensor1
from opgraph.tensor.subtensor_basic import slice_length
from opgraph.tensor.type import TensorType
from opgraph_sparse.basic import (
    check_value,
    dense_from_sparse,
    discrete_dtypes,
    exact_value,
    is_sparse_variable,
    sparse_input,
)
from opgraph_sparse.type import SparseType, is_sparse

__all__ = [
    "ConstructSparseFromList",
    "GetItem2Lists",
    "GetItem2ListsGrad",
    "GetItem2d",
    "GetItemList",
    "GetItemListGrad",
    "GetItemScalar",
    "construct_sparse_from_list",
    "get_item_2d",
    "get_item_2lists",
    "get_item_2lists_grad",
    "get_item_list",
    "get_item_list_grad",
    "get_item_scalar",
    "getitem",
    "sparse_grad",
]


# -- helpers ---------------------------------------------------------------------------------


def _int_index(op: Op, value: Any, ndim: int, what: str) -> Variable:
    """``value`` as an integer tensor of ``ndim`` dimensions, or a TypeError naming ``op``.

    Python lists and NumPy arrays become constants (an empty list an empty int64 vector).
    """
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"{op}: {what} must be an integer, got the boolean {value!r}")
    if not isinstance(value, Variable):
        arr = np.asarray(value)
        if arr.size == 0 and arr.dtype.kind not in "iu":
            arr = arr.astype("int64")
        if arr.dtype.kind not in "iu":
            raise TypeError(f"{op}: {what} must hold integers, got {arr.dtype} values ({value!r})")
        value = arr
    try:
        var = as_tensor_variable(value)
    except TypeError as err:
        raise TypeError(f"{op}: {what} must be an integer tensor, got {value!r}: {err}") from err
    if var.type.ndim != ndim or var.type.dtype not in discrete_dtypes:
        kind = "scalar" if ndim == 0 else "vector"
        raise TypeError(f"{op}: {what} must be an integer {kind}, got {var} of type {var.type}")
    return var


def _wrap(op: Op, index: Any, length: int, what: str) -> np.ndarray:
    """Integer indices into a dimension of ``length``: negatives wrapped, range checked."""
    idx = np.asarray(index)
    if idx.size and (idx.min() < -length or idx.max() >= length):
        bad = idx[(idx < -length) | (idx >= length)]
        raise IndexError(
            f"{op}: {what} {bad[0]} is out of range for a dimension of length {length} "
            f"(valid: {-length} to {length - 1})"
        )
    return np.where(idx < 0, idx + length, idx).astype(np.intp, copy=False)


def _scatter(
    rows: np.ndarray, cols: np.ndarray, data: np.ndarray, shape: tuple[int, int], out_type: Any
) -> Any:
    """A matrix of ``out_type`` holding ``data`` at ``(rows, cols)``, duplicates summed."""
    coo = scipy.sparse.coo_matrix((data, (rows, cols)), shape=shape)
    return exact_value(coo.asformat(out_type.format), out_type)


# -- rows picked by a list -------------------------------------------------------------------


class GetItemList(Op):
    """``x[rows]``: the rows of a csr/csc matrix listed by an integer vector (repeats and
    negative indices allowed), as a matrix of ``x``'s type. Regular gradient
    (:class:`GetItemListGrad`)."""

    __props__ = ()

    def make_node(self, x: Any, index: Any) -> Apply:
        x = sparse_input(self, x, "the matrix to index")
        ind = _int_index(self, index, 1, "the row index")
        return Apply(self, [x, ind], [x.type()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        x, index = inputs
        check_value(self, node, 0, x)
        rows = _wrap(self, index, x.shape[0], "row index")
        out[0][0] = exact_value(x[rows], node.outputs[0].type)

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [(shapes[1][0], shapes[0][1])]

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        x, index = inputs
        (gz,) = gout
        return [
            get_item_list_grad(x, index, gz),
            grad_undefined(self, 1, index, "the row indices have no gradient"),
        ]


get_item_list = GetItemList()


class GetItemListGrad(Op):
    """The gradient of ``x[rows]`` w.r.t. ``x``: a matrix of ``x``'s type and shape with row
    ``k`` of ``gz`` added at row ``rows[k]`` (repeated rows accumulate)."""

    __props__ = ()

    def make_node(self, x: Any, index: Any, gz: Any) -> Apply:
        x = sparse_input(self, x, "the matrix to index")
        gz = sparse_input(self, gz, "the matrix to index")
        ind = _int_index(self, index, 1, "the row index")
        return Apply(self, [x, ind, gz], [x.type()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        x, index, gz = inputs
        check_value(self, node, 0, x)
        if gz.shape != (len(index), x.shape[1]):
            raise ValueError(
                f"{self}: the output gradient has shape {gz.shape}, expected "
                f"{(len(index), x.shape[1])} ({len(index)} rows picked from {x.shape})"
            )
        rows = _wrap(self, index, x.shape[0], "row index")
        coo = gz.tocoo()
        out[0][0] = _scatter(rows[coo.row], coo.col, coo.data, x.shape, node.outputs[0].type)

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [shapes[0]]


get_item_list_grad = GetItemListGrad()


# -- elements picked by two lists ------------------------------------------------------------


class GetItem2Lists(Op):
    """``x[rows, cols]``: the elements at ``(rows[k], cols[k])`` as a dense vector of ``x``'s
    dtype. Regular gradient (:class:`GetItem2ListsGrad`)."""

    __props__ = ()

    def make_node(self, x: Any, ind1: Any, ind2: Any) -> Apply:
        x = sparse_input(self, x, "the matrix to index")
        ind1 = _int_index(self, ind1, 1, "the row index")
        ind2 = _int_index(self, ind2, 1, "the column index")
        return Apply(self, [x, ind1, ind2], [TensorType(x.type.dtype, (False,))()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        x, ind1, ind2 = inputs
        check_value(self, node, 0, x)
        rows, cols = _pair(self, x.shape, ind1, ind2)
        values = np.asarray(x[rows, cols]).ravel() if len(rows) else np.zeros(0)
        out[0][0] = values.astype(node.outputs[0].type.dtype, copy=False)

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [(shapes[1][0],)]

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        x, ind1, ind2 = inputs
        (gz,) = gout
        return [
            get_item_2lists_grad(x, ind1, ind2, gz),
            grad_undefined(self, 1, ind1, "the row indices have no gradient"),
            grad_undefined(self, 2, ind2, "the column indices have no gradient"),
        ]


def _pair(op: Op, shape: tuple[int, int], ind1: Any, ind2: Any) -> tuple[np.ndarray, np.ndarray]:
    """Row and column index vectors of equal length, wrapped and range checked."""
    if len(ind1) != len(ind2):
        raise ValueError(
            f"{op}: the row and column index lists must have the same length, got "
            f"{len(ind1)} and {len(ind2)}"
        )
    return _wrap(op, ind1, shape[0], "row index"), _wrap(op, ind2, shape[1], "column index")


get_item_2lists = GetItem2Lists()


class GetItem2ListsGrad(Op):
    """The gradient of ``x[rows, cols]`` w.r.t. ``x``: a matrix of ``x``'s type and shape
    with ``gz[k]`` added at ``(rows[k], cols[k])`` (repeated pairs accumulate)."""

    __props__ = ()

    def make_node(self, x: Any, ind1: Any, ind2: Any, gz: Any) -> Apply:
        x = sparse_input(self, x, "the matrix to index")
        ind1 = _int_index(self, ind1, 1, "the row index")
        ind2 = _int_index(self, ind2, 1, "the column index")
        gz = as_tensor_variable(gz)
        if gz.type.ndim != 1:
            raise TypeError(f"{self}: the output gradient must be a vector, got {gz.type}")
        return Apply(self, [x, ind1, ind2, gz], [x.type()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        x, ind1, ind2, gz = inputs
        check_value(self, node, 0, x)
        rows, cols = _pair(self, x.shape, ind1, ind2)
        if gz.shape != rows.shape:
            raise ValueError(
                f"{self}: the output gradient has {gz.shape[0]} values for {len(rows)} indices"
            )
        out[0][0] = _scatter(rows, cols, gz, x.shape, node.outputs[0].type)

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [shapes[0]]


get_item_2lists_grad = GetItem2ListsGrad()


# -- slices ----------------------------------------------------------------------------------


def _slice_part(op: Op, part: Any, what: str) -> Variable:
    """A slice's start, stop or step as an integer scalar input (``NoneConst`` for None)."""
    if part is None:
        return NoneConst
    if isinstance(part, Variable) and isinstance(part.type, TensorType):
        if part.type.ndim != 0 or part.type.dtype not in discrete_dtypes:
            raise TypeError(
                f"{op}: a slice {what} must be an integer scalar, got {part} of type {part.type}"
            )
        return part
    if isinstance(part, int | np.integer) and not isinstance(part, bool | np.bool_):
        return as_tensor_variable(np.asarray(part, dtype="int64"))
    raise TypeError(f"{op}: a slice {what} must be an integer scalar, got {part!r}")


class GetItem2d(Op):
    """``x[a:b:s, c:d:t]`` (or ``x[a:b:s]``): a 2-d slice of a csr/csc matrix, as a matrix
    of ``x``'s type. Bounds and steps are None, ints or symbolic integer scalars; negative
    values count from the end, as in NumPy. Like Theano, an integer in place of a slice is
    refused (sparse vectors do not exist) and there is no gradient.

    The node's inputs are ``x`` and the six bounds (``NoneConst`` for an absent one).
    """

    __props__ = ()

    def make_node(self, x: Any, index: Any) -> Apply:
        x = sparse_input(self, x, "the matrix to index")
        if not isinstance(index, tuple | list):
            index = (index,)
        if len(index) not in (1, 2):
            raise IndexError(
                f"{self}: a sparse matrix takes 1 or 2 indices, got {len(index)}: {index!r}"
            )
        inputs = [x]
        for ind in index:
            if not isinstance(ind, slice):
                raise TypeError(_not_a_slice(self, ind))
            step = ind.step
            if isinstance(step, int | np.integer) and step == 1:
                step = None
            inputs += [
                _slice_part(self, ind.start, "start"),
                _slice_part(self, ind.stop, "stop"),
                _slice_part(self, step, "step"),
            ]
        if len(index) == 1:
            inputs += [NoneConst, NoneConst, NoneConst]
        return Apply(self, inputs, [x.type()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        x = inputs[0]
        check_value(self, node, 0, x)
        bounds = [None if b is None else int(b) for b in inputs[1:]]
        if bounds[2] == 0 or bounds[5] == 0:
            raise ValueError(f"{self}: a slice step cannot be zero")
        rows = slice(*bounds[0:3])
        cols = slice(*bounds[3:6])
        value = exact_value(x[rows, cols], node.outputs[0].type)
        if value is x or np.may_share_memory(value.data, x.data):
            value = value.copy()
        out[0][0] = value

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        parts = [None if _is_none_const(v) else v for v in node.inputs[1:]]
        n_rows = slice_length(slice(*parts[0:3]), shapes[0][0])
        n_cols = slice_length(slice(*parts[3:6]), shapes[0][1])
        return [(n_rows, n_cols)]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True]] + [[False]] * (len(node.inputs) - 1)

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        x = inputs[0]
        return [
            grad_not_implemented(
                self, 0, x, "slicing a sparse matrix has no gradient (as in Theano)"
            )
        ] + [disconnected_type() for _ in inputs[1:]]


def _is_none_const(v: Variable) -> bool:
    return isinstance(v, Constant) and v.data is None


def _not_a_slice(op: Op, ind: Any) -> str:
    """The message for an index GetItem2d cannot take."""
    if _is_int_scalar(ind):
        return (
            f"{op}: an integer index ({ind!r}) with a slice would give a sparse vector, which "
            "does not exist. HINT: use X[a:b, c:c+1], X[a:a+1, b:c] or X[a:b] instead"
        )
    return (
        f"{op}: advanced indexing of sparse matrices takes an integer list for the rows "
        f"(x[[i, j]]) or two (x[[i, j], [k, l]]); got {ind!r} among slices"
    )


get_item_2d = GetItem2d()


# -- one element -----------------------------------------------------------------------------


class GetItemScalar(Op):
    """``x[i, j]``: one element of a csr/csc matrix as a dense scalar of its dtype (0 where
    nothing is stored). No gradient, as in Theano."""

    __props__ = ()

    def make_node(self, x: Any, index: Any) -> Apply:
        x = sparse_input(self, x, "the matrix to index")
        if not isinstance(index, tuple | list) or len(index) != 2:
            raise IndexError(f"{self}: the index must be a pair (i, j), got {index!r}")
        if any(isinstance(i, slice) for i in index):
            raise TypeError(f"{self}: the index must be two integers, got a slice: {index!r}")
        ind = [_int_index(self, i, 0, what) for i, what in zip(index, ("row", "column"))]
        return Apply(self, [x, *ind], [TensorType(x.type.dtype, ())()])

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        x, i, j = inputs
        check_value(self, node, 0, x)
        row = int(_wrap(self, i, x.shape[0], "row index"))
        col = int(_wrap(self, j, x.shape[1], "column index"))
        out[0][0] = np.asarray(x[row, col], dtype=node.outputs[0].type.dtype)

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        return [()]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True], [False], [False]]

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        return [
            grad_not_implemented(self, 0, inputs[0], "x[i, j] has no gradient (as in Theano)"),
            disconnected_type(),
            disconnected_type(),
        ]


get_item_scalar = GetItemScalar()


# -- the dispatch of SparseVariable.__getitem__ ---------------------------------------------


def _is_int_scalar(arg: Any) -> bool:
    """A Python/NumPy integer or a 0-d integer tensor variable."""
    if isinstance(arg, bool | np.bool_):
        return False
    if isinstance(arg, int | np.integer):
        return True
    if isinstance(arg, np.ndarray):
        return arg.ndim == 0 and arg.dtype.kind in "iu"
    t = getattr(arg, "type", None)
    return isinstance(t, TensorType) and t.ndim == 0 and t.dtype in discrete_dtypes


def _is_int_list(arg: Any) -> bool:
    """A Python list, a 1-d NumPy integer array or an integer vector variable."""
    if isinstance(arg, list):
        return True
    if isinstance(arg, np.ndarray):
        return arg.ndim == 1 and (arg.dtype.kind in "iu" or arg.size == 0)
    t = getattr(arg, "type", None)
    return isinstance(t, TensorType) and t.ndim == 1 and t.dtype in discrete_dtypes


def getitem(x: Any, args: Any) -> Variable:
    """``x[args]`` for a sparse variable ``x`` (Theano's ``__getitem__`` dispatch).

    - ``x[i, j]`` with two integer scalars: :func:`get_item_scalar` (a dense scalar);
    - ``x[rows, cols]`` with two integer lists: :func:`get_item_2lists` (a dense vector);
    - ``x[rows]`` with an integer list: :func:`get_item_list` (a sparse matrix);
    - slices, ``x[a:b]`` or ``x[a:b, c:d]``: :func:`get_item_2d` (a sparse matrix).

    Besides Python lists (Theano's only list form), NumPy integer arrays and symbolic integer
    vectors pick rows too, and any integer scalar variable (not only int32) is a scalar
    index. Anything else is an error from the Op that would take it.
    """
    if not isinstance(args, tuple):
        args = (args,)
    if len(args) == 2:
        if _is_int_scalar(args[0]) and _is_int_scalar(args[1]):
            return get_item_scalar(x, args)
        if _is_int_list(args[0]):
            return get_item_2lists(x, args[0], args[1])
        return get_item_2d(x, args)
    if len(args) == 1 and _is_int_list(args[0]):
        return get_item_list(x, args[0])
    return get_item_2d(x, args)


# -- the sparse gradient of dense advanced indexing ------------------------------------------


class ConstructSparseFromList(Op):
    """A csc matrix of ``x``'s shape and dtype holding row ``k`` of ``values`` at row
    ``ilist[k]`` (repeated rows accumulate; negative indices count from the end).

    It is the sparse gradient of ``x[ilist]`` (``AdvancedSubtensor1`` with
    ``sparse_grad=True``). Only ``x``'s shape is an input of the node (``x.shape``), so the
    dense ``x`` is not kept alive. Regular gradient w.r.t. ``values``.
    """

    __props__ = ()

    def make_node(self, x: Any, values: Any, ilist: Any) -> Apply:
        if is_sparse_variable(x) or is_sparse(x):
            raise TypeError(f"{self}: x must be a dense matrix, got the sparse {x}")
        x = as_tensor_variable(x)
        values = as_tensor_variable(values)
        ilist = _int_index(self, ilist, 1, "ilist")
        if x.type.ndim != 2:
            raise TypeError(
                f"{self}: cannot build a sparse matrix shaped like {x} of {x.type.ndim} "
                f"dimension(s) (type {x.type}); it must be a matrix"
            )
        if values.type.ndim != 2:
            raise TypeError(
                f"{self}: values must be a matrix (one row per index), got {values} of type "
                f"{values.type}"
            )
        out = SparseType("csc", x.type.dtype)()
        return Apply(self, [x.shape, values, ilist], [out])  # type: ignore[attr-defined]

    def perform(self, node: Apply, inputs: list[Any], out: list[list[Any]]) -> None:
        out_shape, values, ilist = inputs
        shape = (int(out_shape[0]), int(out_shape[1]))
        n_rows, n_cols = values.shape
        if n_rows != len(ilist):
            raise ValueError(f"{self}: values has {n_rows} rows but ilist has {len(ilist)} indices")
        if n_cols != shape[1]:
            raise ValueError(
                f"{self}: values has {n_cols} columns, the output matrix {shape[1]} (shape {shape})"
            )
        rows = _wrap(self, ilist, shape[0], "row index")
        rr = np.broadcast_to(rows[:, None], values.shape).ravel()
        cc = np.broadcast_to(np.arange(n_cols)[None, :], values.shape).ravel()
        out[0][0] = _scatter(rr, cc, values.ravel(), shape, node.outputs[0].type)

    def infer_shape(self, node: Apply, shapes: list[Any]) -> list[Any]:
        shape = node.inputs[0]
        return [(shape[0], shape[1])]  # type: ignore[index]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[False], [True], [False]]

    def grad(self, inputs: list[Variable], gout: list[Variable]) -> list[Variable]:
        _, values, ilist = inputs
        (gz,) = gout
        dense = dense_from_sparse(gz) if is_sparse_variable(gz) else as_tensor_variable(gz)
        g_values = advanced_subtensor1(dense, ilist)
        if g_values.type.dtype != values.type.dtype:
            g_values = g_values.astype(values.type.dtype)  # type: ignore[attr-defined]
        return [disconnected_type(), g_values, disconnected_type()]


construct_sparse_from_list = ConstructSparseFromList()


def sparse_grad(var: Variable) -> Variable:
    """Theano's ``theano.sparse_grad``: ``var``, the result of ``x[ilist]`` (an
    ``AdvancedSubtensor1`` node), rebuilt so that its gradient w.r.t. ``x`` is a sparse
    csc matrix (:func:`construct_sparse_from_list`) rather than a dense one."""
    owner = getattr(var, "owner", None)
    if owner is None or not isinstance(owner.op, AdvancedSubtensor1):
        made_by = "a graph input or constant" if owner is None else f"{owner.op}"
        raise TypeError(
            f"sparse_grad needs the result of advanced indexing by an integer vector "
            f"(x[ilist], an AdvancedSubtensor1 node); {var!r} is made by {made_by}"
        )
    return type(owner.op)(sparse_grad=True)(*owner.inputs)
