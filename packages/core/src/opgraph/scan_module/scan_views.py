"""``map``, ``reduce``, ``foldl`` and ``foldr``: common loops written with :func:`scan`
(Theano's ``scan_module.scan_views``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opgraph.compile.mode import Mode
from opgraph.scan_module.scan import scan
from opgraph.updates import OrderedUpdates

__all__ = ["foldl", "foldr", "map", "reduce"]


def map(
    fn: Callable[..., Any],
    sequences: Any,
    non_sequences: Any = None,
    truncate_gradient: int = -1,
    go_backwards: bool = False,
    mode: Mode | str | None = None,
    name: str | None = None,
) -> tuple[Any, OrderedUpdates]:
    """Apply ``fn`` to each entry of the sequences: ``(outputs, updates)``."""
    return scan(
        fn,
        sequences=sequences,
        outputs_info=[],
        non_sequences=non_sequences,
        truncate_gradient=truncate_gradient,
        go_backwards=go_backwards,
        mode=mode,
        name=name,
    )


def _last(outputs: Any) -> Any:
    if isinstance(outputs, list | tuple):
        return [o[-1] for o in outputs]
    return outputs[-1]


def reduce(
    fn: Callable[..., Any],
    sequences: Any,
    outputs_info: Any,
    non_sequences: Any = None,
    go_backwards: bool = False,
    mode: Mode | str | None = None,
    name: str | None = None,
) -> tuple[Any, OrderedUpdates]:
    """Fold the sequences into ``outputs_info`` with ``fn``; return the last values (only
    the last step's values are kept in memory once compiled)."""
    outputs, updates = scan(
        fn,
        sequences=sequences,
        outputs_info=outputs_info,
        non_sequences=non_sequences,
        go_backwards=go_backwards,
        mode=mode,
        name=name,
    )
    return _last(outputs), updates


def foldl(
    fn: Callable[..., Any],
    sequences: Any,
    outputs_info: Any,
    non_sequences: Any = None,
    mode: Mode | str | None = None,
    name: str | None = None,
) -> tuple[Any, OrderedUpdates]:
    """:func:`reduce` from the first entry to the last."""
    return reduce(fn, sequences, outputs_info, non_sequences, False, mode, name)


def foldr(
    fn: Callable[..., Any],
    sequences: Any,
    outputs_info: Any,
    non_sequences: Any = None,
    mode: Mode | str | None = None,
    name: str | None = None,
) -> tuple[Any, OrderedUpdates]:
    """:func:`reduce` from the last entry to the first."""
    return reduce(fn, sequences, outputs_info, non_sequences, True, mode, name)
