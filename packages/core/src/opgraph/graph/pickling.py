"""Pickling graphs of any depth: a deep graph is written as a flat, topologically ordered list.

Pickle (and ``copy.deepcopy``) follow references depth-first: a Variable's ``owner``, the
owner's ``inputs``, their owners... A chain of a few hundred nodes exceeds the recursion
limit (and raising the limit overflows the C stack instead). Here, a Variable or Apply met
for the first time is reduced to ``(_flat_root, (items, k, end))`` where ``items`` is the
node's whole ancestry, Apply nodes and their outputs in topological order, each the real
object. Pickle writes ``items`` one after another; when it reaches an item, that item is
"pending" in this module's table and reduces *shallowly* (its ordinary ``__getstate__``
state). Everything a shallow state refers to was written before it (its inputs) or refers
back only to objects already written (an output's owner), so the nesting stays a few levels
deep whatever the graph's depth. On loading, ``_flat_root`` returns ``items[k]``.

Identity is what pickle's memo gives: the items are the objects themselves, so a
sub-expression shared by two pickled roots, an output's ``owner`` and ``index``, tags and
names all come back as they were. A second root written in the same pickle walks only the
part of its ancestry not written yet (the table remembers which nodes this pickler wrote,
for as long as that pickler lives: its memo keeps ``end``, which the table refers to weakly).

A node pickle meets before its turn (through another node's tag, say) gets a flat list of its
own, as a new root; so does one that another live pickler wrote (one pickling inside
another).

Nodes of a FunctionGraph already pickle flat (the graph restores their links from flat lists,
see ``FunctionGraph.__getstate__``): they always reduce shallowly and end a walk. Leaves
(graph inputs, Constants, shared variables) reduce shallowly too: nothing hangs below them.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

__all__ = ["reduce_graph_node"]


class _Table:
    """The nodes of the flat lists one thread is writing: ``id(node) -> weakref`` to the
    ``_End`` of the node's list, in ``pending`` until pickle writes the node, then in
    ``written`` (that pickler has it in its memo).

    An entry whose ``_End`` is dead belongs to a pickler that has finished (or failed) and is
    ignored; when no ``_End`` of the thread is alive any more, the table is emptied. (Weak
    references shared by a list's nodes rather than a record per node: a record per node
    would be garbage-collector work proportional to the graph.)
    """

    def __init__(self) -> None:
        self.pending: dict[int, weakref.ref[Any]] = {}
        self.written: dict[int, weakref.ref[Any]] = {}
        self.ends: weakref.WeakSet[Any] = weakref.WeakSet()
        self.sweep_at = 4096

    def release(self) -> None:
        """Forget every entry once no pickler of this thread is alive (an ``_End``'s
        finalizer: whichever thread frees the pickler)."""
        if not any(True for _ in self.ends):
            self.pending.clear()
            self.written.clear()
            self.sweep_at = 4096

    def sweep(self) -> None:
        """Drop the entries of dead picklers (the table outgrew the last sweep)."""
        for entries in (self.pending, self.written):
            for key in [k for k, r in list(entries.items()) if r() is None]:
                entries.pop(key, None)
        self.sweep_at = max(4096, 2 * (len(self.pending) + len(self.written)))


class _PerThread(threading.local):
    def __init__(self) -> None:
        self.table = _Table()


_TABLES = _PerThread()


class _End:
    """The last argument of a flat list's reduction: written after every item, it forgets
    the items that stayed pending (pickle found them in its memo and did not reduce them).

    Kept alive by the pickler's memo for as long as the pickler lives, so that a weak
    reference to it tells whether the nodes marked written are in a live memo.
    """

    __slots__ = ("__weakref__", "items", "root")

    def __init__(self, items: tuple[Any, ...], root: Any) -> None:
        self.items = items
        self.root = root  # the node the list was made for: everything before it is written

    def forget_written(self, written: dict[int, weakref.ref[Any]]) -> None:
        """Drop the written marks of this list's items (another pickler's)."""
        ref = weakref.ref(self)
        for item in self.items:
            if written.get(id(item)) == ref:
                del written[id(item)]

    def __reduce_ex__(self, protocol: Any) -> Any:
        pending = _TABLES.table.pending
        for item in self.items:
            ref = pending.get(id(item))
            if ref is not None and ref() is self:
                del pending[id(item)]
        return (_end, ())

    def __deepcopy__(self, memo: dict[int, Any]) -> None:
        self.__reduce_ex__(4)
        memo.setdefault(id(memo), []).append(self)  # alive as long as deepcopy's memo
        return None


def _end() -> None:
    """What an ``_End`` unpickles to (nothing: it only marks where a flat list ends)."""
    return None


def _flat_root(items: tuple[Any, ...], k: int, end: Any = None) -> Any:
    """Unpickle a flat list: its objects are rebuilt in order; return the one asked for."""
    return items[k]


def _in_fgraph(node: Any) -> bool:
    return node.__dict__.get("fgraph") is not None


def _shallow(node: Any, protocol: Any) -> Any:
    if type(node).__reduce__ is not object.__reduce__:
        return node.__reduce__()  # a subclass's own reduction
    return object.__reduce_ex__(node, protocol)


def reduce_graph_node(node: Any, protocol: Any, is_apply: bool = False) -> Any:
    """``__reduce_ex__`` of Variable and Apply (``is_apply``): shallow for a pending node, a
    leaf or a FunctionGraph's node; else the flat list of the node's ancestry (see the
    module doc)."""
    if is_apply:
        owner = node
    else:
        owner = node.__dict__.get("owner")
        if owner is None:  # a leaf (a Constant's owner is a property, never in its dict)
            return _shallow(node, protocol)
    if _in_fgraph(owner):
        return _shallow(node, protocol)
    table = _TABLES.table
    ref = table.pending.pop(id(node), None)
    end = ref() if ref is not None else None
    if end is not None:
        if end.root is node or _ready(node, owner, is_apply, table.written):
            table.written[id(node)] = ref
            return _shallow(node, protocol)
        # Met before its turn (e.g. through another node's tag): what it refers to is not
        # written yet, so it gets a flat list of its own, as a new root. (The root of a list
        # is written shallowly when its turn comes, ready or not: what it refers to comes
        # before it in the list, so a walk ends even if pickle skips some of them, e.g.
        # objects a persistent_id writes.)
    else:
        ref = table.written.get(id(node))
        other = ref() if ref is not None else None
        if other is not None:
            # Written by another pickler still alive (one pickling inside another, or one the
            # caller keeps): this pickler has not written that list; forget its marks.
            other.forget_written(table.written)
    items = _ancestry(owner, table.written)
    if not is_apply and not any(out is node for out in owner.outputs):
        items += (node,)  # an inconsistent graph: its owner does not list it
    end = _End(items, node)
    table.ends.add(end)
    weakref.finalize(end, table.release)
    ref = weakref.ref(end)
    table.pending.update(dict.fromkeys(map(id, items), ref))
    if len(table.pending) + len(table.written) > table.sweep_at:
        table.sweep()
    k = next(i for i in range(len(items) - 1, -1, -1) if items[i] is node)
    return (_flat_root, (items, k, end))


def _ready(node: Any, owner: Any, is_apply: bool, written: dict[int, weakref.ref[Any]]) -> bool:
    """Whether every node that ``node``'s shallow state refers to upwards (an Apply's inputs'
    owners, a Variable's owner) is written, or is a leaf or a FunctionGraph's node."""
    if not is_apply:
        return _stops(owner, written)
    for var in node.inputs:
        up = var.__dict__.get("owner")
        if up is not None and not _stops(up, written):
            return False
    return True


def _stops(apply: Any, written: dict[int, weakref.ref[Any]]) -> bool:
    """Whether a walk ends at ``apply``: a FunctionGraph's node, or one this live pickler wrote."""
    if _in_fgraph(apply):
        return True
    ref = written.get(id(apply))
    return ref is not None and ref() is not None


def _ancestry(apply: Any, written: dict[int, weakref.ref[Any]]) -> tuple[Any, ...]:
    """``apply`` and the Apply nodes it depends on, each followed by its outputs, in
    topological order; a walk stops at the nodes of :func:`_stops`. Iterative."""
    order: list[Any] = []
    seen = {id(apply)}
    stack = [(apply, iter(apply.inputs))]
    while stack:
        node, inputs = stack[-1]
        for var in inputs:
            owner = var.__dict__.get("owner")
            if owner is None or id(owner) in seen or _stops(owner, written):
                continue
            seen.add(id(owner))
            stack.append((owner, iter(owner.inputs)))
            break
        else:
            stack.pop()
            order.append(node)
            order.extend(node.outputs)
    return tuple(order)
