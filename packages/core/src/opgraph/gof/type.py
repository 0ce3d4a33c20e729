"""Theano's ``theano.gof.type`` names: the Type classes, and the enumerations Ops use as
parameters (:class:`EnumType`, :class:`EnumList`, :class:`CEnumType`).

opgraph's Types carry no C code: C kernels are registered by backend-c (and by other
packages through its ``opgraph_c_kernels(registry)`` hook), so Theano's ``CLinkerType``
methods (``c_declare``, ``c_extract``, ...) raise an error saying so.
"""

from __future__ import annotations

import re
from typing import Any

from opgraph.graph.basic import Constant
from opgraph.graph.type import Generic, Type, generic
from opgraph.graph.utils import MethodNotDefined

__all__ = [
    "CDataType",
    "CDataTypeConstant",
    "CEnumType",
    "CLinkerType",
    "EnumList",
    "EnumType",
    "Generic",
    "PureType",
    "SingletonType",
    "Type",
    "generic",
]

#: Theano's split of Type into a pure part and a C part: opgraph has only the pure part.
PureType = Type

_C_HINT = (
    "opgraph Types have no C code: C kernels are registered for Op classes by backend-c "
    "(opgraph_c), and other packages add theirs through its opgraph_c_kernels(registry) hook."
)


class CLinkerType(Type):
    """Theano's Type with C code. Its ``c_*`` methods raise MethodNotDefined naming the
    mechanism opgraph uses instead (backend-c's kernel hook); the Python part is a Type."""

    def _no_c(self, *args: Any, **kwargs: Any) -> Any:
        raise MethodNotDefined(f"{type(self).__name__}: {_C_HINT}")

    c_declare = c_init = c_extract = c_sync = c_cleanup = c_literal = _no_c
    c_is_simple = c_element_type = c_extract_out = c_code_cache_version = _no_c


class SingletonType(Type):
    """A Type with a single instance per class: ``SomeType() is SomeType()``; all instances of
    a class are equal."""

    _instances: dict[type, SingletonType] = {}
    __props__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> SingletonType:
        inst = SingletonType._instances.get(cls)
        if inst is None:
            inst = SingletonType._instances[cls] = super().__new__(cls)
        return inst

    def __str__(self) -> str:
        return type(self).__name__


class CDataType(Type):
    """Opaque data handed from Op to Op (Theano wrapped a C pointer). In opgraph the values
    are Python objects; ``ctype`` names what they stand for and equality is by ``ctype``.
    ``freefunc`` and the C header arguments are kept for compatibility and not used."""

    __props__ = ("ctype", "freefunc", "version")

    def __init__(
        self,
        ctype: str,
        freefunc: str | None = None,
        headers: Any = (),
        header_dirs: Any = (),
        libraries: Any = (),
        lib_dirs: Any = (),
        extra_support_code: str = "",
        compile_args: Any = (),
        version: Any = None,
    ) -> None:
        if not isinstance(ctype, str):
            raise TypeError(f"CDataType: ctype must be a string, got {ctype!r}")
        self.ctype = ctype
        self.freefunc = freefunc
        self.version = version
        self.headers = tuple(headers)
        self.header_dirs = tuple(header_dirs)
        self.libraries = tuple(libraries)
        self.lib_dirs = tuple(lib_dirs)
        self.extra_support_code = extra_support_code
        self.compile_args = tuple(compile_args)

    def filter(self, data: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        """Any object except None is a value (Theano checked for a C capsule)."""
        if data is None:
            raise TypeError(f"{self}: expected a {self.ctype} value, got None")
        return data

    def make_constant(self, value: Any, name: str | None = None) -> Constant:
        return CDataTypeConstant(self, self.filter(value), name=name)

    def __str__(self) -> str:
        return f"{type(self).__name__}{{{self.ctype}}}"


class CDataTypeConstant(Constant):
    """A constant of a :class:`CDataType`: opaque values are compared by identity (Theano
    refused to merge them), so two such constants are never merged into one."""

    def signature(self) -> tuple[Any, ...]:
        """Identity: opaque data is never considered equal to other data."""
        return (self.type, id(self))


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ENUM_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")


class EnumType(Type, dict):  # type: ignore[misc]
    """An enumeration of named constants, used as an Op parameter type.

    ``EnumType(ALPHA=1, BETA=2.5, GAMMA=("gamma", 3), ctype="double", cname=...)``: names
    are capital letters, digits and underscores; values are int or float (bool becomes
    int); a ``(alias, value)`` tuple gives the constant an alias. The enum is a read-only
    dict name -> value, each constant is an attribute (``enum.ALPHA``), and a value of this
    Type is one of the constants (``filter`` also accepts an alias or a constant name, and a
    bool, when not ``strict``).
    """

    def __init__(self, **kwargs: Any) -> None:
        ctype = kwargs.pop("ctype", "double")
        if not all(_IDENT.match(part) for part in ctype.split()):
            raise TypeError(f"{type(self).__name__}: invalid C type.")
        ctype = " ".join(ctype.split())
        cname = kwargs.pop("cname", ctype.replace(" ", "_"))
        if not _IDENT.match(cname):
            raise TypeError(f"{type(self).__name__}: invalid C name.")
        aliases: dict[str, str] = {}
        for k in list(kwargs):
            if _ENUM_NAME.match(k) is None:
                raise AttributeError(
                    f'{type(self).__name__}: invalid enum name: "{k}". Only capital letters, '
                    "underscores and digits are allowed."
                )
            v = kwargs[k]
            if isinstance(v, list | tuple):
                if len(v) != 2:
                    raise TypeError(
                        f"{type(self).__name__}: when using a tuple to define a constant, your "
                        "tuple should contain 2 values: constant alias followed by constant value."
                    )
                alias, v = v
                if not isinstance(alias, str):
                    raise TypeError(
                        f'{type(self).__name__}: constant alias should be a string, got "{alias}".'
                    )
                if alias == k:
                    raise TypeError(
                        f"{type(self).__name__}: it's useless to create an alias with the same "
                        "name as its associated constant."
                    )
                if alias in aliases:
                    raise TypeError(f'{type(self).__name__}: consant alias "{alias}" already used.')
                aliases[alias] = k
            if isinstance(v, bool):
                v = int(v)
            elif not isinstance(v, int | float):
                raise TypeError(
                    f'{type(self).__name__}: constant "{k}": expected integer or floating value, '
                    f'got "{type(v).__name__}".'
                )
            kwargs[k] = v
        if any(a in kwargs for a in aliases):
            raise TypeError(f"{type(self).__name__}: some aliases have same names as constants.")
        dict.__init__(self, **kwargs)
        object.__setattr__(self, "ctype", ctype)
        object.__setattr__(self, "cname", cname)
        object.__setattr__(self, "aliases", aliases)

    def fromalias(self, alias: str) -> Any:
        """The constant value of ``alias`` (or of the constant named ``alias``)."""
        return self[self.aliases[alias]] if alias in self.aliases else self[alias]

    def has_alias(self, alias: str) -> bool:
        """True if this enum has the alias ``alias``."""
        return alias in self.aliases

    def get_aliases(self) -> tuple[str, ...]:
        """The sorted aliases of this enum."""
        return tuple(sorted(self.aliases))

    def __repr__(self) -> str:
        names = {k: "" for k in self}
        for alias, k in self.aliases.items():
            names[k] = f"({alias})"
        inner = ", ".join(f"{k}{names[k]}:{self[k]}" for k in sorted(self))
        return f"{type(self).__name__}<{self.ctype}>({inner})"

    __str__ = __repr__

    def __getattr__(self, key: str) -> Any:
        if key in self:
            return self[key]
        raise AttributeError(f"{type(self).__name__} has no constant or attribute {key!r}")

    def __setattr__(self, key: str, value: Any) -> None:
        if key in self:
            raise AttributeError("constant values are immutable.")
        object.__setattr__(self, key, value)

    def __setitem__(self, key: str, value: Any) -> None:
        raise TypeError("constant values are immutable.")

    def __delitem__(self, key: str) -> None:
        raise TypeError("constant values are immutable.")

    def __hash__(self) -> int:  # type: ignore[override]
        consts = tuple((k, self[k]) for k in sorted(self))
        aliases = tuple((a, self.aliases[a]) for a in sorted(self.aliases))
        return hash((type(self), self.ctype, consts, aliases))

    def __eq__(self, other: object) -> bool:
        return (
            type(self) is type(other)
            and self.ctype == other.ctype  # type: ignore[attr-defined]
            and dict.__eq__(self, other)  # type: ignore[arg-type]
            and self.aliases == other.aliases  # type: ignore[attr-defined]
        )

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __reduce__(self) -> Any:
        return (_rebuild_enum, (type(self), dict(self), dict(self.aliases), self.ctype, self.cname))

    def filter(self, data: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        """``data`` if it is one of the constant values; not ``strict``, a bool is taken as
        an int and a string as an alias or a constant name. TypeError otherwise."""
        if not strict:
            if isinstance(data, bool):
                data = int(data)
            elif isinstance(data, str):
                try:
                    data = self.fromalias(data)
                except KeyError:
                    raise TypeError(f"{self!r}: unknown constant or alias {data!r}") from None
        if isinstance(data, bool | str) or data not in self.values():
            raise TypeError(f"{self!r}: {data!r} is not one of the enum's values")
        return data

    def values_eq(self, a: Any, b: Any) -> bool:
        return a == b

    def values_eq_approx(self, a: Any, b: Any) -> bool:
        return self.values_eq(a, b)


def _rebuild_enum(cls: type, values: dict, aliases: dict, ctype: str, cname: str) -> EnumType:
    inst = cls.__new__(cls)
    dict.update(inst, values)
    object.__setattr__(inst, "ctype", ctype)
    object.__setattr__(inst, "cname", cname)
    object.__setattr__(inst, "aliases", aliases)
    return inst


class EnumList(EnumType):
    """An enumeration whose constants are numbered in order: ``EnumList("A", ("B", "b"))``
    gives ``A=0``, ``B=1`` (with alias ``"b"``). ``ctype`` defaults to ``"int"``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if len(kwargs) > 2 or set(kwargs) - {"ctype", "cname"}:
            raise TypeError(
                f'{type(self).__name__}: expected 0 to 2 extra parameters ("ctype", "cname").'
            )
        ctype = kwargs.pop("ctype", "int")
        cname = kwargs.pop("cname", None)
        constants: dict[str, Any] = {}
        for rank, arg in enumerate(args):
            if isinstance(arg, list | tuple):
                if len(arg) != 2:
                    raise TypeError(
                        f"{type(self).__name__}: when using a tuple to define a constant, your "
                        "tuple should contain 2 values: constant name followed by constant alias."
                    )
                name, alias = arg
                if not isinstance(alias, str):
                    raise TypeError(
                        f'{type(self).__name__}: constant alias should be a string, got "{alias}".'
                    )
                value: Any = (alias, rank)
            else:
                name, value = arg, rank
            if not isinstance(name, str):
                raise TypeError(
                    f'{type(self).__name__}: constant name should be a string, got "{name}".'
                )
            if name in constants:
                raise TypeError(f'{type(self).__name__}: constant name already used ("{name}").')
            constants[name] = value
        extra = {"ctype": ctype} if cname is None else {"ctype": ctype, "cname": cname}
        super().__init__(**constants, **extra)


class CEnumType(EnumList):
    """Theano's enumeration of C-defined constants. In Python (opgraph's only side) its
    values are the constants' ranks, as for :class:`EnumList`; a C kernel that needs the C
    constants maps the ranks itself."""
