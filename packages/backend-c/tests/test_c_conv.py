"""The correlation kernels (``opgraph_c._conv``) against the Ops' ``perform``.

Node-level checks run one ``CorrMM`` / ``CorrMM_gradWeights`` / ``CorrMM_gradInputs`` (and
3-d ``Corr3dMM*``) node's C thunk and its Op's ``perform`` on the same values and compare
values, dtypes, shapes, layouts and errors, over border modes, strides, dilations, groups,
depthwise, 1x1 and unshared filters, odd shapes, batches of 1 and more images than threads,
empty batches and non-contiguous inputs; threaded calls are checked to equal one-thread
calls bit for bit. The direct kernels run forced, with each vector set the CPU has; the
kernels each direction takes by default on issue 15's shapes are checked, and that
threaded GEMM calls leave OpenBLAS's thread count as they found it. Function-level checks compile a convolution and its gradients with the
``c`` linker, the ``py`` linker and ``DebugMode(linker="c")``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest
from thunk_checks import layouts, node_storage, twin
from thunk_checks import perform_outputs as perform

import opgraph.tensor as T
from opgraph.compile.debugmode import DebugMode
from opgraph.compile.function import function
from opgraph.compile.mode import Mode
from opgraph.gradient import grad
from opgraph.graph.basic import Apply
from opgraph.tensor.nnet.conv_numpy import conv_output_size
from opgraph.tensor.nnet.corr import CorrMM, CorrMM_gradInputs, CorrMM_gradWeights
from opgraph.tensor.nnet.corr3d import Corr3dMM, Corr3dMM_gradInputs, Corr3dMM_gradWeights
from opgraph_c import _conv
from opgraph_c.kernels.conv import corr_c
from opgraph_c.registry import get_registry

FLOATS = ["float32", "float64"]
FAMILY2 = (CorrMM, CorrMM_gradWeights, CorrMM_gradInputs)
FAMILY3 = (Corr3dMM, Corr3dMM_gradWeights, Corr3dMM_gradInputs)


@pytest.fixture(autouse=True)
def small_tunables() -> Iterator[None]:
    """Threads from the first multiply-add on (small shapes take the threaded paths)."""
    old = _conv.configure(thread_work=0)
    yield
    _conv.configure(**old)


def _tensor(nd: int, dtype: str, name: str) -> Any:
    return T.TensorType(dtype, (False,) * nd)(name)


def _pads(border: Any, kshape: Sequence[int], dil: Sequence[int]) -> list[tuple[int, int]]:
    out = []
    for i, k in enumerate(kshape):
        dk = (k - 1) * dil[i] + 1
        if border == "valid":
            out.append((0, 0))
        elif border == "full":
            out.append((dk - 1, dk - 1))
        elif border == "half":
            out.append((dk // 2, dk // 2))
        elif isinstance(border, int):
            out.append((border, border))
        else:
            m = border[i]
            out.append(m if isinstance(m, tuple) else (m, m))
    return out


class Case:
    """One correlation: Op parameters and shapes; builds the three nodes and their values."""

    def __init__(
        self,
        img: Sequence[int],
        kern: Sequence[int],
        border: Any = "valid",
        sub: Sequence[int] | None = None,
        dil: Sequence[int] | None = None,
        groups: int = 1,
        unshared: bool = False,
    ) -> None:
        self.nd = len(img) - 2
        self.img, self.kern = tuple(img), tuple(kern)  # kern: (O, C/g, *k)
        self.border, self.groups, self.unshared = border, groups, unshared
        self.sub = tuple(sub or (1,) * self.nd)
        self.dil = tuple(dil or (1,) * self.nd)
        ks = self.kern[2:]
        pads = _pads(border, ks, self.dil)
        self.out = tuple(
            conv_output_size(img[2 + i], ks[i], pads[i], self.sub[i], self.dil[i])
            for i in range(self.nd)
        )
        if unshared:
            self.kern = (kern[0], *self.out, *kern[1:])

    def __repr__(self) -> str:
        return (
            f"Case({self.img}, {self.kern}, {self.border!r}, {self.sub}, {self.dil}, "
            f"g={self.groups}, unshared={self.unshared})"
        )

    def ops(self) -> tuple[Any, Any, Any]:
        family = FAMILY2 if self.nd == 2 else FAMILY3
        kw: dict[str, Any] = {
            "border_mode": self.border,
            "subsample": self.sub,
            "filter_dilation": self.dil,
            "num_groups": self.groups,
        }
        if self.nd == 2:
            kw["unshared"] = self.unshared
        return tuple(cls(**kw) for cls in family)  # type: ignore[return-value]

    def nodes(self, dtype: str) -> list[Apply]:
        """The forward node and both gradients (with their ``shape`` inputs)."""
        fwd, gw, gi = self.ops()
        nd = self.nd
        img = _tensor(2 + nd, dtype, "img")
        kern = _tensor(len(self.kern), dtype, "kern")
        top = _tensor(2 + nd, dtype, "top")
        kshape = [T.iscalar(f"k{i}") for i in range(nd)]
        imshape = [T.iscalar(f"s{i}") for i in range(nd)]
        return [
            fwd(img, kern).owner,
            gw(img, top, kshape).owner,
            gi(kern, top, imshape).owner,
        ]

    def values(self, dtype: str, seed: int = 0) -> list[list[Any]]:
        rng = np.random.default_rng(seed)
        img = rng.standard_normal(self.img).astype(dtype)
        kern = rng.standard_normal(self.kern).astype(dtype)
        top = rng.standard_normal((self.img[0], self.kern[0], *self.out)).astype(dtype)
        ks = [np.int32(k) for k in self.kern[-self.nd :]]
        sp = [np.int32(s) for s in self.img[2:]]
        return [[img, kern], [img, top, *ks], [kern, top, *sp]]


def _thunk(node: Apply, values: Sequence[Any], **options: Any) -> tuple[Any, list[Any]]:
    """The registry's thunk for ``node`` (checked to be the C one), or with ``options``
    (nthreads, adaptive) a CorrThunk made directly; its input cells hold ``values``."""
    storage = node_storage(node, values)
    if options:
        direction = {CorrMM: 0, CorrMM_gradWeights: 1, CorrMM_gradInputs: 2}.get(
            type(node.op),
            {Corr3dMM: 0, Corr3dMM_gradWeights: 1, Corr3dMM_gradInputs: 2}.get(type(node.op)),
        )
        thunk = _conv.CorrThunk(
            node,
            [storage[v] for v in node.inputs],
            [storage[node.outputs[0]]],
            direction,
            **options,
        )
    else:
        thunk = get_registry().make_thunk(node, storage, None)
    assert isinstance(thunk, _conv.CorrThunk), (node.op, thunk)
    return thunk, storage[node.outputs[0]]


def _close(got: Any, expected: Any) -> None:
    """Equal up to the rounding of sums in another order (relative to the largest value)."""
    got, expected = np.asarray(got), np.asarray(expected)
    rtol = 2e-5 if got.dtype == np.float32 else 1e-12
    scale = max(1.0, float(np.abs(expected).max(initial=0)))
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol * scale)


def check_node(node: Apply, values: Sequence[Any], c_path: bool = True, **options: Any) -> Any:
    """Run ``node``'s C thunk and ``perform`` on copies of ``values``: same result or error.

    ``c_path``: the thunk computes in C (else it must have handed the call to perform).
    Returns the C thunk's output (None when both raised).
    """
    c_values = [twin(v) for v in values]
    py_values = [twin(v) for v in values]
    thunk, cell = _thunk(node, c_values, **options)
    try:
        thunk()
        c_err = None
    except Exception as exc:  # compared with perform's
        c_err = exc
    try:
        (expected,) = perform(node, py_values)
        py_err = None
    except Exception as exc:
        py_err = exc
    assert thunk.perform_calls == (0 if c_path else 1), (node.op, thunk.perform_calls)
    if c_err is not None or py_err is not None:
        assert type(c_err) is type(py_err) and str(c_err) == str(py_err), (c_err, py_err)
        return None
    got = cell[0]
    assert type(got) is np.ndarray and got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape and got.flags.c_contiguous
    assert not any(np.shares_memory(got, v) for v in c_values if isinstance(v, np.ndarray))
    _close(got, expected)
    for cv, pv in zip(c_values, py_values, strict=True):  # inputs untouched
        assert np.array_equal(cv, pv)
    return got


def check_case(case: Case, dtype: str, **options: Any) -> None:
    for node, values in zip(case.nodes(dtype), case.values(dtype), strict=True):
        check_node(node, values, **options)


# ------------------------------------------------------------------- 2-d cases

BORDERS = ["valid", "full", "half", 2, (1, 2), ((1, 2), (0, 3))]

CASES_2D = [
    *(Case((2, 3, 7, 8), (4, 3, 3, 3), border) for border in BORDERS),
    *(Case((2, 3, 9, 8), (4, 3, 3, 2), border, sub=(2, 3)) for border in BORDERS),
    *(Case((2, 2, 9, 10), (3, 2, 3, 2), border, dil=(2, 3)) for border in BORDERS),
    Case((3, 4, 11, 9), (6, 4, 4, 3), "half", sub=(2, 1), dil=(1, 2)),  # even kernel, half
    Case((2, 6, 7, 7), (4, 3, 3, 3), "half", groups=2),  # groups
    Case((2, 6, 8, 7), (9, 2, 3, 3), (1, 0), sub=(2, 2), groups=3),
    Case((3, 4, 7, 9), (4, 1, 3, 3), "half", groups=4),  # depthwise
    Case((2, 3, 9, 9), (6, 1, 5, 3), ((2, 1), (0, 1)), sub=(2, 3), dil=(1, 2), groups=3),
    Case((2, 1, 8, 8), (5, 1, 3, 3), "valid"),  # a single-channel image
    Case((2, 5, 6, 7), (4, 5, 1, 1)),  # 1x1: the image is the column matrix
    Case((2, 6, 6, 7), (4, 3, 1, 1), groups=2),
    Case((2, 5, 7, 7), (4, 5, 1, 1), sub=(2, 2)),  # 1x1 with a stride: im2col
    Case((2, 5, 6, 7), (4, 5, 1, 1), 1),  # 1x1 padded
    Case((2, 3, 6, 7), (4, 3, 3, 2), "valid", unshared=True),  # unshared
    Case((2, 4, 7, 6), (4, 2, 2, 3), (1, 2), sub=(2, 1), groups=2, unshared=True),
    Case((1, 3, 5, 4), (2, 3, 3, 3), "full"),  # batch 1
    Case((7, 3, 5, 6), (2, 3, 2, 2), "half", sub=(1, 2)),  # more images than threads
    Case((2, 3, 1, 13), (2, 3, 1, 4), "valid"),  # a row image
    Case((2, 3, 3, 3), (2, 3, 3, 3), "valid"),  # a 1x1 output
    Case((2, 2, 5, 5), (3, 2, 1, 1), "valid", dil=(3, 3)),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", CASES_2D, ids=repr)
def test_2d_matches_perform(case: Case, dtype: str) -> None:
    check_case(case, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_bands_of_output_rows_match_perform(dtype: str) -> None:
    """Columns built a few output rows at a time (bands) give perform's result."""
    old = _conv.configure(tile_bytes=1, min_tile_cols=1)
    try:
        for case in (
            Case((2, 3, 9, 8), (4, 3, 3, 3), "half"),
            Case((2, 4, 9, 9), (4, 2, 3, 2), (1, 2), sub=(2, 3), dil=(1, 2), groups=2),
            Case((2, 2, 4, 5, 6), (3, 2, 2, 3, 2), "full"),
        ):
            check_case(case, dtype)
    finally:
        _conv.configure(**old)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    "case",
    [
        Case((5, 4, 9, 8), (6, 4, 3, 3), "half"),
        Case((5, 4, 9, 8), (6, 2, 3, 3), (1, 2), sub=(2, 1), groups=2),
        Case((5, 4, 9, 8), (8, 1, 3, 3), "half", groups=4),  # depthwise
        Case((5, 4, 6, 7), (6, 4, 1, 1)),  # 1x1
        Case((3, 2, 6, 7), (4, 2, 3, 2), "valid", unshared=True),
        Case((1, 4, 9, 8), (6, 4, 3, 3), "full"),  # fewer images than threads
        Case((2, 2, 4, 5, 6), (3, 2, 2, 3, 2), "half"),
    ],
    ids=repr,
)
def test_threads_give_the_one_thread_result(case: Case, dtype: str) -> None:
    """Two threads (batch split, slots of the weight gradient, planes) equal one thread bit
    for bit, and match perform."""
    for node, values in zip(case.nodes(dtype), case.values(dtype), strict=True):
        one = check_node(node, values, nthreads=1, adaptive=False)
        two = check_node(node, values, nthreads=2, adaptive=False)
        assert np.array_equal(one, two), node.op


#: The vector sets of the direct kernels this CPU runs (2 AVX-512, 1 AVX2, 0 plain).
SIMD_LEVELS = list(range(_conv.configure()["simd"] + 1))
GEMM, DEPTHWISE, DIRECT = 0, 2, 4  # CorrThunk.last_mode

DIRECT_CASES = [
    Case((2, 3, 7, 8), (4, 3, 3, 3), "valid"),
    Case((2, 3, 9, 8), (5, 3, 3, 2), "half"),
    Case((2, 2, 6, 7), (3, 2, 2, 3), "full"),
    Case((2, 2, 9, 10), (3, 2, 3, 2), ((1, 2), (0, 3)), dil=(2, 3)),
    Case((2, 6, 8, 7), (9, 2, 3, 3), (1, 0), groups=3),
    Case((3, 4, 11, 9), (6, 4, 4, 3), "half", dil=(1, 2)),
    Case((2, 5, 6, 7), (4, 5, 1, 1), 1),  # 1x1 padded
    Case((2, 3, 1, 13), (2, 3, 1, 4), "valid"),  # a row image
    Case((2, 1, 8, 8), (5, 1, 3, 3), "valid"),  # one channel
    Case((2, 20, 12, 12), (17, 20, 5, 5), "valid"),  # more filters than a tile
    Case((2, 2, 4, 5, 6), (3, 2, 2, 3, 2), "half"),
    Case((2, 2, 5, 6, 7), (3, 2, 3, 2, 3), "full", dil=(1, 2, 1)),
]


@pytest.fixture
def direct_always() -> Iterator[None]:
    """The direct kernels wherever they apply (unit strides), whatever they cost."""
    old = _conv.configure(direct=2)
    yield
    _conv.configure(**old)


@pytest.mark.parametrize("simd", SIMD_LEVELS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_direct_kernels_match_perform(simd: int, dtype: str, direct_always: None) -> None:
    """Each vector set of the direct kernels, the three directions: perform's values, and
    two threads give the one-thread result bit for bit."""
    old = _conv.configure(simd=simd)
    try:
        for case in DIRECT_CASES:
            for node, values in zip(case.nodes(dtype), case.values(dtype), strict=True):
                one = check_node(node, values, nthreads=1, adaptive=False)
                two = check_node(node, values, nthreads=2, adaptive=False)
                assert np.array_equal(one, two), (case, node.op)
                thunk, _ = _thunk(node, values, nthreads=1, adaptive=False)
                thunk()
                assert thunk.last_mode == DIRECT, (case, node.op)
    finally:
        _conv.configure(**old)


def test_direct_kernels_skip_strides(direct_always: None) -> None:
    """A stride takes GEMM (the direct kernels read runs of consecutive pixels)."""
    case = Case((2, 3, 9, 8), (4, 3, 3, 3), "half", sub=(1, 2))
    for node, values in zip(case.nodes("float32"), case.values("float32"), strict=True):
        thunk, _ = _thunk(node, values)
        thunk()
        assert thunk.last_mode == GEMM


@pytest.mark.parametrize(
    ("case", "modes"),
    [
        # issue 15's W12 (batch 2): direct everywhere
        (Case((2, 64, 32, 32), (64, 64, 3, 3), "half"), (DIRECT, DIRECT, DIRECT)),
        # LeNet's layers (batch 2): 25 weights a filter, 20 filters: GEMM; then direct
        (Case((2, 1, 28, 28), (20, 1, 5, 5)), (GEMM, GEMM, GEMM)),
        (Case((2, 20, 12, 12), (50, 20, 5, 5)), (DIRECT, DIRECT, DIRECT)),
        # depthwise: the forward loop; the gradients by GEMM
        (Case((2, 4, 9, 8), (4, 1, 3, 3), "half", groups=4), (DEPTHWISE, GEMM, GEMM)),
        (Case((2, 4, 9, 8), (8, 1, 3, 3), "half", groups=4), (GEMM, GEMM, GEMM)),
    ],
    ids=repr,
)
def test_default_modes(case: Case, modes: tuple[int, int, int]) -> None:
    """The kernels each direction takes by default on issue 15's shapes, and their values."""
    for node, values, mode in zip(case.nodes("float32"), case.values("float32"), modes):
        check_node(node, values)
        thunk, _ = _thunk(node, values)
        thunk()
        assert thunk.last_mode == mode, (node.op, thunk.last_mode)


DEPTHWISE_CASES = [
    Case((2, 3, 9, 33), (3, 1, 3, 3), "half", groups=3),  # rows of several vector groups
    Case((2, 3, 6, 5), (3, 1, 3, 3), "half", groups=3),  # rows shorter than a vector
    Case((2, 2, 8, 21), (2, 1, 5, 5), "full", groups=2),  # taps past both ends of a row
    Case((2, 2, 9, 20), (2, 1, 3, 4), ((2, 0), (1, 3)), groups=2),  # uneven pads
    Case((2, 2, 11, 19), (2, 1, 3, 3), "valid", dil=(2, 3), groups=2),
    Case((2, 2, 11, 19), (2, 1, 3, 3), "half", sub=(2, 1), groups=2),  # a row stride
    Case((2, 2, 11, 19), (2, 1, 3, 3), "half", sub=(1, 2), groups=2),  # strided loop
    Case((1, 2, 12, 12), (2, 1, 9, 9), "half", groups=2),  # 81 taps: strided loop
    Case((2, 2, 5, 6, 17), (2, 1, 3, 2, 3), "half", groups=2),  # 3-d
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", DEPTHWISE_CASES, ids=repr)
def test_depthwise_forward_loop(case: Case, dtype: str) -> None:
    """The depthwise forward loop (its padded rows and vector groups, and the strided loop
    beside it) gives perform's values on every border, stride and dilation, and one and
    two threads give the same result bit for bit."""
    node, values = case.nodes(dtype)[0], case.values(dtype)[0]
    one = check_node(node, values, nthreads=1, adaptive=False)
    two = check_node(node, values, nthreads=2, adaptive=False)
    assert np.array_equal(one, two)
    thunk, _ = _thunk(node, values)
    thunk()
    assert thunk.last_mode == DEPTHWISE


@pytest.mark.parametrize(
    "case",
    [
        Case((1, 1, 40, 40), (1, 1, 3, 3), "half"),  # depthwise: one plane
        Case((1, 2, 6, 7), (4, 2, 3, 2), "valid", unshared=True),  # unshared: one image
    ],
    ids=repr,
)
def test_fewer_items_than_threads_keep_to_their_buffers(case: Case) -> None:
    """One plane or one image on two threads (any thread may take the only item): each
    thread's buffer exists, and the result is one thread's."""
    old = _conv.configure(thread_work=1)
    try:
        for node, values in zip(case.nodes("float64"), case.values("float64"), strict=True):
            one = check_node(node, values, nthreads=1, adaptive=False)
            for _ in range(20):
                two = check_node(node, values, nthreads=2, adaptive=False)
                assert np.array_equal(one, two), node.op
    finally:
        _conv.configure(**old)


def test_depthwise_forward_keeps_infinities() -> None:
    """An infinity in the image reaches exactly the outputs whose taps read it (the zeros
    the loop pads its rows with reach none)."""
    case = Case((1, 2, 6, 11), (2, 1, 3, 3), "half", groups=2)
    node, values = case.nodes("float64")[0], case.values("float64")[0]
    image = values[0].copy()
    image[0, 0, 2, 0] = -np.inf
    image[0, 1, 5, 10] = np.inf
    thunk, cell = _thunk(node, [image, values[1]])
    thunk()
    got = cell[0]
    (expected,) = perform(node, [image, values[1]])
    bad = ~np.isfinite(got)
    assert np.array_equal(bad, ~np.isfinite(expected))
    _close(got[~bad], expected[~bad])
    assert bad[0, 0].sum() == 6 and bad[0, 0, 1:4, 0:2].all()  # 3 rows x 2 columns
    assert bad[0, 1].sum() == 4 and bad[0, 1, 4:6, 9:11].all()


UNSHARED = 3  # CorrThunk.last_mode


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    "case",
    [
        Case((5, 3, 6, 7), (4, 3, 3, 2), "valid", unshared=True),
        Case((6, 4, 7, 6), (4, 2, 2, 3), (1, 2), sub=(2, 1), groups=2, unshared=True),
    ],
    ids=repr,
)
def test_unshared_chunks_and_threads_give_one_result(case: Case, dtype: str) -> None:
    """Unshared filters run a chunk of images at a time: chunks of one, two or every image,
    on one or two threads, give the same result bit for bit in every direction, and
    perform's values."""
    for node, values in zip(case.nodes(dtype), case.values(dtype), strict=True):
        # one image's patches: groups x pixels x taps of a filter
        taps = case.kern[1 + case.nd] * int(np.prod(case.kern[2 + case.nd :]))
        image = case.groups * int(np.prod(case.out)) * taps * np.dtype(dtype).itemsize
        results = []
        for images, nthreads in ((1, 1), (1, 2), (2, 1), (2, 2), (case.img[0], 2)):
            old = _conv.configure(unshared_bytes=images * image)
            try:
                results.append(check_node(node, values, nthreads=nthreads, adaptive=False))
                thunk, _ = _thunk(node, values)
                thunk()
                assert thunk.last_mode == UNSHARED
            finally:
                _conv.configure(**old)
        for other in results[1:]:
            assert np.array_equal(results[0], other), node.op


def _openblas_threads() -> Any:
    """A function returning the thread count of the OpenBLAS SciPy calls, or None."""
    import ctypes

    from opgraph_c._threads import find_blas_threads

    path = find_blas_threads()
    if path is None:
        return None
    lib = ctypes.CDLL(path)
    for name in ("openblas_get_num_threads", "scipy_openblas_get_num_threads"):
        if hasattr(lib, name):
            return getattr(lib, name)
    return None


def test_openblas_thread_count_is_restored() -> None:
    """Batch-parallel GEMM calls set OpenBLAS to one thread around the parallel region and
    restore its count after it (never inside, where threads raced for it)."""
    get = _openblas_threads()
    if get is None:
        pytest.skip("no OpenBLAS thread control found")
    before = get()
    case = Case((4, 3, 9, 8), (4, 3, 3, 3), "half")
    old = _conv.configure(direct=0)
    try:
        for node, values in zip(case.nodes("float32"), case.values("float32"), strict=True):
            thunk, _ = _thunk(node, values, nthreads=2, adaptive=False)
            for _ in range(20):
                thunk()
                assert get() == before
            assert thunk.threaded_calls == 20 and thunk.last_mode == GEMM
    finally:
        _conv.configure(**old)


def test_threaded_calls_are_counted() -> None:
    case = Case((4, 3, 6, 6), (4, 3, 3, 3), "half")
    node = case.nodes("float64")[0]
    thunk, _ = _thunk(node, case.values("float64")[0], nthreads=2, adaptive=False)
    thunk()
    assert thunk.threaded_calls == 1
    _conv.configure(thread_work=1 << 40)
    thunk()
    assert thunk.threaded_calls == 1


@pytest.mark.parametrize("dtype", FLOATS)
def test_non_contiguous_inputs(dtype: str) -> None:
    """Fortran-ordered and strided inputs (copied to C order) give perform's result."""
    case = Case((2, 4, 7, 6), (4, 2, 3, 2), (1, 1), sub=(1, 2), groups=2)
    for node, values in zip(case.nodes(dtype), case.values(dtype), strict=True):
        for a, b in itertools.product(layouts(values[0]), layouts(values[1])):
            check_node(node, [a, b, *values[2:]])


@pytest.mark.parametrize("dtype", FLOATS)
def test_empty_sizes_run_perform(dtype: str) -> None:
    """An empty batch (or no filters) is perform's: zeros of the right shape."""
    for case in (Case((0, 3, 5, 5), (4, 3, 3, 3)), Case((2, 3, 5, 5), (0, 3, 3, 3))):
        for node, values in zip(case.nodes(dtype), case.values(dtype), strict=True):
            check_node(node, values, c_path=False)


def test_bad_values_raise_perform_errors() -> None:
    """Channel mismatches, kernels larger than the image and tops that do not fit go to
    perform before anything is written: its error, word for word."""
    case = Case((2, 4, 6, 6), (3, 4, 3, 3), "valid")
    fwd, gw, gi = case.nodes("float64")
    img, kern = case.values("float64")[0]
    _, top, *ks = case.values("float64")[1]
    sp = case.values("float64")[2][2:]
    bad_kern = np.ones((3, 2, 3, 3))
    check_node(fwd, [img, bad_kern], c_path=False)  # channel mismatch
    check_node(fwd, [img, np.ones((3, 4, 7, 7))], c_path=False)  # kernel larger than image
    check_node(gw, [img, top[:, :, :3], *ks], c_path=False)  # top does not fit
    check_node(gw, [img[:1], top, *ks], c_path=False)  # batch mismatch
    check_node(gi, [kern, top, np.int32(9), np.int32(6)], c_path=False)  # image shape
    check_node(gi, [kern[:2], top, *sp], c_path=False)  # filter count mismatch
    check_node(gw, [img, top, np.int32(0), np.int32(3)], c_path=False)  # no kernel
    g2 = Case((2, 4, 6, 6), (4, 2, 3, 3), groups=2).nodes("float64")[0]
    check_node(g2, [np.ones((2, 3, 6, 6)), np.ones((4, 2, 3, 3))], c_path=False)


def test_unshared_filter_positions_must_match() -> None:
    case = Case((2, 3, 6, 7), (4, 3, 3, 2), "valid", unshared=True)
    fwd = case.nodes("float64")[0]
    img, kern = case.values("float64")[0]
    check_node(fwd, [img, kern[:, :3]], c_path=False)


def test_kernel_and_image_shapes_inferred_without_shape_inputs() -> None:
    """Without ``shape`` inputs the gradients infer the kernel / image shape as perform."""
    for border in ("valid", "full", (1, 2)):
        case = Case((2, 3, 8, 7), (4, 3, 3, 2), border, dil=(2, 1))
        _, gw, gi = case.ops()
        img, top = _tensor(4, "float64", "img"), _tensor(4, "float64", "top")
        kern = _tensor(4, "float64", "kern")
        v_img, v_top = case.values("float64")[1][:2]
        v_kern = case.values("float64")[0][1]
        check_node(gw(img, top).owner, [v_img, v_top])
        check_node(gi(kern, top).owner, [v_kern, v_top])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    "case",
    [
        Case((2, 3, 5, 6, 4), (4, 3, 2, 3, 2), "valid"),
        Case((2, 2, 5, 6, 7), (3, 2, 3, 2, 3), "full", sub=(2, 1, 2), dil=(1, 2, 1)),
        Case((2, 4, 5, 5, 6), (4, 2, 3, 3, 3), "half", groups=2),
        Case((3, 2, 6, 5, 5), (4, 2, 2, 2, 3), (1, 0, 2), sub=(1, 2, 2)),
        Case((2, 3, 4, 5, 4), (6, 1, 3, 2, 3), 1, groups=3),  # depthwise
        Case((2, 3, 4, 5, 4), (4, 3, 1, 1, 1)),  # 1x1x1
    ],
    ids=repr,
)
def test_3d_matches_perform(case: Case, dtype: str) -> None:
    check_case(case, dtype)


def test_other_dtypes_have_no_c_kernel() -> None:
    """float16 (and mixed dtypes) are left to perform."""
    x = _tensor(4, "float16", "x")
    w = _tensor(4, "float16", "w")
    node = CorrMM()(x, w).owner
    assert corr_c(node.op, node) is None


# ------------------------------------------------------------------- functions


def _training_graph(dtype: str) -> tuple[list[Any], list[Any]]:
    x = _tensor(4, dtype, "x")
    w = _tensor(4, dtype, "w")
    w2 = _tensor(4, dtype, "w2")
    h = CorrMM("half", (1, 1), num_groups=2)(x, w)
    y = CorrMM((1, 0), (2, 2), (1, 2))(T.tanh(h), w2)
    cost = T.sum(y**2)
    return [x, w, w2], [cost, *grad(cost, [x, w, w2])]


@pytest.mark.parametrize("dtype", FLOATS)
def test_functions_c_py_and_debug_mode(dtype: str) -> None:
    """A two-layer graph and its gradients: c linker (every correlation node a C thunk),
    py linker and DebugMode(linker="c") agree."""
    inputs, outputs = _training_graph(dtype)
    rng = np.random.default_rng(1)
    values = [
        rng.standard_normal((3, 4, 9, 8)).astype(dtype),
        rng.standard_normal((6, 2, 3, 3)).astype(dtype),
        rng.standard_normal((5, 6, 2, 3)).astype(dtype),
    ]
    c_fn = function(inputs, outputs, mode=Mode(linker="c", optimizer="None"))
    py_fn = function(inputs, outputs, mode=Mode(linker="py", optimizer="None"))
    debug_fn = function(inputs, outputs, mode=DebugMode(linker="c", optimizer="None"))
    seen = set()
    for node, thunk in zip(c_fn.fn.nodes, c_fn.fn.thunks, strict=True):
        if type(node.op) in FAMILY2:
            assert isinstance(thunk, _conv.CorrThunk), node
            seen.add(type(node.op))
    assert seen == set(FAMILY2)
    expected = py_fn(*values)
    for got in (c_fn(*values), c_fn(*values), debug_fn(*values)):
        for g, e in zip(got, expected, strict=True):
            assert np.asarray(g).dtype == np.asarray(e).dtype
            _close(g, e)


def test_default_mode_3d_function() -> None:
    x = _tensor(5, "float64", "x")
    w = _tensor(5, "float64", "w")
    y = Corr3dMM("half", (1, 2, 1))(x, w)
    cost = T.sum(y * y)
    outputs = [cost, *grad(cost, [x, w])]
    rng = np.random.default_rng(2)
    values = [rng.standard_normal((2, 3, 4, 5, 4)), rng.standard_normal((4, 3, 3, 2, 3))]
    c_fn = function([x, w], outputs, mode=Mode(linker="c", optimizer="None"))
    py_fn = function([x, w], outputs, mode=Mode(linker="py", optimizer="None"))
    kinds = {
        type(n.op)
        for n, t in zip(c_fn.fn.nodes, c_fn.fn.thunks, strict=True)
        if isinstance(t, _conv.CorrThunk)
    }
    assert kinds == set(FAMILY3)
    for g, e in zip(c_fn(*values), py_fn(*values), strict=True):
        _close(g, e)


def test_buffers_are_reused_across_calls() -> None:
    case = Case((4, 3, 8, 8), (4, 3, 3, 3), "half")
    node = case.nodes("float32")[0]
    thunk, cell = _thunk(node, case.values("float32")[0], nthreads=2, adaptive=False)
    thunk()
    first = cell[0]
    size = thunk.buffer_bytes()
    thunk()
    assert thunk.buffer_bytes() == size > 0
    assert cell[0] is not first and np.array_equal(cell[0], first)
