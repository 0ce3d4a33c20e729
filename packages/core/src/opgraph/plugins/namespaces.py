"""Lazy plugin-owned namespaces: ``opgraph.sparse``, ``opgraph.gpuarray``, and any other.

A plugin maps a public name to its implementing module through
``opgraph_namespaces()`` (``{"opgraph.sparse": "opgraph_sparse.api"}``). Two ways in:

- ``import opgraph.sparse`` (and ``opgraph.sparse.basic``) goes through
  :class:`NamespaceFinder`, a ``sys.meta_path`` finder placed by :func:`install_finder`.
  It imports the target module on first use and aliases it in ``sys.modules`` under
  the public name, so both names give the same module object.
- ``opgraph.sparse`` as an attribute goes through :func:`module_getattr`, which
  ``opgraph.__getattr__`` calls.

A namespace in :data:`KNOWN` with no installed provider raises ModuleNotFoundError
naming the distribution to install.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import threading
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from opgraph.plugins import manager as _manager

__all__ = [
    "KNOWN",
    "NamespaceFinder",
    "install_finder",
    "module_getattr",
    "namespace_names",
    "resolve",
    "uninstall_finder",
]

#: Namespaces opgraph's own distributions provide: public name -> distribution.
KNOWN: dict[str, str] = {
    "opgraph.sparse": "opgraph-sparse",
    "opgraph.gpuarray": "opgraph-backend-cuda",
    "opgraph.tensor.opt": "opgraph-optimizers",
    "opgraph.scan_module.scan_opt": "opgraph-optimizers",
}

_busy = threading.local()


def _known_root(fullname: str) -> str | None:
    for name in KNOWN:
        if fullname == name or fullname.startswith(name + "."):
            return name
    return None


def _missing_provider(root: str, fullname: str, pm: Any) -> ModuleNotFoundError:
    dist = KNOWN[root]
    message = f"{root} needs the package {dist}: pip install {dist}"
    failed = [i for i in pm.plugin_infos() if i.distribution == dist and i.status != "loaded"]
    for info in failed:
        if info.status == "failed":
            message = (
                f"{root} needs the package {dist}, which is installed but its plugin "
                f"{info.name!r} failed to load: {type(info.error).__name__}: {info.error}\n"
                f"HINT: `python -m opgraph plugins` shows the details."
            )
        else:
            message = (
                f"{root} needs the package {dist}, which is installed but not loaded "
                f"({info.reason}).\nHINT: add {info.name} to OPGRAPH_PLUGINS."
            )
    return ModuleNotFoundError(message, name=fullname)


def resolve(fullname: str) -> str | None:
    """The module that implements public name ``fullname``, or None if it is not a namespace.

    Raises ModuleNotFoundError for a :data:`KNOWN` namespace nobody provides, and
    PluginError when two plugins provide the same namespace. Builds the plugin manager
    only for names under a :data:`KNOWN` namespace; otherwise it uses the manager only
    once it is loaded, so imports made while ``opgraph`` itself loads stay untouched.
    """
    if not fullname.startswith("opgraph.") or getattr(_busy, "active", False):
        return None
    root = _known_root(fullname)
    pm = _manager._existing_plugin_manager()
    if pm is None:
        if root is None:
            return None
        pm = _manager.get_plugin_manager()
    _busy.active = True
    try:
        providers = pm.contributions("namespaces")
    finally:
        _busy.active = False
    matches = [ns for ns in providers if fullname == ns or fullname.startswith(ns + ".")]
    if not matches:
        if root is not None:
            raise _missing_provider(root, fullname, pm)
        return None
    namespace = max(matches, key=len)
    entries = providers[namespace]
    if len(entries) > 1:
        raise _manager.conflict_error("namespace", namespace, entries)
    if fullname == namespace and _is_core_module(namespace):
        warnings.warn(
            f"opgraph: {entries[0].plugin.describe()} declares namespace {namespace!r}, "
            f"which is a module of opgraph itself; the plugin's namespace is ignored",
            _manager.PluginWarning,
            stacklevel=_manager._user_stacklevel(),
        )
        return None
    return str(entries[0].value) + fullname[len(namespace) :]


def _is_core_module(fullname: str) -> bool:
    """Whether ``fullname`` exists as a real module of core (e.g. ``opgraph.tensor``)."""
    parent_name = fullname.rpartition(".")[0]
    parent = sys.modules.get(parent_name)
    path = getattr(parent, "__path__", None)
    if path is None or getattr(parent, "__name__", None) != parent_name:
        return False  # not imported yet, not a package, or itself a plugin's alias
    return importlib.machinery.PathFinder.find_spec(fullname, path) is not None


class _AliasLoader(importlib.abc.Loader):
    """Imports the target module and puts it in ``sys.modules`` under the public name."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # a placeholder; exec_module swaps in the real module

    def exec_module(self, module: ModuleType) -> None:
        public = module.__name__
        try:
            target = importlib.import_module(self.target)
        except ImportError as exc:
            exc.add_note(f"(while importing {public}, which is provided by {self.target})")
            raise
        # importlib returns sys.modules[public] after exec_module, so this is the result.
        sys.modules[public] = target


class NamespaceFinder(importlib.abc.MetaPathFinder):
    """Resolves plugin-owned ``opgraph.*`` names (see :func:`resolve`)."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        module = resolve(fullname)
        if module is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(module))

    def __repr__(self) -> str:
        return "<opgraph NamespaceFinder>"


_finder = NamespaceFinder()


def install_finder() -> None:
    """Put the namespace finder first on ``sys.meta_path`` (idempotent).

    It must come before the path finder: once ``opgraph.sparse`` is an alias of a
    package, submodules such as ``opgraph.sparse.basic`` would otherwise be loaded a
    second time under the alias name.
    """
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def uninstall_finder() -> None:
    """Remove the namespace finder from ``sys.meta_path`` (tests)."""
    while _finder in sys.meta_path:
        sys.meta_path.remove(_finder)


def module_getattr(name: str, package: str = "opgraph") -> ModuleType:
    """A package's ``__getattr__`` (``opgraph``, ``opgraph.tensor``): import the
    plugin-owned namespace ``package.name`` (``opgraph.sparse``, ``opgraph.tensor.opt``) on
    first attribute access.

    Raises AttributeError for names that are not namespaces, and ModuleNotFoundError for
    a :data:`KNOWN` namespace whose distribution is not installed.
    """
    if name.startswith("__") or resolve(f"{package}.{name}") is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return importlib.import_module(f"{package}.{name}")


def namespace_names() -> list[str]:
    """Attribute names of the installed top-level namespaces, for ``dir(opgraph)``."""
    pm = _manager._existing_plugin_manager()
    if pm is None:
        return []
    names = {ns.split(".")[1] for ns in pm.contributions("namespaces") if ns.count(".") == 1}
    return sorted(names)
