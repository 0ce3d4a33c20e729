"""Theano's ``tensor.nnet.conv3d2d``: 3d convolution in the ``(batch, time, channels, rows,
cols)`` layout, and the diagonal-subtensor Ops Theano built it from.

``conv3d(signals, filters, signals_shape=None, filters_shape=None, border_mode='valid')``
convolves ``signals (batch, time, in_channels, rows, cols)`` with ``filters (out_channels,
k_time, in_channels, k_rows, k_cols)`` (a true convolution along the three axes) and returns
``(batch, out_time, out_channels, out_rows, out_cols)``. ``border_mode`` is ``'valid'``,
``'full'`` or ``'half'``, or one per axis ``(time, rows, cols)`` (rows and cols alike, as in
Theano). Theano computed it as 2d convolutions summed along diagonals; here it is one
:class:`~opgraph.tensor.nnet.conv_abstract.AbstractConv3d` node (transposed in and out), so
the 3d rewrites and kernels run it.

:func:`get_diagonal_subtensor_view`, :class:`DiagonalSubtensor` and
:class:`IncDiagonalSubtensor` are kept for code that uses them directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.null_type import disconnected_type
from opgraph.graph.op import Op
from opgraph.tensor import math as tm
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.nnet.conv_builders import conv3d as _abstract_conv3d
from opgraph.tensor.nnet.conv_shapes import const_int, conv_error, known_shape

__all__ = [
    "DiagonalSubtensor",
    "IncDiagonalSubtensor",
    "conv3d",
    "diagonal_subtensor",
    "get_diagonal_subtensor_view",
    "inc_diagonal_subtensor",
]


def get_diagonal_subtensor_view(x: np.ndarray, i0: int, i1: int) -> np.ndarray:
    """A view of ``x`` whose axis ``i0`` runs along the anti-diagonals of axes ``(i0, i1)``.

    ``view[..., a, ..., b, ...] = x[..., a + x.shape[i1] - 1 - b, ..., b, ...]``: element
    ``a`` of axis ``i0`` is taken ``x.shape[i1] - 1 - b`` further along for position ``b`` of
    axis ``i1``. Needs ``x.shape[i0] >= x.shape[i1]``.
    """
    i0, i1 = int(i0), int(i1)
    if x.shape[i0] < x.shape[i1]:
        raise ValueError(
            f"get_diagonal_subtensor_view: axis {i0} (length {x.shape[i0]}) must be at least as "
            f"long as axis {i1} (length {x.shape[i1]})"
        )
    idx = [slice(None)] * x.ndim
    idx[i0] = slice(x.shape[i1] - 1, None)
    view = x[tuple(idx)]
    if x.shape[i1] == 1:
        return view
    strides = list(view.strides)
    strides[i1] -= strides[i0]
    return as_strided(view, shape=view.shape, strides=strides, writeable=view.flags.writeable)


class DiagonalSubtensor(Op):
    """``get_diagonal_subtensor_view(x, i0, i1)`` as an Op (a copy; a view if ``inplace``)."""

    __props__ = ("inplace",)

    def __init__(self, inplace: bool = False) -> None:
        self.inplace = inplace
        if inplace:
            self.view_map = {0: [0]}

    def __str__(self) -> str:
        return f"{type(self).__name__}{{inplace}}" if self.inplace else type(self).__name__

    def make_node(self, x: Any, i0: Any, i1: Any) -> Apply:
        x = as_tensor_variable(x)
        return Apply(self, [x, as_tensor_variable(i0), as_tensor_variable(i1)], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: Any) -> None:
        view = get_diagonal_subtensor_view(*inputs)
        output_storage[0][0] = view if self.inplace else view.copy()

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        x, i0, i1 = inputs
        gx = inc_diagonal_subtensor(tm.zeros_like(x), i0, i1, output_grads[0])
        return [gx, disconnected_type(), disconnected_type()]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True], [False], [False]]


class IncDiagonalSubtensor(Op):
    """``x`` with ``amt`` added to its diagonal view (see :func:`get_diagonal_subtensor_view`)."""

    __props__ = ("inplace",)

    def __init__(self, inplace: bool = False) -> None:
        self.inplace = inplace
        if inplace:
            self.destroy_map = {0: [0]}

    def __str__(self) -> str:
        return f"{type(self).__name__}{{inplace}}" if self.inplace else type(self).__name__

    def make_node(self, x: Any, i0: Any, i1: Any, amt: Any) -> Apply:
        x = as_tensor_variable(x)
        inputs = [x, as_tensor_variable(i0), as_tensor_variable(i1), as_tensor_variable(amt)]
        return Apply(self, inputs, [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: Any) -> None:
        x, i0, i1, amt = inputs
        if not self.inplace:
            x = x.copy()
        view = get_diagonal_subtensor_view(x, i0, i1)
        view += amt  # no two elements of the view share memory: an exact addition
        output_storage[0][0] = x

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        _x, i0, i1, _amt = inputs
        (gy,) = output_grads
        return [gy, disconnected_type(), disconnected_type(), diagonal_subtensor(gy, i0, i1)]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True], [False], [False], [True]]


diagonal_subtensor = DiagonalSubtensor(False)
inc_diagonal_subtensor = IncDiagonalSubtensor(False)


def _pad(mode: str, k: int | None, axis: str) -> int | None:
    if mode == "valid":
        return 0
    if mode not in ("full", "half"):
        raise conv_error(
            ValueError, f"conv3d2d.conv3d: invalid border mode {mode!r} for the {axis} axis"
        )
    if k is None:
        return None
    return k - 1 if mode == "full" else k // 2


def conv3d(
    signals: Any,
    filters: Any,
    signals_shape: Sequence[Any] | None = None,
    filters_shape: Sequence[Any] | None = None,
    border_mode: Any = "valid",
) -> Variable:
    """3d convolution of ``signals (batch, time, channels, rows, cols)`` with ``filters
    (out_channels, k_time, channels, k_rows, k_cols)``; see the module docstring."""
    fn = "conv3d2d.conv3d"
    signals, filters = as_tensor_variable(signals), as_tensor_variable(filters)
    for name, var in (("signals", signals), ("filters", filters)):
        if var.type.ndim != 5:
            raise conv_error(
                TypeError,
                f"{fn}: {name} must be a 5D tensor (batch/out_channels, time, channels, rows, "
                f"cols), got {var.type}",
            )
    if isinstance(border_mode, str):
        border_mode = (border_mode,) * 3
    border_mode = tuple(border_mode)
    if len(border_mode) != 3:
        raise conv_error(ValueError, f"{fn}: border_mode must be a string or 3 strings")
    if border_mode[1] != border_mode[2]:
        raise conv_error(
            ValueError, f"{fn}: height and width border modes must match, got {border_mode}"
        )
    # (N, T, C, H, W) -> (N, C, T, H, W)
    order = (0, 2, 1, 3, 4)
    sig_shape = None if signals_shape is None else tuple(signals_shape[i] for i in order)
    fil_shape = None if filters_shape is None else tuple(filters_shape[i] for i in order)
    if len(set(border_mode)) == 1:
        mode: Any = border_mode[0]
        if mode not in ("valid", "full", "half"):
            raise conv_error(ValueError, f"{fn}: invalid border mode {mode!r}")
    else:
        known = list(known_shape(filters))
        if filters_shape is not None:
            known = [
                const_int(g) if g is not None else k
                for g, k in zip(filters_shape, known, strict=True)
            ]
        ks = (known[1], known[3], known[4])
        pads = [
            _pad(m, k, a) for m, k, a in zip(border_mode, ks, ("time", "rows", "cols"), strict=True)
        ]
        if any(p is None for p in pads):
            raise conv_error(
                ValueError,
                f"{fn}: border_mode {border_mode} mixes modes; give filters_shape so that the "
                "padding of each axis is known",
            )
        mode = tuple(pads)
    out = _abstract_conv3d(
        signals.dimshuffle(*order),
        filters.dimshuffle(*order),
        input_shape=sig_shape,
        filter_shape=fil_shape,
        border_mode=mode,
        filter_flip=True,
    )
    return out.dimshuffle(*order)
