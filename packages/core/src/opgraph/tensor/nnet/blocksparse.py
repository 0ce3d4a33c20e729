"""Block-sparse products: ``sparse_block_dot`` and its Ops (Theano's ``tensor.nnet.blocksparse``).

A weight tensor ``W`` of shape ``(iBlocks, oBlocks, iSize, oSize)`` holds one
``(iSize, oSize)`` matrix per pair of input and output blocks. For each example ``b`` a few
input blocks (``inputIdx[b]``, values ``h[b]``) are multiplied into a few output blocks
(``outputIdx[b]``)::

    for b, j:  o[b, j] = o_in[b, j] + sum_i h[b, i] @ W[inputIdx[b, i], outputIdx[b, j]]

:class:`SparseBlockGemv` computes that; :class:`SparseBlockOuter` is the scatter of outer
products that makes its gradient with respect to ``W``. Both compute with NumPy (one
``einsum`` per example); index arrays wrap negative values and raise ``IndexError`` out of
range, as NumPy indexing does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.null_type import grad_undefined
from opgraph.graph.op import Op
from opgraph.scalar.type import discrete_dtypes, float_dtypes
from opgraph.tensor import math as tm
from opgraph.tensor.basic import as_tensor_variable, constant
from opgraph.tensor.subtensor import take

__all__ = [
    "SparseBlockGemv",
    "SparseBlockOuter",
    "sparse_block_dot",
    "sparse_block_gemv",
    "sparse_block_gemv_inplace",
    "sparse_block_outer",
    "sparse_block_outer_inplace",
]


def _tensor(op: Op, x: Any, name: str, ndim: int, kinds: tuple[str, ...], what: str) -> Variable:
    """``x`` as a tensor of ``ndim`` dimensions and a dtype in ``kinds``, else a TypeError."""
    x = as_tensor_variable(x)
    if x.type.ndim != ndim:
        raise TypeError(
            f"{type(op).__name__}: {name} must be a {ndim}D tensor ({what}), got {x.type} ({x})"
        )
    if x.type.dtype not in kinds:
        kind = "an integer" if kinds is discrete_dtypes else "a float"
        raise TypeError(f"{type(op).__name__}: {name} must have {kind} dtype, got {x.type} ({x})")
    return x


def _gather_blocks(W: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``W[rows[i], cols[j]]`` for all ``i, j``: shape ``(len(rows), len(cols), ...)``."""
    return W[rows[:, None], cols[None, :]]


class SparseBlockGemv(Op):
    """``o[b, j] + sum_i h[b, i] @ W[inputIdx[b, i], outputIdx[b, j]]`` for every ``b, j``.

    Inputs ``o (batch, oWin, oSize)``, ``W (iBlocks, oBlocks, iSize, oSize)``,
    ``h (batch, iWin, iSize)``, ``inputIdx (batch, iWin)``, ``outputIdx (batch, oWin)``;
    the output has ``o``'s type. With ``inplace=True`` the result is written into ``o``.
    """

    __props__ = ("inplace",)

    registered_opts: list[Any] = []

    def __init__(self, inplace: bool = False) -> None:
        self.inplace = inplace
        if self.inplace:
            self.destroy_map = {0: [0]}

    def make_node(self, o: Any, W: Any, h: Any, inputIdx: Any, outputIdx: Any) -> Apply:
        """Check the five inputs' ranks and dtypes (see the class docstring for shapes)."""
        o = _tensor(self, o, "the output o", 3, float_dtypes, "batch, oWin, oSize")
        W = _tensor(
            self, W, "the weight matrix W", 4, float_dtypes, "iBlocks, oBlocks, iSize, oSize"
        )
        h = _tensor(self, h, "the input h", 3, float_dtypes, "batch, iWin, iSize")
        inputIdx = _tensor(
            self, inputIdx, "the input indices inputIdx", 2, discrete_dtypes, "batch, iWin"
        )
        outputIdx = _tensor(
            self, outputIdx, "the output indices outputIdx", 2, discrete_dtypes, "batch, oWin"
        )
        return Apply(self, [o, W, h, inputIdx, outputIdx], [o.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: Any) -> None:
        o, W, h, iIdx, oIdx = inputs
        batch, o_win = o.shape[:2]
        if h.shape[0] != batch or iIdx.shape != h.shape[:2] or oIdx.shape != (batch, o_win):
            raise ValueError(
                f"SparseBlockGemv: shapes do not agree: o {o.shape}, h {h.shape}, "
                f"inputIdx {iIdx.shape}, outputIdx {oIdx.shape}"
            )
        if W.shape[2:] != (h.shape[2], o.shape[2]):
            raise ValueError(
                f"SparseBlockGemv: W's blocks are {W.shape[2:]}, expected "
                f"(iSize, oSize) = {(h.shape[2], o.shape[2])}"
            )
        out = o if self.inplace else o.copy()
        for b in range(batch):
            blocks = _gather_blocks(W, iIdx[b], oIdx[b])  # (iWin, oWin, iSize, oSize)
            out[b] += np.einsum("ik,ijkl->jl", h[b], blocks).astype(out.dtype, copy=False)
        output_storage[0][0] = out

    def infer_shape(self, node: Apply, input_shapes: Sequence[Sequence[Any]]) -> list[Any]:
        return [input_shapes[0]]

    def grad(self, inputs: Sequence[Variable], grads: Sequence[Variable]) -> list[Any]:
        _o, W, h, inputIdx, outputIdx = inputs
        (go,) = grads
        Wgrad = sparse_block_outer(tm.zeros_like(W), h, go, inputIdx, outputIdx)
        hgrad = sparse_block_gemv(
            tm.zeros_like(h), W.dimshuffle(1, 0, 3, 2), go, outputIdx, inputIdx
        )
        return [
            go,
            Wgrad,
            hgrad,
            grad_undefined(self, 3, inputIdx, "grad of inputIdx makes no sense"),
            grad_undefined(self, 4, outputIdx, "grad of outputIdx makes no sense"),
        ]


class SparseBlockOuter(Op):
    """``o[xIdx[b, i], yIdx[b, j]] += alpha * outer(x[b, i], y[b, j])`` for every ``b, i, j``.

    Inputs ``o (xBlocks, yBlocks, xSize, ySize)``, ``x (batch, xWin, xSize)``,
    ``y (batch, yWin, ySize)``, ``xIdx (batch, xWin)``, ``yIdx (batch, yWin)`` and the scalar
    ``alpha`` (1 by default); the output has ``o``'s type. Pairs that hit the same block
    accumulate. This is the gradient of :class:`SparseBlockGemv` with respect to ``W``.
    """

    __props__ = ("inplace",)

    registered_opts: list[Any] = []

    def __init__(self, inplace: bool = False) -> None:
        self.inplace = inplace
        if self.inplace:
            self.destroy_map = {0: [0]}

    def make_node(self, o: Any, x: Any, y: Any, xIdx: Any, yIdx: Any, alpha: Any = None) -> Apply:
        """Check the inputs' ranks and dtypes; ``alpha`` defaults to a float32 1."""
        o = _tensor(self, o, "o", 4, float_dtypes, "xBlocks, yBlocks, xSize, ySize")
        x = _tensor(self, x, "x", 3, float_dtypes, "batch, xWin, xSize")
        y = _tensor(self, y, "y", 3, float_dtypes, "batch, yWin, ySize")
        xIdx = _tensor(self, xIdx, "xIdx", 2, discrete_dtypes, "batch, xWin")
        yIdx = _tensor(self, yIdx, "yIdx", 2, discrete_dtypes, "batch, yWin")
        if alpha is None:
            alpha = constant(np.asarray(1.0, dtype="float32"))
        alpha = _tensor(self, alpha, "alpha", 0, float_dtypes, "a scalar")
        return Apply(self, [o, x, y, xIdx, yIdx, alpha], [o.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: Any) -> None:
        o, x, y, xIdx, yIdx, alpha = inputs
        batch = x.shape[0]
        if y.shape[0] != batch or xIdx.shape != x.shape[:2] or yIdx.shape != y.shape[:2]:
            raise ValueError(
                f"SparseBlockOuter: shapes do not agree: x {x.shape}, y {y.shape}, "
                f"xIdx {xIdx.shape}, yIdx {yIdx.shape}"
            )
        if o.shape[2:] != (x.shape[2], y.shape[2]):
            raise ValueError(
                f"SparseBlockOuter: o's blocks are {o.shape[2:]}, expected "
                f"(xSize, ySize) = {(x.shape[2], y.shape[2])}"
            )
        out = o if self.inplace else o.copy()
        rows = np.broadcast_to(xIdx[:, :, None], (batch, xIdx.shape[1], yIdx.shape[1]))
        cols = np.broadcast_to(yIdx[:, None, :], rows.shape)
        # All outer products at once, scattered with accumulation of repeated blocks.
        products = np.einsum("bik,bjl->bijkl", x, y) * alpha
        np.add.at(out, (rows, cols), products.astype(out.dtype, copy=False))
        output_storage[0][0] = out

    def infer_shape(self, node: Apply, input_shapes: Sequence[Sequence[Any]]) -> list[Any]:
        return [input_shapes[0]]

    def grad(self, inputs: Sequence[Variable], grads: Sequence[Variable]) -> list[Any]:
        _o, x, y, xIdx, yIdx, alpha = inputs
        (go,) = grads
        # d/dx[b, i] = alpha * sum_j go[xIdx[b, i], yIdx[b, j]] @ y[b, j]: a gemv on go.T.
        gx_unit = sparse_block_gemv(tm.zeros_like(x), go.dimshuffle(1, 0, 3, 2), y, yIdx, xIdx)
        gy_unit = sparse_block_gemv(tm.zeros_like(y), go, x, xIdx, yIdx)
        galpha = tm.sum(gx_unit * x).astype(alpha.type.dtype)
        return [
            go,
            (gx_unit * alpha).astype(x.type.dtype),
            (gy_unit * alpha).astype(y.type.dtype),
            grad_undefined(self, 3, xIdx, "grad of xIdx makes no sense"),
            grad_undefined(self, 4, yIdx, "grad of yIdx makes no sense"),
            galpha,
        ]


sparse_block_gemv = SparseBlockGemv(False)
sparse_block_gemv_inplace = SparseBlockGemv(True)
sparse_block_outer = SparseBlockOuter(False)
sparse_block_outer_inplace = SparseBlockOuter(True)


def sparse_block_dot(W: Any, h: Any, inputIdx: Any, b: Any, outputIdx: Any) -> Variable:
    """``b[outputIdx[., j]] + sum_i h[., i] @ W[inputIdx[., i], outputIdx[., j]]``.

    ``W (iBlocks, oBlocks, iSize, oSize)``, ``h (batch, iWin, iSize)``,
    ``inputIdx (batch, iWin)``, the bias ``b (oBlocks, oSize)`` (added once per output
    block) and ``outputIdx (batch, oWin)``; returns ``(batch, oWin, oSize)``. A 2-D ``h``
    with 1-D indices is one example: the result is then ``(1, oWin, oSize)``, as in Theano.
    """
    W, h, b = as_tensor_variable(W), as_tensor_variable(h), as_tensor_variable(b)
    inputIdx, outputIdx = as_tensor_variable(inputIdx), as_tensor_variable(outputIdx)
    if inputIdx.type.ndim != h.type.ndim - 1 or outputIdx.type.ndim != inputIdx.type.ndim:
        raise ValueError(
            f"sparse_block_dot: inputIdx and outputIdx must have one dimension less than h "
            f"({h.type}), got {inputIdx.type} and {outputIdx.type}"
        )
    if h.type.ndim == 2:
        h = h.dimshuffle("x", 0, 1)
        inputIdx = inputIdx.dimshuffle("x", 0)
        outputIdx = outputIdx.dimshuffle("x", 0)
    return sparse_block_gemv(take(b, outputIdx, axis=0), W, h, inputIdx, outputIdx)
