"""Theano 1.0's ``tensor.nnet.abstract_conv``: every public name of that module, in one place.

The names live in smaller modules, each using only the ones before it:
:mod:`~opgraph.tensor.nnet.conv_shapes` (shape helpers, ``border_mode_to_pad``,
``assert_shape``/``assert_conv_shape``), :mod:`~opgraph.tensor.nnet.conv_abstract` (the Ops),
:mod:`~opgraph.tensor.nnet.conv_builders` (``conv2d``, ``conv3d``, the gradient builders,
``conv2d_transpose``) and :mod:`~opgraph.tensor.nnet.conv_extras` (separable and causal
convolutions, bilinear upsampling). Code written for Theano imports them from here::

    from opgraph.tensor.nnet.abstract_conv import AbstractConv2d, get_conv_output_shape
"""

from __future__ import annotations

from opgraph.tensor.nnet.conv_abstract import (
    AbstractConv,
    AbstractConv2d,
    AbstractConv2d_gradInputs,
    AbstractConv2d_gradWeights,
    AbstractConv3d,
    AbstractConv3d_gradInputs,
    AbstractConv3d_gradWeights,
    AbstractConv_gradInputs,
    AbstractConv_gradWeights,
    BaseAbstractConv,
)
from opgraph.tensor.nnet.conv_builders import (
    conv2d,
    conv2d_grad_wrt_inputs,
    conv2d_grad_wrt_weights,
    conv2d_transpose,
    conv3d,
    conv3d_grad_wrt_inputs,
    conv3d_grad_wrt_weights,
)
from opgraph.tensor.nnet.conv_extras import (
    bilinear_kernel_1D,
    bilinear_kernel_2D,
    bilinear_upsampling,
    causal_conv1d,
    frac_bilinear_upsampling,
    separable_conv2d,
    separable_conv3d,
)
from opgraph.tensor.nnet.conv_shapes import (
    assert_conv_shape,
    assert_shape,
    border_mode_to_pad,
    check_conv_gradinputs_shape,
    get_conv_gradinputs_shape,
    get_conv_gradinputs_shape_1axis,
    get_conv_gradweights_shape,
    get_conv_gradweights_shape_1axis,
    get_conv_output_shape,
    get_conv_shape_1axis,
)

__all__ = [
    "AbstractConv",
    "AbstractConv2d",
    "AbstractConv2d_gradInputs",
    "AbstractConv2d_gradWeights",
    "AbstractConv3d",
    "AbstractConv3d_gradInputs",
    "AbstractConv3d_gradWeights",
    "AbstractConv_gradInputs",
    "AbstractConv_gradWeights",
    "BaseAbstractConv",
    "assert_conv_shape",
    "assert_shape",
    "bilinear_kernel_1D",
    "bilinear_kernel_2D",
    "bilinear_upsampling",
    "border_mode_to_pad",
    "causal_conv1d",
    "check_conv_gradinputs_shape",
    "conv2d",
    "conv2d_grad_wrt_inputs",
    "conv2d_grad_wrt_weights",
    "conv2d_transpose",
    "conv3d",
    "conv3d_grad_wrt_inputs",
    "conv3d_grad_wrt_weights",
    "frac_bilinear_upsampling",
    "get_conv_gradinputs_shape",
    "get_conv_gradinputs_shape_1axis",
    "get_conv_gradweights_shape",
    "get_conv_gradweights_shape_1axis",
    "get_conv_output_shape",
    "get_conv_shape_1axis",
    "separable_conv2d",
    "separable_conv3d",
]
