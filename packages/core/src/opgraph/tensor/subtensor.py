"""Indexing: ``x[...]`` (``getitem``), ``take``, ``inc_subtensor`` and ``set_subtensor``.

``x[1:3]``, ``x[i, ::2]``, ``x[None, -1]`` and ``x[..., 0]`` build a ``Subtensor`` view
(:mod:`opgraph.tensor.subtensor_basic`); integer arrays and boolean masks go to the
advanced-indexing ops of :mod:`opgraph.tensor.subtensor_advanced`. ``inc_subtensor`` /
``set_subtensor`` turn any indexing result back into an update of the indexed tensor. As in
Theano, the indexing ops can be imported from this module too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph.graph.basic import Variable
from opgraph.tensor import subtensor_advanced as adv
from opgraph.tensor.basic import addbroadcast, as_tensor_variable
from opgraph.tensor.elemwise import DimShuffle
from opgraph.tensor.math import clip
from opgraph.tensor.subtensor_advanced import (
    AdvancedBooleanIncSubtensor,
    AdvancedBooleanSubtensor,
    AdvancedIncSubtensor,
    AdvancedIncSubtensor1,
    AdvancedSubtensor,
    AdvancedSubtensor1,
    MakeSlice,
    NoneConst,
    NoneTypeT,
    SliceType,
    advanced_boolean_inc_subtensor,
    advanced_boolean_set_subtensor,
    advanced_boolean_subtensor,
    advanced_inc_subtensor,
    advanced_inc_subtensor1,
    advanced_set_subtensor,
    advanced_set_subtensor1,
    advanced_subtensor,
    advanced_subtensor1,
    as_index_variable,
    make_slice,
)
from opgraph.tensor.subtensor_basic import (
    AdvancedIndexingError,
    IncSubtensor,
    Subtensor,
    SubtensorPrinter,
    _collapse,
    _convert,
    get_idx_list,
    index_dtypes,
    make_constant,
    slice_length,
)
from opgraph.tensor.type import TensorType

__all__ = [
    "AdvancedBooleanIncSubtensor",
    "AdvancedBooleanSubtensor",
    "AdvancedIncSubtensor",
    "AdvancedIncSubtensor1",
    "AdvancedIndexingError",
    "AdvancedSubtensor",
    "AdvancedSubtensor1",
    "IncSubtensor",
    "MakeSlice",
    "NoneConst",
    "NoneTypeT",
    "SliceType",
    "Subtensor",
    "SubtensorPrinter",
    "advanced_boolean_inc_subtensor",
    "advanced_boolean_set_subtensor",
    "advanced_boolean_subtensor",
    "advanced_inc_subtensor",
    "advanced_inc_subtensor1",
    "advanced_set_subtensor",
    "advanced_set_subtensor1",
    "advanced_subtensor",
    "advanced_subtensor1",
    "as_index_variable",
    "get_idx_list",
    "getitem",
    "inc_subtensor",
    "make_constant",
    "make_slice",
    "set_subtensor",
    "slice_length",
    "take",
]


# ----------------------------------------------------------------------------------------
# getitem and take


def _is_mask(a: Any) -> bool:
    if isinstance(a, Variable):
        return isinstance(a.type, TensorType) and a.type.dtype == "bool"
    if isinstance(a, np.ndarray):
        return a.dtype == bool
    if isinstance(a, list | tuple) and a:
        return np.asarray(a).dtype == bool
    return False


def _consumed(a: Any) -> int:
    """How many dimensions of the indexed tensor an index entry uses."""
    if a is None:
        return 0
    if _is_mask(a):
        return a.type.ndim if isinstance(a, Variable) else np.ndim(a)
    return 1


def _expand_ellipsis(args: tuple[Any, ...], ndim: int) -> tuple[Any, ...]:
    where = [i for i, a in enumerate(args) if a is Ellipsis]
    if len(where) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if not where:
        return args
    i = where[0]
    used = sum(_consumed(a) for a in args if a is not Ellipsis)
    return args[:i] + (slice(None),) * max(ndim - used, 0) + args[i + 1 :]


def _is_basic(a: Any) -> bool:
    if a is None:
        return True
    try:
        _convert(a)
    except AdvancedIndexingError:
        return False
    return True


def _is_full_slice(a: Any) -> bool:
    return isinstance(a, slice) and a.start is None and a.stop is None and a.step is None


def getitem(x: Any, index: Any) -> Variable:
    """``x[index]`` with NumPy's semantics (what ``TensorVariable.__getitem__`` calls).

    Integers, slices (constant, negative or symbolic bounds), ``None`` and ``...`` give a
    ``Subtensor`` view; an integer vector on one axis an ``AdvancedSubtensor1``; other
    integer arrays an ``AdvancedSubtensor``; boolean masks an ``AdvancedBooleanSubtensor``.
    """
    x = as_tensor_variable(x)
    args = index if isinstance(index, tuple) else (index,)
    args = tuple(
        np.array(a, dtype="int64") if isinstance(a, list | tuple) and len(a) == 0 else a
        for a in args
    )
    args = _expand_ellipsis(args, x.type.ndim)
    used = sum(_consumed(a) for a in args)
    if used > x.type.ndim:
        raise ValueError(
            f"too many indices for {x} ({x.type}): the index uses {used} dimension(s), x has "
            f"{x.type.ndim}. HINT: use None (np.newaxis) to add dimensions."
        )
    advanced = [i for i, a in enumerate(args) if not _is_basic(a)]
    if advanced:
        if any(_is_mask(args[i]) for i in advanced):
            return adv.advanced_boolean_subtensor(x, *args)
        if len(advanced) == 1 and all(
            _is_full_slice(a) for i, a in enumerate(args) if i != advanced[0]
        ):
            axis = advanced[0]
            idx = as_tensor_variable(args[axis])
            if idx.type.ndim == 1 and idx.type.dtype in index_dtypes:
                return take(x, idx, axis)
        return adv.advanced_subtensor(x, *args)
    if any(a is None for a in args):
        pattern: list[Any] = []
        new_args: list[Any] = []
        counter = 0
        for a in args:
            if a is None:
                pattern.append("x")
                new_args.append(slice(None))
            else:
                pattern.append(counter)
                counter += 1
                new_args.append(a)
        pattern.extend(range(counter, x.type.ndim))
        view = x.dimshuffle(pattern)
        if all(_is_full_slice(a) for a in new_args):
            return view
        return getitem(view, tuple(new_args))
    args = make_constant(args)
    values = _collapse(args, lambda e: isinstance(e, Variable))
    return Subtensor(args)(x, *values)


def take(a: Any, indices: Any, axis: int | None = None, mode: str = "raise") -> Variable:
    """Elements of ``a`` at ``indices`` along ``axis`` (flattened ``a`` when None), as NumPy.

    ``mode`` is ``'raise'`` (out-of-range indices are an IndexError), ``'wrap'`` or
    ``'clip'``. A vector of indices gives an ``AdvancedSubtensor1``.
    """
    a, indices = as_tensor_variable(a), as_tensor_variable(indices)
    if indices.type.dtype not in index_dtypes:
        raise TypeError(
            f"take: indices ({indices}) must be integers, got dtype {indices.type.dtype}. "
            "HINT: for a boolean mask index with a[mask]."
        )
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"take: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    if axis is None:
        a = a if a.type.ndim == 1 else a.flatten()
        axis = 0
    if not -a.type.ndim <= axis < a.type.ndim:
        raise ValueError(f"take: axis {axis} is out of range for {a} ({a.type})")
    axis %= a.type.ndim
    if mode != "raise":
        length = a.shape[axis]
        indices = clip(indices, 0, length - 1) if mode == "clip" else indices % length
    if indices.type.ndim == 0:
        return getitem(a, (slice(None),) * axis + (indices,))
    if indices.type.ndim != 1:
        return adv.advanced_subtensor(a, *([slice(None)] * axis), indices)
    if axis == 0:
        return adv.advanced_subtensor1(a, indices)
    shuffle = list(range(a.type.ndim))
    shuffle[0], shuffle[axis] = axis, 0
    return adv.advanced_subtensor1(a.dimshuffle(shuffle), indices).dimshuffle(shuffle)


def inc_subtensor(
    x: Any,
    y: Any,
    inplace: bool = False,
    set_instead_of_inc: bool = False,
    tolerate_inplace_aliasing: bool = False,
) -> Variable:
    """Return the tensor indexed by ``x`` (the result of ``t[...]``) with ``t[...] += y``.

    Parameters
    ----------
    x
        The result of indexing a tensor (``t[2:]``, ``t[idx]``, ``t[mask]``, ``t.take(i, 1)``).
    y
        The increment; it broadcasts to ``x``'s shape by its type (at most ``x.ndim`` dims).
    inplace
        Overwrite ``t`` (normally left to the in-place rewrite).
    set_instead_of_inc
        Assign ``y`` instead of adding it (see :func:`set_subtensor`).
    tolerate_inplace_aliasing
        Allow ``t`` and ``y`` to alias when working in place.

    Returns
    -------
    Variable
        A tensor like ``t``. Repeated integer indices accumulate (``np.add.at``).
    """
    x, y = as_tensor_variable(x), as_tensor_variable(y)
    what = "set_subtensor" if set_instead_of_inc else "inc_subtensor"
    if y.type.ndim > x.type.ndim:
        raise TypeError(
            f"{what}: cannot {'set' if set_instead_of_inc else 'increment'} the "
            f"{x.type.ndim}-dimensional subtensor {x} with the {y.type.ndim}-dimensional value "
            f"{y} ({y.type}). HINT: y must have at most as many dimensions as x[...]."
        )
    offset = x.type.ndim - y.type.ndim
    for d in range(y.type.ndim):
        if x.type.broadcastable[d + offset] and not y.type.broadcastable[d]:
            y = addbroadcast(y, d)
    op = x.owner.op if x.owner is not None else None
    if isinstance(op, Subtensor):
        tolerate = [[0, 1]] if tolerate_inplace_aliasing else []
        the_op = IncSubtensor(op.idx_list, inplace, set_instead_of_inc, tolerate)
        return the_op(x.owner.inputs[0], y, *x.owner.inputs[1:])
    if isinstance(op, adv.AdvancedSubtensor1):
        inc1 = adv.AdvancedIncSubtensor1(inplace, set_instead_of_inc)
        return inc1(x.owner.inputs[0], y, x.owner.inputs[1])
    if isinstance(op, adv.BaseAdvancedSubtensor):
        cls = adv.AdvancedBooleanIncSubtensor if op.allow_bool else adv.AdvancedIncSubtensor
        return cls(inplace, set_instead_of_inc)(x.owner.inputs[0], y, *x.owner.inputs[1:])
    if isinstance(op, DimShuffle) and x.owner.inputs[0].owner is not None:
        # take(t, i, axis=k) is t.dimshuffle(s)[i].dimshuffle(s): update the inner indexing.
        inner = x.owner.inputs[0]
        y_order: list[Any] = ["x"] * inner.type.ndim
        for i, v in enumerate(op.new_order):
            if v != "x" and i >= offset:
                y_order[v] = i - offset
        inner_y = y.dimshuffle(y_order) if y.type.ndim else y
        new = inc_subtensor(inner, inner_y, inplace, set_instead_of_inc, tolerate_inplace_aliasing)
        return DimShuffle(new.type.broadcastable, op.new_order)(new)
    raise TypeError(
        f"{what}: x must be the result of indexing a tensor (t[...] or t.take(...)), got {x}"
        + (f", computed by {op}" if op is not None else ", a graph input")
        + ". HINT: write inc_subtensor(t[idx], y), not inc_subtensor(t, y)."
    )


def set_subtensor(
    x: Any, y: Any, inplace: bool = False, tolerate_inplace_aliasing: bool = False
) -> Variable:
    """Return the tensor indexed by ``x`` with ``t[...] = y`` (NumPy's ``r[10:] = 5``).

    ``set_subtensor(r[10:], 5)``; see :func:`inc_subtensor` for the parameters.
    """
    return inc_subtensor(x, y, inplace, True, tolerate_inplace_aliasing)
