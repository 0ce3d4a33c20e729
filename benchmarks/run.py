"""Run the speed suite and print per-call medians (with min and max) beside NumPy.

Usage::

    python benchmarks/run.py                 # every benchmarks/bench_*.py
    python benchmarks/run.py overhead        # only bench_overhead.py
    python benchmarks/run.py --repeat 15 --number 20000

Each ``bench_<name>.py`` defines ``TITLE`` and ``cases()``, which returns ``(label,
callable)`` pairs; the first pair is the reference (usually the NumPy expression called
directly) and the ``x ref`` column divides by its median. Nothing here asserts a speed:
the numbers are for reading and comparing.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent


def load(path: Path) -> ModuleType:
    """Import ``benchmarks/bench_<name>.py`` by path (benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"opgraph_bench_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def time_per_call(fn: Callable[[], Any], repeat: int, number: int) -> list[float]:
    """Seconds per call of ``fn``, one figure per round of ``number`` calls."""
    for _ in range(min(number, 1000)):  # warm up caches and lazy set-up
        fn()
    rounds = []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeat):
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            rounds.append((time.perf_counter() - t0) / number)
    finally:
        if gc_was_enabled:
            gc.enable()
    return rounds


def report(
    title: str, cases: Sequence[tuple[str, Callable[[], Any]]], repeat: int, number: int
) -> list[dict[str, Any]]:
    """Time every case and print one table; return the rows (µs)."""
    rows = []
    for label, fn in cases:
        per_call = time_per_call(fn, repeat, number)
        rows.append(
            {
                "case": label,
                "median_us": statistics.median(per_call) * 1e6,
                "min_us": min(per_call) * 1e6,
                "max_us": max(per_call) * 1e6,
            }
        )
    ref = rows[0]["median_us"] if rows else 1.0
    width = max(len(r["case"]) for r in rows) if rows else 4
    print(f"\n{title}  ({repeat} rounds x {number} calls; microseconds per call)")
    print(f"  {'case':<{width}}  {'median':>8}  {'min':>8}  {'max':>8}  {'x ref':>7}")
    for r in rows:
        print(
            f"  {r['case']:<{width}}  {r['median_us']:8.3f}  {r['min_us']:8.3f}  "
            f"{r['max_us']:8.3f}  {r['median_us'] / ref:7.1f}"
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="benchmark names (bench_<name>.py); default all")
    parser.add_argument("--repeat", type=int, default=9, help="rounds per case (median of them)")
    parser.add_argument("--number", type=int, default=10000, help="calls per round")
    args = parser.parse_args(argv)
    paths = sorted(HERE.glob("bench_*.py"))
    if args.names:
        wanted = {f"bench_{n.removeprefix('bench_').removesuffix('.py')}" for n in args.names}
        paths = [p for p in paths if p.stem in wanted]
        missing = wanted - {p.stem for p in paths}
        if missing:
            print(f"unknown benchmark(s): {', '.join(sorted(missing))}", file=sys.stderr)
            return 2
    print(f"Python {sys.version.split()[0]} on {sys.platform}")
    for path in paths:
        module = load(path)
        report(module.TITLE, module.cases(), args.repeat, args.number)
    return 0


if __name__ == "__main__":
    sys.exit(main())
