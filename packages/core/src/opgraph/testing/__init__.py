"""opgraph's testing kit, shipped for plugin authors: the checks our own tests use.

- ``check_op(op, inputs, reference=...)``: one Op on one set of inputs, its values in every
  installed linker and in FAST_COMPILE, FAST_RUN and DEBUG_MODE, ``infer_shape`` against
  the real shapes, ``grad`` by finite differences, and bad inputs that must raise;
- ``compare_linkers(graph_inputs, outputs, test_inputs, linkers=("py", "c"))``: one graph
  run by several linkers, compared with the first;
- ``OpSuite`` and ``LinkerSuite``: pytest base classes. A test class sets ``op``, ``cases``
  and ``reference`` (or ``linker = "c"``) and gets a battery of tests;
- the parts they are made of: ``verify_grad`` (finite differences), dtype-aware
  ``assert_allclose`` and ``tolerance``, ``check_infer_shape``, ``check_modes`` (one graph
  in every mode, compared with a reference), ``installed_linkers`` and ``ALL_MODES``;
- the pytest plugin (loaded wherever opgraph-core is installed) with the fixtures ``rng``,
  ``mode`` and ``linker`` and the marks ``slow``, ``gpu``, ``browser`` and ``nonfinite``.

A failing check says what differed: the linker or mode, the input shapes and dtypes, and
the largest absolute and relative errors. ``OpSuite`` and ``LinkerSuite`` need pytest; the
checks do not.
"""

from __future__ import annotations

from typing import Any

from opgraph.gradient import verify_grad
from opgraph.testing.checks import (
    ALL_MODES,
    CHECK_MODES,
    assert_allclose,
    check_infer_shape,
    check_modes,
    check_op,
    check_targets,
    compare_linkers,
    installed_linkers,
    random_value,
    tolerance,
)

__all__ = [
    "ALL_MODES",
    "CHECK_MODES",
    "LinkerSuite",
    "OpSuite",
    "assert_allclose",
    "check_infer_shape",
    "check_modes",
    "check_op",
    "check_targets",
    "compare_linkers",
    "installed_linkers",
    "random_value",
    "tolerance",
    "verify_grad",
]

_SUITES = ("LinkerSuite", "OpSuite")


def __getattr__(name: str) -> Any:
    """``OpSuite`` and ``LinkerSuite`` are imported on first use: they need pytest, which
    the checks themselves do not."""
    if name in _SUITES:
        from opgraph.testing import suites

        return getattr(suites, name)
    raise AttributeError(f"module 'opgraph.testing' has no attribute {name!r}")
