"""W6: sums over a 4000 x 4000 float64 matrix: axis 0, axis 1 and all elements.

Axis 0 sums down the columns (strided for a C-ordered matrix: NumPy adds rows pairwise),
axis 1 along contiguous rows, and the full sum everything (128 MB read per call). The
check column gives the largest difference from NumPy's result relative to the sum of
the magnitudes added (a summation's error bound).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from harness import (
    Context,
    Table,
    close_check,
    memory_bound,
    opgraph_engines,
    opgraph_mode,
    pytensor_mode,
    time_one_thread,
)

WORKLOADS = {"W6": "sum of a 4000 x 4000 float64 matrix"}

SHAPE = (4000, 4000)
AXES: dict[str, int | None] = {"sum axis=0": 0, "sum axis=1": 1, "sum (all)": None}


def _opgraph(axis: int | None, linker: str) -> Any:
    import opgraph
    import opgraph.tensor as T

    x = T.dmatrix("x")
    return opgraph.function([x], x.sum(axis=axis), mode=opgraph_mode(linker))


def _pytensor(axis: int | None, key: str) -> Any:
    import pytensor
    import pytensor.tensor as pt

    x = pt.dmatrix("x")
    return pytensor.function([x], x.sum(axis=axis), mode=pytensor_mode(key))


def run(workload: str, ctx: Context) -> Table:
    """Time the three sums on NumPy, opgraph and the installed peers."""
    repeat = ctx.repeat(full=15, quick=5)
    table = Table(
        workload,
        WORKLOADS[workload],
        detail=f"{repeat} calls timed after 5 warm-up calls; time per call; "
        "check = max |difference from NumPy| / sum |x|",
    )
    data = np.random.default_rng(0).standard_normal(SHAPE)
    # An adaptive thread team settles in its first 4 calls: the figures are of later calls.
    timing = {"repeat": repeat, "number": 1, "warmup": 5}
    for case, axis in AXES.items():
        reference = data.sum(axis=axis)
        magnitude = np.abs(data).sum(axis=axis)

        def check(fn: Callable[[], Any], reference: Any = reference, scale: Any = magnitude) -> str:
            # Summation order differs between implementations: the error bound of a sum
            # is relative to the sum of the magnitudes, not to the (possibly tiny) total.
            return close_check(fn(), reference, rtol=1e-12, scale=scale)

        table.time(case, "NumPy", lambda axis=axis: lambda: data.sum(axis=axis), ref=True, **timing)
        for label, linker in opgraph_engines():

            def make(axis: int | None = axis, linker: str = linker) -> Callable[[], Any]:
                f = _opgraph(axis, linker)
                return lambda: f(data)

            table.time(case, label, make, check=check, **timing)

        def make_best(axis: int | None = axis) -> Callable[[], Any]:
            f = _opgraph(axis, "auto")
            return lambda: f(data)

        time_one_thread(table, case, make_best, check=check, **timing)
        for peer in ctx.available_peers(["pytensor_c", "pytensor_numba"]):

            def make_pt(axis: int | None = axis, key: str = peer.key) -> Callable[[], Any]:
                f = _pytensor(axis, key)
                return lambda: f(data)

            table.time(case, peer.label, make_pt, check=check, **timing)
        if ctx.peers.get("jax") is not None and ctx.peers["jax"].ok:

            def make_jax(axis: int | None = axis) -> Callable[[], Any]:
                import jax
                import jax.numpy as jnp

                f = jax.jit(lambda x: jnp.sum(x, axis=axis))
                xj = jnp.asarray(data)
                return lambda: f(xj).block_until_ready()

            table.time(case, "JAX", make_jax, check=check, **timing)
        memory_bound(table, case, read=data.nbytes)
    missing = ctx.peer_summary()
    if missing:
        table.note(f"peers not run: {missing}")
    return table
