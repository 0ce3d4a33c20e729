"""The plugin manager: discovery, failure policy, env switches, merging and attribution.

No distribution is installed: entry points are faked (what ``importlib.metadata`` gives
is only read through ``name``, ``value``, ``dist.name``, ``dist.version`` and ``load()``).
"""

from __future__ import annotations

import sys
import types
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pluggy
import pytest

from opgraph.plugins import (
    Command,
    OpgraphPluginManager,
    PluginError,
    PluginWarning,
    hookimpl,
    hookspec,
)
from opgraph.plugins import manager as manager_module


@dataclass
class FakeDist:
    name: str
    version: str


class FakeEntryPoint:
    """Stands in for ``importlib.metadata.EntryPoint``."""

    group = "opgraph"

    def __init__(
        self,
        name: str,
        plugin: object = None,
        *,
        dist: str | None = "fake-dist",
        version: str = "1.0",
        error: Exception | None = None,
    ) -> None:
        self.name = name
        self.value = f"fake_{name}.plugin"
        self.dist = FakeDist(dist, version) if dist else None
        self._plugin = plugin
        self._error = error

    def load(self) -> object:
        if self._error is not None:
            raise self._error
        return self._plugin


class DummyConfig:
    """The part of ``opgraph.configparser.Config`` the manager uses."""

    def __init__(self) -> None:
        self._flags: dict[str, Any] = {}
        self.checked = False

    def add(self, name: str, *args: Any, **kwargs: Any) -> None:
        if name in self._flags:
            raise ValueError(f"opgraph flag {name!r} is already declared")
        self._flags[name] = args

    def __contains__(self, name: object) -> bool:
        return name in self._flags

    def __dir__(self) -> list[str]:
        return [*object.__dir__(self), *self._flags]

    def check_unknown_flags(self) -> None:
        self.checked = True


def linker_plugin(*names: str) -> object:
    class Plugin:
        @hookimpl
        def opgraph_linkers(self) -> dict[str, Any]:
            return {n: (lambda n=n: f"linker {n}") for n in names}

    return Plugin()


def make_pm(*eps: FakeEntryPoint, environ: dict[str, str] | None = None, **kw: Any):
    pm = OpgraphPluginManager()
    pm.load(environ=environ or {}, entry_points=list(eps), builtins=kw.pop("builtins", ()), **kw)
    return pm


@pytest.fixture
def no_warnings() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("error", PluginWarning)
        yield


# ---- discovery and registration


def test_entry_points_are_registered_under_their_names(no_warnings: None) -> None:
    pm = make_pm(
        FakeEntryPoint("alpha", linker_plugin("a"), dist="opgraph-alpha", version="2.1"),
        FakeEntryPoint("beta", linker_plugin("b"), dist="opgraph-beta"),
    )
    assert pm.get_plugin("alpha") is not None
    assert pm.get_plugin("beta") is not None
    info = pm.plugin_info("alpha")
    assert (info.distribution, info.version, info.status) == ("opgraph-alpha", "2.1", "loaded")
    assert info.source == "entry point"
    assert sorted(pm.linkers()) == ["a", "b"]
    assert pm.linkers()["a"]() == "linker a"


def test_builtin_plugins_are_registered_first(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("fake_opgraph_builtin")

    @hookimpl
    def opgraph_linkers() -> dict[str, Any]:
        return {"py": object}

    module.opgraph_linkers = opgraph_linkers  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_opgraph_builtin", module)
    pm = make_pm(builtins=("fake_opgraph_builtin",))
    info = pm.plugin_info("fake_opgraph_builtin")
    assert (info.source, info.distribution) == ("builtin", "opgraph-core")
    assert pm.linkers().providers["py"] is info


def test_missing_builtin_module_is_skipped_silently(no_warnings: None) -> None:
    pm = make_pm(builtins=("opgraph_no_such_builtin_module",))
    assert pm.plugin_infos() == []


def test_builtin_with_a_missing_dependency_is_reported(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "fake_builtin_needing_dep.py").write_text("import opgraph_somedep_missing\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.warns(PluginWarning, match="opgraph_somedep_missing"):
        pm = make_pm(builtins=("fake_builtin_needing_dep",))
    assert pm.plugin_info("fake_builtin_needing_dep").status == "failed"
    sys.modules.pop("fake_builtin_needing_dep", None)


# ---- failures


def test_broken_plugin_warns_once_and_the_rest_works() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pm = make_pm(
            FakeEntryPoint("good", linker_plugin("g"), dist="good-dist"),
            FakeEntryPoint(
                "broken", dist="broken-dist", version="0.3", error=ImportError("no libfoo")
            ),
        )
    plugin_warnings = [w for w in caught if issubclass(w.category, PluginWarning)]
    assert len(plugin_warnings) == 1
    message = str(plugin_warnings[0].message)
    assert "plugin 'broken' (dist broken-dist 0.3) failed to load" in message
    assert "ImportError: no libfoo" in message
    assert "OPGRAPH_STRICT_PLUGINS=1" in message
    assert list(pm.linkers()) == ["g"]
    info = pm.plugin_info("broken")
    assert info.status == "failed" and isinstance(info.error, ImportError)
    (entry,) = [p for p in pm.report()["plugins"] if p["name"] == "broken"]
    assert entry["status"] == "failed"
    assert entry["error"] == "ImportError: no libfoo"


def test_invalid_hookimpl_is_not_left_half_registered() -> None:
    class Bad:
        @hookimpl
        def opgraph_linkers(self) -> dict[str, Any]:
            return {"bad": object}

        @hookimpl
        def opgraph_modes(self, not_an_argument: int) -> dict[str, Any]:
            return {}

    with pytest.warns(PluginWarning, match=r"(?s)plugin 'bad'.*not_an_argument"):
        pm = make_pm(FakeEntryPoint("bad", Bad(), dist="bad-dist"))
    assert pm.get_plugin("bad") is None
    assert dict(pm.linkers()) == {}
    assert pm.plugin_info("bad").status == "failed"


def test_strict_mode_raises() -> None:
    ep = FakeEntryPoint("broken", dist="broken-dist", error=ImportError("no libfoo"))
    with pytest.raises(PluginError, match=r"plugin 'broken' \(dist broken-dist 1.0\)") as info:
        make_pm(ep, environ={"OPGRAPH_STRICT_PLUGINS": "1"})
    assert isinstance(info.value.__cause__, ImportError)


def test_hook_failing_at_call_time_is_ignored_with_a_warning() -> None:
    class Flaky:
        @hookimpl
        def opgraph_linkers(self) -> dict[str, Any]:
            raise RuntimeError("cannot find the compiler")

    pm = make_pm(
        FakeEntryPoint("flaky", Flaky(), dist="flaky-dist"),
        FakeEntryPoint("good", linker_plugin("g")),
    )
    with pytest.warns(PluginWarning, match=r"'flaky'.*opgraph_linkers.*compiler"):
        assert list(pm.linkers()) == ["g"]


def test_hook_returning_the_wrong_type_is_reported() -> None:
    class Wrong:
        @hookimpl
        def opgraph_modes(self) -> list[str]:
            return ["FAST_RUN"]

    pm = make_pm(FakeEntryPoint("wrong", Wrong()))
    with pytest.warns(PluginWarning, match="must return a mapping"):
        assert dict(pm.modes()) == {}


def test_unknown_hook_name_gets_a_did_you_mean() -> None:
    class Typo:
        @hookimpl
        def opgraph_linker(self) -> dict[str, Any]:
            return {}

    with pytest.warns(PluginWarning, match="did you mean opgraph_linkers"):
        make_pm(FakeEntryPoint("typo", Typo()))


def test_optional_unknown_hook_is_fine(no_warnings: None) -> None:
    class Optional:
        @hookimpl(optionalhook=True)
        def opgraph_c_kernels(self, registry: Any) -> None:
            pass

    pm = make_pm(FakeEntryPoint("opt", Optional()))
    assert pm.plugin_info("opt").status == "loaded"


def test_same_plugin_name_from_two_distributions() -> None:
    with pytest.warns(PluginWarning, match="one-dist and two-dist both provide plugin 'x'"):
        pm = make_pm(
            FakeEntryPoint("x", linker_plugin("a"), dist="one-dist"),
            FakeEntryPoint("x", linker_plugin("b"), dist="two-dist"),
        )
    assert list(pm.linkers()) == ["a"]
    statuses = {(p["name"], p["distribution"]): p["status"] for p in pm.report()["plugins"]}
    assert statuses == {("x", "one-dist"): "loaded", ("x", "two-dist"): "failed"}


# ---- env switches


def test_autoload_disabled_loads_only_what_opgraph_plugins_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = types.ModuleType("my_fake_plugin_module")

    @hookimpl
    def opgraph_modes() -> dict[str, Any]:
        return {"MINE": object}

    module.opgraph_modes = opgraph_modes  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "my_fake_plugin_module", module)
    pm = make_pm(
        FakeEntryPoint("alpha", linker_plugin("a")),
        FakeEntryPoint("beta", linker_plugin("b")),
        environ={
            "OPGRAPH_DISABLE_PLUGIN_AUTOLOAD": "1",
            "OPGRAPH_PLUGINS": "beta, my_fake_plugin_module",
        },
    )
    assert list(pm.linkers()) == ["b"]
    assert list(pm.modes()) == ["MINE"]
    assert pm.plugin_info("alpha").status == "skipped"
    assert pm.plugin_info("my_fake_plugin_module").source == "OPGRAPH_PLUGINS"
    report = pm.report()
    assert report["autoload"] is False
    assert report["requested"] == ["beta", "my_fake_plugin_module"]


def test_opgraph_plugins_module_that_fails_to_import_warns() -> None:
    with pytest.warns(PluginWarning, match="no_such_module_for_opgraph"):
        pm = make_pm(environ={"OPGRAPH_PLUGINS": "no_such_module_for_opgraph"})
    assert pm.plugin_info("no_such_module_for_opgraph").status == "failed"


def test_trace_plugins_prints_hook_calls(capsys: pytest.CaptureFixture[str]) -> None:
    pm = make_pm(
        FakeEntryPoint("alpha", linker_plugin("a")), environ={"OPGRAPH_TRACE_PLUGINS": "1"}
    )
    pm.linkers()
    err = capsys.readouterr().err
    assert "opgraph trace: opgraph_linkers() -> [alpha]" in err
    assert "returned" in err


# ---- merging and attribution


def test_duplicate_linker_names_both_distributions() -> None:
    pm = make_pm(
        FakeEntryPoint("sparse", linker_plugin("c"), dist="opgraph-sparse"),
        FakeEntryPoint("mysparse", linker_plugin("c"), dist="my-sparse"),
    )
    with pytest.raises(PluginError) as info:
        pm.linkers()
    message = str(info.value)
    assert "opgraph-sparse and my-sparse both provide linker 'c'" in message
    assert "HINT: uninstall one" in message
    assert pm.report()["conflicts"] == [message]


def test_report_attributes_every_contribution() -> None:
    class Everything:
        @hookimpl
        def opgraph_add_config(self, config: Any) -> None:
            config.add("everything__level", "how much", None)

        @hookimpl
        def opgraph_linkers(self) -> dict[str, Any]:
            return {"ev": object}

        @hookimpl
        def opgraph_linker_preference(self) -> list[tuple[float, str]]:
            return [(5, "ev")]

        @hookimpl
        def opgraph_modes(self) -> dict[str, Any]:
            return {"EV_MODE": object}

        @hookimpl
        def opgraph_namespaces(self) -> dict[str, str]:
            return {"opgraph.everything": "everything_pkg.api"}

        @hookimpl
        def opgraph_commands(self) -> dict[str, Any]:
            return {"ev": Command(help="do it", run=lambda args: 0)}

    config = DummyConfig()
    pm = make_pm(
        FakeEntryPoint("ev", Everything(), dist="everything", version="3.0"),
        FakeEntryPoint("other", linker_plugin("o")),
        config=config,
    )
    assert pm.linkers().providers["ev"].distribution == "everything"
    assert pm.linkers().providers["o"].name == "other"
    report = pm.report()
    (ev,) = [p for p in report["plugins"] if p["name"] == "ev"]
    assert ev["distribution"] == "everything" and ev["version"] == "3.0"
    assert ev["linkers"] == ["ev"]
    assert ev["modes"] == ["EV_MODE"]
    assert ev["namespaces"] == {"opgraph.everything": "everything_pkg.api"}
    assert ev["commands"] == ["ev"]
    assert ev["config_flags"] == ["everything__level"]
    assert ev["linker_preference"] == [[5.0, "ev"]]
    assert "opgraph_modes" in ev["hooks"] and "opgraph_add_config" in ev["hooks"]
    assert report["best_linker"] == "ev"


def test_best_linker_skips_preferences_for_missing_linkers() -> None:
    class Prefs:
        @hookimpl
        def opgraph_linker_preference(self) -> list[tuple[float, str]]:
            return [(10, "cvm"), (0, "vm")]

    pm = make_pm(FakeEntryPoint("prefs", Prefs()), FakeEntryPoint("vm", linker_plugin("vm")))
    assert pm.best_linker() == "vm"
    pm2 = make_pm(FakeEntryPoint("prefs", Prefs()))
    with pytest.raises(PluginError, match="linker=auto"):
        pm2.best_linker()


def test_bare_function_commands_become_commands() -> None:
    def hello(args: Any) -> int:
        """Say hello."""
        return 0

    class Cmds:
        @hookimpl
        def opgraph_commands(self) -> dict[str, Any]:
            return {"hello": hello}

    pm = make_pm(FakeEntryPoint("cmds", Cmds()))
    command = pm.commands()["hello"]
    assert command == Command(help="Say hello.", run=hello)


def test_install_rewrites_names_the_current_plugin() -> None:
    seen: list[tuple[str, str | None]] = []

    def rewrites_plugin(tag: str) -> object:
        class Plugin:
            @hookimpl
            def opgraph_register_rewrites(self, optdb: Any) -> None:
                seen.append((tag, optdb.current_plugin))

        return Plugin()

    class OptDB:
        current_plugin: str | None = None

    pm = make_pm(
        FakeEntryPoint("one", rewrites_plugin("r1")),
        FakeEntryPoint("two", rewrites_plugin("r2")),
    )
    optdb = OptDB()
    pm.install_rewrites(optdb)
    assert sorted(seen) == [("r1", "one"), ("r2", "two")]
    assert optdb.current_plugin is None


def test_firstresult_hooks() -> None:
    class Owner:
        @hookimpl
        def opgraph_shared_constructor(self, value: Any, name: str | None, borrow: bool) -> Any:
            return ("shared", value, name, borrow) if isinstance(value, set) else None

        @hookimpl
        def opgraph_as_variable(self, value: Any) -> Any:
            return ("const", value) if isinstance(value, set) else None

    pm = make_pm(FakeEntryPoint("owner", Owner()))
    assert pm.shared_constructor({1}, name="s", borrow=True) == ("shared", {1}, "s", True)
    assert pm.shared_constructor([1]) is None
    assert pm.as_variable({2}) == ("const", {2})
    assert pm.as_variable(3) is None


# ---- historic hooks


def test_add_config_reaches_plugins_registered_late() -> None:
    class Late:
        @hookimpl
        def opgraph_add_config(self, config: Any) -> None:
            config.add("late__flag", "a late flag", None)

    config = DummyConfig()
    pm = make_pm(config=config)
    pm.register(Late(), name="late")
    assert "late__flag" in config
    assert pm.plugin_info("late").config_flags == ("late__flag",)
    assert pm.plugin_info("late").source == "register()"


def test_add_config_with_the_real_config() -> None:
    configparser = pytest.importorskip("opgraph.configparser")

    class Flags:
        @hookimpl
        def opgraph_add_config(self, config: Any) -> None:
            config.add("myplug__level", "how hard to try", default=3)

    config = configparser.Config("myplug__level=7")
    pm = make_pm(FakeEntryPoint("flags", Flags()), config=config)
    assert config.myplug__level == 7
    assert pm.plugin_info("flags").config_flags == ("myplug__level",)


def test_a_plugin_adds_its_own_hookspecs() -> None:
    specs = types.ModuleType("fake_c_hookspecs")

    @hookspec
    def opgraph_c_kernels(registry: Any) -> None:
        """Register C kernels."""

    specs.opgraph_c_kernels = opgraph_c_kernels  # type: ignore[attr-defined]

    class Backend:
        @hookimpl
        def opgraph_addhooks(self, pluginmanager: pluggy.PluginManager) -> None:
            pluginmanager.add_hookspecs(specs)

    class Kernels:
        @hookimpl(optionalhook=True)
        def opgraph_c_kernels(self, registry: list[str]) -> None:
            registry.append("fancy")

    # the implementer is registered before the backend that declares the hook
    pm = make_pm(FakeEntryPoint("kernels", Kernels()), FakeEntryPoint("c", Backend()))
    registry: list[str] = []
    pm.hook.opgraph_c_kernels(registry=registry)
    assert registry == ["fancy"]
    assert pm.plugin_info("c").hookspecs == ("opgraph_c_kernels",)
    (c,) = [p for p in pm.report()["plugins"] if p["name"] == "c"]
    assert c["hookspecs"] == ["opgraph_c_kernels"]


def test_unregister_forgets_contributions() -> None:
    pm = make_pm(FakeEntryPoint("alpha", linker_plugin("a")))
    assert list(pm.linkers()) == ["a"]
    pm.unregister(name="alpha")
    assert list(pm.linkers()) == []
    assert [i.name for i in pm.plugin_infos()] == []


# ---- the process-wide manager


def test_get_plugin_manager_is_a_resettable_singleton(monkeypatch: pytest.MonkeyPatch) -> None:
    from opgraph.plugins import get_plugin_manager, load_plugins
    from opgraph.plugins import namespaces as namespaces_module

    config = DummyConfig()
    monkeypatch.setattr(manager_module, "_plugin_manager", None)
    monkeypatch.setattr(manager_module, "BUILTIN_PLUGINS", ())
    monkeypatch.setattr(manager_module, "_default_config", lambda: config)
    monkeypatch.setattr(
        manager_module, "_iter_entry_points", lambda: [FakeEntryPoint("a", linker_plugin("zz"))]
    )
    for var in ("OPGRAPH_DISABLE_PLUGIN_AUTOLOAD", "OPGRAPH_PLUGINS", "OPGRAPH_STRICT_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    pm = get_plugin_manager()
    assert get_plugin_manager() is pm
    assert "zz" in pm.linkers()
    assert load_plugins() is pm
    assert config.checked
    assert namespaces_module._finder in sys.meta_path
    assert manager_module._reset_plugin_manager() is pm
    assert get_plugin_manager() is not pm


def test_strict_failure_leaves_no_half_built_singleton(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manager_module, "_plugin_manager", None)
    monkeypatch.setattr(manager_module, "BUILTIN_PLUGINS", ())
    monkeypatch.setattr(manager_module, "_default_config", lambda: DummyConfig())
    monkeypatch.setattr(
        manager_module, "_iter_entry_points", lambda: [FakeEntryPoint("x", error=OSError("x"))]
    )
    monkeypatch.setenv("OPGRAPH_STRICT_PLUGINS", "1")
    with pytest.raises(PluginError):
        manager_module.get_plugin_manager()
    assert manager_module._plugin_manager is None


def test_load_twice_is_an_error() -> None:
    pm = make_pm()
    with pytest.raises(PluginError, match="already called"):
        pm.load(environ={}, entry_points=[])
