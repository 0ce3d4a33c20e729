"""Modes by name, linkers by name, queries, config defaults; every mode x linker computes."""

from __future__ import annotations

import numpy as np
import pytest
from compile_toys import LINKERS, MODES, mode_with

import opgraph.tensor as T
from opgraph.compile import function, shared
from opgraph.compile.debugmode import DebugMode
from opgraph.compile.mode import Mode, get_mode, resolve_linker
from opgraph.compile.nanguardmode import NanGuardMode
from opgraph.configdefaults import config
from opgraph.link.basic import PerformLinker, VMLinker
from opgraph.rewriting import RewriteDatabaseQuery


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("name", MODES)
def test_every_mode_and_linker_computes_outputs_and_updates(name: str, linker: str) -> None:
    x = T.dvector("x")
    s = shared(np.zeros(3), name="s")
    f = function(
        [x], [x * 2, T.exp(x).sum(), -x], updates=[(s, s + x)], mode=mode_with(name, linker)
    )
    a = np.array([0.5, 1.0, 2.0])
    double, total, neg = f(a)
    np.testing.assert_allclose(double, a * 2)
    np.testing.assert_allclose(total, np.exp(a).sum())
    np.testing.assert_allclose(neg, -a)
    f(a)
    np.testing.assert_allclose(s.get_value(), 2 * a)
    assert (f.profile is not None) == (name == "PROFILE_MODE")


@pytest.mark.parametrize("name", [*MODES, "DebugMode", "NanGuardMode", "Mode"])
def test_modes_by_name(name: str) -> None:
    mode = get_mode(name)
    assert isinstance(mode, Mode)
    x = T.dscalar("x")
    assert function([x], x + 1, mode=name)(1.0) == 2.0


def test_predefined_mode_classes() -> None:
    assert isinstance(get_mode("DEBUG_MODE"), DebugMode)
    assert isinstance(get_mode("NanGuardMode"), NanGuardMode)
    assert get_mode("PROFILE_MODE").profile
    assert get_mode("FAST_COMPILE").provided_linker == "vm"


def test_unknown_mode_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"(?s)unknown mode 'FAST_WALK'.*FAST_RUN"):
        get_mode("FAST_WALK")


def test_linkers_by_name() -> None:
    assert isinstance(resolve_linker("py"), PerformLinker)
    assert isinstance(resolve_linker("vm"), VMLinker)
    assert isinstance(resolve_linker("auto"), VMLinker)  # vm, or a backend's VM subclass
    assert resolve_linker("vm_nogc").allow_gc is False
    linker = VMLinker()
    assert resolve_linker(linker) is linker
    with pytest.raises(ValueError, match=r"(?s)unknown linker .nosuch.*Known linkers are"):
        resolve_linker("nosuch")


def test_mode_linker_and_optimizer_attributes() -> None:
    mode = Mode(linker="py", optimizer="fast_compile")
    assert isinstance(mode.linker, PerformLinker)
    assert isinstance(mode.optimizer, RewriteDatabaseQuery)
    assert "fast_compile" in mode.optimizer.include
    assert str(mode) == "Mode(linker=py, optimizer=fast_compile)"


def test_including_excluding_requiring_return_new_modes() -> None:
    base = get_mode("FAST_RUN")
    ex = base.excluding("fusion", "inplace")
    inc = base.including("unsafe")
    req = base.requiring("fast_run")
    assert ex is not base and {"fusion", "inplace"} <= ex.optimizer.exclude
    assert "unsafe" in inc.optimizer.include and "fusion" not in base.optimizer.exclude
    assert "fast_run" in req.optimizer.require
    x = T.dscalar("x")
    assert function([x], x * 3, mode=ex)(2.0) == 6.0


def test_optimizer_none_runs_no_rewrites() -> None:
    x = T.dscalar("x")
    f = function([x], x * 1, mode=Mode("py", None))
    assert f.maker.rewrite_report() == "Rewrites: none ran on this graph."
    assert f(3.0) == 3.0


def test_default_mode_follows_config_and_its_query_flags() -> None:
    with config.change_flags(mode="FAST_COMPILE"):
        assert get_mode(None).provided_optimizer == "fast_compile"
    with config.change_flags(mode="Mode", linker="py", optimizer="merge"):
        mode = get_mode(None)
        assert isinstance(mode.linker, PerformLinker)
        assert "merge" in mode.optimizer.include
    with config.change_flags(mode="Mode", optimizer_excluding="fusion:inplace"):
        assert {"fusion", "inplace"} <= get_mode(None).optimizer.exclude
        assert "fusion" not in get_mode("FAST_RUN").optimizer.exclude


def test_profile_true_and_config_profile() -> None:
    from opgraph.compile import profiling

    x = T.dscalar("x")
    assert function([x], x, profile=True).profile is not None
    assert function([x], x).profile is None
    with config.change_flags(profile=True):
        f = function([x], x)
    assert f.profile is not None and f.profile in profiling._atexit_list
    profiling._atexit_list.remove(f.profile)  # keep the test run's exit quiet


def test_mode_pickles_by_its_arguments() -> None:
    import pickle

    mode = get_mode("FAST_RUN").excluding("fusion")
    copy = pickle.loads(pickle.dumps(mode))
    assert copy.optimizer == mode.optimizer
    assert type(copy.linker) is type(mode.linker)
