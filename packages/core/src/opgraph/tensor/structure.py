"""Ops that build tensors of a given structure: alloc, zeros/ones/full, arange, eye, and the
``mgrid``/``ogrid`` grids.

Joining and splitting (``join``, ``concatenate``, ``stack``, ``split``, ``tile``, ``roll``)
live in :mod:`opgraph.tensor.joining`. ``zeros_like``/``ones_like``/``fill`` are in
:mod:`opgraph.tensor.math`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

import opgraph.tensor.math as tm
from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Variable
from opgraph.graph.null_type import disconnected_type
from opgraph.graph.op import Op
from opgraph.printing.pprint import FunctionPrinter, pprint
from opgraph.scalar.type import discrete_dtypes, int_dtypes, uint_dtypes, upcast
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.shape import (
    int_scalar,
    scalar_constant,
    shape_i,
    vector_elements,
)
from opgraph.tensor.type import TensorType

__all__ = [
    "ARange",
    "Alloc",
    "AllocEmpty",
    "Eye",
    "alloc",
    "arange",
    "eye",
    "full",
    "identity_like",
    "mgrid",
    "ogrid",
    "ones",
    "zeros",
]


def shape_arguments(shape: Any, what: str) -> list[Any]:
    """A shape (int, int scalar, sequence of them, or int vector of known length) as a list."""
    if isinstance(shape, Variable):
        v = as_tensor_variable(shape)
        if v.type.ndim == 0:
            return [int_scalar(v, what)]
        if v.type.ndim == 1 and v.type.dtype in (*int_dtypes, *uint_dtypes):
            return vector_elements(v)
        raise TypeError(f"{what} must be an int, an int scalar or an int vector, got {v.type}")
    if isinstance(shape, int | np.integer):
        return [int(shape)]
    if isinstance(shape, np.ndarray):
        shape = shape.tolist()
    if not isinstance(shape, list | tuple):
        raise TypeError(f"{what} must be an int or a sequence of ints, got {shape!r}")
    return [int(s) if isinstance(s, int | np.integer) else s for s in shape]


def _shape_inputs(op: Op, shape: Sequence[Any]) -> tuple[list[Variable], list[bool]]:
    """Shape arguments as 0-d int tensors, and the broadcastable flags they imply (constant 1)."""
    dims, bcast = [], []
    for k, s in enumerate(shape):
        d = int_scalar(s, f"{op}'s shape argument {k}")
        value = scalar_constant(d)
        if value is not None and value < 0:
            raise ValueError(f"{op}: shape argument {k} is negative ({value})")
        dims.append(d)
        bcast.append(value == 1)
    return dims, bcast


def _runtime_shape(op: Op, values: Sequence[Any]) -> tuple[int, ...]:
    sh = tuple(int(s) for s in values)
    if any(s < 0 for s in sh):
        raise ValueError(f"{op}: the requested shape {sh} has a negative dimension")
    return sh


def _shape_out(node: Apply, first: int) -> list[Any]:
    out = []
    for s in node.inputs[first:]:
        c = scalar_constant(s)
        out.append(int(c) if c is not None else s)
    return [tuple(out)]


class Alloc(Op):
    """A tensor of the given shape filled with ``value``, broadcast along its leading dims.

    ``Alloc()(v, *shape)``: ``v``'s dimensions match the trailing dimensions of ``shape``
    (those declared broadcastable may have length 1). The result is a new array.
    """

    __props__ = ()

    def make_node(self, value: Any, *shape: Any) -> Apply:
        v = as_tensor_variable(value)
        dims, bcast = _shape_inputs(self, shape)
        if v.type.ndim > len(dims):
            raise TypeError(
                f"Alloc: the value {v} has {v.type.ndim} dimension(s), more than the "
                f"{len(dims)} of the requested shape. HINT: pass one shape argument per "
                "output dimension, e.g. alloc(v, n, m)."
            )
        return Apply(self, [v, *dims], [TensorType(v.type.dtype, bcast)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        v, *sh_values = inputs
        sh = _runtime_shape(self, sh_values)
        vbcast = node.inputs[0].type.broadcastable
        offset = len(sh) - v.ndim
        for d in range(v.ndim):
            n = v.shape[d]
            if n != sh[offset + d] and not vbcast[d]:
                raise ValueError(
                    f"Alloc: cannot fill shape {sh} with a value of shape {v.shape}: its "
                    f"dimension {d} has length {n}, expected {sh[offset + d]}"
                    + (
                        ". HINT: that dimension is not broadcastable in the value's type; "
                        "use addbroadcast(value, ...) if it always has length 1."
                        if n == 1
                        else ""
                    )
                )
        dtype = node.outputs[0].type.numpy_dtype
        if v.size == 1 and not v.reshape(-1)[0]:
            out = np.zeros(sh, dtype=dtype)
        else:
            out = np.empty(sh, dtype=dtype)
            out[...] = v
        output_storage[0][0] = out

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return _shape_out(node, 1)

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        x, gz = inputs[0], output_grads[0]
        n_new = gz.type.ndim - x.type.ndim
        axes = list(range(n_new))
        kept = []
        for i, (xb, gb) in enumerate(
            zip(x.type.broadcastable, gz.type.broadcastable[n_new:], strict=True)
        ):
            if xb and not gb:
                axes.append(i + n_new)
            else:
                kept.append(i)
        gx = tm.sum(gz, axis=axes) if axes else gz
        if len(kept) != x.type.ndim:
            order: list[Any] = ["x"] * x.type.ndim
            for k, axis in enumerate(kept):
                order[axis] = k
            gx = gx.dimshuffle(order)  # type: ignore[attr-defined]
        return [gx] + [disconnected_type() for _ in inputs[1:]]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list[Any]:
        if eval_points[0] is None:
            return [None]
        return [self(eval_points[0], *inputs[1:])]

    def do_constant_folding(self, fgraph: Any, node: Apply) -> bool:
        """Fold only where it saves work: not an output, not a buffer updated in place."""
        clients = getattr(node.outputs[0], "clients", None) or []
        if not clients:
            return False
        in_place_users = {
            "IncSubtensor",
            "AdvancedIncSubtensor1",
            "AdvancedIncSubtensor",
            "Gemv",
            "Ger",
        }
        for client, index in clients:
            if client == "output":
                return False
            name = type(client.op).__name__
            if (index == 0 and name in in_place_users) or name.lower().startswith("gpu"):
                return False
        return True


_alloc = Alloc()


def alloc(value: Any, *shape: Any) -> Variable:
    """``value`` broadcast to the shape given by the int scalars ``shape`` (a new array)."""
    return _alloc(value, *shape)


class AllocEmpty(Op):
    """An array of the given shape and ``dtype`` whose contents are unspecified.

    Later ops overwrite it (Gemv's output buffer). The Python implementation returns zeros,
    which costs the same as uninitialised memory and keeps runs reproducible.
    """

    __props__ = ("dtype",)

    def __init__(self, dtype: str) -> None:
        self.dtype = str(np.dtype(dtype))

    def make_node(self, *shape: Any) -> Apply:
        dims, bcast = _shape_inputs(self, shape)
        out = TensorType(self.dtype, bcast)()
        out.tag.values_eq_approx = lambda a, b: True
        out.tag.nan_guard_mode_check = False
        return Apply(self, dims, [out])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        output_storage[0][0] = np.zeros(_runtime_shape(self, inputs), dtype=self.dtype)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return _shape_out(node, 0)

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        return [disconnected_type() for _ in inputs]

    def do_constant_folding(self, fgraph: Any, node: Apply) -> bool:
        return False


def _fill_dtype(dtype: str | None) -> str:
    return config.floatX if dtype is None else str(np.dtype(dtype))


def zeros(shape: Any, dtype: str | None = None) -> Variable:
    """Zeros of ``shape`` (ints, int scalars or an int vector) and ``dtype`` (floatX)."""
    return alloc(np.array(0, dtype=_fill_dtype(dtype)), *shape_arguments(shape, "zeros' shape"))


def ones(shape: Any, dtype: str | None = None) -> Variable:
    """Ones of ``shape`` (ints, int scalars or an int vector) and ``dtype`` (floatX)."""
    return alloc(np.array(1, dtype=_fill_dtype(dtype)), *shape_arguments(shape, "ones' shape"))


def full(shape: Any, fill_value: Any, dtype: str | None = None) -> Variable:
    """``fill_value`` (a scalar, maybe symbolic) broadcast to ``shape`` (NumPy's ``full``)."""
    value = as_tensor_variable(fill_value)
    if dtype is not None and value.type.dtype != str(np.dtype(dtype)):
        value = tm.cast(value, dtype)
    if value.type.ndim != 0:
        raise TypeError(f"full: fill_value must be a scalar, got {value} of type {value.type}")
    return alloc(value, *shape_arguments(shape, "full's shape"))


# ----------------------------------------------------------------------------------------
# ARange, Eye


def _scalar_input(op: Op, name: str, x: Any) -> Variable:
    v = as_tensor_variable(x)
    if v.type.ndim != 0:
        raise TypeError(f"{op}: {name} must be a scalar, got {v} of type {v.type}")
    if v.type.dtype.startswith("complex"):
        raise TypeError(f"{op}: {name} must be real, got dtype {v.type.dtype}")
    return v


class ARange(Op):
    """``[start, start + step, ...]`` up to ``stop`` (excluded), of ``dtype`` (NumPy's arange)."""

    __props__ = ("dtype",)

    def __init__(self, dtype: str) -> None:
        self.dtype = str(np.dtype(dtype))

    def make_node(self, start: Any, stop: Any, step: Any) -> Apply:
        inputs = [
            _scalar_input(self, n, v)
            for n, v in zip(("start", "stop", "step"), (start, stop, step))
        ]
        if scalar_constant(inputs[2]) == 0:
            raise ValueError(f"{self}: step must not be 0")
        return Apply(self, inputs, [TensorType(self.dtype, (False,))()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        start, stop, step = (np.asarray(v).item() for v in inputs)
        if step == 0:
            raise ValueError(f"{self}: step is 0 (start={start}, stop={stop})")
        try:
            out = np.arange(start, stop, step, dtype=self.dtype)
        except (ValueError, OverflowError) as exc:
            raise ValueError(
                f"{self}: cannot build the range start={start}, stop={stop}, step={step}: {exc}"
            ) from None
        output_storage[0][0] = out

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        start, stop, step = node.inputs
        values = [scalar_constant(v) for v in (start, stop, step)]
        if all(v is not None for v in values):
            a, b, s = (float(v) for v in values)
            return [(max(math.ceil((b - a) / s), 0),)]

        def up(v: Variable) -> Variable:
            return (
                tm.cast(v, "int64")
                if v.type.dtype in (*int_dtypes, "uint8", "uint16", "uint32")
                else v
            )

        start, stop = up(start), up(stop)
        if values[2] == 1:
            if values[0] == 0:
                return [(tm.maximum(tm.cast(stop, "int64"), 0),)]
            return [(tm.maximum(tm.cast(tm.sub(stop, start), "int64"), 0),)]
        length = tm.ceil(tm.true_div(tm.cast(tm.sub(stop, start), "float64"), step))
        return [(tm.maximum(tm.cast(length, "int64"), 0),)]

    def L_op(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Any]:
        start, _, step = inputs
        gz = output_grads[0]
        if self.dtype in discrete_dtypes:
            return [
                tm.zeros_like(start, dtype=config.floatX),
                disconnected_type(),
                tm.zeros_like(step, dtype=config.floatX),
            ]
        steps = arange(shape_i(outputs[0], 0), dtype=self.dtype)
        return [tm.sum(gz), disconnected_type(), tm.sum(tm.mul(gz, steps))]


_arange: dict[str, ARange] = {}


def arange(start: Any, stop: Any = None, step: Any = 1, dtype: str | None = None) -> Variable:
    """``[start, start + step, ...)`` below ``stop``, as NumPy's ``arange``.

    With one argument it is ``stop`` and ``start`` is 0. The default dtype follows Theano:
    the upcast of the arguments, widened to int64/uint64 for integers (NumPy's own dtype
    under ``cast_policy='numpy+floatX'``).
    """
    if stop is None:
        start, stop = 0, start
    start, stop, step = (as_tensor_variable(v) for v in (start, stop, step))
    if dtype is None:
        dtype = upcast(start.type.dtype, stop.type.dtype, step.type.dtype)
        if dtype in int_dtypes:
            dtype = "int64"
        elif dtype in uint_dtypes:
            dtype = "uint64"
        if config.cast_policy == "numpy+floatX":
            probe = np.arange(
                np.array(0, dtype=start.type.dtype),
                np.array(1, dtype=stop.type.dtype),
                np.array(1, dtype=step.type.dtype),
            ).dtype
            if str(probe) != dtype:
                explicit64 = "float64" in (start.type.dtype, stop.type.dtype, step.type.dtype)
                if config.floatX == "float32" and str(probe) == "float64" and not explicit64:
                    dtype = "float32"
                else:
                    dtype = str(probe)
    dtype = str(np.dtype(dtype))
    if dtype not in _arange:
        _arange[dtype] = ARange(dtype)
    return _arange[dtype](start, stop, step)


class Eye(Op):
    """An ``n`` x ``m`` matrix of ``dtype`` with ones on diagonal ``k`` and zeros elsewhere."""

    __props__ = ("dtype",)

    def __init__(self, dtype: str | None = None) -> None:
        self.dtype = _fill_dtype(dtype)

    def make_node(self, n: Any, m: Any, k: Any) -> Apply:
        inputs = [int_scalar(v, f"{self}'s {name}") for name, v in zip("nmk", (n, m, k))]
        for name, v in zip("nm", inputs):
            value = scalar_constant(v)
            if value is not None and value < 0:
                raise ValueError(f"{self}: {name} must not be negative, got {value}")
        return Apply(self, inputs, [TensorType(self.dtype, (False, False))()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        n, m, k = (int(v) for v in inputs)
        if n < 0 or m < 0:
            raise ValueError(f"{self}: the shape ({n}, {m}) has a negative dimension")
        output_storage[0][0] = np.eye(n, m, k, dtype=self.dtype)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [tuple(_shape_out(node, 0)[0][:2])]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        return [disconnected_type() for _ in inputs]


def eye(n: Any, m: Any = None, k: Any = 0, dtype: str | None = None) -> Variable:
    """The ``n`` x ``m`` (``n`` x ``n``) matrix with ones on diagonal ``k`` (NumPy's ``eye``)."""
    return Eye(dtype)(n, n if m is None else m, k)


def identity_like(x: Any) -> Variable:
    """The identity matrix of ``x``'s shape and dtype (``x`` a matrix)."""
    x = as_tensor_variable(x)
    if x.type.ndim != 2:
        raise TypeError(f"identity_like needs a matrix, got {x} of type {x.type}")
    return eye(shape_i(x, 0), shape_i(x, 1), 0, dtype=x.type.dtype)


class _NdGrid:
    """``mgrid[0:5, 0:3]`` (dense) and ``ogrid[0:5, 0:3]`` (open): NumPy's grids of evenly
    spaced values, one tensor per slice, as Theano 1.0's ``tensor.mgrid``/``ogrid``.

    Each slice ``start:stop:step`` is ``arange(start or 0, stop, step or 1)``; grid ``j`` runs
    along dimension ``j``. The open grid keeps length-1 (broadcastable) dimensions elsewhere;
    the dense one broadcasts every grid to the full shape. With one slice the result is one
    tensor, as in NumPy.
    """

    def __init__(self, sparse: bool = False) -> None:
        self.sparse = sparse

    def __repr__(self) -> str:
        return "ogrid" if self.sparse else "mgrid"

    def __getitem__(self, key: Any) -> Any:
        slices = key if isinstance(key, tuple) else (key,)
        for sl in slices:
            if not isinstance(sl, slice):
                raise TypeError(f"{self}[...] takes slices such as 0:5 or 0:1:0.25, got {sl!r}")
            if isinstance(sl.step, complex):
                raise TypeError(
                    f"{self}: a complex step ({sl.step!r}, NumPy's number of points) is not "
                    "supported; give the step itself, or use arange/linspace"
                )
        ndim = len(slices)
        ranges = [
            arange(0 if sl.start is None else sl.start, sl.stop, 1 if sl.step is None else sl.step)
            for sl in slices
        ]
        ranges = [
            r.dimshuffle(["x"] * j + [0] + ["x"] * (ndim - 1 - j))  # type: ignore[attr-defined]
            for j, r in enumerate(ranges)
        ]
        if self.sparse:
            grids = ranges
        else:
            ones = [tm.ones_like(r) for r in ranges]
            grids = [
                tm.mul(*[ranges[j] if j == i else ones[j] for j in range(ndim)])
                if ndim > 1
                else ranges[0]
                for i in range(ndim)
            ]
        return grids if isinstance(key, tuple) else grids[0]


#: ``mgrid[0:5, 0:3]``: the dense grids (each of the full shape), as ``numpy.mgrid``.
mgrid = _NdGrid()
#: ``ogrid[0:5, 0:3]``: the open grids (length 1 except along their own axis), as ``numpy.ogrid``.
ogrid = _NdGrid(sparse=True)


def _register_printers() -> None:
    pprint.assign(Alloc, FunctionPrinter("alloc"))


_register_printers()
