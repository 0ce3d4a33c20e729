"""Function's Python call path: cells after failures, threads, re-entry; TensorType.filter's
fast path for exact ndarrays (same results and errors as the general path)."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.compile.ops import as_op
from opgraph.compile.sharedvalue import shared
from opgraph.tensor.type import TensorType
from opgraph.testing import assert_allclose

PY = Mode(linker="py", optimizer="None")


# ---------------------------------------------------------------------- TensorType.filter


def test_fast_filter_spec_lists_what_an_ndarray_must_match() -> None:
    assert T.dmatrix.fast_filter_spec() == (np.dtype("float64"), 2, ())
    assert T.frow.fast_filter_spec() == (np.dtype("float32"), 2, ((0, 1),))
    t = TensorType("int32", shape=(3, None, 1))
    assert t.fast_filter_spec() == (np.dtype("int32"), 3, ((2, 1), (0, 3)))


@pytest.mark.parametrize(
    ("t", "value"),
    [
        (T.dmatrix, np.ones((2, 3))),
        (T.dmatrix, np.ones((3, 2)).T),
        (T.dscalar, np.array(1.5)),
        (T.drow, np.ones((1, 4))),
        (TensorType("float64", shape=(2, None)), np.ones((2, 7))),
    ],
)
def test_exact_ndarrays_pass_unchanged(t: TensorType, value: np.ndarray) -> None:
    for strict in (False, True):
        for downcast in (None, False, True):
            assert t.filter(value, strict, downcast) is value


def _outcome(t: TensorType, value: Any, **kwargs: Any) -> tuple[str, Any]:
    try:
        out = t.filter(value, **kwargs)
    except (TypeError, ValueError) as exc:
        return type(exc).__name__, str(exc)
    return "ok", (out.dtype, out.shape, out.tolist())


@pytest.mark.parametrize(
    ("t", "value", "expected"),
    [
        (T.drow, np.ones((2, 4)), "dimension 0 is broadcastable so must have length 1"),
        (TensorType("float64", shape=(2, None)), np.ones((3, 1)), "dimension 0 must have length 2"),
        (T.dmatrix, np.ones(3), "expects 2 dimension(s)"),
        (T.fvector, np.ones(3), "without losing precision"),
    ],
)
def test_rejected_ndarrays_keep_their_messages(t: TensorType, value: Any, expected: str) -> None:
    kind, message = _outcome(t, value)
    assert kind == "TypeError" and expected in message


def test_other_values_still_convert() -> None:
    assert _outcome(T.dvector, [1, 2]) == ("ok", (np.dtype("float64"), (2,), [1.0, 2.0]))
    swapped = np.ones(2, dtype=">f8")
    out = T.dvector.filter(swapped)
    assert out.dtype == np.dtype("float64") and out.dtype.isnative
    sub = np.ma.masked_array([1.0, 2.0])
    assert T.dvector.filter(sub) is sub  # an ndarray subclass of the right dtype, as before
    assert _outcome(T.dvector, np.ones(2, dtype="int32"))[0] == "ok"
    assert _outcome(T.ivector, np.ones(2), strict=True)[0] == "TypeError"


# ---------------------------------------------------------------------- Function


def test_cells_are_emptied_after_a_failing_call() -> None:
    x, y = T.dvector("x"), T.dvector("y")
    w = shared(np.zeros(3), name="w")
    f = function([x, y], x + y, updates=[(w, w + x)], mode=PY)
    with pytest.raises(TypeError, match="input 1"):
        f(np.ones(3), np.ones((3, 3)))
    with pytest.raises(ValueError):
        f(np.ones(3), np.ones(4))
    assert all(cell[0] is None for cell in f._clear_in)
    assert all(cell[0] is None for cell in f._clear_out)
    assert_allclose(w.get_value(), np.zeros(3))
    assert_allclose(f(np.ones(3), np.ones(3)), np.full(3, 2.0))


def test_trust_input_and_profile_are_settable() -> None:
    x = T.dvector("x")
    f = function([x], x * 2, mode=PY, trust_input=True)
    assert f.trust_input is True
    f.trust_input = 0
    assert f.trust_input is False
    assert f.profile is None
    from opgraph.compile.profiling import ProfileStats

    f.profile = ProfileStats(message="late")
    f(np.ones(2))
    assert f.profile.fct_callcount == 1


def test_a_function_calling_itself_raises() -> None:
    x = T.dvector("x")
    holder: dict[str, Any] = {}

    @as_op(itypes=[T.dvector], otypes=[T.dvector])
    def reenter(v):
        return holder["f"](v)

    holder["f"] = f = function([x], reenter(x), mode=PY)
    with pytest.raises(RuntimeError, match="already running in the same thread"):
        f(np.ones(2))
    assert all(cell[0] is None for cell in f._clear_in)


def test_calls_from_several_threads_run_one_after_the_other() -> None:
    x, y = T.dvector("x"), T.dvector("y")

    @as_op(itypes=[T.dvector], otypes=[T.dvector])
    def slow_copy(v):
        time.sleep(0.001)  # another thread stores its arguments meanwhile, unless serialized
        return v.copy()

    f = function([x, y], slow_copy(x) + y, mode=PY)
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for _ in range(5):
                value = np.full(3, float(k))
                assert_allclose(f(value, value), 2 * value)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


# ---------------------------------------------------------------------- the call's signature


def test_signature_names_the_inputs_and_their_defaults() -> None:
    import inspect

    from opgraph.compile.io import In

    x, y, z = T.dvector("x"), T.dscalar("y"), T.dscalar()
    f = function([x, In(y, value=2.0)], x + y, mode=PY)
    sig = inspect.signature(f)
    assert list(sig.parameters) == ["x", "y"] and sig.parameters["y"].default == 2.0
    assert_allclose(f(x=np.ones(2)), [3.0, 3.0])
    # An unnamed input is positional: so are the inputs before it.
    g = function([x, z], x + z, mode=PY)
    assert str(inspect.signature(g)) == "(x, input_1, /)"
    # A default before an input without one: any order of arguments is taken.
    h = function([In(y, value=2.0), x], x + y, mode=PY)
    assert str(inspect.signature(h)) == "(*args, **kwargs)"
    assert callable(f) and "Run the function" in f._python_call.__doc__
