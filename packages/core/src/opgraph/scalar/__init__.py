"""Theano's ``theano.scalar`` namespace: scalar types, the scalar ops and their instances.

Theano code reads this module directly: ``y.owner.op.scalar_op == theano.scalar.mul``,
``theano.scalar.bool``, ``theano.scalar.upcast('int8', 'float32')``,
``theano.scalar.Scalar('float64')``. The definitions live in :mod:`opgraph.scalar.type`
(types and dtype rules), :mod:`opgraph.scalar.basic` (the ops and ``Composite``),
:mod:`opgraph.scalar.extra` and :mod:`opgraph.scalar.special` (SciPy's special functions);
this module gathers their public names.
"""

from __future__ import annotations

import builtins
from types import ModuleType
from typing import Any

from opgraph.scalar import basic, extra, special
from opgraph.scalar.basic import (
    Composite,
    ScalarConstant,
    ScalarOp,
    ScalarVariable,
    as_scalar,
    cast,
    constant,
)
from opgraph.scalar.type import (
    ScalarType,
    all_dtypes,
    complex_dtypes,
    continuous_dtypes,
    discrete_dtypes,
    float_dtypes,
    get_scalar_type,
    int_dtypes,
    uint_dtypes,
    upcast,
)

#: Theano's name for the scalar type class.
Scalar = ScalarType

__all__ = [
    "Composite",
    "Scalar",
    "ScalarConstant",
    "ScalarOp",
    "ScalarType",
    "ScalarVariable",
    "all_dtypes",
    "as_scalar",
    "cast",
    "complex_dtypes",
    "constant",
    "continuous_dtypes",
    "discrete_dtypes",
    "float_dtypes",
    "get_scalar_type",
    "int_dtypes",
    "uint_dtypes",
    "upcast",
]


def _public_ops(module: ModuleType) -> dict[str, Any]:
    """The scalar ops (instances and classes), output-type rules and helper functions that
    ``module`` defines under public names. (``builtins.type``: in this package ``type`` is
    the submodule :mod:`opgraph.scalar.type`.)"""
    found = {}
    for name, value in vars(module).items():
        if name.startswith("_") or isinstance(value, ModuleType):
            continue
        is_op = isinstance(value, ScalarOp) or (
            isinstance(value, builtins.type) and issubclass(value, ScalarOp)
        )
        defined_here = callable(value) and getattr(value, "__module__", None) == module.__name__
        if is_op or defined_here:
            found[name] = value
    return found


def _gather() -> None:
    """Put the ops of basic, extra and special, and one ScalarType per dtype under Theano's
    names (``float64``, ``int32``, ``bool``, ...), and the type tuples (``int_types``,
    ``float_types``, ...), in this namespace."""
    namespace = globals()
    for module in (basic, extra, special):
        for name, value in _public_ops(module).items():
            namespace.setdefault(name, value)
            if name not in __all__:
                __all__.append(name)
    types = {dtype: get_scalar_type(dtype) for dtype in all_dtypes}
    namespace.update(types)
    __all__.extend(types)
    groups = {
        "int_types": int_dtypes,
        "uint_types": uint_dtypes,
        "integer_types": (*int_dtypes, *uint_dtypes),
        "float_types": float_dtypes,
        "complex_types": complex_dtypes,
        "discrete_types": discrete_dtypes,
        "continuous_types": continuous_dtypes,
        "all_types": all_dtypes,
    }
    for name, dtypes in groups.items():
        namespace[name] = tuple(types[d] for d in dtypes)
        __all__.append(name)


_gather()
del _gather
