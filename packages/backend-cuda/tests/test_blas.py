"""cuBLAS wrappers and the GPU BLAS ops (GpuGemm, GpuGemv, GpuGer, GpuDot22, GpuDot) vs NumPy.

On the emulator the wrappers compute with NumPy on views of the arrays' memory. The
``cublas_path`` fixture also runs each wrapper test through a stand-in for libcublas that
implements the column-major BLAS contract in NumPy (leading dimensions checked as cuBLAS
checks them), so the row-major to column-major translation (N/T flags, swapped operands,
``ld``) is tested without a GPU. On a GPU (``OPGRAPH_TEST_GPU=1``) the real cuBLAS runs.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.mode import get_mode
from opgraph.tensor.blas import Dot22Scalar, Gemm, Gemv, Ger
from opgraph_cuda import blas, cublas
from opgraph_cuda.array import GpuArray
from opgraph_cuda.blas import (
    GpuDot,
    GpuDot22,
    GpuDot22Scalar,
    GpuGemm,
    GpuGemv,
    GpuGer,
    gpu_gemm_inplace,
    gpu_gemm_no_inplace,
)
from opgraph_cuda.ops import GpuOp, host_from_gpu
from opgraph_cuda.runtime import GpuUnavailable, get_runtime
from opgraph_cuda.type import GpuArrayType

RTOL = {"float32": 2e-5, "float64": 1e-12}


# ---------------------------------------------------------------------------- a stand-in cuBLAS


def _colmajor(ptr: int, rows: int, cols: int, ld: int, dtype: np.dtype) -> np.ndarray:
    """The column-major matrix cuBLAS reads at ``ptr``, as a NumPy view of emulator memory."""
    item = dtype.itemsize
    view = GpuArray.__new__(GpuArray)  # only ptr/shape/strides/dtype are read by host_view
    view.ptr, view.shape, view.strides, view.dtype = ptr, (rows, cols), (item, ld * item), dtype
    return cublas.host_view(view)


def _vector(ptr: int, n: int, inc: int, dtype: np.dtype) -> np.ndarray:
    view = GpuArray.__new__(GpuArray)
    view.ptr, view.shape, view.strides, view.dtype = ptr, (n,), (inc * dtype.itemsize,), dtype
    return cublas.host_view(view)


class FakeCublasLib:
    """cuBLAS's gemm/gemv/ger contract (column-major, BLAS checks) implemented with NumPy."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    @staticmethod
    def _value(ref: Any) -> float:
        return ref._obj.value

    def _gemm(self, dtype: np.dtype, h, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc) -> int:
        self.calls.append(("gemm", ta, tb, m, n, k, lda, ldb, ldc))
        ar, ac = (m, k) if ta == 0 else (k, m)
        br, bc = (k, n) if tb == 0 else (n, k)
        if min(m, n, k) < 0 or lda < max(1, ar) or ldb < max(1, br) or ldc < max(1, m):
            return 7
        A = _colmajor(a, ar, ac, lda, dtype)
        B = _colmajor(b, br, bc, ldb, dtype)
        C = _colmajor(c, m, n, ldc, dtype)
        prod = (A if ta == 0 else A.T) @ (B if tb == 0 else B.T)
        alpha, beta = self._value(al), self._value(be)
        C[...] = alpha * prod if beta == 0 else alpha * prod + beta * C
        return 0

    def _gemv(self, dtype: np.dtype, h, trans, m, n, al, a, lda, x, incx, be, y, incy) -> int:
        self.calls.append(("gemv", trans, m, n, lda, incx, incy))
        if min(m, n) < 0 or lda < max(1, m) or incx == 0 or incy == 0:
            return 7
        A = _colmajor(a, m, n, lda, dtype)
        xl, yl = (n, m) if trans == 0 else (m, n)
        X, Y = _vector(x, xl, incx, dtype), _vector(y, yl, incy, dtype)
        prod = (A if trans == 0 else A.T) @ X
        alpha, beta = self._value(al), self._value(be)
        Y[...] = alpha * prod if beta == 0 else alpha * prod + beta * Y
        return 0

    def _ger(self, dtype: np.dtype, h, m, n, al, x, incx, y, incy, a, lda) -> int:
        self.calls.append(("ger", m, n, incx, incy, lda))
        if min(m, n) < 0 or lda < max(1, m) or incx == 0 or incy == 0:
            return 7
        A = _colmajor(a, m, n, lda, dtype)
        A += self._value(al) * np.outer(_vector(x, m, incx, dtype), _vector(y, n, incy, dtype))
        return 0

    def __getattr__(self, name: str) -> Any:
        kinds = {"gemm": self._gemm, "gemv": self._gemv, "ger": self._ger}
        dtypes = {"S": np.dtype("float32"), "D": np.dtype("float64")}
        for kind, fn in kinds.items():
            for prefix, dtype in dtypes.items():
                if name == f"cublas{prefix}{kind}_v2":
                    return lambda *args, fn=fn, dt=dtype: fn(dt, *args)
        raise AttributeError(name)


@pytest.fixture(params=["native", "colmajor-standin"])
def cublas_path(request: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCublasLib | None]:
    """``native``: what the runtime uses (NumPy on the emulator, cuBLAS on a GPU).
    ``colmajor-standin``: the cuBLAS code path against :class:`FakeCublasLib` (emulator)."""
    if request.param == "native":
        yield None
        return
    if get_runtime().name != "emulator":
        pytest.skip("the stand-in cuBLAS reads emulator memory")
    fake = FakeCublasLib()
    loaded = cublas._Cublas(fake, "stand-in", ctypes.c_void_p(1))  # type: ignore[arg-type]
    monkeypatch.setattr(cublas, "_emulated", lambda x: False)
    monkeypatch.setattr(cublas, "cublas_library", lambda: loaded)
    yield fake


# ---------------------------------------------------------------------------- operands


def _g(value: np.ndarray) -> GpuArray:
    return GpuArray.from_host(value)


def _layouts(rng: np.random.Generator, shape: tuple[int, int], dtype: str):
    """(name, host value, GpuArray view) for the layouts a matrix operand arrives in."""
    r, c = shape
    base = rng.standard_normal((r, c)).astype(dtype)
    yield "contiguous", base, GpuArray.from_host(base)
    yield "transposed", base, GpuArray.from_host(np.ascontiguousarray(base.T)).T
    wide = rng.standard_normal((r, 2 * c + 3)).astype(dtype)
    yield "row-sliced", wide[:, 1 : c + 1], GpuArray.from_host(wide)[:, 1 : c + 1]
    yield "column-strided", wide[:, ::2][:, :c], GpuArray.from_host(wide)[:, ::2][:, :c]
    rev = rng.standard_normal((r, c)).astype(dtype)
    yield "reversed", rev[::-1], GpuArray.from_host(rev)[::-1]


def _vectors(rng: np.random.Generator, n: int, dtype: str):
    """(name, host value, GpuArray view) for contiguous, strided and reversed vectors."""
    v = rng.standard_normal(2 * n + 1).astype(dtype)
    g = GpuArray.from_host(v)
    yield "contiguous", v[:n], g[:n]
    yield "strided", v[::2][:n], g[::2][:n]
    yield "reversed", v[::-1][:n], g[::-1][:n]


# ---------------------------------------------------------------------------- wrappers


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(5, 4, 3), (1, 7, 1), (6, 1, 5), (3, 0, 4), (0, 3, 2)])
def test_gemm_matches_numpy_for_every_operand_layout(cublas_path, dtype, shape):
    m, k, n = shape
    rng = np.random.default_rng(1)
    for name_a, a, ga in _layouts(rng, (m, k), dtype):
        for name_b, b, gb in _layouts(rng, (k, n), dtype):
            c0 = rng.standard_normal((m, n)).astype(dtype)
            gc = GpuArray.from_host(c0)
            cublas.gemm(0.5, ga, gb, -2.0, gc)
            expected = 0.5 * (a @ b) - 2.0 * c0
            np.testing.assert_allclose(
                gc.get(), expected, rtol=RTOL[dtype], atol=1e-5, err_msg=f"{name_a} @ {name_b}"
            )


@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_gemm_writes_outputs_laid_out_by_rows_or_columns(cublas_path, layout):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 3)).astype("float32")
    b = rng.standard_normal((3, 5)).astype("float32")
    if layout == "rows":
        big = GpuArray.from_host(np.zeros((4, 9), "float32"))
        out = big[:, 2:7]  # rows contiguous, leading dimension 9
    else:
        out = GpuArray.from_host(np.zeros((5, 4), "float32")).T
    cublas.gemm(1.0, GpuArray.from_host(a), GpuArray.from_host(b), 0.0, out)
    np.testing.assert_allclose(out.get(), a @ b, rtol=RTOL["float32"])
    if layout == "rows":
        host = big.get()
        assert not host[:, :2].any() and not host[:, 7:].any()  # nothing written outside


def test_gemm_beta_zero_ignores_nan_and_alpha_zero_ignores_operands(cublas_path):
    a = np.full((3, 2), np.nan, "float32")
    b = np.ones((2, 4), "float32")
    c = GpuArray.from_host(np.full((3, 4), np.nan, "float32"))
    cublas.gemm(1.0, GpuArray.from_host(np.ones((3, 2), "float32")), GpuArray.from_host(b), 0.0, c)
    np.testing.assert_array_equal(c.get(), np.full((3, 4), 2.0, "float32"))
    cublas.gemm(0.0, GpuArray.from_host(a), GpuArray.from_host(b), 0.5, c)
    np.testing.assert_array_equal(c.get(), np.full((3, 4), 1.0, "float32"))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(5, 4), (1, 6), (6, 1), (4, 0), (0, 3)])
def test_gemv_matches_numpy_for_every_operand_layout(cublas_path, dtype, shape):
    m, n = shape
    rng = np.random.default_rng(3)
    for name_a, a, ga in _layouts(rng, (m, n), dtype):
        for name_x, x, gx in _vectors(rng, n, dtype):
            y0 = rng.standard_normal(m).astype(dtype)
            gy = GpuArray.from_host(y0)
            cublas.gemv(1.5, ga, gx, 0.25, gy)
            np.testing.assert_allclose(
                gy.get(),
                1.5 * (a @ x) + 0.25 * y0,
                rtol=RTOL[dtype],
                atol=1e-5,
                err_msg=f"{name_a} @ {name_x}",
            )


def test_gemv_writes_into_a_strided_output(cublas_path):
    a = np.arange(12, dtype="float32").reshape(4, 3)
    x = np.array([1, -1, 2], "float32")
    big = GpuArray.from_host(np.full(8, np.nan, "float32"))
    cublas.gemv(1.0, GpuArray.from_host(a), GpuArray.from_host(x), 0.0, big[::2])
    host = big.get()
    np.testing.assert_allclose(host[::2], a @ x)
    assert np.isnan(host[1::2]).all()
    with pytest.raises(ValueError, match="positive stride"):
        cublas.gemv(1.0, GpuArray.from_host(a), GpuArray.from_host(x), 0.0, big[::-2])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(4, 3), (1, 5), (5, 1), (0, 3), (3, 0)])
def test_ger_matches_numpy_for_every_layout(cublas_path, dtype, shape):
    m, n = shape
    rng = np.random.default_rng(4)
    xs, ys = list(_vectors(rng, m, dtype)), list(_vectors(rng, n, dtype))
    outs = [
        ("contiguous", lambda v: GpuArray.from_host(v)),
        ("columns", lambda v: GpuArray.from_host(np.ascontiguousarray(v.T)).T),
    ]
    for (name_x, x, gx), (name_y, y, gy) in zip(xs, ys, strict=True):
        for name_a, make in outs:
            a0 = rng.standard_normal((m, n)).astype(dtype)
            ga = make(a0)
            cublas.ger(-0.5, gx, gy, ga)
            np.testing.assert_allclose(
                ga.get(),
                a0 - 0.5 * np.outer(x, y),
                rtol=RTOL[dtype],
                atol=1e-6,
                err_msg=f"{name_x}, {name_y} into {name_a}",
            )


def test_standin_sees_transposition_flags_not_copies(cublas_path):
    if cublas_path is None:
        pytest.skip("checks the calls made to the stand-in")
    a = GpuArray.from_host(np.ones((5, 3), "float32"))
    b = GpuArray.from_host(np.ones((4, 3), "float32"))
    c = GpuArray.empty((5, 4), "float32")
    cublas.gemm(1.0, a, b.T, 0.0, c)  # c^T = (b.T)^T @ a^T: b.T is laid out by columns: T
    cublas.gemm(1.0, a, GpuArray.from_host(np.ones((3, 4), "float32")), 0.0, c)
    assert cublas_path.calls[0] == ("gemm", 1, 0, 4, 5, 3, 3, 3, 4)
    assert cublas_path.calls[1] == ("gemm", 0, 0, 4, 5, 3, 4, 3, 4)


def test_wrappers_reject_bad_shapes_and_dtypes():
    a = GpuArray.from_host(np.ones((3, 2), "float32"))
    with pytest.raises(ValueError, match=r"gemm: shapes \(3, 2\) @ \(3, 2\)"):
        cublas.gemm(1.0, a, a, 0.0, GpuArray.empty((3, 2), "float32"))
    with pytest.raises(TypeError, match="one dtype"):
        cublas.gemm(1.0, a, a.T.copy().astype("float64"), 0.0, GpuArray.empty((3, 3), "float32"))
    with pytest.raises(TypeError, match="float32 or float64"):
        i = GpuArray.from_host(np.ones((2, 2), "int32"))
        cublas.gemm(1.0, i, i, 0.0, i)
    with pytest.raises(ValueError, match="gemv: shapes"):
        cublas.gemv(1.0, a, GpuArray.empty((3,), "float32"), 0.0, GpuArray.empty((3,), "float32"))


def test_errors_name_the_call_and_status():
    class Lib:
        pass

    with pytest.raises(cublas.CublasError, match="cublasSgemm_v2 failed: CUBLAS_STATUS_INVALID"):
        cublas._check(Lib(), "cublasSgemm_v2", 7)  # type: ignore[arg-type]


def test_missing_library_says_what_to_install(monkeypatch):
    monkeypatch.setattr(cublas, "find_cublas", lambda: ["/nonexistent/libcublas.so.12"])
    monkeypatch.setattr(cublas, "_loaded", None)
    with pytest.raises(GpuUnavailable, match="nvidia-cublas-cu12"):
        cublas.cublas_library()


def test_search_order_lists_configured_places_first(monkeypatch, tmp_path):
    lib = tmp_path / "libcublas.so.12"
    lib.write_bytes(b"")
    (tmp_path / "libcublasLt.so.12").write_bytes(b"")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path.parent / "nothing"))
    monkeypatch.setattr(cublas, "_configured_path", lambda: str(tmp_path))
    paths = cublas.find_cublas()
    assert paths[0] == str(lib)
    assert not any("cublasLt" in p for p in paths)


@pytest.mark.gpu
def test_real_cublas_runs_odd_shapes_with_every_flag():
    """On a GPU: libcublas is found, and products of odd shapes in all four N/T flag
    combinations (operands read in place, strided output) match NumPy."""
    assert get_runtime().name == "pycuda"
    assert "cublas" in cublas.cublas_library().path
    rng = np.random.default_rng(11)
    m, k, n = 257, 129, 65
    a = rng.standard_normal((m, k)).astype("float32")
    b = rng.standard_normal((k, n)).astype("float32")
    a_views = [_g(a), _g(np.ascontiguousarray(a.T)).T]
    b_views = [_g(b), _g(np.ascontiguousarray(b.T)).T]
    for ga in a_views:
        for gb in b_views:
            big = _g(np.zeros((m, n + 7), "float32"))
            cublas.gemm(1.0, ga, gb, 0.0, big[:, 3 : n + 3])
            np.testing.assert_allclose(big.get()[:, 3 : n + 3], a @ b, rtol=1e-4, atol=1e-4)
            assert not big.get()[:, :3].any() and not big.get()[:, n + 3 :].any()


# ---------------------------------------------------------------------------- ops


def _run(op: GpuOp, *args: Any) -> Any:
    """Build the node from GPU-typed variables and scalar host variables, prepare, run."""
    variables = []
    for a in args:
        if isinstance(a, GpuArray):
            variables.append(GpuArrayType(str(a.dtype), [False] * a.ndim)())
        else:
            variables.append(T.scalar(dtype=str(np.asarray(a).dtype)))
    node = op.make_node(*variables)
    values = [a if isinstance(a, GpuArray) else np.asarray(a) for a in args]
    (out,) = op.prepare_gpu(node)(values)
    shapes = op.infer_shape(node, [a.shape if isinstance(a, GpuArray) else () for a in args])
    assert tuple(int(s) for s in shapes[0]) == out.shape
    return out


def test_gpu_gemm_op_all_layouts_and_props():
    rng = np.random.default_rng(5)
    assert str(gpu_gemm_no_inplace) == "GpuGemm{no_inplace}"
    assert str(gpu_gemm_inplace) == "GpuGemm{inplace}" and gpu_gemm_inplace.destroy_map
    assert GpuGemm(False) == gpu_gemm_no_inplace and GpuGemm(True) != gpu_gemm_no_inplace
    for name_x, x, gx in _layouts(rng, (4, 3), "float32"):
        y = rng.standard_normal((3, 5)).astype("float32")
        z = rng.standard_normal((4, 5)).astype("float32")
        gz = _g(z)
        out = _run(gpu_gemm_no_inplace, gz, np.float32(2), gx, _g(y), np.float32(0.5))
        np.testing.assert_allclose(out.get(), 0.5 * z + 2 * x @ y, rtol=2e-5, err_msg=name_x)
        np.testing.assert_array_equal(gz.get(), z)  # not in place: Z unchanged


def test_gpu_gemm_inplace_writes_into_z_even_when_strided():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 3)).astype("float32")
    y = rng.standard_normal((3, 2)).astype("float32")
    z = rng.standard_normal((4, 2)).astype("float32")
    gz = _g(z)
    out = _run(gpu_gemm_inplace, gz, np.float32(1), _g(x), _g(y), np.float32(1))
    assert out is gz
    np.testing.assert_allclose(gz.get(), z + x @ y, rtol=2e-5)
    wide = rng.standard_normal((4, 4)).astype("float32")
    gw = _g(wide)
    strided = gw[:, ::2]  # neither rows nor columns contiguous: computed aside, copied back
    out = _run(gpu_gemm_inplace, strided, np.float32(1), _g(x), _g(y), np.float32(-1))
    assert out is strided
    expected = wide.copy()
    expected[:, ::2] = -wide[:, ::2] + x @ y
    np.testing.assert_allclose(gw.get(), expected, rtol=2e-5, atol=1e-6)


def test_gpu_gemv_ger_and_dots():
    rng = np.random.default_rng(7)
    A = rng.standard_normal((5, 4)).astype("float32")
    x4, x5 = (rng.standard_normal(n).astype("float32") for n in (4, 5))
    y = rng.standard_normal(5).astype("float32")
    out = _run(GpuGemv(), _g(y), np.float32(3), _g(A), _g(x4), np.float32(-1))
    np.testing.assert_allclose(out.get(), 3 * A @ x4 - y, rtol=2e-5)
    out = _run(GpuGemv(), _g(x4), np.float32(1), _g(A).T, _g(x5), np.float32(0))
    np.testing.assert_allclose(out.get(), A.T @ x5, rtol=2e-5)
    out = _run(GpuGer(), _g(A), np.float32(2), _g(x5), _g(x4))
    np.testing.assert_allclose(out.get(), A + 2 * np.outer(x5, x4), rtol=2e-5)
    assert str(GpuGer(destructive=True)) == "GpuGer{destructive}"
    B = rng.standard_normal((4, 3)).astype("float32")
    np.testing.assert_allclose(_run(GpuDot22(), _g(A), _g(B)).get(), A @ B, rtol=2e-5)
    out = _run(GpuDot22Scalar(), _g(A), _g(B), np.float32(-2))
    np.testing.assert_allclose(out.get(), -2 * A @ B, rtol=2e-5)
    np.testing.assert_allclose(_run(GpuDot(), _g(A), _g(x4)).get(), A @ x4, rtol=2e-5)
    np.testing.assert_allclose(_run(GpuDot(), _g(x5), _g(A)).get(), x5 @ A, rtol=2e-5)
    strided = _g(np.repeat(x4, 2))[::2]
    vv = _run(GpuDot(), strided, _g(x4))
    assert vv.shape == () and np.isclose(vv.get(), x4 @ x4, rtol=2e-5)
    empty = _run(GpuDot(), _g(np.zeros((3, 0), "float32")), _g(np.zeros(0, "float32")))
    np.testing.assert_array_equal(empty.get(), np.zeros(3, "float32"))


def test_ops_reject_bad_inputs_with_clear_errors():
    m = GpuArrayType("float32", (False, False))
    v = GpuArrayType("float32", (False,))
    with pytest.raises(TypeError, match="X must have 2 dimension"):
        GpuGemm().make_node(m(), T.fscalar(), v(), m(), T.fscalar())
    with pytest.raises(TypeError, match="cuBLAS takes float32 or float64"):
        i = GpuArrayType("int32", (False, False))
        GpuDot22().make_node(i(), i())
    with pytest.raises(TypeError, match="must cast to the result's dtype float32"):
        GpuGemm().make_node(m(), T.dscalar(), m(), m(), T.fscalar())
    with pytest.raises(ValueError, match=r"GpuDot22: x, y of shapes \(3, 2\) and \(3, 2\)"):
        _run(GpuDot22(), _g(np.ones((3, 2), "float32")), _g(np.ones((3, 2), "float32")))


# ---------------------------------------------------------------------------- through function


def _gpu_ops(f: Any) -> list[type]:
    return [type(n.op) for n in f.maker.fgraph.toposort() if isinstance(n.op, GpuOp)]


def _blas_ops(f: Any) -> list[type]:
    return [t for t in _gpu_ops(f) if t.__module__ == blas.__name__]


def test_dot_cases_lift_and_match_numpy(gpu_mode):
    rng = np.random.default_rng(8)
    X, Y = T.fmatrix("X"), T.fmatrix("Y")
    u, w = T.fvector("u"), T.fvector("w")
    xv = rng.standard_normal((6, 5)).astype("float32")
    yv = rng.standard_normal((5, 4)).astype("float32")
    uv = rng.standard_normal(5).astype("float32")
    wv = rng.standard_normal(6).astype("float32")
    cases = [
        ([X, Y], T.dot(X, Y), (xv, yv), xv @ yv),
        ([X, Y], T.dot(Y.T, X.T), (xv, yv), yv.T @ xv.T),
        ([X, u], T.dot(X, u), (xv, uv), xv @ uv),
        ([X, w], T.dot(w, X), (xv, wv), wv @ xv),
        ([u, w], T.dot(u, w[:5]), (uv, wv), uv @ wv[:5]),
        ([X, Y], T.dot(X[::2], Y[:, 1:]), (xv, yv), xv[::2] @ yv[:, 1:]),
    ]
    for mode in (gpu_mode, get_mode("FAST_COMPILE")):
        for ins, out, args, expected in cases:
            f = opgraph.function(ins, out, mode=mode)
            assert _blas_ops(f), f"no GPU BLAS op in {f.maker.fgraph.toposort()}"
            np.testing.assert_allclose(f(*args), expected, rtol=2e-5, atol=1e-5)


def test_gemm_gemv_ger_graphs_lift_and_match_numpy(gpu_mode):
    rng = np.random.default_rng(9)
    Z, X, Y = T.fmatrix("Z"), T.fmatrix("X"), T.fmatrix("Y")
    u, v = T.fvector("u"), T.fvector("v")
    zv = rng.standard_normal((4, 3)).astype("float32")
    xv = rng.standard_normal((4, 5)).astype("float32")
    yv = rng.standard_normal((5, 3)).astype("float32")
    uv, vv = rng.standard_normal(4).astype("float32"), rng.standard_normal(3).astype("float32")
    # Scalars exact in float32 (0.1 is not: the CPU rewrites then keep dot and an Elemwise).
    f = opgraph.function([Z, X, Y], Z * 0.5 - 0.25 * T.dot(X, Y), mode=gpu_mode)
    np.testing.assert_allclose(f(zv, xv, yv), zv * 0.5 - 0.25 * xv @ yv, rtol=2e-5, atol=1e-6)
    assert GpuGemm in _blas_ops(f)
    f = opgraph.function([u, X, Y], u - 0.25 * T.dot(X, Y[:, 0]), mode=gpu_mode)
    np.testing.assert_allclose(f(uv, xv, yv), uv - 0.25 * xv @ yv[:, 0], rtol=2e-5, atol=1e-6)
    assert GpuGemv in _blas_ops(f)
    f = opgraph.function([Z, u, v], Z + 0.5 * T.outer(u, v), mode=gpu_mode)
    np.testing.assert_allclose(f(zv, uv, vv), zv + 0.5 * np.outer(uv, vv), rtol=2e-5)
    assert GpuGer in _blas_ops(f)
    f = opgraph.function([X, Y], 3.0 * T.dot(X, Y), mode=gpu_mode)
    np.testing.assert_allclose(f(xv, yv), 3 * xv @ yv, rtol=2e-5, atol=1e-6)


def test_products_work_in_place_on_intermediates_only(gpu_mode):
    """FAST_RUN's in-place stage makes GpuGemm/GpuGemv/GpuGer write into their first input
    where it is an intermediate buffer; a user's input or a shared variable the function does
    not update is never overwritten (``excluding("inplace")`` keeps every product out of place)."""
    rng = np.random.default_rng(12)
    Z, X, Y = T.fmatrix("Z"), T.fmatrix("X"), T.fmatrix("Y")
    u, v = T.fvector("u"), T.fvector("v")
    zv = rng.standard_normal((4, 3)).astype("float32")
    xv = rng.standard_normal((4, 5)).astype("float32")
    yv = rng.standard_normal((5, 3)).astype("float32")
    uv, vv = rng.standard_normal(4).astype("float32"), rng.standard_normal(3).astype("float32")
    cases = [
        ([Z, X, Y], T.exp(Z) * 0.5 - 0.25 * T.dot(X, Y), (zv, xv, yv), GpuGemm, "inplace"),
        ([u, X, Y], T.exp(u) - 0.25 * T.dot(X, Y[:, 0]), (uv, xv, yv), GpuGemv, "inplace"),
        ([Z, u, v], T.exp(Z) + 0.5 * T.outer(u, v), (zv, uv, vv), GpuGer, "destructive"),
    ]
    for inputs, out, values, op_class, prop in cases:
        f = opgraph.function(inputs, out, mode=gpu_mode)
        (node,) = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, op_class)]
        assert getattr(node.op, prop), node.op
        g = opgraph.function(inputs, out, mode=gpu_mode.excluding("inplace"))
        (node,) = [n for n in g.maker.fgraph.toposort() if isinstance(n.op, op_class)]
        assert not getattr(node.op, prop), node.op
        kept = [v.copy() for v in values]
        np.testing.assert_allclose(f(*values), g(*values), rtol=1e-6, atol=1e-6)
        for before, after in zip(kept, values, strict=True):
            np.testing.assert_array_equal(before, after)
    # On a shared variable the function only reads, the product stays out of place.
    W = opgraph.shared(zv, target="cuda")
    f = opgraph.function([X, Y], W * 0.5 - 0.25 * T.dot(X, Y), mode=gpu_mode)
    assert not any(getattr(n.op, "inplace", False) for n in f.maker.fgraph.toposort())
    f(xv, yv)
    np.testing.assert_array_equal(W.get_value(), zv)


def test_lifters_build_gpu_ops_from_cpu_blas_nodes(gpu_mode):
    """Each CPU BLAS op, built directly, lifts to its GPU op and computes the same values."""
    rng = np.random.default_rng(10)
    Z, X, Y = T.fmatrix("Z"), T.fmatrix("X"), T.fmatrix("Y")
    u, v = T.fvector("u"), T.fvector("v")
    a, b = T.fscalar("a"), T.fscalar("b")
    zv = rng.standard_normal((4, 3)).astype("float32")
    xv = rng.standard_normal((4, 5)).astype("float32")
    yv = rng.standard_normal((5, 3)).astype("float32")
    uv, vv = rng.standard_normal(4).astype("float32"), rng.standard_normal(3).astype("float32")
    av, bv = np.float32(0.7), np.float32(-1.5)
    cases = [
        (Gemm()(Z, a, X, Y, b), [Z, a, X, Y, b], (zv, av, xv, yv, bv), bv * zv + av * xv @ yv),
        (Gemv()(u, a, Z, v, b), [u, a, Z, v, b], (uv, av, zv, vv, bv), bv * uv + av * zv @ vv),
        (Ger()(Z, a, u, v), [Z, a, u, v], (zv, av, uv, vv), zv + av * np.outer(uv, vv)),
        (Dot22Scalar()(X, Y, a), [X, Y, a], (xv, yv, av), av * xv @ yv),
    ]
    no_blas = gpu_mode.excluding("blas")
    for out, ins, args, expected in cases:
        f = opgraph.function(ins, out, mode=no_blas)
        assert _blas_ops(f), f"{out.owner.op} was not lifted: {f.maker.fgraph.toposort()}"
        np.testing.assert_allclose(f(*args), expected, rtol=2e-5, atol=1e-5)


def test_float64_stays_on_the_cpu(gpu_mode):
    X, Y = T.dmatrix("X"), T.dmatrix("Y")
    f = opgraph.function([X, Y], T.dot(X, Y), mode=gpu_mode)
    assert not _gpu_ops(f)
    xv = np.ones((2, 3))
    np.testing.assert_allclose(f(xv, xv.T), xv @ xv.T)


def test_gpu_inputs_stay_on_the_device(gpu_mode):
    g = GpuArrayType("float32", (False, False))("g")
    h = GpuArrayType("float32", (False, False))("h")
    f = opgraph.function([g, h], host_from_gpu(g).dot(host_from_gpu(h)), mode=gpu_mode)
    assert GpuDot22 in _blas_ops(f)
    gv = np.arange(6, dtype="float32").reshape(2, 3)
    np.testing.assert_allclose(f(_g(gv), _g(gv.T.copy())), gv @ gv.T, rtol=2e-5)
