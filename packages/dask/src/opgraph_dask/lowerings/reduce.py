"""Reductions on dask arrays: CAReduce (Sum, Prod, max/min, All, Any, ...), ProdWithoutZeros,
MaxAndArgmax, Argmax and CumOp.

A CAReduce becomes ``dask.array.reduction``: each block is reduced over the node's axes in
the node's accumulator dtype (``acc_dtype``; the input's dtype for ops without one), the
partial results are combined in a tree in that dtype, and the last step casts to the
output's dtype, as ``CAReduce.perform`` does in one step. Sums may therefore differ from
``perform``'s in the last bits (another summation order); everything else is exact.

``mean`` and ``var`` need no entry of their own: after FAST_RUN's rewrites they are a Sum
divided (in an Elemwise) by a count computed from the shape.

Argmax over several axes gives, like ``Argmax.perform``, the flat index over the reduced
axes (kept axes first): the reduced axes are moved last and merged (dask rechunks for the
merge) before ``dask.array.argmax`` along the merged axis. Cumulative sums and products
are ``dask.array.cumsum`` / ``cumprod`` (axis None flattens first).

Reducing an empty axis with a scalar op that has no identity (max, min) raises
``CAReduce.perform``'s ValueError while the graph is built. Nodes whose input is a NumPy
value are computed on the client.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply
from opgraph.tensor.cumulative import CumOp
from opgraph.tensor.elemwise import CAReduce, ProdWithoutZeros
from opgraph.tensor.reduction import Argmax, MaxAndArgmax
from opgraph_dask.lowering import LoweringError, LoweringTable
from opgraph_dask.lowerings.elemwise import run_locally
from opgraph_dask.payload import Payload, payload_of

__all__ = [
    "BlockReducer",
    "lower_argmax",
    "lower_careduce",
    "lower_cumop",
    "lower_max_and_argmax",
    "lower_prod_without_zeros",
    "register",
]


def _is_dask(value: Any) -> bool:
    import dask.array as da

    return isinstance(value, da.Array)


class BlockReducer:
    """The chunk, combine and aggregate steps of one CAReduce (picklable).

    ``scalar_op`` is reduced with its NumPy ufunc when it has one (``add``, ``mul``,
    ``maximum``, ``minimum``, ``and_``, ``or_``, ``xor``), else with its Python ``impl``
    applied pairwise, in ``acc_dtype``; :meth:`aggregate` casts to ``out_dtype``.

    Its steps go into every reduction task as bound methods; the reducer pickles as a
    :class:`~opgraph_dask.payload.Payload` of its three fields (pickled once on the client),
    and a worker process rebuilds it once per payload token.
    """

    def __init__(self, scalar_op: Any, acc_dtype: str, out_dtype: str) -> None:
        self.scalar_op = scalar_op
        self.acc_dtype = str(np.dtype(acc_dtype))
        self.out_dtype = str(np.dtype(out_dtype))
        self._payload: Payload | None = None

    def __reduce__(self) -> Any:
        if self._payload is None:
            fields = (self.scalar_op, self.acc_dtype, self.out_dtype)
            self._payload = payload_of(fields, cache_key=("reducer", *fields))
        return _reducer_from, (self._payload,)

    def _reduce(self, x: Any, axis: tuple[int, ...], keepdims: bool) -> np.ndarray:
        x = np.asarray(x)
        ufunc = CAReduce._ufunc_reduce.get(getattr(self.scalar_op, "name", None))
        with np.errstate(all="ignore"):
            if ufunc is not None:
                return ufunc.reduce(x, axis=axis, dtype=self.acc_dtype, keepdims=keepdims)
            pairwise = np.frompyfunc(self.scalar_op.impl, 2, 1)
            res = x.astype(self.acc_dtype, copy=False)
            for a in sorted(axis, reverse=True):
                if res.shape[a] == 0:
                    shape = list(res.shape)
                    shape[a] = 1
                    res = np.full(shape, self.scalar_op.identity, dtype=self.acc_dtype)
                else:
                    res = pairwise.reduce(res, axis=a, keepdims=True).astype(self.acc_dtype)
            if not keepdims:
                res = res.reshape([n for i, n in enumerate(res.shape) if i not in axis])
            return res

    def chunk(self, x: Any, axis: tuple[int, ...], keepdims: bool, **_: Any) -> np.ndarray:
        """Reduce one block of the input (in the accumulator dtype)."""
        return self._reduce(x, axis, keepdims)

    def combine(self, x: Any, axis: tuple[int, ...], keepdims: bool, **_: Any) -> np.ndarray:
        """Reduce concatenated partial results (in the accumulator dtype)."""
        return self._reduce(x, axis, keepdims)

    def aggregate(self, x: Any, axis: tuple[int, ...], keepdims: bool, **_: Any) -> np.ndarray:
        """The last reduction, cast to the output dtype."""
        return np.asarray(self._reduce(x, axis, keepdims), dtype=self.out_dtype)

    def __dask_tokenize__(self) -> Any:
        return (type(self).__name__, str(self.scalar_op), self.acc_dtype, self.out_dtype)


_reducers: dict[str, BlockReducer] = {}


def _reducer_from(payload: Payload) -> BlockReducer:
    """The process's reducer for ``payload`` (built the first time)."""
    found = _reducers.get(payload.token)
    if found is None:
        found = BlockReducer(*payload.value)
        found._payload = payload
        if len(_reducers) >= 256:
            _reducers.clear()
        _reducers[payload.token] = found
    return found


def _name(op: Any) -> str:
    return "opgraph-" + re.sub(r"[^0-9A-Za-z]+", "_", type(op).__name__.lower()).strip("_")


def _check_not_empty(op: Any, x: Any, axes: tuple[int, ...], has_identity: bool) -> None:
    if has_identity:
        return
    if any(x.shape[a] == 0 for a in axes):
        raise ValueError(
            f"{op}: cannot reduce an empty array: there is no value to reduce (input shape "
            f"{x.shape}, reduced axes {list(axes)}). HINT: check the input is not empty "
            "before reducing it."
        )


def reduce_dask(
    x: Any, scalar_op: Any, axes: tuple[int, ...], acc_dtype: str, out_dtype: str, name: str
) -> Any:
    """``x`` (a dask array) reduced with ``scalar_op`` over ``axes`` (a dask array)."""
    import dask.array as da

    if not axes:
        return x.astype(out_dtype) if x.dtype != np.dtype(out_dtype) else x
    reducer = BlockReducer(scalar_op, acc_dtype, out_dtype)
    out_nd = x.ndim - len(axes)
    return da.reduction(
        x,
        reducer.chunk,
        reducer.aggregate,
        combine=reducer.combine,
        axis=axes,
        keepdims=False,
        dtype=np.dtype(out_dtype),
        name=name,
        meta=np.empty((0,) * out_nd, dtype=out_dtype),
    )


def lower_careduce(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """Lower a CAReduce node (Sum, Prod, Reduce{maximum}, All, Any, ...) to
    ``dask.array.reduction``."""
    (x,) = inputs
    if not _is_dask(x):
        return run_locally(node, inputs)
    op = node.op
    axes = op._axes(x.ndim)
    _check_not_empty(op, x, axes, op.scalar_op.identity is not None)
    out_dtype = node.outputs[0].type.dtype
    acc = op._acc_dtype(x.dtype)
    acc_dtype = str(np.dtype(acc)) if acc is not None else node.inputs[0].type.dtype
    if x.dtype != np.dtype(node.inputs[0].type.dtype):
        x = x.astype(node.inputs[0].type.dtype)
    return [reduce_dask(x, op.scalar_op, axes, acc_dtype, out_dtype, _name(op))]


def lower_prod_without_zeros(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """The product of the non-zero entries (0 where all are zero), as two reductions."""
    import dask.array as da

    from opgraph.scalar.basic import mul, or_

    (x,) = inputs
    if not _is_dask(x):
        return run_locally(node, inputs)
    op = node.op
    axes = op._axes(x.ndim)
    out_dtype = node.outputs[0].type.dtype
    acc = op.acc_dtype or node.inputs[0].type.dtype
    nonzero = x != 0
    prod = reduce_dask(da.where(nonzero, x, 1), mul, axes, acc, acc, _name(op))
    some = reduce_dask(nonzero, or_, axes, "bool", "bool", _name(op) + "_any")
    return [da.where(some, prod, 0).astype(out_dtype)]


def _argmax_dask(x: Any, axes: tuple[int, ...]) -> Any:
    """``Argmax.perform``'s flat index of the maximum over ``axes``, on a dask array."""
    import dask.array as da

    if len(axes) == 1:
        res = da.argmax(x, axis=axes[0])
    elif tuple(axes) == tuple(range(x.ndim)):
        # flattened first: dask's own axis=None combines the blocks in block order, so of
        # two equal maxima it may keep the one later in C order (perform keeps the first)
        res = da.argmax(x.reshape(-1))
    else:
        keep = [i for i in range(x.ndim) if i not in axes]
        moved = x.transpose(keep + list(axes))
        kept_shape = moved.shape[: len(keep)]
        merged = int(np.prod(moved.shape[len(keep) :], dtype="int64"))
        res = da.argmax(moved.reshape((*kept_shape, merged)), axis=-1)
    return res.astype("int64") if res.dtype != np.dtype("int64") else res


def lower_max_and_argmax(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """MaxAndArgmax: a maximum reduction and ``dask.array.argmax``."""
    from opgraph.scalar.basic import maximum

    (x,) = inputs
    if not _is_dask(x):
        return run_locally(node, inputs)
    axes = tuple(node.op.axis)
    _check_not_empty(node.op, x, axes, False)
    dtype = node.outputs[0].type.dtype
    return [reduce_dask(x, maximum, axes, dtype, dtype, "opgraph-max"), _argmax_dask(x, axes)]


def lower_argmax(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """Argmax: ``dask.array.argmax`` (over a merged axis when there are several)."""
    (x,) = inputs
    if not _is_dask(x):
        return run_locally(node, inputs)
    axes = tuple(range(x.ndim)) if node.op.axis is None else tuple(node.op.axis)
    _check_not_empty(node.op, x, axes, False)
    if not axes:
        import dask.array as da

        return [da.zeros(x.shape, dtype="int64", chunks=x.chunks)]
    return [_argmax_dask(x, axes)]


def lower_cumop(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """CumOp: ``dask.array.cumsum`` / ``cumprod`` in the output dtype."""
    import dask.array as da

    (x,) = inputs
    if not _is_dask(x):
        return run_locally(node, inputs)
    op = node.op
    dtype = node.outputs[0].type.dtype
    fn = {"add": da.cumsum, "mul": da.cumprod}.get(op.mode)
    if fn is None:
        raise LoweringError(f"{op}: no dask lowering for cumulative mode {op.mode!r}")
    axis = None if op.axis is None else op.axis % x.ndim
    if axis is None and x.ndim == 0:
        x = x.reshape((1,))
    res = fn(x, axis=axis, dtype=dtype)
    return [res.astype(dtype) if res.dtype != np.dtype(dtype) else res]


def register(table: LoweringTable) -> None:
    """Add the reductions' lowerings to ``table``."""
    table.register(CAReduce, lower_careduce)
    table.register(ProdWithoutZeros, lower_prod_without_zeros)
    table.register(MaxAndArgmax, lower_max_and_argmax)
    table.register(Argmax, lower_argmax)
    table.register(CumOp, lower_cumop)
