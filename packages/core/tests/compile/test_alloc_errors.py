"""An allocation that fails inside a compiled function says what, how much and where
(issue 20, defect 6).

Before: ``T.alloc(0., 10**7, 10**6)`` evaluated raised NumPy's bare ``MemoryError`` ("Unable
to allocate 36.4 TiB for an array with shape ...": no node, no line); the node and the user's
line were only in ``__notes__``. Now the message itself names the node, the requested shape,
dtype and bytes, and the line that built the node, on every linker.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from compile_toys import _Unary

import opgraph.tensor as T
from opgraph.compile import function
from opgraph.compile.mode import Mode
from opgraph.testing.checks import installed_linkers

LINKERS = ["py", "vm", "c"]
HUGE = (10**7, 10**6)  # 10^13 elements: 80 TB of float64, never allocatable


def mode_for(linker: str) -> Mode:
    if linker not in installed_linkers():
        pytest.skip(f"linker {linker!r} is not installed")
    return Mode(linker=linker)


def created_at(msg: str) -> str:
    found = re.search(r"The node was created at: (.*)", msg)
    assert found, msg
    return found.group(1)


@pytest.mark.parametrize("linker", LINKERS)
def test_alloc_of_a_constant_huge_shape(linker: str) -> None:
    mode = mode_for(linker)
    z = T.alloc(np.float64(0.0), *HUGE)  # the line the error must show
    f = function([], z, mode=mode)
    with pytest.raises(MemoryError) as info:
        f()
    err = info.value
    msg = str(err)
    first = msg.splitlines()[0]
    assert "Alloc" in first, first
    assert "shape (10000000, 1000000)" in first and "float64" in first
    assert "80,000,000,000,000 bytes" in first and "72.8 TiB" in first
    assert re.search(r"test_alloc_errors\.py:\d+:\s+z = T\.alloc\(", created_at(msg))
    assert "Apply node that caused the error: Alloc" in msg
    assert err.shape == HUGE and err.dtype == np.dtype("float64")
    assert err.nbytes == 8 * 10**13
    assert isinstance(err.__cause__, MemoryError)  # NumPy's own error stays chained
    assert err.__op_instance__.op == z.owner.op  # type: ignore[attr-defined]


@pytest.mark.parametrize("linker", LINKERS)
def test_shape_given_at_call_time(linker: str) -> None:
    mode = mode_for(linker)
    n = T.lscalar("n")
    m = T.lscalar("m")
    x = T.fvector("x")
    big = T.zeros((n, m), dtype="float32") + x  # the line the error must show
    f = function([n, m, x], big.sum(), mode=mode)
    assert float(f(2, 3, np.ones(3, dtype="float32"))) == 6.0
    with pytest.raises(MemoryError) as info:
        f(10**7, 10**6, np.ones(10**6, dtype="float32"))
    first = str(info.value).splitlines()[0]
    assert "shape (10000000, 1000000)" in first and "float32" in first, first
    assert "40,000,000,000,000 bytes" in first
    assert re.search(r"test_alloc_errors\.py:\d+:\s+big = ", created_at(str(info.value)))


class _OutOfMemory(_Unary):
    """Raises a bare ``MemoryError()`` (what a C extension's failed malloc gives)."""

    def perform(self, node: Any, inputs: Any, output_storage: Any) -> None:
        raise MemoryError()


@pytest.mark.filterwarnings("ignore::UserWarning")  # the C linker runs the toy Op's perform
@pytest.mark.parametrize("linker", LINKERS)
def test_a_bare_memory_error_still_names_the_node_and_line(linker: str) -> None:
    mode = mode_for(linker)
    x = T.dvector("x")
    y = _OutOfMemory()(x)  # the line the error must show
    f = function([x], y, mode=mode)
    with pytest.raises(MemoryError) as info:
        f(np.ones(3))
    msg = str(info.value)
    assert "_OutOfMemory" in msg.splitlines()[0]
    assert "size is unknown" in msg.splitlines()[0]
    assert re.search(r"test_alloc_errors\.py:\d+:\s+y = _OutOfMemory\(\)", created_at(msg))


def test_other_errors_keep_their_class_and_message() -> None:
    x = T.dvector("x")
    f = function([x], T.alloc(x, 2, 4))
    with pytest.raises(ValueError) as info:
        f(np.ones(3))
    assert not isinstance(info.value, MemoryError)
    assert "Apply node that caused the error" in str(info.value)
