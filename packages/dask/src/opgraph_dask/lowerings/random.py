"""Random draws on dask arrays: ``RandomFunction`` (RandomStreams, raw_random) and the
MRG31k3p ``mrg_uniform`` (MRG_RandomStreams), one task per block of the sample.

``RandomFunction``: the state (a NumPy ``RandomState`` or ``Generator``, a client value) is
copied (advanced itself when the node is in place) and gives four 32-bit words; that copy
is the node's new state. Block ``(i, j, ...)`` of the sample draws from a fresh generator
of the state's kind seeded by ``SeedSequence(words, spawn_key=(i, j, ...))``. A block's
numbers thus depend only on the state, the sample's shape and its chunks, never on which
worker draws it or in what order: the same state gives the same sample with one worker or
many, and twice in a row. They are *not* the numbers ``RandomFunction.perform`` draws
(that is one sequential stream, which blocks cannot jump into), nor is the new state
``perform``'s; each block has the draw's distribution, and blocks are independent streams.

The sample is chunked as the ``dask__chunks`` flag says (``auto``: dask's block size) when
the draw's parameters are NumPy values; a NumPy parameter with the sample's full shape is
sliced per block. Parameters that are dask arrays are broadcast to the sample's shape and
its blocks follow theirs. Draws that add dimensions or are not element by element
(``permutation``, ``multinomial``, ``choice``, a user's function) are drawn on the client
as one NumPy value (seeded like block ``(0, ...)``); their parameters must be NumPy values.

``mrg_uniform`` gives exactly ``perform``'s numbers and new state: its element ``i`` is step
``i // n`` of stream ``i % n``, and the generator can jump ahead, so the sample is chunked
along its first axis only (a block is a run of consecutive elements) and each block jumps
the streams to its first element. States that are not states of the generator (which
cannot jump) are drawn on the client with ``perform``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Apply
from opgraph.tensor.random_ops import DRAWS, RandomFunction
from opgraph_dask.lowering import LoweringError, LoweringTable

__all__ = [
    "block_generator",
    "lower_mrg_uniform",
    "lower_random_function",
    "register",
    "sample_chunks",
]

#: Draws whose parameters broadcast element by element against the sample's shape.
_ELEMENTWISE = tuple(
    DRAWS[k]
    for k in (
        "uniform",
        "normal",
        "binomial",
        "poisson",
        "random_integers_helper",
        "integers_helper",
    )
)


def _is_dask(value: Any) -> bool:
    import dask.array as da

    return isinstance(value, da.Array)


def sample_chunks(
    shape: Sequence[int], dtype: Any, spec: Any = None
) -> tuple[tuple[int, ...], ...]:
    """Blocks of a sample of ``shape``: ``spec`` (``dask.array`` chunks), else the
    ``dask__chunks`` flag when declared, else ``"auto"``."""
    from dask.array.core import normalize_chunks

    if spec is None:
        from opgraph.configdefaults import config

        try:
            from opgraph_dask.flags import parse_chunks

            spec = parse_chunks(getattr(config, "dask__chunks", "auto"))
        except (AttributeError, ValueError, ImportError):
            spec = "auto"
    if isinstance(spec, tuple) and len(spec) != len(shape):
        spec = spec[: len(shape)] + ("auto",) * max(0, len(shape) - len(spec))
    return normalize_chunks(spec, tuple(int(s) for s in shape), dtype=np.dtype(dtype))


def _seed_words(state: Any) -> tuple[int, ...]:
    """Four 32-bit words drawn from ``state`` (which advances)."""
    if isinstance(state, np.random.Generator):
        words = state.integers(0, 2**32, size=4, dtype=np.uint64)
    elif isinstance(state, np.random.RandomState):
        words = state.randint(0, 2**32, size=4, dtype=np.uint64)
    else:
        raise LoweringError(
            f"a random state must be a numpy RandomState or Generator, got {type(state).__name__}"
        )
    return tuple(int(w) for w in words)


def block_generator(
    kind: str, bit_generator: str, words: Sequence[int], block: Sequence[int]
) -> Any:
    """The generator of one block: ``kind`` ('RandomState' or 'Generator') over a fresh
    ``bit_generator`` (a ``numpy.random`` class name) seeded by the words and block index."""
    seq = np.random.SeedSequence(list(words), spawn_key=tuple(int(b) for b in block))
    bitgen = getattr(np.random, bit_generator)(seq)
    return np.random.RandomState(bitgen) if kind == "RandomState" else np.random.Generator(bitgen)


def _draw_block(
    draw: Any,
    kind: str,
    bit_generator: str,
    words: tuple[int, ...],
    block: tuple[int, ...],
    shape: tuple[int, ...] | None,
    dtype: str,
    *params: Any,
) -> np.ndarray:
    """One block of a sample: ``draw(generator, *params, shape)`` in ``dtype``."""
    gen = block_generator(kind, bit_generator, words, block)
    out = np.asarray(draw(gen, *params, shape), dtype=dtype)
    if draw in _ELEMENTWISE and shape is not None and out.shape != tuple(shape):
        raise ValueError(f"a random block has shape {out.shape}, expected {tuple(shape)}")
    return out


def _draw_mapped(*params: Any, block_info: Any = None, **kw: Any) -> np.ndarray:
    """``_draw_block`` for ``map_blocks`` (the block index and shape from ``block_info``)."""
    info = block_info[None]
    shape = tuple(int(b - a) for a, b in info["array-location"])
    return _draw_block(
        kw["draw"],
        kw["kind"],
        kw["bit_generator"],
        kw["words"],
        tuple(info["chunk-location"]),
        shape,
        kw["sample_dtype"],
        *params,
    )


def _block_slices(chunks: Sequence[Sequence[int]], block: Sequence[int]) -> list[slice]:
    out = []
    for dim_chunks, b in zip(chunks, block, strict=True):
        start = sum(dim_chunks[:b])
        out.append(slice(start, start + dim_chunks[b]))
    return out


def _param_block(param: np.ndarray, ndim: int, slices: Sequence[slice]) -> np.ndarray:
    """The part of a NumPy parameter (right-aligned on the sample) one block needs."""
    if param.ndim == 0:
        return param
    own = slices[ndim - param.ndim :]
    index = tuple(s if n != 1 else slice(None) for s, n in zip(own, param.shape, strict=True))
    return param[index]


def _dask_array(name: str, dsk: dict, chunks: Any, dtype: str, deps: Sequence[Any] = ()) -> Any:
    import dask.array as da
    from dask.highlevelgraph import HighLevelGraph

    graph = HighLevelGraph.from_collections(name, dsk, dependencies=list(deps))
    ndim = len(chunks)
    return da.Array(graph, name, chunks, meta=np.empty((0,) * ndim, dtype=dtype))


def lower_random_function(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """Lower a RandomFunction node: ``[new_state, sample]``, the sample a dask array drawn
    block by block with per-block seeds (see the module)."""
    import dask.array as da
    from dask.base import tokenize

    op: RandomFunction = node.op
    state, size, *params = inputs
    if _is_dask(state) or _is_dask(size):
        raise LoweringError(
            f"{op}: the random state and the size must be client (NumPy) values, not dask arrays"
        )
    dtype = op.outtype.dtype
    ndim = op.outtype.ndim
    size = np.asarray(size).reshape(-1)
    shape = None if size.size == 0 else tuple(int(s) for s in size)
    new_state = state if op.inplace else copy.deepcopy(state)
    words = _seed_words(new_state)
    kind = "Generator" if isinstance(state, np.random.Generator) else "RandomState"
    # A block draws with the same kind of bit generator as the state (MT19937 for a
    # RandomState; a Generator's own class when numpy.random has it).
    bit_generator = "MT19937"
    if kind == "Generator":
        bit_generator = type(state.bit_generator).__name__
        if not hasattr(np.random, bit_generator):
            bit_generator = "PCG64"
    draw = op.exec_fn
    base = f"opgraph-random-{getattr(draw, '__name__', 'draw')}"
    token = tokenize(words, kind, bit_generator, shape, dtype, str(op), *params)
    name = f"{base}-{token}"
    elementwise = draw in _ELEMENTWISE
    if not elementwise:
        if any(_is_dask(p) for p in params):
            raise LoweringError(
                f"{op}: this draw is not element by element, so its parameters must be NumPy "
                "values (compute them first), not dask arrays"
            )
        sample = _draw_block(draw, kind, bit_generator, words, (0,) * ndim, shape, dtype, *params)
        if sample.ndim != ndim:
            raise ValueError(
                f"{op} drew a sample of shape {sample.shape}, which does not fit its type "
                f"{op.outtype}"
            )
        return [new_state, sample]
    if shape is None:
        shapes = [tuple(np.shape(p)) for p in params]
        if any(isinstance(n, float) and math.isnan(n) for s in shapes for n in s):
            raise LoweringError(
                f"{op}: a parameter has unknown dimensions; give the draw a size or call "
                "compute_chunk_sizes() on it"
            )
        shape = tuple(np.broadcast_shapes(*shapes)) if shapes else ()
        shape = (1,) * (ndim - len(shape)) + shape
    if len(shape) != ndim:
        raise ValueError(
            f"{op}: the size {shape} has {len(shape)} dimension(s), but the sample's type "
            f"{op.outtype} has {ndim}"
        )
    dask_params = [p for p in params if _is_dask(p)]
    if dask_params:
        chunks: Any = None
        for p in dask_params:
            off = ndim - p.ndim
            if off >= 0:
                chunks = [
                    p.chunks[d - off] if d >= off and p.shape[d - off] == shape[d] else None
                    for d in range(ndim)
                ]
                break
        spec = tuple("auto" if c is None else c for c in (chunks or [None] * ndim))
        out_chunks = sample_chunks(shape, dtype, spec)
        full = [da.broadcast_to(da.asarray(p), shape, chunks=out_chunks) for p in params]
        sample = da.map_blocks(
            _draw_mapped,
            *full,
            name=name,
            dtype=dtype,
            meta=np.empty((0,) * ndim, dtype=dtype),
            draw=draw,
            kind=kind,
            bit_generator=bit_generator,
            words=words,
            sample_dtype=dtype,
        )
        return [new_state, sample]
    out_chunks = sample_chunks(shape, dtype)
    arrays = [np.asarray(p) for p in params]
    dsk = {}
    for block in np.ndindex(*(len(c) for c in out_chunks)):
        slices = _block_slices(out_chunks, block)
        bshape = tuple(s.stop - s.start for s in slices)
        dsk[(name, *block)] = (
            _draw_block,
            draw,
            kind,
            bit_generator,
            words,
            tuple(block),
            bshape,
            dtype,
            *[_param_block(p, ndim, slices) for p in arrays],
        )
    return [new_state, _dask_array(name, dsk, out_chunks, dtype)]


# -- MRG31k3p ----------------------------------------------------------------------------


def _mrg_block(rstate: np.ndarray, start: int, stop: int, dtype: str, shape: tuple) -> Any:
    """Elements ``start:stop`` (C order) of an ``mrg_uniform`` sample drawn from the
    streams ``rstate``: the streams jump to step ``start // n``, then run as ``perform``."""
    from opgraph.sandbox.rng_mrg import _jump, _power, mrg_fill

    n = rstate.shape[0]
    t0 = start // n
    x = rstate.T.astype("int64")
    moved = _jump(x, _power(t0)).T.astype("int32") if t0 else rstate.copy()
    out = mrg_fill(moved, stop - t0 * n, dtype)[start - t0 * n :]
    return out.reshape(shape)


def _mrg_new_state(rstate: np.ndarray, n_elements: int) -> np.ndarray:
    """The streams after ``perform`` drew ``n_elements`` from them."""
    from opgraph.sandbox.rng_mrg import _jump, _power

    n = rstate.shape[0]
    new = rstate.copy()
    if n_elements == 0:
        return new
    active = min(n, n_elements)
    x = rstate[:active].T.astype("int64")
    full, extra = divmod(n_elements, n)
    final = x.copy()
    final[:, :extra] = _jump(x[:, :extra], _power(full + 1))
    final[:, extra:] = _jump(x[:, extra:], _power(full))
    new[:active] = final.T
    return new


def lower_mrg_uniform(node: Apply, inputs: Sequence[Any]) -> list[Any]:
    """Lower ``mrg_uniform``: ``perform``'s exact numbers and new state, in blocks of rows."""
    from dask.base import tokenize

    from opgraph.sandbox.rng_mrg import M1, _all_valid, check_size_value

    op = node.op
    rstate, size = inputs
    if _is_dask(rstate) or _is_dask(size):
        raise LoweringError(f"{op}: the stream states and the size must be NumPy values")
    dtype = op.output_type.dtype
    shape = check_size_value(op, size, op.output_type.ndim)
    n_elements = math.prod(shape)
    rstate = np.asarray(rstate)
    if rstate.ndim != 2 or rstate.shape[1] != 6 or rstate.dtype != np.int32 or not len(rstate):
        raise ValueError(
            f"{op}: rstate must be an int32 matrix of shape (n_streams, 6), got "
            f"{rstate.dtype} of shape {rstate.shape}"
        )
    if n_elements > M1:
        raise ValueError(f"{op}: rng_mrg does not support more than (2**31 - 1) samples")
    if not _all_valid(rstate.T.astype("int64")):
        storage: list[list[Any]] = [[None], [None]]
        op.perform(node, [rstate, np.asarray(size)], storage)
        return [storage[0][0], storage[1][0]]
    new_state = _mrg_new_state(rstate, n_elements)
    if op.inplace:
        rstate[...] = new_state
        new_state = rstate
    ndim = len(shape)
    if ndim == 0:
        chunks: tuple = ()
        blocks = [((), 0, 1, ())]
    else:
        spec = ("auto",) + (-1,) * (ndim - 1)
        chunks = sample_chunks(shape, dtype, spec)
        row = math.prod(shape[1:])
        blocks, start = [], 0
        for i, rows in enumerate(chunks[0]):
            blocks.append(((i,) + (0,) * (ndim - 1), start * row, (start + rows) * row, rows))
            start += rows
    name = f"opgraph-mrg_uniform-{tokenize(rstate.tobytes(), shape, dtype)}"
    state_key = (f"{name}-rstate",)
    dsk: dict = {state_key: rstate.copy()}
    for block, a, b, rows in blocks:
        bshape = (rows, *shape[1:]) if ndim else ()
        dsk[(name, *block)] = (_mrg_block, state_key, a, b, dtype, bshape)
    return [new_state, _dask_array(name, dsk, chunks, dtype)]


def register(table: LoweringTable) -> None:
    """Add the random draws' lowerings to ``table``."""
    table.register(RandomFunction, lower_random_function)
    from opgraph.sandbox.rng_mrg import mrg_uniform

    table.register(mrg_uniform, lower_mrg_uniform)
