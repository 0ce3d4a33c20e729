"""The identities written as patterns: each fires, and refuses where the types would change.

One row per case: a rewrite, a graph built from fresh inputs, and what the rewrite must give
for its output node (``None``: it refuses). The refusals are the constraints the patterns
carry: a dtype that would change, a dimension that would stop or start broadcasting, an
inner node that other nodes also use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest

import opgraph.scalar.basic as ps
import opgraph.tensor as T
from opgraph.gradient import disconnected_grad, zero_grad
from opgraph.graph.basic import Constant, Variable
from opgraph.graph.fg import FunctionGraph
from opgraph.graph.traversal import graph_inputs
from opgraph.scalar.type import get_scalar_type
from opgraph.tensor.basic import Rebroadcast
from opgraph.tensor.elemwise import DimShuffle, Elemwise
from opgraph.tensor.structure import alloc
from opgraph_optimizers.canonicalize import elemwise, math, shape
from opgraph_optimizers.specialize import local_log_exp, local_mul_to_sqr
from opgraph_optimizers.stabilize import (
    local_1msigmoid,
    local_log1p_exp_to_softplus,
    local_log_sigmoid,
    values_eq_approx_stabilized,
)


def _cast(x: Variable, dtype: str) -> Variable:
    return Elemwise(ps.Cast(get_scalar_type(dtype)))(x)


def _scalar_op(var: Variable) -> Any:
    return getattr(var.owner.op, "scalar_op", None) if var.owner is not None else None


class Case(NamedTuple):
    """``build(x, y)`` (two fresh float64 matrices) gives the output; ``expect(new, out)``
    checks the replacement, or None: the rewrite refuses."""

    id: str
    rewrite: Any
    build: Callable[[Variable, Variable], Variable]
    expect: Callable[[Variable, Variable], bool] | None


def _is(name: str) -> Callable[[Variable, Variable], bool]:
    """The replacement is the graph input called ``name``."""
    return lambda new, out: new.owner is None and new.name == name


def _computes(cls: type, *inner: str) -> Callable[[Variable, Variable], bool]:
    """The replacement is ``cls(...)`` of the inputs named ``inner``."""

    def check(new: Variable, out: Variable) -> bool:
        return isinstance(_scalar_op(new) or new.owner.op, cls) and [
            i.name for i in new.owner.inputs
        ] == list(inner)

    return check


CASES = [
    Case("neg_neg", math.local_neg_neg, lambda x, y: T.neg(T.neg(x)), _is("x")),
    Case("neg_neg-single", math.local_neg_neg, lambda x, y: T.neg(x), None),
    Case(
        "useless_dimshuffle",
        elemwise.local_useless_dimshuffle,
        lambda x, y: DimShuffle((False, False), [0, 1])(x),
        _is("x"),
    ),
    Case(
        "useless_dimshuffle-transpose",
        elemwise.local_useless_dimshuffle,
        lambda x, y: x.T,
        None,
    ),
    Case(
        "useless_dimshuffle-new-dim",
        elemwise.local_useless_dimshuffle,
        lambda x, y: DimShuffle((False, False), [0, 1, "x"])(x),
        None,
    ),
    Case("useless_cast", elemwise.local_useless_cast, lambda x, y: _cast(x, "float64"), _is("x")),
    Case(
        "useless_cast-dtype",
        elemwise.local_useless_cast,
        lambda x, y: _cast(T.fmatrix("x"), "float64"),
        None,
    ),
    Case(
        "cast_cast-widening",
        elemwise.local_cast_cast,
        lambda x, y: _cast(_cast(T.bmatrix("x"), "int32"), "float64"),
        lambda new, out: (
            isinstance(_scalar_op(new), ps.Cast)
            and new.owner.inputs[0].name == "x"
            and new.type == out.type
        ),
    ),
    Case(
        "cast_cast-round-trip",
        elemwise.local_cast_cast,
        lambda x, y: _cast(_cast(T.fmatrix("x"), "float64"), "float32"),
        _is("x"),
    ),
    Case(
        "cast_cast-lossy",
        elemwise.local_cast_cast,
        lambda x, y: _cast(_cast(x, "float32"), "float64"),
        None,
    ),
    Case(
        "useless_rebroadcast",
        elemwise.local_useless_rebroadcast,
        lambda x, y: Rebroadcast((0, False))(x),
        _is("x"),
    ),
    Case(
        "useless_rebroadcast-broadcasts",
        elemwise.local_useless_rebroadcast,
        lambda x, y: Rebroadcast((0, True))(x),
        None,
    ),
    Case(
        "useless_rebroadcast-unbroadcasts",  # the input is more broadcastable: still a change
        elemwise.local_useless_rebroadcast,
        lambda x, y: Rebroadcast((0, False))(T.drow("r")),
        None,
    ),
    Case("useless_fill", elemwise.local_useless_fill, lambda x, y: T.fill(x, y), _is("y")),
    Case(
        "useless_fill-broadcast",
        elemwise.local_useless_fill,
        lambda x, y: T.fill(x, T.drow("y")),
        None,
    ),
    Case(
        "remove_grad_block",
        elemwise.local_remove_grad_block,
        lambda x, y: disconnected_grad(x),
        _is("x"),
    ),
    Case(
        "remove_grad_block-zero",
        elemwise.local_remove_grad_block,
        lambda x, y: zero_grad(x),
        _is("x"),
    ),
    Case(
        "useless_alloc",
        shape.local_useless_alloc,
        lambda x, y: alloc(x, x.shape[0], x.shape[1]),
        _is("x"),
    ),
    Case(
        "useless_alloc-broadcast",
        shape.local_useless_alloc,
        lambda x, y: alloc(T.drow("r"), 3, 4),
        None,
    ),
    Case(
        "useless_alloc-new-dim",
        shape.local_useless_alloc,
        lambda x, y: alloc(T.dvector("v"), 2, 3),
        None,
    ),
    Case(
        "alloc_alloc",
        shape.local_alloc_alloc,
        lambda x, y: alloc(alloc(T.drow("r"), 2, 3), 4, 2, 3),
        lambda new, out: new.owner.inputs[0].name == "r" and len(new.owner.inputs) == 4,
    ),
    Case("mul_to_sqr", local_mul_to_sqr, lambda x, y: x * x, _computes(ps.Sqr, "x")),
    Case("mul_to_sqr-two", local_mul_to_sqr, lambda x, y: x * y, None),
    Case("log_exp", local_log_exp, lambda x, y: T.log(T.exp(x)), _is("x")),
    Case(
        "log_exp-int",  # ``x`` is cast to the float the expression computed
        local_log_exp,
        lambda x, y: T.log(T.exp(T.imatrix("x"))),
        lambda new, out: isinstance(_scalar_op(new), ps.Cast) and new.type == out.type,
    ),
    Case(
        "log1p_exp_to_softplus",
        local_log1p_exp_to_softplus,
        lambda x, y: T.log1p(T.exp(x)),
        _computes(ps.Softplus, "x"),
    ),
    Case(
        "log1p_exp_to_softplus-complex",  # softplus is real: complex values keep log1p(exp)
        local_log1p_exp_to_softplus,
        lambda x, y: T.log1p(T.exp(T.zmatrix("x"))),
        None,
    ),
    Case(
        "1msigmoid",
        local_1msigmoid,
        lambda x, y: 1 - T.sigmoid(x),
        lambda new, out: (
            isinstance(_scalar_op(new), ps.Sigmoid)
            and isinstance(_scalar_op(new.owner.inputs[0]), ps.Neg)
        ),
    ),
    Case("1msigmoid-two", local_1msigmoid, lambda x, y: 2 - T.sigmoid(x), None),
    Case(
        "1msigmoid-ones-matrix",  # not a broadcastable constant: it could change the shape
        local_1msigmoid,
        lambda x, y: T.constant(np.ones((2, 2))) - T.sigmoid(x),
        None,
    ),
    Case(
        "log_sigmoid",
        local_log_sigmoid,
        lambda x, y: T.log(T.sigmoid(x)),
        lambda new, out: isinstance(_scalar_op(new), ps.Neg),
    ),
]


def _apply(rewrite: Any, out: Variable) -> Variable | None:
    inputs = [v for v in graph_inputs([out]) if not isinstance(v, Constant)]
    fgraph = FunctionGraph(inputs, [out], clone=False)
    result = rewrite.transform(fgraph, fgraph.outputs[0].owner)
    if not result:
        return None
    (new,) = result
    assert new.type == fgraph.outputs[0].type
    return new


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_identity_fires_or_refuses(case: Case) -> None:
    out = case.build(T.dmatrix("x"), T.dmatrix("y"))
    new = _apply(case.rewrite, out)
    if case.expect is None:
        assert new is None, f"{case.rewrite.name} should refuse {out}"
    else:
        assert new is not None, f"{case.rewrite.name} did not fire on {out}"
        assert case.expect(new, out), f"{case.rewrite.name} gave {new}"


def test_inner_nodes_used_elsewhere() -> None:
    """``local_alloc_alloc`` needs the inner alloc to itself; ``log(exp(x))`` does not."""
    x = T.drow("x")
    inner = alloc(x, 2, 3)
    out = alloc(inner, 4, 2, 3)
    fgraph = FunctionGraph([x], [out, inner], clone=False)
    assert not shape.local_alloc_alloc.transform(fgraph, out.owner)
    y = T.dmatrix("y")
    e = T.exp(y)
    out = T.log(e)
    fgraph = FunctionGraph([y], [out, e], clone=False)
    assert local_log_exp.transform(fgraph, out.owner) == [y]


def test_stable_patterns_tag_the_replacement() -> None:
    for rewrite, out in [
        (local_log1p_exp_to_softplus, T.log1p(T.exp(T.dvector("x")))),
        (local_1msigmoid, 1 - T.sigmoid(T.dvector("x"))),
        (local_log_sigmoid, T.log(T.sigmoid(T.dvector("x")))),
    ]:
        new = _apply(rewrite, out)
        assert new.tag.values_eq_approx is values_eq_approx_stabilized
