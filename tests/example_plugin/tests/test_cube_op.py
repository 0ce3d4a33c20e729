"""Cube through opgraph's testing kit: values in every installed linker and mode, shapes,
gradient and bad inputs."""

from __future__ import annotations

from typing import Any

import numpy as np

import opgraph
import opgraph.tensor as T
from example_plugin import cube
from opgraph.testing import OpSuite, assert_allclose, check_op


class TestCube(OpSuite):
    """Each case runs in every installed linker (py, vm, example, and c with backend-c) and
    in FAST_COMPILE, FAST_RUN and DEBUG_MODE; infer_shape, the gradient and the bad input
    are checked too."""

    op = cube
    bad_inputs = [((np.array([1, 2], dtype="int32"),), TypeError, "cube needs a float tensor")]

    @staticmethod
    def reference(x: np.ndarray) -> np.ndarray:
        return x**3

    def cases(self, rng: np.random.Generator) -> list[tuple[Any, ...]]:
        x = rng.standard_normal((3, 4))
        return [
            (x,),  # float64 matrix
            (x.astype("float32").T,),  # float32, Fortran-ordered
            (x[:, ::2],),  # a strided view
            (np.array(1.5),),  # 0-d
        ]


def test_float16_and_empty_values() -> None:
    """Values only: finite differences mean nothing in float16 or on no elements."""
    check_op(
        cube, [np.array([0.5, -2.0, 3.0], dtype="float16")], reference=lambda x: x**3, grad=False
    )
    check_op(cube, [np.zeros((0, 3))], reference=lambda x: x**3, grad=False)


def test_r_op_is_the_jacobian_times_v() -> None:
    x, v = T.dvector("x"), T.dvector("v")
    jv = opgraph.function([x, v], opgraph.Rop(cube(x), x, v))
    xv, vv = np.array([1.0, -2.0, 0.5]), np.array([0.3, 1.0, -4.0])
    assert_allclose(jv(xv, vv), 3 * xv**2 * vv)
