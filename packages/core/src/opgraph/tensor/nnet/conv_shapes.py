"""Shapes of convolutions, their padding, and the checks that report bad shapes.

Theano 1.0's shape helpers of ``tensor.nnet.abstract_conv`` (re-exported there):
:func:`get_conv_output_shape`, :func:`get_conv_shape_1axis`, the gradient shapes
(:func:`get_conv_gradweights_shape`, :func:`get_conv_gradinputs_shape` and their ``_1axis``
forms), :func:`check_conv_gradinputs_shape`, :func:`border_mode_to_pad`,
:func:`assert_conv_shape` and :func:`assert_shape`. Shapes may hold ints, ``None`` (unknown)
or symbolic scalars; the result then holds the same kinds.

It also holds what the convolution Ops share to report bad input: :func:`conv_error` (an
exception whose message ends with the user's source line), :func:`known_shape` (the lengths a
variable's type or constant value fixes) and :class:`ConvShapeCheck`, the node that compares a
value's shape with the ``input_shape``/``filter_shape`` the user gave and raises ValueError at
run time when they disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.op import Op
from opgraph.graph.utils import first_user_line, user_frames
from opgraph.tensor import math as tm
from opgraph.tensor.assert_op import Assert
from opgraph.tensor.basic import as_tensor_variable

__all__ = [
    "ConvShapeCheck",
    "assert_conv_shape",
    "assert_shape",
    "border_mode_to_pad",
    "check_conv_gradinputs_shape",
    "check_static_conv",
    "const_int",
    "conv_error",
    "get_conv_gradinputs_shape",
    "get_conv_gradinputs_shape_1axis",
    "get_conv_gradweights_shape",
    "get_conv_gradweights_shape_1axis",
    "get_conv_output_shape",
    "get_conv_shape_1axis",
    "known_shape",
]


def conv_error(exc_type: type[Exception], message: str) -> Exception:
    """``exc_type(message)`` with the user's source line (the first frame outside opgraph)."""
    where = first_user_line(user_frames(1, skip=2))
    if where:
        message = f"{message}\n  (at {where})"
    return exc_type(message)


def const_int(v: Any) -> int | None:
    """The int ``v`` holds: a Python/NumPy integer or a 0-d integer constant; else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int | np.integer):
        return int(v)
    if isinstance(v, Constant):
        data = np.asarray(v.data)
        if data.ndim == 0 and data.dtype.kind in "iu":
            return int(data)
    return None


def known_shape(var: Variable) -> tuple[int | None, ...]:
    """The lengths of ``var`` its type (or constant value) fixes, ``None`` where unknown."""
    if isinstance(var, Constant):
        return tuple(int(n) for n in np.shape(var.data))
    shape = getattr(var.type, "shape", None)
    if shape is None:
        return (None,) * var.type.ndim
    return tuple(None if s is None else int(s) for s in shape)


def _is(value: Any, name: str) -> bool:
    return isinstance(value, str) and value == name


def _pad_pair(border_mode: Any, dil_kernel_shape: Any) -> tuple[Any, Any]:
    """``(before, after)`` of one axis for a border mode (string, int, pair)."""
    if _is(border_mode, "half"):
        pad = dil_kernel_shape // 2
        return pad, pad
    if _is(border_mode, "full"):
        pad = dil_kernel_shape - 1
        return pad, pad
    if _is(border_mode, "valid"):
        return 0, 0
    if isinstance(border_mode, tuple):
        pad_l, pad_r = border_mode
    else:
        pad_l = pad_r = border_mode
    for p in (pad_l, pad_r):
        c = const_int(p)
        if c is not None and c < 0:
            raise ValueError(f"border_mode must be >= 0, got {border_mode!r}")
    return pad_l, pad_r


def _nonzero(v: Any) -> bool:
    c = const_int(v)
    return c is None or c != 0


def get_conv_shape_1axis(
    image_shape: Any, kernel_shape: Any, border_mode: Any, subsample: Any, dilation: Any = 1
) -> Any:
    """Output length of a convolution along one axis (None if any argument is None).

    ``border_mode`` is ``'valid'``, ``'half'``, ``'full'``, an int or a ``(before, after)``
    pair; the lengths may be symbolic (the result then is a small graph).
    """
    if any(v is None for v in (image_shape, kernel_shape, border_mode, subsample, dilation)):
        return None
    dil_kernel_shape = (kernel_shape - 1) * dilation + 1
    pad_l, pad_r = _pad_pair(border_mode, dil_kernel_shape)
    out = image_shape - dil_kernel_shape
    if _nonzero(pad_l):
        out += pad_l
    if _nonzero(pad_r):
        out += pad_r
    if const_int(subsample) != 1:
        out = out // subsample
    return out + 1


def get_conv_output_shape(
    image_shape: Sequence[Any],
    kernel_shape: Sequence[Any],
    border_mode: Any,
    subsample: Sequence[Any],
    filter_dilation: Sequence[Any] | None = None,
) -> tuple[Any, ...]:
    """``(batch, output channels, *output spatial lengths)`` of a convolution.

    ``image_shape`` is ``(batch, channels, *spatial)``; ``kernel_shape`` ``(filters, channels,
    *k)`` (unshared: ``(filters, *out, channels, *k)``; only its first and last lengths are
    read). ``border_mode`` is a string, an int, or a tuple with one int or pair per axis.
    Unknown lengths are ``None`` and give ``None``.
    """
    bsize, imshp = image_shape[0], tuple(image_shape[2:])
    convdim = len(image_shape) - 2
    nkern, kshp = kernel_shape[0], tuple(kernel_shape[-convdim:])
    if filter_dilation is None:
        filter_dilation = (1,) * len(subsample)
    modes = border_mode if isinstance(border_mode, tuple) else (border_mode,) * len(subsample)
    out = tuple(
        get_conv_shape_1axis(imshp[i], kshp[i], modes[i], subsample[i], filter_dilation[i])
        for i in range(len(subsample))
    )
    return (bsize, nkern, *out)


def get_conv_gradweights_shape_1axis(
    image_shape: Any, top_shape: Any, border_mode: Any, subsample: Any, dilation: Any
) -> Any:
    """Kernel length along one axis from the image and output lengths.

    None when it cannot be known: a None argument, ``subsample != 1`` or ``'half'`` padding
    (several kernel lengths give the same output there).
    """
    if any(v is None for v in (image_shape, top_shape, border_mode, subsample, dilation)):
        return None
    if const_int(subsample) != 1 or _is(border_mode, "half"):
        return None
    if _is(border_mode, "full"):
        kernel_shape = top_shape - image_shape
    elif _is(border_mode, "valid"):
        kernel_shape = image_shape - top_shape
    else:
        pad_l, pad_r = _pad_pair(border_mode, None)
        kernel_shape = image_shape + pad_l + pad_r - top_shape
    if const_int(dilation) != 1:
        kernel_shape = kernel_shape // dilation
    return kernel_shape + 1


def get_conv_gradweights_shape(
    image_shape: Sequence[Any],
    top_shape: Sequence[Any],
    border_mode: Any,
    subsample: Sequence[Any],
    filter_dilation: Sequence[Any] | None = None,
    num_groups: int = 1,
    unshared: bool = False,
) -> tuple[Any, ...]:
    """The kernel shape of a convolution from its image and output shapes (None where unknown).

    As in Theano 1.0, ``num_groups > 1`` divides the first entry (the output's channel
    count), not the second (the image's), and a dilated length is an int (floor division;
    Theano's was a float).
    """
    nkern, imshp = image_shape[1], tuple(image_shape[2:])
    nchan, topshp = top_shape[1], tuple(top_shape[2:])
    if filter_dilation is None:
        filter_dilation = (1,) * len(subsample)
    if num_groups > 1 and nchan is not None:
        nchan = nchan // num_groups
    modes = border_mode if isinstance(border_mode, tuple) else (border_mode,) * len(subsample)
    out = tuple(
        get_conv_gradweights_shape_1axis(
            imshp[i], topshp[i], modes[i], subsample[i], filter_dilation[i]
        )
        for i in range(len(subsample))
    )
    if unshared:
        return (nchan, *topshp, nkern, *out)
    return (nchan, nkern, *out)


def get_conv_gradinputs_shape_1axis(
    kernel_shape: Any, top_shape: Any, border_mode: Any, subsample: Any, dilation: Any
) -> Any:
    """Image length along one axis from the kernel and output lengths.

    None when it cannot be known: a None argument or ``subsample != 1`` (several image
    lengths give the same output).
    """
    if any(v is None for v in (kernel_shape, top_shape, border_mode, subsample, dilation)):
        return None
    if const_int(subsample) != 1:
        return None
    dil_kernel_shape = (kernel_shape - 1) * dilation + 1
    pad_l, pad_r = _pad_pair(border_mode, dil_kernel_shape)
    image_shape = top_shape + dil_kernel_shape - 1
    if _nonzero(pad_l):
        image_shape -= pad_l
    if _nonzero(pad_r):
        image_shape -= pad_r
    return image_shape


def get_conv_gradinputs_shape(
    kernel_shape: Sequence[Any],
    top_shape: Sequence[Any],
    border_mode: Any,
    subsample: Sequence[Any],
    filter_dilation: Sequence[Any] | None = None,
    num_groups: int = 1,
) -> tuple[Any, ...]:
    """The image shape of a convolution from its kernel and output shapes (None where unknown)."""
    bsize, topshp = top_shape[0], tuple(top_shape[2:])
    convdim = len(top_shape) - 2
    nkern, kshp = kernel_shape[1], tuple(kernel_shape[-convdim:])
    if filter_dilation is None:
        filter_dilation = (1,) * len(subsample)
    if num_groups > 1 and nkern is not None:
        nkern = nkern * num_groups
    modes = border_mode if isinstance(border_mode, tuple) else (border_mode,) * len(subsample)
    out = tuple(
        get_conv_gradinputs_shape_1axis(
            kshp[i], topshp[i], modes[i], subsample[i], filter_dilation[i]
        )
        for i in range(len(subsample))
    )
    return (bsize, nkern, *out)


def check_conv_gradinputs_shape(
    image_shape: Sequence[Any],
    kernel_shape: Sequence[Any],
    output_shape: Sequence[Any],
    border_mode: Any,
    subsample: Sequence[Any],
    filter_dilation: Sequence[Any] | None = None,
) -> bool:
    """False if a convolution of ``image_shape`` by ``kernel_shape`` cannot give
    ``output_shape``; True otherwise (also when symbolic lengths leave it undecided)."""
    image_shape, kernel_shape = tuple(image_shape), tuple(kernel_shape)
    output_shape = tuple(output_shape)
    if len(image_shape) != len(kernel_shape) or len(image_shape) != len(output_shape):
        return False
    if len(image_shape) - 2 != len(subsample):
        return False
    if filter_dilation is not None and len(image_shape) - 2 != len(filter_dilation):
        return False
    computed = get_conv_output_shape(
        image_shape, kernel_shape, border_mode, subsample, filter_dilation
    )
    for given, comp in zip(output_shape, computed, strict=True):
        g, c = _value(given), _value(comp)
        if g is not None and c is not None and g != c:
            return False
    return True


def _value(v: Any) -> int | None:
    """An int for a known length (an int or an integer constant), else None."""
    return None if v is None else const_int(v)


def assert_conv_shape(shape: Sequence[Any]) -> tuple[Any, ...]:
    """``shape`` with each length checked: the first two must be >= 0, the others > 0.

    A known length is checked now (ValueError); a symbolic one is wrapped in an Assert that
    checks it at run time (Theano's function).
    """
    out = []
    for i, n in enumerate(shape):
        c = const_int(n)
        bad = "< 0" if i < 2 else "<= 0"
        if c is not None:
            if (i < 2 and c < 0) or (i >= 2 and c <= 0):
                raise ValueError(
                    f"The convolution would produce an invalid shape (dim[{i}]: {c} {bad})."
                )
            out.append(n)
        elif n is None:
            out.append(n)
        else:
            cond = tm.ge(n, 0) if i < 2 else tm.gt(n, 0)
            msg = f"The convolution would produce an invalid shape (dim[{i}] {bad})."
            out.append(Assert(msg)(n, cond))
    return tuple(out)


def assert_shape(
    x: Any, expected_shape: Sequence[Any] | None, msg: str = "Unexpected shape."
) -> Any:
    """``x`` wrapped in an Assert checking its shape against ``expected_shape`` (None: any).

    As in Theano, only when ``config.conv__assert_shape`` is on; otherwise ``x`` itself. The
    convolution functions check their ``input_shape``/``filter_shape`` always, with
    :class:`ConvShapeCheck` (a ValueError naming the argument).
    """
    if expected_shape is None or not config.conv__assert_shape:
        return x
    x = as_tensor_variable(x)
    tests = [tm.eq(x.shape[i], e) for i, e in enumerate(expected_shape) if e is not None]
    if not tests:
        return x
    return Assert(msg)(x, *tests)


def border_mode_to_pad(mode: Any, convdim: int, kshp: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """``(before, after)`` pads per axis for a border mode, given the (dilated) kernel shape."""
    if isinstance(mode, tuple):
        if len(mode) != convdim:
            raise ValueError(
                f"invalid border_mode {mode} which must be a tuple of length {convdim}"
            )
        border: tuple[tuple[int, int], ...] = ()
        for m in mode:
            if isinstance(m, int | np.integer) and m >= 0:
                border += ((int(m), int(m)),)
            elif (
                isinstance(m, tuple)
                and len(m) == 2
                and all(isinstance(b, int | np.integer) for b in m)
                and min(m) >= 0
            ):
                border += ((int(m[0]), int(m[1])),)
            else:
                raise ValueError(
                    f"invalid border mode {mode}. The tuple can only contain integers or tuples "
                    "of length 2"
                )
        return border
    if mode == "full":
        return tuple((kshp[i] - 1,) * 2 for i in range(convdim))
    if mode == "half":
        return tuple((kshp[i] // 2,) * 2 for i in range(convdim))
    if mode == "valid":
        return ((0, 0),) * convdim
    raise ValueError(
        f'invalid border_mode {mode}, which must be either "valid", "full", "half", an integer '
        f"or a tuple of length {convdim}"
    )


def check_static_conv(
    name: str,
    imshp: Sequence[int | None],
    kshp: Sequence[int | None],
    border_mode: Any,
    subsample: Sequence[int],
    filter_dilation: Sequence[int],
    num_groups: int,
    unshared: bool,
    names: tuple[str, str] = ("input", "filters"),
) -> None:
    """Raise now (ValueError with the user's line) what the known lengths already show wrong.

    ``imshp`` ``(batch, channels, *spatial)`` and ``kshp`` (the filters' shape) hold ints and
    None (unknown). Checked: the channel count against the filters' channels times
    ``num_groups``, the divisibility by ``num_groups``, a (dilated) filter larger than the
    padded input, and an unshared filter's output positions against the output's.
    """
    nd = len(subsample)
    img_name, kern_name = names
    C = imshp[1]
    O = kshp[0]
    Cg = kshp[-nd - 1]
    g = num_groups
    if C is not None and C % g:
        raise conv_error(
            ValueError,
            f"{name}: the {img_name} has {C} channels, which num_groups={g} does not divide",
        )
    if O is not None and O % g:
        raise conv_error(
            ValueError,
            f"{name}: the {kern_name} hold {O} filters, which num_groups={g} does not divide",
        )
    if C is not None and Cg is not None and Cg * g != C:
        raise conv_error(
            ValueError,
            f"{name}: channel mismatch: the {img_name} has {C} channels (axis 1), but the "
            f"{kern_name} expect {Cg * g} ({Cg} per filter x num_groups={g}); expected "
            f"{kern_name} of shape (n_filters, {C // g if C % g == 0 else '?'}, ...), got "
            f"{tuple(kshp)}",
        )
    modes = border_mode if isinstance(border_mode, tuple) else (border_mode,) * nd
    out = []
    for i in range(nd):
        size, k = imshp[2 + i], kshp[len(kshp) - nd + i]
        if size is None or k is None:
            out.append(None)
            continue
        dk = (k - 1) * filter_dilation[i] + 1
        before, after = _pad_pair(modes[i], dk)
        if size + before + after < dk:
            raise conv_error(
                ValueError,
                f"{name}: the {kern_name} are larger than the {img_name} along spatial axis {i}: "
                f"the (dilated) filter length is {dk} (filter {k}, dilation "
                f"{filter_dilation[i]}), the {img_name} length {size} padded by "
                f"({before}, {after}) is {size + before + after}; expected a filter of at most "
                f"the padded {img_name} length (border_mode={border_mode!r})",
            )
        out.append((size + before + after - dk) // subsample[i] + 1)
    if unshared:
        positions = tuple(kshp[1 : 1 + nd])
        for i in range(nd):
            if positions[i] is not None and out[i] is not None and positions[i] != out[i]:
                raise conv_error(
                    ValueError,
                    f"{name}: unshared {kern_name} of shape {tuple(kshp)} hold {positions} "
                    f"output positions, but the convolution produces {tuple(out)}",
                )


class ConvShapeCheck(Op):
    """``x`` itself; at run time a ValueError when ``x.shape`` disagrees with ``expected``.

    ``expected`` holds ints and ``None`` (not checked); ``what`` names the argument that gave
    it (for example ``"conv2d: input_shape"``). The convolution functions put it on their
    inputs when the user gives ``input_shape``/``filter_shape``; its ``infer_shape`` reports
    the given lengths, so shape inference sees them as constants.
    """

    __props__ = ("expected", "what")
    view_map = {0: [0]}

    def __init__(self, expected: Sequence[int | None], what: str) -> None:
        self.expected = tuple(None if e is None else int(e) for e in expected)
        self.what = what

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        if x.type.ndim != len(self.expected):
            raise conv_error(
                TypeError,
                f"{self.what} has {len(self.expected)} elements {self.expected}, but the "
                f"variable has {x.type.ndim} dimensions ({x.type})",
            )
        bad = [
            i
            for i, (e, k) in enumerate(zip(self.expected, known_shape(x), strict=True))
            if e is not None and k is not None and e != k
        ]
        if bad:
            raise conv_error(
                ValueError,
                f"{self.what} is {self.expected}, but the variable's shape is known to be "
                f"{known_shape(x)} (dimension {bad[0]} differs)",
            )
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: Any) -> None:
        (x,) = inputs
        shape = np.shape(x)
        if len(shape) != len(self.expected) or any(
            e is not None and e != s for e, s in zip(self.expected, shape, strict=True)
        ):
            raise ValueError(
                f"{self.what} is {self.expected} (None: any length), but the value given at run "
                f"time has shape {tuple(shape)}"
            )
        output_storage[0][0] = x

    def infer_shape(self, node: Apply, input_shapes: Sequence[Sequence[Any]]) -> list[Any]:
        return [
            tuple(
                s if e is None else e for e, s in zip(self.expected, input_shapes[0], strict=True)
            )
        ]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        return [output_grads[0]]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]) -> list[Any]:
        return [eval_points[0]]

    def __str__(self) -> str:
        return f"ConvShapeCheck{{{self.what}={self.expected}}}"
