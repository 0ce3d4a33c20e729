"""Basic indexing: the ``Subtensor`` op (``x[1:3]``, ``x[i, ::2]``) and its update twin
``IncSubtensor``, with the index helpers the advanced-indexing ops share.

``Subtensor``'s op stores the index *structure* (``idx_list``) and its inputs are the index
*values* (integer scalars, constant or symbolic), as in Theano 1.0: ``x[1:3]`` prints
``Subtensor{int64:int64:}``. Each op's gradient is built with the other, so they live
together. The functions users call (``x[...]``, ``take``, ``inc_subtensor``) are in
:mod:`opgraph.tensor.subtensor`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

import opgraph.scalar.basic as ps
import opgraph.tensor.math as tm
from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.null_type import disconnected_type
from opgraph.graph.op import Op
from opgraph.printing.pprint import pprint
from opgraph.scalar.type import ScalarType, discrete_dtypes, get_scalar_type
from opgraph.tensor.basic import (
    ScalarFromTensor,
    TensorFromScalar,
    as_tensor_variable,
    patternbroadcast,
    scalar_from_tensor,
)
from opgraph.tensor.type import TensorType

__all__ = [
    "AdvancedIndexingError",
    "IncSubtensor",
    "Subtensor",
    "SubtensorPrinter",
    "get_idx_list",
    "make_constant",
    "slice_length",
]


#: dtypes accepted for an integer index (Theano took only the signed ones).
index_dtypes = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


class AdvancedIndexingError(TypeError):
    """An index entry that basic indexing (``Subtensor``) cannot take: an array or a mask."""


def _floatx() -> str:
    return str(config.floatX)


# ----------------------------------------------------------------------------------------
# Index conversion helpers


def make_constant(args: Sequence[Any]) -> tuple[Any, ...]:
    """Turn Python/NumPy integers of an index (also inside slices) into int64 ScalarConstants."""

    def conv(a: Any) -> Any:
        if isinstance(a, slice):
            return slice(conv(a.start), conv(a.stop), conv(a.step))
        if isinstance(a, int | np.integer) and not isinstance(a, bool | np.bool_):
            return ps.constant(int(a), dtype="int64")
        return a

    return tuple(conv(a) for a in args)


def _index_scalar_type(entry: Any) -> ScalarType | None:
    """The ScalarType of an integer scalar index (symbolic or a Type), or None."""
    t = entry.type if isinstance(entry, Variable) else entry
    if isinstance(t, ScalarType) or (isinstance(t, TensorType) and t.ndim == 0):
        if t.dtype in index_dtypes:
            return get_scalar_type(t.dtype)
        what = entry if isinstance(entry, Variable) else t
        raise TypeError(
            f"an index must be an integer, got {what} of dtype {t.dtype}. "
            "HINT: cast it, e.g. opgraph.tensor.cast(i, 'int64')."
        )
    return None


def _convert(entry: Any, slice_ok: bool = True) -> Any:
    """One ``idx_list`` entry: a ScalarType for a symbolic int, an int, or a slice of those."""
    if isinstance(entry, bool | np.bool_):
        raise TypeError(
            f"a boolean scalar ({entry!r}) is not a valid index. HINT: index with an integer, "
            "or with a boolean array (a mask) of the indexed dimensions' shape."
        )
    stype = _index_scalar_type(entry)
    if stype is not None:
        return stype
    if isinstance(entry, int | np.integer):
        return int(entry)
    if slice_ok and isinstance(entry, slice):
        parts = [entry.start, entry.stop, entry.step]
        if parts[1] == sys.maxsize:
            parts[1] = None
        return slice(*(None if p is None else _convert(p, False) for p in parts))
    if not slice_ok and isinstance(entry, Variable | np.ndarray | list | tuple | slice):
        raise TypeError(f"slice bounds must be integer scalars or None, got {entry!r}")
    raise AdvancedIndexingError(f"invalid index entry for basic indexing: {entry!r}")


def _str_indices(idx_list: Sequence[Any]) -> str:
    return ", ".join(
        Subtensor.str_from_slice(e) if isinstance(e, slice) else str(e) for e in idx_list
    )


def _hashable(idx_list: Sequence[Any]) -> tuple[Any, ...]:
    return tuple((e.start, e.stop, e.step) if isinstance(e, slice) else e for e in idx_list)


def _collapse(idx_list: Sequence[Any], cond: Any) -> list[Any]:
    """The entries (slice bounds flattened in order) satisfying ``cond``."""
    out = []
    for entry in idx_list:
        parts = [entry.start, entry.stop, entry.step] if isinstance(entry, slice) else [entry]
        out.extend(p for p in parts if cond(p))
    return out


def get_idx_list(inputs: Sequence[Any], idx_list: Sequence[Any]) -> tuple[Any, ...]:
    """``idx_list`` with each Type placeholder replaced by the next of ``inputs[1:]``."""
    values = iter(inputs[1:])

    def conv(entry: Any) -> Any:
        if isinstance(entry, slice):
            return slice(conv(entry.start), conv(entry.stop), conv(entry.step))
        if isinstance(entry, ScalarType):
            return next(values)
        return entry

    return tuple(conv(e) for e in idx_list)


def _as_scalar_index(a: Any) -> Variable:
    if isinstance(a, Variable) and isinstance(a.type, TensorType):
        return scalar_from_tensor(a)
    return ps.as_scalar(a)


def _constant_int(v: Any) -> int | None:
    """The Python int behind a constant index or shape value, or None if symbolic."""
    if isinstance(v, int | np.integer):
        return int(v)
    if isinstance(v, Constant):
        return int(np.asarray(v.data))
    if (
        isinstance(v, Variable)
        and v.owner is not None
        and isinstance(v.owner.op, ScalarFromTensor | TensorFromScalar)
    ):
        return _constant_int(v.owner.inputs[0])
    return None


# ----------------------------------------------------------------------------------------
# Slice lengths for infer_shape: Python ints when everything is known, int64 graphs otherwise


def _as_dim(v: Any) -> Any:
    known = _constant_int(v)
    if known is not None:
        return known
    t = as_tensor_variable(v)
    return t if t.type.dtype == "int64" else tm.cast(t, "int64")


def _switch(cond: Any, a: Any, b: Any) -> Any:
    if isinstance(cond, bool | np.bool_):
        return a if cond else b
    return tm.switch(cond, a, b)


def _lt(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        return a < b
    return tm.lt(a, b)


def slice_length(entry: slice, length: Any) -> Any:
    """Number of elements ``entry`` selects from a dimension of ``length`` (NumPy's rules).

    Bounds and length may be ints or symbolic integer scalars; the result is an int when all
    are known, else an int64 0-d tensor.
    """
    start, stop, step = (
        None if p is None else _as_dim(p) for p in (entry.start, entry.stop, entry.step)
    )
    length = _as_dim(length)
    if isinstance(length, int) and all(
        p is None or isinstance(p, int) for p in (start, stop, step)
    ):
        if step == 0:
            raise ValueError("slice step cannot be zero")
        return len(range(*slice(start, stop, step).indices(length)))
    if start in (None, 0) and stop is None and step in (None, 1):
        return length
    step = 1 if step is None else step
    neg = step < 0 if isinstance(step, int) else tm.lt(step, 0)

    def adjust(v: Any, default: Any) -> Any:
        if v is None:
            return default
        v = _switch(_lt(v, 0), v + length, v)
        v = _switch(_lt(v, 0), _switch(neg, -1, 0), v)
        return _switch(_lt(v, length), v, _switch(neg, length - 1, length))

    start = adjust(start, _switch(neg, length - 1, 0))
    stop = adjust(stop, _switch(neg, -1, length))
    pos_len = neg_len = 0
    if neg is not True:
        pos_len = _switch(_lt(start, stop), (stop - start - 1) // step + 1, 0)
    if neg is not False:
        neg_len = _switch(_lt(stop, start), (start - stop - 1) // (-step) + 1, 0)
    return _as_dim(_switch(neg, neg_len, pos_len))


# ----------------------------------------------------------------------------------------
# Subtensor


def _check_index_inputs(op: Any, x: Variable, inputs: Sequence[Any]) -> list[Variable]:
    """Validate ``inputs`` against ``op.idx_list`` for tensor ``x``; return them as scalars."""
    if len(op.idx_list) > x.type.ndim:
        raise ValueError(
            f"{op}: the index has {len(op.idx_list)} entries but x ({x}, {x.type}) has only "
            f"{x.type.ndim} dimension(s). HINT: use None (np.newaxis) or x.dimshuffle to add "
            "dimensions."
        )
    expected = _collapse(op.idx_list, lambda e: isinstance(e, ScalarType))
    # Python ints become constants of the expected dtype; anything else must match it.
    padded = [*expected, *[None] * max(len(inputs) - len(expected), 0)]
    scalars = [
        _as_scalar_index(a)
        if t is None or not isinstance(a, int | np.integer) or isinstance(a, bool)
        else ps.constant(int(a), dtype=t.dtype)
        for a, t in zip(inputs, padded, strict=False)
    ]
    if len(scalars) != len(expected):
        raise TypeError(
            f"{op} needs {len(expected)} index input(s) after x, got {len(scalars)}: {scalars}"
        )
    for k, (s, t) in enumerate(zip(scalars, expected, strict=True)):
        if s.type != t:
            raise TypeError(
                f"{op}: index input {k + 1} ({s}) must be an integer scalar of type {t}, got "
                f"type {s.type}. HINT: build the op from the index itself, e.g. x[i]."
            )
    return scalars


class Subtensor(Op):
    """``x[idx]`` for integers and slices (basic indexing): a view of ``x``.

    ``idx_list`` holds one entry per indexed dimension: an int, a ScalarType (the value is the
    next index input) or a slice of those. Printed as Theano does: ``Subtensor{int64:int64:}``,
    ``Subtensor{::, int8}``; ints stored in the op print as their value.
    """

    __props__ = ("idx_list",)
    view_map = {0: [0]}
    #: Theano's helpers: flatten slice bounds; turn an index entry into an idx_list entry.
    collapse = staticmethod(_collapse)
    convert = staticmethod(_convert)

    def __init__(self, idx_list: Sequence[Any]) -> None:
        self.idx_list = tuple(_convert(e) for e in idx_list)

    def __hash__(self) -> int:
        return hash((type(self), _hashable(self.idx_list)))

    @staticmethod
    def str_from_slice(entry: slice) -> str:
        """``start:stop:step`` with each part's dtype (or int value), empty when None."""
        return ":".join("" if p is None else str(p) for p in (entry.start, entry.stop, entry.step))

    def __str__(self) -> str:
        return f"{type(self).__name__}{{{_str_indices(self.idx_list)}}}"

    def make_node(self, x: Any, *inputs: Any) -> Apply:
        x = as_tensor_variable(x)
        scalars = _check_index_inputs(self, x, inputs)
        return Apply(
            self, [x, *scalars], [TensorType(x.type.dtype, self._out_broadcastable(x, scalars))()]
        )

    def _out_broadcastable(self, x: Variable, scalars: Sequence[Variable]) -> list[bool]:
        idx = get_idx_list([x, *scalars], self.idx_list)
        padded = list(idx) + [slice(None)] * (x.type.ndim - len(idx))
        bcast = []
        for entry, b in zip(padded, x.type.broadcastable, strict=True):
            if not isinstance(entry, slice):
                continue
            # A length-1 dimension stays length 1 under ``::step`` (any step), and under
            # ``0:stop`` with a positive stop and step; ``0:5:-1`` is empty.
            start, stop = _constant_int(entry.start), _constant_int(entry.stop)
            start = 0 if entry.start is None else start
            step = 1 if entry.step is None else _constant_int(entry.step)
            if entry.start is None and entry.stop is None:
                keeps = True
            elif step is not None and step > 0:
                keeps = start == 0 and (entry.stop is None or (stop is not None and stop > 0))
            else:
                keeps = False
            bcast.append(b and keeps)
        return bcast

    def get_constant_idx(self, inputs: Sequence[Any], allow_partial: bool = False) -> list[Any]:
        """The index with constant inputs replaced by ints (symbolic ones kept if allowed)."""

        def conv(v: Any) -> Any:
            if v is None:
                return None
            if isinstance(v, slice):
                return slice(conv(v.start), conv(v.stop), conv(v.step))
            known = _constant_int(v)
            if known is None and not allow_partial:
                raise ValueError(f"{self}: index entry {v} is not a constant")
            return v if known is None else known

        return [conv(e) for e in get_idx_list(inputs, self.idx_list)]

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x = inputs[0]
        cdata = get_idx_list(inputs, self.idx_list)
        # The trailing Ellipsis keeps integer-only indexing a (0-d) view instead of a copy.
        output_storage[0][0] = x[(*cdata, Ellipsis)]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Sequence[Any]]) -> list[Any]:
        xshp = input_shapes[0]
        idx = get_idx_list(node.inputs, self.idx_list)
        padded = list(idx) + [slice(None)] * (len(xshp) - len(idx))
        out = [
            slice_length(entry, length)
            for entry, length in zip(padded, xshp, strict=True)
            if isinstance(entry, slice)
        ]
        return [tuple(out)]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True]] + [[False] for _ in node.inputs[1:]]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        (gz,), x, rest = output_grads, inputs[0], inputs[1:]
        if x.type.dtype in discrete_dtypes:
            first = tm.zeros_like(x, dtype=_floatx())
        else:
            first = IncSubtensor(self.idx_list)(tm.zeros_like(x), gz, *rest)
        return [first] + [disconnected_type() for _ in rest]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]) -> list[Any]:
        if eval_points[0] is None:
            return [None]
        return [self(eval_points[0], *inputs[1:])]


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
        (gout,), (x, y), idx = output_grads, inputs[:2], inputs[2:]
        gx, gy = inc_grads(
            self.set_instead_of_inc,
            x,
            y,
            gout,
            lambda g: Subtensor(self.idx_list)(g, *idx),
            lambda g, v: IncSubtensor(self.idx_list, set_instead_of_inc=True)(g, v, *idx),
        )
        return [gx, gy] + [disconnected_type() for _ in idx]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]) -> list[Any]:
        return inc_R_op(self, inputs, eval_points)


def inc_grads(
    set_: bool, x: Variable, y: Variable, gout: Variable, index: Any, set_at: Any
) -> tuple[Variable, Variable]:
    """Gradients of ``x`` and ``y`` for any inc/set op.

    ``index(g)`` indexes ``g`` like the op; ``set_at(g, v)`` is ``g`` with that part set to ``v``.
    """
    if x.type.dtype in discrete_dtypes:
        gx = tm.zeros_like(x, dtype=_floatx())
        gy = tm.zeros_like(y, dtype=_floatx() if y.type.dtype in discrete_dtypes else None)
        return gx, gy
    gx = set_at(gout, tm.zeros_like(y)) if set_ else gout
    return gx, sum_grad_over_bcasted_dims(y, index(gout))


def inc_R_op(op: Op, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]) -> list:
    """R_op of an inc/set op: the same op on the tangents (indices carry none)."""
    ex, ey = eval_points[0], eval_points[1]
    if ex is None and ey is None:
        return [None]
    ex = tm.zeros_like(inputs[0]) if ex is None else ex
    ey = tm.zeros_like(inputs[1]) if ey is None else ey
    return [op(ex, ey, *inputs[2:])]


def sum_grad_over_bcasted_dims(y: Variable, gy: Variable) -> Variable:
    """Sum ``gy`` (shaped like the indexed part) down to ``y``'s rank and broadcastable pattern."""
    extra = gy.type.ndim - y.type.ndim
    if extra:
        gy = tm.sum(gy, axis=list(range(extra)))
    axes = [
        i
        for i, (yb, gb) in enumerate(zip(y.type.broadcastable, gy.type.broadcastable, strict=True))
        if yb and not gb
    ]
    if axes:
        gy = tm.sum(gy, axis=axes, keepdims=True)
    return patternbroadcast(gy, y.type.broadcastable)


# ----------------------------------------------------------------------------------------
# pprint: x[1:3], x[i, ::2]


class SubtensorPrinter:
    """Prints ``Subtensor`` outputs as NumPy indexing: ``x[1:3]``, ``x[i, ::2]``."""

    def process(self, r: Variable, pstate: Any) -> str:
        if r.owner is None or not isinstance(r.owner.op, Subtensor):
            raise TypeError(f"SubtensorPrinter can only print Subtensor outputs, got {r}")
        pprinter = pstate.pprinter
        inner = pstate.clone(precedence=-1000)

        def show(entry: Any) -> str:
            if entry is None:
                return ""
            if not isinstance(entry, Variable):
                return str(entry)
            known = _constant_int(entry)
            if known is not None:
                return str(known)
            if entry.owner is not None and isinstance(entry.owner.op, ScalarFromTensor):
                entry = entry.owner.inputs[0]
            return pprinter.process(entry, inner)

        sidxs = []
        for entry in get_idx_list(r.owner.inputs, r.owner.op.idx_list):
            if isinstance(entry, slice):
                text = f"{show(entry.start)}:{show(entry.stop)}"
                sidxs.append(text + ("" if entry.step is None else f":{show(entry.step)}"))
            else:
                sidxs.append(show(entry))
        sub = pprinter.process(r.owner.inputs[0], pstate.clone(precedence=1000))
        return f"{sub}[{', '.join(sidxs)}]"


pprint.assign(Subtensor, SubtensorPrinter())
