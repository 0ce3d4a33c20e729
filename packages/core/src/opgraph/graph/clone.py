"""Copying graphs: clone, clone_get_equiv, clone_replace. The original is never modified."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from opgraph.graph.basic import Constant, Variable
from opgraph.graph.traversal import graph_inputs, io_toposort

__all__ = ["clone", "clone_get_equiv", "clone_replace"]

#: Marks Theano's deprecated ``copy_inputs`` argument as not given.
_DEPRECATED = object()


def clone_get_equiv(
    inputs: Sequence[Variable],
    outputs: Sequence[Variable],
    copy_inputs: bool = True,
    copy_orphans: bool = True,
    memo: dict[Any, Any] | None = None,
) -> dict[Any, Any]:
    """Clone the graph between ``inputs`` and ``outputs``; return ``{old: new}`` for every
    Variable and Apply in it.

    Parameters
    ----------
    copy_inputs
        Clone the inputs too (otherwise they map to themselves).
    copy_orphans
        Clone ownerless variables that are not in ``inputs`` (constants); otherwise share them.
    memo
        Pre-filled correspondences: a variable in it is not cloned but replaced by its value
        (how :func:`clone_replace` substitutes). The dict is updated and returned.
    """
    equiv: dict[Any, Any] = {} if memo is None else memo
    for inp in inputs:
        if inp not in equiv:
            equiv[inp] = inp.clone() if copy_inputs else inp
    for node in io_toposort(inputs, outputs):
        for inp in node.inputs:
            if inp not in equiv:
                if copy_orphans:
                    equiv[inp] = inp.clone()
                else:
                    equiv[inp] = inp
        if all(o in equiv for o in node.outputs):
            continue
        new_node = node.clone_with_new_inputs([equiv[i] for i in node.inputs], strict=False)
        equiv[node] = new_node
        for old, new in zip(node.outputs, new_node.outputs, strict=True):
            if old not in equiv:
                new.name = old.name
                new.tag = old.tag.copy()
                equiv[old] = new
    for out in outputs:
        if out not in equiv:
            equiv[out] = out.clone() if (copy_orphans or out in inputs) else out
    return equiv


def clone(
    inputs: Sequence[Variable],
    outputs: Sequence[Variable],
    copy_inputs: bool = True,
    copy_orphans: bool = True,
) -> tuple[list[Variable], list[Variable]]:
    """Return ``(new_inputs, new_outputs)``: a copy of the graph from ``inputs`` to ``outputs``."""
    equiv = clone_get_equiv(inputs, outputs, copy_inputs, copy_orphans)
    return [equiv[i] for i in inputs], [equiv[o] for o in outputs]


def clone_replace(
    output: Variable | Sequence[Variable],
    replace: Mapping[Variable, Variable] | Iterable[tuple[Variable, Variable]] | None = None,
    strict: bool = True,
    share_inputs: bool = True,
    copy_inputs: Any = _DEPRECATED,
) -> Any:
    """Return a copy of ``output`` where each key of ``replace`` is replaced by its value.

    This is Theano 1.0's ``theano.clone(output, replace=None, strict=True, share_inputs=True,
    copy_inputs=...)``. ``replace`` is a dict or a list of ``(old, new)`` pairs. With
    ``strict`` the replacement must have the replaced variable's type (or be convertible to
    it); otherwise Ops rebuild their nodes and output types may change. With ``share_inputs``
    the graph's inputs are kept rather than copied (a copied shared variable still shares its
    storage). ``copy_inputs`` is Theano's deprecated name for ``share_inputs``. Returns a
    Variable if ``output`` was one, else a list.
    """
    if copy_inputs is not _DEPRECATED:
        warnings.warn(
            "In `clone()` function, the argument `copy_inputs` has been deprecated and renamed "
            "into `share_inputs`",
            DeprecationWarning,
            stacklevel=2,
        )
        share_inputs = bool(copy_inputs)
    if replace is not None and not isinstance(replace, Mapping | list | tuple):
        raise ValueError(
            "replace is neither a dictionary, list, tuple or None ! The value provided is "
            f"{replace}, of type {type(replace)}"
        )
    outputs = [output] if isinstance(output, Variable) else list(output)
    pairs = list(replace.items() if isinstance(replace, Mapping) else (replace or ()))
    memo: dict[Any, Any] = {}
    for old, new in pairs:
        if not isinstance(old, Variable):
            raise TypeError(f"clone_replace keys must be Variables, got {old!r}")
        if not isinstance(new, Variable):
            new = old.type.make_constant(new)
        if strict and new.type != old.type:
            new = old.type.filter_variable(new)
        memo[old] = new
    inputs = graph_inputs(outputs, blockers=list(memo))
    # Replaced variables stay as they are; everything downstream of them is cloned.
    for inp in inputs:
        if inp not in memo:
            copy = not share_inputs and not isinstance(inp, Constant)
            memo[inp] = inp.clone() if copy else inp
    equiv = clone_get_equiv(inputs, outputs, copy_inputs=False, copy_orphans=False, memo=memo)
    new_outputs = [equiv[o] for o in outputs]
    return new_outputs[0] if isinstance(output, Variable) else new_outputs


def is_same_graph_structure(a: Sequence[Variable], b: Sequence[Variable]) -> bool:
    """True if two graphs have the same ops, in the same order, wired the same way."""
    ia, ib = graph_inputs(a), graph_inputs(b)
    ta, tb = io_toposort(ia, a), io_toposort(ib, b)
    if len(ta) != len(tb) or len(ia) != len(ib):
        return False
    pos_a: dict[Any, Any] = {v: ("in", i) for i, v in enumerate(ia)}
    pos_b: dict[Any, Any] = {v: ("in", i) for i, v in enumerate(ib)}
    for k, (na, nb) in enumerate(zip(ta, tb, strict=True)):
        if na.op != nb.op or len(na.inputs) != len(nb.inputs):
            return False
        if [pos_a.get(v) for v in na.inputs] != [pos_b.get(v) for v in nb.inputs]:
            return False
        for j, (oa, ob) in enumerate(zip(na.outputs, nb.outputs, strict=True)):
            pos_a[oa] = pos_b[ob] = ("node", k, j)
    return [pos_a.get(v) for v in a] == [pos_b.get(v) for v in b]
