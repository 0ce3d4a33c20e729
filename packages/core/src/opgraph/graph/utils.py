"""Small pieces every graph structure shares: props-based identity, tags, creation traces."""

from __future__ import annotations

import linecache
import os
import sys
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from opgraph.configdefaults import config

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
        _INTERNAL_FILES.clear()


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
        if self is other:
            return True
        props = self.__props__
        if props is None or type(self) is not type(other):
            return False
        # What ``self._props() == other._props()`` computes, without building the tuples.
        for name in props:
            a, b = getattr(self, name), getattr(other, name)
            if a is not b and not a == b:
                return False
        return True

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
        if kwargs:
            self.__dict__.update(kwargs)

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"Scratchpad({items})"

    def copy(self) -> Scratchpad:
        """Return a shallow copy (clones of a variable get their own tag)."""
        cp = Scratchpad.__new__(Scratchpad)
        cp.__dict__.update(self.__dict__)
        return cp


#: ``{filename: True if the file is opgraph's (or a plugin's)}``, filled as frames are seen.
_INTERNAL_FILES: dict[str, bool] = {}


def _is_internal(filename: str) -> bool:
    internal = filename.startswith(tuple(_SKIP_PREFIXES)) or filename.startswith("<frozen")
    _INTERNAL_FILES[filename] = internal
    return internal


def user_frames(limit: int = 8, skip: int = 1) -> list[tuple[str, int, str]]:
    """Return up to ``limit`` ``(filename, lineno, function)`` frames of user code, innermost first.

    Frames belonging to opgraph itself (and to registered plugin paths) are skipped, so the
    first entry is the user's line that caused the call. Only positions are recorded; the
    source text is read lazily by :func:`format_trace`. A walk reaching a frame recorded in
    :func:`trace_marks` (an Op call in progress) takes the rest from there.
    """
    out: list[tuple[str, int, str]] = []
    if limit <= 0:
        return out
    frame = sys._getframe(skip)
    internal_files = _INTERNAL_FILES
    marks = getattr(_TRACE_MARKS, "stack", None)
    mark = marks[-1] if marks else None
    mark_frame = mark[0] if mark is not None and mark[1] >= limit else None
    while frame is not None:
        if frame is mark_frame:
            # The user frames from here up were recorded when that frame began its call;
            # the frames above it are suspended in that call, so they are still the same.
            out.extend(mark[2][: limit - len(out)])  # type: ignore[index]
            break
        code = frame.f_code
        filename = code.co_filename
        internal = internal_files.get(filename)
        if internal is None:
            internal = _is_internal(filename)
        if not internal:
            out.append((filename, frame.f_lineno, code.co_name))
            if len(out) >= limit:
                break
        frame = frame.f_back
    return out


#: Per thread, a stack of ``(frame, limit, user_frames(limit) as seen from that frame)``
#: for the Op calls in progress (see ``Op.__call__``): the variables created during such a
#: call find the frames above it there instead of walking the whole stack again.
_TRACE_MARKS = threading.local()


def trace_marks() -> list[tuple[Any, int, list[tuple[str, int, str]]]]:
    """This thread's stack of recorded call traces (see :func:`user_frames`)."""
    marks = getattr(_TRACE_MARKS, "stack", None)
    if marks is None:
        marks = _TRACE_MARKS.stack = []
    return marks


def _trace_limit() -> int:
    # Asked for every variable created (thousands per rewrite of a big graph).
    return int(config.current("traceback__limit"))


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
