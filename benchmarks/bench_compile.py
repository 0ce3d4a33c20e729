"""W5, W8, W16 and W19: compile times, each measured in a fresh Python process.

W5 compiles W3's MLP training function (forward, ``grad``, six SGD updates) against an
empty compile cache (``OPGRAPH_CACHE_DIR`` a new temporary folder: "cold"), then again in
another process against the same folder ("warm"). W16 does the same for the README's
logistic-regression example (``examples/02_logistic_regression.py``: its three functions
``train``, ``predict`` and ``get_cost``, compiled one after the other as the example does;
issue 12's target is under 3 s cold on a quiet machine). W19 does the same for a plugin's
own C kernel: ``cube(x)`` of ``tests/example_plugin`` (the package ``docs/plugin-guide.md``
builds; install it with ``pip install ./tests/example_plugin``) on a float64 matrix, compiled
with the ``c`` linker, whose link phase is that one kernel's build (issue 12: under 2 s
cold). W8 compiles an N-op elementwise chain
(N = 250, 1,000, 4,000, 16,000; each process with an empty cache, after a trivial ``setup``
compile that absorbs one-time costs) to expose rewrites that grow quadratically and
recursion that hits Python's limit; the growth column is the exponent k in
time ~ N^k between consecutive sizes.

The phases: ``import`` (the library and its plugins), ``build`` (the symbolic graph, and
``grad`` for W5), ``function()`` (the whole compile), and within it ``rewrite`` (the
mode's rewrites, ``ProfileStats.rewriter_time``) and ``link`` (the linker turning the
graph into thunks, C code generation and compilation included,
``ProfileStats.linker_time``), then the ``first call``. PyTensor reports its optimizer and
linker times the same way; for JAX, ``build`` is tracing and ``function()`` is
``jit(...).lower(...).compile()``.

Run as ``python bench_compile.py --child '<json>'`` it is the child process: it measures
one compile and prints one ``BENCH-RESULT {json}`` line.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from harness import (  # noqa: E402
    Context,
    Row,
    Table,
    error_text,
    opgraph_best_linker,
    opgraph_mode,
    pytensor_mode,
)
from timing import Timing  # noqa: E402

WORKLOADS = {
    "W5": "compile time of W3's MLP training function, cold and warm cache",
    "W8": "compile time of an N-op elementwise chain",
    "W16": "compile time of the README's logistic-regression example, cold and warm cache",
    "W19": "compile time of a plugin's C kernel (the example plugin's Cube), cold and warm",
}

RESULT_MARK = "BENCH-RESULT "
PHASE_MARK = "BENCH-PHASE "
CHAIN_SIZES = (250, 1000, 4000, 16000)
#: The plugin W19 compiles (tests/example_plugin, the plugin guide's package).
PLUGIN = "opgraph-example-plugin"

#: Phases in the order they are shown: (key, label).
PHASES = (
    ("import", "import"),
    ("setup", "setup"),
    ("build", "build"),
    ("compile", "function()"),
    ("rewrite", "  rewrite"),
    ("link", "  link"),
    ("other", "  other"),
    ("first_call", "first call"),
)

# --------------------------------------------------------------------------- child side


def _phase(name: str) -> None:
    print(f"{PHASE_MARK}{name}", flush=True)


def _profile_times(profile: Any) -> dict[str, float]:
    """Rewrite and link seconds of an opgraph or PyTensor ProfileStats, where recorded
    (PyTensor 3 names the rewrite time ``rewriting_time``, PyTensor 2 ``rewriter_time``,
    Theano ``optimizer_time``)."""
    out = {}
    for name in ("rewriter_time", "rewriting_time", "optimizer_time"):
        value = getattr(profile, name, None)
        if isinstance(value, int | float):
            out["rewrite"] = float(value)
            break
    link = getattr(profile, "linker_time", None)
    if isinstance(link, int | float):
        out["link"] = float(link)
    return out


def _child_theano(engine: str, spec: dict[str, Any], times: dict[str, Any]) -> dict[str, Any]:
    """opgraph or PyTensor: import, build, compile with a profile, first call."""
    import numpy as np

    _phase("import")
    t0 = time.perf_counter()
    if engine == "opgraph":
        import opgraph  # noqa: F401

        linker = opgraph_best_linker()  # loads the plugins
        mode = opgraph_mode("auto")
        api = "opgraph"
    else:
        import pytensor  # noqa: F401

        mode = pytensor_mode(engine)
        linker = "cvm" if engine == "pytensor_c" else "numba"
        api = "pytensor"
    from bench_training import theano_api

    th, T = theano_api(api)
    times["import"] = time.perf_counter() - t0
    info: dict[str, Any] = {"linker": linker}

    if spec.get("setup"):
        # A trivial compile first: one-time costs (rewrite databases, lazy imports) land
        # here instead of in the measured compile, so the growth with N is the graph's own.
        _phase("setup")
        t0 = time.perf_counter()
        v = T.dvector("v")
        th.function([v], v + 1, mode=mode)(np.zeros(2))
        times["setup"] = time.perf_counter() - t0

    if spec["what"] == "logreg":
        info.update(_logreg_example(th, T, mode, times))
        return info
    if spec["what"] == "plugin":
        info.update(_plugin_kernel(th, T, times))
        return info

    _phase("build")
    t0 = time.perf_counter()
    if spec["what"] == "mlp":
        from bench_training import mlp_data, mlp_graph

        data = mlp_data()
        inputs, outputs, updates, _ = mlp_graph(api, data)
        args: tuple[Any, ...] = (data["x"], data["y"])
        expected = None
    else:
        from bench_overhead import chain

        x = T.dvector("x")
        inputs, outputs, updates = [x], chain(T, x, spec["n"]), []
        value = np.linspace(-1.0, 1.0, 10)
        args = (value,)
        expected = chain(np, value, spec["n"])
    times["build"] = time.perf_counter() - t0

    _phase("compile")
    t0 = time.perf_counter()
    f = th.function(inputs, outputs, updates=updates, mode=mode, profile=True)
    times["compile"] = time.perf_counter() - t0
    times.update(_profile_times(f.profile))
    if "rewrite" in times and "link" in times:
        # Cloning into a FunctionGraph, input checks, deep copies of outputs, the VM.
        times["other"] = max(0.0, times["compile"] - times["rewrite"] - times["link"])
    fgraph = getattr(f.maker, "fgraph", None)
    if fgraph is not None:
        info["nodes"] = len(fgraph.apply_nodes)

    _phase("first call")
    t0 = time.perf_counter()
    result = f(*args)
    times["first_call"] = time.perf_counter() - t0
    if expected is not None:
        err = float(np.max(np.abs(np.asarray(result) - expected)))
        info["max_abs_error"] = err
    return info


def _logreg_example(th: Any, T: Any, mode: Any, times: dict[str, Any]) -> dict[str, Any]:
    """The README's logistic-regression example: build, compile its three functions (the
    phases summed over them), then one call of each."""
    import numpy as np
    from bench_training import LOGREG_L2, LOGREG_LR, logreg_data

    _phase("build")
    t0 = time.perf_counter()
    data = logreg_data()
    x = T.dmatrix("x")
    y = T.dvector("y")
    w = th.shared(np.array(data["w"]), name="w")
    b = th.shared(float(data["b"]), name="b")
    p_1 = 1 / (1 + T.exp(-T.dot(x, w) - b))
    prediction = p_1 > 0.5
    xent = -y * T.log(p_1) - (1 - y) * T.log(1 - p_1)
    cost = xent.mean() + LOGREG_L2 * (w**2).sum()
    gw, gb = th.grad(cost, [w, b])
    times["build"] = time.perf_counter() - t0

    _phase("compile")
    t0 = time.perf_counter()
    updates = ((w, w - LOGREG_LR * gw), (b, b - LOGREG_LR * gb))
    functions = [
        th.function([x, y], [prediction, xent], updates=updates, mode=mode, profile=True),
        th.function([x], prediction, mode=mode, profile=True),
        th.function([x, y], cost, mode=mode, profile=True),
    ]
    times["compile"] = time.perf_counter() - t0
    for f in functions:
        for key, value in _profile_times(f.profile).items():
            times[key] = times.get(key, 0.0) + value
    if "rewrite" in times and "link" in times:
        times["other"] = max(0.0, times["compile"] - times["rewrite"] - times["link"])
    nodes = [len(f.maker.fgraph.apply_nodes) for f in functions if hasattr(f.maker, "fgraph")]

    _phase("first call")
    t0 = time.perf_counter()
    train, predict, get_cost = functions
    train(data["x"], data["y"])
    predict(data["x"])
    final = float(get_cost(data["x"], data["y"]))
    times["first_call"] = time.perf_counter() - t0
    return {"nodes": "+".join(map(str, nodes)), "finite_cost": bool(np.isfinite(final))}


def _plugin_kernel(th: Any, T: Any, times: dict[str, Any]) -> dict[str, Any]:
    """The example plugin's ``cube(x)`` on a float64 matrix, compiled with the ``c`` linker:
    its link phase builds the plugin's one C kernel (cold) or loads it (warm)."""
    import numpy as np

    from example_plugin import cube
    from opgraph.compile.mode import Mode

    _phase("build")
    t0 = time.perf_counter()
    x = T.dmatrix("x")
    out = cube(x)
    times["build"] = time.perf_counter() - t0

    _phase("compile")
    t0 = time.perf_counter()
    f = th.function([x], out, mode=Mode(linker="c"), profile=True)
    times["compile"] = time.perf_counter() - t0
    times.update(_profile_times(f.profile))
    if "rewrite" in times and "link" in times:
        times["other"] = max(0.0, times["compile"] - times["rewrite"] - times["link"])

    _phase("first call")
    value = np.linspace(-2.0, 2.0, 12).reshape(3, 4)
    t0 = time.perf_counter()
    result = f(value)
    times["first_call"] = time.perf_counter() - t0
    # The profile records which implementation each node got: "c" or "Py" (perform).
    impls = sorted(set(getattr(f.profile, "apply_impl", {}).values()))
    return {
        "nodes": len(f.maker.fgraph.apply_nodes),
        "max_abs_error": float(np.max(np.abs(result - value**3))),
        "kernel": "+".join(impls) or "unknown",
    }


def _child_jax(spec: dict[str, Any], times: dict[str, Any]) -> dict[str, Any]:
    """JAX: import (x64, persistent cache), trace, lower + compile, first call."""
    import numpy as np

    _phase("import")
    t0 = time.perf_counter()
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    cache = os.environ.get("OPGRAPH_BENCH_JAX_CACHE")
    if cache:
        for key, value in (
            ("jax_compilation_cache_dir", cache),
            ("jax_persistent_cache_min_compile_time_secs", 0),
            ("jax_persistent_cache_min_entry_size_bytes", 0),
        ):
            with contextlib.suppress(AttributeError, KeyError, ValueError):
                jax.config.update(key, value)
    times["import"] = time.perf_counter() - t0

    if spec.get("setup"):
        _phase("setup")
        t0 = time.perf_counter()
        jax.block_until_ready(jax.jit(lambda v: v + 1)(jnp.zeros(2)))
        times["setup"] = time.perf_counter() - t0

    _phase("build")
    t0 = time.perf_counter()
    if spec["what"] == "mlp":
        from bench_training import jax_mlp_step, mlp_data

        data = mlp_data()
        fn = jax_mlp_step()
        args: tuple[Any, ...] = (
            [jnp.asarray(p) for p in data["params"]],
            jnp.asarray(data["x"]),
            jnp.asarray(data["y"]),
        )
    else:
        from bench_overhead import chain

        n = spec["n"]

        def fn(x: Any) -> Any:
            return chain(jnp, x, n)

        args = (jnp.asarray(np.linspace(-1.0, 1.0, 10)),)
    lowered = jax.jit(fn).lower(*args)
    times["build"] = time.perf_counter() - t0

    _phase("compile")
    t0 = time.perf_counter()
    compiled = lowered.compile()
    times["compile"] = time.perf_counter() - t0

    _phase("first call")
    t0 = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    times["first_call"] = time.perf_counter() - t0
    return {"linker": "xla"}


def child_main(spec: dict[str, Any]) -> dict[str, Any]:
    """Measure one compile described by ``spec`` (engine, what, n); never raises."""
    times: dict[str, Any] = {}
    try:
        if spec["engine"] == "jax":
            info = _child_jax(spec, times)
        else:
            info = _child_theano(spec["engine"], spec, times)
    except BaseException as exc:  # RecursionError included: it is a result here
        return {"times": times, "error": error_text(exc)}
    return {"times": times, **info}


# --------------------------------------------------------------------------- parent side


def spawn(
    spec: dict[str, Any], env_extra: dict[str, str], timeout: float, script: str = __file__
) -> dict[str, Any]:
    """Run ``script --child spec`` (a workload file whose ``child_main`` prints its result
    after RESULT_MARK) and return its result, or an ``error`` saying what happened."""
    env = os.environ.copy()
    env.update(env_extra)
    cmd = [sys.executable, str(Path(script).resolve()), "--child", json.dumps(spec)]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=HERE.parent,
        start_new_session=True,  # its own process group: a timeout ends the compilers too
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return {"error": f"timeout after {timeout:.0f} s in phase {_last_phase(out)}"}
    for line in reversed(out.splitlines()):
        if line.startswith(RESULT_MARK):
            return json.loads(line[len(RESULT_MARK) :])
    tail = (err.strip().splitlines() or ["(no output)"])[-1][:200]
    how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}"
    return {"error": f"child died ({how}) in phase {_last_phase(out)}: {tail}"}


def _last_phase(out: str) -> str:
    phases = [ln[len(PHASE_MARK) :] for ln in out.splitlines() if ln.startswith(PHASE_MARK)]
    return phases[-1] if phases else "start-up"


def _engines(ctx: Context) -> list[tuple[str, str]]:
    """``(label, engine key)`` of the engines to compile with."""
    engines = [(f"opgraph FAST_RUN [{opgraph_best_linker()}]", "opgraph")]
    engines += [(p.label, p.key) for p in ctx.available_peers()]
    return engines


def _cache_env(engine: str, folder: str) -> dict[str, str]:
    """Environment variables that point an engine's compile cache at ``folder``."""
    if engine == "opgraph":
        return {"OPGRAPH_CACHE_DIR": folder}
    if engine == "jax":
        return {"OPGRAPH_BENCH_JAX_CACHE": folder}
    flags = os.environ.get("PYTENSOR_FLAGS", "")
    flags = f"{flags},base_compiledir={folder}" if flags else f"base_compiledir={folder}"
    return {"PYTENSOR_FLAGS": flags, "NUMBA_CACHE_DIR": os.path.join(folder, "numba")}


def _phase_rows(
    table: Table, case_prefix: str, label: str, results: list[dict[str, Any]]
) -> dict[str, Timing]:
    """Rows for each phase recorded in ``results``; returns the Timings by phase key."""
    ok = [r for r in results if "error" not in r]
    failed = [r for r in results if "error" in r]
    out: dict[str, Timing] = {}
    if not ok:
        reason = failed[0]["error"] if failed else "no result"
        table.skip(f"{case_prefix}function()", label, reason)
        return out
    for key, _ in PHASES:
        samples = [r["times"][key] for r in ok if key in r.get("times", {})]
        if samples:
            out[key] = Timing.of(samples)
    if failed:
        where = case_prefix.strip(": ")
        table.note(f"{label}, {where}: {len(failed)} run(s) failed: {failed[0]['error']}")
    return out


def _share(part: Timing | None, total: Timing | None) -> str | None:
    if part is None or total is None or total.median <= 0:
        return None
    return f"{100 * part.median / total.median:.0f}%"


def run_w5(ctx: Context, workload: str = "W5", what: str = "mlp") -> Table:
    """Cold then warm compile of the MLP training function (W5; the logistic-regression
    example for W16), per engine, in fresh processes."""
    repeat = ctx.repeat(full=5, quick=2)
    peer_repeat = min(repeat, 1 if ctx.quick else 2)
    timeout = 300.0
    table = Table(
        workload,
        WORKLOADS[workload],
        detail=f"{repeat} cold+warm pairs of fresh processes (peers: {peer_repeat}); "
        "seconds per phase; share = part of function()",
        ratio_header="share",
    )
    collected: dict[str, dict[str, dict[str, Timing]]] = {"cold": {}, "warm": {}}
    nodes: dict[str, Any] = {}
    engines = _engines(ctx)
    if what == "logreg":  # the example is Theano code: JAX has no counterpart here
        engines = [(label, engine) for label, engine in engines if engine != "jax"]
    elif what == "plugin":  # an opgraph plugin: only opgraph runs it
        engines = [(f"opgraph [c] + {PLUGIN}", "opgraph")]
        if not _plugin_installed():
            table.skip("cold: function()", engines[0][0], f"{PLUGIN} is not installed")
            return table
    info: dict[str, set[str]] = {}
    for label, engine in engines:
        runs: dict[str, list[dict[str, Any]]] = {"cold": [], "warm": []}
        for _ in range(repeat if engine == "opgraph" else peer_repeat):
            with tempfile.TemporaryDirectory(prefix="opgraph-bench-cache-") as folder:
                env = _cache_env(engine, folder)
                spec = {"engine": engine, "what": what}
                runs["cold"].append(spawn(spec, env, timeout))
                runs["warm"].append(spawn(spec, env, timeout))
        for kind in ("cold", "warm"):
            ok = [r for r in runs[kind] if "error" not in r]
            if ok and "nodes" in ok[0]:
                nodes[label] = ok[0]["nodes"]
            for r in ok:
                if "kernel" in r:
                    info.setdefault("kernel", set()).add(f"{kind} {r['kernel']}")
                if "max_abs_error" in r:
                    info.setdefault("error", set()).add(f"{r['max_abs_error']:.0e}")
            scratch = Table("", "")
            collected[kind][label] = _phase_rows(scratch, f"{kind}: ", label, runs[kind])
            table.rows.extend(scratch.rows)
            table.notes.extend(scratch.notes)
    # Phase-major order: every engine under each phase, cold first.
    errors = list(table.rows)
    table.rows = []
    for kind in ("cold", "warm"):
        for key, phase_label in PHASES:
            for label, timings in collected[kind].items():
                timing = timings.get(key)
                if timing is None:
                    continue
                share = (
                    _share(timing, timings.get("compile"))
                    if key in ("rewrite", "link", "other")
                    else ""
                )
                table.add(Row(f"{kind}: {phase_label}", label, timing=timing, ratio=share))
    table.rows.extend(errors)
    if nodes:
        table.note("nodes after rewriting: " + ", ".join(f"{k} {v}" for k, v in nodes.items()))
    if what == "logreg":
        table.note("function() is train + predict + get_cost; issue 12's target: < 3 s cold")
    if what == "plugin":
        table.note(
            "link is the build (cold) or the load (warm) of the plugin's one C kernel; "
            "issue 12's target: < 2 s cold"
        )
        if info:
            table.note(
                "the node ran: "
                + ", ".join(sorted(info.get("kernel", ())))
                + "; max |cube(x) - x**3|: "
                + ", ".join(sorted(info.get("error", ())))
            )
    if opgraph_best_linker() in ("py", "vm"):
        table.note(
            "opgraph's Python linkers generate no code, so cold and warm differ only by the "
            "OS file cache"
        )
    missing = ctx.peer_summary()
    if missing:
        table.note(f"peers not run: {missing}")
    return table


def _growth(prev: tuple[int, Timing] | None, n: int, timing: Timing) -> str | None:
    if prev is None or prev[1].median <= 0 or timing.median <= 0:
        return None
    k = math.log(timing.median / prev[1].median) / math.log(n / prev[0])
    return f"N^{k:.2f}"


def run_w8(ctx: Context) -> Table:
    """Compile N-op chains in fresh processes; print phases and their growth with N."""
    repeat = ctx.repeat(full=3, quick=1)
    timeout = 90.0 if ctx.quick else 180.0
    table = Table(
        "W8",
        WORKLOADS["W8"],
        detail=f"{repeat} fresh process(es) per size, each with an empty compile cache; "
        "growth = k in time ~ N^k against the previous N",
        ratio_header="growth",
    )
    for label, engine in _engines(ctx):
        previous: dict[str, tuple[int, Timing]] = {}
        stopped = ""
        info = []
        for n in CHAIN_SIZES:
            case = f"N={n}"
            if stopped:
                table.skip(case, label, f"skipped: {stopped}")
                continue
            results = []
            for _ in range(repeat if engine == "opgraph" else 1):
                with tempfile.TemporaryDirectory(prefix="opgraph-bench-cache-") as folder:
                    spec = {"engine": engine, "what": "chain", "n": n, "setup": True}
                    results.append(spawn(spec, _cache_env(engine, folder), timeout))
            ok = [r for r in results if "error" not in r]
            if not ok:
                error = results[0]["error"]
                table.skip(case, label, error)
                stopped = f"N={n} failed"
                continue
            if ok[0].get("nodes") is not None:
                info.append(f"N={n}: {ok[0]['nodes']} nodes")
            err = max(r.get("max_abs_error", 0.0) for r in ok)
            for key, phase_label in PHASES:
                if key == "import":
                    continue
                samples = [r["times"][key] for r in ok if key in r["times"]]
                if not samples:
                    continue
                timing = Timing.of(samples)
                check = f"max err {err:.0e}" if key == "first_call" and engine != "jax" else ""
                table.add(
                    Row(
                        case,
                        f"{label}: {phase_label.strip()}",
                        timing=timing,
                        ratio=None if key == "setup" else _growth(previous.get(key), n, timing),
                        check=check,
                    )
                )
                previous[key] = (n, timing)
            slow = ok[0]["times"].get("compile", 0.0)
            if slow > timeout / 2:
                stopped = f"N={n} took {slow:.0f} s to compile"
        if info:
            table.note(f"{label} after rewriting: " + ", ".join(info))
    missing = ctx.peer_summary()
    if missing:
        table.note(f"peers not run: {missing}")
    return table


def _plugin_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("example_plugin") is not None


def run(workload: str, ctx: Context) -> Table:
    """W5, W8, W16 or W19."""
    if workload == "W16":
        return run_w5(ctx, "W16", "logreg")
    if workload == "W19":
        return run_w5(ctx, "W19", "plugin")
    return run_w5(ctx) if workload == "W5" else run_w8(ctx)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        result = child_main(json.loads(sys.argv[2]))
        print(RESULT_MARK + json.dumps(result), flush=True)
        sys.exit(0)
    print("usage: run it through benchmarks/run.py --only W5,W8", file=sys.stderr)
    sys.exit(2)
