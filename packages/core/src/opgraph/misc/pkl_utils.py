"""Pickling graphs, functions and shared variables to a zip file (Theano's ``pkl_utils``).

:func:`dump` writes a zip file holding a ``pkl`` entry (the pickled object) and one NumPy
``.npy``-format entry per array: a shared variable's value is stored under the variable's
name (``W``, a second ``W`` as ``W_2``), other arrays as ``array_0``, ``array_1``... The file
is readable by ``numpy.load`` (``np.load('model.zip')['W']``) and by :func:`load`::

    >>> W = opgraph.shared(np.zeros((3, 2)), name="W")
    >>> with open("model.zip", "wb") as f:
    ...     dump((W, f_train), f)
    >>> with open("model.zip", "rb") as f:
    ...     W, f_train = load(f)

Files written by Theano 1.0's ``dump`` load too when they hold arrays, shared variables and
plain Python/NumPy data: :class:`CompatUnpickler` maps Theano's classes (``TensorType``,
``TensorSharedVariable``, ``ScalarSharedVariable``, ``Container``, ``scratchpad``) to
opgraph's. Theano's compiled functions and symbolic graphs do not: their pickles hold
Theano's Op, linker and FunctionMaker internals, whose state has no opgraph equivalent;
:class:`CompatUnpickler` then raises an UnpicklingError naming the Theano class. Save the
values (``get_value()``) or the shared variables, and rebuild the function with opgraph.

:class:`StripPickler` pickles without the ``tag.trace`` and ``tag.test_value`` of variables
and Apply nodes (smaller files, e.g. for regression-test cases), leaving the objects intact.
"""

from __future__ import annotations

import copy
import importlib
import io
import pickle
import warnings
import zipfile
from collections import defaultdict
from collections.abc import Callable, Sequence
from contextlib import closing
from typing import IO, Any

import numpy as np

from opgraph.compile.sharedvalue import SharedVariable
from opgraph.configdefaults import config
from opgraph.graph.op import Op
from opgraph.graph.utils import Scratchpad
from opgraph.link.basic import Container
from opgraph.tensor.sharedvar import TensorSharedVariable
from opgraph.tensor.type import TensorType

__all__ = [
    "DEFAULT_PROTOCOL",
    "CompatUnpickler",
    "PersistentNdarrayID",
    "PersistentNdarrayLoad",
    "PersistentSharedVariableID",
    "StripPickler",
    "dump",
    "load",
    "zipadd",
]

DEFAULT_PROTOCOL = pickle.DEFAULT_PROTOCOL
HIGHEST_PROTOCOL = pickle.HIGHEST_PROTOCOL


class StripPickler(pickle.Pickler):
    """A Pickler that leaves out the debugging attributes of graph objects.

    The ``tag.trace`` and ``tag.test_value`` of Variables and Apply nodes (plus
    ``extra_tag_to_remove``) and the instance ``__doc__`` of Ops are not written. Unlike
    Theano's, the pickled objects themselves keep them (the pickle gets stripped copies)::

        with open("case.pkl", "wb") as f:
            StripPickler(f, protocol=-1).dump(dict(inputs=inputs, outputs=outputs))
    """

    def __init__(
        self,
        file: IO[bytes],
        protocol: int | None = 0,
        extra_tag_to_remove: Sequence[str] | None = None,
    ) -> None:
        super().__init__(file, protocol)
        self.protocol_used = HIGHEST_PROTOCOL if protocol is None or protocol < 0 else protocol
        self.tag_to_remove = ["trace", "test_value"]
        if extra_tag_to_remove:
            self.tag_to_remove.extend(extra_tag_to_remove)

    def reducer_override(self, obj: Any) -> Any:
        """Reduce a tag (or an Op with a ``__doc__``) as a copy without the stripped fields."""
        if isinstance(obj, Scratchpad):
            if not any(t in obj.__dict__ for t in self.tag_to_remove):
                return NotImplemented
            stripped = obj.copy()
            for tag in self.tag_to_remove:
                stripped.__dict__.pop(tag, None)
            return stripped.__reduce_ex__(self.protocol_used)
        if isinstance(obj, Op) and "__doc__" in getattr(obj, "__dict__", {}):
            stripped = copy.copy(obj)
            del stripped.__dict__["__doc__"]
            return stripped.__reduce_ex__(self.protocol_used)
        return NotImplemented


# ---------------------------------------------------------------------------------------
# Reading Theano's pickles: its class paths, mapped onto opgraph's.

#: Theano module -> opgraph module, where the path changed.
_MODULE_RENAMES = {
    "theano.gof.utils": "opgraph.graph.utils",
    "theano.gof.link": "opgraph.link.basic",
    "theano.gof.graph": "opgraph.graph.basic",
    "theano.gof.type": "opgraph.graph.type",
    "theano.gof.op": "opgraph.graph.op",
    "theano.gof.fg": "opgraph.graph.fg",
    "theano.tensor.var": "opgraph.tensor.variable",
}


def _become(obj: Any, cls: type, state: dict[str, Any]) -> None:
    obj.__class__ = cls
    obj.__dict__.update(state)


class _TheanoTensorType:
    """Theano's ``TensorType`` state -> opgraph's ``TensorType(dtype, broadcastable)``."""

    def __setstate__(self, state: dict[str, Any]) -> None:
        new = TensorType(state["dtype"], tuple(state["broadcastable"]))
        new.name = state.get("name")
        _become(self, TensorType, new.__dict__)


class _TheanoScratchpad:
    """Theano's ``scratchpad``: the tag, without Theano's trace format."""

    def __setstate__(self, state: dict[str, Any]) -> None:
        _become(self, Scratchpad, {k: v for k, v in state.items() if k != "trace"})


class _TheanoContainer:
    """Theano's ``Container`` has opgraph's fields."""

    _FIELDS = ("type", "name", "storage", "readonly", "strict", "allow_downcast")

    def __setstate__(self, state: dict[str, Any]) -> None:
        _become(self, Container, {k: state.get(k) for k in self._FIELDS})


class _TheanoSharedVariable:
    """Theano's tensor shared variables (``TensorSharedVariable``, ``ScalarSharedVariable``)
    -> opgraph's ``TensorSharedVariable``."""

    _FIELDS = ("type", "owner", "index", "name", "tag", "container")

    def __setstate__(self, state: dict[str, Any]) -> None:
        fields = {k: state.get(k) for k in self._FIELDS}
        if fields["tag"] is None:
            fields["tag"] = Scratchpad()
        if state.get("default_update") is not None:
            fields["default_update"] = state["default_update"]
        cls = TensorSharedVariable if isinstance(fields["type"], TensorType) else SharedVariable
        _become(self, cls, fields)


_THEANO_CLASSES: dict[tuple[str, str], type] = {
    ("theano.tensor.type", "TensorType"): _TheanoTensorType,
    ("theano.gof.utils", "scratchpad"): _TheanoScratchpad,
    ("theano.gof.link", "Container"): _TheanoContainer,
    ("theano.tensor.sharedvar", "TensorSharedVariable"): _TheanoSharedVariable,
    ("theano.tensor.sharedvar", "ScalarSharedVariable"): _TheanoSharedVariable,
    ("theano.compile.sharedvalue", "SharedVariable"): _TheanoSharedVariable,
}


def map_theano_class(module: str, name: str) -> Any:
    """The opgraph class (or a converting stand-in) for Theano's ``module.name``.

    Raises pickle.UnpicklingError when opgraph has nothing at that path.
    """
    special = _THEANO_CLASSES.get((module, name))
    if special is not None:
        return special
    target = _MODULE_RENAMES.get(module, "opgraph" + module[len("theano") :])
    try:
        return getattr(importlib.import_module(target), name)
    except (ImportError, AttributeError) as exc:
        raise pickle.UnpicklingError(
            f"this pickle was written by Theano and refers to {module}.{name}, which opgraph "
            f"cannot map (looked for {target}.{name}). Theano's compiled functions and graphs "
            "hold Theano internals with no opgraph equivalent. HINT: save the values "
            "(shared.get_value()) or the shared variables with Theano, and rebuild the "
            "function with opgraph."
        ) from exc


def _find_class(unpickler: Any, base: type, module: str, name: str) -> Any:
    if module == "theano" or module.startswith("theano."):
        return map_theano_class(module, name)
    return base.find_class(unpickler, module, name)


class _Unpickler(pickle.Unpickler):
    """The fast unpickler of :func:`load`, reading Theano's class paths as opgraph's."""

    def find_class(self, module: str, name: str) -> Any:
        return _find_class(self, pickle.Unpickler, module, name)


def _load_reduce(self: Any) -> None:
    """REDUCE that retries with the string arguments encoded (Python 2 pickles of arrays)."""
    stack = self.stack
    args = stack.pop()
    func = stack[-1]
    try:
        stack[-1] = func(*args)
    except Exception:
        if self.encoding is not None:
            encoded = tuple(a.encode(self.encoding) if isinstance(a, str) else a for a in args)
            try:
                stack[-1] = func(*encoded)
                return
            except Exception:
                pass
        raise


class CompatUnpickler(pickle._Unpickler):  # type: ignore[name-defined,misc]
    """An Unpickler for old pickles: Python 2 pickles of NumPy arrays, and Theano's classes.

    ::

        with open(fname, "rb") as fp:
            mat = CompatUnpickler(fp, encoding="latin1").load()

    A REDUCE whose call fails is retried with its string arguments encoded with
    ``encoding`` (what NumPy arrays pickled by Python 2 need), and ``theano.*`` classes are
    read as opgraph's (see the module's docstring for what maps).
    """

    dispatch = dict(pickle._Unpickler.dispatch)  # type: ignore[attr-defined]
    dispatch[pickle.REDUCE[0]] = _load_reduce

    def find_class(self, module: str, name: str) -> Any:
        return _find_class(self, pickle._Unpickler, module, name)  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------
# dump / load


def zipadd(func: Callable[[IO[bytes]], Any], zip_file: zipfile.ZipFile, name: str) -> None:
    """Call ``func`` with a writable file object whose bytes become entry ``name`` of
    ``zip_file``."""
    with zip_file.open(name, "w", force_zip64=True) as f:
        func(f)


class PersistentNdarrayID:
    """Persistent ids for :func:`dump`: every ``numpy.ndarray`` goes to its own zip entry.

    An array is written once (``array_0``, ``array_1``...); the pickle refers to it as
    ``ndarray.<entry name>``.
    """

    def __init__(self, zip_file: zipfile.ZipFile) -> None:
        self.zip_file = zip_file
        self.count = 0
        self.seen: dict[int, str] = {}
        self._keep: list[Any] = []  # the arrays seen, so that their ids stay unique

    def _resolve_name(self, obj: Any) -> str:
        name = f"array_{self.count}"
        self.count += 1
        return name

    def __call__(self, obj: Any) -> str | None:
        if type(obj) is np.ndarray:
            if id(obj) not in self.seen:
                name = self._resolve_name(obj)
                zipadd(lambda f: np.lib.format.write_array(f, obj), self.zip_file, name)
                self.seen[id(obj)] = f"ndarray.{name}"
                self._keep.append(obj)
            return self.seen[id(obj)]
        return None


class PersistentSharedVariableID(PersistentNdarrayID):
    """Like :class:`PersistentNdarrayID`, naming a shared variable's value after the variable.

    Parameters
    ----------
    zip_file
        The zip file being written.
    allow_unnamed
        Allow unnamed shared variables (their values become ``array_<n>``); else ValueError.
    allow_duplicates
        Allow several shared variables with one name (``x``, ``x_2``, ``x_3``...); else
        ValueError.
    """

    def __init__(
        self, zip_file: zipfile.ZipFile, allow_unnamed: bool = True, allow_duplicates: bool = True
    ) -> None:
        super().__init__(zip_file)
        self.name_counter: defaultdict[str, int] = defaultdict(int)
        self.ndarray_names: dict[int, str] = {}
        self.allow_unnamed = allow_unnamed
        self.allow_duplicates = allow_duplicates

    def _resolve_name(self, obj: Any) -> str:
        if id(obj) in self.ndarray_names:
            name = self.ndarray_names[id(obj)]
            count = self.name_counter[name]
            self.name_counter[name] += 1
            if count:
                if not self.allow_duplicates:
                    raise ValueError(f"multiple shared variables with the name `{name}` found")
                name = f"{name}_{count + 1}"
            return name
        return super()._resolve_name(obj)

    def __call__(self, obj: Any) -> str | None:
        if isinstance(obj, SharedVariable):
            if obj.name:
                if obj.name == "pkl":
                    raise ValueError("can't pickle shared variable with name `pkl`")
                self.ndarray_names[id(obj.container.storage[0])] = obj.name
            elif not self.allow_unnamed:
                raise ValueError(f"unnamed shared variable, {obj}")
        return super().__call__(obj)


class PersistentNdarrayLoad:
    """The persistent loader of :func:`load`: reads ``ndarray.<name>`` entries (each once).

    ``gpuarray.<name>`` entries (written by Theano with a GPU) load as NumPy arrays when
    ``config.experimental.unpickle_gpu_on_cpu`` is True; else ImportError.
    """

    def __init__(self, zip_file: zipfile.ZipFile) -> None:
        self.zip_file = zip_file
        self.cache: dict[str, Any] = {}

    def __call__(self, persid: Any) -> Any:
        if isinstance(persid, bytes):
            persid = persid.decode("ascii")
        array_type, name = persid.split(".", 1)
        if name in self.cache:
            return self.cache[name]
        with self.zip_file.open(name) as f:
            if array_type == "gpuarray":
                if not config.experimental.unpickle_gpu_on_cpu:
                    raise ImportError(
                        f"the file holds a GPU array ({name}), written by Theano's gpuarray "
                        "backend. HINT: set config.experimental.unpickle_gpu_on_cpu=True "
                        "(THEANO_FLAGS=experimental.unpickle_gpu_on_cpu=True) to load it as a "
                        "NumPy array."
                    )
                warnings.warn(
                    "config.experimental.unpickle_gpu_on_cpu is set to True. Unpickling "
                    "GpuArray as numpy.ndarray",
                    stacklevel=2,
                )
                pickle.load(f)  # the GPU context's name
            value = np.lib.format.read_array(f)
        self.cache[name] = value
        return value


def dump(
    obj: Any,
    file_handler: IO[bytes],
    protocol: int = DEFAULT_PROTOCOL,
    persistent_id: Callable[[zipfile.ZipFile], Callable[[Any], Any]] = PersistentSharedVariableID,
) -> None:
    """Pickle ``obj`` to a zip file, its arrays stored as separate ``.npy``-format entries.

    Parameters
    ----------
    obj
        What to pickle: shared variables, compiled functions, graphs, arrays, containers of
        them...
    file_handler
        A file opened for binary writing (or a path).
    protocol
        The pickle protocol.
    persistent_id
        Called with the zip file; returns the ``persistent_id`` function of the pickler,
        which stores objects as entries of their own (default
        :class:`PersistentSharedVariableID`: arrays, named after their shared variable).

    The zip holds ``pkl`` (the pickle) and the arrays; ``numpy.load`` opens it too.
    """
    with closing(
        zipfile.ZipFile(file_handler, "w", zipfile.ZIP_DEFLATED, allowZip64=True)
    ) as zip_file:

        def func(f: IO[bytes]) -> None:
            p = pickle.Pickler(f, protocol=protocol)
            p.persistent_id = persistent_id(zip_file)  # type: ignore[method-assign]
            p.dump(obj)

        # The pickle is written first into memory: the array entries are added to the zip
        # while pickling, and a zip file takes one open entry at a time.
        buffer = io.BytesIO()
        func(buffer)
        zip_file.writestr("pkl", buffer.getvalue())


def load(
    f: IO[bytes],
    persistent_load: Callable[[zipfile.ZipFile], Callable[[Any], Any]] = PersistentNdarrayLoad,
) -> Any:
    """Load an object written by :func:`dump` (opgraph's or Theano 1.0's).

    Parameters
    ----------
    f
        The zip file, opened for binary reading (or a path).
    persistent_load
        Called with the zip file; returns the unpickler's ``persistent_load`` function
        (must match the ``persistent_id`` used by :func:`dump`).
    """
    with closing(zipfile.ZipFile(f, "r")) as zip_file:
        p = _Unpickler(io.BytesIO(zip_file.read("pkl")))
        p.persistent_load = persistent_load(zip_file)  # type: ignore[method-assign]
        return p.load()
