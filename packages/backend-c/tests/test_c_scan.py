"""Scan's precompiled loop (``opgraph_c._scan.ScanThunk``) against ``Scan.perform``.

Node-level checks run one Scan node's C thunk and ``perform`` (``Scan.run_loop``) on the
same values and compare every output (values, dtypes, shapes, the random state a loop
advanced) and every error (type, text and the note naming the step). Function-level checks
compile loops with the ``c`` linker, the ``py`` linker and ``DebugMode(linker="c")``.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from thunk_checks import layouts, node_storage, twin

import opgraph as theano
import opgraph.tensor as T
from opgraph.compile.debugmode import DebugMode
from opgraph.compile.mode import Mode
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.traversal import ancestors, graph_inputs
from opgraph.scan_module import Scan, ScanInfo, until
from opgraph.testing import assert_allclose
from opgraph_c import _scan
from opgraph_c.registry import get_registry

C_MODE = Mode(linker="c")
PY_MODE = Mode(linker="py")


# ----------------------------------------------------------------------------------------
# helpers


def _scan_node(outputs: Any) -> Apply:
    """A fresh Scan node of the loop computing ``outputs``, with fresh outer inputs (its
    constant non-sequences kept; n_steps always an input)."""
    outs = outputs if isinstance(outputs, list | tuple) else [outputs]
    found = [
        v.owner
        for v in ancestors(list(outs))
        if v.owner is not None and isinstance(v.owner.op, Scan)
    ]
    assert found, "no Scan node"
    return _fresh(found[0].op, found[0])


def _fresh(op: Scan, node: Apply) -> Apply:
    """``op`` applied to fresh variables of ``node``'s input types; inputs computed from
    constants alone (a constant the step read, lifted to a non-sequence) stay constants."""
    inputs: list[Any] = [node.inputs[0].type()]
    for v in node.inputs[1:]:
        roots = graph_inputs([v])
        if all(isinstance(r, Constant) for r in roots):
            inputs.append(v.data if isinstance(v, Constant) else v.eval())
        else:
            inputs.append(v.type())
    return op.make_node(*inputs)


def _thunk(node: Apply, values: Sequence[Any]) -> tuple[Any, list[list[Any]]]:
    storage = node_storage(node, values)
    thunk = get_registry().make_thunk(node, storage, None)
    assert isinstance(thunk, _scan.ScanThunk), thunk
    assert thunk.runs_in_c
    return thunk, [storage[o] for o in node.outputs]


def _outcome(fn: Any) -> tuple[Any, BaseException | None]:
    try:
        return fn(), None
    except Exception as exc:  # compared between the two implementations
        return None, exc


def _same(c: Any, p: Any) -> None:
    assert type(c) is type(p), (type(c), type(p))
    if isinstance(p, np.random.RandomState):
        c_state, p_state = c.get_state(), p.get_state()
        assert np.array_equal(c_state[1], p_state[1]) and c_state[2:] == p_state[2:]
        return
    assert np.asarray(c).dtype == np.asarray(p).dtype
    assert np.shape(c) == np.shape(p)
    np.testing.assert_array_equal(c, p)


def check_node(node: Apply, *values: Any, in_c: bool = True) -> list[Any]:
    """Run ``node``'s C thunk and ``perform`` on copies of ``values``: the same outputs, or
    the same error. Returns the C thunk's outputs ([] when both raised)."""
    c_values = [twin(v) if isinstance(v, np.ndarray) else copy.deepcopy(v) for v in values]
    py_values = [twin(v) if isinstance(v, np.ndarray) else copy.deepcopy(v) for v in values]
    thunk, cells = _thunk(node, c_values)
    calls = thunk.c_calls
    _, c_err = _outcome(thunk)
    py_out: list[list[Any]] = [[None] for _ in node.outputs]
    it = iter(py_values)
    py_in = [v.data if isinstance(v, Constant) else next(it) for v in node.inputs]
    _, py_err = _outcome(lambda: node.op.perform(node, py_in, py_out))
    if in_c:
        assert thunk.c_calls == calls + 1 and thunk.perform_calls == 0
    if py_err is not None or c_err is not None:
        assert type(c_err) is type(py_err), (c_err, py_err)
        assert str(c_err) == str(py_err)
        assert getattr(c_err, "__notes__", None) == getattr(py_err, "__notes__", None)
        return []
    for c, p in zip(cells, py_out, strict=True):
        _same(c[0], p[0])
    for cv, pv in zip(c_values, py_values, strict=True):  # inputs left alone alike
        if isinstance(pv, np.ndarray):
            np.testing.assert_array_equal(cv, pv)
    return [c[0] for c in cells]


def _rnn(dtype: str = "float64") -> tuple[Any, ...]:
    x = T.matrix("x", dtype=dtype)
    a = T.vector("a", dtype=dtype)
    h0 = T.vector("h0", dtype=dtype)
    out, _ = theano.scan(
        lambda xt, h, a: T.tanh(h * a + xt), sequences=[x], outputs_info=[h0], non_sequences=[a]
    )
    return x, a, h0, out


def _value(shape: Sequence[int], dtype: str = "float64", seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# ----------------------------------------------------------------------------------------
# node level


def test_the_entry_is_the_scan_thunk() -> None:
    kernel = get_registry().lookup(Scan)
    assert kernel is not None and kernel.owner == "opgraph-backend-c"


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_sit_sot_every_sequence_layout(dtype: str) -> None:
    *_, out = _rnn(dtype)
    node = _scan_node(out)
    a, h0 = _value((3,), dtype, 1), _value((1, 3), dtype, 2)
    for x in layouts(_value((7, 3), dtype)):
        got = check_node(node, np.int64(7), x, h0, a)
        assert got[0].shape == (8, 3)
    # n_steps shorter than the sequence, a read-only sequence, an int32 n_steps
    x = _value((9, 3), dtype)
    x.flags.writeable = False
    check_node(node, np.int64(4), x, h0, a)
    check_node(node, np.array(5, dtype=np.int64), x, h0, a)


def test_scalar_entries_and_go_backwards() -> None:
    x = T.vector("x")
    h0 = T.scalar("h0")
    out, _ = theano.scan(
        lambda v, h: h * 0.5 + v, sequences=[x], outputs_info=[h0], go_backwards=True
    )
    node = _scan_node(out)
    check_node(node, np.int64(6), _value((6,)), np.array([1.5]))
    check_node(node, np.int64(3), _value((6,))[::2], np.array([1.5]))


def test_mit_sot_taps() -> None:
    f0 = T.lvector("f0")
    fib, _ = theano.scan(
        lambda a, b: a + b, outputs_info=dict(initial=f0, taps=[-2, -1]), n_steps=8
    )
    node = _scan_node(fib)
    got = check_node(node, np.int64(8), np.array([1, 1]))
    assert list(got[0]) == [1, 1, 2, 3, 5, 8, 13, 21, 34, 55]
    # an initial value longer than the lags needs: only its first entries are read
    check_node(node, np.int64(5), np.array([2, 3, 99]))


def test_nit_sot_and_several_sequences_with_taps() -> None:
    x = T.matrix("x")
    y = T.vector("y")
    h0 = T.vector("h0")

    def step(xm1, x0, x2, yt, h):
        new = h + xm1 * x0 - x2 * yt
        return new, T.sum(new) * yt, new[::-1] * 2

    outs, _ = theano.scan(
        step, sequences=[dict(input=x, taps=[-1, 0, 2]), y], outputs_info=[h0, None, None]
    )
    node = _scan_node(outs)
    assert node.op.info.n_seqs == 4 and node.op.info.n_nit_sot == 2
    xv = _value((10, 3))
    seqs = [xv[0:7], xv[1:8], xv[3:10], _value((7,), seed=3)]
    got = check_node(node, np.int64(7), *seqs, _value((1, 3), seed=4))
    assert got[1].shape == (7,) and got[2].shape == (7, 3)
    # negative n_steps: the loop runs over the sequences backwards
    check_node(node, np.int64(-5), *seqs, _value((1, 3), seed=4))


def test_zero_steps() -> None:
    x = T.matrix("x")
    h0 = T.vector("h0")
    outs, _ = theano.scan(lambda v, h: (h + v, v * 2), sequences=[x], outputs_info=[h0, None])
    node = _scan_node(outs)
    got = check_node(node, np.int64(0), _value((4, 3)), _value((1, 3)))
    assert got[0].shape == (1, 3) and got[1].shape == (0, 0)


def test_shared_counter_state() -> None:
    k = theano.shared(np.int64(0))
    x = T.vector("x")
    out, updates = theano.scan(lambda v: (v * k, {k: k + 1}), sequences=[x])
    node = _scan_node([out, *updates.values()])
    assert node.op.info.n_shared_outs == 1
    got = check_node(node, np.int64(5), _value((5,)), np.array(3, dtype=np.int64))
    assert int(got[-1]) == 8


def test_random_stream_drawn_inside_the_loop() -> None:
    srng = T.shared_randomstreams.RandomStreams(seed=234)
    x = T.vector("x")
    out, updates = theano.scan(lambda v: v + srng.uniform(()), sequences=[x])
    node = _scan_node([out, *updates.values()])
    rng = np.random.RandomState(7)
    got = check_node(node, np.int64(6), _value((6,)), rng)
    assert len(set(got[0].tolist())) == 6
    assert got[-1] is not rng  # the loop's input state was not advanced in place
    assert np.array_equal(rng.get_state()[1], np.random.RandomState(7).get_state()[1])


def test_until_stops_early() -> None:
    x0 = T.scalar("x0")
    out, _ = theano.scan(lambda x: (x * 2, until(x * 2 > 50)), outputs_info=x0, n_steps=100)
    node = _scan_node(out)
    assert node.op.info.as_while
    got = check_node(node, np.int64(100), np.array([1.0]))
    assert list(got[0]) == [1, 2, 4, 8, 16, 32, 64]
    check_node(node, np.int64(100), np.array([100.0]))
    check_node(node, np.int64(3), np.array([1.0]))


def _circular(outputs: Any, sizes: tuple[int, ...]) -> Apply:
    node = _scan_node(outputs)
    op = node.op
    info = dataclasses.replace(op.info, buffer_sizes=sizes)
    return _fresh(Scan(op.inner_inputs, op.inner_outputs, info), node)


def test_circular_buffers() -> None:
    f0 = T.vector("f0")
    x = T.matrix("x")

    def step(xt, a, b):
        return a * 0.5 + b + T.sum(xt), xt * 3

    outs, _ = theano.scan(step, sequences=[x], outputs_info=[dict(initial=f0, taps=[-2, -1]), None])
    for sizes in [(3, 2), (4, 5), (2, 1), (0, 0)]:
        node = _circular(outs, sizes)
        for n in (0, 1, 2, 3, 7):
            got = check_node(node, np.int64(n), _value((7, 2)), np.array([1.0, 2.0]))
            full = check_node(
                _circular(outs, (0, 0)), np.int64(n), _value((7, 2)), np.array([1.0, 2.0])
            )
            assert_allclose(got[0][-1:], full[0][-1:])


def test_circular_buffer_with_until() -> None:
    x0 = T.scalar("x0")
    out, _ = theano.scan(lambda x: (x + 1, until(x + 1 > 5)), outputs_info=x0, n_steps=20)
    node = _circular(out, (3,))
    check_node(node, np.int64(20), np.array([0.0]))
    check_node(node, np.int64(2), np.array([0.0]))


def test_entries_kept_by_the_inner_graph_get_fresh_views() -> None:
    # Inner outputs that are the entries themselves (a view of the sequence): the moved
    # view must never change under a value the loop still holds.
    x = T.matrix("x")
    outs, _ = theano.scan(
        lambda v, h: (v, h), sequences=[x], outputs_info=[None, dict(initial=T.zeros(2), taps=[-1])]
    )
    node = _scan_node(outs)
    xv = _value((6, 2))
    got = check_node(node, np.int64(6), xv, np.zeros((1, 2)))
    np.testing.assert_array_equal(got[1], xv)


def test_error_sequence_too_short() -> None:
    *_, out = _rnn()
    node = _scan_node(out)
    check_node(node, np.int64(9), _value((7, 3)), _value((1, 3)), _value((3,)), in_c=False)
    check_node(node, np.int64(-9), _value((7, 3)), _value((1, 3)), _value((3,)), in_c=False)


def test_error_initial_value_too_short() -> None:
    f0 = T.vector("f0")
    fib, _ = theano.scan(
        lambda a, b: a + b, outputs_info=dict(initial=f0, taps=[-3, -1]), n_steps=4
    )
    check_node(_scan_node(fib), np.int64(4), np.array([1.0, 2.0]), in_c=False)


def test_error_output_shape_changes_between_steps() -> None:
    i = T.lvector("i")
    out, _ = theano.scan(lambda k: T.arange(k), sequences=[i])
    node = _scan_node(out)
    check_node(node, np.int64(3), np.array([2, 2, 3]))
    check_node(node, np.int64(3), np.array([2, 2, 2]))
    # a recurrent output whose step returns another shape than its initial value's
    h0 = T.vector("h0")
    out, _ = theano.scan(lambda h: h[:2] + 1, outputs_info=h0, n_steps=3)
    check_node(_scan_node(out), np.int64(3), np.zeros((1, 3)))
    check_node(_scan_node(out), np.int64(3), np.zeros((1, 2)))


def test_error_raised_inside_the_inner_graph_names_the_step() -> None:
    x = T.matrix("x")
    W = T.matrix("W")
    out, _ = theano.scan(lambda v, W: T.dot(W, v), sequences=[x], non_sequences=[W])
    node = _scan_node(out)
    c_out = check_node(node, np.int64(2), _value((2, 3)), _value((4, 5)))
    assert c_out == []


def test_non_c_inner_function_runs_run_loop() -> None:
    x, a, h0, _ = _rnn()
    out, _ = theano.scan(
        lambda xt, h, a: T.tanh(h * a + xt),
        sequences=[x],
        outputs_info=[h0],
        non_sequences=[a],
        mode=PY_MODE,
    )
    node = _scan_node(out)
    values = [np.int64(5), _value((5, 3)), _value((1, 3)), _value((3,))]
    storage = node_storage(node, values)
    thunk = get_registry().make_thunk(node, storage, None)
    assert isinstance(thunk, _scan.ScanThunk) and not thunk.runs_in_c
    thunk()
    assert thunk.perform_calls == 1 and thunk.c_calls == 0
    py_out: list[list[Any]] = [[None]]
    node.op.perform(node, values, py_out)
    np.testing.assert_array_equal(storage[node.outputs[0]][0], py_out[0][0])


def test_moving_and_fresh_views_agree() -> None:
    *_, out = _rnn()
    node = _scan_node(out)
    values = [np.int64(6), _value((6, 3)), _value((1, 3)), _value((3,))]
    results = []
    for fresh in (False, True):
        storage = node_storage(node, values)
        thunk = get_registry().make_thunk(node, storage, None)
        thunk.fresh_views = fresh
        thunk()
        results.append(storage[node.outputs[0]][0])
    np.testing.assert_array_equal(results[0], results[1])


def _in_place_and_copied(node: Apply, values: Sequence[Any]) -> tuple[Any, list[Any]]:
    """Run ``node``'s C thunk with in-place outputs (checked against ``perform``), then
    copying every output; both give the same bits. Returns the thunk and its outputs."""
    got = check_node(node, *values)
    storage = node_storage(node, [twin(v) if isinstance(v, np.ndarray) else v for v in values])
    thunk = get_registry().make_thunk(node, storage, None)
    thunk.inplace_outputs = False
    thunk()
    assert thunk.inplace_writes == 0
    for g, o in zip(got, node.outputs, strict=True):
        np.testing.assert_array_equal(g, storage[o][0])
    storage = node_storage(node, [twin(v) if isinstance(v, np.ndarray) else v for v in values])
    thunk = get_registry().make_thunk(node, storage, None)
    thunk()
    return thunk, got


@pytest.mark.parametrize("sizes", [None, (2, 3)])
def test_outputs_written_in_place(sizes: Any) -> None:
    # 32 x 32 float64 entries (8 KB): the fused step writes each one into its buffer entry.
    x, h0, a = T.tensor3("x"), T.matrix("h0"), T.matrix("a")
    outs, _ = theano.scan(
        lambda xt, h, a: [T.tanh(h * a + xt), T.exp(xt) - h],
        sequences=[x],
        outputs_info=[h0, None],
        non_sequences=[a],
    )
    node = _scan_node(outs) if sizes is None else _circular(outs, sizes)
    values = [
        np.int64(7),
        _value((7, 32, 32)),
        _value((1, 32, 32), seed=1),
        _value((32, 32), seed=2),
    ]
    thunk, got = _in_place_and_copied(node, values)
    assert [c is not None for c in thunk.write_cells] == [True, True]
    # every recurrent entry; nit_sot entries from the second step (their buffer is made
    # at the first)
    assert thunk.inplace_writes == 7 + 6
    h, hs = values[2][0], []
    for t in range(7):
        h = np.tanh(h * values[3] + values[1][t])
        hs.append(h)
    assert_allclose(got[0][-1], hs[-1])


def test_outputs_written_in_place_backwards_with_taps_and_until() -> None:
    x, f0 = T.tensor3("x"), T.tensor3("f0")

    def step(xt, a, b):
        new = a * 0.5 + b + xt
        return [new, xt * 3], until(T.sum(new) > 1e300)

    outs, _ = theano.scan(
        step,
        sequences=[x],
        outputs_info=[dict(initial=f0, taps=[-2, -1]), None],
        go_backwards=True,
    )
    node = _scan_node(outs)
    values = [np.int64(5), _value((5, 16, 40)), _value((2, 16, 40), seed=3)]
    thunk, _ = _in_place_and_copied(node, values)
    assert thunk.inplace_writes == 5 + 4


def test_an_in_place_chain_writes_from_its_first_node() -> None:
    # set_subtensor overwrites the elementwise result in place: that result's node writes
    # into the entry.
    x, h0 = T.tensor3("x"), T.matrix("h0")
    out, _ = theano.scan(
        lambda xt, h: T.set_subtensor((h * 0.5 + xt)[0], 0.0), sequences=[x], outputs_info=[h0]
    )
    fn = theano.function([x, h0], out, mode=C_MODE)
    (thunk,) = [t for t in fn.fn.thunks if isinstance(t, _scan.ScanThunk)]
    assert thunk.write_cells[0] is not None
    xv, hv = _value((4, 24, 24)), _value((24, 24), seed=1)
    got = fn(xv, hv)
    assert thunk.inplace_writes == 4
    h, want = hv, []
    for t in range(4):
        h = h * 0.5 + xv[t]
        h[0] = 0.0
        want.append(h)
    assert_allclose(got, np.array(want))


def test_small_entries_and_views_are_copied() -> None:
    # 8-byte entries cost less to copy than a view per step; an entry that is the sequence's
    # own entry (a view) is never written in place.
    *_, out = _rnn()
    node = _scan_node(out)
    thunk, _ = _in_place_and_copied(
        node, [np.int64(6), _value((6, 3)), _value((1, 3)), _value((3,))]
    )
    assert thunk.write_cells[0] is not None and thunk.inplace_writes == 0
    x = T.tensor3("x")
    outs, _ = theano.scan(lambda v: v, sequences=[x])
    node = _scan_node(outs)
    thunk, _ = _in_place_and_copied(node, [np.int64(3), _value((3, 32, 32))])
    assert thunk.write_cells == [None] and thunk.inplace_writes == 0


# ----------------------------------------------------------------------------------------
# function level


def _compile(inputs: list[Variable], outputs: Any, updates: Any = None) -> list[Any]:
    fns = [
        theano.function(inputs, outputs, updates=updates, mode=mode)
        for mode in (C_MODE, PY_MODE, DebugMode(linker="c"))
    ]
    scans = [
        t for n, t in zip(fns[0].fn.nodes, fns[0].fn.thunks, strict=True) if isinstance(n.op, Scan)
    ]
    assert scans and all(isinstance(t, _scan.ScanThunk) and t.runs_in_c for t in scans)
    return fns


def _agree(fns: list[Any], *values: Any) -> None:
    """The c (and DebugMode) functions' outputs are the py function's."""
    expected = fns[1](*copy.deepcopy(values))
    for fn in [fns[0], *fns[2:]]:
        got = fn(*copy.deepcopy(values))
        for g, e in zip(got, expected, strict=True):
            assert np.asarray(g).dtype == np.asarray(e).dtype
            assert_allclose(g, e)


def test_function_rnn_matches_numpy() -> None:
    x, a, h0, out = _rnn()
    fns = _compile([x, a, h0], [out, out[-1]])
    xv, av, hv = _value((20, 4)), _value((4,), seed=1), _value((4,), seed=2)
    h, ref = hv, []
    for t in range(20):
        h = np.tanh(h * av + xv[t])
        ref.append(h)
    for fn in fns:
        got = fn(xv, av, hv)
        assert_allclose(got[0], np.array(ref))
        assert_allclose(got[1], ref[-1])


def test_function_gemv_rnn_and_nested_scan() -> None:
    xs = T.matrix("xs")
    h0 = T.vector("h0")
    W = T.matrix("W")

    def step(xt, h, W):
        inner, _ = theano.scan(lambda v, acc: acc + v, sequences=[xt], outputs_info=T.zeros(()))
        return T.tanh(T.dot(W, h) + xt + inner[-1])

    out, _ = theano.scan(step, sequences=[xs], outputs_info=[h0], non_sequences=[W])
    fns = _compile([xs, h0, W], [out])
    # DebugMode left out: it reports core's scan_save_mem rewrite of the inner loop as a
    # BadRewrite (the outer loop's own checks are in the other function-level tests).
    _agree(fns[:2], _value((6, 5)), _value((5,), seed=1), _value((5, 5), seed=2) * 0.1)
    inner_scan = next(n for n in fns[0].fn.nodes if isinstance(n.op, Scan))
    inner_fn = inner_scan.op.inner_function(C_MODE)
    nested = [t for n, t in zip(inner_fn.vm.nodes, inner_fn.vm.thunks) if isinstance(n.op, Scan)]
    assert nested and all(isinstance(t, _scan.ScanThunk) and t.runs_in_c for t in nested)


def test_function_counter_random_and_until() -> None:
    k = theano.shared(np.int64(0), name="k")
    srng = T.shared_randomstreams.RandomStreams(seed=3)
    x = T.vector("x")

    def step(v):
        return v * k + srng.uniform(()), {k: k + 1}

    out, updates = theano.scan(step, sequences=[x])
    c_fn = _compile([x], [out], updates=updates)[0]
    first, second = c_fn(np.ones(4))[0], c_fn(np.ones(4))[0]
    assert k.get_value() == 8
    assert not np.allclose(first - np.arange(4), second - np.arange(4, 8))

    x0 = T.scalar("x0")
    stop, _ = theano.scan(lambda v: (v * 2, until(v * 2 > 50)), outputs_info=x0, n_steps=100)
    fns = _compile([x0], [stop])
    _agree(fns, np.float64(1.0))
    assert_allclose(fns[0](1.0)[0], [2, 4, 8, 16, 32, 64])


def test_function_long_loop_runs_in_c() -> None:
    x, a, h0, out = _rnn()
    fn = _compile([x, a, h0], [out[-1]])[0]
    thunk = next(t for n, t in zip(fn.fn.nodes, fn.fn.thunks) if isinstance(n.op, Scan))
    xv = _value((20000, 2)) * 0.1
    got = fn(xv, np.ones(2), np.zeros(2))[0]
    assert thunk.c_calls == 1 and thunk.perform_calls == 0
    h = np.zeros(2)
    for t in range(20000):
        h = np.tanh(h + xv[t])
    assert_allclose(got, h)


def test_inner_kernels_build_in_the_outer_batch(run_python, tmp_path) -> None:
    """The kernels of a loop's body (and of its gradient's loop) compile in the same batch
    as the outer graph's: one wait for the compiler, not one per inner graph."""
    proc = run_python(
        """
        import numpy as np
        import opgraph as theano
        import opgraph.tensor as T
        from opgraph_c import cache

        builds = []
        original = cache.KernelCache._build

        def counting(self, todo):
            builds.append(len(todo))
            return original(self, todo)

        cache.KernelCache._build = counting
        W = T.matrix("W")
        X = T.tensor3("X")
        h0 = T.matrix("h0")
        h, _ = theano.scan(
            lambda x, h, W: T.tanh(T.dot(h, W) + x * 0.5), sequences=X, outputs_info=h0,
            non_sequences=W,
        )
        f = theano.function([W, X, h0], [h.sum(), T.grad(h.sum(), W)])
        f(np.eye(3), np.ones((4, 2, 3)), np.zeros((2, 3)))
        print("BUILDS", builds)
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("BUILDS"))
    builds = ast.literal_eval(line.split(" ", 1)[1])
    assert len(builds) == 1 and builds[0] >= 2, line


def test_reverse_loop_reads_and_writes_from_the_end(c_mode, py_mode) -> None:
    """``ScanInfo.reverse``: step t reads sequence entry n-1-t and writes nit_sot entry
    n-1-t (the gradient's loops); C and perform agree."""
    x_t = T.dscalar("x_t")
    acc = T.dscalar("acc")
    info = ScanInfo(
        n_seqs=1,
        rec_taps=((-1,),),
        n_mit_sot=0,
        n_nit_sot=1,
        n_shared_outs=0,
        n_non_seqs=0,
        reverse=True,
    )
    op = Scan([x_t, acc], [acc * 10 + x_t, x_t + acc], info)
    xs = T.dvector("xs")
    init = T.dvector("init")
    outs = op(T.constant(np.int64(3)), xs, init, return_list=True)
    values = [np.array([1.0, 2.0, 3.0, 99.0]), np.array([0.0])]
    for mode in (c_mode, py_mode):
        f = theano.function([xs, init], outs, mode=mode)
        buf, nit = f(*values)
        np.testing.assert_allclose(buf, [0.0, 3.0, 32.0, 321.0])
        np.testing.assert_allclose(nit, [1 + 32.0, 2 + 3.0, 3 + 0.0])
