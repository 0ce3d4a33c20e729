"""Multinomial draws from uniform samples: Theano's ``theano.sandbox.multinomial`` Ops.

``MRG_RandomStreams.multinomial`` and ``.choice`` draw uniforms with the MRG generator and
turn them into categories with these Ops, as Theano 1.0 did. Each follows Theano's C
implementation (what Theano ran whenever it had a compiler): the running sum of a row's
probabilities is accumulated in float64, one outcome after the other, and the outcome drawn
is the first whose running sum exceeds the uniform. Draw ``c`` of row ``n`` uses the uniform
``unis[c * n_rows + n]``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.null_type import grad_undefined
from opgraph.graph.op import Op, OutputStorage
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.math import cast
from opgraph.tensor.type import TensorType

__all__ = ["ChoiceFromUniform", "MultinomialFromUniform", "MultinomialWOReplacementFromUniform"]


def _check_inputs(op: Op, pvals: Any, unis: Any, n: Any) -> tuple[Variable, Variable, Variable]:
    """Convert ``(pvals, unis, n)`` and check their ranks and dtypes (errors name them)."""
    pvals = as_tensor_variable(pvals)
    unis = as_tensor_variable(unis)
    n = as_tensor_variable(n)
    if pvals.type.ndim != 2:
        raise TypeError(f"{op}: pvals must be a matrix (one row per draw), got {pvals.type}")
    if unis.type.ndim != 1:
        raise TypeError(f"{op}: unis must be a vector of uniform samples, got {unis.type}")
    if n.type.ndim != 0 or n.type.dtype[:3] not in ("int", "uin"):
        raise TypeError(f"{op}: n (the number of draws) must be an integer scalar, got {n.type}")
    return pvals, unis, cast(n, "int64")


def _check_values(op: Op, pvals: np.ndarray, unis: np.ndarray, n_samples: int) -> None:
    if n_samples < 0:
        raise ValueError(f"{op}: n (the number of draws) must be non-negative, got {n_samples}")
    if unis.shape[0] != pvals.shape[0] * n_samples:
        raise ValueError(
            f"{op}: unis.shape[0] != pvals.shape[0] * n ({unis.shape[0]} != "
            f"{pvals.shape[0]} * {n_samples})"
        )


class MultinomialFromUniform(Op):
    """Counts of ``n`` multinomial draws per row of ``pvals``: ``(pvals, unis, n) -> counts``.

    The output has ``pvals``'s shape and the dtype ``odtype`` (``'auto'``: ``pvals``'s).
    """

    __props__ = ("odtype",)

    def __init__(self, odtype: str) -> None:
        self.odtype = odtype

    def __str__(self) -> str:
        return f"{type(self).__name__}{{{self.odtype}}}"

    def _out_dtype(self, pvals: Variable) -> str:
        return pvals.type.dtype if self.odtype == "auto" else self.odtype

    def make_node(self, pvals: Any, unis: Any, n: Any = 1) -> Apply:
        pvals, unis, n = _check_inputs(self, pvals, unis, n)
        out = TensorType(self._out_dtype(pvals), pvals.type.broadcastable)()
        return Apply(self, [pvals, unis, n], [out])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: OutputStorage) -> None:
        pvals, unis, n = inputs
        n_samples = int(n)
        _check_values(self, pvals, unis, n_samples)
        rows, outcomes = pvals.shape
        z = np.zeros(pvals.shape, dtype=node.outputs[0].type.dtype)
        if rows and outcomes and n_samples:
            cums = np.cumsum(pvals, axis=1, dtype="float64")
            u = np.asarray(unis, dtype="float64").reshape(n_samples, rows)
            hit = cums[None, :, :] > u[:, :, None]
            first = hit.argmax(axis=2)
            found = hit.any(axis=2)
            row_idx = np.broadcast_to(np.arange(rows), first.shape)
            np.add.at(z, (row_idx[found], first[found]), 1)
        output_storage[0][0] = z

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Variable]:
        return [
            grad_undefined(self, k, inp, "there is no gradient through a random draw")
            for k, inp in enumerate(inputs)
        ]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [input_shapes[0]]


class ChoiceFromUniform(MultinomialFromUniform):
    """Indices of ``n`` draws per row of ``pvals``: ``(pvals, unis, n) -> (rows, n)`` indices.

    Without replacement (the default) a drawn outcome's probability is set to zero and the
    row renormalised before the next draw, in ``pvals``'s dtype as Theano's C code does. A
    draw that finds no outcome (probabilities summing below the uniform) gives -1.
    """

    __props__ = ("odtype", "replace")

    def __init__(self, odtype: str, replace: bool = False) -> None:
        super().__init__(odtype)
        self.replace = bool(replace)

    def _out_dtype(self, pvals: Variable) -> str:
        return "int64" if self.odtype == "auto" else self.odtype

    def make_node(self, pvals: Any, unis: Any, n: Any = 1) -> Apply:
        pvals, unis, n = _check_inputs(self, pvals, unis, n)
        out = TensorType(self._out_dtype(pvals), (pvals.type.broadcastable[0], False))()
        return Apply(self, [pvals, unis, n], [out])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: OutputStorage) -> None:
        pvals, unis, n = inputs
        n_samples = int(n)
        _check_values(self, pvals, unis, n_samples)
        rows, outcomes = pvals.shape
        if not self.replace and n_samples > outcomes:
            raise ValueError(
                f"{self}: cannot draw n={n_samples} outcomes without replacement from "
                f"{outcomes} (pvals.shape[1])"
            )
        z = np.full((rows, n_samples), -1, dtype=node.outputs[0].type.dtype)
        p = np.array(pvals, copy=True)
        u_all = np.asarray(unis, dtype="float64").reshape(n_samples, rows) if rows else None
        for c in range(n_samples if rows and outcomes else 0):
            cums = np.cumsum(p, axis=1, dtype="float64")
            hit = cums > u_all[c][:, None]  # type: ignore[index]
            m = hit.argmax(axis=1)
            found = hit.any(axis=1)
            z[found, c] = m[found]
            if self.replace or c == n_samples - 1 or not found.any():
                continue
            r = np.nonzero(found)[0]
            mr = m[r]
            # Theano's renormalisation: the sum restarts from the running sum before the
            # drawn outcome (cast to pvals' dtype), adds the row's tail from the drawn
            # outcome on (now zero) one element at a time, and divides the row by it.
            total = (cums[r, mr] - p[r, mr]).astype(p.dtype)
            p[r, mr] = 0
            pr = p[r]
            for k in range(outcomes):
                total = np.where(k >= mr, total + pr[:, k], total).astype(p.dtype)
            with np.errstate(divide="ignore", invalid="ignore"):
                p[r] = pr / total[:, None]
        output_storage[0][0] = z

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [(input_shapes[0][0], cast(node.inputs[2], "int64"))]


class MultinomialWOReplacementFromUniform(ChoiceFromUniform):
    """Theano's deprecated name of :class:`ChoiceFromUniform` (without replacement)."""

    def __init__(self, odtype: str, replace: bool = False) -> None:
        warnings.warn(
            "MultinomialWOReplacementFromUniform is deprecated (as in Theano): use "
            "ChoiceFromUniform",
            DeprecationWarning,
            stacklevel=2,
        )
        super().__init__(odtype, replace)
