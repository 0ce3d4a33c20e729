"""Structured elementwise functions: a tensor function applied to the stored values of a
csr/csc matrix only, the pattern (stored zeros included) kept (Theano's
``structured_monoid`` and the functions built on it).

Each result is ``CSM(format)(f(csm_data(x), *scalars), indices, indptr, shape)``, so the
gradient is structured: it flows to the stored values through ``CSM`` and
``csm_properties``, wherever the tensor function has one. Functions with ``f(0) != 0``
(``structured_exp``, ``structured_add``, ...) are structured in their values too: entries
that are not stored stay zero.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from opgraph.graph.basic import Variable
from opgraph.tensor import math as tm
from opgraph.tensor.basic import as_tensor_variable
from opgraph_sparse.basic import CSM, as_sparse_variable, check_format, csm_properties

__all__ = [
    "arcsin",
    "arcsinh",
    "arctan",
    "arctanh",
    "ceil",
    "conj",
    "deg2rad",
    "expm1",
    "floor",
    "log1p",
    "rad2deg",
    "rint",
    "sgn",
    "sin",
    "sinh",
    "sqr",
    "sqrt",
    "structured_add",
    "structured_exp",
    "structured_log",
    "structured_maximum",
    "structured_minimum",
    "structured_monoid",
    "structured_pow",
    "structured_sigmoid",
    "tan",
    "tanh",
    "trunc",
]


def _apply_on_data(tensor_op: Callable[..., Variable], x: Any, *scalars: Any) -> Variable:
    """``tensor_op(data, *scalars)`` on the stored values of the sparse ``x``, as a matrix
    of ``x``'s format and pattern. The extra arguments must be scalars (Python or NumPy
    numbers, 0-d arrays, scalar Variables)."""
    x = as_sparse_variable(x)
    check_format(tensor_op, x)  # type: ignore[arg-type]
    args = []
    for s in scalars:
        arg = as_tensor_variable(s)
        if arg.type.ndim != 0:
            raise TypeError(
                f"{tensor_op}: the arguments after the sparse matrix must be scalars, got "
                f"{arg} of type {arg.type}"
            )
        args.append(arg)
    data, indices, indptr, shape = csm_properties(x)
    return CSM(x.type.format)(tensor_op(data, *args), indices, indptr, shape)


def structured_monoid(
    tensor_op: Callable[..., Variable],
) -> Callable[[Callable[..., Any]], Callable[..., Variable]]:
    """A decorator making ``f(x, *scalars)`` apply ``tensor_op`` to the stored values of
    the sparse ``x`` (the other arguments are scalars passed on to ``tensor_op``).

    The decorated function's body is not run: only its name and docstring are kept, as
    with Theano's decorator of the same name.
    """

    def decorator(f: Callable[..., Any]) -> Callable[..., Variable]:
        @functools.wraps(f)
        def wrapper(*args: Any) -> Variable:
            if not args:
                raise TypeError(f"{f.__name__} needs a sparse matrix as first argument")
            return _apply_on_data(tensor_op, *args)

        return wrapper

    return decorator


def structured_sigmoid(x: Any) -> Variable:
    """``sigmoid`` of the stored values of ``x``."""
    return _apply_on_data(tm.sigmoid, x)


def structured_exp(x: Any) -> Variable:
    """``exp`` of the stored values of ``x`` (unstored entries stay zero)."""
    return _apply_on_data(tm.exp, x)


def structured_log(x: Any) -> Variable:
    """``log`` of the stored values of ``x``."""
    return _apply_on_data(tm.log, x)


def structured_pow(x: Any, y: Any) -> Variable:
    """The stored values of ``x`` to the power of the scalar ``y``."""
    return _apply_on_data(tm.pow, x, y)


def structured_minimum(x: Any, y: Any) -> Variable:
    """``minimum`` of each stored value of ``x`` and the scalar ``y``."""
    return _apply_on_data(tm.minimum, x, y)


def structured_maximum(x: Any, y: Any) -> Variable:
    """``maximum`` of each stored value of ``x`` and the scalar ``y``."""
    return _apply_on_data(tm.maximum, x, y)


def structured_add(x: Any, y: Any) -> Variable:
    """The scalar ``y`` added to each stored value of ``x`` (unstored entries stay zero)."""
    return _apply_on_data(tm.add, x, y)


def sin(x: Any) -> Variable:
    """``sin`` of the stored values of ``x``."""
    return _apply_on_data(tm.sin, x)


def tan(x: Any) -> Variable:
    """``tan`` of the stored values of ``x``."""
    return _apply_on_data(tm.tan, x)


def arcsin(x: Any) -> Variable:
    """``arcsin`` of the stored values of ``x``."""
    return _apply_on_data(tm.arcsin, x)


def arctan(x: Any) -> Variable:
    """``arctan`` of the stored values of ``x``."""
    return _apply_on_data(tm.arctan, x)


def sinh(x: Any) -> Variable:
    """``sinh`` of the stored values of ``x``."""
    return _apply_on_data(tm.sinh, x)


def arcsinh(x: Any) -> Variable:
    """``arcsinh`` of the stored values of ``x``."""
    return _apply_on_data(tm.arcsinh, x)


def tanh(x: Any) -> Variable:
    """``tanh`` of the stored values of ``x``."""
    return _apply_on_data(tm.tanh, x)


def arctanh(x: Any) -> Variable:
    """``arctanh`` of the stored values of ``x``."""
    return _apply_on_data(tm.arctanh, x)


def rint(x: Any) -> Variable:
    """The stored values of ``x`` rounded half to even."""
    return _apply_on_data(tm.round_half_to_even, x)


def sgn(x: Any) -> Variable:
    """The sign of the stored values of ``x``."""
    return _apply_on_data(tm.sgn, x)


def ceil(x: Any) -> Variable:
    """``ceil`` of the stored values of ``x``."""
    return _apply_on_data(tm.ceil, x)


def floor(x: Any) -> Variable:
    """``floor`` of the stored values of ``x``."""
    return _apply_on_data(tm.floor, x)


def log1p(x: Any) -> Variable:
    """``log(1 + v)`` of the stored values ``v`` of ``x``."""
    return _apply_on_data(tm.log1p, x)


def expm1(x: Any) -> Variable:
    """``exp(v) - 1`` of the stored values ``v`` of ``x``."""
    return _apply_on_data(tm.expm1, x)


def deg2rad(x: Any) -> Variable:
    """The stored values of ``x`` converted from degrees to radians."""
    return _apply_on_data(tm.deg2rad, x)


def rad2deg(x: Any) -> Variable:
    """The stored values of ``x`` converted from radians to degrees."""
    return _apply_on_data(tm.rad2deg, x)


def trunc(x: Any) -> Variable:
    """The stored values of ``x`` truncated towards zero."""
    return _apply_on_data(tm.trunc, x)


def sqr(x: Any) -> Variable:
    """The square of the stored values of ``x``."""
    return _apply_on_data(tm.sqr, x)


def sqrt(x: Any) -> Variable:
    """The square root of the stored values of ``x``."""
    return _apply_on_data(tm.sqrt, x)


def conj(x: Any) -> Variable:
    """The complex conjugate of the stored values of ``x``."""
    return _apply_on_data(tm.conj, x)
