"""The GPU ops that make views or new arrays without arithmetic: dimshuffle, indexing, reshape,
contiguous copies, alloc.

The transfers (:class:`GpuFromHost`, :class:`HostFromGpu`, the only places data crosses
between host and device) live with the types in :mod:`opgraph_cuda.type`; they and
:class:`~opgraph_cuda.gpuop.GpuOp` are importable from here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.elemwise import DimShuffle
from opgraph.tensor.subtensor_basic import Subtensor, get_idx_list
from opgraph_cuda.array import GpuArray
from opgraph_cuda.gpuop import GpuOp, Run
from opgraph_cuda.runtime import get_runtime
from opgraph_cuda.type import (
    GpuArrayConstant,
    GpuArrayType,
    GpuFromHost,
    HostFromGpu,
    gpu_from_host,
    host_from_gpu,
)

__all__ = [
    "GpuAlloc",
    "GpuContiguous",
    "GpuDimShuffle",
    "GpuFromHost",
    "GpuOp",
    "GpuReshape",
    "GpuSubtensor",
    "HostFromGpu",
    "Run",
    "as_gpuarray_variable",
    "gpu_contiguous",
    "gpu_from_host",
    "host_from_gpu",
]


def as_gpuarray_variable(x: Any, context_name: str | None = None) -> Variable:
    """``x`` as a GPU variable: GPU variables pass, ``host_from_gpu(g)`` gives ``g`` back,
    host tensors and values are transferred (``GpuFromHost``)."""
    if isinstance(x, Variable) and isinstance(x.type, GpuArrayType):
        return x
    if isinstance(x, Variable) and x.owner is not None and isinstance(x.owner.op, HostFromGpu):
        return x.owner.inputs[0]
    if isinstance(x, GpuArray):
        gtype = GpuArrayType(str(x.dtype), [False] * x.ndim, context_name)
        return GpuArrayConstant(gtype, x)
    x = as_tensor_variable(x)
    if isinstance(x, Constant):
        gtype = GpuArrayType(x.type.dtype, x.type.broadcastable, context_name)
        return GpuArrayConstant(gtype, np.asarray(x.data))
    return GpuFromHost(context_name)(x)


class GpuContiguous(GpuOp):
    """``x`` itself when C-contiguous, else a C-contiguous copy (Theano's ``GpuContiguous``)."""

    __props__ = ()
    view_map = {0: [0]}

    def make_node(self, x: Any) -> Apply:
        x = as_gpuarray_variable(x)
        return Apply(self, [x], [x.type()])

    def prepare_gpu(self, node: Apply) -> Run:
        return lambda inputs: [inputs[0] if inputs[0].is_c_contiguous else inputs[0].copy()]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return list(input_shapes)


gpu_contiguous = GpuContiguous()


class GpuDimShuffle(GpuOp):
    """DimShuffle on the GPU: a view with permuted, added or dropped broadcastable axes."""

    __props__ = ("input_broadcastable", "new_order")
    view_map = {0: [0]}

    def __init__(self, input_broadcastable: Sequence[bool], new_order: Sequence[Any]) -> None:
        # The CPU op checks the pattern and computes the permutation.
        cpu = DimShuffle(input_broadcastable, new_order)
        self.input_broadcastable = cpu.input_broadcastable
        self.new_order = cpu.new_order

    def __str__(self) -> str:
        return f"GpuDimShuffle{{{','.join(str(o) for o in self.new_order)}}}"

    def make_node(self, x: Any) -> Apply:
        x = as_gpuarray_variable(x)
        cpu = DimShuffle(self.input_broadcastable, self.new_order)
        bcast = cpu.make_node(x.type.tensor_type()()).outputs[0].type.broadcastable
        return Apply(self, [x], [x.type.clone(broadcastable=bcast)()])

    def prepare_gpu(self, node: Apply) -> Run:
        order = self.new_order

        def run(inputs: Sequence[Any]) -> list[GpuArray]:
            (x,) = inputs
            shape = [1 if o == "x" else x.shape[o] for o in order]
            strides = [0 if o == "x" else x.strides[o] for o in order]
            return [x.view(shape, strides)]

        return run

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        (ishp,) = input_shapes
        return [tuple(1 if o == "x" else ishp[o] for o in self.new_order)]


class GpuReshape(GpuOp):
    """Reshape on the GPU: a view of a contiguous input, else a contiguous copy reshaped."""

    __props__ = ("ndim",)
    view_map = {0: [0]}

    def __init__(self, ndim: int) -> None:
        self.ndim = int(ndim)

    def __str__(self) -> str:
        return f"GpuReshape{{{self.ndim}}}"

    def make_node(self, x: Any, shape: Any) -> Apply:
        x = as_gpuarray_variable(x)
        shape = as_tensor_variable(shape)
        if shape.type.ndim != 1 or shape.type.dtype not in ("int8", "int16", "int32", "int64"):
            raise TypeError(f"{self}: the shape must be an integer vector, got {shape.type}")
        bcast = [False] * self.ndim
        if isinstance(shape, Constant):
            bcast = [int(n) == 1 for n in np.asarray(shape.data)]
        return Apply(self, [x, shape], [x.type.clone(broadcastable=bcast)()])

    def prepare_gpu(self, node: Apply) -> Run:
        def run(inputs: Sequence[Any]) -> list[GpuArray]:
            x, shape = inputs
            if len(shape) != self.ndim:
                raise ValueError(f"{self}: shape {tuple(shape)} has {len(shape)} entries")
            return [x.reshape([int(n) for n in shape])]

        return run


class GpuSubtensor(GpuOp, Subtensor):
    """Basic indexing (ints and slices) on the GPU: a view, as ``Subtensor`` on the host."""

    view_map = {0: [0]}

    def make_node(self, x: Any, *inputs: Any) -> Apply:
        x = as_gpuarray_variable(x)
        host = Subtensor.make_node(self, x.type.tensor_type()(), *inputs)
        out = x.type.clone(broadcastable=host.outputs[0].type.broadcastable)()
        return Apply(self, [x, *host.inputs[1:]], [out])

    def prepare_gpu(self, node: Apply) -> Run:
        def run(inputs: Sequence[Any]) -> list[GpuArray]:
            index = get_idx_list(inputs, self.idx_list)
            return [inputs[0][(*index, Ellipsis)]]

        return run

    perform = GpuOp.perform
    prepare_node = GpuOp.prepare_node


class GpuAlloc(GpuOp):
    """``alloc(value, *shape)`` on the GPU: ``value`` broadcast into a new array."""

    __props__ = ()

    def make_node(self, value: Any, *shape: Any) -> Apply:
        value = as_gpuarray_variable(value)
        sh = [as_tensor_variable(s) for s in shape]
        if len(sh) < value.type.ndim:
            raise TypeError(f"GpuAlloc: {len(sh)} dims given for a {value.type.ndim}-d value")
        bcast = [isinstance(s, Constant) and int(s.data) == 1 for s in sh]
        return Apply(self, [value, *sh], [value.type.clone(broadcastable=bcast)()])

    def prepare_gpu(self, node: Apply) -> Run:
        from opgraph_cuda.strided import copy_into

        runtime = get_runtime()
        dtype = node.outputs[0].type.numpy_dtype

        def run(inputs: Sequence[Any]) -> list[GpuArray]:
            value, *shape = inputs
            shape = [int(n) for n in shape]
            lead = len(shape) - value.ndim
            for d, n in enumerate(value.shape):
                if n not in (1, shape[lead + d]):
                    raise ValueError(
                        f"GpuAlloc: the value's shape {value.shape} does not broadcast to "
                        f"{tuple(shape)}"
                    )
            strides = [0] * lead + [
                0 if n == 1 else s for n, s in zip(value.shape, value.strides, strict=True)
            ]
            out = GpuArray.empty(shape, dtype, runtime)
            if out.size:
                copy_into(out, value.view(shape, strides))
            return [out]

        return run

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [tuple(node.inputs[1:])]
