"""``scan``: Theano's symbolic loop, from a step function to a Scan node.

``scan`` calls the step function once on symbolic stand-ins for one entry of each sequence,
the past values of each recurrent output and the non-sequences; the graph it returns becomes
the loop's inner graph. Variables the step reads from outside (a closure over ``W``, a shared
variable, a value computed before the loop) become non-sequences, computed once outside the
loop; shared variables updated in the step (explicitly, or a random stream's state) become
the loop's shared states, and their last values come back in ``updates``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np

from opgraph.compile.mode import Mode
from opgraph.compile.sharedvalue import SharedVariable
from opgraph.configdefaults import config
from opgraph.graph.basic import Constant, Variable
from opgraph.graph.clone import clone_replace
from opgraph.graph.traversal import io_toposort
from opgraph.graph.utils import format_trace, user_frames
from opgraph.ifelse import ifelse
from opgraph.scan_module.scan_op import Scan
from opgraph.scan_module.scan_utils import ScanInfo, until
from opgraph.tensor.axes import shape_padleft
from opgraph.tensor.basic import as_tensor_variable, unbroadcast
from opgraph.tensor.math import cast, lt, minimum
from opgraph.tensor.shape import scalar_constant
from opgraph.tensor.subtensor import getitem
from opgraph.tensor.type import TensorType
from opgraph.updates import OrderedUpdates

__all__ = ["scan"]


def _as_list(x: Any) -> list[Any]:
    if x is None:
        return []
    if isinstance(x, list | tuple):
        return list(x)
    return [x]


def _is_updates(x: Any) -> bool:
    if isinstance(x, dict):
        return True
    if isinstance(x, list | tuple) and x:
        return all(
            isinstance(p, list | tuple) and len(p) == 2 and isinstance(p[0], SharedVariable)
            for p in x
        )
    return False


def _parse_step_result(result: Any) -> tuple[list[Any], list[tuple[Any, Any]], Any]:
    """Theano's rule for what a step function returns: outputs, updates, an ``until``
    condition, or any of (outputs, updates), (updates, outputs), with ``until`` last."""
    if isinstance(result, until):
        return [], [], result.condition
    if _is_updates(result):
        return [], _update_pairs(result), None
    if not isinstance(result, list | tuple):
        return [result], [], None
    items = list(result)
    cond = None
    if items and isinstance(items[-1], until):
        cond = items.pop().condition
    if any(isinstance(i, until) for i in items):
        raise ValueError(
            "scan: the step function must return until(...) last (after the outputs and the "
            "updates)"
        )
    outputs: Any = items
    updates: Any = []
    if len(items) == 2 and _is_updates(items[1]) and not _is_updates(items[0]):
        outputs, updates = items
    elif len(items) == 2 and _is_updates(items[0]):
        updates, outputs = items
    elif len(items) == 1 and _is_updates(items[0]):
        outputs, updates = [], items[0]
    elif len(items) == 1 and cond is not None and isinstance(items[0], list | tuple):
        outputs = items[0]
    return _as_list(outputs), _update_pairs(updates), cond


def _update_pairs(updates: Any) -> list[tuple[Any, Any]]:
    pairs = list(updates.items()) if isinstance(updates, dict) else list(updates or ())
    for key, _ in pairs:
        if not isinstance(key, SharedVariable):
            raise TypeError(
                f"scan: the step function returned an update for {key!r}, which is not a shared "
                "variable; only shared variables can be updated."
            )
    return pairs


def _inner_like(outer: Variable, drop_first: bool, name: str | None) -> Variable:
    """A fresh inner variable of ``outer``'s type (of one entry of it with ``drop_first``)."""
    t = outer.type
    if drop_first:
        t = TensorType(t.dtype, t.broadcastable[1:])
    v = t()
    v.name = name
    return v


def _copy_test_value(src: Any, dst: Variable, entry: int | None = None) -> None:
    if config.compute_test_value == "off":
        return
    tv = getattr(getattr(src, "tag", None), "test_value", None)
    if tv is None and isinstance(src, Constant):
        tv = src.data
    if tv is None and isinstance(src, SharedVariable):
        tv = src.get_value(borrow=True)
    if tv is None:
        return
    with contextlib.suppress(IndexError, TypeError):
        dst.tag.test_value = np.asarray(tv)[entry] if entry is not None else tv


def _type_error(k: int, init: Variable, want: TensorType, got: Any, trace: Any) -> TypeError:
    """The build-time error for a step output whose type differs from its outputs_info."""
    if want.dtype != got.dtype:
        fix = (
            f"cast the step's result (T.cast(out, '{want.dtype}')) or give an initial value of "
            f"dtype {got.dtype}; an upcast often comes from a float64 constant or a shared "
            "variable of another dtype."
        )
    elif want.ndim != got.ndim:
        fix = "return a value with the initial value's number of dimensions."
    else:
        fix = (
            "make the broadcastable patterns agree: T.unbroadcast(out, *axes) or "
            "T.patternbroadcast(out, initial.broadcastable) on the step's result, or build the "
            "initial value with that pattern."
        )
    return TypeError(
        f"scan: output {k} of the step function has type {got}, but its initial value "
        f"(outputs_info[{k}], {init}) has type {want}: a recurrent output must keep its type "
        f"at every step.\nHINT: {fix}\nThe scan was built at:\n{format_trace(trace[:1])}"
    )


def scan(
    fn: Callable[..., Any],
    sequences: Any = None,
    outputs_info: Any = None,
    non_sequences: Any = None,
    n_steps: Any = None,
    truncate_gradient: int = -1,
    go_backwards: bool = False,
    mode: Mode | str | None = None,
    name: str | None = None,
    profile: bool | str = False,
    allow_gc: bool | None = None,
    strict: bool = False,
    return_list: bool = False,
) -> tuple[Any, OrderedUpdates]:
    """Loop ``fn`` over sequences and recurrent outputs (Theano 1.0's ``theano.scan``).

    Parameters
    ----------
    fn
        The step function. It receives, in order: one entry of each sequence (one argument
        per tap), the past values of each recurrent output (one per tap), then the
        non-sequences. It returns the step's outputs, optionally with a dict (or list of
        pairs) of shared-variable updates and an :class:`until` condition.
    sequences
        Tensors iterated along their first axis; a dict ``{"input": x, "taps": [-1, 0, 2]}``
        reads several entries around the current one.
    outputs_info
        One entry per output: None (the output is not fed back), an initial value (fed back
        as the previous value), or ``{"initial": x0, "taps": [-2, -1]}`` (several past values;
        ``x0`` then has one leading entry per lag).
    non_sequences
        Values passed unchanged to every step.
    n_steps
        Number of steps (default: the length of the shortest sequence). A negative number
        runs the loop backwards; with sequences, each must have at least that many entries.
    truncate_gradient
        Back-propagate through at most this many steps (-1: all).
    go_backwards
        Iterate the sequences from the end.
    mode
        Mode for the inner graph (default: the mode of the function compiling the loop).
    name
        Name shown by printing (default ``scan_fn``).
    profile, allow_gc
        Accepted for Theano compatibility; the inner graph is profiled with the outer
        function and frees memory as the outer mode says.
    strict
        Require every shared variable and outer variable the step uses to be passed in
        ``non_sequences``.
    return_list
        Always return a list of outputs, even for one.

    Returns
    -------
    outputs, updates
        The outputs (a variable, a list, or None when the step returns none) and an
        :class:`~opgraph.updates.OrderedUpdates` to pass to ``function(updates=...)``.
    """
    trace = user_frames(8, skip=1)
    if not callable(fn):
        raise TypeError(f"scan: fn must be callable, got {fn!r}")
    if truncate_gradient != -1 and (
        not isinstance(truncate_gradient, int) or truncate_gradient < 1
    ):
        raise ValueError(
            f"scan: truncate_gradient must be -1 or a positive int, got {truncate_gradient!r}"
        )
    seqs = [_seq_spec(s, i) for i, s in enumerate(_as_list(sequences))]
    outs_info = [_out_spec(o, i) for i, o in enumerate(_as_list(outputs_info))]
    declared_non_seqs = [
        x if isinstance(x, Variable) else as_tensor_variable(x) for x in _as_list(non_sequences)
    ]

    # -- the number of steps; a known negative number flips the direction.
    fixed_steps = None
    if n_steps is not None:
        if isinstance(n_steps, float) or (
            isinstance(n_steps, Variable)
            and getattr(n_steps.type, "dtype", "")[:3] != "int"
            and getattr(n_steps.type, "dtype", "")[:4] != "uint"
        ):
            raise TypeError(f"scan: n_steps must be an integer, got {n_steps!r}")
        n_var = as_tensor_variable(n_steps)
        if n_var.ndim != 0:
            raise TypeError(f"scan: n_steps must be a scalar, got {n_var.type}")
        value = scalar_constant(n_var)
        if value is not None:
            fixed_steps = int(value)
            if fixed_steps < 0:
                go_backwards = not go_backwards
                fixed_steps = -fixed_steps
    # -- sequences: one outer slice and one inner variable per tap.
    outer_seqs: list[Variable] = []
    inner_seqs: list[Variable] = []
    for spec in seqs:
        x, taps = spec["input"], spec["taps"]
        lo, hi = min(min(taps), 0), max(max(taps), 0)
        for k in taps:
            start, stop = k - lo, -(hi - k) or None
            piece = getitem(x, slice(start, stop))
            if go_backwards:
                piece = piece[::-1]
            if x.name is not None:
                piece.name = f"{x.name}[{start}:{'' if stop is None else stop}]"
            label = None
            if x.name is not None:
                label = f"{x.name}[t{'+' if k > 0 else ''}{k if k else ''}]"
            inner = _inner_like(x, True, label)
            _copy_test_value(x, inner, start)
            outer_seqs.append(piece)
            inner_seqs.append(inner)
    # The loop's length, and sequences reversed at run time for a symbolic negative n_steps.
    if n_steps is None:
        if not outer_seqs:
            raise ValueError(
                "scan: no information about the number of steps: provide n_steps or at least "
                "one sequence."
            )
        steps: Variable = outer_seqs[0].shape[0]
        for s in outer_seqs[1:]:
            steps = minimum(steps, s.shape[0])
    elif fixed_steps is not None:
        steps = as_tensor_variable(np.int64(fixed_steps))
    else:
        n_var = cast(as_tensor_variable(n_steps), "int64")
        backwards = lt(n_var, 0)
        outer_seqs = [ifelse(backwards, s[::-1], s) for s in outer_seqs]
        steps = abs(n_var)
    steps = cast(steps, "int64")

    # -- recurrent outputs: the initial entries outside, one inner variable per tap.
    rec: list[dict[str, Any]] = []
    inner_taps_user: list[Variable] = []
    for k, spec in enumerate(outs_info):
        if spec["taps"] is None:
            continue
        init, taps = spec["initial"], spec["taps"]
        lag = -min(taps)
        sit_sot = taps == [-1]
        if sit_sot:
            outer_init = unbroadcast(shape_padleft(init), 0)
            inner = [_inner_like(init, False, _tap_name(init, -1))]
            _copy_test_value(init, inner[0])
        else:
            if init.ndim == 0:
                raise ValueError(
                    f"scan: outputs_info[{k}] has taps {taps}, so its 'initial' needs a leading "
                    f"dimension of at least {lag} entries (one per lag), but it is a scalar."
                )
            outer_init = unbroadcast(getitem(init, slice(None, lag)), 0)
            inner = []
            for tap in taps:
                v = _inner_like(init, True, _tap_name(init, tap))
                _copy_test_value(init, v, lag + tap)
                inner.append(v)
        rec.append(
            {
                "index": k,
                "taps": tuple(taps),
                "outer": outer_init,
                "inner": inner,
                "sit_sot": sit_sot,
                "init": init,
            }
        )
        inner_taps_user.extend(inner)
    # -- non-sequences: the step sees the outer variables themselves (as in Theano, so that
    # T.grad(y[i], x) inside the step can follow y back to x); they are replaced by inner
    # inputs below, with whatever part of the step depends only on them.
    inner_non_seqs = list(declared_non_seqs)

    args = inner_seqs + inner_taps_user + inner_non_seqs
    raw_outputs, update_pairs, condition = _parse_step_result(fn(*args))
    outputs = [o if isinstance(o, Variable) else as_tensor_variable(o) for o in raw_outputs]
    outputs = [as_tensor_variable(o) if not isinstance(o.type, TensorType) else o for o in outputs]
    if outs_info and len(outs_info) != len(outputs):
        raise ValueError(
            f"scan: outputs_info has {len(outs_info)} entries but the step function returns "
            f"{len(outputs)} outputs.\nHINT: give one outputs_info entry per output, None for "
            "an output that is not fed back (like map)."
        )
    if not outs_info:
        outs_info = [{"taps": None} for _ in outputs]
    # -- check each recurrent output's type against its initial value.
    for r in rec:
        k = r["index"]
        want = r["inner"][0].type
        got = outputs[k].type
        if got == want:
            continue
        if (
            got.dtype == want.dtype
            and got.ndim == want.ndim
            and all(g or not w for g, w in zip(got.broadcastable, want.broadcastable))
        ):
            outputs[k] = unbroadcast(outputs[k], *range(got.ndim)) if got.ndim else outputs[k]
            outputs[k] = want.filter_variable(outputs[k])
            continue
        raise _type_error(k, r["init"], want, got, trace)
    updates = [
        (
            sv,
            sv.type.filter_variable(as_tensor_variable(u))
            if isinstance(sv.type, TensorType)
            else u,
        )
        for sv, u in update_pairs
    ]
    if condition is not None:
        condition = as_tensor_variable(condition)

    # -- shared states, and what the step reads from outside (it becomes a non-sequence).
    arg_set = set(inner_seqs) | set(inner_taps_user)
    updated = dict(updates)
    roots = outputs + [u for _, u in updates] + ([condition] if condition is not None else [])
    while True:  # a random stream's state has a default update; its graph may add more
        added = False
        for node in io_toposort([], roots):
            for v in node.inputs:
                if (
                    isinstance(v, SharedVariable)
                    and v not in updated
                    and getattr(v, "default_update", None) is not None
                ):
                    updated[v] = v.default_update
                    updates.append((v, v.default_update))
                    roots.append(v.default_update)
                    added = True
        if not added:
            break
    states = [sv for sv, _ in updates]
    dependent = set(arg_set) | set(states)
    hoisted: list[Variable] = []
    seen: set[Variable] = set()

    def hoist(v: Variable) -> None:
        if v in dependent or v in seen or isinstance(v, Constant):
            return
        seen.add(v)
        hoisted.append(v)

    for node in io_toposort([], roots):
        if any(v in dependent for v in node.inputs):
            dependent.update(node.outputs)
    for node in io_toposort([], roots):
        if all(o in dependent for o in node.outputs):
            for v in node.inputs:
                hoist(v)
    for v in roots:
        hoist(v)  # an output computed entirely outside the loop
    if strict:
        allowed = set(declared_non_seqs)
        for v in hoisted:
            bad = [
                r
                for r in _roots(v)
                if not isinstance(r, Constant) and r not in allowed and r not in arg_set
            ]
            if bad:
                raise ValueError(
                    f"scan: with strict=True, every variable the step uses must be passed in "
                    f"non_sequences, but it uses {bad[0]} ({bad[0].type}).\nHINT: add it to "
                    "non_sequences, or pass strict=False."
                )
    # Declared non-sequences first (in order), then what was found; each outer variable
    # gets one inner stand-in.
    replace: dict[Variable, Variable] = {}
    non_seq_outer: list[Variable] = []
    for outer in [*declared_non_seqs, *hoisted]:
        if isinstance(outer, Constant) or outer in updated or outer in replace:
            continue
        replace[outer] = _stand_in(outer)
        non_seq_outer.append(outer)
    non_seq_inner = [replace[v] for v in non_seq_outer]
    state_inner = [_stand_in(sv) for sv in states]
    replace.update(zip(states, state_inner))

    mit = [r for r in rec if not r["sit_sot"]]
    sit = [r for r in rec if r["sit_sot"]]
    ordered_rec = mit + sit
    nit_index = [k for k, spec in enumerate(outs_info) if spec["taps"] is None]
    inner_outputs = [outputs[r["index"]] for r in ordered_rec]
    inner_outputs += [outputs[k] for k in nit_index]
    inner_outputs += [updated[sv] for sv in states]
    if condition is not None:
        inner_outputs.append(condition)
    if replace:
        inner_outputs = clone_replace(inner_outputs, replace=replace, strict=False)
    inner_inputs = (
        inner_seqs + [v for r in ordered_rec for v in r["inner"]] + state_inner + non_seq_inner
    )
    info = ScanInfo(
        n_seqs=len(inner_seqs),
        rec_taps=tuple(r["taps"] for r in ordered_rec),
        n_mit_sot=len(mit),
        n_nit_sot=len(nit_index),
        n_shared_outs=len(states),
        n_non_seqs=len(non_seq_inner),
        as_while=condition is not None,
        go_backwards=bool(go_backwards),
        truncate_gradient=int(truncate_gradient),
        name=name or "scan_fn",
    )
    op = Scan(inner_inputs, inner_outputs, info, mode=mode)
    outer_inputs = [steps, *outer_seqs, *(r["outer"] for r in ordered_rec), *states, *non_seq_outer]
    node_outputs = op(*outer_inputs, return_list=True)

    results: list[Any] = [None] * len(outputs)
    for j, r in enumerate(ordered_rec):
        lag = -min(r["taps"])
        results[r["index"]] = node_outputs[j][lag:]
    for k, index in enumerate(nit_index):
        results[index] = node_outputs[info.n_rec + k]
    new_updates = OrderedUpdates()
    for k, sv in enumerate(states):
        new_updates[sv] = node_outputs[info.n_rec + info.n_nit_sot + k]
    if return_list:
        return results, new_updates
    if len(results) == 1:
        return results[0], new_updates
    if not results:
        return None, new_updates
    return results, new_updates


def _stand_in(outer: Variable) -> Variable:
    """A fresh inner variable of ``outer``'s type and test value, named as Theano names the
    inner copy of a non-sequence or shared state (``W`` -> ``W_copy``)."""
    new = outer.type()
    new.name = None if outer.name is None else f"{outer.name}_copy"
    _copy_test_value(outer, new)
    return new


def _tap_name(init: Variable, tap: int) -> str | None:
    return f"{init.name}[t{tap}]" if init.name is not None else None


def _roots(v: Variable) -> list[Variable]:
    nodes = io_toposort([], [v])
    found = [i for n in nodes for i in n.inputs if i.owner is None]
    return found or [v]


def _seq_spec(s: Any, i: int) -> dict[str, Any]:
    if isinstance(s, dict):
        if "input" not in s:
            raise ValueError(f"scan: sequences[{i}] is a dict without an 'input' key")
        x, taps = s["input"], s.get("taps", [0])
    else:
        x, taps = s, [0]
    x = as_tensor_variable(x)
    if x.ndim < 1:
        raise ValueError(
            f"scan: sequences[{i}] ({x}) is a scalar; a sequence needs at least one dimension to "
            "iterate over."
        )
    taps = [0] if taps is None else _as_list(taps)
    if not taps or not all(isinstance(t, int | np.integer) for t in taps):
        raise ValueError(f"scan: the taps of sequences[{i}] must be integers, got {taps!r}")
    return {"input": x, "taps": [int(t) for t in taps]}


def _out_spec(o: Any, i: int) -> dict[str, Any]:
    if isinstance(o, dict):
        if o.get("initial") is None:
            if o.get("taps"):
                raise ValueError(
                    f"scan: outputs_info[{i}] has taps {o['taps']} but no 'initial' value"
                )
            return {"taps": None}
        taps = _as_list(o.get("taps", [-1]))
        init = o["initial"]
    elif o is None:
        return {"taps": None}
    else:
        init, taps = o, [-1]
    taps = [int(t) for t in taps]
    if not taps or any(t >= 0 for t in taps):
        raise ValueError(
            f"scan: the taps of outputs_info[{i}] must be negative (past values), got {taps}; "
            "returning outputs with positive taps is not supported."
        )
    return {"initial": as_tensor_variable(init), "taps": taps}
