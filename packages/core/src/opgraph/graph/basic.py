"""The graph's two kinds of node: ``Variable`` (data) and ``Apply`` (an Op applied to Variables).

A graph is bipartite and acyclic: a Variable points to the Apply that produced it through
``owner`` (``None`` for a graph input), and an Apply points to its ``inputs`` and ``outputs``.
``Constant`` is a Variable whose value is known, fixed and read-only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from opgraph.configdefaults import config
from opgraph.graph.pickling import reduce_graph_node
from opgraph.graph.utils import Scratchpad, add_tag_trace
from opgraph.plugins import get_plugin_manager

__all__ = ["Apply", "Constant", "Node", "Variable", "as_variable"]


class Node:
    """Common base of ``Apply`` and ``Variable``."""

    __slots__ = ()


class Variable(Node):
    """A datum at some point of a computation: an input, an intermediate or an output.

    Parameters
    ----------
    type
        The Type of the values this variable can hold.
    owner
        The Apply node that computes this variable, or ``None`` for a graph input. Normally
        set by ``Apply`` itself rather than passed here.
    index
        Position of this variable in ``owner.outputs``.
    name
        A name for printing and debugging only.
    """

    # Attributes a FunctionGraph sets on the variables it owns (``clients``, ``fgraph``) live
    # in the instance dict, as in Theano: the user's variables never get them.

    def __init__(
        self,
        type: Any,
        owner: Apply | None = None,
        index: int | None = None,
        name: str | None = None,
    ) -> None:
        if not callable(getattr(type, "filter", None)):
            raise TypeError(f"Variable needs a Type instance as its type, got {type!r}")
        if owner is not None and not isinstance(owner, Apply):
            raise TypeError(f"Variable.owner must be an Apply node or None, got {owner!r}")
        if index is not None and not isinstance(index, int):
            raise TypeError(f"Variable.index must be an int or None, got {index!r}")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"Variable.name must be a string or None, got {name!r}")
        self.type = type
        self.owner = owner
        self.index = index
        self.name = name
        self.tag = Scratchpad()
        add_tag_trace(self)

    def __str__(self) -> str:
        if self.name is not None:
            return self.name
        if self.owner is not None:
            op = self.owner.op
            if self.index == op.default_output:
                return f"{op}.out"
            return f"{op}.{self.index}"
        return f"<{self.type}>"

    def __repr__(self) -> str:
        """``str(self)``; with ``config.print_test_value``, the test value's repr on a second
        line (Theano's layout), when there is one."""
        if config.current("print_test_value"):
            try:
                return f"{self}\n{self.__repr_test_value__()}"
            except AttributeError:
                pass
        return str(self)

    def __repr_test_value__(self) -> str:
        """The repr of the test value (Theano's hook for values that do not print well)."""
        return repr(_test_value_of(self))

    @property
    def auto_name(self) -> str:
        """A stable, unique-per-object name (``auto_<id>``) for code generation and dot files."""
        return f"auto_{id(self)}"

    def clone(self, name: str | None = None) -> Variable:
        """Return a new, ownerless Variable of the same type, name and tag (a fresh graph input)."""
        cp = self.__class__.__new__(self.__class__)
        _init_copy(cp, self, name)
        return cp

    def get_parents(self) -> list[Apply]:
        """The Apply that owns this variable, as a one-element list, or an empty list."""
        return [self.owner] if self.owner is not None else []

    def eval(self, inputs_to_values: dict[Variable, Any] | None = None) -> Any:
        """Compile (once, cached on the variable) and evaluate this variable.

        ``inputs_to_values`` maps input Variables to values, as in Theano's ``Variable.eval``.
        """
        if not _COMPILERS:
            raise RuntimeError(
                "Variable.eval compiles a function, and no compiler is installed. "
                "HINT: import opgraph (its compile layer installs one)."
            )
        inputs_to_values = dict(inputs_to_values or {})
        inputs = tuple(sorted(inputs_to_values, key=id))
        cache = self.__dict__.setdefault("_fn_cache", {})
        fn = cache.get(inputs)
        if fn is None:
            fn = cache[inputs] = _COMPILERS[-1](list(inputs), self)
        return fn(*(inputs_to_values[v] for v in inputs))

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_fn_cache", None)
        state.pop("_signature", None)  # holds hashes, which differ between processes
        tag = state.get("tag")
        if tag is not None and "test_value" in tag.__dict__ and not config.pickle_test_value:
            tag = state["tag"] = tag.copy()  # config.pickle_test_value=False: leave it out
            del tag.test_value
        if state.get("fgraph") is not None:
            # Its FunctionGraph pickles the graph's links flat and restores them, so that
            # pickling a deep graph does not recurse along it (see FunctionGraph.__getstate__).
            state.pop("owner", None)
            state.pop("clients", None)
        return state

    def __reduce_ex__(self, protocol: Any) -> Any:
        # A deep graph is written as a flat list, so that pickle and deepcopy do not recurse
        # along it (see opgraph.graph.pickling); the state is still __getstate__'s.
        return reduce_graph_node(self, protocol)

    def __copy__(self) -> Variable:
        cp = object.__new__(type(self))
        cp.__dict__.update(self.__dict__)
        return cp


class Constant(Variable):
    """A Variable whose value is fixed: always ``data``, never modified by any Op.

    ``data`` is filtered by the type, stored read-only and can be set only once. Constants are
    merged by value: ``c.equals(d)`` and ``c.signature() == d.signature()`` compare type and
    data. ``==`` stays identity so that graphs can key dictionaries by variable. Passing a
    Constant as a function input is an error: its value is already known.
    """

    def __init__(self, type: Any, data: Any, name: str | None = None) -> None:
        super().__init__(type, None, None, name)
        self._data = _readonly(type.filter(data))

    @property
    def data(self) -> Any:
        """The constant's value (read-only)."""
        return self._data

    @data.setter
    def data(self, value: Any) -> None:
        raise ValueError(
            f"Constant {self} already has its data; a Constant's value is set once. "
            "Build a new constant instead."
        )

    @property
    def value(self) -> Any:
        """Alias of ``data`` (the name used in the Theano paper)."""
        return self._data

    @property
    def owner(self) -> None:  # type: ignore[override]
        return None

    @owner.setter
    def owner(self, value: Apply | None) -> None:
        if value is not None:
            raise ValueError(f"Constant {self} cannot be the output of an Apply node")

    def signature(self) -> tuple[Any, ...]:
        """A hashable key equal for constants of equal type and value (used by merging)."""
        # Type and data never change: computed once (hashing the data's bytes is not free).
        sig = self.__dict__.get("_signature")
        if sig is None:
            sig = self.__dict__["_signature"] = (self.type, _data_key(self._data))
        return sig

    def equals(self, other: object) -> bool:
        """True if ``other`` is a Constant of the same type holding an equal value."""
        return isinstance(other, Constant) and self.signature() == other.signature()

    def __str__(self) -> str:
        if self.name is not None:
            return self.name
        text = str(self._data)
        if len(text) > 20:
            text = text[:10] + ".." + text[-10:]
        return f"{type(self).__name__}{{{text}}}"

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        data = self._data
        if isinstance(data, np.ndarray) and data.flags.writeable:
            data.setflags(write=False)  # pickle does not keep the read-only flag

    def clone(self, name: str | None = None) -> Constant:
        """Return a new Constant with the same type and (shared, read-only) data."""
        cp = self.__class__.__new__(self.__class__)
        _init_copy(cp, self, name)
        cp._data = self._data
        return cp


def _test_value_of(var: Variable) -> Any:
    """``var``'s test value as stored (a Constant's data, a shared variable's value, else
    ``var.tag.test_value``); AttributeError if it has none. ``opgraph.graph.op.get_test_value``
    also checks it against the type."""
    if isinstance(var, Constant):
        return var.data
    if (
        var.owner is None
        and hasattr(var, "container")
        and callable(getattr(var, "get_value", None))
    ):
        return var.get_value(borrow=True, return_internal_type=True)  # type: ignore[attr-defined]
    return var.tag.test_value


def _init_copy(cp: Variable, var: Variable, name: str | None) -> None:
    """Set up ``cp`` as an ownerless copy of ``var`` (what ``Variable.__init__`` does, with the
    tag, creation trace included, copied from ``var`` instead of recorded anew)."""
    if name is not None and not isinstance(name, str):
        raise TypeError(f"Variable.name must be a string or None, got {name!r}")
    cp.type = var.type
    cp.owner = None
    cp.index = None
    cp.name = var.name if name is None else name
    cp.tag = var.tag.copy()


def _readonly(data: Any) -> Any:
    if isinstance(data, np.ndarray) and data.flags.writeable:
        data = data.copy()
        data.setflags(write=False)
    return data


#: ``_DataKey.item`` of arrays with more than one element.
_SEVERAL = object()


class _DataKey:
    """Hashable wrapper comparing array data by dtype, shape and values (NaN equal to NaN).

    A one-element numeric array (most constants) is keyed by its value as a Python number,
    made canonical as ``array_equal`` sees it (every NaN alike, -0.0 as 0): hashing and
    comparing it then costs no NumPy call.
    """

    __slots__ = ("_hash", "data", "item")

    def __init__(self, data: np.ndarray) -> None:
        self.data = data
        if data.size == 1 and data.dtype.kind in "biufc":
            value = data.reshape(-1)[0].item()
            if value != value:
                value = "nan"
            elif value == 0:
                value = 0
            self.item = value
            self._hash = hash((data.dtype.str, data.shape, value))
        else:
            self.item = _SEVERAL
            self._hash = hash((data.dtype.str, data.shape, _hash_sample(data)))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _DataKey):
            return False
        a, b = self.data, other.data
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if self.item is not _SEVERAL:
            return self.item == other.item
        return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))


def _hash_sample(data: np.ndarray) -> bytes:
    """Bytes of the first values, canonical for every array ``array_equal`` calls equal.

    NaNs with different payloads and -0.0 / 0.0 compare equal, so they must hash equal; object
    arrays hold pointers, so only their dtype and shape are hashed.
    """
    if data.dtype.kind == "O":
        return b""
    sample = data.ravel()[:512]
    if data.dtype.kind in "fc":
        sample = np.where(np.isnan(sample), np.nan, sample) + 0  # -0.0 + 0 is +0.0
        sample = sample.astype(data.dtype, copy=False)
    return sample.tobytes()


def _data_key(data: Any) -> Any:
    if isinstance(data, np.ndarray | np.generic):
        return _DataKey(np.asarray(data))
    try:
        hash(data)
    except TypeError:
        return ("id", id(data))
    return data


class Apply(Node):
    """The application of an Op to input Variables, producing output Variables.

    ``Apply(op, inputs, outputs)`` sets each output's ``owner`` to this node and its ``index``
    to its position, as Theano documents. Ops normally build Apply nodes in ``make_node``.
    """

    def __init__(self, op: Any, inputs: Sequence[Variable], outputs: Sequence[Variable]) -> None:
        if not callable(getattr(op, "make_node", None)):
            raise TypeError(f"Apply needs an Op instance as its op, got {op!r}")
        # (list and tuple first: the ABC check is slow, and Apply is built very often)
        for what, seq in (("inputs", inputs), ("outputs", outputs)):
            if (
                type(seq) is not list
                and type(seq) is not tuple
                and (isinstance(seq, Variable) or not isinstance(seq, Sequence))
            ):
                raise TypeError(f"Apply({op}) {what} must be a list of Variables, got {seq!r}")
        for i, inp in enumerate(inputs):
            if not isinstance(inp, Variable):
                raise TypeError(
                    f"input {i} of Apply({op}) must be a Variable, got {inp!r} "
                    f"({type(inp).__name__}). HINT: wrap values with the type's "
                    "make_constant or opgraph.tensor.as_tensor_variable."
                )
        for i, out in enumerate(outputs):
            if not isinstance(out, Variable):
                raise TypeError(f"output {i} of Apply({op}) must be a Variable, got {out!r}")
            if isinstance(out, Constant):
                raise TypeError(f"output {i} of Apply({op}) is a Constant, which has no owner")
            if out.owner is not None and (out.owner is not self or out.index != i):
                raise ValueError(
                    f"output {i} of Apply({op}) ({out}) is already the output of {out.owner}"
                )
        self.op = op
        self.inputs: list[Variable] = list(inputs)
        self.outputs: list[Variable] = list(outputs)
        self.tag = Scratchpad()
        for i, out in enumerate(self.outputs):
            out.owner = self
            out.index = i

    def default_output(self) -> Variable:
        """The output returned when the Op is called: its only output or ``op.default_output``."""
        do = self.op.default_output
        if do is not None:
            return self.outputs[do]
        if len(self.outputs) == 1:
            return self.outputs[0]
        raise ValueError(f"{self.op} has {len(self.outputs)} outputs and no default_output")

    @property
    def out(self) -> Variable:
        """Alias of :meth:`default_output`."""
        return self.default_output()

    @property
    def nin(self) -> int:
        return len(self.inputs)

    @property
    def nout(self) -> int:
        return len(self.outputs)

    @property
    def params(self) -> Any:
        """The Op's run-time parameters for this node (``op.get_params(node)``), if any."""
        return self.op.get_params(self)

    def get_parents(self) -> list[Variable]:
        return list(self.inputs)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if state.get("fgraph") is not None:  # restored by its FunctionGraph, as in Variable
            state.pop("inputs", None)
            state.pop("outputs", None)
        return state

    def __reduce_ex__(self, protocol: Any) -> Any:
        return reduce_graph_node(self, protocol, is_apply=True)  # flat, as Variable's

    def __copy__(self) -> Apply:
        cp = object.__new__(type(self))
        cp.__dict__.update(self.__dict__)
        return cp

    def __str__(self) -> str:
        return f"{self.op}({', '.join(str(i) for i in self.inputs)})"

    def __repr__(self) -> str:
        return str(self)

    def clone(self, clone_inner_graph: bool = False) -> Apply:
        """Return a node with the same op and inputs and fresh output variables."""
        outs = [o.clone() for o in self.outputs]
        cp = Apply(self.op, self.inputs, outs)
        cp.tag = self.tag.copy()
        return cp

    def clone_with_new_inputs(self, inputs: Sequence[Variable], strict: bool = True) -> Apply:
        """Return a copy of this node applied to ``inputs``.

        With ``strict`` each new input must have the old input's type (or be convertible to it
        by ``Type.filter_variable``). Otherwise the Op's ``make_node`` rebuilds the node, so the
        output types may change.
        """
        if len(inputs) != len(self.inputs):
            raise ValueError(
                f"{self.op} has {len(self.inputs)} inputs, clone_with_new_inputs got {len(inputs)}"
            )
        remake = False
        new_inputs = list(inputs)
        for i, (curr, new) in enumerate(zip(self.inputs, new_inputs, strict=True)):
            if curr.type != new.type:
                if strict:
                    new_inputs[i] = curr.type.filter_variable(new)
                else:
                    remake = True
        if remake:
            node = self.op.make_node(*new_inputs)
        else:
            node = self.clone()
            node.inputs = new_inputs
        node.tag = self.tag.copy()
        return node


#: The ``function`` that ``Variable.eval`` compiles with: installed by ``opgraph.compile``,
#: a layer above this one (see :func:`set_eval_compiler`).
_COMPILERS: list[Callable[..., Any]] = []
#: Converters of last resort for :func:`as_variable`, newest first: the tensor library
#: installs ``as_tensor_variable`` (see :func:`add_variable_converter`).
_CONVERTERS: list[Callable[..., Variable]] = []


def set_eval_compiler(compile_function: Callable[..., Any]) -> None:
    """Install ``compile_function(inputs, outputs)`` as what ``Variable.eval`` compiles with.

    The compile layer calls this when it is imported; the graph layer never imports it.
    """
    _COMPILERS[:] = [compile_function]


def add_variable_converter(convert: Callable[..., Variable]) -> None:
    """Make ``convert(value, name=None)`` a converter of last resort for :func:`as_variable`.

    Plugins convert their own data types through the ``opgraph_as_variable`` hook first;
    then the converters are tried, the one added last first. A converter returns None or
    raises TypeError for values it does not handle (the last TypeError is what the caller
    sees). The tensor library adds ``as_tensor_variable`` when it is imported.
    """
    if convert not in _CONVERTERS:
        _CONVERTERS.insert(0, convert)


def as_variable(x: Any, name: str | None = None) -> Variable:
    """Return ``x`` if it is a Variable, the default output of ``x`` if it is an Apply,
    else a Constant built by a plugin's converter or by the tensor library."""
    if isinstance(x, Variable):
        return x
    if isinstance(x, Apply):
        return x.default_output()
    var = get_plugin_manager().as_variable(value=x, name=name)
    if var is not None:
        return var
    error: TypeError | None = None
    for convert in _CONVERTERS:
        try:
            var = convert(x, name=name)
        except TypeError as exc:  # not this converter's kind of value
            error = exc
            continue
        if var is not None:
            return var
    raise error or TypeError(f"cannot convert {x!r} to a Variable: no converter accepts it")
