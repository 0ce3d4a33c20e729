"""Theano's ``tensor.utils``: array hashes and the numeric shapes of a graph's variables."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from opgraph.graph.basic import Constant, Variable
from opgraph.graph.traversal import io_toposort
from opgraph.graph.utils import MethodNotDefined
from opgraph.tensor.basic import as_tensor_variable
from opgraph.tensor.type import TensorType

__all__ = ["hash_from_code", "hash_from_ndarray", "shape_of_variables"]


def hash_from_code(msg: str | bytes | np.ndarray) -> str:
    """``'m'`` + the SHA-256 hex digest of ``msg`` (a string, bytes or a C-contiguous array).

    Theano's (``theano.gof.utils.hash_from_code``): the same strings for the same input.
    """
    if isinstance(msg, str):
        msg = msg.encode()
    return "m" + hashlib.sha256(msg).hexdigest()


def hash_from_ndarray(data: np.ndarray) -> str:
    """A hash of an array's data, shape, strides and dtype (equal to Theano 1.0's).

    Two arrays with the same bytes but another shape, layout or dtype hash differently.
    """
    if not data.flags["C_CONTIGUOUS"]:
        data = np.ascontiguousarray(data)
    return hash_from_code(
        hash_from_code(data)
        + hash_from_code(str(data.shape))
        + hash_from_code(str(data.strides))
        + hash_from_code(str(data.dtype))
    )


def _symbolic_shapes(fgraph: Any) -> dict[Variable, tuple[Any, ...]]:
    """Every tensor variable of ``fgraph`` -> its shape as expressions of the input dims."""
    shape_of: dict[Variable, tuple[Any, ...]] = {}
    for inp in fgraph.inputs:
        if isinstance(inp.type, TensorType):
            shape_of[inp] = tuple(TensorType("int64", ())() for _ in range(inp.type.ndim))
    for node in fgraph.toposort():
        for inp in node.inputs:
            if inp not in shape_of and isinstance(inp, Constant) and hasattr(inp.data, "shape"):
                shape_of[inp] = tuple(np.shape(inp.data))
        in_shapes = [shape_of.get(inp) for inp in node.inputs]
        try:
            out_shapes = node.op.infer_shape(node, in_shapes)
        except (MethodNotDefined, TypeError, AttributeError):
            out_shapes = [None] * len(node.outputs)
        for out, shp in zip(node.outputs, out_shapes, strict=True):
            if shp is not None and isinstance(out.type, TensorType):
                shape_of[out] = tuple(shp)
    return shape_of


def _evaluate(exprs: Sequence[Any], known: dict[Variable, Any]) -> list[np.ndarray]:
    """Evaluate the shape expressions ``exprs`` (ints or variables) with each node's perform."""
    values = dict(known)
    variables = [as_tensor_variable(e) for e in exprs if isinstance(e, Variable)]
    for node in io_toposort(list(known), variables):
        ins = []
        for inp in node.inputs:
            if inp in values:
                ins.append(values[inp])
            elif isinstance(inp, Constant):
                ins.append(inp.data)
            else:
                raise ValueError(
                    f"shape_of_variables: a shape depends on the value of {inp} (not only on "
                    "the input shapes), so it cannot be computed from input_shapes alone"
                )
        storage: list[list[Any]] = [[None] for _ in node.outputs]
        node.op.perform(node, ins, storage)
        values.update(zip(node.outputs, (cell[0] for cell in storage), strict=True))
    out = []
    for e in exprs:
        if isinstance(e, Variable):
            if e in values:
                out.append(np.asarray(values[e]))
            elif isinstance(e, Constant):
                out.append(np.asarray(e.data))
            else:
                raise ValueError(f"shape_of_variables: cannot compute the dimension {e}")
        else:
            out.append(np.asarray(e))
    return out


def shape_of_variables(
    fgraph: Any, input_shapes: Mapping[Variable, Sequence[int]]
) -> dict[Variable, tuple[np.ndarray, ...]]:
    """The numeric shape of every tensor variable of ``fgraph`` given its inputs' shapes.

    ``input_shapes`` maps each input of ``fgraph`` (a FunctionGraph built with
    ``clone=False`` when the caller's variables are used as keys) to its shape. Returns a
    dict variable -> tuple of 0-d int arrays, as Theano::

        fgraph = FunctionGraph([x], [y], clone=False)
        shape_of_variables(fgraph, {x: (1024, 1024)})[y]   # (array(512), array(1024))
    """
    if any(i not in fgraph.inputs for i in input_shapes):
        raise ValueError(
            "input_shapes keys aren't in the fgraph.inputs. FunctionGraph() clones the "
            "graph it receives by default; build it with clone=False to use your variables."
        )
    shape_of = _symbolic_shapes(fgraph)
    known: dict[Variable, Any] = {}
    for inp in fgraph.inputs:
        if inp in shape_of:
            if inp not in input_shapes:
                raise ValueError(f"shape_of_variables: input_shapes has no shape for {inp}")
            given = tuple(input_shapes[inp])
            if len(given) != inp.type.ndim:
                raise ValueError(
                    f"shape_of_variables: {inp} has {inp.type.ndim} dimension(s), "
                    f"got the shape {given}"
                )
            known.update(
                zip(shape_of[inp], (np.asarray(d, dtype="int64") for d in given), strict=True)
            )
    result: dict[Variable, tuple[np.ndarray, ...]] = {}
    for var, shp in shape_of.items():
        result[var] = tuple(_evaluate(shp, known))
    return result
