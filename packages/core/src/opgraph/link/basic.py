"""The Linker protocol, storage Containers, and the Python linker ``py``.

A linker turns a :class:`~opgraph.graph.fg.FunctionGraph` into a callable. It works on a
*storage map*: one single-element list (a cell) per variable, shared by the thunks that
read and write it. ``make_all`` returns ``(fn, input_containers, output_containers,
thunks, order)``; ``fn()`` reads the input cells and fills the output cells.

The ``py`` linker (:class:`PerformLinker`) asks each Op for its thunk
(``op.make_thunk``, which runs ``perform``) and runs them with the pure-Python VM of
:mod:`opgraph.link.vm`. Backends subclass :class:`LocalLinker` (or
:class:`~opgraph.link.basic.VMLinker`) and give it a :class:`~opgraph.link.dispatch.KernelRegistry`.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Sequence
from typing import Any

from opgraph.configdefaults import config
from opgraph.graph.basic import Apply, Constant, Variable
from opgraph.graph.op import Thunk
from opgraph.graph.type import Type
from opgraph.graph.utils import MethodNotDefined
from opgraph.link.dispatch import KernelRegistry
from opgraph.link.utils import raise_with_op
from opgraph.link.vm import Callback, build_vm

__all__ = [
    "Container",
    "Linker",
    "LocalLinker",
    "PerformLinker",
    "VMLinker",
    "map_storage",
    "raise_with_op",
]

#: ``(fn, input containers, output containers, thunks, order)``
LinkResult = tuple[Any, list["Container"], list["Container"], list[Thunk], list[Apply]]


class Container:
    """A storage cell of one Type, converting what is assigned through ``Type.filter``.

    Shared variables, function defaults and the inputs/outputs handed out by linkers are
    Containers. Two functions sharing a variable share its Container's ``storage`` list.

    Parameters
    ----------
    r
        The Variable (or Type) whose values this container holds.
    storage
        The one-element list holding the value.
    readonly
        Refuse assignment (output containers).
    strict, allow_downcast
        Passed to ``Type.filter`` on assignment.
    name
        For messages; defaults to the variable's name.
    """

    def __init__(
        self,
        r: Variable | Type,
        storage: list[Any],
        readonly: bool = False,
        strict: bool = False,
        allow_downcast: bool | None = None,
        name: str | None = None,
    ) -> None:
        if not isinstance(storage, list) or len(storage) < 1:
            raise TypeError(f"Container storage must be a one-element list, got {storage!r}")
        if isinstance(r, Type):
            self.type = r
        else:
            self.type = r.type
            if name is None:
                name = r.name
        self.name = name
        self.storage = storage
        self.readonly = readonly
        self.strict = strict
        self.allow_downcast = allow_downcast

    @property
    def value(self) -> Any:
        """The held value (assigning filters it through the Type)."""
        return self.storage[0]

    @value.setter
    def value(self, value: Any) -> None:
        if self.readonly:
            raise ValueError(f"cannot set the value of read-only container {self.name!r}")
        if value is None:
            self.storage[0] = None
            return
        self.storage[0] = self.type.filter(
            value, strict=self.strict, allow_downcast=self.allow_downcast
        )

    data = value

    def __deepcopy__(self, memo: dict[int, Any]) -> Container:
        value = self.storage[0]
        if value is not None:
            value = self.type.filter(copy.deepcopy(value, memo), strict=self.strict)
        return type(self)(
            self.type,
            [value],
            readonly=self.readonly,
            strict=self.strict,
            allow_downcast=self.allow_downcast,
            name=self.name,
        )

    def __str__(self) -> str:
        return f"<{self.storage[0]}>"

    def __repr__(self) -> str:
        return f"<{self.storage[0]!r}>"


def map_storage(
    fgraph: Any,
    order: Sequence[Apply],
    input_storage: Sequence[list[Any]] | None = None,
    output_storage: Sequence[list[Any]] | None = None,
    storage_map: dict[Variable, list[Any]] | None = None,
) -> tuple[list[list[Any]], list[list[Any]], dict[Variable, list[Any]]]:
    """Give every variable of ``fgraph`` a cell; return ``(inputs, outputs, storage_map)``.

    ``input_storage``/``output_storage`` are the cells to use for ``fgraph.inputs`` /
    ``fgraph.outputs`` (a shared variable's input cell is its container's storage).
    Constants get a cell holding their data.
    """
    storage_map = {} if storage_map is None else storage_map
    if input_storage is not None:
        if len(input_storage) != len(fgraph.inputs):
            raise ValueError(
                f"input_storage has {len(input_storage)} cells for {len(fgraph.inputs)} inputs"
            )
        for var, cell in zip(fgraph.inputs, input_storage):
            storage_map[var] = cell
    input_cells = [storage_map.setdefault(v, [None]) for v in fgraph.inputs]
    if output_storage is not None:
        if len(output_storage) != len(fgraph.outputs):
            raise ValueError(
                f"output_storage has {len(output_storage)} cells for {len(fgraph.outputs)} outputs"
            )
        for var, cell in zip(fgraph.outputs, output_storage):
            if var.owner is not None:
                storage_map[var] = cell
    for node in order:
        for var in node.inputs:
            if var not in storage_map:
                storage_map[var] = [var.data if isinstance(var, Constant) else None]
        for var in node.outputs:
            storage_map.setdefault(var, [None])
    for var in fgraph.outputs:
        if var not in storage_map:
            storage_map[var] = [var.data if isinstance(var, Constant) else None]
    for var, cell in storage_map.items():
        if isinstance(var, Constant):
            cell[0] = var.data
    output_cells = [storage_map[v] for v in fgraph.outputs]
    return input_cells, output_cells, storage_map


class Linker:
    """Turns a FunctionGraph into a callable over storage cells.

    Subclasses implement :meth:`make_all`. A linker object is bound to one graph by
    :meth:`accept`; accepting another graph returns a fresh copy.

    Attributes
    ----------
    kernels
        The backend's :class:`KernelRegistry`, or None (every node runs ``perform``).
    allow_gc
        Free intermediates as soon as possible (None: ``config.allow_gc``).
    backend
        Short name shown in profiles' ``<type>`` column.
    """

    kernels: KernelRegistry | None = None
    backend = "Py"
    #: False for a linker that runs only the Ops it knows how to lower and may return lazy
    #: values (opgraph-dask): the testing kit's default targets leave it out.
    runs_every_graph = True

    def __init__(self, allow_gc: bool | None = None) -> None:
        self.fgraph: Any = None
        self.no_recycling: list[Variable] = []
        self.profile: Any = None
        self.allow_gc = allow_gc

    def accept(
        self, fgraph: Any, no_recycling: Sequence[Variable] | None = None, profile: Any = None
    ) -> Linker:
        """Bind this linker to ``fgraph``; returns the linker to use (maybe a copy).

        ``no_recycling`` lists variables whose cells must be emptied before each call (the
        outputs handed to the user, so no Op writes into an array the user holds).
        ``profile`` turns on per-node timing.
        """
        if self.fgraph is not None and self.fgraph is not fgraph:
            return self.clone().accept(fgraph, no_recycling, profile)
        self.fgraph = fgraph
        self.no_recycling = list(no_recycling or ())
        self.profile = profile
        return self

    def clone(self, allow_gc: bool | None = None) -> Linker:
        """An unbound copy of this linker (``allow_gc`` overrides when given)."""
        new = copy.copy(self)
        new.fgraph = None
        new.no_recycling = []
        new.profile = None
        if allow_gc is not None:
            new.allow_gc = allow_gc
        return new

    def input_filter(self, type: Any) -> Callable[..., Any] | None:
        """How a function's argument of ``type`` is converted before each call.

        None (the default) keeps ``type.filter``. A linker whose thunks take values the Type
        does not (a dask linker's chunked arrays) returns its own
        ``filter(value, strict, allow_downcast)``, which may hand other values to
        ``type.filter``.
        """
        return None

    def get_allow_gc(self) -> bool:
        """The effective ``allow_gc``: this linker's, else ``config.allow_gc``."""
        if self.allow_gc is not None:
            return bool(self.allow_gc)
        return bool(config.allow_gc)

    def make_all(
        self,
        input_storage: Sequence[list[Any]] | None = None,
        output_storage: Sequence[list[Any]] | None = None,
        storage_map: dict[Variable, list[Any]] | None = None,
    ) -> LinkResult:
        """Build ``(fn, input_containers, output_containers, thunks, order)``."""
        raise MethodNotDefined(f"{type(self).__name__} must define make_all()")

    def make_thunk(
        self,
        input_storage: Sequence[list[Any]] | None = None,
        output_storage: Sequence[list[Any]] | None = None,
        storage_map: dict[Variable, list[Any]] | None = None,
    ) -> tuple[Any, list[Container], list[Container]]:
        """``(fn, input_containers, output_containers)`` of :meth:`make_all`."""
        fn, ins, outs, _thunks, _order = self.make_all(input_storage, output_storage, storage_map)
        return fn, ins, outs

    def make_function(self, unpack_single: bool = True) -> Any:
        """A plain callable ``f(*input_values)`` returning the output values (for tests)."""
        fn, ins, outs = self.make_thunk()

        def execute(*args: Any) -> Any:
            if len(args) != len(ins):
                raise TypeError(f"expected {len(ins)} input values, got {len(args)}")
            for container, arg in zip(ins, args):
                container.value = arg
            fn()
            values = [c.value for c in outs]
            return values[0] if unpack_single and len(values) == 1 else values

        return execute

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class LocalLinker(Linker):
    """A linker that makes one thunk per node and runs them with a VM.

    Subclasses choose how a node's thunk is made (:meth:`make_node_thunk`) and which VM
    runs them (:meth:`make_vm`).
    """

    #: None: lazy evaluation only for graphs with lazy nodes; True/False force it on/off.
    lazy: bool | None = None
    #: Called after each node as ``callback(node=, thunk=, storage_map=, compute_map=)``.
    callback: Any = None

    def make_node_thunk(
        self,
        node: Apply,
        storage_map: dict[Variable, list[Any]],
        compute_map: dict[Variable, list[bool]],
        no_recycling: Sequence[Variable],
    ) -> Thunk:
        """The thunk of one node: the backend's kernel if it has one, else ``perform``."""
        if self.kernels is not None:
            thunk = self.kernels.make_thunk(node, storage_map, compute_map, no_recycling)
            if thunk is not None:
                return thunk
        thunk = node.op.make_thunk(node, storage_map, compute_map, no_recycling)
        if self.kernels is not None:  # the profile marks the node [py-fallback]
            with contextlib.suppress(AttributeError):
                thunk.py_fallback = True  # type: ignore[attr-defined]
        return thunk

    def make_vm(
        self,
        order: list[Apply],
        thunks: list[Thunk],
        storage_map: dict[Variable, list[Any]],
        compute_map: dict[Variable, list[bool]],
    ) -> Any:
        """The callable running ``thunks``: a :class:`~opgraph.link.vm.VM` chosen by
        :func:`~opgraph.link.vm.build_vm` from ``lazy`` and ``callback``."""
        return build_vm(
            self.fgraph,
            order,
            thunks,
            storage_map,
            compute_map,
            allow_gc=self.get_allow_gc(),
            no_recycling=self.no_recycling,
            timed=bool(self.profile),
            callback=self.callback,
            lazy=self.lazy,
        )

    def make_all(
        self,
        input_storage: Sequence[list[Any]] | None = None,
        output_storage: Sequence[list[Any]] | None = None,
        storage_map: dict[Variable, list[Any]] | None = None,
    ) -> LinkResult:
        if self.fgraph is None:
            raise ValueError(f"{type(self).__name__}.make_all() called before accept(fgraph)")
        fgraph = self.fgraph
        order = list(fgraph.toposort())
        input_cells, output_cells, storage_map = map_storage(
            fgraph, order, input_storage, output_storage, storage_map
        )
        compute_map = {v: [v.owner is None] for v in storage_map}
        thunks = []
        for node in order:
            try:
                thunks.append(
                    self.make_node_thunk(node, storage_map, compute_map, self.no_recycling)
                )
            except Exception:
                raise_with_op(fgraph, node, storage_map=storage_map)
        fn = self.make_vm(order, thunks, storage_map, compute_map)
        ins = [Container(v, cell) for v, cell in zip(fgraph.inputs, input_cells)]
        outs = [Container(v, cell, readonly=True) for v, cell in zip(fgraph.outputs, output_cells)]
        return fn, ins, outs, thunks, order


class PerformLinker(LocalLinker):
    """The ``py`` linker: every node runs its Op's ``perform`` (Theano's PerformLinker).

    Lazy nodes (``ifelse``) are evaluated lazily; intermediates are freed after their last
    use when ``allow_gc``.
    """

    backend = "Py"

    def make_node_thunk(
        self,
        node: Apply,
        storage_map: dict[Variable, list[Any]],
        compute_map: dict[Variable, list[bool]],
        no_recycling: Sequence[Variable],
    ) -> Thunk:
        return node.op.make_thunk(node, storage_map, compute_map, no_recycling)


class VMLinker(LocalLinker):
    """The ``vm`` linker: per-node thunks (backend kernels where registered) run by a VM.

    Parameters
    ----------
    allow_gc
        Free intermediates after their last use (None: ``config.allow_gc``).
    lazy
        None picks :class:`Stack` only when the graph has lazy nodes; True always uses it;
        False always uses :class:`Loop` (lazy nodes then get both branches computed).
    callback
        Called after each node as ``callback(node=, thunk=, storage_map=, compute_map=)``
        (NanGuardMode uses it).
    kernels
        A backend's :class:`KernelRegistry`; nodes without an entry run ``perform``.
    """

    backend = "Py"

    def __init__(
        self,
        allow_gc: bool | None = None,
        lazy: bool | None = None,
        callback: Callback | None = None,
        kernels: KernelRegistry | None = None,
    ) -> None:
        super().__init__(allow_gc=allow_gc)
        self.lazy = lazy
        self.callback = callback
        self.kernels = kernels
        if kernels is not None:
            self.backend = kernels.backend

    def __repr__(self) -> str:
        kernels = f", kernels={self.kernels!r}" if self.kernels is not None else ""
        return f"VMLinker(allow_gc={self.allow_gc}, lazy={self.lazy}{kernels})"
