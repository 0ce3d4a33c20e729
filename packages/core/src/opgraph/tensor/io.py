"""Theano's ``tensor.io``: load a ``.npy`` array from disk as an Op (``load``).

Theano 1.0 also had MPI send/receive Ops here (built on mpi4py, for splitting one graph
between processes). opgraph does not distribute graphs: those names exist and raise an
error saying what to use instead (mpi4py on the values a compiled function takes and
returns).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

import numpy as np

from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.op import Op
from opgraph.graph.type import Generic, generic
from opgraph.tensor.type import TensorType

__all__ = [
    "LoadFromDisk",
    "MPIRecv",
    "MPIRecvWait",
    "MPISend",
    "MPISendWait",
    "irecv",
    "isend",
    "load",
    "mpi_send_wait_key",
    "mpi_tag_key",
    "recv",
    "send",
]


class LoadFromDisk(Op):
    """Load a ``.npy`` array of a known dtype and broadcastable pattern from a path.

    ``mmap_mode`` is None (read the file) or ``'c'`` (map it copy-on-write). The path is a
    string constant or a variable of the generic type; a file of another dtype, or a
    ``.npz`` archive, raises at run time.
    """

    __props__ = ("dtype", "broadcastable", "mmap_mode")

    def __init__(self, dtype: Any, broadcastable: Sequence[bool], mmap_mode: str | None = None):
        self.dtype = np.dtype(dtype)
        self.broadcastable = tuple(bool(b) for b in broadcastable)
        if mmap_mode not in (None, "c"):
            raise ValueError(
                f"The only supported values for mmap_mode are None and 'c', got {mmap_mode!r}"
            )
        self.mmap_mode = mmap_mode

    def make_node(self, path: Any) -> Apply:
        if isinstance(path, str):
            path = Constant(generic, path)
        if not isinstance(path, Variable) or not isinstance(path.type, Generic):
            raise TypeError(
                f"{self}: the path must be a string or a generic variable, got {path!r}"
            )
        out = TensorType(str(self.dtype), self.broadcastable)()
        return Apply(self, [path], [out])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        path = str(inputs[0])
        if path.split(".")[-1] == "npz":
            raise ValueError(f"Expected a .npy file, got {path} instead")
        result = np.load(path, mmap_mode=self.mmap_mode)
        if result.dtype != self.dtype:
            raise TypeError(f"Expected an array of type {self.dtype}, got {result.dtype} instead")
        if result.ndim != len(self.broadcastable):
            raise ValueError(
                f"{self}: expected an array of {len(self.broadcastable)} dimension(s), got "
                f"shape {result.shape} from {path}"
            )
        output_storage[0][0] = result

    def __str__(self) -> str:
        return (
            f"Load{{dtype: {self.dtype}, broadcastable: {self.broadcastable}, "
            f"mmep: {self.mmap_mode}}}"
        )


def load(path: Any, dtype: Any, broadcastable: Sequence[bool], mmap_mode: str | None = None):
    """Load an array from a ``.npy`` file (``path``: a string or generic variable).

    >>> x = load("/path/to/file.npy", "int64", (False,))
    >>> y = x * 2
    >>> fn = opgraph.function([], y)
    """
    return LoadFromDisk(dtype, broadcastable, mmap_mode)(path)


_MPI_HINT = (
    "opgraph does not split a graph between MPI processes: Theano's tensor.io.{name} "
    "(built on mpi4py) has no equivalent. Compile one function per process and exchange "
    "its inputs and outputs with mpi4py (comm.Send / comm.Recv on the NumPy arrays)."
)


def _no_mpi(name: str) -> NoReturn:
    raise RuntimeError(_MPI_HINT.format(name=name))


class _NoMPIOp(Op):
    """Base of Theano's MPI Ops: constructing one raises an error naming what to use."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _no_mpi(type(self).__name__)


class MPIRecv(_NoMPIOp):
    """Theano's asynchronous MPI receive: not available (see the module's documentation)."""


class MPIRecvWait(_NoMPIOp):
    """Theano's wait on an MPI receive: not available (see the module's documentation)."""


class MPISend(_NoMPIOp):
    """Theano's asynchronous MPI send: not available (see the module's documentation)."""


class MPISendWait(_NoMPIOp):
    """Theano's wait on an MPI send: not available (see the module's documentation)."""


def isend(var: Any, dest: Any, tag: Any) -> NoReturn:
    """Theano's non-blocking MPI send: raises, naming what to use instead."""
    _no_mpi("isend")


def send(var: Any, dest: Any, tag: Any) -> NoReturn:
    """Theano's blocking MPI send: raises, naming what to use instead."""
    _no_mpi("send")


def irecv(shape: Any, dtype: Any, source: Any, tag: Any) -> NoReturn:
    """Theano's non-blocking MPI receive: raises, naming what to use instead."""
    _no_mpi("irecv")


def recv(shape: Any, dtype: Any, source: Any, tag: Any) -> NoReturn:
    """Theano's blocking MPI receive: raises, naming what to use instead."""
    _no_mpi("recv")


_MPI_OPS = (MPIRecv, MPIRecvWait, MPISend, MPISendWait)


def mpi_send_wait_key(a: Apply) -> int:
    """Schedule key: wait as long as possible on waits, start sends/receives early.

    No node of opgraph is an MPI Op, so every node gets 0 (Theano's key for the others).
    """
    if isinstance(a.op, MPIRecvWait | MPISendWait):
        return 1
    if isinstance(a.op, MPIRecv | MPISend):
        return -1
    return 0


def mpi_tag_key(a: Apply) -> int:
    """Schedule key breaking MPI ties by tag (lower first); 0 for every other node."""
    if isinstance(a.op, _MPI_OPS):
        return int(a.op.tag)
    return 0
