"""The softmax family's precompiled kernels (``opgraph_c._nnet``) against ``perform``.

Each Op runs through the ``c`` linker and the ``py`` linker on the same values (float32 and
float64; contiguous, Fortran-ordered and strided inputs; an empty batch, one row, and a size
past the GIL-release threshold); then DEBUG_MODE, non-finite logits, perform's errors for
bad class indices and shapes, and the training gradient in FAST_RUN.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile.debugmode import DebugMode
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.graph.basic import Variable
from opgraph.tensor.nnet import categorical_crossentropy, softmax
from opgraph.tensor.nnet.basic import LogSoftmax, Softmax, SoftmaxGrad, softmax_with_bias
from opgraph.tensor.nnet.crossentropy import (
    crossentropy_categorical_1hot,
    crossentropy_categorical_1hot_grad,
    crossentropy_softmax_1hot_with_bias_dx,
    crossentropy_softmax_argmax_1hot_with_bias,
)
from opgraph.testing import assert_allclose
from opgraph_c._vm import CThunk

FLOATS = ["float32", "float64"]
LABELS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
LAYOUTS = ["contiguous", "fortran", "strided"]
#: (rows, classes): an empty batch, one row, a small batch, one past the GIL threshold.
SHAPES = [(0, 5), (1, 7), (6, 10), (64, 300)]

C_MODE = Mode(linker="c", optimizer="None")
PY_MODE = Mode(linker="py", optimizer="None")


def _mat(dtype: str) -> Variable:
    return T.matrix("x", dtype=dtype)


def _vec(dtype: str, name: str = "v") -> Variable:
    return T.vector(name, dtype=dtype)


def _normal(rng: np.random.Generator, shape: Any, dtype: str) -> np.ndarray:
    return (rng.standard_normal(shape) * 3).astype(dtype)


def _probs(rng: np.random.Generator, shape: Any, dtype: str) -> np.ndarray:
    return rng.uniform(0.05, 1.0, shape).astype(dtype)


def _labels(rng: np.random.Generator, n: int, k: int, dtype: str = "int64") -> np.ndarray:
    return rng.integers(0, k, n).astype(dtype)


@dataclass(frozen=True)
class Case:
    """One node to test: its graph for a dtype, and input values for ``(rows, classes)``."""

    name: str
    build: Callable[[str], tuple[list[Variable], list[Variable]]]
    values: Callable[[np.random.Generator, int, int, str], list[np.ndarray]]


def _unary(op: Any, make: Callable[..., Variable], shape: Callable[[int, int], Any]) -> Any:
    def build(dtype: str) -> tuple[list[Variable], list[Variable]]:
        x = make(dtype)
        return [x], [op(x)]

    def values(rng: np.random.Generator, n: int, k: int, dtype: str) -> list[np.ndarray]:
        return [_normal(rng, shape(n, k), dtype)]

    return build, values


def _t3(dtype: str) -> Variable:
    return T.tensor3("t", dtype=dtype)


def _grad_case(axis: int) -> Any:
    def build(dtype: str) -> tuple[list[Variable], list[Variable]]:
        dy, sm = T.matrix("dy", dtype=dtype), T.matrix("sm", dtype=dtype)
        return [dy, sm], [SoftmaxGrad(axis)(dy, sm)]

    def values(rng: np.random.Generator, n: int, k: int, dtype: str) -> list[np.ndarray]:
        return [_normal(rng, (n, k), dtype), _probs(rng, (n, k), dtype)]

    return build, values


def _bias_build(dtype: str) -> tuple[list[Variable], list[Variable]]:
    x, b = _mat(dtype), _vec(dtype, "b")
    return [x, b], [softmax_with_bias(x, b)]


def _bias_values(rng: np.random.Generator, n: int, k: int, dtype: str) -> list[np.ndarray]:
    return [_normal(rng, (n, k), dtype), _normal(rng, k, dtype)]


def _argmax_build(dtype: str) -> tuple[list[Variable], list[Variable]]:
    x, b, y = _mat(dtype), _vec(dtype, "b"), T.lvector("y")
    return [x, b, y], list(crossentropy_softmax_argmax_1hot_with_bias(x, b, y))


def _argmax_values(rng: np.random.Generator, n: int, k: int, dtype: str) -> list[np.ndarray]:
    return [*_bias_values(rng, n, k, dtype), _labels(rng, n, k)]


def _dx_build(ndim: int) -> Any:
    def build(dtype: str) -> tuple[list[Variable], list[Variable]]:
        dy = T.TensorType(dtype, (False,) * ndim)("dy")
        sm, y = T.matrix("sm", dtype=dtype), T.lvector("y")
        return [dy, sm, y], [crossentropy_softmax_1hot_with_bias_dx(dy, sm, y)]

    def values(rng: np.random.Generator, n: int, k: int, dtype: str) -> list[np.ndarray]:
        dy = _normal(rng, (n,) if ndim else (), dtype)
        return [dy, _probs(rng, (n, k), dtype), _labels(rng, n, k)]

    return build, values


def _cat_build(dtype: str) -> tuple[list[Variable], list[Variable]]:
    coding, y = T.matrix("coding", dtype=dtype), T.lvector("y")
    return [coding, y], [crossentropy_categorical_1hot(coding, y)]


def _cat_values(rng: np.random.Generator, n: int, k: int, dtype: str) -> list[np.ndarray]:
    return [_probs(rng, (n, k), dtype), _labels(rng, n, k)]


def _cat_grad_build(dtype: str) -> tuple[list[Variable], list[Variable]]:
    g, coding, y = _vec(dtype, "g"), T.matrix("coding", dtype=dtype), T.lvector("y")
    return [g, coding, y], [crossentropy_categorical_1hot_grad(g, coding, y)]


def _cat_grad_values(rng: np.random.Generator, n: int, k: int, dtype: str) -> list[np.ndarray]:
    return [_normal(rng, n, dtype), *_cat_values(rng, n, k, dtype)]


CASES = [
    Case("softmax", *_unary(Softmax(-1), _mat, lambda n, k: (n, k))),
    Case("softmax_axis0", *_unary(Softmax(0), _mat, lambda n, k: (n, k))),
    Case("softmax_vector", *_unary(Softmax(-1), _vec, lambda n, k: (k if n else 0,))),
    Case("softmax_3d_axis1", *_unary(Softmax(1), _t3, lambda n, k: (n, k, 3))),
    Case("log_softmax", *_unary(LogSoftmax(-1), _mat, lambda n, k: (n, k))),
    Case("log_softmax_axis0", *_unary(LogSoftmax(0), _mat, lambda n, k: (n, k))),
    Case("log_softmax_3d_axis0", *_unary(LogSoftmax(0), _t3, lambda n, k: (k, n, 2))),
    Case("softmax_grad", *_grad_case(-1)),
    Case("softmax_grad_axis0", *_grad_case(0)),
    Case("softmax_with_bias", _bias_build, _bias_values),
    Case("xent_softmax_argmax", _argmax_build, _argmax_values),
    Case("xent_softmax_dx", *_dx_build(1)),
    Case("xent_softmax_dx_scalar_dy", *_dx_build(0)),
    Case("xent_categorical", _cat_build, _cat_values),
    Case("xent_categorical_grad", _cat_grad_build, _cat_grad_values),
]
CASE_IDS = [c.name for c in CASES]


@cache
def _functions(case: Case, dtype: str) -> tuple[Any, Any]:
    """The case compiled with the c and py linkers (once per session)."""
    inputs, outputs = case.build(dtype)
    return function(inputs, outputs, mode=C_MODE), function(inputs, outputs, mode=PY_MODE)


def _layout(a: np.ndarray, layout: str) -> np.ndarray:
    """``a`` with the same values in another memory layout (not C-contiguous unless 0-d)."""
    if layout == "fortran":
        return np.asfortranarray(a) if a.ndim > 1 else a
    if layout == "strided" and a.ndim:
        wide = np.zeros((*a.shape[:-1], 2 * a.shape[-1]), dtype=a.dtype)
        wide[..., ::2] = a
        return wide[..., ::2]
    return a


def _c_thunks(f: Any) -> dict[str, Any]:
    """The thunks of ``f``'s softmax-family nodes (every node of these test graphs)."""
    return {str(n.op): t for n, t in zip(f.fn.nodes, f.fn.thunks)}


def _compare(fc: Any, fp: Any, values: list[np.ndarray]) -> None:
    got, expected = fc(*values), fp(*values)
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype and g.shape == e.shape, (g.dtype, g.shape, e.dtype, e.shape)
        assert_allclose(g, e)


def _same_error(fc: Any, fp: Any, values: list[Any]) -> Exception:
    """Both linkers raise for ``values``: the same type and the same message."""
    with pytest.raises(Exception) as py_err:
        fp(*values)
    with pytest.raises(type(py_err.value)) as c_err:
        fc(*values)
    assert type(c_err.value) is type(py_err.value)
    assert str(c_err.value) == str(py_err.value)
    return c_err.value


# ------------------------------------------------------------------------- values vs perform


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_matches_perform(case: Case, dtype: str, layout: str, rng: np.random.Generator) -> None:
    fc, fp = _functions(case, dtype)
    for n, k in SHAPES:
        values = [_layout(v, layout) for v in case.values(rng, n, k, dtype)]
        _compare(fc, fp, values)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_nodes_run_precompiled_c_thunks(case: Case) -> None:
    fc, _ = _functions(case, "float64")
    for name, thunk in _c_thunks(fc).items():
        assert isinstance(thunk, CThunk), (name, thunk)
        assert not getattr(thunk, "py_fallback", False)
        assert thunk.kernel is not None and thunk.kernel.owner == "opgraph-backend-c"
        assert type(thunk).__module__ == "opgraph_c._nnet"


def test_outputs_are_new_arrays_each_call(rng: np.random.Generator) -> None:
    fc, _ = _functions(CASES[CASE_IDS.index("xent_softmax_argmax")], "float64")
    values = _argmax_values(rng, 4, 3, "float64")
    first = [a.copy() for a in fc(*values)]
    kept = fc(*values)
    fc(*_argmax_values(rng, 4, 3, "float64"))
    for a, b in zip(first, kept, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtypes", [("float32", "float64"), ("float64", "float32")])
def test_mixed_float_inputs_upcast(dtypes: tuple[str, str], rng: np.random.Generator) -> None:
    x, b = T.matrix("x", dtype=dtypes[0]), T.vector("b", dtype=dtypes[1])
    dy, y = T.vector("dy", dtype=dtypes[0]), T.lvector("y")
    sm = T.matrix("sm", dtype=dtypes[1])
    outputs = [
        softmax_with_bias(x, b),
        *crossentropy_softmax_argmax_1hot_with_bias(x, b, y),
        crossentropy_softmax_1hot_with_bias_dx(dy, sm, y),
        crossentropy_categorical_1hot_grad(dy, sm, y),
        SoftmaxGrad(-1)(x, sm),
    ]
    fc = function([x, b, dy, sm, y], outputs, mode=C_MODE)
    fp = function([x, b, dy, sm, y], outputs, mode=PY_MODE)
    assert all(isinstance(t, CThunk) for t in fc.fn.thunks)
    values = [
        _normal(rng, (5, 4), dtypes[0]),
        _normal(rng, 4, dtypes[1]),
        _normal(rng, 5, dtypes[0]),
        _probs(rng, (5, 4), dtypes[1]),
        _labels(rng, 5, 4),
    ]
    _compare(fc, fp, values)


@pytest.mark.filterwarnings("ignore::opgraph.link.dispatch.KernelFallbackWarning")
def test_float16_runs_perform() -> None:
    x = T.matrix("x", dtype="float16")
    f = function([x], Softmax(-1)(x), mode=C_MODE)  # warns once per process
    assert getattr(f.fn.thunks[0], "py_fallback", False)
    xv = np.array([[1.0, 2.0, 3.0]], dtype="float16")
    assert_allclose(f(xv), function([x], Softmax(-1)(x), mode=PY_MODE)(xv))


# --------------------------------------------------------------------------------- DEBUG_MODE


@pytest.mark.parametrize("layout", ["contiguous", "fortran"])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_debug_mode_agrees(case: Case, dtype: str, layout: str, rng: np.random.Generator) -> None:
    inputs, outputs = case.build(dtype)
    f = function(inputs, outputs, mode=DebugMode(linker="c", optimizer="None"))
    for n, k in [(1, 3), (6, 10)]:
        values = [_layout(v, layout) for v in case.values(rng, n, k, dtype)]
        got = f(*values)
        expected = _functions(case, dtype)[1](*values)
        for g, e in zip(got, expected, strict=True):
            assert_allclose(g, e)


# ------------------------------------------------------------------------ non-finite logits

#: Rows of logits: NaN, +inf, -inf somewhere, all -inf, and huge finite values.
SPECIAL_ROWS = np.array(
    [
        [np.nan, 1.0, 2.0, 0.5],
        [1.0, np.inf, 2.0, 0.5],
        [1.0, -np.inf, 2.0, 0.5],
        [-np.inf, -np.inf, -np.inf, -np.inf],
        [1000.0, -1000.0, 0.0, 999.0],
        [-1000.0, -1000.0, -1000.0, -1000.0],
        [1000.0, 1000.0, -1000.0, 1000.0],
    ]
)
SPECIAL_LABELS = np.array([0, 1, 2, 3, 1, 0, 2])


@pytest.mark.parametrize("dtype", FLOATS)
def test_non_finite_logits_propagate_like_perform(dtype: str) -> None:
    x, b, y = _mat(dtype), _vec(dtype, "b"), T.lvector("y")
    outputs = [
        Softmax(-1)(x),
        LogSoftmax(-1)(x),
        Softmax(0)(x),
        softmax_with_bias(x, b),
        *crossentropy_softmax_argmax_1hot_with_bias(x, b, y),
        crossentropy_categorical_1hot(Softmax(-1)(x), y),
    ]
    fc = function([x, b, y], outputs, mode=C_MODE)
    fp = function([x, b, y], outputs, mode=PY_MODE)
    assert not any(getattr(t, "py_fallback", False) for t in fc.fn.thunks)
    values = [SPECIAL_ROWS.astype(dtype), np.zeros(4, dtype=dtype), SPECIAL_LABELS]
    _compare(fc, fp, values)
    sm, lsm, _, smb, nll, _, am = fc(*values)[:7]
    finite = slice(4, 7)  # logits of +-1000: finite results, as perform gives
    for out in (sm, lsm, smb, nll):
        assert np.all(np.isfinite(out[finite]))
    assert_allclose(nll[4], np.asarray(2000.0 + np.log1p(np.exp(-1.0)), dtype=dtype))
    assert list(am) == [0, 1, 2, 0, 0, 0, 0]


@pytest.mark.parametrize("dtype", FLOATS)
def test_zero_and_nan_probabilities_like_perform(dtype: str) -> None:
    coding, g, y = T.matrix("coding", dtype=dtype), _vec(dtype, "g"), T.lvector("y")
    outputs = [
        crossentropy_categorical_1hot(coding, y),
        crossentropy_categorical_1hot_grad(g, coding, y),
    ]
    fc = function([coding, g, y], outputs, mode=C_MODE)
    fp = function([coding, g, y], outputs, mode=PY_MODE)
    cv = np.array([[0.0, 1.0], [np.nan, 0.5], [0.25, 0.75]], dtype=dtype)
    _compare(fc, fp, [cv, np.array([1.0, 2.0, 0.0], dtype=dtype), np.array([0, 0, 1])])
    _compare(fc, fp, [cv, np.array([0.0, 1.0, 1.0], dtype=dtype), np.array([0, 1, 1])])


# ------------------------------------------------------------------ class indices and errors


LABEL_CASES = [
    "xent_softmax_argmax",
    "xent_softmax_dx",
    "xent_categorical",
    "xent_categorical_grad",
]


def _with_label_dtype(case: Case, label_dtype: str) -> tuple[Any, Any]:
    """``case`` compiled with class indices of ``label_dtype`` (c and py)."""
    inputs, _ = case.build("float64")
    y = T.vector("y", dtype=label_dtype)
    builders = {
        "xent_softmax_argmax": lambda: crossentropy_softmax_argmax_1hot_with_bias(*inputs[:2], y),
        "xent_softmax_dx": lambda: [crossentropy_softmax_1hot_with_bias_dx(*inputs[:2], y)],
        "xent_categorical": lambda: [crossentropy_categorical_1hot(inputs[0], y)],
        "xent_categorical_grad": lambda: [crossentropy_categorical_1hot_grad(*inputs[:2], y)],
    }
    outputs = list(builders[case.name]())
    graph_inputs = [*inputs[:-1], y]
    fc = function(graph_inputs, outputs, mode=C_MODE)
    fp = function(graph_inputs, outputs, mode=PY_MODE)
    assert all(isinstance(t, CThunk) for t in fc.fn.thunks)
    return fc, fp


@pytest.mark.parametrize("label_dtype", LABELS)
@pytest.mark.parametrize("name", LABEL_CASES)
def test_label_dtypes_and_out_of_range(
    name: str, label_dtype: str, rng: np.random.Generator
) -> None:
    case = CASES[CASE_IDS.index(name)]
    fc, fp = _with_label_dtype(case, label_dtype)
    values = case.values(rng, 6, 5, "float64")
    labels = np.array([0, 4, 2, 3, 1, 4], dtype=label_dtype)
    _compare(fc, fp, [*values[:-1], labels])
    _compare(fc, fp, [*values[:-1], labels[::-1]])  # strided (negative step) labels
    too_big = labels.copy()
    too_big[3] = 5
    err = _same_error(fc, fp, [*values[:-1], too_big])
    assert isinstance(err, ValueError) and "class index 5 is out of bounds" in str(err)
    if np.dtype(label_dtype).kind == "i":
        negative = labels.copy()
        negative[0] = -1
        err = _same_error(fc, fp, [*values[:-1], negative])
        assert "class index -1 is out of bounds" in str(err)
    _same_error(fc, fp, [*values[:-1], labels[:-1]])  # one index short


def test_argmax_output_keeps_the_label_dtype(rng: np.random.Generator) -> None:
    fc, fp = _with_label_dtype(CASES[CASE_IDS.index("xent_softmax_argmax")], "uint8")
    values = [_normal(rng, (3, 300), "float64"), _normal(rng, 300, "float64")]
    values.append(np.array([7, 255, 0], dtype="uint8"))
    values[0][1, 280] = 100.0  # row 1's argmax, 280, is past uint8's range
    _compare(fc, fp, values)  # an argmax past 255 wraps, as perform's astype does
    assert fc(*values)[2].dtype == np.uint8


def test_shape_errors_match_perform(rng: np.random.Generator) -> None:
    def both(inputs: list[Variable], outputs: list[Variable]) -> tuple[Any, Any]:
        return function(inputs, outputs, mode=C_MODE), function(inputs, outputs, mode=PY_MODE)

    x, b, y = _mat("float64"), _vec("float64", "b"), T.lvector("y")
    dy, sm = _vec("float64", "dy"), T.matrix("sm", dtype="float64")
    xv, yv = _normal(rng, (4, 3), "float64"), np.array([0, 1, 2, 0])
    bad_b = _normal(rng, 5, "float64")
    _same_error(*both([x, b], [softmax_with_bias(x, b)]), [xv, bad_b])
    fc, fp = both([x, b, y], list(crossentropy_softmax_argmax_1hot_with_bias(x, b, y)))
    _same_error(fc, fp, [xv, bad_b, yv])
    fc, fp = both([dy, sm, y], [crossentropy_softmax_1hot_with_bias_dx(dy, sm, y)])
    _same_error(fc, fp, [np.ones(3), xv, yv])
    fc, fp = both([x, sm], [SoftmaxGrad(-1)(x, sm)])
    _same_error(fc, fp, [xv, xv[:3]])
    fc, fp = both([dy, sm, y], [crossentropy_categorical_1hot_grad(dy, sm, y)])
    _same_error(fc, fp, [np.ones(3), xv, yv])
    _compare(fc, fp, [np.ones(1), xv, yv])  # a length-1 g_y broadcasts in perform


def test_wrong_input_types_fail_like_py() -> None:
    fc, fp = _functions(CASES[0], "float32")
    for bad in (np.ones((2, 3)), np.ones(3, dtype="float32"), np.ones((2, 3), dtype="int32")):
        with pytest.raises(TypeError) as py_err:
            fp(bad)
        with pytest.raises(TypeError) as c_err:
            fc(bad)
        assert str(c_err.value) == str(py_err.value)


# --------------------------------------------------------------------- training in FAST_RUN


@pytest.mark.filterwarnings("ignore::opgraph.link.dispatch.KernelFallbackWarning")  # shape ops
@pytest.mark.parametrize("dtype", FLOATS)
def test_crossentropy_gradient_in_fast_run(dtype: str, rng: np.random.Generator) -> None:
    h, w = T.matrix("h", dtype=dtype), T.matrix("w", dtype=dtype)
    b, y = _vec(dtype, "b"), T.ivector("y")
    x = T.matrix("x", dtype=dtype)
    loss_hw = categorical_crossentropy(softmax(T.dot(h, w) + b), y).mean()
    loss_x = categorical_crossentropy(softmax(x), y).mean()
    outputs = [loss_hw, *T.grad(loss_hw, [w, b]), loss_x, T.grad(loss_x, x)]
    inputs = [h, w, b, x, y]
    fc = function(inputs, outputs, mode=Mode(linker="c", optimizer="fast_run"))
    fp = function(inputs, outputs, mode=Mode(linker="py", optimizer="fast_run"))
    ops = {type(n.op).__name__: t for n, t in zip(fc.fn.nodes, fc.fn.thunks)}
    for name in ("CrossentropySoftmaxArgmax1HotWithBias", "CrossentropySoftmax1HotWithBiasDx"):
        assert name in ops and isinstance(ops[name], CThunk), sorted(ops)
    values = [
        _normal(rng, (16, 8), dtype),
        _normal(rng, (8, 5), dtype),
        _normal(rng, 5, dtype),
        _normal(rng, (16, 5), dtype) * 300,  # logits up to ~+-1000 as well
        _labels(rng, 16, 5, "int32"),
    ]
    _compare(fc, fp, values)
    for g in fc(*values):
        assert np.all(np.isfinite(g))
