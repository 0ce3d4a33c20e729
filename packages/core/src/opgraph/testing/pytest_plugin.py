"""pytest plugin shipped with opgraph-core: fixtures and marks for testing Ops and plugins.

Loaded automatically (entry point ``pytest11``) where opgraph-core is installed:

- ``rng``: a NumPy Generator seeded from ``config.unittests__rseed`` (reproducible);
- ``mode``: parametrized over every named mode (``FAST_COMPILE``, ``FAST_RUN``,
  ``DEBUG_MODE``, ``PROFILE_MODE``);
- ``linker``: parametrized over the installed linkers;
- marks ``slow``, ``gpu`` (needs a CUDA device), ``browser`` (needs headless Chromium) and
  ``nonfinite`` (the test feeds NaN or inf on purpose: ``DEBUG_MODE``'s finite check, which
  would report them, is off while it runs, so whole suites can run under
  ``OPGRAPH_FLAGS=mode=DEBUG_MODE``).

The kit's base classes (:mod:`opgraph.testing.suites`) build on these: ``OpSuite`` and
``LinkerSuite`` take their random values from ``rng``, and ``OpSuite`` parametrizes its
tests itself over the cases and over the installed linkers and the modes of
``opgraph.testing.CHECK_MODES`` (test ids such as ``case0-float64_3x4-linker=py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from opgraph.configdefaults import config
from opgraph.testing.checks import ALL_MODES, installed_linkers


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "slow: a long-running test")
    config.addinivalue_line("markers", "gpu: needs a CUDA device")
    config.addinivalue_line("markers", "browser: needs a headless browser (Debian chromium)")
    config.addinivalue_line(
        "markers", "nonfinite: feeds NaN/inf on purpose (DEBUG_MODE's finite check is off)"
    )


@pytest.fixture(autouse=True)
def _nonfinite_values_allowed(request: Any) -> Any:
    """Turn ``DebugMode__check_finite`` off for tests marked ``nonfinite``."""
    if request.node.get_closest_marker("nonfinite") is None:
        yield
        return
    with config.change_flags(DebugMode__check_finite=False):
        yield


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded NumPy random Generator (``config.unittests__rseed``; 'random' for a fresh seed)."""
    seed = config.unittests__rseed
    return np.random.default_rng(None if seed == "random" else int(seed))


@pytest.fixture(params=ALL_MODES)
def mode(request: Any) -> str:
    """Each named mode in turn."""
    return request.param


def _linkers() -> list[str]:
    try:
        return installed_linkers()
    except Exception:  # a broken plugin must not break collection
        return ["py", "vm"]


@pytest.fixture(params=_linkers())
def linker(request: Any) -> str:
    """Each installed linker in turn."""
    return request.param
