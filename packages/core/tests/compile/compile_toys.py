"""Small Ops that misbehave on purpose, a lazy IfElse, and helpers for the compile tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.op import Op, OutputStorage
from opgraph.tensor import as_tensor_variable

#: Modes every behaviour is checked in, and the core linkers.
MODES = ["FAST_COMPILE", "FAST_RUN", "DEBUG_MODE", "PROFILE_MODE"]
LINKERS = ["py", "vm"]


def mode_with(name: str, linker: str) -> Any:
    """The named mode with another linker (for DEBUG_MODE: the linker it checks)."""
    from opgraph.compile.mode import get_mode

    return get_mode(name).clone(linker=linker)


class _Unary(Op):
    """Base: one tensor in, one tensor of the same type out."""

    __props__: tuple[str, ...] = ()

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        return Apply(self, [x], [x.type()])


class Raise(_Unary):
    """Raises ``ValueError(message)`` when run (marks code that must never run)."""

    __props__ = ("message",)
    calls = 0

    def __init__(self, message: str = "this node must not run") -> None:
        self.message = message

    def perform(self, node: Apply, inputs: Sequence[Any], out: OutputStorage) -> None:
        type(self).calls += 1
        raise ValueError(self.message)


class TwoArgError(Exception):
    """An exception class that cannot be rebuilt from a single message."""

    def __init__(self, code: int, detail: str) -> None:
        super().__init__(code, detail)
        self.code = code


class RaiseTwoArg(_Unary):
    """Raises :class:`TwoArgError`."""

    def perform(self, node: Apply, inputs: Sequence[Any], out: OutputStorage) -> None:
        raise TwoArgError(7, "custom failure")


class Counted(_Unary):
    """Identity copy that counts its runs (class attribute ``runs``)."""

    runs = 0

    def perform(self, node: Apply, inputs: Sequence[Any], out: OutputStorage) -> None:
        type(self).runs += 1
        out[0][0] = np.array(inputs[0], copy=True)


class BadShape(_Unary):
    """Claims its input's type but returns an array of length 3 (breaks broadcastable dims)."""

    def perform(self, node: Apply, inputs: Sequence[Any], out: OutputStorage) -> None:
        out[0][0] = np.zeros((3,) * inputs[0].ndim, dtype=inputs[0].dtype)


class SilentInplace(_Unary):
    """Adds one to its input in place, without declaring ``destroy_map``."""

    def perform(self, node: Apply, inputs: Sequence[Any], out: OutputStorage) -> None:
        x = inputs[0]
        x += 1
        out[0][0] = x.copy()


class AddOneInplace(_Unary):
    """Adds one to its input in place and says so (``destroy_map``)."""

    destroy_map = {0: [0]}

    def perform(self, node: Apply, inputs: Sequence[Any], out: OutputStorage) -> None:
        x = inputs[0]
        x += 1
        out[0][0] = x


class SneakyView(_Unary):
    """Returns a view of its input without declaring ``view_map``."""

    def perform(self, node: Apply, inputs: Sequence[Any], out: OutputStorage) -> None:
        out[0][0] = inputs[0][...]


class WrongDtype(_Unary):
    """Returns float32 data for a float64 output."""

    def perform(self, node: Apply, inputs: Sequence[Any], out: OutputStorage) -> None:
        out[0][0] = np.asarray(inputs[0], dtype="float32")


class Noisy(_Unary):
    """Adds fresh random noise: two runs never agree."""

    def perform(self, node: Apply, inputs: Sequence[Any], out: OutputStorage) -> None:
        out[0][0] = inputs[0] + np.random.random_sample(inputs[0].shape)


class Double(_Unary):
    """``2 * x`` (an Op with a deliberately wrong kernel in the dispatch tests)."""

    def perform(self, node: Apply, inputs: Sequence[Any], out: OutputStorage) -> None:
        out[0][0] = 2 * inputs[0]


class DoubleSub(Double):
    """A subclass of Double (served by Double's kernel unless it has its own)."""


class IfElse(Op):
    """Lazy ``a if cond else b``: evaluates the condition, then only the taken branch."""

    __props__ = ()

    def make_node(self, cond: Any, a: Any, b: Any) -> Apply:
        cond, a, b = (as_tensor_variable(v) for v in (cond, a, b))
        if a.type != b.type:
            raise TypeError(f"IfElse branches differ: {a.type} and {b.type}")
        return Apply(self, [cond, a, b], [a.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], out: OutputStorage) -> None:
        cond, a, b = inputs
        out[0][0] = np.array(a if cond else b, copy=True)

    def make_thunk(
        self,
        node: Apply,
        storage_map: dict[Variable, list[Any]],
        compute_map: dict[Variable, list[bool]],
        no_recycling: Sequence[Variable] = (),
        impl: str | None = None,
    ) -> Any:
        cells = [storage_map[v] for v in node.inputs]
        done = [compute_map[v] for v in node.inputs]
        out = storage_map[node.outputs[0]]
        out_done = compute_map[node.outputs[0]]

        def thunk() -> list[int]:
            if not done[0][0]:
                return [0]
            branch = 1 if cells[0][0] else 2
            if not done[branch][0]:
                return [branch]
            out[0] = np.array(cells[branch][0], copy=True)
            out_done[0] = True
            return []

        thunk.lazy = True  # type: ignore[attr-defined]
        thunk.inputs = cells  # type: ignore[attr-defined]
        thunk.outputs = [out]  # type: ignore[attr-defined]
        return thunk


ifelse = IfElse()


def _as_op_square() -> Any:
    from opgraph.compile.ops import as_op
    from opgraph.tensor import dvector

    @as_op(itypes=[dvector], otypes=[dvector])
    def square(x: np.ndarray) -> np.ndarray:
        return x * x

    return square


square = _as_op_square()
