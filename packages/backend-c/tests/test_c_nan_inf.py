"""IEEE semantics survive the vectorising flags: NaN, inf, signed results of libm calls."""

from __future__ import annotations

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.testing import assert_allclose

SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1e308, -1e-310, 710.0, -750.0]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_special_values_unfused(dtype: str) -> None:
    x = T.TensorType(dtype, (False,))("x")
    outs = {
        "exp": T.exp(x),
        "log": T.log(x),
        "sqrt": T.sqrt(x),
        "tanh": T.tanh(x),
        "sin": T.sin(x),
        "isnan": T.isnan(x),
        "isinf": T.isinf(x),
        "sgn": T.sgn(x),
        "maximum": T.maximum(x, 0),
        "minimum": T.minimum(x, 0),
        "sigmoid": T.sigmoid(x),
        "softplus": T.softplus(x),
        "floor": T.floor(x),
    }
    with np.errstate(over="ignore"):
        xv = np.array(SPECIAL, dtype=dtype)
    c = function([x], list(outs.values()), mode=Mode(linker="c", optimizer="None"))
    with np.errstate(all="ignore"):
        expected = [
            np.exp(xv),
            np.log(xv),
            np.sqrt(xv),
            np.tanh(xv),
            np.sin(xv),
            np.isnan(xv),
            np.isinf(xv),
            np.sign(xv),
            np.maximum(xv, 0),
            np.minimum(xv, 0),
            1 / (1 + np.exp(-xv)),
            np.logaddexp(np.zeros((), dtype), xv),
            np.floor(xv),
        ]
    for name, got, exp in zip(outs, c(xv), expected, strict=True):
        assert_allclose(got, exp.astype(got.dtype), err_msg=name)


def test_documented_identities() -> None:
    x = T.dvector("x")
    f = function([x], [T.exp(x), T.log(x)], mode=Mode(linker="c", optimizer="None"))
    e, l = f(np.array([-np.inf, 0.0, np.inf, np.nan]))
    assert e[0] == 0.0 and e[2] == np.inf and np.isnan(e[3])
    assert l[1] == -np.inf and l[2] == np.inf and np.isnan(l[3])
    (neg_log,) = f(np.array([-1.0]))[1:]
    assert np.isnan(neg_log[0])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_loop_keeps_nan_checks(dtype: str) -> None:
    """isnan/isinf inside a vectorised fused loop (no -ffinite-math-only)."""
    x = T.TensorType(dtype, (False,))("x")
    out = T.switch(T.isnan(x), 0, T.exp(x)) + T.isinf(T.exp(x) * 2)
    f = function([x], out, mode=Mode(linker="c", optimizer="fast_run"))
    assert any("Composite" in str(n.op) for n in f.maker.fgraph.toposort())
    xv = np.array([np.nan, 1.0, 1000.0, -np.inf] * 64, dtype=dtype)  # long enough for SIMD
    with np.errstate(all="ignore"):
        expected = np.where(np.isnan(xv), 0, np.exp(xv)) + np.isinf(np.exp(xv) * 2)
    assert_allclose(f(xv), expected.astype(dtype))


def test_inf_propagation_in_arithmetic() -> None:
    x, y = T.dvector("x"), T.dvector("y")
    f = function([x, y], [x * y, x - y, x / y], mode=Mode(linker="c", optimizer="None"))
    xv = np.array([np.inf, np.inf, 0.0, 1.0, -1.0])
    yv = np.array([0.0, np.inf, 0.0, 0.0, 0.0])
    with np.errstate(all="ignore"):
        for got, exp in zip(f(xv, yv), [xv * yv, xv - yv, xv / yv], strict=True):
            assert_allclose(got, exp)
