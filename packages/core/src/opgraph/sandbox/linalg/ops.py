"""Matrix-property hints and ``spectral_radius_bound`` (Theano's ``sandbox.linalg.ops``).

A :class:`Hint` node passes its input through unchanged (a view) and records assumptions
about it, e.g. ``psd(A)`` says "A is symmetric positive semi-definite". The helpers
:func:`is_psd`, :func:`is_symmetric` and :func:`is_positive` read those assumptions; the node
rewriters below use them (``solve(psd(A), b)`` through a Cholesky factor, ``A.T`` of a
symmetric ``A`` is ``A``, ...). :class:`HintsFeature` keeps the hints of a FunctionGraph once
``remove_hint_nodes`` has taken the Hint nodes out of it.

The rewriters are defined here with Theano's names; installing them in a mode's rewrite
database is the rewrite package's business: ``opgraph-optimizers`` installs every one in
the stages where Theano registered it (``opgraph_optimizers.linalg``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from opgraph.graph.basic import Apply, Variable
from opgraph.graph.features import Feature
from opgraph.graph.op import Op
from opgraph.rewriting import GraphRewriter, node_rewriter
from opgraph.tensor import math as tm
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.dot import Dot, dot
from opgraph.tensor.elemwise import DimShuffle, Prod
from opgraph.tensor.nlinalg import Det, MatrixInverse, extract_diag, matrix_inverse, trace
from opgraph.tensor.reduction import prod
from opgraph.tensor.shape import scalar_constant
from opgraph.tensor.slinalg import Cholesky, Solve, cholesky

__all__ = [
    "Hint",
    "HintsFeature",
    "HintsOptimizer",
    "hints",
    "inv_as_solve",
    "is_hint_node",
    "is_positive",
    "is_psd",
    "is_symmetric",
    "local_det_chol",
    "local_log_pow",
    "local_log_prod_sqr",
    "no_transpose_symmetric",
    "psd",
    "psd_solve_with_chol",
    "remove_hint_nodes",
    "spectral_radius_bound",
    "tag_solve_triangular",
    "transinv_to_invtrans",
]

logger = logging.getLogger(__name__)


class Hint(Op):
    """Pass ``x`` through unchanged (a view) while recording ``hints`` about it.

    ``Hint(psd=True, symmetric=True)(A)`` is ``A`` with the assumptions attached; the
    gradient passes straight through.
    """

    __props__ = ("hints",)

    def __init__(self, **kwargs: Any) -> None:
        self.hints = tuple(kwargs.items())
        self.view_map = {0: [0]}

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node: Apply, inputs: Sequence[Any], output_storage: Any) -> None:
        output_storage[0][0] = inputs[0]

    def infer_shape(self, node: Apply, input_shapes: Sequence[Sequence[Any]]) -> list[Any]:
        return [input_shapes[0]]

    def grad(self, inputs: Sequence[Variable], output_grads: Sequence[Variable]) -> list[Any]:
        return list(output_grads)

    def R_op(self, inputs: Sequence[Variable], eval_points: Sequence[Any]) -> list[Any]:
        return list(eval_points)


def is_hint_node(node: Any) -> bool:
    """Whether ``node`` is an Apply of a :class:`Hint`."""
    return isinstance(getattr(node, "op", None), Hint)


def hints(variable: Variable) -> dict[str, Any]:
    """The hints known for ``variable``: from its graph's HintsFeature, else its Hint node."""
    fgraph = getattr(variable, "fgraph", None)
    if fgraph is not None:
        feature = getattr(fgraph, "hints_feature", None)
        if feature is not None:
            return feature.hints.get(variable, {})
    if is_hint_node(variable.owner):
        return dict(variable.owner.op.hints)
    return {}


class HintsFeature(Feature):
    """A FunctionGraph feature that keeps hints on variables as the graph is rewritten.

    Hints are assumptions about mathematical properties (symmetry, positive
    semi-definiteness, ...). When a rewrite replaces a variable by another, both share
    their hints: the assumptions hold for the value, wherever it is computed.
    """

    def add_hint(self, r: Variable, k: str, v: Any) -> None:
        """Record hint ``k = v`` for variable ``r``."""
        logger.debug("adding hint; %s, %s, %s", r, k, v)
        self.hints.setdefault(r, {})[k] = v

    def ensure_init_r(self, r: Variable) -> None:
        """Give ``r`` an (empty) hint dictionary."""
        self.hints.setdefault(r, {})

    def on_attach(self, fgraph: Any) -> None:
        if getattr(fgraph, "hints_feature", None) is not None:
            raise ValueError("this FunctionGraph already has a HintsFeature")
        fgraph.hints_feature = self
        self.hints: dict[Variable, dict[str, Any]] = {}
        for node in fgraph.toposort():
            self.on_import(fgraph, node, "on_attach")

    def on_detach(self, fgraph: Any) -> None:
        del fgraph.hints_feature

    def on_import(self, fgraph: Any, node: Apply, reason: Any) -> None:
        for r in [*node.inputs, *node.outputs]:
            self.ensure_init_r(r)
        if is_hint_node(node):
            for k, v in node.op.hints:
                self.add_hint(node.outputs[0], k, v)

    def update_second_from_first(self, r0: Variable, r1: Variable) -> None:
        """Copy ``r0``'s hints to ``r1``; conflicting values raise a ValueError."""
        old_hints, new_hints = self.hints[r0], self.hints[r1]
        for k, v in old_hints.items():
            if k in new_hints and new_hints[k] is not v:
                raise ValueError(f"conflicting hint {k!r} for {r0} ({v}) and {r1} ({new_hints[k]})")
            new_hints.setdefault(k, v)

    def on_change_input(
        self, fgraph: Any, node: Any, i: int, r: Variable, new_r: Variable, reason: Any = None
    ) -> None:
        self.ensure_init_r(r)
        self.ensure_init_r(new_r)
        self.update_second_from_first(r, new_r)
        self.update_second_from_first(new_r, r)


class HintsOptimizer(GraphRewriter):
    """A graph rewriter that only attaches a :class:`HintsFeature` to the graph.

    Theano attached the feature to every graph; here it is attached to graphs that hold a
    :class:`Hint` node, the only ones whose hints it could record, so other graphs pay
    nothing for it.
    """

    def apply(self, fgraph: Any) -> None:
        """Attach the feature when the graph holds a Hint node and has none yet."""
        if getattr(fgraph, "hints_feature", None) is None and any(
            is_hint_node(node) for node in fgraph.apply_nodes
        ):
            fgraph.attach_feature(HintsFeature())


def psd(v: Any) -> Variable:
    """``v`` with the hints that it is symmetric positive semi-definite."""
    return Hint(psd=True, symmetric=True)(v)


def is_psd(v: Variable) -> bool:
    """Whether ``v`` is hinted positive semi-definite."""
    return bool(hints(v).get("psd", False))


def is_symmetric(v: Variable) -> bool:
    """Whether ``v`` is hinted symmetric."""
    return bool(hints(v).get("symmetric", False))


def is_positive(v: Variable) -> bool:
    """Whether ``v`` is hinted positive, or is ``x ** k`` for a constant even ``k``."""
    if hints(v).get("positive", False):
        return True
    owner = v.owner
    if owner is not None and owner.op == tm.pow:
        exponent = scalar_constant(owner.inputs[1])
        return exponent is not None and exponent % 2 == 0
    return False


def _is_transpose(node: Apply) -> bool:
    return isinstance(node.op, DimShuffle) and tuple(node.op.new_order) == (1, 0)


@node_rewriter([Hint])
def remove_hint_nodes(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``Hint(x) -> x``, moving the hints to the graph's HintsFeature when it has one."""
    feature = getattr(fgraph, "hints_feature", None)
    if feature is not None:
        for k, v in node.op.hints:
            feature.add_hint(node.inputs[0], k, v)
    return list(node.inputs)


@node_rewriter([DimShuffle])
def transinv_to_invtrans(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``matrix_inverse(X).T -> matrix_inverse(X.T)``."""
    if _is_transpose(node):
        (A,) = node.inputs
        if A.owner and isinstance(A.owner.op, MatrixInverse):
            (X,) = A.owner.inputs
            return [A.owner.op(node.op(X))]
    return None


@node_rewriter([Dot])
def inv_as_solve(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``dot(inv(A), b) -> solve(A, b)``; ``dot(b, inv(A)) -> solve(A.T, b.T).T``."""
    left, right = node.inputs
    if left.type.ndim != 2 or right.type.ndim not in (1, 2):
        return None
    if left.owner and left.owner.op == matrix_inverse:
        return [Solve()(left.owner.inputs[0], right)]
    if right.owner and right.owner.op == matrix_inverse and left.type.ndim == 2:
        (A,) = right.owner.inputs
        if is_symmetric(A):
            return [Solve()(A, left.T).T]
        return [Solve()(A.T, left.T).T]
    return None


@node_rewriter([Solve])
def tag_solve_triangular(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``solve(cholesky(X), b) -> solve_triangular(...)``, for a general solve."""
    if node.op.A_structure != "general":
        return None
    A, b = node.inputs
    if A.owner and isinstance(A.owner.op, Cholesky):
        structure = "lower_triangular" if A.owner.op.lower else "upper_triangular"
        return [Solve(structure)(A, b)]
    if A.owner and _is_transpose(A.owner):
        (A_T,) = A.owner.inputs
        if A_T.owner and isinstance(A_T.owner.op, Cholesky):
            structure = "upper_triangular" if A_T.owner.op.lower else "lower_triangular"
            return [Solve(structure)(A, b)]
    return None


@node_rewriter([DimShuffle])
def no_transpose_symmetric(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``A.T -> A`` for a matrix hinted symmetric."""
    x = node.inputs[0]
    if x.type.ndim == 2 and _is_transpose(node) and is_symmetric(x):
        return [x]
    return None


@node_rewriter([Solve])
def psd_solve_with_chol(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``solve(A, b) -> solve_upper(L.T, solve_lower(L, b))`` with ``L = cholesky(A)``, A psd."""
    if node.op.A_structure != "general":
        return None
    A, b = node.inputs
    if is_psd(A):
        L = cholesky(A)
        Li_b = Solve("lower_triangular")(L, b)
        return [Solve("upper_triangular")(L.T, Li_b)]
    return None


@node_rewriter([Det])
def local_det_chol(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``det(X) -> prod(diag(L)) ** 2`` when ``L = cholesky(X)`` is already in the graph."""
    (x,) = node.inputs
    for client, _ in fgraph.clients[x]:
        if client != "output" and isinstance(client.op, Cholesky):
            L = client.outputs[0]
            return [prod(extract_diag(L) ** 2)]
    return None


@node_rewriter([tm.log])
def local_log_prod_sqr(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``log(prod(p, axis)) -> sum(log(p), axis)`` when ``p`` is hinted (or known) positive.

    The product of many factors under- or overflows long before the sum of their logs does.
    """
    if node.op != tm.log:
        return None
    (x,) = node.inputs
    if x.owner is None or not isinstance(x.owner.op, Prod):
        return None
    (p,) = x.owner.inputs
    if not is_positive(p):
        return None
    out = tm.log(p).sum(axis=x.owner.op.axis)
    return [out] if out.type == node.outputs[0].type else None


def _log_pow_is_exact(base: Variable, exponent: Variable) -> bool:
    """Whether ``log(base ** exponent)`` and ``exponent * log(base)`` agree for every ``base``.

    They do when ``base`` is positive, and for a constant positive odd integer exponent,
    NaN, zeros and infinities included (away from overflow, where the product form is the
    more accurate). For other exponents a base that is not positive tells them apart:
    ``log((-2) ** 2)`` is ``log(4)`` but ``2 * log(-2)`` is NaN, ``log((-inf) ** 0.5)`` is inf
    but ``0.5 * log(-inf)`` NaN, ``log((-0.0) ** -1)`` NaN but ``-log(-0.0)`` inf.
    """
    if is_positive(base):
        return True
    value = scalar_constant(exponent)
    if value is None:
        return False
    value = float(value)
    return value > 0 and value.is_integer() and value % 2 == 1


@node_rewriter([tm.log])
def local_log_pow(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``log(b ** e) -> e * log(b)``, where both are equal for every ``b``.

    Theano rewrote every ``log(b ** e)``, turning ``log(x ** 2)`` of a negative ``x`` into
    NaN; this rewrite needs a base hinted positive or a positive odd constant exponent
    (see :func:`_log_pow_is_exact`).
    """
    if node.op != tm.log:
        return None
    (x,) = node.inputs
    if x.owner is None or x.owner.op != tm.pow:
        return None
    base, exponent = x.owner.inputs
    if not _log_pow_is_exact(base, exponent):
        return None
    out = exponent * tm.log(base)
    return [out] if out.type == node.outputs[0].type else None


def spectral_radius_bound(X: Any, log2_exponent: int) -> Variable:
    """An upper bound on the largest eigenvalue of the square symmetric matrix ``X``.

    ``trace(X ** (2 ** k)) ** (2 ** -k)`` with ``k = log2_exponent`` (a strictly positive
    int; larger is slower and tighter, 5 usually suffices): X is squared ``k`` times. From
    V. Pan, 1990, "Estimating the Extremal Eigenvalues of a Symmetric Matrix".
    """
    X = as_tensor_variable(X)
    if X.type.ndim != 2:
        raise TypeError("spectral_radius_bound requires a matrix argument", X)
    if not isinstance(log2_exponent, int) or isinstance(log2_exponent, bool):
        raise TypeError("spectral_radius_bound requires an integer exponent", log2_exponent)
    if log2_exponent <= 0:
        raise ValueError(
            "spectral_radius_bound requires a strictly positive exponent", log2_exponent
        )
    XX = X
    for _ in range(log2_exponent):
        XX = dot(XX, XX)
    return tm.pow(trace(XX), 2.0 ** (-log2_exponent))
