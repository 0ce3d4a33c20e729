"""The runtime layer: memory, copies, kernel modules, the compile cache, GpuArray views."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from opgraph import config
from opgraph_cuda import compiler
from opgraph_cuda.array import GpuArray, c_strides
from opgraph_cuda.runtime import CudaSource, KernelSig, get_runtime
from opgraph_cuda.runtime.base import param_kind

SCALE = CudaSource(
    "scale_test",
    '#include "opgraph_cuda_prelude.cuh"\n'
    'extern "C" __global__ void scale(float *out, const float *x, ptrdiff_t n, float a) {\n'
    "    for (ptrdiff_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
    "         i += (ptrdiff_t)gridDim.x * blockDim.x) {\n"
    "        out[i] = a * x[i];\n"
    "    }\n"
    "}\n",
    (KernelSig("scale", ("float*", "const float*", "ptrdiff_t", "float")),),
)


def test_round_trip_keeps_values_and_dtype():
    rng = np.random.default_rng(0)
    for dtype in ("float32", "float64", "int8", "int64", "bool"):
        x = (rng.standard_normal((3, 5)) * 10).astype(dtype)
        g = GpuArray.from_host(x)
        assert g.dtype == x.dtype and g.shape == x.shape and g.strides == x.strides
        np.testing.assert_array_equal(g.get(), x)
        np.testing.assert_array_equal(np.asarray(g), x)


def test_empty_and_zero_d_arrays():
    g = GpuArray.from_host(np.zeros((0, 4), "float32"))
    assert g.size == 0 and g.get().shape == (0, 4)
    s = GpuArray.from_host(np.float32(2.5))
    assert s.shape == () and s.get() == np.float32(2.5)


def test_views_match_numpy_views():
    x = np.arange(60, dtype="float32").reshape(3, 4, 5)
    g = GpuArray.from_host(x)
    for index in [
        (1,),
        (slice(None), 2),
        (slice(None, None, -1), slice(1, 3)),
        (Ellipsis, 4),
        (None, 0, slice(None, None, 2)),
        (-1, -2, -3),
    ]:
        view = g[index]
        expected = x[index]
        assert view.shape == expected.shape
        assert view.strides == expected.strides
        assert view.buffer is g.buffer
        if view.is_c_contiguous:
            np.testing.assert_array_equal(view.get(), expected)
    np.testing.assert_array_equal(g.transpose((2, 0, 1)).strides, x.transpose(2, 0, 1).strides)
    with pytest.raises(IndexError, match="out of bounds"):
        g[3]
    with pytest.raises(IndexError, match="basic indexing"):
        g[[0, 1]]


def test_reshape_of_contiguous_is_a_view():
    g = GpuArray.from_host(np.arange(12, dtype="float32"))
    r = g.reshape((3, -1))
    assert r.shape == (3, 4) and r.buffer is g.buffer
    np.testing.assert_array_equal(r.get(), np.arange(12).reshape(3, 4))
    with pytest.raises(ValueError, match="cannot reshape"):
        g.reshape((5, -1))


def test_c_strides_and_contiguity():
    assert c_strides((2, 3, 4), 4) == (48, 16, 4)
    g = GpuArray.from_host(np.ones((4, 1, 3), "float32"))
    assert g.is_c_contiguous
    assert not g.transpose().is_c_contiguous


def test_kernel_launch_computes_and_grid_loops():
    rt = get_runtime()
    x = np.random.default_rng(1).standard_normal(1000).astype("float32")
    g = GpuArray.from_host(x)
    out = GpuArray.empty(x.shape, "float32")
    launch = rt.load(SCALE)["scale"]
    # Fewer threads than elements: the grid-stride loop covers the rest.
    launch((min(2, rt.max_blocks),), (32,), out.ptr, g.ptr, x.size, 3.0)
    np.testing.assert_allclose(out.get(), 3 * x, rtol=1e-6)
    with pytest.raises(TypeError, match="takes 4 arguments"):
        launch((1,), (32,), out.ptr, g.ptr)


def test_param_kinds():
    assert [param_kind(t) for t in ("const float *", "ptrdiff_t", "int", "float", "double")] == [
        "P",
        "q",
        "i",
        "f",
        "d",
    ]
    with pytest.raises(ValueError, match="not supported"):
        param_kind("long")


def test_cache_entry_is_complete_and_repaired(tmp_path: Path):
    with config.change_flags(compiledir=str(tmp_path)):
        arch = get_runtime().arch
        path = compiler.build(SCALE, arch)
        manifest = json.loads((path.parent / "manifest.json").read_text())
        assert manifest["name"] == "scale_test" and manifest["arch"] == arch
        assert (path.parent / "module.cu").read_text().startswith("#include")
        # A truncated binary is dropped and rebuilt (nvcc's output names its temporary
        # folder, so the rebuilt binary's hash is its new manifest's, not the old one's).
        size = path.stat().st_size
        path.write_bytes(path.read_bytes()[:10])
        again = compiler.build(SCALE, arch)
        rebuilt = json.loads((again.parent / "manifest.json").read_text())
        assert again == path and again.stat().st_size > 10 < size
        assert compiler._sha(again) == rebuilt["sha256"]


def test_compile_error_names_the_kept_source_and_the_message(tmp_path: Path):
    broken = CudaSource(
        "broken_test",
        '#include "opgraph_cuda_prelude.cuh"\nextern "C" __global__ void k(float *o) { o[0] = ; }\n',
        (KernelSig("k", ("float*",)),),
    )
    with (
        config.change_flags(compiledir=str(tmp_path)),
        pytest.raises(compiler.CudaCompileError) as info,
    ):
        get_runtime().load(broken)
    message = str(info.value)
    assert "broken_test" in message and "source kept at" in message
    kept = Path(message.split("source kept at ")[1].split(")")[0])
    assert kept.is_file() and "o[0] = ;" in kept.read_text()


@pytest.mark.skipif(compiler.find_nvcc() is None, reason="nvcc is not installed")
def test_nvcc_compiles_for_every_checked_architecture(tmp_path: Path):
    with config.change_flags(compiledir=str(tmp_path)):
        assert compiler.check_with_nvcc(SCALE)
        fatbin = next(tmp_path.rglob("module.fatbin"))
        assert fatbin.stat().st_size > 0


@pytest.mark.gpu
def test_real_device_reports_its_architecture():
    rt = get_runtime()
    assert rt.name == "pycuda" and rt.arch.startswith("sm_") and rt.sm_count > 0
    free, total = rt.mem_info()
    assert 0 < free <= total


@pytest.mark.skipif(compiler.find_nvcc() is None, reason="nvcc is not installed")
@pytest.mark.skipif(
    os.environ.get("OPGRAPH_TEST_GPU") == "1", reason="checks the emulator's nvcc pass"
)
def test_text_g_plus_plus_takes_but_nvcc_rejects_is_reported(tmp_path: Path):
    host_only = CudaSource(
        "host_only_test",
        '#include "opgraph_cuda_prelude.cuh"\n#include <string>\n'
        'extern "C" __global__ void k(float *o) { std::string s("x"); o[0] = s.size(); }\n',
        (KernelSig("k", ("float*",)),),
    )
    with config.change_flags(compiledir=str(tmp_path)):
        get_runtime().load(host_only)  # g++ builds it: the emulator can run it
        failures = compiler.wait_for_nvcc_checks()
    assert len(failures) == 1
    assert "host_only_test" in str(failures[0]) and "source kept at" in str(failures[0])
