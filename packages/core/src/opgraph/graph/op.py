"""The Op protocol: how a computation builds its graph node, runs, differentiates and shapes."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.utils import (
    MetaObject,
    MethodNotDefined,
    _trace_limit,
    trace_marks,
    user_frames,
)

__all__ = ["Op", "OutputStorage", "Thunk"]

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
