"""RandomStreams: Theano's numbers, default updates, seeding, every distribution method."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.mode import get_mode
from opgraph.tensor.random_ops import RandomFunction
from opgraph.tensor.shared_randomstreams import RandomStreams
from opgraph.tensor.sharedvar import RandomStateSharedVariable
from opgraph.testing.checks import ALL_MODES

LINKERS = ["py", "vm"]

# Theano 1.0's tutorial ("Using Random Numbers"): RandomStreams(seed=234).
U0 = [[0.12672381, 0.97091597], [0.13989098, 0.88754825]]
U1 = [[0.31971415, 0.47584377], [0.24129163, 0.42046081]]
N0 = [[0.37328447, -0.65746672], [-0.36302373, -0.97484625]]


def mode_with(name: str, linker: str) -> Any:
    return get_mode(name).clone(linker=linker)


def state_seeds(seed: int, count: int) -> list[int]:
    """The seeds RandomStreams(seed) gives its first ``count`` random variables."""
    gen = np.random.RandomState(seed)
    return [int(gen.randint(2**30)) for _ in range(count)]


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("name", ALL_MODES)
def test_theano_tutorial_numbers(name: str, linker: str) -> None:
    mode = mode_with(name, linker)
    srng = RandomStreams(seed=234)
    rv_u = srng.uniform((2, 2))
    rv_n = srng.normal((2, 2))
    f = opgraph.function([], rv_u, mode=mode)
    g = opgraph.function([], rv_n, no_default_updates=True, mode=mode)
    nearly_zeros = opgraph.function([], rv_u + rv_u - 2 * rv_u, mode=mode)
    np.testing.assert_allclose(f(), U0, rtol=1e-7)
    np.testing.assert_allclose(f(), U1, rtol=1e-7)
    np.testing.assert_allclose(g(), N0, rtol=1e-7)
    np.testing.assert_allclose(g(), N0, rtol=1e-7)  # its state is not updated
    np.testing.assert_allclose(nearly_zeros(), np.zeros((2, 2)), atol=1e-15)


def test_same_seed_same_numbers_and_calls_differ() -> None:
    a, b = RandomStreams(seed=7), RandomStreams(seed=7)
    fa = opgraph.function([], [a.uniform((3,)), a.normal((2,))])
    fb = opgraph.function([], [b.uniform((3,)), b.normal((2,))])
    first_a, first_b = fa(), fb()
    for x, y in zip(first_a, first_b, strict=True):
        np.testing.assert_array_equal(x, y)
    second_a = fa()
    assert not np.allclose(first_a[0], second_a[0])
    np.testing.assert_array_equal(fb()[0], second_a[0])
    other = opgraph.function([], RandomStreams(seed=8).uniform((3,)))()
    assert not np.allclose(other, first_a[0])


def test_state_is_a_shared_random_state_with_default_update() -> None:
    srng = RandomStreams(seed=1)
    u = srng.uniform((2,))
    assert isinstance(u.rng, RandomStateSharedVariable)
    assert u.rng.default_update is u.update[1]
    assert srng.updates() == [u.update] == srng.state_updates
    assert isinstance(u.owner.op, RandomFunction)
    assert str(u.owner.op) == "RandomFunction{uniform}"
    assert str(u.type) == "TensorType(float64, vector)"
    before = srng[u.rng].get_state(legacy=False)
    opgraph.function([], u)()
    after = srng[u.rng].get_state(legacy=False)
    assert not np.array_equal(before["state"]["key"], after["state"]["key"]) or (
        before["state"]["pos"] != after["state"]["pos"]
    )


def test_seed_restarts_every_stream_and_setitem_replaces_a_state() -> None:
    srng = RandomStreams(seed=3)
    u = srng.uniform((4,))
    f = opgraph.function([], u)
    srng.seed(99)
    first = f()
    f()
    srng.seed(99)
    np.testing.assert_array_equal(f(), first)
    expected = np.random.RandomState(state_seeds(99, 1)[0]).uniform(0.0, 1.0, (4,))
    np.testing.assert_array_equal(first, expected)
    srng[u.rng] = np.random.RandomState(5)
    np.testing.assert_array_equal(f(), np.random.RandomState(5).uniform(0.0, 1.0, (4,)))
    with pytest.raises(TypeError, match="RandomState"):
        srng[u.rng] = np.random.default_rng(5)


def test_tutorial_seeding_and_sharing_state_between_functions() -> None:
    srng = RandomStreams(seed=234)
    rv_u = srng.uniform((2, 2))
    f = opgraph.function([], rv_u)
    nearly_zeros = opgraph.function([], rv_u + rv_u - 2 * rv_u)
    rng_val = rv_u.rng.get_value(borrow=True)
    rng_val.seed(89234)
    rv_u.rng.set_value(rng_val, borrow=True)
    state_after_v0 = rv_u.rng.get_value().get_state()
    nearly_zeros()  # advances rv_u's state
    v1 = f()
    rng = rv_u.rng.get_value(borrow=True)
    rng.set_state(state_after_v0)
    rv_u.rng.set_value(rng, borrow=True)
    v2 = f()
    v3 = f()
    assert not np.allclose(v1, v2)
    np.testing.assert_array_equal(v3, v1)


@pytest.mark.parametrize("name", ALL_MODES)
def test_every_method_matches_numpy(name: str) -> None:
    srng = RandomStreams(seed=11)
    outs = [
        srng.uniform((2, 3), low=-1.0, high=2.0),
        srng.normal((3,), avg=5.0, std=0.1),
        srng.binomial((4,), n=10, p=0.3),
        srng.random_integers((5,), low=-2, high=2),
        srng.integers((5,), 3, 9),
        srng.choice((3,), a=5, replace=False),
        srng.choice((4,), a=[10, 20, 30], p=[0.1, 0.1, 0.8]),
        srng.permutation(n=6),
        srng.permutation((2,), n=4),
        srng.multinomial((2,), n=7, pvals=[0.2, 0.3, 0.5]),
        srng.poisson((3,), lam=4.0),
    ]
    got = opgraph.function([], outs, mode=name)()
    rs = [np.random.RandomState(s) for s in state_seeds(11, len(outs))]
    expected = [
        rs[0].uniform(-1.0, 2.0, (2, 3)),
        rs[1].normal(5.0, 0.1, (3,)),
        rs[2].binomial(10, 0.3, (4,)),
        rs[3].randint(-2, 3, (5,)),
        rs[4].randint(3, 9, (5,)),
        rs[5].choice(5, (3,), False),
        rs[6].choice([10, 20, 30], (4,), True, [0.1, 0.1, 0.8]),
        rs[7].permutation(6),
        np.stack([rs[8].permutation(4), rs[8].permutation(4)]),
        np.stack([rs[9].multinomial(7, [0.2, 0.3, 0.5]) for _ in range(2)]),
        rs[10].poisson(4.0, (3,)),
    ]
    dtypes = ["float64", "float64"] + ["int64"] * 9
    for k, (g, e, dt) in enumerate(zip(got, expected, dtypes, strict=True)):
        assert g.dtype == dt, k
        np.testing.assert_array_equal(g, e, err_msg=f"output {k}")


def test_sizes_symbolic_and_from_parameters() -> None:
    srng = RandomStreams(seed=0)
    n = T.lscalar("n")
    x = T.dmatrix("x")
    lows = T.dvector("lows")
    a = srng.uniform((n, 2))
    b = srng.normal(size=x.shape)
    c = srng.uniform(low=lows, high=lows + 1)
    assert a.type.ndim == 2 and b.type.ndim == 2 and c.type.ndim == 1
    f = opgraph.function([n, x, lows], [a, b, c])
    ra, rb, rc = f(3, np.zeros((4, 5)), [0.0, 10.0, 20.0])
    assert ra.shape == (3, 2) and rb.shape == (4, 5) and rc.shape == (3,)
    assert np.all((rc >= [0, 10, 20]) & (rc < [1, 11, 21]))
    row = srng.uniform((1, 3))
    assert row.type.broadcastable == (True, False)
    with pytest.raises(ValueError, match="ndim="):
        srng.uniform(size=T.lvector("s"))
    s = T.lvector("s")
    d = srng.uniform(size=s, ndim=2)
    assert opgraph.function([s], d)([2, 3]).shape == (2, 3)


def test_dtype_and_parameter_checks() -> None:
    srng = RandomStreams(seed=0)
    assert srng.uniform((2,), dtype="float32").dtype == "float32"
    assert srng.normal((2,), avg=np.float32(0), std=np.float32(1)).dtype == "float64"
    assert srng.binomial((2,), dtype="int32").dtype == "int32"
    with pytest.raises(ValueError, match="parameters have up to"):
        srng.uniform((2,), low=T.dmatrix("m"))
    with pytest.raises(ValueError, match="ndim=3 does not match"):
        srng.uniform((2, 2), ndim=3)
    with pytest.raises(ValueError, match="non-negative"):
        srng.uniform((-1,))
    with pytest.raises(TypeError, match="integer vector"):
        srng.uniform(size=T.dvector("s"))
    with pytest.raises(TypeError, match="one permutation"):
        srng.permutation(n=3, ndim=2)
    with pytest.raises(TypeError, match="rate"):
        srng.poisson((2,))
    with pytest.raises(ValueError, match="ndim=1 does not match the length 2"):
        srng.uniform(size=T.constant(np.array([2, 2])), ndim=1)
    r = srng.uniform((2,)).owner.inputs[0]
    bad = RandomFunction("uniform", T.TensorType("float64", (False,)))(r, (2, 2), 0.0, 1.0)
    with pytest.raises(ValueError, match="has 2 dimension"):
        opgraph.function([], bad, mode="FAST_COMPILE")()
