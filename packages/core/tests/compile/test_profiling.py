"""ProfileStats: the summary's sections, call counts, shared stats, [py-fallback] marks."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from compile_toys import Counted, Double

import opgraph.tensor as T
from opgraph.compile import function
from opgraph.compile.mode import Mode
from opgraph.compile.profiling import ProfileStats
from opgraph.link.basic import VMLinker
from opgraph.link.dispatch import KernelFallbackWarning, KernelRegistry


def _summary(stats: ProfileStats) -> str:
    out = io.StringIO()
    stats.summary(file=out)
    return out.getvalue()


def test_summary_has_theanos_sections_and_counts() -> None:
    x = T.dvector("x")
    f = function([x], (x * 2).sum(), profile=True, name="prof", mode=Mode("vm", None))
    for _ in range(3):
        f(np.ones(4))
    text = _summary(f.profile)
    for line in (
        "Function profiling",
        "  Message: prof",
        "  Time in 3 calls to Function.__call__:",
        "  Time in Function.fn.__call__:",
        "  Time in thunks:",
        "  Total compile time:",
        "    Number of Apply nodes: 3",
        "    Rewriter time:",
        "    Linker time",
        "Class\n---",
        "Ops\n---",
        "Apply\n---",
        "<% time> <sum %> <apply time> <time per call> <type> <#call> <#apply> <Class name>",
        "<% time> <sum %> <apply time> <time per call> <type> <#call> <#apply> <Op name>",
        "<% time> <sum %> <apply time> <time per call> <#call> <id> <Apply name>",
    ):
        assert line in text, line
    row = next(ln for ln in text.splitlines() if ln.endswith("Sum{acc_dtype=float64}"))
    assert re.search(r"\bPy\s+3\s+1\s+Sum", row), row
    assert f.profile.fct_callcount == 3
    assert all(n == 3 for n in f.profile.apply_callcount.values())


def test_a_shared_profile_adds_up_several_functions() -> None:
    stats = ProfileStats(message="shared")
    x = T.dvector("x")
    f = function([x], x * 2, profile=stats, mode=Mode("vm", None))
    g = function([x], x + 1, profile=stats, mode=Mode("vm", None))
    f([1.0])
    g([1.0])
    g([1.0])
    assert stats.fct_callcount == 3
    assert stats.nb_nodes == 4
    assert "Time in 3 calls" in _summary(stats)


def test_profile_mode_and_a_never_called_function() -> None:
    x = T.dvector("x")
    f = function([x], x * 2, mode="PROFILE_MODE")
    assert "never called" in _summary(f.profile)


def test_fallback_nodes_are_marked_when_a_kernel_registry_is_used() -> None:
    reg = KernelRegistry("toy")
    reg.register(Double, lambda op, node: lambda x: 2 * x)
    x = T.dvector("x")
    mode = Mode(VMLinker(kernels=reg), "fast_run")
    with pytest.warns(KernelFallbackWarning):
        f = function([x], Counted()(Double()(x)), mode=mode, profile=True)
    f([1.0])
    text = _summary(f.profile)
    assert re.search(r"Counted\(Double\.0\) \[py-fallback\]", text)
    assert "Double(x) [py-fallback]" not in text
    assert re.search(r"\btoy\s+1\s+1\s+Double$", text, re.M)
    assert "[py-fallback]: 1 node(s)" in text


def test_lazy_graphs_count_only_the_nodes_that_ran() -> None:
    from compile_toys import ifelse

    c, x = T.dscalar("c"), T.dvector("x")
    f = function([c, x], ifelse(c, x * 2, x * 3), profile=True, mode=Mode("vm", None))
    f(1.0, [1.0])
    assert sorted(f.profile.apply_callcount.values()) == [0, 0, 1, 1, 1]
