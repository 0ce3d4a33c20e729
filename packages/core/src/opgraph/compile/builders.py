"""``OpFromGraph``: an Op defined by a graph (Theano 1.0's ``theano.compile.builders``).

::

    x, y, z = T.dmatrices("xyz")
    op = OpFromGraph([x, y, z], [x + y * z])
    e = op(x, y, z) + op(z, y, x)          # op behaves like any other Op

The Op keeps its own copy of the graph (:class:`~opgraph.compile.inner.InnerGraphOp`, the
machinery it shares with Scan) and runs it with a compiled inner function. Shared variables
the outputs use become implicit extra inputs, appended to the node's inputs at call time.
Its gradient is the inner graph's gradient wrapped in another OpFromGraph (built on first
use and cached), unless ``grad_overrides``/``lop_overrides`` say otherwise; ``R_op``
likewise with ``rop_overrides``. With ``inline=True`` the rewrite ``inline_ofg_expansion``
(opgraph-optimizers) replaces each node by a copy of its inner graph before the other
rewrites run.
"""

from __future__ import annotations

import copy
import warnings
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.compile.function_module import UnusedInputError
from opgraph.compile.inner import InnerFunction, InnerGraphOp
from opgraph.compile.sharedvalue import SharedVariable
from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.clone import clone_replace
from opgraph.graph.null_type import DisconnectedType, NullType
from opgraph.graph.traversal import ancestors, graph_inputs, io_toposort
from opgraph.graph.utils import MethodNotDefined
from opgraph.tensor.autodiff import NullTypeGradError, Rop, grad
from opgraph.tensor.basic import as_tensor_variable, constant
from opgraph.tensor.math import cast, zeros_like
from opgraph.tensor.shape import shape_i
from opgraph.tensor.type import TensorType

__all__ = ["OpFromGraph"]

#: Keyword arguments OpFromGraph passes on to the compilation of its inner graph.
_COMPILE_KWARGS = ("mode", "on_unused_input")


def _is_default(spec: Any) -> bool:
    return isinstance(spec, str) and spec == "default"


def _is_special(v: Any) -> bool:
    """A NullType or DisconnectedType variable (an override meaning "undefined"/"none")."""
    return isinstance(v, Variable) and isinstance(v.type, NullType | DisconnectedType)


def _zeros_like(v: Variable) -> Variable:
    """Zeros of ``v``'s type (a float 0 for a non-tensor variable, as Theano)."""
    if isinstance(v.type, TensorType):
        return zeros_like(v)
    return constant(0.0)


def _freeze(spec: Any) -> Any:
    """A hashable stand-in for an override specification (lists become tuples)."""
    if isinstance(spec, list | tuple):
        return tuple(_freeze(s) for s in spec)
    return spec


def _io_connection_pattern(
    inputs: Sequence[Variable], outputs: Sequence[Variable]
) -> list[list[bool]]:
    """``pattern[i][j]``: output ``j`` depends on input ``i``, following each inner Op's
    ``connection_pattern`` where it defines one."""
    n = len(inputs)
    by_var: dict[Variable, list[bool]] = {
        v: [k == j for j in range(n)] for k, v in enumerate(inputs)
    }
    for node in io_toposort(list(inputs), list(outputs)):
        get = getattr(node.op, "connection_pattern", None)
        op_pattern = get(node) if get is not None else None
        for k, out in enumerate(node.outputs):
            row = [False] * n
            for j, inp in enumerate(node.inputs):
                if inp in by_var and (op_pattern is None or op_pattern[j][k]):
                    row = [a or b for a, b in zip(row, by_var[inp], strict=True)]
            by_var[out] = row
    rows = [by_var.get(o, [False] * n) for o in outputs]
    return [[rows[j][i] for j in range(len(outputs))] for i in range(n)]


def _must_copy(value: Any, others: Sequence[Any]) -> bool:
    """True if ``value`` (a borrowed output of the inner function) may share memory with a
    value the caller keeps (an input or an earlier output) or with the inner function's
    buffers (a view): the node must then hand out a copy."""
    if isinstance(value, np.ndarray) and value.base is not None:
        return True
    return any(value is o for o in others)


def _copy(value: Any) -> Any:
    return value.copy() if isinstance(value, np.ndarray) else copy.deepcopy(value)


class OpFromGraph(InnerGraphOp):
    r"""An Op computing ``outputs`` from ``inputs`` with a compiled copy of their graph.

    Parameters
    ----------
    inputs, outputs
        Lists of Variables. Every variable the outputs use must be in ``inputs``, be a
        constant, or be a shared variable (it becomes an implicit input of every node).
    inline
        False (default): the node runs a pre-compiled inner function. True: compilation
        replaces the node by its inner graph, so that the inner nodes are rewritten together
        with the rest of the graph (better run time, longer compile).
    grad_overrides
        Mutually exclusive with ``lop_overrides``. ``'default'``: the gradient of the inner
        graph. A callable ``f(inputs, output_grads)`` returning one gradient per input
        (Variables, or NullType/DisconnectedType variables). An OpFromGraph taking
        ``inputs + output_grads``. A NullType or DisconnectedType variable: every input's
        gradient is undefined / disconnected. A list with one entry per input, each
        ``'default'``, a callable returning that input's gradient, or such a variable.
    lop_overrides
        As ``grad_overrides``, but callables take ``(inputs, outputs, output_grads)`` and an
        OpFromGraph takes ``inputs + outputs + output_grads``.
    rop_overrides
        ``'default'``: the inner graph's R_op. A callable ``f(inputs, eval_points)`` returning
        one R_op result per output; an OpFromGraph taking ``inputs + eval_points``; a NullType
        variable (undefined) or a DisconnectedType one (zeros); or a list with one entry per
        output (``'default'``, a callable returning that output's result, or such a variable).
    connection_pattern
        ``pattern[i][j]``: output ``j`` depends on input ``i`` (implicit shared inputs
        included). Default: computed from the inner graph and its gradient.
    name
        Printed instead of ``OpFromGraph``: ``name{inline=False}``.
    \*\*kwargs
        Passed on to the inner graph's compilation: ``mode`` (default: the mode of the
        function the node is part of) and ``on_unused_input`` (default
        ``config.on_unused_input``: an input the outputs do not use raises when the node is
        compiled). ``updates`` and ``givens`` are not allowed.

    Callables given as overrides are called once, on the first gradient (or R_op), and their
    result is wrapped in an OpFromGraph; they should be pure functions.
    """

    TYPE_ERR_MSG = (
        "L_op/gradient override should be (single or list of)"
        "'default' | OpFromGraph | callable | Variable "
        "with NullType or DisconnectedType, got %s"
    )
    STYPE_ERR_MSG = (
        "Overriding Variable instance can only have type of DisconnectedType or NullType, got %s"
    )
    LOP_TYPE_ERR_MSG = 'L_op type can only be "grad" or "lop", got %s.'
    OV_INP_LEN_ERR_MSG = "expect overrider with %d inputs, got %d"

    inner_props = ("is_inline", "name", "_override_key", "_pattern_key")

    def __init__(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        inline: bool = False,
        grad_overrides: Any = "default",
        rop_overrides: Any = "default",
        lop_overrides: Any = "default",
        connection_pattern: Sequence[Sequence[bool]] | None = None,
        name: str | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(outputs, list):
            raise TypeError(f"outputs must be list, got {type(outputs)}")
        if not isinstance(inputs, list | tuple):
            raise TypeError(f"inputs must be a list, got {type(inputs)}")
        for v in [*inputs, *outputs]:
            if not isinstance(v, Variable):
                raise TypeError(f"inputs and outputs must be Variable instances, got {v!r}")
        if "updates" in kwargs or "givens" in kwargs:
            raise TypeError("updates and givens are not allowed here")
        unknown = sorted(set(kwargs) - set(_COMPILE_KWARGS))
        if unknown:
            raise TypeError(
                f"OpFromGraph got unexpected keyword argument(s) {', '.join(unknown)}; the "
                f"inner graph's compilation accepts {', '.join(_COMPILE_KWARGS)}"
            )
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be None or a string, got {name!r}")
        inputs = list(inputs)
        # Shared variables become implicit inputs: the inner graph sees placeholders, so
        # that its gradient with respect to them is an ordinary input gradient.
        self.shared_inputs: list[SharedVariable] = [
            v for v in graph_inputs(outputs, blockers=inputs) if isinstance(v, SharedVariable)
        ]
        self.shared_inputs = list(dict.fromkeys(self.shared_inputs))
        placeholders = [s.type() for s in self.shared_inputs]
        for s, p in zip(self.shared_inputs, placeholders, strict=True):
            p.name = s.name
        if self.shared_inputs:
            outputs = clone_replace(
                outputs, replace=dict(zip(self.shared_inputs, placeholders, strict=True))
            )
        super().__init__(inputs + placeholders, outputs, mode=kwargs.get("mode"))
        self.is_inline = bool(inline)
        self.name = name
        self.kwargs = dict(kwargs)
        self._n_explicit = len(inputs)
        self.input_types = [v.type for v in self.inner_inputs[: len(inputs)]]
        self.output_types = [v.type for v in self.inner_outputs]
        if not _is_default(lop_overrides):
            if not _is_default(grad_overrides):
                raise ValueError("lop_overrides and grad_overrides are mutually exclusive")
            self.set_lop_overrides(lop_overrides)
        elif not _is_default(grad_overrides):
            self.set_grad_overrides(grad_overrides)
        else:
            self.set_lop_overrides("default")
        self.set_rop_overrides(rop_overrides)
        if connection_pattern is not None:
            connection_pattern = [[bool(c) for c in row] for row in connection_pattern]
            if len(connection_pattern) != len(self.inner_inputs) or any(
                len(row) != len(self.inner_outputs) for row in connection_pattern
            ):
                raise ValueError(
                    f"connection_pattern must have one row per input ({len(self.inner_inputs)}"
                    f", shared variables included) of one entry per output "
                    f"({len(self.inner_outputs)}), got {connection_pattern}"
                )
        self._connection_pattern = connection_pattern
        self._node_functions: weakref.WeakKeyDictionary[Apply, InnerFunction] = (
            weakref.WeakKeyDictionary()
        )
        self._unused_checked = False

    # ------------------------------------------------------------------ Theano's names

    @property
    def local_inputs(self) -> list[Variable]:
        """Theano's name for the inner inputs (explicit ones, then shared placeholders)."""
        return self.inner_inputs

    @property
    def local_outputs(self) -> list[Variable]:
        """Theano's name for the inner outputs."""
        return self.inner_outputs

    @property
    def _override_key(self) -> tuple[Any, ...]:
        return (self._lop_type_given, _freeze(self._lop_given), _freeze(self._rop_given))

    @property
    def _pattern_key(self) -> Any:
        return _freeze(self._connection_pattern)

    def __str__(self) -> str:
        name = type(self).__name__ if self.name is None else self.name
        return f"{name}{{inline={self.is_inline}}}"

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.pop("_node_functions", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._node_functions = weakref.WeakKeyDictionary()

    # ------------------------------------------------------------------ overrides

    def set_grad_overrides(self, grad_overrides: Any) -> None:
        """Set the gradient override (``grad_overrides``'s syntax), replacing any L_op or
        gradient override set before."""
        self._set_lop(grad_overrides, "grad")

    def set_lop_overrides(self, lop_overrides: Any) -> None:
        """Set the L_op override (``lop_overrides``'s syntax), replacing any L_op or
        gradient override set before."""
        self._set_lop(lop_overrides, "lop")

    def set_rop_overrides(self, rop_overrides: Any) -> None:
        """Set the R_op override (``rop_overrides``'s syntax), replacing the previous one."""
        self._rop_given = rop_overrides
        self._rop_op: OpFromGraph | None = None
        self._rop_stypes: list[Variable | None] = []
        self._rop_is_default = _is_default(rop_overrides)

    def _set_lop(self, spec: Any, kind: str) -> None:
        self._lop_given = spec
        self._lop_type_given = kind
        self._lop_op: OpFromGraph | None = None
        self._lop_stypes: list[Variable | None] = []
        self._lop_is_default = _is_default(spec)

    def get_lop_op(self) -> OpFromGraph:
        """The OpFromGraph computing the input gradients from ``inputs + outputs +
        output_grads`` (built from the override on first use)."""
        if self._lop_op is None:
            with config.change_flags(compute_test_value="off"):
                self._build_lop_op()
        assert self._lop_op is not None
        return self._lop_op

    def get_rop_op(self) -> OpFromGraph:
        """The OpFromGraph computing the R_op results from ``inputs + eval_points``."""
        if self._rop_op is None:
            with config.change_flags(compute_test_value="off"):
                self._build_rop_op()
        assert self._rop_op is not None
        return self._rop_op

    def _sub_op(self, inputs: list[Variable], outputs: list[Variable], suffix: str) -> OpFromGraph:
        kwargs = {k: v for k, v in self.kwargs.items() if k != "on_unused_input"}
        return type(self)(
            inputs=inputs,
            outputs=outputs,
            inline=self.is_inline,
            name=None if self.name is None else f"{self.name}_{suffix}",
            on_unused_input="ignore",
            **kwargs,
        )

    @staticmethod
    def _filter_grad_var(g: Any, inp: Variable) -> tuple[Variable, Variable | None]:
        """(what the gradient OpFromGraph computes, the special variable L_op returns
        instead): NullType/DisconnectedType gradients (and None) become zeros inside."""
        if g is None:
            g = DisconnectedType()()
        if _is_special(g):
            return _zeros_like(inp), g
        if not isinstance(g, Variable):
            g = as_tensor_variable(g)
        return g, None

    def _build_lop_op(self) -> None:
        local_inputs, local_outputs = self.inner_inputs, self.inner_outputs
        n_in, n_out = len(local_inputs), len(local_outputs)
        spec, kind = self._lop_given, self._lop_type_given
        if kind not in ("grad", "lop"):
            raise ValueError(self.LOP_TYPE_ERR_MSG % kind)
        if isinstance(spec, OpFromGraph):
            needed = n_in + (2 if kind == "lop" else 1) * n_out
            got = len(spec.inner_inputs) - len(spec.shared_inputs)
            if got != needed:
                raise ValueError(self.OV_INP_LEN_ERR_MSG % (needed, got))
            if len(spec.inner_outputs) != n_in:
                raise ValueError(
                    f"the L_op/gradient OpFromGraph must have one output per input "
                    f"({n_in}), got {len(spec.inner_outputs)}"
                )
            if kind == "lop":
                spec._unused_policy = "ignore"
                self._lop_op, self._lop_stypes = spec, [None] * n_in
                return
            user_op = spec

            def spec(inps: list[Variable], grads: list[Variable]) -> list[Variable]:
                return user_op(*inps, *grads, return_list=True)

        output_grads = [t() for t in self.output_types]
        known: dict[Variable, Variable] = {}
        for o, g in zip(local_outputs, output_grads, strict=True):
            known[o] = known[o] + g if o in known else g

        def default_grads(wrt: list[Variable]) -> list[Variable]:
            return grad(
                None,
                wrt,
                disconnected_inputs="ignore",
                return_disconnected="Disconnected",
                null_gradients="return",
                known_grads=known,
            )

        args = (
            (local_inputs, local_outputs, output_grads)
            if kind == "lop"
            else (local_inputs, output_grads)
        )
        pairs: list[tuple[Variable, Variable | None]]
        if _is_default(spec):
            pairs = [
                self._filter_grad_var(g, inp)
                for g, inp in zip(default_grads(local_inputs), local_inputs, strict=True)
            ]
        elif isinstance(spec, Variable):
            if not _is_special(spec):
                raise ValueError(self.STYPE_ERR_MSG % spec.type)
            pairs = [(_zeros_like(inp), spec.type()) for inp in local_inputs]
        elif isinstance(spec, list | tuple):
            if len(spec) != n_in:
                raise ValueError(f"Need to override {n_in} gradients, got {len(spec)}", spec)
            wrt = [inp for inp, s in zip(local_inputs, spec, strict=True) if _is_default(s)]
            defaults = iter(default_grads(wrt) if wrt else [])
            pairs = []
            for inp, s in zip(local_inputs, spec, strict=True):
                if _is_default(s):
                    pairs.append(self._filter_grad_var(next(defaults), inp))
                elif isinstance(s, Variable):
                    if not _is_special(s):
                        raise ValueError(self.STYPE_ERR_MSG % s.type)
                    pairs.append((_zeros_like(inp), s.type()))
                elif callable(s):
                    pairs.append(self._filter_grad_var(s(*args), inp))
                else:
                    raise TypeError(self.TYPE_ERR_MSG % (s,))
        else:
            if not callable(spec):
                raise TypeError(self.TYPE_ERR_MSG % (spec,))
            result = spec(*args)
            if not isinstance(result, list):
                raise TypeError(
                    f'Gradient/L_op overriding function should return a list, got "{type(result)}"'
                )
            if len(result) != n_in:
                raise ValueError(
                    f"Gradient/L_op overriding function should return list of {n_in} outputs, "
                    f"got {len(result)}"
                )
            pairs = [
                self._filter_grad_var(g, inp) for g, inp in zip(result, local_inputs, strict=True)
            ]
        # An output that is also an input (or repeats an earlier output) gets a slot of its
        # own: the gradient graph reaches it through the input already.
        seen = set(local_inputs)
        slots = []
        for o in local_outputs:
            slots.append(o.type() if o in seen or isinstance(o, Constant) else o)
            seen.add(o)
        self._lop_op = self._sub_op(
            [*local_inputs, *slots, *output_grads], [g for g, _ in pairs], kind
        )
        self._lop_stypes = [s for _, s in pairs]

    @staticmethod
    def _filter_rop_var(r: Any, out: Variable) -> tuple[Variable, Variable | None]:
        if r is None or (isinstance(r, Variable) and isinstance(r.type, DisconnectedType)):
            return _zeros_like(out), None
        if isinstance(r, Variable) and isinstance(r.type, NullType):
            return _zeros_like(out), r
        if not isinstance(r, Variable):
            r = as_tensor_variable(r)
        return r, None

    def _build_rop_op(self) -> None:
        local_inputs, local_outputs = self.inner_inputs, self.inner_outputs
        n, n_out = self._n_explicit, len(local_outputs)
        explicit = local_inputs[:n]
        eval_points: list[Variable | None] = [
            v.type() if isinstance(v.type, TensorType) else None for v in explicit
        ]
        wrt = [v for v, e in zip(explicit, eval_points, strict=True) if e is not None]
        points = [e for e in eval_points if e is not None]
        spec = self._rop_given
        type_err = (
            "R_op overrides should be (single or list of)"
            "OpFromGraph | 'default' | callable | Variable with NullType or DisconnectedType, "
            "got %s"
        )
        if isinstance(spec, OpFromGraph):
            got = len(spec.inner_inputs) - len(spec.shared_inputs)
            if got != 2 * n:
                raise ValueError(self.OV_INP_LEN_ERR_MSG % (2 * n, got))
            user_op = spec

            def spec(inps: list[Variable], epts: list[Variable]) -> list[Variable]:
                return user_op(*inps[:n], *epts, return_list=True)

        def default_rops(fs: list[Variable]) -> list[Any]:
            if not wrt:
                return [None] * len(fs)
            return Rop(
                list(fs),
                wrt,
                points,
                disconnected_outputs="ignore",
                return_disconnected="Disconnected",
            )

        pairs: list[tuple[Variable, Variable | None]]
        if _is_default(spec):
            pairs = [
                self._filter_rop_var(r, o)
                for r, o in zip(default_rops(local_outputs), local_outputs, strict=True)
            ]
        elif isinstance(spec, Variable):
            if not _is_special(spec):
                raise ValueError(self.STYPE_ERR_MSG % spec.type)
            pairs = [self._filter_rop_var(spec.type(), o) for o in local_outputs]
        elif isinstance(spec, list | tuple):
            if len(spec) != n_out:
                raise ValueError(f"Need to override {n_out} Rop, got {len(spec)}", spec)
            outs = [o for o, s in zip(local_outputs, spec, strict=True) if _is_default(s)]
            defaults = iter(default_rops(outs) if outs else [])
            pairs = []
            for o, s in zip(local_outputs, spec, strict=True):
                if _is_default(s):
                    pairs.append(self._filter_rop_var(next(defaults), o))
                elif isinstance(s, Variable):
                    if not _is_special(s):
                        raise ValueError(self.STYPE_ERR_MSG % s.type)
                    pairs.append(self._filter_rop_var(s.type(), o))
                elif callable(s):
                    pairs.append(self._filter_rop_var(s(local_inputs, eval_points), o))
                else:
                    raise TypeError(type_err % (s,))
        else:
            if not callable(spec):
                raise TypeError(type_err % (spec,))
            result = spec(local_inputs, eval_points)
            if not isinstance(result, list):
                raise TypeError(
                    f'Rop overriding function should return a list, got "{type(result)}"'
                )
            if len(result) != n_out:
                raise ValueError(
                    f"Rop overriding function {spec} should return list of {n_out} outputs, "
                    f"got {len(result)}"
                )
            pairs = [self._filter_rop_var(r, o) for r, o in zip(result, local_outputs, strict=True)]
        self._rop_op = self._sub_op([*local_inputs, *points], [r for r, _ in pairs], "rop")
        self._rop_stypes = [s for _, s in pairs]

    # ------------------------------------------------------------------ the Op

    def make_node(self, *inputs: Any) -> Apply:
        """The node on ``inputs`` (one per explicit input, of the inner inputs' types), with
        the shared variables the inner graph uses appended."""
        n = self._n_explicit
        if len(inputs) != n:
            raise ValueError(
                f"Expected {n} inputs, got {len(inputs)}: {self} was built from "
                f"{n} input(s) ({', '.join(str(t) for t in self.input_types)}); shared "
                "variables are added by the Op itself"
            )
        converted = []
        for i, (v, inner) in enumerate(zip(inputs, self.inner_inputs, strict=False)):
            try:
                converted.append(inner.type.filter_variable(v))
            except TypeError as exc:
                got = v.type if isinstance(v, Variable) else type(v).__name__
                raise TypeError(
                    f"{self}: input {i} ({v}) has type {got}, but the inner graph's input {i} "
                    f"({inner}) has type {inner.type}.\nHINT: convert it first (e.g. "
                    "opgraph.tensor.cast for the dtype, patternbroadcast/unbroadcast for the "
                    f"broadcastable pattern). The conversion said: {exc}"
                ) from exc
        return Apply(self, [*converted, *self.shared_inputs], [t() for t in self.output_types])

    def _check_unused_inputs(self) -> None:
        if self._unused_checked:
            return
        how = getattr(self, "_unused_policy", None) or self.kwargs.get("on_unused_input")
        how = how or config.on_unused_input
        if how not in ("raise", "warn", "ignore"):
            raise ValueError(
                f"Invalid value for keyword on_unused_input of OpFromGraph: {how!r}.\n"
                "Valid values are 'raise', 'warn', and 'ignore'."
            )
        if how != "ignore":
            used = set(ancestors(self.inner_outputs, blockers=self.inner_inputs))
            for i, v in enumerate(self.inner_inputs[: self._n_explicit]):
                if v in used:
                    continue
                msg = (
                    f"{self} was asked to compute its outputs from inputs that include one "
                    f"they do not use: the input at index {i} ({v}). Pass "
                    "on_unused_input='ignore' (or 'warn') to OpFromGraph if this is intended."
                )
                if how == "raise":
                    raise UnusedInputError(msg)
                warnings.warn(msg, stacklevel=2)
        self._unused_checked = True

    def prepare_node(self, node: Apply, storage_map: Any, compute_map: Any, impl: Any) -> None:
        """Compile the inner graph with the mode of the function being linked (once per
        mode) and remember which compiled function this node runs."""
        self._check_unused_inputs()
        self._node_functions[node] = self.inner_function()

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        fn = self._node_functions.get(node)
        if fn is None:  # a node run outside a compiled function (test values, folding)
            self._check_unused_inputs()
            fn = self._node_functions[node] = self.inner_function()
        cells = fn.input_cells
        for cell, value in zip(cells, inputs, strict=True):
            cell[0] = value
        try:
            fn.run()
            results = [cell[0] for cell in fn.output_cells]
        finally:
            fn.clear()
        for k, value in enumerate(results):
            if _must_copy(value, [*inputs, *results[:k]]):
                value = _copy(value)
                results[k] = value
            output_storage[k][0] = value

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        """The inner graph's shapes (each inner Op's ``infer_shape``, else ``Shape_i`` of the
        inner variable), cloned with the node's inputs in place of the inner inputs."""
        shape_of: dict[Variable, tuple[Any, ...]] = {}
        for v, shp in zip(self.inner_inputs, input_shapes, strict=True):
            if shp is not None and isinstance(v.type, TensorType):
                shape_of[v] = tuple(shp)

        def shape_of_var(v: Variable) -> tuple[Any, ...] | None:
            if v in shape_of or not isinstance(v.type, TensorType):
                return shape_of.get(v)
            if isinstance(v, Constant):
                shape_of[v] = tuple(np.shape(v.data))
            else:
                shape_of[v] = tuple(shape_i(v, i) for i in range(v.type.ndim))
            return shape_of[v]

        for inner in io_toposort(self.inner_inputs, self.inner_outputs):
            in_shapes = [shape_of_var(v) for v in inner.inputs]
            try:
                out_shapes = inner.op.infer_shape(inner, in_shapes)
            except (MethodNotDefined, NotImplementedError):
                out_shapes = [None] * len(inner.outputs)
            for out, shp in zip(inner.outputs, out_shapes, strict=True):
                if shp is not None and isinstance(out.type, TensorType):
                    shape_of[out] = tuple(shp)
        out_shapes = [shape_of_var(o) for o in self.inner_outputs]
        # Substitute the outer inputs in every dimension that refers to the inner graph;
        # dimensions given by the caller are kept as they are (the clone stops at them).
        symbolic = [d for shp in out_shapes if shp for d in shp if isinstance(d, Variable)]
        if not symbolic:
            return out_shapes
        replace: dict[Variable, Variable] = dict(zip(self.inner_inputs, node.inputs, strict=True))
        for shp in input_shapes:
            for d in shp or ():
                if isinstance(d, Variable) and d not in replace:
                    replace[d] = d
        cloned = iter(clone_replace(symbolic, replace=replace))
        return [
            None
            if shp is None
            else tuple(next(cloned) if isinstance(d, Variable) else d for d in shp)
            for shp in out_shapes
        ]

    def connection_pattern(self, node: Apply | None) -> list[list[bool]]:
        """Which outputs each input (shared ones included) is connected to: the given
        pattern, else Theano's rule (the inner graph's pattern, plus the inputs whose
        gradient uses an output, minus those whose gradient is overridden as disconnected)."""
        if self._connection_pattern is not None:
            return [list(row) for row in self._connection_pattern]
        n_in, n_out = len(self.inner_inputs), len(self.inner_outputs)
        pattern = _io_connection_pattern(self.inner_inputs, self.inner_outputs)
        try:
            lop = self.get_lop_op()
        except NullTypeGradError:
            return pattern  # no gradient to consult: the inner graph's pattern alone
        grad_pattern = _io_connection_pattern(lop.inner_inputs[n_in:], lop.inner_outputs)
        for i, special in enumerate(self._lop_stypes):
            if special is not None and isinstance(special.type, DisconnectedType):
                pattern[i] = [False] * n_out
            for o in range(n_out):
                pattern[i][o] = pattern[i][o] or grad_pattern[o][i]
        return pattern

    def _fit(self, v: Any, slot: Variable, like: Variable) -> Variable:
        """``v`` (an outer gradient or eval point) as a value for the sub-Op input ``slot``:
        special or missing ones become zeros like ``like``; dtypes are cast to the slot's."""
        if v is None or _is_special(v):
            v = _zeros_like(like)
        if (
            isinstance(slot.type, TensorType)
            and isinstance(v.type, TensorType)
            and v.type.dtype != slot.type.dtype
        ):
            v = cast(v, slot.type.dtype)
        return v

    def L_op(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable]:
        lop = self.get_lop_op()
        n_in, n_out = len(self.inner_inputs), len(self.inner_outputs)
        slots = lop.inner_inputs[n_in + n_out : n_in + 2 * n_out]
        grads = [self._fit(g, s, o) for g, s, o in zip(output_grads, slots, outputs, strict=True)]
        result = lop(*inputs, *outputs, *grads, return_list=True)
        return [r if s is None else s for r, s in zip(result, self._lop_stypes, strict=True)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        return self.L_op(inputs, self(*inputs[: self._n_explicit], return_list=True), output_grads)

    def R_op(
        self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]
    ) -> list[Variable | None]:
        rop = self.get_rop_op()
        n = self._n_explicit
        slots = iter(rop.inner_inputs[len(self.inner_inputs) :])
        points = [
            self._fit(e, next(slots), x)
            for x, e, inner in zip(inputs[:n], eval_points[:n], self.inner_inputs, strict=False)
            if isinstance(inner.type, TensorType)
        ]
        result = rop(*inputs, *points, return_list=True)
        return [r if s is None else s for r, s in zip(result, self._rop_stypes, strict=True)]
