"""The scan rewrites (Theano 1.0's ``scan_module.scan_opt``): loops made cheaper before they run.

========================================  ========  =========================================
rewrite                                   position  what it does
========================================  ========  =========================================
``scan_eqopt1`` (a sequence):             0.05      before ``shape`` and the stages, so that
                                                    the outer graph sees the pushed-out nodes
 - ``scan_remove_constants_and_unused_``  1         :func:`remove_constants_and_unused_inputs_scan`
   ``inputs0``
 - ``scan_pushout_nonseqs_ops``           2         :func:`push_out_non_seq_scan`
 - ``scan_pushout_seqs_ops``              3         :func:`push_out_seq_scan`
``scan_eqopt2`` (to a fixed point):       1.6       after stabilize, before blas/specialize
 - ``scan_remove_constants_and_unused_``            the same rewrite again (after merging)
   ``inputs1``
 - ``scan_merge``                                   :class:`ScanMerge`
``scan_save_mem``                         1.61      :func:`scan_save_mem`
========================================  ========  =========================================

Every entry is tagged ``fast_run`` and ``scan`` (``optimizer_excluding=scan`` turns them all
off), plus its own name; none runs under FAST_COMPILE. A rewrite rebuilds the Scan node with
a new inner graph and layout (:class:`_Loop` takes a node apart into the groups of its
:class:`~opgraph.scan_module.scan_utils.ScanInfo` and builds the new node) and replaces the
old node's outputs by the new ones (``scan_save_mem`` replaces the readers of the outputs it
shortens, whose values do not change, so DEBUG_MODE can check it); the inner graph itself is
rewritten when the inner function compiles, in the mode of the outer function. No in-place
rewrite is needed: the loop allocates its own output buffers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.clone import clone_replace
from opgraph.graph.traversal import ancestors, io_toposort
from opgraph.rewriting import GraphRewriter, in2out, node_rewriter
from opgraph.rewriting.db import EquilibriumDB, SequenceDB
from opgraph.scan_module.scan_op import Scan
from opgraph.tensor.dot import Dot
from opgraph.tensor.elemwise import DimShuffle, Elemwise
from opgraph.tensor.subtensor_basic import Subtensor
from opgraph.tensor.type import TensorType
from opgraph_optimizers.registry import rewrites

__all__ = [
    "ScanMerge",
    "push_out_non_seq_scan",
    "push_out_seq_scan",
    "remove_constants_and_unused_inputs_scan",
    "scan_eqopt1",
    "scan_eqopt2",
    "scan_save_mem",
]


# ---------------------------------------------------------------------------- a loop, editable


@dataclasses.dataclass
class _Rec:
    """A recurrent output: its initial values (outer), one inner input per tap, its inner
    output, its kept entries (0: all) and its index among the old node's outputs."""

    outer: Variable
    inner: list[Variable]
    taps: list[int]
    out: Variable
    mit: bool
    size: int
    old: int | None


@dataclasses.dataclass
class _Nit:
    """A nit_sot output (one entry per step, not fed back)."""

    out: Variable
    size: int
    old: int | None


@dataclasses.dataclass
class _Shared:
    """A shared state: its outer value, inner input and new value."""

    outer: Variable
    inner: Variable
    out: Variable
    old: int | None


class _Loop:
    """A Scan node taken apart into the groups of its layout, so that a rewrite can edit the
    lists (drop, add, merge entries; replace inner variables) and :meth:`build` a new node.

    The inner variables are the Op's own (never modified: edits go through
    :func:`clone_replace`, and the new Op copies its graph).
    """

    def __init__(self, node: Apply) -> None:
        op: Scan = node.op
        info = op.info
        ins, outs = list(op.inner_inputs), list(op.inner_outputs)
        S, R, K, M = info.n_seqs, info.n_rec, info.n_nit_sot, info.n_shared_outs
        self.node = node
        self.info = info
        self.mode = op.mode
        self.n_steps: Variable = node.inputs[0]
        self.seqs: list[list[Variable]] = [[node.inputs[1 + i], ins[i]] for i in range(S)]
        self.recs: list[_Rec] = []
        pos = S
        for j, taps in enumerate(info.rec_taps):
            self.recs.append(
                _Rec(
                    outer=node.inputs[1 + S + j],
                    inner=ins[pos : pos + len(taps)],
                    taps=list(taps),
                    out=outs[j],
                    mit=j < info.n_mit_sot,
                    size=info.buffer_size(j),
                    old=j,
                )
            )
            pos += len(taps)
        self.nits = [_Nit(outs[R + k], info.buffer_size(R + k), R + k) for k in range(K)]
        self.shared = [
            _Shared(node.inputs[1 + S + R + k], ins[pos + k], outs[R + K + k], R + K + k)
            for k in range(M)
        ]
        pos += M
        self.non_seqs: list[list[Variable]] = [
            [node.inputs[1 + S + R + M + k], ins[pos + k]] for k in range(info.n_non_seqs)
        ]
        self.cond: Variable | None = outs[-1] if info.as_while else None

    # ------------------------------------------------------------------ views

    def inner_outputs(self) -> list[Variable]:
        """Every inner output (recurrent, nit_sot, shared, condition)."""
        outs = [r.out for r in self.recs] + [n.out for n in self.nits]
        outs += [s.out for s in self.shared]
        return outs + ([self.cond] if self.cond is not None else [])

    def replace_inner(self, replace: dict[Variable, Variable]) -> None:
        """Replace inner variables in every inner output (a copy of the graph is made)."""
        if not replace:
            return
        new = clone_replace(self.inner_outputs(), replace=replace, strict=True)
        it = iter(new)
        for r in self.recs:
            r.out = next(it)
        for n in self.nits:
            n.out = next(it)
        for s in self.shared:
            s.out = next(it)
        if self.cond is not None:
            self.cond = next(it)

    def prune_inputs(self) -> bool:
        """Drop sequences and non-sequences the inner graph no longer reads, and unused taps
        of mit_sot outputs (the oldest tap stays: it sets the buffer's lag). True if any."""
        used = set(ancestors(self.inner_outputs()))
        n_before = len(self.seqs) + len(self.non_seqs)
        self.seqs = [p for p in self.seqs if p[1] in used]
        self.non_seqs = [p for p in self.non_seqs if p[1] in used]
        changed = len(self.seqs) + len(self.non_seqs) != n_before
        for r in self.recs:
            if len(r.taps) < 2:
                continue
            oldest = min(r.taps)
            keep = [k for k, (t, v) in enumerate(zip(r.taps, r.inner)) if v in used or t == oldest]
            if len(keep) != len(r.taps):
                r.taps = [r.taps[k] for k in keep]
                r.inner = [r.inner[k] for k in keep]
                changed = True
        return changed

    # ------------------------------------------------------------------ rebuilding

    def build(self) -> dict[int, Variable]:
        """Make the new Scan node; return ``{old output index: new output}``."""
        recs = [r for r in self.recs if r.mit] + [r for r in self.recs if not r.mit]
        sizes = [r.size for r in recs] + [n.size for n in self.nits]
        info = dataclasses.replace(
            self.info,
            n_seqs=len(self.seqs),
            rec_taps=tuple(tuple(r.taps) for r in recs),
            n_mit_sot=sum(r.mit for r in recs),
            n_nit_sot=len(self.nits),
            n_shared_outs=len(self.shared),
            n_non_seqs=len(self.non_seqs),
            buffer_sizes=tuple(sizes) if any(sizes) else (),
        )
        inner_in = [p[1] for p in self.seqs] + [v for r in recs for v in r.inner]
        inner_in += [s.inner for s in self.shared] + [p[1] for p in self.non_seqs]
        inner_out = [r.out for r in recs] + [n.out for n in self.nits]
        inner_out += [s.out for s in self.shared]
        if self.cond is not None:
            inner_out.append(self.cond)
        op = Scan(inner_in, inner_out, info, mode=self.mode)
        outer = [self.n_steps, *(p[0] for p in self.seqs), *(r.outer for r in recs)]
        outer += [s.outer for s in self.shared] + [p[0] for p in self.non_seqs]
        new = op(*outer, return_list=True)
        olds = [r.old for r in recs] + [n.old for n in self.nits] + [s.old for s in self.shared]
        return {old: v for old, v in zip(olds, new) if old is not None}

    def replacements(self) -> dict[Variable, Variable]:
        """``{old node output: new output}`` for the outputs the new node keeps."""
        outputs = self.node.outputs
        return {outputs[i]: v for i, v in self.build().items()}


def _has_clients(fgraph: Any, var: Variable) -> bool:
    return bool(fgraph.clients[var]) if var in fgraph.clients else False


def _fresh(v: Variable) -> Variable:
    new = v.type()
    new.name = v.name
    return new


# ---------------------------------------------------------------------------- unused and constant


@node_rewriter([Scan])
def remove_constants_and_unused_inputs_scan(fgraph: Any, node: Apply) -> Any:
    """Theano's ``remove_constants_and_unused_inputs_scan`` (and the removal of unused
    outputs): constant non-sequences are folded into the inner graph; a sequence or
    non-sequence given twice (the same outer variable) is read once; inner inputs the inner
    graph does not read are dropped, with unused taps of mit_sot outputs; outputs with no
    client are dropped unless another kept output (or the ``until`` condition) reads their
    past values. Shared states always stay (their last value is an update)."""
    if not isinstance(node.op, Scan):
        return None
    loop = _Loop(node)
    changed = False
    replace: dict[Variable, Variable] = {}
    for group in (loop.seqs, loop.non_seqs):
        first: dict[Variable, Variable] = {}
        kept = []
        for outer, inner in group:
            if group is loop.non_seqs and isinstance(outer, Constant) and outer.type == inner.type:
                replace[inner] = outer
                continue
            twin = first.get(outer)
            if twin is not None and twin.type == inner.type:
                replace[inner] = twin
                continue
            first.setdefault(outer, inner)
            kept.append([outer, inner])
        if len(kept) != len(group):
            group[:] = kept
            changed = True
    loop.replace_inner(replace)
    # Outputs: keep those read outside, and (closing over the recurrences) those whose past
    # values a kept output reads.
    needed_recs = {id(r) for r in loop.recs if _has_clients(fgraph, node.outputs[r.old])}
    roots = [r.out for r in loop.recs if id(r) in needed_recs]
    roots += [s.out for s in loop.shared] + ([loop.cond] if loop.cond is not None else [])
    nits = [n for n in loop.nits if _has_clients(fgraph, node.outputs[n.old])]
    roots += [n.out for n in nits]
    tap_owner = {v: r for r in loop.recs for v in r.inner}
    while True:
        more = [
            r
            for v in ancestors(roots)
            if (r := tap_owner.get(v)) is not None and id(r) not in needed_recs
        ]
        if not more:
            break
        for r in more:
            if id(r) not in needed_recs:
                needed_recs.add(id(r))
                roots.append(r.out)
    if len(needed_recs) != len(loop.recs) or len(nits) != len(loop.nits):
        if not needed_recs and not nits and not loop.shared:
            return None  # nothing of the loop is used: the graph drops the node itself
        loop.recs = [r for r in loop.recs if id(r) in needed_recs]
        loop.nits = nits
        changed = True
    changed = loop.prune_inputs() or changed
    if not changed:
        return None
    return loop.replacements()


# ---------------------------------------------------------------------------- pushing out


def _pushable(node: Apply) -> bool:
    """A node that may run outside the loop: no in-place work, tensor-like outputs."""
    op = node.op
    return not getattr(op, "destroy_map", None) and bool(node.outputs)


def _outer_node(node: Apply, inputs: Sequence[Variable]) -> list[Variable] | None:
    """``node``'s Op applied to outer ``inputs``; None when the outputs' types differ."""
    try:
        new = node.op.make_node(*inputs)
    except (TypeError, ValueError):
        return None
    for old, out in zip(node.outputs, new.outputs, strict=True):
        if old.type != out.type:
            return None
    return list(new.outputs)


@node_rewriter([Scan])
def push_out_non_seq_scan(fgraph: Any, node: Apply) -> Any:
    """Theano's ``PushOutNonSeqScan``: inner nodes whose inputs are all non-sequences,
    constants or such nodes' outputs (``W.T`` in a gradient's backward loop) are computed
    once, outside the loop; their results become new non-sequences."""
    if not isinstance(node.op, Scan):
        return None
    loop = _Loop(node)
    outer_of: dict[Variable, Variable] = {inner: outer for outer, inner in loop.non_seqs}
    inner_outs = loop.inner_outputs()
    inner_ins = list(node.op.inner_inputs)
    pushed: set[Variable] = set()
    needs: list[Variable] = []  # pushed values read by the loop
    seen: set[Variable] = set()

    def need(v: Variable) -> None:
        if v in pushed and v not in seen:
            seen.add(v)
            needs.append(v)

    for n in io_toposort(inner_ins, inner_outs):
        movable = (
            _pushable(n)
            and any(i in outer_of for i in n.inputs)
            and all(i in outer_of or isinstance(i, Constant) for i in n.inputs)
        )
        outs = _outer_node(n, [outer_of.get(i, i) for i in n.inputs]) if movable else None
        if outs is None:
            for i in n.inputs:
                need(i)
            continue
        for old, new in zip(n.outputs, outs):
            outer_of[old] = new
            pushed.add(old)
    for v in inner_outs:
        need(v)
    return _read_from_outside(loop, needs, outer_of, loop.non_seqs)


def _read_from_outside(
    loop: _Loop, needs: list[Variable], outer_of: dict[Variable, Variable], into: list[Any]
) -> Any:
    """Replace each inner value of ``needs`` by a new inner input fed from ``outer_of[v]``
    (appended to ``into``: the loop's non-sequences or sequences); the node's replacements,
    or None when there is nothing to move."""
    if not needs:
        return None
    replace = {}
    for v in needs:
        inner = _fresh(v)
        replace[v] = inner
        into.append([outer_of[v], inner])
    loop.replace_inner(replace)
    loop.prune_inputs()
    return loop.replacements()


def _seq_outer_dimshuffle(op: DimShuffle, outer: Variable) -> Variable:
    """The DimShuffle of a whole sequence matching ``op`` on one of its entries."""
    order = [0] + ["x" if o == "x" else int(o) + 1 for o in op.new_order]
    return DimShuffle(outer.type.broadcastable, order)(outer)


@node_rewriter([Scan])
def push_out_seq_scan(fgraph: Any, node: Apply) -> Any:
    """Theano's ``PushOutSeqScan``: an inner computation on one sequence's entry and on
    non-sequences or constants (an Elemwise, a DimShuffle, a ``dot`` of a vector entry with a
    non-sequence matrix) becomes one outer computation on the whole sequence, read by the
    loop as a new sequence. Only nodes reading a single outer sequence move (two sequences
    may differ in length beyond the steps run), and only when the result's entry type is the
    inner type. A ``dot`` of a matrix entry (a batch of rows) with a non-sequence matrix
    moves too, as one product of the sequence's rows of all steps.

    Unlike Theano, a value becomes a new sequence only when a ``dot`` is among what it
    computes (one matrix product over all the steps instead of a product per step): an
    elementwise chain alone stays in the loop, where the inner graph's fusion merges it with
    the rest of the step, and an extra sequence would only add per-step work."""
    if not isinstance(node.op, Scan):
        return None
    loop = _Loop(node)
    outer_ns = {inner: outer for outer, inner in loop.non_seqs}
    whole: dict[Variable, Variable] = {}  # inner value -> the outer sequence of its values
    root: dict[Variable, Variable] = {}  # inner value -> the outer sequence it comes from
    for outer, inner in loop.seqs:
        whole[inner] = outer
        root[inner] = outer
    inner_outs = loop.inner_outputs()
    pushed: set[Variable] = set()
    with_dot: set[Variable] = set()
    read: list[Variable] = list(inner_outs)  # values the loop reads (maybe pushed ones)
    for n in io_toposort(list(node.op.inner_inputs), inner_outs):
        if _pushable(n) and all(i in outer_ns or isinstance(i, Constant) for i in n.inputs):
            # Loop-invariant (a broadcast constant): usable by the outer computations.
            invariant = _outer_node(n, [outer_ns.get(i, i) for i in n.inputs])
            if invariant is not None:
                outer_ns.update(zip(n.outputs, invariant))
                continue
        out = _push_seq_node(n, whole, root, outer_ns)
        if out is None:
            read.extend(n.inputs)
            continue
        v = n.outputs[0]
        whole[v] = out
        root[v] = next(root[i] for i in n.inputs if i in root)
        pushed.add(v)
        if isinstance(n.op, Dot) or any(i in with_dot for i in n.inputs):
            with_dot.add(v)
    # Walk back from what the loop reads: a pushed value with a dot becomes a sequence; one
    # without stays computed in the loop, from its own inputs.
    needs: list[Variable] = []
    seen: set[Variable] = set()
    while read:
        v = read.pop()
        if v in seen or v not in pushed:
            continue
        seen.add(v)
        if v in with_dot:
            needs.append(v)
        else:
            read.extend(v.owner.inputs)
    return _read_from_outside(loop, needs, whole, loop.seqs)


def _batched_rows_dot(op: Dot, seq: Variable, matrix: Variable) -> Variable:
    """``dot(x_t, W)`` for every entry ``x_t`` (a matrix: a batch of rows) of ``seq``, as
    one product: ``seq`` seen as (steps * rows, n) times ``W``, seen again per step."""
    steps, rows, width = seq.shape[0], seq.shape[1], seq.shape[2]
    flat = op(seq.reshape((steps * rows, width), ndim=2), matrix)
    return flat.reshape((steps, rows, matrix.shape[1]), ndim=3)


def _push_seq_node(
    n: Apply,
    whole: dict[Variable, Variable],
    root: dict[Variable, Variable],
    outer_ns: dict[Variable, Variable],
) -> Variable | None:
    """The outer whole-sequence value of inner node ``n``'s output, or None if it stays."""
    if len(n.outputs) != 1 or not _pushable(n):
        return None
    seq_ins = [i for i in n.inputs if i in whole]
    if not seq_ins or len({root[i] for i in seq_ins}) != 1:
        return None
    if not all(i in whole or i in outer_ns or isinstance(i, Constant) for i in n.inputs):
        return None
    op = n.op
    out: Variable | None = None
    try:
        if isinstance(op, Elemwise):
            ndim = n.outputs[0].type.ndim
            if any(i.type.ndim != ndim for i in n.inputs):
                return None
            out = op(*[whole[i] if i in whole else outer_ns.get(i, i) for i in n.inputs])
        elif isinstance(op, DimShuffle):
            out = _seq_outer_dimshuffle(op, whole[n.inputs[0]])
        elif isinstance(op, Dot):
            x, y = n.inputs
            if x in whole and y in outer_ns and x.type.ndim == 1 and y.type.ndim == 2:
                out = op(whole[x], outer_ns[y])
            elif y in whole and x in outer_ns and y.type.ndim == 1 and x.type.ndim == 2:
                out = op(whole[y], outer_ns[x].T)
            elif x in whole and y in outer_ns and x.type.ndim == 2 and y.type.ndim == 2:
                out = _batched_rows_dot(op, whole[x], outer_ns[y])

    except (TypeError, ValueError):
        return None
    if out is None or not isinstance(out.type, TensorType):
        return None
    entry = TensorType(out.type.dtype, out.type.broadcastable[1:])
    return out if entry == n.outputs[0].type else None


# ---------------------------------------------------------------------------- saving memory


def _first_index(fgraph: Any, client: Any, i: int) -> Any:
    """The constant first index of a Subtensor ``client`` reading its input ``i`` (an int,
    or a slice of ints/None), or None when it is anything else."""
    if client == "output" or i != 0 or not isinstance(client.op, Subtensor):
        return None
    idx = client.op.get_constant_idx(client.inputs, allow_partial=True)
    if not idx:
        return None
    first = idx[0]
    if isinstance(first, slice):
        parts = (first.start, first.stop, first.step)
        if any(p is not None and not isinstance(p, int) for p in parts):
            return None
        return first
    return first if isinstance(first, int) else None


def _tail_read(first: Any) -> int | None:
    """How many entries from the end ``x[first]`` reads when that is all it reads
    (``x[-i]``, ``x[-i:]``), else None."""
    if isinstance(first, int):
        return -first if first < 0 else None
    if first.stop is None and first.step in (None, 1) and first.start is not None:
        return -first.start if first.start < 0 else None
    return None


def _kept_entries(
    fgraph: Any, var: Variable, lag: int | None
) -> tuple[int, list[tuple[Apply, ...]]] | None:
    """The entries after the ``lag`` initial ones that must stay in buffer ``var`` (a
    recurrent output's when ``lag`` is an int, a nit_sot output's when None) and the chains
    of Subtensor nodes reading them, or None when a client reads more than the last ones.

    Readers allowed: ``var[-i]`` and ``var[-i:]`` (any further indices), and for a
    recurrent output ``var[c:]`` with ``0 <= c <= lag`` (scan()'s ``buf[lag:]``) whose own
    clients only read its last entries. With ``k`` entries kept, ``var[c:]`` on the new
    buffer has the last ``min(k, n_steps)`` entries of the old one, so each chain's last
    node computes the same value on the new buffer.
    """
    keep = 1
    chains: list[tuple[Apply, ...]] = []
    for client, i in fgraph.clients[var]:
        first = _first_index(fgraph, client, i)
        if first is None:
            return None
        tail = _tail_read(first)
        if tail is not None:
            keep = max(keep, tail - (lag or 0))
            chains.append((client,))
            continue
        start = first.start if isinstance(first, slice) else None
        if (
            lag is None
            or not isinstance(first, slice)
            or first.stop is not None
            or first.step not in (None, 1)
            or not 0 <= (start or 0) <= lag
        ):
            return None
        for sub_client, j in fgraph.clients[client.outputs[0]]:
            sub = _first_index(fgraph, sub_client, j)
            sub_tail = None if sub is None else _tail_read(sub)
            if sub_tail is None:
                return None
            keep = max(keep, sub_tail)
            chains.append((client, sub_client))
    return keep, chains


@node_rewriter([Scan])
def scan_save_mem(fgraph: Any, node: Apply) -> Any:
    """Theano's ``ScanSaveMem``: when every client of a recurrent or nit_sot output reads only
    its last entries (``out[-1]``, ``out[-k:]``, scan()'s ``buf[lag:][-1]``), the loop keeps
    only those (``info.buffer_sizes``: ``lag + k`` or ``k`` entries, in a circular buffer), so
    a loop whose last value alone is used needs O(taps) memory whatever its length.

    As in Theano, the readers are replaced (the same indexing on the new node's outputs, whose
    values they equal), not the Scan node's outputs, which get shorter."""
    if not isinstance(node.op, Scan):
        return None
    op: Scan = node.op
    info = op.info
    lags = info.rec_lags
    n_buf = info.n_rec + info.n_nit_sot
    sizes = [info.buffer_size(k) for k in range(n_buf)]
    readers: dict[int, list[tuple[Apply, ...]]] = {}
    for k in range(n_buf):
        lag = lags[k] if k < info.n_rec else None
        if lag is None and info.reverse:
            continue  # a reverse loop writes its nit_sot outputs from the end
        found = _kept_entries(fgraph, node.outputs[k], lag)
        if found is None:
            continue
        size = found[0] + (lag or 0)
        if sizes[k] == 0 or size < sizes[k]:
            sizes[k] = size
            readers[k] = found[1]
    if not readers:
        return None
    new_info = dataclasses.replace(info, buffer_sizes=tuple(sizes))
    new_op = Scan(op.inner_inputs, op.inner_outputs, new_info, mode=op.mode)
    new_outputs = new_op(*node.inputs, return_list=True)
    replace: dict[Variable, Variable] = {}
    for k, (old, new) in enumerate(zip(node.outputs, new_outputs)):
        if k not in readers:
            replace[old] = new  # the same value: every entry is kept
            continue
        made: dict[Apply, Variable] = {}
        for chain in readers[k]:
            value = new
            for reader in chain:
                if reader not in made:
                    made[reader] = reader.op(value, *reader.inputs[1:])
                value = made[reader]
            replace[chain[-1].outputs[0]] = value
    return replace


# ---------------------------------------------------------------------------- merging loops


def _steps_key(v: Variable) -> Any:
    if isinstance(v, Constant):
        return ("const", int(v.data))
    return v


class ScanMerge(GraphRewriter):
    """Theano's ``ScanMerge``: Scan nodes running the same number of steps (the same
    ``n_steps`` variable or equal constants), none depending on another, with the same
    options (not ``until`` loops), become one Scan whose step runs both steps; the inputs
    they share are then read once (:func:`remove_constants_and_unused_inputs_scan`)."""

    name = "scan_merge"

    def apply(self, fgraph: Any) -> int:
        merged = 0
        while True:
            bucket = self._find(fgraph)
            if bucket is None:
                return merged
            # One merge at a time: merging a second set of loops found independent before the
            # first merge could make the two merged loops depend on each other.
            self._merge(fgraph, bucket)
            merged += 1

    def _find(self, fgraph: Any) -> list[Apply] | None:
        """The first set of two or more Scan nodes that can become one, or None."""
        groups: dict[Any, list[Apply]] = {}
        for n in fgraph.toposort():
            if isinstance(n.op, Scan) and not n.op.info.as_while:
                info = n.op.info
                mode = n.op.mode
                mode = mode if mode is None or isinstance(mode, str) else id(mode)
                key = (
                    _steps_key(n.inputs[0]),
                    info.go_backwards,
                    info.reverse,
                    info.truncate_gradient,
                    mode,
                )
                groups.setdefault(key, []).append(n)
        for nodes in groups.values():
            if len(nodes) < 2:
                continue
            above = {
                n: {v.owner for v in ancestors(n.inputs) if v.owner is not None} for n in nodes
            }
            for k, n in enumerate(nodes):
                bucket = [n]
                for m in nodes[k + 1 :]:
                    if all(m not in above[b] and b not in above[m] for b in bucket):
                        bucket.append(m)
                if len(bucket) > 1:
                    return bucket
        return None

    def _merge(self, fgraph: Any, nodes: list[Apply]) -> None:
        loops = [_Loop(n) for n in nodes]
        first = loops[0]
        tagged: list[tuple[int, int]] = []  # (loop index, old output index)
        for li, lp in enumerate(loops):
            for group in (lp.recs, lp.nits, lp.shared):
                for e in group:
                    tagged.append((li, e.old))
                    e.old = len(tagged) - 1
        for lp in loops[1:]:
            first.seqs += lp.seqs
            first.recs += lp.recs
            first.nits += lp.nits
            first.shared += lp.shared
            first.non_seqs += lp.non_seqs
        first.info = dataclasses.replace(first.info, name="&".join(lp.info.name for lp in loops))
        new = first.build()
        pairs = [(nodes[tagged[t][0]].outputs[tagged[t][1]], v) for t, v in new.items()]
        fgraph.replace_all_validate(pairs, reason=self)


# ---------------------------------------------------------------------------- registration

#: Theano's ``scan_seqopt1``, run once early: the push-out rewrites.
scan_eqopt1 = SequenceDB()
scan_eqopt1.register(
    "scan_remove_constants_and_unused_inputs0",
    in2out(remove_constants_and_unused_inputs_scan, ignore_newtrees=True),
    "fast_run",
    "scan",
    "remove_constants_and_unused_inputs_scan",
    position=1,
)
scan_eqopt1.register(
    "scan_pushout_nonseqs_ops",
    in2out(push_out_non_seq_scan, ignore_newtrees=False),
    "fast_run",
    "scan",
    position=2,
)
scan_eqopt1.register(
    "scan_pushout_seqs_ops",
    in2out(push_out_seq_scan, ignore_newtrees=False),
    "fast_run",
    "scan",
    position=3,
)

#: Theano's ``scan_eqopt2``: merging loops and removing what merging made redundant.
scan_eqopt2 = EquilibriumDB()
scan_eqopt2.register(
    "scan_remove_constants_and_unused_inputs1",
    remove_constants_and_unused_inputs_scan,
    "fast_run",
    "scan",
    "remove_constants_and_unused_inputs_scan",
)
scan_eqopt2.register("scan_merge", ScanMerge(), "fast_run", "scan")

rewrites.register("optdb", scan_eqopt1, "fast_run", "scan", name="scan_eqopt1", position=0.05)
rewrites.register("optdb", scan_eqopt2, "fast_run", "scan", name="scan_eqopt2", position=1.6)
rewrites.register(
    "optdb",
    in2out(scan_save_mem, ignore_newtrees=True),
    "fast_run",
    "scan",
    name="scan_save_mem",
    position=1.61,
)
