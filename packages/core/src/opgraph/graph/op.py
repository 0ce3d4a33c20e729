"""The Op protocol: how a computation builds its graph node, runs, differentiates and shapes.

Also Theano's test values (``config.compute_test_value``): when the flag is not ``'off'``,
calling an Op on inputs that carry test values runs its ``perform`` at once and stores the
results in the outputs' ``tag.test_value``, so a shape error is raised at the user's line that
builds the graph. See :func:`get_test_value` and :func:`get_debug_values`.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Variable, _test_value_of, as_variable
from opgraph.graph.utils import (
    MetaObject,
    MethodNotDefined,
    _trace_limit,
    format_trace,
    trace_marks,
    user_frames,
)

__all__ = [
    "Op",
    "OutputStorage",
    "Thunk",
    "compute_test_values",
    "debug_assert",
    "debug_error_message",
    "get_debug_values",
    "get_test_value",
    "missing_test_message",
]

# ``output_storage[i]`` is a one-element list: ``perform`` writes ``output_storage[i][0]``.
OutputStorage = list[list[Any]]
Thunk = Callable[[], Any]


class Op(MetaObject):
    """A computation on typed inputs producing typed outputs (Theano's Op).

    Subclasses define:

    - ``make_node(*inputs)``: check and convert inputs, return ``Apply(self, inputs, outputs)``;
    - ``perform(node, inputs, output_storage)``: the reference NumPy implementation;
    - optionally ``grad`` / ``L_op`` / ``R_op``, ``infer_shape(node, input_shapes)``,
      ``view_map`` and ``destroy_map`` (``{output_index: [input_index]}``);
    - ``__props__``: the attributes that define equality, hashing and the printed name.

    Calling an Op builds the node and returns its default output (or the list of outputs).
    """

    #: ``{output index: [input index]}``: outputs that are views of an input.
    view_map: dict[int, list[int]] = {}
    #: ``{output index: [input index]}``: outputs computed by overwriting an input.
    destroy_map: dict[int, list[int]] = {}
    #: Index of the output returned by ``__call__`` for multi-output Ops, or None.
    default_output: int | None = None

    def make_node(self, *inputs: Any) -> Apply:
        """Return the Apply node of this Op on ``inputs`` (converted and type-checked)."""
        raise MethodNotDefined(f"{type(self).__name__} does not define make_node")

    def __call__(self, *inputs: Any, return_list: bool = False, **kwargs: Any) -> Any:
        """Apply this Op: build the node and return its default output (or all outputs)."""
        # The user's frames are recorded once, before make_node: the variables it creates
        # (whose own traces would walk the whole stack again) stop their walk at this frame.
        limit = _trace_limit()
        trace = user_frames(limit, skip=1)
        marks = trace_marks()
        marks.append((sys._getframe(), limit, trace))
        try:
            node = self.make_node(*inputs, **kwargs)
        finally:
            marks.pop()
        for out in node.outputs:
            out.tag.trace = list(trace)
        node.tag.trace = node.outputs[0].tag.trace if node.outputs else []
        if _current("compute_test_value") != "off":
            compute_test_values(node, trace)
        if return_list:
            return list(node.outputs)
        if self.default_output is not None:
            return node.outputs[self.default_output]
        if len(node.outputs) == 1:
            return node.outputs[0]
        return list(node.outputs)

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: OutputStorage) -> None:
        """Compute the outputs from input values; write ``output_storage[i][0]``."""
        raise MethodNotDefined(
            f"{type(self).__name__} has no perform(): it has no Python implementation, "
            "so it runs only on a backend that provides a kernel for it"
        )

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        """Return the symbolic gradient of the cost with respect to each input."""
        raise MethodNotDefined(f"{type(self).__name__} does not define a gradient (grad)")

    def L_op(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable]:
        """Vector-Jacobian product; by default calls :meth:`grad`."""
        return self.grad(inputs, output_grads)

    def R_op(
        self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]
    ) -> list[Variable | None]:
        """Jacobian-vector product (forward mode)."""
        raise MethodNotDefined(f"{type(self).__name__} does not define R_op")

    def infer_shape(self, node: Apply, input_shapes: Sequence[Sequence[Any]]) -> list[Any]:
        """Return the symbolic shape of each output from the input shapes."""
        raise MethodNotDefined(f"{type(self).__name__} does not define infer_shape")

    def get_params(self, node: Apply) -> Any:
        """Run-time parameters of ``node`` (none by default)."""
        return None

    def do_constant_folding(self, fgraph: Any, node: Apply) -> bool:
        """True if the constant-folding rewrite may precompute this node."""
        return True

    def prepare_node(self, node: Apply, storage_map: Any, compute_map: Any, impl: Any) -> None:
        """Hook called once before thunks are made (lazy set-up of per-node data)."""

    def make_py_thunk(
        self,
        node: Apply,
        storage_map: dict[Variable, list[Any]],
        compute_map: dict[Variable, list[bool]] | None,
        no_recycling: Sequence[Variable] = (),
    ) -> Thunk:
        """Return a thunk running :meth:`perform` on ``node``'s storage cells."""
        node_input_storage = [storage_map[r] for r in node.inputs]
        node_output_storage = [storage_map[r] for r in node.outputs]
        perform = self.perform

        if compute_map is None:

            def rval() -> None:
                perform(node, [cell[0] for cell in node_input_storage], node_output_storage)

        else:
            node_output_compute = [compute_map[o] for o in node.outputs]

            def rval() -> None:
                perform(node, [cell[0] for cell in node_input_storage], node_output_storage)
                for c in node_output_compute:
                    c[0] = True

        rval.inputs = node_input_storage  # type: ignore[attr-defined]
        rval.outputs = node_output_storage  # type: ignore[attr-defined]
        rval.perform = perform  # type: ignore[attr-defined]
        rval.lazy = False  # type: ignore[attr-defined]
        return rval

    def make_thunk(
        self,
        node: Apply,
        storage_map: dict[Variable, list[Any]],
        compute_map: dict[Variable, list[bool]] | None,
        no_recycling: Sequence[Variable] = (),
        impl: str | None = None,
    ) -> Thunk:
        """Return a zero-argument callable computing ``node`` in place in the storage cells."""
        self.prepare_node(node, storage_map, compute_map, impl)
        return self.make_py_thunk(node, storage_map, compute_map, no_recycling)


_current = config.current


# --------------------------------------------------------------------------- test values


def _variable_trace(v: Variable) -> str:
    """Theano's "Backtrace when that variable is created" paragraph for ``v``."""
    trace = getattr(v.tag, "trace", None)
    if not trace:
        return ""
    return "\nBacktrace when that variable is created:\n\n" + format_trace(trace) + "\n"


def _with_message(exc: BaseException, message: str) -> BaseException:
    """An exception of ``exc``'s type carrying ``message`` (``exc`` itself if its type cannot
    be built from one string: then ``message`` becomes a note)."""
    try:
        new = type(exc)(message)
    except Exception:
        exc.add_note(message)
        return exc
    return new


def _warn_at_user_line(message: str, trace: Sequence[tuple[str, int, str]]) -> None:
    """Warn with the user's line (``trace[0]``) as the warning's location."""
    if not trace:
        warnings.warn(message, stacklevel=4)
        return
    filename, lineno, _ = trace[0]
    warnings.warn_explicit(message, UserWarning, filename, lineno, module=filename)


def get_test_value(v: Any) -> Any:
    """The test value of ``v`` (Theano's ``gof.op.get_test_value``); AttributeError if none.

    A Constant's test value is its data, a shared variable's its current value, any other
    Variable's ``v.tag.test_value`` checked (and converted) by ``v.type.filter``. A value that
    is not a Variable (a number, an array) is made a constant first.
    """
    if not isinstance(v, Variable):
        v = as_variable(v)
    try:
        value = _test_value_of(v)
    except AttributeError:
        raise AttributeError(f"{v} has no test value {_variable_trace(v)}") from None
    if "test_value" not in v.tag.__dict__:
        return value  # a Constant's data or a shared variable's value: of its type already
    try:
        return v.type.filter(value)
    except Exception as exc:
        message = (
            "For compute_test_value, one input test value does not have the requested "
            f"type.\n{_variable_trace(v)}\nThe error when converting the test value to that "
            f"variable type:\n{exc}"
        )
        raise _with_message(exc, message) from exc


def _shape_text(value: Any) -> str:
    shape = getattr(value, "shape", None)
    if shape is not None:
        dtype = getattr(value, "dtype", None)
        return f"{tuple(shape)} {dtype}" if dtype is not None else str(tuple(shape))
    return type(value).__name__


def compute_test_values(node: Apply, trace: Sequence[tuple[str, int, str]] = ()) -> bool:
    """Run ``node.op.perform`` on its inputs' test values and store ``tag.test_value`` on the
    outputs (what calling an Op does when ``config.compute_test_value`` is not ``'off'``).

    An input without a test value raises ValueError under ``'raise'``, warns under ``'warn'``,
    opens the debugger under ``'pdb'`` and is skipped silently under ``'ignore'``: the outputs
    then get no test value. An error of ``perform`` is raised again, whatever the mode, as the
    same exception type with the Op, the input shapes and the user's line (``trace``, innermost
    first) in its message. Returns True if the outputs got test values.
    """
    mode = config.compute_test_value
    values = []
    for i, inp in enumerate(node.inputs):
        try:
            values.append(get_test_value(inp))
        except AttributeError as exc:
            text = (
                f"Cannot compute test value: input {i} ({inp}) of Op {node} missing default value."
            )
            if mode == "raise":
                raise ValueError(
                    f"{text} {_variable_trace(inp)}\nHINT: give it one (x.tag.test_value = "
                    "numpy value), or set config.compute_test_value to 'warn', 'ignore' or 'off'."
                ) from None
            if mode == "warn":
                _warn_at_user_line("Warning, " + text[:-1], trace)
            elif mode == "pdb":
                import pdb

                pdb.post_mortem(exc.__traceback__)
            return False
    destroyed = {i for indices in getattr(node.op, "destroy_map", {}).values() for i in indices}
    for i in destroyed:  # the inputs' own test values must not be overwritten
        values[i] = values[i].copy() if hasattr(values[i], "copy") else values[i]
    storage: list[list[Any]] = [[None] for _ in node.outputs]
    try:
        node.op.perform(node, values, storage)
    except MethodNotDefined:
        return False  # no Python implementation: the outputs get no test value
    except Exception as exc:
        where = format_trace(trace[:1]) if trace else "  (no creation trace recorded)"
        shapes = ", ".join(_shape_text(v) for v in values)
        message = (
            f"{exc}\nRaised computing the test value of {node} "
            f"(config.compute_test_value={mode!r}).\nOp: {node.op}\nInput shapes: [{shapes}]\n"
            f"The graph was built at:\n{where}"
        )
        raise _with_message(exc, message) from exc
    for out, cell in zip(node.outputs, storage, strict=True):
        if cell[0] is not None:
            out.tag.test_value = cell[0]
    return True


def missing_test_message(msg: str) -> None:
    """Report ``msg`` (a missing test value) as ``config.compute_test_value`` says: raise
    AttributeError under 'raise', warn under 'warn', nothing under 'ignore' and 'off'."""
    action = config.compute_test_value
    if action == "raise":
        raise AttributeError(msg)
    if action == "warn":
        warnings.warn(msg, stacklevel=2)


def debug_error_message(msg: str) -> None:
    """Report an error found in test values: ValueError, or a warning under 'warn'."""
    action = config.compute_test_value
    if action == "off":
        raise RuntimeError("debug_error_message called while config.compute_test_value='off'")
    if action == "warn":
        warnings.warn(msg, stacklevel=2)
    else:
        raise ValueError(msg)


def debug_assert(condition: bool, msg: str | None = None) -> None:
    """Assert ``condition`` on test values: AssertionError, or a warning under 'warn'."""
    if condition:
        return
    if config.compute_test_value == "warn":
        warnings.warn(msg or "debug_assert failed", stacklevel=2)
    else:
        raise AssertionError(msg or "debug_assert failed")


def get_debug_values(*args: Any) -> list[Any]:
    """Theano's ``get_debug_values``: ``for a, b in get_debug_values(x, y): check(a, b)``.

    Returns ``[]`` when ``config.compute_test_value`` is 'off'; else a one-element list
    holding the test value (one argument) or the tuple of test values. A missing one goes
    to :func:`missing_test_message` and, if that returns, gives ``[]``.
    """
    if config.compute_test_value == "off":
        return []
    values = []
    for i, arg in enumerate(args):
        try:
            values.append(get_test_value(arg))
        except AttributeError:
            name = getattr(arg, "name", None)
            label = f"Argument {i}('{name}')" if name is not None else f"Argument {i}"
            missing_test_message(f"{label} has no test value")
            return []
    if len(values) == 1:
        return values
    return [tuple(values)]
