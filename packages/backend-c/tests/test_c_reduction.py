"""Sum, Prod, max and min reductions through the ``c`` linker, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import opgraph.scalar.basic as ps
import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.tensor.elemwise import CAReduce
from opgraph.testing import assert_allclose

AXES = [None, 1, (0, 2)]


@pytest.mark.parametrize("dtype", ["float64", "int32", "bool"])
def test_reductions_over_axes(dtype: str, rng: np.random.Generator) -> None:
    x = T.TensorType(dtype, (False, False, False))("x")
    outputs = []
    xv = (rng.standard_normal((3, 4, 5)) * 3).astype(dtype)
    for axis in AXES if dtype == "float64" else [(0, 2)]:  # few kernels: each is a module
        outputs += [T.sum(x, axis=axis), CAReduce(ps.maximum, axis)(x)]
        if dtype == "float64":
            outputs += [CAReduce(ps.minimum, axis)(x), T.prod(x, axis=axis)]
    f = function([x], outputs, mode=Mode(linker="c", optimizer="None"))
    ref = function([x], outputs, mode=Mode(linker="py", optimizer="None"))
    kinds = {type(n.op).__name__: type(t).__name__ for n, t in zip(f.fn.nodes, f.fn.thunks)}
    assert not any(getattr(t, "py_fallback", False) for t in f.fn.thunks), kinds
    for layout in (xv, xv.transpose(2, 0, 1).copy().transpose(1, 2, 0), xv[:, ::2, ::-1]):
        for got, exp in zip(f(layout), ref(layout), strict=True):
            assert got.dtype == exp.dtype and got.shape == exp.shape
            assert_allclose(got, exp)


def test_keepdims_acc_dtype_and_nan() -> None:
    x = T.fmatrix("x")
    s = T.sum(x, axis=1, keepdims=True, acc_dtype="float64")
    m = T.max(x, axis=0)
    f = function([x], [s, m], mode=Mode(linker="c"))
    xv = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]], dtype="float32")
    got_s, got_m = f(xv)
    assert got_s.shape == (2, 1) and got_s.dtype == np.float32
    assert np.isnan(got_s[0, 0]) and got_s[1, 0] == 15.0
    assert np.isnan(got_m[1]) and got_m[0] == 4.0 and got_m[2] == 6.0


def test_empty_reductions_match_perform() -> None:
    x = T.dmatrix("x")
    f = function([x], [T.sum(x, axis=0), T.prod(x, axis=1)], mode=Mode(linker="c"))
    s, p = f(np.zeros((0, 3)))
    assert_allclose(s, np.zeros(3))
    assert p.shape == (0,)
    g = function([x], CAReduce(ps.maximum, 0)(x), mode=Mode(linker="c", optimizer="None"))
    with pytest.raises(ValueError, match="cannot reduce an empty array"):
        g(np.zeros((0, 3)))
