"""DEBUG_MODE: run every node twice and check everything Theano's DebugMode checks.

For each node, on copies of its inputs:

- ``perform`` runs, then either the backend's kernel (when the mode's linker has a kernel
  registry with an entry for the Op) or ``perform`` again; the two results must agree
  (:class:`BadThunkOutput`);
- inputs must come back unchanged unless ``destroy_map`` says the Op overwrites them
  (:class:`BadDestroyMap`), and an output may share memory with an input only if
  ``view_map``/``destroy_map`` says so (:class:`BadViewMap`);
- every output must be a valid value of its Type, and finite when
  ``config.DebugMode__check_finite`` (:class:`InvalidValueError`).

After each call, every replacement the rewrites made while compiling (recorded by a
feature attached before rewriting) is checked: the replaced variable and its replacement
are evaluated on this call's inputs and must agree (:class:`BadRewrite`, naming the
rewrite). Lazy nodes (``ifelse``) stay lazy.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.compile.mode import Mode, resolve_linker
from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.features import Feature
from opgraph.graph.op import Thunk
from opgraph.graph.traversal import io_toposort
from opgraph.graph.utils import first_user_line
from opgraph.link.basic import LocalLinker
from opgraph.link.dispatch import KernelRegistry
from opgraph.link.utils import describe_value
from opgraph.link.vm import VM

__all__ = [
    "BadDestroyMap",
    "BadOptimization",
    "BadRewrite",
    "BadThunkOutput",
    "BadViewMap",
    "DebugMode",
    "DebugModeError",
    "InvalidValueError",
    "StochasticOrder",
]


class DebugModeError(Exception):
    """A check of DEBUG_MODE failed; the subclass says which."""

    def __init__(self, message: str = "", **details: Any) -> None:
        super().__init__(message)
        for key, value in details.items():
            setattr(self, key, value)


class BadThunkOutput(DebugModeError):
    """Two implementations of a node (kernel and perform, or two runs of perform) disagree."""


class BadRewrite(DebugModeError):
    """A rewrite replaced a variable by one that computes a different value."""


BadOptimization = BadRewrite


class BadDestroyMap(DebugModeError):
    """A node modified an input that its Op's ``destroy_map`` does not declare."""


class BadViewMap(DebugModeError):
    """An output shares memory with an input (or another output) without ``view_map``."""


class StochasticOrder(DebugModeError):
    """Rewriting the same graph twice gave different results (Theano's check that the
    rewrites do not depend on memory addresses, e.g. iterating over a set of nodes)."""


class InvalidValueError(DebugModeError):
    """A node produced a value its output Type does not accept (or NaN/inf)."""


def _where(node: Apply) -> str:
    for var in node.outputs:
        line = first_user_line(getattr(var.tag, "trace", None))
        if line:
            return line
    return "(unknown)"


def _node_of(var: Variable) -> str:
    """``Op(inputs)`` for a computed variable, its name for an input."""
    return str(var.owner) if var.owner is not None else str(var)


def _copy_value(value: Any) -> Any:
    return value.copy() if isinstance(value, np.ndarray) else copy.deepcopy(value)


def _same(var: Variable, a: Any, b: Any, approx: bool) -> bool:
    try:
        equal = var.type.values_eq_approx(a, b) if approx else var.type.values_eq(a, b)
        return bool(equal)
    except (TypeError, ValueError):  # e.g. a Type whose values_eq compares arrays with ==
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))


def _shares(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return bool(np.may_share_memory(a, b))
    return a is b and not isinstance(a, int | float | complex | str | bool | type(None))


class RewriteRecorder(Feature):
    """Records ``(old, new, rewrite)`` for every replacement made while rewriting."""

    def __init__(self) -> None:
        self.records: list[tuple[Variable, Variable, Any]] = []
        self._seen: set[tuple[int, int]] = set()

    def on_change_input(
        self, fgraph: Any, node: Any, i: int, var: Variable, new_var: Variable, reason: Any = None
    ) -> None:
        if reason is None or reason in ("insert_deepcopy", "init"):
            return
        key = (id(var), id(new_var))
        if key not in self._seen and var.type == new_var.type:
            self._seen.add(key)
            self.records.append((var, new_var, reason))


class DebugLinker(LocalLinker):
    """Runs each node with the checks of DEBUG_MODE (see the module docstring)."""

    def __init__(self, kernels: KernelRegistry | None = None, check_isfinite: bool = True) -> None:
        super().__init__(allow_gc=False)
        self.kernels = kernels
        self.check_isfinite = check_isfinite
        if kernels is not None:
            self.backend = kernels.backend

    def make_node_thunk(
        self,
        node: Apply,
        storage_map: dict[Variable, list[Any]],
        compute_map: dict[Variable, list[bool]],
        no_recycling: Sequence[Variable],
    ) -> Thunk:
        base = node.op.make_thunk(node, storage_map, compute_map, no_recycling)
        if getattr(base, "lazy", False):
            return self._lazy_thunk(node, base)
        kernel = None
        if self.kernels is not None:
            private = {v: [None] for v in (*node.inputs, *node.outputs)}
            done = {v: [False] for v in private}
            thunk = self.kernels.make_thunk(node, private, done, ())
            if thunk is not None:
                kernel = (
                    thunk,
                    [private[v] for v in node.inputs],
                    [private[v] for v in node.outputs],
                )
        in_cells = [storage_map[v] for v in node.inputs]
        out_cells = [storage_map[v] for v in node.outputs]
        out_done = [compute_map[v] for v in node.outputs]

        def thunk() -> None:
            values = [c[0] for c in in_cells]
            ref = self._perform(node, values, check=True)
            if kernel is not None:
                run, k_in, k_out = kernel
                for cell, v in zip(k_in, values):
                    cell[0] = _copy_value(v)
                run()
                other, label = [c[0] for c in k_out], f"the {self.backend} kernel"
            else:
                other, label = self._perform(node, values, check=False), "a second perform"
            for k, (a, b) in enumerate(zip(ref, other)):
                if not _same(node.outputs[k], a, b, approx=True):
                    raise BadThunkOutput(
                        f"DEBUG_MODE: output {k} of {node} differs between perform and "
                        f"{label}.\n  perform: {describe_value(a)}: {a!r:.300}\n  {label}: "
                        f"{describe_value(b)}: {b!r:.300}\nHINT: the implementation is "
                        "wrong or not deterministic; fix the kernel (or the Op's perform).",
                        node=node,
                        output=k,
                        values=(a, b),
                    )
            for cell, value in zip(out_cells, ref):
                cell[0] = value
            for d in out_done:
                d[0] = True

        thunk.inputs = in_cells  # type: ignore[attr-defined]
        thunk.outputs = out_cells  # type: ignore[attr-defined]
        thunk.lazy = False  # type: ignore[attr-defined]
        return thunk

    def _lazy_thunk(self, node: Apply, base: Thunk) -> Thunk:
        def thunk() -> Any:
            requires = base()
            if not requires:
                self._check_outputs(node, [c[0] for c in base.outputs])  # type: ignore[attr-defined]
            return requires

        thunk.inputs = base.inputs  # type: ignore[attr-defined]
        thunk.outputs = base.outputs  # type: ignore[attr-defined]
        thunk.lazy = True  # type: ignore[attr-defined]
        return thunk

    def _perform(self, node: Apply, values: Sequence[Any], check: bool) -> list[Any]:
        """Run ``perform`` on copies of ``values``; with ``check``, verify the maps."""
        copies = [_copy_value(v) for v in values]
        out: list[list[Any]] = [[None] for _ in node.outputs]
        node.op.perform(node, copies, out)
        results = [c[0] for c in out]
        if not check:
            return results
        op = node.op
        destroyed = {i for ins in getattr(op, "destroy_map", {}).values() for i in ins}
        for i, (before, after) in enumerate(zip(values, copies)):
            if i not in destroyed and not _same(node.inputs[i], before, after, approx=False):
                raise BadDestroyMap(
                    f"DEBUG_MODE: {node} modified its input {i} ({node.inputs[i]}), but its "
                    f"Op's destroy_map ({op.destroy_map}) does not say so.\nThe node was "
                    f"created at: {_where(node)}\nHINT: declare destroy_map = {{0: [{i}]}} on "
                    "the Op, or compute into a new array.",
                    node=node,
                    input=i,
                )
        allowed = {
            k: set(getattr(op, "view_map", {}).get(k, []))
            | set(getattr(op, "destroy_map", {}).get(k, []))
            for k in range(len(results))
        }
        for k, value in enumerate(results):
            for i, inp in enumerate(copies):
                if i not in allowed[k] and _shares(value, inp):
                    raise BadViewMap(
                        f"DEBUG_MODE: output {k} of {node} shares memory with input {i}, but "
                        f"its Op's view_map ({op.view_map}) does not say so.\nHINT: declare "
                        f"view_map = {{{k}: [{i}]}}, or return a copy.",
                        node=node,
                        output=k,
                        input=i,
                    )
            for j in range(k + 1, len(results)):
                if _shares(value, results[j]):
                    raise BadViewMap(
                        f"DEBUG_MODE: outputs {k} and {j} of {node} share memory.",
                        node=node,
                        output=k,
                    )
        self._check_outputs(node, results)
        return results

    def _check_outputs(self, node: Apply, values: Sequence[Any]) -> None:
        for k, (var, value) in enumerate(zip(node.outputs, values)):
            problem = None
            if value is None:
                problem = "perform did not set it (it is None)"
            elif not var.type.is_valid_value(value):
                try:
                    var.type.filter(value, strict=True)
                    problem = f"{describe_value(value)} is not a valid {var.type} value"
                except Exception as exc:
                    problem = f"{describe_value(value)} is not valid: {exc}"
            elif (
                self.check_isfinite
                and isinstance(value, np.ndarray)
                and value.dtype.kind in "fc"
                and not np.isfinite(value).all()
            ):
                problem = "it contains NaN or inf (DebugMode__check_finite=True)"
            if problem is not None:
                raise InvalidValueError(
                    f"DEBUG_MODE: output {k} of {node} (type {var.type}): {problem}.\nThe "
                    f"node was created at: {_where(node)}",
                    node=node,
                    output=k,
                    value=value,
                )

    def make_vm(
        self,
        order: list[Apply],
        thunks: list[Thunk],
        storage_map: dict[Variable, list[Any]],
        compute_map: dict[Variable, list[bool]],
    ) -> VM:
        vm = super().make_vm(order, thunks, storage_map, compute_map)  # allow_gc is False
        recorder = getattr(self.fgraph, "debug_rewrites", None)
        if recorder is not None and recorder.records:
            run = vm.run

            def checked_run() -> None:
                run()
                self._check_rewrites(recorder.records, storage_map, compute_map)

            vm.run = checked_run  # type: ignore[method-assign]
        return vm

    def _check_rewrites(
        self,
        records: list[tuple[Variable, Variable, Any]],
        storage_map: dict[Variable, list[Any]],
        compute_map: dict[Variable, list[bool]],
    ) -> None:
        values = {v: cell[0] for v, cell in storage_map.items() if compute_map[v][0]}
        for old, new, reason in records:
            try:
                a = self._evaluate(old, values)
                b = self._evaluate(new, values)
            except _Unavailable:
                continue
            compare = getattr(new.tag, "values_eq_approx", None)
            same = bool(compare(a, b)) if compare is not None else _same(old, a, b, approx=True)
            if not same:
                name = getattr(reason, "name", None) or str(reason)
                where = getattr(reason, "location", None)
                label = f"{name} ({where})" if where else name
                raise BadRewrite(
                    f"DEBUG_MODE: the rewrite {label} replaced {_node_of(old)} by "
                    f"{_node_of(new)}, which computes a different value.\n"
                    f"  before: {describe_value(a)}: {a!r:.300}\n"
                    f"  after: {describe_value(b)}: {b!r:.300}\n"
                    "The replaced node was created at: "
                    f"{_where(old.owner) if old.owner else '(a graph input)'}\nHINT: exclude it "
                    f"with OPGRAPH_FLAGS=optimizer_excluding={name} and report the bug to the "
                    "package that provides it.",
                    old_r=old,
                    new_r=new,
                    reason=reason,
                    old_r_val=a,
                    new_r_val=b,
                )

    def _evaluate(self, var: Variable, values: dict[Variable, Any]) -> Any:
        """The value of ``var`` on this call's inputs, computing replaced nodes as needed."""
        if var in values:
            return values[var]
        if isinstance(var, Constant):
            return var.data
        for node in io_toposort(list(values), [var]):
            if all(o in values for o in node.outputs):
                continue
            ins = []
            for v in node.inputs:
                if v in values:
                    ins.append(values[v])
                elif isinstance(v, Constant):
                    ins.append(v.data)
                else:
                    raise _Unavailable
            try:
                outs = self._perform(node, ins, check=False)
            except Exception as exc:
                raise _Unavailable from exc
            values.update(zip(node.outputs, outs))
        if var not in values:
            raise _Unavailable
        return values[var]


class _Unavailable(Exception):
    """A value the rewrite check cannot compute (an untaken branch, a failing old node)."""


class DebugMode(Mode):
    """The mode that checks every node and every rewrite (Theano's ``DebugMode``).

    Parameters
    ----------
    optimizer
        The rewrites to run and check (default ``"fast_run"``).
    check_isfinite
        Treat NaN/inf outputs as errors (default ``config.DebugMode__check_finite``).
    linker
        The linker whose backend kernels are compared with ``perform`` (default
        ``config.linker``); the graph always runs in DEBUG_MODE's own checking linker.
    stability_patience, check_c_code, check_py_code
        Accepted for Theano compatibility; the checks above always run.
    check_preallocated_output, require_matching_strides
        Accepted for Theano compatibility and ignored.
    """

    def __init__(
        self,
        optimizer: Any = "fast_run",
        stability_patience: int | None = None,
        check_c_code: bool | None = None,
        check_py_code: bool | None = None,
        check_isfinite: bool | None = None,
        check_preallocated_output: Any = None,
        require_matching_strides: int | None = None,
        linker: Any = None,
    ) -> None:
        super().__init__(linker=linker, optimizer=optimizer)
        if check_isfinite is None:
            check_isfinite = bool(config.DebugMode__check_finite)
        self.check_isfinite = check_isfinite

    @property
    def linker(self) -> DebugLinker:  # type: ignore[override]
        impl = resolve_linker(self.provided_linker)
        return DebugLinker(kernels=impl.kernels, check_isfinite=self.check_isfinite)

    def prepare_fgraph(self, fgraph: Any) -> None:
        recorder = RewriteRecorder()
        fgraph.attach_feature(recorder)
        fgraph.debug_rewrites = recorder
