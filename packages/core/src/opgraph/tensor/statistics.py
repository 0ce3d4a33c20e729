"""Reductions built from others: mean, var, std, logsumexp and norm (Theano 1.0 graphs).

``mean`` is Theano's graph ``sum(x) / cast(shape(x), float)[i]``: integer inputs give float64,
float32 stays float32, float16 accumulates in float32. ``var`` centres the input first (two
passes, optionally corrected), ``logsumexp`` subtracts the maximum so it never overflows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph.graph.basic import Variable
from opgraph.scalar.type import complex_dtypes, discrete_dtypes
from opgraph.tensor.basic import as_tensor_variable, constant
from opgraph.tensor.elemwise import DimShuffle
from opgraph.tensor.gradblock import disconnected_grad
from opgraph.tensor.math import (
    _keepdims,
    _normalize_axis,
    abs_,
    add,
    cast,
    conj,
    exp,
    isinf,
    log,
    mul,
    neq,
    pow,
    real,
    sqrt,
    sub,
    switch,
    true_div,
)
from opgraph.tensor.math import sum as tsum
from opgraph.tensor.reduction import max as tmax
from opgraph.tensor.reduction import min as tmin
from opgraph.tensor.shape import shape

__all__ = ["logsumexp", "mean", "norm", "std", "var"]


def _axes_list(x: Variable, axis: Any) -> list[int]:
    axes = _normalize_axis(axis, x.type.ndim)
    return list(range(x.type.ndim)) if axes is None else list(axes)


def _shape(x: Variable) -> Variable:
    return shape(x)


def _count(x: Variable, axes: list[int]) -> Variable:
    """The number of elements of ``x`` along ``axes`` (an int64 scalar)."""
    shp = _shape(x)
    if not axes:
        return constant(1, dtype="int64")
    n = shp[axes[0]]
    for i in axes[1:]:
        n = mul(n, shp[i])
    return n


def _float_count(n: Variable, like: Variable) -> Variable:
    """The count ``n`` as a float of ``like``'s precision (float32 data stays float32)."""
    return cast(n, "float32" if like.type.dtype in ("float16", "float32") else "float64")


def mean(
    input: Any,
    axis: Any = None,
    dtype: str | None = None,
    keepdims: bool = False,
    acc_dtype: str | None = None,
) -> Variable:
    """Mean of ``input`` over ``axis`` (all axes when None).

    Parameters
    ----------
    input : tensor-like
    axis : int, sequence of ints or None
    dtype : str, optional
        The dtype of the sum (and of the result for float dtypes); integer inputs give a
        float64 mean by default.
    keepdims : bool
        Keep the reduced axes as broadcastable length-1 dimensions.
    acc_dtype : str, optional
        Accumulator dtype of the sum.

    The mean of an empty axis is NaN, as in NumPy.
    """
    x = as_tensor_variable(input)
    axes = _axes_list(x, axis)
    sum_dtype = dtype if dtype is not None else ("float32" if x.type.dtype == "float16" else None)
    s = tsum(x, axis=axis, dtype=sum_dtype, keepdims=keepdims, acc_dtype=acc_dtype)
    shp = cast(
        _shape(x), "float32" if s.type.dtype in ("float16", "float32", "complex64") else "float64"
    )
    for i in axes:
        s = true_div(s, shp[i])
    if s.type.dtype != shp.type.dtype and s.type.dtype in discrete_dtypes:
        s = cast(s, shp.type.dtype)
    if dtype == "float16" or (dtype is None and x.type.dtype == "float16"):
        s = cast(s, "float16")
    s.name = "mean"
    return s


def _sqr_modulus(v: Variable) -> Variable:
    if v.type.dtype in complex_dtypes:
        return real(mul(v, conj(v)))
    return pow(v, constant(2, dtype=v.type.dtype))


def var(
    input: Any,
    axis: Any = None,
    ddof: int = 0,
    keepdims: bool = False,
    corrected: bool = False,
) -> Variable:
    """Variance of ``input`` over ``axis``: ``mean(|x - mean(x)|**2)``, divided by ``N - ddof``.

    With several axes, ``N`` is the number of elements reduced (NumPy's rule; Theano divided
    by the product of the ``n_i - ddof``). ``corrected=True`` subtracts the rounding error of
    the two-pass algorithm (Theano's ``corrected_two_pass``). Complex inputs give the (real)
    variance of the modulus.
    """
    if isinstance(ddof, bool):
        raise TypeError(
            "var(input, axis=None, ddof=0, keepdims=False, corrected=False): ddof must be an "
            f"int, got the bool {ddof!r}. HINT: pass keepdims by keyword."
        )
    x = as_tensor_variable(input)
    axes = _axes_list(x, axis)
    centered = sub(x, mean(x, axes, keepdims=True))
    sq = _sqr_modulus(centered)
    if ddof == 0:
        v = mean(sq, axes, keepdims=keepdims)
    else:
        s = tsum(sq, axis=axes, keepdims=keepdims)
        v = true_div(s, _float_count(sub(_count(x, axes), ddof), s))
    if corrected:
        if ddof == 0:
            error = _sqr_modulus(mean(centered, axes, keepdims=keepdims))
        else:
            n = _count(x, axes)
            error = _sqr_modulus(tsum(centered, axis=axes, keepdims=keepdims))
            error = true_div(error, _float_count(mul(sub(n, ddof), n), error))
        v = sub(v, error)
    v.name = "var"
    return v


def std(
    input: Any,
    axis: Any = None,
    ddof: int = 0,
    keepdims: bool = False,
    corrected: bool = False,
) -> Variable:
    """Standard deviation: ``sqrt(var(input, axis, ddof, keepdims, corrected))``."""
    if isinstance(ddof, bool):
        raise TypeError(
            "std(input, axis=None, ddof=0, keepdims=False, corrected=False): ddof must be an "
            f"int, got the bool {ddof!r}. HINT: pass keepdims by keyword."
        )
    ret = sqrt(var(input, axis=axis, ddof=ddof, keepdims=keepdims, corrected=corrected))
    ret.name = "std"
    return ret


def logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> Variable:
    """``log(sum(exp(x), axis))`` computed stably: the maximum is subtracted first.

    Infinite maxima are handled (``+inf`` gives ``inf``, an all ``-inf`` group gives ``-inf``);
    the gradient is ``softmax(x)`` along ``axis``. An empty axis raises ValueError when the
    function runs (the maximum of an empty array is undefined).
    """
    x = as_tensor_variable(x)
    if x.type.dtype in complex_dtypes:
        raise TypeError(f"logsumexp needs a real tensor, got {x} of type {x.type}")
    axes = _axes_list(x, axis)
    xmax = tmax(x, axis=axes, keepdims=True)
    xmax = disconnected_grad(switch(isinf(xmax), 0, xmax))
    out = add(log(tsum(exp(sub(x, xmax)), axis=axes, keepdims=True)), xmax)
    if keepdims:
        return out
    order = [i for i in range(x.type.ndim) if i not in axes]
    return DimShuffle(out.type.broadcastable, order)(out)


def norm(x: Any, L: Any, axis: Any = None, keepdims: bool = False) -> Variable:
    """The ``L``-norm of ``x`` over ``axis``: ``sum(|x| ** L) ** (1 / L)`` (Theano's graph).

    ``L = inf`` gives ``max(|x|)``, ``L = -inf`` gives ``min(|x|)`` and ``L = 0`` counts the
    non-zero entries, as NumPy's vector norms do.
    """
    x = as_tensor_variable(x)
    if isinstance(L, Variable) or not np.isscalar(L) or isinstance(L, bool | str):
        raise TypeError(f"norm: L must be a Python number, got {L!r}")
    axes = _normalize_axis(axis, x.type.ndim)
    if x.type.dtype in discrete_dtypes and L != 0:
        x = cast(x, "float64")  # |x| ** L of int8 data would overflow
    if L == 0:
        y = tsum(neq(x, 0), axis=axes)
    elif np.isinf(L):
        y = tmax(abs_(x), axis=axes) if L > 0 else tmin(abs_(x), axis=axes)
    else:
        y = pow(tsum(pow(abs_(x), L), axis=axes), 1.0 / L)
    return _keepdims(x, y, axes) if keepdims else y
