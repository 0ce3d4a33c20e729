"""Theano's typed-list Ops: Python list operations on ``TypedListType`` variables.

Each Op takes and returns plain Python lists at run time. The Ops that build a new list
(``Append``, ``Extend``, ``Insert``, ``Remove``, ``Reverse``) copy the input list unless
built with ``inplace=True`` (then they modify it: ``destroy_map``); elements taken from other
inputs are copied so that no value is shared with them. As in Theano, these Ops have no
gradient (a list has no derivative); ``length``, ``count`` and ``index_`` are integer-valued,
so their gradient is disconnected.

::

    >>> import opgraph as theano
    >>> from opgraph import typed_list
    >>> tl = typed_list.TypedListType(theano.tensor.fvector)()
    >>> v = theano.tensor.fvector()
    >>> f = theano.function([tl, v], typed_list.append(tl, v))
    >>> f([[1, 2, 3], [4, 5]], [2])
    [array([1., 2., 3.], dtype=float32), array([4., 5.], dtype=float32), array([2.], dtype=float32)]
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.null_type import disconnected_type
from opgraph.graph.op import Op, OutputStorage
from opgraph.tensor.basic import as_tensor_variable, constant
from opgraph.tensor.subtensor_advanced import SliceType, slicetype
from opgraph.tensor.type import TensorType
from opgraph.typed_list.type import TypedListType

__all__ = [
    "Append",
    "Count",
    "Extend",
    "GetItem",
    "Index",
    "Insert",
    "Length",
    "MakeList",
    "Remove",
    "Reverse",
    "TypedListConstant",
    "TypedListVariable",
    "append",
    "count",
    "extend",
    "getitem",
    "index_",
    "insert",
    "length",
    "make_list",
    "remove",
    "reverse",
]


class _typed_list_py_operators:
    """The list methods of typed-list variables (``tl[i]``, ``tl.append(v)``, ...)."""

    def __getitem__(self, index: Any) -> Variable:
        return getitem(self, index)

    def __len__(self) -> Variable:  # type: ignore[override]
        # As in Theano: returns a symbolic length, so Python's len() of it raises TypeError;
        # call typed_list.length(x) (or x.__len__()) for the symbolic length.
        return length(self)

    def append(self, toAppend: Any) -> Variable:
        return append(self, toAppend)

    def extend(self, toAppend: Any) -> Variable:
        return extend(self, toAppend)

    def insert(self, index: Any, toInsert: Any) -> Variable:
        return insert(self, index, toInsert)

    def remove(self, toRemove: Any) -> Variable:
        return remove(self, toRemove)

    def reverse(self) -> Variable:
        return reverse(self)

    def count(self, elem: Any) -> Variable:
        return count(self, elem)

    def ind(self, elem: Any) -> Variable:
        """The position of ``elem`` (Theano names it ``ind``: ``index`` is a Variable field)."""
        return index_(self, elem)

    @property
    def ttype(self) -> Any:
        """The Type of the elements."""
        return self.type.ttype  # type: ignore[attr-defined]

    @property
    def dtype(self) -> Any:
        return self.type.ttype.dtype  # type: ignore[attr-defined]

    @property
    def ndim(self) -> int:
        return self.type.ttype.ndim + 1  # type: ignore[attr-defined]


class TypedListVariable(_typed_list_py_operators, Variable):
    """A symbolic typed list, with Python's list methods building the Ops of this module."""


class TypedListConstant(_typed_list_py_operators, Constant):
    """A constant typed list."""

    def signature(self) -> tuple[Any, ...]:
        return (self.type, ("id", id(self.data)))


TypedListType.variable_type = TypedListVariable
TypedListType.constant_type = TypedListConstant
#: Theano's attribute names for the same classes.
TypedListType.Variable = TypedListVariable  # type: ignore[attr-defined]
TypedListType.Constant = TypedListConstant  # type: ignore[attr-defined]


def _copy_value(value: Any) -> Any:
    """A copy of an element that shares no memory with ``value`` (lists copied deeply)."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, list):
        return [_copy_value(v) for v in value]
    return copy.deepcopy(value)


def _check_list(op: Op, x: Any) -> Variable:
    if not isinstance(x, Variable) or not isinstance(x.type, TypedListType):
        raise TypeError(
            f"{op} expects a typed list as its first input (a variable of a TypedListType, "
            f"e.g. TypedListType(opgraph.tensor.fvector)()), got {x!r}"
            + (f" of type {x.type}" if isinstance(x, Variable) else "")
        )
    return x


def _as_element(op: Op, x: Variable, elem: Any, what: str) -> Variable:
    """``elem`` as a Variable of the list's element Type, or a TypeError naming both types."""
    ttype = x.type.ttype  # type: ignore[attr-defined]
    if not isinstance(elem, Variable):
        try:
            elem = ttype.make_constant(ttype.filter(elem))
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{op}: {what} {elem!r} is not a value of {ttype}: {exc}") from exc
    if elem.type != ttype:
        raise TypeError(
            f"{op}: {what} must have the list's element type {ttype}, got {elem} of type "
            f"{elem.type}. HINT: cast it first, e.g. opgraph.tensor.cast(v, dtype)."
        )
    return elem


def _as_int_index(op: Op, index: Any) -> Variable:
    """An integer scalar tensor (a Python int becomes an int64 constant)."""
    if not isinstance(index, Variable):
        if isinstance(index, bool | np.bool_) or not isinstance(index, int | np.integer):
            raise TypeError(f"{op}: the index must be an integer, got {index!r}")
        return constant(int(index), ndim=0, dtype="int64")
    if not isinstance(index.type, TensorType) or index.type.ndim != 0:
        raise TypeError(
            f"{op}: the index must be an integer scalar or a slice, got {index} of type "
            f"{index.type}"
        )
    if index.type.dtype not in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32"):
        raise TypeError(
            f"{op}: the index must have an integer dtype, got {index.type.dtype}. HINT: "
            "use an lscalar, or opgraph.tensor.cast(i, 'int64')."
        )
    return index


def _no_grad(op: Op) -> None:
    raise TypeError(
        f"{op} has no gradient: typed lists are not differentiable (as in Theano). "
        "HINT: take the gradient with respect to the tensors before they enter the list."
    )


class _ListOp(Op):
    """Shared parts: printed by class name, as in Theano."""

    __props__: tuple[str, ...] = ()

    def __str__(self) -> str:
        return type(self).__name__


class GetItem(_ListOp):
    """``x[index]``: an element (integer index) or a sub-list (slice) of a typed list."""

    view_map = {0: [0]}

    def make_node(self, x: Any, index: Any) -> Apply:
        x = _check_list(self, x)
        if isinstance(index, slice):
            return Apply(self, [x, Constant(slicetype, index)], [x.type()])
        if isinstance(index, Variable) and isinstance(index.type, SliceType):
            return Apply(self, [x, index], [x.type()])
        index = _as_int_index(self, index)
        return Apply(self, [x, index], [x.type.ttype()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: OutputStorage) -> None:
        x, index = inputs
        if not isinstance(index, slice):
            index = int(index)
        output_storage[0][0] = x[index]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        _no_grad(self)
        return []


#: ``getitem(x, index)``: ``x[index]`` for an integer scalar or a slice.
getitem = GetItem()


class _BuildListOp(_ListOp):
    """A list operation that returns a modified copy, or modifies its input (inplace)."""

    __props__ = ("inplace",)

    def __init__(self, inplace: bool = False) -> None:
        self.inplace = inplace
        if inplace:
            self.destroy_map = {0: [0]}
        else:
            self.view_map = {0: [0]}

    def _start(self, x: list[Any]) -> list[Any]:
        return x if self.inplace else list(x)

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        _no_grad(self)
        return []


class Append(_BuildListOp):
    """``x + [toAppend]`` (a copy of the element is appended)."""

    def make_node(self, x: Any, toAppend: Any) -> Apply:
        x = _check_list(self, x)
        toAppend = _as_element(self, x, toAppend, "the element to append")
        return Apply(self, [x, toAppend], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: OutputStorage) -> None:
        x, toAppend = inputs
        out = self._start(x)
        out.append(_copy_value(toAppend))
        output_storage[0][0] = out


#: ``append(x, y)``: the list ``x`` with ``y`` appended.
append = Append()


class Extend(_BuildListOp):
    """``x + toAppend`` for two typed lists of the same Type (the elements are copied)."""

    def make_node(self, x: Any, toAppend: Any) -> Apply:
        x = _check_list(self, x)
        if not isinstance(toAppend, Variable):
            toAppend = x.type.make_constant(x.type.filter(toAppend))
        if toAppend.type != x.type:
            raise TypeError(
                f"Extend: both lists must have the same type, got {x.type} and {toAppend.type}"
            )
        return Apply(self, [x, toAppend], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: OutputStorage) -> None:
        x, toAppend = inputs
        out = self._start(x)
        out.extend([_copy_value(v) for v in toAppend])
        output_storage[0][0] = out


#: ``extend(x, y)``: the list ``x`` followed by the elements of the list ``y``.
extend = Extend()


class Insert(_BuildListOp):
    """``x.insert(index, toInsert)`` on a copy (Python's insert: indices clip to the ends)."""

    def make_node(self, x: Any, index: Any, toInsert: Any) -> Apply:
        x = _check_list(self, x)
        index = _as_int_index(self, index)
        toInsert = _as_element(self, x, toInsert, "the element to insert")
        return Apply(self, [x, index, toInsert], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: OutputStorage) -> None:
        x, index, toInsert = inputs
        out = self._start(x)
        out.insert(int(index), _copy_value(toInsert))
        output_storage[0][0] = out


#: ``insert(x, index, y)``: the list ``x`` with ``y`` inserted before position ``index``.
insert = Insert()


class Remove(_BuildListOp):
    """Remove the first element equal to ``toRemove`` (compared by value, so arrays work).

    As in Theano, a list without such an element is returned unchanged (Python's
    ``list.remove`` would raise ValueError).
    """

    def make_node(self, x: Any, toRemove: Any) -> Apply:
        x = _check_list(self, x)
        toRemove = _as_element(self, x, toRemove, "the element to remove")
        return Apply(self, [x, toRemove], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: OutputStorage) -> None:
        x, toRemove = inputs
        out = self._start(x)
        ttype = node.inputs[0].type.ttype
        for i, item in enumerate(out):
            if ttype.values_eq(item, toRemove):
                del out[i]
                break
        output_storage[0][0] = out


#: ``remove(x, y)``: ``x`` without its first element equal to ``y``.
remove = Remove()


class Reverse(_BuildListOp):
    """The list in reverse order."""

    def make_node(self, x: Any) -> Apply:
        x = _check_list(self, x)
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: OutputStorage) -> None:
        out = self._start(inputs[0])
        out.reverse()
        output_storage[0][0] = out


#: ``reverse(x)``: ``x`` in reverse order.
reverse = Reverse()


class _CountingOp(_ListOp):
    """An Op returning a number about the list: a scalar, disconnected from the gradient."""

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[tuple[()]]:
        return [()]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[False] for _ in node.inputs]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        return [disconnected_type() for _ in inputs]


class Index(_CountingOp):
    """The position of the first element equal to ``elem``, as a ``floatX`` scalar (Theano's
    dtype). Raises ValueError when there is none, like Python's ``list.index``."""

    def make_node(self, x: Any, elem: Any) -> Apply:
        x = _check_list(self, x)
        elem = _as_element(self, x, elem, "the element to look for")
        return Apply(self, [x, elem], [TensorType(config.floatX, ())()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: OutputStorage) -> None:
        x, elem = inputs
        ttype = node.inputs[0].type.ttype
        for i, item in enumerate(x):
            if ttype.values_eq(item, elem):
                output_storage[0][0] = np.asarray(i, dtype=node.outputs[0].type.dtype)
                return
        raise ValueError(f"Index: the element is not in the list (of length {len(x)})")


#: ``index_(x, elem)``: ``x.index(elem)`` comparing by value (``x.ind(elem)`` on a variable).
index_ = Index()


class Count(_CountingOp):
    """How many elements equal ``elem`` (compared by value), as a ``floatX`` scalar."""

    def make_node(self, x: Any, elem: Any) -> Apply:
        x = _check_list(self, x)
        elem = _as_element(self, x, elem, "the element to count")
        return Apply(self, [x, elem], [TensorType(config.floatX, ())()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: OutputStorage) -> None:
        x, elem = inputs
        ttype = node.inputs[0].type.ttype
        n = sum(1 for item in x if ttype.values_eq(item, elem))
        output_storage[0][0] = np.asarray(n, dtype=node.outputs[0].type.dtype)


#: ``count(x, elem)``: how many times ``elem`` is in ``x`` (compared by value).
count = Count()


class Length(_CountingOp):
    """The number of elements, as an int64 scalar."""

    def make_node(self, x: Any) -> Apply:
        x = _check_list(self, x)
        return Apply(self, [x], [TensorType("int64", ())()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: OutputStorage) -> None:
        output_storage[0][0] = np.asarray(len(inputs[0]), dtype="int64")


#: ``length(x)``: ``len(x)`` as an int64 scalar.
length = Length()


class MakeList(_ListOp):
    """A typed list built from variables (or values) that all have the same Type."""

    def make_node(self, a: Any) -> Apply:
        if not isinstance(a, tuple | list):
            raise TypeError(f"MakeList expects a list or tuple of variables, got {a!r}")
        if not a:
            raise TypeError(
                "MakeList needs at least one element to know the list's type. HINT: for an "
                "empty list, use a TypedListType(...)() input and pass []."
            )
        items = [v if isinstance(v, Variable) else as_tensor_variable(v) for v in a]
        if not all(items[0].type == v.type for v in items):
            raise TypeError(
                "MakeList need all input variable to be of the same type, got "
                f"{[str(v.type) for v in items]}"
            )
        return Apply(self, items, [TypedListType(items[0].type)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: OutputStorage) -> None:
        output_storage[0][0] = [_copy_value(v) for v in inputs]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        _no_grad(self)
        return []


#: ``make_list([a, b, ...])``: a typed list of variables of one Type.
make_list = MakeList()
