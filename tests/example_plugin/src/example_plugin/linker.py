"""The plugin's linker: core's VM with a kernel table of the plugin's own.

``Mode(linker="example")`` runs :class:`~example_plugin.ops.Cube` with ``cube_kernel`` below
and every other Op with its ``perform``: the way a backend that is not C (a JIT, a GPU
library) plugs in.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from example_plugin.ops import Cube
from opgraph.graph import Op
from opgraph.link import KernelRegistry, VMLinker

#: Op class -> kernel, for the ``example`` linker only.
kernels = KernelRegistry("example")
# Every other Op runs its perform on purpose (an entry for the base class serves every
# subclass without one of its own): no fallback warning, no [py-fallback] mark.
kernels.register_perform(Op, "the example linker has a kernel for Cube only", owner="example")


@kernels.register(Cube, version=1)
def cube_kernel(op: Cube, node: Any) -> Any:
    """``compute(x)`` for one node: ``(x * x) * x``, as ``Cube.perform``."""

    def compute(x: np.ndarray) -> np.ndarray:
        return np.asarray(np.multiply(np.multiply(x, x), x))

    return compute


class ExampleLinker(VMLinker):
    """The ``example`` linker: a VM using the example kernel table."""

    def __init__(self, allow_gc: bool | None = None, **kwargs: Any) -> None:
        super().__init__(allow_gc=allow_gc, kernels=kernels, **kwargs)
