"""In-place rewrites: where they apply, what they must never overwrite, and the values."""

import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import opgraph as theano
import opgraph.tensor as T
from opgraph.compile.mode import Mode
from opgraph.graph.destroyhandler import Supervisor
from opgraph.graph.fg import FunctionGraph
from opgraph.graph.op import Op
from opgraph.ifelse import ifelse
from opgraph.tensor.subtensor import inc_subtensor, set_subtensor
from opgraph.testing import assert_allclose
from opgraph_optimizers.inplace import (
    inplace_elemwise_optimizer,
    local_inplace_setsubtensor,
    register_inplace,
)

FAST_RUN = Mode("vm", "fast_run")
NO_FUSION = FAST_RUN.excluding("fusion")
NO_INPLACE = FAST_RUN.excluding("inplace")
REFERENCE = Mode("vm", None)


def _topo(f):
    return f.maker.fgraph.toposort()


def _destroyers(f):
    return [n for n in _topo(f) if getattr(n.op, "destroy_map", None)]


def _run_checked(f, ref, values):
    """Call ``f`` and ``ref`` on copies; compare outputs; check ``f`` left its arguments alone."""
    originals = [np.array(v, copy=True) for v in values]
    got = f(*values)
    for v, o in zip(values, originals):
        np.testing.assert_array_equal(v, o, err_msg="an input passed by the user was overwritten")
    want = ref(*[np.array(v, copy=True) for v in originals])
    for g, w in zip(
        got if isinstance(got, list) else [got], want if isinstance(want, list) else [want]
    ):
        assert_allclose(g, w)
    return got


def test_named_elemwise_becomes_its_inplace_twin(rng):
    x, y = T.vectors("x", "y")
    z = T.exp(x * y)
    f = theano.function([x, y], [z + 1, T.sin(z)], mode=NO_FUSION)
    names = [str(n.op) for n in _topo(f)]
    assert "Elemwise{mul,no_inplace}" in names  # x, y are the user's: never overwritten
    assert "Elemwise{Exp}[(0, 0)]" in names  # as Theano's in-place pass named it
    ref = theano.function([x, y], [z + 1, T.sin(z)], mode=REFERENCE)
    _run_checked(f, ref, [rng.normal(size=4), rng.normal(size=4)])


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("bcast", [(False,), (False, False), (True, False), (False, True)])
def test_values_over_dtypes_and_broadcast_patterns(rng, dtype, bcast):
    x = T.TensorType(dtype, bcast)("x")
    y = T.TensorType(dtype, (False,) * len(bcast))("y")
    z = x * y + 1
    outs = [z * 2, z - y, T.maximum(z, 0)]
    f = theano.function([x, y], outs, mode=NO_FUSION)
    assert _destroyers(f)
    ref = theano.function([x, y], outs, mode=REFERENCE)
    shape = (3, 4)[: len(bcast)]
    xv = (rng.normal(size=tuple(1 if b else n for b, n in zip(bcast, shape))) * 4).astype(dtype)
    yv = (rng.normal(size=shape) * 4).astype(dtype)
    got = _run_checked(f, ref, [xv, yv])
    assert all(g.dtype == np.dtype(dtype) for g in got)


def test_fused_node_works_in_place_with_theano_name(rng):
    x, y = T.matrices("x", "y")
    z = T.exp(x * y)
    outs = [T.tanh(z) * 2 + 1, T.sqrt(z) - y]
    f = theano.function([x, y], outs, mode=FAST_RUN)
    inplace = [str(n.op) for n in _destroyers(f)]
    assert len(inplace) == 1
    # Theano's name and pattern: constants are inputs 0 and 1, the exp is overwritten
    assert inplace[0] == "Elemwise{Composite{(i0 + (i1 * tanh(i2)))}}[(0, 2)]"
    ref = theano.function([x, y], outs, mode=REFERENCE)
    _run_checked(f, ref, [rng.normal(size=(2, 3)), rng.normal(size=(2, 3))])


def test_user_inputs_and_unupdated_shared_values_are_never_overwritten(rng):
    x = T.matrix("x")
    s_value = rng.normal(size=(3, 3))
    s = theano.shared(s_value.copy(), name="s")
    outs = [x * 2 + s, T.exp(s) - x, set_subtensor(x[1:], 0.0), set_subtensor(s[:1], 1.0)]
    f = theano.function([x], outs, mode=FAST_RUN)
    fg = f.maker.fgraph
    for node in _destroyers(f):
        for ins in node.op.destroy_map.values():
            root = fg.destroy_handler.root_of(node.inputs[ins[0]])
            assert root not in fg.inputs
    ref = theano.function([x], outs, mode=REFERENCE)
    xv = rng.normal(size=(3, 3))
    _run_checked(f, ref, [xv])
    np.testing.assert_array_equal(s.get_value(), s_value)
    assert not _destroyers(f) or all(n.inputs[0] not in fg.inputs for n in _destroyers(f))


def test_updated_shared_values_stay_intact_until_the_call_succeeds(rng):
    x = T.vector("x")
    w0 = rng.normal(size=5)
    w = theano.shared(w0.copy(), name="w")
    f = theano.function([x], T.sum(x), updates={w: w * 0.5 + x}, mode=FAST_RUN)
    fg = f.maker.fgraph
    # One node writes the update into w itself, after every other node, and checks x's
    # shape before writing (a second in-place node on w is refused: it could fail after
    # the first wrote).
    written = [n.inputs[i] for n in _destroyers(f) for (i,) in n.op.destroy_map.values()]
    assert [v in fg.inputs for v in written].count(True) == 1
    xv = rng.normal(size=5)
    f(xv)
    assert_allclose(w.get_value(), w0 * 0.5 + xv)
    with pytest.raises(ValueError):
        f(rng.normal(size=4))  # fails after w * 0.5 could have been written
    assert_allclose(w.get_value(), w0 * 0.5 + xv)


def test_lazy_graphs_keep_their_values(rng):
    x, y = T.dvectors("x", "y")
    for cond in (0.0, 1.0):
        out = ifelse(T.constant(cond), T.exp(x) * y, x - y)
        cost = (out * np.array([1.0, 2.0, 3.0])).sum()
        grads = theano.grad(cost, [x, y])
        f = theano.function([x, y], grads, mode=NO_FUSION)
        ref = theano.function([x, y], grads, mode=REFERENCE)
        _run_checked(f, ref, [rng.normal(size=3), rng.normal(size=3)])
        assert f.maker.fgraph.lazy_node_counter.count == 2
        for node in _destroyers(f):
            (i,) = node.op.destroy_map[0]
            assert [c for c, _ in node.inputs[i].clients] == [node]


def test_updated_shared_value_also_returned_is_not_overwritten(rng):
    w0 = rng.normal(size=4)
    w = theano.shared(w0.copy(), name="w")
    f = theano.function([], w, updates={w: w + 1.0}, mode=FAST_RUN)
    old = f()
    np.testing.assert_array_equal(old, w0)
    assert_allclose(w.get_value(), w0 + 1)


def test_readers_of_an_overwritten_buffer_run_first(rng):
    x = T.matrix("x")
    z = x * 2
    outs = [z + 1, z.T * 3, T.sum(z)]
    f = theano.function([x], outs, mode=NO_FUSION)
    assert _destroyers(f)
    ref = theano.function([x], outs, mode=REFERENCE)
    for _ in range(3):  # reruns reuse storage
        _run_checked(f, ref, [rng.normal(size=(3, 3))])


def test_impossible_orders_are_skipped(rng):
    x = T.vector("x")
    z = T.exp(x)
    w = z + 1
    out = w * z  # z + 1 in place on z would have to run after w * z
    f = theano.function([x], out, mode=NO_FUSION)
    ref = theano.function([x], out, mode=REFERENCE)
    _run_checked(f, ref, [rng.normal(size=4)])
    order = _topo(f)
    for node in _destroyers(f):
        destroyed = node.inputs[node.op.destroy_map[0][0]]
        for client, _ in destroyed.clients:
            if client is not node and client != "output":
                assert order.index(client) < order.index(node)


def test_setsubtensor_and_incsubtensor1_in_place(rng):
    x, y = T.matrices("x", "y")
    idx = T.lvector("idx")
    outs = [
        set_subtensor((x * 2)[1:], 0.0),
        inc_subtensor((x + 3)[idx], y),
        set_subtensor(x[:1], 5.0),
    ]
    f = theano.function([x, y, idx], outs, mode=FAST_RUN)
    names = [str(n.op) for n in _topo(f)]
    assert any(n.startswith("IncSubtensor{InplaceSet;") for n in names)
    assert "AdvancedIncSubtensor1{inplace,inc}" in names
    assert any(n.startswith("IncSubtensor{Set;") for n in names)  # on x itself: a copy
    ref = theano.function([x, y, idx], outs, mode=REFERENCE)
    _run_checked(f, ref, [rng.normal(size=(3, 2)), rng.normal(size=(2, 2)), np.array([0, 2])])
    g = theano.function([x, y, idx], outs, mode=FAST_RUN.excluding("local_inplace_setsubtensor"))
    assert not any("InplaceSet" in str(n.op) for n in _topo(g))


@pytest.mark.parametrize("tag", ["inplace", "inplace_elemwise_optimizer"])
def test_excluding_turns_it_off(rng, tag):
    x, y = T.vectors("x", "y")
    z = T.exp(x * y)
    f = theano.function([x, y], [z + 1, T.sin(z)], mode=NO_FUSION.excluding(tag))
    assert not _destroyers(f)


def test_mutable_inputs_given_by_a_supervisor_may_be_overwritten():
    x, y = T.vectors("x", "y")
    fg = FunctionGraph([x, y], [T.exp(x) * y])
    fx, fy = fg.inputs
    fg.attach_feature(Supervisor([fy]))  # x is mutable, y is not
    inplace_elemwise_optimizer.rewrite(fg)
    (node,) = fg.apply_nodes if len(fg.apply_nodes) == 1 else [fg.outputs[0].owner]
    exp_node = node.inputs[0].owner
    assert str(exp_node.op) == "Elemwise{Exp}[(0, 0)]" and exp_node.inputs[0] is fx
    assert fg.destroyers(fy) == []


def test_debug_mode_agrees(rng):
    x, y = T.matrices("x", "y")
    z = T.exp(x * y)
    outs = [T.tanh(z) + 1, set_subtensor((z * 2)[1:], y[1:])]
    f = theano.function([x, y], outs, mode="DEBUG_MODE")
    assert _destroyers(f)
    ref = theano.function([x, y], outs, mode=REFERENCE)
    _run_checked(f, ref, [rng.normal(size=(3, 3)), rng.normal(size=(3, 3))])


def test_register_inplace_declares_on_this_packages_set_by_default() -> None:
    from opgraph_optimizers.registry import rewrites

    before = len(rewrites)
    rw = register_inplace("local_inplace_nothing", [Op], lambda node: None, position=99)
    try:
        entry = rewrites.entries[-1]
        assert len(rewrites) == before + 1 and entry.rewriter is rw
        assert entry.db_name == "inplace" and {"fast_run", "inplace"} <= set(entry.tags)
    finally:
        rewrites.entries.pop()


def test_setsubtensor_rewrite_is_exported():
    assert local_inplace_setsubtensor.name == "local_inplace_setsubtensor"


# ---------------------------------------------------------------------------- randomized

_UNARY = [T.exp, T.sin, T.neg, lambda v: v.T, lambda v: v.T.T]
_BINARY = [T.add, T.mul, T.sub, lambda a, b: set_subtensor(a[1:], b[1:])]


@st.composite
def _programs(draw):
    steps = draw(
        st.lists(
            st.tuples(st.integers(0, 8), st.integers(0, 40), st.integers(0, 40)),
            min_size=3,
            max_size=12,
        )
    )
    n_out = draw(st.integers(1, 3))
    outs = draw(st.lists(st.integers(0, 40), min_size=n_out, max_size=n_out))
    update = draw(st.integers(0, 40))
    return steps, outs, update


@settings(
    max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(_programs())
def test_random_graphs_agree_with_and_without_inplace(program):
    steps, out_idx, upd_idx = program
    rng = np.random.default_rng(0)
    x = T.matrix("x")
    s_upd = theano.shared(rng.normal(size=(3, 3)), name="s_upd")
    s_ro = theano.shared(rng.normal(size=(3, 3)), name="s_ro")
    pool = [x, s_upd, s_ro]
    for kind, a, b in steps:
        va, vb = pool[a % len(pool)], pool[b % len(pool)]
        if kind < len(_UNARY):
            pool.append(_UNARY[kind](va))
        else:
            pool.append(_BINARY[kind - len(_UNARY)](va, vb))
    outs = [pool[i % len(pool)] for i in out_idx]
    update = pool[upd_idx % len(pool)]
    xv = rng.normal(size=(3, 3))
    results = {}
    modes = (("ref", REFERENCE), ("fused", FAST_RUN), ("unfused", NO_FUSION), ("none", NO_INPLACE))
    for label, mode in modes:
        s_upd.set_value(np.arange(9.0).reshape(3, 3) / 7)
        ro_before = s_ro.get_value()
        f = theano.function([x], outs, updates={s_upd: update}, mode=mode, on_unused_input="ignore")
        arg = xv.copy()
        got = f(arg)
        np.testing.assert_array_equal(arg, xv)
        np.testing.assert_array_equal(s_ro.get_value(), ro_before)
        results[label] = [np.copy(g) for g in got] + [s_upd.get_value()]
    for label in ("fused", "unfused", "none"):
        for g, w in zip(results[label], results["ref"]):
            assert_allclose(g, w)


def test_inputs_marked_mutable_may_be_overwritten(rng):
    x, y = T.vectors("x", "y")
    f = theano.function([theano.In(x, mutable=True), y], T.exp(x) * y, mode=NO_FUSION)
    fg = f.maker.fgraph
    destroyed = [n.inputs[i] for n in _destroyers(f) for (i,) in n.op.destroy_map.values()]
    assert fg.inputs[0] in destroyed and fg.inputs[1] not in destroyed
    yv = rng.normal(size=3)
    np.testing.assert_allclose(f(np.zeros(3), yv.copy()), yv)


def test_copies_and_unpickled_functions_keep_the_order(rng):
    x = T.matrix("x")
    z = x * 2
    outs = [z + 1, z.T * 3]
    f = theano.function([x], outs, mode=NO_FUSION)
    assert _destroyers(f)
    xv = rng.normal(size=(3, 3))
    want = f(xv)
    for g in (f.copy(), pickle.loads(pickle.dumps(f))):
        for got, w in zip(g(xv), want):
            assert_allclose(got, w)


# ---------------------------------------------------------------------------- core's other Ops


def test_mrg_uniform_advances_its_state_in_place_only_when_allowed() -> None:
    from opgraph.compile.io import In
    from opgraph.sandbox.rng_mrg import MRG_RandomStreams, mrg_uniform

    r = T.imatrix("r")
    new_r, u = mrg_uniform.new(r, 1, "float32", (7,))
    mutable = theano.function([In(r, mutable=True)], [new_r, u], mode=FAST_RUN)
    kept = theano.function([r], [new_r, u], mode=FAST_RUN)
    assert [n.op.inplace for n in _topo(mutable)] == [True]
    assert [n.op.inplace for n in _topo(kept)] == [False]
    state = MRG_RandomStreams(seed=42).rstate.reshape(1, 6).astype("int32")
    want_r, want_u = kept(state.copy())
    buffer = state.copy()
    got_r, got_u = mutable(buffer)
    np.testing.assert_array_equal(got_u, want_u)
    np.testing.assert_array_equal(got_r, want_r)
    assert not np.array_equal(buffer, state)  # the mutable input was advanced in place
    # The streams' shared state is copied, not advanced in place: the draw feeds the rest
    # of the graph, which would then have to run after the write (core's UpdateGuard).
    srng = MRG_RandomStreams(seed=3)
    f = theano.function([], srng.uniform((5,)), mode=FAST_RUN)
    assert not any(getattr(n.op, "inplace", False) for n in _topo(f))
    assert not np.array_equal(f(), f())


def test_typed_list_ops_work_in_place_where_safe() -> None:
    import opgraph.typed_list as tl
    from opgraph.compile.io import In

    L = tl.TypedListType(T.dvector)()
    x, y = T.dvector("x"), T.dvector("y")
    grown = tl.reverse(tl.append(tl.append(L, x), y))
    f = theano.function([In(L, mutable=True), x, y], tl.length(grown), mode=FAST_RUN)
    assert [getattr(n.op, "inplace", None) for n in _topo(f)] == [True, True, True, None]
    g = theano.function([L, x, y], tl.length(grown), mode=FAST_RUN)
    assert not any(getattr(n.op, "inplace", False) for n in _topo(g))
    h = theano.function([In(L, mutable=True), x, y], grown, mode=NO_INPLACE)
    items = [np.zeros(2)]
    assert f(items, np.ones(2), np.full(2, 2.0)) == 3
    assert g(items, np.ones(2), np.full(2, 2.0)) == 3
    out = h(items, np.ones(2), np.full(2, 2.0))
    np.testing.assert_array_equal(np.array(out), [[2.0, 2.0], [1.0, 1.0], [0.0, 0.0]])
