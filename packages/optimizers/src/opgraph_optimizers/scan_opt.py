"""``opgraph.scan_module.scan_opt``: Theano 1.0's ``theano.scan_module.scan_opt`` names, mapped
onto :mod:`opgraph_optimizers.scan`.

Core resolves ``import opgraph.scan_module.scan_opt`` lazily to this module through the plugin
namespace hook (see :mod:`opgraph_optimizers.plugin`), so Theano code that runs or registers
the scan rewrites by their class names keeps working::

    from opgraph.scan_module.scan_opt import PushOutNonSeqScan, ScanSaveMem

    PushOutNonSeqScan().optimize(fgraph)

Theano's scan rewrites were graph optimizers; here each one is an
:class:`opgraph.gof.opt.Optimizer` running the node rewrite that does the same work over the
graph once, inputs first (``scan_pushout_dot1`` is the same rewrite as
``scanOp_pushout_output``). The rewrite databases keep Theano's names: ``scan_eqopt1`` (Theano's
``scan_seqopt1`` inside its ``scan_eqopt1``) and ``scan_eqopt2``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, ClassVar

from opgraph.compile.ops import ObsoleteTheanoAPIError
from opgraph.gof.opt import Optimizer
from opgraph.graph.basic import Variable
from opgraph.rewriting import NodeRewriter, in2out
from opgraph.scan_module import scan_op, scan_utils
from opgraph_optimizers import scan as _scan
from opgraph_optimizers.scan import (
    remove_constants_and_unused_inputs_scan,
    scan_eqopt1,
    scan_eqopt2,
    scan_merge_inouts,
)

__all__ = [
    "PushOutDot1",
    "PushOutNonSeqScan",
    "PushOutScanOutput",
    "PushOutSeqScan",
    "ScanInplaceOptimizer",
    "ScanMerge",
    "ScanSaveMem",
    "has_duplicates",
    "make_equiv",
    "remove_constants_and_unused_inputs_scan",
    "scan_eqopt1",
    "scan_eqopt2",
    "scan_merge_inouts",
    "scan_op",
    "scan_seqopt1",
    "scan_utils",
]

#: Theano's sequence of push-out rewrites (its ``scan_eqopt1`` ran it to a fixed point; here
#: ``scan_eqopt1`` is that sequence, run once).
scan_seqopt1 = scan_eqopt1


class _OnEachScan(Optimizer):
    """A Theano scan optimizer: :attr:`node_rewriter` applied once to each Scan node."""

    node_rewriter: ClassVar[NodeRewriter]
    #: Whether the nodes the rewrite makes are left alone (as the registered rewrite does).
    ignore_newtrees: ClassVar[bool] = True

    def __init__(self) -> None:
        self._walk = in2out(self.node_rewriter, ignore_newtrees=self.ignore_newtrees)

    def add_requirements(self, fgraph: Any) -> None:
        self._walk.add_requirements(fgraph)

    def apply(self, fgraph: Any) -> int:
        """Rewrite every Scan node of ``fgraph``; return how many rewrites applied."""
        return self._walk.apply(fgraph)


class PushOutNonSeqScan(_OnEachScan):
    """Theano's ``PushOutNonSeqScan``: computations of a loop that read only non-sequences and
    constants move out of it (:func:`~opgraph_optimizers.scan.push_out_non_seq_scan`)."""

    node_rewriter = _scan.push_out_non_seq_scan
    ignore_newtrees = False


class PushOutSeqScan(_OnEachScan):
    """Theano's ``PushOutSeqScan``: a computation of sequence entries that includes a product
    with a non-sequence becomes one whole-sequence computation outside the loop; unlike
    Theano, elementwise-only chains stay in the step, fused with the rest of it
    (:func:`~opgraph_optimizers.scan.push_out_seq_scan`)."""

    node_rewriter = _scan.push_out_seq_scan
    ignore_newtrees = False


class PushOutScanOutput(_OnEachScan):
    """Theano's ``PushOutScanOutput``: an accumulator ``acc + dot(A_t, B_t)`` whose last value
    alone is read becomes one product of the stacked operands outside the loop
    (:func:`~opgraph_optimizers.scan.push_out_scan_output`)."""

    node_rewriter = _scan.push_out_scan_output


class PushOutDot1(PushOutScanOutput):
    """Theano's ``PushOutDot1`` (the weight gradient ``acc + dot(h_t.T, d_t)``): the same
    rewrite as :class:`PushOutScanOutput` here, which reads a transposed operand through a
    view of the stacked values."""


class ScanSaveMem(_OnEachScan):
    """Theano's ``ScanSaveMem``: a loop whose last entries alone are read keeps only those
    (:func:`~opgraph_optimizers.scan.scan_save_mem`)."""

    node_rewriter = _scan.scan_save_mem


class ScanMerge(_scan.ScanMerge, Optimizer):
    """Theano's ``ScanMerge`` (:class:`opgraph_optimizers.scan.ScanMerge`), with Theano's
    ``optimize(fgraph)`` entry point."""


class ScanInplaceOptimizer:
    """Theano's ``ScanInplaceOptimizer``: nothing to make in place here, so making one raises.

    Theano's Scan read preallocated output buffers from the outer graph, and this rewrite let
    it overwrite them instead of copying them first. opgraph's Scan allocates its buffers
    itself, once per call, and its compiled loop lets the elementwise node computing an
    output write each step's entry (4 KB or more) straight into the buffer
    (``opgraph_c/_scan.pyx``), so no outer value is copied or overwritten.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise ObsoleteTheanoAPIError(
            "theano.scan_module.scan_opt.ScanInplaceOptimizer has no meaning in opgraph: a "
            "Scan allocates its own output buffers and its compiled loop writes each step "
            "into them, so there is nothing to make in place. Instead: nothing; "
            "mode.excluding('scan') turns every scan rewrite off."
        )


def has_duplicates(items: Sequence[Hashable]) -> bool:
    """Whether ``items`` holds some element twice (by ``==``)."""
    return len(set(items)) < len(items)


def make_equiv(
    outer: Sequence[Variable], inner: Sequence[Variable]
) -> tuple[list[Variable], list[Variable]]:
    """Pair outer inputs with their inner inputs and find the repeats: ``(left, right)``,
    where ``left`` are the inner inputs whose outer input appeared earlier in ``outer`` and
    ``right`` those outer inputs (Theano's helper for reading an input given twice once)."""
    seen: set[Variable] = set()
    left: list[Variable] = []
    right: list[Variable] = []
    for o, i in zip(outer, inner, strict=True):
        if o in seen:
            left.append(i)
            right.append(o)
        else:
            seen.add(o)
    return left, right
