"""``local_cube_of_cube``: it fires where its tags say, can be left out, and reports itself."""

from __future__ import annotations

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from example_plugin import Cube, cube
from example_plugin.rewrites import local_cube_of_cube, rewrites
from opgraph.compile.mode import Mode
from opgraph.graph.fg import FunctionGraph
from opgraph.printing import debugprint
from opgraph.rewriting import OPT_FAST_RUN, make_optdb
from opgraph.testing import assert_allclose


def cubes_in(f: object) -> int:
    """How many Cube nodes the compiled function ``f`` runs."""
    return sum(isinstance(n.op, Cube) for n in f.maker.fgraph.toposort())  # type: ignore[attr-defined]


def test_the_rewrite_alone_on_a_fresh_database() -> None:
    """Structure: one set installed into a fresh optdb (no other plugin's rewrites)."""
    optdb = make_optdb()
    rewrites.install(optdb)
    x = T.dvector("x")
    fgraph = FunctionGraph([x], [cube(cube(x))])
    optdb.query(OPT_FAST_RUN).rewrite(fgraph)
    assert not any(isinstance(n.op, Cube) for n in fgraph.apply_nodes)
    f = opgraph.function(fgraph.inputs, fgraph.outputs[0], mode=Mode(linker="py", optimizer="None"))
    assert_allclose(f(np.array([1.1, -0.5])), np.array([1.1, -0.5]) ** 9)


def test_the_rewrite_leaves_a_single_cube_alone() -> None:
    x = T.dvector("x")
    node = cube(x).owner
    assert local_cube_of_cube.transform(None, node) is None


@pytest.mark.parametrize("mode", ["FAST_RUN", "FAST_COMPILE"])
def test_fires_in_the_modes_its_tags_select(mode: str) -> None:
    x = T.dvector("x")
    f = opgraph.function([x], cube(cube(x)), mode=mode)
    assert cubes_in(f) == 0
    value = np.array([1.0, -2.0, 0.5])
    assert_allclose(f(value), value**9)


@pytest.mark.parametrize("handle", ["local_cube_of_cube", "example"])
def test_users_leave_it_out_by_name_or_by_tag(handle: str) -> None:
    x = T.dvector("x")
    g = opgraph.function([x], cube(cube(x)), mode=Mode(optimizer="fast_run").excluding(handle))
    assert cubes_in(g) == 2
    value = np.array([1.0, -2.0, 0.5])
    assert_allclose(g(value), value**9)


def test_the_flag_optimizer_excluding_leaves_it_out_of_the_default_mode() -> None:
    x = T.dvector("x")
    with opgraph.config.change_flags(optimizer_excluding="local_cube_of_cube"):
        f = opgraph.function([x], cube(cube(x)))
    assert cubes_in(f) == 2


def test_rewrite_report_and_debugprint_show_that_it_fired() -> None:
    x = T.dvector("x")
    f = opgraph.function([x], cube(cube(x)), mode="FAST_RUN")
    report = f.maker.rewrite_report()
    (row,) = [line for line in report.splitlines() if line.startswith("local_cube_of_cube")]
    assert row.split()[1] == "1"  # applied once
    assert "example_plugin/rewrites.py:" in row  # where the rewrite is defined
    text = debugprint(f, file="str", print_rewrites=True)
    assert "local_cube_of_cube (example_plugin/rewrites.py:" in text
