"""Alloc, AllocEmpty, zeros/ones/full, ARange and Eye against NumPy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.debugmode import DebugMode
from opgraph.gradient import Rop, grad, verify_grad
from opgraph.printing import pp
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.math import cast
from opgraph.tensor.shape import shape_i
from opgraph.tensor.structure import (
    Alloc,
    AllocEmpty,
    ARange,
    Eye,
    alloc,
    arange,
    eye,
    full,
    identity_like,
    ones,
    zeros,
)
from opgraph.testing.checks import check_infer_shape, check_modes, random_value

DTYPES = ["bool", "int8", "int64", "uint8", "float32", "float64", "complex64"]
NAN_MODES = ("FAST_COMPILE", "FAST_RUN", "PROFILE_MODE", DebugMode(check_isfinite=False))


def check_symbolic_shape(inputs: list[Any], out: Any, values: list[Any]) -> None:
    """``out.owner.op.infer_shape`` on symbolic input shapes gives the real output shape."""
    node = out.owner
    in_shapes = [tuple(shape_i(v, d) for d in range(v.type.ndim)) for v in node.inputs]
    dims = node.op.infer_shape(node, in_shapes)[node.outputs.index(out)]
    dims = [cast(as_tensor_variable(d), "int64") for d in dims]
    f = opgraph.function(inputs, [out, *dims], on_unused_input="ignore")
    real, *got = f(*values)
    assert tuple(int(d) for d in got) == real.shape


# ----------------------------------------------------------------------------------------
# Alloc


@pytest.mark.parametrize("dtype", DTYPES)
def test_alloc_matches_numpy_broadcast(dtype: str, rng: np.random.Generator) -> None:
    v = T.tensor(dtype, (False,), "v")
    s = T.tensor(dtype, (), "s")
    r = T.tensor(dtype, (True, False), "r")
    n = T.lscalar("n")
    vv = random_value(rng, (3,), dtype, low=-3, high=3)
    sv = random_value(rng, (), dtype, low=-3, high=3)
    rv = random_value(rng, (1, 3), dtype, low=-3, high=3)
    outs = [
        alloc(v, 2, 3),
        alloc(s, n, 2),
        alloc(s),
        alloc(r, 4, 3),
        alloc(r, n, 1, 3),
        alloc(v, 0, 3),
    ]
    expected = [
        np.broadcast_to(vv, (2, 3)),
        np.full((4, 2), sv),
        np.asarray(sv),
        np.broadcast_to(rv, (4, 3)),
        np.broadcast_to(rv, (4, 1, 3)),
        np.zeros((0, 3), dtype),
    ]
    check_modes([v, s, r, n], outs, [vv, sv, rv, 4], expected)
    assert [o.type.dtype for o in outs] == [dtype] * 6
    assert outs[4].type.broadcastable == (False, True, False)
    for out in outs:
        check_symbolic_shape([v, s, r, n], out, [vv, sv, rv, 4])


def test_alloc_nan_inf_printing_and_props() -> None:
    v = T.dvector("v")
    vv = np.array([np.nan, np.inf, -np.inf])
    check_modes([v], alloc(v, 2, 3), [vv], np.broadcast_to(vv, (2, 3)), modes=NAN_MODES)
    out = alloc(v, 2, 3)
    assert str(out.owner.op) == "Alloc" and Alloc() == Alloc()
    assert pp(out) == "alloc(v, TensorConstant{2}, TensorConstant{3})"
    assert alloc(v, 1, 3).type.broadcastable == (True, False)
    check_infer_shape([v], out, [vv[:3]], Alloc)


def test_alloc_errors_name_the_problem(mode: str) -> None:
    v = T.dvector("v")
    n = T.lscalar("n")
    f = opgraph.function([v, n], alloc(v, n, 3), mode=mode)
    with pytest.raises(
        ValueError, match=r"cannot fill shape \(2, 3\) with a value of shape \(4,\)"
    ):
        f(np.ones(4), 2)
    with pytest.raises(ValueError, match="not broadcastable in the value's type"):
        f(np.ones(1), 2)
    with pytest.raises(ValueError, match="negative dimension"):
        f(np.ones(3), -1)


def test_alloc_build_errors() -> None:
    m = T.dmatrix("m")
    with pytest.raises(TypeError, match=r"has 2 dimension.*more than the 1"):
        alloc(m, 3)
    with pytest.raises(TypeError, match="shape argument 0 must be an integer scalar"):
        alloc(1.0, 2.5)
    with pytest.raises(TypeError, match=r"shape argument 1 must be an integer scalar.*vector"):
        alloc(1.0, 2, T.lvector())
    with pytest.raises(ValueError, match="shape argument 0 is negative"):
        alloc(1.0, -2)


def test_alloc_gradient_sums_over_broadcast_dims(rng: np.random.Generator) -> None:
    verify_grad(lambda v: alloc(v, 2, 3), [rng.random(3)], rng=rng)
    verify_grad(lambda s: alloc(s, 2, 3), [rng.random(())], rng=rng)
    verify_grad(lambda m: alloc(m, 4, 2, 3) * 2, [rng.random((2, 3))], rng=rng)
    r = T.TensorType("float64", (True, False))("r")
    g = grad(alloc(r, 5, 3).sum(), r)
    assert g.type.broadcastable == (True, False)
    np.testing.assert_allclose(opgraph.function([r], g)(np.ones((1, 3))), np.full((1, 3), 5.0))
    n = T.lscalar("n")
    assert (
        grad(alloc(r, n, 3).sum(), n, disconnected_inputs="ignore", return_disconnected="None")
        is None
    )
    v, e = T.dvectors("v", "e")
    f = opgraph.function([v, e], Rop(alloc(v, 2, 3), v, e), on_unused_input="ignore")
    np.testing.assert_allclose(
        f(np.ones(3), np.arange(3.0)), np.broadcast_to(np.arange(3.0), (2, 3))
    )


def test_alloc_constant_folding_policy() -> None:
    from opgraph.graph.fg import FunctionGraph

    v = T.dvector("v")
    out = alloc(v, 2, 3)
    fg = FunctionGraph([v], [out])
    node = fg.outputs[0].owner
    assert node.op.do_constant_folding(fg, node) is False  # an output
    fg2 = FunctionGraph([v], [out * 2])
    node = fg2.outputs[0].owner.inputs[0].owner
    assert isinstance(node.op, Alloc) and node.op.do_constant_folding(fg2, node) is True


def test_alloc_empty(mode: str) -> None:
    n = T.lscalar("n")
    out = AllocEmpty("float32")(n, 3)
    assert str(out.owner.op) == "AllocEmpty{dtype='float32'}"
    assert out.type == T.TensorType("float32", (False, False))
    res = opgraph.function([n], out, mode=mode)(2)
    assert res.shape == (2, 3) and res.dtype == np.float32
    assert AllocEmpty("float64")(1).type.broadcastable == (True,)
    check_symbolic_shape([n], out, [2])
    assert out.owner.op.do_constant_folding(None, out.owner) is False
    assert grad(out.sum(), n, disconnected_inputs="ignore", return_disconnected="None") is None


# ----------------------------------------------------------------------------------------
# zeros, ones, full


def test_zeros_ones_full(mode: str) -> None:
    x = T.dmatrix("x")
    n = T.iscalar("n")
    xv = np.ones((2, 3))
    outs = [
        zeros((2, 3)),
        zeros(n, dtype="int32"),
        ones(x.shape),
        ones((n, 2), dtype="int8"),
        full((2,), 3.5),
        full(x.shape, T.dscalar("c") + 1, dtype="float32"),
        zeros(()),
        ones([]),
    ]
    vals = [xv, np.int32(4), 1.0]
    c = outs[5].owner.inputs[0].owner.inputs[0].owner.inputs[0]
    expected = [
        np.zeros((2, 3)),
        np.zeros(4, "int32"),
        np.ones((2, 3)),
        np.ones((4, 2), "int8"),
        np.full(2, 3.5, "float32"),
        np.full((2, 3), 2.0, "float32"),
        np.zeros(()),
        np.ones(()),
    ]
    check_modes([x, n, c], outs, vals, expected, modes=(mode,))
    assert pp(outs[0]) == "alloc(TensorConstant{0.0}, TensorConstant{2}, TensorConstant{3})"
    assert str(outs[2].owner.inputs[1].owner.op) == "Shape_i{0}"
    with pytest.raises(TypeError, match="zeros' shape must be an int"):
        zeros(1.5)
    with pytest.raises(TypeError, match="full: fill_value must be a scalar"):
        full((2,), T.dvector())


# ----------------------------------------------------------------------------------------
# arange


def test_arange_dtype_rules_and_values(mode: str) -> None:
    i = T.iscalar("i")
    f32 = T.fscalar("f32")
    cases = [
        (arange(5), np.arange(5), "int64"),
        (arange(1, 10, 3), np.arange(1, 10, 3), "int64"),
        (arange(i), np.arange(4), "int64"),
        (arange(10, 0, -3), np.arange(10, 0, -3), "int64"),
        (arange(0.5, 3), np.arange(0.5, 3, dtype="float32"), "float32"),
        (arange(f32, 2.0, 0.25), np.arange(0.5, 2.0, 0.25, dtype="float32"), "float32"),
        (arange(0, 1, 0.5, dtype="float64"), np.arange(0, 1, 0.5), "float64"),
        (arange(5, 2), np.arange(5, 2), "int64"),
        (arange(np.uint8(3)), np.arange(3), "int64"),
        (arange(np.uint8(0), np.uint8(3), np.uint8(1)), np.arange(3, dtype="uint64"), "uint64"),
    ]
    outs = [c[0] for c in cases]
    check_modes(
        [i, f32], outs, [np.int32(4), np.float32(0.5)], [c[1] for c in cases], modes=(mode,)
    )
    assert [o.type.dtype for o in outs] == [c[2] for c in cases]
    assert str(outs[0].owner.op) == "ARange{dtype='int64'}" and ARange("int64") == ARange("int64")


def test_arange_infer_shape_errors_and_grad(rng: np.random.Generator) -> None:
    a, b, s = T.lscalars("a", "b", "s")
    d = T.dscalar("d")
    for out, vals in [
        (arange(a, b, s), [2, 11, 3]),
        (arange(a, b, s), [11, 2, -2]),
        (arange(a, b), [3, 1, 1]),
        (arange(b), [0, 7, 1]),
        (arange(d, 2.0, 0.3), [0, 0, 0, -1.0]),
    ]:
        inputs = [a, b, s] + ([d] if len(vals) == 4 else [])
        check_symbolic_shape(inputs, out, vals)
    check_infer_shape([], arange(2, 9, 2), [], ARange)
    f = opgraph.function([a, b, s], arange(a, b, s))
    with pytest.raises(ValueError, match=r"ARange\{dtype='int64'\}: step is 0"):
        f(0, 3, 0)
    fd = opgraph.function([d], arange(d, 3.0, 1.0))
    with pytest.raises(ValueError, match="cannot build the range start=nan"):
        fd(np.nan)
    with pytest.raises(ValueError, match="step must not be 0"):
        arange(0, 3, 0)
    with pytest.raises(TypeError, match="stop must be a scalar"):
        arange(T.dvector())
    verify_grad(
        lambda start, step: arange(start, 3.0, step) ** 2, [np.array(0.5), np.array(0.7)], rng=rng
    )
    g = grad(cast(arange(a, 5), "float64").sum(), a)
    assert opgraph.function([a], g)(1) == 0.0


# ----------------------------------------------------------------------------------------
# eye, identity_like


@pytest.mark.parametrize("dtype", ["int32", "float32", "float64", "bool"])
def test_eye_matches_numpy(dtype: str, mode: str) -> None:
    n, m, k = T.lscalars("n", "m", "k")
    outs = [eye(n, dtype=dtype), eye(n, m, k, dtype=dtype), eye(3, 0, dtype=dtype)]
    expected = [np.eye(3, dtype=dtype), np.eye(3, 5, -1, dtype=dtype), np.eye(3, 0, dtype=dtype)]
    check_modes([n, m, k], outs, [3, 5, -1], expected, modes=(mode,))
    assert str(outs[0].owner.op) == f"Eye{{dtype='{dtype}'}}"
    check_symbolic_shape([n, m, k], outs[1], [3, 5, -1])


def test_eye_defaults_errors_and_identity_like() -> None:
    assert eye(2).type.dtype == opgraph.config.floatX and Eye() == Eye(opgraph.config.floatX)
    f = opgraph.function([], eye(2, 3, 1))
    np.testing.assert_array_equal(f(), np.eye(2, 3, 1))
    n = T.lscalar("n")
    g = opgraph.function([n], eye(n))
    with pytest.raises(ValueError, match=r"the shape \(-1, -1\) has a negative dimension"):
        g(-1)
    with pytest.raises(TypeError, match="'s n must be an integer scalar"):
        eye(2.5)
    with pytest.raises(ValueError, match="n must not be negative"):
        eye(-2)
    x = T.fmatrix("x")
    out = identity_like(x)
    assert out.type.dtype == "float32"
    np.testing.assert_array_equal(
        opgraph.function([x], out)(np.ones((2, 3), "float32")), np.eye(2, 3)
    )
    with pytest.raises(TypeError, match="identity_like needs a matrix"):
        identity_like(T.dvector())
