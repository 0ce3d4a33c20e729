"""Checking gradients against finite differences: ``verify_grad`` and ``numeric_grad``.

``verify_grad`` compiles the function it checks, so this module sits above the compile
layer; :mod:`opgraph.gradient` and the ``opgraph.tensor`` namespace re-export it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.compile.function import function
from opgraph.tensor.autodiff import grad
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.math import mul
from opgraph.tensor.math import sum as tsum
from opgraph.tensor.type import TensorType

__all__ = ["GradientError", "numeric_grad", "verify_grad"]


class GradientError(Exception):
    """``verify_grad`` found an analytic gradient that disagrees with finite differences."""

    def __init__(
        self,
        arg: int,
        err_pos: int,
        shape: tuple,
        val1: float,
        val2: float,
        abs_err: float,
        rel_err: float,
        abs_tol: float,
        rel_tol: float,
    ) -> None:
        super().__init__(
            f"GradientError: numeric gradient and analytic gradient exceed tolerance:\n"
            f"  At position {err_pos} of argument {arg} with shape {shape},\n"
            f"    val1 = {val1:f}      ,  val2 = {val2:f}\n"
            f"    abs. error = {abs_err:f},  abs. tolerance = {abs_tol:f}\n"
            f"    rel. error = {rel_err:f},  rel. tolerance = {rel_tol:f}"
        )
        self.arg, self.err_pos, self.val1, self.val2 = arg, err_pos, val1, val2
        self.abs_err, self.rel_err = abs_err, rel_err


def numeric_grad(f: Any, pt: Sequence[np.ndarray], eps: float) -> list[np.ndarray]:
    """Central finite differences of scalar function ``f`` at the point ``pt``."""
    grads = []
    for k, x in enumerate(pt):
        g = np.zeros_like(x, dtype="float64")
        flat = x.reshape(-1)
        gflat = g.reshape(-1)
        for i in range(flat.size):
            orig = flat[i]
            flat[i] = orig + eps
            fp = float(f(*pt))
            flat[i] = orig - eps
            fm = float(f(*pt))
            flat[i] = orig
            gflat[i] = (fp - fm) / (2 * eps)
        grads.append(g)
        pt[k] = x
    return grads


_EPS = {"float64": 1e-7, "float32": 1e-2, "float16": 1e-1}
_TOL = {"float64": 1e-4, "float32": 1e-2, "float16": 5e-2}


def verify_grad(
    fun: Any,
    pt: Sequence[Any],
    n_tests: int = 2,
    rng: np.random.Generator | np.random.RandomState | None = None,
    eps: float | None = None,
    out_type: str | None = None,
    abs_tol: float | None = None,
    rel_tol: float | None = None,
    mode: Any = None,
    cast_to_output_type: bool = False,
    no_debug_ref: bool = True,
) -> None:
    """Check ``grad`` of ``fun`` at point ``pt`` against finite differences.

    ``fun`` takes symbolic variables (one per array in ``pt``) and returns a tensor. The
    output is projected on a random tensor to a scalar cost; its symbolic gradient is
    compared with central differences with dtype-aware ``eps`` and tolerances. Raises
    :class:`GradientError` naming the argument and position that disagree.
    """
    pt = [np.array(p) for p in pt]
    for i, p in enumerate(pt):
        if p.dtype.kind not in "fc":
            raise TypeError(
                f"verify_grad: point {i} has dtype {p.dtype}; gradients need float inputs"
            )
    if rng is None:
        rng = np.random.default_rng(42)
    dtype = str(np.result_type(*[p.dtype for p in pt]))
    eps = eps if eps is not None else _EPS.get(dtype, 1e-7)
    abs_tol = abs_tol if abs_tol is not None else _TOL.get(dtype, 1e-4)
    rel_tol = rel_tol if rel_tol is not None else _TOL.get(dtype, 1e-4)
    inputs = [TensorType(p.dtype, [False] * p.ndim)(f"input {i}") for i, p in enumerate(pt)]
    out = as_tensor_variable(fun(*inputs))
    fn_out = function(inputs, out, mode=mode, allow_input_downcast=True, on_unused_input="ignore")
    o_shape = np.shape(fn_out(*[p.copy() for p in pt]))
    for _ in range(n_tests):
        proj = np.asarray(rng.random(o_shape or None), dtype=out.type.dtype) + 0.5
        proj_var = TensorType(out.type.dtype, [False] * out.type.ndim)("random projection")
        cost = tsum(mul(out, proj_var))
        g = grad(cost, inputs, disconnected_inputs="ignore")
        cost_fn = function(
            [*inputs, proj_var],
            cost,
            mode=mode,
            on_unused_input="ignore",
            allow_input_downcast=True,
        )
        grad_fn = function(
            [*inputs, proj_var], g, mode=mode, on_unused_input="ignore", allow_input_downcast=True
        )
        analytic = grad_fn(*[p.copy() for p in pt], proj)
        work = [p.astype("float64") if p.dtype == "float64" else p.copy() for p in pt]

        def f(*args: Any, cost_fn: Any = cost_fn, proj: Any = proj) -> float:
            cast = [a.astype(p.dtype) for a, p in zip(args, pt, strict=True)]
            return float(cost_fn(*cast, proj))

        numeric = numeric_grad(f, work, eps)
        for k, (a, n) in enumerate(zip(analytic, numeric, strict=True)):
            a = np.asarray(a, dtype="float64")
            abs_err = np.abs(a - n)
            rel_err = abs_err / np.maximum(np.abs(a) + np.abs(n), 1e-8)
            bad = (abs_err > abs_tol) & (rel_err > rel_tol)
            if bad.any():
                pos = int(np.argmax(np.where(bad, rel_err, -1)))
                raise GradientError(
                    k,
                    pos,
                    a.shape,
                    float(a.flat[pos]),
                    float(n.flat[pos]),
                    float(abs_err.flat[pos]),
                    float(rel_err.flat[pos]),
                    abs_tol,
                    rel_tol,
                )


verify_grad.E_grad = GradientError  # type: ignore[attr-defined]  # Theano's attribute
