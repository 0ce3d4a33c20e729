"""Convolutions built from the abstract ones (Theano 1.0's ``nnet.abstract_conv`` helpers).

- :func:`separable_conv2d` / :func:`separable_conv3d`: a depthwise convolution (one group
  per input channel) followed by a pointwise (1x1) one that mixes the channels.
- :func:`causal_conv1d`: a 1d convolution of ``(batch, channels, time)`` whose output at
  time ``t`` reads the input up to ``t`` only (left padding of ``(k-1)*dilation``).
- :func:`bilinear_upsampling` (integer or fractional ratios), :func:`frac_bilinear_upsampling`,
  :func:`bilinear_kernel_1D` / :func:`bilinear_kernel_2D`: Theano's bilinear upsampling of
  ``(batch, channels, rows, cols)`` images, as transposed convolutions with a pyramidal kernel
  and the borders repeated.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import gcd
from typing import Any

import numpy as np

from opgraph.configdefaults import config
from opgraph.graph.basic import Variable
from opgraph.tensor import math as tm
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.joining import concatenate
from opgraph.tensor.nnet.conv_abstract import AbstractConv2d, AbstractConv3d
from opgraph.tensor.nnet.conv_builders import conv2d, conv2d_grad_wrt_inputs, conv3d
from opgraph.tensor.nnet.conv_shapes import conv_error
from opgraph.tensor.structure import arange, zeros

__all__ = [
    "bilinear_kernel_1D",
    "bilinear_kernel_2D",
    "bilinear_upsampling",
    "causal_conv1d",
    "frac_bilinear_upsampling",
    "separable_conv2d",
    "separable_conv3d",
]


def _separable(
    op_class: type,
    pointwise: Any,
    nd: int,
    input: Any,
    depthwise_filters: Any,
    pointwise_filters: Any,
    num_channels: int,
    input_shape: Any,
    depthwise_filter_shape: Any,
    pointwise_filter_shape: Any,
    border_mode: Any,
    subsample: Sequence[int],
    filter_flip: bool,
    filter_dilation: Sequence[int],
) -> Variable:
    input = as_tensor_variable(input)
    depthwise_filters = as_tensor_variable(depthwise_filters)
    op = op_class(
        imshp=input_shape,
        kshp=depthwise_filter_shape,
        border_mode=border_mode,
        subsample=subsample,
        filter_flip=filter_flip,
        filter_dilation=filter_dilation,
        num_groups=num_channels,
    )
    if input_shape is None or depthwise_filter_shape is None:
        depthwise_shape = None
    else:
        depthwise_shape = op.infer_shape(None, [input_shape, depthwise_filter_shape])[0]
    depthwise = op(input, depthwise_filters)
    return pointwise(
        depthwise,
        pointwise_filters,
        input_shape=depthwise_shape,
        filter_shape=pointwise_filter_shape,
        border_mode="valid",
        subsample=(1,) * nd,
        filter_flip=filter_flip,
        filter_dilation=(1,) * nd,
        num_groups=1,
    )


def separable_conv2d(
    input: Any,
    depthwise_filters: Any,
    pointwise_filters: Any,
    num_channels: int,
    input_shape: Sequence[Any] | None = None,
    depthwise_filter_shape: Sequence[Any] | None = None,
    pointwise_filter_shape: Sequence[Any] | None = None,
    border_mode: Any = "valid",
    subsample: Sequence[int] = (1, 1),
    filter_flip: bool = True,
    filter_dilation: Sequence[int] = (1, 1),
) -> Variable:
    """Depthwise then pointwise 2d convolution.

    ``depthwise_filters (depth_out, 1, k_rows, k_cols)`` convolve each of the
    ``num_channels`` input channels separately (``num_groups=num_channels``; ``border_mode``,
    ``subsample`` and ``filter_dilation`` apply here); ``pointwise_filters (out, depth_out,
    1, 1)`` then mix the channels.
    """
    return _separable(
        AbstractConv2d, conv2d, 2, input, depthwise_filters,
        pointwise_filters, num_channels, input_shape, depthwise_filter_shape,
        pointwise_filter_shape, border_mode, subsample, filter_flip, filter_dilation,
    )  # fmt: skip


def separable_conv3d(
    input: Any,
    depthwise_filters: Any,
    pointwise_filters: Any,
    num_channels: int,
    input_shape: Sequence[Any] | None = None,
    depthwise_filter_shape: Sequence[Any] | None = None,
    pointwise_filter_shape: Sequence[Any] | None = None,
    border_mode: Any = "valid",
    subsample: Sequence[int] = (1, 1, 1),
    filter_flip: bool = True,
    filter_dilation: Sequence[int] = (1, 1, 1),
) -> Variable:
    """Depthwise then pointwise 3d convolution; see :func:`separable_conv2d`."""
    return _separable(
        AbstractConv3d, conv3d, 3, input, depthwise_filters,
        pointwise_filters, num_channels, input_shape, depthwise_filter_shape,
        pointwise_filter_shape, border_mode, subsample, filter_flip, filter_dilation,
    )  # fmt: skip


def causal_conv1d(
    input: Any,
    filters: Any,
    filter_shape: Sequence[int],
    input_shape: Sequence[Any] | None = None,
    subsample: int = 1,
    filter_flip: bool = True,
    filter_dilation: int = 1,
    num_groups: int = 1,
    unshared: bool = False,
) -> Variable:
    """Causal 1d convolution of ``input (batch, channels, time)`` with ``filters (out,
    channels / num_groups, width)`` (``filter_shape`` their shape): the input is padded with
    ``(width - 1) * filter_dilation`` zeros on the left only, so output ``t`` sees inputs up to
    ``t``. Returns ``(batch, out, time')``."""
    input, filters = as_tensor_variable(input), as_tensor_variable(filters)
    if input.type.ndim != 3:
        raise conv_error(
            ValueError,
            f"causal_conv1d: input should be 3D (batch, channels, time), got {input.type}",
        )
    if filters.type.ndim != 3:
        raise conv_error(
            ValueError,
            f"causal_conv1d: filters should be 3D (out, channels, width), got {filters.type}",
        )
    filter_shape = tuple(filter_shape)
    if len(filter_shape) != 3:
        raise conv_error(
            ValueError, f"causal_conv1d: filter_shape must have 3 elements, got {filter_shape}"
        )
    if input_shape is not None:
        if len(input_shape) != 3:
            raise conv_error(
                ValueError, f"causal_conv1d: input_shape must have 3 elements, got {input_shape}"
            )
        input_shape = (*tuple(input_shape), 1)
    left_pad = filter_dilation * (filter_shape[2] - 1)
    op = AbstractConv2d(
        imshp=input_shape,
        kshp=(*filter_shape, 1),
        border_mode=((left_pad, 0), 0),
        subsample=(subsample, 1),
        filter_flip=filter_flip,
        filter_dilation=(filter_dilation, 1),
        num_groups=num_groups,
        unshared=unshared,
    )
    out = op(input.dimshuffle(0, 1, 2, "x"), filters.dimshuffle(0, 1, 2, "x"))
    return out[:, :, :, 0]


def bilinear_kernel_1D(ratio: int, normalize: bool = True) -> Variable:
    """The 1d pyramidal kernel ``[1, 2, ..., ratio, ..., 2, 1]`` (divided by ``ratio`` if
    ``normalize``), of dtype floatX."""
    half = arange(1, ratio + 1, dtype=config.floatX)
    kern = concatenate([half, half[-2::-1]])
    if normalize:
        kern = kern / tm.cast(as_tensor_variable(ratio), config.floatX)
    return kern


def bilinear_kernel_2D(ratio: int | tuple[int, int], normalize: bool = True) -> Variable:
    """The 2d pyramidal kernel: the outer product of the 1d kernels of the row and column
    ratios (``ratio`` an int or a ``(rows, cols)`` pair)."""
    ratio_v, ratio_h = ratio if isinstance(ratio, tuple) else (ratio, ratio)
    hkern = bilinear_kernel_1D(ratio_h, normalize).dimshuffle("x", 0)
    vkern = bilinear_kernel_1D(ratio_v, normalize).dimshuffle(0, "x")
    return hkern * vkern


def _repeat_borders(up_input: Variable) -> Variable:
    """``(n, 1, rows, cols)`` with its first/last row and column repeated once."""
    rows = concatenate([up_input[:, :, :1, :], up_input, up_input[:, :, -1:, :]], axis=2)
    return concatenate([rows[:, :, :, :1], rows, rows[:, :, :, -1:]], axis=3)


def frac_bilinear_upsampling(input: Any, frac_ratio: tuple[Any, Any]) -> Variable:
    """Bilinear upsampling of ``input (batch, channels, rows, cols)`` by a fractional ratio.

    ``frac_ratio`` is ``(p, q)`` (upsample by ``p / q`` both ways) or ``((p1, q1), (p2,
    q2))`` per axis. The output has ``ceil(rows * p / q)``-like lengths (Theano's).
    """
    input = as_tensor_variable(input)
    if not isinstance(frac_ratio, tuple):
        raise conv_error(ValueError, f"frac_ratio must be a tuple, got {frac_ratio!r}")
    if isinstance(frac_ratio[0], tuple):
        reduced = [tuple(np.array(fr) // gcd(*fr)) for fr in frac_ratio]
        ratio = (int(reduced[0][0]), int(reduced[1][0]))
        subsample = (int(reduced[0][1]), int(reduced[1][1]))
    else:
        p, q = np.array(frac_ratio) // gcd(*frac_ratio)
        ratio, subsample = (int(p), int(p)), (int(q), int(q))
    row, col = input.shape[2], input.shape[3]
    up_input = input.reshape((-1, 1, row, col))
    concat_mat = _repeat_borders(up_input)
    double_pad = (2 * as_tensor_variable([row, col]) - 1) * np.array(ratio) + 1
    pad = double_pad // 2
    floatx = config.floatX
    kern = bilinear_kernel_2D(ratio)[np.newaxis, np.newaxis, :, :]
    kern = tm.cast(kern, floatx)
    k2, k3 = kern.shape[2], kern.shape[3]
    pad_kern = concatenate(
        [
            zeros((1, 1, pad[0], k3), dtype=floatx),
            kern,
            zeros((1, 1, double_pad[0] - pad[0], k3), dtype=floatx),
        ],
        axis=2,
    )
    rows = k2 + double_pad[0]
    pad_kern = concatenate(
        [
            zeros((1, 1, rows, pad[1]), dtype=floatx),
            pad_kern,
            zeros((1, 1, rows, double_pad[1] - pad[1]), dtype=floatx),
        ],
        axis=3,
    )
    # The image is the kernel here: dilating it by the ratio upsamples.
    upsamp = conv2d(
        pad_kern, concat_mat, border_mode="valid", filter_dilation=ratio, subsample=subsample
    )
    return upsamp.reshape((input.shape[0], input.shape[1], upsamp.shape[2], upsamp.shape[3]))


def bilinear_upsampling(
    input: Any,
    ratio: int | None = None,
    frac_ratio: Any = None,
    batch_size: int | None = None,
    num_input_channels: int | None = None,
    use_1D_kernel: bool = True,
) -> Variable:
    """Bilinear upsampling of ``input (batch, channels, rows, cols)`` by an integer ``ratio``
    (to ``(rows * ratio, cols * ratio)``) or a fractional ``frac_ratio`` (see
    :func:`frac_bilinear_upsampling`; needs ``use_1D_kernel=False``).

    ``batch_size``/``num_input_channels`` may give known lengths. With ``use_1D_kernel`` the
    rows and then the columns are upsampled with the 1d kernel (cheaper), otherwise once with
    the 2d kernel.
    """
    if ratio and frac_ratio:
        raise conv_error(ValueError, "bilinear_upsampling: can't use ratio and frac_ratio together")
    if not (ratio or frac_ratio):
        raise conv_error(ValueError, "bilinear_upsampling: no ratio (or frac_ratio) provided")
    if frac_ratio:
        if use_1D_kernel:
            raise conv_error(
                ValueError,
                "bilinear_upsampling: for fractional ratios the 1D kernel method is not "
                "implemented; pass use_1D_kernel=False",
            )
        return frac_bilinear_upsampling(input, frac_ratio=frac_ratio)
    assert ratio is not None
    input = as_tensor_variable(input)
    up_bs = (
        batch_size * num_input_channels
        if batch_size is not None and num_input_channels is not None
        else None
    )
    row, col = input.shape[2], input.shape[3]
    concat_mat = _repeat_borders(input.reshape((-1, 1, row, col)))
    pad = 2 * ratio - (ratio - 1) // 2 - 1
    if use_1D_kernel:
        kern = bilinear_kernel_1D(ratio=ratio, normalize=True)
        upsampled_row = conv2d_grad_wrt_inputs(
            concat_mat,
            kern[np.newaxis, np.newaxis, :, np.newaxis],
            input_shape=(up_bs, 1, row * ratio, col + 2),
            filter_shape=(1, 1, None, 1),
            border_mode=(pad, 0),
            subsample=(ratio, 1),
            filter_flip=True,
            filter_dilation=(1, 1),
        )
        upsampled = conv2d_grad_wrt_inputs(
            upsampled_row,
            kern[np.newaxis, np.newaxis, np.newaxis, :],
            input_shape=(up_bs, 1, row * ratio, col * ratio),
            filter_shape=(1, 1, 1, None),
            border_mode=(0, pad),
            subsample=(1, ratio),
            filter_flip=True,
            filter_dilation=(1, 1),
        )
    else:
        kern = bilinear_kernel_2D(ratio=ratio, normalize=True)
        upsampled = conv2d_grad_wrt_inputs(
            concat_mat,
            kern[np.newaxis, np.newaxis, :, :],
            input_shape=(up_bs, 1, row * ratio, col * ratio),
            filter_shape=(1, 1, None, None),
            border_mode=(pad, pad),
            subsample=(ratio, ratio),
            filter_flip=True,
            filter_dilation=(1, 1),
        )
    return upsampled.reshape((input.shape[0], input.shape[1], row * ratio, col * ratio))
