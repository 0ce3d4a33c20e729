"""Theano's module path ``theano.tensor.nnet.nnet``: softmax and cross-entropy ops."""

from __future__ import annotations

from opgraph.tensor.nnet import basic as _basic
from opgraph.tensor.nnet import crossentropy as _crossentropy
from opgraph.tensor.nnet.basic import *  # noqa: F403
from opgraph.tensor.nnet.crossentropy import *  # noqa: F403
from opgraph.tensor.nnet.sigm import sigmoid, softplus

__all__ = [*_basic.__all__, *_crossentropy.__all__, "sigmoid", "softplus"]
