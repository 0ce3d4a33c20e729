"""Lowerings of the normalising ops of ``opgraph.tensor.nnet``: softmax, log-softmax, their
gradient, softmax with a bias, and the fused softmax/categorical cross-entropy ops.

Each normalises along one axis, which must be whole in every block: that axis is rechunked
into a single chunk (the other axes keep their chunks), then every block runs the Op's own
``perform`` (the same stable formulas as the Python linker) through a copy of the node that
carries only the Op and its types. The row-wise ops with class-index vectors
(``CrossentropySoftmaxArgmax1HotWithBias`` and friends) align the index vector's chunks with
the matrix's rows; an Op with several outputs runs once per block and its outputs are read
from that one result. Index bounds are checked in each block by ``perform``.

Sigmoid, softplus and the other elementwise activations are ``Elemwise`` Ops (lowered with
the elementwise family).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import dask.array as da
import numpy as np

from opgraph.graph.basic import Apply
from opgraph.tensor.nnet.basic import LogSoftmax, Softmax, SoftmaxGrad, SoftmaxWithBias
from opgraph.tensor.nnet.crossentropy import (
    CrossentropyCategorical1Hot,
    CrossentropyCategorical1HotGrad,
    CrossentropySoftmax1HotWithBiasDx,
    CrossentropySoftmaxArgmax1HotWithBias,
)
from opgraph_dask.lowering import LoweringTable
from opgraph_dask.lowerings.shape import (
    align_chunks,
    block_node_payload,
    client_or_perform,
    is_dask,
    out_dtype,
    require_known_shape,
    run_block,
)

__all__ = ["register", "whole_axes"]


def whole_axes(node: Apply, pos: int, value: Any, axes: Sequence[int]) -> da.Array:
    """Input ``pos`` as a dask array whose ``axes`` are each one chunk (rechunked if needed;
    the other axes keep their chunks). Unknown chunk sizes on those axes are an error."""
    if not is_dask(value):
        return da.from_array(np.asarray(value), chunks=-1)
    axes = [a % value.ndim for a in axes]
    if all(len(value.chunks[a]) == 1 for a in axes):
        return value
    require_known_shape(node, pos, value)
    return value.rechunk({a: -1 for a in axes})


def _meta(ndim: int, dtype: Any) -> np.ndarray:
    return np.empty((0,) * ndim, dtype=dtype)


def _rowwise(node: Apply, arrays: Sequence[tuple[Any, str]], out_index: str) -> list[Any]:
    """Run ``perform`` per block of ``arrays`` (each with its blockwise index string; ``i``
    the rows, ``k`` the whole class axis). A single output is indexed ``out_index``; with
    several, each is indexed ``i`` or ``ik`` by its number of dimensions."""
    inner = block_node_payload(node)
    aligned = align_chunks(arrays)
    pairs: list[Any] = []
    for value, (_, index) in zip(aligned, arrays, strict=True):
        pairs += [value, index]
    name = type(node.op).__name__.lower()
    if len(node.outputs) == 1:
        dtype = out_dtype(node)
        out = da.blockwise(
            run_block,
            out_index,
            inner,
            None,
            0,
            None,
            *pairs,
            dtype=dtype,
            meta=_meta(len(out_index), dtype),
            align_arrays=True,
            concatenate=True,
            token=f"opgraph-{name}",
        )
        return [out]
    # Several outputs: one task per block of rows returns them all (a tuple, so the
    # intermediate array is indexed by the rows only), then each output is picked out.
    results = da.blockwise(
        run_block,
        "i",
        inner,
        None,
        None,
        None,
        *pairs,
        dtype=object,
        meta=_meta(1, object),
        align_arrays=True,
        concatenate=True,
        token=f"opgraph-{name}",
    )
    width = next(value.shape[index.index("k")] for value, index in arrays if "k" in index)
    outs = []
    for k, var in enumerate(node.outputs):
        dtype = out_dtype(node, k)
        ndim = var.type.ndim
        extra: dict[str, Any] = {}
        if ndim == 2:
            extra = {"new_axis": [1], "chunks": (results.chunks[0], (width,))}
        outs.append(
            results.map_blocks(
                operator.getitem,
                k,
                dtype=dtype,
                meta=_meta(ndim, dtype),
                token=f"opgraph-{name}-out{k}",
                **extra,
            )
        )
    return outs


def _check_classes(node: Apply, x: Any, b: Any) -> None:
    if b.shape[0] != x.shape[1]:
        raise ValueError(
            f"{node.op}: b has {b.shape[0]} elements but x has shape {tuple(x.shape)}; b "
            "needs one per column of x."
        )


# ----------------------------------------------------------------------------------------


def lower_softmax(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``Softmax``/``LogSoftmax``/``SoftmaxGrad``: the op's axis made whole, then ``perform``
    on every block (the inputs' other axes are aligned by ``map_blocks``)."""
    axis = node.op.axis
    arrays = [whole_axes(node, k, v, [axis]) for k, v in enumerate(inputs)]
    if len(arrays) > 1:
        index = "abcdefghijklmnopqrstuvwxyz"[: arrays[0].ndim]
        arrays = align_chunks([(a, index) for a in arrays])
    dtype = out_dtype(node)
    name = type(node.op).__name__.lower()
    out = da.map_blocks(
        run_block,
        block_node_payload(node),
        0,
        *arrays,
        dtype=dtype,
        meta=_meta(node.outputs[0].type.ndim, dtype),
        token=f"opgraph-{name}",
    )
    return [out]


def lower_softmax_with_bias(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``SoftmaxWithBias``: rows of ``x`` (columns whole) with the whole bias vector."""
    x, b = inputs
    require_known_shape(node, 1, b)
    require_known_shape(node, 0, x, [1])
    _check_classes(node, x, b)
    x = whole_axes(node, 0, x, [1])
    b = whole_axes(node, 1, b, [0])
    return _rowwise(node, [(x, "ik"), (b, "k")], "ik")


def lower_crossentropy_softmax_argmax(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``CrossentropySoftmaxArgmax1HotWithBias``: ``[nll, sm, am]`` per block of rows."""
    x, b, y = inputs
    require_known_shape(node, 1, b)
    require_known_shape(node, 0, x, [1])
    _check_classes(node, x, b)
    x = whole_axes(node, 0, x, [1])
    b = whole_axes(node, 1, b, [0])
    y = _rows_like(y, x)
    return _rowwise(node, [(x, "ik"), (b, "k"), (y, "i")], "ik")


def _rows_like(v: Any, ref: da.Array) -> da.Array:
    """A per-row vector as a dask array cut like the rows of ``ref`` (when its length fits)."""
    if is_dask(v):
        return v
    v = np.asarray(v)
    chunks = ref.chunks[0] if v.shape[0] == ref.shape[0] else -1
    return da.from_array(v, chunks=(chunks,))


def _check_rows(node: Apply, pos: int, v: Any, n: int, what: str) -> None:
    if v.ndim == 1:
        require_known_shape(node, pos, v)
        if v.shape[0] != n:
            raise ValueError(f"{node.op}: {v.shape[0]} {what} for {n} rows; they must be equal.")


def lower_crossentropy_dx(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``CrossentropySoftmax1HotWithBiasDx``: ``dy[i] * (sm[i] - onehot(y[i]))`` per block."""
    dy, sm, y = inputs
    require_known_shape(node, 1, sm)
    _check_rows(node, 0, dy, sm.shape[0], "values of dy")
    _check_rows(node, 2, y, sm.shape[0], "class indices")
    sm = whole_axes(node, 1, sm, [1])
    y = _rows_like(y, sm)
    if np.ndim(dy) == 0:
        dy_arg = (da.asarray(dy), "")
    else:
        dy_arg = (_rows_like(dy, sm), "i")
    return _rowwise(node, [dy_arg, (sm, "ik"), (y, "i")], "ik")


def lower_categorical_1hot(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``CrossentropyCategorical1Hot``: ``-log(coding[i, y[i]])`` per block of rows."""
    coding, y = inputs
    require_known_shape(node, 0, coding)
    _check_rows(node, 1, y, coding.shape[0], "class indices")
    coding = whole_axes(node, 0, coding, [1])
    return _rowwise(node, [(coding, "ik"), (_rows_like(y, coding), "i")], "i")


def lower_categorical_1hot_grad(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``CrossentropyCategorical1HotGrad``: ``-g[i] / coding[i, y[i]]`` at the targets."""
    g, coding, y = inputs
    require_known_shape(node, 1, coding)
    _check_rows(node, 0, g, coding.shape[0], "values of g_y")
    _check_rows(node, 2, y, coding.shape[0], "class indices")
    coding = whole_axes(node, 1, coding, [1])
    arrays = [(_rows_like(g, coding), "i"), (coding, "ik"), (_rows_like(y, coding), "i")]
    return _rowwise(node, arrays, "ik")


def register(table: LoweringTable) -> None:
    """Add this module's lowerings to ``table``."""
    for op_class, lower in (
        (Softmax, lower_softmax),
        (LogSoftmax, lower_softmax),
        (SoftmaxGrad, lower_softmax),
        (SoftmaxWithBias, lower_softmax_with_bias),
        (CrossentropySoftmaxArgmax1HotWithBias, lower_crossentropy_softmax_argmax),
        (CrossentropySoftmax1HotWithBiasDx, lower_crossentropy_dx),
        (CrossentropyCategorical1Hot, lower_categorical_1hot),
        (CrossentropyCategorical1HotGrad, lower_categorical_1hot_grad),
    ):
        table.register(op_class, client_or_perform(lower))
