"""Useless and misplaced structure: DimShuffles, casts, Rebroadcasts, fills, trivial Elemwise.

DimShuffles are lifted through Elemwise towards the graph inputs (where constants under
them fold), consecutive ones merged and identities removed; casts to the same dtype,
Rebroadcasts that change nothing, single-input add/mul and the gradient blocks
(``disconnected_grad``, ``zero_grad``: identities once gradients are built) vanish;
``fill`` (``second``) nodes sink out of arithmetic so the canonizers see the values they
carry; the constant inputs of an Elemwise that upcasts are cast to its output's dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import opgraph.scalar.basic as ps
import opgraph.tensor.math as tm
from opgraph.gradient import GradBlock
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.rewriting import node_rewriter, pattern_rewriter
from opgraph.rewriting.pattern import exact_type
from opgraph.scalar.type import discrete_dtypes
from opgraph.tensor.basic import Rebroadcast
from opgraph.tensor.elemwise import DimShuffle, Elemwise
from opgraph_optimizers.canonicalize.utils import (
    CAST_OPS,
    as_replacement,
    as_type_of,
    broadcast_constant,
    elemwise_inputs,
    has_one_client,
    is_cast,
    scalar_constant,
    scalar_op_of,
)
from opgraph_optimizers.registry import rewrites

__all__ = [
    "local_cast_cast",
    "local_dimshuffle_lift",
    "local_fill_sink",
    "local_rebroadcast_rebroadcast",
    "local_remove_grad_block",
    "local_upcast_elemwise_constant_inputs",
    "local_useless_cast",
    "local_useless_dimshuffle",
    "local_useless_elemwise",
    "local_useless_fill",
    "local_useless_rebroadcast",
]


# ------------------------------------------------------------------ DimShuffle


def _keeps_every_dim(var: Variable) -> bool:
    """True if ``var`` is a DimShuffle keeping every dimension in place (``{0,1,...,n-1}``)."""
    node = var.owner
    return list(node.op.new_order) == list(range(node.inputs[0].type.ndim))


local_useless_dimshuffle = pattern_rewriter(
    "local_useless_dimshuffle",
    {"pattern": (DimShuffle, "x"), "constraint": _keeps_every_dim},
    "x",
    retype=exact_type,
)
rewrites.specialize(local_useless_dimshuffle)
rewrites.canonicalize(local_useless_dimshuffle)


@rewrites.canonicalize
@node_rewriter([DimShuffle])
def local_dimshuffle_lift(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``DimShuffle(f(x, y)) -> f(DimShuffle(x), DimShuffle(y))``; two DimShuffles -> one."""
    (inp,) = node.inputs
    out = node.outputs[0]
    order = node.op.new_order
    inode = inp.owner
    if inode is None:
        return None
    if (
        isinstance(inode.op, Elemwise)
        and len(inode.outputs) == 1
        and not inode.op.inplace_pattern
        and has_one_client(inp)
    ):
        lifted = [DimShuffle(i.type.broadcastable, order)(i) for i in inode.inputs]
        return as_replacement(inode.op(*lifted), out)
    if isinstance(inode.op, DimShuffle):
        inner = inode.op.new_order
        merged = ["x" if o == "x" else inner[o] for o in order]
        src = inode.inputs[0]
        if merged == list(range(src.type.ndim)) and src.type == out.type:
            return [src]
        return as_replacement(DimShuffle(src.type.broadcastable, merged)(src), out)
    return None


# ------------------------------------------------------------------ casts and Rebroadcast


local_useless_cast = pattern_rewriter(
    "local_useless_cast", (is_cast, "x"), "x", tracks=CAST_OPS, retype=exact_type
)
rewrites.specialize(local_useless_cast)
rewrites.canonicalize(local_useless_cast)


def _loses_no_value(var: Variable) -> bool:
    """True if ``var`` is a cast to a dtype holding every value of its input's."""
    return np.can_cast(var.owner.inputs[0].type.dtype, var.type.dtype, casting="safe")


# ``cast(cast(x, t1), t2) -> cast(x, t2)``: ``as_type_of`` casts ``x`` to ``t2`` (or not at all).
local_cast_cast = pattern_rewriter(
    "local_cast_cast",
    (is_cast, {"pattern": (is_cast, "x"), "constraint": _loses_no_value}),
    "x",
    allow_multiple_clients=True,
    tracks=CAST_OPS,
    retype=as_type_of,
)
rewrites.specialize(local_cast_cast)
rewrites.canonicalize(local_cast_cast)

local_useless_rebroadcast = pattern_rewriter(
    "local_useless_rebroadcast", (Rebroadcast, "x"), "x", retype=exact_type
)
rewrites.specialize(local_useless_rebroadcast)
rewrites.canonicalize(local_useless_rebroadcast)


@rewrites.canonicalize
@node_rewriter([Rebroadcast])
def local_rebroadcast_rebroadcast(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``Rebroadcast{a}(Rebroadcast{b}(x)) -> Rebroadcast{a, b}(x)``."""
    (inp,) = node.inputs
    if inp.owner is None or not isinstance(inp.owner.op, Rebroadcast):
        return None
    x = inp.owner.inputs[0]
    out = node.outputs[0]
    changes = [
        (i, b)
        for i, (b, xb) in enumerate(zip(out.type.broadcastable, x.type.broadcastable, strict=True))
        if b != xb
    ]
    return [Rebroadcast(*changes)(x) if changes else x]


# ------------------------------------------------------------------ trivial Elemwise


@rewrites.canonicalize
@rewrites.specialize
@node_rewriter([tm.add, tm.mul, tm.identity, tm.eq, tm.neq])
def local_useless_elemwise(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``add(x)``, ``mul(x)``, ``identity(x)`` -> ``x``; ``eq(x, x) -> 1``, ``neq(x, x) -> 0``.

    The comparisons only for integers (``nan == nan`` is false).
    """
    op = scalar_op_of(node)
    if op is None:
        return None
    out = node.outputs[0]
    ins = node.inputs
    if isinstance(op, ps.Add | ps.Mul | ps.Identity) and len(ins) == 1:
        return as_replacement(ins[0], out)
    if isinstance(op, ps.EQ | ps.NEQ) and ins[0] is ins[1] and _no_nan(ins[0]):
        const = broadcast_constant(isinstance(op, ps.EQ), out.type.dtype, out.type.ndim)
        return as_replacement(const, out, models=[ins[0]])
    return None


def _no_nan(x: Variable) -> bool:
    """True for dtypes without NaN (``x == x`` is then always true)."""
    return x.type.dtype in discrete_dtypes


# ------------------------------------------------------------------ fill


@rewrites.canonicalize("shape_unsafe")
@node_rewriter([Elemwise])
def local_fill_sink(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``f(fill(a, b), c) -> fill(a, f(b, c))``, the fill kept only if ``a`` gives the shape."""
    op = scalar_op_of(node)
    if op is None or isinstance(op, ps.Second) or node.op.inplace_pattern:
        return None
    models, inputs = [], []
    for i in node.inputs:
        ins = elemwise_inputs(i, ps.Second)
        if ins is None:
            inputs.append(i)
        else:
            models.append(ins[0])
            inputs.append(ins[1])
    if not models:
        return None
    out = node.outputs[0]
    return as_replacement(node.op(*inputs), out, models=models)


# ``fill(x, y) -> y`` only where ``y`` already has the result's type (so its shape too).
local_useless_fill = pattern_rewriter(
    "local_useless_fill", (tm.second, "x", "y"), "y", retype=exact_type
)
rewrites.specialize("shape_unsafe")(local_useless_fill)
rewrites.stabilize("shape_unsafe")(local_useless_fill)
rewrites.canonicalize("shape_unsafe")(local_useless_fill)


# ------------------------------------------------------------------ gradient blocks


# ``disconnected_grad(x) -> x``, ``zero_grad(x) -> x``: they only act on gradients.
local_remove_grad_block = rewrites.canonicalize(
    pattern_rewriter("local_remove_grad_block", (GradBlock, "x"), "x", retype=exact_type)
)


# ------------------------------------------------------------------ constant inputs

#: The output-type rules under which an Elemwise upcasts its inputs anyway.
_UPCASTING = (ps.upcast_out, ps.upgrade_to_float)


@rewrites.canonicalize
@rewrites.specialize
@node_rewriter([Elemwise])
def local_upcast_elemwise_constant_inputs(fgraph: Any, node: Apply) -> list[Variable] | None:
    """Give the constant inputs of an upcasting Elemwise its output's dtype (Theano's rewrite).

    The op converts them on every call anyway; done once here, ``maximum(x, 0)`` over
    float64 reads ``TensorConstant{(1, 1) of 0.0}`` as in Theano, and ``1 - x`` merges with
    ``1.0 - x``. Only ops whose output type is the inputs' upcast (``maximum``, ``add``, ...),
    not comparisons or ``switch``, whose inputs do not take the output's dtype.
    """
    if len(node.outputs) != 1:
        return None
    if getattr(node.op.scalar_op, "output_types_preference", None) not in _UPCASTING:
        return None
    out = node.outputs[0]
    dtype = out.type.dtype
    new_inputs = []
    for inp in node.inputs:
        value = None if inp.type.dtype == dtype else scalar_constant(inp)
        if value is not None:
            inp = broadcast_constant(value, dtype, inp.type.ndim, fgraph)
        elif inp.type.dtype != dtype and isinstance(inp, Constant):
            inp = type(inp)(inp.type.clone(dtype=dtype), np.asarray(inp.data).astype(dtype))
        new_inputs.append(inp)
    if all(a is b for a, b in zip(new_inputs, node.inputs, strict=True)):
        return None
    new = node.op(*new_inputs)
    return [new] if new.type == out.type else None
