"""FunctionGraph: the graph being compiled, with its clients, features and in-place edits.

A FunctionGraph owns a (by default cloned) graph from ``inputs`` to ``outputs``. Every variable
in it gets ``var.clients`` (where it is used: ``(apply_node, input_index)`` pairs and
``('output', output_index)``) and ``var.fgraph``; every Apply gets ``node.fgraph``. Rewrites edit
it through :meth:`FunctionGraph.replace` and :meth:`FunctionGraph.change_node_input`; nodes
whose outputs are no longer used are pruned. Features (see ``opgraph.graph.features``) are
told of every change and may veto it in ``validate``.

Nothing here recurses over the graph's depth: a chain of any length works.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.clone import clone_get_equiv
from opgraph.graph.features import AlreadyThere, Feature, InconsistencyError, ReplaceValidate
from opgraph.graph.traversal import ancestors, applys_between, io_toposort
from opgraph.graph.utils import first_user_line

__all__ = [
    "FunctionGraph",
    "InconsistencyError",
    "IntegrityError",
    "MissingInputError",
]

Client = tuple[Any, int]  # (Apply, input index) or ("output", output index)


class MissingInputError(ValueError):
    """The graph needs a variable that is neither one of its inputs nor a constant.

    ``err.variable`` is that variable (the user's own, when the graph was cloned).
    """

    def __init__(self, message: str, variable: Variable | None = None) -> None:
        super().__init__(message)
        self.variable = variable


class IntegrityError(Exception):
    """``FunctionGraph.check_integrity`` found an inconsistency (a bug in a rewrite or here)."""


class ClientsView(Mapping):
    """Read-only mapping ``{variable: variable.clients}`` over a FunctionGraph's variables."""

    __slots__ = ("_fgraph",)

    def __init__(self, fgraph: FunctionGraph) -> None:
        self._fgraph = fgraph

    def __getitem__(self, var: Variable) -> list[Client]:
        if var in self._fgraph.variables:
            return var.clients  # type: ignore[attr-defined]
        raise KeyError(var)

    def __contains__(self, var: object) -> bool:
        return var in self._fgraph.variables

    def __iter__(self) -> Iterator[Variable]:
        return iter(self._fgraph.variables)

    def __len__(self) -> int:
        return len(self._fgraph.variables)

    def __repr__(self) -> str:
        return f"ClientsView({dict(self)!r})"


class FunctionGraph:
    """A graph from ``inputs`` to ``outputs`` that rewrites may edit in place.

    Parameters
    ----------
    inputs
        The graph's input variables: ownerless, distinct, not Constants (a Constant's value is
        known already, so it cannot be an input).
    outputs
        The variables the graph computes.
    features
        Features to attach (see ``opgraph.graph.features``). A ``ReplaceValidate`` is always
        attached first, giving ``checkpoint``/``revert`` and ``replace_validate``.
    clone
        Copy the graph first (the default), so the caller's variables are never modified and
        never get ``clients``. ``fgraph.memo`` then maps each original Variable and Apply to
        its copy (it is not pickled).
    update_mapping
        ``{output index: input index}`` for outputs that update an input (shared variables).
    """

    def __init__(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        features: Iterable[Any] | None = None,
        clone: bool = True,
        update_mapping: dict[int, int] | None = None,
    ) -> None:
        inputs, outputs = _check_io(inputs, outputs)
        memo: dict[Any, Any] = {}
        if clone:
            memo = clone_get_equiv(inputs, outputs, copy_inputs=True, copy_orphans=True)
            inputs = [memo[i] for i in inputs]
            outputs = [memo[o] for o in outputs]
        self.memo = memo
        self.execute_callbacks_time = 0.0
        self.execute_callbacks_times: dict[Any, float] = {}
        self._features: list[Any] = []
        self._callbacks: dict[str, list[tuple[Any, Callable[..., Any]]]] = {}
        # Cached orders of the nodes, dropped on every change: with the features' orderings
        # (toposort()) and without them (io_toposort(), what the rewrite walkers follow).
        self._toposort: list[Apply] | None = None
        self._io_order: list[Apply] | None = None
        self.apply_nodes: set[Apply] = set()
        self.variables: set[Variable] = set()
        self.inputs: list[Variable] = []
        self.outputs: list[Variable] = []
        self.profile: Any = None
        self.update_mapping = update_mapping
        try:
            self.attach_feature(ReplaceValidate())
            for feature in features or ():
                self.attach_feature(feature)
            for inp in inputs:
                self.add_input(inp)
            for out in outputs:
                self.import_var(out, reason="init")
            self.outputs = list(outputs)
            for i, out in enumerate(outputs):
                out.clients.append(("output", i))  # type: ignore[attr-defined]
        except MissingInputError as err:
            self.disown()
            if clone and err.variable is not None:
                err.variable = next((k for k, v in memo.items() if v is err.variable), None)
            raise
        except BaseException:
            self.disown()
            raise

    # ------------------------------------------------------------------ clients view

    @property
    def clients(self) -> ClientsView:
        """``{var: var.clients}`` for every variable of the graph (read-only view)."""
        return ClientsView(self)

    # ------------------------------------------------------------------ setup helpers

    def _check_owner(self, thing: Variable | Apply) -> None:
        owner_fg = getattr(thing, "fgraph", None)
        if owner_fg is not None and owner_fg is not self:
            kind = "node" if isinstance(thing, Apply) else "variable"
            raise ValueError(
                f"the {kind} {thing} already belongs to another FunctionGraph; a variable or "
                "Apply node belongs to one FunctionGraph at a time. HINT: build FunctionGraphs "
                "with clone=True (the default), clone the variable, or call other.disown()."
            )

    def _setup_var(self, var: Variable) -> None:
        self._check_owner(var)
        var.fgraph = self  # type: ignore[attr-defined]
        var.clients = []  # type: ignore[attr-defined]
        self.variables.add(var)

    def _missing_input_error(
        self, var: Variable, node: Apply | None = None, i: int = 0
    ) -> MissingInputError:
        name = f"'{var.name}'" if var.name else str(var)
        used = f"input {i} of {node}" if node is not None else "an output of the graph"
        msg = (
            f"the graph needs the variable {name} (type {var.type}), used as {used}, but it is "
            "neither an input of the graph nor a Constant, so its value is unknown."
        )
        where = first_user_line(getattr(var.tag, "trace", None))
        if where:
            msg += f"\nThe variable was created at {where}"
        msg += (
            "\nHINT: add it to the inputs (of function() or FunctionGraph), or give it a value "
            "with givens=."
        )
        return MissingInputError(msg, variable=var)

    # ------------------------------------------------------------------ inputs and outputs

    def add_input(self, var: Variable, check: bool = True) -> None:
        """Add ``var`` to the graph's inputs (nothing happens if it is one already)."""
        if not isinstance(var, Variable):
            raise TypeError(f"a FunctionGraph input must be a Variable, got {var!r}")
        if isinstance(var, Constant):
            raise TypeError(_constant_input_msg(var))
        if var.owner is not None:
            raise ValueError(
                f"{var} is the output of {var.owner} and cannot be an input of the graph. "
                "HINT: pass clone=True, or use var.clone() (an ownerless copy) as the input."
            )
        if check and any(var is x for x in self.inputs):
            return
        self._setup_var(var)
        self.inputs.append(var)
        self._toposort = self._io_order = None

    def add_output(self, var: Variable, reason: Any = None, import_missing: bool = False) -> None:
        """Append ``var`` to the graph's outputs, importing what it needs."""
        if not isinstance(var, Variable):
            raise TypeError(f"a FunctionGraph output must be a Variable, got {var!r}")
        self.import_var(var, reason=reason, import_missing=import_missing)
        self.outputs.append(var)
        var.clients.append(("output", len(self.outputs) - 1))  # type: ignore[attr-defined]
        self._toposort = self._io_order = None

    def remove_output(self, i: int, reason: Any = None) -> None:
        """Remove output ``i`` (later outputs move down one place); prune what it alone used."""
        var = self.outputs[i]
        var.clients.remove(("output", i))  # type: ignore[attr-defined]
        del self.outputs[i]
        for j in range(i, len(self.outputs)):
            clients = self.outputs[j].clients  # type: ignore[attr-defined]
            clients[clients.index(("output", j + 1))] = ("output", j)
        if self.update_mapping is not None:
            self.update_mapping = {
                (o if o < i else o - 1): inp for o, inp in self.update_mapping.items() if o != i
            }
        self._toposort = self._io_order = None
        self._prune(var, None, reason)

    # ------------------------------------------------------------------ importing

    def import_var(self, var: Variable, reason: Any = None, import_missing: bool = False) -> None:
        """Make ``var`` part of the graph, importing its owner and the owner's missing ancestors.

        An ownerless variable must be an input or a Constant; otherwise
        :class:`MissingInputError` is raised, unless ``import_missing`` makes it a new input.
        """
        owner = var.owner
        if owner is not None:
            if owner not in self.apply_nodes:
                self.import_node(owner, reason=reason, import_missing=import_missing)
        elif var not in self.variables:
            if not isinstance(var, Constant):
                if not import_missing:
                    raise self._missing_input_error(var)
                self.add_input(var)
                return
            self._setup_var(var)

    def import_node(
        self,
        apply_node: Apply,
        check: bool = True,
        reason: Any = None,
        import_missing: bool = False,
    ) -> None:
        """Import ``apply_node`` and every ancestor node not yet in the graph, in order.

        With ``check`` (the default) nothing is changed unless every new node can be imported:
        none belongs to another graph, and every ownerless input is an input of the graph or a
        Constant (else :class:`MissingInputError`, or a new input with ``import_missing``).
        """
        if apply_node in self.apply_nodes:
            return
        new_nodes = self._new_nodes(apply_node)
        missing: list[Variable] = []
        if check:
            for node in new_nodes:
                self._check_owner(node)
                for out in node.outputs:
                    self._check_owner(out)
                for i, inp in enumerate(node.inputs):
                    self._check_owner(inp)
                    if (
                        inp.owner is None
                        and inp not in self.variables
                        and not isinstance(inp, Constant)
                        and not any(inp is m for m in missing)
                    ):
                        if not import_missing:
                            raise self._missing_input_error(inp, node, i)
                        missing.append(inp)
        for inp in missing:
            self.add_input(inp)
        for node in new_nodes:
            node.fgraph = self  # type: ignore[attr-defined]
            self.apply_nodes.add(node)
            node.tag.imported_by = [*getattr(node.tag, "imported_by", ()), str(reason)]
            for out in node.outputs:
                self._setup_var(out)
            for i, inp in enumerate(node.inputs):
                if inp not in self.variables:
                    self._setup_var(inp)
                inp.clients.append((node, i))  # type: ignore[attr-defined]
            self._toposort = self._io_order = None
            self.execute_callbacks("on_import", node, reason)

    def _new_nodes(self, apply_node: Apply) -> list[Apply]:
        """The nodes ``apply_node`` needs that are not in the graph, dependencies first."""
        order: list[Apply] = []
        state: dict[Apply, int] = {apply_node: 1}  # 1: in progress, 2: done
        stack: list[tuple[Apply, Iterator[Variable]]] = [(apply_node, iter(apply_node.inputs))]
        apply_nodes = self.apply_nodes
        while stack:
            node, it = stack[-1]
            for inp in it:
                owner = inp.owner
                if owner is None or owner in apply_nodes:
                    continue
                st = state.get(owner)
                if st is None:
                    state[owner] = 1
                    stack.append((owner, iter(owner.inputs)))
                    break
                if st == 1:
                    raise ValueError(
                        f"the graph contains a cycle: {owner} depends on itself (through "
                        f"{node}). A graph must be acyclic."
                    )
            else:
                stack.pop()
                state[node] = 2
                order.append(node)
        return order

    # ------------------------------------------------------------------ clients and pruning

    def add_client(self, var: Variable, client: Client) -> None:
        """Record that ``client`` (``(node, i)`` or ``('output', i)``) uses ``var``."""
        var.clients.append(client)  # type: ignore[attr-defined]

    def remove_client(self, var: Variable, client: Client, reason: Any = None) -> None:
        """Forget that ``client`` uses ``var``; prune whatever is no longer used as a result.

        A node none of whose outputs has a client leaves the graph (``on_prune``), which may in
        turn leave its own inputs unused: pruning goes on up the graph, iteratively.
        """
        self._prune(var, client, reason)

    def _prune(self, var: Variable, client: Client | None, reason: Any) -> None:
        stack: list[tuple[Variable, Client | None]] = [(var, client)]
        while stack:
            v, c = stack.pop()
            clients = v.clients  # type: ignore[attr-defined]
            if c is not None:
                try:
                    _remove_client(clients, c)
                except ValueError:
                    raise ValueError(
                        f"{c} is not a client of {v} (clients: {clients}); the graph's client "
                        "lists are corrupt"
                    ) from None
            if clients:
                continue
            owner = v.owner
            if owner is None:
                # An unused orphan (a constant) leaves the graph; an unused input stays.
                if v in self.variables and (
                    isinstance(v, Constant) or all(v is not x for x in self.inputs)
                ):
                    self.variables.discard(v)
                    v.fgraph = None  # type: ignore[attr-defined]
                continue
            if owner not in self.apply_nodes or any(o.clients for o in owner.outputs):  # type: ignore[attr-defined]
                continue
            self._remove_node(owner, reason)
            stack.extend((inp, (owner, i)) for i, inp in enumerate(owner.inputs))

    def _remove_node(self, node: Apply, reason: Any) -> None:
        self.apply_nodes.remove(node)
        self.variables.difference_update(node.outputs)
        self._toposort = self._io_order = None
        node.tag.removed_by = [*getattr(node.tag, "removed_by", ()), str(reason)]
        self.execute_callbacks("on_prune", node, reason)
        node.fgraph = None  # type: ignore[attr-defined]
        for out in node.outputs:
            out.fgraph = None  # type: ignore[attr-defined]

    def remove_node(self, node: Apply, reason: Any = None) -> None:
        """Remove an unused node (no output has a client) and prune what it alone used."""
        if node not in self.apply_nodes:
            raise ValueError(f"{node} is not a node of this FunctionGraph")
        used = [(o, o.clients) for o in node.outputs if o.clients]  # type: ignore[attr-defined]
        if used:
            raise ValueError(
                f"cannot remove {node}: its outputs are still used ({used}). HINT: replace its "
                "outputs first (fgraph.replace); the node is then pruned by itself."
            )
        self._remove_node(node, reason)
        for i, inp in enumerate(node.inputs):
            self._prune(inp, (node, i), reason)

    # ------------------------------------------------------------------ changing the graph

    def change_node_input(
        self,
        node: Apply | str,
        i: int,
        new_var: Variable,
        reason: Any = None,
        import_missing: bool = False,
        check: bool = True,
    ) -> None:
        """Make input ``i`` of ``node`` (output ``i`` of the graph if ``node == 'output'``)
        ``new_var``, which must have the same type (unless ``check=False``).

        ``new_var`` and its missing ancestors are imported; the old variable loses that client
        and is pruned if unused. Features get ``on_change_input``.
        """
        is_output = isinstance(node, str)
        if is_output:
            if node != "output":
                raise ValueError(f"node must be an Apply node or 'output', got {node!r}")
            var = self.outputs[i]
        else:
            if getattr(node, "fgraph", None) is not self:
                raise ValueError(f"cannot change an input of {node}: it is not in this graph")
            var = node.inputs[i]  # type: ignore[union-attr]
        if var is new_var:
            return
        if check and var.type != new_var.type:
            where = f"output {i}" if is_output else f"input {i} of {node}"
            raise TypeError(
                f"cannot make {new_var} (type {new_var.type}) {where}, which has type "
                f"{var.type}: the types must be equal. HINT: use fgraph.replace, which converts "
                "compatible types, or convert the variable first."
            )
        self.import_var(new_var, reason=reason, import_missing=import_missing)
        if is_output:
            self.outputs[i] = new_var
        else:
            node.inputs[i] = new_var  # type: ignore[union-attr]
        new_var.clients.append((node, i))  # type: ignore[attr-defined]
        self._toposort = self._io_order = None
        self._prune(var, (node, i), reason)
        self.execute_callbacks("on_change_input", node, i, var, new_var, reason=reason)

    change_input = change_node_input

    def _filter_replacement(self, var: Variable, new_var: Any, reason: Any) -> Variable:
        if not isinstance(var, Variable):
            raise TypeError(f"replace() needs a Variable to replace, got {var!r}")
        self._check_owner(var)
        if isinstance(new_var, Variable) and new_var.type == var.type:
            return new_var
        got = new_var.type if isinstance(new_var, Variable) else type(new_var).__name__
        try:
            converted = var.type.filter_variable(new_var)
        except (TypeError, ValueError) as err:
            why = f" (reason: {reason})" if reason is not None else ""
            raise TypeError(
                f"cannot replace {var} (type {var.type}) by {new_var} (type {got}){why}: "
                f"{got} cannot be converted to {var.type}. HINT: a replacement must have the "
                "type of the variable it replaces."
            ) from err
        if converted.type != var.type:
            raise TypeError(
                f"cannot replace {var} (type {var.type}) by {new_var} (type {got}): its "
                f"conversion has type {converted.type}"
            )
        return converted

    def replace(
        self,
        var: Variable,
        new_var: Variable,
        reason: Any = None,
        verbose: bool = False,
        import_missing: bool = False,
    ) -> None:
        """Replace every use of ``var`` in the graph (outputs included) by ``new_var``.

        ``new_var`` goes through ``var.type.filter_variable`` first: a type that cannot be
        converted raises TypeError and the graph is left unchanged. Replacing a variable that
        is not in the graph does nothing.
        """
        new_var = self._filter_replacement(var, new_var, reason)
        self._replace(var, new_var, reason, verbose, import_missing)

    def _replace(
        self, var: Variable, new_var: Variable, reason: Any, verbose: bool, import_missing: bool
    ) -> None:
        if verbose:
            print(reason, var, new_var)
        if var not in self.variables:
            return
        for node, i in list(var.clients):  # type: ignore[attr-defined]
            if isinstance(node, str):
                if self.outputs[i] is not var:
                    continue
            elif node not in self.apply_nodes or node.inputs[i] is not var:
                continue
            self.change_node_input(node, i, new_var, reason=reason, import_missing=import_missing)

    def replace_all(
        self,
        pairs: Iterable[tuple[Variable, Variable]] | Mapping[Variable, Variable],
        reason: Any = None,
        verbose: bool = False,
        import_missing: bool = False,
    ) -> None:
        """Replace each ``var`` by ``new_var``, in order. Every type is checked before the
        first replacement, so a bad pair leaves the graph unchanged."""
        items = pairs.items() if isinstance(pairs, Mapping) else pairs
        checked = [(v, self._filter_replacement(v, nv, reason)) for v, nv in items]
        for var, new_var in checked:
            self._replace(var, new_var, reason, verbose, import_missing)

    # ------------------------------------------------------------------ features

    def attach_feature(self, feature: Any) -> None:
        """Attach ``feature`` (calls its ``on_attach``; a feature raising AlreadyThere, or one
        attached already, is skipped)."""
        if any(f is feature for f in self._features):
            return
        attach = getattr(feature, "on_attach", None)
        if attach is not None:
            try:
                attach(self)
            except AlreadyThere:
                return
        self.execute_callbacks_times.setdefault(feature, 0.0)
        self._features.append(feature)
        self._callbacks.clear()
        self._toposort = None

    def remove_feature(self, feature: Any) -> None:
        """Detach ``feature`` (calls its ``on_detach``); does nothing if it is not attached."""
        for k, f in enumerate(self._features):
            if f is feature:
                del self._features[k]
                break
        else:
            return
        self._callbacks.clear()
        self._toposort = None
        detach = getattr(feature, "on_detach", None)
        if detach is not None:
            detach(self)

    @property
    def features(self) -> list[Any]:
        """The attached features, in attachment order (a copy)."""
        return list(self._features)

    def _callbacks_for(self, name: str) -> list[tuple[Any, Callable[..., Any]]]:
        cbs = self._callbacks.get(name)
        if cbs is None:
            default = getattr(Feature, name, None)
            cbs = []
            for feature in self._features:
                fn = getattr(feature, name, None)
                if fn is None or (default is not None and getattr(fn, "__func__", None) is default):
                    continue
                cbs.append((feature, fn))
            self._callbacks[name] = cbs
        return cbs

    def execute_callbacks(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Call ``feature.<name>(self, *args, **kwargs)`` on every feature that defines it."""
        cbs = self._callbacks.get(name)
        if cbs is None:
            cbs = self._callbacks_for(name)
        if not cbs:
            return
        clock = time.perf_counter
        times = self.execute_callbacks_times
        t0 = last = clock()
        for feature, fn in cbs:
            fn(self, *args, **kwargs)
            now = clock()
            times[feature] = times.get(feature, 0.0) + (now - last)
            last = now
        self.execute_callbacks_time += last - t0

    def collect_callbacks(self, name: str, *args: Any) -> dict[Any, Any]:
        """Return ``{feature: feature.<name>(self, *args)}`` for features that define it."""
        return {feature: fn(self, *args) for feature, fn in self._callbacks_for(name)}

    def validate(self) -> None:
        """Run every feature's ``validate``; one raises (InconsistencyError) if the graph is bad."""
        t0 = time.perf_counter()
        self.execute_callbacks("validate")
        profile = self.profile
        if profile is not None and hasattr(profile, "validate_time"):
            profile.validate_time += time.perf_counter() - t0

    def consistent(self) -> bool:
        """True if :meth:`validate` passes."""
        try:
            self.validate()
        except Exception:
            return False
        return True

    # ------------------------------------------------------------------ order

    def orderings(self) -> dict[Apply, list[Apply]]:
        """Return ``{node: [nodes that must run before it]}`` from all features' orderings."""
        merged: dict[Apply, list[Apply]] = {}
        for feature, fn in self._callbacks_for("orderings"):
            ords = fn(self)
            if not isinstance(ords, dict):
                raise TypeError(
                    f"{type(feature).__name__}.orderings must return a dict (insertion-ordered, "
                    f"so the order is deterministic), got {type(ords).__name__}"
                )
            for node, prereqs in ords.items():
                merged.setdefault(node, []).extend(prereqs)
        return merged

    def toposort(self) -> list[Apply]:
        """Return the graph's nodes in a deterministic order where each comes after the nodes
        it depends on (and after what features' orderings ask). Cached until the graph changes.
        """
        order = self._toposort
        if order is None:
            if len(self.apply_nodes) < 2:
                order = list(self.apply_nodes)
            else:
                orderings = self.orderings()
                if orderings:
                    order = io_toposort(self.inputs, self.outputs, orderings)
                else:
                    order = self._io_order
                    if order is None:
                        order = self._io_order = io_toposort(self.inputs, self.outputs)
            self._toposort = order
        return list(order)

    def io_toposort(self) -> list[Apply]:
        """Return ``io_toposort(fgraph.inputs, fgraph.outputs)``: the nodes in dependency order,
        ignoring the features' orderings (the order the rewrite walkers visit). Cached until
        the graph changes, so walkers that find nothing to do cost no sort.
        """
        order = self._io_order
        if order is None:
            order = self._io_order = io_toposort(self.inputs, self.outputs)
        return list(order)

    # ------------------------------------------------------------------ checks

    def check_integrity(self) -> None:
        """Check every invariant of the graph; raise IntegrityError naming the first violation.

        Checked: the node and variable sets equal a fresh traversal from the outputs; inputs are
        distinct, ownerless and not Constants; every node and variable belongs to this graph;
        owners and indices agree; every client list is exactly the uses of its variable; the
        graph is acyclic; the cached toposort (if any) holds exactly the graph's nodes, in an
        order that respects their dependencies.
        """
        seen_inputs: set[Variable] = set()
        for i, inp in enumerate(self.inputs):
            if inp.owner is not None or isinstance(inp, Constant):
                raise IntegrityError(f"input {i} ({inp}) has an owner or is a Constant")
            if inp in seen_inputs:
                raise IntegrityError(f"input {i} ({inp}) appears twice in fgraph.inputs")
            seen_inputs.add(inp)
        nodes: dict[Apply, None] = {}
        variables: set[Variable] = set(self.inputs)
        for v in ancestors(self.outputs, blockers=self.inputs):
            variables.add(v)
            if v.owner is not None and v.owner not in nodes:
                nodes[v.owner] = None
                variables.update(v.owner.outputs)
        _compare_sets("apply_nodes", set(nodes), self.apply_nodes)
        _compare_sets("variables", variables, self.variables)
        expected: dict[Variable, list[Client]] = {v: [] for v in variables}
        for node in nodes:
            if getattr(node, "fgraph", None) is not self:
                raise IntegrityError(f"node {node} does not belong to this FunctionGraph")
            for j, out in enumerate(node.outputs):
                if out.owner is not node or out.index != j:
                    raise IntegrityError(
                        f"output {j} of {node} ({out}) has owner {out.owner} and index {out.index}"
                    )
            for i, inp in enumerate(node.inputs):
                expected[inp].append((node, i))
        for i, out in enumerate(self.outputs):
            expected[out].append(("output", i))
        for v in variables:
            if getattr(v, "fgraph", None) is not self:
                raise IntegrityError(f"variable {v} does not belong to this FunctionGraph")
            if v.owner is None and not isinstance(v, Constant) and v not in seen_inputs:
                raise IntegrityError(f"variable {v} is an undeclared input (no owner, no value)")
            if v.owner is not None and v.owner.outputs[v.index] is not v:  # type: ignore[index]
                raise IntegrityError(f"variable {v}: owner.outputs[index] is not the variable")
            _compare_clients(v, expected[v])
        try:
            io_toposort(self.inputs, self.outputs)
        except ValueError as err:
            raise IntegrityError(str(err)) from None
        if self._toposort is not None:
            _check_order(self._toposort, self.apply_nodes)
        if self._io_order is not None:
            _check_order(self._io_order, self.apply_nodes)
            if self._io_order != io_toposort(self.inputs, self.outputs):
                raise IntegrityError("the cached io_toposort differs from a fresh sort")

    # ------------------------------------------------------------------ copies, pickling

    def clone_get_equiv(
        self, check_integrity: bool = True, attach_feature: bool = True
    ) -> tuple[FunctionGraph, dict[Any, Any]]:
        """Return a copy of this graph and the ``{old: new}`` map of its variables and nodes."""
        if check_integrity:
            self.check_integrity()
        equiv = clone_get_equiv(self.inputs, self.outputs, copy_inputs=True, copy_orphans=True)
        new = FunctionGraph(
            [equiv[i] for i in self.inputs],
            [equiv[o] for o in self.outputs],
            clone=False,
            update_mapping=None if self.update_mapping is None else dict(self.update_mapping),
        )
        if check_integrity:
            new.check_integrity()
        if attach_feature:
            for feature in self._features:
                new.attach_feature(feature)
        return new, equiv

    def clone(self, check_integrity: bool = True) -> FunctionGraph:
        """Return a copy of this graph (same features attached)."""
        return self.clone_get_equiv(check_integrity)[0]

    def disown(self) -> None:
        """Detach every feature and release every node and variable (so that another
        FunctionGraph may take them); this graph is empty afterwards."""
        for feature in list(self._features):
            self.remove_feature(feature)
        for node in self.apply_nodes:
            node.__dict__.pop("fgraph", None)
        for var in self.variables:
            var.__dict__.pop("fgraph", None)
            var.__dict__.pop("clients", None)
        self.apply_nodes = set()
        self.variables = set()
        self.inputs = []
        self.outputs = []
        self._toposort = self._io_order = None

    def __getstate__(self) -> dict[str, Any]:
        # The graph's variables and nodes pickle without their links (owner, clients, inputs,
        # outputs: see Variable.__getstate__); the links are kept here as flat lists, so that
        # pickle never recurses along the graph. ``memo`` (the caller's graph) is not kept.
        state = self.__dict__.copy()
        state.pop("_broadcast_constants", None)  # canonicalize's per-graph constants: a cache
        for feature in self._features:
            for attr in getattr(feature, "pickle_rm_attr", ()):
                state.pop(attr, None)
        state.pop("execute_callbacks_times", None)
        state["_callbacks"] = {}
        state["_toposort"] = None
        state["_io_order"] = None
        state["memo"] = {}
        state["_links"] = [(n, list(n.inputs), list(n.outputs)) for n in self.apply_nodes]
        state["_clients"] = [(v, list(v.clients)) for v in self.variables]  # type: ignore[attr-defined]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        links = state.pop("_links", ())
        clients = state.pop("_clients", ())
        self._io_order = None
        self.__dict__.update(state)
        for var, var_clients in clients:
            if not isinstance(var, Constant):
                var.owner = None
            var.clients = var_clients
        for node, inputs, outputs in links:
            node.inputs = inputs
            node.outputs = outputs
            for j, out in enumerate(outputs):
                out.owner = node
                out.index = j
        self.execute_callbacks_times = {}
        for feature in self._features:
            self.execute_callbacks_times.setdefault(feature, 0.0)
            unpickle = getattr(feature, "unpickle", None)
            if unpickle is not None:
                unpickle(self)

    # ------------------------------------------------------------------ printing

    def __str__(self) -> str:
        return f"FunctionGraph({', '.join(as_string(self.inputs, self.outputs))})"

    def __repr__(self) -> str:
        return str(self)


def _remove_client(clients: list[Client], client: Client) -> None:
    """``clients.remove(client)`` (a client is listed once; ValueError if it is not there),
    searching from both ends in windows of doubling size.

    A shared constant can have thousands of clients, and pruning a chain removes them one by
    one, from the front or from the back of the list depending on the rewrite: a search
    from the front only would make pruning quadratic. The cost here is proportional to the
    client's distance from the nearer end.
    """
    lo, hi = 0, len(clients)  # the part not searched yet
    width = 32
    # (Windows are sliced and tested with ``in``: a failed ``list.index`` would format its
    # error message, the repr of a node, every time.)
    while lo < hi:
        end = min(lo + width, hi)
        window = clients[lo:end]
        if client in window:
            k = lo + window.index(client)
            break
        lo = end
        start = max(hi - width, lo)
        window = clients[start:hi]
        if client in window:
            k = start + window.index(client)
            break
        hi = start
        width *= 2
    else:
        raise ValueError(f"{client} is not in the list")
    del clients[k]


def _constant_input_msg(var: Variable, i: int | None = None) -> str:
    where = f"input {i} ({var})" if i is not None else str(var)
    return (
        f"{where}: a Constant cannot be an input of a FunctionGraph/function: its value is "
        "already known; remove it from the inputs."
    )


def _check_io(
    inputs: Sequence[Variable], outputs: Sequence[Variable]
) -> tuple[list[Variable], list[Variable]]:
    """Validate the user's inputs and outputs lists (before anything is cloned)."""
    for what, seq in (("inputs", inputs), ("outputs", outputs)):
        if isinstance(seq, Variable) or not isinstance(seq, Sequence):
            raise TypeError(
                f"FunctionGraph {what} must be a list of Variables, got {seq!r}. "
                f"HINT: pass [{seq!r}]."
            )
    inputs, outputs = list(inputs), list(outputs)
    seen: set[Variable] = set()
    for i, inp in enumerate(inputs):
        if not isinstance(inp, Variable):
            raise TypeError(f"input {i} of the FunctionGraph must be a Variable, got {inp!r}")
        if isinstance(inp, Constant):
            raise TypeError(_constant_input_msg(inp, i))
        if inp in seen:
            raise ValueError(
                f"input {i} ({inp}) is given twice in the inputs of the FunctionGraph; "
                "each input may appear once."
            )
        seen.add(inp)
    for i, out in enumerate(outputs):
        if not isinstance(out, Variable):
            raise TypeError(f"output {i} of the FunctionGraph must be a Variable, got {out!r}")
    return inputs, outputs


def _check_order(order: list[Apply], nodes: set[Apply]) -> None:
    if len(order) != len(nodes) or set(order) != nodes:
        raise IntegrityError("the cached toposort does not hold exactly the graph's nodes")
    position = {node: k for k, node in enumerate(order)}
    for k, node in enumerate(order):
        for inp in node.inputs:
            if inp.owner is not None and position[inp.owner] > k:
                raise IntegrityError(f"the cached toposort puts {node} before {inp.owner}")


def _compare_sets(what: str, fresh: set[Any], cached: set[Any]) -> None:
    if fresh != cached:
        missing = [str(x) for x in list(fresh - cached)[:5]]
        excess = [str(x) for x in list(cached - fresh)[:5]]
        raise IntegrityError(
            f"fgraph.{what} is out of date: missing {missing}, in excess {excess} "
            "(compared with a fresh traversal from the outputs)"
        )


def _client_key(client: Client) -> tuple[int | str, int]:
    node, i = client
    return (node if isinstance(node, str) else id(node), i)


def _compare_clients(var: Variable, expected: list[Client]) -> None:
    clients = getattr(var, "clients", None)
    if clients is None:
        raise IntegrityError(f"variable {var} has no clients list")
    have = Counter(_client_key(c) for c in clients)
    if len(have) != len(clients):
        raise IntegrityError(f"variable {var} has duplicate clients: {clients}")
    want = Counter(_client_key(c) for c in expected)
    if have != want:
        by_key = {_client_key(c): c for c in [*clients, *expected]}
        stale = [by_key[k] for k in have - want]
        missing = [by_key[k] for k in want - have]
        raise IntegrityError(
            f"variable {var} has inconsistent clients: stale {stale}, missing {missing}"
        )


def as_string(inputs: Sequence[Variable], outputs: Sequence[Variable]) -> list[str]:
    """Return one string per output: its graph as nested ``op(inputs)`` calls.

    A node used more than once is written in full once, as ``*1 -> op(...)``, then as ``*1``
    (``*1::k`` for its output ``k`` when it has several), as Theano's ``as_string`` does.
    Iterative, so any depth prints.
    """
    leaves = set(inputs)
    uses: Counter[Apply] = Counter()
    for out in outputs:
        if out.owner is not None and out not in leaves:
            uses[out.owner] += 1
    for node in applys_between(inputs, outputs):
        for inp in node.inputs:
            if inp.owner is not None and inp not in leaves:
                uses[inp.owner] += 1
    labels: dict[Apply, int] = {}  # 0: printed in full, never referenced again
    n_labels = 0
    strings = []
    for out in outputs:
        parts: list[str] = []
        stack: list[str | Variable] = [out]
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                parts.append(item)
                continue
            node = item.owner
            if node is None or item in leaves:
                parts.append(str(item))
                continue
            idx = f"::{item.index}" if len(node.outputs) > 1 else ""
            if node in labels:
                parts.append(f"*{labels[node]}{idx}")
                continue
            prefix = ""
            labels[node] = 0
            if uses[node] > 1:
                n_labels += 1
                labels[node] = n_labels
                prefix = f"*{n_labels} -> "
            todo: list[str | Variable] = [f"{prefix}{node.op}("]
            for k, inp in enumerate(node.inputs):
                if k:
                    todo.append(", ")
                todo.append(inp)
            todo.append(")")
            stack.extend(reversed(todo))
        strings.append("".join(parts))
    return strings
