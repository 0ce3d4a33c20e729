"""Moving graphs to the GPU: the lifting pass, the lifters, and the transfer clean-up.

:class:`GpuLift` runs after the CPU rewrites have fused elementwise graphs (stage
``gpuarray``, between ``fusion`` and the in-place passes). It walks the graph in order and
replaces each node that has a lifter (:func:`register_lifter`) and only float32, float16
(or integer and bool) tensors by its GPU version; inputs coming from a lifted node are taken
on the device directly, so transfers stay at the boundaries: ``GpuFromHost`` where host data
enters, ``HostFromGpu`` where a host op or a function output reads GPU data. A node it
keeps on the CPU is logged (logger ``opgraph_cuda.opt``) with its reason, and
``assert_no_cpu_op`` turns that into a warning or an error. Last it cuts
``GpuFromHost(HostFromGpu(x))`` and ``HostFromGpu(GpuFromHost(x))`` pairs.

float16 is stored on the GPU and computed in float32 (Theano's gpuarray rule), by the ops
whose lifters say they can (``register_lifter(..., float16=True)``: elementwise graphs,
reductions, views, alloc, shapes, ``x[idx]``); a float16 node of any other op (cuBLAS
products, softmax, random draws) stays on the CPU, and the log says so.

When it acts (flag ``cuda__lift``): ``auto``, when ``device`` names a GPU or the graph
already holds GPU variables (a GPU shared variable); ``always``; ``never``.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from opgraph import config
from opgraph.graph.basic import Apply, Variable
from opgraph.rewriting import RewriteSet
from opgraph.rewriting.basic import GraphRewriter, RewriteAbort
from opgraph.tensor.elemwise import DimShuffle
from opgraph.tensor.shape import Reshape, Shape, Shape_i
from opgraph.tensor.structure import Alloc
from opgraph.tensor.subtensor_basic import Subtensor
from opgraph.tensor.type import TensorType
from opgraph_cuda.ops import (
    GpuAlloc,
    GpuDimShuffle,
    GpuFromHost,
    GpuOp,
    GpuReshape,
    GpuSubtensor,
    HostFromGpu,
    as_gpuarray_variable,
    host_from_gpu,
)
from opgraph_cuda.runtime import GpuUnavailable, get_runtime, gpu_requested
from opgraph_cuda.type import GpuArrayType

__all__ = [
    "FLOAT16_LIFTERS",
    "LIFTERS",
    "SOURCE_LIFTERS",
    "CpuOpInGpuGraph",
    "GpuLift",
    "GpuRequired",
    "KeepOnCpu",
    "gpu_lift",
    "lifter_for",
    "load_lifters",
    "register_lifter",
    "rewrites",
]

#: The package's rewrites besides the lift (in-place GPU Ops, ...): the lifter modules declare
#: them, the plugin's rewrite hook installs them.
rewrites = RewriteSet("opgraph-backend-cuda")

#: The modules whose import registers lifters (beside this one's view and shape lifters).
LIFTER_MODULES = (
    "opgraph_cuda.elemwise",
    "opgraph_cuda.blas",
    "opgraph_cuda.nnet",
    "opgraph_cuda.subtensor",
    "opgraph_cuda.rng_mrg",
)

_log = logging.getLogger("opgraph_cuda.opt")

#: ``lifter(node, inputs) -> outputs | None`` by CPU Op class; see :func:`register_lifter`.
Lifter = Callable[[Apply, Sequence[Variable]], "Sequence[Variable] | None"]
LIFTERS: dict[type, Lifter] = {}
#: Lifters of ops that make float32 data from host bookkeeping alone (a random draw from an
#: integer state): their nodes move even when no input is on the GPU or float32.
SOURCE_LIFTERS: set[Lifter] = set()
#: Lifters whose GPU ops take float16 (stored as such, computed in float32).
FLOAT16_LIFTERS: set[Lifter] = set()
#: Dtypes that move to the GPU (float64 stays on the host, as Theano's float32 advice;
#: float16 only into the ops of :data:`FLOAT16_LIFTERS`).
MOVABLE_DTYPES = frozenset(
    {"float16", "float32", "int8", "int16", "int32", "int64"}
    | {"uint8", "uint16", "uint32", "uint64", "bool"}
)
#: Float dtypes whose data, read by a node, makes it move to the GPU.
DATA_DTYPES = ("float16", "float32")


class CpuOpInGpuGraph(AssertionError, RewriteAbort):
    """``assert_no_cpu_op=raise``: nodes of a GPU graph stay on the CPU (the message lists
    them with their reasons)."""


class GpuRequired(GpuUnavailable, RewriteAbort):
    """``force_device=True`` and no GPU can be used: compiling stops instead of falling back
    to the CPU."""


class KeepOnCpu(Exception):
    """Raised by a lifter to keep a node on the CPU; the message is the logged reason."""


def register_lifter(
    *op_classes: type, source: bool = False, float16: bool = False
) -> Callable[[Lifter], Lifter]:
    """Register ``lifter(node, inputs)`` for the CPU Op classes ``op_classes`` (and their
    subclasses without a lifter of their own).

    A node moves only when an input is on the GPU or reads float32/float16 data (integer
    bookkeeping stays on the host); ``source=True`` lifts the ops' nodes without either,
    for ops that make float32 data from host integers (``mrg_uniform``'s random draws).
    ``float16=True`` says the GPU ops it builds take float16 tensors (loaded into float32,
    stored rounded); without it a node with a float16 tensor stays on the CPU.

    ``inputs`` are ``node.inputs`` with every tensor moved to the GPU (a GPU variable, a
    GPU constant, or ``GpuFromHost`` of a host one); other inputs (scalars, index values)
    are unchanged. The lifter returns one variable per output of ``node`` (GPU variables,
    or host ones for outputs that stay on the host, such as a shape), or None to keep the
    node on the CPU (or raises :class:`KeepOnCpu` with the reason).
    """

    def decorator(lifter: Lifter) -> Lifter:
        for cls in op_classes:
            LIFTERS[cls] = lifter
        if source:
            SOURCE_LIFTERS.add(lifter)
        if float16:
            FLOAT16_LIFTERS.add(lifter)
        return lifter

    return decorator


def lifter_for(op: Any) -> Lifter | None:
    """The lifter of ``op``'s class (the nearest along its MRO), or None."""
    for cls in type(op).__mro__:
        found = LIFTERS.get(cls)
        if found is not None:
            return found
    return None


def _tensor_dtypes(node: Apply) -> list[str]:
    return [
        v.type.dtype
        for v in (*node.inputs, *node.outputs)
        if isinstance(v.type, TensorType | GpuArrayType)
    ]


def _on_gpu(v: Variable) -> bool:
    return isinstance(v.type, GpuArrayType) or (
        v.owner is not None and isinstance(v.owner.op, HostFromGpu)
    )


def _lift_wanted(fgraph: Any) -> bool:
    mode = config.cuda__lift
    if mode == "never":
        return False
    if mode == "always" or gpu_requested():
        return True
    return any(isinstance(v.type, GpuArrayType) for v in fgraph.variables)


class GpuLift(GraphRewriter):
    """Move every node that can run on the GPU there (see the module's docstring)."""

    name = "gpu_lift"

    def apply(self, fgraph: Any) -> None:
        if not _lift_wanted(fgraph):
            return
        try:
            get_runtime()
        except GpuUnavailable as exc:
            if config.force_device:
                raise GpuRequired(f"{exc}\n(force_device=True: no fallback to the CPU)") from exc
            warnings.warn(f"graphs stay on the CPU: {exc}", RuntimeWarning, stacklevel=2)
            return
        kept: list[tuple[Apply, str]] = []
        for node in list(fgraph.toposort()):
            if node not in fgraph.apply_nodes or isinstance(node.op, GpuOp):
                continue
            reason = self._lift(fgraph, node)
            if reason is not None:
                kept.append((node, reason))
        cut_transfers(fgraph)
        _report(kept)

    def _lift(self, fgraph: Any, node: Apply) -> str | None:
        """Replace ``node`` by its GPU version; the reason it stays, or None."""
        lifter = lifter_for(node.op)
        dtypes = _tensor_dtypes(node)
        if not dtypes:
            return None  # no tensors: nothing to move (random states, scalars, ...)
        if lifter is None:
            return f"{type(node.op).__name__} has no GPU implementation"
        bad = sorted(set(dtypes) - MOVABLE_DTYPES)
        if bad:
            return f"{', '.join(bad)} stays on the CPU (only float32 graphs move to the GPU)"
        if "float16" in dtypes and lifter not in FLOAT16_LIFTERS:
            return f"{type(node.op).__name__} has no float16 GPU version"
        if (
            lifter not in SOURCE_LIFTERS
            and not any(map(_on_gpu, node.inputs))
            and not any(
                isinstance(v.type, TensorType) and v.type.dtype in DATA_DTYPES for v in node.inputs
            )
        ):
            # Theano's rule: a node with no GPU input moves only when it reads float32 (or
            # float16) data, which is then transferred; integer bookkeeping (shapes, indices,
            # a batch size cast to float32) stays on the host, so no tiny transfer waits
            # mid-graph.
            return None
        inputs = [
            as_gpuarray_variable(v) if isinstance(v.type, TensorType | GpuArrayType) else v
            for v in node.inputs
        ]
        try:
            outs = lifter(node, inputs)
        except KeepOnCpu as exc:
            return str(exc)
        if outs is None:
            return f"the GPU version of {node.op} does not handle these inputs"
        if list(outs) == list(node.outputs):
            return None  # the lifter leaves this node as it is
        pairs = []
        for old, new in zip(node.outputs, outs, strict=True):
            if isinstance(new.type, GpuArrayType):
                new = host_from_gpu(new)
            pairs.append((old, new))
        try:
            fgraph.replace_all(pairs, reason=self.name)
        except TypeError as exc:
            return f"its GPU version's types differ: {exc}"
        return None


def cut_transfers(fgraph: Any) -> None:
    """Replace ``GpuFromHost(HostFromGpu(x))`` and ``HostFromGpu(GpuFromHost(x))`` by ``x``."""
    for node in list(fgraph.toposort()):
        if node not in fgraph.apply_nodes or not isinstance(node.op, GpuFromHost | HostFromGpu):
            continue
        inner = node.inputs[0].owner
        if inner is None or type(inner.op) is type(node.op):
            continue
        if isinstance(inner.op, GpuFromHost | HostFromGpu):
            x = inner.inputs[0]
            out = node.outputs[0]
            if x.type == out.type or x.type.broadcastable == out.type.broadcastable:
                try:
                    fgraph.replace(out, x, reason="cut_transfers")
                except TypeError:
                    continue


def _report(kept: list[tuple[Apply, str]]) -> None:
    """Log the nodes kept on the CPU; warn or raise under ``assert_no_cpu_op``."""
    for node, reason in kept:
        _log.info("%s stays on the CPU: %s", node.op, reason)
    action = config.assert_no_cpu_op
    if not kept or action == "ignore":
        return
    lines = "\n".join(f"  {node.op}: {reason}" for node, reason in kept)
    message = f"{len(kept)} node(s) stay on the CPU in a GPU graph:\n{lines}"
    if action == "raise":
        raise CpuOpInGpuGraph(message)
    warnings.warn(message, stacklevel=3)


gpu_lift = GpuLift()


def load_lifters() -> None:
    """Import the modules of :data:`LIFTER_MODULES`, which register their lifters."""
    import importlib

    for name in LIFTER_MODULES:
        importlib.import_module(name)


# ---- lifters of the view and shape ops


@register_lifter(DimShuffle, float16=True)
def _lift_dimshuffle(node: Apply, inputs: Sequence[Variable]) -> list[Variable]:
    return [GpuDimShuffle(node.op.input_broadcastable, node.op.new_order)(inputs[0])]


@register_lifter(Subtensor, float16=True)
def _lift_subtensor(node: Apply, inputs: Sequence[Variable]) -> list[Variable] | None:
    if type(node.op) is not Subtensor:
        return None
    return [GpuSubtensor(node.op.idx_list)(inputs[0], *node.inputs[1:])]


@register_lifter(Reshape, float16=True)
def _lift_reshape(node: Apply, inputs: Sequence[Variable]) -> list[Variable]:
    return [GpuReshape(node.op.ndim)(inputs[0], node.inputs[1])]


@register_lifter(Alloc, float16=True)
def _lift_alloc(node: Apply, inputs: Sequence[Variable]) -> list[Variable]:
    return [GpuAlloc()(inputs[0], *node.inputs[1:])]


@register_lifter(Shape, Shape_i, float16=True)
def _lift_shape(node: Apply, inputs: Sequence[Variable]) -> list[Variable] | None:
    """A shape read off a GPU variable directly, instead of after a copy to the host."""
    if not _on_gpu(node.inputs[0]):
        return list(node.outputs)
    return [node.op(inputs[0])]
