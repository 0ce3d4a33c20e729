"""W7: sparse x dense products, when opgraph-sparse is installed (else a skipped row).

A CSR matrix of 100,000 x 10,000 with 1,000,000 stored values times a dense 10,000 x 64
matrix, in float64 and float32, and the gradient of ``sum(dot(a, b) * c)`` with respect to
the dense ``b`` (that is ``a.T @ c``, a CSC product). The reference is SciPy (``a @ b`` and
``a.T @ c``); opgraph compiles ``sparse.dot`` and ``opgraph.grad``, PyTensor (C and Numba
linkers) ``pytensor.sparse.dot`` and ``pytensor.grad``, JAX a jitted product of a BCOO
matrix and ``jax.grad``.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np
from harness import (
    Context,
    Table,
    close_check,
    error_text,
    opgraph_engines,
    opgraph_mode,
    pytensor_mode,
    time_one_thread,
)

WORKLOADS = {"W7": "sparse (CSR) x dense product and its gradient"}

ROWS, COLS, NNZ, K = 100_000, 10_000, 1_000_000, 64


def sparse_status() -> str:
    """``"ok"`` if opgraph_sparse imports, else why it does not."""
    try:
        if importlib.util.find_spec("opgraph_sparse") is None:
            return "skipped: opgraph-sparse not installed"
    except (ImportError, ValueError):
        return "skipped: opgraph-sparse not installed"
    try:
        importlib.import_module("opgraph_sparse")
    except Exception as exc:
        return f"skipped: opgraph-sparse does not import ({error_text(exc)})"
    return "ok"


def make_inputs(dtype: str) -> tuple[Any, np.ndarray, np.ndarray]:
    """``(a, b, c)``: the CSR matrix (exactly NNZ values, int32 indices), the dense operand
    and the product's upstream gradient, in ``dtype``."""
    import scipy.sparse

    rng = np.random.default_rng(0)
    flat = rng.choice(ROWS * COLS, size=NNZ, replace=False)
    rows, cols = np.divmod(flat, COLS)
    values = rng.standard_normal(NNZ).astype(dtype)
    a = scipy.sparse.csr_matrix((values, (rows, cols)), shape=(ROWS, COLS))
    b = rng.standard_normal((COLS, K)).astype(dtype)
    c = rng.standard_normal((ROWS, K)).astype(dtype)
    return a, b, c


def _opgraph_fn(kind: str, dtype: str, linker: str) -> Any:
    """opgraph's product ``f(a, b)`` or gradient ``f(a, b, c)``."""
    import opgraph
    import opgraph.sparse as S
    import opgraph.tensor as T

    # opgraph.sparse.dot (opgraph_sparse.dot.dot where the namespace does not export it yet)
    sdot = getattr(S, "dot", None) or importlib.import_module("opgraph_sparse.dot").dot
    x = S.csr_matrix("x", dtype=dtype)
    y = T.matrix("y", dtype=dtype)
    if kind == "product":
        return opgraph.function([x, y], sdot(x, y), mode=opgraph_mode(linker))
    c = T.matrix("c", dtype=dtype)
    cost = (sdot(x, y) * c).sum()
    return opgraph.function([x, y, c], opgraph.grad(cost, y), mode=opgraph_mode(linker))


def _pytensor_fn(kind: str, dtype: str, key: str) -> Any:
    """PyTensor's product or gradient, compiled with the peer's linker."""
    import pytensor
    import pytensor.sparse as ps
    import pytensor.tensor as pt

    x = ps.csr_matrix("x", dtype=dtype)
    y = pt.matrix("y", dtype=dtype)
    if kind == "product":
        return pytensor.function([x, y], ps.dot(x, y), mode=pytensor_mode(key))
    c = pt.matrix("c", dtype=dtype)
    cost = (ps.dot(x, y) * c).sum()
    return pytensor.function([x, y, c], pytensor.grad(cost, y), mode=pytensor_mode(key))


def _jax_fn(kind: str, a: Any, b: np.ndarray, c: np.ndarray) -> Callable[[], Any]:
    """JAX's jitted product or gradient with a BCOO ``a`` (arrays on the device first)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import sparse as jsparse

    aj = jsparse.BCOO.from_scipy_sparse(a)
    bj, cj = jnp.asarray(b), jnp.asarray(c)
    if kind == "product":
        f = jax.jit(lambda m, d: m @ d)
        return lambda: f(aj, bj).block_until_ready()
    g = jax.jit(jax.grad(lambda d, m, up: jnp.sum((m @ d) * up)))
    return lambda: g(bj, aj, cj).block_until_ready()


def run(workload: str, ctx: Context) -> Table:
    """Time SciPy, opgraph and the peers on the product and its gradient (or report the
    skip); SciPy is each case's reference."""
    table = Table(workload, WORKLOADS[workload], ratio_header="vs SciPy")
    status = sparse_status()
    shape = f"csr[{ROWS}x{COLS}, nnz {NNZ}] @ dense[{COLS}x{K}]"
    if status != "ok":
        table.skip(shape, "opgraph", status)
        return table
    repeat = ctx.repeat(full=15, quick=5)
    table.detail = (
        f"{shape}; gradient: d sum(dot(a, b) * c) / db = a.T @ c; {repeat} rounds after 1 "
        "warm-up; check = largest relative error to SciPy's result (scaled by its largest value)"
    )
    timing = {"repeat": repeat, "warmup": 1}
    engines = opgraph_engines()
    for dtype in ("float64", "float32"):
        a, b, c = make_inputs(dtype)
        at = a.T  # CSC, the gradient's operand
        for kind in ("product", "gradient"):
            case = f"{kind} {dtype}"
            args = (a, b) if kind == "product" else (a, b, c)
            reference = a @ b if kind == "product" else at @ c
            rtol = 1e-10 if dtype == "float64" else 1e-4
            scale = np.max(np.abs(reference))

            def check(
                fn: Callable[[], Any],
                reference: Any = reference,
                rtol: float = rtol,
                scale: float = scale,
            ) -> str:
                return close_check(fn(), reference, rtol=rtol, scale=scale)

            if kind == "product":
                table.time(case, "SciPy", lambda a=a, b=b: lambda: a @ b, ref=True, **timing)
            else:
                table.time(case, "SciPy", lambda at=at, c=c: lambda: at @ c, ref=True, **timing)
            for label, linker in engines:

                def make(
                    kind: str = kind, dtype: str = dtype, linker: str = linker, args: tuple = args
                ) -> Callable[[], Any]:
                    f = _opgraph_fn(kind, dtype, linker)
                    return lambda: f(*args)

                table.time(case, label, make, check=check, **timing)

            def make_best(kind: str = kind, dtype: str = dtype, args: tuple = args) -> Any:
                f = _opgraph_fn(kind, dtype, "auto")
                return lambda: f(*args)

            time_one_thread(table, case, make_best, check=check, **timing)
            for peer in ctx.available_peers(["pytensor_c", "pytensor_numba"]):

                def make_pt(
                    kind: str = kind, dtype: str = dtype, key: str = peer.key, args: tuple = args
                ) -> Callable[[], Any]:
                    f = _pytensor_fn(kind, dtype, key)
                    return lambda: f(*args)

                table.time(case, peer.label, make_pt, check=check, **timing)
            if ctx.peers.get("jax") is not None and ctx.peers["jax"].ok:
                table.time(
                    case,
                    "JAX (BCOO)",
                    lambda kind=kind, a=a, b=b, c=c: _jax_fn(kind, a, b, c),
                    check=lambda fn, check=check: check(lambda: np.asarray(fn())),
                    **timing,
                )
    missing = ctx.peer_summary()
    if missing:
        table.note(f"peers not run: {missing}")
    return table
