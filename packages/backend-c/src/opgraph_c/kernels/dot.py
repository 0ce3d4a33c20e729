"""C kernels for the batched products of ``opgraph.tensor.dot``: ``MatMul`` and ``BatchedDot``.

They are precompiled thunks (:mod:`opgraph_c._batched`, built when backend-c is installed):
a loop of BLAS calls over the batch through SciPy's BLAS (``scipy.linalg.cython_blas``:
``?gemm``, or ``?gemv`` / ``?dot`` where a side is a vector), a direct C loop for tiny
products, and one BLAS call for a batch that shares its right operand; nothing is
generated or compiled when a function is compiled. float32 and float64 operands of the
output's dtype only: other dtypes (integers, complex, float16, mixed) return
:data:`~opgraph_c.spec.PERFORM`, since NumPy's ``matmul`` in ``perform`` is already what a C
loop for them would be. ``Dot`` (vectors and matrices) is in :mod:`opgraph_c.kernels.blas`
with the BLAS ops it is rewritten into.
"""

from __future__ import annotations

import functools
import importlib
import warnings
from typing import Any

from opgraph.graph.basic import Apply
from opgraph.graph.op import Op
from opgraph.link.dispatch import KernelFallbackWarning
from opgraph.tensor.dot import BatchedDot, MatMul
from opgraph_c.spec import PERFORM, Precompiled

__all__ = ["BATCHED_DTYPES", "DOT_VERSION", "batched_dot_c", "matmul_c", "register"]

#: Bump when the thunks change behaviour (it is part of the kernel entries' identity).
DOT_VERSION = 1
#: The dtypes the precompiled thunks run; others take ``perform``.
BATCHED_DTYPES = ("float32", "float64")
#: Most dimensions the thunks handle (NumPy's limit, ``_batched.MAXDIMS``).
MAX_DIMS = 64


def register(registry: Any, owner: str) -> None:
    """Register the ``MatMul`` and ``BatchedDot`` kernels."""
    for op_class, impl in ((MatMul, matmul_c), (BatchedDot, batched_dot_c)):
        registry.register(op_class, impl, version=DOT_VERSION, owner=owner)


@functools.cache
def _batched_module() -> Any:
    """:mod:`opgraph_c._batched`, or None (warned once) if it cannot be imported."""
    try:
        return importlib.import_module("opgraph_c._batched")
    except ImportError as exc:
        warnings.warn(
            f"opgraph_c's batched product kernels are unavailable ({exc}); MatMul and "
            "BatchedDot run their perform. HINT: reinstall opgraph-backend-c "
            "(pip install -e packages/backend-c) and check that SciPy imports.",
            KernelFallbackWarning,
            stacklevel=2,
        )
        return None


def _precompiled(op: Op, node: Apply, thunk_class: str) -> Precompiled | object | None:
    """The ``Precompiled`` entry running ``thunk_class`` on ``node``; PERFORM when the
    inputs and output are not all of one dtype in :data:`BATCHED_DTYPES`, None when the
    module cannot be imported (a fallback, warned)."""
    dtype = node.outputs[0].type.dtype
    if dtype not in BATCHED_DTYPES or any(v.type.dtype != dtype for v in node.inputs):
        return PERFORM
    if node.outputs[0].type.ndim > MAX_DIMS:  # beyond NumPy's arrays: perform's error
        return PERFORM
    if _batched_module() is None:
        return None

    def make_thunk(node: Apply, in_cells: list[list[Any]], out_cells: list[list[Any]]) -> Any:
        cls = getattr(_batched_module(), thunk_class)
        return cls(node, in_cells, out_cells, dtype)

    return Precompiled(name=f"{op} {dtype}", make_thunk=make_thunk)


def matmul_c(op: MatMul, node: Apply) -> Precompiled | object | None:
    """NumPy's ``matmul`` with broadcast batch axes: a BLAS call per product, a direct loop
    for tiny products, or one BLAS call when the right operand is shared by the batch."""
    return _precompiled(op, node, "MatMulThunk")


def batched_dot_c(op: BatchedDot, node: Apply) -> Precompiled | object | None:
    """``dot(x[i], y[i])`` along the batch axis: a BLAS call (``?gemm``, ``?gemv``,
    ``?dot``) per product, or a direct loop for tiny products."""
    return _precompiled(op, node, "BatchedDotThunk")
