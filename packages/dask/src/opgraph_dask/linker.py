"""The ``dask`` linker: runs a rewritten FunctionGraph by building a dask.array task graph.

A call walks the graph in topological order once, on the client, and only *builds* tasks:

- every explicit argument that is a NumPy array (ndim >= 1) becomes a dask array chunked
  by ``config.dask__chunks`` (a dask array argument is used as it is); shared variables'
  values and 0-d values stay NumPy;
- a node whose Op has a lowering in :func:`opgraph_dask.lowering.get_table` runs it (a
  lowering takes NumPy values too: those here run ``perform`` on the client when no input
  is a dask array, or build a lazy array when the result would be large, e.g. ``Alloc``);
- a node without a lowering whose inputs are all NumPy values runs its Op's ``perform``
  on the client (constants, shapes, small weights);
- a node without a lowering with a dask input: an elementwise Op (an
  :class:`~opgraph.tensor.elemwise.Elemwise`, or any Op whose class sets
  ``dask_elementwise = True``) maps its ``perform`` over the chunks with
  ``dask.array.map_blocks``; any other Op raises :class:`LoweringError`.

Outputs stay lazy dask arrays, except those that must be values on the client: updates of
shared variables, outputs that are not tensors, and every output when ``compute`` is on
(``DaskLinker(compute=True)`` or ``config.dask__compute``). Those are computed together by
one ``dask.compute`` call per function call (shared tasks run once), on the current
``distributed.Client`` when there is one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import dask
import dask.array as da
import numpy as np

from opgraph.compile.ops import DeepCopyOp, ViewOp
from opgraph.compile.sharedvalue import SharedVariable
from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.link.basic import Container, Linker, LinkResult, map_storage
from opgraph.link.utils import raise_with_op
from opgraph.tensor.elemwise import Elemwise
from opgraph.tensor.type import TensorType
from opgraph_dask.flags import SCHEDULERS, parse_chunks
from opgraph_dask.lowering import Lowering, LoweringError, get_table
from opgraph_dask.payload import payload_of, unwrap

__all__ = ["DaskLinker", "DaskRunner", "is_dask", "is_elementwise"]

_HOOK_HINT = (
    "HINT: register a lowering with table.register({cls}, lower) in an "
    "opgraph_dask_lowerings hook implementation (see opgraph_dask.hookspecs; "
    "lower(node, inputs) returns one value per output), or set dask_elementwise = True on "
    "the Op class if its perform works chunk by chunk; or compile this function with "
    'another mode (mode="FAST_RUN").'
)


def is_dask(value: Any) -> bool:
    """True for a ``dask.array.Array`` (a chunked, lazy value)."""
    return isinstance(value, da.Array)


def is_elementwise(op: Any) -> bool:
    """True if ``op``'s ``perform`` may be mapped over chunks: an Elemwise, or an Op whose
    class declares ``dask_elementwise = True``."""
    return isinstance(op, Elemwise) or bool(getattr(op, "dask_elementwise", False))


def _passthrough(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """DeepCopyOp/ViewOp on a dask array: dask arrays are immutable, so the input itself."""
    return [inputs[0]]


#: Lowerings of the Ops the compile layer itself inserts, used when the table has none.
_BUILTIN: dict[type, Lowering] = {DeepCopyOp: _passthrough, ViewOp: _passthrough}


def _lookup(op: Any) -> Lowering | None:
    found = get_table().lookup(op)
    if found is None:
        for cls in type(op).__mro__:
            if cls in _BUILTIN:
                return _BUILTIN[cls]
    return found


def _chunks_for(spec: Any, ndim: int) -> Any:
    """``spec`` (from :func:`parse_chunks`) fitted to an array of ``ndim`` dimensions: a
    per-axis tuple is cut to ``ndim`` entries or padded with ``"auto"``."""
    if isinstance(spec, tuple):
        return tuple(spec[:ndim]) + ("auto",) * max(0, ndim - len(spec))
    return spec


def _detached(node: Apply) -> Apply:
    """A copy of ``node`` over fresh variables of the same types (no graph behind them), so
    that shipping it to workers does not ship the whole function graph."""
    return Apply(node.op, [v.type() for v in node.inputs], [v.type() for v in node.outputs])


def _perform_block(node: Any, index: int, destroyed: tuple[int, ...], *blocks: Any) -> Any:
    """Output ``index`` of ``node.op.perform`` on one chunk of each input (runs on workers;
    ``node`` is the detached node, in a payload: unpickled once per worker process).

    Inputs the Op overwrites in place (``destroyed``) are copied first: a chunk may be a
    view of an array that other tasks read.
    """
    node = unwrap(node)
    values = [b.copy() if i in destroyed else b for i, b in enumerate(blocks)]
    storage: list[list[Any]] = [[None] for _ in node.outputs]
    node.op.perform(node, values, storage)
    return storage[index][0]


def _map_perform(node: Apply, values: Sequence[Any]) -> list[Any]:
    """Lower an elementwise node by mapping its ``perform`` over aligned chunks.

    NumPy inputs become one-chunk dask arrays; ``map_blocks`` rechunks inputs whose chunks
    differ and broadcasts length-1 axes.
    """
    key = (
        "detached",
        node.op,
        tuple(v.type for v in node.inputs),
        tuple(v.type for v in node.outputs),
    )
    detached = payload_of(_detached(node), cache_key=key)
    destroyed = tuple(sorted({i for ins in node.op.destroy_map.values() for i in ins}))
    arrays = [v if is_dask(v) else da.from_array(np.asarray(v), chunks=-1) for v in values]
    name = type(node.op).__name__.lower()
    outs = []
    for k, out in enumerate(node.outputs):
        dtype = out.type.numpy_dtype
        outs.append(
            da.map_blocks(
                _perform_block,
                detached,
                k,
                destroyed,
                *arrays,
                dtype=dtype,
                meta=np.empty((0,) * out.type.ndim, dtype=dtype),
                token=f"opgraph-{name}",
            )
        )
    return outs


def _run_perform(node: Apply, values: Sequence[Any]) -> list[Any]:
    """``perform`` on NumPy values, into fresh cells (an earlier output may still be read by
    a lazy dask graph, so nothing is reused or overwritten in place)."""
    destroyed = {i for ins in node.op.destroy_map.values() for i in ins}
    if destroyed:
        values = [
            v.copy() if i in destroyed and isinstance(v, np.ndarray) else v
            for i, v in enumerate(values)
        ]
    storage: list[list[Any]] = [[None] for _ in node.outputs]
    node.op.perform(node, list(values), storage)
    return [cell[0] for cell in storage]


def _check_outputs(node: Apply, lower: Callable[..., Any], outs: Any) -> list[Any]:
    """The lowering's outputs, checked against the node's output Types (the contract of
    :mod:`opgraph_dask.lowering`): a dask array must have the output's ndim and dtype; a
    NumPy value (e.g. from ``perform``) must have its ndim and is cast to its dtype."""
    where = f"{getattr(lower, '__module__', '?')}.{getattr(lower, '__qualname__', lower)}"
    if outs is None or len(outs) != len(node.outputs):
        got = "None" if outs is None else f"{len(outs)} values"
        raise LoweringError(
            f"the dask lowering {where} of {node.op} returned {got} for {len(node.outputs)} "
            f"output(s) (node {node})"
        )
    checked = []
    for k, (var, value) in enumerate(zip(node.outputs, outs)):
        vtype = var.type
        if isinstance(vtype, TensorType):
            if not is_dask(value):
                value = np.asarray(value)
                if value.ndim == vtype.ndim and value.dtype != vtype.numpy_dtype:
                    value = value.astype(vtype.numpy_dtype)
            if value.ndim != vtype.ndim or value.dtype != vtype.numpy_dtype:
                raise LoweringError(
                    f"the dask lowering {where} of {node.op} returned output {k} with ndim "
                    f"{value.ndim} and dtype {value.dtype}, but the node's output has type "
                    f"{vtype} (ndim {vtype.ndim}, dtype {vtype.dtype}) (node {node})"
                )
        checked.append(value)
    return checked


class DaskThunk:
    """One node's step of a call: reads its input cells, writes its output cells.

    ``kind`` says what it did on the last call: ``"lowering"`` (the lowering table's entry),
    ``"perform"`` (no entry, NumPy values: on the client), ``"map_blocks"`` (no entry,
    elementwise: ``perform`` mapped over chunks) or None before the first call.
    """

    lazy = False

    def __init__(self, node: Apply, inputs: list[list[Any]], outputs: list[list[Any]]) -> None:
        self.node = node
        self.inputs = inputs
        self.outputs = outputs
        self.kind: str | None = None
        lower = _lookup(node.op)
        self._lower = lower

    def __call__(self) -> None:
        node = self.node
        values = [cell[0] for cell in self.inputs]
        lower = self._lower
        if lower is not None:
            self.kind = "lowering"
            outs = _check_outputs(node, lower, lower(node, values))
        elif not any(is_dask(v) for v in values):
            self.kind = "perform"
            outs = _run_perform(node, values)
        elif is_elementwise(node.op):
            self.kind = "map_blocks"
            outs = _map_perform(node, values)
        else:
            raise _lowering_error(node)
        for cell, value in zip(self.outputs, outs):
            cell[0] = value

    def __repr__(self) -> str:
        return f"DaskThunk({self.node})"


def _lowering_error(node: Apply) -> LoweringError:
    cls = type(node.op)
    return LoweringError(
        f"{cls.__module__}.{cls.__qualname__} ({node.op}) has no dask lowering, so node "
        f"{node} cannot run on dask arrays (opgraph-dask never computes a whole dask array "
        f"on the client).\n" + _HOOK_HINT.format(cls=cls.__name__)
    )


class DaskRunner:
    """The callable a Function runs: builds the task graph node by node, then computes the
    outputs that must be values (one ``dask.compute`` per call).

    The Function applies the updates itself (``need_update_inputs``) from the computed
    update outputs, so a failed computation changes no shared variable.

    Attributes
    ----------
    nodes, thunks
        The nodes in topological order and their :class:`DaskThunk` (one each).
    storage_map
        One cell per variable.
    call_counts, call_times
        Per node: calls and seconds spent building its tasks, when timing is on.
    compute_time
        Seconds spent in ``dask.compute`` over all calls.
    """

    need_update_inputs = True

    def __init__(
        self,
        linker: DaskLinker,
        nodes: list[Apply],
        thunks: list[DaskThunk],
        storage_map: dict[Variable, list[Any]],
        input_cells: list[list[Any]],
        output_cells: list[list[Any]],
        *,
        timed: bool,
    ) -> None:
        fgraph = linker.fgraph
        self.nodes = nodes
        self.thunks = thunks
        self.storage_map = storage_map
        self.allow_gc = linker.get_allow_gc()
        self.timed = timed
        self.call_counts = [0] * len(nodes)
        self.call_times = [0.0] * len(nodes)
        self.compute_time = 0.0
        self._linker = linker
        # Explicit tensor arguments of ndim >= 1: chunked when given as NumPy arrays.
        self._chunked_inputs = [
            (cell, var.type.ndim)
            for var, cell in zip(fgraph.inputs, input_cells)
            if not isinstance(var, SharedVariable | Constant)
            and isinstance(var.type, TensorType)
            and var.type.ndim > 0
        ]
        updated = set((getattr(fgraph, "update_mapping", None) or {}).keys())
        # Outputs computed on every call, and those computed when compute is on.
        self._must_compute = [
            (cell, var)
            for k, (var, cell) in enumerate(zip(fgraph.outputs, output_cells))
            if k in updated or not isinstance(var.type, TensorType)
        ]
        self._may_compute = [
            (cell, var)
            for k, (var, cell) in enumerate(zip(fgraph.outputs, output_cells))
            if k not in updated and isinstance(var.type, TensorType)
        ]
        kept = {id(c) for c in input_cells} | {id(c) for c in output_cells}
        self._intermediate = [
            cell
            for var, cell in storage_map.items()
            if var.owner is not None and id(cell) not in kept
        ]

    def __call__(self) -> None:
        linker = self._linker
        chunks = parse_chunks(linker.chunks if linker.chunks is not None else config.dask__chunks)
        wrapped = []
        for cell, ndim in self._chunked_inputs:
            value = cell[0]
            if isinstance(value, np.ndarray) and value.ndim == ndim:
                wrapped.append((cell, value))
                cell[0] = da.from_array(value, chunks=_chunks_for(chunks, ndim), name=False)
        try:
            self._build()
            self._compute(linker.wants_compute())
        finally:
            for cell, value in wrapped:  # a stateful input's cell is its default's storage
                cell[0] = value
            if self.allow_gc:
                for cell in self._intermediate:
                    cell[0] = None

    def _build(self) -> None:
        timed = self.timed
        for i, thunk in enumerate(self.thunks):
            try:
                if timed:
                    t0 = time.perf_counter()
                    thunk()
                    self.call_times[i] += time.perf_counter() - t0
                    self.call_counts[i] += 1
                else:
                    thunk()
            except Exception:
                raise_with_op(self._linker.fgraph, thunk.node, thunk=thunk, index=i)

    def _compute(self, everything: bool) -> None:
        pending = [(cell, var) for cell, var in self._must_compute if is_dask(cell[0])]
        if everything:
            pending += [(cell, var) for cell, var in self._may_compute if is_dask(cell[0])]
        if not pending:
            return
        kwargs = {}
        scheduler = self._linker.scheduler_name()
        if scheduler != "default":
            kwargs["scheduler"] = scheduler
        t0 = time.perf_counter()
        results = dask.compute(*[cell[0] for cell, _ in pending], **kwargs)
        self.compute_time += time.perf_counter() - t0
        for (cell, var), value in zip(pending, results):
            value = np.asarray(value)
            dtype = getattr(var.type, "numpy_dtype", None)
            if dtype is not None and value.dtype != dtype:
                value = value.astype(dtype)
            cell[0] = value

    def update_profile(self, profile: Any) -> None:
        """Add the per-node graph-building times to ``profile`` and reset them."""
        for i, node in enumerate(self.nodes):
            if self.call_counts[i]:
                profile.add_apply(node, self.call_times[i], self.call_counts[i])
                self.call_times[i] = 0.0
                self.call_counts[i] = 0

    def clear_storage(self) -> None:
        """Drop the intermediate values (task graphs) kept from the last call."""
        for cell in self._intermediate:
            cell[0] = None


class DaskLinker(Linker):
    """The ``dask`` linker (``Mode(linker="dask")``, ``mode="DASK"``).

    Parameters
    ----------
    compute
        True: every output is computed (NumPy arrays, one ``dask.compute`` per call);
        False: tensor outputs stay dask arrays; None: ``config.dask__compute`` at each call.
    chunks
        How NumPy arguments are chunked (a ``dask__chunks`` string, an int or a tuple);
        None: ``config.dask__chunks`` at each call.
    scheduler
        The scheduler of that computation (one of :data:`opgraph_dask.flags.SCHEDULERS`);
        None: ``config.dask__scheduler``.
    allow_gc
        Drop intermediate task graphs after each call (None: ``config.allow_gc``).
    """

    backend = "Dask"
    #: It runs the Ops it can lower, and its outputs are lazy: the testing kit's default
    #: targets leave it out (name it in ``linkers=`` to check an Op's lowering).
    runs_every_graph = False

    def __init__(
        self,
        compute: bool | None = None,
        chunks: str | int | tuple | None = None,
        scheduler: str | None = None,
        allow_gc: bool | None = None,
    ) -> None:
        super().__init__(allow_gc=allow_gc)
        if chunks is not None:
            parse_chunks(chunks)  # fail early on a bad spec
        if scheduler is not None and scheduler not in SCHEDULERS:
            raise ValueError(f"scheduler must be one of {SCHEDULERS}, got {scheduler!r}")
        self.compute = compute
        self.chunks = chunks
        self.scheduler = scheduler

    def wants_compute(self) -> bool:
        """Whether every output is computed on this call."""
        return bool(config.dask__compute if self.compute is None else self.compute)

    def scheduler_name(self) -> str:
        """The scheduler computing outputs ("default": dask's choice)."""
        return self.scheduler if self.scheduler is not None else str(config.dask__scheduler)

    def input_filter(self, type: Any) -> Callable[..., Any] | None:
        """A filter letting dask arrays through for tensor arguments (see the class doc).

        A dask array must have the Type's ndim; another dtype is cast lazily when the cast
        is safe (or ``allow_downcast``), else TypeError. Any other value goes to
        ``type.filter``.
        """
        if not isinstance(type, TensorType):
            return None
        tensor_type = type

        def dask_filter(
            value: Any, strict: bool = False, allow_downcast: bool | None = None
        ) -> Any:
            if not is_dask(value):
                return tensor_type.filter(value, strict=strict, allow_downcast=allow_downcast)
            return _filter_dask(tensor_type, value, strict, allow_downcast)

        return dask_filter

    def make_all(
        self,
        input_storage: Sequence[list[Any]] | None = None,
        output_storage: Sequence[list[Any]] | None = None,
        storage_map: dict[Variable, list[Any]] | None = None,
    ) -> LinkResult:
        if self.fgraph is None:
            raise ValueError("DaskLinker.make_all() called before accept(fgraph)")
        fgraph = self.fgraph
        order = list(fgraph.toposort())
        input_cells, output_cells, storage_map = map_storage(
            fgraph, order, input_storage, output_storage, storage_map
        )
        self._check_lowerable(order)
        thunks = [
            DaskThunk(
                node, [storage_map[v] for v in node.inputs], [storage_map[v] for v in node.outputs]
            )
            for node in order
        ]
        fn = DaskRunner(
            self, order, thunks, storage_map, input_cells, output_cells, timed=bool(self.profile)
        )
        ins = [Container(v, cell) for v, cell in zip(fgraph.inputs, input_cells)]
        outs = [Container(v, cell, readonly=True) for v, cell in zip(fgraph.outputs, output_cells)]
        return fn, ins, outs, list(thunks), order

    def _check_lowerable(self, order: Sequence[Apply]) -> None:
        """Raise LoweringError now for a node that will surely get a dask array (it reads an
        explicit tensor argument of ndim >= 1) and has no way to run on one."""
        chunked = {
            v
            for v in self.fgraph.inputs
            if not isinstance(v, SharedVariable)
            and isinstance(v.type, TensorType)
            and v.type.ndim > 0
        }
        for node in order:
            reads_chunked = any(v in chunked for v in node.inputs)
            if reads_chunked and _lookup(node.op) is None and not is_elementwise(node.op):
                raise _lowering_error(node)

    def __repr__(self) -> str:
        return (
            f"DaskLinker(compute={self.compute!r}, chunks={self.chunks!r}, "
            f"scheduler={self.scheduler!r})"
        )


def _filter_dask(ttype: TensorType, value: Any, strict: bool, allow_downcast: bool | None) -> Any:
    """Check a dask array argument against ``ttype``; cast its dtype lazily if allowed."""
    if value.ndim != ttype.ndim:
        raise TypeError(
            f"{ttype} expects {ttype.ndim} dimension(s), got a dask array with {value.ndim} "
            f"dimension(s) (shape {value.shape})"
        )
    if any(np.isnan(n) for n in value.shape):
        raise TypeError(
            f"{ttype} got a dask array with unknown chunk sizes (shape {value.shape}); "
            "opgraph needs the shape of its inputs.\nHINT: call x.compute_chunk_sizes() "
            "first, or build the array with known chunks."
        )
    for i, (b, n) in enumerate(zip(ttype.broadcastable, value.shape)):
        if b and n != 1:
            raise TypeError(
                f"{ttype} expects length 1 along broadcastable axis {i}, got a dask array of "
                f"shape {value.shape}"
            )
    want = ttype.numpy_dtype
    if value.dtype == want:
        return value
    if strict:
        raise TypeError(f"{ttype} expects a dask array of dtype {want}, got {value.dtype}")
    if np.can_cast(value.dtype, want, "safe") or allow_downcast:
        return value.astype(want)
    raise TypeError(
        f"{ttype} expects dtype {want}; a dask array of dtype {value.dtype} cannot be cast "
        f"to it without loss.\nHINT: cast it with x.astype('{want}'), or pass "
        "allow_input_downcast=True to function()."
    )
