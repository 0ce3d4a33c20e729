"""Theano's ``tensor`` namespace: types, constructors, and the tensor op library."""

from __future__ import annotations

from typing import Any

from opgraph.configdefaults import config as _config

# ``from theano.tensor import Apply, Variable, Constant`` works in Theano (the seeds use it).
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.plugins.namespaces import module_getattr
from opgraph.tensor import (
    blas,
    extra_ops,
    io,
    nlinalg,
    nnet,
    raw_random,
    shared_randomstreams,
    sharedvar,
    signal,
    slinalg,
    utils,
    xlogx,
)
from opgraph.tensor.autodiff import Lop, Rop, grad
from opgraph.tensor.axes import *
from opgraph.tensor.basic import (
    Choose,
    Rebroadcast,
    ScalarFromTensor,
    TensorFromScalar,
    addbroadcast,
    as_tensor,
    as_tensor_variable,
    choose,
    constant,
    patternbroadcast,
    register_transfer,
    scalar_from_tensor,
    tensor_from_scalar,
    transfer,
    unbroadcast,
)
from opgraph.tensor.cumulative import *
from opgraph.tensor.dot import *
from opgraph.tensor.elemwise import CAReduce, DimShuffle, Elemwise, Sum
from opgraph.tensor.extra_ops import *
from opgraph.tensor.gradcheck import verify_grad
from opgraph.tensor.io import load
from opgraph.tensor.jacobian import hessian, jacobian
from opgraph.tensor.joining import *
from opgraph.tensor.joining import stack
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
from opgraph.tensor.reduction import max as _max
from opgraph.tensor.reduction import min as _min
from opgraph.tensor.shape import *
from opgraph.tensor.shape import integer_dtypes as _integer_dtypes
from opgraph.tensor.sort import *
from opgraph.tensor.statistics import *
from opgraph.tensor.structure import *
from opgraph.tensor.subtensor import *
from opgraph.tensor.type import TensorType
from opgraph.tensor.variable import TensorConstant, TensorVariable, _tensor_py_operators

#: Theano's list of the integer dtypes (``x.dtype in T.integer_dtypes``).
integer_dtypes = list(_integer_dtypes)

_KINDS = {
    "scalar": (),
    "vector": (False,),
    "row": (True, False),
    "col": (False, True),
    "matrix": (False, False),
    "tensor3": (False,) * 3,
    "tensor4": (False,) * 4,
    "tensor5": (False,) * 5,
    "tensor6": (False,) * 6,
    "tensor7": (False,) * 7,
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
    def plural(*names: str, **kwargs: Any) -> Any:
        if len(names) == 1 and isinstance(names[0], int):
            return [single(**kwargs) for _ in range(names[0])]
        if len(names) == 1 and isinstance(names[0], str):
            if "," in names[0]:
                names = tuple(n.strip() for n in names[0].split(","))
            elif len(names[0]) == 1:
                return single(names[0], **kwargs)  # Theano: scalars('x') is one variable
            else:
                names = tuple(names[0])  # Theano: scalars('abcd') names a, b, c, d
        return [single(n, **kwargs) for n in names]

    plural.__doc__ = (
        f"Several ``{getattr(single, '__name__', 'tensor')}`` variables at once, by name: "
        "``(n)`` unnamed ones, ``('x', 'y')`` or ``('x, y')`` named ones, and as in Theano "
        "``('xy')`` one per letter (``('x')`` alone is one variable, not a list)."
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


def ptp(a: Any, axis: Any = None) -> Variable:
    """Range of values (maximum - minimum) along ``axis`` (all axes when None): "peak to
    peak", as Theano's ``tensor.ptp`` and ``numpy.ptp``."""
    a = as_tensor_variable(a)
    return _max(a, axis) - _min(a, axis)


def stacklists(arg: Any) -> Any:
    """Stack nested lists of tensors (or scalars) recursively into one tensor of that
    structure: ``stacklists([[a, b], [c, d]])`` of scalars is a 2x2 matrix, of matrices a
    (2, 2, m, n) tensor. Anything that is not a list or tuple is returned as it is."""
    if isinstance(arg, list | tuple):
        return stack([stacklists(item) for item in arg])
    return arg


def __getattr__(name: str) -> Any:
    """Resolve plugin-owned namespaces under ``opgraph.tensor`` lazily (``opgraph.tensor.opt``,
    Theano's rewrite helpers, from opgraph-optimizers)."""
    return module_getattr(name, "opgraph.tensor")
