"""Block-task payloads: what a block task needs from opgraph (an Op, a small node) pickled
once on the client and rebuilt at most once per worker process, whatever the number of
tasks.

A distributed scheduler pickles each task's ``run_spec`` on its own when it sends the task to
a worker, and the worker unpickles it on its own. A task function that carries an Op (a
fused Composite is a graph of scalar variables and ops) was therefore pickled, shipped and
rebuilt once per block, by cloudpickle, class by class. Here a block task's function is a
module-level function (pickled by reference: a few bytes) whose first argument is a
:class:`Payload`: the object's token and its bytes, pickled once when the graph is built.
Per task the scheduler and the worker copy those bytes (no object walk); the worker looks
the token up in its process-wide cache and unpickles the bytes only the first time it sees
the token (the next graph of the same compiled function finds it there too), so compiled
block functions cached on the object (see
:class:`~opgraph_dask.lowerings.elemwise.ChunkFunction`) are built once per worker thread.

The payload is an inline argument, not a graph key the tasks depend on: a key would add one
task per layer and a transfer of it to every other worker, which costs more than the bytes
(measured on W17's logistic-regression step: 1.13-1.18x the hand-written dask graph's time
with a key, 0.98x inline). Inside one graph the client pickles a payload once (pickle's
memo), so the graph sent to the scheduler holds its bytes once.

The bytes come from cloudpickle with one change: a class bound in its module under another
name than its own (``opgraph.scalar.basic.Sigmoid`` is a class named ``ScalarSigmoid``) is
pickled as that module attribute, not by value; by value, the worker would get a copy of the
class that class-keyed tables (e.g. opgraph-backend-c's C code for scalar ops) do not know,
and the fused loop would run ``perform`` instead of its C kernel.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import pickle
import sys
import threading
import zlib
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

import cloudpickle

__all__ = ["Payload", "dumps", "payload_of", "unwrap"]

#: How many payloads a process keeps by token (and, on the client, by cache key).
CACHE_SIZE = 512

_lock = threading.Lock()
_restored: OrderedDict[str, Payload] = OrderedDict()
_built: OrderedDict[Hashable, Any] = OrderedDict()
_aliases: dict[type, tuple[str, str] | None] = {}


def _module_attr(module: str, name: str) -> Any:
    """``module.name`` (how a class bound under another name is unpickled)."""
    return getattr(importlib.import_module(module), name)


def _alias(cls: type) -> tuple[str, str] | None:
    """``(module, attribute)`` for a class that pickle cannot find under its own qualified
    name but that its module binds under another name; None otherwise."""
    try:
        return _aliases[cls]
    except KeyError:
        pass
    found = None
    module = sys.modules.get(getattr(cls, "__module__", None) or "")
    if module is not None:
        obj: Any = module
        for part in cls.__qualname__.split("."):
            obj = getattr(obj, part, None)
        if obj is not cls:
            for attr, value in list(vars(module).items()):
                if value is cls:
                    found = (module.__name__, attr)
                    break
    _aliases[cls] = found
    return found


def _scratchpad(state: dict[str, Any]) -> Any:
    """A ``Scratchpad`` (a variable's ``tag``) with the attributes ``state``."""
    from opgraph.graph.utils import Scratchpad

    return Scratchpad(**state)


class _Pickler(cloudpickle.Pickler):
    """cloudpickle, with misnamed module-level classes pickled by reference and the
    creation traces dropped from variables' tags (only error messages on the client read
    them; they are most of a fused Composite's bytes)."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, type):
            alias = _alias(obj)
            if alias is not None:
                return _module_attr, alias
        elif type(obj).__name__ == "Scratchpad" and "trace" in vars(obj):
            return _scratchpad, ({k: v for k, v in vars(obj).items() if k != "trace"},)
        return super().reducer_override(obj)


def dumps(obj: Any) -> bytes:
    """``obj`` pickled as payloads are (see the module)."""
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


def _remember(cache: OrderedDict, key: Hashable, value: Any) -> Any:
    with _lock:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > CACHE_SIZE:
            cache.popitem(last=False)
    return value


class Payload:
    """An object pickled once for every block task that needs it; ``value`` is the object.

    Pickles as ``(token, bytes)``; unpickling returns the process's payload for that token
    when it has one, so the object is rebuilt at most once per process.
    """

    __slots__ = ("_data", "_value", "token")

    def __init__(self, token: str, data: bytes, value: Any = None) -> None:
        self.token = token
        self._data = data
        self._value = value

    @classmethod
    def of(cls, value: Any) -> Payload:
        """A payload holding ``value`` (pickled and compressed now, named by its content)."""
        data = zlib.compress(dumps(value))
        return cls(hashlib.sha1(data).hexdigest(), data, value)

    @property
    def value(self) -> Any:
        """The carried object (unpickled on first use in this process)."""
        value = self._value
        if value is None:
            value = self._value = pickle.loads(zlib.decompress(self._data))
        return value

    def __reduce__(self) -> Any:
        return _restore, (self.token, self._data)

    def __dask_tokenize__(self) -> Any:
        return ("opgraph-payload", self.token)

    def __repr__(self) -> str:
        inner = repr(self._value) if self._value is not None else "not loaded"
        return f"Payload({self.token[:12]}, {inner[:80]})"


def _restore(token: str, data: bytes) -> Payload:
    """The process's payload for ``token`` (made from ``data`` the first time)."""
    found = _restored.get(token)
    if found is not None:
        return found
    return _remember(_restored, token, Payload(token, data))


def payload_of(value: Any, cache_key: Hashable | None = None) -> Payload:
    """``Payload.of(value)``, registered in this process's cache by its token.

    Pass it to ``blockwise``/``map_blocks`` as an argument with index None (a literal); the
    task function takes it and calls :func:`unwrap`. ``cache_key`` (hashable, equal for
    equal values) reuses the payload made for an equal value earlier in this process instead
    of pickling ``value`` again at each graph build.
    """
    if cache_key is not None:
        try:
            hash(cache_key)
        except TypeError:  # an Op with unhashable parameters: no reuse
            cache_key = None
    payload = None if cache_key is None else _built.get(cache_key)
    if payload is None:
        payload = Payload.of(value)
        if payload.token not in _restored:
            _remember(_restored, payload.token, payload)
        if cache_key is not None:
            _remember(_built, cache_key, payload)
    return payload


def unwrap(obj: Any) -> Any:
    """The object a :class:`Payload` carries; anything else as it is."""
    return obj.value if isinstance(obj, Payload) else obj
