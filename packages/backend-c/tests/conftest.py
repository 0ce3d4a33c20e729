"""Fixtures for backend-c's tests: one compile cache per test session, modes using ``c``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from opgraph.compile.mode import Mode
from opgraph.configdefaults import config

# The tests import their shared helpers (thunk_checks.py) by name.
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture(scope="session", autouse=True)
def c_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A compile cache shared by the whole session, so each kernel compiles once; a C
    compiler warning in a generated kernel fails its build (``c__werror``)."""
    path = tmp_path_factory.mktemp("opgraph-cache")
    with config.change_flags(compiledir=str(path), c__werror=True):
        yield path


@pytest.fixture
def c_mode() -> Mode:
    """The ``c`` linker without rewrites: one Elemwise node per operation."""
    return Mode(linker="c", optimizer="None")


@pytest.fixture
def py_mode() -> Mode:
    """The reference: every node runs its ``perform`` (NumPy)."""
    return Mode(linker="py", optimizer="None")


def _run_python(code: str, cache_dir: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {**os.environ, "OPGRAPH_CACHE_DIR": str(cache_dir)}
    env.pop("OPGRAPH_FLAGS", None)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


@pytest.fixture
def run_python() -> Callable[..., subprocess.CompletedProcess]:
    """``run_python(code, cache_dir)``: run ``code`` in a fresh interpreter using that cache."""
    return _run_python
