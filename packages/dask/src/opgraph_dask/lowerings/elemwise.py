"""Elemwise (and so every fused Composite) on dask arrays: one ``blockwise`` task per block.

Each block is computed by opgraph itself: the node's Op (with its in-place pattern dropped,
since a block may be shared by other tasks) is linked once per process and thread into a
one-node function with the installed linker that ``linker=auto`` names (``cvm`` when
opgraph-backend-c is installed, so its C kernel runs on each block; ``perform``
otherwise). The compiled function is built where the task runs (on a worker), never
shipped. Each block task is :func:`run_chunk` (pickled by reference) with a
:class:`~opgraph_dask.payload.Payload` of the layer's :class:`ChunkFunction`: the Op and
the input Types are pickled once on the client and unpickled once per worker process.

Chunking rules:

- The output's blocks follow the dask inputs' blocks; inputs whose blocks differ are
  aligned by dask (``unify_chunks``: a rechunk to the common boundaries, never an error).
- An input of length 1 in a dimension broadcasts along it, as the node's broadcastable
  pattern says; a non-broadcastable length that does not match is the same ValueError as
  ``Elemwise.perform``'s, raised while the graph is built.
- A NumPy operand whose every dimension has length 1 (scalars, weights broadcast along
  everything) goes to every task as it is; a larger one is cut into blocks matching the
  dask inputs (one task per block, like any input).
- A node whose inputs are all NumPy values is computed on the client (a NumPy result).

A node with several outputs is one task per block returning a tuple, and one ``getitem``
per output and block (dask fuses these when it optimizes the graph).
"""

from __future__ import annotations

import operator
import re
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply
from opgraph.tensor.elemwise import Elemwise, broadcast_error
from opgraph_dask.lowering import LoweringError, LoweringTable
from opgraph_dask.payload import Payload, payload_of

__all__ = [
    "ChunkFunction",
    "chunk_linker",
    "lower_elemwise",
    "register",
    "run_chunk",
    "run_locally",
]


def chunk_linker() -> Any:
    """A fresh linker for the per-block functions: ``linker=auto`` (cvm with backend-c),
    or ``vm`` where ``auto`` would be opgraph-dask's own linker."""
    from opgraph.compile.mode import resolve_linker

    linker = resolve_linker("auto")
    if type(linker).__module__.startswith("opgraph_dask"):
        linker = resolve_linker("vm")
    return linker


_local = threading.local()


class _Runner:
    """One node linked into a callable over NumPy blocks (one per process and thread: the
    storage cells are not shared between concurrent tasks)."""

    def __init__(self, op: Any, in_types: tuple[Any, ...]) -> None:
        from opgraph.graph.fg import FunctionGraph

        inputs = [t() for t in in_types]
        node = op.make_node(*inputs)
        fgraph = FunctionGraph(inputs, node.outputs, clone=False)
        linker = chunk_linker().accept(fgraph, no_recycling=list(fgraph.outputs))
        self.fn, ins, outs = linker.make_thunk()
        self.in_cells = [c.storage for c in ins]
        self.out_cells = [c.storage for c in outs]
        self.dtypes = [
            np.dtype(t.dtype) if isinstance(getattr(t, "dtype", None), str) else None
            for t in in_types
        ]

    def __call__(self, *blocks: Any) -> list[Any]:
        for cell, block, dtype in zip(self.in_cells, blocks, self.dtypes, strict=True):
            if dtype is not None:
                block = np.asarray(block)
                if block.dtype != dtype:
                    block = block.astype(dtype)
            cell[0] = block
        try:
            self.fn()
            return [cell[0] for cell in self.out_cells]
        finally:
            for cell in self.in_cells:
                cell[0] = None
            for cell in self.out_cells:
                cell[0] = None


def _runner(op: Any, in_types: tuple[Any, ...]) -> _Runner:
    cache = getattr(_local, "runners", None)
    if cache is None:
        cache = _local.runners = {}
    key = (op, in_types)
    runner = cache.get(key)
    if runner is None:
        runner = cache[key] = _Runner(op, in_types)
    return runner


def run_locally(node: Apply, values: Sequence[Any]) -> list[Any]:
    """The outputs of ``node`` on NumPy ``values``, computed here with the per-block linker
    (for nodes none of whose inputs is a dask array)."""
    op = _without_inplace(node.op) if isinstance(node.op, Elemwise) else node.op
    outs = _runner(op, tuple(v.type for v in node.inputs))(*values)
    return [np.asarray(o) for o in outs]


def _without_inplace(op: Elemwise) -> Elemwise:
    """``op`` with no in-place outputs: a block must never be overwritten (other tasks may
    read it)."""
    if not op.inplace_pattern:
        return op
    return Elemwise(op.scalar_op)


class ChunkFunction:
    """The block function of a lowered Elemwise: ``f(*blocks)`` runs the Op on NumPy blocks.

    Picklable (it carries the Op and the input Types; the compiled function is built where
    it is called and kept on the instance, one per thread). Returns the output block, or a
    tuple of them when the Op has several outputs. In a task graph it travels inside a
    :class:`~opgraph_dask.payload.Payload` and :func:`run_chunk` calls it.
    """

    def __init__(self, op: Elemwise, in_types: Sequence[Any]) -> None:
        self.op = _without_inplace(op)
        self.in_types = tuple(in_types)
        self._runners: dict[int, _Runner] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"op": self.op, "in_types": self.in_types}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.op = state["op"]
        self.in_types = state["in_types"]
        self._runners = {}

    def __call__(self, *blocks: Any) -> Any:
        thread = threading.get_ident()
        runner = self._runners.get(thread)
        if runner is None:
            runner = self._runners[thread] = _runner(self.op, self.in_types)
        outs = runner(*blocks)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def __dask_tokenize__(self) -> Any:
        return (type(self).__name__, str(self.op), hash(self.op), str(self.in_types))

    def __repr__(self) -> str:
        return f"ChunkFunction({self.op})"


def run_chunk(kernel: Payload | ChunkFunction, *blocks: Any) -> Any:
    """The task function of a lowered Elemwise: the layer's :class:`ChunkFunction` (in a
    payload) on one block of each input."""
    fn = kernel.value if isinstance(kernel, Payload) else kernel
    return fn(*blocks)


def _task_name(op: Elemwise) -> str:
    """A short name for the dask layer (the dashboard groups tasks by it)."""
    scalar = getattr(op.scalar_op, "name", None) or type(op.scalar_op).__name__
    if type(op.scalar_op).__name__ == "Composite":
        scalar = "composite"
    return "opgraph-" + re.sub(r"[^0-9A-Za-z_]+", "_", str(scalar)).strip("_").lower()


def _is_dask(value: Any) -> bool:
    import dask.array as da

    return isinstance(value, da.Array)


def _check_static_shapes(node: Apply, values: Sequence[Any]) -> None:
    """``Elemwise.perform``'s shape check, on the lengths known while building the graph."""
    ndim = node.outputs[0].type.ndim
    for dim in range(ndim):
        size = first = None
        for k, (var, val) in enumerate(zip(node.inputs, values, strict=True)):
            if var.type.broadcastable[dim]:
                continue
            n = np.shape(val)[dim]
            if n is None or (isinstance(n, float) and np.isnan(n)):
                continue
            if size is None:
                size, first = n, k
            elif n != size:
                raise broadcast_error(node, values, dim, first, k)  # type: ignore[arg-type]


def _block_chunks(dask_values: Sequence[Any], dim: int, length: int) -> tuple[int, ...]:
    """Blocks for a NumPy operand's dimension ``dim`` of ``length``: those of the first dask
    input with that length there (one block when no dask input has it)."""
    for val in dask_values:
        if val.shape[dim] == length:
            return val.chunks[dim]
    return (length,)


def lower_elemwise(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """Lower an Elemwise node: one ``blockwise`` task per output block (see the module)."""
    import dask.array as da
    from dask.base import tokenize

    op = node.op
    in_types = tuple(v.type for v in node.inputs)
    kernel = ChunkFunction(op, in_types)
    values = list(inputs)
    if not any(_is_dask(v) for v in values):
        return run_locally(node, values)
    # Link the block function here once: its C kernel is then compiled into the compile
    # cache before any task runs, and workers sharing this machine's cache load it. Left to
    # the workers, each would wait for one of them to compile it in-process, which can take
    # more memory than a worker's limit (the nanny then kills it, task after task).
    _runner(kernel.op, in_types)
    ndim = node.outputs[0].type.ndim
    for k, (var, val) in enumerate(zip(node.inputs, values, strict=True)):
        if np.ndim(val) != var.type.ndim:
            raise LoweringError(
                f"{op}: input {k} ({var}) should have {var.type.ndim} dimension(s), got a value "
                f"with {np.ndim(val)} (shape {np.shape(val)})"
            )
    _check_static_shapes(node, values)
    dask_values = [v for v in values if _is_dask(v)]
    index = tuple(range(ndim))
    args: list[Any] = []
    for var, val in zip(node.inputs, values, strict=True):
        if _is_dask(val):
            args += [val, index]
            continue
        arr = np.asarray(val, dtype=var.type.dtype)
        if all(n == 1 for n in arr.shape):
            args += [arr, None]  # tiny: handed to every task as it is
        else:
            chunks = tuple(_block_chunks(dask_values, d, n) for d, n in enumerate(arr.shape))
            args += [da.from_array(arr, chunks=chunks), index]
    out_dtypes = [np.dtype(o.type.dtype) for o in node.outputs]
    shipped = payload_of(kernel, cache_key=("elemwise", kernel.op, in_types))
    name = f"{_task_name(kernel.op)}-{tokenize(shipped, index, *args)}"
    multi = len(node.outputs) > 1
    meta = np.empty((0,) * ndim, dtype=object if multi else out_dtypes[0])
    try:
        result = da.blockwise(
            run_chunk,
            index,
            shipped,
            None,
            *args,
            name=name,
            dtype=meta.dtype,
            meta=meta,
        )
    except ValueError as exc:
        if any(np.isnan(c) for v in dask_values for dim in v.chunks for c in dim):
            raise LoweringError(
                f"{op}: cannot align inputs with unknown block sizes ({exc}).\nHINT: call "
                "compute_chunk_sizes() on the dask arrays first, or give them the same chunks."
            ) from exc
        raise
    if not multi:
        return [result]
    return [
        da.blockwise(
            operator.getitem,
            index,
            result,
            index,
            k,
            None,
            name=f"{name}-out{k}",
            dtype=dt,
            meta=np.empty((0,) * ndim, dtype=dt),
        )
        for k, dt in enumerate(out_dtypes)
    ]


def register(table: LoweringTable) -> None:
    """Add the Elemwise lowering to ``table``."""
    table.register(Elemwise, lower_elemwise)
