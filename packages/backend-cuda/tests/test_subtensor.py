"""The GPU advanced-indexing ops against NumPy: gathers of 1-d/2-d/3-d arrays (negative,
repeated, empty, strided indices and data), increments that accumulate repeated indices
(``np.add.at``), sets, broadcast values, the deterministic kernels, out-of-range indices,
and an embedding lookup with its gradient lifted through opgraph.function."""

from __future__ import annotations

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph import config
from opgraph.compile.mode import get_mode
from opgraph_cuda.array import GpuArray
from opgraph_cuda.subtensor import GpuAdvancedIncSubtensor1, GpuAdvancedSubtensor1
from opgraph_cuda.type import GpuArrayType

F32 = {"rtol": 1e-5, "atol": 1e-6}
SHAPES = [(9,), (9, 5), (9, 3, 4)]


def gpu_var(a: GpuArray, bcast=None):
    """A GPU variable for ``a``: not broadcastable unless ``bcast`` says so."""
    return GpuArrayType(str(a.dtype), [False] * a.ndim if bcast is None else bcast)()


def run_op(op, *values, bcast=None):
    """``op`` applied to device copies of ``values``; checks infer_shape; host results."""
    arrays = [v if isinstance(v, GpuArray) else GpuArray.from_host(v) for v in values]
    bcast = bcast or [None] * len(arrays)
    node = op.make_node(*(gpu_var(a, b) for a, b in zip(arrays, bcast, strict=True)))
    (out,) = op.prepare_gpu(node)(arrays)
    assert out.shape == tuple(op.infer_shape(node, [a.shape for a in arrays])[0])
    return out.get()


def np_inc(x, y, idx):
    out = x.copy()
    np.add.at(out, idx, y)
    return out


# ---- GpuAdvancedSubtensor1 ----------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("idx_dtype", ["int32", "int64"])
def test_take_matches_numpy(rng, shape, idx_dtype):
    x = rng.standard_normal(shape).astype("float32")
    idx = np.array([0, 3, -1, 3, -9, 8, 2, 2], idx_dtype)
    got = run_op(GpuAdvancedSubtensor1(), x, idx)
    np.testing.assert_array_equal(got, x[idx])
    assert got.dtype == np.float32


def test_take_empty_index_and_long_rows(rng):
    x = rng.standard_normal((4, 3, 2)).astype("float32")
    got = run_op(GpuAdvancedSubtensor1(), x, np.zeros(0, "int64"))
    assert got.shape == (0, 3, 2)
    wide = rng.standard_normal((5, 700)).astype("float32")  # rows longer than a block
    idx = np.array([4, 0, 4, -2], "int64")
    np.testing.assert_array_equal(run_op(GpuAdvancedSubtensor1(), wide, idx), wide[idx])


def test_take_of_strided_views(rng):
    base = rng.standard_normal((8, 10, 3)).astype("float32")
    g = GpuArray.from_host(base)
    idx = np.array([1, -1, 0, 1], "int64")
    # rows with a stride, inner dims collapsing to one stride
    np.testing.assert_array_equal(
        run_op(GpuAdvancedSubtensor1(), g[::2, :, 1], idx), base[::2, :, 1][idx]
    )
    # a transposed view: inner dims that do not collapse (copied first)
    view = g.transpose((1, 0, 2))[:, ::-1]
    np.testing.assert_array_equal(
        run_op(GpuAdvancedSubtensor1(), view, idx), base.transpose(1, 0, 2)[:, ::-1][idx]
    )
    # a strided index vector
    gi = GpuArray.from_host(np.array([3, 9, 2, 9, 7, 9], "int32"))[::2]
    np.testing.assert_array_equal(run_op(GpuAdvancedSubtensor1(), g, gi), base[[3, 2, 7]])


@pytest.mark.parametrize("bad", [10, -11])
def test_take_out_of_range_raises(rng, bad):
    x = rng.standard_normal((10, 4)).astype("float32")
    op = GpuAdvancedSubtensor1()
    arrays = [GpuArray.from_host(x), GpuArray.from_host(np.array([1, bad, 2], "int64"))]
    run = op.prepare_gpu(op.make_node(*map(gpu_var, arrays)))
    with pytest.raises(IndexError, match=f"index {bad} is out of bounds for axis 0 with size 10"):
        run(arrays)
    arrays[1] = GpuArray.from_host(np.array([9, -10], "int64"))  # the flag was cleared
    np.testing.assert_array_equal(run(arrays)[0].get(), x[[9, -10]])
    with pytest.raises(IndexError, match="index 0 is out of bounds for axis 0 with size 0"):
        run_op(op, np.zeros((0, 4), "float32"), np.array([0], "int64"))


def test_take_types_and_names():
    op = GpuAdvancedSubtensor1()
    x = GpuArrayType("float32", [False, True])()
    node = op.make_node(x, GpuArrayType("int32", [False])())
    assert node.outputs[0].type.broadcastable == (False, True)
    assert str(op) == "GpuAdvancedSubtensor1"
    with pytest.raises(TypeError, match="must be a vector of"):
        op.make_node(x, GpuArrayType("float32", [False])())
    with pytest.raises(TypeError, match="must be a vector of"):
        op.make_node(x, GpuArrayType("int64", [False, False])())


# ---- GpuAdvancedIncSubtensor1 -------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("deterministic", [False, True])
def test_inc_accumulates_repeated_indices(rng, shape, deterministic):
    x = rng.standard_normal(shape).astype("float32")
    idx = np.array([2, -1, 2, 0, 8, 2, -7], "int64")
    y = rng.standard_normal((len(idx), *shape[1:])).astype("float32")
    got = run_op(GpuAdvancedIncSubtensor1(deterministic=deterministic), x, y, idx)
    np.testing.assert_allclose(got, np_inc(x, y, idx), **F32)


def test_set_writes_rows(rng):
    x = rng.standard_normal((7, 3)).astype("float32")
    idx = np.array([5, -1, 0], "int32")  # distinct rows: any order gives NumPy's result
    y = rng.standard_normal((3, 3)).astype("float32")
    expected = x.copy()
    expected[idx] = y
    for det in (False, True):
        got = run_op(
            GpuAdvancedIncSubtensor1(set_instead_of_inc=True, deterministic=det), x, y, idx
        )
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("n_rows", [3, 50])  # by destination (N <= M), by first occurrence
def test_deterministic_kernels_are_bit_exact(rng, n_rows):
    x = rng.standard_normal((n_rows, 6)).astype("float32")
    idx = rng.integers(-n_rows, n_rows, size=40).astype("int64")
    idx[:5] = 1
    y = (rng.standard_normal((40, 6)) * 1e3).astype("float32")
    inc = GpuAdvancedIncSubtensor1(deterministic=True)
    assert inc.kernel_names("float32") == ["k_ordered_by_pos", "k_ordered_by_dest"]
    first = run_op(inc, x, y, idx)
    np.testing.assert_array_equal(first, np_inc(x, y, idx))  # np.add.at's order, exactly
    for _ in range(3):
        np.testing.assert_array_equal(run_op(inc, x, y, idx), first)
    # set with repeated indices: the last position naming a row wins
    got = run_op(GpuAdvancedIncSubtensor1(set_instead_of_inc=True, deterministic=True), x, y, idx)
    expected = x.copy()
    for k, i in enumerate(idx):
        expected[i] = y[k]
    np.testing.assert_array_equal(got, expected)


def test_deterministic_flag_picks_the_kernels():
    assert GpuAdvancedIncSubtensor1().kernel_names("float32") == ["k_inc_atomic"]
    assert GpuAdvancedIncSubtensor1(True).kernel_names("float32") == ["k_set"]
    # no atomicAdd for int64: the ordered kernels
    assert GpuAdvancedIncSubtensor1().kernel_names("int64")[0] == "k_ordered_by_pos"
    with config.change_flags(deterministic="more"):
        op = GpuAdvancedIncSubtensor1()
    assert op.deterministic and op != GpuAdvancedIncSubtensor1(deterministic=False)
    assert str(op) == "GpuAdvancedIncSubtensor1{no_inplace,inc}"
    assert str(GpuAdvancedIncSubtensor1(True)) == "GpuAdvancedIncSubtensor1{no_inplace,set}"


def test_inc_of_integers(rng):
    x = rng.integers(-5, 5, size=(6, 2)).astype("int64")
    y = rng.integers(-5, 5, size=(5, 2)).astype("int64")
    idx = np.array([1, 1, 5, -6, 3], "int32")
    np.testing.assert_array_equal(run_op(GpuAdvancedIncSubtensor1(), x, y, idx), np_inc(x, y, idx))
    x32, y32 = x.astype("int32"), y.astype("int32")  # the atomicAdd path
    np.testing.assert_array_equal(
        run_op(GpuAdvancedIncSubtensor1(), x32, y32, idx), np_inc(x32, y32, idx)
    )


@pytest.mark.parametrize("deterministic", [False, True])
def test_inc_with_broadcast_y(rng, deterministic):
    x = rng.standard_normal((5, 3, 4)).astype("float32")
    idx = np.array([4, 0, 4], "int64")
    op = GpuAdvancedIncSubtensor1(deterministic=deterministic)
    cases = [
        (np.float32(2.5), []),  # a scalar for every element
        (rng.standard_normal((3, 4)).astype("float32"), [False, False]),  # one row for all
        (rng.standard_normal((3, 1, 4)).astype("float32"), [False, True, False]),
        (rng.standard_normal((1, 3, 1)).astype("float32"), [True, False, True]),
    ]
    for y, bcast in cases:
        got = run_op(op, x, y, idx, bcast=[None, bcast, None])
        np.testing.assert_allclose(got, np_inc(x, np.broadcast_to(y, (3, 3, 4)), idx), **F32)


def test_inc_empty_index_and_strided_inputs(rng):
    x = rng.standard_normal((4, 3)).astype("float32")
    op = GpuAdvancedIncSubtensor1()
    got = run_op(op, x, np.zeros((0, 3), "float32"), np.zeros(0, "int64"))
    np.testing.assert_array_equal(got, x)
    gx = GpuArray.from_host(rng.standard_normal((3, 8)).astype("float32")).T[::2]  # (4, 3)
    y = rng.standard_normal((6, 3)).astype("float32")
    gy = GpuArray.from_host(y.T.copy()).T  # a transposed y
    idx = np.array([0, 3, 0, -1, 2, 0], "int64")
    np.testing.assert_allclose(run_op(op, gx, gy, idx), np_inc(gx.get(), y, idx), **F32)


@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("n_rows", [2, 30])
def test_inc_out_of_range_raises(rng, deterministic, n_rows):
    x = rng.standard_normal((n_rows, 3)).astype("float32")
    idx = np.array([0, 1, n_rows, 1, 0, 1], "int64")
    y = np.ones((6, 3), "float32")
    op = GpuAdvancedIncSubtensor1(deterministic=deterministic)
    with pytest.raises(IndexError, match=f"index {n_rows} is out of bounds for axis 0 with size"):
        run_op(op, x, y, idx)
    with pytest.raises(IndexError, match="out of bounds for axis 0 with size 0"):
        run_op(op, np.zeros((0, 3), "float32"), y[:1], idx[:1])


def test_inc_shape_and_type_errors(rng):
    op = GpuAdvancedIncSubtensor1()
    with pytest.raises(ValueError, match="y has shape"):
        run_op(op, np.zeros((4, 3), "float32"), np.zeros((2, 2), "float32"), np.array([0, 1]))
    x = GpuArrayType("float32", [False, False])()
    with pytest.raises(TypeError):
        op.make_node(x, GpuArrayType("float32", [False] * 3)(), GpuArrayType("int64", [False])())


# ---- lifted through opgraph.function ------------------------------------------------------


def _op_names(f):
    return [str(n.op) for n in f.maker.fgraph.toposort()]


def test_embedding_lookup_and_gradient_lift(rng, gpu_mode):
    W = T.fmatrix("W")
    idx = T.lvector("idx")
    c = T.fmatrix("c")
    cost = T.sum(W[idx] * c)
    gW = opgraph.grad(cost, W)
    f = opgraph.function([W, idx, c], [W[idx], gW], mode=gpu_mode)
    names = _op_names(f)
    assert "GpuAdvancedSubtensor1" in names
    assert "GpuAdvancedIncSubtensor1{no_inplace,inc}" in names
    assert not any(n.startswith("AdvancedSubtensor1") or n.startswith("AdvancedInc") for n in names)
    with config.change_flags(cuda__lift="never"):
        f_cpu = opgraph.function([W, idx, c], [W[idx], gW], mode=get_mode("FAST_RUN"))
    w = rng.standard_normal((20, 8)).astype("float32")
    i = rng.integers(-20, 20, size=30).astype("int64")
    cc = rng.standard_normal((30, 8)).astype("float32")
    for got, want in zip(f(w, i, cc), f_cpu(w, i, cc), strict=True):
        np.testing.assert_allclose(got, want, **F32)
    with pytest.raises(IndexError, match="index 20 is out of bounds for axis 0 with size 20"):
        f(w, np.array([20]), cc[:1])


def test_embedding_training_step_on_shared_weights(rng, gpu_mode):
    w0 = rng.standard_normal((12, 4)).astype("float32")
    W = opgraph.shared(w0.copy(), name="W")
    idx = T.ivector("idx")
    target = T.fmatrix("target")
    loss = T.sum((W[idx] - target) ** 2)
    step = opgraph.function(
        [idx, target],
        loss,
        updates=[(W, W - np.float32(0.1) * opgraph.grad(loss, W))],
        mode=gpu_mode,
    )
    assert "GpuAdvancedIncSubtensor1{no_inplace,inc}" in _op_names(step)
    i = np.array([3, 3, 0, 11, -1], "int32")
    t = rng.standard_normal((5, 4)).astype("float32")
    step(i, t)
    grad = np.zeros_like(w0)
    np.add.at(grad, i, 2 * (w0[i] - t))
    np.testing.assert_allclose(W.get_value(), w0 - 0.1 * grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["inc", "set"])
def test_inc_and_set_subtensor_lift(rng, gpu_mode, kind):
    x = T.ftensor3("x")
    y = T.fmatrix("y")  # broadcast over the indexed rows
    idx = T.lvector("idx")
    build = T.inc_subtensor if kind == "inc" else T.set_subtensor
    with config.change_flags(deterministic="more"):
        f = opgraph.function([x, y, idx], build(x[idx], y), mode=gpu_mode)
    (node,) = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, GpuAdvancedIncSubtensor1)]
    assert str(node.op) == f"GpuAdvancedIncSubtensor1{{no_inplace,{kind}}}"
    assert node.op.deterministic
    xv = rng.standard_normal((6, 2, 3)).astype("float32")
    yv = rng.standard_normal((2, 3)).astype("float32")
    iv = np.array([5, 0, -1, 5], "int64")
    expected = xv.copy()
    if kind == "inc":
        np.add.at(expected, iv, yv)
    else:
        expected[iv] = yv
    np.testing.assert_array_equal(f(xv, yv, iv), expected)
