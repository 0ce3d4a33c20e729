"""Elemwise (a scalar op mapped over arrays), DimShuffle and CAReduce (reductions), with
Theano's reduction ops of this module: Sum, Prod, All and Any.

Their gradients are built with the tensor math namespace (``m.mul``, ``m.sum``, ``m.cast``:
the one scalar-op gradients are written against), which is defined above this module from
these ops: :mod:`opgraph.tensor.math` registers itself with :func:`set_math_namespace`.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from types import ModuleType

import numpy as np

from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Variable
from opgraph.graph.clone import clone_replace
from opgraph.graph.null_type import NullType, grad_not_implemented
from opgraph.graph.op import Op
from opgraph.graph.utils import MethodNotDefined
from opgraph.scalar.basic import Composite, ScalarOp, add
from opgraph.scalar.basic import and_ as scalar_and
from opgraph.scalar.basic import mul as scalar_mul
from opgraph.scalar.basic import or_ as scalar_or
from opgraph.scalar.extra import mul_without_zeros
from opgraph.scalar.type import get_scalar_type, upcast
from opgraph.tensor.basic import as_tensor_variable as _as_tensor
from opgraph.tensor.type import TensorType

__all__ = ["CAReduce", "DimShuffle", "Elemwise", "Sum", "broadcast_error"]

#: The tensor math namespace gradients are built with (see :func:`set_math_namespace`).
m: typing.Any = None


def set_math_namespace(namespace: ModuleType) -> None:
    """Build the gradients of these ops with ``namespace`` (``opgraph.tensor.math``)."""
    global m
    m = namespace


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

    def make_node(self, x: typing.Any) -> Apply:
        x = _as_tensor(x)
        if x.type.broadcastable != self.input_broadcastable and (
            x.type.ndim != len(self.input_broadcastable)
            or any(
                b and not xb
                for b, xb in zip(self.input_broadcastable, x.type.broadcastable, strict=True)
            )
        ):
            raise TypeError(
                f"{self} expects an input with broadcastable pattern "
                f"{self.input_broadcastable}, got {x} of type {x.type}"
            )
        bcast = tuple(True if o == "x" else x.type.broadcastable[o] for o in self.new_order)
        return Apply(self, [x], [TensorType(x.type.dtype, bcast)()])

    def perform(
        self, node: Apply, inputs: Sequence[typing.Any], output_storage: list[list[typing.Any]]
    ) -> None:
        (x,) = inputs
        res = x.transpose(self.shuffle + self.drop)
        shape = list(res.shape[: len(self.shuffle)])
        for a in self.augment:
            shape.insert(a, 1)
        res = res.reshape(shape)
        if not self.inplace:
            res = res.copy()
        output_storage[0][0] = res

    def infer_shape(self, node: Apply, input_shapes: Sequence[typing.Any]) -> list[typing.Any]:
        (ishp,) = input_shapes
        return [tuple(1 if o == "x" else ishp[o] for o in self.new_order)]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        (x,), (gz,) = inputs, output_grads
        gz = _as_tensor(gz)
        if x.type.dtype not in ("float16", "float32", "float64", "complex64", "complex128"):
            return [m.zeros_like(x, dtype="float64")]
        # Dims added as 'x' must be broadcastable in gz to be dropped: sum them if not.
        unbroadcast = [a for a in self.augment if not gz.type.broadcastable[a]]
        if unbroadcast:
            gz = m.sum(gz, axis=unbroadcast, keepdims=True)
        grad_order: list[int | str] = ["x"] * len(self.input_broadcastable)
        for i, v in enumerate(self.new_order):
            if v != "x":
                grad_order[v] = i
        return [DimShuffle(gz.type.broadcastable, grad_order)(gz)]

    def R_op(
        self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]
    ) -> list[typing.Any]:
        if eval_points[0] is None:
            return [None]
        return [self(eval_points[0])]


#: ``{(dtype, broadcastable): TensorType}`` of Elemwise outputs: a type is immutable, and the
#: nodes of a big graph (thousands, rebuilt many times by the rewrites) share a few of them.
_OUTPUT_TYPES: dict[tuple[str, tuple[bool, ...]], TensorType] = {}


def _output_type(dtype: str, broadcastable: tuple[bool, ...]) -> TensorType:
    key = (dtype, broadcastable)
    t = _OUTPUT_TYPES.get(key)
    if t is None:
        t = _OUTPUT_TYPES[key] = TensorType(dtype, broadcastable)
    return t


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 4] + " ..."


def _input_label(var: Variable) -> str:
    """How an error names an input: its name, else a short printed form (``exp(x)``)."""
    if var.name:
        return var.name
    try:
        from opgraph.printing.pprint import pprint

        return _short(str(pprint(var)), 40)
    except Exception:  # printing must never hide the real error
        return str(var)


def broadcast_error(
    node: Apply, values: Sequence[typing.Any], dim: int, first: int, k: int
) -> ValueError:
    """The error for inputs ``first`` and ``k`` of the Elemwise ``node`` whose lengths differ
    in dimension ``dim``, where neither type declares it broadcastable.

    It names both inputs and their shapes in its first line (``Elemwise{add,no_inplace}: x
    has shape (3,), y has shape (4,): they cannot broadcast ...``); the function's error
    report puts the line that created the node right after it. ``Elemwise.perform`` and
    backend-c's elementwise thunk raise it alike.
    """
    a, b = node.inputs[first], node.inputs[k]
    sa, sb = tuple(np.shape(values[first])), tuple(np.shape(values[k]))
    na, nb = sa[dim], sb[dim]
    label_a, label_b = _input_label(a), _input_label(b)
    if label_a == label_b:
        label_a, label_b = f"input {first} ({label_a})", f"input {k} ({label_b})"
    why = f"Input dimension mis-match in dimension {dim}: {na} vs {nb}"
    if 1 in (na, nb):
        one = label_a if na == 1 else label_b
        why += f"; {one}'s type does not declare dimension {dim} broadcastable"
    return ValueError(
        f"{_short(str(node.op), 60)}: {label_a} has shape {sa}, {label_b} has shape {sb}: "
        f"they cannot broadcast ({why})"
    )


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
        nfunc_spec: typing.Any = None,
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
            # as Theano's in-place pass left them: the scalar op by class, Elemwise{Add}[(0, 1)]
            return f"Elemwise{{{self.scalar_op.class_str()}}}{list(self.inplace_pattern)}"
        return f"Elemwise{{{self.scalar_op}}}"

    def __getstate__(self) -> dict[str, typing.Any]:
        state = self.__dict__.copy()
        state.pop("_cached_hash", None)  # str hashes differ between processes
        return state

    def __hash__(self) -> int:
        # Ops are immutable: hash the props (a Composite's whole inner graph) once.
        h = self.__dict__.get("_cached_hash")
        if h is None:
            h = self.__dict__["_cached_hash"] = super().__hash__()
        return h

    def make_node(self, *inputs: typing.Any) -> Apply:
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
        outputs = [_output_type(t.dtype, bcast)() for t in out_stypes]
        for o, i in self.inplace_pattern:
            if args[i].type.dtype != outputs[o].type.dtype or args[i].type.broadcastable != bcast:
                raise TypeError(
                    f"{self}: in-place output {o} must have the type of input {i} "
                    f"({args[i].type}), got {outputs[o].type}"
                )
        return Apply(self, args, outputs)

    def _check_shapes(self, node: Apply, inputs: Sequence[typing.Any]) -> None:
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
                    raise broadcast_error(node, inputs, dim, first, k)

    def perform(
        self, node: Apply, inputs: Sequence[typing.Any], output_storage: list[list[typing.Any]]
    ) -> None:
        if len(inputs) > 1:
            self._check_shapes(node, inputs)
        out_kinds = {o.type.numpy_dtype.kind for o in node.outputs}
        if out_kinds <= {"f", "c"} and any(np.asarray(i).dtype.kind in "biu" for i in inputs):
            # Compute in the output precision: NumPy would give float16 for int8 inputs.
            ftype = node.outputs[0].type.numpy_dtype
            inputs = [i.astype(ftype) if np.asarray(i).dtype.kind in "biu" else i for i in inputs]
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
            if any(arr is i or np.may_share_memory(arr, i) for i in inputs):
                arr = arr.copy()  # e.g. np.real and the identity return views
            cell[0] = arr

    def infer_shape(self, node: Apply, input_shapes: Sequence[typing.Any]) -> list[typing.Any]:
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
        grads = self.scalar_op.symbolic_grad(m, inputs, outputs, output_grads)
        result = []
        for x, g in zip(inputs, grads, strict=True):
            if g is None or isinstance(g.type, NullType):  # grad_not_implemented/undefined
                result.append(g)
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

    def R_op(
        self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]
    ) -> list[typing.Any]:
        """``J v``: each output's partial derivatives times the inputs' tangents, summed.

        The partials come from the scalar op's gradient with unit output gradients, taken on
        fresh copies of the inputs so that an input computed from another (``sin(x) * x``)
        contributes its partial only, not a total derivative.
        """
        dummies = [i.type() for i in inputs]
        outputs = self(*dummies, return_list=True)
        results: list[typing.Any] = []
        for k, out in enumerate(outputs):
            if out.type.dtype not in _continuous:
                results.append(None)
                continue
            ograds = [m.ones_like(o) if j == k else m.zeros_like(o) for j, o in enumerate(outputs)]
            partials = self.scalar_op.symbolic_grad(m, dummies, outputs, ograds)
            total = None
            for x, ev, partial in zip(inputs, eval_points, partials, strict=True):
                if ev is None or partial is None or x.type.dtype not in _continuous:
                    continue
                term = m.mul(clone_replace(partial, dict(zip(dummies, inputs))), ev)
                total = term if total is None else m.add(total, term)
            if total is not None and total.type.dtype != out.type.dtype:
                total = m.cast(total, out.type.dtype)
            results.append(total)
        return results


class CAReduce(Op):
    """Reduce over ``axis`` (all axes when None) with a commutative, associative scalar op.

    Printed as Theano 1.0 prints it: ``Reduce{maximum}`` or ``Reduce{maximum}{0, 1}``.
    Reducing a zero-length axis gives the scalar op's identity, or a ValueError when it has
    none (``maximum``, ``minimum``).
    """

    __props__ = ("scalar_op", "axis")
    _ufunc_reduce = {
        "add": np.add,
        "mul": np.multiply,
        "maximum": np.maximum,
        "minimum": np.minimum,
        "and_": np.bitwise_and,
        "or_": np.bitwise_or,
        "xor": np.bitwise_xor,
    }

    def __init__(self, scalar_op: ScalarOp, axis: Sequence[int] | int | None = None) -> None:
        if not isinstance(scalar_op, ScalarOp):
            raise TypeError(f"CAReduce needs a binary ScalarOp, got {scalar_op!r}")
        self.scalar_op = scalar_op
        if isinstance(axis, int | np.integer):
            axis = (int(axis),)
        self.axis = None if axis is None else tuple(sorted({int(a) for a in axis}))

    def _axes(self, ndim: int) -> tuple[int, ...]:
        return tuple(range(ndim)) if self.axis is None else self.axis

    def _output_dtype(self, idtype: str) -> str:
        return idtype

    def make_node(self, x: typing.Any) -> Apply:
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

    def _check_empty(self, x: np.ndarray, axes: tuple[int, ...]) -> None:
        if self.scalar_op.identity is None and any(x.shape[a] == 0 for a in axes):
            raise ValueError(
                f"{self}: cannot reduce an empty array: the {self.scalar_op} of no values is "
                f"undefined (input shape {x.shape}, reduced axes {list(axes)}). "
                "HINT: check the input is not empty before reducing it."
            )

    def _reduce(self, x: np.ndarray, axes: tuple[int, ...], acc_dtype: typing.Any) -> typing.Any:
        name = getattr(self.scalar_op, "name", None)
        ufunc = self._ufunc_reduce.get(name)
        if ufunc is None:
            ufunc = np.frompyfunc(self.scalar_op.impl, 2, 1)
            res = x.astype(acc_dtype or x.dtype, copy=False)
            for a in sorted(axes, reverse=True):
                if res.shape[a] == 0:
                    shape = res.shape[:a] + res.shape[a + 1 :]
                    res = np.full(shape, self.scalar_op.identity, dtype=res.dtype)
                else:
                    res = ufunc.reduce(res, axis=a)
            return res
        if not axes:
            return np.array(x, dtype=acc_dtype or x.dtype, copy=True)
        return ufunc.reduce(x, axis=axes, dtype=acc_dtype)

    def perform(
        self, node: Apply, inputs: Sequence[typing.Any], output_storage: list[list[typing.Any]]
    ) -> None:
        (x,) = inputs
        axes = self._axes(x.ndim)
        self._check_empty(x, axes)
        res = self._reduce(x, axes, self._acc_dtype(x.dtype))
        out = np.asarray(res, dtype=node.outputs[0].type.numpy_dtype)
        if out is x or np.may_share_memory(out, x):
            out = out.copy()
        output_storage[0][0] = out

    def _acc_dtype(self, idtype: np.dtype) -> typing.Any:
        return None

    def infer_shape(self, node: Apply, input_shapes: Sequence[typing.Any]) -> list[typing.Any]:
        (shp,) = input_shapes
        axes = self._axes(len(shp))
        return [tuple(s for i, s in enumerate(shp) if i not in axes)]

    def _expand(self, node_input: Variable, v: Variable) -> Variable:
        """``v`` (reduced) with the reduced axes put back as broadcastable dims."""
        axes = self._axes(node_input.type.ndim)
        pattern: list[int | str] = []
        k = 0
        for i in range(node_input.type.ndim):
            if i in axes:
                pattern.append("x")
            else:
                pattern.append(k)
                k += 1
        v = _as_tensor(v)
        return DimShuffle(v.type.broadcastable, pattern)(v)

    def L_op(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable]:
        """Gradient of a max/min reduction: the incoming gradient goes to the extreme entries."""
        (x,), (z,), (gz,) = inputs, outputs, output_grads
        if getattr(self.scalar_op, "name", None) not in ("maximum", "minimum"):
            return self.grad(inputs, output_grads)  # a subclass's, or MethodNotDefined
        if x.type.dtype not in _continuous:
            return [m.zeros_like(x, dtype="float64")]
        return [m.mul(m.eq(x, self._expand(x, z)), self._expand(x, gz))]

    def R_op(
        self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]
    ) -> list[typing.Any]:
        if eval_points[0] is None:
            return [None]
        if getattr(self.scalar_op, "name", None) not in ("maximum", "minimum"):
            raise MethodNotDefined(f"{self} does not define R_op")
        (x,) = inputs
        z = self(x)
        mask = m.eq(x, self._expand(x, z))
        return [m.sum(m.mul(mask, eval_points[0]), axis=self.axis)]

    def __str__(self) -> str:
        if self.axis is None:
            return f"Reduce{{{self.scalar_op}}}"
        return f"Reduce{{{self.scalar_op}}}{{{', '.join(map(str, self.axis))}}}"


_continuous = ("float16", "float32", "float64", "complex64", "complex128")


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
    if idtype == "float16":
        return "float32"
    if idtype == "float32":
        return "float64"
    if idtype == "complex64":
        return "complex128"
    return _default_sum_dtype(idtype)


class CAReduceDtype(CAReduce):
    """A CAReduce with an output ``dtype`` and an accumulator ``acc_dtype`` (Theano's rules).

    Defaults: integer and bool inputs give int64 (uint64 for unsigned) outputs; the accumulator
    is at least int64 / uint64 / float64 / complex128 (float16 accumulates in float32). An
    ``acc_dtype`` that would lose precision on the input is a TypeError. Printed
    ``Sum{axis=[0], acc_dtype=float64}``.
    """

    __props__ = ("scalar_op", "axis", "dtype", "acc_dtype")

    def __init__(
        self,
        scalar_op: ScalarOp,
        axis: Sequence[int] | int | None = None,
        dtype: str | None = None,
        acc_dtype: str | None = None,
    ) -> None:
        super().__init__(scalar_op, axis)
        self.dtype = None if dtype is None else str(np.dtype(dtype))
        self.acc_dtype = None if acc_dtype is None else str(np.dtype(acc_dtype))

    def _output_dtype(self, idtype: str) -> str:
        return self.dtype or _default_sum_dtype(idtype)

    def _resolve_acc_dtype(self, idtype: str) -> str:
        acc = self.acc_dtype
        if acc is None:
            return _default_acc_dtype(idtype)
        if acc in _continuous and idtype not in _continuous:
            return acc  # a float accumulator for integers is fine
        if upcast(idtype, acc) != acc:
            raise TypeError(
                f"cannot build {type(self).__name__} with input dtype {idtype} and acc_dtype "
                f"{acc}: the accumulator would lose precision. HINT: leave acc_dtype out, use an "
                f"acc_dtype at least as precise as {upcast(idtype, acc)}, or pass dtype= to get "
                "a precise reduction cast to that dtype at the end."
            )
        return acc

    def make_node(self, x: typing.Any) -> Apply:
        x = _as_tensor(x)
        dtype = self._output_dtype(x.type.dtype)
        acc = self._resolve_acc_dtype(x.type.dtype)
        if dtype != self.dtype or acc != self.acc_dtype:
            props = self._props_dict()
            props.update(dtype=dtype, acc_dtype=acc)
            return type(self)(**props).make_node(x)
        return super().make_node(x)

    def _acc_dtype(self, idtype: np.dtype) -> typing.Any:
        return self.acc_dtype

    def _str_from_props(self) -> str:
        """``Prod{axis=(0,), dtype='float32', acc_dtype='float64'}``: how Theano printed the
        reductions without a printing of their own (built from their props)."""
        axis = None if self.axis is None else tuple(self.axis)
        return (
            f"{type(self).__name__}{{axis={axis!r}, dtype={self.dtype!r}, "
            f"acc_dtype={self.acc_dtype!r}}}"
        )

    def __str__(self) -> str:
        name = type(self).__name__
        if name == "CAReduceDtype":
            name = f"ReduceDtype{{{self.scalar_op}}}"
        axis = "" if self.axis is None else f"axis=[{', '.join(map(str, self.axis))}], "
        return f"{name}{{{axis}acc_dtype={self.acc_dtype}}}"


class Sum(CAReduceDtype):
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
        super().__init__(add, axis, dtype, acc_dtype)

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        (x,), (gz,) = inputs, output_grads
        if x.type.dtype not in _continuous or self._output_dtype(x.type.dtype) not in _continuous:
            return [m.zeros_like(x, dtype="float64")]
        g = m.fill(x, self._expand(x, gz))
        if g.type.dtype != x.type.dtype:
            g = m.cast(g, x.type.dtype)
        return [g]

    def L_op(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable]:
        return self.grad(inputs, output_grads)

    def R_op(
        self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]
    ) -> list[typing.Any]:
        if eval_points[0] is None:
            return [None]
        return [self(eval_points[0])]


# ----------------------------------------------------------------------------------------
# Theano's other reductions of this module: prod, all, any (their functions are in
# opgraph.tensor.reduction)


def _float_zeros(x: Variable) -> Variable:
    return m.zeros_like(x, dtype=config.floatX)


def _expand_pattern(ndim: int, axes: Sequence[int]) -> list[int | str]:
    """DimShuffle pattern putting back the reduced ``axes`` of an ``ndim``-d input."""
    pattern: list[int | str] = []
    k = 0
    for i in range(ndim):
        if i in axes:
            pattern.append("x")
        else:
            pattern.append(k)
            k += 1
    return pattern


def _expand_reduced(v: Variable, ndim: int, axes: Sequence[int]) -> Variable:
    v = _as_tensor(v)
    return DimShuffle(v.type.broadcastable, _expand_pattern(ndim, axes))(v)


class Prod(CAReduceDtype):
    """Product over ``axis`` (all axes when None).

    Printed as Theano printed it: ``Prod{axis=(0,), dtype='float64', acc_dtype='float64'}``.

    The gradient handles zeros exactly (Theano's method): a group without zeros gets
    ``gz * prod / x``; in a group with a single zero only that entry gets the product of the
    others; groups with several zeros get zero. ``no_zeros_in_input=True`` promises there
    are no zeros and uses the division alone.
    """

    __props__ = ("axis", "dtype", "acc_dtype", "no_zeros_in_input")
    __str__ = CAReduceDtype._str_from_props

    def __init__(
        self,
        axis: Sequence[int] | int | None = None,
        dtype: str | None = None,
        acc_dtype: str | None = None,
        no_zeros_in_input: bool = False,
    ) -> None:
        super().__init__(scalar_mul, axis, dtype, acc_dtype)
        self.no_zeros_in_input = bool(no_zeros_in_input)

    def L_op(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable]:
        (x,), (gz,) = inputs, output_grads
        if outputs[0].type.dtype not in _continuous or x.type.dtype not in _continuous:
            return [_float_zeros(x)]
        axes = self._axes(x.type.ndim)
        prod_out = _expand_reduced(outputs[0], x.type.ndim, axes)
        gz = _expand_reduced(gz, x.type.ndim, axes)
        without_zeros = m.true_div(m.mul(gz, prod_out), x)
        if self.no_zeros_in_input:
            return [without_zeros]
        where_zeros = m.eq(x, 0.0)
        n_zeros = m.sum(where_zeros, axis=self.axis)
        single_zero_group = _expand_reduced(m.eq(n_zeros, 1), x.type.ndim, axes)
        where_single_zero = m.mul(single_zero_group, where_zeros)
        take = m.mul(single_zero_group, m.neq(gz, 0.0))
        others = ProdWithoutZeros(axis=self.axis)(m.mul(take, x))
        others = _expand_reduced(others, x.type.ndim, axes)
        no_zero_group = _expand_reduced(m.eq(n_zeros, 0), x.type.ndim, axes)
        single = m.mul(m.switch(where_single_zero, others, 0.0), gz)
        return [m.switch(no_zero_group, without_zeros, single)]

    def R_op(
        self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]
    ) -> list[typing.Any]:
        if eval_points[0] is None:
            return [None]
        (x,) = inputs
        z = self(x)
        axes = self._axes(x.type.ndim)
        # d prod = prod * sum(dx / x): exact where x has no zeros.
        ratio = m.true_div(eval_points[0], x)
        return [m.mul(z, m.sum(ratio, axis=self.axis))] if axes else [eval_points[0]]


class ProdWithoutZeros(CAReduceDtype):
    """Product of the non-zero entries over ``axis`` (0 for an all-zero group); used by
    ``Prod``'s gradient. It has no gradient itself (second derivatives of prod)."""

    __props__ = ("axis", "dtype", "acc_dtype")
    __str__ = CAReduceDtype._str_from_props

    def __init__(
        self,
        axis: Sequence[int] | int | None = None,
        dtype: str | None = None,
        acc_dtype: str | None = None,
    ) -> None:
        super().__init__(mul_without_zeros, axis, dtype, acc_dtype)

    def perform(
        self, node: Apply, inputs: Sequence[typing.Any], output_storage: list[list[typing.Any]]
    ) -> None:
        (x,) = inputs
        axes = self._axes(x.ndim)
        nonzero = x != 0
        p = np.multiply.reduce(np.where(nonzero, x, 1), axis=axes, dtype=self.acc_dtype)
        res = np.where(np.logical_or.reduce(nonzero, axis=axes), p, 0)
        output_storage[0][0] = np.asarray(res, dtype=node.outputs[0].type.numpy_dtype)

    def grad(
        self, inputs: Sequence[Variable], output_grads: Sequence[Variable]
    ) -> list[typing.Any]:
        return [
            grad_not_implemented(
                self,
                0,
                inputs[0],
                "Second derivatives of prod(a) are not supported. If a has no zeros, use "
                "prod(a, no_zeros_in_input=True).",
            )
        ]


class _BoolReduce(CAReduce):
    """Base of All and Any: non-bool inputs are compared with 0 first; output is bool."""

    __props__ = ("axis",)
    _np: typing.Any = None
    _scalar: typing.Any = None

    def __init__(self, axis: Sequence[int] | int | None = None) -> None:
        super().__init__(self._scalar, axis)

    def _output_dtype(self, idtype: str) -> str:
        return "bool"

    def make_node(self, x: typing.Any) -> Apply:
        x = _as_tensor(x)
        if x.type.dtype != "bool":
            x = m.neq(x, 0)
        return super().make_node(x)

    def perform(
        self, node: Apply, inputs: Sequence[typing.Any], output_storage: list[list[typing.Any]]
    ) -> None:
        (x,) = inputs
        output_storage[0][0] = np.asarray(type(self)._np(x, axis=self._axes(x.ndim)))

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        return [_float_zeros(inputs[0])]

    def L_op(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        output_grads: Sequence[Variable],
    ) -> list[Variable]:
        return self.grad(inputs, output_grads)

    def R_op(
        self, inputs: Sequence[Variable], eval_points: Sequence[Variable | None]
    ) -> list[typing.Any]:
        return [None]

    def __str__(self) -> str:
        name = type(self).__name__
        return name if self.axis is None else f"{name}{{{', '.join(map(str, self.axis))}}}"


class All(_BoolReduce):
    """True where every element along ``axis`` is non-zero; printed ``All`` / ``All{0}``."""

    _np = staticmethod(np.all)
    _scalar = scalar_and


class Any(_BoolReduce):
    """True where some element along ``axis`` is non-zero; printed ``Any`` / ``Any{0}``."""

    _np = staticmethod(np.any)
    _scalar = scalar_or


__all__ += ["All", "Any", "CAReduceDtype", "Composite", "Prod", "ProdWithoutZeros"]
