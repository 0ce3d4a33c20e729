"""Rewrite databases: queries by tags and names, positions, nesting, RewriteSet, optdb."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.fg import FunctionGraph
from opgraph.graph.op import Op
from opgraph.graph.type import Type
from opgraph.rewriting import (
    OPT_FAST_COMPILE,
    OPT_FAST_RUN,
    OPT_MERGE,
    OPT_NONE,
    OPT_STABILIZE,
    PREDEFINED_OPTIMIZERS,
    STAGES,
    EquilibriumDB,
    EquilibriumGraphRewriter,
    GraphRewriter,
    LocalGroupDB,
    NodeRewriter,
    ProxyDB,
    RewriteDatabase,
    RewriteDatabaseQuery,
    RewriteSet,
    SequenceDB,
    SequentialGraphRewriter,
    WalkingGraphRewriter,
    make_optdb,
    node_rewriter,
    pattern_rewriter,
)


class ToyType(Type):
    __props__ = ()

    def filter(self, data: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        return np.asarray(data, dtype=float)


toy = ToyType()


class Neg(Op):
    __props__ = ()

    def make_node(self, a: Variable) -> Apply:
        return Apply(self, [a], [toy()])


class Exp(Op):
    __props__ = ()

    def make_node(self, a: Variable) -> Apply:
        return Apply(self, [a], [toy()])


neg, exp = Neg(), Exp()


class Named(GraphRewriter):
    """A graph rewriter that records its runs in a shared log."""

    def __init__(self, name: str, log: list[str] | None = None) -> None:
        self.name = name
        self.log = log if log is not None else []

    def apply(self, fgraph: Any) -> None:
        self.log.append(self.name)


def names(rewriter: Any) -> list[str]:
    return [r.name for r in rewriter]


# ------------------------------------------------------------------ queries


def make_db() -> RewriteDatabase:
    db = RewriteDatabase()
    db.register("a", Named("a"), "fast_run", "fast_compile")
    db.register("b", Named("b"), "fast_run", "stable")
    db.register("c", Named("c"), "fast_run", "stable", "inplace")
    db.register("d", Named("d"), "unsafe")
    return db


def test_include_any_require_all_exclude_none() -> None:
    db = make_db()
    assert names(db.query(RewriteDatabaseQuery(include=["fast_run"]))) == ["a", "b", "c"]
    assert names(db.query(RewriteDatabaseQuery(include=["fast_compile", "unsafe"]))) == ["a", "d"]
    q = RewriteDatabaseQuery(include=["fast_run"], require=["stable"])
    assert names(db.query(q)) == ["b", "c"]
    assert names(db.query(q.excluding("inplace"))) == ["b"]
    assert names(db.query(OPT_NONE)) == []


def test_names_are_tags() -> None:
    db = make_db()
    assert names(db.query(OPT_FAST_RUN.excluding("b"))) == ["a", "c"]
    assert names(db.query(RewriteDatabaseQuery(include=["d"]))) == ["d"]
    assert names(db.query("fast_run", "-a", "&stable")) == ["b", "c"]


def test_query_builders_return_new_queries() -> None:
    q = RewriteDatabaseQuery(include=["fast_run"])
    q2 = q.including("x").excluding("y").requiring("z")
    assert q.include == {"fast_run"} and not q.exclude and not q.require
    assert q2.include == {"fast_run", "x"} and q2.exclude == {"y"} and q2.require == {"z"}
    assert q2 == RewriteDatabaseQuery(["x", "fast_run"], ["z"], ["y"])
    with pytest.raises(TypeError, match="list of tags"):
        RewriteDatabaseQuery(include="fast_run")


def test_register_errors() -> None:
    db = make_db()
    with pytest.raises(ValueError, match="already registered"):
        db.register("a", Named("a2"), "fast_run")
    with pytest.raises(TypeError, match="expected a NodeRewriter"):
        db.register("e", object())
    with pytest.raises(KeyError, match="it has: a, b, c, d"):
        db["zzz"]
    assert "a" in db and "zzz" not in db
    assert db["a"].name == "a"


def test_add_and_remove_tags() -> None:
    db = make_db()
    db.add_tags("d", "fast_run")
    assert names(db.query(OPT_FAST_RUN)) == ["a", "b", "c", "d"]
    db.remove_tags("d", "fast_run", "d")
    assert names(db.query(OPT_FAST_RUN)) == ["a", "b", "c"]
    assert names(db.query(RewriteDatabaseQuery(include=["d"]))) == ["d"]


# ------------------------------------------------------------------ SequenceDB


def test_sequence_db_orders_by_position() -> None:
    db = SequenceDB(name="seq")
    db.register("late", Named("late"), "fast_run", position=10)
    db.register("early", Named("early"), "fast_run", position=0.5)
    db.register("mid_b", Named("mid_b"), "fast_run", position=2)
    db.register("mid_a", Named("mid_a"), "fast_run", position=2)  # tie: registration order
    db.register("last", Named("last"), "fast_run")
    seq = db.query(OPT_FAST_RUN)
    assert isinstance(seq, SequentialGraphRewriter)
    assert names(seq) == ["early", "mid_b", "mid_a", "late", "last"]
    assert db.positions()["last"] == 11
    cut = db.query(OPT_FAST_RUN._copy(position_cutoff=2.5))
    assert names(cut) == ["early", "mid_b", "mid_a"]


def test_sequence_db_runs_in_order_and_wraps_node_rewriters() -> None:
    log: list[str] = []

    @node_rewriter([Neg])
    def local_neg_neg(fgraph: Any, node: Apply) -> list[Variable] | None:
        """``neg(neg(x)) -> x``"""
        inner = node.inputs[0]
        if inner.owner is not None and inner.owner.op == neg:
            return [inner.owner.inputs[0]]
        return None

    db = SequenceDB()
    db.register("second", Named("second", log), "fast_run", position=2)
    db.register("first", Named("first", log), "fast_run", position=1)
    db.register("local_neg_neg", local_neg_neg, "fast_run", position=1.5)
    x = toy("x")
    g = FunctionGraph([x], [neg(neg(x))], clone=False)
    db.query(OPT_FAST_RUN).rewrite(g)
    assert log == ["first", "second"]
    assert g.outputs[0] is x


def test_nested_databases_are_queried_recursively() -> None:
    outer = SequenceDB(name="outer")
    inner = SequenceDB()
    inner.register("inner_fast", Named("inner_fast"), "fast_run", position=5)
    inner.register("inner_slow", Named("inner_slow"), "slow", position=1)
    inner.register("inner_unsafe", Named("inner_unsafe"), "fast_run", "unsafe", position=0)
    outer.register("stage", inner, "fast_run", position=1)
    outer.register("top", Named("top"), "fast_run", position=0)
    seq = outer.query(OPT_FAST_RUN)
    assert names(seq) == ["top", "stage"]
    assert inner.name == "stage"  # a sub-database takes its entry's name
    assert names(seq.rewriters[1]) == ["inner_unsafe", "inner_fast"]
    # position_cutoff applies to the database queried, not inside sub-databases
    cut = outer.query(OPT_FAST_RUN._copy(position_cutoff=1.5))
    assert names(cut.rewriters[1]) == ["inner_unsafe", "inner_fast"]
    # excluding by name reaches inside; excluding the stage drops it all
    assert names(outer.query(OPT_FAST_RUN.excluding("inner_unsafe")).rewriters[1]) == ["inner_fast"]
    assert names(outer.query(OPT_FAST_RUN.excluding("stage"))) == ["top"]
    # entries carry their database's name as a tag
    assert names(outer.query(RewriteDatabaseQuery(include=["stage"]))) == ["stage"]
    only_inner = outer.query(RewriteDatabaseQuery(include=["stage"]))
    assert names(only_inner.rewriters[0]) == ["inner_unsafe", "inner_slow", "inner_fast"]
    # a subquery replaces the query inside one sub-database
    sub = OPT_FAST_RUN._copy(subquery={"stage": RewriteDatabaseQuery(include=["slow"])})
    assert names(outer.query(sub).rewriters[1]) == ["inner_slow"]
    paths = [p for p, _ in outer.walk()]
    assert paths == ["stage", "stage/inner_fast", "stage/inner_slow", "stage/inner_unsafe", "top"]


# ------------------------------------------------------------------ other databases


@node_rewriter([Neg])
def local_neg_neg(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``neg(neg(x)) -> x``"""
    inner = node.inputs[0]
    if inner.owner is not None and inner.owner.op == neg:
        return [inner.owner.inputs[0]]
    return None


def test_equilibrium_db() -> None:
    log: list[str] = []
    db = EquilibriumDB(name="canon")
    db.register("local_neg_neg", local_neg_neg, "fast_run")
    db.register("local_exp_neg", pattern_rewriter("p", (exp, (neg, "x")), "x"), "other")
    db.register("merge", Named("merge", log), "fast_run", cleanup=True)
    db.register("fin", Named("fin", log), "fast_run", final_rewriter=True)
    with pytest.raises(TypeError, match="unknown options"):
        db.register("bad", Named("bad"), "fast_run", colour="red")
    eq = db.query(OPT_FAST_RUN)
    assert isinstance(eq, EquilibriumGraphRewriter)
    assert eq.name == "canon"
    assert [r.name for r in eq.node_rewriters] == ["local_neg_neg"]
    assert [r.name for r in eq.final_rewriters] == ["fin"]
    assert [r.name for r in eq.cleanup_rewriters] == ["merge"]
    x = toy("x")
    g = FunctionGraph([x], [neg(neg(neg(neg(x))))], clone=False)
    eq.rewrite(g)
    assert g.outputs[0] is x
    assert log == ["merge", "fin", "fin"]


def test_local_group_db_is_one_walk() -> None:
    db = LocalGroupDB(name="group")
    db.register("local_neg_neg", local_neg_neg, "fast_run", position=2)
    db.register("local_exp_neg", pattern_rewriter("p", (exp, (neg, "x")), "x"), "fast_run")
    walker = db.query(OPT_FAST_RUN)
    assert isinstance(walker, WalkingGraphRewriter)
    assert [r.name for r in walker.node_rewriters] == ["local_neg_neg", "p"]
    with pytest.raises(TypeError, match="holds NodeRewriters"):
        db.register("g", Named("g"))


def test_proxy_db() -> None:
    rw = Named("prebuilt")
    proxy = ProxyDB(rw)
    parent = SequenceDB()
    parent.register("wrapped", proxy, "fast_run", position=1)
    (got,) = parent.query(OPT_FAST_RUN)
    assert got is rw and rw.name == "prebuilt"
    with pytest.raises(TypeError):
        proxy.register("x", Named("x"))


# ------------------------------------------------------------------ optdb and RewriteSet


def test_optdb_stages_positions_and_kinds() -> None:
    optdb = make_optdb()
    expected = {
        "merge1": 0,
        "shape": 0.1,
        "canonicalize": 1,
        "stabilize": 1.5,
        "blas": 1.7,
        "specialize": 2,
        "uncanonicalize": 3,
        "merge2": 49,
        "fusion": 49,
        "add_destroy_handler": 49.5,
        "inplace": 75,
        "merge3": 100,
    }
    assert optdb.positions() == expected
    assert set(STAGES) == set(expected)
    for stage in ("canonicalize", "stabilize", "specialize"):
        assert isinstance(optdb[stage], EquilibriumDB)
    for stage in ("merge1", "blas", "fusion", "inplace", "merge3"):
        assert isinstance(optdb[stage], SequenceDB)
    seq = optdb.query(OPT_FAST_RUN)
    assert "add_destroy_handler" in names(seq)
    assert "stabilize" not in names(optdb.query(OPT_STABILIZE.excluding("stabilize")))
    assert max(optdb.positions()[n] for n in names(optdb.query(OPT_STABILIZE))) == 1.5
    assert names(optdb.query(OPT_MERGE)) == ["merge1", "merge2", "merge3"]
    assert "specialize" not in names(optdb.query(OPT_FAST_COMPILE))
    assert names(optdb.query(OPT_NONE)) == []
    assert PREDEFINED_OPTIMIZERS["None"] is OPT_NONE
    assert set(PREDEFINED_OPTIMIZERS) >= {"fast_run", "fast_compile", "merge", "None"}
    assert PREDEFINED_OPTIMIZERS["stabilize"].position_cutoff == pytest.approx(1.5000001)
    assert PREDEFINED_OPTIMIZERS["fast_run"].position_cutoff == math.inf


def test_an_empty_optdb_rewrites_nothing() -> None:
    x = toy("x")
    g = FunctionGraph([x], [neg(neg(x))], clone=False)
    make_optdb().query(OPT_FAST_RUN).rewrite(g)
    assert len(g.apply_nodes) == 2


def test_rewrite_set_decorators_and_install() -> None:
    rewrites = RewriteSet("my-plugin")
    local_neg_neg_p = pattern_rewriter("local_neg_neg", (neg, (neg, "x")), "x")
    assert rewrites.canonicalize(local_neg_neg_p) is local_neg_neg_p

    @rewrites.canonicalize("shape_unsafe", position=3)
    @rewrites.stabilize
    @node_rewriter([Exp])
    def local_exp_neg_neg(fgraph: Any, node: Apply) -> None:
        """``exp(x) -> exp(x)`` (nothing)"""

    assert isinstance(local_exp_neg_neg, NodeRewriter)

    @rewrites.specialize("special", name="renamed")
    @node_rewriter([Exp])
    def local_other(fgraph: Any, node: Apply) -> None:
        """``exp(x) -> exp(x)`` (nothing)"""

    fusion = rewrites.register("fusion", Named("fusion_rewriter"), "fast_run", position=10)
    assert isinstance(fusion, Named)

    @rewrites.register("inplace", "fast_run", "inplace", position=50)
    @node_rewriter([Neg])
    def local_inplace(fgraph: Any, node: Apply) -> None:
        """``neg(x) -> neg_inplace(x)`` (nothing)"""

    assert len(rewrites) == 6
    optdb = make_optdb()
    optdb.current_plugin = "opgraph-toy"
    rewrites.install(optdb)
    optdb.current_plugin = None

    canon = optdb["canonicalize"]
    assert set(canon) == {"local_neg_neg", "local_exp_neg_neg"}
    entry = canon.entry("local_exp_neg_neg")
    assert entry.tags >= {"fast_run", "fast_compile", "shape_unsafe"}
    assert entry.position == 3
    assert entry.plugin == "opgraph-toy"
    assert optdb["stabilize"].entry("local_exp_neg_neg").tags == {"local_exp_neg_neg", "fast_run"}
    assert optdb["specialize"].entry("renamed").rewriter is local_other
    assert optdb["fusion"].entry("fusion_rewriter").position == 10
    listing = optdb.describe()
    assert "local_exp_neg_neg @3 [fast_compile, fast_run, shape_unsafe]  (from opgraph-toy)" in (
        listing
    )

    # installed rewrites run with the standard queries, and excluding one by name works
    x = toy("x")
    g = FunctionGraph([x], [neg(neg(x))], clone=False)
    optdb.query(OPT_FAST_COMPILE).rewrite(g)
    assert g.outputs[0] is x
    y = toy("y")
    g2 = FunctionGraph([y], [neg(neg(y))], clone=False)
    optdb.query(OPT_FAST_RUN.excluding("local_neg_neg")).rewrite(g2)
    assert len(g2.apply_nodes) == 2


def test_rewrite_set_without_plugin_uses_its_name_and_errors_name_the_db() -> None:
    rewrites = RewriteSet("standalone")
    rewrites.canonicalize(pattern_rewriter("p", (neg, (neg, "x")), "x"))
    optdb = make_optdb()
    rewrites.install(optdb)
    assert optdb["canonicalize"].entry("p").plugin == "standalone"
    bad = RewriteSet()
    bad.register("nowhere", Named("n"))
    with pytest.raises(KeyError, match=r"no database named 'nowhere'.*canonicalize"):
        bad.install(make_optdb())
    with pytest.raises(TypeError, match="apply @node_rewriter first"):
        rewrites.canonicalize(lambda fgraph, node: None)


def test_get_optdb_installs_plugins_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import opgraph.rewriting.optdb as optdb_module

    calls: list[Any] = []

    class FakeManager:
        def install_rewrites(self, optdb: Any) -> None:
            calls.append(optdb)
            optdb.current_plugin = "fake"
            optdb["canonicalize"].register("local_fake", Named("local_fake"), "fast_run")
            optdb.current_plugin = None

    monkeypatch.setattr(optdb_module, "_optdb", None)
    monkeypatch.setattr(optdb_module, "get_plugin_manager", lambda: FakeManager())
    first = optdb_module.get_optdb()
    assert optdb_module.get_optdb() is first
    assert calls == [first]
    assert first["canonicalize"].entry("local_fake").plugin == "fake"


def test_get_optdb_survives_a_broken_plugin_manager(monkeypatch: pytest.MonkeyPatch) -> None:
    import opgraph.rewriting.optdb as optdb_module

    def broken() -> Any:
        raise RuntimeError("manager exploded")

    monkeypatch.setattr(optdb_module, "_optdb", None)
    monkeypatch.setattr(optdb_module, "get_plugin_manager", broken)
    with pytest.warns(RuntimeWarning, match="manager exploded"):
        optdb = optdb_module.get_optdb()
    assert list(optdb) == list(STAGES)


def test_register_helpers(monkeypatch: pytest.MonkeyPatch) -> None:
    import opgraph.rewriting.optdb as optdb_module

    fresh = make_optdb()
    monkeypatch.setattr(optdb_module, "_optdb", fresh)
    rw = pattern_rewriter("local_h1", (neg, (neg, "x")), "x")
    assert optdb_module.register_canonicalize(rw) is rw
    assert fresh["canonicalize"].entry("local_h1").tags == {"local_h1", "fast_run", "fast_compile"}

    @optdb_module.register_stabilize("stability")
    @node_rewriter([Exp])
    def local_h2(fgraph: Any, node: Apply) -> None:
        """``exp(x) -> exp(x)``"""

    assert fresh["stabilize"].entry("local_h2").tags == {"local_h2", "fast_run", "stability"}

    @optdb_module.register_specialize
    @node_rewriter([Exp])
    def local_h3(fgraph: Any, node: Apply) -> None:
        """``exp(x) -> exp(x)``"""

    optdb_module.register_specialize(local_h3, name="local_h3_again")
    assert set(fresh["specialize"]) == {"local_h3", "local_h3_again"}
