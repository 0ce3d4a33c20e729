"""function(): outputs, argument conversion and errors, defaults, keywords, givens, eval."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile import In, Out, function
from opgraph.compile.function import MissingInputError, UnusedInputError
from opgraph.compile.sharedvalue import shared
from opgraph.graph.basic import Constant


def test_single_output_returns_a_value_and_a_list_returns_a_list() -> None:
    x = T.dvector("x")
    f = function([x], x * 2)
    g = function([x], [x * 2, x + 1])
    np.testing.assert_array_equal(f([1, 2]), [2, 4])
    out = g([1, 2])
    assert isinstance(out, list) and len(out) == 2
    np.testing.assert_array_equal(out[1], [2, 3])


def test_no_outputs_returns_none_and_dict_outputs_return_a_dict() -> None:
    x = T.dvector("x")
    s = shared(np.zeros(2), name="s")
    f = function([x], None, updates=[(s, s + x)])
    assert f([1, 2]) is None
    np.testing.assert_array_equal(s.get_value(), [1, 2])
    g = function([x], {"double": x * 2, "inc": x + 1})
    out = g([1, 2])
    assert set(out) == {"double", "inc"}
    np.testing.assert_array_equal(out["double"], [2, 4])


def test_a_python_list_of_ints_becomes_a_float64_array() -> None:
    x = T.dvector("x")
    result = function([x], x + x**10)([0, 1, 2])
    assert result.dtype == np.float64
    np.testing.assert_array_equal(result, [0, 2, 1026])


def test_a_lossy_conversion_names_input_type_dtype_shape_and_hint() -> None:
    x = T.fmatrix("x")
    f = function([x], x * 2, name="train")
    with pytest.raises(TypeError) as info:
        f(np.zeros((3, 4)))
    msg = str(info.value)
    assert msg.startswith(
        "input 0 ('x') of function 'train' expects TensorType(float32, matrix), "
        "got a numpy array of dtype float64 and shape (3, 4)."
    )
    assert "HINT:" in msg and "allow_input_downcast=True" in msg
    g = function([x], x * 2, allow_input_downcast=True)
    assert g(np.zeros((3, 4))).dtype == np.float32


def test_wrong_number_of_dimensions_is_a_type_error() -> None:
    x = T.dmatrix("x")
    f = function([x], x + 1)
    with pytest.raises(TypeError, match=r"input 0 \('x'\).*expects TensorType\(float64, matrix\)"):
        f(np.zeros(3))


def test_argument_count_keywords_and_duplicates_give_clear_type_errors() -> None:
    x, y = T.dvector("x"), T.dvector("y")
    f = function([x, y], x + y, name="f")
    np.testing.assert_array_equal(f(y=[1.0], x=[2.0]), [3.0])
    with pytest.raises(TypeError, match=r"takes 2 argument\(s\) \['x', 'y'\], but 3 were given"):
        f([1.0], [1.0], [1.0])
    with pytest.raises(TypeError, match=r"missing a value for input 1 \('y'\)"):
        f([1.0])
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'z'.*\['x', 'y'\]"):
        f([1.0], z=[1.0])
    with pytest.raises(TypeError, match="multiple values for input 'x'"):
        f([1.0], x=[1.0])


def test_defaults_from_in_and_keyword_names() -> None:
    x, y = T.dscalar("x"), T.dscalar("y")
    f = function([x, In(y, value=1.0, name="offset")], x + y)
    assert f(2.0) == 3.0
    assert f(2.0, 5.0) == 7.0
    assert f(2.0, offset=10.0) == 12.0
    assert f["offset"] == 1.0
    f["offset"] = 4.0
    assert f(2.0) == 6.0


def test_in_with_update_keeps_state_between_calls() -> None:
    acc, inc = T.dscalar("acc"), T.dscalar("inc")
    f = function([inc, In(acc, value=0.0, update=acc + inc)], acc)
    assert [float(f(1.0)) for _ in range(3)] == [0.0, 1.0, 2.0]
    assert float(f["acc"]) == 3.0


def test_a_constant_or_a_shared_variable_as_input_is_a_type_error() -> None:
    c = T.constant(np.ones(2))
    assert isinstance(c, Constant)
    with pytest.raises(TypeError, match="Constant"):
        function([c], c * 2)
    s = shared(np.ones(2), name="W")
    with pytest.raises(TypeError, match=r"(?s)shared variable \(W\) as explicit input.*givens"):
        function([s], s * 2)
    with pytest.raises(TypeError, match="contained in a list"):
        function(T.dvector("x"), 1)


def test_duplicate_inputs_are_refused() -> None:
    x = T.dvector("x")
    with pytest.raises(ValueError, match="used twice in inputs"):
        function([x, x], x)


def test_missing_input_names_the_variable_and_the_users_line() -> None:
    x = T.dvector("x")
    y = T.dvector("y")  # the line the error must show
    with pytest.raises(MissingInputError) as info:
        function([x], x + y)
    msg = str(info.value)
    assert "'y'" in msg
    assert re.search(r"test_function\.py:\d+:\s+y = T\.dvector\(\"y\"\)", msg), msg
    assert info.value.variable is y


def test_unused_input_raises_warns_or_is_ignored() -> None:
    x, y = T.dvector("x"), T.dvector("y")
    with pytest.raises(UnusedInputError) as info:
        function([x, y], x * 2)
    msg = str(info.value)
    assert "index 1" in msg and "on_unused_input='warn'" in msg and "'ignore'" in msg
    with pytest.warns(UserWarning, match="on_unused_input='raise'"):
        function([x, y], x * 2, on_unused_input="warn")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f = function([x, y], x * 2, on_unused_input="ignore")
    np.testing.assert_array_equal(f([1.0], [5.0]), [2.0])
    with pytest.raises(ValueError, match="Valid values are"):
        function([x, y], x * 2, on_unused_input="sometimes")


def test_givens_replace_variables_before_compiling() -> None:
    x, y = T.dvector("x"), T.dvector("y")
    data = shared(np.arange(4.0), name="data")
    f = function([y], x * 2, givens={x: y + 1})
    np.testing.assert_array_equal(f([1.0]), [4.0])
    g = function([], x.sum(), givens=[(x, data)])
    assert g() == 6.0


def test_givens_of_another_type_names_both_types() -> None:
    x, z = T.dvector("x"), T.fvector("z")
    with pytest.raises(TypeError) as info:
        function([z], x * 2, givens={x: z})
    msg = str(info.value)
    assert "TensorType(float64, vector)" in msg and "TensorType(float32, vector)" in msg
    with pytest.raises(ValueError, match="is an input to your function"):
        function([x], x * 2, givens={x: T.dvector("w")})


def test_maker_fgraph_is_the_compiled_graph_with_clients() -> None:
    v = T.dvector("v")
    f = function([v], (v + 1).sum())
    topo = f.maker.fgraph.toposort()
    assert [str(n.op) for n in topo][-1] == "Sum{acc_dtype=float64}"
    assert topo[-1].outputs[0].clients == [("output", 0)]
    assert not hasattr(v, "clients")  # the user's graph is never touched
    report = f.maker.rewrite_report()
    assert isinstance(report, str) and report


def test_out_and_in_specs() -> None:
    x = T.dvector("x")
    f = function([In(x, name="inp")], Out(x * 2, borrow=True))
    np.testing.assert_array_equal(f(inp=[1.0]), [2.0])


def test_trust_input_skips_conversion() -> None:
    x = T.dvector("x")
    f = function([x], x + 1, trust_input=True)
    assert f.trust_input
    np.testing.assert_array_equal(f(np.array([1.0])), [2.0])
    f.trust_input = False
    np.testing.assert_array_equal(f([1]), [2.0])


def test_fn_n_calls_runs_updates_each_time() -> None:
    s = shared(np.float64(0.0), name="s")
    f = function([], [], updates={s: s + 1})
    f.fn(n_calls=5)
    assert s.get_value() == 5.0
    f()
    assert s.get_value() == 6.0


def test_variable_eval() -> None:
    x, y = T.dscalar("x"), T.dscalar("y")
    z = x + y
    assert z.eval({x: 1.0, y: 2.0}) == 3.0
    assert z.eval({x: 2.0, y: 2.0}) == 4.0


def test_default_name_is_the_callers_line() -> None:
    x = T.dscalar("x")
    f = function([x], x)
    assert f.name is not None and f.name.startswith(__file__.rstrip("c"))
    assert function([x], x, name="mine").name == "mine"


def test_inplace_ops_in_the_users_graph_need_accept_inplace() -> None:
    from compile_toys import AddOneInplace

    x = T.dvector("x")
    with pytest.raises(TypeError, match="accept_inplace=True"):
        function([x], AddOneInplace()(x))
    f = function([In(x, mutable=True)], AddOneInplace()(x), accept_inplace=True)
    a = np.zeros(2)
    np.testing.assert_array_equal(f(a), [1.0, 1.0])
