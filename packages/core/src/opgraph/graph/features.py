"""Listeners a FunctionGraph notifies of every change (Theano's ``gof/toolbox.py``).

A feature is attached with ``fgraph.attach_feature(f)``; the graph then calls the methods the
feature defines, passing itself first:

- ``on_attach(fgraph)`` / ``on_detach(fgraph)``: when attached or removed. ``on_attach`` may
  raise :class:`AlreadyThere` to say an equivalent feature is present (it is then skipped);
- ``on_import(fgraph, node, reason)``: a node entered the graph;
- ``on_prune(fgraph, node, reason)``: a node left the graph (no output is used any more);
- ``on_change_input(fgraph, node, i, var, new_var, reason=None)``: input ``i`` of ``node`` (or
  output ``i`` of the graph when ``node == 'output'``) changed from ``var`` to ``new_var``;
- ``orderings(fgraph)``: ``{node: [nodes that must run before it]}``, extra constraints for
  ``fgraph.toposort()``;
- ``validate(fgraph)``: raise :class:`InconsistencyError` if the graph is not acceptable.

Features may also add methods to the graph (``History`` adds ``fgraph.checkpoint()`` and
``fgraph.revert(chk)``): they list those attribute names in ``pickle_rm_attr`` and put them back
in ``unpickle(fgraph)``, so that a FunctionGraph pickles.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from opgraph.configdefaults import config

if TYPE_CHECKING:
    from opgraph.graph.basic import Apply, Variable
    from opgraph.graph.op import Op

__all__ = [
    "AlreadyThere",
    "Bookkeeper",
    "Feature",
    "History",
    "InconsistencyError",
    "NodeFinder",
    "PreserveNames",
    "PreserveVariableAttributes",
    "PrintListener",
    "ReplaceValidate",
    "ReplacementDidntRemovedError",
    "Validator",
]

_logger = logging.getLogger("opgraph.graph.features")

Node = Any  # an Apply node, or the string 'output' in on_change_input


class AlreadyThere(Exception):
    """Raised by ``Feature.on_attach`` when an equivalent feature is attached already.

    ``FunctionGraph.attach_feature`` catches it and does not attach the new feature.
    """


class InconsistencyError(Exception):
    """Raised by a feature's ``validate`` when the graph's state is invalid.

    ``ReplaceValidate`` reverts the replacement that made the graph invalid and re-raises.
    """


class ReplacementDidntRemovedError(Exception):
    """A replacement left in the graph a node it was meant to remove (it was reverted)."""


class Feature:
    """Base class of FunctionGraph listeners: every callback does nothing by default.

    Subclasses override the callbacks they need (see the module docstring). A FunctionGraph
    skips the callbacks a subclass does not override, so unused ones cost nothing.
    """

    def on_attach(self, fgraph: Any) -> None:
        """Called by ``fgraph.attach_feature(self)``; may raise :class:`AlreadyThere`."""

    def on_detach(self, fgraph: Any) -> None:
        """Called by ``fgraph.remove_feature(self)``: undo what ``on_attach`` did."""

    def on_import(self, fgraph: Any, node: Apply, reason: Any) -> None:
        """Called when ``node`` enters the graph (its inputs are already in it)."""

    def on_prune(self, fgraph: Any, node: Apply, reason: Any) -> None:
        """Called when ``node`` leaves the graph because none of its outputs is used."""

    def on_change_input(
        self,
        fgraph: Any,
        node: Node,
        i: int,
        var: Variable,
        new_var: Variable,
        reason: Any = None,
    ) -> None:
        """Called after input ``i`` of ``node`` (output ``i`` if ``node == 'output'``) changed
        from ``var`` to ``new_var``."""

    def orderings(self, fgraph: Any) -> dict[Apply, list[Apply]]:
        """Return ``{node: [nodes that must be computed before node]}`` (none by default)."""
        return {}


class Bookkeeper(Feature):
    """A feature that sees every node of the graph: imports them all when attached and prunes
    them all when detached, so it needs only ``on_import`` / ``on_prune``."""

    def on_attach(self, fgraph: Any) -> None:
        for node in fgraph.toposort():
            self.on_import(fgraph, node, "on_attach")

    def on_detach(self, fgraph: Any) -> None:
        for node in reversed(fgraph.toposort()):
            self.on_prune(fgraph, node, "Bookkeeper.detach")


class History(Feature):
    """Records every input change so that the graph can go back to a checkpoint.

    Adds ``fgraph.checkpoint()`` (returns a checkpoint) and ``fgraph.revert(checkpoint)``
    (undoes, newest first, every change made since). The record is not pickled.
    """

    pickle_rm_attr = ["checkpoint", "revert"]

    def __init__(self) -> None:
        self.history: dict[Any, list[tuple[Any, ...]] | None] = {}

    def on_attach(self, fgraph: Any) -> None:
        if hasattr(fgraph, "checkpoint") or hasattr(fgraph, "revert"):
            raise AlreadyThere("a History feature is already attached (fgraph.checkpoint exists)")
        self.history[fgraph] = []
        self.unpickle(fgraph)

    def unpickle(self, fgraph: Any) -> None:
        """Put back the methods this feature adds to ``fgraph`` (after unpickling)."""
        self.history.setdefault(fgraph, [])
        fgraph.checkpoint = partial(self.checkpoint, fgraph)  # type: ignore[attr-defined]
        fgraph.revert = partial(self.revert, fgraph)  # type: ignore[attr-defined]

    def on_detach(self, fgraph: Any) -> None:
        for attr in History.pickle_rm_attr:
            fgraph.__dict__.pop(attr, None)
        self.history.pop(fgraph, None)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["history"] = {}
        return state

    def on_change_input(
        self,
        fgraph: Any,
        node: Node,
        i: int,
        var: Variable,
        new_var: Variable,
        reason: Any = None,
    ) -> None:
        record = self.history.get(fgraph)
        if record is not None:
            record.append((node, i, var, reason))

    def checkpoint(self, fgraph: Any) -> int:
        """Return a checkpoint of ``fgraph`` to pass to :meth:`revert`."""
        record = self.history[fgraph]
        return len(record) if record is not None else 0

    def revert(self, fgraph: Any, checkpoint: int) -> None:
        """Undo every change made to ``fgraph`` since ``checkpoint``, newest first."""
        record = self.history[fgraph]
        if record is None:
            raise RuntimeError("History.revert called while a revert is in progress")
        self.history[fgraph] = None  # the reverting changes are not recorded
        try:
            while len(record) > checkpoint:
                node, i, var, reason = record.pop()
                fgraph.change_node_input(node, i, var, reason=("Revert", reason), check=False)
        finally:
            self.history[fgraph] = record


class Validator(Feature):
    """Marks a graph as validated: ``fgraph.validate()`` runs every feature's ``validate``.

    FunctionGraph provides ``validate()`` and ``consistent()`` itself; this feature exists for
    Theano code that attaches it, and as the base of :class:`ReplaceValidate`.
    """

    def on_attach(self, fgraph: Any) -> None:
        if any(isinstance(f, type(self)) for f in fgraph._features):
            raise AlreadyThere(f"a {type(self).__name__} feature is already attached")


class ReplaceValidate(History, Validator):
    """Replacements that are undone if the graph stops validating (attached to every graph).

    Adds ``fgraph.replace_validate(var, new_var, reason)``,
    ``fgraph.replace_all_validate(pairs, reason)`` and
    ``fgraph.replace_all_validate_remove(pairs, remove, reason)``: they replace, call
    ``fgraph.validate()`` and, if a replacement or the validation raises, revert every change
    they made and re-raise.
    """

    pickle_rm_attr = [
        "replace_validate",
        "replace_all_validate",
        "replace_all_validate_remove",
        *History.pickle_rm_attr,
    ]

    def __init__(self) -> None:
        History.__init__(self)
        self._nodes_removed: set[Any] = set()

    def on_attach(self, fgraph: Any) -> None:
        for attr in ("replace_validate", "replace_all_validate", "replace_all_validate_remove"):
            if hasattr(fgraph, attr):
                raise AlreadyThere(f"a ReplaceValidate feature is already attached ({attr})")
        Validator.on_attach(self, fgraph)
        History.on_attach(self, fgraph)

    def unpickle(self, fgraph: Any) -> None:
        History.unpickle(self, fgraph)
        fgraph.replace_validate = partial(self.replace_validate, fgraph)  # type: ignore[attr-defined]
        fgraph.replace_all_validate = partial(self.replace_all_validate, fgraph)  # type: ignore[attr-defined]
        fgraph.replace_all_validate_remove = partial(  # type: ignore[attr-defined]
            self.replace_all_validate_remove, fgraph
        )

    def on_detach(self, fgraph: Any) -> None:
        History.on_detach(self, fgraph)
        for attr in self.pickle_rm_attr:
            fgraph.__dict__.pop(attr, None)

    def replace_validate(
        self, fgraph: Any, var: Variable, new_var: Variable, reason: Any = None, **kw: Any
    ) -> None:
        """Replace ``var`` by ``new_var`` and validate, reverting on any error."""
        self.replace_all_validate(fgraph, [(var, new_var)], reason=reason, **kw)

    def replace_all_validate(
        self,
        fgraph: Any,
        replacements: Iterable[tuple[Variable, Variable]],
        reason: Any = None,
        verbose: bool | None = None,
        **kw: Any,
    ) -> int:
        """Apply every replacement then validate; on any error revert them all and re-raise.

        Returns the checkpoint taken before the first replacement.
        """
        chk = fgraph.checkpoint()  # type: ignore[attr-defined]
        if verbose is None:
            verbose = _optimizer_verbose()
        var = new_var = None
        for var, new_var in replacements:
            try:
                fgraph.replace(var, new_var, reason=reason, verbose=False, **kw)
            except Exception:
                fgraph.revert(chk)  # type: ignore[attr-defined]
                raise
        try:
            fgraph.validate()
        except Exception as e:
            fgraph.revert(chk)  # type: ignore[attr-defined]
            if verbose:
                print(f"validate failed on node {var}.\n Reason: {reason}, {e}")
            raise
        if verbose:
            print(reason, var, new_var)
        return chk

    def replace_all_validate_remove(
        self,
        fgraph: Any,
        replacements: Iterable[tuple[Variable, Variable]],
        remove: Sequence[Any],
        reason: Any = None,
        warn: bool = True,
        **kw: Any,
    ) -> int:
        """Like :meth:`replace_all_validate`, then revert and raise
        :class:`ReplacementDidntRemovedError` if a node or variable of ``remove`` is still in
        the graph."""
        chk = self.replace_all_validate(fgraph, replacements, reason=reason, **kw)
        self._nodes_removed.update(remove)
        for rm in remove:
            if rm in fgraph.apply_nodes or rm in fgraph.variables:
                fgraph.revert(chk)  # type: ignore[attr-defined]
                if warn:
                    _logger.warning(
                        "rewrite %s wanted to remove %s but its replacement keeps it in the "
                        "graph; the rewrite was reverted (the function stays correct).",
                        reason,
                        rm,
                    )
                raise ReplacementDidntRemovedError(
                    f"{reason}: the replacement did not remove {rm} from the graph"
                )
        return chk

    def __getstate__(self) -> dict[str, Any]:
        state = History.__getstate__(self)
        state["_nodes_removed"] = set()
        return state


def _optimizer_verbose() -> bool:
    try:
        return bool(config.optimizer_verbose)
    except Exception:  # the flag may not exist during bootstrap
        return False


class NodeFinder(Bookkeeper):
    """Adds ``fgraph.get_nodes(op_or_op_class)``: the graph's nodes applying an Op, fast.

    With an Op instance it returns the nodes whose op equals it; with an Op class, the nodes
    whose op is an instance of that class (subclasses included). Nodes come in import order.
    """

    pickle_rm_attr = ["get_nodes"]

    def __init__(self) -> None:
        self._by_op: dict[Any, dict[Any, dict[Apply, None]]] = {}
        self._by_class: dict[Any, dict[type, dict[Apply, None]]] = {}

    def on_attach(self, fgraph: Any) -> None:
        if hasattr(fgraph, "get_nodes"):
            raise AlreadyThere("a NodeFinder is already attached (fgraph.get_nodes exists)")
        self._by_op[fgraph] = {}
        self._by_class[fgraph] = {}
        self.unpickle(fgraph)
        Bookkeeper.on_attach(self, fgraph)

    def unpickle(self, fgraph: Any) -> None:
        """Put back ``fgraph.get_nodes`` (after unpickling)."""
        fgraph.get_nodes = partial(self.query, fgraph)  # type: ignore[attr-defined]

    def on_detach(self, fgraph: Any) -> None:
        fgraph.__dict__.pop("get_nodes", None)
        self._by_op.pop(fgraph, None)
        self._by_class.pop(fgraph, None)

    def on_import(self, fgraph: Any, node: Apply, reason: Any) -> None:
        self._by_class[fgraph].setdefault(type(node.op), {})[node] = None
        with contextlib.suppress(TypeError):  # an unhashable op is only found by class
            self._by_op[fgraph].setdefault(node.op, {})[node] = None

    def on_prune(self, fgraph: Any, node: Apply, reason: Any) -> None:
        by_class = self._by_class[fgraph]
        nodes = by_class.get(type(node.op))
        if nodes is not None:
            nodes.pop(node, None)
            if not nodes:
                del by_class[type(node.op)]
        try:
            by_op = self._by_op[fgraph]
            nodes = by_op.get(node.op)
        except TypeError:
            return
        if nodes is not None:
            nodes.pop(node, None)
            if not nodes:
                del by_op[node.op]

    def query(self, fgraph: Any, op: Op | type) -> list[Apply]:
        """Return the nodes of ``fgraph`` applying ``op`` (an Op, or an Op class)."""
        if isinstance(op, type):
            return [
                node
                for cls, nodes in self._by_class[fgraph].items()
                if issubclass(cls, op)
                for node in nodes
            ]
        try:
            return list(self._by_op[fgraph].get(op, ()))
        except TypeError:
            raise TypeError(
                f"{op!r} is unhashable and cannot be looked up; pass its class instead"
            ) from None


class PreserveNames(Feature):
    """Gives a replacement variable the name of the variable it replaces, if it has none."""

    def on_change_input(
        self,
        fgraph: Any,
        node: Node,
        i: int,
        var: Variable,
        new_var: Variable,
        reason: Any = None,
    ) -> None:
        if var.name is not None and new_var.name is None:
            new_var.name = var.name


class PreserveVariableAttributes(PreserveNames):
    """Like :class:`PreserveNames`, and also keeps ``tag.values_eq_approx`` (DEBUG_MODE's
    comparison) on replacement variables."""

    def on_change_input(
        self,
        fgraph: Any,
        node: Node,
        i: int,
        var: Variable,
        new_var: Variable,
        reason: Any = None,
    ) -> None:
        super().on_change_input(fgraph, node, i, var, new_var, reason)
        approx = getattr(var.tag, "values_eq_approx", None)
        if approx is not None and getattr(new_var.tag, "values_eq_approx", None) is None:
            new_var.tag.values_eq_approx = approx


class PrintListener(Feature):
    """Prints every event of the graph it is attached to (for debugging rewrites)."""

    def __init__(self, active: bool = True, file: Any = None) -> None:
        self.active = active
        self.file = file

    def _print(self, *args: Any) -> None:
        if self.active:
            print(*args, file=self.file or sys.stdout)

    def on_attach(self, fgraph: Any) -> None:
        self._print("-- attaching to:", fgraph)

    def on_detach(self, fgraph: Any) -> None:
        self._print("-- detaching from:", fgraph)

    def on_import(self, fgraph: Any, node: Apply, reason: Any) -> None:
        self._print("-- importing:", node, "reason:", reason)

    def on_prune(self, fgraph: Any, node: Apply, reason: Any) -> None:
        self._print("-- pruning:", node, "reason:", reason)

    def on_change_input(
        self,
        fgraph: Any,
        node: Node,
        i: int,
        var: Variable,
        new_var: Variable,
        reason: Any = None,
    ) -> None:
        self._print(f"-- changing ({node}.inputs[{i}]) from {var} to {new_var}")
