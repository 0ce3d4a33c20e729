"""Every hook opgraph calls: the plugin author's manual.

A plugin is a module (or any object) holding functions named after these hooks and
decorated with :data:`opgraph.plugins.hookimpl`. It declares itself in its
``pyproject.toml``::

    [project.entry-points.opgraph]
    my_ops = "my_ops._opgraph_plugin"

A hookimpl may take any subset of the arguments listed here; opgraph always passes
them by keyword. Hooks that return data are merged across plugins, and a name given
by two plugins is an error naming both distributions. ``docs/plugin-guide.md`` has one
section per hook with an example; a test checks that every hook and argument here is
documented there.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

import pluggy

if TYPE_CHECKING:
    from opgraph.configparser import Config

__all__ = [
    "Command",
    "CommandRunner",
    "LinkerFactory",
    "ModeFactory",
    "hookspec",
]

hookspec = pluggy.HookspecMarker("opgraph")

#: Builds a fresh linker (an ``opgraph.link.basic.Linker``) each time it is called.
LinkerFactory: TypeAlias = Callable[[], Any]
#: Builds a fresh mode (an ``opgraph.compile.mode.Mode``) each time it is called.
ModeFactory: TypeAlias = Callable[[], Any]
#: Runs a subcommand with the parsed arguments; returns the exit status (None means 0).
CommandRunner: TypeAlias = Callable[[argparse.Namespace], "int | None"]


@dataclass(frozen=True)
class Command:
    """A subcommand of ``python -m opgraph``, as returned by :func:`opgraph_commands`.

    Parameters
    ----------
    help
        One line shown by ``python -m opgraph --help``.
    run
        Called with the parsed arguments; returns the exit status (``None`` means 0).
    configure
        Optional; receives the subcommand's own ``argparse.ArgumentParser`` to add
        arguments (or nested subparsers, as in ``cache info|clear``).
    """

    help: str
    run: CommandRunner
    configure: Callable[[argparse.ArgumentParser], None] | None = None


# ---- set-up hooks: called once per plugin, when it is registered


@hookspec(historic=True)
def opgraph_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    """Add hookspecs of your own, so other packages can extend yours.

    Called once for each plugin, when it is registered (historic: a plugin registered
    late still gets the call). Call ``pluginmanager.add_hookspecs(module)`` with a module
    of functions decorated with :data:`opgraph.plugins.hookspec`. backend-c declares
    ``opgraph_c_kernels(registry)`` this way; packages implementing such a hook mark their
    implementation ``@hookimpl(optionalhook=True)`` so they still load without it.

    Parameters
    ----------
    pluginmanager
        The process-wide :class:`~opgraph.plugins.manager.OpgraphPluginManager`.
    """


@hookspec(historic=True)
def opgraph_add_config(config: Config) -> None:
    """Declare the config flags this plugin reads.

    Called once for each plugin, when it is registered (historic), before
    ``OPGRAPH_FLAGS`` is checked for unknown names, so a flag declared here may be
    set there. Use ``config.add(name, doc, param)``; values given in ``OPGRAPH_FLAGS``
    or the rc file are parsed at that moment. ``python -m opgraph plugins`` lists the
    flags each plugin declared.

    Parameters
    ----------
    config
        The global ``opgraph.config`` (an ``opgraph.configparser.Config``).
    """


# ---- data hooks: every plugin's answer is merged


@hookspec
def opgraph_linkers() -> Mapping[str, LinkerFactory]:
    """Linkers this plugin provides, by name.

    Called when a mode needs a linker and by ``python -m opgraph plugins``; the result
    is cached until a plugin is (un)registered. Return a mapping from linker name
    (``"py"``, ``"vm"``, ``"c"``, ``"cvm"``, ``"dask"``) to a zero-argument factory
    that builds a fresh linker. Import heavy modules inside the factory, not at module
    level. Two plugins giving the same name is an error naming both.
    """


@hookspec
def opgraph_linker_preference() -> Sequence[tuple[float, str]]:
    """How much this plugin recommends each linker, for ``linker=auto``.

    Called when a mode asks for ``linker=auto`` (``FAST_RUN`` does) and by
    ``python -m opgraph plugins``. Return ``(priority, linker name)`` pairs. opgraph
    picks the installed linker with the highest priority over all plugins (core gives
    ``(0, "vm")``; backend-c gives ``cvm`` a higher one). A pair naming a linker nobody
    provides is ignored, so a plugin can prefer a linker that may not be installed.
    """


@hookspec
def opgraph_modes() -> Mapping[str, ModeFactory]:
    """Named compilation modes this plugin provides (``FAST_RUN``, ``DEBUG_MODE``, ...).

    Return a mapping from mode name to a zero-argument factory that builds the
    ``Mode``. Called when a mode is looked up by name; cached like
    :func:`opgraph_linkers`. Two plugins giving the same name is an error naming both.
    """


@hookspec
def opgraph_register_rewrites(optdb: Any) -> None:
    """Install this plugin's rewrites into the named databases of ``optdb``.

    Called once per process, lazily, when the first function is compiled (so importing
    a plugin never registers anything). Decorate rewrites onto a package-level
    ``RewriteSet`` and install it here: ``rewrites.install(optdb)``. While this hook
    runs, ``optdb.current_plugin`` names your plugin, so listings can say who added
    each rewrite.

    Parameters
    ----------
    optdb
        The global rewrite database (``opgraph.rewriting.optdb``): a ``SequenceDB``
        whose stages are ``canonicalize``, ``stabilize``, ``specialize``, ...
    """


@hookspec(firstresult=True)
def opgraph_shared_constructor(
    value: Any,
    name: str | None,
    strict: bool,
    allow_downcast: bool | None,
    borrow: bool,
    options: Mapping[str, Any],
) -> Any | None:
    """Wrap ``value`` in a SharedVariable if this plugin owns its type, else return None.

    Called by ``opgraph.shared(value, ...)`` before core's own constructors; the first
    plugin to return something other than None wins (plugins registered later are
    asked first). Return None quickly for values you do not own, e.g.
    ``if not scipy.sparse.issparse(value): return None``. When ``shared`` is given
    keyword extras, only the implementations that take ``options`` are asked.

    Parameters
    ----------
    value
        The user's data (a NumPy array, a scipy.sparse matrix, a GPU array, ...).
    name
        The variable's name, or None.
    strict
        If True, the value must already have the exact type; do not convert it.
    allow_downcast
        Whether converting a Python float to float32 etc. may lose precision.
    borrow
        If True, the SharedVariable may alias ``value`` instead of copying it.
    options
        The other keyword arguments given to ``shared`` (Theano's ``broadcastable=``,
        ``target=``, ...), empty when there are none. Return None for options you do not
        understand, so another constructor (or the error naming them) answers.
    """


@hookspec(firstresult=True)
def opgraph_as_variable(value: Any, name: str | None) -> Any | None:
    """Convert a foreign data object into an opgraph Constant or Variable, else None.

    Called by ``as_tensor_variable`` and friends for values core does not recognise
    (e.g. a scipy.sparse matrix becomes a sparse Constant). The first non-None answer
    wins. Return None for values you do not own.

    Parameters
    ----------
    value
        The object to convert.
    name
        Name for the resulting Constant or Variable, or None.
    """


@hookspec(firstresult=True)
def opgraph_transfer(var: Any, target: Any) -> Any | None:
    """``var`` moved to ``target`` if this plugin owns that target, else None.

    Called by ``opgraph.tensor.transfer(var, target)`` (Theano's ``tensor.transfer``) for
    every target but ``"cpu"`` (core's: a host tensor), after the functions given to
    ``register_transfer``; the first answer that is not None wins, and with none the call
    is a ValueError. opgraph-backend-cuda answers the GPU targets (``"cuda"``, ``"cudaN"``,
    ``"gpu"``, ``"devN"``, None) with a GPU variable.

    Parameters
    ----------
    var
        The variable (or value) to move.
    target
        Where to: a device or context name, or None.
    """


@hookspec
def opgraph_namespaces() -> Mapping[str, str]:
    """Public module names this plugin serves, mapped to the module that implements them.

    Called the first time an ``opgraph.*`` name that is not a core module is imported
    or accessed. Return e.g. ``{"opgraph.sparse": "opgraph_sparse.api"}``: both
    ``import opgraph.sparse`` and ``opgraph.sparse`` then import ``opgraph_sparse.api``
    on first use and alias it (submodules too: ``opgraph.sparse.basic`` is
    ``opgraph_sparse.api.basic``). Keys must start with ``opgraph.``; a real core module
    of that name always wins.
    """


@hookspec
def opgraph_commands() -> Mapping[str, Command | CommandRunner]:
    """Subcommands this plugin adds to ``python -m opgraph``.

    Return a mapping from command name to a :class:`Command` (help line, ``run``
    function and optional ``configure`` function for its arguments), or to a bare
    ``run(args)`` function whose docstring's first line is the help. Called when
    ``python -m opgraph`` builds its parser. ``plugins`` and ``config`` are opgraph's
    own commands and cannot be taken.
    """


@hookspec
def opgraph_cache_info() -> str | Sequence[str] | None:
    """Lines on what this plugin keeps in opgraph's compile cache, for ``cache info``.

    Called by ``python -m opgraph cache info`` after the report of the plugin owning the
    ``cache`` command (backend-c's C kernels), and listed under ``"plugins"`` with
    ``--json``. For a plugin with a cache of its own: backend-cuda counts its CUDA kernel
    modules. Return a line, a few lines, or None to show nothing; keep it cheap.
    """


@hookspec
def opgraph_status() -> str | None:
    """One line on this plugin's state, shown under its name by ``python -m opgraph plugins``.

    For a plugin whose usefulness depends on the machine, e.g. backend-cuda's "GPU: NVIDIA
    H100 (sm_90) through pycuda" or "GPU unavailable: PyCUDA is not installed ...". Return
    None to show nothing. Keep it cheap: it is called each time the report is made.
    """
