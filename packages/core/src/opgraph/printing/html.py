"""``html_view``: a compiled graph as one self-contained, interactive HTML page.

The page embeds the graph drawn by Graphviz as inline SVG (the same drawing as
:func:`~opgraph.printing.pydot.pydotprint`), with inline CSS and JavaScript only, so it opens
offline from a ``file://`` URL and can be attached to a bug report. Drag to pan; zoom with the
mouse wheel or the ``+`` / ``-`` / ``reset`` buttons (keys ``+``, ``-``, ``0``). Hovering a node
shows its Op, output Type, static shape where known, the user's source line that built it and,
for nodes created by a rewrite, which rewrite created it and what it replaced. The same text is
in each node's SVG ``<title>`` (read by the page script, and by tools that parse the file).
Opening the page at ``#node=a3`` shows the tooltip of Apply node 3 (toposort order; variables
are ``v0``, ``v1``...), e.g. to point at a node in a bug report.

Needs the ``graphviz`` Python package and the ``dot`` program, like ``pydotprint``.
"""

from __future__ import annotations

import html
import json
import os
import re
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.utils import first_user_line
from opgraph.printing.debugprint import format_provenance, node_provenance
from opgraph.printing.pydot import DotNode, GraphModel, collect_graph, render

__all__ = ["html_view", "node_tooltip", "write_html"]


def _static_shape(type_: Any) -> str | None:
    """``(?, 3)`` from ``type.shape`` (None = unknown) or from ``type.broadcastable``."""
    shape = getattr(type_, "shape", None)
    if isinstance(shape, tuple | list):
        dims = ["?" if d is None else str(d) for d in shape]
    else:
        bcast = getattr(type_, "broadcastable", None)
        if not isinstance(bcast, tuple | list):
            return None
        dims = ["1" if b else "?" for b in bcast]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def _trace_line(obj: Any) -> str | None:
    trace = getattr(getattr(obj, "tag", None), "trace", None)
    try:
        return first_user_line(trace)
    except (TypeError, ValueError):
        return None


def _value_str(var: Constant) -> str:
    text = np.array2string(np.asarray(var.data), threshold=20, edgeitems=3)
    return text if len(text) <= 200 else text[:197] + "..."


def node_tooltip(dn: DotNode, topo_index: dict[Apply, int] | None = None) -> list[tuple[str, str]]:
    """The (field, value) rows shown when hovering one node of the drawing."""
    rows: list[tuple[str, str]] = []
    if dn.kind == "apply":
        node: Apply = dn.obj
        rows.append(("Op", str(node.op)))
        if topo_index is not None and node in topo_index:
            rows.append(("Toposort index", str(topo_index[node])))
        for i, out in enumerate(node.outputs):
            suffix = f" {i}" if len(node.outputs) > 1 else ""
            rows.append((f"Output type{suffix}", str(out.type)))
            shape = _static_shape(out.type)
            if shape is not None:
                rows.append((f"Shape{suffix}", shape))
        for attr, tag in (("destroy_map", "Destroys"), ("view_map", "Views")):
            value = getattr(node.op, attr, None)
            if value:
                rows.append((tag, str(value)))
        where = _trace_line(node.outputs[0]) if node.outputs else None
        where = where or _trace_line(node)
        if where:
            rows.append(("Created at", where))
        for entry in node_provenance(node):
            rows.append(("Rewrite", format_provenance(entry, with_reason=True)))
        return rows
    var: Variable = dn.obj
    rows.append(("Variable", str(var)))
    rows.append(("Type", str(var.type)))
    shape = _static_shape(var.type)
    if shape is not None:
        rows.append(("Shape", shape))
    if isinstance(var, Constant):
        rows.append(("Value", _value_str(var)))
    where = _trace_line(var)
    if where and not isinstance(var, Constant):
        rows.append(("Created at", where))
    return rows


_SVG_JUNK = re.compile(r"<\?xml.*?\?>|<!DOCTYPE.*?>|<!--.*?-->", re.S)
_XMLNS = re.compile(r'\s+xmlns(:\w+)?="[^"]*"')
_TITLE = re.compile(r"<title>(.*?)</title>", re.S)


# Graphviz colour names are X11's; a browser reads two of them as different CSS colours.
_X11 = {"green": "#00ff00", "grey": "#bebebe", "gray": "#bebebe"}
_COLOR_ATTR = re.compile(r'(fill|stroke)="(green|grey|gray)"')


def _inline_svg(svg: str, titles: dict[str, str]) -> str:
    """Graphviz's SVG made fit to inline: no prolog, comments or namespace URLs, X11 colours,
    node titles replaced by their tooltip text."""
    svg = _SVG_JUNK.sub("", svg)
    svg = _XMLNS.sub("", svg)
    svg = _COLOR_ATTR.sub(lambda m: f'{m.group(1)}="{_X11[m.group(2)]}"', svg)

    def title(m: re.Match[str]) -> str:
        key = html.unescape(m.group(1))
        text = titles.get(key)
        return f"<title>{html.escape(text)}</title>" if text is not None else m.group(0)

    return _TITLE.sub(title, svg).strip()


_CSS = """
html, body { margin: 0; height: 100%; font: 13px/1.4 system-ui, sans-serif; }
body { display: flex; flex-direction: column; background: #fafafa; color: #222; }
#bar { display: flex; gap: 8px; align-items: center; padding: 6px 10px;
       background: #2d3b55; color: #fff; }
#bar h1 { font-size: 14px; margin: 0 12px 0 0; font-weight: 600; }
#bar button { font: inherit; min-width: 32px; padding: 2px 8px; border: 0;
              border-radius: 4px; background: #e8ecf4; cursor: pointer; }
#bar .hint { opacity: .75; margin-left: auto; }
#viewport { flex: 1; overflow: hidden; position: relative; cursor: grab; background: #fff; }
#viewport.dragging { cursor: grabbing; }
#stage { position: absolute; left: 0; top: 0; transform-origin: 0 0; }
#stage svg { display: block; }
#stage g.node { cursor: pointer; }
#stage g.node:hover polygon, #stage g.node:hover ellipse { stroke-width: 2.5; }
#tooltip { position: fixed; display: none; max-width: 560px; padding: 6px 8px;
           background: #fffff0; border: 1px solid #888; border-radius: 4px;
           box-shadow: 0 2px 8px rgba(0,0,0,.25); pointer-events: none; z-index: 10;
           font: 12px/1.35 ui-monospace, monospace; white-space: pre-wrap; }
#tooltip b { color: #2d3b55; }
"""

_JS = r"""
(function () {
  var data = JSON.parse(document.getElementById("opgraph-data").textContent);
  var viewport = document.getElementById("viewport");
  var stage = document.getElementById("stage");
  var tip = document.getElementById("tooltip");
  var svg = stage.querySelector("svg");
  var scale = 1, tx = 0, ty = 0, drag = null;
  var titles = stage.querySelectorAll("title");
  for (var i = 0; i < titles.length; i++) { titles[i].parentNode.removeChild(titles[i]); }
  var pinned = null;  // node whose tooltip follows it (opened by a #node=<id> link)
  function apply() {
    stage.style.transform = "translate(" + tx + "px," + ty + "px) scale(" + scale + ")";
    if (pinned) {
      var r = pinned.getBoundingClientRect();
      tip.style.left = Math.round(r.right + 8) + "px"; tip.style.top = Math.round(r.top) + "px";
    }
  }
  function fit() {
    scale = 1; tx = 0; ty = 0; apply();
    var r = svg.getBoundingClientRect();
    var vw = viewport.clientWidth, vh = viewport.clientHeight;
    if (!r.width || !r.height) { return; }
    scale = Math.min(vw / r.width, vh / r.height, 2) * 0.95;
    tx = (vw - r.width * scale) / 2; ty = (vh - r.height * scale) / 2;
    apply();
  }
  function zoomAt(x, y, factor) {
    var s = Math.min(Math.max(scale * factor, 0.05), 40);
    tx = x - (x - tx) * (s / scale); ty = y - (y - ty) * (s / scale); scale = s;
    apply();
  }
  function zoomCenter(factor) {
    zoomAt(viewport.clientWidth / 2, viewport.clientHeight / 2, factor);
  }
  viewport.addEventListener("wheel", function (e) {
    e.preventDefault();
    var r = viewport.getBoundingClientRect();
    zoomAt(e.clientX - r.left, e.clientY - r.top, Math.exp(-e.deltaY * 0.0015));
  }, { passive: false });
  viewport.addEventListener("mousedown", function (e) {
    drag = { x: e.clientX - tx, y: e.clientY - ty };
    viewport.classList.add("dragging");
  });
  window.addEventListener("mouseup", function () {
    drag = null; viewport.classList.remove("dragging");
  });
  window.addEventListener("mousemove", function (e) {
    if (drag) { tx = e.clientX - drag.x; ty = e.clientY - drag.y; apply(); }
    if (tip.style.display === "block") {
      var x = e.clientX + 14, y = e.clientY + 14;
      if (x + tip.offsetWidth > window.innerWidth) { x = e.clientX - tip.offsetWidth - 10; }
      if (y + tip.offsetHeight > window.innerHeight) { y = e.clientY - tip.offsetHeight - 10; }
      tip.style.left = Math.max(0, x) + "px"; tip.style.top = Math.max(0, y) + "px";
    }
  });
  function show(g) {
    var info = g && data[g.id];
    if (!info) { return false; }
    tip.textContent = "";
    info.forEach(function (row) {
      var line = document.createElement("div");
      var key = document.createElement("b");
      key.textContent = row[0] + ": ";
      line.appendChild(key);
      line.appendChild(document.createTextNode(row[1]));
      tip.appendChild(line);
    });
    tip.style.display = "block";
    return true;
  }
  stage.addEventListener("mouseover", function (e) {
    pinned = null;
    show(e.target.closest ? e.target.closest("g.node") : null);
  });
  stage.addEventListener("mouseout", function (e) {
    var g = e.target.closest ? e.target.closest("g.node") : null;
    if (g && !(e.relatedTarget && g.contains(e.relatedTarget))) { tip.style.display = "none"; }
  });
  document.getElementById("zoom-in").onclick = function () { zoomCenter(1.25); };
  document.getElementById("zoom-out").onclick = function () { zoomCenter(0.8); };
  document.getElementById("zoom-reset").onclick = fit;
  window.addEventListener("keydown", function (e) {
    if (e.key === "+" || e.key === "=") { zoomCenter(1.25); }
    else if (e.key === "-") { zoomCenter(0.8); }
    else if (e.key === "0") { fit(); }
  });
  window.addEventListener("resize", fit);
  fit();
  // A link ending in #node=<id> (e.g. #node=a0, the first Apply) opens that node's tooltip.
  var m = /^#node=([\w-]+)$/.exec(window.location.hash);
  if (m && show(document.getElementById(m[1]))) {
    pinned = document.getElementById(m[1]);
    apply();
  }
})();
"""


def html_view(
    fct: Any,
    outfile: str | os.PathLike[str] | None = None,
    *,
    title: str | None = None,
    compact: bool = True,
    max_label_size: int = 70,
    var_with_name_simple: bool = True,
    inner_graphs: bool = True,
) -> str:
    """Render a graph as a self-contained interactive HTML page (pan, zoom, node tooltips).

    Parameters
    ----------
    fct
        A compiled function, a FunctionGraph, a Variable, an Apply or a list of Variables
        (anything :func:`pydotprint` takes).
    outfile
        Where to write the page. If ``None``, nothing is written and the HTML text is returned.
    title
        The page's heading; by default the function's name, or ``opgraph graph``.
    compact, max_label_size, var_with_name_simple
        As for :func:`pydotprint`.
    inner_graphs
        Draw the inner graph of each Scan and OpFromGraph node in a cluster beside it
        (Theano's d3viz shows an OpFromGraph's inner graph as a subgraph); dashed edges map
        outer inputs to inner inputs and inner outputs to the node. Hovering an inner node
        names the node whose graph it belongs to.

    Returns
    -------
    The path written (as a string) when ``outfile`` is given, else the HTML document itself.
    """
    model = collect_graph(
        fct,
        compact=compact,
        max_label_size=max_label_size,
        var_with_name_simple=var_with_name_simple,
        inner_graphs=inner_graphs,
    )
    page = _page(model, title)
    if outfile is None:
        return page
    path = os.fspath(outfile)
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(page)
    return path


#: Alias of :func:`html_view`.
write_html = html_view


def _page(model: GraphModel, title: str | None) -> str:
    topo_index = {node: i for i, node in enumerate(model.topo)}
    info = {nid: node_tooltip(dn, topo_index) for nid, dn in model.nodes.items()}
    for nid, dn in model.nodes.items():
        if dn.cluster in model.clusters and dn.cluster.startswith("inner_"):
            info[nid].insert(0, ("In", model.clusters[dn.cluster]))
    titles = {nid: "\n".join(f"{k}: {v}" for k, v in rows) for nid, rows in info.items()}
    svg = _inline_svg(render(model, "svg").decode("utf-8"), titles)
    heading = title or (f"opgraph: {model.name}" if model.name else "opgraph graph")
    n_apply = sum(1 for dn in model.nodes.values() if dn.kind == "apply")
    data = json.dumps(info).replace("<", "\\u003c")
    esc = html.escape
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{esc(heading)}</title>
<style>{_CSS}</style>
</head>
<body>
<div id="bar">
  <h1>{esc(heading)}</h1>
  <span>{n_apply} apply node{"" if n_apply == 1 else "s"}</span>
  <button id="zoom-in" title="zoom in (+)">+</button>
  <button id="zoom-out" title="zoom out (-)">&minus;</button>
  <button id="zoom-reset" title="fit to window (0)">reset</button>
  <span class="hint">drag to pan &middot; wheel to zoom &middot; hover a node for details</span>
</div>
<div id="viewport"><div id="stage">
{svg}
</div></div>
<div id="tooltip" role="tooltip"></div>
<script type="application/json" id="opgraph-data">{data}</script>
<script>{_JS}</script>
</body>
</html>
"""
