"""CTC loss (tensor.nnet.ctc): brute-force alignments, warp-ctc's conventions, verify_grad."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.gradient import grad, verify_grad
from opgraph.tensor.nnet.ctc import (
    ConnectionistTemporalClassification,
    ctc,
    ctc_available,
    ctc_cost_and_grad,
)
from opgraph.testing.checks import check_infer_shape


def softmax(a: np.ndarray) -> np.ndarray:
    """Softmax over the last axis in float64."""
    e = np.exp(a - a.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def collapse(path: tuple[int, ...]) -> tuple[int, ...]:
    """CTC's many-to-one map: merge repeats, then drop blanks (class 0)."""
    merged = [k for i, k in enumerate(path) if i == 0 or k != path[i - 1]]
    return tuple(k for k in merged if k != 0)


def brute_force(acts: np.ndarray, label: list[int], length: int) -> tuple[float, np.ndarray]:
    """-log p(label) by summing over every alignment, and its gradient w.r.t. the logits."""
    y = softmax(acts[:length].astype("float64"))
    n_class = acts.shape[1]
    p = 0.0
    occupancy = np.zeros_like(y)
    for path in itertools.product(range(n_class), repeat=length):
        if collapse(path) == tuple(label):
            prob = np.prod(y[np.arange(length), path])
            p += prob
            occupancy[np.arange(length), path] += prob
    g = np.zeros(acts.shape)
    g[:length] = y - occupancy / p
    return -np.log(p), g


CASES = [
    # (labels row padded with -1, input length)
    ([1, 2, -1], 4),
    ([1, 1, -1], 5),  # a repeat needs a blank between
    ([2, -1, -1], 3),
    ([-1, -1, -1], 4),  # empty label: all blanks
    ([2, 1, 2], 5),
    ([1, -1, 2], 4),  # padding in the middle is skipped, as Theano's wrapper does
]


def test_cost_and_gradient_match_brute_force_enumeration() -> None:
    rng = np.random.default_rng(0)
    n_time, n_class = 5, 3
    acts = rng.standard_normal((n_time, len(CASES), n_class)).astype("float32") * 2
    labels = np.array([c[0] for c in CASES], dtype="int32")
    lengths = np.array([c[1] for c in CASES], dtype="int32")
    a, lab, ln = T.ftensor3("a"), T.imatrix("l"), T.ivector("n")
    node = ConnectionistTemporalClassification()(a, lab, ln).owner
    f = opgraph.function([a, lab, ln], node.outputs)
    costs, grads = f(acts, labels, lengths)
    assert costs.dtype == "float32" and grads.dtype == "float32"
    for b, (row, length) in enumerate(CASES):
        want_cost, want_grad = brute_force(acts[:, b], [k for k in row if k >= 0], length)
        np.testing.assert_allclose(costs[b], want_cost, rtol=1e-5)
        np.testing.assert_allclose(grads[:, b], want_grad, atol=2e-6)
        assert not grads[length:, b].any()


def test_infeasible_example_gets_warp_ctc_zero_cost_and_gradient() -> None:
    acts = np.ones((3, 2, 4), dtype="float32")
    labels = np.array([[1, 1, 2], [1, 2, 3]], dtype="int32")  # 3 labels + 1 repeat > 3 steps
    costs, grads = ctc_cost_and_grad(acts, labels, np.array([3, 3], dtype="int32"))
    assert costs[0] == 0 and not grads[:, 0].any()
    want, _ = brute_force(acts[:, 1], [1, 2, 3], 3)
    np.testing.assert_allclose(costs[1], want)


def test_cost_is_differentiable_and_matches_verify_grad() -> None:
    rng = np.random.default_rng(1)
    labels = np.array([[1, 2, 1], [3, 3, -1], [2, -1, -1]], dtype="int32")
    lengths = np.array([6, 5, 3], dtype="int32")
    acts = rng.standard_normal((6, 3, 4)).astype("float32")
    verify_grad(
        lambda a: ctc(a, labels, lengths), [acts], rng=rng, eps=1e-3, abs_tol=1e-3, rel_tol=1e-3
    )
    a = T.ftensor3("a")
    cost = ctc(a, labels, lengths)
    g = opgraph.function([a], grad((cost * np.float32([1, 2, 3])).sum(), a))(acts)
    _, raw = ctc_cost_and_grad(acts, labels, lengths)
    np.testing.assert_allclose(g, raw * np.array([1, 2, 3])[None, :, None], rtol=1e-5, atol=1e-6)


def test_batch_is_vectorised_consistently() -> None:
    """Each example's result does not depend on the rest of the minibatch."""
    rng = np.random.default_rng(2)
    acts = rng.standard_normal((7, 4, 5)).astype("float32")
    labels = np.array([[1, 2, 3, 4], [4, -1, -1, -1], [2, 2, 2, -1], [1, 3, -1, -1]], "int32")
    lengths = np.array([7, 2, 6, 4], dtype="int32")
    costs, grads = ctc_cost_and_grad(acts, labels, lengths)
    for b in range(4):
        c1, g1 = ctc_cost_and_grad(
            acts[: lengths[b], b : b + 1], labels[b : b + 1], lengths[b : b + 1]
        )
        np.testing.assert_allclose(costs[b], c1[0], rtol=1e-12)
        np.testing.assert_allclose(grads[: lengths[b], b], g1[:, 0], atol=1e-12)
    # The gradient of each used step sums to 0 over classes (softmax minus a distribution).
    np.testing.assert_allclose(grads.sum(-1), 0, atol=1e-12)


def test_default_output_shapes_and_no_grad_variant() -> None:
    a, lab, ln = T.ftensor3(), T.imatrix(), T.ivector()
    cost = ctc(a, lab, ln)
    assert cost.type.dtype == "float32" and cost.type.ndim == 1
    node = cost.owner
    assert len(node.outputs) == 2 and node.op.compute_grad
    acts = np.zeros((4, 2, 3), dtype="float32")
    labels = np.array([[1, -1], [2, 1]], dtype="int32")
    lengths = np.array([4, 3], dtype="int32")
    check_infer_shape([a, lab, ln], node.outputs, [acts, labels, lengths])
    no_grad = ConnectionistTemporalClassification(compute_grad=False)(a, lab, ln)
    assert len(no_grad.owner.outputs) == 1
    f = opgraph.function([a, lab, ln], [cost, no_grad])
    c1, c2 = f(acts, labels, lengths)
    np.testing.assert_array_equal(c1, c2)
    with pytest.raises(Exception, match="compute_grad=False"):
        grad(no_grad.sum(), a)
    with pytest.raises(Exception, match="no gradient itself"):
        grad(node.outputs[1].sum(), a)
    assert ctc_available()


def test_errors() -> None:
    a, lab, ln = T.ftensor3(), T.imatrix(), T.ivector()
    with pytest.raises(TypeError, match="activations must use the float32 type"):
        ctc(T.dtensor3(), lab, ln)
    with pytest.raises(ValueError, match="activations must have 3 dimensions"):
        ctc(T.fmatrix(), lab, ln)
    with pytest.raises(TypeError, match="labels must use the int32 type"):
        ctc(a, T.lmatrix(), ln)
    with pytest.raises(ValueError, match="labels must have 2 dimensions"):
        ctc(a, T.ivector(), ln)
    with pytest.raises(TypeError, match="input_lengths must use the int32 type"):
        ctc(a, lab, T.lvector())
    f = opgraph.function([a, lab, ln], ctc(a, lab, ln))
    acts = np.zeros((3, 2, 3), dtype="float32")
    labels = np.array([[1], [2]], dtype="int32")
    with pytest.raises(ValueError, match=r"input_lengths must be in \[0, 3\]"):
        f(acts, labels, np.array([4, 1], dtype="int32"))
    with pytest.raises(ValueError, match="out of range for 3 classes"):
        f(acts, labels + 2, np.array([3, 1], dtype="int32"))
    with pytest.raises(ValueError, match="labels 1"):
        f(acts, labels[:1], np.array([3, 1], dtype="int32"))
