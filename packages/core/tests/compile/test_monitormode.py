"""``opgraph.compile.MonitorMode`` (Theano's): pre_func/post_func around every node."""

from __future__ import annotations

import pickle
import warnings

import numpy as np

import opgraph as theano
import opgraph.tensor as T
from opgraph.compile.monitormode import MonitorMode, detect_nan


def _recorders() -> tuple[list, object, object]:
    seen: list = []

    def pre(i, node, fn):  # type: ignore[no-untyped-def]
        seen.append(("pre", i, str(node.op), [np.asarray(c[0]).copy() for c in fn.inputs]))

    def post(i, node, fn):  # type: ignore[no-untyped-def]
        seen.append(("post", i, str(node.op), [np.asarray(c[0]).copy() for c in fn.outputs]))

    return seen, pre, post


def test_theano_tutorial_example() -> None:
    x = T.dscalar("x")
    seen, pre, post = _recorders()
    f = theano.function([x], [5 * x], mode=theano.compile.MonitorMode(pre_func=pre, post_func=post))
    assert f(3.0)[0] == 15.0
    # Theano 1.0.5: [('pre', 0, 'Elemwise{mul,no_inplace}', [5.0, 3.0]),
    #                ('post', 0, 'Elemwise{mul,no_inplace}', [15.0])]
    assert [(k, i, op) for k, i, op, _ in seen] == [
        ("pre", 0, "Elemwise{mul,no_inplace}"),
        ("post", 0, "Elemwise{mul,no_inplace}"),
    ]
    assert sorted(float(v) for v in seen[0][3]) == [3.0, 5.0]
    assert [float(v) for v in seen[1][3]] == [15.0]


def test_every_node_in_order_with_optimizer_none() -> None:
    x = T.dvector("x")
    seen, pre, post = _recorders()
    mode = MonitorMode(pre_func=pre, post_func=post, optimizer=None)
    f = theano.function([x], T.exp(x).sum() * 2, mode=mode)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = f(np.array([0.0, 1.0]))
    assert np.isclose(out, 2 * (1 + np.e))
    pres = [i for k, i, _, _ in seen if k == "pre"]
    posts = [i for k, i, _, _ in seen if k == "post"]
    assert pres == posts == list(range(len(f.maker.fgraph.toposort())))
    # each pre comes right before its post
    assert [k for k, *_ in seen] == ["pre", "post"] * len(pres)


def test_only_one_function_and_clone_and_pickle() -> None:
    x = T.dvector("x")
    seen, pre, _ = _recorders()
    mode = MonitorMode(pre_func=pre)
    theano.function([x], x + 1, mode=mode)(np.ones(2))
    assert seen and all(k == "pre" for k, *_ in seen)
    clone = mode.clone(optimizer="fast_compile")
    assert isinstance(clone, MonitorMode) and clone.pre_func is pre
    assert clone.provided_optimizer == "fast_compile"
    plain = pickle.loads(pickle.dumps(MonitorMode()))
    assert isinstance(plain, MonitorMode) and plain.pre_func is None


def test_detect_nan_prints_the_node(capsys) -> None:  # type: ignore[no-untyped-def]
    x = T.dvector("x")
    f = theano.function([x], T.log(x), mode=MonitorMode(post_func=detect_nan))
    with np.errstate(invalid="ignore"):
        f(np.array([-1.0, 1.0]))
    out = capsys.readouterr().out
    assert "*** NaN detected ***" in out and "log" in out


def test_linker_argument_is_refused() -> None:
    try:
        MonitorMode(linker="py")
    except ValueError as exc:
        assert "MonitorMode can only use its own linker" in str(exc)
    else:
        raise AssertionError("MonitorMode accepted a linker")
