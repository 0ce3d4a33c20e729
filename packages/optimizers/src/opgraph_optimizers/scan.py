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
 - ``scan_merge_inouts``                            :func:`scan_merge_inouts`
``scan_save_mem``                         1.61      :func:`scan_save_mem`
========================================  ========  =========================================

Every entry is tagged ``fast_run`` and ``scan`` (``optimizer_excluding=scan`` turns them all
off), plus its own name and the name Theano 1.0 gave it (``scanOp_save_mem``, ...); none runs
under FAST_COMPILE. The merging rewrites live in :mod:`opgraph_optimizers.scan_merge`. A
rewrite rebuilds the Scan node with a new inner graph and layout
(:class:`~opgraph_optimizers.scan_loop.Loop` takes a node apart into the groups of its
:class:`~opgraph.scan_module.scan_utils.ScanInfo` and builds the new node) and replaces the
old node's outputs by the new ones (``scan_save_mem`` replaces the readers of the outputs it
shortens, whose values do not change, so DEBUG_MODE can check it); the inner graph itself is
rewritten when the inner function compiles, in the mode of the outer function. No in-place
rewrite is needed: the loop allocates its own output buffers, and backend-c's loop lets the
inner graph write each step's entries into them (``opgraph_c/_scan.pyx``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.traversal import ancestors, io_toposort
from opgraph.rewriting import in2out, node_rewriter
from opgraph.rewriting.db import EquilibriumDB, SequenceDB
from opgraph.scalar.basic import Abs, Add, Cast, Maximum, Minimum
from opgraph.scan_module.scan_op import Scan
from opgraph.tensor.basic import ScalarFromTensor, TensorFromScalar
from opgraph.tensor.dot import Dot
from opgraph.tensor.elemwise import DimShuffle, Elemwise
from opgraph.tensor.shape import Shape, Shape_i
from opgraph.tensor.subtensor_basic import Subtensor
from opgraph.tensor.type import TensorType
from opgraph_optimizers.registry import rewrites
from opgraph_optimizers.scan_loop import Loop, Nit, Rec, fresh_like, has_clients
from opgraph_optimizers.scan_merge import ScanMerge, scan_merge_inouts

__all__ = [
    "ScanMerge",
    "push_out_non_seq_scan",
    "push_out_scan_output",
    "push_out_seq_scan",
    "remove_constants_and_unused_inputs_scan",
    "scan_eqopt1",
    "scan_eqopt2",
    "scan_merge_inouts",
    "scan_save_mem",
]


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
    loop = Loop(node)
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
    needed_recs = {id(r) for r in loop.recs if has_clients(fgraph, node.outputs[r.old])}
    roots = [r.out for r in loop.recs if id(r) in needed_recs]
    roots += [s.out for s in loop.shared] + ([loop.cond] if loop.cond is not None else [])
    nits = [n for n in loop.nits if has_clients(fgraph, node.outputs[n.old])]
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
    loop = Loop(node)
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
    loop: Loop, needs: list[Variable], outer_of: dict[Variable, Variable], into: list[Any]
) -> Any:
    """Replace each inner value of ``needs`` by a new inner input fed from ``outer_of[v]``
    (appended to ``into``: the loop's non-sequences or sequences); the node's replacements,
    or None when there is nothing to move."""
    if not needs:
        return None
    replace = {}
    for v in needs:
        inner = fresh_like(v)
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
    loop = Loop(node)
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


# ---------------------------------------------------------------------------- accumulated products


def _nonnegative(v: Variable) -> bool:
    """Whether integer ``v`` is known never to be negative: a constant, a shape, an
    absolute value, and casts, indices, minima and maxima of such values (scan() gives
    ``n_steps`` as the shortest sequence's length)."""
    if isinstance(v, Constant):
        return bool(np.all(np.asarray(v.data) >= 0))
    owner = v.owner
    if owner is None:
        return False
    op = owner.op
    if isinstance(op, (Shape, Shape_i)):
        return True
    if isinstance(op, Elemwise):
        scalar = op.scalar_op
        if isinstance(scalar, Abs):
            return True
        if isinstance(scalar, (Cast, Minimum)):
            return all(_nonnegative(i) for i in owner.inputs)
        if isinstance(scalar, Maximum):
            return any(_nonnegative(i) for i in owner.inputs)
        return False
    if isinstance(op, (Subtensor, ScalarFromTensor, TensorFromScalar)):
        return _nonnegative(owner.inputs[0])
    return False


def _inner_clients(inner_outs: Sequence[Variable], inner_ins: Sequence[Variable]) -> dict:
    """How many times each inner variable is read (by inner nodes and as an inner output)."""
    count: dict[Variable, int] = {}
    for n in io_toposort(list(inner_ins), list(inner_outs)):
        for i in n.inputs:
            count[i] = count.get(i, 0) + 1
    for v in inner_outs:
        count[v] = count.get(v, 0) + 1
    return count


def _last_entry_readers(fgraph: Any, var: Variable) -> list[Variable] | None:
    """The outputs of the nodes reading only ``var[-1]`` (directly, or through scan()'s
    ``buf[1:]``) when those are all ``var``'s readers, else None."""
    found = _kept_entries(fgraph, var, 1)
    if found is None or found[0] != 1:
        return None
    last = []
    for chain in found[1]:
        reader = chain[-1]
        idx = reader.op.get_constant_idx(reader.inputs, allow_partial=True)
        if len(idx) != 1 or idx[0] != -1:
            return None  # var[-1:], or var[-1] indexed further
        last.append(reader.outputs[0])
    return last


@dataclasses.dataclass
class _Operand:
    """One operand of an accumulated product, per step: its value in the loop, whether it
    is used transposed (``dot(a.T, b)``: ``value`` is ``a``), and its outer stack of steps
    once known (its steps along the first axis)."""

    value: Variable
    transposed: bool = False
    stack: Variable | None = None


def _operand(v: Variable) -> _Operand:
    """``v`` as a product's operand: a transposed matrix is read through its input."""
    shuffle = v.owner.op if v.owner is not None else None
    if isinstance(shuffle, DimShuffle) and shuffle.new_order == (1, 0):
        return _Operand(v.owner.inputs[0], transposed=True)
    return _Operand(v)


@node_rewriter([Scan])
def push_out_scan_output(fgraph: Any, node: Apply) -> Any:
    """Theano's ``PushOutScanOutput`` and ``PushOutDot1``: a sit_sot output that only
    accumulates products, ``acc = acc[t-1] + dot(A_t, B_t)`` with matrices ``A_t``, ``B_t``
    that change every step, and whose last value alone is read, becomes one product outside
    the loop: ``acc0 + dot([A_0 A_1 ...], [B_0; B_1; ...])``. Each operand's steps come from
    its sequence (the steps the loop reads), from a recurrent output's buffer, or from a new
    nit_sot output; a transposed operand (``dot(h_t.T, d_t)``, a weight gradient
    accumulated over time) is stacked untransposed. Loops with ``until`` are left alone
    (their length is not known).

    As in Theano, a loop of no step then gives ``acc0`` where scan()'s ``out[-1]`` (an
    empty ``out``) raised IndexError."""
    if not isinstance(node.op, Scan) or node.op.info.as_while:
        return None
    loop = Loop(node)
    inner_ins = list(node.op.inner_inputs)
    inner_outs = loop.inner_outputs()
    seq_outer = {inner: outer for outer, inner in loop.seqs}
    invariant = {inner for _, inner in loop.non_seqs}
    counts: dict | None = None
    for r in loop.recs:
        if r.mit or r.taps != [-1] or r.out.owner is None:
            continue
        add = r.out.owner
        if not (
            isinstance(add.op, Elemwise)
            and isinstance(add.op.scalar_op, Add)
            and len(add.inputs) == 2
            and r.inner[0] in add.inputs
        ):
            continue
        prod = add.inputs[1 - add.inputs.index(r.inner[0])]
        if prod.owner is None or not isinstance(prod.owner.op, Dot) or prod.type != r.out.type:
            continue
        a, b = prod.owner.inputs
        if a.type.ndim != 2 or b.type.ndim != 2:
            continue
        counts = counts if counts is not None else _inner_clients(inner_outs, inner_ins)
        if counts.get(prod, 0) != 1:
            continue  # the product is needed in the loop anyway
        above = set(ancestors([a, b]))
        if r.inner[0] in above or not any(v in above for v in inner_ins if v not in invariant):
            continue  # reads the accumulator, or is the same every step
        readers = _last_entry_readers(fgraph, node.outputs[r.old])
        if readers is None:
            continue
        left, right = _operand(a), _operand(b)
        return _accumulate_outside(loop, node, r, left, right, readers, seq_outer)
    return None


def _accumulate_outside(
    loop: Loop,
    node: Apply,
    rec: Rec,
    left: _Operand,
    right: _Operand,
    readers: list[Variable],
    seq_outer: dict[Variable, Variable],
) -> dict[Variable, Variable] | None:
    """The replacements of :func:`push_out_scan_output` for accumulator ``rec``."""
    n_steps = loop.n_steps
    # Every stack lists the steps in the order of the sequences' entries (a reverse loop
    # writes its nit_sot outputs from the end, but its recurrent buffers in step order).
    kept = {r.out: r for r in loop.recs if r is not rec and not r.size}
    added: list[_Operand] = []
    from_buffer: list[tuple[_Operand, int, int]] = []
    for operand in (left, right):
        outer = seq_outer.get(operand.value)
        other = kept.get(operand.value)
        if outer is not None and _nonnegative(n_steps):
            operand.stack = outer[:n_steps]  # the entries a forward or reverse loop reads
        elif other is not None and not loop.info.reverse:
            from_buffer.append((operand, other.old, -min(other.taps)))
        else:
            added.append(operand)
            loop.nits.append(Nit(operand.value, 0, -len(added)))
    new = loop.build()
    for k, operand in enumerate(added):
        operand.stack = new[-1 - k]
    for operand, old, lag in from_buffer:
        operand.stack = new[old][lag:]  # a recurrent output's values, after its initial ones
    acc0 = rec.outer[0]
    rows, cols = acc0.shape[0], acc0.shape[1]
    if left.transposed:  # a_t is (k, rows): the stack of a_t, k rows per step, transposed
        lhs = left.stack.reshape((-1, rows), ndim=2).T
    else:  # A_t is (rows, k): the steps side by side
        lhs = left.stack.dimshuffle(1, 0, 2).reshape((rows, -1), ndim=2)
    if right.transposed:  # b_t is (cols, k): each step's transpose, stacked
        rhs = right.stack.dimshuffle(0, 2, 1).reshape((-1, cols), ndim=2)
    else:  # B_t is (k, cols): the steps one below the other
        rhs = right.stack.reshape((-1, cols), ndim=2)
    total = acc0 + Dot()(lhs, rhs)
    replace = {node.outputs[i]: v for i, v in new.items() if i >= 0}
    for out in readers:
        if total.type != out.type:
            return None
        replace[out] = total
    return replace


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


# ---------------------------------------------------------------------------- registration
# Each entry is also tagged with the name Theano 1.0 registered it under (``scanOp_...``), so
# ``mode.excluding("scanOp_save_mem")`` or ``optimizer_excluding=scanOp_pushout_seqs_ops``
# in a Theano program turns off the same rewrite.

#: Theano's ``scan_seqopt1``, run once early: the push-out rewrites.
scan_eqopt1 = SequenceDB()
scan_eqopt1.register(
    "scan_remove_constants_and_unused_inputs0",
    in2out(remove_constants_and_unused_inputs_scan, ignore_newtrees=True),
    "fast_run",
    "scan",
    "remove_constants_and_unused_inputs_scan",
    "scanOp_remove_constants_and_unused_inputs0",
    position=1,
)
scan_eqopt1.register(
    "scan_pushout_nonseqs_ops",
    in2out(push_out_non_seq_scan, ignore_newtrees=False),
    "fast_run",
    "scan",
    "scanOp_pushout_nonseqs_ops",
    position=2,
)
scan_eqopt1.register(
    "scan_pushout_seqs_ops",
    in2out(push_out_seq_scan, ignore_newtrees=False),
    "fast_run",
    "scan",
    "scanOp_pushout_seqs_ops",
    position=3,
)
scan_eqopt1.register(
    "scan_pushout_output",
    in2out(push_out_scan_output, ignore_newtrees=True),
    "fast_run",
    "more_mem",
    "scan",
    "scanOp_pushout_output",
    "scan_pushout_dot1",  # Theano's PushOutDot1: the same rewrite here
    position=5,
)

#: Theano's ``scan_eqopt2``: merging loops and removing what merging made redundant.
scan_eqopt2 = EquilibriumDB()
scan_eqopt2.register(
    "scan_remove_constants_and_unused_inputs1",
    remove_constants_and_unused_inputs_scan,
    "fast_run",
    "scan",
    "remove_constants_and_unused_inputs_scan",
    # Theano ran it three times in this group; here it runs to the fixed point.
    "scanOp_remove_constants_and_unused_inputs1",
    "scanop_remove_constants_and_unused_inputs2",
    "scanOp_remove_constants_and_unused_inputs3",
)
scan_eqopt2.register("scan_merge", ScanMerge(), "fast_run", "scan", "scanOp_merge")
scan_eqopt2.register(
    "scan_merge_inouts", scan_merge_inouts, "fast_run", "scan", "scanOp_merge_inouts"
)

rewrites.register(
    "optdb", scan_eqopt1, "fast_run", "scan", "all_pushout_opt", name="scan_eqopt1", position=0.05
)
rewrites.register("optdb", scan_eqopt2, "fast_run", "scan", name="scan_eqopt2", position=1.6)
rewrites.register(
    "optdb",
    in2out(scan_save_mem, ignore_newtrees=True),
    "fast_run",
    "scan",
    "scanOp_save_mem",
    name="scan_save_mem",
    position=1.61,
)
