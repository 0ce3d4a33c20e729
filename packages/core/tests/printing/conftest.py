"""Toy Types and Ops for the printing tests, printing like Theano's tensor library.

The printing code is duck-typed against the tensor library, FunctionGraph and compiled
functions; these stand-ins let its tests run without them.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.op import Op
from opgraph.graph.traversal import io_toposort
from opgraph.graph.type import Type

_KINDS = {(): "scalar", (False,): "vector", (False, False): "matrix"}
_KINDS.update({(True, False): "row", (False, True): "col"})


class TensorConstant(Constant):
    """Prints as ``TensorConstant{2.0}`` or ``TensorConstant{(1,) of 1.0}``."""

    def __str__(self) -> str:
        if self.name is not None:
            return self.name
        data = np.asarray(self.data)
        if data.ndim > 0 and data.size > 0 and np.all(data == data.flat[0]):
            text = f"{data.shape} of {data.flat[0]}"
        else:
            text = str(data)
        if len(text) > 20:
            text = text[:10] + ".." + text[-10:]
        return f"TensorConstant{{{text}}}"


class ToyTensorType(Type):
    """``TensorType(float64, vector)`` with an optional static ``shape``."""

    __props__ = ("dtype", "broadcastable")
    constant_type = TensorConstant

    def __init__(
        self, dtype: str, broadcastable: Sequence[bool], shape: tuple[int | None, ...] | None = None
    ) -> None:
        self.dtype = dtype
        self.broadcastable = tuple(broadcastable)
        if shape is not None:
            self.shape = shape

    def filter(self, data: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        data = np.asarray(data, dtype=self.dtype)
        if data.ndim != len(self.broadcastable):
            raise TypeError(f"wrong rank {data.ndim} for {self}")
        return data

    def __str__(self) -> str:
        kind = _KINDS.get(self.broadcastable)
        if kind is None:
            nd = len(self.broadcastable)
            kind = str(self.broadcastable) if any(self.broadcastable) else f"{nd}D"
        return f"TensorType({self.dtype}, {kind})"


def as_var(x: Any) -> Variable:
    if isinstance(x, Variable):
        return x
    data = np.asarray(x)
    return ToyTensorType(str(data.dtype), (False,) * data.ndim).make_constant(data)


class Elemwise(Op):
    """``Elemwise{add,no_inplace}``; ``inplace=True`` gives ``Elemwise{add,inplace}``."""

    __props__ = ("symbol", "inplace")

    def __init__(self, symbol: str, inplace: bool = False) -> None:
        self.symbol = symbol
        self.inplace = inplace
        if inplace:
            self.destroy_map = {0: [0]}

    def __str__(self) -> str:
        return f"Elemwise{{{self.symbol},{'inplace' if self.inplace else 'no_inplace'}}}"

    def make_node(self, *inputs: Any) -> Apply:
        ins = [as_var(i) for i in inputs]
        out_type = max(ins, key=lambda v: len(v.type.broadcastable)).type
        return Apply(self, ins, [out_type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: Any) -> None:
        fn = {"add": np.add, "mul": np.multiply, "sub": np.subtract, "pow": np.power}
        if self.symbol in fn:
            output_storage[0][0] = fn[self.symbol](*inputs)
        else:
            output_storage[0][0] = getattr(np, self.symbol)(*inputs)


class Sum(Op):
    """``Sum{acc_dtype=float64}``."""

    __props__ = ("acc_dtype",)

    def __init__(self, acc_dtype: str = "float64") -> None:
        self.acc_dtype = acc_dtype

    def __str__(self) -> str:
        return f"Sum{{acc_dtype={self.acc_dtype}}}"

    def make_node(self, x: Any) -> Apply:
        x = as_var(x)
        return Apply(self, [x], [ToyTensorType(x.type.dtype, ())()])


class DimShuffle(Op):
    """``InplaceDimShuffle{x}``: a view of its input."""

    __props__ = ("new_order",)
    view_map = {0: [0]}

    def __init__(self, new_order: tuple[Any, ...]) -> None:
        self.new_order = tuple(new_order)

    def __str__(self) -> str:
        return "InplaceDimShuffle{" + ",".join(str(o) for o in self.new_order) + "}"

    def make_node(self, x: Any) -> Apply:
        x = as_var(x)
        bcast = tuple(o == "x" for o in self.new_order)
        return Apply(self, [x], [ToyTensorType(x.type.dtype, bcast)()])


class Split2(Op):
    """Two outputs: ``Split2.0`` and ``Split2.1``."""

    __props__ = ()

    def make_node(self, x: Any) -> Apply:
        x = as_var(x)
        return Apply(self, [x], [x.type(), x.type()])


class IfElse(Op):
    """``if{}``: lazy choice between a then- and an else-branch."""

    __props__ = ("name",)

    def __init__(self, name: str = "ifelse") -> None:
        self.name = name

    def __str__(self) -> str:
        return "if{}"

    def make_node(self, cond: Any, a: Any, b: Any) -> Apply:
        a, b = as_var(a), as_var(b)
        return Apply(self, [as_var(cond), a, b], [a.type()])


class ToyFunctionGraph:
    """The parts of Theano's FunctionGraph the printers use: inputs, outputs, toposort,
    ``var.clients``. Works on the given variables (no cloning)."""

    def __init__(self, inputs: Sequence[Variable], outputs: Sequence[Variable]) -> None:
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self._topo = io_toposort(self.inputs, self.outputs)
        for node in self._topo:
            for v in [*node.inputs, *node.outputs]:
                v.clients = []
        for v in self.inputs:
            v.clients = []
        for node in self._topo:
            for i, v in enumerate(node.inputs):
                v.clients.append((node, i))
        for i, v in enumerate(self.outputs):
            v.clients.append(("output", i))

    def toposort(self) -> list[Apply]:
        return list(self._topo)

    @property
    def apply_nodes(self) -> set[Apply]:
        return set(self._topo)


def toy_function(
    inputs: Sequence[Variable], outputs: Sequence[Variable], name: str | None = "f"
) -> Any:
    """A stand-in for a compiled ``Function``: ``f.maker.fgraph``, ``f.maker.inputs``, ``f.name``."""
    fgraph = ToyFunctionGraph(inputs, outputs)
    maker = SimpleNamespace(
        fgraph=fgraph,
        inputs=[SimpleNamespace(variable=v, name=v.name, update=None) for v in inputs],
        outputs=[SimpleNamespace(variable=v) for v in outputs],
    )
    return SimpleNamespace(maker=maker, name=name)


@pytest.fixture
def toys() -> SimpleNamespace:
    """Toy Types, Ops and graph builders (see this module)."""
    vector = ToyTensorType("float64", (False,))
    matrix = ToyTensorType("float64", (False, False))
    return SimpleNamespace(
        TensorType=ToyTensorType,
        TensorConstant=TensorConstant,
        vector=vector,
        matrix=matrix,
        const=lambda value, dtype=None: as_var(np.asarray(value, dtype=dtype)),
        add=Elemwise("add"),
        mul=Elemwise("mul"),
        sub=Elemwise("sub"),
        pow=Elemwise("pow"),
        neg=Elemwise("neg"),
        exp=Elemwise("exp"),
        fill=Elemwise("second"),
        gt=Elemwise("gt"),
        add_inplace=Elemwise("add", inplace=True),
        Elemwise=Elemwise,
        Sum=Sum,
        DimShuffle=DimShuffle,
        Split2=Split2,
        IfElse=IfElse,
        FunctionGraph=ToyFunctionGraph,
        function=toy_function,
    )
