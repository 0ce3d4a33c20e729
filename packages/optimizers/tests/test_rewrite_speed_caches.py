"""The caches that keep rewriting a big elementwise chain cheap, and that they change nothing.

Canonicalize's per-graph constants (one ``TensorConstant`` per value, dtype and rank within a
FunctionGraph), the shared output types of Elemwise nodes, the canonical-dtype shortcut of
``TensorType`` and the creation-trace mark a rewrite leaves for the variables it makes.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.graph.fg import FunctionGraph
from opgraph.graph.utils import trace_marks, user_frames
from opgraph.rewriting import node_rewriter
from opgraph.rewriting.basic import WalkingGraphRewriter
from opgraph.tensor.type import TensorType
from opgraph_optimizers.canonicalize.utils import CONSTANT_CACHE_ATTR, broadcast_constant


def _fgraph() -> FunctionGraph:
    x = T.dvector("x")
    return FunctionGraph([x], [x * 2], clone=False)


def test_broadcast_constant_shared_within_a_graph() -> None:
    fg = _fgraph()
    a = broadcast_constant(0.5, "float64", 1, fg)
    assert broadcast_constant(0.5, "float64", 1, fg) is a
    assert broadcast_constant(np.float32(0.5), "float64", 1, fg) is a  # the same bytes
    assert broadcast_constant(0.5, "float32", 1, fg) is not a
    assert broadcast_constant(0.5, "float64", 2, fg) is not a
    assert broadcast_constant(-0.0, "float64", 1, fg) is not broadcast_constant(
        0.0, "float64", 1, fg
    )
    nan = broadcast_constant(np.nan, "float64", 1, fg)
    assert broadcast_constant(np.nan, "float64", 1, fg) is nan
    assert a.type == TensorType("float64", (True,)) and a.data.tolist() == [0.5]


def test_broadcast_constant_not_shared_between_graphs() -> None:
    fg1, fg2 = _fgraph(), _fgraph()
    assert broadcast_constant(0.5, "float64", 1, fg1) is not broadcast_constant(
        0.5, "float64", 1, fg2
    )
    assert broadcast_constant(0.5, "float64", 1) is not broadcast_constant(0.5, "float64", 1)
    assert CONSTANT_CACHE_ATTR not in fg1.clone().__dict__


def test_broadcast_constant_cache_not_pickled() -> None:
    fg = _fgraph()
    broadcast_constant(0.5, "float64", 1, fg)
    assert CONSTANT_CACHE_ATTR not in pickle.loads(pickle.dumps(fg)).__dict__


def test_canonicalized_chain_shares_its_constants() -> None:
    x = T.dvector("x")
    y = x
    for _ in range(10):
        y = T.tanh(y + 0.5)
    f = function([x], y, mode=Mode(linker="py", optimizer="fast_compile"))
    consts = {
        id(v)
        for n in f.maker.fgraph.apply_nodes
        for v in n.inputs
        if getattr(v, "data", None) is not None
    }
    assert len(consts) == 1
    expected = np.zeros(2)
    for _ in range(10):
        expected = np.tanh(expected + 0.5)
    np.testing.assert_allclose(f(np.zeros(2)), expected)


def test_elemwise_outputs_share_their_type() -> None:
    x, y = T.dvector("x"), T.dvector("y")
    assert (x + y).type is (x * y).type
    assert (x + y).type == TensorType("float64", (False,))
    assert (x + T.dmatrix("m")).type is not (x + y).type


@pytest.mark.parametrize(
    "dtype, name",
    [("float64", "float64"), ("float", "float64"), (np.float32, "float32"), ("i8", "int64")],
)
def test_tensor_type_dtype_names(dtype: object, name: str) -> None:
    assert TensorType(dtype, (False,)).dtype == name


def test_tensor_type_rejects_bad_dtypes() -> None:
    with pytest.raises(TypeError):
        TensorType("float128x", (False,))
    with pytest.raises(TypeError):
        TensorType("U3", (False,))


def test_variables_made_by_a_rewrite_keep_the_full_creation_trace() -> None:
    seen = []

    @node_rewriter(None)
    def local_look(fgraph, node):  # type: ignore[no-untyped-def]
        if not seen:
            marked = user_frames(8, skip=1)
            saved = list(trace_marks())
            assert saved  # the rewrite left its mark
            trace_marks().clear()
            try:
                full = user_frames(8, skip=1)
            finally:
                trace_marks().extend(saved)
            seen.append((marked, full))
        return None

    x = T.dvector("x")
    fg = FunctionGraph([x], [T.exp(x) * 2], clone=False)
    WalkingGraphRewriter(local_look).rewrite(fg)
    assert not trace_marks()
    ((marked, full),) = seen
    assert marked[0][2] == full[0][2] == "local_look"  # (two lines of it)
    assert marked[1:] == full[1:]
    assert any(__file__ == f for f, _, _ in full)


@pytest.mark.parametrize(
    "dtypes",
    [
        ("float64", "float64"),
        ("int8", "uint8"),
        ("int64", "float32"),
        ("bool", "bool"),
        ("float32", "complex64"),
        (np.dtype("int16"), "uint32"),
    ],
)
def test_upcast_cached_answers_numpy(dtypes: tuple[object, ...]) -> None:
    from opgraph.scalar.type import upcast

    expected = str(np.result_type(*(np.dtype(d) for d in dtypes)))
    assert upcast(*dtypes) == expected
    assert upcast(*dtypes) == expected  # from the cache


def test_upcast_cache_follows_cast_policy() -> None:
    from opgraph.configdefaults import config
    from opgraph.scalar.type import upcast

    assert upcast("int64", "float32") == "float64"
    with config.change_flags(cast_policy="numpy+floatX", floatX="float32"):
        assert upcast("int64", "float32") == "float32"
        assert upcast("float64", "float32") == "float64"
    assert upcast("int64", "float32") == "float64"


def test_trace_limit_follows_the_flag() -> None:
    from opgraph.configdefaults import config
    from opgraph.graph.utils import _trace_limit

    before = _trace_limit()
    assert before == config.traceback__limit
    with config.change_flags(traceback__limit=3):
        assert _trace_limit() == 3
        x = T.dvector("x")
        assert len((x + 1).tag.trace) <= 3
    assert _trace_limit() == before
