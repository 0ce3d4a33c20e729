"""BLAS rewrites: ``dot`` and the scaled sums around it become Gemm, Gemv, Ger and Dot22.

They run in the ``blas`` stage (position 1.7: after stabilize, before specialize and
fusion), each tagged ``fast_run`` and ``blas``, in this order:

========  ==========================  ======================================================
position  rewrite                     identity
========  ==========================  ======================================================
0         ``local_dot_to_dot22``      ``dot(X, Y) -> Dot22(X, Y)`` (two matrices)
10        ``gemm_optimizer``          ``b*Z + a*dot(X, Y) + ... -> Gemm(Z, a, X, Y, b) + ...``
                                      (``Gemv`` for ``dot(A, x)``, ``Dot22Scalar`` for a
                                      lone ``a*dot(X, Y)``)
20        ``local_gemm_to_ger``       ``Gemm(A, a, col x, row y, 1) -> Ger(A, a, x, y)``
21        ``local_gemm_to_gemv``      ``Gemm`` with a one-column (one-row) result -> ``Gemv``
22        ``local_dot22_to_gemv``     ``Dot22(X, col y) -> Gemv(AllocEmpty, 1, X, y, 0)``
30        ``local_dot_to_gemv``       ``dot(A, x) -> Gemv(AllocEmpty(m), 1.0, A, x, 0.0)``
========  ==========================  ======================================================

In the ``inplace`` stage (through :func:`opgraph_optimizers.inplace.register_inplace`, tags
``fast_run``, ``inplace``, ``blas``): ``local_inplace_gemm`` (30), ``local_inplace_gemv``
(31) and ``local_inplace_ger`` (32) make ``Gemm{inplace}``, ``Gemv{inplace}`` and
``Ger{destructive}`` wherever the DestroyHandler lets input 0 be overwritten, e.g. the
``AllocEmpty`` buffer of a Gemv; the user's inputs and shared variables never are. Before
them, ``local_unshare_gemv_buffer`` (29) gives a fresh ``AllocEmpty`` to each Gemv sharing one
with another (merging equal ``AllocEmpty`` nodes made them share), so that both can own one.

``gemm_optimizer`` reads each tree of ``add``/``sub``/``neg``/``mul``/``true_div`` nodes as a
sum of scaled terms, Theano's way: it descends into a node only if the tree is its single
client, takes all-broadcastable factors (``InplaceDimShuffle{x,x}(a)``, ``TensorConstant{(1,
1) of 0.5}``) as scalars, and adds up the scales of a term that appears several times (so
``w - 0.1 * (0.02 * w + dot(X.T, g))`` is ``Gemv(w, -0.1, X.T, g, 0.998)``). Each tree is
read once, so the pass is linear in the size of the graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import opgraph.scalar.basic as ps
import opgraph.tensor.math as tm
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.features import InconsistencyError
from opgraph.graph.op import Op
from opgraph.rewriting import GraphRewriter, apply_replacements, node_rewriter
from opgraph.tensor.basic import constant
from opgraph.tensor.blas import (
    Dot22,
    Dot22Scalar,
    Gemm,
    Gemv,
    Ger,
    _dot22,
    _dot22scalar,
    blas_dtypes,
    gemm_inplace,
    gemm_no_inplace,
    gemv_inplace,
    gemv_no_inplace,
    ger,
    ger_destructive,
)
from opgraph.tensor.dot import Dot
from opgraph.tensor.elemwise import DimShuffle, Elemwise
from opgraph.tensor.shape import shape_i
from opgraph.tensor.structure import AllocEmpty
from opgraph.tensor.type import TensorType
from opgraph_optimizers.inplace import register_inplace
from opgraph_optimizers.registry import rewrites

__all__ = [
    "GemmOptimizer",
    "gemm_optimizer",
    "linear_terms",
    "local_dot22_to_gemv",
    "local_dot_to_dot22",
    "local_dot_to_gemv",
    "local_gemm_to_gemv",
    "local_gemm_to_ger",
    "local_inplace_gemm",
    "local_inplace_gemv",
    "local_inplace_ger",
    "local_unshare_gemv_buffer",
]

#: A scale: a Python number, or a symbolic 0-d tensor.
Scale = Any
_LINEAR = (ps.Add, ps.Sub, ps.Neg, ps.Mul, ps.TrueDiv)


# ---------------------------------------------------------------------------- scales


def _const_like(value: Any, dtype: str) -> Variable:
    return constant(np.asarray(value, dtype=dtype))


def _is_number(s: Scale) -> bool:
    return not isinstance(s, Variable)


def _scale_var(s: Scale, other: Scale) -> Variable:
    """``s`` as a 0-d tensor; a number takes the dtype it has in an operation with ``other``
    (NumPy's rule for Python scalars: ``-0.1`` next to a float32 scale is float32)."""
    if not _is_number(s):
        return s
    dtype = "float64"
    if not _is_number(other):
        try:
            dtype = str(np.result_type(other.type.numpy_dtype, s))
        except (OverflowError, TypeError):
            dtype = str(np.result_type(np.asarray(s).dtype, other.type.numpy_dtype))
    return _const_like(s, dtype)


def _smul(s: Scale, t: Scale) -> Scale:
    if _is_number(s) and _is_number(t):
        return s * t
    if _is_number(s) and s == 1:
        return t
    if _is_number(t) and t == 1:
        return s
    return tm.mul(_scale_var(s, t), _scale_var(t, s))


def _sadd(s: Scale, t: Scale) -> Scale:
    if _is_number(s) and _is_number(t):
        return s + t
    return tm.add(_scale_var(s, t), _scale_var(t, s))


def _sneg(s: Scale) -> Scale:
    return -s if _is_number(s) else tm.neg(s)


def _sdiv(s: Scale, d: Scale) -> Scale:
    if _is_number(s) and _is_number(d):
        return s / d if d != 0 else None
    return tm.true_div(_scale_var(s, d), _scale_var(d, s))


def _is_one(s: Scale) -> bool:
    return _is_number(s) and s == 1


def _scale_input(s: Scale, dtype: str) -> Variable | None:
    """``s`` as a 0-d tensor of ``dtype`` (a Gemm/Gemv/Ger scalar input), or None."""
    if _is_number(s):
        if isinstance(s, complex) and s.imag and not dtype.startswith("complex"):
            return None
        return _const_like(s, dtype)
    return s if s.type.dtype == dtype else tm.cast(s, dtype)


def _as_scale(v: Variable) -> Scale | None:
    """The scalar ``v`` stands for if all its dimensions are broadcastable, else None.

    A one-element constant gives its value as a number; a broadcast 0-d variable
    (``InplaceDimShuffle{x,x}(a)``) gives ``a``; another one gives ``v`` without its
    broadcastable dimensions.
    """
    if not all(v.type.broadcastable):
        return None
    base = v
    while base.owner is not None and isinstance(base.owner.op, DimShuffle):
        base = base.owner.inputs[0]
    if isinstance(base, Constant):
        data = np.asarray(base.data)
        if data.size == 1 and data.dtype.kind in "biufc":
            return data.reshape(()).item()
        return None
    if base.type.ndim == 0:
        return base
    return DimShuffle(v.type.broadcastable, [])(v)


# ---------------------------------------------------------------------------- terms


def _linear_op(var: Variable) -> ps.ScalarOp | None:
    node = var.owner
    if node is None or type(node.op) is not Elemwise or node.op.destroy_map:
        return None
    op = node.op.scalar_op
    return op if isinstance(op, _LINEAR) else None


def _expand(var: Variable, scale: Scale) -> list[tuple[Scale, Variable]] | None:
    """The scaled children of ``var`` if it is a linear node (see :func:`linear_terms`)."""
    op = _linear_op(var)
    if op is None:
        return None
    ins = var.owner.inputs  # type: ignore[union-attr]
    if isinstance(op, ps.Add):
        return [(scale, i) for i in ins]
    if isinstance(op, ps.Sub):
        return [(scale, ins[0]), (_sneg(scale), ins[1])]
    if isinstance(op, ps.Neg):
        return [(_sneg(scale), ins[0])]
    if isinstance(op, ps.TrueDiv):
        den = _as_scale(ins[1])
        if den is None or all(ins[0].type.broadcastable):
            return None
        quotient = _sdiv(scale, den)
        return None if quotient is None else [(quotient, ins[0])]
    factors, others = [], []
    for i in ins:
        s = _as_scale(i)
        (others if s is None else factors).append(i if s is None else s)
    if len(others) != 1:
        return None
    for f in factors:
        scale = _smul(scale, f)
    return [(scale, others[0])]


def linear_terms(root: Variable) -> tuple[list[tuple[Scale, Variable]], list[Apply]]:
    """``root`` as ``sum(scale_i * term_i)``: the ``(scale, term)`` pairs and the nodes read.

    Descends through ``add``, ``sub``, ``neg``, ``mul`` by all-broadcastable factors and
    ``true_div`` by an all-broadcastable divisor, into a node only if it computes ``root``
    or has a single client and ``root``'s dtype. Iterative, terms in left-to-right order.
    """
    dtype = root.type.dtype
    terms: list[tuple[Scale, Variable]] = []
    inner: list[Apply] = []
    stack: list[tuple[Scale, Variable]] = [(1, root)]
    while stack:
        scale, var = stack.pop()
        children = None
        if var is root or (
            var.type.dtype == dtype and len(var.clients) == 1  # type: ignore[attr-defined]
        ):
            children = _expand(var, scale)
        if children is None:
            terms.append((scale, var))
            continue
        inner.append(var.owner)  # type: ignore[arg-type]
        stack.extend(reversed(children))
    return terms, inner


def _combine(terms: Sequence[tuple[Scale, Variable]]) -> list[tuple[Scale, Variable]]:
    """Terms with equal variables merged, their scales added (first occurrence's place)."""
    merged: dict[Variable, Scale] = {}
    for s, v in terms:
        merged[v] = _sadd(merged[v], s) if v in merged else s
    return [(s, v) for v, s in merged.items()]


def _dot_operands(var: Variable, dtype: str) -> tuple[str, Variable, Variable, Scale] | None:
    """``(kind, X, Y, scale)`` if ``var`` is ``scale * dot(X, Y)`` usable by Gemm or Gemv."""
    node = var.owner
    if node is None or var.type.dtype != dtype:
        return None
    op, ins = node.op, node.inputs
    if isinstance(op, Dot22):
        return "matrix", ins[0], ins[1], 1
    if isinstance(op, Dot22Scalar):
        return "matrix", ins[0], ins[1], _as_scale(ins[2])
    if type(op) is not Dot or any(i.type.dtype != dtype for i in ins):
        return None
    x, y = ins
    ndims = (x.type.ndim, y.type.ndim)
    if ndims == (2, 2):
        return "matrix", x, y, 1
    if ndims == (2, 1):
        return "vector", x, y, 1
    if ndims == (1, 2):
        return "vector", y.T, x, 1
    return None


# ---------------------------------------------------------------------------- builders


def _fresh_gemv(fgraph: Any, alpha: Variable, A: Variable, x: Variable, like: TensorType) -> Any:
    """``alpha * dot(A, x)`` as ``Gemv(AllocEmpty(m), alpha, A, x, 0)`` of type ``like``
    (None if it cannot have that type)."""
    buffer = AllocEmpty(like.dtype)(shape_i(A, 0, fgraph))
    out = gemv_no_inplace(buffer, alpha, A, x, _const_like(0.0, like.dtype))
    return like.convert_variable(out)


def _scaled(s: Scale, v: Variable, dtype: str) -> Variable:
    if _is_one(s):
        return v
    if _is_number(s) and s == -1 and v.type.dtype == dtype:
        return tm.neg(v)
    return tm.mul(_scale_input(s, dtype), v)


def _owned(v: Variable, inside: set[Apply]) -> bool:
    """Whether ``v`` is computed by a node and read only by the nodes ``inside``."""
    return v.owner is not None and all(c in inside for c, _ in v.clients)  # type: ignore[attr-defined]


def _build_group(
    fgraph: Any,
    dots: list[tuple[Scale, Variable, tuple[str, Variable, Variable, Scale]]],
    others: list[tuple[Scale, Variable]],
    dtype: str,
    inside: set[Apply],
) -> tuple[Variable, int | None] | None:
    """One Gemm (Gemv) chain summing ``dots``, products of one kind and type.

    It accumulates into a term of ``others`` with their type (its index is returned with
    the result), preferably one only the tree reads (the in-place stage may then let the
    Gemm overwrite it), else into the first product. A lone scaled product becomes
    ``Dot22Scalar`` (``Gemv`` into an ``AllocEmpty`` buffer). None if nothing applies.
    """
    like = dots[0][1].type
    candidates = [k for k, (_, v) in enumerate(others) if v.type == like]
    owned = [k for k in candidates if _owned(others[k][1], inside)]
    base = (owned or candidates or [None])[0]
    chain = dots
    if base is not None:
        beta, acc = others[base]
    elif len(dots) > 1:
        beta, acc, _ = dots[0]
        chain = dots[1:]
    else:
        s, _, (kind, x, y, extra) = dots[0]
        alpha = _smul(s, extra)
        if _is_one(alpha) or (alpha := _scale_input(alpha, dtype)) is None:
            return None
        if kind == "matrix":
            built = like.convert_variable(_dot22scalar(x, y, alpha))
        else:
            built = _fresh_gemv(fgraph, alpha, x, y, like)
        return None if built is None else (built, None)
    for s, _, (kind, x, y, extra) in chain:
        alpha, beta_in = _scale_input(_smul(s, extra), dtype), _scale_input(beta, dtype)
        if alpha is None or beta_in is None:
            return None
        op = gemm_no_inplace if kind == "matrix" else gemv_no_inplace
        acc = op(acc, alpha, x, y, beta_in)
        beta = 1
    return acc, base


def gemm_replacement(
    fgraph: Any, root: Variable, terms: Sequence[tuple[Scale, Variable]], inner: Sequence[Apply]
) -> Variable | None:
    """What replaces ``root``, the sum of scaled ``terms`` read from the nodes ``inner``.

    Products whose every client is among ``inner`` are grouped by kind (matrix or vector
    product) and type; each group becomes one chain of Gemm (Gemv) nodes (see
    :func:`_build_group`). None if no group gives one.
    """
    dtype = root.type.dtype
    inside = set(inner)
    groups: dict[tuple[Any, ...], list[Any]] = {}
    others: list[tuple[Scale, Variable]] = []
    for s, v in _combine(terms):
        operands = _dot_operands(v, dtype)
        if operands is None or operands[3] is None or not _owned(v, inside):
            others.append((s, v))
            continue
        groups.setdefault((operands[0], v.type), []).append((s, v, operands))
    results = []
    for dots in groups.values():
        built = _build_group(fgraph, dots, others, dtype, inside)
        if built is None:
            others.extend((s, v) for s, v, _ in dots)
            continue
        results.append(built[0])
        if built[1] is not None:
            others.pop(built[1])
    if not results:
        return None
    items = results + [_scaled(s, v, dtype) for s, v in others]
    new = items[0] if len(items) == 1 else tm.add(*items)
    return root.type.convert_variable(new)


class GemmOptimizer(GraphRewriter):
    """``b*Z + a*dot(X, Y) + ... -> Gemm(Z, a, X, Y, b) + ...`` over the whole graph.

    Visits the linear trees (see :func:`linear_terms`) from the outputs up, each once, and
    replaces each tree's root by :func:`gemm_replacement` when it finds a product to fold.
    """

    def __init__(self, name: str = "gemm_optimizer") -> None:
        self.name = name

    def apply(self, fgraph: Any) -> int:
        """Rewrite the graph; return the number of trees replaced."""
        done: set[Apply] = set()
        changed = 0
        for node in reversed(fgraph.toposort()):
            if node in done or node not in fgraph.apply_nodes:
                continue
            out = node.outputs[0]
            if (
                _linear_op(out) is None
                or out.type.dtype not in blas_dtypes
                or out.type.ndim not in (1, 2)
            ):
                continue
            terms, inner = linear_terms(out)
            done.update(inner)
            new = gemm_replacement(fgraph, out, terms, inner)
            if new is None:
                continue
            try:
                apply_replacements(fgraph, self, {out: new}, node)
            except InconsistencyError:
                continue
            changed += 1
        return changed


gemm_optimizer = GemmOptimizer()


# ---------------------------------------------------------------------------- node rewrites


def _blas_inputs(out: Variable, *inputs: Variable) -> list[Variable] | None:
    """``inputs`` cast to ``out``'s dtype if that is a BLAS dtype and theirs are floats."""
    dtype = out.type.dtype
    if dtype not in blas_dtypes or any(i.type.dtype not in blas_dtypes for i in inputs):
        return None
    return [i if i.type.dtype == dtype else tm.cast(i, dtype) for i in inputs]


@node_rewriter([Dot])
def local_dot_to_dot22(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``dot(X, Y) -> Dot22(X, Y)`` for two matrices (cast to the result's BLAS dtype)."""
    if any(i.type.ndim != 2 for i in node.inputs):
        return None
    ins = _blas_inputs(node.outputs[0], *node.inputs)
    if ins is None:
        return None
    return [_dot22(*ins)]


@node_rewriter([Dot])
def local_dot_to_gemv(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``dot(A, x) -> Gemv(AllocEmpty(A.shape[0]), 1.0, A, x, 0.0)`` (``dot(x, A)`` uses
    ``A.T``): BLAS's matrix-vector product, into a buffer the in-place stage lets it own."""
    out = node.outputs[0]
    ins = _blas_inputs(out, *node.inputs)
    if ins is None:
        return None
    x, y = ins
    if (x.type.ndim, y.type.ndim) == (2, 1):
        A, v = x, y
    elif (x.type.ndim, y.type.ndim) == (1, 2):
        A, v = y.T, x
    else:
        return None
    new = _fresh_gemv(fgraph, _const_like(1.0, out.type.dtype), A, v, out.type)
    return None if new is None else [new]


def _vector_of(v: Variable, axis: int) -> Variable:
    """The vector a column (``axis=0`` kept) or row (``axis=1`` kept) matrix holds."""
    if v.owner is not None and isinstance(v.owner.op, DimShuffle):
        inner = v.owner.inputs[0]
        keep = [0, "x"] if axis == 0 else ["x", 0]
        if inner.type.ndim == 1 and list(v.owner.op.new_order) == keep:
            return inner
    return DimShuffle(v.type.broadcastable, [axis])(v)


def _is_constant(v: Variable, value: float) -> bool:
    s = _as_scale(v)
    return s is not None and _is_number(s) and s == value


@node_rewriter([Gemm])
def local_gemm_to_ger(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``Gemm(A, a, x_col, y_row, 1) -> Ger(A, a, x, y)``: a rank-1 update."""
    z, a, x, y, b = node.inputs
    if node.op.inplace or not (x.type.broadcastable[1] and y.type.broadcastable[0]):
        return None
    if not _is_constant(b, 1):
        return None
    return [ger(z, a, _vector_of(x, 0), _vector_of(y, 1))]


@node_rewriter([Gemm])
def local_gemm_to_gemv(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``Gemm(Z, a, X, y_col, b) -> Gemv(Z[:, 0], a, X, y, b)[:, None]`` (and the row case
    ``Gemm(Z, a, x_row, Y, b) -> Gemv(Z[0], a, Y.T, x, b)[None, :]``)."""
    z, a, x, y, b = node.inputs
    if node.op.inplace:
        return None
    zb = z.type.broadcastable
    if y.type.broadcastable[1] and zb[1]:
        new = gemv_no_inplace(_vector_of(z, 0), a, x, _vector_of(y, 0), b)
        return [new.dimshuffle(0, "x")]
    if x.type.broadcastable[0] and zb[0]:
        new = gemv_no_inplace(_vector_of(z, 1), a, y.T, _vector_of(x, 1), b)
        return [new.dimshuffle("x", 0)]
    return None


@node_rewriter([Dot22])
def local_dot22_to_gemv(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``Dot22(X, y_col) -> Gemv(AllocEmpty, 1, X, y, 0)[:, None]`` (and the row case)."""
    x, y = node.inputs
    dtype, (rows, cols) = node.outputs[0].type.dtype, node.outputs[0].type.broadcastable
    one = _const_like(1.0, dtype)
    if cols:
        new = _fresh_gemv(fgraph, one, x, _vector_of(y, 0), TensorType(dtype, (rows,)))
        return None if new is None else [new.dimshuffle(0, "x")]
    if rows:
        new = _fresh_gemv(fgraph, one, y.T, _vector_of(x, 1), TensorType(dtype, (cols,)))
        return None if new is None else [new.dimshuffle("x", 0)]
    return None


_BLAS_STAGE: list[tuple[Any, float]] = [
    (local_dot_to_dot22, 0),
    (gemm_optimizer, 10),
    (local_gemm_to_ger, 20),
    (local_gemm_to_gemv, 21),
    (local_dot22_to_gemv, 22),
    (local_dot_to_gemv, 30),
]
for _rewriter, _position in _BLAS_STAGE:
    rewrites.register("blas", _rewriter, "fast_run", "blas", position=_position)


# ---------------------------------------------------------------------------- in place


@node_rewriter([Gemv])
def local_unshare_gemv_buffer(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``Gemv(E, a, A, x, 0) -> Gemv(AllocEmpty(n), a, A, x, 0)`` where ``E = AllocEmpty(n)``
    has other clients (merging made two Gemvs share it): each gets a buffer it may own."""
    buffer, beta = node.inputs[0], node.inputs[4]
    if node.op.inplace or buffer.owner is None or not isinstance(buffer.owner.op, AllocEmpty):
        return None
    if len(buffer.clients) < 2 or not _is_constant(beta, 0):  # type: ignore[attr-defined]
        return None
    fresh = buffer.owner.op(*buffer.owner.inputs)
    return [node.op(fresh, *node.inputs[1:])]


rewrites.register("inplace", local_unshare_gemv_buffer, "fast_run", "inplace", "blas", position=29)


def _make_inplace(flag: str, inplace_op: Op) -> Any:
    def make(node: Apply) -> Op | None:
        return None if getattr(node.op, flag) else inplace_op

    return make


local_inplace_gemm = register_inplace(
    "local_inplace_gemm", [Gemm], _make_inplace("inplace", gemm_inplace), "blas", position=30
)
local_inplace_gemv = register_inplace(
    "local_inplace_gemv", [Gemv], _make_inplace("inplace", gemv_inplace), "blas", position=31
)
local_inplace_ger = register_inplace(
    "local_inplace_ger", [Ger], _make_inplace("destructive", ger_destructive), "blas", position=32
)
