"""``function()``: compile a graph into a callable (Theano's ``theano.function``).

``function(inputs, outputs, updates=..., givens=..., mode=...)`` substitutes givens and
collects shared variables (:mod:`opgraph.compile.pfunc`), then a :class:`FunctionMaker`
(:mod:`opgraph.compile.function_module`) clones the graph into a FunctionGraph, rewrites
and links it, and the resulting :class:`Function` is what the caller gets.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Sequence
from typing import Any

from opgraph.compile.function_module import Function, FunctionMaker, UnusedInputError, orig_function
from opgraph.compile.io import In
from opgraph.compile.mode import Mode, get_mode
from opgraph.compile.pfunc import pfunc
from opgraph.compile.profiling import ProfileStats
from opgraph.configdefaults import config
from opgraph.graph.basic import Variable, set_eval_compiler
from opgraph.graph.fg import MissingInputError
from opgraph.graph.traversal import ancestors
from opgraph.graph.utils import user_frames

__all__ = [
    "Function",
    "FunctionMaker",
    "MissingInputError",
    "UnusedInputError",
    "function",
    "function_dump",
    "orig_function",
]


def _caller_name() -> str | None:
    frames = user_frames(1, skip=3)
    return f"{frames[0][0]}:{frames[0][1]}" if frames else None


def function(
    inputs: Sequence[Variable | In],
    outputs: Any = None,
    mode: Mode | str | None = None,
    updates: Any = None,
    givens: Any = None,
    no_default_updates: bool | Sequence[Variable] = False,
    accept_inplace: bool = False,
    name: str | None = None,
    rebuild_strict: bool = True,
    allow_input_downcast: bool | None = None,
    profile: Any = None,
    on_unused_input: str | None = None,
    trust_input: bool = False,
) -> Function:
    """Compile a callable computing ``outputs`` from ``inputs`` (Theano's ``theano.function``).

    Parameters
    ----------
    inputs
        The arguments, in order: Variables or :class:`~opgraph.compile.io.In` specs.
    outputs
        A Variable (the call returns a value), a list (returns a list), a dict (returns a
        dict), :class:`~opgraph.compile.io.Out` specs, or None (returns None).
    mode
        A Mode or a mode name (``"FAST_RUN"``, ``"FAST_COMPILE"``, ``"DEBUG_MODE"``,
        ``"PROFILE_MODE"``, ...); None means ``config.mode``.
    updates
        ``(shared_variable, new_value_expression)`` pairs (or a dict), applied after the
        outputs are computed, all together: if anything fails, no shared variable changes.
    givens
        ``(variable, replacement)`` pairs substituted in the graph before compiling.
    no_default_updates
        True, or a list of shared variables whose ``default_update`` is not applied.
    accept_inplace
        Allow Ops that overwrite their inputs in the user's graph.
    name
        The function's name in messages and profiles (default: ``file:line`` of the call).
    rebuild_strict
        A given must have the type of the variable it replaces.
    allow_input_downcast
        Allow lossy conversions of the arguments (float64 to float32).
    profile
        True, a message string, or a ProfileStats to accumulate into.
    on_unused_input
        ``"raise"``, ``"warn"`` or ``"ignore"`` for inputs the outputs do not need
        (default ``config.on_unused_input``).
    trust_input
        Store the arguments without checking them (fastest; wrong values crash or give
        wrong results).

    Returns
    -------
    Function
    """
    t0 = time.perf_counter()
    if not isinstance(inputs, list | tuple):
        raise TypeError(
            "Input variables of a function should be contained in a list, even when there is "
            f"a single input; got {inputs!r}.\nHINT: function([x], ...)."
        )
    if name is None:
        name = _caller_name()
    output_keys = None
    if isinstance(outputs, dict):
        if not all(isinstance(k, str) for k in outputs):
            raise TypeError("When outputs is a dict, its keys must be strings")
        output_keys = sorted(outputs)
        outputs = [outputs[k] for k in output_keys]
    mode = get_mode(mode)
    if profile is None:
        profile = bool(config.profile) or mode.profile
    if profile is True or isinstance(profile, str):
        message = profile if isinstance(profile, str) else name
        profile = ProfileStats(atexit_print=bool(config.profile), message=message)
    elif profile is False:
        profile = None
    fn = pfunc(
        params=list(inputs),
        outputs=outputs,
        mode=mode,
        updates=updates,
        givens=givens,
        no_default_updates=no_default_updates,
        accept_inplace=accept_inplace,
        name=name,
        rebuild_strict=rebuild_strict,
        allow_input_downcast=allow_input_downcast,
        profile=profile,
        on_unused_input=on_unused_input,
        output_keys=output_keys,
    )
    fn.trust_input = trust_input
    if profile is not None:
        profile.compile_time += time.perf_counter() - t0
    return fn


# Variable.eval() compiles with function(): the graph layer below cannot import it.
set_eval_compiler(function)


def function_dump(
    filename: str,
    inputs: Sequence[Variable | In],
    outputs: Any = None,
    mode: Mode | str | None = None,
    updates: Any = None,
    givens: Any = None,
    no_default_updates: bool | Sequence[Variable] = False,
    accept_inplace: bool = False,
    name: str | None = None,
    rebuild_strict: bool = True,
    allow_input_downcast: bool | None = None,
    profile: Any = None,
    on_unused_input: str | None = None,
    extra_tag_to_remove: Sequence[str] | None = None,
) -> None:
    """Pickle the arguments of a :func:`function` call to ``filename`` instead of compiling
    (Theano's ``function_dump``): to reproduce a compilation elsewhere, load the file and
    call ``function(**pickle.load(f))``. Creation traces (``tag.trace``) and the tags named
    in ``extra_tag_to_remove`` are left out of the pickle, as Theano's StripPickler does.
    """
    if not isinstance(filename, str):
        raise TypeError(f"function_dump: filename must be a str, got {filename!r}")
    d = dict(
        inputs=inputs,
        outputs=outputs,
        mode=mode,
        updates=updates,
        givens=givens,
        no_default_updates=no_default_updates,
        accept_inplace=accept_inplace,
        name=name,
        rebuild_strict=rebuild_strict,
        allow_input_downcast=allow_input_downcast,
        profile=profile,
        on_unused_input=on_unused_input,
    )
    strip = ("trace", *(extra_tag_to_remove or ()))
    roots = [getattr(i, "variable", i) for i in inputs]
    outs = outputs if isinstance(outputs, list | tuple) else [outputs]
    roots += [getattr(o, "variable", o) for o in outs if o is not None]
    removed: list[tuple[Any, str, Any]] = []
    try:
        for var in ancestors([r for r in roots if isinstance(r, Variable)]):
            for tag_name in strip:
                if hasattr(var.tag, tag_name):
                    removed.append((var.tag, tag_name, getattr(var.tag, tag_name)))
                    delattr(var.tag, tag_name)
        with open(filename, "wb") as f:
            pickle.dump(d, f, protocol=pickle.HIGHEST_PROTOCOL)
    finally:
        for tag, tag_name, value in removed:
            setattr(tag, tag_name, value)
