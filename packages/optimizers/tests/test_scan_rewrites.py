"""The scan rewrites (``opgraph_optimizers.scan``): each one fires on the compiled graph (Scan
nodes, their layout, ``buffer_sizes``, inner graph sizes) and leaves the values unchanged
(compared with FAST_COMPILE, which runs none of them, and with NumPy).

Functions compile in the default mode, so CI's three runs (c linker, ``linker=py``,
``mode=DEBUG_MODE``) cover the three; the node-level tests run one rewrite on a
FunctionGraph.
"""

from __future__ import annotations

import time
import tracemalloc
import warnings
from typing import Any

import numpy as np
import pytest
from numpy.testing import assert_allclose

import opgraph
import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.compile.mode import Mode, get_mode
from opgraph.configdefaults import config
from opgraph.graph.fg import FunctionGraph
from opgraph.graph.traversal import io_toposort
from opgraph.rewriting import in2out
from opgraph.rewriting.optdb import get_optdb
from opgraph.scan_module.scan_op import Scan
from opgraph.tensor.dot import Dot
from opgraph.tensor.elemwise import DimShuffle, Elemwise
from opgraph.testing import verify_grad
from opgraph_optimizers.merge import MergeOptimizer
from opgraph_optimizers.scan import (
    ScanMerge,
    push_out_non_seq_scan,
    push_out_seq_scan,
    remove_constants_and_unused_inputs_scan,
)

pytestmark = pytest.mark.filterwarnings("ignore::opgraph.link.dispatch.KernelFallbackWarning")

RNG = np.random.default_rng(42)


def _scans(f: Any) -> list[Any]:
    return [n for n in f.maker.fgraph.toposort() if isinstance(n.op, Scan)]


def _inner_nodes(node: Any) -> list[Any]:
    return io_toposort(node.op.inner_inputs, node.op.inner_outputs)


def _compare(inputs: list[Any], outputs: Any, values: list[Any]) -> Any:
    """Compile in the default mode and in FAST_COMPILE; check equal values; return f."""
    f = function(inputs, outputs)
    ref = function(inputs, outputs, mode="FAST_COMPILE")
    got, want = f(*values), ref(*values)
    if not isinstance(got, list):
        got, want = [got], [want]
    for g, w in zip(got, want, strict=True):
        assert_allclose(g, w, rtol=1e-7, atol=1e-10)
    return f


def _rnn_numpy(xs: np.ndarray, h0: np.ndarray, W: np.ndarray) -> np.ndarray:
    hs = []
    h = h0
    for x in xs:
        h = np.tanh(W @ h + x)
        hs.append(h)
    return np.array(hs)


# ---------------------------------------------------------------------------- registration


def test_registered_with_theano_tags_and_positions() -> None:
    optdb = get_optdb()
    positions = optdb.positions()
    assert positions["scan_eqopt1"] == 0.05
    assert positions["scan_eqopt2"] == 1.6
    assert positions["scan_save_mem"] == 1.61
    for name in ("scan_eqopt1", "scan_eqopt2", "scan_save_mem"):
        tags = optdb.entry(name).tags
        assert {"fast_run", "scan"} <= tags and "fast_compile" not in tags
    assert sorted(optdb["scan_eqopt1"].positions(), key=optdb["scan_eqopt1"].positions().get) == [
        "scan_remove_constants_and_unused_inputs0",
        "scan_pushout_nonseqs_ops",
        "scan_pushout_seqs_ops",
        "scan_pushout_output",
    ]
    assert {"scan_merge", "scan_remove_constants_and_unused_inputs1"} <= set(optdb["scan_eqopt2"])


def test_excluding_scan_turns_them_off() -> None:
    xs, h0 = T.matrix("xs"), T.vector("h0")
    out, _ = opgraph.scan(lambda x, h: T.tanh(h + x), sequences=[xs], outputs_info=[h0])
    f = function([xs, h0], out[-1], mode=get_mode(None).excluding("scan"))
    (node,) = _scans(f)
    assert node.op.info.buffer_sizes == ()


@pytest.mark.parametrize(
    ("theano_name", "ours"),
    [
        ("scanOp_remove_constants_and_unused_inputs0", "scan_remove_constants_and_unused_inputs0"),
        ("scanOp_pushout_nonseqs_ops", "scan_pushout_nonseqs_ops"),
        ("scanOp_pushout_seqs_ops", "scan_pushout_seqs_ops"),
        ("scanOp_pushout_output", "scan_pushout_output"),
        ("scan_pushout_dot1", "scan_pushout_output"),
        ("scanOp_remove_constants_and_unused_inputs1", "scan_remove_constants_and_unused_inputs1"),
        ("scanop_remove_constants_and_unused_inputs2", "scan_remove_constants_and_unused_inputs1"),
        ("scanOp_remove_constants_and_unused_inputs3", "scan_remove_constants_and_unused_inputs1"),
        ("scanOp_merge", "scan_merge"),
        ("scanOp_merge_inouts", "scan_merge_inouts"),
        ("scanOp_save_mem", "scan_save_mem"),
        ("all_pushout_opt", "scan_eqopt1"),
    ],
)
def test_theano_names_turn_the_same_rewrites_off(theano_name: str, ours: str) -> None:
    # Theano programs exclude scan rewrites by Theano 1.0's names (optimizer_excluding=...).
    optdb = get_optdb()
    entry = (
        optdb.entry(ours)
        if ours in optdb.positions()
        else next(
            optdb[db].entry(ours) for db in ("scan_eqopt1", "scan_eqopt2") if ours in optdb[db]
        )
    )
    assert theano_name in entry.tags
    if theano_name == "scanOp_save_mem":  # and it acts: the loop keeps every entry
        xs = T.vector("xs")
        total, _ = opgraph.reduce(lambda x, a: a + x, sequences=[xs], outputs_info=[T.zeros(())])
        f = function([xs], total, mode=get_mode(None).excluding(theano_name))
        (node,) = _scans(f)
        assert node.op.info.buffer_sizes == ()


# ---------------------------------------------------------------------------- push out


def test_push_out_non_seq_moves_transpose_out_of_the_loop(loop_by_hand: Any) -> None:
    xs, h0, W = T.matrix("xs"), T.vector("h0"), T.matrix("W")
    (buf,) = loop_by_hand(lambda x, h, W: T.tanh(T.dot(W.T, h) + x), [xs], [h0], [W])
    out = buf[1:]
    assert any(isinstance(n.op, DimShuffle) for n in _inner_nodes(buf.owner))
    fg = FunctionGraph([xs, h0, W], [out], clone=False)
    in2out(push_out_non_seq_scan).rewrite(fg)
    (node,) = [n for n in fg.toposort() if isinstance(n.op, Scan)]
    assert [str(n.op) for n in _inner_nodes(node)] == [
        "dot",
        "Elemwise{add,no_inplace}",
        "Elemwise{tanh,no_inplace}",
    ]
    assert node.op.info.n_non_seqs == 1  # W.T replaced W
    outer_ns = node.inputs[-1]
    assert isinstance(outer_ns.owner.op, DimShuffle) and outer_ns.owner.inputs[0] is W

    vals = [RNG.normal(size=(6, 3)), RNG.normal(size=3), RNG.normal(size=(3, 3))]
    f = _compare([xs, h0, W], out, vals)
    (node,) = _scans(f)
    assert not any(
        isinstance(n.op, DimShuffle) and n.op.new_order == (1, 0) for n in _inner_nodes(node)
    )
    assert_allclose(f(*vals), _rnn_numpy(vals[0], vals[1], vals[2].T))


def test_push_out_seq_makes_whole_sequence_computations() -> None:
    xs, h0, W, U = T.matrix("xs"), T.vector("h0"), T.matrix("W"), T.matrix("U")

    def step(x: Any, h: Any, W: Any, U: Any) -> Any:
        return T.tanh(T.dot(W, h) + T.exp(T.dot(U, x)) * 2)

    out, _ = opgraph.scan(step, sequences=[xs], outputs_info=[h0], non_sequences=[W, U])
    fg = FunctionGraph([xs, h0, W, U], [out], clone=False)
    in2out(push_out_seq_scan).rewrite(fg)
    (node,) = [n for n in fg.toposort() if isinstance(n.op, Scan)]
    ops = [n.op for n in _inner_nodes(node)]
    # Only dot(W, h), the add and the tanh stay in the loop.
    assert sum(isinstance(op, Elemwise) for op in ops) == 2 and len(ops) == 3
    assert node.op.info.n_seqs == 1 and node.op.info.n_non_seqs == 1
    whole = node.inputs[1]
    assert whole.ndim == 2 and whole.owner is not None

    vals = [
        RNG.normal(size=(7, 4)),
        RNG.normal(size=3),
        RNG.normal(size=(3, 3)),
        RNG.normal(size=(3, 4)),
    ]
    f = _compare([xs, h0, W, U], out, vals)
    (node,) = _scans(f)
    assert len(_inner_nodes(node)) <= 3
    xs_v, h, Wv, Uv = vals
    want = []
    for x in xs_v:
        h = np.tanh(Wv @ h + np.exp(Uv @ x) * 2)
        want.append(h)
    assert_allclose(f(*vals), np.array(want))


@pytest.mark.parametrize("go_backwards", [False, True])
def test_push_out_seq_moves_a_batched_rows_product_out_as_one_product(go_backwards: bool) -> None:
    # The RNN step of W10 with a batch: x_t (batch, n) @ U is one product over all steps.
    xs, h0, W, U = T.tensor3("xs"), T.matrix("h0"), T.matrix("W"), T.matrix("U")

    def step(x: Any, h: Any, W: Any, U: Any) -> Any:
        return T.tanh(T.dot(h, W) + T.dot(x, U))

    out, _ = opgraph.scan(
        step, sequences=[xs], outputs_info=[h0], non_sequences=[W, U], go_backwards=go_backwards
    )
    fg = FunctionGraph([xs, h0, W, U], [out], clone=False)
    in2out(push_out_seq_scan).rewrite(fg)
    (node,) = [n for n in fg.toposort() if isinstance(n.op, Scan)]
    inner_dots = [n for n in _inner_nodes(node) if "dot" in str(n.op).lower()]
    assert len(inner_dots) == 1  # dot(h, W) only
    assert node.op.info.n_seqs == 1 and node.inputs[1].ndim == 3

    vals = [RNG.normal(size=(6, 3, 4)), RNG.normal(size=(3, 5))]
    vals += [RNG.normal(size=(5, 5)), RNG.normal(size=(4, 5))]
    f = _compare([xs, h0, W, U], out, vals)
    (node,) = _scans(f)
    products = [n for n in _inner_nodes(node) if "dot" in str(n.op).lower() or "Gemm" in str(n.op)]
    assert len(products) == 1, products
    h, want = vals[1], []
    for x in vals[0][::-1] if go_backwards else vals[0]:
        h = np.tanh(h @ vals[2] + x @ vals[3])
        want.append(h)
    assert_allclose(f(*vals), np.array(want), rtol=1e-6 if config.floatX == "float32" else 1e-7)


def test_push_out_seq_keeps_two_sequences_inside_and_handles_go_backwards() -> None:
    xs, ys, h0, M = T.matrix("xs"), T.matrix("ys"), T.vector("h0"), T.matrix("M")
    out, _ = opgraph.scan(
        lambda x, y, h, M: h + T.sqr(T.dot(x, M)) * y + T.exp(y),
        sequences=[xs, ys],
        outputs_info=[h0],
        non_sequences=[M],
        go_backwards=True,
    )
    fg = FunctionGraph([xs, ys, h0, M], [out], clone=False)
    in2out(push_out_seq_scan).rewrite(fg)
    (node,) = [n for n in fg.toposort() if isinstance(n.op, Scan)]
    # sqr(dot(x, M)) moved out; its product with y reads two sequences (lengths may differ)
    # and stays; exp(y), elementwise alone, stays for the inner fusion.
    ops = sorted(str(n.op) for n in _inner_nodes(node))
    assert "dot" not in ops and "Elemwise{sqr,no_inplace}" not in ops
    assert "Elemwise{exp,no_inplace}" in ops and "Elemwise{mul,no_inplace}" in ops
    assert node.op.info.n_seqs == 2 and node.op.info.n_non_seqs == 0
    vals = [RNG.normal(size=(5, 2)), RNG.normal(size=(7, 2)), RNG.normal(size=2)]
    vals.append(RNG.normal(size=(2, 2)))
    f = _compare([xs, ys, h0, M], out, vals)
    # Each sequence is reversed whole, then its first 5 entries are read.
    x, y = vals[0][::-1], vals[1][::-1][:5]
    want = vals[2] + np.cumsum((x @ vals[3]) ** 2 * y + np.exp(y), 0)
    assert_allclose(f(*vals), want)


def test_push_out_seq_leaves_elementwise_only_chains_in_the_loop() -> None:
    xs, h0 = T.matrix("xs"), T.vector("h0")
    out, _ = opgraph.scan(lambda x, h: h * T.exp(x) + 1, sequences=[xs], outputs_info=[h0])
    fg = FunctionGraph([xs, h0], [out], clone=False)
    assert in2out(push_out_seq_scan).rewrite(fg) == 0


def test_push_out_with_symbolic_negative_n_steps() -> None:
    xs, h0, n = T.matrix("xs"), T.vector("h0"), T.lscalar("n")
    out, _ = opgraph.scan(
        lambda x, h: h * 0.5 + T.exp(x), sequences=[xs], outputs_info=[h0], n_steps=n
    )
    vals = [RNG.normal(size=(5, 2)), RNG.normal(size=2)]
    for steps in (3, -3, 5, -5):
        _compare([xs, h0, n], out, [*vals, steps])


# ---------------------------------------------------------------------------- accumulated products


def _accumulate(a: Any, b: Any, acc: Any) -> Any:
    return acc + T.dot(a, b)


def _tol() -> dict[str, float]:
    return {"rtol": 1e-5, "atol": 1e-5} if config.floatX == "float32" else {"rtol": 1e-10}


def test_push_out_output_turns_a_sum_of_products_into_one_product() -> None:
    # acc = acc0 + sum_t A_t B_t: both operands are sequences, so no loop is left at all.
    A, B, acc0 = T.tensor3("A"), T.tensor3("B"), T.matrix("acc0")
    out, _ = opgraph.scan(_accumulate, sequences=[A, B], outputs_info=[acc0])
    a, b = RNG.normal(size=(5, 3, 4)), RNG.normal(size=(6, 4, 2))  # B is longer: 5 steps
    c = RNG.normal(size=(3, 2))
    f = _compare([A, B, acc0], out[-1], [a, b, c])
    assert _scans(f) == []
    want = c + sum(a[t] @ b[t] for t in range(5))
    assert_allclose(f(a, b, c), want, **_tol())
    assert_allclose(f(a[:0], b[:0], c), c)  # no step: the initial value
    kept = function([A, B, acc0], out[-1], mode=get_mode(None).excluding("scan_pushout_output"))
    (node,) = _scans(kept)
    assert any(isinstance(n.op, Dot) or "Gemm" in str(n.op) for n in _inner_nodes(node))
    assert_allclose(kept(a, b, c), want, **_tol())


@pytest.mark.parametrize("go_backwards", [False, True])
def test_push_out_output_reads_a_recurrence_through_its_buffer(go_backwards: bool) -> None:
    # A weight gradient accumulated through time: acc += h_t.T d_t, h_t a recurrence.
    X, D, h0, W = T.tensor3("X"), T.tensor3("D"), T.matrix("h0"), T.matrix("W")

    def step(x: Any, d: Any, h: Any, acc: Any, W: Any) -> Any:
        h_new = T.tanh(T.dot(h, W) + x)
        return [h_new, acc + T.dot(h_new.T, d)]

    (hs, accs), _ = opgraph.scan(
        step,
        sequences=[X, D],
        outputs_info=[h0, T.zeros_like(W)],
        non_sequences=[W],
        go_backwards=go_backwards,
    )
    x, d = RNG.normal(size=(5, 3, 4)), RNG.normal(size=(5, 3, 4))
    start, w = RNG.normal(size=(3, 4)), RNG.normal(size=(4, 4)) * 0.5
    f = _compare([X, D, h0, W], [hs, accs[-1]], [x, d, start, w])
    (node,) = _scans(f)
    assert node.op.info.n_rec == 1 and node.op.info.n_nit_sot == 0  # only h stays
    assert sum(isinstance(n.op, Dot) for n in _inner_nodes(node)) == 1  # dot(h, W) only
    h, acc, want_h = start, np.zeros((4, 4)), []
    for t in range(4, -1, -1) if go_backwards else range(5):
        h = np.tanh(h @ w + x[t])
        want_h.append(h)
        acc = acc + h.T @ d[t]
    got_h, got_acc = f(x, d, start, w)
    assert_allclose(got_h, np.array(want_h), **_tol())
    assert_allclose(got_acc, acc, **_tol())


def test_push_out_output_stacks_other_step_values_as_new_outputs() -> None:
    # The left operand is computed from the recurrence's previous value: the loop now
    # returns it at every step (a new nit_sot output) instead of accumulating.
    X, h0, acc0 = T.tensor3("X"), T.matrix("h0"), T.matrix("acc0")

    def step(x: Any, h: Any, acc: Any) -> Any:
        return [T.tanh(h + x), acc + T.dot(T.sqr(h), x.T)]

    (hs, accs), _ = opgraph.scan(step, sequences=[X], outputs_info=[h0, acc0])
    x, start, c = RNG.normal(size=(5, 3, 4)), RNG.normal(size=(3, 4)), RNG.normal(size=(3, 3))
    f = _compare([X, h0, acc0], [hs[-1], accs[-1]], [x, start, c])
    (node,) = _scans(f)
    assert node.op.info.n_nit_sot == 1 and node.op.info.n_rec == 1
    h, acc = start, c
    for t in range(5):
        h, acc = np.tanh(h + x[t]), acc + np.square(h) @ x[t].T
    got = f(x, start, c)
    assert_allclose(got[0], h, **_tol())
    assert_allclose(got[1], acc, **_tol())


def test_push_out_output_with_symbolic_negative_n_steps() -> None:
    # A negative n_steps runs over the last entries, backwards (scan() gives the loop
    # abs(n) steps over reversed sequences): the entries read are still the sequences'.
    A, B, acc0, n = T.tensor3("A"), T.tensor3("B"), T.matrix("acc0"), T.lscalar("n")
    out, _ = opgraph.scan(_accumulate, sequences=[A, B], outputs_info=[acc0], n_steps=n)
    a, b, c = RNG.normal(size=(5, 3, 4)), RNG.normal(size=(5, 4, 2)), RNG.normal(size=(3, 2))
    for steps in (3, -3, 5, -5):
        f = _compare([A, B, acc0, n], out[-1], [a, b, c, steps])
        picked = range(steps) if steps >= 0 else range(5 + steps, 5)
        assert_allclose(f(a, b, c, steps), c + sum(a[t] @ b[t] for t in picked), **_tol())
    assert _scans(f) == []
    # No step: the initial value, as in Theano (scan()'s out[-1] is an IndexError without
    # the rewrite: out has no entry).
    assert_allclose(f(a, b, c, 0), c)


def test_push_out_output_leaves_other_loops_alone() -> None:
    A, B, acc0 = T.tensor3("A"), T.tensor3("B"), T.matrix("acc0")
    vals = [RNG.normal(size=(4, 3, 3)), RNG.normal(size=(4, 3, 3)), RNG.normal(size=(3, 3))]

    def dots(f: Any) -> int:
        return sum(
            "dot" in str(n.op).lower() or "Gemm" in str(n.op)
            for node in _scans(f)
            for n in _inner_nodes(node)
        )

    # Every accumulated value is read, not only the last.
    out, _ = opgraph.scan(_accumulate, sequences=[A, B], outputs_info=[acc0])
    assert dots(_compare([A, B, acc0], out, vals)) == 1
    # The product is needed in the loop too.
    both, _ = opgraph.scan(
        lambda a, b, acc: [acc + T.dot(a, b), T.dot(a, b).sum()],
        sequences=[A, B],
        outputs_info=[acc0, None],
    )
    assert dots(_compare([A, B, acc0], [both[0][-1], both[1]], vals)) >= 1
    # An operand that reads the accumulator itself.
    own, _ = opgraph.scan(lambda b, acc: acc + T.dot(acc, b), sequences=[B], outputs_info=[acc0])
    assert dots(_compare([B, acc0], own[-1], vals[1:])) == 1
    # A loop that may stop early.
    until, _ = opgraph.scan(
        lambda a, b, acc: (acc + T.dot(a, b), opgraph.scan_module.until(acc.sum() > 1e9)),
        sequences=[A, B],
        outputs_info=[acc0],
    )
    g = function([A, B, acc0], until[-1], mode=Mode(linker="py", optimizer="fast_run"))
    assert dots(g) == 1
    assert_allclose(g(*vals), vals[2] + sum(vals[0][t] @ vals[1][t] for t in range(4)), **_tol())


def test_push_out_output_gradient() -> None:
    A, B, acc0 = T.tensor3("A"), T.tensor3("B"), T.matrix("acc0")
    out, _ = opgraph.scan(_accumulate, sequences=[A, B], outputs_info=[acc0])
    cost = (T.tanh(out[-1]) ** 2).sum()
    grads = opgraph.grad(cost, [A, B, acc0])
    vals = [RNG.normal(size=(4, 3, 2)), RNG.normal(size=(4, 2, 3)), RNG.normal(size=(3, 3))]
    _compare([A, B, acc0], grads, vals)

    def fn(a: Any, b: Any, c: Any) -> Any:
        res, _ = opgraph.scan(_accumulate, sequences=[a, b], outputs_info=[c])
        return T.tanh(res[-1])

    verify_grad(fn, [v.astype(config.floatX) for v in vals], rng=np.random.default_rng(1))


# ---------------------------------------------------------------------------- save memory


@pytest.mark.parametrize(
    ("index", "size"),
    [(-1, 2), (slice(-3, None), 4), (-2, 3), (slice(None), None), (2, None)],
)
def test_save_mem_sit_sot(index: Any, size: int | None) -> None:
    xs, h0, W = T.matrix("xs"), T.vector("h0"), T.matrix("W")
    out, _ = opgraph.scan(
        lambda x, h, W: T.tanh(T.dot(W, h) + x),
        sequences=[xs],
        outputs_info=[h0],
        non_sequences=[W],
    )
    vals = [RNG.normal(size=(6, 3)), RNG.normal(size=3), RNG.normal(size=(3, 3))]
    f = _compare([xs, h0, W], out[index], vals)
    (node,) = _scans(f)
    assert node.op.info.buffer_sizes == (() if size is None else (size,))
    assert_allclose(f(*vals), _rnn_numpy(*vals)[index])
    if size is not None:  # fewer steps than the entries asked for: the same values
        short = [vals[0][:2], vals[1], vals[2]]
        assert_allclose(f(*short), function([xs, h0, W], out[index], mode="FAST_COMPILE")(*short))


def test_save_mem_mit_sot_nit_sot_and_several_clients() -> None:
    x0 = T.vector("x0")
    xs = T.vector("xs")

    def fib(x: Any, a: Any, b: Any) -> Any:
        return a + b + x, (a + b) * 2

    (fibs, doubled), _ = opgraph.scan(
        fib, sequences=[xs], outputs_info=[{"initial": x0, "taps": [-2, -1]}, None]
    )
    outputs = [fibs[-1], fibs[-2:], doubled[-1]]
    vals = [np.array([0.0, 1.0]), np.arange(8.0)]
    f = _compare([x0, xs], outputs, vals)
    (node,) = _scans(f)
    # fibs: 2 initial entries + the last 2; doubled: its last entry.
    assert node.op.info.buffer_sizes == (4, 1)
    a, b, seq, dbl = 0.0, 1.0, [], []
    for x in vals[1]:
        dbl.append((a + b) * 2)
        a, b = b, a + b + x
        seq.append(b)
    got = f(*vals)
    assert_allclose(got[0], seq[-1])
    assert_allclose(got[1], seq[-2:])
    assert_allclose(got[2], dbl[-1])


def test_save_mem_reduce_and_until() -> None:
    xs = T.vector("xs")
    total, _ = opgraph.reduce(lambda x, acc: acc + x, sequences=[xs], outputs_info=[T.zeros(())])
    f = _compare([xs], total, [np.arange(10.0)])
    (node,) = _scans(f)
    assert node.op.info.buffer_sizes == (2,)
    assert f(np.arange(10.0)) == 45.0

    x0 = T.dscalar("x0")
    vals, _ = opgraph.scan(
        lambda x: (x * 2, opgraph.scan_module.until(x * 2 > 50)), outputs_info=[x0], n_steps=100
    )
    # The py linker: the C loop of opgraph_c (work in progress) stops until-loops early.
    g = function([x0], [vals[-1], vals[-2:]], mode=Mode(linker="py", optimizer="fast_run"))
    (node,) = _scans(g)
    assert node.op.info.buffer_sizes == (3,)
    last, pair = g(1.0)
    assert last == 64.0 and list(pair) == [32.0, 64.0]


def _traced_peak(f: Any, *args: Any) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        value = f(*args)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return value, peak


def test_save_mem_100000_steps_runs_in_flat_memory() -> None:
    h0, n = T.vector("h0"), T.lscalar("n")
    out, _ = opgraph.scan(lambda h: h * 0.999 + 1.0, outputs_info=[h0], n_steps=n)
    # Not DEBUG_MODE (it keeps and re-checks every value: minutes and hundreds of MB); the
    # configured linker.
    f = function([h0, n], out[-1], mode=Mode(optimizer="fast_run"))
    (node,) = _scans(f)
    assert node.op.info.buffer_sizes == (2,)
    start = np.zeros(100)
    value = f(start, 100_000)
    assert_allclose(value, np.full(100, (1 - 0.999**100_000) / 0.001), rtol=1e-9)
    # The whole buffer would be 100,001 x 100 float64 = 80 MB. tracemalloc slows a Python
    # loop tenfold: the py linker's peak is measured over 10,000 steps (8 MB).
    steps = 10_000 if config.linker == "py" else 100_000
    whole_buffer = (steps + 1) * start.nbytes
    _, small = _traced_peak(f, start, 100)
    value, peak = _traced_peak(f, start, steps)
    # Alone, the peak is the 100-step one (about 5 KB) whatever the steps. tracemalloc counts
    # every thread: under pytest-xdist its message thread may allocate a few hundred KB
    # meanwhile, so the bound is a tenth of the whole buffer, not the quiet figure.
    assert peak < small + whole_buffer // 10, (small, peak, whole_buffer)
    assert_allclose(value, np.full(100, (1 - 0.999**steps) / 0.001), rtol=1e-9)


# ---------------------------------------------------------------------------- unused and constant


def test_unused_outputs_and_inputs_are_removed(loop_by_hand: Any) -> None:
    xs, h0, a, unused = T.matrix("xs"), T.vector("h0"), T.vector("a"), T.vector("unused")

    def step(x: Any, h: Any, a: Any, unused: Any) -> Any:
        return [T.tanh(h + x * a), T.exp(x), h * 2]

    hbuf, ex, _ = loop_by_hand(step, [xs], [h0], [a, unused], n_nit=2)
    hs = hbuf[1:]
    assert hbuf.owner.op.info.n_non_seqs == 2
    fg = FunctionGraph([xs, h0, a, unused], [hs], clone=False)
    in2out(remove_constants_and_unused_inputs_scan).rewrite(fg)
    (node,) = [n for n in fg.toposort() if isinstance(n.op, Scan)]
    info = node.op.info
    assert (info.n_rec, info.n_nit_sot, info.n_non_seqs) == (1, 0, 1)
    assert node.inputs[-1] is a
    vals = [RNG.normal(size=(4, 3)), RNG.normal(size=3), RNG.normal(size=3), RNG.normal(size=3)]
    f = _compare([xs, h0, a], hs, vals[:3])
    (node,) = _scans(f)
    assert node.op.info.n_nit_sot == 0 and len(node.outputs) == 1
    f2 = _compare([xs, h0, a, unused], [hs, ex[-1]], vals)
    (node,) = _scans(f2)
    assert (node.op.info.n_nit_sot, node.op.info.buffer_sizes) == (1, (0, 1))


def test_a_recurrence_read_by_a_kept_output_stays() -> None:
    xs, h0, c0 = T.matrix("xs"), T.vector("h0"), T.vector("c0")

    def step(x: Any, h: Any, c: Any) -> Any:
        c_new = c + x
        return T.tanh(h + c_new), c_new

    (hs, _cs), _ = opgraph.scan(step, sequences=[xs], outputs_info=[h0, c0])
    vals = [RNG.normal(size=(5, 3)), RNG.normal(size=3), RNG.normal(size=3)]
    f = _compare([xs, h0, c0], hs, vals)
    (node,) = _scans(f)
    assert node.op.info.n_rec == 2  # cs has no client, but hs reads its past values


def test_constant_non_sequence_is_folded_and_duplicates_merged(loop_by_hand: Any) -> None:
    xs, h0, a = T.matrix("xs"), T.vector("h0"), T.vector("a")
    const = T.constant(np.array([0.5, 2.0, -1.0]))
    step = lambda x, h, a, b, c: h * a + x * b - c  # noqa: E731
    (buf,) = loop_by_hand(step, [xs], [h0], [a, a, const])
    assert buf.owner.op.info.n_non_seqs == 3
    fg = FunctionGraph([xs, h0, a], [buf], clone=False)
    in2out(remove_constants_and_unused_inputs_scan).rewrite(fg)
    (new,) = [n for n in fg.toposort() if isinstance(n.op, Scan)]
    assert new.op.info.n_non_seqs == 1 and new.inputs[-1] is a
    assert any(
        getattr(v, "data", None) is not None for n in _inner_nodes(new) for v in n.inputs
    )  # the constant is in the inner graph
    vals = [RNG.normal(size=(4, 3)), RNG.normal(size=3), RNG.normal(size=3)]
    f = _compare([xs, h0, a], buf, vals)
    (node,) = _scans(f)
    assert node.op.info.n_non_seqs == 1
    want, h = [vals[1]], vals[1]
    for x in vals[0]:
        h = h * vals[2] + x * vals[2] - np.array([0.5, 2.0, -1.0])
        want.append(h)
    assert_allclose(f(*vals), np.array(want))


def test_duplicate_sequences_are_read_once() -> None:
    xs, h0 = T.matrix("xs"), T.vector("h0")
    out, _ = opgraph.scan(
        lambda x, y, h: h * T.tanh(h) + x * y, sequences=[xs, xs], outputs_info=[h0]
    )
    vals = [RNG.normal(size=(5, 3)), RNG.normal(size=3)]
    f = _compare([xs, h0], out, vals)
    (node,) = _scans(f)
    assert node.op.info.n_seqs == 1


# ---------------------------------------------------------------------------- merging loops


def test_independent_loops_over_the_same_steps_merge() -> None:
    xs, h0, c0 = T.matrix("xs"), T.vector("h0"), T.vector("c0")
    hs, _ = opgraph.scan(lambda x, h: T.tanh(h * h + x), sequences=[xs], outputs_info=[h0])
    cs, _ = opgraph.scan(lambda x, c: T.sin(c) + x, sequences=[xs], outputs_info=[c0])
    ys, _ = opgraph.map(lambda x: T.exp(x) * x, sequences=[xs])
    vals = [RNG.normal(size=(5, 3)), RNG.normal(size=3), RNG.normal(size=3)]
    f = _compare([xs, h0, c0], [hs, cs, ys], vals)
    (node,) = _scans(f)
    info = node.op.info
    assert (info.n_rec, info.n_nit_sot) == (2, 1)
    seqs = node.inputs[1 : 1 + info.n_seqs]
    assert len(set(seqs)) == len(seqs)  # the slice of xs both loops read is read once

    fg = FunctionGraph([xs, h0, c0], [hs, cs], clone=False)
    assert ScanMerge().rewrite(fg) == 0  # n_steps: two equal expressions, not yet merged
    MergeOptimizer().rewrite(fg)
    assert ScanMerge().rewrite(fg) == 1
    assert len([n for n in fg.toposort() if isinstance(n.op, Scan)]) == 1


def test_merged_loops_keep_their_shared_updates() -> None:
    xs, h0 = T.matrix("xs"), T.vector("h0")
    count = opgraph.shared(np.int64(0), name="count")
    hs, updates = opgraph.scan(
        lambda x, h: (T.tanh(h + x), {count: count + 1}), sequences=[xs], outputs_info=[h0]
    )
    ys, _ = opgraph.scan(lambda x: T.exp(x), sequences=[xs])
    f = function([xs, h0], [hs[-1], ys[-1]], updates=updates)
    (node,) = _scans(f)
    info = node.op.info
    assert (info.n_rec, info.n_nit_sot, info.n_shared_outs) == (1, 1, 1)
    assert info.buffer_sizes == (2, 1) and info.name == "scan_fn&scan_fn"
    vals = [RNG.normal(size=(4, 3)), RNG.normal(size=3)]
    last, exp_last = f(*vals)
    assert count.get_value() == 4
    f(*vals)
    assert count.get_value() == 8
    assert_allclose(last, _rnn_numpy(vals[0], vals[1], np.eye(3))[-1])
    assert_allclose(exp_last, np.exp(vals[0][-1]))


def test_dependent_loops_do_not_merge() -> None:
    xs, h0, c0 = T.matrix("xs"), T.vector("h0"), T.vector("c0")
    hs, _ = opgraph.scan(lambda x, h: T.tanh(h * h + x), sequences=[xs], outputs_info=[h0])
    cs, _ = opgraph.scan(lambda x, c: T.sin(c) + x, sequences=[hs], outputs_info=[c0])
    vals = [RNG.normal(size=(5, 3)), RNG.normal(size=3), RNG.normal(size=3)]
    f = _compare([xs, h0, c0], [hs, cs], vals)
    assert len(_scans(f)) == 2


def test_until_loops_with_the_same_condition_merge() -> None:
    # Both stop where the running sum of xs passes 3: the merged loop stops there too.
    xs, c0 = T.vector("xs"), T.scalar("c0")

    def stops(step: Any) -> Any:
        def fn(x: Any, acc: Any, c: Any) -> Any:
            new = acc + x
            return [new, step(c, x)], opgraph.scan_module.until(new > 3.0)

        return opgraph.scan(fn, sequences=[xs], outputs_info=[T.zeros_like(c0), c0])[0]

    (s1, a), (s2, b) = stops(lambda c, x: c * 0.5 + x), stops(lambda c, x: T.sin(c) - x)
    vals = [np.array([1.0, 0.5, 2.0, 4.0, 1.0, 9.0]), np.asarray(0.3, dtype=config.floatX)]
    vals[0] = vals[0].astype(config.floatX)
    f = _compare([xs, c0], [a, b, s1 + s2], vals)
    (node,) = _scans(f)
    assert node.op.info.as_while and node.op.info.n_rec == 3  # the two sums became one
    got_a, got_b, total = f(*vals)
    assert len(got_a) == len(got_b) == 3  # 1, 1.5, 3.5: stopped at the third step
    c, d = vals[1], vals[1]
    for x in vals[0][:3]:
        c, d = c * 0.5 + x, np.sin(d) - x
    assert_allclose([got_a[-1], got_b[-1]], [c, d], rtol=1e-6)
    assert_allclose(total, 2 * np.cumsum(vals[0][:3]), rtol=1e-6)


def test_until_loops_with_other_conditions_stay_apart() -> None:
    xs, ys = T.vector("xs"), T.vector("ys")

    def loop(limit: float, seq: Any) -> Any:
        def fn(x: Any, acc: Any) -> Any:
            return acc + x, opgraph.scan_module.until(acc + x > limit)

        return opgraph.scan(fn, sequences=[seq], outputs_info=[T.zeros_like(seq[0])], n_steps=6)[0]

    vals = [np.arange(1.0, 9.0).astype(config.floatX), np.arange(2.0, 10.0).astype(config.floatX)]
    f = _compare([xs], [loop(3.0, xs), loop(10.0, xs)], vals[:1])
    assert len(_scans(f)) == 2
    short, long = f(*vals[:1])
    assert (len(short), len(long)) == (3, 5)  # 1 + 2 + 3 > 3; 1 + ... + 5 > 10
    # The same inner computation over other sequences is another condition.
    g = _compare([xs, ys], [loop(3.0, xs), loop(3.0, ys)], vals)
    assert len(_scans(g)) == 2
    assert [len(v) for v in g(*vals)] == [3, 2]
    # Over the same sequence, the same condition: one loop.
    h = _compare([xs], [loop(3.0, xs), loop(3.0, xs) * 2], vals[:1])
    assert len(_scans(h)) == 1


def test_outputs_computing_the_same_values_become_one() -> None:
    # Two loops over the same steps merge (scan_merge); their equal outputs then become
    # one (scan_merge_inouts): a nit_sot pair and a sit_sot pair with the same start.
    xs, h0 = T.matrix("xs"), T.vector("h0")
    e1, _ = opgraph.scan(lambda x: T.exp(x) * 2, sequences=[xs])
    e2, _ = opgraph.scan(lambda x: T.exp(x) * 2, sequences=[xs])
    r1, _ = opgraph.scan(lambda x, h: T.tanh(h + x), sequences=[xs], outputs_info=[h0])
    r2, _ = opgraph.scan(lambda x, h: T.tanh(h + x), sequences=[xs], outputs_info=[h0])
    vals = [RNG.normal(size=(5, 3)), RNG.normal(size=3)]
    f = _compare([xs, h0], [e1, e2 + 1, r1, r2 * 3], vals)
    (node,) = _scans(f)
    assert node.op.info.n_nit_sot == 1 and node.op.info.n_rec == 1
    e, r = np.exp(vals[0]) * 2, []
    h = vals[1]
    for x in vals[0]:
        h = np.tanh(h + x)
        r.append(h)
    got = f(*vals)
    assert_allclose(got[1], e + 1)
    assert_allclose(got[3], np.array(r) * 3)
    # One loop whose step returns the same computation twice.
    (p1, p2), _ = opgraph.scan(lambda x: [T.exp(x) * 2, T.exp(x) * 2], sequences=[xs])
    g = _compare([xs], [p1, p2 + 1], vals[:1])
    assert _scans(g)[0].op.info.n_nit_sot == 1
    kept = function([xs], [p1, p2 + 1], mode=get_mode(None).excluding("scan_merge_inouts"))
    assert _scans(kept)[0].op.info.n_nit_sot == 2


def test_recurrences_differing_somewhere_in_their_chain_stay_apart() -> None:
    # r1 and r3 share a start and a step function, but r3 reads r2, which differs from r1:
    # assuming r2 == r1 would make r3 == r1 look consistent; only r1 and r4 are the same.
    h0 = T.vector("h0")

    def step(h1: Any, h2: Any, h3: Any, h4: Any) -> Any:
        return [h1 * 0.5 + 1, h2 * 0.3, h2 * 0.5 + 1, h4 * 0.5 + 1]

    outs, _ = opgraph.scan(step, outputs_info=[h0, h0, h0, h0], n_steps=4)
    start = RNG.normal(size=3)
    f = _compare([h0], outs, [start])
    (node,) = _scans(f)
    assert node.op.info.n_rec == 3
    h = [start] * 4
    for _ in range(4):
        h = [h[0] * 0.5 + 1, h[1] * 0.3, h[1] * 0.5 + 1, h[3] * 0.5 + 1]
    got = f(start)
    for g, w in zip(got, h, strict=True):
        assert_allclose(g[-1], w)


def test_nested_scan() -> None:
    X, h0 = T.tensor3("X"), T.vector("h0")

    def outer_step(xm: Any, h: Any) -> Any:
        inner, _ = opgraph.scan(lambda x, g: T.tanh(g + x), sequences=[xm], outputs_info=[h])
        return inner[-1]

    out, _ = opgraph.scan(outer_step, sequences=[X], outputs_info=[h0])
    vals = [RNG.normal(size=(3, 4, 2)), RNG.normal(size=2)]
    f = _compare([X, h0], out[-1], vals)
    h = vals[1]
    for xm in vals[0]:
        for x in xm:
            h = np.tanh(h + x)
    assert_allclose(f(*vals), h)


# ---------------------------------------------------------------------------- gradients


def _ten_output_grad(n_out: int = 10) -> tuple[list[Any], list[Any]]:
    inits = [T.vector(f"h{i}") for i in range(n_out)]
    W, xs = T.matrix("W"), T.matrix("xs")

    def step(x: Any, *args: Any) -> Any:
        hs, W = args[:n_out], args[n_out]
        return [T.tanh(T.dot(W, h) + x * (i + 1)) for i, h in enumerate(hs)]

    outs, _ = opgraph.scan(step, sequences=[xs], outputs_info=inits, non_sequences=[W])
    cost = sum(o.sum() for o in outs)
    return [xs, W, *inits], opgraph.grad(cost, [*inits, W])


def test_gradient_graph_rewritten_and_correct() -> None:
    inputs, grads = _ten_output_grad(3)
    vals = [RNG.normal(size=(6, 3)) * 0.5, RNG.normal(size=(3, 3)) * 0.5]
    vals += [RNG.normal(size=3) for _ in range(3)]
    f = _compare(inputs, grads, vals)
    forward, backward = _scans(f)
    assert backward.op.info.name.startswith("grad_of")
    # W.T left the backward loop; its windows and accumulators keep 2 entries.
    assert not any(
        isinstance(n.op, DimShuffle) and n.op.new_order == (1, 0) for n in _inner_nodes(backward)
    )
    # The windows keep two entries; a reverse loop's nit_sot outputs stay whole.
    assert set(backward.op.info.buffer_sizes[: backward.op.info.n_rec]) == {2}
    assert forward.op.info.buffer_sizes == ()

    # Against finite differences of the forward pass in NumPy.
    def cost(W: np.ndarray) -> float:
        total = 0.0
        for i in range(3):
            total += _rnn_numpy(vals[0] * (i + 1), vals[2 + i], W).sum()
        return total

    eps, Wv = 1e-6, vals[1]
    num = np.zeros_like(Wv)
    for idx in np.ndindex(*Wv.shape):
        d = np.zeros_like(Wv)
        d[idx] = eps
        num[idx] = (cost(Wv + d) - cost(Wv - d)) / (2 * eps)
    assert_allclose(f(*vals)[-1], num, rtol=1e-5, atol=1e-6)


def test_second_derivative_after_rewrites() -> None:
    x0, a = T.dscalar("x0"), T.dscalar("a")
    out, _ = opgraph.scan(
        lambda h, a: T.sin(h * a), outputs_info=[x0], non_sequences=[a], n_steps=4
    )
    g = opgraph.grad(out[-1], a)
    h = opgraph.grad(g, a)
    _compare([x0, a], [out[-1], g, h], [np.float64(0.7), np.float64(1.3)])


def test_rewrite_time_of_a_ten_output_gradient() -> None:
    inputs, grads = _ten_output_grad(10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        f = function(inputs, grads)
        elapsed = time.perf_counter() - start
    stats = f.maker.fgraph.rewrite_stats
    top = {"scan_eqopt1", "scan_eqopt2", "in2out(scan_save_mem)"}
    scan_time = sum(r.time for (name, _), r in stats.records.items() if name in top)
    assert scan_time > 0.0
    assert scan_time < 1.0 and scan_time < elapsed, (scan_time, elapsed)
    _, backward = _scans(f)
    assert backward.op.info.buffer_sizes and len(_inner_nodes(backward)) < 140
