"""``scan_checkpoints``: a scan that keeps one state every ``save_every_N`` steps and
recomputes the others during the gradient (Theano's ``scan_module.scan_checkpoints``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opgraph.scan_module.scan import scan
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.joining import concatenate
from opgraph.tensor.math import cast, ceil, eq, switch
from opgraph.tensor.shape import reshape
from opgraph.tensor.structure import ones, zeros
from opgraph.tensor.subtensor import set_subtensor
from opgraph.updates import OrderedUpdates

__all__ = ["scan_checkpoints"]


def scan_checkpoints(
    fn: Callable[..., Any],
    sequences: Any = None,
    outputs_info: Any = None,
    non_sequences: Any = None,
    name: str = "checkpointscan_fn",
    n_steps: Any = None,
    save_every_N: int = 10,
    padding: bool = True,
) -> tuple[Any, OrderedUpdates]:
    """Like :func:`scan`, but the outputs hold only every ``save_every_N``-th step (the last
    of each block of steps), and the gradient recomputes the steps in between instead of
    storing them: memory O(n_steps / N + N) instead of O(n_steps).

    Every sequence must have ``n_steps`` entries; outputs have no taps beyond -1. With
    ``padding``, sequences whose length is not a multiple of ``save_every_N`` are padded
    with zeros (the padded steps are not run); without it the length must be a multiple.
    """
    sequences = [as_tensor_variable(s) for s in _as_list(sequences)]
    outputs_info = _as_list(outputs_info) if outputs_info is not None else [None]
    non_sequences = _as_list(non_sequences)
    for element in outputs_info:
        if isinstance(element, dict) and element.get("taps") not in (None, [-1]):
            raise ValueError("scan_checkpoints does not support taps other than -1")
    if save_every_N < 1:
        raise ValueError(f"save_every_N must be a positive int, got {save_every_N!r}")
    if n_steps is None:
        if not sequences:
            raise ValueError("scan_checkpoints needs n_steps or at least one sequence")
        n_steps = sequences[0].shape[0]
    n_steps = cast(as_tensor_variable(n_steps), "int64")
    every = save_every_N
    o_n_steps = cast(ceil(n_steps / every), "int64")
    remainder = n_steps % every
    last = switch(eq(remainder, 0), every, remainder)
    i_n_steps = set_subtensor((ones((o_n_steps,), "int64") * every)[-1], last)
    blocks = []
    for s in sequences:
        if padding:
            pad = (every - s.shape[0] % every) % every
            filler = zeros([pad, *(s.shape[i] for i in range(1, s.ndim))], dtype=s.dtype)
            s = concatenate([s, filler])
        shape = [s.shape[0] // every, every, *(s.shape[i] for i in range(1, s.ndim))]
        blocks.append(reshape(s, shape, ndim=s.ndim + 1))
    n_nit = sum(1 for o in outputs_info if o is None)
    n_blocks_seqs = len(blocks)
    n_non = len(non_sequences)

    def outer_step(*args: Any) -> Any:
        block_seqs = list(args[:n_blocks_seqs])
        steps = args[n_blocks_seqs]
        prev = list(args[n_blocks_seqs + 1 : len(args) - n_non])
        non = list(args[len(args) - n_non :]) if n_non else []
        infos = [p for p in prev] + [None] * n_nit
        results, updates = scan(
            fn,
            sequences=block_seqs,
            outputs_info=infos,
            non_sequences=non,
            n_steps=steps,
            name=name + "_inner",
        )
        if not isinstance(results, list):
            results = [results]
        return [r[-1] for r in results], updates

    return scan(
        outer_step,
        sequences=[*blocks, i_n_steps],
        outputs_info=outputs_info,
        non_sequences=non_sequences,
        n_steps=o_n_steps,
        name=name + "_outer",
    )


def _as_list(x: Any) -> list[Any]:
    if x is None:
        return []
    return list(x) if isinstance(x, list | tuple) else [x]
