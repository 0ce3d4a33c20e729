"""Neural-network ops (Theano's ``tensor.nnet``): activations, softmax, cross-entropy losses,
convolution, batch normalization and image patches.

``import opgraph.tensor.nnet as nnet`` then ``nnet.sigmoid``, ``nnet.softmax``,
``nnet.relu``, ``nnet.categorical_crossentropy``, ``nnet.conv2d``, ``nnet.conv2d_transpose``,
``nnet.conv3d``, ``nnet.batch_normalization``, ``nnet.images2neibs``, ... as in Theano 1.0;
``nnet.abstract_conv``, ``nnet.bn``, ``nnet.neighbours``, ``nnet.conv``, ``nnet.conv3d2d``,
``nnet.corr`` and ``nnet.corr3d`` are the modules behind them. ``nnet.conv2d`` is Theano's
``nnet.conv2d`` (it takes the deprecated ``image_shape``); ``nnet.abstract_conv2d`` is
``abstract_conv.conv2d``.
"""

from __future__ import annotations

from opgraph.tensor.nnet import (
    abstract_conv,
    blocksparse,
    bn,
    conv,
    conv3d2d,
    corr,
    corr3d,
    neighbours,
    sigm,
)
from opgraph.tensor.nnet import basic as _basic
from opgraph.tensor.nnet import crossentropy as _crossentropy
from opgraph.tensor.nnet import hsoftmax as _hsoftmax
from opgraph.tensor.nnet.abstract_conv import conv2d as abstract_conv2d
from opgraph.tensor.nnet.abstract_conv import conv2d_grad_wrt_inputs, conv3d, separable_conv2d
from opgraph.tensor.nnet.basic import *
from opgraph.tensor.nnet.bn import batch_normalization
from opgraph.tensor.nnet.conv import ConvOp
from opgraph.tensor.nnet.conv_builders import conv2d_transpose
from opgraph.tensor.nnet.conv_builders import nnet_conv2d as conv2d
from opgraph.tensor.nnet.crossentropy import *
from opgraph.tensor.nnet.hsoftmax import *
from opgraph.tensor.nnet.neighbours import Images2Neibs, images2neibs, neibs2images
from opgraph.tensor.nnet.sigm import *

__all__ = [
    *_basic.__all__,
    *_crossentropy.__all__,
    *_hsoftmax.__all__,
    *sigm.__all__,
    "ConvOp",
    "Images2Neibs",
    "abstract_conv",
    "abstract_conv2d",
    "batch_normalization",
    "bn",
    "conv",
    "conv2d",
    "conv2d_grad_wrt_inputs",
    "conv2d_transpose",
    "conv3d",
    "conv3d2d",
    "corr",
    "corr3d",
    "images2neibs",
    "neibs2images",
    "neighbours",
    "separable_conv2d",
    "sigm",
]
