"""Cube's C kernel for opgraph-backend-c's ``c`` linker.

Imported only by the ``opgraph_c_kernels`` hook, which backend-c calls when its linker first
needs its kernel table: this module may import ``opgraph_c`` because it never loads without it.
"""

from __future__ import annotations

import sys
from typing import Any

from example_plugin.ops import Cube
from opgraph.configdefaults import config
from opgraph_c import PERFORM, CModule

#: Keys the compile cache with the source: bump it when the module must be rebuilt although
#: SOURCE's text is the same (make_cube_thunk changed, or a header the source includes).
CUBE_C_VERSION = 1

#: The dtypes the C loop handles, with their C types. Other dtypes (float16) run perform.
C_TYPES = {"float32": "float", "float64": "double"}

#: The Cython source of the module generated for one dtype ({dtype} and {ctype} filled in).
SOURCE = """\
# cython: language_level=3, boundscheck=False, wraparound=False
# cython: binding=False, auto_pickle=False
# Cube of a {dtype} array: out[i] = (x[i] * x[i]) * x[i], as Cube.perform computes it.
from cpython.buffer cimport PyBUF_ANY_CONTIGUOUS, PyBUF_WRITABLE
from cpython.buffer cimport PyBuffer_Release, PyObject_GetBuffer
from opgraph_c._vm cimport NodeThunk

import numpy as np

ctypedef {ctype} real


cdef void cube_loop(const real* x, real* out, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        out[i] = x[i] * x[i] * x[i]


# The node's thunk. The VM calls its run() through the C vtable; run() calls fast() and,
# when fast() returns 1, the Op's perform on the same input.
cdef class CubeThunk(NodeThunk):
    cdef int fast(self) except -1:
        cdef Py_buffer src, dst
        x = self.arg(0)
        if type(x) is not np.ndarray or not x.flags.aligned:
            return 1  # an ndarray subclass, unaligned memory: perform decides, nothing written
        if not (x.flags.c_contiguous or x.flags.f_contiguous):
            x = np.ascontiguousarray(x)  # strided or transposed view: one contiguous copy
        out = np.empty_like(x)  # a new array, in x's layout (no view_map, no destroy_map)
        PyObject_GetBuffer(x, &src, PyBUF_ANY_CONTIGUOUS)
        PyObject_GetBuffer(out, &dst, PyBUF_ANY_CONTIGUOUS | PyBUF_WRITABLE)
        with nogil:
            cube_loop(<const real*>src.buf, <real*>dst.buf, src.len // sizeof(real))
        PyBuffer_Release(&src)
        PyBuffer_Release(&dst)
        self.set_out(0, out)
        return 0
"""


def cube_c(op: Cube, node: Any) -> CModule | Any:
    """What the ``c`` linker runs for ``node``: the generated module for its dtype, or
    ``PERFORM`` for float16 (C has no float16 arithmetic; NumPy's loop is what we would
    write), so it runs perform without a fallback warning."""
    dtype = node.outputs[0].type.dtype
    ctype = C_TYPES.get(dtype)
    if config.example__verbose:
        print(f"example: {op} {dtype} runs {'C' if ctype else 'perform'}", file=sys.stderr)
    if ctype is None:
        return PERFORM
    source = SOURCE.format(dtype=dtype, ctype=ctype)
    return CModule(f"Cube {dtype}", source, make_thunk=make_cube_thunk)


def make_cube_thunk(module: Any, node: Any, in_cells: list[Any], out_cells: list[Any]) -> Any:
    """The node's thunk, from the compiled module and the node's storage cells."""
    return module.CubeThunk(node, in_cells, out_cells)


def register(registry: Any) -> None:
    """Put Cube's kernel into backend-c's registry (called by the plugin's hook)."""
    registry.register(Cube, cube_c, version=CUBE_C_VERSION)
