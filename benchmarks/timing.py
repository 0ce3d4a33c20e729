"""The shared timing helper: warm-up, repeated rounds, median/min/max, readable units.

:func:`measure` times a zero-argument callable with ``time.perf_counter_ns``: it calls it
``warmup`` times, picks how many calls make one round (unless told), then runs ``repeat``
rounds with the garbage collector off and keeps the time per call of each round. A
:class:`Timing` holds those per-call figures (seconds); :func:`fmt_time` prints seconds
in ns, µs, ms or s.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Timing", "fmt_time", "measure", "pick_unit"]

_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))


@dataclass(frozen=True)
class Timing:
    """Seconds per call, one figure per round of ``number`` calls."""

    samples: tuple[float, ...]
    number: int = 1

    @classmethod
    def of(cls, samples: Sequence[float], number: int = 1) -> Timing:
        """A Timing from any sequence of per-call seconds."""
        if not samples:
            raise ValueError("a Timing needs at least one sample")
        return cls(tuple(float(s) for s in samples), number)

    @property
    def median(self) -> float:
        """Median seconds per call over the rounds."""
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        """Fastest round's seconds per call."""
        return min(self.samples)

    @property
    def max(self) -> float:
        """Slowest round's seconds per call."""
        return max(self.samples)

    @property
    def repeat(self) -> int:
        """How many rounds were timed."""
        return len(self.samples)

    def to_dict(self) -> dict[str, Any]:
        """The figures as plain JSON data (seconds)."""
        return {
            "median_s": self.median,
            "min_s": self.min,
            "max_s": self.max,
            "repeat": self.repeat,
            "number": self.number,
            "samples_s": list(self.samples),
        }


def pick_unit(seconds: float) -> tuple[str, float]:
    """The unit (name, seconds per unit) that shows ``seconds`` as 1 to 999."""
    a = abs(seconds)
    for name, scale in _UNITS:
        if a >= scale * 0.9995:
            return name, scale
    return _UNITS[-1]


def fmt_time(seconds: float, unit: tuple[str, float] | None = None) -> str:
    """``seconds`` with 3 or 4 significant digits in ns/µs/ms/s (or in the given unit)."""
    if not math.isfinite(seconds):
        return str(seconds)
    name, scale = unit or pick_unit(seconds)
    v = seconds / scale
    if abs(v) >= 100:
        text = f"{v:.0f}"
    elif abs(v) >= 10:
        text = f"{v:.1f}"
    else:
        text = f"{v:.2f}"
    return f"{text} {name}"


def _run(fn: Callable[[], Any], number: int) -> int:
    """Nanoseconds taken by ``number`` calls of ``fn``."""
    clock = time.perf_counter_ns
    t0 = clock()
    for _ in range(number):
        fn()
    return clock() - t0


def measure(
    fn: Callable[[], Any],
    *,
    repeat: int,
    number: int | None = None,
    warmup: int = 1,
    min_round_s: float = 0.05,
    max_number: int = 1_000_000,
) -> Timing:
    """Time ``fn()``: ``warmup`` calls, then ``repeat`` rounds of ``number`` calls each.

    Parameters
    ----------
    fn
        The zero-argument callable to time (it must do all the work itself: JAX callers
        block until the result is ready).
    repeat
        Rounds to time; the Timing reports their median, min and max.
    number
        Calls per round; None picks enough calls for a round to last ``min_round_s``.
    warmup
        Untimed calls first (first-call compilation, caches, BLAS thread start-up).
    min_round_s
        Target length of a round when ``number`` is None.
    max_number
        Upper bound on the calls per round picked automatically.
    """
    for _ in range(warmup):
        fn()
    if number is None:
        # Grow the batch until it is long enough to estimate one call's time.
        n, elapsed = 1, _run(fn, 1)
        while elapsed < 2_000_000 and n < max_number:  # 2 ms
            n = min(n * 10, max_number)
            elapsed = _run(fn, n)
        per_call = max(elapsed / n, 1.0) * 1e-9
        number = max(1, min(max_number, math.ceil(min_round_s / per_call)))
    samples = []
    gc_was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeat):
            samples.append(_run(fn, number) * 1e-9 / number)
    finally:
        if gc_was_enabled:
            gc.enable()
    return Timing.of(samples, number)
