"""The base class of every GPU op: kernels compile when the function is linked.

A :class:`GpuOp` compiles what it needs when its thunk is made (link time, before the first
call) through :meth:`GpuOp.prepare_gpu`, which returns the function one call runs; the
thunk then only queues launches.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from opgraph.graph.basic import Apply
from opgraph.graph.op import Op

__all__ = ["GpuOp", "Run"]

#: ``run(input_values) -> output_values``: one call of a prepared GPU node.
Run = Callable[[Sequence[Any]], Sequence[Any]]


class GpuOp(Op):
    """An Op whose outputs are computed on the GPU.

    Subclasses define :meth:`prepare_gpu`; :meth:`prepare_node` calls it once per node when
    the function is linked, so kernels compile before the first call, and ``perform`` runs
    the prepared function on each call.
    """

    def prepare_gpu(self, node: Apply) -> Run:
        """Compile what ``node`` needs and return ``run(input_values) -> output_values``."""
        raise TypeError(f"{type(self).__name__} must define prepare_gpu(node)")

    def _prepared(self, node: Apply) -> Run:
        run = node.tag.__dict__.get("gpu_run")
        if run is None:
            run = node.tag.gpu_run = self.prepare_gpu(node)
        return run

    def prepare_node(self, node: Apply, storage_map: Any, compute_map: Any, impl: Any) -> None:
        """Compile the node's kernels when its thunk is made (link time)."""
        self._prepared(node)

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: Any) -> None:
        for cell, value in zip(output_storage, self._prepared(node)(inputs), strict=True):
            cell[0] = value
