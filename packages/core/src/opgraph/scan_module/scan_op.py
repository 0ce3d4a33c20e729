"""The Scan Op: a loop whose body is an inner graph (Theano's ``scan_module.scan_op.Scan``).

A Scan node runs its inner graph ``n_steps`` times. Each step reads one entry of every
sequence, past entries (taps) of every recurrent output, the current value of every shared
state and the non-sequences; it writes one entry of every recurrent and nit_sot output and
the new shared states. The layout is described by :class:`~opgraph.scan_module.scan_utils.ScanInfo`;
users build Scan nodes with :func:`opgraph.scan`, not directly.

The inner graph compiles once per mode (the mode of the function the node belongs to, so
DEBUG_MODE checks inner nodes too); the loop fills the inner function's cells and runs its
VM, without argument checks or copies. Recurrent outputs are written into buffers allocated
once per call (shorter, circular buffers when a rewrite found that only the last entries are
used).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from opgraph.compile.inner import InnerFunction, InnerGraphOp
from opgraph.compile.mode import Mode
from opgraph.graph.basic import Apply, Variable
from opgraph.graph.op import OutputStorage, Thunk
from opgraph.graph.traversal import ancestors, graph_inputs
from opgraph.link.utils import augment_exception
from opgraph.scan_module.scan_utils import ScanInfo, infer_inner_shapes
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.math import abs_
from opgraph.tensor.shape import shape_i
from opgraph.tensor.type import TensorType

__all__ = ["Scan"]


def _describe(value: Any) -> str:
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None:
        return f"shape {tuple(shape)}, dtype {dtype}"
    return type(value).__name__


def _owned_copy(value: Any) -> Any:
    """A value the loop may keep across steps (inner outputs are borrowed)."""
    if isinstance(value, np.ndarray):
        return value.copy()
    return value


class Scan(InnerGraphOp):
    """A loop over an inner graph (see the module docstring and :class:`ScanInfo`).

    Parameters
    ----------
    inputs, outputs
        The inner graph, in the order :class:`ScanInfo` gives.
    info
        The layout.
    mode
        The mode the inner graph compiles with (None: the outer function's).
    """

    inner_props = ("info",)

    def __init__(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        info: ScanInfo,
        mode: Mode | str | None = None,
    ) -> None:
        info.validate()
        n_in = info.n_inner_inputs
        if len(inputs) != n_in:
            raise ValueError(f"Scan: the layout needs {n_in} inner inputs, got {len(inputs)}")
        n_out = info.n_rec + info.n_nit_sot + info.n_shared_outs + int(info.as_while)
        if len(outputs) != n_out:
            raise ValueError(f"Scan: the layout needs {n_out} inner outputs, got {len(outputs)}")
        super().__init__(inputs, outputs, mode=mode)
        self.info = info
        self.name = info.name

    # ------------------------------------------------------------------ layout helpers

    @property
    def as_while(self) -> bool:
        return self.info.as_while

    def outer_input_index(self, k: int) -> int:
        """The outer input that inner input ``k`` reads from (printing's ``-> [id X]``)."""
        info = self.info
        if k < info.n_seqs:
            return 1 + k
        k -= info.n_seqs
        for j, taps in enumerate(info.rec_taps):
            if k < len(taps):
                return 1 + info.n_seqs + j
            k -= len(taps)
        return 1 + info.n_seqs + info.n_rec + k

    def inner_output_outer_index(self, k: int) -> int | None:
        """The outer output inner output ``k`` feeds (None for the ``until`` condition)."""
        return k if k < self.info.n_outer_outputs else None

    def __str__(self) -> str:
        kind = "do_while" if self.info.as_while else "for"
        return f"{kind}{{cpu,{self.info.name}}}"

    # ------------------------------------------------------------------ building the node

    def make_node(self, *inputs: Any) -> Apply:
        info = self.info
        expected = 1 + info.n_seqs + info.n_rec + info.n_shared_outs + info.n_non_seqs
        if len(inputs) != expected:
            raise TypeError(f"{self} takes {expected} inputs, got {len(inputs)}")
        outer = [as_tensor_variable(inputs[0])]
        if outer[0].ndim != 0 or outer[0].type.dtype not in _INT_DTYPES:
            raise TypeError(f"{self}: n_steps must be an integer scalar, got {outer[0].type}")
        inner = self.inner_inputs
        pos = 0
        for i in range(info.n_seqs):
            seq = as_tensor_variable(inputs[1 + i])
            want = inner[pos].type
            if not isinstance(seq.type, TensorType) or seq.ndim != want.ndim + 1:
                raise TypeError(
                    f"{self}: sequence {i} must have one more dimension than its entries "
                    f"({want}), got {seq.type}"
                )
            if seq.type.dtype != want.dtype:
                raise TypeError(
                    f"{self}: sequence {i} has dtype {seq.type.dtype}, its entries must be "
                    f"{want.dtype}"
                )
            outer.append(seq)
            pos += 1
        for j, taps in enumerate(info.rec_taps):
            init = as_tensor_variable(inputs[1 + info.n_seqs + j])
            want = self.inner_outputs[j].type
            if init.ndim != want.ndim + 1 or init.type.dtype != want.dtype:
                raise TypeError(
                    f"{self}: the initial values of recurrent output {j} must be a "
                    f"{want.ndim + 1}-d {want.dtype} tensor (one entry per lag), got {init.type}"
                )
            outer.append(init)
            pos += len(taps)
        rest = inputs[1 + info.n_seqs + info.n_rec :]
        for k, value in enumerate(rest):
            want = inner[pos + k].type
            var = value if isinstance(value, Variable) else want.make_constant(value)
            if var.type != want:
                try:
                    var = want.filter_variable(var)
                except TypeError as exc:
                    raise TypeError(
                        f"{self}: outer input {len(outer)} must be of type {want}, got {var.type}"
                    ) from exc
            outer.append(var)
        outs = []
        for j in range(info.n_rec):
            t = self.inner_outputs[j].type
            outs.append(TensorType(t.dtype, (False, *t.broadcastable))())
        for k in range(info.n_nit_sot):
            t = self.inner_outputs[info.n_rec + k].type
            outs.append(TensorType(t.dtype, (False, *t.broadcastable))())
        for k in range(info.n_shared_outs):
            outs.append(self.inner_outputs[info.n_rec + info.n_nit_sot + k].type())
        return Apply(self, outer, outs)

    # ------------------------------------------------------------------ running

    def make_thunk(
        self,
        node: Apply,
        storage_map: dict[Variable, list[Any]],
        compute_map: dict[Variable, list[bool]] | None,
        no_recycling: Sequence[Variable] = (),
        impl: str | None = None,
    ) -> Thunk:
        """A thunk running the loop with the inner graph compiled now, in the mode of the
        function being linked."""
        fn = self.inner_function()
        in_cells = [storage_map[v] for v in node.inputs]
        out_cells = [storage_map[v] for v in node.outputs]
        out_compute = [compute_map[v] for v in node.outputs] if compute_map is not None else []
        loop = self.run_loop

        def thunk() -> None:
            loop(fn, node, [c[0] for c in in_cells], out_cells)
            for c in out_compute:
                c[0] = True

        thunk.inputs = in_cells  # type: ignore[attr-defined]
        thunk.outputs = out_cells  # type: ignore[attr-defined]
        thunk.perform = self.perform  # type: ignore[attr-defined]
        thunk.lazy = False  # type: ignore[attr-defined]
        thunk.inner_function = fn  # type: ignore[attr-defined]
        return thunk

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: OutputStorage) -> None:
        self.run_loop(self.inner_function(), node, inputs, output_storage)

    def check_inputs(self, node: Apply, inputs: Sequence[Any]) -> tuple[int, list[Any]]:
        """Validate the outer values before the loop; return ``(n_steps, sequences)`` with
        the sequences reversed when ``n_steps`` is negative (a loop run backwards)."""
        info = self.info
        n = int(inputs[0])
        seqs = list(inputs[1 : 1 + info.n_seqs])
        if n < 0:
            n = -n
            seqs = [s[::-1] for s in seqs]
        for i, s in enumerate(seqs):
            if s.shape[0] < n:
                name = node.inputs[1 + i].name
                label = f"sequence {i}" + (f" ({name})" if name else "")
                raise ValueError(
                    f"{self}: {label} has {s.shape[0]} entries, but the loop runs {n} steps "
                    "(n_steps).\nHINT: pass a longer sequence or a smaller n_steps; a sequence "
                    "with taps loses max(taps) - min(taps) entries."
                )
        if info.reverse:
            seqs = [s[:n][::-1] for s in seqs]
        for j, lag in enumerate(info.rec_lags):
            init = inputs[1 + info.n_seqs + j]
            if init.shape[0] < lag:
                raise ValueError(
                    f"{self}: recurrent output {j} reads {lag} past entries (taps "
                    f"{list(info.rec_taps[j])}), but its initial value has only "
                    f"{init.shape[0]}.\nHINT: give outputs_info 'initial' a leading dimension "
                    f"of at least {lag}."
                )
        return n, seqs

    def run_loop(
        self,
        fn: InnerFunction,
        node: Apply,
        inputs: Sequence[Any],
        output_storage: OutputStorage,
    ) -> None:
        """Run the loop on ``inputs`` (outer values) and store the outer outputs."""
        info = self.info
        n, seqs = self.check_inputs(node, inputs)
        cells = fn.input_cells
        outs = fn.output_cells
        n_seqs, n_rec, n_nit = info.n_seqs, info.n_rec, info.n_nit_sot
        lags = info.rec_lags
        base = 1 + n_seqs
        # Recurrent buffers: the initial entries, then one entry per step.
        bufs: list[np.ndarray] = []
        sizes: list[int] = []
        for j in range(n_rec):
            init = inputs[base + j]
            lag = lags[j]
            full = lag + n
            size = info.buffer_size(j) or full
            size = max(min(size, full), lag + 1 if n else lag)
            out_type = node.outputs[j].type
            buf = np.empty((size, *init.shape[1:]), dtype=out_type.dtype)
            buf[:lag] = init[:lag]
            bufs.append(buf)
            sizes.append(size)
        nit_bufs: list[np.ndarray | None] = [None] * n_nit
        nit_sizes = [n if info.reverse else info.buffer_size(n_rec + k) or n for k in range(n_nit)]
        state_pos = n_seqs + sum(len(t) for t in info.rec_taps)
        n_shared = info.n_shared_outs
        states = self.initial_states(inputs[base + n_rec : base + n_rec + n_shared])
        non_seqs = inputs[base + n_rec + n_shared :]
        for k, value in enumerate(non_seqs):
            cells[state_pos + n_shared + k][0] = value
        tap_slots = []  # (cell, buffer index j, tap)
        pos = n_seqs
        for j, taps in enumerate(info.rec_taps):
            for tap in taps:
                tap_slots.append((cells[pos], j, tap))
                pos += 1
        seq_cells = cells[:n_seqs]
        state_cells = cells[state_pos : state_pos + n_shared]
        run = fn.run
        steps_done = n
        try:
            for t in range(n):
                for cell, s in zip(seq_cells, seqs):
                    cell[0] = s[t, ...]  # a 0-d array (not a NumPy scalar) for a vector
                for cell, j, tap in tap_slots:
                    cell[0] = bufs[j][(t + lags[j] + tap) % sizes[j], ...]
                for cell, value in zip(state_cells, states):
                    cell[0] = value
                try:
                    run()
                except Exception as exc:
                    where = f"(raised in step {t} of {n} of the loop {self})"
                    new = augment_exception(exc, where)
                    if new is exc:
                        raise
                    raise new from exc
                for j in range(n_rec):
                    value = outs[j][0]
                    buf = bufs[j]
                    if np.shape(value) != buf.shape[1:]:
                        raise ValueError(self._shape_error(node, j, value, buf.shape[1:], t))
                    buf[(t + lags[j]) % sizes[j]] = value
                for k in range(n_nit):
                    value = outs[n_rec + k][0]
                    nbuf = nit_bufs[k]
                    if nbuf is None:
                        dtype = node.outputs[n_rec + k].type.dtype
                        nbuf = np.empty((nit_sizes[k], *np.shape(value)), dtype=dtype)
                        nit_bufs[k] = nbuf
                    elif np.shape(value) != nbuf.shape[1:]:
                        raise ValueError(
                            self._shape_error(node, n_rec + k, value, nbuf.shape[1:], t)
                        )
                    nbuf[n - 1 - t if info.reverse else t % nit_sizes[k]] = value
                for k in range(n_shared):
                    states[k] = self.next_state(outs[n_rec + n_nit + k][0], states[k])
                if info.as_while and outs[-1][0]:
                    steps_done = t + 1
                    break
        finally:
            fn.clear()
        for j in range(n_rec):
            output_storage[j][0] = self._finish(bufs[j], lags[j] + steps_done, lags[j] + n)
        for k in range(n_nit):
            nbuf = nit_bufs[k]
            if nbuf is None:
                ndim = node.outputs[n_rec + k].type.ndim
                nbuf = np.zeros((0,) * ndim, dtype=node.outputs[n_rec + k].type.dtype)
            output_storage[n_rec + k][0] = self._finish(nbuf, steps_done, n)
        for k in range(n_shared):
            output_storage[n_rec + n_nit + k][0] = states[k]

    @staticmethod
    def initial_states(values: Sequence[Any]) -> list[Any]:
        """The states the loop starts from: copies of the arrays (the loop's inner graph may
        update a state in place, and the value given belongs to a shared variable or to
        the outer graph)."""
        return [_owned_copy(v) for v in values]

    @staticmethod
    def next_state(value: Any, previous: Any) -> Any:
        """The state after a step: the inner output itself when the step updated the state
        in place (no copy), else a copy (inner outputs are borrowed)."""
        if value is previous:
            return value
        return _owned_copy(value)

    def mutable_inputs(self) -> set[int]:
        """Inner inputs the inner graph may overwrite: the array states, which the loop
        owns (it copies them once per call)."""
        info = self.info
        first = info.n_seqs + sum(len(t) for t in info.rec_taps)
        return {
            first + k
            for k in range(info.n_shared_outs)
            if isinstance(self.inner_inputs[first + k].type, TensorType)
        }

    @staticmethod
    def _finish(buf: np.ndarray, used: int, full: int) -> np.ndarray:
        """The buffer as the output: cut to the entries written (a loop stopped by
        ``until``), or put in order when it is circular."""
        size = buf.shape[0]
        if size >= full:
            return buf[:used] if used < size else buf
        if used <= size:
            return buf[:used]
        pos = used % size
        return np.concatenate([buf[pos:], buf[:pos]]) if pos else buf

    def _shape_error(self, node: Apply, k: int, value: Any, want: tuple[int, ...], t: int) -> str:
        return (
            f"{self}: at step {t}, the step function's output {k} has {_describe(value)}, but "
            f"the loop's output holds entries of shape {tuple(want)} (set by the first step "
            "or by the initial value in outputs_info).\nHINT: a recurrent output must keep "
            "the shape of its initial value at every step."
        )

    # ------------------------------------------------------------------ calculus and shapes

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        """``[input][output]``: whether each outer output depends on each outer input,
        following the recurrences through the steps."""
        info = self.info
        n_in = len(node.inputs)
        n_out = len(node.outputs)
        inner_in = self.inner_inputs
        inner_out = self.inner_outputs
        # Which inner inputs each inner output reads directly.
        reads: list[set[int]] = []
        index = {v: i for i, v in enumerate(inner_in)}
        for out in inner_out:
            roots = {index[v] for v in ancestors([out]) if v in index}
            reads.append({self.outer_input_index(i) for i in roots})
        # Outer inputs feeding each outer output, closed over the recurrences: a recurrent
        # output (or shared state) also depends on whatever its own past values depend on.
        feeds_back = {1 + info.n_seqs + j: j for j in range(info.n_rec)}
        first_state = 1 + info.n_seqs + info.n_rec
        for k in range(info.n_shared_outs):
            feeds_back[first_state + k] = info.n_rec + info.n_nit_sot + k
        deps = [set(r) | {0} for r in reads[:n_out]]
        for outer_in, o in feeds_back.items():
            deps[o].add(outer_in)
        changed = True
        while changed:
            changed = False
            for o in range(n_out):
                extra = set()
                for i in deps[o]:
                    if i in feeds_back:
                        extra |= deps[feeds_back[i]]
                if info.as_while:
                    extra |= reads[-1]
                    for i in reads[-1]:
                        if i in feeds_back:
                            extra |= deps[feeds_back[i]]
                if not extra <= deps[o]:
                    deps[o] |= extra
                    changed = True
        return [[i in deps[o] for o in range(n_out)] for i in range(n_in)]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Sequence[Any]]) -> list[Any]:
        info = self.info
        n_steps = node.inputs[0]
        inner_shapes: list[Any] = []
        for i in range(info.n_seqs):
            inner_shapes.append(tuple(input_shapes[1 + i][1:]))
        for j, taps in enumerate(info.rec_taps):
            inner_shapes.extend([tuple(input_shapes[1 + info.n_seqs + j][1:])] * len(taps))
        rest = input_shapes[1 + info.n_seqs + info.n_rec :]
        inner_shapes.extend(tuple(s) if s is not None else None for s in rest)
        known = infer_inner_shapes(self.inner_inputs, self.inner_outputs, inner_shapes)
        inner_vars = set(ancestors(self.inner_outputs)) | set(self.inner_inputs)

        def usable(shape: Any) -> bool:
            if shape is None:
                return False
            dims = [d for d in shape if isinstance(d, Variable)]
            return not any(v in inner_vars for v in graph_inputs(dims))

        out: list[Any] = []
        for j, lag in enumerate(info.rec_lags):
            known_rows = not info.as_while and not info.buffer_size(j)
            rows = abs_(n_steps) + lag if known_rows else shape_i(node.outputs[j], 0)
            out.append((rows, *input_shapes[1 + info.n_seqs + j][1:]))
        for k in range(info.n_nit_sot):
            var = node.outputs[info.n_rec + k]
            known_rows = not info.as_while and not info.buffer_size(info.n_rec + k)
            rows = abs_(n_steps) if known_rows else shape_i(var, 0)
            shape = known[info.n_rec + k]
            rest_dims = (
                tuple(shape)
                if usable(shape)
                else tuple(shape_i(var, d) for d in range(1, var.ndim))
            )
            out.append((rows, *rest_dims))
        for k in range(info.n_shared_outs):
            var = node.outputs[info.n_rec + info.n_nit_sot + k]
            if isinstance(var.type, TensorType):
                out.append(tuple(input_shapes[first_state(info) + k]))
            else:
                out.append(None)
        return out

    def L_op(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable]:
        """Reverse mode through the loop: a second Scan running the steps backwards
        (built by ``scan_grad``, which registers itself in :data:`CALCULUS`)."""
        return CALCULUS["lop"](self, inputs, outputs, output_grads)

    def R_op(
        self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]
    ) -> list[Variable | None]:
        """Forward mode through the loop: a Scan carrying the tangents beside the values."""
        return CALCULUS["rop"](self, inputs, eval_points)


#: The gradient builders, registered by :mod:`opgraph.scan_module.scan_grad` (which builds
#: Scan nodes, so this module cannot import it).
CALCULUS: dict[str, Callable[..., Any]] = {}


def first_state(info: ScanInfo) -> int:
    """Index of the first shared-state outer input."""
    return 1 + info.n_seqs + info.n_rec


_INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
