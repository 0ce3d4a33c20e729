"""The plugin as opgraph sees it: loaded from its entry point, cheap to import, its linker,
mode and flag, and how it behaves without opgraph-backend-c."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from example_plugin import Cube, cube
from example_plugin.linker import cube_kernel
from opgraph.compile.mode import Mode
from opgraph.plugins import get_plugin_manager
from opgraph.testing import assert_allclose, installed_linkers

HAS_C = "c" in installed_linkers()


def test_loaded_from_its_entry_point_with_its_contributions() -> None:
    pm = get_plugin_manager()
    info = pm.plugin_info("example")
    assert (info.status, info.source) == ("loaded", "entry point")
    assert info.distribution == "opgraph-example-plugin"
    assert info.config_flags == ("example__verbose",)
    assert pm.linkers().providers["example"].name == "example"
    assert pm.modes().providers["EXAMPLE_FAST_RUN"].name == "example"


def test_importing_opgraph_leaves_the_rewrites_linker_and_kernel_unimported() -> None:
    """The hook module and the package's ``__init__`` (which imports the Op) only."""
    code = (
        "import sys, opgraph\n"
        "print(sorted(m for m in sys.modules if m.startswith('example_plugin')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert out.strip() == "['example_plugin', 'example_plugin.ops', 'example_plugin.plugin']"


@pytest.mark.parametrize("mode", [Mode(linker="example"), "EXAMPLE_FAST_RUN"])
def test_the_example_linker_runs_its_own_kernel(mode: object) -> None:
    x = T.dvector("x")
    f = opgraph.function([x], cube(x), mode=mode)
    (node,) = f.maker.fgraph.toposort()
    (thunk,) = f.fn.thunks
    assert isinstance(node.op, Cube) and thunk.kernel.impl is cube_kernel
    assert_allclose(f(np.array([-2.0, 0.5, 3.0])), np.array([-8.0, 0.125, 27.0]))


def test_the_flag_is_declared_and_settable_from_the_environment() -> None:
    assert opgraph.config.example__verbose is False
    out = subprocess.run(
        [sys.executable, "-c", "import opgraph; print(opgraph.config.example__verbose)"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={**os.environ, "OPGRAPH_FLAGS": "example__verbose=True"},
    ).stdout
    assert out.strip() == "True"


@pytest.mark.skipif(
    HAS_C,
    reason="backend-c is installed (tests/test_example_plugin.py runs this file again without it)",
)
def test_without_backend_c_cube_runs_perform_and_the_c_hook_is_never_called() -> None:
    x = T.dvector("x")
    f = opgraph.function([x], cube(x), mode="FAST_RUN")
    assert type(f.maker.linker).__name__ == "VMLinker"  # linker=auto without backend-c: vm
    assert_allclose(f(np.array([2.0])), np.array([8.0]))
    assert "example_plugin.c_kernels" not in sys.modules
    assert not get_plugin_manager().hook.opgraph_c_kernels.has_spec()
