"""C kernels for ``opgraph.tensor.nnet``: softmax, log-softmax and the cross-entropy ops.

Every entry returns a :class:`~opgraph_c.spec.Precompiled` thunk from the installed
extension :mod:`opgraph_c._nnet` (typed float32 and float64 loops; nothing is generated or
compiled), or None, so that ``perform`` runs, for other dtypes (float16). The kernels follow
``perform`` step for step (max subtracted first, NaN propagated like NumPy, perform's error
for mismatched shapes and out-of-range class indices); see the extension's docstring.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from opgraph.graph.basic import Apply
from opgraph.graph.op import Op
from opgraph.tensor.nnet.basic import LogSoftmax, Softmax, SoftmaxGrad, SoftmaxWithBias
from opgraph.tensor.nnet.crossentropy import (
    CrossentropyCategorical1Hot,
    CrossentropyCategorical1HotGrad,
    CrossentropySoftmax1HotWithBiasDx,
    CrossentropySoftmaxArgmax1HotWithBias,
)
from opgraph_c.spec import Precompiled

__all__ = ["NNET_VERSION", "nnet_c", "register"]

#: Bump when the kernels' results change (it is part of the entries' cache keys).
NNET_VERSION = 1

#: The float dtypes the typed loops are compiled for.
FLOAT_DTYPES = frozenset({"float32", "float64"})

#: Op class -> (name of its thunk class in opgraph_c._nnet, extra keyword arguments).
THUNKS: dict[type[Op], tuple[str, dict[str, Any]]] = {
    Softmax: ("SoftmaxThunk", {"take_log": False}),
    LogSoftmax: ("SoftmaxThunk", {"take_log": True}),
    SoftmaxGrad: ("SoftmaxGradThunk", {}),
    SoftmaxWithBias: ("SoftmaxWithBiasThunk", {}),
    CrossentropySoftmaxArgmax1HotWithBias: ("CrossentropySoftmaxArgmaxThunk", {}),
    CrossentropySoftmax1HotWithBiasDx: ("CrossentropySoftmaxDxThunk", {}),
    CrossentropyCategorical1Hot: ("CrossentropyCategoricalThunk", {}),
    CrossentropyCategorical1HotGrad: ("CrossentropyCategoricalGradThunk", {}),
}


def register(registry: Any, owner: str) -> None:
    """Register the softmax-family kernels (one entry per Op class, all :func:`nnet_c`)."""
    for op_class in THUNKS:
        registry.register(op_class, nnet_c, version=NNET_VERSION, owner=owner)


def _float_operands(node: Apply) -> bool:
    """Whether every float input and output of ``node`` is float32 or float64."""
    for var in (*node.inputs, *node.outputs):
        dtype = var.type.dtype
        if dtype.startswith("float") and dtype not in FLOAT_DTYPES:
            return False
    return node.outputs[0].type.dtype in FLOAT_DTYPES


def nnet_c(op: Op, node: Apply) -> Precompiled | None:
    """The precompiled thunk of a softmax-family node, or None for float16 operands.

    Subclasses of the registered Ops are served only when their ``perform`` is the base
    class's (a subclass with other semantics runs its own perform).
    """
    entry = _entry(op)
    if entry is None or not _float_operands(node):
        return None
    try:
        from opgraph_c import _nnet
    except ImportError:  # an install built before _nnet existed: perform runs, with a warning
        return None
    class_name, kwargs = entry
    factory: Callable[..., Any] = getattr(_nnet, class_name)
    dtypes = ", ".join(v.type.dtype for v in node.inputs)
    return Precompiled(f"{op} ({dtypes})", partial(factory, **kwargs) if kwargs else factory)


def _entry(op: Op) -> tuple[str, dict[str, Any]] | None:
    for op_class in type(op).__mro__:
        if op_class in THUNKS:
            if type(op).perform is not op_class.perform:
                return None
            return THUNKS[op_class]
    return None
