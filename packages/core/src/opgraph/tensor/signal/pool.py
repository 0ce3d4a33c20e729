"""Pooling over the last 2 or 3 axes of a tensor (Theano 1.0's ``tensor.signal.pool``).

``pool_2d``/``pool_3d`` build a :class:`Pool` node; its gradients are :class:`MaxPoolGrad`
(mode ``max``) and :class:`AveragePoolGrad` (``sum``, ``average_inc_pad``,
``average_exc_pad``), and the gradient of ``MaxPoolGrad`` is
:class:`DownsampleFactorMaxGradGrad`. The window size ``ws``, ``stride`` and ``pad`` are
symbolic int vectors (constants when given as tuples), as in Theano 1.0.

Semantics, axis by axis (``s`` the input's length, ``w``/``t``/``p`` window, stride, pad):

- window ``j`` covers ``[j*t, j*t + w)`` of the input padded with ``p`` on both sides;
- ``ignore_border=True``: ``(s + 2p - w) // t + 1`` windows, all inside the padded input;
  ``False`` (which needs ``p == 0``): as many windows as start inside the input, the last
  ones partial (``(s - 1) // t + 1`` when ``t >= w``, else ``max(0, (s - 1 - w + t) // t) + 1``);
- ``max`` and ``sum`` see only the input's elements (padding excluded),
  ``average_exc_pad`` divides their sum by their count, ``average_inc_pad`` by the window's
  size clipped to the padded input (padding counts as zeros);
- the gradient of ``max`` goes to every element of a window equal to its maximum (ties all
  receive it, as in Theano's kernels); NaN propagates through ``max`` as in ``np.maximum``.

The NumPy implementations walk the window offsets (``prod(ws)`` strided views), never the
pixels, and add in a fixed order (each output's window in row-major order; each input's
windows in row-major order for the gradients), which backend-c's kernels follow exactly.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.null_type import disconnected_type
from opgraph.graph.op import Op
from opgraph.scalar.type import int_dtypes, uint_dtypes
from opgraph.tensor import math as tm
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.type import TensorType

__all__ = [
    "AveragePoolGrad",
    "DownsampleFactorMaxGradGrad",
    "MaxPoolGrad",
    "MaxPoolRop",
    "Pool",
    "PoolGrad",
    "max_pool_2d_same_size",
    "pool_2d",
    "pool_3d",
]

#: The pooling modes (Theano's names); ``max_deterministic`` is accepted as ``max``.
MODES = ("max", "sum", "average_inc_pad", "average_exc_pad")

_INT_DTYPES = frozenset(int_dtypes) | frozenset(uint_dtypes)

Ints = tuple[int, ...]


# ------------------------------------------------------------------------------ shapes


def _out_len(v: Any, w: Any, t: Any, ignore_border: bool) -> Any:
    """Number of windows along one axis of padded length ``v`` (ints or symbolic scalars)."""
    if all(isinstance(a, int | np.integer) for a in (v, w, t)):
        v, w, t = int(v), int(w), int(t)
        if ignore_border:
            return max((v - w) // t + 1, 0)
        if t >= w:
            return (v - 1) // t + 1
        return max(0, (v - 1 - w + t) // t) + 1
    if ignore_border:
        return tm.maximum((v - w) // t + 1, 0)
    return tm.switch(tm.ge(t, w), (v - 1) // t + 1, tm.maximum(0, (v - 1 - w) // t + 1) + 1)


def _deprecated(
    who: str,
    nd: int,
    ws: Any,
    stride: Any,
    pad: Any,
    ds: Any,
    st: Any,
    padding: Any,
    stacklevel: int = 3,
) -> tuple[Any, Any, Any]:
    """Theano's handling of the deprecated ``ds``/``st``/``padding`` arguments (warnings
    point ``stacklevel`` frames up: the user's call)."""
    if ds is not None:
        if ws is not None:
            raise ValueError(
                "You can't provide a tuple value to both 'ws' and 'ds'."
                " Please provide a value only to 'ws'."
            )
        warnings.warn(
            f"DEPRECATION: the 'ds' parameter{who} is not going to exist anymore as it is"
            " going to be replaced by the parameter 'ws'.",
            stacklevel=stacklevel,
        )
        ws = ds
    elif ws is None:
        raise ValueError("You must provide a tuple value for the window size.")
    if st is not None:
        if stride is not None:
            raise ValueError(
                "You can't provide a tuple value to both 'st and 'stride'."
                " Please provide a value only to 'stride'."
            )
        warnings.warn(
            f"DEPRECATION: the 'st' parameter{who} is not going to exist anymore as it is"
            " going to be replaced by the parameter 'stride'.",
            stacklevel=stacklevel,
        )
        stride = st
    if padding is not None:
        if pad is not None and tuple(np.ravel(pad)) != (0,) * nd:
            raise ValueError(
                "You can't provide a tuple value to both 'padding' and pad."
                "  Please provide a value only to pad."
            )
        warnings.warn(
            f"DEPRECATION: the 'padding' parameter{who} is not going to exist anymore as it"
            " is going to be replaced by the parameter 'pad'.",
            stacklevel=stacklevel,
        )
        pad = padding
    return ws, stride, pad


def _shape_entry(v: Any, i: int) -> Any:
    """Element ``i`` of ``ws``/``stride``/``pad``: an int for a constant or a sequence."""
    if isinstance(v, Constant):
        return int(np.asarray(v.data)[i])
    if isinstance(v, Variable):
        return v[i]
    return int(v[i])


def _out_shape(
    imgshape: Sequence[Any], ws: Any, ignore_border: bool, stride: Any, pad: Any, ndim: int
) -> list[Any]:
    if ndim is None:
        ndim = 2
    if len(imgshape) < ndim:
        raise TypeError(f"imgshape must have at least {ndim} dimensions")
    if stride is None:
        stride = ws
    if pad is None:
        pad = (0,) * ndim
    out = []
    for i in range(ndim):
        v = imgshape[len(imgshape) - ndim + i]
        if isinstance(v, Constant):
            v = int(np.asarray(v.data))
        p = _shape_entry(pad, i)
        out.append(_out_len(v + p * 2, _shape_entry(ws, i), _shape_entry(stride, i), ignore_border))
    return list(imgshape[: len(imgshape) - ndim]) + out


# ------------------------------------------------------------------- runtime parameters


def _params(op: Any, x: np.ndarray, ws: Any, stride: Any, pad: Any) -> tuple[Ints, Ints, Ints]:
    """Check the runtime ``ws``/``stride``/``pad`` of ``op`` against ``x``; Python ints.

    Raises ValueError naming the op, the argument and its value: wrong length, a window or
    stride below 1, negative padding, padding without ``ignore_border``, padding not smaller
    than the window, a window larger than the padded input (Theano returned an empty array
    with ``ignore_border``, and pooled the whole input as one partial window without it; an
    empty pooled axis is such a case).
    """
    nd = op.ndim
    vals = []
    for name, v in (("ws", ws), ("stride", stride), ("pad", pad)):
        a = np.asarray(v)
        if a.shape != (nd,) or a.dtype.kind not in "iu":
            raise ValueError(
                f"{op}: {name} must be a vector of {nd} ints, got {a!r} (shape {a.shape})"
            )
        vals.append(tuple(int(i) for i in a))
    ws_, st_, pad_ = vals
    if min(ws_) < 1 or min(st_) < 1 or min(pad_) < 0:
        raise ValueError(
            f"{op}: ws and stride must be >= 1 and pad >= 0, got ws={ws_}, stride={st_}, pad={pad_}"
        )
    if max(pad_) and not op.ignore_border:
        raise ValueError(f"{op}: padding (pad={pad_}) works only with ignore_border=True")
    if any(p >= w for p, w in zip(pad_, ws_, strict=True)):
        raise ValueError(f"{op}: pad={pad_} must be smaller than the window ws={ws_}")
    if x.ndim < nd:
        raise ValueError(f"{op}: the input needs at least {nd} dimensions, got shape {x.shape}")
    spatial = x.shape[x.ndim - nd :]
    for s, w, p in zip(spatial, ws_, pad_, strict=True):
        if s + 2 * p < w:
            raise ValueError(
                f"{op}: the window ws={ws_} is larger than the input's pooled shape "
                f"{spatial} (pad={pad_}): no window fits (input shape {x.shape})"
            )
    return ws_, st_, pad_


def _pool_shape(op: Any, xshape: Sequence[int], ws: Ints, st: Ints, pad: Ints) -> tuple:
    """The output shape of ``op`` for an input of shape ``xshape`` (checked parameters)."""
    return tuple(_out_shape(tuple(xshape), ws, op.ignore_border, st, pad, op.ndim))


def _offsets(
    in_sp: Sequence[int], out_sp: Sequence[int], ws: Ints, st: Ints, pad: Ints
) -> Iterator[tuple[tuple[slice, ...], tuple[slice, ...]]]:
    """For each window offset in row-major order with any element inside the input:
    ``(input slices, output slices)`` of the pooled axes pairing each output position ``j``
    with the input element at offset ``k`` of its window, ``j*t + k - p``."""
    per_axis = []
    for s, o, w, t, p in zip(in_sp, out_sp, ws, st, pad, strict=True):
        axis = []
        for k in range(w):
            jlo = max(0, -((k - p) // t))
            jhi = min(o, (s - 1 + p - k) // t + 1)
            if jhi > jlo:
                i0 = jlo * t + k - p
                axis.append((slice(i0, i0 + (jhi - jlo - 1) * t + 1, t), slice(jlo, jhi)))
            else:
                axis.append(None)
        per_axis.append(axis)
    for combo in itertools.product(*per_axis):
        if None not in combo:
            yield tuple(c[0] for c in combo), tuple(c[1] for c in combo)


def _counts(
    mode: str, in_sp: Sequence[int], out_sp: Sequence[int], ws: Ints, st: Ints, pad: Ints
) -> np.ndarray:
    """How many elements each window averages over (an array of the output's pooled shape)."""
    total = np.ones((), dtype=np.int64)
    for s, o, w, t, p in zip(in_sp, out_sp, ws, st, pad, strict=True):
        start = np.arange(o, dtype=np.int64) * t
        if mode == "average_inc_pad":
            c = np.minimum(start + w, s + 2 * p) - start
        else:
            c = np.minimum(start + w, s + p) - np.maximum(start, p)
        total = np.multiply.outer(total, c)
    return total


def _lowest(dtype: np.dtype) -> Any:
    """The value below every other of ``dtype``: the start of a running maximum."""
    if dtype.kind == "f":
        return -np.inf
    if dtype.kind == "b":
        return False
    return np.iinfo(dtype).min


def pool_forward(
    x: np.ndarray, ws: Ints, st: Ints, pad: Ints, ignore_border: bool, mode: str, out_shape: tuple
) -> np.ndarray:
    """Pool the last ``len(ws)`` axes of ``x`` (checked parameters) into a new array."""
    nd = len(ws)
    lead = (slice(None),) * (x.ndim - nd)
    in_sp, out_sp = x.shape[x.ndim - nd :], out_shape[len(out_shape) - nd :]
    averaging = mode.startswith("average")
    acc_dtype = np.dtype("float64") if averaging and x.dtype.kind != "f" else x.dtype
    if mode == "max":
        acc = np.full(out_shape, _lowest(x.dtype), dtype=x.dtype)
        for isl, osl in _offsets(in_sp, out_sp, ws, st, pad):
            view = acc[lead + osl]
            np.maximum(view, x[lead + isl], out=view)
        return acc
    acc = np.zeros(out_shape, dtype=acc_dtype)
    for isl, osl in _offsets(in_sp, out_sp, ws, st, pad):
        view = acc[lead + osl]
        np.add(view, x[lead + isl], out=view, casting="unsafe")
    if averaging and acc.size:
        acc /= _counts(mode, in_sp, out_sp, ws, st, pad).astype(acc_dtype)
    return acc.astype(x.dtype, copy=False)


# ----------------------------------------------------------------------- graph helpers


def _int_vector(op: Any, v: Any, name: str) -> Variable:
    """``ws``/``stride``/``pad`` as a symbolic int vector, else TypeError naming it."""
    v = as_tensor_variable(v)
    if v.type.ndim != 1:
        raise TypeError(f"{op}: {name} must be a vector of {op.ndim} ints, got {v} ({v.type})")
    if v.type.dtype not in _INT_DTYPES:
        what = {"ws": "Pool downsample", "stride": "Stride", "pad": "Padding"}[name]
        raise TypeError(f"{what} parameters must be ints. {op}: {name} is {v} ({v.type})")
    n = v.type.shape[0] if v.type.shape else None
    if isinstance(v, Constant):
        n = np.asarray(v.data).shape[0]
    if n is not None and n != op.ndim:
        raise ValueError(f"{op}: {name} must have {op.ndim} elements, got {n} ({v})")
    return v


def _const(v: Variable) -> Ints | None:
    return tuple(int(i) for i in np.asarray(v.data)) if isinstance(v, Constant) else None


def _tensor(op: Any, x: Any, name: str, pos: int) -> Variable:
    """Input ``x`` as a tensor with at least ``op.ndim`` dimensions, else TypeError."""
    x = as_tensor_variable(x)
    if x.type.ndim < op.ndim:
        raise TypeError(
            f"{op}: input {pos} ({name}) needs at least {op.ndim} dimensions (the last "
            f"{op.ndim} are pooled), got {x} of type {x.type}"
        )
    if x.type.dtype.startswith("complex"):
        raise TypeError(f"{op}: input {pos} ({name}) cannot be complex, got {x.type}")
    return x


def _pool_inputs(
    op: Any, x: Variable, ws: Any, stride: Any, pad: Any
) -> tuple[Variable, Variable, Variable]:
    """Theano's defaults and build-time checks of ``ws``/``stride``/``pad`` for ``op``."""
    nd = op.ndim
    if stride is None:
        stride = ws
    if pad is None:
        pad = (0,) * nd
    ws_v = _int_vector(op, ws, "ws")
    st_v = _int_vector(op, stride, "stride")
    pad_v = _int_vector(op, pad, "pad")
    cws, cst, cpad = _const(ws_v), _const(st_v), _const(pad_v)
    for name, c, low in (("ws", cws, 1), ("stride", cst, 1), ("pad", cpad, 0)):
        if c is not None and min(c) < low:
            raise ValueError(f"{op}: {name} must be >= {low} in every axis, got {c}")
    if cpad is not None and max(cpad) and not op.ignore_border:
        raise NotImplementedError(f"padding works only with ignore_border=True ({op}: pad={cpad})")
    if cws is not None and cpad is not None:
        if any(p >= w for p, w in zip(cpad, cws, strict=True)):
            raise NotImplementedError(
                f"padding must be smaller than strides ({op}: pad={cpad} must be smaller "
                f"than the window ws={cws} in every axis)"
            )
        spatial = x.type.shape[x.type.ndim - nd :]
        for s, w, p in zip(spatial, cws, cpad, strict=True):
            if s is not None and s + 2 * p < w:
                raise ValueError(
                    f"{op}: the window ws={cws} is larger than the input's pooled shape "
                    f"{spatial} (pad={cpad}): no window fits ({x})"
                )
    return ws_v, st_v, pad_v


def _static_out(op: Any, x: Variable, ws: Variable, st: Variable, pad: Variable) -> TensorType:
    """The output type of a pooling of ``x``: its dtype, static shape where it is known."""
    nd = op.ndim
    lead = x.type.shape[: x.type.ndim - nd]
    sp: list[int | None] = [None] * nd
    cws, cst, cpad = _const(ws), _const(st), _const(pad)
    if cws is not None and cst is not None and cpad is not None:
        for i, s in enumerate(x.type.shape[x.type.ndim - nd :]):
            if s is not None and (op.ignore_border or s > 0):
                sp[i] = _out_len(s + 2 * cpad[i], cws[i], cst[i], op.ignore_border)
    broad = x.type.broadcastable[: x.type.ndim - nd] + (False,) * nd
    return TensorType(x.type.dtype, broad, shape=tuple(lead) + tuple(sp))


def _check_same(op: Any, name: str, a: np.ndarray, shape: tuple) -> None:
    if tuple(a.shape) != tuple(shape):
        raise ValueError(f"{op}: {name} has shape {a.shape}, expected {tuple(shape)}")


class _PoolBase:
    """Props and constructor shared by the pooling ops (a mixin: the Ops derive from it and
    :class:`~opgraph.graph.op.Op`)."""

    __props__ = ("ignore_border", "mode", "ndim")

    def __init__(
        self, ignore_border: bool = False, mode: str = "max", ndim: int = 2, openmp: Any = None
    ) -> None:
        if mode == "max_deterministic":
            mode = "max"
        if mode not in MODES:
            raise ValueError(
                "Pool mode parameter only support 'max', 'sum', 'average_inc_pad' and "
                f"'average_exc_pad'. Got {mode}"
            )
        if not isinstance(ndim, int | np.integer) or ndim < 1:
            raise ValueError(f"{type(self).__name__}: ndim must be a positive int, got {ndim!r}")
        self.ignore_border = bool(ignore_border)
        self.mode = mode
        self.ndim = int(ndim)
        self.openmp = openmp


class Pool(_PoolBase, Op):
    """Max, sum or average over windows of the last ``ndim`` axes (Theano's ``Pool``).

    Inputs ``(x, ws, stride, pad)``: ``x`` any tensor with at least ``ndim`` dimensions
    (the leading ones are batch axes), ``ws``/``stride``/``pad`` int vectors of ``ndim``
    elements. See the module's docstring for the windows and modes.
    """

    @staticmethod
    def out_shape(
        imgshape: Sequence[Any],
        ws: Any = None,
        ignore_border: bool = False,
        stride: Any = None,
        pad: Any = None,
        ndim: int = 2,
        ds: Any = None,
        st: Any = None,
        padding: Any = None,
    ) -> list[Any]:
        """The output shape for an input of shape ``imgshape`` (ints or symbolic scalars)."""
        ws, stride, pad = _deprecated("", ndim, ws, stride, pad, ds, st, padding)
        return _out_shape(imgshape, ws, ignore_border, stride, pad, ndim)

    def make_node(self, x: Any, ws: Any, stride: Any = None, pad: Any = None) -> Apply:
        x = _tensor(self, x, "x", 0)
        ws, stride, pad = _pool_inputs(self, x, ws, stride, pad)
        return Apply(self, [x, ws, stride, pad], [_static_out(self, x, ws, stride, pad)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list) -> None:
        x, ws, stride, pad = inputs
        ws, st, pad = _params(self, x, ws, stride, pad)
        shape = _pool_shape(self, x.shape, ws, st, pad)
        output_storage[0][0] = pool_forward(x, ws, st, pad, self.ignore_border, self.mode, shape)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        _x, ws, stride, pad = node.inputs
        return [_out_shape(input_shapes[0], ws, self.ignore_border, stride, pad, self.ndim)]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True], [False], [False], [False]]

    def L_op(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Any) -> list:
        x, ws, stride, pad = inputs
        (gz,) = grads
        disc = [disconnected_type() for _ in range(3)]
        if self.mode == "max":
            op = MaxPoolGrad(self.ignore_border, ndim=self.ndim)
            return [op(x, outputs[0], gz, ws, stride, pad), *disc]
        op2 = AveragePoolGrad(self.ignore_border, mode=self.mode, ndim=self.ndim)
        return [op2(x, gz, ws, stride, pad), *disc]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list:
        if eval_points[0] is None:
            return [None]
        if self.mode != "max":
            return [self(eval_points[0], *inputs[1:])]
        x, ws, stride, pad = inputs
        op = DownsampleFactorMaxGradGrad(self.ignore_border, self.mode, self.ndim)
        return [op(x, self(*inputs), eval_points[0], ws, stride, pad)]


class PoolGrad(_PoolBase, Op):
    """Base of the pooling gradients: their output is the input's gradient (its shape)."""

    @staticmethod
    def out_shape(
        imgshape: Sequence[Any],
        ws: Any = None,
        ignore_border: bool = False,
        stride: Any = None,
        pad: Any = None,
        ndim: int = 2,
        ds: Any = None,
        st: Any = None,
        padding: Any = None,
    ) -> list[Any]:
        """The pooled shape for an input of shape ``imgshape`` (as :meth:`Pool.out_shape`)."""
        ws, stride, pad = _deprecated(" in PoolGrad", ndim, ws, stride, pad, ds, st, padding)
        return _out_shape(imgshape, ws, ignore_border, stride, pad, ndim)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]

    def _grad_inputs(self, node_inputs: Sequence[Variable]) -> None:
        x = node_inputs[0]
        for pos, v in enumerate(node_inputs[1:-3], start=1):
            if v.type.ndim != x.type.ndim:
                raise TypeError(
                    f"{self}: input {pos} ({v}, {v.type}) must have the dimensions of x ({x.type})"
                )


class MaxPoolGrad(PoolGrad):
    """Gradient of max pooling: ``gx[c] = sum of gz[r]`` over the windows ``r`` holding
    ``c`` whose maximum ``maxout[r]`` equals ``x[c]`` (ties all receive it).

    Inputs ``(x, maxout, gz, ws, stride, pad)``; the output has ``x``'s shape and dtype.
    """

    def __init__(self, ignore_border: bool, ndim: int = 2, openmp: Any = None) -> None:
        super().__init__(ignore_border, mode="max", ndim=ndim, openmp=openmp)

    def make_node(
        self, x: Any, maxout: Any, gz: Any, ws: Any, stride: Any = None, pad: Any = None
    ) -> Apply:
        x = _tensor(self, x, "x", 0)
        maxout = _tensor(self, maxout, "maxout", 1)
        gz = _tensor(self, gz, "gz", 2)
        ws, stride, pad = _pool_inputs(self, x, ws, stride, pad)
        inputs = [x, maxout, gz, ws, stride, pad]
        self._grad_inputs(inputs)
        return Apply(self, inputs, [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list) -> None:
        x, maxout, gz, ws, stride, pad = inputs
        ws, st, pad = _params(self, x, ws, stride, pad)
        shape = _pool_shape(self, x.shape, ws, st, pad)
        _check_same(self, "maxout", maxout, shape)
        _check_same(self, "gz", gz, shape)
        output_storage[0][0] = max_pool_grad(x, maxout, gz, ws, st, pad)

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True], [True], [True], [False], [False], [False]]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list:
        x, maxout, _gz, ws, stride, pad = inputs
        (ggx,) = output_grads
        op = DownsampleFactorMaxGradGrad(self.ignore_border, ndim=self.ndim)
        return [
            tm.zeros_like(x),
            tm.zeros_like(maxout),
            op(x, maxout, ggx, ws, stride, pad),
            *[disconnected_type() for _ in range(3)],
        ]


def max_pool_grad(
    x: np.ndarray, maxout: np.ndarray, gz: np.ndarray, ws: Ints, st: Ints, pad: Ints
) -> np.ndarray:
    """:class:`MaxPoolGrad`'s value: each input's windows add in row-major order."""
    nd = len(ws)
    lead = (slice(None),) * (x.ndim - nd)
    gz = np.asarray(gz, dtype=x.dtype)
    gx = np.zeros(x.shape, dtype=x.dtype)
    zero = np.zeros((), dtype=x.dtype)
    in_sp, out_sp = x.shape[x.ndim - nd :], maxout.shape[maxout.ndim - nd :]
    # Offsets in reverse row-major order visit each input's windows in row-major order.
    for isl, osl in reversed(list(_offsets(in_sp, out_sp, ws, st, pad))):
        view = gx[lead + isl]
        view += np.where(x[lead + isl] == maxout[lead + osl], gz[lead + osl], zero)
    return gx


class AveragePoolGrad(PoolGrad):
    """Gradient of sum and average pooling: every input element of a window receives
    ``gz[r]`` (``sum``) or ``gz[r] / count[r]`` (the averages' divisor).

    Inputs ``(x, gz, ws, stride, pad)`` (``dummy``, Theano's placeholder, is ignored).
    """

    def __init__(
        self, ignore_border: bool, mode: str = "average_inc_pad", ndim: int = 2, openmp: Any = None
    ) -> None:
        if mode not in ("sum", "average_inc_pad", "average_exc_pad"):
            raise ValueError(f"AveragePoolGrad: mode must be sum or an average, got {mode!r}")
        super().__init__(ignore_border, mode=mode, ndim=ndim, openmp=openmp)

    def make_node(
        self, x: Any, gz: Any, ws: Any, stride: Any = None, pad: Any = None, dummy: Any = None
    ) -> Apply:
        x = _tensor(self, x, "x", 0)
        gz = _tensor(self, gz, "gz", 1)
        ws, stride, pad = _pool_inputs(self, x, ws, stride, pad)
        inputs = [x, gz, ws, stride, pad]
        self._grad_inputs(inputs)
        return Apply(self, inputs, [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list) -> None:
        x, gz, ws, stride, pad = inputs
        ws, st, pad = _params(self, x, ws, stride, pad)
        shape = _pool_shape(self, x.shape, ws, st, pad)
        _check_same(self, "gz", gz, shape)
        output_storage[0][0] = average_pool_grad(x.shape, x.dtype, gz, ws, st, pad, self.mode)

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True], [True], [False], [False], [False]]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list:
        x, _gz, ws, stride, pad = inputs
        (ggx,) = output_grads
        op = Pool(ignore_border=self.ignore_border, mode=self.mode, ndim=self.ndim)
        return [
            tm.zeros_like(x),
            op(ggx, ws, stride, pad),
            *[disconnected_type() for _ in range(3)],
        ]


def average_pool_grad(
    xshape: tuple, dtype: np.dtype, gz: np.ndarray, ws: Ints, st: Ints, pad: Ints, mode: str
) -> np.ndarray:
    """:class:`AveragePoolGrad`'s value: each input's windows add in row-major order."""
    nd = len(ws)
    lead = (slice(None),) * (len(xshape) - nd)
    in_sp, out_sp = xshape[len(xshape) - nd :], gz.shape[gz.ndim - nd :]
    val = np.asarray(gz, dtype=dtype)
    if mode != "sum":
        counts = _counts(mode, in_sp, out_sp, ws, st, pad)
        if dtype.kind == "f":
            val = val / counts.astype(dtype)
        else:
            val = (gz / counts).astype(dtype)
    gx = np.zeros(xshape, dtype=dtype)
    for isl, osl in reversed(list(_offsets(in_sp, out_sp, ws, st, pad))):
        view = gx[lead + isl]
        view += val[lead + osl]
    return gx


class DownsampleFactorMaxGradGrad(_PoolBase, Op):
    """Gradient of :class:`MaxPoolGrad` with respect to ``gz``: ``ggz[r] = sum of ggx[c]``
    over the elements ``c`` of window ``r`` equal to its maximum (row-major order).

    Inputs ``(x, maxout, ggx, ws, stride, pad)``; the output has ``maxout``'s shape and
    ``x``'s dtype.
    """

    def __init__(
        self, ignore_border: bool, mode: str = "max", ndim: int = 2, openmp: Any = None
    ) -> None:
        if mode != "max":
            raise ValueError(f"DownsampleFactorMaxGradGrad: mode must be 'max', got {mode!r}")
        super().__init__(ignore_border, mode=mode, ndim=ndim, openmp=openmp)

    def make_node(
        self, x: Any, maxout: Any, gz: Any, ws: Any, stride: Any = None, pad: Any = None
    ) -> Apply:
        x = _tensor(self, x, "x", 0)
        maxout = _tensor(self, maxout, "maxout", 1)
        gz = _tensor(self, gz, "ggx", 2)
        ws, stride, pad = _pool_inputs(self, x, ws, stride, pad)
        inputs = [x, maxout, gz, ws, stride, pad]
        PoolGrad._grad_inputs(self, inputs)  # type: ignore[arg-type]
        out = TensorType(x.type.dtype, maxout.type.broadcastable)
        return Apply(self, inputs, [out()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list) -> None:
        x, maxout, ggx, ws, stride, pad = inputs
        ws, st, pad = _params(self, x, ws, stride, pad)
        shape = _pool_shape(self, x.shape, ws, st, pad)
        _check_same(self, "maxout", maxout, shape)
        _check_same(self, "ggx", ggx, x.shape)
        output_storage[0][0] = max_pool_grad_grad(x, maxout, ggx, ws, st, pad)

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[1]]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True], [True], [True], [False], [False], [False]]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list:
        x, maxout, _ggx, ws, stride, pad = inputs
        (gz,) = output_grads
        op = MaxPoolGrad(ignore_border=self.ignore_border, ndim=self.ndim)
        return [
            tm.zeros_like(x),
            tm.zeros_like(maxout),
            op(x, maxout, gz, ws, stride, pad),
            *[disconnected_type() for _ in range(3)],
        ]


def max_pool_grad_grad(
    x: np.ndarray, maxout: np.ndarray, ggx: np.ndarray, ws: Ints, st: Ints, pad: Ints
) -> np.ndarray:
    """:class:`DownsampleFactorMaxGradGrad`'s value: each window adds in row-major order."""
    nd = len(ws)
    lead = (slice(None),) * (x.ndim - nd)
    ggx = np.asarray(ggx, dtype=x.dtype)
    ggz = np.zeros(maxout.shape, dtype=x.dtype)
    zero = np.zeros((), dtype=x.dtype)
    in_sp, out_sp = x.shape[x.ndim - nd :], maxout.shape[maxout.ndim - nd :]
    for isl, osl in _offsets(in_sp, out_sp, ws, st, pad):
        view = ggz[lead + osl]
        view += np.where(x[lead + isl] == maxout[lead + osl], ggx[lead + isl], zero)
    return ggz


class MaxPoolRop(_PoolBase, Op):
    """The R-operator of max pooling taking the first maximum (Theano's ``MaxPoolRop``):
    ``out[r] = eval_point[c]`` at the first ``c`` (row-major) where ``x`` reaches the
    window's maximum (the first NaN, if any, as ``np.argmax``).

    Inputs ``(x, eval_point, ws, stride, pad)``. ``Pool.R_op`` itself uses
    :class:`DownsampleFactorMaxGradGrad` (the sum over ties), as Theano 1.0 does.
    """

    def __init__(
        self, ignore_border: bool = False, mode: str = "max", ndim: int = 2, openmp: Any = None
    ) -> None:
        if mode != "max":
            raise ValueError(f"MaxPoolRop: mode must be 'max', got {mode!r}")
        super().__init__(ignore_border, mode=mode, ndim=ndim, openmp=openmp)

    def make_node(
        self, x: Any, eval_point: Any, ws: Any, stride: Any = None, pad: Any = None
    ) -> Apply:
        x = _tensor(self, x, "x", 0)
        eval_point = _tensor(self, eval_point, "eval_point", 1)
        if eval_point.type.ndim != x.type.ndim:
            raise TypeError(f"{self}: eval_point ({eval_point.type}) must match x ({x.type})")
        ws, stride, pad = _pool_inputs(self, x, ws, stride, pad)
        out = _static_out(self, x, ws, stride, pad)
        out = TensorType(eval_point.type.dtype, out.broadcastable, shape=out.shape)
        return Apply(self, [x, eval_point, ws, stride, pad], [out()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list) -> None:
        x, ev, ws, stride, pad = inputs
        ws, st, pad = _params(self, x, ws, stride, pad)
        _check_same(self, "eval_point", ev, x.shape)
        shape = _pool_shape(self, x.shape, ws, st, pad)
        nd = self.ndim
        lead = (slice(None),) * (x.ndim - nd)
        best = np.zeros(shape, dtype=x.dtype)
        out = np.zeros(shape, dtype=node.outputs[0].type.dtype)
        seen = np.zeros(shape, dtype=bool)
        for isl, osl in _offsets(x.shape[x.ndim - nd :], shape[len(shape) - nd :], ws, st, pad):
            xs, b, s = x[lead + isl], best[lead + osl], seen[lead + osl]
            take = ~s | (xs > b)
            if x.dtype.kind == "f":
                take |= np.isnan(xs) & ~np.isnan(b)
            b[take] = xs[take]
            out[lead + osl][take] = ev[lead + isl][take]
            s[...] = True
        output_storage[0][0] = out

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        _x, _ev, ws, stride, pad = node.inputs
        return [_out_shape(input_shapes[0], ws, self.ignore_border, stride, pad, self.ndim)]


# ------------------------------------------------------------------------ functions


def max_pool_2d_same_size(input: Any, patch_size: Any) -> Variable:
    """Zero every element of ``input`` that is not the maximum of its non-overlapping
    ``patch_size`` patch (over the last two axes); the output has the input's shape."""
    output = Pool(True)(input, patch_size)
    return MaxPoolGrad(True)(input, output, output, patch_size)


def _pool_nd(
    name: str,
    nd: int,
    input: Any,
    ws: Any,
    ignore_border: bool | None,
    stride: Any,
    pad: Any,
    mode: str,
    ds: Any,
    st: Any,
    padding: Any,
) -> Variable:
    ws, stride, pad = _deprecated("", nd, ws, stride, pad, ds, st, padding, stacklevel=4)
    input = as_tensor_variable(input)
    if input.type.ndim < nd:
        raise NotImplementedError(
            f"{name} requires a dimension >= {nd}: input {input} has type {input.type}"
        )
    if ignore_border is None:
        zeros = "(0, 0)" if nd == 2 else "(0, 0, 0)"
        warnings.warn(
            f"{name}() will have the parameter ignore_border default value changed to True"
            " (currently False). To have consistent behavior with all Theano version,"
            " explicitly add the parameter ignore_border=True. On the GPU, using"
            " ignore_border=True is needed to use cuDNN. When using ignore_border=False and"
            " not using cuDNN, the only GPU combination supported is when"
            f" `ws == stride and pad == {zeros} and mode == 'max'`. Otherwise, the"
            " convolution will be executed on CPU.",
            stacklevel=3,
        )
        ignore_border = False
    return Pool(ignore_border, ndim=nd, mode=mode)(input, ws, stride, pad)


def pool_2d(
    input: Any,
    ws: Any = None,
    ignore_border: bool | None = None,
    stride: Any = None,
    pad: Any = (0, 0),
    mode: str = "max",
    ds: Any = None,
    st: Any = None,
    padding: Any = None,
) -> Variable:
    """Pool the last two axes of ``input`` with windows ``ws`` (Theano 1.0's ``pool_2d``).

    ``stride`` defaults to ``ws``; ``pad`` (zeros on both sides) needs
    ``ignore_border=True``; ``ignore_border=None`` warns and means False, as in Theano.
    ``ds``/``st``/``padding`` are the deprecated names of ``ws``/``stride``/``pad``.
    """
    return _pool_nd("pool_2d", 2, input, ws, ignore_border, stride, pad, mode, ds, st, padding)


def pool_3d(
    input: Any,
    ws: Any = None,
    ignore_border: bool | None = None,
    stride: Any = None,
    pad: Any = (0, 0, 0),
    mode: str = "max",
    ds: Any = None,
    st: Any = None,
    padding: Any = None,
) -> Variable:
    """Pool the last three axes of ``input`` (Theano 1.0's ``pool_3d``; see :func:`pool_2d`)."""
    return _pool_nd("pool_3d", 3, input, ws, ignore_border, stride, pad, mode, ds, st, padding)
