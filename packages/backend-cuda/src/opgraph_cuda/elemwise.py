"""GPU elementwise ops and reductions, and the lifters that move the CPU ones here.

- :class:`GpuElemwise`: a scalar op (or a fused ``Composite``) mapped over GPU arrays with
  broadcasting, as ``Elemwise`` on the host; one generated kernel module per node
  (:mod:`opgraph_cuda.kernels.elemwise`), compiled at link time.
- :class:`GpuCAReduce`: reductions (sum, prod, max, min, all, any, and any ``CAReduce`` of
  add/mul/maximum/minimum/and/or/xor) over any axes (:mod:`opgraph_cuda.kernels.reduce`).

The lifters keep a node on the CPU (return None) when its scalar op, or one op inside its
Composite, has no CUDA code for its dtypes. float16 operands are stored as float16 and
computed in float32: an elementwise kernel loads them into float32 and rounds each
output once; a reduction accumulates in float32 (Theano's acc_dtype rule for float16,
applied to max/min too, where it changes nothing) and stores the CPU op's output dtype.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opgraph.graph.basic import Apply, Variable
from opgraph.scalar import basic as sb
from opgraph.scalar.type import get_scalar_type
from opgraph.tensor.elemwise import CAReduce, Elemwise, broadcast_error
from opgraph_cuda.array import GpuArray
from opgraph_cuda.kernels.elemwise import elemwise_kernel
from opgraph_cuda.kernels.reduce import combine_code, reduce_kernel
from opgraph_cuda.kernels.scalar import element_function, math_dtype
from opgraph_cuda.ops import GpuDimShuffle, GpuOp, Run, as_gpuarray_variable
from opgraph_cuda.opt import register_lifter
from opgraph_cuda.runtime import get_runtime
from opgraph_cuda.type import GpuArrayType

__all__ = ["GpuCAReduce", "GpuElemwise", "lift_careduce", "lift_elemwise"]


def _node_title(op: Any, node: Apply) -> str:
    """``op`` applied to its input types: what a generated kernel's first comment says.
    (Types, not variable names: graphs computing the same thing share one module.)"""
    return f"{op} for node {op}({', '.join(str(v.type) for v in node.inputs)})"


class GpuElemwise(GpuOp):
    """Elementwise ``scalar_op`` on GPU arrays, broadcasting as ``Elemwise`` does.

    ``inplace_pattern`` ``{output: input}`` writes an output into an input's buffer (used
    when that input's value has the output's shape and is not a broadcast view; otherwise
    a new buffer is used). Printed ``GpuElemwise{add,no_inplace}``, or
    ``GpuElemwise{add}[(0, 0)]<gpuarray>`` in place, as Theano printed them.
    """

    __props__ = ("scalar_op", "inplace_pattern")

    def __init__(
        self,
        scalar_op: sb.ScalarOp,
        inplace_pattern: dict[int, int] | None = None,
        name: str | None = None,
    ) -> None:
        if not isinstance(scalar_op, sb.ScalarOp):
            raise TypeError(f"GpuElemwise needs a ScalarOp, got {scalar_op!r}")
        self.scalar_op = scalar_op
        self.inplace_pattern = tuple(sorted((inplace_pattern or {}).items()))
        self.name = name
        self.destroy_map = {o: [i] for o, i in self.inplace_pattern}

    def __str__(self) -> str:
        if self.name is not None:
            return self.name
        if self.inplace_pattern:
            return f"GpuElemwise{{{self.scalar_op}}}{list(self.inplace_pattern)}<gpuarray>"
        return f"GpuElemwise{{{self.scalar_op},no_inplace}}"

    def make_node(self, *inputs: Any) -> Apply:
        if not inputs:
            raise TypeError(f"{self} needs at least one input")
        args = [as_gpuarray_variable(i) for i in inputs]
        ndim = max(a.type.ndim for a in args)
        for k, a in enumerate(args):
            if a.type.ndim < ndim:
                pad = ["x"] * (ndim - a.type.ndim) + list(range(a.type.ndim))
                args[k] = GpuDimShuffle(a.type.broadcastable, pad)(a)
        try:
            stypes = self.scalar_op.output_types([get_scalar_type(a.type.dtype) for a in args])
        except TypeError as exc:
            types = ", ".join(str(a.type) for a in args)
            raise TypeError(f"{self} cannot take inputs of types ({types}): {exc}") from exc
        in_dtypes = [a.type.dtype for a in args]
        out_dtypes = [t.dtype for t in stypes]
        if element_function(self.scalar_op, in_dtypes, out_dtypes) is None:
            raise TypeError(
                f"{self}: {self.scalar_op} has no CUDA code for inputs "
                f"({', '.join(in_dtypes)}) and outputs ({', '.join(out_dtypes)}). "
                "HINT: the lifting pass keeps such nodes on the CPU; build Elemwise instead."
            )
        bcast = tuple(all(b) for b in zip(*(a.type.broadcastable for a in args), strict=True))
        outputs = [GpuArrayType(d, bcast)() for d in out_dtypes]
        for o, i in self.inplace_pattern:
            if args[i].type.dtype != out_dtypes[o] or args[i].type.broadcastable != bcast:
                raise TypeError(
                    f"{self}: in-place output {o} must have the type of input {i} "
                    f"({args[i].type}), got {outputs[o].type}"
                )
        return Apply(self, args, outputs)

    def prepare_gpu(self, node: Apply) -> Run:
        runtime = get_runtime()
        kernel = elemwise_kernel(
            self.scalar_op,
            [v.type.dtype for v in node.inputs],
            [v.type.dtype for v in node.outputs],
            [all(v.type.broadcastable) for v in node.inputs],
            node.outputs[0].type.ndim,
            _node_title(self, node),
        )
        out_dtypes = [v.type.dtype for v in node.outputs]
        inplace = dict(self.inplace_pattern)

        def run(inputs: Sequence[Any]) -> list[GpuArray]:
            shape = _broadcast_shape(node, inputs)
            views = [_broadcast_to(x, shape) for x in inputs]
            outputs = []
            for k, dtype in enumerate(out_dtypes):
                target = inputs[inplace[k]] if k in inplace else None
                if target is None or tuple(target.shape) != shape or _has_zero_stride(target):
                    target = GpuArray.empty(shape, dtype, runtime)
                outputs.append(target)
            kernel(outputs, views)
            return outputs

        return run

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        ndim = node.outputs[0].type.ndim
        shape = []
        for d in range(ndim):
            chosen: Any = 1
            for var, shp in zip(node.inputs, input_shapes, strict=True):
                if not var.type.broadcastable[d]:
                    chosen = shp[d]
                    break
            shape.append(chosen)
        return [tuple(shape)] * len(node.outputs)


def _broadcast_shape(node: Apply, values: Sequence[GpuArray]) -> tuple[int, ...]:
    """The output shape of an elementwise ``node``; ValueError (Elemwise's message) when
    the inputs' shapes do not broadcast as their types say."""
    ndim = node.outputs[0].type.ndim
    shape = []
    for d in range(ndim):
        size, first = 1, None
        for k, (var, val) in enumerate(zip(node.inputs, values, strict=True)):
            n = val.shape[d]
            if var.type.broadcastable[d]:
                if n != 1:
                    raise ValueError(
                        f"{node.op}: input {k} has shape {val.shape}, but its type "
                        f"{var.type} says dimension {d} has length 1"
                    )
                continue
            if first is None:
                size, first = n, k
            elif n != size:
                raise broadcast_error(node, values, d, first, k)
        shape.append(size)
    return tuple(shape)


def _broadcast_to(x: GpuArray, shape: tuple[int, ...]) -> GpuArray:
    """``x`` seen with ``shape``: its length-1 dimensions get stride 0."""
    if tuple(x.shape) == shape:
        return x
    strides = [0 if n == 1 else s for n, s in zip(x.shape, x.strides, strict=True)]
    return x.view(shape, strides)


def _has_zero_stride(x: GpuArray) -> bool:
    return any(s == 0 and n > 1 for n, s in zip(x.shape, x.strides, strict=True))


# ---- reductions ---------------------------------------------------------------------------


class GpuCAReduce(GpuOp):
    """Reduce ``axis`` (all axes when None) with ``scalar_op`` (add, mul, maximum, minimum,
    and, or, xor, mul_without_zeros), accumulating in ``acc_dtype`` and giving ``dtype``
    (both default to the input's dtype; a float16 accumulator is float32).

    Printed ``GpuCAReduce{add}{0,1}`` (``GpuCAReduce{add}`` over all axes). Reducing an
    empty axis gives the identity; for maximum/minimum it is a ValueError, as in NumPy.
    """

    __props__ = ("scalar_op", "axis", "acc_dtype", "dtype")

    def __init__(
        self,
        scalar_op: sb.ScalarOp,
        axis: Sequence[int] | int | None = None,
        acc_dtype: str | None = None,
        dtype: str | None = None,
    ) -> None:
        self.scalar_op = scalar_op
        if isinstance(axis, int):
            axis = (axis,)
        self.axis = None if axis is None else tuple(sorted({int(a) for a in axis}))
        self.acc_dtype = acc_dtype
        self.dtype = dtype

    def __str__(self) -> str:
        axes = "" if self.axis is None else "{" + ",".join(map(str, self.axis)) + "}"
        return f"GpuCAReduce{{{self.scalar_op}}}{axes}"

    def _axes(self, ndim: int) -> tuple[int, ...]:
        return tuple(range(ndim)) if self.axis is None else self.axis

    def _acc(self, in_dtype: str) -> str:
        """The accumulator's dtype: ``acc_dtype`` or the input's, float32 for float16."""
        return math_dtype(self.acc_dtype or in_dtype)

    def make_node(self, x: Any) -> Apply:
        x = as_gpuarray_variable(x)
        ndim = x.type.ndim
        if self.axis is not None and any(a < 0 for a in self.axis):
            axis = [a + ndim if a < 0 else a for a in self.axis]
            return GpuCAReduce(self.scalar_op, axis, self.acc_dtype, self.dtype).make_node(x)
        for a in self._axes(ndim):
            if not 0 <= a < ndim:
                raise ValueError(f"{self}: axis {a} is out of range for {x} ({x.type})")
        acc = self._acc(x.type.dtype)
        if combine_code(self.scalar_op, acc) is None:
            raise TypeError(f"{self}: no CUDA reduction for {self.scalar_op} accumulating in {acc}")
        axes = self._axes(ndim)
        bcast = [b for d, b in enumerate(x.type.broadcastable) if d not in axes]
        return Apply(self, [x], [GpuArrayType(self.dtype or x.type.dtype, bcast)()])

    def prepare_gpu(self, node: Apply) -> Run:
        (x,) = node.inputs
        kernel = reduce_kernel(
            self.scalar_op,
            x.type.dtype,
            self._acc(x.type.dtype),
            node.outputs[0].type.dtype,
            _node_title(self, node),
        )
        axes = self._axes(x.type.ndim)
        # max/min of nothing is undefined; and/or/xor of nothing is their identity (np.all)
        empty_ok = not isinstance(self.scalar_op, sb.Maximum | sb.Minimum)
        return lambda inputs: [kernel(inputs[0], axes, empty_ok)]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        (shp,) = input_shapes
        axes = self._axes(len(shp))
        return [tuple(n for d, n in enumerate(shp) if d not in axes)]


# ---- lifters ------------------------------------------------------------------------------


@register_lifter(Elemwise, float16=True)
def lift_elemwise(node: Apply, inputs: Sequence[Variable]) -> list[Variable] | None:
    """``Elemwise{op}`` -> ``GpuElemwise{op}`` when ``op`` (every node of a Composite) has
    CUDA code for the node's dtypes (float16 operands computed in float32); None keeps it
    on the CPU."""
    scalar_op = node.op.scalar_op
    in_dtypes = [v.type.dtype for v in node.inputs]
    out_dtypes = [v.type.dtype for v in node.outputs]
    if element_function(scalar_op, in_dtypes, out_dtypes) is None:
        return None
    return GpuElemwise(scalar_op)(*inputs, return_list=True)


@register_lifter(CAReduce, float16=True)
def lift_careduce(node: Apply, inputs: Sequence[Variable]) -> list[Variable] | None:
    """``Sum``/``Prod``/``All``/``Any``/``Reduce{maximum}``/... -> ``GpuCAReduce`` with the
    same axes, accumulator and output dtypes (a float16 accumulator is float32: core's Sum
    and Prod already ask for it, max/min of float16 give the same values in either); None
    for ops without a CUDA reduction."""
    op = node.op
    x = node.inputs[0]
    acc = math_dtype(getattr(op, "acc_dtype", None) or x.type.dtype)
    if combine_code(op.scalar_op, acc) is None:
        return None
    axis = None if op.axis is None else tuple(op.axis)
    gpu_op = GpuCAReduce(op.scalar_op, axis, acc_dtype=acc, dtype=node.outputs[0].type.dtype)
    return [gpu_op(inputs[0])]
