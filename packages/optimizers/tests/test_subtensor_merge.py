"""``merge_two_slices`` and ``local_subtensor_merge``: ``x[a:b:c][d:e:f]`` as one Subtensor.

``merge_two_slices`` is checked against NumPy's own slicing (``range`` objects slice exactly
as NumPy arrays do) on a grid of lengths 0..6 and bounds and steps in {None, -7..7}: with the
bounds known (Python ints, folded while merging), with constant bounds and symbolic lengths,
and with every bound symbolic (one compiled function per pattern of None bounds, fed many
values at once: the merged bounds are elementwise graphs, so vectors of bounds evaluate many
merges in one call). The rewrite is checked on small graphs in three modes, for the number of
Subtensor nodes left, values, IndexErrors and gradients.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

import opgraph
import opgraph.tensor as T
from opgraph.compile.mode import Mode
from opgraph.graph.basic import Variable
from opgraph.tensor.basic import Rebroadcast
from opgraph.tensor.subtensor import Subtensor
from opgraph.tensor.type import TensorType
from opgraph.testing import assert_allclose, verify_grad
from opgraph_optimizers.canonicalize.subtensor import local_subtensor_merge, merge_two_slices

BOUNDS = (None, *range(-7, 8))
STEPS = (None, *(v for v in range(-7, 8) if v))
LENGTHS = range(7)
#: Every slice of the grid (3,840 of them).
SLICES = [slice(a, b, c) for a in BOUNDS for b in BOUNDS for c in STEPS]
#: The slices each slice of the grid is merged with, before and after it.
BASIS = (slice(None, None, -1), slice(-2, 1, -3), slice(-6, 6, 2))
#: The graph as built, for the merges checked symbolically.
PLAIN = Mode(linker="py", optimizer=None)
#: The modes the rewrite must work in.
MODES = {"default": None, "FAST_COMPILE": "FAST_COMPILE", "py": Mode(linker="py")}


def _merged_range(n: int, merged: Any) -> range | int | None:
    """What ``merged`` picks of ``range(n)`` (an int for an index), None for an IndexError."""
    try:
        return range(n)[merged]
    except IndexError:
        return None


def _expected(n: int, s1: slice, s2: Any) -> range | int | None:
    """NumPy's ``arange(n)[s1][s2]`` as a range or an int; None for an IndexError."""
    try:
        return range(n)[s1][s2]
    except IndexError:
        return None


def test_range_slices_as_numpy_does() -> None:
    """The oracle: ``range(n)[s]`` picks what NumPy's ``arange(n)[s]`` does, on the grid."""
    for n, s in itertools.product(LENGTHS, SLICES):
        assert list(range(n)[s]) == np.arange(n)[s].tolist(), (n, s)


# ----------------------------------------------------------------------------------------
# merge_two_slices with known bounds


def _check_known(n: int, s1: slice, s2: Any) -> None:
    m = len(range(n)[s1])
    merged = merge_two_slices(s1, n, s2, m)
    parts = (merged.start, merged.stop, merged.step) if isinstance(merged, slice) else (merged,)
    assert all(p is None or isinstance(p, int) for p in parts), (n, s1, s2, merged)
    got, expected = _merged_range(n, merged), range(n)[s1][s2]
    assert got == expected, f"n={n}: {s1} then {s2} merged to {merged}"


def test_known_bounds_every_slice_against_a_basis() -> None:
    """Every slice of the grid, before and after each slice of BASIS, on every length."""
    for n, s, b in itertools.product(LENGTHS, SLICES, BASIS):
        _check_known(n, s, b)
        _check_known(n, b, s)


def test_known_bounds_random_pairs() -> None:
    """A seeded sample of the whole grid of (length, slice, slice)."""
    rnd = random.Random(0)
    for _ in range(40_000):
        _check_known(rnd.choice(LENGTHS), rnd.choice(SLICES), rnd.choice(SLICES))


def test_known_bounds_every_index() -> None:
    """Every slice of the grid, then every index that is in range, on every length."""
    for n, s in itertools.product(LENGTHS, SLICES):
        m = len(range(n)[s])
        for i in range(-m, m):
            _check_known(n, s, i)


def test_constant_variables_are_read_as_known() -> None:
    """Bounds given as opgraph constants (tensor or scalar) merge like Python ints."""
    s1 = slice(T.constant(1, dtype="int32"), None, opgraph.scalar.constant(2, dtype="int64"))
    merged = merge_two_slices(s1, T.constant(7, dtype="int64"), slice(None, None, -1), 3)
    assert merged == slice(5, -8, -2)
    assert list(range(7)[merged]) == list(range(7)[1::2][::-1])


# ----------------------------------------------------------------------------------------
# merge_two_slices with symbolic lengths and bounds


def _evaluate(outputs: Sequence[Any], inputs: Sequence[Variable], values: Sequence[Any]) -> list:
    """``outputs`` (ints, None or int64 graphs of ``inputs``) evaluated at ``values``."""
    graphs = [o for o in outputs if isinstance(o, Variable)]
    results = iter(
        opgraph.function(list(inputs), graphs, mode=PLAIN, on_unused_input="ignore")(*values)
    )
    return [next(results) if isinstance(o, Variable) else o for o in outputs]


def test_constant_bounds_symbolic_lengths() -> None:
    """Known bounds, lengths known only at run time: one function for 150 slice pairs."""
    rnd = random.Random(1)
    pairs = [(rnd.choice(SLICES), rnd.choice(SLICES)) for _ in range(120)]
    pairs += [(rnd.choice(SLICES), rnd.randrange(-6, 6)) for _ in range(30)]
    n, lens2 = T.lvector("n"), T.lmatrix("lens2")
    lengths = np.arange(len(LENGTHS))
    merged = [merge_two_slices(s1, n, s2, lens2[k]) for k, (s1, s2) in enumerate(pairs)]
    parts = [
        p for g in merged for p in ((g.start, g.stop, g.step) if isinstance(g, slice) else (g,))
    ]
    lens2_value = np.array([[len(range(q)[s1]) for q in lengths] for s1, _ in pairs])
    values = iter(_evaluate(parts, [n, lens2], [lengths, lens2_value]))
    for (s1, s2), g in zip(pairs, merged, strict=True):
        got = [next(values) for _ in range(3 if isinstance(g, slice) else 1)]
        for q in lengths:
            at_q = [
                p if p is None or isinstance(p, int) else int(np.broadcast_to(p, lengths.shape)[q])
                for p in got
            ]
            merged_q = slice(*at_q) if isinstance(g, slice) else at_q[0]
            assert _merged_range(q, merged_q) == _expected(q, s1, s2), (q, s1, s2, merged_q)


def _symbolic_grid(present: Sequence[bool], size: int, rnd: random.Random) -> list[tuple]:
    """(length, slice1, slice2) triples with None exactly where ``present`` is False: all of
    the grid's when there are at most ``size``, else ``size`` drawn from them."""
    choices = [
        (STEPS[1:] if k % 3 == 2 else BOUNDS[1:]) if p else (None,) for k, p in enumerate(present)
    ]
    if len(LENGTHS) * np.prod([len(c) for c in choices]) <= size:
        grid = itertools.product(LENGTHS, *choices)
    else:
        grid = ((rnd.choice(LENGTHS), *(rnd.choice(c) for c in choices)) for _ in range(size))
    return [(n, slice(*parts[:3]), slice(*parts[3:])) for n, *parts in grid]


def _check_symbolic(present: Sequence[bool], triples: Sequence[tuple], index: bool) -> None:
    """Merge with a symbolic vector for each present bound; compare every triple with NumPy."""
    names = ("start1", "stop1", "step1", "start2", "stop2", "step2")
    bounds = [T.lvector(name) if p else None for name, p in zip(names, present, strict=False)]
    n, m = T.lvector("n"), T.lvector("m")
    second = T.lvector("i") if index else slice(*bounds[3:])
    merged = merge_two_slices(slice(*bounds[:3]), n, second, m)
    parts = (merged.start, merged.stop, merged.step) if isinstance(merged, slice) else (merged,)

    def column(get: Callable[[tuple], Any]) -> np.ndarray:
        return np.array([get(t) for t in triples], dtype="int64")

    inputs, values = [n, m], [column(lambda t: t[0]), column(lambda t: len(range(t[0])[t[1]]))]
    for k, b in enumerate(bounds):
        if b is not None:
            side, attr = divmod(k, 3)
            inputs.append(b)
            values.append(
                column(lambda t, s=side + 1, a=("start", "stop", "step")[attr]: getattr(t[s], a))
            )
    if index:
        inputs.append(second)
        values.append(column(lambda t: t[2]))
    got = [
        p if p is None or isinstance(p, int) else np.broadcast_to(p, (len(triples),))
        for p in _evaluate(parts, inputs, values)
    ]
    for q, (n_q, s1, s2) in enumerate(triples):
        at_q = [p if p is None or isinstance(p, int) else int(p[q]) for p in got]
        merged_q = slice(*at_q) if isinstance(merged, slice) else at_q[0]
        assert _merged_range(n_q, merged_q) == _expected(n_q, s1, s2), (n_q, s1, s2, merged_q)


@pytest.mark.parametrize(
    "present",
    list(itertools.product((False, True), repeat=6)),
    ids=lambda p: "".join("x" if b else "_" for b in p),
)
def test_symbolic_bounds_slice_then_slice(present: tuple[bool, ...]) -> None:
    """Each pattern of None bounds, the others symbolic: every triple of the grid for the
    patterns with at most two symbolic bounds, 2,500 drawn from it for the others."""
    rnd = random.Random(sum(b << k for k, b in enumerate(present)))
    _check_symbolic(present, _symbolic_grid(present, 2_500, rnd), index=False)


@pytest.mark.parametrize(
    "present",
    list(itertools.product((False, True), repeat=3)),
    ids=lambda p: "".join("x" if b else "_" for b in p),
)
def test_symbolic_bounds_slice_then_index(present: tuple[bool, ...]) -> None:
    """Each pattern of None bounds of the slice, then every in-range symbolic index: all of
    the grid's slices of that pattern, on every length."""
    values = [
        (STEPS[1:] if k == 2 else BOUNDS[1:]) if p else (None,) for k, p in enumerate(present)
    ]
    triples = []
    for n, parts in itertools.product(LENGTHS, itertools.product(*values)):
        s1 = slice(*parts)
        m = len(range(n)[s1])
        triples += [(n, s1, i) for i in range(-m, m)]
    _check_symbolic(present, triples, index=True)


def test_symbolic_scalars() -> None:
    """0-d symbolic bounds (what the rewrite passes), one compiled function, many calls."""
    start1, stop1, step1, start2, stop2, step2, i = (T.lscalar(c) for c in "abcdefi")
    n, m = T.lscalar("n"), T.lscalar("m")
    s1 = slice(start1, stop1, step1)
    merged = merge_two_slices(s1, n, slice(start2, stop2, step2), m)
    index = merge_two_slices(s1, n, i, m)
    inputs = [start1, stop1, step1, start2, stop2, step2, i, n, m]
    f = opgraph.function(
        inputs,
        [merged.start, merged.stop, merged.step, index],
        mode=PLAIN,
        on_unused_input="ignore",
    )
    rnd = random.Random(2)
    for _ in range(300):
        length = rnd.choice(LENGTHS)
        a, b = (
            slice(rnd.choice(BOUNDS[1:]), rnd.choice(BOUNDS[1:]), rnd.choice(STEPS[1:]))
            for _ in range(2)
        )
        m_value = len(range(length)[a])
        idx = rnd.randrange(-m_value, m_value) if m_value else 0
        start, stop, step, at = (
            int(v)
            for v in f(a.start, a.stop, a.step, b.start, b.stop, b.step, idx, length, m_value)
        )
        assert range(length)[start:stop:step] == range(length)[a][b], (length, a, b)
        if m_value:
            assert range(length)[at] == range(length)[a][idx], (length, a, idx)


def test_merge_two_slices_rejects_what_numpy_rejects() -> None:
    with pytest.raises(ValueError, match="must be a slice"):
        merge_two_slices(2, 5, slice(None), 1)
    with pytest.raises(ValueError, match="step cannot be zero"):
        merge_two_slices(slice(None, None, 0), T.lscalar("n"), slice(None), T.lscalar("m"))
    with pytest.raises(TypeError, match="must be integers"):
        merge_two_slices(slice(T.dscalar("a"), None), 5, slice(None), 5)
    with pytest.raises(TypeError, match="must be integers"):
        merge_two_slices(slice(None), 5, T.dscalar("i"), 5)


def test_tensor_opt_exports_the_real_function() -> None:
    from opgraph.tensor import opt

    assert opt.merge_two_slices is merge_two_slices
    assert opt.local_subtensor_merge is local_subtensor_merge
    merged = opt.merge_two_slices(slice(1, None), 9, slice(None, None, 2), 8)
    assert merged == slice(1, None, 2)


# ----------------------------------------------------------------------------------------
# local_subtensor_merge


def _subtensors(f: Any) -> list[Any]:
    return [node for node in f.maker.fgraph.toposort() if isinstance(node.op, Subtensor)]


x_mat = T.matrix("x")
i_sym, j_sym, k_sym = T.lscalar("i"), T.lscalar("j"), T.lscalar("k")

#: (id, output built from x and i, j, k, NumPy's value on (xv, i, j, k)).
GRAPHS = [
    ("x[1:][::2]", lambda: x_mat[1:][::2], lambda xv, i, j, k: xv[1:][::2]),
    ("x[::-1][2:5]", lambda: x_mat[::-1][2:5], lambda xv, i, j, k: xv[::-1][2:5]),
    ("x[2:,1][::-1]", lambda: x_mat[2:, 1][::-1], lambda xv, i, j, k: xv[2:, 1][::-1]),
    ("x[i:j][k]", lambda: x_mat[i_sym:j_sym][k_sym], lambda xv, i, j, k: xv[i:j][k]),
]
#: Values of (i, j, k) for ``x[i:j][k]`` on the 7 rows of ``xv``.
SYMBOLIC_VALUES = [(1, 6, -2), (-5, 7, 1), (0, 7, 6), (-9, 4, -4), (3, -1, 2)]


@pytest.mark.parametrize("mode", list(MODES), ids=list(MODES))
@pytest.mark.parametrize(("name", "build", "numpy"), GRAPHS, ids=[g[0] for g in GRAPHS])
def test_rewrite_leaves_one_subtensor(
    name: str, build: Callable, numpy: Callable, mode: str
) -> None:
    f = opgraph.function(
        [x_mat, i_sym, j_sym, k_sym], build(), mode=MODES[mode], on_unused_input="ignore"
    )
    assert len(_subtensors(f)) == 1, opgraph.printing.debugprint(f, file="str")
    xv = np.arange(42, dtype=x_mat.type.dtype).reshape(7, 6)
    for i, j, k in SYMBOLIC_VALUES if "k" in name else [(0, 0, 0)]:
        expected = numpy(xv, i, j, k)
        got = f(xv, i, j, k)
        assert got.dtype == expected.dtype
        assert_allclose(got, expected)
        assert not np.shares_memory(got, xv)  # the function's output is not the input's memory


@pytest.mark.parametrize("mode", list(MODES), ids=list(MODES))
def test_rewrite_aligns_dimensions_dropped_by_an_index(mode: str) -> None:
    """Integer indices of the inner Subtensor drop dimensions; the outer indices skip them."""
    t = T.tensor3("t")
    cases = [
        (lambda v: v[1, 2:][::-1, 1], lambda v: v[1, 2:][::-1, 1]),
        (lambda v: v[:, -1][1:, ::2][0], lambda v: v[:, -1][1:, ::2][0]),
        (lambda v: v[::2][1:][::-1][0, 1:][:, -2], lambda v: v[::2][1:][::-1][0, 1:][:, -2]),
        (lambda v: v[1:][:, :, 1:][-1], lambda v: v[1:][:, :, 1:][-1]),
        (lambda v: v[:3][:], lambda v: v[:3][:]),
    ]
    tv = np.arange(5 * 4 * 6, dtype=t.type.dtype).reshape(5, 4, 6)
    for build, numpy in cases:
        f = opgraph.function([t], build(t), mode=MODES[mode])
        assert len(_subtensors(f)) == 1
        assert_allclose(f(tv), numpy(tv))


def test_rewrite_keeps_the_broadcastable_pattern() -> None:
    """A merged slice whose broadcastability the Subtensor cannot see gets it back."""
    row = TensorType("float64", (True, False))("row")
    out = row[0:1][::-1]
    f = opgraph.function([row], out)
    assert f.maker.fgraph.outputs[0].type == out.type
    assert len(_subtensors(f)) == 1
    assert any(isinstance(n.op, Rebroadcast) for n in f.maker.fgraph.toposort())
    rv = np.arange(5.0).reshape(1, 5)
    assert_allclose(f(rv), rv[0:1][::-1])


def test_rewrite_structure_values_and_exclusion(rewrites_check: Any) -> None:
    """The three-node test every rewrite gets: structure, values, DEBUG_MODE, and excluding
    ``local_subtensor_merge`` by name turns it off."""
    x = T.vector("x")
    rewrites_check.rewrite(
        "local_subtensor_merge",
        [x],
        [x[1:][::-2] * 2],
        [np.arange(9.0)],
        lambda uses: uses.count(Subtensor) == 1,
    )


def test_merged_node_is_a_view_of_the_original() -> None:
    """The merged Subtensor reads the original tensor as a view, and what runs after it in
    place does not write into the input."""
    x = T.vector("x")
    f = opgraph.function([x], [x[1:][::-2] * 2, x[::-1][1:4] + 1])
    subtensors = _subtensors(f)
    assert len(subtensors) == 2
    for node in subtensors:
        assert node.inputs[0] is f.maker.fgraph.inputs[0] and node.op.view_map == {0: [0]}
    xv = np.arange(9.0)
    before = xv.copy()
    got = f(xv)
    assert_allclose(got[0], before[1:][::-2] * 2)
    assert_allclose(got[1], before[::-1][1:4] + 1)
    assert_allclose(xv, before)


@pytest.mark.parametrize("mode", list(MODES), ids=list(MODES))
def test_out_of_range_index_still_raises(mode: str) -> None:
    x = T.vector("x")
    xv = np.arange(6.0)
    f = opgraph.function([x, k_sym], x[2:][k_sym], mode=MODES[mode])
    assert len(_subtensors(f)) == 1
    assert f(xv, 3) == xv[2:][3] and f(xv, -4) == xv[2:][-4]
    for k in (4, -5, 100, -100):
        with pytest.raises(IndexError):
            f(xv, k)
    for out in (x[2:][4], x[::-1][-7], x[1::2][3], x[6:][0]):
        g = opgraph.function([x], out, mode=MODES[mode])
        assert len(_subtensors(g)) == 1
        with pytest.raises(IndexError):
            g(xv)
    # the original's IndexError for an empty dimension, too
    with pytest.raises(IndexError):
        f(np.zeros(0), 0)


@pytest.mark.parametrize("mode", list(MODES), ids=list(MODES))
def test_zero_step_still_raises(mode: str) -> None:
    """A zero step is NumPy's ValueError; a known one keeps its node (nothing to merge), a
    symbolic one gives a merged zero step. Under an index it can only be an IndexError."""
    x, s = T.vector("x"), T.lscalar("s")
    xv = np.arange(5.0)
    f = opgraph.function([x], x[::0][1:], mode=MODES[mode])
    assert len(_subtensors(f)) == 2
    for out in (x[::s][1:], x[1:][::s], x[::s][::-1]):
        g = opgraph.function([x, s], out, mode=MODES[mode])
        assert len(_subtensors(g)) == 1
        with pytest.raises(ValueError, match="step cannot be zero"):
            g(xv, 0)
    with pytest.raises(ValueError, match="step cannot be zero"):
        f(xv)
    h = opgraph.function([x, s, k_sym], x[::s][k_sym], mode=MODES[mode])
    with pytest.raises(IndexError):
        h(xv, 0, 1)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_gradients_through_merged_subtensors(dtype: str, rng: np.random.Generator) -> None:
    xv = rng.uniform(-1, 1, size=(7, 5)).astype(dtype)
    functions = [
        lambda x: x[1:][::2],
        lambda x: x[::-1, 1:][2:5, 0],
        lambda x: x[2:, 1][::-1],
        lambda x: x[1:6][-2] * x[::-2][1],
    ]
    for fun in functions:
        verify_grad(fun, [xv], rng=rng)
    x = TensorType(dtype, (False, False))("x")
    forward = opgraph.function([x], functions[1](x))
    assert len(_subtensors(forward)) == 1
