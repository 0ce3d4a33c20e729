"""dot, matmul, tensordot, outer, batched_dot and batched_tensordot against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.gradient import Rop, grad, verify_grad
from opgraph.tensor.dot import BatchedDot, Dot, MatMul
from opgraph.testing.checks import check_infer_shape, check_modes, random_value


def _t(dtype: str, ndim: int, name: str, bcast: tuple[bool, ...] | None = None) -> T.TensorVariable:
    return T.TensorType(dtype, bcast or (False,) * ndim)(name)


def _v(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if dtype == "complex128":
        return rng.normal(size=shape) + 1j * rng.normal(size=shape)
    return random_value(rng, shape, dtype, -3, 4)


@pytest.mark.parametrize("dtype", ["bool", "int8", "int64", "float32", "float64", "complex128"])
def test_dot_of_vectors_and_matrices(dtype: str, mode: str, rng: np.random.Generator) -> None:
    m, n, v, w, e = (
        _t(dtype, 2, "m"),
        _t(dtype, 2, "n"),
        _t(dtype, 1, "v"),
        _t(dtype, 1, "w"),
        (_t(dtype, 2, "e")),
    )
    mv, nv, vv, wv = (
        _v(rng, (3, 4), dtype),
        _v(rng, (4, 2), dtype),
        _v(rng, (4,), dtype),
        _v(rng, (4,), dtype),
    )
    ev = _v(rng, (0, 4), dtype)
    outs = [T.dot(m, n), T.dot(m, v), T.dot(v, n), T.dot(v, w), T.dot(e, n), m.dot(n), m @ n]
    expected = [mv @ nv, mv @ vv, vv @ nv, np.dot(vv, wv), ev @ nv, mv @ nv, mv @ nv]
    for o, ex in zip(outs, expected):
        assert o.dtype == np.asarray(ex).dtype
    check_modes([m, n, v, w, e], outs, [mv, nv, vv, wv, ev], expected, modes=[mode])


def test_dot_with_a_scalar_is_elementwise_and_higher_ranks_use_tensordot(
    rng: np.random.Generator,
) -> None:
    s, m, t3, t4 = T.dscalar("s"), T.dmatrix("m"), T.dtensor3("t3"), T.dtensor4("t4")
    sv, mv = np.float64(2.0), rng.random((3, 4))
    t3v, t4v = rng.random((2, 3, 4)), rng.random((5, 2, 4, 3))
    outs = [T.dot(s, m), T.dot(t3, mv.T), T.dot(m, t4), T.dot(t3, t4)]
    expected = [2.0 * mv, np.dot(t3v, mv.T), np.dot(mv, t4v)]
    expected.append(np.dot(t3v, t4v))
    check_modes([s, m, t3, t4], outs, [sv, mv, t3v, t4v], expected)
    assert not isinstance(T.dot(s, m).owner.op, Dot)


def test_dot_name_and_printing() -> None:
    x, y = T.dmatrix("x"), T.dvector("y")
    out = T.dot(x, y)
    assert str(out.owner.op) == "dot" and isinstance(out.owner.op, Dot)
    assert str(out) == "dot.0"
    from opgraph.printing import pprint

    assert pprint(out) == "(x \\dot y)"


def test_dot_broadcastable_pattern_and_type_errors() -> None:
    r, m = T.drow("r"), T.dmatrix("m")
    assert T.dot(r, m).broadcastable == (True, False)
    assert T.dot(m, T.dcol("c")).broadcastable == (False, True)
    with pytest.raises(TypeError, match=r"Dot: input 0 .* must be a vector or a matrix"):
        Dot()(T.dtensor3(), m)
    v = T.dvector("v")
    f = function([m, v], T.dot(m, v))
    with pytest.raises(ValueError, match=r"\(3, 4\) and \(5,\) are not aligned"):
        f(np.ones((3, 4)), np.ones(5))


@pytest.mark.parametrize(
    ("xs", "ys"), [((3, 4), (4, 2)), ((4,), (4, 2)), ((3, 4), (4,)), ((4,), (4,))]
)
def test_dot_gradients_and_r_op(xs: tuple, ys: tuple, rng: np.random.Generator) -> None:
    xv, yv = rng.random(xs), rng.random(ys)
    verify_grad(T.dot, [xv, yv])
    x, y = (
        T.TensorType("float64", (False,) * len(xs))("x"),
        T.TensorType("float64", (False,) * len(ys))("y"),
    )
    dx, dy = x.type("dx"), y.type("dy")
    r = Rop(T.dot(x, y), [x, y], [dx, dy])
    dxv, dyv = rng.random(xs), rng.random(ys)
    got = function([x, y, dx, dy], r)(xv, yv, dxv, dyv)
    np.testing.assert_allclose(got, np.dot(dxv, yv) + np.dot(xv, dyv))


def test_dot_gradient_keeps_broadcastable_patterns_and_ints_get_zero() -> None:
    r, m = T.drow("r"), T.dmatrix("m")
    g_r, _ = grad(T.sum(T.dot(r, m)), [r, m])
    assert g_r.broadcastable == (True, False)
    i = T.lmatrix("i")
    g = grad(T.sum(T.dot(T.cast(i, "float64"), m)), m)
    assert g.dtype == "float64"
    zero = Dot().grad([i, i], [T.lmatrix()])[0]
    assert zero.dtype == "float64"


def test_dot_infer_shape(rng: np.random.Generator) -> None:
    m, n, v = T.dmatrix("m"), T.dmatrix("n"), T.dvector("v")
    vals = [rng.random((3, 4)), rng.random((4, 2)), rng.random(4)]
    check_infer_shape([m, n, v], [T.dot(m, n), T.dot(m, v), T.dot(v, n), T.dot(v, v)], vals, Dot)


def test_outer(mode: str, rng: np.random.Generator) -> None:
    x, y, m = T.dvector("x"), T.fvector("y"), T.dmatrix("m")
    xv, yv, mv = rng.random(3), rng.random(4).astype("float32"), rng.random((2, 2))
    check_modes(
        [x, y, m],
        [T.outer(x, y), T.outer(m, x)],
        [xv, yv, mv],
        [np.outer(xv, yv), np.outer(mv, xv)],
        modes=[mode],
    )
    verify_grad(T.outer, [xv, rng.random(4)])


# ----------------------------------------------------------------------------------------
# matmul


@pytest.mark.parametrize(
    ("xs", "ys", "xb", "yb"),
    [
        ((2, 3, 4), (2, 4, 5), None, None),
        ((2, 3, 4), (4, 5), None, None),
        ((3, 4), (2, 4, 5), None, None),
        ((1, 3, 4), (2, 4, 5), (True, False, False), None),
        ((4,), (2, 4, 5), None, None),
        ((2, 3, 4), (4,), None, None),
        ((2, 1, 3, 4), (5, 4, 2), (False, True, False, False), None),
        ((2, 0, 4), (2, 4, 5), None, None),
        ((3, 4), (4, 5), None, None),
    ],
)
def test_matmul_matches_numpy(
    xs: tuple, ys: tuple, xb: tuple | None, yb: tuple | None, mode: str, rng: np.random.Generator
) -> None:
    x, y = _t("float64", len(xs), "x", xb), _t("float64", len(ys), "y", yb)
    xv, yv = rng.random(xs), rng.random(ys)
    expected = np.matmul(xv, yv)
    out = T.matmul(x, y)
    assert out.type.ndim == expected.ndim
    check_modes([x, y], [out, x @ y], [xv, yv], [expected, expected], modes=[mode])


@pytest.mark.parametrize(
    ("xs", "ys", "xb"),
    [
        ((2, 3, 4), (2, 4, 5), None),
        ((2, 3, 4), (4, 5), None),
        ((1, 3, 4), (2, 4, 2), (True, False, False)),
        ((4,), (2, 4, 5), None),
        ((2, 3, 4), (4,), None),
    ],
)
def test_matmul_gradients(xs: tuple, ys: tuple, xb: tuple | None, rng: np.random.Generator) -> None:
    xv, yv = rng.random(xs), rng.random(ys)
    if xb is None:
        verify_grad(T.matmul, [xv, yv])
    x, y = _t("float64", len(xs), "x", xb), _t("float64", len(ys), "y")
    gx, gy = grad(T.sum(T.matmul(x, y) * 1.5), [x, y])
    f = function([x, y], [gx, gy])
    gxv, gyv = f(xv, yv)
    ones = np.full(np.matmul(xv, yv).shape, 1.5)
    x2 = xv if xv.ndim > 1 else xv[None]
    y2 = yv if yv.ndim > 1 else yv[:, None]
    o2 = ones.reshape(np.matmul(x2, y2).shape)
    ex = np.matmul(o2, np.swapaxes(y2, -1, -2))
    ey = np.matmul(np.swapaxes(x2, -1, -2), o2)
    while ex.ndim > xv.ndim + (xv.ndim == 1):
        ex = ex.sum(0)
    while ey.ndim > yv.ndim + (yv.ndim == 1):
        ey = ey.sum(0)
    if xb is not None:
        ex = ex.sum(0, keepdims=True)
    np.testing.assert_allclose(gxv, ex.reshape(xv.shape))
    np.testing.assert_allclose(gyv, ey.reshape(yv.shape))


def test_matmul_r_op_and_infer_shape(rng: np.random.Generator) -> None:
    x, y = T.dtensor3("x"), T.dmatrix("y")
    dx, dy = T.dtensor3("dx"), T.dmatrix("dy")
    xv, yv, dxv, dyv = (
        rng.random((2, 3, 4)),
        rng.random((4, 5)),
        rng.random((2, 3, 4)),
        (rng.random((4, 5))),
    )
    r = Rop(T.matmul(x, y), [x, y], [dx, dy])
    got = function([x, y, dx, dy], r)(xv, yv, dxv, dyv)
    np.testing.assert_allclose(got, dxv @ yv + xv @ dyv)
    check_infer_shape([x, y], T.matmul(x, y), [xv, yv], MatMul)
    b = T.TensorType("float64", (True, False, False))("b")
    check_infer_shape(
        [b, x], T.matmul(b, x), [rng.random((1, 4, 3)), rng.random((2, 3, 4))], MatMul
    )


def test_matmul_errors() -> None:
    with pytest.raises(TypeError, match=r"matmul: input 0 .* is a scalar"):
        T.matmul(T.dscalar(), T.dmatrix())
    with pytest.raises(TypeError, match=r"MatMul: input 1 .* needs at least 2 dimensions"):
        MatMul()(T.dtensor3(), T.dvector())
    x, y = T.dtensor3("x"), T.dtensor3("y")
    f = function([x, y], T.matmul(x, y))
    with pytest.raises(ValueError, match="batch dimension 0 differs"):
        f(np.ones((1, 2, 3)), np.ones((4, 3, 2)))
    with pytest.raises(ValueError, match="not aligned"):
        f(np.ones((2, 2, 3)), np.ones((2, 4, 2)))


def test_matmul_dtypes(rng: np.random.Generator) -> None:
    x, y = T.TensorType("int8", (False,) * 3)("x"), T.TensorType("float32", (False,) * 3)("y")
    xv, yv = _v(rng, (2, 3, 4), "int8"), _v(rng, (2, 4, 2), "float32")
    out = T.matmul(x, y)
    assert out.dtype == "float32"
    check_modes([x, y], out, [xv, yv], np.matmul(xv, yv))


# ----------------------------------------------------------------------------------------
# tensordot


@pytest.mark.parametrize(
    ("xs", "ys", "axes"),
    [
        ((2, 3, 4), (3, 4, 5), 2),
        ((2, 3, 4), (4, 5), 1),
        ((2, 3), (4, 5), 0),
        ((2, 3), (2, 3), 2),
        ((2, 3, 4), (4, 2, 5), [[0, 2], [1, 0]]),
        ((3, 4, 2), (2, 3), [[-1, 0], [0, 1]]),
        ((2, 3), (3,), [[1], [0]]),
        ((2, 1, 3), (3, 1), [[2], [0]]),
    ],
)
def test_tensordot_matches_numpy(
    xs: tuple, ys: tuple, axes: object, mode: str, rng: np.random.Generator
) -> None:
    x, y = _t("float64", len(xs), "x"), _t("float64", len(ys), "y")
    xv, yv = rng.random(xs), rng.random(ys)
    expected = np.tensordot(xv, yv, axes)
    out = T.tensordot(x, y, axes)
    assert out.type.ndim == expected.ndim
    check_modes([x, y], out, [xv, yv], expected, modes=[mode])


def test_tensordot_gradient_and_broadcastable_pattern(rng: np.random.Generator) -> None:
    verify_grad(
        lambda a, b: T.tensordot(a, b, [[0, 2], [1, 0]]),
        [rng.random((2, 3, 4)), rng.random((4, 2, 5))],
    )
    verify_grad(lambda a, b: T.tensordot(a, b, 1), [rng.random((2, 3)), rng.random((3, 2))])
    r = T.drow("r")
    assert T.tensordot(r, T.dmatrix(), 1).broadcastable == (True, False)


def test_tensordot_errors() -> None:
    x, y = T.dmatrix(), T.dmatrix()
    with pytest.raises(ValueError, match="same length"):
        T.tensordot(x, y, [[0, 1], [0]])
    with pytest.raises(ValueError, match="cannot contract 3 axes"):
        T.tensordot(x, y, 3)
    with pytest.raises(ValueError, match="out of range"):
        T.tensordot(x, y, [[2], [0]])
    with pytest.raises(ValueError, match="pair"):
        T.tensordot(x, y, [[0], [1], [0]])


# ----------------------------------------------------------------------------------------
# batched products


@pytest.mark.parametrize(
    ("xs", "ys"),
    [
        ((3, 2, 4), (3, 4, 5)),
        ((3, 4), (3, 4, 5)),
        ((3, 2, 4), (3, 4)),
        ((3, 4), (3, 4)),
        ((3,), (3, 4, 2)),
        ((3, 2, 4), (3,)),
        ((2, 3, 4, 5), (2, 5, 3)),
    ],
)
def test_batched_dot_matches_numpy(
    xs: tuple, ys: tuple, mode: str, rng: np.random.Generator
) -> None:
    x, y = _t("float64", len(xs), "x"), _t("float64", len(ys), "y")
    xv, yv = rng.random(xs), rng.random(ys)
    if len(xs) == 1:
        expected = xv.reshape((-1,) + (1,) * (len(ys) - 1)) * yv
    elif len(ys) == 1:
        expected = xv * yv.reshape((-1,) + (1,) * (len(xs) - 1))
    else:
        expected = np.stack([np.dot(a, b) for a, b in zip(xv, yv)])
    check_modes([x, y], T.batched_dot(x, y), [xv, yv], expected, modes=[mode])


@pytest.mark.parametrize(
    "xs,ys", [((3, 2, 4), (3, 4, 5)), ((3, 4), (3, 4, 5)), ((3, 2, 4), (3, 4)), ((3, 4), (3, 4))]
)
def test_batched_dot_gradients_r_op_infer_shape(
    xs: tuple, ys: tuple, rng: np.random.Generator
) -> None:
    xv, yv = rng.random(xs), rng.random(ys)
    verify_grad(T.batched_dot, [xv, yv])
    x, y = _t("float64", len(xs), "x"), _t("float64", len(ys), "y")
    dx, dy = x.type("dx"), y.type("dy")
    r = Rop(T.batched_dot(x, y), [x, y], [dx, dy])
    dxv, dyv = rng.random(xs), rng.random(ys)
    got = function([x, y, dx, dy], r)(xv, yv, dxv, dyv)
    bd = function([x, y], T.batched_dot(x, y))
    np.testing.assert_allclose(got, bd(dxv, yv) + bd(xv, dyv))
    check_infer_shape([x, y], T.batched_dot(x, y), [xv, yv], BatchedDot)


def test_batched_dot_errors_and_name() -> None:
    x, y = T.dtensor3("x"), T.dtensor3("y")
    assert str(T.batched_dot(x, y).owner.op) == "BatchedDot"
    with pytest.raises(TypeError, match="batch axis"):
        T.batched_dot(T.dscalar(), y)
    with pytest.raises(TypeError, match=r"BatchedDot: input 0 .* 2-d or 3-d"):
        BatchedDot()(T.dvector(), y)
    f = function([x, y], T.batched_dot(x, y))
    with pytest.raises(ValueError, match="same batch size"):
        f(np.ones((2, 3, 4)), np.ones((3, 4, 2)))
    with pytest.raises(ValueError, match="not aligned"):
        f(np.ones((2, 3, 4)), np.ones((2, 3, 2)))


@pytest.mark.parametrize(
    ("xs", "ys", "axes"),
    [
        ((2, 3, 4), (2, 4, 5), 1),
        ((2, 3, 4), (2, 3, 4), 2),
        ((2, 3, 4, 5), (2, 5, 4), [[2, 3], [2, 1]]),
    ],
)
def test_batched_tensordot(xs: tuple, ys: tuple, axes: object, rng: np.random.Generator) -> None:
    x, y = _t("float64", len(xs), "x"), _t("float64", len(ys), "y")
    xv, yv = rng.random(xs), rng.random(ys)
    if isinstance(axes, int):
        ax = [list(range(len(xs) - axes, len(xs))), list(range(1, 1 + axes))]
    else:
        ax = axes
    per = [[a - 1 for a in ax[0]], [b - 1 for b in ax[1]]]
    expected = np.stack([np.tensordot(a, b, per) for a, b in zip(xv, yv)])
    check_modes([x, y], T.batched_tensordot(x, y, axes), [xv, yv], expected)
    verify_grad(lambda a, b: T.batched_tensordot(a, b, axes), [xv, yv])
    with pytest.raises(ValueError, match="batch axis"):
        T.batched_tensordot(x, y, [[0], [0]])
