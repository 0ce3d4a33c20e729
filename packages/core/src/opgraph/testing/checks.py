"""Checks shared by opgraph's tests and plugin authors' tests.

The small checks (``assert_allclose``, ``check_infer_shape``, ``check_modes``) are the parts
:func:`compare_linkers` (one graph run by several linkers, compared with the first) and
:func:`opgraph.testing.check_op` (one Op: values in every linker and mode, ``infer_shape``,
``grad``, bad inputs) are made of. A failing check says what differed: where (linker or
mode), the input shapes and dtypes, and the largest absolute and relative errors.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import unittest
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from opgraph.compile.function import function
from opgraph.compile.mode import Mode, get_mode, missing_linker_hint
from opgraph.configdefaults import config
from opgraph.graph.basic import Variable
from opgraph.graph.op import Op
from opgraph.graph.traversal import io_toposort
from opgraph.link.basic import Linker
from opgraph.plugins import get_plugin_manager
from opgraph.tensor.basic import constant, patternbroadcast
from opgraph.tensor.gradcheck import GradientError, verify_grad
from opgraph.tensor.type import TensorType

try:  # the kit's checks work without pytest; skipping then raises unittest's SkipTest
    from pytest import skip as _pytest_skip
except ImportError:  # pragma: no cover - pytest is installed wherever tests run
    _pytest_skip = None

__all__ = [
    "ALL_MODES",
    "CHECK_MODES",
    "CheckTarget",
    "assert_allclose",
    "check_infer_shape",
    "check_modes",
    "check_op",
    "check_targets",
    "compare_linkers",
    "describe_values",
    "installed_linkers",
    "random_value",
    "tolerance",
]

#: Every named mode a test should run an Op in.
ALL_MODES = ("FAST_COMPILE", "FAST_RUN", "DEBUG_MODE", "PROFILE_MODE")

#: The modes ``check_op`` and ``OpSuite`` compile in unless told otherwise
#: (``PROFILE_MODE`` is FAST_RUN's graph and linker again, with timing).
CHECK_MODES = ("FAST_COMPILE", "FAST_RUN", "DEBUG_MODE")

_TOL = {
    "float16": (5e-3, 5e-3),
    "float32": (1e-5, 1e-5),
    "complex64": (1e-5, 1e-5),
    "float64": (1e-10, 1e-10),
    "complex128": (1e-10, 1e-10),
}


def tolerance(dtype: Any) -> tuple[float, float]:
    """``(rtol, atol)`` suited to comparing values of ``dtype`` with a float64 reference."""
    return _TOL.get(str(np.dtype(dtype)), (0.0, 0.0))


def assert_allclose(actual: Any, expected: Any, dtype: Any = None, err_msg: str = "") -> None:
    """Assert equal values up to the tolerance of ``dtype`` (the actual value's by default).

    Shapes must match; NaN equals NaN and infinities must match; integer and boolean values
    must be equal. Dtypes are not compared (``check_op`` and ``compare_linkers`` do that).
    """
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    rtol, atol = tolerance(dtype if dtype is not None else actual.dtype)
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}. {err_msg}"
    if actual.dtype.kind in "fc" or expected.dtype.kind in "fc":
        np.testing.assert_allclose(
            actual, expected, rtol=rtol, atol=atol, equal_nan=True, err_msg=err_msg
        )
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=err_msg)


def installed_linkers(*, distinct: bool = False) -> list[str]:
    """Names of the linkers installed plugins provide (``py``, ``vm``, ``c``, ...), sorted.

    With ``distinct=True``, names that build the same linker (backend-c's ``c``, ``cvm`` and
    ``c|py``) count once, under the first name.
    """
    factories = get_plugin_manager().linkers()
    names = sorted(factories)
    if not distinct:
        return names
    seen: list[Any] = []
    out = []
    for name in names:
        if not any(factories[name] is f for f in seen):
            seen.append(factories[name])
            out.append(name)
    return out


def describe_values(values: Sequence[Any]) -> str:
    """``'float64 (3, 4), int64 ()'``: the dtypes and shapes of input values, for messages."""
    parts = []
    for v in values:
        if isinstance(v, Variable):
            parts.append(f"symbolic {v.type}")
        else:
            arr = np.asarray(v)
            parts.append(f"{arr.dtype} {arr.shape}")
    return ", ".join(parts) or "no inputs"


def copy_value(value: Any) -> Any:
    """A copy of a test value that a call may mutate without touching the original."""
    if isinstance(value, np.ndarray):
        return value.copy(order="K")
    return copy.deepcopy(value)


def _same_value(a: Any, b: Any) -> bool:
    """True if ``a`` still holds what ``b`` (its original) held."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    try:
        return bool(np.all(a == b))
    except Exception:  # values without a meaningful ==: nothing to check
        return True


def difference(actual: Any, expected: Any, dtype: Any = None) -> str:
    """One line saying how ``actual`` differs from ``expected``: how many elements, the
    largest absolute error with its index and both values, the largest relative error and
    the tolerance of ``dtype`` (the actual value's by default)."""
    a = np.asarray(actual)
    e = np.asarray(expected)
    if a.shape != e.shape:
        return f"shape {a.shape} differs from the expected {e.shape}"
    rtol, atol = tolerance(dtype if dtype is not None else a.dtype)
    tol = f"rtol={rtol:g}, atol={atol:g} for {np.dtype(dtype or a.dtype)}"
    if a.size == 0:
        return f"empty values of shape {a.shape} ({tol})"
    numeric = a.dtype.kind in "biufc" and e.dtype.kind in "biufc"
    if not numeric:
        bad = ~np.equal(a, e)
        first = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.any() else ()
        return f"{int(bad.sum())} of {a.size} elements differ, the first at {first}"
    wide = "complex128" if "c" in (a.dtype.kind, e.dtype.kind) else "float64"
    aw, ew = a.astype(wide), e.astype(wide)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(aw - ew).astype("float64")
        same = (aw == ew) | (np.isnan(aw) & np.isnan(ew))
        err = np.where(same, 0.0, np.where(np.isnan(err), np.inf, err))
        rel = err / np.maximum(np.abs(ew).astype("float64"), np.finfo("float64").tiny)
        rel = np.where(same, 0.0, rel)
        bad = err > atol + rtol * np.abs(ew)
    n_bad = int(bad.sum())
    pos = np.unravel_index(int(np.argmax(err)), a.shape)
    idx = tuple(int(i) for i in pos)
    return (
        f"{n_bad} of {a.size} elements differ; max abs error {float(err[pos]):.3g} at index "
        f"{idx} (got {a[pos]}, expected {e[pos]}); max rel error {float(rel.max()):.3g} "
        f"({tol})"
    )


def short_repr(value: Any, limit: int = 400) -> str:
    """A value's repr cut to ``limit`` characters (large arrays summarised by NumPy)."""
    if isinstance(value, np.ndarray):
        text = np.array2string(value, threshold=24, edgeitems=3, precision=8)
        text = f"{text} ({value.dtype}, shape {value.shape})"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def compare_values(
    actual: Any,
    expected: Any,
    where: str,
    dtype: Any = None,
    assert_fn: Callable[..., None] | None = None,
) -> None:
    """``assert_fn(actual, expected)`` (dtype-aware :func:`assert_allclose` by default); on
    failure an AssertionError starting with ``where``, then :func:`difference` and both
    values."""
    check = assert_fn or (lambda a, e: assert_allclose(a, e, dtype=dtype))
    try:
        check(actual, expected)
    except AssertionError as exc:
        said = str(exc).strip() if assert_fn is not None else ""
        name = getattr(assert_fn, "__name__", "assert_fn")
        extra = f"\n  {name} said: {said}" if said else ""
        try:
            how = difference(actual, expected, dtype)
        except Exception:  # values difference() cannot read (a custom assert_fn's)
            how = "values differ"
        raise AssertionError(
            f"{where}\n  {how}\n"
            f"  got:      {short_repr(actual)}\n  expected: {short_repr(expected)}{extra}"
        ) from None


def skip(reason: str) -> None:
    """Skip the running test (``pytest.skip``; unittest's SkipTest where pytest is absent)."""
    if _pytest_skip is not None:
        _pytest_skip(reason)
    raise unittest.SkipTest(reason)  # pragma: no cover - only without pytest


def linker_hint(name: str) -> str:
    """``' (install opgraph-backend-c, which provides it)'`` for a known linker (or the
    advice for a name that is no linker, such as ``cuda``), else ''."""
    hint = missing_linker_hint(name)
    return f" ({hint})" if hint else ""


def linker_installed(name: str) -> bool:
    """True if ``name`` (or ``auto``, or ``<name>_nogc``) names an installed linker."""
    base = name[: -len("_nogc")] if name.endswith("_nogc") else name
    return base == "auto" or base in get_plugin_manager().linkers()


# ----------------------------------------------------------------------------------------
# where a check compiles: named modes and linkers


@dataclasses.dataclass(frozen=True)
class CheckTarget:
    """One way ``check_op`` compiles a graph: a named mode, or a linker with FAST_RUN's
    rewrites; ``skip`` (with ``mode`` None) says why it cannot run here."""

    id: str
    label: str
    mode: Mode | None
    skip: str | None = None


def _linker_key(mode: Mode) -> tuple[Any, ...]:
    """What a mode's linker is, resolved: its factory (aliases share one) and gc setting."""
    spec = mode.provided_linker
    if isinstance(spec, Linker):
        return ("object", id(spec))
    pm = get_plugin_manager()
    name = spec or config.linker
    if name == "auto":
        name = pm.best_linker()
    nogc = name.endswith("_nogc")
    base = name[: -len("_nogc")] if nogc else name
    factory = pm.linkers().get(base)
    return ("factory", factory if factory is not None else base, nogc)


def _resolved_linker_name(mode: Mode) -> str:
    spec = mode.provided_linker
    if isinstance(spec, Linker):
        return type(spec).__name__
    name = spec or config.linker
    return get_plugin_manager().best_linker() if name == "auto" else name


def _target_key(mode: Mode) -> tuple[Any, ...]:
    """Two modes with the same key compile and run a graph the same way."""
    opt = mode.provided_optimizer
    if isinstance(opt, str) and opt == "default":
        opt = config.optimizer
    opt_key = opt if opt is None or isinstance(opt, str) else id(opt)
    return (type(mode), _linker_key(mode), opt_key, bool(getattr(mode, "profile", False)))


def check_targets(
    linkers: Sequence[str | Mode] | None = None, modes: Sequence[str | Mode] | None = None
) -> list[CheckTarget]:
    """The ways ``check_op`` compiles a graph: each of ``modes`` (default
    :data:`CHECK_MODES`), then each of ``linkers`` (default: every distinct installed
    linker that runs every graph, i.e. not ``runs_every_graph = False`` like opgraph-dask's)
    with FAST_RUN's rewrites.

    A linker that one of the modes already runs with the same rewrites is not repeated
    (``FAST_RUN`` is the ``cvm`` linker where backend-c is installed, ``vm`` with core
    alone). A linker named in ``linkers`` that is not installed gives a target whose
    ``skip`` says which package provides it.
    """
    out: list[CheckTarget] = []
    seen: set[tuple[Any, ...]] = set()

    def add(target: CheckTarget) -> None:
        if target.mode is not None:
            key = _target_key(target.mode)
            if key in seen:
                return
            seen.add(key)
        out.append(target)

    for spec in CHECK_MODES if modes is None else modes:
        mode = get_mode(spec)
        name = spec if isinstance(spec, str) else str(spec)
        add(CheckTarget(name, f"mode {name} (linker {_resolved_linker_name(mode)!r})", mode))
    for spec in installed_linkers(distinct=True) if linkers is None else linkers:
        if isinstance(spec, Mode):
            add(CheckTarget(str(spec), f"mode {spec}", spec))
        elif not linker_installed(spec):
            reason = f"linker {spec!r} is not installed{linker_hint(spec)}"
            out.append(CheckTarget(f"linker={spec}", f"linker {spec!r}", None, reason))
        else:
            mode = Mode(linker=spec, optimizer="fast_run")
            if linkers is None and not getattr(mode.linker, "runs_every_graph", True):
                continue  # a dask-like linker runs only the Ops it lowers: checked when named
            add(CheckTarget(f"linker={spec}", f"linker {spec!r} (FAST_RUN's rewrites)", mode))
    return out


# ----------------------------------------------------------------------------------------
# one graph in several modes or linkers


def check_modes(
    inputs: Sequence[Variable],
    outputs: Variable | Sequence[Variable],
    values: Sequence[Any],
    expected: Any,
    modes: Sequence[Any] = ALL_MODES,
    linkers: Sequence[str] | None = None,
    dtype: Any = None,
) -> None:
    """Compile ``inputs -> outputs`` in every mode (and linker) and compare with ``expected``.

    ``expected`` is a value (or list of values) computed with NumPy. Input values are copied
    per call, so an in-place bug cannot hide behind a mutated input.
    """
    single = isinstance(outputs, Variable)
    exp = [expected] if single else list(expected)
    targets: list[Any] = list(modes)
    for name in linkers or ():
        targets.append(Mode(linker=name, optimizer="fast_run"))
    for mode in targets:
        f = function(list(inputs), outputs, mode=get_mode(mode), on_unused_input="ignore")
        got = f(*[np.array(v, copy=True) if isinstance(v, np.ndarray) else v for v in values])
        got = [got] if single else got
        for k, (g, e) in enumerate(zip(got, exp, strict=True)):
            assert_allclose(g, e, dtype=dtype, err_msg=f"mode {mode}, output {k}")


def linker_modes(
    linkers: Sequence[str | Mode | Linker], mode: str | Mode = "FAST_RUN"
) -> list[tuple[str, Mode]]:
    """``(label, Mode)`` for each of ``linkers`` (a name, a Linker or a whole Mode) with
    ``mode``'s rewrites; the test is skipped when the first one or all but the first are
    not installed (the others not installed are left out)."""
    base = get_mode(mode)
    out: list[tuple[str, Mode]] = []
    missing: list[str] = []
    first_missing = False
    for i, spec in enumerate(linkers):
        if isinstance(spec, Mode):
            out.append((f"mode {spec}", spec))
        elif isinstance(spec, Linker):
            out.append((f"linker {type(spec).__name__}", base.clone(linker=spec)))
        elif linker_installed(spec):
            out.append((f"linker {spec!r}", base.clone(linker=spec)))
        else:
            missing.append(f"{spec!r}{linker_hint(spec)}")
            first_missing = first_missing or i == 0
    if missing and (first_missing or len(out) < 2):
        skip(f"linker {', '.join(missing)} not installed: nothing to compare")
    return out


def compare_linkers(
    graph_inputs: Sequence[Any],
    outputs: Variable | Sequence[Variable],
    test_inputs: Sequence[Any],
    linkers: Sequence[str | Mode | Linker] = ("py", "c"),
    mode: str | Mode = "FAST_RUN",
    assert_fn: Callable[..., None] = assert_allclose,
) -> list[Any]:
    """Run one graph with each of ``linkers`` and compare every output with the first's.

    Parameters
    ----------
    graph_inputs, outputs
        The graph, as for ``function``.
    test_inputs
        Values of ``graph_inputs``; each linker gets fresh copies, and a linker that writes
        into an input it was not allowed to (a plain input, not ``In(mutable=True)``) fails.
    linkers
        Linker names (``"py"``, ``"vm"``, ``"c"``, ...), Linker objects or whole Modes; the
        first is the reference. Names not installed are left out; the test is skipped
        (``pytest.skip``, with the package to install) when the first or all the others
        are missing.
    mode
        The mode whose rewrites every linker compiles with.
    assert_fn
        ``assert_fn(actual, expected)`` raising AssertionError on a difference.

    Returns
    -------
    The first linker's output values, as a list.
    """
    chosen = linker_modes(linkers, mode)
    outs = [outputs] if isinstance(outputs, Variable) else list(outputs)
    inputs_text = describe_values(test_inputs)
    results: list[tuple[str, list[Any]]] = []
    for label, m in chosen:
        where = f"compare_linkers, {label} (inputs {inputs_text})"
        args = [copy_value(v) for v in test_inputs]
        try:
            f = function(list(graph_inputs), outs, mode=m, on_unused_input="ignore")
            got = f(*args)
        except Exception as exc:
            exc.add_note(f"raised in {where}")
            raise
        for i, (inp, arg, orig) in enumerate(zip(graph_inputs, args, test_inputs, strict=True)):
            if isinstance(inp, Variable) and not _same_value(arg, orig):
                raise AssertionError(
                    f"{where}: input {i} ({inp}) was changed by the call, although the "
                    "graph may not write into it (a kernel writing into its input without "
                    "a destroy_map, or a view returned where a copy was due)"
                )
        results.append((label, list(got)))
    ref_label, ref = results[0]
    for label, got in results[1:]:
        for k, (g, r) in enumerate(zip(got, ref, strict=True)):
            where = (
                f"compare_linkers: output {k} ({outs[k]}) of {label} differs from {ref_label} "
                f"(mode {mode}; inputs {inputs_text})"
            )
            if isinstance(g, np.ndarray) and isinstance(r, np.ndarray) and g.dtype != r.dtype:
                raise AssertionError(f"{where}\n  dtype {g.dtype}, expected {r.dtype}")
            compare_values(
                g, r, where, assert_fn=None if assert_fn is assert_allclose else assert_fn
            )
    return list(ref)


# ----------------------------------------------------------------------------------------
# one Op: check_op and its parts (OpSuite runs the parts one by one)


def op_name(op: Any) -> str:
    """How messages name ``op``: the Op's str, or a callable's qualified name."""
    if isinstance(op, Op):
        return str(op)
    return getattr(op, "__qualname__", None) or repr(op)


def _as_case(inputs: Any) -> list[Any]:
    """A case's input values as a list (one value given alone is a case of one input)."""
    return list(inputs) if isinstance(inputs, list | tuple) else [inputs]


class OpGraph:
    """``op`` applied to symbolic inputs made from test values.

    Each value becomes a fresh input of a TensorType of its dtype whose length-1 dimensions
    are broadcastable (Theano's ``makeTester`` convention, so a ``(1, 4)`` value broadcasts
    against a ``(3, 4)`` one); an opgraph Variable among the values (a constant) is passed
    to ``op`` as it is. ``inputs``/``values`` are the function's inputs and their values;
    ``outputs`` are ``op``'s outputs, always a list.
    """

    def __init__(self, op: Any, values: Sequence[Any]) -> None:
        self.op = op
        self.all_values = list(values)
        self.symbolic: list[Variable] = []
        self.inputs: list[Variable] = []
        self.values: list[Any] = []
        for i, v in enumerate(self.all_values):
            if isinstance(v, Variable):
                self.symbolic.append(v)
                continue
            arr = np.asarray(v)
            var = TensorType(str(arr.dtype), [d == 1 for d in arr.shape])(f"input{i}")
            self.symbolic.append(var)
            self.inputs.append(var)
            self.values.append(arr if isinstance(v, np.ndarray) else np.asarray(v))
        self.outputs = apply_op(op, self.symbolic)


def apply_op(op: Any, symbolic: Sequence[Any]) -> list[Variable]:
    """``op(*symbolic)`` as a list of output variables (an Op gives all its outputs)."""
    if isinstance(op, Op):
        out = op(*symbolic, return_list=True)
    else:
        out = op(*symbolic)
    outs = list(out) if isinstance(out, list | tuple) else [out]
    for k, o in enumerate(outs):
        if not isinstance(o, Variable):
            raise TypeError(
                f"{op_name(op)} returned {o!r} as output {k}, not an opgraph Variable: `op` "
                "must be an Op or a callable building the outputs from symbolic inputs"
            )
    return outs


def expected_values(
    op: Any, values: Sequence[Any], reference: Callable[..., Any] | None, expected: Any
) -> list[Any]:
    """What each output of ``op`` on ``values`` must be: ``expected``, or
    ``reference(*values)``, or (with neither) what the ``py`` linker computes, that is each
    node's ``perform``."""
    graph = OpGraph(op, values)
    n_out = len(graph.outputs)
    if expected is None and reference is None:
        f = function(graph.inputs, graph.outputs, mode=Mode(linker="py", optimizer=None))
        return list(f(*[copy_value(v) for v in graph.values]))
    if expected is None:
        plain = [v.data if isinstance(v, Variable) else v for v in graph.all_values]
        expected = reference(*[copy_value(v) for v in plain])  # type: ignore[misc]
        source = f"reference {getattr(reference, '__name__', reference)!r}"
    else:
        source = "expected="
    if n_out == 1:
        return [expected]
    if not isinstance(expected, list | tuple) or len(expected) != n_out:
        got = len(expected) if isinstance(expected, list | tuple) else "one value"
        raise AssertionError(
            f"check_op({op_name(op)}): {source} gave {got}, but the op has {n_out} outputs: "
            "give a list with one value per output"
        )
    return list(expected)


def check_op_values(
    op: Any, values: Sequence[Any], target: CheckTarget, expected: Sequence[Any]
) -> None:
    """Compile ``op`` on ``values`` as ``target`` says, run it and compare each output with
    ``expected``: its dtype must be the output type's, its value within the tolerance of
    that dtype, and the input values must be left as they were."""
    name = op_name(op)
    where = f"check_op({name}) in {target.label}, inputs {describe_values(values)}"
    if target.mode is None:
        skip(f"{where}: {target.skip}")
    graph = OpGraph(op, values)
    args = [copy_value(v) for v in graph.values]
    try:
        f = function(graph.inputs, graph.outputs, mode=target.mode, on_unused_input="ignore")
        got = list(f(*args))
    except Exception as exc:
        exc.add_note(f"raised in {where}")
        raise
    for i, (arg, orig) in enumerate(zip(args, graph.values, strict=True)):
        if not _same_value(arg, orig):
            raise AssertionError(
                f"{where}: input {i} was changed by the call (a kernel writing into an input "
                "the Op does not destroy: destroy_map says which inputs an Op may overwrite)"
            )
    for k, (out, g, e) in enumerate(zip(graph.outputs, got, expected, strict=True)):
        dtype = getattr(out.type, "dtype", None)
        head = f"{where}: output {k} ({out.type})"
        if isinstance(g, np.ndarray) and dtype is not None and str(g.dtype) != dtype:
            raise AssertionError(
                f"{head} has dtype {g.dtype}, but the output's type says {dtype} "
                "(perform or the kernel must give exactly the type's dtype)"
            )
        compare_values(g, e, f"{head} differs from the expected value", dtype=dtype)


def check_op_infer_shape(op: Any, values: Sequence[Any]) -> None:
    """:func:`check_infer_shape` on ``op`` applied to ``values`` (when ``op`` is an Op, its
    own node must be there and implement ``infer_shape``)."""
    graph = OpGraph(op, values)
    try:
        check_infer_shape(
            graph.inputs,
            graph.outputs,
            [copy_value(v) for v in graph.values],
            op_class=type(op) if isinstance(op, Op) else None,
        )
    except AssertionError as exc:
        raise AssertionError(
            f"check_op({op_name(op)}), inputs {describe_values(values)}: {exc}\n"
            "HINT: pass infer_shape=False if the Op has no infer_shape on purpose."
        ) from None


def grad_inputs(values: Sequence[Any], grad: bool | Sequence[int]) -> list[int]:
    """The positions of the inputs whose gradient ``check_op`` verifies: every float input
    for ``grad=True``, those listed for a sequence, none for False."""
    if grad is False:
        return []
    floats = [
        i
        for i, v in enumerate(values)
        if not isinstance(v, Variable) and np.asarray(v).dtype.kind == "f"
    ]
    if grad is True:
        return floats
    chosen = [int(i) for i in grad]
    wrong = [i for i in chosen if i not in floats]
    if wrong:
        raise ValueError(
            f"grad={list(grad)}: input(s) {wrong} are not float inputs; "
            f"finite differences need float values (the float inputs are {floats})"
        )
    return chosen


def check_op_grad(
    op: Any,
    values: Sequence[Any],
    grad: bool | Sequence[int] = True,
    rng: np.random.Generator | None = None,
) -> None:
    """``verify_grad`` of each float output of ``op`` with respect to the inputs
    :func:`grad_inputs` picks (the others are constants); a disagreement with finite
    differences is an AssertionError naming the output, the input and the errors."""
    chosen = grad_inputs(values, grad)
    if not chosen:
        return
    name = op_name(op)
    graph = OpGraph(op, values)
    patterns = {i: graph.symbolic[i].type.broadcastable for i in chosen}
    n_out = len(graph.outputs)
    float_outs = [
        k for k, o in enumerate(graph.outputs) if str(getattr(o.type, "dtype", "")) in _TOL
    ]
    for k in float_outs:

        def fun(*wrt: Variable, k: int = k) -> Variable:
            given = dict(zip(chosen, wrt, strict=True))
            sym = [
                patternbroadcast(given[i], patterns[i])
                if i in given
                else (v if isinstance(v, Variable) else constant(np.asarray(v)))
                for i, v in enumerate(values)
            ]
            return apply_op(op, sym)[k]

        out_text = f"output {k}" if n_out > 1 else "the output"
        try:
            verify_grad(fun, [np.asarray(values[i]) for i in chosen], rng=rng)
        except GradientError as exc:
            raise AssertionError(
                f"check_op({name}): the gradient of {out_text} with respect to input "
                f"{chosen[exc.arg]} disagrees with finite differences (inputs "
                f"{describe_values(values)})\n{exc}\n"
                "HINT: check the Op's grad (or L_op); pass grad=False (or the positions of "
                "the inputs it is defined for) if it has none."
            ) from None
        except Exception as exc:
            exc.add_note(
                f"raised while check_op({name}) checked the gradient of {out_text} "
                f"(inputs {describe_values(values)}); pass grad=False if the Op has no grad"
            )
            raise


def check_op_bad_input(
    op: Any, bad: Sequence[Any], targets: Sequence[CheckTarget], index: int = 0
) -> None:
    """``bad = (inputs, exception type, regex)``: building ``op`` on those values, or
    running it in each of ``targets``, must raise that exception with a message matching
    the regex."""
    values, exc_type, pattern = bad
    values = _as_case(values)
    name = op_name(op)
    kinds = exc_type if isinstance(exc_type, tuple) else (exc_type,)
    want = f"{' or '.join(k.__name__ for k in kinds)} matching {pattern!r}"
    head = f"check_op({name}): bad input {index} ({describe_values(values)})"

    def matches(exc: BaseException, when: str) -> None:
        if not isinstance(exc, exc_type):
            raise AssertionError(
                f"{head} raised {type(exc).__name__} {when} instead of {want}: "
                f"{short_repr(str(exc), 600)}"
            ) from exc
        if not re.search(pattern, str(exc)):
            raise AssertionError(
                f"{head} raised {type(exc).__name__} {when} as expected, but its message "
                f"does not match {pattern!r}: {short_repr(str(exc), 600)}"
            ) from exc

    try:
        graph = OpGraph(op, values)
    except Exception as exc:
        matches(exc, "when the graph was built")
        return
    for target in targets:
        if target.mode is None:
            continue
        try:
            f = function(graph.inputs, graph.outputs, mode=target.mode, on_unused_input="ignore")
            got = f(*[copy_value(v) for v in graph.values])
        except Exception as exc:
            matches(exc, f"in {target.label}")
            continue
        raise AssertionError(
            f"{head} did not raise {want} in {target.label}: it built and ran, giving "
            f"{', '.join(short_repr(g, 200) for g in got)}"
        )


def check_op(
    op: Any,
    inputs: Sequence[Any],
    *,
    reference: Callable[..., Any] | None = None,
    expected: Any = None,
    grad: bool | Sequence[int] = True,
    infer_shape: bool = True,
    linkers: Sequence[str | Mode] | None = None,
    modes: Sequence[str | Mode] | None = None,
    bad_inputs: Sequence[tuple[Any, type[BaseException], str]] = (),
    rng: np.random.Generator | None = None,
) -> None:
    """Check one Op on one set of inputs: values everywhere, shapes, gradient, bad inputs.

    Parameters
    ----------
    op
        An Op instance, or a callable building the output(s) from symbolic inputs
        (``lambda x: opgraph.tensor.sum(x, axis=0)``).
    inputs
        NumPy values; each becomes a symbolic input of its dtype and ndim (length-1
        dimensions broadcastable). An opgraph Variable among them is passed as it is.
    reference, expected
        ``reference(*inputs)`` gives the expected output value(s) (a list for several
        outputs), or ``expected`` gives them directly. With neither, each node's
        ``perform`` (the ``py`` linker) is the reference.
    grad
        Verify the gradient by finite differences (``verify_grad``) with respect to every
        float input; a sequence of input positions restricts it; False skips it.
    infer_shape
        Check ``infer_shape`` against the real output shapes.
    linkers, modes
        Where the values are checked (see :func:`check_targets`): every distinct installed
        linker with FAST_RUN's rewrites, and the modes of :data:`CHECK_MODES`, by default.
        A named linker that is not installed is left out with a warning.
    bad_inputs
        ``(inputs, exception type, regex)`` triples: building the graph on those values or
        running it in each place must raise that exception with a matching message.
    rng
        The generator of ``verify_grad``'s random projections.

    Raises
    ------
    AssertionError
        Saying what differed: where (linker or mode), the input shapes and dtypes, and the
        largest absolute and relative errors.
    """
    values = _as_case(inputs)
    wanted = expected_values(op, values, reference, expected)
    targets = check_targets(linkers, modes)
    for target in targets:
        if target.mode is None:
            warnings.warn(f"check_op({op_name(op)}): {target.skip}; not checked", stacklevel=2)
            continue
        check_op_values(op, values, target, wanted)
    if infer_shape:
        check_op_infer_shape(op, values)
    if grad is not False:
        check_op_grad(op, values, grad, rng)
    for k, bad in enumerate(bad_inputs):
        check_op_bad_input(op, bad, targets, index=k)


# ----------------------------------------------------------------------------------------
# infer_shape


def check_infer_shape(
    inputs: Sequence[Variable],
    outputs: Variable | Sequence[Variable],
    values: Sequence[Any],
    op_class: type | None = None,
) -> None:
    """Check that every node's ``infer_shape`` matches the real shapes of its outputs.

    Evaluates the graph once with the Python linker, then for each node (of ``op_class``,
    if given) compares the shapes its ``infer_shape`` computes from the real input shapes.
    With ``op_class``, the graph must hold such a node and it must implement
    ``infer_shape``.
    """
    outs = [outputs] if isinstance(outputs, Variable) else list(outputs)
    nodes = io_toposort(list(inputs), outs)
    probe = [o for n in nodes for o in n.outputs] + [i for n in nodes for i in n.inputs]
    probe = list(dict.fromkeys(v for v in probe if v not in inputs and v.owner is not None))
    f = function(
        list(inputs), probe, mode=Mode(linker="py", optimizer=None), on_unused_input="ignore"
    )
    vals = dict(zip(probe, f(*values), strict=True))
    vals.update(zip(inputs, values, strict=True))
    checked = found = 0
    for node in nodes:
        if op_class is not None and not isinstance(node.op, op_class):
            continue
        found += 1
        if not hasattr(node.op, "infer_shape"):
            continue
        in_shapes = [
            np.shape(vals[i]) if i in vals else np.shape(getattr(i, "data", ()))
            for i in node.inputs
        ]
        try:
            shapes = node.op.infer_shape(node, in_shapes)
        except NotImplementedError:
            continue
        assert len(shapes) == len(node.outputs), (
            f"{node.op}.infer_shape gave {len(shapes)} shapes for {len(node.outputs)} outputs "
            f"(input shapes {in_shapes})"
        )
        dims = _eval_dims(shapes, inputs, values)
        for k, (out, shp) in enumerate(zip(node.outputs, shapes, strict=True)):
            got = tuple(int(dims.get(id(s), s)) for s in shp)
            real = np.shape(vals[out])
            assert got == real, (
                f"{node.op}.infer_shape gave {got} for output {k}, but its real shape is "
                f"{real} (input shapes {in_shapes})"
            )
        checked += 1
    if op_class is not None:
        assert found, f"no {op_class.__name__} node found in the graph"
        assert checked, (
            f"{op_class.__name__} does not implement infer_shape (it raised "
            "NotImplementedError or is missing)"
        )


def _eval_dims(
    shapes: Sequence[Sequence[Any]], inputs: Sequence[Variable], values: Sequence[Any]
) -> dict[int, Any]:
    """The value of each symbolic dimension in ``shapes`` (by ``id``), computed from the
    graph's input values (an ``infer_shape`` may read the node's inputs, such as an axis)."""
    symbolic = list({id(s): s for shp in shapes for s in shp if isinstance(s, Variable)}.values())
    if not symbolic:
        return {}
    f = function(
        list(inputs), symbolic, mode=Mode(linker="py", optimizer=None), on_unused_input="ignore"
    )
    return {id(s): np.asarray(v) for s, v in zip(symbolic, f(*values), strict=True)}


def random_value(
    rng: np.random.Generator, shape: Sequence[int], dtype: str, low: float = -1.0, high: float = 1.0
) -> np.ndarray:
    """Random test data of ``dtype`` (bool, int or float) in ``[low, high)``."""
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if np.dtype(dtype).kind in "iu":
        return rng.integers(int(low), max(int(high), int(low) + 1), size=shape).astype(dtype)
    return (low + (high - low) * rng.random(shape)).astype(dtype)


Checker = Callable[..., None]
