"""Lowerings of indexing: ``Subtensor``, ``IncSubtensor``, ``AdvancedSubtensor1`` and
``AdvancedIncSubtensor1``.

- ``x[1:3, i, ::-2]`` (basic indexing with client-side integer bounds) is dask's own basic
  indexing: no data moves beyond the selected blocks.
- ``inc_subtensor``/``set_subtensor`` with basic indices use dask's item assignment on a
  copy of the array object (dask arrays are immutable: the input is never changed).
- ``x[ivector]`` gathers rows with dask's integer-array indexing; the index may be a client
  vector (checked for bounds now) or a dask array (checked by dask when computed).
- ``inc_subtensor(x[ivector], y)`` (the gradient of a gather) with a client index: each
  block of rows of ``x`` receives, through the Op's own ``perform``, the rows of ``y``
  whose indices fall inside it, so repeated indices accumulate as in NumPy's ``add.at``.

Index values must be known on the client: an index computed from chunked data is a
:class:`~opgraph_dask.lowering.LoweringError` (except ``AdvancedSubtensor1``'s vector), as
is indexing along an axis whose chunk sizes are unknown.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dask.array as da
import numpy as np

from opgraph.graph.basic import Apply
from opgraph.tensor.subtensor_advanced import AdvancedIncSubtensor1, AdvancedSubtensor1
from opgraph.tensor.subtensor_basic import IncSubtensor, Subtensor, get_idx_list
from opgraph.tensor.type import TensorType
from opgraph_dask.lowering import LoweringTable
from opgraph_dask.lowerings.shape import (
    client_int,
    has_dask,
    is_dask,
    out_dtype,
    perform_on_client,
    require_known_shape,
    run_block,
)
from opgraph_dask.payload import payload_of, unwrap

__all__ = ["register"]


def _client_index(node: Apply, x: Any, index_values: Sequence[Any], first: int) -> tuple:
    """The basic index of ``node`` with its scalar inputs as Python ints, bounds checked.

    ``index_values`` are the node's inputs from position ``first`` on.
    """
    ints = [client_int(node, first + k, v, "an index value") for k, v in enumerate(index_values)]
    key = get_idx_list([x, *ints], node.op.idx_list)
    for axis, entry in enumerate(key):
        if isinstance(entry, slice) and entry.step == 0:
            raise ValueError(f"{node.op}: slice step cannot be zero")
        if not isinstance(entry, slice):
            n = x.shape[axis]
            if not -n <= entry < n:
                raise IndexError(
                    f"{node.op}: index {entry} is out of bounds for axis {axis} with size {n}"
                )
    return key


def _indexed_axes(key: Sequence[Any]) -> list[int]:
    """The axes a basic index restricts (a full ``:`` works on unknown chunk sizes too)."""
    return [a for a, e in enumerate(key) if e != slice(None)]


def lower_subtensor(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``Subtensor``: dask's basic indexing (slices, negative steps, integers)."""
    x, *index_values = inputs
    if not has_dask(inputs):
        return perform_on_client(node, inputs)
    ints_key = get_idx_list([x, *[0] * len(index_values)], node.op.idx_list)
    require_known_shape(node, 0, x, _indexed_axes(ints_key))
    key = _client_index(node, x, index_values, 1)
    return [x[(*key, Ellipsis)]]


def _check_value_shape(node: Apply, y: Any, target: Sequence[int]) -> None:
    """``y`` fits the indexed part's shape by its type's broadcasting (as ``perform``)."""
    y_bcast = node.inputs[1].type.broadcastable
    offset = len(target) - y.ndim
    for d, (n, b) in enumerate(zip(y.shape, y_bcast, strict=True)):
        if n != target[offset + d] and not (b and n == 1):
            raise ValueError(
                f"{node.op}: y has shape {tuple(y.shape)} but the indexed part of x has shape "
                f"{tuple(target)}: dimension {d} of y differs and is not broadcastable."
            )


def lower_inc_subtensor(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``IncSubtensor`` (inc or set) with basic indices: item assignment on a new array.

    The input array is never changed (dask arrays are immutable), ``inplace`` or not.
    """
    x, y, *index_values = inputs
    if not has_dask(inputs):
        return perform_on_client(node, inputs)
    require_known_shape(node, 0, x)
    require_known_shape(node, 1, y)
    key = (*_client_index(node, x, index_values, 2), Ellipsis)
    dtype = out_dtype(node)
    out = da.asarray(x).astype(dtype, copy=False)
    view = out[key]
    _check_value_shape(node, y, view.shape)
    value = da.broadcast_to(da.asarray(y), view.shape)
    if not node.op.set_instead_of_inc:
        value = view + value
    out = out.copy()
    out[key] = value.astype(dtype, copy=False)
    return [out]


def _checked_vector(node: Apply, n: int, idx: Any) -> np.ndarray:
    """A client index vector as intp, with NumPy's bounds rule for an axis of length ``n``."""
    idx = np.asarray(idx)
    i = idx.astype(np.intp)
    if not np.can_cast(idx.dtype, np.intp) and np.any(i != idx):
        raise IndexError(f"{node.op}: index contains values too large for this system")
    bad = (i >= n) | (i < -n)
    if bad.any():
        raise IndexError(f"{node.op}: index {i[bad][0]} is out of bounds for axis 0 with size {n}")
    return i


def lower_advanced_subtensor1(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``AdvancedSubtensor1``: ``x[ivector]``, a gather of rows (``da.take`` semantics)."""
    x, idx = inputs
    if not has_dask(inputs):
        return perform_on_client(node, inputs)
    require_known_shape(node, 0, x, [0])
    x = da.asarray(x)
    if is_dask(idx):
        require_known_shape(node, 1, idx)
        return [x[idx.astype(np.intp)]]
    return [x[_checked_vector(node, x.shape[0], idx)]]


def _inc_rows(node: Any, x_block: np.ndarray, y_rows: np.ndarray, idx: np.ndarray) -> Any:
    """``perform`` on one block of rows with the rows of y routed to it (client index);
    ``node`` is the block node or its payload."""
    return run_block(node, 0, x_block, y_rows, idx)


def _inc_rows_selecting(
    node: Any, n: int, start: int, x_block: np.ndarray, y_all: np.ndarray, idx: np.ndarray
) -> Any:
    """``perform`` on the block of rows ``start:start + len(x_block)`` with the entries of
    the whole (dask-computed) index that fall in it, bounds checked against ``n`` rows."""
    node = unwrap(node)
    i = np.asarray(idx).astype(np.intp)
    bad = (i >= n) | (i < -n)
    if bad.any():
        raise IndexError(f"{node.op}: index {i[bad][0]} is out of bounds for axis 0 with size {n}")
    i = np.where(i < 0, i + n, i)
    sel = (i >= start) & (i < start + x_block.shape[0])
    return run_block(node, 0, x_block, y_all[sel], i[sel] - start)


def lower_advanced_inc_subtensor1(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``AdvancedIncSubtensor1``: ``x[idx] += y`` (or ``= y``) block of rows by block of rows.

    Each block of rows of ``x`` runs the Op's ``perform`` with the rows of ``y`` whose
    indices fall in it (re-based to the block), so duplicates accumulate (or the last one
    wins, for set) exactly as in NumPy. With a client index the routing happens now and
    untouched blocks get no task; with a dask index every block's task reads the whole index
    and ``y`` (one chunk along their first axis) and selects its own rows.
    """
    x, y, idx = inputs
    if not has_dask(inputs):
        return perform_on_client(node, inputs)
    require_known_shape(node, 0, x)
    require_known_shape(node, 1, y)
    require_known_shape(node, 2, idx)
    dtype = out_dtype(node)
    x = da.asarray(x).astype(dtype, copy=False)
    n = x.shape[0]
    target = (idx.shape[0], *x.shape[1:])
    _check_value_shape(node, y, target)
    y_full = da.broadcast_to(da.asarray(y), target).rechunk((-1, *x.chunks[1:]))
    # Inside a task y arrives broadcast to the rows' full shape.
    y_type = TensorType(node.inputs[1].type.dtype, (False,) * x.ndim)
    inner = payload_of(
        Apply(
            node.op,
            [node.inputs[0].type(), y_type(), node.inputs[2].type()],
            [node.outputs[0].type()],
        )
    )
    letters = "r" + "abcdefghijklmnopqrstuvwxyz"[: x.ndim - 1]
    y_letters = "k" + letters[1:]
    meta = np.empty((0,) * x.ndim, dtype=dtype)
    client = not is_dask(idx)
    if client:
        i = _checked_vector(node, n, idx)
        i = np.where(i < 0, i + n, i)
    else:
        idx = idx.rechunk(-1)
    pieces, start = [], 0
    for rows in x.chunks[0]:
        stop = start + rows
        x_rows = x[start:stop]
        if not client:
            x_rows = da.blockwise(
                *(_inc_rows_selecting, letters, inner, None, n, None, start, None),
                *(x_rows, letters, y_full, y_letters, idx, "k"),
                dtype=dtype,
                concatenate=True,
                meta=meta,
            )
        elif (sel := np.nonzero((i >= start) & (i < stop))[0]).size:
            y_rows = y_full[sel].rechunk((-1, *x.chunks[1:]))
            rebased = (i[sel] - start).astype(np.intp)
            x_rows = da.blockwise(
                *(_inc_rows, letters, inner, None, x_rows, letters, y_rows, y_letters),
                *(rebased, None),
                dtype=dtype,
                concatenate=True,
                meta=meta,
            )
        pieces.append(x_rows)
        start = stop
    return [da.concatenate(pieces, axis=0) if len(pieces) > 1 else pieces[0]]


def register(table: LoweringTable) -> None:
    """Add this module's lowerings to ``table``."""
    table.register(Subtensor, lower_subtensor)
    table.register(IncSubtensor, lower_inc_subtensor)
    table.register(AdvancedSubtensor1, lower_advanced_subtensor1)
    table.register(AdvancedIncSubtensor1, lower_advanced_inc_subtensor1)
