"""Every Op class of core has a ``c`` kernel or a written reason to run its ``perform``.

Issue 19: a graph should not drop to a Python round trip per node because nobody looked at
its Op. The test walks every module of ``opgraph``, collects the Op classes it defines, and
fails naming each one that has neither a kernel in backend-c's registry nor an entry in
:data:`opgraph_c.kernels.perform.REASONS`.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import opgraph
from opgraph.graph.op import Op
from opgraph.scalar.basic import ScalarOp
from opgraph.tensor.elemwise import Elemwise
from opgraph.tensor.nnet.basic import _AxisOp
from opgraph.tensor.nnet.conv_abstract import BaseAbstractConv
from opgraph.tensor.nnet.corr import (
    BaseCorrMM,
    CorrBase,
    CorrForward,
    CorrGradInputs,
    CorrGradWeights,
)
from opgraph.tensor.nnet.corr3d import BaseCorr3dMM
from opgraph.tensor.signal.pool import PoolGrad
from opgraph.tensor.sort import _SortBase
from opgraph.tensor.subtensor_advanced import BaseAdvancedIncSubtensor, BaseAdvancedSubtensor
from opgraph_c.kernels.perform import REASONS
from opgraph_c.registry import get_registry

#: Classes no graph holds an instance of: bases whose subclasses are the Ops.
ABSTRACT = {
    Op,
    _AxisOp,
    _SortBase,
    BaseAdvancedSubtensor,
    BaseAdvancedIncSubtensor,
    PoolGrad,
    BaseAbstractConv,
    CorrBase,
    CorrForward,
    CorrGradWeights,
    CorrGradInputs,
    BaseCorrMM,
    BaseCorr3dMM,
}


def core_op_classes() -> set[type]:
    """The Op classes defined in core's modules, scalar ops aside (they run inside
    Elemwise's fused loops: ``test_c_elemwise_ops`` covers their C expressions)."""
    found: set[type] = set()
    for info in pkgutil.walk_packages(opgraph.__path__, "opgraph."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, Op)
                and obj.__module__.startswith("opgraph.")
                and not issubclass(obj, ScalarOp)
            ):
                found.add(obj)
    return found - ABSTRACT


def test_the_walk_finds_core_ops() -> None:
    classes = core_op_classes()
    assert Elemwise in classes and len(classes) > 80


def test_every_core_op_has_a_c_kernel_or_a_reason() -> None:
    registry = get_registry()
    uncovered = sorted(
        f"{cls.__module__}.{cls.__qualname__}" for cls in registry.missing(core_op_classes())
    )
    assert not uncovered, (
        "these core Ops have no c kernel and no reason to run perform: "
        + ", ".join(uncovered)
        + ".\nHINT: register a kernel (packages/backend-c/src/opgraph_c/kernels/<topic>.py) "
        "or add the class and the reason to opgraph_c/kernels/perform.py's REASONS."
    )


def test_reasons_are_registered_and_are_not_shadowed_by_kernels() -> None:
    """Each reason is what the registry reports, and no class has both a kernel and a reason
    (a stale reason after a kernel landed)."""
    reasons = {  # core's Ops only: plugins (opgraph-sparse) register reasons of their own
        cls: text
        for cls, text in get_registry().perform_reasons().items()
        if cls.__module__.split(".")[0] == "opgraph"
    }
    assert reasons == {cls: text.strip() for cls, text in REASONS.items()}
    for cls in REASONS:
        assert get_registry().lookup(cls).op_class is cls
