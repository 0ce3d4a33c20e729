"""Small pieces every graph structure shares: props-based identity, tags, creation traces."""

from __future__ import annotations

import linecache
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "MetaObject",
    "MethodNotDefined",
    "Scratchpad",
    "add_tag_trace",
    "format_trace",
    "user_frames",
]

# Frames inside these directories belong to opgraph (or one of its plugins) and are skipped
# when we look for the user's line that created a variable.
_OPGRAPH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SKIP_PREFIXES: list[str] = [_OPGRAPH_DIR + os.sep]


def register_internal_path(path: str) -> None:
    """Treat frames under ``path`` as library code, not the user's (plugins call this)."""
    path = os.path.abspath(path)
    prefix = path if path.endswith(os.sep) else path + os.sep
    if prefix not in _SKIP_PREFIXES:
        _SKIP_PREFIXES.append(prefix)


class MethodNotDefined(NotImplementedError):
    """An optional method of an Op or Type that this particular class does not provide.

    Raised, for example, by ``Op.perform`` on an Op that only has backend kernels, or by
    ``Op.grad`` on an Op without a gradient. The message names the class and the method.
    """


class MetaObject:
    """Base giving equality, hashing and the printed name from ``__props__``.

    A class that sets ``__props__ = ("axis", "dtype")`` compares equal to another instance of
    the same class with equal values of those attributes, hashes accordingly, and prints as
    ``ClassName{axis=1, dtype='float64'}`` (Theano's format). With ``__props__ = ()`` all
    instances are equal and print as the bare class name. Without ``__props__`` (``None``),
    identity is used.
    """

    __props__: tuple[str, ...] | None = None

    def _props(self) -> tuple[Any, ...]:
        return tuple(getattr(self, a) for a in self.__props__ or ())

    def _props_dict(self) -> dict[str, Any]:
        return {a: getattr(self, a) for a in self.__props__ or ()}

    def __eq__(self, other: object) -> bool:
        if self.__props__ is None:
            return self is other
        return type(self) is type(other) and self._props() == other._props()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        if self.__props__ is None:
            return object.__hash__(self)
        return hash((type(self), self._props()))

    def __str__(self) -> str:
        if not self.__props__:
            return type(self).__name__
        inner = ", ".join(f"{a}={getattr(self, a)!r}" for a in self.__props__)
        return f"{type(self).__name__}{{{inner}}}"

    def __repr__(self) -> str:
        return str(self)


class Scratchpad:
    """A free-form attribute bag attached to variables and Apply nodes (``var.tag``)."""

    def __init__(self, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"Scratchpad({items})"

    def copy(self) -> Scratchpad:
        """Return a shallow copy (clones of a variable get their own tag)."""
        return Scratchpad(**self.__dict__)


def user_frames(limit: int = 8, skip: int = 1) -> list[tuple[str, int, str]]:
    """Return up to ``limit`` ``(filename, lineno, function)`` frames of user code, innermost first.

    Frames belonging to opgraph itself (and to registered plugin paths) are skipped, so the
    first entry is the user's line that caused the call. Only positions are recorded; the
    source text is read lazily by :func:`format_trace`.
    """
    out: list[tuple[str, int, str]] = []
    if limit <= 0:
        return out
    frame = sys._getframe(skip)
    prefixes = tuple(_SKIP_PREFIXES)
    while frame is not None and len(out) < limit:
        code = frame.f_code
        filename = code.co_filename
        if not filename.startswith(prefixes) and not filename.startswith("<frozen"):
            out.append((filename, frame.f_lineno, code.co_name))
        frame = frame.f_back
    return out


def _trace_limit() -> int:
    try:
        from opgraph.configdefaults import config

        return int(config.traceback__limit)
    except Exception:  # config not importable during early bootstrap
        return 8


def add_tag_trace(thing: Any, limit: int | None = None) -> Any:
    """Record in ``thing.tag.trace`` where in the user's code ``thing`` was created."""
    if limit is None:
        limit = _trace_limit()
    thing.tag.trace = user_frames(limit, skip=2)
    return thing


def format_trace(trace: Sequence[tuple[str, int, str]] | None, indent: str = "  ") -> str:
    """Render a creation trace as ``file:line in func`` lines with their source text."""
    if not trace:
        return f"{indent}(no creation trace recorded; set OPGRAPH_FLAGS=traceback__limit=8)"
    lines = []
    for filename, lineno, func in trace:
        text = linecache.getline(filename, lineno).strip()
        lines.append(f'{indent}File "{filename}", line {lineno}, in {func}')
        if text:
            lines.append(f"{indent}  {text}")
    return "\n".join(lines)


def first_user_line(trace: Iterable[tuple[str, int, str]] | None) -> str | None:
    """Return ``'file:line:  source'`` for the innermost user frame of a trace, if any."""
    for filename, lineno, _func in trace or ():
        text = linecache.getline(filename, lineno).strip()
        return f"{filename}:{lineno}:  {text}" if text else f"{filename}:{lineno}"
    return None
