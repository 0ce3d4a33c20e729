"""Elementwise CUDA kernels: one generated module per (scalar op, dtypes, ndim).

A module holds the element function (:func:`~opgraph_cuda.kernels.scalar.element_function`,
a fused Composite inlined) and the loops that call it:

- ``k_contig``: every operand C-contiguous with the output's shape, except the inputs whose
  type broadcasts in every dimension (scalars), which are read once before the loop. A
  grid-stride loop written for bandwidth: each thread takes ``VEC`` consecutive elements per
  step, loaded and stored as one aligned access (16 bytes for float32) when every array is
  aligned, so a warp moves 512 contiguous bytes per operand per step;
- ``k_strided_<d>`` for ``d = 1 .. ndim``: any strides (0 for a broadcast dimension, negative
  for a reversed view), the output included. The host first collapses dimensions
  (:func:`opgraph_cuda.strided.collapse`: size-1 dimensions dropped, neighbours merged
  where every operand is contiguous across them), so a transposed or sliced operand
  usually costs one or two index divisions per element; those are 32-bit when the array
  has fewer than 2**31 elements.

Kernels compile when a kernel object is built (the Ops build theirs in ``prepare_gpu``, at
link time); :func:`elemwise_kernel` keeps them per (op, dtypes, ndim) for the process.
Strided copies (``GpuArray.copy()``/``.get()`` of a view) are :mod:`opgraph_cuda.strided`'s.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

from opgraph.scalar.basic import ScalarOp
from opgraph_cuda.array import GpuArray
from opgraph_cuda.kernels.scalar import CTYPES, element_function, wrap_params
from opgraph_cuda.runtime import CudaSource, KernelSig, Runtime, get_runtime
from opgraph_cuda.strided import collapse

__all__ = ["BLOCK", "VEC", "ElemwiseKernel", "elemwise_kernel"]

#: Threads per block of every elementwise kernel.
BLOCK = 256
#: Consecutive elements a thread of ``k_contig`` takes per step (one vector access).
VEC = 4
#: Strided kernels give each block whole rows of the last dimension from this length on.
ROW_MIN = BLOCK // 2
#: Largest element count for which the strided kernels index with 32-bit integers.
INT32_LIMIT = 2**31 - 1


class ElemwiseKernel:
    """The compiled kernels of one elementwise computation, and their launch logic.

    Parameters
    ----------
    scalar_op
        The scalar op (or fused Composite) computed per element.
    in_dtypes, out_dtypes
        The operands' dtypes.
    scalars
        Per input: True when its type broadcasts in every dimension (one value, read once).
    ndim
        The output's number of dimensions (strided kernels are made for 1 .. ndim).
    title
        What the kernel computes, for the comment atop its source (the Op and node).
    """

    def __init__(
        self,
        scalar_op: ScalarOp,
        in_dtypes: Sequence[str],
        out_dtypes: Sequence[str],
        scalars: Sequence[bool],
        ndim: int,
        title: str,
        runtime: Runtime | None = None,
    ) -> None:
        self.runtime = runtime or get_runtime()
        self.in_dtypes = tuple(in_dtypes)
        self.out_dtypes = tuple(out_dtypes)
        self.scalars = tuple(bool(s) for s in scalars)
        self.ndim = int(ndim)
        source = elemwise_source(scalar_op, in_dtypes, out_dtypes, scalars, ndim, title)
        if source is None:
            raise TypeError(f"{title}: {scalar_op} has no CUDA code for these dtypes")
        self.source = source
        self.fns = self.runtime.load(source)

    def __call__(self, outputs: Sequence[GpuArray], inputs: Sequence[GpuArray]) -> None:
        """Compute into ``outputs`` from ``inputs``: every array has the outputs' shape
        (inputs broadcast by views with stride 0); any strides."""
        shape = outputs[0].shape
        n = math.prod(shape)
        if n == 0:
            return
        ptrs = [a.ptr for a in (*outputs, *inputs)]
        arrays = [*outputs, *(a for a, s in zip(inputs, self.scalars, strict=True) if not s)]
        if all(a.is_c_contiguous for a in arrays):
            aligned = all(a.ptr % (a.itemsize * VEC) == 0 for a in arrays)
            grid = _grid(n, BLOCK * (VEC if aligned else 1), self.runtime)
            self.fns["k_contig"](grid, (BLOCK, 1, 1), *ptrs, n, int(aligned))
            return
        strides = [a.elem_strides for a in (*outputs, *inputs)]
        dims, st = collapse(shape, strides)
        if not dims:
            dims, st = [1], [[0] for _ in strides]
        flat = [s for op_strides in st for s in op_strides]
        rowwise = len(dims) > 1 and dims[-1] >= ROW_MIN
        grid = _grid(n // dims[-1], 1, self.runtime) if rowwise else _grid(n, BLOCK, self.runtime)
        self.fns[f"k_strided_{len(dims)}"](
            grid, (BLOCK, 1, 1), *ptrs, n, int(rowwise), *dims, *flat
        )


def _grid(n: int, per_block: int, runtime: Runtime) -> tuple[int, int, int]:
    return (max(1, min(-(-n // per_block), runtime.max_blocks)), 1, 1)


# ---- source generation --------------------------------------------------------------------


def _comment(text: str) -> str:
    return text.replace("*/", "* /")


def _pointer_params(in_dtypes: Sequence[str], out_dtypes: Sequence[str]) -> list[str]:
    """``T* o0, ..., const T* i0, ...``: the kernels' first parameters."""
    outs = [f"{CTYPES[d]}* o{k}" for k, d in enumerate(out_dtypes)]
    ins = [f"const {CTYPES[d]}* i{k}" for k, d in enumerate(in_dtypes)]
    return outs + ins


def _param_types(params: Sequence[str]) -> tuple[str, ...]:
    """The types of ``"T name"`` parameters, as KernelSig takes them."""
    return tuple(p.rsplit(" ", 1)[0] for p in params)


def _contig_kernel(
    in_dtypes: Sequence[str], out_dtypes: Sequence[str], scalars: Sequence[bool]
) -> tuple[str, KernelSig]:
    params = [*_pointer_params(in_dtypes, out_dtypes), "ptrdiff_t n", "int vec"]
    read_once = [k for k, s in enumerate(scalars) if s]
    streamed = [k for k, s in enumerate(scalars) if not s]
    once = ", ".join(f"i{k}" for k in read_once)
    lines = [
        "/* Every operand C-contiguous with the output's shape"
        + (f"; {once} read once (broadcast scalars)." if read_once else "."),
        f" * vec != 0: every array is aligned to {VEC} elements, and each thread moves {VEC}",
        " * consecutive elements per step as one vector access. */",
        *wrap_params('extern "C" __global__ void k_contig', params),
        "    const ptrdiff_t start = (ptrdiff_t)blockIdx.x * blockDim.x + threadIdx.x;",
        "    const ptrdiff_t step = (ptrdiff_t)gridDim.x * blockDim.x;",
    ]
    lines += [f"    const {CTYPES[in_dtypes[k]]} s{k} = i{k}[0];" for k in read_once]
    args_vec = [f"s{k}" if s else f"a{k}.v[j]" for k, s in enumerate(scalars)]
    args_vec += [f"r{k}.v[j]" for k in range(len(out_dtypes))]
    args_one = [f"s{k}" if s else f"i{k}[i]" for k, s in enumerate(scalars)]
    args_one += [f"o{k}[i]" for k in range(len(out_dtypes))]
    vec_t = {d: f"vec_{d}" for d in (*in_dtypes, *out_dtypes)}
    lines += [f"    typedef opg_vec<{CTYPES[d]}, {VEC}> vec_{d};" for d in sorted(set(vec_t))]
    lines += [
        "    ptrdiff_t tail = 0;",
        "    if (vec) {",
        f"        const ptrdiff_t nvec = n / {VEC};",
        "        for (ptrdiff_t v = start; v < nvec; v += step) {",
    ]
    lines += [
        f"            const {vec_t[in_dtypes[k]]} a{k} = "
        f"reinterpret_cast<const {vec_t[in_dtypes[k]]}*>(i{k})[v];"
        for k in streamed
    ]
    lines += [f"            {vec_t[d]} r{k};" for k, d in enumerate(out_dtypes)]
    lines += [
        "#pragma unroll",
        f"            for (int j = 0; j < {VEC}; ++j) {{",
        f"                opg_elem({', '.join(args_vec)});",
        "            }",
    ]
    lines += [
        f"            reinterpret_cast<{vec_t[d]}*>(o{k})[v] = r{k};"
        for k, d in enumerate(out_dtypes)
    ]
    lines += [
        "        }",
        f"        tail = nvec * {VEC};",
        "    }",
        "    for (ptrdiff_t i = tail + start; i < n; i += step) {",
        f"        opg_elem({', '.join(args_one)});",
        "    }",
        "}",
    ]
    sig = KernelSig("k_contig", _param_types(params), sync=False)
    return "\n".join(lines), sig


def _decompose(rest: str, dims: range, names: Sequence[str], indent: str) -> list[str]:
    """Lines splitting the C-order index ``rest`` over ``dims`` into coordinates ``c<j>``
    and every operand's element offset ``p<name>`` (the first of ``dims`` takes the rest)."""
    lines = []
    for j in reversed(dims[1:]):
        lines.append(f"{indent}const ptrdiff_t c{j} = (ptrdiff_t)({rest} % (I)d{j});")
        lines.append(f"{indent}{rest} /= (I)d{j};")
    lines.append(f"{indent}const ptrdiff_t c{dims[0]} = (ptrdiff_t){rest};")
    for name in names:
        offset = " + ".join(f"c{j} * s{name}_{j}" for j in dims)
        lines.append(f"{indent}const ptrdiff_t p{name} = {offset};")
    return lines


def _strided_kernel(
    in_dtypes: Sequence[str], out_dtypes: Sequence[str], d: int
) -> tuple[str, KernelSig]:
    names = [f"o{k}" for k in range(len(out_dtypes))] + [f"i{k}" for k in range(len(in_dtypes))]
    pointers = _pointer_params(in_dtypes, out_dtypes)
    dims = [f"ptrdiff_t d{j}" for j in range(d)]
    strides = [f"ptrdiff_t s{name}_{j}" for name in names for j in range(d)]
    params = [*pointers, "ptrdiff_t n", "int rowwise", *dims, *strides]
    args = [p.rsplit(" ", 1)[1].lstrip("*") for p in params]
    call = [f"i{k}[pi{k}]" for k in range(len(in_dtypes))]
    call += [f"o{k}[po{k}]" for k in range(len(out_dtypes))]
    last = d - 1
    lines = [
        f"/* {d}-d iteration space, any element strides (s<operand>_<dim>; 0 = broadcast).",
        " * rowwise: a block per row of the last dimension (its coordinates computed once per",
        " * row); else one flat index per element, split over every dimension. */",
        "template <class I>",
        *wrap_params(f"__device__ __forceinline__ void strided_{d}", params),
    ]
    if d > 1:
        row_call = [f"i{k}[pi{k} + c * si{k}_{last}]" for k in range(len(in_dtypes))]
        row_call += [f"o{k}[po{k} + c * so{k}_{last}]" for k in range(len(out_dtypes))]
        lines += [
            "    if (rowwise) {",
            f"        const I rows = (I)n / (I)d{last};",
            "        for (I r = blockIdx.x; r < rows; r += gridDim.x) {",
            "            I rest = r;",
            *_decompose("rest", range(last), names, "            "),
            f"            for (I c = threadIdx.x; c < (I)d{last}; c += blockDim.x) {{",
            f"                opg_elem({', '.join(row_call)});",
            "            }",
            "        }",
            "        return;",
            "    }",
        ]
    lines += [
        "    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < (I)n;",
        "         i += (I)gridDim.x * blockDim.x) {",
        "        I rest = i;",
        *_decompose("rest", range(d), names, "        "),
        f"        opg_elem({', '.join(call)});",
        "    }",
        "}",
        "",
        *wrap_params(f'extern "C" __global__ void k_strided_{d}', params),
        f"    if (n <= {INT32_LIMIT}) {{",
        *wrap_params(f"        strided_{d}<unsigned int>", args, ");"),
        "    } else {",
        *wrap_params(f"        strided_{d}<ptrdiff_t>", args, ");"),
        "    }",
        "}",
    ]
    sig = KernelSig(f"k_strided_{d}", _param_types(params), sync=False)
    return "\n".join(lines), sig


def elemwise_source(
    scalar_op: ScalarOp,
    in_dtypes: Sequence[str],
    out_dtypes: Sequence[str],
    scalars: Sequence[bool],
    ndim: int,
    title: str,
) -> CudaSource | None:
    """The module of :class:`ElemwiseKernel`'s kernels, or None when ``scalar_op`` has no
    CUDA code for these dtypes."""
    elem = element_function(scalar_op, in_dtypes, out_dtypes)
    if elem is None:
        return None
    header = [
        f"/* {_comment(title)}",
        f" * inputs:  {', '.join(in_dtypes) or '-'}",
        f" * outputs: {', '.join(out_dtypes)}",
        " */",
        '#include "opgraph_cuda_prelude.cuh"',
        "",
        elem,
        "",
    ]
    text, sig = _contig_kernel(in_dtypes, out_dtypes, scalars)
    parts, sigs = [text], [sig]
    for d in range(1, max(ndim, 1) + 1):
        text, sig = _strided_kernel(in_dtypes, out_dtypes, d)
        parts.append(text)
        sigs.append(sig)
    code = "\n".join(header) + "\n\n".join(parts) + "\n"
    name = title.split(" for node", 1)[0]
    return CudaSource(name=name, code=code, kernels=tuple(sigs))


# ---- the process's kernels ----------------------------------------------------------------

_kernels: dict[tuple[Any, ...], ElemwiseKernel] = {}
_lock = threading.Lock()


def elemwise_kernel(
    scalar_op: ScalarOp,
    in_dtypes: Sequence[str],
    out_dtypes: Sequence[str],
    scalars: Sequence[bool],
    ndim: int,
    title: str,
) -> ElemwiseKernel:
    """The compiled :class:`ElemwiseKernel` for these arguments (built once per process
    and runtime). Raises TypeError when ``scalar_op`` has no CUDA code for the dtypes."""
    runtime = get_runtime()
    key = (id(runtime), scalar_op, tuple(in_dtypes), tuple(out_dtypes), tuple(scalars), ndim, title)
    found = _kernels.get(key)
    if found is None:
        found = ElemwiseKernel(scalar_op, in_dtypes, out_dtypes, scalars, ndim, title, runtime)
        with _lock:
            found = _kernels.setdefault(key, found)
    return found
