"""A tiny Type and Op set for testing graph structures without the tensor library."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.op import Op, OutputStorage
from opgraph.graph.type import Type

__all__ = [
    "Add",
    "Cast",
    "Mul",
    "Neg",
    "Split",
    "Sum",
    "ToyType",
    "add",
    "cast",
    "chain",
    "constant",
    "float32_matrix",
    "float64_matrix",
    "mul",
    "neg",
    "split",
    "sum_",
]


class ToyType(Type):
    """NumPy arrays of one dtype and number of dimensions."""

    __props__ = ("dtype", "ndim")

    def __init__(self, dtype: str = "float64", ndim: int = 2) -> None:
        self.dtype = str(np.dtype(dtype))
        self.ndim = ndim

    def filter(self, data: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        if strict and not isinstance(data, np.ndarray):
            raise TypeError(f"{self} expects a numpy array, got {type(data).__name__}")
        arr = np.asarray(data)
        if arr.dtype != self.dtype:
            if strict or not np.can_cast(arr.dtype, self.dtype, "same_kind"):
                raise TypeError(f"{self} expects dtype {self.dtype}, got {arr.dtype}")
            arr = arr.astype(self.dtype)
        if arr.ndim != self.ndim:
            raise TypeError(f"{self} expects {self.ndim} dimensions, got shape {arr.shape}")
        return arr

    def __str__(self) -> str:
        return f"ToyType({self.dtype}, {self.ndim}d)"


float64_matrix = ToyType("float64", 2)
float32_matrix = ToyType("float32", 2)


def constant(value: Any, type: ToyType = float64_matrix, name: str | None = None) -> Constant:
    """A Constant of ``type`` holding ``value``."""
    return type.make_constant(value, name=name)


def _same_type(op: Op, inputs: Sequence[Any]) -> list[Variable]:
    if not inputs:
        raise TypeError(f"{op} needs at least one input")
    inputs = [i if isinstance(i, Variable) else constant(i) for i in inputs]
    t = inputs[0].type
    for k, i in enumerate(inputs):
        if i.type != t:
            raise TypeError(f"{op}: input {k} has type {i.type}, expected {t}")
    return inputs


class Add(Op):
    """Elementwise sum of any number of same-typed inputs."""

    __props__ = ()

    def make_node(self, *inputs: Any) -> Apply:
        inputs = _same_type(self, inputs)
        return Apply(self, inputs, [inputs[0].type()])

    def perform(self, node: Apply, inputs: Sequence[Any], out: OutputStorage) -> None:
        out[0][0] = np.sum(inputs, axis=0)


class Mul(Op):
    """Elementwise product of any number of same-typed inputs."""

    __props__ = ()

    def make_node(self, *inputs: Any) -> Apply:
        inputs = _same_type(self, inputs)
        return Apply(self, inputs, [inputs[0].type()])

    def perform(self, node: Apply, inputs: Sequence[Any], out: OutputStorage) -> None:
        out[0][0] = np.prod(inputs, axis=0)


class Neg(Op):
    """Elementwise -x."""

    __props__ = ()

    def make_node(self, x: Variable) -> Apply:
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], out: OutputStorage) -> None:
        out[0][0] = -inputs[0]


class Split(Op):
    """Two outputs: the positive and the negative part of x."""

    __props__ = ()

    def make_node(self, x: Variable) -> Apply:
        return Apply(self, [x], [x.type(), x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], out: OutputStorage) -> None:
        out[0][0] = np.maximum(inputs[0], 0)
        out[1][0] = np.minimum(inputs[0], 0)


class Sum(Op):
    """Sum of all elements, as a 0-d array."""

    __props__ = ("acc_dtype",)

    def __init__(self, acc_dtype: str = "float64") -> None:
        self.acc_dtype = acc_dtype

    def make_node(self, x: Variable) -> Apply:
        return Apply(self, [x], [ToyType(self.acc_dtype, 0)()])

    def perform(self, node: Apply, inputs: Sequence[Any], out: OutputStorage) -> None:
        out[0][0] = np.asarray(inputs[0].sum(dtype=self.acc_dtype))


class Cast(Op):
    """Convert to another dtype."""

    __props__ = ("dtype",)

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype

    def make_node(self, x: Variable) -> Apply:
        return Apply(self, [x], [ToyType(self.dtype, x.type.ndim)()])  # type: ignore[attr-defined]

    def perform(self, node: Apply, inputs: Sequence[Any], out: OutputStorage) -> None:
        out[0][0] = inputs[0].astype(self.dtype)


add, mul, neg, split, sum_ = Add(), Mul(), Neg(), Split(), Sum()


def cast(x: Variable, dtype: str) -> Variable:
    """``x`` converted to ``dtype``."""
    return Cast(dtype)(x)


def chain(n: int) -> tuple[Variable, Variable]:
    """An input ``x`` and ``neg(neg(...(x)))`` with ``n`` nodes, built without recursion."""
    x = float64_matrix("x")
    out = x
    for _ in range(n):
        out = neg(out)
    return x, out
