"""``opgraph.sandbox``: the home of what Theano 1.0 kept under ``theano.sandbox``.

Theano code imports ``theano.sandbox.rng_mrg.MRG_RandomStreams`` (the MRG31k3p random
streams, whose numbers are Theano's for the same seed), the multinomial Ops of
``theano.sandbox.multinomial``, ``theano.sandbox.softsign`` and ``theano.sandbox.linalg``
(hints and rewrites for linear algebra); all live here under the same names.
"""

from __future__ import annotations

from opgraph.sandbox import linalg, multinomial, rng_mrg, softsign

__all__ = ["linalg", "multinomial", "rng_mrg", "softsign"]
