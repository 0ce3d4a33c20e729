"""Core's own linkers through the testing kit's ``LinkerSuite``: the standard battery of
graphs (elementwise, reductions, dot, indexing, in-place increments, shared updates,
ifelse, scan, run-time errors) run by the Python VM and compared with ``perform``."""

from __future__ import annotations

from opgraph.testing import LinkerSuite


class TestVMLinker(LinkerSuite):
    linker = "vm"


class TestVMLinkerWithoutGC(LinkerSuite):
    linker = "vm_nogc"
