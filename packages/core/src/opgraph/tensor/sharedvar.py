"""Core's shared variables: ``opgraph.shared(numpy_array)`` builds a TensorSharedVariable,
``opgraph.shared(numpy.random.RandomState(0))`` a RandomStateSharedVariable.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from opgraph.compile.sharedvalue import SharedVariable, add_core_shared_constructor
from opgraph.configdefaults import config
from opgraph.tensor.random_ops import random_generator_type, random_state_type
from opgraph.tensor.type import TensorType
from opgraph.tensor.variable import _tensor_py_operators

__all__ = [
    "RandomGeneratorSharedVariable",
    "RandomStateSharedVariable",
    "TensorSharedVariable",
    "random_shared_constructor",
    "tensor_shared_constructor",
]


class TensorSharedVariable(_tensor_py_operators, SharedVariable):
    """A shared ndarray: a symbolic tensor whose value persists between function calls."""

    __hash__ = SharedVariable.__hash__


def tensor_shared_constructor(
    value: Any,
    name: str | None = None,
    strict: bool = False,
    allow_downcast: bool | None = None,
    borrow: bool = False,
    broadcastable: Any = None,
    shape: Any = None,
    target: str = "cpu",
) -> TensorSharedVariable | None:
    """Build a TensorSharedVariable for an ndarray or a Python/NumPy number; else None.

    As in Theano, no dimension is broadcastable unless ``broadcastable`` says so (a shared
    variable's shape may change with ``set_value``). Python floats become ``config.floatX``
    arrays; NumPy values keep their dtype. The value is copied unless ``borrow`` is true.
    """
    if target != "cpu":
        return None
    if isinstance(value, np.ndarray):
        arr = value if borrow else value.copy()
    elif isinstance(value, np.generic | bool | int | float | complex) and not isinstance(
        value, str
    ):
        if isinstance(value, float) and not isinstance(value, np.generic):
            arr = np.asarray(value, dtype=config.floatX)
        elif isinstance(value, bool | int) and not isinstance(value, np.generic):
            arr = np.asarray(value, dtype="int64")
        else:
            arr = np.asarray(value)
    else:
        return None
    if arr.dtype == object:
        return None
    if broadcastable is None:
        broadcastable = (False,) * arr.ndim
    ttype = TensorType(str(arr.dtype), broadcastable, shape=shape)
    return TensorSharedVariable(
        name=name, type=ttype, value=arr, strict=strict, allow_downcast=allow_downcast
    )


class RandomStateSharedVariable(SharedVariable):
    """A shared ``numpy.random.RandomState`` (``opgraph.shared(np.random.RandomState(0))``)."""


class RandomGeneratorSharedVariable(SharedVariable):
    """A shared ``numpy.random.Generator`` (``opgraph.shared(np.random.default_rng(0))``)."""


def random_shared_constructor(
    value: Any,
    name: str | None = None,
    strict: bool = False,
    allow_downcast: bool | None = None,
    borrow: bool = False,
) -> SharedVariable | None:
    """A shared variable for a NumPy ``RandomState`` or ``Generator``; None for other values.

    The generator is deep-copied unless ``borrow`` (a plain copy would share its bit
    generator, so draws through the function would advance the caller's generator).
    """
    if isinstance(value, np.random.RandomState):
        cls, rtype = RandomStateSharedVariable, random_state_type
    elif isinstance(value, np.random.Generator):
        cls, rtype = RandomGeneratorSharedVariable, random_generator_type
    else:
        return None
    return cls(
        name=name,
        type=rtype,
        value=value if borrow else copy.deepcopy(value),
        strict=strict,
        allow_downcast=allow_downcast,
    )


# shared() builds tensors and random states with these (registered from here: the compile
# layer, below, never imports the tensor library).
add_core_shared_constructor(tensor_shared_constructor, options=True)
add_core_shared_constructor(random_shared_constructor)
