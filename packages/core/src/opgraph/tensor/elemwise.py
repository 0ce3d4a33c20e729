"""Elemwise (a scalar op mapped over arrays), DimShuffle and CAReduce (reductions)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.op import Op
from opgraph.scalar.basic import Composite, ScalarOp
from opgraph.scalar.type import get_scalar_type, upcast
from opgraph.tensor.type import TensorType

__all__ = ["CAReduce", "DimShuffle", "Elemwise", "Sum"]


def _as_tensor(x: Any) -> Variable:
    from opgraph.tensor.basic import as_tensor_variable

    return as_tensor_variable(x)


class DimShuffle(Op):
    """Reorder dimensions, add broadcastable ones (``'x'``) and drop broadcastable ones.

    ``DimShuffle((False, False), (1, 0))`` transposes a matrix; ``(False,) -> ('x', 0)`` makes
    a row. The output is a view of the input (no copy). Printed ``InplaceDimShuffle{x,0}``
    (Theano's name: the op is a view, so "in place").
    """

    __props__ = ("input_broadcastable", "new_order", "inplace")

    def __init__(
        self,
        input_broadcastable: Sequence[bool],
        new_order: Sequence[int | str],
        inplace: bool = True,
    ) -> None:
        self.input_broadcastable = tuple(bool(b) for b in input_broadcastable)
        order = tuple("x" if o == "x" else int(o) for o in new_order)
        nd = len(self.input_broadcastable)
        seen = set()
        for o in order:
            if o == "x":
                continue
            if not 0 <= o < nd:
                raise ValueError(f"DimShuffle: dimension {o} is out of range for {nd} dimension(s)")
            if o in seen:
                raise ValueError(f"DimShuffle: dimension {o} appears twice in {order}")
            seen.add(o)
        for i, b in enumerate(self.input_broadcastable):
            if i not in seen and not b:
                raise ValueError(
                    f"DimShuffle {order} drops dimension {i}, which is not broadcastable "
                    f"(input broadcastable pattern {self.input_broadcastable}). "
                    "HINT: only length-1 broadcastable dimensions can be dropped."
                )
        self.new_order = order
        self.inplace = bool(inplace)
        self.shuffle = [o for o in order if o != "x"]
        self.drop = [i for i in range(nd) if i not in seen]
        self.augment = [i for i, o in enumerate(order) if o == "x"]
        self.view_map = {0: [0]} if self.inplace else {}

    def __str__(self) -> str:
        body = ",".join(str(o) for o in self.new_order)
        return f"InplaceDimShuffle{{{body}}}" if self.inplace else f"DimShuffle{{{body}}}"

    def make_node(self, x: Any) -> Apply:
        x = _as_tensor(x)
        if x.type.broadcastable != self.input_broadcastable:
            if x.type.ndim != len(self.input_broadcastable) or any(
                b and not xb
                for b, xb in zip(self.input_broadcastable, x.type.broadcastable, strict=True)
            ):
                raise TypeError(
                    f"{self} expects an input with broadcastable pattern "
                    f"{self.input_broadcastable}, got {x} of type {x.type}"
                )
        bcast = tuple(True if o == "x" else x.type.broadcastable[o] for o in self.new_order)
        return Apply(self, [x], [TensorType(x.type.dtype, bcast)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        (x,) = inputs
        res = x.transpose(self.shuffle + self.drop)
        shape = list(res.shape[: len(self.shuffle)])
        for a in self.augment:
            shape.insert(a, 1)
        res = res.reshape(shape)
        if not self.inplace:
            res = res.copy()
        output_storage[0][0] = res

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        (ishp,) = input_shapes
        return [tuple(1 if o == "x" else ishp[o] for o in self.new_order)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        (x,), (gz,) = inputs, output_grads
        gz = _as_tensor(gz)
        if x.type.dtype not in ("float16", "float32", "float64", "complex64", "complex128"):
            from opgraph.tensor.math import zeros_like

            return [zeros_like(x, dtype="float64")]
        # Dims added as 'x' must be broadcastable in gz to be dropped: sum them if not.
        unbroadcast = [a for a in self.augment if not gz.type.broadcastable[a]]
        if unbroadcast:
            from opgraph.tensor.math import sum as tsum

            gz = tsum(gz, axis=unbroadcast, keepdims=True)
        grad_order: list[int | str] = ["x"] * len(self.input_broadcastable)
        for i, v in enumerate(self.new_order):
            if v != "x":
                grad_order[v] = i
        return [DimShuffle(gz.type.broadcastable, grad_order)(gz)]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]) -> list[Any]:
        if eval_points[0] is None:
            return [None]
        return [self(eval_points[0])]


class Elemwise(Op):
    """Apply a scalar op element by element, broadcasting by the inputs' types.

    ``inplace_pattern`` ``{output: input}`` makes an output overwrite an input buffer
    (``Elemwise{add}[(0, 0)]``). The printed name of an Elemwise built by the tensor library is
    Theano's ``Elemwise{add,no_inplace}``.
    """

    __props__ = ("scalar_op", "inplace_pattern")

    def __init__(
        self,
        scalar_op: ScalarOp,
        inplace_pattern: dict[int, int] | None = None,
        name: str | None = None,
        nfunc_spec: Any = None,
    ) -> None:
        if not isinstance(scalar_op, ScalarOp):
            raise TypeError(f"Elemwise needs a ScalarOp, got {scalar_op!r}")
        self.scalar_op = scalar_op
        self.inplace_pattern = tuple(sorted((inplace_pattern or {}).items()))
        self.name = name
        self.destroy_map = {o: [i] for o, i in self.inplace_pattern}

    def __str__(self) -> str:
        if self.name is not None:
            return self.name
        if self.inplace_pattern:
            return f"Elemwise{{{self.scalar_op}}}{list(self.inplace_pattern)}"
        return f"Elemwise{{{self.scalar_op}}}"

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__.copy()

    def make_node(self, *inputs: Any) -> Apply:
        inputs = [_as_tensor(i) for i in inputs]
        if not inputs:
            raise TypeError(f"{self} needs at least one input")
        ndim = max(i.type.ndim for i in inputs)
        args = []
        for i in inputs:
            diff = ndim - i.type.ndim
            if diff:
                i = DimShuffle(i.type.broadcastable, ["x"] * diff + list(range(i.type.ndim)))(i)
            args.append(i)
        try:
            out_stypes = self.scalar_op.output_types([get_scalar_type(a.type.dtype) for a in args])
        except TypeError as exc:
            types = ", ".join(str(a.type) for a in args)
            raise TypeError(f"{self} cannot take inputs of types ({types}): {exc}") from exc
        bcast = (
            tuple(all(dims) for dims in zip(*(a.type.broadcastable for a in args), strict=True))
            if ndim
            else ()
        )
        outputs = [TensorType(t.dtype, bcast)() for t in out_stypes]
        for o, i in self.inplace_pattern:
            if args[i].type.dtype != outputs[o].type.dtype or args[i].type.broadcastable != bcast:
                raise TypeError(
                    f"{self}: in-place output {o} must have the type of input {i} "
                    f"({args[i].type}), got {outputs[o].type}"
                )
        return Apply(self, args, outputs)

    def _check_shapes(self, node: Apply, inputs: Sequence[Any]) -> None:
        ndim = node.outputs[0].type.ndim
        for dim in range(ndim):
            size = None
            for k, (var, val) in enumerate(zip(node.inputs, inputs, strict=True)):
                if var.type.broadcastable[dim]:
                    continue
                n = val.shape[dim]
                if size is None:
                    size, first = n, k
                elif n != size:
                    raise ValueError(
                        f"Input dimension mis-match. (input[{first}].shape[{dim}] = {size}, "
                        f"input[{k}].shape[{dim}] = {n})"
                    )

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        if len(inputs) > 1:
            self._check_shapes(node, inputs)
        with np.errstate(all="ignore"):
            res = self.scalar_op.impl(*inputs)
        if len(node.outputs) == 1:
            res = (res,)
        inplace = dict(self.inplace_pattern)
        for k, (out, cell, val) in enumerate(zip(node.outputs, output_storage, res, strict=True)):
            dtype = out.type.numpy_dtype
            if k in inplace:
                buf = inputs[inplace[k]]
                np.copyto(buf, val, casting="unsafe")
                cell[0] = buf
                continue
            arr = np.asarray(val)
            if arr.dtype != dtype:
                arr = arr.astype(dtype)
            elif not isinstance(val, np.ndarray):
                arr = np.array(arr)
            if arr.ndim != out.type.ndim:  # 0-d results of ufuncs on 0-d inputs
                arr = arr.reshape(arr.shape)
            if any(arr is i for i in inputs):
                arr = arr.copy()
            cell[0] = arr

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        ndim = node.outputs[0].type.ndim
        shape = []
        for dim in range(ndim):
            chosen = 1
            for var, shp in zip(node.inputs, input_shapes, strict=True):
                if not var.type.broadcastable[dim]:
                    chosen = shp[dim]
                    break
            shape.append(chosen)
        return [tuple(shape)] * len(node.outputs)

    def L_op(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable]:
        import opgraph.tensor.math as m

        grads = self.scalar_op.symbolic_grad(m, inputs, outputs, output_grads)
        result = []
        for x, g in zip(inputs, grads, strict=True):
            if g is None:
                result.append(None)
                continue
            g = _as_tensor(g)
            # Sum over the dimensions where x was broadcast.
            axes = [
                d
                for d, (xb, gb) in enumerate(
                    zip(x.type.broadcastable, g.type.broadcastable, strict=True)
                )
                if xb and not gb
            ]
            if axes:
                g = m.sum(g, axis=axes, keepdims=True)
            if g.type.dtype != x.type.dtype and x.type.dtype[:5] in ("float", "compl"):
                g = m.cast(g, x.type.dtype)
            result.append(g)
        return result

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]) -> list[Any]:
        from opgraph.gradient import Rop_via_Lop

        return Rop_via_Lop(self, inputs, eval_points)


class CAReduce(Op):
    """Reduce over ``axis`` (all axes when None) with a commutative, associative scalar op."""

    __props__ = ("scalar_op", "axis")
    _ufunc_reduce = {
        "add": np.add,
        "mul": np.multiply,
        "maximum": np.maximum,
        "minimum": np.minimum,
    }

    def __init__(self, scalar_op: ScalarOp, axis: Sequence[int] | int | None = None) -> None:
        self.scalar_op = scalar_op
        if isinstance(axis, int | np.integer):
            axis = (int(axis),)
        self.axis = None if axis is None else tuple(sorted({int(a) for a in axis}))

    def _axes(self, ndim: int) -> tuple[int, ...]:
        return tuple(range(ndim)) if self.axis is None else self.axis

    def _output_dtype(self, idtype: str) -> str:
        return idtype

    def make_node(self, x: Any) -> Apply:
        x = _as_tensor(x)
        ndim = x.type.ndim
        axis = self.axis
        if axis is not None:
            norm = []
            for a in axis:
                if not -ndim <= a < ndim:
                    raise ValueError(
                        f"{self}: axis {a} is out of range for {x} with {ndim} dimension(s)"
                    )
                norm.append(a % ndim)
            if tuple(sorted(set(norm))) != axis:
                op = self.clone_with_axis(norm)
                return op.make_node(x)
        axes = self._axes(ndim)
        bcast = tuple(b for i, b in enumerate(x.type.broadcastable) if i not in axes)
        return Apply(self, [x], [TensorType(self._output_dtype(x.type.dtype), bcast)()])

    def clone_with_axis(self, axis: Sequence[int]) -> CAReduce:
        """A copy of this op reducing over other axes."""
        props = self._props_dict()
        props["axis"] = axis
        return type(self)(**props)

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        (x,) = inputs
        axes = self._axes(x.ndim)
        name = getattr(self.scalar_op, "name", None)
        ufunc = self._ufunc_reduce.get(name)
        out_dtype = node.outputs[0].type.numpy_dtype
        if ufunc is None:
            raise TypeError(f"{self} has no NumPy reduction for scalar op {self.scalar_op}")
        if x.size == 0 and self.scalar_op.identity is None and any(x.shape[a] == 0 for a in axes):
            raise ValueError(
                f"{self}: cannot reduce an empty array along axes {axes} (no identity)"
            )
        res = ufunc.reduce(x, axis=axes, dtype=self._acc_dtype(x.dtype))
        output_storage[0][0] = np.asarray(res, dtype=out_dtype)

    def _acc_dtype(self, idtype: np.dtype) -> Any:
        return None

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        (shp,) = input_shapes
        axes = self._axes(len(shp))
        return [tuple(s for i, s in enumerate(shp) if i not in axes)]

    def __str__(self) -> str:
        axis = "" if self.axis is None else f"axis=[{', '.join(map(str, self.axis))}]"
        return f"{type(self).__name__}{{{self.scalar_op}{', ' + axis if axis else ''}}}"


def _default_sum_dtype(idtype: str) -> str:
    return {
        "bool": "int64",
        "int8": "int64",
        "int16": "int64",
        "int32": "int64",
        "uint8": "uint64",
        "uint16": "uint64",
        "uint32": "uint64",
    }.get(idtype, idtype)


def _default_acc_dtype(idtype: str) -> str:
    if idtype in ("float16", "float32"):
        return "float64"
    if idtype == "complex64":
        return "complex128"
    return _default_sum_dtype(idtype)


class Sum(CAReduce):
    """Sum over ``axis`` (all axes when None), accumulating in ``acc_dtype``.

    Printed as Theano does: ``Sum{acc_dtype=float64}``, ``Sum{axis=[0], acc_dtype=float64}``.
    """

    __props__ = ("axis", "dtype", "acc_dtype")

    def __init__(
        self,
        axis: Sequence[int] | int | None = None,
        dtype: str | None = None,
        acc_dtype: str | None = None,
    ) -> None:
        from opgraph.scalar.basic import add

        super().__init__(add, axis)
        self.dtype = dtype
        self.acc_dtype = acc_dtype

    def make_node(self, x: Any) -> Apply:
        x = _as_tensor(x)
        if self.dtype is None or self.acc_dtype is None:
            dtype = self.dtype or _default_sum_dtype(x.type.dtype)
            acc = self.acc_dtype or _default_acc_dtype(dtype)
            if upcast(acc, dtype) != acc:
                raise TypeError(f"Sum: acc_dtype {acc} cannot hold the output dtype {dtype}")
            return Sum(self.axis, dtype, acc).make_node(x)
        return super().make_node(x)

    def _output_dtype(self, idtype: str) -> str:
        return self.dtype or _default_sum_dtype(idtype)

    def _acc_dtype(self, idtype: np.dtype) -> Any:
        return self.acc_dtype

    def __str__(self) -> str:
        axis = "" if self.axis is None else f"axis=[{', '.join(map(str, self.axis))}], "
        return f"Sum{{{axis}acc_dtype={self.acc_dtype}}}"

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        (x,), (gz,) = inputs, output_grads
        gz = _as_tensor(gz)
        if x.type.dtype not in ("float16", "float32", "float64", "complex64", "complex128"):
            from opgraph.tensor.math import zeros_like

            return [zeros_like(x, dtype="float64")]
        axes = self._axes(x.type.ndim)
        pattern: list[int | str] = []
        k = 0
        for i in range(x.type.ndim):
            if i in axes:
                pattern.append("x")
            else:
                pattern.append(k)
                k += 1
        from opgraph.tensor.math import cast, fill

        g = DimShuffle(gz.type.broadcastable, pattern)(gz)
        g = fill(x, g)
        if g.type.dtype != x.type.dtype:
            g = cast(g, x.type.dtype)
        return [g]

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]) -> list[Any]:
        if eval_points[0] is None:
            return [None]
        return [self(eval_points[0])]


__all__ += ["Composite"]
