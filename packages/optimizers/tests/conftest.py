"""Fixtures for the rewrite tests: compile a graph in the modes to compare and inspect it.

``rewrites_check`` (a :class:`RewriteCheck`) runs the one test every rewrite gets: the graph
compiled with the rewrite shows it applied (``applied(uses)``), its values equal the
unrewritten graph's (``optimizer=None``) in that mode and in DEBUG_MODE (which checks every
replacement it makes), and compiled with the rewrite excluded by name it is not applied.
Structure is checked in FAST_RUN without fusion and in-place, whose rewrites would hide the
ops behind ``Elemwise{Composite{...}}`` and ``[(0, 0)]`` names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from opgraph.compile.debugmode import DebugMode
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.graph.basic import Apply, Variable
from opgraph.rewriting import RewriteDatabaseQuery
from opgraph.scalar.basic import Composite, ScalarOp
from opgraph.tensor.elemwise import Elemwise
from opgraph.tensor.type import TensorType
from opgraph.testing import assert_allclose

#: FAST_RUN's rewrites up to specialize, without fusion and in-place (structure checks).
REWRITE_MODE = Mode(linker="py", optimizer="fast_run").excluding("fusion", "inplace")
#: The graph as built (values to compare with).
REFERENCE_MODE = Mode(linker="py", optimizer=None)
#: DEBUG_MODE checking every replacement against the replaced value (``perform`` only: the
#: kernels of an installed backend are that backend's tests' business).
DEBUG_MODE = DebugMode(optimizer="fast_run", linker="py")
#: Only the stages up to canonicalize (what specialize turns back, e.g. ``mul(-1, x)``).
CANONICALIZE_MODE = Mode(
    linker="py", optimizer=RewriteDatabaseQuery(include=["fast_run"], position_cutoff=1.4)
)


def scalar_ops_of(node: Apply) -> list[ScalarOp]:
    """The scalar ops an Elemwise node computes (those inside Composites, nested ones too)."""
    if not isinstance(node.op, Elemwise):
        return []
    found: list[ScalarOp] = []
    todo = [node.op.scalar_op]
    while todo:
        op = todo.pop()
        if isinstance(op, Composite):
            todo.extend(reversed([n.op for n in op.nodes]))
        else:
            found.append(op)
    return found


class Uses:
    """``uses(*kinds)``: True if a node's op (or an Elemwise's scalar op, inside Composites
    too) is an instance of one of ``kinds`` (Op or ScalarOp classes); ``uses.nodes`` lists
    the nodes and ``uses.count(kind)`` counts them."""

    def __init__(self, nodes: Sequence[Apply]) -> None:
        self.nodes = list(nodes)

    def __call__(self, *kinds: type) -> bool:
        return any(self._is(node, kinds) for node in self.nodes)

    def count(self, *kinds: type) -> int:
        """The number of nodes of one of ``kinds``."""
        return sum(1 for node in self.nodes if self._is(node, kinds))

    def scalar_count(self, *kinds: type) -> int:
        """The number of scalar ops of one of ``kinds`` the Elemwise nodes compute."""
        return sum(isinstance(s, kinds) for node in self.nodes for s in scalar_ops_of(node))

    @staticmethod
    def _is(node: Apply, kinds: tuple[type, ...]) -> bool:
        return isinstance(node.op, kinds) or any(isinstance(s, kinds) for s in scalar_ops_of(node))


class RewriteCheck:
    """Compile graphs in the modes the rewrite tests compare (see the module docstring)."""

    rewrite_mode = REWRITE_MODE
    reference_mode = REFERENCE_MODE
    canonicalize_mode = CANONICALIZE_MODE

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def compile(self, inputs: Sequence[Variable], outputs: Any, mode: Any = None) -> Any:
        """``function(inputs, outputs)`` in ``mode`` (default: the rewrite mode)."""
        return function(
            list(inputs), outputs, mode=mode or self.rewrite_mode, on_unused_input="ignore"
        )

    def nodes(self, f: Any) -> list[Apply]:
        """The compiled graph's nodes, in execution order."""
        return list(f.maker.fgraph.toposort())

    def uses(self, f: Any) -> Uses:
        """``uses(*kinds)`` over the compiled graph of ``f``."""
        return Uses(self.nodes(f))

    def inputs(
        self,
        dtype: str,
        patterns: Sequence[Sequence[bool]],
        low: float = 0.5,
        high: float = 2.0,
    ) -> tuple[list[Variable], list[np.ndarray]]:
        """Symbolic inputs of ``dtype`` with the broadcast ``patterns``, and values for them.

        Non-broadcastable dimensions have lengths 3, 4, 5...; values are uniform in
        ``[low, high)`` (integers for integer dtypes).
        """
        variables, values = [], []
        for k, pattern in enumerate(patterns):
            variables.append(TensorType(dtype, pattern)(f"x{k}"))
            shape = tuple(1 if b else 3 + d for d, b in enumerate(pattern))
            if np.dtype(dtype).kind in "iu":
                value = self.rng.integers(int(low), int(high) + 1, size=shape)
            else:
                value = self.rng.uniform(low, high, size=shape)
            values.append(np.asarray(value).astype(dtype))
        return variables, values

    def run(self, f: Any, values: Sequence[Any]) -> list[Any]:
        """Call ``f`` on copies of ``values`` (an in-place bug cannot hide) as a list."""
        out = f(*[np.array(v, copy=True) for v in values])
        return out if isinstance(out, list) else [out]

    def assert_same(self, got: Sequence[Any], expected: Sequence[Any], what: str) -> None:
        """Values and dtypes equal up to the dtype's tolerance."""
        assert len(got) == len(expected)
        for k, (g, e) in enumerate(zip(got, expected, strict=True)):
            g, e = np.asarray(g), np.asarray(e)
            assert g.dtype == e.dtype, f"{what}: output {k} has dtype {g.dtype}, expected {e.dtype}"
            assert_allclose(g, e, err_msg=f"{what}: output {k}")

    def rewrite(
        self,
        name: str,
        inputs: Sequence[Variable],
        outputs: Any,
        values: Sequence[Any],
        applied: Callable[[Uses], bool],
        also_exclude: Sequence[str] = (),
        debug_mode: bool = True,
        mode: Any = None,
    ) -> Any:
        """The test of rewrite ``name`` on one graph; return the rewritten function.

        ``applied(uses)`` says, from the ops of a compiled graph, whether the rewrite ran.
        ``also_exclude`` names other rewrites that would do the same job, excluded together
        with ``name`` when checking that excluding it turns it off. ``mode`` (default
        :data:`REWRITE_MODE`) must be built from a rewrite query.
        """
        mode = mode or self.rewrite_mode
        expected = self.run(self.compile(inputs, outputs, self.reference_mode), values)
        f = self.compile(inputs, outputs, mode)
        assert applied(self.uses(f)), f"{name} was not applied:\n{self._show(f)}"
        self.assert_same(self.run(f, values), expected, f"{name} (FAST_RUN)")
        off = self.compile(inputs, outputs, mode.excluding(name, *also_exclude))
        assert not applied(self.uses(off)), f"excluding {name} did not turn it off:\n" + (
            self._show(off)
        )
        self.assert_same(self.run(off, values), expected, f"{name} excluded")
        if debug_mode:
            dbg = self.compile(inputs, outputs, DEBUG_MODE)
            self.assert_same(self.run(dbg, values), expected, f"{name} (DEBUG_MODE)")
        return f

    @staticmethod
    def _show(f: Any) -> str:
        from opgraph.printing import debugprint

        return str(debugprint(f, file="str"))


@pytest.fixture
def rewrites_check(rng: np.random.Generator) -> RewriteCheck:
    """A :class:`RewriteCheck` with a seeded random generator."""
    return RewriteCheck(rng)


@pytest.fixture
def uses_of() -> Callable[[Any], Uses]:
    """``uses_of(f)(*kinds)``: whether the compiled graph of ``f`` uses any of ``kinds``."""
    return lambda f: Uses(list(f.maker.fgraph.toposort()))


def _loop_by_hand(
    step: Callable[..., Any],
    seqs: list[Any],
    inits: list[Any],
    non_seqs: list[Any],
    n_nit: int = 0,
) -> Any:
    """A Scan node built by hand (scan() itself hoists and deduplicates at build time): one
    sit_sot output per initial value, then ``n_nit`` nit_sot outputs; returns its outputs."""
    import opgraph.tensor as T
    from opgraph.scan_module.scan_op import Scan
    from opgraph.scan_module.scan_utils import ScanInfo
    from opgraph.tensor.axes import shape_padleft
    from opgraph.tensor.basic import unbroadcast

    x_in = [TensorType(s.type.dtype, s.type.broadcastable[1:])() for s in seqs]
    h_in = [i.type() for i in inits]
    ns_in = [v.type() for v in non_seqs]
    outs = step(*x_in, *h_in, *ns_in)
    outs = list(outs) if isinstance(outs, list) else [outs]
    info = ScanInfo(
        n_seqs=len(seqs),
        rec_taps=((-1,),) * len(inits),
        n_mit_sot=0,
        n_nit_sot=n_nit,
        n_shared_outs=0,
        n_non_seqs=len(non_seqs),
    )
    op = Scan(x_in + h_in + ns_in, outs, info)
    n = T.cast(seqs[0].shape[0], "int64")
    firsts = [unbroadcast(shape_padleft(i), 0) for i in inits]
    return op(n, *seqs, *firsts, *non_seqs, return_list=True)


@pytest.fixture
def loop_by_hand() -> Callable[..., Any]:
    """``loop_by_hand(step, seqs, inits, non_seqs, n_nit=0)``: the outputs of a Scan node
    built directly (no hoisting by scan()), so that a rewrite has something to move."""
    return _loop_by_hand
