"""What every workload module shares: the run context, result tables, engines and peers.

A workload module (``bench_<family>.py``) declares ``WORKLOADS = {"W1": "title", ...}`` and
``run(workload_id, ctx) -> Table``. It fills the :class:`Table` through
:meth:`Table.time` (build the callable, check it, time it; any failure becomes an
``error:`` row instead of stopping the suite) or :meth:`Table.add`. The first row of a
case marked ``ref=True`` (NumPy) is what the ratio column divides by.

Engines: opgraph's ``FAST_RUN`` with the best installed linker (``linker=auto``), and
explicitly named linkers (``vm``: the Python VM of core); optional peers (PyTensor with its
C and Numba linkers, JAX) are detected with importlib and reported as "not installed"
when absent. They are never required.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from timing import Timing, fmt_time, measure, pick_unit

__all__ = [
    "Context",
    "Peer",
    "Row",
    "Table",
    "close_check",
    "detect_peers",
    "environment",
    "error_text",
    "memory_bound",
    "norm_check",
    "opgraph_best_linker",
    "opgraph_linkers",
    "opgraph_mode",
    "time_one_thread",
    "ulp_check",
]

# --------------------------------------------------------------------------- opgraph


def opgraph_linkers() -> list[str]:
    """The linker names installed plugins provide (``py``, ``vm``, ``c``, ...)."""
    from opgraph.plugins import get_plugin_manager

    return sorted(get_plugin_manager().linkers())


def opgraph_best_linker() -> str:
    """The linker ``FAST_RUN`` (``linker=auto``) resolves to in this environment."""
    from opgraph.plugins import get_plugin_manager

    try:
        return str(get_plugin_manager().best_linker())
    except Exception:
        import opgraph

        return str(opgraph.config.linker)


def opgraph_mode(linker: str = "auto", optimizer: str = "fast_run") -> Any:
    """An opgraph Mode: ``FAST_RUN``'s rewrites with the given linker (auto = best)."""
    import opgraph

    return opgraph.Mode(linker=linker, optimizer=optimizer)


def opgraph_engines() -> list[tuple[str, str]]:
    """``(label, linker)`` of the opgraph engines a runtime workload compares.

    ``FAST_RUN`` with the best installed linker, then the Python VM (``vm``) explicitly
    unless FAST_RUN already uses it.
    """
    best = opgraph_best_linker()
    engines = [(f"opgraph FAST_RUN [{best}]", "auto")]
    if best != "vm":
        engines.append(("opgraph FAST_RUN [vm]", "vm"))
    return engines


def time_one_thread(
    table: Table, case: str, make: Callable[[], Callable[[], Any]], **timing: Any
) -> None:
    """Time ``make``'s function compiled with ``config.openmp`` off (every kernel on one
    thread) as a row of ``case``, and note the threaded row's time over it: issue 19's
    "threads never lose to one thread" in the same run."""
    import opgraph

    if "openmp" not in opgraph.config:  # backend-c is not installed: no threads
        return
    best = f"opgraph FAST_RUN [{opgraph_best_linker()}]"

    def make_one() -> Callable[[], Any]:
        with opgraph.config.change_flags(openmp=False):
            return make()

    one = table.time(case, f"{best}, one thread", make_one, **timing)
    threaded = [r for r in table.rows if r.case == case and r.engine == best and r.timing]
    if threaded and one.timing is not None:
        ratio = threaded[0].timing.median / one.timing.median
        table.note(f"{case}: {best} threaded / one thread = {ratio:.2f}")


# --------------------------------------------------------------------------- peers


@dataclass
class Peer:
    """An optional peer engine and whether it can run here.

    ``status`` is ``"ok"``, ``"not installed"`` or a short reason it cannot run.
    """

    key: str
    label: str
    status: str

    @property
    def ok(self) -> bool:
        """Whether the peer is importable and usable."""
        return self.status == "ok"


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:120]


def detect_peers(enabled: bool = True) -> dict[str, Peer]:
    """PyTensor (C linker, Numba linker) and JAX: importable and usable, or why not.

    Imports happen only for installed packages; JAX gets 64-bit mode turned on (every
    workload compares float64 the way NumPy computes it).
    """
    peers = {
        "pytensor_c": Peer("pytensor_c", "PyTensor C", "not installed"),
        "pytensor_numba": Peer("pytensor_numba", "PyTensor Numba", "not installed"),
        "jax": Peer("jax", "JAX", "not installed"),
    }
    if not enabled:
        for peer in peers.values():
            peer.status = "disabled (--no-peers)"
        return peers
    if _importable("pytensor"):
        try:
            pytensor = importlib.import_module("pytensor")
        except Exception as exc:
            reason = f"import failed ({_first_line(exc)})"
            peers["pytensor_c"].status = peers["pytensor_numba"].status = reason
        else:
            cxx = getattr(getattr(pytensor, "config", None), "cxx", "")
            peers["pytensor_c"].status = (
                "ok" if cxx else "unavailable (no C++ compiler: pytensor.config.cxx is empty)"
            )
            peers["pytensor_numba"].status = (
                "ok" if _importable("numba") else "not installed (numba is missing)"
            )
    if _importable("jax"):
        try:
            jax = importlib.import_module("jax")
            jax.config.update("jax_enable_x64", True)
        except Exception as exc:
            peers["jax"].status = f"import failed ({_first_line(exc)})"
        else:
            peers["jax"].status = "ok"
    return peers


def pytensor_mode(key: str) -> Any:
    """The PyTensor Mode for a peer key (``pytensor_c`` or ``pytensor_numba``)."""
    from pytensor.compile.mode import Mode, get_mode

    if key == "pytensor_c":
        return Mode(linker="cvm", optimizer="fast_run")
    return get_mode("NUMBA")


# --------------------------------------------------------------------------- checks


def error_text(exc: BaseException) -> str:
    """One line naming an exception and where in the benchmark or library it came from."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = ""
    if frames:
        last = frames[-1]
        where = f" [{os.path.basename(last.filename)}:{last.lineno}]"
    return f"error: {_first_line(exc)}{where}"


def ulp_check(got: Any, ref: np.ndarray) -> str:
    """``ok, max N ulp`` (distance to ``ref`` in units of ``ref``'s last place), or why not."""
    got = np.asarray(got)
    ref = np.asarray(ref)
    if got.shape != ref.shape:
        return f"SHAPE {got.shape} != {ref.shape}"
    note = "" if got.dtype == ref.dtype else f" (dtype {got.dtype}, NumPy {ref.dtype})"
    if not np.issubdtype(ref.dtype, np.floating):
        same = bool(np.array_equal(got, ref))
        return ("ok" if same else "MISMATCH") + note
    finite = np.isfinite(ref)
    if not np.array_equal(finite, np.isfinite(got)):
        return "MISMATCH (inf/nan differ)" + note
    g = got.astype(ref.dtype, copy=False)[finite].astype(np.float64)
    r = ref[finite]
    spacing = np.spacing(np.abs(r)).astype(np.float64)
    spacing[spacing == 0] = np.finfo(ref.dtype).smallest_subnormal
    ulps = float(np.max(np.abs(g - r.astype(np.float64)) / spacing)) if r.size else 0.0
    return f"{'ok' if ulps <= 64 else 'DIFF'} {ulps:.0f} ulp{note}"


def close_check(got: Any, ref: Any, rtol: float = 1e-9, scale: Any = None) -> str:
    """``ok rel E``: the largest ``|got - ref| / scale`` (``scale`` defaults to ``|ref|``)."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        return f"SHAPE {got.shape} != {ref.shape}"
    scale = np.abs(ref) if scale is None else np.asarray(scale, dtype=np.float64)
    err = float(np.max(np.abs(got - ref) / np.maximum(scale, 1e-300))) if ref.size else 0.0
    return f"{'ok' if err <= rtol else 'DIFF'} rel {err:.0e}"


def norm_check(got: Sequence[Any], ref: Sequence[Any], rtol: float = 1e-8) -> str:
    """``ok rel E``: relative 2-norm difference of a list of arrays (parameters) from ``ref``."""
    if len(got) != len(ref):
        return f"MISMATCH: {len(got)} arrays, expected {len(ref)}"
    num = den = 0.0
    for g, r in zip(got, ref):
        g = np.asarray(g, dtype=np.float64)
        r = np.asarray(r, dtype=np.float64)
        if g.shape != r.shape:
            return f"SHAPE {g.shape} != {r.shape}"
        num += float(np.sum((g - r) ** 2))
        den += float(np.sum(r**2))
    err = (num / den) ** 0.5 if den > 0 else num**0.5
    return f"{'ok' if err <= rtol else 'DIFF'} rel {err:.0e}"


# --------------------------------------------------------------------------- tables


# --------------------------------------------------------------------------- memory bound

#: Rounds of each streaming operation when a case's memory bound is measured.
_STREAM_ROUNDS = 15


def _stream_ops(read: int, written: int) -> list[Callable[[int, int], Any]]:
    """Streaming operations over ``read`` bytes in (and ``written`` out), as
    ``op(part, parts)`` doing part ``part`` of ``parts``: the copy ``copyto`` when bytes
    are written; otherwise reductions that only read (``max`` and ``sum``: the faster
    NumPy kernel on this CPU sets the bound)."""
    src = np.ones(max(1, read // 8))
    if written:
        dst = np.empty(max(1, written // 8))
        n = min(src.size, dst.size)

        def copy(k: int, parts: int) -> None:
            lo, hi = n * k // parts, n * (k + 1) // parts
            np.copyto(dst[lo:hi], src[lo:hi])

        return [copy]

    def reducer(fn: Callable[[np.ndarray], Any]) -> Callable[[int, int], Any]:
        def op(k: int, parts: int) -> Any:
            return fn(src[src.size * k // parts : src.size * (k + 1) // parts])

        return op

    return [reducer(np.max), reducer(np.sum)]


def stream_time(read: int, written: int = 0) -> float:
    """The fewest seconds this machine takes, now, to stream ``read`` bytes in (and
    ``written`` bytes out): buffers of those very sizes, so that they sit in the same
    level of the cache hierarchy as the case's own data (this VM's 260 MiB L3 holds
    some cases and not others), split between one thread per usable CPU and also
    run on one thread (a busy machine may give one thread the better time), best of
    :data:`_STREAM_ROUNDS` rounds of every operation. NumPy's kernels release the
    GIL, so the threads run in parallel. It is the limit a streaming kernel cannot
    beat."""
    import threading

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    best = float("inf")
    for op in _stream_ops(read, written):
        for parts in sorted({1, max(1, cpus or 1)}):
            op(0, 1)  # touch every page before timing
            for _ in range(_STREAM_ROUNDS):
                threads = [threading.Thread(target=op, args=(k, parts)) for k in range(parts)]
                start = time.perf_counter()
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                best = min(best, time.perf_counter() - start)
    return best


def memory_bound(table: Table, case: str, read: int, written: int = 0) -> None:
    """Add the case's memory-bound row (:func:`stream_time` of its ``read`` and
    ``written`` bytes, measured now, right after the case's engines) and a note with
    each opgraph row's time over it."""
    seconds = stream_time(read, written)
    rate = (read + written) / seconds
    table.add(Row(case, "memory bound", timing=Timing.of([seconds]), check="stream limit"))
    for row in table.rows:
        if row.case == case and row.engine.startswith("opgraph") and row.timing is not None:
            table.note(
                f"{case}: {row.engine} at {row.timing.median / seconds:.2f}x the memory bound "
                f"({(read + written) / 2**20:.0f} MiB at {rate / 1e9:.1f} GB/s)"
            )


@dataclass
class Row:
    """One measured (or skipped) engine for one case of a workload."""

    case: str
    engine: str
    timing: Timing | None = None
    status: str = ""
    ref: bool = False
    check: str = ""
    ratio: str | None = None  # set by hand where there is no NumPy reference

    def to_dict(self) -> dict[str, Any]:
        """The row as JSON data (times in seconds)."""
        out: dict[str, Any] = {"case": self.case, "engine": self.engine}
        if self.timing is not None:
            out.update(self.timing.to_dict())
        if self.status:
            out["status"] = self.status
        if self.check:
            out["check"] = self.check
        if self.ratio is not None:
            out["ratio"] = self.ratio
        out["reference"] = self.ref
        return out


@dataclass
class Table:
    """The results of one workload: rows grouped by case, plus notes."""

    workload: str
    title: str
    detail: str = ""
    ratio_header: str = "vs NumPy"
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, row: Row) -> Row:
        """Append a row and return it."""
        self.rows.append(row)
        return row

    def note(self, text: str) -> None:
        """A line printed under the table."""
        self.notes.append(text)

    def skip(self, case: str, engine: str, status: str) -> Row:
        """A row that was not measured, with the reason."""
        return self.add(Row(case, engine, status=status))

    def time(
        self,
        case: str,
        engine: str,
        make: Callable[[], Callable[[], Any]],
        *,
        repeat: int,
        number: int | None = None,
        warmup: int = 1,
        min_round_s: float = 0.05,
        ref: bool = False,
        check: Callable[[Callable[[], Any]], str] | None = None,
    ) -> Row:
        """Build the callable with ``make()``, check it, time it; failures become rows.

        ``check(fn)`` returns a short verdict (e.g. ``ok 1 ulp``) shown in the check column.
        """
        try:
            fn = make()
            verdict = check(fn) if check is not None else ""
            timing = measure(
                fn, repeat=repeat, number=number, warmup=warmup, min_round_s=min_round_s
            )
        except Exception as exc:
            return self.add(Row(case, engine, status=error_text(exc), ref=ref))
        return self.add(Row(case, engine, timing=timing, ref=ref, check=verdict))

    def ratios(self) -> list[str]:
        """The ratio column: each row's median over its case's reference median."""
        refs: dict[str, float] = {}
        for row in self.rows:
            if row.ref and row.timing is not None and row.case not in refs:
                refs[row.case] = row.timing.median
        out = []
        for row in self.rows:
            if row.ratio is not None:
                out.append(row.ratio)
            elif row.timing is not None and row.case in refs and refs[row.case] > 0:
                out.append(f"{row.timing.median / refs[row.case]:.2f}x")
            else:
                out.append("")
        return out

    def render(self) -> str:
        """The table as text: median, min, max, ratio and check for every row."""
        ratios = self.ratios()
        case_w = max([4, *(len(r.case) for r in self.rows)])
        eng_w = max([6, *(len(r.engine) for r in self.rows)])
        head = f"{self.workload}  {self.title}"
        lines = [head, f"    {self.detail}"] if self.detail else [head]
        lines.append(
            f"  {'case':<{case_w}}  {'engine':<{eng_w}}  {'median':>9}  {'min':>9}  "
            f"{'max':>9}  {self.ratio_header:>8}  check"
        )
        previous_case = None
        for row, ratio in zip(self.rows, ratios):
            case = row.case if row.case != previous_case else ""
            previous_case = row.case
            prefix = f"  {case:<{case_w}}  {row.engine:<{eng_w}}"
            if row.timing is None:
                lines.append(f"{prefix}  {row.status}")
                continue
            unit = pick_unit(row.timing.median)
            cols = (fmt_time(t, unit) for t in (row.timing.median, row.timing.min, row.timing.max))
            lines.append(
                f"{prefix}  {'  '.join(f'{c:>9}' for c in cols)}  {ratio:>8}  {row.check}".rstrip()
            )
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """The table as JSON data."""
        return {
            "workload": self.workload,
            "title": self.title,
            "detail": self.detail,
            "ratio_header": self.ratio_header,
            "rows": [
                {**row.to_dict(), "ratio_text": ratio}
                for row, ratio in zip(self.rows, self.ratios())
            ],
            "notes": list(self.notes),
        }


# --------------------------------------------------------------------------- context


@dataclass
class Context:
    """What a workload needs to know about this run."""

    quick: bool = False
    repeat_override: int | None = None
    peers: dict[str, Peer] = field(default_factory=dict)

    def repeat(self, full: int, quick: int) -> int:
        """Rounds to time: ``--repeat`` if given, else the workload's full or quick count."""
        if self.repeat_override is not None:
            return max(1, self.repeat_override)
        return quick if self.quick else full

    def available_peers(self, keys: Sequence[str] | None = None) -> list[Peer]:
        """The peers that can run here (optionally only those with the given keys)."""
        return [p for k, p in self.peers.items() if p.ok and (keys is None or k in keys)]

    def peer_summary(self) -> str | None:
        """``PyTensor C: not installed; ...`` for the peers that do not run, or None."""
        missing = [f"{p.label}: {p.status}" for p in self.peers.values() if not p.ok]
        return "; ".join(missing) if missing else None


def environment(ctx: Context) -> dict[str, Any]:
    """Versions and settings that the numbers depend on."""
    env: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": f"{platform.system()} {platform.machine()}",
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "numpy": np.__version__,
        "opgraph_cache_dir": os.environ.get("OPGRAPH_CACHE_DIR", "(default)"),
        "quick": ctx.quick,
        "peers": {p.label: p.status for p in ctx.peers.values()},
    }
    try:
        import opgraph

        env["opgraph"] = getattr(opgraph, "__version__", "?")
        env["opgraph_linkers"] = opgraph_linkers()
        env["opgraph_fast_run_linker"] = opgraph_best_linker()
    except Exception as exc:
        env["opgraph"] = error_text(exc)
    for name in ("pytensor", "jax", "numba"):
        if _importable(name):
            try:
                env[name] = getattr(importlib.import_module(name), "__version__", "?")
            except Exception as exc:
                env[name] = error_text(exc)
    return env
