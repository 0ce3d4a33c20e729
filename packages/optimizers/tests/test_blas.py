"""BLAS rewrites: where Dot22, Gemm, Gemv, Ger and their in-place versions appear, and values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opgraph as theano
import opgraph.tensor as T
from opgraph.compile.mode import Mode
from opgraph.graph.fg import FunctionGraph
from opgraph.printing import debugprint
from opgraph.rewriting import make_optdb
from opgraph.tensor.blas import Dot22, Dot22Scalar, Gemm, Gemv, Ger
from opgraph.tensor.dot import Dot
from opgraph.tensor.structure import AllocEmpty
from opgraph.testing import assert_allclose
from opgraph_optimizers.blas import gemm_optimizer, linear_terms
from opgraph_optimizers.registry import load_rewrite_modules

FAST_RUN = Mode("vm", "fast_run")
NO_BLAS = FAST_RUN.excluding("blas")
REFERENCE = Mode("vm", None)


def _mat(name: str, dtype: str = "float64", bcast: tuple[bool, bool] = (False, False)) -> Any:
    return T.TensorType(dtype, bcast)(name)


def _vec(name: str, dtype: str = "float64") -> Any:
    return T.TensorType(dtype, (False,))(name)


def _values(rng: np.random.Generator, variables: list[Any], sizes: dict[str, int]) -> list:
    """Values for ``variables``: each dimension's length from ``sizes`` by the variable's
    name letter and dimension (``"X0"``), 1 where broadcastable."""
    out = []
    for v in variables:
        shape = tuple(
            1 if b else sizes[f"{v.name[0]}{d}"] for d, b in enumerate(v.type.broadcastable)
        )
        out.append(rng.uniform(-1, 1, size=shape).astype(v.type.dtype))
    return out


def _fresh_gemvs(uses: Any) -> int:
    """Gemv nodes writing into an AllocEmpty buffer (a plain ``dot(A, x)``)."""
    return sum(
        isinstance(n.op, Gemv)
        and n.inputs[0].owner is not None
        and isinstance(n.inputs[0].owner.op, AllocEmpty)
        for n in uses.nodes
    )


def _scaled_gemvs(uses: Any) -> int:
    return uses.count(Gemv) - _fresh_gemvs(uses)


# ---------------------------------------------------------------------------- Dot22


@pytest.mark.parametrize(
    "dtypes", [("float64", "float64"), ("float32", "float32"), ("float32", "float64")]
)
def test_dot_of_matrices_becomes_dot22(dtypes: tuple[str, str], rewrites_check: Any) -> None:
    x, y = _mat("X", dtypes[0]), _mat("Y", dtypes[1])
    values = _values(rewrites_check.rng, [x, y], {"X0": 3, "X1": 4, "Y0": 4, "Y1": 2})
    f = rewrites_check.rewrite(
        "local_dot_to_dot22", [x, y], T.dot(x, y), values, lambda uses: uses(Dot22)
    )
    assert not rewrites_check.uses(f)(Dot)


def test_integer_and_float16_products_keep_dot(rewrites_check: Any) -> None:
    for dtype in ("int64", "float16"):
        x, y = _mat("X", dtype), _mat("Y", dtype)
        f = rewrites_check.compile([x, y], [T.dot(x, y), T.dot(x, y[0])])
        uses = rewrites_check.uses(f)
        assert uses(Dot) and not uses(Dot22, Gemv, Gemm)


# ---------------------------------------------------------------------------- Gemm


def _gemm_cases() -> list[tuple[str, Any]]:
    return [
        ("Z - 0.5 * dot", lambda Z, X, Y, a: Z - 0.5 * T.dot(X, Y)),
        ("Z + dot", lambda Z, X, Y, a: Z + T.dot(X, Y)),
        ("a * dot + Z", lambda Z, X, Y, a: a * T.dot(X, Y) + Z),
        ("(Z - dot) * 0.5", lambda Z, X, Y, a: (Z - T.dot(X, Y)) * 0.5),
        ("-dot + Z / 2", lambda Z, X, Y, a: -T.dot(X, Y) + Z / 2),
        ("2Z - a * dot * 3", lambda Z, X, Y, a: 2 * Z - a * T.dot(X, Y) * 3),
        ("Z - dot / a", lambda Z, X, Y, a: Z - T.dot(X, Y) / a),
    ]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("label", "build"), _gemm_cases(), ids=[c[0] for c in _gemm_cases()])
def test_scaled_sums_of_a_matrix_product_become_one_gemm(
    label: str, build: Any, dtype: str, rewrites_check: Any
) -> None:
    Z, X, Y = _mat("Z", dtype), _mat("X", dtype), _mat("Y", dtype)
    a = T.scalar("a", dtype)
    sizes = {"Z0": 3, "Z1": 2, "X0": 3, "X1": 4, "Y0": 4, "Y1": 2}
    values = [*_values(rewrites_check.rng, [Z, X, Y], sizes), np.asarray(0.75, dtype)]
    f = rewrites_check.rewrite(
        "gemm_optimizer", [Z, X, Y, a], build(Z, X, Y, a), values, lambda uses: uses(Gemm)
    )
    uses = rewrites_check.uses(f)
    assert uses.count(Gemm) == 1 and not uses(Dot, Dot22), label
    gemm = next(n for n in uses.nodes if isinstance(n.op, Gemm))
    assert gemm.inputs[0].name == "Z"


def test_two_products_chain_into_two_gemms_and_a_lone_scaled_product_is_dot22scalar(
    rewrites_check: Any,
) -> None:
    Z, X, Y, W = _mat("Z"), _mat("X"), _mat("Y"), _mat("W")
    sizes = {"Z0": 3, "Z1": 3, "X0": 3, "X1": 3, "Y0": 3, "Y1": 3, "W0": 3, "W1": 3}
    values = _values(rewrites_check.rng, [Z, X, Y, W], sizes)
    out = T.dot(X, Y) - 2 * T.dot(Y, W) + Z
    f = rewrites_check.rewrite("gemm_optimizer", [Z, X, Y, W], out, values, lambda u: u(Gemm))
    assert [str(n.op) for n in rewrites_check.nodes(f)] == ["Gemm{no_inplace}"] * 2
    out = T.dot(X, Y) * 3 - T.dot(Y, W)  # no third term: the first product is the buffer
    f = rewrites_check.rewrite("gemm_optimizer", [Z, X, Y, W], out, values, lambda u: u(Gemm))
    assert [type(n.op) for n in rewrites_check.nodes(f)] == [Dot22, Gemm]
    f = rewrites_check.rewrite(
        "gemm_optimizer", [X, Y], -0.5 * T.dot(X, Y), values[1:3], lambda u: u(Dot22Scalar)
    )
    assert [str(n.op) for n in rewrites_check.nodes(f)] == ["Dot22Scalar"]


def test_no_gemm_where_it_would_recompute_or_broadcast(rewrites_check: Any) -> None:
    Z, X, Y, b = _mat("Z"), _mat("X"), _mat("Y"), _vec("b")
    d = T.dot(X, Y)
    f = rewrites_check.compile([Z, X, Y], [d, Z + d])  # the product is needed on its own
    assert not rewrites_check.uses(f)(Gemm)
    f = rewrites_check.compile([X, Y, b], T.dot(X, Y) + b)  # a broadcast bias is no buffer
    assert not rewrites_check.uses(f)(Gemm)
    Z32, a64 = _mat("Z", "float32"), T.dscalar("a")
    X32 = _mat("X", "float32")
    f = rewrites_check.compile([Z32, X32, a64], Z32 + a64 * T.dot(X32, X32))  # float64 result
    assert not rewrites_check.uses(f)(Gemm)


# ---------------------------------------------------------------------------- Gemv


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matrix_vector_sums_become_gemv(dtype: str, rewrites_check: Any) -> None:
    X, u, v = _mat("X", dtype), _vec("u", dtype), _vec("v", dtype)
    a = T.scalar("a", dtype)
    values = [
        *_values(rewrites_check.rng, [X, u, v], {"X0": 3, "X1": 3, "u0": 3, "v0": 3}),
        np.asarray(-1.25, dtype),
    ]
    for out in (v + a * T.dot(X, u), T.dot(u, X) - v, v - 0.5 * (0.25 * v + T.dot(X.T, u))):
        f = rewrites_check.rewrite("gemm_optimizer", [X, u, v, a], out, values, _scaled_gemvs)
        assert rewrites_check.uses(f).count(Gemv) == 1


def test_logistic_regression_update_is_one_gemv_with_folded_scales(rewrites_check: Any) -> None:
    x, g, w = _mat("x"), _vec("g"), _vec("w")
    f = rewrites_check.compile([x, g, w], w - 0.1 * (0.02 * w + T.dot(x.T, g)))
    (gemv,) = [n for n in rewrites_check.nodes(f) if isinstance(n.op, Gemv)]
    y, alpha, A, xv, beta = gemv.inputs
    assert y.name == "w" and xv.name == "g" and A.owner.inputs[0].name == "x"
    assert np.isclose(alpha.data, -0.1) and np.isclose(beta.data, 1 - 0.1 * 0.02)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dot_of_matrix_and_vector_becomes_gemv_into_alloc_empty(
    dtype: str, rewrites_check: Any
) -> None:
    X, u = _mat("X", dtype), _vec("u", dtype)
    values = _values(rewrites_check.rng, [X, u], {"X0": 4, "X1": 3, "u0": 3})
    f = rewrites_check.rewrite("local_dot_to_gemv", [X, u], T.dot(X, u), values, _fresh_gemvs)
    names = [str(n.op) for n in rewrites_check.nodes(f)]
    assert names == ["Shape_i{0}", f"AllocEmpty{{dtype='{dtype}'}}", "Gemv{no_inplace}"]
    values = [values[0], rewrites_check.rng.uniform(size=4).astype(dtype)]
    rewrites_check.rewrite("local_dot_to_gemv", [X, u], T.dot(u, X), values, _fresh_gemvs)


def test_column_and_row_products_become_gemv(rewrites_check: Any) -> None:
    X, c, r = _mat("X"), _mat("c", bcast=(False, True)), _mat("r", bcast=(True, False))
    sizes = {"X0": 3, "X1": 3, "c0": 3, "r1": 3}
    values = _values(rewrites_check.rng, [X, c, r], sizes)
    rewrites_check.rewrite(
        "local_dot22_to_gemv", [X, c, r], [T.dot(X, c), T.dot(r, X)], values, _fresh_gemvs
    )
    f = rewrites_check.rewrite(
        "local_gemm_to_gemv",
        [X, c, r],
        [c + 2 * T.dot(X, c), r - T.dot(r, X)],
        values,
        _scaled_gemvs,
    )
    assert not rewrites_check.uses(f)(Gemm, Dot22)


# ---------------------------------------------------------------------------- Ger


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rank_one_update_becomes_ger(dtype: str, rewrites_check: Any) -> None:
    A, x, y = _mat("A", dtype), _vec("x", dtype), _vec("y", dtype)
    a = T.scalar("a", dtype)
    values = [
        *_values(rewrites_check.rng, [A, x, y], {"A0": 3, "A1": 4, "x0": 3, "y0": 4}),
        np.asarray(0.3, dtype),
    ]
    out = A + a * T.outer(x, y)
    f = rewrites_check.rewrite("local_gemm_to_ger", [A, x, y, a], out, values, lambda u: u(Ger))
    assert [str(n.op) for n in rewrites_check.nodes(f)] == ["Ger{non-destructive}"]
    ger_node = rewrites_check.nodes(f)[0]
    assert [v.name for v in ger_node.inputs] == ["A", "a", "x", "y"]


# ---------------------------------------------------------------------------- in place


def _check_inplace(
    name: str, inputs: list, outputs: Any, values: list, kind: type, n: int, n_off: int = 0
) -> None:
    """FAST_RUN has ``n`` in-place nodes of ``kind``, ``n_off`` once ``name`` is excluded;
    the values equal the reference and no argument is overwritten."""
    expected = theano.function(inputs, outputs, mode=REFERENCE)(*[v.copy() for v in values])
    for mode, count in ((FAST_RUN, n), (FAST_RUN.excluding(name), n_off), ("DEBUG_MODE", None)):
        f = theano.function(inputs, outputs, mode=mode)
        nodes = f.maker.fgraph.toposort()
        if count is not None:
            found = [nd for nd in nodes if isinstance(nd.op, kind) and nd.op.destroy_map]
            assert len(found) == count, f"{name} in {mode}: {[str(nd.op) for nd in nodes]}"
        originals = [v.copy() for v in values]
        got = f(*values)
        for v, o in zip(values, originals):
            np.testing.assert_array_equal(v, o)
        for g, e in zip(
            got if isinstance(got, list) else [got],
            expected if isinstance(expected, list) else [expected],
        ):
            assert_allclose(g, e)


def test_gemm_gemv_ger_work_in_place_on_intermediate_buffers(rng: np.random.Generator) -> None:
    Z, X, Y = _mat("Z"), _mat("X"), _mat("Y")
    v, u = _vec("v"), _vec("u")
    values = _values(rng, [Z, X, Y], {"Z0": 3, "Z1": 3, "X0": 3, "X1": 3, "Y0": 3, "Y1": 3})
    _check_inplace("local_inplace_gemm", [Z, X, Y], T.exp(Z) - T.dot(X, Y), values, Gemm, 1)
    out = Z + T.exp(Y) - T.dot(X, Y)  # accumulates into exp(Y), which it may overwrite
    _check_inplace("local_inplace_gemm", [Z, X, Y], out, values, Gemm, 1)
    vu = _values(rng, [X, v, u], {"X0": 3, "X1": 3, "v0": 3, "u0": 3})
    _check_inplace("local_inplace_gemv", [X, v, u], T.exp(v) + T.dot(X, u), vu, Gemv, 1)
    _check_inplace("local_inplace_ger", [X, v, u], T.exp(X) + T.outer(v, u), vu, Ger, 1)


def test_user_inputs_are_never_the_destroyed_buffer(rng: np.random.Generator) -> None:
    Z, X, Y = _mat("Z"), _mat("X"), _mat("Y")
    values = _values(rng, [Z, X, Y], {"Z0": 3, "Z1": 3, "X0": 3, "X1": 3, "Y0": 3, "Y1": 3})
    _check_inplace("local_inplace_gemm", [Z, X, Y], Z - T.dot(X, Y), values, Gemm, 0)
    _check_inplace("local_inplace_gemm", [Z, X], T.exp(Z) + T.dot(Z, X), values[:2], Gemm, 1)


def test_a_buffer_read_by_the_same_gemm_stays_intact(rng: np.random.Generator) -> None:
    Z, X = _mat("Z"), _mat("X")
    values = _values(rng, [Z, X], {"Z0": 3, "Z1": 3, "X0": 3, "X1": 3})
    E = T.exp(Z)
    _check_inplace("local_inplace_gemm", [Z, X], E + T.dot(E, X), values, Gemm, 0)


def test_gemvs_sharing_a_merged_buffer_get_one_each(rng: np.random.Generator) -> None:
    X, u, v = _mat("X"), _vec("u"), _vec("v")
    values = _values(rng, [X, u, v], {"X0": 3, "X1": 4, "u0": 4, "v0": 4})
    outs = [T.dot(X, u), T.dot(X, v)]
    _check_inplace("local_unshare_gemv_buffer", [X, u, v], outs, values, Gemv, 2, n_off=1)


# ---------------------------------------------------------------------------- logistic regression


def _logistic_regression(rng: np.random.RandomState, mode: Any) -> tuple[Any, Any, Any]:
    """Theano's tutorial (400 x 784 data, shared w and b), compiled in ``mode``."""
    x, y = T.dmatrix("x"), T.dvector("y")
    w = theano.shared(rng.randn(784), name="w")
    b = theano.shared(0.0, name="b")
    p_1 = 1 / (1 + T.exp(-T.dot(x, w) - b))
    prediction = p_1 > 0.5
    xent = -y * T.log(p_1) - (1 - y) * T.log(1 - p_1)
    cost = xent.mean() + 0.01 * (w**2).sum()
    gw, gb = theano.grad(cost, [w, b])
    train = theano.function(
        [x, y], [prediction, xent], updates=((w, w - 0.1 * gw), (b, b - 0.1 * gb)), mode=mode
    )
    predict = theano.function([x], prediction, mode=mode)
    return train, predict, w


def test_logistic_regression_graphs_and_numbers() -> None:
    data = np.random.RandomState(42)
    D = (data.randn(400, 784), data.randint(size=400, low=0, high=2).astype("float64"))
    train, predict, w = _logistic_regression(np.random.RandomState(0), FAST_RUN)
    ref_train, ref_predict, ref_w = _logistic_regression(np.random.RandomState(0), NO_BLAS)
    text = debugprint(predict, file="str")
    assert " |Gemv{inplace} [id B] ''" in text
    assert " | |AllocEmpty{dtype='float64'} [id C] ''" in text
    assert "TensorConstant{1.0}" in text and "TensorConstant{0.0}" in text
    train_ops = [str(n.op) for n in train.maker.fgraph.toposort()]
    assert "Gemv{inplace}" in train_ops  # dot(x, w), into its AllocEmpty buffer
    assert train_ops.count("Gemv{inplace}") == 2  # and w's update, written into w itself
    assert not any(isinstance(n.op, Dot) for n in train.maker.fgraph.toposort())
    x, y = D
    wv, bv = w.get_value(), 0.0  # the analytic step, in NumPy
    for _ in range(5):
        got, want = train(*D), ref_train(*D)
        for g, e in zip(got, want):
            assert_allclose(g, e)
        g = (1 / (1 + np.exp(-(x @ wv) - bv)) - y) / len(y)
        wv, bv = wv - 0.1 * (x.T @ g + 0.02 * wv), bv - 0.1 * g.sum()
    assert np.isfinite(w.get_value()).all()  # (assert_allclose takes NaN for NaN)
    assert_allclose(w.get_value(), ref_w.get_value())
    assert_allclose(w.get_value(), wv)
    np.testing.assert_array_equal(predict(D[0]), ref_predict(D[0]))


# ---------------------------------------------------------------------------- machinery


def test_rewrites_are_declared_in_the_blas_and_inplace_stages() -> None:
    optdb = make_optdb()
    load_rewrite_modules().install(optdb)
    blas = optdb["blas"]
    expected = ["local_dot_to_dot22", "gemm_optimizer", "local_gemm_to_ger"]
    expected += ["local_gemm_to_gemv", "local_dot22_to_gemv", "local_dot_to_gemv"]
    assert sorted(blas.positions(), key=blas.positions().get) == expected
    for name in expected:
        assert {"fast_run", "blas"} <= blas.entry(name).tags
    for name in ("local_inplace_gemm", "local_inplace_gemv", "local_inplace_ger"):
        assert {"fast_run", "inplace", "blas"} <= optdb["inplace"].entry(name).tags


def test_linear_terms_is_iterative_and_gemm_optimizer_linear_on_a_deep_chain() -> None:
    X, u, v = _mat("X"), _vec("u"), _vec("v")
    acc = T.dot(X, u)
    for k in range(4000):
        acc = acc + v * (k % 3) if k % 2 else acc - v
    fgraph = FunctionGraph([X, u, v], [acc])
    terms, inner = linear_terms(fgraph.outputs[0])
    assert len(inner) == 6000 and len(terms) == 4001  # 4000 add/sub and 2000 mul nodes
    gemm_optimizer.rewrite(fgraph)
    ops = [n.op for n in fgraph.toposort()]
    assert sum(isinstance(op, Gemv) for op in ops) == 1 and not any(
        isinstance(op, Dot) for op in ops
    )
    f = theano.function(fgraph.inputs, fgraph.outputs[0], mode=REFERENCE)
    g = theano.function([X, u, v], acc, mode=REFERENCE)
    vals = [np.eye(3), np.arange(3.0), np.ones(3)]
    assert_allclose(f(*vals), g(*vals))
