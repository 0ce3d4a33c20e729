"""Shared set-up of the graph tests: the ``toy`` helper module and a GC-pausing fixture."""

import gc
import os
import sys

import pytest

# pytest runs with --import-mode=importlib: make ``import toy`` work from this directory.
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture
def gc_paused():
    """Pause the cyclic garbage collector while a test builds very large graphs.

    Graphs are reference cycles (owner <-> outputs), so with tens of thousands of nodes alive
    the collector's full passes take half the test's time; nothing here depends on them.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
