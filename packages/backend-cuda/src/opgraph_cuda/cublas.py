"""Row-major matrix products on GpuArrays through cuBLAS (``gemm``, ``gemv``, ``ger``).

cuBLAS is column-major; a C-contiguous (row-major) matrix is, read column-major, its own
transpose. Each wrapper below therefore looks at the operands' strides, reads a matrix
laid out by rows (``strides == (ld, 1)``) or by columns (``strides == (1, ld)``) in place
with the matching ``N``/``T`` flag, and copies anything else (a strided slice, a reversed or
broadcast axis) to a contiguous array first. Results are written into the output array
given, which must itself be laid out by rows or by columns.

The library is found with ctypes (:func:`find_cublas` lists where it looks) and one handle
is created per process, lazily, on the runtime's current CUDA context. Under the CPU
emulator (``cuda__emulate=True``: device pointers are host addresses) the same calls are
computed by NumPy on views of that memory, so CI tests the ops' shape, stride and
transposition logic without a GPU.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import site
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from opgraph_cuda.array import GpuArray
from opgraph_cuda.runtime import GpuUnavailable

__all__ = [
    "CublasError",
    "MatrixOperand",
    "cublas_library",
    "find_cublas",
    "gemm",
    "gemv",
    "ger",
    "host_view",
    "matrix_operand",
]

INT_MAX = 2**31 - 1
_OP_N, _OP_T = 0, 1
_STATUS = {
    0: "CUBLAS_STATUS_SUCCESS",
    1: "CUBLAS_STATUS_NOT_INITIALIZED",
    3: "CUBLAS_STATUS_ALLOC_FAILED",
    7: "CUBLAS_STATUS_INVALID_VALUE",
    8: "CUBLAS_STATUS_ARCH_MISMATCH",
    11: "CUBLAS_STATUS_MAPPING_ERROR",
    13: "CUBLAS_STATUS_EXECUTION_FAILED",
    14: "CUBLAS_STATUS_INTERNAL_ERROR",
    15: "CUBLAS_STATUS_NOT_SUPPORTED",
    16: "CUBLAS_STATUS_LICENSE_ERROR",
}
INSTALL_HINT = (
    "HINT: pip install nvidia-cublas-cu12 (or nvidia-cublas for CUDA 13), or install the "
    "CUDA toolkit, or set the flag cuda__cublas to the path of libcublas.so."
)


class CublasError(RuntimeError):
    """A cuBLAS call returned an error status; the message names the call and the status."""


# ---------------------------------------------------------------------------- the library


def _site_dirs() -> Iterator[Path]:
    """Every site-packages folder this interpreter may import from."""
    seen: set[str] = set()
    candidates = [*site.getsitepackages(), site.getusersitepackages(), *sys.path]
    for entry in candidates:
        if entry and entry not in seen and os.path.isdir(entry):
            seen.add(entry)
            yield Path(entry)


def _configured_path() -> str:
    """The ``cuda__cublas`` flag's value when backend-cuda declares it, else ``""``."""
    try:
        from opgraph import config

        return str(getattr(config, "cuda__cublas", "") or "")
    except Exception:  # the flag does not exist (yet): no configured path
        return ""


def _libraries_in(folder: Path) -> list[Path]:
    """``libcublas.so*`` in ``folder`` (not cublasLt), the most specific version first."""
    found = [
        Path(p)
        for p in glob.glob(str(folder / "libcublas.so*"))
        if not Path(p).name.startswith("libcublasLt")
    ]
    return sorted(found, key=lambda p: (len(p.name), p.name), reverse=True)


def find_cublas() -> list[str]:
    """Where cuBLAS may be, in the order tried.

    The ``cuda__cublas`` flag (a file or a folder), ``$CUDA_PATH``/``$CUDA_HOME``'s
    ``lib64``, ``/usr/local/cuda/lib64``, the pip wheels' ``nvidia/cublas/lib``,
    ``nvidia/cu13/lib`` and ``nvidia/cu12/lib`` in every site-packages, then the system's
    ``ctypes.util.find_library("cublas")``.
    """
    paths: list[str] = []
    configured = _configured_path()
    if configured:
        target = Path(configured)
        paths += [str(p) for p in _libraries_in(target)] if target.is_dir() else [configured]
    folders = [
        Path(root) / "lib64"
        for root in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"))
        if root
    ]
    folders.append(Path("/usr/local/cuda/lib64"))
    for base in _site_dirs():
        folders += [base / "nvidia" / sub / "lib" for sub in ("cublas", "cu13", "cu12")]
    for folder in folders:
        paths += [str(p) for p in _libraries_in(folder) if str(p) not in paths]
    system = ctypes.util.find_library("cublas")
    if system and system not in paths:
        paths.append(system)
    return paths


@dataclass
class _Cublas:
    """The loaded library and this process's handle."""

    lib: ctypes.CDLL
    path: str
    handle: ctypes.c_void_p


_loaded: _Cublas | None = None
_lock = threading.Lock()


def _load_first(paths: list[str]) -> tuple[ctypes.CDLL, str]:
    """The first of ``paths`` that loads (its cublasLt beside it loaded first)."""
    errors = []
    for path in paths:
        lt = sorted(glob.glob(str(Path(path).parent / "libcublasLt.so*")), key=len, reverse=True)
        try:
            if lt:
                ctypes.CDLL(lt[0], mode=ctypes.RTLD_GLOBAL)
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL), path
        except OSError as exc:
            errors.append(f"  {path}: {exc}")
    tried = "\n".join(errors) if errors else "  (no libcublas.so found in any of the places)"
    raise GpuUnavailable(f"cuBLAS could not be loaded; tried:\n{tried}\n{INSTALL_HINT}")


def cublas_library() -> _Cublas:
    """The process's cuBLAS library and handle (loaded and created on the first call, on the
    runtime's current CUDA context); GpuUnavailable when there is no cuBLAS."""
    global _loaded
    if _loaded is not None:
        return _loaded
    with _lock:
        if _loaded is None:
            lib, path = _load_first(find_cublas())
            _declare(lib)
            handle = ctypes.c_void_p()
            _check(lib, "cublasCreate_v2", lib.cublasCreate_v2(ctypes.byref(handle)))
            _loaded = _Cublas(lib, path, handle)
    return _loaded


def _declare(lib: ctypes.CDLL) -> None:
    """Argument and result types of the functions used (ints are 32-bit, as in cuBLAS)."""
    P, I = ctypes.c_void_p, ctypes.c_int
    sigs = {
        "cublasCreate_v2": [P],
        "cublasSgemm_v2": [P, I, I, I, I, I, P, P, I, P, I, P, P, I],
        "cublasDgemm_v2": [P, I, I, I, I, I, P, P, I, P, I, P, P, I],
        "cublasSgemv_v2": [P, I, I, I, P, P, I, P, I, P, P, I],
        "cublasDgemv_v2": [P, I, I, I, P, P, I, P, I, P, P, I],
        "cublasSger_v2": [P, I, I, P, P, I, P, I, P, I],
        "cublasDger_v2": [P, I, I, P, P, I, P, I, P, I],
    }
    for name, argtypes in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = ctypes.c_int
    if hasattr(lib, "cublasGetStatusString"):
        lib.cublasGetStatusString.argtypes = [ctypes.c_int]
        lib.cublasGetStatusString.restype = ctypes.c_char_p


def _check(lib: ctypes.CDLL, call: str, status: int) -> None:
    """Raise CublasError naming ``call`` and its status unless ``status`` is success."""
    if status == 0:
        return
    name = _STATUS.get(status, f"status {status}")
    text = ""
    if hasattr(lib, "cublasGetStatusString"):
        raw = lib.cublasGetStatusString(status)
        text = f" ({raw.decode()})" if raw else ""
    raise CublasError(f"{call} failed: {name}{text}")


# ---------------------------------------------------------------------------- operands


@dataclass(frozen=True)
class MatrixOperand:
    """A 2-d GpuArray as cuBLAS reads it.

    ``by_rows``: the rows are contiguous (``strides == (ld, 1)``): read column-major, the
    memory holds the matrix's transpose. Otherwise the columns are (``strides == (1, ld)``).
    ``ld`` is the leading dimension in elements. ``array`` is the array read (the operand,
    or its contiguous copy).
    """

    array: GpuArray
    by_rows: bool
    ld: int


def matrix_operand(x: GpuArray, copy: bool = True) -> MatrixOperand | None:
    """How cuBLAS reads the matrix ``x``: in place when its rows or its columns are
    contiguous with a valid leading dimension, else (``copy``) a C-contiguous copy; None
    when it cannot be read in place and ``copy`` is False (an output)."""
    if x.ndim != 2:
        raise ValueError(f"cuBLAS takes matrices, got an array of shape {x.shape}")
    (r, c), (s0, s1) = x.shape, x.elem_strides
    if (c <= 1 or s1 == 1) and (r <= 1 or s0 >= max(1, c)):
        return MatrixOperand(x, True, s0 if r > 1 else max(1, c))
    if (r <= 1 or s0 == 1) and (c <= 1 or s1 >= max(1, r)):
        return MatrixOperand(x, False, s1 if c > 1 else max(1, r))
    if not copy:
        return None
    return MatrixOperand(x.copy(), True, max(1, c))


def _output_operand(call: str, x: GpuArray) -> MatrixOperand:
    """How cuBLAS writes the output matrix ``x``; ValueError when it cannot in place."""
    found = matrix_operand(x, copy=False)
    if found is None:
        raise ValueError(
            f"{call}: the output's strides {x.strides} are neither by rows nor by columns. "
            "HINT: pass a C-contiguous output."
        )
    return found


def _vector_operand(v: GpuArray, name: str, copy: bool = True) -> tuple[GpuArray, int]:
    """``(array, inc)``: ``v`` read with a positive increment, or (``copy``) a copy."""
    if v.ndim != 1:
        raise ValueError(f"cuBLAS takes a vector for {name}, got an array of shape {v.shape}")
    if v.shape[0] <= 1:
        return v, 1
    (inc,) = v.elem_strides
    if 0 < inc <= INT_MAX:
        return v, inc
    if not copy:
        raise ValueError(
            f"the output vector {name} has a stride of {inc} elements; cuBLAS writes with a "
            "positive stride only. HINT: pass a contiguous output."
        )
    return v.copy(), 1


def _check_dtypes(call: str, *arrays: GpuArray) -> str:
    """The BLAS prefix (``S``/``D``) of the arrays' common dtype; TypeError otherwise."""
    dtypes = {a.dtype for a in arrays}
    if len(dtypes) != 1:
        raise TypeError(f"{call}: the operands must have one dtype, got {sorted(map(str, dtypes))}")
    (dtype,) = dtypes
    prefix = {np.dtype("float32"): "S", np.dtype("float64"): "D"}.get(dtype)
    if prefix is None:
        raise TypeError(f"{call}: cuBLAS wrappers take float32 or float64, got {dtype}")
    return prefix


def _check_int(call: str, **values: int) -> None:
    """ValueError when a size or leading dimension does not fit cuBLAS's 32-bit ints."""
    for name, value in values.items():
        if value > INT_MAX:
            raise ValueError(f"{call}: {name} = {value} is over cuBLAS's limit of {INT_MAX}")


def host_view(x: GpuArray) -> np.ndarray:
    """A NumPy view of an emulator GpuArray's memory (same shape and byte strides).

    Only for the CPU emulator, where device addresses are host addresses; the GpuArray must
    outlive the view.
    """
    holder = type(
        "_Memory",
        (),
        {
            "__array_interface__": {
                "shape": x.shape,
                "typestr": x.dtype.str,
                "data": (x.ptr, False),
                "strides": x.strides,
                "version": 3,
            }
        },
    )
    return np.asarray(holder())


def _emulated(x: GpuArray) -> bool:
    return x.runtime.name == "emulator"


def _zeros(like: GpuArray, shape: tuple[int, ...]) -> GpuArray:
    """Zeros of ``like``'s dtype on its runtime (the operands of a product that only scales)."""
    return GpuArray.zeros(shape, like.dtype, like.runtime)


def _scalar(value: float, dtype: np.dtype) -> Any:
    """``value`` as a ctypes float of ``dtype`` (cuBLAS reads alpha/beta from the host)."""
    return ctypes.c_float(value) if dtype == np.float32 else ctypes.c_double(value)


# ---------------------------------------------------------------------------- routines


def gemm(alpha: float, a: GpuArray, b: GpuArray, beta: float, c: GpuArray) -> None:
    """``c <- alpha * a @ b + beta * c`` for matrices (float32 or float64), row-major.

    ``a`` and ``b`` may be any views (their rows or columns contiguous are read in place,
    others are copied); ``c`` must have its rows or its columns contiguous. When ``beta``
    is 0, ``c``'s contents are not read (NaN included), and when ``alpha`` is 0 neither are
    ``a`` and ``b``, as in BLAS.
    """
    prefix = _check_dtypes("gemm", a, b, c)
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2 or c.shape != (m, n):
        raise ValueError(
            f"gemm: shapes {a.shape} @ {b.shape} -> {c.shape} do not match: need (m, k) @ "
            "(k, n) -> (m, n)"
        )
    if m == 0 or n == 0:
        return
    oc = _output_operand("gemm", c)
    if _emulated(c):
        out = host_view(c)
        product = host_view(a) @ host_view(b) if k and alpha else np.zeros((m, n), c.dtype)
        scaled = c.dtype.type(alpha) * product
        out[...] = scaled if beta == 0 else scaled + c.dtype.type(beta) * out
        return
    if k == 0 or alpha == 0:  # c <- beta * c: a product of zeros (a, b are not read)
        a, b, alpha, k = _zeros(c, (m, 1)), _zeros(c, (1, n)), 0.0, 1
    oa, ob = matrix_operand(a), matrix_operand(b)
    if oc.by_rows:  # compute c^T = b^T @ a^T column-major
        first, second, rows, cols = ob, oa, n, m
    else:  # compute c = a @ b column-major
        first, second, rows, cols = oa, ob, m, n
    # An operand laid out like c is read as is; the other layout is its transpose.
    op1 = _OP_N if first.by_rows == oc.by_rows else _OP_T
    op2 = _OP_N if second.by_rows == oc.by_rows else _OP_T
    _check_int("gemm", m=m, n=n, k=k, lda=oa.ld, ldb=ob.ld, ldc=oc.ld)
    lib = cublas_library()
    call = f"cublas{prefix}gemm_v2"
    al, be = _scalar(alpha, c.dtype), _scalar(beta, c.dtype)
    status = getattr(lib.lib, call)(
        lib.handle,
        op1,
        op2,
        rows,
        cols,
        k,
        ctypes.byref(al),
        first.array.ptr,
        first.ld,
        second.array.ptr,
        second.ld,
        ctypes.byref(be),
        oc.array.ptr,
        oc.ld,
    )
    _check(lib.lib, call, status)


def gemv(alpha: float, a: GpuArray, x: GpuArray, beta: float, y: GpuArray) -> None:
    """``y <- alpha * a @ x + beta * y`` for a matrix ``a`` and vectors, row-major.

    ``a`` and ``x`` may be any views (copied when cuBLAS cannot read them in place); ``y``
    must have a positive stride. When ``beta`` is 0, ``y`` is not read; when ``alpha`` is 0,
    ``a`` and ``x`` are not.
    """
    prefix = _check_dtypes("gemv", a, x, y)
    (m, n) = a.shape
    if x.shape != (n,) or y.shape != (m,):
        raise ValueError(
            f"gemv: shapes {a.shape} @ {x.shape} -> {y.shape} do not match: need (m, n) @ "
            "(n,) -> (m,)"
        )
    if m == 0:
        return
    yv, incy = _vector_operand(y, "y", copy=False)
    if _emulated(y):
        out = host_view(y)
        product = host_view(a) @ host_view(x) if n and alpha else np.zeros(m, y.dtype)
        scaled = y.dtype.type(alpha) * product
        out[...] = scaled if beta == 0 else scaled + y.dtype.type(beta) * out
        return
    if n == 0 or alpha == 0:  # y <- beta * y: a product of zeros (a, x are not read)
        a, x, alpha, n = _zeros(y, (m, 1)), _zeros(y, (1,)), 0.0, 1
    oa = matrix_operand(a)
    xv, incx = _vector_operand(x, "x")
    # By rows the memory holds a^T (n x m column-major): y = (a^T)^T x.
    op, rows, cols = (_OP_T, n, m) if oa.by_rows else (_OP_N, m, n)
    _check_int("gemv", m=m, n=n, lda=oa.ld, incx=incx, incy=incy)
    lib = cublas_library()
    call = f"cublas{prefix}gemv_v2"
    al, be = _scalar(alpha, y.dtype), _scalar(beta, y.dtype)
    status = getattr(lib.lib, call)(
        lib.handle,
        op,
        rows,
        cols,
        ctypes.byref(al),
        oa.array.ptr,
        oa.ld,
        xv.ptr,
        incx,
        ctypes.byref(be),
        yv.ptr,
        incy,
    )
    _check(lib.lib, call, status)


def ger(alpha: float, x: GpuArray, y: GpuArray, a: GpuArray) -> None:
    """``a <- a + alpha * outer(x, y)`` for vectors ``x``, ``y`` and a matrix ``a``.

    ``x`` and ``y`` may be any views; ``a`` must have its rows or its columns contiguous.
    """
    prefix = _check_dtypes("ger", x, y, a)
    m, n = x.shape[0] if x.ndim == 1 else -1, y.shape[0] if y.ndim == 1 else -1
    if x.ndim != 1 or y.ndim != 1 or a.shape != (m, n):
        raise ValueError(
            f"ger: outer of shapes {x.shape} and {y.shape} into {a.shape} does not match: "
            "need (m,), (n,) -> (m, n)"
        )
    if m == 0 or n == 0 or alpha == 0:
        return
    oa = _output_operand("ger", a)
    if _emulated(a):
        out = host_view(a)
        out += a.dtype.type(alpha) * np.outer(host_view(x), host_view(y))
        return
    xv, incx = _vector_operand(x, "x")
    yv, incy = _vector_operand(y, "y")
    # By rows the memory holds a^T (n x m column-major): a^T += alpha * y x^T.
    if oa.by_rows:
        rows, cols, first, inc1, second, inc2 = n, m, yv, incy, xv, incx
    else:
        rows, cols, first, inc1, second, inc2 = m, n, xv, incx, yv, incy
    _check_int("ger", m=m, n=n, lda=oa.ld, incx=incx, incy=incy)
    lib = cublas_library()
    call = f"cublas{prefix}ger_v2"
    al = _scalar(alpha, a.dtype)
    status = getattr(lib.lib, call)(
        lib.handle,
        rows,
        cols,
        ctypes.byref(al),
        first.ptr,
        inc1,
        second.ptr,
        inc2,
        oa.array.ptr,
        oa.ld,
    )
    _check(lib.lib, call, status)
