"""``OrderedUpdates``: the ordered updates dict scan returns (Theano's theano.updates)."""

import numpy as np
import pytest

import opgraph as theano
import opgraph.tensor as T


def test_keys_must_be_shared_variables():
    u = theano.OrderedUpdates()
    with pytest.raises(TypeError, match="shared variables"):
        u[T.scalar("x")] = T.scalar("y")


def test_adding_merges_and_rejects_collisions():
    a = theano.shared(np.float64(0.0), name="a")
    b = theano.shared(np.float64(0.0), name="b")
    ua = theano.OrderedUpdates([(a, a + 1)])
    ub = theano.OrderedUpdates([(b, b + 2)])
    merged = ua + ub
    assert list(merged) == [a, b]
    with pytest.raises(KeyError, match="collision"):
        ua + theano.OrderedUpdates([(a, a + 5)])
    f = theano.function([], [], updates=merged)
    f()
    assert a.get_value() == 1.0 and b.get_value() == 2.0


def test_scan_updates_combine_with_user_updates():
    counter = theano.shared(np.int64(0), name="counter")
    step = theano.shared(np.int64(0), name="step")
    n = T.iscalar("n")
    _, updates = theano.scan(lambda: {counter: counter + 1}, n_steps=n)
    f = theano.function([n], [], updates=updates + {step: step + 1})
    f(4)
    assert counter.get_value() == 4 and step.get_value() == 1
