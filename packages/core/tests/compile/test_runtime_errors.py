"""An error inside a compiled function names the Op, the input shapes and the user's line."""

from __future__ import annotations

import re

import numpy as np
import pytest
from compile_toys import LINKERS, MODES, Raise, RaiseTwoArg, TwoArgError, ifelse, mode_with

import opgraph.tensor as T
from opgraph.compile import function
from opgraph.configdefaults import config


def _mismatch_function(mode):  # type: ignore[no-untyped-def]
    a = T.dvector("a")
    b = T.dvector("b")
    y = a * b  # the line the error must show
    return function([a, b], y, mode=mode)


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("name", MODES)
def test_shape_mismatch_report(name: str, linker: str) -> None:
    f = _mismatch_function(mode_with(name, linker))
    with pytest.raises(ValueError) as info:
        f(np.ones(3), np.ones(5))
    msg = str(info.value)
    assert "Apply node that caused the error: Elemwise{mul,no_inplace}(a, b)" in msg
    assert "Toposort index: 0" in msg
    assert "Inputs types: [TensorType(float64, vector), TensorType(float64, vector)]" in msg
    assert "Inputs shapes: [(3,), (5,)]" in msg
    assert "Inputs strides: [(8,), (8,)]" in msg
    assert "Inputs values: [array([1., 1., 1.]), array([1., 1., 1., 1., 1.])]" in msg
    assert "Outputs clients: [['output']]" in msg
    assert re.search(r"The node was created at: .*test_runtime_errors\.py:\d+:\s+y = a \* b", msg)
    assert "HINT:" in msg
    assert info.value.__cause__ is not None  # the original error stays chained
    assert info.value.__traceback__ is not None


def test_big_inputs_are_not_shown_and_clients_are_listed() -> None:
    x = T.dvector("x")
    y = Raise("bad value")(x)
    f = function([x], (y * 2).sum())
    with pytest.raises(ValueError, match="bad value") as info:
        f(np.zeros(100))
    msg = str(info.value)
    assert "Inputs values: ['not shown']" in msg
    # The client is the multiplication (fused with the sum's input when optimizers are installed).
    assert re.search(r"Outputs clients: \[\[(Elemwise|Sum)\{", msg)
    assert info.value.__op_instance__.op == Raise("bad value")


def test_exception_verbosity_high_adds_the_trace_and_a_debugprint() -> None:
    x = T.dvector("x")
    f = function([x], Raise("boom")(x))
    with config.change_flags(exception_verbosity="high"), pytest.raises(ValueError) as info:
        f(np.zeros(2))
    msg = str(info.value)
    assert "Backtrace when the node was created:" in msg
    assert "test_runtime_errors.py" in msg and "Debugprint of the apply node:" in msg
    assert "Raise{message='boom'}" in msg


def test_exceptions_that_cannot_be_rebuilt_get_the_report_as_a_note() -> None:
    x = T.dvector("x")
    f = function([x], RaiseTwoArg()(x))
    with pytest.raises(TwoArgError) as info:
        f(np.zeros(2))
    assert info.value.code == 7
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "Apply node that caused the error: RaiseTwoArg(x)" in notes


def test_errors_in_lazy_graphs_are_reported_too() -> None:
    c = T.dscalar("c")
    x = T.dvector("x")
    f = function([c, x], ifelse(c, x, Raise("else failed")(x)))
    with pytest.raises(ValueError) as info:
        f(0.0, [1.0])
    assert "Apply node that caused the error: Raise{message='else failed'}(x)" in str(info.value)
