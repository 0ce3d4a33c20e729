"""Canonical arithmetic: flat add/mul, one form of negation, cancelled terms, folded constants.

The two canonizers (Theano's ``local_mul_canonizer`` and ``local_add_canonizer``) see a tree
of ``mul``/``true_div`` (or ``add``/``sub``/``neg``) nodes as a numerator and a denominator
list of terms, cancel the terms present in both (``x * y / y -> x``,
``(x * y) / (y * z) -> x / z``, ``x - x -> 0``), fold the constants into one placed first
(``2 * x * 3 -> 6 * x``, ``x / 2 -> 0.5 * x``) and rebuild ``mul(num) / mul(denum)``. They
only fire where that changes something, and only at the top of a tree, so each tree costs
one walk over its terms. Flattening nested add/mul is ``local_add_mul_fusion``'s job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import opgraph.scalar.basic as ps
import opgraph.tensor.math as tm
from opgraph.graph.basic import Apply, Variable
from opgraph.rewriting import node_rewriter, pattern_rewriter
from opgraph.scalar.type import discrete_dtypes, uint_dtypes
from opgraph.tensor.elemwise import Elemwise
from opgraph_optimizers.canonicalize.utils import (
    as_type_of,
    broadcast_constant,
    elemwise_inputs,
    is_neg,
    same_terms,
    scalar_constant,
    scalar_op_of,
)
from opgraph_optimizers.registry import rewrites

__all__ = [
    "Canonizer",
    "local_add_canonizer",
    "local_add_mul_fusion",
    "local_add_zero",
    "local_mul_canonizer",
    "local_mul_one",
    "local_neg_neg",
    "local_neg_to_mul",
    "local_pow_canonicalize",
]


# ------------------------------------------------------------------ identities (patterns)

local_neg_neg = rewrites.canonicalize(
    pattern_rewriter("local_neg_neg", (tm.neg.op, (tm.neg.op, "x")), "x")
)
local_mul_one = rewrites.canonicalize(pattern_rewriter("local_mul_one", (tm.mul.op, "x", 1), "x"))
local_add_zero = rewrites.canonicalize(pattern_rewriter("local_add_zero", (tm.add.op, "x", 0), "x"))


# ------------------------------------------------------------------ the canonizers


def _continuous(dtype: str) -> bool:
    return dtype not in discrete_dtypes


class Canonizer:
    """Numerator/denominator normal form of a commutative ``main`` op (Theano's Canonizer).

    Parameters
    ----------
    main, inverse, reciprocal
        Scalar op classes: ``Mul``, ``TrueDiv`` and None; or ``Add``, ``Sub`` and ``Neg``.
    main_fn, inverse_fn, reciprocal_fn
        The tensor functions building them.
    neutral
        The neutral element of ``main`` (1 or 0).
    fold
        ``fold(num_values, denum_values, dtype) -> value``: the constants folded into one.
    """

    def __init__(
        self,
        main: type,
        inverse: type,
        reciprocal: type | None,
        main_fn: Callable[..., Variable],
        inverse_fn: Callable[..., Variable],
        reciprocal_fn: Callable[..., Variable] | None,
        neutral: int,
        fold: Callable[[list[Any], list[Any], str], Any],
    ) -> None:
        self.classes = (main, inverse) + ((reciprocal,) if reciprocal is not None else ())
        self.main, self.inverse, self.reciprocal = main, inverse, reciprocal
        self.main_fn, self.inverse_fn, self.reciprocal_fn = main_fn, inverse_fn, reciprocal_fn
        self.neutral = neutral
        self.fold = fold

    # -- reading a tree
    def _node_terms(self, var: Variable) -> list[tuple[Variable, bool]] | None:
        """``[(input, on the same side)]`` of the node computing ``var`` if it is in this
        canonizer's domain (``mul(-1, x)`` counts as a negation for the add canonizer)."""
        op = scalar_op_of(var)
        if op is None or var.owner.op.inplace_pattern:  # type: ignore[union-attr]
            return None
        ins = var.owner.inputs  # type: ignore[union-attr]
        if isinstance(op, self.main):
            return [(i, True) for i in ins]
        if isinstance(op, self.inverse):
            return [(ins[0], True), (ins[1], False)]
        if self.reciprocal is not None:
            if isinstance(op, self.reciprocal):
                return [(ins[0], False)]
            inner = is_neg(var)
            if inner is not None:
                return [(inner, False)]
        return None

    def _expandable(self, var: Variable, dtype: str) -> list[tuple[Variable, bool]] | None:
        """The terms of ``var`` if a tree of dtype ``dtype`` may look inside it.

        Not through a discrete node into a tree of another dtype: integer overflow there
        is part of the value.
        """
        vd = var.type.dtype
        if vd == "bool" or (vd != dtype and not _continuous(vd)):
            return None
        return self._node_terms(var)

    def terms(self, out: Variable) -> tuple[list[Variable], list[Variable]]:
        """The numerator and denominator terms of the tree rooted at ``out``, in order."""
        num: list[Variable] = []
        denum: list[Variable] = []
        dtype = out.type.dtype
        stack: list[tuple[Variable, bool]] = [(out, True)]
        while stack:
            var, positive = stack.pop()
            children = self._node_terms(var) if var is out else self._expandable(var, dtype)
            if children is None:
                (num if positive else denum).append(var)
                continue
            stack.extend((v, same == positive) for v, same in reversed(children))
        return num, denum

    def is_top(self, out: Variable) -> bool:
        """False if a client of ``out`` is a node of the same tree (which handles it)."""
        for client, _ in getattr(out, "clients", ()):
            if isinstance(client, str):
                continue
            if (
                len(client.outputs) == 1
                and self._node_terms(client.outputs[0]) is not None
                and self._expandable(out, client.outputs[0].type.dtype) is not None
            ):
                return False
        return True

    # -- simplifying
    def simplify(
        self, num: Sequence[Variable], denum: Sequence[Variable], dtype: str
    ) -> tuple[list[Variable | Any], list[Variable]]:
        """Cancel terms present on both sides and fold the scalar constants.

        The folded constant (a NumPy value, absent if it is the neutral element) comes
        first in the returned numerator.
        """
        kept: list[Variable | None] = list(num)
        where: dict[int, list[int]] = {}
        for k, v in enumerate(kept):
            where.setdefault(id(v), []).append(k)
        new_denum = []
        for v in denum:
            slots = where.get(id(v))
            if slots:
                kept[slots.pop()] = None
            else:
                new_denum.append(v)
        num_ct, denum_ct, new_num, rest_denum = [], [], [], []
        for v in kept:
            if v is None:
                continue
            c = scalar_constant(v)
            (new_num if c is None else num_ct).append(v if c is None else c)
        for v in new_denum:
            c = scalar_constant(v)
            (rest_denum if c is None else denum_ct).append(v if c is None else c)
        head: list[Any] = []
        if num_ct or denum_ct:
            value = np.asarray(self.fold(num_ct, denum_ct, dtype)).astype(dtype)
            if value != self.neutral:
                head = [value]
        if not head and not new_num and rest_denum and self.reciprocal is None:
            head = [np.asarray(self.neutral).astype(dtype)]  # 1 / x needs its 1
        return head + new_num, rest_denum

    # -- rebuilding
    def _combine(self, terms: list[Variable], dtype: str) -> Variable | None:
        if not terms:
            return None
        if len(terms) == 1:
            return terms[0]
        if _continuous(dtype):  # a discrete product of several terms could overflow
            terms = [t if _continuous(t.type.dtype) else tm.cast(t, dtype) for t in terms]
        return self.main_fn(*terms)

    def build(self, num: list[Any], denum: list[Variable], out: Variable) -> Variable:
        """``main(num) inverse main(denum)`` (constants made of ``out``'s dtype)."""
        dtype, ndim = out.type.dtype, out.type.ndim
        num = [v if isinstance(v, Variable) else broadcast_constant(v, dtype, ndim) for v in num]
        n, d = self._combine(num, dtype), self._combine(denum, dtype)
        neutral = broadcast_constant(self.neutral, dtype, ndim)
        if d is None:
            return n if n is not None else neutral
        if n is None:
            if self.reciprocal_fn is not None:
                return self.reciprocal_fn(d)
            return self.inverse_fn(neutral, d)
        return self.inverse_fn(n, d)

    def transform(self, node: Apply) -> list[Variable] | None:
        """The canonical form of ``node``'s output, or None if it already is canonical."""
        if len(node.outputs) != 1:
            return None
        out = node.outputs[0]
        if out.type.dtype == "bool" or self._node_terms(out) is None or not self.is_top(out):
            return None
        num, denum = self.terms(out)
        new_num, new_denum = self.simplify(num, denum, out.type.dtype)
        if _unchanged(num, denum, new_num, new_denum):
            return None
        new = as_type_of(self.build(new_num, new_denum, out), out, models=num + denum)
        return None if new is None else [new]


def _unchanged(
    num: list[Variable], denum: list[Variable], new_num: list[Any], new_denum: list[Variable]
) -> bool:
    """True if simplifying found nothing to do: the same terms, in the same order.

    A single constant (``x * 2``) may stay where it is and keep its dtype, as long as it
    holds the folded value (Theano's rule): only cancelled terms, folded constants or a
    dropped neutral element count as a change.
    """
    if not same_terms(denum, new_denum) or len(num) != len(new_num):
        return False
    if not new_num or isinstance(new_num[0], Variable):
        return same_terms(num, new_num)
    value = new_num[0]
    consts = [k for k, v in enumerate(num) if scalar_constant(v) is not None]
    if len(consts) != 1 or any(scalar_constant(v) is not None for v in denum):
        return False
    (k,) = consts
    c = scalar_constant(num[k])
    with np.errstate(all="ignore"):
        if not bool(np.asarray(c).astype(value.dtype) == value):
            return False
    return same_terms(num[:k] + num[k + 1 :], new_num[1:])


def _fold_mul(num: list[Any], denum: list[Any], dtype: str) -> Any:
    value = np.ones((), dtype=dtype)
    with np.errstate(all="ignore"):
        for c in num:
            value = (value * np.asarray(c).astype(dtype)).astype(dtype)
        for c in denum:
            value = (value / np.asarray(c).astype(dtype)).astype(dtype)
    return value


def _fold_add(num: list[Any], denum: list[Any], dtype: str) -> Any:
    value = np.zeros((), dtype=dtype)
    with np.errstate(all="ignore"):
        for c in num:
            value = (value + np.asarray(c).astype(dtype)).astype(dtype)
        for c in denum:
            value = (value - np.asarray(c).astype(dtype)).astype(dtype)
    return value


mul_canonizer = Canonizer(
    ps.Mul, ps.TrueDiv, None, tm.mul, tm.true_div, None, neutral=1, fold=_fold_mul
)
add_canonizer = Canonizer(ps.Add, ps.Sub, ps.Neg, tm.add, tm.sub, tm.neg, neutral=0, fold=_fold_add)


@rewrites.canonicalize
@node_rewriter([Elemwise])
def local_mul_canonizer(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``(x * y) / (y * z) -> x / z``; ``x * 1 -> x``; ``2 * x * 3 -> 6 * x``."""
    return mul_canonizer.transform(node)


@rewrites.canonicalize
@node_rewriter([Elemwise])
def local_add_canonizer(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``(x + y) - (y + z) -> x - z``; ``x - x -> 0``; ``x + 0 -> x``."""
    return add_canonizer.transform(node)


# ------------------------------------------------------------------ flattening, negation


@rewrites.canonicalize
@node_rewriter([Elemwise])
def local_add_mul_fusion(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``add(add(a, b), c) -> add(a, b, c)`` (and ``mul``), through every single-client level."""
    op = scalar_op_of(node)
    if not isinstance(op, ps.Add | ps.Mul) or node.op.inplace_pattern:
        return None
    out = node.outputs[0]
    if out.type.dtype == "bool":
        return None
    cls = ps.Add if isinstance(op, ps.Add) else ps.Mul
    inputs: list[Variable] = []
    fused = False
    stack = list(reversed(node.inputs))
    while stack:
        var = stack.pop()
        ins = elemwise_inputs(var, cls)
        if (
            ins is not None
            and var.type.dtype == out.type.dtype
            and not var.owner.op.inplace_pattern  # type: ignore[union-attr]
            and len(getattr(var, "clients", ())) == 1
        ):
            stack.extend(reversed(ins))
            fused = True
        else:
            inputs.append(var)
    if not fused:
        return None
    new = as_type_of(node.op(*inputs), out)
    return None if new is None else [new]


@rewrites.canonicalize
@node_rewriter([Elemwise])
def local_neg_to_mul(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``neg(x) -> mul(-1, x)``: the one form of negation canonicalize works with."""
    ins = elemwise_inputs(node, ps.Neg)
    if ins is None:
        return None
    out = node.outputs[0]
    dtype = out.type.dtype
    if dtype == "bool" or dtype in uint_dtypes or ins[0].type != out.type:
        return None
    return [tm.mul(broadcast_constant(-1, dtype, out.type.ndim), ins[0])]


@rewrites.canonicalize
@node_rewriter([Elemwise])
def local_pow_canonicalize(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``x ** 1 -> x``; ``x ** 0 -> ones_like(x)``."""
    ins = elemwise_inputs(node, ps.Pow)
    if ins is None:
        return None
    x, y = ins
    c = scalar_constant(y, broadcastable_only=False)
    out = node.outputs[0]
    if c is None or c not in (0, 1):
        return None
    new = x if c == 1 else broadcast_constant(1, out.type.dtype, out.type.ndim)
    result = as_type_of(new, out, models=[x, y])
    return None if result is None else [result]
