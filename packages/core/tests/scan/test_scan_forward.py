"""scan's forward semantics: every tap kind, n_steps, go_backwards, until, shared and random
updates, nesting, the views, and the Theano loop tutorial's examples.

The suite runs under the default mode, ``linker=py`` and DEBUG_MODE (CI runs all three), so
each test exercises the inner graph in the mode of the outer function.
"""

import pickle

import numpy as np
import pytest

import opgraph as theano
import opgraph.tensor as T
from opgraph.scan_module import Scan, until
from opgraph.testing import assert_allclose

floatX = theano.config.floatX
ZERO = np.asarray(0.0, dtype=floatX)


def _scan_nodes(f):
    return [n for n in f.maker.fgraph.apply_nodes if isinstance(n.op, Scan)]


# ----------------------------------------------------------------------- the tutorial


def test_tutorial_power():
    k = T.iscalar("k")
    A = T.vector("A")
    result, updates = theano.scan(
        fn=lambda prior_result, A: prior_result * A,
        outputs_info=T.ones_like(A),
        non_sequences=A,
        n_steps=k,
    )
    power = theano.function(inputs=[A, k], outputs=result[-1], updates=updates)
    a = np.arange(10, dtype=floatX)
    assert_allclose(power(a, 2), a**2)
    assert_allclose(power(a, 5), a**5)


def test_tutorial_polynomial_shortest_sequence_wins():
    coefficients = T.vector("coefficients")
    x = T.scalar("x")
    components, _updates = theano.scan(
        fn=lambda coefficient, power, free_variable: coefficient * (free_variable**power),
        outputs_info=None,
        sequences=[coefficients, T.arange(10000)],
        non_sequences=x,
    )
    f = theano.function([coefficients, x], components.sum())
    assert_allclose(f(np.asarray([1, 0, 2], dtype=floatX), 3), 19.0)


def test_tutorial_jacobian():
    x = T.vector("x")
    y = x**2
    J, updates = theano.scan(
        lambda i, y, x: T.grad(y[i], x), sequences=T.arange(y.shape[0]), non_sequences=[y, x]
    )
    f = theano.function([x], J, updates=updates)
    assert_allclose(f(np.array([4, 4], dtype=floatX)), [[8, 0], [0, 8]])


def test_tutorial_fibonacci_two_taps():
    f0 = T.vector("f0")
    fib, _ = theano.scan(
        lambda a, b: a + b, outputs_info=dict(initial=f0, taps=[-2, -1]), n_steps=8
    )
    f = theano.function([f0], fib)
    assert_allclose(f(np.array([1, 1], dtype=floatX)), [2, 3, 5, 8, 13, 21, 34, 55])


def test_tutorial_accumulating_counter():
    k = theano.shared(0)
    n_sym = T.iscalar("n_sym")
    results, updates = theano.scan(lambda: {k: (k + 1)}, n_steps=n_sym)
    assert results is None
    accumulator = theano.function([n_sym], [], updates=updates, allow_input_downcast=True)
    assert k.get_value() == 0
    accumulator(5)
    assert k.get_value() == 5
    accumulator(3)
    assert k.get_value() == 8


# ----------------------------------------------------------------------- taps and kinds


def test_sequence_taps_and_sit_sot():
    x = T.vector("x")
    h0 = T.scalar("h0")
    out, _ = theano.scan(
        lambda xm1, x0, x2, h: h + xm1 * 100 + x0 * 10 + x2,
        sequences=dict(input=x, taps=[-1, 0, 2]),
        outputs_info=h0,
    )
    f = theano.function([x, h0], out)
    xv = np.arange(8, dtype=floatX)
    h, expect = 0.5, []
    for t in range(1, 6):
        h = h + xv[t - 1] * 100 + xv[t] * 10 + xv[t + 2]
        expect.append(h)
    assert_allclose(f(xv, 0.5), expect)


def test_mit_sot_with_sequence_and_nit_sot():
    x = T.matrix("x")
    init = T.matrix("init")

    def step(x_t, a, b):
        new = a * 0.5 + b + x_t
        return new, new.sum()

    (rec, total), _ = theano.scan(
        step, sequences=x, outputs_info=[dict(initial=init, taps=[-3, -1]), None]
    )
    f = theano.function([x, init], [rec, total])
    xv = np.random.default_rng(1).normal(size=(6, 2)).astype(floatX)
    iv = np.random.default_rng(2).normal(size=(3, 2)).astype(floatX)
    hist = list(iv)
    expect = []
    for t in range(6):
        hist.append(hist[-3] * 0.5 + hist[-1] + xv[t])
        expect.append(hist[-1])
    r, s = f(xv, iv)
    assert_allclose(r, expect)
    assert_allclose(s, np.array(expect).sum(axis=1))


def test_multiple_outputs_user_order_kept():
    n = T.iscalar("n")
    out, _ = theano.scan(
        lambda a, c: (a + 1, a * 2, c - 1),
        outputs_info=[np.float64(0), None, np.int64(10)],
        n_steps=n,
    )
    f = theano.function([n], out)
    a, doubled, c = f(3)
    assert_allclose(a, [1, 2, 3])
    assert_allclose(doubled, [0, 2, 4])
    np.testing.assert_array_equal(c, [9, 8, 7])


def test_go_backwards():
    x = T.vector("x")
    out, _ = theano.scan(
        lambda x_t, h: h * 2 + x_t, sequences=x, outputs_info=ZERO, go_backwards=True
    )
    f = theano.function([x], out)
    xv = np.array([1.0, 2.0, 3.0])
    assert_allclose(f(xv), [3.0, 8.0, 17.0])


def test_negative_n_steps_constant_and_symbolic():
    x = T.vector("x")
    n = T.iscalar("n")
    fixed, _ = theano.scan(lambda x_t: x_t * 1.0, sequences=x, n_steps=-3)
    sym, _ = theano.scan(lambda x_t: x_t * 1.0, sequences=x, n_steps=n)
    f = theano.function([x, n], [fixed, sym])
    xv = np.arange(5.0)
    a, b = f(xv, -3)
    assert_allclose(a, [4.0, 3.0, 2.0])
    assert_allclose(b, [4.0, 3.0, 2.0])
    assert_allclose(f(xv, 2)[1], [0.0, 1.0])


def test_until_stops_early():
    x0 = T.scalar("x0")
    out, _ = theano.scan(lambda x: (x * 2, until(x * 2 > 50)), outputs_info=x0, n_steps=100)
    f = theano.function([x0], out)
    assert_allclose(f(1.0), [2, 4, 8, 16, 32, 64])
    assert_allclose(f(100.0), [200.0])


def test_zero_steps():
    n = T.iscalar("n")
    h0 = T.vector("h0")
    out, _ = theano.scan(lambda h: h + 1, outputs_info=h0, n_steps=n)
    f = theano.function([h0, n], out)
    assert f(np.ones(3), 0).shape == (0, 3)


def test_closure_and_shared_become_non_sequences():
    W = theano.shared(np.eye(2) * 2.0, name="W")
    b = T.vector("b")
    h0 = T.vector("h0")
    out, _ = theano.scan(lambda h: T.dot(W, h) + b, outputs_info=h0, n_steps=3)
    f = theano.function([h0, b], out)
    (node,) = _scan_nodes(f)
    assert node.op.info.n_non_seqs >= 1
    h, expect = np.ones(2), []
    for _ in range(3):
        h = 2 * h + np.array([1.0, -1.0])
        expect.append(h)
    assert_allclose(f(np.ones(2), np.array([1.0, -1.0])), expect)


def test_strict_requires_declared_non_sequences():
    W = theano.shared(np.ones(2), name="W")
    h0 = T.vector("h0")
    with pytest.raises(ValueError, match="strict=True"):
        theano.scan(lambda h: h * W, outputs_info=h0, n_steps=2, strict=True)
    out, _ = theano.scan(
        lambda h, w: h * w, outputs_info=h0, non_sequences=W, n_steps=2, strict=True
    )
    assert_allclose(theano.function([h0], out)(np.full(2, 3.0)), [[3, 3], [3, 3]])


def test_nested_scan():
    M = T.matrix("M")

    def row_cumsum(row):
        inner, _ = theano.scan(lambda v, acc: acc + v, sequences=row, outputs_info=ZERO)
        return inner

    out, _ = theano.scan(row_cumsum, sequences=M)
    f = theano.function([M], out)
    mv = np.arange(12.0).reshape(3, 4)
    assert_allclose(f(mv), np.cumsum(mv, axis=1))


def test_random_stream_inside_loop_advances_once_per_step():
    srng = T.shared_randomstreams.RandomStreams(seed=234)
    out, updates = theano.scan(lambda: srng.uniform((2,)), n_steps=4)
    assert len(updates) == 1
    f = theano.function([], out, updates=updates)
    a, b = f(), f()
    assert a.shape == (4, 2)
    assert not np.allclose(a, b)
    assert len({tuple(r) for r in a}) == 4


def test_mrg_streams_inside_loop():
    from opgraph.sandbox.rng_mrg import MRG_RandomStreams

    srng = MRG_RandomStreams(seed=12)
    out, updates = theano.scan(lambda: srng.uniform((3,)), n_steps=3)
    f = theano.function([], out, updates=updates)
    a, b = f(), f()
    assert a.shape == (3, 3) and not np.allclose(a, b)
    assert ((a > 0) & (a < 1)).all()
    # The generator advances once per step: the loop's rows are the draws of successive
    # calls outside a loop, from the same seed (whose numbers are Theano's).
    plain = theano.function([], MRG_RandomStreams(seed=12).uniform((3,)))
    np.testing.assert_array_equal(np.concatenate([a, b]), [plain() for _ in range(6)])


def test_views_map_reduce_fold():
    x = T.vector("x")
    squares, _ = theano.map(lambda v: v**2, sequences=x)
    total, _ = theano.reduce(lambda v, acc: acc + v, sequences=x, outputs_info=ZERO)
    left, _ = theano.foldl(lambda v, acc: acc * 2 + v, sequences=x, outputs_info=ZERO)
    right, _ = theano.foldr(lambda v, acc: acc * 2 + v, sequences=x, outputs_info=ZERO)
    f = theano.function([x], [squares, total, left, right])
    s, tot, lft, rgt = f(np.array([1.0, 2.0, 3.0]))
    assert_allclose(s, [1, 4, 9])
    assert_allclose(tot, 6.0)
    assert_allclose(lft, ((0 * 2 + 1) * 2 + 2) * 2 + 3)
    assert_allclose(rgt, ((0 * 2 + 3) * 2 + 2) * 2 + 1)


def test_scan_checkpoints_matches_scan():
    x = T.vector("x")
    h0 = T.scalar("h0")
    step = lambda x_t, h: T.tanh(h + x_t)  # noqa: E731
    ref, _ = theano.scan(step, sequences=x, outputs_info=h0)
    ck, _ = theano.scan_checkpoints(step, sequences=[x], outputs_info=[h0], save_every_N=4)
    g_ref = T.grad(ref[-1], [x, h0])
    g_ck = T.grad(ck[-1], [x, h0])
    f = theano.function([x, h0], [ref[-1], ck[-1], *g_ref, *g_ck])
    xv = np.linspace(-1, 1, 10)
    r, c, gx, gh, gx2, gh2 = f(xv, 0.3)
    assert_allclose(r, c)
    assert_allclose(gx, gx2)
    assert_allclose(gh, gh2)


def test_return_list_and_updates_type():
    x = T.vector("x")
    out, updates = theano.scan(lambda v: v + 1, sequences=x, return_list=True)
    assert isinstance(out, list) and len(out) == 1
    assert isinstance(updates, theano.OrderedUpdates)


def test_scan_module_names():
    from opgraph import scan_module
    from opgraph.scan_module import scan_op

    assert scan_module.scan is theano.scan
    assert scan_module.until is until
    assert scan_op.Scan is Scan


def test_pickle_function_with_scan():
    x = T.vector("x")
    out, _ = theano.scan(lambda v, h: h + v, sequences=x, outputs_info=ZERO)
    f = theano.function([x], out)
    g = pickle.loads(pickle.dumps(f))
    assert_allclose(g(np.arange(4.0)), [0, 1, 3, 6])


def test_equal_loops_merge():
    x = T.vector("x")
    a, _ = theano.scan(lambda v: v * 2, sequences=x)
    b, _ = theano.scan(lambda v: v * 2, sequences=x)
    c, _ = theano.scan(lambda v: v * 3, sequences=x)
    assert a.owner.inputs[0].owner is None or True
    assert a.owner.op == b.owner.op
    assert a.owner.op != c.owner.op
    f = theano.function([x], [a + b, c], mode="FAST_RUN")
    assert len(_scan_nodes(f)) <= 2


def test_long_loop_no_recursion_error():
    n = T.iscalar("n")
    out, _ = theano.scan(lambda h: h + 1, outputs_info=T.constant(np.int64(0)), n_steps=n)
    f = theano.function([n], out[-1])
    assert f(100000) == 100000


def test_infer_shape_needs_no_loop():
    x = T.matrix("x")
    h0 = T.vector("h0")
    (h, s), _ = theano.scan(
        lambda x_t, h: (h + x_t, (h * x_t).sum()), sequences=x, outputs_info=[h0, None]
    )
    node = h.owner.inputs[0].owner
    shapes = node.op.infer_shape(node, [[v.shape[d] for d in range(v.ndim)] for v in node.inputs])
    f = theano.function([x, h0], [T.stack(list(shp)) for shp in shapes], on_unused_input="ignore")
    xv, hv = np.ones((4, 3)), np.zeros(3)
    real = theano.function([x, h0], list(node.outputs))(xv, hv)
    for got, value in zip(f(xv, hv), real):
        assert tuple(got) == value.shape
    g = theano.function([x, h0], [h.shape, s.shape], mode="FAST_RUN")
    pytest.importorskip("opgraph_optimizers")
    assert not _scan_nodes(g)
    assert tuple(g(xv, hv)[0]) == (4, 3)
