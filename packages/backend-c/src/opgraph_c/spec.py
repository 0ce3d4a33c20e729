"""What a C kernel entry returns for a node: the Cython source of a module, and its thunk."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

__all__ = [
    "ID",
    "PERFORM",
    "Assembler",
    "BundlePart",
    "CModule",
    "Precompiled",
    "PrecompiledFactory",
    "ThunkFactory",
]


class _Perform:
    """The type of :data:`PERFORM`."""

    def __repr__(self) -> str:
        return "opgraph_c.PERFORM"


#: What a kernel returns when the Op's ``perform`` already is the best implementation (a
#: view such as DimShuffle): it runs without a fallback warning or ``[py-fallback]`` mark.
PERFORM = _Perform()


#: ``make_thunk(module, node, input_cells, output_cells) -> thunk``
ThunkFactory = Callable[[ModuleType, Any, list[list[Any]], list[list[Any]]], Any]


#: ``make_thunk(node, input_cells, output_cells) -> thunk``
PrecompiledFactory = Callable[[Any, list[list[Any]], list[list[Any]]], Any]


@dataclass(frozen=True)
class Precompiled:
    """A kernel compiled when its package was installed: nothing is generated or cached.

    backend-c's BLAS, softmax and view kernels are such thunks (:class:`opgraph_c._vm.CThunk`
    subclasses in the package's extensions), so a function using only them compiles without
    running Cython or the C compiler.

    Parameters
    ----------
    name
        What it computes, for errors and profiles (e.g. ``Gemm float64``).
    make_thunk
        Builds the node's thunk from the node and its input and output storage cells.
    """

    name: str
    make_thunk: PrecompiledFactory


@dataclass(frozen=True)
class CModule:
    """A generated module: its Cython source, compiled and cached by backend-c.

    Parameters
    ----------
    name
        What it computes, for progress lines and errors (e.g. ``Elemwise{exp} float64``).
    source
        The whole ``.pyx`` text. It (with the toolchain and the entry's version) keys the
        cache, so two nodes with the same source share one compiled module.
    make_thunk
        Builds the node's thunk from the loaded module and the node's storage cells. None
        means the module defines ``compute(*inputs)`` returning the output value (a tuple
        for several outputs), called from a Python thunk.
    openmp
        Compile and link with OpenMP (the source uses ``prange``).
    part
        Set when the kernel may be compiled in one module with others (then ``source`` is
        the part alone, and ``make_thunk`` receives an object whose ``ELEMWISE_KERNEL``-style
        capsule attribute is this part's, whichever module holds it).
    """

    name: str
    source: str
    make_thunk: ThunkFactory | None = None
    openmp: bool = False
    part: BundlePart | None = None


#: Placeholder for a kernel's suffix in a :class:`BundlePart` (empty alone, ``_<k>`` in a
#: bundle).
ID = "@ID@"

#: ``assemble(parts, suffixes) -> source``: the ``.pyx`` of one module holding ``parts``.
Assembler = Callable[[Sequence["BundlePart"], Sequence[str]], str]


@dataclass(frozen=True)
class BundlePart:
    """A kernel that can share a module with others (backend-c's own elementwise kernels).

    Each text holds the placeholder ``@ID@`` where the kernel's names take their suffix
    (empty in a module of its own). The cache compiles the kernels a function is missing
    into one module, which costs one Cython and one compiler run instead of one each.

    Parameters
    ----------
    c_code
        C definitions (the verbatim block of ``cdef extern from *``).
    cython_decl
        The Cython declaration of the C function the loops call.
    cython_code
        The loops (Cython), with the Op and node named in a comment at the top.
    table
        Module-level Cython filling the kernel table and the capsule named ``capsule``.
    dtypes
        The dtypes whose C typedefs the module declares.
    openmp
        The loops use ``prange``.
    capsule
        The capsule's name, with the placeholder.
    assemble
        Builds the source of a module holding several such parts (the cache calls it for
        parts with the same ``assemble``; it is the code generator's, so the cache needs
        none).
    """

    c_code: str
    cython_decl: str
    cython_code: str
    table: str
    dtypes: frozenset[str]
    openmp: bool
    capsule: str
    assemble: Assembler
