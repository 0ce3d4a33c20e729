"""Core's own plugin: linkers, linker preference, named modes, shared constructors."""

from __future__ import annotations

import numpy as np

from opgraph.compile import builtin
from opgraph.compile.mode import Mode
from opgraph.link.basic import PerformLinker, VMLinker
from opgraph.plugins import get_plugin_manager


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


def test_core_registers_its_builtin_plugin_from_above() -> None:
    # The plugin manager (below the compile layer) does not name it: opgraph/__init__ adds it.
    from opgraph.plugins import BUILTIN_PLUGINS

    assert BUILTIN_PLUGINS == ["opgraph.compile.builtin"]
    assert builtin in get_plugin_manager().get_plugins()


def test_the_tensor_library_gives_shared_its_constructors() -> None:
    from opgraph.compile.sharedvalue import _CORE_CONSTRUCTORS
    from opgraph.tensor.sharedvar import tensor_shared_constructor

    assert (tensor_shared_constructor, True) in _CORE_CONSTRUCTORS
