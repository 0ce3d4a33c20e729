"""``debugprint``: a graph as indented text, in Theano 1.0's exact layout.

Each line is one variable. The output of an Apply prints its Op, an id, the variable's name in
quotes and, for a compiled graph, the node's position in the toposort::

    Sum{acc_dtype=float64} [id A] ''   1
     |Elemwise{add,no_inplace} [id B] ''   0
       |TensorConstant{(1,) of 1.0} [id C]
       |<TensorType(float64, vector)> [id D]

A graph input prints as ``str(var) [id X]``. A node met a second time repeats its line (same
id) without its inputs. The walk uses an explicit stack, so very deep graphs print without
hitting Python's recursion limit.

A loop node (Scan) is followed, after the outer graph, by its inner graph, as Theano prints
it: a section ``Inner graphs of the scan ops:``, then per loop node its line and the inner
graph with ``>`` prefixes, each inner input linked to the outer input it reads from::

    Inner graphs of the scan ops:

    for{cpu,scan_fn} [id C] ''
     >Elemwise{mul,no_inplace} [id W] ''
     > |<TensorType(float64, vector)> [id X] -> [id E]
     > |A_copy [id Y] -> [id M]

Printing knows inner graphs by duck typing only (it sits below the modules that define
them): an Op has an inner graph when it has ``inner_inputs`` and ``inner_outputs``
(:func:`inner_graph`), and is a loop when it also maps inner inputs to outer ones with
``outer_input_index(k)`` (:func:`is_loop_op`). As in Theano 1.0, debugprint shows the inner
graphs of loops only; an OpFromGraph node prints as one node (the pictures show its inner
graph).
"""

from __future__ import annotations

import io
import sys
from collections.abc import Hashable, Sequence
from typing import IO, Any

import numpy as np

from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Variable

__all__ = [
    "CompiledInnerGraphs",
    "char_from_number",
    "debugprint",
    "format_provenance",
    "inner_graph",
    "inner_to_outer",
    "is_loop_op",
]


def char_from_number(number: int) -> str:
    """Render ``number`` in base 26 with the capital letters as digits (0 -> A, 26 -> BA)."""
    if number == 0:
        return "A"
    digits = ""
    while number:
        number, rem = divmod(number, 26)
        digits = chr(ord("A") + rem) + digits
    return digits


def inner_graph(op: Any) -> tuple[list[Variable], list[Variable]] | None:
    """``(inner_inputs, inner_outputs)`` of an Op defined by a graph (Scan, OpFromGraph), or
    None for any other Op."""
    ins = getattr(op, "inner_inputs", None)
    outs = getattr(op, "inner_outputs", None)
    if ins is None or outs is None:
        return None
    return list(ins), list(outs)


def is_loop_op(op: Any) -> bool:
    """Whether ``op`` is a loop over an inner graph (Scan): it has an inner graph and says
    which outer input each inner input reads from (``outer_input_index``)."""
    return inner_graph(op) is not None and callable(getattr(op, "outer_input_index", None))


def inner_to_outer(node: Apply, inner_inputs: Sequence[Variable]) -> dict[Variable, Variable]:
    """``{inner input: the outer input of node it reads from}``.

    ``inner_inputs`` is the node's inner input list, or a compiled copy of it (same order).
    A loop says where each one reads with ``outer_input_index(k)``; for any other Op with an
    inner graph (OpFromGraph) inner input ``k`` is outer input ``k``.
    """
    where = getattr(node.op, "outer_input_index", None)
    out: dict[Variable, Variable] = {}
    for k, v in enumerate(inner_inputs):
        j = where(k) if callable(where) else k
        if 0 <= j < len(node.inputs):
            out[v] = node.inputs[j]
    return out


def _loop_output(var: Any) -> bool:
    owner = getattr(var, "owner", None)
    return owner is not None and is_loop_op(getattr(owner, "op", None))


class CompiledInnerGraphs:
    """The compiled inner graphs of the loop nodes of compiled functions.

    A compiled loop runs its inner graph as rewritten by the inner function's compilation;
    Theano prints that version (``op.fn.maker.fgraph``). The loop's thunk keeps its inner
    function as ``thunk.inner_function`` (whose ``function.maker.fgraph`` is the rewritten
    graph); this finds them through the VMs' ``nodes`` and ``thunks``, nested loops
    included. A loop of no compiled function prints its Op's own graph.
    """

    def __init__(self) -> None:
        self.by_node: dict[Apply, Any] = {}

    def add_vm(self, vm: Any) -> None:
        nodes = getattr(vm, "nodes", None)
        thunks = getattr(vm, "thunks", None)
        if not isinstance(nodes, list | tuple) or not isinstance(thunks, list | tuple):
            return
        for node, thunk in zip(nodes, thunks):
            fgraph = getattr(
                getattr(
                    getattr(getattr(thunk, "inner_function", None), "function", None), "maker", None
                ),
                "fgraph",
                None,
            )
            if fgraph is not None and node not in self.by_node:
                self.by_node[node] = fgraph
                self.add_vm(getattr(thunk.inner_function, "vm", None))

    def graph(self, node: Apply) -> tuple[list[Variable], list[Variable]]:
        fgraph = self.by_node.get(node)
        n_out = len(node.op.inner_outputs)
        if (
            fgraph is not None
            and len(fgraph.inputs) == len(node.op.inner_inputs)
            and len(fgraph.outputs) >= n_out
        ):
            return list(fgraph.inputs), list(fgraph.outputs)[:n_out]
        graph = inner_graph(node.op)
        assert graph is not None
        return graph


class _Ids:
    """Hands out the ``[id X]`` strings; ``used`` maps object -> id string, ``done`` the printed."""

    def __init__(self, kind: str, used: dict[Any, str], done: dict[Any, str]) -> None:
        if kind not in ("CHAR", "int", "id", ""):
            raise ValueError(f"debugprint: ids must be 'CHAR', 'int', 'id' or '', got {kind!r}")
        self.kind = kind
        self.used = used
        self.done = done

    def get(self, obj: Hashable, printed: bool = True) -> str:
        if obj in self.used:
            id_str = self.used[obj]
        elif obj == "output":
            id_str = "output"
        elif self.kind == "id":
            id_str = f"[id {id(obj)}]"
        elif self.kind == "int":
            id_str = f"[id {len(self.used)}]"
        elif self.kind == "CHAR":
            id_str = f"[id {char_from_number(len(self.used))}]"
        else:
            id_str = ""
        if printed:
            self.done[obj] = id_str
        self.used[obj] = id_str
        return id_str


def _attr_name(thing: Any) -> str:
    for attr in ("name", "__name__"):
        value = getattr(thing, attr, None)
        if isinstance(value, str) and value:
            return value
    return str(thing)


def format_provenance(entry: Any, with_reason: bool = False) -> str:
    """One rewrite provenance record as ``name (location) replaced old``.

    ``entry`` has the fields ``rewrite`` (a name or a rewrite object), ``location`` (a string
    such as ``'canonicalize/math.py:42'`` or a ``(file, line)`` pair) and ``replaced`` (the
    variable or variables the rewrite replaced, or their printed form); a mapping with those
    keys works too. ``with_reason`` appends `` in <reason>`` (the walker that applied it).
    """
    get = entry.get if isinstance(entry, dict) else lambda k, d=None: getattr(entry, k, d)
    rewrite = get("rewrite")
    text = _attr_name(rewrite) if rewrite is not None else str(entry)
    location = get("location")
    if isinstance(location, tuple | list) and len(location) >= 2:
        location = f"{location[0]}:{location[1]}"
    if location:
        text += f" ({location})"
    replaced = get("replaced")
    if isinstance(replaced, list | tuple):
        replaced = ", ".join(str(r) for r in replaced)
    if replaced is not None and str(replaced):
        text += f" replaced {replaced}"
    reason = get("reason") if with_reason else None
    if reason:
        text += f" in {reason}"
    return text


def node_provenance(node: Any) -> list[Any]:
    """The rewrite provenance records of an Apply node (``node.tag.provenance``), or ``[]``."""
    prov = getattr(getattr(node, "tag", None), "provenance", None)
    if prov is None:
        outs = getattr(node, "outputs", None) or ()
        prov = getattr(getattr(outs[0], "tag", None), "provenance", None) if outs else None
    if prov is None:
        return []
    return list(prov) if isinstance(prov, list | tuple) else [prov]


def _is_function(obj: Any) -> bool:
    return getattr(getattr(obj, "maker", None), "fgraph", None) is not None


def _is_fgraph(obj: Any) -> bool:
    return (
        not isinstance(obj, Variable | Apply)
        and hasattr(obj, "outputs")
        and hasattr(obj, "inputs")
        and callable(getattr(obj, "toposort", None))
    )


def _targets(obj: Any, print_storage: bool) -> list[tuple[Any, dict | None, dict | None]]:
    """Expand what debugprint was given into (variable, toposort index map, storage map)."""
    objs = obj if isinstance(obj, list | tuple | set) else [obj]
    out: list[tuple[Any, dict | None, dict | None]] = []
    for o in objs:
        if isinstance(o, Variable):
            out.append((o, None, None))
        elif isinstance(o, Apply):
            out.extend((v, None, None) for v in o.outputs)
        elif _is_function(o):
            fgraph = o.maker.fgraph
            order = {node: i for i, node in enumerate(fgraph.toposort())}
            smap = getattr(getattr(o, "fn", None), "storage_map", None) if print_storage else None
            out.extend((v, order, smap) for v in fgraph.outputs)
        elif _is_fgraph(o):
            order = {node: i for i, node in enumerate(o.toposort())}
            smap = getattr(o, "storage_map", None) if print_storage else None
            out.extend((v, order, smap) for v in o.outputs)
        elif isinstance(getattr(o, "variable", None), Variable):  # In / Out specs
            out.append((o.variable, None, None))
        elif isinstance(o, int | float | np.ndarray):  # plain values print as themselves
            out.append((o, None, None))
        else:
            raise TypeError(
                f"debugprint cannot print an object of type {type(o).__name__} ({o!r}). "
                "HINT: pass a Variable, an Apply, a FunctionGraph, a compiled function, "
                "or a list of them."
            )
    return out


def debugprint(
    obj: Any,
    depth: int = -1,
    print_type: bool = False,
    file: IO[str] | str | None = None,
    ids: str = "CHAR",
    stop_on_name: bool = False,
    done: dict[Any, str] | None = None,
    print_storage: bool = False,
    print_clients: bool = False,
    used_ids: dict[Any, str] | None = None,
    print_rewrites: bool = False,
    print_destroy_map: bool = False,
    print_view_map: bool = False,
    print_test_value: bool | None = None,
) -> Any:
    """Print a graph as indented text, one line per variable (Theano's ``debugprint``).

    Parameters
    ----------
    obj
        A Variable, an Apply (all its outputs), a FunctionGraph or a compiled function (every
        output, with toposort indices), an ``In``/``Out`` spec, or a list of these (plain
        numbers and arrays in the list print as themselves).
    depth
        How many levels to print; ``-1`` for the whole graph.
    print_type
        Append each variable's type as `` <TensorType(float64, vector)>``.
    file
        ``None`` prints to ``sys.stdout``; ``'str'`` returns the text; any other value is a
        writable text file, which is returned.
    ids
        ``'CHAR'`` (``[id A]``, ..., ``[id Z]``, ``[id BA]``), ``'int'`` (``[id 0]``), ``'id'``
        (Python ids) or ``''`` (no ids).
    stop_on_name
        Do not print the inputs of a named variable.
    done, used_ids
        Dicts of already printed / already numbered objects, to share ids between calls.
    print_storage
        For a compiled function, append each variable's current value from its storage map.
    print_clients
        Append `` clients:[...]`` (the ids of the using nodes) to outputs used more than once.
    print_rewrites
        Under each node created by a rewrite, add a line
        `` ← local_mul_one (canonicalize/math.py:42) replaced Elemwise{mul,no_inplace}.0``
        per record of ``node.tag.provenance`` (an opgraph addition).
    print_destroy_map, print_view_map
        Show a node's non-empty ``destroy_map`` as ``d={0: [0]}`` and ``view_map`` as
        ``v={0: [0]}`` in the two fields before the toposort index. Off by default, as in
        Theano's ``printing.debugprint`` (whose documented output shows ``Gemv{inplace} [id B]
        ''   3``).

    Returns
    -------
    The string if ``file='str'``, the file object if one was given, else ``None`` (as Theano,
    so that an interactive ``debugprint(f)`` shows only the graph).
    """
    if not isinstance(depth, int) or isinstance(depth, bool):
        raise TypeError(f"debugprint: depth must be an int (-1 for unlimited), got {depth!r}")
    if file == "str":
        out: IO[str] = io.StringIO()
    elif file is None:
        out = sys.stdout
    elif isinstance(file, str):
        raise ValueError(
            f"debugprint: file must be None, 'str' or a writable file object, got {file!r}"
        )
    else:
        out = file
    id_maker = _Ids(ids, {} if used_ids is None else used_ids, {} if done is None else done)
    if print_test_value is None:
        print_test_value = bool(config.print_test_value)
    compiled = CompiledInnerGraphs()
    for o in obj if isinstance(obj, list | tuple | set) else [obj]:
        if _is_function(o):
            compiled.add_vm(getattr(o, "fn", None))
    # Theano's ``scan_ops``: loop outputs in the order the walk meets them (a loop met
    # through two of its outputs twice); the section below prints an inner graph for each.
    loops: list[Variable] = []
    options = {
        "depth": depth,
        "print_type": print_type,
        "stop_on_name": stop_on_name,
        "print_clients": print_clients,
        "print_rewrites": print_rewrites,
        "print_maps": (print_destroy_map, print_view_map),
        "print_test_value": print_test_value,
        "loops": loops,
    }
    for var, order, smap in _targets(obj, print_storage):
        if not isinstance(var, Variable):
            out.write(f"{var}\n")
            continue
        if _loop_output(var):
            loops.append(var)
        _print_tree(var, out, id_maker, order=order, smap=smap, **options)
    if loops:
        out.write("\nInner graphs of the scan ops:\n")
        i = 0
        while i < len(loops):  # nested loops are appended while their parents print
            var = loops[i]
            i += 1
            node = var.owner
            inner_ins, inner_outs = compiled.graph(node)
            links = inner_to_outer(node, inner_ins)
            out.write("\n")
            _print_tree(var, out, id_maker, order=None, smap=None, links=links, **options)
            for inner_out in inner_outs:
                if _loop_output(inner_out):
                    loops.append(inner_out)
                _print_tree(
                    inner_out,
                    out,
                    id_maker,
                    order=None,
                    smap=None,
                    links=links,
                    prefix=" >",
                    **options,
                )
    if file == "str":
        assert isinstance(out, io.StringIO)
        return out.getvalue()
    if file is None:
        out.flush()
        return None
    return file


def _write_test_value(var: Variable, pre_child: str, write: Any) -> None:
    """`` test_value: <repr>`` under ``var``'s line (continuation lines indented alike)."""
    try:
        text = var.__repr_test_value__()
    except AttributeError:
        return
    pad = pre_child + (" |" if var.owner is not None and var.owner.inputs else "  ")
    lines = text.splitlines() or [""]
    write(f"{pad} test_value: {lines[0]}\n")
    for line in lines[1:]:
        write(f"{pad}             {line}\n")


def _map_str(op: Any, attr: str, tag: str) -> str:
    value = getattr(op, attr, None)
    return f"{tag}={value}" if value else ""


def _clients_str(var: Variable, id_maker: _Ids) -> str:
    clients: Sequence[Any] = getattr(var, "clients", None) or ()
    if len(clients) <= 1:
        return ""
    return " clients:" + str([id_maker.get(c, printed=False) for c, _ in clients])


def _print_tree(
    root: Variable,
    out: IO[str],
    id_maker: _Ids,
    *,
    depth: int,
    print_type: bool,
    stop_on_name: bool,
    order: dict | None,
    smap: dict | None,
    print_clients: bool,
    print_rewrites: bool,
    print_maps: tuple[bool, bool] = (False, False),
    print_test_value: bool = False,
    loops: list[Variable] | None = None,
    links: dict[Variable, Variable] | None = None,
    prefix: str = "",
) -> None:
    """Print ``root`` and its ancestors depth-first (an explicit stack, not recursion).

    Loop outputs met among the inputs of printed nodes are appended to ``loops`` (in the
    order the walk meets them, as Theano's recursion did); an input of an inner graph found in
    ``links`` prints `` -> [id X]``, the id of the outer input it reads from.
    """
    write = out.write
    stack: list[tuple[Variable, str, str, int, bool]] = [(root, prefix, prefix, depth, False)]
    while stack:
        r, pre, pre_child, d, is_child = stack.pop()
        if is_child and loops is not None and _loop_output(r):
            loops.append(r)
        if d == 0:
            continue
        type_str = f" <{r.type}>" if print_type else ""
        node = r.owner
        if links is not None and node is None and r in links:
            outer = links[r]
            id_str = id_maker.get(r)
            outer_id = id_maker.get(outer.owner if outer.owner is not None else outer)
            write(f"{pre}{r} {id_str}{type_str} -> {outer_id}\n")
            continue
        if node is None or not hasattr(node, "op"):
            data = f" {smap.get(r, '')}" if smap else ""
            write(f"{pre}{r} {id_maker.get(r)}{type_str}{data}\n")
            if print_test_value:
                _write_test_value(r, pre_child, write)
            continue
        name = r.name if r.name is not None else ""
        op = node.op
        idx = "" if len(node.outputs) == 1 else f".{node.outputs.index(r)}"
        already = node in id_maker.done
        id_str = id_maker.get(node)
        index = str(order[node]) if order and node in order else ""
        data = f" {smap.get(node.outputs[0], '')}" if smap else ""
        clients = _clients_str(r, id_maker) if print_clients else ""
        dmap = _map_str(op, "destroy_map", "d") if print_maps[0] else ""
        vmap = _map_str(op, "view_map", "v") if print_maps[1] else ""
        write(f"{pre}{op}{idx} {id_str}{type_str} '{name}' {dmap} {vmap} {index}{data}{clients}\n")
        if print_test_value:
            _write_test_value(r, pre_child, write)
        if already:
            continue
        if print_rewrites:
            for entry in node_provenance(node):
                write(f"{pre_child} \u2190 {format_provenance(entry)}\n")
        if stop_on_name and r.name is not None:
            continue
        children = []
        last = len(node.inputs) - 1
        for i, inp in enumerate(node.inputs):
            child_pre_child = pre_child + ("  " if i == last else " |")
            children.append((inp, pre_child + " |", child_pre_child, d - 1, True))
        stack.extend(reversed(children))
