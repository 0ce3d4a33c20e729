"""What a call of a compiled function holds and checks before it runs the graph.

- :func:`update_locks_of`: the update locks a call holds (those of the shared variables it
  updates, and of those it reads that some function writes in place), in the one order
  every function takes them in;
- :func:`written_positions`: the shared variables a function writes in place (nodes of its
  graph overwrite them);
- :func:`alias_check`: the check that gives an input overwritten in place its own copy when
  it shares memory with another input;
- :func:`call_signature`: the signature ``inspect`` shows for a call.

``maker`` is a :class:`~opgraph.compile.function_module.FunctionMaker` (its ``inputs`` and
``fgraph``).
"""

from __future__ import annotations

import copy as _copy
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from opgraph.compile.io import SymbolicInput
from opgraph.compile.sharedvalue import update_lock
from opgraph.link.basic import Container

__all__ = ["alias_check", "call_signature", "update_locks_of", "written_positions"]


def update_locks_of(
    specs: Sequence[SymbolicInput], defaults: list[Any], read: Sequence[Container] = ()
) -> list[Any]:
    """The update locks of the containers the function writes updates into, and of
    ``read`` ones, in ``id`` order (the one order every function takes them in: no
    deadlock)."""
    locks = {}
    for spec, default in zip(specs, defaults):
        if spec.update is not None and isinstance(default, Container):
            lock = update_lock(default)
            locks[id(lock)] = lock
    for container in read:
        lock = update_lock(container)
        locks[id(lock)] = lock
    return [locks[k] for k in sorted(locks)]


def written_positions(maker: Any) -> list[int]:
    """Positions of the shared variables whose updates the function writes into their own
    memory (nodes overwrite them: :class:`UpdateGuard`, or the user's in-place graph)."""
    fg = maker.fgraph
    destroyers = getattr(fg, "destroyers", None)
    if destroyers is None:
        return []
    return [
        k
        for k, (spec, var) in enumerate(zip(maker.inputs, fg.inputs))
        if getattr(spec, "shared", False) and destroyers(var)
    ]


def alias_check(maker: Any, cells: list[list[Any]]) -> Callable[[], None] | None:
    """A check run after the arguments are stored, or None when no input is overwritten in
    place (decided here, once: other functions pay nothing).

    The check gives each input the graph overwrites (``fgraph.has_destroyers``, only
    possible for ``mutable`` inputs or graphs built with ``accept_inplace``) its own copy
    when its value may share memory (``np.may_share_memory`` for two ndarrays, else its
    Type's ``may_share_memory``) with any other input's: the explicit arguments and the
    shared variables' values. Without it, an in-place loop reads what it has already
    overwritten (Theano copied the same way).
    """
    fg = maker.fgraph
    has_destroyers = getattr(fg, "has_destroyers", None)
    if has_destroyers is None:
        return None
    destroyed = [k for k, var in enumerate(fg.inputs) if has_destroyers([var])]
    if not destroyed:
        return None
    checks = [
        (cells[k], fg.inputs[k].type.may_share_memory, [c for j, c in enumerate(cells) if j != k])
        for k in destroyed
    ]
    ndarray, may_share = np.ndarray, np.may_share_memory

    def unalias() -> None:
        for cell, share, rest in checks:
            value = cell[0]
            if value is None:
                continue
            array = type(value) is ndarray
            owner = array and value.base is None
            for other in rest:
                o = other[0]
                if o is None:
                    continue
                if array and type(o) is ndarray:
                    if owner and o is not value and o.base is None:
                        continue  # two arrays owning their memory: disjoint (the usual case)
                    hit = may_share(value, o)
                else:
                    hit = share(value, o)
                if hit:
                    cell[0] = value.copy() if array else _copy.deepcopy(value)
                    break

    return unalias


def call_signature(slots: Sequence[Any], names: dict[str, int | None]) -> inspect.Signature:
    """A function's signature for ``inspect`` and ``help``: one parameter per explicit
    input (``slots``, with ``name``, ``default``), by its name; inputs up to the last one
    without a usable name (none, not an identifier, or shared by two inputs: ``names``
    maps those to None) are positional-only; defaults as given. When a default comes
    before an input without one, ``(*args, **kwargs)``: any order is taken."""
    P = inspect.Parameter

    def keyword(name: Any) -> str | None:
        ok = isinstance(name, str) and name.isidentifier() and names.get(name) is not None
        return name if ok else None

    usable = [keyword(s.name) for s in slots]
    last = max((i for i, n in enumerate(usable) if n is None), default=-1)
    params = []
    for i, (slot, name) in enumerate(zip(slots, usable, strict=True)):
        kind = P.POSITIONAL_ONLY if i <= last else P.POSITIONAL_OR_KEYWORD
        default = P.empty if slot.default is None else slot.default.value
        params.append(P(name or f"input_{i}", kind, default=default))
    try:
        return inspect.Signature(params)
    except ValueError:
        return inspect.Signature([P("args", P.VAR_POSITIONAL), P("kwargs", P.VAR_KEYWORD)])
