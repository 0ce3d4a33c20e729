"""Conformance suites to subclass: ``OpSuite`` for one Op, ``LinkerSuite`` for one linker.

A plugin's tests get a whole battery of checks from one class statement::

    class TestCube(OpSuite):
        op = cube
        cases = [(np.linspace(-2, 2, 12).reshape(3, 4),)]
        reference = staticmethod(lambda x: x**3)


    class TestMyLinker(LinkerSuite):
        linker = "mine"

The test classes' names must start with ``Test`` (pytest collects them); the base classes
here are not collected themselves. The suites use the fixtures of opgraph's pytest plugin
(``rng``), and run where only opgraph-core is installed: a linker that is not installed is
skipped with the package that provides it.
"""

from __future__ import annotations

import re
import runpy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.compile.ops import as_op
from opgraph.compile.sharedvalue import shared
from opgraph.configdefaults import config
from opgraph.ifelse import ifelse
from opgraph.link.basic import Linker
from opgraph.scan_module import scan
from opgraph.tensor.type import TensorType
from opgraph.testing.checks import (
    CheckTarget,
    check_op_bad_input,
    check_op_grad,
    check_op_infer_shape,
    check_op_values,
    check_targets,
    compare_linkers,
    compare_values,
    copy_value,
    describe_values,
    expected_values,
    grad_inputs,
    linker_modes,
    random_value,
    short_repr,
)

__all__ = ["LinkerSuite", "OpSuite"]


def _static(cls: type, name: str) -> Any:
    """Class attribute ``name`` as written in the class body: a function assigned there (a
    ``lambda`` as ``op``, a plain function as ``reference``) is not bound to the instance."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            value = klass.__dict__[name]
            if isinstance(value, staticmethod | classmethod):
                return value.__get__(None, cls)
            return value
    return None


def _collection_rng() -> np.random.Generator:
    """The generator ``cases(self, rng)`` gets: seeded like the ``rng`` fixture."""
    seed = config.unittests__rseed
    return np.random.default_rng(None if seed == "random" else int(seed))


def _case_id(index: int, values: Sequence[Any]) -> str:
    """``case0-float64_3x4-int64_scalar``: a test id naming the case's dtypes and shapes."""
    parts = [f"case{index}"]
    for v in values:
        if hasattr(v, "type") and not isinstance(v, np.ndarray):
            parts.append("symbolic")
            continue
        arr = np.asarray(v)
        shape = "x".join(str(d) for d in arr.shape) or "scalar"
        parts.append(f"{arr.dtype}_{shape}")
    return "-".join(parts)


class OpSuite:
    """Base class of a test class checking one Op: :func:`check_op`, one test per part.

    A subclass sets:

    ``op``
        An Op instance, or a callable building the output(s) from symbolic inputs.
    ``cases``
        A list of input tuples of NumPy values (one value alone is a case of one input), or
        a method ``cases(self, rng)`` returning one (``rng`` seeded as the ``rng`` fixture).
    ``reference``
        ``staticmethod(lambda *inputs: expected output(s))``; None means each node's
        ``perform`` (the ``py`` linker) is the reference.
    ``grad``
        True (default: every float input), a sequence of input positions, or False.
    ``infer_shape``
        Check ``infer_shape`` (default True).
    ``bad_inputs``
        ``[(inputs, ExceptionType, regex), ...]``: each must raise at graph-build or run
        time, in every linker and mode, with a message matching the regex.
    ``linkers``, ``modes``
        Where the values are checked (:func:`check_targets`): None means every distinct
        installed linker and :data:`CHECK_MODES`. A named linker that is not installed
        gives skipped tests that name its package.

    The tests: ``test_values`` (each case in each linker and mode), ``test_infer_shape``,
    ``test_grad`` (each case) and ``test_bad_inputs`` (each bad input in each linker and
    mode).
    """

    op: Any = None
    cases: Any = ()
    reference: Any = None
    grad: bool | Sequence[int] = True
    infer_shape: bool = True
    bad_inputs: Sequence[tuple[Any, type[BaseException], str]] = ()
    linkers: Sequence[str | Mode] | None = None
    modes: Sequence[str | Mode] | None = None

    # --- what the subclass declared

    @classmethod
    def suite_op(cls) -> Any:
        """The Op (or callable) under test."""
        op = _static(cls, "op")
        if op is None:
            raise TypeError(f"{cls.__name__} must set `op` (an Op or a callable)")
        return op

    @classmethod
    def suite_cases(cls) -> list[list[Any]]:
        """The cases, each a list of input values (generated once per class)."""
        cached = cls.__dict__.get("_suite_cases")
        if cached is not None:
            return cached
        declared = _static(cls, "cases")
        if callable(declared):
            rng = _collection_rng()
            declared = declared(rng) if _is_unbound(cls, "cases") else declared(cls(), rng)
        cases = [list(c) if isinstance(c, list | tuple) else [c] for c in declared or ()]
        cls._suite_cases = cases
        return cases

    @classmethod
    def suite_targets(cls) -> list[CheckTarget]:
        """Where ``test_values`` and ``test_bad_inputs`` run."""
        return check_targets(_static(cls, "linkers"), _static(cls, "modes"))

    # --- parametrization

    def pytest_generate_tests(self, metafunc: Any) -> None:
        """Parametrize the suite's tests over ``case``, ``target`` and ``bad_input``."""
        cls = metafunc.cls
        names = metafunc.fixturenames
        if "case" in names:
            cases = cls.suite_cases()
            if not cases:
                metafunc.parametrize(
                    "case", [pytest.param(None, marks=pytest.mark.skip(reason="no cases"))]
                )
            else:
                params = []
                for i, case in enumerate(cases):
                    marks = self._case_marks(metafunc.function.__name__, case)
                    params.append(pytest.param(case, id=_case_id(i, case), marks=marks))
                metafunc.parametrize("case", params)
        if "bad_input" in names:
            bad = list(_static(cls, "bad_inputs") or ())
            if not bad and "target" in names:
                skip = pytest.mark.skip(reason="the suite declares no bad_inputs")
                none = pytest.param(None, None, id="none", marks=skip)
                metafunc.parametrize(("bad_input", "target"), [none])
                return
            params = [pytest.param((k, b), id=f"bad{k}") for k, b in enumerate(bad)]
            metafunc.parametrize("bad_input", params)
        if "target" in names:
            params = []
            for t in cls.suite_targets():
                marks = [pytest.mark.skip(reason=t.skip)] if t.skip else []
                params.append(pytest.param(t, id=t.id, marks=marks))
            metafunc.parametrize("target", params)

    def _case_marks(self, test: str, case: list[Any]) -> list[Any]:
        if test == "test_infer_shape" and not _static(type(self), "infer_shape"):
            return [pytest.mark.skip(reason="infer_shape = False")]
        if test == "test_grad":
            grad = _static(type(self), "grad")
            if grad is False:
                return [pytest.mark.skip(reason="grad = False")]
            if not grad_inputs(case, grad):
                return [pytest.mark.skip(reason="no float input to differentiate")]
        return []

    # --- the tests

    def test_values(self, case: list[Any], target: CheckTarget) -> None:
        """Each output's dtype and value in this linker or mode, against the reference."""
        op = self.suite_op()
        wanted = expected_values(op, case, _static(type(self), "reference"), None)
        check_op_values(op, case, target, wanted)

    def test_infer_shape(self, case: list[Any]) -> None:
        """``infer_shape`` gives the real output shapes."""
        check_op_infer_shape(self.suite_op(), case)

    def test_grad(self, case: list[Any], rng: np.random.Generator) -> None:
        """The gradient agrees with finite differences."""
        check_op_grad(self.suite_op(), case, _static(type(self), "grad"), rng)

    def test_bad_inputs(self, bad_input: tuple[int, Any], target: CheckTarget) -> None:
        """A bad input raises the declared error, with a matching message."""
        index, bad = bad_input
        check_op_bad_input(self.suite_op(), bad, [target], index=index)


def _is_unbound(cls: type, name: str) -> bool:
    """True if ``name`` was declared as a staticmethod or classmethod (called without self)."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return isinstance(klass.__dict__[name], staticmethod | classmethod)
    return False


# ----------------------------------------------------------------------------------------
# LinkerSuite


#: The user's script of ``test_runtime_error_names_op_and_line``: the error must point at
#: the marked line (the graph is built in a file of its own, as user code would be).
_USER_SCRIPT = '''\
"""A user's script: builds a graph that fails at run time."""
import opgraph.tensor as T

x = T.dvector("x")
y = T.dvector("y")
a = T.dmatrix("a")
b = T.dmatrix("b")
elemwise = T.exp(x) * 2 + y  # ELEMWISE LINE
dot = T.dot(a, b) + 1  # DOT LINE
'''

_ERRORS = {
    "elemwise": (["x", "y"], "Elemwise", [np.ones(3), np.ones(4)], "ELEMWISE LINE"),
    "dot": (["a", "b"], "Dot", [np.ones((3, 4)), np.ones((5, 2))], "DOT LINE"),
}


class LinkerSuite:
    """Base class of a test class checking one linker against the ``py`` linker.

    A backend's subclass sets ``linker`` (a linker name such as ``"c"``, a Linker, or a
    whole Mode) and gets a standard battery of graphs, each compiled with FAST_RUN's
    rewrites (``rewrites``) and run by ``linker`` and by ``reference_linker`` (``py``:
    every node's ``perform``), values compared by :func:`compare_linkers`: elementwise
    graphs with broadcasting, fusion and strided views, reductions (empty ones too),
    dot/gemm/gemv/ger, subtensor views and in-place increments, shared-variable updates,
    ifelse laziness, scan, and run-time errors that must name the op and the user's line.
    """

    linker: str | Linker | Mode | None = None
    reference_linker: str = "py"
    rewrites: str | Mode = "FAST_RUN"

    def compare(self, inputs: Sequence[Any], outputs: Any, values: Sequence[Any]) -> list[Any]:
        """:func:`compare_linkers` of the reference linker and the suite's linker."""
        return compare_linkers(
            inputs, outputs, values, linkers=self._pair(), mode=_static(type(self), "rewrites")
        )

    def suite_modes(self) -> list[tuple[str, Mode]]:
        """``(label, Mode)`` of the reference linker, then the suite's (skips if missing)."""
        return linker_modes(self._pair(), _static(type(self), "rewrites"))

    def _pair(self) -> tuple[Any, Any]:
        linker = _static(type(self), "linker")
        if linker is None:
            raise TypeError(f"{type(self).__name__} must set `linker` (a name, Linker or Mode)")
        return (_static(type(self), "reference_linker"), linker)

    # --- elementwise

    @pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
    def test_elemwise_broadcasting(self, dtype: str, rng: np.random.Generator) -> None:
        """A matrix, a row, a vector and a scalar broadcast together."""
        x = TensorType(dtype, (False, False))("x")
        row = TensorType(dtype, (True, False))("row")
        v = TensorType(dtype, (False,))("v")
        s = TensorType(dtype, ())("s")
        outs = [T.exp(x) * row + v * s if dtype.startswith("float") else x * row + v - s]
        values = [
            random_value(rng, (3, 4), dtype, -3, 3),
            random_value(rng, (1, 4), dtype, -3, 3),
            random_value(rng, (4,), dtype, -3, 3),
            random_value(rng, (), dtype, -3, 3),
        ]
        self.compare([x, row, v, s], outs, values)

    def test_elemwise_fusion(self, rng: np.random.Generator) -> None:
        """A chain of elementwise ops (one fused loop under the optimizers) with two
        outputs sharing a subexpression."""
        x, y = T.dmatrices("x", "y")
        b = T.dvector("b")
        inner = x * y + b
        outs = [T.tanh(inner) ** 2 - T.log1p(T.exp(-abs(x))), T.sqrt(abs(inner)) + 1]
        values = [random_value(rng, (4, 5), "float64"), random_value(rng, (4, 5), "float64")]
        self.compare([x, y, b], outs, [*values, random_value(rng, (5,), "float64")])

    def test_elemwise_strided_views(self, rng: np.random.Generator) -> None:
        """Operands that are strided views (slices, a transpose) and a Fortran-ordered
        input."""
        x = T.dmatrix("x")
        outs = [T.sin(x[::2, 1::3]) * x.T[1:4, ::2], x.T + 1]
        value = np.asfortranarray(random_value(rng, (6, 8), "float64"))
        self.compare([x], outs, [value])

    # --- reductions

    def test_reductions(self, rng: np.random.Generator) -> None:
        """Sums over each axis and all, a product, max/min, mean and argmax."""
        x = T.dmatrix("x")
        outs = [
            x.sum(axis=0),
            x.sum(axis=1),
            x.mean(),
            x.prod(axis=1),
            x.max(axis=0),
            x.min(axis=1),
            T.argmax(x, axis=1),
        ]
        self.compare([x], outs, [random_value(rng, (5, 4), "float64", -3, 3)])

    def test_integer_reductions(self, rng: np.random.Generator) -> None:
        """Integer sums and products (exact, accumulated in a wider type) and a max."""
        x = T.imatrix("x")
        outs = [x.sum(axis=0), x.prod(axis=1), x.max()]
        self.compare([x], outs, [random_value(rng, (5, 4), "int32", -3, 3)])

    def test_reductions_of_empty_arrays(self) -> None:
        """Sums and products over an empty axis give the identities."""
        x = T.dmatrix("x")
        outs = [x.sum(axis=0), x.sum(axis=1), x.prod(axis=0), x.sum()]
        self.compare([x], outs, [np.zeros((0, 3))])

    # --- dot products

    @pytest.mark.parametrize("dtype", ["float64", "float32"])
    def test_dot_gemm(self, dtype: str, rng: np.random.Generator) -> None:
        """Matrix and vector products, ``c * beta + alpha * dot(a, b)`` (gemm), a
        transposed matrix-vector product (gemv) and an outer-product update (ger)."""
        a = TensorType(dtype, (False, False))("a")
        b = TensorType(dtype, (False, False))("b")
        c = TensorType(dtype, (False, False))("c")
        v = TensorType(dtype, (False,))("v")
        w = TensorType(dtype, (False,))("w")
        u = TensorType(dtype, (False,))("u")
        outs = [
            T.dot(a, b),
            T.dot(a, v),
            T.dot(v, v),
            c * 0.5 + 2 * T.dot(a, b),
            T.dot(a.T, w),
            c + 1.5 * T.outer(w, u),
        ]
        shapes = [(3, 4), (4, 5), (3, 5), (4,), (3,), (5,)]
        self.compare([a, b, c, v, w, u], outs, [random_value(rng, s, dtype) for s in shapes])

    # --- indexing

    def test_subtensor_views(self, rng: np.random.Generator) -> None:
        """Basic indexing (slices with steps, negative indices, a symbolic index),
        transposes, reshape and dimshuffle."""
        x = T.dmatrix("x")
        i = T.lscalar("i")
        outs = [
            x[1:, ::2],
            x[-1],
            x[:, 2],
            x[::-1, ::-2],
            x[1:4].T,
            x.reshape((6, 5)),
            x.dimshuffle(1, "x", 0),
            x[i],
        ]
        self.compare([x, i], outs, [random_value(rng, (5, 6), "float64"), np.int64(-2)])

    def test_inplace_increments(self, rng: np.random.Generator) -> None:
        """inc/set_subtensor on intermediates (done in place under the optimizers), with
        repeated advanced indices that must accumulate; the inputs stay untouched."""
        x = T.dmatrix("x")
        y, w = T.dmatrices("y", "w")
        v = T.dvector("v")
        outs = [
            T.inc_subtensor((x * 2)[1:3], y),
            T.set_subtensor((x + 1)[:, 0], v),
            T.inc_subtensor((x - 1)[[0, 0, 2]], w),
            T.set_subtensor(x[::2, 1], 0.0),
        ]
        values = [
            random_value(rng, (5, 3), "float64"),
            random_value(rng, (2, 3), "float64"),
            random_value(rng, (3, 3), "float64"),
            random_value(rng, (5,), "float64"),
        ]
        self.compare([x, y, w, v], outs, values)

    # --- state and control flow

    def test_shared_updates(self) -> None:
        """Shared variables updated by each call (one from the other's old value) hold the
        same values after three calls, and the outputs agree."""
        runs = []
        for label, mode in self.suite_modes():
            s = shared(np.arange(4.0), name="s")
            acc = shared(np.zeros(4), name="acc")
            x = T.dvector("x")
            f = function(
                [x], [s.sum(), acc * 2], updates=[(s, s * 0.5 + x), (acc, acc + s)], mode=mode
            )
            outs = [f(np.full(4, k, dtype="float64")) for k in range(3)]
            runs.append((label, outs, s.get_value(), acc.get_value()))
        (ref_label, ref_outs, ref_s, ref_acc), *others = runs
        for label, outs, s_val, acc_val in others:
            where = f"shared updates: {label} differs from {ref_label}"
            for call, (got, want) in enumerate(zip(outs, ref_outs, strict=True)):
                for k, (g, e) in enumerate(zip(got, want, strict=True)):
                    compare_values(g, e, f"{where} (call {call}, output {k})")
            compare_values(s_val, ref_s, f"{where} (s after three calls)")
            compare_values(acc_val, ref_acc, f"{where} (acc after three calls)")

    def test_ifelse_is_lazy(self) -> None:
        """Only the branch ifelse takes runs (a Python op counts its runs), and both
        branches give the reference's values."""
        runs = []
        for label, mode in self.suite_modes():
            calls = [0]

            @as_op(itypes=[T.dvector], otypes=[T.dvector])
            def tripwire(value: np.ndarray, calls: list[int] = calls) -> np.ndarray:
                calls[0] += 1
                return value - 1

            c = T.dscalar("c")
            x = T.dvector("x")
            f = function([c, x], ifelse(c, x * 2, tripwire(x + 1)) + 1, mode=mode)
            taken = [f(1.0, np.arange(3.0)), f(-2.0, np.arange(3.0))]
            assert calls[0] == 0, f"{label}: ifelse ran the untaken branch ({calls[0]} times)"
            other = f(0.0, np.arange(3.0))
            assert calls[0] >= 1, f"{label}: the else-branch did not run when taken"
            runs.append((label, [*taken, other]))
        (ref_label, ref), *others = runs
        for label, got in others:
            for k, (g, e) in enumerate(zip(got, ref, strict=True)):
                compare_values(g, e, f"ifelse: call {k} of {label} differs from {ref_label}")

    def test_scan(self, rng: np.random.Generator) -> None:
        """A recurrence over a sequence with a non-sequence, its last step and its sum."""
        x = T.dmatrix("x")
        w = T.dvector("w")
        states, _ = scan(
            lambda xt, acc, w: acc * w + T.tanh(xt),
            sequences=x,
            outputs_info=T.zeros_like(x[0]),
            non_sequences=w,
        )
        outs = [states, states[-1], states.sum(axis=0)]
        values = [random_value(rng, (5, 3), "float64"), random_value(rng, (3,), "float64")]
        self.compare([x, w], outs, values)

    # --- errors

    @pytest.mark.parametrize("which", sorted(_ERRORS))
    def test_runtime_error_names_op_and_line(self, which: str, tmp_path: Path) -> None:
        """A shape error at run time raises the reference's exception, whose message names
        the failing op and the line of the user's script that built it."""
        script = tmp_path / "user_script.py"
        script.write_text(_USER_SCRIPT)
        names, op_word, values, marker = _ERRORS[which]
        line = next(n for n, text in enumerate(_USER_SCRIPT.splitlines(), 1) if marker in text)
        graph = runpy.run_path(str(script))
        inputs = [graph[n] for n in names]
        errors: list[tuple[str, Exception]] = []
        for label, mode in self.suite_modes():
            f = function(inputs, graph[which], mode=mode)
            try:
                got = f(*[copy_value(v) for v in values])
            except Exception as exc:
                errors.append((label, exc))
                continue
            raise AssertionError(
                f"{label}: the {which} graph ran on inputs {describe_values(values)}, whose "
                f"shapes do not fit, without an error; it gave {short_repr(got)}"
            )
        (ref_label, ref), *others = errors
        for label, exc in others:
            text = str(exc)
            where = f"{label}, inputs {describe_values(values)}"
            assert type(exc) is type(ref), (
                f"{where}: raised {type(exc).__name__}, the reference ({ref_label}) "
                f"{type(ref).__name__}:\n{text}"
            )
            assert text.splitlines()[0] == str(ref).splitlines()[0], (
                f"{where}: the message's first line differs from {ref_label}'s:\n"
                f"  {text.splitlines()[0]}\n  {str(ref).splitlines()[0]}"
            )
            assert op_word.lower() in text.lower(), (
                f"{where}: the message does not name the op ({op_word}):\n{text}"
            )
            full = "\n".join([text, *getattr(exc, "__notes__", ())])
            # "user_script.py:9" or 'File ".../user_script.py", line 9'
            located = re.search(rf"{re.escape(script.name)}(:|\",? line ){line}\b", full)
            assert located, (
                f"{where}: the message does not point at the user's line {script}:{line}:\n{text}"
            )
