"""From function()'s arguments to a linked function: givens, shared variables, updates.

:func:`rebuild_collect_shared` substitutes ``givens`` (cloning what depends on them),
collects every shared variable the outputs and updates use, adds their default updates and
checks each update's type. :func:`pfunc` turns the result into :class:`~opgraph.compile.io.In`
specs (explicit inputs, then one implicit input per shared variable, carrying its update),
and compiles them with :func:`~opgraph.compile.function_module.orig_function`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from opgraph.compile.function_module import orig_function
from opgraph.compile.io import In, SymbolicOutput
from opgraph.compile.sharedvalue import SharedVariable, shared
from opgraph.graph.basic import Constant, Variable
from opgraph.graph.clone import clone_get_equiv
from opgraph.graph.traversal import ancestors, graph_inputs

__all__ = [
    "pfunc",
    "rebuild_collect_shared",
]


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
        # As in Theano, the shared variable's type may take the update over (a GPU type
        # turns a host tensor of its dtype and pattern into a transfer); core types refuse.
        try:
            return store_into, store_into.type.filter_variable(update_val, allow_convert=False)
        except TypeError:
            pass
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
