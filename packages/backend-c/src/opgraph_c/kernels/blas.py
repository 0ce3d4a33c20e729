"""C kernels for ``opgraph.tensor.blas`` (``Gemm``, ``Gemv``, ``Ger``, ``Dot22``,
``Dot22Scalar``) and for ``opgraph.tensor.dot.Dot`` of vectors and matrices.

They are precompiled thunks (:mod:`opgraph_c._blas`, built when backend-c is installed)
calling SciPy's BLAS through ``scipy.linalg.cython_blas``: nothing is generated or compiled
when a function is compiled. With ``config.openmp`` on, matrix-vector products of mid-size
matrices (``Gemv``, ``Dot``) run the module's own loops on OpenMP threads instead (see
:mod:`opgraph_c._blas`). float32 and float64 only; other dtypes (complex, float16, integers,
mixed) return :data:`~opgraph_c.spec.PERFORM`: the Op's ``perform`` is one NumPy call that
already runs in C (``zgemm`` for complex, NumPy's own loops for integers), so they run it
without a fallback warning. ``Dot`` lives in core's
``tensor/dot.py`` but is the op the BLAS rewrites start from, so its kernel is here with them.
"""

from __future__ import annotations

import functools
import importlib
import warnings
from typing import Any

from opgraph.graph.basic import Apply
from opgraph.graph.op import Op
from opgraph.link.dispatch import KernelFallbackWarning
from opgraph.tensor.blas import Dot22, Dot22Scalar, Gemm, Gemv, Ger
from opgraph.tensor.dot import Dot
from opgraph_c.spec import PERFORM, Precompiled

__all__ = [
    "BLAS_DTYPES",
    "BLAS_VERSION",
    "dot22_c",
    "dot22scalar_c",
    "dot_c",
    "gemm_c",
    "gemv_c",
    "ger_c",
    "register",
]

#: Bump when the thunks change behaviour (it is part of the kernel entries' identity).
BLAS_VERSION = 2
#: The dtypes the precompiled thunks run; others take ``perform``.
BLAS_DTYPES = ("float32", "float64")


def register(registry: Any, owner: str) -> None:
    """Register the BLAS kernels and the ``Dot`` kernel."""
    for op_class, impl in (
        (Gemm, gemm_c),
        (Gemv, gemv_c),
        (Ger, ger_c),
        (Dot22, dot22_c),
        (Dot22Scalar, dot22scalar_c),
        (Dot, dot_c),
    ):
        registry.register(op_class, impl, version=BLAS_VERSION, owner=owner)


@functools.cache
def _blas_module() -> Any:
    """:mod:`opgraph_c._blas`, or None (warned once) if it cannot be imported."""
    try:
        return importlib.import_module("opgraph_c._blas")
    except ImportError as exc:
        warnings.warn(
            f"opgraph_c's BLAS kernels are unavailable ({exc}); Gemm, Gemv, Ger, Dot22 and "
            "Dot run their perform. HINT: reinstall opgraph-backend-c "
            "(pip install -e packages/backend-c) and check that SciPy imports.",
            KernelFallbackWarning,
            stacklevel=2,
        )
        return None


def _precompiled(op: Op, node: Apply, thunk_class: str, **options: Any) -> Any:
    """The ``Precompiled`` entry running ``thunk_class`` on ``node``, PERFORM, or None.

    PERFORM when the node's operands are not all of one dtype in :data:`BLAS_DTYPES` (the
    scalars ``a``/``b`` may be any float dtype: the thunk reads them as C doubles); None
    when the BLAS extension cannot be imported.
    """
    dtype = node.outputs[0].type.dtype
    operands = [v for v in node.inputs if v.type.ndim > 0]
    if dtype not in BLAS_DTYPES or any(v.type.dtype != dtype for v in operands):
        return PERFORM
    if _blas_module() is None:
        return None

    def make_thunk(node: Apply, in_cells: list[list[Any]], out_cells: list[list[Any]]) -> Any:
        cls = getattr(_blas_module(), thunk_class)
        return cls(node, in_cells, out_cells, dtype, **options)

    return Precompiled(name=f"{op} {dtype}", make_thunk=make_thunk)


def gemm_c(op: Gemm, node: Apply) -> Any:
    """``Z <- b * Z + a * dot(X, Y)`` through ``?gemm`` (in place: into ``Z``'s buffer)."""
    return _precompiled(op, node, "GemmThunk", inplace=op.inplace, **_gemv_threads())


def _gemv_threads() -> dict[str, Any]:
    """The team of the native gemv and of OpenBLAS's threaded products
    (:mod:`opgraph_c._threads`; 1 thread without ``config.openmp``: BLAS only, and
    OpenBLAS's own thread count)."""
    from opgraph_c._threads import team_options

    return team_options("gemv")


def gemv_c(op: Gemv, node: Apply) -> Any:
    """``y <- b * y + a * dot(A, x)`` through ``?gemv`` or, for mid-size matrices, the
    native threaded loops (in place: into ``y``'s buffer)."""
    return _precompiled(op, node, "GemvThunk", inplace=op.inplace, **_gemv_threads())


def ger_c(op: Ger, node: Apply) -> Any:
    """``A <- A + a * outer(x, y)`` through ``?ger`` (destructive: into ``A``'s buffer)."""
    return _precompiled(op, node, "GerThunk", destructive=op.destructive)


def dot22_c(op: Dot22, node: Apply) -> Any:
    """``dot(X, Y)`` of two matrices through ``?gemm``."""
    return _precompiled(op, node, "Dot22Thunk", scaled=False, **_gemv_threads())


def dot22scalar_c(op: Dot22Scalar, node: Apply) -> Any:
    """``a * dot(X, Y)`` of two matrices through ``?gemm``."""
    return _precompiled(op, node, "Dot22Thunk", scaled=True, **_gemv_threads())


def dot_c(op: Dot, node: Apply) -> Any:
    """``dot`` of two vectors or matrices of one dtype (``?dot``, ``?gemv`` or the native
    gemv, ``?gemm``)."""
    if any(v.type.ndim not in (1, 2) for v in node.inputs):
        return None
    return _precompiled(op, node, "DotThunk", **_gemv_threads())
