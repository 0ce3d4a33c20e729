"""``python -m opgraph cache info``: the lines of every plugin's ``opgraph_cache_info``,
after the report of the plugin owning ``cache``, or alone when no plugin provides it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from opgraph.__main__ import main
from opgraph.plugins import Command, hookimpl
from opgraph.plugins import manager as manager_module
from opgraph.rewriting import optdb as optdb_module


class _Dist:
    def __init__(self, name: str) -> None:
        self.name, self.version = name, "1.0"


class _EntryPoint:
    group = "opgraph"

    def __init__(self, name: str, plugin: object) -> None:
        self.name, self.value, self.dist = name, f"{name}_pkg.plugin", _Dist(f"{name}-dist")
        self._plugin = plugin

    def load(self) -> object:
        return self._plugin


class _Config:
    def __contains__(self, name: object) -> bool:
        return False

    def check_unknown_flags(self) -> None:
        pass


class _Kernels:
    @hookimpl
    def opgraph_cache_info(self) -> list[str]:
        return ["holds: 3 widgets", "in /tmp/widgets"]


class _Broken:
    @hookimpl
    def opgraph_cache_info(self) -> list[str]:
        raise OSError("no such folder")


class _Owner:
    """Provides ``cache`` (as backend-c does), printing JSON with ``--json``."""

    @hookimpl
    def opgraph_commands(self) -> dict[str, Any]:
        def configure(parser: Any) -> None:
            sub = parser.add_subparsers(dest="cache_command", required=True)
            info = sub.add_parser("info")
            info.add_argument("--json", action="store_true")
            sub.add_parser("clear")

        def run(args: Any) -> int:
            if args.cache_command == "clear":
                print("cleared")
            elif args.json:
                print(json.dumps({"modules": 2}))
            else:
                print("holds: 2 modules")
            return 0

        return {"cache": Command("the cache", run, configure)}


def _use(monkeypatch: pytest.MonkeyPatch, **plugins: object) -> None:
    monkeypatch.setattr(manager_module, "_plugin_manager", None)
    eps = [_EntryPoint(name, plugin) for name, plugin in plugins.items()]
    monkeypatch.setattr(manager_module, "_iter_entry_points", lambda: eps)
    monkeypatch.setattr(manager_module, "_default_config", _Config)
    monkeypatch.setattr(manager_module, "BUILTIN_PLUGINS", ())
    monkeypatch.setattr(optdb_module, "_optdb", None)
    for var in ("OPGRAPH_DISABLE_PLUGIN_AUTOLOAD", "OPGRAPH_PLUGINS", "OPGRAPH_STRICT_PLUGINS"):
        monkeypatch.delenv(var, raising=False)


def test_lines_follow_the_owners_report(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _use(monkeypatch, owner=_Owner(), widgets=_Kernels(), broken=_Broken())
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("holds: 2 modules\n")
    assert "widgets:\n  holds: 3 widgets\n  in /tmp/widgets\n" in out
    assert "broken:\n  (its cache_info hook failed: OSError: no such folder)" in out
    assert main(["cache", "info", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["modules"] == 2
    assert report["plugins"]["widgets"] == ["holds: 3 widgets", "in /tmp/widgets"]
    assert main(["cache", "clear"]) == 0
    assert capsys.readouterr().out == "cleared\n"


def test_cache_info_alone_without_an_owner(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _use(monkeypatch, widgets=_Kernels())
    assert main(["cache", "info"]) == 0
    assert capsys.readouterr().out == "widgets:\n  holds: 3 widgets\n  in /tmp/widgets\n"
    assert main(["cache", "info", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "plugins": {"widgets": ["holds: 3 widgets", "in /tmp/widgets"]}
    }


def test_no_cache_command_without_a_plugin_that_has_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _use(monkeypatch)
    with pytest.raises(SystemExit):
        main(["cache", "info"])
    assert "invalid choice: 'cache'" in capsys.readouterr().err
