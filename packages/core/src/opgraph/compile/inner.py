"""Ops defined by a graph: the machinery shared by ``OpFromGraph`` (``compile/builders.py``)
and ``Scan``.

An :class:`InnerGraphOp` owns a private copy of a graph (``inner_inputs`` to
``inner_outputs``). Two such Ops are equal when their graphs have the same structure (same
Ops wired the same way, equal constants) and their ``__props__`` are equal, so the merge
rewrite folds two loops or two OpFromGraph nodes built twice from the same code. The graph is
compiled once per mode into an :class:`InnerFunction`, whose input and output cells the
Op's thunk fills and reads directly (no argument checks, no copies).

Printing and the HTML view find inner graphs through the attributes ``inner_inputs`` and
``inner_outputs``: any Op that has them is shown with its inner graph, whatever its class.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.compile.function_module import FunctionMaker
from opgraph.compile.io import In, Out
from opgraph.compile.mode import Mode, compiling_mode, compiling_profiled, get_mode
from opgraph.compile.profiling import ProfileStats
from opgraph.compile.sharedvalue import SharedVariable
from opgraph.graph.basic import Constant, Variable
from opgraph.graph.clone import clone_get_equiv
from opgraph.graph.op import Op
from opgraph.graph.traversal import graph_inputs, io_toposort

__all__ = ["InnerFunction", "InnerGraphOp", "inner_graph_key"]


def _constant_key(c: Constant) -> tuple[Any, ...]:
    """What identifies a constant's value in a structural key (type, shape, bytes)."""
    data = c.data
    if isinstance(data, np.ndarray | np.generic):
        arr = np.asarray(data)
        return ("const", c.type, arr.dtype.str, arr.shape, arr.tobytes())
    try:
        hash(data)
    except TypeError:
        return ("const", c.type, id(data))
    return ("const", c.type, type(data), data)


def inner_graph_key(inputs: Sequence[Variable], outputs: Sequence[Variable]) -> tuple[Any, ...]:
    """A hashable description of the graph from ``inputs`` to ``outputs``: two graphs with
    equal keys compute the same thing (same Ops, same wiring, same input types, equal
    constants), whatever their variables' names."""
    where: dict[Variable, Any] = {v: ("in", i) for i, v in enumerate(inputs)}
    parts: list[Any] = [tuple(v.type for v in inputs)]
    for k, node in enumerate(io_toposort(list(inputs), list(outputs))):
        wiring = []
        for v in node.inputs:
            if v not in where:
                where[v] = _constant_key(v) if isinstance(v, Constant) else ("free", id(v))
            wiring.append(where[v])
        parts.append((node.op, tuple(wiring)))
        for j, out in enumerate(node.outputs):
            where[out] = ("node", k, j)
    parts.append(
        tuple(
            where.get(v) or (_constant_key(v) if isinstance(v, Constant) else id(v))
            for v in outputs
        )
    )
    return tuple(parts)


#: Compiled inner functions kept per Op (one per mode in use; the oldest is dropped).
_COMPILED_PER_OP = 8


def _mode_key(mode: Mode) -> tuple[Any, ...]:
    """What identifies a mode for reusing a compiled inner graph: ``get_mode(name)`` builds
    a new Mode object each time, so two equal modes must share one compiled function."""
    linker = mode.provided_linker
    linker_key = linker if linker is None or isinstance(linker, str) else id(linker)
    optimizer = mode.provided_optimizer
    opt_key = optimizer if isinstance(optimizer, str) or optimizer is None else repr(optimizer)
    extra = tuple(sorted((k, repr(v)) for k, v in vars(mode).items() if k not in _MODE_FIELDS))
    return (type(mode), linker_key, opt_key, bool(getattr(mode, "profile", False)), extra)


_MODE_FIELDS = {"provided_linker", "provided_optimizer", "profile", "_optimizer"}


class InnerFunction:
    """An inner graph compiled once: fill ``input_cells``, call :meth:`run`, read
    ``output_cells``.

    ``function`` is the compiled :class:`~opgraph.compile.function_module.Function`
    (``function.maker.fgraph`` is the rewritten inner graph, ``function.fn`` its VM). Its
    inputs are borrowed (never copied), its outputs too: a caller that keeps an output past
    the next :meth:`run` copies it (a scan step writes it into the loop's buffer).
    """

    def __init__(self, fn: Any) -> None:
        self.function = fn
        self.vm = fn.fn
        self.input_cells: list[list[Any]] = [c.storage for c in fn.input_storage]
        self.output_cells: list[list[Any]] = [c.storage for c in fn.output_storage]
        self.run = fn.fn.run if hasattr(fn.fn, "run") else fn.fn

    def __call__(self, *values: Any) -> list[Any]:
        """Run on ``values`` (one per inner input, of the inner types) and return the outputs;
        the cells are emptied afterwards."""
        cells = self.input_cells
        for cell, value in zip(cells, values, strict=True):
            cell[0] = value
        try:
            self.run()
            return [cell[0] for cell in self.output_cells]
        finally:
            self.clear()

    def clear(self) -> None:
        """Drop the references the cells hold (inputs and outputs of the last run)."""
        for cell in self.input_cells:
            cell[0] = None
        for cell in self.output_cells:
            cell[0] = None


class InnerGraphOp(Op):
    """An Op whose computation is a graph of other Ops (base of OpFromGraph and Scan).

    Parameters
    ----------
    inputs, outputs
        The graph. It is copied, so that later changes to the caller's variables do not
        reach the Op. Every variable the outputs depend on must be in ``inputs`` or be a
        constant; a shared variable must be made an input by the subclass first.
    mode
        The mode the inner graph compiles with; None: the mode of the function the node
        is part of (DEBUG_MODE checks inner nodes too), or ``config.mode`` outside one.

    Attributes
    ----------
    inner_inputs, inner_outputs
        The Op's own copy of the graph (what printing shows under "Inner graphs").
    """

    #: Attributes besides the inner graph that define equality (like ``__props__``).
    inner_props: tuple[str, ...] = ()

    def __init__(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        mode: Mode | str | None = None,
    ) -> None:
        inputs, outputs = list(inputs), list(outputs)
        for v in inputs:
            if not isinstance(v, Variable):
                raise TypeError(f"an inner graph's inputs must be Variables, got {v!r}")
            if isinstance(v, Constant):
                raise TypeError(
                    f"an inner graph's input cannot be a constant ({v}); pass its value in "
                    "the graph instead"
                )
        for v in outputs:
            if not isinstance(v, Variable):
                raise TypeError(f"an inner graph's outputs must be Variables, got {v!r}")
        if len(set(inputs)) != len(inputs):
            raise ValueError("an inner graph lists the same variable twice among its inputs")
        free = [
            v
            for v in graph_inputs(outputs, blockers=inputs)
            if v not in inputs and not isinstance(v, Constant)
        ]
        if free:
            kind = "shared variable" if isinstance(free[0], SharedVariable) else "variable"
            raise ValueError(
                f"the inner graph depends on the {kind} {free[0]} ({free[0].type}), which is "
                "not one of its inputs.\nHINT: list it among the inputs (non_sequences for "
                "scan)."
            )
        equiv = clone_get_equiv(inputs, outputs, copy_inputs=True, copy_orphans=False)
        self.inner_inputs: list[Variable] = [equiv[v] for v in inputs]
        self.inner_outputs: list[Variable] = [equiv[v] for v in outputs]
        self.mode = mode
        self._key: tuple[Any, ...] | None = None
        self._compiled: OrderedDict[Any, tuple[Mode, InnerFunction]] = OrderedDict()
        self._makers: OrderedDict[Any, FunctionMaker] = OrderedDict()

    # ------------------------------------------------------------------ identity

    def inner_key(self) -> tuple[Any, ...]:
        """The structural key of the inner graph (see :func:`inner_graph_key`)."""
        if self._key is None:
            self._key = inner_graph_key(self.inner_inputs, self.inner_outputs)
        return self._key

    def _identity(self) -> tuple[Any, ...]:
        mode = self.mode if self.mode is None or isinstance(self.mode, str) else id(self.mode)
        return (type(self), mode, *(getattr(self, a) for a in self.inner_props))

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(self) is not type(other):
            return False
        assert isinstance(other, InnerGraphOp)
        return self._identity() == other._identity() and self.inner_key() == other.inner_key()

    def __hash__(self) -> int:
        return hash((self._identity(), len(self.inner_inputs), len(self.inner_outputs)))

    # ------------------------------------------------------------------ compiling

    def inner_mode(self) -> Mode:
        """The mode the inner graph compiles with now (see the class docstring)."""
        if self.mode is not None:
            return get_mode(self.mode)
        outer = compiling_mode()
        return outer if outer is not None else get_mode(None)

    def inner_maker(self, mode: Mode | None = None) -> FunctionMaker:
        """The inner graph rewritten for ``mode`` (default :meth:`inner_mode`), not linked yet:
        a backend compiles its kernels together with the outer graph's (one batch)."""
        mode = self.inner_mode() if mode is None else mode
        profiled = compiling_profiled()
        key = (_mode_key(mode), profiled)
        hit = self._makers.get(key)
        if hit is not None:
            self._makers.move_to_end(key)
            return hit
        mutable = self.mutable_inputs()
        maker = FunctionMaker(
            [In(v, borrow=True, mutable=k in mutable) for k, v in enumerate(self.inner_inputs)],
            [Out(v, borrow=True) for v in self.inner_outputs],
            mode=mode,
            accept_inplace=True,
            on_unused_input="ignore",
            name=f"inner graph of {type(self).__name__}",
            profile=ProfileStats(message=f"inner graph of {self}") if profiled else None,
        )
        self._makers[key] = maker
        while len(self._makers) > _COMPILED_PER_OP:
            self._makers.popitem(last=False)
        return maker

    def inner_function(self, mode: Mode | None = None) -> InnerFunction:
        """The inner graph compiled with ``mode`` (default :meth:`inner_mode`), once per mode."""
        mode = self.inner_mode() if mode is None else mode
        key = (_mode_key(mode), compiling_profiled())
        hit = self._compiled.get(key)
        if hit is not None:
            self._compiled.move_to_end(key)
            return hit[1]
        compiled = InnerFunction(self.inner_maker(mode).create())
        self._compiled[key] = (mode, compiled)
        while len(self._compiled) > _COMPILED_PER_OP:
            self._compiled.popitem(last=False)
        return compiled

    def mutable_inputs(self) -> set[int]:
        """Positions of the inner inputs the compiled inner graph may overwrite in place
        (none by default: the Op's thunk passes values it does not own)."""
        return set()

    def clone_inner(
        self, replace: dict[Variable, Variable] | None = None
    ) -> tuple[list[Variable], list[Variable]]:
        """A fresh copy of ``(inner_inputs, inner_outputs)`` (inputs replaced by ``replace``
        where given: how a rewrite substitutes outer values into the inner graph)."""
        memo: dict[Any, Any] = dict(replace or {})
        equiv = clone_get_equiv(
            self.inner_inputs, self.inner_outputs, copy_inputs=True, copy_orphans=False, memo=memo
        )
        return [equiv[v] for v in self.inner_inputs], [equiv[v] for v in self.inner_outputs]

    # ------------------------------------------------------------------ pickling

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_compiled"] = OrderedDict()  # compiled functions are rebuilt after unpickling
        state["_makers"] = OrderedDict()
        state["_key"] = None
        return state
