"""Theano's ``tensor.raw_random``: the random Ops on explicit states, and RandomStreamsBase.

The draws (``uniform(state, size)`` returning ``[new_state, sample]``) are those of
:mod:`opgraph.tensor.random`, the Op and types those of :mod:`opgraph.tensor.random_ops`.
:class:`RandomStreamsBase` is the distribution-method mixin that
:class:`opgraph.tensor.shared_randomstreams.RandomStreams` completes with its ``gen``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from opgraph.graph.basic import Variable
from opgraph.tensor import random as _random
from opgraph.tensor.random import *  # noqa: F403
from opgraph.tensor.random_ops import (
    choice_helper,
    multinomial_helper,
    permutation_helper,
    random_integers_helper,
)

__all__ = [
    *_random.__all__,
    "RandomStreamsBase",
    "choice_helper",
    "multinomial_helper",
    "permutation_helper",
    "random_integers_helper",
]

raw_random = _random  # the draws' module, for the methods below


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
