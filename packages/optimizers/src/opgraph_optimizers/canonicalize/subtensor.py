"""Indexing an indexing result: ``x[a:b:c][d:e:f] -> x[merged]``, one Subtensor view; indexing an
elementwise result: ``f(x, y)[idx] -> f(x[idx], y[idx])`` (:func:`local_subtensor_lift`).

:func:`merge_two_slices` (Theano's helper, Theano's signature) turns a slice and the slice or
integer applied after it into one slice or one integer, for any bounds and steps NumPy takes:
None, negative, constant or symbolic. :func:`local_subtensor_merge` applies it dimension by
dimension to a ``Subtensor`` of a ``Subtensor``.

The merged bounds are exact graphs of int64 scalars where signs are unknown; every part that is
known when the rewrite runs is computed in Python, so ``x[1:][::2]`` becomes ``x[1::2]`` with
constant bounds. The reasoning behind the formulas, for a slice ``s1`` picking ``m`` items of
a dimension of length ``n`` (the ``k``-th is ``a + k*s``) and a slice ``s2`` picking ``r`` of
those (the ``j``-th is item ``c + j*t``):

- the result starts at ``a + c*s``, steps by ``s*t``, and holds ``r`` items: it is
  ``slice(a + c*s, a + c*s + r*s*t, s*t)``, where a negative stop (a negative step that runs
  past index 0) is written ``-n - 1``, NumPy's "before the first item";
- ``a`` and ``c`` only have to be right when the result is not empty: when ``r`` is 0 the
  slice reads ``slice(v, v, step)``, empty for every ``v`` (NumPy clips start and stop alike);
- when ``s2`` runs to the end (``t > 0``, no stop), the result ends where ``s1`` ends and its
  stop is ``s1``'s own; when both steps are positive and ``s2``'s stop is a known count, the
  stop is ``a + stop2*s`` (clipped by ``s1``'s known stop). Both spare the count ``r``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import opgraph.tensor.math as tm
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.rewriting import node_rewriter
from opgraph.scan_module.scan_op import Scan
from opgraph.tensor.basic import (
    ScalarFromTensor,
    TensorFromScalar,
    as_tensor_variable,
    constant,
    patternbroadcast,
)
from opgraph.tensor.elemwise import Elemwise
from opgraph.tensor.shape import shape_i
from opgraph.tensor.subtensor import Subtensor, get_idx_list, make_constant, slice_length
from opgraph.tensor.subtensor_basic import index_dtypes
from opgraph_optimizers.registry import rewrites

__all__ = ["local_subtensor_lift", "local_subtensor_merge", "merge_two_slices"]

#: An index value while merging: a Python int when known, else an int64 0-d tensor.
Index = Any


# ----------------------------------------------------------------------------------------
# Integer arithmetic that stays in Python while the values are known


def _known(v: Any) -> int | None:
    """The Python int behind ``v`` (an int, an integer constant, a scalar/tensor conversion of
    one), or None when it is only known at run time."""
    if isinstance(v, bool | np.bool_):
        return None
    if isinstance(v, int | np.integer):
        return int(v)
    if isinstance(v, Constant):
        data = np.asarray(v.data)
        if data.size == 1 and data.dtype.kind in "iu":
            return int(data.reshape(()))
        return None
    owner = getattr(v, "owner", None)
    if owner is not None and isinstance(owner.op, ScalarFromTensor | TensorFromScalar):
        return _known(owner.inputs[0])
    return None


def _index(v: Any) -> Index:
    """``v`` as a Python int if known, else as an int64 tensor (0-d for an index)."""
    known = _known(v)
    if known is not None:
        return known
    owner = getattr(v, "owner", None)
    if owner is not None and isinstance(owner.op, ScalarFromTensor):
        v = owner.inputs[0]  # a Subtensor's view of the user's 0-d tensor: use the tensor
    t = as_tensor_variable(v)
    if t.type.dtype not in index_dtypes:
        raise TypeError(
            f"merge_two_slices: slice bounds, lengths and indices must be integers, got "
            f"{v} ({t.type}). HINT: cast it, e.g. opgraph.tensor.cast(i, 'int64')."
        )
    return t if t.type.dtype == "int64" else tm.cast(t, "int64")


def _tensor(v: Index) -> Variable:
    return constant(v, dtype="int64") if isinstance(v, int) else v


def _add(a: Index, b: Index) -> Index:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if isinstance(b, int) and b == 0:
        return a
    if isinstance(a, int) and a == 0:
        return b
    return tm.add(_tensor(a), _tensor(b))


def _mul(a: Index, b: Index) -> Index:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    for p, q in ((a, b), (b, a)):
        if isinstance(p, int) and p in (0, 1):
            return q if p == 1 else 0
        if isinstance(p, int) and p == -1:
            return tm.neg(q)
    return tm.mul(_tensor(a), _tensor(b))


def _lt(a: Index, b: Index) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        return a < b
    return tm.lt(_tensor(a), _tensor(b))


def _and(a: Any, b: Any) -> Any:
    if isinstance(a, bool) or isinstance(b, bool):
        known, other = (a, b) if isinstance(a, bool) else (b, a)
        return other if known else False
    return tm.and_(a, b)


def _switch(cond: Any, a: Index, b: Index) -> Index:
    if isinstance(cond, bool):
        return a if cond else b
    if a is b or (isinstance(a, int) and isinstance(b, int) and a == b):
        return a
    return tm.switch(cond, _tensor(a), _tensor(b))


def _minimum(a: Index, b: Index) -> Index:
    return _switch(_lt(a, b), a, b)


def _maximum(a: Index, b: Index) -> Index:
    return _switch(_lt(a, b), b, a)


def _sign(v: Index) -> int | None:
    """+1 or -1 when ``v``'s sign is known (0 counts as positive here), else None."""
    return None if not isinstance(v, int) else (-1 if v < 0 else 1)


# ----------------------------------------------------------------------------------------
# merge_two_slices


def _first(start: Index | None, step: Index, length: Index) -> Index:
    """The first index ``slice(start, _, step)`` picks of ``length`` items, when it picks any.

    When it picks none, the value is at or beyond the slice's (normalized) stop in the
    step's direction, never clipped back in front of it: the shortcuts of
    :func:`merge_two_slices` that keep a stop rely on it to stay empty.
    """
    neg = _lt(step, 0)
    if start is None:
        return _switch(neg, _add(length, -1), 0)
    wrapped = _switch(_lt(start, 0), _add(start, length), start)
    return _switch(neg, _minimum(wrapped, _add(length, -1)), _maximum(wrapped, 0))


def _before_first(length: Index) -> Index:
    """``-length - 1``: as a start or stop with a negative step, "before item 0"."""
    return _add(_mul(length, -1), -1)


def _parts(entry: slice) -> tuple[Index | None, Index | None, Index]:
    """``entry``'s start, stop and step as indices (None kept; a None step is 1)."""
    start, stop, step = (
        None if p is None else _index(p) for p in (entry.start, entry.stop, entry.step)
    )
    if isinstance(step, int) and step == 0:
        raise ValueError(f"merge_two_slices: slice step cannot be zero (in {entry})")
    return start, stop, (1 if step is None else step)


def _is_full(entry: slice) -> bool:
    """Whether ``entry`` is ``:`` (``0::1`` included): every item, in order."""
    return (
        (entry.start is None or _known(entry.start) == 0)
        and entry.stop is None
        and (entry.step is None or _known(entry.step) == 1)
    )


def _tidy(start: Any, stop: Any, step: Index) -> slice:
    """``slice(start, stop, step)`` without the parts that say the default (``0``, ``1``)."""
    if isinstance(step, int) and step > 0 and isinstance(start, int) and start == 0:
        start = None
    return slice(start, stop, None if isinstance(step, int) and step == 1 else step)


def _merge_index(a: Index, s: Index, n: Index, i: Index, m: Index) -> Index:
    """The index of ``x`` that item ``i`` of ``x[s1]`` (``m`` items) is; ``n`` if ``i`` is out
    of range, which makes the merged Subtensor raise NumPy's IndexError."""
    c = _switch(_lt(i, 0), _add(i, m), i)
    in_range = _and(_lt(i, m), _lt(-1, _add(i, m)))  # -m <= i < m
    if _sign(s) is None:
        # a zero step (NumPy's ValueError) has no index: make it an IndexError at least
        in_range = _and(in_range, tm.neq(s, 0))
    return _switch(in_range, _add(a, _mul(c, s)), n)


def merge_two_slices(slice1: slice, len1: Any, slice2: Any, len2: Any) -> Any:
    """One slice (or index) equal to applying ``slice1`` then ``slice2`` (Theano's helper).

    Parameters
    ----------
    slice1
        A slice of a dimension of length ``len1``; bounds and step are None, ints or integer
        scalars (constant or symbolic), negative ones included.
    len1
        The length of the dimension ``slice1`` is applied to.
    slice2
        A slice, or an integer index, applied to the result of ``slice1``.
    len2
        The length of that result (``len(range(len1)[slice1])``).

    Returns
    -------
    slice or index
        ``merged`` with ``x[merged] == x[slice1][slice2]`` for every ``x`` whose dimension
        has length ``len1``: a slice when ``slice2`` is one, else an index, which is out of
        range (so indexing raises IndexError) exactly when ``slice2`` is. Its parts are
        Python ints where everything they depend on is known, else int64 0-d tensors; when
        one of the slices is ``:``, the other is returned as given. (The graphs are
        elementwise: integer vectors of bounds and lengths merge many slices at once, which
        the tests use.)

    Raises
    ------
    ValueError
        ``slice1`` is not a slice, or a step is a known zero (NumPy's error for it).
    TypeError
        A bound, length or index is not an integer.
    """
    if not isinstance(slice1, slice):
        raise ValueError(
            f"merge_two_slices: the first index must be a slice, got {slice1!r}. HINT: an "
            "integer index drops its dimension; merge only the indices after it."
        )
    start1, stop1, s = _parts(slice1)
    second = _parts(slice2) if isinstance(slice2, slice) else _index(slice2)
    if _is_full(slice1):
        return slice2
    if isinstance(slice2, slice) and _is_full(slice2):
        return slice1
    n, m = _index(len1), _index(len2)
    a = _first(start1, s, n)
    if not isinstance(second, tuple):
        return _merge_index(a, s, n, second, m)
    start2, stop2, t = second
    c = _first(start2, t, m)
    start, step = _add(a, _mul(c, s)), _mul(s, t)
    if stop2 is None and _sign(t) == 1:
        # slice2 runs to the end of slice1's items: the merged slice ends where slice1 does
        if _sign(s) != 1:
            start = _switch(_lt(start, 0), _before_first(n), start)
        return _tidy(start, slice1.stop, step)
    if _sign(s) == 1 and _sign(t) == 1 and isinstance(stop2, int) and stop2 >= 0:
        # both steps positive, slice2 stops after a known count: so does the merged slice
        if stop1 is None:
            return _tidy(start, _add(a, _mul(stop2, s)), step)
        if isinstance(stop1, int) and stop1 >= 0:
            return _tidy(start, _minimum(_add(a, _mul(stop2, s)), stop1), step)
    count = slice_length(slice(start2, stop2, t), m)
    count = count if isinstance(count, int) else _index(count)
    stop = _add(start, _mul(count, step))
    if _sign(step) != 1:
        stop = _switch(_and(_lt(stop, 0), _lt(0, count)), _before_first(n), stop)
    return _tidy(start, stop, step)


# ----------------------------------------------------------------------------------------
# local_subtensor_merge


def _has_zero_step(idx: Any) -> bool:
    return any(isinstance(e, slice) and _known(e.step) == 0 for e in idx)


def _length_after(fgraph: Any, u: Variable, j: int, entry: slice, len1: Any) -> Any:
    """Length of dimension ``j`` of ``u = x[..., entry, ...]``: the shape feature's if the
    graph has one, else computed from ``entry`` and the length ``len1`` it slices."""
    feature = getattr(fgraph, "shape_feature", None)
    shapes = getattr(feature, "shape_of", {}) if feature is not None else {}
    if u in shapes and shapes[u] is not None:
        return shapes[u][j]
    return slice_length(entry, len1)


@rewrites.canonicalize
@rewrites.specialize
@node_rewriter([Subtensor])
def local_subtensor_merge(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``x[idx1][idx2] -> x[merged]``: one Subtensor (still a view of ``x``) instead of two.

    Each slice of ``idx1`` is merged with the entry of ``idx2`` that indexes its result
    (:func:`merge_two_slices`); integers of ``idx1`` dropped their dimension and stay as they
    are; entries beyond either list index the dimensions ``x`` has beyond them.

    Left alone: indexing of a Scan output, whose chain ``buf[lag:][-k]`` (what ``scan()``
    returns, then indexed) ``scan_save_mem`` reads to shrink the loop's buffer (it needs
    constant indices, and the merged ones are graphs of the buffer's length); a known zero
    step, which must still raise NumPy's ValueError.
    """
    u = node.inputs[0]
    if u.owner is None or not isinstance(u.owner.op, Subtensor):
        return None
    x = u.owner.inputs[0]
    if x.owner is not None and isinstance(x.owner.op, Scan):
        return None  # scan_save_mem (after canonicalize) reads scan()'s ``buf[lag:][-k]``
    idx1 = get_idx_list(u.owner.inputs, u.owner.op.idx_list)
    idx2 = get_idx_list(node.inputs, node.op.idx_list)
    if _has_zero_step(idx1) or _has_zero_step(idx2):
        return None  # x[::0] raises at run time; keep the node that raises it
    merged: list[Any] = []
    j = 0
    for i, entry in enumerate(idx1):
        if not isinstance(entry, slice):
            merged.append(entry)
        elif j == len(idx2):
            merged.extend(idx1[i:])
            break
        else:
            len1 = shape_i(x, i, fgraph)
            len2 = _length_after(fgraph, u, j, entry, len1)
            merged.append(merge_two_slices(entry, len1, idx2[j], len2))
            j += 1
    else:
        merged.extend(idx2[j:])
    merged_idx = make_constant(merged)
    values = Subtensor.collapse(merged_idx, lambda e: isinstance(e, Variable))
    out = Subtensor(merged_idx)(x, *values)
    orig = node.outputs[0]
    if out.type != orig.type:
        out = patternbroadcast(out, orig.type.broadcastable)
    return [out]


@rewrites.canonicalize
@rewrites.specialize
@node_rewriter([Subtensor])
def local_subtensor_lift(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``f(x, y)[idx] -> f(x[idx], y[idx])``: compute an elementwise result only where it is
    indexed (Theano's rewrite of the same name).

    The Elemwise result must have no other client. Each input is indexed, except one
    broadcastable in every dimension, which is left alone (dimshuffled down to the result's
    rank when the index drops dimensions); an input broadcastable in only some dimensions
    stops the rewrite, as its indexing would differ from the result's. So a mean's divisor,
    ``cast(shape(x))[0]``, becomes ``cast(shape(x)[0])`` and then ``cast(Shape_i{0}(x))``.
    """
    u = node.inputs[0]
    inner = u.owner
    if (
        inner is None
        or type(inner.op) is not Elemwise
        or inner.op.inplace_pattern
        or len(inner.outputs) != 1
        or len(u.clients) != 1  # type: ignore[attr-defined]
    ):
        return None
    idx = node.inputs[1:]
    out = node.outputs[0]
    args: list[Variable] = []
    for i in inner.inputs:
        flags = i.type.broadcastable  # type: ignore[attr-defined]
        if not any(flags):
            args.append(node.op(i, *idx))
        elif all(flags):
            keep = i if i.type.ndim == out.type.ndim else i.dimshuffle(["x"] * out.type.ndim)
            args.append(keep)
        else:
            return None
    new = inner.op(*args)
    return [new] if new.type == out.type else None
