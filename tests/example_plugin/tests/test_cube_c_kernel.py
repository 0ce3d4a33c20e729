"""Cube's C kernel (backend-c's ``opgraph_c_kernels`` hook): it is used, gives perform's
values bit for bit in every layout, and leaves to perform what it does not cover."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from example_plugin import Cube, cube
from opgraph.compile.debugmode import DebugMode
from opgraph.compile.mode import Mode
from opgraph.testing import compare_linkers, installed_linkers

if "c" not in installed_linkers():
    pytest.skip("opgraph-backend-c is not installed: no c linker", allow_module_level=True)

from example_plugin.c_kernels import CUBE_C_VERSION
from opgraph.link.dispatch import KernelFallbackWarning
from opgraph_c.registry import get_registry


def perform_value(x: np.ndarray) -> np.ndarray:
    """What Cube.perform gives for ``x``."""
    cell: list[Any] = [None]
    Cube().perform(None, [x], [cell])  # type: ignore[arg-type]
    return cell[0]


def compiled(dtype: str, ndim: int) -> Any:
    """A c-linker function computing cube(x) for inputs of ``dtype`` and ``ndim``."""
    x = T.tensor(dtype=dtype, shape=(None,) * ndim, name="x")
    return opgraph.function([x], cube(x), mode=Mode(linker="c"))


def layouts(dtype: str) -> list[np.ndarray]:
    """The values a kernel meets: C and Fortran order, strided and reversed views, a
    read-only array, no elements, 0-d."""
    a = np.random.default_rng(1).standard_normal((5, 6)).astype(dtype)
    frozen = a.copy()
    frozen.flags.writeable = False
    return [a, np.asfortranarray(a), a[::2, 1::2], a[::-1], frozen, a[:0], a[2, 3, None, None]]


def test_the_hook_registered_the_kernel_with_its_version_and_owner() -> None:
    kernel = get_registry().lookup(Cube)
    assert kernel is not None
    assert kernel.version == CUBE_C_VERSION
    assert kernel.owner == "opgraph-example-plugin"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_values_match_perform_bit_for_bit_in_every_layout(dtype: str) -> None:
    f = compiled(dtype, 2)
    (thunk,) = f.fn.thunks
    assert type(thunk).__name__ == "CubeThunk"  # the generated C thunk, not perform
    for x in layouts(dtype):
        before = x.copy()
        got, want = f(x), perform_value(x)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        assert not np.shares_memory(got, x)  # a new array, as perform's
        np.testing.assert_array_equal(x, before)  # the input is left alone
    assert thunk.perform_calls == 0  # every call ran the C loop


def test_a_0d_input() -> None:
    f = compiled("float64", 0)
    assert f(np.array(-1.5)) == -3.375
    assert f.fn.thunks[0].perform_calls == 0


def test_unaligned_memory_and_ndarray_subclasses_go_to_perform() -> None:
    f = compiled("float64", 1)
    (thunk,) = f.fn.thunks
    raw = np.zeros(3 * 8 + 1, dtype=np.uint8)
    unaligned = np.frombuffer(raw.data, dtype=np.float64, count=3, offset=1)
    assert not unaligned.flags.aligned
    np.testing.assert_array_equal(f(unaligned), perform_value(unaligned))
    assert thunk.perform_calls == 1
    thunk.inputs[0][0] = np.array([1.0, 2.0]).view(np.recarray)  # no Function call makes one
    thunk()
    np.testing.assert_array_equal(thunk.outputs[0][0], [1.0, 8.0])
    assert thunk.perform_calls == 2


def test_float16_runs_perform_on_purpose_without_a_warning() -> None:
    x = T.tensor(dtype="float16", shape=(None,), name="x")
    with warnings.catch_warnings():
        warnings.simplefilter("error", KernelFallbackWarning)
        f = opgraph.function([x], cube(x), mode=Mode(linker="c"), profile=True)
    value = np.array([0.5, -2.0], dtype="float16")
    np.testing.assert_array_equal(f(value), perform_value(value))
    assert not f.profile.py_fallback


def test_the_profile_names_the_c_backend() -> None:
    x = T.dvector("x")
    f = opgraph.function([x], cube(x) + 1, mode=Mode(linker="c"), profile=True)
    f(np.arange(3.0))
    impl = {type(n.op).__name__: i for n, i in f.profile.apply_impl.items()}
    assert impl["Cube"] == "c"
    assert not f.profile.py_fallback


def test_compare_linkers_and_debug_mode() -> None:
    x = T.dmatrix("x")
    y = cube(x.T) * 2  # the kernel gets a transposed view
    value = np.random.default_rng(2).standard_normal((3, 4))
    compare_linkers([x], [y], [value], linkers=("py", "c", "example"))
    g = opgraph.function([x], y, mode=DebugMode(linker="c"))  # C thunk checked against perform
    np.testing.assert_allclose(g(value), 2 * value.T**3)


def test_the_verbose_flag_prints_the_choice(capsys: pytest.CaptureFixture[str]) -> None:
    x = T.fvector("x")
    with opgraph.config.change_flags(example__verbose=True):
        opgraph.function([x], cube(x), mode=Mode(linker="c"))
    assert "example: Cube float32 runs C" in capsys.readouterr().err
