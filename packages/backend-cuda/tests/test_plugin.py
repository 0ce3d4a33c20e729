"""What backend-cuda adds through its plugin hooks: ``tensor.transfer`` to the GPU,
``shared(..., target=, broadcastable=)``, its lines in ``python -m opgraph cache info``,
and the advice given for ``linker="cuda"``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.__main__ import main
from opgraph.compile.mode import Mode
from opgraph.tensor.sharedvar import TensorSharedVariable
from opgraph_cuda.compiler import build, cache_info_lines, cache_summary
from opgraph_cuda.kernels.rng_mrg import mrg_source
from opgraph_cuda.ops import GpuFromHost, HostFromGpu
from opgraph_cuda.type import GpuArraySharedVariable, GpuArrayType, GpuArrayVariable

# ---- tensor.transfer


# (ids other than "gpu": that keyword marks the tests needing a device)
@pytest.mark.parametrize("target", ["cuda", "cuda0", "gpu", "dev0", None], ids=lambda t: f"to-{t}")
def test_transfer_to_a_gpu_target_gives_a_gpu_variable(target):
    x = T.fmatrix("x")
    g = T.transfer(x, target)
    assert isinstance(g, GpuArrayVariable) and isinstance(g.owner.op, GpuFromHost)
    assert g.type == GpuArrayType("float32", (False, False))
    assert T.transfer(g, target) is g  # already there
    back = T.transfer(g, "cpu")
    assert isinstance(back.owner.op, HostFromGpu) and back.type == x.type
    assert g.transfer("cpu").type == x.type  # the GPU variable's own method agrees


def test_transfer_round_trip_computes(gpu_mode):
    x = T.fvector("x")
    y = T.transfer(T.transfer(x, "cuda") * 2, "cpu")
    f = opgraph.function([x], y, mode=gpu_mode)
    np.testing.assert_array_equal(f(np.arange(3, dtype="float32")), [0, 2, 4])


def test_transfer_to_an_unknown_target_names_the_package():
    with pytest.raises(ValueError, match=r"(?s)Can't transfer to target 'tpu'.*backend-cuda"):
        T.transfer(T.fvector(), "tpu")


# ---- shared(..., target=, broadcastable=)


def test_shared_with_a_gpu_target_moves_any_gpu_dtype():
    row = opgraph.shared(np.ones((1, 3), "float32"), target="cuda", broadcastable=(True, False))
    assert isinstance(row, GpuArraySharedVariable)
    assert row.type == GpuArrayType("float32", (True, False))
    np.testing.assert_array_equal(row.get_value(), np.ones((1, 3)))
    ints = opgraph.shared(np.arange(12, dtype="int32").reshape(2, 6), target="dev0")
    assert isinstance(ints, GpuArraySharedVariable) and ints.type.dtype == "int32"
    host = opgraph.shared(np.ones(3, "float32"), target="cpu")
    assert isinstance(host, TensorSharedVariable)
    half = opgraph.shared(np.ones(3, "float16"), target="cuda")
    assert isinstance(half, GpuArraySharedVariable) and half.type.dtype == "float16"
    with pytest.raises(TypeError, match="cannot hold complex64"):
        opgraph.shared(np.ones(3, "complex64"), target="cuda")
    with pytest.raises(TypeError, match="with options"):
        opgraph.shared(np.ones(3, "float32"), target="tpu")


def test_shared_keywords_under_device_cuda():
    """``device=cuda`` (in a fresh process: it cannot change once read): float32 values
    and float16 values move with their keyword extras; integers and ``shape=`` stay on the
    host."""
    code = textwrap.dedent(
        """
        import numpy as np, opgraph
        cases = {
            "row": opgraph.shared(np.ones((1, 4), "float32"), broadcastable=(True, False)),
            "cpu": opgraph.shared(np.ones(4, "float32"), target="cpu"),
            "shape": opgraph.shared(np.ones(4, "float32"), shape=(4,)),
            "int32": opgraph.shared(np.ones((3, 6), "int32")),
            "float16": opgraph.shared(np.ones(4, "float16")),
        }
        print({k: [type(v).__name__, str(v.type)] for k, v in cases.items()})
        """
    )
    env = dict(os.environ, OPGRAPH_FLAGS="device=cuda,cuda__emulate=True")
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    got = eval(proc.stdout.strip().splitlines()[-1])
    assert got["row"] == ["GpuArraySharedVariable", "GpuArrayType<None>(float32, row)"]
    assert got["float16"] == ["GpuArraySharedVariable", "GpuArrayType<None>(float16, vector)"]
    for name in ("cpu", "shape", "int32"):
        assert got[name][0] == "TensorSharedVariable", (name, got[name])


# ---- python -m opgraph cache info


def test_cache_info_counts_the_cuda_modules(tmp_path: Path):
    root = tmp_path / "cuda"
    assert cache_summary(root)["modules"] == {}
    build(mrg_source("float32", "a module for cache info"), "emulator", root)
    summary = cache_summary(root)
    assert summary["modules"] == {"emulator": 1} and summary["bytes"] > 0
    lines = cache_info_lines(root)
    assert lines[0] == f"cache directory: {root}"
    assert lines[1].startswith("holds: 1 CUDA kernel module (") and "1 for the emulator" in lines[1]
    env = dict(os.environ, OPGRAPH_CACHE_DIR=str(tmp_path))
    env.pop("OPGRAPH_FLAGS", None)
    run = [sys.executable, "-m", "opgraph", "cache", "info"]
    proc = subprocess.run(run, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "backend_cuda:\n  cache directory: " in proc.stdout and lines[1] in proc.stdout
    proc = subprocess.run([*run, "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["plugins"]["backend_cuda"] == lines


def test_cache_info_in_process(capsys):
    assert main(["cache", "info"]) == 0
    assert "CUDA kernel module" in capsys.readouterr().out


# ---- linker="cuda"


def test_linker_cuda_says_the_gpu_is_not_a_linker():
    with pytest.raises(ValueError, match=r"(?s)unknown linker 'cuda'.*the GPU is not a linker"):
        Mode(linker="cuda").linker  # noqa: B018 (the property resolves the name)
