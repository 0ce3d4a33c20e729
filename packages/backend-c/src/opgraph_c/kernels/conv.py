"""C kernels for the correlation Ops of ``opgraph.tensor.nnet.corr`` and ``corr3d``.

``CorrMM``, ``CorrMM_gradWeights``, ``CorrMM_gradInputs`` and the 3-d ``Corr3dMM`` family
run :class:`opgraph_c._conv.CorrThunk`, a precompiled thunk (nothing generated or compiled
when a function is built): for float32 and float64, direct vector kernels (AVX-512, AVX2 or
plain vectors) on a zero-padded copy of the image for unit strides, im2col / col2im loops
and SciPy's ``?gemm`` otherwise, direct loops for 1x1 and depthwise filters, the batch
split among OpenMP threads (see the extension's docstring). Other dtypes (float16) return
None, so ``perform`` runs with a fallback warning. The thunks match ``perform`` (values
within rounding, dtypes, shapes, errors: anything unusual runs ``perform`` itself).

The rewrites of opgraph-optimizers put these Ops in the graph in place of the abstract
convolution Ops, which keep running ``perform`` where the rewrites are off.
"""

from __future__ import annotations

import functools
import importlib
import warnings
from typing import Any

from opgraph.graph.basic import Apply
from opgraph.graph.op import Op
from opgraph.link.dispatch import KernelFallbackWarning
from opgraph.tensor.nnet.corr import CorrMM, CorrMM_gradInputs, CorrMM_gradWeights
from opgraph.tensor.nnet.corr3d import Corr3dMM, Corr3dMM_gradInputs, Corr3dMM_gradWeights
from opgraph_c.spec import Precompiled

__all__ = ["CONV_DTYPES", "CONV_VERSION", "corr_c", "register"]

#: Bump when the thunks' results change (it is part of the entries' cache keys). 2: the
#: direct kernels (sums in another order).
CONV_VERSION = 2
#: The dtypes the precompiled loops run; others take ``perform``.
CONV_DTYPES = frozenset({"float32", "float64"})

#: Op class -> the thunk's direction (``_conv.FORWARD``, ``GRAD_WEIGHTS``, ``GRAD_INPUTS``).
DIRECTIONS: dict[type[Op], int] = {
    CorrMM: 0,
    CorrMM_gradWeights: 1,
    CorrMM_gradInputs: 2,
    Corr3dMM: 0,
    Corr3dMM_gradWeights: 1,
    Corr3dMM_gradInputs: 2,
}


def register(registry: Any, owner: str) -> None:
    """Register the correlation kernels (one entry per Op class, all :func:`corr_c`)."""
    for op_class in DIRECTIONS:
        registry.register(op_class, corr_c, version=CONV_VERSION, owner=owner)


@functools.cache
def _conv_module() -> Any:
    """:mod:`opgraph_c._conv`, or None (warned once) if it cannot be imported."""
    try:
        return importlib.import_module("opgraph_c._conv")
    except ImportError as exc:
        warnings.warn(
            f"opgraph_c's correlation kernels are unavailable ({exc}); CorrMM and Corr3dMM "
            "run their perform. HINT: reinstall opgraph-backend-c "
            "(pip install -e packages/backend-c) and check that SciPy imports.",
            KernelFallbackWarning,
            stacklevel=2,
        )
        return None


def _direction(op: Op) -> int | None:
    """The thunk direction for ``op``'s class, or None for a subclass with its own perform."""
    for op_class in type(op).__mro__:
        if op_class in DIRECTIONS:
            if type(op).perform is not op_class.perform:
                return None
            return DIRECTIONS[op_class]
    return None


def _team() -> dict[str, Any]:
    """The thread team of a correlation thunk (:mod:`opgraph_c._threads`): adaptive, up to
    the process's CPUs (1 without ``config.openmp``: one thread, OpenBLAS's own count).
    The policy table has no row of its own for these kernels yet; they share the BLAS
    thunks' rules (no element threshold: the thunk applies its own, in multiply-adds)."""
    from opgraph_c._threads import team_options

    return team_options("conv")


def corr_c(op: Op, node: Apply) -> Precompiled | None:
    """The precompiled thunk of a correlation node, or None (``perform`` runs) for dtypes
    other than float32/float64, subclasses with their own ``perform``, or an install
    without the extension."""
    direction = _direction(op)
    dtypes = {v.type.dtype for v in node.inputs[:2]} | {node.outputs[0].type.dtype}
    if direction is None or len(dtypes) != 1 or not dtypes <= CONV_DTYPES:
        return None
    module = _conv_module()
    if module is None:
        return None
    options = _team()
    (dtype,) = dtypes

    def make_thunk(node: Apply, in_cells: list[list[Any]], out_cells: list[list[Any]]) -> Any:
        return module.CorrThunk(node, in_cells, out_cells, direction, **options)

    return Precompiled(name=f"{op} {dtype}", make_thunk=make_thunk)
