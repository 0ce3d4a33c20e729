"""The abstract convolution Ops and their builders (Theano 1.0's ``nnet.abstract_conv``).

``AbstractConv2d(imshp, kshp, border_mode, subsample, filter_flip, filter_dilation,
num_groups, unshared)(img, kern)`` is the 2d convolution of ``img (batch, channels, rows,
cols)`` with ``kern (filters, channels / num_groups, k_rows, k_cols)`` (unshared: ``(filters,
out_rows, out_cols, channels / num_groups, k_rows, k_cols)``). With ``filter_flip=True``
(the default) it is a true convolution (the kernel is flipped along its spatial axes), with
``False`` a cross-correlation. :class:`AbstractConv2d_gradWeights` and
:class:`AbstractConv2d_gradInputs` are its gradients; the 3d Ops are the same with three
spatial axes (no unshared filters). "Abstract" means that the rewrites of opgraph-optimizers
choose the implementation (``CorrMM``, ``Corr3dMM``, a backend kernel); their own
``perform`` computes with :mod:`opgraph.tensor.nnet.conv_numpy`.

:mod:`opgraph.tensor.nnet.conv_builders` (``conv2d``, ``conv3d``, the ``*_grad_wrt_*``
functions) builds these Ops. Shapes given as ``imshp``/``kshp`` are checked against what the
graph knows when it is built (a ValueError naming the argument and the user's line) and against
the values at run time (:class:`~opgraph.tensor.nnet.conv_shapes.ConvShapeCheck`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.null_type import disconnected_type
from opgraph.graph.op import Op
from opgraph.scalar.type import float_dtypes
from opgraph.tensor import math as tm
from opgraph.tensor.basic import as_tensor_variable, patternbroadcast
from opgraph.tensor.nnet.conv_numpy import corr_forward, corr_grad_inputs, corr_grad_weights
from opgraph.tensor.nnet.conv_shapes import (
    ConvShapeCheck,
    border_mode_to_pad,
    check_static_conv,
    const_int,
    conv_error,
    get_conv_output_shape,
    known_shape,
)
from opgraph.tensor.type import TensorType

__all__ = [
    "AbstractConv",
    "AbstractConv2d",
    "AbstractConv2d_gradInputs",
    "AbstractConv2d_gradWeights",
    "AbstractConv3d",
    "AbstractConv3d_gradInputs",
    "AbstractConv3d_gradWeights",
    "AbstractConv_gradInputs",
    "AbstractConv_gradWeights",
    "BaseAbstractConv",
]

IMG_AXES = {2: "(batch, channels, rows, cols)", 3: "(batch, channels, depth, rows, cols)"}
_INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def _normalize_border_mode(border_mode: Any, convdim: int) -> Any:
    """Theano's abstract normalization: a string, or per axis an int or a ``(before, after)``
    pair (pairs only in 2d; equal pairs become ints; all zeros become ``'valid'``)."""
    if isinstance(border_mode, int | np.integer) and not isinstance(border_mode, bool):
        if border_mode < 0:
            raise ValueError(
                f"invalid border_mode {border_mode}, which must be a non-negative integer"
            )
        border_mode = (int(border_mode),) * convdim
    elif isinstance(border_mode, tuple):
        if len(border_mode) != convdim:
            raise ValueError(
                f"invalid border_mode {border_mode}, which must be a tuple of length {convdim}"
            )
        new: tuple[Any, ...] = ()
        for mode in border_mode:
            is_int = isinstance(mode, int | np.integer) and not isinstance(mode, bool)
            is_pair = (
                isinstance(mode, tuple)
                and len(mode) == 2
                and all(isinstance(m, int | np.integer) for m in mode)
                and min(mode) >= 0
            )
            if not ((is_int and mode >= 0) or is_pair):
                raise ValueError(
                    f"invalid border mode {border_mode}. The tuple can only contain integers "
                    "or pairs of integers"
                )
            if is_pair:
                if convdim != 2:
                    raise ValueError(
                        f"invalid border_mode {border_mode}: asymmetric padding (pairs) is only "
                        f"implemented for 2d, not {convdim}d"
                    )
                mode = int(mode[0]) if mode[0] == mode[1] else (int(mode[0]), int(mode[1]))
            new += (int(mode) if not isinstance(mode, tuple) else mode,)
        border_mode = new
    elif border_mode not in ("valid", "full", "half"):
        raise ValueError(
            f'invalid border_mode {border_mode!r}, which must be either "valid", "full", "half", '
            f"an integer or a tuple of length {convdim}"
        )
    if isinstance(border_mode, tuple) and all(m in (0, (0, 0)) for m in border_mode):
        border_mode = "valid"
    return border_mode


def shape_tuple(shape: Any, name: str, length: int | None) -> tuple[int | None, ...]:
    """``imshp``/``kshp``: None or a sequence of ints / integer constants / None."""
    if shape is None or (isinstance(shape, tuple | list | str) and len(shape) == 0):
        return (None,) * length if length is not None else ()
    if isinstance(shape, Variable):
        raise ValueError(
            f"{name} should be None or a tuple of constant int values, got the variable {shape}"
        )
    out = []
    for s in shape:
        if s is None:
            out.append(None)
            continue
        c = const_int(s)
        if c is None:
            raise ValueError(
                f"{name} should be None or a tuple of constant int values, got {tuple(shape)!r}"
            )
        out.append(c)
    return tuple(out)


class BaseAbstractConv(Op):
    """Base of the abstract convolution Ops: their parameters and shared checks.

    Parameters (Theano 1.0's): ``convdim`` (2 or 3); ``imshp``/``kshp``, the input's and the
    filters' shapes where known (None or a tuple of ints and None); ``border_mode``
    (``'valid'``, ``'full'``, ``'half'``, an int, or per axis an int or, in 2d, a
    ``(before, after)`` pair); ``subsample`` (strides); ``filter_flip`` (True: convolution,
    False: correlation); ``filter_dilation``; ``num_groups``; ``unshared`` (2d only).
    """

    check_broadcast = False
    __props__ = (
        "convdim",
        "border_mode",
        "subsample",
        "filter_flip",
        "imshp",
        "kshp",
        "filter_dilation",
        "num_groups",
        "unshared",
    )

    def __init__(
        self,
        convdim: int,
        imshp: Sequence[Any] | None = None,
        kshp: Sequence[Any] | None = None,
        border_mode: Any = "valid",
        subsample: Sequence[int] | None = None,
        filter_flip: bool = True,
        filter_dilation: Sequence[int] | None = None,
        num_groups: int = 1,
        unshared: bool = False,
    ) -> None:
        if convdim not in (2, 3):
            raise ValueError(f"convolution dimension {convdim} is not supported (2 or 3)")
        self.convdim = convdim
        subsample = (1,) * convdim if subsample is None else subsample
        filter_dilation = (1,) * convdim if filter_dilation is None else filter_dilation
        self.border_mode = _normalize_border_mode(border_mode, convdim)
        self.imshp = shape_tuple(imshp, "imshp", 2 + convdim)
        if unshared and convdim != 2:
            raise ValueError(f"Unshared convolution is only implemented for 2d, not {convdim}d")
        klen = 2 + 2 * convdim if unshared else 2 + convdim
        self.kshp = shape_tuple(kshp, "kshp", klen)
        self.filter_flip = bool(filter_flip)
        if len(subsample) != convdim:
            raise ValueError(f"subsample must have {convdim} elements, got {tuple(subsample)}")
        if len(filter_dilation) != convdim:
            raise ValueError(
                f"filter_dilation must have {convdim} elements, got {tuple(filter_dilation)}"
            )
        self.subsample = tuple(int(s) for s in subsample)
        self.filter_dilation = tuple(int(d) for d in filter_dilation)
        if min(self.subsample + self.filter_dilation) < 1:
            raise ValueError(
                f"subsample {self.subsample} and filter_dilation {self.filter_dilation} must be "
                "positive"
            )
        if int(num_groups) < 1:
            raise ValueError("num_groups must have value greater than zero")
        self.num_groups = int(num_groups)
        self.unshared = bool(unshared)

    def __str__(self) -> str:
        return (
            f"{type(self).__name__}{{convdim={self.convdim}, border_mode={self.border_mode!r}, "
            f"subsample={self.subsample}, filter_flip={self.filter_flip}, "
            f"imshp={self.imshp}, kshp={self.kshp}, filter_dilation={self.filter_dilation}, "
            f"num_groups={self.num_groups}, unshared={self.unshared}}}"
        )

    # -- helpers -----------------------------------------------------------------------
    def _name(self) -> str:
        return type(self).__name__

    def _kern_ndim(self) -> int:
        return 2 + 2 * self.convdim if self.unshared else 2 + self.convdim

    def _float(self, var: Any, name: str, dtype: str | None = None) -> Variable:
        """``var`` as a tensor; of ``dtype`` when given (ints and other floats are cast)."""
        var = as_tensor_variable(var)
        if dtype is None:
            if var.type.dtype not in float_dtypes:
                raise conv_error(
                    TypeError,
                    f"{self._name()}: {name} must be a float tensor, got {var.type} ({var})",
                )
            return var
        if var.type.dtype != dtype:
            var = tm.cast(var, dtype)
        return var

    def _check_ndim(self, var: Variable, name: str, ndim: int, what: str) -> None:
        if var.type.ndim != ndim:
            raise conv_error(
                TypeError,
                f"{self._name()}: {name} must be a {ndim}D tensor {what}, got {var.type} "
                f"({var.type.ndim} dimensions)",
            )

    def _kern_what(self) -> str:
        if self.unshared:
            return "(filters, out_rows, out_cols, channels/num_groups, k_rows, k_cols)"
        return "(filters, channels/num_groups" + ", k" * self.convdim + ")"

    def _checked(self, var: Variable, given: tuple[int | None, ...], what: str) -> Variable:
        """``var`` with a run-time check of the lengths ``given`` (itself if none is known)."""
        if all(g is None for g in given):
            return var
        return ConvShapeCheck(given, f"{self._name()}: the given {what}")(var)

    def merged_shape(self, var: Variable, given: tuple[int | None, ...]) -> tuple[int | None, ...]:
        """``var``'s shape where the graph knows it, else the ``given`` length (or None)."""
        known = known_shape(var)
        return tuple(g if g is not None else k for g, k in zip(given, known, strict=True))

    def _pads(self, kshape: Sequence[int]) -> tuple[tuple[int, int], ...]:
        dil = tuple((k - 1) * d + 1 for k, d in zip(kshape, self.filter_dilation, strict=True))
        return border_mode_to_pad(self.border_mode, self.convdim, dil)

    def _flip(self, kern: np.ndarray) -> np.ndarray:
        """The kernel a correlation uses: flipped along its spatial axes if ``filter_flip``."""
        if not self.filter_flip:
            return kern
        nd = self.convdim
        return kern[(Ellipsis, *(slice(None, None, -1),) * nd)]

    def flops(self, inp: Sequence[Any], outp: Sequence[Any]) -> float:
        """Multiply-adds times two of a 2d convolution, from input/filter/output shapes."""
        if self.convdim != 2:
            raise ValueError(f"flops is only computed for 2d convolutions, not {self.convdim}d")
        inputs, filters = inp
        (outputs,) = outp
        flops = filters[-2] * filters[-1] * 2 * outputs[2] * outputs[3]
        return flops * inputs[1] * filters[0] * inputs[0] / self.num_groups

    def _shape_vector(self, shape: Any, what: str) -> Variable:
        """The ``shape`` input of the gradient Ops: ``convdim`` ints as an int64 vector."""
        nd = self.convdim
        if isinstance(shape, Variable):
            v = shape
        else:
            items = list(shape)
            if len(items) != nd:
                raise conv_error(
                    ValueError,
                    f"{self._name()}: shape ({what}) must have {nd} elements, got {shape!r}",
                )
            if all(const_int(s) is not None for s in items):
                v = as_tensor_variable(np.asarray([const_int(s) for s in items], dtype="int64"))
            else:
                from_items = [tm.cast(as_tensor_variable(s), "int64") for s in items]
                v = _stack(from_items)
        if v.type.ndim != 1 or v.type.dtype not in _INT_DTYPES:
            raise conv_error(
                TypeError,
                f"{self._name()}: shape ({what}) must be a vector of {nd} integers, got {v.type}",
            )
        return tm.cast(v, "int64") if v.type.dtype != "int64" else v


def _stack(items: list[Variable]) -> Variable:
    """A vector of scalars (``shape`` given as a mix of ints and symbolic scalars)."""
    return as_tensor_variable(items)


class AbstractConv(BaseAbstractConv):
    """The forward abstract convolution, ``(img, kern) -> top``; see the module docstring."""

    def make_node(self, img: Any, kern: Any) -> Apply:
        """``img`` (float) and ``kern`` (cast to ``img``'s dtype); known shapes are checked."""
        nd = self.convdim
        img = self._float(img, "img (the input)")
        kern = self._float(kern, "kern (the filters)", img.type.dtype)
        self._check_ndim(img, "img (the input)", 2 + nd, IMG_AXES[nd])
        self._check_ndim(kern, "kern (the filters)", self._kern_ndim(), self._kern_what())
        imshp = self.merged_shape(img, self.imshp)
        kshp = self.merged_shape(kern, self.kshp)
        check_static_conv(
            self._name(),
            imshp,
            kshp,
            self.border_mode,
            self.subsample,
            self.filter_dilation,
            self.num_groups,
            self.unshared,
            names=("input", "filters"),
        )
        img = self._checked(img, self.imshp, "input_shape (imshp)")
        kern = self._checked(kern, self.kshp, "filter_shape (kshp)")
        bc = [img.type.broadcastable[0], kern.type.broadcastable[0]] + [False] * nd
        return Apply(self, [img, kern], [TensorType(img.type.dtype, bc)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: Any) -> None:
        img, kern = inputs
        nd = self.convdim
        output_storage[0][0] = corr_forward(
            img,
            self._flip(kern),
            self._pads(kern.shape[-nd:]),
            self.subsample,
            self.filter_dilation,
            self.num_groups,
            self.unshared,
        )

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]) -> list[Any]:
        """Bilinear: ``conv(e_img, kern) + conv(img, e_kern)`` (Theano: not grouped/unshared)."""
        if self.num_groups > 1 or self.unshared:
            raise ValueError(
                f"{self._name()}: R_op is not implemented for grouped or unshared convolutions"
            )
        rval = None
        if eval_points[0] is not None:
            rval = self.make_node(eval_points[0], inputs[1]).outputs[0]
        if eval_points[1] is not None:
            other = self.make_node(inputs[0], eval_points[1]).outputs[0]
            rval = other if rval is None else rval + other
        return [rval]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Sequence[Any]]) -> list[Any]:
        imshp, kshp = input_shapes
        imshp = [s if g is None else g for s, g in zip(imshp, self.imshp, strict=True)]
        kshp = [s if g is None else g for s, g in zip(kshp, self.kshp, strict=True)]
        return [
            get_conv_output_shape(
                imshp, kshp, self.border_mode, self.subsample, self.filter_dilation
            )
        ]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        bottom, weights = inputs
        (top,) = output_grads
        nd = self.convdim
        _, grad_weights, grad_inputs = _family(self.convdim)
        kwargs = _params(self)
        d_bottom = grad_inputs(**kwargs)(weights, top, bottom.shape[-nd:], add_assert_shape=False)
        d_weights = grad_weights(**kwargs)(bottom, top, weights.shape[-nd:], add_assert_shape=False)
        d_bottom = patternbroadcast(d_bottom, bottom.type.broadcastable)
        d_weights = patternbroadcast(d_weights, weights.type.broadcastable)
        return [d_bottom, d_weights]


class AbstractConv_gradWeights(BaseAbstractConv):
    """Gradient of the abstract convolution with respect to the filters:
    ``(img, topgrad, shape) -> kern``, ``shape`` the filters' spatial shape."""

    def make_node(self, img: Any, topgrad: Any, shape: Any, add_assert_shape: bool = True) -> Apply:
        nd = self.convdim
        img = self._float(img, "img (the input)")
        topgrad = self._float(topgrad, "topgrad (the output gradient)", img.type.dtype)
        self._check_ndim(img, "img (the input)", 2 + nd, IMG_AXES[nd])
        self._check_ndim(topgrad, "topgrad", 2 + nd, "(batch, filters" + ", out" * nd + ")")
        if add_assert_shape:
            img = self._checked(img, self.imshp, "input_shape (imshp)")
        shape = self._shape_vector(shape, "the filters' spatial shape")
        ib, tb = img.type.broadcastable, topgrad.type.broadcastable
        if self.unshared:
            bc = [tb[1]] + [False] * nd + [ib[1]] + [False] * nd
        else:
            bc = [tb[1], ib[1]] + [False] * nd
        return Apply(self, [img, topgrad, shape], [TensorType(img.type.dtype, bc)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: Any) -> None:
        img, topgrad, shape = inputs
        kshape = tuple(int(s) for s in shape)
        if len(kshape) != self.convdim or min(kshape, default=1) < 1:
            raise ValueError(
                f"{self._name()}: the filters' spatial shape must be {self.convdim} positive "
                f"ints, got {tuple(shape)}"
            )
        kern = corr_grad_weights(
            img,
            topgrad,
            kshape,
            self._pads(kshape),
            self.subsample,
            self.filter_dilation,
            self.num_groups,
            self.unshared,
        )
        output_storage[0][0] = np.ascontiguousarray(self._flip(kern))

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True], [True], [False]]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Sequence[Any]]) -> list[Any]:
        imshp, topshp = input_shapes[:2]
        nd = self.convdim
        spatial = [node.inputs[2][i] for i in range(nd)]
        if self.unshared:
            fallback = [topshp[1], *topshp[2:], imshp[1] // self.num_groups, *spatial]
        else:
            fallback = [topshp[1], imshp[1] // self.num_groups, *spatial]
        return [tuple(f if k is None else k for f, k in zip(fallback, self.kshp, strict=True))]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        bottom, top = inputs[:2]
        (weights,) = output_grads
        nd = self.convdim
        forward, _, grad_inputs = _family(self.convdim)
        kwargs = _params(self)
        d_bottom = grad_inputs(**kwargs)(weights, top, bottom.shape[-nd:])
        d_top = forward(**kwargs)(bottom, weights)
        d_bottom = patternbroadcast(d_bottom, bottom.type.broadcastable)
        d_top = patternbroadcast(d_top, top.type.broadcastable)
        return [d_bottom, d_top, disconnected_type()]


class AbstractConv_gradInputs(BaseAbstractConv):
    """Gradient of the abstract convolution with respect to the input:
    ``(kern, topgrad, shape) -> img``, ``shape`` the input's spatial shape."""

    def make_node(
        self, kern: Any, topgrad: Any, shape: Any, add_assert_shape: bool = True
    ) -> Apply:
        nd = self.convdim
        kern = self._float(kern, "kern (the filters)")
        topgrad = self._float(topgrad, "topgrad (the output gradient)", kern.type.dtype)
        self._check_ndim(kern, "kern (the filters)", self._kern_ndim(), self._kern_what())
        self._check_ndim(topgrad, "topgrad", 2 + nd, "(batch, filters" + ", out" * nd + ")")
        if add_assert_shape:
            kern = self._checked(kern, self.kshp, "filter_shape (kshp)")
        shape = self._shape_vector(shape, "the input's spatial shape")
        tb = topgrad.type.broadcastable
        if self.num_groups > 1:
            bc = [tb[0], False] + [False] * nd
        else:
            bc = [tb[0], kern.type.broadcastable[-nd - 1]] + [False] * nd
        return Apply(self, [kern, topgrad, shape], [TensorType(kern.type.dtype, bc)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: Any) -> None:
        kern, topgrad, shape = inputs
        nd = self.convdim
        fallback = [topgrad.shape[0], kern.shape[-nd - 1] * self.num_groups]
        fallback += [int(s) for s in shape]
        imshp = [f if g is None else g for f, g in zip(fallback, self.imshp, strict=True)]
        expected = get_conv_output_shape(
            imshp, kern.shape, self.border_mode, self.subsample, self.filter_dilation
        )
        if tuple(expected) != tuple(topgrad.shape):
            raise ValueError(
                f"{self._name()}: invalid input_shape for gradInputs: the given input_shape "
                f"{tuple(imshp)} would produce an output of shape {tuple(expected)}, but the "
                f"given topgrad has shape {tuple(topgrad.shape)}"
            )
        output_storage[0][0] = corr_grad_inputs(
            self._flip(kern),
            topgrad,
            imshp[2:],
            self._pads(kern.shape[-nd:]),
            self.subsample,
            self.filter_dilation,
            self.num_groups,
            self.unshared,
        )

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True], [True], [False]]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Sequence[Any]]) -> list[Any]:
        kshp, topshp = input_shapes[:2]
        nd = self.convdim
        fallback = [topshp[0], kshp[-nd - 1] * self.num_groups]
        fallback += [node.inputs[2][i] for i in range(nd)]
        return [tuple(f if g is None else g for f, g in zip(fallback, self.imshp, strict=True))]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        weights, top = inputs[:2]
        (bottom,) = output_grads
        nd = self.convdim
        forward, grad_weights, _ = _family(self.convdim)
        kwargs = _params(self)
        d_weights = grad_weights(**kwargs)(bottom, top, weights.shape[-nd:])
        d_top = forward(**kwargs)(bottom, weights)
        d_weights = patternbroadcast(d_weights, weights.type.broadcastable)
        d_top = patternbroadcast(d_top, top.type.broadcastable)
        return [d_weights, d_top, disconnected_type()]


def _params(op: BaseAbstractConv) -> dict[str, Any]:
    """The constructor arguments of a 2d/3d abstract Op (to build its relatives)."""
    kwargs = {
        "imshp": op.imshp,
        "kshp": op.kshp,
        "border_mode": op.border_mode,
        "subsample": op.subsample,
        "filter_flip": op.filter_flip,
        "filter_dilation": op.filter_dilation,
        "num_groups": op.num_groups,
    }
    if op.convdim == 2:
        kwargs["unshared"] = op.unshared
    return kwargs


def _family(convdim: int) -> tuple[type, type, type]:
    """The forward, gradWeights and gradInputs Op classes of a 2d or 3d convolution."""
    if convdim == 2:
        return AbstractConv2d, AbstractConv2d_gradWeights, AbstractConv2d_gradInputs
    return AbstractConv3d, AbstractConv3d_gradWeights, AbstractConv3d_gradInputs


class AbstractConv2d(AbstractConv):
    """Abstract 2d convolution ``(img (B, C, H, W), kern) -> top``."""

    def __init__(
        self,
        imshp: Sequence[Any] | None = None,
        kshp: Sequence[Any] | None = None,
        border_mode: Any = "valid",
        subsample: Sequence[int] = (1, 1),
        filter_flip: bool = True,
        filter_dilation: Sequence[int] = (1, 1),
        num_groups: int = 1,
        unshared: bool = False,
    ) -> None:
        super().__init__(
            2, imshp, kshp, border_mode, subsample, filter_flip, filter_dilation, num_groups,
            unshared,
        )  # fmt: skip


class AbstractConv2d_gradWeights(AbstractConv_gradWeights):
    """Gradient of :class:`AbstractConv2d` with respect to the filters."""

    def __init__(
        self,
        imshp: Sequence[Any] | None = None,
        kshp: Sequence[Any] | None = None,
        border_mode: Any = "valid",
        subsample: Sequence[int] = (1, 1),
        filter_flip: bool = True,
        filter_dilation: Sequence[int] = (1, 1),
        num_groups: int = 1,
        unshared: bool = False,
    ) -> None:
        super().__init__(
            2, imshp, kshp, border_mode, subsample, filter_flip, filter_dilation, num_groups,
            unshared,
        )  # fmt: skip


class AbstractConv2d_gradInputs(AbstractConv_gradInputs):
    """Gradient of :class:`AbstractConv2d` with respect to the input."""

    def __init__(
        self,
        imshp: Sequence[Any] | None = None,
        kshp: Sequence[Any] | None = None,
        border_mode: Any = "valid",
        subsample: Sequence[int] = (1, 1),
        filter_flip: bool = True,
        filter_dilation: Sequence[int] = (1, 1),
        num_groups: int = 1,
        unshared: bool = False,
    ) -> None:
        super().__init__(
            2, imshp, kshp, border_mode, subsample, filter_flip, filter_dilation, num_groups,
            unshared,
        )  # fmt: skip


class AbstractConv3d(AbstractConv):
    """Abstract 3d convolution ``(img (B, C, D, H, W), kern) -> top``."""

    def __init__(
        self,
        imshp: Sequence[Any] | None = None,
        kshp: Sequence[Any] | None = None,
        border_mode: Any = "valid",
        subsample: Sequence[int] = (1, 1, 1),
        filter_flip: bool = True,
        filter_dilation: Sequence[int] = (1, 1, 1),
        num_groups: int = 1,
    ) -> None:
        super().__init__(
            3, imshp, kshp, border_mode, subsample, filter_flip, filter_dilation, num_groups
        )


class AbstractConv3d_gradWeights(AbstractConv_gradWeights):
    """Gradient of :class:`AbstractConv3d` with respect to the filters."""

    def __init__(
        self,
        imshp: Sequence[Any] | None = None,
        kshp: Sequence[Any] | None = None,
        border_mode: Any = "valid",
        subsample: Sequence[int] = (1, 1, 1),
        filter_flip: bool = True,
        filter_dilation: Sequence[int] = (1, 1, 1),
        num_groups: int = 1,
    ) -> None:
        super().__init__(
            3, imshp, kshp, border_mode, subsample, filter_flip, filter_dilation, num_groups
        )


class AbstractConv3d_gradInputs(AbstractConv_gradInputs):
    """Gradient of :class:`AbstractConv3d` with respect to the input."""

    def __init__(
        self,
        imshp: Sequence[Any] | None = None,
        kshp: Sequence[Any] | None = None,
        border_mode: Any = "valid",
        subsample: Sequence[int] = (1, 1, 1),
        filter_flip: bool = True,
        filter_dilation: Sequence[int] = (1, 1, 1),
        num_groups: int = 1,
    ) -> None:
        super().__init__(
            3, imshp, kshp, border_mode, subsample, filter_flip, filter_dilation, num_groups
        )
