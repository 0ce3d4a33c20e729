"""Sliding windows over images as rows of a matrix (Theano 1.0's ``tensor.nnet.neighbours``).

:func:`images2neibs` cuts each image of a 4-d tensor ``(batch, channels, rows, cols)`` into
``neib_shape`` patches taken every ``neib_step`` pixels and returns one flattened patch per
row, in the order ``batch, channel, patch row, patch column``; :func:`neibs2images` puts
disjoint patches back. Border modes (Theano's):

- ``valid``: the patches must tile the image exactly (``(rows - r) % step == 0``);
- ``ignore_borders``: pixels past the last whole patch are dropped;
- ``half``: as ``valid`` on the image zero-padded by ``neib_shape // 2`` on each side;
- ``full``: as ``valid`` on the image zero-padded by ``neib_shape - 1`` on each side;
- ``wrap_centered``: one patch centred on every ``step``-th pixel, wrapping around the
  image's edges (odd ``neib_shape`` only, not larger than the image).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.null_type import grad_not_implemented, grad_undefined
from opgraph.graph.op import Op
from opgraph.scalar.type import discrete_dtypes
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.joining import concatenate, stack
from opgraph.tensor.shape import reshape
from opgraph.tensor.structure import zeros
from opgraph.tensor.subtensor import set_subtensor
from opgraph.tensor.type import TensorType

__all__ = ["Images2Neibs", "Images2NeibsGrad", "images2neibs", "neibs2images"]

MODES = ("valid", "ignore_borders", "wrap_centered", "half", "full")
#: Modes whose gradient :class:`Images2NeibsGrad` computes (``wrap_centered`` has none).
GRAD_MODES = ("valid", "ignore_borders", "half", "full")


def _pair(op: Op, value: Any, name: str) -> Variable:
    """``value`` as a 1-d integer tensor, of 2 elements where that is known."""
    v = as_tensor_variable(value)
    if v.type.ndim != 1 or v.type.dtype not in discrete_dtypes:
        raise TypeError(
            f"{op}: {name} must be a vector of 2 ints (rows, columns), got {v} of type {v.type}"
        )
    if isinstance(v, Constant):
        data = np.asarray(v.data)
        if data.shape != (2,):
            raise ValueError(f"{op}: {name} must have 2 elements (rows, columns), got {data}")
        if np.any(data <= 0):
            raise ValueError(f"{op}: {name} values must be positive, got {data.tolist()}")
    return v


def _grid(
    mode: str, height: int, width: int, c: int, d: int, sx: int, sy: int
) -> tuple[int, int, int, int]:
    """``(grid_rows, grid_cols, pad_rows, pad_cols)``: patches per column and row of the
    image, and the zero padding on each side (``valid``-style indexing into the padded
    image); raises ValueError for inconsistent shapes (Theano's conditions)."""
    if mode == "wrap_centered":
        if c % 2 != 1 or d % 2 != 1:
            raise ValueError(
                f"Images2Neibs: mode wrap_centered needs odd neib_shape, got ({c}, {d})"
            )
        if height < c or width < d:
            raise ValueError(
                f"Images2Neibs: in wrap_centered mode, images ({height}, {width}) may not be "
                f"smaller than the patches: neib_shape=({c}, {d})"
            )
        return -(-height // sx), -(-width // sy), 0, 0
    if mode == "ignore_borders":
        if height < c or width < d:
            raise ValueError(
                f"Images2Neibs: neib_shape=({c}, {d}) is larger than the images ({height}, {width})"
            )
        return 1 + (height - c) // sx, 1 + (width - d) // sy, 0, 0
    pad_r, pad_c = {"valid": (0, 0), "half": (c // 2, d // 2), "full": (c - 1, d - 1)}[mode]
    for axis, size, n, step, pad in ((0, height, c, sx, pad_r), (1, width, d, sy, pad_c)):
        span = size + 2 * pad - n
        if size < n or span % step != 0:
            raise ValueError(
                f"Images2Neibs ({mode}): neib_shape[{axis}]={n}, neib_step[{axis}]={step} and "
                f"ten4.shape[{axis + 2}]={size} are not consistent: the image"
                + (f", padded by {pad} on each side," if pad else "")
                + f" must hold a whole number of steps after the first patch (shape - neib "
                f"= {span} is not a multiple of {step}), and neib_shape may not exceed it"
            )
    return (
        1 + (height + 2 * pad_r - c) // sx,
        1 + (width + 2 * pad_c - d) // sy,
        pad_r,
        pad_c,
    )


def _indices(
    mode: str, shape: Sequence[int], neib_shape: np.ndarray, neib_step: np.ndarray
) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Row indices ``(grid_rows, 1, c, 1)`` and column indices ``(1, grid_cols, 1, d)``
    into the image padded by the returned ``(pad_rows, pad_cols)``."""
    if neib_shape.shape != (2,) or neib_step.shape != (2,):
        raise ValueError(
            f"Images2Neibs: neib_shape and neib_step must have 2 elements, got "
            f"{neib_shape.tolist()} and {neib_step.tolist()}"
        )
    c, d = (int(v) for v in neib_shape)
    sx, sy = (int(v) for v in neib_step)
    if c <= 0 or d <= 0:
        raise ValueError(f"Images2Neibs: neib_shape values must be positive, got {[c, d]}")
    if sx <= 0 or sy <= 0:
        raise ValueError(f"Images2Neibs: neib_step values must be positive, got {[sx, sy]}")
    height, width = int(shape[2]), int(shape[3])
    gc, gd, pad_r, pad_c = _grid(mode, height, width, c, d, sx, sy)
    rows = np.arange(gc)[:, None] * sx + np.arange(c)[None, :]
    cols = np.arange(gd)[:, None] * sy + np.arange(d)[None, :]
    if mode == "wrap_centered":
        rows = (rows - c // 2) % height
        cols = (cols - d // 2) % width
    return rows[:, None, :, None], cols[None, :, None, :], pad_r, pad_c


class Images2Neibs(Op):
    """Patches of 4-d images as the rows of a matrix (see the module docstring).

    Inputs ``(ten4, neib_shape, neib_step)``; output ``(batch * channels * grid_rows *
    grid_cols, rows * cols)`` of ``ten4``'s dtype. Gradient :class:`Images2NeibsGrad` for
    every mode but ``wrap_centered``.
    """

    __props__ = ("mode",)

    def __init__(self, mode: str = "valid") -> None:
        if mode not in MODES:
            raise ValueError(f"Images2Neibs: mode must be one of {', '.join(MODES)}; got {mode!r}")
        self.mode = mode

    def __str__(self) -> str:
        return f"{type(self).__name__}{{{self.mode}}}"

    def make_node(self, ten4: Any, neib_shape: Any, neib_step: Any = None) -> Apply:
        ten4 = as_tensor_variable(ten4)
        if ten4.type.ndim != 4:
            raise TypeError(
                f"{self}: ten4 must be a 4-d tensor (batch, channels, rows, columns), got "
                f"{ten4} of type {ten4.type} ({ten4.type.ndim} dimension(s))"
            )
        neib_shape = _pair(self, neib_shape, "neib_shape")
        neib_step = neib_shape if neib_step is None else _pair(self, neib_step, "neib_step")
        if isinstance(neib_shape, Constant) and isinstance(neib_step, Constant):
            height, width = ten4.type.shape[2:]
            if height is not None and width is not None:
                c, d = (int(v) for v in neib_shape.data)
                sx, sy = (int(v) for v in neib_step.data)
                _grid(self.mode, height, width, c, d, sx, sy)
        out = TensorType(ten4.type.dtype, (False, False))()
        return Apply(self, [ten4, neib_shape, neib_step], [out])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        ten4, neib_shape, neib_step = inputs
        rows, cols, pad_r, pad_c = _indices(
            self.mode, ten4.shape, np.asarray(neib_shape), np.asarray(neib_step)
        )
        if pad_r or pad_c:
            ten4 = np.pad(ten4, ((0, 0), (0, 0), (pad_r, pad_r), (pad_c, pad_c)))
        # (batch, channels, grid_rows, grid_cols, c, d): one gather
        patches = ten4[:, :, rows, cols]
        width = rows.shape[2] * cols.shape[3]
        out = patches.reshape(-1, width) if patches.size else np.empty((0, width), ten4.dtype)
        output_storage[0][0] = np.asarray(out, dtype=node.outputs[0].type.dtype)

    def infer_shape(self, node: Apply, shapes: Sequence[Any]) -> list[Any]:
        in_shape = shapes[0]
        neib_shape, neib_step = node.inputs[1], node.inputs[2]
        c, d = neib_shape[0], neib_shape[1]
        sx, sy = neib_step[0], neib_step[1]
        if self.mode == "wrap_centered":
            gc = -((-in_shape[2]) // sx)
            gd = -((-in_shape[3]) // sy)
        elif self.mode in ("valid", "ignore_borders"):
            gc = 1 + (in_shape[2] - c) // sx
            gd = 1 + (in_shape[3] - d) // sy
        elif self.mode == "half":
            gc = 1 + (in_shape[2] - c % 2) // sx
            gd = 1 + (in_shape[3] - d % 2) // sy
        else:  # full
            gc = 1 + (in_shape[2] + c - 2) // sx
            gd = 1 + (in_shape[3] + d - 2) // sy
        return [(gc * gd * in_shape[1] * in_shape[0], c * d)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list:
        x, neib_shape, neib_step = inputs
        (gz,) = output_grads
        if self.mode in GRAD_MODES:
            gx = Images2NeibsGrad(self.mode)(gz, x.shape, neib_shape, neib_step)
        else:
            gx = grad_not_implemented(
                self, 0, x, "Theano has no gradient for mode wrap_centered either."
            )
        return [gx, grad_undefined(self, 1, neib_shape), grad_undefined(self, 2, neib_step)]


class Images2NeibsGrad(Op):
    """The gradient of :class:`Images2Neibs`: each patch row added back where it was taken.

    Inputs ``(gz, image_shape, neib_shape, neib_step)``; output a 4-d tensor of
    ``image_shape`` (pixels in several patches get the sum of their gradients, pixels in
    none, or in the zero padding, get nothing). Its gradient is :class:`Images2Neibs`.
    """

    __props__ = ("mode",)

    def __init__(self, mode: str = "valid") -> None:
        if mode not in GRAD_MODES:
            raise ValueError(
                f"Images2NeibsGrad: mode must be one of {', '.join(GRAD_MODES)}; got {mode!r} "
                "(Images2Neibs has no gradient in mode wrap_centered)"
            )
        self.mode = mode

    def __str__(self) -> str:
        return f"{type(self).__name__}{{{self.mode}}}"

    def make_node(self, gz: Any, image_shape: Any, neib_shape: Any, neib_step: Any) -> Apply:
        gz = as_tensor_variable(gz)
        if gz.type.ndim != 2:
            raise TypeError(f"{self}: gz must be a matrix, got {gz} of type {gz.type}")
        image_shape = as_tensor_variable(image_shape)
        if image_shape.type.ndim != 1 or image_shape.type.dtype not in discrete_dtypes:
            raise TypeError(f"{self}: image_shape must be a vector of 4 ints, got {image_shape}")
        neib_shape = _pair(self, neib_shape, "neib_shape")
        neib_step = _pair(self, neib_step, "neib_step")
        out = TensorType(gz.type.dtype, (False,) * 4)()
        return Apply(self, [gz, image_shape, neib_shape, neib_step], [out])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        gz, image_shape, neib_shape, neib_step = inputs
        shape = tuple(int(s) for s in image_shape)
        if len(shape) != 4:
            raise ValueError(f"{self}: image_shape must have 4 elements, got {shape}")
        rows, cols, pad_r, pad_c = _indices(
            self.mode, shape, np.asarray(neib_shape), np.asarray(neib_step)
        )
        gc, c, gd, d = rows.shape[0], rows.shape[2], cols.shape[1], cols.shape[3]
        n, ch = shape[0], shape[1]
        if gz.shape != (n * ch * gc * gd, c * d):
            raise ValueError(
                f"{self}: gz has shape {gz.shape}, but images of shape {shape} with "
                f"neib_shape={np.asarray(neib_shape).tolist()} give "
                f"{(n * ch * gc * gd, c * d)}"
            )
        dtype = node.outputs[0].type.dtype
        padded = np.zeros((n, ch, shape[2] + 2 * pad_r, shape[3] + 2 * pad_c), dtype=dtype)
        g6 = gz.reshape(n, ch, gc, gd, c, d)
        sx, sy = (int(v) for v in neib_step)
        # one strided add per position inside the patch (c * d of them)
        for i in range(c):
            for j in range(d):
                padded[:, :, i : i + gc * sx : sx, j : j + gd * sy : sy] += g6[:, :, :, :, i, j]
        out = padded[:, :, pad_r : pad_r + shape[2], pad_c : pad_c + shape[3]]
        output_storage[0][0] = np.ascontiguousarray(out)

    def infer_shape(self, node: Apply, shapes: Sequence[Any]) -> list[Any]:
        image_shape = node.inputs[1]
        return [tuple(image_shape[k] for k in range(4))]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list:
        _gz, image_shape, neib_shape, neib_step = inputs
        (g,) = output_grads
        return [
            Images2Neibs(self.mode)(g, neib_shape, neib_step),
            grad_undefined(self, 1, image_shape),
            grad_undefined(self, 2, neib_shape),
            grad_undefined(self, 3, neib_step),
        ]


def images2neibs(
    ten4: Any, neib_shape: Any, neib_step: Any = None, mode: str = "valid"
) -> Variable:
    """The ``neib_shape`` patches of the images ``ten4`` (4-d), one flattened patch a row.

    ``neib_step`` (default ``neib_shape``: disjoint patches) is the distance between patches;
    ``mode`` one of ``valid``, ``ignore_borders``, ``half``, ``full``, ``wrap_centered`` (see
    the module docstring). Row order: batch, channel, patch row, patch column.
    """
    return Images2Neibs(mode)(ten4, neib_shape, neib_step)


def neibs2images(neibs: Any, neib_shape: Any, original_shape: Any, mode: str = "valid") -> Variable:
    """The images of ``original_shape`` whose disjoint ``neib_shape`` patches are ``neibs``.

    The inverse of :func:`images2neibs` with the default step, for modes ``valid`` and
    ``ignore_borders`` (the dropped border comes back as zeros).
    """
    if mode not in ("valid", "ignore_borders"):
        raise ValueError(f"neibs2images supports modes 'valid' and 'ignore_borders', got {mode!r}")
    neibs = as_tensor_variable(neibs)
    if neibs.type.ndim != 2:
        raise TypeError(f"neibs2images: neibs must be a matrix, got {neibs} of type {neibs.type}")
    neib_shape = as_tensor_variable(neib_shape)
    original_shape = as_tensor_variable(original_shape)
    # The patches of one image row side by side are one (neib rows, image cols) strip.
    new_neib_shape = stack([original_shape[-1] // neib_shape[1], neib_shape[1]])
    output_2d = images2neibs(neibs.dimshuffle("x", "x", 0, 1), new_neib_shape, mode=mode)
    if mode == "valid":
        return reshape(output_2d, original_shape, ndim=4)
    valid_shape = original_shape
    for axis, k in ((2, 0), (3, 1)):
        whole = (valid_shape[axis] // neib_shape[k]) * neib_shape[k]
        valid_shape = set_subtensor(valid_shape[axis], whole)
    output_4d = reshape(output_2d, valid_shape, ndim=4)
    for axis in (2, 3):
        pad_shape = [output_4d.shape[k] for k in range(4)]
        pad_shape[axis] = original_shape[axis] - valid_shape[axis]
        output_4d = concatenate([output_4d, zeros(pad_shape, dtype=neibs.type.dtype)], axis=axis)
    return output_4d
