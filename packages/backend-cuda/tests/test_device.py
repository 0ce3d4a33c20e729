"""``device=cuda`` as a Theano program sets it: in a fresh process, with the flags in
``OPGRAPH_FLAGS``, since ``device`` cannot change once read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

ON_GPU = os.environ.get("OPGRAPH_TEST_GPU") == "1"

#: A float32 MLP training loop as a Theano user writes it; prints a JSON summary.
PROGRAM = textwrap.dedent(
    """
    import json
    import numpy as np
    import opgraph as theano
    import opgraph.tensor as T

    rng = np.random.RandomState(0)
    X = rng.randn(64, 20).astype("float32")
    Y = rng.randint(0, 3, size=64).astype("int32")
    W1 = theano.shared(rng.randn(20, 16).astype("float32") * 0.1, name="W1")
    b1 = theano.shared(np.zeros(16, "float32"), name="b1")
    W2 = theano.shared(rng.randn(16, 3).astype("float32") * 0.1, name="W2")
    b2 = theano.shared(np.zeros(3, "float32"), name="b2")
    x = T.matrix("x")
    y = T.ivector("y")
    h = T.tanh(T.dot(x, W1) + b1)
    p = T.nnet.softmax(T.dot(h, W2) + b2)
    cost = T.nnet.categorical_crossentropy(p, y).mean()
    params = [W1, b1, W2, b2]
    grads = T.grad(cost, params)
    train = theano.function(
        [x, y], cost, updates=[(v, v - np.float32(0.5) * g) for v, g in zip(params, grads)]
    )
    costs = [float(train(X, Y)) for _ in range(20)]
    ops = sorted({type(n.op).__name__ for n in train.maker.fgraph.toposort()})
    print(json.dumps({
        "costs": costs,
        "W2": W2.get_value().tolist(),
        "shared": type(W1).__name__,
        "ops": ops,
    }))
    """
)


def _run(flags: str, code: str = PROGRAM) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, OPGRAPH_FLAGS=flags)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600
    )


def _summary(flags: str) -> dict:
    proc = _run(flags)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]), stderr=proc.stderr)


def test_mlp_training_under_device_cuda_matches_the_cpu():
    runtime = "" if ON_GPU else ",cuda__emulate=True"
    gpu = _summary("device=cuda,floatX=float32" + runtime)
    cpu = _summary("device=cpu,floatX=float32")
    assert gpu["shared"] == "GpuArraySharedVariable" and cpu["shared"] == "TensorSharedVariable"
    assert "GpuFromHost" in gpu["ops"] and "GpuElemwise" in gpu["ops"], gpu["ops"]
    assert "GpuGemm" in gpu["ops"] or "GpuDot22" in gpu["ops"], gpu["ops"]
    assert gpu["costs"][-1] < gpu["costs"][0]
    if ON_GPU:  # Theano's start-up line (print_active_device)
        assert "Mapped name None to device cuda0: " in gpu["stderr"]
    # float32 on two devices: the same numbers up to float32 rounding.
    assert gpu["costs"] == pytest.approx(cpu["costs"], rel=2e-4)
    np.testing.assert_allclose(gpu["W2"], cpu["W2"], rtol=2e-3, atol=2e-5)


@pytest.mark.skipif(ON_GPU, reason="checks the message of a machine without PyCUDA")
def test_device_cuda_without_pycuda_says_what_to_install():
    code = (
        "import warnings, numpy as np, opgraph\n"
        "warnings.simplefilter('always')\n"
        "x = opgraph.shared(np.ones(3, 'float32'))\n"
        "print(type(x).__name__)\n"
    )
    proc = _run("device=cuda", code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "TensorSharedVariable"
    try:
        import pycuda  # noqa: F401

        pytest.skip("PyCUDA is installed here")
    except ImportError:
        pass
    assert "PyCUDA is not installed" in proc.stderr
    assert "opgraph-backend-cuda[pycuda]" in proc.stderr
    forced = _run("device=cuda,force_device=True", code)
    assert forced.returncode != 0 and "PyCUDA is not installed" in forced.stderr


def test_plugins_listing_says_which_gpu_or_why_none():
    env = dict(os.environ, OPGRAPH_FLAGS="")
    proc = subprocess.run(
        [sys.executable, "-m", "opgraph", "plugins"], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr
    block = proc.stdout.split("backend_cuda", 1)[1]
    assert "gpuarray" in block and "cuda__emulate" in block
    state = next(line for line in block.splitlines() if line.strip().startswith("state"))
    assert ("GPU: " in state) if ON_GPU else ("GPU unavailable" in state)
