"""Issue 13, tensor/nnet part: Theano 1.0 behaviours and names (golden values from Theano 1.0.5).

Golden values were recorded with Theano 1.0.5 (NumPy 1.19) under ``device=cpu,cxx=``.
"""

from __future__ import annotations

import importlib
import pickle
from unittest import mock

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.gradient import verify_grad
from opgraph.graph.fg import FunctionGraph
from opgraph.tensor import extra_ops as E
from opgraph.tensor import nlinalg as L
from opgraph.tensor import nnet
from opgraph.tensor import xlogx as X

pytestmark = pytest.mark.filterwarnings("ignore::Warning")


def rng() -> np.random.RandomState:
    return np.random.RandomState(0)


# -- behaviours ---------------------------------------------------------------------------


def test_variables_are_truthy_comparisons_raise():
    W = opgraph.shared(np.zeros(3))
    x = T.dvector("x")
    assert W and x and (x + 1) and T.constant(0) and T.lt(x, 1)
    assert W
    for cmp in (x < 1, x <= 1, x > 1, x >= 1, np.float64(1) < x):
        with pytest.raises(TypeError, match="Variables do not support boolean operations"):
            bool(cmp)
    with pytest.raises(TypeError, match="boolean operations"):
        _ = 0 < x < 1


def test_softmax_of_vector_is_a_row_as_theano():
    v = T.dvector("v")
    for fn in (nnet.softmax, nnet.log_softmax, nnet.logsoftmax):
        out = fn(v)
        assert out.type.broadcastable == (True, False)
    assert nnet.softmax(T.dmatrix()).ndim == 2
    f = opgraph.function(
        [v],
        [
            nnet.softmax(v),
            T.grad(nnet.softmax(v)[0, 1] * 3 + nnet.softmax(v)[0, 0], v),
            nnet.logsoftmax(v),
            T.grad(nnet.logsoftmax(v)[0, 2], v),
        ],
    )
    sm, g, lsm, lg = f(np.array([0.5, -1.0, 2.0]))
    np.testing.assert_allclose(sm, [[0.17529039, 0.03911257, 0.78559703]], rtol=1e-7)
    np.testing.assert_allclose(g, [0.1239955, 0.10589228, -0.22988778], rtol=1e-6)
    np.testing.assert_allclose(lsm, [[-1.7413113, -3.2413113, -0.2413113]], rtol=1e-7)
    np.testing.assert_allclose(lg, [-0.17529039, -0.03911257, 0.21440297], rtol=1e-6)
    verify_grad(lambda x: nnet.softmax(x)[0], [np.array([0.3, -1.0, 2.0])], rng=rng())
    with pytest.raises(ValueError, match="out of range"):
        nnet.softmax(v, axis=1)


# -- extra_ops ----------------------------------------------------------------------------


def test_extra_ops_names_and_golden_values():
    M = T.iscalar()
    f = opgraph.function([M], [E.bartlett(M), E.bartlett(M).shape])
    w, shp = f(6)
    np.testing.assert_allclose(w, [0.0, 0.4, 0.8, 0.8, 0.4, 0.0], atol=1e-15)
    assert w.dtype == np.float64 and list(shp) == [6]
    assert f(0)[0].shape == (0,) and list(f(-3)[1]) == [0]
    assert E.bartlett_ is E.bartlett(M).owner.op
    with pytest.raises(TypeError, match="only works on integer input"):
        E.bartlett(T.dscalar())
    with pytest.raises(TypeError, match="only works on scalar input"):
        E.bartlett(T.ivector())
    assert E.cumsum is T.cumulative.cumsum and E.cumprod is T.cumulative.cumprod
    assert E.fill_diagonal_ is E.fill_diagonal(T.dmatrix(), 1.0).owner.op


@pytest.mark.parametrize(
    ("offset", "expected", "g_val"),
    [
        (-2, [[1, 1, 1, 1], [1, 1, 1, 1], [5, 1, 1, 1]], 8.0),
        (1, [[1, 5, 1, 1], [1, 1, 5, 1], [1, 1, 1, 5]], 18.0),
        (3, [[1, 1, 1, 5], [1, 1, 1, 1], [1, 1, 1, 1]], 3.0),
        (7, np.ones((3, 4)), 0.0),
    ],
)
def test_fill_diagonal_offset_matches_theano(offset, expected, g_val):
    A, s, o = T.dmatrix(), T.dscalar(), T.lscalar()
    out = E.fill_diagonal_offset(A, s, o)
    weights = np.arange(12.0).reshape(3, 4)
    f = opgraph.function([A, s, o], [out, T.grad((out * weights).sum(), s), out.shape])
    val, g, shp = f(np.ones((3, 4)), 5.0, offset)
    np.testing.assert_array_equal(val, expected)
    assert float(g) == g_val and list(shp) == [3, 4]


def test_fill_diagonal_offset_grad_and_errors():
    for off in (-1, 0, 2):
        verify_grad(
            lambda a, v, off=off: E.fill_diagonal_offset(a, v, off),
            [rng().randn(3, 4), np.array(0.5)],
            rng=rng(),
        )
    with pytest.raises(TypeError, match="exactly two dimensions"):
        E.fill_diagonal_offset(T.dvector(), 1.0, 0)
    with pytest.raises(TypeError, match="third parameter must be an integer"):
        E.fill_diagonal_offset(T.dmatrix(), 1.0, T.dscalar())
    with pytest.raises(TypeError, match="does not fit"):
        E.fill_diagonal_offset(T.fmatrix(), T.dscalar(), 0)


def test_to_one_hot_and_cpu_contiguous():
    y = T.lvector()
    oh = E.to_one_hot(y, 7)
    assert oh.dtype == opgraph.config.floatX
    out = opgraph.function([y], oh)(np.array([0, 6, 4]))
    np.testing.assert_array_equal(out, np.eye(7)[[0, 6, 4]])
    assert E.to_one_hot(y, 3, dtype="int32").dtype == "int32"
    with pytest.raises(TypeError, match="integer dtype"):
        E.to_one_hot(T.dvector(), 3)
    a = T.dmatrix()
    f = opgraph.function([a], [E.cpu_contiguous(a), T.grad((E.cpu_contiguous(a) ** 2).sum(), a)])
    xf = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    c, g = f(xf)
    assert c.flags["C_CONTIGUOUS"] and np.array_equal(c, xf) and np.array_equal(g, 2 * xf)
    assert E.cpu_contiguous.view_map == {0: [0]}


# -- nlinalg ------------------------------------------------------------------------------


def test_tensorinv_tensorsolve():
    r = np.random.default_rng(0)
    A = (r.standard_normal((6, 6)) + 3 * np.eye(6)).reshape(2, 3, 6)
    B = r.standard_normal((2, 3))
    t, b = T.dtensor3(), T.dmatrix()
    inv = L.tensorinv(t, ind=2)
    assert inv.ndim == 3
    out, shp = opgraph.function([t], [inv, inv.shape])(A)
    np.testing.assert_allclose(out, np.linalg.tensorinv(A, 2))
    assert list(shp) == [6, 2, 3]
    x = L.tensorsolve(t, b)
    assert x.ndim == 1
    out, shp = opgraph.function([t, b], [x, x.shape])(A, B)
    np.testing.assert_allclose(out, np.linalg.tensorsolve(A, B))
    assert list(shp) == [6]
    At = A.transpose(2, 0, 1).copy()
    out = opgraph.function([t, b], L.tensorsolve(t, b, axes=(0,)))(At, B)
    np.testing.assert_allclose(out, np.linalg.tensorsolve(At, B, axes=(0,)))
    verify_grad(lambda a: L.tensorinv(a, 2), [A], rng=rng())
    verify_grad(L.tensorsolve, [A, B], rng=rng())
    verify_grad(lambda a, c: L.tensorsolve(a, c, axes=(0,)), [At, B], rng=rng())
    with pytest.raises(np.linalg.LinAlgError, match="TensorInv"):
        opgraph.function([t], inv)(np.zeros((2, 3, 6)))
    with pytest.raises(TypeError, match="float dtype"):
        L.tensorinv(T.itensor3())


# -- xlogx, softsign -----------------------------------------------------------------------


def test_xlogx_xlogy0_golden():
    v, y = T.dvector(), T.dvector()
    f = opgraph.function([v, y], [X.xlogx(v), X.xlogy0(v, y), T.grad(X.xlogy0(v, y).sum(), y)])
    a, b, gy = f(np.array([0.0, 0.5, 2.0]), np.array([1.0, 0.25, 3.0]))
    np.testing.assert_allclose(a, [0.0, -0.34657359027997264, 1.3862943611198906], rtol=1e-15)
    np.testing.assert_allclose(b, [0.0, -0.6931471805599453, 2.1972245773362196], rtol=1e-15)
    np.testing.assert_allclose(gy, [0.0, 2.0, 0.6666666666666666], rtol=1e-15)
    assert X.xlogx(T.fvector()).dtype == "float32" and X.xlogx(T.ivector()).dtype == "float64"
    assert str(X.xlogx) == "xlogx" and X.scalar_xlogy0.name == "scalar_xlogy0"
    verify_grad(X.xlogx, [np.array([0.3, 0.5, 2.0])], rng=rng())
    verify_grad(X.xlogy0, [np.array([0.3, 0.5, 2.0]), np.array([0.7, 1.5, 2.0])], rng=rng())


def test_sandbox_softsign():
    mod = importlib.import_module("opgraph.sandbox.softsign")
    assert isinstance(mod.scalar_softsign, mod.ScalarSoftsign)
    x = T.dvector()
    out, g = opgraph.function([x], [mod.softsign(x), T.grad(mod.softsign(x).sum(), x)])(
        np.array([-2.0, 0.0, 3.0])
    )
    np.testing.assert_allclose(out, [-2 / 3, 0.0, 0.75])
    np.testing.assert_allclose(g, [1 / 9, 1.0, 1 / 16])
    verify_grad(mod.softsign, [np.array([-2.0, 0.1, 3.0])], rng=rng())


# -- random -------------------------------------------------------------------------------


def test_raw_random_and_shared_randomstreams_names():
    raw = importlib.import_module("opgraph.tensor.raw_random")
    srs = importlib.import_module("opgraph.tensor.shared_randomstreams")
    assert srs.RandomStreamsBase is raw.RandomStreamsBase
    assert issubclass(srs.RandomStreams, raw.RandomStreamsBase)
    assert raw.uniform is T.random.uniform and raw.RandomFunction is not None
    u = srs.RandomStreams(3).uniform((2,))
    assert isinstance(u.rng, srs.RandomStateSharedVariable)
    assert opgraph.function([], u)().shape == (2,)


# -- utils, io, breakpoint ------------------------------------------------------------------


def test_tensor_utils():
    from opgraph.tensor.utils import hash_from_code, hash_from_ndarray, shape_of_variables

    a = np.arange(6.0).reshape(2, 3)
    assert hash_from_ndarray(a) == (
        "ma00a78557dc425b6e29e98ae0f186649e6132579fc0ec08a44001ce2e0417cae"
    )
    assert hash_from_ndarray(a.T) == (
        "m95e50cd266b842a26749df026da4855fc0a57ae3ca79c591874d8fdf49d0dbfc"
    )
    assert hash_from_code("abc") == hash_from_code(b"abc")
    x = T.matrix("x")
    y = x[512:]
    z = T.dot(y, x.T) + 1
    fgraph = FunctionGraph([x], [y, z], clone=False)
    d = shape_of_variables(fgraph, {x: (1024, 1024)})
    assert d[y] == (512, 1024) and d[x] == (1024, 1024) and d[z] == (512, 1024)
    with pytest.raises(ValueError, match="input_shapes keys"):
        shape_of_variables(fgraph, {T.matrix(): (1, 1)})


def test_tensor_io_load_and_mpi(tmp_path):
    from opgraph.tensor import io

    path = tmp_path / "a.npy"
    np.save(path, np.arange(4, dtype="int64"))
    x = io.load(str(path), "int64", (False,))
    assert str(x.owner.op) == "Load{dtype: int64, broadcastable: (False,), mmep: None}"
    np.testing.assert_array_equal(opgraph.function([], x * 2)(), [0, 2, 4, 6])
    with pytest.raises(TypeError, match="Expected an array of type int32"):
        opgraph.function([], io.load(str(path), "int32", (False,)))()
    with pytest.raises(ValueError, match="mmap_mode"):
        io.LoadFromDisk("int64", (False,), "r+")
    for call in (
        lambda: io.send(x, 1, 0),
        lambda: io.recv((2,), "float64", 0, 0),
        lambda: io.isend(x, 1, 0),
        lambda: io.irecv((2,), "float64", 0, 0),
        lambda: io.MPISend(1, 0),
        lambda: io.MPIRecvWait(0),
    ):
        with pytest.raises(RuntimeError, match="mpi4py"):
            call()
    assert io.mpi_send_wait_key(x.owner) == 0 and io.mpi_tag_key(x.owner) == 0
    assert pickle.loads(pickle.dumps(x.owner.op)) == x.owner.op


def test_pdb_breakpoint():
    from opgraph.tests.breakpoint import PdbBreakpoint

    i, t = T.fvector(), T.fvector()
    mse = (i - t) ** 2
    m, _mi, _mt = PdbBreakpoint("MSE too high")(T.gt(mse.sum(), 100), mse, i, t)
    f = opgraph.function([i, t], [m, T.grad(m.sum(), i)])
    with mock.patch("pdb.set_trace") as trace:
        out, g = f(np.float32([10, 0]), np.float32([10, 5]))
        assert not trace.called
        np.testing.assert_array_equal(out, [0, 25])
        np.testing.assert_array_equal(g, [0, -10])
        out, _ = f(np.float32([0, 0]), np.float32([10, 5]))
        assert trace.called
    np.testing.assert_array_equal(out, [100, 25])
    with pytest.raises(TypeError, match="must be a scalar"):
        PdbBreakpoint("x")(T.dvector(), i)


# -- h_softmax ----------------------------------------------------------------------------


def test_h_softmax_golden():
    r = np.random.RandomState(0)
    bs, nh, no, nc, nopc = 3, 4, 7, 3, 3
    xv, W1v, b1v = r.randn(bs, nh), r.randn(nh, nc), r.randn(nc)
    W2v, b2v = r.randn(nc, nh, nopc), r.randn(nc, nopc)
    tv = np.array([0, 6, 4])
    x, W1, b1, W2, b2, t = (
        T.dmatrix(),
        T.dmatrix(),
        T.dvector(),
        T.dtensor3(),
        T.dmatrix(),
        T.lvector(),
    )
    all_ = nnet.h_softmax(x, bs, no, nc, nopc, W1, b1, W2, b2)
    tgt = nnet.h_softmax(x, bs, no, nc, nopc, W1, b1, W2, b2, t)
    g = T.grad(tgt.sum(), W2)
    f = opgraph.function([x, W1, b1, W2, b2, t], [all_, tgt, g[1, 0]])
    a, p, gw = f(xv, W1v, b1v, W2v, b2v, tv)
    assert a.shape == (3, 7)
    np.testing.assert_allclose(
        a[1], [3.4509102106073140e-04, 2.1906275714539472e-01, 7.7170261686296637e-01,
               5.9757312602641826e-04, 1.2580017206856550e-05, 1.3497702183207192e-04,
               7.2659509845870354e-03], rtol=1e-12)  # fmt: skip
    np.testing.assert_allclose(p, [0.00138154545774788, 0.00726595098458704, 0.04296559462736486])
    np.testing.assert_allclose(
        gw, [1.5723980349215403e-05, -2.1699968658839194e-04, 2.0127570623917708e-04], rtol=1e-12
    )
    np.testing.assert_allclose(a[np.arange(3), tv], p, rtol=1e-12)
