"""A Scan node taken apart for the scan rewrites (:mod:`opgraph_optimizers.scan`): the groups
of its :class:`~opgraph.scan_module.scan_utils.ScanInfo` as editable lists, and the new node
built from them."""

from __future__ import annotations

import dataclasses
from typing import Any

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.clone import clone_replace
from opgraph.graph.traversal import ancestors
from opgraph.scan_module.scan_op import Scan

__all__ = ["Loop", "Nit", "Rec", "SharedState", "fresh_like", "has_clients"]


@dataclasses.dataclass
class Rec:
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
class Nit:
    """A nit_sot output (one entry per step, not fed back)."""

    out: Variable
    size: int
    old: int | None


@dataclasses.dataclass
class SharedState:
    """A shared state: its outer value, inner input and new value."""

    outer: Variable
    inner: Variable
    out: Variable
    old: int | None


class Loop:
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
        self.recs: list[Rec] = []
        pos = S
        for j, taps in enumerate(info.rec_taps):
            self.recs.append(
                Rec(
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
        self.nits = [Nit(outs[R + k], info.buffer_size(R + k), R + k) for k in range(K)]
        self.shared = [
            SharedState(node.inputs[1 + S + R + k], ins[pos + k], outs[R + K + k], R + K + k)
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


def has_clients(fgraph: Any, var: Variable) -> bool:
    return bool(fgraph.clients[var]) if var in fgraph.clients else False


def fresh_like(v: Variable) -> Variable:
    new = v.type()
    new.name = v.name
    return new
