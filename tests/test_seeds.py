"""Every code example of the seed documents (../shared/seeds/) as a test.

Written as the documents write them: ``import opgraph as theano``, ``import opgraph.tensor
as T``. These need opgraph-optimizers installed for the compiled-graph examples.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import opgraph as theano
import opgraph.tensor as T
from opgraph.tensor import Apply, Constant, TensorType, Variable, add, mul


def test_x_plus_y_structure() -> None:
    x = T.dmatrix("x")
    y = T.dmatrix("y")
    z = x + y
    assert isinstance(z.owner, Apply)
    assert z.owner.op == add
    assert z.owner.inputs == [x, y]
    assert z.owner.outputs[0] is z
    assert x.owner is None and y.owner is None


def test_short_example_builds_two_applies() -> None:
    x = T.matrix("x")
    y = T.matrix("y")
    z = T.matrix("z")
    e = x + y * z
    assert e.owner.op == add
    assert e.owner.inputs[0] is x
    assert e.owner.inputs[1].owner.op == mul
    assert e.owner.inputs[1].owner.inputs == [y, z]


def test_long_example_explicit_graph() -> None:
    # Instantiate a type that represents a matrix of doubles
    float64_matrix = TensorType(dtype="float64", broadcastable=(False, False))
    x = Variable(type=float64_matrix, name="x")
    y = Variable(type=float64_matrix, name="y")
    z = Variable(type=float64_matrix, name="z")
    mul_variable = Variable(type=float64_matrix)
    assert mul_variable.owner is None
    node_mul = Apply(op=mul, inputs=[y, z], outputs=[mul_variable])
    assert mul_variable.owner is node_mul
    assert mul_variable.index == 0
    add_variable = Variable(type=float64_matrix)
    assert add_variable.owner is None
    node_add = Apply(op=add, inputs=[x, mul_variable], outputs=[add_variable])
    assert add_variable.owner is node_add
    assert add_variable.index == 0
    e = add_variable
    assert e.owner.inputs[0] is x
    assert e.owner.inputs[1] is mul_variable
    assert e.owner.inputs[1].owner.inputs[0] is y
    assert e.owner.inputs[1].owner.inputs[1] is z
    # The explicit graph computes like the short one.
    f = theano.function([x, y, z], e)
    a, b, c = (np.full((2, 2), v) for v in (1.0, 2.0, 3.0))
    np.testing.assert_allclose(f(a, b, c), a + b * c)


def test_automatic_wrapping_of_constants() -> None:
    e = T.dscalar("x") + 1
    node = e.owner
    assert node.op == add
    assert node.inputs[0].name == "x"
    assert isinstance(node.inputs[1], Constant)
    assert node.inputs[1].data == 1
    assert node.inputs[1].type.dtype.startswith("int")
    assert e.type == T.dscalar


def test_negation_variable() -> None:
    x = theano.tensor.ivector()
    y = -x
    assert isinstance(x, Variable) and isinstance(y, Variable)
    assert x.type == theano.tensor.ivector
    assert y.type == theano.tensor.ivector
    assert y.owner is not None and x.owner is None


def test_traversing_the_graph() -> None:
    x = theano.tensor.dmatrix("x")
    y = x * 2.0
    assert type(y.owner) is Apply
    assert y.owner.op.name == "Elemwise{mul,no_inplace}"
    assert len(y.owner.inputs) == 2
    assert y.owner.inputs[0] is x
    assert repr(y.owner.inputs[0]) == "x"
    assert repr(y.owner.inputs[1]) == "InplaceDimShuffle{x,x}.0"
    assert type(y.owner.inputs[1]) is T.TensorVariable
    assert type(y.owner.inputs[1].owner) is Apply
    assert repr(y.owner.inputs[1].owner.inputs) == "[TensorConstant{2.0}]"


def test_clients_of_a_compiled_graph() -> None:
    v = theano.tensor.vector()
    f = theano.function([v], (v + 1).sum())
    text = theano.printing.debugprint(f, file="str")
    assert text.splitlines() == [
        "Sum{acc_dtype=float64} [id A] ''   1",
        " |Elemwise{add,no_inplace} [id B] ''   0",
        "   |TensorConstant{(1,) of 1.0} [id C]",
        "   |<TensorType(float64, vector)> [id D]",
    ]
    topo = f.maker.fgraph.toposort()
    assert repr(topo[0].outputs[0].clients) == (
        "[(Sum{acc_dtype=float64}(Elemwise{add,no_inplace}.0), 0)]"
    )
    assert topo[1].outputs[0].clients == [("output", 0)]
    var = topo[0].outputs[0]
    client = var.clients[0]
    assert type(client[0]) is Apply
    assert client[0].inputs[client[1]] is var
    var = topo[1].outputs[0]
    client = var.clients[0]
    assert client == ("output", 0)
    assert f.maker.fgraph.outputs[client[1]] is var
    # The user's graph was cloned: its variables never gain clients.
    assert not hasattr(v, "clients")


def test_a_plus_a_pow_10() -> None:
    a = theano.tensor.vector("a")  # declare symbolic variable
    b = a + a**10  # build symbolic expression
    f = theano.function([a], b)  # compile function
    np.testing.assert_array_equal(f([0, 1, 2]), [0.0, 2.0, 1026.0])
    names = [str(node.op) for node in f.maker.fgraph.toposort()]
    assert len(names) == 1 and names[0].startswith("Elemwise{Composite{"), names
    assert "pow" not in names[0]
    g = theano.function([a], b, mode="FAST_COMPILE")
    np.testing.assert_array_equal(g([0, 1, 2]), [0.0, 2.0, 1026.0])


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot is not installed")
def test_pydotprint_of_the_seed_graphs(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("graphviz")
    a = theano.tensor.vector("a")
    b = a + a**10
    f = theano.function([a], b)
    for target, name in ((b, "unopt"), (f, "opt")):
        out = f"{tmp_path}/symbolic_graph_{name}.png"
        theano.printing.pydotprint(target, outfile=out, var_with_name_simple=True)
        with open(out, "rb") as fh:
            assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
        assert f"The output file is available at {out}" in capsys.readouterr().out
    theano.printing.pydotprint(
        theano.function([a], b, mode="FAST_COMPILE"), outfile=f"{tmp_path}/fc.png"
    )
