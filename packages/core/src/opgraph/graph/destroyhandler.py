"""DestroyHandler: the feature that keeps in-place (destructive) Ops correct.

An Op that overwrites one of its inputs declares it in ``destroy_map`` (``{output: [input]}``);
an Op whose output shares memory with an input declares it in ``view_map``. A *buffer* is a
root variable (one that views nothing) together with every view of it, views of views
included. Attached to a FunctionGraph, a :class:`DestroyHandler` makes
``fgraph.validate()`` (hence ``fgraph.replace_all_validate``) reject any graph where:

1. a buffer is overwritten by more than one node;
2. the buffer overwritten is a Constant, a variable tagged ``indestructible``, or holds an
   output of the graph (outputs are read after every node ran);
3. the overwriting node also reads the same buffer through another input, unless its Op
   tolerates that (Theano's ``destroyhandler_tolerate_same`` / ``_tolerate_aliased``);
4. a node that reads the buffer cannot run before the node that overwrites it (it needs
   that node's result, directly or through other in-place constraints).

For rule 4, :meth:`DestroyHandler.orderings` tells ``fgraph.toposort()`` (and so every
linker) to run each reader of a buffer before the node that overwrites it; a graph is
inconsistent when those constraints form a cycle. Inputs of a compiled function are
protected by a :class:`Supervisor` feature: every input the user did not mark
``In(x, mutable=True)``, and every shared variable the function does not update. A shared
variable it updates may be overwritten in place under the rules of :class:`UpdateGuard`,
which keep a failing call from changing it.
``ReplaceValidate`` reverts a replacement that breaks any rule, so in-place rewrites
simply try and see.

The handler is incremental: it records views as nodes come and go, recomputes the facts
of an in-place node only when something it depends on changed, and looks for cycles only
from the nodes that changed since the last successful validation, and only when some
ordering constraint exists at all. Every walk keeps an explicit stack.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.features import AlreadyThere, Feature, InconsistencyError

if TYPE_CHECKING:
    from opgraph.graph.fg import FunctionGraph

__all__ = ["DestroyHandler", "Supervisor", "UpdateGuard", "protected_inputs"]


@dataclass
class _DestroyInfo:
    """What one in-place node overwrites and who must run before it."""

    roots: list[Variable]  # the root of each destroyed input
    tree: list[Variable]  # every variable sharing a destroyed buffer (roots and views)
    readers: list[Apply]  # other nodes reading that memory: they run first
    error: str | None  # why the node is not acceptable, if it is not


def _is_output(var: Variable) -> bool:
    return any(isinstance(c, str) for c, _ in var.clients)  # type: ignore[attr-defined]


_NO_ALIASES: Mapping[int, int] = MappingProxyType({})


def _single_input_map(op: Any, attr: str) -> Mapping[int, int]:
    """``view_map``/``destroy_map`` of ``op`` as ``{output: input}`` (one input each)."""
    mapping = getattr(op, attr, None)
    if not mapping:
        return _NO_ALIASES  # most ops (called for every node imported or pruned)
    result = {}
    for out_idx, in_list in mapping.items():
        in_list = list(in_list)
        if len(in_list) != 1:
            raise NotImplementedError(
                f"{op}.{attr} says output {out_idx} aliases inputs {in_list}; an output may "
                "view or overwrite exactly one input."
            )
        result[out_idx] = in_list[0]
    return result


class DestroyHandler(Feature):
    """Validates ``view_map``/``destroy_map`` over a FunctionGraph (see the module docstring).

    Adds to the graph ``fgraph.destroyers(var)`` (the nodes overwriting ``var``'s buffer),
    ``fgraph.has_destroyers(vars)`` and ``fgraph.destroy_handler`` (this feature). One
    DestroyHandler serves one graph.

    Parameters
    ----------
    do_imports_on_attach
        Record the nodes already in the graph when attached (Theano's argument; keep True).
    algo
        Accepted for Theano compatibility (``"regular"``/``"fast"``); the checks are the same.
    """

    pickle_rm_attr = ["destroyers", "has_destroyers", "destroy_handler"]

    def __init__(self, do_imports_on_attach: bool = True, algo: str | None = None) -> None:
        self.fgraph: FunctionGraph | None = None
        self.do_imports_on_attach = do_imports_on_attach
        self.algo = algo
        self._reset()

    def _reset(self) -> None:
        #: view output -> the input it views; input -> its direct views
        self.view_i: dict[Variable, Variable] = {}
        self.view_o: dict[Variable, dict[Variable, None]] = {}
        # every in-place node of the graph -> its facts (None until computed)
        self._info: dict[Apply, _DestroyInfo | None] = {}
        self._dirty: dict[Apply, None] = {}
        self._watchers: dict[Variable, dict[Apply, None]] = {}
        self._root_destroyers: dict[Variable, dict[Apply, None]] = {}
        self._after: dict[Apply, dict[Apply, None]] = {}  # reader -> nodes that must follow
        self._n_edges = 0
        self._bad: dict[Apply, str] = {}
        self._bad_roots: dict[Variable, None] = {}
        self._heads: dict[Apply, None] = {}  # nodes with new incoming edges since validation

    # ------------------------------------------------------------------ attaching

    def on_attach(self, fgraph: FunctionGraph) -> None:
        if getattr(fgraph, "destroy_handler", None) is not None or hasattr(fgraph, "destroyers"):
            raise AlreadyThere("a DestroyHandler is already attached (fgraph.destroyers exists)")
        if self.fgraph is not None and self.fgraph is not fgraph:
            raise ValueError(
                "this DestroyHandler is attached to another FunctionGraph already; one "
                "DestroyHandler serves one graph. HINT: copy the graph with "
                "fgraph.clone_get_equiv(attach_feature=False) and attach a new "
                "DestroyHandler() to the copy."
            )
        self.fgraph = fgraph
        self.unpickle(fgraph)

    def unpickle(self, fgraph: FunctionGraph) -> None:
        """Put back the methods this feature adds to ``fgraph`` and rebuild its records."""
        self.fgraph = fgraph
        fgraph.destroyers = self.get_destroyers_of  # type: ignore[attr-defined]
        fgraph.has_destroyers = self.has_destroyers  # type: ignore[attr-defined]
        fgraph.destroy_handler = self  # type: ignore[attr-defined]
        self._reset()
        if self.do_imports_on_attach:
            for node in fgraph.io_toposort():
                self.on_import(fgraph, node, "on_attach")

    def on_detach(self, fgraph: FunctionGraph) -> None:
        for attr in self.pickle_rm_attr:
            fgraph.__dict__.pop(attr, None)
        self.fgraph = None
        self._reset()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for key in list(state):
            if key.startswith("_") or key in ("view_i", "view_o"):
                del state[key]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reset()  # rebuilt by unpickle(fgraph)

    # ------------------------------------------------------------------ graph events

    def on_import(self, fgraph: FunctionGraph, node: Apply, reason: Any) -> None:
        for out_idx, in_idx in _single_input_map(node.op, "view_map").items():
            self._set_view(node.outputs[out_idx], node.inputs[in_idx])
        if _single_input_map(node.op, "destroy_map"):
            self._info[node] = None
            self._dirty[node] = None
        self._touch(node.inputs)
        self._touch(node.outputs)
        self._heads[node] = None

    def on_prune(self, fgraph: FunctionGraph, node: Apply, reason: Any) -> None:
        for out in node.outputs:
            self._unset_view(out)
            self.view_o.pop(out, None)
        if node in self._info:
            info = self._info.pop(node)
            if info is not None:
                self._forget(node, info)
            self._dirty.pop(node, None)
            self._bad.pop(node, None)
        self._touch(node.inputs)
        self._touch(node.outputs)
        self._heads.pop(node, None)

    def on_change_input(
        self,
        fgraph: FunctionGraph,
        node: Any,
        i: int,
        var: Variable,
        new_var: Variable,
        reason: Any = None,
    ) -> None:
        self._touch((var, new_var))
        if isinstance(node, str):  # an output of the graph changed
            return
        for out_idx, in_idx in _single_input_map(node.op, "view_map").items():
            if in_idx == i:
                self._unset_view(node.outputs[out_idx])
                self._set_view(node.outputs[out_idx], new_var)
        if node in self._info:
            self._dirty[node] = None
        self._touch(node.outputs)
        self._heads[node] = None

    def _set_view(self, view: Variable, viewed: Variable) -> None:
        self.view_i[view] = viewed
        self.view_o.setdefault(viewed, {})[view] = None

    def _unset_view(self, view: Variable) -> None:
        viewed = self.view_i.pop(view, None)
        if viewed is not None:
            views = self.view_o.get(viewed)
            if views is not None:
                views.pop(view, None)
                if not views:
                    del self.view_o[viewed]

    def _touch(self, variables: Iterable[Variable]) -> None:
        """Mark for recomputation the in-place nodes whose buffers involve ``variables``."""
        watchers = self._watchers
        if not watchers:
            return  # no in-place node yet
        for var in variables:
            nodes = watchers.get(var)
            if nodes:
                self._dirty.update(nodes)

    # ------------------------------------------------------------------ the facts

    def root_of(self, var: Variable) -> Variable:
        """The variable whose memory ``var`` views (``var`` itself if it views nothing)."""
        view_i = self.view_i
        seen = 0
        while var in view_i:
            var = view_i[var]
            seen += 1
            if seen > len(view_i):
                raise RuntimeError(f"the views of {var} form a cycle; the graph is corrupt")
        return var

    def views_of(self, root: Variable) -> list[Variable]:
        """``root`` and every variable viewing it, views of views included (breadth first)."""
        tree = [root]
        seen = {root}
        k = 0
        while k < len(tree):
            for view in self.view_o.get(tree[k], ()):
                if view not in seen:
                    seen.add(view)
                    tree.append(view)
            k += 1
        return tree

    def _compute(self, node: Apply) -> _DestroyInfo:
        op = node.op
        tolerate_same = [tuple(p) for p in getattr(op, "destroyhandler_tolerate_same", ()) or ()]
        tolerate_aliased = [
            tuple(p) for p in getattr(op, "destroyhandler_tolerate_aliased", ()) or ()
        ]
        roots: list[Variable] = []
        tree_all: dict[Variable, None] = {}
        error = None
        for _out_idx, j in sorted(_single_input_map(op, "destroy_map").items()):
            destroyed = node.inputs[j]
            root = self.root_of(destroyed)
            tree = self.views_of(root)
            roots.append(root)
            tree_all.update(dict.fromkeys(tree))
            if isinstance(root, Constant) or getattr(root.tag, "indestructible", False):
                error = f"{node} would overwrite {root}, a constant or indestructible variable"
            elif any(_is_output(v) for v in tree):
                shown = next(v for v in tree if _is_output(v))
                error = (
                    f"{node} would overwrite {destroyed}, whose memory holds {shown}, an output "
                    "of the graph (read after every node ran)"
                )
            tolerated = {b for a, b in tolerate_same if a == j} | {j}
            ignored = {b for a, b in tolerate_aliased if a == j}
            in_tree = set(tree)
            for k, inp in enumerate(node.inputs):
                if (
                    k not in ignored
                    and inp in in_tree
                    and (k not in tolerated or inp is not destroyed)
                ):
                    error = (
                        f"input aliasing: {node} overwrites its input {j} ({destroyed}) while "
                        f"its input {k} ({inp}) shares that memory"
                    )
        readers: dict[Apply, None] = {}
        for var in tree_all:
            for client, _ in var.clients:  # type: ignore[attr-defined]
                if not isinstance(client, str) and client is not node:
                    readers[client] = None
        return _DestroyInfo(roots, list(tree_all), list(readers), error)

    def _forget(self, node: Apply, info: _DestroyInfo) -> None:
        for var in info.tree:
            nodes = self._watchers.get(var)
            if nodes is not None:
                nodes.pop(node, None)
                if not nodes:
                    del self._watchers[var]
        for root in info.roots:
            nodes = self._root_destroyers.get(root)
            if nodes is not None:
                nodes.pop(node, None)
                if not nodes:
                    del self._root_destroyers[root]
        for reader in info.readers:
            after = self._after.get(reader)
            if after is not None:
                after.pop(node, None)
                if not after:
                    del self._after[reader]
        self._n_edges -= len(info.readers)

    def _refresh(self) -> None:
        """Recompute the facts of every in-place node something changed for."""
        while self._dirty:
            node = next(iter(self._dirty))
            del self._dirty[node]
            if node not in self._info:
                continue
            old = self._info[node]
            if old is not None:
                self._forget(node, old)
            info = self._info[node] = self._compute(node)
            for var in info.tree:
                self._watchers.setdefault(var, {})[node] = None
            for root in info.roots:
                destroyers = self._root_destroyers.setdefault(root, {})
                destroyers[node] = None
                if len(destroyers) > 1:
                    self._bad_roots[root] = None
            for reader in info.readers:
                self._after.setdefault(reader, {})[node] = None
            self._n_edges += len(info.readers)
            if info.readers:
                self._heads[node] = None
            if info.error is not None:
                self._bad[node] = info.error
            else:
                self._bad.pop(node, None)

    # ------------------------------------------------------------------ queries

    def get_destroyers_of(self, var: Variable) -> list[Apply]:
        """The nodes that overwrite the buffer holding ``var`` (``fgraph.destroyers(var)``)."""
        if not self._info:
            return []
        self._refresh()
        return list(self._root_destroyers.get(self.root_of(var), ()))

    def has_destroyers(self, variables: Iterable[Variable]) -> bool:
        """True if a node overwrites the buffer of any of ``variables``."""
        return any(self.get_destroyers_of(v) for v in variables)

    def can_destroy(self, var: Variable, protected: Collection[Variable] = ()) -> bool:
        """Whether a new node may overwrite ``var``, as far as a quick check can tell.

        False if ``var``'s buffer is a Constant, indestructible, in ``protected`` (see
        :func:`protected_inputs`), holds an output of the graph, or is overwritten already.
        Whether its other readers can run first is left to :meth:`validate`.
        """
        root = self.root_of(var)
        if isinstance(root, Constant) or getattr(root.tag, "indestructible", False):
            return False
        if root in protected or self.get_destroyers_of(root):
            return False
        return not any(_is_output(v) for v in self.views_of(root))

    def orderings(self, fgraph: FunctionGraph) -> dict[Apply, list[Apply]]:
        """``{in-place node: [the other nodes reading its buffer]}``: they must run first."""
        if not self._info:
            return {}
        self._refresh()
        return {
            node: list(info.readers)
            for node, info in self._info.items()
            if info is not None and info.readers
        }

    # ------------------------------------------------------------------ validation

    def validate(self, fgraph: FunctionGraph) -> None:
        """Raise :class:`InconsistencyError` if an in-place node breaks a rule (see above)."""
        if not self._info:
            self._heads.clear()
            return
        self._refresh()
        if self._bad:
            raise InconsistencyError(next(iter(self._bad.values())))
        for root in list(self._bad_roots):
            destroyers = self._root_destroyers.get(root, {})
            if len(destroyers) > 1:
                names = ", ".join(str(d) for d in destroyers)
                raise InconsistencyError(
                    f"the memory of {root} would be overwritten by several nodes ({names}); "
                    "a buffer may be overwritten by one node only"
                )
            del self._bad_roots[root]
        if self._n_edges and self._heads:
            cycle = self._find_cycle(fgraph)
            if cycle is not None:
                first, second = cycle
                raise InconsistencyError(
                    "in-place operations would need an impossible order: "
                    f"{first} would have to run both before and after {second} (a node "
                    "reads a buffer that an in-place node overwrites, but needs that node's "
                    "result)"
                )
        self._heads.clear()

    def _successors(self, node: Apply) -> Iterator[Apply]:
        for out in node.outputs:
            for client, _ in out.clients:  # type: ignore[attr-defined]
                if not isinstance(client, str):
                    yield client
        yield from self._after.get(node, ())

    def _find_cycle(self, fgraph: FunctionGraph) -> tuple[Apply, Apply] | None:
        """A back edge ``(node, predecessor)`` reachable from the changed nodes, if any.

        A new cycle must go through an edge added since the last validation, so a
        depth-first walk (data edges plus ordering constraints) from the heads of those
        edges finds it.
        """
        apply_nodes = fgraph.apply_nodes
        color: dict[Apply, int] = {}  # 1: on the walk's path, 2: done
        for head in self._heads:
            if head not in apply_nodes or head in color:
                continue
            color[head] = 1
            stack: list[tuple[Apply, Iterator[Apply]]] = [(head, self._successors(head))]
            while stack:
                node, successors = stack[-1]
                for nxt in successors:
                    state = color.get(nxt)
                    if state is None:
                        color[nxt] = 1
                        stack.append((nxt, self._successors(nxt)))
                        break
                    if state == 1:
                        return nxt, node
                else:
                    stack.pop()
                    color[node] = 2
        return None


class Supervisor(Feature):
    """Protects ``protected`` variables (a function's inputs) from being overwritten.

    ``validate`` raises :class:`InconsistencyError` when a node overwrites (the buffer of)
    one of them. ``function()`` attaches one protecting every input the user did not mark
    ``In(x, mutable=True)`` and every shared variable it does not update (those it updates
    are left to :class:`UpdateGuard`, or protected too when it cannot keep them safe).
    """

    def __init__(self, protected: Iterable[Variable]) -> None:
        self.protected = list(protected)

    def validate(self, fgraph: FunctionGraph) -> None:
        destroyers = getattr(fgraph, "destroyers", None)
        if destroyers is None:
            return
        for var in self.protected:
            nodes = destroyers(var)
            if nodes:
                raise InconsistencyError(
                    f"{nodes[0]} would overwrite {var}, which the function must not change "
                    "(an input not marked mutable, or state kept between calls)"
                )


class UpdateGuard(Feature):
    """Lets a compiled function overwrite the shared variables it updates, all-or-nothing.

    ``guarded`` are positions in ``fgraph.inputs`` of updated shared variables (their update
    values are found through ``fgraph.update_mapping``, so the feature survives copies and
    pickles). A node may overwrite a guarded input's memory (Theano's in-place updates:
    ``W -= lr * g`` as one in-place Gemm, an embedding's rows incremented without copying
    the table) only when the work on that memory is a *commit chain*:

    - one node overwrites the input; every later use of the result is a view of it, and it
      ends as the input's own update value (never another output, never another shared
      variable's update);
    - :meth:`orderings` runs every commit chain after every other node of the graph.

    So a call that fails in any other node (a shape error, an ``Assert``, a ``Raise``) has
    written nothing, and a writing node checks its inputs' shapes before it writes. What is
    left is two writing nodes of different variables, the second failing after the first
    wrote (a shape the rest of the graph never checked).
    ``validate`` raises :class:`InconsistencyError` on any other use, and the in-place
    rewrite that made it is reverted (the update then computes a new value, as before).
    """

    def __init__(self, guarded: Iterable[int]) -> None:
        self.guarded = sorted(set(guarded))

    def _update_of(self, fgraph: FunctionGraph) -> dict[int, int]:
        """``{guarded input position: its update's output position}``."""
        mapping = getattr(fgraph, "update_mapping", None) or {}
        wanted = set(self.guarded)
        return {inp: out for out, inp in mapping.items() if inp in wanted}

    def _chains(self, fgraph: FunctionGraph) -> list[tuple[Apply, list[Apply]]]:
        """``[(first node overwriting a guarded input, every node of its chain)]``.

        Raises InconsistencyError when a chain breaks a rule of the class docstring.
        """
        destroyers = getattr(fgraph, "destroyers", None)
        if destroyers is None:
            return []
        chains = []
        for inp_pos, out_pos in self._update_of(fgraph).items():
            var = fgraph.inputs[inp_pos]
            heads = destroyers(var)
            if not heads:
                continue
            chains.append((heads[0], self._walk(fgraph, var, heads[0], out_pos)))
        if chains:
            commit = {node for _head, nodes in chains for node in nodes}
            for node in commit:
                for inp in node.inputs:
                    other = [d for d in destroyers(inp) if d not in commit]
                    if other:  # it would have to wait for node, which waits for everything
                        raise InconsistencyError(
                            f"{other[0]} overwrites {inp}, which {node} reads after every "
                            "other node ran"
                        )
        return chains

    @staticmethod
    def _walk(fgraph: FunctionGraph, var: Variable, head: Apply, out_pos: int) -> list[Apply]:
        """The nodes of ``head``'s chain on ``var``'s memory, checked (see the class)."""
        nodes, seen, reached = [head], {head}, False
        stack = [(head, list(head.outputs))]
        while stack:
            node, outputs = stack.pop()
            for value in outputs:
                for client, pos in value.clients:  # type: ignore[attr-defined]
                    if isinstance(client, str):
                        if pos != out_pos:
                            raise InconsistencyError(
                                f"{node} overwrites shared variable {var} in place, but its "
                                "result would leave the call as another output, not as "
                                "its update"
                            )
                        reached = True
                        continue
                    op = client.op
                    writes = pos in _single_input_map(op, "destroy_map").values()
                    views = pos in _single_input_map(op, "view_map").values()
                    if writes:
                        raise InconsistencyError(
                            f"{client} would overwrite shared variable {var} again after "
                            f"{head}: one node writes an update in place (a second one could "
                            "fail after the first wrote)"
                        )
                    if not (views and not getattr(op, "destroy_map", None)):
                        raise InconsistencyError(
                            f"{client} uses {value}, computed by {node} after it overwrote "
                            f"shared variable {var} in place: only the variable's own update "
                            "may run after the write"
                        )
                    if client not in seen:
                        seen.add(client)
                        nodes.append(client)
                        stack.append((client, list(client.outputs)))
        if not reached:
            raise InconsistencyError(
                f"{head} overwrites shared variable {var} in place, but its result is not "
                "the variable's update"
            )
        return nodes

    def validate(self, fgraph: FunctionGraph) -> None:
        self._chains(fgraph)

    def orderings(self, fgraph: FunctionGraph) -> dict[Apply, list[Apply]]:
        """``{first node of each commit chain: the last nodes of everything else}``."""
        try:
            chains = self._chains(fgraph)
        except InconsistencyError:
            return {}  # validate reports it; an invalid graph is never linked
        if not chains:
            return {}
        commit: set[Apply] = set()
        for _head, nodes in chains:
            commit.update(nodes)
        order = fgraph.io_toposort()
        rest = {node for node in order if node not in commit}
        sinks = [
            node
            for node in order
            if node in rest
            and not any(
                c in rest
                for out in node.outputs
                for c, _ in out.clients  # type: ignore[attr-defined]
            )
        ]
        return {head: list(sinks) for head, _nodes in chains}


def protected_inputs(fgraph: FunctionGraph) -> set[Variable]:
    """The inputs of ``fgraph`` that no in-place rewrite may overwrite.

    Those protected by the :class:`Supervisor` features attached (``function()`` attaches
    one); when there is none, every input, which is the safe choice.
    """
    supervisors = [f for f in fgraph.features if isinstance(f, Supervisor)]
    if supervisors:
        return {var for sup in supervisors for var in sup.protected}
    return set(fgraph.inputs)


def attach_destroy_handler(fgraph: Any) -> None:
    """Give ``fgraph`` a DestroyHandler unless it has one: what in-place rewriters require."""
    if hasattr(fgraph, "destroyers") or hasattr(fgraph, "destroy_handler"):
        return
    fgraph.attach_feature(DestroyHandler())
