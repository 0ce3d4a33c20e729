"""The compiled function and its maker: ``Function`` and ``FunctionMaker`` (Theano's
``compile.function_module``).

:class:`FunctionMaker` clones the graph into a FunctionGraph, runs the mode's rewrites,
protects outputs from aliasing (:func:`~opgraph.compile.ops.insert_deepcopy`) and asks the
mode's linker for a VM. :class:`Function` feeds the VM: it converts each argument through
its input's Type, runs the VM (which applies the updates), and returns the outputs.

Calls are safe under threads and ``fork`` (see "Threads and processes" in the README): one
call of a function at a time, the update locks of the shared variables it updates held for
the whole call (:func:`~opgraph.compile.sharedvalue.update_lock`), and every such lock
re-initialised in a child forked while another thread held it. :mod:`opgraph.compile.callguard`
decides which locks a call holds and which arguments it copies first.
"""

from __future__ import annotations

import contextlib
import copy as _copy
import gc
import inspect
import os
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from opgraph.compile.callguard import (
    alias_check,
    call_signature,
    update_locks_of,
    written_positions,
)
from opgraph.compile.io import In, SymbolicInput, SymbolicOutput
from opgraph.compile.mode import Mode, compiling_with, get_mode
from opgraph.compile.ops import alias_root, insert_deepcopy
from opgraph.compile.profiling import ProfileStats
from opgraph.compile.sharedvalue import (
    INPLACE_GENERATION,
    mark_written_in_place,
    update_lock,
    written_in_place,
)
from opgraph.configdefaults import config
from opgraph.graph.basic import Variable
from opgraph.graph.clone import clone_get_equiv
from opgraph.graph.destroyhandler import Supervisor as supervisor
from opgraph.graph.destroyhandler import UpdateGuard, attach_destroy_handler
from opgraph.graph.features import InconsistencyError, PreserveVariableAttributes
from opgraph.graph.fg import FunctionGraph
from opgraph.graph.traversal import ancestors
from opgraph.link.basic import Container
from opgraph.link.utils import describe_value
from opgraph.link.vm import VM, CallPlan, hold_all, release_all
from opgraph.rewriting.provenance import rewrite_report

__all__ = [
    "Function",
    "FunctionMaker",
    "UnusedInputError",
    "orig_function",
]


class UnusedInputError(ValueError):
    """An input of function() is not needed to compute the outputs (and has no update)."""


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

    def __init__(
        self,
        index: int,
        spec: In,
        cell: list[Any],
        default: Container | None,
        filter: Callable[..., Any] | None = None,
    ) -> None:
        self.index = index
        self.name = spec.name
        self.type = spec.variable.type
        self.filter = filter or self.type.filter
        self.strict = spec.strict
        self.allow_downcast = spec.allow_downcast
        self.cell = cell
        self.default = default
        # A default with an update keeps state: the cell is the default's own storage.
        self.stateful = default is not None and default.storage is cell


class Function:
    """A compiled function: call it with values for its inputs (Theano's ``Function``).

    ``f(*args, **kwargs)`` runs ``f.__call__``, an instance slot: the compiled caller's
    ``star(*args, **kwargs)`` when the VM gives one, else :meth:`_python_call`. CPython reads
    a slot in C, so a compiled call costs no Python frame and no attribute lookup here.

    Arguments are positional, in the order of the ``inputs`` given to ``function()``, or by
    keyword (the inputs' names); inputs with a default may be left out. Each argument is
    converted by its input's Type unless ``trust_input`` is set.

    When the VM's :meth:`~opgraph.link.vm.VM.make_caller` returns a compiled caller
    (backend-c's does), calls go through it: it does the common call (one positional
    argument per input) in C and hands anything else to the Python path. Calls of one
    function from several threads run one after the other; a function calling itself
    raises RuntimeError. A call holds the update locks of the shared variables it updates
    (in a fixed order), so updates by several functions are never lost; an argument the
    graph overwrites in place that shares memory with another input is copied first.

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

    __slots__ = ("__call__", "__dict__", "__weakref__")

    def __init__(
        self,
        maker: FunctionMaker,
        fn: Any,
        input_cells: list[list[Any]],
        output_containers: list[Container],
        defaults: list[Container | None],
    ) -> None:
        self.__call__ = self._python_call
        self.maker = maker
        self.fn = fn
        self.name = maker.name
        self._caller: Any = None
        self._fast: Any = None
        self._trust_input = False
        self._lock = threading.Lock()
        self._owner: int | None = None
        _LIVE_FUNCTIONS.add(self)
        self.input_storage = [
            d if d is not None and d.storage is cell else Container(spec.variable, cell)
            for spec, cell, d in zip(maker.inputs, input_cells, defaults)
        ]
        self.output_storage = output_containers
        explicit = [(k, s) for k, s in enumerate(maker.inputs) if not s.implicit]
        input_filter = getattr(maker.linker, "input_filter", None)
        self._slots = [
            _Slot(
                i,
                s,
                input_cells[k],
                defaults[k],
                input_filter(s.variable.type) if input_filter is not None else None,
            )
            for i, (k, s) in enumerate(explicit)
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
        self._shared_defaults = defaults
        written = [defaults[k] for k in written_positions(maker)]
        if written:
            mark_written_in_place(written)
        # Shared variables only read: their update locks are taken too while some function
        # writes them in place (checked again before a call when that set grew).
        self._read_shared = [
            d
            for s, d in zip(maker.inputs, defaults)
            if getattr(s, "shared", False) and s.update is None and isinstance(d, Container)
        ]
        self._call_locks: list[Any] = []
        self._set_locks()
        self._unalias = alias_check(maker, [c.storage for c in self.input_storage])
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
            if self._update_locks or self._unalias is not None or self._read_shared:
                guard = getattr(self._caller, "guard", None)
                if guard is None:  # a compiled caller that cannot take them: the Python path
                    self._caller = None
                elif self._read_shared:
                    guard(self._update_locks, self._unalias, self._relock, INPLACE_GENERATION)
                else:
                    guard(self._update_locks, self._unalias)
        self.profile = maker.profile

    def _set_locks(self) -> None:
        """Decide the locks a call holds: those of the shared variables it updates, and of
        those it reads that some function writes in place (as of now)."""
        self._lock_generation = INPLACE_GENERATION[0]
        read = [c for c in self._read_shared if written_in_place(c)]
        self._update_locks = update_locks_of(self.maker.inputs, self._shared_defaults, read)
        fn = self.fn
        # A VM holds them while it runs and updates; for anything else the call does. A VM
        # without updates or locks is run directly (skipping VM.__call__'s update step).
        if isinstance(fn, VM):
            fn.update_locks = self._update_locks
            self._run = fn.run if not fn.updates and not self._update_locks else fn
        else:
            self._run = fn
            self._call_locks = self._update_locks

    def _relock(self) -> tuple[list[Any], Any]:
        """Called by a compiled caller, in its own call, when some function started writing
        a shared variable in place since: ``(locks, unalias)`` to use from now on."""
        self._set_locks()
        return self._update_locks, self._unalias

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
        star = getattr(caller, "star", None)
        self.__call__ = star if star is not None else self._python_call

    # ------------------------------------------------------------------ calling

    def _python_call(self, *args: Any, **kwargs: Any) -> Any:
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

    @property
    def __signature__(self) -> inspect.Signature:
        """The call's signature for ``inspect`` and ``help`` (:func:`call_signature`)."""
        return call_signature(self._slots, self._names)

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
        if self._read_shared and self._lock_generation != INPLACE_GENERATION[0]:
            self._set_locks()
        locks = self._call_locks
        if locks:
            hold_all(locks)
        try:
            try:
                self._store(args, kwargs)
                if self._unalias is not None:
                    self._unalias()
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
        finally:
            if locks:
                release_all(locks)
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
        container = self._container(key)
        with update_lock(container):
            container.value = value

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


#: Every live Function, for :func:`_reinit_call_locks_in_child`.
_LIVE_FUNCTIONS: weakref.WeakSet[Function] = weakref.WeakSet()


def _reinit_call_locks_in_child() -> None:
    """After ``fork``, in the child: a function another thread was calling is free again
    (that thread does not exist here); a call of the forking thread itself goes on."""
    me = threading.get_ident()
    for f in list(_LIVE_FUNCTIONS):
        if f._owner != me:
            f._lock = threading.Lock()
            f._owner = None


os.register_at_fork(after_in_child=_reinit_call_locks_in_child)


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


def orig_function(
    inputs: Sequence[SymbolicInput],
    outputs: Any,
    mode: Mode | str | None = None,
    accept_inplace: bool = False,
    name: str | None = None,
    profile: Any = None,
    on_unused_input: str | None = None,
    output_keys: list[str] | None = None,
) -> Function:
    """Compile from input/output specs (no givens or shared-variable collection)."""
    maker = FunctionMaker(
        inputs,
        outputs,
        mode,
        accept_inplace=accept_inplace,
        profile=profile,
        on_unused_input=on_unused_input,
        output_keys=output_keys,
        name=name,
    )
    return maker.create()


@contextlib.contextmanager
def _full_collections_deferred() -> Iterator[None]:
    """Keep the garbage collector's full collections out of a compilation.

    Compiling a big graph allocates enough objects to trigger many full collections, each
    walking the whole heap (the user's graph included) again: on a 16,000-node chain that
    was most of the compile time, and it made the time grow faster than the graph. Inside
    this context the objects alive when it starts are frozen (``gc.freeze()``: out of the
    collector's view) and full collections are deferred (a huge third threshold), while
    the young generations are still collected as usual, so short-lived cyclic garbage is
    still freed. On exit both are undone; the deferred full collection happens at the
    collector's next opportunity. Nothing is done when the collector is off or something
    else (an enclosing compile, the program itself) froze objects already.
    """
    if not gc.isenabled() or gc.get_freeze_count():
        yield
        return
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(thresholds[0], thresholds[1], 1 << 30)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


_UNUSED = (
    "opgraph.function was asked to create a function computing outputs given certain "
    "inputs, but the provided input variable at index {i} is not part of the computational "
    "graph needed to compute the outputs: {var}.\n{how}"
)
_UNUSED_RAISE = (
    "To make this error into a warning, you can pass the parameter on_unused_input='warn' "
    "to opgraph.function. To disable it completely, use on_unused_input='ignore'."
)
_UNUSED_WARN = (
    "To make this warning into an error, you can pass the parameter on_unused_input='raise' "
    "to opgraph.function. To disable it completely, use on_unused_input='ignore'."
)


class FunctionMaker:
    """Builds the rewritten FunctionGraph and the linker of a function; ``create()`` makes it.

    Parameters
    ----------
    inputs
        In/SymbolicInput specs (or Variables): explicit inputs first, then implicit ones.
    outputs
        A spec or Variable (single output), a list of them, or None.
    mode
        The Mode (or name).
    fgraph
        An already rewritten graph (copies and unpickling): rewriting is skipped.

    Attributes
    ----------
    fgraph
        The rewritten FunctionGraph (``f.maker.fgraph``).
    inputs, outputs
        The specs; ``fgraph.outputs`` holds the outputs then the update values.
    """

    def __init__(
        self,
        inputs: Sequence[Any],
        outputs: Any,
        mode: Mode | str | None = None,
        accept_inplace: bool = False,
        function_builder: type[Function] | None = None,
        profile: Any = None,
        on_unused_input: str | None = None,
        fgraph: FunctionGraph | None = None,
        output_keys: list[str] | None = None,
        name: str | None = None,
    ) -> None:
        self.mode = mode = get_mode(mode)
        if function_builder is None:
            function_builder = Function
        self.function_builder = function_builder
        self.profile = profile
        self.name = name
        self.accept_inplace = accept_inplace
        self.on_unused_input = on_unused_input
        self.output_keys = output_keys
        self.return_none = outputs is None
        self.unpack_single = outputs is not None and not isinstance(outputs, list | tuple)
        outs = [] if outputs is None else [outputs] if self.unpack_single else list(outputs)
        self.outputs = [o if isinstance(o, SymbolicOutput) else SymbolicOutput(o) for o in outs]
        self.inputs = [i if isinstance(i, SymbolicInput) else In(i) for i in inputs]
        self.rewrite_time = 0.0
        built = fgraph is None
        if fgraph is None:
            self._check_unused_inputs()
            with _full_collections_deferred():
                fgraph = self._build_fgraph()
                t0 = time.perf_counter()
                mode.prepare_fgraph(fgraph)
                rewriter = mode.get_rewriter()
                # Nodes the rewrites build compute test values as compute_test_value_opt
                # says (Theano's default: not at all), not as the user's graph did.
                if rewriter is not None:
                    with config.change_flags(compute_test_value=config.compute_test_value_opt):
                        (getattr(rewriter, "rewrite", None) or rewriter.optimize)(fgraph)
                self.rewrite_time = time.perf_counter() - t0
                # Update values never alias anything: two shared variables must not share
                # memory.
                updates = self._update_specs(fgraph, borrow=False)
                insert_deepcopy(fgraph, self.inputs, self.outputs + updates)
        if any(getattr(n.op, "destroy_map", None) for n in fgraph.apply_nodes):
            # A copied or unpickled graph needs the handler's orderings too: readers of a
            # buffer must run before the node that overwrites it, and in-place updates last.
            attach_destroy_handler(fgraph)
            if not built and not any(isinstance(f, UpdateGuard) for f in fgraph.features):
                guarded = self._guarded_updates(fgraph)
                if guarded:
                    fgraph.attach_feature(UpdateGuard(guarded))
        self.fgraph = fgraph
        self.linker = mode.linker.accept(
            fgraph, no_recycling=self._no_recycling(fgraph), profile=profile
        )

    def _update_specs(self, fgraph: FunctionGraph, borrow: bool = True) -> list[SymbolicOutput]:
        mapping = fgraph.update_mapping or {}
        return [SymbolicOutput(fgraph.outputs[k], borrow=borrow) for k in sorted(mapping)]

    def _check_unused_inputs(self) -> None:
        how = self.on_unused_input or config.on_unused_input
        if how == "ignore":
            return
        if how not in ("raise", "warn"):
            raise ValueError(
                f"Invalid value for keyword on_unused_input of function(): {how!r}.\n"
                "Valid values are 'raise', 'warn', and 'ignore'."
            )
        roots = [o.variable for o in self.outputs]
        roots += [i.update for i in self.inputs if i.update is not None]
        used = set(ancestors(roots, blockers=[i.variable for i in self.inputs]))
        for i, spec in enumerate(self.inputs):
            if spec.variable in used or spec.update is not None:
                continue
            if how == "warn":
                warnings.warn(
                    _UNUSED.format(i=i, var=spec.variable, how=_UNUSED_WARN), stacklevel=5
                )
            else:
                raise UnusedInputError(_UNUSED.format(i=i, var=spec.variable, how=_UNUSED_RAISE))

    def _build_fgraph(self) -> FunctionGraph:
        out_vars = [o.variable for o in self.outputs]
        update_mapping = {}
        for k, spec in enumerate(self.inputs):
            if spec.update is not None:
                update_mapping[len(out_vars)] = k
                out_vars.append(spec.update)
        fgraph = FunctionGraph(
            [i.variable for i in self.inputs],
            out_vars,
            features=[PreserveVariableAttributes()],
            clone=True,
            update_mapping=update_mapping,
        )
        inplace = [n for n in fgraph.toposort() if getattr(n.op, "destroy_map", None)]
        if inplace and not self.accept_inplace:
            raise TypeError(
                f"Graph must not contain inplace operations: {inplace[0]} overwrites its "
                f"input (destroy_map={inplace[0].op.destroy_map}).\nHINT: pass "
                "accept_inplace=True to function() if overwriting is intended."
            )
        if inplace:
            attach_destroy_handler(fgraph)
        self._protect_inputs(fgraph)
        if inplace:
            self._check_users_inplace(fgraph)
        return fgraph

    @staticmethod
    def _check_users_inplace(fgraph: FunctionGraph) -> None:
        """A graph built in place by the user (``accept_inplace``) must not overwrite an
        input the function has to keep; its own in-place updates are taken as written."""
        guard = next((f for f in fgraph.features if isinstance(f, UpdateGuard)), None)
        if guard is not None:
            try:
                guard.validate(fgraph)
            except InconsistencyError:  # the user's order: Theano's in-place updates
                fgraph.remove_feature(guard)
        try:
            fgraph.validate()
        except InconsistencyError as exc:
            raise InconsistencyError(
                f"the graph given to function() overwrites memory it must keep: {exc}\n"
                "HINT: overwrite only inputs passed as In(x, mutable=True) and shared "
                "variables the function updates, or build the graph without in-place Ops "
                "(the rewrites make them where it is safe)."
            ) from None

    def _protect_inputs(self, fgraph: FunctionGraph) -> None:
        """Forbid in-place rewrites on inputs not marked mutable (Theano's Supervisor).

        Shared variables the function updates may be overwritten in place, as in Theano,
        under :class:`~opgraph.graph.destroyhandler.UpdateGuard`'s rules, which keep
        updates all-or-nothing; when :meth:`_guarded_updates` finds that unsafe, they are
        protected like every other shared variable.
        """
        has_destroyers = getattr(fgraph, "has_destroyers", None)
        guarded = self._guarded_updates(fgraph)
        protected = [
            var
            for k, (spec, var) in enumerate(zip(self.inputs, fgraph.inputs))
            if k not in guarded
            and (
                getattr(spec, "shared", False)
                or not (spec.mutable or (has_destroyers is not None and has_destroyers([var])))
            )
        ]
        fgraph.attach_feature(supervisor(protected))
        if guarded:
            fgraph.attach_feature(UpdateGuard(guarded))

    def _guarded_updates(self, fgraph: FunctionGraph) -> list[int]:
        """Positions of the updated shared variables that nodes may overwrite in place.

        All of them when no update can fail the check made as updates are written (each
        update value has exactly its variable's Type, with no broadcastable dimension whose
        length a buggy Op could break): the in-place work then runs last and nothing after it
        can fail. Otherwise none.
        """
        mapping = fgraph.update_mapping or {}
        for out_pos, in_pos in mapping.items():
            in_type = fgraph.inputs[in_pos].type
            broadcastable = getattr(in_type, "broadcastable", None)
            if broadcastable is None or any(broadcastable):
                return []
            if fgraph.outputs[out_pos].type != in_type:
                return []
        return sorted(
            in_pos
            for in_pos in mapping.values()
            if getattr(self.inputs[in_pos], "shared", False) and self.inputs[in_pos].mutable
        )

    def _no_recycling(self, fgraph: FunctionGraph) -> list[Variable]:
        """Variables whose memory the caller receives: never reused by the next call."""
        specs = self.outputs + self._update_specs(fgraph)
        out: list[Variable] = []
        for var, spec in zip(fgraph.outputs, specs):
            if spec.borrow:
                continue
            v = var
            out.append(v)
            root = alias_root(v)
            while v is not root and v.owner is not None:
                op = v.owner.op
                (k,) = [*op.view_map.get(v.index, []), *op.destroy_map.get(v.index, [])]
                v = v.owner.inputs[k]
                out.append(v)
        return out

    def create(
        self,
        input_storage: Sequence[Any] | None = None,
        storage_map: dict[Variable, list[Any]] | None = None,
    ) -> Function:
        """Link the graph and return the Function.

        ``input_storage`` gives each input's default value or Container (default: the
        specs' ``value``); ``storage_map`` pre-assigns cells (``copy(share_memory=True)``).
        """
        t0 = time.perf_counter()
        values = (
            list(input_storage) if input_storage is not None else [i.value for i in self.inputs]
        )
        cells, defaults = [], []
        for spec, value in zip(self.inputs, values):
            if isinstance(value, Container):
                cells.append(value.storage)
                defaults.append(value)
            elif value is not None:
                filtered = spec.variable.type.filter(
                    value, strict=spec.strict, allow_downcast=spec.allow_downcast
                )
                c = Container(
                    spec.variable,
                    [filtered],
                    strict=spec.strict,
                    allow_downcast=spec.allow_downcast,
                )
                cells.append(c.storage if spec.update is not None else [None])
                defaults.append(c)
            else:
                cells.append([None])
                defaults.append(None)
        with _full_collections_deferred(), compiling_with(self.mode, self.profile is not None):
            fn, _ins, outs, thunks, order = self.linker.make_all(
                input_storage=cells, storage_map=storage_map
            )
        profile = self.profile
        if profile is not None:
            profile.linker_time += time.perf_counter() - t0
            profile.rewriter_time += self.rewrite_time
            profile.record_nodes(order, thunks, self.linker.backend)
        return self.function_builder(self, fn, cells, outs, defaults)

    def rewrite_report(self) -> str:
        """Which rewrites ran on this function's graph, how often (or that none ran)."""
        return rewrite_report(self.fgraph)

    def __reduce__(self) -> Any:
        fg, _ = self.fgraph.clone_get_equiv(check_integrity=False, attach_feature=False)
        n = len(self.outputs)
        outs = [SymbolicOutput(v, o.borrow) for v, o in zip(fg.outputs[:n], self.outputs)]
        kwargs = {
            "inputs": self.inputs,
            "outputs": None if self.return_none else outs[0] if self.unpack_single else outs,
            "mode": self.mode,
            "accept_inplace": self.accept_inplace,
            "function_builder": self.function_builder,
            "on_unused_input": self.on_unused_input,
            "fgraph": fg,
            "output_keys": self.output_keys,
            "name": self.name,
        }
        return (_constructor_FunctionMaker, (kwargs,))


def _constructor_FunctionMaker(kwargs: dict[str, Any]) -> FunctionMaker:
    return FunctionMaker(**kwargs)
