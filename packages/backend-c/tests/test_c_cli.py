"""``python -m opgraph cache info|clear|prune`` and backend-c in ``python -m opgraph plugins``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opgraph_c import CModule
from opgraph_c.cache import KernelCache


def opgraph_cli(run_python: Any, cache_dir: Path, *args: str) -> Any:
    code = f"import sys\nfrom opgraph.__main__ import main\nsys.exit(main({list(args)!r}))\n"
    return run_python(code, cache_dir)


def test_cache_info_clear_prune(run_python: Any, tmp_path: Path) -> None:
    KernelCache(tmp_path / "c").load(
        CModule("cli kernel", "# cython: language_level=3\ndef compute(x):\n    return x\n")
    )
    info = opgraph_cli(run_python, tmp_path, "cache", "info", "--list")
    assert info.returncode == 0, info.stderr
    assert str(tmp_path / "c") in info.stdout
    assert "holds: 1 C kernel in 1 module" in info.stdout and "cli kernel" in info.stdout
    as_json = json.loads(opgraph_cli(run_python, tmp_path, "cache", "info", "--json").stdout)
    assert as_json["kernels"] == as_json["modules"] == 1 and as_json["bytes"] > 0
    pruned = opgraph_cli(run_python, tmp_path, "cache", "prune", "--days", "30")
    assert pruned.returncode == 0 and "pruned 0 C kernels in 0 modules" in pruned.stdout
    cleared = opgraph_cli(run_python, tmp_path, "cache", "clear")
    assert cleared.returncode == 0 and "removed 1 C kernel in 1 module" in cleared.stdout
    info = opgraph_cli(run_python, tmp_path, "cache", "info").stdout
    assert "holds: 0 C kernels in 0 modules" in info


def test_plugins_listing_shows_the_c_linker(run_python: Any, tmp_path: Path) -> None:
    proc = opgraph_cli(run_python, tmp_path, "plugins", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["best_linker"] == "cvm"
    (ours,) = [p for p in report["plugins"] if p["distribution"] == "opgraph-backend-c"]
    assert set(ours["linkers"]) == {"c", "cvm", "c|py"}
    assert "opgraph_c_kernels" in ours["hookspecs"]
    assert "c__openmp_threshold" in ours["config_flags"]
