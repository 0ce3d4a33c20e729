"""Core's own plugin: linkers, linker preference, named modes, shared constructors."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from opgraph.compile.mode import Mode
from opgraph.link.basic import PerformLinker
from opgraph.link.vm import VMLinker
from opgraph.plugins import builtin, get_plugin_manager


def test_hooks_return_core_linkers_modes_and_preference() -> None:
    linkers = builtin.opgraph_linkers()
    assert set(linkers) == {"py", "vm"}
    assert isinstance(linkers["py"](), PerformLinker)
    assert isinstance(linkers["vm"](), VMLinker)
    assert builtin.opgraph_linker_preference() == [(0, "vm")]
    modes = builtin.opgraph_modes()
    assert {
        "FAST_RUN",
        "FAST_COMPILE",
        "DEBUG_MODE",
        "DebugMode",
        "PROFILE_MODE",
        "NanGuardMode",
    } <= set(modes)
    assert all(isinstance(factory(), Mode) for factory in modes.values())


def test_the_plugin_manager_serves_core() -> None:
    pm = get_plugin_manager()
    assert {"py", "vm"} <= set(pm.linkers())
    # Core prefers its vm; an installed backend (opgraph-backend-c) may prefer its own.
    core_pref = dict((name, prio) for prio, name, _ in pm.linker_preference())
    assert core_pref["vm"] == 0
    assert pm.best_linker() in pm.linkers()
    assert "FAST_RUN" in pm.modes()
    var = pm.shared_constructor(
        value=np.zeros(2), name="z", strict=False, allow_downcast=None, borrow=False
    )
    assert var is not None and var.name == "z"


def test_the_builtin_plugin_imports_nothing_heavy_at_module_level() -> None:
    tree = ast.parse(Path(builtin.__file__).read_text(encoding="utf-8"))
    top = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom):
            top.add(stmt.module)
        elif isinstance(stmt, ast.Import):
            top.update(alias.name for alias in stmt.names)
    assert top <= {"__future__", "collections.abc", "typing", "opgraph.plugins.manager"}, top
