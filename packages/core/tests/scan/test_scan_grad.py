"""Calculus through scan: reverse mode for every tap kind, truncate_gradient, go_backwards,
until, nested loops, second derivatives and forward mode, checked by finite differences."""

import numpy as np
import pytest

import opgraph as theano
import opgraph.tensor as T
from opgraph.gradient import verify_grad
from opgraph.testing import assert_allclose

floatX = theano.config.floatX
RNG = np.random.default_rng(42)


def _rand(*shape):
    return (RNG.normal(size=shape) * 0.5).astype("float64")


def test_rnn_sit_sot_with_sequence_and_non_sequence():
    def fun(W, h0, X):
        h, _ = theano.scan(
            lambda x, h, W: T.tanh(T.dot(W, h) + x), sequences=X, outputs_info=h0, non_sequences=W
        )
        return h.sum()

    verify_grad(fun, [_rand(3, 3), _rand(3), _rand(5, 3)], rng=np.random.default_rng(1))


def test_closure_over_weights():
    def fun(W, b, X):
        h, _ = theano.scan(
            lambda x, h: T.tanh(T.dot(h, W) + x + b),
            sequences=X,
            outputs_info=T.zeros_like(b),
        )
        return (h**2).sum()

    verify_grad(fun, [_rand(2, 2), _rand(2), _rand(4, 2)], rng=np.random.default_rng(2))


def test_mit_sot_taps_and_sequence_taps():
    def fun(init, x, a):
        out, _ = theano.scan(
            lambda xm2, x0, y3, y1, a: T.sin(y3 * a + y1 * xm2) + x0,
            sequences=dict(input=x, taps=[-2, 0]),
            outputs_info=dict(initial=init, taps=[-3, -1]),
            non_sequences=a,
        )
        return (out * T.arange(out.shape[0])).sum()

    verify_grad(fun, [_rand(3), _rand(7), np.float64(0.7)], rng=np.random.default_rng(3))


def test_nit_sot_and_two_recurrences():
    def fun(x, h0, c0):
        (h, c, y), _ = theano.scan(
            lambda x_t, h, c: (h * 0.5 + x_t * c, c * 0.9 + x_t, (h * c).sum()),
            sequences=x,
            outputs_info=[h0, c0, None],
        )
        return h[-1].sum() + (y**2).sum() + c.mean()

    verify_grad(fun, [_rand(4, 2), _rand(2), _rand(2)], rng=np.random.default_rng(4))


def test_go_backwards_gradient():
    def fun(x, h0):
        h, _ = theano.scan(
            lambda x_t, h: h * x_t + 1, sequences=x, outputs_info=h0, go_backwards=True
        )
        return (h * np.arange(1, 6)).sum()

    verify_grad(fun, [_rand(5), np.float64(0.3)], rng=np.random.default_rng(5))


def test_symbolic_negative_n_steps_gradient():
    x = T.vector("x")
    n = T.iscalar("n")
    h, _ = theano.scan(
        lambda x_t, h: h * 0.5 + x_t**2,
        sequences=x,
        outputs_info=T.constant(np.float64(0.0)),
        n_steps=n,
    )
    g = T.grad(h[-1], x)
    f = theano.function([x, n], g)
    xv = np.array([1.0, 2.0, 3.0, 4.0])
    # backwards over the last 2 entries: h = (0*.5 + 16)*.5 + 9
    assert_allclose(f(xv, -2), [0.0, 0.0, 6.0, 4.0])
    assert_allclose(f(xv, 2), [1.0, 4.0, 0.0, 0.0])


def test_truncate_gradient_against_numpy():
    x = T.vector("x")
    h0 = T.scalar("h0", dtype="float64")
    h, _ = theano.scan(
        lambda x_t, h: h * 0.5 + x_t, sequences=x, outputs_info=h0, truncate_gradient=2
    )
    gx, gh0 = T.grad(h.sum(), [x, h0])
    f = theano.function([x, h0], [gx, gh0])
    gxv, gh0v = f(np.ones(5), 1.0)
    # Back-propagation through the last two steps only: step t gets 1 from h[t] and 0.5
    # from h[t + 1] when t + 1 is among the last two steps.
    assert_allclose(gxv, [0.0, 0.0, 0.0, 1.5, 1.0])
    assert_allclose(gh0v, 0.0)


def test_until_gradient():
    x0 = T.scalar("x0", dtype="float64")
    a = T.scalar("a", dtype="float64")
    out, _ = theano.scan(
        lambda x, a: (x * a, theano.scan_module.until(x * a > 10)),
        outputs_info=x0,
        non_sequences=a,
        n_steps=50,
    )
    ga = T.grad(out[-1], a)
    f = theano.function([x0, a], [out, ga])
    vals, g = f(1.0, 2.0)
    assert_allclose(vals, [2, 4, 8, 16])
    assert_allclose(g, 4 * 2.0**3)


def test_nested_scan_gradient():
    def fun(M, w):
        def row(r, w):
            inner, _ = theano.scan(
                lambda v, acc, w: T.tanh(acc * w + v),
                sequences=r,
                outputs_info=T.constant(np.float64(0.0)),
                non_sequences=w,
            )
            return inner[-1]

        out, _ = theano.scan(row, sequences=M, non_sequences=w)
        return out.sum()

    verify_grad(fun, [_rand(3, 4), np.float64(0.8)], rng=np.random.default_rng(6))


def test_hessian_through_scan():
    x = T.vector("x")
    out, _ = theano.scan(
        lambda x_t, acc: acc + x_t**3, sequences=x, outputs_info=T.constant(np.float64(0.0))
    )
    cost = out[-1]
    H = theano.gradient.hessian(cost, x)
    f = theano.function([x], H)
    xv = np.array([1.0, 2.0, -1.0])
    assert_allclose(f(xv), np.diag(6 * xv))


def test_grad_of_grad_with_verify_grad():
    def fun(x, w):
        out, _ = theano.scan(
            lambda x_t, h, w: T.tanh(h * w + x_t),
            sequences=x,
            outputs_info=T.constant(np.float64(0.1)),
            non_sequences=w,
        )
        return T.grad(out.sum(), w)

    verify_grad(fun, [_rand(4), np.float64(0.5)], rng=np.random.default_rng(7))


def test_rop_matches_jacobian_product():
    W = T.matrix("W")
    h0 = T.vector("h0")
    v = T.matrix("v")
    h, _ = theano.scan(
        lambda h, W: T.tanh(T.dot(W, h)), outputs_info=h0, non_sequences=W, n_steps=3
    )
    jv = theano.Rop(h, W, v)
    f = theano.function([W, h0, v], jv)
    Wv, hv, vv = _rand(2, 2), _rand(2), _rand(2, 2)
    eps = 1e-6
    g = theano.function([W, h0], h)
    numeric = (g(Wv + eps * vv, hv) - g(Wv - eps * vv, hv)) / (2 * eps)
    assert_allclose(f(Wv, hv, vv), numeric, dtype="float32")


def test_shared_state_gradient_is_undefined():
    counter = theano.shared(np.float64(1.0), name="counter")
    x = T.vector("x")
    out, _updates = theano.scan(
        lambda x_t: ({counter: counter * 2}, x_t * counter)[::-1], sequences=x
    )
    with pytest.raises(Exception, match="shared variable"):
        theano.function([x], T.grad(out.sum(), counter))


def test_random_draw_in_gradient_needs_to_be_returned():
    srng = T.shared_randomstreams.RandomStreams(seed=3)
    x = T.matrix("x")
    w = T.scalar("w", dtype="float64")

    def dropout_step(x_t, h, w):
        mask = srng.binomial(x_t.shape, p=0.5, dtype="float64")
        return T.tanh(h * w + x_t * mask)

    h, _ = theano.scan(
        dropout_step, sequences=x, outputs_info=T.zeros((3,), dtype="float64"), non_sequences=w
    )
    with pytest.raises(ValueError, match="extra output of the step"):
        T.grad(h.sum(), w)

    def returning_step(x_t, h, w):
        mask = srng.binomial(x_t.shape, p=0.5, dtype="float64")
        return T.tanh(h * w + x_t * mask), mask

    (h2, masks), updates = theano.scan(
        returning_step,
        sequences=x,
        outputs_info=[T.zeros((3,), dtype="float64"), None],
        non_sequences=w,
    )
    gw = T.grad(h2.sum(), w)
    f = theano.function([x, w], [h2, masks, gw], updates=updates)
    xv, wv = _rand(4, 3), 0.7
    _hv, mv, gv = f(xv, wv)

    # The same computation in NumPy with the recorded masks.
    def cost(wv):
        h = np.zeros(3)
        total = 0.0
        for t in range(4):
            h = np.tanh(h * wv + xv[t] * mv[t])
            total += h.sum()
        return total

    numeric = (cost(wv + 1e-6) - cost(wv - 1e-6)) / 2e-6
    assert_allclose(gv, numeric, dtype="float32")
