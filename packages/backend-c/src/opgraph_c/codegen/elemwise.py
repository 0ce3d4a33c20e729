"""Cython source of an elementwise kernel module, for an Elemwise or a fused Composite.

The module holds one C element function (``opg_elem``: inputs by value, outputs through
pointers), built from the scalar table so that a fused Composite becomes straight-line C,
and loops over it on raw pointers (no typed memoryviews: they cost 30k lines of C each):

- ``contig(start, stop, ptrs)``: every operand contiguous; inputs whose type is broadcastable
  in every dimension are read once, before the loop. This is the loop gcc vectorises,
  transcendentals included (libmvec). When the element function calls a libmvec function,
  the last elements (fewer than a cache line of the widest operand) run as a whole padded
  line of copies (:func:`vector_tail`): every element takes the vector math function, so a
  value does not depend on its position or the array's length, and short arrays do not pay
  scalar calls;
- ``run<j>(n, ptrs)``, one per broadcast layout of the node (:func:`run_masks`): the inputs
  of mask ``j`` constant along the run (read once, as scalars), every other operand
  contiguous. This is the innermost run of an operand broadcast along the trailing axes
  (a bias added to NCHW activations: runs of H*W, the bias constant in each), vectorised
  like ``contig``;
- ``strided(n, ptrs, steps)``: one dimension, any byte steps (0 for a broadcast operand).
  When the steps are those of ``contig`` or of a ``run<j>`` (itemsize, or 0 for the
  constant inputs) it calls that loop instead of its scalar one;
- ``parallel(n, ptrs, nthreads)`` (with OpenMP): ``contig`` over fixed chunks that idle
  threads take dynamically.

Every loop computes each element with the same ``opg_elem``. It exports them in the
``ELEMWISE_KERNEL`` capsule read by :class:`opgraph_c._elemwise.ElemwiseThunk` (the
``run<j>`` loops are reached through ``strided``, so the table's layout is unchanged). A
kernel is a :class:`~opgraph_c.spec.BundlePart`: when a function needs several new kernels,
:func:`assemble` puts them in one module (names suffixed ``_0``, ``_1``, ...), compiled
once, instead of one module each.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.scalar.basic import Composite, ScalarOp, Switch
from opgraph.scalar.type import upcast
from opgraph_c.kernels import special
from opgraph_c.kernels.scalar import CTYPES, FLOAT_DTYPES, lookup
from opgraph_c.spec import ID, BundlePart

__all__ = [
    "ElementFunction",
    "assemble",
    "compute_dtype",
    "element_function",
    "elemwise_part",
    "node_signature",
    "run_masks",
    "vector_tail",
]


def compute_dtype(out_dtype: str, in_dtypes: Sequence[str]) -> str:
    """The dtype a scalar op computes in: its output's, or the inputs' upcast for a bool
    result (comparisons compare in the common type, as NumPy does)."""
    if out_dtype == "bool" and in_dtypes:
        return str(upcast(*in_dtypes))
    return out_dtype


def c_literal(value: Any, dtype: str) -> str:
    """A C literal of ``value`` in ``dtype`` (inf and NaN included)."""
    if dtype == "bool":
        return "1" if bool(value) else "0"
    if dtype in FLOAT_DTYPES:
        v = float(value)
        if math.isnan(v):
            text = "NAN"
        elif math.isinf(v):
            text = "INFINITY" if v > 0 else "(-INFINITY)"
        else:
            text = repr(v)
        return text if dtype == "float64" else f"(({CTYPES[dtype]}){text})"
    v = int(value)
    if dtype == "int64" and v == -(2**63):
        return "INT64_MIN"
    suffix = "ULL" if dtype.startswith("uint") else "LL"
    return f"(({CTYPES[dtype]}){v}{suffix})"


class ElementFunction:
    """The C body of ``opg_elem``: one statement per scalar node, named temporaries."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.count = 0

    def temp(self, dtype: str, expr: str, comment: str) -> str:
        name = f"t{self.count}"
        self.count += 1
        self.lines.append(f"{CTYPES[dtype]} {name} = {expr};  /* {comment} */")
        return name


def _store(expr: str, cd: str, out: str) -> str:
    """``expr`` (computed in ``cd``) as a value of dtype ``out``."""
    if out == "bool":
        return f"(({expr}) != 0)"
    if cd != out:
        return f"(({CTYPES[out]})({expr}))"
    return expr


def _apply(fn: ElementFunction, op: ScalarOp, args: list[tuple[str, str]], out: str) -> str | None:
    """Emit ``op(args)`` (args are ``(C atom, dtype)``); returns the result's temporary."""
    entry = lookup(op)
    if entry is None:
        return None
    if isinstance(op, Switch):
        (cond, _), *branches = args
        cd = out
        atoms = [cond] + [a if d == cd else f"(({CTYPES[cd]}){a})" for a, d in branches]
    else:
        cd = compute_dtype(out, [d for _, d in args])
        if cd not in CTYPES:
            return None
        atoms = [a if d == cd else f"(({CTYPES[cd]}){a})" for a, d in args]
    expr = entry(cd, *atoms)
    if expr is None:
        return None
    return fn.temp(out, _store(expr, cd, out), f"{op}")


def _emit(
    fn: ElementFunction, op: ScalarOp, args: list[tuple[str, str]], outs: Sequence[str]
) -> list[str] | None:
    """Emit ``op`` (a scalar op or a Composite, inlined) on ``args``; its outputs' atoms."""
    if not isinstance(op, Composite):
        if len(outs) != 1:
            return None
        result = _apply(fn, op, args, outs[0])
        return None if result is None else [result]
    values: dict[Variable, tuple[str, str]] = {
        v: arg for v, arg in zip(op.inputs, args, strict=True)
    }

    def atom(v: Variable) -> tuple[str, str] | None:
        if v in values:
            return values[v]
        if isinstance(v, Constant) and v.type.dtype in CTYPES:
            return c_literal(np.asarray(v.data).item(), v.type.dtype), v.type.dtype
        return None

    for node in op.nodes:
        inner = [atom(v) for v in node.inputs]
        if any(a is None for a in inner):
            return None
        dtypes = [o.type.dtype for o in node.outputs]
        if any(d not in CTYPES for d in dtypes):
            return None
        results = _emit(fn, node.op, inner, dtypes)  # type: ignore[arg-type]
        if results is None:
            return None
        values.update(zip(node.outputs, zip(results, dtypes, strict=True), strict=True))
    final = []
    for v, dtype in zip(op.outputs, outs, strict=True):
        a = atom(v)
        if a is None:
            return None
        final.append(a[0] if a[1] == dtype else _store(a[0], a[1], dtype))
    return final


_TEMP = re.compile(r"\bt\d+\b")


def _live(lines: Sequence[str], results: Sequence[str]) -> list[str]:
    """``lines`` without the temporaries nothing reads: ``second(x, y)`` reads only ``y``,
    and an unused variable is a compiler warning (an error under ``-Werror``)."""
    used = set(_TEMP.findall(" ".join(results)))
    kept = []
    for line in reversed(lines):
        name, expr = line.split(" = ", 1)
        if name.split()[-1] in used:
            kept.append(line)
            used.update(_TEMP.findall(expr.split("  /*", 1)[0]))
    return kept[::-1]


def element_function(
    scalar_op: ScalarOp, in_dtypes: Sequence[str], out_dtypes: Sequence[str]
) -> str | None:
    """The C definition of ``opg_elem`` for ``scalar_op``, or None if it has no C code."""
    if any(d not in CTYPES for d in (*in_dtypes, *out_dtypes)):
        return None
    fn = ElementFunction()
    args = [(f"i{k}", d) for k, d in enumerate(in_dtypes)]
    results = _emit(fn, scalar_op, args, list(out_dtypes))
    if results is None:
        return None
    params = [f"{CTYPES[d]} i{k}" for k, d in enumerate(in_dtypes)]
    params += [f"{CTYPES[d]} *o{k}" for k, d in enumerate(out_dtypes)]
    body = [f"    {line}" for line in _live(fn.lines, results)]
    body += [f"    *o{k} = {r};" for k, r in enumerate(results)]
    return "\n".join([f"static inline void opg_elem({', '.join(params)}) {{", *body, "}"])


def node_signature(node: Apply) -> str:
    """``node`` as its Op applied to its input types, for the comment atop a kernel.

    Variable names would make the source, and so the cache key, differ between graphs that
    compute the same thing; this is the same for all of them, so they share one module.
    """
    return f"{node.op}({', '.join(str(v.type) for v in node.inputs)})"


def elemwise_part(op: Any, node: Apply, hoisted: Sequence[bool], openmp: bool) -> BundlePart | None:
    """The pieces of ``node``'s kernel, or None when its scalar op has no C code."""
    in_dtypes = [v.type.dtype for v in node.inputs]
    out_dtypes = [v.type.dtype for v in node.outputs]
    elem = element_function(op.scalar_op, in_dtypes, out_dtypes)
    if elem is None:
        return None
    nin, nout = len(in_dtypes), len(out_dtypes)
    inputs = ", ".join(
        f"{v.type.dtype}{' (scalar, hoisted)' if h else ''}"
        for v, h in zip(node.inputs, hoisted, strict=True)
    )
    comment = (
        f"# ---- kernel{ID}\n# Op:      {op}\n# Node:    {node_signature(node)}\n"
        f"# Inputs:  {inputs}\n# Outputs: {', '.join(out_dtypes)}\n"
    )
    decl = [f"{CTYPES[d]} i{k}" for k, d in enumerate(in_dtypes)]
    decl += [f"{CTYPES[d]}* o{k}" for k, d in enumerate(out_dtypes)]
    masks = run_masks([v.type.broadcastable for v in node.inputs], hoisted)
    loops = [comment, _contig(in_dtypes, out_dtypes, hoisted, vector_tail(elem))]
    loops += [_run(j, mask, in_dtypes, out_dtypes, hoisted) for j, mask in enumerate(masks)]
    loops.append(_strided(in_dtypes, out_dtypes, hoisted, masks))
    if openmp:
        loops.append(_PARALLEL)
    parallel = f"parallel{ID}" if openmp else "NULL"
    table = (
        f"cdef opg_elemwise_kernel _kernel{ID}\n"
        f"_kernel{ID}.abi = OPG_ELEMWISE_ABI\n"
        f"_kernel{ID}.nin = {nin}\n"
        f"_kernel{ID}.nout = {nout}\n"
        f"_kernel{ID}.contig = contig{ID}\n"
        f"_kernel{ID}.strided = strided{ID}\n"
        f"_kernel{ID}.parallel = {parallel}\n"
        f'ELEMWISE_KERNEL{ID} = PyCapsule_New(&_kernel{ID}, "opgraph_c.elemwise", NULL)\n'
    )
    return BundlePart(
        c_code=elem.replace("opg_elem(", f"opg_elem{ID}("),
        cython_decl=f"void opg_elem{ID}({', '.join(decl)}) noexcept nogil",
        cython_code="\n".join(loops),
        table=table,
        dtypes=frozenset((*in_dtypes, *out_dtypes)),
        openmp=openmp,
        capsule=f"ELEMWISE_KERNEL{ID}",
        assemble=assemble,
    )


_HEADER = """\
# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
#
# Generated by opgraph-backend-c: {what}.
#
# Each opg_elem is C built from the scalar-op table (opgraph_c/kernels/scalar.py); the loops
# run it over raw pointers and are called by opgraph_c._elemwise.ElemwiseThunk through the
# ELEMWISE_KERNEL capsules.
"""


_SCIPY_C = """\
/* SciPy's C implementations of the special functions called below: the functions
   scipy.special.cython_special exports (its __pyx_capi__), bound when the module loads. */"""

_SCIPY_BINDING = """\
# The special functions' pointers, from the capsules of scipy.special.cython_special in the
# SciPy this process runs (opgraph_c/kernels/special.py): the code perform's ufuncs run.
from opgraph_c.kernels.special import function_address

"""


def assemble(parts: Sequence[BundlePart], suffixes: Sequence[str]) -> str:
    """The ``.pyx`` of a module holding ``parts``, each with its names suffixed."""
    what = "an elementwise kernel" if len(parts) == 1 else f"{len(parts)} elementwise kernels"
    pairs = list(zip(parts, suffixes, strict=True))
    dtypes = sorted(set().union(*(p.dtypes for p in parts)))
    out = [_HEADER.format(what=what)]
    if any(p.openmp for p in parts):
        out.append("from cython.parallel cimport prange\n")
    names = ", ".join(["OPG_ELEMWISE_ABI", "opg_elemwise_kernel", *(CTYPES[d] for d in dtypes)])
    out.append(
        f"from cpython.pycapsule cimport PyCapsule_New\n\nfrom opgraph_c.abi cimport {names}\n"
    )
    c_code = "\n".join(p.c_code.replace(ID, s) for p, s in pairs)
    scipy = list(special.functions_in(c_code))
    if scipy:
        c_code = "\n".join([_SCIPY_C, *(f.c_declaration() for f in scipy), "", c_code])
    verbatim = "".join(f"    {line}\n" if line else "\n" for line in c_code.splitlines())
    decls = "".join(f"    {f.cython_declaration()}\n" for f in scipy)
    decls += "".join(f"    {p.cython_decl.replace(ID, s)}\n" for p, s in pairs)
    out.append(f'cdef extern from *:\n    """\n{verbatim}    """\n{decls}')
    if scipy:
        out.append(_SCIPY_BINDING + "".join(f"{f.cython_binding()}\n" for f in scipy))
    out += [p.cython_code.replace(ID, s) for p, s in pairs]
    out += [p.table.replace(ID, s) for p, s in pairs]
    return "\n".join(out)


def run_masks(bcast: Sequence[Sequence[bool]], hoisted: Sequence[bool]) -> list[tuple[int, ...]]:
    """The sets of inputs that can be constant along the innermost run, one ``run<j>`` loop
    each.

    The driver merges trailing dimensions into one run while every operand's steps allow
    it, so the run ends at the last dimension ``d`` longer than 1, and the inputs constant
    along it (step 0) are those broadcastable in ``d``. Per dimension that is one set of
    the inputs not hoisted (those are scalars in every loop); the empty set is ``contig``,
    and the set of all of them cannot occur (``d`` would have length 1). Other runs (an
    input of stride 0 that its type does not broadcast, a strided view) take ``strided``.
    """
    free = [k for k, h in enumerate(hoisted) if not h]
    ndim = len(bcast[0]) if bcast else 0
    masks: list[tuple[int, ...]] = []
    for d in range(ndim):
        mask = tuple(k for k in free if bcast[k][d])
        if mask and len(mask) < len(free) and mask not in masks:
            masks.append(mask)
    return masks


def _loop(
    in_dtypes: Sequence[str], out_dtypes: Sequence[str], scalars: set[int], index: str
) -> list[str]:
    """Declarations and the loop over ``i`` (``index``: ``start, stop`` or ``n``): the
    inputs in ``scalars`` read once, every other operand contiguous."""
    nin = len(in_dtypes)
    lines, args = [], []
    for k, d in enumerate(in_dtypes):
        t = CTYPES[d]
        if k in scalars:
            lines.append(f"    cdef {t} s{k} = (<{t}*>ptrs[{k}])[0]")
            args.append(f"s{k}")
        else:
            lines.append(f"    cdef {t}* i{k} = <{t}*>ptrs[{k}]")
            args.append(f"i{k}[i]")
    for k, d in enumerate(out_dtypes):
        t = CTYPES[d]
        lines.append(f"    cdef {t}* o{k} = <{t}*>ptrs[{nin + k}]")
        args.append(f"&o{k}[i]")
    lines += [
        "    cdef ptrdiff_t i",
        f"    for i in range({index}):",
        f"        opg_elem{ID}({', '.join(args)})",
        "",
    ]
    return lines


#: The math functions glibc's libmvec has vector variants of (the prelude's list).
_LIBMVEC = re.compile(
    r"\b(?:exp|log|sin|cos|pow|acos|acosh|asin|asinh|atan|atan2|atanh|cosh|erf|erfc|exp2"
    r"|expm1|log10|log1p|log2|sinh|tan|tanh)f?\("
)


def vector_tail(c_code: str) -> bool:
    """Whether an element function calls a libmvec function: then its loops run their last
    elements (fewer than a cache line of the widest operand) through a padded copy, so that
    every element takes the vector variant (the scalar one costs several times as much per
    element, and may round differently)."""
    return _LIBMVEC.search(c_code) is not None


def _contig(
    in_dtypes: Sequence[str],
    out_dtypes: Sequence[str],
    hoisted: Sequence[bool],
    padded_tail: bool = False,
) -> str:
    lines = [
        f"cdef void contig{ID}(ptrdiff_t start, ptrdiff_t stop, char** ptrs) noexcept nogil:",
        '    """Every operand contiguous; scalar inputs read once. gcc vectorises this."""',
    ]
    scalars = {k for k, h in enumerate(hoisted) if h}
    if not padded_tail:
        return "\n".join(lines + _loop(in_dtypes, out_dtypes, scalars, "start, stop"))
    # A cache line of the widest operand: whole vectors of every dtype the loop mixes.
    lanes = 64 // max(np.dtype(d).itemsize for d in (*in_dtypes, *out_dtypes))
    nin = len(in_dtypes)
    body = _loop(in_dtypes, out_dtypes, scalars, "start, body")
    decl = [ln for ln in body if ln.startswith("    cdef") and "ptrdiff_t i" not in ln]
    loop = [ln for ln in body if ln not in decl]
    lines[1] = (
        '    """Every operand contiguous; scalar inputs read once. gcc vectorises this; the\n'
        f"    last (stop - start) % {lanes} elements run as {lanes} lanes of copies (the last"
        ' element\n    repeated), so that they too take the vector math functions."""'
    )
    lines += decl
    tail_args = []
    for k, d in enumerate(in_dtypes):
        if k in scalars:
            tail_args.append(f"s{k}")
        else:
            lines.append(f"    cdef {CTYPES[d]} ti{k}[{lanes}]")
            tail_args.append(f"ti{k}[j]")
    for k, d in enumerate(out_dtypes):
        lines.append(f"    cdef {CTYPES[d]} to{k}[{lanes}]")
        tail_args.append(f"&to{k}[j]")
    copies = [
        f"        ti{k}[j] = i{k}[body + (j if j < r else r - 1)]"
        for k in range(nin)
        if k not in scalars
    ]
    lines += [
        f"    cdef ptrdiff_t j, r = (stop - start) % {lanes}, body = stop - r",
        *loop[:-1],
        "    if r == 0:",
        "        return",
        *([f"    for j in range({lanes}):", *copies] if copies else []),
        f"    for j in range({lanes}):",
        f"        opg_elem{ID}({', '.join(tail_args)})",
        "    for j in range(r):",
        *(f"        o{k}[body + j] = to{k}[j]" for k in range(len(out_dtypes))),
        "",
    ]
    return "\n".join(lines)


def _run(
    j: int,
    mask: Sequence[int],
    in_dtypes: Sequence[str],
    out_dtypes: Sequence[str],
    hoisted: Sequence[bool],
) -> str:
    names = ", ".join(f"i{k}" for k in mask)
    lines = [
        f"cdef void run{j}{ID}(ptrdiff_t n, char** ptrs) noexcept nogil:",
        f'    """A run along which {names} {"is" if len(mask) == 1 else "are"} constant (read '
        "once), every other\n    operand contiguous (scalar inputs read once). gcc "
        'vectorises this."""',
    ]
    scalars = {k for k, h in enumerate(hoisted) if h} | set(mask)
    return "\n".join(lines + _loop(in_dtypes, out_dtypes, scalars, "n"))


def _strided(
    in_dtypes: Sequence[str],
    out_dtypes: Sequence[str],
    hoisted: Sequence[bool],
    masks: Sequence[Sequence[int]],
) -> str:
    nin = len(in_dtypes)
    dtypes = [*in_dtypes, *out_dtypes]
    nops = len(dtypes)
    lines = [
        f"cdef void strided{ID}(ptrdiff_t n, char** ptrs, const ptrdiff_t* steps) noexcept nogil:",
        '    """One dimension, operand k advancing by steps[k] bytes (0 when broadcast). Steps',
        "    that fit a vectorised loop (each operand's itemsize, 0 for an input read once) run",
        '    that loop."""',
    ]
    # Each vectorised loop, with the steps it takes: 0 for its scalars, else the itemsize.
    calls = [(f"contig{ID}(0, n, ptrs)", {k for k, h in enumerate(hoisted) if h})]
    calls += [
        (f"run{j}{ID}(n, ptrs)", {k for k, h in enumerate(hoisted) if h} | set(mask))
        for j, mask in enumerate(masks)
    ]
    for call, scalars in calls:
        tests = [
            f"steps[{k}] == {0 if k in scalars else np.dtype(d).itemsize}"
            for k, d in enumerate(dtypes)
        ]
        lines += _condition(tests)
        lines += [f"        {call}", "        return"]
    for k in range(nops):
        lines.append(f"    cdef char* p{k} = ptrs[{k}]")
        lines.append(f"    cdef ptrdiff_t s{k} = steps[{k}]")
    args = [f"(<{CTYPES[d]}*>p{k})[0]" for k, d in enumerate(in_dtypes)]
    args += [f"<{CTYPES[d]}*>p{nin + k}" for k, d in enumerate(out_dtypes)]
    lines += [
        "    cdef ptrdiff_t i",
        "    for i in range(n):",
        f"        opg_elem{ID}({', '.join(args)})",
    ]
    lines += [f"        p{k} += s{k}" for k in range(nops)]
    lines.append("")
    return "\n".join(lines)


def _condition(tests: Sequence[str]) -> list[str]:
    """``if`` and the ``and`` of ``tests``, wrapped at 100 columns."""
    lines, line = [], "    if ("
    for k, test in enumerate(tests):
        piece = test if k == 0 else f" and {test}"
        if len(line) + len(piece) > 96:
            lines.append(line)
            line, piece = "            ", test if k == 0 else f"and {test}"
        line += piece
    lines.append(line + "):")
    return lines


_PARALLEL = f'''\
cdef void parallel{ID}(ptrdiff_t n, char** ptrs, int nthreads) noexcept nogil:
    """The contiguous loop in fixed chunks that the OpenMP threads take as they come free:
    a thread whose core is taken by another process holds up one chunk, not a share of the
    loop. Chunks are multiples of 64 elements (cache-line aligned splits), at least 16 per
    thread; each element is computed alone, so the result does not depend on who ran it."""
    cdef ptrdiff_t chunk = max(4096, (n // (16 * nthreads) + 63) // 64 * 64)
    cdef ptrdiff_t c
    for c in prange((n + chunk - 1) // chunk, num_threads=nthreads, schedule="dynamic"):
        contig{ID}(c * chunk, min(n, (c + 1) * chunk), ptrs)
'''
