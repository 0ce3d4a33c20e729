"""Shared variables: symbolic variables whose value persists between function calls.

``shared(value)`` asks every installed plugin, through the ``opgraph_shared_constructor``
hook, for a SharedVariable of the right kind (the tensor library for ndarrays and numbers,
opgraph-sparse for scipy.sparse matrices, a GPU plugin for device arrays). Core's own
constructors are asked last.

Every function that updates a shared variable holds the variable's :func:`update_lock`
from reading it to writing its new value, and :meth:`SharedVariable.set_value` takes it
too: updates of one variable by several functions (and their copies) in several threads
are never lost. The locks are re-initialised in a child forked while another thread held
one.
"""

from __future__ import annotations

import copy
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

from opgraph.graph.basic import Variable
from opgraph.graph.type import Type, generic
from opgraph.link.basic import Container
from opgraph.plugins import get_plugin_manager

__all__ = [
    "SharedVariable",
    "core_shared_constructor",
    "generic_shared_constructor",
    "mark_written_in_place",
    "shared",
    "shared_constructor",
    "update_lock",
    "written_in_place",
]

# One reentrant lock per shared Container (a function updating a variable may call, from
# one of its nodes, another function updating it in the same thread).
_UPDATE_LOCKS: weakref.WeakKeyDictionary[Container, Any] = weakref.WeakKeyDictionary()
_REGISTRY_LOCK = threading.Lock()


def update_lock(container: Container) -> Any:
    """The lock (a ``threading.RLock``) that guards updates of the value in ``container``.

    A function holds the locks of the shared variables it updates for the whole call,
    taking them in the order of their ``id`` (so two functions updating overlapping sets
    cannot deadlock); ``set_value`` holds it while storing.
    """
    lock = _UPDATE_LOCKS.get(container)
    if lock is None:
        with _REGISTRY_LOCK:
            lock = _UPDATE_LOCKS.get(container)
            if lock is None:
                lock = _UPDATE_LOCKS[container] = threading.RLock()
    return lock


#: ``[n]``: bumped each time a compiled function starts writing some shared variable's
#: updates into its memory (:func:`mark_written_in_place`). A function compares it with the
#: value it last saw before each call, and then takes the update locks of the variables it
#: only reads that are written in place, so that it never sees half of an update.
INPLACE_GENERATION = [0]
_WRITTEN_IN_PLACE: weakref.WeakKeyDictionary[Container, bool] = weakref.WeakKeyDictionary()


def mark_written_in_place(containers: list[Container]) -> None:
    """Record that some function overwrites the values of ``containers`` in place."""
    with _REGISTRY_LOCK:
        new = [c for c in containers if c not in _WRITTEN_IN_PLACE]
        for container in new:
            _WRITTEN_IN_PLACE[container] = True
        if new:
            INPLACE_GENERATION[0] += 1


def written_in_place(container: Container) -> bool:
    """Whether some compiled function overwrites the value of ``container`` in place."""
    return container in _WRITTEN_IN_PLACE


def _reinit_update_locks_in_child() -> None:
    """After ``fork``, in the child: only the forking thread exists, so a lock another
    thread held is free again (the one the forking thread holds stays held: its call goes
    on in the child)."""
    global _REGISTRY_LOCK
    _REGISTRY_LOCK = threading.Lock()
    for lock in list(_UPDATE_LOCKS.values()):
        if not lock._is_owned():
            lock._at_fork_reinit()


os.register_at_fork(after_in_child=_reinit_update_locks_in_child)


class SharedVariable(Variable):
    """A Variable with a value shared by every function that uses it.

    Functions read the value from ``container`` and write their updates back into it.
    Use :meth:`get_value` and :meth:`set_value` to read and change it between calls.

    Parameters
    ----------
    name
        The variable's name.
    type
        Its Type; the value is filtered by it.
    value
        The initial value (ignored when ``container`` is given).
    strict
        Values must already have the exact type (no conversion).
    allow_downcast
        Allow lossy conversions in :meth:`set_value`.
    container
        An existing Container to share (``clone()`` uses it).
    """

    #: An expression computing the next value after every call of a function using this
    #: variable (unless the function has ``no_default_updates``), e.g. a random state.
    default_update: Variable | None = None

    def __init__(
        self,
        name: str | None,
        type: Type,
        value: Any,
        strict: bool | None,
        allow_downcast: bool | None = None,
        container: Container | None = None,
    ) -> None:
        super().__init__(type=type, owner=None, index=None, name=name)
        if container is not None:
            if value is not None or strict is not None:
                raise TypeError(
                    "SharedVariable: value and strict are ignored when a container is given; "
                    "pass value=None, strict=None."
                )
            self.container = container
        else:
            strict = bool(strict)
            self.container = Container(
                self,
                storage=[type.filter(value, strict=strict, allow_downcast=allow_downcast)],
                readonly=False,
                strict=strict,
                allow_downcast=allow_downcast,
            )

    def get_value(self, borrow: bool = False, return_internal_type: bool = False) -> Any:
        """Return the current value (a copy unless ``borrow``).

        Parameters
        ----------
        borrow
            Return the internal object itself: faster, but later calls may change it.
        return_internal_type
            Return the internal representation even where it differs from the user-facing
            one (a GPU array rather than a NumPy array); core types make no difference.
        """
        value = self.container.value
        return value if borrow else copy.deepcopy(value)

    def set_value(self, new_value: Any, borrow: bool = False) -> None:
        """Replace the value, converted through the variable's Type.

        Parameters
        ----------
        new_value
            The new value. A wrong dtype or number of dimensions raises TypeError and the
            old value is kept.
        borrow
            Store ``new_value`` itself when it already has the right type (no copy).
        """
        try:
            value = new_value if borrow else copy.deepcopy(new_value)
            with update_lock(self.container):
                self.container.value = value
        except (TypeError, ValueError) as exc:
            cls = type(exc) if type(exc) in (TypeError, ValueError) else TypeError
            raise cls(
                f"cannot set the value of shared variable {self.name or self!s} (type "
                f"{self.type}): {exc}\nIts value was not changed.\n"
                "HINT: pass a value of the same dtype and number of dimensions, or build a "
                "new shared variable."
            ) from exc

    def zero(self, borrow: bool = False) -> None:
        """Set the value to zeros of the same shape and dtype (array-like values)."""
        with update_lock(self.container):
            self.container.value = self.container.value * 0

    def clone(self, name: str | None = None) -> SharedVariable:
        """A new SharedVariable of the same type sharing this one's container (and value)."""
        cp = self.__class__(
            name=self.name if name is None else name,
            type=self.type,
            value=None,
            strict=None,
            container=self.container,
        )
        cp.tag = self.tag.copy()
        return cp

    @property
    def value(self) -> Any:
        raise AttributeError(
            "shared variables have no .value attribute; use get_value() and set_value()."
        )


_FOREIGN = {
    "scipy.sparse": "opgraph-sparse",
    "pycuda": "opgraph-backend-cuda",
    "cupy": "opgraph-backend-cuda",
    "pygpu": "opgraph-backend-cuda",
}


def _foreign_package(value: Any) -> str | None:
    module = type(value).__module__ or ""
    for prefix, package in _FOREIGN.items():
        if module == prefix or module.startswith(prefix + "."):
            return package
    return None


def generic_shared_constructor(
    value: Any,
    name: str | None = None,
    strict: bool = False,
    allow_downcast: bool | None = None,
    borrow: bool = False,
) -> SharedVariable | None:
    """Core's last-resort constructor: a SharedVariable of the ``Generic`` type.

    Any Python object is accepted (Theano's ``generic_constructor``), except data owned by
    a plugin that is not installed (scipy.sparse matrices, GPU arrays): those get None, so
    :func:`shared` can name the package to install.
    """
    if _foreign_package(value) is not None:
        return None
    return SharedVariable(
        name=name,
        type=generic,
        value=value if borrow else copy.deepcopy(value),
        strict=strict,
        allow_downcast=allow_downcast,
    )


def shared(
    value: Any,
    name: str | None = None,
    strict: bool = False,
    allow_downcast: bool | None = None,
    borrow: bool = False,
    **kwargs: Any,
) -> SharedVariable:
    """Build a SharedVariable holding ``value`` (Theano's ``theano.shared``).

    Parameters
    ----------
    value
        The initial value: an ndarray or number (a TensorSharedVariable), or anything an
        installed plugin owns (a scipy.sparse matrix with opgraph-sparse).
    name
        The variable's name.
    strict
        Later values must have the exact type.
    allow_downcast
        Allow lossy conversions in ``set_value``.
    borrow
        Use ``value`` itself rather than a copy.
    **kwargs
        Passed to the constructors (e.g. ``broadcastable=(True, False)``).

    Raises
    ------
    TypeError
        If no installed constructor accepts ``value`` (the message names its type), or
        ``value`` is a symbolic Variable.
    """
    if isinstance(value, Variable):
        raise TypeError(
            f"shared() takes a value, not the symbolic variable {value}.\n"
            "HINT: to give a variable a value at each call, make it a function input."
        )
    for ctor in reversed(_USER_CONSTRUCTORS):
        extra = dict(kwargs, borrow=True) if borrow else kwargs
        try:
            var = ctor(value, name=name, strict=strict, allow_downcast=allow_downcast, **extra)
        except TypeError:
            continue
        if var is not None:
            return var
    # Keyword extras reach the plugins that take them (``options``) and core's tensors.
    var = get_plugin_manager().shared_constructor(
        value=value,
        name=name,
        strict=strict,
        allow_downcast=allow_downcast,
        borrow=borrow,
        options=kwargs,
    )
    if var is None:
        typename = f"{type(value).__module__}.{type(value).__qualname__}"
        package = _foreign_package(value)
        hint = (
            f"install {package}, which provides shared variables for it"
            if package
            else "convert it to a numpy array, or install the plugin that handles this type"
        )
        raise TypeError(
            f"no shared-variable constructor accepts a value of type {typename}"
            f"{' with options ' + repr(sorted(kwargs)) if kwargs else ''}.\nHINT: {hint}."
        )
    return var


#: Core's shared-variable constructors for the values of its libraries (tensors, random
#: states) as (constructor, takes extra keyword arguments), tried in order by
#: :func:`core_shared_constructor`. The modules that define them live above this one and
#: add them when imported (:mod:`opgraph.tensor.sharedvar`).
_CORE_CONSTRUCTORS: list[tuple[Callable[..., SharedVariable | None], bool]] = []


def add_core_shared_constructor(
    constructor: Callable[..., SharedVariable | None], *, options: bool = False
) -> None:
    """Add ``constructor(value, name, strict, allow_downcast, borrow)`` to core's.

    It returns a SharedVariable for the values it handles and None for the others. With
    ``options=True`` it also takes the extra keyword arguments of :func:`shared`
    (``broadcastable=...``); the others are skipped when such arguments are given.
    """
    if all(c is not constructor for c, _ in _CORE_CONSTRUCTORS):
        _CORE_CONSTRUCTORS.append((constructor, options))


def core_shared_constructor(
    value: Any,
    name: str | None = None,
    strict: bool = False,
    allow_downcast: bool | None = None,
    borrow: bool = False,
    **kwargs: Any,
) -> SharedVariable | None:
    """Core's constructors in the order they were added, then (without extra keyword
    arguments) :func:`generic_shared_constructor`. Returns None if none accepts."""
    for constructor, options in _CORE_CONSTRUCTORS:
        if kwargs and not options:
            continue
        var = constructor(value, name, strict, allow_downcast, borrow, **kwargs)
        if var is not None:
            return var
    if kwargs:
        return None
    return generic_shared_constructor(value, name, strict, allow_downcast, borrow)


#: Constructors registered with :func:`shared_constructor`, tried by :func:`shared` before
#: the plugins', the last registered first.
_USER_CONSTRUCTORS: list[Callable[..., Any]] = []


def shared_constructor(ctor: Callable[..., Any], remove: bool = False) -> Callable[..., Any]:
    """Register ``ctor`` (Theano's decorator): :func:`shared` tries it before the built-in
    constructors, the most recently registered first, calling ``ctor(value, name=...,
    strict=..., allow_downcast=..., **kwargs)`` (plus ``borrow=True`` when asked). A
    constructor declines a value by raising TypeError (or returning None). With
    ``remove=True`` it is unregistered instead. Returns ``ctor``.
    """
    if remove:
        if ctor in _USER_CONSTRUCTORS:
            _USER_CONSTRUCTORS.remove(ctor)
    elif ctor not in _USER_CONSTRUCTORS:
        _USER_CONSTRUCTORS.append(ctor)
    return ctor
