"""GpuElemwise and the elementwise kernels: every scalar op against NumPy, every layout,
copy_into, the lifter, and the generated text.

The scalar ops are checked many at a time: one Composite with one output per op, so that
a whole op table runs through one generated module (one compilation), and each output is
compared with the op's own NumPy implementation (Composite.impl, what the CPU runs).
"""

from __future__ import annotations

import numpy as np
import pytest

import opgraph
import opgraph.scalar.basic as sb
import opgraph.tensor as T
from opgraph.scalar import extra as sx
from opgraph.scalar.type import get_scalar_type
from opgraph.tensor.xlogx import scalar_xlogx, scalar_xlogy0
from opgraph_cuda import strided
from opgraph_cuda.array import GpuArray
from opgraph_cuda.elemwise import GpuElemwise
from opgraph_cuda.kernels import elemwise as ke
from opgraph_cuda.kernels.scalar import c_literal, element_function
from opgraph_cuda.type import GpuArrayType

TOL = {"float32": {"rtol": 2e-5, "atol": 1e-6}, "float64": {"rtol": 1e-12, "atol": 1e-14}}


def gpu_call(op, *values, bcast=None):
    """Build ``op``'s node for GPU inputs like ``values``, prepare it, run it: host outputs."""
    arrays = [v if isinstance(v, GpuArray) else GpuArray.from_host(v) for v in values]
    if bcast is None:
        bcast = [[False] * a.ndim for a in arrays]
    variables = [GpuArrayType(str(a.dtype), b)() for a, b in zip(arrays, bcast, strict=True)]
    node = op.make_node(*variables)
    return [out.get() for out in op.prepare_gpu(node)(arrays)]


def table_composite(dtypes, ops):
    """One Composite over inputs of ``dtypes`` with an output per ``(name, fn)`` of ``ops``."""
    xs = [get_scalar_type(d)() for d in dtypes]
    outs = [fn(*xs) for _, fn in ops]
    return sb.Composite(xs, outs)


def check_table(dtypes, ops, values):
    comp = table_composite(dtypes, ops)
    got = gpu_call(GpuElemwise(comp), *values)
    with np.errstate(all="ignore"):
        expected = comp.impl(*values)
    for (name, _), g, e in zip(ops, got, expected, strict=True):
        e = np.asarray(e)
        assert g.dtype == e.dtype, name
        if g.dtype.kind == "f":
            np.testing.assert_allclose(g, e, equal_nan=True, err_msg=name, **TOL[str(g.dtype)])
        else:
            np.testing.assert_array_equal(g, e, err_msg=name)


SPECIAL = [0.0, -0.0, 0.5, -0.5, 1.5, -2.5, 2.5, 3.0, -7.25, 1e-3, 100.0, np.inf, -np.inf, np.nan]

UNARY_FLOAT = [
    ("neg", sb.neg),
    ("abs", sb.abs_),
    ("sgn", sb.sgn),
    ("sqr", sb.sqr),
    ("sqrt", sb.sqrt),
    ("exp", sb.exp),
    ("exp2", sb.exp2),
    ("expm1", sb.expm1),
    ("log", sb.log),
    ("log2", sb.log2),
    ("log10", sb.log10),
    ("log1p", sb.log1p),
    ("sin", sb.sin),
    ("cos", sb.cos),
    ("tan", sb.tan),
    ("arcsin", sb.arcsin),
    ("arccos", sb.arccos),
    ("arctan", sb.arctan),
    ("sinh", sb.sinh),
    ("cosh", sb.cosh),
    ("tanh", sb.tanh),
    ("arcsinh", sb.arcsinh),
    ("arccosh", sb.arccosh),
    ("arctanh", sb.arctanh),
    ("erf", sb.erf),
    ("erfc", sb.erfc),
    ("gammaln", sb.gammaln),
    ("sigmoid", sb.sigmoid),
    ("softplus", sb.softplus),
    ("floor", sb.floor),
    ("ceil", sb.ceil),
    ("trunc", sb.trunc),
    ("round_half_to_even", sb.round_half_to_even),
    ("round_half_away", sx.round_half_away_from_zero),
    ("inv", sx.inv),
    ("deg2rad", sx.deg2rad),
    ("rad2deg", sx.rad2deg),
    ("xlogx", scalar_xlogx),
    ("isnan", sb.isnan),
    ("isinf", sb.isinf),
    ("pow 10 (unrolled)", lambda x: x**10),
    ("pow 0", lambda x: x**0),
    ("pow -1", lambda x: x**-1),
    ("pow 0.5", lambda x: x**0.5),
    ("identity", sb.identity),
    ("gamma", sb.gamma),
    ("to int32", lambda x: sb.cast(sb.switch(sb.or_(sb.isnan(x), sb.isinf(x)), 0.0, x), "int32")),
    ("to bool", lambda x: sb.cast(x, "bool")),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_unary_float_ops_match_numpy(dtype):
    x = np.array([*SPECIAL, 0.25, 0.75, -0.9, 0.9, 4.0, 30.0, -30.0, 1e-30], dtype=dtype)
    check_table([dtype], UNARY_FLOAT, [x])


BINARY_FLOAT = [
    ("add", sb.add),
    ("sub", sb.sub),
    ("mul", sb.mul),
    ("true_div", sb.true_div),
    ("int_div", sb.int_div),
    ("mod", sb.mod),
    ("pow", sb.pow),
    ("maximum", sb.maximum),
    ("minimum", sb.minimum),
    ("arctan2", sb.arctan2),
    ("gt", sb.gt),
    ("lt", sb.lt),
    ("ge", sb.ge),
    ("le", sb.le),
    ("eq", sb.eq),
    ("neq", sb.neq),
    ("xlogy0", scalar_xlogy0),
    ("second", sb.second),
    ("clip", lambda x, y: sb.clip(x, -1.0, y)),
    ("switch", lambda x, y: sb.switch(sb.gt(x, y), x, y * 2.5)),
    ("add3", lambda x, y: sb.add(x, y, x)),
    ("mul_without_zeros", sx.mul_without_zeros),
]


def test_binary_float_ops_match_numpy():
    a, b = np.meshgrid(np.array(SPECIAL, "float32"), np.array(SPECIAL, "float32"))
    check_table(["float32", "float32"], BINARY_FLOAT, [a.ravel(), b.ravel()])


INT_OPS = [
    ("add", sb.add),
    ("sub", sb.sub),
    ("mul", sb.mul),
    ("int_div", sb.int_div),
    ("mod", sb.mod),
    ("maximum", sb.maximum),
    ("minimum", sb.minimum),
    ("and", sb.and_),
    ("or", sb.or_),
    ("xor", sb.xor),
    ("invert", lambda x, y: sb.invert(x)),
    ("neg", lambda x, y: sb.neg(x)),
    ("abs", lambda x, y: sb.abs_(x)),
    ("sgn", lambda x, y: sb.sgn(x)),
    ("sqr", lambda x, y: sb.sqr(x)),
    ("pow 3", lambda x, y: x**3),
    ("floor (identity)", lambda x, y: sb.floor(x)),
    ("gt", sb.gt),
    ("eq", sb.eq),
    ("true_div", sb.true_div),
    ("exp of int", lambda x, y: sb.exp(sb.true_div(x, 64))),
    ("isnan", lambda x, y: sb.isnan(x)),
    ("to float32", lambda x, y: sb.cast(x, "float32")),
    ("to uint8", lambda x, y: sb.cast(x, "uint8")),
    ("to bool", lambda x, y: sb.cast(x, "bool")),
]


@pytest.mark.parametrize("dtype", ["int8", "int64"])
def test_integer_ops_match_numpy(dtype):
    info = np.iinfo(dtype)
    vals = np.array([0, 1, -1, 2, -2, 3, -7, 7, 100, -100, info.min, info.max], dtype=dtype)
    a, b = np.meshgrid(vals, vals)
    check_table([dtype, dtype], INT_OPS, [a.ravel(), b.ravel()])


BOOL_OPS = [
    ("and", sb.and_),
    ("or", sb.or_),
    ("xor", sb.xor),
    ("invert", lambda x, y: sb.invert(x)),
    ("add (logical or)", sb.add),
    ("mul (logical and)", sb.mul),
    ("maximum", sb.maximum),
    ("eq", sb.eq),
    ("switch", lambda x, y: sb.switch(x, 1.5, -2.0)),
    ("to int8", lambda x, y: sb.cast(x, "int8")),
    ("to float32", lambda x, y: sb.cast(x, "float32")),
]


def test_bool_ops_match_numpy():
    a, b = np.meshgrid(np.array([False, True]), np.array([False, True]))
    check_table(["bool", "bool"], BOOL_OPS, [a.ravel(), b.ravel()])


def test_mixed_dtypes_compute_in_the_output_dtype():
    ops = [("i8 + f32", sb.add), ("i8 < f32", sb.lt), ("f32 // i8", lambda x, y: sb.int_div(y, x))]
    x = np.array([-3, 0, 5, 127], "int8")
    y = np.array([0.5, -1.5, 2.0, np.nan], "float32")
    check_table(["int8", "float32"], ops, [x, y])


# ---- layouts ----------------------------------------------------------------------------

_COMP = table_composite(["float32", "float32"], [("f", lambda x, y: x * y + sb.exp(x))])
OP = GpuElemwise(_COMP)


def _ref(x, y):
    return x * y + np.exp(x)


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype("float32")


def test_contiguous_aligned_unaligned_and_tails(rng):
    for n in (1, 3, 4, 5, 1001):
        x, y = _rand(rng, n + 1), _rand(rng, n + 1)
        (out,) = gpu_call(OP, x[:n], y[:n])
        np.testing.assert_allclose(out, _ref(x[:n], y[:n]), **TOL["float32"])
        gx, gy = GpuArray.from_host(x), GpuArray.from_host(y)
        (out,) = gpu_call(OP, gx[1:], gy[1:])  # 4 bytes past an aligned address: no vectors
        np.testing.assert_allclose(out, _ref(x[1:], y[1:]), **TOL["float32"])


def test_transposed_sliced_and_reversed_views(rng):
    x, y = _rand(rng, 6, 9), _rand(rng, 9, 6)
    gx, gy = GpuArray.from_host(x), GpuArray.from_host(y)
    (out,) = gpu_call(OP, gx, gy.T)
    np.testing.assert_allclose(out, _ref(x, y.T), **TOL["float32"])
    (out,) = gpu_call(OP, gx[::-1, ::2], gy.T[::-1, ::-2])
    np.testing.assert_allclose(out, _ref(x[::-1, ::2], y.T[::-1, ::-2]), **TOL["float32"])


def test_rows_of_the_strided_kernel(rng):
    """A last dimension of at least ROW_MIN elements gives each block whole rows."""
    x, y = _rand(rng, 3, 5, ke.ROW_MIN + 3), _rand(rng, 5, 1, ke.ROW_MIN + 3)
    op = GpuElemwise(_COMP)
    args = (GpuArray.from_host(x).transpose((1, 0, 2)), y)
    (out,) = gpu_call(op, *args, bcast=[[False] * 3, [False, True, False]])
    np.testing.assert_allclose(out, _ref(x.transpose(1, 0, 2), y), **TOL["float32"])


def test_broadcasting_rows_columns_and_scalars(rng):
    x, row, col = _rand(rng, 4, 7), _rand(rng, 1, 7), _rand(rng, 4, 1)
    (out,) = gpu_call(OP, x, row, bcast=[[False, False], [True, False]])
    np.testing.assert_allclose(out, _ref(x, row), **TOL["float32"])
    (out,) = gpu_call(OP, col, row, bcast=[[False, True], [True, False]])
    np.testing.assert_allclose(out, _ref(col, row), **TOL["float32"])
    scalar = np.array([[2.5]], "float32")
    (out,) = gpu_call(OP, scalar, x, bcast=[[True, True], [False, False]])
    np.testing.assert_allclose(out, _ref(scalar, x), **TOL["float32"])


def test_lower_rank_inputs_are_padded(rng):
    x, v = _rand(rng, 3, 4), _rand(rng, 4)
    gx, gv = GpuArrayType("float32", (False, False))(), GpuArrayType("float32", (False,))()
    node = OP.make_node(gx, gv)
    assert node.outputs[0].type.broadcastable == (False, False)
    padded = node.inputs[1]
    assert padded.type.broadcastable == (True, False) and padded.owner.inputs == [gv]
    row = GpuArray.from_host(v).view((1, 4), (0, 4))  # what the GpuDimShuffle gives
    (out,) = OP.prepare_gpu(node)([GpuArray.from_host(x), row])
    np.testing.assert_allclose(out.get(), _ref(x, v), **TOL["float32"])


def test_zero_d_empty_and_one_element(rng):
    x, y = np.array(1.5, "float32"), np.array(-2.0, "float32")
    (out,) = gpu_call(OP, x, y)
    assert out.shape == () and np.allclose(out, _ref(x, y))
    e = np.zeros((0, 3), "float32")
    (out,) = gpu_call(OP, e, e)
    assert out.shape == (0, 3)
    one = np.array([[0.25]], "float32")
    (out,) = gpu_call(OP, one, one)
    np.testing.assert_allclose(out, _ref(one, one), **TOL["float32"])


def test_multiple_outputs():
    comp = sb.Composite(*_two_outputs())
    x = np.linspace(-2, 2, 9, dtype="float32")
    s, c, flag = gpu_call(GpuElemwise(comp), x)
    np.testing.assert_allclose(s, np.sin(x) * 2, **TOL["float32"])
    np.testing.assert_allclose(c, np.cos(x), **TOL["float32"])
    np.testing.assert_array_equal(flag, x > 0)


def _two_outputs():
    x = get_scalar_type("float32")()
    return [x], [sb.sin(x) * 2, sb.cos(x), sb.gt(x, 0)]


def test_inplace_writes_into_the_input(rng):
    op = GpuElemwise(sb.add, {0: 0})
    assert str(op) == "GpuElemwise{add}[(0, 0)]<gpuarray>" and op.destroy_map == {0: [0]}
    x, y = _rand(rng, 5), _rand(rng, 5)
    gx = GpuArray.from_host(x)
    t = GpuArrayType("float32", (False,))
    node = op.make_node(t(), t())
    (out,) = op.prepare_gpu(node)([gx, GpuArray.from_host(y)])
    assert out.ptr == gx.ptr
    np.testing.assert_allclose(gx.get(), x + y, **TOL["float32"])


def test_shape_mismatch_is_a_value_error(rng):
    with pytest.raises(ValueError, match="cannot broadcast"):
        gpu_call(OP, _rand(rng, 3), _rand(rng, 4))
    with pytest.raises(ValueError, match="says dimension 0 has length 1"):
        gpu_call(OP, _rand(rng, 3), _rand(rng, 3), bcast=[[False], [True]])


def test_op_without_cuda_code_is_refused():
    t = GpuArrayType("float32", (False,))
    with pytest.raises(TypeError, match="no CUDA code"):
        GpuElemwise(sb.psi).make_node(t())
    assert element_function(sb.psi, ["float32"], ["float32"]) is None
    assert element_function(sb.pow, ["int32", "int32"], ["int32"]) is None  # run-time exponent


def test_printing_and_infer_shape():
    assert str(GpuElemwise(sb.add)) == "GpuElemwise{add,no_inplace}"
    t = GpuArrayType("float32", (False, True))
    node = GpuElemwise(sb.mul).make_node(t(), GpuArrayType("float32", (False, False))())
    assert GpuElemwise(sb.mul).infer_shape(node, [(3, 1), (3, 5)]) == [(3, 5)]


# ---- generated text, cache, copy_into ----------------------------------------------------


def test_source_names_the_op_and_unrolls_constant_powers():
    comp = table_composite(["float32"], [("f", lambda x: x + x**10)])
    kernel = ke.elemwise_kernel(comp, ["float32"], ["float32"], [False], 1, "GpuElemwise{t}")
    code = kernel.source.code
    assert code.startswith("/* GpuElemwise{t}") and '#include "opgraph_cuda_prelude.cuh"' in code
    assert "opg_powu<10>" in code and "pow(" not in code
    assert (
        ke.elemwise_kernel(comp, ["float32"], ["float32"], [False], 1, "GpuElemwise{t}") is kernel
    )


def test_kernels_compile_when_the_node_is_prepared(monkeypatch):
    comp = table_composite(["float32"], [("f", lambda x: sb.tanh(x) * 3.25)])
    op = GpuElemwise(comp)
    node = op.make_node(GpuArrayType("float32", (False,))())
    run = op.prepare_gpu(node)
    runtime = GpuArray.from_host(np.zeros(1, "float32")).runtime
    monkeypatch.setattr(runtime, "load", lambda source: pytest.fail("compiled at call time"))
    (out,) = run([GpuArray.from_host(np.ones(3, "float32"))])
    np.testing.assert_allclose(out.get(), np.tanh(np.ones(3, "float32")) * 3.25, rtol=1e-6)


def test_literals():
    assert c_literal(np.inf, "float32") == "((opg_float32)INFINITY)"
    assert c_literal(-(2**63), "int64") == "(-9223372036854775807LL - 1)"
    assert c_literal(0.1, "float32") == "0.10000000149011612f"
    assert c_literal(3, "uint8") == "((opg_uint8)3ULL)"


def test_collapse_merges_contiguous_and_broadcast_dimensions():
    assert strided.collapse((2, 3, 4), [(12, 4, 1), (0, 0, 0)]) == ([24], [[1], [0]])
    assert strided.collapse((2, 3, 4), [(12, 4, 1), (4, 0, 1)]) == (
        [2, 3, 4],
        [[12, 4, 1], [4, 0, 1]],
    )
    assert strided.collapse((2, 1, 4), [(4, 99, 1)]) == ([8], [[1]])
    assert strided.collapse((1, 1), [(5, 7)]) == ([], [[]])
    assert strided.collapse((3, 4), [(-4, -1)]) == ([12], [[-1]])


@pytest.mark.parametrize(("src", "dst"), [("float32", "int32"), ("float64", "bool")])
def test_copy_into_converts_and_handles_strides(rng, src, dst):
    x = (rng.standard_normal((4, 6)) * 3).astype(src)
    x[0, :3] = [0.0, 0.5, -0.25]
    g = GpuArray.from_host(x)
    out = GpuArray.empty((6, 2), dst)
    strided.copy_into(out, g.T[:, ::2])
    np.testing.assert_array_equal(out.get(), x.T[:, ::2].astype(dst))
    target = GpuArray.zeros((4, 6), dst)
    strided.copy_into(target[::-1], g)  # a reversed destination
    np.testing.assert_array_equal(target.get(), x[::-1].astype(dst))
    with pytest.raises(ValueError, match="shape"):
        strided.copy_into(out, g)


def test_gpuarray_get_of_a_view_uses_copy_into(rng):
    x = _rand(rng, 5, 7)
    np.testing.assert_array_equal(GpuArray.from_host(x).T[::-1, 1:].get(), x.T[::-1, 1:])


# ---- through opgraph.function ------------------------------------------------------------


def test_lifted_graph_matches_numpy(gpu_mode, rng):
    x, y = T.fmatrix("x"), T.frow("y")
    z = T.exp(x) * T.sin(x) + y**3 - abs(x) // 2
    f = opgraph.function([x, y], [z, T.isnan(z)], mode=gpu_mode)
    ops = [type(n.op).__name__ for n in f.maker.fgraph.toposort()]
    assert "GpuElemwise" in ops and "Elemwise" not in ops, ops
    xv, yv = _rand(rng, 4, 5), _rand(rng, 1, 5)
    out, nan = f(xv, yv)
    expected = np.exp(xv) * np.sin(xv) + yv**3 - np.abs(xv) // 2
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    assert nan.dtype == bool and not nan.any()


@pytest.mark.filterwarnings("ignore:the c backend's kernel for Elemwise")
def test_op_without_cuda_code_stays_on_the_cpu(gpu_mode, rng):
    x = T.fvector("x")
    f = opgraph.function([x], T.psi(T.exp(x)), mode=gpu_mode)
    ops = [type(n.op).__name__ for n in f.maker.fgraph.toposort()]
    assert "Elemwise" in ops, ops
    import scipy.special

    xv = _rand(rng, 6)
    np.testing.assert_allclose(f(xv), scipy.special.psi(np.exp(xv)), rtol=1e-4)
