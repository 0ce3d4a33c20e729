"""Indexing: ``x[...]`` (``getitem``), ``take``, and the basic-indexing op ``Subtensor``.

``x[1:3]``, ``x[i, ::2]``, ``x[None, -1]`` and ``x[..., 0]`` build a ``Subtensor`` whose op
stores the index *structure* (``idx_list``) and whose inputs are the index *values* (integer
scalars, constant or symbolic), as in Theano 1.0: ``x[1:3]`` prints
``Subtensor{int64:int64:}``. Integer arrays and boolean masks go to the advanced-indexing
ops of :mod:`opgraph.tensor.subtensor_advanced`; ``inc_subtensor`` / ``set_subtensor``
(:mod:`opgraph.tensor.subtensor_inc`) turn any indexing result back into an update of the
indexed tensor. As in Theano, every one of these names can be imported from this module.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

import opgraph.scalar.basic as ps
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.op import Op
from opgraph.scalar.type import ScalarType, discrete_dtypes, get_scalar_type
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.type import TensorType

#: Names defined in the sibling modules and importable from here, as from Theano's module.
_REEXPORTS = {
    "opgraph.tensor.subtensor_inc": ("IncSubtensor", "inc_subtensor", "set_subtensor"),
    "opgraph.tensor.subtensor_advanced": (
        "AdvancedBooleanIncSubtensor",
        "AdvancedBooleanSubtensor",
        "AdvancedIncSubtensor",
        "AdvancedIncSubtensor1",
        "AdvancedSubtensor",
        "AdvancedSubtensor1",
        "MakeSlice",
        "NoneConst",
        "NoneTypeT",
        "SliceType",
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
        "make_slice",
    ),
}

__all__ = [
    "AdvancedIndexingError",
    "Subtensor",
    "SubtensorPrinter",
    "get_idx_list",
    "getitem",
    "make_constant",
    "slice_length",
    "take",
    *(name for names in _REEXPORTS.values() for name in names),
]


def __getattr__(name: str) -> Any:
    """Resolve the re-exported names lazily (the sibling modules import this one)."""
    import importlib

    for module, names in _REEXPORTS.items():
        if name in names:
            return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: dtypes accepted for an integer index (Theano took only the signed ones).
index_dtypes = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


class AdvancedIndexingError(TypeError):
    """An index entry that basic indexing (``Subtensor``) cannot take: an array or a mask."""


def _floatx() -> str:
    from opgraph.configdefaults import config

    return str(config.floatX)


def _m():  # type: ignore[no-untyped-def]
    import opgraph.tensor.math as m

    return m


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
        return _m().scalar_from_tensor(a)
    return ps.as_scalar(a)


def _constant_int(v: Any) -> int | None:
    """The Python int behind a constant index or shape value, or None if symbolic."""
    if isinstance(v, int | np.integer):
        return int(v)
    if isinstance(v, Constant):
        return int(np.asarray(v.data))
    if isinstance(v, Variable) and v.owner is not None:
        m = _m()
        if isinstance(v.owner.op, m.ScalarFromTensor | m.TensorFromScalar):
            return _constant_int(v.owner.inputs[0])
    return None


# ----------------------------------------------------------------------------------------
# Slice lengths for infer_shape: Python ints when everything is known, int64 graphs otherwise


def _as_dim(v: Any) -> Any:
    known = _constant_int(v)
    if known is not None:
        return known
    t = as_tensor_variable(v)
    return t if t.type.dtype == "int64" else _m().cast(t, "int64")


def _switch(cond: Any, a: Any, b: Any) -> Any:
    if isinstance(cond, bool | np.bool_):
        return a if cond else b
    return _m().switch(cond, a, b)


def _lt(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        return a < b
    return _m().lt(a, b)


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
    neg = step < 0 if isinstance(step, int) else _m().lt(step, 0)

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
            start, stop = _constant_int(entry.start), _constant_int(entry.stop)
            start = 0 if entry.start is None else start
            keeps = start == 0 and (entry.stop is None or (stop is not None and stop > 0))
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
        from opgraph.gradient import DisconnectedType
        from opgraph.tensor.subtensor_inc import IncSubtensor

        (gz,), x, rest = output_grads, inputs[0], inputs[1:]
        if x.type.dtype in discrete_dtypes:
            first = _m().zeros_like(x, dtype=_floatx())
        else:
            first = IncSubtensor(self.idx_list)(_m().zeros_like(x), gz, *rest)
        return [first] + [DisconnectedType()() for _ in rest]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]) -> list[Any]:
        if eval_points[0] is None:
            return [None]
        return [self(eval_points[0], *inputs[1:])]


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
    from opgraph.tensor import subtensor_advanced as adv

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
    from opgraph.tensor import subtensor_advanced as adv

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
        indices = _m().clip(indices, 0, length - 1) if mode == "clip" else indices % length
    if indices.type.ndim == 0:
        return getitem(a, (slice(None),) * axis + (indices,))
    if indices.type.ndim != 1:
        return adv.advanced_subtensor(a, *([slice(None)] * axis), indices)
    if axis == 0:
        return adv.advanced_subtensor1(a, indices)
    shuffle = list(range(a.type.ndim))
    shuffle[0], shuffle[axis] = axis, 0
    return adv.advanced_subtensor1(a.dimshuffle(shuffle), indices).dimshuffle(shuffle)


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
            if entry.owner is not None and isinstance(entry.owner.op, _m().ScalarFromTensor):
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


def _register_printer() -> None:
    from opgraph.printing.pprint import pprint

    pprint.assign(Subtensor, SubtensorPrinter())


_register_printer()
