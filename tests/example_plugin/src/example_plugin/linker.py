"""The plugin's linker: the VM with this plugin's own kernel table.

``mode=Mode(linker="example")`` runs :class:`~example_plugin.ops.Cube` with the kernel
below (a multiply chain instead of ``np.power``) and every other Op with its ``perform``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from example_plugin.ops import Cube
from opgraph.link import KernelRegistry, VMLinker

kernels = KernelRegistry("example")


@kernels.register(Cube, version=1, owner="opgraph-example-plugin")
def cube_kernel(op: Cube, node: Any) -> Any:
    """``x * x * x`` in the output's dtype."""
    dtype = node.outputs[0].type.dtype

    def compute(x: np.ndarray) -> np.ndarray:
        return np.multiply(np.multiply(x, x), x, dtype=dtype)

    return compute


class ExampleLinker(VMLinker):
    """The ``example`` linker: a VM using the example kernel table."""

    def __init__(self, allow_gc: bool | None = None, **kwargs: Any) -> None:
        super().__init__(allow_gc=allow_gc, kernels=kernels, **kwargs)
