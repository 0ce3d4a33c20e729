"""The caches and shortcuts that keep compiling big graphs linear, and that they change nothing.

Cached toposort of a FunctionGraph (dropped on every change), the nodes-only ``io_toposort``,
cached hashes of immutable ops, cached constant signatures, order-preserving client removal,
the garbage-collector policy of a compilation, and a 16,000-op chain compiled under Python's
default recursion limit.
"""

from __future__ import annotations

import gc
import pickle
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from toy import add, chain, constant, float64_matrix, mul, neg, split

import opgraph
import opgraph.graph.fg as fg_module
import opgraph.scalar.basic as ps
import opgraph.tensor as T
from opgraph.compile.function_module import _full_collections_deferred
from opgraph.graph.basic import Apply, Variable
from opgraph.graph.fg import FunctionGraph, _remove_client
from opgraph.graph.traversal import io_toposort
from opgraph.graph.utils import MetaObject
from opgraph.rewriting import TrackerIndex, in2out, node_rewriter
from opgraph.rewriting.provenance import RewriteStats
from opgraph.scalar.type import get_scalar_type
from opgraph.tensor.elemwise import DimShuffle, Elemwise

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference_io_toposort(inputs, outputs, orderings=None) -> list[Apply]:
    """The definition: Theano 1.0's ``io_toposort``, transcribed.

    Without orderings, a stack of nodes: a node not ready goes back with its inputs' owners
    pushed in order, so its last input is computed first. With orderings, Theano's
    ``general_toposort`` over variables and nodes: a depth-first discovery from the last
    output (each object's dependencies pushed in order) lists the clients of each object;
    then Kahn's algorithm from the objects without dependencies, in discovery order.
    """
    in_ids = {id(v) for v in inputs}
    if not orderings:
        computed = set(in_ids)
        todo = [o.owner for o in reversed(outputs) if o.owner and id(o) not in in_ids]
        order: list[Apply] = []
        while todo:
            cur = todo.pop()
            if cur in order:  # (Theano looked at outputs[0] alone, a given input included)
                continue
            if all(id(i) in computed or i.owner is None for i in cur.inputs):
                computed.update(id(o) for o in cur.outputs)
                order.append(cur)
            else:
                todo.append(cur)
                todo.extend(i.owner for i in cur.inputs if i.owner and id(i) not in in_ids)
        return order

    def deps(obj: Any) -> list:
        if isinstance(obj, Variable):
            return [] if id(obj) in in_ids or obj.owner is None else [obj.owner]
        return list(obj.inputs) + list(orderings.get(obj, []))

    seen: dict[int, list] = {}
    clients: dict[int, list] = {}
    reachable: list = []
    start = list(outputs)
    while start:
        obj = start.pop()
        if id(obj) not in seen:
            reachable.append(obj)
            seen[id(obj)] = deps(obj)
            for r in seen[id(obj)]:
                clients.setdefault(id(r), []).append(obj)
            start.extend(seen[id(obj)])
    sources = [r for r in reachable if not seen[id(r)]]
    done: set[int] = set()
    result: list = []
    while sources:
        obj = sources.pop(0)
        if id(obj) not in done:
            result.append(obj)
            done.add(id(obj))
            for client in clients.get(id(obj), []):
                seen[id(client)] = [a for a in seen[id(client)] if a is not obj]
                if not seen[id(client)]:
                    sources.append(client)
    return [n for n in result if isinstance(n, Apply)]


@st.composite
def graphs_with_orderings(draw: Any) -> Any:
    inputs = [float64_matrix(f"x{i}") for i in range(draw(st.integers(1, 3)))]
    pool: list[Variable] = list(inputs)
    for _ in range(draw(st.integers(0, 15))):
        kind = draw(st.sampled_from(["add", "mul", "neg", "split"]))
        pick = lambda: pool[draw(st.integers(0, len(pool) - 1))]  # noqa: E731
        if kind in ("add", "mul"):
            pool.append((add if kind == "add" else mul)(*[pick() for _ in range(2)]))
        elif kind == "neg":
            pool.append(neg(pick()))
        else:
            pool.extend(split(pick()))
    outputs = [pool[draw(st.integers(0, len(pool) - 1))] for _ in range(draw(st.integers(1, 3)))]
    blockers = [pool[draw(st.integers(0, len(pool) - 1))] for _ in range(draw(st.integers(0, 2)))]
    nodes = reference_io_toposort(blockers, outputs)
    orderings: dict[Apply, list[Apply]] = {}
    for _ in range(draw(st.integers(0, 3))):
        if len(nodes) > 1:
            i = draw(st.integers(0, len(nodes) - 2))
            j = draw(st.integers(i + 1, len(nodes) - 1))
            orderings.setdefault(nodes[j], []).append(nodes[i])
    return blockers, outputs, orderings


# ---------------------------------------------------------------- io_toposort


@SETTINGS
@given(graphs_with_orderings())
def test_io_toposort_gives_the_order_of_the_general_toposort(case: Any) -> None:
    blockers, outputs, orderings = case
    assert io_toposort(blockers, outputs) == reference_io_toposort(blockers, outputs)
    assert io_toposort(blockers, outputs, orderings) == reference_io_toposort(
        blockers, outputs, orderings
    )


def test_io_toposort_names_a_cycle() -> None:
    x = float64_matrix("x")
    a = neg(x)
    b = neg(a)
    with pytest.raises(ValueError, match="cycle"):
        io_toposort([x], [b], {a.owner: [b.owner]})


# ---------------------------------------------------------------- the cached orders


def _fgraph() -> FunctionGraph:
    x, y = float64_matrix("x"), float64_matrix("y")
    return FunctionGraph([x, y], [add(neg(x), mul(x, y)), neg(y)])


def _fresh(fg: FunctionGraph) -> list[Apply]:
    return io_toposort(fg.inputs, fg.outputs)


@pytest.mark.parametrize(
    "edit",
    [
        "replace",
        "change_input",
        "import_node",
        "add_output",
        "remove_output",
        "add_input",
        "remove_node",
        "revert",
    ],
)
def test_cached_orders_are_dropped_on_every_change(edit: str) -> None:
    fg = _fgraph()
    before = fg.io_toposort()
    assert fg.toposort() == before == _fresh(fg)
    assert fg._io_order is not None and fg._toposort is not None
    chk = fg.checkpoint()
    out0 = fg.outputs[0]
    if edit == "replace":
        fg.replace(out0.owner.inputs[0], neg(fg.inputs[1]), reason="test")
    elif edit == "change_input":
        fg.change_node_input(out0.owner, 1, fg.inputs[0], reason="test")
    elif edit == "import_node":
        new = neg(neg(fg.inputs[0]))
        fg.import_node(new.owner, reason="test")
        assert fg._io_order is None and fg._toposort is None
        fg.add_output(new)  # (an imported node must be used, for check_integrity)
    elif edit == "add_output":
        fg.add_output(mul(fg.inputs[0], fg.inputs[0]))
    elif edit == "remove_output":
        fg.remove_output(0)
    elif edit == "add_input":
        fg.add_input(float64_matrix("z"))
    elif edit == "remove_node":
        extra = neg(fg.inputs[0])
        fg.import_node(extra.owner)
        fg.io_toposort()
        fg.toposort()
        fg.remove_node(extra.owner)
        assert fg._io_order is None and fg._toposort is None
    else:
        fg.replace(out0, neg(out0), reason="test")
        fg.io_toposort()
        fg.revert(chk)
    if edit not in ("add_input", "remove_node", "revert"):
        assert fg._io_order is None and fg._toposort is None
    assert fg.io_toposort() == _fresh(fg)
    assert fg.toposort() == _fresh(fg)
    fg.check_integrity()  # also compares the cached orders with fresh ones


def test_cached_order_is_a_copy_and_survives_feature_changes() -> None:
    fg = _fgraph()
    order = fg.io_toposort()
    order.clear()
    assert fg.io_toposort() == _fresh(fg)
    cached = fg._io_order
    listener = RewriteStats()
    fg.attach_feature(listener)
    fg.remove_feature(listener)
    assert fg._io_order is cached  # features change orderings, not the graph
    assert fg._toposort is None


def test_orderings_of_features_still_order_the_toposort() -> None:
    fg = _fgraph()
    n1 = fg.outputs[1].owner  # neg(y)
    n0 = fg.outputs[0].owner  # add(...)

    class Before:
        def orderings(self, fgraph: Any) -> dict[Apply, list[Apply]]:
            return {n1: [n0]}

    fg.attach_feature(Before())
    order = fg.toposort()
    assert order.index(n0) < order.index(n1)
    assert fg.io_toposort() == _fresh(fg)  # without the orderings


def test_walkers_that_change_nothing_do_not_sort_again(monkeypatch: Any) -> None:
    calls = []
    real = fg_module.io_toposort

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(fg_module, "io_toposort", counting)
    x, out = chain(50)
    fg = FunctionGraph([x], [out])

    @node_rewriter(None)
    def nothing(fgraph: Any, node: Apply) -> None:
        return None

    for _ in range(5):
        in2out(nothing).rewrite(fg)
    assert len(calls) == 1


# ---------------------------------------------------------------- client removal


def test_remove_client_keeps_the_order_of_the_others() -> None:
    for n in (1, 5, 40, 100, 300):
        for k in {0, n // 3, n // 2, n - 1}:
            clients = [("node", i) for i in range(n)]
            _remove_client(clients, ("node", k))
            assert clients == [("node", i) for i in range(n) if i != k]
            with pytest.raises(ValueError):
                _remove_client(clients, ("node", k))


def test_pruning_a_long_chain_of_a_shared_constant_is_linear() -> None:
    # Every node of the chain uses the same constant: pruning the chain removes its
    # clients one by one (formerly a search from the front each time, quadratic).
    x = float64_matrix("x")
    c = constant(np.ones((2, 2)))
    out = x
    for _ in range(3000):
        out = add(out, c)
    fg = FunctionGraph([x], [out], clone=False)
    assert len(c.clients) == 3000
    fg.replace(out, x, reason="test")
    assert fg.apply_nodes == set()
    fg.check_integrity()


# ---------------------------------------------------------------- hashes and equality


class _Props(MetaObject):
    __props__ = ("a", "b")

    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b


def test_props_equality_is_the_tuple_comparison() -> None:
    nan = float("nan")
    cases = [(1, 2), (1, 3), (nan, 2), ((1, 2), "x"), ((1, nan), None)]
    objs = [_Props(*c) for c in cases] + [_Props(*c) for c in cases]
    for p in objs:
        for q in objs:
            assert (p == q) == (p._props() == q._props()), (p, q)
            if p == q:
                assert hash(p) == hash(q)
    shared = _Props(nan, 1)
    assert shared == shared
    assert _Props(1, 2) != (1, 2)


def test_elemwise_and_dimshuffle_hashes_agree_with_equality() -> None:
    ops = [
        Elemwise(ps.add),
        Elemwise(ps.add),
        Elemwise(ps.mul),
        Elemwise(ps.add, {0: 0}),
        DimShuffle((False,), ("x", 0)),
        DimShuffle((False,), ("x", 0)),
        DimShuffle((False,), (0, "x")),
    ]
    for a in ops:
        for b in ops:
            if a == b:
                assert hash(a) == hash(b)
    assert Elemwise(ps.add) == Elemwise(ps.add)
    assert len({Elemwise(ps.add), Elemwise(ps.add), Elemwise(ps.mul)}) == 2


def _composite(clone_graph: bool = True) -> ps.Composite:
    a, b = _scalar("a"), _scalar("b")
    out = ps.add(ps.mul(ps.exp(a), b), ps.constant(0.5))
    return ps.Composite([a, b], [out], clone_graph=clone_graph)


def _scalar(name: str) -> Variable:
    return get_scalar_type("float64")(name)


def test_composite_hash_is_cached_but_never_pickled() -> None:
    c1, c2 = _composite(), _composite(clone_graph=False)
    assert c1 == c2 and hash(c1) == hash(c2)
    assert c1.name == c2.name
    assert "_cached_hash" in c1.__dict__
    assert "_cached_hash" not in c1.__getstate__()
    op = Elemwise(c1)
    h = hash(op)
    assert "_cached_hash" not in op.__getstate__()
    again = pickle.loads(pickle.dumps(op))
    assert again == op and hash(again) == h


def test_composite_without_copy_owns_the_given_graph() -> None:
    a = _scalar("a")
    out = ps.exp(a)
    kept = ps.Composite([a], [out], clone_graph=False)
    copied = ps.Composite([a], [out])
    assert kept.inputs[0] is a and kept.outputs[0] is out
    assert copied.inputs[0] is not a
    assert kept == copied
    assert np.allclose(kept.impl(np.array([0.5])), np.exp(0.5))


def test_constant_signature_is_cached_but_never_pickled() -> None:
    c = T.constant(np.arange(3.0))
    sig = c.signature()
    assert c.signature() is sig
    state = c.__getstate__()
    assert "_signature" not in state
    again = pickle.loads(pickle.dumps(c))
    assert again.signature() == sig
    assert c.clone().signature() == sig


def test_tracker_index_returns_lists_of_its_own() -> None:
    @node_rewriter([Elemwise])
    def a(fgraph: Any, node: Apply) -> None:
        return None

    @node_rewriter([T.add])
    def b(fgraph: Any, node: Apply) -> None:
        return None

    index = TrackerIndex([a, b])
    got = index.get(T.add)
    assert got == [a, b]
    got.clear()
    assert index.get(Elemwise(ps.add)) == [a, b]
    assert index.get(T.mul) == [a]


def test_rewrite_stats_pickle_without_their_cache() -> None:
    stats = RewriteStats()

    @node_rewriter(None)
    def some_rewrite(fgraph: Any, node: Apply) -> None:
        return None

    stats.record_node(some_rewrite, 0.1, True)
    stats.record_node(some_rewrite, 0.1, False)
    assert stats["some_rewrite"].calls == 2
    again = pickle.loads(pickle.dumps(stats))
    assert again["some_rewrite"].calls == 2 and again._seen == {}
    again.record_node(some_rewrite, 0.1, True)
    assert again["some_rewrite"].applied == 2


def test_variable_clone_copies_the_creation_trace() -> None:
    x = T.dvector("x")
    y = x.clone()
    assert y.tag.trace == x.tag.trace and y.tag is not x.tag
    c = T.constant(2.0)
    assert c.clone().tag.trace == c.tag.trace
    with pytest.raises(TypeError):
        x.clone(name=3)  # type: ignore[arg-type]


# ---------------------------------------------------------------- the collector


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        if not was:
            gc.disable()


def test_compiling_defers_full_collections_and_restores_the_collector(collector_on: None) -> None:
    thresholds = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    with _full_collections_deferred():
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold()[:2] == thresholds[:2]
        assert gc.get_threshold()[2] > thresholds[2]
        with _full_collections_deferred():  # nested: left alone
            assert gc.get_threshold()[2] > thresholds[2]
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == thresholds
    with pytest.raises(RuntimeError), _full_collections_deferred():
        raise RuntimeError("boom")
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == thresholds
    x = T.dvector("x")
    opgraph.function([x], T.exp(x) + 1)
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == thresholds


def test_objects_frozen_by_the_program_stay_frozen(collector_on: None) -> None:
    gc.freeze()
    try:
        count = gc.get_freeze_count()
        x = T.dvector("x")
        opgraph.function([x], x * 2)
        assert gc.get_freeze_count() > 0 and count > 0  # not unfrozen by the compile
    finally:
        gc.unfreeze()


# ---------------------------------------------------------------- a long chain


@pytest.mark.slow
def test_a_16000_op_chain_compiles_under_the_default_recursion_limit(gc_paused: None) -> None:
    if sys.getrecursionlimit() > 1000:
        pytest.skip("the recursion limit was raised: this test would prove nothing")
    steps = [T.sin, lambda v: v + 0.5, lambda v: v * 0.9, T.cos, T.tanh]
    nsteps = [np.sin, lambda v: v + 0.5, lambda v: v * 0.9, np.cos, np.tanh]
    x = T.dvector("x")
    y = x
    for i in range(16000):
        y = steps[i % 5](y)
    f = opgraph.function([x], y, mode=opgraph.Mode(linker="vm", optimizer="fast_run"))
    value = np.linspace(-1.0, 1.0, 5)
    expected = value
    for i in range(16000):
        expected = nsteps[i % 5](expected)
    np.testing.assert_allclose(f(value), expected, rtol=1e-12)
    assert len(f.maker.fgraph.apply_nodes) < 100  # fused


# ---------------------------------------------------------------- creation traces


class _UserOp(opgraph.graph.op.Op):
    """An Op defined in user code whose make_node makes a constant of its own."""

    __props__ = ()

    def make_node(self, x: Any) -> Apply:
        x = T.as_tensor_variable(x)
        two = T.constant(2.0)
        return Apply(self, [x, two], [x.type()])


def _traces(outputs: list[Variable]) -> list[Any]:
    from opgraph.graph.traversal import ancestors

    found = []
    for v in ancestors(outputs):
        found.append((str(v), v.tag.trace))
        if v.owner is not None:
            found.append((str(v.owner), v.owner.tag.trace))
    return found


def test_recorded_op_calls_give_the_traces_of_a_full_walk(monkeypatch: Any) -> None:
    results = []
    for record in (True, False):
        if not record:  # Op calls then record nothing: every trace is a full walk
            monkeypatch.setattr(opgraph.graph.op, "trace_marks", lambda: [])
        x = T.dvector("x")
        y = _UserOp()(x)
        z = T.exp(y) + T.dmatrix("m").sum(axis=0) * 2
        results.append(_traces([z]))
    with_marks, full_walks = results
    assert [t for _, t in with_marks] == [t for _, t in full_walks]
    assert all(trace for _, trace in with_marks)
    # The constant made inside the user's make_node names that make_node first.
    (two,) = [t for name, t in with_marks if name == "TensorConstant{2.0}"]
    assert two[0][2] == "make_node"
