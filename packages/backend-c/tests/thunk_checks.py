"""Helpers shared by the tests that run one node's precompiled thunk against ``perform``
(test_c_structure, test_c_joining, test_c_advanced): inputs in every layout, byte-exact
twins of them, a node's storage cells, and ``perform``'s outputs."""

from __future__ import annotations

import copy
import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Constant, Variable


def layouts(v: np.ndarray) -> list[np.ndarray]:
    """``v`` C-contiguous, Fortran-ordered, and as a strided view (same shape and values)."""
    out = [v]
    if v.ndim:
        out.append(np.asfortranarray(v))
        big = np.zeros(tuple(2 * s for s in v.shape), dtype=v.dtype)
        strided = big[tuple(slice(None, None, 2) for _ in v.shape)]
        strided[...] = v
        out.append(strided)
    return out


def twin(v: Any) -> Any:
    """A copy of ``v`` with the same shape, strides and flags (deepcopy makes it contiguous)."""
    if not isinstance(v, np.ndarray) or v.size == 0:
        return copy.deepcopy(v)
    lo, hi = np.lib.array_utils.byte_bounds(v)
    buf = np.frombuffer(bytearray(ctypes.string_at(lo, hi - lo)), dtype=np.uint8)
    out = np.ndarray(v.shape, v.dtype, buffer=buf, offset=v.ctypes.data - lo, strides=v.strides)
    out.flags.writeable = v.flags.writeable
    return out


def node_storage(node: Apply, values: Sequence[Any]) -> dict[Variable, list[Any]]:
    """Storage cells of ``node``: its inputs holding ``values`` (constants filled in), empty
    outputs."""
    storage: dict[Variable, list[Any]] = {}
    it = iter(values)
    for v in node.inputs:
        storage[v] = [v.data if isinstance(v, Constant) else next(it)]
    for o in node.outputs:
        storage[o] = [None]
    return storage


def perform_outputs(node: Apply, values: Sequence[Any]) -> list[Any]:
    """``node``'s outputs computed by its Op's ``perform`` on ``values``."""
    it = iter(values)
    inputs = [v.data if isinstance(v, Constant) else next(it) for v in node.inputs]
    out: list[list[Any]] = [[None] for _ in node.outputs]
    node.op.perform(node, inputs, out)
    return [c[0] for c in out]
