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

from typing import Any

from opgraph.graph.basic import Variable
from opgraph.graph.null_type import DisconnectedType, NullType, grad_not_implemented, grad_undefined
from opgraph.plugins.namespaces import module_getattr
from opgraph.tensor.autodiff import DisconnectedInputError, Lop, NullTypeGradError, Rop, grad
from opgraph.tensor.gradblock import (
    ConsiderConstant,
    DisconnectedGrad,
    GradBlock,
    GradClip,
    GradScale,
    UndefinedGrad,
    ZeroGrad,
    consider_constant,
    consider_constant_,
    disconnected_grad,
    disconnected_grad_,
    grad_clip,
    grad_scale,
    undefined_grad,
    undefined_grad_,
    zero_grad,
    zero_grad_,
)
from opgraph.tensor.gradcheck import GradientError, numeric_grad, verify_grad
from opgraph.tensor.jacobian import hessian, jacobian


def format_as(use_list: bool, use_tuple: bool, outputs: Any) -> Any:
    """``outputs`` as a list (``use_list``), a tuple (``use_tuple``) or, with neither flag, as
    the single element of a one-element list or tuple (Theano's helper for returning results
    in the structure the caller passed)."""
    if use_list and use_tuple:
        raise ValueError("format_as: use_list and use_tuple cannot both be True")
    if (use_list or use_tuple) and not isinstance(outputs, list | tuple):
        return [outputs] if use_list else (outputs,)
    if not (use_list or use_tuple) and isinstance(outputs, list | tuple):
        if len(outputs) != 1:
            raise ValueError(
                f"format_as: expected a one-element list to unpack, got {len(outputs)} elements"
            )
        return outputs[0]
    if use_list:
        return list(outputs)
    if use_tuple:
        return tuple(outputs)
    return outputs


def subgraph_grad(
    wrt: list[Variable],
    end: list[Variable],
    start: dict[Variable, Variable] | None = None,
    cost: Variable | None = None,
    details: bool = False,
) -> tuple[list[Any], ...]:
    """Gradients of ``cost`` and/or of the known gradients ``start`` w.r.t. ``wrt``, stopping
    at the variables ``end`` (held constant); returns ``(wrt_grads, end_grads)``, plus the
    ``start`` and ``cost`` parts with ``details=True``. Disconnected inputs are ignored.

    Backpropagating one piece of a graph at a time: feed ``dict(zip(end, end_grads))`` as
    the next call's ``start``.
    """
    if cost is None and start is None:
        raise ValueError("subgraph_grad needs a cost, a start dictionary, or both")
    if not isinstance(end, list) or not isinstance(wrt, list):
        raise TypeError("subgraph_grad: wrt and end must be lists of variables")
    if start is not None and not isinstance(start, dict):
        raise TypeError("subgraph_grad: start must be a dict {variable: gradient}")
    params = list(dict.fromkeys(wrt + end))
    start_grads = None
    cost_grads = None
    if start is not None:
        start_grads = list(
            grad(
                cost=None,
                wrt=params,
                known_grads=start,
                consider_constant=end,
                disconnected_inputs="ignore",
            )
        )
    if cost is not None:
        cost_grads = list(
            grad(cost=cost, wrt=params, consider_constant=end, disconnected_inputs="ignore")
        )
    if start_grads is None:
        grads = cost_grads
    else:
        grads = list(start_grads)
        if cost_grads is not None:
            grads = [a + b for a, b in zip(grads, cost_grads, strict=True)]
    pgrads = dict(zip(params, grads or [], strict=True))
    wrt_grads = [pgrads[k] for k in wrt]
    end_grads = [pgrads[k] for k in end]
    if details:
        return wrt_grads, end_grads, start_grads, cost_grads
    return wrt_grads, end_grads


__all__ = [
    "ConsiderConstant",
    "DisconnectedGrad",
    "DisconnectedInputError",
    "DisconnectedType",
    "GradBlock",
    "GradClip",
    "GradScale",
    "GradientError",
    "Lop",
    "NullType",
    "NullTypeGradError",
    "Rop",
    "UndefinedGrad",
    "ZeroGrad",
    "consider_constant",
    "consider_constant_",
    "disconnected_grad",
    "disconnected_grad_",
    "format_as",
    "grad",
    "grad_clip",
    "grad_not_implemented",
    "grad_scale",
    "grad_undefined",
    "hessian",
    "jacobian",
    "numeric_grad",
    "sparse_grad",
    "subgraph_grad",
    "undefined_grad",
    "undefined_grad_",
    "verify_grad",
    "zero_grad",
    "zero_grad_",
]


def sparse_grad(var: Variable) -> Variable:
    """Theano's ``theano.sparse_grad``: ``var`` (an ``x[indices]`` advanced-indexing result)
    rebuilt so that its gradient w.r.t. ``x`` is a sparse matrix. Sparse matrices are
    opgraph-sparse's: this delegates to ``opgraph.sparse.sparse_grad`` when that plugin is
    installed, and otherwise raises ImportError saying to install it."""
    try:
        sparse_namespace = module_getattr("sparse")  # opgraph.sparse, from the plugin
    except (ImportError, AttributeError):
        sparse_namespace = None
    impl = getattr(sparse_namespace, "sparse_grad", None)
    if impl is None:
        raise ImportError(
            "opgraph.sparse_grad builds sparse gradients, which need the opgraph-sparse "
            "plugin (it provides opgraph.sparse and sparse_grad). HINT: pip install "
            "opgraph-sparse; or take the dense gradient with opgraph.grad."
        )
    return impl(var)
