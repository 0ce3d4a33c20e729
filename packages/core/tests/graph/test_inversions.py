"""Where a lower layer needs a higher one, the higher one registers itself (issue 11).

The graph layer never imports the tensor library or the compile layer: ``as_variable`` tries
the converters registered with it, ``Variable.eval`` compiles with the function the compile
layer installed, and ``configparser.change_flags`` changes the config ``configdefaults``
registered.
"""

import numpy as np
import pytest

from opgraph import configparser
from opgraph.compile.function import function
from opgraph.configdefaults import config
from opgraph.graph import basic
from opgraph.graph.basic import Constant, add_variable_converter, as_variable, set_eval_compiler
from opgraph.graph.type import generic
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.type import TensorType


class Token:
    """A value only the test's converter knows."""


def _token_converter(value, name=None):
    if isinstance(value, Token):
        return Constant(generic, value, name=name)
    return None


@pytest.fixture
def token_converter():
    saved = list(basic._CONVERTERS)
    add_variable_converter(_token_converter)
    yield
    basic._CONVERTERS[:] = saved


def test_the_tensor_library_registered_as_tensor_variable():
    assert as_tensor_variable in basic._CONVERTERS
    var = as_variable(np.ones(3))
    assert isinstance(var.type, TensorType) and var.type.ndim == 1


def test_a_registered_converter_is_tried_first_and_others_still_work(token_converter):
    token = Token()
    var = as_variable(token, name="t")
    assert var.data is token and var.name == "t"
    assert isinstance(as_variable(2.0).type, TensorType)  # falls through to the tensor one


def test_a_value_no_converter_accepts_gives_the_tensor_librarys_error(token_converter):
    with pytest.raises(TypeError, match="object"):
        as_variable(object())


def test_registering_the_same_converter_twice_keeps_one(token_converter):
    add_variable_converter(_token_converter)
    assert basic._CONVERTERS.count(_token_converter) == 1


def test_eval_compiles_with_the_installed_function():
    assert [function] == basic._COMPILERS
    x = as_tensor_variable(np.arange(3.0))
    assert np.array_equal((x * 2).eval(), [0.0, 2.0, 4.0])


def test_eval_without_a_compiler_says_what_to_do():
    saved = list(basic._COMPILERS)
    basic._COMPILERS.clear()
    try:
        with pytest.raises(RuntimeError, match="HINT: import opgraph"):
            as_tensor_variable(np.ones(2)).eval()
    finally:
        basic._COMPILERS[:] = saved
    set_eval_compiler(function)
    assert [function] == basic._COMPILERS


def test_configparser_change_flags_changes_the_registered_global_config():
    other = "float32" if config.floatX == "float64" else "float64"
    with configparser.change_flags(floatX=other):
        assert config.floatX == other
    assert config.floatX != other
