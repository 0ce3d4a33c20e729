"""W-GPU: opgraph on a CUDA GPU beside the device's copy bandwidth, CuPy and JAX.

One run measures, side by side: the device-to-device copy bandwidth (CuPy ``copyto`` and
opgraph's ``GpuArray.copy``, counting bytes read plus written); opgraph's fused
elementwise kernels ``a + a**10`` and ``exp(x) * sin(x)`` on 2**26 float32 (GB/s and % of
the copy bandwidth); sums over axis 0, axis 1 and all of an 8192 x 8192 float32 matrix
(GB/s of bytes read, and % of the copy bandwidth); 2**24 uniform float32 random numbers
(``MRG_RandomStreams``' MRG31k3p on Theano's 15360 streams, checked bit for bit against
the CPU op, vs CuPy's and JAX's own generators, GB/s written); a 4096^3 sgemm (opgraph's cuBLAS call
vs ``cupy.matmul``, neither with TF32); and an MLP 784-1024-1024-10 training step (batch
1024, ReLU, softmax cross-entropy, SGD on GPU shared variables) vs ``jax.jit`` of the same
step, with float32 matmuls (``precision=HIGHEST``, the reference) and JAX's default
precision (TF32 on this hardware).

Every timing synchronizes the device before reading the clock: a round runs ``number``
calls back to back (launches overlap the host's work, as in a training loop), then waits
for the device; rows give the median time per call over the rounds. The ``vs peer``
column divides by each case's reference row (CuPy; JAX for the MLP). It needs a GPU and
PyCUDA (CuPy and JAX for the peer rows); elsewhere the table only says why it skipped.
"""

from __future__ import annotations

import itertools
import math
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from harness import Context, Row, Table, close_check, error_text
from timing import Timing, fmt_time

# JAX must not reserve 75% of the GPU's memory when run.py imports it to detect peers.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

WORKLOADS = {
    "W-GPU": "GPU: copy bandwidth, fused elementwise, sums, MRG uniform, sgemm, MLP training step"
}

N_ELEM = 2**26
SUM_SHAPE = (8192, 8192)
N_RANDOM = 2**24
GEMM_N = 4096
MLP_SIZES, MLP_BATCH, MLP_LR = (784, 1024, 1024, 10), 1024, 0.01
ROUND_S = 0.03  # each timed round lasts at least this long

#: name -> expression over a namespace with exp/sin (opgraph.tensor, numpy, cupy, jax.numpy)
ELEMWISE: dict[str, Callable[[Any, Any], Any]] = {
    "a + a**10": lambda ns, t: t + t**10,
    "exp(x)*sin(x)": lambda ns, t: ns.exp(t) * ns.sin(t),
}
SUMS: dict[str, int | None] = {"sum axis=0": 0, "sum axis=1": 1, "sum (all)": None}

Make = Callable[[], tuple[Callable[[], Any], Callable[[], None]]]


# --------------------------------------------------------------------------- plumbing


def gpu_runtime() -> tuple[Any, str]:
    """``(runtime, "")`` when opgraph can drive a real GPU, else ``(None, reason)``."""
    try:
        from opgraph import config
        from opgraph_cuda.runtime import GpuUnavailable, get_runtime
    except ImportError as exc:
        return None, f"opgraph-backend-cuda is not installed ({exc})"
    if config.cuda__emulate:
        return None, "cuda__emulate is on: emulator timings mean nothing"
    try:
        runtime = get_runtime()
    except GpuUnavailable as exc:
        return None, str(exc).splitlines()[0]
    if runtime.name != "pycuda":
        return None, f"the runtime is {runtime.name}, not a GPU"
    return runtime, ""


def measure_gpu(fn: Callable[[], Any], sync: Callable[[], None], repeat: int) -> Timing:
    """Seconds per call of ``fn``: 2 warm-up calls, then ``repeat`` rounds of back-to-back
    calls, each round closed by ``sync()`` before the clock is read."""
    for _ in range(2):
        fn()
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    once = max(time.perf_counter() - t0, 1e-6)
    number = max(1, min(1000, math.ceil(ROUND_S / once)))
    samples = []
    for _ in range(repeat):
        sync()
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        sync()
        samples.append((time.perf_counter() - t0) / number)
    return Timing.of(samples, number)


def time_row(
    table: Table,
    case: str,
    engine: str,
    make: Make,
    repeat: int,
    *,
    ref: bool = False,
    check: Callable[[Callable[[], Any]], str] | None = None,
) -> Row:
    """Build ``(fn, sync)`` with ``make()``, check ``fn``, time it; failures become rows."""
    try:
        fn, sync = make()
        verdict = check(fn) if check is not None else ""
        timing = measure_gpu(fn, sync, repeat)
    except Exception as exc:
        return table.add(Row(case, engine, status=error_text(exc), ref=ref))
    return table.add(Row(case, engine, timing=timing, ref=ref, check=verdict))


def add_rate(row: Row, nbytes: int, copy_rate: float | None) -> float | None:
    """Append ``row``'s GB/s (``nbytes`` per call) and its share of the copy rate to its
    check column; the rate in bytes/s, or None for a row that did not run."""
    if row.timing is None:
        return None
    rate = nbytes / row.timing.median
    text = f"{rate / 1e9:.0f} GB/s" + (
        f" = {100 * rate / copy_rate:.0f}% of copy" if copy_rate else ""
    )
    row.check = f"{row.check}; {text}" if row.check else text
    return rate


def host(value: Any) -> np.ndarray:
    """A host copy of a GpuArray, CuPy or JAX array (or a host value)."""
    return value.get() if hasattr(value, "get") else np.asarray(value)


class Engines:
    """opgraph's GPU functions and the optional peers (CuPy, JAX) of one run."""

    def __init__(self, runtime: Any, ctx: Context) -> None:
        self.runtime = runtime
        self.cupy = _try_import("cupy")
        peer = ctx.peers.get("jax")
        self.jax = _try_import("jax") if peer is not None and peer.ok else None
        if self.jax is not None:
            import jax.numpy

            self.jnp = jax.numpy

    def opgraph(self, build: Callable[[], Any]) -> tuple[Callable[[], Any], Callable[[], None]]:
        """``(f, sync)`` for ``build()``'s function compiled with the GPU pass on."""
        from opgraph import config

        with config.change_flags(cuda__lift="always"):
            f = build()
        return f, self.runtime.synchronize

    def cupy_call(self, fn: Callable[[], Any]) -> tuple[Callable[[], Any], Callable[[], None]]:
        """``(fn, sync)`` for a CuPy call."""
        return fn, self.cupy.cuda.runtime.deviceSynchronize

    def jax_call(self, fn: Callable[[], Any]) -> tuple[Callable[[], Any], Callable[[], None]]:
        """``(call, sync)`` for a jitted JAX call: ``sync`` blocks on the last result."""
        last: list[Any] = [None]

        def call() -> Any:
            last[0] = fn()
            return last[0]

        def sync() -> None:
            if last[0] is not None:
                self.jax.block_until_ready(last[0])

        return call, sync


def _try_import(name: str) -> Any:
    try:
        return __import__(name)
    except Exception:
        return None


def gpu_shared(value: np.ndarray, name: str) -> Any:
    """An opgraph GPU shared variable holding ``value``."""
    from opgraph_cuda.type import gpuarray_shared_constructor

    return gpuarray_shared_constructor(value, name=name)


def on_device(expr: Any) -> Any:
    """``expr`` as a function output that stays on the GPU (no copy to the host)."""
    from opgraph_cuda.ops import gpu_from_host

    return gpu_from_host(expr)


# --------------------------------------------------------------------------- sections


def section_copy(table: Table, eng: Engines, repeat: int, summary: list[str]) -> float | None:
    """Device-to-device copy of 2**26 float32: the bandwidth every other rate is set beside."""
    from opgraph_cuda.array import GpuArray

    data = np.random.default_rng(0).standard_normal(N_ELEM).astype(np.float32)
    moved = 2 * data.nbytes
    case = "d2d copy 2**26 f32"
    rows = []
    if eng.cupy is not None:
        src = eng.cupy.asarray(data)
        dst = eng.cupy.empty_like(src)
        rows.append(
            time_row(
                table,
                case,
                "CuPy copyto",
                lambda: eng.cupy_call(lambda: eng.cupy.copyto(dst, src)),
                repeat,
                ref=True,
            )
        )
    g = GpuArray.from_host(data)
    rows.append(
        time_row(
            table, case, "opgraph GpuArray.copy", lambda: (g.copy, eng.runtime.synchronize), repeat
        )
    )
    rates = [r for r in (add_rate(row, moved, None) for row in rows) if r]
    if not rates:
        return None
    copy_rate = max(rates)
    summary.append(f"copy bandwidth           {copy_rate / 1e9:6.0f} GB/s (read + written)")
    return copy_rate


def section_elemwise(
    table: Table, eng: Engines, repeat: int, summary: list[str], copy: float | None
) -> None:
    """The fused elementwise expressions on 2**26 float32, as GB/s and % of the copy."""
    import opgraph.tensor as T

    rng = np.random.default_rng(1)
    inputs = {
        "a + a**10": rng.uniform(0.5, 1.5, N_ELEM).astype(np.float32),
        "exp(x)*sin(x)": rng.uniform(-3, 3, N_ELEM).astype(np.float32),
    }
    for case, expr in ELEMWISE.items():
        data = inputs[case]
        reference = expr(np, data.astype(np.float64))
        scale = np.abs(reference) + np.exp(data.astype(np.float64))

        def check(fn: Callable[[], Any], ref: Any = reference, scale: Any = scale) -> str:
            return close_check(host(fn()), ref, rtol=1e-5, scale=scale)

        def make_og(data: np.ndarray = data, expr: Any = expr) -> Any:
            import opgraph

            v = gpu_shared(data, "v")
            return eng.opgraph(lambda: opgraph.function([], on_device(expr(T, v))))

        moved = 2 * data.nbytes
        og = time_row(table, case, "opgraph [cuda]", make_og, repeat, check=check)
        rate = add_rate(og, moved, copy)
        peer = None
        if eng.cupy is not None:
            c = eng.cupy.asarray(data)
            make = lambda c=c, expr=expr: eng.cupy_call(lambda: expr(eng.cupy, c))  # noqa: E731
            peer = time_row(table, case, "CuPy (unfused)", make, repeat, ref=True, check=check)
            add_rate(peer, moved, copy)
        if eng.jax is not None:
            j = eng.jnp.asarray(data)
            jf = eng.jax.jit(lambda t, expr=expr: expr(eng.jnp, t))
            jrow = time_row(
                table,
                case,
                "JAX jit",
                lambda jf=jf, j=j: eng.jax_call(lambda: jf(j)),
                repeat,
                check=check,
            )
            add_rate(jrow, moved, copy)
        summary.append(_rate_line(case, rate, copy, og, peer, "CuPy"))


def section_sums(
    table: Table, eng: Engines, repeat: int, summary: list[str], copy: float | None
) -> None:
    """Sums of an 8192 x 8192 float32 matrix over axis 0, axis 1 and all of it."""
    import opgraph

    data = np.random.default_rng(2).standard_normal(SUM_SHAPE).astype(np.float32)
    as64 = data.astype(np.float64)
    shared = gpu_shared(data, "m")
    c = eng.cupy.asarray(data) if eng.cupy is not None else None
    j = eng.jnp.asarray(data) if eng.jax is not None else None
    for case, axis in SUMS.items():
        reference, scale = as64.sum(axis=axis), np.abs(as64).sum(axis=axis)

        def check(fn: Callable[[], Any], ref: Any = reference, scale: Any = scale) -> str:
            return close_check(host(fn()), ref, rtol=1e-5, scale=scale)

        def make_og(axis: int | None = axis) -> Any:
            return eng.opgraph(lambda: opgraph.function([], on_device(shared.sum(axis=axis))))

        og = time_row(table, case, "opgraph [cuda]", make_og, repeat, check=check)
        rate = add_rate(og, data.nbytes, copy)
        peer = None
        if c is not None:
            make = lambda axis=axis: eng.cupy_call(lambda: c.sum(axis=axis))  # noqa: E731
            peer = time_row(table, case, "CuPy", make, repeat, ref=True, check=check)
            add_rate(peer, data.nbytes, copy)
        if j is not None:
            jf = eng.jax.jit(lambda t, axis=axis: eng.jnp.sum(t, axis=axis))
            jrow = time_row(
                table,
                case,
                "JAX jit",
                lambda jf=jf: eng.jax_call(lambda: jf(j)),
                repeat,
                check=check,
            )
            add_rate(jrow, data.nbytes, copy)
        summary.append(_rate_line(case, rate, copy, og, peer, "CuPy"))


def section_random(
    table: Table, eng: Engines, repeat: int, summary: list[str], copy: float | None
) -> None:
    """2**24 uniform float32 samples: opgraph's ``GpuMRG_uniform`` (MRG31k3p, the streams'
    state on the device as in Theano, 15360 streams) vs CuPy's and JAX's generators."""
    import opgraph
    from opgraph.sandbox.rng_mrg import MRG_RandomStreams, guess_n_streams, mrg_fill, mrg_uniform

    n = N_RANDOM
    case = f"uniform 2**{n.bit_length() - 1} f32"
    rstates = MRG_RandomStreams(1234).get_substream_rstates(guess_n_streams((n,)), "float32")
    state = opgraph.shared(rstates, target="cuda")

    def exact(fn: Callable[[], Any]) -> str:  # the CPU op's numbers from the same state
        want = mrg_fill(state.get_value(), n, "float32")
        return "ok bit-identical to the CPU" if host(fn()).tobytes() == want.tobytes() else "DIFF"

    def in_range(fn: Callable[[], Any]) -> str:
        u = host(fn())
        good = u.shape == (n,) and u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 1e-3
        return f"{'ok' if good else 'DIFF'} mean {u.mean():.4f}"

    def make_og() -> Any:
        new_state, sample = mrg_uniform.new(state, None, "float32", (n,))
        return eng.opgraph(
            lambda: opgraph.function([], on_device(sample), updates=[(state, new_state)])
        )

    og = time_row(table, case, "opgraph [cuda] MRG31k3p", make_og, repeat, check=exact)
    rate = add_rate(og, 4 * n, copy)
    peer = None
    if eng.cupy is not None:
        make = lambda: eng.cupy_call(  # noqa: E731
            lambda: eng.cupy.random.random(n, dtype=eng.cupy.float32)
        )
        peer = time_row(table, case, "CuPy random", make, repeat, ref=True, check=in_range)
        add_rate(peer, 4 * n, copy)
    if eng.jax is not None:
        random = eng.jax.random

        def jax_draw(key: Any) -> Any:  # a new key and the samples, in one jitted call
            key, sub = random.split(key)
            return key, random.uniform(sub, (n,), dtype=eng.jnp.float32)

        draw, keys = eng.jax.jit(jax_draw), [random.PRNGKey(0)]

        def call() -> Any:
            keys[0], u = draw(keys[0])
            return u

        jrow = time_row(
            table,
            case,
            "JAX jit random.uniform",
            lambda: eng.jax_call(call),
            repeat,
            check=in_range,
        )
        add_rate(jrow, 4 * n, copy)
    summary.append(_rate_line(case, rate, copy, og, peer, "CuPy"))


def section_gemm(table: Table, eng: Engines, repeat: int, summary: list[str]) -> None:
    """A 4096^3 float32 matrix product: opgraph's cuBLAS sgemm vs ``cupy.matmul``."""
    import opgraph
    import opgraph.tensor as T

    rng = np.random.default_rng(3)
    a = rng.standard_normal((GEMM_N, GEMM_N)).astype(np.float32)
    b = rng.standard_normal((GEMM_N, GEMM_N)).astype(np.float32)
    part = a[:128].astype(np.float64) @ b.astype(np.float64)

    def check(fn: Callable[[], Any]) -> str:
        return close_check(host(fn())[:128], part, rtol=1e-4, scale=np.abs(part).max())

    case = f"sgemm {GEMM_N}^3"
    flops = 2 * GEMM_N**3
    peer = None
    if eng.cupy is not None:
        ca, cb = eng.cupy.asarray(a), eng.cupy.asarray(b)
        make = lambda: eng.cupy_call(lambda: eng.cupy.matmul(ca, cb))  # noqa: E731
        peer = time_row(table, case, "CuPy matmul", make, repeat, ref=True, check=check)

    def make_og() -> Any:
        sa, sb = gpu_shared(a, "A"), gpu_shared(b, "B")
        return eng.opgraph(lambda: opgraph.function([], on_device(T.dot(sa, sb))))

    og = time_row(table, case, "opgraph [cuda]", make_og, repeat, check=check)
    parts = []
    for row in (og, peer):
        if row is not None and row.timing is not None:
            row.check = f"{row.check}; {flops / row.timing.median / 1e12:.1f} TFLOP/s"
            parts.append(f"{row.engine} {flops / row.timing.median / 1e12:.1f} TFLOP/s")
    summary.append(f"{case:<24} " + ", ".join(parts) + _ratio(og, peer, "CuPy"))


def section_mlp(table: Table, eng: Engines, repeat: int, summary: list[str]) -> None:
    """One SGD step of an MLP 784-1024-1024-10 on a batch of 1024: opgraph vs JAX jit."""
    rng = np.random.default_rng(4)
    params = []
    for n_in, n_out in itertools.pairwise(MLP_SIZES):
        params.append((rng.standard_normal((n_in, n_out)) * np.sqrt(2.0 / n_in)).astype(np.float32))
        params.append(np.zeros(n_out, np.float32))
    x = rng.standard_normal((MLP_BATCH, MLP_SIZES[0])).astype(np.float32)
    y = rng.integers(0, MLP_SIZES[-1], MLP_BATCH).astype(np.int32)
    loss0 = _numpy_loss(params, x, y)

    def check(fn: Callable[[], Any]) -> str:  # the first step's loss, from the same start
        return close_check(float(host(fn())), loss0, rtol=1e-4)

    case = f"MLP step {'-'.join(map(str, MLP_SIZES))} b{MLP_BATCH}"
    compile_s: list[float] = []

    def make_og() -> Any:
        t0 = time.perf_counter()
        out = eng.opgraph(lambda: _opgraph_mlp(params, x, y))
        compile_s.append(time.perf_counter() - t0)
        return out

    peer = None
    if eng.jax is not None:
        highest = eng.jax.lax.Precision.HIGHEST
        peer = time_row(
            table,
            case,
            "JAX jit (fp32 matmul)",
            lambda: _jax_mlp(eng, params, x, y, highest),
            repeat,
            ref=True,
            check=check,
        )
        time_row(
            table,
            case,
            "JAX jit (default, TF32)",
            lambda: _jax_mlp(eng, params, x, y, None),
            repeat,
            check=check,
        )
    og = time_row(table, case, "opgraph [cuda]", make_og, repeat, check=check)
    if compile_s:
        table.note(f"{case}: opgraph compiled the step in {compile_s[0]:.1f} s (kernels included)")
    time_text = fmt_time(og.timing.median) if og.timing is not None else og.status
    summary.append(f"{'MLP training step':<24} opgraph {time_text}" + _ratio(og, peer, "JAX fp32"))


def _numpy_loss(params: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> float:
    """The MLP's mean softmax cross-entropy at ``params``, in float64."""
    h = x.astype(np.float64)
    for k in range(0, len(params), 2):
        h = h @ params[k] + params[k + 1]
        if k + 2 < len(params):
            h = np.maximum(h, 0)
    h = h - h.max(axis=1, keepdims=True)
    logp = h - np.log(np.exp(h).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(y)), y].mean())


def _opgraph_mlp(params: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> Any:
    """The compiled training step ``f() -> loss``: data and weights in GPU shared variables."""
    import opgraph
    import opgraph.tensor as T

    shared = [gpu_shared(p, f"{'Wb'[k % 2]}{k // 2}") for k, p in enumerate(params)]
    xs, ys = gpu_shared(x, "x"), gpu_shared(y, "y")
    h = xs
    for k in range(0, len(shared), 2):
        h = T.dot(h, shared[k]) + shared[k + 1]
        if k + 2 < len(shared):
            h = T.nnet.relu(h)
    loss = T.mean(T.nnet.categorical_crossentropy(T.nnet.softmax(h), ys))
    grads = opgraph.grad(loss, shared)
    updates = [(p, p - np.float32(MLP_LR) * g) for p, g in zip(shared, grads, strict=True)]
    return opgraph.function([], loss, updates=updates)


def _jax_mlp(
    eng: Engines, params: list[np.ndarray], x: np.ndarray, y: np.ndarray, precision: Any
) -> Any:
    """``(call, sync)`` for the same step under ``jax.jit`` (parameters donated)."""
    jax, jnp = eng.jax, eng.jnp

    def loss_fn(ps: list[Any], xb: Any, yb: Any) -> Any:
        h = xb
        for k in range(0, len(ps), 2):
            h = jnp.dot(h, ps[k], precision=precision) + ps[k + 1]
            if k + 2 < len(ps):
                h = jax.nn.relu(h)
        logp = jax.nn.log_softmax(h, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, yb[:, None], axis=1))

    def step(ps: list[Any], xb: Any, yb: Any) -> Any:
        loss, grads = jax.value_and_grad(loss_fn)(ps, xb, yb)
        return [p - MLP_LR * g for p, g in zip(ps, grads, strict=True)], loss

    jstep = jax.jit(step, donate_argnums=0)
    state = [[jnp.asarray(p) for p in params]]
    xb, yb = jnp.asarray(x), jnp.asarray(y)

    def call() -> Any:
        state[0], loss = jstep(state[0], xb, yb)
        return loss

    return eng.jax_call(call)


def _ratio(og: Row | None, peer: Row | None, name: str) -> str:
    """`` = 1.23x <name>`` (opgraph's time over the peer's), or nothing."""
    if og is None or peer is None or og.timing is None or peer.timing is None:
        return ""
    return f"; opgraph time / {name} = {og.timing.median / peer.timing.median:.2f}x"


def _rate_line(
    case: str, rate: float | None, copy: float | None, og: Row, peer: Row | None, name: str
) -> str:
    """A summary line: opgraph's GB/s, its share of the copy rate, its ratio to the peer."""
    if rate is None:
        return f"{case:<24} opgraph: {og.status}"
    share = f" = {100 * rate / copy:3.0f}% of copy" if copy else ""
    return f"{case:<24} {rate / 1e9:6.0f} GB/s{share}" + _ratio(og, peer, name)


# --------------------------------------------------------------------------- entry


def run(workload: str, ctx: Context) -> Table:
    """All sections on the GPU, or a table that says why there is none."""
    repeat = ctx.repeat(full=7, quick=3)
    table = Table(
        workload,
        WORKLOADS[workload],
        detail=f"{repeat} rounds after 2 warm-up calls, device synchronized before each clock "
        "read; time per call; vs peer = time / reference row's time",
        ratio_header="vs peer",
    )
    runtime, reason = gpu_runtime()
    if runtime is None:
        table.note(f"skipped: no GPU for opgraph ({reason})")
        return table
    eng = Engines(runtime, ctx)
    table.note(
        f"device: {runtime.describe()}; CuPy {'ok' if eng.cupy is not None else 'not installed'}, "
        f"JAX {'ok' if eng.jax is not None else 'not available'}"
    )
    summary: list[str] = []
    copy = _section(table, "copy", lambda: section_copy(table, eng, repeat, summary))
    _section(table, "elementwise", lambda: section_elemwise(table, eng, repeat, summary, copy))
    _section(table, "sums", lambda: section_sums(table, eng, repeat, summary, copy))
    _section(table, "random", lambda: section_random(table, eng, repeat, summary, copy))
    _section(table, "sgemm", lambda: section_gemm(table, eng, repeat, summary))
    _section(table, "MLP", lambda: section_mlp(table, eng, repeat, summary))
    table.note("summary:")
    for line in summary:
        table.note("  " + line)
    return table


def _section(table: Table, name: str, body: Callable[[], Any]) -> Any:
    """Run one section; an error becomes a note instead of hiding the others' numbers.

    The section's rows are also printed to stderr as soon as it ends, so a run stopped by
    a time limit still shows what it measured.
    """
    start, t0 = len(table.rows), time.perf_counter()
    try:
        result = body()
    except Exception as exc:
        table.note(f"section {name} failed: {error_text(exc)}")
        result = None
    for row in table.rows[start:]:
        figure = fmt_time(row.timing.median) if row.timing is not None else row.status
        print(f"  [W-GPU {name}] {row.case} | {row.engine}: {figure} {row.check}", file=sys.stderr)
    print(f"  [W-GPU {name}] took {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    return result
