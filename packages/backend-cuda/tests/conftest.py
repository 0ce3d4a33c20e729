"""Fixtures of backend-cuda's tests: which runtime they run on, and a GPU compile mode.

Without ``OPGRAPH_TEST_GPU=1`` (CI, any machine without a GPU) every test runs on the CPU
emulator (``cuda__emulate``): the same kernel text, compiled as C++, on host memory; and
each kernel module is also compiled by nvcc for sm_75..sm_90 when nvcc is installed. With
``OPGRAPH_TEST_GPU=1`` (``.ci/gpu`` on a GPU machine) the same tests run on the GPU through
PyCUDA, and the tests marked ``gpu`` run too; they skip elsewhere with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

import opgraph
from opgraph import config
from opgraph.compile.mode import get_mode
from opgraph_cuda.compiler import wait_for_nvcc_checks

ON_GPU = os.environ.get("OPGRAPH_TEST_GPU") == "1"


@pytest.fixture(autouse=True, scope="session")
def _cuda_runtime() -> Iterator[None]:
    """Every test of this folder runs on the emulator unless OPGRAPH_TEST_GPU=1; at the end,
    every kernel module the tests made must also have compiled with nvcc for sm_75..sm_90
    (those checks run on a background thread while the tests go on)."""
    with config.change_flags(cuda__emulate=not ON_GPU):
        yield
    failures = wait_for_nvcc_checks()
    assert not failures, "nvcc rejected kernel modules that g++ compiled:\n" + "\n\n".join(
        str(exc) for exc in failures
    )


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Tests marked ``gpu`` need a real device: skip them (with the reason) without one."""
    if ON_GPU:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device: run with OPGRAPH_TEST_GPU=1 (.ci/gpu)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def gpu_mode() -> Iterator[Any]:
    """FAST_RUN with the GPU pass on (``cuda__lift=always``): graphs of host variables are
    lifted to the device as under ``device=cuda``."""
    with config.change_flags(cuda__lift="always"):
        yield get_mode("FAST_RUN")


def gpu_function(inputs: Any, outputs: Any, **kwargs: Any) -> Any:
    """``opgraph.function`` compiled with the GPU pass on (for use inside ``gpu_mode``)."""
    return opgraph.function(inputs, outputs, mode=get_mode("FAST_RUN"), **kwargs)
