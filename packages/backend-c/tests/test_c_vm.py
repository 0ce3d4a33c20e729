"""The ``c`` linker and its precompiled VM: registration, fallback, gc, laziness, errors."""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.compile.mode import Mode, get_mode
from opgraph.compile.ops import as_op
from opgraph.compile.sharedvalue import shared
from opgraph.graph.basic import Apply
from opgraph.graph.op import Op
from opgraph.ifelse import ifelse
from opgraph.link.dispatch import KernelFallbackWarning
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
    class Product(Op):  # an Op no backend has a kernel for
        __props__ = ()

        def make_node(self, a, b):  # type: ignore[no-untyped-def]
            return Apply(self, [a, b], [a.type()])

        def perform(self, node, inputs, out):  # type: ignore[no-untyped-def]
            out[0][0] = inputs[0] @ inputs[1]

    @as_op(itypes=[T.dmatrix], otypes=[T.dmatrix])
    def double(a):  # a user's Python function: perform on purpose, no mark
        return 2 * a

    a, b = T.dmatrix("a"), T.dmatrix("b")
    with pytest.warns(KernelFallbackWarning, match="no kernel for Product"):
        f = function([a, b], double(T.exp(Product()(a, b))), mode=Mode(linker="c"), profile=True)
    av, bv = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    assert_allclose(f(av, bv), 2 * np.exp(av @ bv))
    profile = f.profile
    impls = {type(n.op).__name__: impl for n, impl in profile.apply_impl.items()}
    assert impls == {"Elemwise": "c", "Product": "Py", "FromFunctionOp": "Py"}
    assert [type(n.op).__name__ for n in profile.py_fallback] == ["Product"]


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
    from opgraph_c import pipeline

    pipeline._compiler_warned = False
    x = T.dvector("x")
    with (
        config.change_flags(c__cc="no-such-compiler-opgraph"),
        pytest.warns(KernelFallbackWarning, match="no-such-compiler-opgraph"),
    ):
        f = function([x], T.exp(x) + 1, mode=Mode(linker="c"))
    xv = rng.standard_normal(3)
    assert_allclose(f(xv), np.exp(xv) + 1)
    assert all(getattr(t, "py_fallback", False) for t in f.fn.thunks)


# ---------------------------------------------------------------------- buffers kept between calls


def _cells_by_op(f: Any) -> dict[str, list[Any]]:
    return {str(v.owner.op): f.fn.storage_map[v] for v in f.fn.storage_map if v.owner is not None}


def test_reuse_flags_follow_no_recycling_and_borrow() -> None:
    from opgraph_c.linker import REUSE_HELD, REUSE_NEVER, REUSE_UNSHARED

    x = T.dvector("x")
    mid = T.exp(x)
    f = function(
        [x],
        [T.sin(mid), opgraph.Out(T.cos(mid), borrow=True)],
        mode=Mode(linker="c_nogc", optimizer="None"),
    )
    flags = {str(n.op): t.output_reuse for n, t in zip(f.fn.nodes, f.fn.thunks)}
    assert flags["Elemwise{exp,no_inplace}"] == (REUSE_UNSHARED,)
    assert flags["Elemwise{sin,no_inplace}"] == (REUSE_NEVER,)
    assert flags["Elemwise{cos,no_inplace}"] == (REUSE_HELD,)
    assert f.fn.runner is not None


def test_without_gc_intermediate_buffers_are_reused(rng: np.random.Generator) -> None:
    x = T.dvector("x")
    f = function([x], T.log(T.exp(x) + 1), mode=Mode(linker="c_nogc", optimizer="None"))
    xv = rng.standard_normal(5)
    out1 = f(xv)
    exp_cell = _cells_by_op(f)["Elemwise{exp,no_inplace}"]
    kept = weakref.ref(exp_cell[0])  # a strong reference would forbid the reuse
    out2 = f(xv * 2)
    assert exp_cell[0] is kept()  # written in place on the second call
    assert_allclose(exp_cell[0], np.exp(xv * 2))
    assert out2 is not out1
    assert_allclose(out1, np.log(np.exp(xv) + 1))
    assert_allclose(out2, np.log(np.exp(xv * 2) + 1))
    f(rng.standard_normal(7))  # another shape: a new buffer
    assert kept() is None and exp_cell[0].shape == (7,)


def test_an_intermediate_held_elsewhere_is_not_overwritten(rng: np.random.Generator) -> None:
    x = T.dvector("x")
    f = function([x], T.log(T.exp(x) + 1), mode=Mode(linker="c_nogc", optimizer="None"))
    xv = rng.standard_normal(4)
    f(xv)
    held = _cells_by_op(f)["Elemwise{exp,no_inplace}"][0]  # a second reference
    f(xv + 1)
    assert_allclose(held, np.exp(xv))
    f.free()
    assert all(cell[0] is None for cell in _cells_by_op(f).values())
    assert_allclose(f(xv), np.log(np.exp(xv) + 1))


def test_with_gc_every_call_gets_fresh_buffers(rng: np.random.Generator) -> None:
    x = T.dvector("x")
    f = function([x], T.log(T.exp(x) + 1), mode=Mode(linker="c", optimizer="None"))
    f(rng.standard_normal(4))
    assert all(cell[0] is None for cell in _cells_by_op(f).values())
