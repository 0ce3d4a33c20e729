"""ShapeFeature (symbolic shapes kept through replacements) and the rewrites that use it."""

import pickle
import time
import warnings

import numpy as np
import pytest

import opgraph as theano
import opgraph.tensor as T
from opgraph.compile.mode import Mode
from opgraph.graph.basic import Apply, Constant
from opgraph.graph.fg import FunctionGraph
from opgraph.graph.op import Op
from opgraph.rewriting import RewriteWarning
from opgraph.tensor.shape import Shape, Shape_i, shape_i, specify_shape
from opgraph.testing import assert_allclose
from opgraph_optimizers.shape_feature import ShapeFeature, same_dim, shape_rewriter

FAST_RUN = Mode("vm", "fast_run")
REFERENCE = Mode("vm", None)


class _NoShape(Op):
    """``x + 1`` with no infer_shape: its output's shape is only known at run time."""

    __props__ = ()

    def make_node(self, x):
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, out):
        out[0][0] = inputs[0] + 1


class _BadShape(_NoShape):
    """An Op whose infer_shape is broken."""

    def infer_shape(self, node, shapes):
        raise RuntimeError("broken")


def _fg(inputs, outputs):
    fg = FunctionGraph(inputs, outputs, clone=False)
    fg.attach_feature(ShapeFeature())
    return fg


def _names(f):
    return [type(n.op).__name__ for n in f.maker.fgraph.toposort()]


def _compare(inputs, out, values, mode=FAST_RUN):
    f = theano.function(inputs, out, mode=mode)
    ref = theano.function(inputs, out, mode=REFERENCE)
    assert_allclose(f(*values), ref(*values))
    return f


def test_shapes_from_infer_shape_and_types():
    x, r = T.matrix("x"), T.row("r")
    y = T.exp(x) + r
    fg = _fg([x, r], [y])
    sf = fg.shape_feature
    d0, d1 = sf.shape_of[y]
    assert same_dim(d0, Shape_i(0)(x)) and same_dim(d1, Shape_i(1)(x))
    assert d0.type.dtype == "int64" and d0.type.ndim == 0
    one, _ = sf.shape_of[r]
    assert isinstance(one, Constant) and one.data == 1
    assert sf.shape_ir(0, x) is sf.shape_ir(0, x)  # one Shape_i per dimension
    static = T.TensorType("float64", shape=(2, None))("s")
    assert int(sf.shape_tuple(static)[0].data) == 2
    c = T.constant(np.zeros((4, 5)))
    assert [int(d.data) for d in sf.shape_tuple(c)] == [4, 5]
    assert sf.shape_tuple(T.scalar("z")) == ()


def test_ops_without_or_with_broken_infer_shape_fall_back():
    x = T.vector("x")
    a = _NoShape()(x)
    fg = _fg([x], [a * 2])
    (d,) = fg.shape_feature.shape_of[a]
    assert d.owner.op == Shape_i(0) and d.owner.inputs[0] is a
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = T.vector("y")
        b = _BadShape()(y)
        fg2 = _fg([y], [b])
        first_dim = fg2.shape_feature.shape_of[b][0]  # (shapes are computed on first use)
    assert any(issubclass(w.category, RewriteWarning) for w in caught)
    assert first_dim.owner.inputs[0] is b


class _CountingShape(_NoShape):
    """``x + 1`` counting its infer_shape calls."""

    calls = 0

    def infer_shape(self, node, shapes):
        type(self).calls += 1
        return [shapes[0]]


def test_shapes_are_computed_on_first_use_then_kept_up_to_date():
    _CountingShape.calls = 0
    x = T.vector("x")
    # A graph with nothing shape-related compiles without inferring a single shape.
    f = theano.function([x], T.exp(_CountingShape()(x)) * 2 + 1, mode=FAST_RUN)
    assert _CountingShape.calls == 0
    assert_allclose(f(np.ones(3, dtype=x.dtype)), np.full(3, np.exp(2.0) * 2 + 1, x.dtype))
    # The first read computes every shape; later changes update them as they come.
    a = _CountingShape()(x)
    fg = _fg([x], [T.exp(a)])
    assert _CountingShape.calls == 0
    (d,) = fg.shape_feature.shape_of[fg.outputs[0]]
    assert _CountingShape.calls == 1 and same_dim(d, Shape_i(0)(x))
    y = T.vector("y")
    fg.replace(a, _CountingShape()(y), import_missing=True)
    assert _CountingShape.calls == 2
    (d,) = fg.shape_feature.shape_of[fg.outputs[0].owner.inputs[0]]
    assert same_dim(d, Shape_i(0)(x))  # the replaced variable's shape carries over
    # x.shape in a compiled function still reads what is known.
    f = theano.function([x], _CountingShape()(x).shape, mode=FAST_RUN)
    assert "Shape" not in _names(f)


def test_shapes_follow_replacements():
    x = T.matrix("x")
    a = _NoShape()(x)
    y = T.exp(a)
    fg = _fg([x], [y * 2])
    sf = fg.shape_feature
    assert sf.shape_of[y][0].owner.inputs[0] is a  # only a's own shape is known
    fg.replace(a, x * 3)
    for d, k in zip(sf.shape_of[y], (0, 1)):
        assert same_dim(d, Shape_i(k)(x))  # now written with x's shape
    new = fg.outputs[0].owner.inputs[0]
    assert all(same_dim(d, Shape_i(k)(x)) for k, d in enumerate(sf.shape_of[new]))


def test_x_shape_becomes_make_vector_of_known_dims(rng):
    x, y = T.matrices("x", "y")
    f = _compare([x, y], (T.exp(x) + y).shape, [rng.normal(size=(2, 3)), rng.normal(size=(2, 3))])
    assert sorted(_names(f)) == ["MakeVector", "Shape_i", "Shape_i"]
    assert all(
        n.inputs[0].name == "x" for n in f.maker.fgraph.toposort() if isinstance(n.op, Shape_i)
    )


@pytest.mark.parametrize("dtype", ["float32", "int64"])
@pytest.mark.parametrize("bcast", [(False,), (False, False), (True, False), (False, True)])
def test_shape_values_over_dtypes_and_patterns(rng, dtype, bcast):
    x = T.TensorType(dtype, bcast)("x")
    y = T.TensorType(dtype, (False,) * len(bcast))("y")
    shape = tuple(1 if b else n for b, n in zip(bcast, (3, 4)))
    xv = (rng.normal(size=shape) * 5).astype(dtype)
    yv = (rng.normal(size=tuple(3 if b else s for b, s in zip(bcast, shape))) * 5).astype(dtype)
    f = _compare([x, y], (x * y).shape, [xv, yv])
    assert "Shape" not in _names(f) and "Elemwise" not in _names(f)


def test_static_shapes_become_constants():
    s = T.TensorType("float64", shape=(2, 3))("s")
    f = theano.function([s], (s * 2).shape, mode=FAST_RUN)
    assert "Shape" not in _names(f) and "Shape_i" not in _names(f)
    np.testing.assert_array_equal(f(np.ones((2, 3))), [2, 3])
    assert f(np.ones((2, 3))).dtype == np.int64


def test_shape_i_of_an_intermediate_reads_the_input(rng):
    x = T.matrix("x")
    out = shape_i(T.exp(x), 1)
    f = _compare([x], out, [rng.normal(size=(2, 5))])
    (node,) = f.maker.fgraph.toposort()
    assert node.op == Shape_i(1) and node.inputs[0].name == "x"
    g = theano.function([x], out, mode=FAST_RUN.excluding("local_track_shape_i"))
    assert "Elemwise" in _names(g)


def test_known_specify_shape_is_removed(rng):
    x = T.matrix("x")
    out = specify_shape(T.exp(x), x.shape)
    f = _compare([x], out, [rng.normal(size=(2, 3))])
    assert "SpecifyShape" not in _names(f)
    twice = specify_shape(specify_shape(x, (2, 3)) * 2, (2, 3))
    f2 = _compare([x], twice, [rng.normal(size=(2, 3))])
    assert _names(f2).count("SpecifyShape") == 1
    g = theano.function([x], out, mode=FAST_RUN.excluding("local_remove_known_specify_shape"))
    assert "SpecifyShape" in _names(g)
    with pytest.raises(ValueError):
        f2(np.ones((3, 3)))  # the remaining check still runs


def test_known_reshape_is_removed(rng):
    x, v = T.matrix("x"), T.vector("v")
    f = _compare([x], T.exp(x).reshape(x.shape), [rng.normal(size=(2, 3))])
    assert "Reshape" not in _names(f)
    f1 = _compare([v], T.exp(v).reshape((-1,)), [rng.normal(size=4)])
    assert "Reshape" not in _names(f1)
    g = theano.function(
        [x], T.exp(x).reshape(x.shape), mode=FAST_RUN.excluding("local_remove_known_reshape")
    )
    assert "Reshape" in _names(g)
    other = _compare([x], T.exp(x).reshape((x.shape[1], x.shape[0])), [rng.normal(size=(2, 3))])
    assert "Reshape" in _names(other)


def test_without_the_feature_the_rewrites_do_nothing():
    x = T.matrix("x")
    f = theano.function([x], (x * 2).shape, mode=FAST_RUN.excluding("shape_rewriter"))
    assert "Shape" in _names(f)
    assert not hasattr(f.maker.fgraph, "shape_feature")


def test_debug_mode_agrees(rng):
    x, y = T.matrices("x", "y")
    out = T.exp(x).reshape(x.shape) * specify_shape(y, x.shape)
    f = theano.function([x, y], [out, (out + 1).shape], mode="DEBUG_MODE")
    xv, yv = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    got = f(xv, yv)
    assert_allclose(got[0], np.exp(xv) * yv)
    np.testing.assert_array_equal(got[1], [2, 3])


def test_attach_twice_pickle_and_detach():
    x = T.matrix("x")
    fg = FunctionGraph([x], [T.exp(x) * 2])
    shape_rewriter.rewrite(fg)
    sf = fg.shape_feature
    shape_rewriter.rewrite(fg)
    assert fg.shape_feature is sf
    fg2 = pickle.loads(pickle.dumps(fg))
    out2 = fg2.outputs[0]
    assert same_dim(fg2.shape_feature.shape_of[out2][0], Shape_i(0)(fg2.inputs[0]))
    fg.remove_feature(sf)
    assert not hasattr(fg, "shape_feature") and sf.shape_of == {}


def test_make_vector_shape_and_large_graphs():
    x = T.vector("x")
    y = x
    for _ in range(4000):
        y = T.exp(y)
    t0 = time.perf_counter()
    fg = _fg([x], [y])
    assert time.perf_counter() - t0 < 20
    vec = fg.shape_feature.make_vector_shape(y)
    assert vec.owner.op.__class__.__name__ == "MakeVector"
    assert vec.owner.inputs[0].owner.inputs[0] is x
    assert isinstance(Shape()(x).owner.op, Shape)
