"""Core's config flags (Theano's names and meanings) and the global ``config`` object.

Plugins declare their own flags through the ``opgraph_add_config`` hook; after they
have, ``opgraph`` calls ``config.check_unknown_flags()``. This module imports nothing
else from opgraph, so reading a flag stays cheap.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from opgraph.configparser import (
    BoolParam,
    ChangeFlags,
    Config,
    DeviceParam,
    EnumStr,
    FloatParam,
    IntParam,
    PathParam,
    StrParam,
    set_global_config,
)

__all__ = ["THEANO_MODES", "add_core_flags", "change_flags", "config"]

#: Mode names Theano documented; plugins may register more, so ``mode`` only
#: checks the shape of the name and the compile layer checks that it exists.
THEANO_MODES = (
    "Mode",
    "FAST_RUN",
    "FAST_COMPILE",
    "DEBUG_MODE",
    "DebugMode",
    "PROFILE_MODE",
    "NanGuardMode",
)


def _default_compiledir() -> str:
    """``$OPGRAPH_CACHE_DIR`` if set, else the user's cache dir (e.g. ~/.cache/opgraph)."""
    env = os.environ.get("OPGRAPH_CACHE_DIR")
    if env:
        return env
    import platformdirs

    return platformdirs.user_cache_dir("opgraph")


def _is_linker_name(value: str) -> bool:
    """Linker names look like ``py``, ``cvm``, ``c|py``, ``vm_nogc``, ``auto``."""
    return bool(value) and all(c.isalnum() or c in "_|.-" for c in value)


def _is_rseed(value: str) -> bool:
    return value == "random" or value.isdigit()


def add_core_flags(config: Config) -> None:
    """Declare core's flags on ``config`` (tests call it on a fresh Config)."""
    add = config.add

    # -- dtypes and devices (change generated code, so they key the compile cache)
    add(
        "floatX",
        "Default float dtype of tensor.matrix() etc. and of float Python constants.",
        EnumStr("float64", ["float32", "float16"]),
    )
    add(
        "cast_policy",
        "How mixed-dtype operations pick their output dtype: Theano's rules or NumPy's.",
        EnumStr("custom", ["numpy+floatX"]),
    )
    add(
        "device",
        "Where shared variables and computations live: cpu, or a GPU (cuda, cuda0, ...) "
        "through opgraph-backend-cuda. Cannot change once read.",
        DeviceParam("cpu", mutable=False),
    )
    add(
        "deterministic",
        "'more' avoids faster ops whose results may vary between runs (atomic adds on GPU).",
        EnumStr("default", ["more"]),
    )

    # -- compilation: mode, linker, rewrites
    add(
        "mode",
        "Default compilation mode of function(): " + ", ".join(THEANO_MODES) + ", or one "
        "that a plugin registers.",
        StrParam(
            "Mode",
            str.isidentifier,
            valid_desc="Expected a mode name such as " + ", ".join(THEANO_MODES) + ".",
        ),
    )
    add(
        "linker",
        "Default linker; 'auto' picks the best installed (c if opgraph-backend-c is "
        "installed, else py). Names are checked by the linker registry.",
        StrParam(
            "auto",
            _is_linker_name,
            valid_desc="Expected a linker name such as auto, py, c, cvm.",
        ),
    )
    add(
        "optimizer",
        "Default set of graph rewrites: 'None' applies none, 'merge' only merges.",
        EnumStr("fast_run", ["merge", "fast_compile", "None", "unsafe", "stabilize"]),
    )
    for verb in ("including", "excluding", "requiring"):
        add(
            f"optimizer_{verb}",
            f"Colon-separated rewrite tags or names the default mode's query is {verb}.",
            StrParam(""),
        )
    add(
        "on_opt_error",
        "What to do when a rewrite raises: warn and skip it, raise, drop into pdb, or ignore.",
        EnumStr("warn", ["raise", "pdb", "ignore"]),
    )
    add(
        "optimizer_verbose",
        "Print each replacement a rewrite makes (which rewrite, what it replaced).",
        BoolParam(False),
    )
    add(
        "optdb__max_use_ratio",
        "An equilibrium rewriter stops after max_use_ratio * number-of-nodes applications.",
        FloatParam(8.0),
    )
    add(
        "compiledir",
        "Directory of the compile cache. Default: $OPGRAPH_CACHE_DIR, else the user cache dir.",
        PathParam(_default_compiledir),
    )

    # -- running functions
    add(
        "allow_gc",
        "Free intermediate results as soon as their last client ran (less memory, "
        "slightly slower).",
        BoolParam(True),
    )
    add(
        "on_unused_input",
        "What function() does with an input that the outputs do not depend on.",
        EnumStr("raise", ["warn", "ignore"]),
    )
    add(
        "warn_float64",
        "What to do when a float64 variable is created (to catch accidental upcasts).",
        EnumStr("ignore", ["warn", "raise", "pdb"]),
    )
    add(
        "compute_test_value",
        "Compute test values (var.tag.test_value) while building the graph, to find "
        "shape errors at the line that causes them.",
        EnumStr("off", ["ignore", "warn", "raise", "pdb"]),
    )

    # -- profiling and error reports
    add(
        "profile",
        "Profile every compiled function (time per Op).",
        BoolParam(False),
    )
    add(
        "profile_optimizer",
        "Also profile the rewrites run while compiling.",
        BoolParam(False),
    )
    add(
        "print_global_stats",
        "Print a summary of compile and run times at exit.",
        BoolParam(False),
    )
    add(
        "exception_verbosity",
        "'high' adds a debugprint of the failing node's inputs to runtime errors.",
        EnumStr("low", ["high"]),
    )
    add(
        "traceback__limit",
        "Stack frames kept where each node is created (-1 keeps all).",
        IntParam(8),
    )
    add(
        "traceback__compile_limit",
        "Stack frames kept for nodes created during compilation (0 keeps none).",
        IntParam(0),
    )
    add(
        "unittests__rseed",
        "Seed of the test suite's random generators: an integer, or 'random'.",
        StrParam("666", _is_rseed, valid_desc="Expected an integer or 'random'."),
    )

    # -- DebugMode and NanGuardMode
    for check, what in (
        ("check_c", "compiled (C) implementations against perform"),
        ("check_py", "Python perform implementations"),
        ("check_finite", "that outputs contain no NaN or inf"),
    ):
        add(
            f"DebugMode__{check}",
            f"DebugMode checks {what}.",
            BoolParam(True),
        )
    for kind, default, what in (
        ("nan", True, "a NaN"),
        ("inf", True, "an inf"),
        ("big", False, "a very large value"),
    ):
        add(
            f"NanGuardMode__{kind}_is_error",
            f"NanGuardMode raises when a node outputs {what}.",
            BoolParam(default),
        )


def change_flags(*args: Mapping[str, Any], **kwargs: Any) -> ChangeFlags:
    """Temporarily change flags of the global ``config`` (context manager or decorator)."""
    return config.change_flags(*args, **kwargs)


config = Config.from_environment()
add_core_flags(config)
set_global_config(config)
