"""``pydotprint``: draw a graph with Graphviz, in Theano's look.

Apply nodes are ellipses labelled with their Op, filled by Op family (Elemwise pink,
Subtensor purple, Alloc orange, Shape brown, IfElse magenta, Scan yellow, GPU transfers red).
Variables are boxes: graph inputs and constants green (shared variables cyan, constants
labelled ``val=[10] TensorType(int8, (True,))``), outputs blue, unused outputs grey. In compact
mode an unnamed intermediate variable is not drawn as a box: its type labels the edge from
the Apply that computes it. With more than one input, each edge is labelled with the input's
position.

The drawing needs the ``graphviz`` Python package (``pip install opgraph-core[graphviz]``)
and Graphviz's ``dot`` program (Debian/Ubuntu: ``apt-get install graphviz``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.traversal import ancestors, graph_inputs, io_toposort
from opgraph.printing.debugprint import CompiledInnerGraphs, inner_graph, inner_to_outer, is_loop_op

__all__ = ["GraphModel", "collect_graph", "default_colorCodes", "pydotprint", "render"]

# Colours by Op class name (a key matches if it occurs in the class name). 'Output' colours
# the output boxes and the edges of inputs an Op views.
default_colorCodes: dict[str, str] = {
    "GpuFromHost": "red",
    "HostFromGpu": "red",
    "Scan": "yellow",
    "Shape": "brown",
    "IfElse": "magenta",
    "Elemwise": "#FFAABB",  # dark pink
    "Subtensor": "#FFAAFF",  # purple
    "Alloc": "#FFAA22",  # orange
    "Output": "blue",
}

_INSTALL_PACKAGE = (
    "pydotprint needs the 'graphviz' Python package. HINT: pip install 'opgraph-core[graphviz]' "
    "(or pip install graphviz), and install Graphviz's dot program too "
    "(Debian/Ubuntu: apt-get install graphviz)."
)
_INSTALL_DOT = (
    "pydotprint could not run Graphviz's 'dot' program: it is not installed or not on PATH. "
    "HINT: install graphviz (Debian/Ubuntu: apt-get install graphviz; macOS: brew install "
    "graphviz; conda: conda install graphviz)."
)


@dataclass
class DotNode:
    """A node of the drawing: an Apply (``kind='apply'``) or a Variable (``kind='var'``)."""

    id: str
    label: str
    kind: str
    obj: Any
    attrs: dict[str, str] = field(default_factory=dict)
    cluster: str | None = None


@dataclass
class GraphModel:
    """What :func:`collect_graph` found: nodes, edges and the graph they came from."""

    nodes: dict[str, DotNode]
    edges: list[tuple[str, str, dict[str, str]]]
    topo: list[Apply]
    outputs: list[Variable]
    name: str | None = None
    clusters: dict[str, str] = field(default_factory=dict)
    #: The drawing's node id of each drawn Variable and Apply (inner graphs' ones included).
    ids: dict[Any, str] = field(default_factory=dict)


@dataclass
class _Source:
    topo: list[Apply]
    outputs: list[Variable]
    updates: dict[Variable, str]
    profile: Any
    name: str | None


def _source(fct: Any) -> _Source:
    """Normalise a Function, FunctionGraph, Variable, Apply or list of Variables."""
    maker = getattr(fct, "maker", None)
    fgraph = getattr(maker, "fgraph", None)
    if fgraph is not None:
        outputs, updates = _split_updates(fgraph, maker)
        topo = _toposort(fgraph, list(fgraph.outputs))
        profile = getattr(fct, "profile", None)
        return _Source(topo, outputs, updates, profile, getattr(fct, "name", None))
    if (
        not isinstance(fct, Variable | Apply | list | tuple)
        and hasattr(fct, "outputs")
        and hasattr(fct, "inputs")
    ):
        outputs, updates = _split_updates(fct, None)
        return _Source(_toposort(fct, list(fct.outputs)), outputs, updates, None, None)
    if isinstance(fct, Variable):
        outputs = [fct]
    elif isinstance(fct, Apply):
        outputs = list(fct.outputs)
    elif isinstance(fct, list | tuple) and all(isinstance(v, Variable) for v in fct):
        outputs = list(fct)
    else:
        raise TypeError(
            f"pydotprint cannot draw an object of type {type(fct).__name__}. HINT: pass a "
            "compiled function, a FunctionGraph, a Variable, an Apply or a list of Variables."
        )
    return _Source(io_toposort(graph_inputs(outputs), outputs), outputs, {}, None, None)


def _split_updates(fgraph: Any, maker: Any) -> tuple[list[Variable], dict[Variable, str]]:
    """The user's outputs, and ``{update output: name of the updated input}``.

    Uses ``fgraph.update_mapping`` (``{output index: input index}``) when present, else the
    ``In`` specs with an ``update`` of a compiled function's maker (updates come last).
    """
    outputs = list(fgraph.outputs)
    mapping = getattr(fgraph, "update_mapping", None)
    if isinstance(mapping, dict) and mapping:
        updates = {outputs[o]: str(fgraph.inputs[i].name or "") for o, i in mapping.items()}
        return [v for k, v in enumerate(outputs) if k not in mapping], updates
    specs = [i for i in getattr(maker, "inputs", None) or [] if getattr(i, "update", None)]
    n_user = len(outputs) - len(specs)
    if not specs or n_user < 0:
        return outputs, {}
    updates = {}
    for var, spec in zip(outputs[n_user:], specs):
        name = getattr(spec, "name", None) or getattr(getattr(spec, "variable", None), "name", "")
        updates[var] = str(name or "")
    return outputs[:n_user], updates


def _toposort(fgraph: Any, outputs: list[Variable]) -> list[Apply]:
    toposort = getattr(fgraph, "toposort", None)
    if callable(toposort):
        return list(toposort())
    return io_toposort(list(getattr(fgraph, "inputs", [])), outputs)


def _truncate(text: str, size: int) -> str:
    return text if len(text) <= size else text[: size - 3] + "..."


def _is_shared(var: Variable) -> bool:
    return not isinstance(var, Constant) and (
        "Shared" in type(var).__name__ or callable(getattr(var, "get_value", None))
    )


def _var_label(var: Variable, update_name: str | None, simple: bool) -> str:
    if var.name is not None:
        return var.name if simple else f"name={var.name} {var.type}"
    if isinstance(var, Constant):
        dstr = "val=" + str(np.asarray(var.data)).split("\n", 1)[0]
        return f"{dstr} {var.type}"
    if update_name:
        return f"{update_name} UPDATE" if simple else f"{update_name} UPDATE {var.type}"
    return str(var.type)


def _op_color(node: Apply, color_codes: dict[str, str]) -> str | None:
    use = None
    cls_name = type(node.op).__name__
    for op_name, color in color_codes.items():
        if op_name in cls_name:
            use = color
    return use


def _profile_str(node: Apply, profile: Any) -> str:
    apply_time = getattr(profile, "apply_time", None)
    if not isinstance(apply_time, dict) or node not in apply_time:
        return ""
    t = apply_time[node]
    total = getattr(profile, "fct_call_time", 0) or 0
    pf = t * 100 / total if total else 0
    return f"   ({t:.3f}s,{pf:.3f}%)"


def _cond_sets(topo: list[Apply], cond_highlight: Any) -> dict[Apply, str]:
    """Map the nodes of an IfElse's branches to 'left', 'right' or 'middle' (both)."""
    if cond_highlight is None or cond_highlight is False:
        return {}
    cond = None
    for node in topo:
        if isinstance(cond_highlight, Apply):
            if node is cond_highlight:
                cond = node
        elif type(node.op).__name__ == "IfElse" and (
            cond_highlight is True or getattr(node.op, "name", None) == cond_highlight
        ):
            cond = node
            break
    if cond is None:
        import warnings

        warnings.warn(
            "pydotprint: cond_highlight is set but there is no matching IfElse node in the graph",
            stacklevel=3,
        )
        return {}
    n = len(cond.outputs)
    branch_vars = (cond.inputs[1 : 1 + n], cond.inputs[1 + n : 1 + 2 * n])
    left, right = (
        {v.owner for v in ancestors(vars_) if v.owner is not None} for vars_ in branch_vars
    )
    sets = {node: "left" for node in left - right}
    sets.update({node: "right" for node in right - left})
    sets.update({node: "middle" for node in left & right})
    return sets


def collect_graph(
    fct: Any,
    compact: bool = True,
    with_ids: bool = False,
    high_contrast: bool = True,
    cond_highlight: Any = None,
    colorCodes: dict[str, str] | None = None,
    max_label_size: int = 70,
    var_with_name_simple: bool = False,
    inner_graphs: bool = False,
    _compiled: CompiledInnerGraphs | None = None,
) -> GraphModel:
    """Build the drawing of ``fct`` (nodes with labels, colours and shapes; edges).

    Takes the same arguments as :func:`pydotprint`; used by it and by the HTML view. With
    ``inner_graphs``, the inner graph of each node of an Op defined by a graph (Scan,
    OpFromGraph) is drawn in a cluster (see :func:`add_inner_graphs`).
    """
    colors = dict(default_colorCodes)
    colors.update(colorCodes or {})
    src = _source(fct)
    topo, outputs = src.topo, src.outputs
    n_clients: dict[Variable, int] = {}
    for node in topo:
        for inp in node.inputs:
            n_clients[inp] = n_clients.get(inp, 0) + 1
    model = GraphModel({}, [], topo, outputs, src.name)
    clusters = _cond_sets(topo, cond_highlight)
    if clusters:
        model.clusters = {"left": "Left", "right": "Right", "middle": "Middle"}
    var_ids: dict[Variable, str] = {}
    apply_ids = {node: f"a{i}" for i, node in enumerate(topo)}

    def fill(color: str) -> dict[str, str]:
        if not high_contrast:
            return {"color": color}
        attrs = {"style": "filled", "fillcolor": color}
        if color in ("blue", "red", "brown"):  # dark fills: keep the label readable
            attrs["fontcolor"] = "white"
        return attrs

    def var_node(var: Variable, extra: dict[str, str] | None = None) -> str:
        if var not in var_ids:
            vid = var_ids[var] = f"v{len(var_ids)}"
            label = _var_label(var, src.updates.get(var), var_with_name_simple)
            if with_ids:
                label += f" id={len(var_ids) - 1}"
            attrs = {"shape": "box", "id": vid, **(extra or {})}
            model.nodes[vid] = DotNode(vid, _truncate(label, max_label_size), "var", var, attrs)
        elif extra:
            model.nodes[var_ids[var]].attrs.update(extra)
        return var_ids[var]

    for idx, node in enumerate(topo):
        aid = apply_ids[node]
        label = str(node.op) + _profile_str(node, src.profile)
        if with_ids:
            label += f" id={idx}"
        color = _op_color(node, colors)
        attrs = {"shape": "ellipse", "id": aid, **(fill(color) if color else {})}
        model.nodes[aid] = DotNode(
            aid, _truncate(label, max_label_size), "apply", node, attrs, clusters.get(node)
        )
        viewed = {i for ins in getattr(node.op, "view_map", {}).values() for i in ins}
        destroyed = {i for ins in getattr(node.op, "destroy_map", {}).values() for i in ins}
        for i, var in enumerate(node.inputs):
            param = {"label": str(i)} if len(node.inputs) > 1 else {}
            if i in viewed:
                param["color"] = colors["Output"]
            elif i in destroyed:
                param["color"] = "red"
            if var.owner is None or var.owner not in apply_ids:
                vid = var_node(var, fill("cyan" if _is_shared(var) else "green"))
                model.edges.append((vid, aid, param))
            elif var.name or not compact or var in outputs or var in src.updates:
                model.edges.append((var_node(var), aid, param))
            else:
                text = f"{param.get('label', '')} {var.type}".strip()
                param["label"] = _truncate(text, max_label_size)
                model.edges.append((apply_ids[var.owner], aid, param))
        for i, var in enumerate(node.outputs):
            param = {"label": str(i)} if len(node.outputs) > 1 else {}
            if var in outputs or var in src.updates:
                model.edges.append((aid, var_node(var, fill(colors["Output"])), param))
            elif n_clients.get(var, 0) == 0:
                model.edges.append((aid, var_node(var, fill("grey")), param))
            elif var.name or not compact:
                if compact:
                    text = f"{param.get('label', '')} {var.type}".strip()
                    param["label"] = _truncate(text, max_label_size)
                model.edges.append((aid, var_node(var), param))
    for var in outputs:  # an output that is also a graph input or a constant
        if var.owner is None or var.owner not in apply_ids:
            var_node(var, fill(colors["Output"]))
    model.ids.update(var_ids)
    model.ids.update(apply_ids)
    if inner_graphs:
        if _compiled is None:
            _compiled = CompiledInnerGraphs()
            _compiled.add_vm(getattr(fct, "fn", None))
        options = {
            "compact": compact,
            "with_ids": with_ids,
            "high_contrast": high_contrast,
            "colorCodes": colorCodes,
            "max_label_size": max_label_size,
            "var_with_name_simple": var_with_name_simple,
        }
        add_inner_graphs(model, _compiled, options)
    return model


def add_inner_graphs(
    model: GraphModel, compiled: CompiledInnerGraphs, options: dict[str, Any]
) -> None:
    """Draw, for each node of ``model`` whose Op has an inner graph, that graph in a cluster.

    The cluster ``cluster_inner_<node id>`` is labelled ``inner graph of <op>``; its nodes'
    ids are the node's id, a dot, and their id in the inner drawing (``a4.a0``). Dashed edges
    link each outer input to the inner input that reads it, and each inner output to the
    node (as Theano's d3viz maps an OpFromGraph's inputs and outputs to its cluster). A loop
    compiled in a function shows its rewritten inner graph, as debugprint does; inner graphs
    nested in inner graphs get clusters of their own.
    """
    for node in list(model.topo):
        graph = inner_graph(node.op)
        aid = model.ids.get(node)
        if graph is None or aid is None:
            continue
        inner_ins, inner_outs = compiled.graph(node)
        sub = collect_graph(inner_outs, inner_graphs=True, _compiled=compiled, **options)
        key = f"inner_{aid}"
        kind = "loop body" if is_loop_op(node.op) else "inner graph"
        model.clusters[key] = f"{kind} of {node.op}"
        rename = {nid: f"{aid}.{nid}" for nid in sub.nodes}
        for nid, dn in sub.nodes.items():
            attrs = dict(dn.attrs)
            if "id" in attrs:
                attrs["id"] = rename[nid]
            # A nested inner graph keeps a cluster of its own (Graphviz draws it apart).
            cluster = f"inner_{rename[dn.cluster[len('inner_') :]]}" if dn.cluster else key
            model.nodes[rename[nid]] = DotNode(
                rename[nid], dn.label, dn.kind, dn.obj, attrs, cluster
            )
        for sub_key, label in sub.clusters.items():
            model.clusters[f"inner_{rename[sub_key[len('inner_') :]]}"] = label
        model.edges.extend((rename[t], rename[h], dict(a)) for t, h, a in sub.edges)
        for obj, nid in sub.ids.items():
            model.ids.setdefault(obj, rename[nid])
        links = inner_to_outer(node, inner_ins)
        for inner_in, outer in links.items():
            head = sub.ids.get(inner_in)
            tail = model.ids.get(outer)
            if tail is None and outer.owner is not None:
                tail = model.ids.get(outer.owner)
            if head is not None and tail is not None:
                model.edges.append((tail, rename[head], {"style": "dashed"}))
        for inner_out in inner_outs:
            tail = sub.ids.get(inner_out)
            if tail is None and inner_out.owner is not None:
                tail = sub.ids.get(inner_out.owner)
            if tail is not None:
                model.edges.append((rename[tail], aid, {"style": "dashed"}))


def import_graphviz() -> ModuleType:
    """Import the ``graphviz`` package or raise an ImportError saying how to install it."""
    try:
        import graphviz
    except ImportError as exc:
        raise ImportError(_INSTALL_PACKAGE) from exc
    return graphviz


def to_digraph(model: GraphModel, graphviz: ModuleType | None = None) -> Any:
    """The ``graphviz.Digraph`` of a :class:`GraphModel`."""
    gv = graphviz or import_graphviz()
    esc = gv.escape
    g = gv.Digraph(name=model.name or "opgraph")
    subgraphs = {
        key: gv.Digraph(name=f"cluster_{key}", graph_attr={"label": esc(label)})
        for key, label in model.clusters.items()
    }
    for n in model.nodes.values():
        target = subgraphs.get(n.cluster, g) if n.cluster else g
        target.node(n.id, label=esc(n.label), **n.attrs)
    for sub in subgraphs.values():
        g.subgraph(sub)
    for tail, head, attrs in model.edges:
        attrs = dict(attrs)
        label = attrs.pop("label", None)
        g.edge(tail, head, label=esc(label) if label else None, **attrs)
    return g


def render(model: GraphModel, format: str = "png") -> bytes:
    """Lay out and render a :class:`GraphModel` with ``dot``; return the file's bytes."""
    gv = import_graphviz()
    if format not in gv.FORMATS:
        raise ValueError(
            f"pydotprint: unknown output format {format!r}. HINT: use one of png, svg, pdf, "
            "dot, jpg (all formats: graphviz.FORMATS)."
        )
    try:
        return to_digraph(model, gv).pipe(format=format)
    except gv.ExecutableNotFound as exc:
        raise RuntimeError(_INSTALL_DOT) from exc


def _default_outfile(format: str) -> str:
    directory, device = str(config.compiledir), str(config.device)
    return os.path.join(directory, f"opgraph.pydotprint.{device}.{format}")


def pydotprint(
    fct: Any,
    outfile: str | os.PathLike[str] | None = None,
    compact: bool = True,
    format: str = "png",
    with_ids: bool = False,
    high_contrast: bool = True,
    cond_highlight: Any = None,
    colorCodes: dict[str, str] | None = None,
    max_label_size: int = 70,
    scan_graphs: bool = False,
    var_with_name_simple: bool = False,
    print_output_file: bool = True,
    return_image: bool = False,
    inner_graphs: bool = False,
) -> bytes | None:
    """Draw a graph to an image file with Graphviz (Theano's ``pydotprint``).

    Parameters
    ----------
    fct
        A compiled function (its rewritten graph), a FunctionGraph, a Variable, an Apply or a
        list of Variables.
    outfile
        Where to write; ``.<format>`` is appended if missing. Default:
        ``<config.compiledir>/opgraph.pydotprint.<device>.<format>``.
    compact
        Draw unnamed intermediate variables as edge labels instead of boxes.
    format
        Any Graphviz output format: ``png``, ``svg``, ``pdf``, ``dot``...
    with_ids
        Add ``id=N`` (the toposort index for Apply nodes) to the labels.
    high_contrast
        Fill nodes with their colour (else colour only their border).
    cond_highlight
        An IfElse Apply, the name of an IfElse op, or ``True`` for the first IfElse: put the
        nodes of its then-branch, else-branch and both in clusters Left, Right and Middle.
    colorCodes
        ``{op class name substring: colour}``, merged over :data:`default_colorCodes`.
    max_label_size
        Longer labels are cut and end in ``...``.
    scan_graphs
        Also draw the inner graph of each loop (Scan) node to a file of its own,
        ``<outfile>_<op name>_<toposort index>`` (nested loops too), as Theano does.
    inner_graphs
        Draw the inner graph of each Scan and OpFromGraph node in the same picture, in a
        cluster beside the node, with dashed edges from the outer inputs to the inner inputs
        that read them and from the inner outputs to the node (an opgraph addition; the
        HTML view does it by default).
    var_with_name_simple
        Label named variables with their name only (not ``name=x TensorType(...)``).
    print_output_file
        Print ``The output file is available at <path>``.
    return_image
        Return the image's bytes instead of writing a file (e.g. for
        ``IPython.display.Image(pydotprint(f, return_image=True))``).

    Raises
    ------
    ImportError
        The ``graphviz`` package is missing (``pip install 'opgraph-core[graphviz]'``).
    RuntimeError
        Graphviz's ``dot`` program is missing (``apt-get install graphviz``).
    """
    model = collect_graph(
        fct,
        compact=compact,
        with_ids=with_ids,
        high_contrast=high_contrast,
        cond_highlight=cond_highlight,
        colorCodes=colorCodes,
        max_label_size=max_label_size,
        var_with_name_simple=var_with_name_simple,
        inner_graphs=inner_graphs,
    )
    data = render(model, format)
    if return_image:
        return data
    path = os.fspath(outfile) if outfile is not None else _default_outfile(format)
    if not path.endswith("." + format):
        path += "." + format
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data)
    if print_output_file:
        print("The output file is available at", path)
    if scan_graphs:
        options = {
            "compact": compact,
            "format": format,
            "with_ids": with_ids,
            "high_contrast": high_contrast,
            "colorCodes": colorCodes,
            "max_label_size": max_label_size,
            "scan_graphs": scan_graphs,
            "var_with_name_simple": var_with_name_simple,
            "print_output_file": print_output_file,
        }
        compiled = CompiledInnerGraphs()
        compiled.add_vm(getattr(fct, "fn", None))
        _draw_inner_graphs(model, path, {**options, "_compiled": compiled})
    return None


def _draw_inner_graphs(model: GraphModel, path: str, options: dict[str, Any]) -> None:
    """Draw the inner graph of every loop (Scan) node next to ``path``, to
    ``<outfile>_<op name>_<toposort index>`` (Theano's ``scan_graphs``): the rewritten inner
    graph when the loop was compiled in the drawn function, else the Op's own."""
    base, ext = os.path.splitext(path)
    compiled = options.pop("_compiled", None) or CompiledInnerGraphs()
    for idx, node in enumerate(model.topo):
        if not is_loop_op(node.op):
            continue
        inner_outs = compiled.graph(node)[1]
        name = getattr(node.op, "name", None)
        new_path = f"{base}_{name}_{idx}{ext}" if name else f"{base}_{idx}{ext}"
        sub = collect_graph(
            inner_outs,
            **{k: v for k, v in options.items() if k in _MODEL_OPTIONS},
        )
        with open(new_path, "wb") as fh:
            fh.write(render(sub, options["format"]))
        if options.get("print_output_file"):
            print("The output file is available at", new_path)
        _draw_inner_graphs(sub, new_path, {**options, "_compiled": compiled})


_MODEL_OPTIONS = (
    "compact",
    "with_ids",
    "high_contrast",
    "colorCodes",
    "max_label_size",
    "var_with_name_simple",
)
