"""``opgraph.scan_module.scan_opt``: Theano's ``scan_module.scan_opt`` names, served lazily by
opgraph-optimizers (its import without the package: ``test_tensor_opt_namespace.py``). Each
Theano optimizer class, run with ``optimize(fgraph)`` as a Theano program would, makes the
change its registered rewrite makes, and the values stay."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from numpy.testing import assert_allclose

import opgraph
import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.compile.ops import ObsoleteTheanoAPIError
from opgraph.graph.fg import FunctionGraph
from opgraph.graph.traversal import io_toposort
from opgraph.scan_module.scan_op import Scan
from opgraph.tensor.elemwise import DimShuffle
from opgraph_optimizers.merge import MergeOptimizer

RNG = np.random.default_rng(7)


def _scans(fg: FunctionGraph) -> list[Any]:
    return [n for n in fg.toposort() if isinstance(n.op, Scan)]


def _values(fg: FunctionGraph, values: list[Any]) -> list[Any]:
    """The outputs of ``fg`` (rewritten or not) on ``values``, with no further rewrites."""
    return function(fg.inputs, fg.outputs, mode="FAST_COMPILE")(*values)


def test_namespace_resolves_to_the_plugin() -> None:
    import opgraph.scan_module.scan_opt as scan_opt

    assert scan_opt.__name__ == "opgraph_optimizers.scan_opt"
    assert opgraph.scan_module.scan_opt is scan_opt
    assert scan_opt.scan_op is opgraph.scan_module.scan_op
    assert scan_opt.scan_seqopt1 is scan_opt.scan_eqopt1
    for name in scan_opt.__all__:
        assert getattr(scan_opt, name) is not None, name
    from opgraph.scan_module.scan_opt import PushOutDot1, ScanSaveMem  # noqa: F401


def _rnn(transposed: bool) -> tuple[list[Any], Any]:
    xs, h0, W = T.matrix("xs"), T.vector("h0"), T.matrix("W")
    out, _ = opgraph.scan(
        lambda x, h, W: T.tanh(T.dot(W.T if transposed else W, h) + x),
        sequences=[xs],
        outputs_info=[h0],
        non_sequences=[W],
    )
    return [xs, h0, W], out


def _rnn_values() -> list[Any]:
    return [RNG.normal(size=(5, 3)), RNG.normal(size=3), RNG.normal(size=(3, 3))]


def _inner_ops(node: Any) -> list[str]:
    return [str(n.op) for n in io_toposort(node.op.inner_inputs, node.op.inner_outputs)]


def test_push_out_non_seq_scan_optimize(loop_by_hand: Any) -> None:
    from opgraph.scan_module.scan_opt import PushOutNonSeqScan

    xs, h0, W = T.matrix("xs"), T.vector("h0"), T.matrix("W")
    (buf,) = loop_by_hand(lambda x, h, W: T.tanh(T.dot(W.T, h) + x), [xs], [h0], [W])
    fg = FunctionGraph([xs, h0, W], [buf], clone=True)
    vals = _rnn_values()
    before = _values(fg, vals)
    assert PushOutNonSeqScan().optimize(fg) >= 1
    (node,) = _scans(fg)
    assert not any(
        isinstance(n.op, DimShuffle)
        for n in io_toposort(node.op.inner_inputs, node.op.inner_outputs)
    )  # W.T is computed outside
    assert_allclose(_values(fg, vals), before)


def test_push_out_seq_scan_optimize(loop_by_hand: Any) -> None:
    from opgraph.scan_module.scan_opt import PushOutSeqScan

    xs, h0, U = T.matrix("xs"), T.vector("h0"), T.matrix("U")
    (buf,) = loop_by_hand(lambda x, h, U: T.tanh(h + T.dot(U, x)), [xs], [h0], [U])
    fg = FunctionGraph([xs, h0, U], [buf], clone=True)
    vals = _rnn_values()
    before = _values(fg, vals)
    assert "dot" in _inner_ops(_scans(fg)[0])
    assert PushOutSeqScan().optimize(fg) >= 1
    (node,) = _scans(fg)
    assert "dot" not in _inner_ops(node)  # one product of U with every entry, outside
    assert_allclose(_values(fg, vals), before)


def test_scan_save_mem_optimize() -> None:
    from opgraph.scan_module.scan_opt import ScanSaveMem

    inputs, out = _rnn(transposed=False)
    fg = FunctionGraph(inputs, [out[-1]], clone=True)
    vals = _rnn_values()
    before = _values(fg, vals)
    assert ScanSaveMem().optimize(fg) == 1
    (node,) = _scans(fg)
    assert node.op.info.buffer_sizes == (2,)
    assert_allclose(_values(fg, vals), before)


@pytest.mark.parametrize("name", ["PushOutScanOutput", "PushOutDot1"])
def test_push_out_scan_output_optimize(name: str) -> None:
    import opgraph.scan_module.scan_opt as scan_opt

    A, B, acc0 = T.tensor3("A"), T.tensor3("B"), T.matrix("acc0")
    out, _ = opgraph.scan(
        lambda a, b, acc: acc + T.dot(a, b), sequences=[A, B], outputs_info=[acc0]
    )
    fg = FunctionGraph([A, B, acc0], [out[-1]], clone=True)
    vals = [RNG.normal(size=(4, 3, 2)), RNG.normal(size=(4, 2, 5)), RNG.normal(size=(3, 5))]
    before = _values(fg, vals)
    assert getattr(scan_opt, name)().optimize(fg) == 1
    assert _scans(fg) == []  # both operands are sequences: one product, no loop
    assert_allclose(_values(fg, vals), before)


def test_scan_merge_optimize_and_the_node_rewriters(loop_by_hand: Any) -> None:
    from opgraph.scan_module.scan_opt import (
        ScanMerge,
        remove_constants_and_unused_inputs_scan,
        scan_merge_inouts,
    )

    xs, h0 = T.matrix("xs"), T.vector("h0")
    r1, _ = opgraph.scan(lambda x, h: T.tanh(h + x), sequences=[xs], outputs_info=[h0])
    r2, _ = opgraph.scan(lambda x, h: T.sin(h) - x, sequences=[xs], outputs_info=[h0])
    fg = FunctionGraph([xs, h0], [r1, r2 * 2], clone=True)
    MergeOptimizer().rewrite(fg)  # the two n_steps expressions become one variable
    vals = _rnn_values()[:2]
    before = _values(fg, vals)
    assert ScanMerge().optimize(fg) == 1
    (node,) = _scans(fg)
    assert node.op.info.n_rec == 2
    assert remove_constants_and_unused_inputs_scan.transform(fg, node)  # xs read once
    assert_allclose(_values(fg, vals), before)
    # A loop computing the same output twice, its second non-sequence unused.
    a = T.vector("a")
    _, e1, e2 = loop_by_hand(
        lambda x, h, a, b: [h + x * a, T.exp(x), T.exp(x)], [xs], [h0], [a, a], 2
    )
    fg = FunctionGraph([xs, h0, a], [e1, e2 + 1], clone=True)
    vals = [*vals, RNG.normal(size=3)]
    before = _values(fg, vals)
    (node,) = _scans(fg)
    assert scan_merge_inouts.transform(fg, node)
    assert_allclose(_values(fg, vals), before)


def test_scan_inplace_optimizer_says_why_it_has_no_meaning() -> None:
    from opgraph.scan_module.scan_opt import ScanInplaceOptimizer

    with pytest.raises(ObsoleteTheanoAPIError, match="allocates its own output buffers"):
        ScanInplaceOptimizer(typeInfer=None, gpu_flag=False)


def test_helpers() -> None:
    from opgraph.scan_module.scan_opt import has_duplicates, make_equiv

    assert has_duplicates([1, 2, 1]) and not has_duplicates([1, 2, 3]) and not has_duplicates([])
    a, b = T.vector("a"), T.vector("b")
    i1, i2, i3 = T.vector("i1"), T.vector("i2"), T.vector("i3")
    assert make_equiv([a, b, a], [i1, i2, i3]) == ([i3], [a])
    assert make_equiv([a, b], [i1, i2]) == ([], [])
