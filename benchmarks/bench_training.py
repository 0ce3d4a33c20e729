"""W2, W3, W9 and W18: training steps with shared weights and SGD updates.

W2 is Theano's logistic-regression tutorial (400 examples x 784 features, cross-entropy
plus an L2 penalty, ``w -= 0.1 * gw``): 10,000 steps timed in rounds of 1,000 (``--quick``:
500 steps in rounds of 100). W3 is an MLP 784-512-512-10 (ReLU, softmax cross-entropy,
SGD with learning rate 0.01) on a batch of 128; W9 the classic tutorials' small MLP
(784-500-10, a ReLU hidden layer as in W3, batch 20), whose step is a few hundred
microseconds: per-node overhead and thread start-up show there. W18 is the word-embedding
update of Theano's RNN tutorials: 64 rows of a 50,000 x 128 table move towards targets by
``inc_subtensor(E[idx], -lr * g)``, which only an in-place update keeps from copying the
whole table (51 MB) every step. All compare the compiled
step with a hand-written NumPy forward and backward pass computing the same update; the
check column compares the parameters after a few steps from the same start.

The graph builders here are written against the Theano API, so they serve opgraph and
PyTensor alike, and :func:`build_mlp_step` is what W5 (bench_compile.py) compiles.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from harness import (
    Context,
    Table,
    norm_check,
    opgraph_engines,
    opgraph_mode,
    pytensor_mode,
)

WORKLOADS = {
    "W2": "logistic regression training step (Theano tutorial, 400x784)",
    "W3": "MLP 784-512-512-10 training step, batch 128 (ReLU, softmax xent, SGD)",
    "W9": "small MLP 784-500-10 training step, batch 20 (the classic tutorials' shape)",
    "W18": "word-embedding row update, 64 rows of a 50,000x128 table (inc_subtensor)",
}

# --------------------------------------------------------------------------- data

LOGREG_N, LOGREG_FEATS, LOGREG_LR, LOGREG_L2 = 400, 784, 0.1, 0.01
MLP_SIZES, MLP_BATCH, MLP_LR = (784, 512, 512, 10), 128, 0.01
SMALL_MLP_SIZES, SMALL_MLP_BATCH = (784, 500, 10), 20
EMB_ROWS, EMB_DIM, EMB_BATCH, EMB_LR = 50_000, 128, 64, 0.1


def logreg_data() -> dict[str, Any]:
    """The tutorial's data set and initial weights (``RandomState(42)``)."""
    rng = np.random.RandomState(42)
    x = rng.randn(LOGREG_N, LOGREG_FEATS)
    y = rng.randint(size=LOGREG_N, low=0, high=2).astype(np.float64)
    return {"x": x, "y": y, "w": rng.randn(LOGREG_FEATS), "b": 0.0}


def mlp_data(
    seed: int = 0, sizes: Sequence[int] = MLP_SIZES, batch: int = MLP_BATCH
) -> dict[str, Any]:
    """A batch (float64 images, int32 labels) and He-initialised weights (W3's shape by
    default)."""
    rng = np.random.default_rng(seed)
    params = []
    for n_in, n_out in itertools.pairwise(sizes):
        params.append(rng.standard_normal((n_in, n_out)) * np.sqrt(2.0 / n_in))
        params.append(np.zeros(n_out))
    x = rng.standard_normal((batch, sizes[0]))
    y = rng.integers(0, sizes[-1], batch).astype(np.int32)
    return {"x": x, "y": y, "params": params}


def embedding_data(seed: int = 0) -> dict[str, Any]:
    """The table, a batch of row indices (with repeats) and their targets."""
    rng = np.random.default_rng(seed)
    return {
        "table": rng.standard_normal((EMB_ROWS, EMB_DIM)),
        "idx": rng.integers(0, EMB_ROWS, EMB_BATCH).astype(np.int32),
        "target": rng.standard_normal((EMB_BATCH, EMB_DIM)),
    }


# --------------------------------------------------------------------------- NumPy


class NumpyLogReg:
    """The tutorial's step by hand: forward, the analytic gradient, in-place update."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.x, self.y = data["x"], data["y"]
        self.w = np.array(data["w"], dtype=np.float64)
        self.b = float(data["b"])

    def step(self) -> tuple[np.ndarray, np.ndarray]:
        """One training step; returns (prediction, xent) like the compiled function."""
        x, y, w = self.x, self.y, self.w
        p = 1.0 / (1.0 + np.exp(-(x @ w) - self.b))
        with np.errstate(divide="ignore", invalid="ignore"):  # the tutorial's log(1 - 1)
            xent = -y * np.log(p) - (1.0 - y) * np.log(1.0 - p)
        g = (p - y) / len(y)  # d(mean xent)/dz
        gw = x.T @ g
        gw += (2 * LOGREG_L2) * w
        w -= LOGREG_LR * gw
        self.b -= LOGREG_LR * float(g.sum())
        return p > 0.5, xent

    def params(self) -> list[np.ndarray]:
        """Current (w, b)."""
        return [self.w, np.asarray(self.b)]


class NumpyMLP:
    """The MLP's step by hand: forward, softmax cross-entropy, backward, SGD in place."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.x, self.y = data["x"], data["y"]
        self.weights = [np.array(p) for p in data["params"]]
        self.rows = np.arange(len(self.y))

    def step(self) -> float:
        """One training step; returns the mean loss before the update."""
        ps, x, y, rows = self.weights, self.x, self.y, self.rows
        n_layers = len(ps) // 2
        acts = [x]
        h = x
        for i in range(n_layers):
            h = h @ ps[2 * i]
            h += ps[2 * i + 1]
            if i < n_layers - 1:
                np.maximum(h, 0.0, out=h)
            acts.append(h)
        logits = acts.pop()
        logits -= logits.max(axis=1, keepdims=True)
        e = np.exp(logits)
        s = e.sum(axis=1, keepdims=True)
        loss = float(np.mean(np.log(s[:, 0]) - logits[rows, y]))
        d = e / s
        d[rows, y] -= 1.0
        d /= len(y)
        for i in reversed(range(n_layers)):
            a = acts[i]
            gw = a.T @ d
            gb = d.sum(axis=0)
            if i > 0:
                d = d @ ps[2 * i].T
                d *= a > 0
            ps[2 * i] -= MLP_LR * gw
            ps[2 * i + 1] -= MLP_LR * gb
        return loss

    def params(self) -> list[np.ndarray]:
        """Current weights and biases."""
        return self.weights


class NumpyEmbedding:
    """The embedding step by hand: the rows' squared-error gradient, added in place."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.table = np.array(data["table"])
        self.idx, self.target = data["idx"], data["target"]

    def step(self) -> float:
        """One step; returns the cost before the update."""
        diff = self.table[self.idx] - self.target
        np.add.at(self.table, self.idx, (-2 * EMB_LR) * diff)
        return float((diff**2).sum())

    def params(self) -> list[np.ndarray]:
        """The table."""
        return [self.table]


# --------------------------------------------------------------------------- Theano API


def theano_api(engine: str) -> tuple[Any, Any]:
    """``(top-level module, tensor module)`` of ``opgraph`` or ``pytensor``."""
    if engine == "opgraph":
        import opgraph
        import opgraph.tensor as T

        return opgraph, T
    import pytensor
    import pytensor.tensor as pt

    return pytensor, pt


def build_logreg_step(engine: str, mode: Any, data: dict[str, Any]) -> tuple[Any, list[Any]]:
    """The tutorial's ``train`` function, compiled; returns (function, shared variables)."""
    th, T = theano_api(engine)
    x = T.dmatrix("x")
    y = T.dvector("y")
    w = th.shared(np.array(data["w"]), name="w")
    b = th.shared(float(data["b"]), name="b")
    p_1 = 1 / (1 + T.exp(-T.dot(x, w) - b))
    prediction = p_1 > 0.5
    xent = -y * T.log(p_1) - (1 - y) * T.log(1 - p_1)
    cost = xent.mean() + LOGREG_L2 * (w**2).sum()
    gw, gb = th.grad(cost, [w, b])
    train = th.function(
        inputs=[x, y],
        outputs=[prediction, xent],
        updates=((w, w - LOGREG_LR * gw), (b, b - LOGREG_LR * gb)),
        mode=mode,
    )
    return train, [w, b]


def _softmax_xent(engine: str, T: Any, logits: Any, y: Any) -> Any:
    """Mean softmax cross-entropy of integer labels, the idiom of each library."""
    if engine == "opgraph":
        return T.mean(T.nnet.categorical_crossentropy(T.nnet.softmax(logits), y))
    from pytensor.tensor.special import log_softmax

    return -T.mean(log_softmax(logits, axis=-1)[T.arange(y.shape[0]), y])


def mlp_graph(engine: str, data: dict[str, Any]) -> tuple[list[Any], Any, list[Any], list[Any]]:
    """The MLP's symbolic training step: (inputs, loss, SGD updates, shared parameters)."""
    th, T = theano_api(engine)
    x = T.dmatrix("x")
    y = T.ivector("y")
    shared = [
        th.shared(np.array(p), name=f"{'Wb'[k % 2]}{k // 2}") for k, p in enumerate(data["params"])
    ]
    n_layers = len(shared) // 2
    h = x
    for i in range(n_layers):
        h = T.dot(h, shared[2 * i]) + shared[2 * i + 1]
        if i < n_layers - 1:
            h = T.nnet.relu(h) if engine == "opgraph" else T.maximum(h, 0.0)
    loss = _softmax_xent(engine, T, h, y)
    grads = th.grad(loss, shared)
    updates = [(p, p - MLP_LR * g) for p, g in zip(shared, grads)]
    return [x, y], loss, updates, shared


def build_mlp_step(engine: str, mode: Any, data: dict[str, Any]) -> tuple[Any, list[Any]]:
    """The MLP training function ``f(x, y) -> loss`` with SGD updates; (function, shared)."""
    th, _ = theano_api(engine)
    inputs, loss, updates, shared = mlp_graph(engine, data)
    return th.function(inputs, loss, updates=updates, mode=mode), shared


def build_embedding_step(engine: str, mode: Any, data: dict[str, Any]) -> tuple[Any, list[Any]]:
    """The RNN tutorials' embedding update, compiled; returns (function, [table])."""
    th, T = theano_api(engine)
    table = th.shared(np.array(data["table"]), name="emb")
    idx, target = T.ivector("idx"), T.dmatrix("target")
    rows = table[idx]
    cost = ((rows - target) ** 2).sum()
    grad = th.grad(cost, rows)
    step = th.function(
        [idx, target], cost, updates=[(table, T.inc_subtensor(rows, -EMB_LR * grad))], mode=mode
    )
    return step, [table]


# --------------------------------------------------------------------------- JAX


def _jax_logreg(data: dict[str, Any]) -> tuple[Callable[[], Any], Callable[[], list[Any]]]:
    import jax
    import jax.numpy as jnp

    x, y = jnp.asarray(data["x"]), jnp.asarray(data["y"])

    def cost(w: Any, b: Any) -> Any:
        # log(p_1) and log(1 - p_1) as log-sigmoids: the tutorial's data saturate p_1 to 1.0,
        # where autodiff of jnp.log(1 - p_1) gives inf * 0 = NaN. opgraph and PyTensor
        # rewrite the same expression into this stable form themselves.
        z = x @ w + b
        xent = -y * jax.nn.log_sigmoid(z) - (1 - y) * jax.nn.log_sigmoid(-z)
        return xent.mean() + LOGREG_L2 * (w**2).sum(), (z > 0, xent)

    def step(w: Any, b: Any) -> Any:
        (_, (pred, xent)), (gw, gb) = jax.value_and_grad(cost, argnums=(0, 1), has_aux=True)(w, b)
        return w - LOGREG_LR * gw, b - LOGREG_LR * gb, pred, xent

    jstep = jax.jit(step, donate_argnums=(0, 1))
    state = [jnp.asarray(data["w"]), jnp.asarray(float(data["b"]))]

    def run() -> Any:
        w, b, _pred, xent = jstep(*state)
        state[:] = [w, b]
        return xent.block_until_ready()

    return run, lambda: [np.asarray(s) for s in state]


def jax_mlp_step() -> Callable[..., Any]:
    """The MLP's training step as a pure function ``step(params, x, y) -> (params, loss)``."""
    import jax
    import jax.numpy as jnp

    def loss_fn(params: list[Any], x: Any, y: Any) -> Any:
        h = x
        n_layers = len(params) // 2
        for i in range(n_layers):
            h = h @ params[2 * i] + params[2 * i + 1]
            if i < n_layers - 1:
                h = jnp.maximum(h, 0.0)
        logp = jax.nn.log_softmax(h, axis=-1)
        return -jnp.mean(logp[jnp.arange(y.shape[0]), y])

    def step(params: list[Any], x: Any, y: Any) -> Any:
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return [p - MLP_LR * g for p, g in zip(params, grads)], loss

    return step


def _jax_mlp(data: dict[str, Any]) -> tuple[Callable[[], Any], Callable[[], list[Any]]]:
    import jax
    import jax.numpy as jnp

    x, y = jnp.asarray(data["x"]), jnp.asarray(data["y"])
    jstep = jax.jit(jax_mlp_step(), donate_argnums=(0,))
    state = [[jnp.asarray(p) for p in data["params"]]]

    def run() -> Any:
        params, loss = jstep(state[0], x, y)
        state[0] = params
        return loss.block_until_ready()

    return run, lambda: [np.asarray(p) for p in state[0]]


def _jax_embedding(data: dict[str, Any]) -> tuple[Callable[[], Any], Callable[[], list[Any]]]:
    import jax
    import jax.numpy as jnp

    idx, target = jnp.asarray(data["idx"]), jnp.asarray(data["target"])

    def step(table: Any) -> Any:
        diff = table[idx] - target
        return table.at[idx].add(-2 * EMB_LR * diff), (diff**2).sum()

    jstep = jax.jit(step, donate_argnums=(0,))
    state = [jnp.asarray(data["table"])]

    def run() -> Any:
        state[0], cost = jstep(state[0])
        return cost.block_until_ready()

    return run, lambda: [np.asarray(state[0])]


# --------------------------------------------------------------------------- running


CHECK_STEPS = 3


def _engines(ctx: Context) -> list[tuple[str, str, Any]]:
    """``(label, engine, mode)`` of every Theano-API engine to run: opgraph, PyTensor."""
    out: list[tuple[str, str, Any]] = [
        (label, "opgraph", linker) for label, linker in opgraph_engines()
    ]
    out += [(p.label, "pytensor", p.key) for p in ctx.available_peers(["pytensor_c"])]
    out += [(p.label, "pytensor", p.key) for p in ctx.available_peers(["pytensor_numba"])]
    return out


def _mode(engine: str, spec: str) -> Any:
    return opgraph_mode(spec) if engine == "opgraph" else pytensor_mode(spec)


def _run_family(
    table: Table,
    case: str,
    ctx: Context,
    data: dict[str, Any],
    numpy_cls: Any,
    build: Callable[[str, Any, dict[str, Any]], tuple[Any, list[Any]]],
    inputs: Sequence[Any],
    jax_builder: Callable[[dict[str, Any]], tuple[Callable[[], Any], Callable[[], list[Any]]]],
    timing: dict[str, Any],
) -> None:
    """NumPy, then every engine, each checked against NumPy after ``CHECK_STEPS`` steps."""
    reference = numpy_cls(data)
    for _ in range(CHECK_STEPS):
        reference.step()
    expected = [np.array(p) for p in reference.params()]
    timed = numpy_cls(data)
    table.time(case, "NumPy (hand-written)", lambda: timed.step, ref=True, **timing)

    def check_params(params: Callable[[], list[Any]]) -> Callable[[Callable[[], Any]], str]:
        def check(fn: Callable[[], Any]) -> str:
            for _ in range(CHECK_STEPS):
                fn()
            return norm_check(params(), expected)

        return check

    for label, engine, spec in _engines(ctx):
        holder: dict[str, Any] = {}

        def make(engine: str = engine, spec: str = spec, holder: dict[str, Any] = holder) -> Any:
            f, shared = build(engine, _mode(engine, spec), data)
            holder["shared"] = shared
            return lambda: f(*inputs)

        shared_values = check_params(lambda h=holder: [s.get_value() for s in h["shared"]])
        table.time(case, label, make, check=shared_values, **timing)
    if ctx.peers.get("jax") is not None and ctx.peers["jax"].ok:
        holder_j: dict[str, Any] = {}

        def make_jax() -> Any:
            run, params = jax_builder(data)
            holder_j["params"] = params
            return run

        jax_values = check_params(lambda: holder_j["params"]())
        table.time(case, "JAX", make_jax, check=jax_values, **timing)


def run(workload: str, ctx: Context) -> Table:
    """W2 (logistic regression), W3 or W9 (MLPs), W18 (embedding): time per training step."""
    table = Table(workload, WORKLOADS[workload])
    if workload == "W2":
        steps = 500 if ctx.quick else 10_000
        rounds = ctx.repeat(full=10, quick=5)
        per_round = max(1, steps // rounds)
        table.detail = (
            f"{rounds * per_round} steps timed in {rounds} rounds of {per_round} after "
            f"{CHECK_STEPS} check steps and 1 warm-up; time per step; "
            "check = parameter difference from NumPy after 3 steps"
        )
        data = logreg_data()
        timing = {"repeat": rounds, "number": per_round, "warmup": 1}
        _run_family(
            table,
            "logreg step",
            ctx,
            data,
            NumpyLogReg,
            build_logreg_step,
            (data["x"], data["y"]),
            _jax_logreg,
            timing,
        )
    elif workload == "W18":
        rounds = ctx.repeat(full=10, quick=5)
        table.detail = (
            f"{rounds} rounds of >= 0.2 s after {CHECK_STEPS} check steps and 1 warm-up; "
            "time per step; check = table difference from NumPy after 3 steps"
        )
        data = embedding_data()
        _run_family(
            table,
            "embedding step",
            ctx,
            data,
            NumpyEmbedding,
            build_embedding_step,
            (data["idx"], data["target"]),
            _jax_embedding,
            {"repeat": rounds, "min_round_s": 0.2, "warmup": 1},
        )
    else:
        rounds = ctx.repeat(full=10, quick=5)
        round_s = 0.1 if ctx.quick else 0.3
        table.detail = (
            f"{rounds} rounds of >= {round_s:g} s after {CHECK_STEPS} check steps and 1 "
            "warm-up; time per step; check = parameter difference from NumPy after 3 steps"
        )
        data = mlp_data() if workload == "W3" else mlp_data(0, SMALL_MLP_SIZES, SMALL_MLP_BATCH)
        timing = {"repeat": rounds, "min_round_s": round_s, "warmup": 1}
        _run_family(
            table,
            "MLP step" if workload == "W3" else "small MLP step",
            ctx,
            data,
            NumpyMLP,
            build_mlp_step,
            (data["x"], data["y"]),
            _jax_mlp,
            timing,
        )
    missing = ctx.peer_summary()
    if missing:
        table.note(f"peers not run: {missing}")
    return table
