"""``opgraph_c_kernels``: a package supplies C kernels for its own Ops through the hook."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile.debugmode import BadThunkOutput, DebugMode
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.graph.basic import Apply
from opgraph.graph.op import Op
from opgraph.link.dispatch import KernelFallbackWarning
from opgraph.plugins import PluginError, get_plugin_manager, hookimpl
from opgraph.testing import assert_allclose
from opgraph_c import PERFORM, CModule
from opgraph_c.registry import get_registry

CUBE_SOURCE = """\
# cython: language_level=3, boundscheck=False, wraparound=False
# Test kernel: Op Cube (x ** 3 of a float64 array), raw pointers, no memoryviews.
import numpy as np


def compute(x):
    x = np.ascontiguousarray(x, dtype=np.float64)
    out = np.empty_like(x)
    cdef double* src = <double*><size_t>x.ctypes.data
    cdef double* dst = <double*><size_t>out.ctypes.data
    cdef Py_ssize_t i, n = x.size
    for i in range(n):
        dst[i] = src[i] * src[i] * {power}
    return out
"""


class _Float64Op(Op):
    __props__ = ()

    def make_node(self, x: Any) -> Apply:
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])


class Cube(_Float64Op):
    """Elementwise x ** 3."""

    def perform(self, node: Apply, inputs: Any, output_storage: Any) -> None:
        output_storage[0][0] = inputs[0] ** 3


class BrokenCube(Cube):
    """Same meaning; its C kernel (below) is wrong on purpose, for DEBUG_MODE to catch."""


def cube_c(op: Cube, node: Apply) -> CModule | None:
    if node.inputs[0].type.dtype != "float64":
        return None
    return CModule("Cube (float64)", CUBE_SOURCE.format(power="src[i]"))


def broken_cube_c(op: BrokenCube, node: Apply) -> CModule:
    return CModule("BrokenCube (float64)", CUBE_SOURCE.format(power="2.0"))


class CubeKernelsPlugin:
    """A plugin object, as a package's entry-point module would be."""

    @hookimpl(optionalhook=True)
    def opgraph_c_kernels(self, registry: Any) -> None:
        registry.register(Cube, cube_c, version=1, owner="test-plugin")
        registry.register(BrokenCube, broken_cube_c, version=1, owner="test-plugin")


@pytest.fixture
def plugin() -> Iterator[CubeKernelsPlugin]:
    pm = get_plugin_manager()
    registry = get_registry()
    plugin = CubeKernelsPlugin()
    pm.register(plugin, name="test-c-kernels")
    try:
        yield plugin
    finally:
        pm.unregister(plugin)
        registry.unregister(Cube)
        registry.unregister(BrokenCube)


def test_hook_is_declared_by_backend_c() -> None:
    pm = get_plugin_manager()
    assert pm.hook.opgraph_c_kernels.has_spec()


def test_plugin_kernel_runs_in_the_c_linker(
    plugin: CubeKernelsPlugin, rng: np.random.Generator
) -> None:
    x = T.dvector("x")
    f = function([x], Cube()(x) + 1, mode=Mode(linker="c"), profile=True)
    xv = rng.standard_normal(10)
    assert_allclose(f(xv), xv**3 + 1)
    impl = {type(n.op).__name__: i for n, i in f.profile.apply_impl.items()}
    assert impl["Cube"] == "c"
    kernel = get_registry().lookup(Cube)
    assert kernel is not None and kernel.owner == "test-plugin"


class PerformCube(Cube):
    """Same meaning; its entry chooses ``perform`` on purpose (``PERFORM``)."""


def test_an_entry_returning_perform_shows_as_py_without_a_fallback_mark() -> None:
    registry = get_registry()
    registry.register(PerformCube, lambda op, node: PERFORM, version=1, owner="test-plugin")
    try:
        x = T.dvector("x")
        with warnings.catch_warnings():
            warnings.simplefilter("error", KernelFallbackWarning)
            f = function([x], PerformCube()(x), mode=Mode(linker="c"), profile=True)
        assert_allclose(f(np.arange(3.0)), np.arange(3.0) ** 3)
        impl = {type(n.op).__name__: i for n, i in f.profile.apply_impl.items()}
        assert impl["PerformCube"] == "Py" and not f.profile.py_fallback
    finally:
        registry.unregister(PerformCube)


def test_plugin_kernel_returning_none_falls_back(plugin: CubeKernelsPlugin) -> None:
    x = T.fvector("x")
    f = function([x], Cube()(x), mode=Mode(linker="c"), profile=True)
    assert_allclose(f(np.arange(3, dtype="float32")), np.arange(3, dtype="float32") ** 3)
    assert [type(n.op).__name__ for n in f.profile.py_fallback] == ["Cube"]


def test_debug_mode_catches_a_wrong_kernel(plugin: CubeKernelsPlugin) -> None:
    x = T.dvector("x")
    good = function([x], Cube()(x), mode=DebugMode(linker="c", optimizer="None"))
    assert_allclose(good(np.arange(4.0)), np.arange(4.0) ** 3)
    bad = function([x], BrokenCube()(x), mode=DebugMode(linker="c", optimizer="None"))
    with pytest.raises(BadThunkOutput, match="the c kernel"):
        bad(np.arange(4.0))


def test_conflicting_registration_names_both_owners(plugin: CubeKernelsPlugin) -> None:
    with pytest.raises(PluginError, match="test-plugin and other-plugin"):
        get_registry().register(Cube, broken_cube_c, version=1, owner="other-plugin")
