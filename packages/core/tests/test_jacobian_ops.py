"""jacobian / hessian: analytic and finite-difference checks, shapes, gradients, errors."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.mode import get_mode
from opgraph.gradient import DisconnectedInputError, grad, verify_grad
from opgraph.tensor.jacobian import JacobianOp, hessian, jacobian, vector_jacobian
from opgraph.tensor.math import exp, sin, tanh
from opgraph.testing.checks import ALL_MODES, check_infer_shape

LINKERS = ["py", "vm"]


def mode_with(name: str, linker: str) -> Any:
    return get_mode(name).clone(linker=linker)


def numeric_jacobian(f: Any, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences of vector function ``f`` at ``x``: shape ``f(x).shape + x.shape``."""
    y = np.asarray(f(x))
    out = np.zeros(y.shape + x.shape)
    for idx in np.ndindex(*x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += eps
        xm[idx] -= eps
        out[(..., *idx)] = (np.asarray(f(xp)) - np.asarray(f(xm))) / (2 * eps)
    return out


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("name", ALL_MODES)
def test_jacobian_and_hessian_of_powers(name: str, linker: str) -> None:
    x = T.dvector("x")
    f = opgraph.function(
        [x], [jacobian(x**2, x), hessian((x**3).sum(), x)], mode=mode_with(name, linker)
    )
    for xv in (np.array([1.0, 2.0, 3.0]), np.array([-0.5])):
        j, h = f(xv)
        np.testing.assert_allclose(j, np.diag(2 * xv))
        np.testing.assert_allclose(h, np.diag(6 * xv))
    j, h = f(np.zeros(0))  # the length is symbolic, even 0
    assert j.shape == (0, 0) and h.shape == (0, 0)


def test_against_finite_differences_with_several_wrt() -> None:
    x = T.dvector("x")
    m = T.dmatrix("m")
    expr = tanh(x * m.sum(axis=0)) + sin(x) * m[0, 0]
    jx, jm = jacobian(expr, [x, m])
    assert jx.type.ndim == 2 and jm.type.ndim == 3
    f = opgraph.function([x, m], [jx, jm])
    rng = np.random.default_rng(0)
    xv, mv = rng.random(3), rng.random((2, 3))
    got_x, got_m = f(xv, mv)
    g = opgraph.function([x, m], expr)
    np.testing.assert_allclose(got_x, numeric_jacobian(lambda v: g(v, mv), xv), atol=1e-7)
    np.testing.assert_allclose(got_m, numeric_jacobian(lambda v: g(xv, v), mv), atol=1e-7)
    as_tuple = jacobian(expr, (x,))
    assert isinstance(as_tuple, tuple) and len(as_tuple) == 1


def test_scalar_expression_gives_the_gradient() -> None:
    x = T.dvector("x")
    j = jacobian((x**2).sum(), x)
    np.testing.assert_allclose(opgraph.function([x], j)([1.0, 2.0]), [2.0, 4.0])
    assert isinstance(jacobian((x**2).sum(), [x]), list)


def test_hessian_of_a_coupled_function_and_several_wrt() -> None:
    x, y = T.dvectors("x", "y")
    cost = (exp(x) * y.sum()).sum() + (x**2).sum() * (y**2).sum()
    hx, hy = hessian(cost, [x, y])
    f = opgraph.function([x, y], [hx, hy])
    xv, yv = np.array([0.1, 0.2]), np.array([1.0, 2.0, 3.0])
    rx, ry = f(xv, yv)
    np.testing.assert_allclose(rx, np.diag(np.exp(xv) * yv.sum()) + 2 * (yv**2).sum() * np.eye(2))
    np.testing.assert_allclose(ry, 2 * (xv**2).sum() * np.eye(3))


def test_shared_variables_intermediate_wrt_and_consider_constant() -> None:
    w = opgraph.shared(np.array([1.0, 2.0, 3.0]), name="w")
    x = T.dvector("x")
    y = x * 2
    z = y * w
    f = opgraph.function([x], [jacobian(z, y), jacobian(z, x), jacobian(y * x, x, [y])])
    j_y, j_x, j_c = f(np.array([1.0, 1.0, 1.0]))
    np.testing.assert_allclose(j_y, np.diag([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(j_x, np.diag([2.0, 4.0, 6.0]))
    # y = 2x is held constant: d(y * x)/dx = y, not 4x.
    np.testing.assert_allclose(j_c, np.diag([2.0, 2.0, 2.0]))
    w.set_value(np.array([0.0, 1.0, 0.0]))
    np.testing.assert_allclose(f(np.ones(3))[0], np.diag([0.0, 1.0, 0.0]))


@pytest.mark.parametrize("name", ALL_MODES)
def test_gradient_through_jacobian_and_hessian(name: str) -> None:
    x = T.dvector("x")
    gj = grad((jacobian(x**3, x) ** 2).sum(), x)  # sum((3x^2)^2) -> 36 x^3
    gh = grad((hessian((x**3).sum(), x) ** 2).sum(), x)  # sum((6x)^2) -> 72 x
    f = opgraph.function([x], [gj, gh], mode=name)
    xv = np.array([1.0, -2.0])
    r1, r2 = f(xv)
    np.testing.assert_allclose(r1, 36 * xv**3)
    np.testing.assert_allclose(r2, 72 * xv)
    weights = T.constant(np.arange(9.0).reshape(3, 3))
    verify_grad(
        lambda v: (jacobian(sin(v) * v.sum(), v) * weights).sum(axis=0),
        [np.array([0.3, -0.4, 0.5])],
        mode=name,
    )


def test_third_derivative() -> None:
    x = T.dvector("x")
    h = hessian((x**4).sum(), x)  # diag(12 x^2)
    t = jacobian(h.sum(axis=0), x)  # diag(24 x)
    np.testing.assert_allclose(opgraph.function([x], t)([1.0, 2.0]), np.diag([24.0, 48.0]))


def test_infer_shape_and_printing() -> None:
    x = T.dvector("x")
    m = T.dmatrix("m")
    jx, jm = jacobian(x * m.sum(), [x, m])
    check_infer_shape([x, m], [jx, jm], [np.ones(3), np.ones((2, 4))], JacobianOp)
    node = jx.owner
    assert str(node.op) == "JacobianOp"
    n = T.lscalar("n")
    shapes = node.op.infer_shape(
        node, [(n,), *[(n,) if i is x else (2, 4) for i in node.inputs[1:]]]
    )
    assert shapes[0] == (n, n) and shapes[1] == (n, 2, 4)
    assert pickle.loads(pickle.dumps(node.op))._fn is None


def test_errors() -> None:
    x = T.dvector("x")
    m = T.dmatrix("m")
    with pytest.raises(ValueError, match="flatten it first"):
        jacobian(m * 2, x)
    with pytest.raises(ValueError, match="scalar cost"):
        hessian(x * 2, x)
    with pytest.raises(ValueError, match="expects vectors as wrt"):
        hessian(m.sum(), m)
    with pytest.raises(DisconnectedInputError):
        jacobian(x * 2, T.dvector("y"))
    y = T.dvector("y")
    j = jacobian(x * 2, [x, y], disconnected_inputs="ignore")[1]
    np.testing.assert_allclose(opgraph.function([x, y], j)([1.0, 2.0], [5.0]), np.zeros((2, 1)))
    with pytest.raises(ValueError, match="needs a vector expression"):
        vector_jacobian((x**2).sum(), [x])
    op = jacobian(x**2, x).owner.op
    with pytest.raises(TypeError, match="loops over a vector"):
        op(m, x)
    with pytest.raises(ValueError, match="'map' or 'sum'"):
        JacobianOp([x], [x], 0, ["stack"], [(0, False)])
