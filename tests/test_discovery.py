"""Plugins are discovered through their entry points in a fresh environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.needs_example_plugin


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "opgraph", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
        check=False,
    )


def test_plugins_lists_example_plugin_and_its_contributions() -> None:
    proc = run_cli("plugins")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "opgraph.compile.builtin" in out
    assert "example  [loaded]  opgraph-example-plugin 0.1.0" in out
    assert "linkers:      example" in out
    assert "canonicalize/local_cube_of_cube" in out
    assert "example__verbose" in out


def test_plugins_json_report() -> None:
    proc = run_cli("plugins", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    by_name = {p["name"]: p for p in report["plugins"]}
    assert by_name["example"]["status"] == "loaded"
    assert by_name["example"]["distribution"] == "opgraph-example-plugin"
    assert "example" in by_name["example"]["linkers"]
    assert by_name["example"]["rewrites"] == ["canonicalize/local_cube_of_cube"]
    assert report["best_linker"]


def test_autoload_off_hides_entry_points_unless_requested() -> None:
    off = run_cli("plugins", "--json", env={"OPGRAPH_DISABLE_PLUGIN_AUTOLOAD": "1"})
    status = {p["name"]: p["status"] for p in json.loads(off.stdout)["plugins"]}
    assert status.get("example", "skipped") == "skipped"
    requested = run_cli(
        "plugins",
        "--json",
        env={"OPGRAPH_DISABLE_PLUGIN_AUTOLOAD": "1", "OPGRAPH_PLUGINS": "example"},
    )
    status = {p["name"]: p["status"] for p in json.loads(requested.stdout)["plugins"]}
    assert status["example"] == "loaded"


def test_plugin_flag_settable_from_environment() -> None:
    code = "import opgraph; print(opgraph.config.example__verbose)"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "OPGRAPH_FLAGS": "example__verbose=True"},
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"


def test_unknown_flag_is_a_clear_error() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "import opgraph"],
        capture_output=True,
        text=True,
        env={**os.environ, "OPGRAPH_FLAGS": "floatx=float32"},
        timeout=120,
        check=False,
    )
    assert proc.returncode != 0
    assert "Unknown opgraph flag 'floatx'" in proc.stderr
    assert "floatX" in proc.stderr
