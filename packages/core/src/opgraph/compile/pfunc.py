"""From function()'s arguments to a linked function: givens, shared variables, updates.

:func:`rebuild_collect_shared` substitutes ``givens`` (cloning what depends on them),
collects every shared variable the outputs and updates use, adds their default updates and
checks each update's type. :func:`pfunc` turns the result into :class:`~opgraph.compile.io.In`
specs (explicit inputs, then one implicit input per shared variable, carrying its update).
:class:`FunctionMaker` clones the graph into a FunctionGraph, runs the mode's rewrites,
protects outputs from aliasing (:func:`~opgraph.compile.ops.insert_deepcopy`) and links it.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opgraph.compile.io import In, SymbolicInput, SymbolicOutput
from opgraph.compile.mode import Mode, get_mode
from opgraph.compile.ops import alias_root, insert_deepcopy
from opgraph.compile.sharedvalue import SharedVariable, shared
from opgraph.graph.basic import Constant, Variable
from opgraph.graph.clone import clone_get_equiv
from opgraph.graph.fg import FunctionGraph
from opgraph.graph.traversal import ancestors, graph_inputs
from opgraph.link.basic import Container

if TYPE_CHECKING:
    from opgraph.compile.function import Function

__all__ = [
    "FunctionMaker",
    "UnusedInputError",
    "orig_function",
    "pfunc",
    "rebuild_collect_shared",
]


class UnusedInputError(ValueError):
    """An input of function() is not needed to compute the outputs (and has no update)."""


def _config() -> Any:
    from opgraph.configdefaults import config

    return config


Pairs = Iterable[tuple[Variable, Any]] | Mapping[Variable, Any] | None


def _pairs(value: Pairs, what: str) -> list[tuple[Any, Any]]:
    if value is None:
        return []
    if isinstance(value, Mapping):
        return list(value.items())
    try:
        pairs = [tuple(p) for p in value]
    except TypeError:
        pairs = []
    if not all(len(p) == 2 for p in pairs) or isinstance(value, Variable):
        raise TypeError(
            f"{what} must be a dict or a list of (variable, value) pairs, got {value!r}"
        )
    return pairs


def _check_givens(pairs: list[tuple[Any, Any]], rebuild_strict: bool) -> dict[Variable, Variable]:
    replace: dict[Variable, Variable] = {}
    for v_orig, v_repl in pairs:
        if not isinstance(v_orig, Variable):
            raise TypeError(f"givens keys must be Variables, got {v_orig!r}")
        if not isinstance(v_repl, Variable):
            v_repl = shared(v_repl)
        if v_orig in replace:
            raise ValueError(f"givens replaces {v_orig} twice")
        if rebuild_strict and v_repl.type != v_orig.type:
            try:
                v_repl = v_orig.type.filter_variable(v_repl)
            except TypeError as exc:
                raise TypeError(
                    f"givens cannot replace {v_orig} (type {v_orig.type}) by {v_repl} (type "
                    f"{v_repl.type}): the types differ.\nHINT: cast the replacement to "
                    f"{v_orig.type} (e.g. opgraph.tensor.cast), or pass rebuild_strict=False "
                    "to let the graph's types change."
                ) from exc
        replace[v_orig] = v_repl
    for v_orig, v_repl in replace.items():
        used = [k for k in replace if k is not v_orig and k in set(ancestors([v_repl]))]
        if used:
            raise ValueError(
                f"givens: the replacement of {v_orig} depends on {used[0]}, which givens "
                "also replaces; replacements are not applied inside each other.\nHINT: "
                "write the replacement in terms of the final variables."
            )
    return replace


def _check_update(store_into: Any, update_val: Any) -> tuple[SharedVariable, Variable]:
    if not isinstance(store_into, SharedVariable):
        raise TypeError(
            f"an update target must be a SharedVariable, got {store_into!r} "
            f"({type(store_into).__name__}).\nHINT: only shared variables keep values between "
            "calls; create one with opgraph.shared(value)."
        )
    if not isinstance(update_val, Variable):
        update_val = store_into.type.make_constant(update_val)
    if update_val.type != store_into.type:
        raise TypeError(
            "An update must have the same type as the original shared variable "
            f"(shared_var={store_into}, shared_var.type={store_into.type}, "
            f"update_val={update_val}, update_val.type={update_val.type}).\n"
            "HINT: cast the update to the shared variable's dtype (e.g. "
            "opgraph.tensor.cast(update, 'float32')); if only the broadcast pattern differs, "
            "call tensor.unbroadcast(var, axis_to_unbroadcast[, ...]) or tensor.addbroadcast."
        )
    return store_into, update_val


def rebuild_collect_shared(
    outputs: Variable | Sequence[Variable] | None,
    inputs: Sequence[Variable] | None = None,
    replace: Pairs = None,
    updates: Pairs = None,
    rebuild_strict: bool = True,
    copy_inputs_over: bool = True,
    no_default_updates: bool | Sequence[SharedVariable] = False,
) -> tuple[list[Variable], Any, list[Any]]:
    """Apply ``replace`` (givens) and collect the shared variables and updates (Theano's).

    Returns
    -------
    (input_variables, cloned_outputs, [clone_d, update_d, update_expr, shared_inputs])
        ``cloned_outputs`` has the shape of ``outputs`` (a Variable, a list, or an empty
        list for None); ``clone_d`` maps original to new variables; ``update_d`` maps each
        shared variable to its (cloned) update; ``update_expr`` lists the ``(shared,
        update)`` pairs; ``shared_inputs`` lists every shared variable used, in order.
    """
    inputs = list(inputs or [])
    single = isinstance(outputs, Variable)
    out_list = [] if outputs is None else [outputs] if single else list(outputs)  # type: ignore[list-item]
    givens = _check_givens(_pairs(replace, "givens"), rebuild_strict)
    update_pairs: list[tuple[SharedVariable, Variable]] = []
    targets: set[SharedVariable] = set()
    for store_into, update_val in _pairs(updates, "updates"):
        pair = _check_update(store_into, update_val)
        if pair[0] in targets:
            raise ValueError(f"shared variable {pair[0]} has two update expressions; give it one.")
        targets.add(pair[0])
        update_pairs.append(pair)

    shared_inputs: list[SharedVariable] = []
    seen: set[Variable] = set()

    def collect(roots: Sequence[Variable]) -> None:
        for v in ancestors(roots, blockers=list(givens)):
            if isinstance(v, SharedVariable) and v not in seen and v not in givens:
                seen.add(v)
                shared_inputs.append(v)

    collect(out_list + [u for _, u in update_pairs] + list(givens.values()))
    i = 0
    while i < len(shared_inputs):
        sv = shared_inputs[i]
        i += 1
        default = getattr(sv, "default_update", None)
        skip = no_default_updates is True or (
            not isinstance(no_default_updates, bool) and sv in no_default_updates
        )
        if default is not None and not skip and sv not in targets:
            pair = _check_update(sv, default)
            targets.add(sv)
            update_pairs.append(pair)
            collect([pair[1]])

    roots = out_list + [u for _, u in update_pairs]
    if givens or not copy_inputs_over:
        memo: dict[Any, Any] = dict(givens)
        ins = graph_inputs(roots, blockers=list(givens))
        for v in (*inputs, *ins):
            if v not in memo:
                cloned = not copy_inputs_over and not isinstance(v, Constant | SharedVariable)
                memo[v] = v.clone() if cloned else v
        clone_d = clone_get_equiv(ins, roots, copy_inputs=False, copy_orphans=False, memo=memo)
    else:
        clone_d = {}
    new_roots = [clone_d.get(v, v) for v in roots]
    cloned_outputs: Any = new_roots[: len(out_list)]
    if single:
        cloned_outputs = cloned_outputs[0]
    new_updates = [(sv, u) for (sv, _), u in zip(update_pairs, new_roots[len(out_list) :])]
    input_variables = [clone_d.get(v, v) for v in inputs]
    return input_variables, cloned_outputs, [clone_d, dict(new_updates), new_updates, shared_inputs]


def _param_to_in(param: Any, allow_downcast: bool | None, index: int) -> In:
    if isinstance(param, Constant):
        raise TypeError(
            f"input {index} ({param}) is a Constant; a function input cannot be a Constant "
            "because its value is already known.\nHINT: remove it from the inputs list."
        )
    if isinstance(param, SharedVariable):
        raise TypeError(
            f"Cannot use a shared variable ({param}) as explicit input {index}: its value "
            "is already stored.\nHINT: remove it from the inputs, or substitute a non-shared "
            "variable via the 'givens' parameter."
        )
    if isinstance(param, In):
        spec = copy.copy(param)  # the caller's In is left as it was
        if spec.allow_downcast is None:
            spec.allow_downcast = allow_downcast
        return spec
    if isinstance(param, Variable):
        return In(param, allow_downcast=allow_downcast)
    raise TypeError(
        f"input {index} of function() must be a Variable or an In, got {param!r} "
        f"({type(param).__name__})"
    )


def pfunc(
    params: Sequence[Any],
    outputs: Any = None,
    mode: Any = None,
    updates: Pairs = None,
    givens: Pairs = None,
    no_default_updates: bool | Sequence[SharedVariable] = False,
    accept_inplace: bool = False,
    name: str | None = None,
    rebuild_strict: bool = True,
    allow_input_downcast: bool | None = None,
    profile: Any = None,
    on_unused_input: str | None = None,
    output_keys: list[str] | None = None,
) -> Any:
    """Compile a function from parameters (Variables or In), outputs and updates.

    The arguments are those of :func:`opgraph.compile.function.function`; ``outputs`` is a
    Variable, an Out, or a list of them (or None).
    """
    inputs = [_param_to_in(p, allow_input_downcast, i) for i, p in enumerate(params)]
    seen: dict[Variable, int] = {}
    for i, spec in enumerate(inputs):
        if spec.variable in seen:
            raise ValueError(
                f"Variable {spec.variable} is used twice in inputs to function(), at indices "
                f"{seen[spec.variable]} and {i}. This would result in values provided for it "
                "being ignored. Please do not duplicate variables in the inputs list."
            )
        seen[spec.variable] = i
    for key, _ in _pairs(givens, "givens"):
        if key in seen:
            raise ValueError(
                f"You are trying to replace variable '{key}' through the `givens` parameter, "
                "but this variable is an input to your function. Replacing inputs has no "
                "effect.\nHINT: define a new input y and use function([y], f(x), givens={x: "
                "g(y)}), or opgraph.clone(f(x), replace={x: g(x)})."
            )

    single = not isinstance(outputs, list | tuple) and outputs is not None
    out_specs = [] if outputs is None else [outputs] if single else list(outputs)
    out_specs = [o if isinstance(o, SymbolicOutput) else SymbolicOutput(o) for o in out_specs]
    in_updates = [spec.update for spec in inputs if spec.update is not None]
    _, cloned, (_, update_d, _, shared_inputs) = rebuild_collect_shared(
        [o.variable for o in out_specs] + in_updates,
        [spec.variable for spec in inputs],
        replace=givens,
        updates=updates,
        rebuild_strict=rebuild_strict,
        copy_inputs_over=True,
        no_default_updates=no_default_updates,
    )
    new_outputs = [SymbolicOutput(v, o.borrow) for v, o in zip(cloned, out_specs)]
    new_in_updates = iter(cloned[len(out_specs) :])
    for spec in inputs:
        if spec.update is not None:
            spec.update = next(new_in_updates)
    for sv in shared_inputs:
        upd = update_d.get(sv)
        inputs.append(
            In(
                sv,
                value=sv.container,
                update=upd,
                mutable=upd is not None,
                borrow=True,
                implicit=True,
                shared=True,
            )
        )
    for sv in update_d:
        if sv not in shared_inputs:
            inputs.append(
                In(
                    sv,
                    value=sv.container,
                    update=update_d[sv],
                    mutable=True,
                    borrow=True,
                    implicit=True,
                    shared=True,
                )
            )
    final_outputs: Any = None if outputs is None else new_outputs[0] if single else new_outputs
    return orig_function(
        inputs,
        final_outputs,
        mode=mode,
        accept_inplace=accept_inplace,
        name=name,
        profile=profile,
        on_unused_input=on_unused_input,
        output_keys=output_keys,
    )


def orig_function(
    inputs: Sequence[SymbolicInput],
    outputs: Any,
    mode: Mode | str | None = None,
    accept_inplace: bool = False,
    name: str | None = None,
    profile: Any = None,
    on_unused_input: str | None = None,
    output_keys: list[str] | None = None,
) -> Function:
    """Compile from input/output specs (no givens or shared-variable collection)."""
    maker = FunctionMaker(
        inputs,
        outputs,
        mode,
        accept_inplace=accept_inplace,
        profile=profile,
        on_unused_input=on_unused_input,
        output_keys=output_keys,
        name=name,
    )
    return maker.create()


@contextlib.contextmanager
def _full_collections_deferred() -> Iterator[None]:
    """Keep the garbage collector's full collections out of a compilation.

    Compiling a big graph allocates enough objects to trigger many full collections, each
    walking the whole heap (the user's graph included) again: on a 16,000-node chain that
    was most of the compile time, and it made the time grow faster than the graph. Inside
    this context the objects alive when it starts are frozen (``gc.freeze()``: out of the
    collector's view) and full collections are deferred (a huge third threshold), while
    the young generations are still collected as usual, so short-lived cyclic garbage is
    still freed. On exit both are undone; the deferred full collection happens at the
    collector's next opportunity. Nothing is done when the collector is off or something
    else (an enclosing compile, the program itself) froze objects already.
    """
    if not gc.isenabled() or gc.get_freeze_count():
        yield
        return
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(thresholds[0], thresholds[1], 1 << 30)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


_UNUSED = (
    "opgraph.function was asked to create a function computing outputs given certain "
    "inputs, but the provided input variable at index {i} is not part of the computational "
    "graph needed to compute the outputs: {var}.\n{how}"
)
_UNUSED_RAISE = (
    "To make this error into a warning, you can pass the parameter on_unused_input='warn' "
    "to opgraph.function. To disable it completely, use on_unused_input='ignore'."
)
_UNUSED_WARN = (
    "To make this warning into an error, you can pass the parameter on_unused_input='raise' "
    "to opgraph.function. To disable it completely, use on_unused_input='ignore'."
)


class FunctionMaker:
    """Builds the rewritten FunctionGraph and the linker of a function; ``create()`` makes it.

    Parameters
    ----------
    inputs
        In/SymbolicInput specs (or Variables): explicit inputs first, then implicit ones.
    outputs
        A spec or Variable (single output), a list of them, or None.
    mode
        The Mode (or name).
    fgraph
        An already rewritten graph (copies and unpickling): rewriting is skipped.

    Attributes
    ----------
    fgraph
        The rewritten FunctionGraph (``f.maker.fgraph``).
    inputs, outputs
        The specs; ``fgraph.outputs`` holds the outputs then the update values.
    """

    def __init__(
        self,
        inputs: Sequence[Any],
        outputs: Any,
        mode: Mode | str | None = None,
        accept_inplace: bool = False,
        function_builder: type[Function] | None = None,
        profile: Any = None,
        on_unused_input: str | None = None,
        fgraph: FunctionGraph | None = None,
        output_keys: list[str] | None = None,
        name: str | None = None,
    ) -> None:
        self.mode = mode = get_mode(mode)
        if function_builder is None:
            from opgraph.compile.function import Function as function_builder
        self.function_builder = function_builder
        self.profile = profile
        self.name = name
        self.accept_inplace = accept_inplace
        self.on_unused_input = on_unused_input
        self.output_keys = output_keys
        self.return_none = outputs is None
        self.unpack_single = outputs is not None and not isinstance(outputs, list | tuple)
        outs = [] if outputs is None else [outputs] if self.unpack_single else list(outputs)
        self.outputs = [o if isinstance(o, SymbolicOutput) else SymbolicOutput(o) for o in outs]
        self.inputs = [i if isinstance(i, SymbolicInput) else In(i) for i in inputs]
        self.rewrite_time = 0.0
        if fgraph is None:
            self._check_unused_inputs()
            with _full_collections_deferred():
                fgraph = self._build_fgraph()
                t0 = time.perf_counter()
                mode.prepare_fgraph(fgraph)
                rewriter = mode.get_rewriter()
                if rewriter is not None:
                    (getattr(rewriter, "rewrite", None) or rewriter.optimize)(fgraph)
                self.rewrite_time = time.perf_counter() - t0
                # Update values never alias anything: two shared variables must not share
                # memory.
                updates = self._update_specs(fgraph, borrow=False)
                insert_deepcopy(fgraph, self.inputs, self.outputs + updates)
        if any(getattr(n.op, "destroy_map", None) for n in fgraph.apply_nodes):
            # A copied or unpickled graph needs the handler's orderings too: readers of a
            # buffer must run before the node that overwrites it.
            from opgraph.rewriting.basic import _attach_destroy_handler

            _attach_destroy_handler(fgraph)
        self.fgraph = fgraph
        self.linker = mode.linker.accept(
            fgraph, no_recycling=self._no_recycling(fgraph), profile=profile
        )

    def _update_specs(self, fgraph: FunctionGraph, borrow: bool = True) -> list[SymbolicOutput]:
        mapping = fgraph.update_mapping or {}
        return [SymbolicOutput(fgraph.outputs[k], borrow=borrow) for k in sorted(mapping)]

    def _check_unused_inputs(self) -> None:
        how = self.on_unused_input or _config().on_unused_input
        if how == "ignore":
            return
        if how not in ("raise", "warn"):
            raise ValueError(
                f"Invalid value for keyword on_unused_input of function(): {how!r}.\n"
                "Valid values are 'raise', 'warn', and 'ignore'."
            )
        roots = [o.variable for o in self.outputs]
        roots += [i.update for i in self.inputs if i.update is not None]
        used = set(ancestors(roots, blockers=[i.variable for i in self.inputs]))
        for i, spec in enumerate(self.inputs):
            if spec.variable in used or spec.update is not None:
                continue
            if how == "warn":
                warnings.warn(
                    _UNUSED.format(i=i, var=spec.variable, how=_UNUSED_WARN), stacklevel=5
                )
            else:
                raise UnusedInputError(_UNUSED.format(i=i, var=spec.variable, how=_UNUSED_RAISE))

    def _build_fgraph(self) -> FunctionGraph:
        from opgraph.graph.features import PreserveVariableAttributes

        out_vars = [o.variable for o in self.outputs]
        update_mapping = {}
        for k, spec in enumerate(self.inputs):
            if spec.update is not None:
                update_mapping[len(out_vars)] = k
                out_vars.append(spec.update)
        fgraph = FunctionGraph(
            [i.variable for i in self.inputs],
            out_vars,
            features=[PreserveVariableAttributes()],
            clone=True,
            update_mapping=update_mapping,
        )
        inplace = [n for n in fgraph.toposort() if getattr(n.op, "destroy_map", None)]
        if inplace and not self.accept_inplace:
            raise TypeError(
                f"Graph must not contain inplace operations: {inplace[0]} overwrites its "
                f"input (destroy_map={inplace[0].op.destroy_map}).\nHINT: pass "
                "accept_inplace=True to function() if overwriting is intended."
            )
        if inplace:
            from opgraph.rewriting.basic import _attach_destroy_handler

            _attach_destroy_handler(fgraph)
        self._protect_inputs(fgraph)
        return fgraph

    def _protect_inputs(self, fgraph: FunctionGraph) -> None:
        """Forbid in-place rewrites on inputs not marked mutable (Theano's Supervisor).

        Shared variables are protected even when updated: overwriting one in place before
        the call has succeeded would break the all-or-nothing rule of updates.
        """
        from opgraph.graph.destroyhandler import Supervisor as supervisor

        has_destroyers = getattr(fgraph, "has_destroyers", None)
        protected = [
            var
            for spec, var in zip(self.inputs, fgraph.inputs)
            if getattr(spec, "shared", False)
            or not (spec.mutable or (has_destroyers is not None and has_destroyers([var])))
        ]
        fgraph.attach_feature(supervisor(protected))

    def _no_recycling(self, fgraph: FunctionGraph) -> list[Variable]:
        """Variables whose memory the caller receives: never reused by the next call."""
        specs = self.outputs + self._update_specs(fgraph)
        out: list[Variable] = []
        for var, spec in zip(fgraph.outputs, specs):
            if spec.borrow:
                continue
            v = var
            out.append(v)
            root = alias_root(v)
            while v is not root and v.owner is not None:
                op = v.owner.op
                (k,) = [*op.view_map.get(v.index, []), *op.destroy_map.get(v.index, [])]
                v = v.owner.inputs[k]
                out.append(v)
        return out

    def create(
        self,
        input_storage: Sequence[Any] | None = None,
        storage_map: dict[Variable, list[Any]] | None = None,
    ) -> Function:
        """Link the graph and return the Function.

        ``input_storage`` gives each input's default value or Container (default: the
        specs' ``value``); ``storage_map`` pre-assigns cells (``copy(share_memory=True)``).
        """
        t0 = time.perf_counter()
        values = (
            list(input_storage) if input_storage is not None else [i.value for i in self.inputs]
        )
        cells, defaults = [], []
        for spec, value in zip(self.inputs, values):
            if isinstance(value, Container):
                cells.append(value.storage)
                defaults.append(value)
            elif value is not None:
                filtered = spec.variable.type.filter(
                    value, strict=spec.strict, allow_downcast=spec.allow_downcast
                )
                c = Container(
                    spec.variable,
                    [filtered],
                    strict=spec.strict,
                    allow_downcast=spec.allow_downcast,
                )
                cells.append(c.storage if spec.update is not None else [None])
                defaults.append(c)
            else:
                cells.append([None])
                defaults.append(None)
        with _full_collections_deferred():
            fn, _ins, outs, thunks, order = self.linker.make_all(
                input_storage=cells, storage_map=storage_map
            )
        profile = self.profile
        if profile is not None:
            profile.linker_time += time.perf_counter() - t0
            profile.rewriter_time += self.rewrite_time
            profile.record_nodes(order, thunks, self.linker.backend)
        return self.function_builder(self, fn, cells, outs, defaults)

    def rewrite_report(self) -> str:
        """Which rewrites ran on this function's graph, how often (or that none ran)."""
        from opgraph.rewriting.provenance import rewrite_report

        return rewrite_report(self.fgraph)

    def __reduce__(self) -> Any:
        fg, _ = self.fgraph.clone_get_equiv(check_integrity=False, attach_feature=False)
        n = len(self.outputs)
        outs = [SymbolicOutput(v, o.borrow) for v, o in zip(fg.outputs[:n], self.outputs)]
        kwargs = {
            "inputs": self.inputs,
            "outputs": None if self.return_none else outs[0] if self.unpack_single else outs,
            "mode": self.mode,
            "accept_inplace": self.accept_inplace,
            "function_builder": self.function_builder,
            "on_unused_input": self.on_unused_input,
            "fgraph": fg,
            "output_keys": self.output_keys,
            "name": self.name,
        }
        return (_constructor_FunctionMaker, (kwargs,))


def _constructor_FunctionMaker(kwargs: dict[str, Any]) -> FunctionMaker:
    return FunctionMaker(**kwargs)
