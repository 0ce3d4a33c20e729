"""Jacobians and Hessians (Theano's ``gradient.jacobian`` / ``gradient.hessian``).

Theano built a Jacobian with ``scan``: one gradient per element of the expression.
Here a :class:`JacobianOp` does the same loop without scan. It holds an *inner graph*,
the vector-Jacobian product ``e^T J`` of the expression with respect to ``wrt`` as a
function of a one-hot vector ``e`` (built with ``grad(known_grads={expression: e})``), and
its ``perform`` evaluates that graph for ``e = e_0, e_1, ...``, one row of the Jacobian per
element. The length may be symbolic (it is read from the expression's value), the rows
are stacked, and ``infer_shape`` knows the result is ``expression.shape + wrt.shape``.

The Op is differentiable (its gradient is another loop of the same kind), so Hessians of
Jacobians and third derivatives work too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.compile.function import function as compile_function
from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.clone import clone_replace
from opgraph.graph.null_type import DisconnectedType, NullType, disconnected_type
from opgraph.graph.op import Op, OutputStorage
from opgraph.graph.traversal import graph_inputs
from opgraph.tensor.autodiff import grad
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.type import TensorType

__all__ = ["JacobianOp", "hessian", "jacobian", "vector_jacobian"]


def _is_float(v: Variable) -> bool:
    return str(getattr(v.type, "dtype", "")).startswith(("float", "complex"))


class JacobianOp(Op):
    """Loop of an inner graph over the rows of a vector: Jacobians, and their gradients.

    The outer inputs are ``[template, *seqs, *nonseqs]``, the inner graph's inputs
    ``[e, *seq_rows, *nonseqs]``. For each ``i`` in ``range(len(template))`` the inner
    graph runs with ``e`` the one-hot vector of index ``i``, ``seq_rows = seqs[i]`` and the
    ``nonseqs`` unchanged. Output ``k`` is the stack of the inner output ``k`` over ``i``
    (mode ``'map'``: a new leading dimension) or its sum (mode ``'sum'``).

    Parameters
    ----------
    inner_inputs, inner_outputs
        The inner graph (its inputs own no node; nothing else is free in it).
    n_seqs
        How many inner inputs after ``e`` are rows of sequences.
    modes
        ``'map'`` or ``'sum'`` per output.
    row_shapes
        Per output, ``(outer input index, drop_first)``: the shape of one row (``map``) or of
        the result (``sum``) is that input's shape (without its first dimension if
        ``drop_first``); used for ``infer_shape`` and for empty loops.
    mode
        The compilation mode of the inner function (None: ``config.mode``).
    """

    def __init__(
        self,
        inner_inputs: Sequence[Variable],
        inner_outputs: Sequence[Variable],
        n_seqs: int,
        modes: Sequence[str],
        row_shapes: Sequence[tuple[int, bool]],
        mode: Any = None,
    ) -> None:
        if len(modes) != len(inner_outputs) or len(row_shapes) != len(inner_outputs):
            raise ValueError("JacobianOp needs one mode and one row shape per inner output")
        if any(m not in ("map", "sum") for m in modes):
            raise ValueError(f"JacobianOp modes must be 'map' or 'sum', got {list(modes)}")
        self.inner_inputs = list(inner_inputs)
        self.inner_outputs = list(inner_outputs)
        self.n_seqs = int(n_seqs)
        self.modes = tuple(modes)
        self.row_shapes = tuple((int(i), bool(d)) for i, d in row_shapes)
        self.mode = mode
        self._fn: Any = None

    def __str__(self) -> str:
        return "JacobianOp"

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_fn"] = None
        return state

    # -- building -------------------------------------------------------------------------

    def make_node(self, template: Any, *outer: Any) -> Apply:
        template = as_tensor_variable(template)
        if template.type.ndim != 1:
            raise TypeError(f"JacobianOp loops over a vector, got {template} ({template.type})")
        if len(outer) != len(self.inner_inputs) - 1:
            raise TypeError(
                f"JacobianOp takes the template and {len(self.inner_inputs) - 1} inputs, got "
                f"{len(outer)}"
            )
        ins: list[Variable] = []
        for k, (x, inner) in enumerate(zip(outer, self.inner_inputs[1:], strict=True)):
            x = x if isinstance(x, Variable) else as_tensor_variable(x)
            if k < self.n_seqs:
                ok = (
                    isinstance(x.type, TensorType)
                    and x.type.dtype == inner.type.dtype
                    and x.type.ndim == inner.type.ndim + 1
                )
                if not ok:
                    raise TypeError(
                        f"JacobianOp: sequence {k} must be a tensor of {inner.type} rows, "
                        f"got {x.type}"
                    )
            else:
                x = inner.type.filter_variable(x)
            ins.append(x)
        outs = [
            TensorType(o.type.dtype, (False, *o.type.broadcastable))() if m == "map" else o.type()
            for o, m in zip(self.inner_outputs, self.modes, strict=True)
        ]
        return Apply(self, [template, *ins], outs)

    # -- running --------------------------------------------------------------------------

    def function(self) -> Any:
        """The compiled inner function (compiled on first use, then cached)."""
        if self._fn is None:
            fn = compile_function(
                self.inner_inputs, self.inner_outputs, mode=self.mode, on_unused_input="ignore"
            )
            fn.trust_input = True
            self._fn = fn
        return self._fn

    def prepare_node(self, node: Apply, storage_map: Any, compute_map: Any, impl: Any) -> None:
        self.function()

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: OutputStorage) -> None:
        template = inputs[0]
        seqs = inputs[1 : 1 + self.n_seqs]
        nonseqs = inputs[1 + self.n_seqs :]
        n = template.shape[0]
        for k, s in enumerate(seqs):
            if s.shape[0] != n:
                raise ValueError(
                    f"{self}: sequence {k} has {s.shape[0]} rows, but the loop runs {n} times"
                )
        fn = self.function()
        e_dtype = self.inner_inputs[0].type.dtype
        results: list[Any] = [None] * len(node.outputs)
        for i in range(n):
            e = np.zeros(template.shape, dtype=e_dtype)
            e[i] = 1
            outs = fn(e, *[s[i, ...] for s in seqs], *nonseqs)
            for k, o in enumerate(outs):
                o = np.asarray(o)
                if self.modes[k] == "map":
                    if results[k] is None:
                        results[k] = np.empty((n, *o.shape), dtype=node.outputs[k].type.dtype)
                    results[k][i] = o
                elif results[k] is None:
                    results[k] = np.array(o, dtype=node.outputs[k].type.dtype, copy=True)
                else:
                    results[k] += o
        for k, (cell, out) in enumerate(zip(output_storage, node.outputs, strict=True)):
            if results[k] is None:
                idx, drop = self.row_shapes[k]
                shape = np.shape(inputs[idx])[1 if drop else 0 :]
                lead = (0,) if self.modes[k] == "map" else ()
                results[k] = np.zeros((*lead, *shape), dtype=out.type.dtype)
            cell[0] = results[k]

    # -- shapes and calculus --------------------------------------------------------------

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        n = input_shapes[0][0]
        shapes = []
        for m, (idx, drop) in zip(self.modes, self.row_shapes, strict=True):
            row = tuple(input_shapes[idx])[1 if drop else 0 :]
            shapes.append((n, *row) if m == "map" else row)
        return shapes

    def L_op(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable]:
        """Another loop: ``sum_i Lop(row_i, inputs, g[i])`` (sequences get one row per ``i``)."""
        e = self.inner_inputs[0]
        seq_in = self.inner_inputs[1 : 1 + self.n_seqs]
        nonseq_in = self.inner_inputs[1 + self.n_seqs :]
        seqs_o = list(inputs[1 : 1 + self.n_seqs])
        nonseqs_o = list(inputs[1 + self.n_seqs :])
        known: dict[Variable, Variable] = {}
        g_map: list[tuple[Variable, Variable]] = []
        g_sum: list[tuple[Variable, Variable]] = []
        for o_in, m, g in zip(self.inner_outputs, self.modes, output_grads, strict=True):
            if isinstance(g.type, DisconnectedType) or not _is_float(o_in):
                continue
            if m == "map":
                gi = TensorType(g.type.dtype, g.type.broadcastable[1:])()
                g_map.append((g, gi))
            else:
                gi = g.type()
                g_sum.append((g, gi))
            known[o_in] = known[o_in] + gi if o_in in known else gi
        disconnected = [disconnected_type() for _ in inputs]
        wrt = [v for v in (*seq_in, *nonseq_in) if _is_float(v)]
        if not known or not wrt:
            return disconnected
        grads = grad(
            None,
            wrt,
            known_grads=known,
            disconnected_inputs="ignore",
            return_disconnected="Disconnected",
            null_gradients="return",
            add_names=False,
        )
        by_input = dict(zip(wrt, grads, strict=True))
        result = disconnected
        loop_outs: list[tuple[int, Variable, str, tuple[int, bool]]] = []
        base = 1 + self.n_seqs + len(g_map)
        for j, v in enumerate((*seq_in, *nonseq_in)):
            g = by_input.get(v)
            if g is None or isinstance(g.type, DisconnectedType):
                continue
            if isinstance(g.type, NullType):
                result[1 + j] = g
                continue
            is_seq = j < self.n_seqs
            where = 1 + j if is_seq else base + (j - self.n_seqs)
            loop_outs.append((1 + j, g, "map" if is_seq else "sum", (where, is_seq)))
        if not loop_outs:
            return result
        op = JacobianOp(
            [e, *seq_in, *[gi for _, gi in g_map], *nonseq_in, *[gi for _, gi in g_sum]],
            [g for _, g, _, _ in loop_outs],
            n_seqs=self.n_seqs + len(g_map),
            modes=[m for _, _, m, _ in loop_outs],
            row_shapes=[rs for _, _, _, rs in loop_outs],
            mode=self.mode,
        )
        outs = op(
            inputs[0],
            *seqs_o,
            *[g for g, _ in g_map],
            *nonseqs_o,
            *[g for g, _ in g_sum],
            return_list=True,
        )
        for (pos, _, _, _), out in zip(loop_outs, outs, strict=True):
            result[pos] = out
        return result


def vector_jacobian(
    expression: Variable,
    wrt: Sequence[Variable],
    consider_constant: Sequence[Variable] | None = None,
    disconnected_inputs: str = "raise",
) -> list[Variable]:
    """The Jacobian of the vector ``expression`` with respect to each of ``wrt``.

    Returns one variable per ``wrt``, of shape ``expression.shape + w.shape``, computed by a
    :class:`JacobianOp` (one vector-Jacobian product per element of ``expression``).
    """
    if expression.type.ndim != 1:
        raise ValueError(f"vector_jacobian needs a vector expression, got {expression.type}")
    e_dtype = expression.type.dtype if _is_float(expression) else config.floatX
    e = TensorType(e_dtype, expression.type.broadcastable)("e")
    rows = grad(
        None,
        list(wrt),
        consider_constant=consider_constant,
        disconnected_inputs=disconnected_inputs,
        known_grads={expression: e},
        add_names=False,
    )
    free = [
        v
        for v in dict.fromkeys(graph_inputs(rows, blockers=[expression, *wrt]))
        if v is not e and not isinstance(v, Constant)
    ]
    free += [w for w in wrt if w not in free]
    inner_free = [v.type(v.name) for v in free]
    inner_rows = clone_replace(rows, dict(zip(free, inner_free, strict=True)))
    op = JacobianOp(
        [e, *inner_free],
        inner_rows,
        n_seqs=0,
        modes=["map"] * len(rows),
        row_shapes=[(1 + free.index(w), False) for w in wrt],
    )
    return op(expression, *free, return_list=True)


def _as_list(wrt: Any) -> tuple[list[Variable], type | None]:
    if isinstance(wrt, list | tuple):
        return list(wrt), type(wrt)
    return [wrt], None


def _format(values: list[Variable], kind: type | None) -> Any:
    if kind is None:
        return values[0]
    return kind(values)


def jacobian(
    expression: Any,
    wrt: Variable | Sequence[Variable],
    consider_constant: Sequence[Variable] | None = None,
    disconnected_inputs: str = "raise",
) -> Any:
    """The Jacobian of ``expression`` (a scalar or a vector) with respect to ``wrt``.

    Parameters
    ----------
    expression
        A 0-d or 1-d tensor. For a scalar the result is its gradient.
    wrt
        A variable or a list/tuple of variables.
    consider_constant
        Variables through which no gradient flows.
    disconnected_inputs
        'raise' (default), 'warn' or 'ignore' when ``expression`` does not depend on a
        ``wrt``.

    Returns
    -------
    For each ``w`` in ``wrt``, a tensor of shape ``expression.shape + w.shape`` whose entry
    ``[i, ...]`` is the gradient of ``expression[i]`` with respect to ``w``: a variable
    if ``wrt`` was one, else a list (or tuple).
    """
    expression = as_tensor_variable(expression)
    wrt_list, kind = _as_list(wrt)
    if expression.type.ndim > 1:
        raise ValueError(
            f"jacobian expects a scalar or a vector expression, got {expression} of type "
            f"{expression.type}.\nHINT: flatten it first: jacobian(expression.flatten(), wrt)."
        )
    if expression.type.ndim == 0:
        grads = grad(
            expression,
            wrt_list,
            consider_constant=consider_constant,
            disconnected_inputs=disconnected_inputs,
        )
        return _format(list(grads), kind)
    return _format(
        vector_jacobian(expression, wrt_list, consider_constant, disconnected_inputs), kind
    )


def hessian(
    cost: Any,
    wrt: Variable | Sequence[Variable],
    consider_constant: Sequence[Variable] | None = None,
    disconnected_inputs: str = "raise",
) -> Any:
    """The Hessian of the scalar ``cost`` with respect to each vector in ``wrt``.

    Parameters
    ----------
    cost
        A 0-d tensor.
    wrt
        A vector, or a list/tuple of vectors.
    consider_constant, disconnected_inputs
        As for :func:`opgraph.gradient.grad` (applied to the first derivative).

    Returns
    -------
    For each ``w``, the matrix ``d2 cost / dw dw`` of shape ``(len(w), len(w))``: a variable
    if ``wrt`` was one, else a list (or tuple).
    """
    cost = as_tensor_variable(cost)
    if cost.type.ndim != 0:
        raise ValueError(
            f"hessian expects a scalar cost, got {cost} of type {cost.type}.\n"
            "HINT: sum it, or use jacobian() of its gradient."
        )
    wrt_list, kind = _as_list(wrt)
    hessians = []
    for w in wrt_list:
        if not isinstance(w, Variable) or getattr(w.type, "ndim", None) != 1:
            raise ValueError(
                f"hessian expects vectors as wrt, got {w} of type {getattr(w, 'type', w)}.\n"
                "HINT: differentiate with respect to a flattened variable, or use "
                "jacobian(grad(cost, w).flatten(), w)."
            )
        first = grad(
            cost,
            w,
            consider_constant=consider_constant,
            disconnected_inputs=disconnected_inputs,
        )
        hessians.append(vector_jacobian(first, [w], consider_constant, "ignore")[0])
    return _format(hessians, kind)
