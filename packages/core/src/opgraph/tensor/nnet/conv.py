"""Theano's legacy ``tensor.nnet.conv``: ``conv2d`` and ``ConvOp``, routed to ``AbstractConv2d``.

``conv2d(input, filters, image_shape=None, filter_shape=None, border_mode='valid',
subsample=(1, 1))`` is the old interface of the 2d convolution (a true convolution: the
filters are flipped), with ``'valid'`` or ``'full'`` borders only. It builds the same
:class:`~opgraph.tensor.nnet.conv_abstract.AbstractConv2d` node as ``nnet.conv2d``, so the
same rewrites and kernels run it. :class:`ConvOp` is that Op with ConvOp's constructor
(``imshp`` without the batch, ``kshp`` the filters' rows and columns, ``dx``/``dy`` the
strides); its tuning arguments (``unroll_*``, ``version``, ``verbose``, ...) are accepted and
unused.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from opgraph.graph.basic import Variable
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.nnet.conv_abstract import AbstractConv2d
from opgraph.tensor.nnet.conv_builders import conv2d as _abstract_conv2d
from opgraph.tensor.nnet.conv_shapes import const_int, conv_error

__all__ = ["ConvOp", "conv2d"]

_LOGICAL = ("imshp_logical", "kshp_logical")


def _legacy_border(fn: str, border_mode: Any) -> str:
    if border_mode not in ("valid", "full"):
        raise conv_error(
            ValueError,
            f"{fn}: border_mode must be 'valid' or 'full' in the legacy interface, got "
            f"{border_mode!r}. HINT: nnet.conv2d accepts 'half', ints and pairs too.",
        )
    return border_mode


def _constant_shape(fn: str, name: str, shape: Any) -> list[int | None] | None:
    """A legacy shape argument: None or constants (ints or integer constants) and None."""
    if shape is None:
        return None
    out: list[int | None] = []
    for s in shape:
        c = const_int(s) if s is not None else None
        if s is not None and c is None:
            raise conv_error(
                ValueError,
                f"{fn}: the convolution needs constant shape information; got {s!r} in {name}",
            )
        out.append(c)
    return out


class ConvOp(AbstractConv2d):
    """Theano's ``ConvOp`` constructor on :class:`AbstractConv2d` (filters flipped).

    ``imshp`` is ``(channels, rows, cols)`` (or ``(rows, cols)``: one channel), ``kshp``
    ``(k_rows, k_cols)``, ``nkern`` the number of filters, ``bsize`` the batch size,
    ``dx``/``dy`` the strides, ``output_mode`` ``'valid'`` or ``'full'``.
    ``imshp_logical``/``kshp_logical`` (logical upsampling) are not supported.
    """

    def __init__(
        self,
        imshp: Sequence[Any] | None = None,
        kshp: Sequence[Any] | None = None,
        nkern: int | None = None,
        bsize: int | None = None,
        dx: int = 1,
        dy: int = 1,
        output_mode: str = "valid",
        unroll_batch: int | None = None,
        unroll_kern: int | None = None,
        unroll_patch: bool | None = None,
        imshp_logical: Sequence[int] | None = None,
        kshp_logical: Sequence[int] | None = None,
        kshp_logical_top_aligned: bool = True,
        verbose: int = 0,
        version: Any = -1,
        direction_hint: str = "forward",
        openmp: bool | None = None,
    ) -> None:
        if imshp_logical is not None or kshp_logical is not None:
            raise ValueError(
                "ConvOp: imshp_logical and kshp_logical (logical upsampling) are not supported"
            )
        imshp = (None, None, None) if imshp is None else tuple(imshp)
        kshp = (None, None) if kshp is None else tuple(kshp)
        if len(imshp) == 2:
            imshp = (1, *imshp)
        if len(imshp) != 3:
            raise ValueError(f"len(imshp) must be 2 or 3, got {len(imshp)}")
        if len(kshp) != 2:
            raise ValueError(f"len(kshp) must be 2, got {len(kshp)}")
        dx, dy = 1 if dx is None else dx, 1 if dy is None else dy
        if int(dx) != dx or int(dy) != dy:
            raise TypeError(f"ConvOp: dx and dy must be ints, got {dx!r} and {dy!r}")
        super().__init__(
            imshp=(bsize, *imshp),
            kshp=(nkern, imshp[0], *kshp),
            border_mode=_legacy_border("ConvOp", output_mode),
            subsample=(int(dx), int(dy)),
            filter_flip=True,
        )


def conv2d(
    input: Any,
    filters: Any,
    image_shape: Sequence[Any] | None = None,
    filter_shape: Sequence[Any] | None = None,
    border_mode: str = "valid",
    subsample: Sequence[int] = (1, 1),
    **kargs: Any,
) -> Variable:
    """The legacy 2d convolution (Theano's ``nnet.conv.conv2d``), deprecated for ``nnet.conv2d``.

    ``input (batch, channels, rows, cols)``, ``filters (n_filters, channels, k_rows, k_cols)``;
    ``image_shape``/``filter_shape`` their shapes (constants and None); ``border_mode``
    ``'valid'`` or ``'full'``; ``subsample`` the strides. ConvOp's tuning keywords are accepted
    and unused.
    """
    warnings.warn(
        "opgraph.tensor.nnet.conv.conv2d is deprecated. Use opgraph.tensor.nnet.conv2d instead.",
        DeprecationWarning,
        stacklevel=2,
    )
    fn = "nnet.conv.conv2d"
    if any(kargs.get(k) is not None for k in _LOGICAL):
        raise conv_error(
            ValueError,
            f"{fn}: imshp_logical and kshp_logical (logical upsampling) are not supported",
        )
    image_shape = _constant_shape(fn, "image_shape", image_shape)
    filter_shape = _constant_shape(fn, "filter_shape", filter_shape)
    if image_shape and filter_shape:
        ci, cf = image_shape[1], filter_shape[1]
        if ci is not None and cf is not None and ci != cf:
            raise conv_error(
                ValueError,
                f"{fn}: image_shape {tuple(image_shape)} has {ci} channels but filter_shape "
                f"{tuple(filter_shape)} expects {cf}",
            )
    return _abstract_conv2d(
        as_tensor_variable(input),
        as_tensor_variable(filters),
        input_shape=image_shape,
        filter_shape=filter_shape,
        border_mode=_legacy_border(fn, border_mode),
        subsample=tuple(subsample),
        filter_flip=True,
    )
