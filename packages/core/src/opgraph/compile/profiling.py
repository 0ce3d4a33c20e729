"""Profiling compiled functions: time per Op class, per Op and per node, calls, compile time.

Turn it on with ``function(..., profile=True)``, ``mode="PROFILE_MODE"`` or
``OPGRAPH_FLAGS=profile=True`` and read it with ``f.profile.summary()``, which prints
Theano's layout: a ``Function profiling`` header, then ``Class``, ``Ops`` and ``Apply``
tables. When the function's linker has a kernel registry, nodes that ran their Op's
``perform`` because the backend had no kernel are marked ``[py-fallback]``.

A node whose thunk runs a compiled inner graph (Scan: ``thunk.inner_function``) whose
function has a profile of its own gets, after the tables, Theano's ``Scan overhead:`` line and
a ``Scan Op profiling ( scan_fn )`` block with the inner graph's per-node tables.
"""

from __future__ import annotations

import atexit
import sys
from collections.abc import Sequence
from typing import IO, Any

from opgraph.graph.basic import Apply
from opgraph.link.dispatch import RunsPerform

__all__ = ["ProfileStats"]

_atexit_list: list[ProfileStats] = []
_atexit_registered = False


def _print_at_exit() -> None:
    for stats in _atexit_list:
        if stats.fct_callcount or stats.compile_time:
            stats.summary(file=sys.stderr)


class ProfileStats:
    """Timings of one or more compiled functions (Theano's ``ProfileStats``).

    One object may be shared by several functions (``function(..., profile=stats)``); its
    tables then cover all of them.

    Parameters
    ----------
    atexit_print
        Print the summary to stderr when the process exits (as ``config.profile`` does).
    message
        Shown on the ``Message:`` line (default: the function's name).
    """

    def __init__(self, atexit_print: bool = False, message: str | None = None) -> None:
        self.message = message
        self.compile_time = 0.0
        self.rewriter_time = 0.0
        self.linker_time = 0.0
        self.fct_callcount = 0
        self.fct_call_time = 0.0
        self.vm_call_time = 0.0
        self.nb_nodes = 0
        self.apply_time: dict[Apply, float] = {}
        self.apply_callcount: dict[Apply, int] = {}
        self.apply_impl: dict[Apply, str] = {}
        self.apply_index: dict[Apply, int] = {}
        self.py_fallback: set[Apply] = set()
        self.kernel_backend: str | None = None
        #: Nodes running a compiled inner graph (Scan) -> its InnerFunction.
        self.inner_functions: dict[Apply, Any] = {}
        if atexit_print:
            global _atexit_registered
            _atexit_list.append(self)
            if not _atexit_registered:
                atexit.register(_print_at_exit)
                _atexit_registered = True

    # Theano's name for the rewrite time.
    @property
    def optimizer_time(self) -> float:
        return self.rewriter_time

    # --- recording

    def record_nodes(self, order: Sequence[Apply], thunks: Sequence[Any], backend: str) -> None:
        """Remember each node's position and implementation (kernel backend, ``Py``, fallback)."""
        self.nb_nodes += len(order)
        for i, (node, thunk) in enumerate(zip(order, thunks)):
            self.apply_index[node] = i
            kernel = getattr(thunk, "kernel", None)
            if kernel is not None:  # perform on purpose shows as Py, unmarked
                ran_perform = isinstance(kernel.impl, RunsPerform) or getattr(
                    thunk, "runs_perform", False
                )
                self.apply_impl[node] = "Py" if ran_perform else str(kernel.backend)
                self.kernel_backend = str(kernel.backend)
            else:
                self.apply_impl[node] = "Py"
            if getattr(thunk, "py_fallback", False):
                self.py_fallback.add(node)
                self.kernel_backend = self.kernel_backend or backend
            self.apply_time.setdefault(node, 0.0)
            self.apply_callcount.setdefault(node, 0)
            inner = getattr(thunk, "inner_function", None)
            if inner is not None:
                self.inner_functions[node] = inner

    def add_apply(self, node: Apply, seconds: float, calls: int) -> None:
        """Add ``seconds`` and ``calls`` to ``node``'s totals."""
        self.apply_time[node] = self.apply_time.get(node, 0.0) + seconds
        self.apply_callcount[node] = self.apply_callcount.get(node, 0) + calls

    # --- aggregates

    def _group(self, key: Any) -> dict[Any, list[Any]]:
        """``{key(node): [time, calls, applies, impl]}``."""
        out: dict[Any, list[Any]] = {}
        for node, t in self.apply_time.items():
            entry = out.setdefault(key(node), [0.0, 0, 0, set()])
            entry[0] += t
            entry[1] += self.apply_callcount.get(node, 0)
            entry[2] += 1
            entry[3].add(self._impl(node))
        return out

    def _impl(self, node: Apply) -> str:
        return self.apply_impl.get(node, "Py")

    def class_time(self) -> dict[type, float]:
        """Seconds per Op class."""
        return {k: v[0] for k, v in self._group(lambda n: type(n.op)).items()}

    def op_time(self) -> dict[Any, float]:
        """Seconds per Op (equal Ops together)."""
        return {k: v[0] for k, v in self._group(lambda n: n.op).items()}

    def thunk_time(self) -> float:
        """Seconds spent in all nodes."""
        return sum(self.apply_time.values())

    # --- printing

    def summary(
        self, file: IO[str] | None = None, n_ops_to_print: int = 20, n_apply_to_print: int = 20
    ) -> None:
        """Print the header, then the Class, Ops and Apply tables (Theano's layout)."""
        file = sys.stdout if file is None else file
        self.summary_function(file)
        if self.fct_callcount == 0 or not self.apply_time:
            print("  No execution time accumulated (the function was never called).", file=file)
            return
        self.summary_class(file, n_ops_to_print)
        self.summary_ops(file, n_ops_to_print)
        self.summary_nodes(file, n_apply_to_print)
        if self.py_fallback:
            print(
                f"  [py-fallback]: {len(self.py_fallback)} node(s) ran their Op's perform "
                f"because the {self.kernel_backend} backend has no kernel for them.",
                file=file,
            )
        self.summary_inner(file, n_ops_to_print, n_apply_to_print)

    # --- inner graphs (Scan)

    def inner_profiles(self) -> dict[Apply, ProfileStats | None]:
        """``{node: the profile of its inner function}`` (None: compiled without one) for
        the nodes that ran an inner graph, after moving the inner VMs' pending per-node
        times into those profiles."""
        out: dict[Apply, ProfileStats | None] = {}
        for node, inner in self.inner_functions.items():
            fn = getattr(inner, "function", None)
            prof = getattr(fn, "profile", None)
            if isinstance(prof, ProfileStats):
                update = getattr(getattr(inner, "vm", None), "update_profile", None)
                if update is not None:
                    update(prof)
                out[node] = prof
            else:
                out[node] = None
        return out

    def summary_inner(self, file: IO[str], n_ops: int = 20, n_apply: int = 20) -> None:
        """Theano's ``Scan overhead:`` table, then one ``Scan Op profiling`` block (header,
        Class, Ops and Apply tables of the inner graph) per loop node."""
        ran = {n: p for n, p in self.inner_profiles().items() if self.apply_callcount.get(n)}
        if not ran:
            return
        print("", file=file)
        print("Scan overhead:", file=file)
        print(
            "<Scan op time(s)> <sub scan fct time(s)> <sub scan op time(s)> <sub scan fct "
            "time(% scan op time)> <sub scan op time(% scan op time)> <node>",
            file=file,
        )
        total = [0.0, 0.0, 0.0]
        for node, prof in ran.items():
            outer_t = self.apply_time.get(node, 0.0)
            if prof is None:
                print(
                    "  One scan node does not have its inner profile enabled: its inner graph "
                    "was compiled without a profile. HINT: compile with "
                    "mode='PROFILE_MODE' or the flag profile=True.",
                    file=file,
                )
                continue
            op_t = prof.thunk_time()
            fct_t = prof.vm_call_time or op_t
            if outer_t <= 0:
                print(" The node took 0s, so we can not compute the overhead", node, file=file)
                continue
            total = [total[0] + outer_t, total[1] + fct_t, total[2] + op_t]
            print(
                f"      {outer_t:5.1f}s  {fct_t:5.1f}s  {op_t:5.1f}s  "
                f"{fct_t / outer_t * 100:5.1f}%  {op_t / outer_t * 100:5.1f}% {node}",
                file=file,
            )
        if total[0] > 0:
            print(
                f"total {total[0]:5.1f}s  {total[1]:5.1f}s  {total[2]:5.1f}s  "
                f"{total[1] / total[0] * 100:5.1f}%  {total[2] / total[0] * 100:5.1f}%",
                file=file,
            )
        for node, prof in ran.items():
            if prof is not None:
                self._summary_inner_block(file, node, prof, n_ops, n_apply)

    def _summary_inner_block(
        self, file: IO[str], node: Apply, prof: ProfileStats, n_ops: int, n_apply: int
    ) -> None:
        """One ``Scan Op profiling ( name )`` block: the loop's calls, steps and time (from
        this profile), the inner graph's VM time, then the inner per-node tables."""
        calls = self.apply_callcount.get(node, 0)
        call_time = self.apply_time.get(node, 0.0)
        # Each inner node runs once per step; a loop may also record its steps itself.
        steps = getattr(prof, "nbsteps", 0) or max(prof.apply_callcount.values(), default=0)
        vm_time = prof.vm_call_time or prof.thunk_time()
        name = getattr(node.op, "name", None)
        print("", file=file)
        print(f"Scan Op profiling ( {name} )" if name else "Scan Op profiling", file=file)
        print("==================", file=file)
        print(f"  Message: {prof.message}", file=file)
        print(
            f"  Time in {calls} calls of the op (for a total of {steps} steps) {call_time:e}s",
            file=file,
        )
        print("", file=file)
        share = vm_time * 100 / call_time if call_time > 0 else 0.0
        print(f"  Total time spent in calling the VM {vm_time:e}s ({share:.3f}%)", file=file)
        over = 100.0 - share if call_time > 0 else 100.0
        print(
            f"  Total overhead (computing slices..) {call_time - vm_time:e}s ({over:.3f}%)",
            file=file,
        )
        print("", file=file)
        if not prof.apply_time or not any(prof.apply_callcount.values()):
            print("  No execution time accumulated in the inner graph.", file=file)
            return
        prof.summary_class(file, n_ops)
        prof.summary_ops(file, n_ops)
        prof.summary_nodes(file, n_apply)
        prof.summary_inner(file, n_ops, n_apply)  # loops nested in the inner graph

    def summary_function(self, file: IO[str]) -> None:
        """The ``Function profiling`` header."""
        call, fn_time, thunks = self.fct_call_time, self.vm_call_time, self.thunk_time()

        def pct(t: float) -> str:
            return f"{100 * t / call:.3f}%" if call > 0 else "0.000%"

        print("Function profiling", file=file)
        print("==================", file=file)
        print(f"  Message: {self.message}", file=file)
        print(f"  Time in {self.fct_callcount} calls to Function.__call__: {call:e}s", file=file)
        if call > 0:
            print(f"  Time in Function.fn.__call__: {fn_time:e}s ({pct(fn_time)})", file=file)
            print(f"  Time in thunks: {thunks:e}s ({pct(thunks)})", file=file)
        print(f"  Total compile time: {self.compile_time:e}s", file=file)
        print(f"    Number of Apply nodes: {self.nb_nodes}", file=file)
        print(f"    Rewriter time: {self.rewriter_time:e}s", file=file)
        print(
            f"    Linker time (includes C, CUDA code generation/compiling): {self.linker_time:e}s",
            file=file,
        )
        print("", file=file)

    def _table(
        self,
        file: IO[str],
        title: str,
        rows: list[tuple[str, float, int, int, str]],
        n: int,
        what: str,
        with_apply: bool = True,
    ) -> None:
        total = self.thunk_time() or 1e-300
        rows.sort(key=lambda r: r[1], reverse=True)
        print(title, file=file)
        print("-" * max(3, len(title)), file=file)
        head = ["<% time>", "<sum %>", "<apply time>", "<time per call>"]
        if with_apply:
            head += ["<type>", "<#call>", "<#apply>", f"<{what} name>"]
        else:
            head += ["<#call>", "<id>", f"<{what} name>"]
        print(" ".join(head), file=file)
        cumulative = 0.0
        for name, t, calls, applies, impl in rows[:n]:
            cumulative += t
            per_call = t / calls if calls else 0.0
            line = (
                f"  {100 * t / total:5.1f}%   {100 * cumulative / total:5.1f}%   "
                f"{t:8.3f}s     {per_call:9.2e}s "
            )
            if with_apply:
                line += f"    {impl:>3}   {calls:6d}   {applies:5d}   {name}"
            else:
                line += f" {calls:6d}  {impl:>4}   {name}"
            print(line, file=file)
        rest = rows[n:]
        rest_time = sum(r[1] for r in rest)
        plural = {"Class": "Classes", "Op": "Ops", "Apply": "Apply instances"}[what]
        print(
            f"   ... (remaining {len(rest)} {plural} account for "
            f"{100 * rest_time / total:6.2f}%({rest_time:.2f}s) of the runtime)",
            file=file,
        )
        print("", file=file)

    def summary_class(self, file: IO[str], n: int = 20) -> None:
        """Time per Op class."""
        rows = [
            (f"{cls.__module__}.{cls.__qualname__}", t, c, a, "/".join(sorted(impl)))
            for cls, (t, c, a, impl) in self._group(lambda n: type(n.op)).items()
        ]
        self._table(file, "Class", rows, n, "Class")

    def summary_ops(self, file: IO[str], n: int = 20) -> None:
        """Time per Op."""
        fallback_ops = {node.op for node in self.py_fallback}
        rows = [
            (
                str(op) + (" [py-fallback]" if op in fallback_ops else ""),
                t,
                c,
                a,
                "/".join(sorted(impl)),
            )
            for op, (t, c, a, impl) in self._group(lambda n: n.op).items()
        ]
        self._table(file, "Ops", rows, n, "Op")

    def summary_nodes(self, file: IO[str], n: int = 20) -> None:
        """Time per Apply node, with its toposort index."""
        rows = []
        for node, t in self.apply_time.items():
            name = str(node) + (" [py-fallback]" if node in self.py_fallback else "")
            idx = self.apply_index.get(node, -1)
            rows.append((name, t, self.apply_callcount.get(node, 0), 1, str(idx)))
        self._table(file, "Apply", rows, n, "Apply", with_apply=False)

    def __repr__(self) -> str:
        return (
            f"ProfileStats(message={self.message!r}, calls={self.fct_callcount}, "
            f"nodes={self.nb_nodes})"
        )
