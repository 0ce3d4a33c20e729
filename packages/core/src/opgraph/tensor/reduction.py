"""Reductions beyond ``sum``: prod, max/min with argmax/argmin, all and any (Theano 1.0).

``max`` is Theano 1.0's: the first output of ``MaxAndArgmax`` (printed
``MaxAndArgmax{axis=(0,)}``), which carries the gradient and R_op; the optimizer may replace
it by a ``Reduce{maximum}`` CAReduce when the argmax is unused. ``min`` and ``argmin`` reduce
the negated input (bitwise-inverted for integers and bools, so that ``int8`` -128 does not
overflow as it did in Theano). Outputs follow Theano's dtypes: ``argmax`` is int64, ``prod``
of integers is int64, ``all``/``any`` are bool.
"""

from __future__ import annotations

import builtins
import typing
from collections.abc import Sequence

import numpy as np

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.null_type import DisconnectedType, disconnected_type
from opgraph.graph.op import Op
from opgraph.scalar.type import discrete_dtypes
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.elemwise import (
    All,
    Any,
    Prod,
    ProdWithoutZeros,
    _expand_reduced,
    _float_zeros,
)
from opgraph.tensor.math import (
    _keepdims,
    _normalize_axis,
    eq,
    invert,
    isclose,
    mul,
    neg,
)
from opgraph.tensor.math import sum as tsum
from opgraph.tensor.type import TensorType

__all__ = [
    "All",
    "Any",
    "Argmax",
    "MaxAndArgmax",
    "Prod",
    "ProdWithoutZeros",
    "all",
    "allclose",
    "any",
    "argmax",
    "argmin",
    "max",
    "max_and_argmax",
    "min",
    "prod",
]

_continuous = ("float16", "float32", "float64", "complex64", "complex128")


# ----------------------------------------------------------------------------------------
# prod


def prod(
    input: typing.Any,
    axis: typing.Any = None,
    dtype: str | None = None,
    keepdims: bool = False,
    acc_dtype: str | None = None,
    no_zeros_in_input: bool = False,
) -> Variable:
    """Product of ``input`` over ``axis`` (all axes when None).

    Parameters
    ----------
    input : tensor-like
    axis : int, sequence of ints or None
    dtype : str, optional
        Output dtype (default: int64 for integers and bools, else the input's).
    keepdims : bool
        Keep the reduced axes as length-1 (broadcastable) dimensions.
    acc_dtype : str, optional
        Accumulator dtype (default: at least int64 / float64 / complex128).
    no_zeros_in_input : bool
        Promise that ``input`` has no zeros (a simpler gradient).
    """
    x = as_tensor_variable(input)
    axes = _normalize_axis(axis, x.type.ndim)
    out = Prod(axes, dtype=dtype, acc_dtype=acc_dtype, no_zeros_in_input=no_zeros_in_input)(x)
    return _keepdims(x, out, axes) if keepdims else out


# ----------------------------------------------------------------------------------------
# all / any


def all(x: typing.Any, axis: typing.Any = None, keepdims: bool = False) -> Variable:
    """True where every element of ``x`` along ``axis`` is non-zero (bool output)."""
    x = as_tensor_variable(x)
    axes = _normalize_axis(axis, x.type.ndim)
    out = All(axes)(x)
    return _keepdims(x, out, axes) if keepdims else out


def any(x: typing.Any, axis: typing.Any = None, keepdims: bool = False) -> Variable:
    """True where some element of ``x`` along ``axis`` is non-zero (bool output)."""
    x = as_tensor_variable(x)
    axes = _normalize_axis(axis, x.type.ndim)
    out = Any(axes)(x)
    return _keepdims(x, out, axes) if keepdims else out


# ----------------------------------------------------------------------------------------
# max / argmax


def _argmax_over(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """Flat index of the maximum over several ``axes`` (NumPy's argmax takes one axis)."""
    keep = [i for i in range(x.ndim) if i not in axes]
    moved = np.transpose(x, keep + list(axes))
    kept_shape = moved.shape[: len(keep)]
    flat = moved.reshape((*kept_shape, int(np.prod(moved.shape[len(keep) :], dtype="int64"))))
    return np.asarray(np.argmax(flat, axis=-1), dtype="int64")


def _check_not_empty(op: Op, x: np.ndarray, axes: tuple[int, ...], what: str) -> None:
    if builtins.any(x.shape[a] == 0 for a in axes):
        raise ValueError(
            f"{op}: cannot reduce an empty array: the {what} of no values is undefined (input "
            f"shape {x.shape}, reduced axes {list(axes)}). HINT: check the input is not empty "
            "before reducing it."
        )


def _out_bcast(x: Variable, axes: Sequence[int]) -> tuple[bool, ...]:
    return tuple(b for i, b in enumerate(x.type.broadcastable) if i not in axes)


def _check_axes(op: Op, x: Variable, axes: Sequence[int]) -> None:
    for a in axes:
        if not 0 <= a < x.type.ndim:
            raise ValueError(
                f"{op}: axis {a} is out of range for {x} with {x.type.ndim} dimension(s)"
            )


class MaxAndArgmax(Op):
    """The maximum over ``axis`` and its (flat, over the reduced axes) index, as int64.

    ``axis`` is a tuple of non-negative ints (the reduced axes); printed
    ``MaxAndArgmax{axis=(0,)}``. The gradient goes to every entry equal to the maximum.
    """

    __props__ = ("axis",)

    def __init__(self, axis: Sequence[int]) -> None:
        self.axis = tuple(sorted({int(a) for a in axis}))

    def make_node(self, x: typing.Any) -> Apply:
        x = as_tensor_variable(x)
        _check_axes(self, x, self.axis)
        bcast = _out_bcast(x, self.axis)
        # named as Theano named them: debugprint shows ``Argmax{axis=(1,)} [id A] 'argmax'``
        outs = [TensorType(x.type.dtype, bcast)("max"), TensorType("int64", bcast)("argmax")]
        return Apply(self, [x], outs)

    def perform(
        self, node: Apply, inputs: Sequence[typing.Any], output_storage: list[list[typing.Any]]
    ) -> None:
        (x,) = inputs
        _check_not_empty(self, x, self.axis, "maximum")
        output_storage[0][0] = np.asarray(
            np.max(x, axis=self.axis), dtype=node.outputs[0].type.numpy_dtype
        )
        output_storage[1][0] = _argmax_over(x, self.axis)

    def infer_shape(self, node: Apply, input_shapes: Sequence[typing.Any]) -> list[typing.Any]:
        (shp,) = input_shapes
        out = tuple(s for i, s in enumerate(shp) if i not in self.axis)
        return [out, out]

    def L_op(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[typing.Any]:
        (x,) = inputs
        g_max = output_grads[0]
        if isinstance(g_max.type, DisconnectedType):
            if isinstance(output_grads[1].type, DisconnectedType):
                return [disconnected_type()]
            return [_float_zeros(x)]
        if x.type.dtype not in _continuous:
            return [_float_zeros(x)]
        nd = x.type.ndim
        return [
            mul(
                eq(_expand_reduced(outputs[0], nd, self.axis), x),
                _expand_reduced(g_max, nd, self.axis),
            )
        ]

    def R_op(
        self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]
    ) -> list[typing.Any]:
        if eval_points[0] is None:
            return [None, None]
        (x,) = inputs
        xmax = self(x)[0]
        mask = eq(x, _expand_reduced(xmax, x.type.ndim, self.axis))
        return [tsum(mul(mask, eval_points[0]), axis=self.axis), None]


class Argmax(Op):
    """The int64 index of the maximum over ``axis`` (a tuple, or None for all axes).

    ``argmax()`` builds ``MaxAndArgmax``; the optimizer uses this op when only the index is
    needed. Printed ``Argmax{axis=(1,)}``.
    """

    __props__ = ("axis",)

    def __init__(self, axis: Sequence[int] | None) -> None:
        self.axis = None if axis is None else tuple(sorted({int(a) for a in axis}))

    def make_node(self, x: typing.Any) -> Apply:
        x = as_tensor_variable(x)
        axes = tuple(range(x.type.ndim)) if self.axis is None else self.axis
        _check_axes(self, x, axes)
        return Apply(self, [x], [TensorType("int64", _out_bcast(x, axes))("argmax")])

    def perform(
        self, node: Apply, inputs: Sequence[typing.Any], output_storage: list[list[typing.Any]]
    ) -> None:
        (x,) = inputs
        axes = tuple(range(x.ndim)) if self.axis is None else self.axis
        _check_not_empty(self, x, axes, "argmax")
        output_storage[0][0] = _argmax_over(x, axes)

    def infer_shape(self, node: Apply, input_shapes: Sequence[typing.Any]) -> list[typing.Any]:
        (shp,) = input_shapes
        axes = tuple(range(len(shp))) if self.axis is None else self.axis
        return [tuple(s for i, s in enumerate(shp) if i not in axes)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        return [_float_zeros(inputs[0])]

    def R_op(
        self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]
    ) -> list[typing.Any]:
        return [None]


def _all_axes(x: Variable, axis: typing.Any) -> tuple[int, ...]:
    axes = _normalize_axis(axis, x.type.ndim)
    return tuple(range(x.type.ndim)) if axes is None else axes


def max_and_argmax(
    a: typing.Any, axis: typing.Any = None, keepdims: bool = False
) -> list[Variable]:
    """``[max, argmax]`` of ``a`` over ``axis`` (all axes, flattened, when None)."""
    a = as_tensor_variable(a)
    axes = _all_axes(a, axis)
    out, argout = MaxAndArgmax(axes)(a)
    if keepdims:
        out, argout = _keepdims(a, out, axes), _keepdims(a, argout, axes)
    return [out, argout]


def max(x: typing.Any, axis: typing.Any = None, keepdims: bool = False) -> Variable:
    """Maximum of ``x`` over ``axis`` (Theano 1.0: output 0 of ``MaxAndArgmax``).

    Reducing an empty axis raises ValueError when the function runs, as NumPy does.
    """
    return max_and_argmax(x, axis, keepdims)[0]


def argmax(x: typing.Any, axis: typing.Any = None, keepdims: bool = False) -> Variable:
    """Index (int64) of the maximum of ``x`` along ``axis`` (of the flattened array if None)."""
    return max_and_argmax(x, axis, keepdims)[1]


def _reversed_order(x: Variable) -> Variable:
    """A transform reversing the order of ``x``'s values, without overflow."""
    if x.type.dtype in discrete_dtypes:
        return invert(x)  # ~x = -x - 1 for ints, max - x for uints, not x for bools
    return neg(x)


def min(x: typing.Any, axis: typing.Any = None, keepdims: bool = False) -> Variable:
    """Minimum of ``x`` over ``axis``: ``-max(-x)`` (``~max(~x)`` for integers and bools)."""
    x = as_tensor_variable(x)
    m = max(_reversed_order(x), axis=axis, keepdims=keepdims)
    return invert(m) if x.type.dtype in discrete_dtypes else neg(m)


def argmin(x: typing.Any, axis: typing.Any = None, keepdims: bool = False) -> Variable:
    """Index (int64) of the minimum of ``x`` along ``axis``."""
    x = as_tensor_variable(x)
    return argmax(_reversed_order(x), axis=axis, keepdims=keepdims)


def allclose(
    a: typing.Any,
    b: typing.Any,
    rtol: float = 1.0e-5,
    atol: float = 1.0e-8,
    equal_nan: bool = False,
) -> Variable:
    """True (a bool scalar) if every element of ``a`` is close to ``b`` (see :func:`isclose`)."""
    return all(isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))
