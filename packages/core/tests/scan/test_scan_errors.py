"""Bad input to scan: build-time type errors that name the output and the fix, call-time
errors for lengths and taps, and nothing half-updated after a failure."""

import numpy as np
import pytest

import opgraph as theano
import opgraph.tensor as T


def test_dtype_mismatch_names_output_types_fix_and_line():
    h0 = T.fscalar("h0")
    with pytest.raises(TypeError) as info:
        theano.scan(lambda h: h * np.float64(2.0), outputs_info=h0, n_steps=3)
    text = str(info.value)
    assert "output 0" in text
    assert "float64" in text and "float32" in text
    assert "T.cast" in text
    assert "test_scan_errors.py" in text  # the user's line


def test_ndim_mismatch():
    h0 = T.vector("h0")
    with pytest.raises(TypeError, match=r"output 0 .*matrix|number of dimensions"):
        theano.scan(lambda h: T.outer(h, h), outputs_info=h0, n_steps=2)


def test_broadcastable_mismatch_suggests_unbroadcast():
    h0 = T.row("h0")  # (True, False)
    with pytest.raises(TypeError, match=r"unbroadcast|patternbroadcast"):
        theano.scan(lambda h: T.dot(h.T, h)[:1] + T.matrix("m"), outputs_info=h0, n_steps=2)


def test_more_broadcastable_output_is_accepted():
    h0 = T.matrix("h0")
    out, _ = theano.scan(
        lambda h: h.sum(axis=0, keepdims=True) * T.ones_like(h), outputs_info=h0, n_steps=2
    )
    f = theano.function([h0], out)
    assert f(np.ones((2, 2))).shape == (2, 2, 2)


def test_wrong_number_of_outputs_info():
    x = T.vector("x")
    with pytest.raises(ValueError, match="outputs_info has 1 entries but the step"):
        theano.scan(lambda v: (v, v * 2), sequences=x, outputs_info=[None])


def test_positive_output_tap_rejected():
    x0 = T.vector("x0")
    with pytest.raises(ValueError, match="negative"):
        theano.scan(lambda a: a, outputs_info=dict(initial=x0, taps=[1]), n_steps=2)


def test_no_steps_information():
    with pytest.raises(ValueError, match="n_steps"):
        theano.scan(lambda: T.constant(1.0))


def test_float_n_steps_rejected():
    with pytest.raises(TypeError, match="integer"):
        theano.scan(lambda h: h, outputs_info=T.scalar(), n_steps=2.5)


def test_n_steps_longer_than_sequence():
    x = T.vector("x")
    n = T.iscalar("n")
    out, _ = theano.scan(lambda v: v * 2, sequences=x, n_steps=n)
    f = theano.function([x, n], out)
    with pytest.raises(ValueError, match=r"sequence 0.* has 3 entries, but the loop runs 5"):
        f(np.ones(3), 5)


def test_initial_value_too_short_for_taps():
    x0 = T.vector("x0")
    out, _ = theano.scan(
        lambda a, b: a + b, outputs_info=dict(initial=x0, taps=[-3, -1]), n_steps=4
    )
    f = theano.function([x0], out)
    with pytest.raises(ValueError, match="reads 3 past entries"):
        f(np.ones(2))


def test_output_shape_changing_between_steps():
    h0 = T.vector("h0")
    x = T.matrix("x")
    out, _ = theano.scan(lambda x_t, h: h[:1] * 0 + x_t.sum(), sequences=x, outputs_info=h0)
    f = theano.function([x, h0], out)
    with pytest.raises(ValueError, match="keep the shape of its initial value"):
        f(np.ones((3, 2)), np.ones(2))


def test_failure_leaves_shared_state_untouched():
    counter = theano.shared(np.int64(0), name="counter")
    x = T.vector("x")
    n = T.iscalar("n")
    out, updates = theano.scan(lambda v: (v * 2, {counter: counter + 1}), sequences=x, n_steps=n)
    f = theano.function([x, n], out, updates=updates)
    f(np.ones(3), 3)
    assert counter.get_value() == 3
    with pytest.raises(ValueError):
        f(np.ones(3), 7)
    assert counter.get_value() == 3
    f(np.ones(3), 2)
    assert counter.get_value() == 5


def test_error_inside_the_step_names_the_step():
    x = T.matrix("x")
    v = T.vector("v")
    h0 = T.vector("h0")
    (_, out), _ = theano.scan(
        lambda row, h, v: (h + row, T.dot(h, v)),
        sequences=x,
        outputs_info=[h0, None],
        non_sequences=v,
    )
    f = theano.function([x, h0, v], out)
    with pytest.raises(ValueError, match="step 0 of 3"):
        f(np.ones((3, 2)), np.ones(2), np.ones(4))


@pytest.mark.nonfinite
def test_nan_flows_through_without_crash():
    x = T.vector("x")
    out, _ = theano.scan(lambda v, h: h + v, sequences=x, outputs_info=T.constant(np.float64(0.0)))
    f = theano.function([x], out)
    res = f(np.array([1.0, np.nan, 2.0]))
    assert res[0] == 1.0 and np.isnan(res[1:]).all()


def test_empty_sequence_runs_zero_steps():
    x = T.matrix("x")
    out, _ = theano.scan(lambda v: v * 2, sequences=x)
    f = theano.function([x], out)
    assert f(np.ones((0, 3))).shape[0] == 0


def test_until_condition_must_be_scalar():
    with pytest.raises(TypeError, match="scalar"):
        theano.scan_module.until(T.vector("v") > 0)
