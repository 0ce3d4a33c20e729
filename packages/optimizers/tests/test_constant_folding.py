"""Constant folding: nodes of constants computed at compile time, as TensorConstants."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.scalar.basic as ps
import opgraph.tensor as T
from opgraph.compile.mode import Mode
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.fg import FunctionGraph
from opgraph.graph.op import Op
from opgraph.rewriting import make_optdb
from opgraph.tensor.elemwise import DimShuffle
from opgraph.tensor.variable import TensorConstant
from opgraph_optimizers.constant_folding import fold_node, topo_constant_folding
from opgraph_optimizers.registry import load_rewrite_modules

FAST_RUN_PY = Mode(linker="py", optimizer="fast_run")


@pytest.mark.parametrize("dtype", ["float64", "float32", "int16"])
def test_constant_subgraph_folds(rewrites_check: Any, dtype: str) -> None:
    (x,), values = rewrites_check.inputs(dtype, [(False,)], 1, 3)
    c = T.constant(np.array([1, 2, 3], dtype=dtype))
    out = x * T.exp(T.cast(c, "float64") * 2)

    def folded(uses: Any) -> bool:
        return not uses(ps.Exp)

    f = rewrites_check.rewrite(
        "topo_constant_folding",
        [x],
        out,
        values,
        folded,
        mode=rewrites_check.canonicalize_mode,
    )
    consts = [i for n in f.maker.fgraph.toposort() for i in n.inputs if isinstance(i, Constant)]
    assert any(isinstance(c, TensorConstant) for c in consts)


def test_excluding_the_tag_constant_folding_turns_it_off(rewrites_check: Any) -> None:
    x = T.dvector("x")
    out = x + T.exp(T.constant(1.0))
    mode = rewrites_check.canonicalize_mode.excluding("constant_folding")
    f = rewrites_check.compile([x], out, mode)
    assert rewrites_check.uses(f)(ps.Exp)


def test_dimshuffled_constants_fold_to_broadcastable_constants() -> None:
    a = T.vector("a")
    fg = FunctionGraph([a], [a**10])
    topo_constant_folding.rewrite(fg)
    assert not any(isinstance(n.op, DimShuffle) for n in fg.apply_nodes)
    (node,) = fg.apply_nodes
    exponent = node.inputs[1]
    assert isinstance(exponent, TensorConstant)
    assert exponent.type.broadcastable == (True,)
    assert str(exponent.data.tolist()) == "[10]"


def test_folded_output_type_is_the_replaced_type() -> None:
    c = T.constant(np.ones((1, 3)))
    out = T.addbroadcast(c, 0) * 2  # a Rebroadcast of a constant, then a mul
    fg = FunctionGraph([], [out])
    topo_constant_folding.rewrite(fg)
    (folded,) = fg.outputs
    assert isinstance(folded, Constant) and folded.type == out.type


class _NoFold(Op):
    """``x + 1`` that refuses constant folding."""

    __props__ = ()

    def make_node(self, x: Variable) -> Apply:
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: Any) -> None:
        output_storage[0][0] = inputs[0] + 1

    def do_constant_folding(self, fgraph: Any, node: Apply) -> bool:
        return False


class _Fails(_NoFold):
    """Raises when run: the error belongs to run time, not to compilation."""

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: Any) -> None:
        raise ValueError("bad input")

    def do_constant_folding(self, fgraph: Any, node: Apply) -> bool:
        return True


def test_op_opting_out_is_not_folded() -> None:
    c = T.constant(np.array([1.0, 2.0]))
    node = _NoFold()(c).owner
    assert fold_node(None, node) is None
    f = opgraph.function([], _NoFold()(c), mode=FAST_RUN_PY)
    assert any(isinstance(n.op, _NoFold) for n in f.maker.fgraph.toposort())
    np.testing.assert_allclose(f(), [2.0, 3.0])


def test_failing_op_is_left_to_fail_at_run_time() -> None:
    c = T.constant(np.array([1.0, 2.0]))
    f = opgraph.function([], _Fails()(c), mode=FAST_RUN_PY)
    with pytest.raises(ValueError, match="bad input"):
        f()


def test_fully_constant_function_returns_the_value() -> None:
    out = T.exp(T.constant(np.array([0.0, 1.0]))) * 2
    f = opgraph.function([], out, mode=FAST_RUN_PY)
    assert not any(
        isinstance(getattr(n.op, "scalar_op", None), ps.Exp) for n in f.maker.fgraph.toposort()
    )
    np.testing.assert_allclose(f(), 2 * np.exp([0.0, 1.0]))


def test_a_long_constant_chain_folds_without_recursion() -> None:
    y = T.constant(np.array([0.5]))
    for _ in range(3000):
        y = T.tanh(y)
    fg = FunctionGraph([], [y])
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(300)
    try:
        topo_constant_folding.rewrite(fg)
    finally:
        sys.setrecursionlimit(limit)
    assert not fg.apply_nodes and isinstance(fg.outputs[0], Constant)


def test_constant_folding_is_a_final_rewriter_of_the_equilibrium_stages() -> None:
    optdb = make_optdb()
    load_rewrite_modules().install(optdb)
    for stage in ("canonicalize", "stabilize", "specialize", "uncanonicalize"):
        entry = optdb[stage].entry("topo_constant_folding")
        assert entry.options == {"final_rewriter": True}
        assert {"fast_run", "constant_folding"} <= entry.tags
    assert "fast_compile" in optdb["canonicalize"].entry("topo_constant_folding").tags
