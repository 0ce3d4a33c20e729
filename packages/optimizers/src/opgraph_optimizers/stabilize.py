"""The stabilize stage: expressions that overflow or lose precision, rewritten to stable forms.

``log(1 + x) -> log1p(x)``, ``exp(x) - 1 -> expm1(x)``, ``log1p(exp(x)) -> softplus(x)``,
the sigmoid family (``1 / (1 + exp(-x)) -> sigmoid(x)``, ``1 - sigmoid(x) -> sigmoid(-x)``,
``exp(x) * sigmoid(-x) -> sigmoid(x)``, ``log(sigmoid(x)) -> -softplus(-x)``,
``log(1 - sigmoid(x)) -> -softplus(x)``),
``log(sum(exp(x))) -> max + log(sum(exp(x - max)))``, ``log(softmax(x)) -> log_softmax(x)``
and categorical cross-entropy of a softmax into the fused op of ``tensor.nnet`` with its
stable gradient. All are tagged ``stability`` (and ``fast_run``).

The patterns match canonicalize's output, where ``-x`` is ``mul(-1, x)`` and constants are
broadcastable constants (``x + 1`` is ``add(TensorConstant{(1,) of 1.0}, x)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import opgraph.scalar.basic as ps
import opgraph.tensor.math as tm
from opgraph.graph.basic import Apply, Variable
from opgraph.rewriting import node_rewriter, pattern_rewriter
from opgraph.scalar.type import float_dtypes
from opgraph.tensor.elemwise import CAReduce, DimShuffle, Sum
from opgraph.tensor.nnet.basic import LogSoftmax, Softmax, SoftmaxGrad
from opgraph.tensor.nnet.crossentropy import (
    CrossentropyCategorical1HotGrad,
    crossentropy_softmax_1hot_with_bias_dx,
)
from opgraph_optimizers.canonicalize.math import mul_canonizer
from opgraph_optimizers.canonicalize.utils import (
    as_type_of,
    broadcast_constant,
    elemwise_inputs,
    has_value,
    is_neg,
    negate,
)
from opgraph_optimizers.registry import rewrites

__all__ = [
    "local_1msigmoid",
    "local_crossentropy_softmax_grad",
    "local_exp_over_1_plus_exp",
    "local_expm1",
    "local_log1msigmoid",
    "local_log1p",
    "local_log1p_exp_to_softplus",
    "local_log_sigmoid",
    "local_log_softmax",
    "local_log_softmax_grad",
    "local_log_sum_exp",
    "local_sigm_times_exp",
    "values_eq_approx_stabilized",
]


def _is_one(var: Variable) -> bool:
    return has_value(var, 1)


def values_eq_approx_stabilized(old: Any, new: Any) -> bool:
    """How a checker (DEBUG_MODE) should compare a stable value with the one it replaced.

    Where the replaced expression overflowed (``log(sigmoid(-1000)) = -inf``, NaN) nothing
    is compared: the stable value being finite there is the point. Elsewhere the replaced
    value may have lost most of its digits to cancellation (``log(1 - sigmoid(35))`` is off
    by 0.4 %), so the two need only agree to 5 %, which still catches a wrong sign or factor.
    """
    old, new = np.asarray(old), np.asarray(new)
    if old.shape != new.shape:
        return False
    finite = np.isfinite(old)
    return bool(np.allclose(old[finite], new[finite], rtol=5e-2, atol=1e-6))


def _stable(new: Variable, out: Variable, models: Sequence[Variable] = ()) -> Variable | None:
    """``new`` given ``out``'s type, or None (the ``retype`` of the stability patterns).

    The replacement is tagged with :func:`values_eq_approx_stabilized` (Theano's
    ``tag.values_eq_approx``), the comparison a checker should use for it.
    """
    result = as_type_of(new, out, models)
    if result is not None:
        result.tag.values_eq_approx = values_eq_approx_stabilized
    return result


def _replace(
    new: Variable, out: Variable, models: Sequence[Variable] = ()
) -> list[Variable] | None:
    """``[new]`` given ``out``'s type (see :func:`_stable`), or None."""
    result = _stable(new, out, models)
    return None if result is None else [result]


def _float(var: Variable) -> bool:
    return var.type.dtype in float_dtypes


def _float_out(node: Apply) -> bool:
    return _float(node.outputs[0])


# ------------------------------------------------------------------ log1p, expm1, softplus


@rewrites.stabilize("stability")
@rewrites.specialize("stability")
@node_rewriter([tm.log])
def local_log1p(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``log(1 + x) -> log1p(x)``; ``log(1 - x) -> log1p(-x)``."""
    ins = elemwise_inputs(node, ps.Log)
    if ins is None or not _float_out(node):
        return None
    (arg,) = ins
    terms = elemwise_inputs(arg, ps.Add)
    if terms is not None:
        ones = [k for k, t in enumerate(terms) if _is_one(t)]
        if not ones:
            return None
        rest = terms[: ones[0]] + terms[ones[0] + 1 :]
        if not rest:
            return None
        x = rest[0] if len(rest) == 1 else tm.add(*rest)
        return _replace(tm.log1p(x), node.outputs[0], models=terms)
    terms = elemwise_inputs(arg, ps.Sub)
    if terms is not None and _is_one(terms[0]):
        return _replace(tm.log1p(negate(terms[1])), node.outputs[0], models=terms)
    return None


@rewrites.stabilize("stability")
@rewrites.specialize("stability")
@node_rewriter([tm.sub, tm.add])
def local_expm1(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``exp(x) - 1 -> expm1(x)`` (also ``add(-1, exp(x), y) -> add(expm1(x), y)``)."""
    if not _float_out(node):
        return None
    out = node.outputs[0]
    ins = elemwise_inputs(node, ps.Sub)
    if ins is not None:
        inner = elemwise_inputs(ins[0], ps.Exp)
        if inner is None or not _is_one(ins[1]):
            return None
        return _replace(tm.expm1(inner[0]), out, models=ins)
    ins = elemwise_inputs(node, ps.Add)
    if ins is None:
        return None
    minus = [k for k, t in enumerate(ins) if has_value(t, -1)]
    exps = [k for k, t in enumerate(ins) if elemwise_inputs(t, ps.Exp) is not None]
    if not minus or not exps:
        return None
    e = ins[exps[0]]
    rest = [t for k, t in enumerate(ins) if k not in (minus[0], exps[0])]
    new = tm.expm1(e.owner.inputs[0])  # type: ignore[union-attr]
    if rest:
        new = tm.add(new, *rest)
    return _replace(new, out, models=ins)


# ``log1p(exp(x)) -> softplus(x)``: no overflow for large x.
local_log1p_exp_to_softplus = pattern_rewriter(
    "local_log1p_exp_to_softplus",
    {"pattern": (tm.log1p, (tm.exp, "x")), "constraint": _float},
    (tm.softplus, "x"),
    allow_multiple_clients=True,
    retype=_stable,
)
rewrites.specialize("stability")(local_log1p_exp_to_softplus)
rewrites.stabilize("stability")(local_log1p_exp_to_softplus)


# ------------------------------------------------------------------ sigmoid


def _one_plus_exp(var: Variable) -> Variable | None:
    """``z`` if ``var`` is ``1 + exp(z)``, else None."""
    terms = elemwise_inputs(var, ps.Add)
    if terms is None or len(terms) != 2:
        return None
    for k in (0, 1):
        inner = elemwise_inputs(terms[1 - k], ps.Exp)
        if _is_one(terms[k]) and inner is not None:
            return inner[0]
    return None


def _squares_split(terms: list[Variable]) -> list[Variable]:
    """``terms`` with each ``sqr(t)`` (or ``t ** 2``) written as ``t, t``."""
    out: list[Variable] = []
    for t in terms:
        ins = elemwise_inputs(t, ps.Sqr)
        if ins is None:
            ins = elemwise_inputs(t, ps.Pow)
            if ins is not None and has_value(ins[1], 2) and ins[0].type == t.type:
                ins = ins[:1]
            else:
                ins = None
        out.extend([ins[0], ins[0]] if ins is not None else [t])
    return out


@rewrites.stabilize("stability")
@rewrites.specialize("stability")
@node_rewriter([tm.mul, tm.true_div])
def local_exp_over_1_plus_exp(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``exp(x) / (1 + exp(x)) -> sigmoid(x)``; ``c / (1 + exp(x)) -> c * sigmoid(-x)``.

    Anywhere in a product: each ``1 + exp(x)`` of the denominator (``sqr(1 + exp(x))``
    counting twice) takes an ``exp(x)`` of the numerator into ``sigmoid(x)``, or becomes
    ``sigmoid(-x)``. So ``1 / (1 + exp(-x)) -> sigmoid(x)``, and the gradient of a sigmoid
    written out, ``exp(-x) / sqr(1 + exp(-x))``, becomes ``sigmoid(-x) * sigmoid(x)``.
    """
    out = node.outputs[0]
    if not _float_out(node) or not mul_canonizer.is_top(out):
        return None
    num, denum = mul_canonizer.terms(out)
    new_num = list(num)
    rest: list[Variable] = []
    for d in _squares_split(denum):
        z = _one_plus_exp(d)
        if z is None:
            rest.append(d)
            continue
        for k, t in enumerate(new_num):
            exp_of = elemwise_inputs(t, ps.Exp)
            if exp_of is not None and exp_of[0] is z:
                new_num[k] = tm.sigmoid(z)
                break
        else:
            new_num.append(tm.sigmoid(negate(z)))
    if len(rest) == len(_squares_split(denum)):
        return None
    new_num = [t for t in new_num if not _is_one(t)]
    new = mul_canonizer.build(new_num, rest, out)
    return _replace(new, out, models=num + denum)


def _sigmoid_arg(var: Variable) -> Variable | None:
    ins = elemwise_inputs(var, ps.Sigmoid)
    return None if ins is None else ins[0]


# ``1 - sigmoid(x) -> sigmoid(-x)``: no cancellation for large x.
local_1msigmoid = pattern_rewriter(
    "local_1msigmoid",
    {
        "pattern": (tm.sub, {"pattern": "one", "constraint": _is_one}, (tm.sigmoid, "x")),
        "constraint": _float,
    },
    (tm.sigmoid, (negate, "x")),
    # also where sigmoid(x) has other readers (Theano's did not fire there): the logistic
    # regression tutorial's gradient of log(1 - p), p read by log(p) too, stays finite
    allow_multiple_clients=True,
    retype=_stable,
)
rewrites.specialize("stability")(local_1msigmoid)
rewrites.stabilize("stability")(local_1msigmoid)

# ``log(sigmoid(x)) -> -softplus(-x)``: finite for very negative x.
local_log_sigmoid = pattern_rewriter(
    "local_log_sigmoid",
    (tm.log, (tm.sigmoid, "x")),
    (tm.neg, (tm.softplus, (negate, "x"))),
    allow_multiple_clients=True,
    retype=_stable,
)
rewrites.specialize("stability")(local_log_sigmoid)
rewrites.stabilize("stability")(local_log_sigmoid)


@rewrites.stabilize("stability")
@rewrites.specialize("stability")
@node_rewriter([tm.log, tm.log1p])
def local_log1msigmoid(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``log(1 - sigmoid(x)) -> -softplus(x)``; ``log1p(-sigmoid(x)) -> -softplus(x)``."""
    ins = elemwise_inputs(node, ps.Log)
    if ins is not None:
        terms = elemwise_inputs(ins[0], ps.Sub)
        if terms is None or not _is_one(terms[0]):
            return None
        x = _sigmoid_arg(terms[1])
        models = terms
    else:
        ins = elemwise_inputs(node, ps.Log1p)
        neg = is_neg(ins[0]) if ins is not None else None
        x = _sigmoid_arg(neg) if neg is not None else None
        models = []
    if x is None:
        return None
    return _replace(tm.neg(tm.softplus(x)), node.outputs[0], models=models)


@rewrites.stabilize("stability")
@rewrites.specialize("stability")
@node_rewriter([tm.mul])
def local_sigm_times_exp(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``exp(x) * sigmoid(-x) -> sigmoid(x)`` (``exp`` overflows where the product does not)."""
    ins = elemwise_inputs(node, ps.Mul)
    if ins is None or not _float_out(node):
        return None
    for k, e in enumerate(ins):
        exp_of = elemwise_inputs(e, ps.Exp)
        if exp_of is None:
            continue
        z = exp_of[0]
        for j, t in enumerate(ins):
            w = _sigmoid_arg(t)
            if j == k or w is None or not (is_neg(w) is z or is_neg(z) is w):
                continue
            rest = [v for i, v in enumerate(ins) if i not in (j, k)]
            new = tm.sigmoid(z)
            if rest:
                new = tm.mul(new, *rest)
            return _replace(new, node.outputs[0], models=ins)
    return None


# ------------------------------------------------------------------ log-sum-exp


def _keepdims_order(ds: DimShuffle) -> bool:
    """True if the DimShuffle only inserts broadcastable dimensions (``keepdims=True``)."""
    kept = [o for o in ds.new_order if o != "x"]
    return kept == list(range(len(ds.input_broadcastable)))


def _is_max_of(var: Variable) -> bool:
    """True if ``var`` is (a DimShuffle of) a maximum reduction, or that max made finite."""
    while var.owner is not None and isinstance(var.owner.op, DimShuffle):
        var = var.owner.inputs[0]
    ins = elemwise_inputs(var, ps.Switch)
    if ins is not None:
        var = ins[2]
    node = var.owner
    if node is None:
        return False
    if isinstance(node.op, CAReduce) and isinstance(node.op.scalar_op, ps.Maximum):
        return True
    return type(node.op).__name__ == "MaxAndArgmax"


@rewrites.stabilize("stability")
@node_rewriter([tm.log])
def local_log_sum_exp(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``log(sum(exp(x), axis)) -> max + log(sum(exp(x - max), axis))`` (``max`` kept finite)."""
    ins = elemwise_inputs(node, ps.Log)
    if ins is None or not _float_out(node):
        return None
    (s,) = ins
    ds = None
    if s.owner is not None and isinstance(s.owner.op, DimShuffle) and _keepdims_order(s.owner.op):
        ds, s = s.owner.op, s.owner.inputs[0]
    if s.owner is None or type(s.owner.op) is not Sum:
        return None
    inner = elemwise_inputs(s.owner.inputs[0], ps.Exp)
    if inner is None:
        return None
    (x,) = inner
    if x.type.dtype not in float_dtypes:
        return None
    shifted_by = elemwise_inputs(x, ps.Sub)
    if shifted_by is not None and _is_max_of(shifted_by[1]):
        return None  # already the stable form
    ndim = x.type.ndim
    axes = list(range(ndim)) if s.owner.op.axis is None else list(s.owner.op.axis)
    xmax = CAReduce(ps.maximum, axes)(x)
    xmax = tm.switch(tm.isinf(xmax), broadcast_constant(0, xmax.type.dtype, xmax.type.ndim), xmax)
    pattern: list[int | str] = []
    k = 0
    for d in range(ndim):
        if d in axes:
            pattern.append("x")
        else:
            pattern.append(k)
            k += 1
    shifted = tm.sub(x, DimShuffle(xmax.type.broadcastable, pattern)(xmax))
    new = tm.add(tm.log(tm.sum(tm.exp(shifted), axis=axes)), xmax)
    if ds is not None:
        new = DimShuffle(new.type.broadcastable, ds.new_order)(new)
    return _replace(new, node.outputs[0])


# ------------------------------------------------------------------ softmax


@rewrites.stabilize("stability")
@rewrites.specialize("stability")
@node_rewriter([tm.log])
def local_log_softmax(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``log(softmax(x)) -> log_softmax(x)``."""
    ins = elemwise_inputs(node, ps.Log)
    if ins is None:
        return None
    sm = ins[0]
    if sm.owner is None or type(sm.owner.op) is not Softmax:
        return None
    new = LogSoftmax(sm.owner.op.axis)(sm.owner.inputs[0])
    return _replace(new, node.outputs[0])


@rewrites.stabilize("stability")
@rewrites.specialize("stability")
@node_rewriter([SoftmaxGrad])
def local_log_softmax_grad(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``softmax_grad(g / sm, sm) -> g - sum(g, axis) * sm``: the gradient of log(softmax)."""
    dy, sm = node.inputs
    ins = elemwise_inputs(dy, ps.TrueDiv)
    if ins is None or ins[1] is not sm or dy.type.broadcastable != sm.type.broadcastable:
        return None
    g = ins[0]
    axis = node.op.axis % sm.type.ndim
    new = tm.sub(g, tm.mul(tm.sum(g, axis=axis, keepdims=True), sm))
    return _replace(new, node.outputs[0], models=[g, sm])


@rewrites.stabilize("stability")
@rewrites.specialize("stability")
@node_rewriter([SoftmaxGrad])
def local_crossentropy_softmax_grad(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``softmax_grad(xent_grad(g, sm, y), sm) -> xent_softmax_dx(g, sm, y)``.

    ``xent_grad`` is ``crossentropy_categorical_1hot_grad``, whose ``-g / sm[y]`` is
    infinite where the softmax underflows; ``xent_softmax_dx`` is the fused gradient
    ``crossentropy_softmax_1hot_with_bias_dx``, ``g * (sm - onehot(y))``, which is not.
    """
    dy, sm = node.inputs
    if sm.type.ndim != 2 or node.op.axis not in (-1, 1):
        return None
    owner = dy.owner
    if owner is None or not isinstance(owner.op, CrossentropyCategorical1HotGrad):
        return None
    g, coding, y = owner.inputs
    if coding is not sm:
        return None
    return _replace(crossentropy_softmax_1hot_with_bias_dx(g, sm, y), node.outputs[0])
