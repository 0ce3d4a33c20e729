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

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from opgraph.compile.sharedvalue import SharedVariable
from opgraph.graph.basic import Variable
from opgraph.tensor import random as raw_random
from opgraph.tensor.sharedvar import random_shared_constructor

__all__ = ["RandomStreams", "RandomStreamsBase"]


def _draws(draw: Callable[..., list[Variable]]) -> Callable[..., Variable]:
    """The method drawing from ``draw`` (a function of :mod:`opgraph.tensor.random`) on a new
    state: ``draw``'s parameters less the state, and its documentation."""

    def method(self: RandomStreamsBase, *args: Any, **kwargs: Any) -> Variable:
        return self.gen(draw, *args, **kwargs)

    signature = inspect.signature(draw)
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    params = [self_param, *list(signature.parameters.values())[1:]]
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=params, return_annotation=Variable
    )
    method.__name__ = method.__qualname__ = draw.__name__
    method.__doc__ = (draw.__doc__ or "").replace("; returns ``[new_state, sample]``", "")
    return method


class RandomStreamsBase:
    """The distribution methods; subclasses define :meth:`gen` (how a draw gets its state)."""

    def gen(self, op: Callable[..., list[Variable]], *args: Any, **kwargs: Any) -> Variable:
        """Build ``op(state, *args, **kwargs)`` on a new random state; return the sample."""
        raise TypeError(f"{type(self).__name__} must define gen()")

    uniform = _draws(raw_random.uniform)
    normal = _draws(raw_random.normal)
    binomial = _draws(raw_random.binomial)
    random_integers = _draws(raw_random.random_integers)
    integers = _draws(raw_random.integers)
    choice = _draws(raw_random.choice)
    permutation = _draws(raw_random.permutation)
    multinomial = _draws(raw_random.multinomial)

    def poisson(
        self,
        size: Any = None,
        lam: Any = None,
        ndim: int | None = None,
        dtype: str = "int64",
    ) -> Variable:
        """Poisson counts of rate ``lam``."""
        if lam is None:
            raise TypeError("poisson needs the rate: poisson(size, lam=...)")
        return self.gen(raw_random.poisson, size, lam, ndim=ndim, dtype=dtype)


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
