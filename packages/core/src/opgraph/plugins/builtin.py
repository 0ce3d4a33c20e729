"""Core as a plugin of itself: the ``py`` and ``vm`` linkers, the named modes, shared variables.

Registered like any third-party plugin (``BUILTIN_PLUGINS``), before the entry points, so
plugins' answers to ``opgraph_shared_constructor`` come first. Only hook functions live
here; everything they need is imported inside them, so loading plugins stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opgraph.plugins.manager import hookimpl


def _py_linker() -> Any:
    from opgraph.link.basic import PerformLinker

    return PerformLinker()


def _vm_linker() -> Any:
    from opgraph.link.vm import VMLinker

    return VMLinker()


@hookimpl
def opgraph_linkers() -> Mapping[str, Callable[[], Any]]:
    """``py``: every node runs ``perform``; ``vm``: the Python VM (backend kernels if given)."""
    return {"py": _py_linker, "vm": _vm_linker}


@hookimpl
def opgraph_linker_preference() -> Sequence[tuple[float, str]]:
    """With core alone, ``linker=auto`` means ``vm``."""
    return [(0, "vm")]


def _mode(linker: str, optimizer: str, profile: bool = False) -> Callable[[], Any]:
    def factory() -> Any:
        from opgraph.compile.mode import Mode

        return Mode(linker, optimizer, profile=profile)

    return factory


def _debug_mode() -> Any:
    from opgraph.compile.debugmode import DebugMode

    return DebugMode()


def _nanguard_mode() -> Any:
    from opgraph.compile.nanguardmode import NanGuardMode

    return NanGuardMode()


@hookimpl
def opgraph_modes() -> Mapping[str, Callable[[], Any]]:
    """Theano's named modes (``Mode`` itself is built from ``config.linker``/``optimizer``)."""
    return {
        "FAST_RUN": _mode("auto", "fast_run"),
        "FAST_COMPILE": _mode("vm", "fast_compile"),
        "PROFILE_MODE": _mode("auto", "fast_run", profile=True),
        "DEBUG_MODE": _debug_mode,
        "DebugMode": _debug_mode,
        "NanGuardMode": _nanguard_mode,
    }


@hookimpl
def opgraph_shared_constructor(
    value: Any, name: str | None, strict: bool, allow_downcast: bool | None, borrow: bool
) -> Any | None:
    """Tensors for ndarrays and numbers; any other Python object as a Generic variable."""
    from opgraph.compile.sharedvalue import core_shared_constructor

    return core_shared_constructor(
        value, name=name, strict=strict, allow_downcast=allow_downcast, borrow=borrow
    )
