"""Pieces the scan modules share: ``until``, the loop's layout (:class:`ScanInfo`), and
shape inference over an inner graph."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from opgraph.graph.basic import Constant, Variable
from opgraph.graph.clone import clone_replace
from opgraph.graph.traversal import io_toposort
from opgraph.graph.utils import MethodNotDefined
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.shape import shape_i
from opgraph.tensor.type import TensorType

__all__ = ["ScanInfo", "clone", "infer_inner_shapes", "until"]

#: Theano's ``scan_module.scan_utils.clone`` (``theano.clone``: copy a graph, replacing).
clone = clone_replace


class until:
    """Stop a scan early: a step function returns ``until(condition)`` (alone, or with its
    outputs and updates); the loop ends after the first step whose condition is true.

    Examples
    --------
    >>> def step(x_prev):
    ...     x = x_prev * 2
    ...     return x, until(x > 50)
    """

    def __init__(self, condition: Any) -> None:
        cond = as_tensor_variable(condition)
        if cond.ndim != 0:
            raise TypeError(
                f"the condition of until() must be a scalar (0-d), got {cond.ndim} dimensions "
                f"({cond.type}).\nHINT: reduce it first, e.g. until(T.all(x > 0))."
            )
        self.condition = cond


@dataclasses.dataclass(frozen=True)
class ScanInfo:
    """The layout of a Scan node's inputs and outputs (what Theano keeps in ``op.info``).

    Outer inputs: ``[n_steps, *sequences, *initial values (mit_sot then sit_sot),
    *shared states, *non_sequences]``. Inner inputs: one per sequence, one per tap of each
    recurrent output, one per shared state, one per non-sequence. Inner outputs: the new value
    of each recurrent output, each nit_sot output, each shared state, then the ``until``
    condition when ``as_while``. Outer outputs: each recurrent output's buffer (the initial
    values followed by one entry per step), each nit_sot output, each shared state's last
    value.
    """

    n_seqs: int
    #: The (negative) taps of each recurrent output: mit_sot ones first, then sit_sot ones.
    rec_taps: tuple[tuple[int, ...], ...]
    n_mit_sot: int
    n_nit_sot: int
    n_shared_outs: int
    n_non_seqs: int
    as_while: bool = False
    go_backwards: bool = False
    truncate_gradient: int = -1
    name: str = "scan_fn"
    #: Step ``t`` reads entry ``n_steps - 1 - t`` of each sequence and writes entry
    #: ``n_steps - 1 - t`` of each nit_sot output: a loop run from the end whose sequences
    #: and nit_sot outputs stay in forward order (the gradient's loop; no reversed copies).
    reverse: bool = False
    #: Entries kept per recurrent and nit_sot output (0: all of them); set by the rewrite
    #: that saves memory when only the last entries are used. A shorter buffer is circular.
    buffer_sizes: tuple[int, ...] = ()

    @property
    def n_rec(self) -> int:
        """Number of recurrent outputs (mit_sot and sit_sot)."""
        return len(self.rec_taps)

    @property
    def n_sit_sot(self) -> int:
        return self.n_rec - self.n_mit_sot

    @property
    def rec_lags(self) -> tuple[int, ...]:
        """How many initial entries each recurrent output needs (its largest lag)."""
        return tuple(-min(t) for t in self.rec_taps)

    @property
    def n_inner_inputs(self) -> int:
        return (
            self.n_seqs + sum(len(t) for t in self.rec_taps) + self.n_shared_outs + self.n_non_seqs
        )

    @property
    def n_outer_outputs(self) -> int:
        return self.n_rec + self.n_nit_sot + self.n_shared_outs

    def split_inner_inputs(
        self, inputs: Sequence[Variable]
    ) -> tuple[list[Variable], list[list[Variable]], list[Variable], list[Variable]]:
        """Inner inputs by role: ``(sequences, taps of each recurrent output, states,
        non-sequences)``."""
        inputs = list(inputs)
        seqs = inputs[: self.n_seqs]
        taps: list[list[Variable]] = []
        pos = self.n_seqs
        for t in self.rec_taps:
            taps.append(inputs[pos : pos + len(t)])
            pos += len(t)
        states = inputs[pos : pos + self.n_shared_outs]
        return seqs, taps, states, inputs[pos + self.n_shared_outs :]

    def buffer_size(self, k: int) -> int:
        """The kept entries of output ``k`` (recurrent or nit_sot), 0 for all."""
        return self.buffer_sizes[k] if self.buffer_sizes else 0

    def validate(self) -> None:
        for taps in self.rec_taps:
            if not taps or any(t >= 0 for t in taps):
                raise ValueError(f"a recurrent output's taps must be negative, got {taps}")
        if self.buffer_sizes and len(self.buffer_sizes) != self.n_rec + self.n_nit_sot:
            raise ValueError("buffer_sizes needs one entry per recurrent and nit_sot output")
        if self.reverse and self.as_while:
            raise ValueError("a reverse loop cannot stop early (until)")


def infer_inner_shapes(
    inputs: Sequence[Variable],
    outputs: Sequence[Variable],
    input_shapes: Sequence[Sequence[Any] | None],
) -> list[tuple[Any, ...] | None]:
    """The symbolic shapes of an inner graph's ``outputs`` given its inputs' shapes (in
    terms of outer variables), walking the nodes' ``infer_shape``; None for an output whose
    shape depends on something unknown (a value computed only inside the loop)."""
    shapes: dict[Variable, tuple[Any, ...] | None] = {
        v: (tuple(s) if s is not None else None) for v, s in zip(inputs, input_shapes)
    }

    def shape_of(v: Variable) -> tuple[Any, ...] | None:
        if v in shapes:
            return shapes[v]
        if isinstance(v, Constant) and isinstance(v.type, TensorType):
            return tuple(int(d) for d in getattr(v.data, "shape", ()))
        return None

    for node in io_toposort(list(inputs), list(outputs)):
        in_shapes = [shape_of(v) if isinstance(v.type, TensorType) else () for v in node.inputs]
        result: list[Any] = [None] * len(node.outputs)
        if all(s is not None for s in in_shapes):
            try:
                result = list(node.op.infer_shape(node, in_shapes))
            except (MethodNotDefined, NotImplementedError, TypeError, ValueError, AttributeError):
                result = [None] * len(node.outputs)
        for out, s in zip(node.outputs, result):
            if isinstance(out.type, TensorType) and s is not None:
                shapes[out] = tuple(s)
                # A broadcastable dimension is 1 whatever the inference said.
                shapes[out] = tuple(
                    1 if b else d for d, b in zip(shapes[out], out.type.broadcastable)
                )
            else:
                shapes[out] = None
    return [shape_of(v) for v in outputs]


def outer_shape_i(v: Variable, i: int) -> Any:
    """``v.shape[i]`` (1 for a broadcastable dimension)."""
    return shape_i(v, i)
