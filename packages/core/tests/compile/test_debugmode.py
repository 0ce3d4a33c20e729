"""DEBUG_MODE catches wrong kernels, hidden in-place writes and views, bad values, bad rewrites."""

from __future__ import annotations

import numpy as np
import pytest
from compile_toys import Double, Noisy, SilentInplace, SneakyView, WrongDtype

import opgraph.tensor as T
from opgraph.compile import function
from opgraph.compile.debugmode import (
    BadDestroyMap,
    BadOptimization,
    BadRewrite,
    BadThunkOutput,
    BadViewMap,
    DebugMode,
    DebugModeError,
    InvalidValueError,
)
from opgraph.link.basic import VMLinker
from opgraph.link.dispatch import KernelRegistry


def test_a_correct_graph_passes() -> None:
    x = T.dvector("x")
    f = function([x], [(x * 2).sum(), T.exp(-x)], mode="DEBUG_MODE")
    total, e = f([1.0, 2.0])
    assert total == 6.0
    np.testing.assert_allclose(e, np.exp([-1.0, -2.0]))


def test_input_modified_without_destroy_map() -> None:
    x = T.dvector("x")
    f = function([x], SilentInplace()(x), mode="DEBUG_MODE")
    with pytest.raises(BadDestroyMap) as info:
        f([1.0])
    assert "modified its input 0" in str(info.value) and "destroy_map" in str(info.value)
    # the other modes do not check (and the argument is the caller's array)
    silent = function([x], SilentInplace()(x), mode="FAST_RUN")
    np.testing.assert_array_equal(silent(np.array([1.0])), [2.0])


def test_view_without_view_map() -> None:
    x = T.dvector("x")
    f = function([x], SneakyView()(x) * 1, mode="DEBUG_MODE")
    with pytest.raises(BadViewMap, match="shares memory with input 0"):
        f([1.0])


def test_output_of_the_wrong_dtype() -> None:
    x = T.dvector("x")
    f = function([x], WrongDtype()(x), mode="DEBUG_MODE")
    with pytest.raises(InvalidValueError) as info:
        f([1.0])
    msg = str(info.value)
    assert "output 0 of WrongDtype(x)" in msg and "float32" in msg
    assert "test_debugmode.py" in msg


def test_nan_is_an_invalid_value_unless_check_isfinite_is_off() -> None:
    x = T.dvector("x")
    from opgraph.tensor.math import log

    y = log(x)
    with pytest.raises(InvalidValueError, match="NaN or inf"):
        function([x], y, mode="DEBUG_MODE")([-1.0])
    assert np.isnan(function([x], y, mode=DebugMode(check_isfinite=False))([-1.0])).all()


def test_non_deterministic_perform() -> None:
    x = T.dvector("x")
    with pytest.raises(BadThunkOutput, match="second perform"):
        function([x], Noisy()(x), mode="DEBUG_MODE")([1.0])


def test_a_wrong_kernel_is_caught_against_perform() -> None:
    reg = KernelRegistry("toy")
    reg.register(Double, lambda op, node: lambda x: 3 * x)
    x = T.dvector("x")
    f = function([x], Double()(x), mode=DebugMode(linker=VMLinker(kernels=reg)))
    with pytest.raises(BadThunkOutput) as info:
        f([1.0])
    msg = str(info.value)
    assert "differs between perform and the toy kernel" in msg
    assert info.value.node.op == Double()


class _ReplaceDoubleByTriple:
    """A deliberately wrong rewrite: ``Double(x) -> 3 * x``."""

    name = "local_bad_double"
    location = "test_debugmode.py"

    def rewrite(self, fgraph):  # type: ignore[no-untyped-def]
        for node in fgraph.toposort():
            if isinstance(node.op, Double):
                fgraph.replace(node.outputs[0], node.inputs[0] * 3, reason=self)


class _ReplaceDoubleByAdd(_ReplaceDoubleByTriple):
    """A correct rewrite: ``Double(x) -> x + x``."""

    name = "local_good_double"

    def rewrite(self, fgraph):  # type: ignore[no-untyped-def]
        for node in fgraph.toposort():
            if isinstance(node.op, Double):
                x = node.inputs[0]
                fgraph.replace(node.outputs[0], x + x, reason=self)


def test_a_rewrite_that_changes_values_is_reported_with_its_name() -> None:
    x = T.dvector("x")
    f = function([x], Double()(x) + 1, mode=DebugMode(optimizer=_ReplaceDoubleByTriple()))
    assert "Double" not in str(f.maker.fgraph.toposort())
    with pytest.raises(BadRewrite) as info:
        f([1.0, 2.0])
    msg = str(info.value)
    assert "local_bad_double" in msg and "Double(x)" in msg
    assert info.value.reason.name == "local_bad_double"
    assert BadOptimization is BadRewrite and isinstance(info.value, DebugModeError)


def test_a_correct_rewrite_passes() -> None:
    x = T.dvector("x")
    f = function([x], Double()(x) + 1, mode=DebugMode(optimizer=_ReplaceDoubleByAdd()))
    np.testing.assert_array_equal(f([1.0, 2.0]), [3.0, 5.0])


def test_updates_are_not_applied_when_a_check_fails() -> None:
    from opgraph.compile import shared

    s = shared(np.zeros(1), name="s")
    x = T.dvector("x")
    f = function([x], [], updates=[(s, s + WrongDtype()(x))], mode="DEBUG_MODE")
    with pytest.raises(InvalidValueError):
        f([1.0])
    assert s.get_value()[0] == 0.0
