"""W7: sparse x dense products, when opgraph-sparse is installed (else a skipped row).

A CSR matrix of 20,000 x 20,000 with 0.1 % non-zeros times a dense 20,000 x 64 matrix;
the reference is SciPy's ``csr @ dense`` (listed in the NumPy column).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np
from harness import Context, Table, close_check, error_text, opgraph_engines, opgraph_mode

WORKLOADS = {"W7": "sparse (CSR) x dense product"}

N, DENSITY, COLUMNS = 20_000, 1e-3, 64


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


def run(workload: str, ctx: Context) -> Table:
    """Time SciPy's product and opgraph's ``sparse.dot`` (or report the skip)."""
    table = Table(workload, WORKLOADS[workload])
    case = f"csr[{N}x{N}, {DENSITY:g}] @ dense[{N}x{COLUMNS}]"
    status = sparse_status()
    if status != "ok":
        table.skip(case, "opgraph", status)
        return table
    import scipy.sparse

    repeat = ctx.repeat(full=15, quick=5)
    table.detail = f"{repeat} calls timed after 1 warm-up; time per call"
    rng = np.random.default_rng(0)
    a = scipy.sparse.random(N, N, density=DENSITY, format="csr", random_state=rng)
    b = rng.standard_normal((N, COLUMNS))
    reference = a @ b
    timing = {"repeat": repeat, "number": 1, "warmup": 1}

    def check(fn: Callable[[], Any]) -> str:
        return close_check(fn(), reference, rtol=1e-10)

    table.time(case, "SciPy (csr @ dense)", lambda: lambda: a @ b, ref=True, **timing)
    for label, linker in opgraph_engines():

        def make(linker: str = linker) -> Callable[[], Any]:
            import opgraph
            import opgraph.sparse as S
            import opgraph.tensor as T

            x = S.csr_matrix("x", dtype="float64")
            y = T.dmatrix("y")
            f = opgraph.function([x, y], S.dot(x, y), mode=opgraph_mode(linker))
            return lambda: f(a, b)

        table.time(case, label, make, check=check, **timing)
    return table
