"""GpuArrayType and its variables: tensors whose values live in GPU memory (GpuArray).

As in Theano's ``theano.gpuarray``, a GPU variable takes part in ordinary tensor
expressions: ``x_gpu + 1`` first moves ``x_gpu`` to the host (``host_from_gpu``), and the
GPU rewrites then lift the whole expression onto the device, with transfers only at its
boundaries. A TensorType variable given where a GpuArrayType one is expected (an update of
a GPU shared variable) becomes ``GpuFromHost(x)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.compile.sharedvalue import SharedVariable
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.type import Type
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.type import TensorType
from opgraph.tensor.variable import _tensor_py_operators
from opgraph_cuda.array import GpuArray
from opgraph_cuda.gpuop import GpuOp, Run
from opgraph_cuda.runtime import get_runtime

__all__ = [
    "GpuArrayConstant",
    "GpuArraySharedVariable",
    "GpuArrayType",
    "GpuArrayVariable",
    "GpuFromHost",
    "HostFromGpu",
    "gpu_from_host",
    "gpu_supported_dtypes",
    "host_from_gpu",
]

#: Dtypes a GpuArrayType may hold (kernels exist for float32 and the integer/bool types;
#: float16 is stored as such and computed in float32).
gpu_supported_dtypes = (
    "float16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
)

_KINDS = {
    (): "scalar",
    (False,): "vector",
    (False, True): "col",
    (True, False): "row",
    (False, False): "matrix",
}


class GpuArrayType(Type):
    """The type of GpuArray values of one ``dtype`` and ``len(broadcastable)`` dimensions.

    ``context_name`` is Theano's name of the GPU context; opgraph has one context per
    process (``None``), so it only takes part in equality and printing.
    """

    __props__ = ("dtype", "broadcastable", "context_name")

    def __init__(
        self, dtype: str, broadcastable: Sequence[bool], context_name: str | None = None
    ) -> None:
        dtype = str(np.dtype(dtype))
        if dtype not in gpu_supported_dtypes:
            raise TypeError(
                f"GpuArrayType cannot hold {dtype}; supported: {', '.join(gpu_supported_dtypes)}"
            )
        self.dtype = dtype
        self.broadcastable = tuple(bool(b) for b in broadcastable)
        self.context_name = context_name
        self.numpy_dtype = np.dtype(dtype)

    @property
    def ndim(self) -> int:
        return len(self.broadcastable)

    def clone(self, dtype: str | None = None, broadcastable: Sequence[bool] | None = None) -> Any:
        """The same type with another dtype or broadcastable pattern."""
        return GpuArrayType(
            dtype or self.dtype,
            self.broadcastable if broadcastable is None else broadcastable,
            self.context_name,
        )

    def tensor_type(self) -> TensorType:
        """The host type of the same dtype and pattern (what ``host_from_gpu`` gives)."""
        return TensorType(self.dtype, self.broadcastable)

    def filter(self, data: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        """``data`` as a GpuArray of this type: a GpuArray is checked; unless ``strict``, a
        host value is converted as TensorType would and copied to the device."""
        if isinstance(data, GpuArray):
            if data.dtype != self.numpy_dtype:
                if strict:
                    raise TypeError(
                        f"{self} expected a GpuArray of dtype {self.dtype}, got {data.dtype}"
                    )
                host = self.tensor_type().filter(data.get(), allow_downcast=allow_downcast)
                return GpuArray.from_host(host, runtime=data.runtime)
            self._check_shape(data)
            return data
        if strict:
            raise TypeError(
                f"{self} expected a GpuArray, got {type(data).__name__} (strict=True does not "
                "copy host values to the GPU)"
            )
        host = self.tensor_type().filter(data, allow_downcast=allow_downcast)
        return GpuArray.from_host(host)

    def _check_shape(self, data: GpuArray) -> None:
        if data.ndim != self.ndim:
            raise TypeError(
                f"{self} expected a GpuArray of {self.ndim} dimensions, got {data.ndim} "
                f"(shape {data.shape})"
            )
        for d, (n, b) in enumerate(zip(data.shape, self.broadcastable, strict=True)):
            if b and n != 1:
                raise TypeError(
                    f"{self}: dimension {d} is broadcastable, so its length must be 1, got "
                    f"shape {data.shape}"
                )

    def is_valid_value(self, data: Any) -> bool:
        try:
            self.filter(data, strict=True)
        except TypeError:
            return False
        return True

    def filter_variable(self, other: Variable, allow_convert: bool = True) -> Variable:
        """``other`` as a variable of this type: a host tensor of the same dtype and pattern
        becomes ``GpuFromHost(other)`` (even without ``allow_convert``: that is how an
        update of a GPU shared variable, built from host ops, is stored back on the GPU)."""
        if not isinstance(other, Variable):
            other = self.make_constant(other)
        vtype = other.type
        if (
            isinstance(vtype, TensorType)
            and vtype.dtype == self.dtype
            and vtype.broadcastable == self.broadcastable
        ):
            return GpuFromHost(self.context_name)(other)
        return super().filter_variable(other, allow_convert)

    def convert_variable(self, var: Variable) -> Variable | None:
        """A host tensor of the same dtype and a compatible pattern becomes ``GpuFromHost``;
        a GPU one whose pattern is at least as broadcastable is taken as it is."""
        vtype = var.type
        if vtype == self:
            return var
        fits = (
            isinstance(vtype, TensorType | GpuArrayType)
            and vtype.dtype == self.dtype
            and vtype.ndim == self.ndim
            and all(
                vb or not b for b, vb in zip(self.broadcastable, vtype.broadcastable, strict=True)
            )
        )
        if not fits:
            return None
        if isinstance(vtype, GpuArrayType):
            return var
        return GpuFromHost(self.context_name)(var)

    def values_eq(self, a: Any, b: Any) -> bool:
        return self.tensor_type().values_eq(np.asarray(a), np.asarray(b))

    def values_eq_approx(self, a: Any, b: Any, **kwargs: Any) -> bool:
        return self.tensor_type().values_eq_approx(np.asarray(a), np.asarray(b), **kwargs)

    def may_share_memory(self, a: Any, b: Any) -> bool:
        return isinstance(a, GpuArray) and isinstance(b, GpuArray) and a.buffer is b.buffer

    def get_shape_info(self, obj: Any) -> Any:
        return getattr(obj, "shape", None)

    def __str__(self) -> str:
        kind = _KINDS.get(self.broadcastable)
        if kind is None:
            kind = str(self.broadcastable) if any(self.broadcastable) else f"{self.ndim}D"
        return f"GpuArrayType<{self.context_name}>({self.dtype}, {kind})"

    def __repr__(self) -> str:
        return str(self)


class _GpuOperators(_tensor_py_operators):
    """Tensor operators for GPU variables: they act on ``host_from_gpu(self)``, and the GPU
    rewrites move the result back to the device."""

    def _as_TensorVariable(self) -> Variable:
        return host_from_gpu(self)

    def transfer(self, target: str | None) -> Variable:
        """This variable on ``target``: ``"cpu"`` moves it to the host; ``None``, ``"gpu"``
        or a context name keeps it on the device."""
        if target == "cpu":
            return self._as_TensorVariable()
        return self  # type: ignore[return-value]


class GpuArrayVariable(_GpuOperators, Variable):
    """A symbolic GPU tensor."""


class GpuArrayConstant(_GpuOperators, Constant):
    """A GPU tensor constant: the device copy of a host array, merged by its host value."""

    def __init__(self, type: GpuArrayType, data: Any, name: str | None = None) -> None:
        host = np.asarray(data.get() if isinstance(data, GpuArray) else data)
        super().__init__(type, type.filter(data), name)
        self.tag.host_value = host

    def signature(self) -> tuple[Any, ...]:
        host = self.tag.host_value
        return (self.type, host.dtype.str, host.shape, host.tobytes())

    def __str__(self) -> str:
        if self.name is not None:
            return self.name
        return f"GpuArrayConstant{{{np.array2string(self.tag.host_value, threshold=10)}}}"


class GpuArraySharedVariable(_GpuOperators, SharedVariable):
    """A shared variable whose value stays on the GPU between calls.

    ``get_value()`` returns a NumPy copy (``return_internal_type=True`` gives the GpuArray);
    ``set_value`` takes a NumPy array or a GpuArray.
    """

    __hash__ = SharedVariable.__hash__

    def get_value(self, borrow: bool = False, return_internal_type: bool = False) -> Any:
        value = self.container.value
        if return_internal_type:
            return value if borrow else value.copy()
        return value.get()

    def set_value(self, new_value: Any, borrow: bool = False) -> None:
        if isinstance(new_value, GpuArray) and not borrow:
            new_value = new_value.copy()
        super().set_value(new_value, borrow=True)

    def zero(self, borrow: bool = False) -> None:
        value = self.container.value
        self.set_value(GpuArray.zeros(value.shape, value.dtype, value.runtime), borrow=True)


class GpuFromHost(GpuOp):
    """Copy a host tensor to the GPU (Theano's ``GpuFromHost``)."""

    __props__ = ("context_name",)

    def __init__(self, context_name: str | None = None) -> None:
        self.context_name = context_name

    def __str__(self) -> str:
        return f"GpuFromHost<{self.context_name}>"

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        if not isinstance(x.type, TensorType):
            raise TypeError(f"{self} takes a host tensor, got {x} of type {x.type}")
        out = GpuArrayType(x.type.dtype, x.type.broadcastable, self.context_name)()
        return Apply(self, [x], [out])

    def prepare_gpu(self, node: Apply) -> Run:
        runtime = get_runtime()
        dtype = node.outputs[0].type.numpy_dtype

        def run(inputs: Sequence[Any]) -> list[GpuArray]:
            (x,) = inputs
            if isinstance(x, GpuArray):
                return [x]
            return [GpuArray.from_host(np.asarray(x, dtype=dtype), runtime=runtime)]

        return run

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return list(input_shapes)

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        (gz,) = output_grads
        return [host_from_gpu(gz) if isinstance(gz.type, GpuArrayType) else gz]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list[Any]:
        return [None if eval_points[0] is None else self(eval_points[0])]


class HostFromGpu(GpuOp):
    """Copy a GPU tensor to the host (Theano's ``HostFromGpu``)."""

    __props__ = ()

    def __str__(self) -> str:
        return "HostFromGpu(gpuarray)"

    def make_node(self, x: Any) -> Apply:
        if not (isinstance(x, Variable) and isinstance(x.type, GpuArrayType)):
            raise TypeError(f"{self} takes a GPU variable, got {x!r}")
        return Apply(self, [x], [x.type.tensor_type()()])

    def prepare_gpu(self, node: Apply) -> Run:
        return lambda inputs: [inputs[0].get()]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return list(input_shapes)

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        return [GpuFromHost(inputs[0].type.context_name)(output_grads[0])]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list[Any]:
        return [None if eval_points[0] is None else self(eval_points[0])]


host_from_gpu = HostFromGpu()


def gpu_from_host(x: Any, context_name: str | None = None) -> Variable:
    """``x`` copied to the GPU."""
    return GpuFromHost(context_name)(x)


GpuArrayType.variable_type = GpuArrayVariable  # type: ignore[attr-defined]
GpuArrayType.constant_type = GpuArrayConstant  # type: ignore[attr-defined]


def gpuarray_shared_constructor(
    value: Any,
    name: str | None = None,
    strict: bool = False,
    allow_downcast: bool | None = None,
    borrow: bool = False,
    broadcastable: Sequence[bool] | None = None,
    target: str | None = None,
) -> GpuArraySharedVariable:
    """A GPU shared variable holding ``value`` (a NumPy array or a GpuArray), as Theano's
    ``theano.gpuarray.gpuarray_shared_constructor``; no dimension broadcasts unless
    ``broadcastable`` says so."""
    if not isinstance(value, np.ndarray | GpuArray):
        raise TypeError(
            f"gpuarray_shared_constructor takes a numpy.ndarray or a GpuArray, got "
            f"{type(value).__name__}"
        )
    if broadcastable is None:
        broadcastable = (False,) * value.ndim
    gtype = GpuArrayType(str(value.dtype), broadcastable, target)
    if isinstance(value, GpuArray):
        data = value if borrow else value.copy()
    else:
        data = GpuArray.from_host(value)
    return GpuArraySharedVariable(
        name=name, type=gtype, value=data, strict=strict, allow_downcast=allow_downcast
    )
