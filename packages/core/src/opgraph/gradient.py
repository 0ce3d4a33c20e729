"""Automatic differentiation, as Theano's ``theano.gradient``: grad, Lop, Rop, jacobian,
hessian, verify_grad and the gradient-blocking ops.

The pieces live where their dependencies are: the gradient types every Op may return in
:mod:`opgraph.graph.null_type`; ``grad``, ``Lop`` and ``Rop`` in
:mod:`opgraph.tensor.autodiff`; ``consider_constant``/``zero_grad``/``disconnected_grad`` in
:mod:`opgraph.tensor.gradblock`; the Jacobian and Hessian (an Op that compiles an inner
function) in :mod:`opgraph.tensor.jacobian`; ``verify_grad`` in
:mod:`opgraph.tensor.gradcheck`. This module gathers them under Theano's names.
"""

from __future__ import annotations

from opgraph.graph.null_type import DisconnectedType, NullType, grad_not_implemented, grad_undefined
from opgraph.tensor.autodiff import DisconnectedInputError, Lop, NullTypeGradError, Rop, grad
from opgraph.tensor.gradblock import GradBlock, consider_constant, disconnected_grad, zero_grad
from opgraph.tensor.gradcheck import GradientError, numeric_grad, verify_grad
from opgraph.tensor.jacobian import hessian, jacobian

__all__ = [
    "DisconnectedInputError",
    "DisconnectedType",
    "GradBlock",
    "GradientError",
    "Lop",
    "NullType",
    "NullTypeGradError",
    "Rop",
    "consider_constant",
    "disconnected_grad",
    "grad",
    "grad_not_implemented",
    "grad_undefined",
    "hessian",
    "jacobian",
    "numeric_grad",
    "verify_grad",
    "zero_grad",
]
