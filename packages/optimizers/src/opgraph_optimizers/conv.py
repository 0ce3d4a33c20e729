"""The convolution rewrites (Theano 1.0's ``conv_groupopt``): abstract conv ops to GEMM ops.

``conv2d``/``conv3d`` and their gradients build the abstract ops of
:mod:`opgraph.tensor.nnet.abstract_conv`, which say *what* to compute. The rewrites here
replace them by the concrete correlation-by-GEMM ops of :mod:`opgraph.tensor.nnet.corr` and
:mod:`opgraph.tensor.nnet.corr3d`, which backend-c runs with its im2col + BLAS kernels (and
which run by ``perform`` everywhere else):

=====================================  ==============================================
abstract op                            replaced by
=====================================  ==============================================
``AbstractConv2d``                     ``CorrMM(img, kern[flip])``
``AbstractConv2d_gradWeights``         ``CorrMM_gradWeights(img, top, shape)[flip]``
``AbstractConv2d_gradInputs``          ``CorrMM_gradInputs(kern[flip], top, shape)``
``AbstractConv3d`` and its gradients   the same with ``Corr3dMM*``
=====================================  ==============================================

Subclasses count (the legacy ``ConvOp`` is an ``AbstractConv2d``), and a plain
``AbstractConv(convdim=...)`` by its ``convdim``.

``[flip]`` reverses the kernel's spatial axes when the abstract op has ``filter_flip=True``
(a true convolution): the concrete ops only correlate. The three rewrites form the local
group ``conv_opts`` (one walk over the graph), registered in ``specialize`` with the tags
``fast_run`` and ``conv_gemm``: ``optimizer_excluding=conv_gemm`` keeps the abstract ops
(they run by their own ``perform``).
"""

from __future__ import annotations

from typing import Any

from opgraph.graph.basic import Apply, Variable
from opgraph.rewriting import node_rewriter
from opgraph.rewriting.db import LocalGroupDB
from opgraph.tensor.basic import patternbroadcast
from opgraph.tensor.nnet.abstract_conv import (
    AbstractConv,
    AbstractConv_gradInputs,
    AbstractConv_gradWeights,
)
from opgraph.tensor.nnet.corr import CorrMM, CorrMM_gradInputs, CorrMM_gradWeights
from opgraph.tensor.nnet.corr3d import Corr3dMM, Corr3dMM_gradInputs, Corr3dMM_gradWeights
from opgraph.tensor.type import TensorType
from opgraph_optimizers.registry import rewrites

__all__ = [
    "conv_groupopt",
    "local_abstractconv_gemm",
    "local_abstractconv_gradinputs_gemm",
    "local_abstractconv_gradweights_gemm",
]

#: (abstract base class, number of spatial axes) -> the concrete op class computing it by GEMM.
CONCRETE: dict[tuple[type, int], type] = {
    (AbstractConv, 2): CorrMM,
    (AbstractConv, 3): Corr3dMM,
    (AbstractConv_gradWeights, 2): CorrMM_gradWeights,
    (AbstractConv_gradWeights, 3): Corr3dMM_gradWeights,
    (AbstractConv_gradInputs, 2): CorrMM_gradInputs,
    (AbstractConv_gradInputs, 3): Corr3dMM_gradInputs,
}


def _concrete(op: Any, base: type) -> Any:
    """The concrete op for abstract ``op`` (same border, strides, dilation, groups), or None.

    Any subclass of ``base`` counts: ``AbstractConv2d``, a plain ``AbstractConv(convdim=2)``,
    and the legacy ``ConvOp`` all become ``CorrMM``."""
    cls = CONCRETE.get((base, op.convdim)) if isinstance(op, base) else None
    if cls is None:
        return None
    kwargs = {
        "border_mode": op.border_mode,
        "subsample": op.subsample,
        "filter_dilation": op.filter_dilation,
        "num_groups": op.num_groups,
    }
    if op.unshared:
        kwargs["unshared"] = True
    return cls(**kwargs)


def _flip(kern: Variable, spatial: int) -> Variable:
    """``kern`` with its last ``spatial`` axes reversed (a view)."""
    return kern[(slice(None),) * (kern.ndim - spatial) + (slice(None, None, -1),) * spatial]


def _tensors(node: Apply) -> bool:
    """Whether every input and output of ``node`` is a dense tensor (not a GPU or sparse one)."""
    return all(isinstance(v.type, TensorType) for v in (*node.inputs, *node.outputs))


def _like(new: Variable, old: Variable) -> Variable:
    """``new`` with ``old``'s broadcast pattern (the abstract ops state it; GEMM ops may not)."""
    if new.broadcastable != old.broadcastable:
        new = patternbroadcast(new, old.broadcastable)
    return new


@node_rewriter([AbstractConv])
def local_abstractconv_gemm(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``AbstractConv{2,3}d(img, kern) -> Corr{,3d}MM(img, flipped kern)``."""
    op = _concrete(node.op, AbstractConv)
    if op is None or not _tensors(node):
        return None
    img, kern = node.inputs
    if node.op.filter_flip:
        kern = _flip(kern, node.op.convdim)
    return [_like(op(img, kern), node.outputs[0])]


@node_rewriter([AbstractConv_gradWeights])
def local_abstractconv_gradweights_gemm(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``AbstractConv_gradWeights(img, top, shape) -> Corr*MM_gradWeights(...)``, flipped back."""
    op = _concrete(node.op, AbstractConv_gradWeights)
    if op is None or not _tensors(node):
        return None
    img, topgrad, shape = node.inputs
    out = op(img, topgrad, shape)
    if node.op.filter_flip:
        out = _flip(out, node.op.convdim)
    return [_like(out, node.outputs[0])]


@node_rewriter([AbstractConv_gradInputs])
def local_abstractconv_gradinputs_gemm(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``AbstractConv_gradInputs(kern, top, shape) -> Corr*MM_gradInputs(flipped kern, ...)``."""
    op = _concrete(node.op, AbstractConv_gradInputs)
    if op is None or not _tensors(node):
        return None
    kern, topgrad, shape = node.inputs
    if node.op.filter_flip:
        kern = _flip(kern, node.op.convdim)
    return [_like(op(kern, topgrad, shape), node.outputs[0])]


#: Theano's ``conv_groupopt``: the conversions, applied in one walk.
conv_groupopt = LocalGroupDB("conv_opts")
for _position, _rewriter in enumerate(
    (
        local_abstractconv_gemm,
        local_abstractconv_gradweights_gemm,
        local_abstractconv_gradinputs_gemm,
    )
):
    conv_groupopt.register(_rewriter.name, _rewriter, "fast_run", "conv_gemm", position=_position)

rewrites.specialize(conv_groupopt, "conv_gemm", name="conv_opts")
