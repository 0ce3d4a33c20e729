"""Core's ops through the testing kit's ``OpSuite``, as a plugin author tests theirs.

One suite per op, across modules (math, reductions, dot, indexing, joining, nnet,
cumulative): values in every installed linker and in FAST_COMPILE, FAST_RUN and
DEBUG_MODE against NumPy, ``infer_shape`` against the real shapes, the gradient against
finite differences, and bad inputs that must raise the op's own error.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.special

import opgraph.tensor as T
from opgraph.tensor.cumulative import CumOp
from opgraph.tensor.dot import Dot
from opgraph.tensor.elemwise import Sum
from opgraph.tensor.joining import Join
from opgraph.tensor.math import add, tanh
from opgraph.tensor.nnet import Softmax
from opgraph.testing import OpSuite, random_value


class TestAdd(OpSuite):
    """Elementwise ``add``: broadcasting of a row against a matrix, integers exactly."""

    op = add
    cases = [
        (np.linspace(-1, 1, 12).reshape(3, 4), np.arange(4.0).reshape(1, 4)),
        (np.arange(6, dtype="int32"), np.full(6, 7, dtype="int32")),
    ]
    reference = staticmethod(np.add)
    # the shape-mismatch error's text belongs to Elemwise; both forms of it say "shape"
    bad_inputs = [((np.ones(3), np.ones(4)), ValueError, "shape")]


class TestTanh(OpSuite):
    """An elementwise transcendental, float32 to float32's tolerance."""

    op = tanh
    reference = staticmethod(np.tanh)

    def cases(self, rng: np.random.Generator) -> list[Any]:
        return [random_value(rng, (2, 5), "float64", -3, 3), random_value(rng, (7,), "float32")]


class TestSum(OpSuite):
    """A reduction over one axis of a matrix."""

    op = Sum(axis=1)
    cases = [np.arange(12.0).reshape(3, 4) / 7, np.zeros((0, 3))]
    reference = staticmethod(lambda x: x.sum(axis=1))


class TestDot(OpSuite):
    """Matrix product and matrix-vector product; misaligned shapes raise Dot's error."""

    op = Dot()
    cases = [
        (np.linspace(0, 1, 12).reshape(3, 4), np.linspace(-1, 1, 8).reshape(4, 2)),
        (np.linspace(0, 1, 6).reshape(2, 3), np.array([1.0, -2.0, 0.5])),
    ]
    reference = staticmethod(np.dot)
    bad_inputs = [
        ((np.ones((3, 4)), np.ones((5, 2))), ValueError, r"shapes \(3, 4\) and \(5, 2\)"),
        ((np.ones((2, 2, 2)), np.ones((2, 2))), TypeError, "must be a vector or a matrix"),
    ]


class TestSubtensor(OpSuite):
    """Basic indexing with steps and a negative index (views of the input)."""

    op = staticmethod(lambda x: [x[1:, ::-2], x[-1]])
    cases = [np.arange(20.0).reshape(4, 5)]
    reference = staticmethod(lambda x: [x[1:, ::-2], x[-1]])
    bad_inputs = [(np.ones((0, 5)), IndexError, "out of bounds")]


class TestSoftmax(OpSuite):
    """Softmax along the last axis, and along axis 0; a bad axis is caught at build time."""

    op = Softmax(axis=0)
    cases = [np.linspace(-2, 3, 12).reshape(4, 3)]
    reference = staticmethod(lambda x: scipy.special.softmax(x, axis=0))
    bad_inputs = [(np.array(1.0), ValueError, "axis 0 is out of range")]


class TestJoin(OpSuite):
    """Join of two matrices along a symbolic axis."""

    op = Join()
    cases = [(np.int64(1), np.arange(6.0).reshape(2, 3), np.ones((2, 2)))]
    reference = staticmethod(lambda axis, a, b: np.concatenate([a, b], axis=axis))
    bad_inputs = [
        ((np.int64(1), np.ones((2, 3)), np.ones((3, 2))), ValueError, "cannot join arrays"),
    ]


class TestCumOp(OpSuite):
    """Cumulative sums and products along an axis."""

    op = CumOp(axis=1, mode="mul")
    cases = [np.linspace(0.5, 1.5, 12).reshape(3, 4)]
    reference = staticmethod(lambda x: np.cumprod(x, axis=1))
    bad_inputs = [(np.ones(3), ValueError, "axis 1 is out of range")]


class TestMaxAndArgmaxOutputs(OpSuite):
    """A callable with two outputs, one of them integer (no gradient checked for it)."""

    op = staticmethod(lambda x: [T.max(x, axis=0), T.argmax(x, axis=0)])
    cases = [np.array([[1.0, 5.0, -2.0], [3.0, 0.5, 4.0]])]
    reference = staticmethod(lambda x: [x.max(axis=0), x.argmax(axis=0)])
