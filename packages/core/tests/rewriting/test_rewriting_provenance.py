"""Provenance of the nodes rewrites create, and the per-rewrite statistics report."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.fg import FunctionGraph
from opgraph.graph.op import Op
from opgraph.graph.type import Type
from opgraph.rewriting import (
    EquilibriumGraphRewriter,
    GraphRewriter,
    Provenance,
    RewriteStats,
    in2out,
    node_rewriter,
    out2in,
    pattern_rewriter,
    rewrite_provenance,
    rewrite_report,
)


class ToyType(Type):
    __props__ = ()

    def filter(self, data: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        return np.asarray(data, dtype=float)


toy = ToyType()


class Unary(Op):
    __props__ = ()

    def make_node(self, a: Variable) -> Apply:
        return Apply(self, [a], [toy()])


class Neg(Unary):
    pass


class Exp(Unary):
    pass


class Add(Op):
    __props__ = ()

    def make_node(self, a: Variable, b: Variable) -> Apply:
        return Apply(self, [a, b], [toy()])


neg, exp, add = Neg(), Exp(), Add()


@node_rewriter([Neg])
def local_neg_of_add(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``neg(add(a, b)) -> add(neg(a), neg(b))``"""
    (inner,) = node.inputs
    if inner.owner is not None and isinstance(inner.owner.op, Add):
        a, b = inner.owner.inputs
        return [add(neg(a), neg(b))]
    return None


local_neg_neg = pattern_rewriter("local_neg_neg", (neg, (neg, "x")), "x")


def line_of(text: str) -> int:
    with open(__file__) as f:
        for i, line in enumerate(f, 1):
            if line.startswith(text):
                return i
    raise AssertionError(text)


def test_created_nodes_record_the_rewrite() -> None:
    x, y = toy("x"), toy("y")
    out = neg(add(x, y))
    g = FunctionGraph([x, y], [out], clone=False)
    replaced = str(out.owner)
    walker = in2out(local_neg_of_add)
    walker.rewrite(g)
    new_add = g.outputs[0].owner
    assert isinstance(new_add.op, Add)
    created = [new_add, *(i.owner for i in new_add.inputs)]
    expected_location = f"test_rewriting_provenance.py:{line_of('@node_rewriter([Neg])')}"
    for node in created:
        (prov,) = rewrite_provenance(node)
        assert isinstance(prov, Provenance)
        assert prov.rewrite == "local_neg_of_add"
        assert prov.location.endswith(expected_location)
        assert prov.replaced == replaced
        assert prov.reason == walker.name
    assert rewrite_provenance(g.outputs[0]) == rewrite_provenance(new_add)
    assert rewrite_provenance(x) == []
    text = str(prov)
    assert text.startswith("introduced by local_neg_of_add (") and "replacing Neg(" in text
    with pytest.raises(dataclasses.FrozenInstanceError):
        prov.rewrite = "other"  # type: ignore[misc]


def test_user_nodes_and_reused_nodes_get_no_provenance() -> None:
    x = toy("x")
    keep = exp(x)
    g = FunctionGraph([x], [neg(neg(keep))], clone=False)
    out2in(local_neg_neg).rewrite(g)
    assert g.outputs[0] is keep
    assert rewrite_provenance(keep) == []


def test_pattern_rewrites_record_their_declaration_line() -> None:
    rw = pattern_rewriter("local_exp_to_neg", (exp, "x"), (neg, "x"))
    x = toy("x")
    g = FunctionGraph([x], [exp(x)], clone=False)
    in2out(rw).rewrite(g)
    (prov,) = rewrite_provenance(g.outputs[0])
    assert prov.rewrite == "local_exp_to_neg"
    line = line_of('    rw = pattern_rewriter("local_exp_to_neg"')
    assert prov.location.endswith(f"test_rewriting_provenance.py:{line}")


def test_a_node_rebuilt_twice_keeps_both_entries() -> None:
    x = toy("x")
    cached = neg(x)

    @node_rewriter([Exp])
    def local_exp_to_cached(fgraph: Any, node: Apply) -> list[Variable]:
        """``exp(x) -> neg(x)`` (always the same node)"""
        return [cached]

    @node_rewriter([Neg])
    def local_neg_to_exp(fgraph: Any, node: Apply) -> list[Variable]:
        """``neg(x) -> exp(x)``"""
        return [exp(node.inputs[0])]

    g = FunctionGraph([x], [exp(x)], clone=False)
    in2out(local_exp_to_cached).rewrite(g)
    in2out(local_neg_to_exp).rewrite(g)
    assert cached.owner not in g.apply_nodes
    in2out(local_exp_to_cached).rewrite(g)
    assert g.outputs[0] is cached
    # The node's history: its own first entry, then the history of the exp it replaced
    # (built by local_neg_to_exp from the cached node), then the latest replacement.
    assert [p.rewrite for p in rewrite_provenance(cached)] == [
        "local_exp_to_cached",
        "local_neg_to_exp",
        "local_exp_to_cached",
    ]


def test_graph_rewriters_replacing_directly_get_provenance() -> None:
    class ExpToNegRewriter(GraphRewriter):
        name = "exp_to_neg_rewriter"

        def apply(self, fgraph: Any) -> None:
            for node in list(fgraph.toposort()):
                if isinstance(node.op, Exp):
                    fgraph.replace_all_validate(
                        [(node.outputs[0], neg(node.inputs[0]))], reason=self
                    )

    x = toy("x")
    g = FunctionGraph([x], [exp(x)], clone=False)
    ExpToNegRewriter().rewrite(g)
    (prov,) = rewrite_provenance(g.outputs[0])
    assert prov.rewrite == "exp_to_neg_rewriter"
    assert "test_rewriting_provenance.py:" in prov.location
    record = g.rewrite_stats["exp_to_neg_rewriter"]
    assert (record.kind, record.created, record.removed) == ("graph", 1, 1)


# ------------------------------------------------------------------ statistics


def test_stats_count_calls_applications_and_nodes() -> None:
    x, y = toy("x"), toy("y")
    out = neg(add(neg(neg(x)), exp(neg(y))))
    g = FunctionGraph([x, y], [out], clone=False)
    eq = EquilibriumGraphRewriter([local_neg_of_add, local_neg_neg], name="canonicalize")
    eq.rewrite(g)
    stats = g.rewrite_stats
    assert isinstance(stats, RewriteStats)
    dist = stats["local_neg_of_add"]
    assert dist.applied == 1
    assert dist.created == 3  # add(neg(a), neg(b))
    assert dist.removed == 2  # neg(add(...)) and add(...)
    nn = stats["local_neg_neg"]
    assert nn.applied == 1  # neg(neg(neg(x))) -> neg(x), after the distribution
    assert nn.calls >= 4
    assert stats["canonicalize"].kind == "graph"
    assert stats.total_time > 0
    assert "local_neg_neg" in stats and "nothing" not in stats
    with pytest.raises(KeyError, match="no rewrite named 'nothing'"):
        stats["nothing"]


def test_report_table() -> None:
    x, y = toy("x"), toy("y")
    g = FunctionGraph([x, y], [neg(add(neg(x), y))], clone=False)
    EquilibriumGraphRewriter([local_neg_of_add, local_neg_neg], name="canonicalize").rewrite(g)
    report = rewrite_report(g)
    lines = report.splitlines()
    assert lines[0].startswith("Rewrites: ")
    header = lines[1].split()
    assert header == ["rewrite", "applied", "time", "calls", "created", "removed", "location"]
    body = "\n".join(lines[2:])
    assert "local_neg_of_add" in body and "local_neg_neg" in body
    assert "canonicalize [graph]" in body
    assert "test_rewriting_provenance.py:" in body
    times = [float(line.split()[-5].rstrip("s")) for line in lines[2:]]
    assert times == sorted(times, reverse=True)
    assert str(g.rewrite_stats) == report


def test_report_when_nothing_ran_and_unused_rewrites() -> None:
    x = toy("x")
    g = FunctionGraph([x], [exp(x)], clone=False)
    assert rewrite_report(g) == "Rewrites: none ran on this graph."
    tracked_all = node_rewriter(None)(lambda fgraph, node: None)
    in2out(tracked_all, name="walk").rewrite(g)
    assert "<lambda>" not in rewrite_report(g)
    assert "<lambda>" in rewrite_report(g, include_unused=True)


def test_stats_accumulate_over_runs_and_only_top_level_time_sums() -> None:
    x = toy("x")
    g = FunctionGraph([x], [neg(neg(neg(neg(x))))], clone=False)
    in2out(local_neg_neg, name="first").rewrite(g)
    stats = g.rewrite_stats
    t1 = stats.total_time
    in2out(local_neg_neg, name="second").rewrite(g)
    assert stats is g.rewrite_stats
    assert stats.total_time >= t1
    assert stats["first"].calls == 1 and stats["second"].calls == 1
    assert stats["local_neg_neg"].applied == 2
