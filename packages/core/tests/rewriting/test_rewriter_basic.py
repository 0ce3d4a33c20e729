"""Node rewriters, tracks dispatch, the walkers (in2out, out2in, equilibrium) and failures."""

from __future__ import annotations

import sys
import warnings
from typing import Any

import numpy as np
import pytest

from opgraph.configdefaults import change_flags
from opgraph.graph.basic import Apply, Variable
from opgraph.graph.fg import FunctionGraph
from opgraph.graph.op import Op
from opgraph.graph.type import Type
from opgraph.rewriting import (
    EquilibriumGraphRewriter,
    GraphRewriter,
    NodeRewriter,
    RewriteAbort,
    RewriteWarning,
    SequentialGraphRewriter,
    TrackerIndex,
    in2out,
    node_rewriter,
    out2in,
)

# ---------------------------------------------------------------- toy graph library


class ToyType(Type):
    """Float scalars (``kind='float'``) or ints (``kind='int'``)."""

    __props__ = ("kind",)

    def __init__(self, kind: str = "float") -> None:
        self.kind = kind

    def filter(self, data: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        return np.asarray(data, dtype=float if self.kind == "float" else int)


ftype, itype = ToyType("float"), ToyType("int")


def as_toy(x: Any) -> Variable:
    return x if isinstance(x, Variable) else ftype.make_constant(x)


class BinOp(Op):
    __props__ = ()

    def make_node(self, a: Any, b: Any) -> Apply:
        a, b = as_toy(a), as_toy(b)
        return Apply(self, [a, b], [a.type()])


class AddOp(BinOp):
    pass


class MulOp(BinOp):
    pass


class SpecialMul(MulOp):
    pass


class NegOp(Op):
    __props__ = ()

    def make_node(self, a: Any) -> Apply:
        a = as_toy(a)
        return Apply(self, [a], [a.type()])


class ToIntOp(Op):
    __props__ = ()

    def make_node(self, a: Any) -> Apply:
        return Apply(self, [as_toy(a)], [itype()])


add, mul, neg, special_mul, to_int = AddOp(), MulOp(), NegOp(), SpecialMul(), ToIntOp()


def fg(*outs: Variable, inputs: list[Variable] | None = None) -> FunctionGraph:
    from opgraph.graph.traversal import graph_inputs

    ins = inputs if inputs is not None else [v for v in graph_inputs(outs) if v.owner is None]
    ins = [v for v in ins if not hasattr(v, "data")]
    return FunctionGraph(ins, list(outs), clone=False)


def ops_of(g: FunctionGraph) -> list[str]:
    return [type(n.op).__name__ for n in g.toposort()]


@node_rewriter([NegOp])
def local_neg_neg(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``neg(neg(x)) -> x``"""
    (inner,) = node.inputs
    if inner.owner is not None and isinstance(inner.owner.op, NegOp):
        return [inner.owner.inputs[0]]
    return None


@node_rewriter([neg])
def local_neg_of_add(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``neg(add(a, b)) -> add(neg(a), neg(b))``"""
    (inner,) = node.inputs
    if inner.owner is not None and isinstance(inner.owner.op, AddOp):
        a, b = inner.owner.inputs
        return [add(neg(a), neg(b))]
    return None


# ---------------------------------------------------------------- decorator


def test_node_rewriter_records_name_location_doc() -> None:
    assert isinstance(local_neg_neg, NodeRewriter)
    assert local_neg_neg.name == "local_neg_neg"
    assert local_neg_neg.location.endswith(f"test_rewriter_basic.py:{_line_of('local_neg_neg')}")
    assert local_neg_neg.__doc__.startswith("``neg(neg(x)) -> x``")
    assert local_neg_neg.tracks() == [NegOp]
    x = ftype("x")
    assert local_neg_neg(None, neg(neg(x)).owner) == [x]  # still callable like the function


def _line_of(fn_name: str) -> int:
    import inspect

    lines, start = inspect.getsourcelines(sys.modules[__name__])
    for i, line in enumerate(lines):
        if line.startswith(f"def {fn_name}("):
            return max(start, 1) + i - 1  # the decorator line starts the code object
    raise AssertionError(fn_name)


def test_node_rewriter_rejects_bad_tracks() -> None:
    with pytest.raises(TypeError, match="bare @node_rewriter"):
        node_rewriter(lambda fgraph, node: None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="use None"):
        node_rewriter([])
    with pytest.raises(TypeError, match="Op classes or Op instances"):
        node_rewriter([int])


# ---------------------------------------------------------------- tracks dispatch


def _counting(tracks: Any) -> tuple[NodeRewriter, list[Apply]]:
    seen: list[Apply] = []

    @node_rewriter(tracks)
    def local_count(fgraph: Any, node: Apply) -> None:
        """``x -> x`` (counts calls)"""
        seen.append(node)

    return local_count, seen


def test_tracks_skip_other_ops() -> None:
    x, y = ftype("x"), ftype("y")
    out = mul(add(x, y), add(mul(x, y), neg(x)))
    rw, seen = _counting([MulOp])
    in2out(rw).rewrite(fg(out))
    assert len(seen) == 2
    assert all(isinstance(n.op, MulOp) for n in seen)


def test_tracks_are_mro_aware_and_instance_tracks_use_equality() -> None:
    x = ftype("x")
    out = add(special_mul(x, x), add(neg(x), NegOp()(x)))
    by_class, seen_class = _counting([MulOp])
    by_instance, seen_instance = _counting([neg])
    untracked, seen_all = _counting(None)
    in2out(by_class, by_instance, untracked).rewrite(fg(out))
    assert [type(n.op) for n in seen_class] == [SpecialMul]
    assert len(seen_instance) == 2  # NegOp() == neg: equal props
    assert len(seen_all) == 5


def test_tracker_index_keeps_rewriter_order() -> None:
    a, _ = _counting(None)
    b, _ = _counting([MulOp])
    c, _ = _counting([mul])
    d, _ = _counting([AddOp])
    index = TrackerIndex([a, b, c, d])
    assert index.get(mul) == [a, b, c]
    assert index.get(special_mul) == [a, b]
    assert index.get(add) == [a, d]
    assert index.get(neg) == [a]


# ---------------------------------------------------------------- walkers


def neg_chain(x: Variable, n: int) -> Variable:
    out = x
    for _ in range(n):
        out = neg(out)
    return out


@pytest.mark.parametrize(
    "make", [lambda: in2out(local_neg_neg), lambda: out2in(local_neg_neg)], ids=["in2out", "out2in"]
)
@pytest.mark.parametrize("n", [4, 5])
def test_single_pass_walkers_remove_neg_pairs(make: Any, n: int) -> None:
    x = ftype("x")
    g = fg(neg_chain(x, n))
    applied = make().rewrite(g)
    assert applied == n // 2
    assert g.outputs[0] is (x if n % 2 == 0 else g.outputs[0])
    assert ops_of(g) == ["NegOp"] * (n % 2)


def test_equilibrium_reaches_fixed_point() -> None:
    x, y = ftype("x"), ftype("y")
    out = neg(add(neg(x), neg(y)))
    g = fg(out)
    eq = EquilibriumGraphRewriter([local_neg_of_add, local_neg_neg], max_use_ratio=10)
    eq.rewrite(g)
    assert ops_of(g) == ["AddOp"]
    assert g.outputs[0].owner.inputs == [x, y]


def test_in2out_ignores_new_trees_by_default() -> None:
    x, y = ftype("x"), ftype("y")
    g = fg(neg(add(neg(x), neg(y))))
    in2out(local_neg_of_add, local_neg_neg).rewrite(g)
    assert sorted(ops_of(g)) == ["AddOp"] + ["NegOp"] * 4  # neg(neg(.)) left unvisited
    x, y = ftype("x"), ftype("y")
    g2 = fg(neg(add(neg(x), neg(y))))
    out2in(local_neg_of_add, local_neg_neg, ignore_newtrees=False).rewrite(g2)
    assert ops_of(g2) == ["AddOp"]


def test_dict_replacements_and_none_entries() -> None:
    x = ftype("x")

    @node_rewriter([AddOp])
    def local_add_to_mul(fgraph: Any, node: Apply) -> dict[Variable, Variable]:
        """``add(a, b) -> mul(a, b)``"""
        return {node.outputs[0]: mul(*node.inputs)}

    @node_rewriter([MulOp])
    def local_keep(fgraph: Any, node: Apply) -> list[None]:
        """``x -> x``"""
        return [None]

    g = fg(add(x, x))
    assert in2out(local_add_to_mul, local_keep).rewrite(g) == 1
    assert ops_of(g) == ["MulOp"]


def test_equilibrium_max_use_ratio_warns_with_the_rewrite_name() -> None:
    @node_rewriter([AddOp])
    def local_swap_add(fgraph: Any, node: Apply) -> list[Variable]:
        """``add(a, b) -> add(b, a)`` (never reaches a fixed point)"""
        a, b = node.inputs
        return [add(b, a)]

    x, y = ftype("x"), ftype("y")
    g = fg(add(x, y))
    with pytest.warns(RewriteWarning, match=r"local_swap_add \(.*test_rewriter_basic.py:\d+\)"):
        applied = EquilibriumGraphRewriter([local_swap_add], max_use_ratio=3).rewrite(g)
    assert applied == 4  # stops right after passing 3 x 1 node
    assert ops_of(g) == ["AddOp"]


def test_equilibrium_max_use_ratio_from_config() -> None:
    @node_rewriter([NegOp])
    def local_grow(fgraph: Any, node: Apply) -> list[Variable]:
        """``neg(x) -> neg(neg(neg(x)))`` (grows the graph forever)"""
        return [neg(neg(neg(node.inputs[0])))]

    x = ftype("x")
    g = fg(neg(x))
    with change_flags(optdb__max_use_ratio=5.0), pytest.warns(RewriteWarning, match="local_grow"):
        EquilibriumGraphRewriter([local_grow]).rewrite(g)
    assert len(g.apply_nodes) < 50


def test_equilibrium_runs_graph_final_and_cleanup_rewriters() -> None:
    calls: list[str] = []

    class Recorder(GraphRewriter):
        def __init__(self, name: str) -> None:
            self.name = name

        def apply(self, fgraph: Any) -> None:
            calls.append(self.name)

    x = ftype("x")
    g = fg(neg_chain(x, 2))
    eq = EquilibriumGraphRewriter(
        [Recorder("global"), local_neg_neg],
        final_rewriters=[Recorder("final")],
        cleanup_rewriters=[Recorder("cleanup")],
    )
    eq.rewrite(g)
    # pass 1: node pass changes -> cleanup; pass 2: nothing changes.
    assert calls == ["global", "cleanup", "final", "global", "final"]
    assert g.outputs[0] is x


def test_sequential_runs_in_order_and_wraps_node_rewriters() -> None:
    order: list[str] = []

    class Recorder(GraphRewriter):
        def __init__(self, name: str) -> None:
            self.name = name

        def apply(self, fgraph: Any) -> None:
            order.append(self.name)

    x = ftype("x")
    g = fg(neg_chain(x, 2))
    seq = SequentialGraphRewriter(Recorder("a"), local_neg_neg, Recorder("b"))
    seq.rewrite(g)
    assert order == ["a", "b"]
    assert g.outputs[0] is x
    assert len(SequentialGraphRewriter([Recorder("c")])) == 1


# ---------------------------------------------------------------- failures


@node_rewriter([NegOp])
def local_broken(fgraph: Any, node: Apply) -> None:
    """``neg(x) -> ?`` (always raises)"""
    raise ZeroDivisionError("boom")


def test_failing_rewrite_warns_and_is_skipped() -> None:
    x = ftype("x")
    g = fg(neg_chain(x, 2))
    with (
        change_flags(on_opt_error="warn"),
        pytest.warns(RewriteWarning) as record,
    ):
        in2out(local_broken, local_neg_neg).rewrite(g)
    message = str(record[0].message)
    assert message.startswith("Rewrite failure due to: local_broken (")
    assert "test_rewriter_basic.py:" in message
    assert "on node NegOp(" in message
    assert "ZeroDivisionError: boom; the rewrite was skipped" in message
    assert g.outputs[0] is x  # the next rewriter still ran


def test_failing_rewrite_raises_with_flag() -> None:
    x = ftype("x")
    g = fg(neg(x))
    with change_flags(on_opt_error="raise"), pytest.raises(ZeroDivisionError, match="boom"):
        in2out(local_broken).rewrite(g)


class _Refused(ValueError, RewriteAbort):
    """What a plugin raises when a flag asks it to stop compiling."""


@node_rewriter([NegOp])
def local_refusing(fgraph: Any, node: Apply) -> None:
    """``neg(x) -> ?`` (always refuses: a flag asked for it)"""
    raise _Refused("force_device=True and no GPU")


@pytest.mark.parametrize("mode", ["warn", "ignore"])
def test_rewrite_abort_propagates_whatever_on_opt_error_says(mode: str) -> None:
    g = fg(neg(ftype("x")))
    with change_flags(on_opt_error=mode), pytest.raises(_Refused, match="force_device"):
        in2out(local_refusing).rewrite(g)


def test_failing_rewrite_ignored_silently() -> None:
    g = fg(neg(ftype("x")))
    with change_flags(on_opt_error="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        out2in(local_broken).rewrite(g)


def test_failure_callback_overrides_the_flag() -> None:
    seen: list[tuple[str, str]] = []
    g = fg(neg(ftype("x")))
    in2out(local_broken, failure_callback=lambda e, rw, n, f: seen.append((rw.name, str(e))))(g)
    assert seen == [("local_broken", "boom")]


@node_rewriter([NegOp])
def local_wrong_type(fgraph: Any, node: Apply) -> list[Variable]:
    """``neg(x) -> to_int(x)`` (a type error)"""
    return [to_int(node.inputs[0])]


def test_replacement_of_another_type_is_rejected_naming_the_rewrite() -> None:
    x = ftype("x")
    g = fg(neg(x))
    with pytest.warns(RewriteWarning, match="local_wrong_type .* a replacement must have"):
        in2out(local_wrong_type).rewrite(g)
    assert ops_of(g) == ["NegOp"]
    with (
        change_flags(on_opt_error="raise"),
        pytest.raises(TypeError, match=r"rewrite local_wrong_type \(.*\) replaced"),
    ):
        in2out(local_wrong_type).rewrite(g)


def test_wrong_number_of_replacements_is_reported() -> None:
    @node_rewriter([NegOp])
    def local_two(fgraph: Any, node: Apply) -> list[Variable]:
        """``neg(x) -> x, x`` (one too many)"""
        return [node.inputs[0], node.inputs[0]]

    g = fg(neg(ftype("x")))
    with change_flags(on_opt_error="raise"), pytest.raises(ValueError, match="2 replacements"):
        in2out(local_two).rewrite(g)


# ---------------------------------------------------------------- deep graphs

N_DEEP = 16_000


@pytest.fixture
def default_recursion_limit() -> Any:
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    yield
    sys.setrecursionlimit(old)


@pytest.mark.parametrize("walker", ["in2out", "out2in", "equilibrium"])
def test_16000_node_neg_chain(walker: str, default_recursion_limit: Any) -> None:
    assert sys.getrecursionlimit() == 1000
    x = ftype("x")
    g = fg(neg_chain(x, N_DEEP))
    assert len(g.apply_nodes) == N_DEEP
    rewriter = {
        "in2out": lambda: in2out(local_neg_neg),
        "out2in": lambda: out2in(local_neg_neg),
        "equilibrium": lambda: EquilibriumGraphRewriter([local_neg_neg]),
    }[walker]()
    rewriter.rewrite(g)
    assert g.outputs[0] is x
    assert not g.apply_nodes
    assert g.rewrite_stats["local_neg_neg"].applied == N_DEEP // 2


@pytest.mark.parametrize("walker", ["in2out", "out2in", "equilibrium"])
def test_16000_node_add_chain(walker: str, default_recursion_limit: Any) -> None:
    @node_rewriter([AddOp])
    def local_add_zero(fgraph: Any, node: Apply) -> list[Variable] | None:
        """``add(x, 0) -> x``"""
        a, b = node.inputs
        if getattr(b, "data", None) is not None and np.all(b.data == 0):
            return [a]
        return None

    x = ftype("x")
    out = x
    for i in range(N_DEEP):
        out = add(out, 0.0 if i % 2 else 1.0)
    g = fg(out)
    rewriter = {
        "in2out": lambda: in2out(local_add_zero),
        "out2in": lambda: out2in(local_add_zero),
        "equilibrium": lambda: EquilibriumGraphRewriter([local_add_zero]),
    }[walker]()
    rewriter.rewrite(g)
    assert len(g.apply_nodes) == N_DEEP // 2
