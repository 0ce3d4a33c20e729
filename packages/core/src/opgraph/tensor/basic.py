"""Turning values into tensor variables: as_tensor_variable, constant, Rebroadcast.

Also the two ops between scalars and 0-d tensors (``TensorFromScalar``, ``ScalarFromTensor``):
``as_tensor_variable`` of a scalar variable needs the first.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import opgraph.scalar.basic as ps
from opgraph.graph.basic import Apply, Constant, Variable, add_variable_converter
from opgraph.graph.null_type import disconnected_type, grad_not_implemented
from opgraph.graph.op import Op
from opgraph.plugins import get_plugin_manager
from opgraph.scalar.basic import _autocast_python
from opgraph.scalar.type import ScalarType, discrete_dtypes, get_scalar_type
from opgraph.tensor.type import TensorType

__all__ = [
    "Choose",
    "Rebroadcast",
    "ScalarFromTensor",
    "TensorFromScalar",
    "as_tensor",
    "as_tensor_variable",
    "choose",
    "constant",
    "patternbroadcast",
    "register_transfer",
    "scalar_from_tensor",
    "tensor_from_scalar",
    "transfer",
]


class _AsTensorError(TypeError):
    """The other operand cannot become a tensor (lets Python try the reflected operator)."""


def constant(
    x: Any, name: str | None = None, ndim: int | None = None, dtype: str | None = None
) -> Constant:
    """Return a TensorConstant holding ``x``.

    Python numbers get Theano's dtype: the smallest integer type that holds them, float32
    when exact (else float64; floatX when that is float32). Length-1 dimensions are
    broadcastable.
    """
    if isinstance(x, Constant) and isinstance(x.type, TensorType):
        return x  # type: ignore[return-value]
    if dtype is not None:
        arr = np.asarray(x, dtype=dtype)
    elif isinstance(x, bool | int | float | complex) and not isinstance(x, np.generic):
        arr = np.asarray(_autocast_python(x))
    else:
        arr = np.asarray(x)
    if arr.dtype == object:
        raise _AsTensorError(f"cannot make a tensor constant from {x!r} ({type(x).__name__})")
    if arr.dtype.kind in "US":
        raise _AsTensorError(f"cannot make a tensor constant from the string {x!r}")
    if ndim is not None and arr.ndim != ndim:
        if arr.ndim > ndim:
            squeeze = [i for i, n in enumerate(arr.shape) if n == 1][: arr.ndim - ndim]
            if len(squeeze) == arr.ndim - ndim:
                arr = arr.reshape([n for i, n in enumerate(arr.shape) if i not in squeeze])
        if arr.ndim != ndim:
            raise ValueError(f"constant {x!r} has {arr.ndim} dimension(s), expected {ndim}")
    ttype = TensorType(str(arr.dtype), [n == 1 for n in arr.shape])
    return ttype.make_constant(arr, name=name)  # type: ignore[return-value]


def as_tensor_variable(x: Any, name: str | None = None, ndim: int | None = None) -> Variable:
    """Return ``x`` as a tensor Variable: variables pass through, values become constants.

    Raises TypeError (naming what was given) for objects that cannot be tensors.
    """
    if isinstance(x, Apply):
        x = x.default_output()
    if isinstance(x, Variable):
        if isinstance(x.type, ScalarType):
            x = tensor_from_scalar(x)
        if not isinstance(x.type, TensorType) and hasattr(x, "_as_TensorVariable"):
            x = x._as_TensorVariable()  # Theano's protocol: a GPU variable gives host_from_gpu
        if not isinstance(x.type, TensorType):
            raise _AsTensorError(
                f"expected a tensor variable, got {x} of type {x.type}. "
                "HINT: convert it with the plugin's own conversion op "
                "(e.g. sparse.dense_from_sparse)."
            )
        if ndim is not None and x.type.ndim != ndim:
            extra = x.type.ndim - ndim
            if extra > 0 and sum(x.type.broadcastable[:extra]) == extra:
                return x.dimshuffle(list(range(extra, x.type.ndim)))  # type: ignore[attr-defined]
            raise ValueError(f"{x} has {x.type.ndim} dimension(s), expected {ndim}")
        return x  # type: ignore[return-value]
    return as_tensor_of_value(x, name, ndim)


@functools.singledispatch
def as_tensor_of_value(x: Any, name: str | None, ndim: int | None) -> Variable:
    """``as_tensor_variable`` of anything but a Variable or an Apply: a constant by default.

    Modules above this one register the types they build symbolically:
    :mod:`opgraph.tensor.joining` turns lists and tuples holding variables into ``stack``.
    """
    try:
        return constant(x, name=name, ndim=ndim)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, _AsTensorError):
            raise
        raise _AsTensorError(f"cannot convert {x!r} to a tensor: {exc}") from exc


as_tensor = as_tensor_variable
add_variable_converter(as_tensor_variable)


#: Functions given to :func:`register_transfer`, asked in order before the plugins.
_TRANSFERS: list[Callable[[Any, Any], Any]] = []


def transfer(var: Any, target: Any) -> Variable:
    """``var`` on ``target`` (Theano's ``tensor.transfer``).

    ``"cpu"`` gives a host tensor (``as_tensor_variable``: a GPU variable is copied to the
    host). Any other target is answered by the functions given to :func:`register_transfer`,
    then by the plugins' ``opgraph_transfer`` hooks (opgraph-backend-cuda's takes the GPU
    targets ``"cuda"``, ``"cudaN"``, ``"gpu"``, ``"devN"`` and None); ValueError if none does.
    """
    if target == "cpu":
        return as_tensor_variable(var)
    for fn in _TRANSFERS:
        moved = fn(var, target)
        if moved is not None:
            return moved
    moved = get_plugin_manager().transfer(var=var, target=target)
    if moved is not None:
        return moved
    raise ValueError(
        f"Can't transfer to target {target!r}: no transfer function takes it ('cpu' is "
        "core's; GPU targets such as 'cuda', 'cuda0', 'gpu', 'dev0' come from "
        "opgraph-backend-cuda).\nHINT: pip install opgraph-backend-cuda for the GPU, or "
        "give a function of your own to opgraph.tensor.basic.register_transfer."
    )


def register_transfer(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """Make :func:`transfer` ask ``fn(var, target)`` (a moved variable, or None for targets
    it does not know) before the plugins (Theano's ``register_transfer``). Returns ``fn``."""
    if fn not in _TRANSFERS:
        _TRANSFERS.append(fn)
    return fn


class Rebroadcast(Op):
    """Change which dimensions are broadcastable, checking at run time that those are length 1.

    ``Rebroadcast((0, True))`` marks dim 0 broadcastable. The output is a view of the input.
    """

    __props__ = ("axis",)
    view_map = {0: [0]}

    def __init__(self, *axis: tuple[int, bool]) -> None:
        self.axis = tuple(sorted((int(a), bool(b)) for a, b in axis))

    def __str__(self) -> str:
        items = ",".join(str(a) if b else "?" for a, b in self.axis)
        return f"Rebroadcast{{{items}}}"

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        bcast = list(x.type.broadcastable)
        for a, b in self.axis:
            if not 0 <= a < x.type.ndim:
                raise ValueError(f"{self}: axis {a} out of range for {x} ({x.type})")
            bcast[a] = b
        return Apply(self, [x], [TensorType(x.type.dtype, bcast)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        (x,) = inputs
        for a, b in self.axis:
            if b and x.shape[a] != 1:
                raise ValueError(
                    f"{self}: dimension {a} was declared broadcastable but has length "
                    f"{x.shape[a]} (shape {x.shape})"
                )
        output_storage[0][0] = x

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        (shp,) = input_shapes
        return [
            tuple(
                1 if b else s
                for (s, b) in zip(shp, node.outputs[0].type.broadcastable, strict=True)
            )
        ]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        (x,), (gz,) = inputs, output_grads
        return [patternbroadcast(gz, x.type.broadcastable)]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]) -> list[Any]:
        return [None if eval_points[0] is None else self(eval_points[0])]


def patternbroadcast(x: Any, broadcastable: Sequence[bool]) -> Variable:
    """Return ``x`` with the given broadcastable pattern (a Rebroadcast, or ``x`` itself)."""
    x = as_tensor_variable(x)
    changes = [
        (i, b)
        for i, (b, xb) in enumerate(zip(broadcastable, x.type.broadcastable, strict=True))
        if b != xb
    ]
    if not changes:
        return x
    return Rebroadcast(*changes)(x)


def specify_broadcastable_type(var: Variable, target: TensorType) -> Variable:
    """Convert ``var`` to ``target`` (same dtype and ndim) by adjusting broadcastable flags."""
    return patternbroadcast(var, target.broadcastable)


TensorType.rebroadcast = staticmethod(specify_broadcastable_type)  # type: ignore[assignment]


def unbroadcast(x: Any, *axes: int) -> Variable:
    """Make the given dimensions of ``x`` non-broadcastable (Theano's ``tensor.unbroadcast``)."""
    x = as_tensor_variable(x)
    pattern = list(x.type.broadcastable)
    for a in axes:
        pattern[a] = False
    return patternbroadcast(x, pattern)


def addbroadcast(x: Any, *axes: int) -> Variable:
    """Make the given dimensions of ``x`` broadcastable (checked at run time)."""
    x = as_tensor_variable(x)
    pattern = list(x.type.broadcastable)
    for a in axes:
        pattern[a] = True
    return patternbroadcast(x, pattern)


class TensorFromScalar(Op):
    """A 0-d tensor holding the value of a scalar variable."""

    __props__ = ()

    def make_node(self, s: Any) -> Apply:
        s = ps.as_scalar(s)
        if not isinstance(s.type, ScalarType):
            raise TypeError(f"TensorFromScalar needs a scalar, got {s}")
        return Apply(self, [s], [TensorType(s.type.dtype, ())()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        output_storage[0][0] = np.asarray(inputs[0], dtype=node.outputs[0].type.dtype)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [()]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        return [scalar_from_tensor(output_grads[0])]


class ScalarFromTensor(Op):
    """The scalar value of a 0-d tensor."""

    __props__ = ()

    def make_node(self, t: Any) -> Apply:
        t = as_tensor_variable(t)
        if t.type.ndim != 0:
            raise TypeError(f"ScalarFromTensor needs a 0-d tensor, got {t} of type {t.type}")
        return Apply(self, [t], [get_scalar_type(t.type.dtype)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        output_storage[0][0] = inputs[0][()]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [()]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        return [tensor_from_scalar(output_grads[0])]


tensor_from_scalar = TensorFromScalar()
scalar_from_tensor = ScalarFromTensor()


class Choose(Op):
    """``np.choose(a, choices, mode=mode)``: for each position, the entry of the choice that
    the integer ``a`` names there (Theano's ``tensor.basic.Choose``).

    ``choices`` is one tensor whose first dimension enumerates the choices (a list of tensors
    is stacked first, by :func:`choose`); ``a`` and each choice broadcast against each other,
    right-aligned. ``mode`` says what an index outside ``[0, n)`` does: ``'raise'`` (a
    ValueError when the function runs), ``'wrap'`` (modulo n) or ``'clip'``.
    """

    __props__ = ("mode",)

    def __init__(self, mode: str = "raise") -> None:
        if mode not in ("raise", "wrap", "clip"):
            raise ValueError(f"Choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
        self.mode = mode

    def make_node(self, a: Any, choices: Any) -> Apply:
        a = as_tensor_variable(a)
        if a.type.dtype not in discrete_dtypes:
            raise TypeError(
                f"choose's first argument must have an [u]int* dtype, got {a} of dtype "
                f"{a.type.dtype}. HINT: cast it, e.g. opgraph.tensor.cast(a, 'int64')."
            )
        choices = as_tensor_variable(choices)
        if choices.type.ndim < 1:
            raise TypeError(
                f"choose's choices must have a first dimension enumerating the choices, got "
                f"{choices} of type {choices.type}"
            )
        out_ndim = max(a.type.ndim, choices.type.ndim - 1)
        a_b = (True,) * (out_ndim - a.type.ndim) + a.type.broadcastable
        c_b = (True,) * (out_ndim - choices.type.ndim + 1) + choices.type.broadcastable[1:]
        bcast = [x and y for x, y in zip(a_b, c_b, strict=True)]
        return Apply(self, [a, choices], [TensorType(choices.type.dtype, bcast)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        a, choices = inputs
        if a.dtype.kind == "b" or a.dtype == np.uint64:
            a = a.astype(np.intp)  # np.choose takes indices that cast safely to intp
        out = np.choose(a, choices, mode=self.mode)
        output_storage[0][0] = np.asarray(out, dtype=node.outputs[0].type.dtype)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        """Theano's rule: each dimension is ``a``'s unless ``a`` is broadcastable there (or
        lacks it), then the choices'."""
        a, choices = node.inputs
        a_shape, c_shape = input_shapes
        out_ndim = node.outputs[0].type.ndim
        a_off = out_ndim - a.type.ndim
        c_off = out_ndim - choices.type.ndim + 1
        shape: list[Any] = []
        for d in range(out_ndim):
            if d >= a_off and not a.type.broadcastable[d - a_off]:
                shape.append(a_shape[d - a_off])
            elif d >= c_off:
                shape.append(c_shape[d - c_off + 1])
            else:
                shape.append(a_shape[d - a_off] if d >= a_off else 1)
        return [tuple(shape)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        """The integer index ``a`` is not a differentiable input; Theano 1.0 defines no
        gradient for the choices, so asking for it names this op (a NullType)."""
        return [
            disconnected_type(),
            grad_not_implemented(
                self,
                1,
                inputs[1],
                "Theano 1.0's Choose has no gradient. HINT: switch(eq(a, i), x_i, ...) or "
                "advanced indexing are differentiable.",
            ),
        ]


def choose(a: Any, choices: Any, out: None = None, mode: str = "raise") -> Variable:
    """Build an array from an index array ``a`` and the arrays ``choices`` to choose from,
    as ``numpy.choose`` (Theano's ``tensor.basic.choose``; ``out`` must be None)."""
    if out is not None:
        raise TypeError("choose: out= is not supported (symbolic results are new variables)")
    return Choose(mode)(a, choices)
