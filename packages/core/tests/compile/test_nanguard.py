"""NanGuardMode stops at the node producing NaN/inf/big values, naming it and its line."""

from __future__ import annotations

import re

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile import function
from opgraph.compile.nanguardmode import NanGuardError, NanGuardMode
from opgraph.tensor.math import log


def test_nan_is_reported_with_the_node_and_the_users_line() -> None:
    x = T.dvector("x")
    y = log(x)  # produces NaN for negative inputs
    f = function([x], y * 2, mode=NanGuardMode())
    with pytest.raises(AssertionError) as info, np.errstate(invalid="ignore"):
        f([-1.0])
    assert isinstance(info.value, NanGuardError)
    msg = str(info.value)
    assert "NaN detected in output 0" in msg and "log" in msg
    assert re.search(r"test_nanguard\.py:\d+:\s+y = log\(x\)", msg)


def test_inf_and_big_values() -> None:
    x = T.dvector("x")
    f = function([x], T.exp(x), mode="NanGuardMode")
    with pytest.raises(NanGuardError, match="Inf"), np.errstate(over="ignore"):
        f([1000.0])
    np.testing.assert_allclose(f([30.0]), np.exp([30.0]))
    g = function([x], T.exp(x), mode=NanGuardMode(big_is_error=True))
    with pytest.raises(NanGuardError, match="Big value"):
        g([30.0])
    h = function([x], T.exp(x), mode=NanGuardMode(inf_is_error=False))
    with np.errstate(over="ignore"):
        assert np.isinf(h([1000.0])).all()
