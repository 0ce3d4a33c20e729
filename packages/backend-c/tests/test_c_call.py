"""The compiled call path (``opgraph_c._vm.Caller``): every Function feature, bad inputs, threads.

Each behaviour is checked against the Python linker (``py``), which takes core's Python
call path: same values, same errors, same state of shared variables and storage cells.
"""

from __future__ import annotations

import pickle
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile.function import Function, function
from opgraph.compile.io import In, Out
from opgraph.compile.mode import Mode
from opgraph.compile.ops import as_op
from opgraph.compile.sharedvalue import shared
from opgraph.testing import assert_allclose
from opgraph_c._vm import Caller, CallStar

LINKERS = ("py", "c")


def _mode(linker: str, optimizer: str | None = "fast_run") -> Mode:
    return Mode(linker=linker, optimizer=optimizer)


def _both(inputs: list[Any], outputs: Any, **kwargs: Any) -> dict[str, Any]:
    """The same function compiled with the Python and the C linker, both named ``'f'``."""
    return {
        linker: function(inputs, outputs, mode=_mode(linker), name="f", **kwargs)
        for linker in LINKERS
    }


def _outcome(f: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """``("ok", value)`` or ``(exception class name, message)`` of one call."""
    try:
        return "ok", f(*args, **kwargs)
    except Exception as exc:
        return type(exc).__name__, str(exc)


def _same_outcome(fs: dict[str, Any], *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """Call both functions; assert same error text or same values; return the C one's."""
    ref = _outcome(fs["py"], *args, **kwargs)
    got = _outcome(fs["c"], *args, **kwargs)
    assert got[0] == ref[0], (got, ref)
    if ref[0] == "ok":
        if isinstance(ref[1], dict):
            assert ref[1].keys() == got[1].keys()
            for k in ref[1]:
                assert_allclose(got[1][k], ref[1][k])
        elif ref[1] is None:
            assert got[1] is None
        else:
            assert_allclose(got[1], ref[1])
            assert np.asarray(got[1]).dtype == np.asarray(ref[1]).dtype
    else:
        assert got[1] == ref[1]
    return got


def _input_cells_empty(f: Any) -> bool:
    return all(cell[0] is None for cell in f._clear_in)


# ---------------------------------------------------------------------- the path is taken


def test_c_functions_call_through_the_compiled_caller() -> None:
    x = T.dscalar("x")
    f = function([x], x + 1, mode=_mode("c"))
    assert isinstance(f._caller, Caller)
    assert f._fast.__self__ is f._caller
    assert isinstance(f.__call__, CallStar)  # f(...) runs the caller with no Python frame
    assert f(np.array(1.5)) == 2.5
    assert f(1.5) == 2.5
    assert f(x=1.5) == 2.5  # keywords reach the Python path through the caller
    g = function([x], x + 1, mode=_mode("py"))
    assert g._caller is None  # core's own VM offers no caller: the Python path runs
    assert g.__call__.__func__ is Function._python_call
    assert g(1.5) == 2.5


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32", "uint8", "complex128"])
def test_values_match_numpy_for_each_dtype(dtype: str, rng: np.random.Generator) -> None:
    x, y = T.matrix("x", dtype=dtype), T.matrix("y", dtype=dtype)
    fs = _both([x, y], [x * y + x, x - y])
    xv = (rng.standard_normal((3, 4)) * 5).astype(dtype)
    yv = (rng.standard_normal((3, 4)) * 5).astype(dtype)
    _, (a, b) = _same_outcome(fs, xv, yv)
    assert_allclose(a, xv * yv + xv, dtype=dtype)
    assert_allclose(b, xv - yv, dtype=dtype)


# ---------------------------------------------------------------------- bad inputs


def _bad_values() -> list[tuple[str, Any, Any]]:
    f64 = np.arange(6.0).reshape(2, 3)
    return [
        ("float64 to float32", T.fmatrix, f64),
        ("int64 to int32", T.imatrix, np.ones((2, 3), dtype="int64")),
        ("wrong ndim", T.dmatrix, np.ones(3)),
        ("0-d for a matrix", T.dmatrix, np.array(1.0)),
        ("Python float for a matrix", T.dmatrix, 1.5),
        ("ragged list", T.dmatrix, [[1.0, 2.0], [3.0]]),
        ("list of strings", T.dmatrix, [["a", "b"]]),
        ("None", T.dmatrix, None),
        ("string", T.dmatrix, "abc"),
        ("a symbolic variable", T.dmatrix, T.dmatrix("z")),
        ("broadcastable dim of length 2", T.drow, np.ones((2, 3))),
        ("float list to int", T.imatrix, [[1.5, 2.0]]),
        ("complex to float", T.dmatrix, np.ones((2, 2), dtype="complex128")),
    ]


@pytest.mark.parametrize(
    ("case", "make", "value"), _bad_values(), ids=[c for c, *_ in _bad_values()]
)
def test_bad_inputs_give_the_python_linkers_errors(case: str, make: Any, value: Any) -> None:
    x = make("x")
    fs = _both([x], x * 2)
    kind, message = _same_outcome(fs, value)
    assert kind in ("TypeError", "ValueError"), (case, kind, message)
    assert "input 0 ('x') of function 'f'" in message
    assert _input_cells_empty(fs["c"])
    # The function still works after the error.
    ok = np.ones((1, 3)) if make is T.drow else np.ones((2, 3))
    _same_outcome(fs, ok.astype(x.type.dtype))


@pytest.mark.parametrize(
    ("make", "value"),
    [
        (T.dmatrix, [[1, 2, 3], [4, 5, 6]]),  # list of ints
        (T.dmatrix, [[1.5, 2.5]]),  # list of floats
        (T.dscalar, 1.5),  # Python float for a 0-d input
        (T.dscalar, 3),  # Python int
        (T.dscalar, np.float64(2.0)),  # NumPy scalar
        (T.dscalar, np.array(2.0)),  # 0-d array
        (T.fscalar, 1.5),  # Python float to float32 (Theano's rule)
        (T.dmatrix, np.ones((2, 3), dtype="int32")),  # safe upcast
        (T.dmatrix, np.ones((3, 2)).T),  # non-contiguous
        (T.dmatrix, np.arange(12.0).reshape(3, 4)[::2, ::3]),  # strided view
        (T.dmatrix, np.ones((2, 3), dtype=">f8")),  # byte-swapped
        (T.dmatrix, np.full((2, 2), np.nan)),  # NaN
        (T.dmatrix, np.ones((0, 3))),  # empty
        (T.dvector, np.ma.masked_array([1.0, 2.0])),  # ndarray subclass
        (T.drow, np.ones((1, 3))),  # broadcastable dim of length 1
    ],
    ids=lambda v: getattr(v, "__name__", None) or type(v).__name__,
)
def test_accepted_inputs_convert_as_in_the_python_linker(make: Any, value: Any) -> None:
    x = make("x")
    fs = _both([x], x + 1)
    kind, _ = _same_outcome(fs, value)
    assert kind == "ok"


#: Python and NumPy scalars for 0-d inputs: the C caller converts the ones whose value the
#: Type's filter takes unchanged, and hands the others (lossy, out of range, another dtype)
#: to the filter, so values, dtypes and error texts are the Python linker's.
_SCALARS = [
    1.5,
    -0.0,
    float("inf"),
    float("nan"),
    0.1,
    1e300,
    3,
    -7,
    0,
    2**31,
    2**24 + 1,
    2**40,
    2**63 - 1,
    2**70,
    True,
    False,
    np.float64(2.5),
    np.float32(2.5),
    np.int64(9),
    np.int32(-9),
    np.bool_(True),
    np.complex128(1j),
]


@pytest.mark.nonfinite
@pytest.mark.parametrize("value", _SCALARS, ids=lambda v: f"{type(v).__name__}({v!r})")
@pytest.mark.parametrize("make", [T.dscalar, T.fscalar, T.lscalar, T.iscalar, T.bscalar])
@pytest.mark.parametrize("downcast", [None, True])
def test_python_and_numpy_scalars_for_0d_inputs_match_the_python_linker(
    make: Any, value: Any, downcast: bool | None
) -> None:
    x = make("x")
    fs = _both([In(x, allow_downcast=downcast)], x * 1)
    _same_outcome(fs, value)
    assert _input_cells_empty(fs["c"])


def test_a_scalar_for_a_strict_0d_input_goes_to_the_filter() -> None:
    x = T.dscalar("x")
    fs = _both([In(x, strict=True)], x + 1)
    kind, message = _same_outcome(fs, 1.5)
    assert kind == "TypeError" and "float64" in message
    assert _same_outcome(fs, np.array(1.5))[0] == "ok"


def test_a_scalar_call_returns_fresh_arrays() -> None:
    x = T.dscalar("x")
    f = function([x], Out(x, borrow=False), mode=_mode("c"))
    a, b = f(1.0), f(2.0)
    assert (float(a), float(b)) == (1.0, 2.0)
    assert not np.shares_memory(a, b)


def test_allow_downcast_strict_and_trust_input() -> None:
    x = T.fvector("x")
    f64 = np.arange(3.0)
    down = _both([x], x * 2, allow_input_downcast=True)
    kind, out = _same_outcome(down, f64)
    assert kind == "ok" and out.dtype == np.float32
    strict = _both([In(x, strict=True)], x * 2)
    kind, message = _same_outcome(strict, f64)
    assert kind == "TypeError" and "float32" in message
    kind, message = _same_outcome(strict, [1.0, 2.0])
    assert kind == "TypeError"
    _same_outcome(strict, f64.astype("float32"))
    f = function([x], x * 2, mode=_mode("c"), trust_input=True)
    assert f._caller.trust_input
    assert_allclose(f(f64.astype("float32")), f64 * 2)
    f.trust_input = False
    assert not f._caller.trust_input
    with pytest.raises(TypeError, match="float32"):
        f(f64)


def test_static_shapes_are_checked() -> None:
    x = T.TensorType("float64", shape=(2, None))("x")
    fs = _both([x], x + 1)
    assert _same_outcome(fs, np.ones((2, 5)))[0] == "ok"
    kind, message = _same_outcome(fs, np.ones((3, 5)))
    assert kind == "TypeError" and "dimension 0 must have length 2" in message


# ---------------------------------------------------------------------- Function features


def test_arity_keywords_and_defaults() -> None:
    x, y, z = T.dscalar("x"), T.dscalar("y"), T.dscalar("z")
    fs = _both([x, In(y, value=10.0), In(z, value=100.0)], x + y * z)
    assert _same_outcome(fs, 1.0)[1] == 1001.0
    assert _same_outcome(fs, 1.0, 2.0)[1] == 201.0
    assert _same_outcome(fs, 1.0, z=3.0)[1] == 31.0
    assert _same_outcome(fs, x=1.0, y=2.0, z=3.0)[1] == 7.0
    assert _same_outcome(fs)[0] == "TypeError"  # x has no default
    assert _same_outcome(fs, 1.0, 2.0, 3.0, 4.0)[0] == "TypeError"
    assert _same_outcome(fs, 1.0, w=2.0)[0] == "TypeError"
    assert _same_outcome(fs, 1.0, x=2.0)[0] == "TypeError"
    assert _same_outcome(fs, 1.0, y=np.ones(2))[0] == "TypeError"
    for f in fs.values():
        f["y"] = 5.0
        assert f(1.0, z=1.0) == 6.0
        assert _input_cells_empty(f)


def test_output_forms() -> None:
    x = T.dvector("x")
    xv = np.arange(3.0)
    for outputs in ({"b": x * 2, "a": x + 1}, [x + 1], [x + 1, x * 2], x + 1):
        fs = _both([x], outputs)
        kind, got = _same_outcome(fs, xv)
        assert kind == "ok"
        assert type(got) is type(fs["py"](xv))
    s = shared(0.0, name="s")
    fs = {k: function([x], None, updates=[(s, s + x.sum())], mode=_mode(k)) for k in LINKERS}
    assert fs["c"](xv) is None
    assert s.get_value() == 3.0


def test_updates_and_stateful_inputs() -> None:
    x = T.dvector("x")
    w = shared(np.zeros(3), name="w")
    acc = T.dscalar("acc")
    f = function(
        [x, In(acc, value=0.0, update=acc + x.sum())],
        [w.sum(), acc],
        updates=[(w, w + x)],
        mode=_mode("c"),
    )
    for k in range(1, 4):
        ws, a = f(np.ones(3))
        assert ws == 3.0 * (k - 1) and a == 3.0 * (k - 1)
    assert_allclose(w.get_value(), np.full(3, 3.0))
    assert f["acc"] == 9.0
    # As in Theano, the update is written into w's own memory: the array returned by
    # get_value(borrow=True) follows it (get_value() returns a copy that does not).
    held, copy = w.get_value(borrow=True), w.get_value()
    f(np.ones(3))
    assert w.get_value(borrow=True) is held
    assert_allclose(held, np.full(3, 4.0))
    assert_allclose(copy, np.full(3, 3.0))


def test_failing_calls_change_no_shared_variable_and_clear_cells() -> None:
    x, y = T.dvector("x"), T.dvector("y")
    w = shared(np.zeros(3), name="w")
    for linker in LINKERS:
        w.set_value(np.zeros(3))
        f = function([x, y], (x + y).sum(), updates=[(w, w + x * y)], mode=_mode(linker), name="f")
        before = w.get_value(borrow=True)
        with pytest.raises(ValueError, match=r"mis-match|shape"):
            f(np.ones(3), np.ones(4))  # elemwise shapes differ: fails inside the graph
        with pytest.raises(TypeError, match="input 1"):
            f(np.ones(3), np.ones((3, 3)))  # second argument rejected after the first stored
        assert w.get_value(borrow=True) is before
        assert_allclose(w.get_value(), np.zeros(3))
        assert _input_cells_empty(f)
        assert all(cell[0] is None for cell in f._clear_out)
        assert f(np.ones(3), np.ones(3)) == 6.0
        assert_allclose(w.get_value(), np.ones(3))


def test_an_update_rejected_by_its_type_changes_nothing() -> None:
    @as_op(itypes=[T.TensorType("float64", (True,))], otypes=[T.TensorType("float64", (True,))])
    def bad_shape(v):
        return np.zeros(3)  # breaks its own type: length 3 in a broadcastable dimension

    x = T.dvector("x")
    a = shared(np.zeros(2), name="a")
    b = shared(np.zeros(1), name="b", broadcastable=(True,))
    f = function([x], x.sum(), updates=[(a, a + x), (b, bad_shape(b))], mode=_mode("c"))
    with pytest.raises(TypeError, match=r"broadcastable|No shared variable was changed"):
        f(np.ones(2))
    assert_allclose(a.get_value(), np.zeros(2))
    assert b.get_value().shape == (1,)
    assert _input_cells_empty(f)


def test_profile_copy_and_pickle_keep_the_fast_path(rng: np.random.Generator) -> None:
    x = T.dvector("x")
    acc = T.dscalar("acc")
    f = function(
        [x, In(acc, value=1.0, update=acc * 2)], x * acc, mode=_mode("c"), trust_input=True
    )
    xv = rng.standard_normal(3)
    assert_allclose(f(xv), xv)
    g = f.copy()
    assert isinstance(g._caller, Caller) and g.trust_input
    assert_allclose(g(xv), xv * 2)  # the copy's default is a copy of f's current one
    h = pickle.loads(pickle.dumps(f))
    assert isinstance(h._caller, Caller) and h.trust_input
    assert_allclose(h(xv), xv * 2)
    shared_mem = f.copy(share_memory=True, delete_updates=True)
    assert_allclose(shared_mem(xv), xv * 2)
    assert_allclose(shared_mem(xv), xv * 2)
    p = function([x], T.exp(x), mode=_mode("c"), profile=True)
    assert p._fast is None  # profiling times every call in Python
    assert_allclose(p(xv), np.exp(xv))
    assert p.profile.fct_callcount == 1
    from opgraph.compile.profiling import ProfileStats

    q = function([x], T.exp(x), mode=_mode("c"))
    q.profile = ProfileStats(message="late")
    q(xv)
    assert q._fast is None and q.profile.fct_callcount == 1
    assert q.__call__.__func__ is Function._python_call
    q.profile = None
    assert q._fast.__self__ is q._caller
    assert isinstance(q.__call__, CallStar)
    assert_allclose(q(xv), np.exp(xv))


def test_lazy_graphs_use_the_caller_too() -> None:
    from opgraph.ifelse import ifelse

    c, x = T.dscalar("c"), T.dvector("x")
    fs = _both([c, x], ifelse(T.gt(c, 0), T.exp(x), T.sin(x)) * 1)
    assert type(fs["c"].fn.runner).__name__ == "CStack"
    xv = np.arange(3.0)
    assert_allclose(_same_outcome(fs, 1.0, xv)[1], np.exp(xv))
    assert_allclose(_same_outcome(fs, -1.0, xv)[1], np.sin(xv))
    assert _same_outcome(fs, [1.0], xv)[0] == "TypeError"


# ---------------------------------------------------------------------- borrow and aliasing


@pytest.mark.parametrize("linker", ["c", "c_nogc"])
def test_returned_outputs_are_never_overwritten(linker: str) -> None:
    x = T.dvector("x")
    f = function([x], [T.exp(x) + 1, x * 2], mode=Mode(linker=linker, optimizer="None"))
    a1, b1 = f(np.zeros(4))
    a2, b2 = f(np.ones(4))
    assert a1 is not a2 and b1 is not b2
    assert_allclose(a1, np.full(4, 2.0))
    assert_allclose(b1, np.zeros(4))
    assert_allclose(a2, np.full(4, np.e + 1))


def test_borrowed_outputs_may_be_reused_and_stay_correct() -> None:
    x = T.dvector("x")
    f = function([x], Out(T.exp(x) * 2, borrow=True), mode=Mode(linker="c_nogc", optimizer="None"))
    r1 = f(np.zeros(3))
    assert_allclose(r1, np.full(3, 2.0))
    r2 = f(np.ones(3))
    assert r2 is r1  # borrow=True: the buffer is reused (and r1 sees the new values)
    assert_allclose(r2, np.full(3, 2 * np.e))
    # Passing the borrowed result back in: its buffer is not reused while it is an input.
    r3 = f(r2)
    assert r3 is not r2
    assert_allclose(r2, np.full(3, 2 * np.e))
    assert_allclose(r3, 2 * np.exp(np.full(3, 2 * np.e)))
    # A reversed view of it as input overlaps too: computing in place would be wrong.
    r4 = f(r3[::-1])
    assert r4 is not r3
    assert_allclose(r4, 2 * np.exp(r3[::-1]))


def test_a_borrowed_result_passed_back_is_not_overwritten_while_read() -> None:
    x = T.dvector("x")
    doubled = T.exp(x) * 2  # exp, then mul writes the borrowed output...
    later = doubled + x  # ...and this node reads x after it
    f = function(
        [x], [Out(doubled, borrow=True), later], mode=Mode(linker="c_nogc", optimizer="None")
    )
    r1, _ = f(np.zeros(3))
    xv = r1.copy()
    r2, s2 = f(r1)
    assert_allclose(r2, 2 * np.exp(xv))
    assert_allclose(s2, 2 * np.exp(xv) + xv)
    _, s3 = f(r1[::-1])  # a view of it
    assert_allclose(s3, 2 * np.exp(xv[::-1]) + xv[::-1])
    w = shared(np.zeros(3), name="w")
    g = function([], Out(T.exp(w) * 2, borrow=True), mode=Mode(linker="c_nogc", optimizer="None"))
    held = g()
    w.set_value(held, borrow=True)  # a shared variable now holds the borrowed buffer
    assert_allclose(g(), np.full(3, 2 * np.exp(2.0)))
    assert_allclose(w.get_value(borrow=True), np.full(3, 2.0))


def test_borrowed_output_with_allow_gc_is_fresh_each_call() -> None:
    x = T.dvector("x")
    f = function([x], Out(x * 2, borrow=True), mode=Mode(linker="c", optimizer="None"))
    r1 = f(np.ones(2))
    r2 = f(np.zeros(2))
    assert r1 is not r2
    assert_allclose(r1, [2.0, 2.0])


def test_inputs_borrowed_by_the_function_are_not_written() -> None:
    x = T.dvector("x")
    f = function([In(x, borrow=True)], [Out(x + 1, borrow=True)], mode=Mode(linker="c_nogc"))
    xv = np.zeros(3)
    (r1,) = f(xv)
    (r2,) = f(r1)  # r1 is both the input and last call's output buffer
    assert_allclose(xv, np.zeros(3))
    assert_allclose(r2, np.full(3, 2.0))


# ---------------------------------------------------------------------- threads


def test_concurrent_calls_of_one_function_are_serialized(rng: np.random.Generator) -> None:
    x, y = T.dvector("x"), T.dvector("y")

    @as_op(itypes=[T.dvector], otypes=[T.dvector])
    def slow_copy(v):
        time.sleep(0.001)  # another thread stores its arguments meanwhile, unless serialized
        return v.copy()

    # C kernels on 20k elements (they release the GIL), a Python node, then y is read.
    f = function([x, y], slow_copy(T.tanh(x) * 2) + y, mode=_mode("c_nogc"))
    values = [rng.standard_normal(20_000) for _ in range(6)]
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for _ in range(5):
                assert_allclose(f(values[k], values[k]), np.tanh(values[k]) * 2 + values[k])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(values))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_contended_calls_hand_over_their_turn_and_failures_release_it() -> None:
    """Threads queue on one function; each finishing call, failed or not, passes its turn
    on: every call runs once, alone, and the function is free afterwards."""
    x = T.dvector("x")
    running = [0]
    overlaps: list[int] = []

    @as_op(itypes=[T.dvector], otypes=[T.dvector])
    def guarded(v):
        running[0] += 1
        if running[0] != 1:
            overlaps.append(running[0])
        time.sleep(0.0001)  # gives up the GIL: another thread tries to call meanwhile
        running[0] -= 1
        if v[0] < 0:
            raise ValueError("negative input")
        return v * 2

    f = function([x], guarded(x) + 1, mode=_mode("c"))
    results: list[tuple[int, str]] = []

    def work(k: int) -> None:
        for i in range(40):
            sign = -1.0 if (i + k) % 3 == 0 else 1.0
            try:
                got = f(np.full(2, sign * k))
                results.append((k, "ok" if np.array_equal(got, np.full(2, 2 * k + 1.0)) else "bad"))
            except ValueError as exc:
                results.append((k, "raised" if "negative input" in str(exc) else "bad"))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(1, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a call never got its turn"
    assert not overlaps
    assert len(results) == 6 * 40 and all(r != "bad" for _, r in results)
    assert sum(r == "raised" for _, r in results) == sum(
        (i + k) % 3 == 0 for k in range(1, 7) for i in range(40)
    )
    done = threading.Thread(target=lambda: results.append((0, str(f(np.ones(2))))))
    done.start()
    done.join(timeout=10)
    assert not done.is_alive() and results[-1] == (0, str(np.full(2, 3.0)))


def test_a_function_calling_itself_raises() -> None:
    x = T.dvector("x")
    holder: dict[str, Any] = {}

    @as_op(itypes=[T.dvector], otypes=[T.dvector])
    def reenter(v):
        return holder["f"](v)

    for linker in LINKERS:
        holder["f"] = f = function([x], reenter(x) + 1, mode=_mode(linker))
        with pytest.raises(RuntimeError, match="already running in the same thread"):
            f(np.ones(2))
        assert _input_cells_empty(f)
