"""``inc_subtensor`` / ``set_subtensor`` and ``IncSubtensor``: updating what ``x[...]`` selects.

``inc_subtensor(t[idx], y)`` returns ``t`` with ``t[idx] += y``; it recognises which indexing
op built ``t[idx]`` (``Subtensor``, ``AdvancedSubtensor1``, ``AdvancedSubtensor``, the boolean
one, or the DimShuffles of ``take``) and builds the matching update op. ``y`` broadcasts to the
indexed part by its type: a dimension of length 1 broadcasts only if ``y``'s type says so.
The helpers here (value checks, gradients, R_op) are shared by the advanced update ops.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.op import Op
from opgraph.scalar.type import discrete_dtypes
from opgraph.tensor.basic import addbroadcast, as_tensor_variable, patternbroadcast
from opgraph.tensor.elemwise import DimShuffle
from opgraph.tensor.subtensor import (
    Subtensor,
    _check_index_inputs,
    _convert,
    _floatx,
    _hashable,
    _m,
    _str_indices,
    get_idx_list,
)

__all__ = ["IncSubtensor", "inc_subtensor", "set_subtensor"]


def check_inc_value(op: Any, x: Variable, y: Variable, view_ndim: int, set_: bool) -> None:
    """Build-time checks of the value ``y`` written into a ``view_ndim``-d part of ``x``."""
    if y.type.ndim > view_ndim:
        raise TypeError(
            f"{op}: cannot {'set' if set_ else 'increment'} a {view_ndim}-dimensional "
            f"subtensor of x ({x}, {x.type}) with the {y.type.ndim}-dimensional value y ({y}, "
            f"{y.type}). HINT: y must have at most as many dimensions as the indexed part."
        )
    if not set_ and not np.can_cast(y.type.dtype, x.type.dtype, casting="same_kind"):
        raise TypeError(
            f"{op}: cannot increment x of dtype {x.type.dtype} by y ({y}) of dtype "
            f"{y.type.dtype} (NumPy's same_kind casting forbids it). HINT: cast y first, e.g. "
            f"opgraph.tensor.cast(y, '{x.type.dtype}'), or use set_subtensor."
        )


def check_inc_shape(op: Any, y: np.ndarray, y_bcast: Sequence[bool], target: Sequence[int]) -> None:
    """Runtime check: ``y`` fits the indexed part's ``target`` shape by type-based broadcasting."""
    offset = len(target) - y.ndim
    for d, (n, b) in enumerate(zip(y.shape, y_bcast, strict=True)):
        if not b and n != target[offset + d]:
            raise ValueError(
                f"{op}: y has shape {y.shape} but the indexed part of x has shape "
                f"{tuple(target)}: dimension {d} of y differs and is not broadcastable. "
                "HINT: make y's dimension broadcastable (opgraph.tensor.addbroadcast) if it "
                "has length 1."
            )


class IncSubtensor(Op):
    """``x`` with ``x[idx] += y`` (or ``x[idx] = y`` with ``set_instead_of_inc``).

    Printed as Theano does: ``IncSubtensor{Inc;int64:int64:}``, ``IncSubtensor{Set;:int64:}``,
    ``IncSubtensor{InplaceInc;...}`` when it overwrites ``x`` (``destroy_map = {0: [0]}``).
    """

    __props__ = ("idx_list", "inplace", "set_instead_of_inc")

    def __init__(
        self,
        idx_list: Sequence[Any],
        inplace: bool = False,
        set_instead_of_inc: bool = False,
        destroyhandler_tolerate_aliased: Sequence[Any] | None = None,
    ) -> None:
        self.idx_list = tuple(_convert(e) for e in idx_list)
        self.inplace = bool(inplace)
        self.set_instead_of_inc = bool(set_instead_of_inc)
        self.destroy_map = {0: [0]} if self.inplace else {}
        self.destroyhandler_tolerate_aliased = list(destroyhandler_tolerate_aliased or [])

    def __hash__(self) -> int:
        return hash((type(self), _hashable(self.idx_list), self.inplace, self.set_instead_of_inc))

    def __str__(self) -> str:
        msg = ("Inplace" if self.inplace else "") + ("Set" if self.set_instead_of_inc else "Inc")
        return f"{type(self).__name__}{{{msg};{_str_indices(self.idx_list)}}}"

    def make_node(self, x: Any, y: Any, *inputs: Any) -> Apply:
        x, y = as_tensor_variable(x), as_tensor_variable(y)
        scalars = _check_index_inputs(self, x, inputs)
        view_ndim = x.type.ndim - sum(not isinstance(e, slice) for e in self.idx_list)
        check_inc_value(self, x, y, view_ndim, self.set_instead_of_inc)
        return Apply(self, [x, y, *scalars], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x, y = inputs[0], inputs[1]
        cdata = get_idx_list([x, *inputs[2:]], self.idx_list)
        if not self.inplace:
            x = x.copy()
        view = x[(*cdata, Ellipsis)]
        check_inc_shape(self, y, node.inputs[1].type.broadcastable, view.shape)
        if self.set_instead_of_inc:
            view[...] = y
        else:
            np.add(view, y, out=view, casting="unsafe")
        output_storage[0][0] = x

    def infer_shape(self, node: Apply, input_shapes: Sequence[Sequence[Any]]) -> list[Any]:
        return [tuple(input_shapes[0])]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True], [True]] + [[False] for _ in node.inputs[2:]]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        from opgraph.gradient import DisconnectedType

        (gout,), (x, y), idx = output_grads, inputs[:2], inputs[2:]
        gx, gy = inc_grads(
            self.set_instead_of_inc,
            x,
            y,
            gout,
            lambda g: Subtensor(self.idx_list)(g, *idx),
            lambda g, v: IncSubtensor(self.idx_list, set_instead_of_inc=True)(g, v, *idx),
        )
        return [gx, gy] + [DisconnectedType()() for _ in idx]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]) -> list[Any]:
        return inc_R_op(self, inputs, eval_points)


def inc_grads(
    set_: bool, x: Variable, y: Variable, gout: Variable, index: Any, set_at: Any
) -> tuple[Variable, Variable]:
    """Gradients of ``x`` and ``y`` for any inc/set op.

    ``index(g)`` indexes ``g`` like the op; ``set_at(g, v)`` is ``g`` with that part set to ``v``.
    """
    m = _m()
    if x.type.dtype in discrete_dtypes:
        gx = m.zeros_like(x, dtype=_floatx())
        gy = m.zeros_like(y, dtype=_floatx() if y.type.dtype in discrete_dtypes else None)
        return gx, gy
    gx = set_at(gout, m.zeros_like(y)) if set_ else gout
    return gx, sum_grad_over_bcasted_dims(y, index(gout))


def inc_R_op(op: Op, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]) -> list:
    """R_op of an inc/set op: the same op on the tangents (indices carry none)."""
    ex, ey = eval_points[0], eval_points[1]
    if ex is None and ey is None:
        return [None]
    m = _m()
    ex = m.zeros_like(inputs[0]) if ex is None else ex
    ey = m.zeros_like(inputs[1]) if ey is None else ey
    return [op(ex, ey, *inputs[2:])]


def sum_grad_over_bcasted_dims(y: Variable, gy: Variable) -> Variable:
    """Sum ``gy`` (shaped like the indexed part) down to ``y``'s rank and broadcastable pattern."""
    m = _m()
    extra = gy.type.ndim - y.type.ndim
    if extra:
        gy = m.sum(gy, axis=list(range(extra)))
    axes = [
        i
        for i, (yb, gb) in enumerate(zip(y.type.broadcastable, gy.type.broadcastable, strict=True))
        if yb and not gb
    ]
    if axes:
        gy = m.sum(gy, axis=axes, keepdims=True)
    return patternbroadcast(gy, y.type.broadcastable)


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
    from opgraph.tensor import subtensor_advanced as adv

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
