"""Compiling graphs: ``function``, ``shared``, ``In``/``Out``, modes, profiling, DEBUG_MODE.

The names Theano code imports from ``theano.compile`` live here: ``function``, ``In``,
``Out``, ``Mode``, ``get_mode``, ``SharedVariable``, ``shared``, ``ProfileStats``,
``DebugMode``, ``NanGuardMode`` and ``ops.as_op``/``DeepCopyOp``/``ViewOp``.
"""

from opgraph.compile import ops
from opgraph.compile.debugmode import DebugMode
from opgraph.compile.function import (
    Function,
    FunctionMaker,
    MissingInputError,
    UnusedInputError,
    function,
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
from opgraph.compile.nanguardmode import NanGuardMode
from opgraph.compile.ops import DeepCopyOp, ViewOp, as_op, deep_copy_op, view_op
from opgraph.compile.pfunc import pfunc, rebuild_collect_shared
from opgraph.compile.profiling import ProfileStats
from opgraph.compile.sharedvalue import SharedVariable, shared

__all__ = [
    "FAST_COMPILE",
    "FAST_RUN",
    "PROFILE_MODE",
    "DebugMode",
    "DeepCopyOp",
    "Function",
    "FunctionMaker",
    "In",
    "MissingInputError",
    "Mode",
    "NanGuardMode",
    "Out",
    "ProfileStats",
    "SharedVariable",
    "SymbolicInput",
    "SymbolicOutput",
    "UnusedInputError",
    "ViewOp",
    "as_op",
    "deep_copy_op",
    "function",
    "get_default_mode",
    "get_mode",
    "ops",
    "orig_function",
    "pfunc",
    "rebuild_collect_shared",
    "register_mode",
    "shared",
    "view_op",
]
