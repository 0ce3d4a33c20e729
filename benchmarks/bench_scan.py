"""W10 and W11: ``scan``, Theano's symbolic loop, beside every peer's loop (issue 14).

W10 runs a tanh RNN ``h_t = tanh(h_{t-1} W + x_t U + b)`` (the issue's ``W h + U x`` with the
weights acting on the right, so one formula serves a vector state and a batch of row
states) for T = 1,000 steps at two sizes: batch 1 with hidden 64 (the state a vector, the
step two gemv: per-step overhead dominates) and batch 32 with hidden 256 (the step two
gemm: arithmetic dominates); the input size equals the hidden size. ``forward`` returns
every state (T, ...); ``fwd+grad`` returns the gradient of ``sum(h)`` over all steps with
respect to ``W``, ``U`` and ``b``. The engines, side by side in one run:

- NumPy: a Python loop (the reference); for the gradient the forward loop, then a
  hand-written backward loop over the recurrence (the weight gradients summed over the
  steps by one product each after the loop).
- opgraph and PyTensor (C and Numba linkers): the same Theano 1.0 code,
  ``scan(step, sequences=x, outputs_info=h0, non_sequences=[W, U, b])`` and ``grad``.
- JAX: ``lax.scan`` under ``jit``, and ``jit(grad(...))``.
- PyTorch (CPU), when installed: a Python loop, with autograd for the gradient.

W11 measures compiling scan: the cold compile of W10's forward+gradient function in fresh
processes with an empty compile cache (split into build, ``function()``, rewrite, link and
the first call, as W5 does), and, in this process, the rewrite time of the gradient of a
scan with 10 recurrent (sit_sot) outputs: the rewrites that move work out of loops and
prune them must stay fast on large loop graphs.

opgraph rows say why they are skipped while ``opgraph.scan`` does not exist. Run as
``python bench_scan.py --child '<json>'`` this file is W11's child process: it compiles
once and prints one ``BENCH-RESULT {json}`` line.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from bench_compile import (  # noqa: E402
    RESULT_MARK,
    _cache_env,
    _phase,
    _profile_times,
    spawn,
)
from bench_training import theano_api  # noqa: E402
from harness import (  # noqa: E402
    Context,
    Row,
    Table,
    close_check,
    error_text,
    norm_check,
    opgraph_best_linker,
    opgraph_engines,
    opgraph_mode,
    pytensor_mode,
)
from timing import Timing, measure  # noqa: E402

WORKLOADS = {
    "W10": "tanh RNN scan, T = 1000 steps: forward and forward+gradient",
    "W11": "compiling scan: cold forward+gradient compile, rewrite time of a 10-output grad",
}

STEPS = 1000
#: (case label, batch or None for a vector state, hidden size = input size).
SIZES = (("b1 h64", None, 64), ("b32 h256", 32, 256))
#: Sit-sot outputs of W11's rewrite-time scan, and its state size.
MANY_OUTPUTS, MANY_SIZE = 10, 16

# --------------------------------------------------------------------------- data


def rnn_data(batch: int | None, hidden: int, steps: int = STEPS, seed: int = 0) -> dict[str, Any]:
    """Inputs ``x`` (steps[, batch], hidden), ``h0`` and weights scaled so ``tanh`` does not
    saturate (the gradient stays informative over 1,000 steps)."""
    rng = np.random.default_rng(seed)
    state = (hidden,) if batch is None else (batch, hidden)
    scale = 1.0 / np.sqrt(hidden)
    return {
        "x": rng.standard_normal((steps, *state)),
        "h0": 0.1 * rng.standard_normal(state),
        "W": scale * rng.standard_normal((hidden, hidden)),
        "U": scale * rng.standard_normal((hidden, hidden)),
        "b": 0.1 * rng.standard_normal(hidden),
    }


ARG_NAMES = ("x", "h0", "W", "U", "b")


def _args(data: dict[str, Any]) -> tuple[np.ndarray, ...]:
    return tuple(data[k] for k in ARG_NAMES)


# --------------------------------------------------------------------------- NumPy


def numpy_forward(
    x: np.ndarray, h0: np.ndarray, W: np.ndarray, U: np.ndarray, b: np.ndarray
) -> np.ndarray:
    """Every state of the RNN, by a Python loop: (steps, ...) like ``scan``'s output."""
    hs = np.empty((len(x), *h0.shape))
    h = h0
    for t in range(len(x)):
        a = h @ W
        a += x[t] @ U
        a += b
        h = np.tanh(a, out=hs[t])
    return hs


def numpy_grad(
    x: np.ndarray, h0: np.ndarray, W: np.ndarray, U: np.ndarray, b: np.ndarray
) -> list[np.ndarray]:
    """``[dW, dU, db]`` of ``sum(h)``: the forward loop, then backpropagation through time
    by hand (a loop over the recurrence; the weight gradients as one product each)."""
    hs = numpy_forward(x, h0, W, U, b)
    da = np.empty_like(hs)
    dh = np.zeros_like(h0)
    wt = W.T
    for t in range(len(x) - 1, -1, -1):
        dh += 1.0  # d sum(h) / d h_t, plus what flows back from h_{t+1}
        g = da[t]
        np.multiply(hs[t], hs[t], out=g)
        np.subtract(1.0, g, out=g)
        g *= dh
        dh = g @ wt
    hidden = h0.shape[-1]
    prev = np.concatenate([h0[None], hs[:-1]]).reshape(-1, hidden)
    flat_da = da.reshape(-1, hidden)
    return [prev.T @ flat_da, x.reshape(-1, hidden).T @ flat_da, flat_da.sum(axis=0)]


# --------------------------------------------------------------------------- Theano API


@contextlib.contextmanager
def _quiet_pytensor(api: str) -> Iterator[None]:
    """Silence PyTensor's warning that ``scan``'s Theano-style ``(outputs, updates)`` return
    will change: the peers run the same Theano 1.0 code as opgraph on purpose."""
    with warnings.catch_warnings():
        if api == "pytensor":
            warnings.filterwarnings("ignore", "Scan return signature", DeprecationWarning)
        yield


def rnn_graph(api: str, batch: int | None, grad: bool) -> tuple[list[Any], list[Any]]:
    """W10's graph in Theano 1.0 code for ``opgraph`` or ``pytensor``: (inputs, outputs)."""
    th, T = theano_api(api)
    x = T.dmatrix("x") if batch is None else T.dtensor3("x")
    h0 = T.dvector("h0") if batch is None else T.dmatrix("h0")
    W, U, b = T.dmatrix("W"), T.dmatrix("U"), T.dvector("b")

    def step(x_t: Any, h_prev: Any, W: Any, U: Any, b: Any) -> Any:
        return T.tanh(T.dot(h_prev, W) + T.dot(x_t, U) + b)

    with _quiet_pytensor(api):
        hs, _ = th.scan(step, sequences=x, outputs_info=h0, non_sequences=[W, U, b])
    outputs = list(th.grad(hs.sum(), [W, U, b])) if grad else [hs]
    return [x, h0, W, U, b], outputs


def many_output_graph(api: str) -> tuple[list[Any], list[Any]]:
    """W11's rewrite-time graph: a scan with ``MANY_OUTPUTS`` coupled recurrent vectors,
    and the gradient of the sum of their sums with respect to every input."""
    th, T = theano_api(api)
    x = T.dmatrix("x")
    h0s = [T.dvector(f"h0_{i}") for i in range(MANY_OUTPUTS)]
    ws = [T.dvector(f"w_{i}") for i in range(MANY_OUTPUTS)]

    def step(x_t: Any, *args: Any) -> list[Any]:
        hs, w = args[:MANY_OUTPUTS], args[MANY_OUTPUTS:]
        return [
            T.tanh(hs[i] * w[i] + hs[(i + 1) % MANY_OUTPUTS] + x_t) for i in range(MANY_OUTPUTS)
        ]

    with _quiet_pytensor(api):
        outs, _ = th.scan(step, sequences=x, outputs_info=h0s, non_sequences=ws)
    cost = sum(o.sum() for o in outs)
    wrt = [x, *h0s, *ws]
    return wrt, list(th.grad(cost, wrt))


def _theano_function(api: str, spec: str, inputs: list[Any], outputs: list[Any], **kw: Any) -> Any:
    th, _ = theano_api(api)
    mode = opgraph_mode(spec) if api == "opgraph" else pytensor_mode(spec)
    return th.function(inputs, outputs, mode=mode, **kw)


def opgraph_has_scan() -> bool:
    """Whether this opgraph has ``scan`` (issue 14) yet."""
    import opgraph

    return hasattr(opgraph, "scan")


# --------------------------------------------------------------------------- JAX, PyTorch


def jax_functions() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``(forward, gradient)``: ``lax.scan`` under ``jit``, and ``jit(grad)`` of ``sum(h)``."""
    import jax
    import jax.numpy as jnp

    def forward(x: Any, h0: Any, W: Any, U: Any, b: Any) -> Any:
        def body(h: Any, x_t: Any) -> tuple[Any, Any]:
            h = jnp.tanh(h @ W + x_t @ U + b)
            return h, h

        return jax.lax.scan(body, h0, x)[1]

    def cost(W: Any, U: Any, b: Any, x: Any, h0: Any) -> Any:
        return forward(x, h0, W, U, b).sum()

    grad = jax.grad(cost, argnums=(0, 1, 2))

    def gradient(x: Any, h0: Any, W: Any, U: Any, b: Any) -> Any:
        return grad(W, U, b, x, h0)

    return jax.jit(forward), jax.jit(gradient)


def torch_functions() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``(forward, gradient)``: a Python loop over torch tensors, with autograd."""
    import torch

    def forward(x: Any, h0: Any, W: Any, U: Any, b: Any) -> Any:
        hs = []
        h = h0
        for t in range(x.shape[0]):
            h = torch.tanh(h @ W + x[t] @ U + b)
            hs.append(h)
        return torch.stack(hs)

    def run_forward(*args: Any) -> Any:
        with torch.no_grad():
            return forward(*args)

    def gradient(x: Any, h0: Any, W: Any, U: Any, b: Any) -> Any:
        params = [p.detach().requires_grad_() for p in (W, U, b)]
        forward(x, h0, *params).sum().backward()
        return [p.grad for p in params]

    return run_forward, gradient


def torch_status() -> str:
    """``ok``, or why PyTorch does not run (it is not one of the harness's peers)."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return "not installed"
    try:
        import torch  # noqa: F401
    except Exception as exc:
        return f"import failed ({error_text(exc)})"
    return "ok"


# --------------------------------------------------------------------------- W10


def _theano_engines(ctx: Context) -> list[tuple[str, str, str]]:
    """``(label, api, mode spec)``: opgraph's engines, then PyTensor C and Numba."""
    out = [(label, "opgraph", linker) for label, linker in opgraph_engines()]
    out += [(p.label, "pytensor", p.key) for p in ctx.available_peers(["pytensor_c"])]
    out += [(p.label, "pytensor", p.key) for p in ctx.available_peers(["pytensor_numba"])]
    return out


def _check(grad: bool, expected: Any) -> Callable[[Callable[[], Any]], str]:
    """The check column: states within 1e-9 of NumPy's (they lie in [-1, 1]), or the
    gradients' relative 2-norm difference within 1e-8."""

    def check(fn: Callable[[], Any]) -> str:
        got = fn()
        if grad:
            return norm_check([np.asarray(g) for g in got], expected)
        return close_check(np.asarray(got), expected, scale=1.0)

    return check


#: A warm call slower than this is timed once, not in rounds (opgraph's Python VM at
#: batch 32 runs each gemm through Python: rounds would take minutes).
SLOW_CALL_S = 2.0

#: Every engine runs for this long after its warm-up call before it is timed: engines that
#: adapt at run time (opgraph's thread teams choose one thread or several from the times of
#: their first calls; JIT tiers) are measured in their steady state, not while they settle,
#: which a --quick run of 15 calls would otherwise catch. The same for every engine. At
#: least SETTLE_CALLS calls: a thread team makes its first choice after four (two of each
#: mode), which 0.3 s of a 150 ms call (W10 at batch 32) does not cover.
SETTLE_S = 0.3
SETTLE_CALLS = 5


def _time(
    table: Table,
    case: str,
    engine: str,
    make: Callable[[], Callable[[], Any]],
    check: Callable[[Callable[[], Any]], str],
    timing: dict[str, Any],
) -> Row:
    """:meth:`Table.time`, except that an engine whose warm call takes more than
    ``SLOW_CALL_S`` gets that one call as its only sample (and a note saying so); the others
    run ``SETTLE_S`` seconds (and ``SETTLE_CALLS`` calls) before they are timed."""
    try:
        fn = make()
        verdict = check(fn)  # the first call: Numba and JAX compile here
        t0 = time.perf_counter()
        fn()  # the warm-up call
        warm = time.perf_counter() - t0
        if warm > SLOW_CALL_S:
            table.note(f"{case}: {engine} timed once (one warm call took {warm:.1f} s)")
            return table.add(Row(case, engine, timing=Timing.of([warm]), check=verdict))
        settle_until = time.perf_counter() + SETTLE_S
        settled = 0
        while settled < SETTLE_CALLS or time.perf_counter() < settle_until:
            fn()
            settled += 1
        result = measure(fn, **{**timing, "warmup": 0})
    except Exception as exc:
        return table.skip(case, engine, error_text(exc))
    return table.add(Row(case, engine, timing=result, check=verdict))


def _run_case(
    table: Table, ctx: Context, case: str, batch: int | None, hidden: int, grad: bool, timing: dict
) -> None:
    """One size and direction: NumPy first (the reference), then every engine."""
    data = rnn_data(batch, hidden)
    args = _args(data)
    numpy_fn = numpy_grad if grad else numpy_forward
    expected = numpy_fn(*args)
    check = _check(grad, expected)
    table.time(case, "NumPy (Python loop)", lambda: lambda: numpy_fn(*args), ref=True, **timing)

    for label, api, spec in _theano_engines(ctx):
        if api == "opgraph" and not opgraph_has_scan():
            table.skip(case, label, "skipped: this opgraph has no scan yet (issue 14)")
            continue

        def make(api: str = api, spec: str = spec) -> Callable[[], Any]:
            inputs, outputs = rnn_graph(api, batch, grad)
            f = _theano_function(api, spec, inputs, outputs if grad else outputs[0])
            return lambda: f(*args)

        _time(table, case, label, make, check, timing)

    jax_peer = ctx.peers.get("jax")
    if jax_peer is not None and jax_peer.ok:

        def make_jax() -> Callable[[], Any]:
            import jax
            import jax.numpy as jnp

            fn = jax_functions()[1 if grad else 0]
            jargs = [jnp.asarray(a) for a in args]
            return lambda: jax.block_until_ready(fn(*jargs))

        _time(table, case, "JAX lax.scan (jit)", make_jax, check, timing)

    if torch_status() == "ok":

        def make_torch() -> Callable[[], Any]:
            import torch

            fn = torch_functions()[1 if grad else 0]
            targs = [torch.from_numpy(a) for a in args]
            return lambda: fn(*targs)

        _time(table, case, "PyTorch CPU (Python loop)", make_torch, check, timing)


def run_w10(ctx: Context) -> Table:
    """Time per call of the whole 1,000-step loop, forward and forward+gradient."""
    rounds = ctx.repeat(full=7, quick=3)
    round_s = 0.05 if ctx.quick else 0.2
    table = Table(
        "W10",
        WORKLOADS["W10"],
        detail=f"time per call of the whole {STEPS}-step loop, {rounds} rounds of >= "
        f"{round_s:g} s after 1 check call and 1 warm-up; b1 = a vector state; check = "
        "states (max abs diff) or gradients dW, dU, db (relative 2-norm) against NumPy",
    )
    timing = {"repeat": rounds, "min_round_s": round_s, "warmup": 1}
    for label, batch, hidden in SIZES:
        for grad in (False, True):
            case = f"{label} {'fwd+grad' if grad else 'forward'}"
            _run_case(table, ctx, case, batch, hidden, grad, timing)
    if not opgraph_has_scan():
        table.note("opgraph rows skipped: opgraph.scan does not exist yet")
    _peer_notes(table, ctx)
    return table


def _peer_notes(table: Table, ctx: Context) -> None:
    missing = ctx.peer_summary()
    status = torch_status()
    if status != "ok":
        missing = f"{missing}; PyTorch: {status}" if missing else f"PyTorch: {status}"
    if missing:
        table.note(f"peers not run: {missing}")


# --------------------------------------------------------------------------- W11 child


def _child_theano(engine: str, times: dict[str, Any]) -> dict[str, Any]:
    """opgraph or PyTensor: import, build W10's gradient graph, compile, first call."""
    _phase("import")
    t0 = time.perf_counter()
    api = "opgraph" if engine == "opgraph" else "pytensor"
    spec = "auto" if engine == "opgraph" else engine
    theano_api(api)  # imports the library
    info: dict[str, Any] = {"linker": opgraph_best_linker() if api == "opgraph" else engine}
    times["import"] = time.perf_counter() - t0

    _phase("build")
    t0 = time.perf_counter()
    _, batch, hidden = SIZES[0]
    inputs, outputs = rnn_graph(api, batch, grad=True)
    times["build"] = time.perf_counter() - t0

    _phase("compile")
    t0 = time.perf_counter()
    f = _theano_function(api, spec, inputs, outputs, profile=True)
    times["compile"] = time.perf_counter() - t0
    times.update(_profile_times(f.profile))
    if "rewrite" in times and "link" in times:
        times["other"] = max(0.0, times["compile"] - times["rewrite"] - times["link"])
    info["nodes"] = len(f.maker.fgraph.apply_nodes)

    _phase("first call")
    args = _args(rnn_data(batch, hidden))
    t0 = time.perf_counter()
    got = f(*args)
    times["first_call"] = time.perf_counter() - t0
    info["check"] = norm_check([np.asarray(g) for g in got], numpy_grad(*args))
    return info


def _child_jax(times: dict[str, Any]) -> dict[str, Any]:
    """JAX: import (x64, persistent cache), trace and lower, compile, first call."""
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

    _phase("build")
    t0 = time.perf_counter()
    _, batch, hidden = SIZES[0]
    args = _args(rnn_data(batch, hidden))
    jargs = [jnp.asarray(a) for a in args]
    lowered = jax_functions()[1].lower(*jargs)
    times["build"] = time.perf_counter() - t0

    _phase("compile")
    t0 = time.perf_counter()
    compiled = lowered.compile()
    times["compile"] = time.perf_counter() - t0

    _phase("first call")
    t0 = time.perf_counter()
    got = jax.block_until_ready(compiled(*jargs))
    times["first_call"] = time.perf_counter() - t0
    return {"linker": "xla", "check": norm_check([np.asarray(g) for g in got], numpy_grad(*args))}


def child_main(spec: dict[str, Any]) -> dict[str, Any]:
    """Measure one cold compile of W10's gradient function; never raises."""
    times: dict[str, Any] = {}
    try:
        if spec["engine"] == "jax":
            info = _child_jax(times)
        else:
            info = _child_theano(spec["engine"], times)
    except BaseException as exc:  # RecursionError included: it is a result here
        return {"times": times, "error": error_text(exc)}
    return {"times": times, **info}


# --------------------------------------------------------------------------- W11


#: Cold-compile phases shown, in order: (key, case label).
COLD_PHASES = (
    ("build", "cold: build + grad"),
    ("compile", "cold: function()"),
    ("rewrite", "cold:   rewrite"),
    ("link", "cold:   link"),
    ("first_call", "cold: first call"),
    ("total", "cold: function() + first call"),
)


def _cold_compile(table: Table, ctx: Context, repeat: int, peer_repeat: int) -> None:
    """Rows for the cold compile of W10's gradient function, per engine and phase."""
    engines = [(f"opgraph FAST_RUN [{opgraph_best_linker()}]", "opgraph")]
    engines += [(p.label, p.key) for p in ctx.available_peers()]
    collected: dict[str, dict[str, Timing]] = {}
    skipped: list[Row] = []
    for label, engine in engines:
        if engine == "opgraph" and not opgraph_has_scan():
            skipped.append(Row(COLD_PHASES[1][1], label, status="skipped: no opgraph.scan yet"))
            continue
        results = []
        for _ in range(repeat if engine == "opgraph" else peer_repeat):
            with tempfile.TemporaryDirectory(prefix="opgraph-bench-cache-") as folder:
                results.append(
                    spawn({"engine": engine}, _cache_env(engine, folder), 300.0, __file__)
                )
        ok = [r for r in results if "error" not in r]
        if not ok:
            skipped.append(Row(COLD_PHASES[1][1], label, status=results[0]["error"]))
            continue
        for r in ok:  # Numba compiles at the first call: the sum is compile-to-result
            if "compile" in r["times"] and "first_call" in r["times"]:
                r["times"]["total"] = r["times"]["compile"] + r["times"]["first_call"]
        if len(ok) < len(results):
            error = next(r["error"] for r in results if "error" in r)
            table.note(f"{label}, cold compile: {len(results) - len(ok)} run(s) failed: {error}")
        collected[label] = {
            key: Timing.of([r["times"][key] for r in ok])
            for key, _ in COLD_PHASES
            if all(key in r["times"] for r in ok)
        }
        checks = {r.get("check", "") for r in ok}
        nodes = ok[0].get("nodes")
        table.note(
            f"{label}, cold compile: first call check {', '.join(sorted(checks))}"
            + (f"; {nodes} nodes after rewriting" if nodes is not None else "")
        )
    for key, case in COLD_PHASES:
        for label, timings in collected.items():
            if key in timings:
                table.add(Row(case, label, timing=timings[key]))
    table.rows.extend(skipped)


def _rewrite_time(table: Table, ctx: Context, repeat: int) -> None:
    """Rows for rewriting (and linking) the gradient of a 10-output scan, in this process,
    after one untimed compile that absorbs one-time costs."""
    engines: list[tuple[str, str, str]] = [
        (f"opgraph FAST_RUN [{opgraph_best_linker()}]", "opgraph", "auto")
    ]
    engines += [
        (p.label, "pytensor", p.key) for p in ctx.available_peers(["pytensor_c", "pytensor_numba"])
    ]
    case_rewrite = f"{MANY_OUTPUTS}-output grad: rewrite"
    case_compile = f"{MANY_OUTPUTS}-output grad: function()"
    compile_rows = []
    for label, api, spec in engines:
        if api == "opgraph" and not opgraph_has_scan():
            table.skip(case_rewrite, label, "skipped: no opgraph.scan yet")
            continue
        try:
            samples: dict[str, list[float]] = {"rewrite": [], "compile": []}
            nodes = 0
            for k in range(repeat + 1):
                inputs, outputs = many_output_graph(api)
                t0 = time.perf_counter()
                f = _theano_function(api, spec, inputs, outputs, profile=True)
                elapsed = time.perf_counter() - t0
                if k == 0:  # one-time costs: rewrite databases, lazy imports, C caches
                    continue
                samples["compile"].append(elapsed)
                samples["rewrite"].append(_profile_times(f.profile).get("rewrite", float("nan")))
                nodes = len(f.maker.fgraph.apply_nodes)
        except Exception as exc:
            table.skip(case_rewrite, label, error_text(exc))
            continue
        table.add(Row(case_rewrite, label, timing=Timing.of(samples["rewrite"])))
        compile_rows.append(Row(case_compile, label, timing=Timing.of(samples["compile"])))
        table.note(f"{label}, {MANY_OUTPUTS}-output grad: {nodes} nodes after rewriting")
    table.rows.extend(compile_rows)


def run_w11(ctx: Context) -> Table:
    """Cold compile of W10's gradient (fresh processes) and a 10-output scan's rewrite time."""
    repeat = ctx.repeat(full=3, quick=1)
    peer_repeat = 1
    table = Table(
        "W11",
        WORKLOADS["W11"],
        detail=f"cold: W10's b1 h64 fwd+grad function, {repeat} fresh process(es) per engine "
        f"(peers: {peer_repeat}), each with an empty compile cache; {MANY_OUTPUTS}-output grad:"
        f" {repeat} compiles in this process after an untimed one; seconds",
        ratio_header="",
    )
    _rewrite_time(table, ctx, repeat)
    _cold_compile(table, ctx, repeat, peer_repeat)
    if not opgraph_has_scan():
        table.note("opgraph rows skipped: opgraph.scan does not exist yet")
    missing = ctx.peer_summary()
    if missing:
        table.note(f"peers not run: {missing}")
    return table


def run(workload: str, ctx: Context) -> Table:
    """W10 (RNN forward and gradient per call) or W11 (compiling scan)."""
    return run_w10(ctx) if workload == "W10" else run_w11(ctx)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        result = child_main(json.loads(sys.argv[2]))
        print(RESULT_MARK + json.dumps(result), flush=True)
        sys.exit(0)
    print("usage: run it through benchmarks/run.py --only W10,W11", file=sys.stderr)
    sys.exit(2)
