"""Theano's test values (``config.compute_test_value``): computed at graph-build time through
``perform``, so that a shape error is raised at the user's line; get_test_value,
get_debug_values, print_test_value and debugprint(print_test_value=True).

Expected messages and values were recorded from Theano 1.0.5 (THEANO_FLAGS=device=cpu,cxx=).
"""

from __future__ import annotations

import pickle
import re
import warnings

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph import config
from opgraph.gof.op import PureOp, get_debug_values, get_test_value
from opgraph.graph.op import Op, debug_assert, debug_error_message, missing_test_message
from opgraph.printing import debugprint


@pytest.fixture
def ctv():
    """Run the test with compute_test_value='raise' (tests change it further as needed)."""
    with config.change_flags(compute_test_value="raise"):
        yield


def _matrix(name, shape):
    v = T.matrix(name)
    v.tag.test_value = np.arange(np.prod(shape), dtype="float64").reshape(shape)
    return v


def test_off_by_default_computes_nothing():
    assert config.compute_test_value == "off"
    a = _matrix("a", (2, 3))
    b = _matrix("b", (4, 5))
    c = T.dot(a, b)  # no error: nothing is computed
    assert not hasattr(c.tag, "test_value")
    assert get_debug_values(a) == []


def test_outputs_get_test_values(ctv):
    a = _matrix("a", (2, 3))
    y = T.exp(a) * 2 + a
    np.testing.assert_allclose(y.tag.test_value, np.exp(a.tag.test_value) * 2 + a.tag.test_value)
    s = y.sum()
    assert s.tag.test_value.shape == ()


def test_shape_error_is_raised_at_the_users_line(ctv):
    a = _matrix("a", (2, 3))
    b = _matrix("b", (4, 5))
    with pytest.raises(ValueError) as info:
        c = T.dot(a, b)  # the line the message must name
    message = str(info.value)
    assert "Op: dot" in message
    assert "Input shapes: [(2, 3) float64, (4, 5) float64]" in message
    assert "c = T.dot(a, b)  # the line the message must name" in message
    assert __file__ in message
    # Theano 1.0.5 raises ValueError here too ('shapes (2,3) and (4,5) not aligned: ...').
    with pytest.raises(ValueError, match=r"(?s)Input shapes: \[\(2, 3\).*c = a \+ b"):
        c = a + b  # noqa: F841


@pytest.mark.parametrize("mode", ["warn", "ignore"])
def test_perform_errors_raise_in_every_mode(mode):
    # Theano 1.0.5: a failing perform raises in 'warn' and 'ignore' as well.
    with config.change_flags(compute_test_value=mode):
        a, b = _matrix("a", (2, 3)), _matrix("b", (4, 5))
        with pytest.raises(ValueError, match="Input shapes"):
            a + b


def test_missing_input_raise_names_the_variable(ctv):
    a = _matrix("a", (2, 3))
    d = T.matrix("d")
    with pytest.raises(ValueError) as info:
        a + d
    message = str(info.value)
    # Theano 1.0.5's text, followed by the backtrace of d's creation:
    assert message.startswith(
        "Cannot compute test value: input 1 (d) of Op Elemwise{add,no_inplace}(a, d) missing "
        "default value."
    )
    assert "Backtrace when that variable is created:" in message
    assert 'd = T.matrix("d")' in message


def test_missing_input_warn_warns_and_continues():
    with config.change_flags(compute_test_value="warn"):
        a, d = _matrix("a", (2, 3)), T.matrix("d")
        with pytest.warns(UserWarning) as record:
            r = a + d
    # Theano 1.0.5's warning text:
    assert str(record[0].message) == (
        "Warning, Cannot compute test value: input 1 (d) of Op Elemwise{add,no_inplace}(a, d) "
        "missing default value"
    )
    assert record[0].filename == __file__
    assert not hasattr(r.tag, "test_value")


def test_missing_input_ignore_is_silent():
    with config.change_flags(compute_test_value="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        r = _matrix("a", (2, 3)) + T.matrix("d")
    assert not hasattr(r.tag, "test_value")


def test_missing_input_pdb_opens_the_debugger(monkeypatch):
    import pdb

    seen = []
    monkeypatch.setattr(pdb, "post_mortem", lambda tb: seen.append(tb))
    with config.change_flags(compute_test_value="pdb"):
        r = _matrix("a", (2, 3)) + T.matrix("d")
    assert len(seen) == 1 and not hasattr(r.tag, "test_value")


def test_wrong_test_value_type_is_reported_at_use(ctv):
    # Theano 1.0.5 stores any value on assignment and checks it with type.filter when used.
    x = T.fmatrix("x")
    x.tag.test_value = np.zeros(3)
    with pytest.raises(TypeError) as info:
        x + 1
    message = str(info.value)
    assert message.startswith(
        "For compute_test_value, one input test value does not have the requested type."
    )
    assert "The error when converting the test value to that variable type:" in message
    assert 'x = T.fmatrix("x")' in message


def test_shared_and_constants_carry_their_value(ctv):
    s = opgraph.shared(np.arange(3.0))
    k = T.constant(2.0)
    z = s * k
    np.testing.assert_array_equal(z.tag.test_value, [0.0, 2.0, 4.0])  # Theano: [0. 2. 4.]
    np.testing.assert_array_equal(get_test_value(s), [0.0, 1.0, 2.0])
    assert get_test_value(k) == 2.0
    assert get_test_value(3) == 3  # a plain value becomes a constant first


def test_get_test_value_missing_raises_attribute_error():
    d = T.matrix("d")
    with pytest.raises(AttributeError, match=r"(?s)^d has no test value .*Backtrace"):
        get_test_value(d)


def test_destroyed_inputs_keep_their_test_value(ctv):
    class AddOneInplace(Op):
        __props__ = ()
        destroy_map = {0: [0]}

        def make_node(self, x):
            return opgraph.graph.basic.Apply(self, [x], [x.type()])

        def perform(self, node, inputs, out):
            inputs[0] += 1
            out[0][0] = inputs[0]

    a = _matrix("a", (2, 2))
    before = a.tag.test_value.copy()
    y = AddOneInplace()(a)
    np.testing.assert_array_equal(a.tag.test_value, before)
    np.testing.assert_array_equal(y.tag.test_value, before + 1)


def test_get_debug_values(ctv):
    a = _matrix("a", (2, 3))
    s = opgraph.shared(np.arange(3.0))
    [(va, vs)] = get_debug_values(a, s)
    np.testing.assert_array_equal(va, a.tag.test_value)
    np.testing.assert_array_equal(vs, [0.0, 1.0, 2.0])
    [only] = get_debug_values(a)
    assert only is not None
    with pytest.raises(AttributeError, match=r"^Argument 1\('d'\) has no test value$"):
        get_debug_values(a, T.matrix("d"))
    with config.change_flags(compute_test_value="warn"), pytest.warns(UserWarning):
        assert get_debug_values(T.matrix()) == []


def test_debug_message_helpers():
    with config.change_flags(compute_test_value="raise"):
        with pytest.raises(ValueError, match="bad"):
            debug_error_message("bad")
        with pytest.raises(AssertionError, match="cond"):
            debug_assert(False, "cond")
        with pytest.raises(AttributeError, match="gone"):
            missing_test_message("gone")
    with config.change_flags(compute_test_value="warn"):
        with pytest.warns(UserWarning, match="bad"):
            debug_error_message("bad")
        with pytest.warns(UserWarning, match="cond"):
            debug_assert(False, "cond")
    with config.change_flags(compute_test_value="ignore"):
        missing_test_message("nothing happens")
    assert PureOp is Op


def test_compiling_with_test_values_on(ctv):
    a = _matrix("a", (2, 2))
    f = opgraph.function([a], (a * 2).sum())
    assert f(np.ones((2, 2))) == 8.0


def test_print_test_value_repr(ctv):
    a = _matrix("a", (2, 3))
    y = a + 1
    assert repr(y) == "Elemwise{add,no_inplace}.0"
    with config.change_flags(print_test_value=True):
        # Theano 1.0.5: 'Elemwise{add,no_inplace}.0\narray([[1., 2., 3.],\n       [4., 5., 6.]])'
        assert repr(y) == "Elemwise{add,no_inplace}.0\narray([[1., 2., 3.],\n       [4., 5., 6.]])"
        assert str(y) == "Elemwise{add,no_inplace}.0"
        assert repr(T.matrix("n")) == "n"  # no test value: just the name


def test_debugprint_print_test_value(ctv):
    a = _matrix("a", (1, 2))
    e = (a * 2).sum()
    plain = debugprint(e, file="str")
    # Theano 1.0.5's debugprint(e) of the same graph:
    assert plain == (
        "Sum{acc_dtype=float64} [id A] ''   \n"
        " |Elemwise{mul,no_inplace} [id B] ''   \n"
        "   |a [id C]\n"
        "   |InplaceDimShuffle{x,x} [id D] ''   \n"
        "     |TensorConstant{2} [id E]\n"
    )
    text = debugprint(e, file="str", print_test_value=True)
    assert text == (
        "Sum{acc_dtype=float64} [id A] ''   \n"
        " | test_value: array(2.)\n"
        " |Elemwise{mul,no_inplace} [id B] ''   \n"
        "   | test_value: array([[0., 2.]])\n"
        "   |a [id C]\n"
        "   |   test_value: array([[0., 1.]])\n"
        "   |InplaceDimShuffle{x,x} [id D] ''   \n"
        "     | test_value: array([[2]], dtype=int8)\n"
        "     |TensorConstant{2} [id E]\n"
        "         test_value: array(2, dtype=int8)\n"
    )
    with config.change_flags(print_test_value=True):
        assert debugprint(e, file="str") == text


def test_pickle_test_value_flag():
    a = _matrix("a", (1, 2))
    assert hasattr(pickle.loads(pickle.dumps(a)).tag, "test_value")
    with config.change_flags(pickle_test_value=False):
        b = pickle.loads(pickle.dumps(a))
    assert not hasattr(b.tag, "test_value")
    assert hasattr(a.tag, "test_value")  # the original keeps it


def test_off_mode_build_time_has_no_test_value_cost():
    # With the flag off, calling an Op costs one flag lookup: building stays linear and fast.
    x = T.dvector("x")
    y = x
    for _ in range(200):
        y = T.exp(y)
    assert not hasattr(y.tag, "test_value")
    assert re.match(r"Elemwise\{exp", str(y.owner.op))


def test_rewrites_build_nodes_without_test_values_by_default() -> None:
    """Compilation runs the rewrites with ``compute_test_value_opt`` (default off): a graph
    built under ``compute_test_value='raise'`` compiles although the nodes the rewrites make
    get no test values, and the function computes the same values."""
    with opgraph.config.change_flags(compute_test_value="raise"):
        x = T.dvector("x")
        x.tag.test_value = np.array([1.0, 2.0])
        y = T.log(1 + T.exp(x)) * 2  # stabilize rewrites it to softplus
        f = opgraph.function([x], y)
    np.testing.assert_allclose(f(np.array([1.0, 2.0])), np.log1p(np.exp([1.0, 2.0])) * 2)
