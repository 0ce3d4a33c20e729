"""OpFromGraph (``opgraph.compile.builders``): Theano 1.0's test_builders.py and more.

Functions compile with the default mode, so CI's three runs (c linker, ``linker=py``,
``mode=DEBUG_MODE``) each cover them; values are checked against NumPy, gradients with
``verify_grad``. Literals marked "oracle" were printed by Theano 1.0.5.
"""

from __future__ import annotations

import pickle
import warnings
from functools import partial

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile import function, shared
from opgraph.compile.builders import OpFromGraph
from opgraph.compile.function_module import UnusedInputError
from opgraph.compile.mode import Mode, get_mode
from opgraph.configdefaults import config
from opgraph.gradient import DisconnectedType, NullType, Rop, grad, verify_grad
from opgraph.graph.null_type import disconnected_type
from opgraph.printing import debugprint
from opgraph.tensor.shared_randomstreams import RandomStreams
from opgraph.testing.checks import check_infer_shape

try:
    import opgraph_optimizers.builders  # noqa: F401  (the inline rewrite)

    HAS_INLINE = True
except ImportError:  # core alone: inline OpFromGraph nodes run like the others
    HAS_INLINE = False

#: Theano's ``test_params``: every test runs with and without ``inline``.
CLASSES = [OpFromGraph, partial(OpFromGraph, inline=True)]
ids = ["plain", "inline"]


@pytest.fixture(autouse=True)
def _quiet() -> None:
    # The c backend says once per process that OpFromGraph runs its perform.
    warnings.filterwarnings("ignore", message=".*no kernel for OpFromGraph.*")


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed + sum(shape)).random(shape)


def ofg_nodes(f: object) -> list:
    return [n for n in f.maker.fgraph.toposort() if isinstance(n.op, OpFromGraph)]  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- values


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
def test_straightforward(cls: type) -> None:
    x, y, z = T.dmatrices("xyz")
    op = cls([x, y, z], [x + y * z])
    f = function([x, y, z], op(x, y, z) - op(y, z, x))
    xv, yv, zv = np.ones((2, 2)), np.ones((2, 2)) * 3, np.ones((2, 2)) * 5
    for _ in range(2):  # the compiled inner function is reused
        np.testing.assert_array_equal(f(xv, yv, zv), np.full((2, 2), 8.0))
    xv, yv, zv = rand(3, 4), rand(3, 4, seed=1), rand(3, 4, seed=2)
    np.testing.assert_allclose(f(xv, yv, zv), (xv + yv * zv) - (yv + zv * xv))
    if HAS_INLINE:
        assert bool(ofg_nodes(f)) != (cls is not OpFromGraph)


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
def test_size_changes(cls: type) -> None:
    x, y, z = T.dmatrices("xyz")
    op = cls([x, y], [T.dot(x, y)])
    f = function([x, y, z], op(x, op(y, z)))
    xv, yv, zv = np.ones((2, 3)), np.ones((3, 4)) * 3, np.ones((4, 5)) * 5
    for _ in range(2):
        res = f(xv, yv, zv)
        assert res.shape == (2, 5)
        np.testing.assert_array_equal(res, np.full((2, 5), 180.0))


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
def test_shared(cls: type) -> None:
    x, y, z = T.dmatrices("xyz")
    s = shared(rand(2, 2), name="s")
    op = cls([x, y, z], [x + y * z + s])
    out = op(x, y, z)
    assert out.owner.inputs[-1] is s  # the implicit input is appended at call time
    f = function([x, y, z], op(x, y, z) - op(y, z, x))
    xv, yv, zv = np.ones((2, 2)), np.ones((2, 2)) * 3, np.ones((2, 2)) * 5
    np.testing.assert_allclose(f(xv, yv, zv), np.full((2, 2), 8.0))
    g = function([x, y, z], out)
    s.set_value(np.full((2, 2), 10.0))
    np.testing.assert_allclose(g(xv, yv, zv), xv + yv * zv + 10.0)


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
def test_nested(cls: type) -> None:
    x, y = T.dvectors("xy")
    op_ft = cls([x, y], [x + y, x - y])
    op_ift = cls([x, y], [(x + y) / 2, (x - y) / 2])
    xx, yy = T.dvector("xx"), T.dvector("yy")
    f = function([xx, yy], op_ift(*op_ft(xx, yy)))
    xv, yv = rand(16), rand(16, seed=1)
    xv2, yv2 = f(xv, yv)
    np.testing.assert_allclose(xv2, xv)
    np.testing.assert_allclose(yv2, yv)
    # An OpFromGraph inside another one's inner graph.
    outer = cls([xx, yy], op_ft(xx, yy))
    a, b = outer(x, y)
    np.testing.assert_allclose(function([x, y], a * b)(xv, yv), (xv + yv) * (xv - yv))
    if HAS_INLINE and cls is not OpFromGraph:
        assert not ofg_nodes(function([x, y], a * b))


def test_explicit_modes_and_mode_kwarg() -> None:
    x, y = T.dvectors("xy")
    op = OpFromGraph([x, y], [x * y + 1])
    xv, yv = rand(5), rand(5, seed=1)
    for mode in ("FAST_COMPILE", "FAST_RUN", "DEBUG_MODE", Mode(linker="py", optimizer=None)):
        f = function([x, y], op(x, y) * 2, mode=mode)
        np.testing.assert_allclose(f(xv, yv), (xv * yv + 1) * 2)
    # The inner graph compiled with the mode of each function it ran in.
    assert any(type(m).__name__ == "DebugMode" for m, _ in op._compiled.values())
    fixed = OpFromGraph([x, y], [x - y], mode="FAST_COMPILE")
    f = function([x, y], fixed(x, y), mode=Mode(linker="py", optimizer=None))
    np.testing.assert_allclose(f(xv, yv), xv - yv)
    assert [repr(m) for m, _ in fixed._compiled.values()] == [repr(get_mode("FAST_COMPILE"))]


def test_outputs_never_alias_inputs_or_each_other() -> None:
    x = T.dvector("x")
    op = OpFromGraph([x], [x, x, x[::-1], x * 2])
    a, b, c, d = op(x)
    f = function([x], [a, b, c, d], mode=Mode(linker="py", optimizer=None))
    node = ofg_nodes(f)[0]
    xv = rand(4)
    storage = [[None] for _ in range(4)]
    op.perform(node, [xv], storage)
    values = [cell[0] for cell in storage]
    for k, v in enumerate(values):
        assert not np.shares_memory(v, xv), k
        for w in values[k + 1 :]:
            assert not np.shares_memory(v, w)
    np.testing.assert_array_equal(values[2], xv[::-1])
    # An in-place consumer of the output must not change the caller's input.
    g = function([x], op(x)[0] + 1)
    keep = xv.copy()
    np.testing.assert_allclose(g(xv), keep + 1)
    np.testing.assert_array_equal(xv, keep)


def test_two_nodes_of_one_op_keep_their_values() -> None:
    x = T.dmatrix("x")
    op = OpFromGraph([x], [(x * 2).T])  # a view of an inner intermediate
    f = function([x], [op(x), op(x + 1)])
    xv = rand(2, 3)
    a, b = f(xv)
    np.testing.assert_allclose(a, (xv * 2).T)
    np.testing.assert_allclose(b, ((xv + 1) * 2).T)


def test_constant_output_and_constant_input() -> None:
    x = T.dvector("x")
    op = OpFromGraph([x], [T.constant(np.arange(3.0)), x + T.constant(1.0)])
    c, d = op(x)
    f = function([x], [c * 1, d])
    out_c, out_d = f(np.zeros(3))
    np.testing.assert_array_equal(out_c, np.arange(3.0))
    np.testing.assert_array_equal(out_d, np.ones(3))
    # Constant inputs to the node fold through the Op.
    g = function([], op(np.array([1.0, 2.0, 3.0]))[1])
    np.testing.assert_array_equal(g(), [2.0, 3.0, 4.0])


# --------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
def test_grad(cls: type) -> None:
    x, y, z = T.dmatrices("xyz")
    op = cls([x, y, z], [x + y * z])
    f = op(x, y, z)
    f = f - grad(T.sum(f), y)
    fn = function([x, y, z], f)
    xv, yv, zv = np.ones((2, 2)), np.ones((2, 2)) * 3, np.ones((2, 2)) * 5
    np.testing.assert_array_equal(fn(xv, yv, zv), np.full((2, 2), 11.0))


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
def test_grad_grad(cls: type) -> None:
    x, y, z = T.dmatrices("xyz")
    op = cls([x, y, z], [x + y * z])
    f = op(x, y, z)
    f = f - grad(T.sum(f), y)
    f = f - grad(T.sum(f), y)
    fn = function([x, y, z], f)
    xv, yv, zv = np.ones((2, 2)), np.ones((2, 2)) * 3, np.ones((2, 2)) * 5
    np.testing.assert_allclose(fn(xv, yv, zv), np.full((2, 2), 6.0))


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
def test_shared_grad(cls: type) -> None:
    x, y, z = T.dmatrices("xyz")
    s = shared(rand(2, 2))
    op = cls([x, y, z], [x + y * z + s])
    f = op(x, y, z)
    f = f - grad(T.sum(f), y)
    fn = function([x, y, z], f)
    xv, yv, zv = np.ones((2, 2)), np.ones((2, 2)) * 3, np.ones((2, 2)) * 5
    np.testing.assert_allclose(fn(xv, yv, zv), 11.0 + s.get_value())
    f = op(x, y, z)
    f = f - grad(T.sum(f), s)  # the gradient reaches the shared variable
    fn = function([x, y, z], f)
    np.testing.assert_allclose(fn(xv, yv, zv), 15.0 + s.get_value())


def test_verify_grad_multi_output_and_nonlinear() -> None:
    x, y = T.dmatrices("xy")
    op = OpFromGraph([x, y], [T.tanh(x) * y, T.exp(x - y).sum(axis=0)])

    def cost(a: object, b: object) -> object:
        u, v = op(a, b)
        return u.sum(axis=1) * 2 + v.sum() * T.ones_like(u.sum(axis=1))

    verify_grad(cost, [rand(3, 4), rand(3, 4, seed=1)])
    verify_grad(lambda a, b: op(a, b)[0], [rand(2, 3), rand(2, 3, seed=1)])
    # Second derivative: the gradient Op is itself differentiable.
    verify_grad(lambda a, b: grad(op(a, b)[0].sum(), a), [rand(2, 3), rand(2, 3, seed=1)])


def test_grad_of_identity_and_repeated_outputs() -> None:
    # Theano 1.0 fails on both (its gradient Op lists the same variable twice).
    x = T.dvector("x")
    ident = OpFromGraph([x], [x, x])
    a, b = ident(x)
    g = function([x], grad((a * 2 + b * 3).sum(), x))
    np.testing.assert_allclose(g(rand(3)), np.full(3, 5.0))


def test_grad_of_one_of_two_outputs() -> None:
    x, y = T.dvectors("xy")
    op = OpFromGraph([x, y], [x + y, x - y])
    o1, o2 = op(x, y)
    xv, yv = np.arange(3.0), np.ones(3) * 2
    gx, gy = function([x, y], grad(o1.sum(), [x, y]))(xv, yv)
    np.testing.assert_array_equal(gx, np.ones(3))
    np.testing.assert_array_equal(gy, np.ones(3))
    gx, gy = function([x, y], grad((o1 * o2).sum(), [x, y]))(xv, yv)
    np.testing.assert_allclose(gx, 2 * xv)
    np.testing.assert_allclose(gy, -2 * yv)


def test_gradient_op_is_named_and_cached() -> None:
    x, y = T.dvectors("xy")
    op = OpFromGraph([x, y], [x * y], name="mul")
    g = grad(op(x, y).sum(), x)
    assert str(g.owner.op) == "mul_lop{inline=False}"  # oracle
    assert op.get_lop_op() is g.owner.op
    grad(op(y, x).sum(), x)
    assert op.get_lop_op() is g.owner.op


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
def test_grad_override(cls: type) -> None:
    x, y = T.dvectors("xy")

    def go(inps: list, gs: list) -> list:
        x, y = inps
        (g,) = gs
        return [g * y * 2, g * x * 1.5]

    dedz = T.dvector("dedz")
    op_mul_grad = cls([x, y, dedz], go([x, y], [dedz]))
    op_mul = cls([x, y], [x * y], grad_overrides=go)
    op_mul2 = cls([x, y], [x * y], grad_overrides=op_mul_grad)
    xx, yy = T.dvector("xx"), T.dvector("yy")
    xv, yv = rand(16), rand(16, seed=1)
    for op in [op_mul, op_mul2]:
        dx, dy = grad(T.sum(op(xx, yy)), [xx, yy])
        dxv, dyv = function([xx, yy], [dx, dy])(xv, yv)
        np.testing.assert_allclose(dxv, yv * 2)
        np.testing.assert_allclose(dyv, xv * 1.5)

    def go1(inps: list, gs: list) -> object:
        _x, w, _b = inps
        return gs[0] * w * 2

    def go2(inps: list, gs: list) -> object:
        x, _w, _b = inps
        return gs[0] * x * 1.5

    w, b = T.dvectors("wb")
    op_linear = cls([x, w, b], [x * w + b], grad_overrides=[go1, go2, "default"])
    xx, ww, bb = T.dvector("xx"), T.dvector("yy"), T.dvector("bb")
    dx, dw, db = grad(T.sum(op_linear(xx, ww, bb)), [xx, ww, bb])
    xv, wv, bv = rand(16), rand(16, seed=1), rand(16, seed=2)
    dxv, dwv, dbv = function([xx, ww, bb], [dx, dw, db])(xv, wv, bv)
    np.testing.assert_allclose(dxv, wv * 2)
    np.testing.assert_allclose(dwv, xv * 1.5)
    np.testing.assert_allclose(dbv, np.ones(16))

    op_linear2 = cls(
        [x, w, b], [x * w + b], grad_overrides=[go1, NullType()(), DisconnectedType()()]
    )
    zz2 = T.sum(op_linear2(xx, ww, bb))
    dx2, dw2, db2 = grad(
        zz2,
        [xx, ww, bb],
        return_disconnected="Disconnected",
        disconnected_inputs="ignore",
        null_gradients="return",
    )
    assert isinstance(dx2.type, T.TensorType)
    assert dx2.ndim == 1
    assert isinstance(dw2.type, NullType)
    assert isinstance(db2.type, DisconnectedType)
    np.testing.assert_allclose(function([xx, ww, bb], dx2)(xv, wv, bv), wv * 2)
    assert op_linear2.connection_pattern(None) == [[True], [True], [False]]


def test_whole_override_null_or_disconnected() -> None:
    x, y = T.dvectors("xy")
    null = OpFromGraph([x, y], [x * y], grad_overrides=NullType("no grad")())
    gx = grad(null(x, y).sum(), x, null_gradients="return")
    assert isinstance(gx.type, NullType)
    with pytest.raises(Exception, match=r"undefined|NaN"):
        grad(null(x, y).sum(), x)
    disc = OpFromGraph([x, y], [x * y], grad_overrides=disconnected_type())
    gx = grad(disc(x, y).sum(), x, disconnected_inputs="ignore")
    f = function([x, y], gx, on_unused_input="ignore")
    np.testing.assert_array_equal(f(rand(3), rand(3)), np.zeros(3))
    assert disc.connection_pattern(None) == [[False], [False]]


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
def test_lop_override(cls: type) -> None:
    x = T.dvector()
    y = 1.0 / (1.0 + T.exp(-x))

    def lop_ov(inps: list, outs: list, grads: list) -> list:
        (y_,) = outs
        (dedy_,) = grads
        return [2.0 * y_ * (1.0 - y_) * dedy_]

    y_, dedy = T.dvector(), T.dvector()
    op_lop_ov = cls([x, y_, dedy], [2.0 * y_ * (1.0 - y_) * dedy])
    xx = T.dvector()
    gyy1 = 2.0 * grad(T.sum(T.nnet.sigmoid(xx)), xx)
    for ov in [lop_ov, op_lop_ov]:
        op = cls([x], [y], lop_overrides=ov)
        gyy2 = grad(T.sum(op(xx)), xx)
        y1val, y2val = function([xx], [gyy1, gyy2])(rand(32))
        np.testing.assert_allclose(y1val, y2val)


def test_set_overrides_and_lop_list() -> None:
    x, y = T.dvectors("xy")
    op = OpFromGraph([x, y], [x * y])
    xv, yv = rand(4), rand(4, seed=1)
    f = function([x, y], grad(op(x, y).sum(), x))
    np.testing.assert_allclose(f(xv, yv), yv)
    op.set_grad_overrides(lambda inps, gs: [gs[0] * 5.0, gs[0]])
    f = function([x, y], grad(op(x, y).sum(), x), on_unused_input="ignore")
    np.testing.assert_allclose(f(xv, yv), np.full(4, 5.0))
    op.set_lop_overrides(["default", lambda inps, outs, gs: outs[0] * gs[0]])
    gx, gy = grad(op(x, y).sum(), [x, y])
    gxv, gyv = function([x, y], [gx, gy])(xv, yv)
    np.testing.assert_allclose(gxv, yv)
    np.testing.assert_allclose(gyv, xv * yv)
    op.set_rop_overrides(lambda inps, epts: [epts[0] * 0.0 + 7.0])
    u, v = T.dvectors("uv")
    r = function([x, y, u, v], Rop(op(x, y), [x, y], [u, v]), on_unused_input="ignore")
    np.testing.assert_allclose(r(xv, yv, xv, yv), np.full(4, 7.0))


def test_verify_grad_with_shared_variable() -> None:
    x = T.dmatrix("x")
    s = shared(rand(3, 2), name="s")
    op = OpFromGraph([x], [T.dot(x, s) ** 2])
    verify_grad(lambda a: op(a), [rand(4, 3)])
    g = grad(op(x).sum(), s)
    xv = rand(4, 3)
    expected = xv.T @ (2 * (xv @ s.get_value()))
    np.testing.assert_allclose(function([x], g)(xv), expected)


def test_override_errors() -> None:
    x, y = T.dvectors("xy")
    with pytest.raises(ValueError, match="mutually exclusive"):
        OpFromGraph([x], [x * 2], grad_overrides=lambda i, g: g, lop_overrides=lambda i, o, g: g)
    bad = OpFromGraph([x, y], [x * y], grad_overrides=["default"])
    with pytest.raises(ValueError, match="Need to override 2 gradients, got 1"):
        grad(bad(x, y).sum(), x)
    bad = OpFromGraph([x, y], [x * y], grad_overrides=[3, "default"])
    with pytest.raises(TypeError, match="L_op/gradient override should be"):
        grad(bad(x, y).sum(), x)
    bad = OpFromGraph([x, y], [x * y], grad_overrides=lambda i, g: g[0])
    with pytest.raises(TypeError, match="should return a list"):
        grad(bad(x, y).sum(), x)
    bad = OpFromGraph([x, y], [x * y], grad_overrides=lambda i, g: [g[0]])
    with pytest.raises(ValueError, match="list of 2 outputs, got 1"):
        grad(bad(x, y).sum(), x)
    bad = OpFromGraph([x, y], [x * y], grad_overrides=T.dvector())
    with pytest.raises(ValueError, match="DisconnectedType or NullType"):
        grad(bad(x, y).sum(), x)
    bad = OpFromGraph([x, y], [x * y], grad_overrides=OpFromGraph([x], [x]))
    with pytest.raises(ValueError, match="expect overrider with 3 inputs, got 1"):
        grad(bad(x, y).sum(), x)
    bad = OpFromGraph([x, y], [x * y], rop_overrides=[lambda i, e: i[0], "default"])
    with pytest.raises(ValueError, match="Need to override 1 Rop, got 2"):
        Rop(bad(x, y), x, y)


# --------------------------------------------------------------------------- R_op


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
def test_rop(cls: type) -> None:
    a, M = T.dvector(), T.dmatrix()
    op_matmul = cls([a, M], [T.dot(a, M)])
    x, W, du = T.dvector(), T.dmatrix(), T.dvector()
    dv = Rop(op_matmul(x, W), x, du)
    fn = function([x, W, du], dv)
    xval, Wval, duval = rand(16), rand(16, 16), rand(16, seed=3)
    np.testing.assert_allclose(fn(xval, Wval, duval), np.dot(duval, Wval))


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
def test_rop_override(cls: type) -> None:
    x, y = T.dvectors("xy")

    def ro(inps: list, epts: list) -> list:
        x, y = inps
        u, v = epts
        return [u * y * 2.0 + x * v * 1.5]

    u, v = T.dvectors("uv")
    op_mul_rop = cls([x, y, u, v], ro([x, y], [u, v]))
    op_mul = cls([x, y], [x * y], rop_overrides=ro)
    op_mul2 = cls([x, y], [x * y], rop_overrides=op_mul_rop)
    xx, yy = T.dvector("xx"), T.dvector("yy")
    du, dv = T.dvector("du"), T.dvector("dv")
    vals = np.random.default_rng(5).random((4, 32))
    for op in [op_mul, op_mul2]:  # (Theano's test used op_mul twice)
        dw = Rop(op(xx, yy), [xx, yy], [du, dv])
        dwval = function([xx, yy, du, dv], dw)(*vals)
        np.testing.assert_allclose(dwval, vals[0] * vals[3] * 1.5 + vals[1] * vals[2] * 2.0)
    # List form: one entry per output.
    op_list = cls(
        [x, y],
        [x * y, x + y, x - y],
        rop_overrides=[lambda i, e: e[0] * 10.0, "default", disconnected_type()],
    )
    r1, r2, r3 = Rop(op_list(xx, yy), [xx, yy], [du, dv])
    got = function([xx, yy, du, dv], [r1, r2, r3])(*vals)
    np.testing.assert_allclose(got[0], vals[2] * 10.0)
    np.testing.assert_allclose(got[1], vals[2] + vals[3])
    np.testing.assert_array_equal(got[2], np.zeros(32))
    op_null = cls([x, y], [x * y, x + y], rop_overrides=["default", NullType()()])
    r1, r2 = Rop(op_null(xx, yy), [xx, yy], [du, dv])
    assert isinstance(r2.type, NullType)
    np.testing.assert_allclose(
        function([xx, yy, du, dv], r1)(*vals), vals[2] * vals[1] + vals[0] * vals[3]
    )


def test_rop_with_shared_variable() -> None:
    x = T.dvector("x")
    s = shared(rand(4), name="s")
    op = OpFromGraph([x], [x * s])
    u = T.dvector("u")
    fn = function([x, u], Rop(op(x), x, u))
    xv, uv = rand(4, seed=1), rand(4, seed=2)
    np.testing.assert_allclose(fn(xv, uv), uv * s.get_value())


# --------------------------------------------------------------------------- connection pattern


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
def test_connection_pattern_override(cls: type) -> None:
    x, y = T.dvectors("xy")

    def f1(x: object, y: object) -> object:
        del x
        return y + T.round(y)

    def f1_back(inputs: list, output_gradients: list) -> list:
        return [output_gradients[0], disconnected_type()]

    op = cls(
        inputs=[x, y],
        outputs=[f1(x, y)],
        grad_overrides=f1_back,
        connection_pattern=[[True], [False]],
        on_unused_input="ignore",
    )
    c = op(x, y)
    g1 = grad(c.sum(), x)
    out = g1.eval({x: np.ones((5,)), y: np.ones((5,))})
    np.testing.assert_allclose(out, [1.0] * 5)
    computed = cls([x, y], [f1(x, y)], grad_overrides=f1_back, on_unused_input="ignore")
    assert computed.connection_pattern(None) == [[False], [False]]  # oracle


@pytest.mark.parametrize("cls", CLASSES, ids=ids)
def test_connection_pattern(cls: type) -> None:
    x, y, z = T.dmatrices("xyz")
    op1 = cls([x, y, z], [x * y, y * z])
    assert op1.connection_pattern(None) == [[True, False], [True, True], [False, True]]

    m, n, p, q = T.dmatrices("mnpq")
    o1, o2 = op1(m, n, p)
    out1, out2 = op1(o1, q, o2)
    op2 = cls([m, n, p, q], [out1, out2])
    assert op2.connection_pattern(None) == [
        [True, False],
        [True, True],
        [False, True],
        [True, True],
    ]

    srng = RandomStreams(seed=234)
    rv_u = srng.uniform((2, 2))
    x, y = T.dmatrices("xy")
    op3 = cls([x, y], [x + rv_u, y + 3, 3 + rv_u])
    assert op3.connection_pattern(None) == [
        [True, False, False],
        [False, True, False],
        [True, False, True],
    ]
    # Without updates, the random state is an ordinary (constant) input: equal draws.
    f = function([x, y], op3(x, y))
    a1, _, c1 = f(np.zeros((2, 2)), np.zeros((2, 2)))
    np.testing.assert_allclose(a1, c1 - 3)
    assert np.all((a1 >= 0) & (a1 < 1))


# --------------------------------------------------------------------------- shapes


def test_infer_shape() -> None:
    x, y = T.dmatrices("xy")
    op_graph = OpFromGraph([x, y], [x + y, x * y, T.dot(x, y.T), x.sum(axis=0)])
    q, p = T.dmatrices("qp")
    check_infer_shape([q, p], op_graph(q, p), [np.ones((3, 4)), np.ones((3, 4))], OpFromGraph)
    # The shape graph does not need the node: the compiled shape function has none.
    outs = op_graph(q, p)
    f = function([q, p], [o.shape for o in outs], mode="FAST_RUN")
    got = f(np.ones((3, 4)), np.ones((3, 4)))
    assert [tuple(g) for g in got] == [(3, 4), (3, 4), (3, 3), (4,)]
    if HAS_INLINE:
        assert not ofg_nodes(f)


def test_infer_shape_falls_back_to_the_inner_values() -> None:
    x = T.dvector("x")
    s = shared(np.arange(6.0), name="s")
    op = OpFromGraph([x], [x[(x > 0.5).nonzero()], x.reshape((2, -1)) + s.reshape((2, 3))])
    q = T.dvector("q")
    qv = np.array([0.1, 0.7, 0.9, 0.2, 0.6, 0.0])
    shapes = op.infer_shape(op(q)[0].owner, [(6,), ()])
    dims = [T.as_tensor_variable(d) for d in (*shapes[0], *shapes[1])]
    assert function([q], dims)(qv) == [3, 2, 3]


# --------------------------------------------------------------------------- printing, identity


def test_str_and_debugprint() -> None:
    x, y, z = T.dmatrices("xyz")
    op = OpFromGraph([x, y, z], [x + y * z])
    assert str(op) == "OpFromGraph{inline=False}"  # oracle
    assert str(OpFromGraph([x], [x * 2], name="myop", inline=True)) == "myop{inline=True}"
    text = debugprint(op(x, y, z), file="str")
    assert text.splitlines()[0].startswith("OpFromGraph{inline=False} [id A] ''")  # oracle


def test_equality_is_structural() -> None:
    x, y = T.dvectors("xy")
    a = OpFromGraph([x, y], [x * y + 1])
    u, v = T.dvectors("uv")
    b = OpFromGraph([u, v], [u * v + 1])
    assert a == b and hash(a) == hash(b)
    assert a != OpFromGraph([u, v], [u * v + 2])
    assert a != OpFromGraph([u, v], [u * v + 1], inline=True)
    assert a != OpFromGraph([u, v], [u * v + 1], grad_overrides=lambda i, g: [g[0], g[0]])
    assert a != OpFromGraph([u, v], [u * v + 1], name="other")


# --------------------------------------------------------------------------- pickling


def scale_grad(inputs: list, output_grads: list) -> list:
    """A module-level override (pickles by reference); the shared input comes last."""
    return [output_grads[0] * 3.0, disconnected_type()]


def test_pickle_op_and_function() -> None:
    x = T.dvector("x")
    s = shared(np.array([1.0, 2.0]), name="s")
    op = OpFromGraph([x], [x * s], grad_overrides=scale_grad, name="scaled")
    op2 = pickle.loads(pickle.dumps(op))
    assert str(op2) == "scaled{inline=False}" and op2 == op
    y = T.dvector("y")
    f = function([y], [op(y), grad(op(y).sum(), y)])
    f(np.ones(2))
    g = pickle.loads(pickle.dumps(f))
    val, gr = g(np.array([3.0, 4.0]))
    np.testing.assert_allclose(val, [3.0, 8.0])
    np.testing.assert_allclose(gr, [3.0, 3.0])
    assert ofg_nodes(g)
    # An unpickled op still builds graphs and gradients.
    np.testing.assert_allclose(function([y], op2(y) + 1)(np.ones(2)), [2.0, 3.0])


# --------------------------------------------------------------------------- bad input


def test_bad_inputs() -> None:
    x, y, z = T.dmatrices("xyz")
    op = OpFromGraph([x, y, z], [x + y * z])
    with pytest.raises(ValueError, match="Expected 3 inputs, got 2"):  # oracle's words
        op(x, y)
    with pytest.raises(
        TypeError, match=r"input 0 .* TensorType\(float64, vector\).*float64, matrix"
    ):
        op(T.dvector(), y, z)
    with pytest.raises(TypeError, match=r"(?s)input 1 .*float32, matrix.*HINT"):
        op(x, T.fmatrix(), z)
    with pytest.raises(TypeError, match="outputs must be list"):
        OpFromGraph([x], x * 2)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Variable instances"):
        OpFromGraph([x, 3], [x * 2])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="updates and givens"):
        OpFromGraph([x], [x * 2], updates={})
    with pytest.raises(TypeError, match="unexpected keyword"):
        OpFromGraph([x], [x * 2], profile=True)
    with pytest.raises(ValueError, match="not one of its inputs"):
        OpFromGraph([x], [x * y])
    with pytest.raises(ValueError, match="connection_pattern"):
        OpFromGraph([x], [x * 2], connection_pattern=[[True, False]])


def test_unused_input_raises_at_compile_like_theano() -> None:
    x, y = T.dvectors("xy")
    op = OpFromGraph([x, y], [x * 2])
    out = op(x, y)
    if config.on_unused_input == "raise":
        with pytest.raises(UnusedInputError, match="index 1"):
            function([x, y], out, mode=Mode(linker="py", optimizer=None))
    ok = OpFromGraph([x, y], [x * 2], on_unused_input="ignore")
    f = function([x, y], ok(x, y))
    np.testing.assert_allclose(f(np.ones(2), np.ones(2)), [2.0, 2.0])


def test_compute_test_value() -> None:
    x = T.dscalar("x")
    x.tag.test_value = np.array(1.0)
    op = OpFromGraph([x], [x**3])
    y = T.dscalar("y")
    y.tag.test_value = np.array(2.0)
    with config.change_flags(compute_test_value="raise"):
        f = op(y)
        grad_f = grad(f, y)
    assert f.tag.test_value == 8.0
    assert grad_f.tag.test_value == 12.0
