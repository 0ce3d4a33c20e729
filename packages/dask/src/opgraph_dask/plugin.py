"""The module behind this package's ``opgraph`` entry point: hook implementations only.

dask is imported inside the hooks' factories, when a function is compiled for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

from opgraph.plugins import hookimpl


@hookimpl
def opgraph_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    """Declare ``opgraph_dask_lowerings``, through which packages lower their Ops."""
    from opgraph_dask import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def opgraph_add_config(config: Any) -> None:
    """The ``dask__*`` flags."""
    from opgraph_dask.flags import declare_flags

    declare_flags(config)


@hookimpl
def opgraph_linkers() -> dict[str, Callable[[], Any]]:
    """The ``dask`` linker."""

    def make_dask_linker() -> Any:
        from opgraph_dask.linker import DaskLinker

        return DaskLinker()

    return {"dask": make_dask_linker}


@hookimpl
def opgraph_modes() -> dict[str, Callable[[], Any]]:
    """``DASK``: FAST_RUN's rewrites on the ``dask`` linker."""

    def dask_mode() -> Any:
        from opgraph.compile.mode import Mode

        return Mode(linker="dask", optimizer="fast_run")

    return {"DASK": dask_mode}
