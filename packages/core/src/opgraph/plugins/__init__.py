"""opgraph's plugin system: pluggy hooks, entry points of group ``opgraph``.

Write a plugin::

    from opgraph.plugins import hookimpl

    @hookimpl
    def opgraph_linkers():
        from my_pkg.linker import MyLinker
        return {"mine": MyLinker}

and declare it in ``pyproject.toml`` under ``[project.entry-points.opgraph]``.
``docs/plugin-guide.md`` documents every hook; ``python -m opgraph plugins`` lists
what is installed and what each plugin contributed.
"""

from __future__ import annotations

from opgraph.plugins.hookspecs import Command, hookspec
from opgraph.plugins.manager import (
    BUILTIN_PLUGINS,
    ENTRY_POINT_GROUP,
    OpgraphPluginManager,
    PluginError,
    PluginInfo,
    PluginWarning,
    add_builtin_plugin,
    get_plugin_manager,
    hookimpl,
)
from opgraph.plugins.namespaces import install_finder

__all__ = [
    "BUILTIN_PLUGINS",
    "ENTRY_POINT_GROUP",
    "Command",
    "OpgraphPluginManager",
    "PluginError",
    "PluginInfo",
    "PluginWarning",
    "add_builtin_plugin",
    "get_plugin_manager",
    "hookimpl",
    "hookspec",
    "load_plugins",
]


def load_plugins() -> OpgraphPluginManager:
    """Load every plugin, then check ``OPGRAPH_FLAGS`` for flags nobody declared.

    Called at the end of ``import opgraph``. Also installs the finder that resolves
    plugin-owned namespaces (``import opgraph.sparse``).
    """
    pm = get_plugin_manager()
    if pm.config is not None:
        pm.config.check_unknown_flags()
    install_finder()
    return pm
