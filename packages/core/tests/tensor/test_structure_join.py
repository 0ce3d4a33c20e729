"""Join (join, concatenate, stack), Split, tile and roll against NumPy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.debugmode import DebugMode
from opgraph.gradient import Rop, grad, verify_grad
from opgraph.printing import debugprint, pp
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.joining import Join, Split, concatenate, join, roll, split, stack, tile
from opgraph.tensor.math import cast
from opgraph.tensor.shape import shape_i
from opgraph.testing.checks import check_infer_shape, check_modes, random_value

DTYPES = ["bool", "int8", "int32", "float32", "float64", "complex128"]
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
# Join, concatenate, stack


@pytest.mark.parametrize("dtype", DTYPES)
def test_join_concatenate_stack_match_numpy(dtype: str, rng: np.random.Generator) -> None:
    x = T.tensor(dtype, (False, False), "x")
    y = T.tensor(dtype, (False, False), "y")
    a = T.lscalar("a")
    xv = random_value(rng, (2, 3), dtype, low=-4, high=4)
    yv = random_value(rng, (2, 3), dtype, low=-4, high=4)
    outs = [
        join(0, x, y),
        join(1, x, y, x),
        join(-1, x, y),
        join(a, x, y),
        concatenate([x, y]),
        concatenate((x, y), axis=1),
        stack([x, y]),
        stack([x, y], axis=2),
        stack([x, y], -2),
        join(0, x),
    ]
    expected = [
        np.concatenate([xv, yv]),
        np.concatenate([xv, yv, xv], 1),
        np.concatenate([xv, yv], -1),
        np.concatenate([xv, yv], 1),
        np.concatenate([xv, yv]),
        np.concatenate([xv, yv], 1),
        np.stack([xv, yv]),
        np.stack([xv, yv], 2),
        np.stack([xv, yv], -2),
        xv,
    ]
    check_modes([x, y, a], outs, [xv, yv, 1], expected)
    for o in outs:
        assert o.type.dtype == dtype
    check_infer_shape([x, y], outs[:3], [xv, yv], Join)
    for out in outs[:4]:
        check_symbolic_shape([x, y, a], out, [xv, yv, 1])
    check_symbolic_shape([x, y, a], outs[3], [xv, yv, -2])


def test_join_mixed_dtypes_empty_nan_and_broadcastable() -> None:
    i = T.bvector("i")
    f = T.fvector("f")
    d = T.dvector("d")
    out = join(0, i, f)
    assert out.type.dtype == "float32" and join(0, i, d).type.dtype == "float64"
    iv = np.array([1, 2], "int8")
    fv = np.array([np.nan, np.inf], "float32")
    ev = np.zeros(0)
    check_modes(
        [i, f, d],
        [out, join(0, d, d), join(0, d, i)],
        [iv, fv, ev],
        [np.array([1, 2, np.nan, np.inf], "float32"), ev, iv.astype("float64")],
        modes=NAN_MODES,
    )
    r = T.row("r")
    m = T.matrix("m")
    assert join(0, r, m).type.broadcastable == (False, False)
    assert join(1, r, m).type.broadcastable == (True, False)
    assert join(T.lscalar(), r, m).type.broadcastable == (False, False)
    assert str(out.owner.op) == "Join" and str(Join(view=1)) == "Join{view=1}"
    assert pp(join(0, d, d)) == "join(TensorConstant{0}, d, d)"


def test_stack_of_scalars_is_a_make_vector(mode: str) -> None:
    a, b = T.dscalars("a", "b")
    n = T.lscalar("n")
    outs = [stack([a, b]), stack([a, 2.5, n]), stack([n, 1]), stack([[a, b], [b, a]])]
    assert str(outs[0].owner.op) == "MakeVector{dtype='float64'}"
    assert outs[2].type.dtype == "int64"
    expected = [
        np.array([1.0, 2.0]),
        np.array([1.0, 2.5, 3.0]),
        np.array([3, 1]),
        np.array([[1.0, 2.0], [2.0, 1.0]]),
    ]
    check_modes([a, b, n], outs, [1.0, 2.0, 3], expected, modes=(mode,))
    with pytest.deprecated_call():
        old = stack(a, b)
    assert str(old.owner.op) == "MakeVector{dtype='float64'}"
    with pytest.raises(IndexError, match="axis 1 is out of bounds for stacking scalars"):
        stack([a, b], axis=1)
    with pytest.raises(ValueError, match="the list of tensors is empty"):
        stack([])
    assert stack(tensors=[a], axis=0).type.ndim == 1


def test_join_errors_name_the_problem(mode: str) -> None:
    x, y = T.dmatrices("x", "y")
    a = T.lscalar("a")
    f = opgraph.function([x, y, a], join(a, x, y), mode=mode)
    with pytest.raises(
        ValueError, match=r"Join: cannot join arrays of shapes \(2, 3\), \(2, 4\) along axis 0"
    ):
        f(np.ones((2, 3)), np.ones((2, 4)), 0)
    with pytest.raises(ValueError, match="Join: axis 2 is out of range for 2 dimension"):
        f(np.ones((2, 3)), np.ones((2, 3)), 2)


def test_join_build_errors() -> None:
    x = T.dmatrix("x")
    with pytest.raises(TypeError, match=r"tensor 0 .* has 2, tensor 1 .* has 1"):
        join(0, x, T.dvector("v"))
    with pytest.raises(ValueError, match=r"is 0-d.*HINT: use stack"):
        join(0, T.dscalar(), T.dscalar())
    with pytest.raises(ValueError, match="axis 3 is out of range for 2"):
        join(3, x, x)
    with pytest.raises(TypeError, match="Join's axis must be an integer scalar"):
        join(0.5, x, x)
    with pytest.raises(ValueError, match="at least one tensor"):
        Join()(0)
    with pytest.raises(TypeError, match=r"write concatenate\(\[x, y\]\)"):
        concatenate(x, x)  # type: ignore[arg-type]


def test_join_and_stack_gradients(rng: np.random.Generator) -> None:
    xv, yv = rng.random((2, 3)), rng.random((4, 3))
    verify_grad(lambda x, y: join(0, x, y), [xv, yv], rng=rng)
    verify_grad(lambda x, y: join(1, x.T, y.T, x.T), [xv, yv], rng=rng)
    verify_grad(lambda x, y: stack([x, x * y[:2]], axis=1), [xv, yv], rng=rng)
    verify_grad(lambda a, b: stack([a, b, a * b]), [rng.random(()), rng.random(())], rng=rng)
    x, y = T.dmatrices("x", "y")
    a = T.lscalar("a")
    gx, gy = grad((join(a, x, y) * 2).sum(), [x, y])
    f = opgraph.function([x, y, a], [gx, gy], on_unused_input="ignore")
    for res, shp in zip(f(xv, yv, 0), [(2, 3), (4, 3)], strict=True):
        np.testing.assert_allclose(res, np.full(shp, 2.0))
    r = T.row("r")
    assert grad(join(0, r, x).sum(), r).type.broadcastable == (True, False)
    i = T.lvector("i")
    assert grad(cast(join(0, i, i), "float64").sum() + x.sum(), x) is not None
    e = T.dmatrix("e")
    rop = Rop(join(0, x, y), x, e)
    g = opgraph.function([x, y, e], rop, on_unused_input="ignore")
    np.testing.assert_allclose(g(xv, yv, xv), np.concatenate([xv, np.zeros((4, 3))]))


# ----------------------------------------------------------------------------------------
# Split


@pytest.mark.parametrize("dtype", ["int16", "float32", "float64", "bool"])
def test_split_matches_numpy(dtype: str, mode: str, rng: np.random.Generator) -> None:
    x = T.tensor(dtype, (False, False), "x")
    s = T.lvector("s")
    a = T.lscalar("a")
    xv = random_value(rng, (5, 4), dtype, low=-4, high=4)
    pieces = split(x, [2, 0, 3], 3) + split(x, s, 2, axis=a)
    expected = [xv[:2], xv[2:2], xv[2:], xv[:, :1], xv[:, 1:]]
    check_modes([x, s, a], pieces, [xv, np.array([1, 3]), 1], expected, modes=(mode,))
    assert str(pieces[0].owner.op) == "Split{3}" and Split(2) == Split(2)


def test_split_shapes_errors_and_gradient(rng: np.random.Generator) -> None:
    x = T.dmatrix("x")
    s = T.lvector("s")
    a = T.lscalar("a")
    xv = rng.random((5, 4))
    pieces = split(x, s, 2, axis=a)
    for p in pieces:
        check_symbolic_shape([x, s, a], p, [xv, np.array([3, 2]), 0])
        check_symbolic_shape([x, s, a], p, [xv, np.array([1, 3]), -1])
    check_infer_shape([x], split(x, [1, 4], 2), [xv], Split)
    single = split(x, [5], 1)
    assert not isinstance(single, list) and single.type == x.type
    f = opgraph.function([x, s, a], pieces)
    with pytest.raises(ValueError, match=r"sum to 4, but the array of shape \(5, 4\) has length 5"):
        f(xv, np.array([2, 2]), 0)
    with pytest.raises(ValueError, match="include a negative one"):
        f(xv, np.array([6, -1]), 0)
    with pytest.raises(ValueError, match="got 3 split length"):
        f(xv, np.array([1, 1, 3]), 0)
    with pytest.raises(ValueError, match=r"got 3 split length.*for 2 piece"):
        split(x, [1, 1, 3], 2)
    with pytest.raises(TypeError, match="cannot split the 0-d"):
        split(T.dscalar(), [1], 1)
    with pytest.raises(ValueError, match="positive number of pieces"):
        Split(0)
    verify_grad(lambda v: split(v, [2, 3], 2)[1] * 3, [xv], rng=rng)
    verify_grad(lambda v: join(0, *split(v, [1, 3, 1], 3)[::-1]), [xv], rng=rng)
    verify_grad(lambda v: split(v, [2, 2], 2, axis=1)[0], [xv], rng=rng)
    e = T.dmatrix("e")
    r = Rop(split(x, [2, 3], 2)[1], x, e)
    res = opgraph.function([x, e], r, on_unused_input="ignore")(xv, xv)
    np.testing.assert_allclose(res, xv[2:])


# ----------------------------------------------------------------------------------------
# tile, roll


def test_tile_matches_numpy(mode: str, rng: np.random.Generator) -> None:
    x = T.dmatrix("x")
    v = T.ivector("v")
    n = T.lscalar("n")
    r = T.lvector("r")
    xv = rng.random((2, 3))
    vv = np.array([1, 2, 3], "int32")
    outs = [
        tile(x, (2, 3)),
        tile(x, 2),
        tile(x, (2, 1, 2)),
        tile(v, n),
        tile(x, (n, 1)),
        tile(x, r, ndim=3),
        tile(x, np.array([1, 2])),
        tile(x, (1,), ndim=3),
        tile(x, [0, 2]),
    ]
    expected = [
        np.tile(xv, (2, 3)),
        np.tile(xv, 2),
        np.tile(xv, (2, 1, 2)),
        np.tile(vv, 3),
        np.tile(xv, (3, 1)),
        np.tile(xv, (2, 2)).reshape(1, 4, 6),
        np.tile(xv, (1, 2)),
        xv[None],
        np.tile(xv, (0, 2)),
    ]
    check_modes([x, v, n, r], outs, [xv, vv, 3, np.array([2, 2])], expected, modes=(mode,))
    assert outs[3].type.dtype == "int32" and outs[7].type.broadcastable == (True, False, False)


def test_tile_errors_and_gradient(rng: np.random.Generator) -> None:
    x = T.dmatrix("x")
    r = T.lvector("r")
    with pytest.raises(ValueError, match="ndim must be given"):
        tile(x, r)
    with pytest.raises(TypeError, match="reps must have an integer dtype"):
        tile(x, T.dvector())
    with pytest.raises(ValueError, match="more than ndim=2"):
        tile(x, (1, 2, 3), ndim=2)
    with pytest.raises(ValueError, match=r"smaller than x.ndim"):
        tile(x, 2, ndim=1)
    f = opgraph.function([x, r], tile(x, r, ndim=2))
    with pytest.raises(ValueError, match=r"SpecifyShape: the value has shape \(3,\)"):
        f(np.ones((2, 2)), np.array([1, 1, 1]))
    verify_grad(lambda a: tile(a, (2, 3)), [rng.random((2, 3))], rng=rng)
    verify_grad(lambda a: tile(a, (3, 1, 2)), [rng.random((2, 2))], rng=rng)


def test_roll_matches_numpy(mode: str, rng: np.random.Generator) -> None:
    x = T.dmatrix("x")
    s = T.lscalar("s")
    xv = rng.random((3, 4))
    outs = [
        roll(x, 1),
        roll(x, -2, 0),
        roll(x, s, 1),
        roll(x, 7, -1),
        roll(x, (1, 2), (0, 1)),
        roll(x[:, :0], 2, 1),
        roll(T.row("r"), 1, 0),
    ]
    rv = rng.random((1, 4))
    expected = [
        np.roll(xv, 1),
        np.roll(xv, -2, 0),
        np.roll(xv, 5, 1),
        np.roll(xv, 7, -1),
        np.roll(xv, (1, 2), (0, 1)),
        xv[:, :0],
        rv,
    ]
    r = outs[-1].owner.inputs[0] if outs[-1].owner else outs[-1]
    check_modes([x, s, r], outs, [xv, 5, rv], expected, modes=(mode,))
    assert outs[0].type == x.type


def test_roll_errors_and_gradient(rng: np.random.Generator) -> None:
    x = T.dmatrix("x")
    with pytest.raises(ValueError, match="roll: axis 2 is out of range"):
        roll(x, 1, 2)
    with pytest.raises(ValueError, match="do not match"):
        roll(x, (1, 2, 3), (0, 1))
    with pytest.raises(TypeError, match="roll's shift must be an integer scalar"):
        roll(x, 1.5, 0)
    verify_grad(lambda a: roll(a, 2, 1) * np.arange(4.0), [rng.random((3, 4))], rng=rng)
    verify_grad(lambda a: roll(a, -1), [rng.random((3, 4))], rng=rng)
    text = debugprint(roll(x, 1, 0), file="str")
    assert "Join" in text and "Split{2}" in text
