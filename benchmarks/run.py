"""Run opgraph's speed suite (workloads W1-W19) and print medians beside NumPy and peers.

Usage::

    python benchmarks/run.py                      # every workload, full size (~10 min)
    python benchmarks/run.py --quick              # fewer repeats and steps (~2 min)
    python benchmarks/run.py --only W1,W3         # some workloads
    python benchmarks/run.py --json out.json      # also write the results as JSON
    python benchmarks/run.py overhead             # the workloads of bench_overhead.py
    python benchmarks/run.py --busy               # with another process spinning on a core

Each ``bench_<family>.py`` declares ``WORKLOADS`` (id -> title) and ``run(id, ctx)``,
which returns a table of rows: median, min and max time over the repeats, the ratio to
NumPy's median in the same run (time / NumPy time: below 1 is faster), and a check of
the result against NumPy's. opgraph runs with ``FAST_RUN`` and the best installed linker
(named in brackets), and with the Python VM (``vm``) when that is not the best. PyTensor
(C and Numba linkers) and JAX columns appear when they are installed; otherwise they are
reported as "not installed". Nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import re
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from harness import Context, Table, detect_peers, environment, error_text  # noqa: E402


def load_families() -> dict[str, ModuleType]:
    """Every ``benchmarks/bench_<family>.py``, imported, by family name."""
    families = {}
    for path in sorted(HERE.glob("bench_*.py")):
        families[path.stem.removeprefix("bench_")] = importlib.import_module(path.stem)
    return families


def workload_index(families: dict[str, ModuleType]) -> dict[str, ModuleType]:
    """Workload id (``W1``) -> the module that runs it, in numeric order."""
    index = {}
    for module in families.values():
        for wid in getattr(module, "WORKLOADS", {}):
            index[wid.upper()] = module
    return dict(sorted(index.items(), key=lambda kv: int(re.sub(r"\D", "", kv[0]) or 0)))


def select(index: dict[str, ModuleType], only: str | None, names: Sequence[str]) -> list[str] | str:
    """The workload ids to run, or an error message."""
    chosen = list(index)
    if only:
        wanted = [w.strip().upper() for w in only.split(",") if w.strip()]
        unknown = [w for w in wanted if w not in index]
        if unknown:
            return f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(index)}"
        chosen = [w for w in chosen if w in wanted]
    if names:
        families = {n.removeprefix("bench_").removesuffix(".py") for n in names}
        known = {m.__name__.removeprefix("bench_") for m in index.values()}
        unknown = sorted(families - known)
        if unknown:
            return f"unknown benchmark family(ies) {', '.join(unknown)}; known: {sorted(known)}"
        chosen = [w for w in chosen if index[w].__name__.removeprefix("bench_") in families]
    return chosen


def summarize_warnings(caught: Sequence[warnings.WarningMessage]) -> list[str]:
    """One line per distinct warning; "no kernel for <Op>" fallbacks folded into one line."""
    lines: list[str] = []
    fallbacks: dict[str, list[str]] = {}
    for w in caught:
        text = str(w.message).splitlines()[0] if str(w.message) else ""
        category = w.category.__name__
        match = re.search(r"no kernel for (\S+)", text)
        if match:
            ops = fallbacks.setdefault(category, [])
            if match.group(1) not in ops:
                ops.append(match.group(1))
            continue
        line = f"{category}: {text}"[:200]
        if line not in lines:
            lines.append(line)
    for category, ops in fallbacks.items():
        lines.append(f"{category}: no backend kernel (runs perform) for {', '.join(ops)}")
    return lines


@contextlib.contextmanager
def busy_core(enabled: bool) -> Iterator[int | None]:
    """With ``enabled``, keep one core busy in another process while the suite runs (the
    load of most laptops, CI runners and shared servers); yields its pid, or None."""
    if not enabled:
        yield None
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)  # let it take its core before anything is timed
        yield spinner.pid
    finally:
        spinner.kill()
        spinner.wait()


def print_header(ctx: Context, env: dict[str, object]) -> None:
    """The versions, linkers and peers this run measured."""
    load = env.get("load_average")
    print(
        f"opgraph speed suite{' (--quick)' if ctx.quick else ''}: Python {env['python']}, "
        f"NumPy {env['numpy']}, {env['cpus']} CPUs, {env['platform']}"
        + (f", load average {load:.2f} at start" if isinstance(load, float) else "")
    )
    print(
        f"opgraph {env.get('opgraph')}: linkers installed {env.get('opgraph_linkers')}, "
        f"FAST_RUN uses [{env.get('opgraph_fast_run_linker')}]"
    )
    if env.get("busy_pid"):
        print(f"  --busy: process {env['busy_pid']} spins on one core for the whole run")
    for peer in ctx.peers.values():
        print(f"  peer {peer.label:<15} {peer.status}")
    print("ratio = median time / NumPy's median time in this run (below 1.00x is faster)")


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line, run the chosen workloads, print (and save) the tables."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "names", nargs="*", help="benchmark families to run (bench_<name>.py); default all"
    )
    parser.add_argument("--quick", action="store_true", help="fewer repeats and steps")
    parser.add_argument("--only", metavar="W1,W3", help="comma-separated workload ids")
    parser.add_argument("--json", metavar="PATH", help="also write the results to PATH")
    parser.add_argument("--repeat", type=int, help="rounds per measurement (overrides all)")
    parser.add_argument(
        "--no-peers", action="store_true", help="do not run PyTensor or JAX even if installed"
    )
    parser.add_argument(
        "--busy", action="store_true", help="keep one core spinning in another process"
    )
    args = parser.parse_args(argv)
    with busy_core(args.busy) as busy_pid:
        return run_suite(args, busy_pid)


def run_suite(args: argparse.Namespace, busy_pid: int | None) -> int:
    """Run the chosen workloads, print (and save) the tables."""

    index = workload_index(load_families())
    chosen = select(index, args.only, args.names)
    if isinstance(chosen, str):
        print(chosen, file=sys.stderr)
        return 2
    ctx = Context(quick=args.quick, repeat_override=args.repeat)
    ctx.peers = detect_peers(enabled=not args.no_peers)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = environment(ctx)  # loads opgraph and its plugins
    env["busy_pid"] = busy_pid
    print_header(ctx, env)
    for text in summarize_warnings(caught):
        print(f"  warning: {text}")

    tables: list[Table] = []
    t_start = time.perf_counter()
    for wid in chosen:
        module = index[wid]
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                table = module.run(wid, ctx)
            except Exception as exc:  # a workload's bug must not hide the others' numbers
                table = Table(wid, module.WORKLOADS[wid])
                table.note(error_text(exc))
        for text in summarize_warnings(caught):
            table.note(f"warning: {text}")
        table.note(f"workload took {time.perf_counter() - t0:.1f} s")
        tables.append(table)
        print()
        print(table.render(), flush=True)
    print(f"\ntotal {time.perf_counter() - t_start:.1f} s")

    if args.json:
        payload = {"environment": env, "workloads": [t.to_dict() for t in tables]}
        Path(args.json).write_text(json.dumps(payload, indent=2, default=str) + "\n")
        print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
