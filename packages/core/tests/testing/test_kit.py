"""The testing kit itself: a correct Op passes every check, and each kind of bug fails the
check meant for it with a message saying what differed (where, the inputs, the errors)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import opgraph.tensor as T
from opgraph.compile.mode import Mode
from opgraph.graph.basic import Apply, Variable
from opgraph.graph.op import Op, OutputStorage
from opgraph.link import KernelRegistry, VMLinker
from opgraph.plugins import get_plugin_manager
from opgraph.tensor.elemwise import Elemwise
from opgraph.testing import (
    CHECK_MODES,
    LinkerSuite,
    OpSuite,
    check_op,
    check_targets,
    compare_linkers,
    installed_linkers,
)
from opgraph.testing.checks import CheckTarget, difference

pytest_plugins = ["pytester"]
# the Ops below have no C kernel on purpose
pytestmark = pytest.mark.filterwarnings("ignore::opgraph.link.dispatch.KernelFallbackWarning")

X = np.linspace(-1.5, 2.0, 12).reshape(3, 4)
PY = [CheckTarget("py", "linker 'py'", Mode(linker="py", optimizer="fast_run"))]


class Scale(Op):
    """``factor * x``, elementwise; the flags plant one bug each for the tests below."""

    __props__ = ("factor", "bug")

    def __init__(self, factor: float = 2.0, bug: str = "") -> None:
        self.factor = factor
        self.bug = bug

    def make_node(self, x: Any) -> Apply:
        x = T.as_tensor_variable(x)
        if x.type.dtype not in ("float32", "float64"):
            raise TypeError(f"Scale needs a float tensor, got {x.type}")
        if x.type.ndim > 2 and self.bug != "accepts_3d":
            raise TypeError(f"Scale takes at most 2 dimensions, got {x.type.ndim}")
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], out: OutputStorage) -> None:
        (x,) = inputs
        if self.bug == "writes_input":
            x *= self.factor
            out[0][0] = x.copy()
            return
        z = (x * self.factor).astype(x.dtype)
        if self.bug == "perform" and z.size > 1:
            z.flat[1] += 1e-3
        if self.bug == "dtype":
            z = z.astype("float32" if x.dtype == "float64" else "float64")
        out[0][0] = z

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        factor = self.factor + (1.0 if self.bug == "grad" else 0.0)
        return [output_grads[0] * factor]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        (shape,) = input_shapes
        return [tuple(reversed(shape))] if self.bug == "infer_shape" else [shape]


def twice(x: np.ndarray) -> np.ndarray:
    """The reference of Scale(2.0)."""
    return 2 * x


# ----------------------------------------------------------------------------------------
# check_op


def test_a_correct_op_passes_every_check() -> None:
    check_op(
        Scale(),
        [X],
        reference=twice,
        bad_inputs=[([np.ones((2, 2, 2))], TypeError, "at most 2 dimensions")],
    )
    check_op(Scale(3.0), [X.astype("float32")], expected=3 * X.astype("float32"))
    # a callable building the graph, and perform as the reference
    check_op(lambda x, y: Scale()(x) + y, [X, np.ones((1, 4))], grad=[0])


def test_a_wrong_perform_names_the_mode_the_inputs_and_the_error() -> None:
    with pytest.raises(
        AssertionError,
        match=r"(?s)check_op\(Scale\{factor=2.0, bug='perform'\}\)"
        r" in mode FAST_COMPILE .*inputs float64 \(3, 4\).*output 0.*differs"
        r".*1 of 12 elements differ; max abs error 0\.001 at index \(0, 1\)"
        r".*max rel error",
    ):
        check_op(Scale(bug="perform"), [X], reference=twice, grad=False)


def test_a_wrong_perform_fails_in_each_linker() -> None:
    with pytest.raises(AssertionError, match=r"in linker 'py' .*differs"):
        check_op(Scale(bug="perform"), [X], reference=twice, modes=(), linkers=["py"])


def test_a_wrong_infer_shape_gives_both_shapes() -> None:
    with pytest.raises(
        AssertionError,
        match=r"(?s)infer_shape gave \(4, 3\) for output 0, but its real shape is \(3, 4\)"
        r".*input shapes \[\(3, 4\)\].*infer_shape=False",
    ):
        check_op(Scale(bug="infer_shape"), [X], reference=twice, grad=False, modes=(), linkers=())


def test_a_wrong_grad_names_the_input_and_the_errors() -> None:
    with pytest.raises(
        AssertionError,
        match=r"(?s)the gradient of the output with respect to input 0 disagrees with finite "
        r"differences \(inputs float64 \(3, 4\)\).*abs. error.*rel. error",
    ):
        check_op(Scale(bug="grad"), [X], reference=twice, modes=(), linkers=())


def test_a_bad_input_that_does_not_raise_fails() -> None:
    bad = [([np.ones((2, 2, 2))], TypeError, "at most 2 dimensions")]
    with pytest.raises(
        AssertionError,
        match=r"bad input 0 \(float64 \(2, 2, 2\)\) did not raise TypeError matching "
        r"'at most 2 dimensions' in linker 'py'.*it built and ran",
    ):
        check_op(
            Scale(bug="accepts_3d"),
            [X],
            reference=twice,
            bad_inputs=bad,
            linkers=["py"],
            modes=(),
            grad=False,
        )


def test_a_bad_input_raising_another_error_or_message_fails() -> None:
    with pytest.raises(
        AssertionError,
        match=r"raised TypeError when the graph was built instead "
        r"of ValueError matching",
    ):
        check_op(
            Scale(),
            [X],
            reference=twice,
            bad_inputs=[([np.ones(3, "int32")], ValueError, "float")],
            modes=(),
            linkers=(),
        )
    with pytest.raises(
        AssertionError,
        match=r"(?s)raised TypeError when the graph was built as "
        r"expected, but its message does not match 'complex'.*float tensor",
    ):
        check_op(
            Scale(),
            [X],
            reference=twice,
            bad_inputs=[([np.ones(3, "int32")], TypeError, "complex")],
            modes=(),
            linkers=(),
        )


def test_an_output_of_the_wrong_dtype_fails() -> None:
    with pytest.raises(
        AssertionError,
        match=r"output 0 .* has dtype float32, but the output's "
        r"type says float64",
    ):
        check_op(Scale(bug="dtype"), [X], reference=twice, grad=False, linkers=["py"], modes=())


def test_a_kernel_writing_into_its_input_fails() -> None:
    with pytest.raises(AssertionError, match=r"input 0 was changed by the call.*destroy_map"):
        check_op(
            Scale(bug="writes_input"),
            [X],
            reference=twice,
            grad=False,
            linkers=["py"],
            modes=(),
            infer_shape=False,
        )


def test_a_reference_with_the_wrong_number_of_outputs_is_reported() -> None:
    with pytest.raises(AssertionError, match=r"gave 1, but the op has 2 outputs"):
        check_op(lambda x: [x + 1, x * 2], [X], reference=lambda x: [x + 1], modes=(), linkers=())


def test_a_linker_that_is_not_installed_is_left_out_with_a_warning() -> None:
    with pytest.warns(UserWarning, match=r"linker 'no-such-linker' is not installed"):
        check_op(
            Scale(), [X], reference=twice, linkers=["py", "no-such-linker"], modes=(), grad=False
        )


# ----------------------------------------------------------------------------------------
# where checks compile


def test_check_targets_run_each_linker_once() -> None:
    targets = check_targets()
    assert [t.id for t in targets[: len(CHECK_MODES)]] == list(CHECK_MODES)
    linker_ids = [t.id for t in targets[len(CHECK_MODES) :]]
    assert "linker=py" in linker_ids
    # FAST_RUN's own linker (vm with core alone, cvm with backend-c) is not run again
    factories = get_plugin_manager().linkers()
    fast_run_factory = factories[get_plugin_manager().best_linker()]
    assert not [
        n for n in factories if factories[n] is fast_run_factory and f"linker={n}" in linker_ids
    ]
    # aliases of one linker (backend-c's c, cvm and c|py) count once
    assert len(installed_linkers(distinct=True)) <= len(installed_linkers())
    assert not ({"cvm", "c|py"} & set(installed_linkers(distinct=True)))
    missing = check_targets(linkers=["cuda"], modes=())
    if "cuda" not in installed_linkers():
        assert missing[0].mode is None
        assert "the GPU is not a linker" in str(missing[0].skip)
    missing = check_targets(linkers=["c"], modes=())
    if "c" not in installed_linkers():
        assert "install opgraph-backend-c," in str(missing[0].skip)


def test_difference_reports_counts_positions_and_both_errors() -> None:
    text = difference(np.array([1.0, 2.5, np.nan]), np.array([1.0, 2.0, np.nan]))
    assert "1 of 3 elements differ" in text
    assert "max abs error 0.5 at index (1,)" in text and "max rel error 0.25" in text
    assert difference(np.zeros(2), np.zeros(3)) == "shape (2,) differs from the expected (3,)"


# ----------------------------------------------------------------------------------------
# compare_linkers, with a linker whose elementwise kernel is off by 0.5

broken_kernels = KernelRegistry("broken")
broken_kernels.register_perform(Op, "the broken linker breaks Elemwise only", owner="tests")


@broken_kernels.register(Elemwise, version=1)
def _off_by_half(op: Elemwise, node: Apply) -> Any:
    def compute(*inputs: Any) -> Any:
        out: list[list[Any]] = [[None] for _ in node.outputs]
        op.perform(node, list(inputs), out)
        value = out[0][0]
        return value + np.asarray(0.5, value.dtype) if value.dtype.kind == "f" else value

    return compute


BROKEN = Mode(linker=VMLinker(kernels=broken_kernels), optimizer="fast_run")


def test_compare_linkers_returns_the_first_linkers_values() -> None:
    x = T.dmatrix("x")
    got = compare_linkers([x], [T.exp(x), x.sum()], [X], linkers=("py", "vm"))
    assert isinstance(got, list) and len(got) == 2
    np.testing.assert_allclose(got[0], np.exp(X))


def test_compare_linkers_names_the_linker_output_and_error() -> None:
    x = T.dmatrix("x")
    with pytest.raises(
        AssertionError,
        match=r"(?s)compare_linkers: output 0 .* of mode Mode\(linker=.*VMLinker.* differs from "
        r"linker 'py' \(mode FAST_RUN; inputs float64 \(3, 4\)\).*12 of 12 elements differ; max "
        r"abs error",
    ):
        compare_linkers([x], [T.exp(x) * 2], [X], linkers=("py", BROKEN))


def test_compare_linkers_skips_when_only_the_first_is_installed() -> None:
    x = T.dvector("x")
    with pytest.raises(pytest.skip.Exception, match=r"'no-such-linker' not installed"):
        compare_linkers([x], x + 1, [np.ones(3)], linkers=("py", "no-such-linker"))
    # one missing among several: left out, the others compared
    got = compare_linkers([x], x + 1, [np.ones(3)], linkers=("py", "vm", "no-such-linker"))
    np.testing.assert_array_equal(got[0], np.full(3, 2.0))


# ----------------------------------------------------------------------------------------
# the suites


class TestScaleSuite(OpSuite):
    """A correct Op through OpSuite: every test passes."""

    op = Scale()
    reference = staticmethod(twice)
    bad_inputs = [([np.ones((2, 2, 2))], TypeError, "at most 2 dimensions")]

    def cases(self, rng: np.random.Generator) -> list[Any]:
        return [(rng.random((3, 4)),), rng.random(5).astype("float32")]


class WrongScaleSuite(OpSuite):
    """Not collected (no ``Test`` prefix): called by hand below."""

    op = Scale(bug="perform")
    cases = [(X,)]
    reference = twice  # a plain function in the class body: not bound to the instance


def test_op_suite_parts_fail_with_the_check_op_messages(rng: np.random.Generator) -> None:
    suite = WrongScaleSuite()
    (case,) = suite.suite_cases()
    with pytest.raises(AssertionError, match=r"(?s)in linker 'py'.*max abs error 0\.001"):
        suite.test_values(case, PY[0])
    suite.test_infer_shape(case)  # only perform is wrong


def test_linker_suite_finds_a_wrong_kernel(rng: np.random.Generator) -> None:
    class BrokenLinker(LinkerSuite):
        linker = BROKEN

    with pytest.raises(
        AssertionError, match=r"(?s)differs from linker 'py'.*elements differ; max abs error"
    ):
        BrokenLinker().test_elemwise_fusion(rng)


SUITE_FILE = """
import numpy as np
import opgraph.tensor as T
from opgraph.testing import LinkerSuite, OpSuite

class TestSquare(OpSuite):
    op = staticmethod(lambda x: x * x + 0.001 * (x > 0.5))
    cases = [np.linspace(0.0, 1.0, 6).reshape(2, 3)]
    reference = staticmethod(lambda x: x * x)
    linkers = ["py", "no-such-linker"]
    modes = ["FAST_COMPILE"]
    infer_shape = False

class TestMissingLinker(LinkerSuite):
    linker = "no-such-linker"
"""


def test_suites_parametrize_and_skip_with_reasons(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=SUITE_FILE)
    result = pytester.runpytest_inprocess("-rs", "-v", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        [
            "*TestSquare::test_values?case0-float64_2x3-FAST_COMPILE? FAILED*",
            "*TestSquare::test_values?case0-float64_2x3-linker=py? FAILED*",
            "*TestSquare::test_values?case0-float64_2x3-linker=no-such-linker? SKIPPED*",
            "*TestSquare::test_grad?case0-float64_2x3? PASSED*",
            "*3 of 6 elements differ; max abs error 0.001 at index (1, 0)*",
            "*linker 'no-such-linker' is not installed*",
            "*infer_shape = False*",
            "*the suite declares no bad_inputs*",
            "*'no-such-linker' not installed: nothing to compare*",
        ]
    )
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 2
    assert outcomes["skipped"] >= 4
