"""The example third-party plugin works end to end: its Op, its rewrite and its linker."""

from __future__ import annotations

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.mode import Mode
from opgraph.testing import ALL_MODES, assert_allclose, verify_grad

example_plugin = pytest.importorskip("example_plugin")
pytestmark = pytest.mark.needs_example_plugin

cube = example_plugin.cube
Cube = example_plugin.Cube


@pytest.mark.parametrize("mode", [*ALL_MODES, Mode(linker="example"), Mode(linker="py")])
def test_cube_runs_in_every_mode(mode: object) -> None:
    x = T.dvector("x")
    f = opgraph.function([x], cube(x), mode=mode)
    value = np.array([-2.0, 0.5, 3.0])
    assert_allclose(f(value), value**3)


def test_cube_gradient() -> None:
    verify_grad(cube, [np.array([0.3, -1.2, 2.0])], rng=np.random.default_rng(0))


def test_rewrite_applies_in_fast_run_and_can_be_excluded() -> None:
    x = T.dvector("x")
    y = cube(cube(x))
    value = np.array([1.0, -2.0, 0.5])
    f = opgraph.function([x], y, mode="FAST_RUN")
    assert not any(isinstance(n.op, Cube) for n in f.maker.fgraph.toposort())
    assert_allclose(f(value), value**9)

    g = opgraph.function([x], y, mode=Mode(optimizer="fast_run").excluding("local_cube_of_cube"))
    assert sum(isinstance(n.op, Cube) for n in g.maker.fgraph.toposort()) == 2
    assert_allclose(g(value), value**9)


def test_rewrite_is_recorded_in_provenance() -> None:
    x = T.dvector("x")
    f = opgraph.function([x], cube(cube(x)), mode="FAST_RUN")
    text = opgraph.printing.debugprint(f, file="str", print_rewrites=True)
    assert "local_cube_of_cube" in text
    report = f.maker.rewrite_report()
    assert "local_cube_of_cube" in report


def test_example_linker_uses_its_kernel() -> None:
    from example_plugin.linker import kernels

    x = T.dvector("x")
    f = opgraph.function([x], cube(x), mode=Mode(linker="example"))
    assert_allclose(f(np.array([2.0])), np.array([8.0]))
    assert kernels.lookup(Cube) is not None


def test_cube_rejects_integer_input() -> None:
    with pytest.raises(TypeError, match="cube needs a float tensor"):
        cube(T.ivector("i"))
