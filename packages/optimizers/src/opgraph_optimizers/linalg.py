"""Linear-algebra rewrites: ``opgraph.sandbox.linalg``'s rewriters, installed where Theano had them.

The rewriters themselves live in core (:mod:`opgraph.sandbox.linalg.ops`, Theano's module),
next to the :class:`~opgraph.sandbox.linalg.ops.Hint` Op they read; this module only
declares them on the package's RewriteSet, in the stages Theano 1.0 registered them:

- ``HintsOpt`` (the root database, position -1, before the first merge): attaches a
  :class:`~opgraph.sandbox.linalg.ops.HintsFeature` to graphs holding ``psd(A)``-style hints;
- canonicalize: ``remove_hint_nodes`` (hints move to the feature), ``transinv_to_invtrans``,
  ``tag_solve_triangular``, ``no_transpose_symmetric``, ``local_log_prod_sqr``,
  ``local_log_pow``;
- stabilize: ``inv_as_solve`` (``dot(inv(A), b)`` solves instead), ``tag_solve_triangular``,
  ``no_transpose_symmetric``, ``psd_solve_with_chol``, ``local_det_chol``,
  ``local_log_prod_sqr``, ``local_log_pow``;
- specialize: ``no_transpose_symmetric``, ``local_det_chol``, ``local_log_prod_sqr``,
  ``local_log_pow``.

Theano installed them only once a program imported ``theano.sandbox.linalg``; here they are
always installed. Every one leaves values unchanged (up to rounding) except where hints
promise more, and ``local_log_pow`` skips the case where Theano's changed the value
(``log(x ** 2)`` of a negative ``x``). All carry the tag ``linalg``:
``mode.excluding("linalg")`` turns them off.
"""

from __future__ import annotations

from opgraph.sandbox.linalg.ops import (
    HintsOptimizer,
    inv_as_solve,
    local_det_chol,
    local_log_pow,
    local_log_prod_sqr,
    no_transpose_symmetric,
    psd_solve_with_chol,
    remove_hint_nodes,
    tag_solve_triangular,
    transinv_to_invtrans,
)
from opgraph_optimizers.registry import rewrites

__all__ = ["hints_optimizer"]

#: The root-database entry attaching the hints feature (Theano's ``HintsOpt``).
hints_optimizer = HintsOptimizer()
rewrites.register(
    "optdb", hints_optimizer, "fast_run", "fast_compile", "linalg", name="HintsOpt", position=-1
)

_STAGES = {
    remove_hint_nodes: ("canonicalize",),
    transinv_to_invtrans: ("canonicalize",),
    inv_as_solve: ("stabilize",),
    tag_solve_triangular: ("canonicalize", "stabilize"),
    no_transpose_symmetric: ("canonicalize", "stabilize", "specialize"),
    psd_solve_with_chol: ("stabilize",),
    local_det_chol: ("stabilize", "specialize"),
    local_log_prod_sqr: ("canonicalize", "stabilize", "specialize"),
    local_log_pow: ("canonicalize", "stabilize", "specialize"),
}

for _rewriter, _stages in _STAGES.items():
    for _stage in _stages:
        getattr(rewrites, _stage)(_rewriter, "linalg")
