"""The module behind backend-c's ``opgraph`` entry point: hook implementations only.

Cheap to import: the linker, the registry and the compiled extensions are imported inside
the hooks, when opgraph asks for them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opgraph.plugins import Command, hookimpl
from opgraph_c.flags import declare_flags

#: ``linker=auto`` (FAST_RUN) picks the highest priority; core's ``vm`` has 0.
C_LINKER_PRIORITY = 10


@hookimpl
def opgraph_addhooks(pluginmanager: Any) -> None:
    """Declare ``opgraph_c_kernels(registry)``, through which packages add C kernels."""
    from opgraph_c import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def opgraph_add_config(config: Any) -> None:
    """backend-c's flags: ``openmp``, ``c__cc``, ``c__march_native``, ``c__cflags``,
    ``c__werror``, ``c__openmp_threshold``, ``c__buffer_pool_mb``."""
    declare_flags(config)


def _c_linker() -> Any:
    from opgraph_c.linker import CLinker

    return CLinker()


@hookimpl
def opgraph_linkers() -> Mapping[str, Callable[[], Any]]:
    """``c``, with Theano's other names for it: ``cvm`` and ``c|py``."""
    return {"c": _c_linker, "cvm": _c_linker, "c|py": _c_linker}


@hookimpl
def opgraph_linker_preference() -> Sequence[tuple[float, str]]:
    """``linker=auto`` (FAST_RUN) means ``cvm`` when backend-c is installed."""
    return [(C_LINKER_PRIORITY, "cvm")]


@hookimpl
def opgraph_commands() -> Mapping[str, Command]:
    """``python -m opgraph cache info|clear|prune``."""
    from opgraph_c.cli import configure_cache_command, run_cache_command

    return {
        "cache": Command(
            help="Show, empty or prune the compile cache of C kernels (info|clear|prune).",
            run=run_cache_command,
            configure=configure_cache_command,
        )
    }
