"""Error reports for compiled functions: which node failed, on what inputs, built where."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from types import TracebackType
from typing import Any, NoReturn

import numpy as np

from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Variable
from opgraph.graph.utils import first_user_line, format_trace
from opgraph.printing.debugprint import debugprint

__all__ = ["augment_exception", "describe_value", "node_error_details", "raise_with_op"]


def describe_value(data: Any) -> str:
    """A short description of a runtime value for error messages (kind, dtype, shape)."""
    if isinstance(data, np.ndarray):
        return f"a numpy array of dtype {data.dtype} and shape {data.shape}"
    if isinstance(data, np.generic):
        return f"a numpy {data.dtype} scalar"
    if isinstance(data, bool | int | float | complex):
        return f"a Python {type(data).__name__} ({data!r})"
    if isinstance(data, list | tuple):
        return f"a Python {type(data).__name__} of length {len(data)}"
    if isinstance(data, Variable):  # a symbolic value where a runtime one was expected
        return f"the symbolic variable {data} of type {data.type}"
    shape = getattr(data, "shape", None)
    dtype = getattr(data, "dtype", None)
    if shape is not None and dtype is not None:
        return f"a {type(data).__name__} of dtype {dtype} and shape {tuple(shape)}"
    return f"a {type(data).__module__}.{type(data).__name__}"


def node_trace(node: Apply) -> Sequence[tuple[str, int, str]]:
    """The user frames recorded when ``node`` was built (its first output's tag, else its own)."""
    for var in node.outputs:
        trace = getattr(var.tag, "trace", None)
        if trace:
            return trace
    return getattr(node.tag, "trace", None) or ()


def _small(value: Any) -> Any:
    size = getattr(value, "size", None)
    if size is None:
        size = len(value) if isinstance(value, list | tuple) else 1
    return value if size <= 5 else "not shown"


def node_error_details(
    fgraph: Any,
    node: Apply,
    input_values: Sequence[Any] | None = None,
    verbosity: str | None = None,
    index: int | None = None,
) -> str:
    """The lines Theano adds to an error raised while running ``node``.

    The user's line that built the node first (right after the error's own message), then
    Theano's ``Apply node that caused the error``, ``Toposort index``, the inputs' types,
    shapes, strides and (small) values, the outputs' clients, and a ``HINT:`` line. With
    ``verbosity='high'`` the full creation trace and a debugprint of the node are added.
    """
    if verbosity is None:
        verbosity = config.exception_verbosity
    if input_values is None:
        input_values = [getattr(v, "data", None) for v in node.inputs]
    if index is None:
        try:
            index = fgraph.toposort().index(node)
        except Exception:  # a node of a replaced subgraph (DEBUG_MODE)
            index = None
    clients = []
    for var in node.outputs:
        per = getattr(var, "clients", None) or []
        clients.append([c for c, _ in per])
    trace = node_trace(node)
    lines = _creation_lines(node, trace)
    lines += [
        f"Apply node that caused the error: {node}",
        f"Toposort index: {index if index is not None else 'unknown'}",
        f"Inputs types: {[v.type for v in node.inputs]}",
        f"Inputs shapes: {[getattr(v, 'shape', 'No shapes') for v in input_values]}",
        f"Inputs strides: {[getattr(v, 'strides', 'No strides') for v in input_values]}",
        f"Inputs values: {[_small(v) for v in input_values]}",
        f"Outputs clients: {clients}",
    ]
    if verbosity == "high":
        lines.append("Backtrace when the node was created:")
        lines.append(format_trace(trace))
        lines.append("Debugprint of the apply node:")
        lines.append(_debugprint(node))
        lines.append(
            "HINT: set OPGRAPH_FLAGS=optimizer=fast_compile to see the node before most rewrites."
        )
    else:
        lines.append(
            "HINT: set OPGRAPH_FLAGS=exception_verbosity=high for the full creation trace "
            "and a debugprint of this node, or optimizer=fast_compile to see it before most "
            "rewrites."
        )
    return "\n".join(lines)


def _creation_lines(node: Apply, trace: Sequence[tuple[str, int, str]]) -> list[str]:
    """``The node was created at: <the user's line>`` (and, for a fused node, the lines of
    the nodes it fuses): the first lines of the report, right after the error itself."""
    where = first_user_line(trace) or (
        "(no creation trace recorded; set OPGRAPH_FLAGS=traceback__limit=8)"
    )
    lines = [f"The node was created at: {where}"]
    fused = getattr(node.tag, "fused_from", None)
    if fused:
        lines.append("It fuses the nodes created at:")
        seen = {where}
        for op_text, op_trace in fused:
            line = first_user_line(op_trace)
            if line and line not in seen:
                seen.add(line)
                lines.append(f"  {op_text}: {line}")
    return lines


def _debugprint(node: Apply) -> str:
    try:
        return str(debugprint(node, print_type=True, file="str")).rstrip()
    except Exception as exc:  # printing must never hide the real error
        return f"(debugprint failed: {type(exc).__name__}: {exc})"


def augment_exception(exc: BaseException, text: str) -> BaseException:
    """An exception of ``exc``'s class whose message is ``str(exc)`` plus ``text``.

    Falls back to adding ``text`` as a note on ``exc`` itself when the class cannot be
    rebuilt from one message (e.g. ``UnicodeDecodeError``) or quotes its message
    (``KeyError``).
    """
    message = f"{exc}\n{text}" if str(exc) else text
    try:
        new = type(exc)(message)
        if str(new) != message:
            raise TypeError("message is rendered differently")
    except Exception:
        exc.add_note(text)
        return exc
    for key, value in vars(exc).items():
        if key != "__notes__":
            with contextlib.suppress(Exception):
                setattr(new, key, value)
    return new


def _allocation_error(exc: MemoryError, node: Apply, details: str) -> MemoryError:
    """A MemoryError whose message says which node could not allocate how much, then
    ``details`` (from the user's line that built the node on).

    NumPy's own error (``Unable to allocate 72.8 TiB for an array with shape ...``) names
    neither the node nor the line, and cannot be rebuilt from a message; a bare MemoryError
    (a C extension's failed malloc) does not even say the size. The new error carries
    ``shape``, ``dtype`` and ``nbytes`` (None when unknown); the original is its cause.
    """
    shape, dtype, nbytes = getattr(exc, "shape", None), getattr(exc, "dtype", None), None
    try:
        shape, dtype = tuple(int(d) for d in shape), np.dtype(dtype.str)  # type: ignore[union-attr]
        nbytes = dtype.itemsize
        for d in shape:
            nbytes *= d
    except (TypeError, AttributeError):  # no shape or dtype: not NumPy's error
        shape = dtype = None
    if nbytes is None:
        what = "memory (the requested size is unknown: the allocation was not NumPy's)"
        if str(exc):
            what += f": {exc}"
    else:
        size, unit = float(nbytes), "bytes"
        for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
            if size < 1024 or unit == "EiB":
                break
            size /= 1024
        amount = f"{nbytes} bytes" if unit == "bytes" else f"{size:.1f} {unit} ({nbytes:,} bytes)"
        what = f"{amount} for an array of shape {shape} and dtype {dtype}"
    new = MemoryError(f"out of memory in {node}: cannot allocate {what}\n{details}")
    new.shape, new.dtype, new.nbytes = shape, dtype, nbytes  # type: ignore[attr-defined]
    return new


def raise_with_op(
    fgraph: Any,
    node: Apply,
    thunk: Any = None,
    exc_info: tuple[type[BaseException], BaseException, TracebackType | None] | None = None,
    storage_map: dict[Variable, list[Any]] | None = None,
    index: int | None = None,
) -> NoReturn:
    """Re-raise the current exception, of the same class, with the failing node's details.

    The message gets Theano's report (see :func:`node_error_details`); the original
    exception stays chained as ``__cause__``, with its traceback into the node. The exception also
    carries ``__op_instance__`` (the node), ``__applynode_index__`` and
    ``__thunk_trace__`` (where the node was built), as in Theano.
    """
    _, exc, tb = sys.exc_info() if exc_info is None else exc_info
    assert exc is not None
    if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit: untouched
        raise exc.with_traceback(tb)
    values = None
    if thunk is not None and getattr(thunk, "inputs", None) is not None:
        values = [cell[0] for cell in thunk.inputs]
    elif storage_map is not None:
        values = [storage_map[v][0] if v in storage_map else None for v in node.inputs]
    details = node_error_details(fgraph, node, values, index=index)
    if isinstance(exc, MemoryError):
        new = _allocation_error(exc, node, details)
    else:
        new = augment_exception(exc, details)
    new.__op_instance__ = node  # type: ignore[attr-defined]
    new.__applynode_index__ = index  # type: ignore[attr-defined]
    new.__thunk_trace__ = node_trace(node)  # type: ignore[attr-defined]
    if new is exc:
        raise exc.with_traceback(tb)
    raise new from exc  # the cause's traceback shows the frames inside the node
