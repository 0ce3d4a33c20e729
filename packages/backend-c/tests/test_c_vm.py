"""The ``c`` linker and its precompiled VM: registration, fallback, gc, laziness, errors."""

from __future__ import annotations

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.compile.mode import Mode, get_mode
from opgraph.compile.ops import as_op
from opgraph.compile.sharedvalue import shared
from opgraph.ifelse import ifelse
from opgraph.plugins import get_plugin_manager
from opgraph.testing import assert_allclose, check_modes


def test_linkers_registered_and_preferred() -> None:
    pm = get_plugin_manager()
    assert {"c", "cvm", "c|py"} <= set(pm.linkers())
    assert pm.best_linker() == "cvm"
    x = T.dvector("x")
    f = function([x], T.exp(x) * 2, mode=get_mode("FAST_RUN"))
    assert type(f.maker.linker).__name__ == "CLinker"
    assert type(f.fn).__name__ == "CVM"


def test_check_modes_with_c_linker(rng: np.random.Generator) -> None:
    x, y = T.dmatrix("x"), T.drow("y")
    out = T.tanh(x * y) + T.sum(x, axis=0) ** 2
    xv, yv = rng.standard_normal((4, 3)), rng.standard_normal((1, 3))
    expected = np.tanh(xv * yv) + xv.sum(axis=0) ** 2
    check_modes([x, y], out, [xv, yv], expected, linkers=["c", "cvm", "c|py"])


def test_nodes_without_kernel_run_perform_and_are_marked(rng: np.random.Generator) -> None:
    a, b = T.dmatrix("a"), T.dmatrix("b")
    f = function([a, b], T.exp(T.dot(a, b)), mode=Mode(linker="c"), profile=True)
    av, bv = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    assert_allclose(f(av, bv), np.exp(av @ bv))
    profile = f.profile
    impls = {type(n.op).__name__: impl for n, impl in profile.apply_impl.items()}
    assert impls["Elemwise"] == "c"
    assert [type(n.op).__name__ for n in profile.py_fallback] == ["Dot22"]


def test_allow_gc_frees_intermediates(rng: np.random.Generator) -> None:
    x = T.dvector("x")
    mid = T.exp(x) + T.dot(x, x)  # a Dot (perform) between two C nodes
    out = T.log(mid)
    for gc in (True, False):
        f = function([x], out, mode=Mode(linker=f"c{'' if gc else '_nogc'}", optimizer="None"))
        f(rng.standard_normal(5))
        inner = [
            cell
            for v, cell in f.fn.storage_map.items()
            if v.owner is not None and v not in f.maker.fgraph.outputs
        ]
        assert inner
        assert all(cell[0] is None for cell in inner) == gc


def test_lazy_ifelse_runs_only_the_taken_branch() -> None:
    calls = {"left": 0, "right": 0}

    def counted(name: str):
        @as_op(itypes=[T.dvector], otypes=[T.dvector])
        def op(x):
            calls[name] += 1
            return x * (2 if name == "left" else 3)

        return op

    c, x = T.dscalar("c"), T.dvector("x")
    out = ifelse(T.gt(c, 0), counted("left")(T.exp(x)), counted("right")(T.sin(x)))
    f = function([c, x], out * 1, mode=Mode(linker="c"))
    assert type(f.fn.runner).__name__ == "CStack"
    xv = np.arange(3.0)
    assert_allclose(f(1.0, xv), np.exp(xv) * 2)
    assert calls == {"left": 1, "right": 0}
    assert_allclose(f(-1.0, xv), np.sin(xv) * 3)
    assert calls == {"left": 1, "right": 1}


def test_updates_and_shared_variables() -> None:
    w = shared(np.zeros(3), name="w")
    x = T.dvector("x")
    step = function([x], T.sum(w), updates=[(w, w + T.exp(x))], mode=Mode(linker="c"))
    for _ in range(3):
        step(np.zeros(3))
    assert_allclose(w.get_value(), np.full(3, 3.0))


def test_bad_inputs_give_the_python_linkers_errors() -> None:
    x = T.fvector("x")
    for linker in ("py", "c"):
        f = function([x], T.exp(x), mode=Mode(linker=linker))
        with pytest.raises(TypeError, match="float32"):
            f(np.ones(3, dtype="float64"))
        with pytest.raises(TypeError):
            f(np.ones((2, 2), dtype="float32"))
    f = function([x], T.exp(x), mode=Mode(linker="c"))
    assert np.isnan(f(np.array([np.nan], dtype="float32"))[0])


def test_trust_input_and_repeated_calls(rng: np.random.Generator) -> None:
    x = T.dvector("x")
    f = function([x], x + 1, mode=Mode(linker="c"))
    f.trust_input = True
    xv = rng.standard_normal(4)
    first = f(xv)
    second = f(xv)
    assert first is not second  # outputs handed to the user are never overwritten
    assert_allclose(first, xv + 1)


def test_debug_mode_compares_c_kernels_with_perform(rng: np.random.Generator) -> None:
    from opgraph.compile.debugmode import DebugMode

    x = T.dvector("x")
    f = function([x], T.exp(-(x**2)) * T.sin(x), mode=DebugMode(linker="c"))
    xv = rng.standard_normal(6)
    assert_allclose(f(xv), np.exp(-(xv**2)) * np.sin(xv))
    assert f.maker.linker.kernels is not None and f.maker.linker.backend == "c"


def test_opgraph_namespace_still_works_like_theano() -> None:
    x = opgraph.tensor.dmatrix("x")
    f = opgraph.function([x], (x * 2).sum(axis=1))
    assert_allclose(f(np.ones((2, 3))), [6.0, 6.0])


def test_missing_compiler_warns_and_runs_perform(rng: np.random.Generator) -> None:
    from opgraph.configdefaults import config
    from opgraph.link.dispatch import KernelFallbackWarning
    from opgraph_c import registry

    registry._warned.discard(("compiler", ""))
    x = T.dvector("x")
    with (
        config.change_flags(c__cc="no-such-compiler-opgraph"),
        pytest.warns(KernelFallbackWarning, match="no-such-compiler-opgraph"),
    ):
        f = function([x], T.exp(x) + 1, mode=Mode(linker="c"))
    xv = rng.standard_normal(3)
    assert_allclose(f(xv), np.exp(xv) + 1)
    assert all(getattr(t, "py_fallback", False) for t in f.fn.thunks)
