"""Lowerings of the Ops that move, reshape, build or describe arrays without arithmetic.

Covered: ``DimShuffle`` (transpose, new broadcastable axes, dropped length-1 axes),
``Reshape``, ``Shape``, ``Shape_i``, ``SpecifyShape``, ``Rebroadcast``, ``MakeVector``,
``TensorFromScalar``/``ScalarFromTensor``, ``Alloc``, ``AllocEmpty``, ``ARange``, ``Eye``,
``Join``, ``Split`` and the identity Ops of compiled graphs (``ViewOp``, ``DeepCopyOp``).

Shapes are values on the client: the shape of a dask array is known when the task graph is
built, so ``Shape``/``Shape_i`` give NumPy values and everything computed from them stays on
the client. An array whose chunk sizes are unknown (NaN, e.g. after boolean indexing) has no
such shape; the Ops that need it raise :class:`~opgraph_dask.lowering.LoweringError` naming
the input and the remedy (``x.compute_chunk_sizes()`` before calling the function) instead of
computing anything behind the user's back.

The helpers at the top (``is_dask``, ``perform_on_client``, ``block_node``,
``require_known_shape``, ...) are shared by the sibling modules ``subtensor``, ``blas`` and
``nnet``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.utils import parse_bytes

from opgraph.compile.ops import DeepCopyOp, ViewOp
from opgraph.graph.basic import Apply
from opgraph.tensor.basic import Rebroadcast, ScalarFromTensor, TensorFromScalar
from opgraph.tensor.elemwise import DimShuffle
from opgraph.tensor.joining import Join, Split
from opgraph.tensor.shape import MakeVector, Reshape, Shape, Shape_i, SpecifyShape
from opgraph.tensor.structure import Alloc, AllocEmpty, ARange, Eye
from opgraph_dask.lowering import LoweringError, LoweringTable
from opgraph_dask.payload import Payload, payload_of, unwrap

__all__ = [
    "align_chunks",
    "block_node",
    "block_node_payload",
    "client_int",
    "client_or_perform",
    "has_dask",
    "is_dask",
    "out_dtype",
    "perform_on_client",
    "register",
    "require_known_shape",
    "run_block",
]


# ----------------------------------------------------------------------------------------
# Helpers shared by the lowerings of this package


def is_dask(value: Any) -> bool:
    """Whether ``value`` is a dask array (chunked data) rather than a client-side value."""
    return isinstance(value, da.Array)


def has_dask(values: Sequence[Any]) -> bool:
    """Whether any of ``values`` is a dask array."""
    return any(isinstance(v, da.Array) for v in values)


def out_dtype(node: Apply, k: int = 0) -> np.dtype:
    """The NumPy dtype of output ``k`` of ``node``."""
    return np.dtype(node.outputs[k].type.dtype)


def perform_on_client(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """Run the Op's own ``perform`` on client-side (NumPy) inputs, as the Python linker does.

    Inputs the Op would overwrite (its ``destroy_map``) are copied first: a NumPy value may
    already be referenced by a task graph built earlier, which must not see it change.
    """
    destroyed = {i for ins in getattr(node.op, "destroy_map", {}).values() for i in ins}
    args = [
        v.copy() if k in destroyed and isinstance(v, np.ndarray) else v
        for k, v in enumerate(inputs)
    ]
    storage: list[list[Any]] = [[None] for _ in node.outputs]
    node.op.perform(node, args, storage)
    return [cell[0] for cell in storage]


def block_node(node: Apply) -> Apply:
    """A copy of ``node`` on fresh input variables of the same types, for use inside tasks.

    The graph's own node refers to its whole function graph; this one pickles small and
    carries exactly what ``perform`` reads (the Op and the input/output types).
    """
    return Apply(node.op, [i.type() for i in node.inputs], [o.type() for o in node.outputs])


def block_node_payload(node: Apply) -> Payload:
    """:func:`block_node` of ``node`` in a :class:`~opgraph_dask.payload.Payload`: pass it to
    ``blockwise``/``map_blocks`` (index None) in place of the node, and the node is pickled
    once on the client and unpickled once per worker process instead of once per task."""
    key = (
        "block_node",
        node.op,
        tuple(i.type for i in node.inputs),
        tuple(o.type for o in node.outputs),
    )
    return payload_of(block_node(node), cache_key=key)


def run_block(node: Any, index: int | None, *blocks: Any) -> Any:
    """``perform`` of ``node`` (a :func:`block_node`, or its payload from
    :func:`block_node_payload`) on NumPy blocks: output ``index``, or the tuple of all outputs
    when ``index`` is None.

    Blocks the Op would overwrite are copied first: a block may be read by other tasks.
    """
    node = unwrap(node)
    destroyed = {i for ins in getattr(node.op, "destroy_map", {}).values() for i in ins}
    args = [b.copy() if k in destroyed else b for k, b in enumerate(blocks)]
    storage: list[list[Any]] = [[None] for _ in node.outputs]
    node.op.perform(node, args, storage)
    if index is None:
        return tuple(cell[0] for cell in storage)
    return storage[index][0]


def align_chunks(pairs: Sequence[tuple[Any, str]]) -> list[Any]:
    """The arrays of ``pairs`` (value, blockwise index) with equal chunks on shared indices.

    ``blockwise``/``map_blocks`` treat an array with a single block along an index as
    broadcast, not as a whole axis to split, so a one-chunk operand must be cut like the
    others first. Each index takes the chunks of the operand with the most blocks on it;
    client values become dask arrays.
    """
    arrays = [v if is_dask(v) else da.from_array(np.asarray(v), chunks=-1) for v, _ in pairs]
    target: dict[str, tuple[int, ...]] = {}
    for a, (_, index) in zip(arrays, pairs, strict=True):
        for d, letter in enumerate(index):
            if len(a.chunks[d]) > len(target.get(letter, ())):
                target[letter] = a.chunks[d]
    out = []
    for a, (_, index) in zip(arrays, pairs, strict=True):
        want = tuple(
            target[letter] if sum(target[letter]) == a.shape[d] else a.chunks[d]
            for d, letter in enumerate(index)
        )
        out.append(a if want == a.chunks else a.rechunk(want))
    return out


def _unknown_chunks_error(node: Apply, pos: int, value: da.Array) -> LoweringError:
    var = node.inputs[pos]
    name = var.name or str(var)
    return LoweringError(
        f"{node.op}: input {pos} ({name}) is a dask array with unknown chunk sizes (shape "
        f"{value.shape}, e.g. after boolean indexing); {node.op} needs its shape to build the "
        "task graph. HINT: call x.compute_chunk_sizes() (or pass lengths=True to "
        "to_dask_array) on that array before calling the function."
    )


def require_known_shape(
    node: Apply, pos: int, value: Any, axes: Sequence[int] | None = None
) -> None:
    """Raise LoweringError if dask input ``pos`` has unknown chunk sizes (on ``axes``)."""
    if not is_dask(value):
        return
    chunks = value.chunks if axes is None else [value.chunks[a] for a in axes]
    if any(math.isnan(c) for dim in chunks for c in dim):
        raise _unknown_chunks_error(node, pos, value)


def client_int(node: Apply, pos: int, value: Any, what: str) -> int:
    """Input ``pos`` (``what``, an integer scalar) as a Python int; it must be a client value."""
    if is_dask(value):
        raise LoweringError(
            f"{node.op}: {what} (input {pos}, {node.inputs[pos]}) is computed from chunked "
            "data; opgraph-dask needs it on the client to build the task graph. HINT: compute "
            "it in a separate function, or derive it from shapes and constants only."
        )
    return int(np.asarray(value))


def _client_ints(node: Apply, first: int, values: Sequence[Any], what: str) -> tuple[int, ...]:
    out = []
    for k, v in enumerate(values):
        if is_dask(v):
            client_int(node, first + k, v, what)
        out.extend(int(s) for s in np.asarray(v).reshape(-1))
    return tuple(out)


def _big(shape: Sequence[int], dtype: np.dtype) -> bool:
    """Whether an array of ``shape`` is larger than dask's target chunk size."""
    limit = parse_bytes(dask.config.get("array.chunk-size", "128MiB"))
    return math.prod(shape) * dtype.itemsize > limit


def client_or_perform(lower: Any) -> Any:
    """Wrap ``lower`` so that nodes whose inputs are all client values run ``perform``."""

    def wrapped(node: Apply, inputs: Sequence[Any]) -> list[Any]:
        if not has_dask(inputs):
            return perform_on_client(node, inputs)
        return lower(node, inputs)

    wrapped.__name__ = getattr(lower, "__name__", "lower")
    wrapped.__qualname__ = getattr(lower, "__qualname__", "lower")
    wrapped.__doc__ = lower.__doc__
    wrapped.__module__ = getattr(lower, "__module__", __name__)
    return wrapped


# ----------------------------------------------------------------------------------------
# Identity Ops, broadcast flags, scalars


def lower_identity(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``ViewOp``/``DeepCopyOp``: a dask array is immutable, so it is its own copy."""
    (x,) = inputs
    return [x]


def lower_rebroadcast(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``Rebroadcast``: check that the dimensions declared broadcastable have length 1."""
    (x,) = inputs
    axes = [a for a, b in node.op.axis if b]
    require_known_shape(node, 0, x, axes)
    for a in axes:
        if x.shape[a] != 1:
            raise ValueError(
                f"{node.op}: dimension {a} was declared broadcastable but has length "
                f"{x.shape[a]} (shape {x.shape})"
            )
    return [x]


def lower_tensor_from_scalar(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``TensorFromScalar``/``ScalarFromTensor`` of a 0-d dask array: the same array."""
    (x,) = inputs
    return [x.astype(out_dtype(node), copy=False)]


# ----------------------------------------------------------------------------------------
# DimShuffle, Reshape


def lower_dimshuffle(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``DimShuffle``: a transpose, then indexing that drops (``0``) and adds (``None``) axes.

    No reshape: the chunks of the kept axes stay as they are.
    """
    (x,) = inputs
    op = node.op
    order = op.shuffle + op.drop
    res = x.transpose(order) if order != list(range(x.ndim)) else x
    if op.drop:
        require_known_shape(node, 0, x, op.drop)
        for d in op.drop:
            if x.shape[d] != 1:
                raise ValueError(
                    f"{op}: dimension {d} of the input, which it drops, has length "
                    f"{x.shape[d]}, not 1 (shape {x.shape})"
                )
        res = res[(slice(None),) * len(op.shuffle) + (0,) * len(op.drop)]
    if op.augment:
        key: list[Any] = [slice(None)] * len(op.shuffle)
        for a in op.augment:
            key.insert(a, None)
        res = res[tuple(key)]
    return [res]


def lower_reshape(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``Reshape``: ``da.reshape`` (C order, like NumPy; dask merges chunks where needed)."""
    x, shp = inputs
    op = node.op
    new = _client_ints(node, 1, [shp], "the new shape")
    if len(new) != op.ndim:
        raise ValueError(f"{op}: the new shape {new} has {len(new)} element(s), expected {op.ndim}")
    require_known_shape(node, 0, x)
    size = math.prod(x.shape)
    known = math.prod(s for s in new if s != -1)
    if (
        new.count(-1) > 1
        or (-1 in new and (known == 0 or size % known))
        or (-1 not in new and known != size)
    ):
        raise ValueError(
            f"{op}: cannot reshape an array of shape {x.shape} (size {size}) to shape {new}. "
            "HINT: the product of the new shape must equal the size; use -1 for at most one "
            "dimension to infer it."
        )
    if x.ndim == 0:
        return [x.reshape(new)]
    try:
        return [da.reshape(x, new)]
    except NotImplementedError:
        # dask reshapes only by merging or splitting axes; an uneven regrouping goes
        # through the flat array (merge everything, then split into the new axes).
        return [da.reshape(da.reshape(x, (size,)), new)]


# ----------------------------------------------------------------------------------------
# Shape, Shape_i, SpecifyShape, MakeVector


def lower_shape(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``Shape``: the dask array's shape, a NumPy int64 vector on the client."""
    (x,) = inputs
    require_known_shape(node, 0, x)
    return [np.asarray(x.shape, dtype="int64").reshape(-1)]


def lower_shape_i(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``Shape_i``: one length of the dask array's shape, a NumPy int64 scalar."""
    (x,) = inputs
    i = node.op.i
    require_known_shape(node, 0, x, [i])
    return [np.asarray(x.shape[i], dtype="int64")]


def lower_specify_shape(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``SpecifyShape``: the check runs now, on the client (a dask array's shape is known)."""
    x, shp = inputs
    expected = _client_ints(node, 1, [shp], "the specified shape")
    require_known_shape(node, 0, x)
    if tuple(x.shape) != expected:
        raise ValueError(
            f"SpecifyShape: the value has shape {tuple(x.shape)}, but the shape was specified "
            f"as {expected}"
        )
    return [x]


def lower_make_vector(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``MakeVector`` with some 0-d dask inputs: ``da.stack`` of them (one small chunk)."""
    dtype = out_dtype(node)
    parts = [da.asarray(v).astype(dtype).reshape(()) for v in inputs]
    return [da.stack(parts)]


# ----------------------------------------------------------------------------------------
# Alloc, AllocEmpty, ARange, Eye


def _auto_chunks(shape: tuple[int, ...], dtype: np.dtype) -> tuple[tuple[int, ...], ...]:
    return da.core.normalize_chunks("auto", shape, dtype=dtype)


def lower_alloc(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``Alloc``: ``da.broadcast_to`` of the value, keeping its chunks on its own axes.

    With a client-side value the result stays on the client when it is small (below dask's
    ``array.chunk-size``); a larger one becomes a lazily filled dask array (``da.full`` /
    broadcast), so no big buffer is made on the client.
    """
    v, *shape_values = inputs
    op = node.op
    sh = _client_ints(node, 1, shape_values, "a shape argument")
    if any(s < 0 for s in sh):
        raise ValueError(f"{op}: the requested shape {sh} has a negative dimension")
    dtype = out_dtype(node)
    vbcast = node.inputs[0].type.broadcastable
    if not is_dask(v):
        if not _big(sh, dtype):
            return perform_on_client(node, inputs)
        v = np.asarray(v)
    else:
        require_known_shape(node, 0, v)
    offset = len(sh) - v.ndim
    for d in range(v.ndim):
        n = v.shape[d]
        if n != sh[offset + d] and not (vbcast[d] and n == 1):
            raise ValueError(
                f"Alloc: cannot fill shape {sh} with a value of shape {v.shape}: its "
                f"dimension {d} has length {n}, expected {sh[offset + d]}"
            )
    if not is_dask(v):
        if v.size == 1:
            return [da.full(sh, v.reshape(-1)[0], dtype=dtype, chunks=_auto_chunks(sh, dtype))]
        return [da.broadcast_to(da.asarray(v.astype(dtype)), sh, chunks=_auto_chunks(sh, dtype))]
    auto = _auto_chunks(sh, dtype)
    chunks = tuple(
        v.chunks[d - offset] if d >= offset and v.shape[d - offset] == sh[d] else auto[d]
        for d in range(len(sh))
    )
    return [da.broadcast_to(v.astype(dtype), sh, chunks=chunks)]


def lower_alloc_empty(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``AllocEmpty``: zeros (as ``perform``), on the client when small, else a lazy
    ``da.zeros`` that costs nothing unless a consumer reads it."""
    sh = _client_ints(node, 0, inputs, "a shape argument")
    if any(s < 0 for s in sh):
        raise ValueError(f"{node.op}: the requested shape {sh} has a negative dimension")
    dtype = out_dtype(node)
    if not _big(sh, dtype):
        return perform_on_client(node, [np.asarray(s, dtype="int64") for s in sh])
    return [da.zeros(sh, dtype=dtype, chunks=_auto_chunks(sh, dtype))]


def lower_client_only(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``ARange``/``Eye``: built from scalars, which must be client values."""
    for k, v in enumerate(inputs):
        client_int(node, k, v, f"input {k}")
    return perform_on_client(node, [np.asarray(v) for v in inputs])


# ----------------------------------------------------------------------------------------
# Join, Split


def lower_join(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``Join``: ``da.concatenate``; client-side pieces become one-chunk dask arrays."""
    axis, *tensors = inputs
    ndim = node.outputs[0].type.ndim
    a = client_int(node, 0, axis, "the axis")
    if not -ndim <= a < ndim:
        raise ValueError(f"Join: axis {a} is out of range for {ndim} dimension(s)")
    a %= ndim
    dtype = out_dtype(node)
    for k, t in enumerate(tensors):
        require_known_shape(node, k + 1, t)
    shapes = [tuple(t.shape) for t in tensors]
    if any(s[:a] + s[a + 1 :] != shapes[0][:a] + shapes[0][a + 1 :] for s in shapes):
        raise ValueError(
            f"Join: cannot join arrays of shapes {', '.join(map(str, shapes))} along axis {a}"
        )
    parts = [da.asarray(t).astype(dtype, copy=False) for t in tensors]
    return [da.concatenate(parts, axis=a)]


def lower_split(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``Split``: consecutive basic slices of the dask array along the axis."""
    x, axis, splits = inputs
    op = node.op
    require_known_shape(node, 0, x)
    a = client_int(node, 1, axis, "the axis")
    if not -x.ndim <= a < x.ndim:
        raise ValueError(f"{op}: axis {a} is out of range for shape {x.shape}")
    a %= x.ndim
    sizes = list(_client_ints(node, 2, [splits], "the split lengths"))
    if len(sizes) != op.len_splits:
        raise ValueError(f"{op}: got {len(sizes)} split length(s): {sizes}")
    if any(s < 0 for s in sizes):
        raise ValueError(f"{op}: the split lengths {sizes} include a negative one")
    if sum(sizes) != x.shape[a]:
        raise ValueError(
            f"{op}: the split lengths {sizes} sum to {sum(sizes)}, but the array of shape "
            f"{x.shape} has length {x.shape[a]} along axis {a}"
        )
    out, start = [], 0
    key: list[Any] = [slice(None)] * x.ndim
    for size in sizes:
        key[a] = slice(start, start + size)
        out.append(x[tuple(key)])
        start += size
    return out


def register(table: LoweringTable) -> None:
    """Add this module's lowerings to ``table``."""
    entries: list[tuple[type, Any]] = [
        (ViewOp, lower_identity),
        (DeepCopyOp, lower_identity),
        (Rebroadcast, lower_rebroadcast),
        (TensorFromScalar, lower_tensor_from_scalar),
        (ScalarFromTensor, lower_tensor_from_scalar),
        (DimShuffle, lower_dimshuffle),
        (Reshape, lower_reshape),
        (Shape, lower_shape),
        (Shape_i, lower_shape_i),
        (SpecifyShape, lower_specify_shape),
        (MakeVector, lower_make_vector),
        (Join, lower_join),
        (Split, lower_split),
    ]
    for op_class, lower in entries:
        table.register(op_class, client_or_perform(lower))
    table.register(Alloc, lower_alloc)
    table.register(AllocEmpty, lower_alloc_empty)
    table.register(ARange, lower_client_only)
    table.register(Eye, lower_client_only)
