"""Batch normalization (Theano 1.0's ``theano.tensor.nnet.bn``).

Three user functions and the Ops behind them:

- :func:`batch_normalization` normalizes with a given mean and standard deviation, as one
  elementwise expression (``low_mem``: one fused :class:`BNComposite` loop, whose gradient
  is written out so nothing is kept from the forward pass; ``high_mem``: plain arithmetic).
- :func:`batch_normalization_train` normalizes with the statistics of the batch
  (:class:`AbstractBatchNormTrain`) and can update running averages of them;
  :func:`batch_normalization_test` normalizes with given statistics
  (:class:`AbstractBatchNormInference`).

``axes`` is ``'per-activation'`` (``(0,)``), ``'spatial'`` (``(0, 2, 3, ...)``) or a tuple
of axes; the parameters (``gamma``, ``beta``, running averages) either have one dimension
per axis that is *not* normalized (``(C,)`` for spatial NCHW) or the input's number of
dimensions with length 1 on the normalized axes (``(1, C, 1, 1)``); the statistics come back
in the same layout.

The Ops run by ``perform`` (NumPy); backend-c has C kernels for them. Theano lowered them to
elementwise graphs on the CPU instead; the values are the same.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.null_type import DisconnectedType, disconnected_type
from opgraph.graph.op import Op
from opgraph.scalar import basic as ps
from opgraph.scalar.basic import Composite
from opgraph.scalar.type import ScalarType, float_dtypes, upcast
from opgraph.tensor import math as tm
from opgraph.tensor.basic import addbroadcast, as_tensor_variable, patternbroadcast
from opgraph.tensor.elemwise import DimShuffle, Elemwise
from opgraph.tensor.shape import shape as shape_of
from opgraph.tensor.statistics import mean as t_mean

__all__ = [
    "AbstractBatchNormInference",
    "AbstractBatchNormTrain",
    "AbstractBatchNormTrainGrad",
    "BNComposite",
    "batch_normalization",
    "batch_normalization_test",
    "batch_normalization_train",
]


# ---------------------------------------------------------------------------- elementwise


class BNComposite(Composite):
    """``(x - mean) / std * gamma + beta`` as one scalar op (Theano's ``BNComposite``).

    Its gradient is written out (``top * gamma / std`` for ``x``, ...), so the backward
    pass of :func:`batch_normalization` in ``low_mem`` mode keeps no intermediate result.
    Inputs in the order ``(x, mean, std, gamma, beta)``, all of ``dtype``.
    """

    init_param = ("dtype",)

    def __init__(self, dtype: str) -> None:
        self.dtype = str(dtype)
        x, mean, std, gamma, beta = (ScalarType(self.dtype)() for _ in range(5))
        out = ps.add(ps.mul(ps.true_div(ps.sub(x, mean), std), gamma), beta)
        super().__init__([x, mean, std, gamma, beta], [out])

    def __eq__(self, other: object) -> bool:
        # Composite compares inner graphs only; the dtypes of the inputs matter too.
        return super().__eq__(other) and self.dtype == other.dtype  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((super().__hash__(), self.dtype))

    def symbolic_grad(self, m, inputs, outputs, output_grads):  # type: ignore[no-untyped-def]
        """Theano's closed form: nothing of the forward pass but the inputs is used."""
        x, mean, std, gamma, _beta = inputs
        (top,) = output_grads
        top_gamma = m.mul(top, gamma)
        x_mean = m.sub(x, mean)
        dx = m.true_div(top_gamma, std)
        dstd = m.neg(m.true_div(m.mul(top_gamma, x_mean), m.mul(std, std)))
        dgamma = m.true_div(m.mul(top, x_mean), std)
        return [dx, m.neg(dx), dstd, dgamma, top]


def batch_normalization(
    inputs: Any, gamma: Any, beta: Any, mean: Any, std: Any, mode: str = "low_mem"
) -> Variable:
    """``(inputs - mean) / std * gamma + beta`` elementwise (Theano's ``batch_normalization``).

    ``gamma``, ``beta``, ``mean`` and ``std`` broadcast against ``inputs`` (as elementwise
    operands: fewer dimensions are padded on the left). ``mode='low_mem'`` builds one
    :class:`BNComposite` loop whose gradient recomputes what it needs; ``'high_mem'``
    builds ``(inputs - mean) * (gamma / std) + beta``. The dtype is the upcast of the five
    dtypes.
    """
    if mode not in ("low_mem", "high_mem"):
        raise ValueError(f"batch_normalization: mode must be 'low_mem' or 'high_mem', got {mode!r}")
    names = ("inputs", "gamma", "beta", "mean", "std")
    args = [as_tensor_variable(v) for v in (inputs, gamma, beta, mean, std)]
    for name, v in zip(names[1:], args[1:], strict=True):
        if v.type.ndim > args[0].type.ndim:
            raise ValueError(
                f"batch_normalization: {name} may not have more dimensions than inputs "
                f"({args[0].type.ndim}; it is broadcast against them), got {v} of type {v.type}"
            )
    x, gamma, beta, mean, std = args
    if mode == "high_mem":
        return (x - mean) * (gamma / std) + beta
    dtype = upcast(*(v.type.dtype for v in args))
    if dtype not in float_dtypes:
        raise TypeError(f"batch_normalization needs float tensors, got dtypes {dtype}")
    x, mean, std, gamma, beta = (
        v if v.type.dtype == dtype else tm.cast(v, dtype) for v in (x, mean, std, gamma, beta)
    )
    return Elemwise(BNComposite(dtype=dtype))(x, mean, std, gamma, beta)


# ------------------------------------------------------------------------------- helpers


def _prepare_axes(axes: Any, ndim: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``axes`` (a name or a sequence) as sorted ints, and the axes not normalized."""
    if isinstance(axes, str):
        if axes == "per-activation":
            axes = (0,)
        elif axes == "spatial":
            axes = (0, *range(2, ndim))
        else:
            raise ValueError(
                f"batch normalization: axes must be 'per-activation', 'spatial' or a tuple of "
                f"ints, got {axes!r}"
            )
    elif isinstance(axes, tuple | list | np.ndarray):
        if not all(isinstance(a, int | np.integer) for a in axes):
            raise TypeError(f"batch normalization: axes must be ints, got {axes!r}")
        axes = tuple(int(a) for a in axes)
    else:
        raise ValueError(
            f"batch normalization: axes must be 'per-activation', 'spatial' or a tuple of "
            f"ints, got {axes!r}"
        )
    axes = tuple(sorted(axes))
    if not axes:
        raise ValueError("batch normalization: there should be at least one normalization axis")
    if len(set(axes)) != len(axes):
        raise ValueError(f"batch normalization: axes {axes} repeat an axis")
    if min(axes) < 0 or max(axes) >= ndim:
        raise ValueError(
            f"batch normalization: axes should be less than ndim (<{ndim}) and not negative, "
            f"but {axes} given for inputs of {ndim} dimension(s)"
        )
    return axes, tuple(i for i in range(ndim) if i not in axes)


def _op_axes(op_name: str, axes: Any) -> tuple[int, ...]:
    """An Op's ``axes`` argument checked: a non-empty tuple of distinct non-negative ints."""
    if not isinstance(axes, tuple | list) or not all(isinstance(a, int | np.integer) for a in axes):
        raise TypeError(f"{op_name}: axes must be a tuple of ints, got {axes!r}")
    axes = tuple(int(a) for a in axes)
    if not axes or len(set(axes)) != len(axes) or min(axes) < 0:
        raise ValueError(
            f"{op_name}: axes must be distinct non-negative ints, at least one, got {axes!r}"
        )
    return axes


def _epsilon(epsilon: Any) -> np.ndarray:
    """``epsilon`` in floatX, checked against cuDNN's minimum (Theano's rule)."""
    eps = np.asarray(epsilon, dtype=config.floatX)
    if eps.ndim != 0:
        raise ValueError(f"batch normalization: epsilon must be a number, got {epsilon!r}")
    # float32(1e-5) < 1e-5: compare after the conversion, as Theano does
    if eps < 1e-5:
        raise ValueError(f"epsilon must be at least 1e-5, got {epsilon}")
    return eps


def _layout(
    x: Variable, params: dict[str, Any], axes: tuple[int, ...], non_bc: tuple[int, ...]
) -> tuple[dict[str, Variable], bool]:
    """The parameters as tensors of ``x``'s rank (length 1 on ``axes``), and whether they
    were given in the short layout (one dimension per axis not normalized)."""
    ndim = x.type.ndim
    params = {k: as_tensor_variable(v) for k, v in params.items()}
    first = next(iter(params.values()))
    short = first.type.ndim != ndim
    want = len(non_bc) if short else ndim
    for name, p in params.items():
        if p.type.ndim != want:
            raise ValueError(
                f"batch normalization: {name} must have {len(non_bc)} dimension(s) (one per "
                f"axis not normalized, {non_bc}) or {ndim} like the inputs, the same as "
                f"{next(iter(params))}; got {p} of type {p.type} instead of {want}"
            )
    pattern: list[Any] = ["x"] * ndim
    for i, axis in enumerate(non_bc):
        pattern[axis] = i
    out = {}
    for name, p in params.items():
        if short:
            static = [p.type.shape[i] for i in range(len(non_bc))]
            pdims = dict(zip(non_bc, static, strict=True))
        else:
            pdims = dict(enumerate(p.type.shape))
            for a in axes:
                if pdims[a] not in (None, 1):
                    raise ValueError(
                        f"batch normalization: {name} must have length 1 on the normalized "
                        f"axes {axes}, got shape {p.type.shape} ({p.type})"
                    )
        for axis in non_bc:
            xs, ps_ = x.type.shape[axis], pdims[axis]
            if xs is not None and ps_ is not None and xs != ps_:
                raise ValueError(
                    f"batch normalization: {name} has length {ps_} where inputs have {xs} "
                    f"(axis {axis} of inputs, of shape {x.type.shape})"
                )
        out[name] = p.dimshuffle(pattern) if short else addbroadcast(p, *axes)
    return out, short


def _is_zero(g: Any) -> bool:
    """Whether a gradient is absent: None, disconnected, or the zeros backprop fills in."""
    if g is None or isinstance(g.type, DisconnectedType):
        return True
    owner = g.owner
    if owner is None or not isinstance(owner.op, Elemwise):
        return False
    if not isinstance(owner.op.scalar_op, ps.Second):
        return False
    value = owner.inputs[1]
    while value.owner is not None and isinstance(value.owner.op, DimShuffle):
        value = value.owner.inputs[0]
    return isinstance(value, Constant) and not np.any(value.data)


def _float_inputs(op: Op, named: dict[str, Variable]) -> list[Variable]:
    """The tensors cast to their common float dtype (TypeError if it is not a float)."""
    dtype = upcast(*(v.type.dtype for v in named.values()))
    if dtype not in float_dtypes:
        listed = ", ".join(f"{k}: {v.type}" for k, v in named.items())
        raise TypeError(f"{op}: batch normalization needs float tensors, got {listed}")
    return [v if v.type.dtype == dtype else tm.cast(v, dtype) for v in named.values()]


def _check_ranks(op: Op, x: Variable, named: dict[str, Variable]) -> None:
    """Every tensor of ``named`` has ``x``'s rank; ``op.axes`` fit in it."""
    for name, v in named.items():
        if v.type.ndim != x.type.ndim:
            raise TypeError(
                f"{op}: {name} must have {x.type.ndim} dimension(s) like x, got {v} of type "
                f"{v.type}"
            )
    if max(op.axes) >= x.type.ndim:  # type: ignore[attr-defined]
        raise ValueError(
            f"{op}: axes should be less than ndim (<{x.type.ndim}), but {op.axes} given"  # type: ignore[attr-defined]
        )


def _scalar_input(op: Op, value: Any, name: str) -> Variable:
    v = as_tensor_variable(value)
    if v.type.ndim != 0:
        raise TypeError(f"{op}: {name} must be a scalar, got {v} of type {v.type}")
    return v


def _check_values(op: Op, x: np.ndarray, named: dict[str, np.ndarray]) -> None:
    """Run-time shapes: each parameter has ``x``'s shape with 1 on the normalized axes."""
    axes = op.axes  # type: ignore[attr-defined]
    if max(axes) >= x.ndim:
        raise ValueError(f"axes should be less than ndim (<{x.ndim}), but {axes} given")
    want = tuple(1 if d in axes else n for d, n in enumerate(x.shape))
    for name, v in named.items():
        if v.shape != want:
            raise ValueError(
                f"{op}: {name} has shape {v.shape} but x has shape {x.shape}; {name} needs "
                f"shape {want} (x's shape with 1 on the normalized axes {axes})"
            )


def _quiet(x: np.ndarray) -> Any:
    """A context silencing NumPy's "mean of empty slice" warnings when ``x`` is empty (the
    statistics are NaN, as NumPy's); nothing otherwise."""
    return _silenced() if x.size == 0 else contextlib.nullcontext()


@contextlib.contextmanager
def _silenced() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _count(x: Variable, axes: tuple[int, ...], dtype: str) -> Variable:
    """The number of elements each statistic is taken over, symbolic, as ``dtype``."""
    shp = shape_of(x)
    n = shp[axes[0]]
    for a in axes[1:]:
        n = n * shp[a]
    return tm.cast(n, dtype)


# -------------------------------------------------------------------------- user functions


def batch_normalization_train(
    inputs: Any,
    gamma: Any,
    beta: Any,
    axes: Any = "per-activation",
    epsilon: float = 1e-4,
    running_average_factor: float = 0.1,
    running_mean: Any = None,
    running_var: Any = None,
) -> tuple[Variable, ...]:
    """Normalize ``inputs`` by its own mean and variance over ``axes``.

    Returns ``(out, mean, invstd)`` and, when ``running_mean`` and ``running_var`` are
    given, ``new_running_mean = running_mean * (1 - f) + mean * f`` and ``new_running_var =
    running_var * (1 - f) + m / (m - 1) * var * f`` (``f`` the ``running_average_factor``,
    ``m`` the number of elements per statistic: the unbiased variance). ``out = (inputs -
    mean) * gamma * invstd + beta`` with ``invstd = 1 / sqrt(var + epsilon)`` (biased
    variance). ``mean``, ``invstd`` and the running averages have ``gamma``'s layout.
    ``epsilon`` must be at least 1e-5.
    """
    x = as_tensor_variable(inputs)
    ndim = x.type.ndim
    axes, non_bc = _prepare_axes(axes, ndim)
    if (running_mean is None) != (running_var is None):
        raise ValueError("running_mean and running_var must either both be given or both be None")
    given = {"gamma": gamma, "beta": beta}
    if running_mean is not None:
        given.update(running_mean=running_mean, running_var=running_var)
    params, short = _layout(x, given, axes, non_bc)
    eps = _epsilon(epsilon)
    op = AbstractBatchNormTrain(axes=axes)
    if running_mean is None:
        results = list(op(x, params["gamma"], params["beta"], epsilon=eps))
    else:
        results = list(
            op(
                x,
                params["gamma"],
                params["beta"],
                epsilon=eps,
                running_average_factor=running_average_factor,
                running_mean=params["running_mean"],
                running_var=params["running_var"],
            )
        )
        for k, name in ((3, "running_mean"), (4, "running_var")):
            results[k] = patternbroadcast(results[k], params[name].type.broadcastable)
    if short:
        results = [results[0]] + [r.dimshuffle(non_bc) for r in results[1:]]
    return tuple(results)


def batch_normalization_test(
    inputs: Any,
    gamma: Any,
    beta: Any,
    mean: Any,
    var: Any,
    axes: Any = "per-activation",
    epsilon: float = 1e-4,
) -> Variable:
    """``(inputs - mean) * gamma / sqrt(var + epsilon) + beta`` with given statistics.

    ``gamma``, ``beta``, ``mean`` and ``var`` share one layout (see the module docstring);
    ``epsilon`` must be at least 1e-5.
    """
    x = as_tensor_variable(inputs)
    axes, non_bc = _prepare_axes(axes, x.type.ndim)
    given = {"gamma": gamma, "beta": beta, "mean": mean, "var": var}
    p, _ = _layout(x, given, axes, non_bc)
    eps = _epsilon(epsilon)
    op = AbstractBatchNormInference(axes=axes)
    return op(x, p["gamma"], p["beta"], p["mean"], p["var"], epsilon=eps)


# ------------------------------------------------------------------------------------ ops


class AbstractBatchNormTrain(Op):
    """Batch normalization with the batch's statistics over ``axes``.

    Inputs ``(x, scale, bias, epsilon, running_average_factor[, running_mean,
    running_var])``: the parameters have ``x``'s rank and length 1 on ``axes``; ``epsilon``
    and the factor are scalars. Outputs ``(out, mean, invstd[, new_running_mean,
    new_running_var])``, the statistics in ``scale``'s shape (see
    :func:`batch_normalization_train`).

    The gradient of ``out`` is :class:`AbstractBatchNormTrainGrad`; the gradients of the
    statistics and the running averages are added to it (Theano 1.0 dropped them).
    """

    __props__ = ("axes",)

    def __init__(self, axes: Sequence[int] = (0,)) -> None:
        self.axes = _op_axes(type(self).__name__, axes)

    def make_node(
        self,
        x: Any,
        scale: Any,
        bias: Any,
        epsilon: Any = 1e-4,
        running_average_factor: Any = 0.1,
        running_mean: Any = None,
        running_var: Any = None,
    ) -> Apply:
        if (running_mean is None) != (running_var is None):
            raise ValueError(f"{self}: give both running_mean and running_var, or neither")
        named = {"x": x, "scale": scale, "bias": bias}
        if running_mean is not None:
            named.update(running_mean=running_mean, running_var=running_var)
        named = {k: as_tensor_variable(v) for k, v in named.items()}
        _check_ranks(self, named["x"], named)
        cast = _float_inputs(self, named)
        x = cast[0]
        params = [addbroadcast(p, *self.axes) for p in cast[1:]]
        eps = _scalar_input(self, epsilon, "epsilon")
        factor = _scalar_input(self, running_average_factor, "running_average_factor")
        inputs = [x, params[0], params[1], eps, factor, *params[2:]]
        stat_type = params[0].type
        outputs = [x.type()] + [stat_type() for _ in range(2 + len(params[2:]))]
        return Apply(self, inputs, outputs)

    def infer_shape(self, node: Apply, shapes: Sequence[Any]) -> list[Any]:
        return [shapes[0]] + [shapes[1]] * (len(node.outputs) - 1)

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        """Theano's: epsilon and the factor are not connected; each running average only to
        its new value."""
        patterns = [[True] * 3, [True] * 3, [True] * 3, [False] * 3, [False] * 3]
        for i in range(5, len(node.inputs)):
            patterns[0].append(True)
            for row in patterns[1:]:
                row.append(False)
            patterns.append([False] * (3 + i - 5) + [True])
        return patterns

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x, scale, bias, epsilon, factor = inputs[:5]
        named = {"scale": scale, "bias": bias}
        if len(inputs) > 5:
            named.update(running_mean=inputs[5], running_var=inputs[6])
        _check_values(self, x, named)
        dtype = np.dtype(node.outputs[0].type.dtype)
        axes = self.axes
        with np.errstate(invalid="ignore", divide="ignore"), _quiet(x):
            mean = x.mean(axis=axes, keepdims=True)
            var = x.var(axis=axes, keepdims=True)
            invstd = 1.0 / np.sqrt(var + np.asarray(epsilon, dtype=dtype))
            out = (x - mean) * (scale * invstd) + bias
            outs = [out, mean, invstd]
            if len(inputs) > 5:
                f = np.asarray(factor, dtype=dtype)
                outs.append(inputs[5] * (1 - f) + mean * f)
                m = np.float64(x.size) / np.float64(scale.size)
                unbias = np.asarray(m / (m - 1), dtype=dtype)
                outs.append(inputs[6] * (1 - f) + unbias * var * f)
        for cell, value in zip(output_storage, outs, strict=True):
            cell[0] = np.asarray(value, dtype=dtype)

    def L_op(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Any) -> list:
        x, scale, _bias, epsilon, factor = inputs[:5]
        _, x_mean, x_invstd = outputs[:3]
        dy, g_mean, g_invstd = grads[:3]
        dtype = x.type.dtype
        if _is_zero(dy):
            dx = None
            dscale, dbias = tm.zeros_like(scale), tm.zeros_like(scale)
        else:
            dx, dscale, dbias = AbstractBatchNormTrainGrad(self.axes)(
                x, dy, scale, x_mean, x_invstd, epsilon
            )
        # The statistics' own gradients: d mean/dx = 1/m, d var/dx = 2 (x - mean) / m.
        mean_terms, var_terms = [], []
        if not _is_zero(g_mean):
            mean_terms.append(g_mean)
        if not _is_zero(g_invstd):
            var_terms.append(g_invstd * tm.cast(-0.5, dtype) * x_invstd**3)
        rest: list[Any] = [disconnected_type(), disconnected_type()]
        if len(inputs) > 5:
            f = tm.cast(factor, dtype)
            m = _count(x, self.axes, dtype)
            for k, terms, scale_by in ((3, mean_terms, f), (4, var_terms, f * m / (m - 1))):
                g = grads[k]
                if _is_zero(g):
                    rest.append(disconnected_type())
                else:
                    terms.append(g * scale_by)
                    rest.append(g * (1 - f))
        if mean_terms or var_terms:
            m = _count(x, self.axes, dtype)
            extra = tm.second(x, sum(mean_terms[1:], mean_terms[0]) / m) if mean_terms else None
            if var_terms:
                g_var = sum(var_terms[1:], var_terms[0])
                term = g_var * tm.cast(2, dtype) * (x - x_mean) / m
                extra = term if extra is None else extra + term
            dx = extra if dx is None else dx + extra
        return [disconnected_type() if dx is None else dx, dscale, dbias, *rest]


class AbstractBatchNormInference(Op):
    """``(x - mean) * (scale / sqrt(var + epsilon)) + bias`` with given statistics.

    Inputs ``(x, scale, bias, estimated_mean, estimated_variance, epsilon)``; the parameters
    have ``x``'s rank and length 1 on ``axes``. Gradients as Theano's (``epsilon`` is not
    connected).
    """

    __props__ = ("axes",)

    def __init__(self, axes: Sequence[int] = (0,)) -> None:
        self.axes = _op_axes(type(self).__name__, axes)

    def make_node(
        self,
        x: Any,
        scale: Any,
        bias: Any,
        estimated_mean: Any,
        estimated_variance: Any,
        epsilon: Any = 1e-4,
    ) -> Apply:
        named = {
            "x": x,
            "scale": scale,
            "bias": bias,
            "estimated_mean": estimated_mean,
            "estimated_variance": estimated_variance,
        }
        named = {k: as_tensor_variable(v) for k, v in named.items()}
        _check_ranks(self, named["x"], named)
        cast = _float_inputs(self, named)
        params = [addbroadcast(p, *self.axes) for p in cast[1:]]
        eps = _scalar_input(self, epsilon, "epsilon")
        return Apply(self, [cast[0], *params, eps], [cast[0].type()])

    def infer_shape(self, node: Apply, shapes: Sequence[Any]) -> list[Any]:
        return [shapes[0]]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True], [True], [True], [True], [True], [False]]

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x, scale, bias, mean, var, epsilon = inputs
        named = {"scale": scale, "bias": bias, "estimated_mean": mean, "estimated_variance": var}
        _check_values(self, x, named)
        dtype = np.dtype(node.outputs[0].type.dtype)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = (x - mean) * (scale / np.sqrt(var + np.asarray(epsilon, dtype=dtype))) + bias
        output_storage[0][0] = np.asarray(out, dtype=dtype)

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list:
        x, scale, _bias, est_mean, est_var, epsilon = inputs
        (dy,) = output_grads
        axes = self.axes
        eps = tm.cast(epsilon, x.type.dtype)
        var_eps = est_var + eps
        std = tm.sqrt(var_eps)
        two = tm.cast(2, x.type.dtype)
        dy_xm = tm.sum(dy * (x - est_mean), axis=axes, keepdims=True)
        dy_sum = tm.sum(dy, axis=axes, keepdims=True)
        dx = dy * (scale / std)
        dscale = dy_xm / std
        dbias = dy_sum
        dmean = -dy_sum * (scale / std)
        dvar = -dy_xm * (scale / (two * var_eps * std))
        return [dx, dscale, dbias, dmean, dvar, disconnected_type()]


class AbstractBatchNormTrainGrad(Op):
    """The gradient of :class:`AbstractBatchNormTrain`'s ``out``: ``(dx, dscale, dbias)``.

    Inputs ``(x, dy, scale, x_mean, x_invstd, epsilon)``, the last three in ``scale``'s
    shape. With ``c = dy * invstd - (x - mean) * mean(dy * (x - mean)) * invstd**3``:
    ``dx = scale * (c - mean(c))``, ``dscale = sum(dy * invstd * (x - mean))``,
    ``dbias = sum(dy)`` (means and sums over ``axes``). Its own gradient is Theano's.
    """

    __props__ = ("axes",)

    def __init__(self, axes: Sequence[int] = (0,)) -> None:
        self.axes = _op_axes(type(self).__name__, axes)

    def make_node(
        self, x: Any, dy: Any, scale: Any, x_mean: Any, x_invstd: Any, epsilon: Any = 1e-4
    ) -> Apply:
        named = {"x": x, "dy": dy, "scale": scale, "x_mean": x_mean, "x_invstd": x_invstd}
        named = {k: as_tensor_variable(v) for k, v in named.items()}
        _check_ranks(self, named["x"], named)
        x, dy, *params = _float_inputs(self, named)
        scale, x_mean, x_invstd = (addbroadcast(p, *self.axes) for p in params)
        eps = _scalar_input(self, epsilon, "epsilon")
        return Apply(
            self, [x, dy, scale, x_mean, x_invstd, eps], [x.type(), scale.type(), scale.type()]
        )

    def infer_shape(self, node: Apply, shapes: Sequence[Any]) -> list[Any]:
        return [shapes[0], shapes[2], shapes[2]]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [
            [True, True, False],  # x
            [True, True, True],  # dy
            [True, False, False],  # scale
            [True, True, False],  # x_mean
            [True, True, False],  # x_invstd
            [False, False, False],  # epsilon
        ]

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        x, dy, scale, x_mean, x_invstd, _epsilon_value = inputs
        if dy.shape != x.shape:
            raise ValueError(f"{self}: dy has shape {dy.shape} but x has shape {x.shape}")
        _check_values(self, x, {"scale": scale, "x_mean": x_mean, "x_invstd": x_invstd})
        dtype = np.dtype(node.outputs[0].type.dtype)
        axes = self.axes
        with np.errstate(invalid="ignore", divide="ignore"), _quiet(x):
            x_diff = x - x_mean
            mean_dy_x_diff = np.mean(dy * x_diff, axis=axes, keepdims=True)
            c = (dy * x_invstd) - (x_diff * mean_dy_x_diff * (x_invstd**3))
            g_inputs = scale * (c - np.mean(c, axis=axes, keepdims=True))
            g_scale = np.sum(dy * x_invstd * x_diff, axis=axes, keepdims=True)
            g_bias = np.sum(dy, axis=axes, keepdims=True)
        for cell, value in zip(output_storage, (g_inputs, g_scale, g_bias), strict=True):
            cell[0] = np.asarray(value, dtype=dtype)

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list:
        x, dy, scale, x_mean, x_invstd, _epsilon_var = inputs
        ddinputs, ddscale, ddbias = output_grads
        axes = self.axes

        def mean_(v: Variable) -> Variable:
            return t_mean(v, axis=axes, keepdims=True)

        def sum_(v: Variable) -> Variable:
            return tm.sum(v, axis=axes, keepdims=True)

        x_diff = x - x_mean
        mean_dy_x_diff = mean_(dy * x_diff)
        g_x: list[Variable] = []
        g_dy: list[Variable] = []
        g_scale: list[Variable] = []
        g_mean: list[Variable] = []
        g_invstd: list[Variable] = []
        if not _is_zero(ddinputs):
            ccc = scale * (ddinputs - mean_(ddinputs))
            ddd = (x_invstd**3) * (ccc * mean_dy_x_diff + dy * mean_(ccc * x_diff))
            g_x.append(-ddd)
            g_dy.append(ccc * x_invstd - (x_invstd**3) * x_diff * mean_(ccc * x_diff))
            eee = dy * x_invstd - (x_invstd**3) * x_diff * mean_dy_x_diff
            g_scale.append(sum_(ddinputs * (eee - mean_(eee))))
            g_mean.append(sum_(ddd))
            three = tm.cast(3, x.type.dtype)
            g_invstd.append(sum_(ccc * (dy - three * (x_invstd**2) * x_diff * mean_dy_x_diff)))
        if not _is_zero(ddscale):
            g_x.append(x_invstd * ddscale * dy)
            g_dy.append(x_invstd * ddscale * x_diff)
            g_mean.append(-(x_invstd * ddscale * sum_(dy)))
            g_invstd.append(ddscale * sum_(dy * x_diff))
        if not _is_zero(ddbias):
            g_dy.append(tm.second(dy, ddbias))

        def total(terms: list[Variable]) -> Variable:
            return sum(terms[1:], terms[0]) if terms else disconnected_type()

        return [total(t) for t in (g_x, g_dy, g_scale, g_mean, g_invstd)] + [disconnected_type()]
