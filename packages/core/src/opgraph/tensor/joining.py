"""Joining and splitting tensors: ``Join`` (join, concatenate, stack), ``Split``, tile, roll."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

import opgraph.tensor.math as tm
from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Variable
from opgraph.graph.null_type import DisconnectedType, disconnected_type
from opgraph.graph.op import Op
from opgraph.printing.pprint import FunctionPrinter, pprint
from opgraph.scalar.type import discrete_dtypes, upcast
from opgraph.tensor.axes import shape_padaxis
from opgraph.tensor.basic import as_tensor_of_value, as_tensor_variable, patternbroadcast
from opgraph.tensor.shape import (
    Dim,
    as_int64,
    as_shape_vector,
    get_vector_length,
    int_scalar,
    make_vector,
    reshape,
    scalar_constant,
    shape,
    shape_i,
    specify_shape,
    vector_elements,
)
from opgraph.tensor.structure import alloc, ones
from opgraph.tensor.subtensor import getitem
from opgraph.tensor.type import TensorType

__all__ = ["Join", "Split", "concatenate", "join", "roll", "split", "stack", "tile"]


def _is_disconnected(g: Any) -> bool:
    return g is None or isinstance(getattr(g, "type", None), DisconnectedType)


def _constant_axis(axis: Variable, ndim: int, what: str) -> int | None:
    """The value of a constant axis, normalized to ``[0, ndim)``; None if symbolic."""
    value = scalar_constant(axis)
    if value is None:
        return None
    if not -ndim <= int(value) < ndim:
        raise ValueError(f"{what}: axis {int(value)} is out of range for {ndim} dimension(s)")
    return int(value) % ndim


def _add_dims(dims: Sequence[Dim]) -> Dim:
    if all(not isinstance(d, Variable) for d in dims):
        return sum(int(d) for d in dims)
    return tm.add(*[as_int64(d) for d in dims])


def _symbolic_axis(axis: Variable, ndim: int) -> Variable:
    return tm.switch(tm.ge(axis, 0), as_int64(axis), as_int64(tm.add(axis, ndim)))


class Join(Op):
    """Concatenation of tensors along ``axis`` (the first input, an int scalar): ``Join``.

    The output dtype is the upcast of the inputs' dtypes. With ``view=k``, the output is
    input ``k`` itself when every other input is empty along ``axis``.
    """

    __props__ = ("view",)

    def __init__(self, view: int = -1) -> None:
        self.view = int(view)
        if self.view != -1:
            self.view_map = {0: [1 + self.view]}

    def __str__(self) -> str:
        return "Join" if self.view == -1 else f"Join{{view={self.view}}}"

    def make_node(self, axis: Any, *tensors: Any) -> Apply:
        if not tensors:
            raise ValueError("Join needs at least one tensor to join")
        axis = int_scalar(axis, "Join's axis")
        ts = [as_tensor_variable(t) for t in tensors]
        ndim = ts[0].type.ndim
        for k, t in enumerate(ts):
            if t.type.ndim == 0:
                raise ValueError(
                    f"Join: tensor {k} ({t}) is 0-d; only tensors with dimensions can be "
                    "joined. HINT: use stack() to make a vector of scalars."
                )
            if t.type.ndim != ndim:
                raise TypeError(
                    f"Join: all tensors must have the same number of dimensions; tensor 0 "
                    f"({ts[0]}) has {ndim}, tensor {k} ({t}) has {t.type.ndim}"
                )
        a = _constant_axis(axis, ndim, "Join")
        if a is None:
            bcast = [False] * ndim
        else:
            bcast = [d != a and any(t.type.broadcastable[d] for t in ts) for d in range(ndim)]
        dtype = upcast(*[t.type.dtype for t in ts])
        return Apply(self, [axis, *ts], [TensorType(dtype, bcast)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        axis, *tensors = inputs
        ndim = node.outputs[0].type.ndim
        a = int(axis)
        if not -ndim <= a < ndim:
            raise ValueError(f"Join: axis {a} is out of range for {ndim} dimension(s)")
        dtype = node.outputs[0].type.numpy_dtype
        view = self.view
        if (
            view != -1
            and all(t.shape[a] == 0 for k, t in enumerate(tensors) if k != view)
            and tensors[view].dtype == dtype
        ):
            output_storage[0][0] = tensors[view]
            return
        try:
            out = np.concatenate(tensors, axis=a)
        except ValueError as exc:
            shapes = ", ".join(str(t.shape) for t in tensors)
            raise ValueError(
                f"Join: cannot join arrays of shapes {shapes} along axis {a}: {exc}"
            ) from None
        output_storage[0][0] = out.astype(dtype, copy=False)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        shapes = input_shapes[1:]
        ndim = len(shapes[0])
        axis = node.inputs[0]
        a = _constant_axis(axis, ndim, "Join")
        if a is not None:
            return [
                tuple(
                    _add_dims([s[a] for s in shapes]) if d == a else shapes[0][d]
                    for d in range(ndim)
                )
            ]
        join_dim = _symbolic_axis(axis, ndim)
        out = []
        for d in range(ndim):
            total = as_int64(_add_dims([s[d] for s in shapes]))
            out.append(tm.switch(tm.eq(join_dim, d), total, as_int64(shapes[0][d])))
        return [tuple(out)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        axis, *tensors = inputs
        gz = output_grads[0]
        dtype = upcast(*[t.type.dtype for t in tensors])
        if dtype in discrete_dtypes:
            return [disconnected_type()] + [tm.zeros_like(t, dtype=config.floatX) for t in tensors]
        ndim = tensors[0].type.ndim
        a = _constant_axis(axis, ndim, "Join")
        if a is not None:
            sizes = [shape_i(t, a) for t in tensors]
        else:
            sizes = [getitem(shape(t), axis) for t in tensors]
        pieces = Split(len(tensors))(gz, axis, make_vector(*sizes, dtype="int64"), return_list=True)
        return [disconnected_type()] + [
            patternbroadcast(g, t.type.broadcastable) for g, t in zip(pieces, tensors, strict=True)
        ]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list[Any]:
        axis, *tensors = inputs
        points = eval_points[1:]
        if all(p is None for p in points):
            return [None]
        filled = [
            tm.zeros_like(t) if p is None else p for t, p in zip(tensors, points, strict=True)
        ]
        return [Join()(axis, *filled)]


_join = Join()


def join(axis: Any, *tensors: Any) -> Variable:
    """The tensors concatenated along ``axis`` (one tensor is returned as it is)."""
    if len(tensors) == 1:
        return as_tensor_variable(tensors[0])
    return _join(axis, *tensors)


def concatenate(tensor_list: Sequence[Any], axis: Any = 0) -> Variable:
    """The tensors of ``tensor_list`` concatenated along ``axis`` (NumPy's concatenate)."""
    if not isinstance(tensor_list, list | tuple):
        raise TypeError(
            f"concatenate takes a list or tuple of tensors, got {tensor_list!r}. HINT: write "
            "concatenate([x, y]), not concatenate(x, y)."
        )
    return join(axis, *tensor_list)


def _is_scalar(t: Any) -> bool:
    if isinstance(t, int | float | complex | np.number) and not isinstance(t, bool):
        return True
    return isinstance(t, Variable) and isinstance(t.type, TensorType) and t.type.ndim == 0


def _as_tensor(t: Any) -> Any:
    """Nested lists holding variables become stacked tensors; numbers stay for stack's rule."""
    if isinstance(t, list | tuple) and any(isinstance(e, Variable | list | tuple) for e in t):
        return stack(list(t))
    return t


def stack(*args: Any, **kwargs: Any) -> Variable:
    """Tensors of the same shape joined along a new dimension ``axis``: ``stack([a, b], axis=0)``.

    Scalars give a ``MakeVector`` of their common dtype. The Theano 0.x form
    ``stack(a, b, c)`` still works, with a DeprecationWarning.
    """
    if "tensors" in kwargs:
        if args:
            raise TypeError("stack: give the tensors either positionally or as tensors=")
        tensors, axis = kwargs.pop("tensors"), kwargs.pop("axis", 0)
    elif args and isinstance(args[0], list | tuple):
        if len(args) > 2:
            raise TypeError("stack takes a list of tensors and an optional axis")
        tensors = args[0]
        axis = args[1] if len(args) == 2 else kwargs.pop("axis", 0)
    elif args:
        warnings.warn(
            "stack(*tensors) is deprecated, use stack(tensors, axis=0)",
            DeprecationWarning,
            stacklevel=2,
        )
        tensors, axis = args, kwargs.pop("axis", 0)
    else:
        raise TypeError("stack needs a list of tensors: stack([a, b], axis=0)")
    if kwargs:
        raise TypeError(f"stack got unexpected keyword argument(s) {sorted(kwargs)}")
    if not tensors:
        raise ValueError("stack: the list of tensors is empty; give at least one")
    tensors = [_as_tensor(t) for t in tensors]
    if all(_is_scalar(t) for t in tensors):
        if axis not in (0, -1):
            raise IndexError(f"stack: axis {axis} is out of bounds for stacking scalars")
        return make_vector(*tensors)
    return join(axis, *[shape_padaxis(t, axis) for t in tensors])


def _flatten(x: Any) -> list[Any]:
    out, todo = [], [x]
    while todo:
        item = todo.pop()
        if isinstance(item, list | tuple):
            todo.extend(item)
        else:
            out.append(item)
    return out


@as_tensor_of_value.register(list)
@as_tensor_of_value.register(tuple)
def _as_tensor_of_sequence(x: Any, name: str | None, ndim: int | None) -> Variable:
    """``as_tensor_variable([a, b])``: a ``stack`` when the list holds variables."""
    if any(isinstance(e, Variable) for e in _flatten(x)):
        return stack([as_tensor_variable(e) for e in x])
    return as_tensor_of_value.dispatch(object)(x, name, ndim)


class Split(Op):
    """``x`` cut along ``axis`` into ``len_splits`` consecutive pieces of lengths ``splits``.

    Inputs are ``(x, axis, splits)``; each output is a copy (``Split{2}``).
    """

    __props__ = ("len_splits",)

    def __init__(self, len_splits: int) -> None:
        if not isinstance(len_splits, int | np.integer) or len_splits < 1:
            raise ValueError(f"Split needs a positive number of pieces, got {len_splits!r}")
        self.len_splits = int(len_splits)

    def __str__(self) -> str:
        return f"Split{{{self.len_splits}}}"

    def make_node(self, x: Any, axis: Any, splits: Any) -> Apply:
        x = as_tensor_variable(x)
        if x.type.ndim == 0:
            raise TypeError(f"{self}: cannot split the 0-d tensor {x}")
        axis = int_scalar(axis, f"{self}'s axis")
        splits = as_shape_vector(splits, f"{self}'s splits")
        try:
            n = get_vector_length(splits)
        except ValueError:
            n = None
        if n is not None and n != self.len_splits:
            raise ValueError(f"{self}: got {n} split length(s) for {self.len_splits} piece(s)")
        a = _constant_axis(axis, x.type.ndim, str(self))
        bcast = [False] * x.type.ndim
        if a is not None:
            bcast = [b and d != a for d, b in enumerate(x.type.broadcastable)]
        outputs = [TensorType(x.type.dtype, bcast)() for _ in range(self.len_splits)]
        return Apply(self, [x, axis, splits], outputs)

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x, axis, splits = inputs
        a = int(axis)
        if not -x.ndim <= a < x.ndim:
            raise ValueError(f"{self}: axis {a} is out of range for shape {x.shape}")
        a %= x.ndim
        sizes = [int(s) for s in splits]
        if len(sizes) != self.len_splits:
            raise ValueError(f"{self}: got {len(sizes)} split length(s): {sizes}")
        if any(s < 0 for s in sizes):
            raise ValueError(f"{self}: the split lengths {sizes} include a negative one")
        if sum(sizes) != x.shape[a]:
            raise ValueError(
                f"{self}: the split lengths {sizes} sum to {sum(sizes)}, but the array of "
                f"shape {x.shape} has length {x.shape[a]} along axis {a}"
            )
        key: list[Any] = [slice(None)] * x.ndim
        start = 0
        for cell, size in zip(output_storage, sizes, strict=True):
            key[a] = slice(start, start + size)
            cell[0] = x[tuple(key)].copy()
            start += size

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        _, axis, splits = node.inputs
        shp = input_shapes[0]
        ndim = len(shp)
        sizes = vector_elements(splits, self.len_splits)
        a = _constant_axis(axis, ndim, str(self))
        if a is not None:
            return [tuple(s if d == a else shp[d] for d in range(ndim)) for s in sizes]
        join_dim = _symbolic_axis(axis, ndim)
        return [
            tuple(tm.switch(tm.eq(join_dim, d), as_int64(s), as_int64(shp[d])) for d in range(ndim))
            for s in sizes
        ]

    def L_op(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Any]:
        x, axis, _ = inputs
        if all(_is_disconnected(g) for g in output_grads):
            return [disconnected_type(), disconnected_type(), disconnected_type()]
        if x.type.dtype in discrete_dtypes:
            return [tm.zeros_like(x, dtype=config.floatX), disconnected_type(), disconnected_type()]
        pieces = [
            tm.zeros_like(o) if _is_disconnected(g) else g
            for o, g in zip(outputs, output_grads, strict=True)
        ]
        return [join(axis, *pieces), disconnected_type(), disconnected_type()]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list[Any]:
        if eval_points[0] is None:
            return [None] * self.len_splits
        return self(eval_points[0], *inputs[1:], return_list=True)


def split(x: Any, splits_size: Any, n_splits: int, axis: Any = 0) -> Any:
    """``x`` cut along ``axis`` into ``n_splits`` pieces of lengths ``splits_size``.

    Returns a list of tensors (a single tensor when ``n_splits`` is 1, as in Theano).
    """
    return Split(n_splits)(x, axis, splits_size)


def _reps_elements(reps: Any, ndim: int | None, x_ndim: int) -> tuple[list[Any], int]:
    """``tile``'s repetitions as a list of ints/int scalars, and the output ndim."""
    if isinstance(reps, list | tuple):
        items = list(reps)
        for k, r in enumerate(items):
            if not isinstance(r, int | np.integer):
                items[k] = int_scalar(r, f"tile's reps (element {k})")
        if ndim is not None and len(items) > ndim:
            raise ValueError(f"tile: reps has {len(items)} entries, more than ndim={ndim}")
        return items, max(len(items), x_ndim) if ndim is None else ndim
    r = as_tensor_variable(reps)
    if r.type.dtype not in discrete_dtypes:
        raise TypeError(f"tile: reps must have an integer dtype, got {r} of type {r.type}")
    if r.type.ndim == 0:
        return [r], max(1, x_ndim) if ndim is None else ndim
    if r.type.ndim != 1:
        raise ValueError(f"tile: reps must be a scalar or a vector, got {r.type}")
    try:
        length = get_vector_length(r)
    except ValueError:
        length = None
    if length is not None:
        return _reps_elements(vector_elements(r, length), ndim, x_ndim)
    if ndim is None:
        raise ValueError(
            "tile: the length of the symbolic reps vector is unknown, so ndim must be given"
        )
    pad = tm.maximum(tm.sub(ndim, shape_i(r, 0)), 0)
    padded = specify_shape(join(0, ones([pad], dtype=r.type.dtype), r), (ndim,))
    return [getitem(padded, i) for i in range(ndim)], ndim


def tile(x: Any, reps: Any, ndim: int | None = None) -> Variable:
    """``x`` repeated ``reps[i]`` times along each dimension ``i`` (NumPy's ``tile``).

    ``reps`` is an int, an int scalar, a sequence of them, or an int vector (then give ``ndim``
    unless its length is known). Shorter ``reps`` are padded with ones on the left.
    """
    x = as_tensor_variable(x)
    if ndim is not None and ndim < x.type.ndim:
        raise ValueError(f"tile: ndim={ndim} is smaller than x.ndim={x.type.ndim}")
    items, ndim = _reps_elements(reps, ndim, x.type.ndim)
    items = [1] * (ndim - len(items)) + items
    bcast = x.type.broadcastable
    dims: list[Any] = [1] * (ndim - x.type.ndim) + [
        1 if bcast[i] else shape_i(x, i) for i in range(x.type.ndim)
    ]
    y = alloc(x, *items, *dims)
    order = [k for i in range(ndim) for k in (i, ndim + i)]
    y = y.dimshuffle(order)  # type: ignore[attr-defined]
    new_shape = []
    for d, r in zip(dims, items, strict=True):
        if isinstance(d, int) and isinstance(r, int | np.integer):
            new_shape.append(d * int(r))
        elif isinstance(d, int) and d == 1:
            new_shape.append(r)
        else:
            new_shape.append(tm.mul(as_int64(d), as_int64(r)))
    return reshape(y, new_shape, ndim=ndim)


def roll(x: Any, shift: Any, axis: Any = None) -> Variable:
    """``x`` with its elements shifted by ``shift`` along ``axis`` (flattened when None).

    Elements that roll past the end come back at the start (NumPy's ``roll``); ``shift``
    and ``axis`` may be sequences of the same length.
    """
    x = as_tensor_variable(x)
    if isinstance(shift, list | tuple) or isinstance(axis, list | tuple):
        shifts = list(shift) if isinstance(shift, list | tuple) else [shift]
        axes = list(axis) if isinstance(axis, list | tuple) else [axis]
        if len(shifts) == 1:
            shifts *= len(axes)
        if len(axes) == 1:
            axes *= len(shifts)
        if len(shifts) != len(axes) or None in axes:
            raise ValueError(f"roll: shift {shift!r} and axis {axis!r} do not match")
        for s, a in zip(shifts, axes, strict=True):
            x = roll(x, s, a)
        return x
    if x.type.ndim == 0:
        return x
    if axis is None:
        if x.type.ndim == 1:
            return roll(x, shift, 0)
        flat = roll(reshape(x, (-1,), ndim=1), shift, 0)
        return patternbroadcast(reshape(flat, shape(x), ndim=x.type.ndim), x.type.broadcastable)
    if not isinstance(axis, int | np.integer) or not -x.type.ndim <= axis < x.type.ndim:
        raise ValueError(f"roll: axis {axis!r} is out of range for {x} ({x.type})")
    axis = int(axis) % x.type.ndim
    if x.type.broadcastable[axis]:
        return x
    n = shape_i(x, axis)
    s = tm.mod(as_int64(int_scalar(shift, "roll's shift")), n)
    front, back = split(x, make_vector(tm.sub(n, s), s), 2, axis)
    return patternbroadcast(join(axis, back, front), x.type.broadcastable)


def _register_printers() -> None:
    pprint.assign(Join, FunctionPrinter("join"))


_register_printers()
