"""W1: large elementwise expressions, ``a + a**10`` and ``exp(-x**2)*sin(x) + 0.5*x``.

On 10,000,000 elements of float64 and float32. NumPy evaluates the expression directly
(one temporary per operation); opgraph compiles it with ``FAST_RUN`` and the best
installed linker, and again with the Python VM (``vm``) when that is not the best; the
peers compile the same expression. The check column gives the largest distance from
NumPy's result in units in the last place (ulp) of NumPy's result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from harness import (
    Context,
    Table,
    memory_bound,
    opgraph_engines,
    opgraph_mode,
    pytensor_mode,
    time_one_thread,
    ulp_check,
)

WORKLOADS = {"W1": "elementwise expressions on 10,000,000 elements"}

SIZE = 10_000_000
#: Calls before timing: an adaptive thread team settles on threads or one thread in its
#: first 4 calls, and the figures are of the settled calls.
WARMUP = 5


def pow_expr(lib: Any, a: Any) -> Any:
    """``a + a**10`` (``lib`` unused: the expression needs operators only)."""
    return a + a**10


def exp_sin_expr(lib: Any, x: Any) -> Any:
    """``exp(-x**2) * sin(x) + 0.5 * x`` with ``lib``'s exp and sin."""
    return lib.exp(-(x**2)) * lib.sin(x) + 0.5 * x


EXPRESSIONS: dict[str, Callable[[Any, Any], Any]] = {
    "a + a**10": pow_expr,
    "exp(-x**2)*sin(x) + 0.5*x": exp_sin_expr,
}

#: Input ranges: no cancellation (so ulp distances mean something), no overflow. NumPy's
#: ``a**10`` is ~15x slower on negative bases (glibc ``pow``'s slow path), so the range
#: changes the reference a lot; [0, 2) is the realistic fast case.
DOMAINS = {"a + a**10": (0.0, 2.0), "exp(-x**2)*sin(x) + 0.5*x": (-3.0, 3.0)}


def _opgraph_fn(expr: Callable[[Any, Any], Any], dtype: str, linker: str) -> Any:
    import opgraph
    import opgraph.tensor as T

    x = T.vector("x", dtype=dtype)
    return opgraph.function([x], expr(T, x), mode=opgraph_mode(linker))


def _pytensor_fn(expr: Callable[[Any, Any], Any], dtype: str, key: str) -> Any:
    import pytensor
    import pytensor.tensor as pt

    x = pt.vector("x", dtype=dtype)
    return pytensor.function([x], expr(pt, x), mode=pytensor_mode(key))


def _jax_fn(expr: Callable[[Any, Any], Any]) -> Any:
    import jax
    import jax.numpy as jnp

    return jax.jit(lambda x: expr(jnp, x))


def run(workload: str, ctx: Context) -> Table:
    """Time every expression, dtype and engine; NumPy is the reference of each case."""
    repeat = ctx.repeat(full=10, quick=3)
    table = Table(
        workload,
        WORKLOADS[workload],
        detail=f"a in [0, 2), x in [-3, 3); {repeat} calls timed after {WARMUP} warm-up calls; "
        "check = max distance from NumPy's result in ulp",
    )
    rng = np.random.default_rng(0)
    inputs = {name: rng.uniform(low, high, SIZE) for name, (low, high) in DOMAINS.items()}
    engines = opgraph_engines()
    for dtype in ("float64", "float32"):
        for name, expr in EXPRESSIONS.items():
            data = inputs[name].astype(dtype)
            case = f"{name}  {dtype}"
            reference = expr(np, data)

            def check(fn: Callable[[], Any], reference: Any = reference) -> str:
                return ulp_check(fn(), reference)

            table.time(
                case,
                "NumPy",
                lambda expr=expr, data=data: lambda: expr(np, data),
                repeat=repeat,
                number=1,
                warmup=WARMUP,
                ref=True,
            )
            for label, linker in engines:

                def make(
                    expr: Any = expr, dtype: str = dtype, linker: str = linker, data: Any = data
                ) -> Any:
                    f = _opgraph_fn(expr, dtype, linker)
                    return lambda: f(data)

                table.time(case, label, make, repeat=repeat, number=1, warmup=WARMUP, check=check)

            def make_best(expr: Any = expr, dtype: str = dtype, data: Any = data) -> Any:
                f = _opgraph_fn(expr, dtype, "auto")
                return lambda: f(data)

            time_one_thread(
                table, case, make_best, repeat=repeat, number=1, warmup=WARMUP, check=check
            )
            for peer in ctx.available_peers(["pytensor_c", "pytensor_numba"]):

                def make_pt(
                    expr: Any = expr, dtype: str = dtype, key: str = peer.key, data: Any = data
                ) -> Any:
                    f = _pytensor_fn(expr, dtype, key)
                    return lambda: f(data)

                table.time(
                    case, peer.label, make_pt, repeat=repeat, number=1, warmup=WARMUP, check=check
                )
            if ctx.peers.get("jax") is not None and ctx.peers["jax"].ok:

                def make_jax(expr: Any = expr, data: Any = data) -> Any:
                    import jax.numpy as jnp

                    f = _jax_fn(expr)
                    xj = jnp.asarray(data)
                    return lambda: f(xj).block_until_ready()

                table.time(
                    case, "JAX", make_jax, repeat=repeat, number=1, warmup=WARMUP, check=check
                )
            memory_bound(table, case, read=data.nbytes, written=data.nbytes)
            del reference
    missing = ctx.peer_summary()
    if missing:
        table.note(f"peers not run: {missing}")
    return table
