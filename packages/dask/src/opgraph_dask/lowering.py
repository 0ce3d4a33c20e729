"""The lowering table: how each Op runs on dask arrays (keyed by Op class, like backends').

An entry ``lower(node, inputs) -> outputs`` receives the node and its input values and
returns one value per output. A value is a ``dask.array.Array`` (anything chunked, i.e.
derived from a chunked input) or a NumPy value (constants, shapes, and whatever is computed
from those only: small, and computed on the client as ``perform`` would). An entry never
calls ``compute()`` on a dask array: the client only builds the task graph.

opgraph-dask's own entries live in :mod:`opgraph_dask.lowerings` (one module per Op
family, each with ``register(table)``); other packages add theirs through the
``opgraph_dask_lowerings`` hook (:mod:`opgraph_dask.hookspecs`).
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Sequence
from typing import Any

import opgraph_dask.lowerings
from opgraph.graph.basic import Apply
from opgraph.graph.op import Op
from opgraph.plugins import get_plugin_manager
from opgraph_dask import hookspecs

__all__ = ["Lowering", "LoweringError", "LoweringTable", "get_table", "reset_table"]

#: ``lower(node, inputs) -> outputs`` (see the module docstring).
Lowering = Callable[[Apply, Sequence[Any]], Sequence[Any]]


class LoweringError(TypeError):
    """An Op of the graph has no way to run on dask arrays."""


class LoweringTable:
    """Op class -> lowering, looked up along the Op's MRO (a subclass inherits its base's)."""

    def __init__(self) -> None:
        self._table: dict[type, Lowering] = {}
        self._cache: dict[type, Lowering | None] = {}

    def register(self, op_class: type, lower: Lowering, *, override: bool = False) -> Lowering:
        """Make ``lower`` the lowering of ``op_class`` (and its subclasses without one)."""
        if not (isinstance(op_class, type) and issubclass(op_class, Op)):
            raise TypeError(f"lowerings are registered for Op classes, got {op_class!r}")
        old = self._table.get(op_class)
        if old is not None and old is not lower and not override:
            raise ValueError(
                f"{op_class.__name__} already has a dask lowering ({old.__module__}."
                f"{old.__qualname__}); pass override=True to replace it"
            )
        self._table[op_class] = lower
        self._cache.clear()
        return lower

    def lookup(self, op: Op | type) -> Lowering | None:
        """The lowering of ``op`` (an Op or Op class), or None."""
        cls = op if isinstance(op, type) else type(op)
        if cls not in self._cache:
            found = None
            for base in cls.__mro__:
                found = self._table.get(base)
                if found is not None:
                    break
            self._cache[cls] = found
        return self._cache[cls]

    def __contains__(self, op: object) -> bool:
        return isinstance(op, Op | type) and self.lookup(op) is not None  # type: ignore[arg-type]

    def __len__(self) -> int:
        return len(self._table)


_lock = threading.Lock()
_table: LoweringTable | None = None
_table_pm: Any = None


def get_table() -> LoweringTable:
    """The lowering table: opgraph-dask's entries, then every plugin's (built on first use,
    again if the plugin manager was replaced)."""
    global _table, _table_pm
    pm = get_plugin_manager()
    with _lock:
        if _table is not None and _table_pm is pm:
            return _table
        table = LoweringTable()
        for info in sorted(
            pkgutil.iter_modules(opgraph_dask.lowerings.__path__), key=lambda m: m.name
        ):
            module = importlib.import_module(f"opgraph_dask.lowerings.{info.name}")
            register = getattr(module, "register", None)
            if register is not None:
                register(table)
        caller = getattr(pm.hook, "opgraph_dask_lowerings", None)
        if caller is None or not caller.has_spec():
            pm.add_hookspecs(hookspecs)
        pm.hook.opgraph_dask_lowerings.call_historic(kwargs={"table": table})
        _table, _table_pm = table, pm
        return table


def reset_table() -> None:
    """Forget the table; the next :func:`get_table` builds it again (tests only)."""
    global _table, _table_pm
    with _lock:
        _table, _table_pm = None, None
