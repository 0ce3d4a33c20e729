"""Theano's ``theano.gof.utils``: the small helpers Theano code imports from it (creation
traces, memoization, list and hashing utilities), with Theano 1.0's behaviour."""

from __future__ import annotations

import hashlib
import linecache
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from io import StringIO
from typing import Any

import numpy as np

from opgraph.configdefaults import config
from opgraph.graph.utils import MetaObject, MethodNotDefined, Scratchpad, add_tag_trace

__all__ = [
    "D",
    "Keyword",
    "MetaObject",
    "MethodNotDefined",
    "_asarray",
    "add_tag_trace",
    "comm_guard",
    "deprecated",
    "difference",
    "flatten",
    "from_return_values",
    "get_variable_trace_string",
    "give_variables_names",
    "hash_from_code",
    "hash_from_file",
    "hashtype",
    "hist",
    "memoize",
    "object2",
    "remove",
    "scratchpad",
    "simple_extract_stack",
    "to_return_values",
    "toposort",
    "type_guard",
    "undef",
    "uniq",
    "unique",
]

#: Theano's names for the tag class and the base of Ops and Types.
scratchpad = Scratchpad
object2 = MetaObject

#: A marker for "no value" (Theano's ``utils.undef``).
undef = object()


class D:
    """A plain attribute bag: ``D(a=1).a == 1``."""

    def __init__(self, **d: Any) -> None:
        self.__dict__.update(d)


class Keyword:
    """A named marker object (Theano's ``Keyword``): truthy or not as given."""

    def __init__(self, name: str, nonzero: bool = True) -> None:
        self.name = name
        self.nonzero = nonzero

    def __bool__(self) -> bool:
        return self.nonzero

    def __str__(self) -> str:
        return f"<{self.name}>"

    __repr__ = __str__


def simple_extract_stack(
    f: Any = None, limit: int | None = None, skips: Sequence[str] = ()
) -> list[tuple[str, int, str, str | None]]:
    """The call stack above frame ``f`` (default: the caller) as ``(filename, lineno, name,
    line)`` tuples, oldest first, leaving out frames whose file path contains one of
    ``skips``; at most ``limit`` frames."""
    frame = f if f is not None else sys._getframe(1)
    stack: list[tuple[str, int, str, str | None]] = []
    while frame is not None and (limit is None or len(stack) < limit):
        code = frame.f_code
        filename = code.co_filename
        if not any(s in filename for s in skips):
            line = linecache.getline(filename, frame.f_lineno).strip() or None
            stack.append((filename, frame.f_lineno, code.co_name, line))
        frame = frame.f_back
    stack.reverse()
    return stack


def get_variable_trace_string(v: Any) -> str:
    """Where ``v`` was created, as text ("Backtrace when that variable is created: ..."), or
    "" when no trace was recorded."""
    tr = getattr(v.tag, "trace", [])
    if not isinstance(tr, list) or not tr:
        return ""
    sio = StringIO()
    print(" \nBacktrace when that variable is created:\n", file=sio)
    traces = [tr] if isinstance(tr[0], tuple) else tr
    for idx, sub in enumerate(traces):
        if len(traces) > 1:
            print(f"trace {idx}", file=sio)
        entries = [(e[0], e[1], e[2], e[3] if len(e) > 3 else None) for e in sub]
        traceback.print_list(traceback.StackSummary.from_list(entries), sio)
    return sio.getvalue()


def hashtype(self: Any) -> int:
    """A hash of ``type(self)`` from its name and module."""
    t = type(self)
    return hash(t.__name__) ^ hash(t.__module__)


def memoize(f: Callable[..., Any]) -> Callable[..., Any]:
    """Cache ``f``'s results by its (hashable) arguments."""
    cache: dict[Any, Any] = {}

    def rval(*args: Any, **kwargs: Any) -> Any:
        key = (args, tuple(kwargs.items()))
        if key not in cache:
            cache[key] = f(*args, **kwargs)
        return cache[key]

    return rval


def deprecated(filename: str, msg: str = "") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator printing ``WARNING: <filename>.<f> deprecated. <msg>`` on the first call."""

    def _deprecated(f: Callable[..., Any]) -> Callable[..., Any]:
        printme = [True]

        def g(*args: Any, **kwargs: Any) -> Any:
            if printme[0]:
                print(f"WARNING: {filename}.{f.__name__} deprecated. {msg}")
                printme[0] = False
            return f(*args, **kwargs)

        return g

    return _deprecated


def uniq(seq: Sequence[Any]) -> list[Any]:
    """The elements of ``seq`` without repeats, first occurrences kept, in order."""
    return [x for i, x in enumerate(seq) if seq.index(x) == i]


def difference(seq1: Iterable[Any], seq2: Sequence[Any]) -> list[Any]:
    """The elements of ``seq1`` that are not in ``seq2``, in order."""
    try:
        set2 = set(seq2)
        return [x for x in seq1 if x not in set2]
    except TypeError:  # unhashable elements
        return [x for x in seq1 if x not in seq2]


def to_return_values(values: Sequence[Any]) -> Any:
    """The only element of a one-element sequence, else the sequence."""
    return values[0] if len(values) == 1 else values


def from_return_values(values: Any) -> Any:
    """``values`` if it is a list or tuple, else ``[values]``."""
    return values if isinstance(values, list | tuple) else [values]


def toposort(prereqs_d: dict[Any, Any]) -> list[Any]:
    """A topological order of the keys of ``{x: set of prerequisites of x}``; raises if
    there is a cycle or a prerequisite that is not a key."""
    seq: list[Any] = []
    done: set[Any] = set()
    postreqs_d: dict[Any, set[Any]] = {}
    for x, prereqs in prereqs_d.items():
        for prereq in prereqs:
            postreqs_d.setdefault(prereq, set()).add(x)
    nxt = {k for k in prereqs_d if not prereqs_d[k]}
    while nxt:
        bases, nxt = nxt, set()
        for x in bases:
            done.add(x)
            seq.append(x)
        for x in bases:
            for post in postreqs_d.get(x, ()):
                if not set(prereqs_d[post]).difference(done):
                    nxt.add(post)
    if len(prereqs_d) != len(seq):
        raise ValueError(
            "Cannot sort topologically: there might be cycles, prereqs_d does not have a key "
            "for each element or some orderings contain invalid elements."
        )
    return seq


def flatten(a: Any) -> list[Any]:
    """The leaves of nested lists, tuples and sets, as one list."""
    if isinstance(a, tuple | list | set):
        out: list[Any] = []
        for item in a:
            out.extend(flatten(item))
        return out
    return [a]


def unique(x: Sequence[Any]) -> bool:
    """True if the elements of ``x`` are all different."""
    return len(set(x)) == len(x)


def hist(coll: Iterable[Any]) -> dict[Any, int]:
    """``{element: number of occurrences}``."""
    counts: dict[Any, int] = {}
    for elem in coll:
        counts[elem] = counts.get(elem, 0) + 1
    return counts


def give_variables_names(variables: list[Any]) -> list[Any]:
    """Give unnamed or same-named variables the names ``<name>_<i>`` so that all are unique;
    ValueError if they still are not."""
    h = hist(var.name for var in variables)
    bad = [v for v in variables if not v.name or h[v.name] > 1]
    for i, var in enumerate(bad):
        var.name = (var.name or "") + f"_{i}"
    if not unique([str(v) for v in variables]):
        raise ValueError(
            "Not all variables have unique names. Maybe you've named some of the variables "
            "identically"
        )
    return variables


def remove(predicate: Callable[[Any], bool], coll: Iterable[Any]) -> list[Any]:
    """The elements of ``coll`` for which ``predicate`` is false."""
    return [x for x in coll if not predicate(x)]


def hash_from_code(msg: str | bytes | Any) -> str:
    """``'m'`` followed by the SHA-256 hex digest of ``msg`` (str is UTF-8 encoded)."""
    if isinstance(msg, str):
        msg = msg.encode()
    return "m" + hashlib.sha256(msg).hexdigest()


def hash_from_file(file_path: str) -> str:
    """:func:`hash_from_code` of a file's bytes."""
    with open(file_path, "rb") as f:
        return hash_from_code(f.read())


def comm_guard(type1: type, type2: type) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator for a commutative binary function ``f(arg1, arg2)``: it runs when the
    arguments are instances of ``type1`` and ``type2`` in either order; otherwise the
    previous definition of the same name (``old_f``, looked up in the caller's globals)
    is called."""

    def wrap(f: Callable[..., Any]) -> Callable[..., Any]:
        old_f = sys._getframe(1).f_globals.get(f.__name__)  # type: ignore[attr-defined]

        def new_f(arg1: Any, arg2: Any, *rest: Any) -> Any:
            if isinstance(arg1, type1) and isinstance(arg2, type2):
                return f(arg1, arg2, *rest)
            if isinstance(arg1, type2) and isinstance(arg2, type1):
                return f(arg2, arg1, *rest)
            if old_f is None:
                raise TypeError(f"{f.__name__}: no definition for {type(arg1)}, {type(arg2)}")
            return old_f(arg1, arg2, *rest)

        new_f.__name__ = f.__name__
        new_f.__doc__ = f.__doc__
        return new_f

    return wrap


def type_guard(type1: type) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: the function runs when its first argument is a ``type1``; otherwise the
    previous definition of the same name is called (see :func:`comm_guard`)."""

    def wrap(f: Callable[..., Any]) -> Callable[..., Any]:
        old_f = sys._getframe(1).f_globals.get(f.__name__)  # type: ignore[attr-defined]

        def new_f(arg1: Any, *rest: Any) -> Any:
            if isinstance(arg1, type1):
                return f(arg1, *rest)
            if old_f is None:
                raise TypeError(f"{f.__name__}: no definition for {type(arg1)}")
            return old_f(arg1, *rest)

        new_f.__name__ = f.__name__
        new_f.__doc__ = f.__doc__
        return new_f

    return wrap


def _asarray(a: Any, dtype: Any, order: str | None = None) -> np.ndarray:
    """``numpy.asarray(a, dtype, order)`` whose result has exactly ``dtype`` (Theano's
    ``theano._asarray``, from ``theano.misc.safe_asarray``: on some platforms NumPy returned
    an equivalent but different dtype object, e.g. int32 vs intc)."""
    if str(dtype) == "floatX":
        dtype = config.floatX
    dtype = np.dtype(dtype)
    rval = np.asarray(a, dtype=dtype, order=order)
    if rval.dtype.num != dtype.num:
        if dtype.str == rval.dtype.str:
            return rval.view(dtype=dtype)
        raise TypeError(
            f"numpy.array did not return the data type we asked for ({dtype} {dtype.str} "
            f"#{dtype.num}), instead it returned type {rval.dtype} {rval.dtype.str} "
            f"#{rval.dtype.num}: function _asarray may need to be modified to handle this "
            "data type."
        )
    return rval
