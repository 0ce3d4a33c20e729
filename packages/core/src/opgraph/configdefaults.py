"""Core's config flags (Theano's names and meanings) and the global ``config`` object.

Plugins declare their own flags through the ``opgraph_add_config`` hook; after they
have, ``opgraph`` calls ``config.check_unknown_flags()``. This module imports nothing
else from opgraph, so reading a flag stays cheap.
"""

from __future__ import annotations

import functools
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

__all__ = [
    "AUTO_LINKER_MEANING",
    "THEANO_MODES",
    "add_core_flags",
    "add_theano_flags",
    "change_flags",
    "config",
]

#: What ``linker=auto`` means, in the words every place that explains it uses: this flag's
#: help, ``python -m opgraph plugins`` and the repr of a Mode using it
#: (:func:`opgraph.compile.mode.describe_linker` adds what it resolves to here).
AUTO_LINKER_MEANING = (
    "auto is the installed linker the plugins rank highest: cvm (CLinker: C kernels, "
    "perform where a node has none; c and c|py are the same linker) when opgraph-backend-c "
    "is installed, else vm (VMLinker: the Python VM running each node's perform)"
)

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
        f"Default linker; {AUTO_LINKER_MEANING}. `python -m opgraph plugins` shows what it "
        "is here. Names are checked by the linker registry.",
        StrParam(
            "auto",
            _is_linker_name,
            valid_desc="Expected a linker name such as auto, py, c, cvm.",
        ),
    )
    add(
        "optimizer",
        "Default set of graph rewrites: 'None' applies none, 'merge' only merges.",
        EnumStr("fast_run", ["merge", "fast_compile", "None", "unsafe", "stabilize", "o4"]),
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
        "base_compiledir",
        "Root of the compile cache (Theano's name): the default of compiledir. Default: "
        "$OPGRAPH_CACHE_DIR, else the user cache dir.",
        PathParam(_default_compiledir),
    )
    add(
        "compiledir",
        "Directory of the compile cache. Default: base_compiledir (opgraph keys its cache "
        "entries by platform itself, so it adds no compiledir_<platform> level).",
        PathParam(lambda: config.base_compiledir),
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
    add(
        "compute_test_value_opt",
        "The compute_test_value used while rewrites run during compilation.",
        EnumStr("off", ["ignore", "warn", "raise", "pdb"]),
    )
    add(
        "print_test_value",
        "repr() of a variable and debugprint also show its test value, when it has one.",
        BoolParam(False),
    )
    add(
        "pickle_test_value",
        "Pickle a variable's test value with it (False drops it from the pickle).",
        BoolParam(True),
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

    add_theano_flags(config)


#: ``warn.ignore_bug_before``'s values: Theano 1.0's release numbers.
_THEANO_VERSIONS = ["0.3", "0.4", "0.4.1", "0.5", "0.6", "0.7", "0.8", "0.8.1", "0.8.2", "0.9"]
_THEANO_VERSIONS += ["0.10", "1.0", "1.0.1", "1.0.2", "1.0.3", "1.0.4", "1.0.5"]

#: ``warn.<name>``: (Theano version that fixed the bug, what it was).
_WARN_FLAGS = {
    "argmax_pushdown_bug": ("0.3", "argmax pushed down through a softmax"),
    "gpusum_01_011_0111_bug": ("0.3", "GPU sums over patterns 01, 011 and 0111"),
    "sum_sum_bug": ("0.3", "sum(sum(x, axis=a), axis=b) merged wrongly"),
    "sum_div_dimshuffle_bug": ("0.3", "sum(a / dimshuffle{...}(b), axis=l) rewrite"),
    "subtensor_merge_bug": ("0.5", "x[a:b:-1][c] with a negative stride"),
    "gpu_set_subtensor1": ("0.6", "set_subtensor(x[int vector], v) moved to the GPU"),
    "signal_conv2d_interface": ("0.7", "signal.conv2d's interface change"),
    "reduce_join": ("0.7", "a reduction of join along the joined axis"),
    "inc_set_subtensor1": ("0.7", "inc/set_subtensor with a vector index on GPU"),
    "round": ("0.9", "tensor.round's rounding mode (now half away from zero)"),
    "inc_subtensor1_opt": ("0.10", "inc_subtensor(zeros[idx], x)[idx] with duplicate idx"),
    "identify_1pexp_bug": ("0.4.1", "the is_1pexp helper of the softplus rewrites"),
}


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _warn_default(config: Config, fixed_in: str) -> bool:
    """Theano's ``warn_default``: warn about a bug fixed in ``fixed_in`` unless
    ``warn.ignore_bug_before`` is at least that version ('None' warns always, 'all' never)."""
    before = config.warn__ignore_bug_before
    if before == "None":
        return True
    if before == "all":
        return False
    return _version_tuple(before) < _version_tuple(fixed_in)


def _default_cxx() -> str:
    import shutil

    return shutil.which("g++") or ""


_NO_EFFECT = " Accepted for Theano compatibility; opgraph does not use it."
_SETERR = ["ignore", "warn", "raise", "call", "print", "log"]

#: Theano 1.0 flags opgraph accepts (so job files keep working) with Theano's defaults, and
#: what Theano did with each. opgraph does not read them (see ``_NO_EFFECT``): its C backend
#: has its own ``c.*`` flags, and the GPU ones belong to opgraph-backend-cuda.
_THEANO_ONLY_FLAGS: list[tuple[str, Any, str]] = [
    ("cxx", StrParam(_default_cxx), "The C++ compiler Theano built its C code with."),
    ("gcc__cxxflags", StrParam(""), "Extra flags for Theano's C++ compiler."),
    (
        "compiledir_format",
        StrParam(
            "compiledir_%(short_platform)s-%(processor)s-%(python_version)s-%(python_bitwidth)s"
        ),
        "Name of the subdirectory of base_compiledir.",
    ),
    ("nocleanup", BoolParam(False), "Keep temporary C build files."),
    (
        "cmodule__age_thresh_use",
        IntParam(60 * 60 * 24 * 24),
        "Seconds before unused C modules are deleted from the cache.",
    ),
    ("cmodule__compilation_warning", BoolParam(False), "Print C compiler warnings."),
    ("cmodule__debug", BoolParam(False), "Debug the C module cache."),
    ("cmodule__preload_cache", BoolParam(False), "Load the whole C cache at start-up."),
    ("cmodule__remove_gxx_opt", BoolParam(False), "Build C modules without -O3."),
    ("cmodule__warn_no_version", BoolParam(False), "Warn about Ops without a C version."),
    ("compile__timeout", IntParam(120), "Seconds before the compile lock is taken over."),
    ("compile__wait", IntParam(5), "Seconds between tries to take the compile lock."),
    ("check_input", BoolParam(True), "Check input types and shapes in generated C code."),
    ("blas__ldflags", StrParam(""), "Link flags for the BLAS library of Theano's C code."),
    ("blas__check_openmp", BoolParam(True), "Check OpenMP settings of the BLAS library."),
    ("lib__amdlibm", BoolParam(False), "Use AMD's libm in C code."),
    (
        "openmp_elemwise_minsize",
        IntParam(200000),
        "Minimum size for OpenMP elementwise "
        "loops (opgraph-backend-c's flag is c.openmp_threshold).",
    ),
    ("tensor__cmp_sloppy", IntParam(0), "Relative tolerance of float comparisons."),
    ("tensor__local_elemwise_fusion", BoolParam(True), "Fuse elementwise Ops (CPU)."),
    (
        "tensor__insert_inplace_optimizer_validate_nb",
        IntParam(-1),
        "Validation batch of the in-place rewrite.",
    ),
    ("gpu__local_elemwise_fusion", BoolParam(True), "Fuse elementwise Ops (GPU)."),
    ("gpuelemwise__sync", BoolParam(True), "Synchronize after each GPU elementwise call."),
    (
        "cycle_detection",
        EnumStr("regular", ["fast"]),
        "Cycle-detection algorithm of the destroy handler.",
    ),
    ("cache_optimizations", BoolParam(False), "Cache rewritten graphs on disk."),
    (
        "check_stack_trace",
        EnumStr("off", ["log", "warn", "raise"]),
        "Check that rewrites copy stack traces.",
    ),
    ("on_shape_error", EnumStr("warn", ["raise"]), "What to do when shape inference fails."),
    (
        "int_division",
        EnumStr("int", ["raise", "floatX"]),
        "Python 2's `/` of two integer tensors (Python 3's `/` always divides truly).",
    ),
    ("optdb__position_cutoff", FloatParam(float("inf")), "Skip rewrites past this position."),
    ("metaopt__verbose", IntParam(0), "Verbosity of the meta-optimizer."),
    ("metaopt__optimizer_including", StrParam(""), "Meta-optimizer tags to include."),
    ("metaopt__optimizer_excluding", StrParam(""), "Meta-optimizer tags to exclude."),
    ("experimental__local_alloc_elemwise", BoolParam(True), "Remove alloc in elemwise."),
    ("experimental__local_alloc_elemwise_assert", BoolParam(True), "Keep its shape asserts."),
    ("experimental__unpickle_gpu_on_cpu", BoolParam(False), "Unpickle GPU arrays as NumPy."),
    ("conv__assert_shape", BoolParam(False), "Assert convolution shapes at run time."),
    ("reoptimize_unpickled_function", BoolParam(False), "Rewrite unpickled functions again."),
    ("unpickle_function", BoolParam(True), "Unpickle functions (False: return None)."),
    ("vm__lazy", EnumStr("None", ["True", "False"]), "Let the VM evaluate lazily."),
    ("profile_memory", BoolParam(False), "Profile memory use as well as time."),
    ("profiling__n_apply", IntParam(20), "Apply nodes shown in the profile."),
    ("profiling__n_ops", IntParam(20), "Ops shown in the profile."),
    ("profiling__output_line_width", IntParam(512), "Line width of the profile."),
    ("profiling__min_memory_size", IntParam(1024), "Smallest memory use shown."),
    ("profiling__min_peak_memory", BoolParam(False), "Show the minimum peak memory."),
    ("profiling__destination", StrParam("stderr"), "Where the profile is printed."),
    ("profiling__debugprint", BoolParam(False), "debugprint the profiled functions."),
    ("profiling__ignore_first_call", BoolParam(False), "Leave the first call out."),
    ("profiling__time_thunks", BoolParam(True), "Time each thunk."),
    ("DebugMode__patience", IntParam(10), "Times DebugMode re-runs a node."),
    ("DebugMode__check_strides", IntParam(0), "Check that C and Python strides agree."),
    ("DebugMode__check_preallocated_output", StrParam(""), "Preallocated output layouts to test."),
    ("DebugMode__check_preallocated_output_ndim", IntParam(4), "Their largest rank."),
    (
        "DebugMode__warn_input_not_reused",
        BoolParam(True),
        "Warn when an in-place output is not its input.",
    ),
    ("NanGuardMode__action", EnumStr("raise", ["warn", "pdb"]), "What NanGuardMode does."),
    ("init_gpu_device", StrParam(""), "GPU to initialise without moving work to it."),
    ("force_device", BoolParam(False), "Fail instead of falling back to the CPU."),
    ("print_active_device", BoolParam(True), "Print the GPU in use at start-up."),
    ("contexts", StrParam(""), "Named GPU contexts (name->dev;...)."),
    (
        "assert_no_cpu_op",
        EnumStr("ignore", ["warn", "raise", "pdb"]),
        "Complain about CPU Ops in a GPU graph.",
    ),
    (
        "numpy__seterr_all",
        EnumStr("ignore", [*_SETERR, "None"]),
        "numpy.seterr(all=...) that Theano set at import.",
    ),
] + [
    (f"numpy__seterr_{what}", EnumStr("None", _SETERR), f"numpy.seterr({what}=...) at import.")
    for what in ("divide", "over", "under", "invalid")
]


def add_theano_flags(config: Config) -> None:
    """Declare Theano 1.0's flags that core does not otherwise declare, with Theano's
    defaults: ``warn.*`` and the flags opgraph accepts without using them."""
    config.add(
        "warn__ignore_bug_before",
        "Warn only about Theano bugs fixed after this version ('None': all, 'all': none). "
        "Gives the default of every warn.* flag.",
        EnumStr("0.9", ["None", "all", *_THEANO_VERSIONS]),
    )
    for name, (fixed_in, what) in _WARN_FLAGS.items():
        config.add(
            f"warn__{name}",
            f"Warn where Theano before {fixed_in} gave wrong results: {what}. opgraph never "
            "had the bug; the flag is kept so that code setting it keeps working.",
            BoolParam(functools.partial(_warn_default, config, fixed_in)),
        )
    config.add(
        "warn__vm_gc_bug",
        "Warn about a VM garbage-collection bug of Theano's development version of 2012.",
        BoolParam(False),
    )
    for name, param, doc in _THEANO_ONLY_FLAGS:
        if name not in config:  # a plugin (loaded earlier) may declare and use it
            config.add(name, "Theano: " + doc + _NO_EFFECT, param)


def change_flags(*args: Mapping[str, Any], **kwargs: Any) -> ChangeFlags:
    """Temporarily change flags of the global ``config`` (context manager or decorator)."""
    return config.change_flags(*args, **kwargs)


config = Config.from_environment()
add_core_flags(config)
set_global_config(config)
