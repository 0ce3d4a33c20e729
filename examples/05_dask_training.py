"""Theano's logistic regression trained on a dask cluster, over data larger than its memory.

The program starts a ``distributed.LocalCluster`` (2 worker processes, 1 thread and
``--memory-limit`` each) and prints its dashboard address. It writes a dataset bigger than
the workers' memory limits together to a temporary folder, one ``.npy`` file per chunk
(each chunk generated and saved on a worker, with a progress bar), then trains Theano's
logistic-regression model on it with ``mode="DASK"``: one SGD step per batch of chunks,
read from disk by the workers; the gradient is reduced across the chunks on the cluster and
the shared weights ``w`` and ``b`` are updated on the client. It prints the cost of every
step, and the cost over the whole dataset before and after the epoch (each pass with a
progress bar). The folder is removed at the end.

``python examples/05_dask_training.py`` (``--rows``, ``--memory-limit``, ``--epochs``).
"""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
import time
from pathlib import Path

import numpy

import opgraph as theano

T = theano.tensor

FEATS = 50  # features per example
CHUNK_ROWS = 50_000  # rows per chunk on disk: 50,000 x 50 float64 = 20 MB


def write_chunk(folder: str, index: int, rows: int, w_true: numpy.ndarray) -> str:
    """Generate chunk ``index`` (its own seed) and save it as x_<i>.npy and y_<i>.npy.

    Runs on a worker: only this chunk is ever in its memory.
    """
    rng = numpy.random.default_rng(1000 + index)
    x = rng.standard_normal((rows, len(w_true)))
    y = (x @ w_true + 0.5 * rng.standard_normal(rows) > 0).astype("float64")
    numpy.save(Path(folder) / f"x_{index}.npy", x)
    numpy.save(Path(folder) / f"y_{index}.npy", y)
    return folder


def chunk_sizes(rows: int) -> list[int]:
    """Rows of each chunk on disk."""
    return [min(CHUNK_ROWS, rows - start) for start in range(0, rows, CHUNK_ROWS)]


def open_dataset(folder: str, sizes: list[int]) -> tuple[object, object]:
    """``(X, Y)``: dask arrays whose chunks are read from the .npy files by the workers."""
    import dask
    import dask.array as da

    load = dask.delayed(numpy.load, pure=True)
    xs = [
        da.from_delayed(load(f"{folder}/x_{i}.npy"), (n, FEATS), dtype="float64")
        for i, n in enumerate(sizes)
    ]
    ys = [
        da.from_delayed(load(f"{folder}/y_{i}.npy"), (n,), dtype="float64")
        for i, n in enumerate(sizes)
    ]
    return da.concatenate(xs), da.concatenate(ys)


def main() -> None:
    """Start the cluster, write the data, train, clean up."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_400_000, help="examples (default 2.4M)")
    parser.add_argument(
        "--memory-limit", default="400MB", help="memory limit of each worker (default 400MB)"
    )
    parser.add_argument("--batch-chunks", type=int, default=3, help="chunks per SGD step")
    parser.add_argument("--epochs", type=int, default=1, help="passes over the data")
    parser.add_argument("--lr", type=float, default=1.0, help="learning rate")
    args = parser.parse_args()

    from dask.utils import format_bytes, parse_bytes
    from distributed import Client, LocalCluster, progress

    started = time.perf_counter()
    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        memory_limit=args.memory_limit,
        dashboard_address=":0",
        silence_logs=40,
    )
    client = Client(cluster)
    try:
        has_bokeh = importlib.util.find_spec("bokeh") is not None
        note = "" if has_bokeh else " (its pages need bokeh: pip install bokeh)"
        print(f"dashboard: {client.dashboard_link}{note}")
        print(f"scheduler: {cluster.scheduler_address}")
        total_limit = 2 * parse_bytes(args.memory_limit)
        data_bytes = args.rows * (FEATS + 1) * 8
        print(
            f"dataset: {args.rows:,} x {FEATS} float64 + labels = {format_bytes(data_bytes)}; "
            f"workers' memory limit {format_bytes(total_limit)} in all"
        )

        with tempfile.TemporaryDirectory(prefix="opgraph-dask-") as folder:
            # ---- the data: generated and written chunk by chunk on the workers
            w_true = numpy.random.default_rng(0).standard_normal(FEATS)
            sizes = chunk_sizes(args.rows)
            written = client.map(
                write_chunk, [folder] * len(sizes), range(len(sizes)), sizes, w_true=w_true
            )
            print(f"writing {len(sizes)} chunks of .npy to {folder}")
            progress(written)
            print()
            client.gather(written)
            X, Y = open_dataset(folder, sizes)

            # ---- the model, as in Theano's tutorial
            x = T.dmatrix("x")
            y = T.dvector("y")
            w = theano.shared(numpy.zeros(FEATS), name="w")
            b = theano.shared(0.0, name="b")
            p_1 = 1 / (1 + T.exp(-T.dot(x, w) - b))  # probability that the target is 1
            xent = -y * T.log(p_1) - (1 - y) * T.log(1 - p_1)  # cross-entropy
            cost = xent.mean() + 0.01 * (w**2).sum()  # the cost to minimize
            gw, gb = T.grad(cost, [w, b])

            train = theano.function(
                inputs=[x, y],
                outputs=cost,
                updates=((w, w - args.lr * gw), (b, b - args.lr * gb)),
                mode="DASK",
            )
            # outputs left as a lazy dask array: computed below with a progress bar
            get_cost = theano.function(inputs=[x, y], outputs=cost, mode="DASK")

            def full_cost(label: str) -> float:
                future = client.compute(get_cost(X, Y))
                print(f"cost over all {args.rows:,} examples, {label}:")
                progress(future)
                value = float(future.result())
                print(f"\n  {value:.6f}")
                return value

            before = full_cost("before training")
            batch = CHUNK_ROWS * args.batch_chunks
            step = 0
            for epoch in range(args.epochs):
                for start in range(0, args.rows, batch):
                    # dask__compute: the cost comes back computed, in the same dask.compute
                    # as the updates of w and b (which always land on the client)
                    with theano.config.change_flags(dask__compute=True):
                        c = float(train(X[start : start + batch], Y[start : start + batch]))
                    print(f"epoch {epoch} step {step:3d}  batch cost {c:.6f}")
                    step += 1
            after = full_cost("after training")
            print(f"cost {before:.6f} -> {after:.6f} ({'falls' if after < before else 'RISES'})")
            accuracy = float(
                client.compute(
                    ((X @ w.get_value() + b.get_value() > 0) == (Y > 0.5)).mean()
                ).result()
            )
            print(f"training accuracy: {accuracy:.4f}")
    finally:
        client.close()
        cluster.close()
    print(f"done in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":  # the workers are spawned processes: they must not run main()
    main()
