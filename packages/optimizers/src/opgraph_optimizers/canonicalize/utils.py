"""Helpers the rewrite modules share: matching Elemwise nodes, scalar constants, types.

Rewrites are short because these answer the recurring questions: "is this variable computed
by an Elemwise of scalar op X?" (:func:`elemwise_inputs`), "is it a constant with a single
value?" (:func:`scalar_constant`, :func:`has_value`), "is it minus something?"
(:func:`is_neg`), "may a rewrite fold it into its one user?" (:func:`has_one_client`), and
"how do I give a replacement the exact type of the variable it replaces?" (:func:`as_type_of`,
:func:`as_replacement`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

import opgraph.scalar.basic as ps
import opgraph.tensor.math as tm
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.scalar.type import all_dtypes, discrete_dtypes, get_scalar_type, uint_dtypes
from opgraph.tensor.basic import Rebroadcast
from opgraph.tensor.elemwise import DimShuffle, Elemwise
from opgraph.tensor.type import TensorType
from opgraph.tensor.variable import TensorConstant

__all__ = [
    "CAST_OPS",
    "as_replacement",
    "as_type_of",
    "broadcast_constant",
    "continuous",
    "elemwise_inputs",
    "has_one_client",
    "has_value",
    "is_cast",
    "is_neg",
    "negate",
    "scalar_constant",
    "scalar_op_of",
]


#: The Elemwise casts to every dtype: rewriters of casts track these (equal to any cast op).
CAST_OPS = [Elemwise(ps.Cast(get_scalar_type(d))) for d in all_dtypes]


def is_cast(op: Any) -> bool:
    """True for an Elemwise cast to any dtype (the head of cast patterns tracking CAST_OPS)."""
    return isinstance(getattr(op, "scalar_op", None), ps.Cast)


def scalar_op_of(x: Variable | Apply | None) -> ps.ScalarOp | None:
    """The scalar op of the single-output Elemwise computing ``x`` (a variable or a node)."""
    node = x.owner if isinstance(x, Variable) else x
    if node is None or not isinstance(node.op, Elemwise) or len(node.outputs) != 1:
        return None
    return node.op.scalar_op


def elemwise_inputs(x: Variable | Apply | None, *classes: type) -> list[Variable] | None:
    """The inputs of ``x``'s Elemwise if its scalar op is one of ``classes``, else None."""
    op = scalar_op_of(x)
    if op is None or not isinstance(op, classes):
        return None
    node = x.owner if isinstance(x, Variable) else x
    return list(node.inputs)  # type: ignore[union-attr]


def has_one_client(var: Variable) -> bool:
    """True if one node alone uses ``var`` (a rewrite may then fold it into that node)."""
    return len(getattr(var, "clients", ())) == 1


def continuous(dtype: str) -> bool:
    """True for float and complex dtypes (no integer overflow, no bool)."""
    return dtype not in discrete_dtypes


def _all_equal(data: np.ndarray) -> bool:
    if data.size == 0:
        return False
    first = data.flat[0]
    return bool(np.all(data == first)) or bool(np.isnan(first) and np.all(np.isnan(data)))


def scalar_constant(var: Variable, broadcastable_only: bool = True) -> np.generic | None:
    """The single value of ``var`` if it is a constant whose elements are all equal.

    Looks through DimShuffle and Rebroadcast of a constant. With ``broadcastable_only`` the
    variable must also have only broadcastable dimensions (length 1), so replacing it by a
    scalar cannot change the shape of an expression.
    """
    if broadcastable_only and not all(getattr(var.type, "broadcastable", (False,))):
        return None
    owner = var.owner
    while owner is not None and isinstance(owner.op, DimShuffle | Rebroadcast):
        var = owner.inputs[0]
        owner = var.owner
    if owner is not None or not isinstance(var, Constant):
        return None
    data = var.data
    if not isinstance(data, np.ndarray | np.generic) or data.dtype.kind not in "biufc":
        return None
    if data.size != 1 and not _all_equal(np.asarray(data)):
        return None
    return data.flat[0] if isinstance(data, np.ndarray) else data


def has_value(var: Variable, value: Any) -> bool:
    """True if ``var`` is a broadcastable constant (see :func:`scalar_constant`) equal to
    ``value``."""
    c = scalar_constant(var)
    return c is not None and bool(c == value)


#: ``{(dtype, ndim): TensorType(dtype, (True,) * ndim)}``: types are immutable, so the
#: constants canonicalization makes by the thousand on a big graph share them.
_BROADCAST_TYPES: dict[tuple[str, int], TensorType] = {}


#: The attribute of a FunctionGraph holding its :func:`broadcast_constant` cache.
CONSTANT_CACHE_ATTR = "_broadcast_constants"


def broadcast_constant(value: Any, dtype: str, ndim: int, fgraph: Any = None) -> Constant:
    """A constant holding ``value`` as ``dtype``, with ``ndim`` broadcastable dimensions.

    The TensorConstant ``opgraph.tensor.constant`` would make of that array, built directly.
    With ``fgraph``, one constant per (dtype, ndim, bytes of the value) is made for that
    graph and handed out again (the canonizers make thousands of equal constants on a big
    graph, which the merge would otherwise merge one by one). Only within one graph: a
    variable's ``clients`` belong to the graph holding it.
    """
    with np.errstate(all="ignore"):
        data = np.full((1,) * ndim, value).astype(dtype)
    # (a canonical dtype name is the array's; ``str`` of a NumPy dtype is not free)
    key = (dtype if type(dtype) is str and dtype in all_dtypes else str(data.dtype), ndim)
    cache = None
    if fgraph is not None:
        cache = fgraph.__dict__.get(CONSTANT_CACHE_ATTR)
        if cache is None:
            cache = fgraph.__dict__[CONSTANT_CACHE_ATTR] = {}
        ckey = (key, data.tobytes())
        const = cache.get(ckey)
        if const is not None:
            return const
    ttype = _BROADCAST_TYPES.get(key)
    if ttype is None:
        ttype = _BROADCAST_TYPES[key] = TensorType(key[0], (True,) * ndim)
    const = TensorConstant(ttype, data)
    if cache is not None:
        cache[ckey] = const
    return const


def is_neg(var: Variable) -> Variable | None:
    """``x`` if ``var`` is ``neg(x)`` or ``mul(-1, x)`` (canonicalize's form of it), else None."""
    ins = elemwise_inputs(var, ps.Neg)
    if ins is not None:
        return ins[0]
    ins = elemwise_inputs(var, ps.Mul)
    if ins is None or len(ins) != 2:
        return None
    for k in (0, 1):
        c = scalar_constant(ins[k])
        if c is not None and c == -1:
            other = ins[1 - k]
            if other.type.dtype == var.type.dtype:
                return other
    return None


def negate(var: Variable) -> Variable:
    """``-var`` without a double negation: ``x`` for ``neg(x)`` or ``mul(-1, x)``,
    ``x + b`` for ``-x - b``, ``b - a`` for ``a - b``."""
    inner = is_neg(var)
    if inner is not None:
        return inner
    ins = elemwise_inputs(var, ps.Sub)
    if ins is not None and var.type.dtype not in uint_dtypes:
        a, b = ins
        minus_a = is_neg(a)
        new = tm.add(minus_a, b) if minus_a is not None else tm.sub(b, a)
        if new.type == var.type:
            return new
    return tm.neg(var)


def _pad(var: Variable, ndim: int) -> Variable:
    diff = ndim - var.type.ndim
    if diff <= 0:
        return var
    order: list[int | str] = ["x"] * diff + list(range(var.type.ndim))
    return DimShuffle(var.type.broadcastable, order)(var)


def as_type_of(new: Variable, out: Variable, models: Iterable[Variable] = ()) -> Variable | None:
    """``new`` given exactly ``out``'s type, or None if that is not possible.

    The dtype is cast, missing leading dimensions are added, and each dimension that is
    broadcastable in ``new`` but not in ``out`` is given its length by ``fill(model, new)``
    with the first of ``models`` having a non-broadcastable dimension there. A rewrite that
    dropped a term (``x * y / y -> x``) passes the dropped terms as models, so the result
    keeps the shape the original expression had.
    """
    ndim = out.type.ndim
    if new.type.ndim > ndim:
        return None
    if new.type.dtype != out.type.dtype:
        new = tm.cast(new, out.type.dtype)
    new = _pad(new, ndim)
    target = out.type.broadcastable
    missing = {d for d in range(ndim) if new.type.broadcastable[d] and not target[d]}
    for model in models:
        if not missing:
            break
        if model.type.ndim > ndim:
            continue
        pad = ndim - model.type.ndim
        covers = {d for d in missing if d >= pad and not model.type.broadcastable[d - pad]}
        if covers:
            new = tm.fill(model, new)
            missing -= covers
    if missing:
        return None
    if new.type != out.type:
        converted = out.type.convert_variable(new)
        if converted is None or converted.type != out.type:
            return None
        new = converted
    return new


def as_replacement(
    new: Variable, out: Variable, models: Iterable[Variable] = ()
) -> list[Variable] | None:
    """``[new]`` given ``out``'s type by :func:`as_type_of` (what a node rewriter returns),
    or None."""
    result = as_type_of(new, out, models)
    return None if result is None else [result]
