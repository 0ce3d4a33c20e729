"""``python -m opgraph``: plugins, config, --version and plugin-provided commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from opgraph.__main__ import main
from opgraph.plugins import Command, PluginWarning, hookimpl
from opgraph.plugins import manager as manager_module
from opgraph.rewriting import optdb as optdb_module

SRC = Path(__file__).resolve().parents[2] / "src"


class FakeDist:
    def __init__(self, name: str, version: str = "1.0") -> None:
        self.name, self.version = name, version


class FakeEntryPoint:
    group = "opgraph"

    def __init__(self, name: str, plugin: object = None, dist: str = "fake-dist", error=None):
        self.name, self.value, self.dist = name, f"{name}_pkg.plugin", FakeDist(dist)
        self._plugin, self._error = plugin, error

    def load(self) -> object:
        if self._error is not None:
            raise self._error
        return self._plugin


class DescribedConfig:
    def __contains__(self, name: object) -> bool:
        return False

    def describe(self) -> str:
        return "floatX = 'float64'  (default)"

    def check_unknown_flags(self) -> None:
        pass


class Tools:
    @hookimpl
    def opgraph_linkers(self) -> dict[str, Any]:
        return {"toolinker": object}

    @hookimpl
    def opgraph_commands(self) -> dict[str, Any]:
        def configure(parser: Any) -> None:
            parser.add_argument("--who", default="world")

        def run(args: Any) -> int:
            print(f"hello {args.who}")
            return 3

        def ping(args: Any) -> None:
            """Answer pong."""
            print("pong")

        return {"hello": Command("say hello", run, configure), "ping": ping}


def use_plugins(monkeypatch: pytest.MonkeyPatch, *eps: FakeEntryPoint) -> None:
    monkeypatch.setattr(manager_module, "_plugin_manager", None)
    monkeypatch.setattr(manager_module, "_iter_entry_points", lambda: list(eps))
    monkeypatch.setattr(manager_module, "_default_config", DescribedConfig)
    monkeypatch.setattr(manager_module, "BUILTIN_PLUGINS", ())
    # the rewrite database is built from the plugins the first time it is asked for: build a
    # fresh one from these, and leave the process's own one for the tests that follow
    monkeypatch.setattr(optdb_module, "_optdb", None)
    for var in ("OPGRAPH_DISABLE_PLUGIN_AUTOLOAD", "OPGRAPH_PLUGINS", "OPGRAPH_STRICT_PLUGINS"):
        monkeypatch.delenv(var, raising=False)


def test_plugins_lists_every_plugin_with_its_contributions(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = FakeEntryPoint("broken", dist="broken-dist", error=ImportError("no libfoo"))
    use_plugins(monkeypatch, FakeEntryPoint("tools", Tools(), dist="opgraph-tools"), broken)
    with pytest.warns(PluginWarning):
        assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert "2 plugins (1 loaded, 1 failed)" in out
    assert "tools  [loaded]  opgraph-tools 1.0  (entry point)" in out
    assert "linkers:" in out and "toolinker" in out
    assert "commands:" in out and "hello, ping" in out
    assert "broken  [FAILED]  broken-dist 1.0" in out
    assert "error:" in out and "ImportError: no libfoo" in out


def test_plugins_json(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    use_plugins(monkeypatch, FakeEntryPoint("tools", Tools(), dist="opgraph-tools"))
    assert main(["plugins", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (tools,) = report["plugins"]
    assert tools["distribution"] == "opgraph-tools"
    assert tools["linkers"] == ["toolinker"]


def test_plugins_reports_conflicts_and_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    use_plugins(
        monkeypatch,
        FakeEntryPoint("a", Tools(), dist="dist-a"),
        FakeEntryPoint("b", Tools(), dist="dist-b"),
    )
    assert main(["plugins"]) == 1
    out = capsys.readouterr().out
    assert "ERROR: dist-a and dist-b both provide linker 'toolinker'" in out
    # a conflicting command still exists, and says what is wrong when run
    assert main(["hello"]) == 2
    assert "dist-a and dist-b both provide command 'hello'" in capsys.readouterr().err


def test_config_prints_describe(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    use_plugins(monkeypatch)
    assert main(["config"]) == 0
    assert "floatX = 'float64'  (default)" in capsys.readouterr().out


def test_plugin_commands_are_subcommands(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    use_plugins(monkeypatch, FakeEntryPoint("tools", Tools()))
    assert main(["hello", "--who", "opgraph"]) == 3
    assert main(["ping"]) == 0
    assert capsys.readouterr().out == "hello opgraph\npong\n"
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "say hello" in out and "Answer pong." in out


def test_reserved_command_names_are_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class Hijack:
        @hookimpl
        def opgraph_commands(self) -> dict[str, Any]:
            return {"config": lambda args: print("hijacked")}

    use_plugins(monkeypatch, FakeEntryPoint("hijack", Hijack(), dist="hijack-dist"))
    assert main(["config"]) == 0
    captured = capsys.readouterr()
    assert "hijacked" not in captured.out
    assert "provides command 'config', which is opgraph's own" in captured.err


def test_version_and_no_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    use_plugins(monkeypatch)
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith("opgraph ")
    assert main([]) == 0
    assert "plugins" in capsys.readouterr().out


# ---- the real thing, in a subprocess, with a real (tiny) installed distribution


def _env(extra_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPGRAPH_")}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(extra_path)])
    return env


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A directory holding two 'installed' distributions declaring opgraph entry points."""
    (tmp_path / "cli_fake_plugin.py").write_text(
        textwrap.dedent(
            """
            from opgraph.plugins import hookimpl

            @hookimpl
            def opgraph_linkers():
                return {"fakelinker": object}
            """
        )
    )
    for dist, module in (("cli-fake-plugin", "cli_fake_plugin"), ("cli-broken", "cli_missing")):
        info = tmp_path / f"{dist.replace('-', '_')}-1.2.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.2\n")
        (info / "entry_points.txt").write_text(f"[opgraph]\n{module} = {module}\n")
    probe = subprocess.run(
        [sys.executable, "-c", "import opgraph"], env=_env(tmp_path), capture_output=True
    )
    if probe.returncode != 0:
        pytest.skip(f"`import opgraph` fails in a subprocess: {probe.stderr.decode()[-300:]}")
    return tmp_path


def test_subprocess_plugins_lists_installed_distributions(site: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "opgraph", "plugins"],
        env=_env(site),
        capture_output=True,
        text=True,
        cwd=site,
    )
    assert result.returncode == 0, result.stderr
    assert "cli_fake_plugin  [loaded]  cli-fake-plugin 1.2  (entry point)" in result.stdout
    assert "fakelinker" in result.stdout
    assert "cli_missing  [FAILED]  cli-broken 1.2" in result.stdout
    assert "plugin 'cli_missing' (dist cli-broken 1.2) failed to load" in result.stderr


def test_subprocess_strict_mode_and_autoload_off(site: Path) -> None:
    env = _env(site) | {"OPGRAPH_STRICT_PLUGINS": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "opgraph", "plugins"], env=env, capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "PluginError" in result.stderr and "cli_missing" in result.stderr

    env = _env(site) | {
        "OPGRAPH_DISABLE_PLUGIN_AUTOLOAD": "1",
        "OPGRAPH_PLUGINS": "cli_fake_plugin",
    }
    result = subprocess.run(
        [sys.executable, "-m", "opgraph", "plugins", "--json"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    status = {p["name"]: p["status"] for p in json.loads(result.stdout)["plugins"]}
    assert status["cli_fake_plugin"] == "loaded"
    assert status["cli_missing"] == "skipped"


def test_plugins_shows_each_plugins_state_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class Stateful:
        @hookimpl
        def opgraph_status(self) -> str:
            return "GPU unavailable: no driver (test)"

    class Broken:
        @hookimpl
        def opgraph_status(self) -> str:
            raise OSError("probe failed")

    use_plugins(
        monkeypatch,
        FakeEntryPoint("stateful", Stateful()),
        FakeEntryPoint("broken", Broken()),
        FakeEntryPoint("tools", Tools()),
    )
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert "GPU unavailable: no driver (test)" in out.split("stateful", 1)[1].split("broken")[0]
    assert "(its status hook failed: OSError: probe failed)" in out
    assert main(["plugins", "--json"]) == 0
    states = {p["name"]: p["state"] for p in json.loads(capsys.readouterr().out)["plugins"]}
    assert states["tools"] is None and states["stateful"].startswith("GPU unavailable")
