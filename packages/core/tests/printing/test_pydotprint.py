"""pydotprint: Theano's drawing conventions, and real PNG output when Graphviz is there."""

from __future__ import annotations

import shutil
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from opgraph.printing.pydot import collect_graph, pydotprint

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _graphviz_missing() -> str | None:
    try:
        import graphviz  # noqa: F401
    except ImportError:
        return "the graphviz Python package is not installed (pip install graphviz)"
    if shutil.which("dot") is None:
        return "Graphviz's dot program is not on PATH (apt-get install graphviz)"
    return None


needs_dot = pytest.mark.skipif(_graphviz_missing() is not None, reason=str(_graphviz_missing()))


def example(toys: SimpleNamespace) -> tuple:
    """``a + a ** 10`` from the Theano paper: input ``a`` and constant ``val=[10]``."""
    a = toys.vector("a")
    ten = toys.TensorType("int8", (True,)).make_constant(np.array([10], dtype="int8"))
    b = toys.add(a, toys.pow(a, ten))
    return a, b


def by_label(model, text):
    found = [n for n in model.nodes.values() if text in n.label]
    assert found, f"no node labelled {text!r} in {[n.label for n in model.nodes.values()]}"
    return found[0]


def test_theano_look(toys):
    a, b = example(toys)
    f = toys.function([a], [b])
    model = collect_graph(f)
    assert [n.label for n in model.nodes.values() if n.kind == "apply"] == [
        "Elemwise{pow,no_inplace}",
        "Elemwise{add,no_inplace}",
    ]
    add = by_label(model, "Elemwise{add")
    assert add.attrs["shape"] == "ellipse" and add.attrs["fillcolor"] == "#FFAABB"
    inp = by_label(model, "name=a TensorType(float64, vector)")
    assert inp.attrs == {"shape": "box", "id": inp.id, "style": "filled", "fillcolor": "green"}
    const = by_label(model, "val=[10] TensorType(int8, (True,))")
    assert const.attrs["fillcolor"] == "green"
    out = next(n for n in model.nodes.values() if n.kind == "var" and n.obj is b)
    assert out.attrs["fillcolor"] == "blue" and out.label == "TensorType(float64, vector)"
    # Edges into a two-input node carry the input position; the unnamed intermediate is
    # drawn in compact mode as a labelled edge from pow to add.
    labels = {(t, h): attrs.get("label") for t, h, attrs in model.edges}
    pow_id = by_label(model, "Elemwise{pow").id
    assert labels[(pow_id, add.id)] == "1 TensorType(float64, vector)"
    assert labels[(inp.id, add.id)] == "0"
    assert labels[(const.id, pow_id)] == "1"
    assert labels[(add.id, out.id)] is None


def test_non_compact_ids_and_contrast(toys):
    _a, b = example(toys)
    model = collect_graph(b, compact=False, with_ids=True, high_contrast=False)
    labels = [n.label for n in model.nodes.values()]
    assert "Elemwise{pow,no_inplace} id=0" in labels
    assert any(label.startswith("TensorType(float64, vector) id=") for label in labels)
    add = by_label(model, "Elemwise{add")
    assert add.attrs["color"] == "#FFAABB" and "style" not in add.attrs
    simple = collect_graph([b], var_with_name_simple=True, max_label_size=12)
    assert "a" in [n.label for n in simple.nodes.values()]
    assert all(len(n.label) <= 12 for n in simple.nodes.values())


def test_unused_outputs_grey_and_view_destroy_edges(toys):
    x = toys.vector("x")
    first, _second = toys.Split2()(x)
    view = toys.DimShuffle((0,))(first)
    y = toys.add_inplace(view, x)
    model = collect_graph(toys.function([x], [y]))
    grey = [n for n in model.nodes.values() if n.attrs.get("fillcolor") == "grey"]
    assert [n.obj for n in grey] == [_second]
    ds = by_label(model, "InplaceDimShuffle")
    add = by_label(model, "Elemwise{add,inplace}")
    colors = {(t, h): attrs.get("color") for t, h, attrs in model.edges}
    split = by_label(model, "Split2")
    assert colors[(split.id, ds.id)] == "blue"  # DimShuffle views its input
    assert colors[(ds.id, add.id)] == "red"  # add_inplace destroys input 0


def test_inputs_kinds_and_errors(toys):
    a, b = example(toys)
    assert len(collect_graph(b.owner).topo) == 2
    assert len(collect_graph(toys.FunctionGraph([a], [b])).topo) == 2
    with pytest.raises(TypeError, match="cannot draw"):
        collect_graph("graph")


def test_cond_highlight_clusters(toys):
    c, x, y = toys.vector("c"), toys.vector("x"), toys.vector("y")
    shared = toys.exp(x)
    left = toys.add(shared, toys.neg(x))
    right = toys.mul(shared, y)
    out = toys.IfElse()(c, left, right)
    model = collect_graph(out, cond_highlight=True)
    clusters = {
        n.label.split("{")[1].split(",")[0]: n.cluster
        for n in model.nodes.values()
        if n.kind == "apply" and n.label.startswith("Elemwise")
    }
    assert clusters == {"exp": "middle", "neg": "left", "add": "left", "mul": "right"}
    with pytest.warns(UserWarning, match="no matching IfElse"):
        collect_graph(out, cond_highlight="other_name")


def test_missing_graphviz_package_names_the_extra(toys, monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)
    _, b = example(toys)
    with pytest.raises(ImportError, match=r"opgraph-core\[graphviz\].*apt-get install graphviz"):
        pydotprint(b, return_image=True)


@pytest.mark.skipif(
    _graphviz_missing() is not None and "package" in str(_graphviz_missing()),
    reason="the graphviz Python package is not installed",
)
def test_missing_dot_program_says_how_to_install(toys, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    _, b = example(toys)
    with pytest.raises(RuntimeError, match="apt-get install graphviz"):
        pydotprint(b, outfile=str(tmp_path / "g.png"))


@needs_dot
def test_writes_png(toys, tmp_path, capsys):
    a, b = example(toys)
    out = tmp_path / "sub" / "graph"
    assert pydotprint(toys.function([a], [b]), outfile=str(out)) is None
    path = tmp_path / "sub" / "graph.png"
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 1000
    assert capsys.readouterr().out == f"The output file is available at {path}\n"


@needs_dot
def test_other_formats_and_return_image(toys, tmp_path, capsys):
    _, b = example(toys)
    svg = pydotprint(b, format="svg", return_image=True)
    assert b"<svg" in svg and b"Elemwise{add,no_inplace}" in svg and b"val=[10]" in svg
    pydotprint([b], outfile=str(tmp_path / "g.dot"), format="dot", print_output_file=False)
    assert (tmp_path / "g.dot").read_text().startswith("digraph")
    assert capsys.readouterr().out == ""
    with pytest.raises(ValueError, match="unknown output format"):
        pydotprint(b, format="bogus", return_image=True)


@needs_dot
def test_labels_with_special_characters(toys):
    x = toys.vector()  # str(x) looks like an HTML label: <TensorType(float64, vector)>
    op = toys.Elemwise("a\\b:c")
    png = pydotprint(op(x), return_image=True)
    assert png.startswith(PNG_SIGNATURE)


def test_update_outputs_are_blue_and_labelled(toys):
    x, w = toys.vector("x"), toys.vector("w")
    f = toys.function([x, w], [toys.mul(x, w), toys.add(w, x)])
    f.maker.inputs[1].update = f.maker.fgraph.outputs[1]
    model = collect_graph(f, var_with_name_simple=True)
    upd = by_label(model, "w UPDATE")
    assert upd.attrs["fillcolor"] == "blue" and upd.obj is f.maker.fgraph.outputs[1]
    assert model.outputs == [f.maker.fgraph.outputs[0]]


def test_real_function_graph(toys):
    fg_mod = pytest.importorskip("opgraph.graph.fg")
    x, w = toys.vector("x"), toys.vector("w")
    fg = fg_mod.FunctionGraph([x, w], [toys.mul(x, w), toys.add(w, x)], update_mapping={1: 1})
    model = collect_graph(fg, var_with_name_simple=True)
    assert len(model.topo) == 2
    assert by_label(model, "w UPDATE").attrs["fillcolor"] == "blue"
