"""Theano's ``Assert`` (opgraph.tensor.assert_op) and ``DotModulo`` (opgraph.sandbox.rng_mrg).

Golden values come from Theano 1.0.5 (``THEANO_FLAGS=device=cpu,cxx=``). CI runs this file
under the default mode, ``linker=py`` and ``DEBUG_MODE``.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.gradient import verify_grad
from opgraph.printing import pp
from opgraph.sandbox import rng_mrg
from opgraph.sandbox.rng_mrg import DotModulo
from opgraph.tensor.assert_op import Assert, assert_, assert_op


def test_passes_value_and_raises_with_message() -> None:
    x = T.vector("x")
    f = opgraph.function([x], Assert("x too big")(x, T.lt(x.size, 3)))
    np.testing.assert_array_equal(f([1.0, 2.0]), [1.0, 2.0])
    with pytest.raises(AssertionError, match="x too big"):
        f([1.0, 2.0, 3.0])


def test_several_conditions_and_default_message() -> None:
    x = T.vector("x")
    n = T.iscalar("n")
    f = opgraph.function([x, n], assert_op(x * 2, T.gt(n, 0), T.lt(n, 10)))
    np.testing.assert_array_equal(f([1.0], 5), [2.0])
    for bad in (0, 10):
        with pytest.raises(AssertionError, match="Theano Assert failed!"):
            f([1.0], bad)


def test_perform_returns_the_input_itself() -> None:
    x = T.matrix("x")
    node = assert_(x, T.constant(True)).owner
    value = np.ones((2, 3))
    out: list[list[object]] = [[None]]
    node.op.perform(node, [value, np.array(True)], out)
    assert out[0][0] is value
    assert node.op.view_map == {0: [0]}
    with pytest.raises(AssertionError, match="Theano Assert failed!"):
        node.op.perform(node, [value, np.array(0.0)], [[None]])


def test_make_node_checks() -> None:
    x = T.vector("x")
    with pytest.raises(TypeError, match="condition 0 must be a 0-d tensor"):
        Assert()(x, x > 0)
    with pytest.raises(TypeError, match="msg must be a str"):
        Assert(3)  # type: ignore[arg-type]
    out = Assert()(x, T.constant(1))
    assert out.type == x.type


def test_printing_as_theano() -> None:
    # Theano 1.0.5: str(op) and pp print Assert{msg='x too big'}.
    x = T.vector("x")
    a = Assert("x too big")(x, T.lt(x.size, 3))
    assert str(a.owner.op) == "Assert{msg='x too big'}"
    assert pp(a).startswith("Assert{msg='x too big'}(x, lt(")
    assert str(assert_op) == "Assert{msg='Theano Assert failed!'}"
    assert Assert("a") == Assert("a") and Assert("a") != Assert("b")


def test_infer_shape() -> None:
    x = T.matrix("x")
    out = Assert()(x, T.gt(x.shape[0], 0))
    f = opgraph.function([x], out.shape)
    np.testing.assert_array_equal(f(np.zeros((4, 5))), [4, 5])
    assert out.owner.op.infer_shape(out.owner, [(4, 5), ()]) == [(4, 5)]


def test_grad_passes_to_x_only() -> None:
    x = T.vector("x")
    a = Assert()(x, T.lt(x.size, 3))
    g = opgraph.function([x], T.grad((a**2).sum(), x))
    np.testing.assert_allclose(g([1.0, 2.0]), [2.0, 4.0])  # Theano: 2x
    assert a.owner.op.connection_pattern(a.owner) == [[True], [False]]
    verify_grad(lambda v: Assert()(v, T.constant(True)) * 3, [np.array([1.0, -2.0, 0.5])])


def test_pickle_keeps_message() -> None:
    op = pickle.loads(pickle.dumps(Assert("kept")))
    assert op.msg == "kept"
    old = Assert.__new__(Assert)
    old.__setstate__({})
    assert old.msg == "Theano Assert failed!"


# ------------------------------------------------------------------------------ DotModulo

_S = np.array([12345, 67890, 2**31 - 2], "int32")
_S2 = np.array([1, 2147462578, 999], "int32")


def _dot_modulo_function() -> opgraph.compile.function.Function:
    args = [T.lmatrix(), T.ivector(), T.iscalar(), T.lmatrix(), T.ivector(), T.iscalar()]
    return opgraph.function(args, DotModulo()(*args))


def test_dot_modulo_matches_theano() -> None:
    f = _dot_modulo_function()
    # Theano 1.0.5's DotModulo on its own jump matrices.
    out = f(rng_mrg.A1p72, _S, rng_mrg.M1, rng_mrg.A2p72, _S2, rng_mrg.M2)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(
        out, [560977317, 903290013, 1608941479, 2129777475, 10216512, 1992329406]
    )
    out = f(rng_mrg.A1p134, _S, rng_mrg.M1, rng_mrg.A2p134, _S2, rng_mrg.M2)
    np.testing.assert_array_equal(
        out, [933859289, 1602464087, 1101209142, 478701757, 132404506, 1858949828]
    )
    a = np.array([[3, 5], [7, 11], [2**40, 1]], "int64")
    np.testing.assert_array_equal(f(a, _S[:2], 97, a[:1], _S2[:2], 13), [28, 72, 53, 8])
    # multMatVect (NumPy) computes the same numbers.
    np.testing.assert_array_equal(
        rng_mrg.multMatVect(
            np.concatenate([_S, _S2]), rng_mrg.A1p72, rng_mrg.M1, rng_mrg.A2p72, rng_mrg.M2
        ),
        f(rng_mrg.A1p72, _S, rng_mrg.M1, rng_mrg.A2p72, _S2, rng_mrg.M2),
    )


def test_dot_modulo_checks_shape_grad() -> None:
    with pytest.raises(TypeError, match="A must be a 2-d signed integer tensor"):
        DotModulo()(T.dmatrix(), T.ivector(), T.iscalar(), T.lmatrix(), T.ivector(), T.iscalar())
    with pytest.raises(TypeError, match="m2 must be a 0-d"):
        DotModulo()(T.lmatrix(), T.ivector(), T.iscalar(), T.lmatrix(), T.ivector(), T.ivector())
    f = _dot_modulo_function()
    with pytest.raises(ValueError, match="do not agree"):
        f(np.ones((3, 2), "int64"), _S, 7, np.ones((3, 3), "int64"), _S2, 7)
    args = [T.lmatrix(), T.ivector(), T.iscalar(), T.lmatrix(), T.ivector(), T.iscalar()]
    out = DotModulo()(*args)
    shape = opgraph.function(args, out.shape, on_unused_input="ignore")
    np.testing.assert_array_equal(shape(rng_mrg.A1p72[:2], _S, 5, rng_mrg.A2p72, _S2, 7), [5])
    assert out.owner.op.connection_pattern(out.owner) == [[False]] * 6
    w = T.dscalar("w")
    cost = T.cast(out.sum(), "float64") * w
    np.testing.assert_array_equal(
        opgraph.function([w, *args], T.grad(cost, w), on_unused_input="ignore")(
            2.0, rng_mrg.A1p72, _S, rng_mrg.M1, rng_mrg.A2p72, _S2, rng_mrg.M2
        ),
        float(
            np.sum(f(rng_mrg.A1p72, _S, rng_mrg.M1, rng_mrg.A2p72, _S2, rng_mrg.M2).astype("int64"))
        ),
    )
