"""Issue 13: Theano 1.0's ``theano.gof``, ``theano.gradient``, ``theano.compile`` and
top-level names resolve at their Theano paths and behave as Theano (numbers recorded from
Theano 1.0.5 with THEANO_FLAGS=device=cpu,cxx=)."""

from __future__ import annotations

import importlib
import pickle
import warnings

import numpy as np
import pytest

import opgraph as theano
import opgraph.tensor as T
from opgraph import gof
from opgraph import gradient as G
from opgraph.gof import EnumList, Params, ParamsType, generic

NAMES = [
    "_asarray", "dot", "function_dump", "sparse_grad", "clone",
    "compile.MonitorMode", "compile.debugmode.StochasticOrder",
    "compile.function_module.Function", "compile.ops.register_deep_copy_op_c_code",
    "compile.ops.register_rebroadcast_c_code", "compile.ops.register_shape_c_code",
    "compile.ops.register_shape_i_c_code", "compile.ops.register_specify_shape_c_code",
    "compile.ops.register_view_op_c_code", "compile.ops.shape", "compile.ops.shape_i",
    "compile.ops.specify_shape", "compile.sharedvalue.shared_constructor",
    "gof.ParamsType", "gof.params_type.Params", "gof.params_type.ParamsType",
    "gof.graph.as_string", "gof.graph.io_connection_pattern", "gof.graph.is_in_ancestors",
    "gof.graph.is_same_graph", "gof.graph.list_of_nodes", "gof.graph.nodes_constructed",
    "gof.graph.op_as_string", "gof.graph.stack_search", "gof.graph.variables_and_orphans",
    "gof.graph.view_roots", "gof.local_optimizer", "gof.opt.LocalOptimizer", "gof.opt.OpSub",
    "gof.opt.PatternSub", "gof.opt.TopoOptimizer",
    *(f"gof.type.{n}" for n in (
        "CDataType", "CDataTypeConstant", "CEnumType", "CLinkerType", "EnumList", "EnumType",
        "Generic", "PureType", "SingletonType", "Type")),
    *(f"gof.utils.{n}" for n in (
        "simple_extract_stack", "add_tag_trace", "MethodNotDefined", "memoize", "deprecated",
        "uniq", "difference", "toposort", "flatten", "remove", "hash_from_file",
        "hash_from_code", "give_variables_names", "to_return_values", "hashtype", "object2")),
    *(f"gradient.{n}" for n in (
        "consider_constant_", "disconnected_grad_", "format_as", "grad_clip", "grad_scale",
        "subgraph_grad", "undefined_grad", "undefined_grad_", "zero_grad_", "numeric_grad",
        "Rop")),
]  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_name_resolves_at_its_theano_path(name: str) -> None:
    obj = theano
    for part in name.split("."):
        obj = getattr(obj, part)
    assert obj is not None


def test_rop_keeps_w_connected_as_theano() -> None:
    x, W, V = T.dmatrix("x"), T.dmatrix("W"), T.dmatrix("V")
    r = G.Rop(T.dot(x, W), W, V)
    # Theano's graph: dot(zeros_like(x), W) + dot(x, V): W stays an input.
    assert W in theano.graph.traversal.graph_inputs([r])
    f = theano.function([W, V, x], r)
    out = f(np.ones((2, 2)), np.arange(4.0).reshape(2, 2), np.arange(4.0).reshape(2, 2) + 1)
    np.testing.assert_allclose(out, [[4.0, 7.0], [8.0, 15.0]])  # Theano 1.0.5


def test_rop_structure_and_disconnected_outputs() -> None:
    x, v = T.dvector("x"), T.dvector("v")
    y = T.dvector("y")
    assert isinstance(G.Rop([x * 2], x, v), list)
    assert isinstance(G.Rop((x * 2,), [x], [v]), tuple)
    # No tangent reaches disconnected_grad(x)'s output: Theano raises by default ...
    with pytest.raises(G.DisconnectedInputError):
        G.Rop(G.disconnected_grad(x), x, v)
    # ... but an unrelated input only adds a zero tangent (Theano's zeros eval point).
    np.testing.assert_array_equal(
        theano.function(
            [x, y, v], G.Rop(T.sum(G.disconnected_grad(x)) * y, x, v), on_unused_input="ignore"
        )(np.ones(2), np.ones(2), np.ones(2)),
        np.zeros(2),
    )
    # ... or returns zeros / None on request.
    z = G.Rop(
        G.disconnected_grad(x) * 2, x, v, disconnected_outputs="ignore", return_disconnected="zero"
    )
    np.testing.assert_array_equal(theano.function([x], z)(np.ones(3)), np.zeros(3))
    assert G.Rop(G.disconnected_grad(x), x, v, "ignore", "None") is None
    f = theano.function([x, v], G.Rop(T.tanh(x) * 2, x, v))
    xs = np.array([0.1, -0.5])
    np.testing.assert_allclose(f(xs, np.ones(2)), 2 * (1 - np.tanh(xs) ** 2))


def test_gradient_view_ops_match_theano() -> None:
    x = T.dscalar("x")
    for fn in (G.consider_constant, G.zero_grad, G.disconnected_grad):
        assert theano.function([x], T.grad(fn(x) * 2 + x**2, x))(3.0) == 6.0  # Theano 1.0.5
    for fn in (G.consider_constant, G.zero_grad):
        assert theano.function([x], T.grad(fn(x) * 2, x))(3.0) == 0.0
    with pytest.raises(G.DisconnectedInputError):
        T.grad(G.disconnected_grad(x) * 2, x)
    with pytest.raises(G.NullTypeGradError):
        T.grad(G.undefined_grad(x) * 2 + x, x)
    assert str(G.zero_grad_) == "ZeroGrad" and str(G.consider_constant_) == "ConsiderConstant"
    assert G.zero_grad(x).owner.op == G.zero_grad_
    assert G.undefined_grad_(x).owner.op == G.undefined_grad_
    f = theano.function([x], [G.zero_grad(x), G.grad_clip(x, -1, 1), G.grad_scale(x, 3)])
    assert [float(v) for v in f(2.5)] == [2.5, 2.5, 2.5]


def test_grad_clip_and_grad_scale_match_theano() -> None:
    x = T.dscalar("x")
    z = T.grad(G.grad_clip(x, -1, 1) ** 2, x)
    f = theano.function([x], z)
    assert (f(2.0), f(0.25)) == (1.0, 0.5)  # Theano 1.0.5
    fp = theano.function([x], T.grad(G.grad_scale(T.sin(x), -1.0), x))
    assert fp(2.0) == pytest.approx(0.4161468365471424, abs=1e-15)  # Theano 1.0.5
    with pytest.raises(ValueError, match="upper bound"):
        G.grad_clip(x, 1, -1)
    G.verify_grad(lambda a: G.grad_scale(a, 1.0) * 2, [np.random.default_rng(0).random((2, 3))])


def test_format_as_and_subgraph_grad() -> None:
    assert G.format_as(True, False, 3) == [3]
    assert G.format_as(False, True, [3]) == (3,)
    assert G.format_as(False, False, [3]) == 3
    x = T.dvector("x")
    w1 = theano.shared(np.array([[1.0, 2.0], [3.0, 4.0]]), name="w1")
    a1 = T.tanh(T.dot(x, w1))
    cost = T.sum(a1**2)
    wrt_grads, end_grads = G.subgraph_grad(wrt=[w1], end=[a1], cost=cost)
    # The gradient at a held-constant variable is still returned (Theano's grad too).
    g_a, g_w = T.grad(cost, [a1, w1], consider_constant=[a1], disconnected_inputs="ignore")
    full = T.grad(cost, w1)
    f = theano.function([x], [wrt_grads[0], full, end_grads[0], g_a, g_w])
    g_sub, g_full, g_end, g_a_val, g_w_val = f(np.array([0.1, -0.2]))
    np.testing.assert_allclose(g_a_val, g_end)
    np.testing.assert_allclose(g_w_val, np.zeros((2, 2)))
    np.testing.assert_allclose(g_sub, np.zeros((2, 2)))  # a1 is held constant: no path to w1
    np.testing.assert_allclose(g_end, 2 * np.tanh(np.array([0.1, -0.2]) @ w1.get_value()))
    (w_from_start,), _ = G.subgraph_grad(wrt=[w1], end=[x], start={a1: end_grads[0]})
    np.testing.assert_allclose(theano.function([x], w_from_start)(np.array([0.1, -0.2])), g_full)


def test_numeric_grad_is_theanos_class() -> None:
    def f(a: np.ndarray, b: np.ndarray) -> float:
        return (a**2).sum() + np.sin(b).sum()

    ng = G.numeric_grad(f, [np.array([1.0, 2.0]), np.array([[0.5]])])
    # One-sided differences, eps 1e-7 (Theano 1.0.5's values).
    np.testing.assert_allclose(ng.gf[0], [2.0000001, 4.00000009], rtol=1e-8)
    np.testing.assert_allclose(ng.gf[1], [[0.87758254]], rtol=1e-7)
    max_arg, pos, abs_err, _rel_err = ng.max_err(
        [np.array([2.0, 4.0]), np.array([[np.cos(0.5)]])], 1e-4, 1e-4
    )
    assert (max_arg, pos) == (0, 0)
    assert abs_err == pytest.approx(1.0330825261917198e-07, rel=1e-3)
    ng32 = G.numeric_grad(lambda a: (a**3).sum(), np.array([1.5, -2.0], dtype="float32"))
    assert ng32.gf.dtype == np.float32  # a single array in, a single array out
    np.testing.assert_allclose(ng32.gf, [6.752014, 12.0004015], rtol=1e-6)
    abs_e, rel_e = G.numeric_grad.abs_rel_err(np.array([1.0, 0.0]), np.array([1.5, 0.0]))
    np.testing.assert_allclose(abs_e, [0.5, 0.0])
    np.testing.assert_allclose(rel_e, [0.2, 0.0])
    with pytest.raises(ValueError, match="wrong number"):
        ng.abs_rel_errors([np.zeros(2)])


def test_clone_has_theanos_signature() -> None:
    x, y = T.dvector("x"), T.dvector("y")
    z = T.exp(x) * 2
    c = theano.clone(z, replace={x: y})
    f = theano.function([y], c)
    np.testing.assert_allclose(f(np.zeros(2)), [2.0, 2.0])
    outs = theano.clone([z], replace=[(x, y + 1)])
    assert isinstance(outs, list) and len(outs) == 1
    shared = theano.shared(np.ones(2), name="s")
    c2 = theano.clone(shared * x, share_inputs=False)
    assert shared not in theano.graph.traversal.graph_inputs([c2])
    with pytest.warns(DeprecationWarning, match="copy_inputs"):
        theano.clone(z, copy_inputs=True)
    with pytest.raises(ValueError, match="replace is neither"):
        theano.clone(z, replace=5)


class _Scale(theano.Op):
    """An Op taking its parameters through a ParamsType (Theano's way)."""

    __props__ = ("alpha", "mode")
    params_type = ParamsType(alpha=generic, mode=EnumList("ADD", "MUL"))

    def __init__(self, alpha: float, mode: str | int) -> None:
        self.alpha, self.mode = alpha, mode

    def make_node(self, x):  # type: ignore[no-untyped-def]
        x = T.as_tensor_variable(x)
        return theano.Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage, params):  # type: ignore[no-untyped-def]
        (x,) = inputs
        if params.mode == self.params_type.ADD:
            output_storage[0][0] = x + params.alpha
        else:
            output_storage[0][0] = x * params.alpha


@pytest.mark.parametrize("mode", [None, "FAST_COMPILE", "DEBUG_MODE"])
def test_params_type_reaches_perform(mode: str | None) -> None:
    x = T.dvector()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = theano.function([x], [_Scale(2.0, "MUL")(x), _Scale(3.0, 0)(x)], mode=mode)
    a, b = f(np.arange(3.0))
    np.testing.assert_array_equal(a, [0.0, 2.0, 4.0])
    np.testing.assert_array_equal(b, [3.0, 4.0, 5.0])


def test_params_type_and_params() -> None:
    pt = ParamsType(b=generic, a=EnumList("ONE", ("TWO", "two")))
    assert pt.fields == ("a", "b") and pt.TWO == 1 and pt.enum_from_alias("two") == 1
    assert pt.get_type("a") == EnumList("ONE", ("TWO", "two")) and pt.get_field(generic) == "b"
    p = pt.get_params(_Scale(1.0, 0), a="two", b=[1, 2])
    assert isinstance(p, Params) and p.a == 1 and p["b"] == [1, 2]
    assert pt.filter(p) == p and pt.values_eq(p, pt.get_params(a=1, b=[1, 2]))
    assert pickle.loads(pickle.dumps(p)) == p and pickle.loads(pickle.dumps(pt)) == pt
    with pytest.raises(TypeError):
        p.a = 3
    with pytest.raises(AttributeError, match="no value found"):
        pt.get_params(a=0)
    with pytest.raises(TypeError, match="strict mode"):
        pt.filter(object(), strict=True)
    with pytest.raises(ValueError):
        ParamsType()
    with pytest.raises(TypeError, match="should inherit"):
        ParamsType(a=3)
    assert _Scale(2.0, "MUL").get_params(None) == pt.__class__(
        alpha=generic, mode=EnumList("ADD", "MUL")
    ).get_params(alpha=2.0, mode=1)


def test_gof_opt_theano_style_local_optimizers() -> None:
    x = T.dvector("x")

    @gof.local_optimizer([T.elemwise.Elemwise])
    def exp_to_sqrt(node):  # type: ignore[no-untyped-def]
        if node.op == T.exp(x).owner.op:
            return [T.sqrt(node.inputs[0])]
        return False

    class LogToAbs(gof.opt.LocalOptimizer):
        def tracks(self):  # type: ignore[no-untyped-def]
            return [T.elemwise.Elemwise]

        def transform(self, node):  # type: ignore[no-untyped-def]
            if node.op == T.log(x).owner.op:
                return [abs(node.inputs[0])]
            return False

    fg = theano.FunctionGraph([x], [T.log(T.exp(x))])
    gof.TopoOptimizer(exp_to_sqrt).optimize(fg)
    gof.opt.in2out(LogToAbs()).optimize(fg)
    assert gof.graph.as_string(fg.inputs, fg.outputs) == [
        "Elemwise{abs_,no_inplace}(Elemwise{sqrt,no_inplace}(x))"
    ]
    neg = T.neg(x).owner.op
    fg2 = theano.FunctionGraph([x], [T.neg(T.neg(x))])
    gof.opt.TopoOptimizer(gof.opt.PatternSub((neg, (neg, "x")), "x")).optimize(fg2)
    assert fg2.outputs[0] is fg2.inputs[0]
    fg3 = theano.FunctionGraph([x], [T.exp(x)])
    gof.opt.TopoOptimizer(gof.opt.OpSub(T.exp(x).owner.op, T.log(x).owner.op)).optimize(fg3)
    assert fg3.outputs[0].owner.op == T.log(x).owner.op


def test_compile_names() -> None:
    with pytest.raises(theano.compile.ops.ObsoleteTheanoAPIError, match="opgraph_c_kernels"):
        theano.compile.ops.register_shape_c_code(T.TensorType, "code", version=1)
    x = T.dmatrix("x")
    assert theano.compile.ops.shape(x).owner is not None
    assert issubclass(
        theano.compile.debugmode.StochasticOrder, theano.compile.debugmode.DebugModeError
    )

    class Box:
        def __init__(self, v: object) -> None:
            self.v = v

    @theano.compile.sharedvalue.shared_constructor
    def box_constructor(value, name=None, strict=False, allow_downcast=None, **kw):  # type: ignore[no-untyped-def]
        if not isinstance(value, Box):
            raise TypeError("not a Box")
        return theano.compile.SharedVariable(
            type=theano.gof.generic, value=value, name=name, strict=strict
        )

    try:
        s = theano.shared(Box(3), name="box")
        assert s.get_value().v == 3 and s.name == "box"
        assert isinstance(theano.shared(np.ones(2)).get_value(), np.ndarray)
    finally:
        theano.compile.sharedvalue.shared_constructor(box_constructor, remove=True)


def test_function_dump_round_trips(tmp_path) -> None:  # type: ignore[no-untyped-def]
    x = T.dvector("x")
    path = str(tmp_path / "fn.pkl")
    theano.function_dump(path, [x], T.exp(x) * 2, on_unused_input="ignore")
    with open(path, "rb") as f:
        kwargs = pickle.load(f)
    assert kwargs["on_unused_input"] == "ignore"
    fn = theano.function(**kwargs)
    np.testing.assert_allclose(fn(np.zeros(2)), [2.0, 2.0])
    assert hasattr(x.tag, "trace") == hasattr(T.dvector().tag, "trace")  # tags restored


def test_top_level_dot_asarray_sparse_grad() -> None:
    x = T.dmatrix("x")
    f = theano.function([x], theano.dot(x, np.eye(2) * 2))
    np.testing.assert_allclose(f(np.ones((2, 2))), 2 * np.ones((2, 2)))
    assert theano.dot(np.eye(2), x).owner is not None
    assert theano._asarray([1, 2], dtype="int64").dtype == np.int64
    try:
        importlib.import_module("opgraph.sparse")
    except ImportError:
        with pytest.raises(ImportError, match="opgraph-sparse"):
            theano.sparse_grad(x[[0, 1]])
