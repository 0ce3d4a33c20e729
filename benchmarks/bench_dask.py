"""W17: opgraph's ``mode="DASK"`` beside the same expressions written by hand in dask.array.

Everything runs on one ``distributed.LocalCluster`` started here (2 worker processes, 1
thread each, ``worker_memory`` each) with the same chunks on both sides:

- ``fused reduction``: ``sum(exp(-x**2) * sin(x) + 0.5 * x)`` over a 1-D float64 array held
  on the workers (persisted). opgraph fuses the elementwise part into one Composite.
- ``logreg step``: one gradient step of Theano's logistic regression (cross-entropy mean
  plus ``0.01 * |w|^2``) over an (N x D) dataset held on the workers: the cost and the new
  ``w``, ``b`` (``w`` and ``b`` are NumPy arguments, the data are dask arrays).

Each call builds the graph on the client and computes it on the cluster (``dask.compute``
of every output); the ratio column is opgraph's median over the hand-written median
(issue 17's target: at most 1.10x). Task counts are those of the optimized graphs, without
the persisted input chunks; the target for opgraph is ``chunks x nodes of its rewritten
graph``.

Larger than the workers' memory (their total limit is below the input's size):

- ``big reduction``: the fused reduction over ``big_bytes`` of float64 generated chunk by
  chunk on the workers (``dask.array.random``, one seed per chunk), never held whole.
- ``big SGD epoch``: an epoch of SGD over a ``big_bytes`` (rows x D) dataset generated the
  same way, one step per batch of chunks, ``w`` and ``b`` shared variables updated on the
  client (``updates``).

Their check recomputes the same values with opgraph's in-memory (default mode) function
chunk by chunk (batch by batch) on the client; the peak process memory of each worker comes
from the workers' own system monitor (sampled every 100 ms).

Sizes: ``--quick`` uses the small set, otherwise the full one (4 GB input, 2 x 500 MB
workers); ``OPGRAPH_BENCH_DASK="big_bytes=2e9,worker_memory=400e6"`` overrides any field
of :class:`Sizes`.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from harness import Context, Row, Table, close_check, error_text, norm_check
from timing import Timing

WORKLOADS = {
    "W17": "mode=DASK vs hand-written dask.array on a 2-worker LocalCluster, and inputs "
    "larger than the workers' memory"
}

#: Issue 17's target: opgraph's median at most this times the hand-written one.
TARGET_RATIO = 1.10
LEARNING_RATE = 0.1
L2 = 0.01


@dataclass(frozen=True)
class Sizes:
    """How big each case is (override with ``OPGRAPH_BENCH_DASK="field=value,..."``)."""

    expr_n: int  # elements of the fused reduction's input
    expr_chunk: int
    rows: int  # logistic-regression dataset
    cols: int
    row_chunk: int
    big_bytes: int  # each larger-than-memory input
    big_chunk_bytes: int
    batch_chunks: int  # chunks per SGD step in the big epoch
    worker_memory: int  # memory_limit of each of the 2 workers
    repeat: int


QUICK = Sizes(
    expr_n=4_000_000,
    expr_chunk=500_000,
    rows=200_000,
    cols=50,
    row_chunk=25_000,
    big_bytes=1_200_000_000,
    big_chunk_bytes=40_000_000,
    batch_chunks=6,
    worker_memory=500_000_000,
    repeat=5,
)
FULL = Sizes(
    expr_n=20_000_000,
    expr_chunk=2_500_000,
    rows=400_000,
    cols=50,
    row_chunk=50_000,
    big_bytes=4_000_000_000,
    big_chunk_bytes=50_000_000,
    batch_chunks=8,
    worker_memory=500_000_000,
    repeat=11,
)


def sizes_for(ctx: Context) -> Sizes:
    """The quick or full sizes, with the fields named in ``$OPGRAPH_BENCH_DASK`` replaced."""
    sizes = QUICK if ctx.quick else FULL
    text = os.environ.get("OPGRAPH_BENCH_DASK", "").strip()
    if text:
        fields = {f.name for f in dataclasses.fields(Sizes)}
        changes = {}
        for item in text.split(","):
            name, _, value = item.partition("=")
            if name.strip() not in fields:
                raise ValueError(f"OPGRAPH_BENCH_DASK: unknown field {name!r}; known: {fields}")
            changes[name.strip()] = int(float(value))
        sizes = dataclasses.replace(sizes, **changes)
    if ctx.repeat_override is not None:
        sizes = dataclasses.replace(sizes, repeat=max(1, ctx.repeat_override))
    return sizes


# --------------------------------------------------------------------------- the expressions


def opgraph_reduction(mode: Any) -> Any:
    """opgraph's ``sum(exp(-x**2) * sin(x) + 0.5 * x)`` of a float64 vector."""
    import opgraph
    import opgraph.tensor as T

    x = T.dvector("x")
    return opgraph.function([x], (T.exp(-(x**2)) * T.sin(x) + 0.5 * x).sum(), mode=mode)


def hand_reduction(x: Any) -> Any:
    """The same reduction written in dask.array."""
    import dask.array as da

    return (da.exp(-(x**2)) * da.sin(x) + 0.5 * x).sum()


def logreg_graph() -> tuple[Any, Any, Any, Any, Any, Any]:
    """``(x, y, w, b, cost, (gw, gb))`` of Theano's logistic regression, symbolic."""
    import opgraph.tensor as T

    x = T.dmatrix("x")
    y = T.dvector("y")
    w = T.dvector("w")
    b = T.dscalar("b")
    p_1 = 1 / (1 + T.exp(-T.dot(x, w) - b))
    xent = -y * T.log(p_1) - (1 - y) * T.log(1 - p_1)
    cost = xent.mean() + L2 * (w**2).sum()
    gw, gb = T.grad(cost, [w, b])
    return x, y, w, b, cost, (gw, gb)


def opgraph_logreg_step(mode: Any) -> Any:
    """``f(x, y, w, b) -> [cost, w - lr * gw, b - lr * gb]`` compiled in ``mode``."""
    import opgraph

    x, y, w, b, cost, (gw, gb) = logreg_graph()
    outputs = [cost, w - LEARNING_RATE * gw, b - LEARNING_RATE * gb]
    return opgraph.function([x, y, w, b], outputs, mode=mode)


def hand_logreg_step(x: Any, y: Any, w: np.ndarray, b: float) -> list[Any]:
    """The same step written by hand in dask.array (the gradient derived by hand)."""
    import dask.array as da

    n = x.shape[0]
    p_1 = 1 / (1 + da.exp(-(x @ w) - b))
    xent = -y * da.log(p_1) - (1 - y) * da.log(1 - p_1)
    cost = xent.mean() + L2 * float((w**2).sum())
    gz = (p_1 - y) / n
    gw = x.T @ gz + 2 * L2 * w
    gb = gz.sum()
    return [cost, w - LEARNING_RATE * gw, b - LEARNING_RATE * gb]


# --------------------------------------------------------------------------- helpers


def computed(outputs: Any) -> list[Any]:
    """Every output as NumPy: dask collections computed together (one ``dask.compute``)."""
    import dask

    outs = list(outputs) if isinstance(outputs, list | tuple) else [outputs]
    lazy = [i for i, o in enumerate(outs) if dask.is_dask_collection(o)]
    values = dask.compute(*(outs[i] for i in lazy)) if lazy else ()
    for i, value in zip(lazy, values):
        outs[i] = value
    return [np.asarray(o) for o in outs]


def task_count(outputs: Any, inputs: Sequence[Any]) -> int:
    """Tasks of the outputs' optimized graph, the persisted inputs' chunks not counted."""
    import dask

    outs = [o for o in (outputs if isinstance(outputs, list | tuple) else [outputs])]
    outs = [o for o in outs if dask.is_dask_collection(o)]
    keys: set[Any] = set()
    for o in dask.optimize(*outs):
        keys |= set(dict(o.__dask_graph__()).keys())
    for a in inputs:
        keys -= set(dict(a.__dask_graph__()).keys())
    return len(keys)


def node_count(f: Any) -> int:
    """Apply nodes of a compiled function's rewritten graph."""
    return len(f.maker.fgraph.apply_nodes)


def n_chunks(*arrays: Any) -> int:
    """The largest number of chunks among ``arrays``."""
    return max(a.npartitions for a in arrays)


def _worker_peak(dask_worker: Any, since: float) -> int:
    """On a worker: the largest process memory its system monitor saw since ``since``."""
    q = dask_worker.monitor.quantities
    return int(max((m for t, m in zip(q["time"], q["memory"]) if t >= since), default=0))


def worker_peaks(client: Any, since: float) -> dict[str, int]:
    """Each worker's peak process memory (bytes) since ``since`` (``time.time()``)."""
    return client.run(_worker_peak, since=since)


def _mb(n: float) -> str:
    return f"{n / 1e6:.0f} MB"


def start_cluster(sizes: Sizes) -> tuple[Any, Any]:
    """A 2-worker, 1-thread-each LocalCluster with ``worker_memory`` per worker, and a Client
    made dask's scheduler."""
    import cloudpickle
    import dask
    from distributed import Client, LocalCluster

    # the workers cannot import this file: ship its functions by value
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    dask.config.set({"distributed.admin.system-monitor.interval": "100ms"})
    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        memory_limit=sizes.worker_memory,
        dashboard_address=None,
        silence_logs=40,
    )
    return cluster, Client(cluster)


# --------------------------------------------------------------------------- timed cases


def time_pair(
    table: Table,
    case: str,
    hand: Callable[[], list[Any]],
    ours: Callable[[], list[Any]],
    reference: list[np.ndarray],
    sizes: Sizes,
    rtol: float,
) -> None:
    """Time the hand-written graph (the reference row) and opgraph's, checking both against
    ``reference`` (opgraph's in-memory result)."""

    def check(fn: Callable[[], list[Any]]) -> str:
        return norm_check(fn(), reference, rtol=rtol)

    timing = {"repeat": sizes.repeat, "number": 1, "warmup": 1}
    table.time(case, "dask.array by hand", lambda: hand, ref=True, check=check, **timing)
    table.time(case, 'opgraph mode="DASK"', lambda: ours, check=check, **timing)
    rows = [r for r in table.rows if r.case == case and r.timing is not None]
    if len(rows) == 2:
        ratio = rows[1].timing.median / rows[0].timing.median
        verdict = "meets" if ratio <= TARGET_RATIO else "misses"
        table.note(
            f"{case}: opgraph / by hand = {ratio:.2f}x ({verdict} the {TARGET_RATIO}x target)"
        )


def run_fused_reduction(table: Table, sizes: Sizes, client: Any) -> None:
    """Case ``fused reduction``: timings, task counts, check."""
    import dask.array as da

    case = "fused reduction"
    x = da.random.default_rng(1).standard_normal(sizes.expr_n, chunks=sizes.expr_chunk)
    x = client.persist(x)
    f = opgraph_reduction("DASK")
    reference = [np.asarray(opgraph_reduction(None)(x.compute()))]
    time_pair(
        table,
        case,
        lambda: computed(hand_reduction(x)),
        lambda: computed(f(x)),
        reference,
        sizes,
        rtol=1e-10,
    )
    chunks, nodes = n_chunks(x), node_count(f)
    ours, hand = task_count(f(x), [x]), task_count(hand_reduction(x), [x])
    verdict = "meets" if ours <= chunks * nodes else "misses"
    table.note(
        f"{case}: tasks opgraph {ours}, by hand {hand}; {chunks} chunks x {nodes} nodes of "
        f"opgraph's graph = {chunks * nodes} ({verdict} the target)"
    )


def run_logreg_step(table: Table, sizes: Sizes, client: Any) -> None:
    """Case ``logreg step``: timings, task counts, check."""
    import dask.array as da

    case = "logreg step"
    rng = da.random.default_rng(2)
    x = rng.standard_normal((sizes.rows, sizes.cols), chunks=(sizes.row_chunk, sizes.cols))
    w_true = np.random.default_rng(3).standard_normal(sizes.cols)
    y = (x @ w_true > 0).astype("float64")
    x, y = client.persist([x, y])
    w = np.random.default_rng(4).standard_normal(sizes.cols) * 0.1
    b = np.float64(0.0)
    f = opgraph_logreg_step("DASK")
    xn, yn = x.compute(), y.compute()
    reference = [np.asarray(v) for v in opgraph_logreg_step(None)(xn, yn, w, b)]
    time_pair(
        table,
        case,
        lambda: computed(hand_logreg_step(x, y, w, b)),
        lambda: computed(f(x, y, w, b)),
        reference,
        sizes,
        rtol=1e-10,
    )
    chunks, nodes = n_chunks(x, y), node_count(f)
    ours = task_count(f(x, y, w, b), [x, y])
    hand = task_count(hand_logreg_step(x, y, w, b), [x, y])
    verdict = "meets" if ours <= chunks * nodes else "misses"
    table.note(
        f"{case}: tasks opgraph {ours}, by hand {hand}; {chunks} chunks x {nodes} nodes of "
        f"opgraph's graph = {chunks * nodes} ({verdict} the target)"
    )


# --------------------------------------------------------------------------- larger than memory


def _once(table: Table, case: str, engine: str, fn: Callable[[], str], client: Any) -> float:
    """Run ``fn`` once (it returns its check), add its row, note each worker's peak memory;
    returns the largest peak."""
    since = time.time()
    t0 = time.perf_counter()
    try:
        verdict = fn()
    except Exception as exc:
        table.add(Row(case, engine, status=error_text(exc)))
        return 0.0
    seconds = time.perf_counter() - t0
    time.sleep(0.3)  # one more monitor sample after the last task
    peaks = worker_peaks(client, since)
    table.add(Row(case, engine, timing=Timing.of([seconds]), check=verdict, ratio="(1 run)"))
    top = max(peaks.values(), default=0)
    table.note(
        f"{case}: peak worker process memory {', '.join(_mb(p) for p in peaks.values())} "
        f"(memory_limit {_mb(table_limit(client))} each)"
    )
    return float(top)


def table_limit(client: Any) -> int:
    """The memory limit of the cluster's first worker (bytes)."""
    info = client.scheduler_info()["workers"]
    return int(next(iter(info.values()))["memory_limit"]) if info else 0


def run_big_reduction(table: Table, sizes: Sizes, client: Any) -> None:
    """Case ``big reduction``: opgraph on an input larger than the workers' total memory,
    checked chunk by chunk against its in-memory function on the client."""
    import dask
    import dask.array as da

    n = sizes.big_bytes // 8
    chunk = sizes.big_chunk_bytes // 8
    x = da.random.default_rng(5).standard_normal(n, chunks=chunk)
    case = f"big reduction ({_mb(sizes.big_bytes)} input)"
    f = opgraph_reduction("DASK")
    result: list[Any] = []

    def go() -> str:
        result.append(computed(f(x))[0])
        return "pending"

    _once(table, case, 'opgraph mode="DASK"', go, client)
    if not result:
        return
    # the same sum, chunk by chunk on the client with opgraph's in-memory function
    local = opgraph_reduction(None)
    total = 0.0
    scale = 0.0
    for start in range(0, n, chunk):
        (block,) = dask.compute(x[start : start + chunk], scheduler="synchronous")
        total += float(local(block))
        scale += float(np.abs(block).sum())
    table.rows[-1].check = close_check(result[0], total, rtol=1e-12, scale=scale)


def run_big_epoch(table: Table, sizes: Sizes, client: Any) -> None:
    """Case ``big SGD epoch``: shared ``w``, ``b`` updated on the client, one step per
    batch of chunks of a dataset larger than the workers' total memory; checked against the
    same steps run in memory, batch by batch."""
    import dask
    import dask.array as da

    import opgraph

    cols = sizes.cols
    rows_per_chunk = max(1, sizes.big_chunk_bytes // (8 * cols))
    rows = max(rows_per_chunk, sizes.big_bytes // (8 * cols))
    x = da.random.default_rng(6).standard_normal((rows, cols), chunks=(rows_per_chunk, cols))
    w_true = np.random.default_rng(7).standard_normal(cols)
    y = (x @ w_true > 0).astype("float64")
    batch = rows_per_chunk * sizes.batch_chunks
    starts = range(0, rows, batch)
    case = f"big SGD epoch ({_mb(sizes.big_bytes)}, {len(starts)} steps)"

    def trainer(mode: Any) -> tuple[Any, Any, Any]:
        import opgraph.tensor as T

        xs, ys = T.dmatrix("x"), T.dvector("y")
        w = opgraph.shared(np.zeros(cols), name="w")
        b = opgraph.shared(np.float64(0.0), name="b")
        p_1 = 1 / (1 + T.exp(-T.dot(xs, w) - b))
        xent = -ys * T.log(p_1) - (1 - ys) * T.log(1 - p_1)
        cost = xent.mean() + L2 * (w**2).sum()
        gw, gb = T.grad(cost, [w, b])
        updates = [(w, w - LEARNING_RATE * gw), (b, b - LEARNING_RATE * gb)]
        return opgraph.function([xs, ys], cost, updates=updates, mode=mode), w, b

    train, w, b = trainer("DASK")
    costs: list[float] = []

    def go() -> str:
        for s in starts:
            costs.append(float(computed(train(x[s : s + batch], y[s : s + batch]))[0]))
        return "pending"

    _once(table, case, 'opgraph mode="DASK"', go, client)
    if len(costs) != len(starts):
        return
    local, w_ref, b_ref = trainer(None)
    ref_costs = []
    for s in starts:
        xb, yb = dask.compute(x[s : s + batch], y[s : s + batch], scheduler="synchronous")
        ref_costs.append(float(local(xb, yb)))
    check = norm_check(
        [w.get_value(), b.get_value(), np.array(costs)],
        [w_ref.get_value(), b_ref.get_value(), np.array(ref_costs)],
        rtol=1e-9,
    )
    table.rows[-1].check = check
    table.note(f"{case}: cost {costs[0]:.4f} -> {costs[-1]:.4f} over the epoch")


def run(workload: str, ctx: Context) -> Table:
    """Start the cluster, run every case, close it."""
    table = Table(workload, WORKLOADS[workload], ratio_header="vs hand")
    try:
        import distributed  # noqa: F401

        import opgraph_dask  # noqa: F401
    except ImportError as exc:
        table.skip("all", 'opgraph mode="DASK"', f"skipped: {error_text(exc)}")
        return table
    sizes = sizes_for(ctx)
    table.detail = (
        f"LocalCluster: 2 workers x 1 thread, memory_limit {_mb(sizes.worker_memory)} each; "
        f"{sizes.repeat} calls timed after 1 warm-up (graph build + compute + gather); "
        "check = relative difference from opgraph's in-memory (default mode) result"
    )
    cluster, client = start_cluster(sizes)
    try:
        for part in (run_fused_reduction, run_logreg_step, run_big_reduction, run_big_epoch):
            try:
                part(table, sizes, client)
            except Exception as exc:  # one case's failure must not hide the others
                table.skip(part.__name__.removeprefix("run_"), "opgraph", error_text(exc))
    finally:
        client.close()
        cluster.close()
    table.note(
        f"sizes: fused reduction {sizes.expr_n:,} float64 in chunks of {sizes.expr_chunk:,}; "
        f"logreg {sizes.rows:,} x {sizes.cols} in row chunks of {sizes.row_chunk:,}; "
        f"big inputs {_mb(sizes.big_bytes)} in chunks of {_mb(sizes.big_chunk_bytes)} vs "
        f"{_mb(2 * sizes.worker_memory)} of workers' memory"
    )
    return table
