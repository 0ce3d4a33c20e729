"""Lowerings of the products: ``Dot``, ``Dot22``, ``Dot22Scalar``, ``Gemm``, ``Gemv``, ``Ger``,
``BatchedDot`` and ``MatMul``.

Products become ``da.tensordot``/``da.matmul``: a contraction along a chunked axis is fine
(dask multiplies block pairs and sums the partial products). A client-side operand (a
shared weight, a constant) enters the graph once, cut along the contracted axis like the
dask operand so that no rechunk is needed. The BLAS epilogues follow ``perform``:
``beta * z + alpha * dot(x, y)`` where ``beta == 0`` ignores ``z`` (NaN included) and
``alpha == 0`` skips the product; the in-place variants never modify an input (dask arrays
are immutable; client-side inputs are copied before ``perform`` writes into them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dask.array as da
import numpy as np

from opgraph.graph.basic import Apply
from opgraph.tensor.blas import Dot22, Dot22Scalar, Gemm, Gemv, Ger
from opgraph.tensor.dot import BatchedDot, Dot, MatMul
from opgraph_dask.lowering import LoweringTable
from opgraph_dask.lowerings.shape import (
    client_or_perform,
    is_dask,
    out_dtype,
    require_known_shape,
)

__all__ = ["register"]


def _like(v: Any, ref: Any, axes: dict[int, int]) -> Any:
    """``v`` as a dask array; a client array is cut like ``ref`` on the mapped axes
    (``axes``: axis of ``v`` -> axis of ``ref``) and whole on the others."""
    if is_dask(v):
        return v
    v = np.asarray(v)
    if not is_dask(ref):
        return da.from_array(v, chunks=-1)
    chunks = tuple(
        ref.chunks[axes[d]] if d in axes and v.shape[d] == ref.shape[axes[d]] else -1
        for d in range(v.ndim)
    )
    return da.from_array(v, chunks=chunks)


def _operands(node: Apply, inputs: Sequence[Any], first: int, second: int) -> tuple[Any, Any]:
    """Inputs ``first`` and ``second`` (the factors of a product contracting the last axis
    of the first with axis 0 of the second) as dask arrays with known shapes."""
    x, y = inputs[first], inputs[second]
    require_known_shape(node, first, x)
    require_known_shape(node, second, y)
    if x.shape[-1] != y.shape[0]:
        raise ValueError(
            f"{node.op}: inputs {first} and {second} of shapes {tuple(x.shape)} and "
            f"{tuple(y.shape)} are not aligned: dimension {x.ndim - 1} of input {first} has "
            f"length {x.shape[-1]}, dimension 0 of input {second} has length {y.shape[0]}. "
            "HINT: transpose one input, or check which dimension should be contracted."
        )
    x = _like(x, y, {x.ndim - 1: 0})
    y = _like(y, x, {0: x.ndim - 1})
    return x, y


def _dot(x: Any, y: Any) -> Any:
    """``np.dot`` of two dask vectors/matrices.

    When the contracted axis is one chunk in both, each output block is one ``np.dot`` of a
    block pair (one task layer); otherwise ``da.tensordot`` multiplies the block pairs and
    sums the partial products.
    """
    if len(x.chunks[-1]) == 1 and len(y.chunks[0]) == 1:
        k = x.ndim - 1
        x_index = tuple(range(x.ndim))
        y_index = (k, *range(x.ndim, x.ndim + y.ndim - 1))
        out_index = x_index[:-1] + y_index[1:]
        dtype = np.result_type(x.dtype, y.dtype)
        return da.blockwise(
            np.dot,
            out_index,
            x,
            x_index,
            y,
            y_index,
            dtype=dtype,
            concatenate=True,
            meta=np.empty((0,) * len(out_index), dtype=dtype),
        )
    return da.tensordot(x, y, axes=(x.ndim - 1, 0))


def _scalar(v: Any) -> Any:
    """A client scalar as a Python/NumPy number; a 0-d dask array stays as it is."""
    return v if is_dask(v) else np.asarray(v).reshape(())[()]


def _epilogue(node: Apply, z: Any, alpha: Any, product: Any, beta: Any) -> Any:
    """``beta * z + alpha * product`` with BLAS's rules for zero scalars, in z's dtype."""
    dtype = out_dtype(node)
    alpha, beta = _scalar(alpha), _scalar(beta)
    if is_dask(alpha):
        scaled = da.where(alpha == 0, 0, alpha * product)
    elif alpha == 0:
        scaled = da.zeros(product.shape, dtype=dtype, chunks=product.chunks)
    elif alpha == 1:
        scaled = product  # no task layer for a product by one (the usual Gemv/Gemm)
    else:
        scaled = alpha * product
    if is_dask(beta):
        out = da.where(beta == 0, 0, beta * z) + scaled
    elif beta == 0:
        out = scaled
    elif beta == 1:
        out = z + scaled
    else:
        out = beta * z + scaled
    return out.astype(dtype, copy=False)


def _check_result(node: Apply, pos: int, z: Any, shape: tuple[int, ...], of: str) -> None:
    require_known_shape(node, pos, z)
    if tuple(z.shape) != shape:
        raise ValueError(
            f"{node.op}: input {pos} has shape {tuple(z.shape)}, but {of} has shape {shape}; "
            "they must be equal."
        )


# ----------------------------------------------------------------------------------------


def lower_dot(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``Dot``/``Dot22``: ``da.tensordot`` over the last axis of x and axis 0 of y."""
    x, y = _operands(node, inputs, 0, 1)
    return [_dot(x, y).astype(out_dtype(node), copy=False)]


def lower_dot22scalar(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``Dot22Scalar``: ``a * dot(X, Y)``."""
    x, y = _operands(node, inputs, 0, 1)
    product = _dot(x, y)
    zeros = np.zeros((), dtype=out_dtype(node))
    return [_epilogue(node, zeros, inputs[2], product, np.zeros(()))]


def lower_gemm(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``Gemm``: ``b * Z + a * dot(X, Y)``; Gemv is the same with a matrix and a vector."""
    z, a, _, _, b = inputs
    x, y = _operands(node, inputs, 2, 3)
    shape = (x.shape[0],) if y.ndim == 1 else (x.shape[0], y.shape[1])
    _check_result(node, 0, z, shape, "the product")
    return [_epilogue(node, z, a, _dot(x, y), b)]


def lower_ger(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``Ger``: ``A + a * outer(x, y)``."""
    A, a, x, y = inputs
    require_known_shape(node, 2, x)
    require_known_shape(node, 3, y)
    _check_result(node, 0, A, (x.shape[0], y.shape[0]), "outer(x, y)")
    x = _like(x, A, {0: 0})
    y = _like(y, A, {0: 1})
    product = x[:, None] * y[None, :]
    return [_epilogue(node, A, a, product, np.ones(()))]


def lower_batched_dot(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``BatchedDot``: ``da.matmul`` of the pairs along the common batch axis 0."""
    x, y = inputs
    require_known_shape(node, 0, x)
    require_known_shape(node, 1, y)
    if x.shape[0] != y.shape[0]:
        raise ValueError(
            f"BatchedDot: inputs must have the same batch size (axis 0), got shapes "
            f"{tuple(x.shape)} and {tuple(y.shape)}"
        )
    if x.shape[-1] != y.shape[1]:
        raise ValueError(
            f"BatchedDot: inputs of shapes {tuple(x.shape)} and {tuple(y.shape)} are not "
            f"aligned: input 0 has {x.shape[-1]} columns, input 1 has {y.shape[1]} rows per batch"
        )
    x = _like(x, y, {0: 0, x.ndim - 1: 1})
    y = _like(y, x, {0: 0, 1: x.ndim - 1})
    xm = x[:, None, :] if x.ndim == 2 else x
    ym = y[:, :, None] if y.ndim == 2 else y
    res = da.matmul(xm, ym)
    if y.ndim == 2:
        res = res[..., 0]
    if x.ndim == 2:
        res = res[:, 0]
    return [res.astype(out_dtype(node), copy=False)]


def lower_matmul(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """``MatMul``: ``da.matmul``; batch axes broadcast only where the type allows it."""
    x, y = inputs
    require_known_shape(node, 0, x)
    require_known_shape(node, 1, y)
    for d in range(node.outputs[0].type.ndim - 2):
        bx, by = (v.type.broadcastable[d] for v in node.inputs)
        if not bx and not by and x.shape[d] != y.shape[d]:
            raise ValueError(
                f"MatMul: batch dimension {d} differs: input 0 has length {x.shape[d]}, input "
                f"1 has length {y.shape[d]} (shapes {tuple(x.shape)} and {tuple(y.shape)})."
            )
    if x.shape[-1] != y.shape[-2]:
        raise ValueError(
            f"MatMul: inputs of shapes {tuple(x.shape)} and {tuple(y.shape)} are not aligned: "
            f"input 0 has {x.shape[-1]} columns, input 1 has {y.shape[-2]} rows"
        )
    nd = x.ndim
    x = _like(x, y, {nd - 1: nd - 2})
    y = _like(y, x, {nd - 2: nd - 1})
    return [da.matmul(x, y).astype(out_dtype(node), copy=False)]


def register(table: LoweringTable) -> None:
    """Add this module's lowerings to ``table``."""
    for op_class, lower in (
        (Dot, lower_dot),
        (Dot22, lower_dot),
        (Dot22Scalar, lower_dot22scalar),
        (Gemm, lower_gemm),
        (Gemv, lower_gemm),
        (Ger, lower_ger),
        (BatchedDot, lower_batched_dot),
        (MatMul, lower_matmul),
    ):
        table.register(op_class, client_or_perform(lower))
