"""Theano's ``tensor`` namespace: types, constructors, and the tensor op library."""

from __future__ import annotations

from typing import Any

from opgraph.configdefaults import config as _config

# ``from theano.tensor import Apply, Variable, Constant`` works in Theano (the seeds use it).
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.tensor import (
    blas,
    extra_ops,
    nlinalg,
    nnet,
    shared_randomstreams,
    sharedvar,
    slinalg,
)
from opgraph.tensor import random as raw_random
from opgraph.tensor.autodiff import Lop, Rop, grad
from opgraph.tensor.axes import *
from opgraph.tensor.basic import (
    Rebroadcast,
    ScalarFromTensor,
    TensorFromScalar,
    addbroadcast,
    as_tensor,
    as_tensor_variable,
    constant,
    patternbroadcast,
    scalar_from_tensor,
    tensor_from_scalar,
    unbroadcast,
)
from opgraph.tensor.cumulative import *
from opgraph.tensor.dot import *
from opgraph.tensor.elemwise import CAReduce, DimShuffle, Elemwise, Sum
from opgraph.tensor.extra_ops import *
from opgraph.tensor.gradcheck import verify_grad
from opgraph.tensor.jacobian import hessian, jacobian
from opgraph.tensor.joining import *
from opgraph.tensor.math import *
from opgraph.tensor.math import (
    abs_,
    add,
    cast,
    exp,
    fill,
    mul,
    neg,
    ones_like,
    second,
    sum,
    zeros_like,
)
from opgraph.tensor.nlinalg import alloc_diag, diag, extract_diag, trace
from opgraph.tensor.reduction import *
from opgraph.tensor.shape import *
from opgraph.tensor.sort import *
from opgraph.tensor.statistics import *
from opgraph.tensor.structure import *
from opgraph.tensor.subtensor import *
from opgraph.tensor.type import TensorType
from opgraph.tensor.variable import TensorConstant, TensorVariable

_KINDS = {
    "scalar": (),
    "vector": (False,),
    "row": (True, False),
    "col": (False, True),
    "matrix": (False, False),
    "tensor3": (False,) * 3,
    "tensor4": (False,) * 4,
    "tensor5": (False,) * 5,
}
_PREFIX = {
    "b": "int8",
    "w": "int16",
    "i": "int32",
    "l": "int64",
    "f": "float32",
    "d": "float64",
    "c": "complex64",
    "z": "complex128",
}


def _make_constructor(kind: str, bcast: tuple[bool, ...]) -> Any:
    def constructor(name: str | None = None, dtype: str | None = None) -> TensorVariable:
        return TensorType(dtype or _config.floatX, bcast)(name)  # type: ignore[return-value]

    constructor.__name__ = constructor.__qualname__ = kind
    constructor.__doc__ = f"A symbolic {kind} of dtype ``dtype`` (default ``config.floatX``)."
    return constructor


def _make_plural(single: Any) -> Any:
    def plural(*names: str, **kwargs: Any) -> list[TensorVariable]:
        if len(names) == 1 and isinstance(names[0], int):
            return [single(**kwargs) for _ in range(names[0])]
        if len(names) == 1 and isinstance(names[0], str) and "," in names[0]:
            names = tuple(n.strip() for n in names[0].split(","))
        return [single(n, **kwargs) for n in names]

    plural.__doc__ = (
        f"Several ``{getattr(single, '__name__', 'tensor')}`` variables at once, by name."
    )
    return plural


_namespace = globals()
for _kind, _bcast in _KINDS.items():
    _namespace[_kind] = _make_constructor(_kind, _bcast)
    _namespace[f"{_kind}s" if _kind != "matrix" else "matrices"] = _make_plural(_namespace[_kind])
    for _p, _dtype in _PREFIX.items():
        _t = TensorType(_dtype, _bcast)
        _namespace[f"{_p}{_kind}"] = _t
        _namespace[f"{_p}{_kind}s" if _kind != "matrix" else f"{_p}matrices"] = _make_plural(_t)
del _kind, _bcast, _p, _dtype, _t


def tensor(
    dtype: str | None = None, broadcastable: Any = None, name: str | None = None, shape: Any = None
) -> TensorVariable:
    """A symbolic tensor of any rank: ``tensor('float64', (False, True), 'x')``."""
    return TensorType(dtype or _config.floatX, broadcastable, shape=shape)(name)  # type: ignore[return-value]
