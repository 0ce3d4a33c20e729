"""The rewrites of :mod:`opgraph_sparse.opt_dot`: ``z +/- alpha * dot(x, y)`` -> ``Usmm``."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
import scipy.sparse

import opgraph
import opgraph.tensor as T
from opgraph.compile.mode import Mode, get_default_mode
from opgraph.printing import debugprint
from opgraph_sparse.basic import matrix as sparse_matrix
from opgraph_sparse.dot import Dot, Usmm, dot


def _ops(f: Any) -> list[Any]:
    return [node.op for node in f.maker.fgraph.toposort()]


def _printed(f: Any) -> str:
    buf = io.StringIO()
    debugprint(f, file=buf)
    return buf.getvalue()


def _values(fmt: str, dtype: str) -> tuple[Any, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    a = scipy.sparse.random(7, 5, density=0.4, format=fmt, random_state=rng).astype(dtype)
    return a, rng.standard_normal((5, 3)).astype(dtype), rng.standard_normal((7, 3)).astype(dtype)


CASES = {
    "z - alpha * dot": lambda z, al, d: z - al * d,
    "z + alpha * dot": lambda z, al, d: z + al * d,
    "dot * alpha + z": lambda z, al, d: d * al + z,
    "z + dot": lambda z, al, d: z + d,
    "z - dot": lambda z, al, d: z - d,
}


@pytest.mark.parametrize("fmt", ["csr", "csc"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", list(CASES))
def test_usmm_rewrite_fires_and_keeps_values(fmt: str, dtype: str, case: str) -> None:
    x = sparse_matrix(fmt, "x", dtype)
    y = T.matrix("y", dtype=dtype)
    z = T.matrix("z", dtype=dtype)
    alpha = T.scalar("alpha", dtype=dtype)
    expr = CASES[case](z, alpha, dot(x, y))
    f = opgraph.function([x, y, z, alpha], expr, on_unused_input="ignore")
    ops = _ops(f)
    assert any(isinstance(op, Usmm) for op in ops), _printed(f)
    assert not any(isinstance(op, Dot) for op in ops)
    assert "Usmm{no_inplace}" in _printed(f)
    a, b, zv = _values(fmt, dtype)
    al = np.asarray(0.75, dtype=dtype)
    plain = opgraph.function(
        [x, y, z, alpha],
        expr,
        mode=Mode(linker="py", optimizer="None"),
        on_unused_input="ignore",
    )
    expected = CASES[case](zv, al, a @ b)
    tol = 1e-5 if dtype == "float32" else 1e-12
    got = f(a, b, zv, al)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)
    np.testing.assert_allclose(plain(a, b, zv, al), expected, rtol=tol, atol=tol)


def test_dense_times_sparse_and_debug_mode() -> None:
    """``z + y . x`` with the sparse operand second, in the py linker and DEBUG_MODE."""
    x = sparse_matrix("csc", "x", "float64")
    y = T.dmatrix("y")
    z = T.dmatrix("z")
    expr = z + 2.0 * dot(y, x)
    a, _, _ = _values("csc", "float64")
    yv = np.random.default_rng(1).standard_normal((4, 7))
    zv = np.random.default_rng(2).standard_normal((4, 5))
    for mode in (None, Mode(linker="py"), "DEBUG_MODE"):
        f = opgraph.function([x, y, z], expr, mode=mode)
        assert any(isinstance(op, Usmm) for op in _ops(f))
        np.testing.assert_allclose(f(a, yv, zv), zv + 2.0 * (yv @ a), rtol=1e-12)


def test_no_rewrite_when_the_product_is_used_twice_or_z_broadcasts() -> None:
    x = sparse_matrix("csr", "x", "float64")
    y = T.dmatrix("y")
    z = T.dmatrix("z")
    d = dot(x, y)
    f = opgraph.function([x, y, z], [z + d, d])  # the product is needed on its own
    assert not any(isinstance(op, Usmm) for op in _ops(f))
    row = T.row("r", dtype="float64")  # broadcasts over the rows: Usmm needs z's full shape
    g = opgraph.function([x, y, row], row + d)
    assert not any(isinstance(op, Usmm) for op in _ops(g))
    a, b, _ = _values("csr", "float64")
    rv = np.ones((1, 3))
    np.testing.assert_allclose(g(a, b, rv), rv + a @ b, rtol=1e-12)


def test_excluding_the_sparse_tag_keeps_dot() -> None:
    x = sparse_matrix("csr", "x", "float64")
    y = T.dmatrix("y")
    z = T.dmatrix("z")
    f = opgraph.function([x, y, z], z + dot(x, y), mode=get_default_mode().excluding("sparse"))
    assert not any(isinstance(op, Usmm) for op in _ops(f))
    assert any(isinstance(op, Dot) for op in _ops(f))
