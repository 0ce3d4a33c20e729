"""Messages that say what happened (issue 12, part 4), core's side: where a rewrite is
defined, wrapped ``python -m opgraph plugins`` listings, ``linker=auto`` said one way, the
one-time warning when FAST_RUN runs without opgraph-optimizers, and the elementwise
shape-mismatch error naming its inputs with the user's line right after."""

from __future__ import annotations

import inspect
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.__main__ import format_report, main
from opgraph.compile import mode as mode_module
from opgraph.compile.function import function
from opgraph.compile.mode import (
    AUTO_LINKER_MEANING,
    FAST_RUN,
    Mode,
    OptimizersMissingWarning,
    describe_linker,
    resolve_linker,
)
from opgraph.configdefaults import config
from opgraph.graph.basic import Apply
from opgraph.graph.fg import FunctionGraph
from opgraph.plugins import get_plugin_manager
from opgraph.rewriting import EquilibriumDB, SequenceDB, node_rewriter, rewrite_report

HERE = Path(__file__).name

# ----------------------------------------------------------------------------------------
# rewrite locations: the rewrite's own source line


NEG = T.neg(T.dvector()).owner.op


@node_rewriter(None)
def local_msg_double_neg(fgraph: Any, node: Apply) -> Any:
    """``-(-x) -> x`` (a rewrite of this test file: its location must point here)."""
    inner = node.inputs[0].owner if node.op == NEG else None
    if inner is not None and inner.op == NEG:
        return [inner.inputs[0]]
    return None


OWN_LINE = f"{HERE}:{inspect.getsourcelines(local_msg_double_neg.fn)[1]}"


def _double_neg_graph() -> FunctionGraph:
    x = T.dvector("x")
    return FunctionGraph([x], [T.neg(T.neg(x)) * 2], clone=False)


def test_a_node_rewriter_run_by_a_sequence_reports_its_own_line() -> None:
    db = SequenceDB("msg_seq")
    db.register("local_msg_double_neg", local_msg_double_neg, "fast_run")
    seq = db.query("fast_run")  # wraps the node rewriter in a walker here, inside opgraph
    (walker,) = seq.rewriters
    assert walker.location.endswith(OWN_LINE), walker.location
    fgraph = _double_neg_graph()
    seq.rewrite(fgraph)
    rows = [ln for ln in rewrite_report(fgraph).splitlines() if "local_msg_double_neg" in ln]
    assert rows and all(row.rstrip().endswith(OWN_LINE) for row in rows), rows


def test_a_final_rewriter_of_an_equilibrium_reports_its_own_line() -> None:
    db = EquilibriumDB("msg_eq")
    db.register("local_msg_double_neg", local_msg_double_neg, "fast_run", final_rewriter=True)
    eq = db.query("fast_run")
    (walker,) = eq.final_rewriters
    assert walker.location.endswith(OWN_LINE), walker.location
    assert "compile/mode.py" not in walker.location and "rewriting/" not in walker.location


# ----------------------------------------------------------------------------------------
# python -m opgraph plugins: wrapped, long lists summarized


def _fake_report(n_rewrites: int) -> dict[str, Any]:
    rewrites = [
        f"{stage}/local_a_rather_long_rewrite_name_number_{k}"
        for k, stage in zip(range(n_rewrites), ["canonicalize", "stabilize", "specialize"] * 999)
    ]
    plugin = {
        "name": "many",
        "source": "entry point",
        "module": "many.plugin",
        "distribution": "opgraph-many",
        "version": "1.0",
        "status": "loaded",
        "error": None,
        "reason": None,
        "hooks": [f"opgraph_hook_number_{k}" for k in range(9)],
        "hookspecs": [],
        "config_flags": [],
        "linkers": ["many"],
        "modes": [],
        "namespaces": {},
        "commands": [],
        "linker_preference": [],
        "rewrites": rewrites,
    }
    return {
        "autoload": True,
        "requested": [],
        "strict": False,
        "best_linker": "vm",
        "auto_linker": "auto -> vm (VMLinker)",
        "conflicts": [],
        "plugins": [plugin],
    }


def test_a_long_rewrite_list_is_counted_by_stage_and_wrapped() -> None:
    text = format_report(_fake_report(150), width=100)
    assert max(len(line) for line in text.splitlines()) <= 100
    (row,) = [i for i, ln in enumerate(text.splitlines()) if ln.lstrip().startswith("rewrites:")]
    block = " ".join(ln.strip() for ln in text.splitlines()[row : row + 3])
    assert "rewrites: 150 in 3 stages: canonicalize 50, stabilize 50, specialize 50" in block
    assert "(python -m opgraph plugins --all lists each, --json too)" in block
    assert "local_a_rather_long_rewrite_name_number_7" not in text
    # the hooks (9 of them) are listed, wrapped in the column after their label
    hooks = [ln for ln in text.splitlines() if "opgraph_hook_number_" in ln]
    column = hooks[0].index("opgraph_hook_number_0")
    assert len(hooks) > 1 and all(len(h) - len(h.lstrip()) == column for h in hooks[1:])


def test_all_lists_every_rewrite_wrapped() -> None:
    text = format_report(_fake_report(150), width=80, show_all=True)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert all(f"number_{k}," in text or f"number_{k}\n" in text for k in range(149))


def test_the_real_listing_fits_100_columns(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins"]) in (0, 1)
    out = capsys.readouterr().out  # not a terminal: 100 columns
    assert max(len(line) for line in out.splitlines()) <= 100
    assert main(["plugins", "--all"]) in (0, 1)
    assert max(len(line) for line in capsys.readouterr().out.splitlines()) <= 100


# ----------------------------------------------------------------------------------------
# linker=auto: one explanation


def test_auto_linker_is_explained_the_same_way_everywhere(
    capsys: pytest.CaptureFixture[str],
) -> None:
    best = get_plugin_manager().best_linker()
    resolved = f"auto -> {best} ({type(resolve_linker(best)).__name__})"
    assert describe_linker("auto") == resolved
    # the flag's help
    assert AUTO_LINKER_MEANING in config.get_param("linker").doc
    # the Mode's repr, and its linker object
    assert str(FAST_RUN) == f"Mode(linker={resolved}, optimizer=fast_run)"
    assert type(FAST_RUN.linker).__name__ in resolved
    # python -m opgraph plugins, text and JSON
    main(["plugins"])
    flat = " ".join(ln.strip() for ln in capsys.readouterr().out.splitlines())
    assert f"linker={resolved} here; {AUTO_LINKER_MEANING}." in flat
    main(["plugins", "--json"])
    assert json.loads(capsys.readouterr().out)["auto_linker"] == resolved


def test_the_meaning_names_both_installations() -> None:
    assert "cvm (CLinker" in AUTO_LINKER_MEANING and "when opgraph-backend-c is installed" in (
        AUTO_LINKER_MEANING
    )
    assert "else vm (VMLinker" in AUTO_LINKER_MEANING
    assert describe_linker("py") == "py"
    assert str(Mode("py", "fast_compile")) == "Mode(linker=py, optimizer=fast_compile)"


# ----------------------------------------------------------------------------------------
# FAST_RUN without opgraph-optimizers: warned once


@pytest.fixture
def no_optimizers(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if opgraph-optimizers were not installed, in a process not warned yet."""
    monkeypatch.setattr(mode_module, "optimizers_installed", lambda: False)
    monkeypatch.setattr(mode_module, "_optimizers_warned", False)


def test_fast_run_without_optimizers_warns_once(no_optimizers: None) -> None:
    x = T.dvector("x")
    with pytest.warns(OptimizersMissingWarning) as caught:
        function([x], T.log(1 + T.exp(x)), mode=Mode("py", "fast_run"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        function([x], T.log(1 + T.exp(x)) * 2, mode=Mode("py", "fast_run"))  # once only
    (w,) = [w for w in caught if w.category is OptimizersMissingWarning]
    text = str(w.message)
    assert text.startswith("FAST_RUN (a mode running the fast_run rewrites) compiled this ")
    for lost in ("log(1 + exp(x)) -> softplus(x)", "fusion", "BLAS", "in-place", "GEMM"):
        assert lost in text
    assert text.splitlines()[-1].startswith("HINT: pip install opgraph-optimizers")
    assert Path(w.filename).name == HERE  # pointed at the user's function() call


def test_modes_without_fast_run_do_not_warn(no_optimizers: None) -> None:
    x = T.dvector("x")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        function([x], T.exp(x), mode=Mode("py", "fast_compile"))
        function([x], T.exp(x), mode=Mode("py", "None"))


def test_no_warning_when_optimizers_are_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mode_module, "optimizers_installed", lambda: True)
    monkeypatch.setattr(mode_module, "_optimizers_warned", False)
    x = T.dvector("x")
    with warnings.catch_warnings():
        warnings.simplefilter("error", OptimizersMissingWarning)
        function([x], T.exp(x), mode=Mode("py", "fast_run"))


# ----------------------------------------------------------------------------------------
# the elementwise shape mismatch: the inputs by name, the user's line right after


def _first_lines(f: Any, *args: Any, n: int = 2) -> list[str]:
    with pytest.raises(ValueError) as info:
        f(*args)
    text = str(info.value)
    assert "Apply node that caused the error" in text and "HINT:" in text  # Theano's layout
    return text.splitlines()[:n]


def test_shape_mismatch_names_the_variables_then_the_users_line() -> None:
    x, y = T.dvector("x"), T.dvector("y")
    out = x + y
    line = inspect.currentframe().f_lineno - 1  # type: ignore[union-attr]
    f = function([x, y], out, mode=Mode("py", "fast_run"))
    first, second = _first_lines(f, np.ones(3), np.ones(4))
    assert first == (
        "Elemwise{add,no_inplace}: x has shape (3,), y has shape (4,): they cannot broadcast "
        "(Input dimension mis-match in dimension 0: 3 vs 4)"
    )
    assert second.startswith(f"The node was created at: {__file__}:{line}:")
    assert "out = x + y" in second


def test_unnamed_inputs_are_shown_by_their_expression() -> None:
    x, y = T.dvector("x"), T.dvector("y")
    f = function([x, y], T.exp(x) * 2 + y, mode=Mode("py", "None"))
    (first,) = _first_lines(f, np.ones(3), np.ones(4), n=1)
    assert first.startswith(
        "Elemwise{add,no_inplace}: (exp(x) * TensorConstant{2}) has shape (3,), y has shape (4,)"
    )


def test_a_length_one_dimension_says_its_type_does_not_broadcast() -> None:
    a, b = T.dmatrix("a"), T.dmatrix("b")
    f = function([a, b], a * b, mode=Mode("py", "fast_run"))
    (first,) = _first_lines(f, np.ones((1, 4)), np.ones((3, 4)), n=1)
    assert first == (
        "Elemwise{mul,no_inplace}: a has shape (1, 4), b has shape (3, 4): they cannot "
        "broadcast (Input dimension mis-match in dimension 0: 1 vs 3; a's type does not "
        "declare dimension 0 broadcastable)"
    )


def test_two_inputs_of_the_same_name_are_told_apart_by_index() -> None:
    x, also_x = T.dvector("x"), T.dvector("x")
    f = function([x, also_x], x - also_x, mode=Mode("py", "None"))
    (first,) = _first_lines(f, np.ones(2), np.ones(5), n=1)
    assert "input 0 (x) has shape (2,), input 1 (x) has shape (5,)" in first
