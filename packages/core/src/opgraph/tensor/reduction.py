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
from opgraph.graph.op import Op
from opgraph.scalar.basic import and_ as scalar_and
from opgraph.scalar.basic import mul as scalar_mul
from opgraph.scalar.basic import or_ as scalar_or
from opgraph.scalar.extra import mul_without_zeros
from opgraph.scalar.type import discrete_dtypes
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.elemwise import CAReduce, CAReduceDtype, DimShuffle
from opgraph.tensor.math import (
    _keepdims,
    _normalize_axis,
    eq,
    invert,
    mul,
    neg,
    neq,
    switch,
    true_div,
    zeros_like,
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
    "any",
    "argmax",
    "argmin",
    "max",
    "max_and_argmax",
    "min",
    "prod",
]

_continuous = ("float16", "float32", "float64", "complex64", "complex128")


def _float_zeros(x: Variable) -> Variable:
    from opgraph.configdefaults import config

    return zeros_like(x, dtype=config.floatX)


def _expand_pattern(ndim: int, axes: Sequence[int]) -> list[int | str]:
    """DimShuffle pattern putting back the reduced ``axes`` of an ``ndim``-d input."""
    pattern: list[int | str] = []
    k = 0
    for i in range(ndim):
        if i in axes:
            pattern.append("x")
        else:
            pattern.append(k)
            k += 1
    return pattern


def _expand(v: Variable, ndim: int, axes: Sequence[int]) -> Variable:
    v = as_tensor_variable(v)
    return DimShuffle(v.type.broadcastable, _expand_pattern(ndim, axes))(v)


# ----------------------------------------------------------------------------------------
# prod


class Prod(CAReduceDtype):
    """Product over ``axis`` (all axes when None); printed ``Prod{axis=[0], acc_dtype=float64}``.

    The gradient handles zeros exactly (Theano's method): a group without zeros gets
    ``gz * prod / x``; in a group with a single zero only that entry gets the product of the
    others; groups with several zeros get zero. ``no_zeros_in_input=True`` promises there
    are no zeros and uses the division alone.
    """

    __props__ = ("axis", "dtype", "acc_dtype", "no_zeros_in_input")

    def __init__(
        self,
        axis: Sequence[int] | int | None = None,
        dtype: str | None = None,
        acc_dtype: str | None = None,
        no_zeros_in_input: bool = False,
    ) -> None:
        super().__init__(scalar_mul, axis, dtype, acc_dtype)
        self.no_zeros_in_input = bool(no_zeros_in_input)

    def L_op(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable]:
        (x,), (gz,) = inputs, output_grads
        if outputs[0].type.dtype not in _continuous or x.type.dtype not in _continuous:
            return [_float_zeros(x)]
        axes = self._axes(x.type.ndim)
        prod_out = _expand(outputs[0], x.type.ndim, axes)
        gz = _expand(gz, x.type.ndim, axes)
        without_zeros = true_div(mul(gz, prod_out), x)
        if self.no_zeros_in_input:
            return [without_zeros]
        where_zeros = eq(x, 0.0)
        n_zeros = tsum(where_zeros, axis=self.axis)
        single_zero_group = _expand(eq(n_zeros, 1), x.type.ndim, axes)
        where_single_zero = mul(single_zero_group, where_zeros)
        take = mul(single_zero_group, neq(gz, 0.0))
        others = ProdWithoutZeros(axis=self.axis)(mul(take, x))
        others = _expand(others, x.type.ndim, axes)
        no_zero_group = _expand(eq(n_zeros, 0), x.type.ndim, axes)
        single = mul(switch(where_single_zero, others, 0.0), gz)
        return [switch(no_zero_group, without_zeros, single)]

    def R_op(
        self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]
    ) -> list[typing.Any]:
        if eval_points[0] is None:
            return [None]
        (x,) = inputs
        z = self(x)
        axes = self._axes(x.type.ndim)
        # d prod = prod * sum(dx / x): exact where x has no zeros.
        ratio = true_div(eval_points[0], x)
        return [mul(z, tsum(ratio, axis=self.axis))] if axes else [eval_points[0]]


class ProdWithoutZeros(CAReduceDtype):
    """Product of the non-zero entries over ``axis`` (0 for an all-zero group); used by
    ``Prod``'s gradient. It has no gradient itself (second derivatives of prod)."""

    __props__ = ("axis", "dtype", "acc_dtype")

    def __init__(
        self,
        axis: Sequence[int] | int | None = None,
        dtype: str | None = None,
        acc_dtype: str | None = None,
    ) -> None:
        super().__init__(mul_without_zeros, axis, dtype, acc_dtype)

    def perform(
        self, node: Apply, inputs: Sequence[typing.Any], output_storage: list[list[typing.Any]]
    ) -> None:
        (x,) = inputs
        axes = self._axes(x.ndim)
        nonzero = x != 0
        p = np.multiply.reduce(np.where(nonzero, x, 1), axis=axes, dtype=self.acc_dtype)
        res = np.where(np.logical_or.reduce(nonzero, axis=axes), p, 0)
        output_storage[0][0] = np.asarray(res, dtype=node.outputs[0].type.numpy_dtype)

    def grad(
        self, inputs: Sequence[Variable], output_grads: Sequence[Variable]
    ) -> list[typing.Any]:
        from opgraph.gradient import grad_not_implemented

        return [
            grad_not_implemented(
                self,
                0,
                inputs[0],
                "Second derivatives of prod(a) are not supported. If a has no zeros, use "
                "prod(a, no_zeros_in_input=True).",
            )
        ]


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


class _BoolReduce(CAReduce):
    """Base of All and Any: non-bool inputs are compared with 0 first; output is bool."""

    __props__ = ("axis",)
    _np: typing.Any = None
    _scalar: typing.Any = None

    def __init__(self, axis: Sequence[int] | int | None = None) -> None:
        super().__init__(self._scalar, axis)

    def _output_dtype(self, idtype: str) -> str:
        return "bool"

    def make_node(self, x: typing.Any) -> Apply:
        x = as_tensor_variable(x)
        if x.type.dtype != "bool":
            x = neq(x, 0)
        return super().make_node(x)

    def perform(
        self, node: Apply, inputs: Sequence[typing.Any], output_storage: list[list[typing.Any]]
    ) -> None:
        (x,) = inputs
        output_storage[0][0] = np.asarray(type(self)._np(x, axis=self._axes(x.ndim)))

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        return [_float_zeros(inputs[0])]

    def L_op(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable]:
        return self.grad(inputs, output_grads)

    def R_op(
        self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]
    ) -> list[typing.Any]:
        return [None]

    def __str__(self) -> str:
        name = type(self).__name__
        return name if self.axis is None else f"{name}{{{', '.join(map(str, self.axis))}}}"


class All(_BoolReduce):
    """True where every element along ``axis`` is non-zero; printed ``All`` / ``All{0}``."""

    _np = staticmethod(np.all)
    _scalar = scalar_and


class Any(_BoolReduce):
    """True where some element along ``axis`` is non-zero; printed ``Any`` / ``Any{0}``."""

    _np = staticmethod(np.any)
    _scalar = scalar_or


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
        return Apply(self, [x], [TensorType(x.type.dtype, bcast)(), TensorType("int64", bcast)()])

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
        from opgraph.gradient import DisconnectedType

        (x,) = inputs
        g_max = output_grads[0]
        if isinstance(g_max.type, DisconnectedType):
            if isinstance(output_grads[1].type, DisconnectedType):
                return [DisconnectedType()()]
            return [_float_zeros(x)]
        if x.type.dtype not in _continuous:
            return [_float_zeros(x)]
        nd = x.type.ndim
        return [mul(eq(_expand(outputs[0], nd, self.axis), x), _expand(g_max, nd, self.axis))]

    def R_op(
        self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]
    ) -> list[typing.Any]:
        if eval_points[0] is None:
            return [None, None]
        (x,) = inputs
        xmax = self(x)[0]
        mask = eq(x, _expand(xmax, x.type.ndim, self.axis))
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
        return Apply(self, [x], [TensorType("int64", _out_bcast(x, axes))()])

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
