"""``OrderedUpdates``: the ordered ``{shared variable: new value}`` dict that ``scan`` returns
and ``function(updates=...)`` accepts (Theano's ``theano.updates.OrderedUpdates``)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from opgraph.compile.sharedvalue import SharedVariable

__all__ = ["OrderedUpdates"]


class OrderedUpdates(OrderedDict):
    """An ordered dict of updates whose keys must be shared variables.

    Adding two of them (``u1 + u2``) merges them; a key present in both raises KeyError
    unless the values are the same variable, as in Theano.
    """

    def __setitem__(self, key: Any, value: Any) -> None:
        if not isinstance(key, SharedVariable):
            raise TypeError(
                f"OrderedUpdates keys must be shared variables, got {key!r}; only shared "
                "variables can be updated."
            )
        super().__setitem__(key, value)

    def update(self, other: Any = None, **kwargs: Any) -> None:  # type: ignore[override]
        """Add ``other``'s pairs; a key already present with another value raises KeyError."""
        if other is None:
            return
        items = other.items() if hasattr(other, "items") else other
        for key, value in items:
            if key in self and self[key] is not value:
                raise KeyError(f"collision: {key} is updated twice (to {self[key]} and {value})")
            self[key] = value

    def __add__(self, other: Any) -> OrderedUpdates:
        merged = OrderedUpdates()
        merged.update(self)
        merged.update(other)
        return merged

    def __radd__(self, other: Any) -> OrderedUpdates:
        merged = OrderedUpdates()
        merged.update(other)
        merged.update(self)
        return merged
