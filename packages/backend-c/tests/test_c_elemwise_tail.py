"""The padded tail of the generated ``contig`` loop.

An element function that calls a libmvec math function (tanh, exp, sin, ...) runs the last
elements of a contiguous loop (fewer than a cache line of the widest operand) through a
padded copy, so that they too take the vector variant: a result no longer depends on the
element's position or on the array's length, and short arrays (W4's 10-element chain) stop
paying scalar calls.
"""

from __future__ import annotations

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph_c.codegen.elemwise import elemwise_part, vector_tail

C_RUN = Mode(linker="c", optimizer="fast_run")


def _contig_source(expr_of: object, dtype: str = "float64") -> str:
    x = T.vector("x", dtype=dtype)
    f = function([x], expr_of(x), mode=C_RUN)  # type: ignore[operator]
    (node,) = [n for n in f.maker.fgraph.toposort() if "Elemwise" in str(n.op)]
    part = elemwise_part(node.op, node, [False] * len(node.inputs), openmp=False)
    assert part is not None
    return part.cython_code


def test_only_math_function_kernels_get_the_padded_tail() -> None:
    assert "lanes of copies" in _contig_source(lambda x: T.tanh(x) * 2)
    assert "lanes of copies" in _contig_source(lambda x: T.exp(x) + 1, "float32")
    assert "lanes of copies" not in _contig_source(lambda x: x * 2 + 1)
    assert vector_tail("t0 = tanhf(i0);") and vector_tail("t1 = log1p(t0);")
    assert not vector_tail("t0 = i0 * 2.0; t1 = opg_tanh_like(t0);")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", ["tanh", "exp", "sin", "log1p"])
def test_a_value_does_not_depend_on_the_length_or_position(dtype: str, name: str) -> None:
    """``f(x[:n])`` equals ``f(x)[:n]`` bit for bit for every n (the last elements of
    each took the scalar function before), and both are close to NumPy."""
    op = getattr(T, name)
    x = T.vector("x", dtype=dtype)
    f = function([x], op(x) * 0.5, mode=C_RUN)
    values = np.random.default_rng(0).uniform(0.1, 3.0, 41).astype(dtype)
    full = f(values)
    np.testing.assert_allclose(
        full, getattr(np, name)(values) * 0.5, rtol=1e-5 if dtype == "float32" else 1e-13
    )
    for n in range(1, len(values) + 1):
        assert np.array_equal(f(values[:n]), full[:n]), n
        assert np.array_equal(f(values[41 - n :]), full[41 - n :]), n


def test_the_tail_with_a_scalar_input_and_several_outputs() -> None:
    """A hoisted (broadcast scalar) input and a second output go through the tail too."""
    x, s = T.dvector("x"), T.dscalar("s")
    f = function([x, s], [T.tanh(x) + s, T.exp(x) * s], mode=C_RUN)
    values = np.linspace(-1.0, 1.0, 11)
    for n in (1, 3, 8, 11):
        a, b = f(values[:n], 0.25)
        np.testing.assert_allclose(a, np.tanh(values[:n]) + 0.25, rtol=1e-14)
        np.testing.assert_allclose(b, np.exp(values[:n]) * 0.25, rtol=1e-14)


def test_an_in_place_tail_reads_before_it_writes() -> None:
    """An elementwise node that overwrites its input (``tanh(x + 1)`` computed in the
    buffer of ``x + 1``) still reads each tail element before writing it."""
    x = T.dvector("x")
    f = function([x], T.tanh(T.sin(x) * 3 + 1) - x, mode=C_RUN)
    for n in (1, 2, 7, 9, 13):
        values = np.linspace(-2.0, 2.0, n)
        np.testing.assert_allclose(
            f(values), np.tanh(np.sin(values) * 3 + 1) - values, rtol=1e-13, atol=1e-15
        )


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_softplus_is_branch_free_and_vectorised(dtype: str) -> None:
    """``softplus`` is one expression (``max(x, 0) + log1p(exp(-|x|))``), so its loop takes
    libmvec's exp and log1p like any transcendental: the padded tail applies, a value does
    not depend on its position, and the extremes are NumPy's ``logaddexp(0, x)``."""
    softplus = T.nnet.softplus
    assert "lanes of copies" in _contig_source(lambda x: softplus(x) * 2, dtype)
    x = T.vector("x", dtype=dtype)
    f = function([x], softplus(x), mode=C_RUN)
    values = np.concatenate(
        [
            np.random.default_rng(1).uniform(-40.0, 40.0, 37),
            [0.0, -0.0, 1e-30, -1e-30, 800.0, -800.0, np.inf, -np.inf, np.nan],
        ]
    ).astype(dtype)
    full = f(values)
    with np.errstate(over="ignore", invalid="ignore"):
        want = np.logaddexp(np.zeros((), dtype), values)
    tol = 1e-5 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(full, want, rtol=tol, atol=0)
    assert full.dtype == dtype
    for n in range(1, len(values) + 1):
        assert np.array_equal(f(values[:n]), full[:n], equal_nan=True), n
