"""Theano's ``theano.gof.params_type``: :class:`ParamsType`, a Type whose values
(:class:`Params`) bundle an Op's run-time parameters, and how ``perform`` receives them.

An Op declares its parameters as a class attribute and takes them as ``perform``'s fifth
argument, exactly as in Theano::

    class Scale(Op):
        __props__ = ("alpha", "mode")
        params_type = ParamsType(alpha=generic, mode=EnumList("ADD", "MUL"))

        def perform(self, node, inputs, output_storage, params):
            ...  # params.alpha, params.mode, params.ADD

The default ``get_params(node)`` builds the Params from the Op's attributes of the same
names (filtered by each field's Type). ``perform`` may also be called with four arguments
(by any linker, or DebugMode): the parameters are then computed from the node.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Sequence
from typing import Any

from opgraph.gof.type import EnumType
from opgraph.graph.op import Op
from opgraph.graph.type import Type

__all__ = ["Params", "ParamsType", "params_of"]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Params(dict):  # type: ignore[type-arg]
    """The value of a :class:`ParamsType`: an immutable mapping field -> value whose fields
    are also attributes (``params.alpha``)."""

    def __init__(self, params_type: ParamsType, **kwargs: Any) -> None:
        if not isinstance(params_type, ParamsType):
            raise TypeError("Params: 1st constructor argument should be a ParamsType.")
        for field in params_type.fields:
            if field not in kwargs:
                raise TypeError(f'Params: ParamsType attribute "{field}" not in Params args.')
        dict.__init__(self, **kwargs)
        self.__dict__["__params_type__"] = params_type

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}:{type(self[k]).__name__}:{self[k]}" for k in sorted(self))
        return f"Params({inner})"

    def __getattr__(self, key: str) -> Any:
        if key not in self:
            raise AttributeError(f'Params: attribute "{key}" does not exist.')
        return self[key]

    def __setattr__(self, key: str, value: Any) -> None:
        raise TypeError("Params is immutable")

    def __setitem__(self, key: str, value: Any) -> None:
        raise TypeError("Params is immutable")

    def __delitem__(self, key: str) -> None:
        raise TypeError("Params is immutable")

    def __hash__(self) -> int:  # type: ignore[override]
        ptype = self.__dict__["__params_type__"]
        return hash((type(self), ptype, *(_value_key(self[f]) for f in ptype.fields)))

    def __eq__(self, other: object) -> bool:
        if type(self) is not type(other):
            return False
        ptype = self.__dict__["__params_type__"]
        return ptype == other.__dict__["__params_type__"] and ptype.values_eq(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __reduce__(self) -> Any:
        return (_rebuild_params, (self.__dict__["__params_type__"], dict(self)))


def _rebuild_params(params_type: ParamsType, values: dict[str, Any]) -> Params:
    return Params(params_type, **values)


def _value_key(v: Any) -> Any:
    if hasattr(v, "tobytes") and hasattr(v, "dtype"):
        return (str(v.dtype), getattr(v, "shape", ()), v.tobytes())
    try:
        hash(v)
    except TypeError:
        return repr(v)
    return v


class ParamsType(Type):
    """A Type made of named fields, each with its own Type: ``ParamsType(alpha=..., ...)``.

    Fields are sorted by name (``fields``, ``types``). The constants of EnumType fields are
    attributes of the ParamsType (``params_type.ADD``) when their names are unique across
    fields. Values are :class:`Params`; :meth:`get_params` builds one from objects' attributes.
    """

    def __init__(self, **kwargs: Any) -> None:
        if not kwargs:
            raise ValueError("Cannot create ParamsType from empty data.")
        for name, t in kwargs.items():
            if _IDENT.match(name) is None:
                raise AttributeError(
                    f'ParamsType: attribute "{name}" should be a valid identifier.'
                )
            if not isinstance(t, Type):
                raise TypeError(
                    f'ParamsType: attribute "{name}" should inherit from opgraph Type, got '
                    f'"{type(t).__name__}".'
                )
        self.length = len(kwargs)
        self.fields = tuple(sorted(kwargs))
        self.types = tuple(kwargs[f] for f in self.fields)
        self.name = "Params_" + "_".join(self.fields)
        const_to_enum: dict[str, int] = {}
        alias_to_enum: dict[str, int] = {}
        for i, t in enumerate(self.types):
            if not isinstance(t, EnumType):
                continue
            for const in t:
                if const in const_to_enum:
                    raise AttributeError(
                        f'ParamsType: constant "{const}" is defined in more than one enum field.'
                    )
                const_to_enum[const] = i
            for alias in t.aliases:
                if alias in alias_to_enum or alias in const_to_enum:
                    raise AttributeError(
                        f'ParamsType: alias "{alias}" is defined in more than one enum field.'
                    )
                alias_to_enum[alias] = i
        self._const_to_enum = const_to_enum
        self._alias_to_enum = alias_to_enum

    def __getattr__(self, key: str) -> Any:
        consts = self.__dict__.get("_const_to_enum", {})
        if key in consts:
            return self.types[consts[key]][key]
        raise AttributeError(f"{type(self).__name__} has no attribute or enum constant {key!r}")

    def __eq__(self, other: object) -> bool:
        return (
            type(self) is type(other)
            and self.fields == other.fields  # type: ignore[attr-defined]
            and self.types == other.types  # type: ignore[attr-defined]
        )

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((type(self), self.fields, self.types))

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}:{t}" for f, t in zip(self.fields, self.types, strict=True))
        return f"ParamsType<{inner}>"

    __str__ = __repr__

    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def has_type(self, theano_type: Type) -> bool:
        """True if one of the fields has Type ``theano_type``."""
        return theano_type in self.types

    def get_type(self, field_name: str) -> Type:
        """The Type of field ``field_name``."""
        return self.types[self.fields.index(field_name)]

    def get_field(self, theano_type: Type) -> str:
        """The name of the first field of Type ``theano_type``."""
        return self.fields[self.types.index(theano_type)]

    def get_enum(self, key: str) -> Any:
        """The value of enum constant ``key`` (looked up in the EnumType fields)."""
        return self.types[self._const_to_enum[key]][key]

    def enum_from_alias(self, alias: str) -> Any:
        """The value of the enum constant with alias ``alias`` (or named ``alias``)."""
        if alias in self._alias_to_enum:
            return self.types[self._alias_to_enum[alias]].fromalias(alias)
        return self.get_enum(alias)

    def get_params(self, *objects: Any, **kwargs: Any) -> Params:
        """A Params from the attributes of ``objects`` named like the fields (the last object
        having one wins) and from ``kwargs`` (which win), each filtered by its field's Type."""
        values: dict[str, Any] = {}
        for obj in objects:
            for field in self.fields:
                if hasattr(obj, field):
                    values[field] = getattr(obj, field)
        values.update(kwargs)
        filtered = {}
        for field, t in zip(self.fields, self.types, strict=True):
            if field not in values:
                raise AttributeError(
                    f'ParamsType: no value found for field "{field}" in the given objects '
                    "or keyword arguments."
                )
            filtered[field] = t.filter(values[field])
        return Params(self, **filtered)

    def filter(self, data: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        """A Params of this type from ``data`` (a Params, or with ``strict=False`` any object
        with the fields as attributes), each field filtered by its Type."""
        if strict and not isinstance(data, Params):
            raise TypeError(f"{self}: strict mode: data should be an instance of Params.")
        filtered = {}
        for field, t in zip(self.fields, self.types, strict=True):
            if not hasattr(data, field):
                raise TypeError(f'{self}: filter: data has no attribute "{field}".')
            filtered[field] = t.filter(getattr(data, field), strict, allow_downcast)
        return Params(self, **filtered)

    def values_eq(self, a: Any, b: Any) -> bool:
        return all(
            t.values_eq(getattr(a, f), getattr(b, f))
            for f, t in zip(self.fields, self.types, strict=True)
        )

    def values_eq_approx(self, a: Any, b: Any) -> bool:
        return all(
            t.values_eq_approx(getattr(a, f), getattr(b, f))
            for f, t in zip(self.fields, self.types, strict=True)
        )

    def __set_name__(self, owner: type, name: str) -> None:
        """Declared as ``params_type`` in an Op class body: give the class Theano's default
        ``get_params`` and let its five-argument ``perform`` receive the parameters."""
        if name != "params_type" or not (isinstance(owner, type) and issubclass(owner, Op)):
            return
        if owner.get_params is Op.get_params:
            owner.get_params = params_of  # type: ignore[method-assign]
        perform = owner.__dict__.get("perform")
        if perform is not None and _takes_params(perform):
            owner.perform = _perform_with_params(perform)  # type: ignore[method-assign]


def params_of(op: Op, node: Any = None) -> Params:
    """Theano's default ``Op.get_params`` for an Op with a ParamsType: the Params built from
    the Op's attributes named like the fields."""
    ptype = op.params_type  # type: ignore[attr-defined]
    missing = [f for f in ptype.fields if not hasattr(op, f)]
    if missing:
        raise AttributeError(f"{type(op).__name__}: missing attributes {missing} for ParamsType.")
    return ptype.get_params(op)


def _takes_params(perform: Any) -> bool:
    try:
        params = list(inspect.signature(perform).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 5 and not getattr(perform, "_takes_params", False)


_NOT_GIVEN = object()


def _perform_with_params(perform: Any) -> Any:
    """Wrap ``perform(self, node, inputs, output_storage, params)`` so that linkers calling it
    with four arguments pass the node's parameters (``get_params`` filtered by the Type)."""

    @functools.wraps(perform)
    def wrapper(
        self: Op,
        node: Any,
        inputs: Sequence[Any],
        output_storage: Any,
        params: Any = _NOT_GIVEN,
    ) -> Any:
        if params is _NOT_GIVEN:
            params = self.params_type.filter(self.get_params(node))  # type: ignore[attr-defined]
        return perform(self, node, inputs, output_storage, params)

    wrapper._takes_params = True  # type: ignore[attr-defined]
    return wrapper
