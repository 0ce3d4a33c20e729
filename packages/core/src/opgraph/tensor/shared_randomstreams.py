"""``RandomStreams``: random variables whose state lives in shared variables (Theano's).

Each call (``rs.uniform((2, 3))``) makes a new shared ``numpy.random.RandomState``, seeded
from the streams' own seed generator, and sets that state's ``default_update`` to the
draw's new state. A function using the sample therefore draws new numbers at every call,
and two ``RandomStreams`` built with the same seed give the same numbers, call for call
(the same numbers as Theano 1.0's, which seeds and draws the same way)::

    srng = RandomStreams(seed=234)
    rv_u = srng.uniform((2, 2))
    f = opgraph.function([], rv_u)
    f(), f()  # two different 2x2 draws
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from opgraph.compile.sharedvalue import SharedVariable
from opgraph.graph.basic import Variable
from opgraph.tensor.raw_random import RandomStreamsBase
from opgraph.tensor.sharedvar import RandomStateSharedVariable, random_shared_constructor

__all__ = ["RandomStateSharedVariable", "RandomStreams", "RandomStreamsBase"]


class RandomStreams(RandomStreamsBase):
    """A source of random variables, each with its own shared ``RandomState``.

    Parameters
    ----------
    seed
        Seeds the generator that seeds each new random variable's state (None: from the
        operating system's entropy).

    Attributes
    ----------
    state_updates
        ``(shared state, new state)`` for every random variable made so far.
    """

    def __init__(self, seed: int | None = None) -> None:
        self.state_updates: list[tuple[SharedVariable, Variable]] = []
        self.default_instance_seed = seed
        self.gen_seedgen = np.random.RandomState(seed)

    def updates(self) -> list[tuple[SharedVariable, Variable]]:
        """The ``(state, new state)`` update pairs (also each state's ``default_update``)."""
        return list(self.state_updates)

    def seed(self, seed: int | None = None) -> None:
        """Re-seed every random variable made so far (None: the constructor's seed).

        The states are re-seeded in creation order from ``RandomState(seed)``, so the same
        seed restarts the same sequences.
        """
        if seed is None:
            seed = self.default_instance_seed
        seedgen = np.random.RandomState(seed)
        for old_r, _new_r in self.state_updates:
            old_r_seed = seedgen.randint(2**30)
            old_r.set_value(np.random.RandomState(int(old_r_seed)), borrow=True)

    def __getitem__(self, item: SharedVariable) -> Any:
        """The current state of a random variable's shared state (not a copy)."""
        return item.get_value(borrow=True)

    def __setitem__(self, item: SharedVariable, val: Any) -> None:
        """Replace a random variable's state with the ``RandomState`` ``val``."""
        if not isinstance(val, np.random.RandomState):
            raise TypeError(
                f"RandomStreams states are numpy.random.RandomState objects, got "
                f"{type(val).__name__}"
            )
        item.set_value(val, borrow=True)

    def gen(self, op: Callable[..., list[Variable]], *args: Any, **kwargs: Any) -> Variable:
        """Draw with ``op`` (a function of :mod:`opgraph.tensor.random`) on a new state.

        The returned sample carries ``.rng`` (the shared state) and ``.update`` (the
        ``(state, new state)`` pair).
        """
        seed = int(self.gen_seedgen.randint(2**30))
        state = random_shared_constructor(np.random.RandomState(seed), borrow=True)
        assert state is not None  # a RandomState always has a constructor
        state.tag.is_rng = True
        new_r, out = op(state, *args, **kwargs)
        out.rng = state  # type: ignore[attr-defined]
        out.update = (state, new_r)  # type: ignore[attr-defined]
        self.state_updates.append(out.update)  # type: ignore[attr-defined]
        state.default_update = new_r
        return out
