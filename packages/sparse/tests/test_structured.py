"""Structured elementwise functions (``opgraph_sparse.structured``): a tensor function on
the stored values only, the pattern kept, structured gradients; csr and csc, float32 and
float64, in the default mode, ``Mode(linker="py")`` and DEBUG_MODE."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

import opgraph
from opgraph import sparse
from opgraph.compile.mode import Mode
from opgraph_sparse import structured as S
from opgraph_sparse.testing import verify_grad_sparse
from opgraph_sparse.type import SparseType

FORMATS = ["csr", "csc"]
FLOATS = ["float32", "float64"]
MODES = {"default": None, "py": Mode(linker="py"), "debug": "DEBUG_MODE"}


def sigmoid(v: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-v))


#: (function, NumPy on the stored values, extra scalar arguments, with a gradient check)
CASES: list[tuple[Any, Any, tuple[Any, ...], bool]] = [
    (S.structured_sigmoid, sigmoid, (), True),
    (S.structured_exp, np.exp, (), True),
    (S.structured_log, np.log, (), True),
    (S.structured_pow, lambda v: v**2.5, (2.5,), True),
    (S.structured_minimum, lambda v: np.minimum(v, 0.7), (0.7,), True),
    (S.structured_maximum, lambda v: np.maximum(v, 0.7), (0.7,), True),
    (S.structured_add, lambda v: v + 2.0, (2.0,), True),
    (S.sin, np.sin, (), True),
    (S.tan, np.tan, (), True),
    (S.arcsin, np.arcsin, (), True),
    (S.arctan, np.arctan, (), True),
    (S.sinh, np.sinh, (), True),
    (S.arcsinh, np.arcsinh, (), True),
    (S.tanh, np.tanh, (), True),
    (S.arctanh, np.arctanh, (), True),
    (S.rint, np.rint, (), False),
    (S.sgn, np.sign, (), False),
    (S.ceil, np.ceil, (), False),
    (S.floor, np.floor, (), False),
    (S.log1p, np.log1p, (), True),
    (S.expm1, np.expm1, (), True),
    (S.deg2rad, np.deg2rad, (), True),
    (S.rad2deg, np.rad2deg, (), True),
    (S.trunc, np.trunc, (), False),
    (S.sqr, np.square, (), True),
    (S.sqrt, np.sqrt, (), True),
    (S.conj, np.conj, (), False),
]


def positive_sparse(fmt: str, dtype: str, seed: int = 0) -> Any:
    """A matrix with values in (0.1, 0.9), where every function above is defined."""
    rng = np.random.default_rng(seed)
    dense = rng.uniform(0.1, 0.9, (3, 4)) * (rng.uniform(size=(3, 4)) < 0.6)
    dense[0, 0] = 0.45
    return SparseType.format_cls[fmt](dense.astype(dtype))


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_function_on_the_stored_values(fmt: str, dtype: str, mode: str) -> None:
    x = sparse.matrix(fmt, "x", dtype)
    value = positive_sparse(fmt, dtype)
    outs = [fn(x, *[np.asarray(a, dtype) for a in args]) for fn, _, args, _ in CASES]
    results = opgraph.function([x], outs, mode=MODES[mode])(value)
    rtol = 1e-5 if dtype == "float32" else 1e-12
    for out, got, (fn, ref, _, _) in zip(outs, results, CASES, strict=True):
        assert out.type == SparseType(fmt, dtype), fn.__name__
        assert out.type.filter(got, strict=True) is got
        np.testing.assert_array_equal(got.indices, value.indices)  # same pattern
        np.testing.assert_array_equal(got.indptr, value.indptr)
        np.testing.assert_allclose(got.data, ref(value.data), rtol=rtol, err_msg=fn.__name__)


@pytest.mark.parametrize("fmt", FORMATS)
def test_structured_gradients(fmt: str) -> None:
    value = positive_sparse(fmt, "float64", seed=1)
    for fn, _, args, has_grad in CASES:
        if has_grad:
            verify_grad_sparse(lambda m, fn=fn, args=args: fn(m, *args), [value], structured=True)
    # the gradient stays on the pattern: zero where nothing is stored
    x = sparse.matrix(fmt, "x", "float64")
    g = opgraph.grad(sparse.dense_from_sparse(S.structured_exp(x)).sum(), x)
    r = opgraph.function([x], g)(value)
    expected = np.where(value.toarray() != 0, np.exp(value.toarray()), 0)
    np.testing.assert_allclose(r.toarray(), expected, rtol=1e-12)


def test_integer_and_complex_values() -> None:
    x = sparse.csr_matrix("x", dtype="int64")
    value = sp.csr_matrix(np.array([[4, 0], [0, 9]], dtype="int64"))
    out = S.sqrt(x)
    assert out.type == SparseType("csr", "float64")
    np.testing.assert_allclose(opgraph.function([x], out)(value).toarray(), [[2, 0], [0, 3]])
    z = sparse.csc_matrix("z", dtype="complex128")
    zv = sp.csc_matrix(np.array([[1 + 2j, 0], [0, 3 - 1j]]))
    np.testing.assert_array_equal(
        opgraph.function([z], S.conj(z))(zv).toarray(), zv.conj().toarray()
    )


def test_structured_monoid_builds_a_function_from_a_tensor_op() -> None:
    @S.structured_monoid(opgraph.tensor.math.mul)
    def structured_scale(x: Any, k: Any) -> Any:
        """Stored values times ``k``."""

    assert structured_scale.__name__ == "structured_scale"
    assert structured_scale.__doc__ == "Stored values times ``k``."
    x = sparse.csc_matrix("x", dtype="float64")
    value = positive_sparse("csc", "float64")
    value.data[-1] = 0  # a stored zero keeps its place in the pattern
    got = opgraph.function([x], structured_scale(x, 3.0))(value)
    np.testing.assert_allclose(got.data, value.data * 3.0)
    np.testing.assert_array_equal(got.indices, value.indices)
    assert got.nnz == value.nnz
    with pytest.raises(TypeError, match="must be scalars"):
        S.structured_pow(x, np.ones(2))


def test_bad_inputs() -> None:
    with pytest.raises(TypeError, match="expected a sparse variable"):
        S.sin(opgraph.tensor.dmatrix())
    with pytest.raises(TypeError, match="is a bsr matrix"):
        S.structured_exp(sparse.bsr_matrix())
    with pytest.raises(TypeError, match="must be scalars, got"):
        S.structured_pow(sparse.csr_matrix(), opgraph.tensor.dvector())
