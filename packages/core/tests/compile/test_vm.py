"""The VMs: garbage collection of intermediates, lazy evaluation, free(), deep graphs."""

from __future__ import annotations

import numpy as np
import pytest
from compile_toys import LINKERS, MODES, Counted, Raise, ifelse, mode_with

import opgraph.tensor as T
from opgraph.compile import function
from opgraph.compile.mode import Mode
from opgraph.graph.fg import FunctionGraph
from opgraph.link.basic import PerformLinker, VMLinker
from opgraph.link.vm import Loop, Stack, gc_plan


def _intermediates(f):  # type: ignore[no-untyped-def]
    fg = f.maker.fgraph
    return [v for v in f.fn.storage_map if v.owner is not None and v not in fg.outputs]


@pytest.mark.parametrize("linker", ["py", "vm"])
def test_gc_frees_intermediates_after_the_call(linker: str) -> None:
    x = T.dvector("x")
    f = function([x], ((x * 2) + 1).sum(), mode=Mode(linker, "fast_run"))
    assert isinstance(f.fn, Loop) and f.fn.allow_gc
    assert f([1.0, 2.0]) == 8.0
    inter = _intermediates(f)
    assert inter and all(f.fn.storage_map[v][0] is None for v in inter)


def test_gc_plan_frees_each_variable_after_its_last_client() -> None:
    x = T.dvector("x")
    y = x * 2
    z = y + 1
    w = z + y  # y's last use is here
    fg = FunctionGraph([x], [w.sum()])
    order = fg.toposort()
    plan = gc_plan(order, fg.outputs)
    last = {v: i for i, vs in enumerate(plan) for v in vs}
    y_c = next(v for v in fg.variables if v.owner and str(v.owner.op).startswith("Elemwise{mul"))
    users = [i for i, n in enumerate(order) if y_c in n.inputs]
    assert last[y_c] == max(users)
    assert all(v.owner is not None and v not in fg.outputs for v in last)


def test_nogc_keeps_intermediates_and_free_releases_them() -> None:
    x = T.dvector("x")
    f = function([x], ((x * 2) + 1).sum(), mode=Mode("vm_nogc", "fast_run"))
    f([1.0, 2.0])
    inter = _intermediates(f)
    assert all(f.fn.storage_map[v][0] is not None for v in inter)
    f.free()
    assert all(f.fn.storage_map[v][0] is None for v in inter)
    assert f([1.0, 2.0]) == 8.0


def test_required_input_cells_are_emptied_after_a_call() -> None:
    x = T.dvector("x")
    f = function([x], x * 2)
    f([1.0])
    assert f.input_storage[0].storage[0] is None


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("name", MODES)
def test_lazy_ifelse_never_runs_the_untaken_branch(name: str, linker: str) -> None:
    c = T.dscalar("c")
    x = T.dvector("x")
    Raise.calls = 0
    out = ifelse(c, x * 2, Raise("the else branch ran")(x))
    f = function([c, x], out, mode=mode_with(name, linker))
    np.testing.assert_array_equal(f(1.0, [1.0, 2.0]), [2.0, 4.0])
    assert Raise.calls == 0
    with pytest.raises(ValueError, match="the else branch ran"):
        f(0.0, [1.0, 2.0])


def test_lazy_graph_uses_stack_and_counts_only_run_nodes() -> None:
    c = T.dscalar("c")
    x = T.dvector("x")
    Counted.runs = 0
    f = function([c, x], ifelse(c, Counted()(x), Counted()(x * 3)), mode=Mode("vm", "fast_run"))
    assert isinstance(f.fn, Stack)
    f(1.0, [1.0])
    assert Counted.runs == 1
    f(0.0, [1.0])
    assert Counted.runs == 2


def test_stack_frees_intermediates_with_gc() -> None:
    c = T.dscalar("c")
    x = T.dvector("x")
    f = function([c, x], ifelse(c, (x * 2) + 1, x - 1), mode=Mode("vm", "fast_run"))
    np.testing.assert_array_equal(f(1.0, [1.0]), [3.0])
    assert all(f.fn.storage_map[v][0] is None for v in _intermediates(f))


@pytest.mark.parametrize("lazy", [False, True])
def test_deep_graphs_run_without_recursion(lazy: bool) -> None:
    x = T.dscalar("x")
    y = x
    for _ in range(3000):
        y = y + 1.0
    mode = Mode(VMLinker(lazy=lazy), None)
    f = function([x], y, mode=mode)
    assert isinstance(f.fn, Stack if lazy else Loop)
    assert f(0.0) == 3000.0


def test_without_lazy_evaluation_both_branches_run_with_the_same_result() -> None:
    c = T.dscalar("c")
    x = T.dvector("x")
    Counted.runs = 0
    out = ifelse(c, x * 2, Counted()(x))
    f = function([c, x], out, mode=Mode(VMLinker(lazy=False), "fast_run"))
    assert isinstance(f.fn, Loop)
    np.testing.assert_array_equal(f(1.0, [1.0]), [2.0])
    np.testing.assert_array_equal(f(0.0, [1.0]), [1.0])
    assert Counted.runs == 2
    f.free()
    np.testing.assert_array_equal(f(1.0, [3.0]), [6.0])


def test_perform_linker_make_function() -> None:
    x = T.dvector("x")
    fg = FunctionGraph([x], [x * 2])
    fn = PerformLinker().accept(fg).make_function()
    np.testing.assert_array_equal(fn(np.array([1.0, 2.0])), [2.0, 4.0])


def test_linker_accept_clones_for_a_second_graph() -> None:
    x = T.dvector("x")
    linker = VMLinker()
    a = linker.accept(FunctionGraph([x], [x * 2]))
    b = linker.accept(FunctionGraph([x], [x * 3]))
    assert a is linker and b is not linker and b.fgraph is not a.fgraph
