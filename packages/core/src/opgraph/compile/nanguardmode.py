"""NanGuardMode: stop at the first node whose output holds a NaN, an inf or a huge value.

The error names the node and the user's line that built it (added by the VM's error
report), so the first bad value is found without bisecting the graph by hand.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph.compile.mode import Mode, resolve_linker
from opgraph.configdefaults import config
from opgraph.graph.basic import Apply
from opgraph.link.basic import Linker, VMLinker

__all__ = ["NanGuardError", "NanGuardMode"]

#: Theano's threshold for ``big_is_error``.
BIG = 1e10


class NanGuardError(AssertionError):
    """NanGuardMode found a NaN, an inf or a big value (an AssertionError, as in Theano)."""


class NanGuard:
    """The check run after every node (a VM callback)."""

    def __init__(self, nan_is_error: bool, inf_is_error: bool, big_is_error: bool) -> None:
        self.nan_is_error = nan_is_error
        self.inf_is_error = inf_is_error
        self.big_is_error = big_is_error

    def __call__(self, node: Apply, storage_map: dict[Any, list[Any]], **_: Any) -> None:
        for k, var in enumerate(node.outputs):
            value = storage_map[var][0]
            if not isinstance(value, np.ndarray | np.generic) or value.dtype.kind not in "fc":
                continue
            problem = self.problem(np.asarray(value))
            if problem:
                raise NanGuardError(
                    f"NanGuardMode: {problem} detected in output {k} ({var.type}) of {node}.\n"
                    "HINT: look at this node's inputs below; a log/division/exp on them "
                    "probably produced it."
                )

    def problem(self, value: np.ndarray) -> str | None:
        """``'NaN'``, ``'Inf'`` or ``'Big value'`` if ``value`` has one that is an error."""
        if value.size == 0:
            return None
        if self.nan_is_error and np.isnan(value).any():
            return "NaN"
        if self.inf_is_error and np.isinf(value).any():
            return "Inf"
        if self.big_is_error:
            with np.errstate(invalid="ignore"):
                finite = value[np.isfinite(value)]
            if finite.size and np.abs(finite).max() > BIG:
                return "Big value"
        return None


class NanGuardMode(Mode):
    """A mode that checks every node's outputs for NaN, inf and (optionally) huge values.

    Parameters
    ----------
    nan_is_error, inf_is_error, big_is_error
        Which values are errors (defaults: ``config.NanGuardMode__nan_is_error`` etc.).
    optimizer
        The rewrites to run (default ``config.optimizer``).
    linker
        The linker to guard (default ``config.linker``); its backend kernels are kept.
    """

    def __init__(
        self,
        nan_is_error: bool | None = None,
        inf_is_error: bool | None = None,
        big_is_error: bool | None = None,
        optimizer: Any = "default",
        linker: Any = None,
    ) -> None:
        super().__init__(linker=linker, optimizer=optimizer)
        self.guard = NanGuard(
            config.NanGuardMode__nan_is_error if nan_is_error is None else nan_is_error,
            config.NanGuardMode__inf_is_error if inf_is_error is None else inf_is_error,
            config.NanGuardMode__big_is_error if big_is_error is None else big_is_error,
        )

    @property
    def linker(self) -> Linker:  # type: ignore[override]
        base = resolve_linker(self.provided_linker)
        return VMLinker(allow_gc=base.allow_gc, callback=self.guard, kernels=base.kernels)
