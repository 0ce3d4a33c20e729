"""Random draws on a symbolic random state (Theano's ``tensor.raw_random`` functions).

Each function takes a random-state variable (a shared ``RandomState`` or ``Generator``),
builds a :class:`~opgraph.tensor.random_ops.RandomFunction` node and returns
``[new_state, sample]``. To get fresh numbers at every call, make ``new_state`` the
state's update (``RandomStreams`` does that for you)::

    r = opgraph.shared(np.random.RandomState(123))
    new_r, u = uniform(r, size=(2, 3))
    f = opgraph.function([], u, updates=[(r, new_r)])

``size`` is a tuple of ints or symbolic scalars, an integer vector (then ``ndim`` may be
needed), or None: the sample then has the broadcast shape of the parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.configdefaults import config
from opgraph.graph.basic import Variable
from opgraph.tensor.basic import as_tensor_variable, constant
from opgraph.tensor.random_ops import (
    RandomFunction,
    RandomGeneratorType,
    RandomStateType,
    random_generator_type,
    random_state_type,
    size_vector,
)
from opgraph.tensor.shape import get_vector_length
from opgraph.tensor.type import TensorType

__all__ = [
    "RandomFunction",
    "RandomGeneratorType",
    "RandomStateType",
    "binomial",
    "choice",
    "integers",
    "multinomial",
    "normal",
    "permutation",
    "poisson",
    "random_generator_type",
    "random_integers",
    "random_state_type",
    "uniform",
]


def _vector_length(v: Variable) -> int | None:
    """The length of an integer vector when the graph says it, else None."""
    try:
        return get_vector_length(v)
    except ValueError:
        return None


def _infer_ndim_bcast(
    ndim: int | None, size: Any, *params: Any
) -> tuple[int, Variable, tuple[bool, ...]]:
    """``(ndim, int64 size vector, broadcastable)`` of a sample, from ``size`` and ``params``.

    ``params`` are variables, or ``(ndim, broadcastable)`` pairs standing for parameters
    whose last dimensions are not part of the sample's batch shape.
    """
    descr = [p if isinstance(p, tuple) else (p.type.ndim, p.type.broadcastable) for p in params]
    params_ndim = max((d for d, _ in descr), default=0)
    if isinstance(size, list | tuple):
        if ndim is not None and ndim != len(size):
            raise ValueError(f"ndim={ndim} does not match the length of size={size!r}")
        for s in size:
            if not isinstance(s, Variable) and int(s) < 0:
                raise ValueError(f"the entries of size must be non-negative, got size={size!r}")
        ndim = len(size)
        bcast = tuple(not isinstance(s, Variable) and int(s) == 1 for s in size)
        vec = size_vector(tuple(size))
    elif size is None:
        if not descr:
            raise TypeError("cannot infer the shape of a random draw without size or parameters")
        ndim = params_ndim
        bcast = tuple(
            all(b[k - ndim + len(b)] for _, b in descr if k - ndim + len(b) >= 0)
            for k in range(ndim)
        )
        vec = size_vector(None)
    else:
        vec = size_vector(size)
        length = _vector_length(vec)
        if ndim is not None and length is not None and ndim != length:
            raise ValueError(f"ndim={ndim} does not match the length {length} of size {size}")
        ndim = length if ndim is None else ndim
        if ndim is None:
            raise ValueError(
                f"cannot tell how many dimensions the symbolic size {size} has.\n"
                "HINT: pass ndim= (the number of entries of size)."
            )
        bcast = (False,) * ndim
    if params_ndim > ndim:
        raise ValueError(
            f"the sample would have {ndim} dimension(s), but the parameters have up to "
            f"{params_ndim}.\nHINT: give size= one entry per dimension of the parameters."
        )
    return ndim, vec, bcast


def _float_dtype(dtype: str | None, *params: Variable) -> str:
    if dtype is not None:
        return str(np.dtype(config.floatX if dtype == "floatX" else dtype))
    return str(np.result_type(config.floatX, *[p.type.dtype for p in params]))


def _tensors(*values: Any) -> list[Variable]:
    return [as_tensor_variable(v) for v in values]


def uniform(
    random_state: Variable,
    size: Any = None,
    low: Any = 0.0,
    high: Any = 1.0,
    ndim: int | None = None,
    dtype: str | None = None,
) -> list[Variable]:
    """Samples uniformly distributed in ``[low, high)``; returns ``[new_state, sample]``.

    Parameters
    ----------
    size
        A tuple of ints or symbolic scalars, an integer vector, or None (the broadcast
        shape of ``low`` and ``high``).
    low, high
        The bounds (numbers or tensors).
    ndim
        The number of dimensions, needed when ``size`` is a symbolic vector of unknown
        length.
    dtype
        Default: the upcast of ``config.floatX`` and the bounds' dtypes.
    """
    low, high = _tensors(low, high)
    dtype = _float_dtype(dtype, low, high)
    ndim, vec, bcast = _infer_ndim_bcast(ndim, size, low, high)
    op = RandomFunction("uniform", TensorType(dtype, bcast))
    return op(random_state, vec, low, high, return_list=True)


def normal(
    random_state: Variable,
    size: Any = None,
    avg: Any = 0.0,
    std: Any = 1.0,
    ndim: int | None = None,
    dtype: str | None = None,
) -> list[Variable]:
    """Normally distributed samples of mean ``avg`` and standard deviation ``std``."""
    avg, std = _tensors(avg, std)
    dtype = _float_dtype(dtype, avg, std)
    ndim, vec, bcast = _infer_ndim_bcast(ndim, size, avg, std)
    op = RandomFunction("normal", TensorType(dtype, bcast))
    return op(random_state, vec, avg, std, return_list=True)


def binomial(
    random_state: Variable,
    size: Any = None,
    n: Any = 1,
    p: Any = 0.5,
    ndim: int | None = None,
    dtype: str = "int64",
    prob: Any = None,
) -> list[Variable]:
    """Binomial counts of ``n`` trials of success probability ``p`` (``prob``: old name)."""
    if prob is not None:
        p = prob
    n, p = _tensors(n, p)
    ndim, vec, _ = _infer_ndim_bcast(ndim, size, n, p)
    op = RandomFunction("binomial", TensorType(dtype, (False,) * ndim))
    return op(random_state, vec, n, p, return_list=True)


def poisson(
    random_state: Variable,
    size: Any = None,
    lam: Any = 1.0,
    ndim: int | None = None,
    dtype: str = "int64",
) -> list[Variable]:
    """Poisson counts of rate ``lam``."""
    (lam,) = _tensors(lam)
    ndim, vec, bcast = _infer_ndim_bcast(ndim, size, lam)
    op = RandomFunction("poisson", TensorType(dtype, bcast))
    return op(random_state, vec, lam, return_list=True)


def random_integers(
    random_state: Variable,
    size: Any = None,
    low: Any = 0,
    high: Any = 1,
    ndim: int | None = None,
    dtype: str = "int64",
) -> list[Variable]:
    """Integers uniformly distributed in ``[low, high]``, both ends included (Theano's)."""
    low, high = _tensors(low, high)
    ndim, vec, bcast = _infer_ndim_bcast(ndim, size, low, high)
    op = RandomFunction("random_integers_helper", TensorType(dtype, bcast))
    return op(random_state, vec, low, high, return_list=True)


def integers(
    random_state: Variable,
    size: Any = None,
    low: Any = 0,
    high: Any = None,
    ndim: int | None = None,
    dtype: str = "int64",
) -> list[Variable]:
    """Integers uniformly distributed in ``[low, high)`` (``[0, low)`` if ``high`` is None)."""
    if high is None:
        low, high = 0, low
    low, high = _tensors(low, high)
    ndim, vec, bcast = _infer_ndim_bcast(ndim, size, low, high)
    op = RandomFunction("integers_helper", TensorType(dtype, bcast))
    return op(random_state, vec, low, high, return_list=True)


def choice(
    random_state: Variable,
    size: Any = None,
    a: Any = 2,
    replace: Any = True,
    p: Any = None,
    ndim: int | None = None,
    dtype: str = "int64",
) -> list[Variable]:
    """Samples from ``a`` (``range(a)`` if a scalar), with probabilities ``p`` (None: uniform)."""
    (a,) = _tensors(a)
    if a.type.ndim > 1:
        raise TypeError(f"choice: a must be a scalar or a vector, got {a} of type {a.type}")
    replace_v = constant(np.int8(bool(replace))) if isinstance(replace, bool) else replace
    p_v = constant(np.zeros(0, dtype="float64")) if p is None else p
    replace_v, p_v = _tensors(replace_v, p_v)
    ndim, vec, bcast = _infer_ndim_bcast(ndim, () if size is None else size)
    op = RandomFunction("choice_helper", TensorType(dtype, bcast))
    return op(random_state, vec, a, replace_v, p_v, return_list=True)


def permutation(
    random_state: Variable,
    size: Any = None,
    n: Any = 1,
    ndim: int | None = None,
    dtype: str = "int64",
) -> list[Variable]:
    """Permutations of ``range(n)``: one (a vector) for ``size=None``, else one per index."""
    if size is None or (isinstance(size, list | tuple) and len(size) == 0):
        if ndim not in (None, 1):
            raise TypeError(
                f"permutation: one permutation has 1 dimension, but ndim={ndim} was given"
            )
        vec, bcast = size_vector(()), ()
    else:
        _, vec, bcast = _infer_ndim_bcast(None if ndim is None else ndim - 1, size)
    (n,) = _tensors(n)
    op = RandomFunction("permutation_helper", TensorType(dtype, (*bcast, False)), ndim_added=1)
    return op(random_state, vec, n, return_list=True)


def multinomial(
    random_state: Variable,
    size: Any = None,
    n: Any = 1,
    pvals: Sequence[float] | Any = (0.5, 0.5),
    ndim: int | None = None,
    dtype: str = "int64",
) -> list[Variable]:
    """Multinomial counts of ``n`` trials over ``len(pvals)`` outcomes (a last extra axis)."""
    n, pvals = _tensors(n, list(pvals) if isinstance(pvals, tuple) else pvals)
    if pvals.type.ndim < 1:
        raise TypeError(f"multinomial: pvals must be a vector (or more), got {pvals.type}")
    batch = (pvals.type.ndim - 1, pvals.type.broadcastable[:-1])
    ndim, vec, bcast = _infer_ndim_bcast(ndim, size, n, batch)
    out_bcast = (*bcast, pvals.type.broadcastable[-1])
    op = RandomFunction("multinomial_helper", TensorType(dtype, out_bcast), ndim_added=1)
    return op(random_state, vec, n, pvals, return_list=True)
