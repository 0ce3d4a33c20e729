"""``MonitorMode``: call user functions before and after every node (Theano's MonitorMode).

``MonitorMode(pre_func=f, post_func=g)`` compiles as the default mode, but each node runs as
``f(i, node, fn); fn(); g(i, node, fn)`` where ``i`` is the node's position in the
execution order and ``fn`` is its thunk: ``fn.inputs`` and ``fn.outputs`` are the storage
cells (``[value]`` lists) of its inputs and outputs, so ``[c[0] for c in fn.outputs]`` are
the values just computed. :func:`detect_nan` is Theano's example ``post_func``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from opgraph.compile.mode import Mode, resolve_linker
from opgraph.graph.basic import Apply, Variable
from opgraph.graph.op import Thunk
from opgraph.link.basic import LocalLinker
from opgraph.link.dispatch import KernelRegistry
from opgraph.printing import debugprint

__all__ = ["MonitorLinker", "MonitorMode", "detect_nan"]

NodeFunc = Callable[[int, Apply, Any], Any]


class _NodeThunk:
    """The ``fn`` handed to pre/post functions: calling it computes the node."""

    def __init__(self, base: Thunk, inputs: list[list[Any]], outputs: list[list[Any]]) -> None:
        self.base = base
        self.inputs = inputs
        self.outputs = outputs

    def __call__(self) -> Any:
        return self.base()


class MonitorLinker(LocalLinker):
    """Per-node thunks (the backend's kernels where it has them) wrapped with the calls of
    ``pre_func(i, node, fn)`` and ``post_func(i, node, fn)``."""

    def __init__(
        self,
        kernels: KernelRegistry | None,
        pre_func: NodeFunc | None,
        post_func: NodeFunc | None,
    ) -> None:
        super().__init__(allow_gc=False)
        self.kernels = kernels
        if kernels is not None:
            self.backend = kernels.backend
        self.pre_func = pre_func
        self.post_func = post_func
        self._position: dict[Apply, int] = {}

    def make_all(self, *args: Any, **kwargs: Any) -> Any:
        if self.fgraph is not None:
            self._position = {n: i for i, n in enumerate(self.fgraph.toposort())}
        return super().make_all(*args, **kwargs)

    def make_node_thunk(
        self,
        node: Apply,
        storage_map: dict[Variable, list[Any]],
        compute_map: dict[Variable, list[bool]],
        no_recycling: Sequence[Variable],
    ) -> Thunk:
        base = super().make_node_thunk(node, storage_map, compute_map, no_recycling)
        fn = _NodeThunk(
            base, [storage_map[v] for v in node.inputs], [storage_map[v] for v in node.outputs]
        )
        position = self._position.get(node, -1)
        pre, post = self.pre_func, self.post_func

        def thunk() -> Any:
            if pre is not None:
                pre(position, node, fn)
            result = fn()
            if post is not None:
                post(position, node, fn)
            return result

        thunk.inputs = fn.inputs  # type: ignore[attr-defined]
        thunk.outputs = fn.outputs  # type: ignore[attr-defined]
        thunk.lazy = getattr(base, "lazy", False)  # type: ignore[attr-defined]
        return thunk


class MonitorMode(Mode):
    """A mode calling ``pre_func(i, node, fn)`` before and ``post_func(i, node, fn)`` after
    each node (see the module docstring). ``optimizer`` is as for :class:`Mode`
    (``'default'``: ``config.optimizer``); the nodes run with the default linker's kernels.
    A ``linker`` may not be given (Theano raises too): MonitorMode uses its own.
    """

    def __init__(
        self,
        pre_func: NodeFunc | None = None,
        post_func: NodeFunc | None = None,
        optimizer: Any = "default",
        linker: Any = None,
    ) -> None:
        if linker is not None and not isinstance(getattr(linker, "mode", None), MonitorMode):
            raise ValueError(
                "MonitorMode can only use its own linker! You should not provide one.", linker
            )
        super().__init__(linker=None, optimizer=optimizer)
        self.pre_func = pre_func
        self.post_func = post_func

    @property
    def linker(self) -> MonitorLinker:  # type: ignore[override]
        kernels = resolve_linker(self.provided_linker).kernels
        return MonitorLinker(kernels, self.pre_func, self.post_func)

    def eval(self, i: int, node: Apply, fn: Callable[[], Any]) -> None:
        """Run one node as the linker does: ``pre_func``, ``fn()``, ``post_func``."""
        if self.pre_func is not None:
            self.pre_func(i, node, fn)
        fn()
        if self.post_func is not None:
            self.post_func(i, node, fn)

    def clone(
        self, link_kwargs: dict[str, Any] | None = None, optimizer: Any = "", **kwargs: Any
    ) -> MonitorMode:
        """A MonitorMode with the same functions (and ``optimizer`` if given)."""
        if optimizer == "":
            optimizer = self.provided_optimizer
        return type(self)(pre_func=self.pre_func, post_func=self.post_func, optimizer=optimizer)


def detect_nan(i: int, node: Apply, fn: Any) -> None:
    """A ``post_func`` printing the node and its values when an output contains NaN."""
    for output in fn.outputs:
        value = output[0]
        if isinstance(value, np.ndarray | np.generic | float) and np.isnan(value).any():
            print("*** NaN detected ***")
            debugprint(node)
            print(f"Inputs : {[c[0] for c in fn.inputs]}")
            print(f"Outputs: {[c[0] for c in fn.outputs]}")
            break
