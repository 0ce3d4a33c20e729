"""``function()``: compile a graph into a callable, and the compiled ``Function`` itself.

``function(inputs, outputs, updates=..., givens=..., mode=...)`` substitutes givens and
collects shared variables (:mod:`opgraph.compile.pfunc`), then a :class:`FunctionMaker`
clones the graph into a FunctionGraph, runs the mode's rewrites, protects outputs from
aliasing (:func:`~opgraph.compile.ops.insert_deepcopy`) and asks the mode's linker for a
VM. :class:`Function` feeds the VM: it converts each argument through its input's Type,
runs the VM (which applies the updates), and returns the outputs.
"""

from __future__ import annotations

import copy as _copy
import threading
import time
from collections.abc import Sequence
from typing import Any

from opgraph.compile.io import In, SymbolicOutput
from opgraph.compile.mode import Mode, get_mode
from opgraph.compile.pfunc import FunctionMaker, UnusedInputError, orig_function, pfunc
from opgraph.graph.basic import Variable
from opgraph.graph.clone import clone_get_equiv
from opgraph.graph.fg import FunctionGraph, MissingInputError
from opgraph.graph.utils import user_frames
from opgraph.link.basic import Container
from opgraph.link.utils import describe_value
from opgraph.link.vm import VM, CallPlan

__all__ = [
    "Function",
    "FunctionMaker",
    "MissingInputError",
    "UnusedInputError",
    "function",
    "orig_function",
]


def _config() -> Any:
    from opgraph.configdefaults import config

    return config


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
        profile = bool(_config().profile) or mode.profile
    if profile is True or isinstance(profile, str):
        from opgraph.compile.profiling import ProfileStats

        message = profile if isinstance(profile, str) else name
        profile = ProfileStats(atexit_print=bool(_config().profile), message=message)
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


class _Slot:
    """How one explicit argument is stored: its cell, Type filter and default."""

    __slots__ = (
        "allow_downcast",
        "cell",
        "default",
        "filter",
        "index",
        "name",
        "stateful",
        "strict",
        "type",
    )

    def __init__(self, index: int, spec: In, cell: list[Any], default: Container | None) -> None:
        self.index = index
        self.name = spec.name
        self.type = spec.variable.type
        self.filter = self.type.filter
        self.strict = spec.strict
        self.allow_downcast = spec.allow_downcast
        self.cell = cell
        self.default = default
        # A default with an update keeps state: the cell is the default's own storage.
        self.stateful = default is not None and default.storage is cell


class Function:
    """A compiled function: call it with values for its inputs (Theano's ``Function``).

    Arguments are positional, in the order of the ``inputs`` given to ``function()``, or by
    keyword (the inputs' names); inputs with a default may be left out. Each argument is
    converted by its input's Type unless ``trust_input`` is set.

    When the VM's :meth:`~opgraph.link.vm.VM.make_caller` returns a compiled caller
    (backend-c's does), calls go through it: it does the common call (one positional
    argument per input) in C and hands anything else to the Python path. Calls of one
    function from several threads run one after the other; a function calling itself
    raises RuntimeError.

    Attributes
    ----------
    maker
        The :class:`FunctionMaker` (``maker.fgraph`` is the rewritten graph).
    fn
        The VM running the graph; ``fn(n_calls=N)`` runs it N times without arguments.
    trust_input
        Skip argument checks and conversions (faster; the caller guarantees the types).
    profile
        The ProfileStats collecting this function's timings, or None.
    input_storage, output_storage
        Containers of the graph's inputs (shared ones included) and outputs.
    """

    def __init__(
        self,
        maker: FunctionMaker,
        fn: Any,
        input_cells: list[list[Any]],
        output_containers: list[Container],
        defaults: list[Container | None],
    ) -> None:
        self.maker = maker
        self.fn = fn
        self.name = maker.name
        self._caller: Any = None
        self._fast: Any = None
        self._trust_input = False
        self._lock = threading.Lock()
        self._owner: int | None = None
        self.input_storage = [
            d if d is not None and d.storage is cell else Container(spec.variable, cell)
            for spec, cell, d in zip(maker.inputs, input_cells, defaults)
        ]
        self.output_storage = output_containers
        explicit = [(k, s) for k, s in enumerate(maker.inputs) if not s.implicit]
        self._slots = [
            _Slot(i, s, input_cells[k], defaults[k]) for i, (k, s) in enumerate(explicit)
        ]
        self._cells = [slot.cell for slot in self._slots]
        self._clear_in = [slot.cell for slot in self._slots if not slot.stateful]
        self._names: dict[str, int | None] = {}
        for slot in self._slots:
            if slot.name is not None:
                self._names[slot.name] = None if slot.name in self._names else slot.index
        n_out = len(maker.outputs)
        self._out_cells = [c.storage for c in output_containers[:n_out]]
        gc = getattr(fn, "allow_gc", False)
        owned = [v.owner is not None for v in maker.fgraph.outputs[:n_out]]
        self._clear_out = [c for c, o in zip(self._out_cells, owned) if o] if gc else []
        self._need_updates = getattr(fn, "need_update_inputs", True)
        self._single = maker.unpack_single
        self._return_none = maker.return_none
        self._output_keys = maker.output_keys
        # A VM without updates is run directly (skipping VM.__call__'s update step).
        self._run = fn.run if isinstance(fn, VM) and not fn.updates else fn
        # f[name] / f[variable]: an input's default (or shared) container.
        holders = [d or c for d, c in zip(defaults, self.input_storage)]
        self._finder: dict[Any, Container] = {s.variable: c for s, c in zip(maker.inputs, holders)}
        self._finder.update({s.name: c for s, c in zip(maker.inputs, holders) if s.name})
        if isinstance(fn, VM):
            self._caller = fn.make_caller(
                CallPlan(
                    inputs=[(s.cell, s.type, s.strict, s.allow_downcast) for s in self._slots],
                    outputs=self._out_cells,
                    clear_in=self._clear_in,
                    clear_out=self._clear_out,
                    unpack_single=self._single,
                    return_none=self._return_none,
                    output_keys=self._output_keys,
                    fallback=self._call,
                    input_error=self._input_error_at,
                    label=self._label(),
                )
            )
        self.profile = maker.profile

    # ------------------------------------------------------------------ settings

    @property
    def trust_input(self) -> bool:
        """Store the arguments without checking or converting them (fastest)."""
        return self._trust_input

    @trust_input.setter
    def trust_input(self, value: bool) -> None:
        self._trust_input = bool(value)
        if self._caller is not None:
            self._caller.trust_input = self._trust_input

    @property
    def profile(self) -> Any:
        """The ProfileStats timing the calls, or None (calls then take the compiled path)."""
        return self._profile

    @profile.setter
    def profile(self, value: Any) -> None:
        self._profile = value
        caller = self._caller if value is None else None
        self._fast = getattr(caller, "call", caller)

    # ------------------------------------------------------------------ calling

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the function: positional arguments in input order, or by input name."""
        fast = self._fast
        if fast is not None:
            return fast(args, kwargs)
        lock = self._lock
        if not lock.acquire(False):
            self._wait_for(lock)
        self._owner = threading.get_ident()
        try:
            return self._call(args, kwargs)
        finally:
            self._owner = None
            lock.release()

    def _wait_for(self, lock: threading.Lock) -> None:
        """Wait for another thread's call to finish; a call from inside this one raises."""
        if self._owner == threading.get_ident():
            raise RuntimeError(
                f"{self._label()} was called while it is already running in the same "
                "thread (from inside one of its own nodes); a function cannot call itself."
                "\nHINT: call a copy of it instead (f.copy())."
            )
        lock.acquire()

    def _call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """One call, in Python: every argument form, defaults, profiling.

        The argument cells are emptied after the call, the output cells too when it fails.
        """
        profile = self.profile
        if profile is not None:
            t0 = time.perf_counter()
        n = len(args)
        if n > len(self._slots):
            raise self._arity_error(n)
        try:
            try:
                self._store(args, kwargs)
                if profile is not None:
                    t1 = time.perf_counter()
                    self._run()
                    profile.vm_call_time += time.perf_counter() - t1
                else:
                    self._run()
            finally:
                for cell in self._clear_in:
                    cell[0] = None
            if self._single:
                outputs = self._out_cells[0][0]
            else:
                outputs = [cell[0] for cell in self._out_cells]
            if self._need_updates:
                self._apply_updates()
        except BaseException:
            for cell in self._clear_out:
                cell[0] = None
            raise
        for cell in self._clear_out:
            cell[0] = None
        if profile is not None:
            self._record_call(profile, t0)
        if self._output_keys is not None:
            return dict(zip(self._output_keys, outputs))
        return None if self._return_none else outputs

    def _store(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Put the arguments (converted unless ``trust_input``) and defaults in the cells."""
        n = len(args)
        if self.trust_input:
            for cell, arg in zip(self._cells, args):
                cell[0] = arg
        else:
            for slot, arg in zip(self._slots, args):
                try:
                    slot.cell[0] = slot.filter(arg, slot.strict, slot.allow_downcast)
                except (TypeError, ValueError) as exc:
                    raise self._input_error(slot, arg, exc) from exc
        if kwargs or n < len(self._slots):
            self._fill_rest(n, kwargs)

    def _record_call(self, profile: Any, t0: float) -> None:
        profile.fct_callcount += 1
        profile.fct_call_time += time.perf_counter() - t0
        update_profile = getattr(self.fn, "update_profile", None)
        if update_profile is not None:
            update_profile(profile)

    def _fill_rest(self, n: int, kwargs: dict[str, Any]) -> None:
        given = set(range(n))
        for key, arg in kwargs.items():
            i = self._names.get(key, -1)
            if i == -1:
                names = [s.name for s in self._slots]
                raise TypeError(
                    f"{self._label()} got an unexpected keyword argument {key!r}; its inputs "
                    f"are named {names}."
                )
            if i is None:
                raise TypeError(
                    f"{self._label()}: several inputs are named {key!r}, so it cannot be "
                    "passed by keyword.\nHINT: pass it positionally, or give the inputs "
                    "distinct names."
                )
            if i in given:
                raise TypeError(f"{self._label()} got multiple values for input {key!r}")
            slot = self._slots[i]
            try:
                slot.cell[0] = slot.filter(arg, slot.strict, slot.allow_downcast)
            except (TypeError, ValueError) as exc:
                raise self._input_error(slot, arg, exc) from exc
            given.add(i)
        for slot in self._slots[n:]:
            if slot.index in given or slot.stateful:
                continue
            if slot.default is None:
                raise TypeError(
                    f"{self._label()} is missing a value for input {slot.index} "
                    f"({slot.name!r}), which has no default.\nHINT: pass it positionally or "
                    f"by keyword, or give it a default with In(variable, value=...)."
                )
            slot.cell[0] = slot.default.storage[0]

    def _apply_updates(self) -> None:
        """Updates for a VM that does not apply them itself (all or none)."""
        fg = self.maker.fgraph
        pairs = sorted((fg.update_mapping or {}).items())
        cells = self.output_storage
        new = [fg.inputs[i].type.filter(cells[o].storage[0]) for o, i in pairs]
        for (_o, i), value in zip(pairs, new):
            self.input_storage[i].storage[0] = value

    def _label(self) -> str:
        return f"function {self.name!r}" if self.name else "the function"

    def _arity_error(self, n: int) -> TypeError:
        names = [s.name for s in self._slots]
        return TypeError(
            f"{self._label()} takes {len(self._slots)} argument(s) {names}, but {n} were given."
        )

    def _input_error_at(self, index: int, arg: Any, exc: BaseException) -> BaseException:
        """The error for explicit input ``index`` rejecting ``arg`` (for compiled callers)."""
        return self._input_error(self._slots[index], arg, exc)

    def _input_error(self, slot: _Slot, arg: Any, exc: BaseException) -> BaseException:
        detail = str(exc)
        msg = (
            f"input {slot.index} ({slot.name!r}) of {self._label()} expects {slot.type}, "
            f"got {describe_value(arg)}.\n{detail}"
        )
        if "HINT:" not in detail:
            want = getattr(slot.type, "dtype", None)
            got = getattr(arg, "dtype", None)
            if want is not None and got is not None and str(got) != str(want):
                msg += (
                    f"\nHINT: cast it with {slot.name or 'x'}.astype('{want}'), or pass "
                    "allow_input_downcast=True to function()."
                )
            else:
                msg += f"\nHINT: pass a value that {slot.type} accepts."
        return type(exc)(msg) if type(exc) in (TypeError, ValueError) else TypeError(msg)

    # ------------------------------------------------------------------ defaults

    def __getitem__(self, key: Any) -> Any:
        """The stored default (or shared) value of an input, by name or variable."""
        return self._container(key).storage[0]

    def __setitem__(self, key: Any, value: Any) -> None:
        """Set the default (or shared) value of an input, by name or variable."""
        self._container(key).value = value

    def _container(self, key: Any) -> Container:
        try:
            return self._finder[key]
        except (KeyError, TypeError):
            raise KeyError(f"{self._label()} has no input {key!r}") from None

    def get_shared(self) -> list[Variable]:
        """The shared variables this function reads or updates."""
        return [s.variable for s in self.maker.inputs if getattr(s, "shared", False)]

    # ------------------------------------------------------------------ memory, copies

    def free(self) -> None:
        """Release the intermediate results kept between calls (``allow_gc=False``)."""
        clear = getattr(self.fn, "clear_storage", None)
        if clear is not None:
            clear()
        for cell in self._clear_in:
            cell[0] = None

    def copy(
        self,
        share_memory: bool = False,
        swap: dict[Variable, Variable] | None = None,
        delete_updates: bool = False,
        name: str | None = None,
        profile: Any = None,
    ) -> Function:
        """A copy of this function (Theano's ``Function.copy``).

        Parameters
        ----------
        share_memory
            Share the intermediate storage with this function.
        swap
            ``{old_shared: new_shared}``: the copy uses ``new_shared`` instead (same type).
        delete_updates
            The copy applies no updates.
        name
            The copy's name (default: this name + ``" copy"``).
        profile
            A ProfileStats (or True) for the copy.
        """
        maker = self.maker
        swap = dict(swap or {})
        shared_vars = {s.variable for s in maker.inputs if getattr(s, "shared", False)}
        for old, new in swap.items():
            if old not in shared_vars:
                raise ValueError(f"swap: {old} is not a shared variable of {self._label()}")
            if getattr(new, "container", None) is None or new.type != old.type:
                raise TypeError(
                    f"swap: {old} (type {old.type}) must be replaced by a shared variable of "
                    f"the same type, got {new!r}"
                )
        fg = maker.fgraph
        n_out = len(maker.outputs)
        out_vars = fg.outputs[:n_out] if delete_updates else fg.outputs
        memo = clone_get_equiv(fg.inputs, out_vars, copy_inputs=True, copy_orphans=True)
        mapping = {} if delete_updates else dict(fg.update_mapping or {})
        fg_cpy = FunctionGraph(
            [memo[i] for i in fg.inputs],
            [memo[o] for o in out_vars],
            clone=False,
            update_mapping=mapping,
        )
        ins = []
        for spec in maker.inputs:
            spec = _copy.copy(spec)
            if delete_updates:
                spec.update = None
            if spec.variable in swap:
                spec.variable = swap[spec.variable]
                spec.value = spec.variable.container
            ins.append(spec)
        outs = [SymbolicOutput(v, o.borrow) for v, o in zip(fg_cpy.outputs, maker.outputs)]
        storage_map = None
        if share_memory:
            io_vars = set(fg.inputs) | set(fg.outputs)
            smap = getattr(self.fn, "storage_map", {})
            storage_map = {memo[v]: c for v, c in smap.items() if v not in io_vars and v in memo}
        if profile is True:
            from opgraph.compile.profiling import ProfileStats

            profile = ProfileStats(message=name)
        new_maker = FunctionMaker(
            ins,
            None if maker.return_none else outs[0] if maker.unpack_single else outs,
            mode=maker.mode,
            accept_inplace=maker.accept_inplace,
            function_builder=maker.function_builder,
            profile=profile,
            on_unused_input=maker.on_unused_input,
            fgraph=fg_cpy,
            output_keys=maker.output_keys,
            name=name or (f"{self.name} copy" if self.name else None),
        )
        defaults = [_default_of(s, slot_default) for s, slot_default in zip(ins, self._defaults())]
        f_cpy = new_maker.create(defaults, storage_map=storage_map)
        f_cpy.trust_input = self.trust_input
        return f_cpy

    def _defaults(self) -> list[Any]:
        """Per input: its current default or shared Container (None if it has none)."""
        slots = iter(self._slots)
        return [s.value if s.implicit else next(slots).default for s in self.maker.inputs]

    def __copy__(self) -> Function:
        return self.copy()

    def __reduce__(self) -> Any:
        values = [
            None if d is None or getattr(s, "shared", False) else d.storage[0]
            for s, d in zip(self.maker.inputs, self._defaults())
        ]
        return (_constructor_Function, (self.maker, values, self.trust_input))

    def __repr__(self) -> str:
        return f"<opgraph Function {self.name or ''}>".replace(" >", ">")


def _default_of(spec: Any, current: Any) -> Any:
    """What a copy gets for an input: the shared container, else a fresh default value."""
    if getattr(spec, "shared", False) or (isinstance(spec.value, Container) and spec.implicit):
        return spec.value
    if isinstance(current, Container):
        return _copy.deepcopy(current.storage[0])
    return spec.value


def _constructor_Function(maker: FunctionMaker, values: list[Any], trust_input: bool) -> Function:
    """Rebuild a pickled Function: link its maker, restore the defaults' values."""
    defaults = [spec.value if v is None else v for spec, v in zip(maker.inputs, values)]
    f = maker.create(defaults)
    f.trust_input = trust_input
    return f
