"""DestroyHandler and Supervisor: the rules for in-place Ops, with toy ops and Elemwise."""

import pickle
import time

import numpy as np
import pytest
from toy import add, float64_matrix, mul, neg

import opgraph.tensor as T
from opgraph.graph.basic import Apply
from opgraph.graph.destroyhandler import (
    DestroyHandler,
    Supervisor,
    attach_destroy_handler,
    protected_inputs,
)
from opgraph.graph.features import AlreadyThere, InconsistencyError
from opgraph.graph.fg import FunctionGraph
from opgraph.graph.op import Op
from opgraph.tensor.math import add_inplace, mul_inplace


class IAdd(Op):
    """``x += y``, overwriting x (destroy_map {0: [0]})."""

    __props__ = ()
    destroy_map = {0: [0]}

    def make_node(self, x, y):
        return Apply(self, [x, y], [x.type()])

    def perform(self, node, inputs, out):
        x, y = inputs
        x += y
        out[0][0] = x


class IAddTolerant(IAdd):
    """Like IAdd, but it may read the buffer it overwrites through input 1 too."""

    destroyhandler_tolerate_aliased = [(0, 1)]


class View(Op):
    """The input itself (view_map {0: [0]})."""

    __props__ = ()
    view_map = {0: [0]}

    def make_node(self, x):
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, out):
        out[0][0] = inputs[0]


iadd, iadd_tolerant, view = IAdd(), IAddTolerant(), View()


def _xy():
    return float64_matrix("x"), float64_matrix("y")


def _fg(inputs, outputs, **kw):
    return FunctionGraph(inputs, outputs, features=[DestroyHandler()], **kw)


def _names(nodes):
    return [type(n.op).__name__ for n in nodes]


def test_attach_adds_methods_once_and_detach_removes_them():
    x, y = _xy()
    dh = DestroyHandler()
    fg = FunctionGraph([x, y], [iadd(neg(x), y)], features=[dh])
    assert fg.destroy_handler is dh
    fg.attach_feature(DestroyHandler())  # AlreadyThere: skipped
    assert [f for f in fg.features if isinstance(f, DestroyHandler)] == [dh]
    attach_destroy_handler(fg)
    assert fg.destroy_handler is dh
    with pytest.raises(AlreadyThere):
        DestroyHandler().on_attach(fg)
    fg.remove_feature(dh)
    assert not hasattr(fg, "destroyers") and not hasattr(fg, "destroy_handler")


def test_destroyers_follow_views_to_their_root():
    x, y = _xy()
    a = neg(x)
    v = view(view(a))
    fg = _fg([x, y], [iadd(v, y)], clone=False)
    (node,) = [n for n in fg.apply_nodes if isinstance(n.op, IAdd)]
    assert fg.destroyers(a) == [node]
    assert fg.destroyers(v) == [node]
    assert fg.destroyers(x) == []
    assert fg.has_destroyers([x, v]) and not fg.has_destroyers([x, y])
    assert fg.destroy_handler.root_of(v) is a
    fg.validate()


def test_readers_run_before_the_destroyer():
    x, y = _xy()
    a = neg(x)
    # The destroyer comes first in the outputs, so without orderings it would run first.
    fg = _fg([x, y], [iadd(a, y), mul(a, y), neg(view(a))], clone=False)
    order = fg.toposort()
    destroyer = next(n for n in order if isinstance(n.op, IAdd))
    readers = fg.orderings()[destroyer]
    assert {type(n.op).__name__ for n in readers} == {"Mul", "View", "Neg"}
    for r in readers:
        assert order.index(r) < order.index(destroyer)
    fg.validate()


def test_compiled_values_respect_the_orderings():
    from opgraph.compile.function import function
    from opgraph.compile.mode import Mode

    x, y = _xy()
    a = neg(x)
    f = function([x, y], [iadd(a, y), mul(a, y)], mode=Mode("vm", None), accept_inplace=True)
    xv, yv = np.ones((2, 2)), np.full((2, 2), 3.0)
    s, p = f(xv, yv)
    np.testing.assert_allclose(s, -1 + 3 * np.ones((2, 2)))
    np.testing.assert_allclose(p, -3 * np.ones((2, 2)))  # read a before it was overwritten


def test_a_reader_needing_the_destroyer_is_a_cycle():
    x, y = _xy()
    a = neg(x)
    fg = _fg([x, y], [mul(a, iadd(a, y))], clone=False)
    with pytest.raises(InconsistencyError, match="impossible order"):
        fg.validate()


def test_buffer_destroyed_twice_is_rejected_and_reverted():
    x, y = _xy()
    a = neg(x)
    out1 = add(a, y)
    fg = _fg([x, y], [iadd(a, y), out1], clone=False)
    fg.validate()
    with pytest.raises(InconsistencyError, match="several nodes"):
        fg.replace_all_validate([(out1, iadd(view(a), x))])
    assert fg.outputs[1] is out1  # reverted
    assert len(fg.destroyers(a)) == 1
    fg.validate()


@pytest.mark.parametrize("kind", ["constant", "indestructible", "output", "view_of_output"])
def test_indestructible_buffers(kind):
    x, y = _xy()
    a = neg(x)
    if kind == "constant":
        target = T.constant(np.ones((2, 2)))
        x = T.dmatrix("x")
        fg = FunctionGraph([x], [add_inplace(target, x)], features=[DestroyHandler()])
    else:
        outputs = [iadd(a, y)]
        if kind == "indestructible":
            a.tag.indestructible = True
        elif kind == "output":
            outputs.append(a)
        else:
            outputs.append(view(a))
        fg = _fg([x, y], outputs, clone=False)
    with pytest.raises(InconsistencyError):
        fg.validate()


def test_input_aliasing_and_its_tolerance():
    x, _ = _xy()
    a = neg(x)
    fg = _fg([x], [iadd(a, view(a))], clone=False)
    with pytest.raises(InconsistencyError, match="aliasing"):
        fg.validate()
    x2 = float64_matrix("x2")
    b = neg(x2)
    fg2 = _fg([x2], [iadd_tolerant(b, view(b))], clone=False)
    fg2.validate()


def test_supervisor_protects_inputs_and_replacements_are_reverted():
    x, y = _xy()
    out = add(x, y)
    fg = FunctionGraph([x, y], [out], clone=False)
    sup = Supervisor([x])
    fg.attach_feature(sup)
    fg.attach_feature(DestroyHandler())
    assert protected_inputs(fg) == {x}
    with pytest.raises(InconsistencyError, match="must not change"):
        fg.replace_all_validate([(out, iadd(x, y))])
    assert fg.outputs[0] is out
    fg.replace_all_validate([(out, iadd(y, x))])  # y is not protected
    assert isinstance(fg.outputs[0].owner.op, IAdd)


def test_protected_inputs_default_is_every_input():
    x, y = _xy()
    fg = FunctionGraph([x, y], [add(x, y), neg(y)], update_mapping={1: 1})
    assert protected_inputs(fg) == set(fg.inputs)
    fg.attach_feature(Supervisor([fg.inputs[0]]))
    assert protected_inputs(fg) == {fg.inputs[0]}


def test_state_follows_replacements_and_pruning():
    x, y = _xy()
    a = neg(x)
    d = iadd(a, y)
    fg = _fg([x, y], [mul(d, y)], clone=False)
    assert fg.destroyers(a) == [d.owner]
    fg.replace_all_validate([(d, add(a, y))])
    assert fg.destroyers(a) == []
    assert fg.orderings() == {}
    assert fg.destroy_handler._info == {}
    # The view records follow a view node's input changes.
    x2, y2 = _xy()
    a2 = neg(x2)
    v = view(a2)
    fg2 = _fg([x2, y2], [add(v, y2), iadd(neg(y2), x2)], clone=False)
    b = neg(x2)
    fg2.replace_all_validate([(a2, b)])
    assert fg2.destroy_handler.root_of(v) is b


def test_elemwise_inplace_patterns():
    x, y = T.dmatrix("x"), T.dmatrix("y")
    t = x * 2
    z = add_inplace(t, y)
    fg = FunctionGraph([x, y], [mul_inplace(z, y)], clone=False, features=[DestroyHandler()])
    fg.validate()
    assert fg.destroyers(t) == [z.owner]
    assert str(z.owner.op) == "Elemwise{add,inplace}"
    # Overwriting z again while the other reads it would need a cycle.
    fg2 = FunctionGraph([x, y], [mul(t, add_inplace(t, y))], features=[DestroyHandler()])
    with pytest.raises(InconsistencyError):
        fg2.validate()


def test_pickle_keeps_a_working_handler():
    x, y = _xy()
    a = neg(x)
    fg = _fg([x, y], [iadd(a, y), mul(a, y)], clone=False)
    fg2 = pickle.loads(pickle.dumps(fg))
    dh2 = fg2.destroy_handler
    assert dh2 is not fg.destroy_handler
    (d,) = [n for n in fg2.apply_nodes if isinstance(n.op, IAdd)]
    assert fg2.destroyers(d.inputs[0]) == [d]
    assert len(fg2.orderings()[d]) == 1
    fg2.validate()


def test_deep_view_chain_and_many_destroyers_are_fast(gc_paused):
    n = 5000
    x, y = _xy()
    v = neg(x)
    root = v
    for _ in range(n):
        v = view(v)
    out = v
    for _ in range(n):
        out = iadd(neg(out), y)
    t0 = time.perf_counter()
    fg = _fg([x, y], [out, iadd(v, y)], clone=False)
    fg.validate()
    assert len(fg.destroyers(root)) == 1
    assert time.perf_counter() - t0 < 10


def test_lazy_vm_runs_readers_before_the_destroyer():
    from opgraph.compile.function import function
    from opgraph.compile.mode import Mode
    from opgraph.ifelse import ifelse

    c, x = T.dscalar("c"), T.dvector("x")
    z = x * 2
    outs = [ifelse(c, add_inplace(z, 1), x), z * 3]
    f = function([c, x], outs, mode=Mode("vm", None), accept_inplace=True)
    got = f(1.0, np.ones(2))
    np.testing.assert_allclose(got[0], [3.0, 3.0])
    np.testing.assert_allclose(got[1], [6.0, 6.0])  # z read before add_inplace overwrote it


def test_one_handler_serves_one_graph():
    x, y = _xy()
    fg = _fg([x, y], [iadd(neg(x), y)])
    with pytest.raises(ValueError, match="one graph"):
        fg.clone()
    copy, _ = fg.clone_get_equiv(attach_feature=False)
    copy.attach_feature(DestroyHandler())
    copy.validate()
    assert len(copy.orderings()) == 0 and copy.destroy_handler is not fg.destroy_handler
