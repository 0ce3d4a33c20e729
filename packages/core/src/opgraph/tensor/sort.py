"""Sorting: ``SortOp`` (sort), ``ArgSortOp`` (argsort), and the permutation op of sort's grad.

The gradient of ``sort`` sends each output gradient back to the position its element came
from: ``PermuteAlongAxis`` applies the inverse of the sorting permutation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import opgraph.tensor.math as tm
from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Variable
from opgraph.graph.null_type import disconnected_type
from opgraph.graph.op import Op
from opgraph.scalar.type import discrete_dtypes
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.shape import flatten, int_scalar, integer_dtypes, scalar_constant
from opgraph.tensor.type import TensorType

__all__ = ["ArgSortOp", "PermuteAlongAxis", "SortOp", "argsort", "sort"]

_KINDS = ("quicksort", "mergesort", "heapsort", "stable")


def _axis_input(op: Op, a: Variable, axis: Any) -> Variable:
    """The axis input: an int scalar, checked against ``a``'s rank when it is a constant."""
    if axis is None:
        raise TypeError(
            f"{op}: axis=None is not an op input. HINT: call sort(a, axis=None), which "
            "flattens a first."
        )
    axis = int_scalar(axis, f"{op}'s axis")
    if a.type.ndim == 0:
        raise ValueError(f"{op}: cannot sort the 0-d tensor {a} along an axis")
    value = scalar_constant(axis)
    if value is not None and not -a.type.ndim <= int(value) < a.type.ndim:
        raise ValueError(
            f"{op}: axis {int(value)} is out of range for {a} ({a.type.ndim} dimension(s))"
        )
    return axis


def _runtime_axis(op: Op, a: np.ndarray, axis: Any) -> int:
    value = int(axis)
    if not -a.ndim <= value < a.ndim:
        raise ValueError(f"{op}: axis {value} is out of range for an array of shape {a.shape}")
    return value


class _SortBase(Op):
    """Shared parameters of SortOp and ArgSortOp: NumPy's ``kind`` (and ``order``, unused)."""

    __props__ = ("kind", "order")

    def __init__(self, kind: str = "quicksort", order: Any = None) -> None:
        if kind not in _KINDS:
            raise ValueError(f"{type(self).__name__}: kind must be one of {_KINDS}, got {kind!r}")
        if order is not None:
            raise ValueError(
                f"{type(self).__name__}: order applies to structured arrays, which tensors "
                f"are not; got order={order!r}"
            )
        self.kind = kind
        self.order = order

    def __str__(self) -> str:
        return f"{type(self).__name__}{{{self.kind}, {self.order}}}"

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]


class SortOp(_SortBase):
    """A copy of ``a`` sorted along ``axis`` (the second input): ``SortOp{quicksort, None}``.

    NaNs sort to the end, as in NumPy.
    """

    def make_node(self, input: Any, axis: Any = -1) -> Apply:
        a = as_tensor_variable(input)
        axis = _axis_input(self, a, axis)
        return Apply(self, [a, axis], [a.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        a, axis = inputs
        output_storage[0][0] = np.sort(a, axis=_runtime_axis(self, a, axis), kind=self.kind)

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        a, axis = inputs
        if a.type.dtype in discrete_dtypes:
            return [tm.zeros_like(a, dtype=config.floatX), disconnected_type()]
        idx = ArgSortOp(self.kind)(a, axis)
        inverse = ArgSortOp("quicksort")(idx, axis)
        return [permute_along_axis(output_grads[0], inverse, axis), disconnected_type()]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list[Any]:
        a, axis = inputs
        if eval_points[0] is None:
            return [None]
        return [permute_along_axis(eval_points[0], ArgSortOp(self.kind)(a, axis), axis)]


class ArgSortOp(_SortBase):
    """The int64 indices that sort ``a`` along ``axis``: ``ArgSortOp{quicksort, None}``."""

    def make_node(self, input: Any, axis: Any = -1) -> Apply:
        a = as_tensor_variable(input)
        axis = _axis_input(self, a, axis)
        return Apply(self, [a, axis], [TensorType("int64", a.type.broadcastable)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        a, axis = inputs
        out = np.argsort(a, axis=_runtime_axis(self, a, axis), kind=self.kind)
        output_storage[0][0] = out.astype("int64", copy=False)

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        a = inputs[0]
        dtype = a.type.dtype if a.type.dtype.startswith(("float", "complex")) else config.floatX
        return [tm.zeros_like(a, dtype=dtype), disconnected_type()]


class PermuteAlongAxis(Op):
    """``x`` reordered along ``axis`` by ``perm`` (a permutation per slice, from argsort).

    ``out = np.take_along_axis(x, perm, axis)``; ``perm`` has ``x``'s shape. Used by the
    gradient and R_op of ``sort``; its own gradient applies the inverse permutation.
    """

    __props__ = ()

    def make_node(self, x: Any, perm: Any, axis: Any) -> Apply:
        x = as_tensor_variable(x)
        perm = as_tensor_variable(perm)
        if perm.type.dtype not in integer_dtypes or perm.type.ndim != x.type.ndim:
            raise TypeError(
                f"PermuteAlongAxis: perm must be an integer tensor with {x.type.ndim} "
                f"dimension(s) like x, got {perm} of type {perm.type}"
            )
        axis = _axis_input(self, x, axis)
        return Apply(self, [x, perm, axis], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x, perm, axis = inputs
        if perm.shape != x.shape:
            raise ValueError(
                f"PermuteAlongAxis: perm has shape {perm.shape}, x has shape {x.shape}"
            )
        a = _runtime_axis(self, x, axis)
        output_storage[0][0] = np.take_along_axis(x, perm.astype(np.intp, copy=False), axis=a)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        _, perm, axis = inputs
        inverse = ArgSortOp("quicksort")(perm, axis)
        return [self(output_grads[0], inverse, axis), disconnected_type(), disconnected_type()]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list[Any]:
        if eval_points[0] is None:
            return [None]
        return [self(eval_points[0], *inputs[1:])]


_permute_along_axis = PermuteAlongAxis()


def permute_along_axis(x: Any, perm: Any, axis: Any) -> Variable:
    """``np.take_along_axis(x, perm, axis)`` for a permutation ``perm`` (see PermuteAlongAxis)."""
    return _permute_along_axis(x, perm, axis)


def sort(a: Any, axis: int | Any = -1, kind: str = "quicksort", order: Any = None) -> Variable:
    """A sorted copy of ``a`` along ``axis`` (the flattened ``a`` when ``axis`` is None)."""
    a = as_tensor_variable(a)
    if axis is None:
        a, axis = flatten(a), 0
    return SortOp(kind, order)(a, axis)


def argsort(a: Any, axis: int | Any = -1, kind: str = "quicksort", order: Any = None) -> Variable:
    """The int64 indices that sort ``a`` along ``axis`` (of the flattened ``a`` when None)."""
    a = as_tensor_variable(a)
    if axis is None:
        a, axis = flatten(a), 0
    return ArgSortOp(kind, order)(a, axis)
