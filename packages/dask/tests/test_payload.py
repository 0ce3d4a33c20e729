"""Block tasks carry their Op as a payload: pickled once, rebuilt once per process, with the
classes the C backend knows."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap

import dask
import dask.array as da
import numpy as np
from distributed.protocol.pickle import dumps as task_dumps
from distributed.protocol.pickle import loads as task_loads

import opgraph.scalar.basic as ps
import opgraph.tensor as T
from opgraph import function
from opgraph.tensor.elemwise import Elemwise
from opgraph_dask.lowerings.elemwise import ChunkFunction, lower_elemwise
from opgraph_dask.payload import Payload, dumps, payload_of


def _sigmoid_node():
    x, y = T.vector("x"), T.vector("y")
    f = function([x, y], T.nnet.sigmoid(x) * y + T.softplus(x), mode="FAST_RUN")
    (node,) = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, Elemwise)]
    return f, node


def test_misnamed_scalar_classes_pickle_by_reference() -> None:
    # opgraph.scalar.basic.Sigmoid is a class named ScalarSigmoid (Theano's printed name);
    # core binds that name too, so pickle refers to the class instead of copying it (a copy
    # would miss backend-c's C code on the workers)
    assert pickle.loads(dumps(ps.sigmoid)).__class__ is ps.Sigmoid
    assert pickle.loads(dumps(ps.softplus)).__class__ is ps.Softplus
    assert pickle.loads(pickle.dumps(ps.Sigmoid)) is ps.Sigmoid
    assert b"ScalarSigmoid" in pickle.dumps(ps.Sigmoid)  # by reference: module and name


def test_payload_is_rebuilt_once_per_process() -> None:
    _, node = _sigmoid_node()
    payload = payload_of(ChunkFunction(node.op, [v.type for v in node.inputs]))
    data = pickle.dumps(payload)
    assert pickle.loads(data) is pickle.loads(data)  # the process's payload for the token
    assert len(data) < 4000  # compressed, no creation traces


def test_block_tasks_share_one_payload() -> None:
    f, node = _sigmoid_node()
    xv, yv = np.linspace(-3, 3, 64), np.arange(64.0)
    (out,) = lower_elemwise(node, [da.from_array(xv, 8), da.from_array(yv, 8)])
    graph = dict(out.__dask_graph__())
    tasks = [t for k, t in graph.items() if k[0] == out.name]
    assert len(tasks) == 8
    restored = [task_loads(task_dumps(t)) for t in tasks]  # as a scheduler sends them
    payloads = {
        id(a.value)
        for t in restored
        for a in t.args
        if isinstance(getattr(a, "value", None), Payload)
    }  # the payload argument is a DataNode holding it
    assert len(payloads) == 1
    np.testing.assert_allclose(out.compute(scheduler="sync"), f(xv, yv))


def test_fresh_process_runs_the_c_kernel() -> None:
    # A worker never compiled the graph: the unpickled Composite must still get C code.
    _, node = _sigmoid_node()
    data = pickle.dumps(payload_of(ChunkFunction(node.op, [v.type for v in node.inputs])))
    code = textwrap.dedent(
        """
        import pickle, sys, warnings
        import numpy as np
        warnings.simplefilter("error")
        payload = pickle.loads(sys.stdin.buffer.read())
        out = payload.value(np.linspace(-3, 3, 5), np.arange(5.0))
        print(np.asarray(out).shape)
        """
    )
    res = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, timeout=120)
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    assert b"KernelFallbackWarning" not in res.stderr


def test_threaded_compute_matches() -> None:
    f, node = _sigmoid_node()
    xv, yv = np.linspace(-3, 3, 40), np.arange(40.0)
    (out,) = lower_elemwise(node, [da.from_array(xv, 7), da.from_array(yv, 7)])
    with dask.config.set(scheduler="threads"):
        np.testing.assert_allclose(out.compute(), f(xv, yv))
