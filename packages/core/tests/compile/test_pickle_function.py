"""Compiled functions pickle and unpickle with their shared values, defaults and flags."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from compile_toys import MODES

import opgraph.tensor as T
from opgraph.compile import In, function, shared


@pytest.mark.parametrize("mode", MODES)
def test_round_trip_keeps_values_and_is_independent(mode: str) -> None:
    x = T.dvector("x")
    s = shared(np.zeros(2), name="s")
    f = function([x], [x * 2, s], updates=[(s, s + x)], mode=mode)
    f([1.0, 1.0])
    g = pickle.loads(pickle.dumps(f))
    out, state = g([1.0, 2.0])
    np.testing.assert_array_equal(out, [2.0, 4.0])
    np.testing.assert_array_equal(state, [1.0, 1.0])  # the value pickled with f
    np.testing.assert_array_equal(s.get_value(), [1.0, 1.0])  # f's shared value is untouched
    assert g.name == f.name
    assert [str(n.op) for n in g.maker.fgraph.toposort()] == [
        str(n.op) for n in f.maker.fgraph.toposort()
    ]


def test_functions_pickled_together_keep_sharing() -> None:
    s = shared(np.float64(0.0), name="s")
    inc = function([], [], updates={s: s + 1})
    read = function([], s)
    inc2, read2 = pickle.loads(pickle.dumps((inc, read)))
    inc2()
    inc2()
    assert read2() == 2.0 and s.get_value() == 0.0


def test_defaults_state_and_trust_input_survive() -> None:
    acc, inc = T.dscalar("acc"), T.dscalar("inc")
    f = function([inc, In(acc, value=0.0, update=acc + inc)], acc, trust_input=False)
    f(5.0)
    f.trust_input = True
    g = pickle.loads(pickle.dumps(f))
    assert g.trust_input
    assert float(g(np.float64(1.0))) == 5.0
    assert float(g["acc"]) == 6.0 and float(f["acc"]) == 5.0


def test_as_op_functions_pickle_by_reference() -> None:
    from compile_toys import square

    x = T.dvector("x")
    f = function([x], square(x))
    g = pickle.loads(pickle.dumps(f))
    np.testing.assert_array_equal(g([3.0]), [9.0])
