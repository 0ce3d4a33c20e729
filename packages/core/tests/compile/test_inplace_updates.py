"""Shared variables a function updates may be overwritten in place, all-or-nothing.

:class:`~opgraph.graph.destroyhandler.UpdateGuard` lets nodes overwrite an updated shared
variable only as a chain that ends in its own update and runs after every other node.
These tests build the in-place graphs by hand (``accept_inplace``); the rewrites that make
them on their own are tested in ``packages/optimizers/tests/test_inplace_updates.py``.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest
from compile_toys import Raise

import opgraph.tensor as T
from opgraph.compile import function
from opgraph.compile.debugmode import DebugMode
from opgraph.compile.sharedvalue import shared
from opgraph.graph.destroyhandler import UpdateGuard
from opgraph.graph.features import InconsistencyError
from opgraph.tensor.math import add_inplace, mul_inplace


def _guard(f: Any) -> UpdateGuard | None:
    return next((x for x in f.maker.fgraph.features if isinstance(x, UpdateGuard)), None)


def _inplace_nodes(f: Any) -> list[Any]:
    return [n for n in f.maker.fgraph.toposort() if getattr(n.op, "destroy_map", None)]


def test_an_inplace_update_keeps_the_shared_buffer() -> None:
    a = shared(np.zeros(3), name="a")
    f = function([], [], updates=[(a, add_inplace(a, 1.0))], accept_inplace=True)
    assert _guard(f) is not None
    buffer = a.get_value(borrow=True)
    f()
    f()
    if not isinstance(f.maker.mode, DebugMode):  # DebugMode runs every node on copies
        assert a.get_value(borrow=True) is buffer
    np.testing.assert_array_equal(a.get_value(), [2.0, 2.0, 2.0])


def _add_then_raise() -> tuple[Any, Any, Any]:
    """``(a, b, f)``: ``f(x)`` adds ``x`` to ``a`` in place and raises in ``b``'s update."""
    a = shared(np.zeros(3), name="a")
    b = shared(np.zeros(3), name="b")
    x = T.dvector("x")
    f = function(
        [x],
        [],
        updates=[(a, add_inplace(a, x)), (b, Raise("boom")(b + x))],
        accept_inplace=True,
    )
    return a, b, f


def test_the_writing_node_runs_after_every_other_node() -> None:
    a = shared(np.ones(4), name="a")
    b = shared(np.zeros(4), name="b")
    x = T.dvector("x")
    f = function(
        [x], (x * 3).sum(), updates=[(a, add_inplace(a, x * 2)), (b, b + x)], accept_inplace=True
    )
    fg = f.maker.fgraph
    order = fg.toposort()
    (a_in,) = [v for v in fg.inputs if v.name == "a"]
    (writer,) = fg.destroyers(a_in)
    # Only nodes writing a shared variable's update (a's, and b's if made in place) follow.
    tail = order[order.index(writer) :]
    assert all(n.op.destroy_map and n.inputs[0] in fg.inputs for n in tail), tail
    assert f(np.arange(4.0)) == 18.0
    np.testing.assert_array_equal(a.get_value(), 1 + 2 * np.arange(4.0))
    np.testing.assert_array_equal(b.get_value(), np.arange(4.0))


def test_a_second_writer_on_the_same_update_is_not_guarded() -> None:
    # mul_inplace could fail after add_inplace wrote: the user's graph is taken as written.
    a = shared(np.ones(4), name="a")
    x = T.dvector("x")
    f = function([x], [], updates=[(a, mul_inplace(add_inplace(a, x), 2.0))], accept_inplace=True)
    assert _guard(f) is None
    f(np.arange(4.0))
    np.testing.assert_array_equal(a.get_value(), (1 + np.arange(4.0)) * 2)


def test_a_failing_node_leaves_a_variable_updated_in_place_unchanged() -> None:
    a, b, f = _add_then_raise()
    buffer = a.get_value(borrow=True)
    with pytest.raises(ValueError, match="boom"):
        f(np.ones(3))
    assert a.get_value(borrow=True) is buffer
    np.testing.assert_array_equal(a.get_value(), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(b.get_value(), [0.0, 0.0, 0.0])


def test_an_inplace_node_failing_its_shape_check_writes_nothing() -> None:
    a = shared(np.zeros(3), name="a")
    x = T.dvector("x")
    f = function([x], [], updates=[(a, add_inplace(a, x))], accept_inplace=True)
    with pytest.raises(ValueError):
        f(np.ones(4))
    np.testing.assert_array_equal(a.get_value(), [0.0, 0.0, 0.0])


def test_readers_of_the_old_value_run_before_it_is_overwritten() -> None:
    a = shared(np.arange(3.0), name="a")
    x = T.dvector("x")
    f = function([x], [a * x, a.sum()], updates=[(a, add_inplace(a, x))], accept_inplace=True)
    product, total = f(np.full(3, 10.0))
    np.testing.assert_array_equal(product, [0.0, 10.0, 20.0])
    assert total == 3.0
    np.testing.assert_array_equal(a.get_value(), [10.0, 11.0, 12.0])


def test_the_old_value_returned_as_an_output_is_a_copy() -> None:
    a = shared(np.zeros(2), name="a")
    f = function([], a, updates=[(a, a + 1)])
    first = f()
    second = f()
    np.testing.assert_array_equal(first, [0.0, 0.0])
    np.testing.assert_array_equal(second, [1.0, 1.0])
    np.testing.assert_array_equal(a.get_value(), [2.0, 2.0])


def test_a_users_inplace_update_read_afterwards_is_taken_as_written() -> None:
    a = shared(np.zeros(3), name="a")
    new = add_inplace(a, 1.0)
    f = function([], new * 2, updates=[(a, new)], accept_inplace=True)
    assert _guard(f) is None  # no all-or-nothing promise: Theano's in-place update
    np.testing.assert_array_equal(f(), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(a.get_value(), [1.0, 1.0, 1.0])


def test_overwriting_a_shared_variable_the_function_does_not_update_is_refused() -> None:
    a = shared(np.zeros(3), name="a")
    b = shared(np.zeros(3), name="b")
    with pytest.raises(InconsistencyError, match="would overwrite a") as info:
        function([], [], updates=[(b, add_inplace(a, 1.0))], accept_inplace=True)
    assert "HINT" in str(info.value)
    np.testing.assert_array_equal(a.get_value(), [0.0, 0.0, 0.0])


def test_an_argument_aliasing_a_variable_updated_in_place_is_read_before_the_write() -> None:
    a = shared(np.arange(3.0), name="a")
    x = T.dvector("x")
    f = function([x], x * 1, updates=[(a, add_inplace(a, 1.0))], accept_inplace=True)
    out = f(a.get_value(borrow=True))
    np.testing.assert_array_equal(out, [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(a.get_value(), [1.0, 2.0, 3.0])


def test_broadcastable_updated_variables_stay_protected() -> None:
    # A buggy Op could break a broadcastable dimension's length, which is caught only as
    # updates are written: too late for a value already overwritten.
    a = shared(np.zeros((1, 3)), name="a", broadcastable=(True, False))
    f = function([], [], updates=[(a, a + 1)])
    assert _guard(f) is None
    f()
    np.testing.assert_array_equal(a.get_value(), [[1.0, 1.0, 1.0]])


def test_copies_and_pickles_keep_the_commit_last_order() -> None:
    a, _b, f = _add_then_raise()
    for g in (f.copy(), pickle.loads(pickle.dumps(f))):
        assert _guard(g) is not None
        with pytest.raises(ValueError, match="boom"):
            g(np.ones(3))
    np.testing.assert_array_equal(a.get_value(), [0.0, 0.0, 0.0])


def test_a_commit_reading_memory_another_node_overwrites_is_not_guarded() -> None:
    # add_inplace(a, t) would run last, but mul_inplace(t, 3) must wait for it to read t.
    a = shared(np.zeros(2), name="a")
    x = T.dvector("x")
    t = x * 2
    f = function([x], mul_inplace(t, 3.0), updates=[(a, add_inplace(a, t))], accept_inplace=True)
    assert _guard(f) is None
    np.testing.assert_array_equal(f(np.ones(2)), [6.0, 6.0])
    np.testing.assert_array_equal(a.get_value(), [2.0, 2.0])
