"""Symbolic differentiation of tensor graphs: ``grad`` (reverse mode), ``Lop`` and ``Rop``.

``grad`` walks the graph from the cost back to the inputs (iteratively, in reverse
topological order), asks each Op for the vector-Jacobian product of its outputs' gradients
(``L_op``), and sums the contributions reaching each variable. ``Rop`` pushes tangents
forward through each Op's ``R_op``. The user-facing module is :mod:`opgraph.gradient`, which
adds the checks that compile functions (``verify_grad``) and the Jacobian and Hessian.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.null_type import DisconnectedType, NullType, disconnected_type
from opgraph.graph.traversal import graph_inputs, io_toposort
from opgraph.graph.utils import MethodNotDefined, first_user_line
from opgraph.scalar.type import ScalarType
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.math import (
    add,
    cast,
    ones_like,
    sum_to_broadcastable,
    zeros_like,
    zeros_like_grad,
)
from opgraph.tensor.type import TensorType

__all__ = ["DisconnectedInputError", "Lop", "NullTypeGradError", "Rop", "grad"]


class DisconnectedInputError(ValueError):
    """The cost does not depend on a variable it was differentiated with respect to."""


class NullTypeGradError(TypeError):
    """A gradient needed by ``grad`` is mathematically undefined or not implemented."""


def _is_null(v: Any) -> bool:
    return isinstance(v, Variable) and isinstance(v.type, NullType)


def _is_disconnected(v: Any) -> bool:
    return v is None or (isinstance(v, Variable) and isinstance(v.type, DisconnectedType))


def _sum_grads(terms: list[Variable]) -> Variable:
    """The sum of one variable's gradient terms: one tensor ``add``, or, when a term is of a
    plugin's type (a sparse gradient), the terms' own ``+`` (the plugin's addition)."""
    if len(terms) == 1:
        return terms[0]
    if all(isinstance(t.type, TensorType | ScalarType) for t in terms):
        return add(*terms)
    total = terms[0]
    for term in terms[1:]:
        total = total + term  # type: ignore[operator]
    return total


def _backprop(
    outputs_and_grads: Sequence[tuple[Variable, Variable]],
    wrt: Sequence[Variable],
    blocked: set[int],
) -> dict[Variable, Variable | None]:
    """Reverse-mode accumulation from seeded output gradients; returns grads of ``wrt``."""
    outputs = [o for o, _ in outputs_and_grads]
    # Only nodes on a path from wrt to outputs matter; others contribute nothing.
    nodes = io_toposort(list(wrt), outputs)
    ancestors_of_wrt = {id(v) for v in wrt}
    relevant: list[Apply] = []
    for node in nodes:
        if any(id(i) in ancestors_of_wrt for i in node.inputs):
            relevant.append(node)
            for o in node.outputs:
                ancestors_of_wrt.add(id(o))
    contributions: dict[int, list[Variable]] = {}
    for out, g in outputs_and_grads:
        contributions.setdefault(id(out), []).append(g)
    for node in reversed(relevant):
        out_grads = []
        any_grad = False
        for o in node.outputs:
            # A consider_constant variable keeps its own gradient (grad may return it, as
            # Theano's does) but passes nothing on to the node computing it.
            terms = None if id(o) in blocked else contributions.get(id(o))
            if terms:
                any_grad = True
                nulls = [t for t in terms if _is_null(t)]
                out_grads.append(nulls[0] if nulls else _sum_grads(terms))
            else:
                out_grads.append(zeros_like_grad(o) if _is_float_like(o) else None)
        if not any_grad:
            continue
        for k, g in enumerate(out_grads):
            if g is None:
                out_grads[k] = disconnected_type()
        null = next((g for g in out_grads if _is_null(g)), None)
        if null is not None:
            # An undefined gradient stays undefined upstream (no L_op to call on it), on the
            # inputs the connection pattern links to the outputs whose gradient is undefined.
            pattern = _connection_pattern(node)
            null_outs = [k for k, g in enumerate(out_grads) if _is_null(g)]
            for i, inp in enumerate(node.inputs):
                if id(inp) in ancestors_of_wrt and any(pattern[i][k] for k in null_outs):
                    contributions.setdefault(id(inp), []).append(null)
            continue
        try:
            input_grads = node.op.L_op(node.inputs, node.outputs, out_grads)
        except MethodNotDefined as exc:
            where = first_user_line(getattr(node.outputs[0].tag, "trace", None))
            raise NullTypeGradError(
                f"{exc}. The node was created at {where or 'an unknown place'}. "
                "HINT: wrap the input with opgraph.gradient.disconnected_grad if its "
                "gradient is not needed."
            ) from exc
        if len(input_grads) != len(node.inputs):
            raise ValueError(
                f"{node.op}.L_op returned {len(input_grads)} gradients "
                f"for {len(node.inputs)} inputs"
            )
        for inp, ig in zip(node.inputs, input_grads, strict=True):
            if _is_disconnected(ig) or id(inp) not in ancestors_of_wrt:
                continue
            if not _is_null(ig):
                ig = _match_type(inp, ig, node)
            contributions.setdefault(id(inp), []).append(ig)
    result: dict[Variable, Variable | None] = {}
    for w in wrt:
        terms = contributions.get(id(w))
        if not terms:
            result[w] = None
            continue
        nulls = [t for t in terms if _is_null(t)]
        result[w] = nulls[0] if nulls else _sum_grads(terms)
    return result


def _connection_pattern(node: Apply) -> list[list[bool]]:
    """``[input][output]`` connections of ``node`` (all True when the Op does not say)."""
    method = getattr(node.op, "connection_pattern", None)
    if method is not None:
        return method(node)
    return [[True] * len(node.outputs) for _ in node.inputs]


def _is_float_like(v: Variable) -> bool:
    return hasattr(v.type, "dtype") and hasattr(v.type, "broadcastable")


def _match_type(inp: Variable, g: Any, node: Apply) -> Variable:
    """Make a gradient term match the input's dtype and broadcastable pattern."""

    if not isinstance(inp.type, TensorType):
        return g
    if isinstance(g, Variable) and not isinstance(g.type, TensorType | ScalarType):
        # a plugin's gradient type for a dense input: the sparse gradient of x[ilist] that
        # AdvancedSubtensor1(sparse_grad=True) gives (Theano's sparse_grad) stays sparse
        if getattr(g.type, "ndim", None) != inp.type.ndim:
            raise ValueError(
                f"{node.op}.grad returned a gradient of type {g.type} for input {inp} of "
                f"{inp.type.ndim} dimension(s)"
            )
        return g
    g = as_tensor_variable(g)
    if g.type.ndim != inp.type.ndim:
        raise ValueError(
            f"{node.op}.grad returned a gradient of {g.type.ndim} dimension(s) for input {inp} "
            f"of {inp.type.ndim} dimension(s)"
        )
    g = sum_to_broadcastable(g, inp.type.broadcastable)
    if inp.type.dtype.startswith(("float", "complex")) and g.type.dtype != inp.type.dtype:
        g = cast(g, inp.type.dtype)
    return g


def grad(
    cost: Variable | None,
    wrt: Variable | Sequence[Variable],
    consider_constant: Sequence[Variable] | None = None,
    disconnected_inputs: str = "raise",
    add_names: bool = True,
    known_grads: Mapping[Variable, Any] | None = None,
    return_disconnected: str = "zero",
    null_gradients: str = "raise",
) -> Any:
    """Return the symbolic gradient of scalar ``cost`` with respect to ``wrt``.

    Parameters
    ----------
    cost
        A 0-d variable (or None when ``known_grads`` seeds the backward pass).
    wrt
        A variable or a list of them; the result has the same structure.
    consider_constant
        Variables through which no gradient flows.
    disconnected_inputs
        'raise' (default), 'warn' or 'ignore' when ``cost`` does not depend on a ``wrt``.
    known_grads
        ``{variable: gradient}`` to start from instead of (or besides) ``cost``.
    return_disconnected
        For a disconnected ``wrt``: 'zero' (zeros like it), 'None', or 'Disconnected'.
    null_gradients
        'raise' (default) or 'return' when a needed gradient is undefined.
    """

    if disconnected_inputs not in ("raise", "warn", "ignore"):
        raise ValueError(
            f"disconnected_inputs must be 'raise', 'warn' or 'ignore', got {disconnected_inputs!r}"
        )
    if return_disconnected not in ("zero", "None", "Disconnected"):
        raise ValueError("return_disconnected must be 'zero', 'None' or 'Disconnected'")
    single = isinstance(wrt, Variable)
    wrt_list = [wrt] if single else list(wrt)  # type: ignore[list-item]
    for w in wrt_list:
        if not isinstance(w, Variable):
            raise TypeError(f"grad: wrt must be Variables, got {w!r}")
    seeds: list[tuple[Variable, Variable]] = []
    if cost is not None:
        cost = as_tensor_variable(cost)
        if cost.type.ndim != 0:
            raise TypeError(
                f"grad: cost must be a scalar (0-d), got {cost} of type {cost.type}. "
                "HINT: sum it, or use opgraph.gradient.jacobian / Lop for non-scalar outputs."
            )
        if cost.type.dtype.startswith(("int", "uint", "bool")):
            seeds.append((cost, ones_like(cost, dtype="float64")))
        else:
            seeds.append((cost, ones_like(cost)))
    for var, g in (known_grads or {}).items():
        if not isinstance(g, Variable):
            g = as_tensor_variable(g)
        seeds.append((var, g))
    if not seeds:
        raise ValueError("grad needs a cost or known_grads")
    blocked = {id(v) for v in consider_constant or ()}
    grads = _backprop(seeds, wrt_list, blocked)
    out: list[Any] = []
    for w in wrt_list:
        g = grads[w]
        if g is None:
            direct = any(w is s for s, _ in seeds)
            if not direct:
                msg = (
                    f"grad method was asked to compute the gradient with respect to a variable "
                    f"that is not part of the computational graph of the cost, or is used only "
                    f"by a non-differentiable operator: {w}"
                )
                if disconnected_inputs == "raise":
                    raise DisconnectedInputError(
                        msg + ". HINT: pass disconnected_inputs='warn' or 'ignore' to grad()."
                    )
                if disconnected_inputs == "warn":
                    warnings.warn(msg, stacklevel=2)
            if return_disconnected == "zero":
                g = zeros_like_grad(w)
            elif return_disconnected == "Disconnected":
                g = disconnected_type()
        elif _is_null(g) and null_gradients == "raise":
            raise NullTypeGradError(
                f"grad encountered a NaN/undefined gradient for {w}: {g.type.why_null}"
            )
        if (
            add_names
            and g is not None
            and cost is not None
            and getattr(cost, "name", None)
            and getattr(w, "name", None)
            and not _is_null(g)
        ):
            g.name = f"(d{cost.name}/d{w.name})"
        out.append(g)
    return out[0] if single else out


def Lop(
    f: Variable | Sequence[Variable],
    wrt: Variable | Sequence[Variable],
    eval_points: Any,
    consider_constant: Sequence[Variable] | None = None,
    disconnected_inputs: str = "raise",
) -> Any:
    """Vector-Jacobian product ``v^T J`` of ``f`` w.r.t. ``wrt`` with ``v = eval_points``."""
    fs = [f] if isinstance(f, Variable) else list(f)
    vs = [eval_points] if isinstance(f, Variable) else list(eval_points)
    if len(fs) != len(vs):
        raise ValueError(f"Lop: {len(fs)} outputs but {len(vs)} eval points")
    return grad(
        None,
        wrt,
        consider_constant=consider_constant,
        known_grads=dict(zip(fs, vs, strict=True)),
        disconnected_inputs=disconnected_inputs,
        add_names=False,
    )


def Rop(
    f: Variable | Sequence[Variable],
    wrt: Variable | Sequence[Variable],
    eval_points: Any,
    disconnected_outputs: str = "raise",
    return_disconnected: str = "zero",
) -> Any:
    """Jacobian-vector product ``J v`` of ``f`` w.r.t. ``wrt`` with ``v = eval_points``.

    Theano 1.0's algorithm: every node above ``f`` gets its Op's ``R_op`` (forward mode), with
    the given eval point for a ``wrt`` input, zeros for any other ownerless input (constants,
    shared variables, unrelated inputs) and the tangent computed upstream otherwise. So the
    result keeps the graph Theano builds: ``Rop(dot(x, W), W, V)`` is
    ``dot(zeros_like(x), W) + dot(x, V)`` and still depends on ``W``.

    Parameters
    ----------
    disconnected_outputs
        'raise' (DisconnectedInputError), 'warn' or 'ignore' when an output of ``f`` gets no
        tangent (it does not depend on ``wrt``, or only through non-differentiable Ops).
    return_disconnected
        For such an output: 'zero' (zeros like it), 'None', or 'Disconnected'.

    Returns a list (tuple) if ``f`` is a list (tuple), else one Variable. An Op without
    ``R_op`` on the path from ``wrt`` raises NotImplementedError.
    """

    using_list, using_tuple = isinstance(f, list), isinstance(f, tuple)
    fs = list(f) if isinstance(f, list | tuple) else [f]
    ws = list(wrt) if isinstance(wrt, list | tuple) else [wrt]
    evs = list(eval_points) if isinstance(eval_points, list | tuple) else [eval_points]
    if len(ws) != len(evs):
        raise ValueError(f"Rop: {len(ws)} wrt variables but {len(evs)} eval points")
    ws = [w if isinstance(w, Variable) else as_tensor_variable(w) for w in ws]
    tangent: dict[int, Variable | None] = {}
    connected: set[int] = set()
    for i, (w, ev) in enumerate(zip(ws, evs, strict=True)):
        ev = ev if isinstance(ev, Variable) else as_tensor_variable(ev)
        w_nd, ev_nd = getattr(w.type, "ndim", None), getattr(ev.type, "ndim", None)
        if w_nd is not None and ev_nd is not None and w_nd != ev_nd:
            raise ValueError(
                f"Element {i} of wrt/eval_point have mismatched dimensionality: "
                f"{w_nd} versus {ev_nd}"
            )
        tangent[id(w)] = ev
        connected.add(id(w))
    wrt_ids = {id(w) for w in ws}
    for node in io_toposort(graph_inputs(fs, blockers=ws), fs):
        evals: list[Variable | None] = []
        for inp in node.inputs:
            if id(inp) in tangent:
                evals.append(tangent[id(inp)])
            elif inp.owner is None:
                evals.append(zeros_like(inp) if isinstance(inp.type, TensorType) else None)
            else:
                evals.append(None)
        evals = [None if e is None else _same_type_point(i, e) for i, e in zip(node.inputs, evals)]
        is_connected = any(id(i) in connected for i in node.inputs)
        try:
            outs = node.op.R_op(node.inputs, evals)
        except MethodNotDefined as exc:
            if not is_connected:
                outs = [None] * len(node.outputs)
            else:
                raise NotImplementedError(
                    f"Rop: {node.op} has no R_op, so forward-mode derivatives cannot pass "
                    f"through it ({exc}). HINT: use Lop, or ask for R_op on this Op."
                ) from exc
        if isinstance(outs, Variable):
            outs = [outs]
        for o, t in zip(node.outputs, outs, strict=True):
            if id(o) not in wrt_ids:
                tangent[id(o)] = t
                if is_connected:
                    connected.add(id(o))
    result: list[Any] = []
    for out in fs:
        t = tangent.get(id(out))
        if t is not None:
            result.append(t)
            continue
        message = (
            "Rop method was asked to compute the gradient with respect to a variable that is "
            "not part of the computational graph of variables in wrt, or is used only by a "
            f"non-differentiable operator: {out}"
        )
        if disconnected_outputs == "raise":
            raise DisconnectedInputError(message)
        if disconnected_outputs == "warn":
            warnings.warn(message, stacklevel=2)
        elif disconnected_outputs != "ignore":
            raise ValueError(
                "Invalid value for keyword 'disconnected_inputs', valid values are "
                "'ignore', 'warn' and 'raise'."
            )
        kind = return_disconnected.lower()
        if kind == "zero":
            result.append(zeros_like(out))
        elif kind == "none":
            result.append(None)
        elif kind == "disconnected":
            result.append(disconnected_type())
        else:
            raise ValueError(
                "Invalid value for keyword 'return_disconnected', valid values are "
                "'zero', 'None' and 'Disconnected'."
            )
    if using_list:
        return result
    if using_tuple:
        return tuple(result)
    return result[0] if len(result) == 1 else result


def _same_type_point(x: Variable, y: Variable) -> Variable:
    """An eval point of ``x``'s type (cast to its dtype first if needed), as Theano's Rop."""
    try:
        return x.type.filter_variable(y)
    except TypeError:
        if not isinstance(x.type, TensorType):
            return y
        y = cast(y, x.type.dtype)
        try:
            return x.type.filter_variable(y)
        except TypeError:
            return y
