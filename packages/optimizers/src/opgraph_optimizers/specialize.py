"""The specialize stage: canonical forms turned into the fastest equivalent ops.

``pow`` with a constant exponent becomes ``sqr``/``sqrt``/a division, or a chain of
squarings and products (``a ** 10 -> (a**2)**2**2 * a**2``, Theano's
``local_pow_specialize_device``); ``mul(-1, x)`` (canonicalize's negation) goes back to
``neg(x)``; neutral constants leave add/mul; ``exp(log x)`` and ``log(exp x)`` cancel;
nested sums merge and constant factors move out of sums. An unused output of
``MaxAndArgmax`` is dropped.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import opgraph.scalar.basic as ps
import opgraph.tensor.math as tm
from opgraph.graph.basic import Apply, Variable
from opgraph.rewriting import node_rewriter, pattern_rewriter
from opgraph.scalar.type import discrete_dtypes, get_scalar_type, uint_dtypes
from opgraph.tensor.elemwise import CAReduce, Elemwise, Prod, Sum
from opgraph.tensor.reduction import Argmax, MaxAndArgmax
from opgraph_optimizers.canonicalize.utils import (
    as_replacement,
    as_type_of,
    broadcast_constant,
    continuous,
    elemwise_inputs,
    has_one_client,
    has_value,
    is_neg,
    scalar_constant,
    scalar_op_of,
)
from opgraph_optimizers.registry import rewrites

__all__ = [
    "local_add_specialize",
    "local_div_to_inv",
    "local_exp_log",
    "local_log_exp",
    "local_max_and_argmax",
    "local_max_to_min",
    "local_mul_specialize",
    "local_mul_to_sqr",
    "local_pow_specialize",
    "local_pow_specialize_device",
    "local_sum_mul_by_scalar",
    "local_sum_neg",
    "local_sum_prod_all_to_none",
    "local_sum_sum",
]

#: Largest integer exponent expanded into squarings and products.
MAX_POW_EXPANSION = 512


def _exponent(node: Apply) -> tuple[Variable, Any] | None:
    """``(x, c)`` for ``pow(x, y)`` where ``y`` is a constant with the single value ``c``."""
    ins = elemwise_inputs(node, ps.Pow)
    if ins is None:
        return None
    x, y = ins
    c = scalar_constant(y, broadcastable_only=False)
    if c is None or np.iscomplexobj(c):
        return None
    return x, c


def _reciprocal(x: Variable, dtype: str) -> Variable:
    """``inv(x)`` as Theano wrote it, or ``1 / x`` where inv would change the dtype."""
    new = tm.inv(x)
    if new.type.dtype != dtype:
        new = tm.true_div(broadcast_constant(1, dtype, x.type.ndim), x)
    return new


@rewrites.specialize
@node_rewriter([tm.pow])
def local_pow_specialize(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``x**2 -> sqr(x)``, ``x**0.5 -> sqrt(x)``, ``x**-1 -> 1/x``, ``x**-0.5 -> 1/sqrt(x)``."""
    found = _exponent(node)
    if found is None:
        return None
    x, c = found
    out = node.outputs[0]
    dtype = out.type.dtype
    discrete = dtype in discrete_dtypes
    if x.type.dtype != dtype:
        x = tm.cast(x, dtype)  # pow computes in the upcast dtype
    if c == 2:
        new = tm.sqr(x)
    elif c == 0.5 and not discrete:
        new = tm.sqrt(x)
    elif c == -1 and not discrete:
        new = _reciprocal(x, dtype)
    elif c == -0.5 and not discrete:
        new = _reciprocal(tm.sqrt(x), dtype)
    elif c == -2 and not discrete:
        new = _reciprocal(tm.sqr(x), dtype)
    else:
        return None
    return as_replacement(new, out, models=node.inputs)


@rewrites.specialize
@node_rewriter([tm.pow])
def local_pow_specialize_device(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``x**n -> `` squarings and products of ``x`` for an integer ``3 <= |n| <= 512``.

    As Theano built it: one ``Elemwise{Composite{(sqr(sqr(sqr(i0))) * sqr(i0))}}`` (fewer
    nodes to compile; fusion keeps it nested in a larger Composite, as Theano printed
    ``Composite{(i0 + Composite{...}(i0))}`` for ``a + a**10``), and ``inv`` of it for a
    negative ``n``.
    """
    found = _exponent(node)
    if found is None:
        return None
    x, c = found
    out = node.outputs[0]
    if not np.isfinite(c) or c != int(c) or not 3 <= abs(int(c)) <= MAX_POW_EXPANSION:
        return None
    n = abs(int(c))
    if c < 0 and out.type.dtype in discrete_dtypes:
        return None  # NumPy refuses negative integer powers of integers
    if x.type.dtype != out.type.dtype:
        x = tm.cast(x, out.type.dtype)
    xs = get_scalar_type(x.type.dtype)()
    powers = [xs]  # powers[k] = x ** (2 ** k)
    for _ in range(n.bit_length() - 1):
        powers.append(ps.sqr(powers[-1]))
    product = None
    for k in range(n.bit_length() - 1, -1, -1):
        if n >> k & 1:
            product = powers[k] if product is None else ps.mul(product, powers[k])
    new = Elemwise(ps.Composite([xs], [product]))(x)
    if c < 0:
        new = _reciprocal(new, out.type.dtype)
    return as_replacement(new, out, models=node.inputs)


@rewrites.specialize
@node_rewriter([tm.mul])
def local_mul_specialize(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``mul(-1, x) -> neg(x)``; ``mul(1, x, y) -> mul(x, y)``; ``mul(-1, -1, x) -> x``."""
    if not isinstance(scalar_op_of(node), ps.Mul) or node.op.inplace_pattern:
        return None
    out = node.outputs[0]
    if out.type.dtype == "bool":
        return None
    negative = False
    n_const = 0
    rest: list[Variable] = []
    for i in node.inputs:
        c = scalar_constant(i)
        if c is not None and (c == 1 or c == -1):
            n_const += 1
            negative ^= bool(c == -1)
        else:
            rest.append(i)
    if not n_const:
        return None
    dtype = out.type.dtype
    if not rest:
        new = broadcast_constant(-1 if negative else 1, dtype, out.type.ndim)
    elif len(rest) == 1:
        if negative and dtype in uint_dtypes:
            return None
        new = tm.neg(rest[0]) if negative else rest[0]
    else:
        if negative and n_const == 1:
            return None  # mul(-1, x, y) is already as cheap as it gets
        if negative:
            rest = [broadcast_constant(-1, dtype, out.type.ndim), *rest]
        new = tm.mul(*rest)
    return as_replacement(new, out, models=node.inputs)


@rewrites.specialize
@node_rewriter([tm.add])
def local_add_specialize(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``add(0, x, y) -> add(x, y)``; ``add(0, x) -> x``."""
    if not isinstance(scalar_op_of(node), ps.Add) or node.op.inplace_pattern:
        return None
    out = node.outputs[0]
    if out.type.dtype == "bool":
        return None
    rest = [i for i in node.inputs if not has_value(i, 0)]
    if len(rest) == len(node.inputs):
        return None
    if not rest:
        new = broadcast_constant(0, out.type.dtype, out.type.ndim)
    else:
        new = rest[0] if len(rest) == 1 else tm.add(*rest)
    return as_replacement(new, out, models=node.inputs)


local_mul_to_sqr = rewrites.specialize(
    pattern_rewriter("local_mul_to_sqr", (tm.mul, "x", "x"), (tm.sqr, "x"), retype=as_type_of)
)
local_log_exp = rewrites.specialize(
    pattern_rewriter(
        "local_log_exp",
        (tm.log, (tm.exp, "x")),
        "x",
        allow_multiple_clients=True,
        retype=as_type_of,  # a cast where ``x`` is an integer
    )
)


@rewrites.specialize
@node_rewriter([tm.exp])
def local_exp_log(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``exp(log(x)) -> x`` (``nan`` kept where ``x < 0``, as ``log`` gave it)."""
    ins = elemwise_inputs(node, ps.Exp)
    inner = elemwise_inputs(ins[0], ps.Log) if ins is not None else None
    if inner is None:
        return None
    (x,) = inner
    out = node.outputs[0]
    if x.type.dtype in discrete_dtypes and x.type.dtype not in uint_dtypes:
        x = tm.cast(x, out.type.dtype)
    if x.type.dtype in uint_dtypes or x.type.dtype == "bool":
        new = x
    else:
        nan = broadcast_constant(np.nan, out.type.dtype, out.type.ndim)
        zero = broadcast_constant(0, x.type.dtype, x.type.ndim)
        new = tm.switch(tm.ge(x, zero), x, nan)
    return as_replacement(new, out)


# ------------------------------------------------------------------ reductions


def _sum_axes(op: CAReduce, ndim: int) -> tuple[int, ...]:
    return tuple(range(ndim)) if op.axis is None else tuple(op.axis)


@rewrites.canonicalize
@node_rewriter([Sum, Prod])
def local_sum_prod_all_to_none(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``Sum{axis=[0, ..., n-1]}(x) -> Sum(x)`` (and Prod): every axis named is axis None,
    which merges with the same reduction written without axes, and prints as Theano's
    ``Sum{acc_dtype=float64}``."""
    op = node.op
    if type(op) not in (Sum, Prod) or op.axis is None:
        return None
    if set(op.axis) != set(range(node.inputs[0].type.ndim)):
        return None
    kwargs = {"no_zeros_in_input": op.no_zeros_in_input} if type(op) is Prod else {}
    new = type(op)(axis=None, dtype=op.dtype, acc_dtype=op.acc_dtype, **kwargs)(node.inputs[0])
    return as_replacement(new, node.outputs[0])


@rewrites.specialize
@node_rewriter([Sum])
def local_sum_sum(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``sum(sum(x, axis=a), axis=b) -> sum(x, axis=a + b)``."""
    (inner,) = node.inputs
    inode = inner.owner
    if inode is None or type(inode.op) is not Sum or type(node.op) is not Sum:
        return None
    if not has_one_client(inner):
        return None
    if (inode.op.dtype, inode.op.acc_dtype) != (node.op.dtype, node.op.acc_dtype):
        return None
    x = inode.inputs[0]
    first = _sum_axes(inode.op, x.type.ndim)
    kept = [d for d in range(x.type.ndim) if d not in first]
    second = [kept[a] for a in _sum_axes(node.op, inner.type.ndim)]
    axes = sorted(set(first) | set(second))
    new = Sum(axis=axes, dtype=node.op.dtype, acc_dtype=node.op.acc_dtype)(x)
    return as_replacement(new, node.outputs[0])


@rewrites.specialize
@node_rewriter([Sum])
def local_sum_mul_by_scalar(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``sum(c * x) -> c * sum(x)`` for a scalar constant ``c``."""
    (inner,) = node.inputs
    ins = elemwise_inputs(inner, ps.Mul)
    out = node.outputs[0]
    if ins is None or not has_one_client(inner) or not continuous(out.type.dtype):
        return None
    consts = [i for i in ins if scalar_constant(i) is not None]
    rest = [i for i in ins if scalar_constant(i) is None]
    if not consts or not rest:
        return None
    x = rest[0] if len(rest) == 1 else tm.mul(*rest)
    if x.type != inner.type:
        return None  # the constant also broadcast or upcast the product
    value = np.prod([scalar_constant(c) for c in consts]).astype(out.type.dtype)
    new = tm.mul(broadcast_constant(value, out.type.dtype, out.type.ndim), node.op(x))
    return as_replacement(new, out)


@rewrites.specialize
@node_rewriter([Sum])
def local_sum_neg(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``sum(-x) -> -sum(x)``."""
    (inner,) = node.inputs
    x = is_neg(inner)
    out = node.outputs[0]
    if x is None or not has_one_client(inner) or x.type != inner.type:
        return None
    if out.type.dtype in uint_dtypes or out.type.dtype == "bool":
        return None
    return as_replacement(tm.neg(node.op(x)), out)


@rewrites.specialize
@node_rewriter([tm.true_div])
def local_div_to_inv(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``1 / x -> inv(x)`` (Theano's rewrite: one input, and the ``1`` is no longer read)."""
    if node.op.inplace_pattern or len(node.inputs) != 2:
        return None
    one, x = node.inputs
    if scalar_constant(one) != 1:
        return None
    new = tm.inv(x)
    out = node.outputs[0]
    if new.type.dtype != out.type.dtype:
        return None
    return as_replacement(new, out, models=node.inputs)


@rewrites.specialize
@node_rewriter([tm.neg, tm.invert])
def local_max_to_min(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``-max(-x) -> min(x)`` (``~max(~x)`` for integers), what ``T.min`` builds: one
    ``Reduce{minimum}`` as in Theano, instead of two negations around a maximum."""
    outer = scalar_op_of(node)
    if not isinstance(outer, ps.Neg | ps.Invert):
        return None
    red = node.inputs[0].owner
    if red is None or type(red.op) is not CAReduce or not isinstance(red.op.scalar_op, ps.Maximum):
        return None
    inner = red.inputs[0].owner
    if inner is None or type(scalar_op_of(inner)) is not type(outer):
        return None
    if not has_one_client(node.inputs[0]) or not has_one_client(red.inputs[0]):
        return None
    new = CAReduce(ps.minimum, red.op.axis)(inner.inputs[0])
    return [new] if new.type == node.outputs[0].type else None


@rewrites.specialize
@node_rewriter([MaxAndArgmax])
def local_max_and_argmax(fgraph: Any, node: Apply) -> dict[Variable, Variable] | None:
    """``MaxAndArgmax`` with one output unused -> ``Reduce{maximum}`` or ``Argmax``."""
    max_out, arg_out = node.outputs
    (x,) = node.inputs
    if not getattr(arg_out, "clients", None):
        new = CAReduce(ps.maximum, node.op.axis)(x)
        return {max_out: new} if new.type == max_out.type else None
    if not getattr(max_out, "clients", None):
        new = Argmax(node.op.axis)(x)
        return {arg_out: new} if new.type == arg_out.type else None
    return None
