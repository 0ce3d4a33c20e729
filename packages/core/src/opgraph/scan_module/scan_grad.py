"""Reverse and forward mode through a Scan: the gradient is another Scan.

Reverse mode (:func:`scan_lop`) runs the steps backwards. Each backward step receives, as
sequences read from the end, the forward step's inputs (sequence entries, past values), its
outputs (so the step's gradient uses the stored values instead of recomputing them) and the
gradients flowing into its outputs from outside the loop. It carries:

- for each recurrent output with lags ``L``, a window of ``L`` pending gradients: entry
  ``l`` is the gradient already accumulated for the value ``l`` steps before the current
  one, from the later steps that read it through their taps;
- for each non-sequence, the sum of its gradient over the steps so far.

After the last backward step the windows hold the gradients of the initial values; the
per-step gradients of the sequences come out as the backward loop's outputs. Second
derivatives work because the backward loop is a Scan like any other.

Forward mode (:func:`scan_rop`) is one Scan carrying each recurrent value and its tangent
side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.compile.sharedvalue import SharedVariable
from opgraph.graph.basic import Constant, Variable
from opgraph.graph.clone import clone_replace
from opgraph.graph.null_type import (
    DisconnectedType,
    NullType,
    disconnected_type,
    grad_undefined,
)
from opgraph.graph.traversal import ancestors
from opgraph.scalar import basic as ps
from opgraph.scan_module import scan_op
from opgraph.scan_module.scan_op import Scan
from opgraph.scan_module.scan_utils import ScanInfo
from opgraph.tensor.autodiff import Rop, grad
from opgraph.tensor.axes import shape_padleft
from opgraph.tensor.basic import patternbroadcast
from opgraph.tensor.dot import Dot, dot
from opgraph.tensor.elemwise import DimShuffle, Elemwise, Sum
from opgraph.tensor.joining import concatenate, stack
from opgraph.tensor.math import cast, eq, minimum, switch, zeros_like
from opgraph.tensor.math import sum as tsum
from opgraph.tensor.shape import reshape
from opgraph.tensor.structure import Alloc
from opgraph.tensor.subtensor import getitem, inc_subtensor, set_subtensor
from opgraph.tensor.subtensor_basic import IncSubtensor
from opgraph.tensor.type import TensorType

__all__ = ["scan_lop", "scan_rop"]

_FLOAT = ("float16", "float32", "float64", "complex64", "complex128")


def _is_float(v: Variable) -> bool:
    return isinstance(v.type, TensorType) and v.type.dtype in _FLOAT


def _connected(g: Any) -> bool:
    return g is not None and not isinstance(getattr(g, "type", None), DisconnectedType)


def _fresh(v: Variable, name: str | None = None) -> Variable:
    new = v.type()
    new.name = name or v.name
    return new


def _entry(v: Variable, name: str | None = None) -> Variable:
    """A fresh variable of one entry (first axis dropped) of ``v``'s type."""
    new = TensorType(v.type.dtype, v.type.broadcastable[1:])()
    new.name = name
    return new


def _steps(seq: Variable, start: Any, n: Any) -> Variable:
    """``seq[start : start + n]``: the entries of forward steps ``start`` to ``start + n``
    (the backward loop is a ``reverse`` loop: it reads them from the end itself)."""
    return getitem(seq, slice(start, start + n))


def scan_lop(
    op: Scan,
    inputs: Sequence[Variable],
    outputs: Sequence[Variable],
    output_grads: Sequence[Variable],
) -> list[Variable]:
    """The gradients of the outer inputs of a Scan node (its ``L_op``)."""
    info = op.info
    if any(info.buffer_size(k) for k in range(info.n_rec + info.n_nit_sot)):
        raise ValueError(
            f"{op}: cannot differentiate a loop that keeps only its last entries (a rewrite "
            "shortened its buffers); take the gradient before compiling."
        )
    S, R, K, M = info.n_seqs, info.n_rec, info.n_nit_sot, info.n_shared_outs
    lags = info.rec_lags
    seqs = list(inputs[1 : 1 + S])
    inits = list(inputs[1 + S : 1 + S + R])
    states = list(inputs[1 + S + R : 1 + S + R + M])
    non_seqs = list(inputs[1 + S + R + M :])
    bufs, nits = list(outputs[:R]), list(outputs[R : R + K])
    g_bufs = [g if _connected(g) else None for g in output_grads[:R]]
    g_nits = [g if _connected(g) else None for g in output_grads[R : R + K]]
    g_states = [g if _connected(g) else None for g in output_grads[R + K :]]
    # A state held by a shared variable (a counter, a random stream) has no gradient, as in
    # Theano; a float state the loop owns (the running sums of a gradient loop) does.
    st_diff = [_is_float(v) and not isinstance(v, SharedVariable) for v in states]

    result: list[Any] = [disconnected_type() for _ in inputs]
    pattern = op.connection_pattern(outputs[0].owner)
    wanted = [o for o, g in enumerate(output_grads) if _connected(g)]
    for k in range(M):  # values that went through a shared variable updated in the loop
        i = 1 + S + R + k
        if not st_diff[k] and any(pattern[i][o] for o in wanted):
            result[i] = grad_undefined(
                op, i, inputs[i], "Depends on a shared variable updated inside the loop."
            )
    diff_state_grads = [g for g, d in zip(g_states, st_diff) if d and g is not None]
    if not any(g is not None for g in g_bufs + g_nits) and not diff_state_grads:
        return result

    # The number of steps run forward, and how many the gradient goes back through.
    if R:
        n_fwd = bufs[0].shape[0] - lags[0]
    elif K:
        n_fwd = nits[0].shape[0]
    else:
        n_fwd = inputs[0]
    n_fwd = cast(n_fwd, "int64")
    if info.reverse:  # the sequences and nit_sot outputs in the order the steps used them
        seqs = [getitem(v, slice(None, n_fwd))[::-1] for v in seqs]
        nits = [v[::-1] for v in nits]
        g_nits = [None if g is None else g[::-1] for g in g_nits]
    trunc = info.truncate_gradient
    n_back = n_fwd if trunc == -1 else minimum(n_fwd, trunc)

    # A fresh copy of the step, differentiated with respect to its float inputs.
    ins, outs = op.clone_inner()
    s_in, tap_in, st_in, ns_in = info.split_inner_inputs(ins)
    r_out, nit_out = outs[:R], outs[R : R + K]
    st_out = outs[R + K : R + K + M]

    rec_float = [_is_float(bufs[j]) for j in range(R)]
    windows = [
        TensorType(bufs[j].type.dtype, (False, *bufs[j].type.broadcastable[1:]))(f"window_{j}")
        for j in range(R)
    ]
    bw_seq_inner: list[Variable] = []
    bw_seq_outer: list[Variable] = []

    def add_seq(outer: Variable, name: str | None) -> Variable:
        inner = _entry(outer, name)
        bw_seq_inner.append(inner)
        bw_seq_outer.append(outer)
        return inner

    # Values the backward step reads whole (not per step): a constant incoming gradient.
    extra_inner: list[Variable] = []
    extra_outer: list[Variable] = []

    def incoming(g: Variable, offset: Any) -> Variable:
        """The backward step's incoming gradient from ``g`` (per forward step, entries from
        ``offset``): a loop-invariant value when ``g`` fills every entry with one value (the
        gradient of a sum), else a sequence."""
        value = _filled_value(g)
        if value is not None:
            inner = value.type()
            extra_inner.append(inner)
            extra_outer.append(value)
            return inner
        return add_seq(_steps(g, offset, n_back), None)

    known: dict[Variable, Any] = {}

    def seed(var: Variable, g: Variable) -> None:
        if isinstance(var, Constant):
            return
        known[var] = known[var] + g if var in known else g

    for j in range(R):
        if not rec_float[j]:
            continue
        total = windows[j][0]
        if g_bufs[j] is not None:
            # The gradient of ``buf[lag:]`` (what scan() returns) is ``buf``'s zeros with the
            # user's gradient from entry ``lag`` on: read the user's gradient directly.
            tail = _past_lag(g_bufs[j], lags[j])
            if tail is not None:
                total = total + incoming(tail, n_fwd - n_back)
            else:
                total = total + incoming(g_bufs[j], lags[j] + n_fwd - n_back)
        seed(r_out[j], total)
    for k in range(K):
        if g_nits[k] is not None and _is_float(nits[k]):
            seed(nit_out[k], incoming(g_nits[k], n_fwd - n_back))
    # A differentiable state carries its pending gradient as a state of the backward loop.
    state_windows = {k: _fresh(states[k], f"d_state_{k}") for k in range(M) if st_diff[k]}
    for k, w in state_windows.items():
        seed(st_out[k], w)
    diff_st_in = [st_in[k] for k in state_windows]
    wrt = [v for v in s_in + [t for ts in tap_in for t in ts] + ns_in if _is_float(v)]
    wrt += diff_st_in
    grads = grad(
        None,
        wrt,
        known_grads=known,
        disconnected_inputs="ignore",
        return_disconnected="Disconnected",
        null_gradients="return",
    )
    for v, g in zip(wrt, grads):
        if isinstance(g.type, NullType):
            why = g.type.why_null
            return [
                NullType(f"the step of {op} has no gradient with respect to {v}: {why}")()
                if _is_float(x)
                else result[i]
                for i, x in enumerate(inputs)
            ]
    # A non-sequence the step does not use has no gradient from the loop (its gradient, if
    # any, comes through the outer graph); other unreached inputs get zeros.
    g_of = {
        v: (zeros_like(v) if isinstance(g.type, DisconnectedType) else g)
        for v, g in zip(wrt, grads)
        if not (isinstance(g.type, DisconnectedType) and v in ns_in)
    }

    # New windows: shift by one step, add what this step's taps contribute.
    new_windows: list[Variable] = []
    for j, taps in enumerate(info.rec_taps):
        if not rec_float[j]:
            continue
        w = windows[j]
        rows = []
        for lag_index in range(lags[j]):
            parts = [g_of[v] for tap, v in zip(taps, tap_in[j]) if -tap - 1 == lag_index]
            row = parts[0] if parts else zeros_like(w[0])
            for p in parts[1:]:
                row = row + p
            rows.append(row)
        contribution = stack(rows) if len(rows) > 1 else shape_padleft(rows[0])
        shifted = concatenate([w[1:], zeros_like(w[:1])]) if lags[j] > 1 else None
        new_windows.append(contribution if shifted is None else shifted + contribution)
    # A non-sequence's gradient is a sum over the steps. The terms that are products of
    # per-step values (dot(h.T, g) for a weight, sum(g) for a bias) are summed after the
    # loop as one product over all steps; the loop then only emits the per-step factors.
    # The other terms are added into a running sum inside the loop.
    emitted: list[Variable] = []
    after_loop: dict[Variable, list[tuple[list[int], Any]]] = {}
    acc_of = []
    acc_terms = []
    for p in [p for p in ns_in if p in g_of]:
        rest = []
        for term in _terms(g_of[p]):
            plan = _summed_after_loop(term)
            if plan is None:
                rest.append(term)
                continue
            factors, build = plan
            positions = []
            for f in factors:  # one output per distinct factor (g_t feeds W, U and b)
                if f not in emitted:
                    emitted.append(f)
                positions.append(emitted.index(f))
            after_loop.setdefault(p, []).append((positions, build))
        if rest:
            acc_of.append(p)
            acc_terms.append(_sum(rest))
    accumulators = [_fresh(p, f"acc_{p.name}" if p.name else None) for p in acc_of]
    new_acc = [a + t for a, t in zip(accumulators, acc_terms)]
    new_state_windows = [g_of[v] for v in diff_st_in]
    seq_grads = [g_of[v] for v in s_in if v in g_of]
    # Windows keep their history (a second derivative reads them back); the running sums
    # and the states' pending gradients are states of the backward loop: O(1) memory, and
    # the sums are updated in place.
    bw_outputs = new_windows + seq_grads + emitted + new_state_windows + new_acc

    # The step's values come from the forward loop: sequences, past values and outputs
    # (only those the gradient reads).
    needed = set(ancestors(bw_outputs))
    replace: dict[Variable, Variable] = {}
    start = n_fwd - n_back
    for i in range(S):
        if s_in[i] in needed:
            replace[s_in[i]] = add_seq(_steps(seqs[i], start, n_back), s_in[i].name)
    for j, taps in enumerate(info.rec_taps):
        for tap, v in zip(taps, tap_in[j]):
            if v in needed:
                replace[v] = add_seq(_steps(bufs[j], lags[j] + tap + start, n_back), v.name)
    for j in range(R):
        if r_out[j].owner is not None and r_out[j] in needed and r_out[j] not in replace:
            replace[r_out[j]] = add_seq(_steps(bufs[j], lags[j] + start, n_back), None)
    for k in range(K):
        if nit_out[k].owner is not None and nit_out[k] in needed and nit_out[k] not in replace:
            replace[nit_out[k]] = add_seq(_steps(nits[k], start, n_back), None)
    # A factor that is a forward value the backward loop reads as a sequence is taken from
    # that sequence after the loop (no copy per step).
    n_before = len(new_windows) + len(seq_grads)
    direct: dict[int, Variable] = {}
    for i, v in enumerate(emitted):
        if v in replace:
            direct[i] = bw_seq_outer[bw_seq_inner.index(replace[v])]
    kept_emitted = [i for i in range(len(emitted)) if i not in direct]
    bw_outputs = (
        bw_outputs[:n_before]
        + [emitted[i] for i in kept_emitted]
        + bw_outputs[n_before + len(emitted) :]
    )
    if replace:
        bw_outputs = clone_replace(bw_outputs, replace=replace, strict=False)
    needs = set(ancestors(bw_outputs))
    for v in st_in:
        if v in needs:
            raise ValueError(
                f"the gradient through {op} needs a value computed from {v.name or v} (a "
                "shared variable updated inside the loop, e.g. a random stream's state), "
                "which the loop does not keep from step to step.\nHINT: return that value "
                "(e.g. the random draw) as an extra output of the step function, so that the "
                "gradient reads it back instead of drawing it again."
            )
    bw_windows = [w for j, w in enumerate(windows) if rec_float[j]]
    bw_state_windows = list(state_windows.values())
    bw_info = ScanInfo(
        n_seqs=len(bw_seq_inner),
        rec_taps=((-1,),) * len(bw_windows),
        n_mit_sot=0,
        n_nit_sot=len(seq_grads) + len(kept_emitted),
        n_shared_outs=len(bw_state_windows) + len(accumulators),
        n_non_seqs=len(ns_in) + len(extra_inner),
        reverse=True,
        name=f"grad_of_{info.name}",
    )
    bw_inputs = (
        bw_seq_inner + bw_windows + bw_state_windows + accumulators + list(ns_in) + extra_inner
    )
    bw_op = Scan(bw_inputs, bw_outputs, bw_info, mode=op.mode)
    window_inits = []
    for j in range(R):
        if rec_float[j]:
            zero_entry = zeros_like(getitem(inits[j], slice(None, lags[j])))
            window_inits.append(shape_padleft(zero_entry))
    state_inits = [
        g_states[k] if g_states[k] is not None else zeros_like(states[k]) for k in state_windows
    ]
    acc_inits = [zeros_like(non_seqs[ns_in.index(p)]) for p in acc_of]
    bw = bw_op(
        n_back,
        *bw_seq_outer,
        *window_inits,
        *state_inits,
        *acc_inits,
        *non_seqs,
        *extra_outer,
        return_list=True,
    )

    n_w, n_s, n_st = len(bw_windows), len(seq_grads), len(bw_state_windows)
    n_e = len(kept_emitted)
    finals_w = bw[:n_w]
    seq_out = bw[n_w : n_w + n_s]
    emitted_out = [direct.get(i) for i in range(len(emitted))]
    for i, out in zip(kept_emitted, bw[n_w + n_s : n_w + n_s + n_e]):
        emitted_out[i] = out
    finals_st = bw[n_w + n_s + n_e : n_w + n_s + n_e + n_st]
    finals_a = bw[n_w + n_s + n_e + n_st :]
    for (k, _), final in zip(state_windows.items(), finals_st):
        if trunc != -1:
            final = switch(eq(n_back, n_fwd), final, zeros_like(final))
        result[1 + S + R + k] = final
    # Initial values: what the outputs' first entries received, plus the last window.
    w_index = 0
    for j in range(R):
        i = 1 + S + j
        if not rec_float[j]:
            continue
        last = finals_w[w_index][-1][::-1]
        w_index += 1
        if trunc != -1:
            last = switch(eq(n_back, n_fwd), last, zeros_like(last))
        if g_bufs[j] is not None and _past_lag(g_bufs[j], lags[j]) is None:
            last = last + getitem(g_bufs[j], slice(None, lags[j]))
        result[i] = inc_subtensor(getitem(zeros_like(inits[j]), slice(None, lags[j])), last)
    # Sequences: the backward loop's per-step outputs, in forward order.
    g_index = 0
    for i in range(S):
        if s_in[i] not in g_of:
            continue
        g_steps = seq_out[g_index]
        g_index += 1
        target = getitem(zeros_like(seqs[i]), slice(n_fwd - n_back, n_fwd))
        g_seq = set_subtensor(target, g_steps)
        if info.reverse:  # back to the outer sequence's order
            outer = inputs[1 + i]
            g_seq = set_subtensor(getitem(zeros_like(outer), slice(None, n_fwd)), g_seq[::-1])
        result[1 + i] = g_seq
    for k, p in enumerate(ns_in):
        parts = []
        if p in acc_of:
            parts.append(finals_a[acc_of.index(p)])
        for positions, build in after_loop.get(p, []):
            parts.append(build([emitted_out[i] for i in positions]))
        if parts:
            total = _sum(parts)
            result[1 + S + R + M + k] = _like_input(total, non_seqs[k])
    for j in range(R):  # an int recurrent output, or one whose gradient is zero
        if not rec_float[j]:
            result[1 + S + j] = disconnected_type()
    return _match_connection(op, outputs[0].owner, result, wanted)


def _constant_value(v: Variable) -> Any:
    """The value of ``v`` if it is a constant (through DimShuffles), else None."""
    while v.owner is not None and isinstance(v.owner.op, DimShuffle):
        v = v.owner.inputs[0]
    if isinstance(v, Constant):
        return np.asarray(v.data)
    return None


def _is_zeros(v: Variable) -> bool:
    """Whether ``v`` is ``zeros_like(x)`` (``second(x, 0)``) or an Alloc of 0."""
    node = v.owner
    if node is None:
        return False
    if isinstance(node.op, Elemwise) and isinstance(node.op.scalar_op, ps.Second):
        value = _constant_value(node.inputs[1])
    elif isinstance(node.op, Alloc):
        value = _constant_value(node.inputs[0])
    else:
        return False
    return value is not None and value.size == 1 and value.reshape(-1)[0] == 0


def _past_lag(g: Variable, lag: int) -> Variable | None:
    """``y`` if ``g`` is ``inc_subtensor(zeros[lag:], y)`` (the gradient of ``buf[lag:]``)."""
    node = g.owner
    if node is None or not isinstance(node.op, IncSubtensor) or len(node.inputs) != 3:
        return None
    (index,) = node.op.idx_list if len(node.op.idx_list) == 1 else (None,)
    if not isinstance(index, slice) or index.stop is not None or index.step is not None:
        return None
    start = _constant_value(node.inputs[2])
    if start is None or start.size != 1 or int(start) != lag or not _is_zeros(node.inputs[0]):
        return None
    return node.inputs[1]


def _filled_value(g: Variable) -> Variable | None:
    """The entry ``v`` (0-d or all-broadcastable, one dimension less than ``g``) if ``g`` is
    ``second(x, v)``: every entry of ``g`` is ``v``, as in the gradient of a sum."""
    node = g.owner
    if node is None or not isinstance(node.op, Elemwise):
        return None
    if not isinstance(node.op.scalar_op, ps.Second):
        return None
    value = node.inputs[1]
    if value.type.ndim != g.type.ndim or not all(value.type.broadcastable):
        return None
    return value.dimshuffle(list(range(1, value.type.ndim)))


def _sum(terms: list[Variable]) -> Variable:
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return total


def _like_input(g: Variable, x: Variable) -> Variable:
    """``g`` with the dtype and broadcastable pattern of the input ``x`` it is the gradient of."""
    if g.type.dtype != x.type.dtype:
        g = cast(g, x.type.dtype)
    if g.type.broadcastable != x.type.broadcastable:
        g = patternbroadcast(g, x.type.broadcastable)
    return g


def _terms(g: Variable) -> list[Variable]:
    """The terms of a sum ``a + b + ...`` (of one type; no broadcasting), else ``[g]``."""
    node = g.owner
    if (
        node is not None
        and isinstance(node.op, Elemwise)
        and isinstance(node.op.scalar_op, ps.Add)
        and all(i.type == g.type for i in node.inputs)
    ):
        return [t for i in node.inputs for t in _terms(i)]
    return [g]


def _shuffled(v: Variable, order: tuple[Any, ...]) -> Variable | None:
    """``a`` if ``v`` is ``a.dimshuffle(*order)``, else None."""
    node = v.owner
    if node is None or not isinstance(node.op, DimShuffle):
        return None
    return node.inputs[0] if tuple(node.op.new_order) == order else None


def _flat_rows(v: Variable) -> Variable:
    """``(steps, b, k)`` per-step matrices stacked as one ``(steps * b, k)`` matrix."""
    return reshape(v, [-1, v.shape[2]], ndim=2)


def _summed_after_loop(term: Variable) -> tuple[list[Variable], Any] | None:
    """``(factors, build)`` when the sum over the steps of ``term`` is a product of its
    per-step ``factors`` stacked over the steps: ``build(stacked)`` computes that sum.
    None when ``term`` has no such form."""
    node = term.owner
    if node is None:
        return None
    if isinstance(node.op, DimShuffle):  # linear: sum the input, shuffle the sum
        inner = _summed_after_loop(node.inputs[0])
        if inner is None:
            return None
        factors, build = inner
        op = node.op
        return factors, lambda outs: op(build(outs))
    if isinstance(node.op, Dot) and term.type.ndim == 2:
        a, b = node.inputs
        x = _shuffled(a, (1, 0))
        if x is not None and b.type.ndim == 2:  # sum_t x_t.T @ b_t
            return [x, b], lambda outs: dot(_flat_rows(outs[0]).T, _flat_rows(outs[1]))
        col, row = _shuffled(a, (0, "x")), _shuffled(b, ("x", 0))
        if col is not None and row is not None:  # sum_t outer(c_t, r_t)
            return [col, row], lambda outs: dot(outs[0].T, outs[1])
        y = _shuffled(b, (1, 0))
        if y is not None and a.type.ndim == 2:  # sum_t a_t @ y_t.T
            return [a, y], lambda outs: dot(
                _flat_rows(outs[0].dimshuffle(0, 2, 1)).T, _flat_rows(outs[1].dimshuffle(0, 2, 1))
            )
        return None
    if isinstance(node.op, Sum) and node.op.axis is not None and term.type.ndim <= 1:
        g = node.inputs[0]
        axes = [0, *(a + 1 for a in node.op.axis)]
        return [g], lambda outs: tsum(outs[0], axis=axes)
    return None


def _match_connection(op: Scan, node: Any, result: list[Any], wanted: list[int]) -> list[Any]:
    """Inputs the connection pattern says are unreachable get a disconnected gradient."""
    pattern = op.connection_pattern(node)
    for i, row in enumerate(pattern):
        if not any(row[o] for o in wanted):
            result[i] = disconnected_type()
    return result


def scan_rop(
    op: Scan, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]
) -> list[Variable | None]:
    """Forward mode: the tangent of each output of a Scan node (its ``R_op``)."""
    info = op.info
    S, R, K, M = info.n_seqs, info.n_rec, info.n_nit_sot, info.n_shared_outs
    ins, outs = op.clone_inner()
    s_in, tap_in, st_in, ns_in = info.split_inner_inputs(ins)
    tangents = {v: _fresh(v, f"d_{v.name}" if v.name else None) for v in ins if _is_float(v)}
    diff_outs = [o for o in outs[: R + K]]
    wrt = list(tangents)
    points = [tangents[v] for v in wrt]
    d_outs = []
    for o in diff_outs:
        if not _is_float(o):
            d_outs.append(zeros_like(o))
            continue
        d = Rop(o, wrt, points) if wrt else zeros_like(o)
        d_outs.append(d if d is not None else zeros_like(o))

    def tangent_of(v: Variable) -> Variable:
        return tangents[v] if v in tangents else _fresh(v)

    n_mit = info.n_mit_sot
    rec_order = list(range(n_mit)) + [R + j for j in range(n_mit)]
    rec_order += list(range(n_mit, R)) + [R + j for j in range(n_mit, R)]
    rec_inner: list[Variable] = []
    rec_taps: list[tuple[int, ...]] = []
    rec_outs: list[Variable] = []
    for k in rec_order:
        j = k % R if k >= R else k
        is_tangent = k >= R
        rec_taps.append(info.rec_taps[j])
        rec_inner.extend(tangent_of(v) for v in tap_in[j]) if is_tangent else rec_inner.extend(
            tap_in[j]
        )
        rec_outs.append(d_outs[j] if is_tangent else outs[j])
    new_inputs = (
        list(s_in)
        + [tangent_of(v) for v in s_in]
        + rec_inner
        + list(st_in)
        + list(ns_in)
        + [tangent_of(v) for v in ns_in]
    )
    new_outputs = rec_outs + list(outs[R : R + K]) + d_outs[R : R + K] + list(outs[R + K :])
    new_info = ScanInfo(
        n_seqs=2 * S,
        rec_taps=tuple(rec_taps),
        n_mit_sot=2 * n_mit,
        n_nit_sot=2 * K,
        n_shared_outs=M,
        n_non_seqs=2 * len(ns_in),
        as_while=info.as_while,
        reverse=info.reverse,
        name=f"rop_of_{info.name}",
    )
    new_op = Scan(new_inputs, new_outputs, new_info, mode=op.mode)

    def point(i: int) -> Variable:
        e = eval_points[i]
        x = inputs[i]
        return zeros_like(x) if e is None else e

    seqs = list(inputs[1 : 1 + S])
    inits = list(inputs[1 + S : 1 + S + R])
    states = list(inputs[1 + S + R : 1 + S + R + M])
    non_seqs = list(inputs[1 + S + R + M :])
    outer_inits = []
    for k in rec_order:
        j = k % R if k >= R else k
        outer_inits.append(point(1 + S + j) if k >= R else inits[j])
    outer = [
        inputs[0],
        *seqs,
        *(point(1 + i) for i in range(S)),
        *outer_inits,
        *states,
        *non_seqs,
        *(point(1 + S + R + M + k) for k in range(len(non_seqs))),
    ]
    res = new_op(*outer, return_list=True)
    out: list[Variable | None] = [None] * len(op.inner_outputs[: R + K + M])
    for pos_k, k in enumerate(rec_order):
        if k >= R:
            out[k - R] = res[pos_k]
    for k in range(K):
        out[R + k] = res[2 * R + K + k]
    return out[: R + K + M]


scan_op.CALCULUS.update(lop=scan_lop, rop=scan_rop)
