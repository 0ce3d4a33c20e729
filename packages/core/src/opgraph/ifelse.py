"""Lazy conditional evaluation: ``ifelse(condition, then_branch, else_branch)`` (Theano's).

``ifelse`` differs from the elementwise ``switch``: its condition is one scalar, and only
the branch it selects is computed. Laziness comes from the VM's lazy hook: the node's
thunk first asks for the condition, then only for the inputs of the taken branch. The
``py`` and ``vm`` linkers both evaluate it lazily (their VM is a :class:`~opgraph.link.vm.Stack`
as soon as the graph has a lazy node). A linker without lazy evaluation (``VMLinker(lazy=False)``,
or a backend that only calls ``perform``) computes both branches before the node runs and
then picks one: the result is the same, only the work differs.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.null_type import DisconnectedType, disconnected_type
from opgraph.graph.op import Op, OutputStorage, Thunk
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.math import cast, sum_to_broadcastable, zeros_like

__all__ = ["IfElse", "ifelse"]


def _copy(value: Any) -> Any:
    return value.copy() if isinstance(value, np.ndarray) else copy.deepcopy(value)


class IfElse(Op):
    """``outputs = then_branch if condition else else_branch``, evaluating only one branch.

    Inputs are ``[condition, then_1, ..., then_n, else_1, ..., else_n]``; output ``k`` has
    the type of ``then_k`` (and of ``else_k``). Printed ``if{}``, ``if{inplace}`` when the
    outputs are views of the then-branch values (``as_view``), ``if{name}`` when named.

    Parameters
    ----------
    n_outs
        Number of outputs (values per branch).
    as_view
        Return the then-branch values themselves (declared in ``view_map``) rather than
        copies; the else-branch values are always copied.
    gpu
        Kept for Theano compatibility (a GPU plugin's variant); not used by core.
    name
        Shown in the printed name; not part of the Op's identity.
    """

    __props__ = ("as_view", "gpu", "n_outs")
    #: Evaluates its inputs lazily (only the taken branch): rewrites that reorder reads and
    #: writes of buffers (the in-place ones) read this.
    lazy = True

    def __init__(
        self, n_outs: int, as_view: bool = False, gpu: bool = False, name: str | None = None
    ) -> None:
        if int(n_outs) < 1:
            raise ValueError(f"IfElse needs at least one output, got n_outs={n_outs}")
        self.n_outs = int(n_outs)
        self.as_view = bool(as_view)
        self.gpu = bool(gpu)
        self.name = name
        if self.as_view:
            self.view_map = {k: [k + 1] for k in range(self.n_outs)}

    def __str__(self) -> str:
        args = [a for a in (self.name, "inplace" if self.as_view else None) if a]
        if self.gpu:
            args.append("gpu")
        return "if{" + ",".join(args) + "}"

    def make_node(self, condition: Any, *branches: Any) -> Apply:
        if len(branches) != 2 * self.n_outs:
            raise TypeError(
                f"{self} takes a condition and {2 * self.n_outs} branch values "
                f"({self.n_outs} per branch), got {len(branches)}"
            )
        condition = as_tensor_variable(condition)
        if condition.type.ndim != 0:
            raise TypeError(
                f"the condition of ifelse must be a scalar (0 stands for False, anything "
                f"else for True), got {condition} of type {condition.type}.\n"
                "HINT: reduce it first, e.g. cond.any(), or use switch() for an "
                "elementwise choice."
            )
        values = [b if isinstance(b, Variable) else as_tensor_variable(b) for b in branches]
        thens, elses = values[: self.n_outs], values[self.n_outs :]
        for k, (t, f) in enumerate(zip(thens, elses, strict=True)):
            if t.type != f.type:
                raise TypeError(
                    f"the two branches of ifelse must have identical types, but value {k} is "
                    f"{t.type} on the then branch and {f.type} on the else branch.\n"
                    "HINT: cast one of them (e.g. x.astype(...)), or use "
                    "tensor.patternbroadcast/unbroadcast to match broadcastable patterns."
                )
        return Apply(self, [condition, *values], [t.type() for t in thens])

    # -- evaluation -----------------------------------------------------------------------

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: OutputStorage) -> None:
        """Non-lazy evaluation: both branches are already computed; pick one."""
        cond, values = inputs[0], inputs[1:]
        taken = values[: self.n_outs] if cond else values[self.n_outs :]
        for k, (cell, value) in enumerate(zip(output_storage, taken, strict=True)):
            view = self.as_view and bool(cond)
            out = value if view else _copy(value)
            cell[0] = node.outputs[k].type.filter(out)

    def make_thunk(
        self,
        node: Apply,
        storage_map: dict[Variable, list[Any]],
        compute_map: dict[Variable, list[bool]] | None,
        no_recycling: Sequence[Variable] = (),
        impl: str | None = None,
    ) -> Thunk:
        """A lazy thunk: asks for the condition, then only for the taken branch's inputs."""
        if compute_map is None:
            return self.make_py_thunk(node, storage_map, None, no_recycling)
        n = self.n_outs
        in_cells = [storage_map[v] for v in node.inputs]
        in_done = [compute_map[v] for v in node.inputs]
        out_cells = [storage_map[v] for v in node.outputs]
        out_done = [compute_map[v] for v in node.outputs]
        out_types = [v.type for v in node.outputs]
        as_view = self.as_view

        def thunk() -> list[int] | None:
            if not in_done[0][0]:
                return [0]
            cond = bool(in_cells[0][0])
            first = 1 if cond else 1 + n
            needed = [i for i in range(first, first + n) if not in_done[i][0]]
            if needed:
                return needed
            for k in range(n):
                value = in_cells[first + k][0]
                out = value if as_view and cond else _copy(value)
                out_cells[k][0] = out_types[k].filter(out)
                out_done[k][0] = True
            return None

        thunk.lazy = True  # type: ignore[attr-defined]
        thunk.inputs = in_cells  # type: ignore[attr-defined]
        thunk.outputs = out_cells  # type: ignore[attr-defined]
        thunk.perform = self.perform  # type: ignore[attr-defined]
        return thunk

    # -- calculus and shapes --------------------------------------------------------------

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        """``d/d then_k = ifelse(c, g_k, 0)``, ``d/d else_k = ifelse(c, 0, g_k)``.

        The condition is treated as piecewise constant: its gradient is zero.
        """
        cond, values = inputs[0], list(inputs[1:])
        thens, elses = values[: self.n_outs], values[self.n_outs :]
        then_grads: list[Variable] = []
        else_grads: list[Variable] = []
        for t, f, g in zip(thens, elses, output_grads, strict=True):
            if isinstance(g.type, DisconnectedType) or not _is_float(t):
                then_grads.append(disconnected_type())
                else_grads.append(disconnected_type())
                continue
            g = _fit_grad(g, t)
            then_grads.append(ifelse(cond, g, zeros_like(t), name=_suffix(self.name, "_grad_t")))
            else_grads.append(ifelse(cond, zeros_like(f), g, name=_suffix(self.name, "_grad_f")))
        cond_grad = cast(zeros_like(cond), config.floatX)
        return [cond_grad, *then_grads, *else_grads]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]) -> list[Any]:
        """The tangent of the taken branch: ``ifelse(c, dthen_k, delse_k)``."""
        values = list(inputs[1:])
        evs = list(eval_points[1:])
        result: list[Any] = []
        for k in range(self.n_outs):
            t_ev, f_ev = evs[k], evs[self.n_outs + k]
            if t_ev is None and f_ev is None:
                result.append(None)
                continue
            t_ev = zeros_like(values[k]) if t_ev is None else _fit_grad(t_ev, values[k])
            f_ev = (
                zeros_like(values[self.n_outs + k])
                if f_ev is None
                else _fit_grad(f_ev, values[self.n_outs + k])
            )
            result.append(ifelse(inputs[0], t_ev, f_ev))
        return result

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        """Each dimension is the branch's where both agree, else an ``ifelse`` of the two."""
        n = self.n_outs
        t_shapes, f_shapes = input_shapes[1 : 1 + n], input_shapes[1 + n :]
        if any(not isinstance(s, list | tuple) for s in (*t_shapes, *f_shapes)):
            return [None] * n
        out: list[Any] = []
        pending: list[tuple[int, int, Any, Any]] = []
        for k, (ts, fs) in enumerate(zip(t_shapes, f_shapes, strict=True)):
            dims: list[Any] = []
            for d, (a, b) in enumerate(zip(ts, fs, strict=True)):
                if a is b or (_is_int(a) and _is_int(b) and int(a) == int(b)):
                    dims.append(a)
                else:
                    dims.append(None)
                    pending.append((k, d, a, b))
            out.append(dims)
        if pending:
            chosen = _ifelse_dims(node.inputs[0], [(a, b) for _, _, a, b in pending], self.name)
            for (k, d, _a, _b), dim in zip(pending, chosen, strict=True):
                out[k][d] = dim
        return [tuple(dims) for dims in out]


def _is_int(x: Any) -> bool:
    return isinstance(x, int | np.integer) and not isinstance(x, bool)


def _is_float(v: Variable) -> bool:
    dtype = getattr(v.type, "dtype", "")
    return str(dtype).startswith(("float", "complex"))


def _suffix(name: str | None, suffix: str) -> str | None:
    return None if name is None else name + suffix


def _ifelse_dims(condition: Variable, pairs: list[tuple[Any, Any]], name: str | None) -> list[Any]:
    """One ``IfElse`` choosing between int64 scalar dimensions, lazily like the node itself."""
    thens = [cast(as_tensor_variable(a), "int64") for a, _ in pairs]
    elses = [cast(as_tensor_variable(b), "int64") for _, b in pairs]
    op = IfElse(len(pairs), name=_suffix(name, "_shape") if name else "shape")
    return op(condition, *thens, *elses, return_list=True)


def _fit_grad(g: Variable, like: Variable) -> Variable:
    """Give gradient ``g`` exactly the type of ``like`` (dtype and broadcastable pattern)."""
    g = as_tensor_variable(g)
    if g.type.ndim != like.type.ndim:
        raise ValueError(
            f"ifelse: a gradient of {g.type.ndim} dimension(s) was given for a branch value "
            f"of {like.type.ndim} dimension(s) ({like})"
        )
    g = sum_to_broadcastable(g, like.type.broadcastable)
    if g.type.dtype != like.type.dtype:
        g = cast(g, like.type.dtype)
    return g


def ifelse(
    condition: Any,
    then_branch: Any,
    else_branch: Any,
    name: str | None = None,
) -> Any:
    """Return ``then_branch`` if ``condition`` is true, else ``else_branch``, lazily.

    Only the selected branch is computed when the function runs (with the ``py`` and ``vm``
    linkers; a non-lazy linker computes both and picks one).

    Parameters
    ----------
    condition
        A scalar: 0 stands for False, anything else for True.
    then_branch, else_branch
        A variable, or a list/tuple of variables: one per output, pairwise of identical
        types (dtype and broadcastable pattern).
    name
        Shown in the printed name of the Op (``if{name}``).

    Returns
    -------
    A variable if the branches were single variables, else a list (or tuple, following
    ``then_branch``) of variables.

    Raises
    ------
    TypeError
        If two corresponding values have different types, or ``condition`` is not a scalar.
    ValueError
        If the branches have different numbers of values.
    """
    kind = type(then_branch) if isinstance(then_branch, list | tuple) else None
    thens = list(then_branch) if isinstance(then_branch, list | tuple) else [then_branch]
    elses = list(else_branch) if isinstance(else_branch, list | tuple) else [else_branch]
    if len(thens) != len(elses):
        raise ValueError(
            f"ifelse: the then branch has {len(thens)} value(s) but the else branch has "
            f"{len(elses)}; they must have the same number, pairwise of the same type."
        )
    if not thens:
        raise ValueError("ifelse needs at least one value per branch")
    thens = [t if isinstance(t, Variable) else as_tensor_variable(t) for t in thens]
    elses = [f if isinstance(f, Variable) else as_tensor_variable(f) for f in elses]
    for k, (t, f) in enumerate(zip(thens, elses, strict=True)):
        # A constant of another broadcastable pattern takes the other branch's type.
        if t.type != f.type and isinstance(f, Constant):
            elses[k] = _convert(t, f)
        elif t.type != f.type and isinstance(t, Constant):
            thens[k] = _convert(f, t)
    op = IfElse(len(thens), name=name)
    outs = op(condition, *thens, *elses, return_list=True)
    if kind is None:
        return outs[0]
    return kind(outs)


def _convert(like: Variable, const: Variable) -> Variable:
    """``const`` as a variable of ``like``'s type if that is safe, else unchanged."""
    converted = like.type.convert_variable(const)
    return const if converted is None else converted
