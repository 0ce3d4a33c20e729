"""Functions that add, drop or permute a tensor's axes (all built on ``DimShuffle``).

``squeeze``, ``expand_dims``, ``shape_padleft``/``shape_padright``/``shape_padaxis`` and
``transpose``: views of their input, with no data copied.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Variable
from opgraph.tensor.basic import addbroadcast, as_tensor_variable
from opgraph.tensor.elemwise import DimShuffle

__all__ = [
    "expand_dims",
    "shape_padaxis",
    "shape_padleft",
    "shape_padright",
    "squeeze",
    "transpose",
]


def squeeze(x: Any, axis: int | Sequence[int] | None = None) -> Variable:
    """``x`` without its broadcastable dimensions (or only those in ``axis``).

    A dimension named in ``axis`` that is not broadcastable is checked to have length 1 at
    run time (NumPy's rule; Theano 1.0 silently kept it).
    """
    x = as_tensor_variable(x)
    ndim = x.type.ndim
    if axis is None:
        axes = [i for i, b in enumerate(x.type.broadcastable) if b]
    else:
        axes = _normalize_axes(axis, ndim, "squeeze")
        missing = [a for a in axes if not x.type.broadcastable[a]]
        if missing:
            x = addbroadcast(x, *missing)
    return x.dimshuffle([i for i in range(ndim) if i not in axes])  # type: ignore[attr-defined]


def _normalize_axes(axis: Any, ndim: int, what: str) -> list[int]:
    axes = [axis] if isinstance(axis, int | np.integer) else list(axis)
    out = []
    for a in axes:
        if not isinstance(a, int | np.integer):
            raise TypeError(f"{what}: axis must be an int or a sequence of ints, got {axis!r}")
        if not -ndim <= a < ndim:
            raise ValueError(f"{what}: axis {a} is out of range for {ndim} dimension(s)")
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"{what}: repeated axis in {axis!r}")
    return out


def expand_dims(x: Any, axis: int | Sequence[int]) -> Variable:
    """``x`` with new broadcastable length-1 dimensions at positions ``axis`` (NumPy's rule)."""
    x = as_tensor_variable(x)
    n_new = 1 if isinstance(axis, int | np.integer) else len(axis)
    axes = _normalize_axes(axis, x.type.ndim + n_new, "expand_dims")
    pattern: list[Any] = []
    k = 0
    for i in range(x.type.ndim + n_new):
        if i in axes:
            pattern.append("x")
        else:
            pattern.append(k)
            k += 1
    return DimShuffle(x.type.broadcastable, pattern)(x)


def shape_padleft(t: Any, n_ones: int = 1) -> Variable:
    """``t`` with ``n_ones`` broadcastable dimensions added on the left."""
    t = as_tensor_variable(t)
    return DimShuffle(t.type.broadcastable, ["x"] * n_ones + list(range(t.type.ndim)))(t)


def shape_padright(t: Any, n_ones: int = 1) -> Variable:
    """``t`` with ``n_ones`` broadcastable dimensions added on the right."""
    t = as_tensor_variable(t)
    return DimShuffle(t.type.broadcastable, list(range(t.type.ndim)) + ["x"] * n_ones)(t)


def shape_padaxis(t: Any, axis: int) -> Variable:
    """``t`` with a broadcastable dimension inserted at ``axis`` (negative counts from the end)."""
    t = as_tensor_variable(t)
    ndim = t.type.ndim + 1
    if not -ndim <= axis < ndim:
        raise IndexError(f"shape_padaxis: axis {axis} is out of bounds [-{ndim}, {ndim})")
    axis %= ndim
    pattern: list[Any] = list(range(t.type.ndim))
    pattern.insert(axis, "x")
    return DimShuffle(t.type.broadcastable, pattern)(t)


def transpose(x: Any, axes: Sequence[int] | None = None) -> Variable:
    """``x`` with its dimensions permuted by ``axes`` (reversed by default; named ``x.T``)."""
    x = as_tensor_variable(x)
    ndim = x.type.ndim
    default = list(range(ndim - 1, -1, -1))
    if axes is None:
        order = default
    else:
        order = _normalize_axes(list(axes), ndim, "transpose")
        if len(order) != ndim:
            raise ValueError(
                f"transpose: axes {list(axes)} must name each of the {ndim} dimension(s) once"
            )
    out = DimShuffle(x.type.broadcastable, order)(x)
    if x.name and order == default:
        out.name = f"{x.name}.T"
    return out
