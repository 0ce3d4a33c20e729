"""Theano's ``tensor.signal.conv``: 2d convolution of images without channel axes.

``conv2d(input, filters, image_shape=None, filter_shape=None, border_mode='valid',
subsample=(1, 1))`` convolves ``input`` (one image ``(rows, cols)`` or a stack ``(n_images,
rows, cols)``) with ``filters`` (one ``(k_rows, k_cols)`` or a stack ``(n_filters, k_rows,
k_cols)``): a true convolution (the filters are flipped), with ``'valid'`` or ``'full'``
borders. The result is ``(n_images, n_filters, out_rows, out_cols)``, without the axes of a
single image or filter: ``(n_filters, ...)`` or ``(n_images, ...)`` when one of them is 2-d,
``(out_rows, out_cols)`` when both are. It runs as an
:class:`~opgraph.tensor.nnet.conv_abstract.AbstractConv2d` node on 4-d reshapes of both.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from opgraph.configdefaults import config
from opgraph.graph.basic import Variable
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.joining import concatenate
from opgraph.tensor.nnet.conv import _constant_shape, _legacy_border
from opgraph.tensor.nnet.conv_builders import conv2d as _abstract_conv2d
from opgraph.tensor.nnet.conv_shapes import conv_error
from opgraph.tensor.shape import reshape

__all__ = ["conv2d"]


def _as_4d(x: Variable, leading: Any) -> Variable:
    """``x`` (2-d or 3-d) reshaped to ``(leading, 1, rows, cols)``."""
    shape = concatenate([as_tensor_variable([leading, 1]).astype("int64"), x.shape[-2:]])
    return reshape(x, shape, ndim=4)


def conv2d(
    input: Any,
    filters: Any,
    image_shape: Sequence[Any] | None = None,
    filter_shape: Sequence[Any] | None = None,
    border_mode: str = "valid",
    subsample: Sequence[int] = (1, 1),
    **kargs: Any,
) -> Variable:
    """Convolve 2-d images (``([n_images,] rows, cols)``) with 2-d filters
    (``([n_filters,] k_rows, k_cols)``); see the module docstring for the result's shape.

    ``image_shape``/``filter_shape`` are ``([n,] rows, cols)`` constants (used only when both
    are given). Other keywords are the legacy ConvOp tuning ones (accepted, unused).
    """
    fn = "signal.conv.conv2d"
    input, filters = as_tensor_variable(input), as_tensor_variable(filters)
    if input.type.ndim not in (2, 3):
        raise conv_error(
            TypeError,
            f"{fn}: input must be a 2D image (rows, cols) or a 3D stack (n_images, rows, cols), "
            f"got {input.type}",
        )
    if filters.type.ndim not in (2, 3):
        raise conv_error(
            TypeError,
            f"{fn}: filters must be 2D (k_rows, k_cols) or 3D (n_filters, k_rows, k_cols), got "
            f"{filters.type}",
        )
    if any(kargs.get(k) is not None for k in ("imshp_logical", "kshp_logical")):
        raise conv_error(ValueError, f"{fn}: imshp_logical and kshp_logical are not supported")
    input_shape4 = filter_shape4 = None
    image_shape = _constant_shape(fn, "image_shape", image_shape)
    filter_shape = _constant_shape(fn, "filter_shape", filter_shape)
    if image_shape and filter_shape:
        for name, shp, var in (
            ("image_shape", image_shape, input),
            ("filter_shape", filter_shape, filters),
        ):
            if len(shp) != var.type.ndim:
                raise conv_error(
                    ValueError,
                    f"{fn}: {name} must have {var.type.ndim} elements for a {var.type.ndim}D "
                    f"tensor, got {tuple(shp)}",
                )
        bsize = image_shape[0] if input.type.ndim == 3 else 1
        nkern = filter_shape[0] if filters.type.ndim == 3 else 1
        input_shape4 = (bsize, 1, *image_shape[-2:])
        filter_shape4 = (nkern, 1, *filter_shape[-2:])
    sym_bsize = input.shape[0] if input.type.ndim == 3 else 1
    sym_nkern = filters.shape[0] if filters.type.ndim == 3 else 1
    output = _abstract_conv2d(
        _as_4d(input, sym_bsize),
        _as_4d(filters, sym_nkern),
        input_shape=input_shape4,
        filter_shape=filter_shape4,
        border_mode=_legacy_border(fn, border_mode),
        subsample=tuple(subsample),
        filter_flip=True,
    )
    if input.type.ndim == 2 and filters.type.ndim == 2:
        if config.warn__signal_conv2d_interface:
            warnings.warn(
                "opgraph.tensor.signal.conv2d() now outputs a 2d tensor when both inputs are 2d. "
                "To disable this warning, set the flag warn__signal_conv2d_interface to False",
                stacklevel=2,
            )
        return output[0, 0]
    if input.type.ndim == 2:
        return output[0]
    if filters.type.ndim == 2:
        return output[:, 0]
    return output
