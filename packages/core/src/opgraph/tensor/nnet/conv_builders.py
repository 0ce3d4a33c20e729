"""Builders of the abstract convolution Ops (Theano 1.0's ``nnet.abstract_conv`` functions).

:func:`conv2d` and :func:`conv3d` build :class:`~opgraph.tensor.nnet.conv_abstract.AbstractConv2d`
/ ``AbstractConv3d`` nodes; :func:`conv2d_grad_wrt_inputs`, :func:`conv2d_grad_wrt_weights` and
the 3d ones their gradient Ops; :func:`conv2d_transpose` is the transposed convolution (the
gradient with respect to the input, with ``input_dilation`` as its stride) and
:func:`nnet_conv2d` Theano's ``tensor.nnet.conv2d`` (``conv2d`` plus the deprecated
``image_shape`` argument). Each checks its arguments before building anything: the tensors'
number of dimensions, the given ``input_shape``/``filter_shape`` against the variables' known
shapes, the channel counts and the filter size against the padded input, raising an error that
names the argument, what was expected and what was given, and the user's line.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from opgraph.graph.basic import Variable
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.nnet.conv_abstract import (
    IMG_AXES,
    AbstractConv2d,
    AbstractConv2d_gradInputs,
    AbstractConv2d_gradWeights,
    AbstractConv3d,
    AbstractConv3d_gradInputs,
    AbstractConv3d_gradWeights,
    shape_tuple,
)
from opgraph.tensor.nnet.conv_shapes import check_static_conv, const_int, conv_error, known_shape

__all__ = [
    "conv2d",
    "conv2d_grad_wrt_inputs",
    "conv2d_grad_wrt_weights",
    "conv2d_transpose",
    "conv3d",
    "conv3d_grad_wrt_inputs",
    "conv3d_grad_wrt_weights",
    "nnet_conv2d",
]


def _check_given_shape(
    fn: str, name: str, shape: Any, var: Variable, expected_len: int
) -> tuple[int | None, ...] | None:
    """``shape`` (a user's ``input_shape``/``filter_shape``) checked against ``var``."""
    if shape is None:
        return None
    try:
        given = shape_tuple(shape, name, None)
    except ValueError as exc:
        raise conv_error(ValueError, f"{fn}: {exc}") from None
    if len(given) != expected_len:
        raise conv_error(
            ValueError,
            f"{fn}: {name} must have {expected_len} elements (one per dimension of the "
            f"{expected_len}D variable), got {len(given)}: {tuple(shape)!r}",
        )
    known = known_shape(var)
    for i, (g, k) in enumerate(zip(given, known, strict=True)):
        if g is not None and k is not None and g != k:
            raise conv_error(
                ValueError,
                f"{fn}: {name} is {given}, but the variable's shape is known to be {known}: "
                f"dimension {i} is {k}, not {g}",
            )
    return given


def _check_ndim(fn: str, var: Variable, name: str, ndim: int, what: str) -> None:
    if var.type.ndim != ndim:
        hint = ""
        if var.type.ndim == ndim - 1:
            hint = " HINT: add a batch axis, e.g. x.dimshuffle('x', 0, 1, 2)."
        raise conv_error(
            TypeError,
            f"{fn}: {name} must be a {ndim}D tensor {what}, got {var.type} with "
            f"{var.type.ndim} dimensions.{hint}",
        )


def _conv_nd(
    fn: str,
    op_class: type,
    input: Any,
    filters: Any,
    input_shape: Any,
    filter_shape: Any,
    nd: int,
    unshared: bool,
    **params: Any,
) -> Variable:
    input, filters = as_tensor_variable(input), as_tensor_variable(filters)
    _check_ndim(fn, input, "input", 2 + nd, IMG_AXES[nd])
    klen = 2 + 2 * nd if unshared else 2 + nd
    kwhat = (
        "(filters, out_rows, out_cols, channels/num_groups, k_rows, k_cols)"
        if unshared
        else "(filters, channels/num_groups" + ", k" * nd + ")"
    )
    _check_ndim(fn, filters, "filters", klen, kwhat)
    imshp = _check_given_shape(fn, "input_shape", input_shape, input, 2 + nd)
    kshp = _check_given_shape(fn, "filter_shape", filter_shape, filters, klen)
    if unshared:
        params["unshared"] = True
    op = op_class(imshp=imshp, kshp=kshp, **params)
    merged_i = op.merged_shape(input, op.imshp)
    merged_k = op.merged_shape(filters, op.kshp)
    check_static_conv(
        fn, merged_i, merged_k, op.border_mode, op.subsample, op.filter_dilation,
        op.num_groups, op.unshared,
    )  # fmt: skip
    return op(input, filters)


def conv2d(
    input: Any,
    filters: Any,
    input_shape: Sequence[Any] | None = None,
    filter_shape: Sequence[Any] | None = None,
    border_mode: Any = "valid",
    subsample: Sequence[int] = (1, 1),
    filter_flip: bool = True,
    filter_dilation: Sequence[int] = (1, 1),
    num_groups: int = 1,
    unshared: bool = False,
) -> Variable:
    """2d convolution of ``input (batch, channels, rows, cols)`` with ``filters``.

    ``filters`` is ``(n_filters, channels / num_groups, k_rows, k_cols)`` (unshared:
    ``(n_filters, out_rows, out_cols, channels / num_groups, k_rows, k_cols)``).
    ``border_mode``: ``'valid'`` (no padding), ``'full'`` (pad ``k - 1``), ``'half'`` (pad
    ``k // 2``), an int, a pair of ints, or pairs of ``(before, after)`` ints. ``subsample``
    is the stride, ``filter_dilation`` the dilation; ``filter_flip=True`` convolves (flips the
    filters), ``False`` correlates. ``input_shape``/``filter_shape`` give known lengths
    (None where unknown); they are checked when the graph is built and at run time.
    Returns ``(batch, n_filters, out_rows, out_cols)``.
    """
    return _conv_nd(
        "conv2d", AbstractConv2d, input, filters, input_shape, filter_shape, 2, unshared,
        border_mode=border_mode, subsample=subsample, filter_flip=filter_flip,
        filter_dilation=filter_dilation, num_groups=num_groups,
    )  # fmt: skip


def conv3d(
    input: Any,
    filters: Any,
    input_shape: Sequence[Any] | None = None,
    filter_shape: Sequence[Any] | None = None,
    border_mode: Any = "valid",
    subsample: Sequence[int] = (1, 1, 1),
    filter_flip: bool = True,
    filter_dilation: Sequence[int] = (1, 1, 1),
    num_groups: int = 1,
) -> Variable:
    """3d convolution of ``input (batch, channels, depth, rows, cols)`` with ``filters
    (n_filters, channels / num_groups, k_depth, k_rows, k_cols)``; see :func:`conv2d`
    (``border_mode`` here is a string, an int or three ints)."""
    return _conv_nd(
        "conv3d", AbstractConv3d, input, filters, input_shape, filter_shape, 3, False,
        border_mode=border_mode, subsample=subsample, filter_flip=filter_flip,
        filter_dilation=filter_dilation, num_groups=num_groups,
    )  # fmt: skip


def _shape_arg(fn: str, name: str, shape: Any, nd: int, total: int) -> tuple[list[Any], list[Any]]:
    """A user's full shape (``total`` entries; the last ``nd`` may be symbolic): returns the
    numeric part for the Op (symbolic entries as None) and the spatial part for the node."""
    if isinstance(shape, Variable):
        if shape.type.ndim != 1:
            raise conv_error(TypeError, f"{fn}: {name} must be a tuple or a vector, got {shape}")
        return [None] * total, [shape[i] for i in range(total - nd, total)]
    shape = list(shape)
    if len(shape) != total:
        raise conv_error(
            ValueError, f"{fn}: {name} must have {total} elements, got {len(shape)}: {shape!r}"
        )
    numeric: list[Any] = []
    for i, s in enumerate(shape):
        c = const_int(s)
        if s is None or c is not None:
            numeric.append(c)
        elif isinstance(s, Variable) and i >= total - nd:
            numeric.append(None)
        else:
            raise conv_error(
                ValueError,
                f"{fn}: {name}[{i}] must be a constant int or None"
                + (" (or a symbolic scalar)" if i >= total - nd else "")
                + f", got {s!r}",
            )
    spatial = shape[total - nd :]
    if any(s is None for s in spatial):
        raise conv_error(
            ValueError, f"{fn}: the spatial lengths of {name} must be given, got {tuple(shape)}"
        )
    return numeric, spatial


def _grad_wrt_inputs(
    fn: str, op_class: type, output_grad: Any, filters: Any, input_shape: Any,
    filter_shape: Any, nd: int, **params: Any,
) -> Variable:  # fmt: skip
    filters, output_grad = as_tensor_variable(filters), as_tensor_variable(output_grad)
    unshared = params.get("unshared", False)
    klen = 2 + 2 * nd if unshared else 2 + nd
    _check_ndim(fn, output_grad, "output_grad", 2 + nd, "(batch, filters" + ", out" * nd + ")")
    _check_ndim(fn, filters, "filters", klen, "(filters, channels/num_groups, ...)")
    numeric, spatial = _shape_arg(fn, "input_shape", input_shape, nd, 2 + nd)
    kshp = _check_given_shape(fn, "filter_shape", filter_shape, filters, klen)
    op = op_class(imshp=numeric, kshp=kshp, **params)
    return op(filters, output_grad, spatial)


def _grad_wrt_weights(
    fn: str, op_class: type, input: Any, output_grad: Any, filter_shape: Any,
    input_shape: Any, nd: int, **params: Any,
) -> Variable:  # fmt: skip
    input, output_grad = as_tensor_variable(input), as_tensor_variable(output_grad)
    unshared = params.get("unshared", False)
    klen = 2 + 2 * nd if unshared else 2 + nd
    _check_ndim(fn, input, "input", 2 + nd, IMG_AXES[nd])
    _check_ndim(fn, output_grad, "output_grad", 2 + nd, "(batch, filters" + ", out" * nd + ")")
    numeric, spatial = _shape_arg(fn, "filter_shape", filter_shape, nd, klen)
    imshp = _check_given_shape(fn, "input_shape", input_shape, input, 2 + nd)
    op = op_class(imshp=imshp, kshp=numeric, **params)
    return op(input, output_grad, spatial)


def conv2d_grad_wrt_inputs(
    output_grad: Any,
    filters: Any,
    input_shape: Sequence[Any],
    filter_shape: Sequence[Any] | None = None,
    border_mode: Any = "valid",
    subsample: Sequence[int] = (1, 1),
    filter_flip: bool = True,
    filter_dilation: Sequence[int] = (1, 1),
    num_groups: int = 1,
    unshared: bool = False,
) -> Variable:
    """The gradient of :func:`conv2d` with respect to its input (a transposed convolution).

    ``input_shape`` is the input's full shape: its first two entries constants or None, its
    spatial lengths ints or symbolic scalars. The other arguments are :func:`conv2d`'s.
    """
    return _grad_wrt_inputs(
        "conv2d_grad_wrt_inputs", AbstractConv2d_gradInputs, output_grad, filters, input_shape,
        filter_shape, 2, border_mode=border_mode, subsample=subsample, filter_flip=filter_flip,
        filter_dilation=filter_dilation, num_groups=num_groups, unshared=unshared,
    )  # fmt: skip


def conv3d_grad_wrt_inputs(
    output_grad: Any,
    filters: Any,
    input_shape: Sequence[Any],
    filter_shape: Sequence[Any] | None = None,
    border_mode: Any = "valid",
    subsample: Sequence[int] = (1, 1, 1),
    filter_flip: bool = True,
    filter_dilation: Sequence[int] = (1, 1, 1),
    num_groups: int = 1,
) -> Variable:
    """The gradient of :func:`conv3d` with respect to its input; see
    :func:`conv2d_grad_wrt_inputs`."""
    return _grad_wrt_inputs(
        "conv3d_grad_wrt_inputs", AbstractConv3d_gradInputs, output_grad, filters, input_shape,
        filter_shape, 3, border_mode=border_mode, subsample=subsample, filter_flip=filter_flip,
        filter_dilation=filter_dilation, num_groups=num_groups,
    )  # fmt: skip


def conv2d_grad_wrt_weights(
    input: Any,
    output_grad: Any,
    filter_shape: Sequence[Any],
    input_shape: Sequence[Any] | None = None,
    border_mode: Any = "valid",
    subsample: Sequence[int] = (1, 1),
    filter_flip: bool = True,
    filter_dilation: Sequence[int] = (1, 1),
    num_groups: int = 1,
    unshared: bool = False,
) -> Variable:
    """The gradient of :func:`conv2d` with respect to its filters.

    ``filter_shape`` is the filters' full shape: its leading entries constants or None, its
    spatial lengths ints or symbolic scalars. The other arguments are :func:`conv2d`'s.
    """
    return _grad_wrt_weights(
        "conv2d_grad_wrt_weights", AbstractConv2d_gradWeights, input, output_grad, filter_shape,
        input_shape, 2, border_mode=border_mode, subsample=subsample, filter_flip=filter_flip,
        filter_dilation=filter_dilation, num_groups=num_groups, unshared=unshared,
    )  # fmt: skip


def conv3d_grad_wrt_weights(
    input: Any,
    output_grad: Any,
    filter_shape: Sequence[Any],
    input_shape: Sequence[Any] | None = None,
    border_mode: Any = "valid",
    subsample: Sequence[int] = (1, 1, 1),
    filter_flip: bool = True,
    filter_dilation: Sequence[int] = (1, 1, 1),
    num_groups: int = 1,
) -> Variable:
    """The gradient of :func:`conv3d` with respect to its filters; see
    :func:`conv2d_grad_wrt_weights`."""
    return _grad_wrt_weights(
        "conv3d_grad_wrt_weights", AbstractConv3d_gradWeights, input, output_grad, filter_shape,
        input_shape, 3, border_mode=border_mode, subsample=subsample, filter_flip=filter_flip,
        filter_dilation=filter_dilation, num_groups=num_groups,
    )  # fmt: skip


def conv2d_transpose(
    input: Any,
    filters: Any,
    output_shape: Sequence[Any],
    filter_shape: Sequence[Any] | None = None,
    border_mode: Any = "valid",
    input_dilation: Sequence[int] = (1, 1),
    filter_flip: bool = True,
    filter_dilation: Sequence[int] = (1, 1),
    num_groups: int = 1,
    unshared: bool = False,
) -> Variable:
    """Transposed 2d convolution (Theano's ``nnet.conv2d_transpose``, a "deconvolution").

    The gradient of :func:`conv2d` with respect to its input, applied to ``input``: the result
    has ``output_shape`` (its spatial lengths required, ints or symbolic scalars), and
    ``input_dilation`` is the stride of the convolution being transposed. ``filters`` are
    ``(input channels, output channels / num_groups, k_rows, k_cols)``.
    """
    return _grad_wrt_inputs(
        "conv2d_transpose", AbstractConv2d_gradInputs, input, filters, output_shape,
        filter_shape, 2, border_mode=border_mode, subsample=input_dilation,
        filter_flip=filter_flip, filter_dilation=filter_dilation, num_groups=num_groups,
        unshared=unshared,
    )  # fmt: skip


def nnet_conv2d(
    input: Any,
    filters: Any,
    input_shape: Sequence[Any] | None = None,
    filter_shape: Sequence[Any] | None = None,
    border_mode: Any = "valid",
    subsample: Sequence[int] = (1, 1),
    filter_flip: bool = True,
    image_shape: Sequence[Any] | None = None,
    filter_dilation: Sequence[int] = (1, 1),
    num_groups: int = 1,
    unshared: bool = False,
    **kwargs: Any,
) -> Variable:
    """Theano's ``tensor.nnet.conv2d``: :func:`conv2d` plus the deprecated ``image_shape``.

    ``image_shape`` is the old name of ``input_shape`` (a DeprecationWarning; giving both is a
    ValueError). Other keyword arguments of the legacy interface are ignored with a warning,
    except ``imshp_logical``/``kshp_logical`` (a ValueError, as in Theano).
    """
    if "imshp_logical" in kwargs or "kshp_logical" in kwargs:
        raise conv_error(
            ValueError,
            "conv2d: keyword arguments 'imshp_logical' and 'kshp_logical' are not supported "
            "anymore (and have not been a reliable way to perform upsampling). That feature is "
            "still available through opgraph.tensor.nnet.conv.conv2d().",
        )
    if kwargs:
        warnings.warn(
            f"conv2d: {sorted(kwargs)} are deprecated in the conv2d interface and are ignored",
            stacklevel=2,
        )
    if image_shape is not None:
        warnings.warn(
            "The `image_shape` keyword argument to `tensor.nnet.conv2d` is deprecated, it has "
            "been renamed to `input_shape`.",
            DeprecationWarning,
            stacklevel=2,
        )
        if input_shape is not None:
            raise conv_error(
                ValueError, "conv2d: input_shape and image_shape should not be given together"
            )
        input_shape = image_shape
    return conv2d(
        input, filters, input_shape, filter_shape, border_mode, subsample, filter_flip,
        filter_dilation, num_groups, unshared,
    )  # fmt: skip
