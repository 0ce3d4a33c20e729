"""Fused loops over every memory layout: broadcasting, strides, 0-d, empty, in place, OpenMP."""

from __future__ import annotations

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.configdefaults import config
from opgraph.tensor.elemwise import Elemwise
from opgraph.testing import assert_allclose, check_modes

C_RUN = Mode(linker="c", optimizer="fast_run")


def fused(x, y):
    """A Composite after fusion: exp(-x**2)*sin(x) + 0.5*x, times y."""
    return (T.exp(-(x**2)) * T.sin(x) + 0.5 * x) * y


def reference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return (np.exp(-(x**2)) * np.sin(x) + 0.5 * x) * y


def test_fusion_gives_one_c_kernel(rng: np.random.Generator) -> None:
    x, y = T.dvector("x"), T.dvector("y")
    f = function([x, y], fused(x, y), mode=C_RUN)
    nodes = f.maker.fgraph.toposort()
    assert len(nodes) == 1 and "Composite" in str(nodes[0].op)
    assert type(f.fn.thunks[0]).__name__ == "ElemwiseThunk"
    xv, yv = rng.standard_normal(1000), rng.standard_normal(1000)
    assert_allclose(f(xv, yv), reference(xv, yv))


@pytest.mark.parametrize(
    ("xtype", "ytype", "xshape", "yshape"),
    [
        ((False, False), (True, False), (4, 5), (1, 5)),  # row
        ((False, False), (False, True), (4, 5), (4, 1)),  # column
        ((False, False), (True, True), (4, 5), (1, 1)),  # scalar, hoisted
        ((False, False, False), (True, False, True), (3, 4, 5), (1, 4, 1)),
        ((), (), (), ()),  # 0-d
        ((False, False), (False, False), (0, 5), (0, 5)),  # empty
    ],
)
def test_broadcast_patterns(xtype, ytype, xshape, yshape, rng: np.random.Generator) -> None:
    x = T.TensorType("float64", xtype)("x")
    y = T.TensorType("float64", ytype)("y")
    xv, yv = rng.standard_normal(xshape), rng.standard_normal(yshape)
    check_modes([x, y], fused(x, y), [xv, yv], reference(xv, yv), modes=(), linkers=["c"])


def test_strided_and_transposed_inputs(rng: np.random.Generator) -> None:
    x, y = T.dmatrix("x"), T.dmatrix("y")
    f = function([x, y], fused(x, y), mode=C_RUN)
    big = rng.standard_normal((12, 20))
    cases = [
        (big[::2, ::3], big[1::2, 1::3]),  # non-contiguous both
        (big[:6, :7].T, big[6:, 13:].T.copy()),  # transposed view and contiguous
        (np.asfortranarray(big[:5, :4]), np.asfortranarray(big[5:10, :4])),  # Fortran order
        (big[:, ::-1][:4, :5], big[4:8, :5]),  # negative strides
    ]
    for xv, yv in cases:
        assert_allclose(f(xv, yv), reference(xv, yv))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_transposed_broadcast_uses_general_path(dtype: str, rng: np.random.Generator) -> None:
    x = T.TensorType(dtype, (False, False, False))("x")
    y = T.TensorType(dtype, (False, True, False))("y")
    f = function([x, y], x * y + 1, mode=C_RUN)
    xv = rng.standard_normal((6, 5, 4)).astype(dtype).transpose(2, 0, 1).copy()
    xv = xv.transpose(1, 2, 0)  # (6, 5, 4)-shaped again, no longer C-contiguous
    yv = rng.standard_normal((xv.shape[0], 1, xv.shape[2])).astype(dtype)
    assert_allclose(f(xv, yv), xv * yv + 1)


def test_shape_mismatch_error_names_the_node(rng: np.random.Generator) -> None:
    x, y = T.dvector("x"), T.dvector("y")
    f = function([x, y], x + y, mode=C_RUN)
    with pytest.raises(ValueError, match=r"Input dimension mis-match") as info:
        f(np.ones(3), np.ones(4))
    assert "Apply node that caused the error" in str(info.value)
    py = function([x, y], x + y, mode=Mode(linker="py", optimizer="fast_run"))
    with pytest.raises(ValueError) as py_info:
        py(np.ones(3), np.ones(4))
    assert str(py_info.value).splitlines()[0] == str(info.value).splitlines()[0]


def test_inplace_kernel_writes_into_its_input(rng: np.random.Generator) -> None:
    from opgraph.scalar.basic import add

    x, y = T.dvector("x"), T.dvector("y")
    op = Elemwise(add, {0: 0})
    f = function([x, y], op(x * 2, y), mode=Mode(linker="c", optimizer="None"), accept_inplace=True)
    kinds = {str(n.op): type(t).__name__ for n, t in zip(f.fn.nodes, f.fn.thunks)}
    assert kinds["Elemwise{Add}[(0, 0)]"] == "ElemwiseThunk"
    assert kinds["Elemwise{mul,no_inplace}"] == "ElemwiseThunk"
    xv, yv = rng.standard_normal(7), rng.standard_normal(7)
    assert_allclose(f(xv, yv), xv * 2 + yv)


def test_inplace_after_rewrites(rng: np.random.Generator) -> None:
    a, x = T.dmatrix("a"), T.dvector("x")
    out = T.exp(T.dot(a, x)) * x  # the dot's output is an intermediate: safe to overwrite
    f = function([a, x], out, mode=C_RUN)
    ops = [str(n.op) for n in f.maker.fgraph.toposort()]
    assert any("[(0, " in o for o in ops), ops
    av, xv = rng.standard_normal((9, 9)), rng.standard_normal(9)
    assert_allclose(f(av, xv), np.exp(av @ xv) * xv)


def test_inputs_are_not_modified(rng: np.random.Generator) -> None:
    x = T.dvector("x")
    f = function([x], T.exp(x) + x, mode=C_RUN)
    xv = rng.standard_normal(50)
    before = xv.copy()
    f(xv)
    np.testing.assert_array_equal(xv, before)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_openmp_path_matches_serial(dtype: str, rng: np.random.Generator) -> None:
    x, y = T.TensorType(dtype, (False,))("x"), T.TensorType(dtype, (False,))("y")
    out = T.maximum(x * y, x - y) if dtype == "int32" else T.tanh(x) * T.exp(-y) + x
    with config.change_flags(openmp=True, c__openmp_threshold=10):
        f = function([x, y], out, mode=C_RUN)
        (node,) = f.maker.fgraph.toposort()
        assert "prange" in f.fn.thunks[0].kernel.impl(node.op, node).source
    serial = function([x, y], out, mode=Mode(linker="py", optimizer="fast_run"))
    for n in (5, 11, 1001):
        xv = (rng.standard_normal(n) * 10).astype(dtype)
        yv = (rng.standard_normal(n) * 10).astype(dtype)
        assert_allclose(f(xv, yv), serial(xv, yv))
