"""Symbolic shape inference over a graph, and the rewrites it makes possible.

:class:`ShapeFeature` (Theano's) gives every tensor variable of a FunctionGraph a symbolic
shape, ``fgraph.shape_feature.shape_of[var]``: a tuple of int64 0-d tensors, computed from
each Op's ``infer_shape(node, input_shapes)``. A dimension is a constant where it is known
(broadcastable dimensions, static ``TensorType.shape``, constants), an expression of other
shapes where ``infer_shape`` gives one (``Elemwise``: the shape of its inputs), and
``Shape_i{i}(var)`` otherwise. The shapes follow every replacement: when ``r`` is replaced
by ``new_r``, the two have the same shape, so each keeps the more informative dimensions.

The rewrites (tag ``shape``; they do nothing without the feature, which the ``shape`` stage
attaches; the last two are also tagged with the name of the structural rewrite they
generalize, so that ``excluding("local_useless_reshape")`` turns every such removal off, as
in Theano):

- ``local_shape_to_shape_i``: ``x.shape -> MakeVector(...)`` of the known dimensions (a
  constant vector when all are known), so ``x`` need not be computed for its shape;
- ``local_track_shape_i``: ``Shape_i{i}(x) ->`` the known dimension ``i`` of ``x``;
- ``local_remove_known_specify_shape``: ``specify_shape(x, s) -> x`` when ``x``'s shape is
  known to be ``s``;
- ``local_remove_known_reshape``: ``reshape(x, s) -> x`` when ``s`` is ``x``'s own shape.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

import opgraph.tensor.math as tm
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.features import AlreadyThere, Feature
from opgraph.graph.traversal import io_toposort
from opgraph.graph.utils import MethodNotDefined
from opgraph.rewriting import GraphRewriter, RewriteWarning, node_rewriter
from opgraph.scalar.type import ScalarType, discrete_dtypes
from opgraph.tensor.shape import MakeVector, Reshape, Shape, Shape_i, SpecifyShape, scalar_constant
from opgraph.tensor.type import TensorType
from opgraph.tensor.variable import TensorConstant
from opgraph_optimizers.registry import rewrites

__all__ = [
    "ShapeFeature",
    "ShapeOptimizer",
    "local_remove_known_reshape",
    "local_remove_known_specify_shape",
    "local_shape_to_shape_i",
    "local_track_shape_i",
    "same_dim",
    "shape_rewriter",
]

Shp = tuple[Variable, ...]
_INT64 = TensorType("int64", ())


def has_shape(t: Any) -> bool:
    """True for a type whose values have a shape the feature can track: tensors, and any
    other type declaring ``ndim`` and ``broadcastable`` (a plugin's sparse matrices)."""
    return isinstance(t, TensorType) or (
        isinstance(getattr(t, "ndim", None), int) and hasattr(t, "broadcastable")
    )


#: How many variables an ancestor check may visit before it gives up (and says "maybe").
_ANCESTOR_BUDGET = 1000


def _depends_on(expr: Variable, targets: set[Variable]) -> bool:
    """Whether ``expr`` may depend on one of ``targets``; True when the walk is too long."""
    stack, seen = [expr], set()
    while stack:
        v = stack.pop()
        if v in targets:
            return True
        if v in seen or v.owner is None:
            continue
        seen.add(v)
        if len(seen) > _ANCESTOR_BUDGET:
            return True
        stack.extend(v.owner.inputs)
    return False


def _is_shape_i_of(dim: Variable, var: Variable, i: int | None = None) -> bool:
    """Whether ``dim`` is ``Shape_i{i}(var)`` (any ``i`` when None)."""
    owner = dim.owner
    return (
        owner is not None
        and isinstance(owner.op, Shape_i)
        and owner.inputs[0] is var
        and (i is None or owner.op.i == i)
    )


def same_dim(a: Any, b: Any) -> bool:
    """True if two symbolic dimensions are known to be equal (same variable, equal
    constants, or ``Shape_i`` of the same dimension of the same variable)."""
    if a is b:
        return True
    ca, cb = scalar_constant(a), scalar_constant(b)
    if ca is not None or cb is not None:
        return ca is not None and cb is not None and int(ca) == int(cb)
    oa, ob = getattr(a, "owner", None), getattr(b, "owner", None)
    return (
        oa is not None
        and ob is not None
        and isinstance(oa.op, Shape_i)
        and oa.op == ob.op
        and oa.inputs[0] is ob.inputs[0]
    )


class ShapeFeature(Feature):
    """Keeps ``shape_of[var]``, the symbolic shape of every variable of the graph.

    Attached as ``fgraph.shape_feature``. ``shape_of[var]`` is a tuple of int64 0-d tensor
    variables (``()`` for scalars, None for values without a shape). The expressions are
    not part of the graph until a rewrite uses them. One ShapeFeature serves one graph.

    The shapes are computed on first use (``shape_of``, or any method reading shapes), for
    the whole graph, then kept up to date with every change: a graph with no shape to
    rewrite (a long elementwise chain) never pays for them.
    """

    pickle_rm_attr = ["shape_feature"]

    def __init__(self) -> None:
        self.fgraph: Any = None
        self._reset()

    def _reset(self) -> None:
        self._awake = False
        self._shape_of: dict[Variable, Shp | None] = {}
        self._reverse: dict[Variable, set[Variable]] = {}
        self._shape_i_users: dict[Variable, set[Variable]] = {}
        self._shape_i: dict[tuple[Variable, int], Variable] = {}
        self._constants: dict[int, Variable] = {}
        self._warned: set[type] = set()

    @property
    def shape_of(self) -> dict[Variable, Shp | None]:
        """``{variable: its symbolic shape}`` for every variable of the graph."""
        if not self._awake:
            self._wake()
        return self._shape_of

    @property
    def shape_of_reverse_index(self) -> dict[Variable, set[Variable]]:
        """``{dimension variable: the variables whose shape uses it}``."""
        if not self._awake:
            self._wake()
        return self._reverse

    def _wake(self) -> None:
        """Compute every shape of the graph (once; changes keep them up to date after)."""
        if self._awake:
            return
        self._awake = True
        fgraph = self.fgraph
        if fgraph is None:
            return
        cached = getattr(fgraph, "io_toposort", None)
        order = cached() if cached is not None else io_toposort(fgraph.inputs, fgraph.outputs)
        for node in order:
            self.on_import(fgraph, node, "on_attach")

    # ------------------------------------------------------------------ attaching

    def on_attach(self, fgraph: Any) -> None:
        if getattr(fgraph, "shape_feature", None) is not None:
            raise AlreadyThere("a ShapeFeature is already attached (fgraph.shape_feature)")
        if self.fgraph is not None and self.fgraph is not fgraph:
            raise ValueError(
                "this ShapeFeature is attached to another FunctionGraph already; one "
                "ShapeFeature serves one graph. HINT: copy the graph with "
                "fgraph.clone_get_equiv(attach_feature=False) and attach a new ShapeFeature()."
            )
        self.unpickle(fgraph)

    def unpickle(self, fgraph: Any) -> None:
        """Put ``fgraph.shape_feature`` back; the shapes are recomputed when first used."""
        self.fgraph = fgraph
        self._reset()
        fgraph.shape_feature = self

    def on_detach(self, fgraph: Any) -> None:
        fgraph.__dict__.pop("shape_feature", None)
        self.fgraph = None
        self._reset()

    def __getstate__(self) -> dict[str, Any]:
        return {}  # recomputed by unpickle(fgraph)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.fgraph = None
        self._reset()

    # ------------------------------------------------------------------ building blocks

    def constant(self, n: int) -> Variable:
        """The int64 constant ``n`` (one object per value, so identical dims compare ``is``)."""
        c = self._constants.get(n)
        if c is None:
            c = self._constants[n] = TensorConstant(_INT64, np.asarray(n, dtype="int64"))
        return c

    def static_dim(self, r: Variable, i: int) -> Variable | None:
        """Dimension ``i`` of ``r`` as a constant if its type or value fixes it, else None."""
        t = r.type
        if t.broadcastable[i]:  # type: ignore[attr-defined]
            return self.constant(1)
        static = getattr(t, "shape", None)
        if static is not None and static[i] is not None:
            return self.constant(int(static[i]))
        if isinstance(r, Constant):
            return self.constant(int(np.shape(r.data)[i]))
        return None

    def shape_ir(self, i: int, r: Variable) -> Variable:
        """Dimension ``i`` of ``r`` from its type alone: a constant, else ``Shape_i{i}(r)``."""
        known = self.static_dim(r, i)
        if known is not None:
            return known
        key = (r, i)
        s = self._shape_i.get(key)
        if s is None:
            s = self._shape_i[key] = Shape_i(i)(r)
        return s

    def shape_tuple(self, r: Variable) -> Shp | None:
        """The shape of ``r`` from its type alone (None for values without a shape)."""
        if isinstance(r.type, ScalarType):
            return ()
        if not has_shape(r.type):
            return None
        return tuple(self.shape_ir(i, r) for i in range(r.type.ndim))  # type: ignore[attr-defined]

    def unpack(self, s: Any, r: Variable, i: int) -> Variable:
        """An ``infer_shape`` entry as an int64 0-d tensor variable."""
        if isinstance(s, int | np.integer) and not isinstance(s, bool):
            return self.constant(int(s))
        if isinstance(s, Variable) and getattr(s.type, "ndim", None) == 0:
            dtype = s.type.dtype  # type: ignore[attr-defined]
            if dtype in discrete_dtypes and dtype != "bool":
                if isinstance(s, Constant):
                    return self.constant(int(np.asarray(s.data)))
                return s if dtype == "int64" else tm.cast(s, "int64")
        raise TypeError(
            f"infer_shape of {r.owner.op if r.owner else r} returned {s!r} for dimension {i} "
            f"of {r}; a dimension must be an int or an integer 0-d tensor"
        )

    # ------------------------------------------------------------------ shapes

    def init_r(self, r: Variable) -> None:
        """Give ``r`` its type-derived shape if it has none yet."""
        if not self._awake:
            self._wake()
        if r not in self._shape_of:
            self.set_shape(r, self.shape_tuple(r))

    def get_shape(self, var: Variable, i: int) -> Variable:
        """Dimension ``i`` of ``var`` (computing ``var``'s shape first if needed)."""
        self.init_r(var)
        shape = self._shape_of[var]
        if shape is None:
            raise TypeError(f"{var} of type {var.type} has no shape")
        return shape[i]

    def set_shape(self, r: Variable, s: Sequence[Any] | None) -> None:
        """Record ``s`` as the shape of ``r``; known dimensions of its type take precedence."""
        if not self._awake:
            self._wake()
        if s is None or not has_shape(r.type):
            self._shape_of[r] = None if not isinstance(r.type, ScalarType) else ()
            return
        if len(s) != r.type.ndim:
            raise ValueError(
                f"infer_shape of {r.owner.op if r.owner else r} gave {len(s)} dimension(s) "
                f"for {r}, which has {r.type.ndim}"
            )
        shape = []
        for i, d in enumerate(s):
            known = self.static_dim(r, i)
            shape.append(known if known is not None else self.unpack(d, r, i))
        self._store(r, tuple(shape))

    def _store(self, r: Variable, shape: Shp) -> None:
        self._shape_of[r] = shape
        for d in shape:
            self._reverse.setdefault(d, set()).add(r)
            owner = d.owner
            if owner is not None and isinstance(owner.op, Shape_i):
                self._shape_i_users.setdefault(owner.inputs[0], set()).add(r)

    def update_shape(self, r: Variable, other_r: Variable) -> None:
        """``r`` replaces ``other_r``: keep, per dimension, the more informative expression."""
        if not self._awake:
            self._wake()
        other = self._shape_of.get(other_r)
        if other is None:
            return
        self.init_r(r)
        mine = self._shape_of[r]
        if mine is None or len(mine) != len(other):
            return
        merged = []
        for i, (m, o) in enumerate(zip(mine, other, strict=True)):
            uninformative = _is_shape_i_of(o, other_r, i) or _is_shape_i_of(o, r, i)
            if uninformative or m is o or isinstance(m, Constant):
                merged.append(m)
            elif isinstance(o, Constant):
                merged.append(o)
            elif _depends_on(o, {m, r, other_r}):
                merged.append(m)
            else:
                merged.append(o)
        self._store(r, tuple(merged))

    # ------------------------------------------------------------------ graph events

    def on_import(self, fgraph: Any, node: Apply, reason: Any) -> None:
        if not self._awake:
            return
        if all(o in self._shape_of for o in node.outputs):
            return
        for r in node.inputs:
            self.init_r(r)
        shapes = self._infer(node, [self._shape_of[r] for r in node.inputs])
        for r, s in zip(node.outputs, shapes, strict=True):
            try:
                self.set_shape(r, s)
            except (TypeError, ValueError) as exc:
                self._warn(node, exc)
                self.set_shape(r, self.shape_tuple(r))

    def _infer(self, node: Apply, input_shapes: list[Shp | None]) -> list[Any]:
        infer = getattr(node.op, "infer_shape", None)
        if infer is not None and not any(
            s is None for s, v in zip(input_shapes, node.inputs) if has_shape(v.type)
        ):
            try:
                shapes = infer(node, input_shapes)
                if len(shapes) == len(node.outputs):
                    return list(shapes)
                raise ValueError(
                    f"it returned {len(shapes)} shapes for {len(node.outputs)} outputs"
                )
            except MethodNotDefined:
                pass
            except Exception as exc:
                self._warn(node, exc)
        return [self.shape_tuple(r) for r in node.outputs]

    def _warn(self, node: Apply, exc: BaseException) -> None:
        if type(node.op) in self._warned:
            return
        self._warned.add(type(node.op))
        warnings.warn(
            f"ShapeFeature: infer_shape of {node.op} failed ({type(exc).__name__}: {exc}); "
            "its outputs' shapes are computed at run time instead.\nHINT: fix the Op's "
            "infer_shape (opgraph.testing.check_infer_shape checks it).",
            RewriteWarning,
            stacklevel=4,
        )

    def on_change_input(
        self, fgraph: Any, node: Any, i: int, r: Variable, new_r: Variable, reason: Any = None
    ) -> None:
        if not self._awake:
            return
        self.init_r(new_r)
        self.init_r(r)
        self.update_shape(new_r, r)
        new_shape = self._shape_of.get(new_r)
        # Shapes written as Shape_i of r now read the same dimension of new_r.
        for v in self._shape_i_users.pop(r, ()):
            shape = self._shape_of.get(v)
            if shape is None or v is new_r or new_shape is None:
                continue
            fixed = tuple(
                new_shape[d.owner.op.i] if _is_shape_i_of(d, r) else d  # type: ignore[union-attr]
                for d in shape
            )
            self._store(v, fixed)
        # r may itself be a dimension of other shapes (a scalar replaced by a constant).
        for v in self._reverse.pop(r, ()):
            shape = self._shape_of.get(v)
            if shape is not None and v is not new_r and r in shape:
                self._store(v, tuple(new_r if d is r else d for d in shape))

    # ------------------------------------------------------------------ helpers for rewrites

    def make_vector_shape(self, var: Variable) -> Variable:
        """``var``'s shape as an int64 vector: a constant when every dimension is known."""
        self.init_r(var)
        shape = self._shape_of[var] or ()
        values = [scalar_constant(d) for d in shape]
        if all(v is not None for v in values):
            data = np.asarray([int(v) for v in values], dtype="int64")
            return TensorConstant(TensorType("int64", (False,)), data)
        return MakeVector("int64")(*shape)


class ShapeOptimizer(GraphRewriter):
    """Attaches a :class:`ShapeFeature` (Theano's ``ShapeOpt``); rewrites use it afterwards."""

    def __init__(self, name: str = "shape_rewriter") -> None:
        self.name = name

    def add_requirements(self, fgraph: Any) -> None:
        if getattr(fgraph, "shape_feature", None) is None:
            fgraph.attach_feature(ShapeFeature())

    def apply(self, fgraph: Any) -> None:
        """Nothing more to do: attaching the feature computed every shape."""


shape_rewriter = ShapeOptimizer()
rewrites.register("shape", shape_rewriter, "fast_run", "fast_compile", "ShapeOpt", position=0)


def _feature(fgraph: Any) -> ShapeFeature | None:
    return getattr(fgraph, "shape_feature", None)


def _dims_of_vector(v: Variable, n: int) -> list[Any] | None:
    """The ``n`` elements of an int shape vector when they can be read symbolically."""
    if isinstance(v, Constant):
        data = np.asarray(v.data).reshape(-1)
        return list(data) if len(data) == n else None
    if v.owner is not None and isinstance(v.owner.op, MakeVector) and len(v.owner.inputs) == n:
        return list(v.owner.inputs)
    return None


def _known_and_asked(
    fgraph: Any, x: Variable, shp: Variable, ndim: int
) -> tuple[Sequence[Variable], list[Any]] | None:
    """``(shape_of[x], the elements of shp)`` when the shape feature knows ``x``'s shape and
    the shape vector ``shp`` (of ``ndim`` elements) can be read, else None."""
    feature = _feature(fgraph)
    if feature is None:
        return None
    feature.init_r(x)
    known = feature.shape_of[x]
    dims = _dims_of_vector(shp, ndim)
    if known is None or dims is None:
        return None
    return known, dims


def _all_same(dims: Iterable[Any], known: Sequence[Variable]) -> bool:
    return all(same_dim(d, k) for d, k in zip(dims, known, strict=True))


@rewrites.canonicalize("shape")
@rewrites.specialize("shape")
@node_rewriter([Shape])
def local_shape_to_shape_i(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``x.shape -> MakeVector(shape_of[x]...)`` (a constant vector when all are known)."""
    feature = _feature(fgraph)
    (x,) = node.inputs
    if feature is None or not has_shape(x.type):
        return None
    return [feature.make_vector_shape(x)]


@rewrites.canonicalize("shape")
@rewrites.specialize("shape")
@node_rewriter([Shape_i])
def local_track_shape_i(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``Shape_i{i}(x) -> shape_of[x][i]`` when that says more (a constant, or the shapes of
    ``x``'s inputs)."""
    feature = _feature(fgraph)
    (x,) = node.inputs
    if feature is None or not has_shape(x.type):
        return None
    known = feature.get_shape(x, node.op.i)
    out = node.outputs[0]
    if known is out or _is_shape_i_of(known, x, node.op.i):
        return None
    if _depends_on(known, {out, x}):
        return None
    return [known]


@rewrites.canonicalize("shape", "local_useless_specify_shape")
@rewrites.specialize("shape", "local_useless_specify_shape")
@node_rewriter([SpecifyShape])
def local_remove_known_specify_shape(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``specify_shape(x, s) -> x`` when ``x``'s shape is already known to be ``s``."""
    x, shp = node.inputs
    found = _known_and_asked(fgraph, x, shp, x.type.ndim)
    if found is None:
        return None
    known, dims = found
    return [x] if _all_same(dims, known) and x.type == node.outputs[0].type else None


@rewrites.canonicalize("shape", "local_useless_reshape")
@rewrites.specialize("shape", "local_useless_reshape")
@node_rewriter([Reshape])
def local_remove_known_reshape(fgraph: Any, node: Apply) -> list[Variable] | None:
    """``reshape(x, s) -> x`` when ``s`` is ``x``'s own shape (one entry may be -1)."""
    x, shp = node.inputs
    out = node.outputs[0]
    found = None if x.type != out.type else _known_and_asked(fgraph, x, shp, out.type.ndim)
    if found is None:
        return None
    known, dims = found
    unknown = [k for k, d in enumerate(dims) if scalar_constant(d) == -1]
    if len(unknown) > 1:
        return None
    if not all(k in unknown or same_dim(d, known[k]) for k, d in enumerate(dims)):
        return None
    return [x]
