"""Reduction kernels over any axes (Theano's GpuCAReduce idea), for add, mul, maximum,
minimum, and, or, xor and mul_without_zeros.

The host brings every reduction down to an ``M x K`` problem: ``M`` kept elements (the
output, C order), each reducing ``K`` elements; ``x[m * sM + k * sK]`` (element strides).
Kept axes are merged into one dimension and reduced axes (sorted by stride, since their
order does not matter) into another (:func:`plan_layout`); a layout that does not merge
is first copied, reduced axes last, with :func:`~opgraph_cuda.kernels.elemwise.copy_into`.
Then one of two shared-memory tree kernels runs (both grid-stride over ``M``):

- ``rows`` (``K`` contiguous, or a single output): ``blockDim.x`` threads share a row (a
  power of two up to 256, smaller for short rows) and ``blockDim.y`` rows share a block;
- ``cols`` (``M`` contiguous): ``blockDim.x`` threads along ``M`` read adjacent elements
  (coalesced), ``blockDim.y`` threads split ``K``; the tree runs over ``y``.

When ``M`` alone cannot fill the GPU (a full reduction, a few long rows or columns), ``K``
is split into chunks (``blockIdx.y``): a first pass writes ``M x S`` partials in the
accumulator dtype and a second pass reduces them. Every thread reduces its elements in a
fixed order and the trees have a fixed shape, so results depend only on the shapes and the
device (no atomics). Max/min propagate NaN (``OPG_MAX``), as NumPy does; a reduction over an
empty axis gives the op's identity, or ValueError for max/min (no identity). float16 is
loaded into a float32 accumulator (a float16 ``acc_dtype`` means float32) and an output
or partial of float16 is rounded once, when stored.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from opgraph.scalar import basic as sb
from opgraph.scalar import extra as sx
from opgraph_cuda.array import GpuArray
from opgraph_cuda.kernels.scalar import (
    CTYPES,
    FLOATS,
    Operand,
    c_literal,
    convert,
    lookup,
    math_dtype,
    wrap_params,
)
from opgraph_cuda.runtime import CudaSource, KernelSig, Runtime, get_runtime
from opgraph_cuda.strided import copy_into

__all__ = [
    "REDUCE_OPS",
    "ReduceKernel",
    "ReducePlan",
    "combine_code",
    "identity_value",
    "plan_launch",
    "plan_layout",
    "reduce_kernel",
]

#: Threads per block of the reduction kernels (also the shared-memory slots).
THREADS = 256
#: Elements one thread reduces at least before K is split further (keeps loads in flight).
MIN_PER_THREAD = 16
#: Rows at most this long are reduced by one thread each (no tree, no synchronisation).
SHORT_ROW = 16
#: Blocks the plan aims for, per SM (8 x 256 threads fill an SM); None: 8 * sm_count.
TARGET_BLOCKS: int | None = None

#: The scalar op classes reductions support.
REDUCE_OPS = (sb.Add, sb.Mul, sb.Maximum, sb.Minimum, sb.AND, sb.OR, sb.XOR, sx.MulWithoutZeros)


def combine_code(scalar_op: sb.ScalarOp, acc_dtype: str) -> str | None:
    """C expression combining accumulators ``a`` and ``b`` of ``acc_dtype``, or None when
    the op has no reduction kernel for that dtype (float16 accumulates as float32)."""
    acc_dtype = math_dtype(acc_dtype)
    if not isinstance(scalar_op, REDUCE_OPS) or acc_dtype not in CTYPES:
        return None
    entry = lookup(scalar_op)
    if entry is None:
        return None
    return entry(acc_dtype, Operand("a", acc_dtype), Operand("b", acc_dtype))


def identity_value(scalar_op: sb.ScalarOp, dtype: str) -> Any:
    """The value an accumulator starts from: the op's identity in ``dtype`` (for max/min,
    the lowest/highest value, which leaves every real element and NaN through)."""
    if isinstance(scalar_op, sb.Maximum | sb.Minimum):
        low = isinstance(scalar_op, sb.Maximum)
        if dtype in FLOATS:
            return -math.inf if low else math.inf
        if dtype == "bool":
            return not low
        info = np.iinfo(dtype)
        return info.min if low else info.max
    if isinstance(scalar_op, sb.AND):
        return True if dtype == "bool" else np.array(-1).astype(dtype).item()
    if isinstance(scalar_op, sb.Mul):
        return 1
    return 0  # add, or, xor, mul_without_zeros


# ---- planning ----------------------------------------------------------------------------


def _merge(shape: Sequence[int], strides: Sequence[int]) -> tuple[int, int] | None:
    """One (length, stride) for dimensions that are contiguous with each other in C order,
    or None; size-1 dimensions are ignored and no dimension gives (1, 0)."""
    dims = [(n, s) for n, s in zip(shape, strides, strict=True) if n != 1]
    if not dims:
        return 1, 0
    for (_, s0), (n1, s1) in itertools.pairwise(dims):
        if s0 != s1 * n1:
            return None
    return math.prod(n for n, _ in dims), dims[-1][1]


def plan_layout(
    shape: Sequence[int], strides: Sequence[int], axes: Sequence[int]
) -> tuple[int, int, int, int] | None:
    """``(M, K, sM, sK)`` for reducing ``axes`` of an array of ``shape`` and element
    ``strides``, or None when the kept or the reduced dimensions do not merge into one
    (or neither merged dimension is contiguous): the caller copies first."""
    kept = [d for d in range(len(shape)) if d not in axes]
    red = sorted(axes, key=lambda d: -abs(strides[d]))
    m = _merge([shape[d] for d in kept], [strides[d] for d in kept])
    k = _merge([shape[d] for d in red], [strides[d] for d in red])
    if m is None or k is None:
        return None
    (M, sM), (K, sK) = m, k
    if abs(sK) == 1 or M == 1 or abs(sM) == 1 or K == 1:
        return M, K, sM, sK
    return None


@dataclass(frozen=True)
class ReducePlan:
    """How one ``M x K`` reduction is launched.

    ``kind`` is ``"rows"`` or ``"cols"``; ``block`` and ``grid`` the launch shape; ``splits``
    the number of K chunks (``grid[1]``; 1 means a single pass) of ``chunk`` elements each.
    """

    kind: str
    block: tuple[int, int, int]
    grid: tuple[int, int, int]
    splits: int
    chunk: int


def _pow2_at_most(n: int, cap: int) -> int:
    """The smallest power of two >= n, at most ``cap``."""
    p = 1
    while p < n and p < cap:
        p *= 2
    return p


def _target(runtime: Runtime) -> int:
    if TARGET_BLOCKS is not None:
        return TARGET_BLOCKS
    return max(1, min(runtime.max_blocks, 8 * runtime.sm_count))


def plan_launch(
    M: int, K: int, sM: int, sK: int, runtime: Runtime, split: bool = True
) -> ReducePlan:
    """The kernel, block, grid and K-split for an ``M x K`` reduction (M, K >= 1);
    ``split=False`` plans a single pass."""
    target = _target(runtime)
    rows = abs(sK) == 1 or M == 1 or (abs(sM) != 1 and K != 1)
    if rows:
        bx = 1 if K <= SHORT_ROW else _pow2_at_most(K, THREADS)
        by = THREADS // bx
        blocks = -(-M // by)
        per_split = bx * MIN_PER_THREAD
    else:
        bx = _pow2_at_most(M, 32)
        by = THREADS // bx
        blocks = -(-M // bx)
        per_split = by * MIN_PER_THREAD
    splits = 1
    if split and blocks < target:
        splits = max(1, min(-(-target // blocks), K // per_split, 4096))
    chunk = -(-K // splits)
    if rows and splits > 1:
        chunk = -(-chunk // bx) * bx  # chunks start at multiples of the row's threads
    splits = -(-K // chunk)
    grid = (max(1, min(blocks, runtime.max_blocks)), splits, 1)
    return ReducePlan("rows" if rows else "cols", (bx, by, 1), grid, splits, chunk)


# ---- source generation --------------------------------------------------------------------

_PARAMS = ("ptrdiff_t M", "ptrdiff_t K", "ptrdiff_t sM", "ptrdiff_t sK", "ptrdiff_t chunk")
_OUT_PARAMS = ("ptrdiff_t os_m", "ptrdiff_t os_s")

#: Independent accumulators per thread: as many loads in flight (one accumulator would
#: wait on each load in turn).
LANES = 8


def _thread_loop(along: str, tag: str, ta: str, ti: str, ident: str) -> str:
    """The loop of one thread over its share of a chunk (``along``: the thread index that
    splits it), leaving the thread's reduction in ``a``."""
    lanes = range(1, LANES)
    lines = [
        f"        {ta} a = {ident};",
        "        if (m < M) {",
        f"            const {ti}* base = x + m * sM;",
        f"            {ta} {', '.join(f'a{j} = {ident}' for j in lanes)};",
        f"            ptrdiff_t k = k0 + threadIdx.{along};",
        f"            for (; k + {LANES - 1} * step < k1; k += {LANES} * step) {{",
        f"                const {ta} b0 = opg_load_{tag}(base + k * sK);",
        *(
            f"                const {ta} b{j} = opg_load_{tag}(base + (k + {j} * step) * sK);"
            for j in lanes
        ),
        "                a = opg_combine(a, b0);",
        *(f"                a{j} = opg_combine(a{j}, b{j});" for j in lanes),
        "            }",
        "            for (; k < k1; k += step) {",
        f"                a = opg_combine(a, opg_load_{tag}(base + k * sK));",
        "            }",
    ]
    names = ["a", *(f"a{j}" for j in lanes)]
    while len(names) > 1:  # pairwise: a fixed tree over the lanes
        pairs = [f"opg_combine({x}, {y})" for x, y in zip(names[::2], names[1::2], strict=True)]
        if len(pairs) == 1:
            lines.append(f"            a = {pairs[0]};")
            break
        for j, text in enumerate(pairs):
            lines.append(f"            const {ta} c{len(names)}_{j} = {text};")
        names = [f"c{len(names)}_{j}" for j in range(len(pairs))]
    lines.append("        }")
    return "\n".join(lines)


_ROWS = """\
/* Rows: out[m * os_m + blockIdx.y * os_s] = reduction of x[m * sM + k * sK] over the
 * chunk blockIdx.y of k. blockDim.x threads share a row, blockDim.y rows share a block. */
{signature_rows}
    __shared__ {TA} buf[{threads}];
    const unsigned int slot = threadIdx.y * blockDim.x + threadIdx.x;
    const ptrdiff_t k0 = (ptrdiff_t)blockIdx.y * chunk;
    const ptrdiff_t k1 = k0 + chunk < K ? k0 + chunk : K;
    const ptrdiff_t step = blockDim.x;
    for (ptrdiff_t first = (ptrdiff_t)blockIdx.x * blockDim.y; first < M;
         first += (ptrdiff_t)gridDim.x * blockDim.y) {{
        const ptrdiff_t m = first + threadIdx.y;
{loop}
        if (blockDim.x > 1) {{
            buf[slot] = a;
            __syncthreads();
            for (unsigned int w = blockDim.x / 2; w > 0; w >>= 1) {{
                if (threadIdx.x < w) {{
                    a = opg_combine(a, buf[slot + w]);
                    buf[slot] = a;
                }}
                __syncthreads();
            }}
        }}
        if (threadIdx.x == 0 && m < M) {{
            out[m * os_m + (ptrdiff_t)blockIdx.y * os_s] = {store};
        }}
    }}
}}
"""

_COLS = """\
/* Columns: out[m * os_m + blockIdx.y * os_s] = reduction of x[m * sM + k * sK] over the
 * chunk blockIdx.y of k. blockDim.x threads take adjacent m (coalesced when sM == 1),
 * blockDim.y threads split the chunk; the tree runs over y. */
{signature_cols}
    __shared__ {TA} buf[{threads}];
    const unsigned int slot = threadIdx.y * blockDim.x + threadIdx.x;
    const ptrdiff_t k0 = (ptrdiff_t)blockIdx.y * chunk;
    const ptrdiff_t k1 = k0 + chunk < K ? k0 + chunk : K;
    const ptrdiff_t step = blockDim.y;
    for (ptrdiff_t first = (ptrdiff_t)blockIdx.x * blockDim.x; first < M;
         first += (ptrdiff_t)gridDim.x * blockDim.x) {{
        const ptrdiff_t m = first + threadIdx.x;
{loop}
        if (blockDim.y > 1) {{
            buf[slot] = a;
            __syncthreads();
            for (unsigned int w = blockDim.y / 2; w > 0; w >>= 1) {{
                if (threadIdx.y < w) {{
                    a = opg_combine(a, buf[slot + w * blockDim.x]);
                    buf[slot] = a;
                }}
                __syncthreads();
            }}
        }}
        if (threadIdx.y == 0 && m < M) {{
            out[m * os_m + (ptrdiff_t)blockIdx.y * os_s] = {store};
        }}
    }}
}}
"""

#: kernel tag -> (input is the accumulator, output is the accumulator)
_VARIANTS = {"final": (False, False), "partial": (False, True), "merge": (True, False)}


def reduce_source(
    scalar_op: sb.ScalarOp, in_dtype: str, acc_dtype: str, out_dtype: str, title: str
) -> CudaSource | None:
    """The module of one reduction's six kernels (rows/cols x final/partial/merge), or None
    when the op or a dtype has no CUDA code."""
    acc_dtype = math_dtype(acc_dtype)
    combine = combine_code(scalar_op, acc_dtype)
    if combine is None or in_dtype not in CTYPES or out_dtype not in CTYPES:
        return None
    if acc_dtype == "bool":
        combine = f"(({combine}) != 0)"
    ta = CTYPES[acc_dtype]
    ident = c_literal(identity_value(scalar_op, acc_dtype), acc_dtype)
    parts = [
        f"/* {title.replace('*/', '* /')}",
        f" * input {in_dtype}, accumulator {acc_dtype}, output {out_dtype}",
        " */",
        '#include "opgraph_cuda_prelude.cuh"',
        "",
        f"__device__ __forceinline__ {ta} opg_combine(const {ta} a, const {ta} b) {{",
        f"    return {combine};",
        "}",
        "",
    ]
    sigs = []
    for tag, (acc_in, acc_out) in _VARIANTS.items():
        ti = acc_dtype if acc_in else in_dtype
        to = acc_dtype if acc_out else out_dtype
        parts += [
            f"__device__ __forceinline__ {ta} opg_load_{tag}(const {CTYPES[ti]}* p) {{",
            f"    return {convert(Operand('*p', ti), acc_dtype).text};",
            "}",
            "",
        ]
        params = (f"{CTYPES[to]}* out", f"const {CTYPES[ti]}* x", *_PARAMS, *_OUT_PARAMS)
        fields = dict(
            tag=tag,
            signature_rows="\n".join(
                wrap_params(f'extern "C" __global__ void k_rows_{tag}', params)
            ),
            signature_cols="\n".join(
                wrap_params(f'extern "C" __global__ void k_cols_{tag}', params)
            ),
            TA=ta,
            TI=CTYPES[ti],
            threads=THREADS,
            ident=ident,
            store=convert(Operand("a", acc_dtype), to).text,
        )
        types = tuple(p.rsplit(" ", 1)[0] for p in params)
        for kind, template, along in (("rows", _ROWS, "x"), ("cols", _COLS, "y")):
            loop = _thread_loop(along, tag, ta, CTYPES[ti], ident)
            parts.append(template.format(loop=loop, **fields))
            sigs.append(KernelSig(f"k_{kind}_{tag}", types, sync=True))
    return CudaSource(name=title, code="\n".join(parts), kernels=tuple(sigs))


# ---- running -----------------------------------------------------------------------------


class ReduceKernel:
    """The compiled kernels of one reduction (op, input/acc/output dtypes) and the host
    logic that reduces any axes of any layout with them."""

    def __init__(
        self,
        scalar_op: sb.ScalarOp,
        in_dtype: str,
        acc_dtype: str,
        out_dtype: str,
        title: str,
        runtime: Runtime | None = None,
    ) -> None:
        self.runtime = runtime or get_runtime()
        self.scalar_op = scalar_op
        self.in_dtype, self.out_dtype = in_dtype, out_dtype
        self.acc_dtype = math_dtype(acc_dtype)
        self.title = title
        source = reduce_source(scalar_op, in_dtype, acc_dtype, out_dtype, title)
        if source is None:
            raise TypeError(
                f"{title}: no CUDA reduction for {scalar_op} with input {in_dtype}, "
                f"accumulator {acc_dtype}, output {out_dtype}"
            )
        self.source = source
        self.fns = self.runtime.load(source)

    def __call__(self, x: GpuArray, axes: Sequence[int], empty_ok: bool = True) -> GpuArray:
        """Reduce ``axes`` of ``x``: a new C-contiguous array of the kept dimensions.

        ``empty_ok=False`` (max/min) makes an empty reduction a ValueError, as in NumPy.
        """
        axes = sorted({a % x.ndim for a in axes}) if x.ndim else []
        out_shape = [n for d, n in enumerate(x.shape) if d not in axes]
        out = GpuArray.empty(out_shape, self.out_dtype, self.runtime)
        K = math.prod(x.shape[d] for d in axes)
        if out.size == 0:
            return out
        if K == 0:
            if not empty_ok:
                raise ValueError(
                    f"{self.title}: cannot reduce an empty array: the {self.scalar_op} of no "
                    f"values is undefined (input shape {x.shape}, reduced axes {axes}). "
                    "HINT: check the input is not empty before reducing it."
                )
            out.fill(identity_value(self.scalar_op, self.out_dtype))
            return out
        layout = plan_layout(x.shape, x.elem_strides, axes)
        if layout is None:
            order = [d for d in range(x.ndim) if d not in axes] + list(axes)
            view = x.transpose(order)
            x = GpuArray.empty(view.shape, x.dtype, self.runtime)
            copy_into(x, view)
            layout = (out.size, K, K, 1)
        self.run(out, x, *layout)
        return out

    def run(self, out: GpuArray, x: GpuArray, M: int, K: int, sM: int, sK: int) -> None:
        """Launch the plan of an ``M x K`` reduction of ``x`` into contiguous ``out``."""
        plan = plan_launch(M, K, sM, sK, self.runtime)
        kind = plan.kind
        if plan.splits == 1:
            self.fns[f"k_{kind}_final"](
                plan.grid, plan.block, out.ptr, x.ptr, M, K, sM, sK, plan.chunk, 1, 0
            )
            return
        S = plan.splits
        partial = GpuArray.empty((M * S,), self.acc_dtype, self.runtime)
        # rows: partials (M, S); cols: partials (S, M); either way the merge reads them
        # with the same kernel kind, S long.
        os_m, os_s = (S, 1) if kind == "rows" else (1, M)
        self.fns[f"k_{kind}_partial"](
            plan.grid, plan.block, partial.ptr, x.ptr, M, K, sM, sK, plan.chunk, os_m, os_s
        )
        merge = plan_launch(M, S, os_m, os_s, self.runtime, split=False)
        self.fns[f"k_{merge.kind}_merge"](
            merge.grid, merge.block, out.ptr, partial.ptr, M, S, os_m, os_s, S, 1, 0
        )


_kernels: dict[tuple[Any, ...], ReduceKernel] = {}
_lock = threading.Lock()


def reduce_kernel(
    scalar_op: sb.ScalarOp, in_dtype: str, acc_dtype: str, out_dtype: str, title: str
) -> ReduceKernel:
    """The compiled :class:`ReduceKernel` for these arguments, built once per process and
    runtime. Raises TypeError when there is no CUDA reduction for them."""
    runtime = get_runtime()
    key = (id(runtime), scalar_op, in_dtype, acc_dtype, out_dtype, title)
    found = _kernels.get(key)
    if found is None:
        found = ReduceKernel(scalar_op, in_dtype, acc_dtype, out_dtype, title, runtime)
        with _lock:
            found = _kernels.setdefault(key, found)
    return found
