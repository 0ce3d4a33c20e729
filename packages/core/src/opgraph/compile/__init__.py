"""Compiling graphs: ``function``, ``shared``, ``In``/``Out``, modes, profiling, DEBUG_MODE.

The names Theano code imports from ``theano.compile`` live here: ``function``, ``In``,
``Out``, ``Mode``, ``get_mode``, ``SharedVariable``, ``shared``, ``ProfileStats``,
``DebugMode``, ``NanGuardMode``, ``MonitorMode``, ``shared_constructor`` and
``ops.as_op``/``DeepCopyOp``/``ViewOp``/``shape``/``specify_shape``.
"""

from typing import Any

from opgraph.compile import builders, debugmode, function_module, monitormode, ops, sharedvalue
from opgraph.compile.builders import OpFromGraph
from opgraph.compile.debugmode import DebugMode
from opgraph.compile.function import (
    Function,
    FunctionMaker,
    MissingInputError,
    UnusedInputError,
    function,
    function_dump,
    orig_function,
)
from opgraph.compile.io import In, Out, SymbolicInput, SymbolicOutput
from opgraph.compile.mode import (
    FAST_COMPILE,
    FAST_RUN,
    PROFILE_MODE,
    Mode,
    get_default_mode,
    get_mode,
    register_mode,
)
from opgraph.compile.monitormode import MonitorMode
from opgraph.compile.nanguardmode import NanGuardMode
from opgraph.compile.ops import (
    DeepCopyOp,
    FromFunctionOp,
    ViewOp,
    as_op,
    deep_copy_op,
    register_deep_copy_op_c_code,
    register_rebroadcast_c_code,
    register_shape_c_code,
    register_shape_i_c_code,
    register_specify_shape_c_code,
    register_view_op_c_code,
    view_op,
)
from opgraph.compile.pfunc import pfunc, rebuild_collect_shared
from opgraph.compile.profiling import ProfileStats
from opgraph.compile.sharedvalue import SharedVariable, shared, shared_constructor

__all__ = [
    "FAST_COMPILE",
    "FAST_RUN",
    "PROFILE_MODE",
    "DebugMode",
    "DeepCopyOp",
    "FromFunctionOp",
    "Function",
    "FunctionMaker",
    "In",
    "MissingInputError",
    "Mode",
    "MonitorMode",
    "NanGuardMode",
    "OpFromGraph",
    "Out",
    "ProfileStats",
    "Shape",
    "Shape_i",
    "SharedVariable",
    "SpecifyShape",
    "SymbolicInput",
    "SymbolicOutput",
    "UnusedInputError",
    "ViewOp",
    "as_op",
    "debugmode",
    "deep_copy_op",
    "function",
    "function_dump",
    "function_module",
    "get_default_mode",
    "get_mode",
    "monitormode",
    "ops",
    "orig_function",
    "pfunc",
    "rebuild_collect_shared",
    "register_deep_copy_op_c_code",
    "register_mode",
    "register_rebroadcast_c_code",
    "register_shape_c_code",
    "register_shape_i_c_code",
    "register_specify_shape_c_code",
    "register_view_op_c_code",
    "shape",
    "shape_i",
    "shared",
    "shared_constructor",
    "sharedvalue",
    "specify_shape",
    "view_op",
]


def __getattr__(name: str) -> Any:
    """Theano's ``theano.compile.shape``/``shape_i``/``specify_shape`` (and their classes),
    defined by the tensor library, which imports this package: resolved on first use."""
    if name in ops._SHAPE_NAMES:
        return getattr(ops, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
