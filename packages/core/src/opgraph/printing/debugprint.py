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
"""

from __future__ import annotations

import io
import sys
from collections.abc import Hashable, Sequence
from typing import IO, Any

import numpy as np

from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Variable

__all__ = ["char_from_number", "debugprint", "format_provenance"]


def char_from_number(number: int) -> str:
    """Render ``number`` in base 26 with the capital letters as digits (0 -> A, 26 -> BA)."""
    if number == 0:
        return "A"
    digits = ""
    while number:
        number, rem = divmod(number, 26)
        digits = chr(ord("A") + rem) + digits
    return digits


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
    for var, order, smap in _targets(obj, print_storage):
        if not isinstance(var, Variable):
            out.write(f"{var}\n")
            continue
        _print_tree(
            var,
            out,
            id_maker,
            depth=depth,
            print_type=print_type,
            stop_on_name=stop_on_name,
            order=order,
            smap=smap,
            print_clients=print_clients,
            print_rewrites=print_rewrites,
            print_maps=(print_destroy_map, print_view_map),
            print_test_value=print_test_value,
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
    prefix: str = "",
) -> None:
    """Print ``root`` and its ancestors depth-first (an explicit stack, not recursion)."""
    write = out.write
    stack: list[tuple[Variable, str, str, int]] = [(root, prefix, prefix, depth)]
    while stack:
        r, pre, pre_child, d = stack.pop()
        if d == 0:
            continue
        type_str = f" <{r.type}>" if print_type else ""
        node = r.owner
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
            children.append((inp, pre_child + " |", child_pre_child, d - 1))
        stack.extend(reversed(children))
