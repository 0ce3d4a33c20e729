"""MergeOptimizer: equal constants and equal nodes become one, in one linear pass."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import opgraph.scalar.basic as ps
import opgraph.tensor as T
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.fg import FunctionGraph
from opgraph.graph.op import Op
from opgraph.rewriting import make_optdb
from opgraph.tensor.elemwise import DimShuffle, Elemwise
from opgraph_optimizers.merge import MergeOptimizer, find_merges, inputs_first
from opgraph_optimizers.registry import load_rewrite_modules


def _nodes(fg: FunctionGraph, kind: type) -> list[Apply]:
    return [n for n in fg.apply_nodes if isinstance(n.op, kind)]


def _count_scalar(fg: FunctionGraph, cls: type) -> int:
    return sum(
        1 for n in fg.apply_nodes if isinstance(n.op, Elemwise) and isinstance(n.op.scalar_op, cls)
    )


def test_equal_nodes_on_identical_inputs_merge() -> None:
    x = T.dmatrix("x")
    fg = FunctionGraph([x], [T.exp(x) + T.exp(x)])
    MergeOptimizer().rewrite(fg)
    assert _count_scalar(fg, ps.Exp) == 1
    (add,) = [n for n in fg.apply_nodes if isinstance(n.op.scalar_op, ps.Add)]
    assert add.inputs[0] is add.inputs[1]


def test_duplicated_chains_merge_in_one_pass() -> None:
    x = T.dvector("x")
    a = T.tanh(T.exp(x) * 2)
    b = T.tanh(T.exp(x) * 2)
    fg = FunctionGraph([x], [a, b])
    assert MergeOptimizer().rewrite(fg) > 0
    assert fg.outputs[0] is fg.outputs[1]
    assert find_merges(fg) == []


def test_constants_merge_by_value_and_type() -> None:
    x = T.dvector("x")
    c1, c2 = T.constant(np.array([2.0, 3.0])), T.constant(np.array([2.0, 3.0]))
    c3 = T.constant(np.array([2.0, 3.0], dtype="float32"))
    fg = FunctionGraph([x], [x * c1, x + c2, x - c3])
    MergeOptimizer().rewrite(fg)
    consts = {id(v) for v in fg.variables if isinstance(v, Constant)}
    assert len(consts) == 2  # the float64 pair merged, the float32 one kept apart


def test_different_ops_or_inputs_do_not_merge() -> None:
    x, y = T.dvectors("x", "y")
    fg = FunctionGraph([x, y], [T.exp(x), T.exp(y), T.log(x)])
    assert MergeOptimizer().rewrite(fg) == 0
    assert len(fg.apply_nodes) == 3


def test_equal_op_instances_merge() -> None:
    x = T.dmatrix("x")
    d1 = DimShuffle((False, False), [1, 0])(x)
    d2 = DimShuffle((False, False), [1, 0])(x)
    fg = FunctionGraph([x], [d1 + d2])
    MergeOptimizer().rewrite(fg)
    assert len(_nodes(fg, DimShuffle)) == 1


class _Destroy(Op):
    """Adds one to its input in place (a destroy_map op, never merged)."""

    __props__ = ()
    destroy_map = {0: [0]}

    def make_node(self, x: Variable) -> Apply:
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: Any) -> None:
        inputs[0] += 1
        output_storage[0][0] = inputs[0]


def test_nodes_destroying_an_input_are_not_merged() -> None:
    x = T.dvector("x")
    e = T.exp(x)
    fg = FunctionGraph([x], [_Destroy()(e), _Destroy()(e)], clone=True)
    MergeOptimizer().rewrite(fg)
    assert len(_nodes(fg, _Destroy)) == 2


def test_inputs_first_orders_every_node_after_its_inputs() -> None:
    x = T.dvector("x")
    y = T.exp(x) + T.log(x) * T.exp(x)
    fg = FunctionGraph([x], [y, T.sin(y)])
    order = inputs_first(fg)
    assert set(order) == fg.apply_nodes
    seen: set[Apply] = set()
    for node in order:
        assert all(i.owner is None or i.owner in seen for i in node.inputs)
        seen.add(node)


def test_a_16000_node_graph_merges_without_recursion() -> None:
    x = T.dvector("x")
    a = b = x
    for k in range(4000):
        a = T.exp(a) * 0.5 if k % 2 else a + 1.5
        b = T.exp(b) * 0.5 if k % 2 else b + 1.5
    fg = FunctionGraph([x], [a, b])
    assert len(fg.apply_nodes) >= 16000
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)  # well below the graph's depth
    try:
        start = time.perf_counter()
        MergeOptimizer().rewrite(fg)
        elapsed = time.perf_counter() - start
    finally:
        sys.setrecursionlimit(limit)
    assert fg.outputs[0] is fg.outputs[1]
    assert len(fg.apply_nodes) < 8000
    assert elapsed < 20


def test_merge_is_registered_in_the_merge_stages_and_as_canonicalize_cleanup() -> None:
    optdb = make_optdb()
    load_rewrite_modules().install(optdb)
    for stage in ("merge1", "merge2", "merge3"):
        entry = optdb[stage].entry("merge")
        assert {"fast_run", "fast_compile", "merge"} <= entry.tags
        assert isinstance(entry.rewriter, MergeOptimizer)
    assert optdb["canonicalize"].entry("merge").options == {"cleanup": True}


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32"])
def test_merge_in_compiled_functions(rewrites_check: Any, dtype: str) -> None:
    (x, y), values = rewrites_check.inputs(dtype, [(False, False), (True, False)], 1, 3)
    out = T.exp(x * y) + T.exp(x * y)
    rewrites_check.rewrite(
        "merge",
        [x, y],
        out,
        values,
        lambda uses: uses.count(ps.Exp) == 1,
    )
