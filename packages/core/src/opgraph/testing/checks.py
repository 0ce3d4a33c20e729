"""Checks shared by opgraph's tests and plugin authors' tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from opgraph.compile.function import function
from opgraph.compile.mode import Mode, get_mode
from opgraph.graph.basic import Variable
from opgraph.graph.traversal import io_toposort
from opgraph.plugins import get_plugin_manager

__all__ = [
    "ALL_MODES",
    "assert_allclose",
    "check_infer_shape",
    "check_modes",
    "installed_linkers",
    "tolerance",
]

#: Every named mode a test should run an Op in.
ALL_MODES = ("FAST_COMPILE", "FAST_RUN", "DEBUG_MODE", "PROFILE_MODE")

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

    NaN equals NaN and infinities must match; dtypes must match exactly when ``expected`` is an
    ndarray of the same kind.
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


def installed_linkers() -> list[str]:
    """Names of the linkers installed plugins provide (``py``, ``vm``, ``c``, ...)."""
    return sorted(get_plugin_manager().linkers())


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


def check_infer_shape(
    inputs: Sequence[Variable],
    outputs: Variable | Sequence[Variable],
    values: Sequence[Any],
    op_class: type | None = None,
) -> None:
    """Check that every node's ``infer_shape`` matches the real shapes of its outputs.

    Evaluates the graph once with the Python linker, then for each node (of ``op_class``,
    if given) compares the shapes its ``infer_shape`` computes from the real input shapes.
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
    checked = 0
    for node in nodes:
        if op_class is not None and not isinstance(node.op, op_class):
            continue
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
        for out, shp in zip(node.outputs, shapes, strict=True):
            got = tuple(int(_eval_dim(s)) for s in shp)
            real = np.shape(vals[out])
            assert got == real, f"{node.op}.infer_shape gave {got}, real shape {real}"
        checked += 1
    if op_class is not None:
        assert checked, f"no {op_class.__name__} node found in the graph"


def _eval_dim(s: Any) -> Any:
    """A dimension from infer_shape: an int, a NumPy int, or a symbolic scalar to evaluate."""
    if isinstance(s, Variable):
        return np.asarray(s.eval())
    return s


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
