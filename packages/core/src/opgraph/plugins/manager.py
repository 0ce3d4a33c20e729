"""The plugin manager: core's built-ins, entry points of group ``opgraph``, env switches.

``get_plugin_manager()`` builds the process-wide manager on first use:

1. register the hookspecs of :mod:`opgraph.plugins.hookspecs`;
2. replay the set-up hooks ``opgraph_addhooks`` and ``opgraph_add_config`` (historic, so
   each plugin gets them when it is registered and we can attribute what it added);
3. register core's own plugin modules (``BUILTIN_PLUGINS``);
4. load every entry point of group ``opgraph`` (one entry point is one plugin, registered
   under the entry point's name), or only those named in ``OPGRAPH_PLUGINS`` when
   ``OPGRAPH_DISABLE_PLUGIN_AUTOLOAD=1``.

A plugin that fails to import or register is reported with one :class:`PluginWarning`
and left out; everything else keeps working. ``OPGRAPH_STRICT_PLUGINS=1`` raises
:class:`PluginError` instead. ``OPGRAPH_TRACE_PLUGINS=1`` prints every hook call to
stderr.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import os
import sys
import threading
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pluggy

from opgraph.configdefaults import config
from opgraph.plugins import hookspecs

__all__ = [
    "BUILTIN_PLUGINS",
    "ENTRY_POINT_GROUP",
    "Contribution",
    "Contributions",
    "OpgraphPluginManager",
    "PluginError",
    "PluginInfo",
    "PluginWarning",
    "add_builtin_plugin",
    "get_plugin_manager",
    "hookimpl",
]

ENTRY_POINT_GROUP = "opgraph"

#: Core's own plugin modules, registered like any other plugin (pytest's default_plugins).
#: The layers above this one add theirs with :func:`add_builtin_plugin`.
BUILTIN_PLUGINS: list[str] = []

#: Subcommands of ``python -m opgraph`` that belong to opgraph itself.
RESERVED_COMMANDS = frozenset({"plugins", "config"})

hookimpl = pluggy.HookimplMarker("opgraph")

_TRUE = frozenset({"1", "true", "yes", "on"})

#: The merged data hooks: accessor name -> (hook name, what one item is called).
_MAPPING_HOOKS: dict[str, tuple[str, str]] = {
    "linkers": ("opgraph_linkers", "linker"),
    "modes": ("opgraph_modes", "mode"),
    "namespaces": ("opgraph_namespaces", "namespace"),
    "commands": ("opgraph_commands", "command"),
}


class PluginError(RuntimeError):
    """A plugin could not be loaded, or two plugins claim the same thing."""


class PluginWarning(UserWarning):
    """A plugin was left out (it failed to load, or a hook of it failed)."""


_OPGRAPH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _user_stacklevel() -> int:
    """``stacklevel`` pointing the caller's warning at the first frame outside opgraph
    and the import machinery, e.g. the user's ``import opgraph`` line."""

    def importlib_internal(code_file: str) -> bool:  # frames warnings.warn does not count
        return "importlib" in code_file and "_bootstrap" in code_file

    frame = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith((_OPGRAPH_DIR, "<frozen")):
        frame = frame.f_back
        if frame is not None and not importlib_internal(frame.f_code.co_filename):
            level += 1
    return level


def _env_flag(environ: Mapping[str, str], name: str) -> bool:
    return environ.get(name, "").strip().lower() in _TRUE


def _iter_entry_points() -> Iterable[importlib.metadata.EntryPoint]:
    """Every installed entry point of group ``opgraph`` (tests replace this)."""
    return importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)


def _dist_of(ep: Any) -> tuple[str | None, str | None]:
    """``(distribution name, version)`` of an entry point, when known."""
    dist = getattr(ep, "dist", None)
    if dist is None:
        return None, None
    name = getattr(dist, "name", None) or dist.metadata["Name"]
    return name, getattr(dist, "version", None)


def _core_version() -> str | None:
    try:
        return importlib.metadata.version("opgraph-core")
    except importlib.metadata.PackageNotFoundError:
        return None


def _flag_names(config: Any) -> frozenset[str]:
    """Names of the flags ``config`` declares so far, read without evaluating a value."""
    if config is None:
        return frozenset()
    names = dir(config)
    if hasattr(type(config), "__contains__"):
        return frozenset(n for n in names if n in config)
    return frozenset(names)


@dataclass
class PluginInfo:
    """What the manager knows about one plugin, for listings and error messages."""

    name: str
    source: Literal["builtin", "entry point", "OPGRAPH_PLUGINS", "register()"]
    module: str | None = None
    distribution: str | None = None
    version: str | None = None
    status: Literal["loaded", "failed", "skipped"] = "loaded"
    error: BaseException | None = None
    reason: str | None = None
    config_flags: tuple[str, ...] = ()
    hookspecs: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """How messages name the plugin: its distribution, else the plugin name."""
        return self.distribution or f"plugin '{self.name}'"

    def describe(self) -> str:
        """``plugin 'x' (dist y 1.0)`` for warnings and errors."""
        if self.distribution:
            where = f"dist {self.distribution} {self.version or ''}".rstrip()
        elif self.module:
            where = f"module {self.module}"
        else:
            where = self.source
        return f"plugin '{self.name}' ({where})"


@dataclass(frozen=True)
class Contribution:
    """One item a plugin gave through a data hook, and who gave it."""

    value: Any
    plugin: PluginInfo


class Contributions(dict[str, Any]):
    """A merged hook result that also remembers which plugin gave each item."""

    def __init__(self, items: Mapping[str, Contribution]) -> None:
        super().__init__((name, c.value) for name, c in items.items())
        self.providers: dict[str, PluginInfo] = {n: c.plugin for n, c in items.items()}


def conflict_error(kind: str, name: str, entries: Sequence[Contribution]) -> PluginError:
    """The error for two or more plugins giving the same ``kind`` named ``name``."""
    infos = [c.plugin for c in entries]
    labels = [i.label for i in infos]
    if len(set(labels)) < len(labels):
        labels = [f"{i.label} (plugin '{i.name}')" for i in infos]
    who = ", ".join(labels[:-1]) + " and " + labels[-1]
    both = "both" if len(labels) == 2 else "all"
    dist = next((i.distribution for i in reversed(infos) if i.distribution), None)
    uninstall = f" (pip uninstall {dist})" if dist else ""
    return PluginError(
        f"{who} {both} provide {kind} {name!r}.\n"
        f"HINT: uninstall one of them{uninstall}, or load only the plugins you want with "
        f"OPGRAPH_DISABLE_PLUGIN_AUTOLOAD=1 OPGRAPH_PLUGINS=<names>."
    )


class OpgraphPluginManager(pluggy.PluginManager):
    """pluggy's PluginManager for project ``opgraph``, with loading policy and attribution.

    Build one with ``OpgraphPluginManager()`` then :meth:`load`; the process-wide one
    comes from :func:`get_plugin_manager`. Tests pass ``entry_points`` and ``environ``
    to :meth:`load` instead of installing distributions.
    """

    def __init__(self) -> None:
        super().__init__("opgraph")
        self.add_hookspecs(hookspecs)
        self.config: Any = None
        self.autoload = True
        self.requested: tuple[str, ...] = ()
        self.strict = False
        self.ready = False
        self._load_called = False
        self._infos: dict[str, PluginInfo] = {}
        self._cache: dict[str, dict[str, list[Contribution]]] = {}
        self._failed_hooks: set[tuple[str, str]] = set()

    # ---- loading

    def load(
        self,
        *,
        config: Any = None,
        environ: Mapping[str, str] | None = None,
        entry_points: Iterable[Any] | None = None,
        builtins: Sequence[str] | None = None,
    ) -> None:
        """Register the built-ins and the entry points, following the env switches.

        Parameters
        ----------
        config
            Passed to every ``opgraph_add_config``; None skips that hook.
        environ
            Where to read ``OPGRAPH_*`` switches (default ``os.environ``).
        entry_points
            The entry points to consider (default: installed ones of group ``opgraph``).
        builtins
            Module paths of core's own plugins (default :data:`BUILTIN_PLUGINS`).
        """
        if self._load_called:
            raise PluginError("OpgraphPluginManager.load() was already called on this manager")
        self._load_called = True
        environ = os.environ if environ is None else environ
        self.strict = _env_flag(environ, "OPGRAPH_STRICT_PLUGINS")
        self.autoload = not _env_flag(environ, "OPGRAPH_DISABLE_PLUGIN_AUTOLOAD")
        raw = environ.get("OPGRAPH_PLUGINS", "")
        self.requested = tuple(p.strip() for p in raw.split(",") if p.strip())
        if _env_flag(environ, "OPGRAPH_TRACE_PLUGINS"):
            self.add_hookcall_monitoring(_trace_before, _trace_after)
        self.config = config
        self.hook.opgraph_addhooks.call_historic(kwargs={"pluginmanager": self})
        if config is not None:
            self.hook.opgraph_add_config.call_historic(kwargs={"config": config})
        for module in BUILTIN_PLUGINS if builtins is None else builtins:
            self._load_builtin(module)
        eps = list(_iter_entry_points() if entry_points is None else entry_points)
        self._load_entry_points(eps)
        self._check_unknown_hooks()
        self.ready = True

    def _load_builtin(self, module: str) -> None:
        info = PluginInfo(module, "builtin", module, "opgraph-core", _core_version())
        try:
            plugin = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:  # not written yet / trimmed build: nothing to load
                return
            self._failed(info, "failed to load", exc)
            return
        except Exception as exc:
            self._failed(info, "failed to load", exc)
            return
        self._register_guarded(info, plugin)

    def _load_entry_points(self, eps: list[Any]) -> None:
        by_name = {ep.name for ep in eps}
        for ep in eps:
            dist, version = _dist_of(ep)
            info = PluginInfo(ep.name, "entry point", ep.value, dist, version)
            if not self.autoload and ep.name not in self.requested:
                if ep.name not in self._infos:
                    info.status, info.reason = "skipped", "autoload disabled"
                    self._infos[ep.name] = info
                continue
            self._load_entry_point(ep, info)
        for item in self.requested:
            if item not in by_name:
                ep = importlib.metadata.EntryPoint(item, item, ENTRY_POINT_GROUP)
                self._load_entry_point(ep, PluginInfo(item, "OPGRAPH_PLUGINS", item))

    def _load_entry_point(self, ep: Any, info: PluginInfo) -> None:
        old = self._infos.get(info.name)
        if old is not None and old.status != "skipped":
            if (old.distribution, old.module) == (info.distribution, info.module):
                return  # the same distribution seen twice on sys.path
            entries = [Contribution(None, old), Contribution(None, info)]
            error = conflict_error("plugin", info.name, entries)
            self._failed(info, "failed to load", error, key=f"{info.name} ({info.label})")
            return
        try:
            plugin = ep.load()
        except Exception as exc:
            self._failed(info, "failed to load", exc)
            return
        if self.is_registered(plugin):  # listed in OPGRAPH_PLUGINS and also an entry point
            return
        self._register_guarded(info, plugin)

    def _register_guarded(self, info: PluginInfo, plugin: object) -> None:
        self._infos[info.name] = info
        try:
            self.register(plugin, name=info.name)
        except Exception as exc:
            if self.get_plugin(info.name) is not None:
                super().unregister(name=info.name)  # pluggy leaves it half-registered
            self._invalidate()
            self._failed(info, "failed to load", exc)

    def _failed(
        self, info: PluginInfo, what: str, exc: BaseException, key: str | None = None
    ) -> None:
        """Record ``info`` as failed and warn, or raise under OPGRAPH_STRICT_PLUGINS=1."""
        info.status, info.error = "failed", exc
        self._infos[key or info.name] = info
        message = f"opgraph: {info.describe()} {what}: {type(exc).__name__}: {exc}"
        if self.strict:
            raise PluginError(
                f"{message}\nHINT: fix or uninstall it, or unset OPGRAPH_STRICT_PLUGINS "
                f"to run without it."
            ) from exc
        warnings.warn(
            f"{message} — it is disabled; set OPGRAPH_STRICT_PLUGINS=1 to raise instead",
            PluginWarning,
            stacklevel=_user_stacklevel(),
        )

    def _check_unknown_hooks(self) -> None:
        """Warn about hookimpls that no hookspec declares (usually a typo)."""
        known = [n for n, c in vars(self.hook).items() if c.has_spec()]
        for name, caller in vars(self.hook).items():
            if caller.has_spec():
                continue
            for impl in caller.get_hookimpls():
                if impl.opts.get("optionalhook"):
                    continue
                close = difflib.get_close_matches(name, known, n=1)
                hint = f"did you mean {close[0]}? " if close else ""
                info = self.plugin_info(impl.plugin_name)
                self._failed_hook(
                    info,
                    name,
                    PluginError(
                        f"{info.describe()} implements {name}, which no installed package "
                        f"declares.\nHINT: {hint}If the hook belongs to an optional "
                        f"package, mark it @hookimpl(optionalhook=True)."
                    ),
                )

    # ---- registration with attribution

    def register(self, plugin: object, name: str | None = None) -> str | None:
        """Register ``plugin``; records the config flags and hookspecs it added."""
        plugin_name = name or self.get_canonical_name(plugin)
        info = self._infos.get(plugin_name)
        if info is None or info.status != "loaded":
            info = PluginInfo(plugin_name, "register()", getattr(plugin, "__name__", None))
            self._infos[plugin_name] = info
        flags, specs = _flag_names(self.config), self._spec_names()
        self._invalidate()
        result = super().register(plugin, name=plugin_name)
        info.config_flags = tuple(sorted(_flag_names(self.config) - flags))
        info.hookspecs = tuple(sorted(self._spec_names() - specs))
        return result

    def unregister(self, plugin: object | None = None, name: str | None = None) -> Any:
        """Unregister a plugin (by object or name) and forget its contributions."""
        if name is None and plugin is not None:
            name = self.get_name(plugin)
        result = super().unregister(plugin=plugin, name=name)
        if name is not None:
            self._infos.pop(name, None)
        self._invalidate()
        return result

    def _spec_names(self) -> set[str]:
        return {n for n, c in vars(self.hook).items() if c.has_spec()}

    def _invalidate(self) -> None:
        self._cache.clear()

    def plugin_info(self, name: str) -> PluginInfo:
        """The :class:`PluginInfo` of the plugin registered (or tried) under ``name``."""
        info = self._infos.get(name)
        if info is None:
            plugin = self.get_plugin(name)
            info = PluginInfo(name, "register()", getattr(plugin, "__name__", None))
            self._infos[name] = info
        return info

    def plugin_infos(self) -> list[PluginInfo]:
        """Every plugin seen: loaded, failed and skipped, in loading order."""
        return list(self._infos.values())

    # ---- calling hooks one plugin at a time

    def _call_each(self, hook_name: str, **kwargs: Any) -> Iterator[tuple[PluginInfo, Any]]:
        """Call ``hook_name`` on each plugin separately, yielding (plugin, result).

        Goes through pluggy (so tracing sees it). A plugin whose hook raises is
        reported like a load failure and skipped.
        """
        for info, impls in self._impls_by_plugin(hook_name):
            try:
                results = self._call_impls(hook_name, impls, kwargs)
            except Exception as exc:
                self._failed_hook(info, hook_name, exc)
                continue
            for result in results:
                yield info, result

    def _impls_by_plugin(self, hook_name: str) -> list[tuple[PluginInfo, list[Any]]]:
        """The hookimpls of ``hook_name`` grouped by plugin, in registration order."""
        grouped: dict[str, list[Any]] = {}
        for impl in getattr(self.hook, hook_name).get_hookimpls():
            grouped.setdefault(impl.plugin_name, []).append(impl)
        return [(self.plugin_info(name), impls) for name, impls in grouped.items()]

    def _call_impls(self, hook_name: str, impls: list[Any], kwargs: dict[str, Any]) -> list[Any]:
        # pluggy's own executor (what HookCaller.__call__ uses): honours wrappers and
        # tracing, and takes an explicit impl list, so each plugin is called on its own.
        return self._hookexec(hook_name, impls, kwargs, False)  # type: ignore[return-value]

    def _failed_hook(self, info: PluginInfo, hook_name: str, exc: BaseException) -> None:
        key = (info.name, hook_name)
        if key in self._failed_hooks and not self.strict:
            return
        self._failed_hooks.add(key)
        message = f"opgraph: {info.describe()} failed in {hook_name}: {type(exc).__name__}: {exc}"
        if self.strict:
            raise PluginError(message) from exc
        warnings.warn(
            f"{message} — its {hook_name} is ignored; set OPGRAPH_STRICT_PLUGINS=1 to raise "
            f"instead",
            PluginWarning,
            stacklevel=_user_stacklevel(),
        )

    def contributions(self, kind: str) -> dict[str, list[Contribution]]:
        """Every item of ``kind`` (``linkers``, ``modes``, ``namespaces``, ``commands``),
        with all the plugins giving it; conflicts are not errors here."""
        if kind in self._cache:
            return self._cache[kind]
        hook_name, _ = _MAPPING_HOOKS[kind]
        gathered: dict[str, list[Contribution]] = {}
        for info, result in self._call_each(hook_name):
            if not isinstance(result, Mapping) or not all(isinstance(k, str) for k in result):
                self._failed_hook(
                    info,
                    hook_name,
                    TypeError(
                        f"{hook_name} must return a mapping with str keys, "
                        f"got {type(result).__name__}: {result!r:.200}"
                    ),
                )
                continue
            for item, value in result.items():
                gathered.setdefault(item, []).append(Contribution(value, info))
        self._cache[kind] = gathered
        return gathered

    def _merged(self, kind: str) -> Contributions:
        gathered = self.contributions(kind)
        for name, entries in gathered.items():
            if len(entries) > 1:
                raise conflict_error(_MAPPING_HOOKS[kind][1], name, entries)
        return Contributions({name: entries[0] for name, entries in gathered.items()})

    def conflicts(self) -> list[str]:
        """Messages for every name given by two plugins (empty when all is well)."""
        out = []
        for kind, (_, singular) in _MAPPING_HOOKS.items():
            for name, entries in self.contributions(kind).items():
                if len(entries) > 1:
                    out.append(str(conflict_error(singular, name, entries)))
        return out

    # ---- the merged data hooks

    def linkers(self) -> Contributions:
        """Linker factories by name, from every plugin; ``.providers`` says who gave each."""
        return self._merged("linkers")

    def modes(self) -> Contributions:
        """Mode factories by name, from every plugin; ``.providers`` says who gave each."""
        return self._merged("modes")

    def namespaces(self) -> Contributions:
        """Lazy public namespaces (``opgraph.sparse`` -> implementing module)."""
        return self._merged("namespaces")

    def commands(self) -> Contributions:
        """``python -m opgraph`` subcommands, each normalized to a :class:`Command`."""
        merged = self._merged("commands")
        for name, value in merged.items():
            if not isinstance(value, hookspecs.Command):
                doc = (getattr(value, "__doc__", None) or "").strip().splitlines()
                merged[name] = hookspecs.Command(help=doc[0] if doc else "", run=value)
        return merged

    def linker_preference(self) -> list[tuple[float, str, str]]:
        """``(priority, linker, plugin name)`` from every plugin, best first."""
        prefs = []
        for info, result in self._call_each("opgraph_linker_preference"):
            try:
                prefs += [(float(p), str(linker), info.name) for p, linker in result]
            except (TypeError, ValueError) as exc:
                self._failed_hook(info, "opgraph_linker_preference", exc)
        return sorted(prefs, key=lambda t: (-t[0], t[1]))

    def best_linker(self) -> str:
        """The installed linker with the highest preference: what ``linker=auto`` means."""
        installed = self.linkers()
        for _, linker, _ in self.linker_preference():
            if linker in installed:
                return linker
        raise PluginError(
            f"no installed plugin recommends any of the installed linkers "
            f"({', '.join(sorted(installed)) or 'none'}), so linker=auto has no answer.\n"
            f"HINT: set OPGRAPH_FLAGS=linker=<name>, or check `python -m opgraph plugins`."
        )

    def install_rewrites(self, optdb: Any) -> None:
        """Call every plugin's ``opgraph_register_rewrites`` with ``optdb.current_plugin``
        set to that plugin's name around the call (when ``optdb`` has that attribute)."""
        hook_name = "opgraph_register_rewrites"
        attribute = hasattr(optdb, "current_plugin")
        for info, impls in self._impls_by_plugin(hook_name):
            previous = optdb.current_plugin if attribute else None
            if attribute:
                optdb.current_plugin = info.name
            try:
                self._call_impls(hook_name, impls, {"optdb": optdb})
            except Exception as exc:
                self._failed_hook(info, hook_name, exc)
            finally:
                if attribute:
                    optdb.current_plugin = previous

    def shared_constructor(
        self,
        value: Any,
        name: str | None = None,
        strict: bool = False,
        allow_downcast: bool | None = None,
        borrow: bool = False,
        options: Mapping[str, Any] | None = None,
    ) -> Any | None:
        """The first plugin's SharedVariable for ``value``, or None if no plugin owns it.

        With ``options`` (``shared``'s keyword extras), only the implementations that take
        ``options`` are asked: one that does not would silently drop them.
        """
        options = dict(options or {})
        caller = self.hook.opgraph_shared_constructor
        if options:
            blind = [i.plugin for i in caller.get_hookimpls() if "options" not in i.argnames]
            caller = self.subset_hook_caller("opgraph_shared_constructor", blind)
        return caller(
            value=value,
            name=name,
            strict=strict,
            allow_downcast=allow_downcast,
            borrow=borrow,
            options=options,
        )

    def as_variable(self, value: Any, name: str | None = None) -> Any | None:
        """The first plugin's Constant/Variable for a foreign ``value``, or None."""
        return self.hook.opgraph_as_variable(value=value, name=name)

    def transfer(self, var: Any, target: Any) -> Any | None:
        """The first plugin's ``var`` moved to ``target``, or None if no plugin owns it."""
        return self.hook.opgraph_transfer(var=var, target=target)

    def cache_info(self) -> dict[str, list[str]]:
        """``{plugin name: lines}`` from each plugin's ``opgraph_cache_info`` (a hook that
        fails gives its error as its line: ``cache info`` must still print)."""
        found: dict[str, list[str]] = {}
        for impl in self.hook.opgraph_cache_info.get_hookimpls():
            try:
                lines = impl.function()
            except Exception as exc:
                lines = f"(its cache_info hook failed: {type(exc).__name__}: {exc})"
            if lines:
                found[impl.plugin_name] = [lines] if isinstance(lines, str) else list(lines)
        return found

    # ---- listing

    def report(self) -> dict[str, Any]:
        """Everything ``python -m opgraph plugins`` shows, as plain data (JSON-ready)."""
        contributed: dict[str, dict[str, Any]] = {}
        for kind in _MAPPING_HOOKS:
            for item, entries in sorted(self.contributions(kind).items()):
                for c in entries:
                    per = contributed.setdefault(c.plugin.name, {})
                    if kind == "namespaces":
                        per.setdefault(kind, {})[item] = str(c.value)
                    else:
                        per.setdefault(kind, []).append(item)
        for prio, linker, name in self.linker_preference():
            contributed.setdefault(name, {}).setdefault("linker_preference", []).append(
                [prio, linker]
            )
        states: dict[str, str] = {}
        for impl in self.hook.opgraph_status.get_hookimpls():
            try:
                line = impl.function()
            except Exception as exc:  # a broken status line must not break the listing
                line = f"(its status hook failed: {type(exc).__name__}: {exc})"
            if line:
                states[impl.plugin_name] = str(line)
        plugins = []
        for info in self.plugin_infos():
            plugin = self.get_plugin(info.name) if info.status == "loaded" else None
            hooks = sorted(c.name for c in self.get_hookcallers(plugin) or ()) if plugin else []
            error = f"{type(info.error).__name__}: {info.error}" if info.error else None
            per = contributed.get(info.name, {})
            plugins.append(
                {
                    "name": info.name,
                    "source": info.source,
                    "module": info.module,
                    "distribution": info.distribution,
                    "version": info.version,
                    "status": info.status,
                    "error": error,
                    "reason": info.reason,
                    "state": states.get(info.name),
                    "hooks": hooks,
                    "hookspecs": list(info.hookspecs),
                    "config_flags": list(info.config_flags),
                    "linkers": per.get("linkers", []),
                    "modes": per.get("modes", []),
                    "namespaces": per.get("namespaces", {}),
                    "commands": per.get("commands", []),
                    "linker_preference": per.get("linker_preference", []),
                }
            )
        try:
            best: str | None = self.best_linker()
        except PluginError:
            best = None
        return {
            "autoload": self.autoload,
            "requested": list(self.requested),
            "strict": self.strict,
            "best_linker": best,
            "conflicts": self.conflicts(),
            "plugins": plugins,
        }


# ---- tracing (OPGRAPH_TRACE_PLUGINS=1)


def _trace_before(hook_name: str, impls: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    who = ", ".join(i.plugin_name for i in impls) or "no plugin"
    args = ", ".join(f"{k}={v!r:.60}" for k, v in kwargs.items())
    sys.stderr.write(f"opgraph trace: {hook_name}({args}) -> [{who}]\n")


def _trace_after(
    outcome: pluggy.Result[Any], hook_name: str, impls: Sequence[Any], kwargs: Mapping[str, Any]
) -> None:
    if outcome.exception is not None:
        shown = f"raised {type(outcome.exception).__name__}: {outcome.exception}"
    else:
        shown = f"returned {outcome.get_result()!r:.200}"
    sys.stderr.write(f"opgraph trace: {hook_name} {shown}\n")


# ---- the process-wide manager

_plugin_manager: OpgraphPluginManager | None = None
_lock = threading.RLock()


def _default_config() -> Any:
    """The config whose flags plugins declare through ``opgraph_add_config`` (tests swap it)."""
    return config


def get_plugin_manager() -> OpgraphPluginManager:
    """The process-wide plugin manager, built (and its plugins loaded) on first call.

    A call made while the manager is still loading (from a plugin's import, on the same
    thread) gets the partly loaded manager; other threads wait for it to finish.
    """
    global _plugin_manager
    pm = _plugin_manager
    if pm is not None and pm.ready:
        return pm
    with _lock:
        if _plugin_manager is None:
            pm = OpgraphPluginManager()
            _plugin_manager = pm
            try:
                pm.load(config=_default_config())
            except BaseException:
                _plugin_manager = None
                raise
        return _plugin_manager


def add_builtin_plugin(module: str) -> None:
    """Register ``module`` as one of core's own plugins (before the entry points).

    Core's compile layer adds its linkers and modes this way: the plugin manager, below it,
    never names it. If the process-wide manager is already loaded, the module is
    registered at once.
    """
    if module in BUILTIN_PLUGINS:
        return
    BUILTIN_PLUGINS.append(module)
    with _lock:
        if _plugin_manager is not None and _plugin_manager.ready:
            _plugin_manager._load_builtin(module)


def _existing_plugin_manager() -> OpgraphPluginManager | None:
    """The process-wide manager if it is fully loaded, without building it."""
    pm = _plugin_manager
    return pm if pm is not None and pm.ready else None


def _reset_plugin_manager() -> OpgraphPluginManager | None:
    """Forget the process-wide manager (tests only); returns the old one.

    The next :func:`get_plugin_manager` loads plugins again, and their
    ``opgraph_add_config`` runs again: give it a fresh config.
    """
    global _plugin_manager
    with _lock:
        old, _plugin_manager = _plugin_manager, None
    return old
