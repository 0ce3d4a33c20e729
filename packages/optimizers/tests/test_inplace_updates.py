"""FAST_RUN overwrites the shared variables a function updates in place, as Theano did.

An SGD step's ``W - lr * x.T @ g`` becomes one ``Gemm{inplace}`` on ``W``; an embedding's
``inc_subtensor(E[idx], ...)`` touches only the rows indexed instead of copying the table;
the MRG streams advance their state in place. Values equal NumPy's, the shared buffers keep
their identity, and a failing call still changes nothing (core's ``UpdateGuard``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.mode import Mode
from opgraph.sandbox.rng_mrg import MRG_RandomStreams
from opgraph.tensor.assert_op import Assert

MODES = [Mode(linker=linker, optimizer="fast_run") for linker in ("py", "c", "cvm")]
IDS = ["py", "c", "cvm"]


def _destroyed_shared(f: Any) -> set[str]:
    """Names of the shared variables some node of ``f`` overwrites."""
    fg = f.maker.fgraph
    return {v.name for v in fg.inputs if getattr(fg, "destroyers", None) and fg.destroyers(v)}


@pytest.mark.parametrize("mode", MODES, ids=IDS)
def test_sgd_updates_gemm_in_place_and_match_numpy(mode: Mode) -> None:
    rng = np.random.default_rng(0)
    x_val, w_val = rng.standard_normal((20, 30)), rng.standard_normal((30, 5))
    t_val = rng.standard_normal((20, 5))
    w = opgraph.shared(w_val.copy(), name="w")
    b = opgraph.shared(np.zeros(5), name="b")
    x, t = T.dmatrix("x"), T.dmatrix("t")
    cost = ((T.dot(x, w) + b - t) ** 2).mean()
    gw, gb = opgraph.grad(cost, [w, b])
    f = opgraph.function([x, t], cost, updates=[(w, w - 0.1 * gw), (b, b - 0.1 * gb)], mode=mode)
    assert "w" in _destroyed_shared(f)  # b: the update may overwrite the gradient instead
    assert any(
        type(n.op).__name__ == "Gemm" and n.op.destroy_map for n in f.maker.fgraph.apply_nodes
    )
    buffer = w.get_value(borrow=True)
    ref_w, ref_b = w_val.copy(), np.zeros(5)
    for _ in range(3):
        f(x_val, t_val)
        err = x_val @ ref_w + ref_b - t_val
        ref_w -= 0.1 * (x_val.T @ err) * 2 / err.size
        ref_b -= 0.1 * err.sum(axis=0) * 2 / err.size
    assert w.get_value(borrow=True) is buffer
    np.testing.assert_allclose(w.get_value(), ref_w, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(b.get_value(), ref_b, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("mode", MODES, ids=IDS)
def test_embedding_rows_are_incremented_without_copying_the_table(mode: Mode) -> None:
    table = np.arange(50.0).reshape(10, 5)
    emb = opgraph.shared(table.copy(), name="emb")
    idx, delta = T.ivector("idx"), T.dmatrix("delta")
    f = opgraph.function(
        [idx, delta], [], updates=[(emb, T.inc_subtensor(emb[idx], delta))], mode=mode
    )
    assert _destroyed_shared(f) == {"emb"}
    buffer = emb.get_value(borrow=True)
    rows, d = np.array([1, 3, 1], dtype="int32"), np.ones((3, 5))
    f(rows, d)
    np.add.at(table, rows, d)
    assert emb.get_value(borrow=True) is buffer
    np.testing.assert_array_equal(emb.get_value(), table)


@pytest.mark.parametrize("mode", MODES, ids=IDS)
def test_a_failed_assert_leaves_the_weights_updated_in_place(mode: Mode) -> None:
    w = opgraph.shared(np.ones((3, 2)), name="w")
    x = T.dmatrix("x")
    cost = T.dot(x, w).sum()
    checked = Assert("inputs must stay below 100")(cost, T.lt(abs(x).max(), 100))
    f = opgraph.function([x], checked, updates=[(w, w - 0.5 * opgraph.grad(cost, w))], mode=mode)
    assert "w" in _destroyed_shared(f)
    f(np.ones((4, 3)))
    np.testing.assert_array_equal(w.get_value(), np.full((3, 2), -1.0))
    with pytest.raises(AssertionError, match="below 100"):
        f(np.full((4, 3), 1000.0))
    np.testing.assert_array_equal(w.get_value(), np.full((3, 2), -1.0))


def test_mrg_streams_keep_their_state_when_the_draw_feeds_the_graph() -> None:
    # The node advancing the state also computes the draw, which everything after it uses:
    # advancing in place would make those nodes run after the write, so the state (24 bytes
    # per substream) is copied and a failing call still leaves it unchanged.
    draws = []
    for mode in (Mode(linker="py", optimizer="fast_run"), Mode(linker="c", optimizer="fast_run")):
        srng = MRG_RandomStreams(seed=1234)
        u = srng.uniform((4, 3))
        checked = Assert("draws stay below one")(u * 2, T.lt(u.max(), 1.0))
        f = opgraph.function([], checked, mode=mode)
        assert _destroyed_shared(f) == set()
        draws.append(np.stack([f() for _ in range(3)]))
    np.testing.assert_array_equal(draws[0], draws[1])
    assert len({d.tobytes() for d in draws[0]}) == 3
