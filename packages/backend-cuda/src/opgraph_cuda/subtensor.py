"""GPU advanced indexing along the first axis: what embeddings and gathers compile to.

- :class:`GpuAdvancedSubtensor1`: ``x[idx]`` for an integer vector ``idx`` (Theano's
  ``GpuAdvancedSubtensor1``, the host ``AdvancedSubtensor1``): a gather of whole rows;
- :class:`GpuAdvancedIncSubtensor1`: ``inc_subtensor(x[idx], y)`` (repeated indices
  accumulate, as ``np.add.at``) and ``set_subtensor(x[idx], y)``, out of place: ``x`` is
  copied, then the rows of ``y`` are written into the copy.

``x`` is seen as ``N`` rows of ``R`` elements (its dimensions after the first, collapsed;
a copy is made when they do not collapse to one stride). Kernels give each row of the
output a ``blockDim.y`` slot and its elements to ``blockDim.x`` threads, looping over blocks.
Negative indices wrap as in NumPy; an index out of ``[-N, N)`` sets a device flag, the row
is skipped (never read or written out of bounds), and the op raises IndexError naming the
first bad index after the launch (each call reads the 4-byte flag back, which waits for the
kernel).

Increments use ``atomicAdd`` (float32, float64, int32) unless ``config.deterministic ==
"more"`` when the op is built, or the dtype has no atomicAdd: then an ordered kernel sums
each destination row's contributions in index order, bit-identical to ``np.add.at`` and
between runs. It owns a row either by destination (one thread per row of ``x`` scanning
all indices, ``N * M`` reads, when ``N <= M``) or by first occurrence (the position whose
index appears first scans the positions after it, about ``M * M / 2`` reads).

The gather copies elements and so takes float16 as any dtype; the increments and
assignments convert and add with C operators, which float16 (storage only) lacks, so
float16 ``x`` or ``y`` stay on the CPU there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph import config
from opgraph.graph.basic import Apply, Variable
from opgraph.tensor.subtensor_advanced import AdvancedIncSubtensor1, AdvancedSubtensor1
from opgraph.tensor.subtensor_basic import check_inc_shape, check_inc_value
from opgraph_cuda.array import GpuArray
from opgraph_cuda.kernels.scalar import CTYPES, wrap_params
from opgraph_cuda.ops import GpuOp, Run, as_gpuarray_variable
from opgraph_cuda.opt import KeepOnCpu, register_lifter
from opgraph_cuda.runtime import CudaSource, KernelSig, Runtime, get_runtime
from opgraph_cuda.strided import collapse, copy_into

__all__ = [
    "GpuAdvancedIncSubtensor1",
    "GpuAdvancedSubtensor1",
    "lift_advanced_inc_subtensor1",
    "lift_advanced_subtensor1",
    "subtensor_source",
]

#: Threads per block (``blockDim.x * blockDim.y``).
BLOCK = 256
#: Index dtypes the kernels take (each converts exactly to ``ptrdiff_t``).
INDEX_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")
#: Dtypes that CUDA's ``atomicAdd`` takes (the default increment path).
ATOMIC_DTYPES = ("float32", "float64", "int32")

# Kernel bodies, by name. TX/TY/TI are typedefs atop each module (x's, y's, the index's).
_PRELUDE = """\
__device__ __forceinline__ ptrdiff_t opg_wrap(ptrdiff_t i, ptrdiff_t n) {
    return i < 0 ? i + n : i;
}
#define OPG_ROWS(r, count) \\
    for (ptrdiff_t r = (ptrdiff_t)blockIdx.x * blockDim.y + threadIdx.y; r < (count); \\
         r += (ptrdiff_t)gridDim.x * blockDim.y)
#define OPG_COLS(c) for (ptrdiff_t c = threadIdx.x; c < R; c += blockDim.x)
"""
_ROW_INDEX = """\
        const ptrdiff_t i = opg_wrap((ptrdiff_t)idx[r * si], N);
        if (i < 0 || i >= N) {
            *err = 1; /* out of bounds: flag it and leave the row alone */
            continue;
        }"""
_BODIES = {
    "k_take": (
        "out[r, :] = x[idx[r], :]",
        ["TX* out", "const TX* x", "const TI* idx", "int* err"],
        ["M", "N", "R", "sx0", "sx1", "si"],
        _ROW_INDEX + "\n        OPG_COLS(c) out[r * R + c] = x[i * sx0 + c * sx1];",
    ),
    "k_inc_atomic": (
        "out[idx[r], :] += y[r, :] with atomicAdd (the order of repeated indices varies)",
        ["TX* out", "const TY* y", "const TI* idx", "int* err"],
        ["M", "N", "R", "sy0", "sy1", "si"],
        _ROW_INDEX + "\n        OPG_COLS(c) atomicAdd(&out[i * R + c], (TX)y[r * sy0 + c * sy1]);",
    ),
    "k_set": (
        "out[idx[r], :] = y[r, :] (which of repeated indices wins varies, as NumPy allows)",
        ["TX* out", "const TY* y", "const TI* idx", "int* err"],
        ["M", "N", "R", "sy0", "sy1", "si"],
        _ROW_INDEX + "\n        OPG_COLS(c) out[i * R + c] = (TX)y[r * sy0 + c * sy1];",
    ),
    "k_ordered_by_pos": (
        "position r owns row idx[r] when no earlier position names it, and applies every\n"
        " * position k >= r naming it, in order (set: the last one wins)",
        ["TX* out", "const TY* y", "const TI* idx", "int* err"],
        ["M", "N", "R", "sy0", "sy1", "si"],
        _ROW_INDEX
        + """
        bool owner = true;
        for (ptrdiff_t k = 0; k < r && owner; ++k) {
            owner = opg_wrap((ptrdiff_t)idx[k * si], N) != i;
        }
        if (!owner) continue;
        OPG_COLS(c) {
            TX acc = out[i * R + c];
            for (ptrdiff_t k = r; k < M; ++k) {
                if (opg_wrap((ptrdiff_t)idx[k * si], N) != i) continue;
                const TX v = (TX)y[k * sy0 + c * sy1];
                acc = OPG_SET ? v : (TX)(acc + v);
            }
            out[i * R + c] = acc;
        }""",
    ),
    "k_ordered_by_dest": (
        "row r of x applies every position k naming it, in order (set: the last one wins);\n"
        " * row 0's first thread checks the indices (bad ones name no row)",
        ["TX* out", "const TY* y", "const TI* idx", "int* err"],
        ["M", "N", "R", "sy0", "sy1", "si"],
        """\
        if (r == 0 && threadIdx.x == 0) {
            for (ptrdiff_t k = 0; k < M; ++k) {
                const ptrdiff_t i = opg_wrap((ptrdiff_t)idx[k * si], N);
                if (i < 0 || i >= N) *err = 1;
            }
        }
        OPG_COLS(c) {
            TX acc = out[r * R + c];
            bool hit = false;
            for (ptrdiff_t k = 0; k < M; ++k) {
                if (opg_wrap((ptrdiff_t)idx[k * si], N) != r) continue;
                const TX v = (TX)y[k * sy0 + c * sy1];
                acc = OPG_SET ? v : (TX)(acc + v);
                hit = true;
            }
            if (hit) out[r * R + c] = acc;
        }""",
    ),
}


def subtensor_source(
    kernels: Sequence[str], tx: str, ty: str, ti: str, set_: bool, title: str
) -> CudaSource:
    """The module holding ``kernels`` (names of :data:`_BODIES`) for x of dtype ``tx``,
    y of ``ty`` and indices of ``ti``; ``set_`` picks assignment in the ordered kernels."""
    lines = [
        f"/* {title.replace('*/', '* /')}",
        f" * x: {tx}, y: {ty}, indices: {ti}; x is N rows of R elements, M indices. */",
        '#include "opgraph_cuda_prelude.cuh"',
        "",
        f"typedef {CTYPES[tx]} TX;",
        f"typedef {CTYPES[ty]} TY;",
        f"typedef {CTYPES[ti]} TI;",
        f"#define OPG_SET {int(set_)}",
        _PRELUDE,
    ]
    sigs = []
    for name in kernels:
        doc, pointers, sizes, body = _BODIES[name]
        params = [*pointers, *(f"ptrdiff_t {s}" for s in sizes)]
        rows = "N" if name == "k_ordered_by_dest" else "M"
        lines += [
            f"/* {doc} */",
            *wrap_params(f'extern "C" __global__ void {name}', params),
            f"    OPG_ROWS(r, {rows}) {{",
            body,
            "    }",
            "}",
            "",
        ]
        sigs.append(KernelSig(name, tuple(p.rsplit(" ", 1)[0] for p in params), sync=False))
    return CudaSource(
        name=title.split(" for node", 1)[0], code="\n".join(lines), kernels=tuple(sigs)
    )


def _title(op: Any, node: Apply) -> str:
    return f"{op} for node {op}({', '.join(str(v.type) for v in node.inputs)})"


def _launch_dims(rows: int, R: int, runtime: Runtime) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(grid, block)``: the fewest threads per row (a power of two, at most ``BLOCK``)
    covering ``R`` elements, the rest of the block on further rows, at most
    ``runtime.max_blocks`` blocks."""
    bx = 1
    while bx < R and bx < BLOCK:
        bx *= 2
    by = BLOCK // bx
    return (max(1, min(-(-rows // by), runtime.max_blocks)), 1, 1), (bx, by, 1)


def _rows(a: GpuArray, shape: Sequence[int]) -> tuple[GpuArray, int, int]:
    """``a`` seen as ``shape[0]`` rows of ``prod(shape[1:])`` elements: ``(array, row
    stride, element stride)`` in elements; a contiguous copy when its dimensions after
    the first do not collapse to one stride."""
    steps = [s // a.itemsize for s in a.strides]
    dims, (inner,) = collapse(shape[1:], [steps[1:]])
    if len(dims) <= 1:
        return a, steps[0], inner[0] if dims else 0
    dense = GpuArray.empty(shape, a.dtype, a.runtime)
    copy_into(dense, a)
    return dense, int(np.prod(shape[1:], dtype=np.int64)), 1


class _IndexFlag:
    """The device flag the kernels set on an index out of bounds; :meth:`check` reads it
    after a launch and raises IndexError naming the first bad index (clearing the flag)."""

    def __init__(self, runtime: Runtime) -> None:
        self.flag = GpuArray.zeros((1,), "int32", runtime)

    def check(self, op: Any, idx: GpuArray, n: int) -> None:
        if int(self.flag.get()[0]) == 0:
            return
        self.flag.fill(0)
        values = idx.get().astype(np.int64)
        bad = values[(values < -n) | (values >= n)]
        shown = bad[0] if bad.size else "?"
        raise IndexError(f"{op}: index {shown} is out of bounds for axis 0 with size {n}")


def _gpu_index(op: Any, x: Variable, ilist: Any) -> Variable:
    """``ilist`` as a GPU integer vector indexing ``x``'s first axis (TypeError if not)."""
    ilist = as_gpuarray_variable(ilist)
    if ilist.type.ndim != 1 or ilist.type.dtype not in INDEX_DTYPES:
        raise TypeError(
            f"{op}: the index ({ilist}) must be a vector of {', '.join(INDEX_DTYPES)}, "
            f"got {ilist.type}"
        )
    if x.type.ndim == 0 or x.type.dtype not in CTYPES:
        raise TypeError(f"{op}: cannot index x ({x}, {x.type}): need an array of >= 1 dims")
    return ilist


class GpuAdvancedSubtensor1(GpuOp):
    """``x[idx]`` for an integer vector ``idx`` on the first axis, on the GPU (a new
    C-contiguous array); negative indices wrap, out-of-range ones raise IndexError."""

    __props__ = ()

    def __str__(self) -> str:
        return "GpuAdvancedSubtensor1"

    def make_node(self, x: Any, ilist: Any) -> Apply:
        x = as_gpuarray_variable(x)
        ilist = _gpu_index(self, x, ilist)
        bcast = (ilist.type.broadcastable[0], *x.type.broadcastable[1:])
        return Apply(self, [x, ilist], [x.type.clone(broadcastable=bcast)()])

    def prepare_gpu(self, node: Apply) -> Run:
        runtime = get_runtime()
        x_t, i_t = (v.type.dtype for v in node.inputs)
        source = subtensor_source(["k_take"], x_t, x_t, i_t, False, _title(self, node))
        take = runtime.load(source)["k_take"]
        flag = _IndexFlag(runtime)

        def run(inputs: Sequence[Any]) -> list[GpuArray]:
            x, idx = inputs
            M, N = idx.shape[0], x.shape[0]
            out = GpuArray.empty((M, *x.shape[1:]), x_t, runtime)
            if M:
                x, sx0, sx1 = _rows(x, x.shape)
                R = out.size // M
                grid, block = _launch_dims(M, R, runtime)
                si = idx.elem_strides[0]
                take(grid, block, out.ptr, x.ptr, idx.ptr, flag.flag.ptr, M, N, R, sx0, sx1, si)
                flag.check(self, idx, N)
            return [out]

        return run

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        x, ilist = input_shapes
        return [(ilist[0], *x[1:])]


class GpuAdvancedIncSubtensor1(GpuOp):
    """``x`` with ``x[idx] += y`` (repeated indices accumulate) or, with
    ``set_instead_of_inc``, ``x[idx] = y``, on the GPU, out of place; ``y`` broadcasts
    along its type's broadcastable dimensions and is converted to ``x``'s dtype.

    ``deterministic`` (default: ``config.deterministic == "more"`` when the op is made)
    applies repeated indices in order, bit-identical between runs; otherwise increments
    use ``atomicAdd`` where the dtype has it. Printed
    ``GpuAdvancedIncSubtensor1{no_inplace,inc}`` / ``{no_inplace,set}``.
    """

    __props__ = ("set_instead_of_inc", "deterministic")

    def __init__(self, set_instead_of_inc: bool = False, deterministic: bool | None = None) -> None:
        self.set_instead_of_inc = bool(set_instead_of_inc)
        if deterministic is None:
            deterministic = config.deterministic == "more"
        self.deterministic = bool(deterministic)

    def __str__(self) -> str:
        return (
            f"GpuAdvancedIncSubtensor1{{no_inplace,{'set' if self.set_instead_of_inc else 'inc'}}}"
        )

    def make_node(self, x: Any, y: Any, ilist: Any) -> Apply:
        x, y = as_gpuarray_variable(x), as_gpuarray_variable(y)
        ilist = _gpu_index(self, x, ilist)
        check_inc_value(self, x, y, x.type.ndim, self.set_instead_of_inc)
        if y.type.dtype not in CTYPES or (not self.set_instead_of_inc and x.type.dtype == "bool"):
            raise TypeError(f"{self}: cannot write y ({y}, {y.type}) into x of type {x.type}")
        if "float16" in (x.type.dtype, y.type.dtype):
            raise TypeError(
                f"{self}: no float16 kernel (x: {x.type}, y: {y.type}). HINT: the lifting pass "
                "keeps float16 inc_subtensor/set_subtensor on the CPU."
            )
        return Apply(self, [x, y, ilist], [x.type()])

    def kernel_names(self, dtype: str) -> list[str]:
        """The kernels this op runs for x of ``dtype``: the ordered pair, ``k_set`` or
        ``k_inc_atomic``."""
        if self.deterministic or (not self.set_instead_of_inc and dtype not in ATOMIC_DTYPES):
            return ["k_ordered_by_pos", "k_ordered_by_dest"]
        return ["k_set" if self.set_instead_of_inc else "k_inc_atomic"]

    def prepare_gpu(self, node: Apply) -> Run:
        runtime = get_runtime()
        x_t, y_t, i_t = (v.type.dtype for v in node.inputs)
        names = self.kernel_names(x_t)
        source = subtensor_source(names, x_t, y_t, i_t, self.set_instead_of_inc, _title(self, node))
        fns = runtime.load(source)
        flag = _IndexFlag(runtime)
        y_bcast = node.inputs[1].type.broadcastable

        def run(inputs: Sequence[Any]) -> list[GpuArray]:
            x, y, idx = inputs
            M, N = idx.shape[0], x.shape[0]
            target = (M, *x.shape[1:])
            check_inc_shape(self, y, y_bcast, target)
            out = x.copy()
            if not M:
                return [out]
            y, sy0, sy1 = _rows(_broadcast_to(y, target), target)
            R = int(np.prod(x.shape[1:], dtype=np.int64))
            name = names[0]
            if len(names) == 2 and 0 < N <= M and R:
                name = "k_ordered_by_dest"
            rows = N if name == "k_ordered_by_dest" else M
            grid, block = _launch_dims(rows, R, runtime)
            si = idx.elem_strides[0]
            fns[name](grid, block, out.ptr, y.ptr, idx.ptr, flag.flag.ptr, M, N, R, sy0, sy1, si)
            flag.check(self, idx, N)
            return [out]

        return run

    def infer_shape(self, node: Apply, input_shapes: Sequence[Any]) -> list[Any]:
        return [tuple(input_shapes[0])]


def _broadcast_to(y: GpuArray, shape: tuple[int, ...]) -> GpuArray:
    """``y`` seen with ``shape`` (leading dimensions added, length-1 ones stride 0)."""
    lead = len(shape) - y.ndim
    dims = (1,) * lead + tuple(y.shape)
    steps = (0,) * lead + tuple(y.strides)
    strides = [0 if n == 1 else s for n, s in zip(dims, steps, strict=True)]
    return y.view(shape, strides)


# ---- lifters ------------------------------------------------------------------------------


def _check_index_dtype(node: Apply) -> None:
    dtype = node.inputs[-1].type.dtype
    if dtype not in INDEX_DTYPES:
        raise KeepOnCpu(
            f"{dtype} indices stay on the CPU (the GPU takes {', '.join(INDEX_DTYPES)})"
        )


@register_lifter(AdvancedSubtensor1, float16=True)
def lift_advanced_subtensor1(node: Apply, inputs: Sequence[Variable]) -> list[Variable]:
    """``AdvancedSubtensor1`` -> :class:`GpuAdvancedSubtensor1` (the index moved to the
    device as well)."""
    _check_index_dtype(node)
    return [GpuAdvancedSubtensor1()(inputs[0], inputs[1])]


@register_lifter(AdvancedIncSubtensor1)
def lift_advanced_inc_subtensor1(node: Apply, inputs: Sequence[Variable]) -> list[Variable]:
    """``AdvancedIncSubtensor1{inc|set}`` -> :class:`GpuAdvancedIncSubtensor1` (out of
    place whatever the host op's ``inplace``; ``config.deterministic`` read now)."""
    _check_index_dtype(node)
    op = GpuAdvancedIncSubtensor1(set_instead_of_inc=node.op.set_instead_of_inc)
    return [op(*inputs)]
