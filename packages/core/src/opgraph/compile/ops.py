"""Ops the compile layer inserts (DeepCopyOp, ViewOp), ``as_op``, and the aliasing rule.

The aliasing rule: an output of a compiled function never shares memory with an input, a
shared variable's value or another output, unless ``borrow`` says it may.
:func:`insert_deepcopy` enforces it on the rewritten graph by routing such outputs through
a :class:`DeepCopyOp` (or a :class:`ViewOp` where both sides allow borrowing).
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.op import Op, OutputStorage
from opgraph.graph.traversal import graph_inputs
from opgraph.graph.type import Type

__all__ = [
    "DeepCopyOp",
    "FromFunctionOp",
    "ObsoleteTheanoAPIError",
    "ViewOp",
    "alias_root",
    "as_op",
    "deep_copy_op",
    "insert_deepcopy",
    "register_deep_copy_op_c_code",
    "register_rebroadcast_c_code",
    "register_shape_c_code",
    "register_shape_i_c_code",
    "register_specify_shape_c_code",
    "register_view_op_c_code",
    "view_op",
    "view_tree_set",
]


class ViewOp(Op):
    """Returns its input unchanged, as a view (``view_map = {0: [0]}``)."""

    __props__ = ()
    view_map = {0: [0]}

    def make_node(self, x: Variable) -> Apply:
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: OutputStorage) -> None:
        output_storage[0][0] = inputs[0]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return list(input_shapes)

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        return list(output_grads)


class DeepCopyOp(Op):
    """Returns a copy of its input that shares no memory with it."""

    __props__ = ()

    def make_node(self, x: Variable) -> Apply:
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: OutputStorage) -> None:
        x = inputs[0]
        output_storage[0][0] = x.copy() if isinstance(x, np.ndarray) else copy.deepcopy(x)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return list(input_shapes)

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        return list(output_grads)


view_op = ViewOp()
deep_copy_op = DeepCopyOp()


def alias_root(v: Variable) -> Variable:
    """The variable whose memory ``v`` views (following ``view_map``/``destroy_map`` up)."""
    while v.owner is not None:
        op = v.owner.op
        maps = list(getattr(op, "view_map", {}).get(v.index, [])) + list(
            getattr(op, "destroy_map", {}).get(v.index, [])
        )
        if not maps:
            return v
        if len(maps) > 1:
            raise ValueError(
                f"{op} says output {v.index} views several inputs ({maps}); an output may "
                "view at most one input. HINT: fix the Op's view_map/destroy_map."
            )
        v = v.owner.inputs[maps[0]]
    return v


def view_tree_set(v: Variable, treeset: set[Variable]) -> None:
    """Add to ``treeset`` ``v`` and every variable that views it, in the graph ``v`` is in."""
    stack = [v]
    while stack:
        var = stack.pop()
        if var in treeset:
            continue
        treeset.add(var)
        for client, idx in getattr(var, "clients", ()):
            if client == "output":
                continue
            op = client.op
            for out_idx, ins in [
                *getattr(op, "view_map", {}).items(),
                *getattr(op, "destroy_map", {}).items(),
            ]:
                if idx in ins:
                    stack.append(client.outputs[out_idx])


def insert_deepcopy(
    fgraph: Any, wrapped_inputs: Sequence[Any], wrapped_outputs: Sequence[Any]
) -> None:
    """Make outputs that alias an input, a constant or another output into copies.

    ``wrapped_inputs``/``wrapped_outputs`` are the In/Out specs of ``fgraph.inputs`` /
    ``fgraph.outputs`` (update outputs included); their ``borrow`` flags allow a ViewOp
    instead of a copy. An input that the function updates is not copied: its old value is
    no longer the shared value once the call returns (Theano's rule); an output that is such
    an input gets a ViewOp, so that it has a cell of its own.
    """
    updated = {
        fi
        for spec, fi in zip(wrapped_inputs, fgraph.inputs)
        if getattr(spec, "update", None) is not None
    }
    all_graph_inputs = graph_inputs(fgraph.outputs)
    has_destroyers = getattr(fgraph, "has_destroyers", None)
    reason = "insert_deepcopy"
    for i in range(len(fgraph.outputs)):
        views_of_i: set[Variable] = set()
        view_tree_set(alias_root(fgraph.outputs[i]), views_of_i)
        borrow_i = wrapped_outputs[i].borrow
        copy_op = None
        for j in range(i + 1, len(fgraph.outputs)):
            if fgraph.outputs[j] in views_of_i:
                both = borrow_i and wrapped_outputs[j].borrow
                copy_op = view_op if both else deep_copy_op
                break
        if copy_op is None and fgraph.outputs[i] in updated:
            # The old value is returned after the update replaced it: give it its own cell.
            copy_op = view_op
        if copy_op is None:
            for inp in all_graph_inputs:
                if inp in updated or inp not in views_of_i:
                    continue
                if has_destroyers is not None and has_destroyers([inp]):
                    continue
                if inp in fgraph.inputs:
                    j = fgraph.inputs.index(inp)
                    both = borrow_i and wrapped_inputs[j].borrow
                else:  # a constant: its read-only data must never be handed out
                    both = False
                copy_op = view_op if both else deep_copy_op
                break
        if copy_op is not None:
            fgraph.change_node_input("output", i, copy_op(fgraph.outputs[i]), reason=reason)


class FromFunctionOp(Op):
    """An Op made from a Python function by :func:`as_op` (no gradient)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        itypes: Sequence[Type],
        otypes: Sequence[Type],
        infer_shape: Callable[..., Any] | None,
    ) -> None:
        self._fn = fn
        self.itypes = list(itypes)
        self.otypes = list(otypes)
        self._infer_shape = infer_shape
        if infer_shape is not None:
            self.infer_shape = self._call_infer_shape  # type: ignore[method-assign]
        self.__doc__ = fn.__doc__

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._fn is other._fn  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), self._fn))

    def __str__(self) -> str:
        return f"FromFunctionOp{{{self._fn.__name__}}}"

    def make_node(self, *inputs: Any) -> Apply:
        if len(inputs) != len(self.itypes):
            raise TypeError(
                f"{self} takes {len(self.itypes)} inputs ({self.itypes}), got {len(inputs)}"
            )
        ins = []
        for i, (x, t) in enumerate(zip(inputs, self.itypes)):
            var = x if isinstance(x, Variable) else t.make_constant(x)
            if var.type != t:
                raise TypeError(
                    f"input {i} of {self} must have type {t}, got {var} of type {var.type}"
                )
            ins.append(var)
        return Apply(self, ins, [t() for t in self.otypes])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: OutputStorage) -> None:
        outs = self._fn(*inputs)
        if len(self.otypes) == 1:
            outs = [outs]
        if len(outs) != len(self.otypes):
            raise ValueError(f"{self} returned {len(outs)} values for {len(self.otypes)} outputs")
        for cell, t, value in zip(output_storage, self.otypes, outs):
            cell[0] = t.filter(value)

    def _call_infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> Any:
        assert self._infer_shape is not None
        return self._infer_shape(node, input_shapes)

    def __reduce__(self) -> Any:
        mod, name = self._fn.__module__, self._fn.__name__
        obj = getattr(sys.modules.get(mod), name, None)
        if obj is not self:
            raise TypeError(
                f"cannot pickle {self}: as_op ops pickle by reference to {mod}.{name}, "
                "which must be the decorated module-level function."
            )
        return _load_as_op, (mod, name)


def _load_as_op(mod: str, name: str) -> Any:
    __import__(mod)
    return getattr(sys.modules[mod], name)


def as_op(
    itypes: Sequence[Type], otypes: Sequence[Type], infer_shape: Callable[..., Any] | None = None
) -> Callable[[Callable[..., Any]], FromFunctionOp]:
    """Decorator turning a Python function on values into an Op (Theano's ``as_op``).

    Parameters
    ----------
    itypes, otypes
        The Types of the inputs and outputs (e.g. ``[dmatrix]``).
    infer_shape
        Optional ``infer_shape(node, input_shapes) -> output_shapes``.

    Examples
    --------
    >>> @as_op(itypes=[T.dmatrix], otypes=[T.dmatrix])
    ... def numpy_dot(a, b): ...
    """
    itypes, otypes = list(itypes), list(otypes)
    for t in (*itypes, *otypes):
        if not isinstance(t, Type):
            raise TypeError(f"as_op itypes/otypes must be Types, got {t!r}")

    def decorator(fn: Callable[..., Any]) -> FromFunctionOp:
        return FromFunctionOp(fn, itypes, otypes, infer_shape)

    return decorator


# ---------------------------------------------------------------------------- shape ops
#: Theano defined Shape, Shape_i and SpecifyShape here; opgraph's live with the tensor
#: library, which imports this layer: they are resolved on first access (PEP 562).
_SHAPE_NAMES = ("Shape", "Shape_i", "SpecifyShape", "shape", "shape_i", "specify_shape")


def __getattr__(name: str) -> Any:
    if name in _SHAPE_NAMES:
        import importlib

        return getattr(importlib.import_module("opgraph.tensor.shape"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ------------------------------------------------- Theano's C-code registration helpers
_C_REGISTRATION_HINT = (
    "opgraph registers C implementations through backend-c (opgraph_c): a package gives its "
    "Ops C kernels from its opgraph_c_kernels(registry) hook, calling "
    "registry.register(OpClass, kernel, version=...) (see packages/backend-c/README.md)."
)


class ObsoleteTheanoAPIError(RuntimeError):
    """A Theano 1.0 function with no meaning in opgraph was called; the message says what
    replaces it."""


def _obsolete_c_registration(theano_name: str) -> Callable[..., Any]:
    def register(*args: Any, **kwargs: Any) -> None:
        raise ObsoleteTheanoAPIError(
            f"{theano_name} is Theano's way to give {theano_name.split('_c_code')[0][9:]} "
            f"C code for a new Type; it is obsolete in opgraph. {_C_REGISTRATION_HINT}"
        )

    register.__name__ = theano_name
    register.__qualname__ = theano_name
    register.__doc__ = (
        f"Theano's ``{theano_name}``; obsolete: raises an error naming backend-c's "
        "``opgraph_c_kernels(registry)`` hook, which replaces it."
    )
    return register


register_view_op_c_code = _obsolete_c_registration("register_view_op_c_code")
register_deep_copy_op_c_code = _obsolete_c_registration("register_deep_copy_op_c_code")
register_shape_c_code = _obsolete_c_registration("register_shape_c_code")
register_shape_i_c_code = _obsolete_c_registration("register_shape_i_c_code")
register_specify_shape_c_code = _obsolete_c_registration("register_specify_shape_c_code")
register_rebroadcast_c_code = _obsolete_c_registration("register_rebroadcast_c_code")
