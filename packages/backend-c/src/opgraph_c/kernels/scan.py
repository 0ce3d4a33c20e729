"""The precompiled loop of core's ``Scan`` (``opgraph.scan_module.scan_op``).

The entry returns an :class:`~opgraph_c.spec.Precompiled` thunk,
:class:`opgraph_c._scan.ScanThunk`, which compiles the inner graph when it is made
(``node.op.inner_function()``: the mode of the function being linked) and runs the loop in
C: buffers allocated once per call, entry views moved step to step, the inner VM's runner
called through its C entry point, outputs copied into the buffers with ``memmove``. When the
inner graph's VM is not a C runner (``linker="py"``, DEBUG_MODE) or a call has unusual values,
the thunk runs ``Scan.run_loop`` on the same inner function, so results and errors are the
Op's.
"""

from __future__ import annotations

from typing import Any

from opgraph.graph.basic import Apply
from opgraph.scan_module.scan_op import Scan
from opgraph_c import _scan
from opgraph_c.spec import Precompiled

__all__ = ["SCAN_VERSION", "register", "scan_c"]

#: Bump when the thunk's behaviour changes.
SCAN_VERSION = 1


def register(registry: Any, owner: str) -> None:
    """Register Scan's precompiled loop."""
    registry.register(Scan, scan_c, version=SCAN_VERSION, owner=owner)


def _make_thunk(node: Apply, in_cells: list[list[Any]], out_cells: list[list[Any]]) -> Any:
    """The node's :class:`~opgraph_c._scan.ScanThunk`, its inner graph compiled now."""
    return _scan.ScanThunk(node, in_cells, out_cells, node.op.inner_function())


def scan_c(op: Scan, node: Apply) -> Precompiled:
    """Every Scan node: the loop in C (``run_loop`` when the inner VM is not a C runner)."""
    return Precompiled("Scan", _make_thunk)
