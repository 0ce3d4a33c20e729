"""Theano's ``_as_TensorVariable`` protocol: a variable of a plugin's type (a GPU array)
takes part in tensor expressions through the host tensor it converts itself to."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.mode import Mode
from opgraph.graph.basic import Apply, Variable
from opgraph.graph.op import Op
from opgraph.graph.type import Type
from opgraph.tensor.type import TensorType


class BoxType(Type):
    """A plugin's type: a NumPy vector kept in a box."""

    def filter(self, data: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        return data

    def __eq__(self, other: object) -> bool:
        return type(other) is BoxType

    def __hash__(self) -> int:
        return hash(BoxType)


class Unbox(Op):
    """The box's vector as a host tensor."""

    __props__ = ()

    def make_node(self, x: Variable) -> Apply:
        return Apply(self, [x], [TensorType("float64", (False,))()])

    def perform(self, node: Apply, inputs: Any, output_storage: Any) -> None:
        output_storage[0][0] = np.asarray(inputs[0]["value"], dtype="float64")


class BoxVariable(Variable):
    def _as_TensorVariable(self) -> Variable:
        return Unbox()(self)


BoxType.variable_type = BoxVariable  # type: ignore[attr-defined]


def test_a_variable_converts_itself_through_the_protocol() -> None:
    box = BoxVariable(BoxType(), None, None, "box")
    y = T.exp(box) + 1
    f = opgraph.function([box], y, mode=Mode(linker="py"))  # Unbox has no C kernel
    np.testing.assert_allclose(f({"value": [0.0, 1.0]}), np.exp([0.0, 1.0]) + 1)


def test_a_foreign_variable_without_the_protocol_is_refused() -> None:
    other = Variable(BoxType(), None, None, "other")
    with pytest.raises(TypeError, match="expected a tensor variable"):
        T.exp(other)
