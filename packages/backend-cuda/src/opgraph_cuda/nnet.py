"""GPU softmax family and fused softmax/cross-entropy ops, and their lifters.

What a classifier's training step becomes after FAST_RUN, on the device: ``Softmax``,
``LogSoftmax``, ``SoftmaxGrad``, ``SoftmaxWithBias``, ``CrossentropySoftmaxArgmax1HotWithBias``
and ``CrossentropySoftmax1HotWithBiasDx`` (:mod:`opgraph.tensor.nnet`). Each runs one
row-wise kernel of :mod:`opgraph_cuda.kernels.nnet`. Only matrices normalised along their
last axis move to the GPU; the lifters keep other cases on the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Variable
from opgraph.scalar.type import upcast
from opgraph.tensor.nnet.basic import LogSoftmax, Softmax, SoftmaxGrad, SoftmaxWithBias
from opgraph.tensor.nnet.crossentropy import (
    CrossentropySoftmax1HotWithBiasDx,
    CrossentropySoftmaxArgmax1HotWithBias,
)
from opgraph_cuda.array import GpuArray
from opgraph_cuda.kernels.nnet import nnet_kernel
from opgraph_cuda.ops import GpuOp, Run, as_gpuarray_variable
from opgraph_cuda.opt import register_lifter
from opgraph_cuda.runtime import get_runtime
from opgraph_cuda.type import GpuArrayType

__all__ = [
    "GpuCrossentropySoftmax1HotWithBiasDx",
    "GpuCrossentropySoftmaxArgmax1HotWithBias",
    "GpuLogSoftmax",
    "GpuSoftmax",
    "GpuSoftmaxGrad",
    "GpuSoftmaxWithBias",
]

_FLOATS = ("float32", "float64")
_INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def _title(op: Any, node: Apply) -> str:
    return f"{op} for node {op}({', '.join(str(v.type) for v in node.inputs)})"


def _gpu(op: Any, x: Any, pos: int, name: str, ndims: Sequence[int], kinds: Sequence[str]) -> Any:
    """Input ``pos`` as a GPU variable of one of ``ndims`` dimensions and dtypes ``kinds``."""
    x = as_gpuarray_variable(x)
    if x.type.ndim not in ndims or x.type.dtype not in kinds:
        want = " or ".join(f"{n}-d" for n in ndims)
        raise TypeError(
            f"{op}: input {pos} ({name}) must be a {want} GPU array of dtype "
            f"{' or '.join(kinds)}, got {x} of type {x.type}"
        )
    return x


def _check_rows(op: Any, n: int, what: str, expected: int) -> None:
    if n != expected:
        raise ValueError(f"{op}: {what} has {n} elements, expected {expected}")


class _GpuRowOp(GpuOp):
    """Base of the row-wise ops: no parameters, a kernel kind, Theano-style printing."""

    __props__ = ()
    kind = ""

    def __str__(self) -> str:
        return type(self).__name__

    def _kernel(self, node: Apply) -> Any:
        return nnet_kernel(
            self.kind,
            [v.type.dtype for v in node.inputs],
            [v.type.dtype for v in node.outputs],
            _title(self, node),
        )


class GpuSoftmax(_GpuRowOp):
    """Row-wise ``softmax`` of a matrix (``exp(x - max) / sum``), on the GPU."""

    kind = "softmax"

    def make_node(self, x: Any) -> Apply:
        x = _gpu(self, x, 0, "x", (2,), _FLOATS)
        return Apply(self, [x], [x.type()])

    def prepare_gpu(self, node: Apply) -> Run:
        kernel, runtime = self._kernel(node), get_runtime()
        dtype = node.outputs[0].type.dtype

        def run(inputs: Sequence[Any]) -> list[GpuArray]:
            (x,) = inputs
            out = GpuArray.empty(x.shape, dtype, runtime)
            kernel(*x.shape, out.ptr, x.ptr, *x.shape, *x.elem_strides)
            return [out]

        return run

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]


class GpuLogSoftmax(GpuSoftmax):
    """Row-wise ``log(softmax(x))`` as ``(x - max) - log(sum(exp(x - max)))``, on the GPU."""

    kind = "logsoftmax"


class GpuSoftmaxWithBias(_GpuRowOp):
    """Row-wise ``softmax(x + b)`` for a matrix ``x`` and a vector ``b``, on the GPU."""

    kind = "softmax_bias"

    def make_node(self, x: Any, b: Any) -> Apply:
        x = _gpu(self, x, 0, "x", (2,), _FLOATS)
        b = _gpu(self, b, 1, "b", (1,), _FLOATS)
        dtype = upcast(x.type.dtype, b.type.dtype)
        return Apply(self, [x, b], [GpuArrayType(dtype, x.type.broadcastable)()])

    def prepare_gpu(self, node: Apply) -> Run:
        kernel, runtime = self._kernel(node), get_runtime()
        dtype = node.outputs[0].type.dtype

        def run(inputs: Sequence[Any]) -> list[GpuArray]:
            x, b = inputs
            _check_rows(self, b.shape[0], "b", x.shape[1])
            out = GpuArray.empty(x.shape, dtype, runtime)
            kernel(*x.shape, out.ptr, x.ptr, b.ptr, *x.shape, *x.elem_strides, *b.elem_strides)
            return [out]

        return run

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]


class GpuSoftmaxGrad(_GpuRowOp):
    """Gradient of row-wise softmax: ``dx = sm * (dy - sum(dy * sm, axis=-1))``."""

    kind = "softmax_grad"

    def make_node(self, dy: Any, sm: Any) -> Apply:
        dy = _gpu(self, dy, 0, "dy", (2,), _FLOATS)
        sm = _gpu(self, sm, 1, "sm", (2,), _FLOATS)
        dtype = upcast(dy.type.dtype, sm.type.dtype)
        return Apply(self, [dy, sm], [GpuArrayType(dtype, sm.type.broadcastable)()])

    def prepare_gpu(self, node: Apply) -> Run:
        kernel, runtime = self._kernel(node), get_runtime()
        dtype = node.outputs[0].type.dtype

        def run(inputs: Sequence[Any]) -> list[GpuArray]:
            dy, sm = inputs
            if dy.shape != sm.shape:
                raise ValueError(f"{self}: dy has shape {dy.shape} but sm has shape {sm.shape}")
            dx = GpuArray.empty(sm.shape, dtype, runtime)
            kernel(*sm.shape, dx.ptr, dy.ptr, sm.ptr, *sm.shape, *dy.elem_strides, *sm.elem_strides)
            return [dx]

        return run

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[1]]


class _IndexCheck:
    """A one-int device flag the cross-entropy kernels set when a class index is out of
    bounds; read (and cleared) after each call, so a bad index is a ValueError as on the
    CPU."""

    def __init__(self) -> None:
        self.flag = GpuArray.zeros((1,), "int32")

    def check(self, op: Any, y: GpuArray, n_classes: int) -> None:
        if int(self.flag.get()[0]) == 0:
            return
        self.flag.runtime.to_device(self.flag.ptr, np.zeros(1, "int32"))
        values = y.get()
        bad = values[(values < 0) | (values >= n_classes)]
        shown = bad[0] if bad.size else "?"
        raise ValueError(
            f"{op}: class index {shown} is out of bounds for {n_classes} classes "
            f"(valid: 0 to {n_classes - 1})."
        )


class GpuCrossentropySoftmaxArgmax1HotWithBias(_GpuRowOp):
    """For logits ``x + b`` and class indices ``y_idx``: ``[nll, sm, am]`` with
    ``sm = softmax(x + b)``, ``nll[i] = -log(sm[i, y_idx[i]])``, ``am[i] = argmax(x[i] + b)``."""

    kind = "xent_softmax"

    def make_node(self, x: Any, b: Any, y_idx: Any) -> Apply:
        x = _gpu(self, x, 0, "x", (2,), _FLOATS)
        b = _gpu(self, b, 1, "b", (1,), _FLOATS)
        y_idx = _gpu(self, y_idx, 2, "y_idx", (1,), _INTS)
        dtype = upcast(x.type.dtype, b.type.dtype)
        nll = GpuArrayType(dtype, y_idx.type.broadcastable)()
        sm = GpuArrayType(dtype, x.type.broadcastable)()
        return Apply(self, [x, b, y_idx], [nll, sm, y_idx.type()])

    def prepare_gpu(self, node: Apply) -> Run:
        kernel, runtime = self._kernel(node), get_runtime()
        dtypes = [v.type.dtype for v in node.outputs]
        check = _IndexCheck()

        def run(inputs: Sequence[Any]) -> list[GpuArray]:
            x, b, y = inputs
            M, K = x.shape
            _check_rows(self, b.shape[0], "b", K)
            _check_rows(self, y.shape[0], "y_idx", M)
            nll = GpuArray.empty((M,), dtypes[0], runtime)
            sm = GpuArray.empty((M, K), dtypes[1], runtime)
            am = GpuArray.empty((M,), dtypes[2], runtime)
            if M and not K:
                check.flag.fill(1)  # no class can be valid
            kernel(
                M,
                K,
                nll.ptr,
                sm.ptr,
                am.ptr,
                x.ptr,
                b.ptr,
                y.ptr,
                check.flag.ptr,
                M,
                K,
                *x.elem_strides,
                *b.elem_strides,
                *y.elem_strides,
            )
            check.check(self, y, K)
            return [nll, sm, am]

        return run

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        x_shape, _, y_shape = input_shapes
        return [(x_shape[0],), x_shape, y_shape]


class GpuCrossentropySoftmax1HotWithBiasDx(_GpuRowOp):
    """``dx[i] = dy[i] * (sm[i] - onehot(y_idx[i]))``: the gradient of the fused op's
    ``nll`` w.r.t. the logits; ``dy`` is a vector or a 0-d array (the same for all rows)."""

    kind = "xent_dx"

    def make_node(self, dy: Any, sm: Any, y_idx: Any) -> Apply:
        dy = _gpu(self, dy, 0, "dy", (0, 1), _FLOATS)
        sm = _gpu(self, sm, 1, "sm", (2,), _FLOATS)
        y_idx = _gpu(self, y_idx, 2, "y_idx", (1,), _INTS)
        dtype = upcast(dy.type.dtype, sm.type.dtype)
        return Apply(self, [dy, sm, y_idx], [GpuArrayType(dtype, sm.type.broadcastable)()])

    def prepare_gpu(self, node: Apply) -> Run:
        kernel, runtime = self._kernel(node), get_runtime()
        dtype = node.outputs[0].type.dtype
        check = _IndexCheck()

        def run(inputs: Sequence[Any]) -> list[GpuArray]:
            dy, sm, y = inputs
            M, K = sm.shape
            _check_rows(self, y.shape[0], "y_idx", M)
            if dy.ndim == 1:
                _check_rows(self, dy.shape[0], "dy", M)
            sdy = dy.elem_strides[0] if dy.ndim == 1 else 0
            dx = GpuArray.empty((M, K), dtype, runtime)
            if M and not K:
                check.flag.fill(1)
            kernel(
                M,
                K,
                dx.ptr,
                dy.ptr,
                sm.ptr,
                y.ptr,
                check.flag.ptr,
                M,
                K,
                sdy,
                *sm.elem_strides,
                *y.elem_strides,
            )
            check.check(self, y, K)
            return [dx]

        return run

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[1]]


# ---- lifters ------------------------------------------------------------------------------


def _last_axis_of_matrix(node: Apply) -> bool:
    return node.inputs[-1].type.ndim == 2 and node.op.axis in (-1, 1)


@register_lifter(Softmax, LogSoftmax)
def lift_softmax(node: Apply, inputs: Sequence[Variable]) -> list[Variable] | None:
    """``Softmax``/``LogSoftmax`` of a matrix along its last axis -> the GPU op."""
    if not _last_axis_of_matrix(node):
        return None
    op = GpuSoftmax() if isinstance(node.op, Softmax) else GpuLogSoftmax()
    return [op(inputs[0])]


@register_lifter(SoftmaxGrad)
def lift_softmax_grad(node: Apply, inputs: Sequence[Variable]) -> list[Variable] | None:
    """``SoftmaxGrad`` of matrices along the last axis -> ``GpuSoftmaxGrad``."""
    if not _last_axis_of_matrix(node):
        return None
    return [GpuSoftmaxGrad()(*inputs)]


@register_lifter(SoftmaxWithBias)
def lift_softmax_with_bias(node: Apply, inputs: Sequence[Variable]) -> list[Variable]:
    """``SoftmaxWithBias`` -> ``GpuSoftmaxWithBias``."""
    return [GpuSoftmaxWithBias()(*inputs)]


@register_lifter(CrossentropySoftmaxArgmax1HotWithBias)
def lift_xent_softmax(node: Apply, inputs: Sequence[Variable]) -> list[Variable]:
    """The fused softmax + cross-entropy op -> its GPU version (all three outputs)."""
    return GpuCrossentropySoftmaxArgmax1HotWithBias()(*inputs, return_list=True)


@register_lifter(CrossentropySoftmax1HotWithBiasDx)
def lift_xent_dx(node: Apply, inputs: Sequence[Variable]) -> list[Variable]:
    """The fused op's gradient -> ``GpuCrossentropySoftmax1HotWithBiasDx``."""
    return [GpuCrossentropySoftmax1HotWithBiasDx()(*inputs)]
