"""Index arithmetic as ops: unravel_index, ravel_multi_index, searchsorted and unique.

Their integer outputs are piecewise constant: the gradient with respect to float inputs is
zero and integer inputs are disconnected. ``unique``'s values have no gradient.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import opgraph.tensor.math as tm
from opgraph.graph.basic import Apply, Variable
from opgraph.graph.null_type import disconnected_type, grad_undefined
from opgraph.graph.op import Op
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.shape import as_shape_vector, get_vector_length, integer_dtypes
from opgraph.tensor.type import TensorType

__all__ = [
    "RavelMultiIndex",
    "SearchsortedOp",
    "Unique",
    "UnravelIndex",
    "ravel_multi_index",
    "searchsorted",
    "unique",
    "unravel_index",
]

_ORDERS = ("C", "F")


def _indices(x: Any, what: str) -> Variable:
    v = as_tensor_variable(x)
    if v.type.dtype not in integer_dtypes:
        raise TypeError(f"{what} must have an integer dtype, got {v} of type {v.type}")
    return v


def _check_order(op: Any, order: str) -> None:
    if order not in _ORDERS:
        raise ValueError(f"{op}: order must be 'C' or 'F', got {order!r}")


class UnravelIndex(Op):
    """Flat indices into an array of shape ``dims`` as one int64 index array per dimension."""

    __props__ = ("order",)

    def __init__(self, order: str = "C") -> None:
        _check_order("UnravelIndex", order)
        self.order = order

    def make_node(self, indices: Any, dims: Any) -> Apply:
        indices = _indices(indices, "unravel_index: indices")
        dims = as_shape_vector(dims, "unravel_index: dims")
        try:
            n = get_vector_length(dims)
        except ValueError:
            raise ValueError(
                "unravel_index: the length of dims must be known before running (one output "
                "per dimension). HINT: pass dims as a tuple."
            ) from None
        outputs = [TensorType("int64", indices.type.broadcastable)() for _ in range(n)]
        return Apply(self, [indices, dims], outputs)

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        indices, dims = inputs
        shp = tuple(int(d) for d in dims)
        try:
            result = np.unravel_index(indices, shp, order=self.order)
        except ValueError as exc:
            raise ValueError(
                f"unravel_index: cannot unravel indices into shape {shp}: {exc}"
            ) from None
        for cell, r in zip(output_storage, result, strict=True):
            cell[0] = np.array(r, dtype="int64")

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]] * len(node.outputs)

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        return [disconnected_type(), disconnected_type()]


def unravel_index(indices: Any, dims: Any, order: str = "C") -> tuple[Variable, ...]:
    """The multi-dimensional indices of the flat ``indices`` into shape ``dims`` (a tuple)."""
    out = UnravelIndex(order)(indices, dims, return_list=True)
    return tuple(out)


class RavelMultiIndex(Op):
    """One flat index per element of the index arrays ``multi_index`` into shape ``dims``.

    ``mode`` handles out-of-range indices as NumPy does ('raise', 'wrap' or 'clip').
    """

    __props__ = ("mode", "order")

    def __init__(self, mode: str = "raise", order: str = "C") -> None:
        if mode not in ("raise", "wrap", "clip"):
            raise ValueError(f"RavelMultiIndex: mode must be raise/wrap/clip, got {mode!r}")
        _check_order("RavelMultiIndex", order)
        self.mode, self.order = mode, order

    def make_node(self, *inputs: Any) -> Apply:
        if len(inputs) < 2:
            raise TypeError("ravel_multi_index needs at least one index array and dims")
        multi = [
            _indices(m, f"ravel_multi_index: index array {k}") for k, m in enumerate(inputs[:-1])
        ]
        dims = as_shape_vector(inputs[-1], "ravel_multi_index: dims")
        ndim = multi[0].type.ndim
        if any(m.type.ndim != ndim for m in multi):
            raise TypeError(
                "ravel_multi_index: the index arrays must have the same number of dimensions, "
                f"got {[m.type.ndim for m in multi]}"
            )
        bcast = [all(m.type.broadcastable[d] for m in multi) for d in range(ndim)]
        return Apply(self, [*multi, dims], [TensorType("int64", bcast)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        *multi, dims = inputs
        shp = tuple(int(d) for d in dims)
        try:
            out = np.ravel_multi_index(tuple(multi), shp, mode=self.mode, order=self.order)
        except ValueError as exc:
            raise ValueError(
                f"ravel_multi_index: cannot ravel index arrays of shapes "
                f"{[m.shape for m in multi]} into shape {shp}: {exc}"
            ) from None
        output_storage[0][0] = np.asarray(out, dtype="int64")

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        multi = node.inputs[:-1]
        out = []
        for d in range(len(input_shapes[0])):
            chosen: Any = 1
            for var, shp in zip(multi, input_shapes, strict=False):
                if not var.type.broadcastable[d]:
                    chosen = shp[d]
                    break
            out.append(chosen)
        return [tuple(out)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        return [disconnected_type() for _ in inputs]


def ravel_multi_index(
    multi_index: Sequence[Any], dims: Any, mode: str = "raise", order: str = "C"
) -> Variable:
    """Flat indices of the index arrays ``multi_index`` into an array of shape ``dims``."""
    if not isinstance(multi_index, list | tuple):
        raise TypeError("ravel_multi_index: multi_index must be a tuple of index arrays")
    return RavelMultiIndex(mode, order)(*multi_index, dims)


class SearchsortedOp(Op):
    """Where each element of ``v`` would be inserted into the sorted vector ``x`` (int64)."""

    __props__ = ("side",)

    def __init__(self, side: str = "left") -> None:
        if side not in ("left", "right"):
            raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        self.side = side

    def make_node(self, x: Any, v: Any, sorter: Any = None) -> Apply:
        x, v = as_tensor_variable(x), as_tensor_variable(v)
        if x.type.ndim != 1:
            raise TypeError(f"searchsorted: x must be a vector, got {x} of type {x.type}")
        inputs = [x, v]
        if sorter is not None:
            sorter = _indices(sorter, "searchsorted: sorter")
            if sorter.type.ndim != 1:
                raise TypeError(f"searchsorted: sorter must be a vector, got {sorter.type}")
            inputs.append(sorter)
        return Apply(self, inputs, [TensorType("int64", v.type.broadcastable)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x, v, *sorter = inputs
        if sorter and sorter[0].shape != x.shape:
            raise ValueError(
                f"searchsorted: sorter has shape {sorter[0].shape}, x has shape {x.shape}"
            )
        try:
            out = np.searchsorted(x, v, side=self.side, sorter=sorter[0] if sorter else None)
        except (ValueError, IndexError) as exc:
            raise ValueError(f"searchsorted: {exc}") from None
        output_storage[0][0] = np.asarray(out, dtype="int64")

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[1]]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        grads = [tm.zeros_like_grad(inputs[0]), tm.zeros_like_grad(inputs[1])]
        return grads + [disconnected_type()] * (len(inputs) - 2)


def searchsorted(x: Any, v: Any, side: str = "left", sorter: Any = None) -> Variable:
    """Indices where ``v`` would be inserted into the sorted vector ``x`` (NumPy's)."""
    return SearchsortedOp(side)(x, v, sorter)


class Unique(Op):
    """The sorted unique elements of ``x`` (flattened, or slices along ``axis``).

    Optional outputs, in NumPy's order: first-occurrence indices, the inverse (indices that
    rebuild ``x``, a vector as in Theano) and the counts, all int64 vectors.
    """

    __props__ = ("return_index", "return_inverse", "return_counts", "axis")

    def __init__(
        self,
        return_index: bool = False,
        return_inverse: bool = False,
        return_counts: bool = False,
        axis: int | None = None,
    ) -> None:
        self.return_index = bool(return_index)
        self.return_inverse = bool(return_inverse)
        self.return_counts = bool(return_counts)
        self.axis = None if axis is None else int(axis)

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        if self.axis is None:
            bcast: list[bool] = [False]
        else:
            if not -x.type.ndim <= self.axis < x.type.ndim:
                raise ValueError(f"{self}: axis {self.axis} is out of range for {x.type}")
            axis = self.axis % x.type.ndim
            bcast = [b and d != axis for d, b in enumerate(x.type.broadcastable)]
        outputs = [TensorType(x.type.dtype, bcast)()]
        n_extra = self.return_index + self.return_inverse + self.return_counts
        outputs += [TensorType("int64", (False,))() for _ in range(n_extra)]
        return Apply(self, [x], outputs)

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        (x,) = inputs
        result = np.unique(
            x,
            return_index=self.return_index,
            return_inverse=self.return_inverse,
            return_counts=self.return_counts,
            axis=self.axis,
        )
        if not isinstance(result, tuple):
            result = (result,)
        output_storage[0][0] = np.asarray(result[0], dtype=x.dtype)
        for cell, r in zip(output_storage[1:], result[1:], strict=True):
            cell[0] = np.asarray(r, dtype="int64").reshape(-1)

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        return [
            grad_undefined(
                self,
                0,
                inputs[0],
                "unique() merges equal elements, so its values have no gradient. HINT: sort() "
                "is differentiable.",
            )
        ]


def unique(
    ar: Any,
    return_index: bool = False,
    return_inverse: bool = False,
    return_counts: bool = False,
    axis: int | None = None,
) -> Any:
    """The sorted unique elements of ``ar`` (NumPy's unique); a list when extras are asked for."""
    return Unique(return_index, return_inverse, return_counts, axis)(ar)
