"""debugprint: Theano 1.0's layout, ids, repeats, options, and very deep graphs."""

from __future__ import annotations

import io
from types import SimpleNamespace

import numpy as np
import pytest

from opgraph.printing.debugprint import char_from_number, debugprint


def seed_graph(toys: SimpleNamespace) -> tuple:
    """``(v + 1).sum()`` as the compiled graph of the docs (constant first)."""
    v = toys.vector()
    one = toys.const(np.ones(1))
    s = toys.Sum()(toys.add(one, v))
    return v, s


def test_compiled_function_layout_matches_theano_docs(toys):
    v, s = seed_graph(toys)
    f = toys.function([v], [s])
    assert debugprint(f, file="str") == (
        "Sum{acc_dtype=float64} [id A] ''   1\n"
        " |Elemwise{add,no_inplace} [id B] ''   0\n"
        "   |TensorConstant{(1,) of 1.0} [id C]\n"
        "   |<TensorType(float64, vector)> [id D]\n"
    )
    # A FunctionGraph prints the same way.
    assert debugprint(f.maker.fgraph, file="str") == debugprint(f, file="str")


def test_uncompiled_graph_has_no_toposort_index(toys):
    x, y = toys.vector("x"), toys.vector("y")
    z = toys.add(x, toys.mul(y, x))
    z.name = "z"
    # Theano's format: " '<name>' " + destroy_map + " " + view_map + " " + index.
    assert debugprint(z, file="str") == (
        "Elemwise{add,no_inplace} [id A] 'z'   \n"
        " |x [id B]\n"
        " |Elemwise{mul,no_inplace} [id C] ''   \n"
        "   |y [id D]\n"
        "   |x [id B]\n"
    )
    assert [line.rstrip() for line in debugprint(z, file="str").splitlines()][2].endswith("''")


def test_repeated_node_prints_its_line_once_more_without_subtree(toys):
    x = toys.vector("x")
    e = toys.exp(x)
    out = toys.add(e, toys.mul(e, x))
    lines = debugprint(out, file="str").splitlines()
    assert lines == [
        "Elemwise{add,no_inplace} [id A] ''   ",
        " |Elemwise{exp,no_inplace} [id B] ''   ",
        " | |x [id C]",
        " |Elemwise{mul,no_inplace} [id D] ''   ",
        "   |Elemwise{exp,no_inplace} [id B] ''   ",
        "   |x [id C]",
    ]


def test_prefixes_of_nested_last_and_middle_children(toys):
    a, b, c, d = (toys.vector(n) for n in "abcd")
    out = toys.add(toys.mul(a, toys.sub(b, c)), d)
    assert debugprint(out, file="str", ids="") == (
        "Elemwise{add,no_inplace}  ''   \n"
        " |Elemwise{mul,no_inplace}  ''   \n"
        " | |a \n"
        " | |Elemwise{sub,no_inplace}  ''   \n"
        " |   |b \n"
        " |   |c \n"
        " |d \n"
    )


def test_char_ids_are_base_26():
    assert [char_from_number(n) for n in (0, 1, 25, 26, 27, 51, 52, 676)] == [
        "A",
        "B",
        "Z",
        "BA",
        "BB",
        "BZ",
        "CA",
        "BAA",
    ]


def test_ids_variants(toys):
    x = toys.vector("x")
    y = toys.exp(x)
    assert debugprint(y, file="str", ids="int") == (
        "Elemwise{exp,no_inplace} [id 0] ''   \n |x [id 1]\n"
    )
    assert debugprint(y, file="str", ids="id") == (
        f"Elemwise{{exp,no_inplace}} [id {id(y.owner)}] ''   \n |x [id {id(x)}]\n"
    )
    with pytest.raises(ValueError, match="ids must be"):
        debugprint(y, file="str", ids="hex")


def test_ids_past_z_use_two_letters(toys):
    x = toys.vector("x")
    y = x
    for _ in range(30):
        y = toys.exp(y)
    lines = debugprint(y, file="str").splitlines()
    assert "[id Z]" in lines[25]
    assert "[id BA]" in lines[26]
    assert lines[-1].endswith("x [id BE]")


def test_print_type_depth_and_stop_on_name(toys):
    x = toys.vector("x")
    h = toys.exp(x)
    h.name = "h"
    y = toys.neg(h)
    assert debugprint(y, file="str", print_type=True) == (
        "Elemwise{neg,no_inplace} [id A] <TensorType(float64, vector)> ''   \n"
        " |Elemwise{exp,no_inplace} [id B] <TensorType(float64, vector)> 'h'   \n"
        "   |x [id C] <TensorType(float64, vector)>\n"
    )
    assert debugprint(y, file="str", depth=1) == "Elemwise{neg,no_inplace} [id A] ''   \n"
    assert debugprint(y, file="str", depth=2).count("\n") == 2
    assert debugprint(y, file="str", stop_on_name=True) == (
        "Elemwise{neg,no_inplace} [id A] ''   \n |Elemwise{exp,no_inplace} [id B] 'h'   \n"
    )
    with pytest.raises(TypeError, match="depth"):
        debugprint(y, depth="2")


def test_multi_output_ops_print_output_index(toys):
    x = toys.vector("x")
    a, b = toys.Split2()(x)
    out = toys.add(a, b)
    assert debugprint(out, file="str") == (
        "Elemwise{add,no_inplace} [id A] ''   \n"
        " |Split2.0 [id B] ''   \n"
        " | |x [id C]\n"
        " |Split2.1 [id B] ''   \n"
    )


def test_destroy_and_view_maps_on_request(toys):
    x = toys.vector("x")
    y = toys.add_inplace(toys.DimShuffle((0,))(x), x)
    f = toys.function([x], [y])
    assert debugprint(f, file="str").splitlines()[0] == "Elemwise{add,inplace} [id A] ''   1"
    text = debugprint(f, file="str", print_destroy_map=True, print_view_map=True)
    assert text.splitlines() == [
        "Elemwise{add,inplace} [id A] '' d={0: [0]}  1",
        " |InplaceDimShuffle{0} [id B] ''  v={0: [0]} 0",
        " | |x [id C]",
        " |x [id C]",
    ]


def test_function_with_several_outputs_shares_ids(toys):
    x = toys.vector("x")
    e = toys.exp(x)
    f = toys.function([x], [toys.neg(e), e])
    assert debugprint(f, file="str").splitlines() == [
        "Elemwise{neg,no_inplace} [id A] ''   1",
        " |Elemwise{exp,no_inplace} [id B] ''   0",
        "   |x [id C]",
        "Elemwise{exp,no_inplace} [id B] ''   0",
    ]


def test_print_clients_lists_users_of_shared_outputs(toys):
    x = toys.vector("x")
    e = toys.exp(x)
    f = toys.function([x], [toys.add(e, toys.neg(e))])
    lines = debugprint(f, file="str", print_clients=True).splitlines()
    assert lines[0] == "Elemwise{add,no_inplace} [id A] ''   2"
    assert lines[1] == " |Elemwise{exp,no_inplace} [id B] ''   0 clients:['[id C]', '[id A]']"
    assert lines[3] == " |Elemwise{neg,no_inplace} [id C] ''   1"


def test_print_rewrites_shows_provenance(toys):
    x = toys.vector("x")
    old = toys.mul(x, toys.const(np.ones(1)))
    new = toys.exp(x)
    new.owner.tag.provenance = [
        SimpleNamespace(rewrite="local_mul_one", location="canonicalize/math.py:42", replaced=old)
    ]
    y = toys.neg(new)
    assert debugprint(y, file="str", print_rewrites=True).splitlines() == [
        "Elemwise{neg,no_inplace} [id A] ''   ",
        " |Elemwise{exp,no_inplace} [id B] ''   ",
        "   \u2190 local_mul_one (canonicalize/math.py:42) replaced Elemwise{mul,no_inplace}.0",
        "   |x [id C]",
    ]
    assert "\u2190" not in debugprint(y, file="str")


def test_provenance_records_may_be_dicts_and_tuples(toys):
    x = toys.vector("x")
    y = toys.exp(x)

    def local_exp(fgraph, node):  # a rewrite object: its __name__ is shown
        return None

    y.owner.tag.provenance = [
        {"rewrite": local_exp, "location": ("specialize.py", 7), "replaced": [x, x]}
    ]
    line = debugprint(y, file="str", print_rewrites=True).splitlines()[1]
    assert line == " \u2190 local_exp (specialize.py:7) replaced x, x"


def test_file_argument(toys, capsys):
    x = toys.vector("x")
    y = toys.exp(x)
    assert debugprint(y) is None  # like Theano: nothing echoed after the graph
    assert capsys.readouterr().out == "Elemwise{exp,no_inplace} [id A] ''   \n |x [id B]\n"
    buf = io.StringIO()
    assert debugprint(y, file=buf) is buf
    assert buf.getvalue().startswith("Elemwise{exp")
    with pytest.raises(ValueError, match="file must be"):
        debugprint(y, file="out.txt")


def test_apply_list_and_shared_done(toys):
    x = toys.vector("x")
    a, _ = toys.Split2()(x)
    assert debugprint(a.owner, file="str").splitlines() == [
        "Split2.0 [id A] ''   ",
        " |x [id B]",
        "Split2.1 [id A] ''   ",
    ]
    y = toys.exp(x)
    text = debugprint([y, x, 3], file="str")
    assert text.splitlines()[-2:] == ["x [id B]", "3"]
    used: dict = {}
    done: dict = {}
    debugprint(y, file="str", used_ids=used, done=done)
    assert debugprint(toys.neg(y), file="str", used_ids=used, done=done).splitlines() == [
        "Elemwise{neg,no_inplace} [id C] ''   ",
        " |Elemwise{exp,no_inplace} [id A] ''   ",
    ]
    with pytest.raises(TypeError, match="cannot print"):
        debugprint(object())


def test_print_storage_shows_values(toys):
    x = toys.vector("x")
    y = toys.exp(x)
    f = toys.function([x], [y])
    f.fn = SimpleNamespace(storage_map={x: [np.zeros(2)], y: [np.ones(2)]})
    lines = debugprint(f, file="str", print_storage=True).splitlines()
    assert lines[0].startswith("Elemwise{exp,no_inplace} [id A] ''   0 [array([1., 1.])]")
    assert lines[1] == " |x [id B] [array([0., 0.])]"


def test_very_deep_graph_does_not_recurse(toys):
    x = toys.vector("x")
    y = x
    for _ in range(5000):
        y = toys.exp(y)
    lines = debugprint(y, file="str", ids="int").splitlines()
    assert len(lines) == 5001
    assert lines[-1] == "  " * 4999 + " |x [id 5000]"
    assert lines[4999].startswith("  " * 4998 + " |Elemwise{exp")


def test_print_op_prints_and_passes_through(toys, capsys):
    from opgraph.printing import Print

    x = toys.vector("x")
    y = Print("msg")(x)
    assert y.type == x.type and y.owner.op.view_map == {0: [0]}
    assert str(y.owner.op) == "Print{message='msg', attrs=('__str__',)}"
    assert Print("msg") == Print("msg") and Print("msg") != Print("other")
    value = np.array([1.0, 2.0, 3.0])
    storage = [[None]]
    y.owner.op.perform(y.owner, [value], storage)
    assert storage[0][0] is value
    assert capsys.readouterr().out == "msg __str__ = [ 1.  2.  3.]\n"
    Print("v", attrs=("shape", "sum")).perform(y.owner, [value], [[None]])
    assert capsys.readouterr().out == "v shape = (3,)\nv sum = 6.0\n"
    g = toys.vector("g")
    assert Print("msg").grad([x], [g]) == [g]
    assert Print("msg").R_op([x], [g]) == [g]
    assert Print("msg").infer_shape(y.owner, [("n",)]) == [("n",)]
    assert Print("msg").do_constant_folding(None, y.owner) is False
    seen = []
    Print("m", global_fn=lambda op, v: seen.append((op.message, v))).perform(
        y.owner, [value], [[None]]
    )
    assert seen == [("m", value)]
    assert debugprint(y, file="str").splitlines()[0].startswith("Print{message='msg'")


def test_real_function_graph_and_provenance_records(toys):
    fg_mod = pytest.importorskip("opgraph.graph.fg")
    prov = pytest.importorskip("opgraph.rewriting.provenance")
    x = toys.vector("x")
    e = toys.exp(x)
    fg = fg_mod.FunctionGraph([x], [toys.add(e, toys.neg(e))])
    node = fg.toposort()[0]
    node.tag.provenance = [
        prov.Provenance("local_exp", "specialize/math.py:3", "Elemwise{pow,no_inplace}.0", "x")
    ]
    assert debugprint(fg, file="str", print_clients=True, print_rewrites=True).splitlines() == [
        "Elemwise{add,no_inplace} [id A] ''   2",
        " |Elemwise{exp,no_inplace} [id B] ''   0 clients:['[id C]', '[id A]']",
        " | \u2190 local_exp (specialize/math.py:3) replaced Elemwise{pow,no_inplace}.0",
        " | |x [id D]",
        " |Elemwise{neg,no_inplace} [id C] ''   1",
        "   |Elemwise{exp,no_inplace} [id B] ''   0 clients:['[id C]', '[id A]']",
    ]
