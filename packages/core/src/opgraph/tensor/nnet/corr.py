"""Correlation by matrix multiplication: ``CorrMM`` and its gradients (Theano's ``nnet.corr``).

``CorrMM(border_mode, subsample, filter_dilation, num_groups, unshared)(img, kern)`` is the
2d CORRELATION (the kernel is not flipped) of ``img (batch, channels, rows, cols)`` with
``kern (filters, channels / num_groups, k_rows, k_cols)`` (unshared:
``(filters, out_rows, out_cols, channels / num_groups, k_rows, k_cols)``)::

    top[b, G*Og + o, i, j] = sum_{c, p, q} imgpad[b, G*Cg + c, i*sh + p*dh, j*sw + q*dw]
                                            * kern[G*Og + o, c, p, q]

:class:`CorrMM_gradWeights` and :class:`CorrMM_gradInputs` are its gradients with respect to
``kern`` and ``img``. The rewrites of opgraph-optimizers replace the abstract convolution Ops
(:mod:`opgraph.tensor.nnet.abstract_conv`) with these; opgraph-backend-c gives them C kernels
(im2col + GEMM). ``perform`` computes with :mod:`opgraph.tensor.nnet.conv_numpy`.

``border_mode`` is normalized as Theano 1.0 does: ``'valid'``, ``'full'``, ``'half'`` or a
pair of ``(pad_before, pad_after)`` int pairs (an int or an int per axis is made a pair).
``'full'`` pads ``(k-1)*d`` on each side, ``'half'`` ``((k-1)*d + 1) // 2``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.null_type import disconnected_type
from opgraph.graph.op import Op
from opgraph.scalar.type import float_dtypes, upcast
from opgraph.tensor import math as tm
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.nnet.conv_numpy import corr_forward, corr_grad_inputs, corr_grad_weights
from opgraph.tensor.nnet.conv_shapes import (
    check_static_conv,
    conv_error,
    get_conv_output_shape,
    known_shape,
)
from opgraph.tensor.type import TensorType

__all__ = ["BaseCorrMM", "CorrMM", "CorrMM_gradInputs", "CorrMM_gradWeights"]

_AXES = {2: "(batch, channels, rows, cols)", 3: "(batch, channels, rows, cols, depth)"}


class CorrBase(Op):
    """What the 2d and 3d correlation Ops share: border modes, pads, checks, shapes.

    Subclasses set ``convdim`` and ``_direction`` (``'forward'``, ``'backprop weights'``
    or ``'backprop inputs'``) and ``_family`` (their forward, gradWeights and gradInputs
    classes, for the gradients).
    """

    convdim: ClassVar[int] = 2
    _direction: ClassVar[str] = ""
    check_broadcast = False
    border_mode: Any
    subsample: tuple[int, ...]
    filter_dilation: tuple[int, ...]
    num_groups: int
    unshared: bool

    #: ``() -> (forward, gradWeights, gradInputs)`` classes of the family (for the gradients).
    _family: ClassVar[Callable[[], tuple[type, type, type]]]

    def _check_params(self, subsample: Sequence[int], filter_dilation: Sequence[int]) -> None:
        nd = self.convdim
        words = {2: "two", 3: "three"}[nd]
        if len(subsample) != nd:
            raise ValueError(f"subsample must have {words} elements, got {subsample!r}")
        if len(filter_dilation) != nd:
            raise ValueError(f"filter_dilation must have {words} elements, got {filter_dilation!r}")
        self.subsample = tuple(int(s) for s in subsample)
        self.filter_dilation = tuple(int(d) for d in filter_dilation)
        if min(self.subsample + self.filter_dilation) < 1:
            raise ValueError(
                f"subsample {self.subsample} and filter_dilation {self.filter_dilation} must be "
                "positive"
            )
        if int(self.num_groups) < 1:
            raise ValueError("Number of groups should be greater than 0")

    def _params(self) -> dict[str, Any]:
        """The constructor arguments of this Op (to build its gradient Ops)."""
        return {p: getattr(self, p) for p in self.__props__}

    def pads(self, kshape: Sequence[Any]) -> tuple[tuple[Any, Any], ...]:
        """``(before, after)`` pads per spatial axis for a kernel of spatial shape ``kshape``."""
        out = []
        for i in range(self.convdim):
            dk = (kshape[i] - 1) * self.filter_dilation[i] + 1
            if self.border_mode == "valid":
                out.append((0, 0))
            elif self.border_mode == "full":
                out.append((dk - 1, dk - 1))
            elif self.border_mode == "half":
                out.append((dk // 2, dk // 2))
            else:
                m = self.border_mode[i]
                out.append((m, m) if not isinstance(m, tuple) else (m[0], m[1]))
        return tuple(out)

    def __str__(self) -> str:
        return (
            f"{type(self).__name__}{{{self.border_mode}, {self.subsample}, "
            f"{self.filter_dilation}, {self.num_groups} {self.unshared}}}"
        )

    # -- checks shared by make_node ----------------------------------------------------
    def _name(self) -> str:
        return type(self).__name__

    def _as_float_pair(self, a: Any, a_name: str, b: Any, b_name: str) -> tuple[Variable, Variable]:
        """Both inputs as tensors of their common float dtype (Theano's ``as_common_dtype``)."""
        a, b = as_tensor_variable(a), as_tensor_variable(b)
        dtype = upcast(a.type.dtype, b.type.dtype)
        if dtype not in float_dtypes:
            raise conv_error(
                TypeError,
                f"{self._name()}: {a_name} and {b_name} must be float tensors, got "
                f"{a.type} and {b.type}",
            )
        return tm.cast(a, dtype), tm.cast(b, dtype)

    def _check_ndim(self, var: Variable, name: str, ndim: int, what: str) -> None:
        if var.type.ndim != ndim:
            raise conv_error(
                TypeError,
                f"{self._name()}: {name} must be a {ndim}D tensor {what}, got {var.type} "
                f"({var.type.ndim} dimensions)",
            )

    def _kern_ndim(self) -> tuple[int, str]:
        nd = self.convdim
        if self.unshared:
            return 2 + 2 * nd, "(filters, out_rows, out_cols, channels/groups, k_rows, k_cols)"
        return 2 + nd, "(filters, channels/groups, *kernel)"

    def _shape_inputs(self, shape: Any, needed: bool, why: str) -> list[Variable]:
        """The optional ``shape`` argument as int64 scalars (none when it is None)."""
        nd = self.convdim
        if shape is None:
            if needed:
                raise conv_error(ValueError, f"{self._name()}: shape must be given if {why}")
            return []
        if isinstance(shape, Variable) and shape.type.ndim != 1:
            raise conv_error(
                TypeError, f"{self._name()}: shape must be {nd} integers, got {shape.type}"
            )
        items = [shape[i] for i in range(nd)]
        if not isinstance(shape, Variable) and len(shape) != nd:
            raise conv_error(
                ValueError, f"{self._name()}: shape must be {nd} integers, got {shape!r}"
            )
        out = []
        for v in items:
            v = as_tensor_variable(v)
            if v.type.ndim != 0 or v.type.dtype not in (
                "int8",
                "int16",
                "int32",
                "int64",
                "uint8",
                "uint16",
                "uint32",
                "uint64",
            ):
                raise conv_error(
                    TypeError, f"{self._name()}: shape must hold integer scalars, got {v.type}"
                )
            out.append(tm.cast(v, "int64"))
        return out

    def _padcodes(self) -> list[tuple[Any, Any] | str]:
        """Per axis: a ``(before, after)`` pair of ints, or ``'full'`` / ``'half'``."""
        if self.border_mode in ("valid", "full", "half"):
            mode = (0, 0) if self.border_mode == "valid" else self.border_mode
            return [mode] * self.convdim
        return [m if isinstance(m, tuple) else (m, m) for m in self.border_mode]

    # -- shapes the gradient Ops infer when `shape` is not given -------------------------
    def _kernel_shape(self, imshp: Sequence[Any], topshp: Sequence[Any]) -> list[Any]:
        """Spatial kernel lengths from image and output lengths (stride 1, not 'half')."""
        out = []
        for i, code in enumerate(self._padcodes()):
            if code == "full":
                dk = topshp[i] - imshp[i] + 1
            else:
                dk = imshp[i] + code[0] + code[1] - topshp[i] + 1
            d = self.filter_dilation[i]
            out.append(dk if d == 1 else (dk - 1) // d + 1)
        return out

    def _image_shape(self, kshp: Sequence[Any], topshp: Sequence[Any]) -> list[Any]:
        """Spatial image lengths from kernel and output lengths (stride 1)."""
        pads = self.pads(kshp)
        out = []
        for i in range(self.convdim):
            dk = (kshp[i] - 1) * self.filter_dilation[i] + 1
            out.append(topshp[i] + dk - 1 - pads[i][0] - pads[i][1])
        return out


class CorrForward(CorrBase):
    """``make_node``/``perform``/``infer_shape``/``grad`` of the forward correlation."""

    _direction = "forward"

    def make_node(self, img: Any, kern: Any) -> Apply:
        """``img (B, C, *S)`` and ``kern`` (see the module docstring); same float dtype."""
        nd = self.convdim
        img, kern = self._as_float_pair(img, "img", kern, "kern")
        self._check_ndim(img, "img", 2 + nd, _AXES[nd])
        self._check_ndim(kern, "kern", *self._kern_ndim())
        check_static_conv(
            self._name(),
            known_shape(img),
            known_shape(kern),
            self._padcodes_for_check(),
            self.subsample,
            self.filter_dilation,
            self.num_groups,
            self.unshared,
            names=("img", "kern"),
        )
        bc = [img.type.broadcastable[0], kern.type.broadcastable[0]] + [False] * nd
        return Apply(self, [img, kern], [TensorType(img.type.dtype, bc)()])

    def _padcodes_for_check(self) -> Any:
        if self.border_mode in ("valid", "full", "half"):
            return self.border_mode
        return tuple(self._padcodes())

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: Any) -> None:
        img, kern = inputs
        nd = self.convdim
        pads = self.pads(kern.shape[-nd:])
        output_storage[0][0] = corr_forward(
            img, kern, pads, self.subsample, self.filter_dilation, self.num_groups, self.unshared
        )

    def infer_shape(self, node: Apply, input_shapes: Sequence[Sequence[Any]]) -> list[Any]:
        imshp, kshp = input_shapes
        return [
            get_conv_output_shape(
                imshp,
                kshp,
                self._padcodes_for_check(),
                self.subsample,
                self.filter_dilation,
            )
        ]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        bottom, weights = inputs
        (top,) = output_grads
        nd = self.convdim
        _, grad_weights, grad_inputs = self._family()
        d_bottom = grad_inputs(**self._params())(weights, top, bottom.shape[-nd:])
        d_weights = grad_weights(**self._params())(bottom, top, weights.shape[-nd:])
        return [d_bottom, d_weights]


class CorrGradWeights(CorrBase):
    """The gradient of the forward correlation with respect to the kernel."""

    _direction = "backprop weights"

    def make_node(self, img: Any, topgrad: Any, shape: Any = None) -> Apply:
        """``img (B, C, *S)``, ``topgrad (B, O, *P)``, ``shape`` the kernel's spatial shape.

        ``shape`` is required when ``subsample`` is not all ones or ``border_mode`` is
        ``'half'`` (Theano's rule: the kernel shape cannot be inferred there).
        """
        nd = self.convdim
        img, topgrad = self._as_float_pair(img, "img", topgrad, "topgrad")
        self._check_ndim(img, "img", 2 + nd, _AXES[nd])
        self._check_ndim(topgrad, "topgrad", 2 + nd, "(batch, filters, *output)")
        ones = "(" + ", ".join("1" * nd) + ")"
        extra = self._shape_inputs(
            shape,
            self.subsample != (1,) * nd or self.border_mode == "half",
            f'subsample != {ones} or border_mode == "half"',
        )
        ib, tb = img.type.broadcastable, topgrad.type.broadcastable
        if self.unshared:
            bc = [tb[1]] + [False] * nd + [ib[1]] + [False] * nd
        else:
            bc = [tb[1], ib[1]] + [False] * nd
        return Apply(self, [img, topgrad, *extra], [TensorType(img.type.dtype, bc)()])

    def _kshape_from(self, img_shape: Sequence[Any], top_shape: Sequence[Any], extra: Any) -> Any:
        nd = self.convdim
        if extra:
            return [extra[i] for i in range(nd)]
        return self._kernel_shape(img_shape[2:], top_shape[2:])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: Any) -> None:
        img, topgrad = inputs[:2]
        kshape = [int(k) for k in self._kshape_from(img.shape, topgrad.shape, inputs[2:])]
        if min(kshape, default=1) < 1:
            raise ValueError(
                f"{self._name()}: img {img.shape} and topgrad {topgrad.shape} give no valid "
                f"kernel shape ({tuple(kshape)}) for border_mode {self.border_mode!r}"
            )
        output_storage[0][0] = corr_grad_weights(
            img,
            topgrad,
            kshape,
            self.pads(kshape),
            self.subsample,
            self.filter_dilation,
            self.num_groups,
            self.unshared,
        )

    def infer_shape(self, node: Apply, input_shapes: Sequence[Sequence[Any]]) -> list[Any]:
        imshp, topshp = input_shapes[:2]
        kshp = self._kshape_from(imshp, topshp, node.inputs[2:])
        ssize = imshp[1] // self.num_groups
        if self.unshared:
            return [(topshp[1], *topshp[2:], ssize, *kshp)]
        return [(topshp[1], ssize, *kshp)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        bottom, top = inputs[:2]
        (weights,) = output_grads
        nd = self.convdim
        forward, _, grad_inputs = self._family()
        d_bottom = grad_inputs(**self._params())(weights, top, bottom.shape[-nd:])
        d_top = forward(**self._params())(bottom, weights)
        return [d_bottom, d_top] + [disconnected_type() for _ in inputs[2:]]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True], [True]] + [[False]] * (len(node.inputs) - 2)


class CorrGradInputs(CorrBase):
    """The gradient of the forward correlation with respect to the image."""

    _direction = "backprop inputs"

    def make_node(self, kern: Any, topgrad: Any, shape: Any = None) -> Apply:
        """``kern``, ``topgrad (B, O, *P)``, ``shape`` the image's spatial shape.

        ``shape`` is required when ``subsample`` is not all ones (several image shapes give
        the same output shape there).
        """
        nd = self.convdim
        kern, topgrad = self._as_float_pair(kern, "kern", topgrad, "topgrad")
        self._check_ndim(kern, "kern", *self._kern_ndim())
        self._check_ndim(topgrad, "topgrad", 2 + nd, "(batch, filters, *output)")
        ones = "(" + ", ".join("1" * nd) + ")"
        extra = self._shape_inputs(shape, self.subsample != (1,) * nd, f"subsample != {ones}")
        tb = topgrad.type.broadcastable
        if self.num_groups > 1:
            bc = [tb[0], False] + [False] * nd
        else:
            bc = [tb[0], kern.type.broadcastable[-nd - 1]] + [False] * nd
        return Apply(self, [kern, topgrad, *extra], [TensorType(kern.type.dtype, bc)()])

    def _imshape_from(self, kshp: Sequence[Any], top_shape: Sequence[Any], extra: Any) -> Any:
        nd = self.convdim
        if extra:
            return [extra[i] for i in range(nd)]
        return self._image_shape(list(kshp[-nd:]), top_shape[2:])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: Any) -> None:
        kern, topgrad = inputs[:2]
        nd = self.convdim
        imshape = [int(s) for s in self._imshape_from(kern.shape, topgrad.shape, inputs[2:])]
        output_storage[0][0] = corr_grad_inputs(
            kern,
            topgrad,
            imshape,
            self.pads(kern.shape[-nd:]),
            self.subsample,
            self.filter_dilation,
            self.num_groups,
            self.unshared,
        )

    def infer_shape(self, node: Apply, input_shapes: Sequence[Sequence[Any]]) -> list[Any]:
        kshp, topshp = input_shapes[:2]
        nd = self.convdim
        imshp = self._imshape_from(kshp, topshp, node.inputs[2:])
        return [(topshp[0], kshp[-nd - 1] * self.num_groups, *imshp)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        weights, top = inputs[:2]
        (bottom,) = output_grads
        nd = self.convdim
        forward, grad_weights, _ = self._family()
        d_weights = grad_weights(**self._params())(bottom, top, weights.shape[-nd:])
        d_top = forward(**self._params())(bottom, weights)
        return [d_weights, d_top] + [disconnected_type() for _ in inputs[2:]]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True], [True]] + [[False]] * (len(node.inputs) - 2)


def _normalize_border_mode_2d(border_mode: Any) -> Any:
    """Theano's CorrMM normalization: a string, or two ``(before, after)`` int pairs."""
    if isinstance(border_mode, int | np.integer) and not isinstance(border_mode, bool):
        if border_mode < 0:
            raise ValueError(
                f"invalid border_mode {border_mode}, which must be a non-negative integer"
            )
        return ((int(border_mode), int(border_mode)),) * 2
    if isinstance(border_mode, tuple):
        if len(border_mode) != 2:
            raise ValueError(f"invalid border_mode {border_mode} which must be a tuple of length 2")
        border: tuple[tuple[int, int], ...] = ()
        for mode in border_mode:
            if isinstance(mode, tuple) and len(mode) == 2 and min(mode) >= 0:
                border += ((int(mode[0]), int(mode[1])),)
            elif isinstance(mode, int | np.integer) and mode >= 0:
                border += ((int(mode), int(mode)),)
            else:
                raise ValueError(
                    f"invalid border mode {border_mode}. The tuple can only contain integers "
                    "or tuples of length 2"
                )
        return border
    if border_mode not in ("valid", "full", "half"):
        raise ValueError(
            f'invalid border_mode {border_mode!r}, which must be either "valid", "full", "half", '
            "an integer or a tuple of two integers or a pair of integers"
        )
    return border_mode


class BaseCorrMM(CorrBase):
    """Base of :class:`CorrMM`, :class:`CorrMM_gradWeights`, :class:`CorrMM_gradInputs`.

    Parameters (Theano 1.0's): ``border_mode`` (``'valid'``, ``'full'``, ``'half'``, an int,
    a pair of ints, or a pair of ``(before, after)`` pairs; stored normalized),
    ``subsample`` (strides), ``filter_dilation``, ``num_groups`` (grouped correlation),
    ``unshared`` (one filter per output position) and ``openmp`` (accepted, unused: threads
    are the backend's business).
    """

    __props__ = ("border_mode", "subsample", "filter_dilation", "num_groups", "unshared")
    convdim = 2

    def __init__(
        self,
        border_mode: Any = "valid",
        subsample: Sequence[int] = (1, 1),
        filter_dilation: Sequence[int] = (1, 1),
        num_groups: int = 1,
        unshared: bool = False,
        openmp: bool | None = None,
    ) -> None:
        self.border_mode = _normalize_border_mode_2d(border_mode)
        self.num_groups = int(num_groups)
        self.unshared = bool(unshared)
        self.openmp = openmp
        self._check_params(subsample, filter_dilation)

    @classmethod
    def _family(cls) -> tuple[type, type, type]:
        return CorrMM, CorrMM_gradWeights, CorrMM_gradInputs

    @property
    def pad(self) -> tuple[tuple[int, int], ...]:
        """Theano's pad codes: ``-1`` for 'half', ``-2`` for 'full', else the pairs."""
        if self.border_mode == "half":
            return ((-1, -1),) * 2
        if self.border_mode == "full":
            return ((-2, -2),) * 2
        if isinstance(self.border_mode, tuple):
            return self.border_mode
        return ((0, 0),) * 2


class CorrMM(CorrForward, BaseCorrMM):
    """2d correlation of ``img (B, C, H, W)`` with ``kern``; see the module docstring."""


class CorrMM_gradWeights(CorrGradWeights, BaseCorrMM):
    """Gradient of :class:`CorrMM` with respect to ``kern``: ``(img, topgrad[, shape])``."""


class CorrMM_gradInputs(CorrGradInputs, BaseCorrMM):
    """Gradient of :class:`CorrMM` with respect to ``img``: ``(kern, topgrad[, shape])``."""
