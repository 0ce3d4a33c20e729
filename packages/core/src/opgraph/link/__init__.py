"""Linkers turn a rewritten FunctionGraph into a callable: storage cells, thunks and a VM.

``py`` (:class:`PerformLinker`) runs every node's ``perform``; ``vm``
(:class:`VMLinker`) also uses a backend's :class:`KernelRegistry` where one is given.
Backends add their own linkers through the ``opgraph_linkers`` hook.
"""

from opgraph.link.basic import (
    Container,
    Linker,
    LocalLinker,
    PerformLinker,
    VMLinker,
    map_storage,
    raise_with_op,
)
from opgraph.link.dispatch import Kernel, KernelFallbackWarning, KernelRegistry
from opgraph.link.vm import VM, Loop, Stack, build_vm

__all__ = [
    "VM",
    "Container",
    "Kernel",
    "KernelFallbackWarning",
    "KernelRegistry",
    "Linker",
    "LocalLinker",
    "Loop",
    "PerformLinker",
    "Stack",
    "VMLinker",
    "build_vm",
    "gc_plan",
    "map_storage",
    "raise_with_op",
]
