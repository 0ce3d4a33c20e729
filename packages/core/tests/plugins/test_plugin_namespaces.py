"""Lazy plugin-owned namespaces: ``import opgraph.sparse`` and ``opgraph.sparse``."""

from __future__ import annotations

import importlib
import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import opgraph
from opgraph.plugins import OpgraphPluginManager, PluginError, PluginWarning, hookimpl, namespaces
from opgraph.plugins import manager as manager_module


class FakeDist:
    def __init__(self, name: str) -> None:
        self.name, self.version = name, "1.0"


class FakeEntryPoint:
    group = "opgraph"

    def __init__(self, name: str, plugin: object, dist: str, error: Exception | None = None):
        self.name, self.value, self.dist = name, f"{name}.plugin", FakeDist(dist)
        self._plugin, self._error = plugin, error

    def load(self) -> object:
        if self._error is not None:
            raise self._error
        return self._plugin


def namespace_plugin(mapping: dict[str, str]) -> object:
    class Plugin:
        @hookimpl
        def opgraph_namespaces(self) -> dict[str, str]:
            return mapping

    return Plugin()


@pytest.fixture
def sandbox(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """Fresh manager slot, our finder on a copy of sys.meta_path, sys.modules restored."""
    pkg = tmp_path / "fake_sparse_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("LOADED = True\n")
    (pkg / "basic.py").write_text(textwrap.dedent("class CSM:\n    pass\n"))
    (tmp_path / "fake_ns_target.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(manager_module, "_plugin_manager", None)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    namespaces.install_finder()
    # a real opgraph-sparse may have been imported by earlier tests: hide it meanwhile
    for name in [
        n for n in sys.modules if n == "opgraph.sparse" or n.startswith("opgraph.sparse.")
    ]:
        monkeypatch.delitem(sys.modules, name)
    if "sparse" in vars(opgraph):  # (hasattr would resolve the namespace)
        monkeypatch.delattr(opgraph, "sparse")
    modules_before = set(sys.modules)
    attrs_before = set(vars(opgraph))
    yield tmp_path
    for name in set(sys.modules) - modules_before:
        del sys.modules[name]
    for name in set(vars(opgraph)) - attrs_before:
        delattr(opgraph, name)


def use_manager(monkeypatch: pytest.MonkeyPatch, *eps: FakeEntryPoint) -> OpgraphPluginManager:
    pm = OpgraphPluginManager()
    pm.load(environ={}, entry_points=list(eps), builtins=())
    monkeypatch.setattr(manager_module, "_plugin_manager", pm)
    return pm


def test_import_is_lazy_and_aliases_the_target(
    sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin = namespace_plugin({"opgraph.sparse": "fake_sparse_pkg"})
    use_manager(monkeypatch, FakeEntryPoint("sparse", plugin, "opgraph-sparse"))
    assert "fake_sparse_pkg" not in sys.modules

    import opgraph.sparse

    assert opgraph.sparse is sys.modules["fake_sparse_pkg"]
    assert sys.modules["opgraph.sparse"] is sys.modules["fake_sparse_pkg"]
    assert opgraph.sparse.LOADED
    assert opgraph.sparse.__name__ == "fake_sparse_pkg"  # the target's identity is untouched


def test_submodules_are_the_same_module_objects(
    sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin = namespace_plugin({"opgraph.sparse": "fake_sparse_pkg"})
    use_manager(monkeypatch, FakeEntryPoint("sparse", plugin, "opgraph-sparse"))
    import fake_sparse_pkg.basic

    from opgraph.sparse.basic import CSM

    assert CSM is fake_sparse_pkg.basic.CSM
    assert sys.modules["opgraph.sparse.basic"] is fake_sparse_pkg.basic


def test_attribute_access_imports_on_first_use(
    sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin = namespace_plugin({"opgraph.fakens": "fake_ns_target"})
    use_manager(monkeypatch, FakeEntryPoint("ns", plugin, "fake-ns"))
    assert "fake_ns_target" not in sys.modules
    module = namespaces.module_getattr("fakens")
    assert module.VALUE == 42
    assert module is sys.modules["fake_ns_target"] is sys.modules["opgraph.fakens"]
    assert namespaces.namespace_names() == ["fakens"]


def test_non_namespaces_are_attribute_errors(
    sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_manager(monkeypatch)
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        namespaces.module_getattr("nothing_here")
    with pytest.raises(AttributeError):
        namespaces.module_getattr("__wrapped__")


def test_known_namespace_without_provider_names_the_package(
    sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_manager(monkeypatch)
    expected = re.escape(
        "opgraph.gpuarray needs the package opgraph-backend-cuda: pip install opgraph-backend-cuda"
    )
    with pytest.raises(ModuleNotFoundError, match=expected):
        import opgraph.gpuarray  # noqa: F401
    with pytest.raises(ImportError, match=expected):
        namespaces.module_getattr("gpuarray")
    with pytest.raises(ImportError, match=r"opgraph\.sparse needs the package opgraph-sparse"):
        importlib.import_module("opgraph.sparse.basic")


def test_known_namespace_whose_plugin_failed_says_so(
    sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = FakeEntryPoint("sparse", None, "opgraph-sparse", error=ImportError("no scipy"))
    with pytest.warns(PluginWarning):
        use_manager(monkeypatch, broken)
    with pytest.raises(ImportError, match="installed but its plugin 'sparse' failed to load"):
        namespaces.module_getattr("sparse")


def test_known_namespace_builds_the_manager(sandbox: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = namespace_plugin({"opgraph.sparse": "fake_sparse_pkg"})
    eps = [FakeEntryPoint("sparse", plugin, "opgraph-sparse")]
    monkeypatch.setattr(manager_module, "_iter_entry_points", lambda: eps)
    monkeypatch.setattr(manager_module, "_default_config", lambda: None)
    monkeypatch.setattr(manager_module, "BUILTIN_PLUGINS", ())
    for var in ("OPGRAPH_DISABLE_PLUGIN_AUTOLOAD", "OPGRAPH_PLUGINS", "OPGRAPH_STRICT_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    assert namespaces.resolve("opgraph.something_else") is None
    assert manager_module._plugin_manager is None  # unknown names never build it
    assert namespaces.resolve("opgraph.sparse.basic") == "fake_sparse_pkg.basic"
    assert manager_module._plugin_manager is not None


def test_two_providers_of_one_namespace_is_an_error(
    sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_manager(
        monkeypatch,
        FakeEntryPoint("a", namespace_plugin({"opgraph.sparse": "fake_sparse_pkg"}), "dist-a"),
        FakeEntryPoint("b", namespace_plugin({"opgraph.sparse": "fake_ns_target"}), "dist-b"),
    )
    with pytest.raises(PluginError, match="dist-a and dist-b both provide namespace"):
        importlib.import_module("opgraph.sparse")
    # unrelated imports are not disturbed by the conflict
    assert namespaces.resolve("opgraph.unrelated") is None


def test_a_core_module_always_wins(sandbox: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = namespace_plugin({"opgraph.plugins": "fake_ns_target"})
    use_manager(monkeypatch, FakeEntryPoint("hijack", plugin, "hijack-dist"))
    with pytest.warns(PluginWarning, match="module of opgraph itself"):
        assert namespaces.resolve("opgraph.plugins") is None


def test_a_core_subpackage_module_always_wins(
    sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin = namespace_plugin({"opgraph.plugins.hookspecs": "fake_ns_target"})
    use_manager(monkeypatch, FakeEntryPoint("hijack", plugin, "hijack-dist"))
    with pytest.warns(PluginWarning, match="module of opgraph itself"):
        assert namespaces.resolve("opgraph.plugins.hookspecs") is None


def test_missing_target_module_says_which_namespace(
    sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin = namespace_plugin({"opgraph.ghost": "no_such_target_module"})
    use_manager(monkeypatch, FakeEntryPoint("ghost", plugin, "ghost-dist"))
    with pytest.raises(ModuleNotFoundError) as info:
        importlib.import_module("opgraph.ghost")
    assert "opgraph.ghost" in "".join(getattr(info.value, "__notes__", []))


def test_install_finder_is_idempotent(sandbox: Path) -> None:
    namespaces.install_finder()
    namespaces.install_finder()
    assert sys.meta_path.count(namespaces._finder) == 1
    assert sys.meta_path[0] is namespaces._finder
    namespaces.uninstall_finder()
    assert namespaces._finder not in sys.meta_path
