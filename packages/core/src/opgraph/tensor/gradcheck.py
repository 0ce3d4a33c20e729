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


def _central_differences(f: Any, pt: list[np.ndarray], eps: float) -> list[np.ndarray]:
    """Central finite differences of scalar function ``f`` at the point ``pt`` (the estimate
    ``verify_grad`` uses: second-order accurate, so its default tolerances can be tight)."""
    grads = []
    for k, x in enumerate(pt):
        # perturbed through a flat view: an F-ordered point (a csc matrix's toarray()) would
        # reshape to a copy, and every difference would be zero
        x = pt[k] = np.array(x, order="C")
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


class numeric_grad:
    """The numeric gradient of a scalar function at a point, as Theano's ``numeric_grad``.

    ``numeric_grad(f, pt, eps=None, out_type=None)`` evaluates ``f(*pt)`` and, for each
    element of each array of ``pt``, ``f`` with that element moved by ``eps`` (one-sided
    differences, Theano's estimate); the gradient is in ``self.gf`` (one array per array of
    ``pt``, or a single array if ``pt`` was one). ``eps=None`` picks the step by dtype
    (:attr:`type_eps`); ``out_type`` starting with ``'complex'`` makes ``gf`` complex.
    """

    type_eps: dict[Any, float] = {
        "float64": 1e-7,
        "float32": 3e-4,
        "float16": 1e-1,
        np.dtype("float64"): 1e-7,
        np.dtype("float32"): 3e-4,
        np.dtype("float16"): 1e-1,
    }

    def __init__(self, f: Any, pt: Any, eps: float | None = None, out_type: str | None = None):
        packed_pt = not isinstance(pt, list | tuple)
        if packed_pt:
            pt = [pt]
        apt = [np.array(p) for p in pt]
        dtypes = [str(p.dtype) for p in apt]
        for dt in dtypes:
            if dt not in self.type_eps:
                raise TypeError(
                    f"numeric_grad: the point has dtype {dt}; finite differences need "
                    "float16, float32 or float64 arrays"
                )
        total_size = sum(int(np.prod(p.shape)) for p in apt)
        working_dtype = min((self.type_eps[dt], dt) for dt in dtypes)[1]
        x = np.ndarray((total_size,), dtype=working_dtype)
        if out_type is not None and out_type.startswith("complex"):
            gx = np.ndarray((total_size,), dtype=out_type)
        else:
            gx = np.ndarray((total_size,), dtype=working_dtype)
        if eps is None:
            eps = max(self.type_eps[dt] for dt in dtypes)
        # apt[i] and self.gf[i] are views of x and gx: moving x[i] moves the right element.
        cur = 0
        self.gf: Any = []
        for i, p in enumerate(apt):
            size = int(np.prod(p.shape))
            apt[i] = x[cur : cur + size].reshape(p.shape)
            self.gf.append(gx[cur : cur + size].reshape(p.shape))
            apt[i][...] = p
            cur += size
        f_x = f(*[p.copy() for p in apt])
        x_copy = x.copy()
        for i in range(total_size):
            x[:] = x_copy
            x[i] += eps
            f_eps = f(*apt)
            gx[i] = (f_eps - f_x) / eps
        if packed_pt:
            self.gf = self.gf[0]

    @staticmethod
    def abs_rel_err(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(abs(a - b), abs(a - b) / max(abs(a) + abs(b), 1e-8))`` element by element."""
        abs_err = abs(a - b)
        rel_err = abs_err / np.maximum(abs(a) + abs(b), [1e-8])
        return np.asarray(abs_err), np.asarray(rel_err)

    def abs_rel_errors(self, g_pt: Sequence[Any]) -> list[tuple[np.ndarray, np.ndarray]]:
        """:meth:`abs_rel_err` of each array of ``g_pt`` against :attr:`gf`; ValueError if
        the number of arrays or a shape differs."""
        if len(g_pt) != len(self.gf):
            raise ValueError("argument has wrong number of elements", len(g_pt))
        errs = []
        for i, (a, b) in enumerate(zip(g_pt, self.gf, strict=True)):
            if a.shape != b.shape:
                raise ValueError(f"argument element {i} has wrong shape {(a.shape, b.shape)}")
            errs.append(numeric_grad.abs_rel_err(a, b))
        return errs

    def max_err(
        self, g_pt: Sequence[Any], abs_tol: float, rel_tol: float
    ) -> tuple[int, int, Any, Any]:
        """The worst violation of the tolerances: ``(array index, flat position, abs_err,
        rel_err)`` at the argmax of ``min(abs_err / abs_tol, rel_err / rel_tol)``."""
        pos, errs, abs_errs, rel_errs = [], [], [], []
        for abs_err, rel_err in self.abs_rel_errors(g_pt):
            if not np.all(np.isfinite(abs_err)):
                raise ValueError("abs_err not finite", repr(abs_err))
            if not np.all(np.isfinite(rel_err)):
                raise ValueError("rel_err not finite", repr(rel_err))
            scaled = np.minimum(abs_err / abs_tol, rel_err / rel_tol)
            max_i = scaled.argmax()
            pos.append(max_i)
            errs.append(scaled.flatten()[max_i])
            abs_errs.append(abs_err.flatten()[max_i])
            rel_errs.append(rel_err.flatten()[max_i])
        max_arg = int(np.argmax(errs))
        return max_arg, int(pos[max_arg]), abs_errs[max_arg], rel_errs[max_arg]


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

        numeric = _central_differences(f, work, eps)
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
