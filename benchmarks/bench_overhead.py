"""W4: per-call overhead: ``x + 1`` on a float64 scalar (a 0-d array, then a Python float),
a 20-op chain on a length-10 vector.

NumPy evaluates the expression directly on the same values (for the Python float that is
Python's own arithmetic, which no compiled function can match: the row shows the cost of
converting the argument on each call).
Each opgraph engine is called normally (every argument converted and checked by its
Type) and with ``trust_input`` (arguments stored as given). Diagnostics for ``x + 1``:
the Python linker (``py``); ``f.fn()`` alone (the VM with its input already stored),
which is what a faster VM replaces; the identity function with borrowed input and
output (one trivial node), which is the framework's own cost without any arithmetic; and
``x + 1`` returned with ``Out(borrow=True)`` under ``allow_gc=False``, where the output
array of one call is reused by the next (no allocation).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from harness import (
    Context,
    Table,
    close_check,
    opgraph_best_linker,
    opgraph_engines,
    opgraph_mode,
    pytensor_mode,
)

WORKLOADS = {"W4": "per-call overhead on tiny inputs"}

CHAIN_LENGTH = 20


def chain(lib: Any, x: Any, n: int = CHAIN_LENGTH) -> Any:
    """``n`` elementwise ops cycling through sin, +0.5, *0.9, cos, tanh (values stay small)."""
    steps: list[Callable[[Any], Any]] = [
        lib.sin,
        lambda v: v + 0.5,
        lambda v: v * 0.9,
        lib.cos,
        lib.tanh,
    ]
    for i in range(n):
        x = steps[i % len(steps)](x)
    return x


def plus_one(lib: Any, x: Any) -> Any:
    """``x + 1``."""
    return x + 1


def _opgraph(expr: Callable[[Any, Any], Any], ndim: int, linker: str, trust: bool) -> Any:
    import opgraph
    import opgraph.tensor as T

    x = T.dscalar("x") if ndim == 0 else T.dvector("x")
    f = opgraph.function([x], expr(T, x), mode=opgraph_mode(linker))
    f.trust_input = trust
    return f


def _pytensor(expr: Callable[[Any, Any], Any], ndim: int, key: str, trust: bool) -> Any:
    import pytensor
    import pytensor.tensor as pt

    x = pt.dscalar("x") if ndim == 0 else pt.dvector("x")
    f = pytensor.function([x], expr(pt, x), mode=pytensor_mode(key))
    f.trust_input = trust
    return f


def _vm_alone(value: Any) -> Callable[[], Any]:
    """``f.fn()`` of ``x + 1`` (FAST_RUN) with the input stored once, outside the loop."""
    f = _opgraph(plus_one, 0, "auto", True)
    cell = f.input_storage[0].storage
    fn = f.fn

    def call() -> Any:
        cell[0] = value
        return fn()

    return call


def _identity(value: Any) -> Callable[[], Any]:
    """The identity with borrowed input and output, no rewrites, ``trust_input``."""
    import opgraph
    import opgraph.tensor as T

    x = T.dscalar("x")
    f = opgraph.function(
        [opgraph.In(x, borrow=True)],
        opgraph.Out(x, borrow=True),
        mode=opgraph.Mode(linker="auto", optimizer=None),
    )
    f.trust_input = True
    return lambda: f(value)


def _borrowed_output(value: Any) -> Callable[[], Any]:
    """``x + 1`` (FAST_RUN, ``trust_input``) with a borrowed output and ``allow_gc=False``."""
    import opgraph
    import opgraph.tensor as T

    x = T.dscalar("x")
    best = opgraph_best_linker()
    f = opgraph.function([x], opgraph.Out(x + 1, borrow=True), mode=opgraph_mode(f"{best}_nogc"))
    f.trust_input = True
    return lambda: f(value)


def run(workload: str, ctx: Context) -> Table:
    """Time both tiny functions on every engine, default and ``trust_input``."""
    repeat = ctx.repeat(full=15, quick=7)
    round_s = 0.03 if ctx.quick else 0.1
    table = Table(
        workload,
        WORKLOADS[workload],
        detail=f"{repeat} rounds of >= {round_s:g} s after a warm-up; time per call",
    )
    timing = {"repeat": repeat, "min_round_s": round_s, "warmup": 100}
    scalar = np.array(1.5)
    vector = np.linspace(-1.0, 1.0, 10)
    cases = [
        ("x + 1, float64 scalar", plus_one, scalar),
        # A Python float converted on each call (trust_input would store it unconverted).
        ("x + 1, Python float", plus_one, 1.5),
        (f"{CHAIN_LENGTH}-op chain, float64[10]", chain, vector),
    ]
    for case, expr, value in cases:
        ndim = np.ndim(value)
        reference = expr(np, value)

        def check(fn: Callable[[], Any], reference: Any = reference) -> str:
            return close_check(fn(), reference, rtol=1e-12)

        table.time(case, "NumPy", lambda e=expr, v=value: lambda: e(np, v), ref=True, **timing)
        engines = opgraph_engines()
        if ndim == 0:
            engines.append(("opgraph FAST_RUN [py]", "py"))
        for label, linker in engines:
            for trust in (False, True) if isinstance(value, np.ndarray) else (False,):

                def make(
                    expr: Any = expr, linker: str = linker, trust: bool = trust, value: Any = value
                ) -> Callable[[], Any]:
                    f = _opgraph(expr, np.ndim(value), linker, trust)
                    return lambda: f(value)

                name = f"{label}{', trust_input' if trust else ''}"
                table.time(case, name, make, check=check, **timing)
        if ndim == 0 and isinstance(value, np.ndarray):
            best = opgraph_best_linker()
            diagnostics = {
                f"opgraph [{best}] f.fn() alone (diag.)": _vm_alone,
                f"opgraph [{best}] identity, trust_input (diag.)": _identity,
                f"opgraph [{best}] Out(borrow=True), no gc, trust_input (diag.)": (
                    _borrowed_output
                ),
            }
            for name, factory in diagnostics.items():
                table.time(case, name, lambda f=factory: f(scalar), **timing)
        for peer in ctx.available_peers(["pytensor_c", "pytensor_numba"]):
            for trust in (False, True) if isinstance(value, np.ndarray) else (False,):

                def make_pt(
                    expr: Any = expr, key: str = peer.key, trust: bool = trust, value: Any = value
                ) -> Callable[[], Any]:
                    f = _pytensor(expr, np.ndim(value), key, trust)
                    return lambda: f(value)

                name = f"{peer.label}{', trust_input' if trust else ''}"
                table.time(case, name, make_pt, check=check, **timing)
        if ctx.peers.get("jax") is not None and ctx.peers["jax"].ok:

            def make_jax(expr: Any = expr, value: Any = value) -> Callable[[], Any]:
                import jax
                import jax.numpy as jnp

                f = jax.jit(lambda x: expr(jnp, x))
                xj = jnp.asarray(value)
                return lambda: f(xj).block_until_ready()

            table.time(case, "JAX (jit)", make_jax, check=check, **timing)
    missing = ctx.peer_summary()
    if missing:
        table.note(f"peers not run: {missing}")
    return table
