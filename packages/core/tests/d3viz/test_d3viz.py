"""``opgraph.d3viz``: Theano's d3viz/d3write/PyDotFormatter, served by the HTML view."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import opgraph
from opgraph import tensor as T
from opgraph.d3viz import PyDotFormatter, d3viz, d3write
from opgraph.printing import html as html_module


def _missing_graphviz_package() -> str | None:
    try:
        import graphviz  # noqa: F401
    except ImportError:
        return "the graphviz Python package is not installed (pip install graphviz)"
    return None


def _missing_dot() -> str | None:
    missing = _missing_graphviz_package()
    if missing is None and shutil.which("dot") is None:
        return "Graphviz's dot program is not on PATH (apt-get install graphviz)"
    return missing


needs_graphviz = pytest.mark.skipif(
    _missing_graphviz_package() is not None, reason=str(_missing_graphviz_package())
)
needs_dot = pytest.mark.skipif(_missing_dot() is not None, reason=str(_missing_dot()))


def mlp():
    """A small compiled function with a shared variable, an input and two outputs."""
    x = T.dmatrix("x")
    W = opgraph.shared(np.ones((3, 2)), name="W")
    h = T.tanh(T.dot(x, W))
    return opgraph.function([x], [h.sum(), h], name="mlp")


@needs_dot
def test_d3viz_writes_a_self_contained_page(tmp_path):
    f = mlp()
    out = tmp_path / "sub" / "mlp.html"
    assert d3viz(f, str(out)) is None
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page
    for node in f.maker.fgraph.toposort():
        assert str(node.op).split("{")[0] in page
    assert "name=x" in page or ">x<" in page
    assert not (tmp_path / "sub" / "d3viz").exists()  # nothing to copy: no js/css folder


def test_d3viz_page_lists_every_node(tmp_path, monkeypatch):
    """Without Graphviz's dot: lay-out replaced, the page and its node data checked."""
    pytest.importorskip("graphviz", reason="the graphviz Python package is not installed")
    seen = {}

    def fake_render(model, format="png"):
        seen["model"] = model
        titles = "".join(f'<g id="{n}" class="node"><title>{n}</title></g>' for n in model.nodes)
        return f"<svg>{titles}</svg>".encode()

    monkeypatch.setattr(html_module, "render", fake_render)
    f = mlp()
    d3viz(f, str(tmp_path / "f.html"), copy_deps=False)
    page = (tmp_path / "f.html").read_text(encoding="utf-8")
    topo = f.maker.fgraph.toposort()
    applies = [n for n in seen["model"].nodes.values() if n.kind == "apply"]
    assert [n.obj for n in applies] == topo
    assert f"{len(topo)} apply node" in page
    for node in topo:
        assert json.dumps(["Op", str(node.op)]).replace("<", "\\u003c") in page
    assert "TensorType(float64, matrix)" in page


@needs_graphviz
def test_pydot_formatter_returns_the_drawing_as_a_digraph():
    import graphviz

    f = mlp()
    g = PyDotFormatter()(f)
    assert isinstance(g, graphviz.Digraph)
    src = g.source
    for node in f.maker.fgraph.toposort():
        assert str(node.op).split("{")[0] in src
    assert "name=x" in src and "shape=ellipse" in src and "shape=box" in src
    # Not compact: unnamed intermediate variables get boxes of their own.
    loose = PyDotFormatter(compact=False)(f).source
    assert loose.count("shape=box") > src.count("shape=box")
    # A graph given as second argument receives the nodes.
    base = graphviz.Digraph(name="outer")
    assert PyDotFormatter()(f, base) is base and "name=x" in base.source
    assert PyDotFormatter().apply_colors["Elemwise"] == "#FFAABB"


@needs_graphviz
def test_d3write_writes_a_dot_file_of_variables(tmp_path):
    x = T.dvector("x")
    y = (x**2).sum()
    path = tmp_path / "g" / "y.dot"
    d3write(y, str(path))
    text = path.read_text(encoding="utf-8")
    assert text.startswith("digraph") and "name=x" in text and "Sum" in text


@needs_dot
def test_d3viz_takes_variables_and_apply_nodes(tmp_path):
    x = T.dvector("x")
    y = T.exp(x) * 2
    d3viz(y, str(tmp_path / "y.html"))
    d3viz(y.owner, str(tmp_path / "a.html"))
    d3viz([y, x.sum()], str(tmp_path / "l.html"), compact=False)
    for name in ("y", "a", "l"):
        assert "Elemwise" in (tmp_path / f"{name}.html").read_text(encoding="utf-8")


def test_bad_input_is_a_type_error(tmp_path):
    pytest.importorskip("graphviz", reason="the graphviz Python package is not installed")
    with pytest.raises(TypeError, match="cannot draw"):
        d3viz(42, str(tmp_path / "x.html"))
