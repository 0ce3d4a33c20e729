"""backend-c's linkers through the testing kit's ``LinkerSuite``: the standard battery of
graphs (elementwise with broadcasting and fusion, reductions, dot/gemm, subtensor views and
in-place increments, shared-variable updates, ifelse laziness, scan, run-time errors naming
the op and the user's line) run by each name backend-c registers, compared with the ``py``
linker (every node's ``perform``)."""

from __future__ import annotations

from opgraph.compile.debugmode import DebugMode
from opgraph.testing import LinkerSuite


class TestCLinker(LinkerSuite):
    linker = "c"


class TestCVMLinker(LinkerSuite):
    linker = "cvm"


class TestCPyLinker(LinkerSuite):
    linker = "c|py"


class TestCLinkerWithoutGC(LinkerSuite):
    linker = "c_nogc"


class TestDebugModeOverC(LinkerSuite):
    """DEBUG_MODE on the c linker: every C thunk also checked against ``perform``."""

    linker = DebugMode(linker="c")
