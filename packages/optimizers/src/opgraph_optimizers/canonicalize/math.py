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
from opgraph.scalar.type import uint_dtypes
from opgraph_optimizers.canonicalize.utils import (
    as_replacement,
    broadcast_constant,
    continuous,
    elemwise_inputs,
    has_one_client,
    is_neg,
    scalar_constant,
    scalar_op_of,
)
from opgraph_optimizers.registry import rewrites

__all__ = [
    "Canonizer",
    "local_add_canonizer",
    "local_add_mul_fusion",
    "local_mul_canonizer",
    "local_neg_neg",
    "local_neg_to_mul",
    "local_pow_canonicalize",
]


# ------------------------------------------------------------------ identities (patterns)
# ``x * 1 -> x`` and ``x + 0 -> x`` are the canonizers' (a neutral constant is dropped).

local_neg_neg = rewrites.canonicalize(
    pattern_rewriter("local_neg_neg", (tm.neg, (tm.neg, "x")), "x")
)


# ------------------------------------------------------------------ the canonizers


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
        if vd == "bool" or (vd != dtype and not continuous(vd)):
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
            if var.owner is None:
                children = None
            elif var is out:
                children = self._node_terms(var)
            else:
                children = self._expandable(var, dtype)
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
    ) -> tuple[list[Variable | Any], list[Variable], bool]:
        """Cancel terms present on both sides and fold the scalar constants.

        Returns the new numerator (the folded constant, a NumPy value, first; absent if it
        is the neutral element), the new denominator, and whether anything changed. A
        single constant of the numerator that is not the neutral element is no change, even
        if it sits elsewhere or has another dtype (Theano's rule): only cancelled terms,
        several constants folded into one, a constant divided out or a neutral element
        dropped are.
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
        changed = len(new_denum) != len(denum)
        num_ct, denum_ct, new_num, rest_denum = [], [], [], []
        for v in kept:
            if v is not None:
                c = scalar_constant(v)
                (new_num if c is None else num_ct).append(v if c is None else c)
        for v in new_denum:
            c = scalar_constant(v)
            (rest_denum if c is None else denum_ct).append(v if c is None else c)
        head: list[Any] = []
        n_const = len(num_ct) + len(denum_ct)
        if n_const == 1 and num_ct and not changed and dtype[0] in "fiu":
            # The common case, already canonical when the one constant comes first with the
            # output's dtype and is not the neutral element: then folding it would give it
            # back unchanged (real and integer dtypes), so it is not folded.
            first = num_ct[0]
            if (
                scalar_constant(num[0]) is not None
                and first.dtype == np.dtype(dtype)
                and first != self.neutral
            ):
                return [np.asarray(first), *new_num], rest_denum, False
        if n_const:
            value = np.asarray(self.fold(num_ct, denum_ct, dtype)).astype(dtype)
            if value != self.neutral:  # NaN too
                head = [value]
        needs_one = not head and not new_num and rest_denum and self.reciprocal is None
        if needs_one:
            head = [np.asarray(self.neutral).astype(dtype)]  # 1 / x needs its 1
        if n_const > 1 or denum_ct or (n_const == 0 and needs_one):
            changed = True
        elif n_const == 1 and not needs_one and not head:
            changed = True  # the neutral element dropped
        elif head and not changed:
            # Theano's canonical form: the one constant first, of the output's dtype.
            first = scalar_constant(num[0]) if num else None
            if first is None or np.asarray(first).dtype != np.dtype(dtype):
                changed = True
        return head + new_num, rest_denum, changed

    # -- rebuilding
    def _combine(self, terms: list[Variable], dtype: str) -> Variable | None:
        """``main(*terms)``, computed in ``dtype`` where a term of another dtype would make
        it differ: bool arithmetic, or a discrete product that could overflow."""
        if not terms:
            return None
        several = len(terms) > 1
        terms = [
            tm.cast(t, dtype)
            if t.type.dtype != dtype
            and (
                t.type.dtype == "bool"
                or (several and continuous(dtype) and not continuous(t.type.dtype))
            )
            else t
            for t in terms
        ]
        return self.main_fn(*terms) if several else terms[0]

    def build(
        self, num: list[Any], denum: list[Variable], out: Variable, fgraph: Any = None
    ) -> Variable:
        """``main(num) inverse main(denum)`` (constants made of ``out``'s dtype; with
        ``fgraph``, equal constants are shared within that graph)."""
        dtype, ndim = out.type.dtype, out.type.ndim
        num = [
            v if isinstance(v, Variable) else broadcast_constant(v, dtype, ndim, fgraph)
            for v in num
        ]
        n, d = self._combine(num, dtype), self._combine(denum, dtype)
        if d is None:
            return n if n is not None else broadcast_constant(self.neutral, dtype, ndim, fgraph)
        if n is None:
            if self.reciprocal_fn is not None:
                return self.reciprocal_fn(d)
            return self.inverse_fn(broadcast_constant(self.neutral, dtype, ndim, fgraph), d)
        return self.inverse_fn(n, d)

    def _constant_last(self, node: Apply, out: Variable, fgraph: Any) -> Variable | None:
        """``main(c, x)`` for the commonest tree, ``main(x, c)`` (``x + 0.5``, ``x * 2``): what
        :meth:`terms`, :meth:`simplify` and :meth:`build` give it, built directly.

        Only when nothing else could change: ``x`` has the output's type and is neither a
        constant nor a tree this canonizer would look into; ``c`` is a scalar constant
        (through DimShuffles) whose value in the output's dtype is not NaN nor the neutral
        element. The node is rebuilt with the same op and output type (``main`` is
        commutative and the constant is broadcastable, so ``make_node`` would infer it).
        None otherwise (the general path decides).
        """
        ins = node.inputs
        op = node.op
        if len(ins) != 2 or not isinstance(scalar_op_of(node), self.main):
            return None
        x, c = ins
        dtype, ndim = out.type.dtype, out.type.ndim
        if x.type != out.type:
            return None  # the general path may cast x
        value = scalar_constant(c)
        if value is None:
            return None
        with np.errstate(all="ignore"):
            value = np.asarray(value).astype(dtype)  # what the folding gives
        if np.isnan(value) or value == self.neutral:
            return None  # NaN, the neutral element: the general path
        if scalar_constant(x) is not None or (
            x.owner is not None and self._expandable(x, dtype) is not None
        ):
            return None
        first = broadcast_constant(value, dtype, ndim, fgraph)
        # A copy of ``out`` (type, name, creation trace): what the replacement gets anyway.
        return Apply(op, [first, x], [out.clone()]).outputs[0]

    def transform(self, node: Apply, fgraph: Any = None) -> list[Variable] | None:
        """The canonical form of ``node``'s output, or None if it already is canonical."""
        if len(node.outputs) != 1:
            return None
        out = node.outputs[0]
        if out.type.dtype == "bool" or self._node_terms(out) is None or not self.is_top(out):
            return None
        quick = self._constant_last(node, out, fgraph)
        if quick is not None:
            return [quick]
        num, denum = self.terms(out)
        new_num, new_denum, changed = self.simplify(num, denum, out.type.dtype)
        if not changed:
            return None
        return as_replacement(self.build(new_num, new_denum, out, fgraph), out, models=num + denum)


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
@node_rewriter([tm.mul, tm.true_div])
def local_mul_canonizer(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``(x * y) / (y * z) -> x / z``; ``x * 1 -> x``; ``2 * x * 3 -> 6 * x``."""
    return mul_canonizer.transform(node, fgraph)


@rewrites.canonicalize
@node_rewriter([tm.add, tm.sub, tm.neg, tm.mul])
def local_add_canonizer(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``(x + y) - (y + z) -> x - z``; ``x - x -> 0``; ``x + 0 -> x``."""
    return add_canonizer.transform(node, fgraph)


# ------------------------------------------------------------------ flattening, negation


@rewrites.canonicalize
@node_rewriter([tm.add, tm.mul])
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
            and has_one_client(var)
        ):
            stack.extend(reversed(ins))
            fused = True
        else:
            inputs.append(var)
    if not fused:
        return None
    return as_replacement(node.op(*inputs), out)


@rewrites.canonicalize
@node_rewriter([tm.neg])
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
@node_rewriter([tm.pow])
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
    return as_replacement(new, out, models=[x, y])
