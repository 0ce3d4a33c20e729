"""The scan rewrites that merge (Theano's ``ScanMerge`` and ``scan_merge_inouts``): loops over
the same steps become one loop, and a loop's outputs computing the same values become one.
Registered by :mod:`opgraph_optimizers.scan`."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.traversal import ancestors, io_toposort
from opgraph.rewriting import GraphRewriter, node_rewriter
from opgraph.scan_module.scan_op import Scan
from opgraph_optimizers.scan_loop import Loop, Nit, Rec

__all__ = ["ScanMerge", "same_stop", "scan_merge_inouts"]


# ---------------------------------------------------------------------------- merging outputs


def _computation_keys(
    inputs: Sequence[Variable], outputs: Sequence[Variable], alias: dict[Variable, Variable]
) -> dict[Variable, int]:
    """A number per inner variable, equal for variables computing the same value: the same
    Op on equal inputs, equal constants, or inner inputs ``alias`` makes the same."""
    ids: dict[Any, int] = {}
    key: dict[Variable, int] = {}

    def number(k: Any) -> int:
        return ids.setdefault(k, len(ids))

    for v in inputs:
        key[v] = number(("in", alias.get(v, v)))
    for n in io_toposort(list(inputs), list(outputs)):
        args = []
        for i in n.inputs:
            if i not in key:  # a constant (or a free variable)
                key[i] = number(("const", i.signature()) if isinstance(i, Constant) else i)
            args.append(key[i])
        for k, o in enumerate(n.outputs):
            key[o] = number((n.op, tuple(args), k))
    return key


def _equal_recurrences(
    inputs: Sequence[Variable],
    outputs: Sequence[Variable],
    same: list[tuple[Any, Any]],
    alias: dict[Variable, Variable],
) -> tuple[list[tuple[Any, Any]], dict[Variable, int]]:
    """Of the pairs of recurrences ``same`` (each assumed equal to its kept one), those whose
    inner values stay the same computation when their taps, and the inner inputs of
    ``alias``, are identified: pairs are dropped until the assumption is consistent (each
    step's values then equal, by induction). Returns them with the computation keys."""
    while True:
        both = dict(alias)
        both.update({v: k for d, kept in same for v, k in zip(d.inner, kept.inner)})
        key = _computation_keys(inputs, outputs, both)
        still = [(d, kept) for d, kept in same if key[d.out] == key[kept.out]]
        if len(still) == len(same):
            return same, key
        same = still


@node_rewriter([Scan])
def scan_merge_inouts(fgraph: Any, node: Apply) -> Any:
    """Theano's ``scan_merge_inouts``: outputs of one loop that compute the same values
    become one. Two nit_sot outputs whose inner values are the same computation; two
    recurrent outputs with the same initial value, taps and buffer whose inner values are
    the same computation once their taps are identified (then their every entry is equal).
    The readers of the dropped output read the kept one. (The inputs given twice are read
    once by :func:`remove_constants_and_unused_inputs_scan`.)"""
    if not isinstance(node.op, Scan):
        return None
    loop = Loop(node)
    inner_ins = list(node.op.inner_inputs)
    groups: dict[Any, list[Rec]] = {}
    for r in loop.recs:
        groups.setdefault((r.outer, tuple(r.taps), r.mit, r.size), []).append(r)
    same: list[tuple[Any, Any]] = [(r, g[0]) for g in groups.values() for r in g[1:]]
    same, key = _equal_recurrences(inner_ins, loop.inner_outputs(), same, {})
    first_nit: dict[tuple[int, int], Nit] = {}
    for n in loop.nits:
        kept = first_nit.setdefault((key[n.out], n.size), n)
        if kept is not n:
            same.append((n, kept))
    if not same:
        return None
    dropped = {id(d) for d, _ in same}
    loop.recs = [r for r in loop.recs if id(r) not in dropped]
    loop.nits = [n for n in loop.nits if id(n) not in dropped]
    loop.replace_inner(
        {v: k for d, kept in same if isinstance(d, Rec) for v, k in zip(d.inner, kept.inner)}
    )
    replace = loop.replacements()
    for d, kept in same:
        replace[node.outputs[d.old]] = replace[node.outputs[kept.old]]
    return replace


# ---------------------------------------------------------------------------- merging loops


def same_stop(a: Apply, b: Apply) -> bool:
    """Whether the ``until`` conditions of Scan nodes ``a`` and ``b`` (same steps) are equal
    at every step: the same computation once the inner inputs reading the same values are
    identified. Sequences and non-sequences read the same values when their outer variables
    are the same; two recurrences (one per loop) when they have the same initial value, taps
    and buffer and their inner values are the same computation (:func:`_equal_recurrences`,
    as for :func:`scan_merge_inouts`)."""
    la, lb = Loop(a), Loop(b)
    alias: dict[Variable, Variable] = {}
    for pairs_a, pairs_b in ((la.seqs, lb.seqs), (la.non_seqs, lb.non_seqs)):
        inner_of = {outer: inner for outer, inner in pairs_a}
        for outer, inner in pairs_b:
            if outer in inner_of:
                alias[inner] = inner_of[outer]
    first: dict[Any, Rec] = {}
    for r in la.recs:
        first.setdefault((r.outer, tuple(r.taps), r.mit, r.size), r)
    same = [
        (r, first[k]) for r in lb.recs if (k := (r.outer, tuple(r.taps), r.mit, r.size)) in first
    ]
    inputs = [*a.op.inner_inputs, *b.op.inner_inputs]
    _, key = _equal_recurrences(inputs, la.inner_outputs() + lb.inner_outputs(), same, alias)
    return key[la.cond] == key[lb.cond]


def _steps_key(v: Variable) -> Any:
    if isinstance(v, Constant):
        return ("const", int(v.data))
    return v


class ScanMerge(GraphRewriter):
    """Theano's ``ScanMerge``: Scan nodes running the same number of steps (the same
    ``n_steps`` variable or equal constants), none depending on another, with the same
    options, become one Scan whose step runs both steps; the inputs they share are then read
    once (:func:`remove_constants_and_unused_inputs_scan`). ``until`` loops merge when their
    conditions are the same computation of the same values (:func:`same_stop`), so the
    merged loop stops at the step where each of them stopped."""

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
            if isinstance(n.op, Scan):
                info = n.op.info
                mode = n.op.mode
                mode = mode if mode is None or isinstance(mode, str) else id(mode)
                key = (
                    _steps_key(n.inputs[0]),
                    info.go_backwards,
                    info.reverse,
                    info.truncate_gradient,
                    info.as_while,
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
                    if all(m not in above[b] and b not in above[m] for b in bucket) and (
                        not n.op.info.as_while or same_stop(n, m)
                    ):
                        bucket.append(m)
                if len(bucket) > 1:
                    return bucket
        return None

    def _merge(self, fgraph: Any, nodes: list[Apply]) -> None:
        loops = [Loop(n) for n in nodes]
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
