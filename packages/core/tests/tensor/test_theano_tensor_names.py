"""Theano 1.0's ``theano.tensor`` and ``theano.scalar`` names that opgraph lacked (the
"theano.tensor" section of THEANO-API-GAP.md and ``scalar.bool/int32/uint32/upcast``): each
resolves at its Theano path and behaves as in Theano (golden values recorded from Theano 1.0.5
with ``THEANO_FLAGS=device=cpu,cxx=``) or NumPy.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import opgraph.scalar as S
import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.configdefaults import config
from opgraph.gradient import NullTypeGradError, grad
from opgraph.tensor.elemwise import Elemwise
from opgraph.testing.checks import check_infer_shape, check_modes

TENSOR_NAMES = [
    "_tensor_py_operators",
    "basic.choose",
    "btensor6",
    "btensor7",
    "chi2sf",
    "complex",
    "complex_from_polar",
    "ctensor6",
    "ctensor7",
    "dtensor6",
    "dtensor7",
    "elemwise.mul_without_zeros",
    "erfcinv",
    "erfcx",
    "ftensor6",
    "ftensor7",
    "i0",
    "i1",
    "integer_dtypes",
    "isinf_",
    "isnan_",
    "itensor6",
    "itensor7",
    "iv",
    "j0",
    "j1",
    "jv",
    "ltensor6",
    "ltensor7",
    "mgrid",
    "ogrid",
    "ptp",
    "stacklists",
    "tensor6",
    "tensor7",
    "wtensor6",
    "wtensor7",
    "ztensor6",
    "ztensor7",
]
SCALAR_NAMES = ["bool", "int32", "uint32", "upcast"]


def _resolve(path: str) -> object:
    module, _, rest = path.rpartition(".")
    obj = importlib.import_module(module)
    return getattr(obj, rest)


@pytest.mark.parametrize("name", TENSOR_NAMES)
def test_tensor_name_resolves_at_its_theano_path(name: str) -> None:
    assert _resolve(f"opgraph.tensor.{name}") is not None


@pytest.mark.parametrize("name", SCALAR_NAMES)
def test_scalar_name_resolves_at_its_theano_path(name: str) -> None:
    assert _resolve(f"opgraph.scalar.{name}") is not None


def test_scalar_namespace_is_theanos() -> None:
    assert (S.bool.dtype, S.int32.dtype, S.uint32.dtype) == ("bool", "int32", "uint32")
    assert S.upcast("int8", "float32") == "float32"  # Theano 1.0.5
    assert S.upcast("int32", "uint32") == "int64"
    assert S.Scalar is S.ScalarType
    assert T.add(T.dvector(), T.dvector()).owner.op.scalar_op == S.add
    assert T.i0(T.dvector()).owner.op.scalar_op == S.i0
    assert S.float64 in S.float_types and S.int8 in S.discrete_types


@pytest.mark.parametrize("ndim", [6, 7])
def test_tensor6_and_tensor7_constructors(ndim: int) -> None:
    x = getattr(T, f"tensor{ndim}")("x")
    assert x.type.ndim == ndim and x.dtype == config.floatX
    assert getattr(T, f"tensor{ndim}")(dtype="int16").dtype == "int16"
    kinds = dict(b="int8", w="int16", i="int32", l="int64", f="float32", d="float64")
    kinds.update(c="complex64", z="complex128")
    for prefix, dtype in kinds.items():
        t = getattr(T, f"{prefix}tensor{ndim}")
        assert t.dtype == dtype and t.broadcastable == (False,) * ndim
    xs = getattr(T, f"dtensor{ndim}s")("a", "b")
    assert [v.name for v in xs] == ["a", "b"]
    y = getattr(T, f"tensor{ndim}")("y")
    val = np.arange(2**ndim, dtype=y.dtype).reshape((2,) * ndim)
    np.testing.assert_array_equal(function([y], y * 2)(val), val * 2)


def test_plural_constructors_follow_theano() -> None:
    a, b, c = T.scalars("abc")  # Theano: one per letter
    assert [v.name for v in (a, b, c)] == ["a", "b", "c"]
    x = T.dvectors("x")  # Theano: one name gives the variable itself
    assert x.name == "x" and x.type.ndim == 1
    assert [v.name for v in T.dmatrices("p, q")] == ["p", "q"]
    assert len(T.fvectors(3)) == 3


def test_integer_dtypes_and_operator_mixin() -> None:
    signed = ["int8", "int16", "int32", "int64"]
    assert T.integer_dtypes == [*signed, "uint8", "uint16", "uint32", "uint64"]
    assert isinstance(T.dvector(), T._tensor_py_operators)
    assert isinstance(T.constant(1.0), T._tensor_py_operators)
    assert "__add__" in vars(T._tensor_py_operators)


def test_isnan_and_isinf_underscore_names_are_the_elemwise_ops() -> None:
    assert isinstance(T.isnan_, Elemwise) and isinstance(T.isinf_, Elemwise)
    x = T.dvector("x")
    vals = np.array([1.0, np.nan, np.inf, -np.inf])
    got = function([x], [T.isnan_(x), T.isinf_(x)])(vals)
    np.testing.assert_array_equal(got[0], np.isnan(vals))
    np.testing.assert_array_equal(got[1], np.isinf(vals))
    i = T.ivector("i")
    assert not function([i], T.isnan_(i))(np.array([1, 2], "int32")).any()


def test_elemwise_mul_without_zeros_is_the_scalar_op() -> None:
    op = T.elemwise.mul_without_zeros
    assert op.identity == 0 and op.commutative
    out = function([], Elemwise(op)(np.array([0.0, 2.0, 0.0]), np.array([3.0, 0.0, 0.0])))()
    np.testing.assert_array_equal(out, [3.0, 2.0, 0.0])


def test_mgrid_and_ogrid_match_theano_and_numpy() -> None:
    dense = [g.eval() for g in T.mgrid[0:5, 0:3]]
    for got, ref in zip(dense, np.mgrid[0:5, 0:3], strict=True):
        np.testing.assert_array_equal(got, ref)
    # Theano 1.0.5: [b.eval() for b in T.ogrid[0:5, 1:7:2]]
    opened = [g.eval() for g in T.ogrid[0:5, 1:7:2]]
    np.testing.assert_array_equal(opened[0], [[0], [1], [2], [3], [4]])
    np.testing.assert_array_equal(opened[1], [[1, 3, 5]])
    assert T.ogrid[0:5, 1:7:2][0].broadcastable == (False, True)
    np.testing.assert_allclose(T.mgrid[0:1:0.25].eval(), np.mgrid[0:1:0.25])
    n = T.lscalar("n")
    got = function([n], T.mgrid[0:n, 2:4])(3)
    for g, ref in zip(got, np.mgrid[0:3, 2:4], strict=True):
        np.testing.assert_array_equal(g, ref)
    with pytest.raises(TypeError, match="complex step"):
        T.mgrid[0:1:5j]
    with pytest.raises(TypeError, match="slices"):
        T.ogrid[3]


def test_ptp_matches_numpy() -> None:
    x = T.dmatrix("x")
    val = np.array([[3.0, -1.0, 2.0], [0.5, 7.0, -4.0]])
    check_modes(
        [x],
        [T.ptp(x), T.ptp(x, 0), T.ptp(x, 1)],
        [val],
        [np.ptp(val)] + [np.ptp(val, axis=a) for a in (0, 1)],
    )
    assert function([x], T.ptp(x))(np.array([[3.0, -1.0, 2.0]])) == 4.0  # Theano 1.0.5


def test_stacklists_follows_theano_docstring() -> None:
    a, b, c, d = T.scalars("abcd")
    out = function([a, b, c, d], T.stacklists([[a, b], [c, d]]))(1, 2, 3, 4)
    np.testing.assert_array_equal(out, [[1.0, 2.0], [3.0, 4.0]])
    ma, mb, mc, md = T.matrices("abcd")
    x = np.ones((4, 4), config.floatX)
    f = function([ma, mb, mc, md], T.stacklists([[ma, mb], [mc, md]]))
    assert f(x, x, x, x).shape == (2, 2, 4, 4)
    assert T.stacklists(a) is a


@pytest.mark.parametrize("mode", ["raise", "wrap", "clip"])
def test_choose_matches_numpy(mode: str) -> None:
    a, c = T.imatrix("a"), T.dmatrix("c")
    idx = np.array([[0, 1, 2], [2, 1, 0]], "int32")
    if mode != "raise":
        idx = idx * 2 - 1  # out of range: wrapped or clipped
    choices = np.arange(9.0).reshape(3, 3)
    check_modes(
        [a, c], T.choose(a, c, mode=mode), [idx, choices], np.choose(idx, choices, mode=mode)
    )


def test_choose_golden_and_broadcasting() -> None:
    i, c = T.ivector("i"), T.dmatrix("c")
    # Theano 1.0.5: choose([0, 1, 0], arange(6).reshape(2, 3)) = [0, 4, 2]
    got = function([i, c], T.basic.choose(i, c))(
        np.array([0, 1, 0], "int32"), np.arange(6.0).reshape(2, 3)
    )
    np.testing.assert_array_equal(got, [0.0, 4.0, 2.0])
    col, x, y = T.lcol("col"), T.dvector("x"), T.dvector("y")
    out = T.choose(col, [x, y])
    assert out.type.ndim == 2 and out.dtype == "float64"
    vals = [np.array([[0], [1]]), np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0])]
    check_modes([col, x, y], out, vals, np.choose(vals[0], vals[1:]))
    check_infer_shape([col, x, y], out, vals)


def test_choose_errors_and_gradient() -> None:
    with pytest.raises(TypeError, match=r"\[u\]int"):
        T.choose(T.dvector(), T.dmatrix())
    with pytest.raises(ValueError, match="mode"):
        T.choose(T.ivector(), T.dmatrix(), mode="nearest")
    i, c = T.ivector("i"), T.dmatrix("c")
    f = function([i, c], T.choose(i, c))
    with pytest.raises(ValueError):
        f(np.array([0, 5, 0], "int32"), np.zeros((2, 3)))
    with pytest.raises(NullTypeGradError, match="Choose"):
        grad(T.sum(T.choose(i, c)), c)
