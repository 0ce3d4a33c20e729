"""The rewrite engine: node rewriters, pattern rewriters, walkers, databases and provenance.

A rewrite is a small named function or a one-line pattern::

    from opgraph.rewriting import node_rewriter, pattern_rewriter

    local_neg_neg = pattern_rewriter("local_neg_neg", (neg, (neg, "x")), "x")

    @node_rewriter([Mul])
    def local_mul_by_one(fgraph, node):
        '''``x * 1 -> x``'''
        ...

A mode is a query over the global database (:func:`get_optdb`); the compile layer does
``get_optdb().query(OPT_FAST_RUN).rewrite(fgraph)`` and reports
``rewrite_report(fgraph)``.
"""

from opgraph.rewriting.basic import (
    EquilibriumGraphRewriter,
    FromFunctionNodeRewriter,
    GraphRewriter,
    NodeRewriter,
    RewriteAbort,
    Rewriter,
    RewriteWarning,
    SequentialGraphRewriter,
    TrackerIndex,
    WalkingGraphRewriter,
    apply_replacements,
    in2out,
    node_rewriter,
    out2in,
    rewrite_failure,
    source_location,
)
from opgraph.rewriting.db import (
    EquilibriumDB,
    LocalGroupDB,
    ProxyDB,
    RewriteDatabase,
    RewriteDatabaseQuery,
    RewriteEntry,
    RewriteSet,
    SequenceDB,
)
from opgraph.rewriting.inplace import inplace_rewriter, register_inplace
from opgraph.rewriting.optdb import (
    OPT_FAST_COMPILE,
    OPT_FAST_RUN,
    OPT_MERGE,
    OPT_NONE,
    OPT_STABILIZE,
    OPT_UNSAFE,
    PREDEFINED_OPTIMIZERS,
    STAGES,
    AddDestroyHandler,
    get_optdb,
    make_optdb,
    register_canonicalize,
    register_specialize,
    register_stabilize,
)
from opgraph.rewriting.pattern import (
    PatternNodeRewriter,
    PatternSub,
    pattern_rewriter,
    pattern_to_str,
)
from opgraph.rewriting.provenance import (
    Provenance,
    RewriteRecord,
    RewriteStats,
    rewrite_provenance,
    rewrite_report,
)

# Theano 1.0 names of the same things (``opgraph.gof`` re-exports them).
Optimizer = GraphRewriter
LocalOptimizer = NodeRewriter
local_optimizer = node_rewriter
SeqOptimizer = SequentialGraphRewriter
EquilibriumOptimizer = EquilibriumGraphRewriter
TopoOptimizer = WalkingGraphRewriter
Query = RewriteDatabaseQuery
DB = RewriteDatabase

__all__ = [
    "DB",
    "OPT_FAST_COMPILE",
    "OPT_FAST_RUN",
    "OPT_MERGE",
    "OPT_NONE",
    "OPT_STABILIZE",
    "OPT_UNSAFE",
    "PREDEFINED_OPTIMIZERS",
    "STAGES",
    "AddDestroyHandler",
    "EquilibriumDB",
    "EquilibriumGraphRewriter",
    "EquilibriumOptimizer",
    "FromFunctionNodeRewriter",
    "GraphRewriter",
    "LocalGroupDB",
    "LocalOptimizer",
    "NodeRewriter",
    "Optimizer",
    "PatternNodeRewriter",
    "PatternSub",
    "Provenance",
    "ProxyDB",
    "Query",
    "RewriteAbort",
    "RewriteDatabase",
    "RewriteDatabaseQuery",
    "RewriteEntry",
    "RewriteRecord",
    "RewriteSet",
    "RewriteStats",
    "RewriteWarning",
    "Rewriter",
    "SeqOptimizer",
    "SequenceDB",
    "SequentialGraphRewriter",
    "TopoOptimizer",
    "TrackerIndex",
    "WalkingGraphRewriter",
    "apply_replacements",
    "get_optdb",
    "in2out",
    "inplace_rewriter",
    "local_optimizer",
    "make_optdb",
    "node_rewriter",
    "out2in",
    "pattern_rewriter",
    "pattern_to_str",
    "register_canonicalize",
    "register_inplace",
    "register_specialize",
    "register_stabilize",
    "rewrite_failure",
    "rewrite_provenance",
    "rewrite_report",
    "source_location",
]
