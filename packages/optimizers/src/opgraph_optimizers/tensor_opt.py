"""``opgraph.tensor.opt``: Theano's ``theano.tensor.opt`` names, mapped onto this package.

Core resolves ``import opgraph.tensor.opt`` lazily to this module through the plugin
namespace hook (see :mod:`opgraph_optimizers.plugin`), so Theano code that registers its own
rewrites keeps working::

    from opgraph.tensor.opt import register_canonicalize
    from opgraph.gof import local_optimizer

    @register_canonicalize
    @local_optimizer([T.Elemwise])
    def local_my_rewrite(fgraph, node): ...

The ``register_*`` decorators put the rewrite into the named stage of the global rewrite
database (``canonicalize``, ``stabilize``, ``specialize``, ``uncanonicalize``), so
``FAST_RUN`` applies it. The rewrite classes and the package's own rewrites are available
under their Theano names, :func:`merge_two_slices` and ``local_subtensor_merge`` (one
Subtensor for ``x[a:b:c][d:e:f]``) among them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import reduce
from typing import Any

import numpy as np

import opgraph.scalar as ps
from opgraph.compile.ops import DeepCopyOp, ObsoleteTheanoAPIError
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.printing.pprint import PrinterState, pprint
from opgraph.rewriting import GraphRewriter, NodeRewriter
from opgraph.rewriting.optdb import (
    get_optdb,
    register_canonicalize,
    register_specialize,
    register_stabilize,
)
from opgraph.tensor.assert_op import Assert, assert_, assert_op
from opgraph.tensor.basic import (
    Rebroadcast,
    ScalarFromTensor,
    TensorFromScalar,
    as_tensor_variable,
    unbroadcast,
)
from opgraph.tensor.elemwise import DimShuffle, Elemwise
from opgraph.tensor.math import abs_, cast, sgn
from opgraph.tensor.shape import MakeVector, Shape_i, make_vector
from opgraph.tensor.structure import Alloc, alloc
from opgraph_optimizers.canonicalize.elemwise import (
    local_dimshuffle_lift,
    local_useless_elemwise,
)
from opgraph_optimizers.canonicalize.math import (
    Canonizer,
    add_canonizer,
    local_add_canonizer,
    local_add_mul_fusion,
    local_mul_canonizer,
    mul_canonizer,
)
from opgraph_optimizers.canonicalize.shape import local_reshape_reshape
from opgraph_optimizers.canonicalize.subtensor import local_subtensor_merge, merge_two_slices
from opgraph_optimizers.fusion import DEFAULT_MAX_INPUTS, FusionRewriter, fusion_rewriter
from opgraph_optimizers.inplace import InplaceElemwiseRewriter, inplace_elemwise_optimizer
from opgraph_optimizers.shape_feature import ShapeFeature, ShapeOptimizer

__all__ = [
    "Assert",
    "Canonizer",
    "FusionOptimizer",
    "InplaceElemwiseOptimizer",
    "MakeVector",
    "MakeVectorPrinter",
    "NotScalarConstantError",
    "ShapeFeature",
    "ShapeOptimizer",
    "UnShapeOptimizer",
    "add_calculate",
    "add_canonizer",
    "apply_local_dimshuffle_lift",
    "apply_rebroadcast_opt",
    "assert_",
    "assert_op",
    "attempt_distribution",
    "broadcast_like",
    "check_for_x_over_absX",
    "distribute_greedy",
    "elemwise_max_input_fct",
    "encompasses_broadcastable",
    "get_clients",
    "get_clients2",
    "get_scalar_constant_value",
    "inplace_elemwise_optimizer",
    "is_an_upcast",
    "is_dimshuffle_useless",
    "is_inverse_pair",
    "local_add_canonizer",
    "local_add_mul_fusion",
    "local_dimshuffle_lift",
    "local_elemwise_alloc_op",
    "local_elemwise_fusion",
    "local_elemwise_fusion_op",
    "local_mul_canonizer",
    "local_reshape_chain",
    "local_subtensor_merge",
    "local_useless_elemwise",
    "make_vector",
    "merge_broadcastables",
    "merge_two_slices",
    "mul_calculate",
    "mul_canonizer",
    "register_canonicalize",
    "register_specialize",
    "register_specialize_device",
    "register_stabilize",
    "register_uncanonicalize",
    "register_useless",
    "scalarconsts_rest",
]

#: Theano's names of this package's whole-graph rewriters.
FusionOptimizer = FusionRewriter
InplaceElemwiseOptimizer = InplaceElemwiseRewriter
local_elemwise_fusion = fusion_rewriter
local_reshape_chain = local_reshape_reshape


def _register_stage(stage: str, stage_tags: tuple[str, ...], rewriter: Any, tags: tuple) -> Any:
    """``register_<stage>(rw, *tags)`` or ``@register_<stage>(*tags)`` for any stage."""
    if not isinstance(rewriter, NodeRewriter) and not hasattr(rewriter, "apply"):
        extra = (rewriter, *tags) if isinstance(rewriter, str) else tags

        def decorator(rw: Any) -> Any:
            return _register_stage(stage, stage_tags, rw, extra)

        return decorator
    optdb = get_optdb()
    name = getattr(rewriter, "name", None) or str(rewriter)
    all_tags = tuple(dict.fromkeys((*stage_tags, *(t for t in tags if isinstance(t, str)))))
    optdb[stage].register(name, rewriter, *all_tags, plugin=optdb.current_plugin)
    return rewriter


def register_uncanonicalize(rewriter: Any = None, *tags: str) -> Any:
    """Register a rewriter in the ``uncanonicalize`` stage (after specialize); a decorator too."""
    return _register_stage("uncanonicalize", ("fast_run",), rewriter, tags)


def register_useless(rewriter: Any = None, *tags: str) -> Any:
    """Register a rewriter removing useless nodes: in ``canonicalize`` and ``specialize``.

    Theano kept a separate ``useless`` database run inside both stages; here the rewrite is
    registered in each, tagged ``local_useless``.
    """
    if isinstance(rewriter, str) or rewriter is None:
        extra = (rewriter, *tags) if isinstance(rewriter, str) else tags
        return lambda rw: register_useless(rw, *extra)
    name = getattr(rewriter, "name", None) or str(rewriter)
    register_canonicalize(rewriter, "local_useless", *tags, name=name)
    register_specialize(rewriter, "local_useless", *tags, name=name + "_specialize")
    return rewriter


def register_specialize_device(rewriter: Any = None, *tags: str) -> Any:
    """Theano's device-specific specialization: the ``specialize`` stage (one CPU device)."""
    return register_specialize(rewriter, *tags)


def encompasses_broadcastable(b1: Sequence[bool], b2: Sequence[bool]) -> bool:
    """Whether a tensor of pattern ``b1`` can hold one of ``b2`` (Theano's helper).

    True when ``b1`` has at least as many dimensions and none of its broadcastable
    dimensions (aligned from the right) is non-broadcastable in ``b2``.
    """
    if len(b1) < len(b2):
        return False
    b1 = b1[-len(b2) :] if len(b2) else ()
    return not any(v1 and not v2 for v1, v2 in zip(b1, b2, strict=True))


def get_clients(fgraph: Any, node: Any) -> list[Any]:
    """The Apply nodes using an output of ``node`` (graph outputs excluded)."""
    return [c for out in node.outputs for c, _ in fgraph.clients[out] if c != "output"]


def get_clients2(fgraph: Any, node: Any) -> list[Any]:
    """The Apply nodes using an output of a client of ``node`` (graph outputs excluded)."""
    return [
        cc
        for client in get_clients(fgraph, node)
        for out in client.outputs
        for cc, _ in fgraph.clients[out]
        if cc != "output"
    ]


def is_an_upcast(type1: str, type2: str) -> bool:
    """Whether casting dtype ``type1`` to ``type2`` keeps every value (Theano's helper)."""
    return bool(np.can_cast(type1, type2, casting="safe"))


# ---------------------------------------------------------------- Theano's small helpers


def merge_broadcastables(broadcastables: Sequence[Sequence[bool]]) -> list[bool]:
    """The pattern broadcastable where every pattern in ``broadcastables`` is (Theano's)."""
    return [all(bcast) for bcast in zip(*broadcastables)]


class NotScalarConstantError(Exception):
    """Raised by :func:`get_scalar_constant_value` for a variable of no known scalar value."""


_CONSTANT_ELEMWISES = (
    ps.Cast,
    ps.Switch,
    ps.NEQ,
    ps.EQ,
    ps.LT,
    ps.GT,
    ps.LE,
    ps.GE,
    ps.Sub,
    ps.Add,
    ps.Mod,
    ps.Mul,
    ps.IntDiv,
    ps.TrueDiv,
    ps.Minimum,
    ps.Maximum,
)


def _numpy_scalar(data: Any) -> np.ndarray:
    """``data`` if it holds exactly one number, else NotScalarConstantError."""
    data = np.asarray(data)
    if data.size != 1 or data.dtype.kind not in "biufc":
        raise NotScalarConstantError(f"not one number: {data!r}")
    return data.copy()


def get_scalar_constant_value(
    orig_v: Any, elemwise: bool = True, only_process_constants: bool = False, max_recur: int = 10
) -> Any:
    """The scalar value under ``orig_v`` (Theano's helper), else NotScalarConstantError.

    Digs through Alloc, DimShuffle, Rebroadcast, DeepCopyOp, scalar/tensor conversions,
    ``Shape_i`` of a known dimension, ``fill`` and an Assert whose conditions are constant
    and true; with ``elemwise`` it also folds comparisons, casts and arithmetic of constants.
    A constant whose elements are all equal has that value. ``only_process_constants`` stops
    at constants. (Theano's Subtensor-of-shape patterns are not followed.)
    """
    v = orig_v
    while True:
        if v is None:
            raise NotScalarConstantError("None")
        if isinstance(v, int | float | np.integer | np.floating):
            return np.asarray(v)
        if isinstance(v, np.ndarray):
            return _numpy_scalar(v)
        if isinstance(v, Constant):
            data = np.asarray(v.data)
            if data.size > 1 and data.dtype.kind in "biufc" and (data == data.flat[0]).all():
                return data.flat[0].copy()
            return _numpy_scalar(data)
        owner = getattr(v, "owner", None)
        if only_process_constants or owner is None or max_recur <= 0:
            raise NotScalarConstantError(f"{v} is not a constant")
        max_recur -= 1
        op = owner.op
        scalar_op = getattr(op, "scalar_op", None) if isinstance(op, Elemwise) else None
        passthrough = (
            Alloc,
            DimShuffle,
            Rebroadcast,
            DeepCopyOp,
            TensorFromScalar,
            ScalarFromTensor,
        )
        if isinstance(op, passthrough):
            v = owner.inputs[0]
        elif isinstance(op, Shape_i):
            inp = owner.inputs[0]
            if isinstance(inp, Constant):
                return np.asarray(np.shape(inp.data)[op.i])
            if inp.type.broadcastable[op.i]:
                return np.asarray(1)
            raise NotScalarConstantError(f"{v}: the dimension is not known")
        elif isinstance(op, Assert):
            conds = [get_scalar_constant_value(c, max_recur=max_recur) for c in owner.inputs[1:]]
            if not all(c.ndim == 0 and c != 0 for c in conds):
                raise NotScalarConstantError(f"{v}: an Assert not known to hold")
            v = owner.inputs[0]
        elif isinstance(scalar_op, ps.Second):
            v = owner.inputs[1]
        elif elemwise and isinstance(scalar_op, _CONSTANT_ELEMWISES):
            consts = [get_scalar_constant_value(i, max_recur=max_recur) for i in owner.inputs]
            out: list[list[Any]] = [[None]]
            op.perform(owner, consts, out)
            return np.asarray(out[0][0]).copy()
        else:
            raise NotScalarConstantError(f"{v} is not a constant")


def scalarconsts_rest(
    inputs: Sequence[Any], elemwise: bool = True, only_process_constants: bool = False
) -> tuple[list[Any], list[Any], list[Any]]:
    """Partition ``inputs`` into ``(values, the scalar constants, the rest)`` (Theano's)."""
    consts, origconsts, nonconsts = [], [], []
    for i in inputs:
        try:
            value = get_scalar_constant_value(
                i, elemwise=elemwise, only_process_constants=only_process_constants
            )
        except NotScalarConstantError:
            nonconsts.append(i)
        else:
            consts.append(value)
            origconsts.append(i)
    return consts, origconsts, nonconsts


def broadcast_like(value: Any, template: Variable, fgraph: Any, dtype: str | None = None) -> Any:
    """``value`` cast to ``dtype`` (the template's by default) and broadcast to the shape and
    broadcastable pattern of ``template``, which must be a variable of ``fgraph``."""
    value = as_tensor_variable(value)
    if value.type == template.type:
        return value
    if template not in fgraph.variables:
        raise ValueError(
            "broadcast_like needs the template variable to be in the fgraph already, "
            f"and {template} is not"
        )
    dtype = template.type.dtype if dtype is None else dtype
    value = cast(value, dtype)
    if value.type == template.type:
        return value
    feature = getattr(fgraph, "shape_feature", None)
    new_shape = (
        feature.shape_of[template]
        if feature is not None
        else [template.shape[i] for i in range(template.type.ndim)]
    )
    rval = alloc(value, *new_shape)
    if rval.type.broadcastable != template.type.broadcastable:
        axes = [
            i
            for i in range(rval.type.ndim)
            if rval.type.broadcastable[i] and not template.type.broadcastable[i]
        ]
        rval = unbroadcast(rval, *axes)
    if rval.type.broadcastable != template.type.broadcastable:
        raise AssertionError(
            f"rval.type.broadcastable is {rval.type.broadcastable} but "
            f"template.broadcastable is {template.type.broadcastable}"
        )
    return rval


def is_inverse_pair(node_op: Any, prev_op: Any, inv_pair: Sequence[type]) -> bool:
    """Whether two consecutive scalar ops are the two classes of ``inv_pair``, either order."""
    node_is_op0 = isinstance(node_op, inv_pair[0])
    node_is_op1 = isinstance(node_op, inv_pair[1])
    prev_is_op0 = isinstance(prev_op, inv_pair[0])
    prev_is_op1 = isinstance(prev_op, inv_pair[1])
    return (node_is_op0 and prev_is_op1) or (node_is_op1 and prev_is_op0)


def mul_calculate(
    num: Sequence[Any], denum: Sequence[Any], aslist: bool = False, out_type: Any = None
) -> Any:
    """``prod(num) / prod(denum)`` of constant values, in their upcast dtype (or
    ``out_type``'s); with ``aslist``, ``[]`` for one and ``[v]`` otherwise (Theano's)."""
    if not num and not denum:
        return [] if aslist else np.int8(1)
    if out_type is None:
        out_dtype = ps.upcast(*[np.asarray(v).dtype.name for v in (*num, *denum)])
    else:
        out_dtype = out_type.dtype
    one = np.asarray(1, dtype=out_dtype)
    v = reduce(np.multiply, num, one) / reduce(np.multiply, denum, one)
    if aslist:
        return [] if np.all(v == 1) else [v]
    return v


def add_calculate(
    num: Sequence[Any], denum: Sequence[Any], aslist: bool = False, out_type: Any = None
) -> Any:
    """``sum(num) - sum(denum)`` of constant values (a Python ``0.0`` start, or ``out_type``'s
    zero); with ``aslist``, ``[]`` for zero and ``[v]`` otherwise (Theano's)."""
    zero: Any = 0.0 if out_type is None else np.asarray(0, dtype=out_type.dtype)
    if out_type is not None and out_type.dtype == "bool":
        if denum:
            raise Exception(
                "bool subtraction not supported. This should not happen as"
                " an earlier error should have been raised"
            )
        v = reduce(np.add, num, zero)
    else:
        v = reduce(np.add, num, zero) - reduce(np.add, denum, zero)
    if aslist:
        return [] if np.all(v == 0) else [v]
    return v


def is_dimshuffle_useless(new_order: Sequence[Any], input: Variable) -> bool:
    """Whether DimShuffle ``new_order`` of ``input`` keeps every dimension in place, or only
    swaps broadcastable dimensions with each other or with ``'x'`` (Theano's helper)."""
    if len(new_order) != input.type.ndim:
        return False
    bcast = [i for i, b in enumerate(input.type.broadcastable) if b] + ["x"]
    return all(
        new_order[i] == i or (i in bcast and new_order[i] in bcast) for i in range(input.type.ndim)
    )


def check_for_x_over_absX(numerators: list[Any], denominators: list[Any]) -> tuple[list, list]:
    """The mul Canonizer's simplifier ``x / abs(x) -> sgn(x)`` (not for complex ``x``); edits
    and returns the two lists, as Theano's."""
    for den in list(denominators):
        if (
            den.owner
            and den.owner.op == abs_
            and den.owner.inputs[0] in numerators
            and not den.owner.inputs[0].type.dtype.startswith("complex")
        ):
            denominators.remove(den)
            numerators.remove(den.owner.inputs[0])
            numerators.append(sgn(den.owner.inputs[0]))
    return numerators, denominators


class MakeVectorPrinter:
    """Theano's pprint printer of MakeVector: ``[a, b, c]`` (core assigns an equal one)."""

    def process(self, r: Variable, pstate: Any) -> str:
        if r.owner is None or not isinstance(r.owner.op, MakeVector):
            raise TypeError("Can only print make_vector.")
        if pstate is None:
            pstate = PrinterState(pprinter=pprint)
        inner = pstate.clone(precedence=1000)
        return "[{}]".format(", ".join(pstate.pprinter.process(i, inner) for i in r.owner.inputs))


def apply_local_dimshuffle_lift(var: Variable, fgraph: Any = None) -> Variable:
    """``var`` after one application of :func:`local_dimshuffle_lift` on its node (merged
    DimShuffles; lifted through an Elemwise only when ``fgraph`` says it has one client)."""
    if var.owner is None or not isinstance(var.owner.op, DimShuffle):
        return var
    new = local_dimshuffle_lift.transform(fgraph, var.owner)
    if not new:
        return var
    return new[var] if isinstance(new, dict) else new[0]


def elemwise_max_input_fct(node: Apply) -> int:
    """The most inputs a fused Elemwise may take: :class:`FusionRewriter`'s ``max_inputs``
    default here (Theano's was 31 without a C compiler, 1024 with one)."""
    return DEFAULT_MAX_INPUTS


class UnShapeOptimizer(GraphRewriter):
    """Theano's rewriter that detaches the :class:`ShapeFeature` from a graph."""

    def apply(self, fgraph: Any) -> None:
        for feature in list(fgraph.features):
            if isinstance(feature, ShapeFeature):
                fgraph.remove_feature(feature)


# ------------------------------------------- Theano rewrite-engine internals with no meaning here


def _obsolete(theano_name: str, instead: str) -> Callable[..., Any]:
    """A stand-in for a Theano internal: calling it raises, naming what replaces it."""

    def obsolete(*args: Any, **kwargs: Any) -> Any:
        raise ObsoleteTheanoAPIError(
            f"theano.tensor.opt.{theano_name} is an internal of Theano's rewrite engine and "
            f"has no meaning in opgraph. Instead: {instead}"
        )

    obsolete.__name__ = obsolete.__qualname__ = theano_name
    obsolete.__doc__ = f"Theano's ``{theano_name}``; obsolete here: raises, naming {instead}"
    return obsolete


_CUSTOM_REWRITE = (
    "write a rewrite with opgraph.gof.local_optimizer / opgraph.rewriting.NodeRewriter and "
    "register it with opgraph.tensor.opt.register_canonicalize (or register_specialize)."
)

local_elemwise_fusion_op = _obsolete(
    "local_elemwise_fusion_op",
    "opgraph_optimizers.fusion.FusionRewriter(max_inputs=..., max_nodes=...) fuses "
    "Elemwise subgraphs for any Elemwise (it is FAST_RUN's 'fusion' stage; "
    "opgraph.tensor.opt.local_elemwise_fusion is the default instance).",
)
local_elemwise_alloc_op = _obsolete(
    "local_elemwise_alloc_op",
    "the canonicalize rewrites local_useless_alloc, local_alloc_alloc and local_fill_to_alloc "
    "(opgraph_optimizers.canonicalize.shape) simplify Alloc; otherwise " + _CUSTOM_REWRITE,
)
apply_rebroadcast_opt = _obsolete(
    "apply_rebroadcast_opt",
    "the canonicalize rewrites local_useless_rebroadcast and local_rebroadcast_rebroadcast "
    "(opgraph_optimizers.canonicalize.elemwise) remove and merge Rebroadcast nodes when the "
    "function is compiled.",
)
attempt_distribution = _obsolete(
    "attempt_distribution",
    "the Canonizer rewrites local_mul_canonizer and local_add_canonizer "
    "(opgraph.tensor.opt.Canonizer) normalise products and sums; otherwise " + _CUSTOM_REWRITE,
)
distribute_greedy = _obsolete(
    "distribute_greedy",
    "the Canonizer rewrites local_mul_canonizer and local_add_canonizer "
    "(opgraph.tensor.opt.Canonizer) normalise products and sums; otherwise " + _CUSTOM_REWRITE,
)
