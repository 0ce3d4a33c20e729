"""The canonicalize rewrites: one test each (structure, values, DEBUG_MODE, excluding it).

Each case builds a small graph from inputs of a dtype and broadcast pattern (a layout),
checks that the rewrite shows in the compiled graph (up to canonicalize: specialize turns
some canonical forms back), that values equal the unrewritten graph's, and that excluding
the rewrite by name turns it off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest

import opgraph
import opgraph.scalar.basic as ps
import opgraph.tensor as T
from opgraph.compile.mode import Mode
from opgraph.gradient import GradBlock, disconnected_grad, zero_grad
from opgraph.graph.basic import Constant
from opgraph.scalar.type import get_scalar_type
from opgraph.tensor.basic import Rebroadcast
from opgraph.tensor.elemwise import DimShuffle, Elemwise
from opgraph.tensor.shape import MakeVector, Reshape
from opgraph.tensor.structure import Alloc, alloc
from opgraph.tensor.subtensor import Subtensor

F64 = ("float64", ((False, False), (False, False), (False, False)))
F32_BCAST = ("float32", ((True, False), (False, True), (False, False)))
FAST_RUN_PY = Mode(linker="py", optimizer="fast_run")
I32 = ("int32", ((False, False), (False, False), (False, False)))
LAYOUTS = (F64, F32_BCAST)


def _constants_of_output_dtype(uses: Any) -> bool:
    """Every constant read by an Elemwise has that Elemwise's output dtype."""
    pairs = [
        (v.type.dtype, n.outputs[0].type.dtype)
        for n in uses.nodes
        if isinstance(n.op, Elemwise)
        for v in n.inputs
        if isinstance(v, Constant)
    ]
    return bool(pairs) and all(a == b for a, b in pairs)


def _subtensors_of_inputs(uses: Any) -> bool:
    """Every Subtensor indexes a graph input (the elementwise work moved after it)."""
    subs = [n for n in uses.nodes if isinstance(n.op, Subtensor)]
    return bool(subs) and all(n.inputs[0].owner is None for n in subs)


class Case(NamedTuple):
    """One rewrite's test: ``build(inputs) -> output``, ``applied(uses) -> bool``."""

    name: str
    build: Callable[..., Any]
    applied: Callable[[Any], bool]
    also_exclude: tuple[str, ...] = ()
    layouts: tuple[tuple[str, Any], ...] = LAYOUTS
    canonical_only: bool = True  # check the structure before specialize


def _no_ds_above_elemwise(uses: Any) -> bool:
    return not any(
        isinstance(n.op, DimShuffle)
        and n.inputs[0].owner is not None
        and isinstance(n.inputs[0].owner.op, Elemwise)
        for n in uses.nodes
    )


def _fill_under_mul(uses: Any) -> bool:
    return any(
        isinstance(n.op, Elemwise)
        and isinstance(n.op.scalar_op, ps.Mul)
        and any(
            i.owner is not None
            and isinstance(i.owner.op, Elemwise)
            and isinstance(i.owner.op.scalar_op, ps.Second)
            for i in n.inputs
        )
        for n in uses.nodes
    )


def _flat_add(uses: Any) -> bool:
    return any(
        isinstance(n.op, Elemwise) and isinstance(n.op.scalar_op, ps.Add) and len(n.inputs) == 3
        for n in uses.nodes
    )


def _same_dtype_cast(x: Any) -> Any:
    return Elemwise(ps.Cast(get_scalar_type(x.type.dtype)))(x)


CASES = [
    Case(
        "local_mul_canonizer",
        lambda x, y, z: x * y / y,
        lambda uses: not uses(ps.TrueDiv, ps.Mul),
    ),
    Case(
        "local_mul_canonizer",
        lambda x, y, z: (x * y) / (y * z) * 2 * 3,
        lambda uses: uses.count(ps.Mul) == 1 and uses(ps.TrueDiv),
    ),
    Case(
        "local_add_canonizer",
        lambda x, y, z: (x + y) - (y + z),
        lambda uses: not uses(ps.Add),
        layouts=(F64, F32_BCAST, I32),
    ),
    Case("local_add_canonizer", lambda x, y, z: x - x, lambda uses: not uses(ps.Sub)),
    Case(
        "local_add_mul_fusion",
        lambda x, y, z: (x + y) + z,
        _flat_add,
        layouts=(F64, F32_BCAST, I32),
    ),
    Case(
        "local_neg_to_mul",
        lambda x, y, z: -x,
        lambda uses: uses(ps.Mul) and not uses(ps.Neg),
        layouts=(F64, I32),
    ),
    Case(
        "local_neg_neg",
        lambda x, y, z: T.neg(T.neg(x)),
        lambda uses: not uses(ps.Neg, ps.Mul),
        also_exclude=("local_neg_to_mul",),
    ),
    Case(
        "local_mul_canonizer",
        lambda x, y, z: x * 1,
        lambda uses: not uses(ps.Mul),
        layouts=(F64, F32_BCAST, I32),
    ),
    Case(
        "local_add_canonizer",
        lambda x, y, z: x + 0,
        lambda uses: not uses(ps.Add),
        layouts=(F64, F32_BCAST, I32),
    ),
    Case("local_pow_canonicalize", lambda x, y, z: x**1, lambda uses: not uses(ps.Pow)),
    Case("local_pow_canonicalize", lambda x, y, z: x**0 + y, lambda uses: not uses(ps.Pow)),
    Case(
        "local_useless_dimshuffle",
        lambda x, y, z: DimShuffle(x.type.broadcastable, [0, 1])(x),
        lambda uses: not uses(DimShuffle),
    ),
    Case(
        "local_dimshuffle_lift",
        lambda x, y, z: T.exp(x + y).T,
        _no_ds_above_elemwise,
    ),
    Case("local_dimshuffle_lift", lambda x, y, z: x.T.T + y, lambda uses: not uses(DimShuffle)),
    Case(
        "local_useless_cast",
        lambda x, y, z: _same_dtype_cast(x),
        lambda uses: not uses(ps.Cast),
        layouts=(F64, I32),
    ),
    Case(
        "local_cast_cast",
        lambda x, y, z: T.cast(T.cast(x, "float64"), x.type.dtype),
        lambda uses: not uses(ps.Cast),
        layouts=(("float32", F64[1]), I32),
    ),
    Case(
        "local_useless_rebroadcast",
        lambda x, y, z: Rebroadcast((0, False))(x),
        lambda uses: not uses(Rebroadcast),
        layouts=(F64,),
    ),
    Case(
        "local_rebroadcast_rebroadcast",
        lambda x, y, z: Rebroadcast((1, False))(Rebroadcast((0, False))(x)),
        lambda uses: uses.count(Rebroadcast) == 1,
        layouts=(("float64", ((True, True),)),),
    ),
    Case(
        "local_useless_elemwise",
        lambda x, y, z: T.add(x) * y,
        lambda uses: uses.count(ps.Add) == 0,
        also_exclude=("local_add_canonizer",),
    ),
    Case(
        "local_useless_elemwise",
        lambda x, y, z: T.eq(x, x),
        lambda uses: not uses(ps.EQ),
        layouts=(I32,),
    ),
    Case("local_fill_sink", lambda x, y, z: T.fill(x, 2.0) * y, lambda u: not _fill_under_mul(u)),
    Case(
        "local_useless_fill",
        lambda x, y, z: T.fill(x, y),
        lambda uses: not uses(ps.Second),
        layouts=(F64, I32),
    ),
    Case(
        "local_fill_to_alloc",
        lambda x, y, z: T.zeros_like(x) + T.ones_like(y),
        lambda uses: uses(Alloc) and not uses(ps.Second),
        canonical_only=False,
    ),
    Case(
        "local_reshape_reshape",
        lambda x, y, z: T.reshape(T.reshape(x, (-1,)), (4, 3)),
        lambda uses: uses.count(Reshape) == 1,
        layouts=(F64,),
    ),
    Case(
        "local_subtensor_make_vector",
        lambda x, y, z: x * MakeVector("int64")(x.shape[1], x.shape[0])[1:][0],
        lambda uses: not uses(MakeVector),
        layouts=(F64,),
    ),
    Case(
        "local_useless_alloc",
        lambda x, y, z: alloc(x, x.shape[0], x.shape[1]) * y,
        lambda uses: not uses(Alloc),
        layouts=(F64,),
    ),
    Case(
        "local_alloc_alloc",
        lambda x, y, z: alloc(alloc(x, 2, x.shape[1]), 3, 2, x.shape[1]),
        lambda uses: uses.count(Alloc) == 1,
        layouts=(("float64", ((True, False),)),),
    ),
    Case(
        "local_remove_grad_block",
        lambda x, y, z: disconnected_grad(x) + zero_grad(y),
        lambda uses: not uses(GradBlock),
    ),
    Case(
        "local_upcast_elemwise_constant_inputs",
        lambda x, y, z: T.maximum(x, 0) + T.minimum(y, np.arange(4, dtype="int8")),
        _constants_of_output_dtype,
        layouts=(F64,),
    ),
    Case(
        "local_subtensor_lift",
        lambda x, y, z: T.exp(x)[1:, 0],
        _subtensors_of_inputs,
        layouts=(F64,),
    ),
    Case(
        "local_subtensor_lift",
        lambda x, y, z: (x * y - 2.0)[::2],
        _subtensors_of_inputs,
        layouts=(F64,),
    ),
    Case(
        "local_subtensor_merge",
        lambda x, y, z: x[1:][::-1, 1:],
        lambda uses: uses.count(Subtensor) == 1,
        layouts=(F64,),
    ),
]


@pytest.mark.parametrize(
    "case,layout",
    [(c, lay) for c in CASES for lay in c.layouts],
    ids=[f"{c.name}-{i}-{lay[0]}" for i, c in enumerate(CASES) for lay in c.layouts],
)
def test_canonicalize_rewrite(rewrites_check: Any, case: Case, layout: Any) -> None:
    dtype, patterns = layout
    inputs, values = rewrites_check.inputs(dtype, patterns, low=1, high=4)
    padded = list(inputs) + [None] * (3 - len(inputs))
    out = case.build(*padded)
    mode = rewrites_check.canonicalize_mode if case.canonical_only else None
    rewrites_check.rewrite(
        case.name, inputs, out, values, case.applied, case.also_exclude, mode=mode
    )


def test_every_canonicalize_rewrite_has_a_case() -> None:
    import opgraph_optimizers.canonicalize as canonicalize

    names = {n for n in canonicalize.__all__ if n.startswith("local_")}
    assert names <= {c.name for c in CASES}


# ------------------------------------------------------------------ the seeds and more


def test_seed_x_times_y_over_y_is_x(rewrites_check: Any) -> None:
    x, y = T.dmatrices("x", "y")
    f = opgraph.function([x, y], x * y / y)
    assert [str(n.op) for n in f.maker.fgraph.toposort()] == ["DeepCopyOp"]
    xv, yv = np.full((2, 2), 3.0), np.full((2, 2), 7.0)
    np.testing.assert_allclose(f(xv, yv), xv)


def test_cancel_keeps_the_shape_of_a_cancelled_broadcast_term(rewrites_check: Any) -> None:
    x = T.drow("x")
    y = T.dmatrix("y")
    out = x * y / y
    inputs, values = [x, y], [np.ones((1, 3)), np.full((2, 3), 2.0)]
    f = rewrites_check.compile(inputs, out, FAST_RUN_PY)
    assert f(*values).shape == (2, 3)
    assert not rewrites_check.uses(f)(ps.TrueDiv)


def test_canonical_constants_come_first_and_fold(rewrites_check: Any) -> None:
    x = T.dvector("x")
    f = rewrites_check.compile([x], 2 * x * 3 / 4, rewrites_check.canonicalize_mode)
    (node,) = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, Elemwise)]
    assert isinstance(node.op.scalar_op, ps.Mul)
    assert float(node.inputs[0].data.reshape(-1)[0]) == 1.5


def test_integer_overflow_is_not_reassociated(rewrites_check: Any) -> None:
    x = T.bvector("x")
    y = T.dvector("y")
    out = (x * x) / (y * 1.0) * y
    f = rewrites_check.compile([x, y], out, FAST_RUN_PY)
    ref = rewrites_check.compile([x, y], out, rewrites_check.reference_mode)
    xv, yv = np.array([100, 3], dtype="int8"), np.array([2.0, 3.0])
    np.testing.assert_allclose(f(xv, yv), ref(xv, yv))


def test_canonicalize_runs_in_fast_compile() -> None:
    x = T.dvector("x")
    f = opgraph.function([x], x * 1, mode=Mode(linker="py", optimizer="fast_compile"))
    assert not any(isinstance(n.op, Elemwise) for n in f.maker.fgraph.toposort())


@pytest.mark.parametrize(
    "build",
    [
        lambda x: x + 0.5,  # a float32 constant in a float64 tree
        lambda x: x * 0.9,
        lambda x: T.sin(x) * 3,
        lambda x: x + np.float64(1e-300),
        lambda x: T.cast(x, "float32") + 1e-50,  # 0 in float32: dropped as neutral
        lambda x: x * np.nan,
        lambda x: x + 0,
        lambda x: (x + 1) * 2,
        lambda x: T.cast(x, "int32") * 3,
        lambda x: T.cast(x, "int8") * 2.5,  # the integer term is cast
        lambda x: x.dimshuffle("x", 0) + T.constant([[2.0]]),
    ],
)
def test_constant_last_shortcut_matches_the_general_canonizer(
    build: Callable[[Any], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``x op c`` is rebuilt as ``c op x`` directly; the result is the general path's."""
    from opgraph.printing import debugprint
    from opgraph_optimizers.canonicalize.math import Canonizer

    def compiled_graph() -> str:
        x = T.dvector("x")
        f = opgraph.function([x], build(x), mode=Mode(linker="py", optimizer="fast_compile"))
        return debugprint(f, file="str", ids="")

    quick = compiled_graph()
    monkeypatch.setattr(Canonizer, "_constant_last", lambda self, node, out, fgraph: None)
    assert quick == compiled_graph()


def test_subtensor_lift_leaves_a_result_used_elsewhere(rewrites_check: Any) -> None:
    x = T.dmatrix("x")
    e = T.exp(x)
    f = rewrites_check.compile([x], [e[0], e.sum()])
    subs = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, Subtensor)]
    assert subs and all(n.inputs[0].owner is not None for n in subs)  # exp stays whole
    v = np.arange(6.0).reshape(2, 3) / 6
    first, total = f(v)
    np.testing.assert_allclose(first, np.exp(v)[0])
    np.testing.assert_allclose(total, np.exp(v).sum())


def test_mean_divisor_is_one_cast_of_the_length(rewrites_check: Any) -> None:
    x = T.dvector("x")
    f = opgraph.function([x], x.mean())
    ops = [str(n.op) for n in f.maker.fgraph.toposort()]
    assert ops == [
        "Shape_i{0}",
        "Sum{acc_dtype=float64}",
        "Elemwise{Composite{(i0 / Cast{float64}(i1))}}[(0, 0)]",
    ]
    assert f(np.arange(5.0)) == 2.0
