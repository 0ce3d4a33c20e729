"""Shapes as symbolic values, and ops that change a tensor's shape without changing its data.

``Shape`` (``x.shape``), ``Shape_i`` (one dimension), ``SpecifyShape`` (assert a shape),
``Reshape`` (``x.reshape``, ``flatten``) and ``MakeVector`` (a vector of scalars, used for
symbolic shapes). The axis helpers (``squeeze``, ``expand_dims``, ``shape_pad*``,
``transpose``) live in :mod:`opgraph.tensor.axes` and are importable from here too.
``get_vector_length`` and ``vector_elements`` read a symbolic shape vector element by element
without evaluating it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import opgraph.scalar.basic as ps
import opgraph.tensor.math as tm
from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.null_type import disconnected_type
from opgraph.graph.op import Op
from opgraph.printing.pprint import MemberPrinter, pprint
from opgraph.scalar.type import discrete_dtypes, int_dtypes, uint_dtypes, upcast
from opgraph.tensor.axes import expand_dims as expand_dims
from opgraph.tensor.axes import shape_padaxis as shape_padaxis
from opgraph.tensor.axes import shape_padleft as shape_padleft
from opgraph.tensor.axes import shape_padright as shape_padright
from opgraph.tensor.axes import squeeze as squeeze
from opgraph.tensor.axes import transpose as transpose
from opgraph.tensor.basic import Rebroadcast, TensorFromScalar, as_tensor_variable, constant
from opgraph.tensor.elemwise import DimShuffle
from opgraph.tensor.subtensor import get_idx_list, getitem
from opgraph.tensor.type import TensorType

__all__ = [
    "MakeVector",
    "Reshape",
    "Shape",
    "Shape_i",
    "SpecifyShape",
    "flatten",
    "get_vector_length",
    "make_vector",
    "reshape",
    "shape",
    "shape_i",
    "specify_shape",
    "vector_elements",
]

integer_dtypes = (*int_dtypes, *uint_dtypes)
Dim = int | Variable


# ----------------------------------------------------------------------------------------
# helpers shared by the shape and structure modules


def scalar_constant(v: Any) -> Any:
    """The value of ``v`` if it is a known 0-d constant (through casts and dimshuffles), else None.

    Python and NumPy numbers are returned as they are; ``Shape_i`` of a broadcastable
    dimension is 1.
    """
    for _ in range(10):
        if isinstance(v, int | float | np.integer | np.floating):
            return v
        if isinstance(v, Constant):
            data = np.asarray(v.data)
            return data.reshape(-1)[0] if data.size == 1 else None
        owner = getattr(v, "owner", None)
        if owner is None:
            return None
        op = owner.op
        if isinstance(op, DimShuffle | Rebroadcast | TensorFromScalar):
            v = owner.inputs[0]
        elif isinstance(op, Shape_i):
            inner = owner.inputs[0]
            if isinstance(inner, Constant):
                return np.shape(inner.data)[op.i]
            return 1 if getattr(inner.type, "broadcastable", ())[op.i] else None
        elif isinstance(getattr(op, "scalar_op", None), ps.Cast):
            inner = scalar_constant(owner.inputs[0])
            if inner is None:
                return None
            return np.asarray(inner).astype(owner.outputs[0].type.dtype)[()]
        else:
            return None
    return None


def int_scalar(x: Any, what: str) -> Variable:
    """``x`` as a 0-d integer tensor, or a TypeError naming ``what``."""
    try:
        v = as_tensor_variable(x)
    except TypeError as exc:
        raise TypeError(f"{what} must be an integer scalar, got {x!r}: {exc}") from exc
    if v.type.ndim != 0 or v.type.dtype not in integer_dtypes:
        raise TypeError(
            f"{what} must be an integer scalar, got {v} of type {v.type}. "
            "HINT: cast it with opgraph.tensor.cast(x, 'int64')."
        )
    return v


def as_int64(d: Dim) -> Variable:
    """A dimension (Python int or 0-d integer variable) as an int64 0-d tensor."""
    if isinstance(d, Variable):
        return tm.cast(d, "int64")  # type: ignore[return-value]
    return constant(int(d), dtype="int64")


def mul_dims(dims: Sequence[Dim]) -> Dim:
    """The product of dimensions: a Python int when all are known, else a symbolic int64."""
    if all(not isinstance(d, Variable) for d in dims):
        return int(np.prod([int(d) for d in dims], dtype="int64"))
    known = int(np.prod([int(d) for d in dims if not isinstance(d, Variable)], dtype="int64"))
    symbolic = [as_int64(d) for d in dims if isinstance(d, Variable)]
    if known != 1:
        symbolic.append(as_int64(known))
    return symbolic[0] if len(symbolic) == 1 else tm.mul(*symbolic)


def get_vector_length(v: Any) -> int:
    """The length of the symbolic vector ``v`` if it is known before running, else ValueError.

    Known for constants, ``MakeVector``, ``Shape``, ``Join`` of vectors of known lengths,
    dimshuffled scalars and vectors with a static length.
    """
    v = as_tensor_variable(v)
    if v.type.ndim != 1:
        raise TypeError(f"get_vector_length needs a vector, got {v} of type {v.type}")
    if v.type.broadcastable[0]:
        return 1
    if isinstance(v, Constant):
        return len(v.data)
    static = getattr(v.type, "shape", None)
    if static and static[0] is not None:
        return int(static[0])
    owner = v.owner
    if owner is not None:
        op = owner.op
        if isinstance(op, Shape):
            return owner.inputs[0].type.ndim
        if isinstance(op, MakeVector):
            return len(owner.inputs)
        if type(op).__name__ == "Join" and scalar_constant(owner.inputs[0]) is not None:
            return sum(get_vector_length(t) for t in owner.inputs[1:])
        if type(op).__name__ == "Subtensor":
            length = _subtensor_length(owner)
            if length is not None:
                return length
        if isinstance(op, DimShuffle | Rebroadcast | SpecifyShape) or (
            type(op).__name__ == "Elemwise" and len(owner.inputs) == 1
        ):
            return get_vector_length(owner.inputs[0])
    raise ValueError(
        f"the length of the symbolic vector {v} cannot be known before the function runs. "
        "HINT: pass the shape as a tuple of scalars, or give ndim explicitly."
    )


def _subtensor_length(node: Apply) -> int | None:
    """The length of ``v[a:b:c]`` with constant bounds, for ``v`` of known length."""
    entries = get_idx_list(node.inputs, node.op.idx_list)
    if len(entries) != 1 or not isinstance(entries[0], slice):
        return None
    parts = [entries[0].start, entries[0].stop, entries[0].step]
    values = [None if p is None else scalar_constant(p) for p in parts]
    if any(v is None and p is not None for v, p in zip(values, parts, strict=True)):
        return None
    try:
        n = get_vector_length(node.inputs[0])
    except ValueError:
        return None
    bounds = [None if v is None else int(v) for v in values]
    return len(range(*slice(*bounds).indices(n)))


def vector_elements(v: Any, n: int | None = None) -> list[Dim]:
    """The elements of an integer vector ``v`` of length ``n``: ints where known, else scalars.

    Reads constants, ``MakeVector`` inputs and ``Shape`` (as ``Shape_i``) directly; other
    vectors are indexed symbolically.
    """
    v = as_tensor_variable(v)
    if n is None:
        n = get_vector_length(v)
    if isinstance(v, Constant):
        return [int(e) for e in np.asarray(v.data).reshape(-1)]
    owner = v.owner
    if owner is not None and isinstance(owner.op, MakeVector):
        out: list[Dim] = []
        for e in owner.inputs:
            c = scalar_constant(e)
            out.append(int(c) if c is not None else e)
        return out
    if owner is not None and isinstance(owner.op, Shape):
        return [shape_i(owner.inputs[0], i) for i in range(n)]
    return [getitem(v, i) for i in range(n)]


def as_shape_vector(shape: Any, what: str) -> Variable:
    """A shape given as ints, int scalars or a symbolic int vector, as an integer vector.

    Python ints become a constant; a sequence holding variables becomes a ``MakeVector``.
    """
    if isinstance(shape, Variable | np.ndarray):
        v = as_tensor_variable(shape)
        if v.type.ndim == 0:
            return as_shape_vector([v], what)
    else:
        items = list(shape) if isinstance(shape, list | tuple) else [shape]
        if any(isinstance(e, Variable) for e in items):
            scalars = [int_scalar(e, f"{what} (element {k})") for k, e in enumerate(items)]
            return make_vector(*scalars)
        if not items:
            return constant(np.zeros(0, dtype="int64"))
        try:
            v = as_tensor_variable(items)
        except TypeError as exc:
            raise TypeError(f"{what} must be a sequence of integers, got {shape!r}") from exc
    if v.type.ndim != 1 or v.type.dtype not in integer_dtypes:
        raise TypeError(
            f"{what} must be a vector of integers or a sequence of integer scalars, got "
            f"{shape!r} (as a tensor: {v.type}). HINT: pass a tuple of ints or int scalars."
        )
    return v


class MakeVector(Op):
    """A vector of the given 0-d tensors, ``[a, b, c]`` (``MakeVector{dtype='int64'}``).

    Inputs of another dtype are converted to ``dtype`` only if no information is lost.
    """

    __props__ = ("dtype",)

    def __init__(self, dtype: str = "int64") -> None:
        self.dtype = str(np.dtype(dtype))

    def make_node(self, *inputs: Any) -> Apply:
        converted = []
        for k, i in enumerate(inputs):
            i = as_tensor_variable(i)
            if i.type.ndim != 0:
                raise TypeError(f"{self}: input {k} ({i}) must be a 0-d tensor, got {i.type}")
            if i.type.dtype != self.dtype:
                if isinstance(i, Constant) and np.array_equal(
                    np.asarray(i.data).astype(self.dtype), i.data
                ):
                    i = constant(np.asarray(i.data, dtype=self.dtype))
                elif upcast(self.dtype, i.type.dtype) == self.dtype:
                    i = tm.cast(i, self.dtype)
                else:
                    raise TypeError(
                        f"{self}: input {k} ({i}) has dtype {i.type.dtype}, which does not "
                        f"convert to {self.dtype} without loss. HINT: use stack(), which "
                        "picks the common dtype."
                    )
            converted.append(i)
        return Apply(self, converted, [TensorType(self.dtype, (False,))()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        output_storage[0][0] = np.array([np.asarray(i)[()] for i in inputs], dtype=self.dtype)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [(len(input_shapes),)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        if self.dtype in discrete_dtypes:
            return [tm.zeros_like(i, dtype=config.floatX) for i in inputs]
        return [getitem(output_grads[0], k) for k in range(len(inputs))]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list[Any]:
        if any(e is None for e in eval_points):
            return [None]
        return [self(*eval_points)]


def make_vector(*scalars: Any, dtype: str | None = None) -> Variable:
    """A ``MakeVector`` of ``scalars`` in their common dtype (or ``dtype``)."""
    tensors = [as_tensor_variable(s) for s in scalars]
    if dtype is None:
        dtype = upcast(*[t.type.dtype for t in tensors]) if tensors else "int64"
    return MakeVector(dtype)(*tensors)


# ----------------------------------------------------------------------------------------
# Shape, Shape_i, SpecifyShape


class Shape(Op):
    """The shape of a tensor: an int64 vector of length ``x.ndim`` (``x.shape``)."""

    __props__ = ()

    def make_node(self, x: Any) -> Apply:
        if not isinstance(x, Variable):
            x = as_tensor_variable(x)
        if not hasattr(x.type, "ndim"):
            raise TypeError(f"Shape needs a variable with dimensions, got {x} of type {x.type}")
        return Apply(self, [x], [TensorType("int64", (False,))()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        output_storage[0][0] = np.asarray(np.shape(inputs[0]), dtype="int64").reshape(-1)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [(len(input_shapes[0]),)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        return [disconnected_type()]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        """A shape does not depend on the values: even an undefined gradient (a random
        draw's size) does not reach the input."""
        return [[False]]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list[Any]:
        return [None]


_shape = Shape()


def shape(x: Any) -> Variable:
    """The symbolic shape of ``x``: an int64 vector (``x.shape``)."""
    return _shape(x)


class Shape_i(Op):
    """The length of dimension ``i`` of a tensor, as an int64 scalar (``Shape_i{0}``)."""

    __props__ = ("i",)

    def __init__(self, i: int) -> None:
        if not isinstance(i, int | np.integer) or i < 0:
            raise ValueError(f"Shape_i needs a non-negative int dimension, got {i!r}")
        self.i = int(i)

    def __str__(self) -> str:
        return f"Shape_i{{{self.i}}}"

    def make_node(self, x: Any) -> Apply:
        if not isinstance(x, Variable):
            x = as_tensor_variable(x)
        ndim = getattr(x.type, "ndim", None)
        if ndim is None or ndim <= self.i:
            raise TypeError(
                f"{self}: {x} of type {x.type} has no dimension {self.i} "
                f"(it has {ndim or 0} dimension(s))"
            )
        return Apply(self, [x], [TensorType("int64", ())()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        output_storage[0][0] = np.asarray(np.shape(inputs[0])[self.i], dtype="int64")

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [()]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        return [disconnected_type()]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        """A shape does not depend on the values: even an undefined gradient (a random
        draw's size) does not reach the input."""
        return [[False]]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list[Any]:
        return [None]


def shape_i(var: Any, i: int, fgraph: Any = None) -> Any:
    """``var.shape[i]`` as a ``Shape_i`` node (or the shape feature's entry, given ``fgraph``).

    Negative ``i`` counts from the end.
    """
    var = var if isinstance(var, Variable) else as_tensor_variable(var)
    ndim = var.type.ndim
    if not -ndim <= i < ndim:
        raise IndexError(f"shape_i: dimension {i} is out of range for {var} ({ndim} dimension(s))")
    i %= ndim
    feature = getattr(fgraph, "shape_feature", None)
    if feature is not None and var in getattr(feature, "shape_of", {}):
        return feature.shape_of[var][i]
    return Shape_i(i)(var)


class SpecifyShape(Op):
    """``x`` itself, after checking at run time that its shape is ``shape`` (a view)."""

    __props__ = ()
    view_map = {0: [0]}

    def make_node(self, x: Any, shape: Any) -> Apply:
        x = as_tensor_variable(x)
        shp = as_shape_vector(shape, "SpecifyShape's shape")
        try:
            n = get_vector_length(shp)
        except ValueError:
            n = None
        if n is not None and n != x.type.ndim:
            raise ValueError(
                f"SpecifyShape: {x} has {x.type.ndim} dimension(s) but the specified shape "
                f"{shape!r} has {n}"
            )
        return Apply(self, [x, shp], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x, shp = inputs
        expected = tuple(int(s) for s in shp)
        if x.shape != expected:
            raise ValueError(
                f"SpecifyShape: the value has shape {x.shape}, but the shape was specified "
                f"as {expected}"
            )
        output_storage[0][0] = x

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [tuple(vector_elements(node.inputs[1], node.inputs[0].type.ndim))]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        return [output_grads[0], disconnected_type()]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list[Any]:
        if eval_points[0] is None:
            return [None]
        return [self(eval_points[0], inputs[1])]


_specify_shape = SpecifyShape()


def specify_shape(x: Any, shape: Any) -> Variable:
    """``x``, checked at run time to have ``shape`` (a tuple of ints/scalars or a vector)."""
    return _specify_shape(x, shape)


# ----------------------------------------------------------------------------------------
# Reshape


class Reshape(Op):
    """The same elements in C order with another shape of ``ndim`` dimensions (``Reshape{2}``).

    The second input is the new shape, an integer vector in which one entry may be -1 (the
    length that keeps the size unchanged). The output is a view of the input when NumPy can
    make one.
    """

    __props__ = ("ndim",)
    view_map = {0: [0]}

    def __init__(self, ndim: int, name: str | None = None) -> None:
        if not isinstance(ndim, int | np.integer) or ndim < 0:
            raise ValueError(f"Reshape needs a non-negative int ndim, got {ndim!r}")
        self.ndim = int(ndim)
        self.name = name

    def __str__(self) -> str:
        return f"Reshape{{{self.ndim}}}"

    def make_node(self, x: Any, shp: Any) -> Apply:
        x = as_tensor_variable(x)
        shp = as_shape_vector(shp, f"{self}'s new shape")
        try:
            n = get_vector_length(shp)
        except ValueError:
            n = None
        if n is not None and n != self.ndim:
            raise ValueError(
                f"{self}: the new shape {shp} has {n} element(s), expected {self.ndim}. "
                "HINT: give reshape a shape with one entry per output dimension."
            )
        bcast = [False] * self.ndim
        if isinstance(shp, Constant):
            bcast = [int(s) == 1 for s in np.asarray(shp.data).reshape(-1)]
        elif shp.owner is not None and isinstance(shp.owner.op, Shape):
            bcast = list(shp.owner.inputs[0].type.broadcastable)
        elif shp.owner is not None and isinstance(shp.owner.op, MakeVector):
            bcast = [scalar_constant(e) == 1 for e in shp.owner.inputs]
        return Apply(self, [x, shp], [TensorType(x.type.dtype, bcast)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x, shp = inputs
        if len(shp) != self.ndim:
            raise ValueError(
                f"{self}: the new shape {tuple(int(s) for s in shp)} has {len(shp)} element(s), "
                f"expected {self.ndim}"
            )
        new = tuple(int(s) for s in shp)
        try:
            out = np.reshape(x, new)
        except ValueError as exc:
            raise ValueError(
                f"{self}: cannot reshape an array of shape {x.shape} (size {x.size}) to shape "
                f"{new}: {exc}. HINT: the product of the new shape must equal the size; use -1 "
                "for at most one dimension to infer it."
            ) from None
        output_storage[0][0] = out

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        ishape = input_shapes[0]
        if len(ishape) == 0:
            return [(1,) * self.ndim]
        elements = vector_elements(node.inputs[1], self.ndim)
        size = mul_dims(ishape)
        unknown = [e for e in elements if isinstance(e, Variable)]
        if not unknown:
            if elements.count(-1) > 1:
                raise ValueError(f"{self}: the new shape {elements} has more than one -1")
            if -1 in elements:
                rest = mul_dims([e for e in elements if e != -1])
                missing = _floordiv(size, rest)
                elements = [missing if e == -1 else e for e in elements]
            return [tuple(elements)]
        # -(product) is the product of the known lengths when exactly one entry is -1.
        rest = _floordiv(size, tm.maximum(tm.neg(as_int64(mul_dims(elements))), 1))
        out: list[Dim] = []
        for e in elements:
            if isinstance(e, Variable):
                out.append(tm.switch(tm.eq(e, -1), rest, as_int64(e)))
            else:
                out.append(rest if e == -1 else e)
        return [tuple(out)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        x = inputs[0]
        return [reshape(output_grads[0], shape(x), ndim=x.type.ndim), disconnected_type()]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list[Any]:
        if eval_points[0] is None:
            return [None]
        return [reshape(eval_points[0], inputs[1], ndim=self.ndim)]


def _floordiv(a: Dim, b: Any) -> Dim:
    if not isinstance(a, Variable) and not isinstance(b, Variable):
        return int(a) // max(int(b), 1)
    return tm.int_div(as_int64(a), tm.maximum(as_int64(b), 1))


def reshape(x: Any, newshape: Any, ndim: int | None = None) -> Variable:
    """``x`` with shape ``newshape`` (ints, scalars or an int vector; one entry may be -1).

    ``ndim`` is needed only when ``newshape`` is a symbolic vector of unknown length. A size
    mismatch is a ValueError at run time naming both shapes.
    """
    x = as_tensor_variable(x)
    shp = as_shape_vector(newshape, "reshape's new shape")
    if ndim is None:
        try:
            ndim = get_vector_length(shp)
        except ValueError:
            raise ValueError(
                f"reshape: the length of the new shape {shp} is not known before running, so "
                "the number of dimensions of the result is unknown. HINT: pass ndim=..."
            ) from None
    return Reshape(ndim)(x, shp)


def flatten(x: Any, ndim: int = 1, outdim: int | None = None) -> Variable:
    """Collapse the trailing dimensions of ``x`` so the result has ``ndim`` dimensions.

    Returns a ``Reshape{ndim}`` (as Theano 1.0 does; there is no separate Flatten op). The
    leading ``ndim - 1`` dimensions keep their length and broadcastability.
    """
    if outdim is not None:
        ndim = outdim
    x = as_tensor_variable(x)
    if not isinstance(ndim, int | np.integer) or ndim < 1 or (ndim > 1 and ndim > x.type.ndim):
        raise ValueError(
            f"flatten: ndim must be between 1 and {max(x.type.ndim, 1)} for {x} of type "
            f"{x.type}, got {ndim!r}"
        )
    bcast = x.type.broadcastable
    dims: list[Any] = [1 if bcast[i] else shape_i(x, i) for i in range(ndim - 1)]
    dims.append(1 if all(bcast[ndim - 1 :]) else -1)
    return reshape(x, dims, ndim=ndim)


class _MakeVectorPrinter:
    """pprint notation of MakeVector: ``[a, b, c]``."""

    def process(self, output: Variable, pstate: Any) -> str:
        if output in pstate.memo:
            return pstate.memo[output]
        inner = pstate.clone(precedence=1000)
        args = ", ".join(pstate.pprinter.process(i, inner) for i in output.owner.inputs)
        pstate.memo[output] = result = f"[{args}]"
        return result


def _register_printers() -> None:
    pprint.assign(Shape, MemberPrinter("shape"))
    pprint.assign(MakeVector, _MakeVectorPrinter())


_register_printers()
