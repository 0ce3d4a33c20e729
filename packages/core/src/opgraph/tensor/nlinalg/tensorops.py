"""Inverse and solve of tensors seen as matrices: ``tensorinv`` and ``tensorsolve``.

Theano's ``tensor.nlinalg.TensorInv`` / ``TensorSolve`` (NumPy's ``linalg.tensorinv`` and
``linalg.tensorsolve``). Unlike Theano 1.0, whose ``TensorSolve`` always announced a matrix,
the output has the dimensions NumPy gives, and both have gradients.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.op import Op
from opgraph.scalar.type import upcast
from opgraph.tensor.dot import dot
from opgraph.tensor.nlinalg.basic import float_input, lapack, store, work_array
from opgraph.tensor.shape import mul_dims, reshape, shape_i
from opgraph.tensor.type import TensorType

__all__ = ["TensorInv", "TensorSolve", "tensorinv", "tensorsolve"]

_SINGULAR = "the tensor, seen as a square matrix, is singular."


def _dims(x: Variable) -> list[Any]:
    return [shape_i(x, i) for i in range(x.type.ndim)]


class TensorInv(Op):
    """The inverse of ``a`` with respect to ``tensordot(out, a, ind)``.

    ``a`` of shape ``(i1..ik, j1..jm)`` (``k = ind``), seen as a square matrix of
    ``prod(i) x prod(j)``, gives the inverse of shape ``(j1..jm, i1..ik)``. Gradient:
    the matrix inverse's, ``-X^{-T} G X^{-T}``, reshaped.
    """

    __props__ = ("ind",)

    def __init__(self, ind: int = 2) -> None:
        if not isinstance(ind, int | np.integer) or ind <= 0:
            raise ValueError(f"TensorInv: ind must be a positive integer, got {ind!r}")
        self.ind = int(ind)

    def make_node(self, a: Any) -> Apply:
        a = float_input(self, a, 0, "a", ndims=range(self.ind + 1, 33))
        return Apply(self, [a], [TensorType(a.type.dtype, (False,) * a.type.ndim)()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        a = work_array(inputs[0])
        out = lapack(self, np.linalg.tensorinv, a, ind=self.ind, hint=_SINGULAR)
        store(output_storage[0], out, node.outputs[0])

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        shp = list(input_shapes[0])
        return [tuple(shp[self.ind :] + shp[: self.ind])]

    def L_op(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Any) -> list:
        (a,), (inv,), (g,) = inputs, outputs, grads
        dims = _dims(a)
        rows, cols = mul_dims(dims[: self.ind]), mul_dims(dims[self.ind :])
        inv_m = reshape(inv, (cols, rows))
        g_m = reshape(g, (cols, rows))
        ga = -dot(dot(inv_m.T, g_m), inv_m.T)
        return [reshape(ga, dims, ndim=a.type.ndim)]


def tensorinv(a: Any, ind: int = 2) -> Variable:
    """The inverse of the N-d array ``a`` for ``tensordot(tensorinv(a), a, ind)`` = identity.

    ``a``'s first ``ind`` dimensions and its others must have equal products.
    """
    return TensorInv(ind)(a)


class TensorSolve(Op):
    """``x`` with ``tensordot(a, x, x.ndim) == b`` (NumPy's ``linalg.tensorsolve``).

    ``axes`` (None or a tuple of ints) are dimensions of ``a`` moved to its end first. The
    result has ``a.ndim - b.ndim`` dimensions. Gradient of ``A x = b`` (``A``, ``x``, ``b``
    seen as a matrix and vectors): ``gb = A^{-T} g``, ``gA = -gb x^T``.
    """

    __props__ = ("axes",)

    def __init__(self, axes: Sequence[int] | None = None) -> None:
        self.axes = None if axes is None else tuple(int(ax) for ax in axes)

    def make_node(self, a: Any, b: Any) -> Apply:
        a = float_input(self, a, 0, "a", ndims=range(1, 33))
        b = float_input(self, b, 1, "b", ndims=range(0, a.type.ndim))
        if self.axes is not None:
            for ax in self.axes:
                if not -a.type.ndim <= ax < a.type.ndim:
                    raise ValueError(f"{self}: axis {ax} is out of range for a ({a.type})")
        dtype = upcast(a.type.dtype, b.type.dtype)
        out = TensorType(dtype, (False,) * (a.type.ndim - b.type.ndim))()
        return Apply(self, [a, b], [out])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        a, b = (work_array(v) for v in inputs)
        if a.shape[: b.ndim] != b.shape and self.axes is None:
            raise ValueError(
                f"{self}: b's shape {b.shape} must be the leading dimensions of a's {a.shape}"
            )
        out = lapack(self, np.linalg.tensorsolve, a, b, axes=self.axes, hint=_SINGULAR)
        store(output_storage[0], out, node.outputs[0])

    def _moved(self, a: Variable) -> tuple[Variable, list[int]]:
        """``a`` with ``axes`` moved to its end (as NumPy does), and that permutation."""
        perm = list(range(a.type.ndim))
        for ax in self.axes or ():
            perm.remove(ax % a.type.ndim)
            perm.append(ax % a.type.ndim)
        return (a.dimshuffle(*perm) if self.axes else a), perm

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        a_shape, b_shape = input_shapes
        _, perm = self._moved(node.inputs[0])
        moved = [a_shape[p] for p in perm]
        return [tuple(moved[len(b_shape) :])]

    def L_op(self, inputs: Sequence[Variable], outputs: Sequence[Variable], grads: Any) -> list:
        (a, b), (x,), (g,) = inputs, outputs, grads
        a_t, perm = self._moved(a)
        dims = _dims(a_t)
        n = mul_dims(dims[b.type.ndim :])
        a_m = reshape(a_t, (n, n))
        gb_v = TensorSolve()(a_m.T, reshape(g, (n,)))
        x_v = reshape(x, (n,))
        ga_m = -(gb_v.dimshuffle(0, "x") * x_v.dimshuffle("x", 0))
        ga_t = reshape(ga_m, dims, ndim=a.type.ndim)
        ga = ga_t.dimshuffle(*np.argsort(perm).tolist()) if self.axes else ga_t
        gb = reshape(gb_v, _dims(b), ndim=b.type.ndim)
        return [ga.astype(a.type.dtype), gb.astype(b.type.dtype)]


def tensorsolve(a: Any, b: Any, axes: Sequence[int] | None = None) -> Variable:
    """Solve ``tensordot(a, x, axes=x.ndim) = b`` for ``x`` (NumPy's tensorsolve)."""
    return TensorSolve(axes)(a, b)
