"""Neural-network ops: activations, softmax, and cross-entropy losses (Theano's ``tensor.nnet``).

``import opgraph.tensor.nnet as nnet`` then ``nnet.sigmoid``, ``nnet.softmax``,
``nnet.relu``, ``nnet.categorical_crossentropy``, ... as in Theano 1.0.
"""

from __future__ import annotations

from opgraph.tensor.nnet import basic as _basic
from opgraph.tensor.nnet import blocksparse, sigm
from opgraph.tensor.nnet import crossentropy as _crossentropy
from opgraph.tensor.nnet import hsoftmax as _hsoftmax
from opgraph.tensor.nnet.basic import *
from opgraph.tensor.nnet.crossentropy import *
from opgraph.tensor.nnet.hsoftmax import *
from opgraph.tensor.nnet.sigm import *

__all__ = [*_basic.__all__, *_crossentropy.__all__, *_hsoftmax.__all__, *sigm.__all__, "sigm"]
