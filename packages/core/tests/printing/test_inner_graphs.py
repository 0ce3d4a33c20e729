"""Inner graphs in debugprint (Theano's "Inner graphs of the scan ops:"), in the pictures,
and in the profiler.

The golden strings come from the Theano 1.0.5 oracle (``debugprint`` of ``theano.map`` and of
an ``until`` loop); toy Ops rebuild Theano's exact graphs, so the whole text is compared. Real
``opgraph.scan`` graphs differ from Theano's outside the loop (other rewrites), so they are
checked structurally: the section, the ``>`` prefixes, and that every ``-> [id X]`` is the id of
the outer input the inner input reads from.
"""

from __future__ import annotations

import io
import re
import shutil
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.op import Op
from opgraph.graph.type import Type
from opgraph.printing.debugprint import debugprint, inner_to_outer, is_loop_op
from opgraph.printing.pydot import collect_graph

# ---------------------------------------------------------------- toy graphs, Theano's text


class _T(Type):
    """A type printing as Theano's ``TensorType(float64, vector)`` (or any given text)."""

    __props__ = ("text",)

    def __init__(self, text: str = "TensorType(float64, vector)") -> None:
        self.text = text

    def filter(self, data: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        return data

    def __str__(self) -> str:
        return self.text


class _Const(Constant):
    """Prints as the given text (``Constant{0}``, ``TensorConstant{2}``)."""

    def __str__(self) -> str:
        return self.name or ""


def const(text: str, type_text: str = "int64") -> _Const:
    c = _Const(_T(type_text), 0)
    c.name = text
    return c


class Named(Op):
    """An Op printing as ``text``: a stand-in for Theano's Subtensor, Shape, Elemwise..."""

    __props__ = ("text", "out_type")

    def __init__(self, text: str, out_type: str = "TensorType(int64, scalar)") -> None:
        self.text = text
        self.out_type = out_type

    def __str__(self) -> str:
        return self.text

    def make_node(self, *inputs: Variable) -> Apply:
        return Apply(self, list(inputs), [_T(self.out_type)()])


class ToyLoop(Op):
    """A loop in the shape printing looks for: ``inner_inputs``, ``inner_outputs`` and
    ``outer_input_index`` (no import of the Scan module)."""

    def __init__(
        self,
        inner_inputs: Sequence[Variable],
        inner_outputs: Sequence[Variable],
        where: list[int],
        n_out: int | None = None,
    ) -> None:
        self.inner_inputs = list(inner_inputs)
        self.inner_outputs = list(inner_outputs)
        self.where = where
        self.n_out = len(self.inner_outputs) if n_out is None else n_out
        self.text = "for{cpu,scan_fn}"

    def outer_input_index(self, k: int) -> int:
        return self.where[k]

    def __str__(self) -> str:
        return self.text

    def make_node(self, *inputs: Variable) -> Apply:
        return Apply(self, list(inputs), [_T()() for _ in range(self.n_out)])


class ToyGraphOp(Op):
    """An Op defined by a graph without ``outer_input_index`` (like OpFromGraph)."""

    def __init__(self, inner_inputs: Sequence[Variable], inner_outputs: Sequence[Variable]):
        self.inner_inputs = list(inner_inputs)
        self.inner_outputs = list(inner_outputs)

    def __str__(self) -> str:
        return "OpFromGraph{inline=False}"

    def make_node(self, *inputs: Variable) -> Apply:
        return Apply(self, list(inputs), [v.type() for v in self.inner_outputs])


def theano_map_graph() -> Variable:
    """``theano.map(lambda xt: T.exp(xt), sequences=x)`` as Theano 1.0 builds it."""
    x = _T()("x")
    seq0 = Named("Subtensor{int64::}", "TensorType(float64, vector)")(x, const("Constant{0}"))
    seq0.name = "x[0:]"
    n = Named("Subtensor{int64}")(
        Named("Shape", "TensorType(int64, vector)")(seq0), const("Constant{0}")
    )
    stop = Named("ScalarFromTensor", "int64")(n)
    seq = Named("Subtensor{:int64:}", "TensorType(float64, vector)")(seq0, stop)
    xt = _T("TensorType(float64, scalar)")("x[t]")
    body = Named("Elemwise{exp,no_inplace}", "TensorType(float64, scalar)")(xt)
    return ToyLoop([xt], [body], [1])(n, seq, n)


# Theano 1.0.5: debugprint(theano.map(lambda xt: T.exp(xt), sequences=x)[0]).
THEANO_MAP = """\
for{cpu,scan_fn} [id A] ''   
 |Subtensor{int64} [id B] ''   
 | |Shape [id C] ''   
 | | |Subtensor{int64::} [id D] 'x[0:]'   
 | |   |x [id E]
 | |   |Constant{0} [id F]
 | |Constant{0} [id G]
 |Subtensor{:int64:} [id H] ''   
 | |Subtensor{int64::} [id D] 'x[0:]'   
 | |ScalarFromTensor [id I] ''   
 |   |Subtensor{int64} [id B] ''   
 |Subtensor{int64} [id B] ''   

Inner graphs of the scan ops:

for{cpu,scan_fn} [id A] ''   
 >Elemwise{exp,no_inplace} [id J] ''   
 > |x[t] [id K] -> [id H]
"""  # noqa: W291

# The same with ids='int', print_type=True.
THEANO_MAP_INT_TYPES = """\
for{cpu,scan_fn} [id 0] <TensorType(float64, vector)> ''   
 |Subtensor{int64} [id 1] <TensorType(int64, scalar)> ''   
 | |Shape [id 2] <TensorType(int64, vector)> ''   
 | | |Subtensor{int64::} [id 3] <TensorType(float64, vector)> 'x[0:]'   
 | |   |x [id 4] <TensorType(float64, vector)>
 | |   |Constant{0} [id 5] <int64>
 | |Constant{0} [id 6] <int64>
 |Subtensor{:int64:} [id 7] <TensorType(float64, vector)> ''   
 | |Subtensor{int64::} [id 3] <TensorType(float64, vector)> 'x[0:]'   
 | |ScalarFromTensor [id 8] <int64> ''   
 |   |Subtensor{int64} [id 1] <TensorType(int64, scalar)> ''   
 |Subtensor{int64} [id 1] <TensorType(int64, scalar)> ''   

Inner graphs of the scan ops:

for{cpu,scan_fn} [id 0] <TensorType(float64, vector)> ''   
 >Elemwise{exp,no_inplace} [id 9] <TensorType(float64, scalar)> ''   
 > |x[t] [id 10] <TensorType(float64, scalar)> -> [id 7]
"""  # noqa: W291

# The same with ids=''.
THEANO_MAP_NO_IDS = """\
for{cpu,scan_fn}  ''   
 |Subtensor{int64}  ''   
 | |Shape  ''   
 | | |Subtensor{int64::}  'x[0:]'   
 | |   |x 
 | |   |Constant{0} 
 | |Constant{0} 
 |Subtensor{:int64:}  ''   
 | |Subtensor{int64::}  'x[0:]'   
 | |ScalarFromTensor  ''   
 |   |Subtensor{int64}  ''   
 |Subtensor{int64}  ''   

Inner graphs of the scan ops:

for{cpu,scan_fn}  ''   
 >Elemwise{exp,no_inplace}  ''   
 > |x[t]  -> 
"""  # noqa: W291


def test_map_matches_theano_char_ids():
    assert debugprint(theano_map_graph(), file="str") == THEANO_MAP


def test_map_matches_theano_int_ids_and_types():
    out = debugprint(theano_map_graph(), file="str", ids="int", print_type=True)
    assert out == THEANO_MAP_INT_TYPES


def test_map_matches_theano_without_ids():
    assert debugprint(theano_map_graph(), file="str", ids="") == THEANO_MAP_NO_IDS


def test_until_loop_matches_theano_compiled_layout():
    """Theano 1.0.5, ``debugprint(theano.function([h0], w))`` of a doubling loop with
    ``until(new > 50)``: the condition is the last inner output, printed like the others."""
    h0 = _T("TensorType(float64, scalar)")("h0")
    c100 = const("TensorConstant{100}")
    dim = Named("InplaceDimShuffle{x}", "TensorType(float64, (True,))")(h0)
    reb = Named("Rebroadcast{0}", "TensorType(float64, (True,))")(dim)
    empty = Named("AllocEmpty{dtype='float64'}", "TensorType(float64, vector)")(
        const("TensorConstant{101}")
    )
    one = const("Constant{1}")
    init = Named("IncSubtensor{InplaceSet;:int64:}", "TensorType(float64, vector)")(empty, reb, one)
    prev = _T("TensorType(float64, scalar)")("h0[t-1]")
    new = Named("Elemwise{mul,no_inplace}", "TensorType(float64, scalar)")(
        const("TensorConstant{2.0}"), prev
    )
    cond = Named("Elemwise{gt,no_inplace}", "TensorType(bool, scalar)")(
        new, const("TensorConstant{50}")
    )
    loop = ToyLoop([prev], [new, cond], [1], n_out=1)  # cond: the until condition
    loop.text = "do_whileall_inplace,cpu,scan_fn}"
    node = loop.make_node(c100, init)
    out = Named("Subtensor{int64::}", "TensorType(float64, vector)")(node.outputs[0], one)
    order = [dim.owner, reb.owner, empty.owner, init.owner, node, out.owner]
    fn = _Function(order, [out])
    assert debugprint(fn, file="str") == (
        "Subtensor{int64::} [id A] ''   5\n"
        " |do_whileall_inplace,cpu,scan_fn} [id B] ''   4\n"
        " | |TensorConstant{100} [id C]\n"
        " | |IncSubtensor{InplaceSet;:int64:} [id D] ''   3\n"
        " |   |AllocEmpty{dtype='float64'} [id E] ''   2\n"
        " |   | |TensorConstant{101} [id F]\n"
        " |   |Rebroadcast{0} [id G] ''   1\n"
        " |   | |InplaceDimShuffle{x} [id H] ''   0\n"
        " |   |   |h0 [id I]\n"
        " |   |Constant{1} [id J]\n"
        " |Constant{1} [id J]\n"
        "\n"
        "Inner graphs of the scan ops:\n"
        "\n"
        "do_whileall_inplace,cpu,scan_fn} [id B] ''   \n"
        " >Elemwise{mul,no_inplace} [id K] ''   \n"
        " > |TensorConstant{2.0} [id L]\n"
        " > |h0[t-1] [id M] -> [id D]\n"
        " >Elemwise{gt,no_inplace} [id N] ''   \n"
        " > |Elemwise{mul,no_inplace} [id K] ''   \n"
        " > |TensorConstant{50} [id O]\n"
    )


class _Fgraph:
    def __init__(self, order: list[Apply], outputs: list[Variable]) -> None:
        self.order, self.outputs, self.inputs = order, outputs, []

    def toposort(self) -> list[Apply]:
        return list(self.order)


class _Function:
    """What debugprint reads of a compiled function: ``maker.fgraph``."""

    def __init__(self, order: list[Apply], outputs: list[Variable]) -> None:
        self.maker = type("Maker", (), {})()
        self.maker.fgraph = _Fgraph(order, outputs)


def test_loop_met_through_two_outputs_is_listed_twice_like_theano():
    """Theano appends a loop output each time a first-printed node uses one: the loop's block
    repeats, its inner nodes as one line each (already printed)."""
    x = _T()("x")
    a, b = _T()("a[t-1]"), _T()("b[t-1]")
    loop = ToyLoop(
        [a, b], [Named("Elemwise{add,no_inplace}")(a), Named("Elemwise{mul}")(b)], [1, 1]
    )
    node = loop.make_node(const("n"), x)
    text = debugprint(list(node.outputs), file="str")
    section = text.split("Inner graphs of the scan ops:\n")[1]
    assert section == (
        "\n"
        "for{cpu,scan_fn}.0 [id A] ''   \n"
        " >Elemwise{add,no_inplace} [id D] ''   \n"
        " > |a[t-1] [id E] -> [id C]\n"
        " >Elemwise{mul} [id F] ''   \n"
        " > |b[t-1] [id G] -> [id C]\n"
        "\n"
        "for{cpu,scan_fn}.1 [id A] ''   \n"
        " >Elemwise{add,no_inplace} [id D] ''   \n"
        " >Elemwise{mul} [id F] ''   \n"
    )


def test_op_from_graph_prints_as_one_node_like_theano():
    """Theano 1.0's debugprint shows no inner graph for an OpFromGraph (only scan ops)."""
    a, b = _T()("a"), _T()("b")
    op = ToyGraphOp([a, b], [Named("Elemwise{add,no_inplace}")(a, b)])
    x, h = _T()("x"), _T()("h0")
    assert debugprint(op(x, h), file="str") == (
        "OpFromGraph{inline=False} [id A] ''   \n |x [id B]\n |h0 [id C]\n"
    )
    assert not is_loop_op(op)
    assert inner_to_outer(op(x, h).owner, op.inner_inputs) == {a: x, b: h}


def test_depth_limit_applies_inside_inner_graphs():
    text = debugprint(theano_map_graph(), file="str", depth=1)
    assert text.splitlines()[-2:] == [
        "for{cpu,scan_fn} [id A] ''   ",
        " >Elemwise{exp,no_inplace} [id B] ''   ",
    ]


# ---------------------------------------------------------------- real scan graphs

LINK = re.compile(r"^ >(?: [| ])*[ |]?(\S.*?) (\[id [^]]+\]) -> (\[id [^]]+\])$")


def _quiet_function(*args: Any, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return opgraph.function(*args, **kwargs)


def _loops(fn: Any) -> list[Apply]:
    return [n for n in fn.maker.fgraph.toposort() if is_loop_op(n.op)]


def check_links(text: str, used: dict[Any, str], node: Apply) -> int:
    """Every ``-> [id X]`` line of ``node``'s block names the id of the outer input its inner
    input reads from; returns how many links were checked."""
    block = text.split(f"{node.op} {used[node]} ''   \n", 2)[-1].split("\n\n")[0]
    by_name: dict[str, str] = {}
    for v, outer in inner_to_outer(node, node.op.inner_inputs).items():
        by_name[str(v)] = used.get(outer.owner if outer.owner is not None else outer, "?")
    n = 0
    for line in block.splitlines():
        assert line.startswith(" >"), line
        m = LINK.match(line)
        if m and m.group(1) in by_name:
            assert m.group(3) == by_name[m.group(1)], (line, by_name)
            n += 1
    return n


def test_power_example_compiled_links_resolve():
    k, A = T.iscalar("k"), T.vector("A")
    result, updates = opgraph.scan(
        lambda prior, A: prior * A, outputs_info=T.ones_like(A), non_sequences=A, n_steps=k
    )
    f = _quiet_function([A, k], result[-1], updates=updates)
    np.testing.assert_allclose(f(np.arange(3.0), 3), np.arange(3.0) ** 3)
    used: dict[Any, str] = {}
    text = debugprint(f, file="str", used_ids=used)
    head, section = text.split("\nInner graphs of the scan ops:\n\n")
    (node,) = _loops(f)
    assert f"{node.op} {used[node]} ''" in head
    assert section.startswith(f"{node.op} {used[node]} ''   \n >")
    assert check_links(text, used, node) == 2  # the state and A
    # The uncompiled graph prints its section too, with the same inner ops.
    text = debugprint(result[-1], file="str")
    assert "Inner graphs of the scan ops:" in text
    assert re.search(r" >Elemwise\{mul,no_inplace\} \[id \w+\] ''   \n > \|", text)


def test_sitsot_with_sequence_int_ids():
    x, h0 = T.vector("x"), T.scalar("h0")
    out, _ = opgraph.scan(lambda xt, h: h + xt * 2 + 1, sequences=x, outputs_info=h0)
    f = _quiet_function([x, h0], out)
    np.testing.assert_allclose(f(np.arange(4.0), 1.0), 1 + np.cumsum(np.arange(4.0) * 2 + 1))
    used: dict[Any, str] = {}
    text = debugprint(f, file="str", ids="int", used_ids=used)
    (node,) = _loops(f)
    assert all(re.fullmatch(r"\[id \d+\]", v) for v in used.values())
    assert check_links(text, used, node) >= 1
    assert re.search(r"h0\[t-1\] \[id \d+\] -> \[id \d+\]", text)


def test_nested_scan_prints_both_blocks_in_order():
    M, h0 = T.matrix("M"), T.scalar("h0")

    def outer_step(row: Any, acc: Any) -> Any:
        inner, _ = opgraph.scan(lambda e, a: a + e, sequences=row, outputs_info=acc)
        return inner[-1]

    res, _ = opgraph.scan(outer_step, sequences=M, outputs_info=h0)
    f = _quiet_function([M, h0], res)
    np.testing.assert_allclose(f(np.ones((2, 3)), 0.0), [3.0, 6.0])
    for obj in (res, f):
        text = debugprint(obj, file="str")
        blocks = text.split("\nInner graphs of the scan ops:\n\n")[1].split("\n\n")
        assert len(blocks) == 2
        assert all(line.startswith(" >") for b in blocks for line in b.splitlines()[1:])
        # The inner loop appears inside the first block, then gets a block of its own whose
        # links point at ids defined in the first block.
        inner_head = blocks[1].splitlines()[0]
        assert inner_head.split(" ''")[0] in blocks[0]
        for target in re.findall(r"-> (\[id \w+\])", blocks[1]):
            assert f"{target} " in blocks[0]


def test_until_loop_prints_condition_as_last_inner_output():
    h0 = T.scalar("h0")

    def step(prev: Any) -> Any:
        new = prev * 2
        return new, opgraph.scan_module.until(new > 50)

    w, _ = opgraph.scan(step, outputs_info=h0, n_steps=100)
    f = _quiet_function([h0], w)
    np.testing.assert_allclose(f(1.0), [2.0, 4.0, 8.0, 16.0, 32.0, 64.0])
    for obj in (w, f):
        section = debugprint(obj, file="str").split("Inner graphs of the scan ops:\n\n")[1]
        assert section.startswith("do_while{")
        tops = [line for line in section.splitlines() if re.match(r" >[^ |]", line)]
        assert len(tops) == 2 and "gt" in tops[-1]


def test_graph_without_loops_has_no_section():
    x = T.vector("x")
    assert "Inner graphs" not in debugprint(T.exp(x), file="str")


# ---------------------------------------------------------------- pictures


def test_collect_graph_draws_loop_bodies_in_clusters():
    M, h0 = T.matrix("M"), T.scalar("h0")

    def outer_step(row: Any, acc: Any) -> Any:
        inner, _ = opgraph.scan(lambda e, a: a + e, sequences=row, outputs_info=acc)
        return inner[-1]

    res, _ = opgraph.scan(outer_step, sequences=M, outputs_info=h0)
    f = _quiet_function([M, h0], res)
    plain = collect_graph(f)
    assert not plain.clusters
    model = collect_graph(f, inner_graphs=True)
    (node,) = _loops(f)
    aid = model.ids[node]
    assert model.clusters[f"inner_{aid}"] == f"loop body of {node.op}"
    nested = [k for k in model.clusters if k.startswith(f"inner_{aid}.")]
    assert len(nested) == 1  # the inner loop's body
    inside = [dn for dn in model.nodes.values() if dn.cluster == f"inner_{aid}"]
    assert any(dn.label.startswith("name=M[t]") for dn in inside)
    dashed = [(t, h) for t, h, a in model.edges if a.get("style") == "dashed"]
    # Outer inputs into inner inputs (M[t] and h0[t-1]), the inner output back to the node.
    assert any(h == aid and t.startswith(f"{aid}.") for t, h in dashed)
    assert sum(1 for t, h in dashed if h.startswith(f"{aid}.") and "." not in t) == 2


def test_collect_graph_draws_op_from_graph_inner_graph():
    a, b = T.scalars("a", "b")
    op = ToyGraphOp([a, b], [a + b * 2])
    x, h = T.scalars("x", "h")
    model = collect_graph(op(x, h), inner_graphs=True)
    (key,) = model.clusters
    assert model.clusters[key] == "inner graph of OpFromGraph{inline=False}"
    dashed = [(t, h) for t, h, attrs in model.edges if attrs.get("style") == "dashed"]
    assert len(dashed) == 3  # x -> a, h -> b, the inner output -> the node


def _graphviz_missing() -> bool:
    try:
        import graphviz  # noqa: F401
    except ImportError:
        return True
    return shutil.which("dot") is None


@pytest.mark.skipif(_graphviz_missing(), reason="graphviz package or dot program missing")
def test_html_view_and_scan_graphs_files(tmp_path):
    from opgraph.printing import html_view, pydotprint

    x, h0 = T.vector("x"), T.scalar("h0")
    out, _ = opgraph.scan(lambda xt, h: h * xt, sequences=x, outputs_info=h0)
    f = _quiet_function([x, h0], out)
    page = html_view(f)
    assert "loop body of for{cpu,scan_fn}" in page
    assert re.search(r'"a\d+\.\w+": \[\["In", "loop body of', page)
    pydotprint(f, tmp_path / "f.png", scan_graphs=True, print_output_file=False)
    (idx,) = [i for i, n in enumerate(f.maker.fgraph.toposort()) if is_loop_op(n.op)]
    assert (tmp_path / f"f_scan_fn_{idx}.png").read_bytes().startswith(b"\x89PNG")


# ---------------------------------------------------------------- profiler


def test_profile_mode_reports_inner_nodes():
    x, h0 = T.vector("x"), T.scalar("h0")
    out, _ = opgraph.scan(
        lambda xt, h: T.tanh(h + xt * 2 + 1), sequences=x, outputs_info=h0, name="rnn"
    )
    f = _quiet_function([x, h0], out, mode="PROFILE_MODE")
    f(np.arange(5.0), 0.0)
    f(np.arange(3.0), 0.0)
    buf = io.StringIO()
    f.profile.summary(file=buf)
    text = buf.getvalue()
    assert "\nScan overhead:\n" in text
    block = text.split("\nScan Op profiling ( rnn )\n==================\n")[1]
    assert "  Time in 2 calls of the op (for a total of 8 steps)" in block
    apply_table = block.split("\nApply\n-----\n")[1]
    inner_rows = [line for line in apply_table.splitlines() if re.match(r"\s+\d+\.\d%", line)]
    assert inner_rows and all(" 8 " in row for row in inner_rows)  # 8 calls per inner node


def test_profile_without_inner_profile_says_how_to_get_one():
    x, h0 = T.vector("x"), T.scalar("h0")
    out, _ = opgraph.scan(lambda xt, h: h * xt, sequences=x, outputs_info=h0)
    f = _quiet_function([x, h0], out, profile=True)
    f(np.arange(3.0), 1.0)
    buf = io.StringIO()
    f.profile.summary(file=buf)
    text = buf.getvalue()
    if not f.profile.inner_functions:  # DEBUG_MODE's thunks run the inner graph themselves
        assert "Scan overhead:" not in text
        return
    assert "Scan overhead:" in text
    assert "Scan Op profiling" in text or "inner profile enabled" in text
