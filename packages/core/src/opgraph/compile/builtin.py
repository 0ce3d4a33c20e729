"""Core as a plugin of itself: the ``py`` and ``vm`` linkers, the named modes, shared variables.

Registered like any third-party plugin (``opgraph/__init__.py`` adds it to
``BUILTIN_PLUGINS``), before the entry points; its ``opgraph_shared_constructor`` is
``trylast`` so that plugins' answers come first whenever the manager was built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opgraph.compile.debugmode import DebugMode
from opgraph.compile.mode import Mode
from opgraph.compile.nanguardmode import NanGuardMode
from opgraph.compile.sharedvalue import core_shared_constructor
from opgraph.link.basic import PerformLinker, VMLinker
from opgraph.plugins.manager import hookimpl


@hookimpl
def opgraph_linkers() -> Mapping[str, Callable[[], Any]]:
    """``py``: every node runs ``perform``; ``vm``: the Python VM (backend kernels if given)."""
    return {"py": PerformLinker, "vm": VMLinker}


@hookimpl
def opgraph_linker_preference() -> Sequence[tuple[float, str]]:
    """With core alone, ``linker=auto`` means ``vm``."""
    return [(0, "vm")]


def _mode(linker: str, optimizer: str, profile: bool = False) -> Callable[[], Any]:
    def factory() -> Any:
        return Mode(linker, optimizer, profile=profile)

    return factory


@hookimpl
def opgraph_modes() -> Mapping[str, Callable[[], Any]]:
    """Theano's named modes (``Mode`` itself is built from ``config.linker``/``optimizer``)."""
    return {
        "FAST_RUN": _mode("auto", "fast_run"),
        "FAST_COMPILE": _mode("vm", "fast_compile"),
        "PROFILE_MODE": _mode("auto", "fast_run", profile=True),
        "DEBUG_MODE": DebugMode,
        "DebugMode": DebugMode,
        "NanGuardMode": NanGuardMode,
    }


@hookimpl(trylast=True)
def opgraph_shared_constructor(
    value: Any,
    name: str | None,
    strict: bool,
    allow_downcast: bool | None,
    borrow: bool,
    options: Mapping[str, Any],
) -> Any | None:
    """Tensors for ndarrays and numbers (with ``broadcastable=``, ``shape=``,
    ``target="cpu"``); without options, any other Python object as a Generic variable."""
    return core_shared_constructor(
        value, name=name, strict=strict, allow_downcast=allow_downcast, borrow=borrow, **options
    )
