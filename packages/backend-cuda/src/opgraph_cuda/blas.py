"""Matrix products on the GPU through cuBLAS: GpuGemm, GpuGemv, GpuGer, GpuDot22 and friends.

The ops mirror :mod:`opgraph.tensor.blas` (same inputs, same BLAS conventions: ``Z`` is not
read when ``b == 0``, ``X`` and ``Y`` not when ``a == 0``), and :class:`GpuDot` covers
``dot`` of vectors and matrices. The scalars ``a`` and ``b`` are host 0-d tensors (or GPU
ones, read back to the host): cuBLAS takes them from host memory. Transposed operands are
read in place through cuBLAS's ``N``/``T`` flags (see :mod:`opgraph_cuda.cublas`); other
strided views are copied first.

The lifters at the bottom move ``Gemm``, ``Gemv``, ``Ger``, ``Dot22``, ``Dot22Scalar`` and
``Dot`` to these ops; the lifting pass offers them float32 nodes only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.op import Op
from opgraph.rewriting import register_inplace
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.blas import Dot22, Dot22Scalar, Gemm, Gemv, Ger
from opgraph.tensor.dot import Dot
from opgraph.tensor.structure import AllocEmpty
from opgraph.tensor.type import TensorType
from opgraph_cuda import cublas
from opgraph_cuda.array import GpuArray
from opgraph_cuda.ops import GpuOp, Run, as_gpuarray_variable
from opgraph_cuda.opt import KeepOnCpu, register_lifter, rewrites
from opgraph_cuda.runtime import get_runtime
from opgraph_cuda.type import GpuArrayType

__all__ = [
    "GpuDot",
    "GpuDot22",
    "GpuDot22Scalar",
    "GpuGemm",
    "GpuGemv",
    "GpuGer",
    "gpu_dot22",
    "gpu_dot22scalar",
    "gpu_gemm_inplace",
    "gpu_gemm_no_inplace",
    "gpu_gemv_inplace",
    "gpu_gemv_no_inplace",
    "gpu_ger_destructive",
    "gpu_ger_no_inplace",
]

#: The dtypes the cuBLAS wrappers take.
BLAS_GPU_DTYPES = ("float32", "float64")


# ---------------------------------------------------------------------------- helpers


def _as_scalar(op: Any, name: str, v: Any, dtype: str) -> Variable:
    """The scalar input ``name``: a 0-d host tensor, or a 0-d GPU variable, of a float dtype."""
    if not (isinstance(v, Variable) and isinstance(v.type, GpuArrayType)):
        v = as_tensor_variable(v)
    if v.type.ndim != 0 or not str(v.type.dtype).startswith("float"):
        raise TypeError(f"{op}: {name} must be a float scalar (0-d), got {v} of type {v.type}")
    if np.promote_types(v.type.dtype, dtype) != np.dtype(dtype):
        raise TypeError(
            f"{op}: {name} ({v}, {v.type.dtype}) must cast to the result's dtype {dtype} "
            f"without changing it. HINT: cast it to {dtype}."
        )
    return v


def _as_operands(
    op: Any, names: Sequence[str], values: Sequence[Any], ndims: Sequence[int | tuple[int, ...]]
) -> list[Variable]:
    """The GPU operands, checked: the right ranks and one float dtype cuBLAS takes."""
    out = [as_gpuarray_variable(v) for v in values]
    dtype = out[0].type.dtype
    for name, v, nd in zip(names, out, ndims, strict=True):
        allowed = (nd,) if isinstance(nd, int) else nd
        if v.type.ndim not in allowed:
            ranks = " or ".join(map(str, allowed))
            raise TypeError(
                f"{op}: {name} must have {ranks} dimension(s), got {v} of type {v.type}"
            )
        if v.type.dtype != dtype:
            raise TypeError(
                f"{op}: {', '.join(names)} must have one dtype, got {name} of dtype "
                f"{v.type.dtype} and {names[0]} of dtype {dtype}. HINT: cast them to one dtype."
            )
    if dtype not in BLAS_GPU_DTYPES:
        raise TypeError(f"{op}: cuBLAS takes float32 or float64 operands, got dtype {dtype}")
    return out


def _number(value: Any) -> float:
    """A scalar input's value as a Python float (a GPU scalar is copied to the host)."""
    if isinstance(value, GpuArray):
        value = value.get()
    return float(np.asarray(value))


def _mismatch(op: Any, what: str, shapes: Sequence[tuple[int, ...]], need: str) -> ValueError:
    """The error for operands whose shapes do not fit together."""
    listed = " and ".join(str(tuple(s)) for s in shapes)
    return ValueError(f"{op}: {what} of shapes {listed} do not match: {need}")


def _result_buffer(
    z: GpuArray, beta: float, inplace: bool, shape: tuple[int, ...]
) -> tuple[GpuArray, GpuArray | None]:
    """``(buffer, write_back)``: where the routine writes, and the array to copy it into
    afterwards (an in-place target cuBLAS cannot write directly), or None."""
    if inplace:
        direct = z.ndim == 1 and (z.shape[0] <= 1 or z.strides[0] > 0)
        if z.ndim == 2:
            direct = cublas.matrix_operand(z, copy=False) is not None
        if direct:
            return z, None
        return z.copy(), z
    if beta == 0:
        return GpuArray.empty(shape, z.dtype, z.runtime), None
    return z.copy(), None


def _write_back(buffer: GpuArray, target: GpuArray | None) -> GpuArray:
    """The op's output: ``target`` with ``buffer`` copied in, or ``buffer`` itself."""
    if target is None:
        return buffer
    from opgraph_cuda.strided import copy_into

    copy_into(target, buffer)
    return target


# ---------------------------------------------------------------------------- Gemm


class GpuGemm(GpuOp):
    """``Z <- b * Z + a * dot(X, Y)`` on the GPU (cuBLAS ``gemm``); Theano's ``GpuGemm``.

    Inputs ``(Z, a, X, Y, b)`` as :class:`opgraph.tensor.blas.Gemm`. ``inplace`` writes
    into ``Z`` (``destroy_map = {0: [0]}``); otherwise the result is a new array.
    """

    __props__ = ("inplace",)

    def __init__(self, inplace: bool = False) -> None:
        self.inplace = bool(inplace)
        self.destroy_map = {0: [0]} if self.inplace else {}

    def __str__(self) -> str:
        return f"GpuGemm{{{'inplace' if self.inplace else 'no_inplace'}}}"

    def make_node(self, z: Any, a: Any, x: Any, y: Any, b: Any) -> Apply:
        z, x, y = _as_operands(self, ("Z", "X", "Y"), (z, x, y), (2, 2, 2))
        a = _as_scalar(self, "a", a, z.type.dtype)
        b = _as_scalar(self, "b", b, z.type.dtype)
        return Apply(self, [z, a, x, y, b], [z.type()])

    def prepare_gpu(self, node: Apply) -> Run:
        get_runtime()  # fail at link time when there is no GPU

        def run(inputs: Sequence[Any]) -> list[GpuArray]:
            z, a, x, y, b = inputs
            if x.shape[1] != y.shape[0] or z.shape != (x.shape[0], y.shape[1]):
                raise _mismatch(
                    self, "Z, X, Y", (z.shape, x.shape, y.shape), "Z (m, n), X (m, k), Y (k, n)"
                )
            alpha, beta = _number(a), _number(b)
            buffer, target = _result_buffer(z, beta, self.inplace, z.shape)
            cublas.gemm(alpha, x, y, beta, buffer)
            return [_write_back(buffer, target)]

        return run

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]


gpu_gemm_no_inplace = GpuGemm(inplace=False)
gpu_gemm_inplace = GpuGemm(inplace=True)


# ---------------------------------------------------------------------------- Gemv


class GpuGemv(GpuOp):
    """``y <- b * y + a * dot(A, x)`` on the GPU (cuBLAS ``gemv``); Theano's ``GpuGemv``.

    Inputs ``(y, a, A, x, b)`` as :class:`opgraph.tensor.blas.Gemv`. ``inplace`` writes into
    ``y`` (``destroy_map = {0: [0]}``).
    """

    __props__ = ("inplace",)

    def __init__(self, inplace: bool = False) -> None:
        self.inplace = bool(inplace)
        self.destroy_map = {0: [0]} if self.inplace else {}

    def __str__(self) -> str:
        return f"GpuGemv{{{'inplace' if self.inplace else 'no_inplace'}}}"

    def make_node(self, y: Any, a: Any, A: Any, x: Any, b: Any) -> Apply:
        y, A, x = _as_operands(self, ("y", "A", "x"), (y, A, x), (1, 2, 1))
        a = _as_scalar(self, "a", a, y.type.dtype)
        b = _as_scalar(self, "b", b, y.type.dtype)
        return Apply(self, [y, a, A, x, b], [y.type()])

    def prepare_gpu(self, node: Apply) -> Run:
        get_runtime()

        def run(inputs: Sequence[Any]) -> list[GpuArray]:
            y, a, A, x, b = inputs
            if A.shape[1] != x.shape[0] or y.shape != A.shape[:1]:
                raise _mismatch(
                    self, "y, A, x", (y.shape, A.shape, x.shape), "y (m,), A (m, n), x (n,)"
                )
            alpha, beta = _number(a), _number(b)
            buffer, target = _result_buffer(y, beta, self.inplace, y.shape)
            cublas.gemv(alpha, A, x, beta, buffer)
            return [_write_back(buffer, target)]

        return run

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]


gpu_gemv_no_inplace = GpuGemv(inplace=False)
gpu_gemv_inplace = GpuGemv(inplace=True)


# ---------------------------------------------------------------------------- Ger


class GpuGer(GpuOp):
    """``A <- A + a * outer(x, y)`` on the GPU (cuBLAS ``ger``); Theano's ``GpuGer``.

    Inputs ``(A, a, x, y)`` as :class:`opgraph.tensor.blas.Ger`. ``destructive`` writes
    into ``A`` (``destroy_map = {0: [0]}``).
    """

    __props__ = ("destructive",)

    def __init__(self, destructive: bool = False) -> None:
        self.destructive = bool(destructive)
        self.destroy_map = {0: [0]} if self.destructive else {}

    def __str__(self) -> str:
        return f"GpuGer{{{'destructive' if self.destructive else 'non-destructive'}}}"

    def make_node(self, A: Any, a: Any, x: Any, y: Any) -> Apply:
        A, x, y = _as_operands(self, ("A", "x", "y"), (A, x, y), (2, 1, 1))
        a = _as_scalar(self, "a", a, A.type.dtype)
        return Apply(self, [A, a, x, y], [A.type()])

    def prepare_gpu(self, node: Apply) -> Run:
        get_runtime()

        def run(inputs: Sequence[Any]) -> list[GpuArray]:
            A, a, x, y = inputs
            if A.shape != (x.shape[0], y.shape[0]):
                raise _mismatch(
                    self, "A, x, y", (A.shape, x.shape, y.shape), "A (m, n), x (m,), y (n,)"
                )
            buffer, target = _result_buffer(A, 1.0, self.destructive, A.shape)
            cublas.ger(_number(a), x, y, buffer)
            return [_write_back(buffer, target)]

        return run

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]


gpu_ger_no_inplace = GpuGer(destructive=False)
gpu_ger_destructive = GpuGer(destructive=True)


# ---------------------------------------------------------------------------- dot


class GpuDot(GpuOp):
    """``dot(x, y)`` (``a * dot(x, y)`` when ``scaled``) of vectors and matrices on the GPU.

    Inputs ``(x, y)``, or ``(x, y, a)`` when ``scaled``; x and y are vectors or matrices of
    one float dtype, as :class:`opgraph.tensor.dot.Dot` (a vector-vector product is 0-d).
    Matrix-matrix products run cuBLAS ``gemm``, the others ``gemv``.
    """

    __props__ = ("scaled",)
    #: The ranks each operand may have.
    ranks: tuple[int, ...] = (1, 2)

    def __init__(self, scaled: bool = False) -> None:
        self.scaled = bool(scaled)

    def __str__(self) -> str:
        return "GpuDot{scaled}" if self.scaled else "GpuDot"

    def make_node(self, x: Any, y: Any, *scale: Any) -> Apply:
        if len(scale) != int(self.scaled):
            raise TypeError(f"{self} takes {2 + int(self.scaled)} inputs, got {2 + len(scale)}")
        x, y = _as_operands(self, ("x", "y"), (x, y), (self.ranks, self.ranks))
        extra = [_as_scalar(self, "a", scale[0], x.type.dtype)] if self.scaled else []
        bcast = x.type.broadcastable[:-1] + y.type.broadcastable[1:]
        out = GpuArrayType(x.type.dtype, bcast, x.type.context_name)()
        return Apply(self, [x, y, *extra], [out])

    def prepare_gpu(self, node: Apply) -> Run:
        get_runtime()

        def run(inputs: Sequence[Any]) -> list[GpuArray]:
            x, y = inputs[:2]
            alpha = _number(inputs[2]) if self.scaled else 1.0
            if x.shape[-1] != y.shape[0]:
                raise _mismatch(
                    self, "x, y", (x.shape, y.shape), "x's last dimension must equal y's first"
                )
            return [_product(alpha, x, y)]

        return run

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        xshp, yshp = input_shapes[:2]
        return [tuple(xshp[:-1]) + tuple(yshp[1:])]


def _product(alpha: float, x: GpuArray, y: GpuArray) -> GpuArray:
    """``alpha * dot(x, y)`` into a new C-contiguous array (x, y vectors or matrices)."""
    shape = x.shape[:-1] + y.shape[1:]
    out = GpuArray.empty(shape, x.dtype, x.runtime)
    if x.ndim == 2 and y.ndim == 2:
        cublas.gemm(alpha, x, y, 0.0, out)
    elif x.ndim == 2:
        cublas.gemv(alpha, x, y, 0.0, out)
    elif y.ndim == 2:  # x @ Y == Y.T @ x
        cublas.gemv(alpha, y.T, x, 0.0, out)
    else:  # x . y: the 1 x k matrix x times y
        (k,), (s,) = x.shape, x.strides
        row = x.view((1, k), (max(k, 1) * x.itemsize, s))
        cublas.gemv(alpha, row, y, 0.0, out.view((1,), (x.itemsize,)))
    return out


class GpuDot22(GpuDot):
    """``dot(X, Y)`` for two matrices on the GPU (cuBLAS ``gemm``); Theano's ``GpuDot22``."""

    __props__ = ()
    ranks = (2,)

    def __init__(self) -> None:
        super().__init__(scaled=False)

    def __str__(self) -> str:
        return "GpuDot22"


class GpuDot22Scalar(GpuDot):
    """``a * dot(X, Y)`` for two matrices and a scalar on the GPU (one cuBLAS ``gemm``).

    Inputs ``(X, Y, a)`` as :class:`opgraph.tensor.blas.Dot22Scalar`.
    """

    __props__ = ()
    ranks = (2,)

    def __init__(self) -> None:
        super().__init__(scaled=True)

    def __str__(self) -> str:
        return "GpuDot22Scalar"


gpu_dot22 = GpuDot22()
gpu_dot22scalar = GpuDot22Scalar()


# ---------------------------------------------------------------------------- lifters


def _constant_value(v: Variable) -> float | None:
    """The value of a constant scalar input, else None."""
    if isinstance(v, Constant):
        try:
            return float(np.asarray(v.data))
        except (TypeError, ValueError):
            return None
    return None


def _is_alloc_empty(v: Variable) -> bool:
    """True when ``v`` is a buffer with unspecified contents (``AllocEmpty``)."""
    return v.owner is not None and isinstance(v.owner.op, AllocEmpty)


def _same_type(new: Variable, old: Variable) -> bool:
    """True when the GPU result ``new`` can stand for the host output ``old``."""
    return isinstance(old.type, TensorType) and new.type.broadcastable == old.type.broadcastable


def _check_float32(node: Apply) -> None:
    """KeepOnCpu unless every tensor of ``node`` is float32 (what the lifters move)."""
    dtypes = {v.type.dtype for v in (*node.inputs, *node.outputs) if isinstance(v.type, TensorType)}
    if dtypes != {"float32"}:
        raise KeepOnCpu(f"cuBLAS ops are lifted for float32 alone, got {sorted(dtypes)}")


def _unscaled_product(
    node: Apply, x: Variable, y: Variable, a: Variable, b: Variable, z: Variable
) -> Variable | None:
    """``a * dot(x, y)`` as a GpuDot when ``z`` is an AllocEmpty buffer and ``b`` is 0
    (``Gemv(AllocEmpty, 1, A, x, 0)`` is how the CPU rewrites spell ``dot(A, x)``)."""
    if not (_is_alloc_empty(z) and _constant_value(b) == 0):
        return None
    alpha = _constant_value(a)
    out = GpuDot()(x, y) if alpha == 1 else GpuDot(scaled=True)(x, y, a)
    return out if _same_type(out, node.outputs[0]) else None


@register_lifter(Gemm)
def lift_gemm(node: Apply, inputs: Sequence[Variable]) -> list[Variable]:
    """``Gemm -> GpuGemm`` (``GpuDot22``/``GpuDot22Scalar`` into an AllocEmpty buffer)."""
    _check_float32(node)
    z, _, x, y, _ = inputs
    a, b = node.inputs[1], node.inputs[4]
    product = _unscaled_product(node, x, y, a, b, node.inputs[0])
    if product is not None:
        return [product]
    return [gpu_gemm_no_inplace(z, a, x, y, b)]


@register_lifter(Gemv)
def lift_gemv(node: Apply, inputs: Sequence[Variable]) -> list[Variable]:
    """``Gemv -> GpuGemv`` (``GpuDot`` when it computes into an AllocEmpty buffer)."""
    _check_float32(node)
    y, _, A, x, _ = inputs
    a, b = node.inputs[1], node.inputs[4]
    product = _unscaled_product(node, A, x, a, b, node.inputs[0])
    if product is not None:
        return [product]
    return [gpu_gemv_no_inplace(y, a, A, x, b)]


@register_lifter(Ger)
def lift_ger(node: Apply, inputs: Sequence[Variable]) -> list[Variable]:
    """``Ger -> GpuGer``."""
    _check_float32(node)
    A, _, x, y = inputs
    return [gpu_ger_no_inplace(A, node.inputs[1], x, y)]


@register_lifter(Dot22)
def lift_dot22(node: Apply, inputs: Sequence[Variable]) -> list[Variable]:
    """``Dot22 -> GpuDot22``."""
    _check_float32(node)
    return [gpu_dot22(*inputs)]


@register_lifter(Dot22Scalar)
def lift_dot22scalar(node: Apply, inputs: Sequence[Variable]) -> list[Variable]:
    """``Dot22Scalar -> GpuDot22Scalar`` (``GpuDot22`` when the scalar is the constant 1)."""
    _check_float32(node)
    x, y = inputs[:2]
    a = node.inputs[2]
    if _constant_value(a) == 1:
        return [gpu_dot22(x, y)]
    return [gpu_dot22scalar(x, y, a)]


@register_lifter(Dot)
def lift_dot(node: Apply, inputs: Sequence[Variable]) -> list[Variable] | None:
    """``dot -> GpuDot22`` for two matrices, ``GpuDot`` for the vector cases."""
    _check_float32(node)
    x, y = inputs
    out = gpu_dot22(x, y) if x.type.ndim == y.type.ndim == 2 else GpuDot()(x, y)
    return [out] if _same_type(out, node.outputs[0]) else None


# ---------------------------------------------------------------------------- in place


def _inplace_version(prop: str, inplace_op: Op) -> Any:
    """``make_inplace`` for an Op whose in-place form has ``prop`` set: ``inplace_op``."""
    return lambda node: None if getattr(node.op, prop) else inplace_op


#: FAST_RUN's ``inplace`` stage: the products write into their first input where the
#: DestroyHandler allows it (an intermediate buffer, or a shared variable's own update
#: run after every other node: core's UpdateGuard), as
#: opgraph-optimizers does for the CPU's Gemm, Gemv and Ger.
local_inplace_gpu_gemm = register_inplace(
    "local_inplace_gpu_gemm",
    [GpuGemm],
    _inplace_version("inplace", gpu_gemm_inplace),
    "gpuarray",
    rewrite_set=rewrites,
    position=30,
)
local_inplace_gpu_gemv = register_inplace(
    "local_inplace_gpu_gemv",
    [GpuGemv],
    _inplace_version("inplace", gpu_gemv_inplace),
    "gpuarray",
    rewrite_set=rewrites,
    position=31,
)
local_inplace_gpu_ger = register_inplace(
    "local_inplace_gpu_ger",
    [GpuGer],
    _inplace_version("destructive", gpu_ger_destructive),
    "gpuarray",
    rewrite_set=rewrites,
    position=32,
)
